/**
 * The snapshot contracts: what a relational source offers the snapshot orchestrator of the CDC
 * engine (shared/engine/cdc/snapshot.ts, docs/decisions/0013-snapshots.md) to load the rows a
 * captured table already has, by DBLog windows, without locks and without stopping the stream.
 *
 * The seeds' `ChunkSource` (Bounds/Scan) and `SourceReader` (OpenWindow/ClearWindow) are kept in
 * meaning, reshaped for a columnar, parallel, resumable load:
 *   - `nextBound` is Bounds one chunk at a time: the database divides the key space (only the
 *     database compares keys: text keys follow its collation, which JavaScript never imitates);
 *   - `read` is Scan of one chunk inside one window, into a wire-schema Batch (the incremental
 *     decoders, never a chunk of row objects), with the watermarks it set;
 *   - the window is driven from the chunk read through `ChunkWindow` (the engine registers each
 *     watermark with the reader BEFORE the driver emits it), and the reader reports a watermark
 *     in stream order as a `watermark` event (shared/contracts/cdc.ts).
 *
 * Keys travel as key-codec tokens (shared/position/key-codec.ts) of the primary-key columns:
 * JSON-safe and short, so pending ranges are stored in the state item as they are.
 *
 * This module imports only the data plane types it carries.
 */
import type { Batch } from '../dataplane/batch.js';
import type { Schema } from '../dataplane/schema.js';
import type { TableRef } from './source.js';
import type { SourcePosition } from './source-position.js';

/**
 * A primary-key range `(after, upTo]` in the database's key order: `after` exclusive, `upTo`
 * inclusive; undefined = unbounded on that side. Both are key-codec tokens of the key columns.
 */
export interface KeyRange {
  readonly after?: string;
  readonly upTo?: string;
}

/** One chunk to read. */
export interface ChunkRequest {
  readonly range: KeyRange;
  /** At most this many rows, in key order from `range.after`. */
  readonly limit: number;
  /** The table's wire schema as the engine resolved it (as for an incremental page). */
  readonly schema: Schema;
  readonly writeMode: Batch['writeMode'];
}

/** The rows a chunk read, before the engine places them in the stream. */
export interface ChunkRows {
  /**
   * The rows in key order, in the wire schema, `__snapshot` true, `__phase` 'snapshot', `__op`
   * insert; `__pos` is a placeholder the engine replaces (`withPositions`) once the high
   * watermark says where in the stream the chunk sits. Undefined when the range held no row.
   */
  readonly batch: Batch | undefined;
  readonly rows: number;
  /** Token of the last row's key; undefined when no row was read. */
  readonly lastKey: string | undefined;
  /**
   * Postgres: ids of transactions the chunk's snapshot cannot see although they may have
   * committed before it (`pg_current_snapshot()` xip, plus the transactions running at or above
   * its xmax, read after the low watermark: a snapshot's xmax is the newest COMPLETED xid + 1,
   * so a commit still waiting for a standby sits above it), as the stream's 32-bit xids in
   * decimal. A transaction the
   * stream committed BEFORE the low watermark that is still invisible to the chunk (commit
   * streamed, not yet visible: synchronous replication) makes the chunk stale: the engine
   * discards it and reads it again. Undefined on sources whose cut is exact (MariaDB).
   */
  readonly invisible?: readonly string[];
}

/** The watermarks of one chunk's window, as the driver reports them to the engine. */
export interface ChunkWindow {
  /**
   * Registers a watermark with the reader; the driver calls it BEFORE it makes the watermark
   * (Postgres: before `pg_logical_emit_message`), so the reader can never pass it unseen.
   * `at`: a position the reader reports the watermark at when its stream reaches it (MariaDB's
   * consistent-snapshot binlog position); without `at` the reader matches the id in the stream.
   */
  expect(id: string, role: 'low' | 'high', at?: SourcePosition): void;
  /**
   * The chunk's rows, handed over after they are read and BEFORE the high watermark is made,
   * so the engine holds them when the reader reports it.
   */
  ready(rows: ChunkRows): void;
}

/** Reads one table's chunks (seed 000 `ChunkSource`, one chunk at a time). */
export interface TableChunker {
  /**
   * The key `rows` rows past `after` in key order (the end of a chunk of about `rows` rows), or
   * undefined when fewer remain (the last chunk runs to the end of the table). Reads the
   * primary-key index only.
   */
  nextBound(after: string | undefined, rows: number, signal?: AbortSignal): Promise<string | undefined>;
  /**
   * Reads one chunk in one window: makes the low watermark (where the source needs one), reads
   * at most `limit` rows of `range` in one consistent snapshot, hands them to `window.ready`,
   * then makes the high watermark. `ids` are the watermark ids to use (unique per window).
   */
  read(
    req: ChunkRequest,
    window: ChunkWindow,
    ids: { readonly low: string; readonly high: string },
    signal?: AbortSignal,
  ): Promise<void>;
  /** The table's approximate row count from catalog statistics, for progress; undefined when unknown. */
  estimateRows?(): Promise<number | undefined>;
}

/** Opens chunkers over a source's tables on a bounded set of query connections. */
export interface SnapshotSource {
  /** How many chunks may be read at once (the connections opened). */
  readonly connections: number;
  chunker(table: TableRef, schema: Schema): TableChunker;
  close(): Promise<void>;
}

/** What opening a snapshot source needs. */
export interface SnapshotOptions {
  /** At most this many query connections (the per-source budget within the kind's maxConnections). */
  readonly connections: number;
  /** MySQL 8 / a source without an exact snapshot cut: `db.table` of the optional watermark table. */
  readonly watermarkTable?: string;
}
