/**
 * Lake format versions (docs/lake-format.md, docs/decisions/0014-lake-format-versions.md):
 * - the same rows written through the real sink in format 1 and format 2 read back identically in
 *   DuckDB (every logical type, high- and low-cardinality columns, nulls), with the same schema;
 * - the two formats really differ where they should: footer `tidemark.format`, the file's format
 *   version, the page type of every column chunk's first data page (DATA_PAGE vs DATA_PAGE_V2, read
 *   from the page header at `data_page_offset`) and the encodings (no DELTA_* in format 1);
 * - the worker and the main-thread encoder write the same bytes for either format;
 * - a table keeps the format its state records whatever the spec says (incremental on Postgres,
 *   CDC on the scripted source), in both directions, a state from before formats is format 1, and
 *   a reset that deletes the table's objects lets the next run take the spec's format.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { incrementalTables, parseSpec, type Spec, tableTarget } from '../../shared/config/spec.js';
import type { LakeFormat } from '../../shared/contracts/lake-format.js';
import { newBatch } from '../../shared/dataplane/batch.js';
import { BatchEncoder } from '../../shared/dataplane/encoder.js';
import { toLakeRecord } from '../../shared/dataplane/lake.js';
import type { Column, LogicalType, Schema } from '../../shared/dataplane/schema.js';
import { parseCdcState } from '../../shared/engine/cdc/state.js';
import { resetIncremental } from '../../shared/engine/incremental/reset.js';
import { incrementalStateKey } from '../../shared/engine/incremental/state.js';
import { createLogger } from '../../shared/observability/log.js';
import { openPipeline } from '../../shared/pipeline/open.js';
import { runTable } from '../../shared/pipeline/run-table.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { objectKey, writerId } from '../../shared/sink/layout.js';
import { FOOTER_FORMAT, ParquetSink } from '../../shared/sink/parquet-sink.js';
import { encodeParquet, encodeParquetAsync } from '../../shared/sink/parquet-writer.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { checkedStore, RecordingSink, runEngine, STATE_KEY } from '../harness/cdc-engine.js';
import { buildScript, ScriptedServer, scriptTable } from '../harness/scripted-source.js';
import { localSpec, postgresFixture, type SourceFixture } from './incremental/fixture.js';

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'tidemark-lake-format-'));
  dirs.push(d);
  return d;
}

let conn: DuckDBConnection;
beforeAll(async () => {
  conn = await (await DuckDBInstance.create(':memory:')).connect();
  await conn.run("SET TimeZone = 'UTC'");
});
afterAll(() => {
  conn?.closeSync();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function query(sql: string): Promise<Record<string, unknown>[]> {
  return (await conn.runAndReadAll(sql)).getRowObjects() as Record<string, unknown>[];
}

const col = (name: string, type: LogicalType): Column => ({ name, type, nullable: true, sourceType: 'test' });

const SCHEMA: Schema = {
  columns: [
    col('id', { kind: 'int64' }),
    col('b', { kind: 'bool' }),
    col('i8', { kind: 'int8' }),
    col('i16', { kind: 'int16' }),
    col('i32', { kind: 'int32' }),
    col('d38', { kind: 'decimal', precision: 38, scale: 10 }),
    col('d12', { kind: 'decimal', precision: 12, scale: 2 }),
    col('f64', { kind: 'float64' }),
    col('status', { kind: 'text' }),
    col('note', { kind: 'text' }),
    col('bin', { kind: 'binary' }),
    col('day', { kind: 'date' }),
    col('ts_utc', { kind: 'timestamp', utc: true }),
    col('ts_local', { kind: 'timestamp', utc: false }),
    col('li', { kind: 'list', element: { kind: 'int32' } }),
    col('lt', { kind: 'list', element: { kind: 'text' } }),
  ],
  primaryKey: ['id'],
};

/** 20k rows, deterministic: high-cardinality keys, text and timestamps; a few NULLs in every column. */
const ROWS = 20_000;
function rowsBatch(table: string) {
  const enc = new BatchEncoder(SCHEMA, { phase: 'stream', capacity: ROWS });
  const specials = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0];
  for (let i = 0; i < ROWS; i++) {
    const nul = i % 97 === 13;
    const ts = 1_700_000_000_000_000n + BigInt(i) * 1_000_003n - (i % 5 === 0 ? 2_000_000_000_000_000n : 0n);
    enc.appendRow({
      id: BigInt(i) * 7919n - 5_000_000n,
      b: nul ? null : i % 3 === 0,
      i8: nul ? null : (i % 256) - 128,
      i16: nul ? null : ((i * 37) % 65536) - 32768,
      i32: nul ? null : (i * 104_729) % 2 ** 31,
      d38: nul ? null : `${i % 2 ? '-' : ''}${i * 13}.${String(i % 10_000_000_000).padStart(10, '0')}`,
      d12: nul ? null : `${(i * 3) % 1_000_000}.${String(i % 100).padStart(2, '0')}`,
      f64: nul ? null : i < specials.length ? specials[i]! : i * 1.25 - 3.5,
      status: nul ? null : ['placed', 'shipped', 'returned', 'ü 😀'][i % 4]!,
      note: nul ? null : `note ${i} ${'x'.repeat(i % 17)}`,
      bin: nul ? null : Uint8Array.from([i & 255, (i >> 8) & 255, 0, 255]),
      day: nul ? null : -719_162 + ((i * 31) % 3_652_058),
      ts_utc: nul ? null : ts,
      ts_local: nul ? null : ts + 3_600_000_000n,
      li: nul ? null : i % 7 === 0 ? [] : [i, null, -i],
      lt: nul ? null : [`t${i % 50}`, null],
    });
    enc.appendMeta(
      (i % 3) as 0 | 1 | 2,
      `j${String(i).padStart(8, '0')}`,
      1_700_000_000_000_000_001n + BigInt(i),
      i % 2 === 0,
    );
  }
  return newBatch({
    table,
    record: enc.finish(1_700_000_000_000_000_999n),
    watermark: 'j99999999',
    writeMode: 'append',
  });
}

