/**
 * Date/timestamp text conversions: exact round-trips over Postgres' whole range, agreement with
 * JS `Date` where `Date` is exact (milliseconds, years 0..9999), and the refusals that keep
 * wrong values out of cursors.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DataError } from '../../shared/contracts/errors.js';
import {
  DATE_INFINITY,
  DATE_NEG_INFINITY,
  dateTextToDays,
  daysToDateText,
  microsToTimestampText,
  TIMESTAMP_INFINITY,
  TIMESTAMP_NEG_INFINITY,
  timestampTextToMicros,
} from '../../shared/position/time-text.js';

// Postgres' range: 4713-11-24 BC 00:00 .. (its 294276 AD limit is past int64 micros) the int64 limit.
const PG_MIN_MICROS = -210_866_803_200_000_000n;
const PG_MIN_DAYS = -2_440_588;
const PG_MAX_DAYS = 2_145_042_905; // 5874897-12-31
const micros = fc.oneof(
  fc.bigInt({ min: PG_MIN_MICROS, max: TIMESTAMP_INFINITY - 1n }),
  fc.bigInt({ min: -(10n ** 12n), max: 10n ** 12n }),
  fc.constantFrom(0n, -1n, 1n, 253_402_300_799_999_999n, -62_135_596_800_000_000n, TIMESTAMP_INFINITY - 1n),
);
const days = fc.oneof(
  fc.integer({ min: PG_MIN_DAYS, max: PG_MAX_DAYS }),
  fc.integer({ min: -1000, max: 1000 }),
);

describe('timestamp text', () => {
  it('round-trips micros -> text -> micros, with and without the +00 offset', () => {
    fc.assert(
      fc.property(micros, fc.boolean(), (us, utc) => {
        expect(timestampTextToMicros(microsToTimestampText(us, utc))).toBe(us);
      }),
      { numRuns: 5000 },
    );
  });

  it('agrees with Date.UTC where Date is exact (whole milliseconds, years 0001..9999)', () => {
    fc.assert(
      fc.property(
        fc.date({
          min: new Date('0001-01-01T00:00:00Z'),
          max: new Date('9999-12-31T23:59:59.999Z'),
          noInvalidDate: true,
        }),
        (d) => {
          const us = BigInt(d.getTime()) * 1000n;
          const iso = d.toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ
          expect(timestampTextToMicros(iso.replace('Z', ''))).toBe(us);
          expect(microsToTimestampText(us, false)).toBe(
            iso.slice(0, 19).replace('T', ' ') + trimFraction(iso.slice(19, 23)),
          );
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('prints the forms Postgres prints', () => {
    expect(microsToTimestampText(0n, true)).toBe('1970-01-01 00:00:00+00');
    expect(microsToTimestampText(-1n, false)).toBe('1969-12-31 23:59:59.999999');
    expect(microsToTimestampText(1_704_164_645_120_000n, true)).toBe('2024-01-02 03:04:05.12+00');
    expect(microsToTimestampText(253_402_300_799_999_999n, false)).toBe('9999-12-31 23:59:59.999999');
    expect(microsToTimestampText(-62_135_596_800_000_000n, false)).toBe('0001-01-01 00:00:00');
    expect(microsToTimestampText(-62_135_596_800_000_001n, true)).toBe('0001-12-31 23:59:59.999999+00 BC');
    expect(microsToTimestampText(TIMESTAMP_INFINITY, true)).toBe('infinity');
    expect(microsToTimestampText(TIMESTAMP_NEG_INFINITY, false)).toBe('-infinity');
  });

  it('reads offsets, T, Z, BC and the infinities', () => {
    const base = timestampTextToMicros('2024-01-02 03:04:05.123456');
    expect(base).toBe(1_704_164_645_123_456n);
    expect(timestampTextToMicros('2024-01-02T03:04:05.123456Z')).toBe(base);
    expect(timestampTextToMicros('2024-01-02 03:04:05.123456+00')).toBe(base);
    expect(timestampTextToMicros('2024-01-02 08:34:05.123456+05:30')).toBe(base);
    expect(timestampTextToMicros('2024-01-01 23:04:05.123456-04')).toBe(base);
    expect(timestampTextToMicros('2024-01-02 03:04:05.123456+00:00:00')).toBe(base);
    expect(timestampTextToMicros('2024-01-02 03:04:05.1')).toBe(1_704_164_645_100_000n);
    // 44 BC is astronomical year -43, which Date handles exactly.
    const idesOfMarch = new Date(0);
    idesOfMarch.setUTCFullYear(-43, 2, 15);
    idesOfMarch.setUTCHours(12, 0, 0, 0);
    expect(timestampTextToMicros('0044-03-15 12:00:00+00 BC')).toBe(BigInt(idesOfMarch.getTime()) * 1000n);
    expect(microsToTimestampText(BigInt(idesOfMarch.getTime()) * 1000n, true)).toBe(
      '0044-03-15 12:00:00+00 BC',
    );
    expect(timestampTextToMicros('infinity')).toBe(TIMESTAMP_INFINITY);
    expect(timestampTextToMicros('-infinity')).toBe(TIMESTAMP_NEG_INFINITY);
  });

  it('refuses zero dates, impossible dates, rounding and the int64 edge', () => {
    for (const bad of [
      '0000-00-00 00:00:00',
      '2023-02-29 00:00:00',
      '2024-13-01 00:00:00',
      '2024-01-01 24:00:00',
      '2024-01-01 00:00:60',
      '2024-01-01 00:00:00.1234567',
      '2024-01-01',
      '0000-01-01 00:00:00 BC',
      '294276-12-31 23:59:59.999999',
      '294247-01-10 04:00:54.775807',
      '290309-12-21 19:59:05.224192 BC',
      'now',
    ]) {
      expect(() => timestampTextToMicros(bad), bad).toThrow(DataError);
    }
    expect(() => timestampTextToMicros('0000-00-00 00:00:00')).toThrow(/zero date/);
  });
});

describe('date text', () => {
  it('round-trips days -> text -> days over Postgres range', () => {
    fc.assert(
      fc.property(days, (d) => {
        expect(dateTextToDays(daysToDateText(d))).toBe(d);
      }),
      { numRuns: 5000 },
    );
  });

  it('agrees with the timestamp conversion at midnight', () => {
    fc.assert(
      fc.property(fc.integer({ min: PG_MIN_DAYS, max: 106_751_991 }), (d) => {
        const text = daysToDateText(d);
        const [date, bc] = text.split(' ');
        expect(timestampTextToMicros(`${date} 00:00:00${bc ? ' BC' : ''}`)).toBe(BigInt(d) * 86_400_000_000n);
      }),
      { numRuns: 2000 },
    );
  });

  it('prints and reads the edge forms', () => {
    expect(daysToDateText(0)).toBe('1970-01-01');
    expect(daysToDateText(-1)).toBe('1969-12-31');
    expect(daysToDateText(-719_162)).toBe('0001-01-01');
    expect(daysToDateText(-719_163)).toBe('0001-12-31 BC');
    expect(daysToDateText(PG_MIN_DAYS)).toBe('4714-11-24 BC');
    expect(daysToDateText(PG_MAX_DAYS)).toBe('5874897-12-31');
    expect(daysToDateText(2_932_896)).toBe('9999-12-31');
    expect(dateTextToDays('2000-02-29')).toBe(11_016);
    expect(dateTextToDays('infinity')).toBe(DATE_INFINITY);
    expect(dateTextToDays('-infinity')).toBe(DATE_NEG_INFINITY);
    expect(daysToDateText(DATE_INFINITY)).toBe('infinity');
    expect(daysToDateText(DATE_NEG_INFINITY)).toBe('-infinity');
    expect(() => dateTextToDays('0000-00-00')).toThrow(/zero date/);
    expect(() => dateTextToDays('1900-02-29')).toThrow(DataError);
  });
});

function trimFraction(millis: string): string {
  const t = millis.replace(/0+$/, '');
  return t === '.' ? '' : t;
}
