/**
 * The MySQL snapshot chunker (shared/drivers/mysql/snapshot.ts) and the reader's watermarks
 * (shared/drivers/mysql/cdc/reader.ts `expectWatermark`) on the harness MariaDB:
 *   a. bounds partition exactly: random key sets over an int key, a utf8mb4_general_ci VARCHAR
 *      key and a composite (varchar, int) key; chunks by nextBound + read cover every row once,
 *      each in the database's ORDER BY order;
 *   b. a chunk's batch equals an incremental page of the same rows (same wire types and
 *      values), with the snapshot metadata;
 *   c. with a running reader: the high watermark at the snapshot's binlog position splits the
 *      concurrent transactions exactly as the chunk saw them; rowsPos sorts between the last
 *      change before and the first after on the same key; a watermark registered after the
 *      reader passed it, and one on an idle server, are reported without further writes;
 *   d. the watermark-table mode (forced on MariaDB): low and high events, rowsPos ordering.
 */
import { type RecordBatch, Table } from 'apache-arrow';
import fc from 'fast-check';
import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CdcEvent, SourcePosition } from '../../shared/contracts/cdc.js';
import { TidemarkError } from '../../shared/contracts/errors.js';
import type { ChunkRows, ChunkWindow, TableChunker } from '../../shared/contracts/snapshot.js';
import type { TableRef } from '../../shared/contracts/source.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { binlogAt, parseBinlogPosition } from '../../shared/drivers/mysql/cdc/position.js';
import type { MysqlCdcReader } from '../../shared/drivers/mysql/cdc/reader.js';
import { MysqlCdcSource } from '../../shared/drivers/mysql/cdc/source.js';
import {
  type MysqlChunker,
  type MysqlSnapshotSource,
  needsWatermarkTable,
} from '../../shared/drivers/mysql/snapshot.js';
import { MysqlSource } from '../../shared/drivers/mysql/source.js';
import { binlogFileIndex, incrementalPosPrefix, mysqlPosition } from '../../shared/position/position.js';
import { type FreshDatabase, freshMysqlDatabase } from '../harness/mysql.js';
import { mysqlClient } from '../harness/mysql-cdc.js';

const T = { timeout: 180_000 };
const CLOCK_MS = 1_700_000_000_123;
let nextServerId = 7000 + Math.floor(Math.random() * 100_000) * 10;

let db: FreshDatabase;
let sql: mysql.Connection;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  db = await freshMysqlDatabase('mysnap');
  sql = await mysqlClient(db.url);
});
afterAll(async () => {
  for (const c of closers.reverse()) await c().catch(() => undefined);
  await sql?.end();
  await db?.drop();
});

function cdcSource(): MysqlCdcSource {
  const s = new MysqlCdcSource({
    url: db.url,
    sourceName: 'sources.src',
    connectTimeoutMs: 10_000,
    heartbeatMs: 1000,
  });
  closers.push(() => s.close());
  return s;
}

async function snapshotOf(
  s: MysqlCdcSource,
  opts: { watermarkTable?: string; forceWatermarkTable?: boolean } = {},
): Promise<MysqlSnapshotSource> {
  const snap = await s.openSnapshot({ connections: 2, ...opts, clock: () => CLOCK_MS });
  closers.push(() => snap.close());
  return snap;
}

/** A window that records what the chunker reported, and registers watermarks with `reader`. */
function recordingWindow(reader?: MysqlCdcReader) {
  const calls: { kind: 'expect' | 'ready'; id?: string; role?: string; at?: SourcePosition }[] = [];
  let rows: ChunkRows | undefined;
  const window: ChunkWindow = {
    expect(id, role, at) {
      calls.push({ kind: 'expect', id, role, ...(at ? { at } : {}) });
      reader?.expectWatermark(id, at);
    },
    ready(r) {
      calls.push({ kind: 'ready' });
      rows = r;
    },
  };
  return {
    window,
    calls,
    get rows(): ChunkRows {
      if (!rows) throw new Error('ready was not called');
      return rows;
    },
  };
}

function columnValues(record: RecordBatch, name: string): unknown[] {
  const col = new Table(record).getChild(name);
  if (!col) throw new Error(`no column ${name}`);
  return [...col].map((v) => (v === null ? null : typeof v === 'object' ? JSON.stringify(v) : v));
}

