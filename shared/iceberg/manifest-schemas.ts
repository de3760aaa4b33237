/**
 * The field ids of Iceberg v2 manifests and manifest lists (spec "Manifests", "Manifest Lists" and
 * Appendix A, "Avro"): the Avro schemas ./manifest.ts and ./manifest-list.ts write, carrying the ids
 * the spec assigns (manifest entry 0-4, data_file 100-145 with map keys and values 117-130 and
 * 138-139 and list elements 133 and 136, manifest_file 500-519, field_summary 509-511 and 518),
 * and the lookup of a field by id in the schema another writer wrote. Readers (pyiceberg, Spark,
 * Athena) find fields by these ids, so the names are the spec's and the ids are never invented.
 *
 * Owns: the schemas of a manifest entry and of a manifest list entry, the partition struct
 * (record r102) derived from a partition spec and the table schema (each field the type its
 * transform produces, its name made a valid Avro name as Java and pyiceberg make it), and the
 * value conversions both files share: counts written as non-negative safe integers, int-keyed maps
 * as key/value records, and on read a long past 2^53 refused. Pure.
 */
import type { AvroSchema, AvroValue } from './avro-schema.js';
import { type PrimitiveType, primitiveOf } from './single-value.js';
import type { IcebergField, IcebergPartitionSpec, IcebergSchema, IcebergType } from './spec.js';

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

/** The value an `intMap` field is written as: its key/value records, or null for no map. */
export const intMapRecords = (m: ReadonlyMap<number, unknown> | undefined) =>
  m === undefined ? null : [...m].map(([key, value]) => ({ key, value }));

/** A count or size as written: a non-negative safe integer, else RangeError. */
export function checkCount(what: string, v: number): number {
  if (!Number.isSafeInteger(v) || v < 0)
    throw new RangeError(`${what} must be a non-negative integer, got ${v}`);
  return v;
}

