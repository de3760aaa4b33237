/**
 * The change-stream contracts: what a log-based reader (Postgres pgoutput, MySQL binlog, the
 * test-only scripted source) offers the CDC engine (docs/contracts.md, docs/decisions/0009).
 *
 * The seam keeps the seeds' `Reader` shape (`start`, `next`, `close`, `setConfirmed`), with
 * `next` yielding EVENTS rather than only batches, because a real log carries more than rows:
 * transaction commits (with the position to resume after them), progress without rows
 * (keepalives, heartbeats), destructive DDL, schema changes and gaps.
 *
 * Rows do not travel inside events: the reader appends each decoded row to the Arrow writer it
 * keeps per table (its `__pos` already stamped: commit position + ordinal per (transaction,
 * table)) and reports how many it appended; the engine cuts a table's pending rows into one
 * Batch when it flushes (`cut`). So 100k small transactions a second become a few large
 * RecordBatches, and memory is bounded by the engine's flush limits, not by transaction sizes.
 *
 * This module imports only the data plane types it carries.
 */
import type { Batch } from '../dataplane/batch.js';
import type { Schema } from '../dataplane/schema.js';
import type { SchemaChange } from '../dataplane/schema-rules.js';
import type { SnapshotOptions, SnapshotSource } from './snapshot.js';
import type { TableRef } from './source.js';
import type { SourcePosition } from './source-position.js';

export type { SourcePosition } from './source-position.js';

/** A TRUNCATE or other destructive DDL the stream carried (seed 000 `DestructiveDDL`). */
export interface DestructiveDDL {
  /** Driver kind, e.g. `postgres` or `mysql`. */
  readonly source: string;
  readonly kind: 'truncate' | 'ddl';
  /** Target table name when known, '' otherwise. */
  readonly table: string;
  /** Statement text or the affected-relation list. */
  readonly detail: string;
}

/** One thing the log said, in log order. */
export type CdcEvent =
  /** `count` rows were appended to `table`'s writer, within the open transaction. */
  | { readonly kind: 'rows'; readonly table: string; readonly count: number; readonly bytes: number }
  /** A transaction began; its rows follow, then its commit. */
  | { readonly kind: 'begin' }
  /**
   * The open transaction committed; after it the stream can resume from `position`.
   * `commitTimeMs`: the source's commit time (lag is measured from it), when known.
   */
  | {
      readonly kind: 'commit';
      readonly position: SourcePosition;
      readonly commitTimeMs?: number;
      /**
       * The source's transaction id (Postgres: the 32-bit xid, decimal), where the log carries
       * one: a snapshot window checks it against the chunk's invisible transactions
       * (shared/contracts/snapshot.ts `ChunkRows.invisible`).
       */
      readonly txid?: string;
    }
  /**
   * Progress without rows (keepalive, heartbeat): every transaction before `position` has been
   * delivered, so with nothing pending the stream could resume here. Only between transactions.
   */
  | { readonly kind: 'progress'; readonly position: SourcePosition }
  /** TRUNCATE or destructive DDL on a captured table (seed 000 `Runtime.onDestructiveDDL`). */
  | { readonly kind: 'ddl'; readonly ddl: DestructiveDDL }
  /**
   * A captured table's columns changed in the stream (a new Relation message, a new TableMap):
   * `schema` is the new canonical schema, `changes` what the rules compare
   * (shared/dataplane/schema-rules.ts). Rows after this event are written in `schema`; the
   * table's rows still pending when it is delivered are in the old one, so the engine cuts them
   * (or drops them, when the change stops the table) before it asks for the next event.
   */
  | {
      readonly kind: 'schema';
      readonly table: string;
      readonly schema: Schema;
      readonly changes: readonly SchemaChange[];
    }
  /**
   * A snapshot watermark the engine registered (`Reader.expectWatermark`) was reached, between
   * transactions: every change before it has been delivered, none after it. `rowsPos` is the
   * `__pos` prefix (without the 8-hex ordinal) of a chunk's rows placed here: it sorts strictly
   * after every change delivered before the watermark and strictly before every change after it
   * (Postgres: `p` + (message LSN - 1); MariaDB: `m` + epoch + file + (snapshot position - 1)).
   */
  | { readonly kind: 'watermark'; readonly id: string; readonly rowsPos: string }
  /**
   * The source cannot deliver changes from where it was asked to resume (slot invalidated,
   * binlog purged, server switched without GTIDs): changes between `from` and `to` are lost.
   */
  | {
      readonly kind: 'gap';
      readonly reason: string;
      readonly from: SourcePosition | undefined;
      readonly to: SourcePosition | undefined;
    };

export type CdcEventKind = CdcEvent['kind'];

/** What the engine knows of a table's not-yet-flushed rows in the reader. */
export interface PendingRows {
  readonly rows: number;
  /** Arrow data bytes of the pending rows (BatchEncoder.dataBytes). */
  readonly bytes: number;
}

/** Where to start: the committed resume point and, per table, the first `__pos` not yet durable. */
export interface StartFrom {
  /**
   * The committed resume point. Always a position the state holds: a first start takes it from
   * `Reader.initialPosition` and commits it before it calls `start`.
   */
  readonly position: SourcePosition;
  /**
   * Per target table, the first `__pos` NOT yet durable: on replay the reader drops rows of that
   * table whose `__pos` is below it (they are already in the lake). Tables not listed keep all.
   */
  readonly next: ReadonlyMap<string, string>;
}

