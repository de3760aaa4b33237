/**
 * The flush cycle of a CDC run (docs/decisions/0009-cdc-commit-protocol.md, "The flush cycle"):
 * where a captured position becomes durable. Every change reaches the lake, the state and the
 * source's acknowledgement here, in this order only (docs/architecture.md, "The durability
 * order"; the order itself is kept by shared/engine/durable-step.ts):
 *   1. the due tables' objects are written to the lake, in parallel, each named at or past its
 *      table's committed `next` (so recovery finds it) and with the run's fence number;
 *   2. ONE conditional commit of the state (compare-and-set on its version, renewing the lease)
 *      records each table's new `next` and the new resume position, which ./ack.ts never lets
 *      pass a transaction that is not durable on every table;
 *   3. only then is the source acknowledged up to that position.
 * An idle commit (nothing pending, a newer heartbeat position) is steps 2 and 3; a commit of an
 * event of the stream (./run.ts: DDL, gap, schema change) is step 2 alone. Every step checks the
 * self-fence first (./fencing.ts), and every commit re-arms it, as the commit renewed the lease.
 *
 * A snapshot window that landed (./snapshot.ts) does not flush its table: `holdLanding` cuts the
 * table's stream rows up to the high watermark and places the chunk's rows after them in the
 * table's HELD buffer, which counts towards its due limits; the table's next flush writes the
 * held batches first, then its cut, in one object, and only that flush's commit takes the
 * windows' ranges out of the snapshot's pending ranges (docs/decisions/0013, "Windows batched
 * into flushes"). Every other commit carries them as pending, so a crash reads them again.
 *
 * A table holding its snapshot's last windows (nothing left to read or divide) is due at once.
 *
 * Owns: when a table is due (rows, bytes, age, maxAckLag, held windows; an idle position every
 * idleCommit), the cut, the held windows, what each commit records, and the ack. Works on the
 * run's own fields through `FlushContext` (the run is it); never reorders the three steps, and a
 * failed write or commit throws before anything later runs.
 */
import type { Reader, SourcePosition } from '../../contracts/cdc.js';
import { TidemarkError } from '../../contracts/errors.js';
import type { StateRecord } from '../../contracts/state.js';
import type { Batch } from '../../dataplane/batch.js';
import { META_POS } from '../../dataplane/metadata.js';
import type { Logger } from '../../observability/log.js';
import { positionAfter } from '../../position/position.js';
import { durableStep } from '../durable-step.js';
import type { AckTracker } from './ack.js';
import type { LeaseFence } from './fencing.js';
import type { Captured, CdcRunOptions } from './options.js';
import type { ChunkLanding, Snapshotter } from './snapshot.js';
import type { CdcState, CdcTableState } from './state.js';

/** The part of a run (./run.ts `CdcRun`) the flush cycle reads and moves forward. */
export interface FlushContext {
  readonly opts: CdcRunOptions;
  readonly key: string;
  readonly log: Logger;
  readonly fence: LeaseFence;
  /** This acquisition's fence number: part of every object name this run writes. */
  readonly fenceNumber: number;
  readonly reader: Reader | undefined;
  readonly tracker: AckTracker;
  /** The snapshots of tables not yet fully loaded; undefined when none runs. */
  readonly snapshotter: Snapshotter | undefined;
  /** The committed state, and its version: what the next conditional commit expects. */
  version: number;
  state: CdcState;
  /** Clock reading of the last commit (the idle commit is measured from it). */
  lastCommitAt: number;
  /** Tables with pending rows; of those, the ones rows arrived for since the last look. */
  readonly pending: Set<Captured>;
  readonly dirty: Set<Captured>;
  /** When the oldest pending row may come due by age (flushSeconds or maxAckLag). */
  ageDueAt: number;
  /** Per table, landed snapshot windows' rows waiting for the table's next flush. */
  readonly held: Map<string, Held>;
  /** The run's totals, for its summary. */
  rows: number;
  flushes: number;
  objects: number;
}

/**
 * A table's landed windows not yet written: the stream rows cut at each high watermark and the
 * chunk rows placed after them, in stream order, and the windows whose ranges the flush that
 * writes them finishes.
 */
export interface Held {
  readonly batches: Batch[];
  readonly windows: { readonly landing: ChunkLanding; readonly rows: number }[];
  rows: number;
  bytes: number;
  /** The position after the last held row, and after the last placed chunk row. */
  next: string | undefined;
  placedNext: string | undefined;
}

