/**
 * Position schemes: string order (plain `<`) must equal the numeric order of their fields, and
 * every position must parse back to the fields it was made from. Crash cleanup deletes objects
 * by comparing these strings, so the order properties run over the full field ranges and their
 * edges (carries from one hex digit width to the next, 2^32 ordinals and fences, 2^48
 * sequences), and the incremental scheme of fences (`j`) must sort after every position written
 * before it (`i`), so existing lakes keep their order without a migration.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DataError } from '../../shared/contracts/errors.js';
import {
  binlogFileIndex,
  formatLsn,
  incrementalPosPrefix,
  incrementalSeqOf,
  incrementalStepStart,
  MAX_FENCE,
  MAX_ORDINAL,
  MAX_SEQ,
  mysqlPosition,
  objectStartPosition,
  ordinalHex,
  parseIncrementalPosition,
  parseLsn,
  parseMysqlPosition,
  parsePgPosition,
  pgPosition,
  positionAfter,
} from '../../shared/position/position.js';

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const cmpNum = (a: number | bigint, b: number | bigint) => (a < b ? -1 : a > b ? 1 : 0);
/** Lexicographic comparison of field tuples: the order a position must have. */
const cmpFields = (a: readonly (number | bigint)[], b: readonly (number | bigint)[]) => {
  for (let i = 0; i < a.length; i++) {
    const c = cmpNum(a[i]!, b[i]!);
    if (c !== 0) return c;
  }
  return 0;
};

/** Integers in [0, max], biased towards 0, max and digit-width boundaries (0xf -> 0x10, ...). */
const field = (max: number) =>
  fc.oneof(
    fc.integer({ min: 0, max }),
    fc.integer({ min: 0, max: 300 }),
    fc
      .nat({ max: Math.floor(Math.log2(max)) })
      .chain((bit) => fc.constantFrom(2 ** bit - 1, 2 ** bit, Math.min(max, 2 ** bit + 1))),
    fc.constant(max),
  );
const bigField = (bits: number) =>
  fc.oneof(
    fc.bigInt({ min: 0n, max: (1n << BigInt(bits)) - 1n }),
    fc.bigInt({ min: 0n, max: 300n }),
    fc.nat({ max: bits - 1 }).map((b) => 1n << BigInt(b)),
    fc.constant((1n << BigInt(bits)) - 1n),
  );

/** A legacy incremental position (written before fences), built here independently of the codec. */
const legacyPosition = (seq: number, ordinal: number) =>
  `i${seq.toString(16).padStart(12, '0')}${ordinal.toString(16).padStart(8, '0')}`;

