/**
 * The CDC engine snapshotting one Postgres table in a process of its own, for the snapshot crash
 * test (test/integration/postgres-snapshot-crash.test.ts), which SIGKILLs it mid-snapshot:
 *
 *   node --import tsx test/harness/pg-snapshot-child.ts '<SnapshotChildConfig JSON>'
 *
 * Every chunk read appends its key range to `<dir>/reads` (fsync'd) before it starts. With
 * `kill`, once `nth` chunks landed, at `kill.point` of the first flush after the last landing
 * (a landed window is held until its table's next flush: `chunk-landed`: at the landing itself;
 * `after-write`: that flush's object written, not committed; `after-commit`: committed, not
 * acknowledged; `idle-while-held`: an idle commit acknowledged while the last landing is still
 * held, no flush since), the process appends the point and the COMMITTED snapshot progress to
 * `<dir>/kills` and SIGKILLs itself. With `mutation`, one protocol step is replaced by a broken
 * one (./mutations.ts): the crash test must then see the lake go wrong. SIGTERM drains. The run
 * itself (state, lake, mutations, engine options) is the one every crash child shares
 * (./cdc-crash-child.ts `runEngineChild`).
 */
import { PostgresCdcSource } from '../../shared/drivers/postgres/cdc/source.js';
import { parseCdcState } from '../../shared/engine/cdc/state.js';
import { CRASH_SOURCE_NAME, childMain, killSelf, runEngineChild } from './cdc-crash-child.js';
import { type ChildPoint, CRASH_STATE_KEY } from './cdc-crash-config.js';
import { record } from './mutations.js';
import { hookedStreamer } from './pg-snapshot.js';

export interface SnapshotChildConfig {
  readonly dir: string;
  readonly url: string;
  readonly slot: string;
  readonly table: string;
  readonly chunkRows: number;
  readonly kill?: {
    readonly point: 'chunk-landed' | 'after-write' | 'after-commit' | 'after-apply' | 'idle-while-held';
    readonly nth: number;
  };
  readonly mutation?: 'noop-recover' | 'commit-before-write' | 'catalog-first' | 'eager-range-done';
  /** Flush limits (defaults: 5000 rows, the crash child's 1 s age); idle commit (default 1 s). */
  readonly flushRows?: number;
  readonly flushMs?: number;
  readonly idleCommitMs?: number;
  /** The snapshot's rate limit (`cdc.snapshot.rowsPerSecond`), if any. */
  readonly rowsPerSecond?: number;
  /** `iceberg`: the table is an Iceberg table (a `file` catalog in the lake). */
  readonly tableFormat?: 'iceberg';
}

export const SNAPSHOT_STATE_KEY = CRASH_STATE_KEY;

childMain(async () => {
  const config = JSON.parse(process.argv[2]!) as SnapshotChildConfig;
  const source = new PostgresCdcSource({
    url: config.url,
    sourceName: CRASH_SOURCE_NAME,
    connectTimeoutMs: 10_000,
    slot: config.slot,
    publication: config.slot,
    heartbeatMs: 1000,
  });
  const kill = config.kill;
  await runEngineChild({
    dir: config.dir,
    ...(config.mutation ? { mutation: config.mutation } : {}),
    ...(config.tableFormat ? { tableFormat: config.tableFormat } : {}),
    source,
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
    runtime: { heartbeatMs: 1000, slot: config.slot, publication: config.slot },
    streamer: () =>
      hookedStreamer(source as never, {
        beforeRead: (range) => record(config.dir, 'reads', JSON.stringify({ pid: process.pid, range })),
      }),
    flushRows: config.flushRows ?? 5000,
    idleCommitMs: config.idleCommitMs ?? 1000,
    ...(config.flushMs !== undefined ? { flushMs: config.flushMs, maxAckLagMs: 2 * config.flushMs } : {}),
    snapshot: {
      chunkRows: config.chunkRows,
      connections: 1,
      ...(config.rowsPerSecond ? { rowsPerSecond: config.rowsPerSecond } : {}),
    },
    faults: async (plainStore) => {
      let landings = 0;
      let inLanding = false;
      // No flush wrote anything since the last landing: its window is still held.
      let held = false;
      return async (point: ChildPoint) => {
        if (point === 'chunk-landed') {
          landings++;
          inLanding = true;
          held = true;
        }
        if (point === 'before-write' || point === 'after-write') held = false;
        const hit =
          kill &&
          landings >= kill.nth &&
          (kill.point === 'idle-while-held'
            ? point === 'after-ack' && held
            : inLanding && point === kill.point);
        // The step that writes a landing's rows ends with its state commit (an Iceberg table's:
        // its catalog commit).
        const last = config.tableFormat === 'iceberg' ? 'after-apply' : 'after-commit';
        if (point === last || point === 'after-ack') inLanding = false;
        if (!hit) return;
        const rec = await plainStore.load(SNAPSHOT_STATE_KEY);
        const snapshot = parseCdcState(rec.value).tables[config.table]?.snapshot ?? null;
        await killSelf(config.dir, { point: kill.point, at: point, nth: kill.nth, snapshot });
      };
    },
  });
});
