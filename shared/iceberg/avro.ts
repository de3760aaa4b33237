/**
 * Avro object container files (OCF, Avro 1.11 specification, "Object Container Files"), written
 * and read in memory: what Iceberg v2 keeps its manifests and manifest lists in. A writer of
 * tidemark's own, not the `avsc` package (docs/decisions/0023-avro-for-iceberg-manifests.md: avsc
 * drops the `field-id` / `element-id` attributes Iceberg readers need from the header schema it
 * writes, refuses longs past 2^53, which Iceberg snapshot ids are, and costs 15-20 ms of import
 * at a Lambda's cold start).
 *
 * Owns: the binary encoding of every Avro type (null, boolean, int, long, float, double, bytes,
 * string, record, enum, array, map, union, fixed; named types and references to them), the
 * container (header, blocks, sync markers) and its codecs: `null` and `deflate` written and read,
 * `snappy` and `zstandard` (where Node's zlib has zstd) read, for manifests other writers made.
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
import zlib from 'node:zlib';

/** An Avro schema as JSON: a type name, a union (array) or a complex type (object). */
export type AvroSchema =
  | string
  | readonly AvroSchema[]
  | { readonly type: AvroSchema; readonly [attr: string]: unknown };

/** A decoded Avro value (see the module comment for each type's representation). */
export type AvroValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | readonly AvroValue[]
  | ReadonlyMap<string, AvroValue>
  | { readonly [field: string]: AvroValue };

/** The block codecs tidemark writes (Iceberg's default for manifests is `deflate`, "gzip"). */
export type AvroCodec = 'null' | 'deflate';

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

/** A malformed Avro file, an unsupported codec, or a value that does not fit its schema. */
export class AvroError extends Error {
  override name = 'AvroError';
}

const MAGIC = [0x4f, 0x62, 0x6a, 0x01]; // "Obj" 1
const SYNC_SIZE = 16;
const DEFAULT_BLOCK_BYTES = 64 * 1024;
const SCHEMA_KEY = 'avro.schema';
const CODEC_KEY = 'avro.codec';
const INT_MIN = -(2 ** 31);
const INT_MAX = 2 ** 31 - 1;
const LONG_MIN = -(2n ** 63n);
const LONG_MAX = 2n ** 63n - 1n;

// ---- schemas, compiled

type Node =
  | { readonly kind: 'null' | 'boolean' | 'int' | 'long' | 'float' | 'double' | 'bytes' | 'string' }
  | RecordNode
  | { readonly kind: 'enum'; readonly name: string; readonly symbols: readonly string[] }
  | { readonly kind: 'array'; readonly items: Node }
  | { readonly kind: 'map'; readonly values: Node }
  | { readonly kind: 'union'; readonly branches: readonly Node[] }
  | { readonly kind: 'fixed'; readonly name: string; readonly size: number };

interface RecordNode {
  readonly kind: 'record';
  readonly name: string;
  /** Filled after the node is registered, so a record may refer to itself. */
  fields: {
    readonly name: string;
    readonly type: Node;
    readonly default?: unknown;
    readonly hasDefault: boolean;
  }[];
}

