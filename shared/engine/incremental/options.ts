/**
 * What an incremental run is given and what it reports (./run.ts `runIncremental`): the table and
 * its cursor, the source, store, sink and clock it works through, the lease's timings and the
 * deadline, the page limits, and the summary of a run.
 *
 * Types only: the composition root (shared/pipeline/run-table.ts) fills them from the spec, the
 * tests and benches by hand.
 */
import type { LakeFormat } from '../../contracts/lake-format.js';
import type { Sink } from '../../contracts/sink.js';
import type {
  BatchIncrementalSource,
  IncrementalSource,
  Introspector,
  NullCursorCounter,
  RowEstimator,
  WallClockZone,
  Warning,
} from '../../contracts/source.js';
import type { Clock, CursorStore } from '../../contracts/state.js';
import type { ConfiguredTableFormat } from '../../contracts/table-format.js';
import type { Batch, WriteMode } from '../../dataplane/batch.js';
import type { Schema } from '../../dataplane/schema.js';
import type { WidenPolicy } from '../../dataplane/schema-rules.js';
import type { Logger } from '../../observability/log.js';
import type { StopReason } from './state.js';

/** What the engine needs of a source for incremental runs. */
export type IncrementalCapableSource = Introspector &
  (IncrementalSource | BatchIncrementalSource) &
  Partial<NullCursorCounter> &
  Partial<RowEstimator> &
  Partial<IncrementalSource> &
  Partial<BatchIncrementalSource> &
  Partial<WallClockZone>;

/** Encodes a row-path page into a batch; given by the caller so the engine stays type-agnostic. */
export type RowEncoder = (
  schema: Schema,
  rows: Record<string, unknown>[],
  meta: { posPrefix: string; ordinalBase: number; writeMode: WriteMode; table: string },
) => Batch;

export interface IncrementalTable {
  /** `schema.table` at the source. */
  readonly source: string;
  /** Lake table name. */
  readonly target: string;
  readonly cursor: string;
  readonly writeMode: WriteMode;
  readonly pageSize: number;
  /** Pages also close by bytes (IncrementalPage.pageBytes); undefined: by rows only. */
  readonly pageBytes?: number;
  /** A larger row fails the run (IncrementalPage.maxRowBytes); undefined: no cap. */
  readonly maxRowBytes?: number;
  readonly nullCursor: 'refuse' | 'skip';
  readonly exclude: readonly string[];
  /** What a widened column does (docs/schema-changes.md); default stop. */
  readonly onWiden?: WidenPolicy;
}

export interface IncrementalRunOptions {
  readonly pipeline: string;
  /**
   * Who writes this table's objects, `<pipeline>.<source>` (shared/sink/layout.ts `writerId`):
   * part of every object name, and the only objects recovery considers.
   */
  readonly writer: string;
  readonly table: IncrementalTable;
  /**
   * The spec's `lake.format`: the format a table with no state yet is written in (default 1). A
   * table with state keeps the format it records (docs/lake-format.md).
   */
  readonly lakeFormat?: LakeFormat;
  /** The table format of a table synced for the first time (the spec's `lake.tableFormat`); default plain. */
  readonly tableFormat?: ConfiguredTableFormat;
  readonly source: IncrementalCapableSource;
  readonly store: CursorStore;
  readonly sink: Sink;
  readonly logger: Logger;
  readonly clock: Clock;
  /** Who runs: shared/state/lease-owner.ts `localOwner()` or `lambdaOwner(requestId)`. */
  readonly owner: string;
  /**
   * Whether a lease holder is provably dead (a local process that is gone): then its lease is
   * taken over at once instead of after its TTL. Local runs only; a Lambda passes nothing.
   */
  readonly isHolderDead?: (owner: string) => boolean;
  /** Lease TTL; must exceed the longest run (Lambda max 15 min). */
  readonly leaseTtlMs: number;
  /**
   * With a deadline (`remainingMs`), the lease expires this long after the deadline instead of
   * after `leaseTtlMs`: a Lambda cannot outlive its deadline, so a run killed by its timeout
   * blocks the next schedule for only this long. Default 60 s.
   */
  readonly leaseGraceMs?: number;
  /** Time left before the caller's hard deadline (Lambda: context.getRemainingTimeInMillis). */
  readonly remainingMs?: () => number;
  /**
   * Stop starting pages when less than this is left (raised to the slowest page seen times the
   * pages that may still be committed after a stop: the one being written and those read ahead).
   */
  readonly safetyMarginMs?: number;
  /** Stop after this many pages (tests, the demo). */
  readonly maxPages?: number;
  /**
   * A page read that takes longer fails the run (`PAGE_TIMEOUT`) instead of waiting forever on
   * a stalled connection: the read's signal is aborted, so the source drops that connection
   * (and stops its statement at the server); nothing is committed past the last durable page.
   * Default 10 min.
   */
  readonly pageTimeoutMs?: number;
  /** Encoder for sources that only implement the row path. */
  readonly encodeRows?: RowEncoder;
  /** Show a TTY progress line. */
  readonly progressTty?: boolean;
  /**
   * Aborting it (Ctrl-C, SIGTERM) stops the run: no further page starts, the read in flight is
   * aborted (the source drops its connection) and abandoned, a page already being written still
   * commits; the run records `interrupted` and releases its lease.
   */
  readonly signal?: AbortSignal;
}

export interface IncrementalSummary {
  readonly pipeline: string;
  readonly table: string;
  readonly status: 'ok' | 'lease-held';
  readonly rows: number;
  readonly pages: number;
  readonly bytes: number;
  readonly objects: number;
  readonly cursorBefore: string;
  readonly cursorAfter: string;
  readonly seqBefore: number;
  readonly seqAfter: number;
  /** A backlog remains (deadline or maxPages reached before catching up). */
  readonly more: boolean;
  /** Why the run stopped reading (`ok` runs). */
  readonly stopped?: StopReason;
  /** Objects removed by recovery (left by a crashed attempt). */
  readonly recovered: number;
  readonly durationMs: number;
  readonly warnings: readonly Warning[];
  /** `lease-held`: who holds the lease, and until when (epoch ms). */
  readonly leaseHolder?: { readonly owner: string; readonly expiresAt: number | undefined };
  /** The dead holder whose lease this run took over. */
  readonly tookOverFrom?: string;
}
