/**
 * Issue 30, "Must show" 1: readers tidemark did not write read every Iceberg table the real CLI
 * synced, exactly. On the harness Postgres and MariaDB (a fresh database each), a table of the
 * golden types of docs/types.md (integers at their limits, decimals up to p = 38, unbounded
 * NUMERIC / DECIMAL(65,30) as text, BIGINT UNSIGNED, float64, bool, text with non-ASCII,
 * bytea/BLOB, uuid, date, timestamps with micros, timestamptz, TIME past 24 h, Postgres arrays
 * with NULL elements, JSON, zero dates, NULLs) is synced by `bin/tidemark.js` into a `file://`
 * lake with the default table format (Iceberg, `file` catalog) five ways:
 *   - `tidemark run`, writeMode append, twice (rows changed, added and deleted in between);
 *   - the same with writeMode upsert, into a lake of its own;
 *   - `tidemark run`, writeMode upsert, three times (rows updated and added in between);
 *   - `tidemark cdc` with `snapshot: initial` (rows existing before), then inserts, updates and
 *     deletes in several transactions (one holding an insert, update and delete of one key),
 *     until the table's current snapshot holds every change; stopped by SIGTERM (exit 0); once
 *     with writeMode append, once with writeMode upsert.
 * Each table is read back by pyiceberg (`StaticTable.from_metadata` on the newest
 * `v<N>.metadata.json`) and by Spark 3.5 + Iceberg 1.12 (the table folder as a Hadoop table, one
 * session for the file): the Iceberg schema (types, required) as docs/types.md's Iceberg column
 * says; each column equal to the source's value as docs/types.md says it lands (the source's own
 * text of it, taken by SQL when the change was made; decimals compared without trailing zeros,
 * see `decimalText`), the metadata columns as the engine writes them. An append table is a change
 * log: every row once, in `__pos` order (for CDC every change with its `__op`, in commit order),
 * no delete file, the row count the sum of `record_count` over the data files. An upsert table is
 * a current state (issue 31, docs/decisions/0026-current-state-delete-form.md), read AS IS (no
 * dedupe): exactly one row per key, no `__op = d` row, each the key's latest version, so the
 * source's rows (an incremental read cannot see a delete: a deleted key keeps the version last
 * read), and the row count is the data files' records minus the position deletes' records. No
 * file is listed twice, and pyiceberg's and Spark's `files` tables agree.
 *
 * Skips, naming the install script, when the readers are missing (test/harness/readers.ts).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type mysql from 'mysql2/promise';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultCdcName } from '../../shared/config/spec.js';
import { parseTableMetadata } from '../../shared/iceberg/metadata-json.js';
import { CdcProcess } from '../harness/cdc-cli.js';
import { freshMysqlDatabase } from '../harness/mysql.js';
import { mysqlClient } from '../harness/mysql-cdc.js';
import { freshPgDatabase } from '../harness/pg.js';
import { readersMissing, runReaderScript, SparkSession, sparkMissing } from '../harness/readers.js';
import { localSpec, runCli } from './incremental/fixture.js';

const noReaders = readersMissing === undefined ? '' : `(skipped: ${readersMissing})`;
const noSpark = sparkMissing === undefined ? '' : `(skipped: ${sparkMissing})`;
const SYNC_TIMEOUT_MS = 900_000;
const READ_TIMEOUT_MS = 300_000;
const CDC_DEADLINE_MS = 180_000;

// ---------------------------------------------------------------------------------------------
// Values as both sides compare them

/** How a column's values compare: each as the source's canonical text (lists element-wise). */
type Scalar = 'int' | 'dec' | 'text' | 'float' | 'bool' | 'bin' | 'date' | 'ts';
type Kind = Scalar | { readonly list: Scalar };
type Canon = string | null | (string | null)[];

interface Column {
  readonly name: string;
  readonly ddl: string;
  readonly kind: Kind;
  /** SQL giving the column's value as canonical text (lists: a JSON array of texts). */
  readonly src: string;
}

/** A reader's value (common.py's JSON) as canonical text. */
function canonRead(kind: Kind, v: unknown): Canon {
  if (v === null || v === undefined) return null;
  if (typeof kind === 'object') {
    if (!Array.isArray(v)) return `not a list: ${JSON.stringify(v)}`;
    return v.map((e) => canonRead(kind.list, e) as string | null);
  }
  switch (kind) {
    case 'float':
      return String(Number(v));
    case 'dec':
      return decimalText(String(v));
    case 'ts':
      // pyiceberg prints timestamptz with +00:00, Spark as naive UTC (the session is UTC).
      return String(v).replace(/\+00:00$/, '');
    default:
      return String(v);
  }
}

/** The source's canonical text of a value (src SQL's output). */
function canonSource(kind: Kind, v: unknown): Canon {
  if (v === null || v === undefined) return null;
  if (typeof kind === 'object')
    return (JSON.parse(String(v)) as (string | null)[]).map(
      (e) => canonSource(kind.list, e) as string | null,
    );
  if (kind === 'float') return String(Number(v));
  return kind === 'dec' ? decimalText(String(v)) : String(v);
}

/**
 * A decimal's text without trailing fractional zeros: the same number has one text whatever
 * exponent the reader carried it with. pyspark hands decimals to Python through Pyrolite, which
 * pickles a Java BigDecimal by its engineering string: 1E-10 at scale 10 arrives as
 * Decimal('100E-12') and prints as 0.000000000100. The column's scale itself is checked by the
 * schema (pyiceberg's types), not by the digits a transport keeps.
 */
function decimalText(text: string): string {
  if (!text.includes('.')) return text;
  const t = text.replace(/0+$/, '').replace(/\.$/, '');
  return t === '-0' ? '0' : t;
}

/** One expected lake row: data columns (canonical) and what its metadata columns must say. */
interface Expected {
  readonly values: Record<string, Canon>;
  readonly op: 'c' | 'u' | 'd';
  readonly snapshot: boolean;
  readonly phase: 'incremental' | 'snapshot' | 'stream';
  /** Whether `__commit_ts` is set (stream rows) or NULL (snapshot and incremental rows). */
  readonly commitTs: boolean;
}

