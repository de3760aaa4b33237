/**
 * Byte parsers of the numeric text MySQL/MariaDB prints, for the batch path's range appenders
 * (types.ts `rangeAppenderOf`): a DOUBLE or DECIMAL value is read from its bytes in the row
 * packet, with no string per value, whenever the result is certain to be the one the string
 * path gives (`Number(text)`, `writeDecimalText(text)`). Anything else (an unusual form, a value
 * the fast arithmetic cannot get exactly, a value the column refuses) returns false/undefined
 * and the caller takes the string path, which then decides, and words any error, as before.
 *
 * Owns: the exactness arguments below. Must never return a value that differs from the string
 * path's in any bit.
 */

const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const DIGIT_0 = 0x30;
/** 'e' and 'E' both equal this once ORed with 0x20. */
const LOWER_E = 0x65;
const TWO53 = 2 ** 53;
/** Exponents are capped here while they are read (a fast-path value never needs more than 22). */
const EXPONENT_CAP = 1000;

/** 10^0..10^22, every one exactly representable as a double (built by exact multiplications). */
const POW10: number[] = [1];
for (let k = 1; k <= 22; k++) POW10.push(POW10[k - 1]! * 10);

/**
 * The double of the text `b[s..e)` when it is plain decimal text (`-12.5`, `1e+308`, `-0`,
 * `7.25E-3`) whose digits form an integer m < 2^53 and whose decimal exponent k (after the
 * point is moved) is within -22..22; undefined for anything else.
 *
 * Exact: m and 10^|k| are then both exactly representable, so `m * 10^k` or `m / 10^-k` is one
 * IEEE operation on exact operands, correctly rounded, which is what `Number(text)` (also
 * correctly rounded) gives; the sign is applied after, as rounding to nearest is symmetric
 * (Clinger's fast path). MariaDB prints a double's shortest round-trip text: up to 17
 * significant digits, so the values with 17 (and some with 16) take the string path.
 */
export function doubleOfAscii(b: Uint8Array, s: number, e: number): number | undefined {
  let i = s;
  const negative = b[i] === MINUS;
  if (negative) i++;
  let m = 0;
  let any = false;
  for (; i < e; i++) {
    const d = b[i]! - DIGIT_0;
    if (d < 0 || d > 9) break;
    m = m * 10 + d;
    any = true;
  }
  let fracDigits = 0;
  if (i < e && b[i] === DOT) {
    for (i++; i < e; i++) {
      const d = b[i]! - DIGIT_0;
      if (d < 0 || d > 9) break;
      m = m * 10 + d;
      fracDigits++;
      any = true;
    }
  }
  // A partial m whose exact value is below 2^53 is computed exactly. One whose exact value is
  // 2^53 or more is rounded to 2^53 or more (rounding is monotonic and 2^53 is a double), and
  // m only grows, so this one test at the end covers every step. (Not `m > 2^53`: the exact
  // 9007199254740993 rounds to 2^53 itself.)
  if (!any || m >= TWO53) return undefined;
  let exponent = 0;
  if (i < e && (b[i]! | 0x20) === LOWER_E) {
    i++;
    const expNegative = b[i] === MINUS;
    if (expNegative || b[i] === PLUS) i++;
    const first = i;
    for (; i < e; i++) {
      const d = b[i]! - DIGIT_0;
      if (d < 0 || d > 9) break;
      if (exponent < EXPONENT_CAP) exponent = exponent * 10 + d;
    }
    if (i === first) return undefined;
    if (expNegative) exponent = -exponent;
  }
  if (i !== e) return undefined;
  const k = exponent - fracDigits;
  let x: number;
  if (k >= 0) {
    if (k > 22) return undefined;
    x = m * POW10[k]!;
  } else {
    if (k < -22) return undefined;
    x = m / POW10[-k]!;
  }
  return negative ? -x : x;
}

function isDigit(c: number): boolean {
  return c >= DIGIT_0 && c <= DIGIT_0 + 9;
}

