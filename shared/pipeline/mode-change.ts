/**
 * A table never changes mode in place. Its state lives under a key of its mode, incremental
 * `inc#<pipeline>#<target>`, CDC `cdc#<pipeline>#<source>` (one item per source, the table's entry
 * under `value.tables[<target>]`), and its lake positions come from one scheme (decision 0003:
 * `i...` for incremental, `p...` / `m...` for CDC); switching would resume from nothing and mix
 * the schemes in one lake table. So a table the spec declares `cdc` whose incremental state
 * exists, or one declared `incremental` that its source's CDC state lists, is refused, with the
 * ways out: a new `target:` (a new lake table), or `tidemark reset` of the old state.
 *
 * Called by every run (shared/pipeline/run-table.ts, before the engine), `tidemark check` (a fail
 * line per table), `tidemark validate` (a `state.dir` always: reading it has no side effects; a
 * DynamoDB state with `--state`) and `tidemark reset` (which is the way out). Reads only.
 */
import { type Spec, type TableSpecConfig, tableTarget } from '../config/spec.js';
import { TidemarkError } from '../contracts/errors.js';
import type { CursorStore } from '../contracts/state.js';
import { cdcStateKey, cdcStateTables } from '../engine/cdc/state-tables.js';
import { isRetiredIncrementalState } from '../engine/incremental/reset.js';
import { incrementalStateKey } from '../engine/incremental/state.js';

/** A table whose spec mode differs from the mode its stored state was written in. */
export class ModeChangedError extends TidemarkError {
  override name = 'ModeChangedError';
  constructor(
    /** The lake table. */
    readonly table: string,
    /** The mode its state was written in, and the one the spec declares. */
    readonly from: 'incremental' | 'cdc',
    readonly to: 'incremental' | 'cdc',
    /** The state item that holds the old mode's state. */
    readonly key: string,
    more: readonly string[] = [],
  ) {
    const also =
      more.length > 0 ? ` (${more.length} more table(s) changed mode too: ${more.join(', ')})` : '';
    super(
      'MODE_CHANGED',
      from === 'incremental'
        ? `${table}: the spec says mode: cdc, but the table has incremental state (${key}); a table never changes mode in place. Give it a new "target:" (a new lake table; the old one keeps its objects), or retire the incremental state with "tidemark reset -c SPEC --table ${table}" (its objects stay and the CDC rows sort after them; add --delete-objects to delete them first)${also}`
        : `${table}: the spec says mode: incremental, but the CDC state of its source (${key}) lists the table; a table never changes mode in place. Give it a new "target:" (a new lake table; the old one keeps its objects), or take it out of the CDC state with "tidemark reset -c SPEC --table ${table} --delete-objects" (its objects go too: CDC positions sort after incremental ones, so readers would keep the old CDC rows)${also}`,
    );
  }
}

/**
 * Every table of `tables` (default: all of the spec's) whose stored state is of the other mode.
 * One read per incremental state a cdc table could have, and one per source with incremental
 * tables. Store errors propagate.
 */
export async function findModeChanges(
  spec: Spec,
  store: Pick<CursorStore, 'load'>,
  tables: readonly TableSpecConfig[] = spec.tables,
): Promise<ModeChangedError[]> {
  const cdcListed = new Map<string, Promise<string[]>>();
  const listedBy = (source: string): Promise<string[]> => {
    let p = cdcListed.get(source);
    if (!p) {
      const key = cdcStateKey(spec.pipeline, source);
      p = store.load(key).then((r) => cdcStateTables(key, r.value));
      cdcListed.set(source, p);
    }
    return p;
  };
  const found: ModeChangedError[] = [];
  for (const t of tables) {
    const target = tableTarget(t);
    if (t.mode === 'cdc') {
      const key = incrementalStateKey(spec.pipeline, target);
      const { value } = await store.load(key);
      if (value !== undefined && !isRetiredIncrementalState(value))
        found.push(new ModeChangedError(target, 'incremental', 'cdc', key));
    } else if ((await listedBy(t.source)).includes(target)) {
      found.push(new ModeChangedError(target, 'cdc', 'incremental', cdcStateKey(spec.pipeline, t.source)));
    }
  }
  return found;
}

/** `findModeChanges` as an error: the first table, naming how many more there are. */
export async function assertModesUnchanged(
  spec: Spec,
  store: Pick<CursorStore, 'load'>,
  tables: readonly TableSpecConfig[] = spec.tables,
): Promise<void> {
  const [first, ...more] = await findModeChanges(spec, store, tables);
  if (first) {
    throw new ModeChangedError(
      first.table,
      first.from,
      first.to,
      first.key,
      more.map((e) => e.table),
    );
  }
}
