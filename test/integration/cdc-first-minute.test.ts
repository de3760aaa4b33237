/**
 * The first minute of a CDC capture, through the real CLI (issue 28: a MariaDB capture killed
 * before its first flush used to restart at the NEW binlog end, silently skipping every change
 * since its first start). On the harness MariaDB and PostgreSQL, `tidemark cdc` (bin/tidemark.js,
 * file state, file lake, `snapshot: never`, the default 60 s flush) is SIGKILLed:
 *   0. at its first start, as soon as it has chosen its start position (the log line that says
 *      so), before the workload begins: a first start is a crash point too;
 *   1-4. while a transactional workload runs (inserts, updates, deletes, some rolled back),
 *      each once it has logged `capturing` and the workload has committed more transactions
 *      since: every one of these kills lands before the process's first flush, which the test
 *      proves from the state after the kill (no table has a `next`), and fails otherwise.
 * Then the workload stops, a sentinel row is written, and a last process (flushSeconds 1) runs
 * until the sentinel is in the lake, and is stopped by SIGTERM (exit 0). With DuckDB over the
 * lake: each (key, __pos) once, and the latest version of every key (deletes applied) equals the
 * source row; every change happened after the first process chose its position, so every one
 * must be there.
 *
 * Mutation: the same scenario through the same CLI main with the start position made durable
 * only at the first flush (test/harness/cli-mutated-child.ts `position-at-first-flush`: after
 * streaming began) must lose rows on MariaDB. (On Postgres the slot keeps the start whatever the
 * state holds, and nothing is acknowledged past what is committed: that mutation loses nothing
 * there, as the issue found; the ack order is the Postgres crash suite's mutation.)
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import type mysql from 'mysql2/promise';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultCdcName } from '../../shared/config/spec.js';
import { type CdcState, parseCdcState } from '../../shared/engine/cdc/state.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { CdcProcess, LINE_DEADLINE_MS } from '../harness/cdc-cli.js';
import { lakeScan } from '../harness/lake-scan.js';
import { freshMysqlDatabase } from '../harness/mysql.js';
import { mysqlClient } from '../harness/mysql-cdc.js';
import { freshPgDatabase } from '../harness/pg.js';

/** Transactions the workload commits while a process captures, before it is killed. */
const TXNS_PER_KILL = 25;
const KILLS_UNDER_LOAD = 4;

const cleanup: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The database side of a scenario: the same statements on both servers. */
interface Db {
  readonly kind: 'mysql' | 'postgres';
  readonly url: string;
  /** The table's name in the spec, and its target (lake folder). */
  readonly table: string;
  /** Runs one transaction of statements; rolls back instead of committing when `rollback`. */
  txn(statements: readonly string[], rollback: boolean): Promise<void>;
  rows(): Promise<Map<string, string>>;
  close(): Promise<void>;
}

async function mysqlDb(): Promise<Db> {
  const db = await freshMysqlDatabase('first_minute');
  const sql: mysql.Connection = await mysqlClient(db.url);
  await sql.query('CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(64))');
  return {
    kind: 'mysql',
    url: db.url,
    table: `${db.name}.t`,
    async txn(statements, rollback) {
      await sql.query('START TRANSACTION');
      for (const s of statements) await sql.query(s);
      await sql.query(rollback ? 'ROLLBACK' : 'COMMIT');
    },
    async rows() {
      const [rows] = await sql.query('SELECT id, v, note FROM t');
      return rowMap(rows as Row[]);
    },
    async close() {
      await sql.end();
      await db.drop();
    },
  };
}

async function pgDb(slots: () => string[]): Promise<Db> {
  const db = await freshPgDatabase('first_minute');
  const sql = postgres(db.url, { max: 1, onnotice: () => undefined });
  await sql.unsafe('CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, note TEXT)');
  return {
    kind: 'postgres',
    url: db.url,
    table: 'public.t',
    async txn(statements, rollback) {
      await sql.unsafe('BEGIN');
      for (const s of statements) await sql.unsafe(s);
      await sql.unsafe(rollback ? 'ROLLBACK' : 'COMMIT');
    },
    async rows() {
      return rowMap(await sql.unsafe<Row[]>('SELECT id, v, note FROM t'));
    },
    async close() {
      // Slots are server-wide and hold WAL: drop the ones this scenario's pipelines made.
      for (const slot of slots())
        await sql
          .unsafe(
            `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '${slot}'`,
          )
          .catch(() => undefined);
      await sql.end();
      await db.drop();
    },
  };
}

