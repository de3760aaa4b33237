/**
 * One incremental run of one table: take the lease, load the cursor, recover, then loop
 * read page -> write Parquet -> commit cursor until caught up or the deadline nears.
 *
 * Owns the durability order for the incremental path (DESIGN.md):
 *   1. the page's object is durable in the lake (sink.write resolved),
 *   2. only then the cursor moves, in ONE conditional write that also checks our lease,
 *   3. on start, objects at or past the committed position (a crashed attempt's) are removed.
 * A crash between any two steps loses nothing: the next run re-reads from the committed cursor
 * and overwrites the same object name.
 *
 * Works only through the contracts: it never names a database client or a driver.
 */

import { LeaseHeldError, TidemarkError } from '../contracts/errors.js';
import type { ObjectRef, Sink } from '../contracts/sink.js';
import type {
  BatchIncrementalSource,
  IncrementalResult,
  IncrementalSource,
  Introspector,
  NullCursorCounter,
  RowEstimator,
  TableRef,
  Warning,
} from '../contracts/source.js';
import type { Clock, CursorStore, StateRecord } from '../contracts/state.js';
import { type Batch, requireUpsertKey, type WriteMode } from '../dataplane/batch.js';
import { findColumn, type Schema } from '../dataplane/schema.js';
import type { Logger } from '../observability/log.js';
import { Progress } from '../observability/progress.js';
import { incrementalPosPrefix } from '../position/position.js';
import { describeCursor } from './cursor-display.js';
import type { IncrementalState } from './incremental-state.js';
import { initialIncrementalState, parseIncrementalState } from './incremental-state.js';

/** What the engine needs of a source for incremental runs. */
export type IncrementalCapableSource = Introspector &
  (IncrementalSource | BatchIncrementalSource) &
  Partial<NullCursorCounter> &
  Partial<RowEstimator> &
  Partial<IncrementalSource> &
  Partial<BatchIncrementalSource>;

/** Encodes a row-path page into a batch; given by the caller so the engine stays type-agnostic. */
export type RowEncoder = (
  schema: Schema,
  rows: Record<string, unknown>[],
  meta: { posPrefix: string; ordinalBase: number; writeMode: WriteMode; table: string },
) => Batch;

export interface IncrementalTable {
  /** `schema.table` at the source. */
  readonly source: string;
  /** Lake table name. */
  readonly target: string;
  readonly cursor: string;
  readonly writeMode: WriteMode;
  readonly pageSize: number;
  /** Pages also close by bytes (IncrementalPage.pageBytes); undefined: by rows only. */
  readonly pageBytes?: number;
  /** A larger row fails the run (IncrementalPage.maxRowBytes); undefined: no cap. */
  readonly maxRowBytes?: number;
  readonly nullCursor: 'refuse' | 'skip';
  readonly exclude: readonly string[];
}

export interface IncrementalRunOptions {
  readonly pipeline: string;
  readonly table: IncrementalTable;
  readonly source: IncrementalCapableSource;
  readonly store: CursorStore;
  readonly sink: Sink;
  readonly logger: Logger;
  readonly clock: Clock;
  /** Who runs: Lambda request id or host:pid:random. */
  readonly owner: string;
  /** Lease TTL; must exceed the longest run (Lambda max 15 min). */
  readonly leaseTtlMs: number;
  /**
   * With a deadline (`remainingMs`), the lease expires this long after the deadline instead of
   * after `leaseTtlMs`: a Lambda cannot outlive its deadline, so a run killed by its timeout
   * blocks the next schedule for only this long. Default 60 s.
   */
  readonly leaseGraceMs?: number;
  /** Time left before the caller's hard deadline (Lambda: context.getRemainingTimeInMillis). */
  readonly remainingMs?: () => number;
  /** Stop starting pages when less than this is left (raised to 2x the slowest page seen). */
  readonly safetyMarginMs?: number;
  /** Stop after this many pages (tests, the demo). */
  readonly maxPages?: number;
  /**
   * A page read that takes longer fails the run (`PAGE_TIMEOUT`) instead of waiting forever on
   * a stalled connection; nothing is committed past the last durable page. Default 10 min.
   */
  readonly pageTimeoutMs?: number;
  /** Encoder for sources that only implement the row path. */
  readonly encodeRows?: RowEncoder;
  /** Show a TTY progress line. */
  readonly progressTty?: boolean;
  readonly signal?: AbortSignal;
}