/** Writes the rows through the real sink in `format`; returns the object's path. */
async function writeRows(format: LakeFormat): Promise<string> {
  const dir = tempDir();
  const table = 'fmt.rows';
  const sink = new ParquetSink({ store: new FileObjectStore(dir) });
  await sink.write({ table, writer: 'test.fmt', fence: 1, format }, SCHEMA, 'j00000000', [rowsBatch(table)]);
  return join(dir, objectKey('', table, 'test.fmt', 'j00000000', 1).key);
}

const PAGE_TYPES: Record<number, string> = {
  0: 'DATA_PAGE',
  1: 'INDEX_PAGE',
  2: 'DICTIONARY_PAGE',
  3: 'DATA_PAGE_V2',
};

/**
 * The type of the page at `offset`: a Thrift compact PageHeader starts with field 1 (`type`, i32),
 * i.e. the byte 0x15 and then the type as a zigzag varint (one byte for 0..3).
 */
function pageTypeAt(bytes: Uint8Array, offset: number): string {
  if (bytes[offset] !== 0x15) throw new Error(`no page header at ${offset} (byte ${bytes[offset]})`);
  const zigzag = bytes[offset + 1]!;
  return PAGE_TYPES[zigzag >> 1] ?? `type ${zigzag >> 1}`;
}

/** Per column chunk: its encodings and the type of its first data page. */
async function chunks(file: string): Promise<Map<string, { encodings: string; page: string }>> {
  const bytes = new Uint8Array(await readFile(file));
  const rows = await query(
    `SELECT path_in_schema AS col, encodings, data_page_offset::BIGINT AS off FROM parquet_metadata('${file}')`,
  );
  return new Map(
    rows.map((r) => [
      String(r.col),
      { encodings: String(r.encodings), page: pageTypeAt(bytes, Number(r.off as bigint)) },
    ]),
  );
}

async function footerFormat(file: string): Promise<string | undefined> {
  const kv = await query(
    `SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata('${file}') WHERE decode(key) = '${FOOTER_FORMAT}'`,
  );
  return kv[0]?.v as string | undefined;
}

