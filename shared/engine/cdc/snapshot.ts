/**
 * The snapshot orchestrator of the CDC engine (docs/decisions/0013-snapshots.md): loads the rows
 * a captured table already has by DBLog windows (Netflix's DBLog), alongside the stream, without
 * locks, resumable from the state item and several chunks at once.
 *
 * One chunk is one window:
 *   1. the driver registers and makes a LOW watermark (Postgres: a logical message; MariaDB needs
 *      none: its consistent snapshot names the binlog position it cuts at), reads at most
 *      `chunkRows` rows of a key range in one snapshot, hands them over (`ready`), and makes a
 *      HIGH watermark;
 *   2. the reader reports each watermark in stream order (`watermark` events). Between low and
 *      high, the keys of the table's stream rows are collected from every cut of the table;
 *   3. at the high watermark the window LANDS: the table's stream rows up to the high watermark
 *      are cut, then the chunk's rows whose key did NOT change inside the window are placed after
 *      them, with `__pos` = the high watermark's `rowsPos` + ordinal, which sorts after every
 *      change before the watermark and before every change after it. Both join the table's
 *      buffer in the engine (./flush.ts `holdLanding`; the window closes, its reader moves on)
 *      and count towards the table's flush limits;
 *   4. the table's next flush, by the regular due rules (./flush.ts), writes them with whatever
 *      came after, and ITS state commit takes the range out of the pending ranges (`finish`):
 *      never earlier, so a crash before that flush reads the range again. Several windows land
 *      in one object and one commit.
 * A chunk whose snapshot could not see a transaction the stream delivered BEFORE its low
 * watermark (Postgres: a commit streamed while still invisible, as under synchronous
 * replication) is stale: it is discarded and read again (`invisible`, checked against the txids
 * of the commits the reader delivered).
 *
 * The table's progress (`TableSnapshot`: pending ranges in key order, the part not yet divided,
 * counts) goes into every state commit of the source, so a crash resumes at the first
 * unfinished range. Only the database orders keys: ranges are divided by `nextBound`, and the
 * engine compares keys only for equality (collected window keys vs chunk rows).
 */
import { randomBytes } from 'node:crypto';
import type { RecordBatch } from 'apache-arrow';
import type { Reader } from '../../contracts/cdc.js';
import { TidemarkError } from '../../contracts/errors.js';
import type { ChunkRows, KeyRange, SnapshotSource, TableChunker } from '../../contracts/snapshot.js';
import type { TableRef } from '../../contracts/source.js';
import { type Batch, newBatch, type WriteMode } from '../../dataplane/batch.js';
import { META_POS } from '../../dataplane/metadata.js';
import { withPositions } from '../../dataplane/positions.js';
import type { Schema } from '../../dataplane/schema.js';
import type { Logger } from '../../observability/log.js';
import { primaryKeyReader, takeRecord } from '../../sink/collapse.js';

/** How snapshots run on one source (`sources.<name>.cdc.snapshot`). */
export interface SnapshotSettings {
  /** Rows per chunk (one window, one SELECT). */
  readonly chunkRows: number;
  /** Chunks read at once, each on its own query connection (the per-source budget). */
  readonly connections: number;
  /** Optional ceiling on snapshot rows read per second over all chunks of the source. */
  readonly rowsPerSecond?: number;
  /** MySQL 8: the watermark table (`db.table`) for exact windows. */
  readonly watermarkTable?: string;
}

/** A table's snapshot progress as the state item keeps it (per table, `snapshot`). */
export interface TableSnapshot {
  readonly state: 'not_started' | 'in_progress' | 'complete';
  /** Ranges already divided off and not yet finished, in key order (absent once complete). */
  readonly pending?: readonly KeyRange[];
  /**
   * The key space not yet divided into ranges: keys after `after` (none: from the start); null
   * once divided to the end (absent once complete).
   */
  readonly rest?: { readonly after?: string } | null;
  /** Chunk rows written, chunks finished, chunks read again (stale windows). */
  readonly rows: number;
  readonly chunks: number;
  readonly retries?: number;
  readonly startedAt?: string;
  readonly completedAt?: string;
}

