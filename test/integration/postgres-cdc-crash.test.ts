/**
 * The pgbench crash must-show: pgbench runs against the captured tables while the Postgres CDC
 * process (test/harness/pg-cdc-child.ts: `runCdc` over `PostgresCdcSource`, file state, file
 * lake) is SIGKILLed 20 times at ASSERTED points of its commit protocol (before the write,
 * between write and commit, between commit and ack, after the ack, during a lease renewal).
 * Each kill is recorded by the child (fsync'd) right before it dies; the test fails when a kill
 * did not land. At every kill the pair (slot confirmed_flush_lsn, committed state position) is
 * recorded: the slot must never be past what was durable. Afterwards a clean child catches up
 * to the WAL head and is stopped by SIGTERM; then (DuckDB over the lake) every pgbench_history
 * row inserted after capture started is in the lake exactly once, and every account's, teller's
 * and branch's latest lake version (by __pos) equals the source.
 *
 * The first child (which creates the slot and publication and commits the first position) is
 * SIGKILLed idle by the test; the WAL head at that moment is where "after capture started" begins.
 * TIDEMARK_PGCRASH_KEEP=1 keeps each run's directory (state, lake, kills, child logs).
 *
 * Mutation self-check: the same checker run under a broken protocol (the ack moved before the
 * state commit, a recovery that removes nothing, the commit before the write) must DETECT a
 * violation. The wrappers live in the child, never in production code.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import type postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import type { CdcPoint } from '../../shared/engine/cdc/options.js';
import { parseCdcState } from '../../shared/engine/cdc/state.js';
import { parseLsn } from '../../shared/position/position.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { type FreshDatabase, freshPgDatabase } from '../harness/pg.js';
import { pgClient } from '../harness/pg-cdc.js';
import {
  type KillLine,
  PG_RENEW_EVERY_MS,
  PG_STATE_KEY,
  type PgChildConfig,
  type PgMutation,
} from '../harness/pg-cdc-crash-config.js';

const ROOT = join(import.meta.dirname, '..', '..');
const CHILD = join(ROOT, 'test/harness/pg-cdc-child.ts');
/** The reader waits up to 120 s for a slot a killed child's walsender still holds. */
const BUSY_SLOT_WAIT_MS = 120_000;
/** Longest a child may take to reach its kill point: the busy-slot wait plus a few renewals. */
const CHILD_DEADLINE_MS = BUSY_SLOT_WAIT_MS + 30 * PG_RENEW_EVERY_MS;
const POINTS: readonly CdcPoint[] = ['before-write', 'after-write', 'after-commit', 'after-ack', 'renewal'];

const cleanup: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

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

interface Child {
  readonly proc: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  stderr(): string;
}

function startChild(config: PgChildConfig, logFile: string): Child {
  const proc = spawn(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify(config)], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve, reject) => {
    proc.on('error', reject);
    proc.on('exit', (code, signal) => {
      writeFileSync(logFile, stderr);
      resolve({ code, signal });
    });
  });
  cleanup.push(async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGKILL');
      await exited;
    }
  });
  return { proc, exited, stderr: () => stderr };
}

