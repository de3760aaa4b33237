/**
 * The CDC engine: one long-running capture of one source's change stream into the lake
 * (docs/decisions/0009-cdc-commit-protocol.md), on any `Reader` (shared/contracts/cdc.ts).
 *
 * Owns the commit protocol of a multi-table stream:
 *   - one state item per source (`cdc#<pipeline>#<source>`, ./state.ts): the resume position and
 *     per table `next`, the first `__pos` not yet durable;
 *   - the flush cycle: cut the tables whose pending rows, bytes or age reached the limits (or
 *     whose oldest pending row is older than maxAckLag), write them in parallel, then ONE
 *     conditional commit (renewing the lease), then acknowledge the source. A flush may cut
 *     inside a transaction; only the SOURCE position is transaction-aligned (./ack.ts);
 *   - the ack is the durable low-water mark, never past what is committed to state; with nothing
 *     pending the latest keepalive/heartbeat position is committed at least every idleCommit;
 *   - on start, this writer's objects of a table at or past its `next` (a crashed attempt's
 *     leftovers) are removed before anything is written; on replay the reader drops rows below
 *     `next`;
 *   - a short lease renewed on its own timer; when a renewal fails the engine stops writing and
 *     acking and closes the reader before the lease expires (self-fence); a second process that
 *     finds the lease held waits as a standby and takes over after expiry;
 *   - policies: a lost position (`gap`) is POSITION_LOST, recorded in state, and stops the source
 *     with the ack before it; TRUNCATE/destructive DDL is recorded (metric, log, state) or stops
 *     the source (`onTruncate: fail`); a schema change goes through the shared rules.
 *
 * Works only through the contracts: never names a database client or a driver.
 */
import type {
  CdcEvent,
  CdcRuntime,
  CdcTable,
  Reader,
  SourcePosition,
  Streamer,
} from '../../contracts/cdc.js';
import { LeaseHeldError, LeaseLostError, TidemarkError } from '../../contracts/errors.js';
import {
  DEFAULT_LAKE_FORMAT,
  type LakeFormat,
  parseRecordedFormat,
  resolveLakeFormat,
} from '../../contracts/lake-format.js';
import type { LakeTable, Sink } from '../../contracts/sink.js';
import type { Introspector, TableRef } from '../../contracts/source.js';
import type { Clock, CursorStore, StateRecord } from '../../contracts/state.js';
import type { Batch, WriteMode } from '../../dataplane/batch.js';
import { META_POS } from '../../dataplane/metadata.js';
import type { Schema } from '../../dataplane/schema.js';
import {
  describeChange,
  type SchemaChange,
  SchemaChangedError,
  type StoredSchema,
  schemaVerdict,
  storedSchema,
  type WidenPolicy,
} from '../../dataplane/schema-rules.js';
import type { Logger } from '../../observability/log.js';
import { positionAfter } from '../../position/position.js';
import { durableStep, recoverUncommitted } from '../durable-step.js';
import { takeLease } from '../lease.js';
import { AckTracker } from './ack.js';
import { cdcTableRefusals } from './preconditions.js';
import { type ChunkLanding, newTableSnapshot, type SnapshotSettings, Snapshotter } from './snapshot.js';
import {
  type CdcState,
  type CdcTableState,
  cdcStateKey,
  ddlEvent,
  entryWritesSchema,
  initialCdcState,
  lastSchemaStop,
  parseCdcState,
  withEvent,
} from './state.js';

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
  | 'after-ack'
  | 'renewal'
  /** A chunk's high watermark arrived; its flush is next. */
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

/** The source can no longer deliver changes from where the state says to resume. */
export class PositionLostError extends TidemarkError {
  override name = 'PositionLostError';
  constructor(source: string, reason: string, from: SourcePosition | undefined) {
    super(
      'POSITION_LOST',
      `${source}: the change stream cannot resume from ${from?.display ?? from?.value ?? 'the stored position'}: ${reason}. Changes since then are lost to the log; the gap is recorded in the state. Re-snapshot the source's tables (a later release automates it as onPositionLost: reset), or reset the source's state to start over from the current log position`,
    );
  }
}

/** A TRUNCATE or destructive DDL arrived on a table under `onTruncate: fail`. */
export class DestructiveDdlError extends TidemarkError {
  override name = 'DestructiveDdlError';
  constructor(table: string, kind: string, detail: string) {
    super(
      'DESTRUCTIVE_DDL',
      `${table}: the stream carried a ${kind.toUpperCase()} (${detail.slice(0, 200)}), and the table says onTruncate: fail; the position stays before it. Re-snapshot the table, or set onTruncate: record to record such events and go on`,
    );
  }
}

