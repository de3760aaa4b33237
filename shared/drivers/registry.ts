/**
 * The driver registry: per driver kind, its static capabilities (registration data, readable
 * without opening anything: the CDK app and `validate` use them) and how to open an incremental
 * source. The composition root (shared/pipeline) asks it for sources; the engine never imports it.
 */

import type { Preflight } from '../contracts/check.js';
import type {
  BatchIncrementalSource,
  Capabilities,
  IncrementalSource,
  Introspector,
  NullCursorCounter,
  RowEstimator,
  WallClockZone,
} from '../contracts/source.js';
import type { Clock } from '../contracts/state.js';

export type DriverKind = 'postgres' | 'mysql';

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

/** A source that can serve incremental tables, and be closed. */
export type ClosableIncrementalSource = Introspector &
  IncrementalSource &
  Partial<BatchIncrementalSource> &
  Partial<NullCursorCounter> &
  Partial<RowEstimator> &
  Partial<Preflight> &
  Partial<WallClockZone> & { close(): Promise<void> };

export interface DriverRegistration {
  readonly kind: DriverKind;
  readonly capabilities: Capabilities;
  /** Opens an incremental source; connections open lazily on first use. */
  openIncremental(settings: IncrementalSourceSettings): Promise<ClosableIncrementalSource>;
}

/** Capabilities of the SQL drivers today: incremental only; stream/snapshot come with CDC. */
function incrementalOnly(beforeImage: boolean): Capabilities {
  return Object.freeze({
    snapshot: false,
    chunkQuery: false,
    stream: false,
    maxConnections: 0,
    modes: Object.freeze(['incremental'] as const),
    beforeImage,
    monotonicSequence: false,
    // A slot position (Postgres) and a GTID or file:pos (MySQL) resume exactly.
    recoverablePosition: true,
  });
}

/** The constructor options both SQL drivers take, from the per-table settings. */
function sourceOptions(s: IncrementalSourceSettings) {
  return {
    url: s.url,
    sourceName: s.sourceName,
    connectTimeoutMs: s.connectTimeoutMs,
    lagMs: s.lagMs,
    lagOnly: s.lagOnly,
    ...(s.cursorTimeZone ? { cursorTimeZone: s.cursorTimeZone } : {}),
    ...(s.clock ? { clock: s.clock } : {}),
  };
}

const postgres: DriverRegistration = {
  kind: 'postgres',
  // Only with REPLICA IDENTITY FULL does pgoutput carry the whole deleted row.
  capabilities: incrementalOnly(false),
  async openIncremental(s) {
    const { PostgresSource } = await import('./postgres/index.js');
    return new PostgresSource(sourceOptions(s));
  },
};

const mysql: DriverRegistration = {
  kind: 'mysql',
  // Binlog row events carry the full before image (binlog_row_image=FULL).
  capabilities: incrementalOnly(true),
  async openIncremental(s) {
    const { MysqlSource } = await import('./mysql/index.js');
    return new MysqlSource(sourceOptions(s));
  },
};

const REGISTRY: ReadonlyMap<DriverKind, DriverRegistration> = new Map([
  ['postgres', postgres],
  ['mysql', mysql],
]);

/** The registration of a driver kind, or a clear error when that driver is not built yet. */
export function driver(kind: DriverKind): DriverRegistration {
  const d = REGISTRY.get(kind);
  if (!d)
    throw new Error(
      `no driver registered for kind "${kind}" (available: ${[...REGISTRY.keys()].join(', ')})`,
    );
  return d;
}

/** Static capabilities of a kind, without opening anything. */
export function capabilities(kind: DriverKind): Capabilities {
  return driver(kind).capabilities;
}
