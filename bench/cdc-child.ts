/**
 * One tidemark run of the Postgres CDC bench (bench/cdc.ts) as its own process, so its CPU and
 * peak RSS are its own. Times ONE of
 *
 *   decode    PostgresCdcReader alone (PostgresCdcSource introspect + openReader) on an existing slot:
 *             `next(1000)` in a loop, a table's pending rows cut (and dropped) at 100k, until the
 *             expected rows have arrived at a commit (or a commit/progress reaches `endLsn`)
 *   engine    runCdc with a FileCursorStore and a ParquetSink (zstd) on a file lake, until the
 *             committed state holds the expected rows (or its position reaches `endLsn`): then the
 *             signal is aborted and the run stops
 *   latency   runCdc live (flush 1 s) while the parent runs pgbench: per captured transaction,
 *             the time from its source commit (Commit message timestamp) to the state commit that
 *             made it durable. Writes `<dir>/ready` once streaming; stops when the parent wrote
 *             `<dir>/end-lsn` and the state position reached it
 *
 * and prints one JSON line (`PgCdcBenchReport`) on stdout.
 *
 * Usage (by bench/cdc.ts): node --import tsx bench/cdc-child.ts '<PgCdcBenchConfig JSON>'
 * Owns nothing but its directory's contents for this run; never tunes the reader or the engine.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { CdcEvent, Reader, SourcePosition, Streamer } from '../shared/contracts/cdc.js';
import type { CursorStore } from '../shared/contracts/state.js';
import { PostgresCdcSource } from '../shared/drivers/postgres/cdc/source.js';
import { cdcLakeSchema } from '../shared/engine/cdc/lake-schema.js';
import { runCdc } from '../shared/engine/cdc/run.js';
import { parseCdcState } from '../shared/engine/cdc/state.js';
import { silentLogger } from '../shared/observability/log.js';
import { parseLsn } from '../shared/position/position.js';
import { FileObjectStore } from '../shared/sink/file-object-store.js';
import { ParquetSink } from '../shared/sink/parquet-sink.js';
import { flatWriter } from '../shared/sink/parquet-writer.js';
import { FileCursorStore } from '../shared/state/file-cursor-store.js';
import { localOwner } from '../shared/state/lease-owner.js';
import { type ChildRunReport, reportChildRun } from './child-report.js';

export interface PgCdcBenchConfig {
  readonly variant: 'decode' | 'engine' | 'latency';
  readonly url: string;
  readonly slot: string;
  readonly publication: string;
  /** `schema.table` of every captured table. */
  readonly tables: readonly string[];
  /** Rows (changes) the run must see before it stops (decode, engine). */
  readonly expectedRows: number;
  /** The WAL position at the end of the backlog (decode, engine). */
  readonly endLsn?: string;
  /** An empty directory of this run: state store and lake go under it. */
  readonly dir: string;
  readonly flushRows: number;
  readonly flushMs: number;
  /** parquet-wasm writes every object, not tidemark's flat writer (parquet-writer.ts flatWriter). */
  readonly noFlatWriter?: boolean;
}

export interface PgCdcBenchReport extends ChildRunReport {
  /** Rows decoded (decode) or committed to state (engine, latency). */
  readonly rows: number;
  readonly batches: number;
  readonly flushes?: number;
  /** latency: commit-to-durable milliseconds of each captured transaction. */
  readonly latenciesMs?: readonly number[];
}

const SOURCE = 'bench';
const PIPELINE = 'bench';

const config = JSON.parse(process.argv[2] ?? '') as PgCdcBenchConfig;
if (config.noFlatWriter) flatWriter.enabled = false;
const endLsn = config.endLsn === undefined ? undefined : parseLsn(config.endLsn);

function newSource(): PostgresCdcSource {
  return new PostgresCdcSource({
    url: config.url,
    sourceName: SOURCE,
    connectTimeoutMs: 10_000,
    slot: config.slot,
    publication: config.publication,
    heartbeatMs: 10_000,
  });
}

