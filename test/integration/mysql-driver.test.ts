/**
 * The MySQL/MariaDB driver against a real server (the harness MariaDB): introspection maps every
 * type as docs/types.md says, the row path and the batch path run the same statement and return
 * the same pages (same resume tokens, byte-identical Arrow IPC) on random tables, keyset paging
 * reads every row exactly once through cursor ties and microsecond neighbours, values stay exact
 * (DATETIME(6), BIGINT UNSIGNED, DECIMAL(65,30)), the safe upper bound holds late commits back,
 * and every refusal is a one-line SourceError saying what to do.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type RecordBatch, Table, tableToIPC } from 'apache-arrow';
import fc from 'fast-check';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataError, SourceError } from '../../shared/contracts/errors.js';
import type { TableRef } from '../../shared/contracts/source.js';
import { encodeRows } from '../../shared/dataplane/encoder.js';
import { Op } from '../../shared/dataplane/metadata.js';
import type { LogicalType, Schema } from '../../shared/dataplane/schema.js';
import { SchemaChangedError } from '../../shared/dataplane/schema-rules.js';
import { MysqlSource, type MysqlSourceOptions } from '../../shared/drivers/mysql/source.js';
import { freePort } from '../../shared/local/free-port.js';
import { decodeKey } from '../../shared/position/key-codec.js';
import { incrementalPosPrefix } from '../../shared/position/position.js';
import { daysToDateText, microsToTimestampText } from '../../shared/position/time-text.js';
import { startMariaDb } from '../harness/mariadb-server.js';
import { type FreshDatabase, privateMysqlDatabase } from '../harness/mysql.js';
import { TEMPLATE_ROOT } from '../harness/templates.js';

const CLOCK_MS = 1_700_000_000_123;
const INGEST_NS = BigInt(CLOCK_MS) * 1_000_000n;
/**
 * This file runs on a private server (privateMysqlDatabase): its bound tests assert exactly what
 * the bound lets through, which on the shared server other files' transactions (and their reads
 * keeping INNODB_TRX's cache stale) changed; and its high-water walks no longer stall behind
 * other files' transactions, nor keep the shared server's INNODB_TRX cache stale for the others.
 * With TIDEMARK_TEST_MYSQL_URL the server is shared again: a generous lag lets other sessions'
 * short transactions end before a high-water page gives up (every time cursor below is far in
 * the past, so the lag holds nothing back there). Tests of the bound itself choose their own.
 */
const SHARED_SERVER_LAG_MS = 10_000;

let db: FreshDatabase;
let admin: mysql.Connection;
const sources: MysqlSource[] = [];

function source(opts: Partial<MysqlSourceOptions> = {}): MysqlSource {
  const s = new MysqlSource({ url: db.url, lagMs: SHARED_SERVER_LAG_MS, clock: () => CLOCK_MS, ...opts });
  sources.push(s);
  return s;
}

beforeAll(async () => {
  db = await privateMysqlDatabase('my_driver');
  admin = await mysql.createConnection({
    uri: db.url,
    multipleStatements: true,
    supportBigNumbers: true,
    bigNumberStrings: true,
    dateStrings: true,
  });
  // TIMESTAMP literals below are UTC, as the driver's session reads them.
  await admin.query("SET time_zone = '+00:00'");
});

afterAll(async () => {
  await Promise.all(sources.map((s) => s.close()));
  await admin?.end();
  await db?.drop();
});

function ipc(record: RecordBatch): Buffer {
  return Buffer.from(tableToIPC(new Table(record)));
}

interface Walked {
  readonly rows: Record<string, unknown>[];
  readonly pages: number;
  readonly tokens: string[];
}

/**
 * Walks every page with both paths in lockstep and asserts they agree page by page: same `next`,
 * same `more`, and byte-identical IPC (batch path vs encodeRows of the row path's rows).
 */
async function walkBoth(
  src: MysqlSource,
  ref: TableRef,
  schema: Schema,
  cursorColumn: string,
  pageSize: number,
): Promise<Walked> {
  const rows: Record<string, unknown>[] = [];
  const tokens: string[] = [];
  let after = '';
  for (let seq = 1; ; seq++) {
    const posPrefix = incrementalPosPrefix(seq, 1);
    const req = { table: ref, cursorColumn, after, pageSize, posPrefix, ordinalBase: 0 };
    // Each read computes its own safe upper bound; on the shared harness server another test
    // file's transaction can move it between the two reads. A real path difference repeats, so
    // re-read the pair a few times before comparing.
    let r = await src.incremental(req);
    let b = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
    for (let attempt = 0; attempt < 3 && (b.next !== r.next || b.more !== r.more); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      r = await src.incremental(req);
      b = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
    }
    expect(b.next).toBe(r.next);
    expect(b.more).toBe(r.more);
    if (r.page.length === 0) {
      expect(b.page).toBeUndefined();
      return { rows, pages: seq - 1, tokens };
    }
    expect(r.page.length).toBeLessThanOrEqual(pageSize);
    const expected = encodeRows(schema, r.page, {
      posPrefix,
      ordinalBase: 0,
      op: Op.update,
      phase: 'incremental',
      ingestTsNanos: INGEST_NS,
      snapshot: false,
    });
    expect(b.page!.record.numRows).toBe(r.page.length);
    expect(ipc(b.page!.record).equals(ipc(expected))).toBe(true);
    expect(b.page!.watermark).toBe(`${posPrefix}${(r.page.length - 1).toString(16).padStart(8, '0')}`);
    rows.push(...r.page);
    tokens.push(r.next);
    after = r.next;
    if (!r.more) return { rows, pages: seq, tokens };
  }
}

async function oneLineSourceError(p: Promise<unknown>, code: string): Promise<SourceError> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(SourceError);
  const se = e as SourceError;
  expect(se.code).toBe(code);
  expect(se.message).not.toContain('\n');
  return se;
}

const page1 = (ref: TableRef, cursorColumn: string, pageSize = 100) => ({
  table: ref,
  cursorColumn,
  after: '',
  pageSize,
  posPrefix: incrementalPosPrefix(1, 1),
  ordinalBase: 0,
});

