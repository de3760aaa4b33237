/**
 * Golden type test of the lake: a batch holding every logical type's edge values (integer
 * limits, decimal(38,x) extremes and negatives, float specials, emoji and empty text, binary,
 * dates and timestamps before 1970 and at 9999-12-31, lists with null elements, nulls in every
 * column) goes through the real ParquetSink, and DuckDB reads back exactly those values with the
 * SQL types docs/reader-compatibility.md promises, in lake format 1 and 2. The Parquet schema
 * itself has no unsigned annotations and only MICROS timestamps (UTC-adjusted exactly where the
 * logical type says so). The flat variant writes the same batch without its list columns, so
 * tidemark's own writer (shared/sink/parquet-flat.cjs) writes it, not parquet-wasm: with gzip pages
 * on a Node without native zstd (Node 20; the writer needs pages it compresses itself).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import zlib from 'node:zlib';
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LakeFormat } from '../../shared/contracts/lake-format.js';
import { newBatch } from '../../shared/dataplane/batch.js';
import { BatchEncoder } from '../../shared/dataplane/encoder.js';
import type { Column, LogicalType, Schema } from '../../shared/dataplane/schema.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { objectKey } from '../../shared/sink/layout.js';
import { ParquetSink } from '../../shared/sink/parquet-sink.js';
import { pageCompression } from '../../shared/sink/parquet-writer.js';

const col = (name: string, type: LogicalType): Column => ({
  name,
  type,
  nullable: true,
  sourceType: 'golden',
});

const SCHEMA: Schema = {
  columns: [
    col('b', { kind: 'bool' }),
    col('i8', { kind: 'int8' }),
    col('i16', { kind: 'int16' }),
    col('i32', { kind: 'int32' }),
    col('i64', { kind: 'int64' }),
    col('d38_10', { kind: 'decimal', precision: 38, scale: 10 }),
    col('d38_0', { kind: 'decimal', precision: 38, scale: 0 }),
    col('d12_2', { kind: 'decimal', precision: 12, scale: 2 }),
    col('f64', { kind: 'float64' }),
    col('txt', { kind: 'text' }),
    col('bin', { kind: 'binary' }),
    col('day', { kind: 'date' }),
    col('ts_utc', { kind: 'timestamp', utc: true }),
    col('ts_local', { kind: 'timestamp', utc: false }),
    col('li', { kind: 'list', element: { kind: 'int32' } }),
    col('lt', { kind: 'list', element: { kind: 'text' } }),
  ],
  primaryKey: [],
};

/** The golden schema the flat writer writes: every column but the lists. */
const FLAT_SCHEMA: Schema = { ...SCHEMA, columns: SCHEMA.columns.filter((c) => c.type.kind !== 'list') };
const hasNativeZstd = typeof (zlib as { zstdCompressSync?: unknown }).zstdCompressSync === 'function';

const NINES_38 = '9'.repeat(38);
const TS = [-62_135_596_800_000_000n, -1n, 0n, 253_402_300_799_999_999n, 1_700_000_000_123_456n];

/** Column values by row; rows past a column's list are NULL, and the last row is NULL everywhere. */
const VALUES: Record<string, unknown[]> = {
  b: [true, false],
  i8: [-128, 127, 0],
  i16: [-32768, 32767, 0],
  i32: [-(2 ** 31), 2 ** 31 - 1, 0],
  i64: [-(2n ** 63n), 2n ** 63n - 1n, 2n ** 53n + 1n],
  d38_10: [
    `${'9'.repeat(28)}.${'9'.repeat(10)}`,
    `-${'9'.repeat(28)}.${'9'.repeat(10)}`,
    '-0.0000000001',
    '0.0000000000',
  ],
  d38_0: [NINES_38, `-${NINES_38}`, '0'],
  d12_2: ['-12.30', '0.00', '9999999999.99'],
  f64: [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0, 5e-324, Number.MAX_VALUE],
  txt: ['😀 emoji', '', 'héllo 日本'],
  bin: [Uint8Array.from([0, 255, 1]), new Uint8Array(0)],
  day: [-719_162, -1, 0, 2_932_896],
  ts_utc: TS,
  ts_local: TS,
  li: [[1, null, 3], [], [null], [-(2 ** 31), 2 ** 31 - 1]],
  lt: [['a', null, '😀'], [], ['']],
};
const ROWS = 7;
const COMMIT_NS = [-1n, 1_700_000_000_123_456_789n, null];

let scratch: string;
let conn: DuckDBConnection;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'tidemark-parquet-types-'));
  conn = await (await DuckDBInstance.create(':memory:')).connect();
  await conn.run("SET TimeZone = 'UTC'");
});
afterAll(async () => {
  conn?.closeSync();
  await rm(scratch, { recursive: true, force: true });
});

async function query(sql: string): Promise<Record<string, unknown>[]> {
  return (await conn.runAndReadAll(sql)).getRowObjects() as Record<string, unknown>[];
}