/** Everything about one captured table the loop needs. */
interface Captured {
  readonly config: CdcTableConfig;
  readonly ref: TableRef;
  /** The lake schema: non-key columns nullable (a DELETE may carry only the key). */
  schema: Schema;
  recorded: StoredSchema;
  /** The lake format the table writes (its entry's, or the spec's for a new table). */
  readonly format: LakeFormat;
  /** Clock reading when the oldest pending row arrived; undefined when none is pending. */
  pendingSince: number | undefined;
  /** Source commit time of the newest row seen (lag is measured from it). */
  lastCommitTimeMs: number | undefined;
  stopped: boolean;
}

/**
 * CDC wire schemas mark every non-key column nullable: under Postgres' default replica identity a
 * DELETE carries only the key (docs/decisions/0010-cdc-nullability.md).
 */
export function cdcLakeSchema(schema: Schema): Schema {
  const keys = new Set(schema.primaryKey);
  return {
    ...schema,
    columns: schema.columns.map((c) => (keys.has(c.name) || c.nullable ? c : { ...c, nullable: true })),
  };
}

/** Runs the capture until the stream ends (finite sources), the signal aborts, or an error. */
export async function runCdc(opts: CdcRunOptions): Promise<CdcSummary> {
  const key = cdcStateKey(opts.pipeline, opts.sourceName);
  const log = opts.logger.child({ pipeline: opts.pipeline, source: opts.sourceName });
  const sleep = opts.sleep ?? defaultSleep;
  const standbyStarted = opts.clock();
  const record = await acquireOrStandby(opts, key, log, sleep);
  if (record === undefined) {
    return {
      pipeline: opts.pipeline,
      source: opts.sourceName,
      stopped: 'interrupted',
      rows: 0,
      flushes: 0,
      objects: 0,
      position: undefined,
      standbyMs: opts.clock() - standbyStarted,
    };
  }
  const standbyMs = opts.clock() - standbyStarted;
  opts.onState?.('active');
  const run = new CdcRun(opts, key, log, record);
  try {
    return { ...(await run.execute()), standbyMs };
  } finally {
    await run.shutdown();
  }
}

/** Takes the lease, waiting as a standby while a live holder has it; undefined when interrupted. */
async function acquireOrStandby(
  opts: CdcRunOptions,
  key: string,
  log: Logger,
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>,
): Promise<StateRecord | undefined> {
  let announced = false;
  for (;;) {
    try {
      return (await takeLease(opts.store, key, opts.owner, opts.leaseTtlMs, opts.isHolderDead)).record;
    } catch (e) {
      if (!(e instanceof LeaseHeldError) || opts.standby === false) throw e;
      if (!announced) {
        log.info('standby: another process holds the lease; taking over when it expires', {
          holder: e.holder,
          expiresAt: e.expiresAt,
        });
        announced = true;
        opts.onState?.('standby');
      }
      const wait = Math.max(50, Math.min(opts.leaseTtlMs, (e.expiresAt ?? 0) - opts.clock() + 10));
      try {
        await sleep(wait, opts.signal);
      } catch {
        return undefined;
      }
      if (opts.signal?.aborted) return undefined;
    }
  }
}

class CdcRun {
  private version: number;
  private state: CdcState;
  private tracker!: AckTracker;
  private reader: Reader | undefined;
  private readonly tables = new Map<string, Captured>();
  private rows = 0;
  private flushes = 0;
  private objects = 0;
  private lastCommitAt: number;
  /** Set when the lease could not be renewed: nothing may be written, committed or acked. */
  private fenced: Error | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  private fenceTimer: NodeJS.Timeout | undefined;
  private readonly stopping = new AbortController();
  private released = false;
  /** Tables with pending rows; of those, the ones rows arrived for since the last look. */
  private readonly pending = new Set<Captured>();
  private readonly dirty = new Set<Captured>();
  /** Tables the open transaction touched (their lag is measured from its commit). */
  private readonly inTxn = new Set<Captured>();
  /** When the oldest pending row may come due by age (flushSeconds or maxAckLag). */
  private ageDueAt = Number.POSITIVE_INFINITY;
  /** This acquisition's fence number: part of every object name this run writes. */
  private readonly fenceNumber: number;
  /** The snapshots of tables not yet fully loaded; undefined when none runs. */
  private snapshotter: Snapshotter | undefined;

  constructor(
    private readonly opts: CdcRunOptions,
    private readonly key: string,
    private readonly log: Logger,
    record: StateRecord,
  ) {
    this.version = record.version;
    this.fenceNumber = record.lease?.fence ?? 0;
    this.state = record.value === undefined ? initialCdcState() : parseCdcState(record.value);
    this.lastCommitAt = opts.clock();
  }

