/**
 * A Parquet data file's Iceberg metrics (shared/iceberg/data-file.ts) on files tidemark's two
 * encoders write (parquet-wasm through `encodeParquet`, the flat writer through `encodeFlat`) for
 * random tables of every flat lake kind, nulls, NaN/-0, extreme values and several row groups:
 * counts equal the data's; every bound holds for every value (truncated strings included); the
 * bounds of ordered scalar kinds are the exact min and max and are never left out while a value
 * exists; split offsets are the row groups' starts. Then the edges by hand: truncation of strings
 * and binary, list columns, columns without field ids, and Appendix D's bytes.
 */
import zlib from 'node:zlib';
import { Schema as ArrowSchema, Field, List, RecordBatch } from 'apache-arrow';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { LogicalType, Schema } from '../../shared/dataplane/schema.js';
import {
  parquetDataFile,
  parquetMetrics,
  truncateBinaryUpper,
  truncateStringLower,
  truncateStringUpper,
} from '../../shared/iceberg/data-file.js';
import {
  compareValues,
  deserializeValue,
  primitiveOf,
  type SingleValue,
  serializeValue,
  twosComplementBE,
} from '../../shared/iceberg/single-value.js';
import type { IcebergField, IcebergPrimitive, IcebergSchema } from '../../shared/iceberg/spec.js';
import { decodeStruct, nativeCompressor } from '../../shared/sink/parquet-pages.cjs';
import { encodeFlat, encodeParquet } from '../../shared/sink/parquet-writer.js';
import { lakeRecord } from '../harness/lake-record.js';
import { arbitraryOf, KINDS } from '../harness/logical-arbitraries.js';

const FLAT_KINDS = KINDS.filter((t) => t.kind !== 'list');
const gzip = nativeCompressor('gzip')!;

/** The Iceberg type HB's mapping gives a lake type (issue 30), as this test needs it. */
function icebergOf(t: LogicalType): IcebergPrimitive {
  switch (t.kind) {
    case 'bool':
      return 'boolean';
    case 'int8':
    case 'int16':
    case 'int32':
      return 'int';
    case 'int64':
      return 'long';
    case 'float64':
      return 'double';
    case 'decimal':
      return `decimal(${t.precision}, ${t.scale})`;
    case 'text':
      return 'string';
    case 'binary':
      return 'binary';
    case 'date':
      return 'date';
    case 'timestamp':
      return t.utc ? 'timestamptz' : 'timestamp';
    case 'list':
      throw new Error('not flat');
  }
}

/** A decimal's text as its unscaled value at `scale`. */
function unscaled(text: string, scale: number): bigint {
  const negative = text.startsWith('-');
  const [int = '0', frac = ''] = (negative ? text.slice(1) : text).split('.');
  const digits = int + frac.padEnd(scale, '0').slice(0, scale);
  return negative ? -BigInt(digits) : BigInt(digits);
}

/** A lake value as the single value of its Iceberg type (undefined: null or NaN, no bound). */
function single(t: LogicalType, v: unknown): SingleValue | undefined {
  if (v === null || v === undefined) return undefined;
  switch (t.kind) {
    case 'int64':
    case 'timestamp':
      return BigInt(v as bigint);
    case 'float64':
      return Number.isNaN(v) ? undefined : (v as number);
    case 'decimal':
      return unscaled(v as string, t.scale);
    default:
      return v as SingleValue;
  }
}

/** `record` with `PARQUET:field_id` i + 1 on its i-th field. */
function withIds(record: RecordBatch): RecordBatch {
  const fields = record.schema.fields.map(
    (f, i) => new Field(f.name, f.type, f.nullable, new Map([['PARQUET:field_id', String(i + 1)]])),
  );
  return new RecordBatch(new ArrowSchema(fields, record.schema.metadata), record.data);
}