/**
 * The replication reader surface the CDC engine drives (seed 000 `Reader`). One reader per
 * source; the tables it captures are fixed at `open`.
 */
export interface Reader {
  /**
   * The scheme letter every `__pos` of this reader starts with (shared/position: `p` Postgres,
   * `m` MySQL): recovery of a table that never committed judges only objects of this scheme, so
   * the same writer's incremental objects (`i`/`j`, kept after a mode change) are never touched.
   */
  readonly positionScheme: string;
  /**
   * Where a capture that has no committed position begins (Postgres: the slot's position,
   * creating the slot; MySQL/MariaDB: the binlog end, file:pos with its GTID position). Reads
   * nothing of the log. The engine commits the answer to the state BEFORE it calls `start`, so
   * a process killed at any point after it resumes from there: a MySQL server keeps no replica
   * position of ours, and "the current end" at the next start would skip every change between.
   */
  initialPosition(signal?: AbortSignal): Promise<SourcePosition>;
  /**
   * True when the source keeps this reader's position itself (a Postgres slot: nothing past the
   * acknowledged position is discarded), so `initialPosition` asked again after a start that
   * committed none still finds every change since. False for a MySQL/MariaDB binlog, whose
   * `initialPosition` is the current end.
   */
  readonly keepsPosition: boolean;
  /** Begins replication from `from`. Called once before the first `next`. */
  start(from: StartFrom, signal?: AbortSignal): Promise<void>;
  /**
   * The next event, waiting at most `waitMs` for one; undefined when none arrived in time (the
   * engine then checks its timers) or at a clean end of a finite stream (`ended` says which).
   */
  next(waitMs: number, signal?: AbortSignal): Promise<CdcEvent | undefined>;
  /** True once a finite stream (the scripted source, a test) has delivered everything. */
  readonly ended: boolean;
  /** The pending rows of `table` in the reader's writer. */
  pending(table: string): PendingRows;
  /**
   * Optional: makes the pending rows of `tables` ready to `cut` (Postgres: reads back by key the
   * values of unchanged TOASTed columns the log did not carry). The engine awaits it before it
   * cuts those tables.
   */
  settle?(tables: readonly string[], signal?: AbortSignal): Promise<void>;
  /**
   * Takes `table`'s pending rows as one Batch (its watermark the last row's `__pos`), leaving
   * the table's writer empty; undefined when nothing is pending. May cut inside a transaction.
   */
  cut(table: string): Batch | undefined;
  /**
   * The position the engine has made durable: everything the source delivered before it may be
   * discarded (Postgres: confirmed_flush_lsn in the next standby status). Never called with a
   * position past what is committed to state.
   */
  setConfirmed(position: SourcePosition): Promise<void>;
  /** Stops replication and closes the connection (idempotent). */
  close(): Promise<void>;
  /**
   * Snapshot readers: report a `watermark` event with `id` when the stream reaches it (seed 000
   * `SourceReader.OpenWindow`, reshaped: the engine, not the reader, keeps the window). Without
   * `at` the id is matched in the stream (Postgres: a `tidemark.watermark` logical message whose
   * content is the id; the engine registers it before the driver emits it); with `at` the
   * watermark is reported once the stream has delivered everything before `at` (MariaDB: the
   * consistent snapshot's binlog position), at once when it already has.
   */
  expectWatermark?(id: string, at?: SourcePosition): void;
}

/** Opens a reader over the given tables (seed 000 `Streamer`). */
export interface Streamer {
  openReader(tables: readonly CdcTable[], runtime: CdcRuntime): Promise<Reader>;
  /** Sources that can snapshot (DBLog windows): chunkers on their own query connections. */
  openSnapshot?(options: SnapshotOptions): Promise<SnapshotSource>;
}

/** One captured table as the reader needs it. */
export interface CdcTable {
  readonly ref: TableRef;
  readonly schema: Schema;
  readonly writeMode: 'append' | 'upsert';
  /**
   * Postgres: the table has no primary key and is append-only, captured through an insert-only
   * publication (its UPDATEs and DELETEs are not captured).
   */
  readonly insertOnly?: boolean;
  /**
   * Postgres, a table without REPLICA IDENTITY FULL: what to do with an UPDATE whose TOASTed
   * column did not change (the log carries no value): `reread` it by key at the flush
   * (default), or `fail`.
   */
  readonly unchangedToast?: 'reread' | 'fail';
}

/** Where a reader logs and sends metrics (the engine's logger fits). */
export interface ReaderLog {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  metric(
    name: string,
    value: number,
    unit: 'Count' | 'Bytes' | 'Seconds',
    dims: Record<string, string>,
  ): void;
}

/** Replication knobs passed through to the reader (seed 000 `Runtime`). */
export interface CdcRuntime {
  /** MySQL server id of the replica connection. */
  readonly serverId?: number;
  /** How often the reader makes progress visible on an idle log (heartbeats). */
  readonly heartbeatMs: number;
  /** Postgres slot and publication names. */
  readonly slot?: string;
  readonly publication?: string;
  /** Where the reader logs (slot health, retries); the engine passes its own logger. */
  readonly log?: ReaderLog;
  /** Metric dimensions of the source (`pipeline`, `source`). */
  readonly dims?: Readonly<Record<string, string>>;
}
