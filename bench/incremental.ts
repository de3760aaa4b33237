/**
 * The incremental path against its bars, Postgres edition, all in ONE process run so the ratios
 * are measured side by side on the same (possibly loaded) machine:
 *
 *   (a) wire       psql COPY (SELECT ... ORDER BY updated_at, id) TO STDOUT (FORMAT binary) > /dev/null
 *   (b) by hand    psql \copy (...) TO STDOUT csv | DuckDB read_csv(stdin) COPY TO parquet zstd
 *   (c) tidemark   `tidemark run` to a file:// lake (openPipeline + runTable in a child process):
 *                  zstd/50k pages (the default), snappy/50k, zstd/200k
 *   (d) tidemark   to S3 (s3rver emulator, path style), zstd/50k
 *
 * then the peak RSS of (c) at `rows` and at `rssRows` (page-bounded memory: it must not grow
 * with the table), a DuckDB count of the lake, and optionally a CPU profile of (c) and (d).
 *
 * Owns: the embedded Postgres and the s3rver it starts (stopped by pid, also on error and
 * interrupt), the bench tables and temp dirs. Never tunes the engine it measures.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '../shared/local/embedded-postgres.js';
import { type AwsEmulators, startAwsEmulators } from '../test/harness/aws-emulators.js';
import {
  compare,
  DUCKDB_STDIN_SCRIPT,
  diskBytes,
  fmtInt,
  machineNote,
  parseBenchOptions,
  profileSection,
  rssSection,
  S3_BUCKET,
  shellQuote,
  stopChildrenOnInterrupt,
  timeShell,
} from './support.js';

const PSQL = '/usr/bin/psql';
const COLUMNS = 'id, customer, amount, qty, price, active, placed_at, note, payload, updated_at';
/** The types DuckDB is told for the by-hand pipeline's CSV: what tidemark writes for them. */
const DUCKDB_COLUMNS = {
  id: 'BIGINT',
  customer: 'VARCHAR',
  amount: 'DECIMAL(12,2)',
  qty: 'INTEGER',
  price: 'DOUBLE',
  active: 'BOOLEAN',
  placed_at: 'TIMESTAMPTZ',
  note: 'VARCHAR',
  payload: 'VARCHAR',
  updated_at: 'TIMESTAMPTZ',
};
/** Text timestamps in UTC for the CSV. */
const PSQL_ENV: NodeJS.ProcessEnv = { PGTZ: 'UTC' };

/** `npm run bench -- incremental [options]` */
export async function main(argv: readonly string[]): Promise<void> {
  const options = parseBenchOptions(argv);
  stopChildrenOnInterrupt();
  const work = await mkdtemp(join(tmpdir(), 'tidemark-bench-'));
  let pg: EmbeddedPostgres | undefined;
  let s3: AwsEmulators | undefined;
  try {
    console.log(`machine: ${machineNote()}`);
    console.log(
      `options: rows=${options.rows} runs=${options.runs} rss-rows=${options.rssRows}${options.profile ? ' profile' : ''}`,
    );
    pg = await startEmbeddedPostgres({
      ...(options.dataDir ? { dataDir: options.dataDir } : {}),
      durable: false,
      settings: { shared_buffers: '512MB', max_wal_size: '8GB', checkpoint_timeout: '1h' },
    });
    console.log(`postgres 17 (embedded) on port ${pg.port}, pid ${pg.pid}`);
    const url = pg.url;
    const table = await ensureTable(url, options.rows);
    s3 = await startAwsEmulators({ dynamo: false, s3Bucket: S3_BUCKET, s3Dir: join(work, 's3rver') });
    console.log(`s3rver at ${s3.s3Endpoint}, pid ${s3.pid}`);
    const base = { source: { kind: 'postgres', url }, table, cursor: 'updated_at' } as const;

    const byHandOut = join(work, 'by-hand.parquet');
    await compare({
      options,
      work,
      s3Endpoint: s3.s3Endpoint!,
      base,
      wire: {
        name: '(a) wire: psql COPY binary > /dev/null',
        command: wireCommand(url, table),
        run: () => timeShell(wireCommand(url, table), PSQL_ENV),
      },
      byHand: {
        name: '(b) by hand: psql \\copy csv | DuckDB parquet zstd',
        command: byHandCommand(url, table, 'by-hand.parquet'),
        run: async () => {
          await rm(byHandOut, { force: true });
          const sample = await timeShell(byHandCommand(url, table, byHandOut), PSQL_ENV);
          return { ...sample, bytes: diskBytes(byHandOut) };
        },
      },
    });
    if (options.rssRows > 0) {
      const big = await ensureTable(url, options.rssRows);
      await rssSection(
        base,
        [
          { rows: options.rows, table },
          { rows: options.rssRows, table: big },
        ],
        work,
      );
    }
    if (options.profile) await profileSection(base, s3.s3Endpoint!, work);
    console.log(`\nmachine after: ${machineNote()}`);
  } finally {
    await s3?.stop();
    await pg?.stop();
    await rm(work, { recursive: true, force: true });
  }
}

