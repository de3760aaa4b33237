/**
 * The read side of the page loop (./run.ts): pages read ahead of the commits (decision 0021,
 * docs/decisions/0021-read-ahead.md). While page N is encoded, stored and committed, pages
 * N+1 .. N+depth are read, each starting as soon as the one before it has arrived (one read at a
 * time on the source's one connection: a page's `next` is where the following read starts), and
 * each starts encoding at once (the sink's `prepare`; its object is stored only by its own write,
 * after the commits before it). Reading changes nothing, so the overlap is safe; it keeps the
 * source streaming while the encoder is behind (the first page's encode pays the worker's
 * start-up).
 *
 * Owns when a read starts, and the waiting on it:
 *   - past the first page ahead, a read starts only while the pages waiting hold less than the
 *     table's page byte budget: pages of big values (closed by bytes) keep one page ahead, so
 *     memory stays within what decision 0007 bounds;
 *   - the stop rules (interrupt, `maxPages`, the deadline's margin) are checked as each read would
 *     start, so not even the first page starts when the deadline is already inside the margin;
 *   - a read that outlives the page timeout is aborted (`PAGE_TIMEOUT`), and an interrupt stops
 *     the waiting at once, whatever the source does with its read.
 * Never writes or commits anything: a page leaves here only when the loop takes it, in order.
 */
import { TidemarkError } from '../../contracts/errors.js';
import type { IncrementalResult, TableRef } from '../../contracts/source.js';
import type { Batch } from '../../dataplane/batch.js';
import type { Schema } from '../../dataplane/schema.js';
import { incrementalPosPrefix } from '../../position/position.js';
import { PageTimeoutError } from './errors.js';
import type { IncrementalRunOptions } from './options.js';
import type { StopReason } from './state.js';

/**
 * Pages read ahead of the commits (decision 0021): page N+1 .. N+`pages` are read while page N
 * is encoded, stored and committed. 1 is the loop before it (the bench's variant "one page read
 * ahead"); each page read ahead is one more page of memory.
 */
export const readAhead = { pages: 2 };

/** One page as a read returns it: its batch (undefined or empty: nothing left), `next`, `more`. */
export type PageResult = IncrementalResult<Batch | undefined>;

/** What a run's reads are of, and how the loop takes part in them. */
export interface ReadAheadRun {
  readonly opts: IncrementalRunOptions;
  readonly ref: TableRef;
  readonly schema: Schema;
  /** The run's lease fence: part of every `__pos` the pages carry. */
  readonly fence: number;
  /** Where the first read starts: the committed cursor and the page it reads. */
  readonly from: { readonly after: string; readonly seq: number };
  /** The slowest page cycle so far (read wait + write + commit), which the deadline's margin covers. */
  readonly slowestPageMs: () => number;
  /** Starts encoding page `seq` as soon as it arrived with rows (the sink's `prepare`). */
  readonly prepare: (page: Batch, seq: number) => void;
}

/** The reads of one run, started ahead of the commits and taken by the loop in page order. */
export class ReadAhead {
  /** Pages that may wait for the loop. */
  private readonly depth = Math.max(1, readAhead.pages);
  /** Past the first page waiting, a read starts only while those waiting hold fewer Arrow bytes. */
  private readonly aheadBudget: number;
  /** Reads started and not yet taken by the loop, in page order. */
  private readonly queue: Promise<PageResult>[] = [];
  /** Arrow bytes of the pages read and not yet taken by the loop. */
  private aheadBytes = 0;
  /** Reads started in this run: the next one is page `requested` (0-based). */
  private requested = 0;
  private readRunning = false;
  /** Where the next read starts, once the last one arrived with more rows after it. */
  private nextRead: { after: string; seq: number } | undefined;
  /** The read in flight (one at a time); aborting it aborts that read. */
  private reading: AbortController | undefined;
  /** Why a read was not started (the run stops once the pages already read are committed). */
  refused: StopReason | undefined;

  constructor(private readonly run: ReadAheadRun) {
    this.aheadBudget = run.opts.table.pageBytes ?? Number.POSITIVE_INFINITY;
    this.nextRead = { after: run.from.after, seq: run.from.seq };
  }

  /** Reads started and not yet taken by the loop. */
  get pending(): number {
    return this.queue.length;
  }

  /**
   * Starts the next read when there is room for it: none running, fewer than `depth` pages
   * waiting and (past the first) within the byte budget, and no stop reason. A read that arrives
   * with more rows after it starts the following one in the same turn.
   */
  pump(): void {
    if (this.readRunning || this.nextRead === undefined || this.queue.length >= this.depth) return;
    if (this.queue.length > 0 && this.aheadBytes >= this.aheadBudget) return;
    const why = this.stopReason(this.requested);
    if (why !== undefined) {
      this.refused = why;
      this.nextRead = undefined;
      return;
    }
    const { after, seq } = this.nextRead;
    this.nextRead = undefined;
    this.requested++;
    this.readRunning = true;
    const read = this.readPage(after, seq).then(
      (next) => {
        this.readRunning = false;
        if (next.page === undefined || next.page.record.numRows === 0) return next;
        this.aheadBytes += next.page.record.data.byteLength;
        // Encoded at once, while the pages before it are stored and committed.
        this.run.prepare(next.page, seq);
        if (next.more) {
          this.nextRead = { after: next.next, seq: seq + 1 };
          this.pump();
        }
        return next;
      },
      (e: unknown) => {
        this.readRunning = false;
        throw e;
      },
    );
    read.catch(() => {}); // surfaced when awaited; never an unhandled rejection meanwhile
    this.queue.push(read);
  }

  /**
   * The oldest page not yet taken, once it arrived (first starting a read if there is room for
   * one more since the last page was taken); undefined when no read was started (`refused` says
   * why, if a stop rule did). Rejects with PageTimeoutError past the page timeout, and with the
   * signal's reason as soon as the run's signal aborts.
   */
  next(): Promise<PageResult> | undefined {
    this.pump();
    const ahead = this.queue.shift();
    if (ahead === undefined) return undefined;
    const { opts } = this.run;
    const waiting = abandonOnAbort(ahead, opts.signal);
    return withTimeout(waiting, opts.pageTimeoutMs ?? 600_000, opts.table.source, this.reading);
  }

  /** The loop took `page` to write it: its bytes no longer count against the budget. */
  taken(page: Batch): void {
    this.aheadBytes -= page.record.data.byteLength;
  }

  private readPage(after: string, seq: number): Promise<PageResult> {
    this.reading = new AbortController();
    const { opts, ref, schema, fence } = this.run;
    return readOnePage(opts, ref, schema, after, incrementalPosPrefix(seq, fence), this.reading);
  }

  /** Why no further page may start after `done` pages, or undefined when one may. */
  private stopReason(done: number): StopReason | undefined {
    const { opts } = this.run;
    if (opts.signal?.aborted) return 'interrupted';
    if (opts.maxPages !== undefined && done >= opts.maxPages) return 'max-pages';
    if (!this.timeLeft()) return 'deadline';
    return undefined;
  }

  private timeLeft(): boolean {
    const { opts } = this.run;
    if (!opts.remainingMs) return true;
    // A read refused now leaves the page being written and up to `depth` pages read ahead to
    // commit, each taking up to the slowest page's time.
    const margin = Math.max(opts.safetyMarginMs ?? 10_000, (this.depth + 1) * this.run.slowestPageMs());
    return opts.remainingMs() > margin;
  }
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
