/**
 * The source contracts: what a database driver offers the engine (docs/contracts.md).
 *
 * These are the seams. This module imports nothing internal except the data plane types it
 * carries (`Batch`, `Schema`); drivers implement these interfaces and the engine consumes them,
 * so the engine never names postgres.js or mysql2. Capabilities are static registration data per
 * driver kind, readable without opening a connection.
 */
import type { Batch } from '../dataplane/batch.js';
import type { Schema } from '../dataplane/schema.js';
import type { Code } from './error-codes.js';

/** The synchronization modes a source can support. */
export type Mode = 'cdc' | 'incremental' | 'backfillOnly';

/** What a driver kind supports. Static per kind, not per instance. */
export interface Capabilities {
  /** Snapshot via the DBLog watermark algorithm. */
  readonly snapshot: boolean;
  /** Chunked SELECT introspection (ChunkSource). */
  readonly chunkQuery: boolean;
  /** Replication streaming (Reader). */
  readonly stream: boolean;
  /** Upper bound on concurrent query connections; 0 = no opinion. */
  readonly maxConnections: number;
  readonly modes: readonly Mode[];
  /** The source carries the deleted row image on a DELETE. */
  readonly beforeImage: boolean;
  /** The transport coordinate of a message never reappears. */
  readonly monotonicSequence: boolean;
  /** The position can be used to resume exactly where the stream left off. */
  readonly recoverablePosition: boolean;
}

/** Maps one source table to its target and primary key. */
export interface TableRef {
  /** Source table as `schema.table` (MySQL: `database.table`). */
  readonly source: string;
  /** Sink-side name, e.g. `public.orders`. */
  readonly target: string;
  /** Primary-key columns in key order (filled by Introspect). */
  readonly primaryKey: readonly string[];
}

/**
 * An opaque, ASCII, resumable source position. Within one table, positions sort
 * lexicographically in commit order (docs/decisions/0003-position-codec.md).
 */
export type Position = string;

/** A source-level advisory found while introspecting (e.g. "cursor column has no index"). */
export interface Warning {
  /** A warning's code, or an error's whose condition only warns here (error-codes.ts). */
  readonly code: Code;
  readonly message: string;
}

/** A half-open primary-key range [low, high); tuples in PK column order, undefined = unbounded. */
export interface Chunk {
  readonly low: readonly unknown[] | undefined;
  readonly high: readonly unknown[] | undefined;
}

/** The chunk SELECT surface the snapshot orchestrator consumes. */
export interface ChunkSource {
  /** The ordered chunk boundary keys. */
  bounds(signal?: AbortSignal): Promise<unknown[][]>;
  /** Reads one chunk, calling `fn` per row keyed by column name. */
  scan(
    chunk: Chunk,
    fn: (row: Record<string, unknown>) => void | Promise<void>,
    signal?: AbortSignal,
  ): Promise<void>;
}

/** The SQL-backed surface of a relational source. */
export interface QuerySource {
  newChunker(source: string, primaryKey: readonly string[], chunkSize: number): ChunkSource;
  closeQuery(): Promise<void>;
}

/** Samples a table's primary-key domain into n contiguous ordered ranges. */
export interface PartitionSource {
  partitions(n: number, signal?: AbortSignal): Promise<Chunk[]>;
}

/** One page request of a cursor-bounded incremental read. */
export interface IncrementalPage {
  readonly table: TableRef;
  /** The cursor column (e.g. `updated_at`). */
  readonly cursorColumn: string;
  /**
   * Resume token from the previous page's `next` (cursor value + primary key, see
   * docs/cursor.md); `''` starts from the beginning of the table.
   */
  readonly after: string;
  /** At most this many rows. */
  readonly pageSize: number;
  /**
   * The page also closes after the first row that brings its data to this many bytes (the Arrow
   * data bytes of its data columns, `BatchEncoder.dataBytes`), so one page is at most this much
   * plus one row. Undefined: pages close by rows only.
   */
  readonly pageBytes?: number;
  /**
   * A row larger than this is refused with `RowTooLargeError` (naming its key and size) as soon as
   * the database client has received it, before it is decoded or encoded. Undefined: no cap.
   */
  readonly maxRowBytes?: number;
  /**
   * `__pos` of row i of this page is `posPrefix + ordinalHex(ordinalBase + i)`
   * (`shared/position`), so positions sort in sync order across pages and runs.
   */
  readonly posPrefix: string;
  readonly ordinalBase: number;
  readonly signal?: AbortSignal;
}

/** The result of one incremental page. */
export interface IncrementalResult<T> {
  /** The token to resume from after this page (equal to `after` when the page is empty). */
  readonly next: string;
  readonly page: T;
  /** Another page is already available below the safe upper bound. */
  readonly more: boolean;
  /**
   * Advisories from this page, e.g. a session idle in transaction holding the safe upper bound
   * back (code `BOUND_HELD`). The engine logs each as a warning and counts it in a metric.
   */
  readonly warnings?: readonly Warning[];
}

/**
 * Optional capability: the table's approximate row count from catalog statistics (no scan), so
 * a first sync can show an ETA. Undefined when the statistics are missing.
 */
