/**
 * Avro object container files (OCF, Avro 1.11 specification, "Object Container Files"), written
 * and read in memory: what Iceberg v2 keeps its manifests and manifest lists in. A writer of
 * tidemark's own, not the `avsc` package (docs/decisions/0023-avro-for-iceberg-manifests.md: avsc
 * drops the `field-id` / `element-id` attributes Iceberg readers need from the header schema it
 * writes, refuses longs past 2^53, which Iceberg snapshot ids are, and costs 15-20 ms of import
 * at a Lambda's cold start).
 *
 * Owns: the API (`writeAvroFile`, `readAvroFile`) and the container: the header (magic, the
 * `avro.schema` and `avro.codec` keys, user metadata), blocks of records and their sync markers.
 * Every Avro type is supported (null, boolean, int, long, float, double, bytes, string, record,
 * enum, array, map, union, fixed; named types and references to them): the schema types and their
 * compilation are ./avro-schema.ts, the binary encoding ./avro-encode.ts and ./avro-decode.ts, the
 * block codecs ./avro-codecs.ts (`null` and `deflate` written and read, `snappy` and `zstandard`
 * read, for manifests other writers made).
 *
 * Invariants: the header's `avro.schema` is the caller's schema serialized as given (every
 * attribute kept: Iceberg's `field-id`, `element-id`, `key-id`, `value-id`, logical types); a
 * file is decoded by its own writer schema only (no reader-schema resolution: manifest.ts picks
 * fields by their `field-id`). Values: `long` is a `bigint` when read (exact for any 64-bit value)
 * and a `number` or `bigint` when written; `bytes` and `fixed` are `Uint8Array`; a record is a
 * plain object by field name; a map a `Map` (a plain object is accepted on write); a union's value
 * is the value of its branch, unwrapped (the branch written is the first one the value fits).
 * Pure: no I/O. Errors are `AvroError` (a malformed file or a value that does not fit its schema);
 * the caller that reads a table's files turns one into the operator's error.
 */
import { randomBytes } from 'node:crypto';
import { type AvroCodec, compressBlock, decompressorOf, isWrittenCodec } from './avro-codecs.js';
import { AvroIn, blockCount, readValue } from './avro-decode.js';
import { AvroOut, writeValue } from './avro-encode.js';
import { AvroError, type AvroSchema, type AvroValue, compileSchema, setField } from './avro-schema.js';

export interface AvroWriteOptions {
  /** Block compression; `deflate` by default, as Iceberg writes manifests. */
  readonly codec?: AvroCodec;
  /** User key/values of the header (UTF-8); keys starting with `avro.` are the format's own. */
  readonly metadata?: Readonly<Record<string, string>>;
  /** The 16-byte sync marker; random by default (a fixed one makes the output reproducible). */
  readonly syncMarker?: Uint8Array;
  /** A block closes once its encoded records reach this many bytes (default 64 KiB). */
  readonly blockBytes?: number;
}

export interface AvroFile {
  /** The writer schema, parsed from the header's `avro.schema`. */
  readonly schema: AvroSchema;
  /** The header's `avro.codec` (`null` when absent). */
  readonly codec: string;
  /** The header's other key/values, decoded as UTF-8. */
  readonly metadata: Readonly<Record<string, string>>;
  readonly records: AvroValue[];
}

const MAGIC = [0x4f, 0x62, 0x6a, 0x01]; // "Obj" 1
const SYNC_SIZE = 16;
const DEFAULT_BLOCK_BYTES = 64 * 1024;
const SCHEMA_KEY = 'avro.schema';
const CODEC_KEY = 'avro.codec';

const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder('utf-8', { fatal: true });

/**
 * Writes `records` as one Avro object container file of `schema` (JSON-serialized into the
 * header exactly as given). Throws AvroError when a record does not fit the schema, naming the
 * field's path.
 */
