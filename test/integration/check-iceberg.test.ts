/**
 * `tidemark check`'s Iceberg lines (shared/pipeline/check-iceberg.ts) through the real bin: the
 * `file` catalog's conditional-write probe passing on a `file://` lake and failing on s3rver
 * (which ignores If-None-Match), with its fixes and no probe left behind; a table's recorded
 * format against `lake.tableFormat`, the state written by a real `tidemark run`, in the words the
 * run then stops with; the `glue` catalog's database line (present, missing, access denied) and
 * its names line against moto (skipped, with the install command, when .venv-readers is missing).
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CreateDatabaseCommand, GlueClient } from '@aws-sdk/client-glue';
import { ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { s3Client } from '../harness/aws.js';
import { type CliResult, checkLine, jsonLines, runTidemark } from '../harness/check-cli.js';
import {
  MOTO_CREDENTIALS,
  MOTO_REGION,
  type MotoServer,
  motoUnavailable,
  startMotoServer,
} from '../harness/moto-server.js';
import { READERS_PYTHON } from '../harness/readers.js';
import { testServers } from '../harness/servers.js';
import { postgresFixture, type SourceFixture } from './incremental/fixture.js';

const execFileP = promisify(execFile);

/** Temp dirs of this file (specs, local state and lakes), removed when it ends. */
const dirs: string[] = [];
function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tidemark(args: string[], spec: object, env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return runTidemark(args, spec, tempDir('tidemark-check-ice-'), env);
}

/** The `--json` check object of `subject`'s `check`. */
function jsonLine(r: CliResult, subject: string, check: string): Record<string, unknown> {
  const found = jsonLines(r).filter((o) => o.subject === subject && o.check === check);
  expect(found, `${subject} ${check} in\n${r.stdout}${r.stderr}`).toHaveLength(1);
  return found[0]!;
}

let fx: SourceFixture;
beforeAll(async () => {
  fx = await postgresFixture('check_ice');
  await fx.createTable();
  await fx.insertRange(1, 11, fx.now);
});
afterAll(async () => {
  await fx?.drop();
});

/** A spec of the fixture's table (and `more` tables of the same source table), state and lake as given. */
function specOf(where: { state: object; lake: object }, more: Record<string, unknown>[] = []) {
  return {
    pipeline: 'check-ice',
    sources: { db: { kind: fx.kind, url: fx.url, connectTimeoutSeconds: 5 } },
    state: where.state,
    lake: where.lake,
    tables: [{}, ...more].map((extra) => ({
      source: 'db',
      table: fx.table,
      mode: 'incremental',
      cursor: 'updated_at',
      writeMode: 'upsert',
      lagSeconds: 0,
      ...extra,
    })),
  };
}

/** A state dir and a lake dir in a fresh temp dir; `lake` settings added to the lake's. */
function localWhere(lake: Record<string, unknown> = {}) {
  const dir = tempDir('tidemark-check-ice-local-');
  return {
    dir,
    state: { dir: join(dir, 'state') },
    lake: { uri: `file://${join(dir, 'lake')}`, ...lake },
  };
}

/** Every file under `dir` (relative paths), none when it does not exist. */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1));
}

describe('tidemark check: the file catalog needs conditional writes', () => {
  let s3: S3Client;
  beforeAll(() => {
    s3 = s3Client();
  });
  afterAll(() => s3?.destroy());

  it('passes a file:// lake, leaving nothing behind', async () => {
    const where = localWhere();
    const r = await tidemark(['check'], specOf(where));
    expect(r.stderr).toBe('');
    expect(r.code, r.stdout).toBe(0);
    const catalog = checkLine(r, 'lake', 'catalog');
    expect(catalog.status).toBe('ok');
    expect(catalog.message).toMatch(
      /^file catalog: file:\/\/.*\/lake enforces conditional writes \(a second create-only put of test object .*_tidemark-check\.check-ice\.[\w-]+\.conditional was refused; it was deleted\)/,
    );
    // After the lake's own line; no table line about formats (the table has no state yet).
    expect(r.lines.slice(-2).map((l) => `${l.subject} ${l.check}`)).toEqual(['lake dir', 'lake catalog']);
    expect(r.lines.some((l) => l.check === 'tableFormat')).toBe(false);
    expect(filesUnder(join(where.dir, 'lake'))).toEqual([]);
  });

  it('fails s3rver, which ignores If-None-Match, naming the three ways out; plain tables need no probe', async () => {
    const prefix = `check-ice-${randomUUID().slice(0, 8)}`;
    const lake = {
      uri: `s3://${testServers().s3Bucket}/${prefix}`,
      region: 'us-east-1',
      endpoint: testServers().s3Endpoint,
      forcePathStyle: true,
    };
    const spec = specOf({ state: localWhere().state, lake });
    const r = await tidemark(['check'], spec);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(1);
    const s3Line = checkLine(r, 'lake', 's3');
    expect(s3Line.status).toBe('ok');
    const catalog = checkLine(r, 'lake', 'catalog');
    expect(catalog.status).toBe('fail');
    expect(catalog.message).toContain(
      `file catalog: ${lake.uri} at ${lake.endpoint} ignores conditional writes`,
    );
    expect(catalog.message).toMatch(/If-None-Match: \* of test object s3:\/\/.*\.conditional replaced it/);
    expect(catalog.message).toMatch(
      /use a store that enforces If-None-Match \(AWS S3, MinIO; moto locally\), or lake\.catalog: \{type: glue, .*\}, or lake\.tableFormat: plain$/,
    );
    expect(r.lines.filter((l) => l.status === 'fail')).toEqual([catalog]);

    const json = await tidemark(['check', '--json'], spec);
    expect(jsonLine(json, 'lake', 'catalog')).toMatchObject({
      type: 'check',
      scope: 'lake',
      status: 'fail',
      code: 'ICEBERG_CONDITIONAL_WRITES_UNSUPPORTED',
    });

    // Nothing is left under the prefix: neither probe.
    const objects = await s3.send(
      new ListObjectsV2Command({ Bucket: testServers().s3Bucket, Prefix: `${prefix}/` }),
    );
    expect(objects.Contents ?? []).toEqual([]);

    // lake.tableFormat: plain, the third way out: no table is Iceberg, so no catalog line.
    const plain = await tidemark(
      ['check'],
      specOf({ state: localWhere().state, lake: { ...lake, tableFormat: 'plain' } }),
    );
    expect(plain.code, plain.stdout).toBe(0);
    expect(plain.lines.some((l) => l.check === 'catalog')).toBe(false);
  });
});

