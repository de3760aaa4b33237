/**
 * The batch path's DOUBLE and DECIMAL byte parsers (shared/drivers/mysql/wire/ascii-numbers.ts, used
 * by types.ts `rangeAppenderOf`) against the string path they stand in for: `Number(text)` and
 * `ColumnWriter.appendDecimalText(text)`. Over wide inputs (every double's text in several
 * forms, digit strings with leading zeros and any exponent, DECIMAL text of every precision and
 * scale up to the maximum, out-of-range and malformed text) the stored values must be
 * bit-identical and a refused value refused with the same message.
 */
import { Table, tableToIPC } from 'apache-arrow';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BatchEncoder } from '../../shared/dataplane/encoder.js';
import { Op } from '../../shared/dataplane/metadata.js';
import type { LogicalType } from '../../shared/dataplane/schema.js';
import { mapColumn, type ReadPlan, rangeAppenderOf } from '../../shared/drivers/mysql/types.js';
import { doubleOfAscii } from '../../shared/drivers/mysql/wire/ascii-numbers.js';
import { mysqlDecimalText, mysqlDoubleText } from '../harness/mysql-arbitraries.js';

/** Bytes of `text` inside a packet-like buffer, at a random offset between other bytes. */
function framed(text: string, pad: number): [Buffer, number, number] {
  const b = Buffer.alloc(pad + text.length + 3, 0x39);
  b.write(text, pad, 'latin1');
  return [b, pad, pad + text.length];
}

function encoder(t: LogicalType): BatchEncoder {
  return new BatchEncoder(
    { columns: [{ name: 'c', type: t, nullable: false, sourceType: 't' }], primaryKey: [] },
    { phase: 'incremental' },
  );
}

/** The error message of `f`, or undefined when it does not throw. */
function refusal(f: () => void): string | undefined {
  try {
    f();
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

/**
 * Appends `texts` once through the range appender and once through `byString` (the string
 * path); expects the same refusals and byte-identical batches of what was accepted.
 */
function expectSamePaths(
  plan: ReadPlan,
  byString: (enc: BatchEncoder, text: string) => void,
  texts: readonly string[],
  pad: number,
): void {
  const append = rangeAppenderOf(plan, { table: 'db.t', column: 'c' });
  const a = encoder(plan.logical);
  const b = encoder(plan.logical);
  let n = 0;
  for (const text of texts) {
    const [buf, s, e] = framed(text, pad);
    const want = refusal(() => byString(a, text));
    expect(refusal(() => append(b.col(0), buf, s, e))).toBe(want);
    if (want !== undefined) continue;
    a.appendMetaOrdinal(Op.update, 'i000000000001', n, null, false);
    b.appendMetaOrdinal(Op.update, 'i000000000001', n, null, false);
    n++;
  }
  const ipc = (enc: BatchEncoder) => Buffer.from(tableToIPC(new Table(enc.finish(1n))));
  expect(ipc(b).equals(ipc(a))).toBe(true);
}

describe('DOUBLE text from bytes == Number(text)', () => {
  const plan = mapColumn(
    {
      name: 'c',
      dataType: 'double',
      columnType: 'double',
      nullable: false,
      numericPrecision: null,
      numericScale: null,
      charset: null,
    },
    'c',
  ).read;

  it('returns exactly Number(text) whenever it returns a value, over every form of double text', () => {
    fc.assert(
      fc.property(mysqlDoubleText, fc.nat({ max: 8 }), (text, pad) => {
        const [buf, s, e] = framed(text, pad);
        const x = doubleOfAscii(buf, s, e);
        if (x !== undefined) expect(Object.is(x, Number(text))).toBe(true);
      }),
      { numRuns: 20_000 },
    );
  });

  it('returns exactly Number(text) for digits around 2^53 (where accumulating them stops being exact), point anywhere', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.bigInt({ min: 2n ** 53n - 64n, max: 2n ** 53n + 64n }),
          fc.bigInt({ min: 2n ** 52n, max: 10n ** 17n }),
        ),
        fc.nat({ max: 17 }),
        fc.integer({ min: -30, max: 30 }),
        (m, point, exp) => {
          const digits = String(m);
          const at = Math.min(point, digits.length);
          const text = `${digits.slice(0, digits.length - at)}${at > 0 ? `.${digits.slice(digits.length - at)}` : ''}e${exp}`;
          const x = doubleOfAscii(Buffer.from(text, 'latin1'), 0, text.length);
          if (x !== undefined) expect(Object.is(x, Number(text))).toBe(true);
        },
      ),
      { numRuns: 20_000 },
    );
  });

  it('returns exactly Number(text) for 16-17 significant digits over 10^1..10^22 (the checked quotient)', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.bigInt({ min: 2n ** 53n, max: 10n ** 17n - 1n }),
          // Midpoints and near-midpoints between doubles are where a check could go wrong.
          fc
            .double({ min: 1e-6, max: 1e17, noNaN: true })
            .map((x) => BigInt(Math.round(x * 2 ** 20)) * 5n ** 20n),
        ),
        fc.integer({ min: 0, max: 24 }),
        (m, k) => {
          const digits = String(m).padStart(k + 1, '0');
          const text = `${digits.slice(0, digits.length - k)}.${digits.slice(digits.length - k)}`;
          const x = doubleOfAscii(Buffer.from(text, 'latin1'), 0, text.length);
          if (x !== undefined) expect(Object.is(x, Number(text))).toBe(true);
        },
      ),
      { numRuns: 50_000 },
    );
  });

  it('reads the shortest text of almost every double of the bench and lake shapes from its bytes', () => {
    let missed = 0;
    fc.assert(
      fc.property(fc.boolean(), fc.double({ min: 1e-3, max: 1e6, noNaN: true }), (negative, v) => {
        const text = String(negative ? -v : v);
        const x = doubleOfAscii(Buffer.from(text, 'latin1'), 0, text.length);
        if (x === undefined) missed++;
        else expect(Object.is(x, Number(text))).toBe(true); // not v: String(-0) is '0'
      }),
      { numRuns: 10_000 },
    );
    // Ties, powers of two and the few checks a sum cannot settle exactly give up.
    expect(missed).toBeLessThan(100);
  });

  it('returns nothing or Number(text) for any string of number characters (malformed ones included)', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[-+0-9.eE ]{0,12}$/), (text) => {
        const [buf, s, e] = framed(text, 1);
        const x = doubleOfAscii(buf, s, e);
        if (x !== undefined) expect(Object.is(x, Number(text))).toBe(true);
      }),
      { numRuns: 20_000 },
    );
  });

  it('takes the fast path where exactness is certain, and only there', () => {
    const at = (t: string) => doubleOfAscii(Buffer.from(t, 'latin1'), 0, t.length);
    expect(at('12.5')).toBe(12.5);
    expect(Object.is(at('-0'), -0)).toBe(true);
    expect(at('1e22')).toBe(1e22);
    expect(at('9007199254740991')).toBe(2 ** 53 - 1);
    expect(at('7.25E-3')).toBe(0.00725);
    // 2^53 <= m < 10^17 digits over 10^1..10^22: the checked quotient.
    expect(at('0.30000000000000004')).toBe(0.1 + 0.2);
    expect(at('-123.45678901234567')).toBe(-123.45678901234567);
    expect(at('900719925474099.3')).toBe(Number('900719925474099.3'));
    // Digits past 2^53 without a fraction, past 10^17, exponents past 10^22, or not plain text:
    // the string path decides.
    expect(at('9007199254740992')).toBeUndefined();
    expect(at('9007199254740993')).toBeUndefined(); // its digits would round to 2^53
    expect(at('1.00000000000000001')).toBeUndefined();
    expect(at('1e+308')).toBeUndefined();
    expect(at('1e23')).toBeUndefined();
    for (const t of ['', '-', '.', '1e', '1e+', ' 1', '+1', 'Infinity', '0x10', '1.2.3']) {
      expect(at(t)).toBeUndefined();
    }
  });

  it('appends the same float64 values as Number(text) through the range appender', () => {
    fc.assert(
      fc.property(fc.array(mysqlDoubleText, { maxLength: 20 }), fc.nat({ max: 8 }), (texts, pad) =>
        expectSamePaths(plan, (enc, t) => enc.col(0).appendFloat64(Number(t)), texts, pad),
      ),
      { numRuns: 300 },
    );
  });
});

