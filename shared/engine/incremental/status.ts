/**
 * What `tidemark status` reports for one incremental table, read from its state item and its
 * writer's objects in the lake: the last run and the last error (as runs' final commits recorded
 * them), the lease and who holds it, the cursor as people read it, row versions written against
 * this writer's objects in the lake, and freshness (how old the newest synced cursor value is)
 * apart from when the cursor last moved and when the last run ended, so an idle table (recent
 * run, old data) and a broken schedule (old run) look different.
 *
 * Owns reading and interpreting. Never writes the state or the lake, and never judges a lease
 * holder's liveness itself: the caller passes it (shared/state/lease-owner.ts for the CLI).
 */
import type { Sink } from '../../contracts/sink.js';
import type { CursorStore } from '../../contracts/state.js';
import { type HolderLiveness, holderName, parseLeaseOwner } from '../../state/lease-owner.js';
import { incrementalStateKey, type LastRun, parseIncrementalState, type RecordedError } from './state.js';

/** The lease as status shows it; times are ISO, spans whole seconds. */
export interface LeaseStatus {
  readonly held: boolean;
  /** The owner id of a live lease (null when free). */
  readonly owner: string | null;
  /** `host:pid`, `Lambda request <id>`, or the owner id. */
  readonly holder: string | null;
  readonly kind: 'local' | 'lambda' | 'other' | null;
  /** Whether the holder still runs; null when this host cannot tell (a Lambda, another host). */
  readonly alive: boolean | null;
  readonly expiresAt: string | null;
  readonly expiresInSeconds: number | null;
}

export interface TableStatus {
  readonly pipeline: string;
  /** Lake table name. */
  readonly table: string;
  /** `schema.table` at the source. */
  readonly source: string;
  /** `<pipeline>.<source>`: whose objects `lake` counts. */
  readonly writer: string;
  /** False before the table's first run (no state). */
  readonly synced: boolean;
  /** The cursor as people read it (`updated_at=..., id=...`); null = the next run starts from the beginning. */
  readonly cursor: string | null;
  readonly cursorColumn: string;
  /** The commit step the next object is named after. */
  readonly nextPage: number;
  readonly rowVersionsWritten: number;
  /** This writer's objects in the lake table (other writers' are not counted). */
  readonly lake: { readonly objects: number; readonly bytes: number };
  readonly lastRun: LastRun | null;
  readonly sinceLastRunSeconds: number | null;
  readonly lastError: (RecordedError & { readonly at: string }) | null;
  /** When the cursor last moved. */
  readonly lastCommitAt: string | null;
  readonly sinceLastCommitSeconds: number | null;
  /** Age of the newest synced cursor value (timestamp cursors only). */
  readonly freshness: { readonly newestCursorAt: string; readonly ageSeconds: number } | null;
  readonly lease: LeaseStatus;
  /** The schema the table writes (docs/schema-changes.md); null before one was recorded. */
  readonly schema: { readonly version: number; readonly hash: string; readonly columns: number } | null;
}

export interface StatusOptions {
  readonly pipeline: string;
  readonly table: { readonly source: string; readonly target: string; readonly cursor: string };
  readonly writer: string;
  readonly store: CursorStore;
  readonly sink: Sink;
  readonly now: number;
  readonly liveness: (owner: string) => HolderLiveness;
}

/** Reads one table's status; a state that does not parse throws STATE_CORRUPT. */
export async function incrementalStatus(opts: StatusOptions): Promise<TableStatus> {
  const { table, now } = opts;
  const record = await opts.store.load(incrementalStateKey(opts.pipeline, table.target));
  const objects = await opts.sink.list(table.target, opts.writer);
  const state = record.value === undefined ? undefined : parseIncrementalState(record.value, table.cursor);
  const seconds = (iso: string | undefined) =>
    iso === undefined || Number.isNaN(Date.parse(iso)) ? null : Math.round((now - Date.parse(iso)) / 1000);
  return {
    pipeline: opts.pipeline,
    table: table.target,
    source: table.source,
    writer: opts.writer,
    synced: state !== undefined,
    cursor: state && state.cursor !== '' ? (state.cursorText ?? state.cursor) : null,
    cursorColumn: state?.cursorColumn ?? table.cursor,
    nextPage: state?.seq ?? 0,
    rowVersionsWritten: state?.rowsTotal ?? 0,
    lake: { objects: objects.length, bytes: objects.reduce((n, o) => n + o.bytes, 0) },
    lastRun: state?.lastRun ?? null,
    sinceLastRunSeconds: seconds(state?.lastRun?.finishedAt),
    lastError: state?.lastError ?? null,
    lastCommitAt: state?.lastCommitAt ?? null,
    sinceLastCommitSeconds: seconds(state?.lastCommitAt),
    freshness:
      state?.newestCursorMs === undefined || state.cursor === ''
        ? null
        : {
            newestCursorAt: new Date(state.newestCursorMs).toISOString(),
            ageSeconds: Math.round((now - state.newestCursorMs) / 1000),
          },
    lease: leaseStatus(record.lease, now, opts.liveness),
    schema: state?.schema
      ? { version: state.schema.version, hash: state.schema.hash, columns: state.schema.columns.length }
      : null,
  };
}

/** A stored lease as status shows it (free once expired); liveness is the caller's judgement. */
export function leaseStatus(
  lease: { owner: string; expiresAt: number } | undefined,
  now: number,
  liveness: (owner: string) => HolderLiveness,
): LeaseStatus {
  if (lease === undefined || lease.expiresAt <= now) {
    return {
      held: false,
      owner: null,
      holder: null,
      kind: null,
      alive: null,
      expiresAt: null,
      expiresInSeconds: null,
    };
  }
  const holder = parseLeaseOwner(lease.owner);
  const alive = liveness(lease.owner);
  return {
    held: true,
    owner: lease.owner,
    holder: holderName(holder),
    kind: holder.kind,
    alive: alive === 'unknown' ? null : alive === 'alive',
    expiresAt: new Date(lease.expiresAt).toISOString(),
    expiresInSeconds: Math.round((lease.expiresAt - now) / 1000),
  };
}
