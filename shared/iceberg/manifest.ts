/**
 * Iceberg v2 manifests (spec "Manifests"), written and read back: a manifest lists data (or
 * delete) files with their partition tuple and metrics. An Avro file (./avro.ts) whose schema
 * carries the field ids the spec assigns (./manifest-schemas.ts); the manifest list that points to
 * manifests is ./manifest-list.ts.
 *
 * Owns: `IcebergDataFile` and `IcebergManifestEntry`, the header key/values the spec requires
 * (`schema`, `schema-id`, `partition-spec`, `partition-spec-id`, `format-version`, `content`), the
 * counts and partition summaries a manifest list entry is built from (returned with the bytes),
 * and sequence-number and snapshot-id inheritance on read. Reading is by field id, so manifests
 * other writers made (Spark compaction, pyiceberg) read as well as ours; what recovery and
 * manifest merging need.
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
import { readAvroFile, writeAvroFile } from './avro.js';
import type { AvroCodec } from './avro-codecs.js';
import type { AvroValue } from './avro-schema.js';
import {
  type IcebergFieldSummary,
  type IcebergManifestFile,
  ManifestContent,
  type ManifestSummary,
} from './manifest-list.js';
import {
  type AvroRecord,
  checkCount,
  DATA_FILE_ID,
  ENTRY_ID,
  fieldSchema,
  fieldsOf,
  intMapOf,
  intMapRecords,
  manifestEntrySchema,
  optionalField,
  type PartitionColumn,
  partitionColumns,
  partitionSchema,
  requireField,
  toBigint,
  toNumber,
  valueById,
} from './manifest-schemas.js';
import {
  compareValues,
  fromTwosComplementBE,
  type PrimitiveType,
  type SingleValue,
  serializeValue,
} from './single-value.js';
import type { IcebergPartitionSpec, IcebergSchema } from './spec.js';

/** Manifest entry `status` (field 0). */
export const EntryStatus = { EXISTING: 0, ADDED: 1, DELETED: 2 } as const;
export type EntryStatus = (typeof EntryStatus)[keyof typeof EntryStatus];

/** data_file `content` (field 134). */
export const FileContent = { DATA: 0, POSITION_DELETES: 1, EQUALITY_DELETES: 2 } as const;
export type FileContent = (typeof FileContent)[keyof typeof FileContent];

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

/** A manifest as read: its header and its entries (nothing inherited yet). */
export interface ManifestRead {
  readonly schema: IcebergSchema;
  readonly schemaId: number;
  readonly spec: IcebergPartitionSpec;
  readonly formatVersion: number;
  readonly content: 'data' | 'deletes';
  readonly entries: IcebergManifestEntry[];
}

// ---- writing

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
      column_sizes: intMapRecords(f.column_sizes),
      value_counts: intMapRecords(f.value_counts),
      null_value_counts: intMapRecords(f.null_value_counts),
      nan_value_counts: intMapRecords(f.nan_value_counts),
      lower_bounds: intMapRecords(f.lower_bounds),
      upper_bounds: intMapRecords(f.upper_bounds),
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

// ---- reading, by field id

function dataFileOf(rec: AvroRecord, schema: unknown, spec: IcebergPartitionSpec): IcebergDataFile {
  const fields = fieldsOf(schema, 'data_file');
  const what = (n: string) => `data_file.${n}`;
  const value = (n: keyof typeof DATA_FILE_ID) => valueById(rec, fields, DATA_FILE_ID[n]);
  const num = (n: keyof typeof DATA_FILE_ID) => toNumber(value(n), what(n));
  const numbers = (n: keyof typeof DATA_FILE_ID) =>
    (value(n) as AvroValue[] | undefined)?.map((x) => toNumber(x, what(n))!);
  const counts = (n: keyof typeof DATA_FILE_ID) => intMapOf(value(n), (x) => toNumber(x, what(n))!);
  const bytes = (n: keyof typeof DATA_FILE_ID) => intMapOf(value(n), (x) => x as Uint8Array);
  const partitionRec = (value('partition') ?? {}) as AvroRecord;
  const partitionFields = fieldsOf(
    fieldSchema(schema, DATA_FILE_ID.partition) ?? { type: 'record', fields: [] },
    'partition',
  );
  const partition: Record<string, AvroValue> = {};
  for (const [id, avroField] of partitionFields) {
    const name = spec.fields.find((p) => p['field-id'] === id)?.name ?? avroField;
    partition[name] = partitionRec[avroField] ?? null;
  }
  return {
    content: (num('content') ?? FileContent.DATA) as FileContent,
    file_path: requireField(value('file_path'), what('file_path')) as string,
    file_format: requireField(value('file_format'), what('file_format')) as string,
    partition,
    record_count: requireField(num('record_count'), what('record_count')),
    file_size_in_bytes: requireField(num('file_size_in_bytes'), what('file_size_in_bytes')),
    ...optionalField('column_sizes', counts('column_sizes')),
    ...optionalField('value_counts', counts('value_counts')),
    ...optionalField('null_value_counts', counts('null_value_counts')),
    ...optionalField('nan_value_counts', counts('nan_value_counts')),
    ...optionalField('lower_bounds', bytes('lower_bounds')),
    ...optionalField('upper_bounds', bytes('upper_bounds')),
    ...optionalField('key_metadata', value('key_metadata') as Uint8Array | undefined),
    ...optionalField('split_offsets', numbers('split_offsets')),
    ...optionalField('equality_ids', numbers('equality_ids')),
    ...optionalField('sort_order_id', num('sort_order_id')),
    ...optionalField('referenced_data_file', value('referenced_data_file') as string | undefined),
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
  const dataFileSchema = fieldSchema(file.schema, ENTRY_ID.data_file);
  const out: IcebergManifestEntry[] = file.records.map((r) => {
    const rec = r as AvroRecord;
    const value = (n: keyof typeof ENTRY_ID) => valueById(rec, entryFields, ENTRY_ID[n]);
    return {
      status: requireField(toNumber(value('status'), 'status'), 'status') as EntryStatus,
      ...optionalField('snapshot_id', toBigint(value('snapshot_id'))),
      ...optionalField('sequence_number', toNumber(value('sequence_number'), 'sequence_number')),
      ...optionalField(
        'file_sequence_number',
        toNumber(value('file_sequence_number'), 'file_sequence_number'),
      ),
      data_file: dataFileOf(
        requireField(value('data_file'), 'data_file') as AvroRecord,
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

// ---- inheritance from the manifest list

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
