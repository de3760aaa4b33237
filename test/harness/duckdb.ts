/**
 * DuckDB as a reader of the Parquet files tests write: a query on a fresh connection of the test
 * file's in-memory instance (closed after the query, whatever happens), read as rows or objects
 * of JSON values.
 */
import type { DuckDBInstance, DuckDBResultReader } from '@duckdb/node-api';

/** A value of a DuckDB result as JSON (`getRowsJson`). */
export type DuckJson = ReturnType<DuckDBResultReader['getRowsJson']>[number][number];

/** Runs `sql` on a new connection of `duck` and returns the whole result. */
export async function duckQuery(duck: DuckDBInstance, sql: string): Promise<DuckDBResultReader> {
  const c = await duck.connect();
  try {
    return await c.runAndReadAll(sql);
  } finally {
    c.closeSync();
  }
}
