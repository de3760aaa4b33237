/**
 * MariaDB's side of the snapshot contract (snapshot-scenarios.ts): a fresh database on the
 * shared harness MariaDB, a CDC source and its snapshot source (2 connections) to take chunkers
 * from, key cases under utf8mb4_general_ci (whose order is not JavaScript's), a chunk read's one
 * watermark (high, after `ready`, at the consistent snapshot's binlog position), and the refusal
 * of a table without a primary key. The CDC and snapshot sources the MariaDB-only tests open
 * come from here too, so `drop` closes them all.
 */
import fc from 'fast-check';
import type mysql from 'mysql2/promise';
import { expect } from 'vitest';
import { TidemarkError } from '../../../shared/contracts/errors.js';
import { parseBinlogPosition } from '../../../shared/drivers/mysql/cdc/position.js';
import { MysqlCdcSource } from '../../../shared/drivers/mysql/cdc/source.js';
import type { MysqlSnapshotOptions, MysqlSnapshotSource } from '../../../shared/drivers/mysql/snapshot.js';
import { MysqlSource } from '../../../shared/drivers/mysql/source.js';
import { type FreshDatabase, freshMysqlDatabase } from '../../harness/mysql.js';
import { mysqlClient } from '../../harness/mysql-cdc.js';
import { CLOCK_MS } from './fixture.js';
import type { SnapshotFixture } from './snapshot-fixture.js';

export type MysqlSnapshotFixture = SnapshotFixture & {
  readonly db: FreshDatabase;
  /** The test's own client (several statements per query, big numbers and dates as strings). */
  readonly sql: mysql.Connection;
  /** A CDC source on the test database, closed by `drop`. */
  cdcSource(): MysqlCdcSource;
  /** A snapshot source of `s` (2 connections, the fixed clock), closed by `drop`. */
  snapshotOf(
    s: MysqlCdcSource,
    opts?: Pick<MysqlSnapshotOptions, 'watermarkTable' | 'forceWatermarkTable'>,
  ): Promise<MysqlSnapshotSource>;
  /** Runs `close` when the fixture drops (in reverse order of registration). */
  onDrop(close: () => Promise<void>): void;
};

