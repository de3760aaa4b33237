/**
 * `tidemark schema accept` for an incremental table: the operator's word that the table's
 * current schema is the one it writes from now on, after a change the rules stop on
 * (docs/schema-changes.md). Records it as the next schema version in the table's state, under
 * the table's lease; the cursor, `seq` and the lake stay as they are, so the next run continues
 * where the last one stopped and writes new objects with the new schema.
 *
 * `describeSchemaChange` is the read-only half: what changed and what the rules say, with no
 * lease and no write (`tidemark status` and the accept command's output use it).
 */
import { TidemarkError } from '../../contracts/errors.js';
import type { Introspector, TableSpec } from '../../contracts/source.js';
import type { CursorStore } from '../../contracts/state.js';
import {
  compareSchemas,
  type SchemaChange,
  type SchemaVerdict,
  type StoredSchema,
  schemaVerdict,
  storedSchema,
  type WidenPolicy,
} from '../../dataplane/schema-rules.js';
import { takeLease } from '../lease.js';
import { parseIncrementalState } from './state.js';

export interface AcceptSchemaOptions {
  readonly key: string;
  /** The lake table, for messages. */
  readonly target: string;
  readonly table: TableSpec;
  readonly cursorColumn: string;
  readonly onWiden: WidenPolicy;
  readonly source: Introspector;
  readonly store: CursorStore;
  readonly owner: string;
  /** Whether a lease holder is provably dead (see IncrementalRunOptions.isHolderDead). */
  readonly isHolderDead?: (owner: string) => boolean;
}

export interface AcceptSchemaResult {
  /** The schema the table wrote until now (undefined: none was recorded yet). */
  readonly before: StoredSchema | undefined;
  /** The schema recorded now (equal to `before` when nothing changed). */
  readonly after: StoredSchema;
  readonly changes: readonly SchemaChange[];
  /** What the rules would have done without the accept. */
  readonly verdict: SchemaVerdict['action'];
}

/** Records the table's current schema as the one it writes, as the module comment says. */
export async function acceptSchema(opts: AcceptSchemaOptions): Promise<AcceptSchemaResult> {
  const { key, store, owner } = opts;
  const { record } = await takeLease(store, key, owner, 60_000, opts.isHolderDead);
  try {
    if (record.value === undefined) {
      throw new TidemarkError(
        'SCHEMA_ACCEPT_NOTHING',
        `${opts.target}: the table has no state yet, so there is no recorded schema to replace; run it once first (tidemark run --table ${opts.target})`,
      );
    }
    const state = parseIncrementalState(record.value, opts.cursorColumn);
    const { schema } = await opts.source.introspect(opts.table);
    const before = state.schema;
    const changes = before ? compareSchemas(before, schema) : [];
    const verdict = schemaVerdict(changes, opts.onWiden).action;
    if (before && changes.length === 0) return { before, after: before, changes, verdict };
    const after = storedSchema(schema, (before?.version ?? 0) + 1);
    await store.commit(key, {
      owner,
      expectedVersion: record.version,
      value: { ...state, schema: after } as unknown as Record<string, unknown>,
    });
    return { before, after, changes, verdict };
  } finally {
    await store.release(key, owner);
  }
}
