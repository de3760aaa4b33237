/**
 * `tidemark reset` of one spec table: which reset applies, from the table's mode and its stored
 * state. The reset itself is the engine's (shared/engine/incremental/reset.ts); this module adds
 * the two ways out of a mode change (shared/pipeline/mode-change.ts):
 *   - the spec says `cdc` and the table has incremental state: the incremental state is reset and
 *     marked retired, so the mode check lets the cdc table start (its objects stay, or go with
 *     `--delete-objects`; CDC positions sort after incremental ones);
 *   - the spec says `incremental` and its source's CDC state lists it: under the source's CDC
 *     lease, this writer's objects of the table are deleted and its incremental state starts
 *     over, then the table's entry leaves the CDC state. Only with `--delete-objects`: kept CDC
 *     rows would sort after every incremental row and win over them forever.
 * Otherwise it is the incremental reset as before.
 */
import { type Spec, type TableSpecConfig, tableTarget } from '../config/spec.js';
import { ConfigError, TidemarkError } from '../contracts/errors.js';
import type { Sink } from '../contracts/sink.js';
import type { CursorStore } from '../contracts/state.js';
import { parseCdcState } from '../engine/cdc/state.js';
import { cdcStateKey, cdcStateTables, dropCdcTable } from '../engine/cdc/state-tables.js';
import {
  isRetiredIncrementalState,
  type ResetResult,
  resetIncremental,
} from '../engine/incremental/reset.js';
import { incrementalStateKey, parseIncrementalState } from '../engine/incremental/state.js';
import { writerId } from '../sink/layout.js';

export interface ResetTableOptions {
  readonly store: CursorStore;
  readonly sink: Sink;
  readonly owner: string;
  readonly isHolderDead?: (owner: string) => boolean;
  readonly objects?: 'keep' | 'delete';
  /** Epoch ms (the retired marker's time). */
  readonly now?: () => number;
}

export interface ResetTableResult extends ResetResult {
  /**
   * `incremental`: the cursor was reset; `retired`: the incremental state was reset and retired
   * (the spec says cdc); `left-cdc`: the table left its source's CDC state (the spec says
   * incremental) and its incremental state starts over.
   */
  readonly kind: 'incremental' | 'retired' | 'left-cdc';
}

export async function resetTable(
  spec: Spec,
  t: TableSpecConfig,
  opts: ResetTableOptions,
): Promise<ResetTableResult> {
  const target = tableTarget(t);
  const key = incrementalStateKey(spec.pipeline, target);
  const base = {
    key,
    lake: { table: target, writer: writerId(spec.pipeline, t.source) },
    store: opts.store,
    sink: opts.sink,
    owner: opts.owner,
    ...(opts.isHolderDead ? { isHolderDead: opts.isHolderDead } : {}),
    ...(opts.objects ? { objects: opts.objects } : {}),
  };
  if (t.mode === 'cdc') {
    const { value } = await opts.store.load(key);
    if (value === undefined || isRetiredIncrementalState(value)) {
      throw new ConfigError('--table', await cdcResetRefusal(spec, t, opts));
    }
    // The spec has no cursor for a cdc table: the reset state keeps the column it was taken on.
    const { cursorColumn } = parseIncrementalState(value, '');
    const now = opts.now ?? Date.now;
    const r = await resetIncremental({ ...base, cursorColumn, retiredAt: new Date(now()).toISOString() });
    return { ...r, kind: 'retired' };
  }
  const cdcKey = cdcStateKey(spec.pipeline, t.source);
  if (cdcStateTables(cdcKey, (await opts.store.load(cdcKey)).value).includes(target)) {
    if (opts.objects !== 'delete') {
      throw new TidemarkError(
        'RESET_NEEDS_CHOICE',
        `${target}: the CDC state of its source (${cdcKey}) lists this table, and the spec says mode: incremental; leaving CDC needs --delete-objects: this writer's objects of the table are deleted first (kept, their CDC positions would sort after every incremental row, so readers would keep the old rows)`,
      );
    }
    let r: ResetResult | undefined;
    const left = await dropCdcTable({
      store: opts.store,
      key: cdcKey,
      target,
      owner: opts.owner,
      ...(opts.isHolderDead ? { isHolderDead: opts.isHolderDead } : {}),
      first: async () => {
        r = await resetIncremental({ ...base, cursorColumn: t.cursor });
      },
    });
    if (left && r) return { ...r, kind: 'left-cdc' };
  }
  return { ...(await resetIncremental({ ...base, cursorColumn: t.cursor })), kind: 'incremental' };
}

/**
 * Why a cdc table is not reset, and what it holds: its entry in the source's CDC state and this
 * writer's objects of it in the lake (what a re-snapshot would replace), and the ways that exist
 * today. Reads only.
 */
async function cdcResetRefusal(spec: Spec, t: TableSpecConfig, opts: ResetTableOptions): Promise<string> {
  const target = tableTarget(t);
  const key = cdcStateKey(spec.pipeline, t.source);
  const writer = writerId(spec.pipeline, t.source);
  const state = parseCdcState((await opts.store.load(key)).value);
  const entry = state.tables[target];
  const objects = await opts.sink.list(target, writer);
  const mb = (objects.reduce((n, o) => n + o.bytes, 0) / 1e6).toFixed(1);
  const position = state.position ? (state.position.display ?? state.position.value) : undefined;
  const held =
    entry === undefined
      ? `${key} has no entry for it (never captured; its capture starts at ${position ? `the source's position ${position}` : 'the current log position'})`
      : `${key} holds its entry: ${entry.rows} row(s) in ${entry.objects} object(s) committed, next ${entry.next ?? '(no flush yet)'}${entry.lastFlushAt ? `, last flush ${entry.lastFlushAt}` : ''}${entry.stopped ? `, STOPPED since ${entry.stopped.at} (${entry.stopped.reason}): its changes are dropped` : ''}; the source resumes at ${position ?? '(no position committed yet)'}`;
  return [
    `${target} is a mode: cdc table without incremental state to retire; a cdc table is reset by re-snapshotting it, which arrives with on-demand re-snapshots (a later release; the initial snapshot of a new table exists: a new "target:" loads the table afresh), so nothing was changed.`,
    `What a reset would replace: ${held}; the lake holds ${objects.length} object(s) (${mb} MB) of writer ${writer} for it.`,
    'Until then: give the table a new "target:" (a new lake table, captured from the source\'s position on; the old one keeps its objects);',
    `or leave CDC: set the table to mode: incremental (with a cursor) and run "tidemark reset --table ${target} --delete-objects" (this writer's objects of it are deleted, its entry leaves ${key}, the next run syncs it from the start);`,
    `or leave it as it is: its capture resumes where ${key} says.`,
  ].join(' ');
}
