/**
 * The order-preserving key codec: turns a keyset tuple (cursor value, primary-key values...) into
 * the ASCII resume token an incremental page returns as `next`, and back.
 *
 * Owns: the token format. A token must
 *   1. round-trip exactly (int64 beyond 2^53, decimals of any width, microsecond timestamps, any
 *      well-formed unicode text, bytes),
 *   2. be ASCII and URL-safe (only `0-9 a-f . ~` and the version prefix), and
 *   3. sort bytewise (plain JS string `<`) exactly as the tuples compare in the database, for
 *      text under binary ("C") collation. Under other collations the database's order differs;
 *      nothing relies on text order across pages, because every row's `__pos` starts with a
 *      per-table commit sequence (docs/decisions/0003-position-codec.md).
 * It never touches a database and never coerces: a value outside the exact value universe
 * (the JS type per logical kind, see `ColumnWriter.appendValue`) or a NULL is refused, not guessed at.
 *
 * Format: `k1.` + the parts joined by `.`. `.` (0x2E) sorts below every character a part uses, so
 * when one part's encoding is a proper prefix of the other's (text "a" vs "ab"), the shorter one
 * sorts first, as it should, whatever follows. Per kind:
 *   bool       `0` | `1`
 *   int8/16/32 2/4/8 lowercase hex digits of (v + 2^(bits-1)): fixed width, sign-flipped, so
 *              negative numbers sort below positive ones
 *   int64      16 hex digits of (v + 2^63)
 *   date       like int32 (days; Postgres' ±infinity are int32 max/min, see time-text.ts)
 *   timestamp  like int64 (micros; Postgres' ±infinity are int64 max/min)
 *   float64    16 hex digits of the IEEE-754 bits, sign bit flipped for positives and all bits
 *              flipped for negatives; -0 is encoded as 0 and every NaN as one NaN, which sorts
 *              above +Infinity as in Postgres
 *   decimal    class digit `0`..`5` = -Infinity, negative, zero, positive, +Infinity, NaN; then
 *              for non-zero finite values 0.DIGITS x 10^E: E as 5 hex digits (biased by 2^19),
 *              then DIGITS without leading/trailing zeros. Negatives complement E and every digit
 *              (9-d) and end with `~`, which sorts above every digit, so that -1.5 > -1.55 ("84~"
 *              vs "844~"). Numerically equal texts ("1.50", "1.5") encode equal.
 *   text       lowercase hex of the UTF-8 bytes (bytewise = code point = C collation order)
 *   binary     lowercase hex of the bytes
 */
import { DataError } from '../contracts/errors.js';
import { describeType, type LogicalKind, type LogicalType } from '../dataplane/schema.js';

/** Every token starts with this: the codec version, so a future format can be told apart. */
export const KEY_TOKEN_PREFIX = 'k1.';

const SEPARATOR = '.';

/** The logical kinds a key part may have. */
export const KEY_KINDS: ReadonlySet<LogicalKind> = new Set<LogicalKind>([
  'bool',
  'int8',
  'int16',
  'int32',
  'int64',
  'float64',
  'decimal',
  'text',
  'binary',
  'date',
  'timestamp',
]);

/** True when a column of type `t` can be part of a cursor token (check cursor/pk columns at config time). */
export function isKeyType(t: LogicalType): boolean {
  return KEY_KINDS.has(t.kind);
}

/**
 * Encodes a keyset tuple as a resume token.
 *
 * @param types the canonical logical types of the tuple's columns (cursor column first, then the
 *   primary key in key order)
 * @param values the values in the exact value universe, one per type
 * @throws DataError for a NULL, a value of the wrong JS type or out of range, or a type that cannot
 *   be a key part (the message names the part and its type)
 * @example encodeKey([{ kind: 'int64' }, { kind: 'text' }], [42n, 'a']) === 'k1.800000000000002a.61'
 */
export function encodeKey(types: readonly LogicalType[], values: readonly unknown[]): string {
  if (types.length === 0) throw new DataError('a cursor token needs at least one part (the cursor column)');
  if (values.length !== types.length) {
    throw new DataError(`cursor tuple has ${values.length} values for ${types.length} key columns`);
  }
  return KEY_TOKEN_PREFIX + types.map((t, i) => encodePart(t, values[i], i)).join(SEPARATOR);
}