/** Each row's key as text columns, joined by a tab. */
function keysOf(record: RecordBatch | undefined, key: readonly string[]): string[] {
  if (!record) return [];
  const cols = key.map((k) => columnValues(record, k));
  return cols[0]!.map((_, r) => cols.map((c) => String(c[r])).join('\t'));
}

async function query<R>(text: string, values: unknown[] = []): Promise<R[]> {
  const [rows] = await sql.query(text, values);
  return rows as R[];
}

async function tableOf(s: MysqlCdcSource, name: string): Promise<{ ref: TableRef; schema: Schema }> {
  const { ref, schema } = await s.introspect({ source: `${db.name}.${name}` });
  return { ref, schema };
}

/** Reads every chunk of `chunker` by nextBound + read; returns the chunks' keys. */
async function walk(
  chunker: TableChunker,
  schema: Schema,
  ref: TableRef,
  size: number,
): Promise<{ chunks: string[][]; bounds: (string | undefined)[]; lastKeys: (string | undefined)[] }> {
  const chunks: string[][] = [];
  const bounds: (string | undefined)[] = [];
  const lastKeys: (string | undefined)[] = [];
  let after: string | undefined;
  for (let i = 0; i < 10_000; i++) {
    const upTo = await chunker.nextBound(after, size);
    const w = recordingWindow();
    await chunker.read(
      {
        range: { ...(after !== undefined ? { after } : {}), ...(upTo !== undefined ? { upTo } : {}) },
        limit: size + 3,
        schema,
        writeMode: 'upsert',
      },
      w.window,
      { low: `l${i}`, high: `h${i}` },
    );
    chunks.push(keysOf(w.rows.batch?.record, ref.primaryKey));
    bounds.push(upTo);
    lastKeys.push(w.rows.lastKey);
    if (upTo === undefined) return { chunks, bounds, lastKeys };
    after = upTo;
  }
  throw new Error('walk did not end');
}