describe('introspection', () => {
  it('maps every type to its logical type, in column order, with zero-date columns nullable', async () => {
    await admin.query(`
      CREATE TABLE all_types (
        id BIGINT PRIMARY KEY, ti TINYINT, tb TINYINT(1) NOT NULL DEFAULT 0, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED,
        mi MEDIUMINT, mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED,
        d12 DECIMAL(12,3), d38 DECIMAL(38,38), d39 DECIMAL(39,2), d65 DECIMAL(65,30), f FLOAT, fd FLOAT(10,4), d DOUBLE,
        b1 BIT(1), b64 BIT(64), y YEAR, dt DATE NOT NULL, dtm DATETIME, dtm6 DATETIME(6) NOT NULL, ts TIMESTAMP(6) NULL,
        tm TIME(6), c CHAR(3), vc VARCHAR(10) CHARACTER SET latin1, tx TEXT, lt LONGTEXT, bn BINARY(4), vb VARBINARY(8), bl BLOB,
        j JSON, e ENUM('a','b'), st SET('x','y'), g INT AS (i * 2) VIRTUAL, gs VARCHAR(20) AS (CONCAT(vc, '!')) STORED,
        u UUID, ip INET6, pt POINT
      )`);
    const src = source();
    const { ref, schema, warnings } = await src.introspect({
      source: `${db.name}.all_types`,
      target: 'lake.all_types',
    });
    expect(warnings).toEqual([]);
    expect(ref).toEqual({ source: `${db.name}.all_types`, target: 'lake.all_types', primaryKey: ['id'] });
    const t = (kind: string, extra: object = {}): LogicalType => ({ kind, ...extra }) as LogicalType;
    expect(schema.columns.map((c) => [c.name, c.type])).toEqual([
      ['id', t('int64')],
      ['ti', t('int8')],
      ['tb', t('int8')],
      ['tu', t('int16')],
      ['si', t('int16')],
      ['su', t('int32')],
      ['mi', t('int32')],
      ['mu', t('int32')],
      ['i', t('int32')],
      ['iu', t('int64')],
      ['bi', t('int64')],
      ['bu', t('decimal', { precision: 20, scale: 0 })],
      ['d12', t('decimal', { precision: 12, scale: 3 })],
      ['d38', t('decimal', { precision: 38, scale: 38 })],
      ['d39', t('text')],
      ['d65', t('text')],
      ['f', t('float64')],
      ['fd', t('float64')],
      ['d', t('float64')],
      ['b1', t('binary')],
      ['b64', t('binary')],
      ['y', t('int16')],
      ['dt', t('date')],
      ['dtm', t('timestamp', { utc: false })],
      ['dtm6', t('timestamp', { utc: false })],
      ['ts', t('timestamp', { utc: true })],
      ['tm', t('text')],
      ['c', t('text')],
      ['vc', t('text')],
      ['tx', t('text')],
      ['lt', t('text')],
      ['bn', t('binary')],
      ['vb', t('binary')],
      ['bl', t('binary')],
      ['j', t('text')],
      ['e', t('text')],
      ['st', t('text')],
      ['g', t('int32')],
      ['gs', t('text')],
      ['u', t('text')],
      ['ip', t('text')],
      ['pt', t('binary')],
    ]);
    const col = (n: string) => schema.columns.find((c) => c.name === n)!;
    expect(col('id').nullable).toBe(false);
    expect(col('tb').nullable).toBe(false);
    expect(col('i').nullable).toBe(true);
    // Zero dates read as NULL, and any session may write one into a NOT NULL column.
    expect(col('dt').nullable).toBe(true);
    expect(col('dtm6').nullable).toBe(true);
    expect(col('d12').sourceType).toBe('decimal(12,3)');
    expect(col('bu').sourceType).toMatch(/^bigint(\(20\))? unsigned$/);
    expect(col('j').sourceType).toBe('json');
    expect(col('lt').sourceType).toBe('longtext');

    const ex = await src.introspect({ source: `${db.name}.all_types`, exclude: ['pt', 'ip'] });
    expect(ex.schema.columns.map((c) => c.name)).not.toContain('pt');
    await oneLineSourceError(
      src.introspect({ source: `${db.name}.all_types`, exclude: ['id'] }),
      'SOURCE_COLUMN_MISSING',
    );
    await oneLineSourceError(
      src.introspect({ source: `${db.name}.all_types`, exclude: ['nope'] }),
      'SOURCE_COLUMN_MISSING',
    );
  });

  it('reads every type exactly, the same through both paths (zero dates as NULL)', async () => {
    await admin.query(`
      SET SESSION sql_mode = '';
      CREATE TABLE values_t (
        id INT PRIMARY KEY, u DATETIME(6) NOT NULL, ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED,
        mi MEDIUMINT, mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED, d DECIMAL(12,3), d38 DECIMAL(38,10),
        d65 DECIMAL(65,30), f FLOAT, db DOUBLE, bt BIT(10), y YEAR, dt DATE NOT NULL, dtm DATETIME NOT NULL, ts TIMESTAMP(6) NULL,
        tm TIME(6), tm0 TIME, c CHAR(4), vc VARCHAR(20), l1 VARCHAR(20) CHARACTER SET latin1, bn BINARY(3), bl BLOB, j JSON,
        e ENUM('sad','ok'), st SET('x','y','z'), g BIGINT AS (bi DIV 2) VIRTUAL);
      INSERT INTO values_t (id, u, ti, tu, si, su, mi, mu, i, iu, bi, bu, d, d38, d65, f, db, bt, y, dt, dtm, ts, tm, tm0, c, vc, l1, bn, bl, j, e, st) VALUES
        (1, '2020-01-01 00:00:00.000001', -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,
         -9223372036854775808, 18446744073709551615, -999999999.999, '-9999999999999999999999999999.9999999999',
         '-99999999999999999999999999999999999.999999999999999999999999999999', 16777217, 1.7976931348623157e308, b'1111111111', 1901,
         '1000-01-01', '9999-12-31 23:59:59', '1970-01-01 00:00:01.000001', '-838:59:59.000000', '838:59:59', 'c', '😀 ünï', 'café €',
         X'000102', X'', '{"a": 12345678901234567890}', 'ok', 'x,z'),
        (2, '2020-01-01 00:00:00.000002', 127, 0, 32767, 0, 8388607, 0, 2147483647, 0, 9223372036854775807, 0, 0, 0,
         '0.000000000000000000000000000001', 0.1, 5e-324, b'0', 2155, '0000-00-00', '0000-00-00 00:00:00', '2038-01-19 03:14:07.999999',
         '00:00:00', '-00:00:01', '', '', '', NULL, NULL, 'null', NULL, ''),
        (3, '2020-01-01 00:00:00.000002', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
         0, '2024-02-29', '2024-00-15 10:00:00', '0000-00-00 00:00:00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
      SET SESSION sql_mode = DEFAULT`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: `${db.name}.values_t` });
    const { rows } = await walkBoth(src, ref, schema, 'u', 2);
    expect(rows.map((r) => r.id)).toEqual([1, 2, 3]);
    const [r1, r2, r3] = rows as [Record<string, unknown>, Record<string, unknown>, Record<string, unknown>];
    expect(r1).toEqual({
      id: 1,
      u: 1_577_836_800_000_001n,
      ti: -128,
      tu: 255,
      si: -32768,
      su: 65535,
      mi: -8388608,
      mu: 16777215,
      i: -2147483648,
      iu: 4294967295n,
      bi: -(2n ** 63n),
      bu: '18446744073709551615',
      d: '-999999999.999',
      d38: '-9999999999999999999999999999.9999999999',
      d65: '-99999999999999999999999999999999999.999999999999999999999999999999',
      f: 16777216,
      db: 1.7976931348623157e308,
      bt: new Uint8Array([0x03, 0xff]),
      y: 1901,
      dt: -354_285,
      dtm: 253_402_300_799_000_000n,
      ts: 1_000_001n,
      tm: '-838:59:59.000000',
      tm0: '838:59:59',
      c: 'c',
      vc: '😀 ünï',
      l1: 'café €',
      bn: new Uint8Array([0, 1, 2]),
      bl: new Uint8Array([]),
      j: '{"a": 12345678901234567890}',
      e: 'ok',
      st: 'x,z',
      g: -(2n ** 62n),
    });
    expect(r2).toMatchObject({
      ti: 127,
      tu: 0,
      bi: 2n ** 63n - 1n,
      bu: '0',
      d65: '0.000000000000000000000000000001',
      f: 0.10000000149011612,
      db: 5e-324,
      bt: new Uint8Array([0, 0]),
      y: 2155,
      dt: null,
      dtm: null,
      ts: 2_147_483_647_999_999n,
      tm: '00:00:00.000000',
      tm0: '-00:00:01',
      c: '',
      j: 'null',
      st: '',
      bn: null,
    });
    // YEAR 0 is 0000; a zero-in-date DATETIME ('2024-00-15') and a zero TIMESTAMP read as NULL.
    expect(r3).toMatchObject({ y: 0, dt: 19_782, dtm: null, ts: null, ti: null, g: null });
    expect(daysToDateText(r1.dt as number)).toBe('1000-01-01');
    expect(microsToTimestampText(r1.dtm as bigint, false)).toBe('9999-12-31 23:59:59');
  });
});

