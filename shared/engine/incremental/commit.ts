/**
 * Every commit an incremental run makes to its state once its start is settled (./run.ts): one
 * per page, and a final one that records how the run ended. A page's commit renews the lease
 * (`leaseTtl`: bounded by the deadline when there is one).
 *
 * A page's commit is one durable step (../durable-step.ts), in the durability order of
 * docs/architecture.md:
 *   1. the page's object is durable in the lake (sink.write resolved), named by the writer, the
 *      page's start position and the run's lease fence;
 *   2. only then the cursor moves (the page's `next`, `seq` + 1), in ONE conditional write that
 *      fails if the state's version moved or our lease expired.
 * A crash or a lost lease between the two leaves an object no state accounts for, which the next
 * run's recovery removes (./recovery.ts); the next run re-reads the page from the cursor.
 *
 * The final commit (`recordOutcome`) moves neither the cursor nor `seq`: it records `lastRun`
 * (and `lastError`) and the instant of a wall-clock cursor, which the source places once per run.
 */
import { DEFAULT_LAKE_FORMAT } from '../../contracts/lake-format.js';
import type { WriteTarget } from '../../contracts/sink.js';
import type { Batch } from '../../dataplane/batch.js';
import type { Schema } from '../../dataplane/schema.js';
import type { Logger } from '../../observability/log.js';
import { incrementalStepStart } from '../../position/position.js';
import { durableStep } from '../durable-step.js';
import { cursorTime, describeCursor } from './cursor-display.js';
import type { IncrementalRunOptions } from './options.js';
import { type IncrementalState, type LastRun, recordError, type StopReason } from './state.js';

/** The lease TTL to take or renew now: bounded by the deadline when there is one. */
export function leaseTtl(opts: IncrementalRunOptions): number {
  if (!opts.remainingMs) return opts.leaseTtlMs;
  return Math.max(
    1,
    Math.min(opts.leaseTtlMs, Math.ceil(opts.remainingMs() + (opts.leaseGraceMs ?? 60_000))),
  );
}

/** Where this run's objects go; the lake format is the table's (decision 0014). */
export function writeTarget(opts: IncrementalRunOptions, fence: number, s: IncrementalState): WriteTarget {
  return {
    table: opts.table.target,
    writer: opts.writer,
    fence,
    format: s.format ?? DEFAULT_LAKE_FORMAT,
    ...(s.tableFormat === 'iceberg' ? { tableFormat: s.tableFormat } : {}),
  };
}

/** What one page's commit made durable. */
export interface CommittedPage {
  /** The state's version after the commit. */
  readonly version: number;
  /** The state committed: the page's cursor, `seq` + 1. */
  readonly state: IncrementalState;
  readonly rows: number;
  /** Bytes of the page's object(s). */
  readonly bytes: number;
  readonly objects: number;
  /**
   * The page's Iceberg catalog commit, still running: the next page's commit awaits it before its
   * state commit, the run awaits the last one before it ends (resolved at once for a plain table).
   */
  readonly applied: Promise<void>;
}

/**
 * Writes page `page` (read after `state.cursor`, ending at `cursor`) and then commits the cursor
 * past it, under the lease, expecting the state at `version`.
 */
export async function commitPage(
  opts: IncrementalRunOptions,
  key: string,
  fence: number,
  schema: Schema,
  version: number,
  state: IncrementalState,
  page: Batch,
  cursor: string,
  /** The previous page's catalog commit (its `CommittedPage.applied`). */
  previousApplied?: Promise<void>,
): Promise<CommittedPage> {
  const { table } = opts;
  // The object starts at the step (below every row of it, whatever the fence) and is named with
  // this run's fence beside it: a retry of this run overwrites, while an object a run that
  // lost its lease still writes for the same page lands beside a later holder's, never over it.
  const startPosition = incrementalStepStart(state.seq);
  let next: IncrementalState | undefined;
  let pageBytes = 0;
  const pageRows = page.record.numRows;
  // One durable step: the object, then the single conditional write that fences other
  // writers: it fails if the version moved or our lease expired, and then the object just
  // written is an uncommitted leftover that the next run's recovery removes.
  // The page's catalog commit (an Iceberg table) runs on while the next page is written; that
  // page's state commit waits for it (durable-step.ts `after`), so the state never replaces a
  // pending commit the catalog does not have yet.
  const {
    record: committed,
    written,
    applied,
  } = await durableStep({
    sink: opts.sink,
    ...(previousApplied ? { after: previousApplied } : {}),
    deferApply: true,
    store: opts.store,
    key,
    owner: opts.owner,
    expectedVersion: version,
    renewTtlMs: leaseTtl(opts),
    writes: [
      {
        target: writeTarget(opts, fence, state),
        schema,
        startPosition,
        batches: [page],
        ...(state.schema ? { recorded: state.schema } : {}),
      },
    ],
    value: ([w]) => {
      const { refs, pending } = w!;
      pageBytes = refs.reduce((s, r) => s + r.bytes, 0);
      const cursorText = describeCursor(schema, table.cursor, cursor);
      const time = cursorTime(schema, table.cursor, cursor);
      const newestCursorMs = time && 'utc' in time ? epochMsOf(time.utc) : undefined;
      next = {
        ...state,
        cursor,
        ...(cursorText ? { cursorText } : {}),
        seq: state.seq + 1,
        rowsTotal: state.rowsTotal + pageRows,
        lastCommitAt: new Date(opts.clock()).toISOString(),
        // A wall-clock cursor keeps the previous instant until the run's final commit asks the
        // source (one query per run, not one per page on the connection that reads pages).
        ...(newestCursorMs !== undefined ? { newestCursorMs } : {}),
        objects: refs.map((r) => r.uri),
        // The page's Iceberg commit, decided by this state commit (a plain table has none; a
        // page of no rows leaves the previous one, already applied, in place).
        ...(pending ? { pending } : {}),
      };
      return next as unknown as Record<string, unknown>;
    },
  });
  return {
    version: committed.version,
    state: next!,
    rows: pageRows,
    bytes: pageBytes,
    objects: written[0]!.refs.length,
    applied,
  };
}

/**
 * What a run has made durable so far: the version and state of its last successful commit (or
 * the state it loaded; undefined while the table has no state, or its stored value did not
 * parse) and what its page commits added. The run's final commit builds on exactly this.
 */
export interface Durable {
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
export async function recordOutcome(
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
