/**
 * The wire encoder: every logical kind round-trips exactly (in memory and through Arrow IPC),
 * the metadata tail has the exact wire types, values a column cannot hold are refused, and the
 * row-map path and the raw (binary decoder) path produce byte-identical IPC.
 */
import { type Data, type RecordBatch, Table, tableFromIPC, tableToIPC } from 'apache-arrow';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DataError } from '../../shared/contracts/errors.js';
import { BatchError } from '../../shared/dataplane/batch.js';
import { formatDecimal, readDecimalUnscaled } from '../../shared/dataplane/decimal128.js';
import {
  BatchEncoder,
  type ColumnWriter,
  encodeRows,
  type RowsMeta,
} from '../../shared/dataplane/encoder.js';
import { METADATA_COLUMNS, metadataFields } from '../../shared/dataplane/metadata.js';
import type { Column, LogicalType, Schema } from '../../shared/dataplane/schema.js';
import { ordinalHex } from '../../shared/position/position.js';
import { arbitraryOf, KINDS, MAX_I64, MIN_I64 } from '../harness/logical-arbitraries.js';

/** Microseconds and days between 1970-01-01 and Postgres' epoch 2000-01-01. */
const PG_EPOCH_MICROS = 946_684_800_000_000;
const PG_EPOCH_DAYS = 10_957;

const META: RowsMeta = {
  posPrefix: 'i00000000002a',
  ordinalBase: 0,
  op: 1,
  phase: 'incremental',
  ingestTsNanos: 1_700_000_000_123_456_789n,
  snapshot: false,
};

function col(name: string, type: LogicalType, nullable = true): Column {
  return { name, type, nullable, sourceType: 'test' };
}

function schemaOf(...columns: Column[]): Schema {
  return { columns, primaryKey: [] };
}

// ---- reading back, at the buffer level (Arrow's getters turn timestamps into ms numbers) ----

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The value-universe value at row i of `d`; decimals come back as canonical text at the scale. */
function readAt(d: Data, i: number, t: LogicalType): unknown {
  if (!d.getValid(i)) return null;
  const j = d.offset + i;
  const values = d.values as unknown as Uint8Array;
  switch (t.kind) {
    case 'bool':
      return ((values[j >> 3]! >> (j & 7)) & 1) === 1;
    case 'int8':
    case 'int16':
    case 'int32':
    case 'date':
    case 'float64':
    case 'int64':
    case 'timestamp':
      return values[j];
    case 'decimal':
      return formatDecimal(readDecimalUnscaled(d.values as unknown as Uint32Array, j * 4), t.scale);
    case 'text':
      return utf8.decode(values.subarray(Number(d.valueOffsets[j]), Number(d.valueOffsets[j + 1])));
    case 'binary':
      return values.slice(Number(d.valueOffsets[j]), Number(d.valueOffsets[j + 1]));
    case 'list': {
      const child = d.children[0]!;
      const out: unknown[] = [];
      for (let k = Number(d.valueOffsets[j]); k < Number(d.valueOffsets[j + 1]); k++)
        out.push(readAt(child, k, t.element));
      return out;
    }
  }
}

function readColumn(rb: RecordBatch, index: number, t: LogicalType): unknown[] {
  const d = rb.data.children[index]!;
  return Array.from({ length: rb.numRows }, (_, i) => readAt(d, i, t));
}

function ipcRoundTrip(rb: RecordBatch): RecordBatch {
  const batches = tableFromIPC(tableToIPC(new Table(rb))).batches;
  expect(batches).toHaveLength(1);
  return batches[0]!;
}

function ipcBytes(rb: RecordBatch): Uint8Array {
  return tableToIPC(new Table(rb));
}

// ---- what a value should read back as ----

/** Canonical form of an input value: decimals at the column's scale, everything else as given. */
function expected(v: unknown, t: LogicalType): unknown {
  if (v === null) return null;
  if (t.kind === 'decimal') return formatDecimal(decimalUnscaled(v as string, t.scale), t.scale);
  if (t.kind === 'list') return (v as unknown[]).map((e) => expected(e, t.element));
  if (t.kind === 'float64' && Number.isNaN(v)) return Number.NaN;
  return v;
}

