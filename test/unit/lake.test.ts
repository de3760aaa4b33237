/**
 * The wire -> lake cast: metadata columns get their lake types (`__op` as the letters c/u/d over
 * the same index buffer, ns timestamps floored to us exactly, for every int64), data columns pass
 * through untouched, and anything that is not lake-typed is refused. Plus the Glue type mapping
 * and the column-name checks.
 */
import {
  Schema as ArrowSchema,
  Field,
  Int64,
  makeData,
  RecordBatch,
  Struct,
  Table,
  Timestamp,
  TimeUnit,
  tableToIPC,
  Uint16,
  util,
} from 'apache-arrow';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DataError } from '../../shared/contracts/errors.js';
import { BatchEncoder } from '../../shared/dataplane/encoder.js';
import {
  checkLakeColumnNames,
  glueColumns,
  glueType,
  lakeSchema,
  nanosToMicrosFloor,
  toLakeRecord,
} from '../../shared/dataplane/lake.js';
import type { Column, LogicalType, Schema } from '../../shared/dataplane/schema.js';

const MIN_I64 = -(2n ** 63n);
const MAX_I64 = 2n ** 63n - 1n;

function col(name: string, type: LogicalType, nullable = true): Column {
  return { name, type, nullable, sourceType: 'test' };
}

/** BigInt floor division (BigInt `/` truncates toward zero). */
function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
}