describe('random tables: row path == batch path', () => {
  /** A column type under test: DDL type and a value arbitrary (a JS value mysql2 escapes). */
  interface TypeCase {
    readonly sql: string;
    readonly value: fc.Arbitrary<unknown>;
  }
  const int = (min: number, max: number) => fc.integer({ min, max });
  const big = (min: bigint, max: bigint) => fc.bigInt({ min, max }).map(String);
  const decimal = (p: number, s: number) =>
    fc.bigInt({ min: -(10n ** BigInt(p)) + 1n, max: 10n ** BigInt(p) - 1n }).map((v) => {
      const neg = v < 0n;
      const digits = (neg ? -v : v).toString().padStart(s + 1, '0');
      return `${neg ? '-' : ''}${digits.slice(0, digits.length - s)}${s > 0 ? `.${digits.slice(digits.length - s)}` : ''}`;
    });
  // MySQL's own ranges: DATE/DATETIME 1000..9999, TIMESTAMP 1970-01-01 00:00:01..2038-01-19 03:14:07 UTC.
  const days = fc.integer({ min: -354_285, max: 2_932_896 });
  const micros = (min: bigint, max: bigint) => fc.bigInt({ min, max });
  const datetimeMicros = micros(-30_610_224_000_000_000n, 253_402_300_799_999_999n);
  const timestampMicros = micros(1_000_000n, 2_147_483_647_999_999n);
  const text = fc.string({ unit: 'grapheme', maxLength: 12 });
  const latin1 = fc.string({ unit: fc.constantFrom(...'aZ09 \'"\\%_éü€ÿ×'), maxLength: 10 });
  const time = fc
    .tuple(fc.boolean(), int(0, 838), int(0, 59), int(0, 59), int(0, 999_999))
    .map(([neg, h, m, s, f]) => `${neg ? '-' : ''}${h}:${m}:${s}.${String(f).padStart(6, '0')}`);
  const TYPES: TypeCase[] = [
    { sql: 'TINYINT', value: int(-128, 127) },
    { sql: 'TINYINT UNSIGNED', value: int(0, 255) },
    { sql: 'SMALLINT', value: int(-32768, 32767) },
    { sql: 'SMALLINT UNSIGNED', value: int(0, 65535) },
    { sql: 'MEDIUMINT', value: int(-8388608, 8388607) },
    { sql: 'MEDIUMINT UNSIGNED', value: int(0, 16777215) },
    { sql: 'INT', value: fc.integer() },
    { sql: 'INT UNSIGNED', value: int(0, 4294967295) },
    { sql: 'BIGINT', value: big(-(2n ** 63n), 2n ** 63n - 1n) },
    { sql: 'BIGINT UNSIGNED', value: big(0n, 2n ** 64n - 1n) },
    { sql: 'DECIMAL(12,3)', value: decimal(12, 3) },
    { sql: 'DECIMAL(38,0)', value: decimal(38, 0) },
    { sql: 'DECIMAL(65,30)', value: decimal(65, 30) },
    {
      sql: 'FLOAT',
      value: fc.float({
        noNaN: true,
        noDefaultInfinity: true,
        min: Math.fround(-1e38),
        max: Math.fround(1e38),
      }),
    },
    { sql: 'DOUBLE', value: fc.double({ noNaN: true, noDefaultInfinity: true }) },
    { sql: 'BIT(12)', value: int(0, 4095).map((v) => Buffer.from([v >> 8, v & 0xff])) },
    { sql: 'YEAR', value: fc.oneof(int(1901, 2155), fc.constant(0)) },
    { sql: 'DATE', value: fc.oneof(days.map(daysToDateText), fc.constant('0000-00-00')) },
    {
      sql: 'DATETIME(6)',
      value: fc.oneof(
        datetimeMicros.map((m) => microsToTimestampText(m, false)),
        fc.constant('0000-00-00 00:00:00'),
      ),
    },
    {
      sql: 'DATETIME(3)',
      value: datetimeMicros.map((m) => microsToTimestampText((m / 1000n) * 1000n, false)),
    },
    { sql: 'TIMESTAMP(6) NULL', value: timestampMicros.map((m) => microsToTimestampText(m, false)) },
    { sql: 'TIME(6)', value: time },
    { sql: 'VARCHAR(20)', value: text },
    { sql: 'VARCHAR(20) CHARACTER SET latin1', value: latin1 },
    { sql: 'CHAR(5)', value: fc.string({ maxLength: 5 }) },
    { sql: 'TEXT', value: text },
    { sql: 'VARBINARY(10)', value: fc.uint8Array({ maxLength: 10 }).map((b) => Buffer.from(b)) },
    { sql: 'BINARY(3)', value: fc.uint8Array({ maxLength: 3 }).map((b) => Buffer.from(b)) },
    { sql: 'BLOB', value: fc.uint8Array({ maxLength: 10 }).map((b) => Buffer.from(b)) },
    { sql: 'JSON', value: fc.json({ maxDepth: 2 }) },
    { sql: "ENUM('a','b','c')", value: fc.constantFrom('a', 'b', 'c') },
    { sql: "SET('x','y','z')", value: fc.subarray(['x', 'y', 'z']).map((xs) => xs.join(',')) },
  ];

  /** Cursor kinds: type and a value pool with many ties (times all in the past). */
  const CURSORS: TypeCase[] = [
    {
      sql: 'DATETIME(6)',
      value: int(-3, 3).map((k) => microsToTimestampText(1_600_000_000_000_000n + BigInt(k), false)),
    },
    {
      sql: 'TIMESTAMP(6)',
      value: int(0, 5).map((k) => microsToTimestampText(1_600_000_000_000_000n + BigInt(k), false)),
    },
    { sql: 'DATETIME', value: int(0, 3).map((k) => microsToTimestampText(-1_000_000n * BigInt(k), false)) },
    { sql: 'DATE', value: int(0, 3).map((k) => daysToDateText(18_000 + k)) },
    { sql: 'BIGINT', value: fc.constantFrom('-9223372036854775808', '-1', '0', '2', '9223372036854775807') },
    { sql: 'BIGINT UNSIGNED', value: fc.constantFrom('0', '9007199254740993', '18446744073709551615') },
    { sql: 'INT UNSIGNED', value: fc.constantFrom('0', '4294967295', '7') },
    { sql: 'DECIMAL(10,2)', value: fc.constantFrom('1.00', '1.01', '-5.50', '0.00') },
    {
      sql: 'DECIMAL(50,20)',
      value: fc.constantFrom('1.00000000000000000001', '1', '-0.00000000000000000001'),
    },
    { sql: 'VARCHAR(20)', value: fc.constantFrom("o'brien", 'a\\b', '"q"', 'ZZ', 'zz ', '', 'é', '😀') },
    { sql: 'DOUBLE', value: fc.constantFrom(0.1, -0, 1e-300, 1.7976931348623157e308, -2.5) },
    { sql: 'FLOAT', value: fc.constantFrom(0.1, 16777217, -1e-40, 3.4e38) },
    {
      sql: 'VARBINARY(4)',
      value: fc.constantFrom(Buffer.from([]), Buffer.from([0]), Buffer.from([0, 1]), Buffer.from([0xff])),
    },
    {
      sql: 'TIME(6)',
      value: fc.constantFrom('-838:59:59', '-00:00:00.5', '00:00:00', '12:00:00.000001', '100:00:00'),
    },
    { sql: 'YEAR', value: fc.constantFrom(1901, 2024, 2155, 0) },
  ];

  const tableCase = fc.record({
    cursor: fc.constantFrom(...CURSORS),
    columns: fc.uniqueArray(fc.integer({ min: 0, max: TYPES.length - 1 }), { minLength: 1, maxLength: 8 }),
    compositeKey: fc.boolean(),
    rowCount: fc.integer({ min: 0, max: 60 }),
    pageSize: fc.integer({ min: 1, max: 13 }),
    seed: fc.integer(),
  });

  it('walks identical pages (tokens and IPC bytes) and reads every row exactly once', async () => {
    const src = source();
    await admin.query("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'"); // zero dates allowed
    let n = 0;
    try {
      await fc.assert(
        fc.asyncProperty(tableCase, async (tc) => {
          const name = `rnd_${n++}`;
          const cols = tc.columns.map((i, k) => ({ name: `c${k}`, type: TYPES[i]! }));
          const keyCols = tc.compositeKey
            ? ['k1 INT NOT NULL', 'k2 VARCHAR(20) NOT NULL']
            : ['k1 INT NOT NULL'];
          const pk = tc.compositeKey ? '(k1, k2)' : '(k1)';
          await admin.query(
            `CREATE TABLE ${name} (${keyCols.join(', ')}, cur ${tc.cursor.sql} NOT NULL, ${cols
              .map((c) => `${c.name} ${c.type.sql}`)
              .join(', ')}, PRIMARY KEY ${pk}, INDEX (cur))`,
          );
          if (tc.rowCount > 0) {
            const rowArb = fc.tuple(
              fc.string({ maxLength: 3 }),
              tc.cursor.value,
              fc.tuple(...cols.map((c) => fc.option(c.type.value, { nil: null, freq: 4 }))),
            );
            const rows = fc.sample(rowArb, { numRuns: tc.rowCount, seed: tc.seed });
            const values = rows.map(([k2, cur, vals], i) => [
              ...(tc.compositeKey ? [i % 3, `${k2}#${i}`] : [i]),
              cur,
              ...vals,
            ]);
            await admin.query(`INSERT INTO ${name} VALUES ?`, [values]);
          }
          const { ref, schema } = await src.introspect({ source: `${db.name}.${name}` });
          const walked = await walkBoth(src, ref, schema, 'cur', tc.pageSize);
          // Every row exactly once, in the database's own (cursor, key) order.
          const keyList = tc.compositeKey ? 'k1, k2' : 'k1';
          const [expected] = await admin.query(`SELECT ${keyList} FROM ${name} ORDER BY cur, ${keyList}`);
          const key = (r: Record<string, unknown>) => (tc.compositeKey ? `${r.k1}|${r.k2}` : String(r.k1));
          expect(walked.rows.map(key)).toEqual((expected as Record<string, unknown>[]).map(key));
          expect(new Set(walked.tokens).size).toBe(walked.tokens.length);
          await admin.query(`DROP TABLE ${name}`);
        }),
        { numRuns: 40 },
      );
    } finally {
      await admin.query('SET SESSION sql_mode = DEFAULT');
    }
  });
});

