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
 * 4 and 5 are the capture scenarios every driver runs (./cdc-capture/scenarios.ts) on the MySQL
 * fixture (./cdc-capture/mysql-fixture.ts); 6 loads the shared golden table (../harness/mysql-golden.ts).
 * The binlog is server-wide: each capture filters to its own database, and takes its own server id.
 */
import { join } from 'node:path';
import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binlogPosition } from '../../shared/drivers/mysql/cdc/position.js';
import { MysqlCdcReader } from '../../shared/drivers/mysql/cdc/reader.js';
import { MysqlCdcSource } from '../../shared/drivers/mysql/cdc/source.js';
import { positionAfter } from '../../shared/position/position.js';
import { lakeDiffs, lakePositions, lakeTyped, startedReaders } from '../harness/cdc-capture.js';
import { type FreshDatabase, freshMysqlDatabase } from '../harness/mysql.js';
import {
  lakeLatest,
  lakeRows,
  loadCdcState,
  mysqlCdcSpec,
  mysqlClient,
  serverIds,
  startMysqlCapture,
} from '../harness/mysql-cdc.js';
import { GOLDEN_COLUMNS, GOLDEN_INSERT_COLUMNS, GOLDEN_ROWS } from '../harness/mysql-golden.js';
import { mysqlCaptureFixture } from './cdc-capture/mysql-fixture.js';
import { positionLostScenario, truncateScenarios } from './cdc-capture/scenarios.js';
import { incrementalCopy } from './incremental/fixture.js';

const T = { timeout: 120_000 };

// Every MysqlCdcReader this file's captures start, to read its `seen` counters.
const readers = startedReaders(MysqlCdcReader);
/** Server ids of this file's captures: distinct from each other and from the server's own (1). */
const serverId = serverIds(4000);

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

async function rowsOf<T>(text: string): Promise<T[]> {
  const [rows] = await sql.query(text);
  return rows as T[];
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
      // The key change is a delete of 1 and an insert of 1000: in the current state (an upsert
      // Iceberg table) 1 has no row, 1000 has one.
      expect(lake.has('1')).toBe(false);
      expect(lake.has('1000')).toBe(true);
    },
  );
});

describe('mysql cdc: an idle first run', () => {
  it('commits its start position, so changes made before the next start are captured', T, async () => {
    const d = db.name;
    await sql.query(`CREATE TABLE \`${d}\`.idle (id int PRIMARY KEY)`);
    const { spec, dir } = mysqlCdcSpec(db.url, serverId(), [{ table: `${d}.idle` }]);
    let cap = startMysqlCapture(spec);
    try {
      await cap.until((r) => r[`${d}.idle`] !== undefined, 60_000);
    } finally {
      await cap.stop();
    }
    expect((await loadCdcState(spec)).position?.scheme).toBe('mysql');
    await sql.query('INSERT INTO idle VALUES (1), (2)');
    cap = startMysqlCapture(spec);
    try {
      await cap.until((r) => r[`${d}.idle`] === 2, 60_000);
    } finally {
      await cap.stop();
    }
    expect((await lakePositions(dir, `${d}.idle`, 'id')).map((p) => p.k)).toEqual(['1', '2']);
  });
});

describe('mysql cdc: a backlog of small transactions', () => {
  it(
    'captures every one exactly once (the binlog connection pauses while the engine is behind)',
    T,
    async () => {
      const d = db.name;
      await sql.query(`CREATE TABLE \`${d}\`.bk (id int PRIMARY KEY, v varchar(20))`);
      const { spec, dir } = mysqlCdcSpec(db.url, serverId(), [{ table: `${d}.bk`, writeMode: 'append' }], {
        flushRows: 500,
      });
      const n = 6000;
      const cap = startMysqlCapture(spec);
      try {
        await cap.until((r) => r[`${d}.bk`] !== undefined, 60_000);
        for (let i = 0; i < n; i += 1000)
          await sql.query(
            Array.from(
              { length: 1000 },
              (_, j) => `INSERT INTO bk VALUES (${i + j + 1}, 'v${i + j + 1}')`,
            ).join(';'),
          );
        await cap.until((r) => (r[`${d}.bk`] ?? 0) >= n, 90_000);
      } finally {
        await cap.stop();
      }
      const positions = await lakePositions(dir, `${d}.bk`, 'id');
      expect(positions.length).toBe(n);
      expect(new Set(positions.map((p) => p.k)).size).toBe(n);
      // Commit order is __pos order: ids were inserted ascending, one transaction each.
      expect(positions.map((p) => Number(p.k))).toEqual(Array.from({ length: n }, (_, i) => i + 1));
      const pauses = readers.at(-1)!.pauses;
      console.log(`mysql cdc backlog: the binlog connection paused ${pauses} time(s)`);
    },
  );
});

