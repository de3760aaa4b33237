/**
 * `tidemark reset` for an incremental table: forget the cursor so the next run re-reads the table
 * from the start, and decide, on the operator's explicit word, what happens to the objects this
 * writer already has in the lake.
 *
 * Owns the three ways out of "the state does not account for the lake" (a lost state, a state
 * restored from an older backup, a move to another state store), which the run itself refuses
 * (`STATE_MISSING`, `STATE_BEHIND_LAKE` in recovery.ts):
 *   - plain reset (the state is intact): `seq` keeps counting, so resynced rows get positions
 *     after every existing object, which stays;
 *   - keep objects: `seq` moves past this writer's newest object, which all stay (readers pick
 *     the newest version of a row by `__pos`), and past the newest commit an Iceberg table
 *     records of the writer (its files may not be listable; an earlier position would be taken
 *     for a commit already applied);
 *   - delete objects: this writer's objects are deleted first, then the state starts over.
 * Never touches another writer's objects, and never deletes anything without `delete`.
 */
import { TidemarkError } from '../../contracts/errors.js';
import type { LakeTable, ObjectRef, Sink } from '../../contracts/sink.js';
import type { CursorStore } from '../../contracts/state.js';
import { incrementalSeqOf } from '../../position/position.js';
import { takeLease } from '../lease.js';
import { type IncrementalState, initialIncrementalState, parseIncrementalState } from './state.js';

export interface ResetOptions {
  readonly key: string;
  readonly lake: LakeTable;
  readonly cursorColumn: string;
  readonly store: CursorStore;
  readonly sink: Sink;
  readonly owner: string;
  /** Whether a lease holder is provably dead (see IncrementalRunOptions.isHolderDead). */
  readonly isHolderDead?: (owner: string) => boolean;
  /** What to do with this writer's existing objects; required when the state does not cover them. */
  readonly objects?: 'keep' | 'delete';
  /**
   * The table now runs under CDC (`mode: cdc` in the spec): the reset state also records that it
   * was retired, at this ISO time, so the mode check (shared/pipeline/mode-change.ts) no longer
   * counts it. An incremental run never reads the marker and drops it with its first commit.
   */
  readonly retiredAt?: string;
}

/** The marker a retired incremental state carries (`retired`). */
export interface RetiredMarker {
  readonly at: string;
  /** The mode the table moved to. */
  readonly mode: 'cdc';
}

/** Whether a stored incremental state value was retired by `tidemark reset` for a move to CDC. */
export function isRetiredIncrementalState(value: unknown): boolean {
  const retired = (value as { retired?: Partial<RetiredMarker> } | undefined)?.retired;
  return typeof retired === 'object' && retired !== null && retired.mode === 'cdc';
}

export interface ResetResult {
  /** The commit step the next run writes its first object at. */
  readonly nextSeq: number;
  /** This writer's objects that stay in the lake. */
  readonly kept: readonly ObjectRef[];
  /** This writer's objects deleted (only with `objects: 'delete'`). */
  readonly deleted: readonly ObjectRef[];
  /** Whether a state existed before the reset. */
  readonly hadState: boolean;
}

/** Resets an incremental table as the module comment says. */
export async function resetIncremental(opts: ResetOptions): Promise<ResetResult> {
  const { key, lake, store, sink, owner } = opts;
  const { record } = await takeLease(store, key, owner, 60_000, opts.isHolderDead);
  try {
    const before: IncrementalState | undefined =
      record.value === undefined ? undefined : parseIncrementalState(record.value, opts.cursorColumn);
    const ours = await sink.list(lake.table, lake.writer);
    const seqs = ours.map((o) =>
      o.startPosition === undefined ? undefined : incrementalSeqOf(o.startPosition),
    );
    // What the table records of the writer counts too: a table its catalog places lists nothing.
    const recorded = await sink.committedPosition?.(lake.table, lake.writer);
    const recordedSeq = recorded === undefined ? undefined : incrementalSeqOf(recorded);
    const newest = Math.max(-1, recordedSeq ?? -1, ...seqs.map((s) => s ?? -1));
    const lakeHolds = ours.length > 0 || recordedSeq !== undefined;
    const stateSeq = before?.seq ?? 0;
    let deleted: ObjectRef[] = [];
    let nextSeq = stateSeq;
    if (opts.objects === 'delete') {
      // Objects first: a crash before the commit leaves the old state (or none) and fewer
      // objects, and the same command finishes the job.
      deleted = await sink.discard(lake);
      nextSeq = 0;
    } else if (opts.objects === 'keep') {
      nextSeq = Math.max(stateSeq, newest + 1);
    } else if (lakeHolds && (before === undefined || newest > stateSeq)) {
      // Positions restart at the state's seq: resynced objects would take the names of, and
      // recovery would delete, objects the state does not know about.
      throw new TidemarkError(
        'RESET_NEEDS_CHOICE',
        `${lake.table}: ${before === undefined ? 'the state store has no state for this table' : `the state says page ${stateSeq} is next`}, but the lake holds ${ours.length} object(s) of ${lake.writer} up to page ${newest}; say what to do with them: --keep-objects (they stay; the next run writes after them) or --delete-objects (they are deleted first)`,
      );
    }
    // The shown cursor and its instant go with the cursor (status must not show the old one as
    // synced); a delete also forgets what the deleted objects held.
    const base =
      before === undefined || opts.objects === 'delete' ? initialIncrementalState(opts.cursorColumn) : before;
    const { cursorText: _shown, newestCursorMs: _instant, ...rest } = base;
    const value: IncrementalState = { ...rest, cursor: '', cursorColumn: opts.cursorColumn, seq: nextSeq };
    const retired: RetiredMarker | undefined = opts.retiredAt
      ? { at: opts.retiredAt, mode: 'cdc' }
      : undefined;
    await store.commit(key, {
      owner,
      expectedVersion: record.version,
      value: { ...(value as unknown as Record<string, unknown>), ...(retired ? { retired } : {}) },
    });
    const deletedUris = new Set(deleted.map((d) => d.uri));
    return {
      nextSeq,
      kept: ours.filter((o) => !deletedUris.has(o.uri)),
      deleted,
      hadState: before !== undefined,
    };
  } finally {
    await store.release(key, owner);
  }
}
