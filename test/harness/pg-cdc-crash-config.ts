/**
 * The Postgres part of the CDC crash child's config (./pg-cdc-child.ts, run by
 * test/integration/cdc-crash/postgres-fixture.ts): the slot and publication it streams from and
 * the captured pgbench tables. What every driver's child shares is in ./cdc-crash-config.ts.
 * Importing the child itself would run it.
 */
import type { CrashChildConfig } from './cdc-crash-config.js';

export interface PgChildConfig extends CrashChildConfig {
  readonly url: string;
  readonly slot: string;
  readonly publication: string;
}

/** The captured pgbench tables: lake target = source name. */
export const PGBENCH_TABLES: readonly { source: string; writeMode: 'upsert' | 'append' }[] = [
  { source: 'public.pgbench_accounts', writeMode: 'upsert' },
  { source: 'public.pgbench_branches', writeMode: 'upsert' },
  { source: 'public.pgbench_tellers', writeMode: 'upsert' },
  { source: 'public.pgbench_history', writeMode: 'append' },
];
