/**
 * What the incremental engine tests need of a source database, so the same scenarios (ties, late
 * commit, crash, overlap, deadline, bad input) run against PostgreSQL and MySQL/MariaDB. Each
 * fixture owns its dialect's SQL (including the few expressions the scenarios build: `ts`,
 * `plus`, `now`); the scenarios own the assertions.
 */

import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import mysql from 'mysql2/promise';
import postgres from 'postgres';
import { incrementalTables, parseSpec, type Spec } from '../../../shared/config/spec.js';
import type { IncrementalSummary } from '../../../shared/engine/incremental/options.js';
import { silentLogger } from '../../../shared/observability/log.js';
import { type OpenPipeline, openPipeline } from '../../../shared/pipeline/open.js';
import { type RunTableOptions, runTable } from '../../../shared/pipeline/run-table.js';
import { lakeScan, type TestTableFormat } from '../../harness/lake-scan.js';
import { freshMysqlDatabase } from '../../harness/mysql.js';
import { type FreshDatabase, freshPgDatabase } from '../../harness/pg.js';

const BIN = join(import.meta.dirname, '..', '..', '..', 'bin', 'tidemark.js');

/** One row of the test table as both sides compare it. */
export interface TestRow {
  id: string;
  v: number;
  /** Microseconds since the epoch, as text (exact). */
  updatedAt: string;
}

export interface SourceFixture {
  readonly kind: 'postgres' | 'mysql';
  readonly url: string;
  /** `schema.table` of the test table. */
  readonly table: string;
  exec(sql: string): Promise<void>;
  /** Runs a query and returns its rows as objects (values as the client gives them). */
  query(sql: string): Promise<Record<string, unknown>[]>;
  /** Creates the test table: id bigint pk, v int, note text, updated_at (micro precision, indexed). */
  createTable(name?: string): Promise<void>;
  /**
   * Inserts ids [from, to) with updated_at = the given SQL expression (over the id, named `g`),
   * into the test table or `name`.
   */
  insertRange(from: number, to: number, updatedAtSql: string, name?: string): Promise<void>;
  /** A timestamp literal, e.g. `ts('2024-01-01 00:00:00.123456')`. */
  ts(text: string): string;
  /** `expr` plus `count` (an SQL integer expression, e.g. `g` or `-1`) units. */
  plus(expr: string, count: string, unit: 'microsecond' | 'millisecond' | 'second' | 'hour'): string;
  /** The current time at microsecond precision, as a writer's default would take it. */
  readonly now: string;
  /** The test table's (or `name`'s) rows, ordered by id. */
  rows(name?: string): Promise<TestRow[]>;
  /** A login that may SELECT the test table but cannot see other sessions' transactions. */
  limitedUserUrl(): Promise<string>;
  /** The same server with a wrong password / an unreachable port. */
  wrongPasswordUrl(): string;
  /** A second session that can hold a transaction open. */
  session(): Promise<{ exec(sql: string): Promise<void>; close(): Promise<void> }>;
  /**
   * Holds a lock on `table` in a session of its own that makes every read of it wait (Postgres
   * ACCESS EXCLUSIVE, MariaDB LOCK TABLES ... WRITE): a page read stalls at the server. The
   * returned function releases it.
   */
  lock(table: string): Promise<() => Promise<void>>;
  /** Ids of the tidemark sessions in this database that wait for a lock (Postgres pid, MariaDB connection id). */
  waitingReaders(): Promise<string[]>;
  /** Whether the server still has session `id`. */
  sessionExists(id: string): Promise<boolean>;
  /** Ends session `id` at the server (pg_terminate_backend / KILL CONNECTION). */
  killSession(id: string): Promise<void>;
  drop(): Promise<void>;
}

