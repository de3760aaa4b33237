/**
 * Running the CDC engine (shared/engine/cdc/run.ts) on the scripted source with a real file
 * lake and a real state store, plus the observers the engine's tests assert with: a sink that
 * remembers the batches of every object it wrote (so the lake can be reconstructed without
 * reading Parquet back) and which objects were committed, and a streamer whose acks are checked
 * against the committed state.
 */
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import type { Streamer } from '../../shared/contracts/cdc.js';
import type { ObjectRef, Sink } from '../../shared/contracts/sink.js';
import type { Introspector } from '../../shared/contracts/source.js';
import type { CursorStore } from '../../shared/contracts/state.js';
import type { Batch, WriteMode } from '../../shared/dataplane/batch.js';
import type { CdcRunOptions, CdcSummary, FlushLimits } from '../../shared/engine/cdc/options.js';
import { runCdc } from '../../shared/engine/cdc/run.js';
import { cdcStateKey } from '../../shared/engine/cdc/state.js';
import { silentLogger } from '../../shared/observability/log.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { ParquetSink } from '../../shared/sink/parquet-sink.js';
import { lakeScan } from './lake-scan.js';
import type { Script, ScriptedServer, TableRecord } from './scripted-source.js';
import { ackCheckedStreamer, withMember } from './wrap.js';

export const PIPELINE = 'p';
export const SOURCE = 'src';
export const WRITER = `${PIPELINE}.${SOURCE}`;
export const STATE_KEY = cdcStateKey(PIPELINE, SOURCE);

/** An introspector over the script's tables as they are at the start of the script. */
export function scriptIntrospector(script: Script): Introspector {
  return {
    async introspect(t) {
      const table = script.tables.find((x) => x.name === t.source);
      if (!table) throw new Error(`no scripted table ${t.source}`);
      return {
        ref: { source: table.name, target: t.target ?? table.name, primaryKey: table.schema.primaryKey },
        schema: table.schema,
        warnings: [],
      };
    },
  };
}

/**
 * The sink the engine writes through: a real ParquetSink on a file lake, remembering the batches
 * of each object it wrote, so `lake()` is what the lake holds (objects that still exist).
 */
export class RecordingSink implements Sink {
  readonly inner: ParquetSink;
  readonly written = new Map<string, Batch[]>();
  /** Objects whose commit went through (set by `CheckedStore`). */
  readonly committed = new Set<string>();
  /** Objects written since the last commit. */
  uncommitted: string[] = [];
  /** Committed objects a recovery or discard removed: must stay empty. */
  readonly deletedCommitted: string[] = [];

  constructor(readonly root: string) {
    this.inner = new ParquetSink({ store: new FileObjectStore(root) });
  }

  async write(...args: Parameters<Sink['write']>): Promise<ObjectRef[]> {
    const refs = await this.inner.write(...args);
    for (const r of refs) {
      this.written.set(r.uri, [...args[3]]);
      this.uncommitted.push(r.uri);
    }
    return refs;
  }
  async recover(...args: Parameters<Sink['recover']>): Promise<ObjectRef[]> {
    const removed = await this.inner.recover(...args);
    for (const r of removed) if (this.committed.has(r.uri)) this.deletedCommitted.push(r.uri);
    return removed;
  }
  list(...args: Parameters<Sink['list']>): Promise<ObjectRef[]> {
    return this.inner.list(...args);
  }
  async discard(...args: Parameters<Sink['discard']>): Promise<ObjectRef[]> {
    const removed = await this.inner.discard(...args);
    for (const r of removed) if (this.committed.has(r.uri)) this.deletedCommitted.push(r.uri);
    return removed;
  }

  /** The batches of every object the lake holds now. */
  async lake(tables: readonly string[]): Promise<TableRecord[]> {
    const out: TableRecord[] = [];
    for (const table of tables) {
      for (const ref of await this.inner.list(table, WRITER)) {
        const batches = this.written.get(ref.uri);
        if (!batches) throw new Error(`object ${ref.uri} was not written by this test`);
        for (const b of batches) out.push({ table, record: b.record });
      }
    }
    return out;
  }
}

/** A store whose successful commits mark the sink's uncommitted objects committed. */
export function checkedStore(store: CursorStore, sink: RecordingSink): CursorStore {
  return withMember(store, 'commit', async (...args) => {
    const r = await store.commit(...args);
    for (const uri of sink.uncommitted) sink.committed.add(uri);
    sink.uncommitted = [];
    return r;
  });
}

/**
 * A streamer whose readers check every ack against the committed state: the acknowledged
 * position must never be past the position committed to `store` (violations are collected).
 */
export function checkedStreamer(inner: Streamer, store: CursorStore, violations: string[]): Streamer {
  return ackCheckedStreamer(inner, store, STATE_KEY, (acked, committed) => {
    if (committed === undefined || Number(acked.value) > Number(committed.value))
      violations.push(`acked ${acked.value} while the state holds ${committed?.value ?? 'nothing'}`);
  });
}

export interface EngineRun {
  readonly script: Script;
  readonly server: ScriptedServer;
  readonly store: CursorStore;
  readonly sink: Sink;
  readonly streamer: Streamer;
  readonly limits?: Partial<FlushLimits>;
  readonly owner?: string;
  /** Every table's write mode [upsert]; the benchmark uses append (every change is a lake row). */
  readonly writeMode?: WriteMode;
  readonly extra?: Partial<CdcRunOptions>;
}

export const DEFAULT_LIMITS: FlushLimits = {
  rows: 1000,
  bytes: 64 * 2 ** 20,
  ms: 3_600_000,
  maxAckLagMs: 3_600_000,
  idleCommitMs: 3_600_000,
};

/** One engine run over every script table (target = source name, upsert unless `writeMode`). */
export function runEngine(r: EngineRun): Promise<CdcSummary> {
  return runCdc({
    pipeline: PIPELINE,
    sourceName: SOURCE,
    writer: WRITER,
    tables: r.script.tables.map((t) => ({
      source: t.name,
      target: t.name,
      writeMode: r.writeMode ?? 'upsert',
      exclude: [],
      onWiden: 'stop',
      onTruncate: 'record',
    })),
    introspector: scriptIntrospector(r.script),
    streamer: r.streamer,
    runtime: { heartbeatMs: 1000 },
    store: r.store,
    sink: r.sink,
    logger: silentLogger,
    clock: Date.now,
    owner: r.owner ?? `test-${Math.random().toString(36).slice(2)}`,
    limits: { ...DEFAULT_LIMITS, ...r.limits },
    leaseTtlMs: 60_000,
    stopTimeoutMs: 30_000,
    ...r.extra,
  });
}

/** A file lake (`<dir>/lake`) as DuckDB reads it: per table the (pk, __pos, __op) of every row. */
export async function duckLakeRows(
  dir: string,
  tables: readonly string[],
): Promise<Map<string, [string, string, string][]>> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  const out = new Map<string, [string, string, string][]>();
  try {
    for (const t of tables) {
      // The rows an Iceberg reader returns (a current-state table's position deletes applied).
      const { current } = await lakeScan(join(dir, 'lake', t));
      if (current === undefined) {
        out.set(t, []);
        continue;
      }
      const rows = (
        await conn.runAndReadAll(`SELECT CAST(id AS VARCHAR), __pos, CAST(__op AS VARCHAR) FROM ${current}`)
      ).getRows();
      out.set(
        t,
        rows.map(([id, pos, op]) => [String(id), String(pos), String(op)]),
      );
    }
  } finally {
    conn.closeSync();
  }
  return out;
}