/** A table's snapshot progress while it runs: pending ranges and rest always present. */
interface Progress extends TableSnapshot {
  readonly pending: readonly KeyRange[];
  readonly rest: { readonly after?: string } | null;
}

/** A table about to be snapshotted for the first time. */
export function newTableSnapshot(): Progress {
  return { state: 'not_started', pending: [], rest: {}, rows: 0, chunks: 0 };
}

/** What the orchestrator needs of a captured table (the engine's own record of it). */
export interface SnapshotTable {
  readonly target: string;
  readonly ref: TableRef;
  readonly writeMode: WriteMode;
  /** The table's current lake schema and its hash (a chunk read in an older one is read again). */
  schema(): Schema;
  schemaHash(): string;
  stopped(): boolean;
}

/** A window whose high watermark arrived: the engine places its rows in its table's buffer. */
export interface ChunkLanding {
  readonly table: string;
  readonly window: Window;
}

interface Job {
  readonly table: SnapshotTable;
  readonly chunker: TableChunker;
  progress: Progress;
  /** Ranges (by identity) being read now. */
  readonly reading: Set<KeyRange>;
  /** Of those, the ranges whose window landed and waits in the engine for its table's flush. */
  readonly held: Set<KeyRange>;
  reportedComplete?: boolean;
  /** Dividing the rest is one query at a time. */
  dividing: Promise<KeyRange | undefined> | undefined;
  estimate: number | undefined;
  startedMs: number;
  lastLogMs: number;
  rowsThisRun: number;
}

interface Window {
  readonly job: Job;
  readonly range: KeyRange;
  readonly low: string;
  readonly high: string;
  readonly schemaHash: string;
  rows: ChunkRows | undefined;
  /** `rowsPos` of the low watermark once it arrived; rows of the table after it are in-window. */
  lowPrefix: string | undefined;
  /** Commits delivered before the low watermark: `commitSeq` when it arrived. */
  lowSeq: number;
  /** `rowsPos` of the high watermark: where the chunk's rows go. */
  rowsPos: string | undefined;
  /** Keys of the table's stream rows inside the window. */
  readonly keys: Set<unknown>;
  stale: string | undefined;
  done: () => void;
}

/** Txids remembered for the visibility check (commits delivered while snapshots run). */
const HISTORY_LIMIT = 1_000_000;
/** A chunk read again this many times in a row is reported as a warning. */
const RETRY_WARN = 3;
/** Snapshot progress is logged at most this often per table. */
const PROGRESS_EVERY_MS = 5000;

export class Snapshotter {
  private readonly jobs: Job[] = [];
  private readonly windows = new Map<string, { w: Window; role: 'low' | 'high' }>();
  private readonly open = new Map<string, Set<Window>>();
  private readonly history = new Map<string, number>();
  private commitSeq = 0;
  private historyEvicted = false;
  private readonly runId = randomBytes(4).toString('hex');
  private windowSeq = 0;
  private readonly abort = new AbortController();
  private tasks: Promise<void>[] = [];
  private nextReadAt = 0;
  /** The first error of a chunk task: the engine's loop throws it. */
  failure: unknown;
  /** Windows whose high watermark arrived, for the engine to flush. */
  private readonly landed: ChunkLanding[] = [];

  constructor(
    private readonly source: SnapshotSource,
    private readonly reader: Reader,
    private readonly settings: SnapshotSettings,
    private readonly log: Logger,
    private readonly clock: () => number,
  ) {
    if (!reader.expectWatermark)
      throw new TidemarkError(
        'CDC_SNAPSHOT_UNSUPPORTED',
        'this source\'s change-stream reader cannot report snapshot watermarks; set "snapshot: never" on its tables',
      );
  }

