/**
 * The MySQL snapshot chunker (shared/drivers/mysql/snapshot.ts) and the reader's watermarks
 * (shared/drivers/mysql/cdc/reader.ts `expectWatermark`) on the harness MariaDB. The contract
 * every driver's chunker keeps (bounds and chunks partition int, utf8mb4_general_ci VARCHAR and
 * composite keys exactly in the database's order; a chunk equals an incremental page; a table
 * without a primary key is refused) runs from driver-contract/snapshot-scenarios.ts on
 * mysql-snapshot-fixture.ts; this file adds what only MySQL has:
 *   a. the keyset predicates MariaDB runs as a primary-key range (EXPLAIN);
 *   b. with a running reader: the high watermark at the snapshot's binlog position splits the
 *      concurrent transactions exactly as the chunk saw them; rowsPos sorts between the last
 *      change before and the first after on the same key; a watermark registered after the
 *      reader passed it, and one on an idle server, are reported without further writes;
 *   c. the watermark-table mode (forced on MariaDB): low and high events, rowsPos ordering, and
 *      its refusals.
 */
import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CdcEvent } from '../../shared/contracts/cdc.js';
import type { TidemarkError } from '../../shared/contracts/errors.js';
import type { TableRef } from '../../shared/contracts/source.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { binlogAt, parseBinlogPosition } from '../../shared/drivers/mysql/cdc/position.js';
import type { MysqlCdcReader } from '../../shared/drivers/mysql/cdc/reader.js';
import { MysqlCdcSource } from '../../shared/drivers/mysql/cdc/source.js';
import { type MysqlChunker, needsWatermarkTable } from '../../shared/drivers/mysql/snapshot.js';
import { binlogFileIndex, mysqlPosition } from '../../shared/position/position.js';
import type { FreshDatabase } from '../harness/mysql.js';
import { mysqlClient } from '../harness/mysql-cdc.js';
import { mysqlSnapshotFixture } from './driver-contract/mysql-snapshot-fixture.js';
import { column, recordingWindow, T } from './driver-contract/snapshot-fixture.js';
import { snapshotContractScenarios } from './driver-contract/snapshot-scenarios.js';

let nextServerId = 7000 + Math.floor(Math.random() * 100_000) * 10;

const fx = mysqlSnapshotFixture();
let db: FreshDatabase;
let sql: mysql.Connection;
const cdcSource = () => fx.cdcSource();
const snapshotOf = fx.snapshotOf;

beforeAll(async () => {
  await fx.setUp();
  ({ db, sql } = fx);
});
afterAll(async () => {
  await fx.drop();
});

async function query<R>(text: string, values: unknown[] = []): Promise<R[]> {
  const [rows] = await sql.query(text, values);
  return rows as R[];
}

async function tableOf(s: MysqlCdcSource, name: string): Promise<{ ref: TableRef; schema: Schema }> {
  const { ref, schema } = await s.introspect({ source: `${db.name}.${name}` });
  return { ref, schema };
}

snapshotContractScenarios('mariadb', fx);

describe('mysql snapshot: bounds and chunks', () => {
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
        const ids = b ? column(b.record, 'id').map(String) : [];
        const pos = b ? column(b.record, '__pos').map(String) : [];
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
    fx.onDrop(() => writer.end());
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
      .read({ range: {}, limit: 100_000, schema, writeMode: 'append' }, w, { low: 'lo', high: 'hi' });
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
    const chunk = w.rows!;
    const values = column(chunk.batch!.record, 'v');
    const ids = column(chunk.batch!.record, 'id').map(String);
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
      .read({ range: {}, limit: 10, schema, writeMode: 'append' }, w2, { low: 'lo2', high: 'idle' });
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
      .read({ range: {}, limit: 10_000, schema, writeMode: 'append' }, w, { low: 'tlo', high: 'thi' });
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
    const ids = column(w.rows!.batch!.record, 'id').map(String);
    expect(column(w.rows!.batch!.record, 'v')[ids.indexOf('3')]).toBe('before');
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
      .read({ range: {}, limit: 1, schema, writeMode: 'append' }, recordingWindow(), {
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
      .read({ range: {}, limit: 1, schema, writeMode: 'append' }, recordingWindow(), {
        low: 'm1',
        high: 'm2',
      })
      .catch((e: unknown) => e);
    expect((missing as TidemarkError).code).toBe('CDC_SNAPSHOT_WATERMARK_TABLE');
    expect((missing as Error).message).toContain(`CREATE TABLE \`${db.name}\`.\`nope\``);

    // An account that may read the data but not write the watermark table.
    const user = `snap_${db.name.slice(-8)}`;
    await sql.query(`CREATE USER '${user}'@'%' IDENTIFIED BY 'pw'`);
    fx.onDrop(async () => {
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
    fx.onDrop(() => limited.close());
    const lsnap = await snapshotOf(limited, {
      watermarkTable: `${db.name}.wt_marks`,
      forceWatermarkTable: true,
    });
    const t = await tableOf(limited, 'wt_data');
    const denied = await lsnap
      .chunker(t.ref, t.schema)
      .read({ range: {}, limit: 1, schema: t.schema, writeMode: 'append' }, recordingWindow(), {
        low: 'd1',
        high: 'd2',
      })
      .catch((e: unknown) => e);
    expect((denied as TidemarkError).code).toBe('CDC_SNAPSHOT_WATERMARK_TABLE');
    expect((denied as Error).message).toContain(`GRANT INSERT, DELETE ON \`${db.name}\`.\`wt_marks\``);
  });
});
