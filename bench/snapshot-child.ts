/**
 * One tidemark run of the snapshot bench (bench/snapshot.ts) as its own process, so its CPU and
 * peak RSS are its own: runCdc over the real Postgres or MySQL CDC source (the source itself is
 * the streamer, so its `openSnapshot` is used), a FileCursorStore and a ParquetSink (zstd) on a
 * file lake, one table with `snapshot: initial`, until a state commit says the table's snapshot is
 * `complete`; then the signal is aborted and the run stops.
 *
 * Timed from the runCdc call (after node, tsx and imports) to that commit. The engine's
 * `snapshot started` and `snapshot complete` log lines are time-stamped as they are written, so
 * the set-up before the first chunk (lease, introspection, slot or binlog dump, snapshot
 * connections) shows apart from the chunked load. Prints one JSON line (`SnapshotBenchReport`).
 *
 * Usage (by bench/snapshot.ts): node --import tsx bench/snapshot-child.ts '<SnapshotBenchConfig JSON>'
 * Owns nothing but its directory's contents for this run; never tunes the engine or the drivers.
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { CursorStore } from '../shared/contracts/state.js';
import { MysqlCdcSource } from '../shared/drivers/mysql/cdc/source.js';
import { PostgresCdcSource } from '../shared/drivers/postgres/cdc/source.js';
import { runCdc } from '../shared/engine/cdc/run.js';
import { parseCdcState } from '../shared/engine/cdc/state.js';
import { createLogger } from '../shared/observability/log.js';
import { FileObjectStore } from '../shared/sink/file-object-store.js';
import { ParquetSink } from '../shared/sink/parquet-sink.js';
import { flatWriter } from '../shared/sink/parquet-writer.js';
import { FileCursorStore } from '../shared/state/file-cursor-store.js';
import { localOwner } from '../shared/state/lease-owner.js';
import { type ChildRunReport, reportChildRun } from './child-report.js';

export interface SnapshotBenchConfig {
  readonly kind: 'postgres' | 'mysql';
  readonly url: string;
  /** `schema.table` (MySQL: `database.table`). */
  readonly table: string;
  /** Postgres: the slot (created by the reader) and the publication of this run. */
  readonly slot?: string;
  readonly publication?: string;
  /** MySQL: the replica server id of this run (distinct per run). */
  readonly serverId?: number;
  readonly chunkRows: number;
  /** The engine's flushRows (landed windows count towards it). */
  readonly flushRows: number;
  readonly connections: number;
  /** An empty directory of this run: state store and lake go under it. */
  readonly dir: string;
  /** parquet-wasm writes every object, not tidemark's flat writer (parquet-writer.ts flatWriter). */
  readonly noFlatWriter?: boolean;
}

export interface SnapshotBenchReport extends ChildRunReport {
  /** Snapshot rows and chunks the state records at `complete`. */
  readonly rows: number;
  readonly chunks: number;
  /** Chunks read again (stale windows). */
  readonly rereads: number;
  readonly objects: number;
  /** State commits from the runCdc call until the one that says `complete` (included). */
  readonly commits: number;
  /** Seconds from the runCdc call to the `snapshot started` log line; undefined if not seen. */
  readonly startedSeconds: number | undefined;
  /** Seconds from `snapshot started` to the `snapshot complete` log line. */
  readonly loadSeconds: number | undefined;
}

const config = JSON.parse(process.argv[2] ?? '') as SnapshotBenchConfig;
if (config.noFlatWriter) flatWriter.enabled = false;
const SOURCE = 'bench';
const PIPELINE = 'bench';
const STATE_KEY = `cdc#${PIPELINE}#${SOURCE}`;

async function run(): Promise<{
  result: Omit<SnapshotBenchReport, keyof ChildRunReport>;
  runSeconds: number;
}> {
  const heartbeatMs = 10_000;
  const source =
    config.kind === 'postgres'
      ? new PostgresCdcSource({
          url: config.url,
          sourceName: SOURCE,
          connectTimeoutMs: 10_000,
          slot: config.slot!,
          publication: config.publication!,
          heartbeatMs,
        })
      : new MysqlCdcSource({
          url: config.url,
          sourceName: SOURCE,
          connectTimeoutMs: 10_000,
          serverId: config.serverId!,
          heartbeatMs,
        });
  const inner = new FileCursorStore(join(config.dir, 'state'));
  const sink = new ParquetSink({ store: new FileObjectStore(join(config.dir, 'lake')), compression: 'zstd' });
  const abort = new AbortController();
  let startedAt: number | undefined;
  let completeAt: number | undefined;
  const lastLogs: string[] = [];
  const logger = createLogger({
    json: true,
    level: 'info',
    metrics: false,
    write: (line) => {
      const now = performance.now();
      if (startedAt === undefined && line.includes('"msg":"snapshot started"')) startedAt = now;
      if (completeAt === undefined && line.includes('"msg":"snapshot complete"')) completeAt = now;
      lastLogs.push(line);
      if (lastLogs.length > 30) lastLogs.shift();
    },
  });
  let doneAt: number | undefined;
  let snap: { rows: number; chunks: number; rereads: number } | undefined;
  let commits = 0;
  const store: CursorStore = new Proxy(inner, {
    get(target, key) {
      if (key === 'commit') {
        return async (...args: Parameters<CursorStore['commit']>) => {
          const r = await target.commit(...args);
          if (doneAt === undefined && args[0] === STATE_KEY) {
            commits++;
            const s = parseCdcState(args[1].value).tables[config.table]?.snapshot;
            if (s?.state === 'complete') {
              doneAt = performance.now();
              snap = { rows: s.rows, chunks: s.chunks, rereads: s.retries ?? 0 };
              abort.abort();
            }
          }
          return r;
        };
      }
      const v = Reflect.get(target, key) as unknown;
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  const started = performance.now();
  try {
    const summary = await runCdc({
      pipeline: PIPELINE,
      sourceName: SOURCE,
      writer: `${PIPELINE}.${SOURCE}`,
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
      streamer: source,
      runtime:
        config.kind === 'postgres'
          ? { heartbeatMs, slot: config.slot!, publication: config.publication! }
          : { heartbeatMs, serverId: config.serverId! },
      store,
      sink,
      logger,
      clock: Date.now,
      owner: localOwner(),
      limits: {
        rows: config.flushRows,
        bytes: 64 * 2 ** 20,
        ms: 5_000,
        maxAckLagMs: 300_000,
        idleCommitMs: 60_000,
      },
      leaseTtlMs: 60_000,
      stopTimeoutMs: 60_000,
      signal: abort.signal,
      snapshot: { chunkRows: config.chunkRows, connections: config.connections },
    });
    if (doneAt === undefined || snap === undefined)
      throw new Error(`runCdc ended before the snapshot was complete; last logs:\n${lastLogs.join('\n')}`);
    return {
      runSeconds: (doneAt - started) / 1000,
      result: {
        ...snap,
        objects: summary.objects,
        commits,
        startedSeconds: startedAt === undefined ? undefined : (startedAt - started) / 1000,
        loadSeconds:
          startedAt === undefined || completeAt === undefined ? undefined : (completeAt - startedAt) / 1000,
      },
    };
  } finally {
    await source.close();
  }
}

await reportChildRun(run);