/** Independent (BigInt, string-based) exact parse of decimal text at a scale. */
function decimalUnscaled(s: string, scale: number): bigint {
  const m = /^([+-]?)(\d*)(?:\.(\d*))?$/.exec(s)!;
  const frac = (m[3] ?? '').padEnd(scale, '0');
  expect(/^0*$/.test(frac.slice(scale))).toBe(true);
  const u = BigInt((m[2] || '0') + frac.slice(0, scale));
  return m[1] === '-' ? -u : u;
}

function label(t: LogicalType): string {
  return JSON.stringify(t);
}

describe('encodeRows round-trips every logical kind exactly', () => {
  for (const t of KINDS) {
    it(label(t), () => {
      const schema = schemaOf(col('v', t));
      fc.assert(
        fc.property(
          fc.array(fc.option(arbitraryOf(t), { nil: null, freq: 5 }), { maxLength: 40 }),
          (values) => {
            const rb = encodeRows(
              schema,
              values.map((v) => ({ v })),
              META,
            );
            const want = values.map((v) => expected(v, t));
            expect(rb.numRows).toBe(values.length);
            expect(readColumn(rb, 0, t)).toEqual(want);
            expect(readColumn(ipcRoundTrip(rb), 0, t)).toEqual(want);
            // The same through an encoder that starts with room for one row: every buffer grows.
            const enc = new BatchEncoder(schema, { phase: META.phase, capacity: 1 });
            values.forEach((v, i) => {
              enc.appendValue(0, v);
              enc.appendMeta(META.op, META.posPrefix + ordinalHex(i), null, META.snapshot);
            });
            expect(readColumn(enc.finish(META.ingestTsNanos), 0, t)).toEqual(want);
          },
        ),
        { numRuns: 60 },
      );
    });
  }

  it('keeps -0 and NaN distinct from 0 (float64)', () => {
    const rb = encodeRows(
      schemaOf(col('f', { kind: 'float64' })),
      [{ f: -0 }, { f: Number.NaN }, { f: 0 }],
      META,
    );
    const got = readColumn(ipcRoundTrip(rb), 0, { kind: 'float64' });
    expect(Object.is(got[0], -0)).toBe(true);
    expect(Number.isNaN(got[1])).toBe(true);
    expect(Object.is(got[2], 0)).toBe(true);
  });

  it('rescales decimal text exactly and never rounds', () => {
    const t: LogicalType = { kind: 'decimal', precision: 5, scale: 2 };
    const rb = encodeRows(
      schemaOf(col('d', t)),
      ['1.5', '-0.01', '999.99', '-999.99', '7', '7.', '.5', '+3.10', '1.500', '-0', '0000012.3'].map(
        (d) => ({ d }),
      ),
      META,
    );
    const words = rb.data.children[0]!.values as Uint32Array;
    const unscaled = Array.from({ length: rb.numRows }, (_, i) => readDecimalUnscaled(words, i * 4));
    expect(unscaled).toEqual([150n, -1n, 99999n, -99999n, 700n, 700n, 50n, 310n, 150n, 0n, 1230n]);
  });
});

