/**
 * `tidemark run`, `status` and `unlock` as an operator uses them, through the real bin in child
 * processes against the harness's Postgres and MariaDB: what `status --json` says over a table's
 * life (never run, synced, failed, reset, locked by a live run), Ctrl-C in the middle of a sync,
 * a SIGKILLed holder taken over at once, and `run --json` output that is JSON only.
 *
 * Nothing here waits on a clock: mid-run moments are detected by polling the state file while
 * the child runs (and the test fails if the child ended first); blocked runs are blocked by an
 * open transaction the test holds, not by timing.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSpec, type Spec } from '../../shared/config/spec.js';
import type { StateRecord } from '../../shared/contracts/state.js';
import { incrementalStateKey } from '../../shared/engine/incremental/state.js';
import type { TableStatus } from '../../shared/engine/incremental/status.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import {
  lakeRows,
  latest,
  localSpec,
  mysqlFixture,
  postgresFixture,
  type SourceFixture,
} from './incremental/fixture.js';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'tidemark.js');

interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Children still running: killed if a test fails half-way. */
const children = new Set<ChildProcess>();

/** Starts the real bin on a spec (written as JSON into `dir`) without waiting for it. */
function start(dir: string, spec: Spec, args: string[]): { child: ChildProcess; exited: Promise<Exit> } {
  const specFile = join(dir, 'tidemark.json');
  writeFileSync(specFile, JSON.stringify(spec));
  const [cmd, ...rest] = args;
  const child = spawn(process.execPath, [BIN, cmd!, '-c', specFile, ...rest], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TIDEMARK_LOG_LEVEL: 'info' },
  });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<Exit>((resolve) =>
    child.on('close', (code, signal) => {
      children.delete(child);
      resolve({ code, signal, stdout, stderr });
    }),
  );
  return { child, exited };
}

function cli(dir: string, spec: Spec, args: string[]): Promise<Exit> {
  return start(dir, spec, args).exited;
}

/** Every stdout line parsed as JSON (a line that does not parse fails the test). */
function jsonLines(out: string): Record<string, unknown>[] {
  return out
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** `status --json` of the spec's first table: exactly one object. */
async function status(dir: string, spec: Spec): Promise<TableStatus> {
  const r = await cli(dir, spec, ['status', '--json']);
  expect(r.code, r.stderr).toBe(0);
  const lines = jsonLines(r.stdout);
  expect(lines).toHaveLength(1);
  return lines[0] as unknown as TableStatus;
}

function stateOf(spec: Spec): Promise<StateRecord> {
  return new FileCursorStore(spec.state.dir!).load(incrementalStateKey(spec.pipeline, spec.tables[0]!.table));
}

/**
 * Polls the state until `ready` holds, while `child` runs. Resolves whether the child was still
 * running at that moment; the caller fails the test if it was not.
 */
async function whileRunning(
  child: ChildProcess,
  spec: Spec,
  ready: (r: StateRecord) => boolean,
): Promise<boolean> {
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) return false;
    if (ready(await stateOf(spec))) return child.exitCode === null && child.signalCode === null;
    await new Promise((r) => setTimeout(r, 20));
  }
}

const ownedByChild = (child: ChildProcess) => (r: StateRecord) =>
  r.lease?.owner.startsWith(`${hostname()}:${child.pid}:`) === true;

