/**
 * Memory of `tidemark run` on tables of big values (tens of MiB per row), Postgres and MariaDB:
 * the peak RSS of one child process per run (bench/incremental-child.ts, the path of `tidemark
 * run`, file:// lake, zstd) with the page byte budget off (pages close at 50k rows only: the
 * whole table is one page) against pages bounded by bytes, in alternated runs, next to the fixed
 * base (the same child syncing a one-row table, measured in the same run).
 *
 * Two kinds of value per database: `text` (md5 text repeated: compresses to almost nothing, so
 * the encoder's output costs no memory) and `bytes` (a random 4 MiB block repeated: zstd finds no
 * repeat within its window, so the Parquet output is as large as the data).
 *
 * Owns: the embedded Postgres and the private MariaDB it starts (stopped by pid, also on error
 * and interrupt), its tables and temp dirs. Never tunes the engine beyond what a spec can say.
 */
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import postgres from 'postgres';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '../shared/local/embedded-postgres.js';
import { type MariaDbServer, startMariaDb } from '../test/harness/mariadb-server.js';
import {
  alternate,
  type ChildConfig,
  countLake,
  fmtInt,
  machineNote,
  median,
  runTidemarkChild,
  type Sample,
  stopChildrenOnInterrupt,
  type Variant,
} from './support.js';

const MiB = 2 ** 20;
/** "Budget off": the largest budget a spec accepts, far above any table here. */
const OFF = 2 ** 30;

const USAGE = `npm run bench -- big-values [options]
  --rows N        rows per table (default 16)
  --mb N          MiB per value (default 40)
  --runs N        alternated runs per variant (default 2)
  --budgets LIST  pageBytes values, "off" = 1 GiB (default off,64MiB)
  --dbs LIST      postgres,mysql (default both)
  --kinds LIST    text,bytes (default both)`;

