/**
 * The Postgres CDC crash fixture: pgbench (scale 1, in short runs at 100 tps that each end
 * cleanly) against the captured pgbench tables in a fresh database, the child
 * test/harness/pg-cdc-child.ts on a slot and publication of its own, and the source's truth.
 *
 * After every kill the pair (slot confirmed_flush_lsn, committed state position) is recorded: the
 * slot must never be past what was durable. The WAL head when the first child has committed is
 * where "after capture started" begins (pgbench_history's rows at that moment are kept in
 * `hist_before`). At the end (DuckDB over the lake) every pgbench_history row inserted after
 * capture started is in the lake exactly once, and every changed account's, teller's and
 * branch's latest lake version (by __pos) equals the source. With Iceberg tables the accounts,
 * tellers and branches are current states (writeMode upsert, decision 0026), read as they are,
 * with no dedupe, by pyiceberg, icebird and Spark (when the suite has a session): no `__op = d`
 * row, one row per key, every changed key there, each equal to the source; and each one's history
 * table (`<table>_history`) by its current snapshot's data files: no delete file, partitioned by
 * day(__commit_ts), and the plain tables' checks (each (key, __pos) once, every changed key's latest
 * version equal to the source: the same code). pgbench comes from PATH or Debian's
 * postgresql-client: the suite FAILS without it (CI installs it).
 * TIDEMARK_PGCRASH_KEEP=1 keeps each run's directory (state, lake, kills, child logs).
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import type postgres from 'postgres';
import { parseLsn } from '../../../shared/position/position.js';
import { CRASH_RENEW_EVERY_MS, type CrashMutation } from '../../harness/cdc-crash-config.js';
import { checkCurrentState, checkSampledSnapshots } from '../../harness/current-state-read.js';
import { historyScan, lakeScan, type TestTableFormat } from '../../harness/lake-scan.js';
import { type FreshDatabase, freshPgDatabase } from '../../harness/pg.js';
import { pgClient } from '../../harness/pg-cdc.js';
import type { PgChildConfig } from '../../harness/pg-cdc-crash-config.js';
import type { SparkSession } from '../../harness/readers.js';
import {
  AFTER_COMMIT_KILLS,
  AFTER_WRITE_KILLS,
  type CrashFixture,
  type CrashSource,
  icebergVariant,
  onCleanup,
} from './scenarios.js';

/** The reader waits up to 120 s for a slot a killed child's walsender still holds. */
const BUSY_SLOT_WAIT_MS = 120_000;
/** Longest a child may take to reach its kill point: the busy-slot wait plus a few renewals. */
const CHILD_DEADLINE_MS = BUSY_SLOT_WAIT_MS + 30 * CRASH_RENEW_EVERY_MS;

/** The Postgres part of a pair: the slot's confirmed_flush_lsn after the kill. */
export interface SlotPair {
  readonly confirmed: string | null;
  readonly slotStillActive: boolean;
}

export interface PgbenchFacts {
  /** pgbench_history rows inserted after capture started. */
  readonly historyRows: number;
  /** Accounts the history says changed after capture started. */
  readonly accounts: number;
  readonly pgbenchRuns: number;
}

/** pgbench from PATH or Debian's postgresql-client; the test FAILS without it (CI installs it). */
function findPgbench(): string {
  try {
    const p = execFileSync('sh', ['-c', 'command -v pgbench'], { encoding: 'utf8' }).trim();
    if (p) return p;
  } catch {
    // not on PATH
  }
  const base = '/usr/lib/postgresql';
  if (existsSync(base))
    for (const v of readdirSync(base).sort().reverse()) {
      const p = join(base, v, 'bin', 'pgbench');
      if (existsSync(p)) return p;
    }
  throw new Error(
    'pgbench not found (PATH, /usr/lib/postgresql/*/bin): install postgresql-client (apt-get install -y postgresql-client), as CI does',
  );
}

/** libpq environment for the database at `url`. */
function pgEnv(url: string): NodeJS.ProcessEnv {
  const u = new URL(url);
  return {
    ...process.env,
    PGHOST: u.hostname,
    PGPORT: u.port || '5432',
    PGUSER: decodeURIComponent(u.username),
    PGPASSWORD: decodeURIComponent(u.password),
    PGDATABASE: u.pathname.slice(1),
  };
}

