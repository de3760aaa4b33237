/**
 * The page byte budget's count: `BatchEncoder.dataBytes` (what the columnar path sees after each
 * row) and `rowBytes` (what the row path computes from row maps) must agree row by row, or the
 * two paths would close pages at different rows.
 */
import { describe, expect, it } from 'vitest';
import { BatchEncoder, rowBytes, valueBytes } from '../../shared/dataplane/encoder.js';
import { Op } from '../../shared/dataplane/metadata.js';
import type { Column, LogicalType, Schema } from '../../shared/dataplane/schema.js';

const col = (name: string, type: LogicalType): Column => ({ name, type, nullable: true, sourceType: 'x' });

const SCHEMA: Schema = {
  columns: [
    col('b', { kind: 'bool' }),
    col('i8', { kind: 'int8' }),
    col('i16', { kind: 'int16' }),
    col('i32', { kind: 'int32' }),
    col('i64', { kind: 'int64' }),
    col('dec', { kind: 'decimal', precision: 12, scale: 2 }),
    col('f', { kind: 'float64' }),
    col('t', { kind: 'text' }),
    col('bin', { kind: 'binary' }),
    col('d', { kind: 'date' }),
    col('ts', { kind: 'timestamp', utc: true }),
    col('li', { kind: 'list', element: { kind: 'int32' } }),
    col('lt', { kind: 'list', element: { kind: 'text' } }),
  ],
  primaryKey: [],
};

const ROWS: Record<string, unknown>[] = [
  {
    b: true,
    i8: 1,
    i16: 2,
    i32: 3,
    i64: 4n,
    dec: '1.25',
    f: 0.5,
    t: 'héllo 日本 😀',
    bin: Uint8Array.from([1, 2, 3]),
    d: 19_000,
    ts: 1_700_000_000_000_000n,
    li: [1, null, 3],
    lt: ['a', null, '😀'],
  },
  Object.fromEntries(SCHEMA.columns.map((c) => [c.name, null])),
  {
    ...Object.fromEntries(SCHEMA.columns.map((c) => [c.name, null])),
    t: '',
    bin: new Uint8Array(0),
    li: [],
    lt: [''],
  },
  // A lone surrogate is written as U+FFFD (3 bytes), which Buffer.byteLength also counts.
  { ...Object.fromEntries(SCHEMA.columns.map((c) => [c.name, null])), t: `x\ud800y${'z'.repeat(100)}` },
  {
    ...Object.fromEntries(SCHEMA.columns.map((c) => [c.name, null])),
    t: 'ß'.repeat(5000),
    lt: ['é'.repeat(70)],
  },
];

describe('page byte count', () => {
  it('rowBytes of a row map equals what the encoder adds for it, row by row', () => {
    const enc = new BatchEncoder(SCHEMA, { phase: 'incremental', capacity: 2 });
    let before = enc.dataBytes;
    expect(before).toBe(0);
    ROWS.forEach((row, i) => {
      enc.appendRow(row);
      enc.appendMetaOrdinal(Op.update, 'i0.', i, null, false);
      const after = enc.dataBytes;
      expect(after - before, `row ${i}`).toBe(rowBytes(SCHEMA, row));
      before = after;
    });
    enc.finish(0n);
    expect(enc.dataBytes).toBe(0);
  });

  it('counts fixed widths, offsets and payload bytes', () => {
    expect(valueBytes({ kind: 'int64' }, null)).toBe(8);
    expect(valueBytes({ kind: 'decimal', precision: 38, scale: 0 }, '1')).toBe(16);
    expect(valueBytes({ kind: 'text' }, null)).toBe(4);
    expect(valueBytes({ kind: 'text' }, 'é')).toBe(6);
    expect(valueBytes({ kind: 'list', element: { kind: 'int16' } }, [1, 2])).toBe(8);
  });
});
