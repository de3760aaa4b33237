/**
 * `npm run bench -- <name> [options]`: the one entry point of the benchmarks.
 *
 *   incremental         Postgres -> lake vs psql COPY (wire) and psql | DuckDB (by hand)
 *   incremental-mysql   the same against MariaDB (mariadb --batch, mariadb | DuckDB)
 *   big-values          peak RSS of tidemark run on tables of big values vs the page byte budget
 *   cdc-engine          the CDC engine alone on the scripted source (1M changes, 10 tables) vs
 *                       the scripted reader alone: changes/s, client CPU, peak RSS [--runs N] [--quick]
 *   cdc                 Postgres CDC: PostgresCdcReader (a) and runCdc -> Parquet (b) vs pg_recvlogical on
 *                       the same slot backlog, and commit-to-durable latency under pgbench
 *                       [--changes N] [--runs N] [--quick] [--profile] [--no-latency]
 *                       [--node PATH] [--writers: only (b) and (b) with parquet-wasm only]
 *   cdc-mysql           MySQL/MariaDB CDC: MysqlCdcReader (a) and runCdc -> Parquet (b) vs
 *                       mariadb-binlog -R -v over the same binlog range
 *                       [--changes N] [--runs N] [--quick] [--profile] [--node PATH] [--writers]
 *   snapshot            CDC snapshots (snapshot: initial) of one N-row table, 1/2/4 connections, vs
 *                       psql COPY binary and mariadb --quick SELECT * to /dev/null
 *                       [--rows N] [--runs N] [--quick] [--only pg|mysql] [--node PATH] [--writers]
 *   cli-start           the CLI's start-up, bundled (dist/cli) vs the sources through tsx [--runs N]
 *   mysql-reader        CPU of reading N MariaDB rows: mysql2 rows vs the raw result-set reader
 *                       [--rows N] [--runs N]
 *   encoder             bench/encoder.ts [rows]
 *   text-append         bench/text-append.ts [values]
 *   mysql-numbers       bench/mysql-numbers.ts [values]
 *   pg-page             bench/pg-page.ts [rows] [rounds]: main-thread CPU of Postgres page reads
 *   parquet-writer      bench/parquet-writer.ts [rows] [rounds]
 *   cold-start          bench/cold-start.ts [--runs N, default 7]
 *   iceberg-commits     bench/iceberg-commits.ts: Iceberg metadata bytes and commit latency over N
 *                       appends, manifest merging vs none [--commits N, default 10000] [--quick: 1000]
 *   iceberg-cdc         bench/iceberg-cdc.ts: CDC flushes into T Iceberg tables through LakeSink.stage/apply
 *                       (file catalog), a simulated minute per flush: commit latency p50/p99 and
 *                       metadata bytes [--plans 100x100,1x10000] [--quick: 20x100,1x300] [--report N]
 *                       [--retention-minutes N] [--time-limit S]
 *   current-state       bench/current-state.ts: issue 31's key lookup per current-state commit vs the
 *                       same flushes written as a change log, serial and UUID keys [--rows N]
 *                       [--flushes F] [--keys serial|uuid|both] [--quick] [--node PATH]
 *   iceberg-metadata-json  bench/iceberg-metadata-json.ts <vN.metadata.json>: parse / serialize /
 *                       fsynced write of one metadata.json, as every commit does
 *
 * Owns dispatch only. encoder, text-append, mysql-numbers, parquet-writer, cold-start,
 * iceberg-commits, iceberg-cdc, current-state and iceberg-metadata-json are standalone scripts that read their own argv, so they run as child
 * processes, unchanged.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const SCRIPTS: Readonly<Record<string, string>> = {
  encoder: 'encoder.ts',
  'text-append': 'text-append.ts',
  'mysql-numbers': 'mysql-numbers.ts',
  'pg-page': 'pg-page.ts',
  'parquet-writer': 'parquet-writer.ts',
  'cold-start': 'cold-start.ts',
  'iceberg-commits': 'iceberg-commits.ts',
  'iceberg-cdc': 'iceberg-cdc.ts',
  'current-state': 'current-state.ts',
  'iceberg-metadata-json': 'iceberg-metadata-json.ts',
};
const MODULES: Readonly<Record<string, () => Promise<{ main(argv: readonly string[]): Promise<void> }>>> = {
  incremental: () => import('./incremental.js'),
  'incremental-mysql': () => import('./incremental-mysql.js'),
  'big-values': () => import('./big-values.js'),
  'cdc-engine': () => import('./cdc-engine.js'),
  cdc: () => import('./cdc.js'),
  'cdc-mysql': () => import('./cdc-mysql.js'),
  'cli-start': () => import('./cli-start.js'),
  'mysql-reader': () => import('./mysql-reader.js'),
  snapshot: () => import('./snapshot.js'),
};

const [name, ...rest] = process.argv.slice(2);
const names = [...Object.keys(MODULES), ...Object.keys(SCRIPTS)];

if (name === undefined || name === '--help' || name === '-h') {
  console.log(`usage: npm run bench -- <${names.join('|')}> [options]   (incremental*: --help for options)`);
  process.exitCode = name === undefined ? 2 : 0;
} else if (MODULES[name]) {
  await (await MODULES[name]()).main(rest);
} else if (SCRIPTS[name]) {
  const script = fileURLToPath(new URL(SCRIPTS[name], import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...rest], { stdio: 'inherit' });
  // Forward an interrupt to the one child we started, by pid, then let it end.
  const forward = (signal: NodeJS.Signals): void => {
    child.kill(signal);
  };
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  child.once('exit', (code, signal) => {
    process.exitCode = code ?? (signal ? 1 : 0);
  });
} else {
  console.error(`unknown benchmark "${name}"; one of: ${names.join(', ')}`);
  process.exitCode = 2;
}