function run(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    p.stderr.on('data', (d: Buffer) => {
      out += d.toString();
    });
    p.on('error', reject);
    p.on('exit', (code) => resolve({ code, out }));
  });
}

/** pgbench in short runs (each ends cleanly) until stopped. */
function startPgbench(bin: string, env: NodeJS.ProcessEnv): { stop(): Promise<number> } {
  let stopping = false;
  let runs = 0;
  let failure: string | undefined;
  const loop = (async () => {
    while (!stopping) {
      const r = await run(bin, ['-n', '-c', '2', '-R', '100', '-T', '3'], env);
      runs++;
      if (r.code !== 0) {
        failure = `pgbench exited ${r.code}: ${r.out.slice(-600)}`;
        return;
      }
    }
  })();
  return {
    async stop() {
      stopping = true;
      await loop;
      if (failure) throw new Error(failure);
      return runs;
    },
  };
}

async function walHead(sql: postgres.Sql): Promise<string> {
  const [row] = await sql<{ lsn: string }[]>`SELECT pg_current_wal_lsn()::text AS lsn`;
  return row!.lsn;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The slot's confirmed_flush_lsn, once its walsender has exited (or after `waitMs` anyway). */
async function slotConfirmed(
  sql: postgres.Sql,
  slot: string,
  waitMs = 10_000,
): Promise<{ confirmed: string | null; active: boolean }> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const [row] = await sql<{ confirmed: string | null; active: boolean }[]>`
      SELECT confirmed_flush_lsn::text AS confirmed, active FROM pg_replication_slots WHERE slot_name = ${slot}`;
    if (!row) return { confirmed: null, active: false };
    if (!row.active || Date.now() > deadline) return row;
    await sleep(100);
  }
}

async function openPgbench(
  mutation?: CrashMutation,
  tableFormat: TestTableFormat = 'plain',
  spark?: SparkSession,
): Promise<CrashSource<SlotPair, PgbenchFacts>> {
  const pgbench = findPgbench();
  const db: FreshDatabase = await freshPgDatabase('pgcrash');
  onCleanup(() => db.drop());
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-pgcrash-'));
  // TIDEMARK_PGCRASH_KEEP=1 keeps the state, lake, kills and child logs for a post-mortem.
  if (process.env.TIDEMARK_PGCRASH_KEEP) process.stdout.write(`[pgbench crash] keeping ${dir}\n`);
  else onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const env = pgEnv(db.url);
  const init = await run(pgbench, ['-i', '-s', '1', '-q'], env);
  if (init.code !== 0) throw new Error(`pgbench -i failed: ${init.out}`);
  const sql = pgClient(db.url);
  onCleanup(() => sql.end());
  await sql`ALTER TABLE pgbench_history REPLICA IDENTITY FULL`;

  const config: PgChildConfig = {
    dir,
    url: db.url,
    slot: `${db.name}_slot`,
    publication: `${db.name}_pub`,
    ...(mutation ? { mutation } : {}),
    ...(tableFormat === 'iceberg' ? { tableFormat } : {}),
  };
  let startLsn = '';
  let pgbenchRuns = 0;
  return {
    config,
    async captureStarted() {
      startLsn = await walHead(sql);
      await sql`CREATE TABLE hist_before AS SELECT * FROM pgbench_history`;
    },
    async afterKill(at, committed) {
      const slot = await slotConfirmed(sql, config.slot);
      const problems: string[] = [];
      if (slot.confirmed === null) problems.push(`${at}: the slot is gone`);
      else if (committed === null)
        // The first child committed a position before the first kill: it is never missing here.
        problems.push(`${at}: the state holds no position`);
      else if (parseLsn(slot.confirmed) > parseLsn(committed))
        problems.push(
          `${at}: the slot is confirmed at ${slot.confirmed}, past the durable state position ${committed}`,
        );
      return { pair: { confirmed: slot.confirmed, slotStillActive: slot.active }, problems };
    },
    async startWorkload() {
      const bench = startPgbench(pgbench, env);
      return {
        async stop() {
          pgbenchRuns += await bench.stop();
        },
      };
    },
    head: () => walHead(sql),
    async finish(finalPos) {
      const problems: string[] = [];
      const slotAfter = await slotConfirmed(sql, config.slot);
      if (slotAfter.confirmed && finalPos && parseLsn(slotAfter.confirmed) > parseLsn(finalPos))
        problems.push(
          `after the clean stop the slot is at ${slotAfter.confirmed}, past the state's ${finalPos}`,
        );
      const checked = await checkLake(dir, sql, startLsn, tableFormat, spark);
      problems.push(...checked.problems);
      return {
        problems,
        facts: { historyRows: checked.historyRows, accounts: checked.accounts, pgbenchRuns },
      };
    },
  };
}

