/**
 * The Apache Iceberg table format v2, as TypeScript types: the JSON of a table's metadata file
 * (schemas, partition specs, sort orders, snapshots, the logs) and the types of its columns,
 * named as the specification names them (https://iceberg.apache.org/spec/, "Table Metadata" and
 * "Schemas and Data Types"), so a field here reads as the spec's field of the same name.
 *
 * Owns: the shapes only (and the list of the simple primitive types' names). Building and changing metadata is ./metadata.ts, the lake schema's
 * mapping onto these types ./schema.ts, manifests ./manifest.ts, catalogs ./catalog.ts. tidemark
 * writes format version 2 only (Athena reads v2; `timestamp_ns` and default values are v3).
 */

/** The primitive types whose JSON name is the whole type (no precision, scale or length). */
export const SIMPLE_PRIMITIVES = [
  'boolean',
  'int',
  'long',
  'float',
  'double',
  'date',
  'time',
  'timestamp',
  'timestamptz',
  'string',
  'uuid',
  'binary',
] as const;
export type SimplePrimitive = (typeof SIMPLE_PRIMITIVES)[number];

/** A primitive type's JSON name: `"long"`, `"decimal(20, 0)"`, `"fixed[16]"`, ... */
export type IcebergPrimitive = SimplePrimitive | `decimal(${number}, ${number})` | `fixed[${number}]`;

/** A struct: its fields, each with its id (unique in the table's schema, never reused). */
export interface IcebergStruct {
  readonly type: 'struct';
  readonly fields: readonly IcebergField[];
}

/** A list: its element's id and type, and whether an element may be null. */
export interface IcebergList {
  readonly type: 'list';
  readonly 'element-id': number;
  readonly element: IcebergType;
  readonly 'element-required': boolean;
}

/** A map: key and value ids and types; keys are never null. */
export interface IcebergMap {
  readonly type: 'map';
  readonly 'key-id': number;
  readonly key: IcebergType;
  readonly 'value-id': number;
  readonly value: IcebergType;
  readonly 'value-required': boolean;
}

export type IcebergType = IcebergPrimitive | IcebergStruct | IcebergList | IcebergMap;

/** One column of a schema (or field of a struct). */
export interface IcebergField {
  readonly id: number;
  readonly name: string;
  readonly required: boolean;
  readonly type: IcebergType;
  readonly doc?: string;
}

/** A schema: a struct with an id; `identifier-field-ids` names the row key where there is one. */
export interface IcebergSchema {
  readonly type: 'struct';
  readonly 'schema-id': number;
  readonly 'identifier-field-ids'?: readonly number[];
  readonly fields: readonly IcebergField[];
}

/** One field of a partition spec: a transform of a source column. */
export interface IcebergPartitionField {
  readonly 'source-id': number;
  readonly 'field-id': number;
  readonly name: string;
  /** `identity`, `bucket[N]`, `truncate[W]`, `year`, `month`, `day`, `hour`, `void`. */
  readonly transform: string;
}

export interface IcebergPartitionSpec {
  readonly 'spec-id': number;
  readonly fields: readonly IcebergPartitionField[];
}

export interface IcebergSortField {
  readonly transform: string;
  readonly 'source-id': number;
  readonly direction: 'asc' | 'desc';
  readonly 'null-order': 'nulls-first' | 'nulls-last';
}

export interface IcebergSortOrder {
  readonly 'order-id': number;
  readonly fields: readonly IcebergSortField[];
}

/** What a snapshot did (`summary.operation`) and its counters, all values strings. */
export interface IcebergSnapshotSummary {
  readonly operation: 'append' | 'replace' | 'overwrite' | 'delete';
  readonly [key: string]: string;
}

/**
 * A snapshot's id: a random positive 63-bit long (Iceberg Java and pyiceberg draw them from a
 * UUID), so a `bigint`: a JSON number beyond 2^53 does not survive `JSON.parse` into a `number`,
 * and a table another engine wrote to (Spark's `expire_snapshots`, `rewrite_data_files`) holds such
 * ids. ./metadata-json.ts reads and writes them exactly.
 */
export type SnapshotId = bigint;

export interface IcebergSnapshot {
  readonly 'snapshot-id': SnapshotId;
  readonly 'parent-snapshot-id'?: SnapshotId;
  readonly 'sequence-number': number;
  readonly 'timestamp-ms': number;
  /** The manifest list (Avro) of this snapshot. */
  readonly 'manifest-list': string;
  readonly summary: IcebergSnapshotSummary;
  readonly 'schema-id'?: number;
}

/** A named reference to a snapshot; `main` is the table's current state. */
export interface IcebergSnapshotRef {
  readonly 'snapshot-id': SnapshotId;
  readonly type: 'branch' | 'tag';
  readonly 'max-ref-age-ms'?: number;
  readonly 'max-snapshot-age-ms'?: number;
  readonly 'min-snapshots-to-keep'?: number;
}

/** The whole of a metadata file (`vN.metadata.json` or `NNNNN-<uuid>.metadata.json`). */
export interface IcebergTableMetadata {
  readonly 'format-version': 2;
  readonly 'table-uuid': string;
  readonly location: string;
  readonly 'last-sequence-number': number;
  readonly 'last-updated-ms': number;
  readonly 'last-column-id': number;
  readonly schemas: readonly IcebergSchema[];
  readonly 'current-schema-id': number;
  readonly 'partition-specs': readonly IcebergPartitionSpec[];
  readonly 'default-spec-id': number;
  readonly 'last-partition-id': number;
  readonly properties: Readonly<Record<string, string>>;
  /** -1 (or absent, on read) when the table has no snapshot yet. */
  readonly 'current-snapshot-id'?: SnapshotId;
  readonly snapshots: readonly IcebergSnapshot[];
  readonly 'snapshot-log': readonly { readonly 'snapshot-id': SnapshotId; readonly 'timestamp-ms': number }[];
  readonly 'metadata-log': readonly { readonly 'metadata-file': string; readonly 'timestamp-ms': number }[];
  readonly 'sort-orders': readonly IcebergSortOrder[];
  readonly 'default-sort-order-id': number;
  readonly refs?: Readonly<Record<string, IcebergSnapshotRef>>;
}
