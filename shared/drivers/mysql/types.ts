/**
 * MySQL/MariaDB type mapping: from a column's information_schema description to its canonical
 * `LogicalType` and the one SQL expression both read paths select for it, together with the
 * two ways its text output is read (docs/types.md, MySQL section, is the table behind this):
 *   - `parseValue`: text bytes -> a value of the exact value universe (the row path);
 *   - `rangeAppenderOf`: text bytes (a range of a row packet) -> the column's `ColumnWriter`, with
 *     no value object in between (the batch path; `appenderOf` is the same on a whole Buffer).
 * Both read the same bytes of the same statement, so equal input gives byte-identical batches;
 * they are written independently (the row path goes through time-text.ts, the batch path parses
 * bytes) so that the equality test checks one against the other.
 *
 * Owns: the mapping decisions, zero dates (read as NULL), and keyset literals. Must never
 * approximate: a value with no exact home in its logical type is a `DataError` naming the column,
 * and a key value is written as a literal the server compares exactly (numbers unquoted, text
 * as a hex string literal, never through a double).
 */
import { DataError } from '../../contracts/errors.js';
import type { ColumnWriter } from '../../dataplane/encoder.js';
import type { LogicalType } from '../../dataplane/schema.js';
import {
  dateTextToDays,
  daysToDateText,
  microsToTimestampText,
  timestampTextToMicros,
} from '../../position/time-text.js';
import { type ValueContext, withContext } from '../value-context.js';
import { doubleOfAscii, NUMERIC_SCRATCH_BYTES, numericOfDecimalAscii } from './wire/ascii-numbers.js';

/**
 * How the text of a selected value is read:
 *   int      decimal digits that fit a JS number exactly (TINYINT..INT, YEAR, unsigned widened)
 *   int64    decimal digits of a signed 64-bit integer (BIGINT, INT UNSIGNED)
 *   decimal  exact decimal text (DECIMAL p <= 38, BIGINT UNSIGNED)
 *   float    shortest round-trip text of a double (FLOAT/DOUBLE, selected as `col + 0e0`)
 *   text     UTF-8 text (the server converts every charset to utf8mb4 for us)
 *   binary   bytes as stored
 *   date     `YYYY-MM-DD` (zero dates read as NULL)
 *   datetime `YYYY-MM-DD HH:MM:SS[.ffffff]` (DATETIME, and TIMESTAMP printed in UTC)
 */
export type ValueKind = 'int' | 'int64' | 'decimal' | 'float' | 'text' | 'binary' | 'date' | 'datetime';

/** How a key value is written back into SQL (see `keyLiteral`). */
export type LiteralKind = 'number' | 'float' | 'string' | 'bytes' | 'date' | 'datetime';

/** A column as information_schema.COLUMNS describes it. */
export interface InfoColumn {
  readonly name: string;
  /** DATA_TYPE, lowercase: `int`, `decimal`, `longtext`... */
  readonly dataType: string;
  /** COLUMN_TYPE: `int(10) unsigned`, `decimal(65,30)`, `enum('a','b')`... */
  readonly columnType: string;
  readonly nullable: boolean;
  readonly numericPrecision: number | null;
  readonly numericScale: number | null;
  readonly charset: string | null;
  /** MariaDB's JSON alias: a LONGTEXT column with a `json_valid()` check. */
  readonly jsonAlias?: boolean;
}

/** How a column is read: the expression, the form its text has, and what it means. */
export interface ReadPlan {
  /** SQL expression over the qualified column, selected by both paths. */
  readonly expr: string;
  readonly kind: ValueKind;
  readonly logical: LogicalType;
  readonly literal: LiteralKind;
  /** Why the column cannot be a cursor or key column (undefined: it can). */
  readonly keyRefusal?: string;
}