describe('incremental positions', () => {
  const fields = fc.tuple(field(MAX_SEQ), field(MAX_FENCE), field(MAX_ORDINAL));
  it('sort like (seq, fence, ordinal) and parse back', () => {
    fc.assert(
      fc.property(fields, fields, ([s1, f1, o1], [s2, f2, o2]) => {
        const a = incrementalPosPrefix(s1, f1) + ordinalHex(o1);
        const b = incrementalPosPrefix(s2, f2) + ordinalHex(o2);
        expect(cmp(a, b)).toBe(cmpFields([s1, f1, o1], [s2, f2, o2]));
        expect(a).toHaveLength(29);
        expect(a).toMatch(/^j[0-9a-f]{28}$/);
        expect(objectStartPosition(s1, f1, o1)).toBe(a);
        expect(parseIncrementalPosition(a)).toEqual({ seq: s1, fence: f1, ordinal: o1 });
        expect(incrementalSeqOf(a)).toBe(s1);
        expect(incrementalSeqOf(incrementalPosPrefix(s1, f1))).toBe(s1);
        expect(incrementalSeqOf(incrementalStepStart(s1))).toBe(s1);
      }),
      { numRuns: 5000 },
    );
  });

  it('at one step, every row of a higher fence sorts after every row of a lower one', () => {
    fc.assert(
      fc.property(
        field(MAX_SEQ),
        fc.tuple(field(MAX_FENCE), field(MAX_FENCE)),
        field(MAX_ORDINAL),
        field(MAX_ORDINAL),
        (seq, [x, y], o1, o2) => {
          fc.pre(x !== y);
          const [low, high] = x < y ? [x, y] : [y, x];
          // The stale writer's last row against the new holder's first: the new holder still wins.
          expect(objectStartPosition(seq, low, o1) < objectStartPosition(seq, high, o2)).toBe(true);
        },
      ),
      { numRuns: 5000 },
    );
  });

  it('every j position sorts after every legacy i position, which still parses', () => {
    const legacy = fc.tuple(field(MAX_SEQ), field(MAX_ORDINAL));
    fc.assert(
      fc.property(legacy, legacy, fields, ([ls, lo], [ls2, lo2], [s, f, o]) => {
        const old = legacyPosition(ls, lo);
        const now = objectStartPosition(s, f, o);
        expect(old < now).toBe(true);
        expect(old < incrementalStepStart(s)).toBe(true);
        // Legacy positions keep their own (seq, ordinal) order.
        expect(cmp(old, legacyPosition(ls2, lo2))).toBe(cmpFields([ls, lo], [ls2, lo2]));
        expect(parseIncrementalPosition(old)).toEqual({ seq: ls, fence: undefined, ordinal: lo });
        expect(incrementalSeqOf(old)).toBe(ls);
        expect(incrementalSeqOf(old.slice(0, 13))).toBe(ls);
      }),
      { numRuns: 5000 },
    );
  });

  it('every row of a later step sorts after every row and object start of an earlier one, whatever the fences', () => {
    fc.assert(
      fc.property(
        field(MAX_SEQ - 1),
        fc.tuple(field(MAX_FENCE), field(MAX_FENCE)),
        field(MAX_ORDINAL),
        field(MAX_ORDINAL),
        (seq, [f1, f2], lastRow, firstRow) => {
          const lastOfStep = objectStartPosition(seq, f1, lastRow);
          const nextStep = incrementalStepStart(seq + 1);
          const nextObject = objectStartPosition(seq + 1, f2);
          // The step start separates the steps, for any fence on either side.
          expect(lastOfStep < nextStep).toBe(true);
          expect(nextStep < nextObject).toBe(true);
          expect(nextObject <= objectStartPosition(seq + 1, f2, firstRow)).toBe(true);
          expect(incrementalStepStart(seq) < objectStartPosition(seq, f1)).toBe(true);
          expect(objectStartPosition(seq, f1) <= lastOfStep).toBe(true);
        },
      ),
      { numRuns: 5000 },
    );
  });

  it('refuses out-of-range fields and foreign strings', () => {
    expect(() => incrementalPosPrefix(-1, 1)).toThrow(DataError);
    expect(() => incrementalPosPrefix(MAX_SEQ + 1, 1)).toThrow(DataError);
    expect(() => incrementalPosPrefix(1.5, 1)).toThrow(DataError);
    expect(() => incrementalPosPrefix(1, -1)).toThrow(DataError);
    expect(() => incrementalPosPrefix(1, MAX_FENCE + 1)).toThrow(DataError);
    expect(() => incrementalPosPrefix(1, 2.5)).toThrow(DataError);
    expect(() => incrementalStepStart(MAX_SEQ + 1)).toThrow(DataError);
    expect(() => ordinalHex(MAX_ORDINAL + 1)).toThrow(DataError);
    expect(ordinalHex(MAX_ORDINAL)).toBe('ffffffff');
    expect(MAX_FENCE).toBe(2 ** 32 - 1);
    expect(objectStartPosition(1, 2)).toBe('j0000000000010000000200000000');
    expect(incrementalPosPrefix(1, 2)).toBe('j00000000000100000002');
    expect(incrementalStepStart(1)).toBe('j000000000001');
    for (const bad of [
      '',
      'i0000000000010000000',
      'I00000000000100000000',
      'i0000000000010000000G',
      'j000000000001000000020000000',
      'j00000000000100000002000000000',
      'J0000000000010000000200000000',
      'p00000000000000000000000',
    ]) {
      expect(() => parseIncrementalPosition(bad), bad).toThrow(DataError);
    }
    for (const other of [
      'p000000000000000000000000',
      'm0',
      'j00000000000',
      'j0000000000010000000',
      'i00000000000100',
    ]) {
      expect(incrementalSeqOf(other), other).toBeUndefined();
    }
  });
});