  async execute(): Promise<Omit<CdcSummary, 'standbyMs'>> {
    const { opts } = this;
    this.startRenewal();
    const firstStart = this.version === 0;
    await this.introspect();
    const captured = [...this.tables.values()];
    const cdcTables: CdcTable[] = captured.map((t) => ({
      ref: t.ref,
      schema: t.schema,
      writeMode: t.config.writeMode,
      ...(t.config.insertOnly ? { insertOnly: true } : {}),
      ...(t.config.unchangedToast ? { unchangedToast: t.config.unchangedToast } : {}),
    }));
    // Opened before recovery (it streams nothing until `start`): recovery needs its scheme.
    this.reader = await opts.streamer.openReader(cdcTables, {
      ...opts.runtime,
      log: this.log,
      dims: { pipeline: opts.pipeline, source: opts.sourceName },
    });
    await this.recover(firstStart, this.reader.positionScheme);
    this.tracker = new AckTracker(this.state.position);
    const next = new Map<string, string>();
    for (const t of captured) {
      const n = this.state.tables[t.config.target]?.next;
      if (n !== undefined) next.set(t.config.target, n);
    }
    const position = this.state.position;
    if (position === undefined) throw new Error('cdc: recovery committed no start position');
    await this.reader.start({ position, next }, this.stopping.signal);
    // A crash between a commit and its ack left the source behind the state: the committed
    // position is durable, so it is acknowledged again first.
    await this.ack(position);
    await this.startSnapshots(captured);
    this.log.info('capturing', {
      tables: captured.length,
      position: this.state.position?.display ?? this.state.position?.value ?? '(start)',
    });

    let stopped: 'ended' | 'interrupted' = 'ended';
    const signal = opts.signal;
    // The reader's wait ends on the caller's stop and on a self-fence alike.
    const waiting = signal ? AbortSignal.any([signal, this.stopping.signal]) : this.stopping.signal;
    for (;;) {
      this.checkFence();
      if (this.snapshotter?.failure) throw this.snapshotter.failure;
      if (signal?.aborted) {
        stopped = 'interrupted';
        break;
      }
      const ev = await this.reader.next(this.waitMs(), waiting).catch((e: unknown) => {
        if (signal?.aborted && !this.fenced) return undefined;
        throw this.fenced ?? e;
      });
      if (ev) await this.onEvent(ev);
      else if (this.reader.ended) break;
      for (const landing of this.snapshotter?.landings() ?? []) await this.land(landing);
      if (signal?.aborted) {
        stopped = 'interrupted';
        break;
      }
      await this.flushDue(false);
    }
    await this.withStopTimeout(() => this.flushDue(true));
    return {
      pipeline: opts.pipeline,
      source: opts.sourceName,
      stopped,
      rows: this.rows,
      flushes: this.flushes,
      objects: this.objects,
      position: this.state.position,
    };
  }

  /** Stops timers, closes the reader, releases the lease (unless fenced: it is not ours). */
  async shutdown(): Promise<void> {
    clearInterval(this.renewTimer);
    clearTimeout(this.fenceTimer);
    this.stopping.abort();
    await this.snapshotter
      ?.stop()
      .catch((e: unknown) => this.log.warn('closing the snapshot connections failed', { error: e }));
    await this.reader
      ?.close()
      .catch((e: unknown) => this.log.warn('closing the reader failed', { error: e }));
    if (!this.released && !this.fenced) {
      this.released = true;
      await this.opts.store
        .release(this.key, this.opts.owner)
        .catch((e: unknown) => this.log.warn('lease release failed; it will expire', { error: e }));
    }
  }