/** Postgres binary NUMERIC header (big-endian int16s: ndigits, weight, sign, dscale), see decimal128.ts. */
const NUMERIC_HEADER = 8;
const NUMERIC_NEG = 0x4000;
const DIGITS_PER_GROUP = 4;
const GROUP_SCALE = [1, 10, 100, 1000];

/**
 * Size of the `out` of `numericOfDecimalAscii`: the header and up to 10 + 10 two-byte base-10000
 * groups (at most 38 integer and 38 fractional digits pass its checks; 38 digits fill 10 groups).
 */
export const NUMERIC_SCRATCH_BYTES = NUMERIC_HEADER + 2 * (10 + 10);

/**
 * Re-encodes the DECIMAL text `b[s..e)` (`-1234.50`: an optional '-', at least one integer digit,
 * optionally '.' and at least one fractional digit) as a Postgres binary NUMERIC in `out` (at
 * least NUMERIC_SCRATCH_BYTES), so that `ColumnWriter.appendNumericBinary` stores it: the
 * writer's one decimal entry point that reads bytes. Returns false, with `out` unspecified, for
 * any other text and for a value the column would refuse (more than `intDigits` integer digits
 * once leading zeros are dropped, or more than `scale` fractional digits: MySQL prints exactly
 * the column's scale): the caller then takes `appendDecimalText`, which refuses it with its
 * message naming the value.
 *
 * Equal to the text parse: both rescale the same digits exactly to the column's scale, and the
 * checks above leave the NUMERIC decoder nothing to refuse (|value| < 10^intDigits, no digit
 * below 10^-scale), so it stores the same 128-bit words (negative zero included: zero words).
 */
export function numericOfDecimalAscii(
  b: Uint8Array,
  s: number,
  e: number,
  intDigits: number,
  scale: number,
  out: Uint8Array,
): boolean {
  let i = s;
  const negative = b[i] === MINUS;
  if (negative) i++;
  const intStart = i;
  while (i < e && b[i] === DIGIT_0) i++;
  const sigStart = i;
  while (i < e && isDigit(b[i]!)) i++;
  const intEnd = i;
  const sig = intEnd - sigStart;
  if (intEnd === intStart || sig > intDigits) return false;
  let fracStart = e;
  if (i < e) {
    if (b[i] !== DOT) return false;
    fracStart = ++i;
    while (i < e && isDigit(b[i]!)) i++;
    if (i !== e || i === fracStart || e - fracStart > scale) return false;
  }
  // Base-10000 groups aligned on the decimal point: the integer digits are padded on the left
  // to a whole group (`c` starts at the pad), the fractional ones on the right.
  let p = NUMERIC_HEADER;
  let g = 0;
  let c = (DIGITS_PER_GROUP - (sig % DIGITS_PER_GROUP)) % DIGITS_PER_GROUP;
  for (let k = sigStart; k < intEnd; k++) {
    g = g * 10 + (b[k]! - DIGIT_0);
    if (++c === DIGITS_PER_GROUP) {
      out[p++] = g >> 8;
      out[p++] = g & 0xff;
      g = 0;
      c = 0;
    }
  }
  const intGroups = (p - NUMERIC_HEADER) >> 1;
  for (let k = fracStart; k < e; k++) {
    g = g * 10 + (b[k]! - DIGIT_0);
    if (++c === DIGITS_PER_GROUP) {
      out[p++] = g >> 8;
      out[p++] = g & 0xff;
      g = 0;
      c = 0;
    }
  }
  if (c > 0) {
    g *= GROUP_SCALE[DIGITS_PER_GROUP - c]!;
    out[p++] = g >> 8;
    out[p++] = g & 0xff;
  }
  const ndigits = (p - NUMERIC_HEADER) >> 1;
  const weight = intGroups - 1; // -1 when there are no integer groups: the first is 10^-4..10^-1
  out[0] = ndigits >> 8;
  out[1] = ndigits & 0xff;
  out[2] = (weight >> 8) & 0xff;
  out[3] = weight & 0xff;
  out[4] = negative ? NUMERIC_NEG >> 8 : 0;
  out[5] = 0;
  out[6] = scale >> 8;
  out[7] = scale & 0xff;
  return true;
}
