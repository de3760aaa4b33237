/**
 * `npm run bench -- snapshot [options]`: CDC snapshots (docs/decisions/0013-snapshots.md) of one
 * table of N rows against a plain full read of the same table by the database's own client, on a
 * PRIVATE embedded PostgreSQL 17 (wal_level=logical) and a private MariaDB (the test harness's
 * server, test/harness/mariadb-server.ts), both on 127.0.0.1.
 *
 *   table      id bigint pk, a int, b text (~20 chars), c numeric(12,2), d timestamptz, e double,
 *              f nullable text (10% NULL), g small jsonb; MariaDB: BIGINT, INT, VARCHAR(32),
 *              DECIMAL(12,2), DATETIME(6), DOUBLE, VARCHAR(32) NULL, JSON
 *   baseline   Postgres: `psql -c 'COPY (SELECT * FROM t) TO STDOUT (FORMAT binary)' > /dev/null`;
 *              MariaDB: `mariadb --quick -e 'SELECT * FROM db.t' > /dev/null`
 *   tidemark   runCdc (FileCursorStore + ParquetSink zstd on a file lake) with the table in
 *              `snapshot: initial`, chunkRows 50,000, 1, 2 and 4 snapshot connections
 *              (bench/snapshot-child.ts), timed from the runCdc call until a state commit says the
 *              snapshot is `complete`; each run a fresh state dir and lake, a fresh slot (dropped
 *              afterwards) or a fresh replica server id
 *
 * Variants run alternated (alternate() in ./support.ts) after one untimed baseline pass that warms
 * the caches; ratios are paired per round (tidemark's time / the baseline's time of the same
 * round). Prints; never asserts a timing (the exit status says only whether something broke).
 *
 * Where the children's Node has zstd in zlib (`--node`, Node >= 22.15), tidemark at 2 connections
 * (the spec's default) also runs with parquet-wasm writing every object instead of tidemark's
 * flat writer ("parquet-wasm only").
 *
 * Options: --rows N (default 1000000), --runs N (default 3), --quick (200000 rows, 1 run),
 *          --chunk-rows N (default 50000), --flush-rows N (the engine's flushRows, default
 *          100000; landed windows are batched into flushes, decision 0013, so the two set how
 *          many windows one commit carries),
 *          --only pg|mysql, --profile (one extra 1-connection run per database under --cpu-prof,
 *          its main thread summarised by component; the Parquet encode worker is not profiled),
 *          --node PATH (the children's Node), --writers (only tidemark at 2 connections and the
 *          same with parquet-wasm only, no baseline runs: the flat writer's pay-off, issue 29).
 * Owns: the servers it starts (stopped by their stop(), by pid), its temp dir, its child processes.
 * Never tunes the engine, the drivers or the sink.
 */
import { existsSync, readdirSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import postgres from 'postgres';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '../shared/local/embedded-postgres.js';
import { type MariaDbServer, startMariaDb } from '../test/harness/mariadb-server.js';
import type { SnapshotBenchConfig, SnapshotBenchReport } from './snapshot-child.js';
import {
  alternate,
  announceChildNode,
  BENCH_DIR,
  checkWritersOnce,
  childNodeInfo,
  diskBytes,
  fmtInt,
  machineNote,
  median,
  printWriterPair,
  redact,
  runJsonChild,
  type Sample,
  shellQuote,
  stopChildrenOnInterrupt,
  summariseProfile,
  timeShell,
  useChildNode,
  type Variant,
  type VariantResult,
} from './support.js';

const CHILD_SCRIPT = join(BENCH_DIR, 'snapshot-child.ts');
const CHUNK_ROWS = 50_000;
const CONNECTIONS = [1, 2, 4] as const;
const CHILD_TIMEOUT_MS = 20 * 60_000;
const PG_TABLE = 'public.snap_t';
const PG_PUBLICATION = 'bench_snap_pub';
const MY_DATABASE = 'tidemark_bench';
const MY_TABLE = `${MY_DATABASE}.snap_t`;
const MY_PASSWORD = 'bench';
/** The password through the environment: not on the command line, and no warning about it. */
const MARIADB_ENV: NodeJS.ProcessEnv = { MYSQL_PWD: MY_PASSWORD, TZ: 'UTC' };

interface Options {
  readonly rows: number;
  readonly chunkRows: number;
  readonly flushRows: number;
  readonly runs: number;
  readonly only: 'pg' | 'mysql' | undefined;
  readonly profile: boolean;
  readonly writers: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      rows: { type: 'string' },
      runs: { type: 'string' },
      'chunk-rows': { type: 'string' },
      'flush-rows': { type: 'string' },
      quick: { type: 'boolean', default: false },
      only: { type: 'string' },
      profile: { type: 'boolean', default: false },
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
  const only = values.only;
  if (only !== undefined && only !== 'pg' && only !== 'mysql')
    throw new Error(`--only must be pg or mysql (got ${only})`);
  const quick = values.quick ?? false;
  useChildNode(values.node);
  return {
    rows: int('--rows', values.rows, quick ? 200_000 : 1_000_000),
    runs: int('--runs', values.runs, quick ? 1 : 3),
    chunkRows: int('--chunk-rows', values['chunk-rows'], CHUNK_ROWS),
    flushRows: int('--flush-rows', values['flush-rows'], 100_000),
    only,
    profile: values.profile ?? false,
    writers: values.writers ?? false,
  };
}

/** A client binary from PATH, /usr/bin, or Debian's /usr/lib/postgresql/<major>/bin. */
function findBinary(name: string): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(delimiter), '/usr/bin', '/usr/local/bin']) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  for (const major of readdirSync(root).sort().reverse()) {
    const p = join(root, major, 'bin', name);
    if (existsSync(p)) return p;
  }
  return undefined;
}

