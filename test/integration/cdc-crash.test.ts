/**
 * The CDC engine killed by SIGKILL at ASSERTED points of its commit protocol (a real child
 * process, test/harness/cdc-child.ts: file state, file lake, the scripted source's server state
 * on disk): before the write, between write and commit, between commit and ack, after the ack,
 * and during a lease renewal. Each kill is recorded by the child right before it dies; the test
 * fails if a kill did not land where it says. After each kill a clean child finishes the script,
 * and the lake (read back with DuckDB) must equal the model: latest row per key by __pos, each
 * committed change exactly once per (pk, __pos), the source never acknowledged past the state.
 *
 * Mutation self-checks: the same suite under each broken protocol step (a sink that reports
 * durable before writing, a store that acknowledges a commit before persisting it, a recovery
 * that removes nothing, an ack before the commit) must FAIL, so the suite can tell a correct
 * protocol from a broken one. The wrappers live in the child, never in production code.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CdcPoint } from '../../shared/engine/cdc/options.js';
import { parseCdcState } from '../../shared/engine/cdc/state.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import type { ChildConfig, Mutation } from '../harness/cdc-child.js';
import { duckLakeRows, STATE_KEY } from '../harness/cdc-engine.js';
import {
  expectedLake,
  generateScript,
  ScriptedServer,
  type ScriptParams,
} from '../harness/scripted-source.js';

const ROOT = join(import.meta.dirname, '..', '..');
const CHILD = join(ROOT, 'test/harness/cdc-child.ts');
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const SCRIPT: ScriptParams = {
  seed: 42,
  tables: 3,
  transactions: 120,
  hugeFraction: 0.05,
  hugeSize: { min: 200, max: 400 },
};

function child(config: ChildConfig): Promise<{ code: number | null; signal: string | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify(config)], {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    p.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    p.on('error', reject);
    p.on('exit', (code, signal) => resolve({ code, signal, stderr }));
  });
}

/**
 * Kills a child at `point` (its `nth` arrival) in each of `kills` runs, then lets a clean child
 * finish; returns what is wrong with the outcome (empty: the protocol held).
 */
async function crashAndRecover(
  kills: readonly { point: CdcPoint; nth: number }[],
  opts: { mutation?: Mutation; leaseTtlMs?: number; delayMs?: number } = {},
): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-cdc-crash-'));
  dirs.push(dir);
  const problems: string[] = [];
  const base = { dir, script: SCRIPT, ...opts };
  for (const [i, kill] of kills.entries()) {
    // Flush sizes differ between runs, so a rerun never cuts the same ranges as the run it
    // recovers from (leftovers then have other names than the objects that replace them).
    const r = await child({ ...base, rows: 40 + 17 * i, kill });
    if (r.signal !== 'SIGKILL')
      problems.push(
        `run ${i}: expected a SIGKILL at ${kill.point}, got ${r.code ?? r.signal}: ${r.stderr.slice(-400)}`,
      );
  }
  const landed = (() => {
    try {
      return readFileSync(join(dir, 'kills'), 'utf8').trim().split('\n').filter(Boolean);
    } catch {
      return [];
    }
  })();
  const wanted = kills.map((k) => `${k.point}#${k.nth}`);
  if (landed.join() !== wanted.join())
    problems.push(`kills landed at [${landed.join()}], not [${wanted.join()}]`);
  const last = await child({ ...base, rows: 33 });
  if (last.code !== 0) {
    problems.push(`the clean run failed: ${last.stderr.split('\n')[0]}`);
    return problems;
  }
  const script = generateScript(SCRIPT);
  const tables = script.tables.map((t) => t.name);
  const lake = await duckLakeRows(dir, tables);
  const expected = expectedLake(script);
  for (const t of tables) {
    const rows = lake.get(t) ?? [];
    const keys = rows.map(([id, pos]) => `${id}|${pos}`);
    if (new Set(keys).size !== keys.length)
      problems.push(`${t}: ${keys.length - new Set(keys).size} duplicate (pk, __pos) rows`);
    const latest = new Map<string, [string, string]>();
    for (const [id, pos, op] of rows) {
      const was = latest.get(id);
      if (!was || pos > was[0]) latest.set(id, [pos, op]);
    }
    const got = new Map([...latest].filter(([, [, op]]) => op !== 'd').map(([id, [pos]]) => [id, pos]));
    const want = new Map([...(expected.get(t) ?? new Map())].map(([id, row]) => [id, String(row.__pos)]));
    if (JSON.stringify([...got].sort()) !== JSON.stringify([...want].sort()))
      problems.push(`${t}: the lake's latest rows differ from the model (${got.size} vs ${want.size} keys)`);
  }
  const state = parseCdcState((await new FileCursorStore(join(dir, 'state')).load(STATE_KEY)).value);
  const confirmed = await new ScriptedServer(script, join(dir, 'server')).confirmed();
  if (Number(confirmed?.value ?? -1) > Number(state.position?.value ?? -1))
    problems.push(
      `the source is acknowledged at ${confirmed?.value}, past the state's ${state.position?.value}`,
    );
  return problems;
}