describe('metadata tail', () => {
  const schema = schemaOf(col('id', { kind: 'int64' }, false), col('name', { kind: 'text' }));

  it('follows the data columns with the exact wire types', () => {
    const rb = encodeRows(schema, [{ id: 1n, name: 'a' }], META);
    const names = rb.schema.fields.map((f) => f.name);
    expect(names).toEqual(['id', 'name', ...METADATA_COLUMNS]);
    const want = metadataFields();
    for (const rbRound of [rb, ipcRoundTrip(rb)]) {
      const tail = rbRound.schema.fields.slice(2);
      tail.forEach((f, k) => {
        expect(String(f.type)).toBe(String(want[k]!.type));
        expect(f.nullable).toBe(want[k]!.nullable);
      });
      expect(tail.map((f) => String(f.type))).toEqual([
        'Uint8',
        'Utf8',
        'Timestamp<NANOSECOND, UTC>',
        'Timestamp<NANOSECOND, UTC>',
        'Bool',
        'Utf8',
      ]);
      expect(tail.map((f) => f.nullable)).toEqual([false, false, true, false, false, false]);
      // Data types inside the batch match the schema (not only the declared fields).
      rbRound.data.children.slice(2).forEach((d, k) => {
        expect(String(d.type)).toBe(String(want[k]!.type));
      });
    }
  });

  it('writes __pos = posPrefix + ordinalHex(ordinalBase + i) and the per-batch constants', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 32 - 10 }),
        fc.integer({ min: 0, max: 9 }),
        fc.option(fc.bigInt({ min: MIN_I64, max: MAX_I64 }), { nil: null }),
        fc.boolean(),
        fc.constantFrom('incremental', 'snapshot', 'stream') as fc.Arbitrary<RowsMeta['phase']>,
        fc.constantFrom(0, 1, 2) as fc.Arbitrary<RowsMeta['op']>,
        (ordinalBase, n, commitTsNanos, snapshot, phase, op) => {
          const meta = { ...META, ordinalBase, commitTsNanos, snapshot, phase, op };
          const rb = ipcRoundTrip(
            encodeRows(
              schema,
              Array.from({ length: n }, (_, i) => ({ id: BigInt(i), name: null })),
              meta,
            ),
          );
          const m = 2;
          const str: LogicalType = { kind: 'text' };
          const i64: LogicalType = { kind: 'int64' };
          expect(readColumn(rb, m, { kind: 'int8' })).toEqual(Array(n).fill(op));
          expect(readColumn(rb, m + 1, str)).toEqual(
            Array.from({ length: n }, (_, i) => META.posPrefix + ordinalHex(ordinalBase + i)),
          );
          expect(readColumn(rb, m + 2, i64)).toEqual(Array(n).fill(commitTsNanos));
          expect(readColumn(rb, m + 3, i64)).toEqual(Array(n).fill(META.ingestTsNanos));
          expect(readColumn(rb, m + 4, { kind: 'bool' })).toEqual(Array(n).fill(snapshot));
          expect(readColumn(rb, m + 5, str)).toEqual(Array(n).fill(phase));
        },
      ),
      { numRuns: 100 },
    );
  });

  it('keeps __pos exact whether the ordinals run on (hex carries included) or break: a gap, another prefix, a text position', () => {
    // Segments of rows: consecutive ordinals under one prefix (starting near a carry of the hex
    // digits), or one row whose position is given as text.
    const segment = fc.oneof(
      fc.record({
        prefix: fc.constantFrom('i00000000002a', 'p', ''),
        start: fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0xffe0, max: 0x10020 })),
        length: fc.integer({ min: 1, max: 40 }),
      }),
      fc.string({ maxLength: 6 }),
    );
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 4 }), (segments) => {
        const enc = new BatchEncoder(schema, { phase: 'stream', capacity: 2 });
        const want: string[] = [];
        const row = () => {
          enc.col(0).appendBigInt(BigInt(want.length));
          enc.col(1).appendNull();
        };
        for (const s of segments) {
          if (typeof s === 'string') {
            row();
            enc.appendMeta(1, s, null, false);
            want.push(s);
            continue;
          }
          for (let k = 0; k < s.length; k++) {
            row();
            enc.appendMetaOrdinal(1, s.prefix, s.start + k, null, false);
            want.push(s.prefix + ordinalHex(s.start + k));
          }
        }
        expect(readColumn(ipcRoundTrip(enc.finish(9n)), 3, { kind: 'text' })).toEqual(want);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses the ordinal past the largest at the end of a run, keeping the run', () => {
    const enc = new BatchEncoder(schema, { phase: 'stream' });
    const max = 2 ** 32 - 1;
    for (const o of [max - 1, max]) {
      enc.col(0).appendBigInt(BigInt(o));
      enc.col(1).appendNull();
      enc.appendMetaOrdinal(1, 'p', o, null, false);
    }
    expect(() => enc.appendMetaOrdinal(1, 'p', max + 1, null, false)).toThrow(DataError);
    expect(readColumn(enc.finish(0n), 3, { kind: 'text' })).toEqual(['pfffffffe', 'pffffffff']);
  });

  it('keeps per-row op, commit time and snapshot flag exactly, constant or changing', () => {
    const metaRow = fc.record({
      op: fc.constantFrom(0, 1, 2) as fc.Arbitrary<RowsMeta['op']>,
      commit: fc.option(fc.constantFrom(MIN_I64, MAX_I64, 0n, 1_700_000_000_000_000_001n), { nil: null }),
      snapshot: fc.boolean(),
    });
    // Runs of equal metadata, so batches are constant, change once, or change often.
    const runs = fc.array(fc.tuple(metaRow, fc.integer({ min: 1, max: 12 })), { maxLength: 5 });
    fc.assert(
      fc.property(runs, (rs) => {
        const metas = rs.flatMap(([m, k]) => Array(k).fill(m) as (typeof m)[]);
        const enc = new BatchEncoder(schema, { phase: 'stream', capacity: 2 });
        metas.forEach((m, i) => {
          enc.col(0).appendBigInt(BigInt(i));
          enc.col(1).appendNull();
          enc.appendMeta(m.op, `p${i}`, m.commit, m.snapshot);
        });
        expect(enc.rowCount).toBe(metas.length);
        const rb = ipcRoundTrip(enc.finish(9n));
        expect(readColumn(rb, 2, { kind: 'int8' })).toEqual(metas.map((m) => m.op));
        expect(readColumn(rb, 4, { kind: 'int64' })).toEqual(metas.map((m) => m.commit));
        expect(readColumn(rb, 6, { kind: 'bool' })).toEqual(metas.map((m) => m.snapshot));
        expect(readColumn(rb, 3, { kind: 'text' })).toEqual(metas.map((_, i) => `p${i}`));
      }),
      { numRuns: 200 },
    );
  });

  it('refuses an op outside c/u/d and an ingest time outside int64', () => {
    const e = new BatchEncoder(schema, { phase: 'stream' });
    expect(() => e.appendMeta(3 as RowsMeta['op'], 'p', null, false)).toThrow(DataError);
    expect(() => e.appendMeta(1, 'p', 2n ** 63n, false)).toThrow(DataError);
    expect(() => e.appendMetaOrdinal(1, 'p', -1, null, false)).toThrow(DataError);
    // A refused row's metadata left nothing behind: the encoder is still consistent.
    e.col(0).appendBigInt(1n);
    e.col(1).appendText('ok');
    e.appendMeta(1, 'p', null, false);
    expect(readColumn(e.finish(0n), 3, { kind: 'text' })).toEqual(['p']);
    expect(() => new BatchEncoder(schema, { phase: 'later' as RowsMeta['phase'] })).toThrow(BatchError);
    expect(() => new BatchEncoder(schema, { phase: 'stream' }).finish(2n ** 63n)).toThrow(BatchError);
  });

  it('encodes the largest ordinal and refuses one past it', () => {
    const rb = encodeRows(schema, [{ id: 1n, name: 'x' }], { ...META, ordinalBase: 2 ** 32 - 1 });
    expect(readColumn(rb, 3, { kind: 'text' })).toEqual([`${META.posPrefix}ffffffff`]);
    expect(() => encodeRows(schema, [{ id: 1n, name: 'x' }], { ...META, ordinalBase: 2 ** 32 })).toThrow(
      DataError,
    );
  });

  it('is reusable: finish hands the buffers to the batch and starts empty', () => {
    const enc = new BatchEncoder(schema, { phase: 'stream', capacity: 1 });
    for (let i = 0; i < 100; i++) {
      enc.col(0).appendBigInt(BigInt(i));
      enc.col(1).appendText(`row ${i}`);
      enc.appendMeta(2, `p${i}`, BigInt(i) * 1000n, true);
    }
    const first = enc.finish(5n);
    enc.col(0).appendBigInt(-7n);
    enc.col(1).appendNull();
    enc.appendMeta(0, 'q', null, false);
    const second = enc.finish(6n);
    expect(first.numRows).toBe(100);
    expect(readColumn(first, 0, { kind: 'int64' })).toEqual(Array.from({ length: 100 }, (_, i) => BigInt(i)));
    expect(readColumn(first, 1, { kind: 'text' })[99]).toBe('row 99');
    expect(readColumn(second, 0, { kind: 'int64' })).toEqual([-7n]);
    expect(readColumn(second, 1, { kind: 'text' })).toEqual([null]);
    expect(readColumn(second, 4, { kind: 'int64' })).toEqual([null]);
    expect(enc.rowCount).toBe(0);
  });
});

