/**
 * What opening a driver kind's source takes and gives back: the settings the composition root
 * (shared/pipeline) resolves from the spec, and the capabilities an opened source offers the
 * engine. The registry (shared/drivers/registry.ts) maps each kind to its constructors with
 * these types; the drivers' sources implement them.
 *
 * Kept apart from the registry so a driver's source module names these types without importing
 * the registry, which imports that module (docs/contracts.md, "Opening a driver").
 * Holds types only; never opens anything.
 */
import type { Streamer } from './cdc.js';
import type { CdcPreflight, Preflight } from './check.js';
import type {
  BatchIncrementalSource,
  IncrementalSource,
  Introspector,
  NullCursorCounter,
  RowEstimator,
  WallClockZone,
} from './source.js';
import type { Clock } from './state.js';

/** Per-table settings a source applies to its reads. */
export interface IncrementalSourceSettings {
  readonly url: string;
  readonly sourceName: string;
  readonly connectTimeoutMs: number;
  readonly lagMs: number;
  readonly lagOnly: boolean;
  /** See SqlSourceOptions.cursorTimeZone. */
  readonly cursorTimeZone?: string;
  readonly clock?: Clock;
}

/** Per-source settings a change-stream source opens with (resolved from the spec's `cdc:` block). */
export interface CdcSourceSettings {
  readonly url: string;
  readonly sourceName: string;
  readonly connectTimeoutMs: number;
  /** Postgres: the replication slot and the publication. */
  readonly slot?: string;
  readonly publication?: string;
  /** MySQL: the server id of the replica connection. */
  readonly serverId?: number;
  readonly heartbeatMs: number;
  readonly clock?: Clock;
}

/** A source that can serve incremental tables, and be closed. */
export type ClosableIncrementalSource = Introspector &
  IncrementalSource &
  Partial<BatchIncrementalSource> &
  Partial<NullCursorCounter> &
  Partial<RowEstimator> &
  Partial<Preflight> &
  Partial<CdcPreflight> &
  Partial<WallClockZone> & { close(): Promise<void> };

/**
 * A source that opens change-stream readers, introspects its captured tables (the engine reads
 * each table's schema at start), and is closed.
 */
export type ClosableCdcSource = Streamer & Introspector & { close(): Promise<void> };