/** Multiset of keys: key -> count. */
function counts(keys: readonly string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const k of keys) m.set(k, (m.get(k) ?? 0) + 1);
  return m;
}

/** Every version the lake rows `from` (a DuckDB FROM) hold of `label`, once per (key, __pos). */
async function duplicateProblems(
  conn: DuckDBConnection,
  label: string,
  from: string,
  key: string,
): Promise<string[]> {
  // Every version each file holds, once (an Iceberg table's deleted rows included).
  const dup = Number(
    (
      await conn.runAndReadAll(`SELECT count(*) - count(DISTINCT ("${key}", __pos)) FROM ${from}`)
    ).getRows()[0]![0],
  );
  return dup > 0 ? [`${label}: ${dup} duplicate (key, __pos) lake rows`] : [];
}

/**
 * The latest version per key of the change rows `from` (max __pos; a key whose latest is a delete
 * is gone) against the source: every `changed` key there, and every key there equal to the
 * source's `col` (`srcRows`): a plain table's objects, or a history table's current snapshot.
 */
async function latestProblems(
  conn: DuckDBConnection,
  label: string,
  from: string,
  key: string,
  col: string,
  changed: ReadonlySet<string>,
  srcRows: ReadonlyMap<string, string>,
): Promise<string[]> {
  const problems: string[] = [];
  const latest = new Map<string, string>();
  const rows = (
    await conn.runAndReadAll(
      `SELECT CAST("${key}" AS VARCHAR), CAST("${col}" AS VARCHAR), CAST(__op AS VARCHAR) FROM (
         SELECT *, row_number() OVER (PARTITION BY "${key}" ORDER BY __pos DESC) AS rn
         FROM ${from}) WHERE rn = 1`,
    )
  ).getRows();
  for (const [k, v, op] of rows) if (String(op) !== 'd') latest.set(String(k), String(v));
  let wrong = 0;
  let absent = 0;
  for (const k of changed) if (!latest.has(k)) absent++;
  for (const [k, v] of latest) if (srcRows.get(k) !== v) wrong++;
  if (absent > 0) problems.push(`${label}: ${absent} changed rows have no lake version`);
  if (wrong > 0) problems.push(`${label}: ${wrong} rows' latest lake ${col} differs from the source`);
  return problems;
}

