/**
 * The keyset both SQL drivers page a table by, (cursor, primary key...): the shape of a resolved
 * table and of its keyset plan, and the refusals and the warning every driver words alike. Each
 * driver's introspect.ts plans the keyset (which columns can be ordered, whether a cursor alone
 * is unique, whether an index leads with it: catalog queries of its own) through these pieces.
 *
 * Owns the shared fields of `TablePlan` and `KeysetPlan` and the messages of a missing cursor, a
 * table with no usable key and an unindexed cursor. Never queries and never names a client.
 */
import { SourceError } from '../contracts/errors.js';
import type { TableRef, Warning } from '../contracts/source.js';
import type { LogicalType, Schema } from '../dataplane/schema.js';

/** A column as the keyset planner looks at it (each driver's `ColumnInfo` has more). */
export interface KeysetColumn {
  readonly name: string;
  readonly notNull: boolean;
  /** The type as the database writes it, for messages. */
  readonly sourceType: string;
}

/** A resolved table: what every page reader needs, computed once per introspection. */
export interface ResolvedTable<C extends KeysetColumn> {
  /** `schema.table` (`database.table`) as the spec names it. */
  readonly source: string;
  /** The table's name quoted for SQL (`"schema"."table"`, `` `database`.`table` ``). */
  readonly qualified: string;
  /** Every column, in the catalog's order (exclusions are applied to `schema`, not here). */
  readonly columns: readonly C[];
  readonly primaryKey: readonly string[];
  /** The canonical schema (exclusions applied). */
  readonly schema: Schema;
  readonly ref: TableRef;
}

/**
 * How pages of one table are keyed: (cursor, primary key...) and the bound that applies, a
 * `time` bound of a driver's `T` (bound.ts `TimeBoundType`) or the high-water mark.
 */
export interface Keyset<C extends KeysetColumn, T extends string> {
  readonly cursor: C;
  /** Cursor first, then the primary-key columns that are not the cursor. */
  readonly keys: readonly C[];
  readonly types: readonly LogicalType[];
  readonly bound: { readonly kind: 'time'; readonly type: T } | { readonly kind: 'highWater' };
  readonly warnings: readonly Warning[];
}

/**
 * SOURCE_CURSOR_INVALID: `table` has no column `cursorColumn`. The keyset planner lists the
 * columns there are (`listColumns`); the NULL-cursor count, which runs after it, does not.
 */
export function cursorMissing(
  table: ResolvedTable<KeysetColumn>,
  cursorColumn: string,
  listColumns: boolean,
): SourceError {
  const columns = listColumns ? `; columns are ${table.columns.map((c) => c.name).join(', ')}` : '';
  return new SourceError(
    'SOURCE_CURSOR_INVALID',
    `${table.source}: cursor column "${cursorColumn}" does not exist${columns}`,
  );
}

/** The primary-key columns other than the cursor, in key order: the keyset's tie-breakers. */
export function tieBreakers<C extends KeysetColumn>(table: ResolvedTable<C>, cursorColumn: string): C[] {
  return table.primaryKey
    .filter((k) => k !== cursorColumn)
    .map((k) => table.columns.find((c) => c.name === k)!);
}

/**
 * SOURCE_KEY_MISSING: no primary key, and the cursor alone is not UNIQUE NOT NULL (the driver
 * asked its catalog whether it is unique), so rows sharing a cursor value would be lost.
 */
export function keyMissing(table: ResolvedTable<KeysetColumn>, cursor: KeysetColumn): SourceError {
  return new SourceError(
    'SOURCE_KEY_MISSING',
    `${table.source} has no primary key and its cursor column "${cursor.name}" is not ${cursor.notNull ? '' : 'NOT NULL and '}UNIQUE, ` +
      'so rows sharing a cursor value cannot be paged without loss; add a primary key (or a UNIQUE NOT NULL cursor column)',
  );
}

/** CURSOR_NOT_INDEXED: every page scans the table; `fix` is the driver's statement that adds the index. */
export function notIndexed(table: ResolvedTable<KeysetColumn>, cursorColumn: string, fix: string): Warning {
  return {
    code: 'CURSOR_NOT_INDEXED',
    message: `${table.source}: no index leads with cursor column "${cursorColumn}", so every page scans the table; ${fix}`,
  };
}