describe('mysql snapshot: bounds and chunks', () => {
  const cases = [
    {
      name: 'int key',
      ddl: 'CREATE TABLE %t (id INT NOT NULL PRIMARY KEY, v VARCHAR(10))',
      keys: fc
        .uniqueArray(fc.integer({ min: -5000, max: 5000 }), { maxLength: 250 })
        .map((ks) => ks.map((k) => [k])),
      insert: 'INSERT IGNORE INTO %t (id, v) VALUES ?',
      row: (k: unknown[]) => [k[0], 'x'],
      order: 'id',
    },
    {
      name: 'utf8mb4_general_ci varchar key',
      ddl: 'CREATE TABLE %t (k VARCHAR(12) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, v INT)',
      keys: fc
        .array(
          fc.string({
            unit: fc.constantFrom('a', 'A', 'á', 'Ä', 'b', 'B', 'z', 'Z', '_', 'é', 'E', 'ß', 's', '0'),
            minLength: 1,
            maxLength: 4,
          }),
          {
            maxLength: 250,
          },
        )
        .map((ks) => ks.map((k) => [k])),
      insert: 'INSERT IGNORE INTO %t (k, v) VALUES ?',
      row: (k: unknown[]) => [k[0], 1],
      order: 'k',
    },
    {
      name: 'composite (varchar, int) key',
      ddl: 'CREATE TABLE %t (a VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, b INT NOT NULL, v INT, PRIMARY KEY (a, b))',
      keys: fc.array(
        fc.tuple(
          fc.string({ unit: fc.constantFrom('a', 'A', 'á', 'b', 'B', 'c'), minLength: 1, maxLength: 2 }),
          fc.integer({ min: -20, max: 20 }),
        ),
        { maxLength: 250 },
      ),
      insert: 'INSERT IGNORE INTO %t (a, b, v) VALUES ?',
      row: (k: unknown[]) => [k[0], k[1], 1],
      order: 'a, b',
    },
  ];
  for (const [n, c] of cases.entries()) {
    it(`partitions exactly, in the database's order: ${c.name}`, T, async () => {
      const table = `bk${n}`;
      await sql.query(c.ddl.replace('%t', table));
      const s = cdcSource();
      const snap = await snapshotOf(s);
      const { ref, schema } = await tableOf(s, table);
      const chunker = snap.chunker(ref, schema);
      await fc.assert(
        fc.asyncProperty(c.keys, fc.integer({ min: 1, max: 40 }), async (keys, size) => {
          await sql.query(`DELETE FROM ${table}`);
          if (keys.length > 0) await sql.query(c.insert.replace('%t', table), [keys.map(c.row)]);
          const expected = (
            await query<Record<string, unknown>>(`SELECT ${c.order} FROM ${table} ORDER BY ${c.order}`)
          ).map((r) => ref.primaryKey.map((k) => String(r[k])).join('\t'));
          const got = await walk(chunker, schema, ref, size);
          // Every row once, in the database's order, chunk after chunk.
          expect(got.chunks.flat()).toEqual(expected);
          for (let i = 0; i < got.chunks.length; i++) {
            if (got.bounds[i] !== undefined) {
              // A bound is the size-th key: its chunk holds exactly `size` rows and ends at it.
              expect(got.chunks[i]!.length).toBe(size);
              expect(got.lastKeys[i]).toBe(got.bounds[i]);
            } else expect(got.chunks[i]!.length).toBeLessThan(size + 1);
          }
        }),
        { numRuns: 12 },
      );
      expect(await chunker.estimateRows!()).toBeTypeOf('number');
    });
  }

  it('keyset predicates use the primary key as a range for a composite key', T, async () => {
    await sql.query(
      'CREATE TABLE ex (a VARCHAR(8) COLLATE utf8mb4_general_ci NOT NULL, b INT NOT NULL, v INT, PRIMARY KEY (a, b))',
    );
    await sql.query("INSERT INTO ex SELECT CONCAT('k', seq MOD 50), seq, 1 FROM seq_1_to_5000");
    await sql.query('ANALYZE TABLE ex');
    const s = cdcSource();
    const snap = await snapshotOf(s);
    const { ref, schema } = await tableOf(s, 'ex');
    const chunker = snap.chunker(ref, schema) as MysqlChunker;
    const after = await chunker.nextBound(undefined, 1000);
    const upTo = await chunker.nextBound(after, 1000);
    expect(after).toBeDefined();
    expect(upTo).toBeDefined();
    const st = await chunker.statements({ after, upTo }, 1000);
    expect(st.chunk).not.toMatch(/\(src\.`a`, src\.`b`\)/);
    for (const text of [st.bound, st.chunk]) {
      const plans = await query<{ type: string; key: string | null }>(`EXPLAIN ${text}`);
      expect(plans[0], text).toMatchObject({ type: 'range', key: 'PRIMARY' });
    }
  });

  it('refuses a table without primary key, naming the fix', T, async () => {
    await sql.query('CREATE TABLE nopk (a INT, b INT)');
    const s = cdcSource();
    const snap = await snapshotOf(s);
    const { ref, schema } = await tableOf(s, 'nopk');
    const err = await snap
      .chunker(ref, schema)
      .nextBound(undefined, 10)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TidemarkError);
    expect((err as TidemarkError).code).toBe('SNAPSHOT_KEY_MISSING');
    expect((err as Error).message).toContain('no primary key');
  });
});