interface Row {
  id: unknown;
  v: unknown;
  note: unknown;
}

function rowMap(rows: readonly Row[]): Map<string, string> {
  const m = new Map<string, string>();
  for (const r of rows)
    m.set(String(r.id), JSON.stringify([String(r.v), r.note === null ? null : String(r.note)]));
  return m;
}

/** Transactions of two inserts, an update and sometimes a delete; one in eight rolls back. */
class Workload {
  committed = 0;
  private nextId = 1;
  private readonly live: number[] = [];
  private stopped = false;
  private done: Promise<void> | undefined;

  constructor(private readonly db: Db) {}

  start(): void {
    this.done = (async () => {
      while (!this.stopped) {
        const rollback = Math.random() < 0.125;
        const a = this.nextId++;
        const b = this.nextId++;
        const statements = [`INSERT INTO t (id, v, note) VALUES (${a}, 1, 'n${a}'), (${b}, 1, NULL)`];
        const upd = this.live[Math.floor(Math.random() * this.live.length)];
        if (upd !== undefined)
          statements.push(`UPDATE t SET v = v + 1, note = 'u${this.committed}' WHERE id = ${upd}`);
        const delAt =
          Math.random() < 0.3 && this.live.length > 4 ? Math.floor(Math.random() * this.live.length) : -1;
        if (delAt >= 0) statements.push(`DELETE FROM t WHERE id = ${this.live[delAt]}`);
        await this.db.txn(statements, rollback);
        if (rollback) continue;
        if (delAt >= 0) this.live.splice(delAt, 1);
        this.live.push(a, b);
        this.committed++;
        await sleep(5);
      }
    })();
  }