  private async introspect(): Promise<void> {
    for (const config of this.opts.tables) {
      const { ref, schema } = await this.opts.introspector.introspect({
        source: config.source,
        target: config.target,
        exclude: config.exclude,
      });
      // Refused before anything of the table is recorded or created (state entry, publication,
      // slot), in the words `tidemark check` uses: a fixed spec then starts as if new.
      const [refusal] = cdcTableRefusals(config, schema);
      if (refusal) throw refusal;
      const lake = cdcLakeSchema(schema);
      const stored = this.state.tables[config.target];
      const recorded = storedSchema(lake, stored?.schemaVersion ?? 1);
      if (!entryWritesSchema(stored, lake)) {
        // The state keeps only the hash (the full schema is in the objects' footers): the rules
        // cannot tell what changed while the capture was down, so the operator must look. The
        // hash leaves source types out, so a schema the stream recorded (binlog `int`) matches
        // the catalog's (`int(11)`) here.
        const stop = lastSchemaStop(this.state, config.target);
        throw new SchemaChangedError(
          config.target,
          [],
          'start',
          `its schema hash is ${recorded.hash}, the state says the table wrote ${stored?.schemaHash}${stop ? `; the capture stopped at ${stop.at} on: ${stop.detail}` : ''}`,
          { mode: 'cdc' },
        );
      }
      // A table keeps the format its entry records; an entry that records none and never wrote an
      // object (no `next`) is as new as a missing one (docs/lake-format.md).
      const recordedFormat = parseRecordedFormat(`${config.target} in ${this.key}`, stored?.format);
      const lakeFormat = resolveLakeFormat(
        config.target,
        this.opts.lakeFormat ?? DEFAULT_LAKE_FORMAT,
        stored !== undefined && (recordedFormat !== undefined || stored.next !== undefined),
        recordedFormat,
      );
      if (lakeFormat.note)
        this.log.warn(lakeFormat.note, {
          code: 'LAKE_FORMAT_KEPT',
          table: config.target,
          format: lakeFormat.format,
        });
      this.tables.set(config.target, {
        config,
        ref,
        schema: lake,
        recorded,
        format: lakeFormat.format,
        pendingSince: undefined,
        lastCommitTimeMs: undefined,
        stopped: stored?.stopped !== undefined,
      });
    }
  }

  /**
   * Removes what a crashed attempt left past each table's `next`; a first start commits the
   * initial state BEFORE any object exists, so "no state but objects" always means a lost state.
   */
  private async recover(firstStart: boolean, scheme: string): Promise<void> {
    const { sink, writer } = { sink: this.opts.sink, writer: this.opts.writer };
    if (firstStart) {
      for (const t of this.tables.values()) {
        // Only this reader's scheme: the same writer's incremental objects of the table (kept
        // by `tidemark reset` when the table moved to cdc) are not a lost CDC state.
        const ours = (await sink.list(t.config.target, writer)).filter((o) =>
          o.startPosition?.startsWith(scheme),
        );
        if (ours.length > 0) {
          throw new TidemarkError(
            'STATE_MISSING',
            `${t.config.target}: the state store has no state under ${this.key}, but the lake already holds ${ours.length} CDC object(s) of ${writer}; nothing was deleted or written. Restore the state, or remove those objects on purpose`,
          );
        }
      }
      const tables: Record<string, CdcTableState> = {};
      for (const t of this.tables.values()) tables[t.config.target] = this.newEntry(t);
      await this.commit({ ...this.state, position: await this.initialPosition(), tables });
      return;
    }
    // A table the state does not know is new to the capture (added to a running pipeline): its
    // entry, with its snapshot to do, is committed before anything of it is written. A state
    // without a position (written by a release that committed it only at the first flush) gets
    // one now, before anything is read.
    const added = [...this.tables.values()].filter((t) => this.state.tables[t.config.target] === undefined);
    // A table now configured `snapshot: never` whose snapshot is not complete (e.g. recorded by a
    // start that was then refused): its snapshot is dropped, and only changes are captured.
    const unsnapshotted = [...this.tables.values()].filter((t) => {
      const s = this.state.tables[t.config.target]?.snapshot;
      return t.config.snapshot !== 'initial' && s !== undefined && s.state !== 'complete';
    });
    if (added.length > 0 || unsnapshotted.length > 0 || this.state.position === undefined) {
      const tables: Record<string, CdcTableState> = { ...this.state.tables };
      for (const t of added) tables[t.config.target] = this.newEntry(t);
      for (const t of unsnapshotted) {
        const { snapshot: _dropped, ...entry } = tables[t.config.target]!;
        tables[t.config.target] = entry;
        this.log.warn(
          "snapshot: never: the table's unfinished snapshot is dropped; only its changes are captured",
          {
            code: 'CDC_SNAPSHOT_DROPPED',
            table: t.config.target,
          },
        );
      }
      let position = this.state.position;
      if (position === undefined) {
        // Entries without a position: a start by a release that committed it only at the first
        // flush died before that flush. A source that keeps our position (a Postgres slot)
        // still holds every change since; one that does not (a binlog) would resume at its
        // current end and skip them, so that start stops and says so.
        if (!this.reader!.keepsPosition)
          throw new TidemarkError(
            'CDC_NO_POSITION',
            `${this.opts.sourceName}: the state records its tables since ${this.state.lastCommitAt ?? 'an earlier start'} but no resume position (a start by an earlier release died before its first flush), and this source keeps no position of ours, so the changes since then cannot be read again; give the tables a new target: (snapshot: initial loads their rows), or delete the state item ${this.key} to capture from now on`,
          );
        this.log.warn(
          "the state holds no resume position (an earlier start never committed one): capturing from the slot's position, which still holds every change since",
          { code: 'CDC_NO_POSITION' },
        );
        position = await this.initialPosition();
      }
      await this.commit({ ...this.state, position, tables });
      if (added.length > 0)
        this.log.info('tables added to the capture', { tables: added.map((t) => t.config.target) });
    }
    for (const t of this.tables.values()) {
      const lake: LakeTable = { table: t.config.target, writer };
      // Without a `next` the table never committed an object: all of ours OF THIS SCHEME are
      // leftovers (the bare scheme letter sorts below every position of it).
      const next = this.state.tables[t.config.target]?.next ?? scheme;
      const removed = await recoverUncommitted(sink, lake, next);
      if (removed.length > 0)
        this.log.warn('removed uncommitted objects of a crashed attempt', {
          table: t.config.target,
          objects: removed.map((r) => r.uri),
        });
    }
  }