/**
 * The expected rows in `__pos` order: groups one after another; within an unordered group (one
 * incremental run, the snapshot) any order, compared by id.
 */
interface ExpectedGroup {
  readonly ordered: boolean;
  readonly rows: readonly Expected[];
}

// ---------------------------------------------------------------------------------------------
// The sources

interface Change {
  readonly sql: string;
  readonly id: number;
  readonly op: 'c' | 'u' | 'd';
}

interface Dialect {
  readonly kind: 'postgres' | 'mysql';
  readonly url: string;
  readonly columns: readonly Column[];
  /** Each column's Iceberg type as pyiceberg prints it (docs/types.md, the Iceberg column). */
  readonly iceberg: Readonly<Record<string, string>>;
  /** The columns an incremental table's Iceberg schema has `required` (NOT NULL in the lake). */
  readonly requiredIncremental: readonly string[];
  /** The spec's name of table `name` (schema- or database-qualified). */
  qualified(name: string): string;
  create(name: string): Promise<void>;
  /** Inserts the four golden rows (ids 1-4) into `name`. */
  insertGolden(name: string): Promise<void>;
  /** Statements between the two incremental runs (the cursor moves forward on each changed row). */
  incrementalChanges(name: string): string[];
  /** Updates and an insert before a third incremental run (after `incrementalChanges`). */
  thirdRunChanges(name: string): string[];
  /** The CDC workload: transactions of changes, in commit order. */
  cdcTransactions(name: string): Change[][];
  /** Runs one transaction; `after(i)` runs inside it after statement i. */
  txn(statements: readonly string[], after: (i: number) => Promise<void>): Promise<void>;
  /** Canonical rows of `ids` (all when absent), by id. */
  rows(name: string, ids?: readonly number[]): Promise<Map<number, Record<string, Canon>>>;
  /** Whether a delete's lake row holds the deleted row's values (MySQL's full image) or the key only. */
  readonly deleteHasRow: boolean;
  readonly cdcSource: Record<string, unknown>;
  close(pipelines: readonly string[]): Promise<void>;
}

const ISO_PG = `'YYYY-MM-DD"T"HH24:MI:SS.US'`;
const pgList = (elem: (e: string) => string) => (c: string) =>
  `CASE WHEN ${c} IS NULL THEN NULL ELSE COALESCE((SELECT json_agg(${elem('e')} ORDER BY o) FROM unnest(${c}) WITH ORDINALITY AS x(e, o)), '[]'::json)::text END`;

const PG_COLUMNS: readonly Column[] = (
  [
    ['id', 'bigint PRIMARY KEY', 'int', (c) => `${c}::text`],
    ['b', 'boolean', 'bool', (c) => `${c}::text`],
    ['i2', 'smallint', 'int', (c) => `${c}::text`],
    ['i4', 'integer', 'int', (c) => `${c}::text`],
    ['i8', 'bigint', 'int', (c) => `${c}::text`],
    ['n10', 'numeric(10,2)', 'dec', (c) => `${c}::text`],
    ['n38', 'numeric(38,9)', 'dec', (c) => `${c}::text`],
    ['nu', 'numeric', 'text', (c) => `${c}::text`],
    ['f8', 'double precision', 'float', (c) => `${c}::text`],
    ['r4', 'real', 'float', (c) => `${c}::float8::text`],
    ['t', 'text', 'text', (c) => c],
    ['bin', 'bytea', 'bin', (c) => `encode(${c}, 'hex')`],
    ['u', 'uuid', 'text', (c) => `${c}::text`],
    ['d', 'date', 'date', (c) => `to_char(${c}, 'YYYY-MM-DD')`],
    ['ts', 'timestamp(6)', 'ts', (c) => `to_char(${c}, ${ISO_PG})`],
    ['tstz', 'timestamptz', 'ts', (c) => `to_char(${c} AT TIME ZONE 'UTC', ${ISO_PG})`],
    ['tm', 'time', 'text', (c) => `${c}::text`],
    ['ai', 'integer[]', { list: 'int' }, pgList((e) => `${e}::text`)],
    ['at', 'text[]', { list: 'text' }, pgList((e) => e)],
    ['an', 'numeric(12,3)[]', { list: 'dec' }, pgList((e) => `${e}::text`)],
    ['atz', 'timestamptz[]', { list: 'ts' }, pgList((e) => `to_char(${e} AT TIME ZONE 'UTC', ${ISO_PG})`)],
    ['j', 'jsonb', 'text', (c) => `${c}::text`],
    ['updated_at', 'timestamptz NOT NULL', 'ts', (c) => `to_char(${c} AT TIME ZONE 'UTC', ${ISO_PG})`],
  ] as const satisfies readonly [string, string, Kind, (c: string) => string][]
).map(([name, ddl, kind, src]) => ({ name, ddl, kind, src: src(name) }));

const PG_ICEBERG: Record<string, string> = {
  id: 'long',
  b: 'boolean',
  i2: 'int',
  i4: 'int',
  i8: 'long',
  n10: 'decimal(10, 2)',
  n38: 'decimal(38, 9)',
  nu: 'string',
  f8: 'double',
  r4: 'double',
  t: 'string',
  bin: 'binary',
  u: 'string',
  d: 'date',
  ts: 'timestamp',
  tstz: 'timestamptz',
  tm: 'string',
  ai: 'list<int>',
  at: 'list<string>',
  an: 'list<decimal(12, 3)>',
  atz: 'list<timestamptz>',
  j: 'string',
  updated_at: 'timestamptz',
};
const PG_NAMES = PG_COLUMNS.map((c) => c.name).join(', ');
const PG_GOLDEN = `
  (1, true, -32768, -2147483648, -9223372036854775808, -99999999.99, -99999999999999999999999999999.999999999,
   -0.000000000000000000000000000000000000000001, -1.7976931348623157e308, -3.4028235e38, '', '\\x',
   '00000000-0000-0000-0000-000000000000', '1970-01-01', '1969-12-31 23:59:59.999999', '1969-12-31 23:59:59.999999+00',
   '00:00:00', '{}', '{}', '{}', '{}', '[]', '2024-01-01 00:00:00.000001+00'),
  (2, false, 32767, 2147483647, 9223372036854775807, 99999999.99, 99999999999999999999999999999.999999999,
   123456789012345678901234567890123456789012345.6789, 5e-324, 16777217, E'😀 ünï\\n\\t"q"', '\\x00ff7f80',
   '123e4567-e89b-12d3-a456-426614174000', '9999-12-31', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999999+00',
   '24:00:00', '{1,NULL,-2147483648}', '{"a",NULL,"","é😀"}', '{1.5,NULL,-0.001}',
   '{"2024-02-29 12:00:00.000001+00",NULL}', '{"a": 12345678901234567890}', '2024-01-02 00:00:00+00'),
  (3, NULL, 0, 0, 9007199254740993, 0.01, 0.000000001, 'NaN', 0.1, 0.1, E'a''b\\\\c', '\\x00', NULL, '2000-02-29',
   '2000-01-01 00:00:00', '2024-06-30 23:30:00.5+05:30', '23:59:59.999999', '{NULL}', '{NULL}', '{NULL}', '{NULL}',
   'null', '2024-01-03 00:00:00+00'),
  (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
   NULL, NULL, '2024-01-04 00:00:00+00')`;