describe('tidemark check: a table keeps its recorded table format', () => {
  it('fails lake.tableFormat: iceberg for a table synced as plain, in the words the run stops with; unset passes', async () => {
    const where = localWhere({ tableFormat: 'plain' });
    const sync = await tidemark(['run'], specOf(where));
    expect(sync.code, sync.stdout + sync.stderr).toBe(0);

    const iceberg = specOf({ ...where, lake: { ...where.lake, tableFormat: 'iceberg' } });
    const r = await tidemark(['check'], iceberg);
    expect(r.code).toBe(1);
    const format = checkLine(r, fx.table, 'tableFormat');
    expect(format.status).toBe('fail');
    expect(format.message).toBe(
      `lake.tableFormat is iceberg, but the table was written as plain; nothing was written. Remove lake.tableFormat to keep each table in its recorded format, or run tidemark reset --table ${fx.table} --delete-objects to write it anew as iceberg`,
    );
    expect(r.lines.filter((l) => l.status === 'fail')).toEqual([format]);
    expect(jsonLine(await tidemark(['check', '--json'], iceberg), fx.table, 'tableFormat')).toMatchObject({
      scope: 'table',
      target: fx.table,
      code: 'TABLE_FORMAT_MISMATCH',
    });

    // The run refuses in the same words.
    const run = await tidemark(['run', '--json'], iceberg);
    expect(run.code).not.toBe(0);
    expect(JSON.parse(run.stdout.trim().split('\n')[0]!)).toMatchObject({
      status: 'error',
      error: { code: 'TABLE_FORMAT_MISMATCH', message: `${fx.table}: ${format.message}` },
    });

    // Unset: the table keeps plain, so no table is Iceberg and the catalog is not probed.
    const unset = await tidemark(['check'], specOf({ ...where, lake: { uri: where.lake.uri } }));
    expect(unset.code, unset.stdout).toBe(0);
    const kept = checkLine(unset, fx.table, 'tableFormat');
    expect(kept.status).toBe('ok');
    expect(kept.message).toBe('written as plain; it keeps that format (lake.tableFormat is unset)');
    expect(unset.lines.some((l) => l.check === 'catalog')).toBe(false);
    // Set and agreeing.
    const agreed = checkLine(await tidemark(['check'], specOf(where)), fx.table, 'tableFormat');
    expect(agreed).toMatchObject({ status: 'ok', message: 'written as plain, as lake.tableFormat says' });
  });

  it('fails lake.tableFormat: plain for a table synced as Iceberg; unset keeps Iceberg and probes its catalog', async () => {
    const where = localWhere();
    const sync = await tidemark(['run'], specOf(where));
    expect(sync.code, sync.stdout + sync.stderr).toBe(0);
    expect(filesUnder(join(where.dir, 'lake')).some((f) => f.endsWith('.metadata.json'))).toBe(true);

    const r = await tidemark(['check'], specOf({ ...where, lake: { ...where.lake, tableFormat: 'plain' } }));
    expect(r.code).toBe(1);
    const format = checkLine(r, fx.table, 'tableFormat');
    expect(format.status).toBe('fail');
    expect(format.message).toMatch(
      /^lake\.tableFormat is plain, but the table was written as iceberg; nothing was written/,
    );
    // Its table stays Iceberg whatever the spec says: the catalog is still probed.
    expect(checkLine(r, 'lake', 'catalog').status).toBe('ok');

    const unset = await tidemark(['check'], specOf(where));
    expect(unset.code, unset.stdout).toBe(0);
    expect(checkLine(unset, fx.table, 'tableFormat').message).toBe(
      'written as iceberg; it keeps that format (lake.tableFormat is unset)',
    );
  });
});

