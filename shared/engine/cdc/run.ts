/**
 * The CDC engine: one long-running capture of one source's change stream into the lake
 * (docs/decisions/0009-cdc-commit-protocol.md), on any `Reader` (shared/contracts/cdc.ts).
 *
 * Owns the run and its event loop; each part of the commit protocol of a multi-table stream has
 * a file of its own, and a position can be followed through them in this order:
 *   - the lease (./fencing.ts): taken before anything is read (a second process that finds it
 *     held waits as a standby and takes over after expiry), renewed on its own timer; when a
 *     renewal fails the run stops writing and acking and closes the reader before the lease
 *     expires (self-fence);
 *   - recovery (./recovery.ts): the tables introspected and judged, the state item
 *     (`cdc#<pipeline>#<source>`, ./state.ts: the resume position, per table `next`, the first
 *     `__pos` not yet durable) committed before the reader streams, and this writer's objects of
 *     a table at or past its `next` (a crashed attempt's leftovers) removed before anything is
 *     written; on replay the reader drops rows below `next`;
 *   - the event loop (here): rows, transactions and keepalives to the ack tracker (./ack.ts: the
 *     ack is the durable low-water mark, never past what is committed to state), chunks of a
 *     snapshot (./snapshot.ts; a landed window's rows are held for its table's next flush),
 *     and the policies: a lost position (`gap`) is POSITION_LOST, recorded in state, and stops
 *     the source with the ack before it; TRUNCATE/destructive DDL is recorded (metric, log,
 *     state) or stops the source (`onTruncate: fail`); a schema change goes through the shared
 *     rules (errors: ./errors.ts);
 *   - the flush cycle (./flush.ts): the due tables written in parallel, then ONE conditional
 *     commit (renewing the lease), then the source acknowledged; with nothing pending the latest
 *     keepalive/heartbeat position is committed at least every idleCommit. A flush may cut inside
 *     a transaction; only the SOURCE position is transaction-aligned.
 *
 * Works only through the contracts: never names a database client or a driver.
 */
import type { CdcEvent, CdcTable, Reader } from '../../contracts/cdc.js';
import { TidemarkError } from '../../contracts/errors.js';
import type { StateRecord } from '../../contracts/state.js';
import type { Schema } from '../../dataplane/schema.js';
import {
  describeChange,
  type SchemaChange,
  SchemaChangedError,
  schemaVerdict,
  storedSchema,
} from '../../dataplane/schema-rules.js';
import type { Logger } from '../../observability/log.js';
import { AckTracker } from './ack.js';
import { DestructiveDdlError, PositionLostError } from './errors.js';
import { acquireOrStandby, LeaseFence } from './fencing.js';
import { ack, commit, flushDue, type Held, holdLanding, rowsArrived, waitMs } from './flush.js';
import { cdcLakeSchema } from './lake-schema.js';
import type { Captured, CdcRunOptions, CdcSummary } from './options.js';
import { introspect, type RecoveryContext, recover } from './recovery.js';
import { type ChunkLanding, Snapshotter } from './snapshot.js';
import { type CdcState, cdcStateKey, ddlEvent, initialCdcState, parseCdcState, withEvent } from './state.js';

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

/**
 * One run under the lease. Its fields are the run's whole state: the event loop below moves them
 * directly, the flush cycle (./flush.ts) and recovery (./recovery.ts) through `FlushContext` and
 * `RecoveryContext`.
 */
class CdcRun implements RecoveryContext {
  version: number;
  state: CdcState;
  tracker!: AckTracker;
  reader: Reader | undefined;
  readonly tables = new Map<string, Captured>();
  rows = 0;
  flushes = 0;
  objects = 0;
  lastCommitAt: number;
  /** The lease's renewal and self-fence: once fenced nothing may be written, committed or acked. */
  readonly fence: LeaseFence;
  readonly stopping = new AbortController();
  private released = false;
  /** Tables with pending rows; of those, the ones rows arrived for since the last look. */
  readonly pending = new Set<Captured>();
  readonly dirty = new Set<Captured>();
  /** Tables the open transaction touched (their lag is measured from its commit). */
  private readonly inTxn = new Set<Captured>();
  /** When the oldest pending row may come due by age (flushSeconds or maxAckLag). */
  ageDueAt = Number.POSITIVE_INFINITY;
  /** Per table, landed snapshot windows' rows waiting for the table's next flush (./flush.ts). */
  readonly held = new Map<string, Held>();
  /** This acquisition's fence number: part of every object name this run writes. */
  readonly fenceNumber: number;
  /** The snapshots of tables not yet fully loaded; undefined when none runs. */
  snapshotter: Snapshotter | undefined;

