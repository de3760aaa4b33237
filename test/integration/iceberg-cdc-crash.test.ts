/**
 * The CDC crash must-shows (Postgres under pgbench, MariaDB under a transactional workload) with Iceberg tables (issue 30; docs/decisions/0024-iceberg-commits.md):
 * the CDC process is SIGKILLed 20 times at asserted points of its commit protocol, the
 * point between the catalog commit and the ack among them, and afterwards no file a snapshot
 * references was deleted, every append table (pgbench_history) holds every source change exactly
 * once, and every upsert table, a current state (issue 31, docs/decisions/0026-current-state-delete-form.md),
 * read AS IS (no dedupe) by pyiceberg, icebird and Spark (one session for the file; Spark is
 * skipped when it is not installed), holds no `__op = d` row, exactly one row per key, and equals
 * the source. Every upsert table keeps its history table `<target>_history` (docs/iceberg.md
 * "History tables"), and kills land between the two tables' catalog commits too (the harness's
 * point `between-tables`); each history's current snapshot has no delete file, is partitioned by
 * day(__commit_ts), holds every change once (no duplicate (key, __pos), no rolled-back marker)
 * and its latest version per key equals the source. The MariaDB workload deletes rows and changes
 * primary keys (UPDATE ... SET id = ...).
 * The mutation self-checks: recovery disabled (the state's pending commit not rolled forward) and
 * the commit order reversed (catalog first) with delete-from-`next` recovery must both FAIL the
 * same checks.
 */
import { afterAll, beforeAll, describe } from 'vitest';
import { readersMissing, SparkSession, sparkMissing } from '../harness/readers.js';
import { mysqlIcebergCrashFixture } from './cdc-crash/mysql-fixture.js';
import { postgresIcebergCrashFixture } from './cdc-crash/postgres-fixture.js';
import { cdcCrashScenarios } from './cdc-crash/scenarios.js';

let spark: SparkSession | undefined;
beforeAll(async () => {
  if (sparkMissing === undefined) spark = await SparkSession.start();
  else process.stdout.write(`[iceberg crash] Spark SKIPPED: ${sparkMissing}\n`);
}, 180_000);
afterAll(async () => {
  await spark?.quit();
}, 60_000);

describe.skipIf(readersMissing)('Postgres CDC into Iceberg tables under pgbench, SIGKILLed 20 times', () => {
  cdcCrashScenarios(postgresIcebergCrashFixture, () => spark);
});

describe.skipIf(readersMissing)(
  'MariaDB CDC into Iceberg tables under a transactional workload, SIGKILLed 20 times',
  () => {
    cdcCrashScenarios(mysqlIcebergCrashFixture, () => spark);
  },
);