/** data_file field ids. */
export const DATA_FILE_ID = {
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
/** manifest_entry field ids. */
export const ENTRY_ID = {
  status: 0,
  snapshot_id: 1,
  data_file: 2,
  sequence_number: 3,
  file_sequence_number: 4,
} as const;
/** manifest_file field ids. */
export const MANIFEST_FILE_ID = {
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
/** field_summary field ids. */
export const FIELD_SUMMARY_ID = {
  contains_null: 509,
  lower_bound: 510,
  upper_bound: 511,
  contains_nan: 518,
} as const;

/** The Avro schema of a v2 manifest entry whose partition struct is `partition` (record r102). */
export function manifestEntrySchema(partition: AvroSchema): AvroSchema {
  return {
    type: 'record',
    name: 'manifest_entry',
    fields: [
      required('status', ENTRY_ID.status, 'int'),
      optional('snapshot_id', ENTRY_ID.snapshot_id, 'long'),
      optional('sequence_number', ENTRY_ID.sequence_number, 'long'),
      optional('file_sequence_number', ENTRY_ID.file_sequence_number, 'long'),
      required('data_file', ENTRY_ID.data_file, {
        type: 'record',
        name: 'r2',
        fields: [
          required('content', DATA_FILE_ID.content, 'int'),
          required('file_path', DATA_FILE_ID.file_path, 'string'),
          required('file_format', DATA_FILE_ID.file_format, 'string'),
          required('partition', DATA_FILE_ID.partition, partition),
          required('record_count', DATA_FILE_ID.record_count, 'long'),
          required('file_size_in_bytes', DATA_FILE_ID.file_size_in_bytes, 'long'),
          optional('column_sizes', DATA_FILE_ID.column_sizes, intMap(117, 118, 'long')),
          optional('value_counts', DATA_FILE_ID.value_counts, intMap(119, 120, 'long')),
          optional('null_value_counts', DATA_FILE_ID.null_value_counts, intMap(121, 122, 'long')),
          optional('nan_value_counts', DATA_FILE_ID.nan_value_counts, intMap(138, 139, 'long')),
          optional('lower_bounds', DATA_FILE_ID.lower_bounds, intMap(126, 127, 'bytes')),
          optional('upper_bounds', DATA_FILE_ID.upper_bounds, intMap(129, 130, 'bytes')),
          optional('key_metadata', DATA_FILE_ID.key_metadata, 'bytes'),
          optional('split_offsets', DATA_FILE_ID.split_offsets, {
            type: 'array',
            items: 'long',
            'element-id': 133,
          }),
          optional('equality_ids', DATA_FILE_ID.equality_ids, {
            type: 'array',
            items: 'int',
            'element-id': 136,
          }),
          optional('sort_order_id', DATA_FILE_ID.sort_order_id, 'int'),
          optional('referenced_data_file', DATA_FILE_ID.referenced_data_file, 'string'),
        ],
      }),
    ],
  };
}

/** The Avro schema of a v2 manifest list. */
export const MANIFEST_FILE_SCHEMA: AvroSchema = {
  type: 'record',
  name: 'manifest_file',
  fields: [
    required('manifest_path', MANIFEST_FILE_ID.manifest_path, 'string'),
    required('manifest_length', MANIFEST_FILE_ID.manifest_length, 'long'),
    required('partition_spec_id', MANIFEST_FILE_ID.partition_spec_id, 'int'),
    required('content', MANIFEST_FILE_ID.content, 'int'),
    required('sequence_number', MANIFEST_FILE_ID.sequence_number, 'long'),
    required('min_sequence_number', MANIFEST_FILE_ID.min_sequence_number, 'long'),
    required('added_snapshot_id', MANIFEST_FILE_ID.added_snapshot_id, 'long'),
    required('added_files_count', MANIFEST_FILE_ID.added_files_count, 'int'),
    required('existing_files_count', MANIFEST_FILE_ID.existing_files_count, 'int'),
    required('deleted_files_count', MANIFEST_FILE_ID.deleted_files_count, 'int'),
    required('added_rows_count', MANIFEST_FILE_ID.added_rows_count, 'long'),
    required('existing_rows_count', MANIFEST_FILE_ID.existing_rows_count, 'long'),
    required('deleted_rows_count', MANIFEST_FILE_ID.deleted_rows_count, 'long'),
    optional('partitions', MANIFEST_FILE_ID.partitions, {
      type: 'array',
      'element-id': PARTITIONS_ELEMENT,
      items: {
        type: 'record',
        name: `r${PARTITIONS_ELEMENT}`,
        fields: [
          required('contains_null', FIELD_SUMMARY_ID.contains_null, 'boolean'),
          optional('contains_nan', FIELD_SUMMARY_ID.contains_nan, 'boolean'),
          optional('lower_bound', FIELD_SUMMARY_ID.lower_bound, 'bytes'),
          optional('upper_bound', FIELD_SUMMARY_ID.upper_bound, 'bytes'),
        ],
      },
    }),
    optional('key_metadata', MANIFEST_FILE_ID.key_metadata, 'bytes'),
  ],
};

// ---- partition struct

/** A partition field with the type its transform produces. */
export interface PartitionColumn {
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
export function decimalBytes(precision: number): number {
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

/**
 * The partition fields of `spec` over `schema`, each with its result type and Avro form; throws
 * for a transform whose result type is unknown.
 */
export function partitionColumns(spec: IcebergPartitionSpec, schema: IcebergSchema): PartitionColumn[] {
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

/** The manifest's partition struct (record r102): one optional field per partition column. */
export function partitionSchema(columns: readonly PartitionColumn[]): AvroSchema {
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

// ---- reading, by field id

/** Field id -> the writer's field name. */
export type FieldNames = Map<number, string>;

/** Field id -> field name of a record schema (the writer's names may differ; the ids do not). */
export function fieldsOf(schema: unknown, what: string): FieldNames {
  const record = unwrapNull(schema);
  if (typeof record !== 'object' || record === null || (record as { type?: unknown }).type !== 'record')
    throw new Error(`${what} is not an Avro record`);
  const out: FieldNames = new Map();
  for (const f of (record as { fields: { name: string; 'field-id'?: unknown }[] }).fields) {
    if (typeof f['field-id'] === 'number') out.set(f['field-id'], f.name);
  }
  return out;
}

/** The non-null branch of an optional ([null, T]) schema, or the schema itself. */
export function unwrapNull(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.find((b) => b !== 'null');
  return schema;
}

/** The type of the field with id `id` in a record schema (or an optional one); undefined when absent. */
export function fieldSchema(record: unknown, id: number): unknown {
  const r = unwrapNull(record) as { fields: { 'field-id'?: unknown; type: unknown }[] };
  return r.fields.find((f) => f['field-id'] === id)?.type;
}

/** A decoded Avro record. */
export type AvroRecord = { readonly [name: string]: AvroValue };

/** The value of the field with id `id`; undefined where the writer has no such field or wrote null. */
export function valueById(rec: AvroRecord, fields: FieldNames, id: number): AvroValue | undefined {
  const name = fields.get(id);
  if (name === undefined) return undefined;
  const v = rec[name];
  return v === null ? undefined : v;
}

/** A read int or long as a number; a long past 2^53 is refused, naming `what`. */
export function toNumber(v: AvroValue | undefined, what: string): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') {
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER))
      throw new Error(`${what} is ${v}, past the integers a number holds exactly`);
    return Number(v);
  }
  throw new Error(`${what} is not a number`);
}

/** `{ [key]: value }`, or `{}` where `value` is undefined: an optional field of a record read. */
export function optionalField<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return value === undefined ? {} : ({ [key]: value } as { [P in K]: V });
}

/** `v`, which a v2 file must have; throws naming `what` when it is absent. */
export function requireField<T>(v: T | undefined, what: string): T {
  if (v === undefined) throw new Error(`${what} is missing (tidemark reads v2 manifests)`);
  return v;
}

/** A read long (or int) as a bigint. */
export function toBigint(v: AvroValue | undefined): bigint | undefined {
  if (v === undefined) return undefined;
  return typeof v === 'bigint' ? v : BigInt(v as number);
}

/** An int-keyed map as Iceberg writes it (array of key/value records) or an Avro map. */
export function intMapOf<T>(
  v: AvroValue | undefined,
  value: (x: AvroValue) => T,
): Map<number, T> | undefined {
  if (v === undefined) return undefined;
  const out = new Map<number, T>();
  if (v instanceof Map) {
    for (const [k, x] of v) out.set(Number(k), value(x));
    return out;
  }
  for (const item of v as readonly AvroRecord[]) {
    // The first field is the key, the second the value (spec Appendix A).
    const [k, x] = Object.values(item);
    out.set(Number(k), value(x as AvroValue));
  }
  return out;
}
