/**
 * The CDC runner: runs every change-stream source of a spec (or one), each under its own lease,
 * concurrently — what `tidemark cdc` and the Fargate task (functions/cdc/main.ts) both run.
 *
 * The composition root of the CDC engine: spec -> per source with `mode: cdc` tables, its driver
 * (registry `driver(kind).openCdc(settings)`: a streamer that also introspects), the state store
 * and the lake (./open.ts), the tables' settings from the spec, the flush limits, lease and stop
 * settings from `cdcSettings`, and `runCdc` (shared/engine/cdc/run.ts).
 *
 * It also watches: a status board per source (starting / standby / active / stopped / failing,
 * the committed position, per table rows, last flush and lag) read from the commits the engine
 * makes, for a status line and a health endpoint; and metrics through the logger's `metric()`
 * (EMF where CloudWatch collects them): LagSeconds (source commit to durable), Rows, Objects,
 * FlushBytes, Errors, Active/Standby.
 *
 * One source failing stops the others (they drain: flush, commit, ack, release) and the run
 * rethrows its error: a task with a failed source is replaced, not left half running. The
 * failure is also recorded as the source's last one (shared/engine/cdc/failure.ts), failed starts
 * included, for `tidemark status`.
 *
 * Owns wiring and watching only. Never holds protocol logic; the engine does.
 */

import { resolveSourceUrl } from '../config/secrets.js';
import { cdcSettings, cdcTables, type Spec, tableTarget } from '../config/spec.js';
import { ConfigError, codeOf, TidemarkError } from '../contracts/errors.js';
import type { Sink } from '../contracts/sink.js';
import type { Clock, CursorStore } from '../contracts/state.js';
import { configuredTableFormat } from '../contracts/table-format.js';
import { driver } from '../drivers/registry.js';
import { cdcFailure, recordCdcFailure } from '../engine/cdc/failure.js';
import type { CdcSummary, CdcTableConfig } from '../engine/cdc/options.js';
import { runCdc } from '../engine/cdc/run.js';
import { type CdcState, parseCdcState } from '../engine/cdc/state.js';
import type { Logger } from '../observability/log.js';
import { redact } from '../observability/redact.js';
import { writerId } from '../sink/layout.js';
import { localOwner } from '../state/lease-owner.js';
import { openLake, openStateStore } from './open.js';

/** Where a source's capture is. `stopped`: it ended (a drain, or a finite source at its end). */
export type CdcSourceState = 'starting' | 'standby' | 'active' | 'stopped' | 'failing';

export interface CdcTableStatus {
  readonly rows: number;
  readonly objects: number;
  readonly lastFlushAt?: string;
  /** Source commit to durable, at the last flush. */
  readonly lagMs?: number;
  /** A snapshot under way or done: its state, chunk rows written, chunks. */
  readonly snapshot?: { readonly state: string; readonly rows: number; readonly chunks: number };
}

export interface CdcSourceStatus {
  readonly source: string;
  readonly state: CdcSourceState;
  /** The committed resume position (its display form). */
  readonly position?: string;
  readonly lastCommitAt?: string;
  readonly tables: Readonly<Record<string, CdcTableStatus>>;
  readonly error?: { readonly code: string; readonly message: string };
}

/** The state of the whole runner, as the health endpoint answers it. */
export type CdcRunnerState = 'starting' | 'standby' | 'active' | 'stopped' | 'failing';

/** Every source's status; listeners are told after each change. */
export class CdcStatusBoard {
  private readonly sources = new Map<string, CdcSourceStatus>();
  private readonly listeners = new Set<() => void>();

  constructor(names: readonly string[]) {
    for (const source of names) this.sources.set(source, { source, state: 'starting', tables: {} });
  }

  get(source: string): CdcSourceStatus | undefined {
    return this.sources.get(source);
  }

  all(): CdcSourceStatus[] {
    return [...this.sources.values()];
  }

  /** failing if any source failed; else starting while any starts; else standby while any waits; else active while any runs; else stopped. */
  overall(): CdcRunnerState {
    const states = new Set(this.all().map((s) => s.state));
    for (const s of ['failing', 'starting', 'standby', 'active'] as const) if (states.has(s)) return s;
    return 'stopped';
  }

