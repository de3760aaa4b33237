import { describe, expect, it } from 'vitest';
import { encodeRows } from '../../shared/dataplane/encoder.js';
import { toLakeRecord } from '../../shared/dataplane/lake.js';
import { Op } from '../../shared/dataplane/metadata.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { encodeParquet, encodeParquetAsync } from '../../shared/sink/parquet-writer.js';

const schema: Schema = {
  columns: [
    { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
    { name: 'amount', type: { kind: 'decimal', precision: 12, scale: 2 }, nullable: true, sourceType: 'numeric(12,2)' },
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
  return toLakeRecord(
    encodeRows(schema, rows, {
      posPrefix: 'i000000000001',
      ordinalBase: offset,
      op: Op.update,
      phase: 'incremental',
      ingestTsNanos: 1_700_000_000_000_000_000n,
      snapshot: false,
    }),
  );
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

  it('refuses an unknown compression instead of silently using the default', async () => {
    await expect(encodeParquetAsync([lake(3, 0)], { compression: 'lz4' as never })).rejects.toThrow(/unknown Parquet compression "lz4"/);
  });
});
