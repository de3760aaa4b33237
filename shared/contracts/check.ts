/**
 * The preflight check line (`tidemark check`): one shape for everything a run needs, whoever
 * checks it (a driver for its connection and tables, the state store, the lake; later the CDC
 * preflight for slots, publications and the binlog, as more items per source or table).
 *
 * Owns: the shape of a check line and of a driver's table preflight, and the constructors of
 * lines, so a `fail` carries the message and code of the error a run would stop with (a check and
 * a run never disagree on what is wrong or on the fix). Never performs a check: drivers, stores
 * and the composition root (shared/pipeline/check.ts) do.
 */
import type { Schema } from '../dataplane/schema.js';
import type { Code } from './error-codes.js';
import { TidemarkError } from './errors.js';
import type { TableRef, TableSpec, Warning } from './source.js';

/**
 * `ok`: a run has what it needs here. `warn`: a run works, but something costs speed or can
 * skip rows in a documented case (the message says which). `fail`: a run would stop here.
 */
export type CheckStatus = 'ok' | 'warn' | 'fail';

/** One thing checked, as the operator reads it. */
export interface CheckItem {
  /**
   * What was checked, a stable id per scope: `connect`; per table `table`, `key`, `cursor`,
   * `nulls`, `index`, `timezone`, `privilege`, `writeMode`; state `dynamodb` or `dir`; lake `s3`
   * or `dir`. CDC preflight adds its own (`slot`, `publication`, `binlog`) without changing these.
   */
  readonly check: string;
  readonly status: CheckStatus;
  /** What was found; on `warn` and `fail` it also names the fix (a GRANT, an index, a spec field). */
  readonly message: string;
  /**
   * The documented code (error-codes.ts, docs/errors.md) behind a `warn` or `fail`: a `fail`
   * carries the code of the error a run would stop with, a `warn` a warning's code or an error's
   * whose condition only warns here.
   */
  readonly code?: Code;
}

/** A spec table as a driver's preflight needs it. */
export interface PreflightTable extends TableSpec {
  readonly cursorColumn: string;
}

/** What a driver found about one table: its check lines and, when it resolved, its facts. */
export interface TablePreflight {
  readonly items: readonly CheckItem[];
  /**
   * Set when the table and its cursor column resolved, for the rules that are not the driver's
   * (upsert needs a key, the NULL-cursor policy): the ref and canonical schema a run would use.
   */
  readonly resolved?: {
    readonly ref: TableRef;
    readonly schema: Schema;
    /** The cursor column is declared NOT NULL at the source. */
    readonly cursorNotNull: boolean;
  };
}

/**
 * Optional source capability: checks what an incremental run would need without reading rows
 * (except the NULL count a run also does) and without writing anything.
 */
export interface Preflight {
  /** The connection itself (and later the source-wide CDC settings). Never throws. */
  preflightSource(): Promise<CheckItem[]>;
  /** One table: existence and SELECT, key, cursor, index, bound privilege. Never throws. */
  preflightTable(t: PreflightTable): Promise<TablePreflight>;
}

/**
 * A source's change-stream settings, as `cdcSettings` resolves them (Postgres: slot and
 * publication; MySQL: serverId and binlogRetentionHours).
 */
export interface CdcPreflightSettings {
  /** The pipeline checked (Postgres: a publication or slot another pipeline marked is refused). */
  readonly pipeline?: string;
  readonly slot?: string;
  readonly publication?: string;
  readonly serverId?: number;
  readonly binlogRetentionHours?: number;
}

/** A cdc table as a driver's CDC preflight needs it. */
export interface CdcPreflightTable extends TableSpec {
  /** Postgres: captured through the insert-only publication (an append-only table without a key). */
  readonly insertOnly: boolean;
  /** The spec table's writeMode (MySQL: a table without a primary key must be append). */
  readonly writeMode?: 'append' | 'upsert';
}

/**
 * Optional source capability: checks what the source's change stream would need (log settings,
 * replication privilege, slot, publication) without creating anything. Never throws.
 */
export interface CdcPreflight {
  /** The source-wide lines (`wal_level`, `replication`, `slot`, `publication`, ...) for these cdc tables. */
  preflightCdcSource(
    settings: CdcPreflightSettings,
    tables: readonly CdcPreflightTable[],
  ): Promise<CheckItem[]>;
  /** One cdc table: existence and SELECT, and how its changes are captured (`toast`). */
  preflightCdcTable(t: CdcPreflightTable): Promise<CheckItem[]>;
}

/** An `ok` line. */
export function passed(check: string, message: string): CheckItem {
  return { check, status: 'ok', message };
}

/** A `warn` line from a driver warning (e.g. `CURSOR_NOT_INDEXED`). */
export function warned(check: string, w: Warning): CheckItem {
  return { check, status: 'warn', message: w.message, code: w.code };
}

/** The `fail` line of an error a run would stop with: its first line and, for ours, its code. */
export function failed(check: string, e: unknown): CheckItem {
  const message = e instanceof Error ? (e.message.split('\n')[0] ?? e.name) : String(e);
  return { check, status: 'fail', message, ...(e instanceof TidemarkError ? { code: e.code } : {}) };
}

/** Runs one check step: its `ok` line with the message it returns, or the `fail` line of what it threw. */
export async function step(check: string, fn: () => Promise<string>): Promise<CheckItem> {
  try {
    return passed(check, await fn());
  } catch (e) {
    return failed(check, e);
  }
}