async function decodeOnly(): Promise<Pick<PgCdcBenchReport, 'rows' | 'batches'>> {
  const source = newSource();
  try {
    const cdcTables = [];
    for (const t of config.tables) {
      const { ref, schema } = await source.introspect({ source: t });
      cdcTables.push({ ref, schema: cdcLakeSchema(schema), writeMode: 'append' as const });
    }
    const reader = await source.openReader(cdcTables, {
      heartbeatMs: 10_000,
      slot: config.slot,
      publication: config.publication,
    });
    await reader.start({ position: await reader.initialPosition(), next: new Map() });
    let seen = 0;
    let rows = 0;
    let batches = 0;
    const cut = (table: string): void => {
      const batch = reader.cut(table);
      if (!batch) return;
      rows += batch.record.numRows;
      batches++;
    };
    const reached = (p: SourcePosition): boolean => endLsn !== undefined && parseLsn(p.value) >= endLsn;
    for (;;) {
      const ev = await reader.next(1000);
      if (ev === undefined) continue;
      if (ev.kind === 'rows') {
        seen += ev.count;
        if (reader.pending(ev.table).rows >= config.flushRows) cut(ev.table);
      } else if (ev.kind === 'commit') {
        if (seen >= config.expectedRows || reached(ev.position)) break;
      } else if (ev.kind === 'progress') {
        if (reached(ev.position)) break;
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

/** The engine, stopped once `done(state)` says so at a state commit. */
async function engine(): Promise<
  Pick<PgCdcBenchReport, 'rows' | 'batches' | 'flushes' | 'latenciesMs'> & { durableSeconds: number }
> {
  const source = newSource();
  const inner = new FileCursorStore(join(config.dir, 'state'));
  const sink = new ParquetSink({ store: new FileObjectStore(join(config.dir, 'lake')) });
  const abort = new AbortController();
  const started = performance.now();
  let durableAt: number | undefined;
  let committedRows = 0;
  const live = config.variant === 'latency';
  // latency: commit events of transactions that carried captured rows, oldest first.
  const txns: { end: bigint; commitMs: number }[] = [];
  const latencies: number[] = [];
  let txnRows = 0;
  let liveEnd: bigint | undefined;
  const endFile = join(config.dir, 'end-lsn');

  const streamer: Streamer = {
    async openReader(tables, runtime) {
      const reader = await source.openReader(tables, runtime);
      if (!live) return reader;
      const next = async (waitMs: number, signal?: AbortSignal): Promise<CdcEvent | undefined> => {
        const ev = await reader.next(waitMs, signal);
        if (ev?.kind === 'rows') txnRows += ev.count;
        else if (ev?.kind === 'commit') {
          if (txnRows > 0 && ev.commitTimeMs !== undefined)
            txns.push({ end: parseLsn(ev.position.value), commitMs: ev.commitTimeMs });
          txnRows = 0;
        }
        return ev;
      };
      const start = async (...args: Parameters<Reader['start']>): Promise<void> => {
        await reader.start(...args);
        writeFileSync(join(config.dir, 'ready'), '');
      };
      return new Proxy(reader, {
        get(target, key) {
          if (key === 'next') return next;
          if (key === 'start') return start;
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
          const now = Date.now();
          const state = parseCdcState(args[1].value);
          committedRows = Object.values(state.tables).reduce((n, t) => n + t.rows, 0);
          const pos = state.position ? parseLsn(state.position.value) : -1n;
          if (live) {
            while (txns.length > 0 && txns[0]!.end <= pos) latencies.push(now - txns.shift()!.commitMs);
            if (liveEnd === undefined && existsSync(endFile))
              liveEnd = parseLsn(readFileSync(endFile, 'utf8').trim());
            if (liveEnd !== undefined && pos >= liveEnd) abort.abort();
          } else if (
            durableAt === undefined &&
            (committedRows >= config.expectedRows || (endLsn !== undefined && pos >= endLsn))
          ) {
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
  // latency: a backstop if the state position never reaches the end (no keepalive past it).
  let endSeen: number | undefined;
  const backstop = live
    ? setInterval(() => {
        if (endSeen === undefined && existsSync(endFile)) endSeen = Date.now();
        if (endSeen !== undefined && Date.now() - endSeen > 15_000) abort.abort();
      }, 500)
    : undefined;
  try {
    const summary = await runCdc({
      pipeline: PIPELINE,
      sourceName: SOURCE,
      writer: `${PIPELINE}.${SOURCE}`,
      tables: config.tables.map(table),
      introspector: source,
      streamer,
      runtime: { heartbeatMs: 10_000, slot: config.slot, publication: config.publication },
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
        idleCommitMs: live ? 1_000 : 60_000,
      },
      leaseTtlMs: 60_000,
      stopTimeoutMs: 30_000,
      signal: abort.signal,
    });
    return {
      rows: committedRows,
      batches: summary.objects,
      flushes: summary.flushes,
      ...(live ? { latenciesMs: latencies } : {}),
      durableSeconds: ((durableAt ?? performance.now()) - started) / 1000,
    };
  } finally {
    clearInterval(backstop);
    await source.close();
  }
}

await reportChildRun(async () => {
  if (config.variant === 'decode') return { result: await decodeOnly() };
  const { durableSeconds, ...rest } = await engine();
  return { result: rest, runSeconds: durableSeconds };
});
