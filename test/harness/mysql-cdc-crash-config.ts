/**
 * What the MySQL crash test (test/integration/mysql-cdc-crash.test.ts) and its child process
 * (./mysql-cdc-child.ts) share: the child's config, the kill record, the state key, the lease
 * timing, the captured tables, and the order of binlog positions. Importing the child itself
 * would run it.
 */
import type { CdcPoint } from '../../shared/engine/cdc/options.js';
import { cdcStateKey } from '../../shared/engine/cdc/state.js';
import { binlogFileIndex } from '../../shared/position/position.js';

/** A broken protocol step the crash test must detect. */
export type MyMutation = 'ack-before-commit' | 'noop-recover' | 'commit-before-write';

export interface MyChildConfig {
  readonly dir: string;
  readonly url: string;
  /** The captured tables' database. */
  readonly database: string;
  /** The binlog dump's replica server id (one per test run: a new dump replaces the old one). */
  readonly serverId: number;
  readonly kill?: { readonly point: CdcPoint; readonly nth: number };
  readonly mutation?: MyMutation;
  /** Flush a table at this many pending rows (default 200). */
  readonly flushRows?: number;
  /** With nothing pending, commit a newer resume position at least this often (default 1000). */
  readonly idleCommitMs?: number;
}

export const MY_PIPELINE = 'p';
export const MY_SOURCE = 'src';
export const MY_STATE_KEY = cdcStateKey(MY_PIPELINE, MY_SOURCE);
export const MY_LEASE_TTL_MS = 15_000;
/** Renewals every 2 s, so a kill at the first renewal lands quickly. */
export const MY_RENEW_EVERY_MS = 2000;

/** The captured tables (lake target = source name `db.table`) and their primary keys. */
export const MY_TABLES = ['accounts', 'orders', 'events'] as const;
export type MyTable = (typeof MY_TABLES)[number];

/** The kill record a child writes right before it SIGKILLs itself. */
export interface KillLine {
  readonly point: CdcPoint | 'idle';
  readonly nth: number;
  /** The committed state position (`mysql` JSON value) when the child killed itself. */
  readonly committed: string | null;
}

/** [epoch, binlog file index, offset] of a `mysql` position value (JSON {file,pos,gtid,server,epoch}). */
export function binlogOrder(value: string): [number, number, number] {
  const v = JSON.parse(value) as { file: string; pos: number; epoch?: number };
  return [v.epoch ?? 0, binlogFileIndex(v.file), v.pos];
}

/**
 * <0, 0, >0 as binlog position value `a` is before, at, after `b`; `fileOnly`: by (file index,
 * offset) alone (against SHOW MASTER STATUS, which has no epoch).
 */
export function compareBinlog(a: string, b: string, fileOnly = false): number {
  const x = binlogOrder(a);
  const y = binlogOrder(b);
  for (let i = fileOnly ? 1 : 0; i < 3; i++) if (x[i]! !== y[i]!) return x[i]! - y[i]!;
  return 0;
}
