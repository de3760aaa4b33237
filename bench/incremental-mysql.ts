/**
 * The incremental path against its bars, MySQL edition (a private MariaDB 10.11), in ONE run
 * like bench/incremental.ts:
 *
 *   (a) wire       mariadb --quick --batch -e "SELECT ... ORDER BY updated_at, id" > /dev/null
 *   (b) by hand    mariadb --quick --batch ... | DuckDB read_csv(stdin, tab-separated) COPY TO parquet zstd
 *   (c) tidemark   file:// lake, zstd/50k (default), snappy/50k, zstd/200k; (d) s3rver zstd/50k
 *
 * plus peak RSS at `rows` and `rssRows` and an optional CPU profile. MariaDB's text protocol is
 * the only wire there is (no binary COPY), so (a) is the client's own text dump.
 *
 * Owns: the MariaDB and s3rver it starts (stopped by pid, also on error and interrupt), its
 * tables and temp dirs. Never tunes the engine or driver it measures. Runs only when the driver
 * registry has a `mysql` driver; otherwise it says so and exits.
 */
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { driver } from '../shared/drivers/registry.js';
import { type AwsEmulators, startAwsEmulators } from '../test/harness/aws-emulators.js';
import { type MariaDbServer, startMariaDb } from '../test/harness/mariadb-server.js';
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

const MARIADB = 'mariadb';
const DATABASE = 'tidemark_bench';
const PASSWORD = 'bench';
const COLUMNS = 'id, customer, amount, qty, price, active, placed_at, note, payload, updated_at';
/** What tidemark's MySQL driver writes for these columns (tinyint(1) stays an integer). */
const DUCKDB_COLUMNS = {
  id: 'BIGINT',
  customer: 'VARCHAR',
  amount: 'DECIMAL(12,2)',
  qty: 'INTEGER',
  price: 'DOUBLE',
  active: 'TINYINT',
  placed_at: 'TIMESTAMPTZ',
  note: 'VARCHAR',
  payload: 'VARCHAR',
  updated_at: 'TIMESTAMPTZ',
};
/** The password through the environment: not on the command line, and no warning about it. */
const MARIADB_ENV: NodeJS.ProcessEnv = { MYSQL_PWD: PASSWORD, TZ: 'UTC' };

