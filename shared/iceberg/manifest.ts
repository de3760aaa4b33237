/**
 * Iceberg v2 manifests and manifest lists (spec "Manifests" and "Manifest Lists"), written and
 * read back: a manifest lists data (or delete) files with their partition tuple and metrics, a
 * manifest list lists a snapshot's manifests with their counts and partition summaries. Both are
 * Avro files (./avro.ts) whose schema carries the field ids the spec assigns: manifest entry
 * 0-4, data_file 100-145 (map keys and values 117-130 and 138-139, list elements 133 and 136),
 * manifest_file 500-519, field_summary 509-511 and 518; readers (pyiceberg, Spark, Athena) find
 * fields by these ids, so the names are the spec's and the ids are never invented.
 *
 * Owns: the Avro schemas of both files (the partition struct derived from the partition spec and
 * the table schema), the header key/values the spec requires (manifest: `schema`, `schema-id`,
 * `partition-spec`, `partition-spec-id`, `format-version`, `content`; manifest list:
 * `snapshot-id`, `parent-snapshot-id`, `sequence-number`, `format-version`), the counts and
 * partition summaries a manifest list needs, and sequence-number and snapshot-id inheritance on
 * read. Reading is by field id, so manifests other writers made (Spark compaction, pyiceberg)
 * read as well as ours; what recovery and manifest merging need.
 *
 * Values: snapshot ids are `bigint` (other writers draw them from 63 bits); sequence numbers,
 * counts and sizes are `number` (a read value past 2^53 is refused). A partition tuple is keyed by
 * partition field name, each value in its Avro form (int/date `number`, long/timestamp `bigint`,
 * a decimal the big-endian two's complement `Uint8Array` of its precision's fixed size, a uuid
 * its 16 bytes, ...); an unpartitioned table's is `{}`. An added entry written
 * before its commit has no snapshot id and no sequence numbers: it inherits them from the
 * manifest list (spec "Sequence Number Inheritance"), so a manifest is written once and reused
 * by every commit attempt (docs/decisions/0024-iceberg-commits.md). Pure: no I/O.
 */
import { type AvroCodec, type AvroSchema, type AvroValue, readAvroFile, writeAvroFile } from './avro.js';
import {
  compareValues,
  fromTwosComplementBE,
  type PrimitiveType,
  primitiveOf,
  type SingleValue,
  serializeValue,
} from './single-value.js';
import type { IcebergField, IcebergPartitionSpec, IcebergSchema, IcebergType } from './spec.js';

/** Manifest entry `status` (field 0). */
export const EntryStatus = { EXISTING: 0, ADDED: 1, DELETED: 2 } as const;
export type EntryStatus = (typeof EntryStatus)[keyof typeof EntryStatus];

/** data_file `content` (field 134). */
export const FileContent = { DATA: 0, POSITION_DELETES: 1, EQUALITY_DELETES: 2 } as const;
export type FileContent = (typeof FileContent)[keyof typeof FileContent];

/** manifest_file `content` (field 517) and the manifest header's `content`. */
export const ManifestContent = { DATA: 0, DELETES: 1 } as const;
export type ManifestContent = (typeof ManifestContent)[keyof typeof ManifestContent];

/** A data or delete file as a manifest lists it (the `data_file` struct, field 2). */
export interface IcebergDataFile {
  readonly content: FileContent;
  /** Full URI with scheme (`s3://bucket/...`, `file:///...`). */
  readonly file_path: string;
  /** `PARQUET`, `AVRO`, `ORC`, `PUFFIN` (read case-insensitively by every reader). */
  readonly file_format: string;
  /** The partition tuple by partition field name, values in their Avro form; `{}` unpartitioned. */
  readonly partition: Readonly<Record<string, AvroValue>>;
  readonly record_count: number;
  readonly file_size_in_bytes: number;
  /** Field id -> bytes on disk of the column (all its chunks). */
  readonly column_sizes?: ReadonlyMap<number, number>;
  /** Field id -> values, nulls and NaNs included. */
  readonly value_counts?: ReadonlyMap<number, number>;
  readonly null_value_counts?: ReadonlyMap<number, number>;
  readonly nan_value_counts?: ReadonlyMap<number, number>;
  /** Field id -> a lower bound in single-value serialization (./single-value.ts). */
  readonly lower_bounds?: ReadonlyMap<number, Uint8Array>;
  readonly upper_bounds?: ReadonlyMap<number, Uint8Array>;
  readonly key_metadata?: Uint8Array;
  /** Row-group start offsets, ascending. */
  readonly split_offsets?: readonly number[];
  readonly equality_ids?: readonly number[];
  readonly sort_order_id?: number;
  readonly referenced_data_file?: string;
}

/** One entry of a manifest (the `manifest_entry` struct). */
export interface IcebergManifestEntry {
  readonly status: EntryStatus;
  /** Absent: inherited from the manifest list's `added_snapshot_id`. */
  readonly snapshot_id?: bigint;
  /** Data sequence number; absent on an ADDED entry: inherited from the manifest list. */
  readonly sequence_number?: number;
  /** File sequence number; absent on an ADDED entry: inherited from the manifest list. */
  readonly file_sequence_number?: number;
  readonly data_file: IcebergDataFile;
}

