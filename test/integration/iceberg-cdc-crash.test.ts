/**
 * The CDC crash must-shows (Postgres under pgbench, MariaDB under a transactional workload) with Iceberg tables (issue 30; docs/decisions/0024-iceberg-commits.md):
 * the CDC process is SIGKILLed 20 times at asserted points of its commit protocol, the
 * point between the catalog commit and the ack among them, and afterwards each table, read as its
 * current snapshot by pyiceberg's scan plan, holds every source change exactly once, and no file a
 * snapshot references was deleted. The mutation self-checks: recovery disabled (the state's
 * pending commit not rolled forward) and the commit order reversed (catalog first) with
 * delete-from-`next` recovery must both FAIL the same checks.
 */
import { describe } from 'vitest';
import { readersMissing } from '../harness/readers.js';
import { mysqlIcebergCrashFixture } from './cdc-crash/mysql-fixture.js';
import { postgresIcebergCrashFixture } from './cdc-crash/postgres-fixture.js';
import { cdcCrashScenarios } from './cdc-crash/scenarios.js';

describe.skipIf(readersMissing)('Postgres CDC into Iceberg tables under pgbench, SIGKILLed 20 times', () => {
  cdcCrashScenarios(postgresIcebergCrashFixture);
});

describe.skipIf(readersMissing)(
  'MariaDB CDC into Iceberg tables under a transactional workload, SIGKILLed 20 times',
  () => {
    cdcCrashScenarios(mysqlIcebergCrashFixture);
  },
);
