/**
 * The key codec's two promises, checked against a reference comparator written independently of
 * the codec: exact round-trip, and token order (plain string `<`) == tuple order as the database
 * compares it (decimals exactly via BigInt scaling, text by UTF-8 bytes = C collation, float64 as
 * Postgres: -0 == 0, NaN above +Infinity).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DataError } from '../../shared/contracts/errors.js';
import type { LogicalType } from '../../shared/dataplane/schema.js';
import { decodeKey, encodeKey, isKeyType, KEY_TOKEN_PREFIX } from '../../shared/position/key-codec.js';
import {
  DATE_INFINITY,
  DATE_NEG_INFINITY,
  TIMESTAMP_INFINITY,
  TIMESTAMP_NEG_INFINITY,
} from '../../shared/position/time-text.js';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

// ---------------------------------------------------------------------------------------------
// Reference comparator (the database's order)

function sign(n: number): number {
  return n < 0 ? -1 : n > 0 ? 1 : 0;
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/** A decimal text as (unscaled BigInt, scale), or a special value rank. */
function parseDecimal(text: string): { special: number } | { unscaled: bigint; scale: number } {
  if (text === 'NaN') return { special: 3 };
  if (text === 'Infinity') return { special: 2 };
  if (text === '-Infinity') return { special: -2 };
  const m = /^([+-]?)(\d*)(?:\.(\d*))?$/.exec(text)!;
  const digits = (m[2] ?? '') + (m[3] ?? '');
  const unscaled = BigInt(digits || '0');
  return { unscaled: m[1] === '-' ? -unscaled : unscaled, scale: (m[3] ?? '').length };
}

function compareDecimal(a: string, b: string): number {
  const x = parseDecimal(a);
  const y = parseDecimal(b);
  const rank = (d: typeof x) => ('special' in d ? d.special : 0);
  if (rank(x) !== rank(y)) return sign(rank(x) - rank(y));
  if ('special' in x || 'special' in y) return 0;
  const scale = Math.max(x.scale, y.scale);
  const xs = x.unscaled * 10n ** BigInt(scale - x.scale);
  const ys = y.unscaled * 10n ** BigInt(scale - y.scale);
  return xs < ys ? -1 : xs > ys ? 1 : 0;
}

function compareFloat(a: number, b: number): number {
  if (Number.isNaN(a) || Number.isNaN(b)) return (Number.isNaN(a) ? 1 : 0) - (Number.isNaN(b) ? 1 : 0);
  return a < b ? -1 : a > b ? 1 : 0; // -0 == 0
}

function compareValue(t: LogicalType, a: unknown, b: unknown): number {
  switch (t.kind) {
    case 'bool':
      return Number(a) - Number(b);
    case 'int8':
    case 'int16':
    case 'int32':
    case 'date':
      return sign((a as number) - (b as number));
    case 'int64':
    case 'timestamp':
      return (a as bigint) < (b as bigint) ? -1 : (a as bigint) > (b as bigint) ? 1 : 0;
    case 'float64':
      return compareFloat(a as number, b as number);
    case 'decimal':
      return compareDecimal(a as string, b as string);
    case 'text':
      return sign(compareBytes(new TextEncoder().encode(a as string), new TextEncoder().encode(b as string)));
    case 'binary':
      return sign(compareBytes(a as Uint8Array, b as Uint8Array));
    default:
      throw new Error(`no reference order for ${t.kind}`);
  }
}

function compareTuple(types: readonly LogicalType[], a: readonly unknown[], b: readonly unknown[]): number {
  for (let i = 0; i < types.length; i++) {
    const c = compareValue(types[i]!, a[i], b[i]);
    if (c !== 0) return c;
  }
  return 0;
}