describe('refusals', () => {
  const enc = (t: LogicalType, nullable = true) =>
    new BatchEncoder(schemaOf(col('c', t, nullable)), { phase: 'stream' });
  const dec = (p: number, s: number) => enc({ kind: 'decimal', precision: p, scale: s }).col(0);

  it('refuses decimal overflow and digits beyond the scale, never rounding', () => {
    expect(() => dec(12, 2).appendDecimalText('10000000000')).toThrow(/more than 10 integer digits/);
    expect(() => dec(12, 2).appendDecimalText('1.234')).toThrow(/beyond scale 2/);
    expect(() => dec(12, 2).appendDecimalText('-0.001')).toThrow(DataError);
    expect(() => dec(38, 0).appendDecimalText('1'.repeat(39))).toThrow(DataError);
    expect(() => dec(38, 0).appendDecimalText('9'.repeat(60))).toThrow(DataError);
    expect(() => dec(2, 2).appendDecimalText('1.00')).toThrow(DataError);
    expect(() => dec(38, 0).appendDecimalUnscaled(10n ** 38n)).toThrow(DataError);
    for (const bad of ['NaN', 'Infinity', '1e5', '', '-', '.', '1.2.3', ' 1', '1 ', '0x10', '١']) {
      expect(() => dec(12, 2).appendDecimalText(bad), bad).toThrow(DataError);
    }
    // Trailing zeros beyond the scale are exact, so they are accepted.
    expect(() => dec(12, 2).appendDecimalText('1.2300000')).not.toThrow();
  });

  it('refuses decimal overflow and extra digits from Postgres binary NUMERIC', () => {
    expect(() => dec(12, 2).appendNumericBinary(pgNumeric(123456n, 4), 0)).toThrow(/beyond scale 2/); // 12.3456
    expect(() => dec(4, 0).appendNumericBinary(pgNumeric(12345n, 0), 0)).toThrow(/integer digits/);
    expect(() => dec(38, 0).appendNumericBinary(pgNumeric(10n ** 40n, 0), 0)).toThrow(DataError);
    const nan = new Uint8Array([0, 0, 0, 0, 0xc0, 0, 0, 0]);
    expect(() => dec(12, 2).appendNumericBinary(nan, 0)).toThrow(/NaN or infinite/);
  });

  it('names the column and the JS type of a wrong value', () => {
    const cases: [LogicalType, unknown, RegExp][] = [
      [{ kind: 'int64' }, 5, /column "c" \(int64\) takes a bigint or null, got number/],
      [{ kind: 'timestamp', utc: true }, new Date(0), /got Date/],
      [{ kind: 'decimal', precision: 10, scale: 2 }, 1.5, /got number/],
      [{ kind: 'int32' }, 5n, /got bigint/],
      [{ kind: 'text' }, 5, /got number/],
      [{ kind: 'binary' }, 'abc', /got string/],
      [{ kind: 'bool' }, 1, /got number/],
      [{ kind: 'date' }, '2020-01-01', /got string/],
      [{ kind: 'list', element: { kind: 'int32' } }, '{1,2}', /got string/],
      [{ kind: 'list', element: { kind: 'int32' } }, [1, 'x'], /column "c\[\]" \(int32\).*got string/],
      [{ kind: 'float64' }, undefined, /got undefined/],
    ];
    for (const [t, v, msg] of cases) {
      expect(() => enc(t).appendValue(0, v)).toThrow(DataError);
      expect(() => enc(t).appendValue(0, v)).toThrow(msg);
    }
    // A missing key is undefined: refused rather than silently written as NULL.
    expect(() => encodeRows(schemaOf(col('c', { kind: 'int32' })), [{ other: 1 }], META)).toThrow(
      /got undefined/,
    );
  });

  it('refuses out-of-range integers and non-integers', () => {
    expect(() => enc({ kind: 'int32' }).appendValue(0, 2 ** 31)).toThrow(DataError);
    expect(() => enc({ kind: 'int32' }).appendValue(0, 1.5)).toThrow(DataError);
    expect(() => enc({ kind: 'int16' }).appendValue(0, 40000)).toThrow(DataError);
    expect(() => enc({ kind: 'int8' }).appendValue(0, -129)).toThrow(DataError);
    expect(() => enc({ kind: 'date' }).appendValue(0, Number.NaN)).toThrow(DataError);
    expect(() => enc({ kind: 'int64' }).appendValue(0, 2n ** 63n)).toThrow(DataError);
    expect(() => enc({ kind: 'timestamp', utc: true }).appendValue(0, MIN_I64 - 1n)).toThrow(DataError);
    expect(() =>
      enc({ kind: 'int64' })
        .col(0)
        .appendInt(2 ** 53),
    ).toThrow(DataError);
    expect(() => enc({ kind: 'int16' }).col(0).appendInt32BE(be32(70000), 0)).toThrow(DataError);
    // int64 max plus a positive bias leaves the range.
    expect(() =>
      enc({ kind: 'timestamp', utc: true }).col(0).appendInt64BE(be64(MAX_I64), 0, PG_EPOCH_MICROS),
    ).toThrow(/leaves the int64 range/);
  });

  it('refuses NULL in a NOT NULL column, a foreign appender, and incomplete rows', () => {
    expect(() => enc({ kind: 'int32' }, false).appendValue(0, null)).toThrow(/declared NOT NULL/);
    expect(() => enc({ kind: 'int64' }).col(0).appendText('1')).toThrow(/appendText cannot append/);
    expect(() => enc({ kind: 'text' }).col(0).appendBytes(new Uint8Array(1))).toThrow(DataError);
    const e = new BatchEncoder(schemaOf(col('a', { kind: 'int32' }), col('b', { kind: 'int32' })), {
      phase: 'stream',
    });
    e.col(0).appendInt(1);
    e.appendMeta(1, 'p', null, false);
    expect(() => e.finish(0n)).toThrow(BatchError);
    const l = enc({ kind: 'list', element: { kind: 'int32' } });
    l.col(0).beginList().appendInt(1);
    l.appendMeta(1, 'p', null, false);
    expect(() => l.finish(0n)).toThrow(BatchError);
    expect(() => l.col(0).endList()).not.toThrow();
    expect(() => l.col(0).endList()).toThrow(BatchError);
  });
});

