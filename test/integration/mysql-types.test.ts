/**
 * Golden type test of MySQL/MariaDB sources, end to end: a table holding every MySQL type's edge
 * values (integer limits signed and unsigned, DECIMAL(38,x) and DECIMAL(65,30), FLOAT/DOUBLE,
 * BIT, YEAR, DATE, DATETIME(6), TIMESTAMP(6), zero dates, TIME below zero and past 24 h, utf8mb4
 * emoji and latin1 text, BINARY/BLOB, JSON, ENUM, SET, generated columns) is read by the driver's
 * batch path, written by the real Parquet sink (file:// lake), and read back by DuckDB: exactly
 * those values, with the Parquet/DuckDB and Glue types docs/types.md (MySQL section) promises.
 * The table and its rows are the shared golden table (../harness/mysql-golden.ts).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { glueType } from '../../shared/dataplane/lake.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { MysqlSource } from '../../shared/drivers/mysql/source.js';
import { incrementalPosPrefix } from '../../shared/position/position.js';
import { openLakeSink } from '../../shared/sink/open-lake.js';
import { type FreshDatabase, freshMysqlDatabase } from '../harness/mysql.js';
import { GOLDEN_COLUMNS, GOLDEN_INSERT_COLUMNS, GOLDEN_ROWS } from '../harness/mysql-golden.js';

/** Per column: MySQL DDL, DuckDB type read back from the Parquet file, Glue type. */
const COLUMNS = GOLDEN_COLUMNS;

const INSERT = `INSERT INTO lake_types (${GOLDEN_INSERT_COLUMNS}) VALUES ${GOLDEN_ROWS}`;

let db: FreshDatabase;
let scratch: string;
let duck: DuckDBConnection;
let file: string;
let schema: Schema;

beforeAll(async () => {
  db = await freshMysqlDatabase('my_types');
  const admin = await mysql.createConnection({ uri: db.url, multipleStatements: true });
  try {
    // Zero dates need a session sql_mode that allows them (NO_ZERO_DATE off, non-strict for TIMESTAMP).
    await admin.query(`SET time_zone = '+00:00'; SET SESSION sql_mode = '';
      CREATE TABLE lake_types (${COLUMNS.map(([n, ddl]) => `${n} ${ddl}`).join(', ')});
      ${INSERT}`);
  } finally {
    await admin.end();
  }
  scratch = await mkdtemp(join(tmpdir(), 'tidemark-mysql-types-'));
  const src = new MysqlSource({ url: db.url, lagMs: 10_000 });
  try {
    const intro = await src.introspect({ source: `${db.name}.lake_types`, target: 'golden.mysql_types' });
    schema = intro.schema;
    const page = await src.incrementalBatch({
      table: intro.ref,
      cursorColumn: 'id',
      after: '',
      pageSize: 100,
      posPrefix: incrementalPosPrefix(1, 1),
      ordinalBase: 0,
      schema,
      writeMode: 'append',
    });
    expect(page.page!.record.numRows).toBe(4);
    const sink = openLakeSink({ uri: `file://${scratch}` });
    const [ref] = await sink.write(
      { table: 'golden.mysql_types', writer: 'test.golden', fence: 1 },
      schema,
      incrementalPosPrefix(1, 1),
      [page.page!],
    );
    file = ref!.uri.startsWith('file://') ? fileURLToPath(ref!.uri) : join(scratch, ref!.uri);
  } finally {
    await src.close();
  }
  duck = await (await DuckDBInstance.create(':memory:')).connect();
  await duck.run("SET TimeZone = 'UTC'");
});

afterAll(async () => {
  duck?.closeSync();
  if (scratch) await rm(scratch, { recursive: true, force: true });
  await db?.drop();
});

async function query(sql: string): Promise<Record<string, unknown>[]> {
  return (await duck.runAndReadAll(sql)).getRowObjectsJson() as Record<string, unknown>[];
}

