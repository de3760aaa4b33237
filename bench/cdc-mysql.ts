/**
 * `npm run bench -- cdc-mysql [options]`: the MySQL/MariaDB binlog CDC reader and the engine
 * against `mariadb-binlog -v` reading the same binlog, on a private MariaDB 10.11 (log_bin,
 * binlog_format ROW, binlog_row_image FULL, binlog_row_metadata FULL, server_id 1: the test
 * harness's server, test/harness/mariadb-server.ts).
 *
 *   setup      `tidemark_bench.bench_changes(id bigint pk, a int, b varchar(64), c decimal(12,2),
 *              d datetime(6), e double)`; the binlog start (SHOW MASTER STATUS) recorded BEFORE
 *              N changes (90% INSERT, 7% UPDATE, 3% DELETE) in transactions of 1000 changes, then
 *              the end position
 *   baseline   `mariadb-binlog --read-from-remote-server --start-position --stop-position -v
 *              <files> > /dev/null`: the server's binlog dump, the wire and a C decode of every
 *              row into SQL text, nothing else
 *   (a)        MysqlCdcReader alone into Arrow from the recorded start, batches cut at 100k rows
 *              and dropped (bench/cdc-mysql-child.ts)
 *   (b)        runCdc end to end: FileCursorStore + ParquetSink (zstd) on a file lake, flush at
 *              100k rows, timed until the state holds every change
 *
 * The three variants run alternated (alternate() in ./support.ts) over the same binlog range,
 * each reader run with its own replica server id; ratios are paired per round. The gate for (a)
 * is >= 0.5x of `mariadb-binlog -v` (printed, never an exit status). When (a) misses it, or with
 * --profile, one extra (a) child runs under --cpu-prof.
 *
 * Where the children's Node has zstd in zlib (`--node`, Node >= 22.15), (b) also runs with
 * parquet-wasm writing every object instead of tidemark's flat writer ("parquet-wasm only").
 *
 * Options: --changes N (default 1000000), --runs N (default 3), --quick (100000 changes, 1 run),
 *          --profile (always profile (a)), --max-binlog-mib N (rotate the binlog every N MiB:
 *          a backlog over several files, for checking the rotation path), --node PATH (the
 *          children's Node), --writers (only (b) and (b) parquet-wasm only: issue 29).
 * Owns: the MariaDB it starts (stopped by pid), its temp dir, its child processes.
 * Never tunes the reader, the engine or the sink.
 */
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import type { SourcePosition } from '../shared/contracts/cdc.js';
import { binlogPosition } from '../shared/drivers/mysql/cdc/position.js';
import { type MariaDbServer, startMariaDb } from '../test/harness/mariadb-server.js';
import type { MysqlCdcBenchConfig, MysqlCdcBenchReport } from './cdc-mysql-child.js';
import {
  alternate,
  announceChildNode,
  BENCH_DIR,
  checkWritersOnce,
  diskBytes,
  fmtInt,
  machineNote,
  median,
  printWriterPair,
  redact,
  runJsonChild,
  runProcess,
  type Sample,
  shellQuote,
  stopChildrenOnInterrupt,
  summariseProfile,
  timeShell,
  useChildNode,
  type Variant,
} from './support.js';

const CHILD_SCRIPT = join(BENCH_DIR, 'cdc-mysql-child.ts');
const DATABASE = 'tidemark_bench';
const PASSWORD = 'bench';
const TABLE = `${DATABASE}.bench_changes`;
const TXN_CHANGES = 1000;
const FLUSH_ROWS = 100_000;
const GATE = 0.5;
const CHILD_TIMEOUT_MS = 10 * 60_000;
/** The password through the environment: not on the command line, and no warning about it. */
const MARIADB_ENV: NodeJS.ProcessEnv = { MYSQL_PWD: PASSWORD, TZ: 'UTC' };

