/**
 * tidemark's own Parquet writer for flat lake schemas (shared/sink/parquet-flat.cjs, through
 * `encodeFlat` in parquet-writer.ts), checked against the parquet-wasm path (`encodeParquet`) on
 * random tables of every flat logical kind (nullable and not, multibyte text, empty strings,
 * binary, decimals of every precision, NaN/-0/Infinity, extreme ints, dates and instants DuckDB
 * reads), fed as sliced record batches: DuckDB and arrow-rs read the same rows, types, schema and
 * footer keys from both files; the chunk statistics are the wasm's and true bounds of the data;
 * row groups keep their bounds; pages are DataPage V1 of the sizes the footer says, dictionary
 * encoded with a PLAIN fallback except for plain columns. Lists and lake format 2 are refused.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import zlib from 'node:zlib';
import { DuckDBInstance } from '@duckdb/node-api';
import { Schema as ArrowSchema, DataType, Field, RecordBatch, tableFromIPC, type Vector } from 'apache-arrow';
import fc from 'fast-check';
import { readParquet } from 'parquet-wasm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { LogicalType, Schema } from '../../shared/dataplane/schema.js';
import { compareStatIn, FlatWriter } from '../../shared/sink/parquet-flat.cjs';
import {
  CODEC,
  decodeStruct,
  nativeCompressor,
  type PageCompressor,
  type ThriftStruct,
} from '../../shared/sink/parquet-pages.cjs';
import {
  DICTIONARY_PAGE_BYTES,
  encodeFlat,
  encodeParquet,
  type ParquetWriteOptions,
  pageCompression,
} from '../../shared/sink/parquet-writer.js';
import { type DuckJson, duckQuery } from '../harness/duckdb.js';
import { lakeRecord } from '../harness/lake-record.js';
import { arbitraryOf, KINDS, MAX_I64, MIN_I64 } from '../harness/logical-arbitraries.js';

const hasNativeZstd = typeof (zlib as { zstdCompressSync?: unknown }).zstdCompressSync === 'function';
const gzip = nativeCompressor('gzip')!;

/** Every logical kind the flat writer takes (no lists). */
const FLAT_KINDS = KINDS.filter((t) => t.kind !== 'list');

interface Col {
  readonly type: LogicalType;
  readonly nullable: boolean;
  /** > 0: row i takes the value of row i % repeat (low cardinality: dictionary pages). */
  readonly repeat: number;
}

interface Case {
  readonly cols: readonly Col[];
  readonly rows: readonly (readonly unknown[])[];
  /** Row indexes where the record is cut into separate batches (slices of one record). */
  readonly cuts: readonly number[];
  readonly options: ParquetWriteOptions;
}

/** Values of `t`; instants and dates within what DuckDB reads (years 1-9999); long text too. */
function valueArb(t: LogicalType): fc.Arbitrary<unknown> {
  if (t.kind === 'timestamp')
    return fc.bigInt({ min: -62_135_596_800_000_000n, max: 253_402_300_799_999_999n });
  if (t.kind === 'date') return fc.integer({ min: -719_162, max: 2_932_896 });
  if (t.kind === 'text')
    // Long multibyte values too, so some chunks outgrow the dictionary limit.
    return fc.oneof(arbitraryOf(t), fc.string({ unit: 'grapheme', minLength: 40, maxLength: 120 }));
  return arbitraryOf(t);
}

const colArb: fc.Arbitrary<Col> = fc.record({
  type: fc.constantFrom(...FLAT_KINDS),
  nullable: fc.boolean(),
  repeat: fc.constantFrom(0, 0, 2, 5),
});

const plainColumnsArb = fc.constantFrom<readonly string[]>([], ['c0'], ['__pos']);

/** Row-group bounds (rows, bytes), plain columns and footer keys. */
const layoutOptionsArb: fc.Arbitrary<ParquetWriteOptions> = fc.record(
  {
    maxRowGroupRows: fc.constantFrom(7, 64, 1_000_000),
    maxRowGroupBytes: fc.constantFrom(256, 4096, 16 * 2 ** 20),
    plainColumns: plainColumnsArb,
    keyValueMetadata: fc.option(
      fc.dictionary(fc.stringMatching(/^[a-z][a-z.]{0,9}$/), fc.string({ unit: 'grapheme', maxLength: 20 }), {
        maxKeys: 3,
      }),
      { nil: undefined },
    ),
  },
  { requiredKeys: [] },
);

/** Default row-group bounds (one group for these tables): chunks pair up between files. */
const plainOptionsArb: fc.Arbitrary<ParquetWriteOptions> = fc.record(
  { plainColumns: plainColumnsArb },
  { requiredKeys: [] },
);

function caseArb(opts: { maxRows: number; layout: boolean }): fc.Arbitrary<Case> {
  return fc.array(colArb, { minLength: 1, maxLength: 5 }).chain((cols) =>
    fc.record({
      cols: fc.constant(cols),
      rows: fc.array(
        fc.tuple(
          ...cols.map((c) =>
            c.nullable ? fc.option(valueArb(c.type), { nil: null, freq: 4 }) : valueArb(c.type),
          ),
        ),
        { minLength: 0, maxLength: opts.maxRows },
      ),
      cuts: fc.array(fc.integer({ min: 0, max: opts.maxRows }), { maxLength: 3 }),
      options: opts.layout ? layoutOptionsArb : plainOptionsArb,
    }),
  );
}

function schemaOf(cols: readonly Col[]): Schema {
  return {
    columns: cols.map((c, i) => ({ name: `c${i}`, type: c.type, nullable: c.nullable, sourceType: 'x' })),
    primaryKey: [],
  };
}

/** The case's rows, low-cardinality columns repeated. */
function rowsOf(c: Case): unknown[][] {
  return c.rows.map((r, i) =>
    r.map((v, j) => (c.cols[j]!.repeat > 0 ? c.rows[i % c.cols[j]!.repeat]![j] : v)),
  );
}

/** `record` cut at `cuts` into zero-copy slices (non-zero offsets past the first). */
function cut(record: RecordBatch, cuts: readonly number[]): RecordBatch[] {
  const at = [...new Set(cuts.filter((k) => k > 0 && k < record.numRows))].sort((a, b) => a - b);
  if (at.length === 0) return [record];
  const bounds = [0, ...at, record.numRows];
  return bounds.slice(1).map((end, i) => record.slice(bounds[i]!, end));
}

function recordsOf(c: Case): RecordBatch[] {
  return cut(lakeRecord(schemaOf(c.cols), rowsOf(c)), c.cuts);
}

/** Both files of `records`: the flat writer's (with `compressor`) and parquet-wasm's. */
function bothFiles(
  records: readonly RecordBatch[],
  options: ParquetWriteOptions,
  compressor: PageCompressor = gzip,
): { flat: Uint8Array; wasm: Uint8Array } {
  const flat = encodeFlat(records, options, compressor);
  expect(flat, 'encodeFlat wrote no file for a flat schema').toBeInstanceOf(Uint8Array);
  return { flat: flat!, wasm: encodeParquet(records, { compression: 'snappy', ...options }) };
}

// ---- Thrift footer and pages