/** Writes the golden batch through the sink; returns the Parquet file's path. */
async function writeGolden(
  compression: 'zstd' | 'snappy',
  format: LakeFormat,
  flat: boolean,
): Promise<string> {
  const schema = flat ? FLAT_SCHEMA : SCHEMA;
  const enc = new BatchEncoder(schema, { phase: 'snapshot', capacity: ROWS });
  for (let r = 0; r < ROWS; r++) {
    const row: Record<string, unknown> = {};
    for (const c of schema.columns) row[c.name] = r < ROWS - 1 ? (VALUES[c.name]![r] ?? null) : null;
    enc.appendRow(row);
    enc.appendMeta((r % 3) as 0 | 1 | 2, `i${String(r).padStart(4, '0')}`, COMMIT_NS[r] ?? null, r % 2 === 0);
  }
  const record = enc.finish(1_700_000_000_000_000_999n);
  const dir = join(scratch, `${compression}-${format}-${flat ? 'flat' : 'wasm'}`);
  const sink = new ParquetSink({ store: new FileObjectStore(dir), compression });
  const table = 'golden.types';
  if (flat && !hasNativeZstd) pageCompression.testCodec = 'gzip';
  try {
    const [ref] = await sink.write({ table, writer: 'test.golden', fence: 1, format }, schema, 'i0000', [
      newBatch({ table, record, watermark: 'i0006', writeMode: 'append' }),
    ]);
    expect(ref!.rows).toBe(ROWS);
  } finally {
    pageCompression.testCodec = undefined;
  }
  return join(dir, objectKey('', table, 'test.golden', 'i0000', 1).key);
}

