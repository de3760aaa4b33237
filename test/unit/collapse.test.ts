/**
 * Upsert collapse and the Arrow "take" under it: of the rows of one write sharing a primary key
 * only the one with the greatest `__pos` survives (deletes too), survivors keep their order, keys
 * that differ only below a millisecond stay apart, and take copies every wire type exactly,
 * including from sliced records.
 */
import { type Data, DataType, type RecordBatch } from 'apache-arrow';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BatchEncoder } from '../../shared/dataplane/encoder.js';
import type { Column, LogicalType, Schema } from '../../shared/dataplane/schema.js';
import { collapseToLatest, takeRecord } from '../../shared/sink/collapse.js';

function col(name: string, type: LogicalType, nullable = true): Column {
  return { name, type, nullable, sourceType: 'test' };
}

/** Exact cell value (Arrow's getters turn timestamps into milliseconds). */
function cell(data: Data, i: number): unknown {
  if (!data.getValid(i)) return null;
  const { type } = data;
  if (DataType.isTimestamp(type) || (DataType.isInt(type) && type.bitWidth === 64))
    return (data.values as BigInt64Array)[i];
  if (DataType.isDecimal(type)) return Array.from((data.values as Uint32Array).subarray(4 * i, 4 * i + 4));
  if (DataType.isList(type)) {
    const o = data.valueOffsets as Int32Array;
    const out: unknown[] = [];
    for (let j = o[i]!; j < o[i + 1]!; j++) out.push(cell(data.children[0]!, j));
    return out;
  }
  if (DataType.isBinary(type)) {
    const o = data.valueOffsets as Int32Array;
    return Array.from((data.values as Uint8Array).subarray(o[i]!, o[i + 1]!));
  }
  return plainCell(data, i);
}

/** bool, utf8 and fixed-width numbers (dates as raw days). */
function plainCell(data: Data, i: number): unknown {
  const { type } = data;
  if (DataType.isBool(type)) {
    const at = data.offset + i;
    return (((data.values as Uint8Array)[at >> 3]! >> (at & 7)) & 1) === 1;
  }
  if (DataType.isUtf8(type)) {
    const o = data.valueOffsets as Int32Array;
    return Buffer.from((data.values as Uint8Array).subarray(o[i]!, o[i + 1]!)).toString('utf8');
  }
  return (data.values as ArrayLike<unknown>)[i];
}

function rows(record: RecordBatch): unknown[][] {
  const out: unknown[][] = [];
  for (let i = 0; i < record.numRows; i++) out.push(record.data.children.map((c) => cell(c, i)));
  return out;
}

const ALL_TYPES: Schema = {
  columns: [
    col('b', { kind: 'bool' }),
    col('i8', { kind: 'int8' }),
    col('i16', { kind: 'int16' }),
    col('i32', { kind: 'int32' }),
    col('i64', { kind: 'int64' }),
    col('f', { kind: 'float64' }),
    col('d', { kind: 'decimal', precision: 38, scale: 4 }),
    col('t', { kind: 'text' }),
    col('bin', { kind: 'binary' }),
    col('day', { kind: 'date' }),
    col('ts', { kind: 'timestamp', utc: true }),
    col('l', { kind: 'list', element: { kind: 'int32' } }),
    col('lt', { kind: 'list', element: { kind: 'text' } }),
  ],
  primaryKey: [],
};

const anyRow = fc.record({
  b: fc.option(fc.boolean()),
  i8: fc.option(fc.integer({ min: -128, max: 127 })),
  i16: fc.option(fc.integer({ min: -32768, max: 32767 })),
  i32: fc.option(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 })),
  i64: fc.option(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })),
  f: fc.option(fc.double()),
  d: fc.option(fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map((v) => `${v}.1234`)),
  t: fc.option(fc.string({ unit: 'grapheme', maxLength: 8 })),
  bin: fc.option(fc.uint8Array({ maxLength: 6 })),
  day: fc.option(fc.integer({ min: -100_000, max: 100_000 })),
  ts: fc.option(fc.bigInt({ min: -(10n ** 17n), max: 10n ** 17n })),
  l: fc.option(fc.array(fc.option(fc.integer({ min: -5, max: 5 })), { maxLength: 4 })),
  lt: fc.option(fc.array(fc.option(fc.string({ maxLength: 3 })), { maxLength: 3 })),
});

