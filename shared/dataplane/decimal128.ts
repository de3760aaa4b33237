/**
 * Exact Decimal128 arithmetic for the wire encoder: parses decimal text and Postgres binary
 * NUMERIC into the 16-byte little-endian two's complement value Arrow stores, without BigInt or
 * string allocation on the common path.
 *
 * Owns: the unscaled-integer accumulator (four 32-bit words, least significant first), the
 * precision check against 10^p and the exact rescale to a column's scale.
 * Must never round: a digit that a column's scale or precision cannot hold is a `DataError`.
 *
 * The accumulator is module-level scratch (the encoder is single-threaded and synchronous): a
 * parse fills `acc`, the caller copies it out before the next parse.
 */
import { DataError } from '../contracts/errors.js';

const TWO32 = 4294967296;

/** Scratch magnitude of the value being parsed: four uint32 words, least significant first. */
const acc = new Uint32Array(4);
/** Largest multiplier `mulAdd` accepts: word * mul + carry must stay below 2^53 to be exact. */
const MAX_MUL = 1_000_000;
const POW10_SMALL = [1, 10, 100, 1000, 10_000, 100_000, 1_000_000];

/** 10^p as four words, for p in 0..38: the exclusive magnitude bound of a decimal(p, s). */
const POW10_WORDS: Uint32Array[] = [];
for (let p = 0, v = 1n; p <= 38; p++, v *= 10n) {
  const w = new Uint32Array(4);
  for (let k = 0; k < 4; k++) w[k] = Number((v >> BigInt(32 * k)) & 0xffffffffn);
  POW10_WORDS.push(w);
}

function clearAcc(): void {
  acc[0] = 0;
  acc[1] = 0;
  acc[2] = 0;
  acc[3] = 0;
}

/** acc = acc * mul + add, for mul <= MAX_MUL. Returns false when the result leaves 128 bits. */
function mulAdd(mul: number, add: number): boolean {
  let carry = add;
  for (let k = 0; k < 4; k++) {
    const t = acc[k]! * mul + carry;
    const lo = t >>> 0;
    acc[k] = lo;
    carry = (t - lo) / TWO32;
  }
  return carry === 0;
}

/** True when the magnitude in acc is below 10^precision. */
function fitsPrecision(precision: number): boolean {
  const bound = POW10_WORDS[precision]!;
  for (let k = 3; k >= 0; k--) {
    const a = acc[k]!;
    const b = bound[k]!;
    if (a !== b) return a < b;
  }
  return false;
}

/** Multiplies acc by 10^n exactly (n may exceed 6). Returns false on 128-bit overflow. */
function scaleUp(n: number): boolean {
  while (n > 0) {
    const step = Math.min(n, 6);
    if (!mulAdd(POW10_SMALL[step]!, 0)) return false;
    n -= step;
  }
  return true;
}

/**
 * Writes acc (a magnitude) into `out` at word index `at`, negated in two's complement when
 * `negative`.
 */
function storeAcc(out: Uint32Array, at: number, negative: boolean): void {
  if (!negative) {
    out[at] = acc[0]!;
    out[at + 1] = acc[1]!;
    out[at + 2] = acc[2]!;
    out[at + 3] = acc[3]!;
    return;
  }
  let carry = 1;
  for (let k = 0; k < 4; k++) {
    const t = (~acc[k]! >>> 0) + carry;
    const lo = t >>> 0;
    out[at + k] = lo;
    carry = t === lo ? 0 : 1;
  }
}

/** What a decimal column is, for error messages and bounds. */
export interface DecimalTarget {
  readonly column: string;
  readonly precision: number;
  readonly scale: number;
}

function describe(t: DecimalTarget): string {
  return `column "${t.column}" (decimal(${t.precision},${t.scale}))`;
}

function overflow(t: DecimalTarget, shown: string): DataError {
  return new DataError(
    `value ${shown} of ${describe(t)} has more than ${t.precision - t.scale} integer digits; ` +
      `widen the column's precision or map it to text`,
  );
}