  /**
   * The reader's start position, to be committed before the reader streams anything (docs/
   * decisions/0009: the start position is durable before the first event is read).
   */
  private async initialPosition(): Promise<SourcePosition> {
    const position = await this.reader!.initialPosition(this.stopping.signal);
    this.log.info('first start: committing the start position before capture begins', {
      position: position.display ?? position.value,
    });
    return position;
  }

  private newEntry(t: Captured): CdcTableState {
    return {
      rows: 0,
      objects: 0,
      schemaHash: t.recorded.hash,
      schemaVersion: t.recorded.version,
      format: t.format,
      ...(t.config.snapshot === 'initial' ? { snapshot: newTableSnapshot() } : {}),
    };
  }

  /** Starts the snapshot of every table whose snapshot is not complete (alongside the stream). */
  private async startSnapshots(captured: readonly Captured[]): Promise<void> {
    const todo = captured.filter((t) => {
      const s = this.state.tables[t.config.target]?.snapshot;
      return s !== undefined && s.state !== 'complete' && !t.stopped;
    });
    if (todo.length === 0) return;
    const settings = this.opts.snapshot;
    if (!this.opts.streamer.openSnapshot || !settings)
      throw new TidemarkError(
        'CDC_SNAPSHOT_UNSUPPORTED',
        `${todo.map((t) => t.config.target).join(', ')}: this source cannot snapshot (its driver has no chunked reads); set "snapshot: never" on these tables`,
      );
    const source = await this.opts.streamer.openSnapshot({
      connections: settings.connections,
      ...(settings.watermarkTable ? { watermarkTable: settings.watermarkTable } : {}),
    });
    const snapshotter = new Snapshotter(source, this.reader!, settings, this.log, this.opts.clock);
    this.snapshotter = snapshotter;
    for (const t of todo)
      snapshotter.add(
        {
          target: t.config.target,
          ref: t.ref,
          writeMode: t.config.writeMode,
          schema: () => t.schema,
          schemaHash: () => t.recorded.hash,
          stopped: () => t.stopped,
        },
        this.state.tables[t.config.target]!.snapshot!,
      );
    snapshotter.start();
  }

  /** The tables' entries with the snapshot progress of the tables being snapshotted. */
  private withSnapshots(tables: Record<string, CdcTableState>): Record<string, CdcTableState> {
    if (!this.snapshotter) return tables;
    for (const [target, snapshot] of this.snapshotter.progress()) {
      const prev = tables[target];
      if (prev) tables[target] = { ...prev, snapshot };
    }
    return tables;
  }

  /** A chunk's high watermark arrived: its table is flushed now, with the chunk's rows. */
  private async land(landing: ChunkLanding): Promise<void> {
    await this.opts.faults?.('chunk-landed');
    const t = this.tables.get(landing.table)!;
    await this.flushTables([t], this.opts.clock(), landing);
    this.snapshotter!.committed(landing);
  }