/** A column's mapping: read plan, lake nullability and the source type shown in docs/errors. */
export interface ColumnMapping {
  readonly read: ReadPlan;
  /**
   * Nullable on the wire. DATE/DATETIME/TIMESTAMP columns always are: zero dates read as NULL,
   * and any session may write one into a NOT NULL column by relaxing its own sql_mode.
   */
  readonly nullable: boolean;
  readonly sourceType: string;
}

/** Quotes an identifier with backticks (always: names are case- and character-exact). */
export function quoteIdent(name: string): string {
  return `\`${name.replace(/`/g, '``')}\``;
}

/** A string literal `s` can be written as, whatever sql_mode says about backslashes and quotes. */
export function stringLiteral(s: string): string {
  return `_utf8mb4 X'${Buffer.from(s, 'utf8').toString('hex')}'`;
}

const MAX_DECIMAL_PRECISION = 38;
const GEOMETRY = new Set([
  'geometry',
  'point',
  'linestring',
  'polygon',
  'multipoint',
  'multilinestring',
  'multipolygon',
  'geometrycollection',
  'geomcollection',
]);
const TEXT_TYPES = new Set(['char', 'varchar', 'tinytext', 'text', 'mediumtext', 'longtext']);
const BINARY_TYPES = new Set(['binary', 'varbinary', 'tinyblob', 'blob', 'mediumblob', 'longblob']);

/** The mapping of one column (`col` is the qualified, quoted column the expression reads). */
export function mapColumn(c: InfoColumn, col: string): ColumnMapping {
  const unsigned = /\bunsigned\b/i.test(c.columnType);
  const plain = (
    kind: ValueKind,
    logical: LogicalType,
    literal: LiteralKind,
    keyRefusal?: string,
  ): ReadPlan => ({
    expr: col,
    kind,
    logical,
    literal,
    ...(keyRefusal ? { keyRefusal } : {}),
  });
  let read: ReadPlan;
  let sourceType = c.columnType;
  switch (c.dataType) {
    case 'tinyint':
      read = plain('int', { kind: unsigned ? 'int16' : 'int8' }, 'number');
      break;
    case 'smallint':
      read = plain('int', { kind: unsigned ? 'int32' : 'int16' }, 'number');
      break;
    case 'mediumint':
      read = plain('int', { kind: 'int32' }, 'number');
      break;
    case 'int':
    case 'integer':
      read = unsigned
        ? plain('int64', { kind: 'int64' }, 'number')
        : plain('int', { kind: 'int32' }, 'number');
      break;
    case 'bigint':
      // As RDS snapshot export does: unsigned annotations break Trino/Athena statistics.
      read = unsigned
        ? plain('decimal', { kind: 'decimal', precision: 20, scale: 0 }, 'number')
        : plain('int64', { kind: 'int64' }, 'number');
      break;
    case 'decimal':
    case 'numeric': {
      const p = c.numericPrecision ?? 10;
      const s = c.numericScale ?? 0;
      read =
        p >= 1 && p <= MAX_DECIMAL_PRECISION
          ? plain('decimal', { kind: 'decimal', precision: p, scale: s }, 'number')
          : plain('text', { kind: 'text' }, 'number');
      break;
    }
    case 'float':
    case 'double':
    case 'real':
      // FLOAT prints with 6 significant digits (16777217 as 16777200) and FLOAT(M,D)/DOUBLE(M,D)
      // with D decimals; `+ 0e0` makes the server widen the stored value to a double exactly and
      // print its shortest round-trip text.
      read = { expr: `(${col} + 0e0)`, kind: 'float', logical: { kind: 'float64' }, literal: 'float' };
      break;
    case 'bit':
      read = plain(
        'binary',
        { kind: 'binary' },
        'bytes',
        'BIT compares as an integer, not as the bytes it is read as',
      );
      break;
    case 'year':
      read = plain('int', { kind: 'int16' }, 'number');
      break;
    case 'date':
      read = plain('date', { kind: 'date' }, 'date');
      break;
    case 'datetime':
      read = plain('datetime', { kind: 'timestamp', utc: false }, 'datetime');
      break;
    case 'timestamp':
      read = plain('datetime', { kind: 'timestamp', utc: true }, 'datetime');
      break;
    case 'time':
      // '-838:59:59.000000' .. '838:59:59.000000': no lake type holds it, its text does exactly.
      read = plain('text', { kind: 'text' }, 'string');
      break;
    case 'json':
      read = plain('text', { kind: 'text' }, 'string', 'JSON values have no total order usable for paging');
      break;
    case 'enum':
    case 'set':
      read = plain(
        'text',
        { kind: 'text' },
        'string',
        `${c.dataType.toUpperCase()} sorts by member index but compares as text`,
      );
      break;
    default:
      if (TEXT_TYPES.has(c.dataType)) {
        read = plain(
          'text',
          { kind: 'text' },
          'string',
          c.jsonAlias ? 'JSON values have no total order usable for paging' : undefined,
        );
        if (c.jsonAlias) sourceType = 'json';
      } else if (BINARY_TYPES.has(c.dataType)) {
        read = plain('binary', { kind: 'binary' }, 'bytes');
      } else if (GEOMETRY.has(c.dataType)) {
        // The server's internal format: a 4-byte SRID, then WKB.
        read = plain('binary', { kind: 'binary' }, 'bytes', 'spatial values have no order');
      } else if (
        c.charset !== null ||
        c.dataType === 'inet4' ||
        c.dataType === 'inet6' ||
        c.dataType === 'uuid'
      ) {
        // MariaDB's INET4/INET6/UUID and any other character type: the server's own text.
        read = plain('text', { kind: 'text' }, 'string');
      } else {
        read = plain('binary', { kind: 'binary' }, 'bytes', `${c.dataType} has no order tidemark knows`);
      }
  }
  const temporal = read.kind === 'date' || read.kind === 'datetime';
  return { read, nullable: c.nullable || temporal, sourceType };
}

