/**
 * How a value error names its column in both SQL drivers: `schema.table.column` (Postgres) or
 * `database.table.column` (MySQL), in front of what the value parser said.
 *
 * Owns the column context of value errors. Never parses a value itself; the parsers are each
 * driver's types.ts.
 */
import { DataError } from '../contracts/errors.js';

/** Names a column for value errors: `schema.table` (or `database.table`) and the column. */
export interface ValueContext {
  readonly table: string;
  readonly column: string;
}

/** Runs a parser, prefixing its DataError with `table.column`. */
export function withContext<T>(ctx: ValueContext, parse: () => T): T {
  try {
    return parse();
  } catch (e) {
    if (e instanceof DataError) throw new DataError(`${ctx.table}.${ctx.column}: ${e.message}`, { cause: e });
    throw e;
  }
}
