/**
 * What an incremental run does before it writes anything (docs/architecture.md, the durability
 * order, steps 0 and 4), after taking its lease and loading its state:
 *   - it refuses a state that does not account for this writer's objects in the lake (missing,
 *     or older than the lake: `STATE_MISSING`, `STATE_BEHIND_LAKE`) before anything is deleted;
 *   - a table's first run commits its initial state before it writes any object, so "no state
 *     but objects of this writer" always means the state was lost, never a crashed first run;
 *   - it removes this writer's objects at or past the committed position: a crashed attempt's,
 *     written but never committed (../durable-step.ts `recoverUncommitted`).
 * Never considers another writer's objects, and never deletes one the state accounts for.
 */
import type { LakeTable, PendingCommit } from '../../contracts/sink.js';
import type { StateRecord } from '../../contracts/state.js';
import type { Logger } from '../../observability/log.js';
import { incrementalSeqOf, incrementalStepStart } from '../../position/position.js';
import { applyPending, recoverUncommitted } from '../durable-step.js';
import { leaseTtl } from './commit.js';
import { StateBehindLakeError, StateMissingError } from './errors.js';
import type { IncrementalRunOptions } from './options.js';
import type { IncrementalState } from './state.js';

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
export async function checkStateAgainstLake(
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

/**
 * Step 4 of the durability order: an Iceberg table's pending commit (decided by the last page
 * commit) is applied, then whatever of ours lies at or past the committed position (page `seq`)
 * was written by an attempt that never committed, and no snapshot references it (a catalog
 * commit only applies what the state holds): it is removed before anything new is written.
 * Returns how many objects were removed.
 */
export async function removeUncommitted(
  opts: IncrementalRunOptions,
  log: Logger,
  lake: LakeTable,
  seq: number,
  pending: PendingCommit | undefined,
): Promise<number> {
  // An Iceberg table's commit the state decided is applied first (docs/decisions/0024): the
  // catalog follows the state; a table that has it already is left as it is.
  if (pending) await applyPending(opts.sink, [pending]);
  const removed = await recoverUncommitted(opts.sink, lake, incrementalStepStart(seq));
  if (removed.length > 0)
    log.warn('removed uncommitted objects of a crashed attempt', { objects: removed.map((r) => r.uri) });
  return removed.length;
}