/** One partition field's summary over a manifest (`field_summary`, element 508). */
export interface IcebergFieldSummary {
  readonly contains_null: boolean;
  readonly contains_nan?: boolean;
  readonly lower_bound?: Uint8Array;
  readonly upper_bound?: Uint8Array;
}

/** One manifest as a manifest list lists it (the `manifest_file` struct). */
export interface IcebergManifestFile {
  readonly manifest_path: string;
  readonly manifest_length: number;
  readonly partition_spec_id: number;
  readonly content: ManifestContent;
  readonly sequence_number: number;
  readonly min_sequence_number: number;
  readonly added_snapshot_id: bigint;
  readonly added_files_count: number;
  readonly existing_files_count: number;
  readonly deleted_files_count: number;
  readonly added_rows_count: number;
  readonly existing_rows_count: number;
  readonly deleted_rows_count: number;
  /** One per partition field of the manifest's spec, in spec order; `[]` unpartitioned. */
  readonly partitions?: readonly IcebergFieldSummary[];
  readonly key_metadata?: Uint8Array;
}

/** What a manifest is written with. */
export interface ManifestWrite {
  /** The table schema when the manifest is written (its JSON goes into the header). */
  readonly schema: IcebergSchema;
  readonly spec: IcebergPartitionSpec;
  /** `data` (default) or `deletes`: a manifest lists one kind of file only. */
  readonly content?: 'data' | 'deletes';
  readonly entries: readonly IcebergManifestEntry[];
  readonly codec?: AvroCodec;
  /** A fixed Avro sync marker (reproducible bytes, for tests). */
  readonly syncMarker?: Uint8Array;
}

/**
 * What a manifest list needs of a manifest that only its bytes tell: counts by status, partition
 * summaries, and the smallest explicit data sequence number of its live entries.
 */
export interface ManifestSummary {
  readonly partition_spec_id: number;
  readonly content: ManifestContent;
  readonly added_files_count: number;
  readonly existing_files_count: number;
  readonly deleted_files_count: number;
  readonly added_rows_count: number;
  readonly existing_rows_count: number;
  readonly deleted_rows_count: number;
  readonly partitions: readonly IcebergFieldSummary[];
  /** The smallest sequence number live entries carry; undefined when none carries one. */
  readonly min_explicit_sequence_number: number | undefined;
  /** Whether a live entry inherits its sequence number (an ADDED entry written without one). */
  readonly inherits_sequence_number: boolean;
}

/** A manifest as read: its header and its entries (nothing inherited yet). */
export interface ManifestRead {
  readonly schema: IcebergSchema;
  readonly schemaId: number;
  readonly spec: IcebergPartitionSpec;
  readonly formatVersion: number;
  readonly content: 'data' | 'deletes';
  readonly entries: IcebergManifestEntry[];
}

/** A manifest list as read. */
export interface ManifestListRead {
  readonly snapshotId: bigint | undefined;
  readonly parentSnapshotId: bigint | undefined;
  readonly sequenceNumber: number | undefined;
  readonly formatVersion: number;
  readonly manifests: IcebergManifestFile[];
}

// ---- Avro schemas with the spec's field ids

const optional = (name: string, id: number, type: AvroSchema) => ({
  name,
  type: ['null', type],
  default: null,
  'field-id': id,
});
const required = (name: string, id: number, type: AvroSchema) => ({ name, type, 'field-id': id });
/** A map with int keys: an array of key/value records with logical type `map` (spec Appendix A). */
const intMap = (keyId: number, valueId: number, value: AvroSchema): AvroSchema => ({
  type: 'array',
  logicalType: 'map',
  items: {
    type: 'record',
    name: `k${keyId}_v${valueId}`,
    fields: [
      { name: 'key', type: 'int', 'field-id': keyId },
      { name: 'value', type: value, 'field-id': valueId },
    ],
  },
});

// data_file field ids.
const F = {
  content: 134,
  file_path: 100,
  file_format: 101,
  partition: 102,
  record_count: 103,
  file_size_in_bytes: 104,
  column_sizes: 108,
  value_counts: 109,
  null_value_counts: 110,
  nan_value_counts: 137,
  lower_bounds: 125,
  upper_bounds: 128,
  key_metadata: 131,
  split_offsets: 132,
  equality_ids: 135,
  sort_order_id: 140,
  referenced_data_file: 143,
} as const;
// manifest_entry field ids.
const E = { status: 0, snapshot_id: 1, data_file: 2, sequence_number: 3, file_sequence_number: 4 } as const;
// manifest_file field ids.
const M = {
  manifest_path: 500,
  manifest_length: 501,
  partition_spec_id: 502,
  added_snapshot_id: 503,
  added_files_count: 504,
  existing_files_count: 505,
  deleted_files_count: 506,
  partitions: 507,
  added_rows_count: 512,
  existing_rows_count: 513,
  deleted_rows_count: 514,
  sequence_number: 515,
  min_sequence_number: 516,
  content: 517,
  key_metadata: 519,
} as const;
const PARTITIONS_ELEMENT = 508;
const S = { contains_null: 509, lower_bound: 510, upper_bound: 511, contains_nan: 518 } as const;

