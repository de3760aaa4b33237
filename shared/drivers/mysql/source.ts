/**
 * The MySQL/MariaDB source for incremental syncs: introspection, the row-map page reader and the
 * columnar (streamed) page reader behind the source contracts. The same API as the Postgres
 * source (`PostgresSource`), so knowing one driver means knowing both.
 *
 * Owns: the connection's lifetime, per-table plans (introspected once, reused by every page),
 * the privilege check done before the first page, and error translation at the boundary
 * (connection failures and query errors become SourceErrors naming the table). Must never be
 * imported by the engine (it goes through the contracts) and never logs a password.
 *
 * @example
 * const my = new MysqlSource({ url: 'mysql://reader:pw@db:3306/shop', lagMs: 5000 });
 * const { schema, ref } = await my.introspect({ source: 'shop.orders', cursorColumn: 'updated_at' });
 * let after = '';
 * for (;;) {
 *   const page = await my.incrementalBatch({ table: ref, cursorColumn: 'updated_at', after, pageSize: 50_000,
 *                                            posPrefix, ordinalBase: 0, schema, writeMode: 'upsert' });
 *   // write page.page, commit page.next ...
 *   if (!page.more) break;
 *   after = page.next;
 * }
 * await my.close();
 */
import {
  type CdcPreflightSettings,
  type CdcPreflightTable,
  type CheckItem,
  failed,
  type PreflightTable,
  type TablePreflight,
} from '../../contracts/check.js';
import type {
  IncrementalPage,
  IncrementalResult,
  TableRef,
  TableSpec,
  Warning,
} from '../../contracts/source.js';
import type { Clock } from '../../contracts/state.js';
import type { Batch } from '../../dataplane/batch.js';
import type { Schema } from '../../dataplane/schema.js';
import { withWarnings } from '../page.js';
import {
  connectionOf,
  DEFAULT_LAG_MS,
  DEFAULT_STALL_AFTER_MS,
  type SqlSourceOptions,
} from '../source-options.js';
import { guardRead, type ReadBoundary, type SqlSource, wallClockText } from '../sql-source.js';
import { checkTransactionPrivilege, wallClockToUtcMicros } from './bound.js';
import { preflightCdcSource, preflightCdcTable } from './cdc/preflight.js';
import { MysqlConnection, translateConnectError } from './connect.js';
import {
  type BatchPageRequest,
  type BoundSettings,
  readBatchPage,
  readRowPage,
  type SettledMark,
} from './incremental.js';
import {
  countNullCursors,
  introspectTable,
  type KeysetPlan,
  keysetPlan,
  schemaChangeOf,
  splitTableName,
  type TablePlan,
} from './introspect.js';
import { preflightConnection, preflightTable } from './preflight.js';

export type { BoundHeldWarning, BoundHolder } from './bound.js';

/**
 * Options of a MySQL/MariaDB source (shared/drivers/source-options.ts). The bound reads
 * INFORMATION_SCHEMA.INNODB_TRX, which needs PROCESS unless `lagOnly`; the lag also covers the
 * moment between a statement's NOW() and its transaction appearing there.
 */
export type MysqlSourceOptions = SqlSourceOptions;
/**
 * The least time a high-water page waits for open transactions to end, whatever the lag:
 * INNODB_TRX lists every database's transactions, so on a shared server some short autocommit
 * write is nearly always open at the instant the mark is read; a zero wait would hold most pages.
 */
export const MIN_SETTLE_MS = 1_000;

/**
 * A MySQL/MariaDB source for cursor-based incremental sync. One connection (opened on first use,
 * replaced if it dies or a page read is aborted); pages are read one at a time. Implements the
 * contracts of a SQL source (../sql-source.ts `SqlSource`).
 */
export class MysqlSource implements SqlSource {
  private readonly db: MysqlConnection;
  private readonly boundary: ReadBoundary;
  private readonly options: MysqlSourceOptions;
  private readonly lagMs: number;
  private readonly stallAfterMs: number;
  private readonly clock: Clock;
  private readonly plans = new Map<string, TablePlan>();
  private readonly keysets = new Map<string, { keyset: KeysetPlan; settled: SettledMark }>();
  /** Whether INNODB_TRX is readable; undefined until the first keyset checked it. */
  private canSeeTransactions: boolean | undefined;

