/**
 * The CLI's output as a shell pipeline meets it (issue 28, trap 5), through the real bin:
 * - a reader that stops early (`tidemark status | head -1`) ends the command quietly with exit 0:
 *   stdout closed before the first byte, after the first line (the real `head`, and a reader of
 *   our own), and a closed stderr; a command that had already failed keeps its exit code;
 * - every error's first line is at most HEADLINE_MAX characters, its details on indented lines
 *   after it, nothing lost (the reset refusal of a cdc table, an unreachable source and state
 *   store), and `--json` output stays one whole JSON object per line.
 *
 * Each closed pipe is closed for sure before the CLI has written everything: either before the
 * child starts, or with more output than a pipe and the reader's buffer can hold, so no case
 * passes by the CLI having been quicker than the reader.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEADLINE_MAX } from '../../functions/cli/args.js';
import { closedPort } from '../harness/ports.js';
import { postgresFixture, type SourceFixture } from './incremental/fixture.js';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'tidemark.js');
const scratch = mkdtempSync(join(tmpdir(), 'tidemark-pipes-'));
let fx: SourceFixture;

beforeAll(async () => {
  fx = await postgresFixture('pipes');
  await fx.createTable();
  await fx.insertRange(1, 2001, fx.now);
});

afterAll(async () => {
  await fx?.drop();
  rmSync(scratch, { recursive: true, force: true });
});

/** Writes a spec with `count` incremental tables on `url` (file state and lake) into a fresh dir. */
function specFile(count: number, url: string, extra: Record<string, unknown> = {}): string {
  const dir = mkdtempSync(join(scratch, 'spec-'));
  const file = join(dir, 'tidemark.json');
  writeFileSync(
    file,
    JSON.stringify({
      pipeline: 'pipes',
      sources: { db: { kind: 'postgres', url, connectTimeoutSeconds: 10 } },
      state: { dir: join(dir, 'state') },
      lake: { uri: `file://${join(dir, 'lake')}` },
      tables: Array.from({ length: count }, (_, i) => ({
        source: 'db',
        table: count === 1 ? fx.table : `public.table_with_a_long_name_number_${i}`,
        mode: 'incremental',
        cursor: 'updated_at',
        writeMode: 'append',
        pageSize: 100,
        lagSeconds: 0,
      })),
      ...extra,
    }),
  );
  return file;
}

interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the bin with `args`. `close` says which of its pipes the test closes and when: `stdout`
 * or `stderr` before the child writes anything, `stdout-after-line` once the first line arrived.
 */
function cli(
  args: string[],
  close?: 'stdout' | 'stderr' | 'stdout-after-line',
  env: NodeJS.ProcessEnv = {},
): Promise<Exit & { readBeforeClose: string }> {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: scratch,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TIDEMARK_LOG_LEVEL: 'info', ...env },
  });
  let stdout = '';
  let stderr = '';
  let readBeforeClose = '';
  if (close === 'stdout') child.stdout.destroy();
  else if (close === 'stderr') child.stderr.destroy();
  child.stdout.on('data', (d: Buffer) => {
    if (close !== 'stdout-after-line') {
      stdout += d.toString();
      return;
    }
    readBeforeClose += d.toString();
    if (readBeforeClose.includes('\n')) child.stdout.destroy();
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  return new Promise((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr, readBeforeClose })),
  );
}

/** What a closed pipe must never cause on stderr. */
function expectQuiet(stderr: string) {
  expect(stderr).not.toMatch(/EPIPE|Unhandled 'error' event|ERR_STREAM|\n\s+at /);
}

describe('output into a closed pipe ends quietly with exit 0', () => {
  it('status with its stdout closed before the first byte', async () => {
    const r = await cli(['status', '-c', specFile(5, fx.url)], 'stdout');
    expect(r.code, r.stderr).toBe(0);
    expect(r.signal).toBeNull();
    expectQuiet(r.stderr);
  });

  // ~0.5 MB of output: far more than a pipe (64 KiB) and the reader's first read hold, so the
  // CLI writes into the closed pipe whatever the timing.
  const big = () => specFile(800, fx.url);

  it('status --json | head -1 (the real head, in a shell)', () => {
    const err = join(mkdtempSync(join(scratch, 'head-')), 'stderr');
    const r = spawnSync(
      'bash',
      [
        '-c',
        '"$0" "$1" status --json -c "$2" 2>"$3" | head -1; echo "$PIPESTATUS"',
        process.execPath,
        BIN,
        big(),
        err,
      ],
      { encoding: 'utf8', timeout: 120_000 },
    );
    const [first, code] = r.stdout.split('\n');
    expect(JSON.parse(first!)).toMatchObject({ pipeline: 'pipes' });
    expect(code, spawnSync('cat', [err], { encoding: 'utf8' }).stdout).toBe('0');
    expectQuiet(spawnSync('cat', [err], { encoding: 'utf8' }).stdout);
  });

  it('validate and status --json with a reader that closes after the first line', async () => {
    for (const args of [['validate'], ['status', '--json']]) {
      const r = await cli([...args, '-c', big()], 'stdout-after-line');
      expect(r.readBeforeClose.length).toBeGreaterThan(0);
      expect(r.code, r.stderr).toBe(0);
      expectQuiet(r.stderr);
    }
  });

  it('run with its stderr (the logs) closed ends at once, quietly, as cut short (141)', async () => {
    const spec = specFile(1, fx.url);
    // The same run with stderr open writes log lines there: the closed stderr below is written to.
    const open = await cli(['run', '--json', '-c', specFile(1, fx.url)]);
    expect(open.code, open.stderr).toBe(0);
    expect(open.stderr).not.toBe('');
    const r = await cli(['run', '--json', '-c', spec], 'stderr');
    // Its work was cut short: a supervisor or `set -o pipefail` must not read it as a success.
    expect(r.code).toBe(141);
    expect(r.signal).toBeNull();
  });

  it('a command that failed keeps its exit code when its error meets a closed stderr', async () => {
    const port = await closedPort();
    const r = await cli(['run', '-c', specFile(1, `postgres://u:pw@127.0.0.1:${port}/db`)], 'stderr');
    expect(r.code).toBe(1);
  });
});

