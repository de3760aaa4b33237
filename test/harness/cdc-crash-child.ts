/**
 * The body every driver's CDC crash child shares (./pg-cdc-child.ts, ./mysql-cdc-child.ts): runs
 * `runCdc` (not the CLI) on the driver's real source with a file state store and a file lake in
 * `config.dir`, for the crash suites (test/integration/cdc-crash/) that SIGKILL it at named
 * points of the commit protocol.
 *
 * With `kill`, the `nth` time the engine reaches `kill.point` the process appends one JSON line
 * to `<dir>/kills` (fsync'd: the point, nth, and the committed state position read back through
 * the store) and SIGKILLs itself, so the parent knows exactly where each kill landed. With
 * `mutation`, one step of the protocol is replaced by a broken one (./mutations.ts: a wrapper
 * injected here, never a switch in production code). SIGTERM drains (flush, commit, ack,
 * release) and exits 0. With Iceberg tables every upsert table keeps a history table
 * (`<target>_history`); a child to be killed at the harness's own point `between-tables` has its
 * sink wrapped (`killBetweenTables`) so the kill lands between the two tables' catalog commits.
 *
 * Below it, the run every crash child of the CDC engine shares (`runEngineChild`: also the
 * snapshot crash child's, ./pg-snapshot-child.ts): the file state and lake, the mutation
 * injected under the kill points, the engine's options, the drain on SIGTERM; and the kill
 * itself (`killSelf`).
 */
import { join } from 'node:path';
import type { CdcRuntime, Streamer } from '../../shared/contracts/cdc.js';
import type { ClosableCdcSource } from '../../shared/contracts/driver.js';
import type { PendingCommit, Sink } from '../../shared/contracts/sink.js';
import type { CursorStore } from '../../shared/contracts/state.js';
import type { CdcRunOptions, CdcTableConfig } from '../../shared/engine/cdc/options.js';
import { runCdc } from '../../shared/engine/cdc/run.js';
import { parseCdcState } from '../../shared/engine/cdc/state.js';
import { openLakeCatalog } from '../../shared/iceberg/open-catalog.js';
import { createLogger } from '../../shared/observability/log.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { LakeSink } from '../../shared/sink/lake-sink.js';
import { ParquetSink } from '../../shared/sink/parquet-sink.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { isProvablyDead, localOwner } from '../../shared/state/lease-owner.js';
import {
  type ChildPoint,
  CRASH_LEASE_TTL_MS,
  CRASH_PIPELINE,
  CRASH_RENEW_EVERY_MS,
  CRASH_SOURCE,
  CRASH_STATE_KEY,
  type CrashChildConfig,
  type CrashMutation,
  type KillLine,
} from './cdc-crash-config.js';
import {
  ackBeforeCommit,
  catalogFirst,
  commitBeforeWrite,
  eagerRangeDone,
  noopRecover,
  record,
} from './mutations.js';
import { sinkWith } from './wrap.js';

/** What a driver's child gives the shared body. */
export interface CrashChildDriver {
  /** The driver's CDC source (`sourceName: sources.<CRASH_SOURCE>`), closed at the end. */
  readonly source: ClosableCdcSource;
  /** The captured tables. */
  readonly tables: readonly CdcTableConfig[];
  readonly runtime: CdcRuntime;
  /**
   * Wraps the source's streamer before any mutation does, with the unwrapped store (the MySQL
   * child's ack check: every ack, whoever sends it, passes through it).
   */
  readonly checkAcks?: (streamer: Streamer, store: CursorStore) => Streamer;
}

/** The CRASH_SOURCE name a driver's source is built with. */
export const CRASH_SOURCE_NAME = `sources.${CRASH_SOURCE}`;

/**
 * Runs the engine on the config in argv[2] (JSON, the driver's `C`) until SIGTERM (or the kill);
 * the process exits 1 on an error.
 */