  private async onEvent(ev: CdcEvent): Promise<void> {
    const now = this.opts.clock();
    switch (ev.kind) {
      case 'begin':
        this.tracker.begin();
        this.inTxn.clear();
        return;
      case 'rows': {
        const t = this.tables.get(ev.table);
        if (!t)
          throw new TidemarkError(
            'CDC_UNKNOWN_TABLE',
            `the reader delivered rows of ${ev.table}, which is not captured`,
          );
        this.tracker.rows(ev.table, ev.count);
        if (t.pendingSince === undefined) {
          t.pendingSince = now;
          this.pending.add(t);
          const { ms, maxAckLagMs } = this.opts.limits;
          this.ageDueAt = Math.min(this.ageDueAt, now + Math.min(ms, maxAckLagMs));
        }
        this.dirty.add(t);
        this.inTxn.add(t);
        return;
      }
      case 'commit':
        this.snapshotter?.onCommit(ev.txid);
        this.tracker.commit(ev.position);
        if (ev.commitTimeMs !== undefined) for (const t of this.inTxn) t.lastCommitTimeMs = ev.commitTimeMs;
        this.inTxn.clear();
        return;
      case 'progress':
        this.tracker.progress(ev.position);
        return;
      case 'watermark':
        this.snapshotter?.onWatermark(ev.id, ev.rowsPos);
        return;
      case 'ddl': {
        const t = this.tables.get(ev.ddl.table);
        this.log.warn(`destructive ${ev.ddl.kind} on ${ev.ddl.table || 'a captured table'}`, {
          code: 'DESTRUCTIVE_DDL',
          detail: ev.ddl.detail.slice(0, 300),
        });
        this.opts.logger.metric('DestructiveDdl', 1, 'Count', {
          pipeline: this.opts.pipeline,
          table: ev.ddl.table,
        });
        if (ev.ddl.kind === 'truncate' && t) this.snapshotter?.onTruncate(t.config.target);
        // Everything before the event is flushed first, so the recorded entry and the position
        // it is committed with say exactly where in the stream it happened.
        await this.flushDue(true);
        await this.commit(withEvent(this.state, ddlEvent(ev.ddl, new Date(now).toISOString())));
        if (t?.config.onTruncate === 'fail')
          throw new DestructiveDdlError(ev.ddl.table, ev.ddl.kind, ev.ddl.detail);
        return;
      }
      case 'schema':
        return this.onSchema(ev.table, ev.schema, ev.changes, now);
      case 'gap': {
        // What arrived before the gap is sound: it goes to the lake first.
        await this.flushDue(true);
        const at = new Date(now).toISOString();
        this.log.error('the change stream lost its position', { code: 'POSITION_LOST', reason: ev.reason });
        this.opts.logger.metric('PositionLost', 1, 'Count', {
          pipeline: this.opts.pipeline,
          source: this.opts.sourceName,
        });
        await this.commit(withEvent(this.state, { at, kind: 'gap', table: '', detail: ev.reason }));
        throw new PositionLostError(this.opts.sourceName, ev.reason, ev.from ?? this.state.position);
      }
    }
  }

  private async onSchema(
    target: string,
    schema: Schema,
    changes: readonly SchemaChange[],
    now: number,
  ): Promise<void> {
    const t = this.tables.get(target);
    if (!t) return;
    // The rows pending are in the old schema: they go to the lake first, and so does every other
    // table's, so the committed position reaches the transaction that carried the new schema. A
    // process killed after this point never replays the table's older schema against the
    // catalog's newer one (which would read as a column dropped, and stop a table that
    // `schema accept` then finds nothing to accept for).
    await this.flushDue(true);
    const verdict = schemaVerdict(changes, t.config.onWiden);
    if (verdict.action === 'stop') {
      await this.commit(
        withEvent(this.state, {
          at: new Date(now).toISOString(),
          kind: 'schema',
          table: target,
          detail: verdict.stops.map(describeChange).join('; '),
        }),
      );
      throw new SchemaChangedError(target, verdict.stops, 'stream');
    }
    if (verdict.action === 'same') return;
    t.schema = cdcLakeSchema(schema);
    t.recorded = storedSchema(t.schema, t.recorded.version + 1);
    for (const c of verdict.changes)
      this.log.warn(`schema changed: ${describeChange(c)}`, { code: 'SCHEMA_CHANGED', table: target });
    this.opts.logger.metric('SchemaChanged', verdict.changes.length, 'Count', {
      pipeline: this.opts.pipeline,
      table: target,
    });
    const prev = this.state.tables[target] ?? { rows: 0, objects: 0 };
    await this.commit({
      ...this.state,
      tables: {
        ...this.state.tables,
        [target]: { ...prev, schemaHash: t.recorded.hash, schemaVersion: t.recorded.version },
      },
    });
  }

  /** How long the reader may wait for the next event before a timer is due. */
  private waitMs(): number {
    const now = this.opts.clock();
    const { ms, maxAckLagMs, idleCommitMs } = this.opts.limits;
    const due = Math.min(now + Math.min(ms, maxAckLagMs, idleCommitMs), this.ageDueAt);
    return Math.max(1, Math.min(1000, due - now));
  }

