/**
 * `npm run local-aws`, the packaged local AWS loop: it starts the emulators, and the spec lines
 * and environment it prints are enough for a real `tidemark run` to sync a table into its S3 with
 * its DynamoDB as state; Ctrl-C stops the emulators it started.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { type FreshDatabase, freshPgDatabase } from '../harness/pg.js';

const ROOT = join(import.meta.dirname, '..', '..');

describe('npm run local-aws', () => {
  let db: FreshDatabase;
  let child: ChildProcess | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-local-aws-'));

  beforeAll(async () => {
    db = await freshPgDatabase('localaws');
    const sql = postgres(db.url, { max: 1, onnotice: () => {} });
    await sql.unsafe(`CREATE TABLE orders (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL);
      CREATE INDEX ON orders (updated_at, id);
      INSERT INTO orders SELECT g, TIMESTAMP '2024-01-01' + g * INTERVAL '1 second' FROM generate_series(1, 1500) g;`);
    await sql.end();
  });

  afterAll(async () => {
    if (child?.exitCode === null) child.kill('SIGKILL');
    await db?.drop();
    spawnSync('rm', ['-rf', dir]);
  });

  it('prints spec lines a real run syncs through, and stops its emulators on Ctrl-C', async () => {
    child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        join(ROOT, 'dev/local-aws.ts'),
        '--dynamo-port',
        '0',
        '--s3-port',
        '0',
        '--dir',
        join(dir, 'data'),
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    await new Promise<void>((resolve, reject) => {
      child!.stdout!.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        if (out.includes('then: npx tidemark run')) resolve();
      });
      child!.once('exit', (code) => reject(new Error(`local-aws exited early (${code}): ${out}`)));
    });
    const emulatorPid = Number(/pid (\d+)/.exec(out)![1]);
    const yamlBlock = out.slice(out.indexOf('state:'), out.indexOf('\n\nand the credentials'));
    const { state, lake } = parseYaml(yamlBlock) as {
      state: unknown;
      lake: { endpoint: string; uri: string };
    };
    const env = Object.fromEntries(
      [...out.matchAll(/(AWS_[A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]),
    ) as Record<string, string>;
    expect(Object.keys(env).sort()).toEqual(['AWS_ACCESS_KEY_ID', 'AWS_REGION', 'AWS_SECRET_ACCESS_KEY']);

    const specFile = join(dir, 'tidemark.json');
    writeFileSync(
      specFile,
      JSON.stringify({
        pipeline: 'local-aws',
        sources: { app: { kind: 'postgres', url: db.url } },
        state,
        lake,
        tables: [
          {
            source: 'app',
            table: 'public.orders',
            mode: 'incremental',
            cursor: 'updated_at',
            writeMode: 'append',
            lagSeconds: 0,
            pageSize: 400,
          },
        ],
      }),
    );
    const run = spawnSync(process.execPath, [join(ROOT, 'bin/tidemark.js'), 'run', '-c', specFile], {
      cwd: dir,
      encoding: 'utf8',
      timeout: 120_000,
      env: { ...process.env, ...env },
    });
    expect(run.stderr).not.toMatch(/^tidemark: /m);
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/1500 rows in 4 page\(s\)/);
    const s3 = new S3Client({
      endpoint: lake.endpoint,
      region: env.AWS_REGION!,
      forcePathStyle: true,
      credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID!, secretAccessKey: env.AWS_SECRET_ACCESS_KEY! },
    });
    const bucket = /^s3:\/\/([^/]+)/.exec(lake.uri)![1]!;
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'raw/public.orders/' }));
    expect((listed.Contents ?? []).filter((o) => o.Key!.endsWith('.parquet'))).toHaveLength(4);
    s3.destroy();

    const exited = new Promise<number | null>((r) => child!.once('exit', (code) => r(code)));
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    // The emulator process is gone once it is reaped (it was a child of the exited loop).
    const alive = () => {
      try {
        process.kill(emulatorPid, 0);
        return !/^State:\s+Z/m.test(readFileSync(`/proc/${emulatorPid}/status`, 'utf8'));
      } catch {
        return false;
      }
    };
    expect(alive()).toBe(false);
  });
});