const skipMoto = motoUnavailable();

describe.skipIf(skipMoto !== undefined)('tidemark check: the glue catalog (moto)', () => {
  let moto: MotoServer;
  let glue: GlueClient;
  const database = `check_${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    moto = await startMotoServer();
    glue = new GlueClient({ endpoint: moto.endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
    await glue.send(new CreateDatabaseCommand({ DatabaseInput: { Name: database } }));
  });
  afterAll(async () => {
    glue?.destroy();
    await moto?.stop();
  });

  function glueWhere(db: string) {
    return localWhere({
      catalog: { type: 'glue', database: db, region: MOTO_REGION, endpoint: moto.endpoint },
    });
  }

  it('passes a database that exists and distinct names; fails a missing database with the fix', async () => {
    const good = await tidemark(['check'], specOf(glueWhere(database)));
    expect(good.stderr).toBe('');
    expect(good.code, good.stdout).toBe(0);
    expect(good.lines.slice(-3).map((l) => `${l.subject} ${l.check}`)).toEqual([
      'lake dir',
      'lake glue',
      'lake glueNames',
    ]);
    expect(checkLine(good, 'lake', 'glue')).toMatchObject({
      status: 'ok',
      message: `Glue database ${database} exists at ${moto.endpoint}; each Iceberg table is created in it on its first commit`,
    });
    expect(checkLine(good, 'lake', 'glueNames')).toMatchObject({
      status: 'ok',
      message: `the 1 lake target(s) map to 1 distinct Glue table(s) in ${database}`,
    });
    // The file catalog's probe is not the glue catalog's business.
    expect(good.lines.some((l) => l.check === 'catalog')).toBe(false);

    const missing = `${database}_missing`;
    const bad = await tidemark(['check', '--json'], specOf(glueWhere(missing)));
    expect(bad.code).toBe(1);
    const line = jsonLine(bad, 'lake', 'glue');
    expect(line).toMatchObject({ status: 'fail', code: 'GLUE_DATABASE_MISSING' });
    expect(line.message).toBe(
      `the Glue database ${missing} does not exist at ${moto.endpoint}; create it (cdk deploy does; or aws glue create-database --database-input Name=${missing}) or fix lake.catalog.database (docs/iceberg.md)`,
    );
    expect(jsonLines(bad).filter((o) => o.status === 'fail')).toEqual([line]);
  });

  it('fails two targets that would share one Glue table, naming both', async () => {
    // In database D a target's dots become `_`: x.a_b and x_a.b are both D.x_a_b.
    const r = await tidemark(
      ['check', '--json'],
      specOf(glueWhere(database), [{ target: 'x.a_b' }, { target: 'x_a.b' }]),
    );
    expect(r.code).toBe(1);
    const names = jsonLine(r, 'lake', 'glueNames');
    expect(names).toMatchObject({ status: 'fail', code: 'GLUE_NAME_COLLISION' });
    expect(names.message).toBe(
      `the lake tables "x.a_b" and "x_a.b" would both be the Glue table ${database}.x_a_b (Glue names are lowercase [a-z0-9_], at most 255 characters); give one of them another target`,
    );
    expect(jsonLines(r).filter((o) => o.status === 'fail')).toEqual([names]);
  });

  it('fails a login Glue refuses GetDatabase, naming the action', async () => {
    // A user without policies, made while moto lets every request through; then moto checks IAM.
    const { stdout } = await execFileP(READERS_PYTHON, [
      '-c',
      `import boto3, json, sys
iam = boto3.client('iam', endpoint_url=sys.argv[1], region_name='us-east-1', aws_access_key_id='testing', aws_secret_access_key='testing')
iam.create_user(UserName='check-no-glue')
key = iam.create_access_key(UserName='check-no-glue')['AccessKey']
print(json.dumps({'id': key['AccessKeyId'], 'secret': key['SecretAccessKey']}))`,
      moto.endpoint,
    ]);
    const key = JSON.parse(stdout) as { id: string; secret: string };
    const auth = (count: string) =>
      fetch(`${moto.endpoint}/moto-api/reset-auth`, { method: 'POST', body: count });
    expect((await auth('0')).ok).toBe(true);
    let r: CliResult;
    try {
      r = await tidemark(['check', '--json'], specOf(glueWhere(database)), {
        AWS_ACCESS_KEY_ID: key.id,
        AWS_SECRET_ACCESS_KEY: key.secret,
      });
    } finally {
      expect((await auth('inf')).ok).toBe(true);
    }
    expect(r.code).toBe(1);
    const line = jsonLine(r, 'lake', 'glue');
    expect(line).toMatchObject({ status: 'fail', code: 'GLUE_ACCESS_DENIED' });
    expect(line.message).toMatch(
      new RegExp(
        `^GetDatabase ${database}: Glue denied glue:GetDatabase on database ${database} \\(.+\\); grant the role glue:GetDatabase on it`,
      ),
    );
    expect(r.stdout).not.toContain(key.secret);
    // The names line needs no call: it still passes.
    expect(jsonLine(r, 'lake', 'glueNames')).toMatchObject({ status: 'ok' });
  });
});