/** The Iceberg schema of a lake table: its columns, then the metadata tail, ids from 1. */
function icebergSchema(schema: Schema): IcebergSchema {
  const data: IcebergField[] = schema.columns.map((c, i) => ({
    id: i + 1,
    name: c.name,
    required: !c.nullable,
    type: icebergOf(c.type),
  }));
  const tail: [string, IcebergPrimitive][] = [
    ['__op', 'string'],
    ['__pos', 'string'],
    ['__commit_ts', 'timestamptz'],
    ['__ingest_ts', 'timestamptz'],
    ['__snapshot', 'boolean'],
    ['__phase', 'string'],
  ];
  return {
    type: 'struct',
    'schema-id': 0,
    fields: [
      ...data,
      ...tail.map(([name, type], i) => ({
        id: data.length + i + 1,
        name,
        required: name !== '__commit_ts',
        type,
      })),
    ],
  };
}

/** Row-group start offsets read straight from the footer. */
function rowGroupCount(file: Uint8Array): number {
  const length = new DataView(file.buffer, file.byteOffset + file.length - 8, 4).getUint32(0, true);
  const meta = decodeStruct(file, file.length - 8 - length).struct;
  return (meta.fields.find((f) => f.id === 4)!.value as { items: unknown[] }).items.length;
}

const ORDERED_EXACT = new Set([
  'bool',
  'int8',
  'int16',
  'int32',
  'int64',
  'decimal',
  'date',
  'timestamp',
  'float64',
]);

const caseArb = fc
  .array(fc.record({ type: fc.constantFrom(...FLAT_KINDS), nullable: fc.boolean() }), {
    minLength: 1,
    maxLength: 5,
  })
  .chain((cols) =>
    fc.record({
      cols: fc.constant(cols),
      rows: fc.array(
        fc.tuple(
          ...cols.map((c) => {
            const values =
              c.type.kind === 'text'
                ? fc.oneof(arbitraryOf(c.type), fc.string({ minLength: 17, maxLength: 40 }))
                : arbitraryOf(c.type);
            return c.nullable ? fc.option(values, { nil: null, freq: 3 }) : values;
          }),
        ),
        { minLength: 0, maxLength: 40 },
      ),
      maxRowGroupRows: fc.constantFrom(7, 1_000_000),
      writer: fc.constantFrom('wasm' as const, 'flat' as const),
    }),
  );