/**
 * Decodes a resume token back into the tuple `encodeKey` was given. Values come back exactly,
 * with two documented normalisations: float64 `-0` decodes as `0` (they compare equal), and a
 * decimal decodes as its canonical text (no leading zeros, no `+`, `-0` as `0`, trailing zeros
 * only up to the type's `scale`, so a `numeric(10,2)` value reads back as the database prints
 * it: "1.50" -> "1.50", "1.5" -> "1.50", "-0.000" -> "0.00").
 *
 * @throws DataError when the token is not a `k1.` token of exactly these types (wrong version,
 *   part count, or a part that is not the canonical encoding of a value of its type): the cursor
 *   was written by another version, or the cursor/key columns changed type; reset the table's
 *   cursor to resync it.
 */
export function decodeKey(types: readonly LogicalType[], token: string): unknown[] {
  const malformed = (why: string) =>
    new DataError(
      `cursor token '${token}' cannot be decoded for key (${types.map(describeType).join(', ')}): ${why}; ` +
        'it was written by another tidemark version or the cursor/key columns changed type: reset the table cursor',
    );
  if (!token.startsWith(KEY_TOKEN_PREFIX)) throw malformed(`it does not start with '${KEY_TOKEN_PREFIX}'`);
  const parts = token.slice(KEY_TOKEN_PREFIX.length).split(SEPARATOR);
  if (parts.length !== types.length)
    throw malformed(`it has ${parts.length} parts, expected ${types.length}`);
  return types.map((t, i) => {
    const part = parts[i]!;
    let value: unknown;
    try {
      value = decodePart(t, part);
      // Re-encoding proves the part was canonical (width, case, digits), so equal tuples always
      // have equal tokens and a token cannot smuggle in a value its type does not hold.
      if (encodePart(t, value, i) === part) return value;
    } catch (e) {
      throw malformed(`part ${i + 1} '${part}' is not a ${describeType(t)}: ${(e as Error).message}`);
    }
    throw malformed(`part ${i + 1} '${part}' is not the canonical encoding of a ${describeType(t)}`);
  });
}

// ---------------------------------------------------------------------------------------------
// Parts

const INT_BITS = { int8: 8, int16: 16, int32: 32, int64: 64, date: 32, timestamp: 64 } as const;

function encodePart(t: LogicalType, v: unknown, index: number): string {
  const fail = (expected: string) =>
    new DataError(
      `cursor key part ${index + 1} (${describeType(t)}) must be ${expected}, got ${describeValue(v)}` +
        (v === null || v === undefined
          ? '; NULL cursor and key values are handled by the null-cursor policy'
          : ''),
    );
  switch (t.kind) {
    case 'bool':
      if (typeof v !== 'boolean') throw fail('a boolean');
      return v ? '1' : '0';
    case 'int8':
    case 'int16':
    case 'int32':
    case 'date': {
      const bits = INT_BITS[t.kind];
      if (typeof v !== 'number' || !Number.isInteger(v) || v < -(2 ** (bits - 1)) || v >= 2 ** (bits - 1)) {
        throw fail(
          `an integer number in the ${bits}-bit signed range${t.kind === 'date' ? ' (days since 1970-01-01)' : ''}`,
        );
      }
      return sortableHex(BigInt(v), bits);
    }
    case 'int64':
    case 'timestamp':
      if (typeof v !== 'bigint' || v < -(2n ** 63n) || v >= 2n ** 63n) {
        throw fail(
          `a bigint in the int64 range${t.kind === 'timestamp' ? ' (microseconds since the Unix epoch)' : ''}`,
        );
      }
      return sortableHex(v, 64);
    case 'float64':
      if (typeof v !== 'number') throw fail('a number');
      return encodeFloat64(v);
    case 'decimal':
      if (typeof v !== 'string') throw fail('an exact decimal text such as "-12.30"');
      return encodeDecimal(v, fail);
    case 'text':
      if (typeof v !== 'string') throw fail('a string');
      if (LONE_SURROGATE.test(v)) throw fail('well-formed unicode (it has a lone UTF-16 surrogate)');
      return Buffer.from(v, 'utf8').toString('hex');
    case 'binary':
      if (!(v instanceof Uint8Array)) throw fail('a Uint8Array');
      return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex');
    default:
      throw new DataError(
        `cursor key part ${index + 1} has type ${describeType(t)}, which cannot be a cursor or key column; ` +
          `supported: ${[...KEY_KINDS].join(', ')}`,
      );
  }
}

