/**
 * The binary-protocol row walk of MySQL/MariaDB page reads (issue 15): a prepared statement's
 * result rows (COM_STMT_EXECUTE) carry integers and doubles as little-endian bytes and dates as
 * small structs instead of their text, which costs the server a third less CPU on a keyset page
 * (docs/benchmarks.md, "Issue 15, fifth pass") and the client its text parsing.
 *
 * A binary row packet: a 0x00 header, a NULL bitmap of (columns + 9) / 8 bytes whose bit i + 2
 * is column i, then each non-NULL value: TINY 1 byte, SHORT and YEAR 2, LONG, INT24 and FLOAT 4,
 * LONGLONG and DOUBLE 8 (signed or not by the column's UNSIGNED flag); DATE, DATETIME and
 * TIMESTAMP a length byte (0, 4, 7 or 11) and year (2 bytes), month, day, hour, minute, second,
 * microseconds (4 bytes), trailing zero parts left out; everything else (DECIMAL, strings, BLOB,
 * JSON, ENUM, SET, BIT, GEOMETRY) a length-encoded string, the same bytes as in a text row.
 *
 * Owns: which read plans the binary protocol may serve (`binaryReadable`: TIME is left to the
 * text protocol, its struct has no text of ours to compare with), the walk (`walkBinaryRow`,
 * into the same `RowRanges` as text-rows.ts), the appender of each column (`binaryAppenderOf`:
 * the same column values as types.ts `rangeAppenderOf` on the value's text, byte for byte, which
 * test/integration/mysql-raw-rows.test.ts checks on a server) and the text of a key value
 * (`binaryValueText`, for the resume key, which types.ts parses as ever).
 * Must never read outside the packet, and never give a value the text path would not: a date the
 * calendar has no day for goes through the text appender, so its refusal is the text path's.
 */
import mysql from 'mysql2';
import type { ColumnWriter } from '../../../dataplane/encoder.js';
import type { ValueContext } from '../../value-context.js';
import {
  daysFromCivil,
  lastDayOfMonth,
  type RangeAppender,
  type ReadPlan,
  rangeAppenderOf,
} from '../types.js';
import type { ResultField } from './result-fields.js';
import { type RowRanges, readLenenc } from './text-rows.js';

const T = mysql.Types;
/** How a column's value is framed in a binary row. */
const LENENC = -1;
const TEMPORAL = -2;
const TWO32 = 4294967296;
/** High words of an int64 whose value is a safe integer (|v| < 2^53). */
const SAFE_HIGH = 0x200000;
const MICROS_PER_DAY = 86_400_000_000;
/** Days from 1970 within which micros since 1970 are safe integers. */
const SAFE_DAYS = 104_000;

/** The framing of a value of result type `type`: its fixed width, LENENC or TEMPORAL. */
function framing(type: number): number {
  switch (type) {
    case T.TINY:
      return 1;
    case T.SHORT:
    case T.YEAR:
      return 2;
    case T.LONG:
    case T.INT24:
    case T.FLOAT:
      return 4;
    case T.LONGLONG:
    case T.DOUBLE:
      return 8;
    case T.DATE:
    case T.NEWDATE:
    case T.DATETIME:
    case T.TIMESTAMP:
    case T.TIME:
      return TEMPORAL;
    default:
      return LENENC;
  }
}

const INTEGER_TYPES = new Set<number>([T.TINY, T.SHORT, T.YEAR, T.INT24, T.LONG, T.LONGLONG]);
const DATE_TYPES = new Set<number>([T.DATE, T.NEWDATE]);
const DATETIME_TYPES = new Set<number>([T.DATETIME, T.TIMESTAMP]);

/**
 * Whether a column of read plan `plan`, described as `field` in a result set, is read through
 * the binary protocol: the pairs types.ts maps, but TIME (read as its text) and any pair the
 * mapping does not make (those fail the result-field check before they get here).
 */
