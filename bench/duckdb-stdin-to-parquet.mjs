/**
 * The Parquet half of the by-hand pipeline a user could script (`psql \copy ... csv | this`,
 * `mariadb --batch | this`): DuckDB reads delimited text from stdin with explicit column types
 * (so it spends no time sniffing and writes the same types tidemark does) and COPYs it to one
 * Parquet file. There is no duckdb CLI on this machine; this is its stand-in, in plain JS so it
 * pays no TypeScript loader at start.
 *
 * Usage: node bench/duckdb-stdin-to-parquet.mjs <out.parquet> <csv|tsv> <zstd|snappy> '<{"col":"TYPE",...}>'
 * Owns only that one output file.
 */
import { DuckDBInstance } from '@duckdb/node-api';

const [out, format, compression, columnsJson] = process.argv.slice(2);
if (!out || !format || !compression || !columnsJson) {
  throw new Error(
    "usage: duckdb-stdin-to-parquet.mjs <out.parquet> <csv|tsv> <zstd|snappy> '<columns json>'",
  );
}
const columns = JSON.parse(columnsJson);
const sqlString = (text) => `'${String(text).replaceAll("'", "''")}'`;
const columnList = Object.entries(columns)
  .map(([name, type]) => `${sqlString(name)}: ${sqlString(type)}`)
  .join(', ');
// psql csv: quoted fields, NULL = empty unquoted field. mariadb --batch: tabs, backslash
// escapes, NULL spelled out.
const reader =
  format === 'csv' ? `delim=',', quote='"', escape='"'` : `delim='\t', quote='', escape='', nullstr='NULL'`;
const db = await DuckDBInstance.create(':memory:');
const connection = await db.connect();
await connection.run(
  `COPY (SELECT * FROM read_csv('/dev/stdin', header=false, auto_detect=false, ${reader}, columns={${columnList}})) ` +
    `TO ${sqlString(out)} (FORMAT parquet, COMPRESSION ${compression})`,
);
connection.closeSync();
db.closeSync();