/** The SELECT both baselines read: the whole table in keyset order, as tidemark pages through it. */
function selectAll(table: string): string {
  return `SELECT ${COLUMNS} FROM ${table} ORDER BY updated_at, id`;
}

function wireCommand(url: string, table: string): string {
  const copy = `COPY (${selectAll(table)}) TO STDOUT (FORMAT binary)`;
  return `${PSQL} -X -q ${shellQuote(url)} -c ${shellQuote(copy)} > /dev/null`;
}

function byHandCommand(url: string, table: string, out: string): string {
  const copy = `\\copy (${selectAll(table)}) TO STDOUT WITH (FORMAT csv)`;
  return (
    `${PSQL} -X -q ${shellQuote(url)} -c ${shellQuote(copy)} | ` +
    `node ${shellQuote(DUCKDB_STDIN_SCRIPT)} ${shellQuote(out)} csv zstd ${shellQuote(JSON.stringify(DUCKDB_COLUMNS))}`
  );
}

/**
 * Creates `bench_<rows>` (the 10 columns docs/benchmarks.md describes) unless it exists with
 * that many rows. Deterministic data (setseed); `updated_at` advances one second per two ids, so
 * keyset pages move through the index and every page boundary may split a tie.
 */
async function ensureTable(url: string, rows: number): Promise<string> {
  const name = `public.bench_${rows}`;
  const sql = postgres(url, { max: 1, onnotice: () => undefined });
  try {
    const [existing] = await sql<{ n: string | null }[]>`
      SELECT CASE WHEN to_regclass(${name}) IS NULL THEN NULL
                  ELSE obj_description(to_regclass(${name}), 'pg_class') END AS n`;
    if (existing?.n === String(rows)) {
      console.log(`table ${name} exists (${fmtInt(rows)} rows), reused`);
      return name;
    }
    const started = Date.now();
    await sql.unsafe(`DROP TABLE IF EXISTS ${name}`);
    await sql.unsafe(`
      CREATE TABLE ${name} (
        id bigint PRIMARY KEY,
        customer text NOT NULL,
        amount numeric(12,2) NOT NULL,
        qty integer,
        price double precision NOT NULL,
        active boolean NOT NULL,
        placed_at timestamptz NOT NULL,
        note text,
        payload jsonb NOT NULL,
        updated_at timestamptz NOT NULL
      )`);
    await sql.unsafe('SELECT setseed(0.42)');
    // In chunks of 1M so a 5M build does not hold one huge transaction.
    for (let from = 1; from <= rows; from += 1_000_000) {
      const to = Math.min(rows, from + 999_999);
      await sql.unsafe(`
        INSERT INTO ${name}
        SELECT i,
               'customer-' || lpad(((i * 7919) % 100000)::text, 6, '0'),
               round((random() * 100000)::numeric, 2),
               CASE WHEN i % 10 = 0 THEN NULL ELSE (i % 500)::int END,
               random() * 1000,
               i % 3 <> 0,
               timestamptz '2022-01-01 00:00:00+00' + i * interval '7 seconds' + (random() * 1e6)::int * interval '1 microsecond',
               CASE WHEN i % 10 = 3 THEN NULL ELSE 'note ' || md5(i::text) END,
               jsonb_build_object('sku', 'SKU-' || (i % 5000), 'n', i % 97, 'gift', i % 11 = 0),
               timestamptz '2023-01-01 00:00:00+00' + (i / 2) * interval '1 second' + ((i / 2) % 1000) * interval '1 microsecond'
        FROM generate_series(${from}::bigint, ${to}::bigint) AS i`);
    }
    await sql.unsafe(`CREATE INDEX ON ${name} (updated_at, id)`);
    // Hint bits and the visibility map set now, not during the first timed read.
    await sql.unsafe(`VACUUM (ANALYZE) ${name}`);
    await sql.unsafe(`COMMENT ON TABLE ${name} IS '${rows}'`);
    const [size] = await sql<{ s: string }[]>`SELECT pg_size_pretty(pg_total_relation_size(${name})) AS s`;
    console.log(
      `table ${name}: ${fmtInt(rows)} rows, ${size?.s} with indexes, built in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    return name;
  } finally {
    await sql.end();
  }
}