describe('keyset paging', () => {
  it('reads every row exactly once when 10,000 rows share one cursor value (page size 97)', async () => {
    await admin.query(`
      CREATE TABLE ties (id INT PRIMARY KEY, updated_at DATETIME(6) NOT NULL, INDEX (updated_at, id));
      INSERT INTO ties SELECT a.n + 10 * b.n + 100 * c.n + 1000 * d.n + 1, '2021-06-01 00:00:00.123456'
      FROM (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
           (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b,
           (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c,
           (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) d`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: `${db.name}.ties`, cursorColumn: 'updated_at' });
    const walked = await walkBoth(src, ref, schema, 'updated_at', 97);
    expect(walked.pages).toBe(Math.ceil(10_000 / 97));
    expect(walked.rows.map((r) => r.id)).toEqual(Array.from({ length: 10_000 }, (_, i) => i + 1));
  });

  it('keeps DATETIME(6) cursors exact: rows 1 µs apart come one per page, in order', async () => {
    await admin.query(`
      CREATE TABLE micro (id INT PRIMARY KEY, updated_at DATETIME(6) NOT NULL, INDEX (updated_at));
      INSERT INTO micro SELECT n, TIMESTAMP'2022-03-04 05:06:07.000000' + INTERVAL (20 - n) MICROSECOND
      FROM (SELECT 1 n UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7
            UNION ALL SELECT 8 UNION ALL SELECT 9 UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12 UNION ALL SELECT 13
            UNION ALL SELECT 14 UNION ALL SELECT 15 UNION ALL SELECT 16 UNION ALL SELECT 17 UNION ALL SELECT 18 UNION ALL SELECT 19 UNION ALL SELECT 20) s`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: `${db.name}.micro` });
    const walked = await walkBoth(src, ref, schema, 'updated_at', 1);
    expect(walked.rows.map((r) => r.id)).toEqual(Array.from({ length: 20 }, (_, i) => 20 - i));
    const base = 1_646_370_367_000_000n;
    expect(
      walked.tokens.map((t) => decodeKey([{ kind: 'timestamp', utc: false }, { kind: 'int32' }], t)[0]),
    ).toEqual(Array.from({ length: 20 }, (_, i) => base + BigInt(i)));
  });

  it('pages a BIGINT UNSIGNED key up to 2^64-1 and a DECIMAL(65,30) cursor exactly', async () => {
    await admin.query(`
      CREATE TABLE wide (id BIGINT UNSIGNED PRIMARY KEY, amount DECIMAL(65,30) NOT NULL, INDEX (amount));
      INSERT INTO wide VALUES (18446744073709551615, '0.000000000000000000000000000001'), (18446744073709551614, '0.000000000000000000000000000001'),
        (9007199254740993, '0.000000000000000000000000000002'), (9007199254740992, '99999999999999999999999999999999999.999999999999999999999999999999'),
        (0, '-99999999999999999999999999999999999.999999999999999999999999999999')`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: `${db.name}.wide` });
    const walked = await walkBoth(src, ref, schema, 'amount', 1);
    expect(walked.rows.map((r) => r.id)).toEqual([
      '0',
      '18446744073709551614',
      '18446744073709551615',
      '9007199254740993',
      '9007199254740992',
    ]);
    expect(walked.rows[0]!.amount).toBe(
      '-99999999999999999999999999999999999.999999999999999999999999999999',
    );
    const byId = await walkBoth(src, ref, schema, 'id', 2);
    expect(byId.rows.map((r) => r.id)).toEqual([
      '0',
      '9007199254740992',
      '9007199254740993',
      '18446744073709551614',
      '18446744073709551615',
    ]);
  });

  it('estimates the row count from InnoDB statistics, for the first sync ETA', async () => {
    await admin.query('CREATE TABLE est (id INT PRIMARY KEY)');
    await admin.query('INSERT INTO est VALUES ?', [Array.from({ length: 5000 }, (_, i) => [i + 1])]);
    await admin.query('ANALYZE TABLE est');
    const src = source();
    const { ref } = await src.introspect({ source: `${db.name}.est` });
    const n = await src.estimateRows(ref);
    // InnoDB samples pages: an estimate, not a count.
    expect(n).toBeGreaterThan(2500);
    expect(n).toBeLessThan(10_000);
  });

  it('pages a text cursor holding quotes, backslashes and unicode through both paths, under NO_BACKSLASH_ESCAPES too', async () => {
    await admin.query('CREATE TABLE quoted (name VARCHAR(40) PRIMARY KEY, note INT)');
    const names = [
      "o'brien",
      "it''s",
      'back\\slash',
      '\\x00',
      '"dq"',
      '`bt`',
      'ünï 😀',
      '',
      ' x',
      "'; DROP TABLE quoted; --",
      'Zed',
    ];
    await admin.query('INSERT INTO quoted VALUES ?', [names.map((name, note) => [name, note])]);
    const walkQuoted = async (src: MysqlSource, database: string, conn: mysql.Connection) => {
      const { ref, schema } = await src.introspect({ source: `${database}.quoted` });
      const walked = await walkBoth(src, ref, schema, 'name', 1);
      const [expected] = await conn.query('SELECT name FROM quoted ORDER BY name');
      expect(walked.rows.map((r) => r.name)).toEqual((expected as { name: string }[]).map((r) => r.name));
      expect(walked.rows).toHaveLength(names.length);
    };
    await walkQuoted(source(), db.name, admin);

    // A server whose GLOBAL sql_mode has NO_BACKSLASH_ESCAPES: a private MariaDB, because
    // changing the shared harness server's global mode would break other test files' clients
    // running at the same time (mysql2 escapes parameters with backslashes).
    const dir = mkdtempSync(join(tmpdir(), 'tidemark-nobs-'));
    const server = await startMariaDb({
      baseDir: dir,
      password: 'nobs',
      database: 'nobs',
      templateRoot: TEMPLATE_ROOT,
    });
    const conn = await mysql.createConnection({ uri: server.url, multipleStatements: true });
    try {
      await conn.query('CREATE TABLE quoted (name VARCHAR(40) PRIMARY KEY, note INT)');
      await conn.query('INSERT INTO quoted VALUES ?', [names.map((name, note) => [name, note])]);
      await conn.query("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',NO_BACKSLASH_ESCAPES')");
      const src = source({ url: server.url }); // a new connection: takes the global sql_mode
      const [[mode]] = (await (
        await mysql.createConnection({ uri: server.url })
      ).query('SELECT @@SESSION.sql_mode AS m')) as unknown as [[{ m: string }]];
      expect(mode.m).toContain('NO_BACKSLASH_ESCAPES');
      await walkQuoted(src, 'nobs', conn);
    } finally {
      await conn.end();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('quotes table and column names holding backticks, question marks, spaces and unicode', async () => {
    await admin.query(
      'CREATE TABLE `we?ird``name` (`Ïd ``x`` ?` INT PRIMARY KEY, `up dated?` DATETIME(6) NOT NULL, `v?` TEXT, INDEX (`up dated?`))',
    );
    await admin.query(
      "INSERT INTO `we?ird``name` VALUES (1, '2020-01-01 00:00:00', 'a'), (2, '2020-01-01 00:00:00', 'b'), (3, '2019-01-01 00:00:00', '?')",
    );
    const src = source();
    const { ref, schema, warnings } = await src.introspect({
      source: `${db.name}.we?ird\`name`,
      cursorColumn: 'up dated?',
    });
    expect(warnings).toEqual([]);
    expect(schema.columns.map((c) => c.name)).toEqual(['Ïd `x` ?', 'up dated?', 'v?']);
    expect(await src.countNullCursors(ref, 'up dated?')).toBe(0);
    const walked = await walkBoth(src, ref, schema, 'up dated?', 1);
    expect(walked.rows.map((r) => r['v?'])).toEqual(['?', 'a', 'b']);
  });

  it('uses the cursor alone as keyset when the table has no primary key but the cursor is UNIQUE NOT NULL', async () => {
    await admin.query(`
      CREATE TABLE nopk (seq BIGINT NOT NULL UNIQUE, v TEXT);
      INSERT INTO nopk VALUES (1, 'v1'), (2, 'v2'), (3, 'v3'), (4, 'v4'), (5, 'v5'), (6, 'v6'), (7, 'v7'), (8, 'v8'), (9, 'v9')`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: `${db.name}.nopk`, cursorColumn: 'seq' });
    expect(schema.primaryKey).toEqual([]);
    const walked = await walkBoth(src, ref, schema, 'seq', 4);
    expect(walked.rows.map((r) => r.seq)).toEqual(Array.from({ length: 9 }, (_, i) => BigInt(i + 1)));
  });

  it('pages by an excluded cursor column and counts (and skips) NULL and zero-date cursors', async () => {
    await admin.query(`
      SET SESSION sql_mode = '';
      CREATE TABLE nulls (id INT PRIMARY KEY, updated_at DATETIME(6), v INT, INDEX (updated_at));
      INSERT INTO nulls VALUES (1, '2020-01-01 00:00:01', 1), (2, NULL, 2), (3, '0000-00-00 00:00:00', 3), (4, '2020-00-10 00:00:00', 4),
        (5, '2020-01-01 00:00:02', 5), (6, '2019-12-31 23:59:59.999999', 6);
      CREATE TABLE zero_notnull (id INT PRIMARY KEY, d DATE NOT NULL);
      INSERT INTO zero_notnull VALUES (1, '2020-01-01'), (2, '0000-00-00');
      SET SESSION sql_mode = DEFAULT`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: `${db.name}.nulls`, exclude: ['updated_at'] });
    expect(schema.columns.map((c) => c.name)).toEqual(['id', 'v']);
    expect(await src.countNullCursors(ref, 'updated_at')).toBe(3);
    const walked = await walkBoth(src, ref, schema, 'updated_at', 2);
    expect(walked.rows.map((r) => r.id)).toEqual([6, 1, 5]);
    const zn = await src.introspect({ source: `${db.name}.zero_notnull` });
    expect(await src.countNullCursors(zn.ref, 'd')).toBe(1);
    expect(await src.countNullCursors(zn.ref, 'id')).toBe(0);
  });
});