describe('Iceberg metrics of a Parquet data file', () => {
  it('counts and bounds the data of random tables, from both encoders', () => {
    fc.assert(
      fc.property(caseArb, ({ cols, rows, maxRowGroupRows, writer }) => {
        const schema: Schema = {
          columns: cols.map((c, i) => ({
            name: `c${i}`,
            type: c.type,
            nullable: c.nullable,
            sourceType: 'x',
          })),
          primaryKey: [],
        };
        const record = withIds(lakeRecord(schema, rows));
        const file =
          writer === 'wasm'
            ? encodeParquet([record], { compression: 'snappy', maxRowGroupRows })
            : encodeFlat([record], { maxRowGroupRows }, gzip)!;
        const iceberg = icebergSchema(schema);
        const m = parquetMetrics(file, iceberg);

        expect(m.record_count).toBe(rows.length);
        expect(m.file_size_in_bytes).toBe(file.length);
        expect(m.split_offsets).toHaveLength(rowGroupCount(file));
        expect([...m.split_offsets]).toEqual([...m.split_offsets].sort((a, b) => a - b));
        expect([...m.column_sizes.keys()].sort((a, b) => a - b)).toEqual(iceberg.fields.map((f) => f.id));
        for (const f of iceberg.fields) expect(m.value_counts.get(f.id)).toBe(rows.length);

        cols.forEach((c, i) => {
          const id = i + 1;
          const t = primitiveOf(icebergOf(c.type))!;
          const values = rows.map((r) => r[i]);
          expect(m.null_value_counts.get(id), `nulls of c${i}`).toBe(values.filter((v) => v === null).length);
          const singles = values
            .map((v) => single(c.type, v))
            .filter((v): v is SingleValue => v !== undefined);
          const lo = m.lower_bounds.get(id);
          const hi = m.upper_bounds.get(id);
          if (singles.length === 0) {
            expect(lo, `c${i} has no value, so no lower bound`).toBeUndefined();
            expect(hi).toBeUndefined();
            return;
          }
          const lower = lo === undefined ? undefined : deserializeValue(t, lo);
          const upper = hi === undefined ? undefined : deserializeValue(t, hi);
          for (const v of singles) {
            if (lower !== undefined)
              expect(compareValues(t, lower, v), `c${i} lower bound`).toBeLessThanOrEqual(0);
            if (upper !== undefined)
              expect(compareValues(t, upper, v), `c${i} upper bound`).toBeGreaterThanOrEqual(0);
          }
          // A row group of only NaN (and nulls) has no Parquet min/max, which the metrics cannot
          // tell from statistics never written: the column then keeps no bounds (safe, no pruning).
          const groups = Array.from({ length: Math.ceil(values.length / maxRowGroupRows) }, (_, g) =>
            values.slice(g * maxRowGroupRows, (g + 1) * maxRowGroupRows),
          );
          const nanOnlyGroup =
            c.type.kind === 'float64' &&
            groups.some(
              (g) => g.some((v) => Number.isNaN(v)) && g.every((v) => v === null || Number.isNaN(v)),
            );
          if (ORDERED_EXACT.has(c.type.kind) && !nanOnlyGroup) {
            const sorted = [...singles].sort((a, b) => compareValues(t, a, b));
            expect(lower, `c${i} (${c.type.kind}) lower bound`).toBeDefined();
            expect(upper, `c${i} (${c.type.kind}) upper bound`).toBeDefined();
            // Exact, but for zero: Parquet's min of a zero is -0 and its max +0.
            if (c.type.kind === 'float64') {
              expect(lower === sorted[0] || (lower === 0 && sorted[0] === 0)).toBe(true);
              expect(upper === sorted.at(-1) || (upper === 0 && sorted.at(-1) === 0)).toBe(true);
            } else {
              expect(lower).toEqual(sorted[0]);
              expect(upper).toEqual(sorted.at(-1));
            }
          }
        });
      }),
      { numRuns: 120 },
    );
  }, 300_000);

  it('truncates strings to 16 characters: the lower bound a prefix, the upper one incremented', () => {
    expect(truncateStringLower('😀'.repeat(20), 16)).toBe('😀'.repeat(16));
    expect(truncateStringUpper('abcdefghijklmnopq', 16)).toBe('abcdefghijklmnoq');
    expect(truncateStringUpper('short', 16)).toBe('short');
    expect(truncateStringUpper(`${'a'.repeat(15)}\u{10ffff}zz`, 16)).toBe(`${'a'.repeat(14)}b`);
    expect(truncateStringUpper(`${'a'.repeat(15)}\ud7ffzz`, 16)).toBe(`${'a'.repeat(15)}\ue000`);
    expect(truncateStringUpper('\u{10ffff}'.repeat(17), 16)).toBeUndefined();
    expect(truncateBinaryUpper(Uint8Array.of(1, 0xff, 0xff, 4), 3)).toEqual(Uint8Array.of(2));
    expect(truncateBinaryUpper(new Uint8Array(5).fill(0xff), 3)).toBeUndefined();
  });

  it('keeps sizes of a list element, and no counts or bounds; no metrics for a column without an id', () => {
    const schema: Schema = {
      columns: [
        { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'x' },
        { name: 'tags', type: { kind: 'list', element: { kind: 'int32' } }, nullable: true, sourceType: 'x' },
        { name: 'n', type: { kind: 'int32' }, nullable: true, sourceType: 'x' },
      ],
      primaryKey: [],
    };
    const iceberg: IcebergSchema = {
      type: 'struct',
      'schema-id': 0,
      fields: [
        { id: 1, name: 'id', required: true, type: 'long' },
        {
          id: 2,
          name: 'tags',
          required: false,
          type: { type: 'list', 'element-id': 5, element: 'int', 'element-required': false },
        },
        { id: 3, name: 'n', required: false, type: 'int' },
      ],
    };
    // The list's element leaf carries id 5; n (field 2) and the metadata tail carry none.
    const plain = lakeRecord(schema, [
      [1n, [5, null], 3],
      [2n, null, null],
    ]);
    const fields = plain.schema.fields.map((f, i) => {
      if (i === 0) return new Field(f.name, f.type, f.nullable, new Map([['PARQUET:field_id', '1']]));
      if (i === 1) {
        const child = (f.type as List).children[0]!;
        const type = new List(
          new Field(child.name, child.type, child.nullable, new Map([['PARQUET:field_id', '5']])),
        );
        return new Field(f.name, type, f.nullable, new Map([['PARQUET:field_id', '2']]));
      }
      return f;
    });
    const record = new RecordBatch(new ArrowSchema(fields, plain.schema.metadata), plain.data);
    const m = parquetMetrics(encodeParquet([record], { compression: 'snappy' }), iceberg);
    expect(m.column_sizes.get(5)).toBeGreaterThan(0);
    expect(m.value_counts.has(5)).toBe(false);
    expect(m.null_value_counts.has(5)).toBe(false);
    expect(m.lower_bounds.has(5)).toBe(false);
    expect(m.upper_bounds.has(5)).toBe(false);
    expect(m.column_sizes.has(3)).toBe(false);
    expect(m.value_counts.get(1)).toBe(2);
    expect(deserializeValue({ kind: 'long' }, m.upper_bounds.get(1)!)).toBe(2n);
  });

  it('writes the data_file of an unpartitioned Parquet file', () => {
    const schema: Schema = {
      columns: [{ name: 'a', type: { kind: 'int32' }, nullable: true, sourceType: 'x' }],
      primaryKey: [],
    };
    const file = encodeParquet([withIds(lakeRecord(schema, [[1], [null]]))], { compression: 'snappy' });
    const f = parquetDataFile('s3://b/t/data/x.parquet', file, icebergSchema(schema), { sortOrderId: 0 });
    expect(f).toMatchObject({
      content: 0,
      file_path: 's3://b/t/data/x.parquet',
      file_format: 'PARQUET',
      partition: {},
      record_count: 2,
      file_size_in_bytes: file.length,
      sort_order_id: 0,
    });
    expect(f.lower_bounds?.get(1)).toEqual(Uint8Array.of(1, 0, 0, 0));
    expect(() => parquetMetrics(zlib.gzipSync(file), icebergSchema(schema))).toThrow(/not a Parquet file/);
  });
});