/**
 * At most this many windows are held per table: their ranges stay in the pending ranges of every
 * state commit until they are written, so the state item's size stays bounded whatever the
 * flush limits (a table holding this many is due).
 */
export const MAX_HELD_WINDOWS = 32;

/** How long the reader may wait for the next event before a timer is due. */
export function waitMs(run: FlushContext): number {
  const now = run.opts.clock();
  const { ms, maxAckLagMs, idleCommitMs } = run.opts.limits;
  const due = Math.min(now + Math.min(ms, maxAckLagMs, idleCommitMs), run.ageDueAt);
  return Math.max(1, Math.min(1000, due - now));
}

/** Flushes the tables that are due (all with pending rows when `all`), or commits an idle position. */
export async function flushDue(run: FlushContext, all: boolean): Promise<void> {
  const now = run.opts.clock();
  const { rows, bytes, ms, maxAckLagMs, idleCommitMs } = run.opts.limits;
  // Sizes can only have grown for the tables rows arrived for since the last look; ages are
  // looked at when the oldest pending row may have come due. Nothing here scans every table
  // per event.
  const byAge = all || now >= run.ageDueAt;
  const due: Captured[] = [];
  for (const t of byAge ? run.pending : run.dirty) {
    if (t.pendingSince === undefined) continue;
    const p = run.reader!.pending(t.config.target);
    const h = run.held.get(t.config.target);
    const n = p.rows + (h?.rows ?? 0);
    const b = p.bytes + (h?.bytes ?? 0);
    const windows = h?.windows.length ?? 0;
    const age = now - t.pendingSince;
    if (
      all ||
      n >= rows ||
      b >= bytes ||
      age >= ms ||
      age >= maxAckLagMs ||
      windows >= MAX_HELD_WINDOWS ||
      // The snapshot's last windows: nothing else to read, its flush completes it.
      (windows > 0 && run.snapshotter?.waitsOnFlush(t.config.target) === true)
    )
      due.push(t);
  }
  run.dirty.clear();
  if (byAge) {
    run.ageDueAt = Number.POSITIVE_INFINITY;
    for (const t of run.pending)
      if (!due.includes(t))
        run.ageDueAt = Math.min(run.ageDueAt, t.pendingSince! + Math.min(ms, maxAckLagMs));
  }
  if (due.length > 0) return flushTables(run, due, now);
  // Nothing pending: a newer resume point (commits of rows all durable, heartbeats) is still
  // committed now and then, or at the end, so the stored position does not age.
  const position = run.tracker.position;
  if (
    position !== undefined &&
    !samePosition(position, run.state.position) &&
    (all || now - run.lastCommitAt >= idleCommitMs)
  ) {
    await commit(run, { ...run.state, position });
    await ack(run, position);
  }
}

/**
 * A snapshot window landed (its high watermark arrived): the table's stream rows up to it are cut
 * and held, then the chunk's rows placed after them, `__pos` = rowsPos + ordinal. Nothing is
 * written or committed here: the table's rows (held ones included) are pending until its next
 * flush, which the regular due rules decide. The window closes (its chunk task moves on); its
 * range stays pending in every commit until that flush's.
 */
export async function holdLanding(run: FlushContext, t: Captured, landing: ChunkLanding): Promise<void> {
  run.fence.check();
  const reader = run.reader!;
  const snapshotter = run.snapshotter!;
  const target = t.config.target;
  const held = run.held.get(target) ?? {
    batches: [],
    windows: [],
    rows: 0,
    bytes: 0,
    next: undefined,
    placedNext: undefined,
  };
  run.held.set(target, held);
  let rows = 0;
  // A stopped table's changes are dropped; its window's range is still finished by its flush.
  if (!t.stopped) {
    if (reader.settle) await reader.settle([target]);
    const bytes = reader.pending(target).bytes;
    const batch = reader.cut(target);
    if (batch) {
      if (snapshotter.watching(target)) snapshotter.observe(target, batch.record, t.ref.primaryKey);
      held.batches.push(batch);
      held.rows += batch.record.numRows;
      held.bytes += bytes;
      held.next = later(held.next, positionAfter(batch.watermark!));
    }
    // Two chunks can sit at one watermark position (MariaDB, no write between their snapshots):
    // the second one's ordinals go on after the first's, held or committed.
    const prefix = landing.window.rowsPos!;
    let base = 0;
    for (const p of [held.next, held.placedNext, run.state.tables[target]?.next])
      if (p?.startsWith(prefix)) base = Math.max(base, Number.parseInt(p.slice(-8), 16));
    for (const b of snapshotter.place(landing, base)) {
      held.batches.push(b);
      rows += b.record.numRows;
      held.rows += b.record.numRows;
      held.bytes += b.record.data.byteLength;
      held.placedNext = positionAfter(b.watermark!);
      held.next = later(held.next, held.placedNext);
    }
  }
  held.windows.push({ landing, rows });
  snapshotter.held(landing);
  // The held rows are pending rows of the table: due by rows, bytes, age like the stream's.
  rowsArrived(run, t, run.opts.clock());
}