function footer(file: Uint8Array): ThriftStruct {
  expect(Buffer.from(file.subarray(0, 4)).toString()).toBe('PAR1');
  expect(Buffer.from(file.subarray(file.length - 4)).toString()).toBe('PAR1');
  const length = new DataView(file.buffer, file.byteOffset + file.length - 8, 4).getUint32(0, true);
  return decodeStruct(file, file.length - 8 - length).struct;
}

const f = (s: ThriftStruct, id: number) => s.fields.find((x) => x.id === id)?.value;
const items = (s: ThriftStruct, id: number) =>
  (f(s, id) as { items: ThriftStruct[] } | undefined)?.items ?? [];
const num = (s: ThriftStruct, id: number) => {
  const v = f(s, id);
  return v === undefined ? undefined : Number(v);
};

/** A Thrift struct as comparable plain data, fields by id (the wire order may differ). */
function plain(v: unknown): unknown {
  if (typeof v === 'bigint') return Number(v);
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex');
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === 'object') {
    if ('fields' in v)
      return Object.fromEntries(
        [...(v as ThriftStruct).fields].sort((a, b) => a.id - b.id).map((x) => [x.id, plain(x.value)]),
      );
    if ('items' in v) return (v as { items: unknown[] }).items.map(plain);
  }
  return v;
}

const PAGE_TYPE = { DATA: 0, DICTIONARY: 2, DATA_V2: 3 } as const;
const ENCODING = { PLAIN: 0, PLAIN_DICTIONARY: 2, RLE: 3, RLE_DICTIONARY: 8 } as const;

interface Page {
  readonly type: number;
  readonly encoding: number;
  readonly numValues: number;
  readonly defLevelEncoding: number | undefined;
  readonly uncompressed: number;
}

interface Chunk {
  readonly rowGroup: number;
  readonly rowGroupRows: number;
  readonly column: string;
  readonly codec: number;
  readonly numValues: number;
  readonly hasDictionaryOffset: boolean;
  readonly pages: Page[];
  /** ColumnMetaData `encodings`. */
  readonly encodings: number[];
  /** ColumnMetaData `encoding_stats` as `page type:encoding` -> page count, when written. */
  readonly encodingStats: Map<string, number> | undefined;
}

/**
 * Every column chunk of `file` with its pages, walked from the chunk's first page header to its
 * `total_compressed_size`; checks on the way that the page sizes add up to the footer's sizes and
 * that each page decompresses (gzip) to its `uncompressed_page_size`.
 */
function chunksOf(file: Uint8Array, decompress?: (b: Uint8Array) => Uint8Array): Chunk[] {
  const out: Chunk[] = [];
  items(footer(file), 4).forEach((rg, g) => {
    for (const cc of items(rg, 1)) {
      const md = f(cc, 3) as ThriftStruct;
      const path = items(md, 3) as unknown as Uint8Array[];
      const column = path.map((p) => Buffer.from(p).toString()).join('.');
      const dictAt = num(md, 11);
      const dataAt = num(md, 9)!;
      let at = dictAt !== undefined && dictAt > 0 && dictAt < dataAt ? dictAt : dataAt;
      const end = at + num(md, 7)!;
      let uncompressed = 0;
      const pages: Page[] = [];
      while (at < end) {
        const { struct: h, end: body } = decodeStruct(file, at);
        const size = num(h, 3)!;
        const type = num(h, 1)!;
        const sub = f(h, type === PAGE_TYPE.DICTIONARY ? 7 : type === PAGE_TYPE.DATA_V2 ? 8 : 5) as
          | ThriftStruct
          | undefined;
        expect(sub, `page header of ${column} without its ${type} header`).toBeDefined();
        if (decompress) {
          const raw = decompress(file.subarray(body, body + size));
          expect(raw.length, `page of ${column}: uncompressed size`).toBe(num(h, 2));
        }
        pages.push({
          type,
          encoding: num(sub!, 2)!,
          numValues: num(sub!, 1)!,
          defLevelEncoding: type === PAGE_TYPE.DATA ? num(sub!, 3) : undefined,
          uncompressed: num(h, 2)!,
        });
        uncompressed += body - at + num(h, 2)!;
        at = body + size;
      }
      expect(at, `pages of ${column} fill total_compressed_size exactly`).toBe(end);
      expect(uncompressed, `pages of ${column} fill total_uncompressed_size`).toBe(num(md, 6));
      out.push({
        rowGroup: g,
        rowGroupRows: num(rg, 3)!,
        column,
        codec: num(md, 4)!,
        numValues: num(md, 5)!,
        hasDictionaryOffset: dictAt !== undefined,
        pages,
        encodings: (f(md, 2) as { items: number[] }).items.map(Number),
        encodingStats:
          f(md, 13) === undefined
            ? undefined
            : new Map(items(md, 13).map((e) => [`${num(e, 1)}:${num(e, 2)}`, num(e, 3)!])),
      });
    }
  });
  return out;
}

/** Structural checks of a flat-writer file: DataPage V1, RLE levels, sizes, value counts. */
function checkFlatPages(file: Uint8Array, codec: number, decompress: (b: Uint8Array) => Uint8Array): Chunk[] {
  const chunks = chunksOf(file, decompress);
  for (const c of chunks) {
    const where = `${c.column} in row group ${c.rowGroup}`;
    expect(c.codec, where).toBe(codec);
    expect(c.numValues, where).toBe(c.rowGroupRows);
    const data = c.pages.filter((p) => p.type !== PAGE_TYPE.DICTIONARY);
    expect(
      data.every((p) => p.type === PAGE_TYPE.DATA),
      `${where}: DataPage V1 only`,
    ).toBe(true);
    expect(
      data.every((p) => p.defLevelEncoding === ENCODING.RLE),
      `${where}: RLE definition levels`,
    ).toBe(true);
    expect(
      data.reduce((n, p) => n + p.numValues, 0),
      `${where}: data page values`,
    ).toBe(c.numValues);
    const dicts = c.pages.filter((p) => p.type === PAGE_TYPE.DICTIONARY);
    expect(dicts.length, `${where}: at most one dictionary page`).toBeLessThanOrEqual(1);
    if (dicts.length === 1) {
      expect(c.pages[0]!.type, `${where}: the dictionary page comes first`).toBe(PAGE_TYPE.DICTIONARY);
      expect(c.hasDictionaryOffset, `${where}: dictionary_page_offset`).toBe(true);
    }
    // Dictionary-indexed pages only with a dictionary, and none after the PLAIN fallback.
    const firstPlain = data.findIndex((p) => p.encoding === ENCODING.PLAIN);
    const lastDict = data.map((p) => p.encoding).lastIndexOf(ENCODING.RLE_DICTIONARY);
    if (lastDict >= 0) expect(dicts.length, `${where}: RLE_DICTIONARY pages need a dictionary`).toBe(1);
    if (firstPlain >= 0 && lastDict >= 0) expect(lastDict, `${where}: fallback`).toBeLessThan(firstPlain);
    expect(
      data.every((p) => p.encoding === ENCODING.PLAIN || p.encoding === ENCODING.RLE_DICTIONARY),
      `${where}: PLAIN or RLE_DICTIONARY data pages`,
    ).toBe(true);
    // The footer tells the encodings its pages have (readers such as parquet-mr's dictionary
    // filter trust encoding_stats to know whether every data page is dictionary-indexed).
    for (const p of c.pages)
      expect(c.encodings, `${where}: encodings lists ${p.encoding}`).toContain(p.encoding);
    if (c.numValues > 0) expect(c.encodings, `${where}: encodings lists RLE levels`).toContain(ENCODING.RLE);
    if (c.encodingStats) {
      const counts = new Map<string, number>();
      for (const p of c.pages)
        counts.set(`${p.type}:${p.encoding}`, (counts.get(`${p.type}:${p.encoding}`) ?? 0) + 1);
      expect(c.encodingStats, `${where}: encoding_stats count the pages`).toEqual(counts);
    }
  }
  return chunks;
}