describe('schema changes between pages (issue 9: never silent, never a wrong value)', () => {
  const SCHEMA_TABLE = (name: string) => `
      CREATE TABLE ${name} (id INT PRIMARY KEY, updated_at DATETIME(6) NOT NULL, c INT, note VARCHAR(20), INDEX (updated_at, id));
      INSERT INTO ${name} VALUES (1, '2024-01-01 00:00:00', 5, '1234'), (2, '2024-01-01 00:00:01', 7, '5678')`;

  /** Introspects `name` (target lake.<name>) and reads its first page of one row through the batch path. */
  async function firstPage(name: string) {
    const src = source();
    const { ref, schema } = await src.introspect({
      source: `${db.name}.${name}`,
      target: `lake.${name}`,
      cursorColumn: 'updated_at',
    });
    const p1 = await src.incrementalBatch({ ...page1(ref, 'updated_at', 1), schema, writeMode: 'append' });
    expect(p1.page!.record.numRows).toBe(1);
    expect(p1.more).toBe(true);
    const req2 = { ...page1(ref, 'updated_at', 1), after: p1.next, posPrefix: incrementalPosPrefix(2, 1) };
    return { src, ref, schema, req2 };
  }

  /** The page's rejection: SCHEMA_CHANGED for the target, found between pages, on one line. */
  async function schemaChanged(p: Promise<unknown>, table: string): Promise<SchemaChangedError> {
    const e = await p.then(
      (got) => got,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(SchemaChangedError);
    const sc = e as SchemaChangedError;
    expect(sc.code).toBe('SCHEMA_CHANGED');
    expect(sc.table).toBe(table);
    expect(sc.where).toBe('page');
    expect(sc.message).not.toContain('\n');
    return sc;
  }

  // Mutation check: with the result-set comparison disabled (checkResultFields returning at
  // once), page 2 here resolves with a batch (row 2, c = 7 in an Int32 column) instead of
  // rejecting; page 3 then is, on the row path, a row map holding c = 5000000000 for an int32
  // schema column, and on the batch path a DataError from the encoder ("value 5000000000 does
  // not fit column "c" (int32)"): no SCHEMA_CHANGED anywhere.
  it('stops a page whose column went INT -> BIGINT since introspection, through both paths, and never returns a batch', async () => {
    await admin.query(SCHEMA_TABLE('sc_int'));
    const { src, ref, schema, req2 } = await firstPage('sc_int');
    await admin.query(
      "ALTER TABLE sc_int MODIFY c BIGINT; INSERT INTO sc_int VALUES (3, '2024-01-01 00:00:02', 5000000000, '1')",
    );
    const batch = await schemaChanged(
      src.incrementalBatch({ ...req2, schema, writeMode: 'append' }),
      'lake.sc_int',
    );
    expect(batch.changes).toMatchObject([{ kind: 'widened', column: 'c' }]);
    expect(batch.message).toContain(
      'column "c" widened from int(11) (lake int32) to bigint(20) (lake int64)',
    );
    expect(batch.message).toContain(
      'column "c": the result set now says LONGLONG where introspection saw LONG (INT -> BIGINT?)',
    );
    const rows = await schemaChanged(src.incremental(req2), 'lake.sc_int');
    expect(rows.changes.map((c) => c.kind)).toEqual(['widened']);

    // The refused statement was drained: the same connection introspects again, and the new
    // plan reads the changed column exactly.
    const again = await src.introspect({ source: `${db.name}.sc_int`, target: 'lake.sc_int' });
    expect(again.schema.columns.find((c) => c.name === 'c')!.type).toEqual({ kind: 'int64' });
    const p2 = await src.incremental({ ...req2, table: again.ref });
    expect(p2.page).toMatchObject([{ id: 2, c: 7n }]);
    const p3 = await src.incremental({ ...req2, table: again.ref, after: p2.next, pageSize: 10 });
    expect(p3.page).toMatchObject([{ id: 3, c: 5_000_000_000n }]);
    expect(ref.target).toBe('lake.sc_int');
  });

  it('stops a page whose column was dropped (1054) or whose table is gone (1146)', async () => {
    await admin.query(SCHEMA_TABLE('sc_drop'));
    const { src, schema, req2 } = await firstPage('sc_drop');
    await admin.query('ALTER TABLE sc_drop DROP COLUMN note');
    const batch = await schemaChanged(
      src.incrementalBatch({ ...req2, schema, writeMode: 'append' }),
      'lake.sc_drop',
    );
    expect(batch.changes).toMatchObject([{ kind: 'dropped', column: { name: 'note' } }]);
    expect(batch.message).toContain('column "note" varchar(20) is gone');
    expect(batch.message).toMatch(/the server says: Unknown column 'src.note'/);
    await schemaChanged(src.incremental(req2), 'lake.sc_drop');

    await admin.query('RENAME TABLE sc_drop TO sc_dropped');
    const gone = await schemaChanged(src.incremental(req2), 'lake.sc_drop');
    expect(gone.message).toMatch(/sc_drop' doesn't exist/);
  });

  it('stops a page whose VARCHAR column now holds INT values', async () => {
    await admin.query(SCHEMA_TABLE('sc_swap'));
    const { src, schema, req2 } = await firstPage('sc_swap');
    await admin.query('ALTER TABLE sc_swap MODIFY note INT');
    const batch = await schemaChanged(
      src.incrementalBatch({ ...req2, schema, writeMode: 'append' }),
      'lake.sc_swap',
    );
    expect(batch.changes).toMatchObject([{ kind: 'type-changed', column: 'note' }]);
    expect(batch.message).toContain(
      'column "note" changed type from varchar(20) (lake text) to int(11) (lake int32)',
    );
    expect(batch.message).toContain(
      'the result set now says LONG where introspection saw VAR_STRING (VARCHAR -> INT?)',
    );
    await schemaChanged(src.incremental(req2), 'lake.sc_swap');
  });

  it('raises no false alarm: every type, many pages, a new connection, and changes the decoder does not see', async () => {
    await admin.query(`
      CREATE TABLE sc_same (id INT PRIMARY KEY, updated_at DATETIME(6) NOT NULL, ti TINYINT(1), iu INT UNSIGNED, bu BIGINT UNSIGNED,
        d DECIMAL(12,3), d65 DECIMAL(65,30), f FLOAT, fd FLOAT(10,4), db DOUBLE, bt BIT(10), y YEAR, dt DATE, ts TIMESTAMP(6) NULL, tm TIME(3),
        c CHAR(4), vc VARCHAR(20) CHARACTER SET latin1, vb VARCHAR(20) COLLATE utf8mb4_bin, tx TEXT, bn BINARY(3), bl BLOB, j JSON,
        e ENUM('a','b'), st SET('x','y'), u UUID, g BIGINT AS (id * 2) VIRTUAL, INDEX (updated_at, id));
      INSERT INTO sc_same (id, updated_at, ti, iu, bu, d, d65, f, fd, db, bt, y, dt, ts, tm, c, vc, vb, tx, bn, bl, j, e, st, u)
      SELECT n, TIMESTAMP'2024-01-01 00:00:00' + INTERVAL n SECOND, n % 2, n, n, n / 7, n / 3, n / 9, n / 11, n / 13, n, 2000 + n,
             DATE'2024-01-01' + INTERVAL n DAY, TIMESTAMP'2024-01-01 00:00:00' + INTERVAL n MINUTE, SEC_TO_TIME(n), 'c', CONCAT('vé', n),
             CONCAT('B', n), REPEAT('t', n), X'010203', UNHEX(HEX(n)), JSON_OBJECT('n', n), IF(n % 2, 'a', 'b'), 'x,y',
             '123e4567-e89b-12d3-a456-426614174000'
      FROM (SELECT a.n + 10 * b.n + 1 AS n FROM
              (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
              (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2) b) s`);
    const src = source();
    const { ref, schema } = await src.introspect({
      source: `${db.name}.sc_same`,
      cursorColumn: 'updated_at',
    });
    const ids = Array.from({ length: 30 }, (_, i) => i + 1);
    expect((await walkBoth(src, ref, schema, 'updated_at', 4)).rows.map((r) => r.id)).toEqual(ids);
    // A new connection (same session setup) describes the same columns the same way.
    await src.close();
    expect((await walkBoth(src, ref, schema, 'updated_at', 7)).rows.map((r) => r.id)).toEqual(ids);
    // Real changes that read the same bytes into the same lake type (a longer VARCHAR, a binary
    // collation, more fractional digits of TIME) are not the page guard's to stop: the run
    // start compares the schema (schema-rules.ts) and warns.
    await admin.query(
      'ALTER TABLE sc_same MODIFY vc VARCHAR(200) CHARACTER SET latin1, MODIFY c CHAR(40) COLLATE utf8mb4_bin, MODIFY tm TIME(6)',
    );
    expect((await walkBoth(src, ref, schema, 'updated_at', 9)).rows.map((r) => r.id)).toEqual(ids);
  });
});

describe('values a lake cannot hold', () => {
  it('refuses an invalid calendar date (ALLOW_INVALID_DATES) naming the column, and the connection stays usable', async () => {
    await admin.query(`
      SET SESSION sql_mode = 'ALLOW_INVALID_DATES';
      CREATE TABLE bad_date (id INT PRIMARY KEY, d DATE, t DATETIME);
      INSERT INTO bad_date VALUES (1, '2024-02-28', '2024-02-28 00:00:00'), (2, '2024-02-30', '2024-02-28 00:00:00'), (3, '2024-01-01', '2023-02-29 12:00:00');
      SET SESSION sql_mode = DEFAULT`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: `${db.name}.bad_date` });
    const req = page1(ref, 'id', 10);
    await expect(src.incremental(req)).rejects.toThrow(DataError);
    await expect(src.incremental(req)).rejects.toThrow(
      new RegExp(`${db.name}\\.bad_date\\.d: '2024-02-30' is not a calendar date`),
    );
    await expect(src.incrementalBatch({ ...req, schema, writeMode: 'append' })).rejects.toThrow(
      /bad_date\.d: '2024-02-30' is not a calendar date/,
    );
    await admin.query('UPDATE bad_date SET d = NULL WHERE id = 2');
    await expect(src.incrementalBatch({ ...req, schema, writeMode: 'append' })).rejects.toThrow(
      /bad_date\.t: .*2023-02-29/,
    );
    // The connection is still usable after a refused page: the stream was drained.
    await admin.query('DELETE FROM bad_date WHERE id = 3');
    const ok = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
    expect(ok.page!.record.numRows).toBe(2);
  });
});

