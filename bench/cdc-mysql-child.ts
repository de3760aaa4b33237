/**
 * One tidemark run of the MySQL/MariaDB CDC bench (bench/cdc-mysql.ts) as its own process, so its
 * CPU and peak RSS are its own. Times ONE of
 *
 *   decode    MysqlCdcReader alone (MysqlCdcSource introspect + openReader) from the recorded
 *             binlog start: `next(1000)` in a loop, a table's pending rows cut (and dropped) at
 *             100k, until the expected rows have arrived at a commit
 *   engine    runCdc with a FileCursorStore and a ParquetSink (zstd) on a file lake, its reader
 *             started at the recorded binlog start (the server keeps no replica position, so a
 *             fresh state would capture from the binlog end), until the committed state holds the
 *             expected rows: then the signal is aborted and the run stops
 *
 * and prints one JSON line (`MysqlCdcBenchReport`) on stdout.
 *
 * Usage (by bench/cdc-mysql.ts): node --import tsx bench/cdc-mysql-child.ts '<MysqlCdcBenchConfig JSON>'
 * Owns nothing but its directory's contents for this run; never tunes the reader or the engine.
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Reader, SourcePosition, Streamer } from '../shared/contracts/cdc.js';
import type { CursorStore } from '../shared/contracts/state.js';
import { MysqlCdcSource } from '../shared/drivers/mysql/cdc/source.js';
import { cdcLakeSchema } from '../shared/engine/cdc/lake-schema.js';
import { runCdc } from '../shared/engine/cdc/run.js';
import { parseCdcState } from '../shared/engine/cdc/state.js';
import { silentLogger } from '../shared/observability/log.js';
import { FileObjectStore } from '../shared/sink/file-object-store.js';
import { ParquetSink } from '../shared/sink/parquet-sink.js';
import { flatWriter } from '../shared/sink/parquet-writer.js';
import { FileCursorStore } from '../shared/state/file-cursor-store.js';
import { localOwner } from '../shared/state/lease-owner.js';
import { type ChildRunReport, reportChildRun } from './child-report.js';

export interface MysqlCdcBenchConfig {
  readonly variant: 'decode' | 'engine';
  readonly url: string;
  /** The replica server id of this run (distinct per run). */
  readonly serverId: number;
  /** `database.table` of every captured table. */
  readonly tables: readonly string[];
  /** Rows (changes) the run must see before it stops. */
  readonly expectedRows: number;
  /** The reader's SourcePosition of the binlog before the backlog. */
  readonly start: SourcePosition;
  /** An empty directory of this run: state store and lake go under it. */
  readonly dir: string;
  readonly flushRows: number;
  readonly flushMs: number;
  /** parquet-wasm writes every object, not tidemark's flat writer (parquet-writer.ts flatWriter). */
  readonly noFlatWriter?: boolean;
}

export interface MysqlCdcBenchReport extends ChildRunReport {
  /** Rows decoded (decode) or committed to state (engine). */
  readonly rows: number;
  readonly batches: number;
  readonly flushes?: number;
}

const SOURCE = 'bench';
const PIPELINE = 'bench';

const config = JSON.parse(process.argv[2] ?? '') as MysqlCdcBenchConfig;
if (config.noFlatWriter) flatWriter.enabled = false;

function newSource(): MysqlCdcSource {
  return new MysqlCdcSource({
    url: config.url,
    sourceName: SOURCE,
    connectTimeoutMs: 10_000,
    serverId: config.serverId,
    heartbeatMs: 10_000,
  });
}