function compareTokens(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// Arbitraries: wide ranges plus small alphabets, so that equal prefixes and ties are common.

const digitString = (max: number) => fc.string({ unit: fc.constantFrom('0', '1', '5', '9'), maxLength: max });
const decimalText = fc.oneof(
  fc
    .tuple(fc.constantFrom('', '-', '+'), digitString(40), fc.option(digitString(30), { nil: undefined }))
    .filter(([, w, f]) => w.length + (f?.length ?? 0) > 0)
    .map(([s, w, f]) => `${s}${w}${f === undefined ? '' : `.${f}`}`),
  fc.bigInt({ min: -(10n ** 60n), max: 10n ** 60n }).chain((n) =>
    fc.nat({ max: 70 }).map((scale) => {
      const abs = (n < 0n ? -n : n).toString().padStart(scale + 1, '0');
      const text = scale === 0 ? abs : `${abs.slice(0, -scale)}.${abs.slice(-scale)}`;
      return n < 0n ? `-${text}` : text;
    }),
  ),
  fc.constantFrom(
    '0',
    '-0.0001',
    '0.0001',
    `0.${'0'.repeat(29)}1`,
    `-0.${'0'.repeat(29)}1`,
    '1.5',
    '1.50',
    '-1.5',
    '-1.55',
  ),
  fc.constantFrom(
    '9'.repeat(38),
    `-${'9'.repeat(38)}`,
    '1'.repeat(60),
    `${'9'.repeat(30)}.${'9'.repeat(30)}`,
  ),
  fc.constantFrom('NaN', 'Infinity', '-Infinity'),
);
const textValue = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.string({
    unit: fc.constantFrom('a', 'b', '!', ' ', '~', '.', '\u00e9', '\uffff', '\ud83d\ude00', '\u0001'),
    maxLength: 5,
  }),
  fc.constantFrom('', 'a', 'ab', '!', ' ', '😀', '\u{10ffff}'),
);
const int64Value = fc.oneof(
  fc.bigInt({ min: INT64_MIN, max: INT64_MAX }),
  fc.bigInt({ min: -1000n, max: 1000n }),
  fc.constantFrom(
    INT64_MIN,
    INT64_MAX,
    2n ** 53n - 1n,
    2n ** 53n,
    2n ** 53n + 1n,
    -(2n ** 53n) - 1n,
    0n,
    -1n,
  ),
);
const timestampValue = fc.oneof(
  int64Value,
  // 4713 BC .. the int64 limit (Postgres goes on to 294276 AD, which no int64 holds in Unix micros).
  fc.bigInt({ min: -210_866_803_200_000_000n, max: INT64_MAX }),
  fc.constantFrom(
    -1n,
    -86_400_000_000n,
    253_402_300_799_999_999n,
    TIMESTAMP_INFINITY,
    TIMESTAMP_NEG_INFINITY,
  ),
);

const ARBITRARIES: Record<string, { type: LogicalType; value: fc.Arbitrary<unknown> }> = {
  bool: { type: { kind: 'bool' }, value: fc.boolean() },
  int8: { type: { kind: 'int8' }, value: fc.integer({ min: -128, max: 127 }) },
  int16: { type: { kind: 'int16' }, value: fc.integer({ min: -32768, max: 32767 }) },
  int32: { type: { kind: 'int32' }, value: fc.oneof(fc.integer(), fc.integer({ min: -3, max: 3 })) },
  int64: { type: { kind: 'int64' }, value: int64Value },
  float64: {
    type: { kind: 'float64' },
    value: fc.oneof(
      fc.double(),
      fc.constantFrom(0, -0, Number.NaN, Infinity, -Infinity, Number.MIN_VALUE, -Number.MIN_VALUE),
    ),
  },
  decimal: { type: { kind: 'decimal', precision: 38, scale: 0 }, value: decimalText },
  text: { type: { kind: 'text' }, value: textValue },
  binary: {
    type: { kind: 'binary' },
    value: fc.oneof(fc.uint8Array({ maxLength: 10 }), fc.uint8Array({ maxLength: 3, min: 0, max: 2 })),
  },
  date: {
    type: { kind: 'date' },
    value: fc.oneof(
      fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
      fc.integer({ min: -5, max: 5 }),
      fc.constantFrom(DATE_INFINITY, DATE_NEG_INFINITY, -719_162, 2_932_896),
    ),
  },
  timestamp: { type: { kind: 'timestamp', utc: true }, value: timestampValue },
};
const KINDS = Object.keys(ARBITRARIES);

