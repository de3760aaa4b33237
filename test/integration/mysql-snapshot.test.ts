/**
 * Snapshots on the real harness MariaDB (docs/decisions/0013-snapshots.md): a table's existing
 * rows loaded by consistent-snapshot chunks while the binlog streams, checked against the table.
 *
 * - 200,000 rows snapshotted with 2 connections while a writer inserts, updates and DELETES
 *   rows all over the key range: the lake ends equal to the table.
 * - A table added to a running pipeline (a second start with one more table) is snapshotted,
 *   the first one is not again.
 * - A watermark table configured: MariaDB still cuts at its exact snapshot position and writes
 *   nothing into the source (the table's own mode is tested on the driver, forced).
 */
import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FreshDatabase, freshMysqlDatabase } from '../harness/mysql.js';
import {
  lakeHas,
  lakeLatest,
  loadCdcState,
  mysqlCdcSpec,
  mysqlClient,
  startMysqlCapture,
} from '../harness/mysql-cdc.js';

let nextServerId = 7000 + Math.floor(Math.random() * 100_000) * 10;
const serverId = () => nextServerId++;

let db: FreshDatabase;
let sql: mysql.Connection;
beforeAll(async () => {
  db = await freshMysqlDatabase('mysnap');
  sql = await mysqlClient(db.url);
  await sql.query('SET SESSION max_recursive_iterations = 10000000');
});
afterAll(async () => {
  await sql?.end();
  await db?.drop();
});

