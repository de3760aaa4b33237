/**
 * Errors on the AWS and lake side name the spec field and the fix, as source errors do: each
 * failure is provoked for real where an emulator or the machine can produce it (a closed port,
 * no region, a missing table or bucket on dynalite/s3rver, a lake folder under a regular file, a
 * full and a read-only tmpfs), through the real `tidemark` bin where a user would meet it.
 * Access denied and a bucket in another region cannot be produced by the emulators (they enforce
 * neither IAM nor regions): the classifier is checked on the error shapes the SDK raises for
 * them, and the same tests run against LocalStack or AWS when the harness points there.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { classifyAwsError } from '../../shared/aws/errors.js';
import type { SinkError, StateError } from '../../shared/contracts/errors.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { S3ObjectStore } from '../../shared/sink/s3-object-store.js';
import { DynamoCursorStore } from '../../shared/state/dynamo-cursor-store.js';
import { dynamoClient, s3Client } from '../harness/aws.js';
import { closedPort } from '../harness/ports.js';
import { testServers } from '../harness/servers.js';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'tidemark.js');
const scratch = mkdtempSync(join(tmpdir(), 'tidemark-operr-'));

afterAll(() => {
  spawnSync('rm', ['-rf', scratch]);
});

/** Runs `tidemark run` on a spec with the given state and lake, in a clean AWS environment. */
function runWith(state: unknown, lake: unknown, env: NodeJS.ProcessEnv = {}) {
  const dir = mkdtempSync(join(scratch, 'spec-'));
  const specFile = join(dir, 'tidemark.json');
  writeFileSync(
    specFile,
    JSON.stringify({
      pipeline: 'operr',
      sources: { db: { kind: 'postgres', url: 'postgres://u:pw@127.0.0.1:1/db' } },
      state,
      lake,
      tables: [{ source: 'db', table: 'public.t', mode: 'incremental', cursor: 'u', writeMode: 'append' }],
    }),
  );
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_')));
  const r = spawnSync(process.execPath, [BIN, 'run', '-c', specFile], {
    cwd: dir,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...clean, AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test', ...env },
  });
  const lines = r.stderr.split('\n').filter((l) => l.startsWith('tidemark:'));
  return { code: r.status, stderr: r.stderr, lines };
}