/** The Statistics struct (ColumnMetaData field 12) of every column chunk, in file order. */
function rawStats(file: Uint8Array): { column: string; stats: ThriftStruct | undefined }[] {
  return items(footer(file), 4).flatMap((rg) =>
    items(rg, 1).map((cc) => {
      const md = f(cc, 3) as ThriftStruct;
      const path = items(md, 3) as unknown as Uint8Array[];
      return {
        column: path.map((p) => Buffer.from(p).toString()).join('.'),
        stats: f(md, 12) as ThriftStruct | undefined,
      };
    }),
  );
}

// ---- DuckDB

let duck: Awaited<ReturnType<typeof DuckDBInstance.create>>;
let dir: string;
let fileNo = 0;
beforeAll(async () => {
  duck = await DuckDBInstance.create(':memory:');
  dir = mkdtempSync(join(tmpdir(), 'parquet-flat-'));
});
afterAll(() => {
  duck?.closeSync();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function save(file: Uint8Array, tag: string): string {
  const path = join(dir, `${tag}-${fileNo++}.parquet`);
  writeFileSync(path, file);
  return path;
}

type Json = DuckJson;

const query = async (sql: string): Promise<Json[][]> => (await duckQuery(duck, sql)).getRowsJson();
const queryObjects = async (sql: string): Promise<Record<string, Json>[]> =>
  (await duckQuery(duck, sql)).getRowObjectsJson();

const lit = (s: string) => `'${s.replaceAll("'", "''")}'`;
const ident = (s: string) => `"${s.replaceAll('"', '""')}"`;

/** Every row of the file as DuckDB's text of the whole row, in file order. */
async function duckRows(path: string): Promise<string[]> {
  const rows = await query(
    `SELECT t::VARCHAR FROM read_parquet(${lit(path)}, file_row_number = true) t ORDER BY file_row_number`,
  );
  return rows.map((r) => String(r[0]));
}

/** What DuckDB says of the file's types, schema, footer keys and row groups. */
async function duckShape(path: string) {
  const p = lit(path);
  const describe = await query(`DESCRIBE SELECT * FROM read_parquet(${p})`);
  const schema = await query(
    `SELECT name, type, type_length, repetition_type, num_children, converted_type, logical_type, scale, precision
     FROM parquet_schema(${p}) ORDER BY column_id`,
  );
  const kv = await query(`SELECT decode(key), decode(value) FROM parquet_kv_metadata(${p}) ORDER BY 1`);
  const groups = await query(
    `SELECT DISTINCT row_group_id, row_group_num_rows FROM parquet_metadata(${p}) ORDER BY row_group_id`,
  );
  return {
    describe: describe.map((r) => [r[0], r[1]]),
    schema,
    kv,
    groups: groups.map((r) => Number(r[1])),
  };
}

interface ChunkStats {
  readonly g: number;
  readonly col: string;
  readonly min: string | null;
  readonly max: string | null;
  readonly nulls: number | null;
}

async function duckStats(path: string): Promise<ChunkStats[]> {
  const rows = await queryObjects(
    `SELECT row_group_id AS g, path_in_schema AS col, stats_min_value AS min, stats_max_value AS max,
            stats_null_count AS nulls
     FROM parquet_metadata(${lit(path)}) ORDER BY row_group_id, column_id`,
  );
  return rows.map((r) => ({
    g: Number(r.g),
    col: String(r.col),
    min: r.min === null ? null : String(r.min),
    max: r.max === null ? null : String(r.max),
    nulls: r.nulls === null ? null : Number(r.nulls),
  }));
}

/** Text/binary values longer than this may have their statistics truncated or left out. */
const STATS_BYTES = 64;

/**
 * The statistics of every column chunk of `path` are true bounds of its rows (computed by DuckDB
 * from the rows of each row group): null count exact; min <= every non-null (non-NaN) value <=
 * max; exact min and max where the values are short; none where no value is non-null.
 * (DuckDB shows no infinite float statistic, so an infinite min or max may read as absent.)
 */
async function checkBounds(path: string, noStatistics: readonly string[] = []): Promise<void> {
  const p = lit(path);
  const types = await query(`DESCRIBE SELECT * FROM read_parquet(${p})`);
  for (const [name, type] of types.map((r) => [String(r[0]), String(r[1])] as const)) {
    const v = ident(name);
    const counted = type === 'DOUBLE' ? `${v} IS NOT NULL AND NOT isnan(${v})` : `${v} IS NOT NULL`;
    const bytes = type === 'VARCHAR' ? `strlen(${v})` : type === 'BLOB' ? `octet_length(${v})` : '0';
    const rows = await queryObjects(
      `WITH m AS (SELECT row_group_id AS g, row_group_num_rows AS n, stats_min_value AS smin,
                         stats_max_value AS smax, stats_null_count AS snull
                  FROM parquet_metadata(${p}) WHERE path_in_schema = ${lit(name)}),
            rg AS (SELECT g, n, sum(n) OVER (ORDER BY g) - n AS lo FROM m),
            d AS (SELECT ${v} AS v, ${counted} AS counted, ${bytes} AS bytes, file_row_number AS r
                  FROM read_parquet(${p}, file_row_number = true)),
            a AS (SELECT g, min(v) FILTER (WHERE counted) AS mn, max(v) FILTER (WHERE counted) AS mx,
                         count(*) FILTER (WHERE v IS NULL) AS nulls,
                         max(bytes) FILTER (WHERE counted) AS long_bytes, count(*) AS rows
                  FROM rg JOIN d ON d.r >= rg.lo AND d.r < rg.lo + rg.n GROUP BY g)
       SELECT m.g, m.n, a.rows, a.nulls, m.snull, a.mn::VARCHAR AS mn, a.mx::VARCHAR AS mx, m.smin, m.smax,
              a.long_bytes, ${type === 'DOUBLE' ? 'isfinite(a.mn)' : 'true'} AS finite_lo,
              ${type === 'DOUBLE' ? 'isfinite(a.mx)' : 'true'} AS finite_hi,
              TRY_CAST(m.smin AS ${type}) <= a.mn AS low_ok, TRY_CAST(m.smax AS ${type}) >= a.mx AS high_ok,
              TRY_CAST(m.smin AS ${type}) = a.mn AS low_exact, TRY_CAST(m.smax AS ${type}) = a.mx AS high_exact
       FROM m LEFT JOIN a USING (g) ORDER BY m.g`,
    );
    for (const r of rows) {
      const where = `${name} (${type}) in row group ${r.g}: ${JSON.stringify(r)}`;
      expect(Number(r.rows), where).toBe(Number(r.n));
      if (noStatistics.includes(name)) {
        expect([r.smin, r.smax], `no min/max: ${where}`).toEqual([null, null]);
        if (r.snull !== null) expect(Number(r.snull), `null count of ${where}`).toBe(Number(r.nulls));
        continue;
      }
      expect(r.snull === null ? null : Number(r.snull), `null count of ${where}`).toBe(Number(r.nulls));
      if (r.mn === null) {
        // No value that counts (all null, or all NaN): no min/max.
        expect([r.smin, r.smax], `no bounds without values: ${where}`).toEqual([null, null]);
        continue;
      }
      const short = Number(r.long_bytes) <= STATS_BYTES;
      if (short && r.finite_lo) expect(r.smin, `min of ${where}`).not.toBeNull();
      if (short && r.finite_hi) expect(r.smax, `max of ${where}`).not.toBeNull();
      if (r.smin !== null) {
        expect(r.low_ok, `min is a lower bound: ${where}`).toBe(true);
        if (short) expect(r.low_exact, `min is the minimum: ${where}`).toBe(true);
      }
      if (r.smax !== null) {
        expect(r.high_ok, `max is an upper bound: ${where}`).toBe(true);
        if (short) expect(r.high_exact, `max is the maximum: ${where}`).toBe(true);
      }
    }
  }
}

/**
 * The flat file's statistics are the wasm file's (one row group each: the chunks pair up), as
 * DuckDB shows them and as raw Thrift bytes, and true bounds of the chunk's rows.
 */
async function expectSameStats(flat: Uint8Array, wasm: Uint8Array, c: Case, label = ''): Promise<void> {
  const flatPath = save(flat, 'flat');
  const [a, b] = [await duckStats(flatPath), await duckStats(save(wasm, 'wasm'))];
  expect(
    a.map((s) => [s.g, s.col]),
    label,
  ).toEqual(b.map((s) => [s.g, s.col]));
  const rows = rowsOf(c);
  /** Does column `name` (a data column) hold a value past STATS_BYTES? */
  const longValues = (name: string) => {
    const j = /^c(\d+)$/.exec(name)?.[1];
    if (j === undefined) return false;
    return rows.some((r) => {
      const v = r[Number(j)];
      const n = typeof v === 'string' ? Buffer.byteLength(v) : v instanceof Uint8Array ? v.length : 0;
      return n > STATS_BYTES;
    });
  };
  b.forEach((w, i) => {
    const s = a[i]!;
    const where = `${label} ${s.col}: flat ${JSON.stringify(s)}, wasm ${JSON.stringify(w)}`;
    expect(s.nulls === null, `null count present: ${where}`).toBe(w.nulls === null);
    if (w.nulls !== null) expect(s.nulls, where).toBe(w.nulls);
    // Short values: arrow-rs neither truncates nor leaves them out.
    if (!longValues(s.col)) {
      expect(s.min, `min: ${where}`).toBe(w.min);
      expect(s.max, `max: ${where}`).toBe(w.max);
    }
  });
  // The raw statistics (infinities too, which DuckDB does not show): the same bytes wherever the
  // wasm's are exact and the values short, and wherever both files have the field otherwise.
  const [sa, sb] = [rawStats(flat), rawStats(wasm)];
  expect(sa.map((x) => x.column)).toEqual(sb.map((x) => x.column));
  sb.forEach((w, i) => {
    const s = sa[i]!;
    const where = `${label} ${s.column}: flat ${JSON.stringify(plain(s.stats))}, wasm ${JSON.stringify(plain(w.stats))}`;
    if (!w.stats) return;
    expect(s.stats, where).toBeDefined();
    for (const id of [3, 5, 6]) {
      const [x, y] = [f(s.stats!, id), f(w.stats, id)];
      const exact = f(w.stats, id === 5 ? 7 : 8) !== false;
      if (y === undefined || !exact) continue;
      if (x === undefined && longValues(s.column)) continue;
      expect(plain(x), `statistics field ${id}: ${where}`).toEqual(plain(y));
    }
    // The deprecated min/max: the same where both files have them.
    for (const id of [1, 2]) {
      const [x, y] = [f(s.stats!, id), f(w.stats, id)];
      if (x !== undefined && y !== undefined && f(w.stats, id === 1 ? 7 : 8) !== false)
        expect(plain(x), `deprecated statistics field ${id}: ${where}`).toEqual(plain(y));
    }
  });
  // The footer declares the column orders the wasm file declares (readers trust min/max by them).
  expect(plain(f(footer(flat), 7)), 'column_orders').toEqual(plain(f(footer(wasm), 7)));
  await checkBounds(flatPath);
}

// ---- arrow-rs

/** One value of an Arrow column as comparable text: raw bits for fixed-width types. */
function columnCells(vec: Vector): string[] {
  const out: string[] = [];
  const t = vec.type;
  const fixed = !(
    DataType.isUtf8(t) ||
    DataType.isBinary(t) ||
    DataType.isBool(t) ||
    DataType.isDictionary(t)
  );
  for (const data of vec.data) {
    for (let j = 0; j < data.length; j++) {
      if (!data.getValid(j)) {
        out.push('null');
        continue;
      }
      if (fixed) {
        const values = data.values as unknown as {
          buffer: ArrayBuffer;
          byteOffset: number;
          BYTES_PER_ELEMENT: number;
        };
        const width = data.stride * values.BYTES_PER_ELEMENT;
        const bytes = new Uint8Array(values.buffer, values.byteOffset + (data.offset + j) * width, width);
        out.push(Buffer.from(bytes).toString('hex'));
      } else {
        const value: unknown = vec.get(out.length);
        out.push(
          value instanceof Uint8Array ? `b:${Buffer.from(value).toString('hex')}` : JSON.stringify(value),
        );
      }
    }
  }
  return out;
}

/** What arrow-rs reads from the file: field names, types, nullability, metadata and values. */
function arrowRead(file: Uint8Array) {
  const table = tableFromIPC(readParquet(file).intoIPCStream());
  return {
    fields: table.schema.fields.map((x) => `${x.name}: ${String(x.type)}${x.nullable ? '' : ' not null'}`),
    metadata: [...table.schema.metadata.entries()].sort(),
    rows: table.numRows,
    columns: table.schema.fields.map((x) => columnCells(table.getChild(x.name)!)),
  };
}

/** Both files read the same by DuckDB and arrow-rs; the flat file's pages are well formed. */
async function expectSameFiles(
  flat: Uint8Array,
  wasm: Uint8Array,
  opts: { codec?: number; decompress?: (b: Uint8Array) => Uint8Array; rows?: number } = {},
): Promise<{ flatPath: string; wasmPath: string; flatGroups: number[]; chunks: Chunk[] }> {
  const chunks = checkFlatPages(flat, opts.codec ?? CODEC.GZIP, opts.decompress ?? zlib.gunzipSync);
  const flatPath = save(flat, 'flat');
  const wasmPath = save(wasm, 'wasm');
  const [flatRows, wasmRows] = [await duckRows(flatPath), await duckRows(wasmPath)];
  if (opts.rows !== undefined) expect(wasmRows.length).toBe(opts.rows);
  expect(flatRows.length, 'rows DuckDB reads').toBe(wasmRows.length);
  expect(flatRows, 'the rows DuckDB reads, in order').toEqual(wasmRows);
  const [a, b] = [await duckShape(flatPath), await duckShape(wasmPath)];
  expect(a.describe, 'DESCRIBE').toEqual(b.describe);
  expect(a.schema, 'parquet_schema()').toEqual(b.schema);
  expect(a.kv, 'parquet_kv_metadata()').toEqual(b.kv);
  expect(a.groups.reduce((n, x) => n + x, 0)).toBe(wasmRows.length);
  // The footer's schema elements, field for field, and the file's row count.
  const [fa, fb] = [footer(flat), footer(wasm)];
  expect(plain(f(fa, 2)), 'footer schema elements').toEqual(plain(f(fb, 2)));
  expect(num(fa, 3), 'footer num_rows').toBe(wasmRows.length);
  const [ra, rb] = [arrowRead(flat), arrowRead(wasm)];
  expect(ra.fields, 'arrow-rs fields').toEqual(rb.fields);
  expect(ra.metadata, 'arrow-rs schema metadata').toEqual(rb.metadata);
  expect(ra.rows).toBe(rb.rows);
  ra.columns.forEach((cells, i) => {
    expect(cells, `arrow-rs values of ${ra.fields[i]}`).toEqual(rb.columns[i]);
  });
  return { flatPath, wasmPath, flatGroups: a.groups, chunks };
}

const fcOptions = { numRuns: 40 } as const;

describe('the flat Parquet writer', () => {
  it('writes what parquet-wasm writes, as DuckDB and arrow-rs read it (random flat tables, gzip)', async () => {
    await fc.assert(
      fc.asyncProperty(caseArb({ maxRows: 300, layout: true }), async (c) => {
        const records = recordsOf(c);
        const { flat, wasm } = bothFiles(records, c.options);
        const { flatGroups } = await expectSameFiles(flat, wasm, { rows: c.rows.length });
        const bound = c.options.maxRowGroupRows ?? 1_048_576;
        for (const n of flatGroups) expect(n).toBeLessThanOrEqual(bound);
        expect(
          flatGroups.every((n) => n > 0),
          'no empty row group',
        ).toBe(true);
        // The caller's footer keys are there, with their values.
        const kv = new Map((await duckShape(save(flat, 'kv'))).kv.map((r) => [String(r[0]), String(r[1])]));
        for (const [k, v] of Object.entries(c.options.keyValueMetadata ?? {})) expect(kv.get(k)).toBe(v);
        expect(kv.has('ARROW:schema')).toBe(true);
      }),
      fcOptions,
    );
  }, 900_000);

  it('writes the statistics parquet-wasm writes, true bounds of each chunk', async () => {
    await fc.assert(
      fc.asyncProperty(caseArb({ maxRows: 300, layout: false }), async (c) => {
        const records = recordsOf(c);
        const { flat, wasm } = bothFiles(records, c.options);
        await expectSameStats(flat, wasm, c);
        // Several row groups: each chunk's statistics bound its own rows.
        const grouped = bothFiles(records, { ...c.options, maxRowGroupRows: 7 });
        await checkBounds(save(grouped.flat, 'flat'));
      }),
      { ...fcOptions, numRuns: 30 },
    );
  }, 900_000);

  it('writes the statistics parquet-wasm writes for edge values (zeros, infinities, NaN, extremes, UTF-8 order)', async () => {
    const max38 = `${'9'.repeat(38)}`;
    const edges: [LogicalType, unknown[]][] = [
      [{ kind: 'float64' }, [0, 1.5]],
      [{ kind: 'float64' }, [-0, 2]],
      [{ kind: 'float64' }, [0, -0, null]],
      [{ kind: 'float64' }, [-0]],
      [{ kind: 'float64' }, [0]],
      [{ kind: 'float64' }, [-3, -0]],
      [{ kind: 'float64' }, [Number.NaN, 1]],
      [{ kind: 'float64' }, [Number.NaN, null]],
      [{ kind: 'float64' }, [Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY]],
      [{ kind: 'float64' }, [null, Number.NEGATIVE_INFINITY]],
      [{ kind: 'float64' }, [5e-324, -5e-324, Number.MAX_VALUE, -Number.MAX_VALUE]],
      [{ kind: 'int64' }, [MIN_I64, MAX_I64]],
      [{ kind: 'int64' }, [-1n, 1n, 0n]],
      [{ kind: 'int64' }, [2n ** 32n, 2n ** 32n - 1n, -(2n ** 32n)]],
      [{ kind: 'int32' }, [-(2 ** 31), 2 ** 31 - 1]],
      [{ kind: 'int16' }, [-32768, 32767, null]],
      [{ kind: 'int8' }, [-128, 127]],
      [{ kind: 'decimal', precision: 38, scale: 0 }, [max38, `-${max38}`, '0']],
      [{ kind: 'decimal', precision: 38, scale: 0 }, ['-1', '1']],
      [{ kind: 'decimal', precision: 38, scale: 10 }, ['-0.0000000001', '0.0000000001', '-255', '256']],
      [{ kind: 'decimal', precision: 12, scale: 2 }, ['-0.01', '0.01', '9999999999.99']],
      [{ kind: 'decimal', precision: 18, scale: 18 }, ['-0.999999999999999999', '0.5']],
      [{ kind: 'decimal', precision: 1, scale: 0 }, ['-9', '9', null]],
      [{ kind: 'text' }, ['', 'a']],
      [{ kind: 'text' }, ['é', 'z', 'e']],
      [{ kind: 'text' }, ['\u0000', '', '\u0000\u0000']],
      [{ kind: 'text' }, ['😀', '\uffff', '\u{10ffff}']],
      [{ kind: 'text' }, ['x'.repeat(64), 'y']],
      [{ kind: 'text' }, ['ü'.repeat(32), 'ü'.repeat(31)]],
      [{ kind: 'text' }, ['x'.repeat(65), 'a']],
      [{ kind: 'text' }, [null, null]],
      [{ kind: 'binary' }, [new Uint8Array(0), Uint8Array.of(0)]],
      [{ kind: 'binary' }, [Uint8Array.of(255), Uint8Array.of(0, 0), Uint8Array.of(0x5c, 0x78)]],
      [{ kind: 'bool' }, [true, true]],
      [{ kind: 'bool' }, [false, null]],
      [{ kind: 'bool' }, [true, false]],
      [{ kind: 'date' }, [-719_162, 2_932_896, 0]],
      [{ kind: 'timestamp', utc: true }, [-62_135_596_800_000_000n, 253_402_300_799_999_999n]],
      [{ kind: 'timestamp', utc: false }, [-1n, 0n, 1n]],
    ];
    for (const [type, values] of edges) {
      const c: Case = {
        cols: [{ type, nullable: values.includes(null), repeat: 0 }],
        rows: values.map((v) => [v]),
        cuts: [],
        options: {},
      };
      const { flat, wasm } = bothFiles(recordsOf(c), {});
      await expectSameStats(flat, wasm, c, `${JSON.stringify(type)} of ${String(values)}`);
    }
  }, 300_000);

  const allKinds: Col[] = FLAT_KINDS.map((type, i) => ({ type, nullable: i % 2 === 0, repeat: 0 }));

  it('writes a table of no rows as parquet-wasm does', async () => {
    const none = bothFiles([lakeRecord(schemaOf(allKinds), [])], {});
    await expectSameFiles(none.flat, none.wasm, { rows: 0 });
  });

  it('writes the field ids the Arrow schema carries (PARQUET:field_id), as parquet-wasm does', async () => {
    // One place decides the Parquet schema: the lake's Arrow schema, as arrow-rs maps it. The
    // flat writer takes parquet-wasm's schema elements whole, so field ids set on the Arrow
    // fields (what Iceberg reads columns by) reach both files alike.
    const plainRecord = lakeRecord(
      schemaOf(allKinds),
      fc.sample(fc.tuple(...allKinds.map((c) => valueArb(c.type))), { numRuns: 5, seed: 7 }),
    );
    const fields = plainRecord.schema.fields.map(
      (x, i) => new Field(x.name, x.type, x.nullable, new Map([['PARQUET:field_id', String(i + 1)]])),
    );
    const record = new RecordBatch(new ArrowSchema(fields, plainRecord.schema.metadata), plainRecord.data);
    const both = bothFiles([record], {});
    await expectSameFiles(both.flat, both.wasm, { rows: 5 });
    for (const file of [both.flat, both.wasm]) {
      const ids = await query(
        `SELECT name, field_id FROM parquet_schema(${lit(save(file, 'ids'))}) WHERE name <> 'arrow_schema' ORDER BY column_id`,
      );
      expect(ids.map((r) => [String(r[0]), Number(r[1])])).toEqual(fields.map((x, i) => [x.name, i + 1]));
    }
  });

  it('skips empty batches among others', async () => {
    const schema = schemaOf(allKinds);
    const empty = lakeRecord(schema, []);
    const rows = fc.sample(fc.tuple(...allKinds.map((c) => valueArb(c.type))), { numRuns: 20, seed: 42 });
    const some = lakeRecord(schema, rows);
    const mixed = bothFiles([some.slice(0, 9), empty, some.slice(9, 9), some.slice(9), empty], {});
    await expectSameFiles(mixed.flat, mixed.wasm, { rows: 20 });
  });

  it('leaves large values without dictionary or statistics, as the wasm does', async () => {
    // 100 KiB values, 2 of 3 rows: an average of 66.7 KiB, past LARGE_VALUE_BYTES (64 KiB).
    const big = (i: number) => new Uint8Array(100 * 1024).fill(i);
    const schema = schemaOf([
      { type: { kind: 'binary' }, nullable: true, repeat: 0 },
      { type: { kind: 'int32' }, nullable: false, repeat: 0 },
    ]);
    const records = [
      lakeRecord(schema, [
        [big(1), 5],
        [null, -3],
        [big(200), 9],
      ]),
    ];
    const { flat, wasm } = bothFiles(records, {});
    const { flatPath, chunks } = await expectSameFiles(flat, wasm, { rows: 3 });
    const [a, b] = [await duckStats(flatPath), await duckStats(save(wasm, 'wasm'))];
    expect(a).toEqual(b);
    expect(a.find((s) => s.col === 'c0')).toMatchObject({ min: null, max: null, nulls: null });
    expect(a.find((s) => s.col === 'c1')).toMatchObject({ min: '-3', max: '9', nulls: 0 });
    const c0 = chunks.filter((c) => c.column === 'c0');
    expect(c0.flatMap((c) => c.pages.map((p) => p.type))).not.toContain(PAGE_TYPE.DICTIONARY);
    await checkBounds(flatPath, ['c0']);
  });

  it('bounds row groups by rows and bytes across several slices, all rows in order', async () => {
    const cols: Col[] = [
      { type: { kind: 'int64' }, nullable: false, repeat: 0 },
      { type: { kind: 'text' }, nullable: true, repeat: 0 },
      { type: { kind: 'decimal', precision: 38, scale: 10 }, nullable: true, repeat: 3 },
      { type: { kind: 'bool' }, nullable: true, repeat: 0 },
    ];
    const n = 1000;
    const rows = Array.from({ length: n }, (_, i) => [
      BigInt(i) * 7_919n - 3_000n,
      i % 5 === 0 ? null : `row ${i} ${'é'.repeat(i % 13)}`,
      i % 4 === 1 ? null : `${i - 500}.${i % 10}`,
      i % 3 === 0 ? null : i % 2 === 0,
    ]);
    const record = lakeRecord(schemaOf(cols), rows);
    const records = cut(record, [13, 500, 501, 777]);
    expect(records.length).toBe(5);
    for (const options of [{ maxRowGroupRows: 7 }, { maxRowGroupRows: 100 }, { maxRowGroupBytes: 2048 }]) {
      const { flat, wasm } = bothFiles(records, options);
      const { flatPath, flatGroups } = await expectSameFiles(flat, wasm, { rows: n });
      expect(flatGroups.reduce((a, b) => a + b, 0)).toBe(n);
      if (options.maxRowGroupRows !== undefined) {
        expect(flatGroups.length).toBeGreaterThanOrEqual(Math.ceil(n / options.maxRowGroupRows));
        for (const g of flatGroups) expect(g).toBeLessThanOrEqual(options.maxRowGroupRows);
      } else {
        // 2 KiB of encoded bytes is a few dozen of these rows: more than one group.
        expect(flatGroups.length).toBeGreaterThan(1);
      }
      // In order: the values DuckDB reads are the rows given, row by row.
      const read = await query(
        `SELECT c0::VARCHAR, c1, c3 FROM read_parquet(${lit(flatPath)}, file_row_number = true) ORDER BY file_row_number`,
      );
      expect(read).toEqual(rows.map((r) => [String(r[0]), r[1], r[3]]));
      await checkBounds(flatPath);
    }
  }, 300_000);

  it('writes chunks of many pages (by rows and by bytes) that read back right', async () => {
    // Many rows: several pages per chunk by row count; dictionary indices across pages.
    const many: Col[] = [
      { type: { kind: 'int32' }, nullable: true, repeat: 0 },
      { type: { kind: 'text' }, nullable: true, repeat: 0 },
      { type: { kind: 'float64' }, nullable: false, repeat: 0 },
      { type: { kind: 'bool' }, nullable: true, repeat: 0 },
      { type: { kind: 'decimal', precision: 38, scale: 10 }, nullable: true, repeat: 0 },
    ];
    const n = 45_001;
    const rows = Array.from({ length: n }, (_, i) => [
      i % 3 === 0 ? null : i * 47_623 - 10 ** 9,
      i % 5 === 0 ? null : `v${i % 37}`,
      i / 7,
      i % 4 === 0 ? null : i % 3 === 0,
      i % 6 === 0 ? null : `${i - 20_000}.${i % 1000}`,
    ]);
    const records = cut(lakeRecord(schemaOf(many), rows), [20_000, 20_001]);
    const a = bothFiles(records, {});
    const { flatPath, chunks } = await expectSameFiles(a.flat, a.wasm, { rows: n });
    expect(chunks.find((c) => c.column === 'c0')!.pages.length).toBeGreaterThan(1);
    await checkBounds(flatPath);
    // Big values: pages cut by bytes (3 MB of distinct text in one slice), a dictionary column too.
    const big: Col[] = [
      { type: { kind: 'text' }, nullable: true, repeat: 0 },
      { type: { kind: 'binary' }, nullable: false, repeat: 0 },
    ];
    const bigRows = Array.from({ length: 3000 }, (_, i) => [
      i % 10 === 3 ? null : `${i}:${'ж'.repeat(500)}`,
      new Uint8Array(300).fill(i % 4),
    ]);
    const b = bothFiles([lakeRecord(schemaOf(big), bigRows)], {});
    const second = await expectSameFiles(b.flat, b.wasm, { rows: 3000 });
    expect(second.chunks.find((c) => c.column === 'c0')!.pages.length).toBeGreaterThan(1);
    await checkBounds(second.flatPath);
  }, 600_000);

  it('dictionary-encodes low-cardinality columns, falls back to PLAIN past the limit, plain columns have none', async () => {
    const n = 3000;
    const cols: Col[] = [
      { type: { kind: 'text' }, nullable: true, repeat: 0 },
      { type: { kind: 'text' }, nullable: false, repeat: 0 },
      { type: { kind: 'text' }, nullable: true, repeat: 0 },
      { type: { kind: 'int64' }, nullable: false, repeat: 0 },
      { type: { kind: 'binary' }, nullable: true, repeat: 0 },
      { type: { kind: 'text' }, nullable: true, repeat: 0 },
    ];
    const rows = Array.from({ length: n }, (_, i) => [
      i % 11 === 0 ? null : ['a', 'bb', 'ccc', 'é😀'][i % 4],
      `${i}-${'ü'.repeat(20)}`, // all distinct, ~45 bytes each: ~135 KB > the dictionary limit
      i % 7 === 0 ? null : ['x', 'y'][i % 2],
      BigInt(i % 3),
      i % 9 === 0 ? null : new Uint8Array([i & 0xff, i >> 8, 1, 2, 3]),
      // Three values in the first slice, then all distinct: dictionary pages, then PLAIN ones.
      i % 13 === 5 ? null : i < 1000 ? ['k', 'l', 'm'][i % 3] : `${i}:${'ø'.repeat(30)}`,
    ]);
    const distinctBytes = rows.reduce((s, r) => s + Buffer.byteLength(r[1] as string) + 4, 0);
    expect(distinctBytes).toBeGreaterThan(4 * DICTIONARY_PAGE_BYTES);
    const records = cut(lakeRecord(schemaOf(cols), rows), [1000, 2000]);
    const { flat, wasm } = bothFiles(records, { plainColumns: ['c2'] });
    const { flatPath, chunks } = await expectSameFiles(flat, wasm, { rows: n });
    const encodings = new Map(
      (await query(`SELECT path_in_schema, encodings FROM parquet_metadata(${lit(flatPath)})`)).map((r) => [
        String(r[0]),
        String(r[1]),
      ]),
    );
    const chunk = (name: string) => {
      const c = chunks.filter((x) => x.column === name);
      expect(c.length).toBe(1);
      return c[0]!;
    };
    const dataEncodings = (c: Chunk) =>
      c.pages.filter((p) => p.type === PAGE_TYPE.DATA).map((p) => p.encoding);

    // Low cardinality: a dictionary page, every data page dictionary-indexed.
    for (const name of ['c0', 'c3', '__op', '__phase']) {
      const c = chunk(name);
      expect(encodings.get(name), name).toContain('RLE_DICTIONARY');
      expect(c.pages[0]!.type, name).toBe(PAGE_TYPE.DICTIONARY);
      expect(new Set(dataEncodings(c)), name).toEqual(new Set([ENCODING.RLE_DICTIONARY]));
    }
    expect(chunk('c0').pages[0]!.numValues).toBe(4);

    // All distinct past the limit: PLAIN pages after (at most) a bounded dictionary.
    const c1 = chunk('c1');
    expect(dataEncodings(c1)).toContain(ENCODING.PLAIN);
    const dict = c1.pages.find((p) => p.type === PAGE_TYPE.DICTIONARY);
    if (dict) {
      expect(dict.numValues).toBeLessThan(n);
      expect(dict.uncompressed).toBeLessThan(distinctBytes);
    }
    // Low cardinality first, distinct later: the fallback mid-chunk, after the dictionary pages.
    const c5 = chunk('c5');
    expect(c5.pages[0]!.type).toBe(PAGE_TYPE.DICTIONARY);
    expect(dataEncodings(c5)[0]).toBe(ENCODING.RLE_DICTIONARY);
    expect(dataEncodings(c5)).toContain(ENCODING.PLAIN);
    // The same for the distinct positions (__pos, not a plain column here).
    expect(dataEncodings(chunk('__pos'))).toContain(ENCODING.PLAIN);

    // The plain column: no dictionary at all.
    const c2 = chunk('c2');
    expect(c2.pages.some((p) => p.type === PAGE_TYPE.DICTIONARY)).toBe(false);
    expect(c2.hasDictionaryOffset).toBe(false);
    expect(new Set(dataEncodings(c2))).toEqual(new Set([ENCODING.PLAIN]));
    expect(encodings.get('c2')).not.toContain('RLE_DICTIONARY');

    // The values, independently of the wasm file.
    const read = await query(
      `SELECT c0, c1, c2, c3::VARCHAR, c5, c4::VARCHAR FROM read_parquet(${lit(flatPath)}, file_row_number = true)
       ORDER BY file_row_number`,
    );
    expect(read.map((r) => r.slice(0, 5))).toEqual(rows.map((r) => [r[0], r[1], r[2], String(r[3]), r[5]]));
    expect(read.map((r) => r[5] !== null)).toEqual(rows.map((r) => r[4] !== null));
    await checkBounds(flatPath);
  }, 300_000);

  it('reads back sliced record batches (non-zero offsets, nulls across validity bytes)', async () => {
    const cols: Col[] = [
      { type: { kind: 'int32' }, nullable: true, repeat: 0 },
      { type: { kind: 'text' }, nullable: true, repeat: 0 },
      { type: { kind: 'bool' }, nullable: true, repeat: 0 },
      { type: { kind: 'float64' }, nullable: true, repeat: 0 },
      { type: { kind: 'decimal', precision: 12, scale: 2 }, nullable: true, repeat: 0 },
      { type: { kind: 'binary' }, nullable: true, repeat: 0 },
      { type: { kind: 'timestamp', utc: true }, nullable: true, repeat: 0 },
      { type: { kind: 'text' }, nullable: true, repeat: 3 },
    ];
    const n = 203;
    const rows = Array.from({ length: n }, (_, i) => {
      const nul = (k: number) => (i * k) % 7 < 3; // runs of nulls that straddle bitmap bytes
      return [
        nul(1) ? null : i * 1_000_003 - 2 ** 30,
        nul(2) ? null : `t${i}${'ß'.repeat(i % 5)}`,
        nul(3) ? null : i % 3 === 1,
        nul(4) ? null : [Number.NaN, -0, 1.5, Number.NEGATIVE_INFINITY, i / 3][i % 5],
        nul(5) ? null : `${i * 37 - 4000}.${i % 100}`,
        nul(6) ? null : new Uint8Array([i, 0, 255]),
        nul(1) ? null : BigInt(i) * 86_400_000_000n - 1n,
        i % 3 === 2 ? null : ['p', 'q', ''][i % 3],
      ];
    });
    const whole = lakeRecord(schemaOf(cols), rows);
    // Slices of slices, each starting off a byte boundary of the validity bitmaps.
    const tail = whole.slice(77, n);
    const records = [
      whole.slice(3, 11),
      whole.slice(11, 12),
      whole.slice(12, 77),
      tail.slice(0, 5),
      tail.slice(5),
    ];
    expect(records.map((r) => r.numRows).reduce((a, b) => a + b, 0)).toBe(n - 3);
    const { flat, wasm } = bothFiles(records, {});
    const { flatPath } = await expectSameFiles(flat, wasm, { rows: n - 3 });
    // The same rows as the unsliced record from row 3 on (written by parquet-wasm).
    const reference = encodeParquet([whole.slice(3, n)], { compression: 'snappy' });
    expect(await duckRows(flatPath)).toEqual(await duckRows(save(reference, 'ref')));
    const read = await query(
      `SELECT c0, c1, c2 FROM read_parquet(${lit(flatPath)}, file_row_number = true) ORDER BY file_row_number`,
    );
    expect(read).toEqual(rows.slice(3).map((r) => [r[0], r[1], r[2]]));
    // Also with tiny row groups, so the slices and the groups cut each other.
    const grouped = bothFiles(records, { maxRowGroupRows: 6 });
    await expectSameFiles(grouped.flat, grouped.wasm, { rows: n - 3 });
    await checkBounds(flatPath);
  }, 300_000);

  it('declines lists and lake format 2 (parquet-wasm writes those)', () => {
    const flatRecord = lakeRecord(schemaOf([{ type: { kind: 'int64' }, nullable: true, repeat: 0 }]), [
      [1n],
      [null],
    ]);
    expect(encodeFlat([flatRecord], { format: 1 }, gzip)).toBeInstanceOf(Uint8Array);
    expect(encodeFlat([flatRecord], { format: 2 }, gzip)).toBeUndefined();
    for (const element of [
      { kind: 'int32' },
      { kind: 'text' },
      { kind: 'list', element: { kind: 'int64' } },
    ] as LogicalType[]) {
      const listRecord = lakeRecord(
        schemaOf([
          { type: { kind: 'text' }, nullable: true, repeat: 0 },
          { type: { kind: 'list', element }, nullable: true, repeat: 0 },
        ]),
        [
          ['a', []],
          [null, null],
        ],
      );
      expect(encodeFlat([listRecord], {}, gzip)).toBeUndefined();
      expect(encodeFlat([listRecord], { format: 1 }, gzip)).toBeUndefined();
    }
  });

  it('falls back to parquet-wasm, with one warning, when the flat writer throws', async () => {
    // The failure is injected into the writer module the sink loads (no switch in production
    // code); the sink's natively compressed path is taken with the test codec where Node has no
    // zstd, so the flat writer is what the encode tries first.
    const record = lakeRecord(schemaOf([{ type: { kind: 'int64' }, nullable: true, repeat: 0 }]), [
      [1n],
      [null],
    ]);
    const warnings: string[] = [];
    const onWarning = (w: Error & { code?: string }) => warnings.push(String(w.code));
    process.on('warning', onWarning);
    const add = vi.spyOn(FlatWriter.prototype, 'add').mockImplementation(() => {
      throw new Error('injected flat writer failure');
    });
    if (!hasNativeZstd) pageCompression.testCodec = 'gzip';
    try {
      const file = encodeParquet([record], {});
      expect(add).toHaveBeenCalled();
      expect(Buffer.from(f(footer(file), 6) as Uint8Array).toString()).toMatch(/^parquet-rs /);
      const path = save(file, 'fallback');
      expect(await query(`SELECT count(*)::INT FROM read_parquet('${path}')`)).toEqual([[2]]);
      await new Promise((r) => setImmediate(r));
      expect(warnings.filter((w) => w === 'TIDEMARK_FLAT_WRITER_FALLBACK')).toHaveLength(1);
    } finally {
      add.mockRestore();
      pageCompression.testCodec = undefined;
      process.off('warning', onWarning);
    }
  });

  it.runIf(hasNativeZstd)(
    'writes zstd pages that read back the same, where Node has zstd',
    async () => {
      const zstd = nativeCompressor('zstd')!;
      const zstdDecompress = (b: Uint8Array) =>
        (zlib as unknown as { zstdDecompressSync(b: Uint8Array): Buffer }).zstdDecompressSync(b);
      await fc.assert(
        fc.asyncProperty(caseArb({ maxRows: 300, layout: true }), async (c) => {
          const records = recordsOf(c);
          const { flat, wasm } = bothFiles(records, c.options, zstd);
          await expectSameFiles(flat, wasm, {
            codec: CODEC.ZSTD,
            decompress: zstdDecompress,
            rows: c.rows.length,
          });
        }),
        { ...fcOptions, numRuns: 20 },
      );
    },
    900_000,
  );
});

describe('statistics order of text values (compareStatIn)', () => {
  it('orders two values of one buffer as their first 65 unsigned bytes do, whatever their offsets and shared prefix', () => {
    // Values of a column often share long prefixes: build both from one, placed at any offsets
    // of one buffer with random bytes around them (a word read past a value's end would see those).
    const value = fc.uint8Array({ maxLength: 12 });
    fc.assert(
      fc.property(
        // Short prefixes, and long ones around the 65 compared bytes.
        fc.oneof(fc.uint8Array({ maxLength: 9 }), fc.uint8Array({ minLength: 55, maxLength: 90 })),
        value,
        value,
        fc.nat(7),
        fc.nat(7),
        fc.uint8Array({ minLength: 240, maxLength: 240 }),
        fc.boolean(),
        (prefix, sa, sb, gapA, gapB, noise, bFirst) => {
          const a = Uint8Array.from([...prefix, ...sa]);
          const b = Uint8Array.from([...prefix, ...sb]);
          const buf = Uint8Array.from(noise);
          const first = bFirst ? b : a;
          const second = bFirst ? a : b;
          const at1 = gapA;
          const at2 = at1 + first.length + gapB;
          buf.set(first, at1);
          buf.set(second, at2);
          const [as, bs] = bFirst ? [at2, at1] : [at1, at2];
          const want = Math.sign(
            Buffer.compare(Buffer.from(a.subarray(0, 65)), Buffer.from(b.subarray(0, 65))),
          );
          const view = new DataView(buf.buffer);
          expect(Math.sign(compareStatIn(view, buf, as, a.length, bs, b.length))).toBe(want);
          expect(Math.sign(compareStatIn(view, buf, bs, b.length, as, a.length))).toBe(-want || 0);
        },
      ),
      { numRuns: 3000 },
    );
  });
});