  constructor(options: MysqlSourceOptions) {
    this.options = options;
    this.db = new MysqlConnection(connectionOf(options));
    const ep = this.db.endpoint;
    this.boundary = {
      at: `${ep.host}:${ep.port}`,
      abandon: (reason) => this.db.abandon(reason),
      translate: (e) => translateConnectError(e, ep, options.connectTimeoutMs),
    };
    this.lagMs = options.lagMs ?? DEFAULT_LAG_MS;
    this.stallAfterMs = options.stallAfterMs ?? DEFAULT_STALL_AFTER_MS;
    this.clock = options.clock ?? Date.now;
  }

  /**
   * Resolves a table's canonical schema (columns in ORDINAL_POSITION order, exclusions applied,
   * primary key in key order). With `cursorColumn`, also validates the cursor and the account's
   * privilege and returns the cursor warnings (e.g. `CURSOR_NOT_INDEXED`) here instead of with
   * the first page.
   */
  async introspect(t: TableSpec): Promise<{ ref: TableRef; schema: Schema; warnings: Warning[] }> {
    return this.guard(t.source, async () => {
      const plan = await introspectTable(this.db, t);
      this.plans.set(t.source, plan);
      for (const key of this.keysets.keys()) if (key.startsWith(`${t.source}\0`)) this.keysets.delete(key);
      const warnings: Warning[] = [];
      if (t.cursorColumn !== undefined)
        warnings.push(...((await this.keyset(plan, t.cursorColumn)).created?.warnings ?? []));
      return { ref: plan.ref, schema: plan.schema, warnings };
    });
  }

  /** Rows whose cursor is NULL or a zero date; they are never read (the engine applies the nullCursor policy). */
  async countNullCursors(table: TableRef, cursorColumn: string): Promise<number> {
    return this.guard(table.source, async () =>
      countNullCursors(this.db, await this.plan(table), cursorColumn),
    );
  }

  /** information_schema.TABLES.TABLE_ROWS (InnoDB's estimate; undefined when unknown). */
  async estimateRows(table: TableRef): Promise<number | undefined> {
    return this.guard(table.source, async () => {
      const { database, table: name } = splitTableName(table.source);
      const rows = await this.db.query<{ n: string | null }>(
        'SELECT TABLE_ROWS AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?',
        [database, name],
      );
      const n = Number(rows[0]?.n ?? 0);
      return n > 0 ? n : undefined;
    });
  }

  /** One page as row maps (the row path; also the oracle of the batch path). */
  async incremental(req: IncrementalPage): Promise<IncrementalResult<Record<string, unknown>[]>> {
    return this.page(req, (plan, keyset, settled) =>
      readRowPage(this.db, plan, keyset, req, this.settings(), settled),
    );
  }

  /** One page encoded straight into a wire batch (rows streamed into the encoder). `page` is undefined when empty. */
  async incrementalBatch(req: BatchPageRequest): Promise<IncrementalResult<Batch | undefined>> {
    return this.page(req, (plan, keyset, settled) =>
      readBatchPage(this.db, plan, keyset, req, this.settings(), settled, this.clock),
    );
  }

  /** The `connect` check line (preflight.ts); never throws. */
  async preflightSource(): Promise<CheckItem[]> {
    return preflightConnection(this.db, (fn) => this.guard(this.db.endpoint.source, fn));
  }

  /** A table's check lines (preflight.ts): what a run would refuse, line by line; never throws. */
  async preflightTable(t: PreflightTable): Promise<TablePreflight> {
    return preflightTable(
      this.db,
      t,
      { lagOnly: this.options.lagOnly ?? false, lagMs: this.lagMs, stallAfterMs: this.stallAfterMs },
      (fn) => this.guard(t.source, fn),
    );
  }

  /** The source's binlog lines (cdc/preflight.ts): settings, server id, grants, retention; never throws. */
  async preflightCdcSource(
    settings: CdcPreflightSettings,
    tables: readonly CdcPreflightTable[],
  ): Promise<CheckItem[]> {
    // 24: the spec's default (config/spec.ts DEFAULT_BINLOG_RETENTION_HOURS), which check.ts passes.
    const { serverId, binlogRetentionHours = 24 } = settings;
    if (serverId === undefined) {
      return [failed('server_id', new Error('no sources.<name>.cdc.serverId resolved'))];
    }
    try {
      return await this.guard(this.db.endpoint.source, () =>
        preflightCdcSource(this.db, { serverId, binlogRetentionHours, tables }),
      );
    } catch (e) {
      return [failed('cdc', e)];
    }
  }