  async waitFor(txns: number, deadlineMs: number): Promise<void> {
    const until = this.committed + txns;
    const end = Date.now() + deadlineMs;
    while (this.committed < until) {
      if (Date.now() > end)
        throw new Error(`the workload committed ${this.committed}, not ${until}, in time`);
      await sleep(20);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
  }
}

interface Scenario {
  readonly db: Db;
  readonly dir: string;
  readonly pipeline: string;
  readonly mutation?: string;
}

function writeSpec(s: Scenario, flushSeconds: number): string {
  const cdc =
    s.db.kind === 'mysql'
      ? `{ serverId: ${5000 + Math.floor(Math.random() * 100_000)}, flushSeconds: ${flushSeconds} }`
      : `{ flushSeconds: ${flushSeconds} }`;
  const path = join(s.dir, `spec-${flushSeconds}.yaml`);
  writeFileSync(
    path,
    [
      `pipeline: ${s.pipeline}`,
      'sources:',
      `  db: { kind: ${s.db.kind}, url: "${s.db.url}", cdc: ${cdc} }`,
      `state: { dir: ${join(s.dir, 'state')} }`,
      `lake: { uri: "file://${join(s.dir, 'lake')}" }`,
      'tables:',
      `  - { source: db, table: ${s.db.table}, mode: cdc, writeMode: upsert, snapshot: never }`,
      '',
    ].join('\n'),
  );
  return path;
}

/** One `tidemark cdc` process of a scenario (the bin, or the mutated CLI), its output kept. */
class Capture extends CdcProcess {
  constructor(s: Scenario, spec: string) {
    super(spec, {
      mutation: s.mutation,
      logFile: join(s.dir, 'captures.log'),
      cleanup: (fn) => cleanup.push(fn),
    });
  }
}

async function loadState(s: Scenario): Promise<{ version: number; state: CdcState | undefined }> {
  const record = await new FileCursorStore(join(s.dir, 'state')).load(`cdc#${s.pipeline}#db`);
  return {
    version: record.version,
    state: record.value === undefined ? undefined : parseCdcState(record.value),
  };
}

/** Each (id, __pos) once; the latest version per id (deletes applied) equals the source row. */
async function checkLake(s: Scenario): Promise<{ problems: string[]; missing: number; sourceRows: number }> {
  const folder = join(s.dir, 'lake', s.db.table);
  const src = await s.db.rows();
  const files = readdirSync(folder, { recursive: true }).filter((f) => String(f).endsWith('.parquet'));
  if (files.length === 0)
    return { problems: ['the lake has no objects'], missing: src.size, sourceRows: src.size };
  const duck = await DuckDBInstance.create(':memory:');
  const conn = await duck.connect();
  // Every object (each (id, __pos) once), and the rows an Iceberg reader returns (a current-state
  // table's position deletes applied) for the latest version per id.
  const scan = await lakeScan(folder);
  const from = scan.from ?? `read_parquet('${folder}/*.parquet', union_by_name = true)`;
  const current = scan.current ?? from;
  const problems: string[] = [];
  try {
    const dup = Number(
      (
        await conn.runAndReadAll(`SELECT count(*) - count(DISTINCT (id, __pos)) FROM ${from}`)
      ).getRows()[0]![0],
    );
    if (dup > 0) problems.push(`${dup} duplicate (id, __pos) lake rows`);
    const latest = new Map<string, string>();
    const rows = (
      await conn.runAndReadAll(
        `SELECT CAST(id AS VARCHAR), CAST(v AS VARCHAR), CAST(note AS VARCHAR), CAST(__op AS VARCHAR) FROM (
           SELECT *, row_number() OVER (PARTITION BY id ORDER BY __pos DESC) AS rn FROM ${current}) WHERE rn = 1`,
      )
    ).getRows();
    for (const [id, v, note, op] of rows)
      if (op !== 'd')
        latest.set(String(id), JSON.stringify([String(v), note === null ? null : String(note)]));
    const missing: string[] = [];
    const wrong: string[] = [];
    for (const [k, v] of src) {
      const l = latest.get(k);
      if (l === undefined) missing.push(k);
      else if (l !== v) wrong.push(k);
    }
    const extra = [...latest.keys()].filter((k) => !src.has(k));
    if (missing.length + wrong.length + extra.length > 0)
      problems.push(
        `of ${src.size} source rows: ${missing.length} missing (${missing.slice(0, 5)}), ${wrong.length} wrong (${wrong.slice(0, 5)}); ${extra.length} extra in the lake (${extra.slice(0, 5)})`,
      );
    return { problems, missing: missing.length, sourceRows: src.size };
  } finally {
    conn.closeSync();
    duck.closeSync();
  }
}

/** The kill points a scenario reached, in order; the lake's problems at the end. */
async function scenario(s: Scenario): Promise<{ kills: string[]; problems: string[]; missing: number }> {
  const spec = writeSpec(s, 60);
  const kills: string[] = [];
  // 0. The first start, killed once it has chosen its start position (before or after it
  // committed it: either is a first start killed before it read anything).
  const first = new Capture(s, spec);
  await first.waitForLine('first start');
  await first.kill('SIGKILL');
  const after0 = await loadState(s);
  kills.push(after0.state?.position ? 'first-start' : 'first-start-uncommitted');

  // The capture has begun once a process says it is capturing: every change from then on
  // must reach the lake. The workload starts there, and runs through the kills.
  const workload = new Workload(s.db);
  try {
    for (let i = 1; i <= KILLS_UNDER_LOAD; i++) {
      const p = new Capture(s, spec);
      await p.waitForLine('"capturing"');
      if (i === 1) workload.start();
      await workload.waitFor(TXNS_PER_KILL, LINE_DEADLINE_MS);
      await p.kill('SIGKILL');
      const { state } = await loadState(s);
      const flushed = Object.entries(state?.tables ?? {}).filter(([, t]) => t.next !== undefined);
      // The point this kill is for: under load, before the process's first flush.
      if (flushed.length > 0) throw new Error(`kill ${i} landed after a flush (${flushed.map(([k]) => k)})`);
      kills.push(`under-load-before-first-flush-${i}`);
    }
  } finally {
    await workload.stop();
  }
  const last = new Capture(s, writeSpec(s, 1));
  await last.waitForLine('"capturing"');
  // A sentinel after every change: once it is in the lake, so is everything before it.
  await s.db.txn([`INSERT INTO t (id, v, note) VALUES (-1, 0, 'sentinel')`], false);
  const end = Date.now() + LINE_DEADLINE_MS;
  for (;;) {
    const { state } = await loadState(s);
    const t = state?.tables[s.db.table];
    if (t?.next !== undefined && (await lakeHasSentinel(s))) break;
    if (Date.now() > end) throw new Error(`the sentinel never reached the lake:\n${last.output}`);
    await sleep(250);
  }
  expect(await last.kill('SIGTERM')).toBe(0);
  const { problems, missing } = await checkLake(s);
  return { kills, problems, missing };
}

async function lakeHasSentinel(s: Scenario): Promise<boolean> {
  const folder = join(s.dir, 'lake', s.db.table);
  let files: string[];
  try {
    files = readdirSync(folder, { recursive: true })
      .map(String)
      .filter((f) => f.endsWith('.parquet'));
  } catch {
    return false;
  }
  if (files.length === 0) return false;
  const duck = await DuckDBInstance.create(':memory:');
  const conn = await duck.connect();
  try {
    const n = (
      await conn.runAndReadAll(
        `SELECT count(*) FROM read_parquet('${folder}/*.parquet', union_by_name = true) WHERE id = -1`,
      )
    ).getRows()[0]![0];
    return Number(n) > 0;
  } finally {
    conn.closeSync();
    duck.closeSync();
  }
}

function newScenario(db: Db, pipeline: string, mutation?: string): Scenario {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-first-minute-'));
  if (!process.env.TIDEMARK_FM_KEEP) cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  return { db, dir, pipeline, ...(mutation ? { mutation } : {}) };
}

const suffix = () => Math.random().toString(36).slice(2, 8);
const EXPECTED_KILLS = [
  expect.stringMatching(/^first-start/),
  ...Array.from({ length: KILLS_UNDER_LOAD }, (_, i) => `under-load-before-first-flush-${i + 1}`),
];

describe.each(['mysql', 'postgres'] as const)('the first minute of a %s capture, killed', (kind) => {
  const open = async (pipeline: string) => {
    const db = kind === 'mysql' ? await mysqlDb() : await pgDb(() => [defaultCdcName(pipeline, 'db')]);
    cleanup.push(() => db.close());
    return db;
  };

  it('loses no change: every kill before the first flush resumes from the committed start', async () => {
    const pipeline = `fm-${suffix()}`;
    const s = newScenario(await open(pipeline), pipeline);
    const r = await scenario(s);
    expect(r.kills).toEqual(EXPECTED_KILLS);
    expect(r.problems).toEqual([]);
  }, 600_000);

  // Postgres' slot keeps the start whatever the state says (nothing acknowledges past what is
  // committed), so only the binlog reader, which has no server-side memory of ours, can lose.
  it.runIf(kind === 'mysql')(
    'the check detects a start position made durable only at the first flush',
    async () => {
      const pipeline = `fm-${suffix()}`;
      const s = newScenario(await open(pipeline), pipeline, 'position-at-first-flush-unguarded');
      const r = await scenario(s);
      expect(r.kills).toEqual(EXPECTED_KILLS);
      expect(r.missing).toBeGreaterThan(0);
    },
    600_000,
  );

  // With the engine's guard on, a state left without a position stops the next start instead
  // (CDC_NO_POSITION) on MySQL: the binlog cannot give those changes back. Postgres resumes
  // from its slot, which still holds them.
  it('a state an earlier release left without a position: MySQL refuses, Postgres resumes from its slot', async () => {
    const pipeline = `fm-${suffix()}`;
    const db = await open(pipeline);
    const old = newScenario(db, pipeline, 'position-at-first-flush');
    const spec = writeSpec(old, 60);
    const first = new Capture(old, spec);
    await first.waitForLine('"capturing"');
    await first.kill('SIGKILL');
    const { state } = await loadState(old);
    expect(state?.position).toBeUndefined();
    expect(Object.keys(state?.tables ?? {})).toEqual([db.table]);
    const now = new Capture({ ...old, mutation: undefined } as Scenario, spec);
    if (kind === 'mysql') {
      await expect(now.waitForLine('"capturing"')).rejects.toThrow(/CDC_NO_POSITION/);
      expect(now.output).toContain('give the tables a new target');
    } else {
      await now.waitForLine('"capturing"');
      expect(await now.kill('SIGTERM')).toBe(0);
    }
  }, 300_000);
});