describe('MySQL types through the Parquet sink and DuckDB', () => {
  it('has the Parquet/DuckDB and Glue types docs/types.md lists', async () => {
    const types = await query(
      `DESCRIBE SELECT * EXCLUDE (__op, __pos, __commit_ts, __ingest_ts, __snapshot, __phase) FROM read_parquet('${file}')`,
    );
    expect(types.map((t) => [t.column_name, t.column_type])).toEqual(
      COLUMNS.map(([n, , duckdb]) => [n, duckdb]),
    );
    expect(schema.columns.map((c) => [c.name, glueType(c.type)])).toEqual(
      COLUMNS.map(([n, , , glue]) => [n, glue]),
    );
  });

  it('reads back every edge value exactly', async () => {
    const text = COLUMNS.map(([n]) => n)
      .filter((n) => !['f', 'db', 'bt', 'bn', 'bl', 'dtm', 'ts'].includes(n))
      .map((n) => `${n}::VARCHAR AS ${n}`);
    const rows = await query(`
      SELECT ${text.join(', ')}, hex(bt) AS bt, hex(bn) AS bn, hex(bl) AS bl, f, db,
             dtm::VARCHAR AS dtm, epoch_us(dtm)::VARCHAR AS dtm_us, ts::VARCHAR AS ts, epoch_us(ts)::VARCHAR AS ts_us
      FROM read_parquet('${file}') ORDER BY id`);
    expect(rows).toEqual([
      {
        id: '1',
        ti: '-128',
        tb: '0',
        tu: '0',
        si: '-32768',
        su: '0',
        mi: '-8388608',
        mu: '0',
        i: '-2147483648',
        iu: '0',
        bi: '-9223372036854775808',
        bu: '0',
        d38: '-9999999999999999999999999999.9999999999',
        d65: '-99999999999999999999999999999999999.999999999999999999999999999999',
        bt: '0000',
        y: '1901',
        dt: '1000-01-01',
        dtm: '1000-01-01 00:00:00',
        dtm_us: '-30610224000000000',
        ts: '1970-01-01 00:00:01+00',
        ts_us: '1000000',
        tm: '-838:59:59.000000',
        vc: '',
        l1: '',
        bn: '000000',
        bl: '',
        j: '[]',
        e: 'sad',
        st: '',
        gv: '-4294967296',
        gs: '!',
        f: -3.3999999521443642e38,
        db: -1.7976931348623157e308,
      },
      {
        id: '2',
        ti: '127',
        tb: '1',
        tu: '255',
        si: '32767',
        su: '65535',
        mi: '8388607',
        mu: '16777215',
        i: '2147483647',
        iu: '4294967295',
        bi: '9223372036854775807',
        bu: '18446744073709551615',
        d38: '9999999999999999999999999999.9999999999',
        d65: '0.000000000000000000000000000001',
        bt: '03FF',
        y: '2155',
        dt: '9999-12-31',
        dtm: '9999-12-31 23:59:59.999999',
        dtm_us: '253402300799999999',
        ts: '2038-01-19 03:14:07.999999+00',
        ts_us: '2147483647999999',
        tm: '838:59:59.999999',
        vc: '😀 ünï',
        l1: 'café €ÿ',
        bn: 'FF0102',
        bl: '00FF',
        j: '{"a": 12345678901234567890}',
        e: 'ok',
        st: 'x,z',
        gv: '4294967294',
        gs: '😀 ünï!',
        f: 16777216,
        db: 5e-324,
      },
      {
        // Zero dates read as NULL; TIME past 24 h stays exact text.
        id: '3',
        ti: '0',
        tb: null,
        tu: '1',
        si: '0',
        su: '1',
        mi: '0',
        mu: '1',
        i: '0',
        iu: '1',
        bi: '9007199254740993',
        bu: '9007199254740993',
        d38: '0.0000000001',
        d65: '-0.000000000000000000000000000001',
        bt: '0001',
        y: '0',
        dt: null,
        dtm: null,
        dtm_us: null,
        ts: null,
        ts_us: null,
        tm: '25:00:00.000001',
        vc: "a'b\\c",
        l1: null,
        bn: null,
        bl: null,
        j: 'null',
        e: null,
        st: null,
        gv: '0',
        gs: "a'b\\c!",
        f: 0.10000000149011612,
        db: 0.1,
      },
      {
        id: '4',
        ti: null,
        tb: null,
        tu: null,
        si: null,
        su: null,
        mi: null,
        mu: null,
        i: null,
        iu: null,
        bi: null,
        bu: null,
        d38: null,
        d65: null,
        bt: null,
        y: null,
        dt: '1969-12-31',
        dtm: '1969-12-31 23:59:59.999999',
        dtm_us: '-1',
        ts: null,
        ts_us: null,
        tm: '-00:00:00.000001',
        vc: null,
        l1: null,
        bn: null,
        bl: null,
        j: null,
        e: null,
        st: null,
        gv: null,
        gs: null,
        f: null,
        db: null,
      },
    ]);
  });
});