describe('DECIMAL text from bytes == appendDecimalText(text)', () => {
  const planOf = (precision: number, scale: number) =>
    mapColumn(
      {
        name: 'c',
        dataType: 'decimal',
        columnType: `decimal(${precision},${scale})`,
        nullable: false,
        numericPrecision: precision,
        numericScale: scale,
        charset: null,
      },
      'c',
    ).read;
  const precisionScale = fc
    .integer({ min: 1, max: 38 })
    .chain((p) => fc.tuple(fc.constant(p), fc.integer({ min: 0, max: p })));

  it('stores the same 128-bit values for DECIMAL(p, s) text of every precision and scale', () => {
    fc.assert(
      fc.property(
        precisionScale.chain(([p, s]) =>
          fc.tuple(fc.constant(p), fc.constant(s), fc.array(mysqlDecimalText(p, s), { maxLength: 20 })),
        ),
        fc.nat({ max: 8 }),
        ([p, s, texts], pad) =>
          expectSamePaths(planOf(p, s), (enc, t) => enc.col(0).appendDecimalText(t), texts, pad),
      ),
      { numRuns: 500 },
    );
  });

  it('refuses what the text parse refuses, with its message, and accepts the odd forms it accepts', () => {
    fc.assert(
      fc.property(
        precisionScale,
        fc.array(
          fc.oneof(
            // Out of range: one integer digit too many, or digits below the scale.
            fc.stringMatching(/^-?[1-9][0-9]{0,40}(\.[0-9]{0,40})?$/),
            // Any string of decimal characters: signs, points, spaces, exponents.
            fc.stringMatching(/^[-+0-9.e ]{0,10}$/),
          ),
          { maxLength: 10 },
        ),
        ([p, s], texts) =>
          expectSamePaths(planOf(p, s), (enc, t) => enc.col(0).appendDecimalText(t), texts, 0),
      ),
      { numRuns: 500 },
    );
  });

  it('BIGINT UNSIGNED (decimal(20,0)) up to 2^64 - 1', () => {
    const plan = mapColumn(
      {
        name: 'c',
        dataType: 'bigint',
        columnType: 'bigint(20) unsigned',
        nullable: false,
        numericPrecision: 20,
        numericScale: 0,
        charset: null,
      },
      'c',
    ).read;
    fc.assert(
      fc.property(
        fc.array(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map(String), { maxLength: 20 }),
        (texts) => expectSamePaths(plan, (enc, t) => enc.col(0).appendDecimalText(t), texts, 3),
      ),
      { numRuns: 200 },
    );
  });
});