  /** Flushes the tables that are due (all with pending rows when `all`), or commits an idle position. */
  private async flushDue(all: boolean): Promise<void> {
    const now = this.opts.clock();
    const { rows, bytes, ms, maxAckLagMs, idleCommitMs } = this.opts.limits;
    // Sizes can only have grown for the tables rows arrived for since the last look; ages are
    // looked at when the oldest pending row may have come due. Nothing here scans every table
    // per event.
    const byAge = all || now >= this.ageDueAt;
    const due: Captured[] = [];
    for (const t of byAge ? this.pending : this.dirty) {
      if (t.pendingSince === undefined) continue;
      const p = this.reader!.pending(t.config.target);
      const age = now - t.pendingSince;
      if (all || p.rows >= rows || p.bytes >= bytes || age >= ms || age >= maxAckLagMs) due.push(t);
    }
    this.dirty.clear();
    if (byAge) {
      this.ageDueAt = Number.POSITIVE_INFINITY;
      for (const t of this.pending)
        if (!due.includes(t))
          this.ageDueAt = Math.min(this.ageDueAt, t.pendingSince! + Math.min(ms, maxAckLagMs));
    }
    if (due.length > 0) return this.flushTables(due, now);
    // Nothing pending: a newer resume point (commits of rows all durable, heartbeats) is still
    // committed now and then, or at the end, so the stored position does not age.
    const position = this.tracker.position;
    if (
      position !== undefined &&
      !samePosition(position, this.state.position) &&
      (all || now - this.lastCommitAt >= idleCommitMs)
    ) {
      await this.commit({ ...this.state, position });
      await this.ack(position);
    }
  }

  /**
   * One flush cycle: cut, write in parallel, ONE conditional commit, then ack. With `landing`
   * (a chunk whose high watermark arrived), its table's object also carries the chunk's rows
   * placed after the cut, and the commit takes the chunk's range out of the table's snapshot.
   */
  private async flushTables(due: readonly Captured[], now: number, landing?: ChunkLanding): Promise<void> {
    this.checkFence();
    const reader = this.reader!;
    const marks = new Map<string, number>();
    const cuts: { t: Captured; batches: Batch[]; startPosition: string; last: string }[] = [];
    if (reader.settle) await reader.settle(due.map((t) => t.config.target));
    const snapshotter = this.snapshotter;
    let chunkRows = 0;
    for (const t of due) {
      const target = t.config.target;
      marks.set(target, this.tracker.appendedRows(target));
      const batch = reader.cut(target);
      t.pendingSince = undefined;
      this.pending.delete(t);
      this.dirty.delete(t);
      // A stopped table's changes are dropped: counted durable, never written.
      if (t.stopped) continue;
      if (batch && snapshotter?.watching(target)) snapshotter.observe(target, batch.record, t.ref.primaryKey);
      const batches = batch ? [batch] : [];
      if (landing?.table === target) {
        const next = this.state.tables[target]?.next;
        const prefix = landing.window.rowsPos!;
        // Two chunks can sit at one watermark position (MariaDB, no write between their
        // snapshots): the second one's ordinals go on after the first's.
        const base = next?.startsWith(prefix) ? Number.parseInt(next.slice(-8), 16) : 0;
        const placed = snapshotter!.place(landing, base);
        for (const b of placed) chunkRows += b.record.numRows;
        batches.push(...placed);
      }
      if (batches.length === 0) continue;
      // The object is named at or past `next` (recovery must find it), and `next` moves past
      // every row it holds. A chunk placed at a watermark the table's stream rows already passed
      // (a MariaDB cut the reader had read beyond) is named by `next` itself.
      const committedNext = this.state.tables[target]?.next;
      let startPosition = firstPosition(batches[0]!);
      if (committedNext !== undefined && startPosition < committedNext) startPosition = committedNext;
      let last = startPosition;
      for (const b of batches) if (b.watermark! > last) last = b.watermark!;
      cuts.push({ t, batches, startPosition, last });
    }
    const position = this.tracker.resumeIf(marks);
    const at = new Date(now).toISOString();
    if (landing) snapshotter!.finish(landing, chunkRows, at);
    let rows = 0;
    let next: CdcState | undefined;
    // One durable step: every due table's object in parallel, then ONE conditional commit of
    // their `next` and the resume point, then the ack (shared/engine/durable-step.ts).
    await durableStep({
      sink: this.opts.sink,
      store: this.opts.store,
      key: this.key,
      owner: this.opts.owner,
      expectedVersion: this.version,
      renewTtlMs: this.opts.leaseTtlMs,
      writes: cuts.map(({ t, batches, startPosition, last }) => ({
        target: {
          table: t.config.target,
          writer: this.opts.writer,
          fence: this.fenceNumber,
          format: t.format,
        },
        schema: t.schema,
        startPosition,
        batches,
        recorded: t.recorded,
        t,
        last,
      })),
      value: (written) => {
        this.checkFence();
        const tables: Record<string, CdcTableState> = { ...this.state.tables };
        for (const { write, refs } of written) {
          const { t, batches, last } = write;
          const prev = tables[t.config.target] ?? { rows: 0, objects: 0 };
          let n = 0;
          for (const b of batches) n += b.record.numRows;
          rows += n;
          tables[t.config.target] = {
            ...prev,
            next: positionAfter(last),
            rows: prev.rows + n,
            objects: prev.objects + refs.length,
            lastFlushAt: at,
            schemaHash: t.recorded.hash,
            schemaVersion: t.recorded.version,
            format: t.format,
            ...(t.lastCommitTimeMs !== undefined ? { lagMs: Math.max(0, now - t.lastCommitTimeMs) } : {}),
          };
          this.objects += refs.length;
        }
        next = {
          ...this.state,
          tables: this.withSnapshots(tables),
          ...(position ? { position } : {}),
          lastCommitAt: new Date(this.opts.clock()).toISOString(),
        };
        return next as unknown as Record<string, unknown>;
      },
      committed: (record) => {
        this.committedAs(record, next!);
        this.tracker.markDurable(marks);
        this.rows += rows;
        this.flushes += 1;
      },
      at: (point) => this.opts.faults?.(point),
      ...(position ? { ack: () => this.ack(position) } : {}),
    });
    this.log.debug('flushed', {
      tables: cuts.length,
      rows,
      ...(landing ? { chunkRows } : {}),
      position: position?.display ?? position?.value,
    });
  }