describe('tidemark run / status / unlock', () => {
  let fx: SourceFixture;
  beforeAll(async () => {
    fx = await postgresFixture('cli_status');
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await fx?.drop();
  });

  it("status --json over a table's life: never run, synced, failed (cursor kept), reset (no stale cursor)", async () => {
    const table = 'public.life';
    await fx.createTable(table);
    await fx.insertRange(1, 2501, fx.plus(fx.ts('2024-01-01 00:00:00'), 'g * 60', 'second'), table);
    const { spec, dir, lakeDir } = localSpec(fx, { table, pageSize: 1000 });

    const never = await status(dir, spec);
    expect(never).toMatchObject({
      table: 'public.life',
      synced: false,
      cursor: null,
      nextPage: 0,
      rowVersionsWritten: 0,
      lake: { objects: 0, bytes: 0 },
      lastRun: null,
      lastError: null,
      freshness: null,
      lease: { held: false },
    });

    const run = await cli(dir, spec, ['run', '--json']);
    expect(run.code, run.stderr).toBe(0);
    const synced = await status(dir, spec);
    expect(synced).toMatchObject({
      synced: true,
      cursor: 'updated_at=2024-01-02 17:40:00+00, id=2500',
      nextPage: 3,
      rowVersionsWritten: 2500,
      lake: { objects: 3 },
      lastRun: { result: 'ok', stopped: 'caught-up', rows: 2500, pages: 3 },
      lastError: null,
      // The newest synced cursor value, as an instant: 2500 minutes after 2024-01-01 UTC.
      freshness: { newestCursorAt: '2024-01-02T17:40:00.000Z' },
      lease: { held: false },
    });
    expect(synced.lake.bytes).toBeGreaterThan(0);
    expect(synced.freshness!.ageSeconds).toBeGreaterThan(0);
    expect(synced.sinceLastRunSeconds).toBeGreaterThanOrEqual(0);
    expect(latest(await lakeRows(lakeDir, 'public.life'))).toEqual(await fx.rows(table));

    // The cursor column disappears between runs: the run fails, the error is recorded by its
    // final commit, and the cursor stays where the last durable commit left it.
    await fx.exec(`ALTER TABLE ${table} RENAME COLUMN updated_at TO changed_at`);
    const failed = await cli(dir, spec, ['run', '--json']);
    expect(failed.code).toBe(1);
    const [failure] = jsonLines(failed.stdout);
    expect(failure).toMatchObject({
      table: 'public.life',
      status: 'error',
      error: { code: expect.stringMatching(/^[A-Z_]+$/), message: expect.stringMatching(/updated_at/) },
    });
    const afterFailure = await status(dir, spec);
    expect(afterFailure).toMatchObject({
      cursor: synced.cursor,
      nextPage: 3,
      rowVersionsWritten: 2500,
      lastRun: { result: 'error', stopped: 'error', rows: 0, pages: 0, error: failure!.error },
      lastError: failure!.error,
      freshness: { newestCursorAt: synced.freshness!.newestCursorAt },
      lastCommitAt: synced.lastCommitAt,
    });
    const human = await cli(dir, spec, ['status']);
    const code = (failure!.error as { code: string }).code;
    expect(human.stdout).toMatch(new RegExp(`last run +failed \\(${code}\\)`));
    expect(human.stdout).toMatch(
      new RegExp(
        `last error +(\\d{4}-\\d\\d-\\d\\d )?\\d\\d:\\d\\d:\\d\\d UTC \\(\\d+ (s|min) ago\\): ${code}: `,
      ),
    );
    await fx.exec(`ALTER TABLE ${table} RENAME COLUMN changed_at TO updated_at`);

    // After reset the old cursor is gone from status (it used to stay as cursorText).
    const reset = await cli(dir, spec, ['reset', '--table', table]);
    expect(reset.code, reset.stderr).toBe(0);
    const afterReset = await status(dir, spec);
    expect(afterReset).toMatchObject({
      synced: true,
      cursor: null,
      freshness: null,
      nextPage: 3,
      lake: { objects: 3 },
    });
    const humanReset = await cli(dir, spec, ['status']);
    expect(humanReset.stdout).not.toContain('id=2500');
  });

  it('status shows a live run holding the lease with a human time; unlock and a second run refuse (75); Ctrl-C abandons the blocked read (130)', async () => {
    const table = 'public.held';
    await fx.createTable(table);
    await fx.insertRange(1, 1001, fx.plus(fx.ts('2024-01-01 00:00:00'), 'g', 'second'), table);
    // An integer cursor waits (up to the lag, here 10 min) for open transactions to end: the
    // transaction held open below keeps the run inside its first page read, holding the lease.
    const { spec, dir, lakeDir } = localSpec(fx, { table, cursor: 'id', lagSeconds: 600, pageSize: 300 });
    const blocker = await fx.session();
    await blocker.exec('BEGIN');
    await blocker.exec('SELECT txid_current()');
    try {
      const run = start(dir, spec, ['run', '--json']);
      expect(await whileRunning(run.child, spec, (r) => ownedByChild(run.child)(r) && r.version >= 1)).toBe(
        true,
      );

      const held = await status(dir, spec);
      expect(held.lease).toMatchObject({
        held: true,
        holder: `${hostname()}:${run.child.pid}`,
        kind: 'local',
        alive: true,
      });
      expect(held.lease.expiresInSeconds).toBeGreaterThan(0);
      expect(Date.parse(held.lease.expiresAt!)).toBeGreaterThan(Date.now());
      const human = await cli(dir, spec, ['status']);
      expect(human.stdout).toMatch(
        new RegExp(
          `lease +held by ${hostname()}:${run.child.pid} until (\\d{4}-\\d\\d-\\d\\d )?\\d\\d:\\d\\d:\\d\\d UTC \\(in \\d+ min\\); the process is running`,
        ),
      );

      const unlock = await cli(dir, spec, ['unlock', '--table', table]);
      expect(unlock.code).toBe(75);
      expect(unlock.stderr).toMatch(/which is running/);
      const second = await cli(dir, spec, ['run', '--json']);
      expect(second.code).toBe(75);
      expect(jsonLines(second.stdout)).toEqual([
        expect.objectContaining({
          status: 'lease-held',
          leaseHolder: expect.objectContaining({ holder: `${hostname()}:${run.child.pid}` }),
        }),
      ]);

      expect(run.child.exitCode).toBeNull();
      run.child.kill('SIGINT');
      const interrupted = await run.exited;
      expect(interrupted.code, interrupted.stderr).toBe(130);
      expect(jsonLines(interrupted.stdout)).toEqual([
        expect.objectContaining({ status: 'ok', stopped: 'interrupted', pages: 0, more: true }),
      ]);
    } finally {
      await blocker.exec('COMMIT');
      await blocker.close();
    }
    const after = await status(dir, spec);
    expect(after).toMatchObject({
      lease: { held: false },
      lastRun: { result: 'ok', stopped: 'interrupted', pages: 0 },
    });
    const next = await cli(dir, spec, ['run', '--json']);
    expect(next.code, next.stderr).toBe(0);
    expect(jsonLines(next.stdout)).toEqual([
      expect.objectContaining({ status: 'ok', rows: 1000, stopped: 'caught-up' }),
    ]);
    expect(latest(await lakeRows(lakeDir, table))).toEqual(await fx.rows(table));
  });

  it('SIGINT mid-sync: the child exits 130 after committing what is durable, the next run starts at once, the lake equals the table', async () => {
    const table = 'public.sigint';
    await fx.createTable(table);
    await fx.insertRange(1, 40_001, fx.plus(fx.ts('2024-01-01 00:00:00'), 'g', 'millisecond'), table);
    const { spec, dir, lakeDir } = localSpec(fx, { table, pageSize: 200 });
    const run = start(dir, spec, ['run', '--json']);
    // Mid-sync: at least one page committed by this child, which is still running.
    const landed = await whileRunning(
      run.child,
      spec,
      (r) => ownedByChild(run.child)(r) && (r.value?.seq as number) >= 1,
    );
    expect(landed, 'the run must still be running when SIGINT is sent').toBe(true);
    run.child.kill('SIGINT');
    const interrupted = await run.exited;
    expect(interrupted.code, interrupted.stderr).toBe(130);
    const [summary] = jsonLines(interrupted.stdout);
    expect(jsonLines(interrupted.stdout)).toHaveLength(1);
    expect(summary).toMatchObject({ status: 'ok', stopped: 'interrupted', more: true });
    expect(summary!.rows as number).toBeLessThan(40_000);
    // What is durable is committed and nothing else: one object per committed page, no lease.
    const state = await stateOf(spec);
    expect(state.lease).toBeUndefined();
    expect(state.value).toMatchObject({ seq: summary!.seqAfter, lastRun: { stopped: 'interrupted' } });
    expect((await lakeRows(lakeDir, table)).length).toBe(summary!.rows);

    const next = await cli(dir, spec, ['run', '--json']);
    expect(next.code, next.stderr).toBe(0);
    const [resumed] = jsonLines(next.stdout);
    expect(resumed).toMatchObject({ status: 'ok', stopped: 'caught-up', seqBefore: summary!.seqAfter });
    expect(resumed).not.toHaveProperty('tookOverFrom');
    expect((summary!.rows as number) + (resumed!.rows as number)).toBe(40_000);
    const lake = await lakeRows(lakeDir, table);
    expect(latest(lake)).toEqual(await fx.rows(table));
  });

  it('a SIGKILLed local holder is seen dead: status says so, the next run takes over at once; unlock removes a dead holder too', async () => {
    const table = 'public.sigkill';
    await fx.createTable(table);
    await fx.insertRange(1, 40_001, fx.plus(fx.ts('2024-01-01 00:00:00'), 'g', 'millisecond'), table);
    const { spec, dir, lakeDir } = localSpec(fx, { table, pageSize: 200 });

    const killSoonAfterFirstPage = async () => {
      const run = start(dir, spec, ['run', '--json']);
      const landed = await whileRunning(
        run.child,
        spec,
        (r) => ownedByChild(run.child)(r) && (r.value?.seq as number) >= 1,
      );
      expect(landed, 'the run must still be running when SIGKILL is sent').toBe(true);
      run.child.kill('SIGKILL');
      expect((await run.exited).signal).toBe('SIGKILL');
      const left = await stateOf(spec);
      // The dead run's lease would block every run for its whole 20-minute TTL.
      expect(left.lease?.owner).toMatch(new RegExp(`^${hostname()}:${run.child.pid}:\\d+:`));
      expect(left.lease!.expiresAt).toBeGreaterThan(Date.now() + 60_000);
      return left.lease!.owner;
    };

    const dead = await killSoonAfterFirstPage();
    const seen = await status(dir, spec);
    expect(seen.lease).toMatchObject({ held: true, owner: dead, alive: false });
    const human = await cli(dir, spec, ['status']);
    expect(human.stdout).toMatch(/that process is gone: the next local run takes the lease over/);
    const next = await cli(dir, spec, ['run', '--json', '--max-pages', '3']);
    expect(next.code, next.stderr).toBe(0);
    expect(jsonLines(next.stdout)).toEqual([
      expect.objectContaining({ status: 'ok', tookOverFrom: dead, pages: 3, stopped: 'max-pages' }),
    ]);

    const dead2 = await killSoonAfterFirstPage();
    const unlock = await cli(dir, spec, ['unlock', '--table', table]);
    expect(unlock.code, unlock.stderr).toBe(0);
    expect(unlock.stdout).toMatch(/removed the lease of .* \(that process is gone\)/);
    expect((await stateOf(spec)).lease).toBeUndefined();
    const rest = await cli(dir, spec, ['run', '--json']);
    expect(rest.code, rest.stderr).toBe(0);
    expect(jsonLines(rest.stdout)).toEqual([expect.objectContaining({ status: 'ok', stopped: 'caught-up' })]);
    expect(jsonLines(rest.stdout)[0]).not.toHaveProperty('tookOverFrom');
    expect(dead2).not.toBe(dead);
    // Killed attempts left at most an uncommitted object each, removed by recovery: the lake
    // holds each row once per committed version, and its latest versions equal the table.
    const lake = await lakeRows(lakeDir, table);
    expect(new Set(lake.map((r) => `${r.id}/${r.pos}`)).size).toBe(lake.length);
    expect(latest(lake)).toEqual(await fx.rows(table));
  });

  it('with --json an error before any table runs is a JSON object too', async () => {
    const { spec, dir } = localSpec(fx, { table: 'public.whatever' });
    for (const cmd of ['run', 'status']) {
      const r = await cli(dir, spec, [cmd, '--json', '--table', 'public.nope']);
      expect(r.code).toBe(1);
      expect(jsonLines(r.stdout)).toEqual([
        {
          status: 'error',
          error: { code: 'CONFIG_INVALID', message: expect.stringMatching(/no table "public.nope"/) },
        },
      ]);
      expect(r.stderr).toMatch(/^tidemark: --table: no table/);
    }
  });

  it('unlock needs --force for a holder this host cannot check, and warns', async () => {
    const { spec, dir } = localSpec(fx, { table: 'public.elsewhere' });
    const store = new FileCursorStore(spec.state.dir!);
    const key = incrementalStateKey(spec.pipeline, 'public.elsewhere');
    const other = `not-${hostname()}:4242:977:0a1b2c3d`;
    await store.acquire(key, other, 20 * 60_000);
    const refused = await cli(dir, spec, ['unlock', '--table', 'public.elsewhere']);
    expect(refused.code).toBe(75);
    // The headline says why, the indented line after it how (args.ts errorText).
    expect(refused.stderr).toMatch(
      /cannot check\n {2}if you know it is not running, run unlock again with --force/,
    );
    expect((await store.load(key)).lease?.owner).toBe(other);
    const forced = await cli(dir, spec, ['unlock', '--table', 'public.elsewhere', '--force']);
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stderr).toMatch(/warning: .*still write objects to the lake/);
    expect((await store.load(key)).lease).toBeUndefined();
  });
});

