/**
 * Exact conversions between the text forms Postgres and MySQL/MariaDB print for dates and
 * timestamps and the value universe tidemark carries (date: days since 1970-01-01 as a number,
 * timestamp: microseconds since the Unix epoch as a bigint). They are the exactness backbone of
 * cursor tokens: a cursor read as text, converted here, encoded by `key-codec.ts`, decoded and
 * printed back here must select exactly the same rows, to the microsecond.
 *
 * Owns: the proleptic Gregorian calendar arithmetic, Postgres' `infinity` sentinels and the
 * literal syntax both databases accept. Never goes through `Date` (milliseconds, and it drops
 * years outside ±275760) and never rounds: text with more than six fractional digits is refused.
 *
 * Sentinels: `infinity` is the max of the integer (as Postgres stores it), `-infinity` is min + 1
 * (Postgres stores min; DuckDB and Arrow readers treat min + 1 as -infinity and min as an
 * out-of-range date), so both sort after/before every finite value and DuckDB reads both back as
 * infinities. No real value comes near either end.
 */
import { DataError } from '../contracts/errors.js';

/** `timestamp 'infinity'`: int64 max microseconds (Postgres' own DT_NOEND). */
export const TIMESTAMP_INFINITY = 2n ** 63n - 1n;
/** `timestamp '-infinity'`: int64 min + 1 microseconds (DuckDB's -infinity; Postgres uses min). */
export const TIMESTAMP_NEG_INFINITY = -(2n ** 63n) + 1n;
/** `date 'infinity'`: int32 max days (Postgres' own DATEVAL_NOEND). */
export const DATE_INFINITY = 2 ** 31 - 1;
/** `date '-infinity'`: int32 min + 1 days (DuckDB's -infinity; Postgres uses min). */
export const DATE_NEG_INFINITY = -(2 ** 31) + 1;

const MICROS_PER_SECOND = 1_000_000n;
const MICROS_PER_DAY = 86_400n * MICROS_PER_SECOND;

// Year may have more than four digits (Postgres prints up to 294276 AD); ` BC` comes last, after
// any zone offset, as Postgres prints it ('0044-03-15 00:00:00+00 BC').
const DATE_TEXT = /^(\d{4,})-(\d{2})-(\d{2})( BC)?$/;
const TIMESTAMP_TEXT =
  /^(\d{4,})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(Z|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)?( BC)?$/;
const OFFSET_TEXT = /^([+-])(\d{2})(?::?(\d{2}))?(?::?(\d{2}))?$/;

/**
 * Parses a Postgres or MySQL timestamp text into microseconds since the Unix epoch.
 *
 * Accepts `YYYY-MM-DD HH:MM:SS[.ffffff]` (or `T` as separator), an optional zone offset (`+00`,
 * `+05:30`, `-03:00:00`, `Z`) which is applied so the result is the UTC instant, an optional
 * trailing ` BC`, and `infinity` / `-infinity` (mapped to the int64 sentinels). Without an
 * offset the text is taken as is: the wall clock for `timestamp`/DATETIME, or UTC when the
 * session time zone is UTC (set it: Postgres `TimeZone=UTC`, MySQL `time_zone='+00:00'`).
 *
 * @throws DataError for MySQL zero dates (`0000-00-00 ...`), impossible dates, more than six
 *   fractional digits (which would need rounding), and instants outside int64 microseconds
 *   (Postgres allows up to 294276 AD; past 294247 AD they do not fit the lake's int64 either).
 */
export function timestampTextToMicros(text: string): bigint {
  if (text === 'infinity' || text === '+infinity') return TIMESTAMP_INFINITY;
  if (text === '-infinity') return TIMESTAMP_NEG_INFINITY;
  const m = TIMESTAMP_TEXT.exec(text);
  if (!m) {
    throw new DataError(
      `timestamp text '${text}' is not 'YYYY-MM-DD HH:MM:SS[.ffffff][+HH[:MM]]' (at most 6 fractional digits) or 'infinity'`,
    );
  }
  const [, y, mo, d, hh, mi, ss, frac, offset, bc] = m;
  const days = civilToDays(text, Number(y), Number(mo), Number(d), bc !== undefined);
  const hour = Number(hh);
  const minute = Number(mi);
  const second = Number(ss);
  if (hour > 23 || minute > 59 || second > 59) {
    throw new DataError(`timestamp text '${text}' has a time of day outside 00:00:00..23:59:59`);
  }
  const micros =
    BigInt(days) * MICROS_PER_DAY +
    BigInt(hour * 3600 + minute * 60 + second) * MICROS_PER_SECOND +
    BigInt((frac ?? '').padEnd(6, '0'));
  const utcMicros = micros - BigInt(offsetSeconds(text, offset)) * MICROS_PER_SECOND;
  // Postgres accepts years up to 294276 AD, past int64 Unix microseconds (it counts from 2000);
  // such values, and the two that would collide with the infinity sentinels, are refused.
  if (utcMicros <= TIMESTAMP_NEG_INFINITY || utcMicros >= TIMESTAMP_INFINITY) {
    throw new DataError(
      `timestamp text '${text}' is outside the int64 microsecond range (290309 BC..294247 AD)`,
    );
  }
  return utcMicros;
}

/**
 * Prints microseconds since the Unix epoch as a literal both Postgres and MySQL accept, in the
 * form Postgres itself prints (DateStyle ISO): `2024-01-02 03:04:05.123456`, fractional digits
 * trimmed of trailing zeros (and the fraction left out when zero), years before 1 AD as
 * `YYYY-MM-DD HH:MM:SS BC`, the sentinels as `infinity` / `-infinity`.
 *
 * With `utc: true` the zone offset `+00` is appended (Postgres prints timestamptz that way under
 * `TimeZone=UTC`), so a `timestamptz` literal means the same instant whatever the session time
 * zone. Never for MySQL-family sources: MariaDB 10.11 does not read offsets, and in a comparison
 * or CAST it silently drops one (only a warning; strict-mode inserts fail). There pass
 * `utc: false` and set the session `time_zone = '+00:00'`.
 */