async function checkLake(
  dir: string,
  sql: postgres.Sql,
  startLsn: string,
  tableFormat: TestTableFormat,
  spark?: SparkSession,
): Promise<{ problems: string[]; historyRows: number; accounts: number }> {
  const problems: string[] = [];
  const duck = await DuckDBInstance.create(':memory:');
  const conn = await duck.connect();
  // Each table as its format reads: every object (plain), or the current snapshot's files.
  const scans = new Map<string, string | undefined>();
  for (const t of ['pgbench_history', 'pgbench_accounts', 'pgbench_tellers', 'pgbench_branches']) {
    const scan = await lakeScan(join(dir, 'lake', `public.${t}`), tableFormat);
    problems.push(...scan.problems.map((p) => `${t}: ${p}`));
    scans.set(t, scan.from);
  }
  const hasFiles = async (t: string) => scans.get(t) !== undefined;
  try {
    // pgbench_history: every row inserted after capture started, exactly once (rows never update).
    const histKey = `tid || '|' || bid || '|' || aid || '|' || delta || '|'`;
    const source = await sql<{ k: string }[]>`
      SELECT ${sql.unsafe(histKey)} || (extract(epoch FROM mtime) * 1000000)::bigint AS k FROM pgbench_history`;
    const before = await sql<{ k: string }[]>`
      SELECT ${sql.unsafe(histKey)} || (extract(epoch FROM mtime) * 1000000)::bigint AS k FROM hist_before`;
    const lakeHist = (await hasFiles('pgbench_history'))
      ? (
          await conn.runAndReadAll(
            `SELECT CAST(tid AS VARCHAR) || '|' || CAST(bid AS VARCHAR) || '|' || CAST(aid AS VARCHAR) || '|' ||
                    CAST(delta AS VARCHAR) || '|' || CAST(epoch_us(mtime) AS VARCHAR), CAST(__op AS VARCHAR)
             FROM ${scans.get('pgbench_history')}`,
          )
        )
          .getRows()
          .map(([k, op]) => [String(k), String(op)] as const)
      : [];
    const notCreate = lakeHist.filter(([, op]) => op !== 'c');
    if (notCreate.length > 0) problems.push(`pgbench_history: ${notCreate.length} lake rows are not inserts`);
    const src = counts(source.map((r) => r.k));
    const old = counts(before.map((r) => r.k));
    const lake = counts(lakeHist.map(([k]) => k));
    let missing = 0;
    let duplicated = 0;
    let extra = 0;
    for (const [k, n] of src) {
      const want = n - (old.get(k) ?? 0);
      const got = lake.get(k) ?? 0;
      // Rows from before capture started may or may not be in the lake (at most once each).
      if (got < want) missing += want - got;
      else if (got > n) duplicated += got - n;
    }
    for (const [k, n] of lake) if (!src.has(k)) extra += n;
    if (missing > 0)
      problems.push(
        `pgbench_history: ${missing} source rows inserted after capture started are missing from the lake`,
      );
    if (duplicated > 0) problems.push(`pgbench_history: ${duplicated} rows are in the lake more than once`);
    if (extra > 0) problems.push(`pgbench_history: ${extra} lake rows are not in the source`);
    const historyRows = source.length - before.length;
    if (historyRows === 0)
      problems.push('pgbench_history: pgbench inserted nothing (the workload did not run)');

    // Accounts, tellers, branches: every row the history says changed is in the lake and equals
    // the source (and so does every row the lake holds): plain tables by their latest lake
    // version by __pos, Iceberg tables (current states) as they are.
    let accounts = 0;
    for (const [table, key, col] of [
      ['pgbench_accounts', 'aid', 'abalance'],
      ['pgbench_tellers', 'tid', 'tbalance'],
      ['pgbench_branches', 'bid', 'bbalance'],
    ] as const) {
      const changed = new Set(
        (
          await sql<{ k: string }[]>`
            SELECT DISTINCT ${sql(key)}::text AS k FROM pgbench_history
            EXCEPT SELECT DISTINCT ${sql(key)}::text FROM hist_before`
        ).map((r) => r.k),
      );
      const srcRows = new Map(
        (
          await sql<
            { k: string; v: string }[]
          >`SELECT ${sql(key)}::text AS k, ${sql(col)}::text AS v FROM ${sql(table)}`
        ).map((r) => [r.k, r.v]),
      );
      if (table === 'pgbench_accounts') accounts = changed.size;
      if (tableFormat === 'iceberg') {
        const checked = await checkCurrentState(
          table,
          join(dir, 'lake', `public.${table}`),
          {
            key,
            columns: [key, col],
            rows: new Map([...srcRows].map(([k, v]) => [k, [k, v]])),
            required: changed,
          },
          spark,
        );
        problems.push(...checked.problems);
        // Earlier snapshots, sampled: each the shape of a current state (the source's state then
        // is not known here).
        problems.push(
          ...(await checkSampledSnapshots(table, join(dir, 'lake', `public.${table}`), key)).problems,
        );
      }
      const from = scans.get(table);
      if (from !== undefined) problems.push(...(await duplicateProblems(conn, table, from, key)));
      if (tableFormat === 'plain') {
        if (from !== undefined)
          problems.push(...(await latestProblems(conn, table, from, key, col, changed, srcRows)));
        else if (changed.size > 0)
          problems.push(`${table}: ${changed.size} changed rows have no lake version`);
        continue;
      }
      // Its history: every change once, no delete file, day(__commit_ts), and its latest version
      // per key is the source's (as a plain table's is).
      const h = `${table}_history`;
      const history = await historyScan(join(dir, 'lake', `public.${h}`));
      problems.push(...history.problems.map((p) => `${h}: ${p}`));
      if (history.from !== undefined) {
        problems.push(...(await duplicateProblems(conn, h, history.from, key)));
        problems.push(...(await latestProblems(conn, h, history.from, key, col, changed, srcRows)));
      } else if (changed.size > 0) problems.push(`${h}: ${changed.size} changed rows have no lake version`);
    }
    if (startLsn === '') problems.push('no start LSN');
    return { problems, historyRows, accounts };
  } finally {
    conn.closeSync();
  }
}

