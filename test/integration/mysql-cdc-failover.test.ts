/**
 * Failover of the MySQL/MariaDB binlog reader to another server, on two private MariaDB servers
 * (a primary and a GTID replica with log_slave_updates and gtid_strict_mode):
 *   1. a capture of the primary, stopped; more writes on the primary, replicated; replication
 *      stopped and the capture pointed at the replica, more writes there: the capture resumes on
 *      the replica by GTID in the next coordinate epoch; the lake's latest rows equal the
 *      replica's table, each (pk, __pos) once, post-failover __pos after every earlier one;
 *   2. the same failover when the replica's binlogs no longer hold the position (PURGE):
 *      POSITION_LOST and a gap.
 * Both servers of each pair are stopped by pid in afterAll.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type mysql from 'mysql2/promise';
import { afterAll, describe, expect, it } from 'vitest';
import { parseBinlogPosition } from '../../shared/drivers/mysql/cdc/position.js';
import { mysqlPosition } from '../../shared/position/position.js';
import { captureFailure as failure, lakePositions } from '../harness/cdc-capture.js';
import { type MariaDbServer, startMariaDb } from '../harness/mariadb-server.js';
import {
  lakeLatest,
  loadCdcState,
  mysqlCdcSpec,
  mysqlClient,
  startMysqlCapture,
} from '../harness/mysql-cdc.js';
import { TEMPLATE_ROOT } from '../harness/templates.js';

const T = { timeout: 180_000 };
const DB = 'cdc_fo';
const PASSWORD = 'fo';

const servers: MariaDbServer[] = [];
const clients: mysql.Connection[] = [];
const dirs: string[] = [];
afterAll(async () => {
  for (const c of clients) await c.end().catch(() => undefined);
  // Each private server is stopped by its pid (SIGTERM, then SIGKILL), then its directory removed.
  await Promise.all(servers.map((s) => s.stop()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function server(serverId: number): Promise<{ server: MariaDbServer; sql: mysql.Connection }> {
  const dir = mkdtempSync(join(tmpdir(), `tidemark-myfo-${serverId}-`));
  dirs.push(dir);
  const s = await startMariaDb({
    baseDir: dir,
    password: PASSWORD,
    database: DB,
    templateRoot: TEMPLATE_ROOT,
    serverArgs: [`--server-id=${serverId}`, '--log-slave-updates', '--gtid-strict-mode=1'],
  });
  servers.push(s);
  const sql = await mysqlClient(s.url);
  clients.push(sql);
  return { server: s, sql };
}

/** A primary and a replica of it (GTID replication from an empty position), both running. */
async function pair(base: number) {
  const [primary, replica] = await Promise.all([server(base + 1), server(base + 2)]);
  // The replica's own history (its init file) would clash with the primary's under strict mode.
  await replica.sql.query("RESET MASTER; SET GLOBAL gtid_slave_pos = ''");
  await replica.sql.query(
    `CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = ${primary.server.port}, MASTER_USER = 'root', MASTER_PASSWORD = '${PASSWORD}', MASTER_USE_GTID = slave_pos; START SLAVE`,
  );
  return { primary, replica };
}

async function gtidPos(sql: mysql.Connection): Promise<string> {
  const [rows] = await sql.query('SELECT @@GLOBAL.gtid_binlog_pos AS g');
  return String((rows as { g: string }[])[0]!.g);
}

/** Waits until the replica has applied everything the primary has binlogged, then stops replication. */
async function catchUpAndStop(primary: mysql.Connection, replica: mysql.Connection): Promise<void> {
  const pos = await gtidPos(primary);
  const [rows] = await replica.query(`SELECT MASTER_GTID_WAIT('${pos}', 60) AS w`);
  expect((rows as { w: unknown }[])[0]!.w).toBe(0);
  await replica.query('STOP SLAVE');
}

/** Inserts ids from..from+9, updates each, deletes `from`: 21 changes. */
async function work(sql: mysql.Connection, from: number): Promise<number> {
  for (let i = from; i < from + 10; i++)
    await sql.query(
      `START TRANSACTION; INSERT INTO ${DB}.t VALUES (${i}, 0); UPDATE ${DB}.t SET v = v + ${i} WHERE id = ${i}; COMMIT`,
    );
  await sql.query(`DELETE FROM ${DB}.t WHERE id = ${from}`);
  return 21;
}

const TABLE = `${DB}.t`;
const CAPTURE_ID = 9000 + Math.floor(Math.random() * 1000);

