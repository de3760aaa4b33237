/**
 * The CDC engine over the real Postgres pgoutput reader in a process of its own, for the pgbench
 * crash test (test/integration/postgres-cdc-crash.test.ts) that SIGKILLs it at named points of
 * the commit protocol:
 *
 *   node --import tsx test/harness/pg-cdc-child.ts '<PgChildConfig JSON>'
 *
 * Runs `runCdc` (not the CLI) on `PostgresCdcSource` with a file state store and a file lake in
 * `dir`, capturing the four pgbench tables. With `kill`, the `nth` time the engine reaches
 * `kill.point` the process appends one JSON line to `<dir>/kills` (fsync'd: the point, nth, and
 * the committed state position read back through the store) and SIGKILLs itself, so the parent
 * knows exactly where each kill landed. With `mutation`, one step of the protocol is replaced by
 * a broken one (the crash test must then detect a violation): a wrapper injected here, never a
 * switch in production code. SIGTERM drains (flush, commit, ack, release) and exits 0.
 */
import { join } from 'node:path';
import type { Streamer } from '../../shared/contracts/cdc.js';
import type { Sink } from '../../shared/contracts/sink.js';
import type { CursorStore } from '../../shared/contracts/state.js';
import { PostgresCdcSource } from '../../shared/drivers/postgres/cdc/source.js';
import type { CdcPoint, CdcTableConfig } from '../../shared/engine/cdc/options.js';
import { runCdc } from '../../shared/engine/cdc/run.js';
import { parseCdcState } from '../../shared/engine/cdc/state.js';
import { createLogger } from '../../shared/observability/log.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { ParquetSink } from '../../shared/sink/parquet-sink.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { isProvablyDead, localOwner } from '../../shared/state/lease-owner.js';
import { ackBeforeCommit, commitBeforeWrite, noopRecover, record } from './mutations.js';
import {
  type KillLine,
  PG_LEASE_TTL_MS,
  PG_PIPELINE,
  PG_RENEW_EVERY_MS,
  PG_SOURCE,
  PG_STATE_KEY,
  PGBENCH_TABLES,
  type PgChildConfig,
} from './pg-cdc-crash-config.js';

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2]!) as PgChildConfig;
  const logger = createLogger({ json: true, level: 'info', metrics: false });
  const source = new PostgresCdcSource({
    url: config.url,
    sourceName: `sources.${PG_SOURCE}`,
    connectTimeoutMs: 10_000,
    slot: config.slot,
    publication: config.publication,
    heartbeatMs: 1000,
  });
  let sink: Sink = new ParquetSink({ store: new FileObjectStore(join(config.dir, 'lake')) });
  let store: CursorStore = new FileCursorStore(join(config.dir, 'state'));
  const plainStore = store;
  let streamer: Streamer = source;
  if (config.mutation === 'ack-before-commit') streamer = ackBeforeCommit(streamer);
  if (config.mutation === 'noop-recover') sink = noopRecover(sink);
  if (config.mutation === 'commit-before-write') ({ sink, store } = commitBeforeWrite(sink, store));

  const kill = config.kill;
  let seen = 0;
  const startedAt = parseCdcState((await plainStore.load(PG_STATE_KEY)).value).position?.value ?? null;
  const faults = async (point: CdcPoint): Promise<void> => {
    if (!kill || point !== kill.point) return;
    const rec = await plainStore.load(PG_STATE_KEY);
    const committed = parseCdcState(rec.value).position?.value ?? null;
    if (kill.moved && committed === startedAt) return;
    if (++seen !== kill.nth) return;
    const line: KillLine = { point, nth: kill.nth, committed };
    record(config.dir, 'kills', JSON.stringify(line));
    process.kill(process.pid, 'SIGKILL');
    // SIGKILL is delivered at once; never go on past the kill point.
    await new Promise(() => undefined);
  };

  const stop = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => stop.abort());
  const tables: CdcTableConfig[] = PGBENCH_TABLES.map((t) => ({
    source: t.source,
    target: t.source,
    writeMode: t.writeMode,
    exclude: [],
    onWiden: 'stop',
    onTruncate: 'record',
  }));
  try {
    const summary = await runCdc({
      pipeline: PG_PIPELINE,
      sourceName: PG_SOURCE,
      writer: `${PG_PIPELINE}.${PG_SOURCE}`,
      tables,
      introspector: source,
      streamer,
      runtime: { heartbeatMs: 1000, slot: config.slot, publication: config.publication },
      store,
      sink,
      logger,
      clock: Date.now,
      owner: localOwner(),
      limits: {
        rows: config.flushRows ?? 200,
        bytes: 64 * 2 ** 20,
        ms: 1000,
        maxAckLagMs: 2000,
        idleCommitMs: config.idleCommitMs ?? 1000,
      },
      leaseTtlMs: PG_LEASE_TTL_MS,
      renewEveryMs: PG_RENEW_EVERY_MS,
      stopTimeoutMs: 30_000,
      signal: stop.signal,
      // A killed child's lease is taken over at once: its process is provably gone.
      isHolderDead: isProvablyDead,
      faults,
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