function tooFine(t: DecimalTarget, shown: string): DataError {
  return new DataError(
    `value ${shown} of ${describe(t)} has non-zero digits beyond scale ${t.scale}; ` +
      `tidemark never rounds: widen the scale or map the column to text`,
  );
}

const CH_0 = 48;
const CH_DOT = 46;
const CH_MINUS = 45;
const CH_PLUS = 43;

/** Values with at most this many digits (at the target scale) are below 2^53: exact as doubles. */
const FAST_DIGITS = 15;
const POW10_NUM = Array.from({ length: FAST_DIGITS + 1 }, (_, k) => 10 ** k);

/**
 * The common case of `writeDecimalText` in double arithmetic: well-formed text whose value at the
 * target scale has at most 15 digits. Returns false, writing nothing, for anything else (the
 * general parse then decides, and produces the error).
 */
function writeDecimalTextFast(s: string, t: DecimalTarget, out: Uint32Array, at: number): boolean {
  const n = s.length;
  let i = 0;
  let negative = false;
  if (n > 0) {
    const c0 = s.charCodeAt(0);
    if (c0 === CH_MINUS) {
      negative = true;
      i = 1;
    } else if (c0 === CH_PLUS) {
      i = 1;
    }
  }
  let v = 0;
  let digits = 0;
  let any = false;
  for (; i < n; i++) {
    const d = s.charCodeAt(i) - CH_0;
    if (d < 0 || d > 9) break;
    any = true;
    if (digits === 0 && d === 0) continue;
    digits++;
    v = v * 10 + d;
  }
  if (digits + t.scale > FAST_DIGITS || digits > t.precision - t.scale) return false;
  let frac = 0;
  if (i < n && s.charCodeAt(i) === CH_DOT) {
    for (i++; i < n; i++) {
      const d = s.charCodeAt(i) - CH_0;
      if (d < 0 || d > 9) break;
      any = true;
      if (frac < t.scale) {
        frac++;
        v = v * 10 + d;
      } else if (d !== 0) {
        return false;
      }
    }
  }
  if (i !== n || !any) return false;
  storeSafe(v * POW10_NUM[t.scale - frac]!, negative, out, at);
  return true;
}

/** Writes a magnitude below 2^53 into `out[at..at+4]`, negated in two's complement when `negative`. */
function storeSafe(v: number, negative: boolean, out: Uint32Array, at: number): void {
  const lo = v % TWO32;
  const hi = (v - lo) / TWO32;
  if (!negative || v === 0) {
    out[at] = lo;
    out[at + 1] = hi;
    out[at + 2] = 0;
    out[at + 3] = 0;
  } else {
    // Two's complement of (hi, lo): invert and add one; the +1 carries into hi only when lo is 0.
    out[at] = lo === 0 ? 0 : TWO32 - lo;
    out[at + 1] = lo === 0 ? TWO32 - hi : 0xffffffff - hi;
    out[at + 2] = 0xffffffff;
    out[at + 3] = 0xffffffff;
  }
}

/**
 * Parses exact decimal text (`-12.30`, `+5`, `.5`, `7.`) into `out[at..at+4]` as the unscaled
 * value at the target scale. Fewer fractional digits are rescaled exactly ("1.5" at scale 2 is
 * 150); extra fractional digits must be zeros. Exponents, NaN and infinities are refused.
 */