async function decodeOnly(): Promise<Pick<MysqlCdcBenchReport, 'rows' | 'batches'>> {
  const source = newSource();
  try {
    const cdcTables = [];
    for (const t of config.tables) {
      const { ref, schema } = await source.introspect({ source: t });
      cdcTables.push({ ref, schema: cdcLakeSchema(schema), writeMode: 'append' as const });
    }
    const reader = await source.openReader(cdcTables, { heartbeatMs: 10_000, serverId: config.serverId });
    await reader.start({ position: config.start, next: new Map() });
    let seen = 0;
    let rows = 0;
    let batches = 0;
    const cut = (table: string): void => {
      const batch = reader.cut(table);
      if (!batch) return;
      rows += batch.record.numRows;
      batches++;
    };
    for (;;) {
      const ev = await reader.next(1000);
      if (ev === undefined) continue;
      if (ev.kind === 'rows') {
        seen += ev.count;
        if (reader.pending(ev.table).rows >= config.flushRows) cut(ev.table);
      } else if (ev.kind === 'commit') {
        if (seen >= config.expectedRows) break;
      } else if (ev.kind === 'gap') {
        throw new Error(`gap: ${ev.reason}`);
      }
    }
    for (const t of cdcTables) cut(t.ref.target);
    await reader.close();
    return { rows, batches };
  } finally {
    await source.close();
  }
}

/** The engine, stopped once the committed state holds the expected rows. */
async function engine(): Promise<
  Pick<MysqlCdcBenchReport, 'rows' | 'batches' | 'flushes'> & { durableSeconds: number }
> {
  const source = newSource();
  const inner = new FileCursorStore(join(config.dir, 'state'));
  const sink = new ParquetSink({ store: new FileObjectStore(join(config.dir, 'lake')) });
  const abort = new AbortController();
  const started = performance.now();
  let durableAt: number | undefined;
  let committedRows = 0;

  // A fresh state has no position: the reader's first start begins at the recorded binlog start
  // instead of the end.
  const streamer: Streamer = {
    async openReader(tables, runtime) {
      const reader = await source.openReader(tables, runtime);
      const initialPosition = async (): Promise<SourcePosition> => config.start;
      return new Proxy(reader, {
        get(target, key) {
          if (key === 'initialPosition') return initialPosition;
          const v = Reflect.get(target, key) as unknown;
          return typeof v === 'function' ? v.bind(target) : v;
        },
      }) as Reader;
    },
  };
  const store: CursorStore = new Proxy(inner, {
    get(target, key) {
      if (key === 'commit') {
        return async (...args: Parameters<CursorStore['commit']>) => {
          const r = await target.commit(...args);
          const state = parseCdcState(args[1].value);
          committedRows = Object.values(state.tables).reduce((n, t) => n + t.rows, 0);
          if (durableAt === undefined && committedRows >= config.expectedRows) {
            durableAt = performance.now();
            abort.abort();
          }
          return r;
        };
      }
      const v = Reflect.get(target, key) as unknown;
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  const table = (source: string) => ({
    source,
    target: source.split('.').at(-1)!,
    writeMode: 'append' as const,
    exclude: [],
    onWiden: 'stop' as const,
    onTruncate: 'record' as const,
  });
  try {
    const summary = await runCdc({
      pipeline: PIPELINE,
      sourceName: SOURCE,
      writer: `${PIPELINE}.${SOURCE}`,
      tables: config.tables.map(table),
      introspector: source,
      streamer,
      runtime: { heartbeatMs: 10_000, serverId: config.serverId },
      store,
      sink,
      logger: silentLogger,
      clock: Date.now,
      owner: localOwner(),
      limits: {
        rows: config.flushRows,
        bytes: 64 * 2 ** 20,
        ms: config.flushMs,
        maxAckLagMs: 300_000,
        idleCommitMs: 60_000,
      },
      leaseTtlMs: 60_000,
      stopTimeoutMs: 30_000,
      signal: abort.signal,
    });
    return {
      rows: committedRows,
      batches: summary.objects,
      flushes: summary.flushes,
      durableSeconds: ((durableAt ?? performance.now()) - started) / 1000,
    };
  } finally {
    await source.close();
  }
}

await reportChildRun(async () => {
  if (config.variant === 'decode') return { result: await decodeOnly() };
  const { durableSeconds, ...rest } = await engine();
  return { result: rest, runSeconds: durableSeconds };
});