  private async ack(position: SourcePosition): Promise<void> {
    this.checkFence();
    await this.reader!.setConfirmed(position);
    await this.opts.faults?.('after-ack');
  }

  /** A commit outside a flush (an idle position, an event): one conditional write under the lease. */
  private async commit(value: CdcState): Promise<void> {
    this.checkFence();
    const next: CdcState = {
      ...value,
      tables: this.withSnapshots({ ...value.tables }),
      lastCommitAt: new Date(this.opts.clock()).toISOString(),
    };
    const committed = await this.opts.store.commit(this.key, {
      owner: this.opts.owner,
      expectedVersion: this.version,
      value: next as unknown as Record<string, unknown>,
      renewTtlMs: this.opts.leaseTtlMs,
    });
    this.committedAs(committed, next);
  }

  /** After a commit: its version and value are the state now, and the lease was renewed by it. */
  private committedAs(record: StateRecord, value: CdcState): void {
    this.version = record.version;
    this.state = value;
    this.lastCommitAt = this.opts.clock();
    this.scheduleFence();
  }

  /** Renews the lease on its own timer; a failed renewal fences this writer. */
  private startRenewal(): void {
    const every = this.opts.renewEveryMs ?? Math.max(1000, Math.floor(this.opts.leaseTtlMs / 3));
    this.scheduleFence();
    this.renewTimer = setInterval(() => {
      void (async () => {
        if (this.fenced) return;
        try {
          await this.opts.faults?.('renewal');
          await this.opts.store.renew(this.key, this.opts.owner, this.opts.leaseTtlMs);
          this.scheduleFence();
        } catch (e) {
          if (e instanceof LeaseLostError) this.fence(e);
          else this.log.warn('lease renewal failed; retrying before it expires', { error: e });
        }
      })();
    }, every);
    this.renewTimer.unref?.();
  }

  /** Arms the self-fence for the current lease: stop before expiry minus the skew margin. */
  private scheduleFence(): void {
    clearTimeout(this.fenceTimer);
    const ms = Math.max(0, this.opts.leaseTtlMs - (this.opts.skewMarginMs ?? 5000));
    this.fenceTimer = setTimeout(() => this.fence(new LeaseLostError(this.key, this.opts.owner)), ms);
    this.fenceTimer.unref?.();
  }

  private fence(e: Error): void {
    if (this.fenced) return;
    this.fenced = e;
    this.log.error('lease could not be renewed: stopped writing and acknowledging', { error: e });
    this.stopping.abort(e);
    void this.reader?.close().catch(() => undefined);
  }

  private checkFence(): void {
    if (this.fenced) throw this.fenced;
  }

  private async withStopTimeout(f: () => Promise<void>): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new TidemarkError(
              'STOP_TIMEOUT',
              `${this.opts.sourceName}: the final flush did not finish within ${Math.round(this.opts.stopTimeoutMs / 1000)} s; what was not committed is read again after the restart`,
            ),
          ),
        this.opts.stopTimeoutMs,
      );
    });
    try {
      await Promise.race([f(), limit]);
    } finally {
      clearTimeout(timer);
    }
  }
}

function firstPosition(batch: Batch): string {
  const pos = batch.record.getChild(META_POS)?.get(0) as string | null | undefined;
  if (typeof pos !== 'string')
    throw new TidemarkError('BATCH_INVALID', `batch of ${batch.table} has no __pos`);
  return pos;
}

function samePosition(a: SourcePosition | undefined, b: SourcePosition | undefined): boolean {
  return a?.scheme === b?.scheme && a?.value === b?.value;
}

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
