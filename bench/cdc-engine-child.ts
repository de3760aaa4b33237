/**
 * One run of the CDC engine bench (bench/cdc-engine.ts) as its own process, so its peak RSS and
 * CPU are its own: regenerates the script from its params (deterministic: the parent's script),
 * then times ONE of
 *
 *   reader   the scripted reader alone: every event read, each table's rows cut into a batch when
 *            its pending rows or bytes reach the flush limits (and at the end); nothing written,
 *            committed or acknowledged (the floor of any CDC run on this source)
 *   engine   runCdc (test/harness/cdc-engine.ts `runEngine`, append write mode) over the same
 *            reader, a ParquetSink (zstd) on a file lake and a FileCursorStore
 *
 * and prints one JSON line (`CdcBenchReport`) on stdout.
 *
 * Usage (by bench/cdc-engine.ts): node --import tsx bench/cdc-engine-child.ts '<CdcBenchConfig JSON>'
 * Owns nothing but its directory's contents for this run; never tunes the engine.
 */
import { writeSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseCdcState } from '../shared/engine/cdc/state.js';
import { FileObjectStore } from '../shared/sink/file-object-store.js';
import { ParquetSink } from '../shared/sink/parquet-sink.js';
import { FileCursorStore } from '../shared/state/file-cursor-store.js';
import { localOwner } from '../shared/state/lease-owner.js';
import { runEngine, STATE_KEY } from '../test/harness/cdc-engine.js';
import {
  generateScript,
  type Script,
  ScriptedServer,
  type ScriptParams,
  scriptCdcTables,
} from '../test/harness/scripted-source.js';

export interface CdcBenchConfig {
  readonly variant: 'reader' | 'engine';
  readonly script: ScriptParams;
  /** An empty directory of this run: server state, state store and lake go under it. */
  readonly dir: string;
  readonly flushRows: number;
  readonly flushBytes: number;
}

export interface CdcBenchReport {
  /** Seconds from process start to the end of script generation (node, tsx, imports, script). */
  readonly startupSeconds: number;
  /** Of which generating the script. */
  readonly generateSeconds: number;
  /** Wall seconds of the measured part (the reader loop, or runCdc). */
  readonly runSeconds: number;
  /** User + system CPU seconds of the whole process (all threads) during the measured part. */
  readonly runCpuSeconds: number;
  /** The same over the whole process (start-up and generation included). */
  readonly cpuSeconds: number;
  /** process.resourceUsage().maxRSS, KiB: the peak of the whole process. */
  readonly maxRssKiB: number;
  /** Rows cut (reader) or committed to the state, summed over the tables (engine). */
  readonly rows: number;
  /** Batches cut (reader) or objects the engine wrote. */
  readonly batches: number;
  /** Engine only: flush cycles (one state commit each). */
  readonly flushes?: number;
  /** Engine only: the summary's row count (must equal `rows`). */
  readonly summaryRows?: number;
}

const FLUSH_MS = 60_000;
const MAX_ACK_LAG_MS = 300_000;
const IDLE_COMMIT_MS = 60_000;

async function readerOnly(
  script: Script,
  config: CdcBenchConfig,
): Promise<Pick<CdcBenchReport, 'rows' | 'batches'>> {
  const server = new ScriptedServer(script, join(config.dir, 'server'));
  const tables = scriptCdcTables(script, { writeMode: 'append' });
  const reader = server.openReader(tables);
  await reader.start({ position: await reader.initialPosition(), next: new Map() });
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
    if (ev === undefined) {
      if (reader.ended) break;
      continue;
    }
    if (ev.kind === 'rows') {
      const p = reader.pending(ev.table);
      if (p.rows >= config.flushRows || p.bytes >= config.flushBytes) cut(ev.table);
    }
  }
  for (const t of tables) cut(t.ref.target);
  await reader.close();
  return { rows, batches };
}

async function engine(
  script: Script,
  config: CdcBenchConfig,
): Promise<Pick<CdcBenchReport, 'rows' | 'batches' | 'flushes' | 'summaryRows'>> {
  const server = new ScriptedServer(script, join(config.dir, 'server'));
  const store = new FileCursorStore(join(config.dir, 'state'));
  const sink = new ParquetSink({ store: new FileObjectStore(join(config.dir, 'lake')) });
  const summary = await runEngine({
    script,
    server,
    store,
    sink,
    streamer: server.streamer(),
    writeMode: 'append',
    owner: localOwner(),
    limits: {
      rows: config.flushRows,
      bytes: config.flushBytes,
      ms: FLUSH_MS,
      maxAckLagMs: MAX_ACK_LAG_MS,
      idleCommitMs: IDLE_COMMIT_MS,
    },
  });
  if (summary.stopped !== 'ended') throw new Error(`the engine stopped: ${summary.stopped}`);
  const state = parseCdcState((await store.load(STATE_KEY)).value);
  const rows = Object.values(state.tables).reduce((n, t) => n + t.rows, 0);
  return { rows, batches: summary.objects, flushes: summary.flushes, summaryRows: summary.rows };
}

const config = JSON.parse(process.argv[2] ?? '') as CdcBenchConfig;
const generateStarted = performance.now();
const script = generateScript(config.script);
const generateSeconds = (performance.now() - generateStarted) / 1000;
const startupSeconds = process.uptime();
const cpuBefore = process.cpuUsage();
const started = performance.now();
const result = config.variant === 'reader' ? await readerOnly(script, config) : await engine(script, config);
const runSeconds = (performance.now() - started) / 1000;
const cpuRun = process.cpuUsage(cpuBefore);
const usage = process.resourceUsage();
const report: CdcBenchReport = {
  startupSeconds,
  generateSeconds,
  runSeconds,
  runCpuSeconds: (cpuRun.user + cpuRun.system) / 1e6,
  cpuSeconds: (usage.userCPUTime + usage.systemCPUTime) / 1e6,
  maxRssKiB: usage.maxRSS,
  ...result,
};
writeSync(1, `${JSON.stringify(report)}\n`);
process.exit(0);