/**
 * Rows of `t` arrived at `now` (from the stream, or a landed snapshot window): the table is
 * pending from its first such row on, due by age from then (flushSeconds or maxAckLag), and looked
 * at by the next due check.
 */
export function rowsArrived(run: FlushContext, t: Captured, now: number): void {
  if (t.pendingSince === undefined) {
    t.pendingSince = now;
    run.pending.add(t);
    const { ms, maxAckLagMs } = run.opts.limits;
    run.ageDueAt = Math.min(run.ageDueAt, now + Math.min(ms, maxAckLagMs));
  }
  run.dirty.add(t);
}

/**
 * One flush cycle: cut, write in parallel, ONE conditional commit, then ack. A table with held
 * windows (`holdLanding`) writes their batches before its cut, in the same object, and the
 * commit takes their ranges out of the table's snapshot.
 */
export async function flushTables(run: FlushContext, due: readonly Captured[], now: number): Promise<void> {
  run.fence.check();
  const reader = run.reader!;
  const marks = new Map<string, number>();
  const cuts: { t: Captured; batches: Batch[]; startPosition: string; last: string }[] = [];
  if (reader.settle) await reader.settle(due.map((t) => t.config.target));
  const snapshotter = run.snapshotter;
  let chunkRows = 0;
  const windows: { readonly landing: ChunkLanding; readonly rows: number }[] = [];
  for (const t of due) {
    const target = t.config.target;
    marks.set(target, run.tracker.appendedRows(target));
    const batch = reader.cut(target);
    t.pendingSince = undefined;
    run.pending.delete(t);
    run.dirty.delete(t);
    const held = run.held.get(target);
    run.held.delete(target);
    if (held) windows.push(...held.windows);
    // A stopped table's changes are dropped: counted durable, never written.
    if (t.stopped) continue;
    if (batch && snapshotter?.watching(target)) snapshotter.observe(target, batch.record, t.ref.primaryKey);
    // The held windows' batches first (stream rows and chunk rows, in stream order), then what
    // came after the last window.
    const batches = [...(held?.batches ?? []), ...(batch ? [batch] : [])];
    if (batches.length === 0) continue;
    // The object is named at or past `next` (recovery must find it), and `next` moves past
    // every row it holds. A chunk placed at a watermark the table's stream rows already passed
    // (a MariaDB cut the reader had read beyond) is named by `next` itself.
    const committedNext = run.state.tables[target]?.next;
    let startPosition = firstPosition(batches[0]!);
    if (committedNext !== undefined && startPosition < committedNext) startPosition = committedNext;
    let last = startPosition;
    for (const b of batches) if (b.watermark! > last) last = b.watermark!;
    cuts.push({ t, batches, startPosition, last });
  }
  const position = run.tracker.resumeIf(marks);
  const at = new Date(now).toISOString();
  // The held windows' ranges leave the pending ranges in THIS commit, the one that writes their
  // rows (finish before the state value is built; it carries the progress).
  for (const w of windows) {
    snapshotter!.finish(w.landing, w.rows, at);
    chunkRows += w.rows;
  }
  let rows = 0;
  let next: CdcState | undefined;
  // One durable step: every due table's object in parallel, then ONE conditional commit of
  // their `next` and the resume point, then the ack (shared/engine/durable-step.ts).
  await durableStep({
    sink: run.opts.sink,
    store: run.opts.store,
    key: run.key,
    owner: run.opts.owner,
    expectedVersion: run.version,
    renewTtlMs: run.opts.leaseTtlMs,
    writes: cuts.map(({ t, batches, startPosition, last }) => ({
      target: {
        table: t.config.target,
        writer: run.opts.writer,
        fence: run.fenceNumber,
        format: t.format,
        tableFormat: t.tableFormat,
      },
      schema: t.schema,
      startPosition,
      batches,
      recorded: t.recorded,
      t,
      last,
    })),
    value: (written) => {
      run.fence.check();
      const tables: Record<string, CdcTableState> = { ...run.state.tables };
      for (const { write, refs, pending } of written) {
        const { t, batches, last } = write;
        const prev = tables[t.config.target] ?? { rows: 0, objects: 0 };
        let n = 0;
        for (const b of batches) n += b.record.numRows;
        rows += n;
        tables[t.config.target] = {
          ...prev,
          next: positionAfter(last),
          rows: prev.rows + n,
          objects: prev.objects + refs.length,
          lastFlushAt: at,
          schemaHash: t.recorded.hash,
          schemaVersion: t.recorded.version,
          format: t.format,
          tableFormat: t.tableFormat,
          ...(pending ? { pending } : {}),
          ...(t.lastCommitTimeMs !== undefined ? { lagMs: Math.max(0, now - t.lastCommitTimeMs) } : {}),
        };
        run.objects += refs.length;
      }
      next = {
        ...run.state,
        tables: withSnapshots(run.snapshotter, tables),
        ...(position ? { position } : {}),
        lastCommitAt: new Date(run.opts.clock()).toISOString(),
      };
      return next as unknown as Record<string, unknown>;
    },
    committed: (record) => {
      committedAs(run, record, next!);
      run.tracker.markDurable(marks);
      run.rows += rows;
      run.flushes += 1;
      for (const w of windows) snapshotter!.committed(w.landing);
    },
    at: (point) => run.opts.faults?.(point),
    ...(position ? { ack: () => ack(run, position) } : {}),
  });
  run.log.debug('flushed', {
    tables: cuts.length,
    rows,
    ...(windows.length > 0 ? { windows: windows.length, chunkRows } : {}),
    position: position?.display ?? position?.value,
  });
}

