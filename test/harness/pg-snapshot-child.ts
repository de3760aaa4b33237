/**
 * The CDC engine snapshotting one Postgres table in a process of its own, for the snapshot crash
 * test (test/integration/postgres-snapshot-crash.test.ts), which SIGKILLs it mid-snapshot:
 *
 *   node --import tsx test/harness/pg-snapshot-child.ts '<SnapshotChildConfig JSON>'
 *
 * Every chunk read appends its key range to `<dir>/reads` (fsync'd) before it starts. With
 * `kill`, at the `nth` chunk landing, at `kill.point` of that landing's flush (`chunk-landed`:
 * before it; `after-write`: its object written, not committed; `after-commit`: committed, not
 * acknowledged), the process appends the point and the COMMITTED snapshot progress to
 * `<dir>/kills` and SIGKILLs itself. With `mutation`, one protocol step is replaced by a broken
 * one (./mutations.ts): the crash test must then see the lake go wrong. SIGTERM drains.
 */
import { join } from 'node:path';
import type { Sink } from '../../shared/contracts/sink.js';
import type { CursorStore } from '../../shared/contracts/state.js';
import { PostgresCdcSource } from '../../shared/drivers/postgres/cdc/source.js';
import type { CdcPoint } from '../../shared/engine/cdc/options.js';
import { runCdc } from '../../shared/engine/cdc/run.js';
import { parseCdcState } from '../../shared/engine/cdc/state.js';
import { createLogger } from '../../shared/observability/log.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { ParquetSink } from '../../shared/sink/parquet-sink.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { isProvablyDead, localOwner } from '../../shared/state/lease-owner.js';
import { commitBeforeWrite, noopRecover, record } from './mutations.js';
import { hookedStreamer } from './pg-snapshot.js';

export interface SnapshotChildConfig {
  readonly dir: string;
  readonly url: string;
  readonly slot: string;
  readonly table: string;
  readonly chunkRows: number;
  readonly kill?: { readonly point: 'chunk-landed' | 'after-write' | 'after-commit'; readonly nth: number };
  readonly mutation?: 'noop-recover' | 'commit-before-write';
}

export const SNAPSHOT_STATE_KEY = 'cdc#p#src';

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2]!) as SnapshotChildConfig;
  const logger = createLogger({ json: true, level: 'info', metrics: false });
  const source = new PostgresCdcSource({
    url: config.url,
    sourceName: 'sources.src',
    connectTimeoutMs: 10_000,
    slot: config.slot,
    publication: config.slot,
    heartbeatMs: 1000,
  });
  let sink: Sink = new ParquetSink({ store: new FileObjectStore(join(config.dir, 'lake')) });
  let store: CursorStore = new FileCursorStore(join(config.dir, 'state'));
  const plainStore = store;
  if (config.mutation === 'noop-recover') sink = noopRecover(sink);
  if (config.mutation === 'commit-before-write') ({ sink, store } = commitBeforeWrite(sink, store));
  const streamer = hookedStreamer(source as never, {
    beforeRead: (range) => record(config.dir, 'reads', JSON.stringify({ pid: process.pid, range })),
  });

  const kill = config.kill;
  let landings = 0;
  let inLanding = false;
  const faults = async (point: CdcPoint): Promise<void> => {
    if (point === 'chunk-landed') {
      landings++;
      inLanding = true;
    }
    const hit = kill && inLanding && landings === kill.nth && point === kill.point;
    if (point === 'after-commit' || point === 'after-ack') inLanding = false;
    if (!hit) return;
    const rec = await plainStore.load(SNAPSHOT_STATE_KEY);
    const snapshot = parseCdcState(rec.value).tables[config.table]?.snapshot ?? null;
    record(config.dir, 'kills', JSON.stringify({ point, nth: kill.nth, snapshot }));
    process.kill(process.pid, 'SIGKILL');
    await new Promise(() => undefined);
  };

  const stop = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => stop.abort());
  try {
    const summary = await runCdc({
      pipeline: 'p',
      sourceName: 'src',
      writer: 'p.src',
      tables: [
        {
          source: config.table,
          target: config.table,
          writeMode: 'upsert',
          exclude: [],
          onWiden: 'stop',
          onTruncate: 'record',
          snapshot: 'initial',
        },
      ],
      introspector: source,
      streamer,
      runtime: { heartbeatMs: 1000, slot: config.slot, publication: config.slot },
      store,
      sink,
      logger,
      clock: Date.now,
      owner: localOwner(),
      limits: { rows: 5000, bytes: 64 * 2 ** 20, ms: 1000, maxAckLagMs: 2000, idleCommitMs: 1000 },
      leaseTtlMs: 15_000,
      renewEveryMs: 2000,
      stopTimeoutMs: 30_000,
      signal: stop.signal,
      isHolderDead: isProvablyDead,
      faults,
      snapshot: { chunkRows: config.chunkRows, connections: 1 },
    });
    process.stdout.write(`${JSON.stringify(summary)}\n`);
  } finally {
    await source.close();
  }
  process.exitCode = 0;
}

main().catch((e: unknown) => {
  process.stderr.write(`${(e as { code?: string }).code ?? 'ERROR'}: ${String((e as Error).stack ?? e)}\n`);
  process.exit(1);
});
