/**
 * A lake table's Iceberg partition spec: unpartitioned unless partition fields are asked for, and
 * then only over columns whose value a row keeps for good, so no row ever moves between
 * partitions. Owns the validation of a requested field (column, transform) and the spec's JSON
 * (./spec.ts); the setting that asks for fields is the spec's (the pipeline spec), not this file's.
 *
 * Which columns: the primary key's, for every table (a change of the key is a delete and an
 * insert, so one key's row versions share a partition, and a current-state table's equality
 * deletes for a key find its rows in the partition its key gives). A change log (`rows:
 * 'versions'`, every row version a row of its own, never rewritten) may also take `__commit_ts`
 * by year, month, day or hour: a version's commit time is the source's and never changes. A
 * current-state table may not (an update would move its row to another day), nor may any table
 * take another data column (an update may change it). Partition field ids start at 1000, as
 * Iceberg numbers them; an unpartitioned table's last-partition-id is 999.
 */
import { TidemarkError } from '../contracts/errors.js';
import { META_COMMIT_TS } from '../dataplane/metadata.js';
import type { IcebergPartitionField, IcebergPartitionSpec, IcebergSchema, IcebergType } from './spec.js';

/** One partition field as asked for: a column and an Iceberg transform (`identity`, `bucket[16]`, `day`, ...). */
export interface PartitionFieldRequest {
  readonly column: string;
  readonly transform: string;
}

/** What the table's rows are, which decides the columns a partition may use. */
export interface PartitionedTable {
  /** The lake's primary-key columns (the lake schema's `primaryKey`), in key order. */
  readonly primaryKey: readonly string[];
  /**
   * `versions`: a change log, every row version a row never rewritten (issue 30's tables);
   * `current`: one row per key, rewritten (deleted and added) when the row changes.
   */
  readonly rows: 'versions' | 'current';
}

/** A partition spec and the table's last-partition-id after it. */
export interface PartitionSpecOf {
  readonly spec: IcebergPartitionSpec;
  readonly lastPartitionId: number;
}

/** The first partition field id, as Iceberg numbers them. */
export const FIRST_PARTITION_FIELD_ID = 1000;

/** An unpartitioned spec (the default): spec 0, no fields, last-partition-id 999. */
export const UNPARTITIONED: PartitionSpecOf = {
  spec: { 'spec-id': 0, fields: [] },
  lastPartitionId: FIRST_PARTITION_FIELD_ID - 1,
};

/** A requested partition field tidemark does not take: the column or the transform. */
export class IcebergPartitionError extends TidemarkError {
  override name = 'IcebergPartitionError';
  constructor(
    readonly table: string | undefined,
    readonly field: PartitionFieldRequest,
    reason: string,
  ) {
    super(
      'ICEBERG_PARTITION_INVALID',
      `${table ? `${table}: ` : ''}partition field ${field.transform}(${field.column}): ${reason}`,
    );
  }
}

const TIME_TRANSFORMS = ['year', 'month', 'day', 'hour'] as const;
const BUCKET = /^bucket\[(\d+)\]$/;
const TRUNCATE = /^truncate\[(\d+)\]$/;

/**
 * The partition spec (spec id 0) of a new table: unpartitioned without `fields`; else one
 * partition field per request, in order, ids from 1000, named as Iceberg names them (the column
 * for `identity`, else `column_bucket`, `column_trunc`, `column_day`, ...).
 *
 * @throws IcebergPartitionError when a column is not in the schema or is not one the table may
 *   partition on (see the module comment), a transform is unknown or does not fit the column's
 *   type, a field is asked for twice, or a field's name would be a column's.
 */
