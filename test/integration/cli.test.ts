/**
 * The `tidemark` command line as a user runs it: the real bin in a child process, exit codes,
 * one-line errors, and a local sync of a real Postgres table with `run` then `status`.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FreshDatabase, freshPgDatabase } from '../harness/pg.js';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'tidemark.js');

function tidemark(args: string[], env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 120_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('tidemark CLI', () => {
  let db: FreshDatabase;
  let dir: string;
  let specFile: string;

  beforeAll(async () => {
    db = await freshPgDatabase('cli');
    const sql = postgres(db.url, { max: 1, onnotice: () => {} });
    await sql.unsafe(`CREATE TABLE orders (id bigint PRIMARY KEY, total numeric(12,2), updated_at timestamptz NOT NULL);
      CREATE INDEX ON orders (updated_at, id);
      INSERT INTO orders SELECT g, g * 1.25, TIMESTAMP '2024-01-01' + g * INTERVAL '1 minute' FROM generate_series(1, 2500) g;`);
    await sql.end();
    dir = mkdtempSync(join(tmpdir(), 'tidemark-cli-'));
    specFile = join(dir, 'tidemark.yaml');
    writeFileSync(
      specFile,
      [
        'pipeline: cli-test',
        'sources:',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the spec's own ${env:NAME} syntax
        '  db: { kind: postgres, url: "${env:CLI_TEST_PG_URL}" }',
        'state: { dir: ./state }',
        'lake: { uri: file://./lake }',
        'tables:',
        '  - { source: db, table: public.orders, mode: incremental, cursor: updated_at, writeMode: upsert, pageSize: 1000, lagSeconds: 0 }',
        '',
      ].join('\n'),
    );
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('prints usage and exits 2 on an unknown command', () => {
    const r = tidemark(['frobnicate']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown command "frobnicate"');
    expect(r.stderr).toContain('usage: tidemark');
  });

  it('validates a spec, redacting the password', () => {
    const r = tidemark(['validate', '-c', specFile], { CLI_TEST_PG_URL: db.url });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('ok: pipeline cli-test, 1 table(s)');
    const u = new URL(db.url);
    expect(r.stdout).toContain(`${u.username}:***@${u.host}`);
    expect(r.stdout).not.toContain(`${u.username}:${u.password}@`);
  });

  it('refuses a bad spec with one line naming the field and exit 1', () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'pipeline: x\nsources: {}\nstate: { dir: s }\nlake: { uri: file://l }\ntables: []\n');
    const r = tidemark(['validate', '-c', bad]);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^tidemark: tables: list at least one table/);
  });

  it('runs a table until caught up, then status shows the cursor and rows', () => {
    const r = tidemark(['run', '-c', specFile], { CLI_TEST_PG_URL: db.url });
    expect(r.code, r.stderr).toBe(0);
    // stderr (not a TTY here) carries the logs as JSON lines, none of them an error.
    const logs = r.stderr
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as { level: string });
    expect(logs.filter((l) => l.level === 'error')).toEqual([]);
    expect(r.stdout).toMatch(/public\.orders: 2500 rows in 3 page\(s\).*caught up/);
    const s = tidemark(['status', '-c', specFile], { CLI_TEST_PG_URL: db.url });
    expect(s.code).toBe(0);
    expect(s.stdout).toContain('public.orders');
    expect(s.stdout).toMatch(/2500/);
    expect(s.stdout).toContain('free');
  });

  it('reports an unreachable source in one line and exits 1', () => {
    const u = new URL(db.url);
    u.port = '1';
    const r = tidemark(['run', '-c', specFile], { CLI_TEST_PG_URL: u.toString() });
    expect(r.code).toBe(1);
    // One error: its headline, the details of a long reason indented after it (args.ts errorText).
    expect(r.stderr.split('\n').filter((l) => l.startsWith('tidemark:'))).toHaveLength(1);
    expect(r.stderr).toMatch(/^tidemark: public\.orders: .*127\.0\.0\.1:1/);
  });
});
