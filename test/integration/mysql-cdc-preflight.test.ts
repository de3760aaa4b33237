/**
 * The MySQL/MariaDB binlog preflight (shared/drivers/mysql/cdc/preflight.ts) on real MariaDB
 * servers: the harness's (set up for CDC, except what it does not set, reported as found), two
 * private servers set up wrong on purpose (STATEMENT format + MINIMAL row metadata + 1 hour of
 * binlog; no binlog + MINIMAL row image + compressed binlog), and an account without the
 * replication grants: each shows its fail line naming the setting and the fix. Through
 * `tidemark check` (checkPipeline), a mysql source's cdc tables get these lines instead of
 * CDC_NOT_CHECKED. MySQL 8, RDS and Aurora are covered by test/unit/mysql-cdc-preflight.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSpec, type Spec } from '../../shared/config/spec.js';
import type { CheckItem } from '../../shared/contracts/check.js';
import { preflightCdcSource, preflightCdcTable } from '../../shared/drivers/mysql/cdc/preflight.js';
import { MysqlConnection } from '../../shared/drivers/mysql/connect.js';
import { checkPipeline } from '../../shared/pipeline/check.js';
import { type MariaDbServer, startMariaDb } from '../harness/mariadb-server.js';
import { type FreshDatabase, freshMysqlDatabase } from '../harness/mysql.js';
import { TEMPLATE_ROOT } from '../harness/templates.js';

/** High enough not to meet the harness's server (1) or another test file's binlog reader. */
const SERVER_ID = 3_000_000_000 + Math.floor(Math.random() * 1_000_000);
const OPTS = { serverId: SERVER_ID, binlogRetentionHours: 24 };

let db: FreshDatabase;
let admin: mysql.Connection;
const sessions: MysqlConnection[] = [];
const servers: MariaDbServer[] = [];
const dirs: string[] = [];
const users: string[] = [];

function session(url: string): MysqlConnection {
  const s = new MysqlConnection({ url, sourceName: 'sources.my' });
  sessions.push(s);
  return s;
}

function byCheck(items: readonly CheckItem[]): Record<string, CheckItem> {
  return Object.fromEntries(items.map((i) => [i.check, i]));
}

async function privateServer(name: string, serverArgs: string[]): Promise<MariaDbServer> {
  const dir = mkdtempSync(join(tmpdir(), `tidemark-mypf-${name}-`));
  dirs.push(dir);
  const server = await startMariaDb({
    baseDir: dir,
    password: 'pf',
    database: 'pf',
    templateRoot: TEMPLATE_ROOT,
    serverArgs,
  });
  servers.push(server);
  return server;
}

beforeAll(async () => {
  db = await freshMysqlDatabase('cdc_pf');
  admin = await mysql.createConnection({ uri: db.url, multipleStatements: true });
  await admin.query(
    'CREATE TABLE keyed (id INT PRIMARY KEY, note VARCHAR(20)); CREATE TABLE nokey (id INT, note VARCHAR(20)); CREATE VIEW v AS SELECT id FROM keyed',
  );
});

afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => undefined);
  for (const u of users) await admin?.query(`DROP USER IF EXISTS ${u}`).catch(() => undefined);
  await admin?.end();
  await db?.drop();
  // Each private server is stopped by its pid (SIGTERM, then SIGKILL), then its directory removed.
  await Promise.all(servers.map((s) => s.stop()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('MySQL CDC preflight on MariaDB', () => {
  it('the harness server: every line ok except the settings the harness does not make (reported as they are)', async () => {
    const [[vars]] = (await admin.query(
      'SELECT @@binlog_row_metadata AS meta, @@gtid_domain_id AS domain',
    )) as unknown as [[{ meta: string; domain: number }]];
    const lines = await preflightCdcSource(session(db.url), OPTS);
    expect(lines.map((l) => l.check)).toEqual([
      'log_bin',
      'binlog_format',
      'binlog_row_image',
      'binlog_row_metadata',
      'binlog_compression',
      'gtid',
      'server_id',
      'replication',
      'binlog_retention',
      'snapshot',
    ]);
    const at = byCheck(lines);
    // What the harness sets (log-bin, ROW, FULL image) and MariaDB's defaults (no compression,
    // GTIDs, binlogs that never expire), and root's grants.
    for (const check of [
      'log_bin',
      'binlog_format',
      'binlog_row_image',
      'binlog_compression',
      'gtid',
      'replication',
      'binlog_retention',
      'snapshot',
    ]) {
      expect(at[check], check).toMatchObject({ status: 'ok' });
    }
    expect(at.gtid!.message).toContain(`MariaDB GTIDs are always on: gtid_domain_id ${vars.domain}`);
    expect(at.binlog_retention!.message).toContain('binlogs never expire');
    expect(at.replication!.message).toContain('(ALL PRIVILEGES)');
    // root may list the replicas; another test file's binlog reader may be connected.
    expect(at.server_id!.status).toBe('ok');
    expect(at.server_id!.message).toContain(
      `serverId ${SERVER_ID} differs from the server's own @@server_id 1`,
    );
    // The harness does not set binlog_row_metadata (MariaDB's default is NO_LOG): reported, with the fix.
    if (vars.meta === 'FULL') {
      expect(at.binlog_row_metadata).toMatchObject({ status: 'ok' });
    } else {
      expect(at.binlog_row_metadata).toMatchObject({ status: 'fail', code: 'CDC_BINLOG_ROW_METADATA' });
      expect(at.binlog_row_metadata!.message).toContain(`binlog_row_metadata is ${vars.meta}`);
      expect(at.binlog_row_metadata!.message).toContain("run SET GLOBAL binlog_row_metadata = 'FULL';");
    }
    // The server's own id is refused.
    const own = byCheck(await preflightCdcSource(session(db.url), { ...OPTS, serverId: 1 }));
    expect(own.server_id).toMatchObject({ status: 'fail', code: 'CDC_SERVER_ID' });
    expect(own.server_id!.message).toContain("serverId 1 is the server's own @@server_id");
    expect(own.server_id!.message).toContain('unique among all replicas of the primary');
  });

  it('a server with STATEMENT format, MINIMAL row metadata and 1 hour of binlog: three fail lines with their fixes', async () => {
    const server = await privateServer('stmt', [
      '--binlog-format=STATEMENT',
      '--binlog-row-metadata=MINIMAL',
      '--binlog-expire-logs-seconds=3600',
      '--binlog-ignore-db=audit',
    ]);
    const tables = [
      { source: 'pf.orders', insertOnly: false },
      { source: 'audit.log', insertOnly: false },
    ];
    const lines = await preflightCdcSource(session(server.url), { ...OPTS, tables });
    expect(lines.filter((l) => l.status !== 'ok').map((l) => [l.check, l.status, l.code])).toEqual([
      ['binlog_format', 'fail', 'CDC_BINLOG_FORMAT'],
      ['binlog_row_metadata', 'fail', 'CDC_BINLOG_ROW_METADATA'],
      ['binlog_retention', 'fail', 'CDC_BINLOG_RETENTION'],
      ['binlog_filter', 'fail', 'CDC_BINLOG_FILTERED'],
    ]);
    const at = byCheck(lines);
    expect(at.binlog_format!.message).toContain(
      "binlog_format is STATEMENT: CDC reads row events, and STATEMENT logs statements, whose rows are not in the binlog; run SET GLOBAL binlog_format = 'ROW'; and put binlog_format = ROW under [mariadb] in my.cnf",
    );
    expect(at.binlog_row_metadata!.message).toContain('binlog_row_metadata is MINIMAL');
    expect(at.binlog_row_metadata!.message).toContain('ADD COLUMN ... FIRST');
    expect(at.binlog_retention!.message).toContain(
      'binlog_expire_logs_seconds is 3600 (1 hours), less than binlogRetentionHours 24',
    );
    expect(at.binlog_retention!.message).toContain('SET GLOBAL binlog_expire_logs_seconds = 86400;');
    expect(at.binlog_filter!.message).toContain(
      '(binlog-ignore-db=audit), so no change of database "audit" is ever logged',
    );

    // Fixed as the lines say, they pass.
    const conn = await mysql.createConnection({ uri: server.url });
    try {
      await conn.query(
        "SET GLOBAL binlog_format = 'ROW', binlog_row_metadata = 'FULL', binlog_expire_logs_seconds = 86400",
      );
    } finally {
      await conn.end();
    }
    const fixed = await preflightCdcSource(session(server.url), { ...OPTS, tables: [tables[0]!] });
    expect(fixed.filter((l) => l.status !== 'ok')).toEqual([]);
    expect(fixed.at(-1)).toMatchObject({ check: 'binlog_filter', status: 'ok' });
  });

  it('a server without a binlog, with MINIMAL row images and a compressed binlog: each fails with its fix', async () => {
    const server = await privateServer('nobin', [
      '--skip-log-bin',
      '--binlog-row-image=MINIMAL',
      '--log-bin-compress',
    ]);
    const at = byCheck(await preflightCdcSource(session(server.url), OPTS));
    expect(at.log_bin).toMatchObject({ status: 'fail', code: 'CDC_LOG_BIN' });
    expect(at.log_bin!.message).toContain('log_bin is OFF: the server writes no binlog');
    expect(at.log_bin!.message).toContain('under [mariadb] in my.cnf and restart the server');
    expect(at.binlog_row_image).toMatchObject({ status: 'fail', code: 'CDC_BINLOG_ROW_IMAGE' });
    expect(at.binlog_row_image!.message).toContain(
      'binlog_row_image is MINIMAL: an UPDATE or DELETE then logs only some columns',
    );
    expect(at.binlog_row_image!.message).toContain("SET GLOBAL binlog_row_image = 'FULL';");
    expect(at.binlog_compression).toMatchObject({ status: 'fail', code: 'CDC_BINLOG_COMPRESSION' });
    expect(at.binlog_compression!.message).toContain('log_bin_compress is ON');
    expect(at.binlog_compression!.message).toContain('SET GLOBAL log_bin_compress = OFF;');
  });

  it('an account without replication grants: the exact GRANT; with them, ok; replicas it cannot list are a warning', async () => {
    const user = `pf_${SERVER_ID % 1_000_000}`;
    const account = `'${user}'@'%'`;
    users.push(account);
    await admin.query(`CREATE USER ${account} IDENTIFIED BY 'pw'`);
    await admin.query(`GRANT SELECT ON \`${db.name}\`.* TO ${account}`);
    const url = new URL(db.url);
    url.username = user;
    url.password = 'pw';
    const bare = byCheck(await preflightCdcSource(session(url.toString()), OPTS));
    expect(bare.replication).toMatchObject({ status: 'fail', code: 'CDC_REPLICATION_PRIVILEGE' });
    expect(bare.replication!.message).toContain(
      `lacks REPLICATION SLAVE and BINLOG MONITOR, which reading the binlog needs`,
    );
    expect(bare.replication!.message).toContain(
      `run GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO ${account};`,
    );
    // SHOW SLAVE HOSTS needs REPLICATION MASTER ADMIN on MariaDB: the replicas are not verified.
    expect(bare.server_id).toMatchObject({ status: 'warn', code: 'CDC_SERVER_ID_UNVERIFIED' });

    // REPLICATION CLIENT is BINLOG MONITOR's alias on MariaDB 10.5+.
    await admin.query(`GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO ${account}`);
    const granted = byCheck(await preflightCdcSource(session(url.toString()), OPTS));
    expect(granted.replication).toMatchObject({ status: 'ok' });
    expect(granted.replication!.message).toBe(`${account} has REPLICATION SLAVE and BINLOG MONITOR`);
  });

  it('table lines: exists with its columns, a primary key or writeMode append; a view is refused', async () => {
    const s = session(db.url);
    const t = (table: string, writeMode: 'append' | 'upsert') => ({
      source: `${db.name}.${table}`,
      insertOnly: false,
      writeMode,
    });
    const keyed = await preflightCdcTable(s, t('keyed', 'upsert'));
    expect(keyed.map((l) => [l.check, l.status])).toEqual([
      ['table', 'ok'],
      ['key', 'ok'],
    ]);
    expect(keyed[0]!.message).toBe('exists, and this account may SELECT from it (2 columns)');
    expect(keyed[1]!.message).toContain('primary key (id)');
    expect((await preflightCdcTable(s, t('nokey', 'append')))[1]).toMatchObject({ status: 'ok' });
    const nokey = (await preflightCdcTable(s, t('nokey', 'upsert')))[1]!;
    expect(nokey).toMatchObject({ status: 'fail', code: 'CDC_NO_PRIMARY_KEY' });
    expect(nokey.message).toContain('add a PRIMARY KEY, or set writeMode: append');
    expect(await preflightCdcTable(s, t('v', 'append'))).toEqual([
      expect.objectContaining({ check: 'table', status: 'fail', code: 'CDC_NOT_CAPTURABLE' }),
    ]);
    expect(await preflightCdcTable(s, t('missing', 'append'))).toEqual([
      expect.objectContaining({ check: 'table', status: 'fail', code: 'SOURCE_TABLE_MISSING' }),
    ]);
  });

  it('tidemark check: a mysql source with cdc tables gets the binlog lines and table lines, no CDC_NOT_CHECKED', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tidemark-mypf-check-'));
    try {
      const parsed = parseSpec({
        pipeline: 'mypf',
        sources: {
          my: { kind: 'mysql', url: db.url, connectTimeoutSeconds: 5, cdc: { serverId: SERVER_ID } },
        },
        state: { dir: join(dir, 'state') },
        lake: { uri: `file://${join(dir, 'lake')}` },
        // Replaced below: the spec gate refuses mysql cdc tables until the MySQL reader.
        tables: [
          { source: 'my', table: `${db.name}.keyed`, mode: 'incremental', cursor: 'id', writeMode: 'append' },
        ],
      });
      const cdcTable = (table: string, writeMode: 'append' | 'upsert') => ({
        source: 'my',
        table: `${db.name}.${table}`,
        mode: 'cdc' as const,
        writeMode,
        exclude: [],
        onWiden: 'stop' as const,
        snapshot: 'never' as const,
        onTruncate: 'record' as const,
        insertOnly: false,
        unchangedToast: 'reread' as const,
      });
      const spec: Spec = { ...parsed, tables: [cdcTable('keyed', 'upsert'), cdcTable('nokey', 'upsert')] };
      const report = await checkPipeline(spec);
      const shown = report.lines.map((l) => [l.subject, l.check]);
      expect(shown).toEqual([
        ['sources.my', 'connect'],
        ['sources.my', 'log_bin'],
        ['sources.my', 'binlog_format'],
        ['sources.my', 'binlog_row_image'],
        ['sources.my', 'binlog_row_metadata'],
        ['sources.my', 'binlog_compression'],
        ['sources.my', 'gtid'],
        ['sources.my', 'server_id'],
        ['sources.my', 'replication'],
        ['sources.my', 'binlog_retention'],
        ['sources.my', 'snapshot'],
        [`${db.name}.keyed`, 'table'],
        [`${db.name}.keyed`, 'key'],
        [`${db.name}.keyed`, 'writeMode'],
        [`${db.name}.nokey`, 'table'],
        [`${db.name}.nokey`, 'writeMode'],
        ['state', 'dir'],
        ['lake', 'dir'],
        ['lake', 'catalog'],
      ]);
      expect(report.lines.some((l) => l.code === 'CDC_NOT_CHECKED')).toBe(false);
      // The refusal the start makes, in its words (the driver's own key line gives way to it).
      const nokey = report.lines.find((l) => l.subject === `${db.name}.nokey` && l.check === 'writeMode')!;
      expect(nokey).toMatchObject({ status: 'fail', code: 'UPSERT_NO_KEY' });
      expect(nokey.message).toContain('has no primary key; add a primary key or use writeMode: append');
      expect(report.passed).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
