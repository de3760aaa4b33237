/**
 * What the CDC crash suites (test/integration/cdc-crash/) and every driver's crash child
 * (./pg-cdc-child.ts, ./mysql-cdc-child.ts, both over ./cdc-crash-child.ts) share: the child
 * config's common part, the kill record, the broken protocol steps, the state key and the lease
 * timing. The driver's part of the config lives next to its child (./pg-cdc-crash-config.ts,
 * ./mysql-cdc-crash-config.ts). Importing a child itself would run it.
 */
import type { CdcPoint } from '../../shared/engine/cdc/options.js';
import { cdcStateKey } from '../../shared/engine/cdc/state.js';

/**
 * Where a crash child can be killed: the engine's protocol points, and `between-tables`, a point
 * of the harness's own (./cdc-crash-child.ts `killBetweenTables`, never production's CdcPoint): a
 * table with a history, its history table's catalog commit applied, its current state's not yet.
 */
export type ChildPoint = CdcPoint | 'between-tables';

/** A broken protocol step the crash suites must detect (the wrappers: ./mutations.ts). */
export type CrashMutation =
  | 'ack-before-commit'
  | 'noop-recover'
  | 'commit-before-write'
  | 'catalog-first'
  | 'eager-range-done';

/**
 * Kill at the `nth` time the engine reaches `point`. With `moved`, only commits that moved the
 * committed position past where the child started count (an `after-commit` kill that must leave
 * the Postgres slot behind the state: a flush of rows inside an open transaction moves no
 * position).
 */
export interface CrashKill {
  readonly point: ChildPoint;
  readonly nth: number;
  readonly moved?: boolean;
}

export interface CrashChildConfig {
  /** The child's state (`state/`), lake (`lake/`), kill records (`kills`) and logs. */
  readonly dir: string;
  readonly kill?: CrashKill;
  readonly mutation?: CrashMutation;
  /** Flush a table at this many pending rows (default 200). */
  readonly flushRows?: number;
  /** With nothing pending, commit a newer resume position at least this often (default 1000). */
  readonly idleCommitMs?: number;
  /**
   * `iceberg`: the tables are Iceberg tables in a `file` catalog under the lake (default plain),
   * every upsert table with its history table `<target>_history`.
   */
  readonly tableFormat?: 'iceberg';
}

export const CRASH_PIPELINE = 'p';
export const CRASH_SOURCE = 'src';
export const CRASH_STATE_KEY = cdcStateKey(CRASH_PIPELINE, CRASH_SOURCE);
export const CRASH_LEASE_TTL_MS = 15_000;
/** Renewals every 2 s, so a kill at the first renewal lands quickly. */
export const CRASH_RENEW_EVERY_MS = 2000;

/** The kill record a child writes right before it SIGKILLs itself. */
export interface KillLine {
  readonly point: ChildPoint | 'idle';
  readonly nth: number;
  /** The committed state position (the driver's position value) when the child killed itself. */
  readonly committed: string | null;
}
