/**
 * The one durable step both paths take (docs/architecture.md, "The durability order"): write the
 * objects, then ONE conditional commit of the new state under the lease, then acknowledge the
 * source; and the recovery that runs before a run writes anything. The incremental page loop
 * (./incremental/commit.ts) takes a step per page with one object and no ack; the CDC flush cycle
 * (./cdc/flush.ts) takes one step per cycle with an object per due table, then acks.
 *
 * Owns the ORDER, and nothing else: what is written, what the state says and what an ack means
 * belong to the caller. Never reorders: an ack never starts before the commit resolved, a commit
 * never before every write resolved; a failed write or commit throws before anything later runs.
 */
import type { LakeTable, ObjectRef, Sink, WriteTarget } from '../contracts/sink.js';
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
  /** The state to commit, given what each write returned (in `writes` order). */
  readonly value: (written: readonly { readonly write: W; readonly refs: ObjectRef[] }[]) => StateValue;
  /** Called with the committed record as soon as the commit resolved (the caller's bookkeeping). */
  readonly committed?: (record: StateRecord) => void;
  /** Acknowledges the source once the commit is durable (CDC); undefined: nothing to ack. */
  readonly ack?: () => Promise<void>;
  /** Called between the phases (fault-injection tests record and crash there). */
  readonly at?: (point: 'before-write' | 'after-write' | 'after-commit') => void | Promise<void>;
}

export interface StepResult<W extends StepWrite> {
  readonly record: StateRecord;
  readonly written: readonly { readonly write: W; readonly refs: ObjectRef[] }[];
}

/** Writes, commits, acks: in that order, each only after the previous one is durable. */
export async function durableStep<W extends StepWrite>(step: DurableStep<W>): Promise<StepResult<W>> {
  await step.at?.('before-write');
  const written = await Promise.all(
    step.writes.map(async (write) => ({
      write,
      refs: await step.sink.write(
        write.target,
        write.schema,
        write.startPosition,
        write.batches,
        write.recorded,
      ),
    })),
  );
  await step.at?.('after-write');
  const record = await step.store.commit(step.key, {
    owner: step.owner,
    expectedVersion: step.expectedVersion,
    value: step.value(written),
    ...(step.renewTtlMs !== undefined ? { renewTtlMs: step.renewTtlMs } : {}),
  });
  step.committed?.(record);
  await step.at?.('after-commit');
  if (step.ack) await step.ack();
  return { record, written };
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