describe('mysql snapshot: chunk batch', () => {
  it('equals an incremental page of the same rows, with snapshot metadata', T, async () => {
    await sql.query(
      `CREATE TABLE ty (id BIGINT NOT NULL PRIMARY KEY, s VARCHAR(20), d DECIMAL(12,3), f DOUBLE, t DATETIME(6),
        ts TIMESTAMP(6) NULL, j JSON, b BLOB, dt DATE, u TINYINT UNSIGNED)`,
    );
    await sql.query("SET time_zone = '+00:00'");
    await sql.query(
      `INSERT INTO ty VALUES
        (1, 'héllo', 123.456, 1.5, '2024-01-02 03:04:05.123456', '2024-05-06 07:08:09.5', '{"a": [1, 2]}', x'00ff', '2020-02-29', 255),
        (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
        (3, '', -0.001, -2e300, '1970-01-01 00:00:00', '2038-01-19 03:14:07', 'null', x'', '1000-01-01', 0)`,
    );
    const s = cdcSource();
    const snap = await snapshotOf(s);
    const { ref, schema } = await tableOf(s, 'ty');
    const w = recordingWindow();
    await snap
      .chunker(ref, schema)
      .read({ range: {}, limit: 100, schema, writeMode: 'upsert' }, w.window, { low: 'L', high: 'H' });
    const inc = new MysqlSource({ url: db.url, lagMs: 10_000, clock: () => CLOCK_MS });
    closers.push(() => inc.close());
    const pageOf = () =>
      inc.incrementalBatch({
        table: ref,
        cursorColumn: 'id',
        after: '',
        pageSize: 100,
        posPrefix: incrementalPosPrefix(1, 1),
        ordinalBase: 0,
        schema,
        writeMode: 'upsert',
      });
    // The incremental bound waits for every open transaction on the (shared) server: another
    // test file's open transaction can hold the page back for a while.
    let page = await pageOf();
    for (let i = 0; i < 60 && page.page?.record.numRows !== 3; i++) {
      await new Promise((r) => setTimeout(r, 500));
      page = await pageOf();
    }
    const a = w.rows.batch!.record;
    const b = page.page!.record;
    expect(w.rows.rows).toBe(3);
    expect(a.numRows).toBe(3);
    for (const c of schema.columns) {
      expect(String(a.schema.fields.find((f) => f.name === c.name)!.type)).toBe(
        String(b.schema.fields.find((f) => f.name === c.name)!.type),
      );
      expect(columnValues(a, c.name)).toEqual(columnValues(b, c.name));
    }
    expect(columnValues(a, '__op')).toEqual([0, 0, 0]);
    expect(columnValues(a, '__pos')).toEqual(['', '', '']);
    expect(columnValues(a, '__commit_ts')).toEqual([null, null, null]);
    expect(columnValues(a, '__snapshot')).toEqual([true, true, true]);
    expect(columnValues(a, '__phase')).toEqual(['snapshot', 'snapshot', 'snapshot']);
    expect(columnValues(a, '__ingest_ts').map(String)).toEqual(columnValues(b, '__ingest_ts').map(String));
    expect(w.rows.lastKey).toBe(page.next);
    // MariaDB: no low watermark; the high one at the snapshot's binlog position.
    expect(w.calls.map((c) => `${c.kind}${c.role ? `:${c.role}` : ''}`)).toEqual(['ready', 'expect:high']);
    expect(w.calls[1]!.id).toBe('H');
    const at = parseBinlogPosition(w.calls[1]!.at!);
    expect(at.file).toMatch(/\.\d+$/);
    expect(at.pos).toBeGreaterThan(4);
  });
});

/** Pulls events from `reader`, cutting `table` at each commit to learn the rows' positions. */
class Pump {
  readonly events: (CdcEvent & { rows?: { id: string; pos: string }[] })[] = [];
  constructor(
    private readonly reader: MysqlCdcReader,
    private readonly target: string,
  ) {}
  async until(pred: () => boolean, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pred()) {
      if (Date.now() > deadline)
        throw new Error(
          `reader did not reach the condition; events: ${JSON.stringify(this.events.map((e) => e.kind))}`,
        );
      const ev = await this.reader.next(200);
      if (!ev) continue;
      if (ev.kind === 'commit') {
        const b = this.reader.cut(this.target);
        const ids = b ? columnValues(b.record, 'id').map(String) : [];
        const pos = b ? columnValues(b.record, '__pos').map(String) : [];
        this.events.push({ ...ev, rows: ids.map((id, i) => ({ id, pos: pos[i]! })) });
      } else this.events.push(ev);
    }
  }
  watermark(id: string): (CdcEvent & { kind: 'watermark' }) | undefined {
    return this.events.find(
      (e): e is CdcEvent & { kind: 'watermark' } => e.kind === 'watermark' && e.id === id,
    );
  }
  indexOf(id: string): number {
    return this.events.findIndex((e) => e.kind === 'watermark' && e.id === id);
  }
  /** Index of the commit that carried row `id` with value `v` (the first, when `v` is omitted). */
  commitOf(id: string): { index: number; pos: string } | undefined {
    for (let i = 0; i < this.events.length; i++) {
      const r = this.events[i]!.rows?.find((x) => x.id === id);
      if (r) return { index: i, pos: r.pos };
    }
    return undefined;
  }
}

