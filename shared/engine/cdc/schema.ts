/**
 * `tidemark schema accept` for a cdc table: the operator's word that the table's current schema
 * is the one it writes from now on, after a change the rules stopped the capture on
 * (docs/schema-changes.md). Records it in the table's entry of its source's CDC state
 * (`cdc#<pipeline>#<source>`: `schemaHash`, `schemaVersion` + 1) in one conditional write under
 * the source's lease, so the next `tidemark cdc` starts without SCHEMA_CHANGED and resumes the
 * capture from the source's position under the new schema. The position, each table's `next`,
 * the lake and every other entry stay as they are.
 *
 * Owns that one write. Must never: write while a CDC task holds the lease (it would commit over
 * the accept, or capture past it under the old schema), or touch anything but the one entry's
 * schema fields.
 */
import { LeaseHeldError, TidemarkError } from '../../contracts/errors.js';
import type { Introspector, TableSpec } from '../../contracts/source.js';
import type { CursorStore } from '../../contracts/state.js';
import { schemaHash } from '../../dataplane/schema-rules.js';
import { takeLease } from '../lease.js';
import { cdcLakeSchema } from './lake-schema.js';
import { type CdcStreamEvent, type CdcTableState, lastSchemaStop, parseCdcState } from './state.js';

export interface AcceptCdcSchemaOptions {
  /** `cdcStateKey(pipeline, source)`. */
  readonly key: string;
  /** The spec's name of the source, for messages. */
  readonly sourceName: string;
  /** The lake table. */
  readonly target: string;
  /** The table as the CDC task introspects it (its `exclude:` applied). */
  readonly table: TableSpec;
  readonly source: Introspector;
  readonly store: CursorStore;
  readonly owner: string;
  /** Whether a lease holder is provably dead (a local process that is gone). */
  readonly isHolderDead?: (owner: string) => boolean;
}

export interface AcceptCdcSchemaResult {
  /** The entry's schema hash and version until now. */
  readonly before: { readonly hash: string | undefined; readonly version: number | undefined };
  /** The hash and version recorded now (equal to `before` when nothing changed). */
  readonly after: { readonly hash: string; readonly version: number };
  readonly changed: boolean;
  /** The schema stop the state's event log holds for the table, if any: what was accepted. */
  readonly stop: CdcStreamEvent | undefined;
}

/** Records the table's current schema in its CDC entry, as the module comment says. */
export async function acceptCdcSchema(opts: AcceptCdcSchemaOptions): Promise<AcceptCdcSchemaResult> {
  const { key, store, owner, target } = opts;
  // A plain read first: a source without CDC state gets no item (taking a lease would write one).
  if (parseCdcState((await store.load(key)).value).tables[target] === undefined) throw nothingToAccept(opts);
  let record: Awaited<ReturnType<typeof takeLease>>['record'];
  try {
    ({ record } = await takeLease(store, key, owner, 60_000, opts.isHolderDead));
  } catch (e) {
    if (!(e instanceof LeaseHeldError)) throw e;
    throw new TidemarkError(
      'LEASE_HELD',
      `${target}: the CDC task of source ${opts.sourceName} holds ${key} (${e.holder ?? 'another task'}${e.expiresAt ? `, lease until ${new Date(e.expiresAt).toISOString()}` : ''}), so its schema was not changed; stop that task first (SIGTERM drains it; on ECS scale the CDC service to 0), then run tidemark schema accept again and start the task`,
      { cause: e },
    );
  }
  try {
    const state = parseCdcState(record.value);
    const entry: CdcTableState | undefined = state.tables[target];
    if (entry === undefined) throw nothingToAccept(opts);
    const { schema } = await opts.source.introspect(opts.table);
    const hash = schemaHash(cdcLakeSchema(schema));
    const before = { hash: entry.schemaHash, version: entry.schemaVersion };
    const stop = lastSchemaStop(state, target);
    if (entry.schemaHash === hash) {
      return { before, after: { hash, version: entry.schemaVersion ?? 1 }, changed: false, stop };
    }
    const after = { hash, version: (entry.schemaVersion ?? 1) + 1 };
    // Conditional on the version read under the lease: a CDC task that took the lease since
    // (it cannot while we hold it) or any other writer makes this commit fail, never overwrite.
    await store.commit(key, {
      owner,
      expectedVersion: record.version,
      value: {
        ...state,
        tables: {
          ...state.tables,
          [target]: { ...entry, schemaHash: after.hash, schemaVersion: after.version },
        },
      } as unknown as Record<string, unknown>,
    });
    return { before, after, changed: true, stop };
  } finally {
    await store.release(key, owner);
  }
}

function nothingToAccept(opts: AcceptCdcSchemaOptions): TidemarkError {
  return new TidemarkError(
    'SCHEMA_ACCEPT_NOTHING',
    `${opts.target}: the CDC state of source ${opts.sourceName} (${opts.key}) has no entry for the table, so there is no recorded schema to replace; start its capture once first (tidemark cdc), which records the schema itself`,
  );
}
