/**
 * fast-check arbitraries of MySQL/MariaDB text output, shared by the unit tests of the batch
 * path's byte parsers (mysql-driver-units, mysql-ascii-numbers) and the raw row walk
 * (mysql-text-rows).
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

/**
 * DOUBLE text as MariaDB may print it (its shortest round-trip digits, or fewer) and wider
 * forms around it: JavaScript's own text of any double (`1e+308`, `-0`, `5e-324`), the same
 * with the exponent written without '+' or in upper case, fixed and exponent forms of 1-21
 * digits, and decimal digit strings with leading zeros and an exponent of any size.
 */
export const mysqlDoubleText: fc.Arbitrary<string> = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((x) => String(x).replace('e+', 'e')),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((x) => String(x).toUpperCase()),
  fc
    .tuple(fc.double({ min: -1e6, max: 1e6, noNaN: true }), fc.integer({ min: 0, max: 20 }))
    .map(([x, d]) => x.toFixed(d)),
  fc
    .tuple(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer({ min: 1, max: 21 }))
    .map(([x, d]) => x.toExponential(d - 1)),
  fc
    .tuple(
      fc.boolean(),
      fc.stringMatching(/^0{0,3}[0-9]{1,20}$/),
      fc.option(fc.stringMatching(/^[0-9]{0,20}$/), { nil: undefined }),
      fc.option(fc.integer({ min: -400, max: 400 }), { nil: undefined }),
    )
    .map(
      ([neg, int, frac, exp]) =>
        `${neg ? '-' : ''}${int}${frac === undefined ? '' : `.${frac}`}${exp === undefined ? '' : `e${exp}`}`,
    ),
);

/**
 * DECIMAL(p, s) text as MySQL prints it (an optional '-', the integer digits, and exactly s
 * fractional digits) for any value in range, from zero and one unit to the maximum 10^p - 1
 * units, plus the same with leading zeros and `-0`.
 */
export function mysqlDecimalText(precision: number, scale: number): fc.Arbitrary<string> {
  const max = 10n ** BigInt(precision) - 1n;
  return fc
    .tuple(
      fc.oneof(
        fc.bigInt({ min: -max, max }),
        fc.constantFrom(0n, 1n, -1n, max, -max),
        fc.integer({ min: 1, max: precision }).map((d) => 10n ** BigInt(d) - 1n),
      ),
      fc.nat({ max: 3 }),
      fc.boolean(),
    )
    .map(([v, zeros, minusZero]) => {
      const digits = (v < 0n ? -v : v).toString().padStart(scale + 1, '0');
      const int = digits.slice(0, digits.length - scale);
      const text = `${'0'.repeat(zeros)}${int}${scale > 0 ? `.${digits.slice(digits.length - scale)}` : ''}`;
      return v < 0n || (v === 0n && minusZero) ? `-${text}` : text;
    });
}
