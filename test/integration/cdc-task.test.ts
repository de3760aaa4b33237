/**
 * `tidemark cdc` and the CDC task's entrypoint (functions/cdc/main.ts) in REAL child processes on
 * the scripted source (test/harness/cdc-task-child.ts registers it before the spec is parsed):
 *
 *   (a) `tidemark cdc` drains on SIGTERM and exits 0: the lease is released and the state's
 *       position is what the scripted server has confirmed; its logs (not a TTY) are JSON lines;
 *   (b) the entrypoint, Fargate-style (no liveness judgement, leaseTtlSeconds 15): a second task
 *       started while the first runs is a standby (its health endpoint says so), takes over once
 *       the first is SIGKILLed and its lease expires, and finishes the script with nothing lost
 *       (the lake read back with DuckDB equals the model);
 *   (c) the BUNDLED entrypoint (functions/bundle.ts `bundleHandler('cdc')`) runs (a) under plain
 *       `node`, the scripted source registered through TIDEMARK_REGISTER;
 *   (d) the bundled entrypoint runs (b), the same scenario function (`standbyTakeover`);
 *   (e) `tidemark cdc` on a pseudo-terminal (`script`, util-linux) draws the live status line:
 *       the source's state and position, per table its rows and last flush.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bundleHandler } from '../../functions/bundle.js';
import { parseCdcState } from '../../shared/engine/cdc/state.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { duckLakeRows, STATE_KEY } from '../harness/cdc-engine.js';
import type { CdcTaskSource } from '../harness/cdc-task-source.js';
import {
  expectedLake,
  generateScript,
  ScriptedServer,
  type ScriptParams,
} from '../harness/scripted-source.js';

const ROOT = join(import.meta.dirname, '..', '..');
const CHILD = join(ROOT, 'test/harness/cdc-task-child.ts');
const REGISTER = join(ROOT, 'test/harness/cdc-task-register.mjs');
const dirs: string[] = [];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-cdc-task-'));
  dirs.push(dir);
  return dir;
}

/** A spec (JSON is YAML) with one scripted source `src` of pipeline `p` capturing every script table. */
function writeSpec(dir: string, script: ScriptParams, cdc: Record<string, unknown> = {}): string {
  const tables = generateScript(script).tables.map((t) => ({
    source: 'src',
    table: t.name,
    mode: 'cdc',
    snapshot: 'never',
    writeMode: 'upsert',
  }));
  const spec = {
    pipeline: 'p',
    sources: {
      src: {
        kind: 'scripted',
        url: 'scripted://local',
        cdc: { flushRows: 60, flushSeconds: 1, leaseTtlSeconds: 15, stopTimeoutSeconds: 20, ...cdc },
      },
    },
    tables,
    state: { dir: join(dir, 'state') },
    lake: { uri: `file://${join(dir, 'lake')}` },
  };
  const file = join(dir, 'spec.yaml');
  writeFileSync(file, JSON.stringify(spec, null, 2));
  return file;
}

interface Child {
  readonly process: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** stderr so far. */
  stderr(): string;
  /** The health endpoint's port, once the entrypoint logged it. */
  healthPort(): Promise<number>;
}