export interface IncrementalSummary {
  readonly pipeline: string;
  readonly table: string;
  readonly status: 'ok' | 'lease-held';
  readonly rows: number;
  readonly pages: number;
  readonly bytes: number;
  readonly objects: number;
  readonly cursorBefore: string;
  readonly cursorAfter: string;
  readonly seqBefore: number;
  readonly seqAfter: number;
  /** A backlog remains (deadline or maxPages reached before catching up). */
  readonly more: boolean;
  /** Objects removed by recovery (left by a crashed attempt). */
  readonly recovered: number;
  readonly durationMs: number;
  readonly warnings: readonly Warning[];
}

/** The key of an incremental table's state item. */
export function incrementalStateKey(pipeline: string, target: string): string {
  return `inc#${pipeline}#${target}`;
}

export class CursorColumnChangedError extends TidemarkError {
  override name = 'CursorColumnChangedError';
  constructor(table: string, before: string, after: string) {
    super(
      'CURSOR_COLUMN_CHANGED',
      `${table}: the stored cursor was taken on column "${before}" but the spec now says "${after}"; restore the spec or reset the table's state (tidemark reset) to resync from the start`,
    );
  }
}

export class NullCursorError extends TidemarkError {
  override name = 'NullCursorError';
  constructor(table: string, column: string, count: number) {
    super(
      'NULL_CURSOR',
      `${table}: ${count} row(s) have NULL in cursor column "${column}" and would never be synced; backfill the column (e.g. UPDATE ... SET ${column} = now() WHERE ${column} IS NULL) or set nullCursor: skip to leave them out knowingly`,
    );
  }
}

type PageResult = IncrementalResult<Batch | undefined>;

/** Runs one incremental sync of one table. Throws typed errors; a held lease is a normal summary. */
export async function runIncremental(opts: IncrementalRunOptions): Promise<IncrementalSummary> {
  const started = opts.clock();
  const { table, store, sink, logger } = opts;
  const key = incrementalStateKey(opts.pipeline, table.target);
  const log = logger.child({ pipeline: opts.pipeline, table: table.target });

  let record: StateRecord;
  try {
    record = await store.acquire(key, opts.owner, leaseTtl(opts));
  } catch (e) {
    if (e instanceof LeaseHeldError) {
      log.warn('lease held by another run; exiting without changes', {
        holder: e.holder,
        expiresAt: e.expiresAt,
      });
      const state = parseIncrementalState((await store.load(key)).value, table.cursor);
      return emptySummary(opts, 'lease-held', state, opts.clock() - started);
    }
    throw e;
  }

  try {
    const before = record.value
      ? parseIncrementalState(record.value, table.cursor)
      : initialIncrementalState(table.cursor);
    if (before.cursorColumn !== table.cursor)
      throw new CursorColumnChangedError(table.target, before.cursorColumn, table.cursor);

    const { ref, schema, warnings } = await opts.source.introspect({
      source: table.source,
      target: table.target,
      exclude: table.exclude,
      cursorColumn: table.cursor,
    });
    requireUpsertKey(table.target, table.writeMode, schema);
    if (!findColumn(schema, table.cursor)) {
      throw new TidemarkError(
        'CURSOR_COLUMN_MISSING',
        `${table.source}: cursor column "${table.cursor}" is not in the table`,
      );
    }
    for (const w of warnings) log.warn(w.message, { code: w.code });
    if (table.nullCursor === 'refuse' && opts.source.countNullCursors) {
      const nulls = await opts.source.countNullCursors(ref, table.cursor);
      if (nulls > 0) throw new NullCursorError(table.source, table.cursor, nulls);
    }

    // Step 4 of the durability order: whatever lies at or past the committed position was
    // written by an attempt that never committed; remove it before writing anything new.
    const removed = await sink.recover(table.target, incrementalPosPrefix(before.seq));
    if (removed.length > 0)
      log.warn('removed uncommitted objects of a crashed attempt', { objects: removed.map((r) => r.uri) });

    return await pageLoop(opts, log, key, record, before, ref, schema, warnings, removed.length, started);
  } finally {
    await store
      .release(key, opts.owner)
      .catch((e: unknown) => log.warn('lease release failed; it will expire', { error: e }));
  }
}