export interface RowEstimator {
  estimateRows(table: TableRef): Promise<number | undefined>;
}

/**
 * Optional capability: places a wall-clock timestamp (`timestamp` without time zone, MySQL
 * DATETIME) in time as the source's writers mean it (docs/cursor.md: Postgres in the database's
 * default TimeZone, MySQL in `@@global.time_zone`). For freshness shown to operators only: the
 * cursor and the safe upper bound never depend on it.
 */
export interface WallClockZone {
  /**
   * `wallMicros` is the wall-clock value as microseconds since 1970-01-01 00:00:00 (of that wall
   * clock); returns the instant as UTC microseconds, or undefined when the source cannot tell.
   */
  wallClockToUtc(wallMicros: bigint): Promise<bigint | undefined>;
}

/** Optional capability: counts rows whose cursor is NULL (they are never reached by `>`). */
export interface NullCursorCounter {
  countNullCursors(table: TableRef, cursorColumn: string): Promise<number>;
}

/**
 * Cursor-bounded incremental read with no replication slot (ModeIncremental). Returns at most
 * one page, keyset-paginated on (cursor, primary key), never past the source's safe upper bound.
 * Row values are the source's public row universe; the engine encodes them at the boundary.
 */
export interface IncrementalSource {
  incremental(req: IncrementalPage): Promise<IncrementalResult<Record<string, unknown>[]>>;
}

/**
 * The columnar sibling of IncrementalSource: the same page read, encoded straight into a
 * wire-schema batch (no per-row objects). `schema` is the canonical schema the engine resolved,
 * so the batch is byte-for-byte what encoding `incremental`'s rows would produce. An empty page
 * returns `page: undefined`. The engine prefers this capability when present.
 */
export interface BatchIncrementalSource {
  incrementalBatch(
    req: IncrementalPage & { readonly schema: Schema; readonly writeMode: Batch['writeMode'] },
  ): Promise<IncrementalResult<Batch | undefined>>;
}

/** Spec table as the introspector needs it. */
export interface TableSpec {
  /** `schema.table` */
  readonly source: string;
  readonly target?: string;
  /** Columns to leave out of the lake. */
  readonly exclude?: readonly string[];
  /** Incremental tables: the cursor column, validated (exists, orderable, indexed) up front. */
  readonly cursorColumn?: string;
}

/** Resolves one spec table into its ref and SOURCE canonical schema. */
export interface Introspector {
  introspect(t: TableSpec): Promise<{ ref: TableRef; schema: Schema; warnings: Warning[] }>;
}

/** Lists the tables the user may SELECT, limited to `schemas` when non-empty. */
export interface Discoverer {
  discover(schemas: readonly string[]): Promise<TableRef[]>;
}

/** Resolves the stream start: first-boot position and the codec for stored positions. */
export interface Positioner {
  initialPosition(): Promise<Position>;
  parsePosition(s: string): Position;
}

/** A TRUNCATE or other destructive DDL the stream carried that the sink does not replay. */
export interface DestructiveDDL {
  /** Driver kind, e.g. `postgres`. */
  readonly source: string;
  readonly kind: 'truncate' | 'ddl';
  /** `schema.table` when known, else ''. */
  readonly table: string;
  readonly detail: string;
}

/** Replication knobs a driver passes through to its reader. */
export interface Runtime {
  readonly serverId: number;
  readonly heartbeatMs: number;
  /** Called for every destructive DDL seen; the engine decides what follows. */
  readonly onDestructiveDDL?: (e: DestructiveDDL) => void;
}

/** The reader surface the snapshot orchestrator needs (DBLog watermarks and windows). */
export interface SourceReader {
  synced(): Position;
  master(signal?: AbortSignal): Promise<Position>;
  /** Tags decoded events strictly past the captured watermark as in-window for chunkId. */
  openWindow(chunkId: number, signal?: AbortSignal): Promise<void>;
  clearWindow(): void;
}

/** The replication reader: the watermark surface plus the columnar pull stream. */
export interface Reader extends SourceReader {
  start(from: Position, signal?: AbortSignal): Promise<void>;
  /** The next batch, or undefined at a clean end. */
  next(signal?: AbortSignal): Promise<Batch | undefined>;
  close(): Promise<void>;
  /** Installs the minimum position durably committed to the sink; acks never pass it. */
  setConfirmed(f: () => Position): void;
}

/** Optional Reader capability: flush every already-decoded event without waiting for more. */
export interface Drainer {
  drain(emit: (b: Batch) => void | Promise<void>): Promise<void>;
}

/** Optional Reader capability: inject the resolved canonical schemas after open. */
export interface SchemaSetter {
  setSourceSchemas(schemas: ReadonlyMap<string, Schema>): void;
}

/** Opens the replication reader over the pipeline's tables. */
export interface Streamer {
  open(refs: readonly TableRef[], runtime: Runtime): Promise<Reader>;
}

/** The minimal surface every streaming source provides. */
export interface Source extends Streamer, Positioner, Introspector {}