/** The Avro schema of a v2 manifest entry whose partition struct is `partition` (record r102). */
function manifestEntrySchema(partition: AvroSchema): AvroSchema {
  return {
    type: 'record',
    name: 'manifest_entry',
    fields: [
      required('status', E.status, 'int'),
      optional('snapshot_id', E.snapshot_id, 'long'),
      optional('sequence_number', E.sequence_number, 'long'),
      optional('file_sequence_number', E.file_sequence_number, 'long'),
      required('data_file', E.data_file, {
        type: 'record',
        name: 'r2',
        fields: [
          required('content', F.content, 'int'),
          required('file_path', F.file_path, 'string'),
          required('file_format', F.file_format, 'string'),
          required('partition', F.partition, partition),
          required('record_count', F.record_count, 'long'),
          required('file_size_in_bytes', F.file_size_in_bytes, 'long'),
          optional('column_sizes', F.column_sizes, intMap(117, 118, 'long')),
          optional('value_counts', F.value_counts, intMap(119, 120, 'long')),
          optional('null_value_counts', F.null_value_counts, intMap(121, 122, 'long')),
          optional('nan_value_counts', F.nan_value_counts, intMap(138, 139, 'long')),
          optional('lower_bounds', F.lower_bounds, intMap(126, 127, 'bytes')),
          optional('upper_bounds', F.upper_bounds, intMap(129, 130, 'bytes')),
          optional('key_metadata', F.key_metadata, 'bytes'),
          optional('split_offsets', F.split_offsets, { type: 'array', items: 'long', 'element-id': 133 }),
          optional('equality_ids', F.equality_ids, { type: 'array', items: 'int', 'element-id': 136 }),
          optional('sort_order_id', F.sort_order_id, 'int'),
          optional('referenced_data_file', F.referenced_data_file, 'string'),
        ],
      }),
    ],
  };
}

/** The Avro schema of a v2 manifest list. */
const MANIFEST_FILE_SCHEMA: AvroSchema = {
  type: 'record',
  name: 'manifest_file',
  fields: [
    required('manifest_path', M.manifest_path, 'string'),
    required('manifest_length', M.manifest_length, 'long'),
    required('partition_spec_id', M.partition_spec_id, 'int'),
    required('content', M.content, 'int'),
    required('sequence_number', M.sequence_number, 'long'),
    required('min_sequence_number', M.min_sequence_number, 'long'),
    required('added_snapshot_id', M.added_snapshot_id, 'long'),
    required('added_files_count', M.added_files_count, 'int'),
    required('existing_files_count', M.existing_files_count, 'int'),
    required('deleted_files_count', M.deleted_files_count, 'int'),
    required('added_rows_count', M.added_rows_count, 'long'),
    required('existing_rows_count', M.existing_rows_count, 'long'),
    required('deleted_rows_count', M.deleted_rows_count, 'long'),
    optional('partitions', M.partitions, {
      type: 'array',
      'element-id': PARTITIONS_ELEMENT,
      items: {
        type: 'record',
        name: `r${PARTITIONS_ELEMENT}`,
        fields: [
          required('contains_null', S.contains_null, 'boolean'),
          optional('contains_nan', S.contains_nan, 'boolean'),
          optional('lower_bound', S.lower_bound, 'bytes'),
          optional('upper_bound', S.upper_bound, 'bytes'),
        ],
      },
    }),
    optional('key_metadata', M.key_metadata, 'bytes'),
  ],
};

// ---- partition struct

/** A partition field with the type its transform produces. */
interface PartitionColumn {
  readonly id: number;
  readonly name: string;
  /** The Avro field name: the name, made a valid Avro name where it is not one. */
  readonly avroName: string;
  readonly type: PrimitiveType | undefined;
  readonly avro: AvroSchema;
}

/** The type a partition transform of a `source` column produces (spec "Partition Transforms"). */
function transformResult(transform: string, source: IcebergType | undefined): PrimitiveType | undefined {
  if (
    /^bucket\[\d+\]$/.test(transform) ||
    transform === 'year' ||
    transform === 'month' ||
    transform === 'hour'
  )
    return { kind: 'int' };
  if (transform === 'day') return { kind: 'date' };
  if (transform === 'identity' || transform === 'void' || /^truncate\[\d+\]$/.test(transform))
    return source === undefined ? undefined : primitiveOf(source);
  return undefined;
}

