/**
 * The Postgres change-stream source (registry `openCdc`): introspects the captured tables with
 * the incremental driver's own introspection (so both modes agree on every column's lake type),
 * makes sure the publication holds exactly those tables, and opens the pgoutput reader.
 *
 * Also opens the snapshot chunkers (../snapshot.ts).
 *
 * Owns: the wiring of introspection, publication, reader and snapshot for one source. Never decodes.
 */
import type { CdcRuntime, CdcTable, Reader } from '../../../contracts/cdc.js';
import type { CdcSourceSettings, ClosableCdcSource } from '../../../contracts/driver.js';
import { SourceError } from '../../../contracts/errors.js';
import type { SnapshotOptions, SnapshotSource } from '../../../contracts/snapshot.js';
import type { Introspector, TableRef, TableSpec, Warning } from '../../../contracts/source.js';
import type { Schema } from '../../../dataplane/schema.js';
import { withConnectErrors } from '../../connect-errors.js';
import { refuseFailedPreconditions } from '../../preflight-lines.js';
import { connectionOf } from '../../source-options.js';
import { PostgresConnection, translateConnectError } from '../connect.js';
import { introspectTable, type TablePlan } from '../introspect.js';
import { PostgresSnapshotSource } from '../snapshot.js';
import { preflightCdcSource } from './preflight.js';
import { ensurePublications } from './publication.js';
import { PostgresCdcReader } from './reader.js';

/**
 * The preflight lines a start refuses on when they fail: the server's settings and the role's
 * rights, and the publication plan. (The `slot` line's lost or foreign slot is the reader's to
 * judge: a lost slot of a running capture is a gap, handled by `onPositionLost`.)
 */
const START_PRECONDITIONS = new Set([
  'wal_level',
  'version',
  'replication',
  'slots',
  'senders',
  'publication',
]);

export class PostgresCdcSource implements ClosableCdcSource, Introspector {
  private readonly db: PostgresConnection;
  private readonly plans = new Map<string, TablePlan>();
  private readonly readers = new Set<Reader>();
  private readonly snapshots = new Set<SnapshotSource>();

  constructor(private readonly settings: CdcSourceSettings) {
    this.db = new PostgresConnection({ ...connectionOf(settings), applicationName: 'tidemark-cdc' });
  }

  async introspect(t: TableSpec): Promise<{ ref: TableRef; schema: Schema; warnings: Warning[] }> {
    const plan = await this.guard((sql) => introspectTable(sql, t));
    this.plans.set(t.source, plan);
    return { ref: plan.ref, schema: plan.schema, warnings: [] };
  }

  async openReader(tables: readonly CdcTable[], runtime: CdcRuntime): Promise<Reader> {
    const slot = runtime.slot ?? this.settings.slot;
    const publication = runtime.publication ?? this.settings.publication;
    if (!slot || !publication)
      throw new SourceError(
        'CDC_CONFIG',
        `${this.settings.sourceName}: a Postgres cdc source needs a slot and a publication name`,
      );
    // The server-wide preconditions, in the words `tidemark check` uses, before anything is
    // created (a publication made by a start the server then refuses would be left behind).
    const published = tables.map((t) => ({ source: t.ref.source, insertOnly: t.insertOnly === true }));
    // The capture's mark on what it creates (a reader opened outside a pipeline marks nothing).
    const pipeline = runtime.dims?.pipeline;
    const owner = pipeline ? { pipeline, source: this.settings.sourceName, slot } : undefined;
    const lines = await this.guard((sql) =>
      preflightCdcSource(sql, { slot, publication, tables: published, owner }),
    );
    refuseFailedPreconditions(this.settings.sourceName, lines, START_PRECONDITIONS);
    const setup = await this.guard((sql) => ensurePublications(sql, publication, published, owner));
    for (const s of setup.executed) runtime.log?.info('publication updated', { statement: s });
    for (const t of tables)
      if (!this.plans.has(t.ref.source)) await this.introspect({ source: t.ref.source });
    const reader = new PostgresCdcReader(
      {
        ...connectionOf(this.settings),
        slot,
        publications: setup.names,
        heartbeatMs: runtime.heartbeatMs,
        ...(this.settings.clock ? { clock: this.settings.clock } : {}),
      },
      tables,
      this.plans,
      runtime,
    );
    this.readers.add(reader);
    return reader;
  }

  /**
   * Chunkers for the snapshot of captured tables (shared/contracts/snapshot.ts), on a pool of
   * at most `options.connections` query connections of their own.
   */
  async openSnapshot(options: SnapshotOptions): Promise<SnapshotSource> {
    const snapshot = new PostgresSnapshotSource(
      {
        ...connectionOf(this.settings),
        ...(this.settings.clock ? { clock: this.settings.clock } : {}),
      },
      options,
    );
    this.snapshots.add(snapshot);
    return snapshot;
  }

  private async guard<T>(
    fn: Parameters<PostgresConnection['run']>[0] extends (sql: infer S) => unknown
      ? (sql: S) => Promise<T>
      : never,
  ): Promise<T> {
    return withConnectErrors(
      () => this.db.run(fn),
      (e) => translateConnectError(e, this.db.endpoint, this.settings.connectTimeoutMs),
    );
  }

  async close(): Promise<void> {
    for (const r of this.readers) await r.close().catch(() => undefined);
    for (const s of this.snapshots) await s.close().catch(() => undefined);
    await this.db.close();
  }
}
