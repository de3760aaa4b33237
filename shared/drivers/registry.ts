/**
 * The driver registry: per driver kind, its static capabilities (registration data, readable
 * without opening anything: the CDK app and `validate` use them) and how to open an incremental
 * source. The composition root (shared/pipeline) asks it for sources; the engine never imports it.
 */
import type { Clock } from '../contracts/state.js';
import type {
  BatchIncrementalSource,
  Capabilities,
  IncrementalSource,
  Introspector,
  NullCursorCounter,
} from '../contracts/source.js';

export type DriverKind = 'postgres' | 'mysql';

/** Per-table settings a source applies to its reads. */
export interface IncrementalSourceSettings {
  readonly url: string;
  readonly sourceName: string;
  readonly connectTimeoutMs: number;
  readonly lagMs: number;
  readonly lagOnly: boolean;
  readonly clock?: Clock;
}

/** A source that can serve incremental tables, and be closed. */
export type ClosableIncrementalSource = Introspector &
  IncrementalSource &
  Partial<BatchIncrementalSource> &
  Partial<NullCursorCounter> & { close(): Promise<void> };

export interface DriverRegistration {
  readonly kind: DriverKind;
  readonly capabilities: Capabilities;
  /** Opens an incremental source; connections open lazily on first use. */
  openIncremental(settings: IncrementalSourceSettings): Promise<ClosableIncrementalSource>;
}

const postgres: DriverRegistration = {
  kind: 'postgres',
  // Stream/snapshot arrive with the CDC issues; the slot position is recoverable by nature.
  capabilities: Object.freeze({
    snapshot: false,
    chunkQuery: false,
    stream: false,
    maxConnections: 0,
    modes: Object.freeze(['incremental'] as const),
    beforeImage: false,
    monotonicSequence: false,
    recoverablePosition: true,
  }),
  async openIncremental(s) {
    const { PostgresSource } = await import('./postgres/index.js');
    return new PostgresSource({
      url: s.url,
      sourceName: s.sourceName,
      connectTimeoutMs: s.connectTimeoutMs,
      lagMs: s.lagMs,
      lagOnly: s.lagOnly,
      ...(s.clock ? { clock: s.clock } : {}),
    });
  },
};

const mysql: DriverRegistration = {
  kind: 'mysql',
  // Stream/snapshot arrive with the CDC issues; binlog row events carry the full before image
  // (binlog_row_image=FULL) and a GTID or file:pos resumes exactly.
  capabilities: Object.freeze({
    snapshot: false,
    chunkQuery: false,
    stream: false,
    maxConnections: 0,
    modes: Object.freeze(['incremental'] as const),
    beforeImage: true,
    monotonicSequence: false,
    recoverablePosition: true,
  }),
  async openIncremental(s) {
    const { MysqlSource } = await import('./mysql/index.js');
    return new MysqlSource({
      url: s.url,
      sourceName: s.sourceName,
      connectTimeoutMs: s.connectTimeoutMs,
      lagMs: s.lagMs,
      lagOnly: s.lagOnly,
      ...(s.clock ? { clock: s.clock } : {}),
    });
  },
};

const REGISTRY: ReadonlyMap<DriverKind, DriverRegistration> = new Map([
  ['postgres', postgres],
  ['mysql', mysql],
]);

/** The registration of a driver kind, or a clear error when that driver is not built yet. */
export function driver(kind: DriverKind): DriverRegistration {
  const d = REGISTRY.get(kind);
  if (!d) throw new Error(`no driver registered for kind "${kind}" (available: ${[...REGISTRY.keys()].join(', ')})`);
  return d;
}

/** Static capabilities of a kind, without opening anything. */
export function capabilities(kind: DriverKind): Capabilities {
  return driver(kind).capabilities;
}