export async function postgresFixture(prefix: string): Promise<SourceFixture> {
  const db: FreshDatabase = await freshPgDatabase(prefix);
  const sql = postgres(db.url, { max: 2, onnotice: () => {} });
  const table = 'public.items';
  return {
    kind: 'postgres',
    url: db.url,
    table,
    ts: (text) => `TIMESTAMP '${text}'`,
    plus: (expr, count, unit) => `(${expr} + (${count}) * INTERVAL '1 ${unit}')`,
    now: 'now()',
    exec: async (s) => {
      await sql.unsafe(s);
    },
    query: async (s) => [...(await sql.unsafe(s))] as Record<string, unknown>[],
    async createTable(name = table) {
      await sql.unsafe(`CREATE TABLE ${name} (id bigint PRIMARY KEY, v int NOT NULL, note text, updated_at timestamptz NOT NULL);
                        CREATE INDEX ON ${name} (updated_at, id);`);
    },
    async insertRange(from, to, updatedAtSql, name = table) {
      await sql.unsafe(
        `INSERT INTO ${name} SELECT g, g % 1000, 'note ' || g, ${updatedAtSql} FROM generate_series(${from}, ${to - 1}) g`,
      );
    },
    async rows(name = table) {
      const r = await sql.unsafe<{ pk: string; v: number; u: string }[]>(
        `SELECT id::text AS pk, v, (extract(epoch FROM updated_at) * 1000000)::bigint::text AS u FROM ${name} ORDER BY id`,
      );
      return r.map((x) => ({ id: x.pk, v: x.v, updatedAt: x.u }));
    },
    async limitedUserUrl() {
      const role = `${db.name}_ro`;
      await sql.unsafe(
        `CREATE ROLE ${role} LOGIN PASSWORD 'ro-pass'; GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${role};`,
      );
      return withLogin(db.url, 'ro-pass', role);
    },
    wrongPasswordUrl: () => withLogin(db.url, 'definitely-wrong'),
    async session() {
      const s = postgres(db.url, { max: 1, onnotice: () => {} });
      const reserved = await s.reserve();
      return {
        exec: async (q: string) => {
          await reserved.unsafe(q);
        },
        close: async () => {
          reserved.release();
          await s.end({ timeout: 1 });
        },
      };
    },
    async lock(name) {
      const holder = postgres(db.url, { max: 1, onnotice: () => {} });
      const reserved = await holder.reserve();
      await reserved.unsafe('BEGIN');
      await reserved.unsafe(`LOCK TABLE ${name} IN ACCESS EXCLUSIVE MODE`);
      return async () => {
        await reserved.unsafe('ROLLBACK');
        reserved.release();
        await holder.end({ timeout: 1 });
      };
    },
    async waitingReaders() {
      const r = await sql.unsafe<{ pid: string }[]>(
        `SELECT pid::text AS pid FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'tidemark' AND wait_event_type = 'Lock'`,
      );
      return r.map((x) => x.pid);
    },
    async sessionExists(id) {
      const r = await sql.unsafe('SELECT 1 FROM pg_stat_activity WHERE pid = $1::int', [id]);
      return r.length > 0;
    },
    async killSession(id) {
      await sql.unsafe('SELECT pg_terminate_backend($1::int)', [id]);
    },
    async drop() {
      await sql.end({ timeout: 1 });
      await db.drop();
    },
  };
}

/** `SELECT g` for g in [from, to): a cross join of digit tables (no recursive CTE: MariaDB caps its depth). */
function mysqlSeries(from: number, to: number): string {
  const digits =
    '(SELECT 0 AS n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)';
  const levels = Math.max(1, Math.ceil(Math.log10(Math.max(2, to - from))));
  const parts = Array.from({ length: levels }, (_, i) => `${10 ** i} * d${i}.n`);
  const joins = Array.from({ length: levels }, (_, i) => `${digits} AS d${i}`).join(' CROSS JOIN ');
  return `SELECT g FROM (SELECT ${from} + ${parts.join(' + ')} AS g FROM ${joins}) AS series WHERE g < ${to}`;
}

const MYSQL_UNITS = {
  microsecond: ['MICROSECOND', 1],
  millisecond: ['MICROSECOND', 1000],
  second: ['SECOND', 1],
  hour: ['HOUR', 1],
} as const;

/**
 * The MySQL/MariaDB fixture: table `items` (DATETIME(6) cursor) in a fresh database, on the
 * shared harness server unless `database` makes it elsewhere (harness/mysql.ts).
 */