describe('Postgres positions', () => {
  const fields = fc.tuple(bigField(64), field(MAX_ORDINAL));
  it('sort like (commit LSN, ordinal) and parse back', () => {
    fc.assert(
      fc.property(fields, fields, ([l1, o1], [l2, o2]) => {
        const a = pgPosition(l1, o1);
        expect(cmp(a, pgPosition(l2, o2))).toBe(cmpFields([l1, o1], [l2, o2]));
        expect(a).toMatch(/^p[0-9a-f]{24}$/);
        expect(parsePgPosition(a)).toEqual({ commitLsn: l1, ordinal: o1 });
      }),
      { numRuns: 5000 },
    );
  });

  it('parses and formats LSN text as Postgres prints it', () => {
    expect(parseLsn('16/B374D848')).toBe(0x16b374d848n);
    expect(formatLsn(0x16b374d848n)).toBe('16/B374D848');
    expect(formatLsn(0n)).toBe('0/0');
    expect(parseLsn('0/0')).toBe(0n);
    expect(formatLsn(2n ** 64n - 1n)).toBe('FFFFFFFF/FFFFFFFF');
    fc.assert(
      fc.property(bigField(64), (lsn) => {
        const text = formatLsn(lsn);
        expect(text).toMatch(/^(0|[1-9A-F][0-9A-F]*)\/(0|[1-9A-F][0-9A-F]*)$/);
        expect(parseLsn(text)).toBe(lsn);
      }),
      { numRuns: 5000 },
    );
    for (const bad of ['', '16', '16/', '/1', '16/B374D848/1', '123456789/0', 'G/0']) {
      expect(() => parseLsn(bad), bad).toThrow(DataError);
    }
    expect(() => pgPosition(-1n, 0)).toThrow(DataError);
    expect(() => pgPosition(2n ** 64n, 0)).toThrow(DataError);
  });
});

describe('MySQL positions', () => {
  const fields = fc.tuple(field(2 ** 32 - 1), field(2 ** 32 - 1), bigField(64), field(MAX_ORDINAL));
  it('sort like (epoch, file index, offset, ordinal) and parse back', () => {
    fc.assert(
      fc.property(fields, fields, (x, y) => {
        const a = mysqlPosition(...x);
        expect(cmp(a, mysqlPosition(...y))).toBe(cmpFields(x, y));
        expect(a).toMatch(/^m[0-9a-f]{40}$/);
        const back = parseMysqlPosition(a);
        expect([back.epoch, back.fileIndex, back.offset, back.ordinal]).toEqual(x);
      }),
      { numRuns: 5000 },
    );
  });

  it('reads the binlog file index from file names', () => {
    expect(binlogFileIndex('mysql-bin.000123')).toBe(123);
    expect(binlogFileIndex('binlog.1000000')).toBe(1_000_000);
    expect(() => binlogFileIndex('binlog')).toThrow(DataError);
    expect(() => binlogFileIndex('binlog.index')).toThrow(DataError);
    // A file index past 999999 (seven digits) still sorts after 999999.
    expect(mysqlPosition(0, 999_999, 0n, 0) < mysqlPosition(0, 1_000_000, 0n, 0)).toBe(true);
  });
});

describe("positionAfter (a CDC table's next)", () => {
  it('sorts after the position and at or before every later one of the table', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 2n ** 64n - 2n }),
        fc.integer({ min: 0, max: 2 ** 32 - 2 }),
        (lsn, ordinal) => {
          const pos = pgPosition(lsn, ordinal);
          const next = positionAfter(pos);
          expect(next > pos).toBe(true);
          expect(next <= pgPosition(lsn, ordinal + 1)).toBe(true);
          expect(next < pgPosition(lsn + 1n, 0)).toBe(true);
        },
      ),
    );
    expect(() => positionAfter('p' + '0'.repeat(16) + 'ffffffff')).toThrow(DataError);
    expect(() => positionAfter('nope')).toThrow(DataError);
  });
});