  /** Adds a table whose snapshot is not complete. */
  add(table: SnapshotTable, progress: TableSnapshot): void {
    const now = this.clock();
    this.jobs.push({
      table,
      chunker: this.source.chunker(table.ref, table.schema()),
      progress: {
        ...progress,
        pending: progress.pending ?? [],
        rest: progress.rest === undefined ? {} : progress.rest,
      },
      reading: new Set(),
      held: new Set(),
      dividing: undefined,
      estimate: undefined,
      startedMs: now,
      lastLogMs: now,
      rowsThisRun: 0,
    });
  }

  get active(): boolean {
    return this.jobs.some((j) => j.progress.state !== 'complete');
  }

  /**
   * The progress of every table being snapshotted, to go into the next state commit. A complete
   * one is stored without its (empty) ranges: 500 tables' entries fit in one state item.
   */
  progress(): ReadonlyMap<string, TableSnapshot> {
    return new Map(
      this.jobs.map((j) => {
        if (j.progress.state !== 'complete') return [j.table.target, j.progress];
        const { pending: _p, rest: _r, ...done } = j.progress;
        return [j.table.target, done];
      }),
    );
  }

  /** Starts the chunk readers (one per connection). */
  start(): void {
    for (const job of this.jobs) {
      void job.chunker
        .estimateRows?.()
        .then((n) => {
          job.estimate = n;
        })
        .catch(() => undefined);
    }
    const n = Math.max(1, Math.min(this.settings.connections, this.source.connections));
    for (let i = 0; i < n; i++)
      this.tasks.push(
        this.task().catch((e: unknown) => {
          if (!this.abort.signal.aborted) this.failure ??= e;
        }),
      );
  }

  /** Stops the chunk readers and closes their connections. */
  async stop(): Promise<void> {
    this.abort.abort(new Error('the capture is stopping'));
    for (const { w } of this.windows.values()) w.done();
    await Promise.all(this.tasks);
    await this.source.close();
  }

  // ---- the stream side (called by the engine in event order) --------------------------------

  /** A commit the reader delivered (its txid, where the log carries one). */
  onCommit(txid: string | undefined): void {
    this.commitSeq++;
    if (txid === undefined || !this.active) return;
    this.history.set(txid, this.commitSeq);
    if (this.history.size > HISTORY_LIMIT) {
      const oldest = this.history.keys().next().value as string;
      this.history.delete(oldest);
      this.historyEvicted = true;
    }
  }

  /** A TRUNCATE of `table`: chunks read before it would bring its rows back. */
  onTruncate(table: string): void {
    for (const w of this.open.get(table) ?? []) w.stale ??= 'the table was truncated inside the window';
  }

  /**
   * A watermark event. A low one opens its window's key collection; a high one lands the chunk
   * (the engine then calls `landings`) or, when the window is stale, sends the range back.
   */
  onWatermark(id: string, rowsPos: string): void {
    const entry = this.windows.get(id);
    if (!entry) return;
    this.windows.delete(id);
    const { w, role } = entry;
    if (role === 'low') {
      w.lowPrefix = rowsPos;
      w.lowSeq = this.commitSeq;
      return;
    }
    // An exact cut (MariaDB) has no low watermark: the window is empty.
    w.lowPrefix ??= rowsPos;
    w.stale ??= this.staleness(w);
    if (w.stale) {
      this.retry(w);
      return;
    }
    w.rowsPos = rowsPos;
    this.landed.push({ table: w.job.table.target, window: w });
  }

  /** Chunks whose high watermark arrived since the last call (the engine holds each). */
  landings(): ChunkLanding[] {
    return this.landed.splice(0);
  }

  /** Whether `table` has windows open (its cuts must be shown to `observe`). */
  watching(table: string): boolean {
    return (this.open.get(table)?.size ?? 0) > 0;
  }