export async function mysqlFixture(
  prefix: string,
  database: (prefix: string) => Promise<FreshDatabase> = freshMysqlDatabase,
): Promise<SourceFixture> {
  const db: FreshDatabase = await database(prefix);
  const conn = await mysql.createConnection({
    uri: db.url,
    supportBigNumbers: true,
    bigNumberStrings: true,
    dateStrings: true,
  });
  const table = `${db.name}.items`;
  const limitedUser = `${db.name}_ro`;
  return {
    kind: 'mysql',
    url: db.url,
    table,
    ts: (text) => `TIMESTAMP'${text}'`,
    plus: (expr, count, unit) => {
      const [name, factor] = MYSQL_UNITS[unit];
      return `(${expr} + INTERVAL ((${count}) * ${factor}) ${name})`;
    },
    now: 'NOW(6)',
    exec: async (s) => {
      await conn.query(s);
    },
    query: async (s) => (await conn.query(s))[0] as Record<string, unknown>[],
    async limitedUserUrl() {
      // SELECT on the database, no PROCESS: INNODB_TRX is unreadable.
      await conn.query(`CREATE USER IF NOT EXISTS '${limitedUser}'@'%' IDENTIFIED BY 'ro-pass'`);
      await conn.query(`GRANT SELECT ON \`${db.name}\`.* TO '${limitedUser}'@'%'`);
      return withLogin(db.url, 'ro-pass', limitedUser);
    },
    wrongPasswordUrl: () => withLogin(db.url, 'definitely-wrong'),
    async createTable(name = table) {
      await conn.query(
        `CREATE TABLE ${name} (id BIGINT PRIMARY KEY, v INT NOT NULL, note TEXT, updated_at DATETIME(6) NOT NULL, INDEX (updated_at, id))`,
      );
    },
    async insertRange(from, to, updatedAtSql, name = table) {
      await conn.query(
        `INSERT INTO ${name} (id, v, note, updated_at) SELECT g, g % 1000, CONCAT('note ', g), ${updatedAtSql} FROM (${mysqlSeries(from, to)}) AS s`,
      );
    },
    async rows(name = table) {
      // DATETIME is a wall clock: the difference to the epoch's wall clock is exact in any time zone.
      const [r] = await conn.query(
        `SELECT CAST(id AS CHAR) AS pk, v, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', updated_at) AS CHAR) AS u
         FROM ${name} ORDER BY id`,
      );
      return (r as { pk: string; v: number; u: string }[]).map((x) => ({ id: x.pk, v: x.v, updatedAt: x.u }));
    },
    async session() {
      const s = await mysql.createConnection({ uri: db.url });
      return {
        exec: async (q: string) => {
          await s.query(q);
        },
        close: async () => {
          await s.end();
        },
      };
    },
    async lock(name) {
      const holder = await mysql.createConnection({ uri: db.url });
      await holder.query(`LOCK TABLES ${name} WRITE`);
      return async () => {
        await holder.query('UNLOCK TABLES');
        await holder.end();
      };
    },
    async waitingReaders() {
      // PROCESSLIST does not show program_name; the page statement is the only SELECT in this
      // database that waits for a table lock.
      const [r] = await conn.query(
        `SELECT CAST(ID AS CHAR) AS id FROM information_schema.PROCESSLIST
         WHERE DB = ? AND STATE LIKE '%lock%' AND INFO LIKE 'SELECT%'`,
        [db.name],
      );
      return (r as { id: string }[]).map((x) => x.id);
    },
    async sessionExists(id) {
      const [r] = await conn.query('SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = ?', [id]);
      return (r as unknown[]).length > 0;
    },
    async killSession(id) {
      await conn.query(`KILL CONNECTION ${Number(id)}`);
    },
    async drop() {
      await conn.query(`DROP USER IF EXISTS '${limitedUser}'@'%'`);
      await conn.end();
      await db.drop();
    },
  };
}

