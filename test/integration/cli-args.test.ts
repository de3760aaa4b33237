/**
 * The CLI's argument conventions, through the real bin: `--version`, `-c` defaulting to
 * `./tidemark.yaml`, and `invoke --timeout` checked against the handler's safety margin instead
 * of silently syncing nothing.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'tidemark.js');

function tidemark(args: string[], cwd = ROOT, env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 120_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('tidemark arguments', () => {
  it('--version prints the package version', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const r = tidemark(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`tidemark ${pkg.version}\n`);
  });

  it('-c defaults to ./tidemark.yaml, and says so when there is none', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tidemark-args-'));
    const none = tidemark(['validate'], dir);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/^tidemark: no -c FILE given and there is no \.\/tidemark\.yaml/);
    copyFileSync(join(ROOT, 'tidemark.example.yaml'), join(dir, 'tidemark.yaml'));
    const found = tidemark(['validate'], dir, { PGPASSWORD: 'pw' });
    expect(found.stderr).toBe('');
    expect(found.code).toBe(0);
    expect(found.stdout).toMatch(/ok: pipeline shop, 1 table\(s\)/);
  });

  it('invoke refuses a --timeout inside the safety margin, naming both numbers', () => {
    const r = tidemark([
      'invoke',
      'incremental',
      '-c',
      'tidemark.example.yaml',
      '--table',
      'public.orders',
      '--timeout',
      '10',
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--timeout 10 s is not above the handler's 15 s safety margin/);
    const env = tidemark(
      ['invoke', 'incremental', '-c', 'tidemark.example.yaml', '--table', 'public.orders', '--timeout', '4'],
      ROOT,
      { TIDEMARK_SAFETY_MARGIN_MS: '5000' },
    );
    expect(env.stderr).toMatch(/not above the handler's 5 s safety margin/);
  });

  it('invoke prints the function log lines when it fails', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tidemark-args-'));
    const spec = join(dir, 'tidemark.json');
    writeFileSync(
      spec,
      JSON.stringify({
        pipeline: 'args',
        sources: {
          db: { kind: 'postgres', url: 'postgres://u:pw@127.0.0.1:1/db', connectTimeoutSeconds: 2 },
        },
        state: { dir: join(dir, 'state') },
        lake: { uri: `file://${dir}/lake` },
        tables: [{ source: 'db', table: 'public.t', mode: 'incremental', cursor: 'u', writeMode: 'append' }],
      }),
    );
    const r = tidemark(['invoke', 'incremental', '-c', spec, '--table', 'public.t', '--timeout', '60']);
    expect(r.code).toBe(1);
    // The function's JSON log line, as CloudWatch would get it, then the one-line error.
    const logLine = r.stderr.split('\n').find((l) => l.includes('incremental run failed'));
    expect(logLine, r.stderr).toBeDefined();
    expect(JSON.parse(logLine!)).toMatchObject({ level: 'error', error: { code: 'SOURCE_UNREACHABLE' } });
    expect(r.stderr).toMatch(/^tidemark: cannot connect to Postgres at 127\.0\.0\.1:1/m);
    expect(r.stdout).toBe('');
  });
});