const pgRow5 = (id: number, at: string) =>
  `(${id}, true, 1, 2, 3, 4.00, 5.000000001, '6e-50', 7.5, 8.5, 'five', '\\x05', 'ffffffff-ffff-ffff-ffff-ffffffffffff',
   '2025-05-05', '2025-05-05 05:05:05.050505', '2025-05-05 05:05:05.050505+00', '05:05:05.5', '{5}', '{"five"}',
   '{5.5}', '{"2025-05-05 05:05:05+00"}', '{"five": 5}', '${at}')`;

async function postgresDialect(): Promise<Dialect> {
  const db = await freshPgDatabase('ice_cli');
  const sql = postgres(db.url, { max: 1, onnotice: () => undefined });
  let inTxn: postgres.TransactionSql | undefined;
  const select = (name: string, ids?: readonly number[]) =>
    `SELECT ${PG_COLUMNS.map((c) => `${c.src} AS "${c.name}"`).join(', ')} FROM ${name}` +
    (ids ? ` WHERE id IN (${ids.join(', ')})` : '') +
    ' ORDER BY id';
  const toMap = (rows: readonly Record<string, unknown>[]) =>
    new Map(
      rows.map((r) => [
        Number(r.id),
        Object.fromEntries(PG_COLUMNS.map((c) => [c.name, canonSource(c.kind, r[c.name])])),
      ]),
    );
  return {
    kind: 'postgres',
    url: db.url,
    columns: PG_COLUMNS,
    iceberg: PG_ICEBERG,
    requiredIncremental: ['id', 'updated_at'],
    deleteHasRow: false,
    cdcSource: { flushSeconds: 1, heartbeatSeconds: 1 },
    qualified: (name) => `public.${name}`,
    async create(name) {
      await sql.unsafe(`CREATE TABLE ${name} (${PG_COLUMNS.map((c) => `${c.name} ${c.ddl}`).join(', ')})`);
    },
    async insertGolden(name) {
      await sql.unsafe(`INSERT INTO ${name} (${PG_NAMES}) VALUES ${PG_GOLDEN}`);
    },
    incrementalChanges: (name) => [
      `UPDATE ${name} SET t = 'changed', n38 = 1.5, ai = '{7}', tstz = '2000-01-01 00:00:00+00',
         updated_at = '2025-01-01 00:00:00+00' WHERE id = 2`,
      `UPDATE ${name} SET b = NULL, i8 = NULL, nu = NULL, bin = NULL, u = NULL, at = NULL,
         updated_at = '2025-01-02 00:00:00.5+00' WHERE id = 1`,
      `INSERT INTO ${name} (${PG_NAMES}) VALUES ${pgRow5(5, '2025-01-03 00:00:00+00')}`,
      `DELETE FROM ${name} WHERE id = 3`,
    ],
    thirdRunChanges: (name) => [
      `UPDATE ${name} SET t = 'third', i4 = 44, updated_at = '2025-02-01 00:00:00+00' WHERE id = 4`,
      `UPDATE ${name} SET n10 = -1.25, updated_at = '2025-02-02 00:00:00+00' WHERE id = 2`,
      `INSERT INTO ${name} (${PG_NAMES}) VALUES ${pgRow5(6, '2025-02-03 00:00:00+00')}`,
    ],
    cdcTransactions: (name) => [
      [
        {
          sql: `INSERT INTO ${name} (${PG_NAMES}) VALUES ${pgRow5(5, '2025-01-01 00:00:00+00')}`,
          id: 5,
          op: 'c',
        },
        { sql: `INSERT INTO ${name} (id, updated_at) VALUES (6, '2025-01-01 00:00:00+00')`, id: 6, op: 'c' },
      ],
      [
        {
          sql: `UPDATE ${name} SET t = 'changed', n38 = 1.5, ai = '{7,NULL}', tstz = '2000-01-01 00:00:00+00', bin = '\\xdead' WHERE id = 2`,
          id: 2,
          op: 'u',
        },
      ],
      [
        {
          sql: `UPDATE ${name} SET b = NULL, i8 = NULL, nu = NULL, bin = NULL, u = NULL, at = NULL, atz = NULL WHERE id = 1`,
          id: 1,
          op: 'u',
        },
      ],
      [{ sql: `DELETE FROM ${name} WHERE id = 3`, id: 3, op: 'd' }],
      [
        {
          sql: `INSERT INTO ${name} (${PG_NAMES}) VALUES ${pgRow5(7, '2025-01-02 00:00:00+00')}`,
          id: 7,
          op: 'c',
        },
        { sql: `UPDATE ${name} SET t = 'seven again', tm = '24:00:00' WHERE id = 7`, id: 7, op: 'u' },
        { sql: `DELETE FROM ${name} WHERE id = 7`, id: 7, op: 'd' },
        { sql: `UPDATE ${name} SET i4 = i4 + 1, an = '{NULL,0.000}' WHERE id = 5`, id: 5, op: 'u' },
      ],
    ],
    async txn(statements, after) {
      // One connection: inside the transaction, `rows` reads through it (and sees its changes).
      await sql.begin(async (tx) => {
        inTxn = tx;
        try {
          for (const [i, s] of statements.entries()) {
            await tx.unsafe(s);
            await after(i);
          }
        } finally {
          inTxn = undefined;
        }
      });
    },
    async rows(name, ids) {
      return toMap(await (inTxn ?? sql).unsafe<Record<string, unknown>[]>(select(name, ids)));
    },
    async close(pipelines) {
      for (const p of pipelines)
        await sql
          .unsafe(
            `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`,
            [defaultCdcName(p, 'db')],
          )
          .catch(() => undefined);
      await sql.end({ timeout: 1 });
      await db.drop();
    },
  };
}