async function waitFor(what: string, f: () => Promise<boolean>, ms: number, logs: string[]): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > deadline)
      throw new Error(`${what} did not happen in ${ms} ms; logs:\n${logs.slice(-15).join('\n')}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

async function expectLakeEqualsTable(dir: string, table: string, target: string): Promise<void> {
  const [rows] = await sql.query(`SELECT CAST(id AS CHAR) AS id, v FROM ${table}`);
  const source = rows as { id: string; v: string }[];
  const lake = await lakeLatest(dir, target, 'id', ['v']);
  expect(lake.size).toBe(source.length);
  let wrong = 0;
  for (const r of source) if (lake.get(r.id)?.v !== r.v) wrong++;
  expect(wrong).toBe(0);
}

/** Small transactions over the key range until `done()`; returns what it did. */
async function writer(
  table: string,
  n: number,
  done: () => Promise<boolean>,
): Promise<{ deletes: number; ops: number }> {
  let x = 17;
  let deletes = 0;
  let ops = 0;
  let inserted = n;
  while (!(await done())) {
    await sql.query('START TRANSACTION');
    for (let i = 0; i < 10; i++) {
      x = (x * 48271) % 2147483647;
      const id = 1 + (x % n);
      const kind = x % 3;
      if (kind === 0) await sql.query(`UPDATE ${table} SET v = ? WHERE id = ?`, [`u${ops}`, id]);
      else if (kind === 1) {
        const [r] = await sql.query(`DELETE FROM ${table} WHERE id = ?`, [id]);
        deletes += (r as { affectedRows: number }).affectedRows;
      } else await sql.query(`INSERT IGNORE INTO ${table} VALUES (?, ?)`, [++inserted, `i${ops}`]);
      ops++;
    }
    await sql.query('COMMIT');
  }
  return { deletes, ops };
}

describe('mysql snapshots', () => {
  it('snapshots 200,000 rows with 2 connections while a writer inserts, updates and deletes; the lake equals the table', {
    timeout: 600_000,
  }, async () => {
    const N = 200_000;
    await sql.query('CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(40))');
    await sql.query(
      `INSERT INTO big WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${N}) SELECT i, CONCAT('v', i) FROM s`,
    );
    const target = `${db.name}.big`;
    const { spec, dir } = mysqlCdcSpec(
      db.url,
      serverId(),
      [{ table: `${db.name}.big`, snapshot: 'initial' }],
      {
        snapshot: { chunkRows: 20_000, connections: 2 },
      },
    );
    const cap = startMysqlCapture(spec);
    await cap.until((r) => r[target] !== undefined, 120_000);
    const w = await writer(
      `big`,
      N,
      async () => (await loadCdcState(spec)).tables[target]?.snapshot?.state === 'complete',
    );
    expect(w.deletes).toBeGreaterThan(0);
    await sql.query(`INSERT INTO big VALUES (0, 'end')`);
    await waitFor(
      'the end marker in the lake',
      () => lakeHas(dir, target, "id = 0 AND v = 'end'"),
      300_000,
      cap.logs,
    );
    await cap.stop();
    const s = (await loadCdcState(spec)).tables[target]?.snapshot;
    expect(s?.state).toBe('complete');
    expect(s?.chunks).toBeGreaterThanOrEqual(N / 20_000);
    await expectLakeEqualsTable(dir, 'big', target);
  });

  it('a table added to a running pipeline is snapshotted; the one already captured is not again', {
    timeout: 300_000,
  }, async () => {
    await sql.query('CREATE TABLE first_t (id INT PRIMARY KEY, v VARCHAR(40))');
    await sql.query('CREATE TABLE added_t (id INT PRIMARY KEY, v VARCHAR(40))');
    await sql.query(`INSERT INTO first_t VALUES (1, 'a'), (2, 'b')`);
    await sql.query(`INSERT INTO added_t VALUES (1, 'x'), (2, 'y'), (3, 'z')`);
    const id = serverId();
    const one = mysqlCdcSpec(db.url, id, [{ table: `${db.name}.first_t`, snapshot: 'initial' }]);
    const first = `${db.name}.first_t`;
    const added = `${db.name}.added_t`;
    let cap = startMysqlCapture(one.spec);
    await cap.until(() => true, 120_000);
    await waitFor(
      'the first snapshot',
      async () => (await loadCdcState(one.spec)).tables[first]?.snapshot?.state === 'complete',
      120_000,
      cap.logs,
    );
    await cap.stop();
    const two = mysqlCdcSpec(
      db.url,
      id,
      [
        { table: `${db.name}.first_t`, snapshot: 'initial' },
        { table: `${db.name}.added_t`, snapshot: 'initial' },
      ],
      {},
      one.dir,
    );
    cap = startMysqlCapture(two.spec);
    await waitFor(
      'the added table snapshot',
      async () => (await loadCdcState(two.spec)).tables[added]?.snapshot?.state === 'complete',
      120_000,
      cap.logs,
    );
    await cap.stop();
    const state = await loadCdcState(two.spec);
    expect(state.tables[first]?.snapshot?.rows).toBe(2);
    expect(state.tables[first]?.snapshot?.chunks).toBe(1);
    expect(state.tables[added]?.snapshot?.rows).toBe(3);
    await expectLakeEqualsTable(one.dir, 'added_t', added);
    expect(cap.logs.some((l) => l.includes('tables added to the capture'))).toBe(true);
  });

  it('with a watermark table configured, MariaDB still cuts at its snapshot position: nothing is written to the source, the lake equals the table', {
    timeout: 300_000,
  }, async () => {
    const N = 20_000;
    await sql.query('CREATE TABLE wm_t (id INT PRIMARY KEY, v VARCHAR(40))');
    await sql.query(
      'CREATE TABLE tidemark_watermarks (id VARCHAR(64) PRIMARY KEY, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))',
    );
    await sql.query(
      `INSERT INTO wm_t WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${N}) SELECT i, CONCAT('v', i) FROM s`,
    );
    const target = `${db.name}.wm_t`;
    const { spec, dir } = mysqlCdcSpec(
      db.url,
      serverId(),
      [{ table: `${db.name}.wm_t`, snapshot: 'initial' }],
      {
        snapshot: { chunkRows: 2000, connections: 2, watermarkTable: `${db.name}.tidemark_watermarks` },
      },
    );
    const cap = startMysqlCapture(spec);
    await cap.until((r) => r[target] !== undefined, 120_000);
    await writer(
      'wm_t',
      N,
      async () => (await loadCdcState(spec)).tables[target]?.snapshot?.state === 'complete',
    );
    await sql.query(`INSERT INTO wm_t VALUES (0, 'end')`);
    await waitFor(
      'the end marker in the lake',
      () => lakeHas(dir, target, "id = 0 AND v = 'end'"),
      120_000,
      cap.logs,
    );
    await cap.stop();
    await expectLakeEqualsTable(dir, 'wm_t', target);
    // The watermark table is for servers without a snapshot position (MySQL 8); its mode is
    // tested on the driver (mysql-snapshot-driver.test.ts, forced).
    const [marks] = await sql.query('SELECT count(*) AS n FROM tidemark_watermarks');
    expect(Number((marks as { n: number }[])[0]!.n)).toBe(0);
  });
});