// ---- the raw path: the same values as a binary decoder sees them ----

function be16(n: number): Uint8Array {
  const b = new Uint8Array(2);
  new DataView(b.buffer).setInt16(0, n);
  return b;
}
function be32(n: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setInt32(0, n);
  return b;
}
function be64(n: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigInt64(0, n);
  return b;
}
function bef64(x: number): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setFloat64(0, x);
  return b;
}

/** Postgres binary NUMERIC of `unscaled / 10^scale`: ndigits, weight, sign, dscale, base-10000 digits. */
function pgNumeric(unscaled: bigint, scale: number): Uint8Array {
  const negative = unscaled < 0n;
  const text = (negative ? -unscaled : unscaled).toString().padStart(scale + 1, '0');
  let int = text.slice(0, text.length - scale);
  let frac = text.slice(text.length - scale);
  int = int.padStart(Math.ceil(int.length / 4) * 4, '0');
  frac = frac.padEnd(Math.ceil(frac.length / 4) * 4, '0');
  let groups = (int + frac).match(/\d{4}/g)!.map(Number);
  let weight = int.length / 4 - 1;
  while (groups.length > 0 && groups[0] === 0) {
    groups = groups.slice(1);
    weight--;
  }
  while (groups.length > 0 && groups[groups.length - 1] === 0) groups = groups.slice(0, -1);
  if (groups.length === 0) weight = 0;
  const b = new Uint8Array(8 + 2 * groups.length);
  const v = new DataView(b.buffer);
  v.setInt16(0, groups.length);
  v.setInt16(2, weight);
  v.setUint16(4, negative ? 0x4000 : 0);
  v.setUint16(6, scale);
  groups.forEach((g, k) => {
    v.setUint16(8 + 2 * k, g);
  });
  return b;
}