  constructor(
    readonly opts: CdcRunOptions,
    readonly key: string,
    readonly log: Logger,
    record: StateRecord,
  ) {
    this.version = record.version;
    this.fenceNumber = record.lease?.fence ?? 0;
    this.state = record.value === undefined ? initialCdcState() : parseCdcState(record.value);
    this.lastCommitAt = opts.clock();
    // A fenced run stops reading at once: its wait ends and its reader closes.
    this.fence = new LeaseFence(opts, key, log, (e) => {
      this.stopping.abort(e);
      void this.reader?.close().catch(() => undefined);
    });
  }

  async execute(): Promise<Omit<CdcSummary, 'standbyMs'>> {
    const { opts } = this;
    this.fence.startRenewal();
    const firstStart = this.version === 0;
    await introspect(this);
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
    await recover(this, firstStart, this.reader.positionScheme);
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
    await ack(this, position);
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
      this.fence.check();
      if (this.snapshotter?.failure) throw this.snapshotter.failure;
      if (signal?.aborted) {
        stopped = 'interrupted';
        break;
      }
      const ev = await this.reader.next(waitMs(this), waiting).catch((e: unknown) => {
        if (signal?.aborted && !this.fence.fenced) return undefined;
        throw this.fence.fenced ?? e;
      });
      if (ev) await this.onEvent(ev);
      else if (this.reader.ended) break;
      for (const landing of this.snapshotter?.landings() ?? []) await this.land(landing);
      if (signal?.aborted) {
        stopped = 'interrupted';
        break;
      }
      await flushDue(this, false);
    }
    await this.withStopTimeout(() => flushDue(this, true));
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
    this.fence.stop();
    this.stopping.abort();
    await this.snapshotter
      ?.stop()
      .catch((e: unknown) => this.log.warn('closing the snapshot connections failed', { error: e }));
    await this.reader
      ?.close()
      .catch((e: unknown) => this.log.warn('closing the reader failed', { error: e }));
    if (!this.released && !this.fence.fenced) {
      this.released = true;
      await this.opts.store
        .release(this.key, this.opts.owner)
        .catch((e: unknown) => this.log.warn('lease release failed; it will expire', { error: e }));
    }
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

  /**
   * A chunk's high watermark arrived: its rows join the table's buffer behind the stream rows up
   * to it; the table's next flush (by the due rules) writes them and finishes the range.
   */
  private async land(landing: ChunkLanding): Promise<void> {
    await this.opts.faults?.('chunk-landed');
    const t = this.tables.get(landing.table)!;
    await holdLanding(this, t, landing);
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
        rowsArrived(this, t, now);
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
        await flushDue(this, true);
        await commit(this, withEvent(this.state, ddlEvent(ev.ddl, new Date(now).toISOString())));
        if (t?.config.onTruncate === 'fail')
          throw new DestructiveDdlError(ev.ddl.table, ev.ddl.kind, ev.ddl.detail);
        return;
      }
      case 'schema':
        return this.onSchema(ev.table, ev.schema, ev.changes, now);
      case 'gap': {
        // What arrived before the gap is sound: it goes to the lake first.
        await flushDue(this, true);
        const at = new Date(now).toISOString();
        this.log.error('the change stream lost its position', { code: 'POSITION_LOST', reason: ev.reason });
        this.opts.logger.metric('PositionLost', 1, 'Count', {
          pipeline: this.opts.pipeline,
          source: this.opts.sourceName,
        });
        await commit(this, withEvent(this.state, { at, kind: 'gap', table: '', detail: ev.reason }));
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
    await flushDue(this, true);
    const verdict = schemaVerdict(changes, t.config.onWiden);
    if (verdict.action === 'stop') {
      await commit(
        this,
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
    const prev = this.state.tables[target] ?? { rows: 0, objects: 0 };
    await commit(this, {
      ...this.state,
      tables: {
        ...this.state.tables,
        [target]: { ...prev, schemaHash: t.recorded.hash, schemaVersion: t.recorded.version },
      },
    });
    // Said once it is recorded: a restart after this line starts from the new schema's hash.
    for (const c of verdict.changes)
      this.log.warn(`schema changed: ${describeChange(c)}`, { code: 'SCHEMA_CHANGED', table: target });
    this.opts.logger.metric('SchemaChanged', verdict.changes.length, 'Count', {
      pipeline: this.opts.pipeline,
      table: target,
    });
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
