/**
 * The Postgres source for incremental syncs: introspection, the row-map page reader and the
 * columnar (binary COPY) page reader behind the source contracts.
 *
 * Owns: the connection's lifetime, per-table plans (introspected once, reused by every page),
 * the privilege check done before the first page, and error translation at the boundary
 * (connection failures and query errors become SourceErrors naming the table). Must never be
 * imported by the engine (it goes through the contracts) and never logs a password.
 *
 * @example
 * const pg = new PostgresSource({ url, lagMs: 5000 });
 * const { schema, ref } = await pg.introspect({ source: 'public.orders' });
 * let after = '';
 * for (;;) {
 *   const page = await pg.incrementalBatch({ table: ref, cursorColumn: 'updated_at', after, pageSize: 50_000,
 *                                            posPrefix, ordinalBase: 0, schema, writeMode: 'upsert' });
 *   // write page.page, commit page.next ...
 *   if (!page.more) break;
 *   after = page.next;
 * }
 * await pg.close();
 */
import {
  type CdcPreflightSettings,
  type CdcPreflightTable,
  type CheckItem,
  failed,
  type PreflightTable,
  passed,
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
import { checkActivityPrivilege, wallClockToUtcMicros } from './bound.js';
import { preflightCdcSource, preflightCdcTable } from './cdc/preflight.js';
import { PostgresConnection, type Sql, translateConnectError } from './connect.js';
import { type BatchPageRequest, type BoundSettings, readBatchPage, readRowPage } from './incremental.js';
import {
  countNullCursors,
  introspectTable,
  type KeysetPlan,
  keysetPlan,
  type TablePlan,
} from './introspect.js';
import { preflightConnection, preflightTable } from './preflight.js';

export type { BoundHeldWarning, BoundHolder } from './bound.js';

/**
 * Options of a Postgres source (shared/drivers/source-options.ts). The bound reads
 * pg_stat_activity, which needs `pg_read_all_stats` unless `lagOnly`.
 */
export type PostgresSourceOptions = SqlSourceOptions;

/**
 * A Postgres source for cursor-based incremental sync. One connection (opened on first use,
 * replaced if it dies or a page read is aborted); pages are read one at a time. Implements the
 * contracts of a SQL source (../sql-source.ts `SqlSource`).
 */
export class PostgresSource implements SqlSource {
  private readonly db: PostgresConnection;
  private readonly boundary: ReadBoundary;
  private readonly options: PostgresSourceOptions;
  private readonly settings: BoundSettings;
  private readonly clock: Clock;
  private readonly plans = new Map<string, TablePlan>();
  private readonly keysets = new Map<string, KeysetPlan>();
  private privilegeChecked = false;

  constructor(options: PostgresSourceOptions) {
    this.options = options;
    this.db = new PostgresConnection(connectionOf(options));
    const ep = this.db.endpoint;
    this.boundary = {
      at: `${ep.host}:${ep.port}/${ep.database}`,
      abandon: () => this.db.abandon(),
      translate: (e) => translateConnectError(e, ep, options.connectTimeoutMs),
    };
    const lagMs = options.lagMs ?? DEFAULT_LAG_MS;
    this.settings = {
      lagMs,
      settleMs: lagMs,
      stallAfterMs: options.stallAfterMs ?? DEFAULT_STALL_AFTER_MS,
      ...(options.cursorTimeZone ? { cursorTimeZone: options.cursorTimeZone } : {}),
    };
    this.clock = options.clock ?? Date.now;
  }

  /**
   * Resolves a table's canonical schema (columns in attnum order, exclusions applied, primary
   * key in key order). With `cursorColumn`, also validates the cursor and the role's privilege
   * and returns the cursor warnings (e.g. `CURSOR_NOT_INDEXED`) here instead of with the first page.
   */
  async introspect(t: TableSpec): Promise<{ ref: TableRef; schema: Schema; warnings: Warning[] }> {
    return this.guard(t.source, async (sql) => {
      const plan = await introspectTable(sql, t);
      this.plans.set(t.source, plan);
      for (const key of this.keysets.keys()) if (key.startsWith(`${t.source}\0`)) this.keysets.delete(key);
      const warnings: Warning[] = [];
      if (t.cursorColumn !== undefined)
        warnings.push(...((await this.keyset(sql, plan, t.cursorColumn)).created?.warnings ?? []));
      return { ref: plan.ref, schema: plan.schema, warnings };
    });
  }

  /** Rows whose cursor is NULL; they are never reached by `>` (the engine applies the nullCursor policy). */
  async countNullCursors(table: TableRef, cursorColumn: string): Promise<number> {
    return this.guard(table.source, async (sql) =>
      countNullCursors(sql, await this.plan(sql, table), cursorColumn),
    );
  }

  /** pg_class.reltuples (planner statistics; -1 or 0 before the first ANALYZE: undefined). */
  async estimateRows(table: TableRef): Promise<number | undefined> {
    return this.guard(table.source, async (sql) => {
      const plan = await this.plan(sql, table);
      const [row] = await sql.unsafe<{ n: string }[]>(
        'SELECT reltuples::bigint::text AS n FROM pg_class WHERE oid = $1::oid',
        [plan.oid],
      );
      const n = Number(row?.n ?? -1);
      return n > 0 ? n : undefined;
    });
  }

  /** One page as row maps (the row path; also the oracle of the batch path). */
  async incremental(req: IncrementalPage): Promise<IncrementalResult<Record<string, unknown>[]>> {
    return this.page(req, (sql, plan, keyset) => readRowPage(sql, plan, keyset, req, this.settings));
  }

  /** One page encoded straight into a wire batch (binary COPY). `page` is undefined when empty. */
  async incrementalBatch(req: BatchPageRequest): Promise<IncrementalResult<Batch | undefined>> {
    return this.page(req, (sql, plan, keyset) =>
      readBatchPage(sql, plan, keyset, req, this.settings, this.clock),
    );
  }

  /** The `connect` check line (preflight.ts); never throws. */
  async preflightSource(): Promise<CheckItem[]> {
    return preflightConnection(this.db.endpoint, (fn) => this.guard(this.db.endpoint.source, fn));
  }

  /** A table's check lines (preflight.ts): what a run would refuse, line by line; never throws. */
  async preflightTable(t: PreflightTable): Promise<TablePreflight> {
    return preflightTable(t, { lagOnly: this.options.lagOnly ?? false, lagMs: this.settings.lagMs }, (fn) =>
      this.guard(t.source, fn),
    );
  }

  /** The source's change-stream lines (cdc/preflight.ts): settings, role, slot, publication; never throws. */
  async preflightCdcSource(
    settings: CdcPreflightSettings,
    tables: readonly CdcPreflightTable[],
  ): Promise<CheckItem[]> {
    const { slot, publication, pipeline } = settings;
    if (!slot || !publication) return [failed('slot', new Error('no slot or publication name resolved'))];
    const published = tables.map((t) => ({ source: t.source, insertOnly: t.insertOnly }));
    const source = this.db.endpoint.source;
    const owner = pipeline ? { pipeline, source, slot } : undefined;
    try {
      return await this.guard(source, (sql) =>
        preflightCdcSource(sql, { slot, publication, tables: published, ...(owner ? { owner } : {}) }),
      );
    } catch (e) {
      return [failed('cdc', e)];
    }
  }

  /** A cdc table's lines: `table` (exists, SELECT) and `toast` (cdc/preflight.ts); never throws. */
  async preflightCdcTable(t: CdcPreflightTable): Promise<CheckItem[]> {
    let columns: number;
    try {
      columns = (await this.guard(t.source, (sql) => introspectTable(sql, t))).columns.length;
    } catch (e) {
      return [failed('table', e)];
    }
    const toast = await this.guard(t.source, (sql) =>
      preflightCdcTable(sql, { source: t.source, insertOnly: t.insertOnly }),
    ).catch((e: unknown) => failed('toast', e));
    return [passed('table', `exists, and this role may SELECT from it (${columns} columns)`), toast];
  }

  /** A wall-clock timestamp as UTC microseconds, in the database's default TimeZone (WallClockZone). */
  async wallClockToUtc(wallMicros: bigint): Promise<bigint | undefined> {
    const text = wallClockText(wallMicros);
    if (text === undefined) return undefined;
    return this.guard(this.db.endpoint.source, (sql) =>
      wallClockToUtcMicros(sql, text, this.options.cursorTimeZone),
    );
  }

  /** Closes the connection (waits up to 5 s for a running query). */
  async close(): Promise<void> {
    await this.db.close();
  }

  private async plan(sql: Sql, table: TableRef): Promise<TablePlan> {
    const known = this.plans.get(table.source);
    if (known) return known;
    const plan = await introspectTable(sql, { source: table.source, target: table.target });
    this.plans.set(table.source, plan);
    return plan;
  }

  /**
   * The keyset of (table, cursor), validated once per introspection; the first one also checks
   * the privilege. `created` is set when this call validated it: its warnings are reported once,
   * by `introspect` when it was given the cursor, else with the first page.
   */
  private async keyset(
    sql: Sql,
    plan: TablePlan,
    cursorColumn: string,
  ): Promise<{ keyset: KeysetPlan; created?: KeysetPlan }> {
    const key = `${plan.source}\0${cursorColumn}`;
    const known = this.keysets.get(key);
    if (known) return { keyset: known };
    if (!this.privilegeChecked) {
      await checkActivityPrivilege(sql, plan.source, this.options.lagOnly ?? false);
      this.privilegeChecked = true;
    }
    const k = await keysetPlan(sql, plan, cursorColumn);
    this.keysets.set(key, k);
    return { keyset: k, created: k };
  }

  /**
   * One page of `req`, read by `read` with the table's plan and keyset; the keyset's one-time
   * warnings go in front of the page's own.
   */
  private async page<T>(
    req: IncrementalPage,
    read: (sql: Sql, plan: TablePlan, keyset: KeysetPlan) => Promise<IncrementalResult<T>>,
  ): Promise<IncrementalResult<T>> {
    return this.guard(
      req.table.source,
      async (sql) => {
        const plan = await this.plan(sql, req.table);
        const { keyset, created } = await this.keyset(sql, plan, req.cursorColumn);
        return withWarnings(await read(sql, plan, keyset), created?.warnings);
      },
      req.signal,
    );
  }

  /** Runs `fn` on the connection under ../sql-source.ts `guardRead` (errors, abort). */
  private async guard<T>(table: string, fn: (sql: Sql) => Promise<T>, signal?: AbortSignal): Promise<T> {
    return guardRead(this.boundary, table, () => this.db.run(fn), signal);
  }
}