describe('nanosToMicrosFloor', () => {
  it('floors every int64 exactly like BigInt arithmetic', () => {
    const edges = [
      MIN_I64,
      MIN_I64 + 1n,
      -1001n,
      -1000n,
      -999n,
      -1n,
      0n,
      1n,
      999n,
      1000n,
      1001n,
      MAX_I64 - 1n,
      MAX_I64,
    ];
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.bigInt({ min: MIN_I64, max: MAX_I64 }), fc.constantFrom(...edges)), {
          maxLength: 64,
        }),
        (xs) => {
          const out = nanosToMicrosFloor(BigInt64Array.from(xs));
          expect([...out]).toEqual(xs.map((x) => floorDiv(x, 1000n)));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('reads a sub-array at its own offset', () => {
    const all = BigInt64Array.from([5000n, -1n, 7_000_999n, 3n]);
    expect([...nanosToMicrosFloor(all.subarray(1, 3))]).toEqual([-1n, 7000n]);
  });
});

const SCHEMA: Schema = {
  columns: [
    col('id', { kind: 'int64' }, false),
    col('at', { kind: 'timestamp', utc: true }),
    col('tags', { kind: 'list', element: { kind: 'text' } }),
  ],
  primaryKey: ['id'],
};

function wireBatch(): RecordBatch {
  const enc = new BatchEncoder(SCHEMA, { phase: 'stream' });
  enc.appendRow({ id: 1n, at: -1n, tags: ['a', null] });
  enc.appendMeta(0, 'p01', -1n, false);
  enc.appendRow({ id: 2n, at: null, tags: null });
  enc.appendMeta(1, 'p02', null, true);
  enc.appendRow({ id: 3n, at: 253_402_300_799_999_999n, tags: [] });
  enc.appendMeta(2, 'p03', 1_700_000_000_123_456_789n, false);
  return enc.finish(-1_500n);
}

describe('toLakeRecord', () => {
  it('casts the metadata tail and passes data columns through by reference', () => {
    const wire = wireBatch();
    const lake = toLakeRecord(wire);
    expect(util.compareSchemas(lake.schema, lakeSchema(SCHEMA))).toBe(true);
    for (let i = 0; i < SCHEMA.columns.length; i++) expect(lake.data.children[i]).toBe(wire.data.children[i]);
    const op = lake.getChild('__op')!;
    expect([op.get(0), op.get(1), op.get(2)]).toEqual(['c', 'u', 'd']);
    // The dictionary indices are the wire's own buffer.
    expect(op.data[0]!.values.buffer).toBe(wire.getChild('__op')!.data[0]!.values.buffer);
    const commit = lake.getChild('__commit_ts')!.data[0]!;
    expect(String(commit.type)).toBe(String(new Timestamp(TimeUnit.MICROSECOND, 'UTC')));
    expect(commit.getValid(1)).toBe(false);
    const micros = commit.values as BigInt64Array;
    expect([micros[0], micros[2]]).toEqual([-1n, 1_700_000_000_123_456n]);
    expect([...(lake.getChild('__ingest_ts')!.data[0]!.values as BigInt64Array)]).toEqual([-2n, -2n, -2n]);
    expect(lake.getChild('__pos')!.toArray()).toEqual(['p01', 'p02', 'p03']);
    expect(lake.getChild('__snapshot')!.toArray()).toEqual([false, true, false]);
    expect(lake.getChild('__phase')!.get(2)).toBe('stream');
  });

  it("gives lakeSchema's very IPC bytes (the encoder's per-schema template key: a run warms it from lakeSchema)", () => {
    const ipc = (schema: ArrowSchema) => Buffer.from(tableToIPC(new Table(schema), 'stream'));
    const fromRecord = ipc(toLakeRecord(wireBatch()).schema);
    expect(ipc(lakeSchema(SCHEMA)).equals(fromRecord)).toBe(true);
    // And again: nothing in it (a dictionary id, say) moves from one call to the next.
    expect(ipc(lakeSchema(SCHEMA)).equals(ipc(toLakeRecord(wireBatch()).schema))).toBe(true);
  });

  it('keeps the slice offset of a sliced record', () => {
    const lake = toLakeRecord(wireBatch().slice(1, 3));
    expect(lake.numRows).toBe(2);
    expect([lake.getChild('__op')!.get(0), lake.getChild('__op')!.get(1)]).toEqual(['u', 'd']);
    const commit = lake.getChild('__commit_ts')!.data[0]!;
    expect(commit.getValid(0)).toBe(false);
    expect((commit.values as BigInt64Array)[1]).toBe(1_700_000_000_123_456n);
  });

  function replaceChild(
    record: RecordBatch,
    index: number,
    field: Field,
    data: ReturnType<typeof makeData>,
  ): RecordBatch {
    const fields = record.schema.fields.map((f, i) => (i === index ? field : f));
    const children = record.data.children.map((c, i) => (i === index ? data : c));
    return new RecordBatch(
      new ArrowSchema(fields),
      makeData({ type: new Struct(fields), length: record.numRows, nullCount: 0, children }),
    );
  }

  it('refuses an __op code outside 0..2', () => {
    const wire = wireBatch();
    const opIndex = SCHEMA.columns.length;
    const bad = replaceChild(
      wire,
      opIndex,
      wire.schema.fields[opIndex]!,
      makeData({ type: wire.schema.fields[opIndex]!.type, length: 3, data: Uint8Array.from([0, 3, 1]) }),
    );
    expect(() => toLakeRecord(bad)).toThrow(DataError);
    expect(() => toLakeRecord(bad)).toThrow(/code 3 at row 1/);
  });

  it('refuses data columns that are not lake-typed', () => {
    const wire = wireBatch();
    const unsigned = replaceChild(
      wire,
      0,
      new Field('id', new Uint16()),
      makeData({ type: new Uint16(), length: 3, data: new Uint16Array(3) }),
    );
    expect(() => toLakeRecord(unsigned)).toThrow(/unsigned/);
    const nanos = new Timestamp(TimeUnit.NANOSECOND, 'UTC');
    const nsData = replaceChild(
      wire,
      1,
      new Field('at', nanos),
      makeData({ type: nanos, length: 3, data: new BigInt64Array(3) }),
    );
    expect(() => toLakeRecord(nsData)).toThrow(/microseconds/);
    const plain = replaceChild(wire, 0, new Field('id', new Int64()), wire.data.children[0]!);
    expect(() => toLakeRecord(plain)).not.toThrow();
  });
});

describe('glue types', () => {
  it('maps every logical type to the Hive DDL type of docs/reader-compatibility.md', () => {
    const cases: [LogicalType, string][] = [
      [{ kind: 'bool' }, 'boolean'],
      [{ kind: 'int8' }, 'tinyint'],
      [{ kind: 'int16' }, 'smallint'],
      [{ kind: 'int32' }, 'int'],
      [{ kind: 'int64' }, 'bigint'],
      [{ kind: 'float64' }, 'double'],
      [{ kind: 'decimal', precision: 38, scale: 10 }, 'decimal(38,10)'],
      [{ kind: 'text' }, 'string'],
      [{ kind: 'binary' }, 'binary'],
      [{ kind: 'date' }, 'date'],
      [{ kind: 'timestamp', utc: true }, 'timestamp'],
      [{ kind: 'timestamp', utc: false }, 'timestamp'],
      [{ kind: 'list', element: { kind: 'list', element: { kind: 'int32' } } }, 'array<array<int>>'],
    ];
    for (const [t, glue] of cases) expect(glueType(t)).toBe(glue);
    expect(glueColumns(SCHEMA).map((c) => `${c.name} ${c.type}`)).toEqual([
      'id bigint',
      'at timestamp',
      'tags array<string>',
      '__op string',
      '__pos string',
      '__commit_ts timestamp',
      '__ingest_ts timestamp',
      '__snapshot boolean',
      '__phase string',
    ]);
  });
});

describe('checkLakeColumnNames', () => {
  it('warns on names that are not lowercase snake_case and errors on case-insensitive collisions', () => {
    const schema: Schema = {
      columns: [
        col('order_id', { kind: 'int64' }),
        col('OrderDate', { kind: 'date' }),
        col('orderdate', { kind: 'date' }),
        col('__OP', { kind: 'text' }),
        col('total-eur', { kind: 'float64' }),
      ],
      primaryKey: [],
    };
    const found = checkLakeColumnNames(schema).map((w) => `${w.severity} ${w.code} ${w.column}`);
    expect(found).toEqual([
      'warning LAKE_NAME_NOT_SNAKE_CASE OrderDate',
      'error LAKE_NAME_COLLISION orderdate',
      'warning LAKE_NAME_NOT_SNAKE_CASE __OP',
      'error LAKE_NAME_COLLISION __OP',
      'warning LAKE_NAME_NOT_SNAKE_CASE total-eur',
    ]);
    expect(checkLakeColumnNames(SCHEMA)).toEqual([]);
  });
});