export function binaryReadable(plan: ReadPlan, field: ResultField | undefined): boolean {
  if (field === undefined) return false;
  const f = framing(field.type);
  switch (plan.kind) {
    case 'int':
      return INTEGER_TYPES.has(field.type) && field.type !== T.LONGLONG;
    case 'int64':
      return field.type === T.LONGLONG ? !field.unsigned : field.type === T.LONG && field.unsigned;
    case 'decimal':
      return f === LENENC || (field.type === T.LONGLONG && field.unsigned);
    case 'float':
      return field.type === T.DOUBLE;
    case 'text':
    case 'binary':
      return f === LENENC;
    case 'date':
      return DATE_TYPES.has(field.type);
    case 'datetime':
      return DATETIME_TYPES.has(field.type);
  }
}

/** The framing of each column of a result set, for `walkBinaryRow`. */
export function binaryLayout(fields: readonly ResultField[]): Int8Array {
  return Int8Array.from(fields, (f) => framing(f.type));
}

/**
 * Walks the binary row packet payload `buf[start..end)` into `r` (value `i` is
 * `buf[starts[i]..ends[i])`, NULL when `starts[i]` is -1; a temporal value's range is its struct
 * after the length byte). Throws on a packet of any other shape.
 */
export function walkBinaryRow(
  buf: Buffer,
  start: number,
  end: number,
  layout: Int8Array,
  r: RowRanges,
): void {
  const { starts, ends, width } = r;
  const bitmap = start + 1;
  let p = bitmap + ((width + 9) >> 3);
  if (buf[start] !== 0 || p > end) throw malformed(0, width, start, end);
  for (let i = 0; i < width; i++) {
    const bit = i + 2;
    if ((buf[bitmap + (bit >> 3)]! & (1 << (bit & 7))) !== 0) {
      starts[i] = -1;
      ends[i] = -1;
      continue;
    }
    const f = layout[i]!;
    if (f === LENENC) {
      p = readLenenc(buf, p, end, r, i);
      // 0xFB (NULL) is no value of a binary row: its NULLs are in the bitmap.
      if (p < 0 || starts[i]! < 0) throw malformed(i, width, start, end);
      continue;
    }
    let len = f;
    if (f === TEMPORAL) {
      if (p >= end) throw malformed(i, width, start, end);
      len = buf[p]!;
      p += 1;
    }
    if (p + len > end) throw malformed(i, width, start, end);
    starts[i] = p;
    p += len;
    ends[i] = p;
  }
  if (p !== end) throw malformed(width, width, start, end);
}

function malformed(i: number, width: number, start: number, end: number): Error {
  return new Error(
    `MySQL protocol: a binary row packet of ${end - start} bytes does not hold ${width} values (value ${i + 1} runs past its end, or the packet has more)`,
  );
}

/** The integer of a fixed-width value `b[s..e)` (1, 2 or 4 bytes), signed or not. */
function smallInt(b: Buffer, s: number, e: number, unsigned: boolean): number {
  switch (e - s) {
    case 1:
      return unsigned ? b[s]! : (b[s]! << 24) >> 24;
    case 2: {
      const v = b[s]! | (b[s + 1]! << 8);
      return unsigned ? v : (v << 16) >> 16;
    }
    default: {
      const v = b[s]! | (b[s + 1]! << 8) | (b[s + 2]! << 16) | (b[s + 3]! << 24);
      return unsigned ? v >>> 0 : v;
    }
  }
}

/** The text the server prints for the temporal struct `b[s..e)` of a DATE (`date`) or DATETIME. */
function temporalText(b: Buffer, s: number, e: number, date: boolean): string {
  const n = e - s;
  const year = n >= 4 ? b[s]! | (b[s + 1]! << 8) : 0;
  const p2 = (v: number) => String(v).padStart(2, '0');
  const day = `${String(year).padStart(4, '0')}-${p2(n >= 4 ? b[s + 2]! : 0)}-${p2(n >= 4 ? b[s + 3]! : 0)}`;
  if (date) return day;
  const time = n >= 7 ? `${p2(b[s + 4]!)}:${p2(b[s + 5]!)}:${p2(b[s + 6]!)}` : '00:00:00';
  const micros = n >= 11 ? b.readUInt32LE(s + 7) : 0;
  return `${day} ${time}.${String(micros).padStart(6, '0')}`;
}

/**
 * The appender of a column read through the binary protocol (`binaryReadable` holds): the value
 * the text appender (types.ts) gives for the text the server would have printed.
 */