const PRIMITIVES = new Set(['null', 'boolean', 'int', 'long', 'float', 'double', 'bytes', 'string']);
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Compiles a schema: named types registered by full name, references resolved. */
function compile(schema: AvroSchema): Node {
  const named = new Map<string, Node>();

  const fullName = (name: string, namespace: string | undefined): string => {
    if (name.includes('.')) return name;
    return namespace ? `${namespace}.${name}` : name;
  };

  const define = (
    s: { readonly [attr: string]: unknown },
    namespace: string | undefined,
  ): { full: string; ns: string | undefined } => {
    const name = s.name;
    if (typeof name !== 'string' || name === '')
      throw new AvroError(`a ${String(s.type)} schema has no name`);
    for (const part of name.split('.')) {
      if (!NAME.test(part)) throw new AvroError(`Avro name ${JSON.stringify(name)} is not valid`);
    }
    const ns = name.includes('.')
      ? name.slice(0, name.lastIndexOf('.'))
      : typeof s.namespace === 'string' && s.namespace !== ''
        ? s.namespace
        : namespace;
    const full = fullName(name, ns);
    if (named.has(full) || PRIMITIVES.has(full)) throw new AvroError(`Avro type ${full} is defined twice`);
    return { full, ns };
  };

  const walk = (s: AvroSchema, namespace: string | undefined): Node => {
    if (typeof s === 'string') {
      if (PRIMITIVES.has(s)) return { kind: s as 'null' };
      const ref = named.get(fullName(s, namespace)) ?? named.get(s);
      if (!ref) throw new AvroError(`Avro schema refers to unknown type ${JSON.stringify(s)}`);
      return ref;
    }
    if (Array.isArray(s)) {
      const branches = s.map((b) => walk(b, namespace));
      for (const b of branches)
        if (b.kind === 'union') throw new AvroError('an Avro union directly inside a union');
      return { kind: 'union', branches };
    }
    if (typeof s !== 'object' || s === null) throw new AvroError(`not an Avro schema: ${JSON.stringify(s)}`);
    const o = s as { readonly type: AvroSchema; readonly [attr: string]: unknown };
    switch (o.type) {
      case 'record':
      case 'error': {
        const { full, ns } = define(o, namespace);
        const node: RecordNode = { kind: 'record', name: full, fields: [] };
        named.set(full, node);
        if (!Array.isArray(o.fields)) throw new AvroError(`Avro record ${full} has no fields array`);
        const seen = new Set<string>();
        for (const f of o.fields as { name?: unknown; type?: AvroSchema; default?: unknown }[]) {
          if (typeof f?.name !== 'string' || !NAME.test(f.name))
            throw new AvroError(`Avro record ${full} has a field without a valid name`);
          if (seen.has(f.name)) throw new AvroError(`Avro record ${full} has two fields named ${f.name}`);
          seen.add(f.name);
          if (f.type === undefined) throw new AvroError(`field ${full}.${f.name} has no type`);
          node.fields.push({
            name: f.name,
            type: walk(f.type, ns),
            default: f.default,
            hasDefault: Object.hasOwn(f, 'default'),
          });
        }
        return node;
      }
      case 'enum': {
        const { full } = define(o, namespace);
        const symbols = o.symbols;
        if (!Array.isArray(symbols) || symbols.some((x) => typeof x !== 'string'))
          throw new AvroError(`Avro enum ${full} has no symbols array`);
        const node = { kind: 'enum' as const, name: full, symbols: symbols as string[] };
        named.set(full, node);
        return node;
      }
      case 'fixed': {
        const { full } = define(o, namespace);
        const size = o.size;
        if (typeof size !== 'number' || !Number.isInteger(size) || size < 0)
          throw new AvroError(`Avro fixed ${full} has no valid size`);
        const node = { kind: 'fixed' as const, name: full, size };
        named.set(full, node);
        return node;
      }
      case 'array':
        if (o.items === undefined) throw new AvroError('an Avro array schema has no items');
        return { kind: 'array', items: walk(o.items as AvroSchema, namespace) };
      case 'map':
        if (o.values === undefined) throw new AvroError('an Avro map schema has no values');
        return { kind: 'map', values: walk(o.values as AvroSchema, namespace) };
      default:
        // A primitive with attributes ({"type": "long", "logicalType": ...}) or a reference.
        return walk(o.type, namespace);
    }
  };

  return walk(schema, undefined);
}

// ---- encoding

/** A growable byte buffer. */
class Out {
  buf = new Uint8Array(1024);
  view = new DataView(this.buf.buffer);
  at = 0;

  room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.at + n));
    next.set(this.buf.subarray(0, this.at));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  byte(b: number): void {
    this.room(1);
    this.buf[this.at++] = b;
  }
  bytes(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.at);
    this.at += b.length;
  }
  /** A zigzag varint of a long (a number within the safe range, or a bigint). */
  long(v: number | bigint): void {
    if (typeof v === 'number' && v >= INT_MIN && v <= INT_MAX) {
      // 32-bit fast path: zigzag in unsigned 32-bit arithmetic.
      let z = ((v << 1) ^ (v >> 31)) >>> 0;
      this.room(5);
      while (z >= 0x80) {
        this.buf[this.at++] = (z & 0x7f) | 0x80;
        z >>>= 7;
      }
      this.buf[this.at++] = z;
      return;
    }
    const x = BigInt(v);
    let z = x >= 0n ? x << 1n : (-x << 1n) - 1n;
    this.room(10);
    while (z >= 0x80n) {
      this.buf[this.at++] = Number(z & 0x7fn) | 0x80;
      z >>= 7n;
    }
    this.buf[this.at++] = Number(z);
  }
  result(): Uint8Array {
    return this.buf.slice(0, this.at);
  }
}