function readKills(dir: string): KillLine[] {
  try {
    return readFileSync(join(dir, 'kills'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as KillLine);
  } catch {
    return [];
  }
}

async function committedPosition(dir: string): Promise<string | undefined> {
  const rec = await new FileCursorStore(join(dir, 'state')).load(PG_STATE_KEY);
  return parseCdcState(rec.value).position?.value;
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

interface Pair {
  readonly generation: number;
  readonly point: string;
  readonly nth: number;
  readonly confirmed: string | null;
  readonly committed: string | null;
  /** What the child read from the state right before it killed itself. */
  readonly committedAtKill: string | null;
  readonly slotStillActive: boolean;
}

interface Outcome {
  readonly problems: string[];
  readonly pairs: Pair[];
  readonly historyRows: number;
  readonly accounts: number;
  readonly pgbenchRuns: number;
}

/**
 * pgbench against the captured tables, `kills` child generations each SIGKILLed at its point,
 * then a clean child to the WAL head; returns what is wrong (empty: the protocol held).
 */
/**
 * One child generation: SIGKILLed the `nth` time it reaches `point`; `quiet`: with pgbench
 * paused; `idleCommitMs`: the child's idle-commit interval.
 */
interface Kill {
  readonly point: CdcPoint;
  readonly nth: number;
  /** Count only commits that moved the committed position (PgChildConfig `kill.moved`). */
  readonly moved?: boolean;
  readonly quiet?: boolean;
  readonly idleCommitMs?: number;
}

async function pgbenchCrash(kills: readonly Kill[], mutation?: PgMutation): Promise<Outcome> {
  const pgbench = findPgbench();
  const db: FreshDatabase = await freshPgDatabase('pgcrash');
  cleanup.push(() => db.drop());
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-pgcrash-'));
  // TIDEMARK_PGCRASH_KEEP=1 keeps the state, lake, kills and child logs for a post-mortem.
  if (process.env.TIDEMARK_PGCRASH_KEEP) process.stdout.write(`[pgbench crash] keeping ${dir}\n`);
  else cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  const env = pgEnv(db.url);
  const init = await run(pgbench, ['-i', '-s', '1', '-q'], env);
  if (init.code !== 0) throw new Error(`pgbench -i failed: ${init.out}`);
  const sql = pgClient(db.url);
  cleanup.push(() => sql.end());
  await sql`ALTER TABLE pgbench_history REPLICA IDENTITY FULL`;

  const problems: string[] = [];
  const pairs: Pair[] = [];
  const base: PgChildConfig = {
    dir,
    url: db.url,
    slot: `${db.name}_slot`,
    publication: `${db.name}_pub`,
    ...(mutation ? { mutation } : {}),
  };
  const log = (i: number | string) => join(dir, `child-${i}.log`);

  /** After a kill: the (slot confirmed_flush_lsn, committed state position) pair, checked. */
  const checkPair = async (
    generation: number,
    point: CdcPoint | 'idle',
    nth: number,
    committedAtKill: string | null,
  ): Promise<void> => {
    const slot = await slotConfirmed(sql, base.slot);
    const committed = (await committedPosition(dir)) ?? null;
    const before = pairs.at(-1)?.committed ?? null;
    pairs.push({
      generation,
      point,
      nth,
      confirmed: slot.confirmed,
      committed,
      committedAtKill,
      slotStillActive: slot.active,
    });
    const at = `generation ${generation} (${point}#${nth})`;
    // The durable resume position only moves forward: a child never commits a position below the
    // one it started from.
    if (before !== null && committed !== null && parseLsn(committed) < parseLsn(before))
      problems.push(`${at}: the state position moved backwards, from ${before} to ${committed}`);
    if (slot.confirmed === null) problems.push(`${at}: the slot is gone`);
    else if (committed === null)
      // The first child committed a position before the first kill: it is never missing here.
      problems.push(`${at}: the state holds no position`);
    else if (parseLsn(slot.confirmed) > parseLsn(committed))
      problems.push(
        `${at}: the slot is confirmed at ${slot.confirmed}, past the durable state position ${committed}`,
      );
  };

  // The first start creates the slot and the publication and commits a position; changes
  // after the WAL head at that moment must all arrive. Then it is SIGKILLed while idle.
  const first = startChild(base, log('first'));
  const firstDeadline = Date.now() + CHILD_DEADLINE_MS;
  while ((await committedPosition(dir)) === undefined) {
    if (first.proc.exitCode !== null) throw new Error(`the first child exited: ${first.stderr()}`);
    if (Date.now() > firstDeadline)
      throw new Error(`the first child committed no position in ${CHILD_DEADLINE_MS} ms: ${first.stderr()}`);
    await sleep(100);
  }
  const startLsn = await walHead(sql);
  await sql`CREATE TABLE hist_before AS SELECT * FROM pgbench_history`;
  const gens: { point: CdcPoint | 'idle'; nth: number; child: Child }[] = [
    { point: 'idle', nth: 1, child: first },
  ];
  const committedAtIdle = (await committedPosition(dir)) ?? null;
  first.proc.kill('SIGKILL');
  await first.exited;
  // The parent killed this one: it records the kill line itself.
  writeFileSync(
    join(dir, 'kills'),
    `${JSON.stringify({ point: 'idle', nth: 1, committed: committedAtIdle } satisfies KillLine)}\n`,
  );
  await checkPair(-1, 'idle', 1, committedAtIdle);

  let bench: ReturnType<typeof startPgbench> | undefined = startPgbench(pgbench, env);
  let pgbenchRuns = 0;
  try {
    for (const [i, { quiet, idleCommitMs, ...kill }] of kills.entries()) {
      if (quiet && bench) {
        pgbenchRuns += await bench.stop();
        bench = undefined;
      } else if (!quiet && !bench) bench = startPgbench(pgbench, env);
      const child = startChild({ ...base, kill, ...(idleCommitMs ? { idleCommitMs } : {}) }, log(i));
      gens.push({ ...kill, child });
      const timer = setTimeout(() => child.proc.kill('SIGKILL'), CHILD_DEADLINE_MS);
      const r = await child.exited;
      clearTimeout(timer);
      const lines = readKills(dir);
      const landed = lines.length === gens.length ? lines.at(-1) : undefined;
      if (r.signal !== 'SIGKILL')
        problems.push(
          `generation ${i}: expected a SIGKILL at ${kill.point}#${kill.nth}, the child exited ${r.code ?? r.signal}: ${child.stderr().slice(-600)}`,
        );
      else if (!landed || landed.point !== kill.point || landed.nth !== kill.nth)
        problems.push(
          `generation ${i}: the kill at ${kill.point}#${kill.nth} did not land (killed after ${CHILD_DEADLINE_MS} ms, or recorded ${JSON.stringify(lines.at(-1))})`,
        );
      if (!landed) {
        // Keep the kills file aligned with the generations.
        writeFileSync(
          join(dir, 'kills'),
          `${[...lines, { point: kill.point, nth: -1, committed: null }].map((l) => JSON.stringify(l)).join('\n')}\n`,
        );
      }
      await checkPair(i, kill.point, kill.nth, landed?.committed ?? null);
    }
  } finally {
    if (bench) pgbenchRuns += await bench.stop();
  }

  // pgbench has ended cleanly: everything it did is before this WAL head.
  const stopLsn = await walHead(sql);
  const stateStore = new FileCursorStore(join(dir, 'state'));
  const versionBefore = (await stateStore.load(PG_STATE_KEY)).version;
  const last = startChild(base, log('last'));
  const lastDeadline = Date.now() + CHILD_DEADLINE_MS;
  let caughtUp = false;
  while (last.proc.exitCode === null && Date.now() < lastDeadline) {
    // The child has written the state (taken the lease: its SIGTERM handler is installed) and
    // its committed position reached the WAL head at the stop.
    const rec = await stateStore.load(PG_STATE_KEY);
    const pos = parseCdcState(rec.value).position?.value;
    if (rec.version > versionBefore && pos !== undefined && parseLsn(pos) >= parseLsn(stopLsn)) {
      caughtUp = true;
      break;
    }
    await sleep(200);
  }
  last.proc.kill('SIGTERM');
  const lastExit = await last.exited;
  if (!caughtUp)
    problems.push(
      `the clean child did not reach the WAL head ${stopLsn} (state at ${await committedPosition(dir)}): ${last.stderr().slice(-800)}`,
    );
  if (lastExit.code !== 0)
    problems.push(
      `the clean child did not drain and exit 0 on SIGTERM (${lastExit.code ?? lastExit.signal}): ${last.stderr().slice(-800)}`,
    );
  const slotAfter = await slotConfirmed(sql, base.slot);
  const finalPos = await committedPosition(dir);
  if (slotAfter.confirmed && finalPos && parseLsn(slotAfter.confirmed) > parseLsn(finalPos))
    problems.push(`after the clean stop the slot is at ${slotAfter.confirmed}, past the state's ${finalPos}`);

  const checked = await checkLake(dir, sql, startLsn);
  problems.push(...checked.problems);
  return { problems, pairs, historyRows: checked.historyRows, accounts: checked.accounts, pgbenchRuns };
}

/** Multiset of keys: key -> count. */
function counts(keys: readonly string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const k of keys) m.set(k, (m.get(k) ?? 0) + 1);
  return m;
}

async function checkLake(
  dir: string,
  sql: postgres.Sql,
  startLsn: string,
): Promise<{ problems: string[]; historyRows: number; accounts: number }> {
  const problems: string[] = [];
  const duck = await DuckDBInstance.create(':memory:');
  const conn = await duck.connect();
  const glob = (t: string) => join(dir, 'lake', `public.${t}`, '*.parquet');
  const hasFiles = async (t: string) =>
    Number((await conn.runAndReadAll(`SELECT count(*) FROM glob('${glob(t)}')`)).getRows()[0]![0]) > 0;
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
             FROM read_parquet('${glob('pgbench_history')}', union_by_name = true)`,
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

    // Accounts, tellers, branches: latest lake version by __pos equals the source, for every
    // row the history says changed (and every row the lake holds).
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
      const latest = new Map<string, string>();
      if (await hasFiles(table)) {
        const rows = (
          await conn.runAndReadAll(
            `SELECT CAST("${key}" AS VARCHAR), CAST("${col}" AS VARCHAR), CAST(__op AS VARCHAR) FROM (
               SELECT *, row_number() OVER (PARTITION BY "${key}" ORDER BY __pos DESC) AS rn
               FROM read_parquet('${glob(table)}', union_by_name = true)) WHERE rn = 1`,
          )
        ).getRows();
        for (const [k, v, op] of rows) if (String(op) !== 'd') latest.set(String(k), String(v));
        const dup = Number(
          (
            await conn.runAndReadAll(
              `SELECT count(*) - count(DISTINCT ("${key}", __pos)) FROM read_parquet('${glob(table)}', union_by_name = true)`,
            )
          ).getRows()[0]![0],
        );
        if (dup > 0) problems.push(`${table}: ${dup} duplicate (key, __pos) lake rows`);
      }
      let wrong = 0;
      let absent = 0;
      for (const k of changed) if (!latest.has(k)) absent++;
      for (const [k, v] of latest) if (srcRows.get(k) !== v) wrong++;
      if (absent > 0) problems.push(`${table}: ${absent} changed rows have no lake version`);
      if (wrong > 0) problems.push(`${table}: ${wrong} rows' latest lake ${col} differs from the source`);
      if (table === 'pgbench_accounts') accounts = changed.size;
    }
    if (startLsn === '') problems.push('no start LSN');
    return { problems, historyRows, accounts };
  } finally {
    conn.closeSync();
  }
}