  /** A cut of `table`'s stream rows: collects the keys of rows inside each open window. */
  observe(table: string, record: RecordBatch, primaryKey: readonly string[]): void {
    const windows = [...(this.open.get(table) ?? [])].filter((w) => w.lowPrefix !== undefined);
    if (windows.length === 0 || record.numRows === 0) return;
    const key = primaryKeyReader(record, primaryKey);
    const pos = record.getChild(META_POS)!;
    for (let i = 0; i < record.numRows; i++) {
      const p = pos.get(i) as string;
      let k: unknown;
      for (const w of windows) {
        if (p > w.lowPrefix!) {
          k ??= key(i);
          w.keys.add(k);
        }
      }
    }
  }

  /**
   * The chunk's rows placed in the stream: rows whose key changed inside the window dropped,
   * `__pos` = rowsPos + ordinal from `base`. Empty when nothing is left.
   */
  place(landing: ChunkLanding, base: number): Batch[] {
    const w = landing.window;
    const rows = w.rows;
    const prefix = w.rowsPos!;
    if (!rows?.batch || rows.rows === 0) return [];
    let record = rows.batch.record;
    if (w.keys.size > 0) {
      const key = primaryKeyReader(record, w.job.table.ref.primaryKey);
      const keep: number[] = [];
      for (let i = 0; i < record.numRows; i++) if (!w.keys.has(key(i))) keep.push(i);
      if (keep.length === 0) return [];
      if (keep.length < record.numRows) record = takeRecord(record, Int32Array.from(keep));
    }
    const placed = withPositions(record, prefix, base);
    return [
      newBatch({
        table: w.job.table.target,
        record: placed,
        watermark: placed.getChild(META_POS)!.get(placed.numRows - 1) as string,
        writeMode: w.job.table.writeMode,
        snapshotState: 'in_progress',
      }),
    ];
  }

  /**
   * `landing`'s rows are placed in its table's buffer (the engine holds them until the table's
   * next flush): the window closes, so its chunk task moves on, while its range stays pending
   * and taken (`reading`) until `finish` and `committed`. The chunk's own batch is let go (the
   * placed copy is what the engine holds); its count and last key stay for `finish`.
   */
  held(landing: ChunkLanding): void {
    const w = landing.window;
    if (w.rows) w.rows = { ...w.rows, batch: undefined };
    w.job.held.add(w.range);
    this.close(w);
  }

  /**
   * Whether every range of `table`'s snapshot left to do is held (landed, waiting for the
   * table's flush) and nothing is left to divide: its flush now completes the snapshot (unless a
   * full chunk leaves the rest of its range), so the engine need not wait for the flush limits.
   */
  waitsOnFlush(table: string): boolean {
    const job = this.jobs.find((j) => j.table.target === table);
    if (!job || job.progress.state === 'complete' || job.progress.rest !== null || job.dividing) return false;
    return job.progress.pending.length > 0 && job.progress.pending.every((r) => job.held.has(r));
  }

  /**
   * Records `landing`'s chunk as written (`written` rows) in the table's progress: its range
   * done, or the rest of it still pending when the chunk was full. Called by the flush that
   * writes the chunk's rows, right before its state commit, which carries the progress; then
   * `committed`. Never earlier: every other commit carries the range as still pending.
   */
  finish(landing: ChunkLanding, written: number, at: string): void {
    const w = landing.window;
    const job = w.job;
    // A full chunk may have left rows of its range unread (rows inserted since it was divided
    // off, or the unbounded last range): the rest of the range stays pending. It ended at the
    // range's bound when its last key IS the bound (tokens are canonical: equal values, equal
    // tokens; nothing is ordered here).
    const last = w.rows?.lastKey;
    const full =
      (w.rows?.rows ?? 0) >= this.settings.chunkRows && last !== undefined && last !== w.range.upTo;
    const pending: KeyRange[] = [];
    for (const r of job.progress.pending) {
      if (r !== w.range) pending.push(r);
      else if (full && last !== undefined)
        pending.push({ after: last, ...(r.upTo !== undefined ? { upTo: r.upTo } : {}) });
    }
    const complete = pending.length === 0 && job.progress.rest === null;
    const rows = job.progress.rows + written;
    const chunks = job.progress.chunks + 1;
    job.progress = { ...job.progress, state: complete ? 'complete' : 'in_progress', pending, rows, chunks };
    if (complete) job.progress = { ...job.progress, completedAt: at };
    job.rowsThisRun += written;
  }

