/**
 * Helpers of the Postgres snapshot tests: the CDC engine over the real Postgres source in this
 * process, with the snapshot source wrapped (a hook after each chunk read, or the visibility
 * check taken away: a wrapper injected here, never a switch in production code), and the state
 * read back.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Streamer } from '../../shared/contracts/cdc.js';
import type { KeyRange, SnapshotSource, TableChunker } from '../../shared/contracts/snapshot.js';
import { PostgresCdcSource } from '../../shared/drivers/postgres/cdc/source.js';
import type { CdcSummary, CdcTableConfig } from '../../shared/engine/cdc/options.js';
import { runCdc } from '../../shared/engine/cdc/run.js';
import type { SnapshotSettings } from '../../shared/engine/cdc/snapshot.js';
import { type CdcState, parseCdcState } from '../../shared/engine/cdc/state.js';
import { createLogger } from '../../shared/observability/log.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { ParquetSink } from '../../shared/sink/parquet-sink.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { localOwner } from '../../shared/state/lease-owner.js';

export interface SnapshotHooks {
  /** Called before each chunk read starts. */
  beforeRead?(range: KeyRange): void | Promise<void>;
  /** Called after each chunk read returned (its high watermark is made). */
  afterRead?(range: KeyRange): Promise<void>;
  /** Mutation: the chunk's invisible transactions are not passed on (no visibility check). */
  dropInvisible?: boolean;
}

/** Wraps a streamer's snapshot source with `hooks`. */
export function hookedStreamer(
  streamer: Streamer & { openSnapshot: NonNullable<Streamer['openSnapshot']> },
  hooks: SnapshotHooks,
): Streamer {
  return {
    openReader: (tables, runtime) => streamer.openReader(tables, runtime),
    async openSnapshot(options) {
      const inner = await streamer.openSnapshot(options);
      const wrapped: SnapshotSource = {
        connections: inner.connections,
        close: () => inner.close(),
        chunker(ref, schema) {
          const c = inner.chunker(ref, schema);
          const out: TableChunker = {
            nextBound: (after, rows, signal) => c.nextBound(after, rows, signal),
            async read(req, window, ids, signal) {
              await hooks.beforeRead?.(req.range);
              await c.read(
                req,
                {
                  expect: (id, role, at) => window.expect(id, role, at),
                  ready: (rows) => {
                    const { invisible: _dropped, ...rest } = rows;
                    window.ready(hooks.dropInvisible ? rest : rows);
                  },
                },
                ids,
                signal,
              );
              await hooks.afterRead?.(req.range);
            },
          };
          if (c.estimateRows) out.estimateRows = () => c.estimateRows!();
          return out;
        },
      };
      return wrapped;
    },
  };
}

export interface InProcessCapture {
  readonly dir: string;
  readonly logs: string[];
  readonly done: Promise<CdcSummary>;
  state(): Promise<CdcState>;
  /** Waits until `pred(state)` holds, or throws after `timeoutMs` (with the last logs). */
  until(pred: (s: CdcState) => boolean, timeoutMs: number): Promise<CdcState>;
  stop(): Promise<CdcSummary>;
}

/** Runs the CDC engine over the real Postgres source for `tables`, in this process. */
export function captureInProcess(opts: {
  url: string;
  slot: string;
  tables: readonly { source: string; snapshot: 'initial' | 'never' }[];
  snapshot: SnapshotSettings;
  hooks?: SnapshotHooks;
}): InProcessCapture {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-pgsnap-'));
  const logs: string[] = [];
  const logger = createLogger({ json: true, level: 'info', write: (l) => logs.push(l), metrics: false });
  const source = new PostgresCdcSource({
    url: opts.url,
    sourceName: 'sources.src',
    connectTimeoutMs: 10_000,
    slot: opts.slot,
    publication: opts.slot,
    heartbeatMs: 1000,
  });
  const streamer = opts.hooks ? hookedStreamer(source as never, opts.hooks) : source;
  const store = new FileCursorStore(join(dir, 'state'));
  const stop = new AbortController();
  const tables: CdcTableConfig[] = opts.tables.map((t) => ({
    source: t.source,
    target: t.source,
    writeMode: 'upsert',
    exclude: [],
    onWiden: 'stop',
    onTruncate: 'record',
    snapshot: t.snapshot,
  }));
  const done = runCdc({
    pipeline: 'p',
    sourceName: 'src',
    writer: 'p.src',
    tables,
    introspector: source,
    streamer,
    runtime: { heartbeatMs: 1000, slot: opts.slot, publication: opts.slot },
    store,
    sink: new ParquetSink({ store: new FileObjectStore(join(dir, 'lake')) }),
    logger,
    clock: Date.now,
    owner: localOwner(),
    limits: { rows: 50_000, bytes: 64 * 2 ** 20, ms: 1000, maxAckLagMs: 5000, idleCommitMs: 1000 },
    leaseTtlMs: 60_000,
    stopTimeoutMs: 60_000,
    signal: stop.signal,
    snapshot: opts.snapshot,
  }).finally(() => source.close());
  let failure: unknown;
  done.catch((e: unknown) => {
    failure = e;
  });
  const state = async () => parseCdcState((await store.load('cdc#p#src')).value);
  return {
    dir,
    logs,
    done,
    state,
    async until(pred, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (failure !== undefined) throw failure;
        const s = await state();
        if (pred(s)) return s;
        if (Date.now() > deadline)
          throw new Error(
            `the capture did not reach the condition in ${timeoutMs} ms; state ${JSON.stringify(s).slice(0, 2000)}; logs:\n${logs.slice(-20).join('\n')}`,
          );
        await new Promise((r) => setTimeout(r, 200));
      }
    },
    async stop() {
      stop.abort();
      return done;
    },
  };
}

/** Whether every listed table's snapshot is complete in `s`. */
export function snapshotsComplete(s: CdcState, tables: readonly string[]): boolean {
  return tables.every((t) => s.tables[t]?.snapshot?.state === 'complete');
}