/** A zero date or zero-in-date value reads as NULL (docs/types.md, "Zero dates"). */
const myDate = (fmt: string) => (c: string) =>
  `IF(${c} IS NULL OR YEAR(${c}) = 0 OR MONTH(${c}) = 0 OR DAY(${c}) = 0, NULL, DATE_FORMAT(${c}, '${fmt}'))`;
const myText = (c: string) => `CAST(${c} AS CHAR)`;

const MY_COLUMNS: readonly Column[] = (
  [
    ['id', 'BIGINT PRIMARY KEY', 'int', myText],
    ['ti', 'TINYINT', 'int', myText],
    ['tu', 'TINYINT UNSIGNED', 'int', myText],
    ['i', 'INT', 'int', myText],
    ['iu', 'INT UNSIGNED', 'int', myText],
    ['bi', 'BIGINT', 'int', myText],
    ['bu', 'BIGINT UNSIGNED', 'dec', myText],
    ['d10', 'DECIMAL(10,2)', 'dec', myText],
    ['d38', 'DECIMAL(38,10)', 'dec', myText],
    ['d65', 'DECIMAL(65,30)', 'text', myText],
    ['db', 'DOUBLE', 'float', myText],
    ['vc', 'VARCHAR(40)', 'text', (c) => c],
    ['l1', 'VARCHAR(20) CHARACTER SET latin1', 'text', (c) => `CONVERT(${c} USING utf8mb4)`],
    ['bn', 'BINARY(3)', 'bin', (c) => `LOWER(HEX(${c}))`],
    ['bl', 'BLOB', 'bin', (c) => `LOWER(HEX(${c}))`],
    ['dt', 'DATE', 'date', myDate('%Y-%m-%d')],
    ['dtm', 'DATETIME(6)', 'ts', myDate('%Y-%m-%dT%H:%i:%s.%f')],
    ['ts', 'TIMESTAMP(6) NULL', 'ts', myDate('%Y-%m-%dT%H:%i:%s.%f')],
    ['tm', 'TIME(6)', 'text', myText],
    ['j', 'JSON', 'text', myText],
    ['e', "ENUM('sad','ok')", 'text', (c) => c],
    ['updated_at', 'DATETIME(6) NOT NULL', 'ts', myDate('%Y-%m-%dT%H:%i:%s.%f')],
  ] as const satisfies readonly [string, string, Kind, (c: string) => string][]
).map(([name, ddl, kind, src]) => ({ name, ddl, kind, src: src(name) }));

const MY_ICEBERG: Record<string, string> = {
  id: 'long',
  ti: 'int',
  tu: 'int',
  i: 'int',
  iu: 'long',
  bi: 'long',
  bu: 'decimal(20, 0)',
  d10: 'decimal(10, 2)',
  d38: 'decimal(38, 10)',
  d65: 'string',
  db: 'double',
  vc: 'string',
  l1: 'string',
  bn: 'binary',
  bl: 'binary',
  dt: 'date',
  dtm: 'timestamp',
  ts: 'timestamptz',
  tm: 'string',
  j: 'string',
  e: 'string',
  updated_at: 'timestamp',
};
const MY_NAMES = MY_COLUMNS.map((c) => c.name).join(', ');
const MY_GOLDEN = `
  (1, -128, 0, -2147483648, 0, -9223372036854775808, 0, -99999999.99, '-9999999999999999999999999999.9999999999',
   '-99999999999999999999999999999999999.999999999999999999999999999999', -1.7976931348623157e308, '', '',
   X'000000', X'', '1000-01-01', '1000-01-01 00:00:00.000000', '1970-01-01 00:00:01.000000', '-838:59:59.000000',
   '[]', 'sad', '2024-01-01 00:00:00.000001'),
  (2, 127, 255, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615, 99999999.99,
   '9999999999999999999999999999.9999999999', '0.000000000000000000000000000001', 5e-324, '😀 ünï\\n"q"', 'café €ÿ',
   X'ff0102', X'00ff', '9999-12-31', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999999', '838:59:59.999999',
   '{"a": 12345678901234567890}', 'ok', '2024-01-02 00:00:00'),
  (3, 0, 1, 0, 1, 9007199254740993, 9007199254740993, 0.01, '0.0000000001', '-0.000000000000000000000000000001', 0.1,
   'a''b\\\\c', NULL, X'00', NULL, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '25:00:00.000001',
   'null', NULL, '2024-01-03 00:00:00'),
  (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '1969-12-31',
   '1969-12-31 23:59:59.999999', NULL, '-00:00:00.000001', NULL, NULL, '2024-01-04 00:00:00')`;
const myRow5 = (id: number, at: string) =>
  `(${id}, 1, 2, 3, 4, 5, 6, 7.00, '8.0000000001', '9.5', 10.25, 'five', 'fünf', X'05', X'0505', '2025-05-05',
   '2025-05-05 05:05:05.050505', '2025-05-05 05:05:05.050505', '05:05:05.500000', '{"five": 5}', 'ok', '${at}')`;

