/**
 * `tidemark status` shows a CDC source's last failure, a failed start included (issue 28, trap 3:
 * a `tidemark cdc` that failed left `status` saying "idle" with no error), through the real CLI:
 *   - Postgres (bin/tidemark.js, file state): a start whose table does not exist fails; `status`
 *     and `status --json` then show the failure with its code and message; once the table exists,
 *     a run that commits and drains (SIGTERM, exit 0) supersedes it: neither shows it any more;
 *   - the scripted source (test/harness/cdc-task-child.ts, DynamoDB state on the harness's
 *     dynalite): a gap stops a running capture with POSITION_LOST after it committed; the failure
 *     is newer than the last commit, so `status` shows it.
 * Nothing waits on a clock: the moments are read from the state and the processes' exits.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { type CdcState, parseCdcState } from '../../shared/engine/cdc/state.js';
import type { CdcSourceStatus } from '../../shared/engine/cdc/status.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import type { CdcTaskSource } from '../harness/cdc-task-source.js';
import { freshPgDatabase } from '../harness/pg.js';
import { generateScript, type ScriptParams } from '../harness/scripted-source.js';
import { testServers } from '../harness/servers.js';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'tidemark.js');
const CHILD = join(ROOT, 'test', 'harness', 'cdc-task-child.ts');
/** Longest a process may take to reach a moment it is waited for (start-up on a loaded machine). */
const DEADLINE_MS = 120_000;

const cleanup: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-cdc-last-failure-'));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The emulators' credentials for a child that uses the harness's dynalite. */
const AWS_ENV = {
  AWS_REGION: 'us-east-1',
  AWS_ACCESS_KEY_ID: process.env.AWS_ACCESS_KEY_ID ?? 'S3RVER',
  AWS_SECRET_ACCESS_KEY: process.env.AWS_SECRET_ACCESS_KEY ?? 'S3RVER',
};

interface Exit {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** A child process of the CLI; its output kept, killed at the end if it still runs. */
class Cli {
  readonly child: ChildProcess;
  stdout = '';
  stderr = '';
  readonly exited: Promise<Exit>;