export function writeDecimalText(s: string, t: DecimalTarget, out: Uint32Array, at: number): void {
  if (writeDecimalTextFast(s, t, out, at)) return;
  const n = s.length;
  let i = 0;
  let negative = false;
  if (n > 0) {
    const c0 = s.charCodeAt(0);
    if (c0 === CH_MINUS) {
      negative = true;
      i = 1;
    } else if (c0 === CH_PLUS) {
      i = 1;
    }
  }
  clearAcc();
  let digits = 0; // significant digits accumulated so far (leading zeros excluded)
  let any = false; // saw at least one digit
  let chunk = 0;
  let chunkLen = 0;
  // Integer part.
  for (; i < n; i++) {
    const d = s.charCodeAt(i) - CH_0;
    if (d < 0 || d > 9) break;
    any = true;
    if (digits === 0 && d === 0) continue;
    digits++;
    chunk = chunk * 10 + d;
    if (++chunkLen === 6) {
      if (!mulAdd(MAX_MUL, chunk)) throw overflow(t, JSON.stringify(s));
      chunk = 0;
      chunkLen = 0;
    }
  }
  if (digits > t.precision - t.scale) throw overflow(t, JSON.stringify(s));
  // Fractional part: up to `scale` digits enter the value; the rest must be zeros.
  let frac = 0;
  if (i < n && s.charCodeAt(i) === CH_DOT) {
    i++;
    for (; i < n; i++) {
      const d = s.charCodeAt(i) - CH_0;
      if (d < 0 || d > 9) break;
      any = true;
      if (frac < t.scale) {
        frac++;
        chunk = chunk * 10 + d;
        if (++chunkLen === 6) {
          mulAdd(MAX_MUL, chunk); // cannot overflow: at most 38 digits in total
          chunk = 0;
          chunkLen = 0;
        }
      } else if (d !== 0) {
        throw tooFine(t, JSON.stringify(s));
      }
    }
  }
  if (i !== n || !any) {
    throw new DataError(
      `value ${JSON.stringify(s)} of ${describe(t)} is not exact decimal text (digits, one optional sign and point); ` +
        `NaN, infinities and exponents cannot be stored in a decimal column: map it to text`,
    );
  }
  mulAdd(POW10_SMALL[chunkLen]!, chunk);
  scaleUp(t.scale - frac);
  storeAcc(out, at, negative);
}

/** Postgres binary NUMERIC header fields (all big-endian 16-bit), then ndigits base-10000 digits. */
const NUMERIC_NDIGITS = 0;
const NUMERIC_WEIGHT = 2;
const NUMERIC_SIGN = 4;
const NUMERIC_DIGITS = 8;
const NUMERIC_POS = 0x0000;
const NUMERIC_NEG = 0x4000;

/**
 * Decodes a Postgres binary NUMERIC (NBASE 10000: ndigits, weight, sign, dscale, digits) at
 * `buf[off..]` into `out[at..at+4]` at the target scale, exactly. NaN and infinities are refused.
 */
export function writeNumericBinary(
  buf: Uint8Array,
  off: number,
  t: DecimalTarget,
  out: Uint32Array,
  at: number,
): void {
  const ndigits = (buf[off + NUMERIC_NDIGITS]! << 8) | buf[off + NUMERIC_NDIGITS + 1]!;
  const weight = (((buf[off + NUMERIC_WEIGHT]! << 8) | buf[off + NUMERIC_WEIGHT + 1]!) << 16) >> 16;
  const sign = (buf[off + NUMERIC_SIGN]! << 8) | buf[off + NUMERIC_SIGN + 1]!;
  if (sign !== NUMERIC_POS && sign !== NUMERIC_NEG) {
    throw new DataError(
      `a NaN or infinite numeric arrived for ${describe(t)}; a decimal column cannot store it: map the column to text`,
    );
  }
  if (writeNumericFast(buf, off, ndigits, weight, sign === NUMERIC_NEG, t, out, at)) return;
  clearAcc();
  // Group k's units digit sits at decimal exponent 4 * (weight - k); at the target scale that is
  // `e` below. Groups (or their low digits) below 10^-scale must be zero: they are dropped, not
  // accumulated, so the accumulator never holds more than the final magnitude.
  let p = off + NUMERIC_DIGITS;
  for (let k = 0; k < ndigits; k++, p += 2) {
    const g = (buf[p]! << 8) | buf[p + 1]!;
    const e = 4 * (weight - k) + t.scale;
    if (e >= 0) {
      if (!mulAdd(10_000, g)) throw overflow(t, 'numeric');
    } else if (e > -4) {
      const drop = POW10_SMALL[-e]!;
      if (g % drop !== 0) throw tooFine(t, 'numeric');
      if (!mulAdd(POW10_SMALL[4 + e]!, g / drop)) throw overflow(t, 'numeric');
    } else if (g !== 0) {
      throw tooFine(t, 'numeric');
    }
  }
  const shift = 4 * (weight - ndigits + 1) + t.scale;
  if (ndigits > 0 && shift > 0 && !scaleUp(shift)) throw overflow(t, 'numeric');
  if (!fitsPrecision(t.precision)) throw overflow(t, 'numeric');
  storeAcc(out, at, sign === NUMERIC_NEG);
}