/** Same-typed tuple pairs of 1-3 parts, each part equal in both tuples half of the time. */
const tuplePair = fc.array(fc.constantFrom(...KINDS), { minLength: 1, maxLength: 3 }).chain((kinds) =>
  fc
    .tuple(
      ...kinds.map((k) => {
        const { value } = ARBITRARIES[k]!;
        return fc.tuple(value, value, fc.boolean()).map(([a, b, same]) => [a, same ? a : b] as const);
      }),
    )
    .map((parts) => ({
      types: kinds.map((k) => ARBITRARIES[k]!.type),
      a: parts.map((p) => p[0]),
      b: parts.map((p) => p[1]),
    })),
);

/** What decoding must give back: the value itself, up to the documented normalisations. */
function expectRoundTrip(types: readonly LogicalType[], values: readonly unknown[]): void {
  const token = encodeKey(types, values);
  const back = decodeKey(types, token);
  types.forEach((t, i) => {
    const v = values[i];
    if (t.kind === 'decimal') expect(compareDecimal(back[i] as string, v as string)).toBe(0);
    else if (t.kind === 'float64' && v === 0) expect(back[i]).toBe(0);
    else expect(back[i]).toEqual(v);
  });
  expect(encodeKey(types, back)).toBe(token);
}

// ---------------------------------------------------------------------------------------------

describe('key codec round-trip', () => {
  for (const kind of KINDS) {
    it(`round-trips every ${kind} exactly`, () => {
      const { type, value } = ARBITRARIES[kind]!;
      fc.assert(
        fc.property(value, (v) => expectRoundTrip([type], [v])),
        { numRuns: 2000 },
      );
    });
  }

  it('round-trips tuples of 1-3 parts of any kinds', () => {
    fc.assert(
      fc.property(tuplePair, ({ types, a }) => expectRoundTrip(types, a)),
      { numRuns: 5000 },
    );
  });

  it('tokens are ASCII, URL-safe and versioned', () => {
    fc.assert(
      fc.property(tuplePair, ({ types, a }) => {
        const token = encodeKey(types, a);
        expect(token.startsWith(KEY_TOKEN_PREFIX)).toBe(true);
        expect(token).toMatch(/^k1\.[0-9a-f.~]*$/);
      }),
      { numRuns: 2000 },
    );
  });

  it('decodes decimals to canonical text padded to the type scale', () => {
    const d2: LogicalType = { kind: 'decimal', precision: 10, scale: 2 };
    const d0: LogicalType = { kind: 'decimal', precision: 38, scale: 0 };
    const cases: [LogicalType, string, string][] = [
      [d2, '1.50', '1.50'],
      [d2, '1.5', '1.50'],
      [d2, '-0.000', '0.00'],
      [d2, '+007.125', '7.125'],
      [d0, '-0.0001', '-0.0001'],
      [d0, '0100', '100'],
      [d0, '.5', '0.5'],
      [d0, `0.${'0'.repeat(29)}1`, `0.${'0'.repeat(29)}1`],
      [d0, '1'.repeat(60), '1'.repeat(60)],
    ];
    for (const [t, input, expected] of cases)
      expect(decodeKey([t], encodeKey([t], [input]))).toEqual([expected]);
    expect(encodeKey([d2], ['1.5'])).toBe(encodeKey([d2], ['1.50']));
  });

  it('normalises float64 -0 to 0 and keeps NaN', () => {
    const f: LogicalType = { kind: 'float64' };
    expect(Object.is(decodeKey([f], encodeKey([f], [-0]))[0], 0)).toBe(true);
    expect(decodeKey([f], encodeKey([f], [Number.NaN]))[0]).toBeNaN();
  });
});

