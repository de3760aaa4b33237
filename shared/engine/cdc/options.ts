/**
 * What a CDC run is given and what it reports (./run.ts `runCdc`): the tables of one source and
 * how each is captured, the flush limits, the lease's timings, the named points of the commit
 * protocol that fault-injection tests hook, and the summary of a run. Plus `Captured`, the one
 * record per captured table that the run's parts share (built at start by ./recovery.ts, kept
 * current by the event loop, written by ./flush.ts).
 *
 * Types only: the composition root (shared/pipeline/cdc-runner.ts) fills them from the spec
 * (`cdcSettings`), the tests and benches by hand.
 */
import type { CdcRuntime, SourcePosition, Streamer } from '../../contracts/cdc.js';
import type { LakeFormat } from '../../contracts/lake-format.js';
import type { Sink } from '../../contracts/sink.js';
import type { Introspector, TableRef } from '../../contracts/source.js';
import type { Clock, CursorStore } from '../../contracts/state.js';
import type { ConfiguredTableFormat, TableFormat } from '../../contracts/table-format.js';
import type { WriteMode } from '../../dataplane/batch.js';
import type { Schema } from '../../dataplane/schema.js';
import type { StoredSchema, WidenPolicy } from '../../dataplane/schema-rules.js';
import type { Logger } from '../../observability/log.js';
import type { SnapshotSettings } from './snapshot.js';

export interface CdcTableConfig {
  /** `schema.table` at the source. */
  readonly source: string;
  /** Lake table name. */
  readonly target: string;
  readonly writeMode: WriteMode;
  readonly exclude: readonly string[];
  readonly onWiden: WidenPolicy;
  readonly onTruncate: 'record' | 'fail';
  /** Postgres: see CdcTable.insertOnly. */
  readonly insertOnly?: boolean;
  /** Postgres: see CdcTable.unchangedToast. */
  readonly unchangedToast?: 'reread' | 'fail';
  /**
   * `initial`: a table the state does not know yet is snapshotted (its existing rows loaded by
   * DBLog windows, ./snapshot.ts) while the stream runs; `never` (default here): not.
   */
  readonly snapshot?: 'initial' | 'never';
}

/** When a table's pending rows are flushed. */
export interface FlushLimits {
  readonly rows: number;
  readonly bytes: number;
  /** Age of the oldest pending row. */
  readonly ms: number;
  /** A table whose oldest pending row is this old is flushed whatever its size. */
  readonly maxAckLagMs: number;
  /** With nothing pending, a newer heartbeat position is committed at least this often. */
  readonly idleCommitMs: number;
}

/** Named points of the commit protocol, for fault-injection tests (`faults`). */
export type CdcPoint =
  | 'before-write'
  | 'after-write'
  | 'after-commit'
  /** An Iceberg table's catalog commit applied (after the state commit), the ack not yet made. */
  | 'after-apply'
  | 'after-ack'
  | 'renewal'
  /** A chunk's high watermark arrived; its rows are held next, for its table's next flush. */
  | 'chunk-landed';

export interface CdcRunOptions {
  readonly pipeline: string;
  /** The source's name in the spec (the state key and the writer's second half). */
  readonly sourceName: string;
  /** `<pipeline>.<source>` (shared/sink/layout.ts `writerId`). */
  readonly writer: string;
  readonly tables: readonly CdcTableConfig[];
  /**
   * The spec's `lake.format`: the format a table new to the capture is written in (default 1). A
   * table with an entry keeps the format the entry records (docs/lake-format.md).
   */
  readonly lakeFormat?: LakeFormat;
  /** The table format of tables captured for the first time (the spec's `lake.tableFormat`); default plain. */
  readonly tableFormat?: ConfiguredTableFormat;
  readonly introspector: Introspector;
  readonly streamer: Streamer;
  readonly runtime: CdcRuntime;
  readonly store: CursorStore;
  readonly sink: Sink;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly owner: string;
  readonly limits: FlushLimits;
  readonly leaseTtlMs: number;
  /** Renew the lease this often (default a third of the TTL). */
  readonly renewEveryMs?: number;
  /** Margin before the lease's expiry by which a writer that cannot renew has stopped (default 5 s). */
  readonly skewMarginMs?: number;
  /** SIGTERM/SIGINT: stop reading, flush, commit, ack, release, within this long. */
  readonly stopTimeoutMs: number;
  /** Aborting it stops the run as `stopTimeoutMs` says. */
  readonly signal?: AbortSignal;
  /** Wait as a standby while another process holds the lease (default true). */
  readonly standby?: boolean;
  /**
   * Whether a lease holder is provably dead (a local process that is gone): its lease is then
   * taken over at once instead of after its TTL. Local runs only; a Fargate task passes nothing.
   */
  readonly isHolderDead?: (owner: string) => boolean;
  /** Called at each named point of the protocol (tests record and crash there). */
  readonly faults?: (point: CdcPoint) => void | Promise<void>;
  /**
   * Told when this process becomes a standby (it first finds the lease held by another) and when
   * it is active (it holds the lease); health endpoints and status lines say so.
   */
  readonly onState?: (state: 'standby' | 'active') => void;
  /** Sleeps `ms` (injected by tests that drive time); default setTimeout. */
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** How snapshots run (chunk size, connections, rate); needed when a table snapshots. */
  readonly snapshot?: SnapshotSettings;
}

export interface CdcSummary {
  readonly pipeline: string;
  readonly source: string;
  /** Why the run ended. */
  readonly stopped: 'ended' | 'interrupted';
  readonly rows: number;
  readonly flushes: number;
  readonly objects: number;
  readonly position: SourcePosition | undefined;
  /** How long this process waited as a standby before it took the lease. */
  readonly standbyMs: number;
}

/** Everything about one captured table the loop needs. */
export interface Captured {
  readonly config: CdcTableConfig;
  readonly ref: TableRef;
  /** The lake schema: non-key columns nullable (a DELETE may carry only the key). */
  schema: Schema;
  recorded: StoredSchema;
  /** The lake format the table writes (its entry's, or the spec's for a new table). */
  readonly format: LakeFormat;
  /** The table format (its entry's, or the spec's for a new table). */
  readonly tableFormat: TableFormat;
  /** Clock reading when the oldest pending row arrived; undefined when none is pending. */
  pendingSince: number | undefined;
  /** Source commit time of the newest row seen (lag is measured from it). */
  lastCommitTimeMs: number | undefined;
  stopped: boolean;
}