const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder('utf-8', { fatal: true });

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'undefined';
  if (v instanceof Uint8Array) return `${v.length} bytes`;
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${JSON.stringify(v)}`;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return (
    typeof v === 'object' &&
    v !== null &&
    !Array.isArray(v) &&
    !(v instanceof Uint8Array) &&
    !(v instanceof Map)
  );
}

/** Whether `v` can be written as `node` (the union branch choice; shallow for complex types). */
function fits(node: Node, v: unknown): boolean {
  switch (node.kind) {
    case 'null':
      return v === null || v === undefined;
    case 'boolean':
      return typeof v === 'boolean';
    case 'int':
      return typeof v === 'number' && Number.isInteger(v) && v >= INT_MIN && v <= INT_MAX;
    case 'long':
      return (
        (typeof v === 'number' && Number.isSafeInteger(v)) ||
        (typeof v === 'bigint' && v >= LONG_MIN && v <= LONG_MAX)
      );
    case 'float':
    case 'double':
      return typeof v === 'number';
    case 'string':
      return typeof v === 'string';
    case 'bytes':
      return v instanceof Uint8Array;
    case 'fixed':
      return v instanceof Uint8Array && v.length === node.size;
    case 'enum':
      return typeof v === 'string' && node.symbols.includes(v);
    case 'array':
      return Array.isArray(v);
    case 'map':
      return v instanceof Map || isPlainObject(v);
    case 'record':
      return isPlainObject(v);
    case 'union':
      return node.branches.some((b) => fits(b, v));
  }
}

/** The value a field's JSON `default` stands for (Avro: a union's default is of its first branch). */
function defaultValue(node: Node, json: unknown, path: string): unknown {
  const t = node.kind === 'union' ? node.branches[0] : node;
  if (!t) throw new AvroError(`${path}: a union without branches has no default`);
  switch (t.kind) {
    case 'bytes':
    case 'fixed': {
      // JSON defaults of bytes are strings whose code points 0-255 are the bytes.
      if (typeof json !== 'string') throw new AvroError(`${path}: default of bytes is not a string`);
      return Uint8Array.from(json, (c) => c.charCodeAt(0) & 0xff);
    }
    case 'long':
      return typeof json === 'number' ? BigInt(json) : json;
    case 'array':
      return Array.isArray(json) ? json.map((x, i) => defaultValue(t.items, x, `${path}[${i}]`)) : json;
    case 'map':
      return isPlainObject(json)
        ? new Map(Object.entries(json).map(([k, x]) => [k, defaultValue(t.values, x, `${path}.${k}`)]))
        : json;
    case 'record': {
      if (!isPlainObject(json)) return json;
      const out: Record<string, unknown> = {};
      for (const f of t.fields) {
        if (Object.hasOwn(json, f.name))
          setField(out, f.name, defaultValue(f.type, json[f.name], `${path}.${f.name}`));
      }
      return out;
    }
    default:
      return json;
  }
}

function setField(target: Record<string, unknown>, name: string, value: unknown): void {
  if (name === '__proto__') Object.defineProperty(target, name, { value, enumerable: true, writable: true });
  else target[name] = value;
}

function write(out: Out, node: Node, v: unknown, path: string): void {
  switch (node.kind) {
    case 'null':
      if (v !== null && v !== undefined) throw mismatch(path, 'null', v);
      return;
    case 'boolean':
      if (typeof v !== 'boolean') throw mismatch(path, 'a boolean', v);
      out.byte(v ? 1 : 0);
      return;
    case 'int':
      if (!fits(node, v)) throw mismatch(path, 'an int (32-bit integer)', v);
      out.long(v as number);
      return;
    case 'long':
      if (!fits(node, v)) throw mismatch(path, 'a long (a safe integer number or a 64-bit bigint)', v);
      out.long(v as number | bigint);
      return;
    case 'float':
      if (typeof v !== 'number') throw mismatch(path, 'a float', v);
      out.room(4);
      out.view.setFloat32(out.at, v, true);
      out.at += 4;
      return;
    case 'double':
      if (typeof v !== 'number') throw mismatch(path, 'a double', v);
      out.room(8);
      out.view.setFloat64(out.at, v, true);
      out.at += 8;
      return;
    case 'string': {
      if (typeof v !== 'string') throw mismatch(path, 'a string', v);
      const b = utf8.encode(v);
      out.long(b.length);
      out.bytes(b);
      return;
    }
    case 'bytes':
      if (!(v instanceof Uint8Array)) throw mismatch(path, 'bytes (Uint8Array)', v);
      out.long(v.length);
      out.bytes(v);
      return;
    case 'fixed':
      if (!(v instanceof Uint8Array) || v.length !== node.size) throw mismatch(path, `${node.size} bytes`, v);
      out.bytes(v);
      return;
    case 'enum': {
      const i = typeof v === 'string' ? node.symbols.indexOf(v) : -1;
      if (i < 0) throw mismatch(path, `one of ${node.symbols.join(', ')}`, v);
      out.long(i);
      return;
    }
    case 'array': {
      if (!Array.isArray(v)) throw mismatch(path, 'an array', v);
      if (v.length > 0) {
        out.long(v.length);
        for (let i = 0; i < v.length; i++) write(out, node.items, v[i], `${path}[${i}]`);
      }
      out.long(0);
      return;
    }
    case 'map': {
      const entries = v instanceof Map ? [...v.entries()] : isPlainObject(v) ? Object.entries(v) : undefined;
      if (!entries) throw mismatch(path, 'a map (Map or object)', v);
      if (entries.length > 0) {
        out.long(entries.length);
        for (const [k, x] of entries) {
          if (typeof k !== 'string') throw mismatch(`${path} key`, 'a string', k);
          write(out, { kind: 'string' }, k, path);
          write(out, node.values, x, `${path}.${k}`);
        }
      }
      out.long(0);
      return;
    }
    case 'union': {
      const i = node.branches.findIndex((b) => fits(b, v));
      if (i < 0) throw mismatch(path, `a value of one of the union's ${node.branches.length} branches`, v);
      out.long(i);
      write(out, node.branches[i]!, v, path);
      return;
    }
    case 'record': {
      if (!isPlainObject(v)) throw mismatch(path, `a record ${node.name}`, v);
      for (const f of node.fields) {
        const p = path === '' ? f.name : `${path}.${f.name}`;
        let x = Object.hasOwn(v, f.name) ? v[f.name] : undefined;
        if (x === undefined && f.hasDefault) x = defaultValue(f.type, f.default, p);
        write(out, f.type, x, p);
      }
      return;
    }
  }
}