function start(
  args: readonly string[],
  env: Record<string, string>,
  node: string[] = ['--import', 'tsx'],
): Child {
  const p = spawn(process.execPath, [...node, ...args], {
    cwd: ROOT,
    env: { ...process.env, TIDEMARK_HEALTH_PORT: '0', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(p);
  let stderr = '';
  p.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    p.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    process: p,
    exited,
    stderr: () => stderr,
    async healthPort() {
      return until(() => {
        const m = /"msg":"health endpoint"[^\n]*"port":(\d+)/.exec(stderr);
        return m ? Number(m[1]) : undefined;
      }, `a health endpoint in ${stderr}`);
    },
  };
}

/** Polls `f` every 50 ms until it gives a value (20 s at most). */
async function until<T>(
  f: () => T | undefined | Promise<T | undefined>,
  what: string,
  ms = 20_000,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function health(
  port: number,
): Promise<{ status: number; body: { state: string; sources: unknown[] } }> {
  const res = await fetch(`http://127.0.0.1:${port}/health`);
  return { status: res.status, body: (await res.json()) as { state: string; sources: unknown[] } };
}

/** Rows the state says are durable, over every table. */
async function durableRows(dir: string): Promise<number> {
  const rec = await new FileCursorStore(join(dir, 'state')).load(STATE_KEY);
  if (rec.value === undefined) return 0;
  return Object.values(parseCdcState(rec.value).tables).reduce((n, t) => n + t.rows, 0);
}

/** After a drain: the lease is released and the state's position is what the server confirmed. */
async function expectDrained(dir: string, script: ScriptParams): Promise<void> {
  const rec = await new FileCursorStore(join(dir, 'state')).load(STATE_KEY);
  expect(rec.lease).toBeUndefined();
  const state = parseCdcState(rec.value);
  expect(state.position).toBeDefined();
  const confirmed = await new ScriptedServer(generateScript(script), join(dir, 'server')).confirmed();
  expect(confirmed).toEqual(state.position);
}

/** The lake's latest row per key (deletes applied) against the model, and no (pk, __pos) twice. */
async function expectLakeEqualsModel(dir: string, params: ScriptParams): Promise<void> {
  const script = generateScript(params);
  const tables = script.tables.map((t) => t.name);
  const lake = await duckLakeRows(dir, tables);
  const expected = expectedLake(script);
  for (const t of tables) {
    const rows = lake.get(t) ?? [];
    const keys = rows.map(([id, pos]) => `${id}|${pos}`);
    expect(new Set(keys).size, `${t}: duplicate (pk, __pos) rows`).toBe(keys.length);
    const latest = new Map<string, [string, string]>();
    for (const [id, pos, op] of rows) {
      const was = latest.get(id);
      if (!was || pos > was[0]) latest.set(id, [pos, op]);
    }
    const got = [...latest].filter(([, [, op]]) => op !== 'd').map(([id, [pos]]) => [id, pos]);
    const want = [...(expected.get(t) ?? new Map())].map(([id, row]) => [id, String(row.__pos)]);
    expect(got.sort(), `${t}: the lake's latest rows`).toEqual(want.sort());
  }
}

/** Starts the capture, waits for rows to be durable, SIGTERMs it; returns its exit. */
async function drainAfterRows(
  child: Child,
  dir: string,
): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  await until(async () => (await durableRows(dir)) > 0 || undefined, 'durable rows');
  child.process.kill('SIGTERM');
  return child.exited;
}

/**
 * (b)'s scenario, for the TypeScript entrypoint and the bundled one alike: a first task active,
 * a second started while it runs is a standby (its health endpoint says so), the first is
 * SIGKILLed, the second takes over once the lease expires (leaseTtlSeconds 15), finishes the
 * script and exits 0; the lake equals the model and the state's position is what the server
 * confirmed.
 */
async function standbyTakeover(startTask: (env: Record<string, string>) => Child): Promise<void> {
  const dir = freshDir();
  const script: ScriptParams = { seed: 11, tables: 2, transactions: 400 };
  const specFile = writeSpec(dir, script);
  const env = {
    TIDEMARK_SPEC_FILE: specFile,
    TIDEMARK_TEST_CDC: JSON.stringify({
      script,
      dir: join(dir, 'server'),
      delayMs: 3,
    } satisfies CdcTaskSource),
  };
  const first = startTask(env);
  const firstPort = await first.healthPort();
  await until(
    async () => (await health(firstPort)).body.state === 'active' || undefined,
    'the first task active',
  );
  await until(async () => (await durableRows(dir)) > 0 || undefined, 'durable rows');
  const second = startTask(env);
  const secondPort = await second.healthPort();
  const standby = await until(async () => {
    const h = await health(secondPort);
    return h.body.state === 'standby' ? h : undefined;
  }, 'the second task standby');
  // A standby is healthy.
  expect(standby.status).toBe(200);
  expect(standby.body.sources).toMatchObject([{ source: 'src', state: 'standby' }]);
  first.process.kill('SIGKILL');
  expect((await first.exited).signal).toBe('SIGKILL');
  // No liveness judgement in a task: the second takes over when the lease expires (15 s).
  await until(
    async () => {
      const h = await health(secondPort).catch(() => undefined);
      return h?.body.state === 'active' || h?.body.state === 'stopped' || undefined;
    },
    'the second task active',
    40_000,
  );
  const exit = await second.exited;
  expect(exit, second.stderr()).toEqual({ code: 0, signal: null });
  expect(second.stderr()).toContain('"msg":"standby: another process holds the lease');
  expect(second.stderr()).toContain('"msg":"the change stream ended"');
  await expectLakeEqualsModel(dir, script);
  const state = parseCdcState((await new FileCursorStore(join(dir, 'state')).load(STATE_KEY)).value);
  const confirmed = await new ScriptedServer(generateScript(script), join(dir, 'server')).confirmed();
  expect(confirmed).toEqual(state.position);
}

/** `s` as one POSIX shell word. */
function shellQuote(s: string): string {
  return `'${s.replace(/'/g, "'\\''")}'`;
}

const LONG: ScriptParams = { seed: 7, tables: 2, transactions: 400 };

describe('the CDC task in real processes', { timeout: 180_000 }, () => {
  it('(a) tidemark cdc: SIGTERM drains and exits 0, the lease released, state == confirmed', async () => {
    const dir = freshDir();
    const spec = writeSpec(dir, LONG);
    const source: CdcTaskSource = { script: LONG, dir: join(dir, 'server'), delayMs: 5 };
    const child = start([CHILD, 'cli', 'cdc', '-c', spec], { TIDEMARK_TEST_CDC: JSON.stringify(source) });
    const exit = await drainAfterRows(child, dir);
    expect(exit, child.stderr()).toEqual({ code: 0, signal: null });
    await expectDrained(dir, LONG);
    // Not a TTY: every log line is JSON; the drain is logged.
    const lines = child.stderr().trim().split('\n');
    for (const l of lines) expect(() => JSON.parse(l), l).not.toThrow();
    expect(lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toContain('stopped: drained');
  });

  it('(b) entrypoint: a second task is a standby, takes over after the first is SIGKILLed, nothing lost', async () => {
    await standbyTakeover((env) => start([CHILD, 'entrypoint'], env));
  });

  it('entrypoint: a failed runner answers 503 failing with the error, then exits 1', async () => {
    const dir = freshDir();
    const specFile = writeSpec(dir, LONG);
    // A table the script does not have: introspection fails.
    const spec = JSON.parse(readFileSync(specFile, 'utf8')) as { tables: Record<string, unknown>[] };
    spec.tables.push({ ...spec.tables[0], table: 'public.missing' });
    writeFileSync(specFile, JSON.stringify(spec));
    const child = start([CHILD, 'entrypoint'], {
      TIDEMARK_SPEC_FILE: specFile,
      TIDEMARK_FAILING_GRACE_MS: '3000',
      TIDEMARK_TEST_CDC: JSON.stringify({ script: LONG, dir: join(dir, 'server') } satisfies CdcTaskSource),
    });
    const port = await child.healthPort();
    const failing = await until(async () => {
      const h = await health(port);
      return h.body.state === 'failing' ? h : undefined;
    }, 'the task failing');
    expect(failing.status).toBe(503);
    expect((failing.body as unknown as { error: { message: string } }).error.message).toMatch(
      /public\.missing/,
    );
    expect((await child.exited).code).toBe(1);
  });

  it('(c) the bundled entrypoint under plain node: healthy while active, SIGTERM drains and exits 0', async () => {
    const dir = freshDir();
    const bundle = await bundleHandler('cdc', join(dir, 'bundle'));
    const specFile = writeSpec(dir, LONG);
    const source: CdcTaskSource = { script: LONG, dir: join(dir, 'server'), delayMs: 5 };
    // Plain node, no tsx loader: only the TIDEMARK_REGISTER module loads the scripted source
    // through tsx (see test/harness/cdc-task-register.mjs).
    const child = start(
      [bundle.entry],
      {
        TIDEMARK_SPEC_FILE: specFile,
        TIDEMARK_REGISTER: REGISTER,
        TIDEMARK_TEST_CDC: JSON.stringify(source),
      },
      [],
    );
    const port = await child.healthPort();
    const h = await until(async () => {
      const r = await health(port);
      return r.body.state === 'active' ? r : undefined;
    }, 'the bundled task active');
    expect(h.status).toBe(200);
    const exit = await drainAfterRows(child, dir);
    expect(exit, child.stderr()).toEqual({ code: 0, signal: null });
    await expectDrained(dir, LONG);
    expect(child.stderr()).toContain('"msg":"stopped: drained"');
  });

  it('(d) the bundled entrypoint under plain node runs (b): standby, takeover after SIGKILL, nothing lost', async () => {
    const bundle = await bundleHandler('cdc', join(freshDir(), 'bundle'));
    await standbyTakeover((env) => start([bundle.entry], { ...env, TIDEMARK_REGISTER: REGISTER }, []));
  });

  it('(e) tidemark cdc on a TTY: a live status line with the source position and per table rows', async () => {
    const dir = freshDir();
    const spec = writeSpec(dir, LONG);
    const source: CdcTaskSource = { script: LONG, dir: join(dir, 'server'), delayMs: 5 };
    const tables = generateScript(LONG).tables.map((t) => t.name);
    // `script` runs the CLI child on a pseudo-terminal (its stdout and stderr a TTY) and copies
    // what it writes there to its own stdout; -e: its exit code is the child's. The pty has no
    // size, so stty gives it a width the whole line fits in.
    const command = `stty cols 400; exec ${[process.execPath, '--import', 'tsx', CHILD, 'cli', 'cdc', '-c', spec].map(shellQuote).join(' ')}`;
    const p = spawn('script', ['-qfec', command, '/dev/null'], {
      cwd: ROOT,
      env: { ...process.env, TIDEMARK_TEST_CDC: JSON.stringify(source) },
      // stdin a pipe left open: `script` copies its stdin to the pty, an EOF there would end it.
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    children.push(p);
    let out = '';
    p.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
    });
    p.stderr!.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      p.on('exit', (code, signal) => resolve({ code, signal })),
    );
    // The status line (functions/cli/commands/cdc.ts statusText): `src: active @ <position>`,
    // then per table `<table> <rows> rows, flushed <ago>[, lag <lag>]`, a table with rows.
    const table = tables.map((t) => t.replace(/[.]/g, '\\.')).join('|');
    const status = new RegExp(
      `src: active @ ([^|\\r\\n]+?) \\|[^\\r\\n]*?(${table}) ([1-9]\\d*) rows, flushed (\\d+s ago|\\d+m ago)`,
    );
    const m = await until(() => status.exec(out) ?? undefined, `a status line in ${out}`);
    // The position the scripted source reports (`step <n>`).
    expect(m[1]).toMatch(/^step \d+$/);
    // Every table of the spec is on the line.
    const lineText = out.slice(m.index).split(/\r|\n/)[0]!;
    for (const t of tables)
      expect(lineText, out).toMatch(new RegExp(`${t.replace(/[.]/g, '\\.')} \\d+ rows`));
    // On a TTY the logs are text, not JSON lines.
    expect(out).not.toMatch(/^\{.*"msg":/m);
    // SIGTERM to the CLI itself (`script`'s child: the shell exec'd it): it drains and exits 0,
    // and `script` (-e) exits with that. (A SIGTERM to `script` would SIGKILL it 2 s later.)
    const cli = Number(
      execFileSync('ps', ['-o', 'pid=', '--ppid', String(p.pid)], { encoding: 'utf8' }).trim(),
    );
    expect(cli).toBeGreaterThan(0);
    process.kill(cli, 'SIGTERM');
    const exit = await exited;
    expect(exit, out).toEqual({ code: 0, signal: null });
    expect(out).toContain('stopped: drained');
    await expectDrained(dir, LONG);
  });
});
