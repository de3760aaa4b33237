/**
 * The MySQL/MariaDB driver against a real server (a private harness MariaDB). The contract it
 * shares with every driver (introspection, row path == batch path on random tables, keyset
 * paging, NULL and zero-date cursors, the safe upper bound, refusals) runs from
 * driver-contract/scenarios.ts on mysql-fixture.ts; this file adds what only MySQL has: values
 * that stay exact past JavaScript's numbers (BIGINT UNSIGNED keys, DECIMAL(65,30) cursors), text
 * cursors under a NO_BACKSLASH_ESCAPES server, identifiers needing backticks, schema changes
 * between pages as the result-set field check sees them, invalid calendar dates, INNODB_TRX's
 * stale listing, and the throughput of both read paths.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RecordBatch } from 'apache-arrow';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataError } from '../../shared/contracts/errors.js';
import type { TableRef } from '../../shared/contracts/source.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { SchemaChangedError } from '../../shared/dataplane/schema-rules.js';
import type { MysqlSource, MysqlSourceOptions } from '../../shared/drivers/mysql/source.js';
import { incrementalPosPrefix } from '../../shared/position/position.js';
import { startMariaDb } from '../harness/mariadb-server.js';
import type { FreshDatabase } from '../harness/mysql.js';
import { TEMPLATE_ROOT } from '../harness/templates.js';
import { page1, walkBoth as walkBothPaths } from './driver-contract/fixture.js';
import { mysqlDriverFixture, QUOTED_NAMES } from './driver-contract/mysql-fixture.js';
import { driverContractScenarios } from './driver-contract/scenarios.js';

const fx = mysqlDriverFixture();
let db: FreshDatabase;
let admin: mysql.Connection;
const source = (opts: Partial<MysqlSourceOptions> = {}) => fx.source(opts);
/** walkBoth, reading a pair again while the bound moved between its two reads (fixture.ts). */
const walkBoth = (src: MysqlSource, ref: TableRef, schema: Schema, cursorColumn: string, pageSize: number) =>
  walkBothPaths(src, ref, schema, cursorColumn, pageSize, fx.rereads);

beforeAll(async () => {
  await fx.setUp();
  db = fx.db;
  admin = fx.admin;
});

afterAll(async () => {
  await fx.drop();
});

driverContractScenarios('mariadb', fx);

