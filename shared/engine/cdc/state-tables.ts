/**
 * What the rest of tidemark may know of a source's CDC state before the CDC engine exists: its
 * key, and which lake tables it holds entries for (docs/decisions/0001-state-item-schema.md).
 *
 * The CDC task keeps ONE item per source, `cdc#<pipeline>#<source>` (one slot / binlog
 * connection), with the per-table entries under `value.tables[<target>]`. The shape of an entry
 * belongs to the CDC engine; this module only reads the map's keys, and removes one entry for
 * `tidemark reset` of a table that leaves CDC (every other field is kept as stored).
 */
import { TidemarkError } from '../../contracts/errors.js';
import type { CursorStore, StateValue } from '../../contracts/state.js';
import { takeLease } from '../lease.js';

export { cdcStateKey } from './state.js';

/** The lake tables a stored CDC state value has entries for; none when there is no value. */
export function cdcStateTables(key: string, value: StateValue | undefined): string[] {
  if (value === undefined || value.tables === undefined) return [];
  const tables = value.tables;
  if (typeof tables !== 'object' || tables === null || Array.isArray(tables)) {
    throw new TidemarkError(
      'STATE_CORRUPT',
      `stored CDC state ${key} is not valid ("tables" is not a map: ${JSON.stringify(tables).slice(0, 200)}); inspect the item`,
    );
  }
  return Object.keys(tables);
}

export interface DropCdcTableOptions {
  readonly store: CursorStore;
  /** `cdcStateKey(pipeline, source)`. */
  readonly key: string;
  /** The lake table whose entry goes. */
  readonly target: string;
  readonly owner: string;
  readonly isHolderDead?: (owner: string) => boolean;
  /**
   * Runs while the source's CDC lease is held (no CDC task can write meanwhile) and before the
   * entry is removed: what must be done first (deleting the table's objects).
   */
  readonly first?: () => Promise<void>;
}

/**
 * Removes `target` from a source's CDC state, under the source's lease (a running CDC task holds
 * it: LEASE_HELD). Returns whether the state had an entry. `first` runs under the lease before
 * the commit, so a crash leaves the entry in place and the same command finishes the job.
 */
export async function dropCdcTable(opts: DropCdcTableOptions): Promise<boolean> {
  const { store, key, target, owner } = opts;
  // A plain read first: a source without CDC state gets no item (taking a lease would write one).
  if (!cdcStateTables(key, (await store.load(key)).value).includes(target)) return false;
  const { record } = await takeLease(store, key, owner, 60_000, opts.isHolderDead);
  try {
    if (!cdcStateTables(key, record.value).includes(target)) return false;
    await opts.first?.();
    const value = record.value!;
    const { [target]: _dropped, ...tables } = value.tables as Record<string, unknown>;
    await store.commit(key, { owner, expectedVersion: record.version, value: { ...value, tables } });
    return true;
  } finally {
    await store.release(key, owner);
  }
}