interface Options {
  readonly rows: number;
  readonly mb: number;
  readonly runs: number;
  readonly budgets: readonly string[];
  readonly dbs: readonly ('postgres' | 'mysql')[];
  readonly kinds: readonly ('text' | 'bytes')[];
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      rows: { type: 'string' },
      mb: { type: 'string' },
      runs: { type: 'string' },
      budgets: { type: 'string' },
      dbs: { type: 'string' },
      kinds: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const int = (name: string, v: string | undefined, d: number) => {
    const n = v === undefined ? d : Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a whole number >= 1`);
    return n;
  };
  const list = <T extends string>(v: string | undefined, d: readonly T[], allowed?: readonly T[]): T[] => {
    const items = (v === undefined ? d.join(',') : v).split(',').map((x) => x.trim()) as T[];
    for (const x of items) if (allowed && !allowed.includes(x)) throw new Error(`unknown value "${x}"`);
    return items;
  };
  return {
    rows: int('rows', values.rows, 16),
    mb: int('mb', values.mb, 40),
    runs: int('runs', values.runs, 2),
    budgets: list(values.budgets, ['off', '64MiB']),
    dbs: list(values.dbs, ['postgres', 'mysql'], ['postgres', 'mysql']),
    kinds: list(values.kinds, ['text', 'bytes'], ['text', 'bytes']),
  };
}

/** A table to sync: how the child reaches it. */
interface BenchTable {
  readonly label: string;
  readonly source: ChildConfig['source'];
  readonly table: string;
  readonly rows: number;
}

/** `npm run bench -- big-values [options]` */
export async function main(argv: readonly string[]): Promise<void> {
  const options = parseOptions(argv);
  stopChildrenOnInterrupt();
  const work = await mkdtemp(join(tmpdir(), 'tidemark-bench-big-'));
  let pg: EmbeddedPostgres | undefined;
  let my: MariaDbServer | undefined;
  try {
    console.log(`machine: ${machineNote()}`);
    console.log(
      `options: rows=${options.rows} mb=${options.mb} runs=${options.runs} budgets=${options.budgets.join(',')} dbs=${options.dbs.join(',')} kinds=${options.kinds.join(',')}`,
    );
    const tables: BenchTable[] = [];
    const bases: BenchTable[] = [];
    if (options.dbs.includes('postgres')) {
      pg = await startEmbeddedPostgres({ durable: false });
      console.log(`postgres 17 (embedded) on port ${pg.port}, pid ${pg.pid}`);
      const source = { kind: 'postgres', url: pg.url } as const;
      await buildPostgres(pg.url, options);
      for (const kind of options.kinds)
        tables.push({ label: `postgres ${kind}`, source, table: `public.big_${kind}`, rows: options.rows });
      bases.push({ label: 'postgres', source, table: 'public.tiny', rows: 1 });
    }
    if (options.dbs.includes('mysql')) {
      const dir = join(work, 'mariadb');
      await mkdir(dir);
      await chmod(work, 0o755);
      my = await startMariaDb({ baseDir: dir, password: 'bench', database: 'big' });
      console.log(`mariadb on port ${my.port}, pid ${my.pid}`);
      const source = { kind: 'mysql', url: my.url } as const;
      await buildMysql(my.url, options);
      for (const kind of options.kinds)
        tables.push({ label: `mysql ${kind}`, source, table: `big.big_${kind}`, rows: options.rows });
      bases.push({ label: 'mysql', source, table: 'big.tiny', rows: 1 });
    }

    // The fixed base: node, tsx, modules, the worker and its wasm, one tiny page.
    const baseRss = new Map<string, number>();
    for (const b of bases) {
      const samples: number[] = [];
      for (let r = 0; r < options.runs; r++) samples.push((await runOnce(work, b, OFF)).sample.rssMiB!);
      baseRss.set(b.label, median(samples));
      console.log(`base (${b.label}, one-row table): peak RSS ${median(samples).toFixed(0)} MiB`);
    }

    const variants: (Variant & { readonly t: BenchTable; readonly budget: number })[] = [];
    const reports = new Map<string, { pages: number; objects: number }>();
    for (const t of tables) {
      for (const b of options.budgets) {
        const budget = b === 'off' ? OFF : parseSize(b);
        const name = `${t.label}, pageBytes ${b === 'off' ? 'off' : b}`;
        let checked = false;
        variants.push({
          name,
          t,
          budget,
          run: async (): Promise<Sample> => {
            const { sample, report, lakeDir } = await runOnce(work, t, budget, !checked);
            if (!checked) {
              const lake = await countLake(lakeDir!);
              if (lake.rows !== t.rows || lake.distinctIds !== t.rows)
                throw new Error(
                  `${name}: the lake holds ${lake.rows} rows / ${lake.distinctIds} ids, expected ${t.rows}`,
                );
              checked = true;
            }
            if (lakeDir) await rm(lakeDir, { recursive: true, force: true });
            reports.set(name, { pages: report.pages, objects: report.objects });
            return sample;
          },
        });
      }
    }
    console.log(`\n${variants.length} variants, ${options.runs} alternated run(s) each:`);
    const results = await alternate(variants, options.runs, (name, s, round) =>
      console.log(
        `  run ${round + 1}: ${name}: ${s.seconds.toFixed(1)} s, peak RSS ${s.rssMiB!.toFixed(0)} MiB`,
      ),
    );

    console.log(
      `\n${fmtInt(options.rows)} rows x ${options.mb} MiB per table; peak RSS = the highest of a variant's runs; ` +
        'base = the same child syncing a one-row table; page = the largest page (rows per page x value size).\n',
    );
    const lines = [
      '| table | pageBytes | pages | rows/page | page MiB | median s | peak RSS MiB | peak - base MiB | (peak - base) / page | (peak - base) / pageBytes |',
      '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ];
    for (const r of results) {
      const v = variants.find((x) => x.name === r.name)!;
      const rep = reports.get(r.name)!;
      const perPage = Math.ceil(v.t.rows / rep.pages);
      const pageMiB = perPage * options.mb;
      const base = baseRss.get(v.t.source.kind)!;
      const over = r.rssMiB! - base;
      lines.push(
        `| ${v.t.label} | ${v.budget === OFF ? 'off' : `${v.budget / MiB} MiB`} | ${rep.pages} | ${perPage} | ${pageMiB} | ` +
          `${r.seconds.toFixed(1)} | ${r.rssMiB!.toFixed(0)} | ${over.toFixed(0)} | ${(over / pageMiB).toFixed(2)} | ` +
          `${v.budget === OFF ? '-' : (over / (v.budget / MiB)).toFixed(2)} |`,
      );
    }
    console.log(lines.join('\n'));
    console.log(`\nbase: ${[...baseRss].map(([k, v]) => `${k} ${v.toFixed(0)} MiB`).join(', ')}`);
    console.log(`machine after: ${machineNote()}`);
  } finally {
    await my?.stop();
    await pg?.stop();
    await rm(work, { recursive: true, force: true });
  }
}

let runs = 0;

/** One child run into a fresh state dir and lake; the lake is kept for the caller when asked. */
async function runOnce(
  work: string,
  t: BenchTable,
  pageBytes: number,
  keepLake = false,
): Promise<{
  sample: Sample;
  report: Awaited<ReturnType<typeof runTidemarkChild>>['report'];
  lakeDir?: string;
}> {
  const dir = join(work, `run-${runs++}`);
  await mkdir(dir, { recursive: true });
  const config: ChildConfig = {
    source: t.source,
    table: t.table,
    cursor: 'updated_at',
    lake: { uri: `file://${join(dir, 'lake')}`, compression: 'zstd' },
    stateDir: join(dir, 'state'),
    pageSize: 50_000,
    pageBytes,
    maxRowBytes: OFF,
  };
  try {
    const { sample, report } = await runTidemarkChild(config);
    if (report.rows !== t.rows || report.more)
      throw new Error(`${t.label}: synced ${report.rows} rows (more=${report.more}), expected ${t.rows}`);
    if (keepLake) {
      await rm(join(dir, 'state'), { recursive: true, force: true });
      return { sample, report, lakeDir: join(dir, 'lake') };
    }
    return { sample, report };
  } finally {
    if (!keepLake) await rm(dir, { recursive: true, force: true });
  }
}

