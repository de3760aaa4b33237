/**
 * The driver registry: per driver kind, its static capabilities (registration data, readable
 * without opening anything: the spec, the CDK app and `validate` use them) and how to open its
 * sources (incremental today; a change stream once a kind has a log reader). The composition
 * root (shared/pipeline) asks it for sources; the engine never imports it.
 *
 * The built-in kinds are `postgres` and `mysql`. `registerDriver` adds a kind at run time (the
 * test-only scripted source, a kind a later release adds): the spec accepts every registered
 * kind (`driverKinds()`), so this map is the one list of kinds there is.
 *
 * Capabilities are kept truthful: a kind declares `cdc`, `stream` and `recoverablePosition` only
 * once it has a log reader that resumes exactly (`openCdc`), because the spec gate
 * (shared/config/modes.ts `checkModes`) lets a table run under CDC on exactly that.
 */

import type {
  CdcSourceSettings,
  ClosableCdcSource,
  ClosableIncrementalSource,
  IncrementalSourceSettings,
} from '../contracts/driver.js';
import type { Capabilities } from '../contracts/source.js';

/** A registered driver kind: `postgres`, `mysql`, or one added by `registerDriver`. */
export type DriverKind = string;

/** The kinds every build has. */
export const BUILTIN_DRIVER_KINDS: readonly DriverKind[] = Object.freeze(['postgres', 'mysql']);

export interface DriverRegistration {
  readonly kind: DriverKind;
  readonly capabilities: Capabilities;
  /** Opens an incremental source; connections open lazily on first use. */
  openIncremental?(settings: IncrementalSourceSettings): Promise<ClosableIncrementalSource>;
  /** Opens a change-stream source; undefined until the kind has a log reader. */
  openCdc?(settings: CdcSourceSettings): Promise<ClosableCdcSource>;
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

/**
 * Postgres: incremental, and CDC through pgoutput over a permanent slot (the slot's
 * confirmed_flush_lsn is the recoverable position). Snapshots by DBLog windows: primary-key
 * chunks the database bounds (`chunkQuery`), read between `tidemark.watermark` logical
 * messages the reader reports in stream order (postgres/snapshot.ts, `openSnapshot` on the CDC
 * source). Only with REPLICA IDENTITY FULL does pgoutput carry the whole deleted row, so no
 * before image in general.
 */
const postgres: DriverRegistration = {
  kind: 'postgres',
  capabilities: Object.freeze({
    snapshot: true,
    chunkQuery: true,
    stream: true,
    maxConnections: 0,
    modes: Object.freeze(['incremental', 'cdc'] as const),
    beforeImage: false,
    monotonicSequence: false,
    recoverablePosition: true,
  }),
  async openIncremental(s) {
    const { PostgresSource } = await import('./postgres/source.js');
    return new PostgresSource(sourceOptions(s));
  },
  async openCdc(s) {
    const { PostgresCdcSource } = await import('./postgres/cdc/source.js');
    return new PostgresCdcSource(s);
  },
};

/**
 * MySQL/MariaDB: incremental, and CDC through the row binlog (@vlasky/zongji); the binlog
 * file:pos (with the GTID position) stored in state is the recoverable position. Binlog row
 * events carry the full before image (binlog_row_image=FULL). Snapshots read primary-key
 * chunks in consistent snapshots (mysql/snapshot.ts), cut exactly at the snapshot's binlog
 * position on MariaDB, by a watermark table elsewhere.
 */
const mysql: DriverRegistration = {
  kind: 'mysql',
  capabilities: Object.freeze({
    snapshot: true,
    chunkQuery: true,
    stream: true,
    maxConnections: 0,
    modes: Object.freeze(['incremental', 'cdc'] as const),
    beforeImage: true,
    monotonicSequence: false,
    recoverablePosition: true,
  }),
  async openIncremental(s) {
    const { MysqlSource } = await import('./mysql/source.js');
    return new MysqlSource(sourceOptions(s));
  },
  async openCdc(s) {
    const { MysqlCdcSource } = await import('./mysql/cdc/source.js');
    return new MysqlCdcSource(s);
  },
};

const REGISTRY = new Map<DriverKind, DriverRegistration>([
  ['postgres', postgres],
  ['mysql', mysql],
]);

/** What a kind name may look like: it is written in specs and printed in messages. */
const KIND_NAME = /^[a-z][a-z0-9-]{0,31}$/;

/**
 * Adds a driver kind (tests register a scripted kind; the spec then accepts it). A built-in or
 * already registered kind is refused: unregister it first.
 */
export function registerDriver(reg: DriverRegistration): void {
  if (!KIND_NAME.test(reg.kind))
    throw new Error(`driver kind "${reg.kind}" must be lowercase letters, digits and dashes (at most 32)`);
  if (REGISTRY.has(reg.kind)) throw new Error(`driver kind "${reg.kind}" is already registered`);
  REGISTRY.set(reg.kind, reg);
}

/** Removes a kind added by `registerDriver` (a no-op for an unknown kind); built-ins stay. */
export function unregisterDriver(kind: DriverKind): void {
  if (BUILTIN_DRIVER_KINDS.includes(kind)) throw new Error(`driver kind "${kind}" is built in`);
  REGISTRY.delete(kind);
}

/** Every registered kind, built-ins first: what `sources.<name>.kind` accepts. */
export function driverKinds(): readonly DriverKind[] {
  return [...REGISTRY.keys()];
}

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