describe('lake format 1 and 2 through DuckDB', () => {
  let v1: string;
  let v2: string;
  beforeAll(async () => {
    v1 = await writeRows(1);
    v2 = await writeRows(2);
  });

  it('read back the same rows with the same schema', async () => {
    const d1 = await query(`DESCRIBE SELECT * FROM read_parquet('${v1}')`);
    const d2 = await query(`DESCRIBE SELECT * FROM read_parquet('${v2}')`);
    expect(d2).toEqual(d1);
    expect(d1.find((c) => c.column_name === '__op')?.column_type).toBe('VARCHAR');
    const [counts] = await query(
      `SELECT (SELECT count(*) FROM read_parquet('${v1}'))::BIGINT AS n1,
              (SELECT count(*) FROM read_parquet('${v2}'))::BIGINT AS n2,
              (SELECT count(*) FROM (SELECT * FROM read_parquet('${v1}') EXCEPT ALL SELECT * FROM read_parquet('${v2}')))::BIGINT AS only1,
              (SELECT count(*) FROM (SELECT * FROM read_parquet('${v2}') EXCEPT ALL SELECT * FROM read_parquet('${v1}')))::BIGINT AS only2`,
    );
    expect(counts).toEqual({ n1: BigInt(ROWS), n2: BigInt(ROWS), only1: 0n, only2: 0n });
    // EXCEPT compares NaN as equal to NaN: check the float specials by their text as well.
    const specials = await query(
      `SELECT a.f64::VARCHAR AS x, b.f64::VARCHAR AS y FROM read_parquet('${v1}') a JOIN read_parquet('${v2}') b USING (__pos) WHERE a.__pos < 'j00000004' ORDER BY __pos`,
    );
    expect(specials.map((r) => r.y)).toEqual(['nan', 'inf', '-inf', '-0.0']);
    expect(specials.map((r) => r.x)).toEqual(specials.map((r) => r.y));
  });

  it('record their format in the footer and the file metadata', async () => {
    expect(await footerFormat(v1)).toBe('1');
    expect(await footerFormat(v2)).toBe('2');
    const version = async (f: string) =>
      (await query(`SELECT format_version::BIGINT AS v FROM parquet_file_metadata('${f}')`))[0]!.v;
    expect(await version(v1)).toBe(1n);
    expect(await version(v2)).toBe(2n);
  });

  it('format 1 writes V1 pages and no delta encodings; format 2 V2 pages and delta encodings', async () => {
    const c1 = await chunks(v1);
    const c2 = await chunks(v2);
    expect([...c2.keys()]).toEqual([...c1.keys()]);
    for (const [column, c] of c1) {
      expect(c.page, column).toBe('DATA_PAGE');
      expect(c.encodings, column).not.toMatch(/DELTA/);
      expect(c2.get(column)!.page, column).toBe('DATA_PAGE_V2');
    }
    // High-cardinality columns outgrow the dictionary and fall back: PLAIN in format 1, the delta
    // encodings in format 2 (integers, timestamps: DELTA_BINARY_PACKED; text: DELTA_BYTE_ARRAY).
    for (const column of ['id', 'ts_utc', 'ts_local', 'i32']) {
      expect(c1.get(column)!.encodings, column).toMatch(/PLAIN/);
      expect(c2.get(column)!.encodings, column).toMatch(/DELTA_BINARY_PACKED/);
    }
    for (const column of ['note', '__pos'])
      expect(c2.get(column)!.encodings, column).toMatch(/DELTA_BYTE_ARRAY/);
    // Wide decimals (FIXED_LEN_BYTE_ARRAY): no dictionary in format 1, dictionary + delta in 2.
    expect(c1.get('d38')!.encodings).not.toMatch(/DICTIONARY|DELTA/);
    expect(c2.get('d38')!.encodings).toMatch(/RLE_DICTIONARY/);
    expect(c2.get('d38')!.encodings).toMatch(/DELTA_BYTE_ARRAY/);
    // Doubles fall back to PLAIN in both.
    expect(c2.get('f64')!.encodings).not.toMatch(/DELTA/);
    // Booleans: bit-packed PLAIN in format 1, RLE in format 2.
    expect(c1.get('b')!.encodings).toMatch(/PLAIN/);
    expect(c2.get('b')!.encodings).toBe('RLE');
    // Low-cardinality text keeps its dictionary in both.
    expect(c1.get('status')!.encodings).toMatch(/RLE_DICTIONARY/);
    expect(c2.get('status')!.encodings).toMatch(/RLE_DICTIONARY/);
  });

  it('the worker and the main thread write the same bytes in either format', async () => {
    const record = toLakeRecord(rowsBatch('fmt.rows').record);
    for (const format of [1, 2] as const) {
      const sync = encodeParquet([record], { format });
      const worker = await encodeParquetAsync([record], { format });
      expect(Buffer.compare(Buffer.from(sync), Buffer.from(worker)), `format ${format}`).toBe(0);
    }
    expect(
      Buffer.compare(
        Buffer.from(encodeParquet([record], { format: 1 })),
        Buffer.from(encodeParquet([record])),
      ),
    ).toBe(0);
    expect(() => encodeParquet([record], { format: 3 as LakeFormat })).toThrow(
      /unknown lake format 3; use 1 or 2/,
    );
  });
});

/** Every object of a local lake table, and its footer format. */
async function objectFormats(lakeDir: string, table: string): Promise<string[]> {
  const dir = join(lakeDir, table);
  const names = (await readdir(dir)).filter((n) => n.endsWith('.parquet')).sort();
  return Promise.all(names.map((n) => footerFormat(join(dir, n)).then((f) => f ?? 'none')));
}