const KILLS: Record<string, { point: CdcPoint; nth: number }[]> = {
  'before the write': [
    { point: 'before-write', nth: 2 },
    { point: 'before-write', nth: 3 },
  ],
  'between write and commit': [
    { point: 'after-write', nth: 2 },
    { point: 'after-write', nth: 3 },
  ],
  'between commit and ack': [
    { point: 'after-commit', nth: 2 },
    { point: 'after-commit', nth: 4 },
  ],
  'after the ack': [{ point: 'after-ack', nth: 3 }],
};

describe('CDC engine killed by SIGKILL', { timeout: 600_000 }, () => {
  for (const [name, kills] of Object.entries(KILLS)) {
    it(`loses nothing and duplicates nothing when killed ${name}`, async () => {
      expect(await crashAndRecover(kills)).toEqual([]);
    });
  }

  it('loses nothing when killed during a lease renewal', async () => {
    // A short lease renewed every second and a slow log, so renewals happen mid-stream.
    expect(await crashAndRecover([{ point: 'renewal', nth: 1 }], { leaseTtlMs: 3000, delayMs: 5 })).toEqual(
      [],
    );
  });

  it('SIGTERM flushes, commits, acks and releases the lease, and the process exits 0', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tidemark-cdc-term-'));
    dirs.push(dir);
    const config: ChildConfig = { dir, script: SCRIPT, rows: 1_000_000, delayMs: 5 };
    const p = spawn(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify(config)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const exited = new Promise<number | null>((resolve) => p.on('exit', (code) => resolve(code)));
    // Once the capture has committed its first state (the lease is held, rows are flowing)...
    const store = new FileCursorStore(join(dir, 'state'));
    for (let i = 0; i < 600 && (await store.load(STATE_KEY)).lease === undefined; i++)
      await new Promise((r) => setTimeout(r, 50));
    expect((await store.load(STATE_KEY)).lease).toBeDefined();
    await new Promise((r) => setTimeout(r, 300));
    p.kill('SIGTERM');
    expect(await exited).toBe(0);
    const summary = JSON.parse(out.trim().split('\n').at(-1)!) as { stopped: string; rows: number };
    // It stopped because it was told to, with rows made durable by its final flush.
    expect(summary.stopped).toBe('interrupted');
    expect(summary.rows).toBeGreaterThan(0);
    const rec = await store.load(STATE_KEY);
    expect(rec.lease).toBeUndefined();
    const state = parseCdcState(rec.value);
    const script = generateScript(SCRIPT);
    expect(await new ScriptedServer(script, join(dir, 'server')).confirmed()).toEqual(state.position);
    expect(Object.values(state.tables).reduce((n, t) => n + t.rows, 0)).toBe(summary.rows);
  });

  const MUTANTS: Record<Mutation, { point: CdcPoint; nth: number }[]> = {
    'durable-before-write': [{ point: 'after-commit', nth: 2 }],
    'ack-before-persist': [{ point: 'after-ack', nth: 2 }],
    'noop-recover': [
      { point: 'after-write', nth: 2 },
      { point: 'after-write', nth: 3 },
    ],
    'ack-before-commit': [{ point: 'before-write', nth: 3 }],
  };
  for (const [mutation, kills] of Object.entries(MUTANTS) as [
    Mutation,
    { point: CdcPoint; nth: number }[],
  ][]) {
    it(`mutation check: the suite FAILS with ${mutation}`, async () => {
      const problems = await crashAndRecover(kills, { mutation });
      expect(problems.length, `the crash suite passed with ${mutation}`).toBeGreaterThan(0);
    });
  }
});