function parseSize(text: string): number {
  const m = /^(\d+)\s*(KiB|MiB|GiB)?$/.exec(text);
  if (!m) throw new Error(`--budgets: "${text}" is not a size such as 64MiB`);
  return Number(m[1]) * (m[2] === 'GiB' ? 2 ** 30 : m[2] === 'KiB' ? 2 ** 10 : m[2] === 'MiB' ? MiB : 1);
}

/** big_text (md5 text repeated), big_bytes (a random 4 MiB block repeated) and a one-row table. */
async function buildPostgres(url: string, o: Options): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => undefined });
  const started = Date.now();
  const bytes = o.mb * MiB;
  try {
    for (const kind of o.kinds) {
      await sql.unsafe(
        `CREATE TABLE big_${kind} (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, v ${kind === 'text' ? 'text' : 'bytea'})`,
      );
      // Stored uncompressed out of line, as big values of either kind usually are.
      await sql.unsafe(`ALTER TABLE big_${kind} ALTER v SET STORAGE EXTERNAL`);
      for (let i = 1; i <= o.rows; i++) {
        const value =
          kind === 'text'
            ? `substr(repeat(md5('${i}'), ${Math.ceil(bytes / 32)}), 1, ${bytes})`
            : `substring(decode(repeat((SELECT string_agg(md5(random()::text || g), '') FROM generate_series(1, 262144) g), ${Math.ceil(o.mb / 4)}), 'hex') from 1 for ${bytes})`;
        await sql.unsafe(
          `INSERT INTO big_${kind} VALUES (${i}, timestamptz '2024-01-01 00:00:00+00' + ${i} * interval '1 second', ${value})`,
        );
      }
      await sql.unsafe(`CREATE INDEX ON big_${kind} (updated_at, id)`);
    }
    await sql.unsafe(`CREATE TABLE tiny (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL, v text)`);
    await sql.unsafe(`INSERT INTO tiny VALUES (1, '2024-01-01 00:00:00+00', 'x')`);
    await sql.unsafe(`CREATE INDEX ON tiny (updated_at, id)`);
  } finally {
    await sql.end();
  }
  console.log(`postgres tables built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** The same tables in MariaDB (LONGTEXT / LONGBLOB); max_allowed_packet raised to 1 GiB first. */
async function buildMysql(url: string, o: Options): Promise<void> {
  const started = Date.now();
  const admin = await mysql.createConnection({ uri: url });
  await admin.query('SET GLOBAL max_allowed_packet = 1073741824');
  await admin.end();
  // A new connection takes the new global.
  const c = await mysql.createConnection({ uri: url });
  const bytes = o.mb * MiB;
  try {
    await c.query("SET time_zone = '+00:00', group_concat_max_len = 1073741824, sql_log_bin = 0");
    for (const kind of o.kinds) {
      await c.query(
        `CREATE TABLE big_${kind} (id BIGINT PRIMARY KEY, updated_at DATETIME(6) NOT NULL, v ${kind === 'text' ? 'LONGTEXT' : 'LONGBLOB'}, INDEX (updated_at, id))`,
      );
      for (let i = 1; i <= o.rows; i++) {
        if (kind === 'bytes')
          await c.query(`SET @block = (SELECT GROUP_CONCAT(MD5(RAND()) SEPARATOR '') FROM seq_1_to_262144)`);
        const value =
          kind === 'text'
            ? `SUBSTR(REPEAT(MD5('${i}'), ${Math.ceil(bytes / 32)}), 1, ${bytes})`
            : `SUBSTR(UNHEX(REPEAT(@block, ${Math.ceil(o.mb / 4)})), 1, ${bytes})`;
        await c.query(
          `INSERT INTO big_${kind} VALUES (${i}, TIMESTAMP '2024-01-01 00:00:00' + INTERVAL ${i} SECOND, ${value})`,
        );
      }
    }
    await c.query(
      'CREATE TABLE tiny (id BIGINT PRIMARY KEY, updated_at DATETIME(6) NOT NULL, v TEXT, INDEX (updated_at, id))',
    );
    await c.query("INSERT INTO tiny VALUES (1, '2024-01-01 00:00:00', 'x')");
  } finally {
    await c.end();
  }
  console.log(`mariadb tables built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}