/** `url` with the password `password`, and the user `user` where given. */
function withLogin(url: string, password: string, user?: string): string {
  const u = new URL(url);
  if (user !== undefined) u.username = user;
  u.password = password;
  return u.toString();
}

/**
 * A local spec for one fixture table (or any table of a source: only `kind`, `url` and `table`
 * are read): file state, file lake in a fresh temp dir.
 */
export function localSpec(
  fx: Pick<SourceFixture, 'kind' | 'url' | 'table'>,
  table: Partial<{
    pageSize: number;
    lagSeconds: number;
    lagOnly: boolean;
    writeMode: 'append' | 'upsert';
    cursor: string;
    table: string;
    target: string;
    pipeline: string;
    /** Share another spec's lake (`spec.lake.uri`) instead of a fresh one. */
    lakeUri: string;
    cursorTimeZone: string;
    connectTimeoutSeconds: number;
    /** The page byte budget (spec `pageBytes`); absent: the spec's default. */
    pageBytes: number;
    /** `lake.tableFormat`; absent: unset (new tables are Iceberg tables). */
    tableFormat: 'iceberg' | 'plain';
  }> = {},
  url = fx.url,
): { spec: Spec; dir: string; lakeDir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-inc-'));
  const lakeUri = table.lakeUri ?? `file://${join(dir, 'lake')}`;
  const lakeDir = lakeUri.slice('file://'.length);
  const spec = parseSpec({
    pipeline: table.pipeline ?? 'test',
    sources: { db: { kind: fx.kind, url, connectTimeoutSeconds: table.connectTimeoutSeconds ?? 3 } },
    state: { dir: join(dir, 'state') },
    lake: { uri: lakeUri, ...(table.tableFormat ? { tableFormat: table.tableFormat } : {}) },
    tables: [
      {
        source: 'db',
        table: table.table ?? fx.table,
        ...(table.target ? { target: table.target } : {}),
        ...(table.cursorTimeZone ? { cursorTimeZone: table.cursorTimeZone } : {}),
        mode: 'incremental',
        cursor: table.cursor ?? 'updated_at',
        writeMode: table.writeMode ?? 'append',
        pageSize: table.pageSize ?? 1000,
        ...(table.pageBytes !== undefined ? { pageBytes: table.pageBytes } : {}),
        lagSeconds: table.lagSeconds ?? 0,
        lagOnly: table.lagOnly ?? false,
      },
    ],
  });
  return { spec, dir, lakeDir };
}

/**
 * One incremental sync of a whole table (`cursor`, append, pipeline `inc`) into a lake of its
 * own, for comparing with what another path (CDC) wrote. Every write is committed before this
 * run; other test files' open transactions on a shared server must not hold the bound back (they
 * did, under a parallel crash test): lagOnly.
 */
export async function incrementalCopy(
  kind: SourceFixture['kind'],
  url: string,
  table: string,
  cursor: string,
): Promise<{ summary: IncrementalSummary; lakeDir: string }> {
  const { spec, lakeDir } = localSpec(
    { kind, url, table },
    {
      pipeline: 'inc',
      cursor,
      writeMode: 'append',
      pageSize: 1000,
      lagSeconds: 0,
      lagOnly: true,
      connectTimeoutSeconds: 10,
    },
  );
  return { summary: await runOnce(spec), lakeDir };
}

/** Runs the real `tidemark` bin with `-c <spec file>` (written into `dir`) and `args`. */
export function runCli(
  dir: string,
  spec: Spec,
  args: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const specFile = join(dir, 'tidemark.json');
  writeFileSync(specFile, JSON.stringify(spec));
  const [cmd, ...rest] = args;
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [BIN, cmd!, '-c', specFile, ...rest],
      { cwd: dir, encoding: 'utf8', timeout: 120_000 },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== 'number') reject(error);
        else resolve({ code: error ? (error.code as number) : 0, stdout, stderr });
      },
    );
  });
}

/** Runs the spec's first table once through the same path as the CLI and the Lambda. */
export async function runOnce(spec: Spec, opts: Partial<RunTableOptions> = {}): Promise<IncrementalSummary> {
  const pipeline = await openPipeline(spec);
  try {
    return await runTable(spec, incrementalTables(spec)[0]!, pipeline, { logger: silentLogger, ...opts });
  } finally {
    await pipeline.close();
  }
}