// ---------------------------------------------------------------------------------------------
// Row path: text bytes -> the exact value universe

/** True for a date text whose month or day is zero ('0000-00-00', '2024-00-15'): read as NULL. */
function zeroInDate(text: string): boolean {
  return text.slice(5, 7) === '00' || text.slice(8, 10) === '00';
}

/** Parses one raw value per its read plan into the exact value universe (null for SQL NULL). */
export function parseValue(plan: ReadPlan, buf: Buffer | null, ctx: ValueContext): unknown {
  if (buf === null) return null;
  switch (plan.kind) {
    case 'int':
      return Number(buf.toString('latin1'));
    case 'int64':
      return BigInt(buf.toString('latin1'));
    case 'decimal':
      return buf.toString('latin1');
    case 'float':
      return Number(buf.toString('latin1'));
    case 'text':
      return buf.toString('utf8');
    case 'binary':
      return new Uint8Array(buf);
    case 'date': {
      const text = buf.toString('latin1');
      return zeroInDate(text) ? null : withContext(ctx, () => dateTextToDays(text));
    }
    case 'datetime': {
      const text = buf.toString('latin1');
      return zeroInDate(text) ? null : withContext(ctx, () => timestampTextToMicros(text));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Batch path: text bytes -> ColumnWriter, no value objects

/** Appends one non-NULL raw value to a column writer. */
export type Appender = (w: ColumnWriter, b: Buffer) => void;

/**
 * Appends the non-NULL raw value `b[start..end)` to a column writer: the raw result-set reader
 * (text-rows.ts) hands each value as a range of its row packet, with no Buffer per value.
 */
export type RangeAppender = (w: ColumnWriter, b: Buffer, start: number, end: number) => void;

const MINUS = 0x2d;
const DIGIT_0 = 0x30;
/** Longest text (sign included) whose digits are always a safe integer: 15 characters (< 10^15 < 2^53). */
const SAFE_DIGITS = 15;
const MICROS_PER_DAY = 86_400_000_000;
const MICROS_PER_SECOND = 1_000_000;
/** Days from 1970 within which micros since 1970 are safe integers (2^53 µs is ~104 249 days). */
const SAFE_DAYS = 104_000;

/** Parses ASCII decimal digits `b[start..end)` with an optional leading '-' (at most 15 digits: exact). */
function asciiInt(b: Buffer, start: number, end: number): number {
  let i = start;
  const neg = b[start] === MINUS;
  if (neg) i++;
  let n = 0;
  for (; i < end; i++) n = n * 10 + (b[i]! - DIGIT_0);
  return neg ? -n : n;
}

/** Two ASCII digits at `off`. */
function two(b: Buffer, off: number): number {
  return (b[off]! - DIGIT_0) * 10 + (b[off + 1]! - DIGIT_0);
}

/** Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's days_from_civil). */
export function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

export function lastDayOfMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/**
 * Days of a `YYYY-MM-DD` prefix of `b[s..end)`, `null` for a zero-in-date value, or `undefined`
 * when the text is not a plain calendar date (then the caller lets time-text.ts refuse it with
 * its message).
 */
function daysOfBytes(b: Buffer, s: number, end: number): number | null | undefined {
  if (end - s < 10 || b[s + 4] !== MINUS || b[s + 7] !== MINUS) return undefined;
  const year = two(b, s) * 100 + two(b, s + 2);
  const month = two(b, s + 5);
  const day = two(b, s + 8);
  if (month === 0 || day === 0) return null;
  if (month > 12 || day > lastDayOfMonth(year, month)) return undefined;
  return daysFromCivil(year, month, day);
}

/** `YYYY-MM-DD HH:MM:SS[.f{1,6}]` in `b[s..end)` to micros, or undefined when it is anything else. */
function microsOfBytes(days: number, b: Buffer, s: number, end: number): number | bigint | undefined {
  const n = end - s;
  if (n < 19 || b[s + 10] !== 0x20 || b[s + 13] !== 0x3a || b[s + 16] !== 0x3a) return undefined;
  const h = two(b, s + 11);
  const mi = two(b, s + 14);
  const sec = two(b, s + 17);
  if (h > 23 || mi > 59 || sec > 59) return undefined;
  let frac = 0;
  if (n > 19) {
    if (b[s + 19] !== 0x2e || n > 26 || n === 20) return undefined;
    for (let i = 20; i < 26; i++) frac = frac * 10 + (i < n ? b[s + i]! - DIGIT_0 : 0);
  }
  const seconds = h * 3600 + mi * 60 + sec;
  // Within ±SAFE_DAYS every partial sum stays below 2^53: plain number arithmetic is exact.
  if (days > -SAFE_DAYS && days < SAFE_DAYS)
    return days * MICROS_PER_DAY + seconds * MICROS_PER_SECOND + frac;
  return BigInt(days) * BigInt(MICROS_PER_DAY) + BigInt(seconds * MICROS_PER_SECOND + frac);
}

/**
 * The range appender of a column (`ctx` names it in errors): the one batch-path parser per read
 * kind, used by the raw result-set reader on packet ranges and, through `appenderOf`, on Buffers.
 * A value that is not the plain form (a date outside the calendar, say) falls back to
 * `parseValue` on a slice, so its error is the row path's, word for word.
 */
export function rangeAppenderOf(plan: ReadPlan, ctx: ValueContext): RangeAppender {
  switch (plan.kind) {
    case 'int':
      return (w, b, s, e) => w.appendInt(asciiInt(b, s, e));
    case 'int64':
      return (w, b, s, e) =>
        e - s <= SAFE_DIGITS
          ? w.appendInt(asciiInt(b, s, e))
          : w.appendBigInt(BigInt(b.toString('latin1', s, e)));
    case 'decimal': {
      // From the bytes through the writer's NUMERIC decoder; the text parse for anything else
      // (it words the refusal of a value the column cannot hold). One scratch per column.
      const { precision, scale } = plan.logical as Extract<LogicalType, { kind: 'decimal' }>;
      const numeric = new Uint8Array(NUMERIC_SCRATCH_BYTES);
      return (w, b, s, e) => {
        if (numericOfDecimalAscii(b, s, e, precision - scale, scale, numeric))
          w.appendNumericBinary(numeric, 0);
        else w.appendDecimalText(b.toString('latin1', s, e));
      };
    }
    case 'float':
      return (w, b, s, e) => w.appendFloat64(doubleOfAscii(b, s, e) ?? Number(b.toString('latin1', s, e)));
    case 'text':
      // Valid UTF-8 as it is: the session's SET NAMES utf8mb4 (connect.ts) has the server convert
      // every column charset, and the writer copies the bytes (no validation, as before).
      return (w, b, s, e) => w.appendUtf8Bytes(b, s, e);
    case 'binary':
      return (w, b, s, e) => w.appendBytes(b, s, e);
    case 'date':
      return (w, b, s, e) => {
        const days = e - s === 10 ? daysOfBytes(b, s, e) : undefined;
        if (days === null) w.appendNull();
        else w.appendInt(days ?? (parseValue(plan, b.subarray(s, e), ctx) as number));
      };
    case 'datetime':
      return (w, b, s, e) => {
        const days = daysOfBytes(b, s, e);
        if (days === null) {
          w.appendNull();
          return;
        }
        const micros = days === undefined ? undefined : microsOfBytes(days, b, s, e);
        if (micros === undefined) w.appendBigInt(parseValue(plan, b.subarray(s, e), ctx) as bigint);
        else if (typeof micros === 'number') w.appendInt(micros);
        else w.appendBigInt(micros);
      };
  }
}

/** The appender of a column on whole Buffers (`ctx` names it in errors): `rangeAppenderOf` over all of `b`. */
export function appenderOf(plan: ReadPlan, ctx: ValueContext): Appender {
  const range = rangeAppenderOf(plan, ctx);
  return (w, b) => range(w, b, 0, b.length);
}

// ---------------------------------------------------------------------------------------------
// Keyset literals: exact value -> SQL the server compares exactly

const DECIMAL_TEXT = /^-?\d+(\.\d+)?$/;

/**
 * Renders a key value (cursor or primary-key part, in the exact value universe) as a literal
 * the server compares to the column exactly and in the column's own order: integers and decimals
 * as unquoted exact numbers (a quoted number would be compared as a double), doubles with an
 * exponent (a double literal), text as a hex string literal in utf8mb4 (the column's collation
 * applies; no escaping, so sql_mode cannot change its meaning), bytes as a hex literal, and
 * dates/datetimes as quoted text the server converts to the column's type.
 */
export function keyLiteral(plan: ReadPlan, v: unknown): string {
  switch (plan.literal) {
    case 'number': {
      const s = typeof v === 'bigint' || typeof v === 'number' ? String(v) : (v as string);
      if (!DECIMAL_TEXT.test(s)) throw new DataError(`key value ${JSON.stringify(s)} is not an exact number`);
      return s;
    }
    case 'float': {
      const x = v as number;
      if (!Number.isFinite(x)) throw new DataError(`key value ${x} cannot be written as a MySQL double`);
      const s = String(x);
      return /e/i.test(s) ? s : `${s}e0`;
    }
    case 'string':
      return stringLiteral(v as string);
    case 'bytes':
      return `X'${Buffer.from(v as Uint8Array).toString('hex')}'`;
    case 'date':
      return `'${daysToDateText(v as number)}'`;
    case 'datetime':
      return `'${microsToTimestampText(v as bigint, false)}'`;
  }
}