/** Java's and pyiceberg's rule: invalid characters become `_x<HEX>`, a leading digit gets `_`. */
function avroName(name: string): string {
  if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) return name;
  let out = '';
  for (const [i, ch] of [...name].entries()) {
    const ok = /[A-Za-z_]/.test(ch) || (i > 0 && /[0-9]/.test(ch));
    if (ok) out += ch;
    else if (i === 0 && /[0-9]/.test(ch)) out += `_${ch}`;
    else out += `_x${ch.codePointAt(0)!.toString(16).toUpperCase()}`;
  }
  return out;
}

/** Bytes a decimal of `precision` digits needs as a two's complement fixed (spec Appendix A). */
function decimalBytes(precision: number): number {
  let n = 1;
  while (10n ** BigInt(precision) - 1n >= 1n << BigInt(8 * n - 1)) n++;
  return n;
}

/** The Avro schema of a primitive type; a named type already defined is referred to by name. */
function avroPrimitive(t: PrimitiveType, defined: Set<string>): AvroSchema {
  const named = (name: string, schema: AvroSchema): AvroSchema => {
    if (defined.has(name)) return name;
    defined.add(name);
    return schema;
  };
  switch (t.kind) {
    case 'binary':
      return 'bytes';
    case 'date':
      return { type: 'int', logicalType: 'date' };
    case 'time':
      return { type: 'long', logicalType: 'time-micros' };
    case 'timestamp':
      return { type: 'long', logicalType: 'timestamp-micros', 'adjust-to-utc': false };
    case 'timestamptz':
      return { type: 'long', logicalType: 'timestamp-micros', 'adjust-to-utc': true };
    case 'uuid':
      return named('uuid_fixed', { type: 'fixed', name: 'uuid_fixed', size: 16, logicalType: 'uuid' });
    case 'fixed':
      return named(`fixed_${t.length}`, { type: 'fixed', name: `fixed_${t.length}`, size: t.length });
    case 'decimal': {
      const name = `decimal_${t.precision}_${t.scale}`;
      return named(name, {
        type: 'fixed',
        name,
        size: decimalBytes(t.precision),
        logicalType: 'decimal',
        precision: t.precision,
        scale: t.scale,
      });
    }
    default:
      return t.kind;
  }
}

function findField(fields: readonly IcebergField[], id: number): IcebergField | undefined {
  for (const f of fields) {
    if (f.id === id) return f;
    const t = f.type;
    if (typeof t === 'object' && t.type === 'struct') {
      const inner = findField(t.fields, id);
      if (inner) return inner;
    }
  }
  return undefined;
}

function partitionColumns(spec: IcebergPartitionSpec, schema: IcebergSchema): PartitionColumn[] {
  const defined = new Set<string>();
  return spec.fields.map((p) => {
    const type = transformResult(p.transform, findField(schema.fields, p['source-id'])?.type);
    if (!type)
      throw new Error(`partition field ${p.name}: transform ${p.transform} of its source has no known type`);
    return {
      id: p['field-id'],
      name: p.name,
      avroName: avroName(p.name),
      type,
      avro: avroPrimitive(type, defined),
    };
  });
}

function partitionSchema(columns: readonly PartitionColumn[]): AvroSchema {
  return {
    type: 'record',
    name: 'r102',
    fields: columns.map((c) => ({
      name: c.avroName,
      type: ['null', c.avro],
      default: null,
      'field-id': c.id,
      ...(c.avroName !== c.name ? { 'iceberg-field-name': c.name } : {}),
    })),
  };
}

// ---- writing

const entries = (m: ReadonlyMap<number, unknown> | undefined) =>
  m === undefined ? null : [...m].map(([key, value]) => ({ key, value }));

function checkCount(what: string, v: number): number {
  if (!Number.isSafeInteger(v) || v < 0)
    throw new RangeError(`${what} must be a non-negative integer, got ${v}`);
  return v;
}

function entryRecord(e: IcebergManifestEntry, columns: readonly PartitionColumn[]): Record<string, unknown> {
  const f = e.data_file;
  const partition: Record<string, unknown> = {};
  for (const c of columns) partition[c.avroName] = f.partition[c.name] ?? null;
  return {
    status: e.status,
    snapshot_id: e.snapshot_id ?? null,
    sequence_number: e.sequence_number ?? null,
    file_sequence_number: e.file_sequence_number ?? null,
    data_file: {
      content: f.content,
      file_path: f.file_path,
      file_format: f.file_format,
      partition,
      record_count: checkCount('record_count', f.record_count),
      file_size_in_bytes: checkCount('file_size_in_bytes', f.file_size_in_bytes),
      column_sizes: entries(f.column_sizes),
      value_counts: entries(f.value_counts),
      null_value_counts: entries(f.null_value_counts),
      nan_value_counts: entries(f.nan_value_counts),
      lower_bounds: entries(f.lower_bounds),
      upper_bounds: entries(f.upper_bounds),
      key_metadata: f.key_metadata ?? null,
      split_offsets: f.split_offsets ?? null,
      equality_ids: f.equality_ids ?? null,
      sort_order_id: f.sort_order_id ?? null,
      referenced_data_file: f.referenced_data_file ?? null,
    },
  };
}