function schedule(n: number): { point: CdcPoint; nth: number }[] {
  return Array.from({ length: n }, (_, i) => ({ point: POINTS[i % POINTS.length]!, nth: 1 + (i % 3) }));
}

function summarize(o: Outcome): string {
  return JSON.stringify(
    {
      problems: o.problems,
      historyRows: o.historyRows,
      accounts: o.accounts,
      pgbenchRuns: o.pgbenchRuns,
      pairs: o.pairs,
    },
    null,
    2,
  );
}

describe('Postgres CDC under pgbench, SIGKILLed 20 times', () => {
  it('loses no history row, duplicates none, ends with the source balances; the slot never passes the durable state', {
    timeout: 15 * 60_000,
  }, async () => {
    const started = Date.now();
    const outcome = await pgbenchCrash(schedule(20));
    process.stdout.write(
      `[pgbench crash] ${((Date.now() - started) / 1000).toFixed(1)} s, ${outcome.historyRows} history rows, ${outcome.accounts} accounts, pairs (confirmed <= committed):\n${outcome.pairs
        .map(
          (p) =>
            `  ${p.generation} ${p.point}#${p.nth}: ${p.confirmed} <= ${p.committed}${p.slotStillActive ? ' (slot still active)' : ''}`,
        )
        .join('\n')}\n`,
    );
    expect(outcome.problems, summarize(outcome)).toEqual([]);
    // The idle kill of the first child, then the 20 kills at protocol points.
    expect(outcome.pairs).toHaveLength(21);
  });

  // A kill between commit and ack leaves the slot behind the state (the ack never left); the
  // next child starts at the state's position while the slot is still behind it. On a quiet
  // source that child only commits idle positions (keepalives, heartbeats) and acks them
  // (killed at its 3rd ack): none may be below where it started, and the slot must stay at or
  // below the state. Its idle commits come every 100 ms, so the first one is taken before the
  // walsender has caught up (as with a long backlog between restart_lsn and the WAL head).
  it('restarted on a quiet source after a kill between commit and ack: the position never moves back, the slot never passes it', {
    timeout: 10 * 60_000,
  }, async () => {
    const kills: Kill[] = [];
    for (let i = 0; i < 4; i++)
      kills.push(
        // Killed at the first commit that moved the position (a flush inside a transaction
        // moves none): the ack that would follow it never leaves.
        { point: 'after-commit', nth: 1, moved: true },
        { point: 'after-ack', nth: 3, quiet: true, idleCommitMs: 100 },
      );
    // The scenario needs an after-commit kill whose commit moved the position past the slot;
    // should a child's first moving commit still find the slot there (an ack of an idle
    // position in between), the run is repeated (at most 3 times). Every run's problems must
    // be empty.
    let outcome = await pgbenchCrash(kills);
    let behind = behindPairs(outcome);
    for (let attempt = 1; attempt < 3 && behind.length === 0; attempt++) {
      expect(outcome.problems, summarize(outcome)).toEqual([]);
      outcome = await pgbenchCrash(kills);
      behind = behindPairs(outcome);
    }
    process.stdout.write(
      `[pgbench crash, quiet restarts] pairs:\n${outcome.pairs.map((p) => `  ${p.generation} ${p.point}#${p.nth}: ${p.confirmed} <= ${p.committed}`).join('\n')}\n`,
    );
    // The scenario was set up: some after-commit kill left the slot behind the state.
    expect(behind.length, summarize(outcome)).toBeGreaterThan(0);
    expect(outcome.problems, summarize(outcome)).toEqual([]);
  });

  /** The after-commit kills that left the slot behind the committed state. */
  function behindPairs(outcome: Awaited<ReturnType<typeof pgbenchCrash>>) {
    return outcome.pairs.filter(
      (p) =>
        p.point === 'after-commit' &&
        p.confirmed &&
        p.committed &&
        parseLsn(p.confirmed) < parseLsn(p.committed),
    );
  }

  // Mutation self-checks: each broken protocol must be DETECTED by the same checker, by the
  // check that guards the step it breaks.
  const MUTANTS: Record<PgMutation, { kills: { point: CdcPoint; nth: number }[]; detectedBy: RegExp }> = {
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
    'noop-recover': {
      kills: [
        { point: 'after-write', nth: 2 },
        { point: 'after-write', nth: 3 },
        { point: 'after-write', nth: 2 },
        { point: 'after-write', nth: 1 },
      ],
      detectedBy: /more than once|duplicate \(key, __pos\)/,
    },
    // The durability order reversed (state committed before the object is written): a kill
    // after the commit loses the page.
    'commit-before-write': {
      kills: [
        { point: 'after-commit', nth: 2 },
        { point: 'after-commit', nth: 3 },
        { point: 'after-commit', nth: 2 },
        { point: 'after-commit', nth: 1 },
      ],
      detectedBy: /are missing from the lake|have no lake version/,
    },
  };
  for (const [mutation, { kills, detectedBy }] of Object.entries(MUTANTS) as [
    PgMutation,
    (typeof MUTANTS)[PgMutation],
  ][]) {
    it(`detects a broken protocol: ${mutation}`, { timeout: 10 * 60_000 }, async () => {
      const outcome = await pgbenchCrash(kills, mutation);
      process.stdout.write(
        `[pgbench crash, mutation ${mutation}] detected ${outcome.problems.length} problem(s), the first: ${String(outcome.problems[0]).slice(0, 300)}\n`,
      );
      // Only the violation the broken step causes counts (not, say, a workload that did not run).
      const violations = outcome.problems.filter((p) => detectedBy.test(p));
      expect(violations.length, summarize(outcome)).toBeGreaterThan(0);
    });
  }
});