async function startReader(s: MysqlCdcSource, ref: TableRef, schema: Schema): Promise<MysqlCdcReader> {
  const reader = (await s.openReader([{ ref, schema, writeMode: 'append' }], {
    heartbeatMs: 1000,
    serverId: nextServerId++,
  })) as MysqlCdcReader;
  await reader.start({ position: await reader.initialPosition(), next: new Map() });
  return reader;
}

describe('mysql snapshot: watermarks at the consistent snapshot', () => {
  it('splits concurrent transactions exactly as the chunk saw them', T, async () => {
    await sql.query('CREATE TABLE wm (id INT NOT NULL PRIMARY KEY, v VARCHAR(10) NOT NULL)');
    await sql.query("INSERT INTO wm SELECT seq, 'seed' FROM seq_1_to_2000");
    const s = cdcSource();
    const { ref, schema } = await tableOf(s, 'wm');
    const reader = await startReader(s, ref, schema);
    const snap = await snapshotOf(s);
    const pump = new Pump(reader, ref.target);
    // The last transaction before the snapshot, on key 7.
    await sql.query("UPDATE wm SET v = 'before' WHERE id = 7");
    // A writer: one row per transaction while the chunk is read.
    const writer = await mysqlClient(db.url);
    closers.push(() => writer.end());
    let stop = false;
    let written = 0;
    const writing = (async () => {
      for (let i = 0; !stop && i < 20_000; i++) {
        await writer.query('INSERT INTO wm (id, v) VALUES (?, ?)', [10_000 + i, 'w']);
        written++;
      }
    })();
    while (written < 5) await new Promise((r) => setTimeout(r, 10));
    const w = recordingWindow(reader);
    await snap
      .chunker(ref, schema)
      .read({ range: {}, limit: 100_000, schema, writeMode: 'append' }, w.window, { low: 'lo', high: 'hi' });
    // Right after the snapshot, the same key again.
    await sql.query("UPDATE wm SET v = 'after' WHERE id = 7");
    // A few more writer transactions after the snapshot, then stop.
    const atRead = written;
    while (written < atRead + 3) await new Promise((r) => setTimeout(r, 5));
    stop = true;
    await writing;
    const at = parseBinlogPosition(w.calls.find((c) => c.role === 'high')!.at!);
    await pump.until(
      () =>
        pump.watermark('hi') !== undefined &&
        pump.events.some(
          (e) =>
            e.rows?.some((r) => r.id === '7') &&
            pump.indexOf('hi') >= 0 &&
            pump.events.indexOf(e) > pump.indexOf('hi'),
        ),
    );
    const mark = pump.watermark('hi')!;
    expect(mark.rowsPos).toBe(
      mysqlPosition(0, binlogFileIndex(at.file), BigInt(at.pos) - 1n, 0).slice(0, 33),
    );
    const chunk = w.rows;
    const values = columnValues(chunk.batch!.record, 'v');
    const ids = columnValues(chunk.batch!.record, 'id').map(String);
    expect(values[ids.indexOf('7')]).toBe('before');
    // Every writer row: in the chunk exactly when its commit came before the watermark.
    const hi = pump.indexOf('hi');
    const inChunk = new Set(ids);
    await pump.until(() => pump.commitOf(String(10_000 + written - 1)) !== undefined);
    for (let i = 0; i < written; i++) {
      const c = pump.commitOf(String(10_000 + i))!;
      expect(c, `writer row ${i}`).toBeDefined();
      expect(
        inChunk.has(String(10_000 + i)),
        `writer row ${i} (commit at event ${c.index}, watermark at ${hi})`,
      ).toBe(c.index < hi);
    }
    // Both sides of the cut are populated: the split is a real one.
    const inside = [...Array(written).keys()].filter((i) => inChunk.has(String(10_000 + i))).length;
    expect(inside).toBeGreaterThanOrEqual(5);
    expect(inside).toBeLessThan(written);
    // rowsPos: strictly after the last change before, strictly before the first change after (key 7).
    const changes7 = pump.events.flatMap((e, i) =>
      (e.rows ?? []).filter((r) => r.id === '7').map((r) => ({ ...r, i })),
    );
    expect(changes7).toHaveLength(2);
    const [before, after] = changes7;
    expect(before!.i).toBeLessThan(hi);
    expect(after!.i).toBeGreaterThan(hi);
    expect(mark.rowsPos > before!.pos).toBe(true);
    expect(`${mark.rowsPos}ffffffff` < after!.pos).toBe(true);
    expect(`${mark.rowsPos}00000000` > before!.pos).toBe(true);
    // Commit events carry the MariaDB GTID.
    expect(pump.events.find((e) => e.kind === 'commit')).toMatchObject({
      txid: expect.stringMatching(/^\d+-\d+-\d+$/),
    });

    // Registered when the reader is already past it: reported at the next call.
    reader.expectWatermark('again', binlogAt(at.file, at.pos));
    const first = await reader.next(50);
    expect(first).toEqual({ kind: 'watermark', id: 'again', rowsPos: mark.rowsPos });

    // An idle server (nothing written from here) right after a binlog rotation, whose new file
    // starts with events no transaction follows: the watermark at the binlog end still comes.
    await sql.query('FLUSH BINARY LOGS');
    const w2 = recordingWindow(reader);
    await snap
      .chunker(ref, schema)
      .read({ range: {}, limit: 10, schema, writeMode: 'append' }, w2.window, { low: 'lo2', high: 'idle' });
    await pump.until(() => pump.watermark('idle') !== undefined, 30_000);
    const at2 = parseBinlogPosition(w2.calls.find((c) => c.role === 'high')!.at!);
    expect(binlogFileIndex(at2.file)).toBeGreaterThan(binlogFileIndex(at.file));
    expect(pump.watermark('idle')!.rowsPos).toBe(
      mysqlPosition(0, binlogFileIndex(at2.file), BigInt(at2.pos) - 1n, 0).slice(0, 33),
    );
  });
});