async function pageLoop(
  opts: IncrementalRunOptions,
  log: Logger,
  key: string,
  record: StateRecord,
  before: IncrementalState,
  ref: TableRef,
  schema: Schema,
  introWarnings: readonly Warning[],
  recovered: number,
  started: number,
): Promise<IncrementalSummary> {
  const { table } = opts;
  // A first sync reads the whole table: catalog statistics give the ETA. Later runs read a
  // backlog whose size nothing cheap can tell, so they show rows and rate only.
  const total =
    before.cursor === '' && opts.source.estimateRows
      ? await opts.source.estimateRows(ref).catch(() => undefined)
      : undefined;
  const progress = new Progress({
    label: table.target,
    logger: log,
    tty: opts.progressTty ?? false,
    now: opts.clock,
    ...(total ? { total } : {}),
  });
  const warnings: Warning[] = [...introWarnings];
  let state = before;
  let version = record.version;
  let rows = 0;
  let pages = 0;
  let bytes = 0;
  let objects = 0;
  let more = true;
  let slowestPageMs = 0;

  const readPage = (after: string, seq: number): Promise<PageResult> =>
    readOnePage(opts, ref, schema, after, incrementalPosPrefix(seq));
  const timeLeft = () => {
    if (!opts.remainingMs) return true;
    const margin = Math.max(opts.safetyMarginMs ?? 10_000, 2 * slowestPageMs);
    return opts.remainingMs() > margin;
  };

  // Read page N+1 while page N is written and committed: reading changes nothing, so the
  // overlap is safe, and it hides the source round trip behind the Parquet encode and upload.
  // Not even the first page starts when the deadline is already inside the safety margin.
  let pending: Promise<PageResult> | undefined = timeLeft() ? readPage(state.cursor, state.seq) : undefined;
  pending?.catch(() => {}); // surfaced when awaited (or abandoned after a page timeout)
  let pageStart = opts.clock();
  while (pending) {
    const page: PageResult = await withTimeout(pending, opts.pageTimeoutMs ?? 600_000, table.source);
    pending = undefined;
    for (const w of page.warnings ?? []) {
      log.warn(w.message, { code: w.code });
      if (w.code === 'BOUND_HELD')
        log.metric('BoundHeld', 1, 'Count', { pipeline: opts.pipeline, table: table.target });
      if (!warnings.some((x) => x.code === w.code)) warnings.push(w);
    }
    if (!page.page || page.page.record.numRows === 0) {
      more = false;
      break;
    }
    const canContinue =
      page.more &&
      timeLeft() &&
      (opts.maxPages === undefined || pages + 1 < opts.maxPages) &&
      !opts.signal?.aborted;
    if (canContinue) {
      pending = readPage(page.next, state.seq + 1);
      pending.catch(() => {}); // surfaced when awaited; never an unhandled rejection meanwhile
    }

    const startPosition = incrementalPosPrefix(state.seq);
    const refs: ObjectRef[] = await opts.sink.write(table.target, schema, startPosition, [page.page]);
    const pageRows = page.page.record.numRows;
    const pageBytes = refs.reduce((s, r) => s + r.bytes, 0);
    const cursorText = describeCursor(schema, table.cursor, page.next);
    const next: IncrementalState = {
      ...state,
      cursor: page.next,
      ...(cursorText ? { cursorText } : {}),
      seq: state.seq + 1,
      rowsTotal: state.rowsTotal + pageRows,
      lastCommitAt: new Date(opts.clock()).toISOString(),
      lastObjects: refs.map((r) => r.uri),
    };
    // The commit is the single conditional write that fences other writers: it fails if the
    // version moved or our lease expired, and then the object just written is an uncommitted
    // leftover that the next run's recovery removes.
    const committed = await opts.store.commit(key, {
      owner: opts.owner,
      expectedVersion: version,
      value: next as unknown as Record<string, unknown>,
      renewTtlMs: leaseTtl(opts),
    });
    version = committed.version;
    state = next;
    rows += pageRows;
    pages += 1;
    bytes += pageBytes;
    objects += refs.length;
    progress.add(pageRows, pageBytes);
    // A page's cost is the whole cycle (read wait + write + commit): the margin must cover it.
    slowestPageMs = Math.max(slowestPageMs, opts.clock() - pageStart);
    pageStart = opts.clock();
    log.debug('page committed', { rows: pageRows, seq: state.seq, bytes: pageBytes });
    if (!page.more) {
      more = false;
      if (pending) await pending.catch(() => undefined);
      break;
    }
    more = true;
  }
  progress.done();

  const summary: IncrementalSummary = {
    pipeline: opts.pipeline,
    table: table.target,
    status: 'ok',
    rows,
    pages,
    bytes,
    objects,
    cursorBefore: before.cursor,
    cursorAfter: state.cursor,
    seqBefore: before.seq,
    seqAfter: state.seq,
    more,
    recovered,
    durationMs: opts.clock() - started,
    warnings,
  };
  log.metric('RowsSynced', rows, 'Count', { pipeline: opts.pipeline, table: table.target });
  return summary;
}