export function binaryAppenderOf(plan: ReadPlan, field: ResultField, ctx: ValueContext): RangeAppender {
  const text = rangeAppenderOf(plan, ctx);
  /** Appends through the text appender, on the text of the value (rare: refusals, edge dates). */
  const viaText = (w: ColumnWriter, s: string) => {
    const t = Buffer.from(s, 'latin1');
    text(w, t, 0, t.length);
  };
  const unsigned = field.unsigned;
  switch (plan.kind) {
    case 'int':
      return (w, b, s, e) => w.appendInt(smallInt(b, s, e, unsigned));
    case 'int64':
      if (field.type !== T.LONGLONG) return (w, b, s, e) => w.appendInt(smallInt(b, s, e, true));
      return (w, b, s) => {
        const hi = b.readInt32LE(s + 4);
        if (hi >= -SAFE_HIGH && hi < SAFE_HIGH) w.appendInt(hi * TWO32 + b.readUInt32LE(s));
        else w.appendBigInt(b.readBigInt64LE(s));
      };
    case 'decimal':
      // BIGINT UNSIGNED as its digits (decimal(20,0)); DECIMAL arrives as its text.
      if (field.type === T.LONGLONG) return (w, b, s) => viaText(w, b.readBigUInt64LE(s).toString());
      return text;
    case 'float':
      return (w, b, s) => w.appendFloat64(b.readDoubleLE(s));
    case 'text':
    case 'binary':
      return text;
    case 'date':
      return (w, b, s, e) => {
        if (e - s < 4) return w.appendNull(); // a zero date
        const year = b[s]! | (b[s + 1]! << 8);
        const month = b[s + 2]!;
        const day = b[s + 3]!;
        if (month === 0 || day === 0) w.appendNull();
        else if (month <= 12 && day <= lastDayOfMonth(year, month))
          w.appendInt(daysFromCivil(year, month, day));
        else viaText(w, temporalText(b, s, e, true));
      };
    case 'datetime':
      return (w, b, s, e) => {
        const n = e - s;
        if (n < 4) return w.appendNull(); // a zero date
        const year = b[s]! | (b[s + 1]! << 8);
        const month = b[s + 2]!;
        const day = b[s + 3]!;
        if (month === 0 || day === 0) return w.appendNull();
        const h = n >= 7 ? b[s + 4]! : 0;
        const mi = n >= 7 ? b[s + 5]! : 0;
        const sec = n >= 7 ? b[s + 6]! : 0;
        const us = n >= 11 ? b.readUInt32LE(s + 7) : 0;
        if (month > 12 || day > lastDayOfMonth(year, month) || h > 23 || mi > 59 || sec > 59 || us > 999_999)
          return viaText(w, temporalText(b, s, e, false));
        const days = daysFromCivil(year, month, day);
        const micros = (h * 3600 + mi * 60 + sec) * 1_000_000 + us;
        if (days > -SAFE_DAYS && days < SAFE_DAYS) w.appendInt(days * MICROS_PER_DAY + micros);
        else w.appendBigInt(BigInt(days) * BigInt(MICROS_PER_DAY) + BigInt(micros));
      };
  }
}

/**
 * The value `b[s..e)` of a column of result type `field` as the text-protocol bytes types.ts
 * `parseValue` reads (the resume key and error messages): digits for integers, the shortest
 * round-trip text of a double, `YYYY-MM-DD[ HH:MM:SS.ffffff]` for dates, the bytes themselves
 * for everything sent as a string.
 */
export function binaryValueText(field: ResultField, b: Buffer, s: number, e: number): Buffer {
  let text: string;
  switch (framing(field.type)) {
    case 1:
    case 2:
      text = String(smallInt(b, s, e, field.unsigned));
      break;
    case 4:
      text = field.type === T.FLOAT ? String(b.readFloatLE(s)) : String(smallInt(b, s, e, field.unsigned));
      break;
    case 8:
      text =
        field.type === T.DOUBLE
          ? String(b.readDoubleLE(s))
          : (field.unsigned ? b.readBigUInt64LE(s) : b.readBigInt64LE(s)).toString();
      break;
    case TEMPORAL:
      text = temporalText(b, s, e, DATE_TYPES.has(field.type));
      break;
    default:
      return Buffer.from(b.subarray(s, e));
  }
  return Buffer.from(text, 'latin1');
}
