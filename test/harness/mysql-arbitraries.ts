/**
 * fast-check arbitraries of MySQL/MariaDB text output, shared by the unit tests of the batch
 * path's byte parsers (mysql-driver-units) and the raw row walk (mysql-text-rows).
 */
import fc from 'fast-check';
import { microsToTimestampText } from '../../shared/position/time-text.js';

/** DATETIME(fsp) text exactly as MySQL prints it: always `fsp` fractional digits, years 1-9999. */
export const mysqlDatetimeText: fc.Arbitrary<string> = fc
  .tuple(
    fc.bigInt({ min: -62_135_596_800_000_000n, max: 253_402_300_799_999_999n }),
    fc.integer({ min: 0, max: 6 }),
  )
  .map(([micros, fsp]) => {
    const base = microsToTimestampText(micros, false).replace(/\.\d+$/, '');
    const frac = String(((micros % 1_000_000n) + 1_000_000n) % 1_000_000n)
      .padStart(6, '0')
      .slice(0, fsp);
    return fsp > 0 ? `${base}.${frac}` : base;
  });