async function mysqlDialect(): Promise<Dialect> {
  const db = await freshMysqlDatabase('ice_cli');
  const sql: mysql.Connection = await mysqlClient(db.url);
  // Zero dates need a permissive sql_mode; literals are read in UTC, as tidemark reads them.
  await sql.query(`SET SESSION sql_mode = ''; SET time_zone = '+00:00'`);
  const toMap = (rows: readonly Record<string, unknown>[]) =>
    new Map(
      rows.map((r) => [
        Number(r.id),
        Object.fromEntries(MY_COLUMNS.map((c) => [c.name, canonSource(c.kind, r[c.name])])),
      ]),
    );
  return {
    kind: 'mysql',
    url: db.url,
    columns: MY_COLUMNS,
    iceberg: MY_ICEBERG,
    // DATETIME NOT NULL is nullable in the lake: a zero date reads as NULL (docs/types.md).
    requiredIncremental: ['id'],
    deleteHasRow: true,
    cdcSource: {
      serverId: 7000 + Math.floor(Math.random() * 100_000),
      flushSeconds: 1,
      heartbeatSeconds: 1,
    },
    qualified: (name) => `${db.name}.${name}`,
    async create(name) {
      await sql.query(`CREATE TABLE ${name} (${MY_COLUMNS.map((c) => `${c.name} ${c.ddl}`).join(', ')})`);
    },
    async insertGolden(name) {
      await sql.query(`INSERT INTO ${name} (${MY_NAMES}) VALUES ${MY_GOLDEN}`);
    },
    incrementalChanges: (name) => [
      `UPDATE ${name} SET vc = 'changed', d38 = 1.5, bu = 18446744073709551614, ts = '2000-01-01 00:00:00',
         updated_at = '2025-01-01 00:00:00' WHERE id = 2`,
      `UPDATE ${name} SET ti = NULL, bi = NULL, d65 = NULL, bl = NULL, tm = NULL, updated_at = '2025-01-02 00:00:00.5'
         WHERE id = 1`,
      `INSERT INTO ${name} (${MY_NAMES}) VALUES ${myRow5(5, '2025-01-03 00:00:00')}`,
      `DELETE FROM ${name} WHERE id = 3`,
    ],
    thirdRunChanges: (name) => [
      `UPDATE ${name} SET vc = 'third', i = 44, updated_at = '2025-02-01 00:00:00' WHERE id = 4`,
      `UPDATE ${name} SET d10 = -1.25, updated_at = '2025-02-02 00:00:00' WHERE id = 2`,
      `INSERT INTO ${name} (${MY_NAMES}) VALUES ${myRow5(6, '2025-02-03 00:00:00')}`,
    ],
    cdcTransactions: (name) => [
      [
        {
          sql: `INSERT INTO ${name} (${MY_NAMES}) VALUES ${myRow5(5, '2025-01-01 00:00:00')}`,
          id: 5,
          op: 'c',
        },
        { sql: `INSERT INTO ${name} (id, updated_at) VALUES (6, '2025-01-01 00:00:00')`, id: 6, op: 'c' },
      ],
      [
        {
          sql: `UPDATE ${name} SET vc = 'changed', d38 = 1.5, bu = 18446744073709551614, ts = '2000-01-01 00:00:00', bl = X'dead' WHERE id = 2`,
          id: 2,
          op: 'u',
        },
      ],
      [
        {
          sql: `UPDATE ${name} SET ti = NULL, bi = NULL, d65 = NULL, bl = NULL, tm = NULL, dt = NULL WHERE id = 1`,
          id: 1,
          op: 'u',
        },
      ],
      [{ sql: `DELETE FROM ${name} WHERE id = 3`, id: 3, op: 'd' }],
      [
        {
          sql: `INSERT INTO ${name} (${MY_NAMES}) VALUES ${myRow5(7, '2025-01-02 00:00:00')}`,
          id: 7,
          op: 'c',
        },
        {
          sql: `UPDATE ${name} SET vc = 'seven again', tm = '-00:00:00.000001' WHERE id = 7`,
          id: 7,
          op: 'u',
        },
        { sql: `DELETE FROM ${name} WHERE id = 7`, id: 7, op: 'd' },
        { sql: `UPDATE ${name} SET i = i + 1, bn = X'000001' WHERE id = 5`, id: 5, op: 'u' },
      ],
    ],
    async txn(statements, after) {
      await sql.query('START TRANSACTION');
      try {
        for (const [i, s] of statements.entries()) {
          await sql.query(s);
          await after(i);
        }
        await sql.query('COMMIT');
      } catch (e) {
        await sql.query('ROLLBACK');
        throw e;
      }
    },
    async rows(name, ids) {
      const [rows] = await sql.query(
        `SELECT ${MY_COLUMNS.map((c) => `${c.src} AS \`${c.name}\``).join(', ')} FROM ${name}` +
          (ids ? ` WHERE id IN (${ids.join(', ')})` : '') +
          ' ORDER BY id',
      );
      return toMap(rows as Record<string, unknown>[]);
    },
    async close() {
      await sql.end();
      await db.drop();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The syncs, through the real CLI

interface Synced {
  /** The Iceberg table's folder (`<lake>/<target>`). */
  readonly folder: string;
  /**
   * A current state (writeMode upsert): `groups` is one unordered group, a row per key; else a
   * change log, the groups in `__pos` order.
   */
  readonly currentState: boolean;
  readonly groups: readonly ExpectedGroup[];
  readonly columns: readonly Column[];
  /** The Iceberg schema pyiceberg must see: data columns, then the six metadata columns. */
  readonly schema: readonly SchemaField[];
}

interface SchemaField {
  readonly name: string;
  readonly type: string;
  readonly required: boolean;
}

/** The table's Iceberg schema: CDC tables have every column outside the key optional (decision 0010). */
function schemaOf(d: Dialect, cdc: boolean): SchemaField[] {
  return [
    ...d.columns.map((c) => ({
      name: c.name,
      type: d.iceberg[c.name]!,
      required: c.name === 'id' || (!cdc && d.requiredIncremental.includes(c.name)),
    })),
    { name: '__op', type: 'string', required: true },
    { name: '__pos', type: 'string', required: true },
    { name: '__commit_ts', type: 'timestamptz', required: false },
    { name: '__ingest_ts', type: 'timestamptz', required: true },
    { name: '__snapshot', type: 'boolean', required: true },
    { name: '__phase', type: 'string', required: true },
  ];
}

const incrementalRow = (values: Record<string, Canon>): Expected => ({
  values,
  op: 'u',
  snapshot: false,
  phase: 'incremental',
  commitTs: false,
});

/**
 * The current state a change log in `__pos` order leaves (the groups' rows, one key's later change
 * over its earlier, a delete removing the key): one unordered group.
 */
function currentStateOf(groups: readonly ExpectedGroup[]): ExpectedGroup[] {
  const byId = new Map<string, Expected>();
  for (const g of groups)
    for (const e of g.rows) {
      const id = String(e.values.id);
      if (e.op === 'd') byId.delete(id);
      else byId.set(id, e);
    }
  return [{ ordered: false, rows: [...byId.values()] }];
}

/** Syncs `table` with both write modes, run for run, so both lakes read the same source states. */
async function syncBoth(d: Dialect, table: string): Promise<{ append: Synced; upsert: Synced }> {
  const lakes = (['append', 'upsert'] as const).map((writeMode) => {
    const target = d.qualified(table);
    const { spec, dir, lakeDir } = localSpec(
      { kind: d.kind, url: d.url, table: target },
      {
        pipeline: `ice-${writeMode}`,
        cursor: 'updated_at',
        writeMode,
        lagOnly: true,
        connectTimeoutSeconds: 10,
      },
    );
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    return { writeMode, spec, dir, folder: join(lakeDir, target) };
  });
  const runAll = async () => {
    for (const l of lakes) {
      const r = await runCli(l.dir, l.spec, ['run']);
      expect(r.code, `tidemark run (${l.writeMode}) failed:\n${r.stdout}\n${r.stderr}`).toBe(0);
    }
  };
  const first = [...(await d.rows(table)).values()].map(incrementalRow);
  await runAll();
  const changes = d.incrementalChanges(table);
  await d.txn(changes, async () => undefined);
  const second = [...(await d.rows(table, [1, 2, 5])).values()].map(incrementalRow);
  await runAll();
  const groups = [
    { ordered: false, rows: first },
    { ordered: false, rows: second },
  ];
  const schema = schemaOf(d, false);
  return {
    append: { folder: lakes[0]!.folder, currentState: false, columns: d.columns, groups, schema },
    // A current state: each key's latest version read (id 3's delete is invisible to a cursor).
    upsert: {
      folder: lakes[1]!.folder,
      currentState: true,
      columns: d.columns,
      groups: currentStateOf(groups),
      schema,
    },
  };
}

/**
 * `table` synced with writeMode upsert by three `tidemark run`s, updates and inserts (no delete)
 * between them: the table must then equal the source's rows, each key once.
 */
async function syncUpsertThreeRuns(d: Dialect, table: string): Promise<Synced> {
  const target = d.qualified(table);
  const { spec, dir, lakeDir } = localSpec(
    { kind: d.kind, url: d.url, table: target },
    {
      pipeline: 'ice-upsert3',
      cursor: 'updated_at',
      writeMode: 'upsert',
      lagOnly: true,
      connectTimeoutSeconds: 10,
    },
  );
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const run = async (n: number) => {
    const r = await runCli(dir, spec, ['run']);
    expect(r.code, `tidemark run ${n} (upsert) failed:\n${r.stdout}\n${r.stderr}`).toBe(0);
  };
  await run(1);
  await d.txn(
    d.incrementalChanges(table).filter((s) => !s.startsWith('DELETE')),
    async () => undefined,
  );
  await run(2);
  await d.txn(d.thirdRunChanges(table), async () => undefined);
  await run(3);
  const source = [...(await d.rows(table)).values()].map(incrementalRow);
  return {
    folder: join(lakeDir, target),
    currentState: true,
    columns: d.columns,
    schema: schemaOf(d, false),
    groups: [{ ordered: false, rows: source }],
  };
}

/** The newest `v<N>.metadata.json` of a table folder, or undefined before the table exists. */
function newestMetadata(folder: string): string | undefined {
  let names: string[];
  try {
    names = readdirSync(join(folder, 'metadata'));
  } catch {
    return undefined;
  }
  const versions = names
    .map((n) => /^v(\d+)\.metadata\.json$/.exec(n)?.[1])
    .filter((v): v is string => v !== undefined)
    .map(Number);
  if (versions.length === 0) return undefined;
  return join(folder, 'metadata', `v${Math.max(...versions)}.metadata.json`);
}

/** `total-records` of the table's current snapshot (0 before its first commit). */
function committedRecords(folder: string): number {
  const file = newestMetadata(folder);
  if (file === undefined) return 0;
  const m = parseTableMetadata(readFileSync(file, 'utf8'), file);
  const current = m.snapshots.find((s) => s['snapshot-id'] === m['current-snapshot-id']);
  return Number(current?.summary['total-records'] ?? 0);
}

async function waitForRecords(folder: string, n: number, cdc: CdcProcess): Promise<void> {
  const end = Date.now() + CDC_DEADLINE_MS;
  while (committedRecords(folder) < n) {
    if (cdc.child.exitCode !== null)
      throw new Error(`tidemark cdc exited (${cdc.child.exitCode}):\n${cdc.output}`);
    if (Date.now() > end)
      throw new Error(`the table had ${committedRecords(folder)} of ${n} records in time:\n${cdc.output}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * `tidemark cdc` (snapshot: initial) of `table`, which holds the golden rows; the CDC workload
 * once the snapshot is in the table; stopped once the table's current snapshot holds every change
 * (writeMode append: every change kept) or the source's rows (writeMode upsert: a current state).
 */
async function cdcSync(
  d: Dialect,
  table: string,
  pipeline: string,
  writeMode: 'append' | 'upsert',
): Promise<Synced> {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-ice-cdc-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const target = d.qualified(table);
  const specFile = join(dir, 'tidemark.json');
  writeFileSync(
    specFile,
    JSON.stringify({
      pipeline,
      sources: { db: { kind: d.kind, url: d.url, connectTimeoutSeconds: 10, cdc: d.cdcSource } },
      state: { dir: join(dir, 'state') },
      lake: { uri: `file://${join(dir, 'lake')}` },
      tables: [{ source: 'db', table: target, mode: 'cdc', writeMode, snapshot: 'initial' }],
    }),
  );
  const folder = join(dir, 'lake', target);
  const before = await d.rows(table);
  const snapshotRows: Expected[] = [...before.values()].map((values) => ({
    values,
    op: 'c',
    snapshot: true,
    phase: 'snapshot',
    commitTs: false,
  }));
  const cdc = new CdcProcess(specFile, { cleanup: (fn) => cleanups.push(fn), logFile: join(dir, 'cdc.log') });
  await cdc.waitForLine('"capturing"');
  await waitForRecords(folder, snapshotRows.length, cdc);

  const stream: Expected[] = [];
  let current = before;
  for (const changes of d.cdcTransactions(table)) {
    await d.txn(
      changes.map((c) => c.sql),
      async (i) => {
        const c = changes[i]!;
        const deleted = current.get(c.id);
        const now = await d.rows(table, [c.id]);
        let values: Record<string, Canon>;
        if (c.op !== 'd') values = now.get(c.id)!;
        else if (d.deleteHasRow) values = deleted!;
        // The default replica identity: a delete carries the key only (docs/types.md, Nullability).
        else
          values = Object.fromEntries(
            d.columns.map((col) => [col.name, col.name === 'id' ? String(c.id) : null]),
          );
        if (values === undefined) throw new Error(`no source row for change ${JSON.stringify(c)}`);
        stream.push({ values, op: c.op, snapshot: false, phase: 'stream', commitTs: true });
        current = new Map(current);
        if (c.op === 'd') current.delete(c.id);
        else current.set(c.id, values);
      },
    );
  }
  const groups: ExpectedGroup[] = [
    { ordered: false, rows: snapshotRows },
    { ordered: true, rows: stream },
  ];
  const synced: Synced =
    writeMode === 'append'
      ? { folder, currentState: false, columns: d.columns, schema: schemaOf(d, true), groups }
      : {
          folder,
          currentState: true,
          columns: d.columns,
          schema: schemaOf(d, true),
          groups: currentStateOf(groups),
        };
  if (writeMode === 'append') await waitForRecords(folder, snapshotRows.length + stream.length, cdc);
  else await waitForState(synced, cdc);
  expect(await cdc.kill('SIGTERM'), cdc.output).toBe(0);
  if (synced.currentState) {
    // The expected current state is the source's rows.
    const source = await d.rows(table);
    expect(synced.groups[0]!.rows.map((e) => e.values).sort((a, b) => Number(a.id) - Number(b.id))).toEqual([
      ...source.values(),
    ]);
  }
  return synced;
}

/**
 * Waits until pyiceberg reads `synced`'s current state as expected (read again after each new
 * metadata version), for at most CDC_DEADLINE_MS; fails with the last differences.
 */
async function waitForState(synced: Synced, cdc: CdcProcess): Promise<void> {
  const end = Date.now() + CDC_DEADLINE_MS;
  let seen: string | undefined;
  let problems = ['the table has no metadata yet'];
  for (;;) {
    const metadata = newestMetadata(synced.folder);
    if (metadata !== undefined && metadata !== seen) {
      seen = metadata;
      const t = await runReaderScript<PyTable>('read_table.py', [
        '--catalog',
        'static',
        '--metadata',
        metadata,
      ]);
      problems = diffRows('pyiceberg', synced, t.rows);
      if (problems.length === 0) return;
    }
    if (cdc.child.exitCode !== null)
      throw new Error(`tidemark cdc exited (${cdc.child.exitCode}):\n${cdc.output}`);
    if (Date.now() > end)
      throw new Error(
        `the table did not reach the source's rows in time: ${problems.slice(0, 5).join('; ')}\n${cdc.output}`,
      );
    await new Promise((r) => setTimeout(r, 500));
  }
}

// ---------------------------------------------------------------------------------------------
// Reading back

type ReadRow = Record<string, unknown>;

/** Differences between the rows a reader read and the expected groups, one line each. */
function diffRows(engine: string, synced: Synced, read: readonly ReadRow[]): string[] {
  const problems: string[] = [];
  if (synced.currentState) {
    // Read as it is: a current state has one row per key and no delete rows (nothing deduped).
    const deletes = read.filter((r) => r.__op === 'd').length;
    if (deletes > 0) problems.push(`${engine}: ${deletes} rows are deletes (__op = d)`);
    const ids = new Set(read.map((r) => String(r.id)));
    if (ids.size !== read.length)
      problems.push(`${engine}: ${read.length - ids.size} keys have more than one row`);
  }
  const rows = [...read].sort((a, b) => (String(a.__pos) < String(b.__pos) ? -1 : 1));
  const positions = new Set(rows.map((r) => String(r.__pos)));
  if (positions.size !== rows.length)
    problems.push(`${engine}: ${rows.length - positions.size} duplicate __pos`);
  const expectedCount = synced.groups.reduce((n, g) => n + g.rows.length, 0);
  if (rows.length !== expectedCount)
    problems.push(`${engine}: ${rows.length} rows read, ${expectedCount} expected`);
  let at = 0;
  for (const [gi, group] of synced.groups.entries()) {
    const chunk = rows.slice(at, at + group.rows.length);
    at += group.rows.length;
    const byId = (r: ReadRow) => Number(r.id);
    const got = group.ordered ? chunk : [...chunk].sort((a, b) => byId(a) - byId(b));
    const want = group.ordered
      ? group.rows
      : [...group.rows].sort((a, b) => Number(a.values.id) - Number(b.values.id));
    for (const [i, e] of want.entries()) {
      const r = got[i];
      const where = `${engine} group ${gi} row ${i} (id ${e.values.id}, ${e.op})`;
      if (r === undefined) {
        problems.push(`${where}: missing`);
        continue;
      }
      for (const c of synced.columns) {
        const value = canonRead(c.kind, r[c.name]);
        if (JSON.stringify(value) !== JSON.stringify(e.values[c.name]))
          problems.push(
            `${where} column ${c.name}: source ${JSON.stringify(e.values[c.name])}, read ${JSON.stringify(r[c.name])}`,
          );
      }
      const meta = {
        __op: r.__op,
        __snapshot: r.__snapshot,
        __phase: r.__phase,
        __commit_ts: r.__commit_ts !== null,
        __ingest_ts: r.__ingest_ts !== null,
      };
      const wantMeta = {
        __op: e.op,
        __snapshot: e.snapshot,
        __phase: e.phase,
        __commit_ts: e.commitTs,
        __ingest_ts: true,
      };
      if (JSON.stringify(meta) !== JSON.stringify(wantMeta))
        problems.push(
          `${where} metadata: expected ${JSON.stringify(wantMeta)}, read ${JSON.stringify(meta)}`,
        );
    }
  }
  return problems;
}

interface PyTable {
  snapshot_id: number | string;
  schema: { id: number; name: string; type: string; required: boolean }[];
  rows: ReadRow[];
}
interface PyFiles {
  files: { content: number; file_path: string; record_count: number }[];
}

/**
 * The current snapshot's files as pyiceberg lists them, each once: `live` is the data files'
 * records minus the position deletes' records (a change log has no delete file, a current state
 * only position deletes: decision 0026).
 */
async function pyFiles(metadata: string, currentState: boolean): Promise<{ paths: string[]; live: number }> {
  const meta = await runReaderScript<PyFiles>('iceberg_metadata.py', [
    '--catalog',
    'static',
    '--metadata',
    metadata,
  ]);
  expect(meta.files.every((f) => f.content === 0 || (currentState && f.content === 1))).toBe(true);
  const paths = meta.files.map((f) => f.file_path);
  expect(new Set(paths).size).toBe(paths.length);
  return { paths, live: liveRecords(meta.files) };
}

/** Data files' records minus position deletes' records (`content` 0 and 1). */
const liveRecords = (files: readonly Record<string, unknown>[]) =>
  files.reduce((n, f) => n + (Number(f.content) === 0 ? 1 : -1) * Number(f.record_count), 0);

// ---------------------------------------------------------------------------------------------

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

const SCENARIOS = [
  'incremental append',
  'incremental upsert',
  'incremental upsert, three runs',
  'cdc snapshot + stream',
  'cdc upsert, snapshot + stream',
] as const;
type Scenario = (typeof SCENARIOS)[number];
/**
 * Rows per expected group: the 4 golden rows, then what the second run read (2 updated, 1
 * inserted; the delete is invisible to a cursor); for CDC the snapshot's 4, then 9 changes. A
 * current state is one group, a row per key: ids 1-5 (3 deleted unseen); ids 1-6 after three
 * runs; ids 1, 2, 4, 5, 6 after CDC (3 deleted, 7 inserted and deleted).
 */
const GROUP_SIZES: Record<Scenario, number[]> = {
  'incremental append': [4, 3],
  'incremental upsert': [5],
  'incremental upsert, three runs': [6],
  'cdc snapshot + stream': [4, 9],
  'cdc upsert, snapshot + stream': [5],
};

describe.skipIf(readersMissing !== undefined)(
  `Iceberg tables the CLI synced, read by pyiceberg and Spark ${noReaders}`,
  () => {
    let spark: SparkSession | undefined;
    beforeAll(async () => {
      if (sparkMissing === undefined) spark = await SparkSession.start();
    }, 180_000);
    afterAll(async () => {
      await spark?.quit();
    }, 60_000);

    describe.each(['postgres', 'mysql'] as const)('%s', (kind) => {
      const synced = new Map<Scenario, Synced>();
      beforeAll(async () => {
        const d = kind === 'postgres' ? await postgresDialect() : await mysqlDialect();
        const pipeline = `icecdc${Math.random().toString(36).slice(2, 8)}`;
        const upsertPipeline = `${pipeline}up`;
        cleanups.push(() => d.close([pipeline, upsertPipeline]));
        await d.create('golden');
        await d.insertGolden('golden');
        const { append, upsert } = await syncBoth(d, 'golden');
        synced.set('incremental append', append);
        synced.set('incremental upsert', upsert);
        await d.create('golden_cdc');
        await d.insertGolden('golden_cdc');
        await d.create('golden3');
        await d.insertGolden('golden3');
        synced.set('incremental upsert, three runs', await syncUpsertThreeRuns(d, 'golden3'));
        synced.set('cdc snapshot + stream', await cdcSync(d, 'golden_cdc', pipeline, 'append'));
        await d.create('golden_cdc_up');
        await d.insertGolden('golden_cdc_up');
        synced.set(
          'cdc upsert, snapshot + stream',
          await cdcSync(d, 'golden_cdc_up', upsertPipeline, 'upsert'),
        );
      }, SYNC_TIMEOUT_MS);

      it.each(SCENARIOS)(
        'pyiceberg reads the %s table exactly, (a change log: each change once; a current state: each key once)',
        async (scenario) => {
          const s = synced.get(scenario)!;
          const metadata = newestMetadata(s.folder)!;
          expect(metadata).toBeDefined();
          const t = await runReaderScript<PyTable>('read_table.py', [
            '--catalog',
            'static',
            '--metadata',
            metadata,
          ]);
          expect(t.schema.map(({ name, type, required }) => ({ name, type, required }))).toEqual(s.schema);
          expect(s.groups.map((g) => g.rows.length)).toEqual(GROUP_SIZES[scenario]);
          expect(diffRows('pyiceberg', s, t.rows)).toEqual([]);
          const files = await pyFiles(metadata, s.currentState);
          expect(files.live).toBe(t.rows.length);
          for (const p of files.paths)
            expect(p.startsWith(`file://${s.folder}/`) || p.startsWith(`${s.folder}/`), p).toBe(true);
        },
        READ_TIMEOUT_MS,
      );

      it.skipIf(sparkMissing !== undefined).each(SCENARIOS)(
        `Spark reads the %s table exactly, (a change log: each change once; a current state: each key once) ${noSpark}`,
        async (scenario) => {
          const s = synced.get(scenario)!;
          expect(s.groups.map((g) => g.rows.length)).toEqual(GROUP_SIZES[scenario]);
          const read = await spark!.ask({ load: s.folder, order_by: '__pos' });
          expect(diffRows('spark', s, read.rows)).toEqual([]);
          const files = await spark!.ask({ load: `${s.folder}#files` });
          const sparkPaths = files.rows.map((f) => String(f.file_path));
          expect(new Set(sparkPaths).size).toBe(sparkPaths.length);
          expect(liveRecords(files.rows)).toBe(read.rows.length);
          const py = await pyFiles(newestMetadata(s.folder)!, s.currentState);
          expect([...sparkPaths].sort()).toEqual([...py.paths].sort());
        },
        READ_TIMEOUT_MS,
      );
    });
  },
);