/** A partition value in its Avro form as a single value of its type (or undefined: no bound). */
function singleOf(t: PrimitiveType, v: AvroValue): SingleValue | undefined {
  if (t.kind === 'decimal')
    return v instanceof Uint8Array && v.length > 0 ? fromTwosComplementBE(v) : undefined;
  if (t.kind === 'long' || t.kind === 'time' || t.kind === 'timestamp' || t.kind === 'timestamptz')
    return typeof v === 'bigint' ? v : typeof v === 'number' ? BigInt(v) : undefined;
  if (typeof v === 'boolean' || typeof v === 'number' || typeof v === 'string' || v instanceof Uint8Array)
    return v;
  return undefined;
}

/** Per partition field: nulls, NaNs and bounds over every entry (as Java and pyiceberg summarize). */
function summarize(
  columns: readonly PartitionColumn[],
  all: readonly IcebergManifestEntry[],
): IcebergFieldSummary[] {
  return columns.map((c) => {
    let containsNull = false;
    let containsNan = false;
    let lo: SingleValue | undefined;
    let hi: SingleValue | undefined;
    const t = c.type;
    for (const e of all) {
      const v = e.data_file.partition[c.name];
      if (v === null || v === undefined) {
        containsNull = true;
        continue;
      }
      if (typeof v === 'number' && Number.isNaN(v)) {
        containsNan = true;
        continue;
      }
      const s = t ? singleOf(t, v) : undefined;
      if (!t || s === undefined) continue;
      if (lo === undefined || compareValues(t, s, lo) < 0) lo = s;
      if (hi === undefined || compareValues(t, s, hi) > 0) hi = s;
    }
    const isFloat = t?.kind === 'float' || t?.kind === 'double';
    return {
      contains_null: containsNull,
      contains_nan: isFloat ? containsNan : false,
      ...(t && lo !== undefined ? { lower_bound: serializeValue(t, lo) } : {}),
      ...(t && hi !== undefined ? { upper_bound: serializeValue(t, hi) } : {}),
    };
  });
}

/**
 * Writes one v2 manifest: the entries with the header the spec requires. Returns its bytes and
 * the summary a manifest list entry is built from (`manifestFileOf`). Throws when an entry's
 * content does not match the manifest's (`data`: content 0 only; `deletes`: 1 or 2).
 */
export function writeManifest(m: ManifestWrite): { bytes: Uint8Array; summary: ManifestSummary } {
  const content = m.content ?? 'data';
  const columns = partitionColumns(m.spec, m.schema);
  let minSeq: number | undefined;
  let inherits = false;
  const counts = [
    [0, 0],
    [0, 0],
    [0, 0],
  ]; // by status: [files, rows]
  for (const e of m.entries) {
    const fileContent = e.data_file.content;
    const c = counts[e.status];
    if (!c) throw new RangeError(`manifest entry status ${e.status} is not 0, 1 or 2`);
    if ((content === 'data') !== (fileContent === FileContent.DATA))
      throw new Error(
        `a ${content} manifest cannot list a file of content ${fileContent} (${e.data_file.file_path})`,
      );
    if (
      e.status !== EntryStatus.ADDED &&
      (e.sequence_number === undefined || e.file_sequence_number === undefined)
    )
      throw new Error(
        `an EXISTING or DELETED entry must carry its sequence numbers (spec: only ADDED entries inherit): ${e.data_file.file_path}`,
      );
    c[0]! += 1;
    c[1]! += e.data_file.record_count;
    if (e.status !== EntryStatus.DELETED) {
      if (e.sequence_number === undefined) inherits = true;
      else minSeq = minSeq === undefined ? e.sequence_number : Math.min(minSeq, e.sequence_number);
    }
  }
  const bytes = writeAvroFile(
    manifestEntrySchema(partitionSchema(columns)),
    m.entries.map((e) => entryRecord(e, columns)),
    {
      codec: m.codec ?? 'deflate',
      syncMarker: m.syncMarker,
      metadata: {
        schema: JSON.stringify(m.schema),
        'schema-id': String(m.schema['schema-id']),
        'partition-spec': JSON.stringify(m.spec.fields),
        'partition-spec-id': String(m.spec['spec-id']),
        'format-version': '2',
        content,
      },
    },
  );
  return {
    bytes,
    summary: {
      partition_spec_id: m.spec['spec-id'],
      content: content === 'data' ? ManifestContent.DATA : ManifestContent.DELETES,
      added_files_count: counts[1]![0]!,
      existing_files_count: counts[0]![0]!,
      deleted_files_count: counts[2]![0]!,
      added_rows_count: counts[1]![1]!,
      existing_rows_count: counts[0]![1]!,
      deleted_rows_count: counts[2]![1]!,
      partitions: summarize(columns, m.entries),
      min_explicit_sequence_number: minSeq,
      inherits_sequence_number: inherits,
    },
  };
}

/**
 * The manifest list entry of a manifest added by the snapshot `snapshotId` with sequence number
 * `sequenceNumber`: its inheriting entries take that number, so the manifest's minimum data
 * sequence number is the smaller of it and the entries' own.
 */
