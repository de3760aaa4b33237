/**
 * Position schemes: string order (plain `<`) must equal the numeric order of their fields, and
 * every position must parse back to the fields it was made from. Crash cleanup deletes objects
 * by comparing these strings, so the order properties run over the full field ranges and their
 * edges (carries from one hex digit width to the next, 2^32 ordinals, 2^48 sequences).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DataError } from '../../shared/contracts/errors.js';
import {
  binlogFileIndex,
  formatLsn,
  incrementalPosPrefix,
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

describe('incremental positions', () => {
  const fields = fc.tuple(field(MAX_SEQ), field(MAX_ORDINAL));
  it('sort like (seq, ordinal) and parse back', () => {
    fc.assert(
      fc.property(fields, fields, ([s1, o1], [s2, o2]) => {
        const a = incrementalPosPrefix(s1) + ordinalHex(o1);
        const b = incrementalPosPrefix(s2) + ordinalHex(o2);
        expect(cmp(a, b)).toBe(cmpFields([s1, o1], [s2, o2]));
        expect(a).toHaveLength(21);
        expect(a).toMatch(/^i[0-9a-f]{20}$/);
        expect(parseIncrementalPosition(a)).toEqual({ seq: s1, ordinal: o1 });
      }),
      { numRuns: 5000 },
    );
  });

  it('every row of a later step sorts after every row and object start of an earlier one', () => {
    fc.assert(
      fc.property(field(MAX_SEQ - 1), field(MAX_ORDINAL), field(MAX_ORDINAL), (seq, lastRow, firstRow) => {
        const lastOfStep = incrementalPosPrefix(seq) + ordinalHex(lastRow);
        const nextObject = objectStartPosition(seq + 1);
        expect(lastOfStep < nextObject).toBe(true);
        expect(nextObject <= incrementalPosPrefix(seq + 1) + ordinalHex(firstRow)).toBe(true);
        expect(objectStartPosition(seq) <= lastOfStep).toBe(true);
      }),
      { numRuns: 5000 },
    );
  });

  it('refuses out-of-range fields and foreign strings', () => {
    expect(() => incrementalPosPrefix(-1)).toThrow(DataError);
    expect(() => incrementalPosPrefix(MAX_SEQ + 1)).toThrow(DataError);
    expect(() => incrementalPosPrefix(1.5)).toThrow(DataError);
    expect(() => ordinalHex(MAX_ORDINAL + 1)).toThrow(DataError);
    expect(ordinalHex(MAX_ORDINAL)).toBe('ffffffff');
    expect(objectStartPosition(1)).toBe('i00000000000100000000');
    for (const bad of [
      '',
      'i0000000000010000000',
      'I00000000000100000000',
      'i0000000000010000000G',
      'p00000000000000000000000',
    ]) {
      expect(() => parseIncrementalPosition(bad), bad).toThrow(DataError);
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
