/**
 * The MySQL/MariaDB change-stream source (registry `openCdc`): introspects the captured tables
 * with the incremental driver's own introspection (so both modes agree on every column's lake
 * type and read plan), and opens the binlog reader.
 *
 * and the snapshot chunkers (`openSnapshot`, ../snapshot.ts) on their own connections; with a
 * watermark table, every reader of the source also decodes that table's rows.
 *
 * Owns: the wiring of introspection, reader and snapshot source for one source. Never decodes.
 */
import type { CdcRuntime, CdcTable, Reader } from '../../../contracts/cdc.js';
import type { CdcSourceSettings, ClosableCdcSource } from '../../../contracts/driver.js';
import type { Introspector, TableRef, TableSpec, Warning } from '../../../contracts/source.js';
import type { Schema } from '../../../dataplane/schema.js';
import { withConnectErrors } from '../../connect-errors.js';
import { refuseFailedPreconditions } from '../../preflight-lines.js';
import { connectionOf } from '../../source-options.js';
import { MysqlConnection, translateConnectError } from '../connect.js';
import { introspectTable, type TablePlan } from '../introspect.js';
import { type MysqlSnapshotOptions, MysqlSnapshotSource } from '../snapshot.js';
import { preflightCdcSource } from './preflight.js';
import { MysqlCdcReader } from './reader.js';

/**
 * The preflight lines a start refuses on when they fail: the binlog settings no stream can do
 * without. Not `replication`: it reads SHOW GRANTS, which on MySQL 8 leaves out privileges held
 * through a role (RDS grants its master user rds_superuser_role), so the binlog dump itself is the
 * judge of the grants at start; check's line still shows what it read.
 */
const START_PRECONDITIONS = new Set(['log_bin', 'binlog_format', 'binlog_row_image']);

export class MysqlCdcSource implements ClosableCdcSource, Introspector {
  private readonly db: MysqlConnection;
  private readonly plans = new Map<string, TablePlan>();
  private readonly readers = new Set<MysqlCdcReader>();
  private readonly snapshots = new Set<MysqlSnapshotSource>();
  /** The snapshot watermark table every reader decodes (set by `openSnapshot`). */
  private watermarkTable: string | undefined;

  constructor(private readonly settings: CdcSourceSettings) {
    this.db = new MysqlConnection({ ...connectionOf(settings), applicationName: 'tidemark-cdc' });
  }

  async introspect(t: TableSpec): Promise<{ ref: TableRef; schema: Schema; warnings: Warning[] }> {
    const plan = await this.guard(() => introspectTable(this.db, t));
    this.plans.set(t.source, plan);
    return { ref: plan.ref, schema: plan.schema, warnings: [] };
  }

  async openReader(tables: readonly CdcTable[], runtime: CdcRuntime): Promise<Reader> {
    for (const t of tables)
      if (!this.plans.has(t.ref.source)) await this.introspect({ source: t.ref.source });
    const serverId = runtime.serverId ?? this.settings.serverId;
    // The binlog settings and grants a stream needs, in the words `tidemark check` uses.
    if (serverId !== undefined) {
      const lines = await this.guard(() =>
        preflightCdcSource(this.db, { serverId, binlogRetentionHours: 0, tables: [] }),
      );
      refuseFailedPreconditions(this.settings.sourceName, lines, START_PRECONDITIONS);
    }
    const reader = new MysqlCdcReader(
      {
        ...connectionOf(this.settings),
        heartbeatMs: runtime.heartbeatMs,
        ...(this.settings.clock ? { clock: this.settings.clock } : {}),
        ...(this.watermarkTable !== undefined ? { watermarkTable: this.watermarkTable } : {}),
      },
      tables,
      this.plans,
      serverId !== undefined ? { ...runtime, serverId } : runtime,
    );
    this.readers.add(reader);
    return reader;
  }

  /**
   * Snapshot chunkers on at most `connections` query connections of their own. With
   * `watermarkTable`, readers opened before and after decode that table's rows.
   */
  async openSnapshot(options: MysqlSnapshotOptions): Promise<MysqlSnapshotSource> {
    const snap = new MysqlSnapshotSource(connectionOf(this.settings), options);
    if (options.watermarkTable !== undefined) {
      this.watermarkTable = options.watermarkTable;
      for (const r of this.readers) r.setWatermarkTable(options.watermarkTable);
    }
    this.snapshots.add(snap);
    return snap;
  }

  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    return withConnectErrors(
      () => fn(),
      (e) => translateConnectError(e, this.db.endpoint, this.settings.connectTimeoutMs),
    );
  }

  async close(): Promise<void> {
    for (const r of this.readers) await r.close().catch(() => undefined);
    for (const s of this.snapshots) await s.close().catch(() => undefined);
    await this.db.close();
  }
}
