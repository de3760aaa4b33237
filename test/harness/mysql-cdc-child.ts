/**
 * The CDC engine over the real MySQL/MariaDB binlog reader in a process of its own, for the
 * MySQL crash test (test/integration/mysql-cdc-crash.test.ts) that SIGKILLs it at named points of
 * the commit protocol:
 *
 *   node --import tsx test/harness/mysql-cdc-child.ts '<MyChildConfig JSON>'
 *
 * Runs `runCdc` (not the CLI) on `MysqlCdcSource` with a file state store and a file lake in
 * `dir`, capturing `<database>.accounts`, `.orders` and `.events`. With `kill`, the `nth` time
 * the engine reaches `kill.point` the process appends one JSON line to `<dir>/kills` (fsync'd:
 * the point, nth, and the committed state position read back through the store) and SIGKILLs
 * itself. Every `setConfirmed` the engine calls is checked against the committed state (MySQL
 * keeps no replica position on the server, so this is where an early ack shows): one past the
 * durable position appends a line to `<dir>/violations` (fsync'd). With `mutation`, one step of
 * the protocol is replaced by a broken one (a wrapper injected here, never a switch in
 * production code). SIGTERM drains (flush, commit, ack, release) and exits 0.
 */
import { join } from 'node:path';
import type { Reader, SourcePosition, Streamer } from '../../shared/contracts/cdc.js';
import type { Sink } from '../../shared/contracts/sink.js';
import type { CursorStore } from '../../shared/contracts/state.js';
import { MysqlCdcSource } from '../../shared/drivers/mysql/cdc/source.js';
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
  compareBinlog,
  type KillLine,
  MY_LEASE_TTL_MS,
  MY_PIPELINE,
  MY_RENEW_EVERY_MS,
  MY_SOURCE,
  MY_STATE_KEY,
  MY_TABLES,
  type MyChildConfig,
} from './mysql-cdc-crash-config.js';

/**
 * Checks each `setConfirmed` against the committed state position (read through `store`, the
 * unwrapped one): an ack past it is recorded in `<dir>/violations`.
 */
function checkedStreamer(inner: Streamer, store: CursorStore, dir: string): Streamer {
  return {
    async openReader(tables, runtime) {
      const reader = await inner.openReader(tables, runtime);
      const setConfirmed = async (position: SourcePosition) => {
        const committed = parseCdcState((await store.load(MY_STATE_KEY)).value).position;
        if (committed === undefined || compareBinlog(position.value, committed.value) > 0)
          record(
            dir,
            'violations',
            JSON.stringify({ acked: position.value, committed: committed?.value ?? null }),
          );
        await reader.setConfirmed(position);
      };
      return new Proxy(reader, {
        get(target, key) {
          if (key === 'setConfirmed') return setConfirmed;
          const v = Reflect.get(target, key) as unknown;
          return typeof v === 'function' ? v.bind(target) : v;
        },
      }) as Reader;
    },
  };
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2]!) as MyChildConfig;
  const logger = createLogger({ json: true, level: 'info', metrics: false });
  const source = new MysqlCdcSource({
    url: config.url,
    sourceName: `sources.${MY_SOURCE}`,
    connectTimeoutMs: 10_000,
    serverId: config.serverId,
    heartbeatMs: 1000,
  });
  let sink: Sink = new ParquetSink({ store: new FileObjectStore(join(config.dir, 'lake')) });
  let store: CursorStore = new FileCursorStore(join(config.dir, 'state'));
  const plainStore = store;
  // The check sits between the engine (or the broken early ack) and the reader: every ack,
  // whoever sends it, passes through it.
  let streamer: Streamer = checkedStreamer(source, plainStore, config.dir);
  if (config.mutation === 'ack-before-commit') streamer = ackBeforeCommit(streamer);
  if (config.mutation === 'noop-recover') sink = noopRecover(sink);
  if (config.mutation === 'commit-before-write') ({ sink, store } = commitBeforeWrite(sink, store));

  const kill = config.kill;
  let seen = 0;
  const faults = async (point: CdcPoint): Promise<void> => {
    if (!kill || point !== kill.point || ++seen !== kill.nth) return;
    const rec = await plainStore.load(MY_STATE_KEY);
    const committed = parseCdcState(rec.value).position?.value ?? null;
    const line: KillLine = { point, nth: kill.nth, committed };
    record(config.dir, 'kills', JSON.stringify(line));
    process.kill(process.pid, 'SIGKILL');
    // SIGKILL is delivered at once; never go on past the kill point.
    await new Promise(() => undefined);
  };

  const stop = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => stop.abort());
  const tables: CdcTableConfig[] = MY_TABLES.map((t) => ({
    source: `${config.database}.${t}`,
    target: `${config.database}.${t}`,
    writeMode: 'upsert',
    exclude: [],
    onWiden: 'stop',
    onTruncate: 'record',
  }));
  try {
    const summary = await runCdc({
      pipeline: MY_PIPELINE,
      sourceName: MY_SOURCE,
      writer: `${MY_PIPELINE}.${MY_SOURCE}`,
      tables,
      introspector: source,
      streamer,
      runtime: { heartbeatMs: 1000, serverId: config.serverId },
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
      leaseTtlMs: MY_LEASE_TTL_MS,
      renewEveryMs: MY_RENEW_EVERY_MS,
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