  /** After the commit of a landed chunk's flush: its range is no longer taken. */
  committed(landing: ChunkLanding): void {
    const w = landing.window;
    w.job.reading.delete(w.range);
    w.job.held.delete(w.range);
    this.close(w);
    this.report(w.job);
  }

  // ---- the chunk side ------------------------------------------------------------------------

  /**
   * One connection's chunks, pipelined: once a chunk's rows are handed over, the next chunk is
   * read while the previous one waits for its high watermark; a task never has more than that
   * one chunk waiting to land (memory: two chunks per connection at most, besides the landed
   * rows the engine holds, which count towards their table's flush limits).
   */
  private async task(): Promise<void> {
    const signal = this.abort.signal;
    let previous: { readonly w: Window; readonly done: Promise<void> } | undefined;
    for (;;) {
      if (signal.aborted || this.failure) return;
      const pick = await this.pick();
      if (!pick) {
        if (!this.jobs.some((j) => j.reading.size > 0 || j.dividing)) return;
        await sleep(200, signal).catch(() => undefined);
        continue;
      }
      await this.throttle(signal);
      const { job, range } = pick;
      const n = ++this.windowSeq;
      const ids = { low: `${this.runId}.${n}.l`, high: `${this.runId}.${n}.h` };
      let finished!: () => void;
      const done = new Promise<void>((resolve) => {
        finished = resolve;
      });
      const w: Window = {
        job,
        range,
        low: ids.low,
        high: ids.high,
        schemaHash: job.table.schemaHash(),
        rows: undefined,
        lowPrefix: undefined,
        lowSeq: 0,
        rowsPos: undefined,
        keys: new Set(),
        stale: undefined,
        done: finished,
      };
      this.openWindow(w);
      try {
        await job.chunker.read(
          {
            range,
            limit: this.settings.chunkRows,
            schema: job.table.schema(),
            writeMode: job.table.writeMode,
          },
          {
            expect: (id, role, at) => {
              this.windows.set(id, { w, role });
              this.reader.expectWatermark!(id, at);
            },
            ready: (rows) => {
              w.rows = rows;
              this.spent(rows.rows);
            },
          },
          ids,
          signal,
        );
      } catch (e) {
        this.close(w);
        job.reading.delete(range);
        throw e;
      }
      if (previous) await this.settled(previous.w, previous.done, signal);
      previous = { w, done };
    }
  }

  /** Waits until the window's chunk landed in its table's buffer (or was sent back as stale, then a back-off). */
  private async settled(w: Window, done: Promise<void>, signal: AbortSignal): Promise<void> {
    await done;
    // A stale window waits a little before its range is read again: what made it stale (a
    // commit waiting for a standby) takes time to resolve.
    if (w.stale)
      await sleep(Math.min(5000, 100 * (w.job.progress.retries ?? 1)), signal).catch(() => undefined);
  }

  /** The next range to read: a pending one nobody reads, else one divided off the rest. */
  private async pick(): Promise<{ job: Job; range: KeyRange } | undefined> {
    for (const job of this.jobs) {
      if (job.progress.state === 'complete' || job.table.stopped()) continue;
      const free = job.progress.pending.find((r) => !job.reading.has(r));
      if (free) {
        job.reading.add(free);
        this.started(job);
        return { job, range: free };
      }
      if (job.progress.rest === null || job.dividing) continue;
      job.dividing = this.divide(job);
      try {
        const range = await job.dividing;
        if (range) {
          job.reading.add(range);
          this.started(job);
          return { job, range };
        }
      } finally {
        job.dividing = undefined;
      }
    }
    return undefined;
  }