export class PageTimeoutError extends TidemarkError {
  override name = 'PageTimeoutError';
  constructor(table: string, ms: number) {
    super(
      'PAGE_TIMEOUT',
      `${table}: a page read took longer than ${Math.round(ms / 1000)} s; the connection is closed and nothing past the last committed page was written; the next run resumes from there`,
    );
  }
}

/** Rejects with PageTimeoutError when `p` does not settle within `ms`. */
function withTimeout<T>(p: Promise<T>, ms: number, table: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new PageTimeoutError(table, ms)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** The lease TTL to take or renew now: bounded by the deadline when there is one. */
function leaseTtl(opts: IncrementalRunOptions): number {
  if (!opts.remainingMs) return opts.leaseTtlMs;
  return Math.max(
    1,
    Math.min(opts.leaseTtlMs, Math.ceil(opts.remainingMs() + (opts.leaseGraceMs ?? 60_000))),
  );
}

async function readOnePage(
  opts: IncrementalRunOptions,
  ref: TableRef,
  schema: Schema,
  after: string,
  posPrefix: string,
): Promise<PageResult> {
  const { table, source } = opts;
  const req = {
    table: ref,
    cursorColumn: table.cursor,
    after,
    pageSize: table.pageSize,
    ...(table.pageBytes !== undefined ? { pageBytes: table.pageBytes } : {}),
    ...(table.maxRowBytes !== undefined ? { maxRowBytes: table.maxRowBytes } : {}),
    posPrefix,
    ordinalBase: 0,
  };
  if (source.incrementalBatch) {
    return source.incrementalBatch({
      ...req,
      schema,
      writeMode: table.writeMode,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
  }
  if (!source.incremental || !opts.encodeRows) {
    throw new TidemarkError(
      'SOURCE_NOT_INCREMENTAL',
      `source of ${table.source} implements no incremental read`,
    );
  }
  const res = await source.incremental(req);
  const batch =
    res.page.length === 0
      ? undefined
      : opts.encodeRows(schema, res.page, {
          posPrefix,
          ordinalBase: 0,
          writeMode: table.writeMode,
          table: table.target,
        });
  return { next: res.next, page: batch, more: res.more, ...(res.warnings ? { warnings: res.warnings } : {}) };
}

function emptySummary(
  opts: IncrementalRunOptions,
  status: IncrementalSummary['status'],
  state: IncrementalState,
  durationMs: number,
): IncrementalSummary {
  return {
    pipeline: opts.pipeline,
    table: opts.table.target,
    status,
    rows: 0,
    pages: 0,
    bytes: 0,
    objects: 0,
    cursorBefore: state.cursor,
    cursorAfter: state.cursor,
    seqBefore: state.seq,
    seqAfter: state.seq,
    more: false,
    recovered: 0,
    durationMs,
    warnings: [],
  };
}