describe('mysql snapshot: watermark-table mode', () => {
  it('reports low and high in stream order, rowsPos at their transactions', T, async () => {
    await sql.query('CREATE TABLE wt_data (id INT NOT NULL PRIMARY KEY, v VARCHAR(10) NOT NULL)');
    await sql.query("INSERT INTO wt_data SELECT seq, 'seed' FROM seq_1_to_500");
    await sql.query(
      'CREATE TABLE wt_marks (id VARCHAR(64) NOT NULL PRIMARY KEY, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))',
    );
    const s = cdcSource();
    const { ref, schema } = await tableOf(s, 'wt_data');
    // The reader runs before the snapshot source names the watermark table: it starts watching.
    const reader = await startReader(s, ref, schema);
    const snap = await snapshotOf(s, { watermarkTable: `${db.name}.wt_marks`, forceWatermarkTable: true });
    const pump = new Pump(reader, ref.target);
    await sql.query("UPDATE wt_data SET v = 'before' WHERE id = 3");
    const w = recordingWindow(reader);
    await snap
      .chunker(ref, schema)
      .read({ range: {}, limit: 10_000, schema, writeMode: 'append' }, w.window, { low: 'tlo', high: 'thi' });
    await sql.query("UPDATE wt_data SET v = 'after' WHERE id = 3");
    expect(w.calls.map((c) => `${c.kind}${c.role ? `:${c.role}` : ''}`)).toEqual([
      'expect:low',
      'ready',
      'expect:high',
    ]);
    expect(w.calls.every((c) => c.at === undefined)).toBe(true);
    await pump.until(
      () =>
        pump.commitOf('3') !== undefined &&
        pump.events.filter((e) => e.rows?.some((r) => r.id === '3')).length === 2,
    );
    const lo = pump.watermark('tlo');
    const hi = pump.watermark('thi');
    expect(lo).toBeDefined();
    expect(hi).toBeDefined();
    expect(pump.indexOf('tlo')).toBeLessThan(pump.indexOf('thi'));
    expect(lo!.rowsPos < hi!.rowsPos).toBe(true);
    expect(lo!.rowsPos).toHaveLength(33);
    const changes3 = pump.events.flatMap((e, i) =>
      (e.rows ?? []).filter((r) => r.id === '3').map((r) => ({ ...r, i })),
    );
    const [before, after] = changes3;
    expect(before!.i).toBeLessThan(pump.indexOf('tlo'));
    expect(after!.i).toBeGreaterThan(pump.indexOf('thi'));
    expect(`${lo!.rowsPos}00000000` > before!.pos).toBe(true);
    expect(`${hi!.rowsPos}ffffffff` < after!.pos).toBe(true);
    const ids = columnValues(w.rows.batch!.record, 'id').map(String);
    expect(columnValues(w.rows.batch!.record, 'v')[ids.indexOf('3')]).toBe('before');
    expect(ids).toHaveLength(500);
    // The watermark rows are in the table (never a captured table: no rows of it were cut).
    expect((await query<{ id: string }>('SELECT id FROM wt_marks ORDER BY id')).map((r) => r.id)).toEqual([
      'thi',
      'tlo',
    ]);
  });

  it('without a watermark table where one is needed: a clear error', T, async () => {
    const s = cdcSource();
    const snap = await snapshotOf(s, { forceWatermarkTable: true });
    const { ref, schema } = await tableOf(s, 'wt_data');
    const err = await snap
      .chunker(ref, schema)
      .read({ range: {}, limit: 1, schema, writeMode: 'append' }, recordingWindow().window, {
        low: 'a',
        high: 'b',
      })
      .catch((e: unknown) => e);
    expect((err as TidemarkError).code).toBe('CDC_CONFIG');
    const refusal = needsWatermarkTable('sources.src');
    expect(refusal.code).toBe('CDC_SNAPSHOT_NEEDS_WATERMARK_TABLE');
    expect(refusal.message).toContain(
      'CREATE TABLE `tidemark`.`watermarks` (id VARCHAR(64) NOT NULL PRIMARY KEY',
    );
    expect(refusal.message).toContain('cdc.snapshot.watermarkTable: tidemark.watermarks');
  });

  it('a missing watermark table or a missing privilege on it: the statement or GRANT to run', T, async () => {
    const s = cdcSource();
    const { ref, schema } = await tableOf(s, 'wt_data');
    const snap = await snapshotOf(s, { watermarkTable: `${db.name}.nope`, forceWatermarkTable: true });
    const missing = await snap
      .chunker(ref, schema)
      .read({ range: {}, limit: 1, schema, writeMode: 'append' }, recordingWindow().window, {
        low: 'm1',
        high: 'm2',
      })
      .catch((e: unknown) => e);
    expect((missing as TidemarkError).code).toBe('CDC_SNAPSHOT_WATERMARK_TABLE');
    expect((missing as Error).message).toContain(`CREATE TABLE \`${db.name}\`.\`nope\``);

    // An account that may read the data but not write the watermark table.
    const user = `snap_${db.name.slice(-8)}`;
    await sql.query(`CREATE USER '${user}'@'%' IDENTIFIED BY 'pw'`);
    closers.push(async () => {
      await sql.query(`DROP USER IF EXISTS '${user}'@'%'`);
    });
    await sql.query(`GRANT SELECT ON \`${db.name}\`.* TO '${user}'@'%'`);
    const url = new URL(db.url);
    url.username = user;
    url.password = 'pw';
    const limited = new MysqlCdcSource({
      url: url.toString(),
      sourceName: 'sources.src',
      connectTimeoutMs: 10_000,
      heartbeatMs: 1000,
    });
    closers.push(() => limited.close());
    const lsnap = await snapshotOf(limited, {
      watermarkTable: `${db.name}.wt_marks`,
      forceWatermarkTable: true,
    });
    const t = await tableOf(limited, 'wt_data');
    const denied = await lsnap
      .chunker(t.ref, t.schema)
      .read({ range: {}, limit: 1, schema: t.schema, writeMode: 'append' }, recordingWindow().window, {
        low: 'd1',
        high: 'd2',
      })
      .catch((e: unknown) => e);
    expect((denied as TidemarkError).code).toBe('CDC_SNAPSHOT_WATERMARK_TABLE');
    expect((denied as Error).message).toContain(`GRANT INSERT, DELETE ON \`${db.name}\`.\`wt_marks\``);
  });
});
