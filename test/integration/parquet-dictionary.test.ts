/**
 * The dictionary page limit (shared/sink/parquet-writer.ts DICTIONARY_PAGE_BYTES): a
 * high-cardinality column's dictionary stops growing at the limit and the rest of its chunk is
 * PLAIN, a low-cardinality column keeps its dictionary, on both encode paths (this thread and
 * the worker, same bytes), and DuckDB reads every value back. Read through DuckDB's
 * `parquet_metadata()`: the encodings each column chunk used.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { Field, Int64, makeData, RecordBatch, Schema, Struct, Utf8, vectorFromArray } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DICTIONARY_PAGE_BYTES,
  encodeParquet,
  encodeParquetAsync,
} from '../../shared/sink/parquet-writer.js';

const ROWS = 100_000;
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tidemark-dict-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

function record(): RecordBatch {
  const ids = vectorFromArray(
    Array.from({ length: ROWS }, (_, i) => BigInt(i) * 7919n),
    new Int64(),
  );
  const status = vectorFromArray(
    Array.from({ length: ROWS }, (_, i) => ['placed', 'shipped', 'returned'][i % 3]!),
    new Utf8(),
  );
  const schema = new Schema([new Field('id', new Int64(), false), new Field('status', new Utf8(), false)]);
  return new RecordBatch(
    schema,
    makeData({
      type: new Struct(schema.fields),
      length: ROWS,
      nullCount: 0,
      children: [ids.data[0]!, status.data[0]!],
    }),
  );
}

async function metadata(bytes: Uint8Array, name: string) {
  const path = join(dir, name);
  await writeFile(path, bytes);
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    const meta = (
      await conn.runAndReadAll(
        `SELECT path_in_schema AS col, encodings, dictionary_page_offset IS NOT NULL AS dict,
                (data_page_offset - dictionary_page_offset)::BIGINT AS dict_bytes
         FROM parquet_metadata('${path}')`,
      )
    ).getRowObjects() as { col: string; encodings: string; dict: boolean; dict_bytes: bigint | null }[];
    const sums = (
      await conn.runAndReadAll(
        `SELECT count(*)::BIGINT AS n, count(DISTINCT id)::BIGINT AS ids, sum(id)::VARCHAR AS total,
                count(*) FILTER (WHERE status = 'shipped')::BIGINT AS shipped
         FROM read_parquet('${path}')`,
      )
    ).getRowObjects()[0] as { n: bigint; ids: bigint; total: string; shipped: bigint };
    return { meta, sums };
  } finally {
    conn.closeSync();
  }
}

describe('parquet dictionary page limit', () => {
  it('a high-cardinality column falls back to PLAIN past the limit, a low-cardinality one keeps its dictionary', {
    timeout: 120_000,
  }, async () => {
    // 100k distinct int64 keys need 800 KB of dictionary: far past the limit.
    expect(ROWS * 8).toBeGreaterThan(DICTIONARY_PAGE_BYTES * 4);
    const r = record();
    const sync = encodeParquet([r], { compression: 'zstd' });
    const viaWorker = await encodeParquetAsync([r], { compression: 'zstd' });
    expect(Buffer.from(viaWorker).equals(Buffer.from(sync))).toBe(true);
    const { meta, sums } = await metadata(sync, 'dict.parquet');
    const id = meta.filter((m) => m.col === 'id');
    const status = meta.filter((m) => m.col === 'status');
    expect(id.length).toBeGreaterThan(0);
    // The key column: its dictionary page stops at the limit (the chunk goes on in PLAIN);
    // under arrow-rs' default 1 MiB limit it would hold all 100k keys.
    expect(id.every((m) => m.encodings.includes('PLAIN'))).toBe(true);
    for (const m of id) expect(Number(m.dict_bytes ?? 0)).toBeLessThanOrEqual(DICTIONARY_PAGE_BYTES + 1024);
    // The status column: three values, dictionary-encoded, never PLAIN for its data.
    expect(status.every((m) => m.dict)).toBe(true);
    expect(status.every((m) => /RLE_DICTIONARY|PLAIN_DICTIONARY/.test(m.encodings))).toBe(true);
    // Every value reads back.
    expect(Number(sums.n)).toBe(ROWS);
    expect(Number(sums.ids)).toBe(ROWS);
    expect(sums.total).toBe(String((7919n * BigInt(ROWS) * BigInt(ROWS - 1)) / 2n));
    expect(Number(sums.shipped)).toBe(Math.floor((ROWS + 1) / 3));
  });
});