describe('tidemark run --json on several tables through a pipe', () => {
  let pg: SourceFixture;
  let my: SourceFixture;
  beforeAll(async () => {
    [pg, my] = await Promise.all([postgresFixture('cli_json'), mysqlFixture('cli_json')]);
  });
  afterAll(async () => {
    await Promise.all([pg?.drop(), my?.drop()]);
  });

  it('stdout carries only JSON: one summary per table (errors too); logs go to stderr; wall-clock cursors get their instant in the source zone', async () => {
    await pg.createTable('public.orders');
    await pg.insertRange(1, 3001, pg.plus(pg.ts('2024-01-01 00:00:00'), 'g', 'second'), 'public.orders');
    // A `timestamp` (no zone) cursor in a database whose writers' zone is New York.
    const dbName = new URL(pg.url).pathname.slice(1);
    await pg.exec(`ALTER DATABASE "${dbName}" SET timezone TO 'America/New_York'`);
    await pg.exec(
      'CREATE TABLE public.events (id bigint PRIMARY KEY, v int NOT NULL, at timestamp NOT NULL)',
    );
    await pg.exec(
      `INSERT INTO public.events SELECT g, g, TIMESTAMP '2024-01-01 00:00:00' + g * INTERVAL '1 second' FROM generate_series(1, 700) g`,
    );
    await my.createTable();
    await my.insertRange(1, 1201, my.plus(my.ts('2024-01-01 00:00:00'), 'g', 'second'));
    const { dir } = localSpec(pg);
    const spec = parseSpec({
      pipeline: 'multi',
      sources: {
        pg: { kind: 'postgres', url: pg.url },
        my: { kind: 'mysql', url: my.url },
      },
      state: { dir: join(dir, 'state') },
      lake: { uri: `file://${join(dir, 'lake')}` },
      tables: [
        {
          source: 'pg',
          table: 'public.orders',
          mode: 'incremental',
          writeMode: 'append',
          cursor: 'updated_at',
          pageSize: 500,
          lagSeconds: 0,
        },
        {
          source: 'pg',
          table: 'public.events',
          mode: 'incremental',
          writeMode: 'append',
          cursor: 'at',
          pageSize: 500,
          lagSeconds: 0,
        },
        {
          source: 'my',
          table: my.table,
          mode: 'incremental',
          writeMode: 'append',
          cursor: 'updated_at',
          pageSize: 500,
          lagSeconds: 0,
        },
        {
          source: 'pg',
          table: 'public.no_such_table',
          mode: 'incremental',
          writeMode: 'append',
          cursor: 'updated_at',
          lagSeconds: 0,
        },
      ],
    });
    const specFile = join(dir, 'multi.json');
    writeFileSync(specFile, JSON.stringify(spec));
    // A real shell pipe, as `tidemark run --json | jq` has it; pipefail keeps tidemark's exit code.
    const piped = await new Promise<Exit>((resolve) => {
      const child = spawn('bash', ['-c', 'set -o pipefail; "$NODE" "$BIN" run -c "$SPEC" --json | cat'], {
        cwd: dir,
        env: {
          ...process.env,
          NODE: process.execPath,
          BIN,
          SPEC: specFile,
          TIDEMARK_LOG_LEVEL: 'debug',
          TIDEMARK_METRICS: 'emf',
        },
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
      });
      child.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
      });
      child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
    });
    expect(piped.code).toBe(1); // one table failed
    const lines = jsonLines(piped.stdout);
    expect(lines.map((l) => [l.table, l.status])).toEqual([
      ['public.orders', 'ok'],
      ['public.events', 'ok'],
      [my.table, 'ok'],
      ['public.no_such_table', 'error'],
    ]);
    expect(lines.map((l) => l.rows)).toEqual([3000, 700, 1200, undefined]);
    expect(lines[3]).toMatchObject({ error: { code: 'SOURCE_TABLE_MISSING' } });
    // Logs, progress and metrics all went to stderr, as JSON lines.
    const logs = jsonLines(
      piped.stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .join('\n'),
    );
    expect(logs.filter((l) => l.msg === 'page committed').length).toBe(6 + 2 + 3);
    expect(logs.some((l) => 'RowsSynced' in l)).toBe(true);

    const st = await new Promise<Exit>((resolve) => {
      const child = spawn(process.execPath, [BIN, 'status', '-c', specFile, '--json'], { cwd: dir });
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
      });
      child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr: '' }));
    });
    const statuses = jsonLines(st.stdout);
    expect(statuses).toHaveLength(4);
    // 2024-01-01 00:11:40 in New York is 05:11:40 UTC.
    expect(statuses[1]).toMatchObject({
      table: 'public.events',
      freshness: { newestCursorAt: '2024-01-01T05:11:40.000Z' },
    });
    // DATETIME is placed in the server's @@global.time_zone, as its writers' NOW() is.
    const conn = await mysql.createConnection({ uri: my.url });
    try {
      const [rows] = await conn.query(
        `SELECT DATE_FORMAT(CONVERT_TZ(MAX(updated_at), @@global.time_zone, '+00:00'), '%Y-%m-%dT%H:%i:%s.000Z') AS utc FROM ${my.table}`,
      );
      const utc = (rows as { utc: string }[])[0]!.utc;
      expect(statuses[2]).toMatchObject({ table: my.table, freshness: { newestCursorAt: utc } });
    } finally {
      await conn.end();
    }
    expect(statuses[3]).toMatchObject({ table: 'public.no_such_table', synced: false });
  });
});