describe('safe upper bound', () => {
  it('holds rows back behind an open transaction, so a late commit with an older cursor is not skipped', async () => {
    await admin.query(`
      CREATE TABLE events (id INT AUTO_INCREMENT PRIMARY KEY, updated_at DATETIME(6) NOT NULL DEFAULT NOW(6), note TEXT, INDEX (updated_at, id));
      INSERT INTO events (note, updated_at) VALUES ('old', NOW(6) - INTERVAL 1 HOUR)`);
    const src = source({ lagMs: 0, stallAfterMs: 0 });
    const { ref, schema } = await src.introspect({ source: `${db.name}.events`, cursorColumn: 'updated_at' });
    const writer = await mysql.createConnection({ uri: db.url });
    try {
      await writer.query('BEGIN');
      await writer.query("INSERT INTO events (note) VALUES ('late')"); // updated_at = this statement's NOW(6)
      const [[{ tid }]] = (await writer.query('SELECT CONNECTION_ID() AS tid')) as unknown as [
        [{ tid: number }],
      ];
      await new Promise((r) => setTimeout(r, 200));
      await admin.query("INSERT INTO events (note) VALUES ('after-1'), ('after-2')"); // committed, newer cursor
      const req = page1(ref, 'updated_at');
      const rowPage = await src.incremental(req);
      const batchPage = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
      // Without the bound this page would hold after-1 and after-2, and its token would pass the
      // late row's cursor: the late row would never be read.
      expect(rowPage.page.map((r) => r.note)).toEqual(['old']);
      expect(batchPage.page!.record.numRows).toBe(1);
      expect(batchPage.next).toBe(rowPage.next);
      expect(rowPage.more).toBe(false);
      const held = rowPage.warnings?.filter((w) => w.code === 'BOUND_HELD') ?? [];
      const holder = held.map(
        (w) =>
          (w as unknown as { holder: { threadId: number; user: string; command: string; trxId: string } })
            .holder,
      );
      expect(holder.map((h) => h.threadId)).toContain(Number(tid));
      const mine = holder.find((h) => h.threadId === Number(tid))!;
      expect(mine).toMatchObject({ user: 'root', command: 'Sleep' });
      expect(mine.trxId).toMatch(/^\d+$/);
      expect(held.find((w) => w.message.includes(`KILL ${tid}`))!.message).toMatch(/idle in transaction/);

      await writer.query('COMMIT');
      // Read until the rows arrive (or time out): with TIDEMARK_TEST_MYSQL_URL other test files
      // share this server, and INNODB_TRX lists their transactions too.
      const notes: unknown[] = [];
      let token = rowPage.next;
      for (let seq = 2, deadline = Date.now() + 60_000; notes.length < 3 && Date.now() < deadline; seq++) {
        const r = { ...req, after: token, pageSize: 1, posPrefix: incrementalPosPrefix(seq, 1) };
        const rows = await src.incremental(r);
        const batch = await src.incrementalBatch({ ...r, schema, writeMode: 'append' });
        expect(batch.next).toBe(rows.next);
        notes.push(...rows.page.map((x) => x.note));
        token = rows.next;
        if (rows.page.length === 0) await new Promise((done) => setTimeout(done, 200));
      }
      expect(notes).toEqual(['late', 'after-1', 'after-2']);
    } finally {
      await writer.query('ROLLBACK').catch(() => undefined);
      await writer.end();
    }
  });

  it('never trusts a stale INNODB_TRX listing: while another session keeps it from refreshing, the page is held, and the late commit is read later', async () => {
    await admin.query(`
      CREATE TABLE staled (id INT AUTO_INCREMENT PRIMARY KEY, updated_at DATETIME(6) NOT NULL DEFAULT NOW(6), note TEXT, INDEX (updated_at, id));
      INSERT INTO staled (note, updated_at) VALUES ('old', NOW(6) - INTERVAL 1 HOUR)`);
    const src = source({ lagMs: 0, stallAfterMs: 0 });
    const { ref } = await src.introspect({ source: `${db.name}.staled`, cursorColumn: 'updated_at' });
    // InnoDB refills the listing only after 100 ms without reads: a reader every 25 ms freezes it.
    const poller = await mysql.createConnection({ uri: db.url });
    const writer = await mysql.createConnection({ uri: db.url });
    let polling = true;
    let polls = 0;
    const loop = (async () => {
      while (polling) {
        await poller.query('SELECT COUNT(*) FROM information_schema.INNODB_TRX');
        polls++;
        await new Promise((r) => setTimeout(r, 25));
      }
    })();
    try {
      await new Promise((r) => setTimeout(r, 300));
      await writer.query('BEGIN');
      await writer.query("INSERT INTO staled (note) VALUES ('late')"); // not in the frozen listing
      // Committed just after the late row's cursor, and old enough for any lag-free bound.
      await admin.query("INSERT INTO staled (note) VALUES ('after-1'), ('after-2')");
      await new Promise((r) => setTimeout(r, 400));
      const pollsBefore = polls;
      const req = page1(ref, 'updated_at');
      const held = await src.incremental(req);
      // A bound from the frozen listing would let after-1 and after-2 in, and the late row's
      // older cursor would then be behind the token for good.
      expect(held.page.map((r) => r.note)).not.toContain('after-1');
      expect(held.page).toEqual([]);
      // The freeze really lasted through the read (the poller kept reading meanwhile).
      expect(polls).toBeGreaterThan(pollsBefore + 10);
      expect(held.warnings?.map((w) => w.message).join('\n')).toMatch(/INNODB_TRX was not refreshed/);

      polling = false;
      await loop;
      await writer.query('COMMIT');
      const notes: unknown[] = [];
      let token = held.next;
      for (let seq = 2, deadline = Date.now() + 60_000; notes.length < 4 && Date.now() < deadline; seq++) {
        const r = { ...req, after: token, pageSize: 10, posPrefix: incrementalPosPrefix(seq, 1) };
        const rows = await src.incremental(r);
        notes.push(...rows.page.map((x) => x.note));
        token = rows.next;
        if (rows.page.length === 0) await new Promise((done) => setTimeout(done, 200));
      }
      expect(notes).toEqual(['old', 'late', 'after-1', 'after-2']);
    } finally {
      polling = false;
      await loop.catch(() => undefined);
      await writer.query('ROLLBACK').catch(() => undefined);
      await writer.end();
      await poller.end();
    }
  });

  it('holds an AUTO_INCREMENT cursor page until transactions open at the high-water read have ended', async () => {
    await admin.query('CREATE TABLE seqt (id BIGINT AUTO_INCREMENT PRIMARY KEY, note TEXT)');
    const src = source({ lagMs: 300 });
    const { ref, schema } = await src.introspect({ source: `${db.name}.seqt`, cursorColumn: 'id' });
    const writer = await mysql.createConnection({ uri: db.url });
    try {
      await writer.query('BEGIN');
      await writer.query("INSERT INTO seqt (note) VALUES ('late')"); // id 1, not committed
      await admin.query("INSERT INTO seqt (note) VALUES ('early')"); // id 2, committed
      const req = page1(ref, 'id');
      const held = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
      expect(held.page).toBeUndefined();
      expect(held.next).toBe('');
      expect(held.warnings?.map((w) => w.code)).toContain('BOUND_HELD');
      const rowsHeld = await src.incremental(req);
      expect(rowsHeld.page).toEqual([]);

      // Commit while a page is waiting: the page then reads both rows. (It may be held once more
      // on a loaded machine, when the commit lands after its settle time, or with
      // TIDEMARK_TEST_MYSQL_URL, where another test file's transaction holds it: then the next
      // page reads them. Its settle loop reads INNODB_TRX every 150 ms, so the cache, refilled
      // only after 100 ms unread, does see the commit.)
      const pending = src.incremental({ ...req });
      await new Promise((r) => setTimeout(r, 300));
      await writer.query('COMMIT');
      let page = await pending;
      for (let deadline = Date.now() + 60_000; page.page.length === 0 && Date.now() < deadline; )
        page = await src.incremental(req);
      expect(page.page.map((r) => r.note)).toEqual(['late', 'early']);
    } finally {
      await writer.query('ROLLBACK').catch(() => undefined);
      await writer.end();
    }
  });

  it('refuses an account without PROCESS, with the GRANT to run; lagOnly accepts it', async () => {
    const user = `ro_${db.name.slice(-10)}`;
    await admin.query(`CREATE USER '${user}'@'%' IDENTIFIED BY 'ro-pw'`);
    try {
      await admin.query(`
        CREATE TABLE priv (id INT PRIMARY KEY, updated_at DATETIME(6) NOT NULL);
        INSERT INTO priv VALUES (1, '2020-01-01 00:00:00');
        GRANT SELECT ON \`${db.name}\`.priv TO '${user}'@'%'`);
      const url = new URL(db.url);
      url.username = user;
      url.password = 'ro-pw';
      const strict = source({ url: url.toString() });
      const { ref, schema } = await strict.introspect({ source: `${db.name}.priv` });
      const req = page1(ref, 'updated_at', 10);
      const e = await oneLineSourceError(
        strict.incrementalBatch({ ...req, schema, writeMode: 'append' }),
        'SOURCE_PRIVILEGE',
      );
      expect(e.message).toContain(`GRANT PROCESS ON *.* TO '${user}'@'%';`);
      expect(e.message).toContain('lagOnly');
      await oneLineSourceError(
        strict.introspect({ source: `${db.name}.priv`, cursorColumn: 'updated_at' }),
        'SOURCE_PRIVILEGE',
      );

      const lagOnly = source({ url: url.toString(), lagOnly: true, lagMs: 1000 });
      await lagOnly.introspect({ source: `${db.name}.priv` });
      const page = await lagOnly.incrementalBatch({ ...req, schema, writeMode: 'append' });
      expect(page.page!.record.numRows).toBe(1);

      await admin.query(`GRANT PROCESS ON *.* TO '${user}'@'%'`);
      const granted = source({ url: url.toString() });
      await granted.introspect({ source: `${db.name}.priv` });
      expect((await granted.incremental(req)).page).toHaveLength(1);

      await admin.query(
        `CREATE TABLE secret (id INT PRIMARY KEY); GRANT INSERT ON \`${db.name}\`.secret TO '${user}'@'%'`,
      );
      const denied = await oneLineSourceError(
        lagOnly.introspect({ source: `${db.name}.secret` }),
        'SOURCE_PRIVILEGE',
      );
      expect(denied.message).toContain(`GRANT SELECT ON \`${db.name}\`.\`secret\` TO '${user}'@'%';`);
    } finally {
      await Promise.all(sources.splice(0).map((s) => s.close()));
      await admin.query(`DROP USER '${user}'@'%'`);
    }
  });
});

