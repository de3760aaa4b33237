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
 * `7.25E-3`: an optional '-', digits with at most one '.', an optional exponent) whose digits
 * form an integer m and whose decimal exponent k (after the point is moved) allow an exact
 * result; undefined for anything else. The sign is applied last: rounding to nearest is
 * symmetric.
 *
 *   - m < 2^53 and -22 <= k <= 22 (Clinger's fast path): m and 10^|k| are exact doubles, so
 *     `m * 10^k` or `m / 10^-k` is one IEEE operation on exact operands, correctly rounded,
 *     which is what `Number(text)` (also correctly rounded) gives.
 *   - 2^53 <= m < 10^17 and -22 <= k < 0 (MariaDB prints a double's shortest round-trip text,
 *     up to 17 significant digits: most values with 16 or 17 land here): `verifiedQuotient`.
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
  const digitsEnd = i;
  if (!any) return undefined;
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
  // A partial m whose exact value is below 2^53 is computed exactly. One whose exact value is
  // 2^53 or more is rounded to 2^53 or more (rounding is monotonic and 2^53 is a double), and
  // m only grows, so this one test covers every step. (Not `m > 2^53`: the exact
  // 9007199254740993 rounds to 2^53 itself.)
  if (m >= TWO53) {
    if (k >= 0 || k < -22 || !splitDigits(b, negative ? s + 1 : s, digitsEnd)) return undefined;
    const x = verifiedQuotient(splitHigh, splitLow, -k);
    return x === undefined || !negative ? x : -x;
  }
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

/** The digits of m as `splitHigh * 10^8 + splitLow`, left by `splitDigits`. */
let splitHigh = 0;
let splitLow = 0;

/**
 * Splits the digits in `b[from..to)` (a '.' among them is skipped) into `splitHigh` (all but the
 * last 8, below 10^9) and `splitLow` (the last 8), both exact. False when m has more than 17
 * significant digits (m >= 10^17).
 */
function splitDigits(b: Uint8Array, from: number, to: number): boolean {
  let high = 0;
  let low = 0;
  let n = 0;
  for (let j = to - 1; j >= from; j--) {
    if (b[j] === DOT) continue;
    const d = b[j]! - DIGIT_0;
    if (n < 8) low += d * POW10[n]!;
    else if (n < 17) high += d * POW10[n - 8]!;
    else if (d !== 0) return false;
    n++;
  }
  splitHigh = high;
  splitLow = low;
  return true;
}

/** 5^0..5^22 and 2^0..2^22: exact doubles (10^k = 5^k * 2^k). */
const POW5: number[] = [1];
const POW2: number[] = [1];
for (let k = 1; k <= 22; k++) {
  POW5.push(POW5[k - 1]! * 5);
  POW2.push(POW2[k - 1]! * 2);
}
/** Veltkamp's splitting constant 2^27 + 1: a double into two halves of 26 bits. */
const SPLITTER = 134_217_729;
/** The bits of one double, as two uint32 words in host order (HI: sign, exponent, top of the mantissa). */
const bits64 = new Float64Array(1);
const words = new Uint32Array(bits64.buffer);
const LO = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1 ? 0 : 1;
const HI = 1 - LO;

/** The exact error of the last `twoSum`: a + b = sum + sumError exactly (Knuth). */
let sumError = 0;
function twoSum(a: number, b: number): number {
  const sum = a + b;
  const bb = sum - a;
  sumError = a - (sum - bb) + (b - bb);
  return sum;
}

/**
 * The double nearest to m / 10^k for m = high * 10^8 + low (2^53 <= m < 10^17) and 1 <= k <= 22,
 * or undefined when it cannot be certain of it. A candidate is taken from the double
 * arithmetic (within about one ulp) and then checked exactly, so correctness never rests on how
 * good the candidate is: `nearestSide` computes the residual m - x * 10^k with error-free
 * transformations (Dekker's product, Knuth's sum) and gives up, rather than round, if any sum is
 * inexact. If the candidate is not the nearest, its neighbour on the residual's side is checked
 * once more; ties and powers of two (where the gap below is half the gap above) give up.
 */
function verifiedQuotient(high: number, low: number, k: number): number | undefined {
  // m = mh + ml exactly: high * 10^8 = (high * 5^8) * 2^8 is exact (high * 5^8 < 2^49), and
  // Fast2Sum is exact as |high * 10^8| >= |low| (high > 0, since m >= 2^53).
  const big = high * 1e8;
  const mh = big + low;
  const ml = low - (mh - big);
  let x = mh / POW10[k]!;
  for (let tries = 0; tries < 2; tries++) {
    const side = nearestSide(x, mh, ml, k);
    if (side === 0) return x;
    if (Number.isNaN(side)) return undefined;
    x = neighbour(x, side);
  }
  return undefined;
}

/**
 * 0 when the positive normal double x is the nearest to m / 10^k (m = mh + ml, both exact), +1
 * or -1 when m / 10^k is more than half a gap above or below it, NaN when this cannot be told
 * exactly (a tie, x a power of two, or a sum that is not exact).
 */
function nearestSide(x: number, mh: number, ml: number, k: number): number {
  bits64[0] = x;
  const hi = words[HI]!;
  if ((hi & 0xfffff) === 0 && words[LO] === 0) return Number.NaN;
  // ulp(x) = 2^(exponent - 52), built from its bits (exponent field minus 52, no mantissa).
  const exponentField = (hi >>> 20) & 0x7ff;
  words[HI] = (exponentField - 52) << 20;
  words[LO] = 0;
  const ulp = bits64[0];
  // x * 5^k = ph + pl exactly (Dekker's product over Veltkamp's halves).
  const f = POW5[k]!;
  const cx = SPLITTER * x;
  const xh = cx - (cx - x);
  const xl = x - xh;
  const cf = SPLITTER * f;
  const fh = cf - (cf - f);
  const fl = f - fh;
  const ph = x * f;
  const pl = xh * fh - ph + xh * fl + xl * fh + xl * fl;
  // x * 10^k = (ph + pl) * 2^k, each scaled exactly; the residual m - x * 10^k, summed exactly.
  const t1 = twoSum(mh, -ph * POW2[k]!);
  if (sumError !== 0) return Number.NaN;
  const t2 = twoSum(ml, -pl * POW2[k]!);
  if (sumError !== 0) return Number.NaN;
  const residual = twoSum(t1, t2);
  if (sumError !== 0) return Number.NaN;
  // Half a gap, scaled like the residual: ulp / 2 * 10^k, exact (a power of two times 5^k).
  const half = ulp * f * POW2[k - 1]!;
  const size = residual < 0 ? -residual : residual;
  if (size < half) return 0;
  if (size === half) return Number.NaN;
  return residual > 0 ? 1 : -1;
}

/** The double next to the positive normal x, above (side 1) or below (side -1). */
function neighbour(x: number, side: number): number {
  bits64[0] = x;
  let lo = words[LO]!;
  let hi = words[HI]!;
  if (side > 0) {
    lo = (lo + 1) >>> 0;
    if (lo === 0) hi++;
  } else {
    if (lo === 0) hi--;
    lo = (lo - 1) >>> 0;
  }
  words[LO] = lo;
  words[HI] = hi;
  return bits64[0];
}

function isDigit(c: number): boolean {
  return c >= DIGIT_0 && c <= DIGIT_0 + 9;
}

/** Postgres binary NUMERIC header (big-endian int16s: ndigits, weight, sign, dscale), see decimal128.ts. */
const NUMERIC_HEADER = 8;
const NUMERIC_NEG = 0x4000;
const DIGITS_PER_GROUP = 4;
const GROUP_SCALE = [1, 10, 100, 1000];

/** Where `writeGroups` is: the next byte of `out`, the group so far and its digit count. */
interface GroupWriter {
  p: number;
  g: number;
  c: number;
}

/** Appends the digits `b[from..to)` to base-10000 groups, writing each full group to `out`. */
function writeGroups(b: Uint8Array, from: number, to: number, out: Uint8Array, w: GroupWriter): void {
  for (let k = from; k < to; k++) {
    w.g = w.g * 10 + (b[k]! - DIGIT_0);
    if (++w.c === DIGITS_PER_GROUP) {
      out[w.p++] = w.g >> 8;
      out[w.p++] = w.g & 0xff;
      w.g = 0;
      w.c = 0;
    }
  }
}

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
  const groups: GroupWriter = {
    p: NUMERIC_HEADER,
    g: 0,
    c: (DIGITS_PER_GROUP - (sig % DIGITS_PER_GROUP)) % DIGITS_PER_GROUP,
  };
  writeGroups(b, sigStart, intEnd, out, groups);
  const intGroups = (groups.p - NUMERIC_HEADER) >> 1;
  writeGroups(b, fracStart, e, out, groups);
  let { p, g } = groups;
  const { c } = groups;
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