describe('mysql cdc: stop and restart', () => {
  it('resumes without loss or duplicates: each (pk, __pos) once', T, async () => {
    const d = db.name;
    await sql.query(`CREATE TABLE \`${d}\`.rs (id int PRIMARY KEY, v int)`);
    const { spec, dir } = mysqlCdcSpec(db.url, serverId(), [{ table: `${d}.rs`, writeMode: 'append' }]);
    let changes = 0;
    const work = async (from: number) => {
      for (let i = from; i < from + 20; i++) {
        await sql.query(
          `START TRANSACTION; INSERT INTO rs VALUES (${i}, 0); UPDATE rs SET v = v + 1 WHERE id = ${i}; COMMIT`,
        );
        changes += 2;
      }
      await sql.query(`DELETE FROM rs WHERE id = ${from}`);
      changes += 1;
    };
    let cap = startMysqlCapture(spec);
    try {
      await cap.until((r) => r[`${d}.rs`] !== undefined, 60_000);
      await work(1);
      await cap.until((r) => (r[`${d}.rs`] ?? 0) >= changes, 60_000);
    } finally {
      await cap.stop();
    }
    // Changes while stopped, and changes racing the stop.
    await work(100);
    cap = startMysqlCapture(spec);
    try {
      await work(200);
      await cap.until((r) => (r[`${d}.rs`] ?? 0) >= changes, 60_000);
      await work(300);
      // Stop while rows may be in flight, then restart once more.
    } finally {
      await cap.stop();
    }
    cap = startMysqlCapture(spec);
    try {
      await cap.until((r) => (r[`${d}.rs`] ?? 0) >= changes, 60_000);
    } finally {
      await cap.stop();
    }
    const positions = await lakePositions(dir, `${d}.rs`, 'id');
    const seen = new Set<string>();
    for (const p of positions) {
      const key = `${p.k}@${p.pos}`;
      expect(seen.has(key), key).toBe(false);
      seen.add(key);
    }
    expect(positions.length).toBe(changes);
    const source = await rowsOf<{ id: number; v: number }>('SELECT id, v FROM rs');
    const lake = await lakeLatest(dir, `${d}.rs`, 'id', ['v']);
    expect([...lake.keys()].sort()).toEqual(source.map((s) => String(s.id)).sort());
    for (const s of source) expect(lake.get(String(s.id))!.v).toBe(String(s.v));
  });
});

describe('mysql cdc: a transaction partly durable', () => {
  it(
    'is re-read from its group start with the rows below next skipped; a key changed only in case is a delete plus an insert',
    T,
    async () => {
      const d = db.name;
      await sql.query(
        `CREATE TABLE \`${d}\`.pt (id int PRIMARY KEY, v int); CREATE TABLE \`${d}\`.ck (k varchar(10) COLLATE utf8mb4_unicode_ci PRIMARY KEY, v int)`,
      );
      const [status] = await sql.query('SHOW MASTER STATUS');
      const { File: file, Position: pos } = (status as { File: string; Position: number }[])[0]!;
      await sql.query(`INSERT INTO ck VALUES ('a', 1)`);
      await sql.query(
        `START TRANSACTION; INSERT INTO pt VALUES ${Array.from({ length: 100 }, (_, i) => `(${i + 1}, ${i})`).join(', ')}; UPDATE ck SET k = 'A' WHERE k = 'a'; COMMIT`,
      );
      const read = async (next: Map<string, string>) => {
        const source = new MysqlCdcSource({
          url: db.url,
          sourceName: 'sources.src',
          connectTimeoutMs: 10_000,
          heartbeatMs: 60_000,
        });
        const out = new Map<string, { ids: string[]; pos: string[]; ops: number[] }>();
        try {
          const tables = [];
          for (const t of [`${d}.pt`, `${d}.ck`]) {
            const { ref, schema } = await source.introspect({ source: t });
            tables.push({ ref, schema, writeMode: 'upsert' as const });
          }
          const reader = await source.openReader(tables, { heartbeatMs: 60_000, serverId: serverId() });
          await reader.start({
            position: binlogPosition({ file, pos: Number(pos), gtid: '', server: '1', epoch: 0 }),
            next,
          });
          const deadline = Date.now() + 30_000;
          let commits = 0;
          while (commits < 2 && Date.now() < deadline) {
            const ev = await reader.next(500);
            if (ev?.kind === 'commit') commits++;
          }
          for (const t of tables) {
            const b = reader.cut(t.ref.target);
            const rows = b
              ? b.record.toArray().map((r) => (r as { toJSON(): Record<string, unknown> }).toJSON())
              : [];
            out.set(t.ref.source, {
              ids: rows.map((r) => String(r.id ?? r.k)),
              pos: rows.map((r) => String(r.__pos)),
              ops: rows.map((r) => Number(r.__op)),
            });
          }
          await reader.close();
        } finally {
          await source.close();
        }
        return out;
      };
      const all = await read(new Map());
      const pt = all.get(`${d}.pt`)!;
      expect(pt.ids).toEqual(Array.from({ length: 100 }, (_, i) => String(i + 1)));
      // One transaction: one group start, ordinals 0..99.
      expect(new Set(pt.pos.map((p) => p.slice(0, 33))).size).toBe(1);
      expect(pt.pos.map((p) => Number.parseInt(p.slice(33), 16))).toEqual(
        Array.from({ length: 100 }, (_, i) => i),
      );
      const ck = all.get(`${d}.ck`)!;
      expect(ck.ids).toEqual(['a', 'a', 'A']);
      // Rows 0..41 are durable: the re-read delivers 42..99 only.
      const again = await read(new Map([[`${d}.pt`, positionAfter(pt.pos[41]!)]]));
      expect(again.get(`${d}.pt`)!.ids).toEqual(pt.ids.slice(42));
      expect(again.get(`${d}.pt`)!.pos).toEqual(pt.pos.slice(42));
      expect(again.get(`${d}.ck`)!.ids).toEqual(['a', 'a', 'A']);
    },
  );
});