describe('a table keeps its recorded format (incremental, Postgres)', () => {
  let fx: SourceFixture;
  beforeAll(async () => {
    fx = await postgresFixture('lakefmt');
  }, 60_000);
  afterAll(async () => {
    await fx?.drop();
  });

  /** `spec` with `lake.format` set (the same lake and state). */
  const withFormat = (spec: Spec, format: LakeFormat): Spec =>
    parseSpec({ ...spec, lake: { uri: spec.lake.uri, format } });

  async function run(spec: Spec): Promise<string[]> {
    const warnings: string[] = [];
    const logger = createLogger({
      json: true,
      level: 'warn',
      write: (line) => warnings.push(line),
      metrics: false,
    });
    const pipeline = await openPipeline(spec);
    try {
      await runTable(spec, incrementalTables(spec)[0]!, pipeline, { logger });
    } finally {
      await pipeline.close();
    }
    return warnings;
  }

  async function stateOf(spec: Spec): Promise<Record<string, unknown>> {
    const t = incrementalTables(spec)[0]!;
    const key = incrementalStateKey(spec.pipeline, tableTarget(t));
    return (await new FileCursorStore(spec.state.dir!).load(key)).value as Record<string, unknown>;
  }

  for (const [first, later] of [
    [2, 1],
    [1, 2],
  ] as const) {
    it(`a table first written in format ${first} stays in format ${first} when the spec says ${later}`, async () => {
      const name = `public.items_${first}${later}`;
      await fx.createTable(name);
      await fx.insertRange(1, 101, `${fx.ts('2024-01-01 00:00:00')} + g * INTERVAL '1 second'`, name);
      const { spec, lakeDir } = localSpec(fx, { table: name, pageSize: 50 });
      const target = tableTarget(incrementalTables(spec)[0]!);
      expect(await run(withFormat(spec, first))).toEqual([]);
      expect((await stateOf(spec)).format).toBe(first);
      expect(await objectFormats(lakeDir, target)).toEqual([String(first), String(first)]);

      await fx.insertRange(101, 151, `${fx.ts('2024-02-01 00:00:00')} + g * INTERVAL '1 second'`, name);
      const warnings = await run(withFormat(spec, later));
      expect(warnings.join('\n')).toContain(`keeps lake format ${first}`);
      expect(warnings.join('\n')).toContain('LAKE_FORMAT_KEPT');
      expect((await stateOf(spec)).format).toBe(first);
      expect(await objectFormats(lakeDir, target)).toEqual([String(first), String(first), String(first)]);
    });
  }

  it('a reset that deletes the objects makes the table new: the next run takes the spec format', async () => {
    const name = 'public.items_reset';
    await fx.createTable(name);
    await fx.insertRange(1, 51, `${fx.ts('2024-01-01 00:00:00')} + g * INTERVAL '1 second'`, name);
    const { spec, lakeDir } = localSpec(fx, { table: name, pageSize: 100 });
    const t = incrementalTables(spec)[0]!;
    const target = tableTarget(t);
    await run(withFormat(spec, 1));
    expect(await objectFormats(lakeDir, target)).toEqual(['1']);
    const pipeline = await openPipeline(spec, { sourcesLazy: true });
    try {
      await resetIncremental({
        key: incrementalStateKey(spec.pipeline, target),
        lake: { table: target, writer: writerId(spec.pipeline, t.source) },
        cursorColumn: t.cursor,
        store: pipeline.store,
        sink: pipeline.sink,
        owner: 'test-reset',
        objects: 'delete',
      });
    } finally {
      await pipeline.close();
    }
    expect((await stateOf(spec)).format).toBeUndefined();
    expect(await run(withFormat(spec, 2))).toEqual([]);
    expect((await stateOf(spec)).format).toBe(2);
    expect(await objectFormats(lakeDir, target)).toEqual(['2']);
  });

  it('a table written before formats were recorded is format 1, and the state then says so', async () => {
    const name = 'public.items_legacy';
    await fx.createTable(name);
    await fx.insertRange(1, 51, `${fx.ts('2024-01-01 00:00:00')} + g * INTERVAL '1 second'`, name);
    const { spec, lakeDir } = localSpec(fx, { table: name, pageSize: 100 });
    const target = tableTarget(incrementalTables(spec)[0]!);
    await run(withFormat(spec, 1));
    // Make the state one from before this change: no `format`.
    const file = (await readdir(spec.state.dir!)).find((n) => n.endsWith('.json') && !n.startsWith('.'))!;
    const path = join(spec.state.dir!, file);
    const stored = JSON.parse(await readFile(path, 'utf8')) as { value: Record<string, unknown> };
    expect(stored.value.format).toBe(1);
    delete stored.value.format;
    await writeFile(path, JSON.stringify(stored));

    await fx.insertRange(51, 81, `${fx.ts('2024-02-01 00:00:00')} + g * INTERVAL '1 second'`, name);
    const warnings = await run(withFormat(spec, 2));
    expect(warnings.join('\n')).toContain('keeps lake format 1 (written before lake formats were recorded)');
    expect((await stateOf(spec)).format).toBe(1);
    expect(await objectFormats(lakeDir, target)).toEqual(['1', '1']);
  });
});

