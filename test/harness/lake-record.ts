/**
 * Test rows as the wire and the lake see them: rows (row maps, or arrays in column order) encoded
 * as one page of an incremental read (`encodeRows`: op update, positions from
 * i000000000001 + ordinal, a fixed ingest time; each overridable) and, for `lakeRecord`, cast to
 * the lake schema (`toLakeRecord`). The Parquet and Iceberg tests build their files from these.
 */
import type { RecordBatch } from 'apache-arrow';
import { encodeRows, type RowsMeta } from '../../shared/dataplane/encoder.js';
import { toLakeRecord } from '../../shared/dataplane/lake.js';
import { Op } from '../../shared/dataplane/metadata.js';
import type { Schema } from '../../shared/dataplane/schema.js';

/** The page metadata of test rows: an incremental update read at a fixed instant. */
export const TEST_ROWS_META: RowsMeta = {
  posPrefix: 'i000000000001',
  ordinalBase: 0,
  op: Op.update,
  phase: 'incremental',
  ingestTsNanos: 1_700_000_000_000_000_000n,
  snapshot: false,
};

/** A row as a map by column name, or as an array of values in the schema's column order. */
export type TestRow = Readonly<Record<string, unknown>> | readonly unknown[];

/** `rows` of `schema` as one wire batch, `meta` overriding TEST_ROWS_META. */
export function wireRecord(
  schema: Schema,
  rows: readonly TestRow[],
  meta: Partial<RowsMeta> = {},
): RecordBatch {
  const maps = rows.map(
    (r): Readonly<Record<string, unknown>> =>
      isArrayRow(r) ? Object.fromEntries(r.map((v, i) => [schema.columns[i]!.name, v])) : r,
  );
  return encodeRows(schema, maps, { ...TEST_ROWS_META, ...meta });
}

/** `rows` of `schema` as one lake record (the wire batch cast to the lake schema). */
export function lakeRecord(
  schema: Schema,
  rows: readonly TestRow[],
  meta: Partial<RowsMeta> = {},
): RecordBatch {
  return toLakeRecord(wireRecord(schema, rows, meta));
}

// Array.isArray does not narrow a readonly array out of a union.
function isArrayRow(r: TestRow): r is readonly unknown[] {
  return Array.isArray(r);
}