describe('mysql cdc: ALTER TABLE ADD COLUMN during capture', () => {
  it(
    'keeps values under their names, live and when rows written before the ALTER are replayed after it',
    T,
    async () => {
      const d = db.name;
      await sql.query(`CREATE TABLE \`${d}\`.al (id int PRIMARY KEY, a varchar(10), c int)`);
      const { spec, dir } = mysqlCdcSpec(db.url, serverId(), [{ table: `${d}.al` }]);
      const cap = startMysqlCapture(spec);
      try {
        await cap.until((r) => r[`${d}.al`] !== undefined, 60_000);
        await sql.query(`INSERT INTO al VALUES (1, 'a1', 10)`);
        await cap.until((r) => r[`${d}.al`] === 1, 60_000);
        await sql.query(`ALTER TABLE al ADD COLUMN b int FIRST`);
        await sql.query(`INSERT INTO al (id, a, c, b) VALUES (2, 'a2', 20, 200)`);
        await sql.query(`ALTER TABLE al ADD COLUMN m varchar(10) AFTER a`);
        await sql.query(`INSERT INTO al (id, a, c, b, m) VALUES (3, 'a3', 30, 300, 'm3')`);
        await cap.until((r) => r[`${d}.al`] === 3, 60_000);
      } finally {
        await cap.stop();
      }
      const live = await lakeRows(dir, `${d}.al`, ['id', 'a', 'c', 'b', 'm']);
      expect(live).toEqual([
        { id: '1', a: 'a1', c: '10', b: null, m: null },
        { id: '2', a: 'a2', c: '20', b: '200', m: null },
        { id: '3', a: 'a3', c: '30', b: '300', m: 'm3' },
      ]);
      const state = await loadCdcState(spec);

      // While stopped: a row in the current shape, then ALTERs and rows in the new shapes. A
      // reader opened with today's catalog (the engine would refuse the changed schema at its
      // start: it cannot tell what changed while it was down) replays the first row after both
      // ALTERs are in the catalog: each row decodes under its own TableMap's names.
      await sql.query(`INSERT INTO al (id, a, c, b, m) VALUES (4, 'a4', 40, 400, 'm4')`);
      await sql.query(`ALTER TABLE al ADD COLUMN f int FIRST`);
      await sql.query(`INSERT INTO al (id, a, c, b, m, f) VALUES (5, 'a5', 50, 500, 'm5', 5000)`);
      await sql.query(`ALTER TABLE al ADD COLUMN x varchar(10) AFTER id`);
      await sql.query(`INSERT INTO al (id, a, c, b, m, f, x) VALUES (6, 'a6', 60, 600, 'm6', 6000, 'x6')`);
      const source = new MysqlCdcSource({
        url: db.url,
        sourceName: 'sources.src',
        connectTimeoutMs: 10_000,
        heartbeatMs: 1000,
      });
      const rows: Record<string, unknown>[] = [];
      const schemas: string[][] = [];
      try {
        const { ref, schema } = await source.introspect({ source: `${d}.al` });
        expect(schema.columns.map((c) => c.name)).toEqual(['f', 'b', 'id', 'x', 'a', 'm', 'c']);
        const reader = await source.openReader([{ ref, schema, writeMode: 'upsert' }], {
          heartbeatMs: 1000,
          serverId: serverId(),
        });
        await reader.start({ position: state.position ?? (await reader.initialPosition()), next: new Map() });
        const take = () => {
          const b = reader.cut(ref.target);
          if (!b) return;
          for (const r of b.record.toArray()) {
            const o = (r as { toJSON(): Record<string, unknown> }).toJSON();
            rows.push(
              Object.fromEntries(
                Object.entries(o)
                  .filter(([k]) => !k.startsWith('__'))
                  .map(([k, v]) => [k, v === null ? null : String(v)]),
              ),
            );
          }
        };
        let commits = 0;
        const deadline = Date.now() + 30_000;
        while (commits < 3 && Date.now() < deadline) {
          const ev = await reader.next(500);
          if (ev?.kind === 'schema') {
            take();
            schemas.push(ev.schema.columns.map((c) => c.name));
          }
          if (ev?.kind === 'commit') commits++;
        }
        take();
        await reader.close();
      } finally {
        await source.close();
      }
      expect(rows).toEqual([
        { b: '400', id: '4', a: 'a4', m: 'm4', c: '40' },
        { f: '5000', b: '500', id: '5', a: 'a5', m: 'm5', c: '50' },
        { f: '6000', b: '600', id: '6', x: 'x6', a: 'a6', m: 'm6', c: '60' },
      ]);
      expect(schemas).toEqual([
        ['b', 'id', 'a', 'm', 'c'],
        ['f', 'b', 'id', 'a', 'm', 'c'],
        ['f', 'b', 'id', 'x', 'a', 'm', 'c'],
      ]);
    },
  );
});