describe('refusals are one-line SourceErrors', () => {
  it('wrong password', async () => {
    const url = new URL(db.url);
    url.password = 'not-the-password';
    const e = await oneLineSourceError(
      source({ url: url.toString() }).introspect({ source: `${db.name}.priv` }),
      'SOURCE_AUTH_FAILED',
    );
    expect(e.message).toMatch(
      /^access denied for user "root" at 127\.0\.0\.1:\d+; check the user and password in the source URL/,
    );
    expect(e.message).not.toContain('not-the-password');
  });

  it('unreachable port', async () => {
    const url = new URL(db.url);
    url.port = String(await freePort());
    const e = await oneLineSourceError(
      source({ url: url.toString() }).introspect({ source: `${db.name}.x` }),
      'SOURCE_UNREACHABLE',
    );
    expect(e.message).toContain(`127.0.0.1:${url.port}`);
  });

  it('missing database', async () => {
    const url = new URL(db.url);
    url.pathname = '/no_such_db';
    await oneLineSourceError(
      source({ url: url.toString() }).introspect({ source: 'no_such_db.x' }),
      'SOURCE_DATABASE_MISSING',
    );
  });

  it('unknown table, with similar names', async () => {
    await admin.query('CREATE TABLE customers (id INT PRIMARY KEY)');
    const e = await oneLineSourceError(
      source().introspect({ source: `${db.name}.custmers` }),
      'SOURCE_TABLE_MISSING',
    );
    expect(e.message).toContain(`${db.name}.custmers`);
    expect(e.message).toContain(`did you mean ${db.name}.customers`);
  });

  it('missing cursor column, unorderable cursor, no primary key with a non-unique cursor', async () => {
    await admin.query(`
      CREATE TABLE cur_checks (id INT PRIMARY KEY, j JSON, e ENUM('b','a'), updated_at DATETIME(6));
      CREATE TABLE no_pk (updated_at DATETIME(6) NOT NULL, v INT, INDEX (updated_at))`);
    const src = source();
    const missing = await oneLineSourceError(
      src.introspect({ source: `${db.name}.cur_checks`, cursorColumn: 'updatd_at' }),
      'SOURCE_CURSOR_INVALID',
    );
    expect(missing.message).toContain('"updatd_at" does not exist');
    for (const c of ['j', 'e']) {
      const unorderable = await oneLineSourceError(
        src.introspect({ source: `${db.name}.cur_checks`, cursorColumn: c }),
        'SOURCE_CURSOR_INVALID',
      );
      expect(unorderable.message).toContain('cannot be ordered for keyset paging');
    }
    const noPk = await oneLineSourceError(
      src.introspect({ source: `${db.name}.no_pk`, cursorColumn: 'updated_at' }),
      'SOURCE_KEY_MISSING',
    );
    expect(noPk.message).toContain(`${db.name}.no_pk has no primary key`);
    // The same checks run on the first page when introspect was not given the cursor.
    const { ref } = await src.introspect({ source: `${db.name}.no_pk` });
    await oneLineSourceError(src.incremental(page1(ref, 'updated_at', 5)), 'SOURCE_KEY_MISSING');
  });

  it('warns (does not refuse) when no index leads with the cursor column', async () => {
    const src = source();
    const { warnings } = await src.introspect({
      source: `${db.name}.cur_checks`,
      cursorColumn: 'updated_at',
    });
    expect(warnings.map((w) => w.code)).toEqual(['CURSOR_NOT_INDEXED']);
    expect(warnings[0]!.message).toContain(
      `ALTER TABLE \`${db.name}\`.\`cur_checks\` ADD INDEX (\`updated_at\`, \`id\`)`,
    );
  });
});

