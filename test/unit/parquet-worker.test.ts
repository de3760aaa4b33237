import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import type { Schema } from '../../shared/dataplane/schema.js';
import { ENCODE_SLICE_BYTES, encodeParquet, encodeParquetAsync } from '../../shared/sink/parquet-writer.js';
import { lakeRecord } from '../harness/lake-record.js';

const schema: Schema = {
  columns: [
    { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
    {
      name: 'amount',
      type: { kind: 'decimal', precision: 12, scale: 2 },
      nullable: true,
      sourceType: 'numeric(12,2)',
    },
    { name: 'note', type: { kind: 'text' }, nullable: true, sourceType: 'text' },
  ],
  primaryKey: ['id'],
};

function lake(n: number, offset: number) {
  const rows = Array.from({ length: n }, (_, i) => ({
    id: BigInt(offset + i),
    amount: i % 7 === 0 ? null : `${offset + i}.25`,
    note: `note ${offset + i} 😀`,
  }));
  return lakeRecord(schema, rows, { ordinalBase: offset });
}

describe('Parquet encode on the worker thread', () => {
  it('gives the same bytes as the main-thread encoder, for concurrent calls each its own', async () => {
    const inputs = [lake(5000, 0), lake(10, 5000), lake(20_000, 9000)];
    const opts = { compression: 'zstd' as const, plainColumns: ['__pos'], keyValueMetadata: { k: 'v' } };
    const offThread = await Promise.all(inputs.map((r) => encodeParquetAsync([r], opts)));
    inputs.forEach((r, i) => {
      expect(Buffer.from(offThread[i]!).equals(Buffer.from(encodeParquet([r], opts)))).toBe(true);
    });
  });

  it('streams big values slice by slice into row groups bounded by bytes, without dictionary or statistics for them, same bytes as the main-thread encoder', async () => {
    const big: Schema = {
      columns: [
        { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
        { name: 'blob', type: { kind: 'binary' }, nullable: true, sourceType: 'bytea' },
        { name: 'label', type: { kind: 'text' }, nullable: true, sourceType: 'text' },
      ],
      primaryKey: ['id'],
    };
    // Random bytes: zstd cannot shrink them, so the encoded row groups are as big as the data.
    const values = Array.from({ length: 24 }, (_, i) => (i % 5 === 4 ? null : randomBytes(1_000_000 + i)));
    const record = lakeRecord(
      big,
      values.map((blob, i) => ({ id: BigInt(i), blob, label: `row ${i}` })),
    );
    expect(record.numRows * 800_000).toBeGreaterThan(4 * ENCODE_SLICE_BYTES); // several slices
    const opts = { compression: 'zstd' as const, plainColumns: ['__pos'], maxRowGroupBytes: 4 * 2 ** 20 };
    const streamed = await encodeParquetAsync([record], opts);
    expect(Buffer.from(streamed).equals(Buffer.from(encodeParquet([record], opts)))).toBe(true);

    const dir = mkdtempSync(join(tmpdir(), 'parquet-worker-'));
    const db = await DuckDBInstance.create(':memory:');
    try {
      const file = join(dir, 'big.parquet');
      writeFileSync(file, streamed);
      const c = await db.connect();
      const meta = await c.runAndReadAll(
        `SELECT path_in_schema, count(DISTINCT row_group_id)::INT, bool_or(stats_max_value IS NOT NULL),
                string_agg(DISTINCT encodings, ',') FROM parquet_metadata('${file}') GROUP BY 1 ORDER BY 1`,
      );
      const byColumn = new Map(meta.getRows().map((r) => [String(r[0]), r.slice(1)]));
      expect(Number(byColumn.get('blob')![0])).toBeGreaterThan(2); // row groups closed by bytes
      expect(byColumn.get('blob')![1]).toBe(false); // no statistics for the big column ...
      expect(String(byColumn.get('blob')![2])).not.toMatch(/DICTIONARY/); // ... and no dictionary
      expect(byColumn.get('label')![1]).toBe(true); // the small column keeps both
      const rows = await c.runAndReadAll(`SELECT id, md5(blob) FROM read_parquet('${file}') ORDER BY id`);
      expect(rows.getRows().map((r) => r[1])).toEqual(
        values.map((v) => (v === null ? null : createHash('md5').update(v).digest('hex'))),
      );
      c.closeSync();
    } finally {
      db.closeSync();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses an unknown compression instead of silently using the default', async () => {
    await expect(encodeParquetAsync([lake(3, 0)], { compression: 'lz4' as never })).rejects.toThrow(
      /unknown Parquet compression "lz4"/,
    );
  });
});