/** The MySQL snapshot fixture: database `mysnap_*` on the shared harness MariaDB; `setUp` creates it. */
export function mysqlSnapshotFixture(): MysqlSnapshotFixture {
  let db: FreshDatabase | undefined;
  let sql: mysql.Connection | undefined;
  let cdc: MysqlCdcSource | undefined;
  let snap: MysqlSnapshotSource | undefined;
  const closers: (() => Promise<void>)[] = [];
  const need = <T>(x: T | undefined): T => {
    if (x === undefined) throw new Error('the MySQL snapshot fixture is not set up (beforeAll)');
    return x;
  };
  const cdcSource = () => {
    const s = new MysqlCdcSource({
      url: need(db).url,
      sourceName: 'sources.src',
      connectTimeoutMs: 10_000,
      heartbeatMs: 1000,
    });
    closers.push(() => s.close());
    return s;
  };
  const snapshotOf = async (
    s: MysqlCdcSource,
    opts: Pick<MysqlSnapshotOptions, 'watermarkTable' | 'forceWatermarkTable'> = {},
  ) => {
    const sn = await s.openSnapshot({ connections: 2, ...opts, clock: () => CLOCK_MS });
    closers.push(() => sn.close());
    return sn;
  };
  /** A key case: `INSERT IGNORE` of `row(key)` into the emptied table. */
  const fillWith =
    (table: string, columns: string, row: (k: readonly unknown[]) => unknown[]) =>
    async (keys: readonly (readonly unknown[])[]) => {
      await need(sql).query(`DELETE FROM ${table}`);
      if (keys.length > 0)
        await need(sql).query(`INSERT IGNORE INTO ${table} (${columns}) VALUES ?`, [keys.map(row)]);
    };
  // One read per range: the limit is past the bound's row count.
  const sizes = fc.integer({ min: 1, max: 40 }).map((rows) => ({ rows, limit: rows + 3 }));
  return {
    kind: 'mysql',
    keyCases: [
      {
        name: 'int key',
        table: 'bk0',
        ddl: 'CREATE TABLE bk0 (id INT NOT NULL PRIMARY KEY, v VARCHAR(10))',
        keys: fc
          .uniqueArray(fc.integer({ min: -5000, max: 5000 }), { maxLength: 250 })
          .map((ks) => ks.map((k) => [k])),
        fill: fillWith('bk0', 'id, v', (k) => [k[0], 'x']),
        sizes,
      },
      {
        name: 'utf8mb4_general_ci varchar key',
        table: 'bk1',
        ddl: 'CREATE TABLE bk1 (k VARCHAR(12) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, v INT)',
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
        fill: fillWith('bk1', 'k, v', (k) => [k[0], 1]),
        sizes,
      },
      {
        name: 'composite (varchar, int) key',
        table: 'bk2',
        ddl: 'CREATE TABLE bk2 (a VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, b INT NOT NULL, v INT, PRIMARY KEY (a, b))',
        keys: fc.array(
          fc.tuple(
            fc.string({ unit: fc.constantFrom('a', 'A', 'á', 'b', 'B', 'c'), minLength: 1, maxLength: 2 }),
            fc.integer({ min: -20, max: 20 }),
          ),
          { maxLength: 250 },
        ),
        fill: fillWith('bk2', 'a, b, v', (k) => [k[0], k[1], 1]),
        sizes,
      },
    ],
    async setUp() {
      db = await freshMysqlDatabase('mysnap');
      sql = await mysqlClient(db.url);
      cdc = cdcSource();
      snap = await snapshotOf(cdc);
    },
    get db() {
      return need(db);
    },
    get sql() {
      return need(sql);
    },
    cdcSource,
    snapshotOf,
    onDrop(close) {
      closers.push(close);
    },
    get schema() {
      return need(db).name;
    },
    async exec(text) {
      await need(sql).query(text);
    },
    async query(text) {
      return (await need(sql).query(text))[0] as Record<string, unknown>[];
    },
    async tableOf(name) {
      const { ref, schema } = await need(cdc).introspect({ source: `${need(db).name}.${name}` });
      return { ref, schema, chunker: need(snap).chunker(ref, schema) };
    },
    incrementalSource() {
      const inc = new MysqlSource({ url: need(db).url, lagMs: 10_000, clock: () => CLOCK_MS });
      closers.push(() => inc.close());
      return inc;
    },
    pageRetries: 60,
    estimatesUnanalyzed: true,
    chunkPage: {
      table: 'ty',
      ddl: `
        CREATE TABLE ty (id BIGINT NOT NULL PRIMARY KEY, s VARCHAR(20), d DECIMAL(12,3), f DOUBLE, t DATETIME(6),
          ts TIMESTAMP(6) NULL, j JSON, b BLOB, dt DATE, u TINYINT UNSIGNED);
        SET time_zone = '+00:00';
        INSERT INTO ty VALUES
          (1, 'héllo', 123.456, 1.5, '2024-01-02 03:04:05.123456', '2024-05-06 07:08:09.5', '{"a": [1, 2]}', x'00ff', '2020-02-29', 255),
          (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
          (3, '', -0.001, -2e300, '1970-01-01 00:00:00', '2038-01-19 03:14:07', 'null', x'', '1000-01-01', 0)`,
      rows: 3,
      expectWindow(w, ids) {
        // MariaDB: no low watermark; the high one at the snapshot's binlog position.
        expect(w.calls.map((c) => `${c.kind}${c.role ? `:${c.role}` : ''}`)).toEqual([
          'ready',
          'expect:high',
        ]);
        expect(w.calls[1]!.id).toBe(ids.high);
        const at = parseBinlogPosition(w.calls[1]!.at!);
        expect(at.file).toMatch(/\.\d+$/);
        expect(at.pos).toBeGreaterThan(4);
      },
    },
    noKey: {
      table: 'nopk',
      ddl: 'CREATE TABLE nopk (a INT, b INT)',
      error: TidemarkError,
      code: 'SNAPSHOT_KEY_MISSING',
      says: [/no primary key/],
    },
    async drop() {
      for (const c of closers.reverse()) await c().catch(() => undefined);
      await sql?.end();
      await db?.drop();
    },
  };
}