export function partitionSpecOf(
  schema: IcebergSchema,
  table: PartitionedTable,
  fields: readonly PartitionFieldRequest[] = [],
  options: { readonly tableName?: string } = {},
): PartitionSpecOf {
  if (fields.length === 0) return UNPARTITIONED;
  const byName = new Map(schema.fields.map((f) => [f.name, f]));
  const key = new Set(table.primaryKey);
  const out: IcebergPartitionField[] = [];
  const seen = new Set<string>();
  for (const request of fields) {
    const refuse = (reason: string) => new IcebergPartitionError(options.tableName, request, reason);
    const source = byName.get(request.column);
    if (source === undefined) throw refuse(`the table has no column "${request.column}"`);
    const transform = request.transform.trim();
    const isTime = (TIME_TRANSFORMS as readonly string[]).includes(transform);
    if (!key.has(source.name)) {
      const commitTime = source.name === META_COMMIT_TS;
      if (!commitTime || table.rows !== 'versions' || !isTime) {
        throw refuse(
          commitTime && table.rows === 'versions'
            ? `${META_COMMIT_TS} takes year, month, day or hour only`
            : commitTime
              ? `${META_COMMIT_TS} changes when a row is updated, so a current-state table's row would move between partitions; partition on the key instead`
              : `only the primary key's columns${table.rows === 'versions' ? ` (and ${META_COMMIT_TS} by year, month, day or hour)` : ''} may partition the table: an update may change "${source.name}" and move its row to another partition${table.primaryKey.length === 0 ? ' (this table has no primary key)' : ''}`,
        );
      }
    }
    const problem = transformProblem(transform, source.type);
    if (problem !== undefined) throw refuse(problem);
    const name = partitionFieldName(source.name, transform);
    if (seen.has(`${source.id}\u0000${transform}`)) throw refuse('asked for twice');
    if (out.some((f) => f.name === name)) throw refuse(`two partition fields would both be named "${name}"`);
    if (transform !== 'identity' && byName.has(name))
      throw refuse(`its name "${name}" is a column's; Iceberg keeps partition and column names apart`);
    seen.add(`${source.id}\u0000${transform}`);
    out.push({ 'source-id': source.id, 'field-id': FIRST_PARTITION_FIELD_ID + out.length, name, transform });
  }
  return { spec: { 'spec-id': 0, fields: out }, lastPartitionId: FIRST_PARTITION_FIELD_ID + out.length - 1 };
}

/** Iceberg's name for a partition field: `id`, `id_bucket`, `name_trunc`, `created_day`. */
function partitionFieldName(column: string, transform: string): string {
  if (transform === 'identity') return column;
  if (BUCKET.test(transform)) return `${column}_bucket`;
  if (TRUNCATE.test(transform)) return `${column}_trunc`;
  return `${column}_${transform}`;
}

/** Why `transform` cannot apply to a column of `type`; undefined when it can (the spec's table). */
function transformProblem(transform: string, type: IcebergType): string | undefined {
  if (typeof type !== 'string') return 'a list column cannot be partitioned on';
  const t = type.startsWith('decimal') ? 'decimal' : type;
  const fits = (types: readonly string[], what: string) =>
    types.includes(t) ? undefined : `${what} does not apply to a ${type} column`;
  if (transform === 'identity') return undefined;
  const bucket = BUCKET.exec(transform);
  if (bucket) {
    const n = Number(bucket[1]);
    if (n < 1 || n > 2 ** 31 - 1) return 'bucket[N] takes N from 1 to 2147483647';
    return fits(
      ['int', 'long', 'decimal', 'date', 'time', 'timestamp', 'timestamptz', 'string', 'uuid', 'binary'],
      transform,
    );
  }
  const truncate = TRUNCATE.exec(transform);
  if (truncate) {
    const w = Number(truncate[1]);
    if (w < 1 || w > 2 ** 31 - 1) return 'truncate[W] takes W from 1 to 2147483647';
    return fits(['int', 'long', 'decimal', 'string', 'binary'], transform);
  }
  if (transform === 'hour') return fits(['timestamp', 'timestamptz'], transform);
  if ((TIME_TRANSFORMS as readonly string[]).includes(transform))
    return fits(['date', 'timestamp', 'timestamptz'], transform);
  return `unknown transform "${transform}"; use identity, bucket[N], truncate[W], year, month, day or hour`;
}
