/**
 * What `tidemark status` reports for one CDC source, read from its `cdc#<pipeline>#<source>`
 * state item (shared/engine/cdc/state.ts) and its writer's objects in the lake: where the stream
 * resumes, when it last committed, who holds the source's lease and so whether anyone captures
 * now (`active`) or nobody does (`idle`), the recent gaps and destructive DDL of the stream, its
 * last failure while no commit came after it (a failed start included: ./failure.ts), and
 * per table of the spec its `next`, rows, objects, last flush and lag, schema version, whether it
 * is stopped (with the event that stopped it, when the log still has one), and this writer's
 * objects of it in the lake. A spec table the state has no entry for is `captured: false`.
 *
 * A standby (a second process waiting for the lease) writes nothing to the state, so status
 * cannot see it: `active` says only that a live holder captures.
 *
 * Owns reading and interpreting. Never writes the state or the lake, and never judges a lease
 * holder's liveness itself: the caller passes it (shared/state/lease-owner.ts for the CLI).
 */
import type { Sink } from '../../contracts/sink.js';
import type { CursorStore } from '../../contracts/state.js';
import type { HolderLiveness } from '../../state/lease-owner.js';
import { type LeaseStatus, leaseStatus } from '../incremental/status.js';
import { type CdcFailure, cdcFailureKey, failureIsCurrent, parseCdcFailure } from './failure.js';
import { type CdcStreamEvent, type CdcTableState, cdcStateKey, parseCdcState } from './state.js';

export interface CdcTableStatus {
  /** Lake table name. */
  readonly table: string;
  /** `schema.table` at the source. */
  readonly source: string;
  /** False while the source's state has no entry for the table (never captured). */
  readonly captured: boolean;
  /** The first `__pos` not yet durable; null before the table's first flush. */
  readonly next: string | null;
  /** Rows committed and objects written over the table's life (as the state counts them). */
  readonly rows: number;
  readonly objects: number;
  readonly lastFlushAt: string | null;
  readonly sinceLastFlushSeconds: number | null;
  /** Source commit -> durable lag of the last flushed row. */
  readonly lagMs: number | null;
  readonly schemaVersion: number | null;
  readonly schemaHash: string | null;
  /**
   * A stopped table (its changes are dropped until it is re-snapshotted), with the newest logged
   * event of the table (or of the whole source, a gap) at or before it stopped; null when none.
   */
  readonly stopped: {
    readonly at: string;
    readonly reason: string;
    readonly event: CdcStreamEvent | null;
  } | null;
  /** This writer's objects of the table in the lake (other writers' are not counted). */
  readonly lake: { readonly objects: number; readonly bytes: number };
  /**
   * The table's snapshot (docs/decisions/0013-snapshots.md): state, chunk rows written, chunks,
   * key ranges still pending; null for a table captured without one.
   */
  readonly snapshot: {
    readonly state: string;
    readonly rows: number;
    readonly chunks: number;
    readonly pendingRanges: number;
    readonly divided: boolean;
    readonly retries: number;
    readonly startedAt: string | null;
    readonly completedAt: string | null;
  } | null;
}

export interface CdcSourceStatus {
  readonly pipeline: string;
  /** Name under `sources`. */
  readonly source: string;
  readonly mode: 'cdc';
  /** The state item's key. */
  readonly key: string;
  /** `<pipeline>.<source>`: whose objects `lake` counts. */
  readonly writer: string;
  /** `active`: a live lease holder captures; `idle`: no live lease, nobody captures. */
  readonly state: 'active' | 'idle';
  /** Where the stream resumes, as people read it; null before a position was committed. */
  readonly position: string | null;
  readonly positionScheme: string | null;
  readonly lastCommitAt: string | null;
  readonly sinceLastCommitSeconds: number | null;
  readonly lease: LeaseStatus;
  /** The state's event log (gaps, truncates, destructive DDL, stopping schema changes), newest last. */
  readonly events: readonly CdcStreamEvent[];
  /**
   * The source's last failure (a failed start included: ./failure.ts), while nothing was
   * committed after it; null when none is recorded or a later start committed.
   */
  readonly lastFailure: CdcFailure | null;
  readonly tables: readonly CdcTableStatus[];
}