  /** A cdc table's lines: `table` (exists, SELECT, columns) and `key` (cdc/preflight.ts); never throws. */
  async preflightCdcTable(t: CdcPreflightTable): Promise<CheckItem[]> {
    try {
      return await this.guard(t.source, () => preflightCdcTable(this.db, t));
    } catch (e) {
      return [failed('table', e)];
    }
  }

  /** A wall-clock timestamp as UTC microseconds, in the writers' zone (cursorTimeZone) or the server's @@global.time_zone (WallClockZone). */
  async wallClockToUtc(wallMicros: bigint): Promise<bigint | undefined> {
    const text = wallClockText(wallMicros);
    if (text === undefined) return undefined;
    return wallClockToUtcMicros(this.db, text, this.options.cursorTimeZone);
  }

  /** Closes the connection (waits for a running statement). */
  async close(): Promise<void> {
    await this.db.close();
  }

  private settings(): BoundSettings {
    return {
      lagMs: this.lagMs,
      settleMs: Math.max(this.lagMs, MIN_SETTLE_MS),
      stallAfterMs: this.stallAfterMs,
      canSeeTransactions: this.canSeeTransactions ?? false,
      ...(this.options.cursorTimeZone ? { cursorTimeZone: this.options.cursorTimeZone } : {}),
    };
  }

  private async plan(table: TableRef): Promise<TablePlan> {
    const known = this.plans.get(table.source);
    if (known) return known;
    const plan = await introspectTable(this.db, { source: table.source, target: table.target });
    this.plans.set(table.source, plan);
    return plan;
  }

  /**
   * The keyset of (table, cursor), validated once per introspection; the first one also checks
   * the privilege. `created` is set when this call validated it: its warnings are reported once,
   * by `introspect` when it was given the cursor, else with the first page.
   */
  private async keyset(
    plan: TablePlan,
    cursorColumn: string,
  ): Promise<{ keyset: KeysetPlan; settled: SettledMark; created?: KeysetPlan }> {
    const key = `${plan.source}\0${cursorColumn}`;
    const known = this.keysets.get(key);
    if (known) return known;
    if (this.canSeeTransactions === undefined) {
      this.canSeeTransactions = await checkTransactionPrivilege(
        this.db,
        plan.source,
        this.options.lagOnly ?? false,
      );
    }
    const k = keysetPlan(plan, cursorColumn);
    const entry = { keyset: k, settled: {} };
    this.keysets.set(key, entry);
    return { ...entry, created: k };
  }

  /**
   * Runs a page read, turning a failure that means the table changed since it was introspected
   * (a result set that differs from the introspected one, an unknown column or table) into
   * SCHEMA_CHANGED for `req.table.target` (introspect.ts `schemaChangeOf`). The plan is kept: every
   * page fails the same way until the table is introspected again.
   */
  private async schemaGuard<T>(plan: TablePlan, req: IncrementalPage, read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (e) {
      if (req.signal?.aborted) throw e;
      throw (await schemaChangeOf(this.db, plan, req.table.target, e)) ?? e;
    }
  }

  /**
   * One page of `req`, read by `read` with the table's plan and keyset under `schemaGuard`; the
   * keyset's one-time warnings go in front of the page's own.
   */
  private async page<T>(
    req: IncrementalPage,
    read: (plan: TablePlan, keyset: KeysetPlan, settled: SettledMark) => Promise<IncrementalResult<T>>,
  ): Promise<IncrementalResult<T>> {
    return this.guard(
      req.table.source,
      async () => {
        const plan = await this.plan(req.table);
        const { keyset, settled, created } = await this.keyset(plan, req.cursorColumn);
        return withWarnings(
          await this.schemaGuard(plan, req, () => read(plan, keyset, settled)),
          created?.warnings,
        );
      },
      req.signal,
    );
  }

  /** Runs `fn` under ../sql-source.ts `guardRead` (errors, abort). */
  private async guard<T>(table: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    return guardRead(this.boundary, table, fn, signal);
  }
}