export function writeAvroFile(
  schema: AvroSchema,
  records: readonly unknown[],
  options: AvroWriteOptions = {},
): Uint8Array {
  const node = compileSchema(schema);
  const codec = options.codec ?? 'deflate';
  if (!isWrittenCodec(codec)) throw new AvroError(`Avro codec ${String(codec)} is not written`);
  const sync = options.syncMarker ?? randomBytes(SYNC_SIZE);
  if (sync.length !== SYNC_SIZE) throw new AvroError(`an Avro sync marker is ${SYNC_SIZE} bytes`);
  const blockBytes = options.blockBytes ?? DEFAULT_BLOCK_BYTES;

  const out = new AvroOut();
  out.bytes(Uint8Array.from(MAGIC));
  const meta: [string, Uint8Array][] = [
    [SCHEMA_KEY, utf8.encode(JSON.stringify(schema))],
    [CODEC_KEY, utf8.encode(codec)],
  ];
  for (const [k, v] of Object.entries(options.metadata ?? {})) {
    if (k.startsWith('avro.')) throw new AvroError(`Avro metadata key ${k} is reserved by the format`);
    meta.push([k, utf8.encode(v)]);
  }
  out.long(meta.length);
  for (const [k, v] of meta) {
    writeValue(out, { kind: 'string' }, k, k);
    out.long(v.length);
    out.bytes(v);
  }
  out.long(0);
  out.bytes(sync);

  const block = new AvroOut();
  let count = 0;
  const flush = () => {
    if (count === 0) return;
    const data = block.buf.subarray(0, block.at);
    const body = compressBlock(codec, data);
    out.long(count);
    out.long(body.length);
    out.bytes(body);
    out.bytes(sync);
    block.at = 0;
    count = 0;
  };
  for (let i = 0; i < records.length; i++) {
    writeValue(block, node, records[i], '');
    count++;
    if (block.at >= blockBytes) flush();
  }
  flush();
  return out.result();
}

/** Reads an Avro object container file: its writer schema, codec, metadata and every record. */
export function readAvroFile(bytes: Uint8Array): AvroFile {
  const input = new AvroIn(bytes);
  if (bytes.length < MAGIC.length + SYNC_SIZE || MAGIC.some((b, i) => bytes[i] !== b))
    throw new AvroError('not an Avro object container file (no Obj1 magic)');
  input.at = MAGIC.length;
  const header = new Map<string, Uint8Array>();
  for (let n = blockCount(input); n !== 0; n = blockCount(input)) {
    for (let i = 0; i < n; i++) {
      const k = readValue(input, { kind: 'string' }) as string;
      header.set(k, readValue(input, { kind: 'bytes' }) as Uint8Array);
    }
  }
  const sync = new Uint8Array(input.take(SYNC_SIZE));
  const schemaBytes = header.get(SCHEMA_KEY);
  if (!schemaBytes) throw new AvroError('the Avro header has no avro.schema');
  let schema: AvroSchema;
  try {
    schema = JSON.parse(utf8Strict.decode(schemaBytes)) as AvroSchema;
  } catch {
    throw new AvroError('the Avro header avro.schema is not JSON');
  }
  const node = compileSchema(schema);
  const codec = header.has(CODEC_KEY) ? new TextDecoder().decode(header.get(CODEC_KEY)) : 'null';
  const decompress = decompressorOf(codec);
  const metadata: Record<string, string> = {};
  for (const [k, v] of header) {
    if (k !== SCHEMA_KEY && k !== CODEC_KEY) setField(metadata, k, new TextDecoder().decode(v));
  }

  const records: AvroValue[] = [];
  while (input.at < bytes.length) {
    const count = input.small();
    const size = input.small();
    if (count < 0 || size < 0) throw new AvroError('an Avro block has a negative count or size');
    const data = decompress(input.take(size));
    const marker = input.take(SYNC_SIZE);
    for (let i = 0; i < SYNC_SIZE; i++) {
      if (marker[i] !== sync[i]) throw new AvroError('an Avro block does not end with the file sync marker');
    }
    const blockInput = new AvroIn(data);
    for (let i = 0; i < count; i++) records.push(readValue(blockInput, node));
    if (blockInput.at !== data.length) throw new AvroError('an Avro block holds bytes past its records');
  }
  return { schema, codec, metadata, records };
}
