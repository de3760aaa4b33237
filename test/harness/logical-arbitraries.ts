/**
 * fast-check arbitraries of wire values for every logical kind (shared/dataplane/schema.ts), in
 * the forms `encodeRows` takes: the encoder's round-trip tests and the Parquet page tests draw
 * from the same inputs. And arbitraries of the types and schemas themselves (random logical
 * types, lists nested, random table schemas), which the schema-change rules and the Iceberg
 * schema tests draw from.
 */
import fc from 'fast-check';
import { formatDecimal } from '../../shared/dataplane/decimal128.js';
import type { LogicalType, Schema } from '../../shared/dataplane/schema.js';

export const MIN_I64 = -(2n ** 63n);
export const MAX_I64 = 2n ** 63n - 1n;

/** Decimal text of decimal(p, s): canonical, with trailing fractional zeros trimmed or added. */
function decimalText(precision: number, scale: number): fc.Arbitrary<string> {
  const bound = 10n ** BigInt(precision) - 1n;
  return fc
    .tuple(
      fc.oneof(fc.constantFrom(bound, -bound, 0n, 1n, -1n), fc.bigInt({ min: -bound, max: bound })),
      fc.integer({ min: -scale, max: 3 }),
    )
    .map(([u, extra]) => {
      let text = formatDecimal(u, scale);
      if (extra > 0) text = scale === 0 ? `${text}.${'0'.repeat(extra)}` : text + '0'.repeat(extra);
      else if (extra < 0 && scale > 0) {
        // Drop up to -extra trailing zeros: "1.50" -> "1.5" must rescale back to 150.
        for (let k = 0; k < -extra && text.endsWith('0') && text.includes('.'); k++) text = text.slice(0, -1);
        if (text.endsWith('.')) text = text.slice(0, -1);
      }
      return text;
    });
}

export function arbitraryOf(t: LogicalType): fc.Arbitrary<unknown> {
  switch (t.kind) {
    case 'bool':
      return fc.boolean();
    case 'int8':
      return fc.integer({ min: -128, max: 127 });
    case 'int16':
      return fc.integer({ min: -32768, max: 32767 });
    case 'int32':
    case 'date':
      return fc.oneof(
        fc.constantFrom(-(2 ** 31), 2 ** 31 - 1, 0),
        fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
      );
    case 'int64':
    case 'timestamp':
      return fc.oneof(
        fc.constantFrom(MIN_I64, MAX_I64, 0n, -1n, 2n ** 53n + 1n, -(2n ** 53n) - 1n),
        fc.bigInt({ min: MIN_I64, max: MAX_I64 }),
        // Plausible instants, including pre-1970 and far-future ones.
        fc.bigInt({ min: -62_135_596_800_000_000n, max: 253_402_300_799_999_999n }),
      );
    case 'float64':
      return fc.oneof(
        fc.double(),
        fc.constantFrom(0, -0, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY),
      );
    case 'decimal':
      return decimalText(t.precision, t.scale);
    case 'text':
      return fc.oneof(
        fc.constantFrom('', 'é', '😀', 'a\u0000b', 'x'.repeat(200), 'ü'.repeat(70)),
        fc.string({ unit: 'grapheme', maxLength: 40 }),
        fc.string({ maxLength: 100 }),
      );
    case 'binary':
      return fc.uint8Array({ maxLength: 80 });
    case 'list':
      return fc.array(fc.option(arbitraryOf(t.element), { nil: null, freq: 4 }), { maxLength: 6 });
  }
}

export const KINDS: LogicalType[] = [
  { kind: 'bool' },
  { kind: 'int8' },
  { kind: 'int16' },
  { kind: 'int32' },
  { kind: 'int64' },
  { kind: 'float64' },
  { kind: 'decimal', precision: 38, scale: 0 },
  { kind: 'decimal', precision: 38, scale: 10 },
  { kind: 'decimal', precision: 12, scale: 2 },
  { kind: 'decimal', precision: 18, scale: 18 },
  { kind: 'decimal', precision: 1, scale: 0 },
  { kind: 'text' },
  { kind: 'binary' },
  { kind: 'date' },
  { kind: 'timestamp', utc: true },
  { kind: 'timestamp', utc: false },
  { kind: 'list', element: { kind: 'int32' } },
  { kind: 'list', element: { kind: 'text' } },
  { kind: 'list', element: { kind: 'decimal', precision: 20, scale: 4 } },
  { kind: 'list', element: { kind: 'list', element: { kind: 'int64' } } },
];

/**
 * A logical type that is not a list: one of KINDS' fixed-size kinds, or a decimal of precision
 * 1..`maxPrecision` and scale 0..`maxScale` (never above its precision).
 */
export function scalarTypeArb(maxPrecision = 38, maxScale = 38): fc.Arbitrary<LogicalType> {
  return fc.oneof(
    fc.constantFrom(...KINDS.filter((t) => t.kind !== 'list' && t.kind !== 'decimal')),
    fc
      .tuple(fc.integer({ min: 1, max: maxPrecision }), fc.integer({ min: 0, max: maxScale }))
      .map(([p, s]) => ({ kind: 'decimal' as const, precision: Math.max(p, s), scale: s })),
  );
}

/** Mostly a `scalar` type, else a list of one, nested up to `listDepth` lists deep. */
export function logicalTypeArb(
  scalar: fc.Arbitrary<LogicalType>,
  listDepth: 1 | 2,
): fc.Arbitrary<LogicalType> {
  const list = (element: LogicalType): LogicalType => ({ kind: 'list', element });
  return fc.oneof(
    { weight: 4, arbitrary: scalar },
    { weight: 1, arbitrary: scalar.map(list) },
    ...(listDepth === 2 ? [{ weight: 1, arbitrary: scalar.map((t) => list(list(t))) }] : []),
  );
}

/**
 * A table schema of 1..`maxColumns` columns with unique lowercase names, each of `type` and
 * nullable or not, keyed by its first k columns (k may be 0); a column's source type is
 * `sourceType` of its logical type.
 */
export function tableSchemaArb(
  type: fc.Arbitrary<LogicalType>,
  options: { readonly maxColumns: number; readonly sourceType: (t: LogicalType) => string },
): fc.Arbitrary<Schema> {
  return fc
    .uniqueArray(fc.stringMatching(/^[a-z][a-z0-9_]{0,8}$/), { minLength: 1, maxLength: options.maxColumns })
    .chain((names) =>
      fc.tuple(
        fc.tuple(...names.map((name) => fc.tuple(fc.constant(name), type, fc.boolean()))),
        fc.integer({ min: 0, max: names.length }),
      ),
    )
    .map(([cols, pk]) => ({
      columns: cols.map(([name, t, nullable]) => ({
        name,
        type: t,
        nullable,
        sourceType: options.sourceType(t),
      })),
      primaryKey: cols.slice(0, pk).map(([n]) => n),
    }));
}