/** Bytes placed at offset 3 of a larger buffer, to exercise start/end handling. */
function framed(bytes: Uint8Array): [Uint8Array, number, number] {
  const b = new Uint8Array(bytes.length + 7).fill(0xee);
  b.set(bytes, 3);
  return [b, 3, 3 + bytes.length];
}

/** Appends `v` through the raw appenders a binary decoder would use. */
function appendRaw(w: ColumnWriter, t: LogicalType, v: unknown): void {
  if (v === null) {
    w.appendNull();
    return;
  }
  switch (t.kind) {
    case 'bool':
      w.appendBool(v as boolean);
      return;
    case 'int8':
      w.appendInt(v as number);
      return;
    case 'int16':
      w.appendInt16BE(be16(v as number), 0);
      return;
    case 'int32':
      w.appendInt32BE(be32(v as number), 0);
      return;
    case 'date': {
      const d = v as number;
      if (d - PG_EPOCH_DAYS >= -(2 ** 31)) w.appendInt32BE(be32(d - PG_EPOCH_DAYS), 0, PG_EPOCH_DAYS);
      else w.appendDays(d);
      return;
    }
    case 'int64':
      w.appendInt64BE(be64(v as bigint), 0);
      return;
    case 'timestamp': {
      const us = v as bigint;
      const shifted = us - BigInt(PG_EPOCH_MICROS);
      if (shifted >= MIN_I64) w.appendInt64BE(be64(shifted), 0, PG_EPOCH_MICROS);
      else w.appendMicros(us);
      return;
    }
    case 'float64':
      w.appendFloat64BE(bef64(v as number), 0);
      return;
    case 'decimal':
      w.appendNumericBinary(pgNumeric(decimalUnscaled(v as string, t.scale), t.scale), 0);
      return;
    case 'text':
      w.appendUtf8Bytes(...framed(new TextEncoder().encode(v as string)));
      return;
    case 'binary':
      w.appendBytes(...framed(v as Uint8Array));
      return;
    case 'list': {
      const child = w.beginList();
      for (const e of v as unknown[]) appendRaw(child, t.element, e);
      w.endList();
      return;
    }
  }
}

