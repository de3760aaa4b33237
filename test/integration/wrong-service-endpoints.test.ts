/**
 * An endpoint that answers but is not the service (issue 28, trap 4): the DynamoDB state or the
 * S3 lake pointed at an HTTP server that answers `404 Not Found` in text, a `200` HTML page, or
 * `200` JSON of another service. Each is a real node:http server on 127.0.0.1, each command the
 * real `tidemark` bin (`check`, `run`, `status`, `cdc`) with real AWS SDK clients: every case ends
 * in ONE line naming the setting (`state.dynamodb.endpoint`, `lake.endpoint`, or the SDK's
 * `AWS_ENDPOINT_URL_*` variable that set it) and the endpoint URL, asking whether it is that
 * service, with the code `STATE_WRONG_SERVICE` / `SINK_WRONG_SERVICE` in `--json` output; never
 * the SDK's parse error (`Unexpected token`, `XML parse error`, `UnknownError`), and never a
 * success (a 200 of another service once passed `check`'s probes and made `run` wait for the table
 * to become ACTIVE).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEADLINE_MAX } from '../../functions/cli/args.js';
import { postgresFixture, type SourceFixture } from './incremental/fixture.js';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'tidemark.js');
const scratch = mkdtempSync(join(tmpdir(), 'tidemark-wrongsvc-'));

/** What answers: each a server that is not DynamoDB and not S3. */
const ANSWERS = {
  'a 404 in text': { status: 404, type: 'text/plain', body: 'Not Found' },
  'a 200 HTML page': {
    status: 200,
    type: 'text/html; charset=utf-8',
    body: '<!doctype html><html><head><title>Welcome</title></head><body>It works.</body></html>',
  },
  "a 200 of another service's JSON": {
    status: 200,
    type: 'application/json',
    body: '{"status":"ok","version":"1.2.3","uptime":42}',
  },
} as const;
type Answer = keyof typeof ANSWERS;
const answers = Object.keys(ANSWERS) as Answer[];

const servers: http.Server[] = [];
const urls = new Map<Answer, string>();
let fx: SourceFixture;

beforeAll(async () => {
  for (const a of answers) {
    const { status, type, body } = ANSWERS[a];
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(status, { 'content-type': type });
        res.end(body);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    servers.push(server);
    urls.set(a, `http://127.0.0.1:${(server.address() as { port: number }).port}`);
  }
  fx = await postgresFixture('wrongsvc');
  await fx.createTable();
  await fx.insertRange(1, 11, fx.now);
});

afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  await fx?.drop();
  rmSync(scratch, { recursive: true, force: true });
});

interface Exit {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** The lines of stderr that start `tidemark:` (the error headlines). */
  readonly headlines: string[];
  /** stdout parsed line by line as JSON (--json output). */
  readonly json: Record<string, unknown>[];
}

