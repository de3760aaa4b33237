/**
 * The one durable step both paths take (docs/architecture.md, "The durability order"): write the
 * objects, then ONE conditional commit of the new state under the lease, then acknowledge the
 * source; and the recovery that runs before a run writes anything. For an Iceberg table
 * (docs/decisions/0024-iceberg-commits.md) the write also stages the table's commit (a manifest
 * of its data files), the state commit records that pending commit, and the catalog commit
 * applies it after the state commit and before the ack: the state decides, the catalog follows. The incremental page loop
 * (./incremental/commit.ts) takes a step per page with one object and no ack; the CDC flush cycle
 * (./cdc/flush.ts) takes one step per cycle with an object per due table, then acks.
 *
 * Owns the ORDER, and nothing else: what is written, what the state says and what an ack means
 * belong to the caller. Never reorders: an ack never starts before the commit resolved, a commit
 * never before every write resolved; a failed write or commit throws before anything later runs.
 */
import { SinkError } from '../contracts/errors.js';
import type { LakeTable, ObjectRef, PendingCommit, Sink, WriteTarget } from '../contracts/sink.js';
import type { Position } from '../contracts/source.js';
import type { CursorStore, StateRecord, StateValue } from '../contracts/state.js';
import type { Batch } from '../dataplane/batch.js';
import type { Schema } from '../dataplane/schema.js';
import type { StoredSchema } from '../dataplane/schema-rules.js';

/** One object of a step: what the sink writes, named from `startPosition` and the fence. */
export interface StepWrite {
  readonly target: WriteTarget;
  readonly schema: Schema;
  readonly startPosition: Position;
  readonly batches: readonly Batch[];
  readonly recorded?: StoredSchema;
}

export interface DurableStep<W extends StepWrite> {
  readonly sink: Sink;
  readonly store: CursorStore;
  readonly key: string;
  readonly owner: string;
  /** The state version the commit expects (compare-and-set). */
  readonly expectedVersion: number;
  /** The lease is renewed to now + this in the same conditional write. */
  readonly renewTtlMs?: number;
  /** The objects, written in parallel. */
  readonly writes: readonly W[];
  /**
   * The state to commit, given what each write returned (in `writes` order). It must record each
   * write's `pending` commit (an Iceberg table's): recovery applies what the state holds.
   */
  readonly value: (written: readonly Written<W>[]) => StateValue;
  /** Called with the committed record as soon as the commit resolved (the caller's bookkeeping). */
  readonly committed?: (record: StateRecord) => void;
  /** Acknowledges the source once the commit is durable (CDC); undefined: nothing to ack. */
  readonly ack?: () => Promise<void>;
  /**
   * The previous step's catalog commits (`StepResult.applied` of a step taken with `deferApply`):
   * awaited after this step's writes and before its state commit, which replaces the state's
   * pending commits, so a state never drops a commit that is not applied yet.
   */
  readonly after?: Promise<void>;
  /**
   * Return with the catalog commits still running (`StepResult.applied`) instead of awaiting them:
   * the caller's next step writes meanwhile and passes them as its `after`. Only for a step with
   * no `ack` (incremental pages): an ack waits for the catalog.
   */
  readonly deferApply?: boolean;
  /** Called between the phases (fault-injection tests record and crash there). */
  readonly at?: (point: StepPoint) => void | Promise<void>;
}

/**
 * The points between a step's phases: before anything is written; data (and staged manifests)
 * written, state not committed; state committed, catalog commits not applied; catalog commits
 * applied (only in a step with an Iceberg table), source not acknowledged.
 */
export type StepPoint = 'before-write' | 'after-write' | 'after-commit' | 'after-apply';

/** What one write of a step returned: its objects, and an Iceberg table's staged commit. */
export interface Written<W extends StepWrite> {
  readonly write: W;
  readonly refs: ObjectRef[];
  readonly pending?: PendingCommit;
}

export interface StepResult<W extends StepWrite> {
  readonly record: StateRecord;
  readonly written: readonly Written<W>[];
  /** The step's catalog commits: resolved already unless the step was taken with `deferApply`. */
  readonly applied: Promise<void>;
}

/** Writes, commits, acks: in that order, each only after the previous one is durable. */
export async function durableStep<W extends StepWrite>(step: DurableStep<W>): Promise<StepResult<W>> {
  await step.at?.('before-write');
  const { sink } = step;
  const written: Written<W>[] = await Promise.all(
    step.writes.map(async (write) => {
      const refs = await sink.write(
        write.target,
        write.schema,
        write.startPosition,
        write.batches,
        write.recorded,
      );
      if (write.target.tableFormat !== 'iceberg') return { write, refs };
      const pending = await stageOf(sink, write.target, refs);
      return pending ? { write, refs, pending } : { write, refs };
    }),
  );
  await step.at?.('after-write');
  // The previous step's catalog commits land before this state commit replaces what it pends.
  if (step.after) await step.after;
  const record = await step.store.commit(step.key, {
    owner: step.owner,
    expectedVersion: step.expectedVersion,
    value: step.value(written),
    ...(step.renewTtlMs !== undefined ? { renewTtlMs: step.renewTtlMs } : {}),
  });
  step.committed?.(record);
  await step.at?.('after-commit');
  const pending = written.flatMap((w) => (w.pending ? [w.pending] : []));
  const applied =
    pending.length > 0 ? applyPending(sink, pending).then(() => step.at?.('after-apply')) : Promise.resolve();
  if (step.deferApply && !step.ack) {
    // Awaited by the caller (its next step's `after`, or the end of its run); a failure is
    // reported there, never as an unhandled rejection here.
    applied.catch(() => undefined);
    return { record, written, applied };
  }
  await applied;
  if (step.ack) await step.ack();
  return { record, written, applied };
}

/** Stages an Iceberg write's commit. @throws SinkError when the sink cannot (a bug in the wiring). */
function stageOf(sink: Sink, target: WriteTarget, refs: ObjectRef[]): Promise<PendingCommit | undefined> {
  if (!sink.stage)
    throw new SinkError(
      'ICEBERG_TABLE_MISSING',
      target.table,
      `${target.table} is an Iceberg table, but the lake sink cannot commit Iceberg tables (a bug)`,
    );
  return sink.stage(target, refs);
}

/**
 * Applies commits the state holds to their tables' catalogs (in parallel: one per table), each at
 * most once whatever happened before (the sink skips a commit its table has). Recovery calls it
 * with the pending commits of the state it resumes from.
 */
export async function applyPending(sink: Sink, pending: readonly PendingCommit[]): Promise<void> {
  if (pending.length === 0) return;
  if (!sink.apply)
    throw new SinkError(
      'ICEBERG_TABLE_MISSING',
      pending[0]!.table,
      `${pending[0]!.table} has a pending Iceberg commit, but the lake sink cannot commit Iceberg tables (a bug)`,
    );
  await Promise.all(pending.map((p) => sink.apply!(p)));
}

/**
 * Before a run writes anything: removes this writer's objects of `lake` at or past `committed`
 * and of its scheme (a crashed attempt's leftovers; a table that never committed passes the
 * bare scheme letter, which every position of that scheme sorts at or after). Other writers'
 * objects, and this writer's objects of another scheme, are never considered.
 */
export function recoverUncommitted(sink: Sink, lake: LakeTable, committed: Position): Promise<ObjectRef[]> {
  return sink.recover(lake, committed);
}