export interface CdcStatusOptions {
  readonly pipeline: string;
  /** The source's name under `sources`. */
  readonly source: string;
  /** The spec's cdc tables of this source. */
  readonly tables: readonly { readonly source: string; readonly target: string }[];
  readonly writer: string;
  readonly store: CursorStore;
  readonly sink: Sink;
  readonly now: number;
  readonly liveness: (owner: string) => HolderLiveness;
}

/** Reads one CDC source's status; a state that does not parse throws STATE_CORRUPT. */
export async function cdcStatus(opts: CdcStatusOptions): Promise<CdcSourceStatus> {
  const { now } = opts;
  const key = cdcStateKey(opts.pipeline, opts.source);
  const record = await opts.store.load(key);
  const state = parseCdcState(record.value);
  const failure = parseCdcFailure((await opts.store.load(cdcFailureKey(opts.pipeline, opts.source))).value);
  const events = state.events ?? [];
  const seconds = (iso: string | undefined) =>
    iso === undefined || Number.isNaN(Date.parse(iso)) ? null : Math.round((now - Date.parse(iso)) / 1000);
  const tables: CdcTableStatus[] = [];
  for (const t of opts.tables) {
    const objects = await opts.sink.list(t.target, opts.writer);
    const lake = { objects: objects.length, bytes: objects.reduce((n, o) => n + o.bytes, 0) };
    const entry: CdcTableState | undefined = state.tables[t.target];
    tables.push({
      table: t.target,
      source: t.source,
      captured: entry !== undefined,
      next: entry?.next ?? null,
      rows: entry?.rows ?? 0,
      objects: entry?.objects ?? 0,
      lastFlushAt: entry?.lastFlushAt ?? null,
      sinceLastFlushSeconds: seconds(entry?.lastFlushAt),
      lagMs: entry?.lagMs ?? null,
      schemaVersion: entry?.schemaVersion ?? null,
      schemaHash: entry?.schemaHash ?? null,
      stopped: entry?.stopped
        ? { ...entry.stopped, event: stoppingEvent(events, t.target, entry.stopped.at) }
        : null,
      lake,
      snapshot: entry?.snapshot
        ? {
            state: entry.snapshot.state,
            rows: entry.snapshot.rows,
            chunks: entry.snapshot.chunks,
            pendingRanges: entry.snapshot.pending?.length ?? 0,
            divided: entry.snapshot.state === 'complete' || entry.snapshot.rest === null,
            retries: entry.snapshot.retries ?? 0,
            startedAt: entry.snapshot.startedAt ?? null,
            completedAt: entry.snapshot.completedAt ?? null,
          }
        : null,
    });
  }
  const lease = leaseStatus(record.lease, now, opts.liveness);
  return {
    pipeline: opts.pipeline,
    source: opts.source,
    mode: 'cdc',
    key,
    writer: opts.writer,
    state: lease.held && lease.alive !== false ? 'active' : 'idle',
    position: state.position ? (state.position.display ?? state.position.value) : null,
    positionScheme: state.position?.scheme ?? null,
    lastCommitAt: state.lastCommitAt ?? null,
    sinceLastCommitSeconds: seconds(state.lastCommitAt),
    lease,
    events,
    lastFailure: failure && failureIsCurrent(failure, state.lastCommitAt) ? failure : null,
    tables,
  };
}

/**
 * The event that stopped `target`: the newest logged event of the table at or before `at`, else
 * the newest source-wide one (a gap: `table` is '') at or before it; null when the log has none.
 */
function stoppingEvent(events: readonly CdcStreamEvent[], target: string, at: string): CdcStreamEvent | null {
  const stoppedAt = Date.parse(at);
  const before = events.filter((e) => Number.isNaN(stoppedAt) || Date.parse(e.at) <= stoppedAt);
  const own = before.filter((e) => e.table === target).at(-1);
  return own ?? before.filter((e) => e.table === '').at(-1) ?? null;
}