export function manifestFileOf(
  manifestPath: string,
  manifestLength: number,
  summary: ManifestSummary,
  snapshot: { readonly snapshotId: bigint; readonly sequenceNumber: number },
): IcebergManifestFile {
  const explicit = summary.min_explicit_sequence_number;
  const min =
    explicit === undefined
      ? snapshot.sequenceNumber
      : summary.inherits_sequence_number
        ? Math.min(explicit, snapshot.sequenceNumber)
        : explicit;
  return {
    manifest_path: manifestPath,
    manifest_length: checkCount('manifest_length', manifestLength),
    partition_spec_id: summary.partition_spec_id,
    content: summary.content,
    sequence_number: snapshot.sequenceNumber,
    min_sequence_number: min,
    added_snapshot_id: snapshot.snapshotId,
    added_files_count: summary.added_files_count,
    existing_files_count: summary.existing_files_count,
    deleted_files_count: summary.deleted_files_count,
    added_rows_count: summary.added_rows_count,
    existing_rows_count: summary.existing_rows_count,
    deleted_rows_count: summary.deleted_rows_count,
    partitions: summary.partitions,
  };
}

/** Writes a v2 manifest list: the snapshot's manifests, with the header readers expect. */
export function writeManifestList(list: {
  readonly snapshotId: bigint;
  readonly parentSnapshotId: bigint | undefined;
  readonly sequenceNumber: number;
  readonly manifests: readonly IcebergManifestFile[];
  readonly codec?: AvroCodec;
  readonly syncMarker?: Uint8Array;
}): Uint8Array {
  return writeAvroFile(
    MANIFEST_FILE_SCHEMA,
    list.manifests.map((m) => ({
      ...m,
      manifest_length: checkCount('manifest_length', m.manifest_length),
      partitions: m.partitions ?? null,
      key_metadata: m.key_metadata ?? null,
    })),
    {
      codec: list.codec ?? 'deflate',
      syncMarker: list.syncMarker,
      metadata: {
        'snapshot-id': String(list.snapshotId),
        'parent-snapshot-id': list.parentSnapshotId === undefined ? 'null' : String(list.parentSnapshotId),
        'sequence-number': String(list.sequenceNumber),
        'format-version': '2',
      },
    },
  );
}

// ---- reading, by field id

type Fields = Map<number, string>;

/** Field id -> field name of a record schema (the writer's names may differ; the ids do not). */
function fieldsOf(schema: unknown, what: string): Fields {
  const record = unwrapNull(schema);
  if (typeof record !== 'object' || record === null || (record as { type?: unknown }).type !== 'record')
    throw new Error(`${what} is not an Avro record`);
  const out: Fields = new Map();
  for (const f of (record as { fields: { name: string; 'field-id'?: unknown }[] }).fields) {
    if (typeof f['field-id'] === 'number') out.set(f['field-id'], f.name);
  }
  return out;
}

/** The non-null branch of an optional ([null, T]) schema, or the schema itself. */
function unwrapNull(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.find((b) => b !== 'null');
  return schema;
}

function fieldSchema(record: unknown, id: number): unknown {
  const r = unwrapNull(record) as { fields: { 'field-id'?: unknown; type: unknown }[] };
  return r.fields.find((f) => f['field-id'] === id)?.type;
}

type Rec = { readonly [name: string]: AvroValue };

function get(rec: Rec, fields: Fields, id: number): AvroValue | undefined {
  const name = fields.get(id);
  if (name === undefined) return undefined;
  const v = rec[name];
  return v === null ? undefined : v;
}

function toNumber(v: AvroValue | undefined, what: string): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') {
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER))
      throw new Error(`${what} is ${v}, past the integers a number holds exactly`);
    return Number(v);
  }
  throw new Error(`${what} is not a number`);
}

function need<T>(v: T | undefined, what: string): T {
  if (v === undefined) throw new Error(`${what} is missing (tidemark reads v2 manifests)`);
  return v;
}

function toBigint(v: AvroValue | undefined): bigint | undefined {
  if (v === undefined) return undefined;
  return typeof v === 'bigint' ? v : BigInt(v as number);
}

/** An int-keyed map as Iceberg writes it (array of key/value records) or an Avro map. */
function intMapOf<T>(v: AvroValue | undefined, value: (x: AvroValue) => T): Map<number, T> | undefined {
  if (v === undefined) return undefined;
  const out = new Map<number, T>();
  if (v instanceof Map) {
    for (const [k, x] of v) out.set(Number(k), value(x));
    return out;
  }
  for (const item of v as readonly Rec[]) {
    // The first field is the key, the second the value (spec Appendix A).
    const [k, x] = Object.values(item);
    out.set(Number(k), value(x as AvroValue));
  }
  return out;
}