function mismatch(path: string, expected: string, got: unknown): AvroError {
  return new AvroError(`${path || 'record'}: expected ${expected}, got ${describe(got)}`);
}

// ---- decoding

class In {
  /** A plain Uint8Array view (a Buffer's `slice` would share memory and stay a Buffer). */
  readonly buf: Uint8Array;
  readonly view: DataView;
  readonly end: number;
  at = 0;
  constructor(bytes: Uint8Array) {
    this.buf = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    this.end = bytes.length;
  }
  need(n: number): void {
    if (n < 0 || this.at + n > this.end) throw new AvroError('Avro data ends inside a value');
  }
  byte(): number {
    this.need(1);
    return this.buf[this.at++]!;
  }
  /** A zigzag varint: a bigint (any 64-bit value). */
  long(): bigint {
    // Up to 7 bytes (49 bits) in double arithmetic, the rest in bigint.
    let lo = 0;
    let shift = 0;
    let b: number;
    do {
      b = this.byte();
      lo += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while (b & 0x80 && shift < 49);
    let z = BigInt(lo);
    let bigShift = 49n;
    while (b & 0x80) {
      if (bigShift > 63n) throw new AvroError('an Avro long is longer than 10 bytes');
      b = this.byte();
      z |= BigInt(b & 0x7f) << bigShift;
      bigShift += 7n;
    }
    return z & 1n ? -(z >> 1n) - 1n : z >> 1n;
  }
  /** A zigzag varint that must fit `number` safely (lengths, counts, ints). */
  small(): number {
    const v = this.long();
    if (v < BigInt(Number.MIN_SAFE_INTEGER) || v > BigInt(Number.MAX_SAFE_INTEGER))
      throw new AvroError(`an Avro length or int of ${v} is out of range`);
    return Number(v);
  }
  take(n: number): Uint8Array {
    this.need(n);
    const out = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }
}

function read(input: In, node: Node): AvroValue {
  switch (node.kind) {
    case 'null':
      return null;
    case 'boolean': {
      const b = input.byte();
      if (b > 1) throw new AvroError(`an Avro boolean holds byte ${b}`);
      return b === 1;
    }
    case 'int': {
      const v = input.small();
      if (v < INT_MIN || v > INT_MAX) throw new AvroError(`an Avro int holds ${v}`);
      return v;
    }
    case 'long':
      return input.long();
    case 'float': {
      input.need(4);
      const v = input.view.getFloat32(input.at, true);
      input.at += 4;
      return v;
    }
    case 'double': {
      input.need(8);
      const v = input.view.getFloat64(input.at, true);
      input.at += 8;
      return v;
    }
    case 'string':
      try {
        return utf8Strict.decode(input.take(input.small()));
      } catch (e) {
        if (e instanceof AvroError) throw e;
        throw new AvroError('an Avro string is not valid UTF-8');
      }
    case 'bytes':
      return new Uint8Array(input.take(input.small()));
    case 'fixed':
      return new Uint8Array(input.take(node.size));
    case 'enum': {
      const i = input.small();
      const s = node.symbols[i];
      if (s === undefined) throw new AvroError(`Avro enum ${node.name} has no symbol ${i}`);
      return s;
    }
    case 'array': {
      const out: AvroValue[] = [];
      for (let n = blockCount(input); n !== 0; n = blockCount(input)) {
        for (let i = 0; i < n; i++) out.push(read(input, node.items));
      }
      return out;
    }
    case 'map': {
      const out = new Map<string, AvroValue>();
      for (let n = blockCount(input); n !== 0; n = blockCount(input)) {
        for (let i = 0; i < n; i++) {
          const k = read(input, { kind: 'string' }) as string;
          out.set(k, read(input, node.values));
        }
      }
      return out;
    }
    case 'union': {
      const i = input.small();
      const b = node.branches[i];
      if (!b) throw new AvroError(`an Avro union has no branch ${i}`);
      return read(input, b);
    }
    case 'record': {
      const out: Record<string, AvroValue> = {};
      for (const f of node.fields) setField(out, f.name, read(input, f.type));
      return out;
    }
  }
}

/** The item count of the next array/map block (a negative count is followed by its byte size). */
function blockCount(input: In): number {
  const n = input.small();
  if (n >= 0) return n;
  input.small();
  return -n;
}

// ---- the container

/** Compiles `schema` and checks it can be written: throws AvroError otherwise. */
export function checkAvroSchema(schema: AvroSchema): void {
  compile(schema);
}

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
  const node = compile(schema);
  const codec = options.codec ?? 'deflate';
  if (codec !== 'null' && codec !== 'deflate')
    throw new AvroError(`Avro codec ${String(codec)} is not written`);
  const sync = options.syncMarker ?? randomBytes(SYNC_SIZE);
  if (sync.length !== SYNC_SIZE) throw new AvroError(`an Avro sync marker is ${SYNC_SIZE} bytes`);
  const blockBytes = options.blockBytes ?? DEFAULT_BLOCK_BYTES;