function decodePart(t: LogicalType, part: string): unknown {
  switch (t.kind) {
    case 'bool':
      return part === '1';
    case 'int8':
    case 'int16':
    case 'int32':
    case 'date':
      return Number(fromSortableHex(part, INT_BITS[t.kind]));
    case 'int64':
    case 'timestamp':
      return fromSortableHex(part, 64);
    case 'float64':
      return decodeFloat64(part);
    case 'decimal':
      return decodeDecimal(part, t.scale);
    case 'text':
      return UTF8.decode(hexToBytes(part));
    case 'binary':
      return hexToBytes(part);
    default:
      throw new DataError(`type ${describeType(t)} cannot be a cursor or key column`);
  }
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const HEX = /^(?:[0-9a-f]{2})*$/;

function hexToBytes(part: string): Uint8Array {
  if (!HEX.test(part)) throw new DataError('not an even number of lowercase hex digits');
  return new Uint8Array(Buffer.from(part, 'hex'));
}

/** Fixed-width hex of `v + 2^(bits-1)`: offset binary, so string order is numeric order. */
function sortableHex(v: bigint, bits: number): string {
  return (v + 2n ** BigInt(bits - 1)).toString(16).padStart(bits / 4, '0');
}

function fromSortableHex(part: string, bits: number): bigint {
  if (part.length !== bits / 4 || !HEX.test(part))
    throw new DataError(`not ${bits / 4} lowercase hex digits`);
  return BigInt(`0x${part}`) - 2n ** BigInt(bits - 1);
}

// float64: positives get the sign bit set (so they sort above all negatives), negatives get every
// bit flipped (so a larger magnitude sorts lower). The canonical quiet NaN 0x7ff8... becomes
// 0xfff8..., above +Infinity (0xfff0...): Postgres sorts NaN above every number.
const SIGN_BIT = 1n << 63n;
const ALL_BITS = (1n << 64n) - 1n;
const CANONICAL_NAN_BITS = 0x7ff8000000000000n;
const FLOAT_VIEW = new DataView(new ArrayBuffer(8));

function encodeFloat64(v: number): string {
  let bits: bigint;
  if (Number.isNaN(v)) bits = CANONICAL_NAN_BITS;
  else if (v === 0)
    bits = 0n; // -0 == 0 in every database; one encoding.
  else {
    FLOAT_VIEW.setFloat64(0, v);
    bits = FLOAT_VIEW.getBigUint64(0);
  }
  const flipped = bits & SIGN_BIT ? ~bits & ALL_BITS : bits | SIGN_BIT;
  return flipped.toString(16).padStart(16, '0');
}

function decodeFloat64(part: string): number {
  if (part.length !== 16 || !HEX.test(part)) throw new DataError('not 16 lowercase hex digits');
  const flipped = BigInt(`0x${part}`);
  FLOAT_VIEW.setBigUint64(0, flipped & SIGN_BIT ? flipped ^ SIGN_BIT : ~flipped & ALL_BITS);
  return FLOAT_VIEW.getFloat64(0);
}

// decimal -------------------------------------------------------------------------------------

const DECIMAL_CLASS = {
  negInfinity: '0',
  negative: '1',
  zero: '2',
  positive: '3',
  infinity: '4',
  nan: '5',
} as const;
const EXPONENT_BIAS = 2 ** 19;
const EXPONENT_WIDTH = 5; // hex digits: 2^20 values, exponents -2^19 .. 2^19-1
const NEGATIVE_TERMINATOR = '~'; // above every digit: ends a complemented digit string
const DECIMAL_TEXT = /^([+-]?)(\d*)(?:\.(\d*))?$/;

function encodeDecimal(text: string, fail: (expected: string) => DataError): string {
  // Postgres numeric prints its special values this way (NaN sorts above +Infinity there).
  if (text === 'NaN') return DECIMAL_CLASS.nan;
  if (text === 'Infinity') return DECIMAL_CLASS.infinity;
  if (text === '-Infinity') return DECIMAL_CLASS.negInfinity;
  const m = DECIMAL_TEXT.exec(text);
  const [, sign, whole = '', fraction = ''] = m ?? [];
  if (!m || whole.length + fraction.length === 0) {
    throw fail('an exact decimal text such as "-12.30" (digits, optional sign and point; no exponent)');
  }
  // value = 0.DIGITS x 10^exponent with DIGITS free of leading and trailing zeros.
  let digits = whole + fraction;
  let exponent = whole.length;
  const firstNonZero = digits.search(/[1-9]/);
  if (firstNonZero < 0) return DECIMAL_CLASS.zero;
  digits = digits.slice(firstNonZero).replace(/0+$/, '');
  exponent -= firstNonZero;
  if (exponent < -EXPONENT_BIAS || exponent >= EXPONENT_BIAS) {
    throw fail(`a decimal with fewer than ${EXPONENT_BIAS} digits around the point`);
  }
  if (sign !== '-') {
    return (
      DECIMAL_CLASS.positive + (exponent + EXPONENT_BIAS).toString(16).padStart(EXPONENT_WIDTH, '0') + digits
    );
  }
  const complementedExponent = EXPONENT_BIAS - 1 - exponent; // larger magnitude sorts lower
  const complementedDigits = digits.replace(/\d/g, (d) => String(9 - Number(d)));
  return (
    DECIMAL_CLASS.negative +
    complementedExponent.toString(16).padStart(EXPONENT_WIDTH, '0') +
    complementedDigits +
    NEGATIVE_TERMINATOR
  );
}

function decodeDecimal(part: string, scale: number): string {
  const cls = part[0];
  if (part.length === 1) {
    if (cls === DECIMAL_CLASS.nan) return 'NaN';
    if (cls === DECIMAL_CLASS.infinity) return 'Infinity';
    if (cls === DECIMAL_CLASS.negInfinity) return '-Infinity';
    if (cls === DECIMAL_CLASS.zero) return scale > 0 ? `0.${'0'.repeat(scale)}` : '0';
  }
  const exponentHex = part.slice(1, 1 + EXPONENT_WIDTH);
  if (!/^[0-9a-f]{5}$/.test(exponentHex)) throw new DataError('no exponent');
  const biased = Number.parseInt(exponentHex, 16);
  let body = part.slice(1 + EXPONENT_WIDTH);
  if (cls === DECIMAL_CLASS.positive) {
    return placePoint('', body, biased - EXPONENT_BIAS, scale);
  }
  if (cls === DECIMAL_CLASS.negative && body.endsWith(NEGATIVE_TERMINATOR)) {
    body = body.slice(0, -1).replace(/\d/g, (d) => String(9 - Number(d)));
    return placePoint('-', body, EXPONENT_BIAS - 1 - biased, scale);
  }
  throw new DataError('unknown decimal class');
}

/** Renders sign 0.DIGITS x 10^exponent as plain decimal text with at least `scale` fraction digits. */
function placePoint(sign: string, digits: string, exponent: number, scale: number): string {
  if (!/^[1-9](?:\d*[1-9])?$/.test(digits)) throw new DataError('digits are not canonical');
  let whole: string;
  let fraction: string;
  if (exponent <= 0) {
    whole = '0';
    fraction = '0'.repeat(-exponent) + digits;
  } else if (exponent >= digits.length) {
    whole = digits + '0'.repeat(exponent - digits.length);
    fraction = '';
  } else {
    whole = digits.slice(0, exponent);
    fraction = digits.slice(exponent);
  }
  fraction = fraction.padEnd(scale, '0');
  return sign + whole + (fraction ? `.${fraction}` : '');
}

function describeValue(v: unknown): string {
  if (v === null) return 'NULL';
  if (v === undefined) return 'undefined';
  if (typeof v === 'string') return `string '${v.length > 40 ? `${v.slice(0, 40)}...` : v}'`;
  if (typeof v === 'bigint') return `bigint ${v}`;
  if (typeof v === 'number') return `number ${v}`;
  if (v instanceof Uint8Array) return `${v.byteLength} bytes`;
  return typeof v === 'object' ? `a ${v.constructor?.name ?? 'object'}` : typeof v;
}