// Lake format 2 (docs/lake-format.md) must hold the same types and values as format 1.
describe.each([
  ['zstd', 1, 'parquet-wasm'],
  ['snappy', 1, 'parquet-wasm'],
  ['zstd', 2, 'parquet-wasm'],
  ['zstd', 1, 'flat writer'],
] as const)('lake types through DuckDB (%s, lake format %i, %s)', (compression, format, writer) => {
  const flat = writer === 'flat writer';
  /** The codec the file's pages are in: the flat writer's test codec where zstd is not native. */
  const codec = flat && !hasNativeZstd ? 'GZIP' : compression.toUpperCase();
  let file: string;
  beforeAll(async () => {
    file = await writeGolden(compression, format, flat);
  });

  it('is written by the writer it says', async () => {
    const [meta] = await query(`SELECT created_by FROM parquet_file_metadata('${file}')`);
    expect(String(meta!.created_by)).toMatch(flat ? /^tidemark / : /^parquet-rs /);
  });

  it('has the SQL types docs/reader-compatibility.md promises', async () => {
    const types = await query(`DESCRIBE SELECT * FROM read_parquet('${file}')`);
    expect(Object.fromEntries(types.map((t) => [t.column_name, t.column_type]))).toEqual({
      b: 'BOOLEAN',
      i8: 'TINYINT',
      i16: 'SMALLINT',
      i32: 'INTEGER',
      i64: 'BIGINT',
      d38_10: 'DECIMAL(38,10)',
      d38_0: 'DECIMAL(38,0)',
      d12_2: 'DECIMAL(12,2)',
      f64: 'DOUBLE',
      txt: 'VARCHAR',
      bin: 'BLOB',
      day: 'DATE',
      ts_utc: 'TIMESTAMP WITH TIME ZONE',
      ts_local: 'TIMESTAMP',
      ...(flat ? {} : { li: 'INTEGER[]', lt: 'VARCHAR[]' }),
      __op: 'VARCHAR',
      __pos: 'VARCHAR',
      __commit_ts: 'TIMESTAMP WITH TIME ZONE',
      __ingest_ts: 'TIMESTAMP WITH TIME ZONE',
      __snapshot: 'BOOLEAN',
      __phase: 'VARCHAR',
    });
  });

  it('reads back every edge value exactly', async () => {
    const text = (c: string) => `${c}::VARCHAR AS ${c}`;
    const rows = await query(`
      SELECT ${['b', 'i8', 'i16', 'i32', 'i64', 'd38_10', 'd38_0', 'd12_2', 'txt', 'day', 'ts_utc', 'ts_local'].map(text).join(', ')},
             hex(bin) AS bin, ${flat ? '' : 'to_json(li)::VARCHAR AS li, to_json(lt)::VARCHAR AS lt,'}
             epoch_us(ts_utc)::VARCHAR AS ts_utc_us, epoch_us(ts_local)::VARCHAR AS ts_local_us,
             __op, __pos, epoch_us(__commit_ts)::VARCHAR AS commit_us, epoch_us(__ingest_ts)::VARCHAR AS ingest_us,
             __snapshot, __phase
      FROM read_parquet('${file}') ORDER BY __pos`);
    const column = (c: string) => rows.map((r) => r[c] ?? null);
    const pad = (xs: unknown[]) => [...xs, ...Array(ROWS - xs.length).fill(null)];
    expect(column('b')).toEqual(pad(['true', 'false']));
    expect(column('i8')).toEqual(pad(['-128', '127', '0']));
    expect(column('i16')).toEqual(pad(['-32768', '32767', '0']));
    expect(column('i32')).toEqual(pad(['-2147483648', '2147483647', '0']));
    expect(column('i64')).toEqual(pad(['-9223372036854775808', '9223372036854775807', '9007199254740993']));
    expect(column('d38_10')).toEqual(pad(VALUES.d38_10!));
    expect(column('d38_0')).toEqual(pad(VALUES.d38_0!));
    expect(column('d12_2')).toEqual(pad(VALUES.d12_2!));
    expect(column('txt')).toEqual(pad(VALUES.txt!));
    expect(column('bin')).toEqual(pad(['00FF01', '']));
    expect(column('day')).toEqual(pad(['0001-01-01', '1969-12-31', '1970-01-01', '9999-12-31']));
    const stamps = [
      '0001-01-01 00:00:00',
      '1969-12-31 23:59:59.999999',
      '1970-01-01 00:00:00',
      '9999-12-31 23:59:59.999999',
      '2023-11-14 22:13:20.123456',
    ];
    expect(column('ts_utc')).toEqual(pad(stamps.map((s) => `${s}+00`)));
    expect(column('ts_local')).toEqual(pad(stamps));
    expect(column('ts_utc_us')).toEqual(pad(TS.map(String)));
    expect(column('ts_local_us')).toEqual(pad(TS.map(String)));
    if (!flat) {
      expect(column('li')).toEqual(pad(['[1,null,3]', '[]', '[null]', '[-2147483648,2147483647]']));
      expect(column('lt')).toEqual(pad(['["a",null,"😀"]', '[]', '[""]']));
    }
    // Metadata: op letters, ns floored to us (-1 ns is the microsecond before the epoch).
    expect(column('__op')).toEqual(['c', 'u', 'd', 'c', 'u', 'd', 'c']);
    expect(column('__pos')).toEqual(['i0000', 'i0001', 'i0002', 'i0003', 'i0004', 'i0005', 'i0006']);
    expect(column('commit_us')).toEqual(pad(['-1', '1700000000123456']));
    expect(column('ingest_us')).toEqual(Array(ROWS).fill('1700000000000000'));
    expect(column('__snapshot')).toEqual([true, false, true, false, true, false, true]);
    expect(new Set(column('__phase'))).toEqual(new Set(['snapshot']));
  });

  it('keeps float specials bit-exact', async () => {
    const rows = await query(`SELECT f64 FROM read_parquet('${file}') ORDER BY __pos`);
    const got = rows.map((r) => r.f64 as number | null);
    const want = [...VALUES.f64!, null] as (number | null)[];
    expect(got).toHaveLength(want.length);
    for (const [i, v] of got.entries())
      expect(Object.is(v, want[i]), `row ${i}: ${v} vs ${want[i]}`).toBe(true);
  });

  it('writes no unsigned annotations and MICROS timestamps only', async () => {
    const schema = await query(
      `SELECT name, type, converted_type, logical_type::VARCHAR AS logical FROM parquet_schema('${file}')`,
    );
    const byName = (n: string) => schema.find((s) => s.name === n)!;
    for (const s of schema) {
      expect(String(s.converted_type ?? '')).not.toMatch(/^UINT/);
      expect(String(s.logical ?? '')).not.toMatch(/isSigned=0|isSigned=false/);
      if (String(s.logical ?? '').startsWith('TimestampType'))
        expect(String(s.logical)).toMatch(/MICROS=MicroSeconds\(\)/);
    }
    for (const n of ['ts_utc', '__commit_ts', '__ingest_ts'])
      expect(String(byName(n).logical)).toMatch(/isAdjustedToUTC=1/);
    expect(String(byName('ts_local').logical)).toMatch(/isAdjustedToUTC=0/);
    expect(byName('i8').converted_type).toBe('INT_8');
    expect(byName('d38_10').type).toBe('FIXED_LEN_BYTE_ARRAY');
    expect(byName('d12_2').type).toBe('INT64');
    expect(byName('__op')).toMatchObject({ type: 'BYTE_ARRAY', converted_type: 'UTF8' });
    // `__pos` is unique per row: written plain; low-cardinality text keeps its dictionary.
    const encodings = await query(
      `SELECT path_in_schema AS col, encodings, compression FROM parquet_metadata('${file}')`,
    );
    const enc = (c: string) => String(encodings.find((e) => e.col === c)!.encodings);
    expect(enc('__pos')).not.toMatch(/DICTIONARY/);
    expect(enc('__phase')).toMatch(/DICTIONARY/);
    expect(new Set(encodings.map((e) => e.compression))).toEqual(new Set([codec]));
    // Three-level lists whose leaf is named `element`.
    expect(schema.filter((s) => s.name === 'element')).toHaveLength(flat ? 0 : 2);
  });
});