const captures = mysqlCaptureFixture(
  () => db,
  () => sql,
  serverId,
);

describe('mysql cdc: TRUNCATE', () => {
  truncateScenarios(captures);

  it('DROP TABLE and RENAME TABLE of captured tables are recorded as ddl events', T, async () => {
    const d = db.name;
    await sql.query(
      `CREATE TABLE \`${d}\`.dr1 (id int PRIMARY KEY); CREATE TABLE \`${d}\`.dr2 (id int PRIMARY KEY); CREATE TABLE \`${d}\`.dr3 (id int PRIMARY KEY)`,
    );
    const { spec } = mysqlCdcSpec(
      db.url,
      serverId(),
      ['dr1', 'dr2', 'dr3'].map((t) => ({ table: `${d}.${t}`, onTruncate: 'record' })),
    );
    const cap = startMysqlCapture(spec);
    try {
      await cap.until((r) => r[`${d}.dr1`] !== undefined, 60_000);
      await sql.query('INSERT INTO dr1 VALUES (1)');
      await cap.until((r) => r[`${d}.dr1`] === 1, 60_000);
      await sql.query('RENAME TABLE dr2 TO dr2_old');
      await sql.query(`ALTER TABLE \`${d}\`.dr3 RENAME TO dr3_old`);
      await sql.query('DROP TABLE IF EXISTS dr1');
      const deadline = Date.now() + 30_000;
      for (;;) {
        const state = await loadCdcState(spec);
        const ddl = (state.events ?? []).filter((e) => e.kind === 'ddl');
        if (ddl.length >= 3) {
          expect(ddl.map((e) => e.table)).toEqual([`${d}.dr2`, `${d}.dr3`, `${d}.dr1`]);
          expect(ddl[0]!.detail).toContain('RENAME TABLE');
          expect(ddl[2]!.detail).toContain('DROP TABLE');
          break;
        }
        if (Date.now() > deadline) throw new Error(`ddl events: ${JSON.stringify(state.events)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      await cap.stop();
    }
  });
});

describe('mysql cdc: binlogs purged while stopped', () => {
  positionLostScenario(captures);
});

// ---------------------------------------------------------------------------------------------
// Every type, both paths

/** Per column: name and MySQL DDL (the golden table, ../harness/mysql-golden.ts, plus more forms). */
const EVERY_TYPE: [name: string, ddl: string][] = [
  ...GOLDEN_COLUMNS.map(([name, ddl]): [string, string] => [name, ddl]),
  ['ch', 'CHAR(5)'],
  ['vb', 'VARBINARY(10)'],
  ['tt', 'TINYTEXT'],
  ['lt', 'LONGTEXT'],
  ['d10', 'DECIMAL(10,2)'],
  ['dt0', 'DATETIME'],
  ['ts3', 'TIMESTAMP(3) NULL'],
  ['tm0', 'TIME'],
  ['b64', 'BIT(64)'],
  ['fmd', 'FLOAT(7,3)'],
  ['dmd', 'DOUBLE(12,4)'],
  ['uu', 'UUID'],
  ['i4', 'INET4'],
  ['i6', 'INET6'],
];
const EXTRA_UPDATES = [
  `UPDATE every_type SET ch = '', vb = X'', tt = '', lt = '', d10 = -99999999.99, dt0 = '1000-01-01 00:00:00',
     ts3 = '1970-01-01 00:00:01.000', tm0 = '-838:59:59', b64 = b'0', fmd = -9999.999, dmd = -99999999.9999,
     uu = '00000000-0000-0000-0000-000000000000', i4 = '0.0.0.0', i6 = '::' WHERE id = 1`,
  `UPDATE every_type SET ch = 'abcde', vb = X'00ff00', tt = 'tiny', lt = REPEAT('x', 70000), d10 = 99999999.99,
     dt0 = '9999-12-31 23:59:59', ts3 = '2038-01-19 03:14:07.999', tm0 = '838:59:59', b64 = 0xFFFFFFFFFFFFFFFF,
     fmd = 9999.999, dmd = 12345678.1234, uu = '123e4567-e89b-12d3-a456-426614174000', i4 = '255.255.255.255',
     i6 = '2001:db8::ff00:42:8329' WHERE id = 2`,
  `UPDATE every_type SET ch = 'a  ', vb = X'00', lt = '😀', d10 = 0, dt0 = '0000-00-00 00:00:00',
     ts3 = '0000-00-00 00:00:00', tm0 = '00:00:00', b64 = b'1', fmd = 0.1, dmd = 0.1, i4 = '10.1.2.3',
     i6 = '::ffff:1.2.3.4' WHERE id = 3`,
];

describe('mysql cdc: every type, CDC lake == incremental lake', () => {
  it('every data column of every row and every Parquet type agree', T, async () => {
    const d = db.name;
    await sql.query(
      `CREATE TABLE \`${d}\`.every_type (${EVERY_TYPE.map(([n, ddl]) => `${n} ${ddl}`).join(', ')})`,
    );
    const { spec, dir } = mysqlCdcSpec(db.url, serverId(), [{ table: `${d}.every_type` }]);
    const cap = startMysqlCapture(spec);
    try {
      await cap.until((r) => r[`${d}.every_type`] !== undefined, 60_000);
      // Zero dates need a session sql_mode that allows them.
      await sql.query(`SET SESSION sql_mode = ''; SET time_zone = '+00:00'`);
      await sql.query(`INSERT INTO every_type (${GOLDEN_INSERT_COLUMNS}) VALUES ${GOLDEN_ROWS}`);
      for (const u of EXTRA_UPDATES) await sql.query(u);
      await sql.query(`SET SESSION sql_mode = DEFAULT; SET time_zone = DEFAULT`);
      await cap.until((r) => (r[`${d}.every_type`] ?? 0) >= 4 + EXTRA_UPDATES.length, 60_000);
    } finally {
      await cap.stop();
    }
    // Every row image went through wire/binlog-rows.ts, none through zongji's parse.
    expect(readers.at(-1)!.seen.rawEvents).toBeGreaterThan(0);
    expect(readers.at(-1)!.seen.zongjiEvents).toBe(0);
    // The incremental path over the same table, into a lake of its own.
    const inc = await incrementalCopy('mysql', db.url, `${d}.every_type`, 'id');
    const summary = inc.summary;
    expect(summary.rows).toBe(4);
    const names = EVERY_TYPE.map(([n]) => n);
    // The latest version per id (deletes dropped), every data column as VARCHAR (in UTC), and the DuckDB types.
    const lakeLatestAll = (lakeDir: string) =>
      lakeTyped(join(lakeDir, `${d}.every_type`, '*.parquet'), 'id', names, {
        latest: true,
        timeZone: 'UTC',
      });
    const cdc = await lakeLatestAll(join(dir, 'lake'));
    const incLake = await lakeLatestAll(inc.lakeDir);
    expect(cdc.types).toEqual(incLake.types);
    expect(Object.keys(cdc.types)).toEqual(names);
    expect([...cdc.rows.keys()]).toEqual(['1', '2', '3', '4']);
    expect(lakeDiffs(cdc, incLake, names, { key: 'id', a: 'cdc', b: 'incremental' })).toEqual([]);
  });
});