describe('keyset paging', () => {
  it('pages a BIGINT UNSIGNED key up to 2^64-1 and a DECIMAL(65,30) cursor exactly', async () => {
    await admin.query(`
      CREATE TABLE wide (id BIGINT UNSIGNED PRIMARY KEY, amount DECIMAL(65,30) NOT NULL, INDEX (amount));
      INSERT INTO wide VALUES (18446744073709551615, '0.000000000000000000000000000001'), (18446744073709551614, '0.000000000000000000000000000001'),
        (9007199254740993, '0.000000000000000000000000000002'), (9007199254740992, '99999999999999999999999999999999999.999999999999999999999999999999'),
        (0, '-99999999999999999999999999999999999.999999999999999999999999999999')`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: `${db.name}.wide` });
    const walked = await walkBoth(src, ref, schema, 'amount', 1);
    expect(walked.rows.map((r) => r.id)).toEqual([
      '0',
      '18446744073709551614',
      '18446744073709551615',
      '9007199254740993',
      '9007199254740992',
    ]);
    expect(walked.rows[0]!.amount).toBe(
      '-99999999999999999999999999999999999.999999999999999999999999999999',
    );
    const byId = await walkBoth(src, ref, schema, 'id', 2);
    expect(byId.rows.map((r) => r.id)).toEqual([
      '0',
      '9007199254740992',
      '9007199254740993',
      '18446744073709551614',
      '18446744073709551615',
    ]);
  });

  it('pages a text cursor holding quotes, backslashes and unicode through both paths, under NO_BACKSLASH_ESCAPES too', async () => {
    const names = QUOTED_NAMES;
    const walkQuoted = async (src: MysqlSource, database: string, conn: mysql.Connection) => {
      const { ref, schema } = await src.introspect({ source: `${database}.quoted` });
      const walked = await walkBoth(src, ref, schema, 'name', 1);
      const [expected] = await conn.query('SELECT name FROM quoted ORDER BY name');
      expect(walked.rows.map((r) => r.name)).toEqual((expected as { name: string }[]).map((r) => r.name));
      expect(walked.rows).toHaveLength(names.length);
    };
    // The walk on this file's server is the contract's (driver-contract/scenarios.ts). A server whose GLOBAL sql_mode has NO_BACKSLASH_ESCAPES: a private MariaDB, because
    // changing the shared harness server's global mode would break other test files' clients
    // running at the same time (mysql2 escapes parameters with backslashes).
    const dir = mkdtempSync(join(tmpdir(), 'tidemark-nobs-'));
    const server = await startMariaDb({
      baseDir: dir,
      password: 'nobs',
      database: 'nobs',
      templateRoot: TEMPLATE_ROOT,
    });
    const conn = await mysql.createConnection({ uri: server.url, multipleStatements: true });
    try {
      await conn.query('CREATE TABLE quoted (name VARCHAR(40) PRIMARY KEY, note INT)');
      await conn.query('INSERT INTO quoted VALUES ?', [names.map((name, note) => [name, note])]);
      await conn.query("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',NO_BACKSLASH_ESCAPES')");
      const src = source({ url: server.url }); // a new connection: takes the global sql_mode
      const [[mode]] = (await (
        await mysql.createConnection({ uri: server.url })
      ).query('SELECT @@SESSION.sql_mode AS m')) as unknown as [[{ m: string }]];
      expect(mode.m).toContain('NO_BACKSLASH_ESCAPES');
      await walkQuoted(src, 'nobs', conn);
    } finally {
      await conn.end();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('quotes table and column names holding backticks, question marks, spaces and unicode', async () => {
    await admin.query(
      'CREATE TABLE `we?ird``name` (`Ïd ``x`` ?` INT PRIMARY KEY, `up dated?` DATETIME(6) NOT NULL, `v?` TEXT, INDEX (`up dated?`))',
    );
    await admin.query(
      "INSERT INTO `we?ird``name` VALUES (1, '2020-01-01 00:00:00', 'a'), (2, '2020-01-01 00:00:00', 'b'), (3, '2019-01-01 00:00:00', '?')",
    );
    const src = source();
    const { ref, schema, warnings } = await src.introspect({
      source: `${db.name}.we?ird\`name`,
      cursorColumn: 'up dated?',
    });
    expect(warnings).toEqual([]);
    expect(schema.columns.map((c) => c.name)).toEqual(['Ïd `x` ?', 'up dated?', 'v?']);
    expect(await src.countNullCursors(ref, 'up dated?')).toBe(0);
    const walked = await walkBoth(src, ref, schema, 'up dated?', 1);
    expect(walked.rows.map((r) => r['v?'])).toEqual(['?', 'a', 'b']);
  });
});

describe('schema changes between pages (issue 9: never silent, never a wrong value)', () => {
  const SCHEMA_TABLE = (name: string) => `
      CREATE TABLE ${name} (id INT PRIMARY KEY, updated_at DATETIME(6) NOT NULL, c INT, note VARCHAR(20), INDEX (updated_at, id));
      INSERT INTO ${name} VALUES (1, '2024-01-01 00:00:00', 5, '1234'), (2, '2024-01-01 00:00:01', 7, '5678')`;

  /** Introspects `name` (target lake.<name>) and reads its first page of one row through the batch path. */
  async function firstPage(name: string) {
    const src = source();
    const { ref, schema } = await src.introspect({
      source: `${db.name}.${name}`,
      target: `lake.${name}`,
      cursorColumn: 'updated_at',
    });
    const p1 = await src.incrementalBatch({ ...page1(ref, 'updated_at', 1), schema, writeMode: 'append' });
    expect(p1.page!.record.numRows).toBe(1);
    expect(p1.more).toBe(true);
    const req2 = { ...page1(ref, 'updated_at', 1), after: p1.next, posPrefix: incrementalPosPrefix(2, 1) };
    return { src, ref, schema, req2 };
  }

  /** The page's rejection: SCHEMA_CHANGED for the target, found between pages, on one line. */
  async function schemaChanged(p: Promise<unknown>, table: string): Promise<SchemaChangedError> {
    const e = await p.then(
      (got) => got,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(SchemaChangedError);
    const sc = e as SchemaChangedError;
    expect(sc.code).toBe('SCHEMA_CHANGED');
    expect(sc.table).toBe(table);
    expect(sc.where).toBe('page');
    expect(sc.message).not.toContain('\n');
    return sc;
  }

  // Mutation check: with the result-set comparison disabled (checkResultFields returning at
  // once), page 2 here resolves with a batch (row 2, c = 7 in an Int32 column) instead of
  // rejecting; page 3 then is, on the row path, a row map holding c = 5000000000 for an int32
  // schema column, and on the batch path a DataError from the encoder ("value 5000000000 does
  // not fit column "c" (int32)"): no SCHEMA_CHANGED anywhere.
  it('stops a page whose column went INT -> BIGINT since introspection, through both paths, and never returns a batch', async () => {
    await admin.query(SCHEMA_TABLE('sc_int'));
    const { src, ref, schema, req2 } = await firstPage('sc_int');
    await admin.query(
      "ALTER TABLE sc_int MODIFY c BIGINT; INSERT INTO sc_int VALUES (3, '2024-01-01 00:00:02', 5000000000, '1')",
    );
    const batch = await schemaChanged(
      src.incrementalBatch({ ...req2, schema, writeMode: 'append' }),
      'lake.sc_int',
    );
    expect(batch.changes).toMatchObject([{ kind: 'widened', column: 'c' }]);
    expect(batch.message).toContain(
      'column "c" widened from int(11) (lake int32) to bigint(20) (lake int64)',
    );
    expect(batch.message).toContain(
      'column "c": the result set now says LONGLONG where introspection saw LONG (INT -> BIGINT?)',
    );
    const rows = await schemaChanged(src.incremental(req2), 'lake.sc_int');
    expect(rows.changes.map((c) => c.kind)).toEqual(['widened']);

    // The refused statement was drained: the same connection introspects again, and the new
    // plan reads the changed column exactly.
    const again = await src.introspect({ source: `${db.name}.sc_int`, target: 'lake.sc_int' });
    expect(again.schema.columns.find((c) => c.name === 'c')!.type).toEqual({ kind: 'int64' });
    const p2 = await src.incremental({ ...req2, table: again.ref });
    expect(p2.page).toMatchObject([{ id: 2, c: 7n }]);
    const p3 = await src.incremental({ ...req2, table: again.ref, after: p2.next, pageSize: 10 });
    expect(p3.page).toMatchObject([{ id: 3, c: 5_000_000_000n }]);
    expect(ref.target).toBe('lake.sc_int');
  });

  it('stops a page whose column was dropped (1054) or whose table is gone (1146)', async () => {
    await admin.query(SCHEMA_TABLE('sc_drop'));
    const { src, schema, req2 } = await firstPage('sc_drop');
    await admin.query('ALTER TABLE sc_drop DROP COLUMN note');
    const batch = await schemaChanged(
      src.incrementalBatch({ ...req2, schema, writeMode: 'append' }),
      'lake.sc_drop',
    );
    expect(batch.changes).toMatchObject([{ kind: 'dropped', column: { name: 'note' } }]);
    expect(batch.message).toContain('column "note" varchar(20) is gone');
    expect(batch.message).toMatch(/the server says: Unknown column 'src.note'/);
    await schemaChanged(src.incremental(req2), 'lake.sc_drop');

    await admin.query('RENAME TABLE sc_drop TO sc_dropped');
    const gone = await schemaChanged(src.incremental(req2), 'lake.sc_drop');
    expect(gone.message).toMatch(/sc_drop' doesn't exist/);
  });

  it('stops a page whose VARCHAR column now holds INT values', async () => {
    await admin.query(SCHEMA_TABLE('sc_swap'));
    const { src, schema, req2 } = await firstPage('sc_swap');
    await admin.query('ALTER TABLE sc_swap MODIFY note INT');
    const batch = await schemaChanged(
      src.incrementalBatch({ ...req2, schema, writeMode: 'append' }),
      'lake.sc_swap',
    );
    expect(batch.changes).toMatchObject([{ kind: 'type-changed', column: 'note' }]);
    expect(batch.message).toContain(
      'column "note" changed type from varchar(20) (lake text) to int(11) (lake int32)',
    );
    expect(batch.message).toContain(
      'the result set now says LONG where introspection saw VAR_STRING (VARCHAR -> INT?)',
    );
    await schemaChanged(src.incremental(req2), 'lake.sc_swap');
  });

  it('raises no false alarm: every type, many pages, a new connection, and changes the decoder does not see', async () => {
    await admin.query(`
      CREATE TABLE sc_same (id INT PRIMARY KEY, updated_at DATETIME(6) NOT NULL, ti TINYINT(1), iu INT UNSIGNED, bu BIGINT UNSIGNED,
        d DECIMAL(12,3), d65 DECIMAL(65,30), f FLOAT, fd FLOAT(10,4), db DOUBLE, bt BIT(10), y YEAR, dt DATE, ts TIMESTAMP(6) NULL, tm TIME(3),
        c CHAR(4), vc VARCHAR(20) CHARACTER SET latin1, vb VARCHAR(20) COLLATE utf8mb4_bin, tx TEXT, bn BINARY(3), bl BLOB, j JSON,
        e ENUM('a','b'), st SET('x','y'), u UUID, g BIGINT AS (id * 2) VIRTUAL, INDEX (updated_at, id));
      INSERT INTO sc_same (id, updated_at, ti, iu, bu, d, d65, f, fd, db, bt, y, dt, ts, tm, c, vc, vb, tx, bn, bl, j, e, st, u)
      SELECT n, TIMESTAMP'2024-01-01 00:00:00' + INTERVAL n SECOND, n % 2, n, n, n / 7, n / 3, n / 9, n / 11, n / 13, n, 2000 + n,
             DATE'2024-01-01' + INTERVAL n DAY, TIMESTAMP'2024-01-01 00:00:00' + INTERVAL n MINUTE, SEC_TO_TIME(n), 'c', CONCAT('vé', n),
             CONCAT('B', n), REPEAT('t', n), X'010203', UNHEX(HEX(n)), JSON_OBJECT('n', n), IF(n % 2, 'a', 'b'), 'x,y',
             '123e4567-e89b-12d3-a456-426614174000'
      FROM (SELECT a.n + 10 * b.n + 1 AS n FROM
              (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
              (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2) b) s`);
    const src = source();
    const { ref, schema } = await src.introspect({
      source: `${db.name}.sc_same`,
      cursorColumn: 'updated_at',
    });
    const ids = Array.from({ length: 30 }, (_, i) => i + 1);
    expect((await walkBoth(src, ref, schema, 'updated_at', 4)).rows.map((r) => r.id)).toEqual(ids);
    // A new connection (same session setup) describes the same columns the same way.
    await src.close();
    expect((await walkBoth(src, ref, schema, 'updated_at', 7)).rows.map((r) => r.id)).toEqual(ids);
    // Real changes that read the same bytes into the same lake type (a longer VARCHAR, a binary
    // collation, more fractional digits of TIME) are not the page guard's to stop: the run
    // start compares the schema (schema-rules.ts) and warns.
    await admin.query(
      'ALTER TABLE sc_same MODIFY vc VARCHAR(200) CHARACTER SET latin1, MODIFY c CHAR(40) COLLATE utf8mb4_bin, MODIFY tm TIME(6)',
    );
    expect((await walkBoth(src, ref, schema, 'updated_at', 9)).rows.map((r) => r.id)).toEqual(ids);
  });
});

describe('values a lake cannot hold', () => {
  it('refuses an invalid calendar date (ALLOW_INVALID_DATES) naming the column, and the connection stays usable', async () => {
    await admin.query(`
      SET SESSION sql_mode = 'ALLOW_INVALID_DATES';
      CREATE TABLE bad_date (id INT PRIMARY KEY, d DATE, t DATETIME);
      INSERT INTO bad_date VALUES (1, '2024-02-28', '2024-02-28 00:00:00'), (2, '2024-02-30', '2024-02-28 00:00:00'), (3, '2024-01-01', '2023-02-29 12:00:00');
      SET SESSION sql_mode = DEFAULT`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: `${db.name}.bad_date` });
    const req = page1(ref, 'id', 10);
    await expect(src.incremental(req)).rejects.toThrow(DataError);
    await expect(src.incremental(req)).rejects.toThrow(
      new RegExp(`${db.name}\\.bad_date\\.d: '2024-02-30' is not a calendar date`),
    );
    await expect(src.incrementalBatch({ ...req, schema, writeMode: 'append' })).rejects.toThrow(
      /bad_date\.d: '2024-02-30' is not a calendar date/,
    );
    await admin.query('UPDATE bad_date SET d = NULL WHERE id = 2');
    await expect(src.incrementalBatch({ ...req, schema, writeMode: 'append' })).rejects.toThrow(
      /bad_date\.t: .*2023-02-29/,
    );
    // The connection is still usable after a refused page: the stream was drained.
    await admin.query('DELETE FROM bad_date WHERE id = 3');
    const ok = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
    expect(ok.page!.record.numRows).toBe(2);
  });
});

describe('safe upper bound', () => {
  it('never trusts a stale INNODB_TRX listing: while another session keeps it from refreshing, the page is held, and the late commit is read later', async () => {
    await admin.query(`
      CREATE TABLE staled (id INT AUTO_INCREMENT PRIMARY KEY, updated_at DATETIME(6) NOT NULL DEFAULT NOW(6), note TEXT, INDEX (updated_at, id));
      INSERT INTO staled (note, updated_at) VALUES ('old', NOW(6) - INTERVAL 1 HOUR)`);
    const src = source({ lagMs: 0, stallAfterMs: 0 });
    const { ref } = await src.introspect({ source: `${db.name}.staled`, cursorColumn: 'updated_at' });
    // InnoDB refills the listing only after 100 ms without reads: a reader every 25 ms freezes it.
    const poller = await mysql.createConnection({ uri: db.url });
    const writer = await mysql.createConnection({ uri: db.url });
    let polling = true;
    let polls = 0;
    const loop = (async () => {
      while (polling) {
        await poller.query('SELECT COUNT(*) FROM information_schema.INNODB_TRX');
        polls++;
        await new Promise((r) => setTimeout(r, 25));
      }
    })();
    try {
      await new Promise((r) => setTimeout(r, 300));
      await writer.query('BEGIN');
      await writer.query("INSERT INTO staled (note) VALUES ('late')"); // not in the frozen listing
      // Committed just after the late row's cursor, and old enough for any lag-free bound.
      await admin.query("INSERT INTO staled (note) VALUES ('after-1'), ('after-2')");
      await new Promise((r) => setTimeout(r, 400));
      const pollsBefore = polls;
      const req = page1(ref, 'updated_at');
      const held = await src.incremental(req);
      // A bound from the frozen listing would let after-1 and after-2 in, and the late row's
      // older cursor would then be behind the token for good.
      expect(held.page.map((r) => r.note)).not.toContain('after-1');
      expect(held.page).toEqual([]);
      // The freeze really lasted through the read (the poller kept reading meanwhile).
      expect(polls).toBeGreaterThan(pollsBefore + 10);
      expect(held.warnings?.map((w) => w.message).join('\n')).toMatch(/INNODB_TRX was not refreshed/);

      polling = false;
      await loop;
      await writer.query('COMMIT');
      const notes: unknown[] = [];
      let token = held.next;
      for (let seq = 2, deadline = Date.now() + 60_000; notes.length < 4 && Date.now() < deadline; seq++) {
        const r = { ...req, after: token, pageSize: 10, posPrefix: incrementalPosPrefix(seq, 1) };
        const rows = await src.incremental(r);
        notes.push(...rows.page.map((x) => x.note));
        token = rows.next;
        if (rows.page.length === 0) await new Promise((done) => setTimeout(done, 200));
      }
      expect(notes).toEqual(['old', 'late', 'after-1', 'after-2']);
    } finally {
      polling = false;
      await loop.catch(() => undefined);
      await writer.query('ROLLBACK').catch(() => undefined);
      await writer.end();
      await poller.end();
    }
  });
});

describe('throughput (measured, logged)', () => {
  it('reads 200,000 rows through both paths, batch path first', async () => {
    const digits =
      '(SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)';
    await admin.query(`
      CREATE TABLE bench (id BIGINT PRIMARY KEY, v INT NOT NULL, amount DECIMAL(12,2), note VARCHAR(100), updated_at DATETIME(6) NOT NULL,
                          f DOUBLE, INDEX (updated_at, id));
      INSERT INTO bench SELECT g, g % 1000, g / 7, CONCAT('note ', g, ' ', REPEAT('x', g % 20)),
                               TIMESTAMP'2024-01-01 00:00:00' + INTERVAL g * 1000 MICROSECOND, g * 1.1
      FROM (SELECT 1 + a.n + 10 * b.n + 100 * c.n + 1000 * d.n + 10000 * e.n + 100000 * f.n AS g
            FROM ${digits} a, ${digits} b, ${digits} c, ${digits} d, ${digits} e, ${digits} f) s WHERE g <= 200000`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: `${db.name}.bench`, cursorColumn: 'updated_at' });
    const run = async (batch: boolean) => {
      let after = '';
      let rows = 0;
      const started = performance.now();
      for (let seq = 1; ; seq++) {
        const req = {
          table: ref,
          cursorColumn: 'updated_at',
          after,
          pageSize: 50_000,
          posPrefix: incrementalPosPrefix(seq, 1),
          ordinalBase: 0,
        };
        const r = batch
          ? await src.incrementalBatch({ ...req, schema, writeMode: 'append' })
          : await src.incremental(req);
        rows += batch
          ? ((r.page as { record: RecordBatch } | undefined)?.record.numRows ?? 0)
          : (r.page as unknown[]).length;
        after = r.next;
        if (!r.more) break;
      }
      return { rows, rowsPerSecond: Math.round(rows / ((performance.now() - started) / 1000)) };
    };
    await run(true); // warm up the server's buffer pool and the JIT
    const batch = await run(true);
    const rowPath = await run(false);
    console.log(
      `[mysql driver] 200k rows, pages of 50k: batch path ${batch.rowsPerSecond} rows/s, row path ${rowPath.rowsPerSecond} rows/s`,
    );
    expect(batch.rows).toBe(200_000);
    expect(rowPath.rows).toBe(200_000);

    // Aborted mid-stream: the page rejects, the connection is dropped, the next page reconnects.
    const controller = new AbortController();
    const req = {
      table: ref,
      cursorColumn: 'updated_at',
      after: '',
      pageSize: 200_000,
      posPrefix: incrementalPosPrefix(1, 1),
      ordinalBase: 0,
    };
    const aborted = src.incrementalBatch({ ...req, schema, writeMode: 'append', signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    await expect(aborted).rejects.toThrow(/abort/i);
    const after = await src.incrementalBatch({ ...req, pageSize: 10, schema, writeMode: 'append' });
    expect(after.page!.record.numRows).toBe(10);
  });
});
