/**
 * The MySQL part of the CDC crash child's config (./mysql-cdc-child.ts, run by
 * test/integration/cdc-crash/mysql-fixture.ts): the database and dump server id it streams with,
 * the captured tables, and the order of binlog positions. What every driver's child shares is in
 * ./cdc-crash-config.ts. Importing the child itself would run it.
 */
import { binlogFileIndex } from '../../shared/position/position.js';
import type { CrashChildConfig } from './cdc-crash-config.js';

export interface MyChildConfig extends CrashChildConfig {
  readonly url: string;
  /** The captured tables' database. */
  readonly database: string;
  /** The binlog dump's replica server id (one per test run: a new dump replaces the old one). */
  readonly serverId: number;
}

/** The captured tables (lake target = source name `db.table`) and their primary keys. */
export const MY_TABLES = ['accounts', 'orders', 'events'] as const;
export type MyTable = (typeof MY_TABLES)[number];

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
