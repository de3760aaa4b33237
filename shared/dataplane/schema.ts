/**
 * The canonical table schema: the shape a source emits, independent of any driver's client types.
 *
 * Owns: the closed set of logical types tidemark carries, column nullability and primary-key
 * order. It never names a database client (postgres.js, mysql2) and never applies a cast: the
 * mapping to the Arrow wire schema lives in `wire.ts`, the mapping to lake (Parquet/Glue) types
 * in `lake.ts`.
 */

/** A logical column type. Every value of a source column maps to exactly one of these. */
export type LogicalType =
  | { readonly kind: 'bool' }
  | { readonly kind: 'int8' }
  | { readonly kind: 'int16' }
  | { readonly kind: 'int32' }
  | { readonly kind: 'int64' }
  | { readonly kind: 'float64' }
  /** Exact decimal with 1 <= precision <= 38. Wider or unbounded decimals are `text`. */
  | { readonly kind: 'decimal'; readonly precision: number; readonly scale: number }
  /** UTF-8 text. Also the lossless home of uuid, json, enum, time, interval, wide numeric. */
  | { readonly kind: 'text' }
  | { readonly kind: 'binary' }
  /** Calendar date (days since the Unix epoch). */
  | { readonly kind: 'date' }
  /**
   * Microsecond timestamp. `utc: true` for instants (timestamptz, MySQL TIMESTAMP), false for
   * wall-clock values (timestamp, DATETIME) that are stored without a zone.
   */
  | { readonly kind: 'timestamp'; readonly utc: boolean }
  /** One-dimensional list. */
  | { readonly kind: 'list'; readonly element: LogicalType };

export type LogicalKind = LogicalType['kind'];

/** One column of a table, as the source declares it. */
export interface Column {
  /** Column name exactly as the source spells it. */
  readonly name: string;
  readonly type: LogicalType;
  readonly nullable: boolean;
  /** The source's own type name (e.g. `numeric(12,2)`, `bigint unsigned`), for docs and errors. */
  readonly sourceType: string;
}

/** The canonical schema of one table: its data columns in source order and its primary key. */
export interface Schema {
  readonly columns: readonly Column[];
  /** Primary-key column names in key order; empty when the table has none. */
  readonly primaryKey: readonly string[];
}

/** Finds a column by name or returns undefined. */
export function findColumn(schema: Schema, name: string): Column | undefined {
  return schema.columns.find((c) => c.name === name);
}

/** A human-readable rendering of a logical type, used in docs and error messages. */
export function describeType(t: LogicalType): string {
  switch (t.kind) {
    case 'decimal':
      return `decimal(${t.precision},${t.scale})`;
    case 'timestamp':
      return t.utc ? 'timestamp(utc)' : 'timestamp';
    case 'list':
      return `list<${describeType(t.element)}>`;
    default:
      return t.kind;
  }
}