/** Acknowledges the source up to `position`, which the state already holds. */
export async function ack(run: FlushContext, position: SourcePosition): Promise<void> {
  run.fence.check();
  await run.reader!.setConfirmed(position);
  await run.opts.faults?.('after-ack');
}

/** A commit outside a flush (an idle position, an event): one conditional write under the lease. */
export async function commit(run: FlushContext, value: CdcState): Promise<void> {
  run.fence.check();
  const next: CdcState = {
    ...value,
    tables: withSnapshots(run.snapshotter, { ...value.tables }),
    lastCommitAt: new Date(run.opts.clock()).toISOString(),
  };
  const committed = await run.opts.store.commit(run.key, {
    owner: run.opts.owner,
    expectedVersion: run.version,
    value: next as unknown as Record<string, unknown>,
    renewTtlMs: run.opts.leaseTtlMs,
  });
  committedAs(run, committed, next);
}

/** After a commit: its version and value are the state now, and the lease was renewed by it. */
function committedAs(run: FlushContext, record: StateRecord, value: CdcState): void {
  run.version = record.version;
  run.state = value;
  run.lastCommitAt = run.opts.clock();
  run.fence.schedule();
}

/** The tables' entries with the snapshot progress of the tables being snapshotted. */
function withSnapshots(
  snapshotter: Snapshotter | undefined,
  tables: Record<string, CdcTableState>,
): Record<string, CdcTableState> {
  if (!snapshotter) return tables;
  for (const [target, snapshot] of snapshotter.progress()) {
    const prev = tables[target];
    if (prev) tables[target] = { ...prev, snapshot };
  }
  return tables;
}

function firstPosition(batch: Batch): string {
  const pos = batch.record.getChild(META_POS)?.get(0) as string | null | undefined;
  if (typeof pos !== 'string')
    throw new TidemarkError('BATCH_INVALID', `batch of ${batch.table} has no __pos`);
  return pos;
}

/** The later of two positions (plain string order, decision 0003). */
function later(a: string | undefined, b: string | undefined): string | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return a > b ? a : b;
}

function samePosition(a: SourcePosition | undefined, b: SourcePosition | undefined): boolean {
  return a?.scheme === b?.scheme && a?.value === b?.value;
}