describe('DynamoDB state errors name the field and the fix', () => {
  it('an endpoint nothing answers at', async () => {
    const port = await closedPort();
    const r = runWith(
      { dynamodb: { table: 'tidemark-state', region: 'us-east-1', endpoint: `http://127.0.0.1:${port}` } },
      { uri: `file://${scratch}/lake` },
    );
    expect(r.code).toBe(1);
    expect(r.lines).toHaveLength(1);
    expect(r.lines[0]).toMatch(/no DynamoDB endpoint answered at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
    expect(r.lines[0]).toContain('state.dynamodb.endpoint');
    // The Node 20 SDK deprecation banner is not shown to users.
    expect(r.stderr).not.toContain('NodeVersionSupportWarning');
  });

  it('no region anywhere', () => {
    const r = runWith({ dynamodb: { table: 'tidemark-state' } }, { uri: `file://${scratch}/lake` });
    expect(r.code).toBe(1);
    expect(r.lines).toHaveLength(1);
    expect(r.lines[0]).toMatch(/no AWS region .*set state\.dynamodb\.region in the spec or AWS_REGION/);
  });

  it('a table that does not exist', async () => {
    const store = new DynamoCursorStore({
      client: dynamoClient(),
      tableName: `missing-${process.pid}`,
      endpoint: testServers().dynamoEndpoint,
    });
    const err = (await store.load('inc#p#t').catch((e: unknown) => e)) as StateError;
    expect(err.code).toBe('STATE_TABLE_MISSING');
    expect(err.message).toMatch(/does not exist at http.*deploy the stack .*state\.dynamodb\.table/);
  });
});

describe('S3 lake errors name the field and the fix', () => {
  it('a bucket that does not exist', async () => {
    const store = new S3ObjectStore({
      bucket: `missing-${process.pid}`,
      client: s3Client(),
      endpoint: testServers().s3Endpoint,
    });
    const err = (await store.list('x/').catch((e: unknown) => e)) as SinkError;
    expect(err.code).toBe('SINK_BUCKET_MISSING');
    expect(err.message).toMatch(/bucket missing-\d+ does not exist at http.*fix the bucket in lake\.uri/);
  });

  it('an endpoint nothing answers at', async () => {
    const port = await closedPort();
    const endpoint = `http://127.0.0.1:${port}`;
    const store = new S3ObjectStore({ bucket: 'some-bucket', client: s3Client({ endpoint }), endpoint });
    const err = (await store.put('raw/t/a.parquet', Buffer.from('x')).catch((e: unknown) => e)) as SinkError;
    expect(err.code).toBe('SINK_UNREACHABLE');
    expect(err.message).toMatch(
      /no S3 endpoint answered at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\).*check lake\.endpoint and lake\.region/,
    );
  });

  it('classifies access denied and a bucket in another region the way the SDK reports them', () => {
    const ctx = { service: 'S3', field: 'lake', resource: 'bucket my-lake', action: 's3:PutObject' };
    const denied = Object.assign(new Error('Access Denied'), {
      name: 'AccessDenied',
      $metadata: { httpStatusCode: 403 },
    });
    expect(classifyAwsError(denied, ctx)).toMatchObject({ kind: 'ACCESS_DENIED' });
    expect(classifyAwsError(denied, ctx)!.message).toContain('grant the role s3:PutObject on it');
    const redirect = Object.assign(
      new Error(
        "The authorization header is malformed; the region 'us-east-1' is wrong; expecting 'eu-west-1'",
      ),
      { name: 'AuthorizationHeaderMalformed', $metadata: { httpStatusCode: 400 } },
    );
    expect(classifyAwsError(redirect, ctx)!.message).toMatch(
      /another region \(eu-west-1\).*set lake\.region: eu-west-1/,
    );
    const moved = Object.assign(
      new Error('The bucket you are attempting to access must be addressed using the specified endpoint.'),
      {
        name: 'PermanentRedirect',
        $metadata: { httpStatusCode: 301 },
      },
    );
    expect(classifyAwsError(moved, ctx)).toMatchObject({ kind: 'WRONG_REGION' });
    const dynamoDenied = Object.assign(new Error('User: arn:aws:sts::1:assumed-role/x is not authorized'), {
      name: 'AccessDeniedException',
      $metadata: { httpStatusCode: 400 },
    });
    expect(
      classifyAwsError(dynamoDenied, {
        service: 'DynamoDB',
        field: 'state.dynamodb',
        resource: 'table t',
        action: 'dynamodb:UpdateItem',
      }),
    ).toMatchObject({ kind: 'ACCESS_DENIED' });
    // Something else stays unclassified: the caller keeps the SDK's own words.
    expect(
      classifyAwsError(Object.assign(new Error('boom'), { name: 'InternalError' }), ctx),
    ).toBeUndefined();
  });
});

describe('local lake folder errors', () => {
  it('a lake folder under a regular file', async () => {
    const file = join(scratch, 'regular-file');
    writeFileSync(file, 'x');
    const store = new FileObjectStore(join(file, 'lake'));
    const err = (await store.put('t/a.parquet', Buffer.from('x')).catch((e: unknown) => e)) as SinkError;
    expect(err.code).toBe('SINK_DIR_UNWRITABLE');
    expect(err.message).toMatch(/ENOTDIR.*lake\.uri .* must be a folder this user can create and write/);
  });

  // A real full disk and a real read-only file system: a tiny tmpfs (root only; skipped otherwise).
  const canMount = process.getuid?.() === 0 && spawnSync('mount', ['--version']).status === 0;
  it.runIf(canMount)('a full disk and a read-only file system (tmpfs)', async () => {
    const mnt = mkdtempSync(join(scratch, 'tmpfs-'));
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', mnt]);
    if (mounted.status !== 0) return; // no mount permission in this sandbox: nothing to test
    try {
      const store = new FileObjectStore(mnt);
      const full = (await store
        .put('t/big.parquet', Buffer.alloc(256 * 1024))
        .catch((e: unknown) => e)) as SinkError;
      expect(full.code).toBe('SINK_DISK_FULL');
      expect(full.message).toMatch(/ENOSPC.*disk is full/);
      await store.put('t/small.parquet', Buffer.from('ok'));
      expect(spawnSync('mount', ['-o', 'remount,ro', mnt]).status).toBe(0);
      const ro = (await store.put('t/other.parquet', Buffer.from('x')).catch((e: unknown) => e)) as SinkError;
      expect(ro.code).toBe('SINK_DIR_UNWRITABLE');
      expect(ro.message).toContain('EROFS');
    } finally {
      spawnSync('umount', [mnt]);
    }
  });
});
