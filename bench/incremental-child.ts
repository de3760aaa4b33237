/**
 * One `tidemark run` of one table, as its own process so its peak RSS is its own: builds the
 * spec the CLI would load, then `openPipeline` + `runTable` (shared/pipeline), exactly the path
 * of `tidemark run`, and prints one JSON line (bench/support.ts `ChildReport`) on stdout.
 *
 * Usage (by bench/support.ts): node dist/bench/incremental-child.mjs '<ChildConfig JSON>' (this file
 * bundled like the CLI), or with TIDEMARK_FROM_SOURCE=1 node --import tsx bench/incremental-child.ts
 * With `phases` in the config it also times the sink's phases (issue 30: where an Iceberg table's
 * extra time goes) by wrapping methods of the classes the run uses (LakeSink write / stage /
 * apply, the file store's put / putIfAbsent, the state commit) in timers that change nothing they
 * do, and times the data file metrics (parquetDataFile) on the run's own files afterwards.
 *
 * Owns nothing but this run; never changes engine settings beyond what a spec can say.
 */
import { readdirSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { incrementalTables, parseSpec } from '../shared/config/spec.js';
import { binaryRows } from '../shared/drivers/mysql/incremental.js';
import { rawCopy } from '../shared/drivers/postgres/wire/copy-tap.js';
import { readAhead } from '../shared/engine/incremental/read-ahead.js';
import { parquetDataFile } from '../shared/iceberg/data-file.js';
import { VERSION_HINT_FILE } from '../shared/iceberg/file-catalog.js';
import { parseTableMetadata } from '../shared/iceberg/metadata-json.js';
import { createLogger } from '../shared/observability/log.js';
import { openPipeline } from '../shared/pipeline/open.js';
import { runTable } from '../shared/pipeline/run-table.js';
import { FileObjectStore } from '../shared/sink/file-object-store.js';
import { LakeSink } from '../shared/sink/lake-sink.js';
import { encodeAhead } from '../shared/sink/parquet-sink.js';
import { flatWriter, pageCompression } from '../shared/sink/parquet-writer.js';
import { FileCursorStore } from '../shared/state/file-cursor-store.js';
import type { ChildConfig, ChildReport } from './support.js';

type Phases = Record<string, { calls: number; ms: number }>;
const phases: Phases = {};

function addPhase(phase: string, ms: number): void {
  const p = phases[phase] ?? { calls: 0, ms: 0 };
  p.calls++;
  p.ms += ms;
  phases[phase] = p;
}

/** Wraps `proto[method]` (an async method) in a timer adding to `phases[phase]`; behaviour unchanged. */
function timed(proto: object, method: string, phase: string): void {
  const target = proto as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const original = target[method]!;
  target[method] = async function (this: unknown, ...args: unknown[]) {
    const started = performance.now();
    try {
      return await original.apply(this, args);
    } finally {
      addPhase(phase, performance.now() - started);
    }
  };
}

/**
 * parquetDataFile (the footer's metrics) on every data file of the run's Iceberg table, with the
 * table's current schema, timed: what those calls cost inside the run (same bytes, same schema).
 */
function timeDataFileMetrics(lakeDir: string): void {
  const find = (d: string): string | undefined => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      const sub = join(d, e.name);
      if (e.name === 'metadata') return sub;
      const found = find(sub);
      if (found) return found;
    }
    return undefined;
  };
  const metadataDir = find(lakeDir);
  if (metadataDir === undefined) return;
  const version = readFileSync(join(metadataDir, VERSION_HINT_FILE), 'utf8').trim();
  const metadata = parseTableMetadata(
    readFileSync(join(metadataDir, `v${version}.metadata.json`), 'utf8'),
    'metadata',
  );
  const schema = metadata.schemas.find((x) => x['schema-id'] === metadata['current-schema-id'])!;
  const tableDir = join(metadataDir, '..');
  for (const f of readdirSync(tableDir).filter((n) => n.endsWith('.parquet'))) {
    const bytes = readFileSync(join(tableDir, f));
    const started = performance.now();
    parquetDataFile(`file://${join(tableDir, f)}`, bytes, schema);
    addPhase('parquetDataFile (metrics from the footer), re-run after', performance.now() - started);
  }
}

const config = JSON.parse(process.argv[2] ?? '') as ChildConfig;
if (config.pgCopyStream) rawCopy.enabled = false;
if (config.mysqlTextRows) binaryRows.enabled = false;
if (config.wasmCompression) pageCompression.native = false;
if (config.noEncodeAhead) encodeAhead.enabled = false;
if (config.readAhead !== undefined) readAhead.pages = config.readAhead;
if (config.noFlatWriter) flatWriter.enabled = false;
if (config.phases) {
  timed(LakeSink.prototype, 'write', 'sink write (encode wait + put + metrics)');
  timed(LakeSink.prototype, 'stage', 'stage (manifest written)');
  timed(LakeSink.prototype, 'apply', 'apply (catalog commit)');
  timed(FileObjectStore.prototype, 'put', 'store put');
  timed(FileObjectStore.prototype, 'putIfAbsent', 'store putIfAbsent');
  timed(FileCursorStore.prototype, 'commit', 'state commit');
}
const spec = parseSpec({
  pipeline: 'bench',
  sources: { src: { kind: config.source.kind, url: config.source.url } },
  state: { dir: config.stateDir },
  lake: config.lake,
  tables: [
    {
      source: 'src',
      table: config.table,
      mode: 'incremental',
      cursor: config.cursor,
      writeMode: config.writeMode ?? 'append',
      pageSize: config.pageSize,
      ...(config.pageBytes !== undefined ? { pageBytes: config.pageBytes } : {}),
      ...(config.maxRowBytes !== undefined ? { maxRowBytes: config.maxRowBytes } : {}),
    },
  ],
});
const table = incrementalTables(spec)[0]!;
// Warnings and errors to stderr (the parent shows them on failure); stdout carries the report.
const logger = createLogger({
  json: true,
  level: 'warn',
  write: (line) => process.stderr.write(`${line}\n`),
});

const startupSeconds = process.uptime();
const pipeline = await openPipeline(spec);
let summary: Awaited<ReturnType<typeof runTable>>;
try {
  summary = await runTable(spec, table, pipeline, { logger, progressTty: false });
} finally {
  await pipeline.close();
}
const usage = process.resourceUsage();
const report: ChildReport = {
  rows: summary.rows,
  pages: summary.pages,
  bytes: summary.bytes,
  objects: summary.objects,
  more: summary.more,
  engineMs: summary.durationMs,
  startupSeconds,
  maxRssKiB: usage.maxRSS,
  cpuSeconds: (usage.userCPUTime + usage.systemCPUTime) / 1e6,
};
if (config.phases) {
  if (config.lake.uri.startsWith('file://')) timeDataFileMetrics(config.lake.uri.slice('file://'.length));
  Object.assign(report, { phases });
}
writeSync(1, `${JSON.stringify(report)}\n`);
// Keep-alive sockets of the S3 client would hold the process open for seconds: the run is done.
process.exit(summary.status === 'ok' ? 0 : 3);