describe("Iceberg's single-value serialization (spec Appendix D)", () => {
  it('writes each type as the spec says', () => {
    const cases: [IcebergPrimitive, SingleValue, number[]][] = [
      ['boolean', true, [1]],
      ['int', -2, [0xfe, 0xff, 0xff, 0xff]],
      ['date', 1, [1, 0, 0, 0]],
      ['long', 2n ** 40n, [0, 0, 0, 0, 0, 1, 0, 0]],
      ['timestamptz', -1n, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]],
      ['double', 1, [0, 0, 0, 0, 0, 0, 0xf0, 0x3f]],
      ['float', -0, [0, 0, 0, 0x80]],
      ['string', 'é', [0xc3, 0xa9]],
      ['decimal(10, 2)', 0n, [0]],
      ['decimal(10, 2)', 127n, [0x7f]],
      ['decimal(10, 2)', 128n, [0x00, 0x80]],
      ['decimal(10, 2)', -129n, [0xff, 0x7f]],
      ['decimal(38, 9)', -(10n ** 38n) + 1n, [...twosComplementBE(-(10n ** 38n) + 1n)]],
      ['fixed[2]', Uint8Array.of(9, 8), [9, 8]],
    ];
    for (const [type, v, bytes] of cases) {
      const t = primitiveOf(type)!;
      expect([...serializeValue(t, v)], type).toEqual(bytes);
      expect(deserializeValue(t, Uint8Array.from(bytes))).toEqual(v);
    }
    // 38 nines fit 16 bytes (2^127 > 10^38), as decimal(38, s) does in a fixed[16].
    expect(twosComplementBE(-(10n ** 38n) + 1n)).toHaveLength(16);
  });

  it('round-trips decimals through the fewest bytes', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(2n ** 130n), max: 2n ** 130n }), (v) => {
        const b = twosComplementBE(v);
        expect(deserializeValue({ kind: 'decimal', precision: 38, scale: 0 }, b)).toBe(v);
        // One byte fewer could not hold it.
        if (b.length > 1) expect(BigInt.asIntN(8 * (b.length - 1), v)).not.toBe(v);
      }),
    );
  });
});
