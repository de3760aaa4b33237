/**
 * What the pgbench crash test (test/integration/postgres-cdc-crash.test.ts) and its child process
 * (./pg-cdc-child.ts) share: the child's config, the kill record, the state key, the lease
 * timing and the captured pgbench tables. Importing the child itself would run it.
 */
import type { CdcPoint } from '../../shared/engine/cdc/options.js';
import { cdcStateKey } from '../../shared/engine/cdc/state.js';

/** A broken protocol step the crash test must detect. */
export type PgMutation = 'ack-before-commit' | 'noop-recover' | 'commit-before-write';

export interface PgChildConfig {
  readonly dir: string;
  readonly url: string;
  readonly slot: string;
  readonly publication: string;
  /**
   * Kill at the `nth` time the engine reaches `point`. With `moved`, only commits that moved the
   * committed position past where the child started count (an `after-commit` kill that must
   * leave the slot behind the state: a flush of rows inside an open transaction moves no
   * position).
   */
  readonly kill?: { readonly point: CdcPoint; readonly nth: number; readonly moved?: boolean };
  readonly mutation?: PgMutation;
  /** Flush a table at this many pending rows (default 200). */
  readonly flushRows?: number;
  /** With nothing pending, commit a newer resume position at least this often (default 1000). */
  readonly idleCommitMs?: number;
}

export const PG_PIPELINE = 'p';
export const PG_SOURCE = 'src';
export const PG_STATE_KEY = cdcStateKey(PG_PIPELINE, PG_SOURCE);
export const PG_LEASE_TTL_MS = 15_000;
/** Renewals every 2 s, so a kill at the first renewal lands quickly. */
export const PG_RENEW_EVERY_MS = 2000;

/** The captured pgbench tables: lake target = source name. */
export const PGBENCH_TABLES: readonly { source: string; writeMode: 'upsert' | 'append' }[] = [
  { source: 'public.pgbench_accounts', writeMode: 'upsert' },
  { source: 'public.pgbench_branches', writeMode: 'upsert' },
  { source: 'public.pgbench_tellers', writeMode: 'upsert' },
  { source: 'public.pgbench_history', writeMode: 'append' },
];

/** The kill record a child writes right before it SIGKILLs itself. */
export interface KillLine {
  readonly point: CdcPoint | 'idle';
  readonly nth: number;
  /** The committed state position (`pg-lsn` value) when the child killed itself. */
  readonly committed: string | null;
}