export function microsToTimestampText(micros: bigint, utc: boolean): string {
  if (micros === TIMESTAMP_INFINITY) return 'infinity';
  if (micros === TIMESTAMP_NEG_INFINITY) return '-infinity';
  let days = micros / MICROS_PER_DAY;
  let rest = micros % MICROS_PER_DAY;
  if (rest < 0n) {
    // BigInt division truncates toward zero; the calendar needs floor division.
    days -= 1n;
    rest += MICROS_PER_DAY;
  }
  const [year, month, day] = daysToCivil(Number(days));
  const secondsOfDay = Number(rest / MICROS_PER_SECOND);
  const fraction = Number(rest % MICROS_PER_SECOND);
  const time =
    `${pad2(Math.floor(secondsOfDay / 3600))}:${pad2(Math.floor(secondsOfDay / 60) % 60)}:${pad2(secondsOfDay % 60)}` +
    (fraction === 0 ? '' : `.${String(fraction).padStart(6, '0').replace(/0+$/, '')}`);
  return `${formatYearMonthDay(year, month, day, false)} ${time}${utc ? '+00' : ''}${year < 1 ? ' BC' : ''}`;
}

/**
 * Parses a Postgres or MySQL date text (`YYYY-MM-DD`, optional trailing ` BC`, `infinity`,
 * `-infinity`) into days since 1970-01-01 (the sentinels map to int32 max/min).
 *
 * @throws DataError for MySQL zero dates and impossible dates.
 */
export function dateTextToDays(text: string): number {
  if (text === 'infinity' || text === '+infinity') return DATE_INFINITY;
  if (text === '-infinity') return DATE_NEG_INFINITY;
  const m = DATE_TEXT.exec(text);
  if (!m) throw new DataError(`date text '${text}' is not 'YYYY-MM-DD' (optionally ' BC') or 'infinity'`);
  const [, y, mo, d, bc] = m;
  const days = civilToDays(text, Number(y), Number(mo), Number(d), bc !== undefined);
  if (days >= DATE_INFINITY || days <= DATE_NEG_INFINITY) {
    throw new DataError(`date text '${text}' is outside the range of an int32 day count`);
  }
  return days;
}

/**
 * Prints days since 1970-01-01 as `YYYY-MM-DD` (` BC` appended before 1 AD, as Postgres prints
 * it; `infinity` / `-infinity` for the sentinels), a literal Postgres and MySQL accept.
 */
export function daysToDateText(days: number): string {
  if (!Number.isSafeInteger(days)) throw new DataError(`date ${days} is not an integer day count`);
  if (days === DATE_INFINITY) return 'infinity';
  if (days === DATE_NEG_INFINITY) return '-infinity';
  const [year, month, day] = daysToCivil(days);
  return formatYearMonthDay(year, month, day, true);
}

/** Days since 1970-01-01 of a proleptic Gregorian date; validates month and day. */
function civilToDays(text: string, year: number, month: number, day: number, bc: boolean): number {
  if (year === 0 && month === 0 && day === 0) {
    throw new DataError(
      `'${text}' is a MySQL zero date, which is no point in time; map it by policy (e.g. to NULL) before it reaches a cursor`,
    );
  }
  if (bc && year === 0) throw new DataError(`'${text}': there is no year 0 BC`);
  // Astronomical numbering: 1 BC is year 0, 2 BC is year -1. A bare year 0000 (MySQL allows it)
  // is taken as astronomical year 0.
  const astronomicalYear = bc ? 1 - year : year;
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(astronomicalYear, month)) {
    throw new DataError(`'${text}' is not a calendar date (month ${month}, day ${day})`);
  }
  return daysFromCivil(astronomicalYear, month, day);
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return isLeapYear(year) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

function isLeapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

// Howard Hinnant's days_from_civil / civil_from_days: exact for every proleptic Gregorian date,
// including negative years, with floor division throughout.
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yearOfEra = y - era * 400;
  const dayOfYear = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear;
  return era * 146097 + dayOfEra - 719468;
}

function daysToCivil(days: number): [year: number, month: number, day: number] {
  const z = days + 719468;
  const era = Math.floor(z / 146097);
  const dayOfEra = z - era * 146097;
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36524) - Math.floor(dayOfEra / 146096)) /
      365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const mp = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  return [year, month, day];
}

/** `YYYY-MM-DD`; before 1 AD the BC year, with ` BC` appended when `withEra` (timestamps append it after the zone). */
function formatYearMonthDay(year: number, month: number, day: number, withEra: boolean): string {
  const shownYear = year < 1 ? 1 - year : year;
  const text = `${String(shownYear).padStart(4, '0')}-${pad2(month)}-${pad2(day)}`;
  return withEra && year < 1 ? `${text} BC` : text;
}

function offsetSeconds(text: string, offset: string | undefined): number {
  if (offset === undefined || offset === 'Z') return 0;
  const m = OFFSET_TEXT.exec(offset);
  if (!m) throw new DataError(`timestamp text '${text}' has an unreadable zone offset '${offset}'`);
  const [, sign, hh, mm, ss] = m;
  const seconds = Number(hh) * 3600 + Number(mm ?? 0) * 60 + Number(ss ?? 0);
  return sign === '-' ? -seconds : seconds;
}

function pad2(n: number): string {
  return String(n).padStart(2, '0');
}