interface Options {
  readonly changes: number;
  readonly runs: number;
  readonly profile: boolean;
  readonly maxBinlogMiB: number | undefined;
  readonly writers: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      changes: { type: 'string' },
      runs: { type: 'string' },
      quick: { type: 'boolean', default: false },
      profile: { type: 'boolean', default: false },
      'max-binlog-mib': { type: 'string' },
      node: { type: 'string' },
      writers: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const int = (name: string, text: string | undefined, fallback: number): number => {
    if (text === undefined) return fallback;
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a whole number >= 1 (got ${text})`);
    return n;
  };
  const quick = values.quick ?? false;
  useChildNode(values.node);
  return {
    changes: int('--changes', values.changes, quick ? 100_000 : 1_000_000),
    runs: int('--runs', values.runs, quick ? 1 : 3),
    profile: values.profile ?? false,
    maxBinlogMiB:
      values['max-binlog-mib'] === undefined
        ? undefined
        : int('--max-binlog-mib', values['max-binlog-mib'], 0),
    writers: values.writers ?? false,
  };
}

function findBinary(name: string): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(delimiter), '/usr/bin', '/usr/local/bin']) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

interface BinlogPoint {
  readonly file: string;
  readonly pos: number;
  readonly gtid: string;
  readonly server: string;
}

async function binlogAt(c: mysql.Connection): Promise<BinlogPoint> {
  const [rows] = await c.query<mysql.RowDataPacket[]>('SHOW MASTER STATUS');
  const r = rows[0];
  if (!r?.File) throw new Error('SHOW MASTER STATUS is empty: the server runs without --log-bin');
  const [g] = await c.query<mysql.RowDataPacket[]>('SELECT @@GLOBAL.gtid_binlog_pos AS g, @@server_id AS id');
  return {
    file: String(r.File),
    pos: Number(r.Position),
    gtid: String(g[0]?.g ?? ''),
    server: String(g[0]?.id),
  };
}

/** `npm run bench -- cdc-mysql [options]` */
export async function main(argv: readonly string[]): Promise<void> {
  const options = parseOptions(argv);
  const binlogTool = findBinary('mariadb-binlog') ?? findBinary('mysqlbinlog');
  if (!binlogTool) {
    console.error(
      'the baseline is missing: mariadb-binlog was not found in PATH.\n' +
        'Install the MariaDB client tools (Debian/Ubuntu: `apt-get install -y mariadb-client`), then run again.',
    );
    process.exitCode = 1;
    return;
  }
  stopChildrenOnInterrupt();
  const work = await mkdtemp(join(tmpdir(), 'tidemark-bench-cdc-my-'));
  let db: MariaDbServer | undefined;
  try {
    console.log(`machine: ${machineNote()}`);
    console.log(
      `options: changes=${options.changes} runs=${options.runs}${options.writers ? ' writers' : ''}; baseline ${binlogTool}`,
    );
    const child = announceChildNode(options.writers);
    const baseDir = join(work, 'mariadb');
    await mkdir(baseDir);
    // As root mariadbd runs as `mysql`, which must be able to enter the temp dir.
    await chmod(work, 0o755);
    db = await startMariaDb({ baseDir, password: PASSWORD, database: DATABASE });
    console.log(`mariadb on port ${db.port}, pid ${db.pid}`);
    const url = db.url;
    const port = db.port;
    const c = await mysql.createConnection({ uri: url });
    let start: BinlogPoint;
    let end: BinlogPoint;
    let files: string[];
    let binlogBytes: number;
    try {
      await c.query('SET GLOBAL innodb_buffer_pool_size = 512 * 1024 * 1024');
      await c.query(`CREATE TABLE ${TABLE} (
        id BIGINT NOT NULL PRIMARY KEY, a INT, b VARCHAR(64), c DECIMAL(12,2), d DATETIME(6), e DOUBLE
      ) ENGINE=InnoDB`);
      if (options.maxBinlogMiB !== undefined)
        await c.query(`SET GLOBAL max_binlog_size = ${options.maxBinlogMiB * 2 ** 20}`);
      start = await binlogAt(c);
      const generated = performance.now();
      await generate(c, options.changes);
      end = await binlogAt(c);
      const [logs] = await c.query<mysql.RowDataPacket[]>('SHOW BINARY LOGS');
      const all = logs.map((l) => ({ name: String(l.Log_name), size: Number(l.File_size) }));
      const from = all.findIndex((l) => l.name === start.file);
      const to = all.findIndex((l) => l.name === end.file);
      const range = all.slice(from, to + 1);
      files = range.map((l) => l.name);
      binlogBytes =
        files.length === 1
          ? end.pos - start.pos
          : range.reduce((n, l) => n + l.size, 0) - start.pos - (range.at(-1)!.size - end.pos);
      console.log(
        `backlog: ${fmtInt(options.changes)} changes in ${fmtInt(Math.ceil(options.changes / TXN_CHANGES))} transactions, ` +
          `generated in ${((performance.now() - generated) / 1000).toFixed(1)} s; ` +
          `${(binlogBytes / 2 ** 20).toFixed(1)} MiB of binlog from ${start.file}:${start.pos} to ${end.file}:${end.pos} (${files.length} file(s))`,
      );
    } finally {
      await c.end();
    }
    const startPosition: SourcePosition = binlogPosition({ ...start, epoch: 0 });
    const reports = new Map<string, MysqlCdcBenchReport[]>();
    let serverId = 1000;
    const childRun = async (
      name: string,
      variant: 'decode' | 'engine',
      profDir?: string,
      noFlatWriter = false,
    ): Promise<Sample> => {
      serverId++;
      const dir = join(work, `run-${serverId}`);
      await mkdir(dir, { recursive: true });
      try {
        const report = await runChild(
          {
            variant,
            url,
            serverId,
            tables: [TABLE],
            expectedRows: options.changes,
            start: startPosition,
            dir,
            flushRows: FLUSH_ROWS,
            flushMs: 5_000,
            ...(noFlatWriter ? { noFlatWriter } : {}),
          },
          profDir,
        );
        if (report.rows !== options.changes)
          throw new Error(`${name}: ${report.rows} rows, expected ${options.changes}`);
        if (variant === 'engine') await checkWritersOnce(name, join(dir, 'lake'));
        const list = reports.get(name) ?? [];
        list.push(report);
        reports.set(name, list);
        return {
          seconds: report.runSeconds,
          cpuSeconds: report.runCpuSeconds,
          rssMiB: report.maxRssKiB / 1024,
          startupSeconds: report.startupSeconds,
          ...(variant === 'engine' ? { bytes: diskBytes(join(dir, 'lake')) } : {}),
        };
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    };
    // --stop-position applies to the last file named; a backlog over a rotation names them all.
    const baselineCommand =
      `${shellQuote(binlogTool)} --no-defaults --read-from-remote-server -h 127.0.0.1 -P ${port} -u root ` +
      `--start-position=${start.pos} --stop-position=${end.pos} -v ${files.map(shellQuote).join(' ')} > /dev/null`;
    const BASE = 'baseline: mariadb-binlog -R -v > /dev/null';
    const A = '(a) MysqlCdcReader -> Arrow, null sink';
    const B = '(b) runCdc -> Parquet zstd file lake + file state';
    const B_WASM = '(b) parquet-wasm only';
    const engineVariants: Variant[] = [
      { name: B, run: () => childRun(B, 'engine') },
      // The lever of tidemark's own writer (parquet-flat.cjs), which needs native pages.
      ...(child.nativeZstd ? [{ name: B_WASM, run: () => childRun(B_WASM, 'engine', undefined, true) }] : []),
    ];
    const variants: Variant[] = options.writers
      ? engineVariants
      : [
          { name: BASE, run: () => timeShell(baselineCommand, MARIADB_ENV) },
          { name: A, run: () => childRun(A, 'decode') },
          ...engineVariants,
        ];
    console.log(`\nbaseline command (MYSQL_PWD in the environment): ${redact(baselineCommand)}`);
    await checkBaselineRange(baselineCommand, options.changes);
    console.log(`${options.runs} alternated run(s) per variant, each reader run with its own server id:`);
    const results = await alternate(variants, options.runs, (name, sample, round) => {
      const r = reports.get(name)?.at(-1);
      const split =
        r?.mainThreadCpuSeconds === undefined ? '' : `, main thread ${r.mainThreadCpuSeconds.toFixed(2)} s`;
      console.log(
        `  run ${round + 1}: ${name}: ${sample.seconds.toFixed(2)} s (${fmtInt(options.changes / sample.seconds)} changes/s), ` +
          `CPU ${sample.cpuSeconds?.toFixed(2) ?? '-'} s${split}` +
          `${sample.rssMiB === undefined ? '' : `, peak RSS ${sample.rssMiB.toFixed(0)} MiB`}` +
          `${r?.flushes === undefined ? '' : `, ${r.batches} objects, ${r.flushes} flushes`}`,
      );
    });
    const base = results[0]!;
    const lines = [
      '| variant | median s | changes/s | x baseline (paired: baseline s / this s) | per round | client CPU s | main-thread CPU s | peak RSS MiB |',
      '|---|---:|---:|---:|---|---:|---:|---:|',
    ];
    const ratioOf = new Map<string, number>();
    for (const r of results) {
      const ratios = r.samples.map((s, i) => base.samples[i]!.seconds / s.seconds);
      const m = median(ratios);
      ratioOf.set(r.name, m);
      const mains = (reports.get(r.name) ?? []).flatMap((x) =>
        x.mainThreadCpuSeconds === undefined ? [] : [x.mainThreadCpuSeconds],
      );
      lines.push(
        `| ${r.name} | ${r.seconds.toFixed(2)} | ${fmtInt(options.changes / r.seconds)} | ${m.toFixed(2)}x | ` +
          `${ratios.map((x) => x.toFixed(2)).join(', ')} | ${r.cpuSeconds?.toFixed(2) ?? '-'} | ` +
          `${mains.length ? median(mains).toFixed(2) : '-'} | ${r.rssMiB?.toFixed(0) ?? '-'} |`,
      );
    }
    console.log(`\n${lines.join('\n')}`);
    const a = ratioOf.get(A);
    if (a !== undefined)
      console.log(
        `\ngate (a) >= ${GATE}x of mariadb-binlog -v: ${a >= GATE ? 'PASS' : 'FAIL'} (${a.toFixed(2)}x); ` +
          `(b) end to end: ${ratioOf.get(B)!.toFixed(2)}x`,
      );
    printWriterPair(
      results.find((r) => r.name === B),
      results.find((r) => r.name === B_WASM),
    );
    console.log(
      'median s: the child from connect to the last change decoded (a) or durable in the state (b);' +
        ' mariadb-binlog: the whole process. client CPU: user + system of the child (all threads;' +
        ' the Parquet encode worker included) or of mariadb-binlog; the server (binlog dump thread) is not counted.' +
        ' main-thread CPU: the child main thread alone (/proc). peak RSS: the largest of the runs (children only).',
    );
    if (options.profile || (a !== undefined && a < GATE)) await profileDecode(work, childRun);
    console.log(`\nmachine after: ${machineNote()}`);
  } finally {
    await db?.stop();
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * `changes` row changes in transactions of TXN_CHANGES: per transaction 90% INSERTs of new ids,
 * 7% UPDATEs and 3% DELETEs of the previous transaction's first ids (of its own last ids in the
 * first one), as bench/cdc.ts does on Postgres. The Sequence engine (seq_1_to_N) is MariaDB's
 * generate_series.
 */
async function generate(c: mysql.Connection, changes: number): Promise<void> {
  let nextId = 1;
  let prevFirst = 1;
  let live = 0;
  for (let done = 0; done < changes; ) {
    const size = Math.min(TXN_CHANGES, changes - done);
    const updates = Math.floor(size * 0.07);
    const deletes = Math.floor(size * 0.03);
    const inserts = size - updates - deletes;
    const first = nextId;
    const target = done === 0 ? first + inserts - updates - deletes : prevFirst;
    await c.beginTransaction();
    await c.query(
      `INSERT INTO ${TABLE} SELECT seq, seq % 100000, CONCAT('row ', seq, REPEAT('x', seq % 20)),
         (seq % 1000000) / 100, TIMESTAMP'2026-01-01 00:00:00' + INTERVAL seq SECOND + INTERVAL seq MICROSECOND, seq / 7
       FROM seq_${first}_to_${first + inserts - 1}`,
    );
    const [u] = await c.query<mysql.ResultSetHeader>(
      `UPDATE ${TABLE} SET a = a + 1, b = CONCAT(b, '!'), d = d + INTERVAL 1 MICROSECOND WHERE id BETWEEN ${target} AND ${target + updates - 1}`,
    );
    const [d] = await c.query<mysql.ResultSetHeader>(
      `DELETE FROM ${TABLE} WHERE id BETWEEN ${target + updates} AND ${target + updates + deletes - 1}`,
    );
    await c.commit();
    // Every UPDATE/DELETE must hit a row, or the backlog holds fewer changes than announced.
    if (u.affectedRows !== updates || d.affectedRows !== deletes)
      throw new Error(
        `transaction at id ${first}: ${u.affectedRows}/${updates} updated, ${d.affectedRows}/${deletes} deleted`,
      );
    live += inserts - deletes;
    prevFirst = first;
    nextId += inserts;
    done += size;
  }
  const [rows] = await c.query<mysql.RowDataPacket[]>(`SELECT count(*) AS n FROM ${TABLE}`);
  if (Number(rows[0]!.n) !== live) throw new Error(`the table holds ${rows[0]!.n} rows, expected ${live}`);
}

/** Once, untimed: the baseline's range holds exactly the backlog's row changes (`###` row lines). */
async function checkBaselineRange(command: string, changes: number): Promise<void> {
  const count = command.replace(/ > \/dev\/null$/, ` | grep -cE '^### (INSERT|UPDATE|DELETE)'`);
  const { code, stdout, stderr } = await runProcess('bash', ['-o', 'pipefail', '-c', count], MARIADB_ENV);
  const n = Number(stdout.trim());
  if (code !== 0 || n !== changes)
    throw new Error(
      `the baseline range holds ${stdout.trim() || '?'} row changes, expected ${changes}: ${stderr}`,
    );
  console.log(`baseline range checked: mariadb-binlog -v prints ${fmtInt(n)} row changes in it`);
}

async function runChild(config: MysqlCdcBenchConfig, profDir?: string): Promise<MysqlCdcBenchReport> {
  return runJsonChild(CHILD_SCRIPT, config, {
    label: `cdc-mysql child (${config.variant})`,
    timeoutMs: CHILD_TIMEOUT_MS,
    ...(profDir ? { profDir } : {}),
  });
}

/** One (a) child under --cpu-prof: components and the hottest functions of its main thread. */
async function profileDecode(
  work: string,
  childRun: (name: string, variant: 'decode', profDir?: string) => Promise<Sample>,
): Promise<void> {
  const profDir = join(work, 'prof');
  await mkdir(profDir, { recursive: true });
  const sample = await childRun('(a) profiled', 'decode', profDir);
  const files = (await readdir(profDir)).filter((f) => f.endsWith('.cpuprofile')).sort();
  const main = files.find((f) => f.split('.').at(-3) === '0');
  console.log(
    `\n(a) under --cpu-prof: ${sample.seconds.toFixed(2)} s wall, CPU ${sample.cpuSeconds?.toFixed(2)} s`,
  );
  if (main) console.log(`\nmain thread: ${summariseProfile(join(profDir, main), 15)}`);
}
