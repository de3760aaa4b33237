/**
 * The CDC engine alone, on the scripted source (test/harness/scripted-source.ts): no database,
 * so what a real reader (pgoutput, binlog) costs on top can be told apart later. One generated
 * script (default 1,000,000 committed changes over 10 tables, 2-4 columns each besides the key),
 * three variants, each run in a CHILD process of its own (bench/cdc-engine-child.ts: its peak
 * RSS and CPU are its own), alternated over `--runs` rounds:
 *
 *   (1) reader alone    read every event, cut batches at the flush limits; nothing written (the floor)
 *   (2) engine          runCdc to a file lake (zstd), FileCursorStore, flush 100,000 rows / 64 MiB
 *   (3) engine 10k      the same with flush rows 10,000 (more, smaller objects)
 *
 * Append write mode, so every change is one lake row and each run is checked cheaply: the rows
 * committed to the state (summed over the tables) equal the script's committed changes, the
 * engine's summary agrees, and the lake holds as many objects as the engine says it wrote.
 *
 * Owns: its temp dir (one fresh sub-directory per run, removed after it) and the children it
 * starts (killed by pid on interrupt or after RUN_TIMEOUT_MS). Never tunes the engine.
 */
import { readdirSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import {
  committedChangeCount,
  forEachChange,
  generateScript,
  type ScriptParams,
} from '../test/harness/scripted-source.js';
import type { CdcBenchConfig, CdcBenchReport } from './cdc-engine-child.js';
import {
  alternate,
  BENCH_DIR,
  diskBytes,
  fmtInt,
  machineNote,
  median,
  runProcess,
  type Sample,
  stopChildrenOnInterrupt,
  type Variant,
  type VariantResult,
} from './support.js';

const CHILD_SCRIPT = join(BENCH_DIR, 'cdc-engine-child.ts');
const MiB = 2 ** 20;
/** The spec's defaults (sources.<name>.cdc.flushRows / flushBytes). */
const FLUSH_ROWS = 100_000;
const FLUSH_BYTES = 64 * MiB;
const SMALL_FLUSH_ROWS = 10_000;
/** A child still running after this long is killed and the bench fails. */
const RUN_TIMEOUT_MS = 20 * 60_000;

const USAGE = `npm run bench -- cdc-engine [options]
  --changes N   committed changes of the script (default 1000000)
  --tables N    tables of the script (default 10)
  --runs N      alternated runs per variant, median reported (default 3)
  --seed N      script seed (default 42)
  --quick       100000 changes, 1 run (a smoke test of the bench itself)`;

interface Options {
  readonly changes: number;
  readonly tables: number;
  readonly runs: number;
  readonly seed: number;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      changes: { type: 'string' },
      tables: { type: 'string' },
      runs: { type: 'string' },
      seed: { type: 'string' },
      quick: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const int = (name: string, v: string | undefined, d: number): number => {
    const n = v === undefined ? d : Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a whole number >= 1 (got ${v})`);
    return n;
  };
  const quick = values.quick ?? false;
  return {
    changes: int('changes', values.changes, quick ? 100_000 : 1_000_000),
    tables: int('tables', values.tables, 10),
    runs: int('runs', values.runs, quick ? 1 : 3),
    seed: int('seed', values.seed, 42),
  };
}

/** What one run leaves beside its Sample. */
interface RunExtra {
  readonly report: CdcBenchReport;
  /** Wall seconds of the whole child process (start-up and generation included). */
  readonly processSeconds: number;
  /** Parquet files in the lake after the run (0 for the reader). */
  readonly files: number;
}

/** `npm run bench -- cdc-engine [options]` */
export async function main(argv: readonly string[]): Promise<void> {
  const options = parseOptions(argv);
  stopChildrenOnInterrupt();
  const params: ScriptParams = {
    seed: options.seed,
    tables: options.tables,
    columns: { min: 2, max: 4 },
    changes: options.changes,
  };
  console.log(`machine: ${machineNote()}`);
  console.log(
    `options: changes=${options.changes} tables=${options.tables} runs=${options.runs} seed=${options.seed}`,
  );

  const generateStarted = performance.now();
  const script = generateScript(params);
  const generateSeconds = (performance.now() - generateStarted) / 1000;
  const expected = committedChangeCount(script);
  if (expected !== options.changes)
    throw new Error(`the script commits ${expected} changes, not ${options.changes}`);
  describeScript(script, params, generateSeconds);

  const work = await mkdtemp(join(tmpdir(), 'tidemark-bench-cdc-'));
  const extras = new Map<string, RunExtra[]>();
  let runNumber = 0;
  const variant = (
    name: string,
    kind: CdcBenchConfig['variant'],
    flushRows: number,
  ): Variant & { readonly kind: CdcBenchConfig['variant'] } => ({
    name,
    kind,
    run: async () => {
      const dir = join(work, `run-${++runNumber}`);
      await mkdir(dir, { recursive: true });
      try {
        const config: CdcBenchConfig = {
          variant: kind,
          script: params,
          dir,
          flushRows,
          flushBytes: FLUSH_BYTES,
        };
        const { report, processSeconds } = await runChild(config);
        const lake = join(dir, 'lake');
        const files = countParquet(lake);
        check(name, kind, report, files, expected);
        const list = extras.get(name) ?? [];
        list.push({ report, processSeconds, files });
        extras.set(name, list);
        const sample: Sample = {
          seconds: report.runSeconds,
          cpuSeconds: report.runCpuSeconds,
          rssMiB: report.maxRssKiB / 1024,
          startupSeconds: report.startupSeconds,
          ...(kind === 'engine' ? { bytes: diskBytes(lake) } : {}),
        };
        return sample;
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  });
  const variants = [
    variant('(1) scripted reader alone (floor)', 'reader', FLUSH_ROWS),
    variant(`(2) engine, file lake, flush ${fmtInt(FLUSH_ROWS)} rows / 64 MiB`, 'engine', FLUSH_ROWS),
    variant(
      `(3) engine, file lake, flush ${fmtInt(SMALL_FLUSH_ROWS)} rows / 64 MiB`,
      'engine',
      SMALL_FLUSH_ROWS,
    ),
  ];
  try {
    console.log(
      `\n${fmtInt(expected)} changes, ${options.runs} alternated run(s) per variant, one child process per run:`,
    );
    const results = await alternate(variants, options.runs, (name, sample, round) => {
      const x = extras.get(name)!.at(-1)!;
      console.log(
        `  run ${round + 1}: ${name}: ${sample.seconds.toFixed(2)} s (${fmtInt(expected / sample.seconds)} changes/s), ` +
          `CPU ${sample.cpuSeconds?.toFixed(2)} s, peak RSS ${sample.rssMiB?.toFixed(0)} MiB, ` +
          `${x.report.batches} ${x.files > 0 ? 'objects' : 'batches'}, process ${x.processSeconds.toFixed(2)} s, ` +
          `load ${machineNote().match(/load average \(1\/5\/15 min\) ([\d. ]+),/)?.[1]}`,
      );
    });
    console.log(`\n${table(results, extras, expected, results[0]!)}`);
    const starts = [...extras.values()].flat();
    console.log(
      `\nmedian s = the child's measured part only (reader loop or runCdc), after start-up and generation;` +
        ` client CPU = user + system seconds of the child (all threads, the Parquet encode worker included) over that part;` +
        ` peak RSS = the child's maxRSS (whole process), the highest of its runs; x (1) = median over rounds of` +
        ` (time / the floor's time in the same round). Child start-up (node + tsx + imports + generation):` +
        ` median ${median(starts.map((x) => x.report.startupSeconds)).toFixed(2)} s, of which generation` +
        ` ${median(starts.map((x) => x.report.generateSeconds)).toFixed(2)} s.`,
    );
    console.log(`\nmachine after: ${machineNote()}`);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** Prints the script's shape: tables and columns, steps, committed changes per table. */
function describeScript(
  script: ReturnType<typeof generateScript>,
  params: ScriptParams,
  generateSeconds: number,
): void {
  let committed = 0;
  let rolledBack = 0;
  let keepalives = 0;
  for (const s of script.steps) {
    if (s.kind === 'txn') {
      if (s.rolledBack) rolledBack++;
      else committed++;
    } else if (s.kind === 'keepalive') keepalives++;
  }
  const perTable = new Array<number>(script.tables.length).fill(0);
  const ops = [0, 0, 0];
  forEachChange(script, (g, _step, _ordinal, _schema, t) => {
    perTable[t]!++;
    ops[script.changes.op[g]!]!++;
  });
  console.log(
    `script (seed ${params.seed}): generated in ${generateSeconds.toFixed(2)} s (this process; each child generates it again);` +
      ` ${fmtInt(script.steps.length)} steps: ${fmtInt(committed)} committed transactions, ${fmtInt(rolledBack)} rolled back,` +
      ` ${fmtInt(keepalives)} keepalives; ${fmtInt(script.changes.length)} changes in all;` +
      ` committed: ${fmtInt(ops[0]!)} inserts, ${fmtInt(ops[1]!)} updates, ${fmtInt(ops[2]!)} deletes`,
  );
  for (const [t, table] of script.tables.entries()) {
    const cols = table.schema.columns.map((c) => `${c.name} ${c.type.kind}`).join(', ');
    console.log(`  ${table.name}: ${fmtInt(perTable[t]!)} committed changes; ${cols}`);
  }
}

/** Runs one child; rejects on failure or after RUN_TIMEOUT_MS. */
async function runChild(config: CdcBenchConfig): Promise<{ report: CdcBenchReport; processSeconds: number }> {
  const started = performance.now();
  let timedOut = false;
  const { code, stdout, stderr } = await runProcess(
    process.execPath,
    ['--import', 'tsx', CHILD_SCRIPT, JSON.stringify(config)],
    {},
    (pid) => {
      const timer = setTimeout(() => {
        timedOut = true;
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }, RUN_TIMEOUT_MS);
      return () => clearTimeout(timer);
    },
  );
  const processSeconds = (performance.now() - started) / 1000;
  if (timedOut)
    throw new Error(`cdc bench child (${config.variant}) killed after ${RUN_TIMEOUT_MS / 1000} s`);
  if (code !== 0) throw new Error(`cdc bench child (${config.variant}) failed (exit ${code}):\n${stderr}`);
  const report = JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as CdcBenchReport;
  return { report, processSeconds };
}

/** The cheap outcome check of one run (see the module comment); throws on a mismatch. */
function check(
  name: string,
  kind: CdcBenchConfig['variant'],
  report: CdcBenchReport,
  files: number,
  expected: number,
): void {
  const problems: string[] = [];
  if (report.rows !== expected) problems.push(`rows ${report.rows}, expected ${expected}`);
  if (kind === 'engine') {
    if (report.summaryRows !== expected) problems.push(`summary rows ${report.summaryRows}`);
    if (files !== report.batches) problems.push(`${files} Parquet files, the engine wrote ${report.batches}`);
  }
  if (problems.length) throw new Error(`${name}: ${problems.join('; ')}`);
}

function countParquet(dir: string): number {
  let n = 0;
  let entries: string[];
  try {
    entries = readdirSync(dir, { recursive: true, encoding: 'utf8' });
  } catch {
    return 0;
  }
  for (const e of entries) if (e.endsWith('.parquet')) n++;
  return n;
}

/** The result table: medians per variant and the paired ratio to the floor. */
function table(
  results: readonly VariantResult[],
  extras: ReadonlyMap<string, readonly RunExtra[]>,
  changes: number,
  floor: VariantResult,
): string {
  const lines = [
    '| variant | median s | changes/s | x (1) | client CPU s | process s | peak RSS MiB | objects | lake MiB | flushes |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    const x = extras.get(r.name) ?? [];
    const ratios = r.samples.flatMap((s, i) => {
      const b = floor.samples[i]?.seconds;
      return b ? [s.seconds / b] : [];
    });
    const objects = x.map((e) => e.files);
    const range = (v: number[]): string => {
      if (v.length === 0) return '-';
      const lo = Math.min(...v);
      const hi = Math.max(...v);
      return lo === hi ? fmtInt(lo) : `${fmtInt(lo)}-${fmtInt(hi)}`;
    };
    const isEngine = x[0]?.report.flushes !== undefined;
    lines.push(
      `| ${r.name} | ${r.seconds.toFixed(2)} | ${fmtInt(changes / r.seconds)} | ` +
        `${ratios.length ? `${median(ratios).toFixed(2)}x` : '-'} | ${r.cpuSeconds?.toFixed(2) ?? '-'} | ` +
        `${median(x.map((e) => e.processSeconds)).toFixed(2)} | ${r.rssMiB?.toFixed(0) ?? '-'} | ` +
        `${isEngine ? range(objects) : `(${range(x.map((e) => e.report.batches))} batches)`} | ` +
        `${r.bytes === undefined ? '-' : (r.bytes / MiB).toFixed(1)} | ` +
        `${isEngine ? range(x.map((e) => e.report.flushes ?? 0)) : '-'} |`,
    );
  }
  return lines.join('\n');
}
