/**
 * One `tidemark run` of one table, as its own process so its peak RSS is its own: builds the
 * spec the CLI would load, then `openPipeline` + `runTable` (shared/pipeline), exactly the path
 * of `tidemark run`, and prints one JSON line (bench/support.ts `ChildReport`) on stdout.
 *
 * Usage (by bench/support.ts): node dist/bench/incremental-child.mjs '<ChildConfig JSON>' (this file
 * bundled like the CLI), or with TIDEMARK_FROM_SOURCE=1 node --import tsx bench/incremental-child.ts
 * Owns nothing but this run; never changes engine settings beyond what a spec can say.
 */
import { writeSync } from 'node:fs';
import { incrementalTables, parseSpec } from '../shared/config/spec.js';
import { binaryRows } from '../shared/drivers/mysql/incremental.js';
import { rawCopy } from '../shared/drivers/postgres/wire/copy-tap.js';
import { readAhead } from '../shared/engine/incremental/read-ahead.js';
import { createLogger } from '../shared/observability/log.js';
import { openPipeline } from '../shared/pipeline/open.js';
import { runTable } from '../shared/pipeline/run-table.js';
import { encodeAhead } from '../shared/sink/parquet-sink.js';
import { flatWriter, pageCompression } from '../shared/sink/parquet-writer.js';
import type { ChildConfig, ChildReport } from './support.js';

const config = JSON.parse(process.argv[2] ?? '') as ChildConfig;
if (config.pgCopyStream) rawCopy.enabled = false;
if (config.mysqlTextRows) binaryRows.enabled = false;
if (config.wasmCompression) pageCompression.native = false;
if (config.noEncodeAhead) encodeAhead.enabled = false;
if (config.readAhead !== undefined) readAhead.pages = config.readAhead;
if (config.noFlatWriter) flatWriter.enabled = false;
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
writeSync(1, `${JSON.stringify(report)}\n`);
// Keep-alive sockets of the S3 client would hold the process open for seconds: the run is done.
process.exit(summary.status === 'ok' ? 0 : 3);