describe('key codec order', () => {
  it('token order equals tuple order for random same-typed tuple pairs', () => {
    fc.assert(
      fc.property(tuplePair, ({ types, a, b }) => {
        expect(compareTokens(encodeKey(types, a), encodeKey(types, b))).toBe(compareTuple(types, a, b));
      }),
      { numRuns: 20_000 },
    );
  });

  for (const kind of KINDS) {
    it(`sorting ${kind} tokens sorts the values (single part, 200-value lists)`, () => {
      const { type, value } = ARBITRARIES[kind]!;
      fc.assert(
        fc.property(fc.array(value, { maxLength: 200 }), (values) => {
          const byToken = values
            .map((v) => ({ v, token: encodeKey([type], [v]) }))
            .sort((x, y) => compareTokens(x.token, y.token));
          for (let i = 1; i < byToken.length; i++) {
            const c = compareValue(type, byToken[i - 1]!.v, byToken[i]!.v);
            expect(c).toBeLessThanOrEqual(0);
            expect(c === 0).toBe(byToken[i - 1]!.token === byToken[i]!.token);
          }
        }),
        { numRuns: 200 },
      );
    });
  }

  const ordered: [LogicalType, unknown[]][] = [
    [
      { kind: 'int64' },
      [INT64_MIN, -(2n ** 53n) - 1n, -1n, 0n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n, INT64_MAX],
    ],
    [{ kind: 'int32' }, [-(2 ** 31), -1, 0, 1, 2 ** 31 - 1]],
    [
      { kind: 'decimal', precision: 38, scale: 10 },
      [
        '-Infinity',
        `-${'9'.repeat(60)}`,
        `-${'9'.repeat(38)}`,
        '-10',
        '-1.55',
        '-1.5',
        '-1',
        '-0.0001',
        `-0.${'0'.repeat(29)}1`,
        '0',
        `0.${'0'.repeat(29)}1`,
        '0.0001',
        '0.1',
        '1',
        '1.5',
        '1.55',
        '10',
        '9'.repeat(38),
        '1'.repeat(60),
        'Infinity',
        'NaN',
      ],
    ],
    [{ kind: 'text' }, ['', ' ', '!', '!a', '0', 'a', 'a\u0001', 'ab', 'b', '\u00e9', '\uffff', '😀']],
    [
      { kind: 'timestamp', utc: true },
      [
        TIMESTAMP_NEG_INFINITY,
        -62_135_596_800_000_000n,
        -1n,
        0n,
        1n,
        253_402_300_799_999_999n,
        TIMESTAMP_INFINITY,
      ],
    ],
    [{ kind: 'date' }, [DATE_NEG_INFINITY, -719_162, -1, 0, 2_932_896, DATE_INFINITY]],
    [
      { kind: 'float64' },
      [-Infinity, -1e308, -1, -Number.MIN_VALUE, 0, Number.MIN_VALUE, 1, 1e308, Infinity, Number.NaN],
    ],
  ];
  for (const [type, values] of ordered) {
    it(`edge values of ${type.kind} encode strictly increasing`, () => {
      const tokens = values.map((v) => encodeKey([type], [v]));
      for (let i = 1; i < tokens.length; i++)
        expect(tokens[i - 1]! < tokens[i]!, `${values[i - 1]} < ${values[i]}`).toBe(true);
      for (const v of values) expectRoundTrip([type], [v]);
    });
  }

  it('a shorter text sorts before its extensions whatever part follows', () => {
    const types: LogicalType[] = [{ kind: 'text' }, { kind: 'int64' }];
    expect(encodeKey(types, ['a', INT64_MAX]) < encodeKey(types, ['a!', INT64_MIN])).toBe(true);
    expect(encodeKey(types, ['', INT64_MAX]) < encodeKey(types, [' ', INT64_MIN])).toBe(true);
    expect(encodeKey(types, ['a', 1n]) < encodeKey(types, ['a', 2n])).toBe(true);
  });

  it('orders text by UTF-8 bytes (C collation), not by UTF-16 code units', () => {
    // JS `<` on the strings says '\uffff' > '😀' (0xffff > 0xd83d); UTF-8 bytes say the opposite.
    expect('\uffff' > '😀').toBe(true);
    const t: LogicalType[] = [{ kind: 'text' }];
    expect(encodeKey(t, ['\uffff']) < encodeKey(t, ['😀'])).toBe(true);
  });
});