function dataFileOf(rec: Rec, schema: unknown, spec: IcebergPartitionSpec): IcebergDataFile {
  const fields = fieldsOf(schema, 'data_file');
  const what = (n: string) => `data_file.${n}`;
  const partitionRec = (get(rec, fields, F.partition) ?? {}) as Rec;
  const partitionFields = fieldsOf(
    fieldSchema(schema, F.partition) ?? { type: 'record', fields: [] },
    'partition',
  );
  const partition: Record<string, AvroValue> = {};
  for (const [id, avroField] of partitionFields) {
    const name = spec.fields.find((p) => p['field-id'] === id)?.name ?? avroField;
    partition[name] = partitionRec[avroField] ?? null;
  }
  const num = (id: number, n: string) => toNumber(get(rec, fields, id), what(n));
  const counts = (id: number, n: string) => intMapOf(get(rec, fields, id), (x) => toNumber(x, what(n))!);
  const bytes = (id: number) => intMapOf(get(rec, fields, id), (x) => x as Uint8Array);
  const optionalOf = <K extends string, V>(k: K, v: V | undefined) =>
    v === undefined ? {} : ({ [k]: v } as { [P in K]: V });
  return {
    content: (num(F.content, 'content') ?? FileContent.DATA) as FileContent,
    file_path: need(get(rec, fields, F.file_path), what('file_path')) as string,
    file_format: need(get(rec, fields, F.file_format), what('file_format')) as string,
    partition,
    record_count: need(num(F.record_count, 'record_count'), what('record_count')),
    file_size_in_bytes: need(num(F.file_size_in_bytes, 'file_size_in_bytes'), what('file_size_in_bytes')),
    ...optionalOf('column_sizes', counts(F.column_sizes, 'column_sizes')),
    ...optionalOf('value_counts', counts(F.value_counts, 'value_counts')),
    ...optionalOf('null_value_counts', counts(F.null_value_counts, 'null_value_counts')),
    ...optionalOf('nan_value_counts', counts(F.nan_value_counts, 'nan_value_counts')),
    ...optionalOf('lower_bounds', bytes(F.lower_bounds)),
    ...optionalOf('upper_bounds', bytes(F.upper_bounds)),
    ...optionalOf('key_metadata', get(rec, fields, F.key_metadata) as Uint8Array | undefined),
    ...optionalOf(
      'split_offsets',
      (get(rec, fields, F.split_offsets) as AvroValue[] | undefined)?.map(
        (x) => toNumber(x, what('split_offsets'))!,
      ),
    ),
    ...optionalOf(
      'equality_ids',
      (get(rec, fields, F.equality_ids) as AvroValue[] | undefined)?.map(
        (x) => toNumber(x, what('equality_ids'))!,
      ),
    ),
    ...optionalOf('sort_order_id', num(F.sort_order_id, 'sort_order_id')),
    ...optionalOf('referenced_data_file', get(rec, fields, F.referenced_data_file) as string | undefined),
  };
}

function parseJson<T>(text: string | undefined, what: string): T {
  if (text === undefined) throw new Error(`the manifest header has no ${what}`);
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new Error(`the manifest header's ${what} is not JSON`);
  }
}

/** Reads a manifest (ours or another writer's): its header and entries, by field id. */
export function readManifest(bytes: Uint8Array): ManifestRead {
  const file = readAvroFile(bytes);
  const meta = file.metadata;
  const schema = parseJson<IcebergSchema>(meta.schema, 'schema');
  const specId = Number(meta['partition-spec-id'] ?? 0);
  const spec: IcebergPartitionSpec = {
    'spec-id': specId,
    fields: parseJson<IcebergPartitionSpec['fields']>(meta['partition-spec'], 'partition-spec'),
  };
  const entryFields = fieldsOf(file.schema, 'manifest_entry');
  const dataFileSchema = fieldSchema(file.schema, E.data_file);
  const out: IcebergManifestEntry[] = file.records.map((r) => {
    const rec = r as Rec;
    const snapshot = toBigint(get(rec, entryFields, E.snapshot_id));
    const seq = toNumber(get(rec, entryFields, E.sequence_number), 'sequence_number');
    const fileSeq = toNumber(get(rec, entryFields, E.file_sequence_number), 'file_sequence_number');
    return {
      status: need(toNumber(get(rec, entryFields, E.status), 'status'), 'status') as EntryStatus,
      ...(snapshot === undefined ? {} : { snapshot_id: snapshot }),
      ...(seq === undefined ? {} : { sequence_number: seq }),
      ...(fileSeq === undefined ? {} : { file_sequence_number: fileSeq }),
      data_file: dataFileOf(
        need(get(rec, entryFields, E.data_file), 'data_file') as Rec,
        dataFileSchema,
        spec,
      ),
    };
  });
  return {
    schema,
    schemaId: Number(meta['schema-id'] ?? schema['schema-id'] ?? 0),
    spec,
    formatVersion: Number(meta['format-version'] ?? 1),
    content: meta.content === 'deletes' ? 'deletes' : 'data',
    entries: out,
  };
}