/** Every row version in a local lake table: (id, v, updated_at, __pos), read with DuckDB. */
export async function lakeRows(
  lakeDir: string,
  target: string,
  tableFormat: TestTableFormat = 'plain',
  problems?: string[],
): Promise<(TestRow & { pos: string })[]> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    // Every object (plain), or an Iceberg table's current snapshot as pyiceberg plans its scan.
    const scan = await lakeScan(join(lakeDir, target), tableFormat);
    if (problems) problems.push(...scan.problems);
    else if (scan.problems.length > 0) throw new Error(scan.problems.join('; '));
    if (scan.from === undefined) return [];
    const r = await conn.runAndReadAll(
      `SELECT CAST(id AS VARCHAR), v, CAST(epoch_us(updated_at) AS VARCHAR), __pos
       FROM ${scan.from} ORDER BY id, __pos`,
    );
    return r
      .getRows()
      .map(([id, v, u, pos]) => ({ id: String(id), v: Number(v), updatedAt: String(u), pos: String(pos) }));
  } finally {
    conn.closeSync();
  }
}

/** The latest version of each row by max(__pos), ordered by id: what a reader of the lake sees. */
export function latest(rows: (TestRow & { pos: string })[]): TestRow[] {
  const byId = new Map<string, TestRow & { pos: string }>();
  for (const r of rows) {
    const cur = byId.get(r.id);
    if (!cur || cur.pos < r.pos) byId.set(r.id, r);
  }
  return [...byId.values()]
    .sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1))
    .map(({ id, v, updatedAt }) => ({ id, v, updatedAt }));
}

/**
 * `base` with its first page read of `table` made to stall at the server: the read starts only
 * once `fx` holds a lock that makes reads of the table wait (introspection and the null-cursor
 * count, which read it too, ran before). With `abortAfter`, the engine's abort of that read is
 * passed on once `abortAfter` settled. `release` drops the lock.
 */
export function stallFirstRead(
  base: OpenPipeline,
  fx: Pick<SourceFixture, 'lock'>,
  table: string,
  abortAfter?: Promise<unknown>,
): { pipeline: OpenPipeline; release(): Promise<void> } {
  let unlock: (() => Promise<void>) | undefined;
  const pipeline = wrapPageReads(
    base,
    async (read, req) => {
      unlock ??= await fx.lock(table);
      const engine = req.signal;
      if (!abortAfter || !engine) return read(req);
      const passed = new AbortController();
      engine.addEventListener('abort', () => void abortAfter.then(() => passed.abort(engine.reason)), {
        once: true,
      });
      return read({ ...req, signal: passed.signal });
    },
    table,
  );
  return { pipeline, release: async () => unlock?.() };
}

type PageRead = NonNullable<Awaited<ReturnType<OpenPipeline['source']>>['incrementalBatch']>;

/**
 * `base` whose sources read pages through `wrap` (given the real read and the request), for
 * `table` only when it is given; every other method is the real source's.
 */
export function wrapPageReads(
  base: OpenPipeline,
  wrap: (read: PageRead, req: Parameters<PageRead>[0]) => ReturnType<PageRead>,
  table?: string,
): OpenPipeline {
  return {
    ...base,
    source: async (name, t) => {
      const real = await base.source(name, t);
      if (table !== undefined && t.table !== table) return real;
      return new Proxy(real, {
        get(target, key) {
          if (key === 'incrementalBatch')
            return (req: Parameters<PageRead>[0]) => wrap((r) => target.incrementalBatch!(r), req);
          const v = Reflect.get(target, key) as unknown;
          return typeof v === 'function' ? v.bind(target) : v;
        },
      });
    },
  };
}

/** Polls `probe` until it returns a non-empty list (for at most a minute), and returns it. */
export async function eventually(what: string, probe: () => Promise<string[]>): Promise<string[]> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const found = await probe();
    if (found.length > 0) return found;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
