/**
 * Iceberg's partition transforms (spec "Partition Transforms" and Appendix B, "32-bit Hash
 * Requirements"): the partition value of one source value, in the Avro form a manifest's
 * partition tuple holds (./manifest.ts).
 *
 * Owns: identity, bucket[N], truncate[W], year, month, day and hour, exactly as the spec has them
 * (checked against pyiceberg's transforms: test/integration/iceberg-transforms-pyiceberg.test.ts):
 * - bucket[N] = (murmur3_x86_32(hash bytes, seed 0) & Integer.MAX_VALUE) % N, where the hash
 *   bytes are: int, long, date, time, timestamp(tz) as the 8-byte little-endian long; a decimal's
 *   unscaled value as its minimal big-endian two's complement; a string's UTF-8; binary, fixed
 *   and uuid as their bytes.
 * - truncate[W]: integers and a decimal's unscaled value to v - (((v % W) + W) % W) (toward
 *   minus infinity); a string to its first W code points; binary to its first W bytes.
 * - year, month, day, hour: whole units since 1970-01-01T00:00Z, floor for earlier instants
 *   (timestamps are microseconds; a date is days).
 * Values in (see ./single-value.ts): int/date `number`; long/time/timestamp(tz) `bigint`
 * (microseconds); a decimal's unscaled `bigint`; string; `Uint8Array` for binary/fixed/uuid;
 * `null` is the partition value null for every transform. Values out: int/date/year/month/day/
 * hour/bucket `number`, long `bigint`, a decimal the big-endian two's complement `Uint8Array` of
 * its precision's fixed size (as the manifest's Avro `fixed`). Pure.
 */
import type { AvroValue } from './avro-schema.js';
import { decimalBytes } from './manifest-schemas.js';
import type { PrimitiveType, SingleValue } from './single-value.js';
import { twosComplementBE } from './single-value.js';

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

/** MurmurHash3 x86 32-bit of `bytes`, seed 0, as a signed 32-bit integer (Guava's `hashBytes`). */
export function murmur3x86_32(bytes: Uint8Array): number {
  let h = 0;
  const n = bytes.length;
  const blocks = n & ~3;
  for (let i = 0; i < blocks; i += 4) {
    let k = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    k = Math.imul(k, C1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, C2);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  const rest = n & 3;
  if (rest > 0) {
    let k = 0;
    if (rest === 3) k ^= bytes[blocks + 2]! << 16;
    if (rest >= 2) k ^= bytes[blocks + 1]! << 8;
    k ^= bytes[blocks]!;
    k = Math.imul(k, C1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, C2);
    h ^= k;
  }
  h ^= n;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h | 0;
}

const utf8 = new TextEncoder();

function longBytes(v: bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigInt64(0, BigInt.asIntN(64, v), true);
  return out;
}

/** The bytes Iceberg hashes for `v` of type `t` (Appendix B). */
function hashBytes(t: PrimitiveType, v: SingleValue): Uint8Array {
  switch (t.kind) {
    case 'int':
    case 'date':
      return longBytes(BigInt(v as number));
    case 'long':
    case 'time':
    case 'timestamp':
    case 'timestamptz':
      return longBytes(v as bigint);
    case 'decimal':
      return twosComplementBE(v as bigint);
    case 'string':
      return utf8.encode(v as string);
    case 'binary':
    case 'fixed':
    case 'uuid':
      return v as Uint8Array;
    default:
      throw new TypeError(`bucket does not apply to ${t.kind}`);
  }
}

/** The decimal `unscaled` as the manifest's Avro fixed: two's complement, the precision's size. */
export function decimalFixed(precision: number, unscaled: bigint): Uint8Array {
  const size = decimalBytes(precision);
  const out = new Uint8Array(size);
  let x = BigInt.asUintN(8 * size, unscaled);
  for (let i = size - 1; i >= 0; i--) {
    out[i] = Number(x & 0xffn);
    x >>= 8n;
  }
  return out;
}

const MICROS_PER_HOUR = 3_600_000_000n;
const MICROS_PER_DAY = 86_400_000_000n;

function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
}

/** Year and month (1-12) of a day count from 1970-01-01 (proleptic Gregorian; Hinnant's civil_from_days). */
function civil(days: number): { year: number; month: number } {
  const z = days + 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor(
    (doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365,
  );
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const month = mp < 10 ? mp + 3 : mp - 9;
  return { year: yoe + era * 400 + (month <= 2 ? 1 : 0), month };
}

/** Days since the epoch of a date (`number`) or a timestamp in microseconds (`bigint`). */
function daysOf(t: PrimitiveType, v: SingleValue): number {
  if (t.kind === 'date') return v as number;
  return Number(floorDiv(v as bigint, MICROS_PER_DAY));
}

/**
 * A parsed transform: `apply` maps a source value (or null) of the source's type to the
 * partition value in Avro form. Throws a TypeError for a transform that does not apply to the
 * type (callers validate first: ./partition.ts).
 */
export function transformOf(transform: string, t: PrimitiveType): (v: SingleValue | null) => AvroValue {
  const bucket = /^bucket\[(\d+)\]$/.exec(transform);
  if (bucket) {
    const n = Number(bucket[1]);
    return (v) => (v === null ? null : (murmur3x86_32(hashBytes(t, v)) & 0x7fffffff) % n);
  }
  const truncate = /^truncate\[(\d+)\]$/.exec(transform);
  if (truncate) {
    const w = Number(truncate[1]);
    const wb = BigInt(w);
    switch (t.kind) {
      case 'int':
        return (v) => (v === null ? null : (v as number) - ((((v as number) % w) + w) % w));
      case 'long':
        return (v) => (v === null ? null : (v as bigint) - ((((v as bigint) % wb) + wb) % wb));
      case 'decimal':
        return (v) =>
          v === null ? null : decimalFixed(t.precision, (v as bigint) - ((((v as bigint) % wb) + wb) % wb));
      case 'string':
        return (v) => {
          if (v === null) return null;
          const s = v as string;
          // Code points, not UTF-16 units: a surrogate pair is one character.
          if (s.length <= w) return s;
          let out = '';
          let count = 0;
          for (const ch of s) {
            if (count++ === w) break;
            out += ch;
          }
          return out;
        };
      case 'binary':
        return (v) => (v === null ? null : (v as Uint8Array).slice(0, w));
      default:
        throw new TypeError(`${transform} does not apply to ${t.kind}`);
    }
  }
  const time = t.kind === 'date' || t.kind === 'timestamp' || t.kind === 'timestamptz';
  switch (transform) {
    case 'identity':
      return t.kind === 'decimal'
        ? (v) => (v === null ? null : decimalFixed(t.precision, v as bigint))
        : (v) => v;
    case 'year':
      if (!time) break;
      return (v) => (v === null ? null : civil(daysOf(t, v)).year - 1970);
    case 'month':
      if (!time) break;
      return (v) => {
        if (v === null) return null;
        const c = civil(daysOf(t, v));
        return (c.year - 1970) * 12 + (c.month - 1);
      };
    case 'day':
      if (!time) break;
      return (v) => (v === null ? null : daysOf(t, v));
    case 'hour':
      if (t.kind !== 'timestamp' && t.kind !== 'timestamptz') break;
      return (v) => (v === null ? null : Number(floorDiv(v as bigint, MICROS_PER_HOUR)));
  }
  throw new TypeError(`${transform} does not apply to ${t.kind}`);
}