describe('key codec refusals', () => {
  const i64: LogicalType = { kind: 'int64' };
  it('refuses NULL with a pointer to the null-cursor policy', () => {
    expect(() => encodeKey([i64], [null])).toThrow(DataError);
    expect(() => encodeKey([i64], [null])).toThrow(/NULL.*null-cursor policy/);
  });

  it('refuses values outside the universe', () => {
    expect(() => encodeKey([i64], [1])).toThrow(/bigint/);
    expect(() => encodeKey([i64], [2n ** 63n])).toThrow(/int64 range/);
    expect(() => encodeKey([{ kind: 'int32' }], [2 ** 31])).toThrow(/32-bit/);
    expect(() => encodeKey([{ kind: 'int32' }], [1.5])).toThrow(/integer/);
    expect(() => encodeKey([{ kind: 'decimal', precision: 10, scale: 2 }], ['1e5'])).toThrow(/decimal text/);
    expect(() => encodeKey([{ kind: 'decimal', precision: 10, scale: 2 }], ['-'])).toThrow(/decimal text/);
    expect(() => encodeKey([{ kind: 'text' }], ['\ud800'])).toThrow(/surrogate/);
    expect(() => encodeKey([{ kind: 'binary' }], ['ab'])).toThrow(/Uint8Array/);
    expect(() => encodeKey([{ kind: 'date' }], [Infinity])).toThrow(/integer/);
    expect(() => encodeKey([i64, i64], [1n])).toThrow(/1 values for 2/);
    expect(() => encodeKey([], [])).toThrow(/at least one part/);
  });

  it('refuses unsupported kinds naming the type', () => {
    const list: LogicalType = { kind: 'list', element: { kind: 'int32' } };
    expect(isKeyType(list)).toBe(false);
    expect(isKeyType(i64)).toBe(true);
    expect(() => encodeKey([list], [[1]])).toThrow(/list<int32>.*cannot be a cursor/);
  });

  it('refuses tokens that are not canonical encodings of the given types', () => {
    const t: LogicalType[] = [i64, { kind: 'text' }];
    const good = encodeKey(t, [5n, 'x']);
    expect(decodeKey(t, good)).toEqual([5n, 'x']);
    for (const bad of [
      'k2.8000000000000005.78',
      'k1.8000000000000005',
      'k1.8000000000000005.78.00',
      'k1.8000000000000005.7',
      'k1.8000000000000005.7G',
      'k1.800000000000000A.78',
      'k1.80000000000000050.78',
      'k1.8000000000000005.ff', // not UTF-8
    ]) {
      expect(() => decodeKey(t, bad), bad).toThrow(/reset the table cursor/);
    }
    const dec: LogicalType[] = [{ kind: 'decimal', precision: 10, scale: 0 }];
    for (const bad of [
      'k1.3800000',
      'k1.38000010',
      'k1.38000101',
      'k1.17fffe8',
      'k1.22',
      'k1.6',
      'k1.3',
      'k1.',
    ]) {
      expect(() => decodeKey(dec, bad), bad).toThrow(DataError);
    }
    const f: LogicalType[] = [{ kind: 'float64' }];
    // A non-canonical NaN and -0 must not decode: each value has exactly one token.
    expect(() => decodeKey(f, `k1.${'ffffffffffffffff'}`)).toThrow(DataError);
    expect(() => decodeKey(f, `k1.${'7fffffffffffffff'}`)).toThrow(DataError);
  });
});