/** What the bench keeps of each tidemark run besides its Sample. */
type Reports = Map<string, SnapshotBenchReport[]>;

/** `npm run bench -- snapshot [options]` */
export async function main(argv: readonly string[]): Promise<void> {
  const options = parseOptions(argv);
  const psql = findBinary('psql');
  const mariadb = findBinary('mariadb') ?? findBinary('mysql');
  const wantPg = options.only !== 'mysql';
  const wantMy = options.only !== 'pg';
  if ((wantPg && !psql) || (wantMy && !mariadb)) {
    console.error(
      `a baseline client is missing: ${[wantPg && !psql ? 'psql' : '', wantMy && !mariadb ? 'mariadb' : ''].filter(Boolean).join(', ')} ` +
        'not found in PATH.\nInstall the client tools (Debian/Ubuntu: `apt-get install -y postgresql-client mariadb-client`), then run again.',
    );
    process.exitCode = 1;
    return;
  }
  stopChildrenOnInterrupt();
  const work = await mkdtemp(join(tmpdir(), 'tidemark-bench-snapshot-'));
  try {
    console.log(`machine: ${machineNote()}`);
    console.log(
      `options: rows=${options.rows} runs=${options.runs} chunkRows=${options.chunkRows} flushRows=${options.flushRows} connections=${CONNECTIONS.join(',')}` +
        `${options.only ? ` only=${options.only}` : ''}${options.profile ? ' profile' : ''}${options.writers ? ' writers' : ''}`,
    );
    announceChildNode(options.writers);
    if (wantPg) await postgresSection(options, psql!, work);
    if (wantMy) await mysqlSection(options, mariadb!, work);
    console.log(`\nmachine after: ${machineNote()}`);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

async function postgresSection(options: Options, psql: string, work: string): Promise<void> {
  console.log('\n## Postgres 17 (embedded, private, 127.0.0.1)\n');
  let pg: EmbeddedPostgres | undefined;
  try {
    pg = await startEmbeddedPostgres({
      durable: false,
      settings: {
        shared_buffers: '256MB',
        max_wal_size: '8GB',
        checkpoint_timeout: '1h',
        max_replication_slots: 40,
        max_wal_senders: 40,
      },
    });
    console.log(`postgres on port ${pg.port}, pid ${pg.pid}`);
    const url = pg.url;
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const t0 = performance.now();
      await sql.unsafe(`CREATE TABLE ${PG_TABLE} (
        id bigint PRIMARY KEY, a int, b text, c numeric(12,2), d timestamptz, e double precision,
        f text, g jsonb)`);
      await sql.unsafe(
        `INSERT INTO ${PG_TABLE}
         SELECT g, (g * 7919) % 1000000, 'customer-' || lpad(g::text, 11, '0'),
                ((g * 31) % 10000000) / 100.0,
                timestamptz '2026-01-01 00:00:00+00' + g * interval '1.000001 second',
                g / 7.0,
                CASE WHEN g % 10 = 0 THEN NULL ELSE 'note ' || substr(md5(g::text), 1, 12) END,
                jsonb_build_object('k', g % 100, 'tag', 't' || (g % 7), 'ok', g % 2 = 0)
         FROM generate_series(1::bigint, ${options.rows}::bigint) g`,
      );
      await sql.unsafe(`VACUUM ANALYZE ${PG_TABLE}`);
      await sql.unsafe(`CREATE PUBLICATION ${PG_PUBLICATION} FOR TABLE ${PG_TABLE}`);
      const [size] = await sql<{ s: string }[]>`SELECT pg_size_pretty(pg_table_size('public.snap_t')) AS s`;
      console.log(
        `table ${PG_TABLE}: ${fmtInt(options.rows)} rows, ${size!.s}, built in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
      );
      const command = `${shellQuote(psql)} ${shellQuote(url)} -X -q -c ${shellQuote(`COPY (SELECT * FROM ${PG_TABLE}) TO STDOUT (FORMAT binary)`)} > /dev/null`;
      let n = 0;
      const reports: Reports = new Map();
      const tidemark = (connections: number, noFlatWriter = false): Variant => {
        const name = variantName(connections, noFlatWriter);
        return {
          name,
          run: async () => {
            const slot = `bench_snap_${n++}`;
            try {
              return await childRun(name, options.rows, reports, work, (dir) => ({
                kind: 'postgres',
                url,
                table: PG_TABLE,
                slot,
                publication: PG_PUBLICATION,
                chunkRows: options.chunkRows,
                flushRows: options.flushRows,
                connections,
                dir,
                ...(noFlatWriter ? { noFlatWriter } : {}),
              }));
            } finally {
              await dropSlot(sql, slot);
            }
          },
        };
      };
      await compare({
        baselineName: 'baseline: psql COPY (FORMAT binary) > /dev/null',
        command,
        env: {},
        tidemark,
        rows: options.rows,
        runs: options.runs,
        reports,
        writers: options.writers,
      });
      if (options.profile) await profileRun(tidemark(1), work);
    } finally {
      await sql.end();
    }
  } finally {
    await pg?.stop();
  }
}

/** The tidemark variant's name: its connections, and "parquet-wasm only" without the flat writer. */
function variantName(connections: number, noFlatWriter: boolean): string {
  return (
    `tidemark runCdc snapshot, ${connections} connection${connections > 1 ? 's' : ''}` +
    (noFlatWriter ? ', parquet-wasm only' : '')
  );
}

/** Connections of the writer pair (the spec's default, shared/config/spec.ts). */
const WRITER_CONNECTIONS = 2;

/** Drops the run's slot once its walsender has let go of it (the child has exited by then). */
async function dropSlot(sql: postgres.Sql, slot: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await sql`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ${slot}`;
      return;
    } catch (error) {
      if (attempt >= 50) throw error;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

async function mysqlSection(options: Options, client: string, work: string): Promise<void> {
  console.log('\n## MariaDB (private, 127.0.0.1)\n');
  let db: MariaDbServer | undefined;
  const baseDir = join(work, 'mariadb');
  await mkdir(baseDir);
  // As root mariadbd runs as `mysql`, which must be able to enter the temp dir.
  await chmod(work, 0o755);
  try {
    db = await startMariaDb({ baseDir, password: MY_PASSWORD, database: MY_DATABASE });
    console.log(`mariadb on port ${db.port}, pid ${db.pid}`);
    const url = db.url;
    const c = await mysql.createConnection({ uri: url });
    try {
      const [v] = await c.query<mysql.RowDataPacket[]>('SELECT VERSION() AS v');
      console.log(`server ${String(v[0]?.v)}`);
      await c.query('SET GLOBAL innodb_buffer_pool_size = 512 * 1024 * 1024');
      const t0 = performance.now();
      await c.query(`CREATE TABLE ${MY_TABLE} (
        id BIGINT NOT NULL PRIMARY KEY, a INT, b VARCHAR(32), c DECIMAL(12,2), d DATETIME(6), e DOUBLE,
        f VARCHAR(32) NULL, g JSON
      ) ENGINE=InnoDB`);
      // Batches of 100k rows (seq_<from>_to_<to> is MariaDB's Sequence engine).
      for (let from = 1; from <= options.rows; from += 100_000) {
        const to = Math.min(options.rows, from + 99_999);
        await c.query(
          `INSERT INTO ${MY_TABLE}
           SELECT seq, (seq * 7919) % 1000000, CONCAT('customer-', LPAD(seq, 11, '0')),
                  ((seq * 31) % 10000000) / 100.0,
                  TIMESTAMPADD(MICROSECOND, seq * 1000001, '2026-01-01 00:00:00'),
                  seq / 7.0,
                  IF(seq % 10 = 0, NULL, CONCAT('note ', SUBSTR(MD5(seq), 1, 12))),
                  JSON_OBJECT('k', seq % 100, 'tag', CONCAT('t', seq % 7), 'ok', seq % 2 = 0)
           FROM seq_${from}_to_${to}`,
        );
      }
      await c.query(`ANALYZE TABLE ${MY_TABLE}`);
      const [size] = await c.query<mysql.RowDataPacket[]>(
        `SELECT data_length + index_length AS b FROM information_schema.tables
         WHERE table_schema = '${MY_DATABASE}' AND table_name = 'snap_t'`,
      );
      console.log(
        `table ${MY_TABLE}: ${fmtInt(options.rows)} rows, ${(Number(size[0]?.b) / 2 ** 20).toFixed(0)} MiB, ` +
          `built in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
      );
    } finally {
      await c.end();
    }
    const command =
      `${shellQuote(client)} --no-defaults -h 127.0.0.1 -P ${db.port} -u root --quick ` +
      `-e ${shellQuote(`SELECT * FROM ${MY_TABLE}`)} > /dev/null`;
    let serverId = 2000;
    const reports: Reports = new Map();
    const tidemark = (connections: number, noFlatWriter = false): Variant => {
      const name = variantName(connections, noFlatWriter);
      return {
        name,
        run: () =>
          childRun(name, options.rows, reports, work, (dir) => ({
            kind: 'mysql',
            url,
            table: MY_TABLE,
            serverId: ++serverId,
            chunkRows: options.chunkRows,
            flushRows: options.flushRows,
            connections,
            dir,
            ...(noFlatWriter ? { noFlatWriter } : {}),
          })),
      };
    };
    await compare({
      baselineName: 'baseline: mariadb --quick -e SELECT * > /dev/null',
      command,
      env: MARIADB_ENV,
      tidemark,
      rows: options.rows,
      runs: options.runs,
      reports,
      writers: options.writers,
    });
    if (options.profile) await profileRun(tidemark(1), work);
  } finally {
    await db?.stop();
  }
}

/** One tidemark child in a fresh directory; checks the snapshot's row count. */
async function childRun(
  name: string,
  rows: number,
  reports: Reports,
  work: string,
  config: (dir: string) => SnapshotBenchConfig,
): Promise<Sample> {
  const dir = await mkdtemp(join(work, 'run-'));
  try {
    const cfg = config(dir);
    const report = await runChild(cfg, profiling);
    if (report.rows !== rows)
      throw new Error(`${name}: the snapshot wrote ${report.rows} rows, expected ${rows}`);
    await checkWritersOnce(`${name} (${cfg.kind})`, join(dir, 'lake'));
    reports.set(name, [...(reports.get(name) ?? []), report]);
    return {
      seconds: report.runSeconds,
      cpuSeconds: report.runCpuSeconds,
      rssMiB: report.maxRssKiB / 1024,
      startupSeconds: report.startupSeconds,
      bytes: diskBytes(join(dir, 'lake')),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Set while {@link profileRun} runs: the next child runs under --cpu-prof into this directory. */
let profiling: string | undefined;

/** One extra run of `variant` under --cpu-prof; its main thread summarised by component. */
async function profileRun(variant: Variant, work: string): Promise<void> {
  const profDir = await mkdtemp(join(work, 'prof-'));
  profiling = profDir;
  try {
    const sample = await variant.run();
    const files = (await readdir(profDir)).filter((f) => f.endsWith('.cpuprofile')).sort();
    const main = files.find((f) => f.split('.').at(-3) === '0');
    console.log(
      `\n${variant.name} under --cpu-prof: ${sample.seconds.toFixed(2)} s, client CPU ${sample.cpuSeconds?.toFixed(2) ?? '-'} s` +
        ' (the Parquet encode worker is not profiled: the sink starts it without --cpu-prof)',
    );
    if (main) console.log(`\nmain thread: ${summariseProfile(join(profDir, main), 15)}`);
  } finally {
    profiling = undefined;
    await rm(profDir, { recursive: true, force: true });
  }
}

async function runChild(config: SnapshotBenchConfig, profDir?: string): Promise<SnapshotBenchReport> {
  return runJsonChild(CHILD_SCRIPT, config, {
    label: 'snapshot child',
    timeoutMs: CHILD_TIMEOUT_MS,
    ...(profDir ? { profDir } : {}),
  });
}

/** The baseline against tidemark at 1, 2 and 4 connections, alternated; prints runs and the table. */
async function compare(args: {
  readonly baselineName: string;
  readonly command: string;
  readonly env: NodeJS.ProcessEnv;
  readonly tidemark: (connections: number, noFlatWriter?: boolean) => Variant;
  readonly rows: number;
  readonly runs: number;
  readonly reports: Reports;
  /** Only the writer pair (--writers). */
  readonly writers: boolean;
}): Promise<VariantResult[]> {
  const { baselineName, command, env, rows, reports } = args;
  // The lever of tidemark's own writer (parquet-flat.cjs), which needs native pages.
  const wasmOnly = childNodeInfo().nativeZstd ? [args.tidemark(WRITER_CONNECTIONS, true)] : [];
  const variants: Variant[] = args.writers
    ? [args.tidemark(WRITER_CONNECTIONS), ...wasmOnly]
    : [
        { name: baselineName, run: () => timeShell(command, env) },
        ...CONNECTIONS.map((c) => args.tidemark(c)),
        ...wasmOnly,
      ];
  console.log(`baseline command: ${redact(command)}`);
  console.log(
    "tidemark: node --import tsx bench/snapshot-child.ts '<config json>' (runCdc, snapshot: initial, fresh state, lake and slot/server id per run)",
  );
  await timeShell(command, env); // warms the OS cache and the server's buffers for every variant
  console.log(`${fmtInt(rows)} rows, ${args.runs} alternated run(s) per variant:`);
  const results = await alternate(variants, args.runs, (name, sample, round) => {
    const r = reports.get(name)?.at(-1);
    const phases =
      r === undefined
        ? ''
        : `, set-up ${r.startedSeconds?.toFixed(2) ?? '?'} s + chunks ${r.loadSeconds?.toFixed(2) ?? '?'} s` +
          ` (${r.chunks} chunks, ${r.rereads} read again, ${r.objects} objects, ${r.commits} state commits), main thread ${r.mainThreadCpuSeconds?.toFixed(2) ?? '-'} s, peak RSS ${sample.rssMiB?.toFixed(0)} MiB`;
    console.log(
      `  run ${round + 1}: ${name}: ${sample.seconds.toFixed(2)} s (${fmtInt(rows / sample.seconds)} rows/s), ` +
        `client CPU ${sample.cpuSeconds?.toFixed(2) ?? '-'} s${phases}`,
    );
  });
  const base = results[0]!;
  const lines = [
    '| variant | median s | rows/s | x baseline time (paired, median) | min-max | set-up s | started -> complete s | rows/s in chunks | client CPU s | main-thread CPU s | peak RSS MiB | lake bytes |',
    '|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    const ratios = r.samples.map((s, i) => s.seconds / base.samples[i]!.seconds);
    const rs = reports.get(r.name) ?? [];
    const pick = (f: (x: SnapshotBenchReport) => number | undefined): number | undefined => {
      const v = rs.flatMap((x) => {
        const y = f(x);
        return y === undefined ? [] : [y];
      });
      return v.length ? median(v) : undefined;
    };
    const setup = pick((x) => x.startedSeconds);
    const load = pick((x) => x.loadSeconds);
    const main = pick((x) => x.mainThreadCpuSeconds);
    const opt = (v: number | undefined): string => (v === undefined ? '-' : v.toFixed(2));
    lines.push(
      `| ${r.name} | ${r.seconds.toFixed(2)} | ${fmtInt(rows / r.seconds)} | ${median(ratios).toFixed(2)}x | ` +
        `${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)} | ${opt(setup)} | ${opt(load)} | ` +
        `${load === undefined ? '-' : fmtInt(rows / load)} | ${opt(r.cpuSeconds)} | ${opt(main)} | ` +
        `${r.rssMiB === undefined ? '-' : r.rssMiB.toFixed(0)} | ${r.bytes === undefined ? '-' : fmtInt(r.bytes)} |`,
    );
  }
  console.log(`\n${lines.join('\n')}`);
  printWriterPair(
    results.find((r) => r.name === variantName(WRITER_CONNECTIONS, false)),
    results.find((r) => r.name === variantName(WRITER_CONNECTIONS, true)),
  );
  console.log(
    "\nmedian s: the baseline's whole process; tidemark from the runCdc call to the state commit that says the snapshot is complete" +
      ' (node + tsx start-up not counted). "x baseline time" = median over rounds of (this time / the baseline\'s time in the same round);' +
      ' lower is better. set-up = runCdc call to the "snapshot started" log line (lease, introspection, slot or binlog dump,' +
      ' snapshot connections); started -> complete = that line to "snapshot complete". client CPU = user + system of the client' +
      ' process (all threads, the Parquet encode worker included) or of the baseline client; the database server is not counted.',
  );
  return results;
}
