/**
 * The MySQL/MariaDB binlog reader on the real harness MariaDB (ROW binlog, FULL row image and
 * FULL row metadata), through the CDC engine, the lake read back with DuckDB:
 *   1. inserts, updates, deletes and a primary-key change captured live, a multi-table
 *      transaction, rolled-back transactions absent; the lake's latest version per key equals
 *      the tables;
 *   2. stop and restart: resumes without loss or duplicates (once per (pk, __pos));
 *   3. ALTER TABLE ADD COLUMN (FIRST and in the middle), live and replayed after a restart:
 *      values stay under the right names;
 *   4. TRUNCATE under onTruncate record / fail;
 *   5. binlogs purged while stopped: POSITION_LOST and a gap in the state;
 *   6. one table with every type of docs/types.md, synced by incremental and by CDC: identical
 *      data columns.
 * The binlog is server-wide: each capture filters to its own database, and takes its own server id.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSpec } from '../../shared/config/spec.js';
import { type FreshDatabase, freshMysqlDatabase } from '../harness/mysql.js';
import {
  type Capture,
  lakeLatest,
  lakeRows,
  loadCdcState,
  mysqlCdcSpec,
  mysqlClient,
  startMysqlCapture,
} from '../harness/mysql-cdc.js';
import { runOnce } from './incremental/fixture.js';

const T = { timeout: 120_000 };
/** Server ids of this file's captures: distinct from each other and from the server's own (1). */
let nextServerId = 4000 + Math.floor(Math.random() * 100_000) * 10;
const serverId = () => nextServerId++;

let db: FreshDatabase;
let sql: mysql.Connection;
beforeAll(async () => {
  db = await freshMysqlDatabase('mycdc');
  sql = await mysqlClient(db.url);
});
afterAll(async () => {
  await sql?.end();
  await db?.drop();
});

/** The capture's error, or a failure when it is still running after `ms`. */
async function failure(cap: Capture, ms = 60_000): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'running'>((r) => {
    timer = setTimeout(() => r('running'), ms);
  });
  try {
    const r = await Promise.race([
      cap.done.then(
        () => 'ended' as const,
        (e: unknown) => ({ e }),
      ),
      timeout,
    ]);
    if (r === 'running') {
      await cap.stop().catch(() => undefined);
      throw new Error(`the capture was expected to fail but was still running after ${ms} ms`);
    }
    if (r === 'ended') throw new Error('the capture was expected to fail but ended normally');
    return r.e;
  } finally {
    clearTimeout(timer);
  }
}

async function rowsOf<T>(text: string): Promise<T[]> {
  const [rows] = await sql.query(text);
  return rows as T[];
}

/** Every (key, __pos) of a lake table. */
async function lakePositions(
  dir: string,
  table: string,
  key: string,
): Promise<{ k: string; pos: string; op: string }[]> {
  const inst = await DuckDBInstance.create(':memory:');
  const conn = await inst.connect();
  try {
    const r = await conn.runAndReadAll(
      `SELECT CAST("${key}" AS VARCHAR) AS k, __pos AS pos, __op AS op FROM read_parquet('${join(dir, 'lake', table, '*.parquet')}', union_by_name = true) ORDER BY __pos`,
    );
    return r.getRowObjects().map((o) => ({ k: String(o.k), pos: String(o.pos), op: String(o.op) }));
  } finally {
    conn.closeSync();
  }
}

describe('mysql cdc: live changes', () => {
  it(
    'captures inserts, updates, deletes, a key change and a multi-table transaction; rollbacks are absent',
    T,
    async () => {
      const d = db.name;
      await sql.query(
        `CREATE TABLE \`${d}\`.orders (id int PRIMARY KEY, note varchar(40), amount decimal(12,2), at timestamp(6) NULL, r float);
       CREATE TABLE \`${d}\`.items (id int PRIMARY KEY, order_id int, qty bigint unsigned)`,
      );
      const { spec, dir } = mysqlCdcSpec(db.url, serverId(), [
        { table: `${d}.orders` },
        { table: `${d}.items` },
      ]);
      const cap = startMysqlCapture(spec);
      try {
        await cap.until((r) => r[`${d}.orders`] !== undefined, 60_000);
        const values = Array.from(
          { length: 100 },
          (_, i) => `(${i + 1}, 'n${i + 1}', ${(i + 1) * 1.5}, '2024-01-02 03:04:05.123456', 0.1)`,
        );
        await sql.query(`INSERT INTO orders VALUES ${values.join(', ')}`);
        await sql.query(`UPDATE orders SET note = 'changed' WHERE id % 10 = 0`);
        await sql.query(`DELETE FROM orders WHERE id % 7 = 0`);
        await sql.query(`UPDATE orders SET id = 1000 WHERE id = 1`);
        // Rolled back: never in the lake.
        await sql.query(
          `START TRANSACTION; INSERT INTO orders VALUES (5000, 'rolled back', 1, NULL, 1); INSERT INTO items VALUES (5000, 5000, 1); ROLLBACK`,
        );
        // One transaction over both tables.
        await sql.query(
          `START TRANSACTION; INSERT INTO items VALUES (1, 2, 18446744073709551615), (2, 2, 1); UPDATE orders SET note = 'has items' WHERE id = 2; DELETE FROM items WHERE id = 2; COMMIT`,
        );
        const total = 100 + 10 + 14 + 2 + 1;
        await cap.until((r) => (r[`${d}.orders`] ?? 0) >= total && (r[`${d}.items`] ?? 0) >= 3, 60_000);
      } finally {
        await cap.stop();
      }
      const source = await rowsOf<{ id: number; note: string; amount: string; at: string; r: number }>(
        'SELECT id, note, amount, at, r + 0e0 AS r FROM orders',
      );
      const lake = await lakeLatest(dir, `${d}.orders`, 'id', ['note', 'amount', 'at', 'r']);
      expect([...lake.keys()].sort()).toEqual(source.map((s) => String(s.id)).sort());
      for (const s of source) {
        const l = lake.get(String(s.id))!;
        expect(l.note).toBe(s.note);
        expect(l.amount).toBe(s.amount);
        expect(Number(l.r)).toBe(Number(s.r));
        expect(String(l.at)).toContain('2024-01-02 03:04:05.123456');
      }
      const items = await lakeLatest(dir, `${d}.items`, 'id', ['order_id', 'qty']);
      expect([...items.entries()].map(([k, v]) => [k, v.order_id, v.qty])).toEqual([
        ['1', '2', '18446744073709551615'],
      ]);
      // Nothing rolled back ever appears, in any version.
      const all = await lakeRows(dir, `${d}.orders`, ['id']);
      expect(all.some((r) => r.id === '5000')).toBe(false);
      expect((await lakeRows(dir, `${d}.items`, ['id'])).some((r) => r.id === '5000')).toBe(false);
      // The multi-table transaction's rows share one group start: same __pos prefix in both tables.
      const op = (await lakePositions(dir, `${d}.orders`, 'id')).filter((p) => p.k === '2').at(-1)!;
      const ip = (await lakePositions(dir, `${d}.items`, 'id')).filter((p) => p.k === '1');
      expect(op.pos.slice(0, 33)).toBe(ip[0]!.pos.slice(0, 33));
      // The key change is a delete of 1 and an insert of 1000.
      const ones = (await lakePositions(dir, `${d}.orders`, 'id')).filter((p) => p.k === '1');
      expect(ones.at(-1)!.op).toBe('d');
    },
  );
});