const TWO53 = 2 ** 53;

/**
 * `writeNumericBinary` in double arithmetic, for values whose magnitude at the target scale is
 * below 2^53 (then every partial sum is too, so all of it is exact). Returns false, writing
 * nothing, otherwise; it still throws for digits beyond the scale, which no path accepts.
 */
function writeNumericFast(
  buf: Uint8Array,
  off: number,
  ndigits: number,
  weight: number,
  negative: boolean,
  t: DecimalTarget,
  out: Uint32Array,
  at: number,
): boolean {
  let v = 0;
  let p = off + NUMERIC_DIGITS;
  for (let k = 0; k < ndigits; k++, p += 2) {
    const g = (buf[p]! << 8) | buf[p + 1]!;
    const e = 4 * (weight - k) + t.scale;
    if (e >= 0) {
      v = v * 10_000 + g;
    } else if (e > -4) {
      const drop = POW10_SMALL[-e]!;
      if (g % drop !== 0) throw tooFine(t, 'numeric');
      v = v * POW10_SMALL[4 + e]! + g / drop;
    } else if (g !== 0) {
      throw tooFine(t, 'numeric');
    }
  }
  const shift = 4 * (weight - ndigits + 1) + t.scale;
  if (ndigits > 0 && shift > 0) v *= shift <= FAST_DIGITS ? POW10_NUM[shift]! : TWO53;
  if (v >= TWO53) return false; // inexact, or at least large: the word path decides
  if (t.precision <= FAST_DIGITS && v >= POW10_NUM[t.precision]!) throw overflow(t, 'numeric');
  storeSafe(v, negative, out, at);
  return true;
}

const MAX_I128 = (1n << 127n) - 1n;
const MIN_I128 = -(1n << 127n);
const POW10_BIG: bigint[] = [];
for (let p = 0, v = 1n; p <= 38; p++, v *= 10n) POW10_BIG.push(v);

/** Writes an unscaled integer (the value times 10^scale) after checking it fits decimal(p, s). */
export function writeDecimalUnscaled(v: bigint, t: DecimalTarget, out: Uint32Array, at: number): void {
  const bound = POW10_BIG[t.precision]!;
  if (v >= bound || v <= -bound || v > MAX_I128 || v < MIN_I128) {
    throw overflow(t, formatDecimal(v, t.scale));
  }
  const u = BigInt.asUintN(128, v);
  out[at] = Number(u & 0xffffffffn);
  out[at + 1] = Number((u >> 32n) & 0xffffffffn);
  out[at + 2] = Number((u >> 64n) & 0xffffffffn);
  out[at + 3] = Number(u >> 96n);
}

/** Reads the 128-bit two's complement value at word index `at` as a signed unscaled integer. */
export function readDecimalUnscaled(words: Uint32Array, at: number): bigint {
  const u =
    BigInt(words[at]!) |
    (BigInt(words[at + 1]!) << 32n) |
    (BigInt(words[at + 2]!) << 64n) |
    (BigInt(words[at + 3]!) << 96n);
  return BigInt.asIntN(128, u);
}

/** Renders an unscaled integer as canonical decimal text with exactly `scale` fractional digits. */
export function formatDecimal(unscaled: bigint, scale: number): string {
  const negative = unscaled < 0n;
  const digits = (negative ? -unscaled : unscaled).toString().padStart(scale + 1, '0');
  const cut = digits.length - scale;
  const text = scale === 0 ? digits : `${digits.slice(0, cut)}.${digits.slice(cut)}`;
  return negative ? `-${text}` : text;
}