  const out = new Out();
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
    write(out, { kind: 'string' }, k, k);
    out.long(v.length);
    out.bytes(v);
  }
  out.long(0);
  out.bytes(sync);

  const block = new Out();
  let count = 0;
  const flush = () => {
    if (count === 0) return;
    const data = block.buf.subarray(0, block.at);
    const body = codec === 'deflate' ? zlib.deflateRawSync(data) : data;
    out.long(count);
    out.long(body.length);
    out.bytes(body);
    out.bytes(sync);
    block.at = 0;
    count = 0;
  };
  for (let i = 0; i < records.length; i++) {
    write(block, node, records[i], '');
    count++;
    if (block.at >= blockBytes) flush();
  }
  flush();
  return out.result();
}

/** Reads an Avro object container file: its writer schema, codec, metadata and every record. */
export function readAvroFile(bytes: Uint8Array): AvroFile {
  const input = new In(bytes);
  if (bytes.length < MAGIC.length + SYNC_SIZE || MAGIC.some((b, i) => bytes[i] !== b))
    throw new AvroError('not an Avro object container file (no Obj1 magic)');
  input.at = MAGIC.length;
  const header = new Map<string, Uint8Array>();
  for (let n = blockCount(input); n !== 0; n = blockCount(input)) {
    for (let i = 0; i < n; i++) {
      const k = read(input, { kind: 'string' }) as string;
      header.set(k, read(input, { kind: 'bytes' }) as Uint8Array);
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
  const node = compile(schema);
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
    const blockInput = new In(data);
    for (let i = 0; i < count; i++) records.push(read(blockInput, node));
    if (blockInput.at !== data.length) throw new AvroError('an Avro block holds bytes past its records');
  }
  return { schema, codec, metadata, records };
}

function decompressorOf(codec: string): (b: Uint8Array) => Uint8Array {
  switch (codec) {
    case 'null':
      return (b) => b;
    case 'deflate':
      return (b) => zlib.inflateRawSync(b);
    case 'snappy':
      return snappyBlock;
    case 'zstandard': {
      const z = (zlib as unknown as { zstdDecompressSync?: (b: Uint8Array) => Buffer }).zstdDecompressSync;
      if (z) return (b) => z(b);
      throw new AvroError(
        'this Avro file is zstandard-compressed and this Node has no zstd (Node >= 22.15 has)',
      );
    }
    default:
      throw new AvroError(`Avro codec ${codec} is not supported (null, deflate, snappy, zstandard are)`);
  }
}

/** An Avro snappy block: raw snappy data, then the CRC-32 (big-endian) of the uncompressed bytes. */
function snappyBlock(b: Uint8Array): Uint8Array {
  if (b.length < 4) throw new AvroError('an Avro snappy block is shorter than its checksum');
  const data = snappyDecompress(b.subarray(0, b.length - 4));
  const crc32 = (zlib as unknown as { crc32?: (d: Uint8Array) => number }).crc32;
  if (crc32) {
    const want = new DataView(b.buffer, b.byteOffset + b.length - 4, 4).getUint32(0, false);
    if (crc32(data) >>> 0 !== want) throw new AvroError('an Avro snappy block fails its CRC-32');
  }
  return data;
}

/** Decompresses raw snappy (the format's literal and copy elements; no framing). */
function snappyDecompress(src: Uint8Array): Uint8Array {
  const input = new In(src);
  let length = 0;
  for (let shift = 0; ; shift += 7) {
    const b = input.byte();
    length += (b & 0x7f) * 2 ** shift;
    if (!(b & 0x80)) break;
    if (shift > 28) throw new AvroError('a snappy length is too long');
  }
  const out = new Uint8Array(length);
  let at = 0;
  while (input.at < src.length) {
    const tag = input.byte();
    const type = tag & 3;
    if (type === 0) {
      let n = tag >> 2;
      if (n >= 60) {
        const extra = n - 59;
        n = 0;
        for (let i = 0; i < extra; i++) n |= input.byte() << (8 * i);
        n >>>= 0;
      }
      n += 1;
      if (at + n > length) throw new AvroError('snappy data overruns its length');
      out.set(input.take(n), at);
      at += n;
      continue;
    }
    let n: number;
    let offset: number;
    if (type === 1) {
      n = ((tag >> 2) & 7) + 4;
      offset = ((tag >> 5) << 8) | input.byte();
    } else if (type === 2) {
      n = (tag >> 2) + 1;
      offset = input.byte() | (input.byte() << 8);
    } else {
      n = (tag >> 2) + 1;
      offset = (input.byte() | (input.byte() << 8) | (input.byte() << 16) | (input.byte() << 24)) >>> 0;
    }
    if (offset === 0 || offset > at || at + n > length) throw new AvroError('snappy data has a bad copy');
    for (let i = 0; i < n; i++, at++) out[at] = out[at - offset]!;
  }
  if (at !== length) throw new AvroError('snappy data is shorter than its length');
  return out;
}