  update(source: string, patch: Partial<Omit<CdcSourceStatus, 'source'>>): void {
    const was = this.sources.get(source) ?? { source, state: 'starting' as const, tables: {} };
    this.sources.set(source, { ...was, ...patch });
    for (const l of this.listeners) l();
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

export interface CdcRunnerOptions {
  readonly logger: Logger;
  /** Only this source (`--source NAME`); default every source with cdc tables. */
  readonly source?: string;
  /** Aborting it drains every source (the engine's `signal`). */
  readonly signal?: AbortSignal;
  /** Local runs: a lease holder proven gone is taken over at once. The Fargate task passes nothing. */
  readonly isHolderDead?: (owner: string) => boolean;
  /** A fresh lease owner id per source [shared/state/lease-owner.ts `localOwner`]. */
  readonly owner?: () => string;
  /** Where statuses go; one is made when not given. */
  readonly board?: CdcStatusBoard;
  readonly clock?: Clock;
}

/** The sources of a spec that have `mode: cdc` tables, in spec order. */
export function cdcSourceNames(spec: Spec): string[] {
  const names = new Set(cdcTables(spec).map((t) => t.source));
  return Object.keys(spec.sources).filter((n) => names.has(n));
}

/** The sources a run captures: `only` (which must have cdc tables), or every one. */
export function selectCdcSources(spec: Spec, only?: string): string[] {
  const names = cdcSourceNames(spec);
  if (only === undefined) {
    if (names.length === 0)
      throw new ConfigError(
        'tables',
        `pipeline ${spec.pipeline} has no mode: cdc table; tidemark cdc captures those (mode: incremental tables run under \`tidemark run\` and the Lambda)`,
      );
    return names;
  }
  if (!spec.sources[only])
    throw new ConfigError(
      '--source',
      `no source "${only}" in pipeline ${spec.pipeline} (known: ${Object.keys(spec.sources).join(', ')})`,
    );
  if (!names.includes(only))
    throw new ConfigError(
      '--source',
      `source "${only}" has no mode: cdc table (sources with cdc tables: ${names.join(', ') || 'none'})`,
    );
  return [only];
}

/**
 * Runs the selected sources until each ends (finite sources), the signal drains them, or one
 * fails (then the others drain and its error is thrown). Returns a summary per source.
 */
export async function runCdcSources(spec: Spec, opts: CdcRunnerOptions): Promise<CdcSummary[]> {
  const names = selectCdcSources(spec, opts.source);
  const board = opts.board ?? new CdcStatusBoard(names);
  const clock = opts.clock ?? Date.now;
  const store = await openStateStore(spec, { clock });
  const sink = openLake(spec, opts.logger);
  // One source failing drains the others.
  const stopAll = new AbortController();
  const onAbort = () => stopAll.abort();
  if (opts.signal?.aborted) stopAll.abort();
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const results = await Promise.allSettled(
      names.map(async (name) => {
        try {
          return await runSource(spec, name, { ...opts, board, clock, store, sink, signal: stopAll.signal });
        } catch (e) {
          stopAll.abort();
          throw e;
        }
      }),
    );
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    return results.map((r) => (r as PromiseFulfilledResult<CdcSummary>).value);
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
  }
}

interface SourceContext {
  readonly logger: Logger;
  readonly board: CdcStatusBoard;
  readonly clock: Clock;
  readonly store: CursorStore;
  readonly sink: Sink;
  readonly signal: AbortSignal;
  readonly isHolderDead?: (owner: string) => boolean;
  readonly owner?: () => string;
}

/** The engine's table settings of a source's cdc tables. */
function tableConfigs(spec: Spec, source: string): CdcTableConfig[] {
  return cdcTables(spec)
    .filter((t) => t.source === source)
    .map((t) => ({
      source: t.table,
      target: tableTarget(t),
      writeMode: t.writeMode,
      exclude: t.exclude,
      onWiden: t.onWiden,
      onTruncate: t.onTruncate,
      insertOnly: t.insertOnly,
      unchangedToast: t.unchangedToast,
      snapshot: t.snapshot,
    }));
}

async function runSource(spec: Spec, name: string, ctx: SourceContext): Promise<CdcSummary> {
  const { board, logger } = ctx;
  const log = logger.child({ pipeline: spec.pipeline, source: name });
  const dims = { pipeline: spec.pipeline, source: name };
  let source: Awaited<ReturnType<NonNullable<ReturnType<typeof driver>['openCdc']>>> | undefined;
  // Active/Standby are sent on every change and then once a minute, so the stack's
  // "standby that never becomes active" alarm always has data points to judge.
  let current: 'active' | 'standby' | undefined;
  const beat = (state?: 'active' | 'standby') => {
    if (state) current = state;
    if (!current) return;
    log.metric('Active', current === 'active' ? 1 : 0, 'Count', dims);
    log.metric('Standby', current === 'standby' ? 1 : 0, 'Count', dims);
  };
  const heartbeat = setInterval(() => beat(), 60_000);
  heartbeat.unref();
  try {
    const s = spec.sources[name]!;
    const settings = cdcSettings(spec, name);
    const reg = driver(s.kind);
    // The spec gate (shared/config/modes.ts) refuses this already; a hand-built spec may not.
    if (!reg.openCdc)
      throw new TidemarkError(
        'SOURCE_NOT_CDC',
        `sources.${name}: the ${s.kind} driver has no change-stream reader`,
      );
    const heartbeatMs = Math.round(settings.heartbeatSeconds * 1000);
    source = await reg.openCdc({
      url: await resolveSourceUrl(s, { name }),
      sourceName: `sources.${name}`,
      connectTimeoutMs: s.connectTimeoutSeconds * 1000,
      ...(settings.slot ? { slot: settings.slot } : {}),
      ...(settings.publication ? { publication: settings.publication } : {}),
      ...(settings.serverId !== undefined ? { serverId: settings.serverId } : {}),
      heartbeatMs,
      clock: ctx.clock,
    });
    const summary = await runCdc({
      pipeline: spec.pipeline,
      sourceName: name,
      writer: writerId(spec.pipeline, name),
      tables: tableConfigs(spec, name),
      lakeFormat: spec.lake.format,
      tableFormat: configuredTableFormat(spec.lake.tableFormat),
      introspector: source,
      streamer: source,
      runtime: {
        heartbeatMs,
        ...(settings.slot ? { slot: settings.slot } : {}),
        ...(settings.publication ? { publication: settings.publication } : {}),
        ...(settings.serverId !== undefined ? { serverId: settings.serverId } : {}),
      },
      store: watchedStore(ctx.store, (value) => onCommit(board, log, name, dims, value)),
      sink: watchedSink(ctx.sink, (bytes) => log.metric('FlushBytes', bytes, 'Bytes', dims)),
      logger,
      clock: ctx.clock,
      owner: (ctx.owner ?? localOwner)(),
      limits: {
        rows: settings.flushRows,
        bytes: settings.flushBytes,
        ms: settings.flushSeconds * 1000,
        maxAckLagMs: settings.maxAckLagSeconds * 1000,
        idleCommitMs: settings.idleCommitSeconds * 1000,
      },
      leaseTtlMs: settings.leaseTtlSeconds * 1000,
      stopTimeoutMs: settings.stopTimeoutSeconds * 1000,
      // The per-source budget, within what the kind allows (0: no opinion).
      snapshot: {
        ...settings.snapshot,
        connections:
          reg.capabilities.maxConnections > 0
            ? Math.min(settings.snapshot.connections, reg.capabilities.maxConnections)
            : settings.snapshot.connections,
      },
      signal: ctx.signal,
      ...(ctx.isHolderDead ? { isHolderDead: ctx.isHolderDead } : {}),
      onState: (state) => {
        board.update(name, { state });
        beat(state);
      },
    });
    board.update(name, { state: 'stopped' });
    log.info(summary.stopped === 'ended' ? 'the change stream ended' : 'stopped: drained', {
      stopped: summary.stopped,
      rows: summary.rows,
      flushes: summary.flushes,
      objects: summary.objects,
      position: summary.position?.display ?? summary.position?.value,
    });
    return summary;
  } catch (e) {
    const code = codeOf(e);
    // The board is served by the health endpoint and printed on the status line: no secret.
    const message = redact(e instanceof Error ? e.message : String(e));
    board.update(name, { state: 'failing', error: { code, message } });
    log.error('the capture failed', { code, error: e });
    log.metric('Errors', 1, 'Count', dims);
    // For `tidemark status`, failed starts included: a note beside the state, written without
    // the lease (the failure may come before it was taken or after it was lost).
    await recordCdcFailure(ctx.store, spec.pipeline, name, cdcFailure(e, ctx.clock())).catch((err: unknown) =>
      log.warn('recording the failure for tidemark status failed', { error: err }),
    );
    throw e;
  } finally {
    clearInterval(heartbeat);
    await source?.close().catch((e: unknown) => log.warn('closing the source failed', { error: e }));
  }
}

/** After a commit: the board's position and tables; metrics of what the commit made durable. */
function onCommit(
  board: CdcStatusBoard,
  log: Logger,
  name: string,
  dims: Record<string, string>,
  value: unknown,
): void {
  let state: CdcState;
  try {
    state = parseCdcState(value);
  } catch {
    return;
  }
  const before = board.get(name)?.tables ?? {};
  const tables: Record<string, CdcTableStatus> = {};
  let lagMs: number | undefined;
  for (const [target, t] of Object.entries(state.tables)) {
    const was = before[target];
    tables[target] = {
      rows: t.rows,
      objects: t.objects,
      ...(t.lastFlushAt ? { lastFlushAt: t.lastFlushAt } : {}),
      ...(t.lagMs !== undefined ? { lagMs: t.lagMs } : {}),
      ...(t.snapshot
        ? { snapshot: { state: t.snapshot.state, rows: t.snapshot.rows, chunks: t.snapshot.chunks } }
        : {}),
    };
    const flushed = was !== undefined && t.lastFlushAt !== undefined && t.lastFlushAt !== was.lastFlushAt;
    if (was !== undefined && t.rows > was.rows)
      log.metric('Rows', t.rows - was.rows, 'Count', { ...dims, table: target });
    if (was !== undefined && t.objects > was.objects)
      log.metric('Objects', t.objects - was.objects, 'Count', { ...dims, table: target });
    if (flushed && t.lagMs !== undefined) {
      log.metric('LagSeconds', t.lagMs / 1000, 'Seconds', { ...dims, table: target });
      lagMs = Math.max(lagMs ?? 0, t.lagMs);
    }
  }
  // Per source too: the CDK stack's lag alarm watches {pipeline, source}.
  if (lagMs !== undefined) log.metric('LagSeconds', lagMs / 1000, 'Seconds', dims);
  board.update(name, {
    tables,
    ...(state.position ? { position: state.position.display ?? state.position.value } : {}),
    ...(state.lastCommitAt ? { lastCommitAt: state.lastCommitAt } : {}),
  });
}

/** The store, telling `committed` the value of every successful commit. */
function watchedStore(store: CursorStore, committed: (value: unknown) => void): CursorStore {
  return new Proxy(store, {
    get(target, key) {
      if (key === 'commit') {
        return async (...args: Parameters<CursorStore['commit']>) => {
          const r = await target.commit(...args);
          committed(args[1].value);
          return r;
        };
      }
      const v = Reflect.get(target, key) as unknown;
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

/** The sink, telling `written` the bytes of every object it wrote. */
function watchedSink(sink: Sink, written: (bytes: number) => void): Sink {
  return new Proxy(sink, {
    get(target, key) {
      if (key === 'write') {
        return async (...args: Parameters<Sink['write']>) => {
          const refs = await target.write(...args);
          const bytes = refs.reduce((n, r) => n + r.bytes, 0);
          if (refs.length > 0) written(bytes);
          return refs;
        };
      }
      const v = Reflect.get(target, key) as unknown;
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}