describe("every error's first line is short, its details after it", () => {
  /** The `tidemark:` headline and the indented lines after it. */
  function errorBlock(stderr: string): { headline: string; details: string[] } {
    const lines = stderr.split('\n');
    const at = lines.findIndex((l) => l.startsWith('tidemark:'));
    expect(at, stderr).toBeGreaterThanOrEqual(0);
    const details: string[] = [];
    for (const l of lines.slice(at + 1)) {
      if (!l.startsWith('  ')) break;
      details.push(l);
    }
    return { headline: lines[at]!, details };
  }

  it("reset's refusal of a cdc table: a headline, then the rest whole", async () => {
    const file = specFile(1, fx.url);
    const dir = join(file, '..');
    const cdc = {
      pipeline: 'pipes',
      sources: { db: { kind: 'postgres', url: fx.url } },
      state: { dir: join(dir, 'state') },
      lake: { uri: `file://${join(dir, 'lake')}` },
      tables: [{ source: 'db', table: fx.table, mode: 'cdc', writeMode: 'append' }],
    };
    writeFileSync(file, JSON.stringify(cdc));
    const r = await cli(['reset', '-c', file, '--table', fx.table]);
    expect(r.code).toBe(1);
    const { headline, details } = errorBlock(r.stderr);
    expect(headline.length).toBeLessThanOrEqual(HEADLINE_MAX);
    expect(headline).toMatch(
      /^tidemark: --table: public\.items is a mode: cdc table without incremental state/,
    );
    expect(details.length).toBeGreaterThan(1);
    for (const d of details) expect(d.length).toBeLessThanOrEqual(HEADLINE_MAX);
    // Nothing was lost: the ways out, at the end of a message of about 900 characters, are there.
    expect(details.join(' ')).toContain('or leave it as it is: its capture resumes where cdc#pipes#db says.');
  });

  it('an unreachable source and state store: headlines that name what and where', async () => {
    const port = await closedPort();
    const source = await cli(['run', '-c', specFile(1, `postgres://u:pw@127.0.0.1:${port}/db`)]);
    expect(source.code).toBe(1);
    const s = errorBlock(source.stderr);
    expect(s.headline.length).toBeLessThanOrEqual(HEADLINE_MAX);
    expect(s.headline).toContain(`cannot connect to Postgres at 127.0.0.1:${port} (ECONNREFUSED)`);

    const state = await cli(
      [
        'run',
        '-c',
        specFile(1, fx.url, {
          state: {
            dynamodb: { table: 'pipes-state', region: 'us-east-1', endpoint: `http://127.0.0.1:${port}` },
          },
        }),
      ],
      undefined,
      { AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test' },
    );
    expect(state.code).toBe(1);
    const d = errorBlock(state.stderr);
    expect(d.headline.length).toBeLessThanOrEqual(HEADLINE_MAX);
    expect(d.headline).toMatch(
      /^tidemark: no DynamoDB endpoint answered at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\) for table pipes-state: check state\.dynamodb\.endpoint/,
    );
    expect(d.details.join(' ')).toContain('this network must reach DynamoDB');
  });

  it('--json output stays one whole JSON object per line, the message uncut', async () => {
    const port = await closedPort();
    const r = await cli(['run', '--json', '-c', specFile(1, `postgres://u:pw@127.0.0.1:${port}/db`)]);
    expect(r.code).toBe(1);
    const lines = r.stdout.split('\n').filter((l) => l !== '');
    expect(lines.length).toBeGreaterThan(0);
    for (const l of lines) {
      const o = JSON.parse(l) as { status?: string; error?: { code: string; message: string } };
      if (o.status !== 'error') continue;
      expect(o.error!.code).toBe('SOURCE_UNREACHABLE');
      expect(o.error!.message.length).toBeGreaterThan(HEADLINE_MAX - 'tidemark: public.items: '.length);
      expect(o.error!.message).toContain('listen_addresses');
    }
  });
});