describe('mysql cdc: failover to a replica', () => {
  it('resumes on the replica by GTID in the next epoch, nothing lost or doubled', T, async () => {
    const { primary, replica } = await pair(110);
    await primary.sql.query(`CREATE TABLE ${TABLE} (id int PRIMARY KEY, v int)`);
    const { spec, dir } = mysqlCdcSpec(primary.server.url, CAPTURE_ID, [
      { table: TABLE, writeMode: 'append' },
    ]);
    dirs.push(dir);
    let changes = 0;
    let cap = startMysqlCapture(spec);
    try {
      await cap.until((r) => r[TABLE] !== undefined, 60_000);
      changes += await work(primary.sql, 1);
      await cap.until((r) => (r[TABLE] ?? 0) >= changes, 60_000);
    } finally {
      await cap.stop();
    }
    const before = parseBinlogPosition((await loadCdcState(spec)).position!);
    expect(before).toMatchObject({ server: '111', epoch: 0 });

    changes += await work(primary.sql, 100);
    await catchUpAndStop(primary.sql, replica.sql);
    const moved = mysqlCdcSpec(
      replica.server.url,
      CAPTURE_ID,
      [{ table: TABLE, writeMode: 'append' }],
      {},
      dir,
    );
    changes += await work(replica.sql, 200);

    cap = startMysqlCapture(moved.spec);
    try {
      await cap.until((r) => (r[TABLE] ?? 0) >= changes, 60_000);
    } finally {
      await cap.stop();
    }
    const warned = cap.logs.find((l) => l.includes('the binlog coordinates changed'));
    expect(warned, cap.logs.slice(-10).join('\n')).toBeDefined();
    expect(JSON.parse(warned!)).toMatchObject({ level: 'warn', epoch: 1 });
    const after = parseBinlogPosition((await loadCdcState(moved.spec)).position!);
    expect(after).toMatchObject({ server: '112', epoch: 1 });
    expect((await loadCdcState(moved.spec)).events?.some((e) => e.kind === 'gap') ?? false).toBe(false);

    const positions = (await lakePositions(dir, TABLE)).map((p) => ({ k: Number(p.k), pos: p.pos }));
    expect(positions.length).toBe(changes);
    const seen = new Set<string>();
    for (const p of positions) {
      const key = `${p.k}@${p.pos}`;
      expect(seen.has(key), key).toBe(false);
      seen.add(key);
    }
    // Rows written after the capture stopped on the primary (ids 100..) come either way, but
    // everything from the replica is in epoch 1, sorting after every epoch-0 position.
    const epoch1 = mysqlPosition(1, 0, 0n, 0).slice(0, 9);
    const replicaRows = positions.filter((p) => p.k >= 200);
    expect(replicaRows.length).toBe(21);
    for (const p of replicaRows) expect(p.pos.startsWith(epoch1), p.pos).toBe(true);
    const firstRows = positions.filter((p) => p.k < 100);
    const lastBefore = firstRows
      .map((p) => p.pos)
      .sort()
      .at(-1)!;
    const firstAfter = replicaRows.map((p) => p.pos).sort()[0]!;
    expect(lastBefore < firstAfter).toBe(true);

    const [rows] = await replica.sql.query(`SELECT id, v FROM ${TABLE}`);
    const source = rows as { id: number; v: number }[];
    const lake = await lakeLatest(dir, TABLE, 'id', ['v']);
    expect([...lake.keys()].sort()).toEqual(source.map((s) => String(s.id)).sort());
    for (const s of source) expect(lake.get(String(s.id))!.v).toBe(String(s.v));
  });

  it('stays a POSITION_LOST gap when the replica purged the binlogs holding the position', T, async () => {
    const { primary, replica } = await pair(120);
    await primary.sql.query(`CREATE TABLE ${TABLE} (id int PRIMARY KEY, v int)`);
    const { spec, dir } = mysqlCdcSpec(primary.server.url, CAPTURE_ID + 1, [{ table: TABLE }]);
    dirs.push(dir);
    const cap = startMysqlCapture(spec);
    try {
      await cap.until((r) => r[TABLE] !== undefined, 60_000);
      const n = await work(primary.sql, 1);
      await cap.until((r) => (r[TABLE] ?? 0) >= n, 60_000);
    } finally {
      await cap.stop();
    }
    await work(primary.sql, 100);
    await catchUpAndStop(primary.sql, replica.sql);
    await replica.sql.query('FLUSH BINARY LOGS');
    const [status] = await replica.sql.query('SHOW MASTER STATUS');
    const current = (status as { File: string }[])[0]!.File;
    // MariaDB keeps a binlog until its binlog checkpoint has passed it: purge until it is gone.
    for (let i = 0; ; i++) {
      await replica.sql.query(`PURGE BINARY LOGS TO '${current}'`);
      const [logs] = await replica.sql.query('SHOW BINARY LOGS');
      if ((logs as { Log_name: string }[])[0]!.Log_name === current) break;
      if (i > 100) throw new Error(`the binlogs before ${current} could not be purged`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const moved = mysqlCdcSpec(replica.server.url, CAPTURE_ID + 1, [{ table: TABLE }], {}, dir);
    const again = startMysqlCapture(moved.spec);
    const e = await failure(again);
    expect(e).toMatchObject({ code: 'POSITION_LOST' });
    const gaps = (await loadCdcState(moved.spec)).events?.filter((x) => x.kind === 'gap') ?? [];
    expect(gaps.length).toBe(1);
    expect(gaps[0]!.detail).toContain('1236');
    expect(gaps[0]!.detail).toContain('GTID');
  });
});
