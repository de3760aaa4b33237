/**
 * One incremental run of one table: take the lease, load the cursor, recover, then loop
 * read page -> write Parquet -> commit cursor until caught up or the deadline nears.
 *
 * Owns the durability order for the incremental path (docs/architecture.md):
 *   0. a table's first run commits its initial state BEFORE it writes any object, so "no state
 *      but objects of this writer in the lake" always means the state was lost, never a crash;
 *   1. the page's object is durable in the lake (sink.write resolved),
 *   2. only then the cursor moves, in ONE conditional write that also checks our lease,
 *   3. on start, THIS writer's objects at or past its committed position (a crashed attempt's)
 *      are removed; other writers' objects of the same lake table are never considered.
 * A crash between any two steps loses nothing: the next run re-reads from the committed cursor;
 * its object takes a new name (its lease has a higher fence) and recovery has removed the crashed
 * attempt's. Every `__pos` and object name carries the run's lease fence, so what a run that lost
 * its lease still writes sorts below, and never replaces, what the new holder wrote. A state
 * that is missing or older than the lake (lost, restored from a backup, pointed at another
 * store) stops the run before anything is deleted.
 *
 * Works only through the contracts: it never names a database client or a driver.
 */

import {
  CursorConflictError,
  LeaseHeldError,
  LeaseLostError,
  TidemarkError,
} from '../../contracts/errors.js';
import { DEFAULT_LAKE_FORMAT, type LakeFormat, resolveLakeFormat } from '../../contracts/lake-format.js';
import type { LakeTable, ObjectRef, Sink, WriteTarget } from '../../contracts/sink.js';
import type {
  BatchIncrementalSource,
  IncrementalResult,
  IncrementalSource,
  Introspector,
  NullCursorCounter,
  RowEstimator,
  TableRef,
  WallClockZone,
  Warning,
} from '../../contracts/source.js';
import type { Clock, CursorStore, StateRecord } from '../../contracts/state.js';
import { type Batch, requireUpsertKey, type WriteMode } from '../../dataplane/batch.js';
import { findColumn, type Schema } from '../../dataplane/schema.js';
import {
  changeAdvice,
  describeChange,
  judgeSchema,
  SchemaChangedError,
  type StoredSchema,
  storedSchema,
  type WidenPolicy,
} from '../../dataplane/schema-rules.js';
import type { Logger } from '../../observability/log.js';
import { Progress } from '../../observability/progress.js';
import { incrementalPosPrefix, incrementalSeqOf, incrementalStepStart } from '../../position/position.js';
import { durableStep, recoverUncommitted } from '../durable-step.js';
import { takeLease } from '../lease.js';
import { cursorTime, describeCursor } from './cursor-display.js';
import {
  type IncrementalState,
  initialIncrementalState,
  type LastRun,
  parseIncrementalState,
  recordError,
  type StopReason,
} from './state.js';

/**
 * Pages read ahead of the commits (decision 0021): page N+1 .. N+`pages` are read while page N
 * is encoded, stored and committed. 1 is the loop before it (the bench's variant "one page read
 * ahead"); each page read ahead is one more page of memory.
 */
export const readAhead = { pages: 2 };

/** What the engine needs of a source for incremental runs. */
export type IncrementalCapableSource = Introspector &
  (IncrementalSource | BatchIncrementalSource) &
  Partial<NullCursorCounter> &
  Partial<RowEstimator> &
  Partial<IncrementalSource> &
  Partial<BatchIncrementalSource> &
  Partial<WallClockZone>;

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
  /** What a widened column does (docs/schema-changes.md); default stop. */
  readonly onWiden?: WidenPolicy;
}