describe('byte identity of the row-map path and the raw path', () => {
  const columns = KINDS.map((t, i) => col(`c${i}`, t));
  const schema = schemaOf(...columns);
  const rowArb = fc.record(
    Object.fromEntries(columns.map((c) => [c.name, fc.option(arbitraryOf(c.type), { nil: null, freq: 6 })])),
  ) as fc.Arbitrary<Record<string, unknown>>;

  it('gives identical Arrow IPC bytes for the same rows', () => {
    fc.assert(
      fc.property(
        fc.array(rowArb, { maxLength: 25 }),
        fc.integer({ min: 0, max: 1000 }),
        (rows, ordinalBase) => {
          const viaRows = encodeRows(schema, rows, { ...META, ordinalBase });
          const enc = new BatchEncoder(schema, { phase: META.phase, capacity: 1 });
          rows.forEach((row, r) => {
            columns.forEach((c, i) => {
              appendRaw(enc.col(i), c.type, row[c.name]);
            });
            enc.appendMeta(META.op, META.posPrefix + ordinalHex(ordinalBase + r), null, META.snapshot);
          });
          const viaRaw = enc.finish(META.ingestTsNanos);
          expect(Buffer.from(ipcBytes(viaRaw)).equals(Buffer.from(ipcBytes(viaRows)))).toBe(true);
        },
      ),
      { numRuns: 80 },
    );
  });

  it('stores one NaN bit pattern whatever payload the wire carried', () => {
    const s = schemaOf(col('f', { kind: 'float64' }));
    const a = new BatchEncoder(s, { phase: 'stream' });
    const b = new BatchEncoder(s, { phase: 'stream' });
    a.col(0).appendFloat64BE(new Uint8Array([0x7f, 0xf8, 0, 0, 0, 0, 0, 1]), 0);
    a.col(0).appendFloat64BE(new Uint8Array([0xff, 0xf0, 0, 0, 0, 0, 0, 9]), 0);
    a.col(0).appendFloat32BE(new Uint8Array([0x7f, 0xc0, 0, 1]), 0);
    for (let i = 0; i < 3; i++) b.col(0).appendFloat64(Number.NaN);
    for (const e of [a, b]) for (let i = 0; i < 3; i++) e.appendMeta(1, 'p', null, false);
    expect(Buffer.from(ipcBytes(a.finish(1n))).equals(Buffer.from(ipcBytes(b.finish(1n))))).toBe(true);
  });

  it('widens float32 exactly and encodes decimals identically from text, unscaled and NUMERIC', () => {
    const s = schemaOf(col('f', { kind: 'float64' }), col('d', { kind: 'decimal', precision: 38, scale: 6 }));
    fc.assert(
      fc.property(
        fc.float({ noNaN: true }),
        // Small values take the double-arithmetic fast paths, large ones the 128-bit word paths.
        fc.oneof(
          fc.bigInt({ min: -(10n ** 38n) + 1n, max: 10n ** 38n - 1n }),
          fc.bigInt({ min: -(2n ** 53n) - 2n, max: 2n ** 53n + 2n }),
          fc.bigInt({ min: -100_000n, max: 100_000n }),
        ),
        (x, u) => {
          const a = new BatchEncoder(s, { phase: 'stream' });
          const b = new BatchEncoder(s, { phase: 'stream' });
          const c = new BatchEncoder(s, { phase: 'stream' });
          const f4 = new Uint8Array(4);
          new DataView(f4.buffer).setFloat32(0, x);
          a.col(0).appendFloat32BE(f4, 0);
          b.col(0).appendFloat64(x);
          c.col(0).appendFloat64BE(bef64(x), 0);
          a.col(1).appendDecimalText(formatDecimal(u, 6));
          b.col(1).appendDecimalUnscaled(u);
          c.col(1).appendNumericBinary(pgNumeric(u, 6), 0);
          const bytes = [a, b, c].map((e) => {
            e.appendMeta(0, 'p', 1n, false);
            return Buffer.from(ipcBytes(e.finish(1n)));
          });
          expect(bytes[0]!.equals(bytes[1]!)).toBe(true);
          expect(bytes[2]!.equals(bytes[1]!)).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('encodes a lone surrogate as U+FFFD on both paths', () => {
    const s = schemaOf(col('t', { kind: 'text' }));
    const a = new BatchEncoder(s, { phase: 'stream' });
    const b = new BatchEncoder(s, { phase: 'stream' });
    a.col(0).appendText('a\ud800b');
    b.col(0).appendUtf8Bytes(new TextEncoder().encode('a\ud800b'), 0, 5);
    a.appendMeta(1, 'p', null, false);
    b.appendMeta(1, 'p', null, false);
    const [ra, rb] = [a.finish(0n), b.finish(0n)];
    expect(readColumn(ra, 0, { kind: 'text' })).toEqual(['a\ufffdb']);
    expect(Buffer.from(ipcBytes(ra)).equals(Buffer.from(ipcBytes(rb)))).toBe(true);
  });
});