export const postgresCrashFixture: CrashFixture<SlotPair, PgbenchFacts> = {
  tag: 'pgbench crash',
  child: 'test/harness/pg-cdc-child.ts',
  title:
    'loses no history row, duplicates none, ends with the source balances; the slot never passes the durable state',
  childDeadlineMs: CHILD_DEADLINE_MS,
  cleanChildDeadlineMs: CHILD_DEADLINE_MS,
  headName: 'WAL head',
  compare: (a, b) => {
    const x = parseLsn(a);
    const y = parseLsn(b);
    return x < y ? -1 : x > y ? 1 : 0;
  },
  reached: (pos, head) => parseLsn(pos) >= parseLsn(head),
  display: (value) => String(value),
  showPair: (p) => p,
  report: (o) =>
    `${o.facts.historyRows} history rows, ${o.facts.accounts} accounts, pairs (confirmed <= committed):\n${o.pairs
      .map(
        (p) =>
          `  ${p.generation} ${p.point}#${p.nth}: ${p.confirmed} <= ${p.committed}${p.slotStillActive ? ' (slot still active)' : ''}`,
      )
      .join('\n')}`,
  // Each mutant is detected by the check that guards the step it breaks.
  mutants: {
    // The ack moves before the state commit: the slot passes the durable position (and the next
    // start finds the slot ahead of the state: POSITION_LOST, rows lost).
    'ack-before-commit': {
      kills: [
        { point: 'before-write', nth: 2 },
        { point: 'after-write', nth: 2 },
        { point: 'before-write', nth: 3 },
        { point: 'after-write', nth: 1 },
      ],
      detectedBy: /past the durable state position/,
    },
    // A crashed attempt's objects are not removed: its rows are in the lake twice.
    'noop-recover': { kills: AFTER_WRITE_KILLS, detectedBy: /more than once|duplicate \(key, __pos\)/ },
    // The durability order reversed (state committed before the object is written): a kill
    // after the commit loses the page.
    'commit-before-write': {
      kills: AFTER_COMMIT_KILLS,
      detectedBy: /are missing from the lake|have no lake version/,
    },
  },
  open: openPgbench,
};

/**
 * The same pgbench run with Iceberg tables (docs/decisions/0024-iceberg-commits.md): the tables
 * read as their current snapshots, 20 kills over the protocol points and the one between the
 * catalog commit and the ack.
 */
export const postgresIcebergCrashFixture: CrashFixture<SlotPair, PgbenchFacts> = icebergVariant(
  postgresCrashFixture,
  {
    // Recovery disabled (the state's pending commit not applied at start, no orphan removed): a
    // kill between the state commit and the catalog commit loses that commit's rows.
    'noop-recover': {
      kills: AFTER_COMMIT_KILLS,
      detectedBy: /are missing from the lake|have no lake row|differ from the source/,
    },
    // Catalog first, then the state, with today's delete-from-`next` recovery: a kill between
    // the two commits leaves a snapshot whose files the next start deletes (or whose rows it
    // writes again).
    'catalog-first': {
      kills: AFTER_WRITE_KILLS,
      detectedBy: /is gone|cannot be read|more than once|duplicate \(key, __pos\)|more than one row/,
    },
  },
);