export interface IncrementalRunOptions {
  readonly pipeline: string;
  /**
   * Who writes this table's objects, `<pipeline>.<source>` (shared/sink/layout.ts `writerId`):
   * part of every object name, and the only objects recovery considers.
   */
  readonly writer: string;
  readonly table: IncrementalTable;
  /**
   * The spec's `lake.format`: the format a table with no state yet is written in (default 1). A
   * table with state keeps the format it records (docs/lake-format.md).
   */
  readonly lakeFormat?: LakeFormat;
  readonly source: IncrementalCapableSource;
  readonly store: CursorStore;
  readonly sink: Sink;
  readonly logger: Logger;
  readonly clock: Clock;
  /** Who runs: shared/state/lease-owner.ts `localOwner()` or `lambdaOwner(requestId)`. */
  readonly owner: string;
  /**
   * Whether a lease holder is provably dead (a local process that is gone): then its lease is
   * taken over at once instead of after its TTL. Local runs only; a Lambda passes nothing.
   */
  readonly isHolderDead?: (owner: string) => boolean;
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
  /**
   * Stop starting pages when less than this is left (raised to the slowest page seen times the
   * pages that may still be committed after a stop: the one being written and those read ahead).
   */
  readonly safetyMarginMs?: number;
  /** Stop after this many pages (tests, the demo). */
  readonly maxPages?: number;
  /**
   * A page read that takes longer fails the run (`PAGE_TIMEOUT`) instead of waiting forever on
   * a stalled connection: the read's signal is aborted, so the source drops that connection
   * (and stops its statement at the server); nothing is committed past the last durable page.
   * Default 10 min.
   */
  readonly pageTimeoutMs?: number;
  /** Encoder for sources that only implement the row path. */
  readonly encodeRows?: RowEncoder;
  /** Show a TTY progress line. */
  readonly progressTty?: boolean;
  /**
   * Aborting it (Ctrl-C, SIGTERM) stops the run: no further page starts, the read in flight is
   * aborted (the source drops its connection) and abandoned, a page already being written still
   * commits; the run records `interrupted` and releases its lease.
   */
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
  /** Why the run stopped reading (`ok` runs). */
  readonly stopped?: StopReason;
  /** Objects removed by recovery (left by a crashed attempt). */
  readonly recovered: number;
  readonly durationMs: number;
  readonly warnings: readonly Warning[];
  /** `lease-held`: who holds the lease, and until when (epoch ms). */
  readonly leaseHolder?: { readonly owner: string; readonly expiresAt: number | undefined };
  /** The dead holder whose lease this run took over. */
  readonly tookOverFrom?: string;
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

/** How to re-sync a table on purpose when its state and the lake disagree. */
function resyncChoices(target: string, count: number): string {
  return `restore the state (the newest backup, or point "state:" at the store that has it), or re-sync on purpose: "tidemark reset -c SPEC --table ${target} --keep-objects" keeps the ${count} object(s) and writes after them (readers pick the newest version by __pos), "--delete-objects" deletes those ${count} object(s) first`;
}

/** The lake holds a writer's objects but the state store has no state for the table. */
export class StateMissingError extends TidemarkError {
  override name = 'StateMissingError';
  constructor(key: string, target: string, writer: string, objects: readonly ObjectRef[]) {
    const bytes = objects.reduce((n, o) => n + o.bytes, 0);
    super(
      'STATE_MISSING',
      `${target}: the state store has no state under ${key}, but the lake already holds ${objects.length} object(s) (${(bytes / 1e6).toFixed(1)} MB) written by ${writer}, the newest ${objects.at(-1)?.uri}; nothing was deleted or written. ${resyncChoices(target, objects.length)}`,
    );
  }
}

/** The lake holds a writer's objects from pages the state says were never committed. */
export class StateBehindLakeError extends TidemarkError {
  override name = 'StateBehindLakeError';
  constructor(
    key: string,
    target: string,
    writer: string,
    seq: number,
    ahead: readonly ObjectRef[],
    count: number,
  ) {
    super(
      'STATE_BEHIND_LAKE',
      `${target}: the state under ${key} says page ${seq} is next, but the lake holds ${ahead.length} object(s) of ${writer} from later pages (up to ${ahead.at(-1)?.uri}): the state is older than the lake (restored from a backup, or another state store); nothing was deleted or written. ${resyncChoices(target, count)}`,
    );
  }
}

type PageResult = IncrementalResult<Batch | undefined>;

/** Runs one incremental sync of one table. Throws typed errors; a held lease is a normal summary. */
export async function runIncremental(opts: IncrementalRunOptions): Promise<IncrementalSummary> {
  const started = opts.clock();
  const { table, store, sink, logger } = opts;
  const key = incrementalStateKey(opts.pipeline, table.target);
  const lake: LakeTable = { table: table.target, writer: opts.writer };
  const log = logger.child({ pipeline: opts.pipeline, table: table.target });

  let record: StateRecord;
  let tookOverFrom: string | undefined;
  try {
    ({ record, tookOverFrom } = await takeLease(store, key, opts.owner, leaseTtl(opts), opts.isHolderDead));
  } catch (e) {
    if (e instanceof LeaseHeldError) {
      log.warn('lease held by another run; exiting without changes', {
        holder: e.holder,
        expiresAt: e.expiresAt,
      });
      const state = parseIncrementalState((await store.load(key)).value, table.cursor);
      return {
        ...emptySummary(opts, 'lease-held', state, opts.clock() - started),
        leaseHolder: { owner: e.holder ?? 'unknown', expiresAt: e.expiresAt },
      };
    }
    throw e;
  }
  if (tookOverFrom !== undefined)
    log.warn('took over the lease of a run whose process is gone', { holder: tookOverFrom });
  // This run's fence: every `__pos` it writes carries it, so at one page a later lease holder's
  // rows win over what this run might still write after losing its lease (and vice versa).
  const fence = record.lease!.fence;

  const durable: Durable = { version: record.version, state: undefined, rows: 0, pages: 0, bytes: 0 };
  try {
    const before = record.value
      ? parseIncrementalState(record.value, table.cursor)
      : initialIncrementalState(table.cursor);
    if (record.value !== undefined) durable.state = before;
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

    // The schema the table writes from now on: the recorded one, or the current one when the
    // rules let the change through (a stop throws before anything is deleted or written).
    const { recorded, notes } = schemaToWrite(opts, log, before.schema, schema);
    // The lake format: a table keeps the one it was first written in (docs/lake-format.md). A
    // state that records none and never committed a page (a first run's, or one reset with its
    // objects deleted) is a new table.
    const isNew = record.value === undefined || (before.format === undefined && before.seq === 0);
    const lakeFormat = resolveLakeFormat(
      table.target,
      opts.lakeFormat ?? DEFAULT_LAKE_FORMAT,
      !isNew,
      before.format,
    );
    if (lakeFormat.note) log.warn(lakeFormat.note, { code: 'LAKE_FORMAT_KEPT', format: lakeFormat.format });
    const start: IncrementalState =
      recorded === before.schema && before.format === lakeFormat.format
        ? before
        : { ...before, schema: recorded, format: lakeFormat.format };
    record = await checkStateAgainstLake(opts, key, lake, record, start);
    if (record.value !== undefined && start !== before) {
      record = await opts.store.commit(key, {
        owner: opts.owner,
        expectedVersion: record.version,
        value: start as unknown as Record<string, unknown>,
        renewTtlMs: leaseTtl(opts),
      });
    }
    durable.version = record.version;
    durable.state = start;

    // Step 4 of the durability order: whatever of ours lies at or past the committed position
    // was written by an attempt that never committed; remove it before writing anything new.
    const removed = await recoverUncommitted(sink, lake, incrementalStepStart(before.seq));
    if (removed.length > 0)
      log.warn('removed uncommitted objects of a crashed attempt', { objects: removed.map((r) => r.uri) });

    const summary = await pageLoop(
      opts,
      log,
      key,
      fence,
      durable,
      start,
      ref,
      schema,
      [...warnings, ...notes],
      removed.length,
      started,
    );
    const stopped = summary.stopped ?? 'caught-up';
    await recordOutcome(opts, log, key, durable, { started, stopped, schema });
    return tookOverFrom === undefined ? summary : { ...summary, tookOverFrom };
  } catch (e) {
    // A run that lost its lease, or whose state another writer moved, records nothing.
    if (!(e instanceof LeaseLostError || e instanceof CursorConflictError))
      await recordOutcome(opts, log, key, durable, { started, stopped: 'error', error: e });
    throw e;
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
  fence: number,
  durable: Durable,
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
  let version = durable.version;
  let rows = 0;
  let pages = 0;
  let bytes = 0;
  let objects = 0;
  let more = true;
  let stopped: StopReason = 'caught-up';
  let slowestPageMs = 0;

  /** Where this run's objects go; the lake format is the table's (decision 0014). */
  const writeTarget = (s: IncrementalState): WriteTarget => ({
    table: table.target,
    writer: opts.writer,
    fence,
    format: s.format ?? DEFAULT_LAKE_FORMAT,
  });
  // One read is in flight at a time (one connection; a page's `next` is where the following
  // read starts); `reading` aborts it.
  let reading: AbortController | undefined;
  const readPage = (after: string, seq: number): Promise<PageResult> => {
    reading = new AbortController();
    return readOnePage(opts, ref, schema, after, incrementalPosPrefix(seq, fence), reading);
  };
  const depth = Math.max(1, readAhead.pages);
  const timeLeft = () => {
    if (!opts.remainingMs) return true;
    // A read refused now leaves the page being written and up to `depth` pages read ahead to
    // commit, each taking up to the slowest page's time.
    const margin = Math.max(opts.safetyMarginMs ?? 10_000, (depth + 1) * slowestPageMs);
    return opts.remainingMs() > margin;
  };
  /** Why no further page may start after `done` pages, or undefined when one may. */
  const stopReason = (done: number): StopReason | undefined => {
    if (opts.signal?.aborted) return 'interrupted';
    if (opts.maxPages !== undefined && done >= opts.maxPages) return 'max-pages';
    if (!timeLeft()) return 'deadline';
    return undefined;
  };

  // Pages are read ahead of the commits (decision 0021): while page N is encoded, stored and
  // committed, pages N+1 .. N+depth are read, each starting as soon as the one before it has
  // arrived, and each starts encoding at once (the sink's `prepare`; its object is stored only
  // by its own write, after the commits before it). Reading changes nothing, so the overlap is
  // safe; it keeps the source streaming while the encoder is behind (the first page's encode
  // pays the worker's start-up). Past the first page ahead, a read starts only while the pages
  // waiting hold less than the table's page byte budget: pages of big values (closed by bytes)
  // keep one page ahead, so memory stays within what decision 0007 bounds. Not even the first
  // page starts when the deadline is already inside the safety margin (or the run was
  // interrupted before it got here).
  const aheadBudget = table.pageBytes ?? Number.POSITIVE_INFINITY;
  /** Reads started and not yet taken by the loop, in page order. */
  const queue: Promise<PageResult>[] = [];
  /** Arrow bytes of the pages read and not yet taken by the loop. */
  let aheadBytes = 0;
  /** Reads started in this run: the next one is page `requested` (0-based). */
  let requested = 0;
  let readRunning = false;
  /** Where the next read starts, once the last one arrived with more rows after it. */
  let nextRead: { after: string; seq: number } | undefined = { after: state.cursor, seq: state.seq };
  /** Why a read was not started (the run stops once the pages already read are committed). */
  let refused: StopReason | undefined;
  const pump = (): void => {
    if (readRunning || nextRead === undefined || queue.length >= depth) return;
    if (queue.length > 0 && aheadBytes >= aheadBudget) return;
    const why = stopReason(requested);
    if (why !== undefined) {
      refused = why;
      nextRead = undefined;
      return;
    }
    const { after, seq } = nextRead;
    nextRead = undefined;
    requested++;
    readRunning = true;
    const read = readPage(after, seq).then(
      (next) => {
        readRunning = false;
        if (next.page === undefined || next.page.record.numRows === 0) return next;
        aheadBytes += next.page.record.data.byteLength;
        // Encoded at once, while the pages before it are stored and committed. Lake format and
        // recorded schema do not change within a run: the write that takes it repeats these
        // very arguments.
        opts.sink.prepare?.(writeTarget(state), schema, incrementalStepStart(seq), [next.page], state.schema);
        if (next.more) {
          nextRead = { after: next.next, seq: seq + 1 };
          pump();
        }
        return next;
      },
      (e: unknown) => {
        readRunning = false;
        throw e;
      },
    );
    read.catch(() => {}); // surfaced when awaited; never an unhandled rejection meanwhile
    queue.push(read);
  };
  pump();
  // The encoder starts (its thread, the schema's template) while the first page is read.
  if (queue.length > 0) opts.sink.warm?.(writeTarget(state), schema);
  let pageStart = opts.clock();
  for (;;) {
    pump(); // room for one more since the last page was taken
    const ahead = queue.shift();
    if (ahead === undefined) {
      if (refused) stopped = refused;
      break;
    }
    let page: PageResult;
    try {
      const waiting = abandonOnAbort(ahead, opts.signal);
      page = await withTimeout(waiting, opts.pageTimeoutMs ?? 600_000, table.source, reading);
    } catch (e) {
      // Interrupted (Ctrl-C, SIGTERM) while a page was being read: the read is aborted (the
      // source drops its connection on the same signal); everything committed so far stays.
      if (!opts.signal?.aborted) throw e;
      stopped = 'interrupted';
      break;
    }
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
    aheadBytes -= page.page.record.data.byteLength;

    // The object starts at the step (below every row of it, whatever the fence) and is named with
    // this run's fence beside it: a retry of this run overwrites, while an object a run that
    // lost its lease still writes for the same page lands beside a later holder's, never over it.
    const startPosition = incrementalStepStart(state.seq);
    let next: IncrementalState | undefined;
    let pageBytes = 0;
    const pageRows = page.page.record.numRows;
    // One durable step: the object, then the single conditional write that fences other
    // writers: it fails if the version moved or our lease expired, and then the object just
    // written is an uncommitted leftover that the next run's recovery removes.
    const { record: committed, written } = await durableStep({
      sink: opts.sink,
      store: opts.store,
      key,
      owner: opts.owner,
      expectedVersion: version,
      renewTtlMs: leaseTtl(opts),
      writes: [
        {
          target: writeTarget(state),
          schema,
          startPosition,
          batches: [page.page],
          ...(state.schema ? { recorded: state.schema } : {}),
        },
      ],
      value: ([w]) => {
        const refs = w!.refs;
        pageBytes = refs.reduce((s, r) => s + r.bytes, 0);
        const cursorText = describeCursor(schema, table.cursor, page.next);
        const time = cursorTime(schema, table.cursor, page.next);
        const newestCursorMs = time && 'utc' in time ? epochMsOf(time.utc) : undefined;
        next = {
          ...state,
          cursor: page.next,
          ...(cursorText ? { cursorText } : {}),
          seq: state.seq + 1,
          rowsTotal: state.rowsTotal + pageRows,
          lastCommitAt: new Date(opts.clock()).toISOString(),
          // A wall-clock cursor keeps the previous instant until the run's final commit asks the
          // source (one query per run, not one per page on the connection that reads pages).
          ...(newestCursorMs !== undefined ? { newestCursorMs } : {}),
          objects: refs.map((r) => r.uri),
        };
        return next as unknown as Record<string, unknown>;
      },
    });
    const refs = written[0]!.refs;
    version = committed.version;
    state = next!;
    rows += pageRows;
    pages += 1;
    bytes += pageBytes;
    Object.assign(durable, { version, state, rows, pages, bytes });
    objects += refs.length;
    progress.add(pageRows, pageBytes);
    // A page's cost is the whole cycle (read wait + write + commit): the margin must cover it.
    slowestPageMs = Math.max(slowestPageMs, opts.clock() - pageStart);
    pageStart = opts.clock();
    log.debug('page committed', { rows: pageRows, seq: state.seq, bytes: pageBytes });
    if (!page.more) {
      more = false;
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
    stopped: more ? stopped : 'caught-up',
    recovered,
    durationMs: opts.clock() - started,
    warnings,
  };
  log.metric('RowsSynced', rows, 'Count', { pipeline: opts.pipeline, table: table.target });
  return summary;
}

/**
 * What a run has made durable so far: the version and state of its last successful commit (or
 * the state it loaded; undefined while the table has no state, or its stored value did not
 * parse) and what its page commits added. The run's final commit builds on exactly this.
 */
interface Durable {
  version: number;
  state: IncrementalState | undefined;
  rows: number;
  pages: number;
  bytes: number;
}

/** How long the final commit waits for the source to place a wall-clock cursor in time. */
const WALL_CLOCK_LOOKUP_MS = 5_000;

/**
 * The run's final commit: its outcome (`lastRun`, and `lastError` when it failed) on top of what
 * it made durable, under its lease; the cursor and `seq` stay as the last page commit left them.
 * Nothing is recorded while the table has no state (a first run failing before its initial
 * commit: writing a state then could later pass a lost state off as a fresh table), and a failed
 * write is only logged: the outcome informs `tidemark status`, the cursor is what matters.
 */
async function recordOutcome(
  opts: IncrementalRunOptions,
  log: Logger,
  key: string,
  durable: Durable,
  outcome: { started: number; stopped: StopReason; schema?: Schema; error?: unknown },
): Promise<void> {
  const state = durable.state;
  if (state === undefined) return;
  const newestCursorMs =
    outcome.schema && outcome.error === undefined
      ? await wallClockInstant(opts, outcome.schema, state, durable)
      : undefined;
  const finished = opts.clock();
  const error = outcome.error === undefined ? undefined : recordError(outcome.error);
  const lastRun: LastRun = {
    startedAt: new Date(outcome.started).toISOString(),
    finishedAt: new Date(finished).toISOString(),
    owner: opts.owner,
    result: error ? 'error' : 'ok',
    stopped: outcome.stopped,
    rows: durable.rows,
    pages: durable.pages,
    bytes: durable.bytes,
    durationMs: finished - outcome.started,
    ...(error ? { error } : {}),
  };
  const value: IncrementalState = {
    ...state,
    ...(newestCursorMs !== undefined ? { newestCursorMs } : {}),
    lastRun,
    ...(error ? { lastError: { ...error, at: lastRun.finishedAt } } : {}),
  };
  try {
    const committed = await opts.store.commit(key, {
      owner: opts.owner,
      expectedVersion: durable.version,
      value: value as unknown as Record<string, unknown>,
    });
    durable.version = committed.version;
    durable.state = value;
  } catch (e) {
    log.warn("the run's outcome was not recorded in the state (the cursor is unaffected)", { error: e });
  }
}

/**
 * The instant of a wall-clock cursor (timestamp without time zone, DATETIME) as the source
 * places it, when the cursor moved this run or was never placed; undefined otherwise, or when
 * the source cannot tell in time (freshness then keeps its previous, older value).
 */
async function wallClockInstant(
  opts: IncrementalRunOptions,
  schema: Schema,
  state: IncrementalState,
  durable: Durable,
): Promise<number | undefined> {
  const time = cursorTime(schema, opts.table.cursor, state.cursor);
  if (!time || !('wall' in time) || !opts.source.wallClockToUtc) return undefined;
  if (durable.pages === 0 && state.newestCursorMs !== undefined) return undefined;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), WALL_CLOCK_LOOKUP_MS);
  });
  try {
    const utc = await Promise.race([opts.source.wallClockToUtc(time.wall), late]);
    return utc === undefined ? undefined : epochMsOf(utc);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

/** Microseconds since the epoch as epoch ms, or undefined outside what a JS Date can hold (infinity). */
function epochMsOf(micros: bigint): number | undefined {
  const ms = Number(micros / 1000n);
  return Math.abs(ms) <= 8.64e15 ? ms : undefined;
}

/**
 * Rejects as soon as `signal` aborts, whatever `p` does: an interrupted run stops waiting for a
 * read even when the source does not cancel it itself.
 */
function abandonOnAbort<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * Applies the schema rules (shared/dataplane/schema-rules.ts) at run start: the schema the run
 * writes with. The first recorded schema is version 1; a change the rules let through is
 * recorded as the next version, with a warning per change and a `SchemaChanged` metric; a
 * change they stop on throws SchemaChangedError.
 */
function schemaToWrite(
  opts: IncrementalRunOptions,
  log: Logger,
  last: StoredSchema | undefined,
  current: Schema,
): { recorded: StoredSchema; notes: Warning[] } {
  if (last === undefined) return { recorded: storedSchema(current, 1), notes: [] };
  const verdict = judgeSchema(last, current, opts.table.onWiden ?? 'stop');
  if (verdict.action === 'same') return { recorded: last, notes: [] };
  if (verdict.action === 'stop') throw new SchemaChangedError(opts.table.target, verdict.stops, 'start');
  const next = storedSchema(current, last.version + 1);
  const notes: Warning[] = [];
  for (const c of verdict.changes) {
    const advice = changeAdvice(c);
    const message = `schema changed: ${describeChange(c)}${advice ? `; ${advice}` : ''}`;
    log.warn(message, { code: 'SCHEMA_CHANGED', change: c.kind, schemaVersion: next.version });
    notes.push({ code: 'SCHEMA_CHANGED', message });
  }
  log.metric('SchemaChanged', verdict.changes.length, 'Count', {
    pipeline: opts.pipeline,
    table: opts.table.target,
  });
  return { recorded: next, notes };
}

/**
 * Refuses to run when the state does not account for this writer's objects in the lake, and
 * commits a table's initial state before its first object is written.
 *
 * Every commit moves `seq` past the object it commits and one write is in flight at a time, so
 * with an intact state this writer's objects all start below page `seq + 1`: committed ones below
 * `seq`, at most a crashed attempt's leftover AT `seq`. Anything else means the state is missing
 * or older than the lake, and recovery (which deletes by `seq`) would delete committed objects.
 * Returns the record to continue with (a new version when the initial state was committed).
 */
async function checkStateAgainstLake(
  opts: IncrementalRunOptions,
  key: string,
  lake: LakeTable,
  record: StateRecord,
  state: IncrementalState,
): Promise<StateRecord> {
  const ours = await opts.sink.list(lake.table, lake.writer);
  if (record.value === undefined) {
    if (ours.length > 0) throw new StateMissingError(key, lake.table, lake.writer, ours);
    return opts.store.commit(key, {
      owner: opts.owner,
      expectedVersion: record.version,
      value: state as unknown as Record<string, unknown>,
      renewTtlMs: leaseTtl(opts),
    });
  }
  // Pages are compared by seq, for `j` positions and for legacy `i` ones alike (a backup from
  // before fences behind a lake written before them). A position of another scheme is placed
  // by plain order against the next page's start. A name whose position is unknown (a shortened
  // name without its sidecar) cannot be placed here; recovery refuses such a name itself when
  // it matters.
  const limit = incrementalStepStart(state.seq + 1);
  const ahead = ours.filter((o) => {
    if (o.startPosition === undefined) return false;
    const seq = incrementalSeqOf(o.startPosition);
    return seq === undefined ? o.startPosition >= limit : seq > state.seq;
  });
  if (ahead.length > 0)
    throw new StateBehindLakeError(key, lake.table, lake.writer, state.seq, ahead, ours.length);
  return record;
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

/**
 * Rejects with PageTimeoutError when `p` does not settle within `ms`, and aborts the read with
 * it: the source then drops the stalled connection, so the next read (or the next table on the
 * same source) gets a new one instead of queueing behind a statement that still runs.
 */
function withTimeout<T>(p: Promise<T>, ms: number, table: string, read?: AbortController): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const e = new PageTimeoutError(table, ms);
      read?.abort(e);
      reject(e);
    }, ms);
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

/** Reads one page; `read` aborts it (the page timeout, or the caller's signal chained to it). */
async function readOnePage(
  opts: IncrementalRunOptions,
  ref: TableRef,
  schema: Schema,
  after: string,
  posPrefix: string,
  read: AbortController,
): Promise<PageResult> {
  const caller = opts.signal;
  const stop = () => read.abort(caller?.reason);
  if (caller?.aborted) stop();
  caller?.addEventListener('abort', stop, { once: true });
  try {
    return await readPageFromSource(opts, ref, schema, after, posPrefix, read.signal);
  } finally {
    caller?.removeEventListener('abort', stop);
  }
}

async function readPageFromSource(
  opts: IncrementalRunOptions,
  ref: TableRef,
  schema: Schema,
  after: string,
  posPrefix: string,
  signal: AbortSignal,
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
    signal,
  };
  if (source.incrementalBatch) {
    return source.incrementalBatch({ ...req, schema, writeMode: table.writeMode });
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
