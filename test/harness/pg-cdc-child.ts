/**
 * The CDC engine over the real Postgres pgoutput reader in a process of its own, for the Postgres
 * crash suite (test/integration/postgres-cdc-crash.test.ts, test/integration/cdc-crash/) that
 * SIGKILLs it at named points of the commit protocol:
 *
 *   node --import tsx test/harness/pg-cdc-child.ts '<PgChildConfig JSON>'
 *
 * `PostgresCdcSource` on the config's slot and publication, capturing the four pgbench tables;
 * the run, the kills and the mutations are the shared body's (./cdc-crash-child.ts).
 */
import { PostgresCdcSource } from '../../shared/drivers/postgres/cdc/source.js';
import { CRASH_SOURCE_NAME, runCrashChild } from './cdc-crash-child.js';
import { PGBENCH_TABLES, type PgChildConfig } from './pg-cdc-crash-config.js';

runCrashChild((config: PgChildConfig) => ({
  source: new PostgresCdcSource({
    url: config.url,
    sourceName: CRASH_SOURCE_NAME,
    connectTimeoutMs: 10_000,
    slot: config.slot,
    publication: config.publication,
    heartbeatMs: 1000,
  }),
  tables: PGBENCH_TABLES.map((t) => ({
    source: t.source,
    target: t.source,
    writeMode: t.writeMode,
    exclude: [],
    onWiden: 'stop',
    onTruncate: 'record',
  })),
  runtime: { heartbeatMs: 1000, slot: config.slot, publication: config.publication },
}));