/** Runs the real bin on `spec` with a clean AWS environment (no endpoint but those given). */
function cli(spec: unknown, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Exit> {
  const dir = mkdtempSync(join(scratch, 'spec-'));
  const specFile = join(dir, 'tidemark.json');
  writeFileSync(specFile, JSON.stringify(spec));
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_')));
  const [cmd, ...rest] = args;
  const child = spawn(process.execPath, [BIN, cmd!, '-c', specFile, ...rest], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...clean, AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test', ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  return new Promise((resolve) =>
    child.on('close', (code) =>
      resolve({
        code,
        stdout,
        stderr,
        headlines: stderr.split('\n').filter((l) => l.startsWith('tidemark:')),
        json: stdout
          .split('\n')
          .filter((l) => l.trim() !== '')
          .map((l) => JSON.parse(l) as Record<string, unknown>),
      }),
    ),
  );
}

/** A spec on the fixture's table: `mode` incremental or cdc, the given state and lake. */
function specWith(state: unknown, lake: unknown, mode: 'incremental' | 'cdc') {
  const name = `wrongsvc_${mode}`;
  return {
    pipeline: 'wrongsvc',
    sources: {
      db: {
        kind: 'postgres',
        url: fx.url,
        connectTimeoutSeconds: 10,
        ...(mode === 'cdc' ? { cdc: { slot: name, publication: name } } : {}),
      },
    },
    state,
    lake,
    tables: [
      mode === 'cdc'
        ? { source: 'db', table: fx.table, mode: 'cdc', snapshot: 'never', writeMode: 'append' }
        : { source: 'db', table: fx.table, mode: 'incremental', cursor: 'updated_at', writeMode: 'append' },
    ],
  };
}

const fileLake = () => ({ uri: `file://${mkdtempSync(join(scratch, 'lake-'))}` });
const fileState = () => ({ dir: mkdtempSync(join(scratch, 'state-')) });
const dynamoAt = (endpoint: string) => ({
  dynamodb: { table: 'tidemark-state', region: 'us-east-1', endpoint },
});
const s3At = (endpoint: string) => ({
  uri: 's3://tidemark-lake/raw',
  region: 'us-east-1',
  endpoint,
  forcePathStyle: true,
});

/** The one line: the setting, the URL, the question, what answered; short; no SDK parse error. */
function expectOneLine(r: Exit, setting: string, url: string, service: 'DynamoDB' | 'S3') {
  expect(r.code, r.stderr).toBe(1);
  expect(r.headlines, r.stderr).toHaveLength(1);
  const line = r.headlines[0]!;
  expect(line).toContain(
    `${setting} ${url} is not ${service} (is it a${service === 'S3' ? 'n' : ''} ${service} endpoint?)`,
  );
  expect(line).toMatch(/it answered HTTP (404|200) \((text\/plain|text\/html|application\/json)\)/);
  expect(line.length).toBeLessThanOrEqual(HEADLINE_MAX);
  expect(r.stderr).not.toMatch(
    /Unexpected token|XML parse error|UnknownError|Deserialization error|\n\s+at /,
  );
}

/**
 * `--json`: every error object carries the code and the same message (a table's error is in its
 * JSON line only; one before any table also on stderr).
 */
function expectJsonError(r: Exit, code: string, setting: string, url: string) {
  expect(r.code, r.stderr).toBe(1);
  const errors = r.json.filter((o) => o.status === 'error');
  expect(errors.length, r.stdout).toBeGreaterThan(0);
  for (const e of errors) {
    expect(e.error, JSON.stringify(e)).toMatchObject({ code });
    expect((e.error as { message: string }).message).toContain(`${setting} ${url} is not`);
  }
  expect(r.headlines.length).toBeLessThanOrEqual(1);
  expect(r.stderr).not.toMatch(
    /Unexpected token|XML parse error|UnknownError|Deserialization error|\n\s+at /,
  );
}

describe.each(answers)('the DynamoDB state endpoint answers with %s', (answer) => {
  const url = () => urls.get(answer)!;

  it('check fails its state line with STATE_WRONG_SERVICE, naming the setting and the URL', async () => {
    const r = await cli(specWith(dynamoAt(url()), fileLake(), 'incremental'), ['check', '--json']);
    expect(r.code, r.stderr).toBe(1);
    const state = r.json.find((l) => l.type === 'check' && l.scope === 'state')!;
    expect(state).toMatchObject({ status: 'fail', code: 'STATE_WRONG_SERVICE' });
    expect(state.message).toContain(
      `state.dynamodb.endpoint ${url()} is not DynamoDB (is it a DynamoDB endpoint?)`,
    );
    // The source and the lake are fine: only the state fails.
    expect(r.json.filter((l) => l.type === 'check' && l.status === 'fail')).toHaveLength(1);
  });

  it('run, status and cdc print one line; run --json and status --json carry the code and the message', async () => {
    for (const args of [['run', '--json'], ['status', '--json'], ['run'], ['status']]) {
      const r = await cli(specWith(dynamoAt(url()), fileLake(), 'incremental'), args);
      if (args.includes('--json'))
        expectJsonError(r, 'STATE_WRONG_SERVICE', 'state.dynamodb.endpoint', url());
      else expectOneLine(r, 'state.dynamodb.endpoint', url(), 'DynamoDB');
    }
    const cdc = await cli(specWith(dynamoAt(url()), fileLake(), 'cdc'), ['cdc']);
    expectOneLine(cdc, 'state.dynamodb.endpoint', url(), 'DynamoDB');
  });
});

describe.each(answers)('the S3 lake endpoint answers with %s', (answer) => {
  const url = () => urls.get(answer)!;

  it('check fails its lake line with SINK_WRONG_SERVICE, naming the setting and the URL', async () => {
    const r = await cli(specWith(fileState(), s3At(url()), 'incremental'), ['check', '--json']);
    expect(r.code, r.stderr).toBe(1);
    const lake = r.json.find((l) => l.type === 'check' && l.scope === 'lake')!;
    expect(lake).toMatchObject({ status: 'fail', code: 'SINK_WRONG_SERVICE' });
    expect(lake.message).toContain(`lake.endpoint ${url()} is not S3 (is it an S3 endpoint?)`);
    expect(r.json.filter((l) => l.type === 'check' && l.status === 'fail')).toHaveLength(1);
  });

  it('run, status and cdc print one line; run --json and status --json carry the code and the message', async () => {
    for (const args of [['run', '--json'], ['status', '--json'], ['run'], ['status']]) {
      const r = await cli(specWith(fileState(), s3At(url()), 'incremental'), args);
      if (args.includes('--json')) expectJsonError(r, 'SINK_WRONG_SERVICE', 'lake.endpoint', url());
      else expectOneLine(r, 'lake.endpoint', url(), 'S3');
    }
    const cdc = await cli(specWith(fileState(), s3At(url()), 'cdc'), ['cdc']);
    expectOneLine(cdc, 'lake.endpoint', url(), 'S3');
  });
});

describe('a gateway answering 503 in HTML in front of the endpoint', () => {
  it('is retried as transient, and only a reply that stays wrong fails, naming the setting', async () => {
    let requests = 0;
    const gateway = http.createServer((req, res) => {
      requests++;
      req.resume();
      req.on('end', () => {
        res.writeHead(503, { 'content-type': 'text/html' });
        res.end('<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>');
      });
    });
    await new Promise<void>((r) => gateway.listen(0, '127.0.0.1', r));
    servers.push(gateway);
    const url = `http://127.0.0.1:${(gateway.address() as { port: number }).port}`;
    const r = await cli(specWith(dynamoAt(url), fileLake(), 'incremental'), ['status']);
    expect(r.code).toBe(1);
    expect(r.headlines).toHaveLength(1);
    expect(r.headlines[0]).toContain(`state.dynamodb.endpoint ${url} is not DynamoDB`);
    expect(r.stderr).toContain('HTTP 503');
    expect(r.stderr).not.toContain('Unexpected token');
    // The SDK retried it: more requests than the commands status sends.
    expect(requests).toBeGreaterThan(1);
  });
});

describe('an endpoint set by the SDK environment variables', () => {
  it('AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_S3 are named when the spec sets no endpoint', async () => {
    const url = urls.get('a 404 in text')!;
    const state = { dynamodb: { table: 'tidemark-state', region: 'us-east-1' } };
    const dynamo = await cli(specWith(state, fileLake(), 'incremental'), ['run'], {
      AWS_ENDPOINT_URL_DYNAMODB: url,
    });
    expectOneLine(dynamo, 'AWS_ENDPOINT_URL_DYNAMODB', url, 'DynamoDB');
    const lake = { uri: 's3://tidemark-lake/raw', region: 'us-east-1', forcePathStyle: true };
    const s3 = await cli(specWith(fileState(), lake, 'incremental'), ['status'], { AWS_ENDPOINT_URL: url });
    expectOneLine(s3, 'AWS_ENDPOINT_URL', url, 'S3');
  });
});