  constructor(argv: readonly string[], env: Record<string, string> = {}) {
    this.child = spawn(process.execPath, argv, {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.on('data', (b: Buffer) => {
      this.stdout += b.toString();
    });
    this.child.stderr!.on('data', (b: Buffer) => {
      this.stderr += b.toString();
    });
    this.exited = new Promise((resolve) =>
      this.child.on('close', (code) => resolve({ code, stdout: this.stdout, stderr: this.stderr })),
    );
    cleanup.push(() => {
      if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    });
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }
}

/** `status --json`'s one CDC object, and the human `status` text, of `spec` run by `cli`. */
async function statusOf(cli: readonly string[], spec: string, env: Record<string, string> = {}) {
  const json = await new Cli([...cli, 'status', '-c', spec, '--json'], env).exited;
  expect(json.code, json.stderr).toBe(0);
  const lines = json.stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as CdcSourceStatus);
  expect(lines, json.stdout).toHaveLength(1);
  const human = await new Cli([...cli, 'status', '-c', spec], env).exited;
  expect(human.code, human.stderr).toBe(0);
  return { json: lines[0]!, human: human.stdout };
}

/** The `last failure` row of a human status block. */
function lastFailureRow(human: string): string {
  const row = human.split('\n').find((l) => l.trimStart().startsWith('last failure'));
  expect(row, human).toBeDefined();
  return row!;
}

describe('tidemark status shows a CDC source last failure', () => {
  it('postgres: a failed start shows with its code; a later run that commits supersedes it', async () => {
    const db = await freshPgDatabase('last_failure');
    const id = randomUUID().slice(0, 8);
    const pipeline = `lastfail-${id}`;
    const sql = postgres(db.url, { max: 1, onnotice: () => undefined });
    cleanup.push(async () => {
      // Slots are server-wide and hold WAL: drop the ones this pipeline made.
      await sql
        .unsafe(
          `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name LIKE 'tidemark_lastfail_${id}%' AND NOT active`,
        )
        .catch(() => undefined);
      await sql.end();
      await db.drop();
    });
    const dir = freshDir();
    const specFile = join(dir, 'spec.yaml');
    writeFileSync(
      specFile,
      [
        `pipeline: ${pipeline}`,
        'sources:',
        `  db: { kind: postgres, url: "${db.url}", cdc: { flushSeconds: 1 } }`,
        `state: { dir: ${join(dir, 'state')} }`,
        `lake: { uri: "file://${join(dir, 'lake')}" }`,
        'tables:',
        '  - { source: db, table: public.t, mode: cdc, writeMode: upsert, snapshot: never }',
        '',
      ].join('\n'),
    );
    const bin = [BIN];

    // 1. public.t does not exist: the start fails.
    const failed = await new Cli([...bin, 'cdc', '-c', specFile]).exited;
    expect(failed.code, failed.stderr).not.toBe(0);
    const after = await statusOf(bin, specFile);
    const f = after.json.lastFailure;
    expect(f, JSON.stringify(after.json)).not.toBeNull();
    expect(f!.code).toMatch(/^[A-Z][A-Z0-9_]+$/);
    expect(f!.message).toContain('t');
    expect(Number.isNaN(Date.parse(f!.at))).toBe(false);
    // The code is the one the failure's log line gave.
    expect(failed.stderr).toContain(`"code":"${f!.code}"`);
    expect(after.json.state).toBe('idle');
    const row = lastFailureRow(after.human);
    expect(row).toContain(f!.at);
    expect(row).toContain(`${f!.code}: ${f!.message}`);
    expect(after.human).toContain('idle: the capture failed');

    // 2. The fix: the table exists. A run commits a flush of a row, and drains.
    await sql.unsafe('CREATE TABLE t (id INT PRIMARY KEY, v TEXT)');
    const run = new Cli([...bin, 'cdc', '-c', specFile]);
    const store = new FileCursorStore(join(dir, 'state'));
    const stateNow = async (): Promise<CdcState | undefined> => {
      const r = await store.load(`cdc#${pipeline}#db`);
      return r.value === undefined ? undefined : parseCdcState(r.value);
    };
    const end = Date.now() + DEADLINE_MS;
    let inserted = false;
    for (;;) {
      if (!run.running) throw new Error(`tidemark cdc ended before its first flush:\n${run.stderr}`);
      if (Date.now() > end) throw new Error(`no flush of public.t in time:\n${run.stderr}`);
      const s = await stateNow();
      // Once the start committed its position, a row written now is captured.
      if (s?.position !== undefined && !inserted) {
        await sql.unsafe(`INSERT INTO t VALUES (1, 'after the fix')`);
        inserted = true;
      }
      if (s?.tables['public.t']?.next !== undefined) break;
      await sleep(50);
    }
    run.child.kill('SIGTERM');
    const drained = await run.exited;
    expect(drained.code, drained.stderr).toBe(0);
    const state = await stateNow();
    expect(Date.parse(state!.lastCommitAt!)).toBeGreaterThan(Date.parse(f!.at));

    const fixed = await statusOf(bin, specFile);
    expect(fixed.json.lastFailure).toBeNull();
    expect(lastFailureRow(fixed.human)).toMatch(/last failure\s+none$/);
    expect(fixed.human).not.toContain(f!.code);
  });

  it('scripted source, DynamoDB state: a gap stops a capture after it committed; status shows POSITION_LOST', async () => {
    const dir = freshDir();
    const script: ScriptParams = {
      seed: 28,
      tables: 2,
      transactions: 60,
      inject: [{ beforeTxn: 40, step: { kind: 'gap', reason: 'the slot was invalidated', lost: 1 } }],
    };
    const tables = generateScript(script).tables.map((t) => ({
      source: 'src',
      table: t.name,
      mode: 'cdc',
      snapshot: 'never',
      writeMode: 'upsert',
    }));
    const specFile = join(dir, 'spec.yaml');
    writeFileSync(
      specFile,
      JSON.stringify({
        pipeline: 'p',
        sources: {
          src: { kind: 'scripted', url: 'scripted://local', cdc: { flushRows: 20, flushSeconds: 1 } },
        },
        tables,
        state: {
          dynamodb: {
            table: `tidemark_lastfail_${randomUUID().slice(0, 8)}`,
            region: 'us-east-1',
            endpoint: testServers().dynamoEndpoint,
          },
        },
        lake: { uri: `file://${join(dir, 'lake')}` },
      }),
    );
    const source: CdcTaskSource = { script, dir: join(dir, 'server') };
    const env = { ...AWS_ENV, TIDEMARK_TEST_CDC: JSON.stringify(source) };
    const child = ['--import', 'tsx', CHILD, 'cli'];

    const failed = await new Cli([...child, 'cdc', '-c', specFile], env).exited;
    expect(failed.code, failed.stderr).not.toBe(0);
    expect(failed.stderr).toContain('POSITION_LOST');
    const s = await statusOf(child, specFile, env);
    // It committed before the gap (the gap is recorded in the state), and failed after.
    expect(s.json.lastCommitAt).not.toBeNull();
    expect(s.json.events.map((e) => e.kind)).toContain('gap');
    expect(s.json.lastFailure).toMatchObject({ code: 'POSITION_LOST' });
    expect(Date.parse(s.json.lastFailure!.at)).toBeGreaterThanOrEqual(Date.parse(s.json.lastCommitAt!));
    expect(lastFailureRow(s.human)).toContain(`POSITION_LOST: ${s.json.lastFailure!.message}`);
  });
});