/** `npm run bench -- incremental-mysql [options]` */
export async function main(argv: readonly string[]): Promise<void> {
  const options = parseBenchOptions(argv);
  try {
    driver('mysql');
  } catch {
    console.log(
      'incremental-mysql: not available yet: shared/drivers/registry.ts has no `mysql` driver registered. ' +
        'Run `npm run bench -- incremental` for Postgres.',
    );
    return;
  }
  if (options.dataDir)
    console.log('note: --data-dir is for the Postgres bench; MariaDB is installed afresh.');
  stopChildrenOnInterrupt();
  const work = await mkdtemp(join(tmpdir(), 'tidemark-bench-my-'));
  let db: MariaDbServer | undefined;
  let s3: AwsEmulators | undefined;
  try {
    console.log(`machine: ${machineNote()}`);
    console.log(
      `options: rows=${options.rows} runs=${options.runs} rss-rows=${options.rssRows}${options.profile ? ' profile' : ''}`,
    );
    const baseDir = join(work, 'mariadb');
    await mkdir(baseDir);
    // As root mariadbd runs as `mysql`, which must be able to enter the temp dir.
    await chmod(work, 0o755);
    db = await startMariaDb({ baseDir, password: PASSWORD, database: DATABASE });
    console.log(`mariadb on port ${db.port}, pid ${db.pid}`);
    const url = db.url;
    const port = db.port;
    await sizeBufferPool(url, options.rows);
    const table = await ensureTable(url, options.rows);
    s3 = await startAwsEmulators({ dynamo: false, s3Bucket: S3_BUCKET, s3Dir: join(work, 's3rver') });
    console.log(`s3rver at ${s3.s3Endpoint}, pid ${s3.pid}`);
    const base = { source: { kind: 'mysql', url }, table, cursor: 'updated_at' } as const;

    const byHandOut = join(work, 'by-hand.parquet');
    await compare({
      options,
      work,
      s3Endpoint: s3.s3Endpoint!,
      base,
      wire: {
        name: '(a) wire: mariadb --quick --batch > /dev/null',
        command: wireCommand(port, table),
        run: () => timeShell(wireCommand(port, table), MARIADB_ENV),
      },
      byHand: {
        name: '(b) by hand: mariadb --batch | DuckDB parquet zstd',
        command: byHandCommand(port, table, 'by-hand.parquet'),
        run: async () => {
          await rm(byHandOut, { force: true });
          const sample = await timeShell(byHandCommand(port, table, byHandOut), MARIADB_ENV);
          return { ...sample, bytes: diskBytes(byHandOut) };
        },
      },
    });
    if (options.rssRows > 0) {
      await sizeBufferPool(url, options.rssRows);
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
    await db?.stop();
    await rm(work, { recursive: true, force: true });
  }
}

/** The SELECT both baselines read: the whole table in keyset order, as tidemark pages through it. */
function selectAll(table: string): string {
  return `SET time_zone = '+00:00'; SELECT ${COLUMNS} FROM ${table} ORDER BY updated_at, id`;
}

function client(port: number): string {
  return `${MARIADB} --no-defaults -h 127.0.0.1 -P ${port} -u root --quick --batch --skip-column-names`;
}

function wireCommand(port: number, table: string): string {
  return `${client(port)} -e ${shellQuote(selectAll(table))} > /dev/null`;
}

function byHandCommand(port: number, table: string, out: string): string {
  return (
    `${client(port)} -e ${shellQuote(selectAll(table))} | ` +
    `node ${shellQuote(DUCKDB_STDIN_SCRIPT)} ${shellQuote(out)} tsv zstd ${shellQuote(JSON.stringify(DUCKDB_COLUMNS))}`
  );
}

/**
 * The harness starts MariaDB with the default 128 MB buffer pool and O_DIRECT: a bigger table
 * would then be read from disk in every run. Grow the pool (online) to hold the table, as a
 * server sized for it would.
 */
async function sizeBufferPool(url: string, rows: number): Promise<void> {
  const bytes = Math.max(256, Math.ceil((rows * 400) / 2 ** 20 / 128) * 128) * 2 ** 20;
  const c = await mysql.createConnection({ uri: url });
  try {
    await c.query(`SET GLOBAL innodb_buffer_pool_size = ${bytes}`);
  } finally {
    await c.end();
  }
}

/**
 * Creates `bench_<rows>` like the Postgres bench's table (TIMESTAMP(6) for timestamptz, JSON
 * for jsonb, BOOLEAN = tinyint(1)) unless it exists with that many rows (its comment).
 */
async function ensureTable(url: string, rows: number): Promise<string> {
  const name = `${DATABASE}.bench_${rows}`;
  const c = await mysql.createConnection({ uri: url, multipleStatements: false });
  try {
    await c.query(`SET time_zone = '+00:00'`);
    const [found] = await c.query<mysql.RowDataPacket[]>(
      'SELECT table_comment AS n FROM information_schema.tables WHERE table_schema = ? AND table_name = ?',
      [DATABASE, `bench_${rows}`],
    );
    if (found[0]?.n === String(rows)) {
      console.log(`table ${name} exists (${fmtInt(rows)} rows), reused`);
      return name;
    }
    const started = Date.now();
    await c.query(`DROP TABLE IF EXISTS ${name}`);
    await c.query(`
      CREATE TABLE ${name} (
        id BIGINT NOT NULL PRIMARY KEY,
        customer VARCHAR(64) NOT NULL,
        amount DECIMAL(12,2) NOT NULL,
        qty INT NULL,
        price DOUBLE NOT NULL,
        active BOOLEAN NOT NULL,
        placed_at TIMESTAMP(6) NOT NULL,
        note VARCHAR(64) NULL,
        payload JSON NOT NULL,
        updated_at TIMESTAMP(6) NOT NULL
      ) ENGINE=InnoDB`);
    // The Sequence engine (seq_1_to_N) is MariaDB's generate_series; chunks keep transactions small.
    for (let from = 1; from <= rows; from += 250_000) {
      const to = Math.min(rows, from + 249_999);
      await c.query(`
        INSERT INTO ${name}
        SELECT seq,
               CONCAT('customer-', LPAD((seq * 7919) % 100000, 6, '0')),
               ROUND(RAND(seq) * 100000, 2),
               CASE WHEN seq % 10 = 0 THEN NULL ELSE seq % 500 END,
               RAND(seq + 1) * 1000,
               seq % 3 <> 0,
               TIMESTAMP('2022-01-01') + INTERVAL seq * 7 SECOND + INTERVAL FLOOR(RAND(seq + 2) * 1000000) MICROSECOND,
               CASE WHEN seq % 10 = 3 THEN NULL ELSE CONCAT('note ', MD5(seq)) END,
               JSON_OBJECT('sku', CONCAT('SKU-', seq % 5000), 'n', seq % 97, 'gift', seq % 11 = 0),
               TIMESTAMP('2023-01-01') + INTERVAL (seq DIV 2) SECOND + INTERVAL ((seq DIV 2) % 1000) MICROSECOND
        FROM seq_${from}_to_${to}`);
    }
    await c.query(`ALTER TABLE ${name} ADD INDEX by_updated (updated_at, id), COMMENT = '${rows}'`);
    await c.query(`ANALYZE TABLE ${name}`);
    console.log(
      `table ${name}: ${fmtInt(rows)} rows, built in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    return name;
  } finally {
    await c.end();
  }
}