export function runCrashChild<C extends CrashChildConfig>(open: (config: C) => CrashChildDriver): void {
  childMain(async () => {
    const config = JSON.parse(process.argv[2]!) as C;
    const { source, tables, runtime, checkAcks } = open(config);
    const kill = config.kill;
    await runEngineChild({
      dir: config.dir,
      mutation: config.mutation,
      ...(config.tableFormat
        ? { tableFormat: config.tableFormat, history: { killBetween: kill?.point === 'between-tables' } }
        : {}),
      source,
      tables,
      runtime,
      streamer: (plainStore) => (checkAcks ? checkAcks(source, plainStore) : source),
      flushRows: config.flushRows ?? 200,
      idleCommitMs: config.idleCommitMs ?? 1000,
      faults: async (plainStore) => {
        let seen = 0;
        const committedNow = async (): Promise<string | null> =>
          parseCdcState((await plainStore.load(CRASH_STATE_KEY)).value).position?.value ?? null;
        const startedAt = await committedNow();
        return async (point) => {
          if (!kill || point !== kill.point) return;
          if (kill.moved && (await committedNow()) === startedAt) return;
          if (++seen !== kill.nth) return;
          const line: KillLine = { point, nth: kill.nth, committed: await committedNow() };
          await killSelf(config.dir, line);
        };
      },
    });
  });
}

/** One engine run in a crash test's child process: what differs between the children. */
export interface EngineChild {
  /** The child's directory: its state (`state/`), lake (`lake/`) and records. */
  readonly dir: string;
  /** The broken protocol step to inject (./mutations.ts), if any. */
  readonly mutation?: CrashMutation;
  /** The CDC source (`sourceName: sources.<CRASH_SOURCE>`), closed at the end. */
  readonly source: ClosableCdcSource;
  readonly tables: readonly CdcTableConfig[];
  readonly runtime: CdcRuntime;
  /** The streamer the engine reads, given the unwrapped store (a mutation wraps it in turn). */
  readonly streamer: (plainStore: CursorStore) => Streamer;
  /**
   * The fault hook (where the child kills itself), given the unwrapped store: the engine's points,
   * and `between-tables` (`killBetweenTables`) when the tables keep histories.
   */
  readonly faults: (plainStore: CursorStore) => Promise<(point: ChildPoint) => Promise<void>>;
  /** Flush a table at this many pending rows. */
  readonly flushRows: number;
  /** With nothing pending, commit a newer resume position at least this often. */
  readonly idleCommitMs: number;
  /** Flush a table whose oldest pending row is this old (default 1000), and by maxAckLag (default 2000). */
  readonly flushMs?: number;
  readonly maxAckLagMs?: number;
  readonly snapshot?: CdcRunOptions['snapshot'];
  /** `iceberg`: Iceberg tables in a `file` catalog under the lake (default plain). */
  readonly tableFormat?: 'iceberg';
  /**
   * With `tableFormat` `iceberg`: every upsert table keeps its history table `<target>_history`
   * (the LakeSink's `history`). `killBetween`: the sink is wrapped by `killBetweenTables` (only in
   * a child that is to be killed there: every other child applies both commits as production does).
   */
  readonly history?: { readonly killBetween: boolean };
}

/**
 * `inner` whose `apply` of a commit with a history applies the history table's commit, then
 * calls `faults('between-tables')` (where the child may kill itself), then applies the commit
 * itself as the sink does (its own re-apply of the history is a no-op: each catalog commit is
 * idempotent by its commit id). A kill there leaves what a crash between the two tables' catalog
 * commits leaves; recovery must finish it from the state.
 */
export function killBetweenTables(inner: Sink, faults: (point: ChildPoint) => Promise<void>): Sink {
  if (!inner.apply) return inner;
  return sinkWith(inner, {
    apply: async (pending: PendingCommit) => {
      if (pending.history) {
        await inner.apply!(pending.history);
        await faults('between-tables');
      }
      await inner.apply!(pending);
    },
  });
}

/**
 * Runs `runCdc` on a file state store and a file lake in `child.dir`, the mutation injected
 * under the kill points, until SIGTERM or SIGINT (which drain: flush, commit, ack, release);
 * prints the summary (JSON) on stdout.
 */