  private async divide(job: Job): Promise<KeyRange | undefined> {
    const rest = job.progress.rest;
    if (rest === null) return undefined;
    const upTo = await job.chunker.nextBound(rest.after, this.settings.chunkRows, this.abort.signal);
    const range: KeyRange = {
      ...(rest.after !== undefined ? { after: rest.after } : {}),
      ...(upTo !== undefined ? { upTo } : {}),
    };
    job.progress = {
      ...job.progress,
      pending: [...job.progress.pending, range],
      rest: upTo === undefined ? null : { after: upTo },
    };
    return range;
  }

  private started(job: Job): void {
    if (job.progress.state === 'not_started') {
      job.progress = {
        ...job.progress,
        state: 'in_progress',
        startedAt: new Date(this.clock()).toISOString(),
      };
      this.log.info('snapshot started', { table: job.table.target, chunkRows: this.settings.chunkRows });
    }
  }

  private openWindow(w: Window): void {
    const t = w.job.table.target;
    const set = this.open.get(t) ?? new Set<Window>();
    this.open.set(t, set);
    set.add(w);
  }

  private close(w: Window): void {
    this.open.get(w.job.table.target)?.delete(w);
    this.windows.delete(w.low);
    this.windows.delete(w.high);
    w.done();
  }

  /** Why the chunk cannot be used, or undefined when it can. */
  private staleness(w: Window): string | undefined {
    if (!w.rows) return 'the chunk was not read';
    if (w.schemaHash !== w.job.table.schemaHash())
      return "the table's schema changed while the chunk was read";
    const seen: string[] = [];
    for (const x of w.rows.invisible ?? []) {
      const seq = this.history.get(x);
      if (seq !== undefined && seq <= w.lowSeq) seen.push(x);
    }
    if (seen.length > 0)
      return `transaction(s) ${seen.slice(0, 5).join(', ')} were delivered by the stream before the window but are not visible to the chunk's snapshot (a commit not yet visible: synchronous replication waiting for a standby?)`;
    return undefined;
  }

  private retry(w: Window): void {
    const job = w.job;
    const retries = (job.progress.retries ?? 0) + 1;
    job.progress = { ...job.progress, retries };
    job.reading.delete(w.range);
    const level = retries % RETRY_WARN === 0 ? 'warn' : 'info';
    this.log[level]('snapshot chunk read again', {
      table: job.table.target,
      reason: w.stale,
      retries,
      ...(this.historyEvicted ? { note: 'the txid history was cut at its limit' } : {}),
    });
    this.close(w);
  }

  private spent(rows: number): void {
    const rate = this.settings.rowsPerSecond;
    if (!rate) return;
    this.nextReadAt = Math.max(this.nextReadAt, this.clock()) + (rows * 1000) / rate;
  }

  private async throttle(signal: AbortSignal): Promise<void> {
    const wait = this.nextReadAt - this.clock();
    if (wait > 0) await sleep(wait, signal);
  }

  private report(job: Job): void {
    const now = this.clock();
    const p = job.progress;
    const done = p.state === 'complete';
    // Several windows are committed by one flush: the completion is said once.
    if (done && job.reportedComplete) return;
    if (done) job.reportedComplete = true;
    if (!done && now - job.lastLogMs < PROGRESS_EVERY_MS) return;
    job.lastLogMs = now;
    const seconds = Math.max(0.001, (now - job.startedMs) / 1000);
    const rate = job.rowsThisRun / seconds;
    const left = job.estimate !== undefined ? Math.max(0, job.estimate - p.rows) : undefined;
    this.log.info(done ? 'snapshot complete' : 'snapshot progress', {
      table: job.table.target,
      rows: p.rows,
      chunks: p.chunks,
      rowsPerSecond: Math.round(rate),
      ...(job.estimate !== undefined ? { estimatedRows: job.estimate } : {}),
      ...(!done && left !== undefined && rate > 0 ? { etaSeconds: Math.round(left / rate) } : {}),
      ...(p.retries ? { retries: p.retries } : {}),
    });
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