describe('a table keeps its recorded format (CDC, scripted source)', () => {
  class Crash extends Error {}

  for (const [first, later] of [
    [2, 1],
    [1, 2],
  ] as const) {
    it(`a table whose entry records format ${first} stays ${first} when the spec says ${later}`, async () => {
      const t = scriptTable('public.cf', [['v', 'int32']]);
      const script = buildScript({
        tables: [t],
        steps: Array.from({ length: 6 }, (_, i) => ({
          kind: 'txn' as const,
          changes: [{ table: 'public.cf', op: 'insert' as const, id: i + 1 }],
        })),
      });
      const dir = tempDir();
      const server = new ScriptedServer(script, join(dir, 'server'));
      const sink = new RecordingSink(join(dir, 'lake'));
      const store = checkedStore(new FileCursorStore(join(dir, 'state')), sink);
      const streamer = server.streamer({ rowsPerEvent: 1 });
      // First run: format `first`, crashes right after its first flush committed.
      await expect(
        runEngine({
          script,
          server,
          store,
          sink,
          streamer,
          limits: { rows: 2 },
          extra: {
            lakeFormat: first,
            faults: (p) => {
              if (p === 'after-commit') throw new Crash(p);
            },
          },
        }),
      ).rejects.toBeInstanceOf(Crash);
      expect(parseCdcState((await store.load(STATE_KEY)).value).tables['public.cf']?.format).toBe(first);
      const s = await runEngine({
        script,
        server,
        store,
        sink,
        streamer,
        limits: { rows: 2 },
        extra: { lakeFormat: later },
      });
      expect(s.stopped).toBe('ended');
      expect(parseCdcState((await store.load(STATE_KEY)).value).tables['public.cf']?.format).toBe(first);
      const formats = await objectFormats(join(dir, 'lake'), 'public.cf');
      expect(formats.length).toBeGreaterThanOrEqual(2);
      expect(new Set(formats)).toEqual(new Set([String(first)]));
    });
  }

  it('an entry written before formats (it has a `next`, no `format`) stays format 1 when the spec says 2', async () => {
    const t = scriptTable('public.cl', [['v', 'int32']]);
    const script = buildScript({
      tables: [t],
      steps: Array.from({ length: 6 }, (_, i) => ({
        kind: 'txn' as const,
        changes: [{ table: 'public.cl', op: 'insert' as const, id: i + 1 }],
      })),
    });
    const dir = tempDir();
    const server = new ScriptedServer(script, join(dir, 'server'));
    const sink = new RecordingSink(join(dir, 'lake'));
    const stateDir = join(dir, 'state');
    const store = checkedStore(new FileCursorStore(stateDir), sink);
    const streamer = server.streamer({ rowsPerEvent: 1 });
    await expect(
      runEngine({
        script,
        server,
        store,
        sink,
        streamer,
        limits: { rows: 2 },
        extra: {
          faults: (p) => {
            if (p === 'after-commit') throw new Crash(p);
          },
        },
      }),
    ).rejects.toBeInstanceOf(Crash);
    // Make the entry one from before this change: no `format`.
    const file = (await readdir(stateDir)).find((n) => n.endsWith('.json') && !n.startsWith('.'))!;
    const stored = JSON.parse(await readFile(join(stateDir, file), 'utf8')) as {
      value: { tables: Record<string, Record<string, unknown>> };
    };
    const entry = stored.value.tables['public.cl']!;
    expect(entry.format).toBe(1);
    expect(entry.next).toBeDefined();
    delete entry.format;
    await writeFile(join(stateDir, file), JSON.stringify(stored));

    const s = await runEngine({
      script,
      server,
      store,
      sink,
      streamer,
      limits: { rows: 2 },
      extra: { lakeFormat: 2 },
    });
    expect(s.stopped).toBe('ended');
    expect(parseCdcState((await store.load(STATE_KEY)).value).tables['public.cl']?.format).toBe(1);
    expect(new Set(await objectFormats(join(dir, 'lake'), 'public.cl'))).toEqual(new Set(['1']));
  });
});