describe('throughput (measured, logged)', () => {
  it('reads 200,000 rows through both paths, batch path first', async () => {
    const digits =
      '(SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)';
    await admin.query(`
      CREATE TABLE bench (id BIGINT PRIMARY KEY, v INT NOT NULL, amount DECIMAL(12,2), note VARCHAR(100), updated_at DATETIME(6) NOT NULL,
                          f DOUBLE, INDEX (updated_at, id));
      INSERT INTO bench SELECT g, g % 1000, g / 7, CONCAT('note ', g, ' ', REPEAT('x', g % 20)),
                               TIMESTAMP'2024-01-01 00:00:00' + INTERVAL g * 1000 MICROSECOND, g * 1.1
      FROM (SELECT 1 + a.n + 10 * b.n + 100 * c.n + 1000 * d.n + 10000 * e.n + 100000 * f.n AS g
            FROM ${digits} a, ${digits} b, ${digits} c, ${digits} d, ${digits} e, ${digits} f) s WHERE g <= 200000`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: `${db.name}.bench`, cursorColumn: 'updated_at' });
    const run = async (batch: boolean) => {
      let after = '';
      let rows = 0;
      const started = performance.now();
      for (let seq = 1; ; seq++) {
        const req = {
          table: ref,
          cursorColumn: 'updated_at',
          after,
          pageSize: 50_000,
          posPrefix: incrementalPosPrefix(seq, 1),
          ordinalBase: 0,
        };
        const r = batch
          ? await src.incrementalBatch({ ...req, schema, writeMode: 'append' })
          : await src.incremental(req);
        rows += batch
          ? ((r.page as { record: RecordBatch } | undefined)?.record.numRows ?? 0)
          : (r.page as unknown[]).length;
        after = r.next;
        if (!r.more) break;
      }
      return { rows, rowsPerSecond: Math.round(rows / ((performance.now() - started) / 1000)) };
    };
    await run(true); // warm up the server's buffer pool and the JIT
    const batch = await run(true);
    const rowPath = await run(false);
    console.log(
      `[mysql driver] 200k rows, pages of 50k: batch path ${batch.rowsPerSecond} rows/s, row path ${rowPath.rowsPerSecond} rows/s`,
    );
    expect(batch.rows).toBe(200_000);
    expect(rowPath.rows).toBe(200_000);

    // Aborted mid-stream: the page rejects, the connection is dropped, the next page reconnects.
    const controller = new AbortController();
    const req = {
      table: ref,
      cursorColumn: 'updated_at',
      after: '',
      pageSize: 200_000,
      posPrefix: incrementalPosPrefix(1, 1),
      ordinalBase: 0,
    };
    const aborted = src.incrementalBatch({ ...req, schema, writeMode: 'append', signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    await expect(aborted).rejects.toThrow(/abort/i);
    const after = await src.incrementalBatch({ ...req, pageSize: 10, schema, writeMode: 'append' });
    expect(after.page!.record.numRows).toBe(10);
  });
});