function encode(
  schema: Schema,
  rs: readonly Record<string, unknown>[],
  meta: (i: number) => { op: 0 | 1 | 2; pos: string },
): RecordBatch {
  const enc = new BatchEncoder(schema, { phase: 'stream', capacity: rs.length + 1 });
  rs.forEach((r, i) => {
    enc.appendRow(r);
    const m = meta(i);
    enc.appendMeta(m.op, m.pos, null, false);
  });
  return enc.finish(0n);
}

describe('takeRecord', () => {
  it('copies the selected rows of every wire type exactly, also from a sliced record', () => {
    fc.assert(
      fc.property(
        fc.array(anyRow, { minLength: 1, maxLength: 25 }),
        fc.nat(),
        fc.nat(),
        fc.array(fc.nat(), { maxLength: 30 }),
        (rs, a, b, picks) => {
          const whole = encode(ALL_TYPES, rs, (i) => ({ op: 1, pos: `p${i}` }));
          const begin = a % rs.length;
          const end = begin + (b % (rs.length - begin + 1));
          const sliced = whole.slice(begin, end);
          if (sliced.numRows === 0) return;
          const idx = Int32Array.from(picks.map((p) => p % sliced.numRows));
          const expected = rows(sliced);
          expect(rows(takeRecord(sliced, idx))).toEqual([...idx].map((i) => expected[i]));
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('collapseToLatest', () => {
  const KEYED: Schema = {
    columns: [
      col('tenant', { kind: 'text' }, false),
      col('at', { kind: 'timestamp', utc: false }, false),
      col('v', { kind: 'int32' }),
    ],
    primaryKey: ['tenant', 'at'],
  };

  it('keeps exactly the max-__pos row per key, in arrival order, across batches', () => {
    // Small key domains force many versions per key; `at` differs by 1 us, below Arrow's ms getter.
    const change = fc.record({
      tenant: fc.constantFrom('a', 'b', 'ab', ''),
      at: fc.constantFrom(1_000_000n, 1_000_001n),
      v: fc.integer({ min: 0, max: 1000 }),
      op: fc.constantFrom(0 as const, 1 as const, 2 as const),
      pos: fc.string({ unit: fc.constantFrom('0', '1', '2', 'a', 'z'), minLength: 1, maxLength: 4 }),
    });
    fc.assert(
      fc.property(fc.array(fc.array(change, { maxLength: 12 }), { minLength: 1, maxLength: 4 }), (groups) => {
        const batches = groups.map((g) => encode(KEYED, g, (i) => ({ op: g[i]!.op, pos: g[i]!.pos })));
        const flat = groups.flatMap((g, b) => g.map((c, row) => ({ ...c, b, row })));
        // Model: last max by pos per key (later rows win ties).
        const best = new Map<string, (typeof flat)[number]>();
        for (const c of flat) {
          const k = `${c.tenant}|${c.at}`;
          const prev = best.get(k);
          if (!prev || prev.pos <= c.pos) best.set(k, c);
        }
        const expected = flat
          .filter((c) => best.get(`${c.tenant}|${c.at}`) === c)
          .map((c) => [c.tenant, c.at, c.v, c.op, c.pos]);
        const got = collapseToLatest(batches, KEYED.primaryKey).flatMap((r) =>
          rows(r).map((x) => [x[0], x[1], x[2], x[3], x[4]]),
        );
        expect(got).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });

  it('keeps int64 keys apart beyond 2^53 and merges equal ones', () => {
    const ids: Schema = { columns: [col('id', { kind: 'int64' }, false)], primaryKey: ['id'] };
    const big = 2n ** 60n;
    const keys = [big, big + 1n, big, 5n, 5n, -(2n ** 63n), 2n ** 63n - 1n];
    const batch = encode(
      ids,
      keys.map((id) => ({ id })),
      (i) => ({ op: 1, pos: `p${i}` }),
    );
    const got = collapseToLatest([batch], ['id']).flatMap((r) => rows(r).map((x) => [x[0], x[2]]));
    expect(got).toEqual([
      [big + 1n, 'p1'],
      [big, 'p2'],
      [5n, 'p4'],
      [-(2n ** 63n), 'p5'],
      [2n ** 63n - 1n, 'p6'],
    ]);
  });

  it('returns a batch untouched when every row survives', () => {
    const batch = encode(
      KEYED,
      [
        { tenant: 'a', at: 1n, v: 1 },
        { tenant: 'b', at: 1n, v: 2 },
      ],
      (i) => ({ op: 1, pos: `p${i}` }),
    );
    expect(collapseToLatest([batch], KEYED.primaryKey)[0]).toBe(batch);
  });
});