/** Reads a manifest list (ours or another writer's), by field id. */
export function readManifestList(bytes: Uint8Array): ManifestListRead {
  const file = readAvroFile(bytes);
  const fields = fieldsOf(file.schema, 'manifest_file');
  const partitionsSchema = unwrapNull(fieldSchema(file.schema, M.partitions)) as
    | { items?: unknown }
    | undefined;
  const summaryFields: Fields = partitionsSchema?.items
    ? fieldsOf(partitionsSchema.items, 'field_summary')
    : new Map();
  const manifests = file.records.map((r): IcebergManifestFile => {
    const rec = r as Rec;
    const num = (id: number, n: string) => toNumber(get(rec, fields, id), `manifest_file.${n}`);
    const count = (id: number, n: string) => need(num(id, n), `manifest_file.${n}`);
    const partitions = get(rec, fields, M.partitions) as Rec[] | undefined;
    const keyMetadata = get(rec, fields, M.key_metadata) as Uint8Array | undefined;
    return {
      manifest_path: need(get(rec, fields, M.manifest_path), 'manifest_file.manifest_path') as string,
      manifest_length: count(M.manifest_length, 'manifest_length'),
      partition_spec_id: count(M.partition_spec_id, 'partition_spec_id'),
      content: (num(M.content, 'content') ?? ManifestContent.DATA) as ManifestContent,
      sequence_number: num(M.sequence_number, 'sequence_number') ?? 0,
      min_sequence_number: num(M.min_sequence_number, 'min_sequence_number') ?? 0,
      added_snapshot_id: need(
        toBigint(get(rec, fields, M.added_snapshot_id)),
        'manifest_file.added_snapshot_id',
      ),
      added_files_count: count(M.added_files_count, 'added_files_count'),
      existing_files_count: count(M.existing_files_count, 'existing_files_count'),
      deleted_files_count: count(M.deleted_files_count, 'deleted_files_count'),
      added_rows_count: count(M.added_rows_count, 'added_rows_count'),
      existing_rows_count: count(M.existing_rows_count, 'existing_rows_count'),
      deleted_rows_count: count(M.deleted_rows_count, 'deleted_rows_count'),
      ...(partitions === undefined
        ? {}
        : {
            partitions: partitions.map((p) => {
              const nan = get(p, summaryFields, S.contains_nan) as boolean | undefined;
              const lo = get(p, summaryFields, S.lower_bound) as Uint8Array | undefined;
              const hi = get(p, summaryFields, S.upper_bound) as Uint8Array | undefined;
              return {
                contains_null: need(
                  get(p, summaryFields, S.contains_null),
                  'field_summary.contains_null',
                ) as boolean,
                ...(nan === undefined ? {} : { contains_nan: nan }),
                ...(lo === undefined ? {} : { lower_bound: lo }),
                ...(hi === undefined ? {} : { upper_bound: hi }),
              };
            }),
          }),
      ...(keyMetadata === undefined ? {} : { key_metadata: keyMetadata }),
    };
  });
  const meta = file.metadata;
  const id = (s: string | undefined) => (s === undefined || s === 'null' ? undefined : BigInt(s));
  return {
    snapshotId: id(meta['snapshot-id']),
    parentSnapshotId: id(meta['parent-snapshot-id']),
    sequenceNumber: meta['sequence-number'] === undefined ? undefined : Number(meta['sequence-number']),
    formatVersion: Number(meta['format-version'] ?? 1),
    manifests,
  };
}

/**
 * `entry` with what it inherits from the manifest list entry of its manifest (spec "Sequence
 * Number Inheritance"): a missing snapshot id is the manifest's `added_snapshot_id`; missing
 * sequence numbers are the manifest's `sequence_number` when the entry is ADDED (or the
 * manifest predates sequence numbers). What merging writes back as EXISTING, and what recovery
 * compares.
 */
export function inheritFromManifest(
  entry: IcebergManifestEntry,
  manifest: IcebergManifestFile,
): IcebergManifestEntry {
  const inherit = entry.status === EntryStatus.ADDED || manifest.sequence_number === 0;
  return {
    ...entry,
    snapshot_id: entry.snapshot_id ?? manifest.added_snapshot_id,
    ...(entry.sequence_number === undefined && inherit ? { sequence_number: manifest.sequence_number } : {}),
    ...(entry.file_sequence_number === undefined && inherit
      ? { file_sequence_number: manifest.sequence_number }
      : {}),
  };
}

/**
 * The files a snapshot's manifests reference, live ones only (ADDED or EXISTING; a DELETED entry
 * is history), with inheritance applied: `manifests` pairs each manifest list entry with its
 * manifest's bytes.
 */
export function liveEntries(
  manifests: readonly { readonly manifest: IcebergManifestFile; readonly bytes: Uint8Array }[],
): IcebergManifestEntry[] {
  const out: IcebergManifestEntry[] = [];
  for (const { manifest, bytes } of manifests) {
    for (const e of readManifest(bytes).entries) {
      if (e.status !== EntryStatus.DELETED) out.push(inheritFromManifest(e, manifest));
    }
  }
  return out;
}
