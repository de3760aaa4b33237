/**
 * `npm run bench -- cdc [options]`: the Postgres CDC reader and engine against the raw
 * logical-replication limit, on a private embedded PostgreSQL 17 (wal_level=logical).
 *
 *   setup      `public.bench_changes(id bigint pk, a int, b text, c numeric(12,2), d timestamptz,
 *              e double precision)`, a publication for it, one pgoutput slot per run created
 *              BEFORE the backlog, then N changes (90% INSERT, 7% UPDATE, 3% DELETE) in
 *              transactions of 1000 changes; the end of the backlog is pg_current_wal_lsn()
 *   baseline   `pg_recvlogical --start ... -f /dev/null --no-loop --endpos <end>` (Debian's
 *              postgresql-client): the walsender's decode and the wire, nothing else
 *   (a)        PostgresCdcReader alone into Arrow, batches cut at 100k rows and dropped (bench/cdc-child.ts)
 *   (b)        runCdc end to end: FileCursorStore + ParquetSink (zstd) on a file lake, flush at 100k
 *              rows, timed until the state holds every change
 *   latency    runCdc live (flush 1 s) while `pgbench -R 200 -T 20` runs: source commit to durable
 *
 * The three variants run alternated (alternate() in ./support.ts), each on its own fresh slot over
 * the same backlog; ratios are paired per round. The gate for (a) is >= 0.8x of pg_recvlogical
 * (printed, never an exit status). When (a) misses it, one extra (a) child runs under --cpu-prof.
 *
 * Where the children's Node has zstd in zlib (`--node`, Node >= 22.15), (b) also runs with
 * parquet-wasm writing every object instead of tidemark's flat writer ("parquet-wasm only").
 *
 * Options: --changes N (default 1000000), --runs N (default 3), --quick (100000 changes, 1 run),
 *          --profile (always profile (a)), --no-latency, --node PATH (the children's Node),
 *          --writers (only (b) and (b) parquet-wasm only: the flat writer's pay-off, issue 29).
 * Owns: the embedded Postgres it starts (stopped by pid), its temp dir, its child processes.
 * Never tunes the reader, the engine or the sink.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '../shared/local/embedded-postgres.js';
import type { PgCdcBenchConfig, PgCdcBenchReport } from './cdc-child.js';
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

const CHILD_SCRIPT = join(BENCH_DIR, 'cdc-child.ts');
const TABLE = 'public.bench_changes';
const PUBLICATION = 'bench_pub';
const TXN_CHANGES = 1000;
const FLUSH_ROWS = 100_000;
const GATE = 0.8;
const CHILD_TIMEOUT_MS = 10 * 60_000;

interface Options {
  readonly changes: number;
  readonly runs: number;
  readonly profile: boolean;
  readonly latency: boolean;
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
      'no-latency': { type: 'boolean', default: false },
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
    latency: !(values['no-latency'] ?? false),
    writers: values.writers ?? false,
  };
}

/** A PostgreSQL client binary from PATH or Debian's /usr/lib/postgresql/<major>/bin. */
function findBinary(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
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

/** `npm run bench -- cdc [options]` */
export async function main(argv: readonly string[]): Promise<void> {
  const options = parseOptions(argv);
  const recvlogical = findBinary('pg_recvlogical');
  const pgbench = findBinary('pgbench');
  if (!recvlogical) {
    console.error(
      'the baseline is missing: pg_recvlogical was not found in PATH or /usr/lib/postgresql/*/bin.\n' +
        'Install the PostgreSQL client tools (Debian/Ubuntu: `apt-get install -y postgresql-client`), then run again.',
    );
    process.exitCode = 1;
    return;
  }
  stopChildrenOnInterrupt();
  const work = await mkdtemp(join(tmpdir(), 'tidemark-bench-cdc-pg-'));
  let pg: EmbeddedPostgres | undefined;
  try {
    console.log(`machine: ${machineNote()}`);
    console.log(
      `options: changes=${options.changes} runs=${options.runs}${options.writers ? ' writers' : ''}; baseline ${recvlogical}`,
    );
    const child = announceChildNode(options.writers);
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
    console.log(`postgres 17 (embedded) on port ${pg.port}, pid ${pg.pid}`);
    const url = pg.url;
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const profileA = options.profile;
      const variantCount = options.writers ? 2 : child.nativeZstd ? 4 : 3;
      const slotCount = options.runs * variantCount + 1; // one per run of each variant, plus the profile run
      const slots = await setup(sql, slotCount);
      const generated = performance.now();
      await generate(sql, options.changes);
      const [row] = await sql<{ lsn: string; size: string }[]>`
        SELECT pg_current_wal_lsn()::text AS lsn,
               pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), (SELECT min(restart_lsn) FROM pg_replication_slots))) AS size`;
      const { lsn: endLsn, size } = row!;
      console.log(
        `backlog: ${fmtInt(options.changes)} changes in ${fmtInt(Math.ceil(options.changes / TXN_CHANGES))} transactions, ` +
          `generated in ${((performance.now() - generated) / 1000).toFixed(1)} s; ${size} of WAL; end LSN ${endLsn}; ${slotCount} slots`,
      );
      const takeSlot = (): string => {
        const s = slots.shift();
        if (!s) throw new Error('out of slots');
        return s;
      };
      const reports = new Map<string, PgCdcBenchReport[]>();
      const serverCpu = new Map<string, number[]>();
      /** Runs `fn` on a fresh slot while sampling its walsender's CPU seconds (server side). */
      const onSlot = async <T>(name: string, fn: (slot: string) => Promise<T>): Promise<T> => {
        const slot = takeSlot();
        const watch = watchWalsender(sql, slot);
        try {
          return await fn(slot);
        } finally {
          const cpu = await watch.stop();
          if (cpu !== undefined) serverCpu.set(name, [...(serverCpu.get(name) ?? []), cpu]);
        }
      };
      const childRun = async (
        name: string,
        variant: 'decode' | 'engine',
        profDir?: string,
        noFlatWriter = false,
      ): Promise<Sample> => {
        const dir = join(work, `run-${slots.length}`);
        await mkdir(dir, { recursive: true });
        try {
          const report = await onSlot(name, (slot) =>
            runChild(
              {
                variant,
                url,
                slot,
                publication: PUBLICATION,
                tables: [TABLE],
                expectedRows: options.changes,
                endLsn,
                dir,
                flushRows: FLUSH_ROWS,
                flushMs: 5_000,
                ...(noFlatWriter ? { noFlatWriter } : {}),
              },
              profDir,
            ),
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
      const baselineCommand = (slot: string): string =>
        `${shellQuote(recvlogical)} -d ${shellQuote(url)} --slot ${shellQuote(slot)} --start ` +
        `-o proto_version=1 -o publication_names=${PUBLICATION} -f /dev/null --no-loop --endpos ${endLsn}`;
      const BASE = 'baseline: pg_recvlogical -f /dev/null';
      const A = '(a) PostgresCdcReader -> Arrow, null sink';
      const B = '(b) runCdc -> Parquet zstd file lake + file state';
      const B_WASM = '(b) parquet-wasm only';
      const engineVariants: Variant[] = [
        { name: B, run: () => childRun(B, 'engine') },
        // The lever of tidemark's own writer (parquet-flat.cjs), which needs native pages.
        ...(child.nativeZstd
          ? [{ name: B_WASM, run: () => childRun(B_WASM, 'engine', undefined, true) }]
          : []),
      ];
      const variants: Variant[] = options.writers
        ? engineVariants
        : [
            { name: BASE, run: () => onSlot(BASE, (slot) => timeShell(baselineCommand(slot))) },
            { name: A, run: () => childRun(A, 'decode') },
            ...engineVariants,
          ];
      console.log(`\nbaseline command: ${redact(baselineCommand('<slot>'))}`);
      console.log(`${options.runs} alternated run(s) per variant, each on its own slot:`);
      const results = await alternate(variants, options.runs, (name, sample, round) => {
        const r = reports.get(name)?.at(-1);
        const split =
          r?.mainThreadCpuSeconds === undefined ? '' : `, main thread ${r.mainThreadCpuSeconds.toFixed(2)} s`;
        const server = serverCpu.get(name)?.at(-1);
        console.log(
          `  run ${round + 1}: ${name}: ${sample.seconds.toFixed(2)} s (${fmtInt(options.changes / sample.seconds)} changes/s), ` +
            `CPU ${sample.cpuSeconds?.toFixed(2) ?? '-'} s${split}` +
            `${server === undefined ? '' : `, walsender CPU ${server.toFixed(2)} s`}` +
            `${sample.rssMiB === undefined ? '' : `, peak RSS ${sample.rssMiB.toFixed(0)} MiB`}` +
            `${r?.flushes === undefined ? '' : `, ${r.batches} objects, ${r.flushes} flushes`}`,
        );
      });
      const base = results[0]!;
      const lines = [
        '| variant | median s | changes/s | x baseline (paired: baseline s / this s) | per round | client CPU s | main-thread CPU s | walsender CPU s | peak RSS MiB |',
        '|---|---:|---:|---:|---|---:|---:|---:|---:|',
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
            `${mains.length ? median(mains).toFixed(2) : '-'} | ${serverCpu.has(r.name) ? median(serverCpu.get(r.name)!).toFixed(2) : '-'} | ` +
            `${r.rssMiB?.toFixed(0) ?? '-'} |`,
        );
      }
      console.log(`\n${lines.join('\n')}`);
      const a = ratioOf.get(A);
      if (a !== undefined)
        console.log(
          `\ngate (a) >= ${GATE}x of pg_recvlogical: ${a >= GATE ? 'PASS' : 'FAIL'} (${a.toFixed(2)}x); ` +
            `(b) end to end: ${ratioOf.get(B)!.toFixed(2)}x`,
        );
      printWriterPair(
        results.find((r) => r.name === B),
        results.find((r) => r.name === B_WASM),
      );
      console.log(
        'median s: the child from connect to the last change decoded (a) or durable in the state (b);' +
          ' pg_recvlogical: the whole process. client CPU: user + system of the child (all threads;' +
          ' the Parquet encode worker included) or of pg_recvlogical; the server (walsender) is not counted.' +
          ' main-thread CPU: the child main thread alone (/proc), the rest is the encode worker, GC and libuv.' +
          " walsender CPU: the slot's walsender process (server side; sampled every 100 ms from /proc, so up to 0.1 s low).",
      );
      if (profileA || (a !== undefined && a < GATE)) await profileDecode(work, childRun);
      if (options.latency && !options.writers) {
        for (const s of slots) await sql`SELECT pg_drop_replication_slot(${s})`;
        if (pgbench) await latency(sql, url, pgbench, work);
        else console.log('\nlatency: pgbench not found (apt-get install -y postgresql-client); skipped');
      }
    } finally {
      await sql.end();
    }
    console.log(`\nmachine after: ${machineNote()}`);
  } finally {
    await pg?.stop();
    await rm(work, { recursive: true, force: true });
  }
}

/** Table, publication and `count` slots, all before any change. */
async function setup(sql: postgres.Sql, count: number): Promise<string[]> {
  await sql.unsafe(`CREATE TABLE ${TABLE} (
    id bigint PRIMARY KEY, a int, b text, c numeric(12,2), d timestamptz, e double precision)`);
  await sql.unsafe(`CREATE PUBLICATION ${PUBLICATION} FOR TABLE ${TABLE}`);
  const slots: string[] = [];
  for (let i = 0; i < count; i++) {
    const name = `bench_slot_${i}`;
    await sql`SELECT pg_create_logical_replication_slot(${name}, 'pgoutput')`;
    slots.push(name);
  }
  return slots;
}

/**
 * `changes` row changes in transactions of TXN_CHANGES: per transaction 90% INSERTs of new ids,
 * 7% UPDATEs and 3% DELETEs of the previous transaction's first ids (of its own last ids in the
 * first one).
 */
async function generate(sql: postgres.Sql, changes: number): Promise<void> {
  let nextId = 1;
  let prevFirst = 1;
  for (let done = 0; done < changes; ) {
    const size = Math.min(TXN_CHANGES, changes - done);
    const updates = Math.floor(size * 0.07);
    const deletes = Math.floor(size * 0.03);
    const inserts = size - updates - deletes;
    const first = nextId;
    // The first transaction touches the tail of its own ids; the next one touches the head of them.
    const target = done === 0 ? first + inserts - updates - deletes : prevFirst;
    await sql.begin(async (tx) => {
      await tx.unsafe(
        `INSERT INTO ${TABLE} SELECT g, g % 100000, 'row ' || g || repeat('x', (g % 20)::int),
           (g % 1000000) / 100.0, timestamptz '2026-01-01 00:00:00+00' + g * interval '1.000001 second', g / 7.0
         FROM generate_series(${first}::bigint, ${first + inserts - 1}::bigint) g`,
      );
      if (updates > 0)
        await tx.unsafe(
          `UPDATE ${TABLE} SET a = a + 1, b = b || '!', d = d + interval '1 microsecond' WHERE id BETWEEN ${target} AND ${target + updates - 1}`,
        );
      if (deletes > 0)
        await tx.unsafe(
          `DELETE FROM ${TABLE} WHERE id BETWEEN ${target + updates} AND ${target + updates + deletes - 1}`,
        );
    });
    prevFirst = first;
    nextId += inserts;
    done += size;
  }
  // Every UPDATE/DELETE must have hit a row, or the backlog holds fewer changes than announced.
  const n = (await sql<{ n: string }[]>`SELECT count(*)::text AS n FROM bench_changes`)[0]!.n;
  const expectedLive = countLive(changes);
  if (Number(n) !== expectedLive) throw new Error(`the table holds ${n} rows, expected ${expectedLive}`);
}

function countLive(changes: number): number {
  let live = 0;
  for (let done = 0; done < changes; ) {
    const size = Math.min(TXN_CHANGES, changes - done);
    const deletes = Math.floor(size * 0.03);
    live += size - Math.floor(size * 0.07) - deletes - deletes;
    done += size;
  }
  return live;
}

/**
 * Samples the CPU seconds (user + system, /proc/<pid>/stat) of the walsender serving `slot`
 * every 100 ms; `stop()` gives the last reading (undefined if none was seen).
 */
function watchWalsender(sql: postgres.Sql, slot: string): { stop(): Promise<number | undefined> } {
  let last: number | undefined;
  let pid: number | undefined;
  let busy = false;
  const sample = async (): Promise<void> => {
    if (busy) return;
    busy = true;
    try {
      if (pid === undefined) {
        const row = (
          await sql<
            { pid: number | null }[]
          >`SELECT active_pid AS pid FROM pg_replication_slots WHERE slot_name = ${slot}`
        )[0];
        pid = row?.pid ?? undefined;
      }
      if (pid !== undefined) {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        last = (Number(f[11]) + Number(f[12])) / 100;
      }
    } catch {
      // the walsender is gone (the run ended) or not there yet
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(() => void sample(), 100);
  return {
    async stop() {
      clearInterval(timer);
      while (busy) await new Promise((r) => setTimeout(r, 10));
      return last;
    },
  };
}

async function runChild(config: PgCdcBenchConfig, profDir?: string): Promise<PgCdcBenchReport> {
  return runJsonChild(CHILD_SCRIPT, config, {
    label: `cdc child (${config.variant})`,
    timeoutMs: CHILD_TIMEOUT_MS,
    ...(profDir ? { profDir } : {}),
  });
}

/** One (a) child under --cpu-prof (on the spare slot): components and the hottest functions. */
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

/** Commit-to-durable latency of the live engine under pgbench's steady rate. */
async function latency(sql: postgres.Sql, url: string, pgbench: string, work: string): Promise<void> {
  const u = new URL(url);
  const env: NodeJS.ProcessEnv = {
    PGHOST: u.hostname,
    PGPORT: u.port,
    PGUSER: decodeURIComponent(u.username),
    PGPASSWORD: decodeURIComponent(u.password),
    PGDATABASE: u.pathname.slice(1),
  };
  const init = await runProcess(pgbench, ['-i', '-s', '1', '-q'], env);
  if (init.code !== 0) throw new Error(`pgbench -i failed:\n${init.stderr}`);
  const tables = ['public.pgbench_accounts', 'public.pgbench_branches', 'public.pgbench_tellers'];
  await sql.unsafe(`CREATE PUBLICATION bench_pgbench FOR TABLE ${tables.join(', ')}`);
  await sql`SELECT pg_create_logical_replication_slot('bench_latency', 'pgoutput')`;
  const dir = join(work, 'latency');
  await mkdir(dir, { recursive: true });
  const child = runChild({
    variant: 'latency',
    url,
    slot: 'bench_latency',
    publication: 'bench_pgbench',
    tables,
    expectedRows: 0,
    dir,
    flushRows: FLUSH_ROWS,
    flushMs: 1_000,
  });
  let failed: unknown;
  child.catch((e: unknown) => {
    failed = e;
  });
  const deadline = Date.now() + 60_000;
  while (!existsSync(join(dir, 'ready'))) {
    if (failed) throw failed;
    if (Date.now() > deadline) throw new Error('the latency child did not start streaming within 60 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  const args = ['-R', '200', '-T', '20', '-c', '2', '-j', '1', '-n'];
  console.log(`\nlatency: runCdc live (flush 1 s, idle commit 1 s) while \`pgbench ${args.join(' ')}\` runs`);
  const bench = await runProcess(pgbench, args, env);
  if (bench.code !== 0) throw new Error(`pgbench failed:\n${bench.stderr}`);
  const tps = bench.stdout.match(/tps = ([\d.]+)/)?.[1];
  const lsn = (await sql<{ lsn: string }[]>`SELECT pg_current_wal_lsn()::text AS lsn`)[0]!.lsn;
  await writeFile(join(dir, 'end-lsn'), lsn);
  const report = await child;
  const l = [...(report.latenciesMs ?? [])].sort((x, y) => x - y);
  const q = (p: number): number => l[Math.min(l.length - 1, Math.floor(p * l.length))] ?? Number.NaN;
  console.log(
    `pgbench: tps ${tps ?? '?'}; engine: ${fmtInt(report.rows)} rows in ${report.flushes} flushes, ${report.batches} objects, ` +
      `CPU ${report.runCpuSeconds.toFixed(2)} s, peak RSS ${(report.maxRssKiB / 1024).toFixed(0)} MiB`,
  );
  console.log(
    `commit-to-durable (source commit timestamp -> state commit covering the transaction), ${fmtInt(l.length)} transactions: ` +
      `p50 ${fmtInt(q(0.5))} ms, p90 ${fmtInt(q(0.9))} ms, p99 ${fmtInt(q(0.99))} ms, max ${fmtInt(l.at(-1) ?? Number.NaN)} ms`,
  );
}