export async function runEngineChild(child: EngineChild): Promise<void> {
  const logger = createLogger({ json: true, level: 'info', metrics: false });
  const { source, mutation } = child;
  const lakeStore = new FileObjectStore(join(child.dir, 'lake'));
  const parquet = new ParquetSink({ store: lakeStore });
  const history =
    child.tableFormat === 'iceberg' && child.history
      ? Object.fromEntries(
          child.tables.filter((t) => t.writeMode === 'upsert').map((t) => [t.target, `${t.target}_history`]),
        )
      : undefined;
  // Bound below, where the hook is built (after the mutations); the wrapper calls it at applies only.
  let faults: ((point: ChildPoint) => Promise<void>) | undefined;
  let sink: Sink =
    child.tableFormat === 'iceberg'
      ? new LakeSink({
          parquet,
          catalog: openLakeCatalog({ type: 'file' }, { store: lakeStore, prefix: '' }),
          ...(history ? { history } : {}),
        })
      : parquet;
  if (history && child.history?.killBetween) sink = killBetweenTables(sink, (point) => faults!(point));
  let store: CursorStore = new FileCursorStore(join(child.dir, 'state'));
  const plainStore = store;
  let streamer = child.streamer(plainStore);
  if (mutation === 'ack-before-commit') streamer = ackBeforeCommit(streamer);
  if (mutation === 'noop-recover') sink = noopRecover(sink);
  if (mutation === 'commit-before-write') ({ sink, store } = commitBeforeWrite(sink, store));
  if (mutation === 'catalog-first') sink = catalogFirst(sink);
  if (mutation === 'eager-range-done') ({ streamer, store } = eagerRangeDone(streamer, store));
  faults = await child.faults(plainStore);

  const stop = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => stop.abort());
  try {
    const summary = await runCdc({
      pipeline: CRASH_PIPELINE,
      sourceName: CRASH_SOURCE,
      writer: `${CRASH_PIPELINE}.${CRASH_SOURCE}`,
      tables: child.tables,
      introspector: source,
      streamer,
      runtime: child.runtime,
      store,
      sink,
      logger,
      clock: Date.now,
      owner: localOwner(),
      limits: {
        rows: child.flushRows,
        bytes: 64 * 2 ** 20,
        ms: child.flushMs ?? 1000,
        maxAckLagMs: child.maxAckLagMs ?? 2000,
        idleCommitMs: child.idleCommitMs,
      },
      leaseTtlMs: CRASH_LEASE_TTL_MS,
      renewEveryMs: CRASH_RENEW_EVERY_MS,
      stopTimeoutMs: 30_000,
      signal: stop.signal,
      // A killed child's lease is taken over at once: its process is provably gone.
      isHolderDead: isProvablyDead,
      faults,
      ...(child.snapshot ? { snapshot: child.snapshot } : {}),
      ...(child.tableFormat ? { tableFormat: { format: child.tableFormat, explicit: true } } : {}),
    });
    process.stdout.write(`${JSON.stringify(summary)}\n`);
  } finally {
    await source.close();
  }
  process.exitCode = 0;
}

/**
 * Appends `line` (JSON) to `<dir>/kills`, fsync'd, and SIGKILLs this process: the parent then
 * knows exactly where the kill landed. Never returns.
 */
export async function killSelf(dir: string, line: unknown): Promise<never> {
  record(dir, 'kills', JSON.stringify(line));
  process.kill(process.pid, 'SIGKILL');
  // SIGKILL is delivered at once; never go on past the kill point.
  return new Promise<never>(() => undefined);
}

/** Runs `main` as a child's body: an error is written to stderr (its code first) and exits 1. */
export function childMain(main: () => Promise<void>): void {
  main().catch((e: unknown) => {
    process.stderr.write(`${(e as { code?: string }).code ?? 'ERROR'}: ${String((e as Error).stack ?? e)}\n`);
    process.exit(1);
  });
}
