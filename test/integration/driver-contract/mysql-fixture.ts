/**
 * MySQL/MariaDB's side of the driver contract (scenarios.ts): a database on a private harness
 * MariaDB (privateMysqlDatabase: the bound scenarios assert exactly what the bound lets through,
 * which other test files' transactions on the shared server changed), the DDL of each scenario's
 * tables in MySQL's dialect (inline indexes, digit cross joins for series), inserts through
 * mysql2 (`VALUES ?`), and what MariaDB reads where the servers differ: type names, zero dates as
 * NULL, BIGINT UNSIGNED as decimal text, INNODB_TRX's view of the session that holds the bound,
 * and the messages of refusals.
 */
import fc from 'fast-check';
import mysql from 'mysql2/promise';
import { expect } from 'vitest';
import type { LogicalType } from '../../../shared/dataplane/schema.js';
import { MysqlSource, type MysqlSourceOptions } from '../../../shared/drivers/mysql/source.js';
import { daysToDateText, microsToTimestampText } from '../../../shared/position/time-text.js';
import { type FreshDatabase, privateMysqlDatabase } from '../../harness/mysql.js';
import { CLOCK_MS, type DriverFixture, decimalText, type TypeCase } from './fixture.js';

/**
 * The fixture's sources run on a private server: the bound scenarios assert exactly what the
 * bound lets through, which on the shared server other files' transactions (and their reads
 * keeping INNODB_TRX's cache stale) changed; and its high-water walks no longer stall behind
 * other files' transactions, nor keep the shared server's INNODB_TRX cache stale for the others.
 * With TIDEMARK_TEST_MYSQL_URL the server is shared again: a generous lag lets other sessions'
 * short transactions end before a high-water page gives up (every time cursor below is far in
 * the past, so the lag holds nothing back there). Tests of the bound itself choose their own.
 */
const SHARED_SERVER_LAG_MS = 10_000;

const DIGITS =
  '(SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)';

const t = (kind: string, extra: object = {}): LogicalType => ({ kind, ...extra }) as LogicalType;

const ALL_TYPES: [string, LogicalType][] = [
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
];

const int = (min: number, max: number) => fc.integer({ min, max });
const big = (min: bigint, max: bigint) => fc.bigInt({ min, max }).map(String);
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

/** Column types of the random tables, each with a value arbitrary (a JS value mysql2 escapes). */
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
  { sql: 'DECIMAL(12,3)', value: decimalText(12, 3) },
  { sql: 'DECIMAL(38,0)', value: decimalText(38, 0) },
  { sql: 'DECIMAL(65,30)', value: decimalText(65, 30) },
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

/** The text cursor values of `quoted` (also read under NO_BACKSLASH_ESCAPES by mysql-driver.test.ts). */
export const QUOTED_NAMES = [
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

export type MysqlDriverFixture = DriverFixture<MysqlSource> & {
  readonly db: FreshDatabase;
  /** The admin's connection: several statements per query, big numbers and dates as strings, UTC. */
  readonly admin: mysql.Connection;
};

/** The MySQL fixture: database `my_driver_*` on a private MariaDB; `setUp` starts it. */
export function mysqlDriverFixture(): MysqlDriverFixture {
  let db: FreshDatabase | undefined;
  let admin: mysql.Connection | undefined;
  const sources: MysqlSource[] = [];
  const need = <T>(x: T | undefined): T => {
    if (x === undefined) throw new Error('the MySQL driver fixture is not set up (beforeAll)');
    return x;
  };
  return {
    kind: 'mysql',
    titles: {
      allTypes: ', with zero-date columns nullable',
      values: ' (zero dates as NULL)',
      micro: 'DATETIME(6) cursors',
      nulls: ' and zero-date',
      estimate: 'InnoDB',
      sequence: 'an AUTO_INCREMENT',
      privileges: 'an account without PROCESS',
    },
    async setUp() {
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
    },
    get db() {
      return need(db);
    },
    get admin() {
      return need(admin);
    },
    get url() {
      return need(db).url;
    },
    get schema() {
      return need(db).name;
    },
    source(opts: Partial<MysqlSourceOptions> = {}) {
      const s = new MysqlSource({
        url: need(db).url,
        lagMs: SHARED_SERVER_LAG_MS,
        clock: () => CLOCK_MS,
        ...opts,
      });
      sources.push(s);
      return s;
    },
    async closeSources() {
      await Promise.all(sources.splice(0).map((s) => s.close()));
    },
    async exec(sql) {
      await need(admin).query(sql);
    },
    async query(sql) {
      return (await need(admin).query(sql))[0] as Record<string, unknown>[];
    },
    rereads: 3,
    async session() {
      const writer = await mysql.createConnection({ uri: need(db).url });
      const [[{ tid }]] = (await writer.query('SELECT CONNECTION_ID() AS tid')) as unknown as [
        [{ tid: number }],
      ];
      return {
        id: String(tid),
        exec: async (sql) => {
          await writer.query(sql);
        },
        close: () => writer.end(),
      };
    },

    allTypes: {
      ddl: `
      CREATE TABLE all_types (
        id BIGINT PRIMARY KEY, ti TINYINT, tb TINYINT(1) NOT NULL DEFAULT 0, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED,
        mi MEDIUMINT, mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED,
        d12 DECIMAL(12,3), d38 DECIMAL(38,38), d39 DECIMAL(39,2), d65 DECIMAL(65,30), f FLOAT, fd FLOAT(10,4), d DOUBLE,
        b1 BIT(1), b64 BIT(64), y YEAR, dt DATE NOT NULL, dtm DATETIME, dtm6 DATETIME(6) NOT NULL, ts TIMESTAMP(6) NULL,
        tm TIME(6), c CHAR(3), vc VARCHAR(10) CHARACTER SET latin1, tx TEXT, lt LONGTEXT, bn BINARY(4), vb VARBINARY(8), bl BLOB,
        j JSON, e ENUM('a','b'), st SET('x','y'), g INT AS (i * 2) VIRTUAL, gs VARCHAR(20) AS (CONCAT(vc, '!')) STORED,
        u UUID, ip INET6, pt POINT
      )`,
      columns: ALL_TYPES,
      // Zero dates read as NULL, and any session may write one into a NOT NULL column.
      nullable: { id: false, tb: false, i: true, dt: true, dtm6: true },
      sourceTypes: {
        d12: 'decimal(12,3)',
        bu: /^bigint(\(20\))? unsigned$/,
        j: 'json',
        lt: 'longtext',
      },
      exclude: ['pt', 'ip'],
    },
    values: {
      ddl: `
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
      SET SESSION sql_mode = DEFAULT`,
      ids: [1, 2, 3],
      expectRows(rows) {
        const [r1, r2, r3] = rows as [
          Record<string, unknown>,
          Record<string, unknown>,
          Record<string, unknown>,
        ];
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
      },
    },
    random: {
      types: TYPES,
      cursors: CURSORS,
      keyTypes: { int: 'INT', text: 'VARCHAR(20)' },
      keyText: fc.string({ maxLength: 3 }),
      async create(name, columns, primaryKey) {
        await need(admin).query(
          `CREATE TABLE ${name} (${columns.join(', ')}, PRIMARY KEY ${primaryKey}, INDEX (cur))`,
        );
      },
      async insert(name, _types, rows) {
        await need(admin).query(`INSERT INTO ${name} VALUES ?`, [rows]);
      },
      async around(run) {
        await need(admin).query("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'"); // zero dates allowed
        try {
          await run();
        } finally {
          await need(admin).query('SET SESSION sql_mode = DEFAULT');
        }
      },
    },
    ties: `
      CREATE TABLE ties (id INT PRIMARY KEY, updated_at DATETIME(6) NOT NULL, INDEX (updated_at, id));
      INSERT INTO ties SELECT a.n + 10 * b.n + 100 * c.n + 1000 * d.n + 1, '2021-06-01 00:00:00.123456'
      FROM ${DIGITS} a, ${DIGITS} b, ${DIGITS} c, ${DIGITS} d`,
    micro: {
      ddl: `
      CREATE TABLE micro (id INT PRIMARY KEY, updated_at DATETIME(6) NOT NULL, INDEX (updated_at));
      INSERT INTO micro SELECT n, TIMESTAMP'2022-03-04 05:06:07.000000' + INTERVAL (20 - n) MICROSECOND
      FROM (SELECT 1 n UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7
            UNION ALL SELECT 8 UNION ALL SELECT 9 UNION ALL SELECT 10 UNION ALL SELECT 11 UNION ALL SELECT 12 UNION ALL SELECT 13
            UNION ALL SELECT 14 UNION ALL SELECT 15 UNION ALL SELECT 16 UNION ALL SELECT 17 UNION ALL SELECT 18 UNION ALL SELECT 19 UNION ALL SELECT 20) s`,
      utc: false,
    },
    quoted: {
      names: QUOTED_NAMES,
      async create() {
        await need(admin).query('CREATE TABLE quoted (name VARCHAR(40) PRIMARY KEY, note INT)');
        await need(admin).query('INSERT INTO quoted VALUES ?', [
          QUOTED_NAMES.map((name, note) => [name, note]),
        ]);
      },
    },
    nopk: {
      ddl: `
      CREATE TABLE nopk (seq BIGINT NOT NULL UNIQUE, v TEXT);
      INSERT INTO nopk VALUES (1, 'v1'), (2, 'v2'), (3, 'v3'), (4, 'v4'), (5, 'v5'), (6, 'v6'), (7, 'v7'), (8, 'v8'), (9, 'v9')`,
      rows: 9,
    },
    nulls: {
      ddl: `
      SET SESSION sql_mode = '';
      CREATE TABLE nulls (id INT PRIMARY KEY, updated_at DATETIME(6), v INT, INDEX (updated_at));
      INSERT INTO nulls VALUES (1, '2020-01-01 00:00:01', 1), (2, NULL, 2), (3, '0000-00-00 00:00:00', 3), (4, '2020-00-10 00:00:00', 4),
        (5, '2020-01-01 00:00:02', 5), (6, '2019-12-31 23:59:59.999999', 6);
      CREATE TABLE zero_notnull (id INT PRIMARY KEY, d DATE NOT NULL);
      INSERT INTO zero_notnull VALUES (1, '2020-01-01'), (2, '0000-00-00');
      SET SESSION sql_mode = DEFAULT`,
      nullCursors: 3,
      pageSize: 2,
      ids: [6, 1, 5],
      others: [
        {
          table: 'zero_notnull',
          counts: [
            ['d', 1],
            ['id', 0],
          ],
        },
      ],
    },
    estimate: {
      ddl: 'CREATE TABLE est (id INT PRIMARY KEY)',
      unanalyzedIsUndefined: false,
      async fill() {
        await need(admin).query('INSERT INTO est VALUES ?', [
          Array.from({ length: 5000 }, (_, i) => [i + 1]),
        ]);
        await need(admin).query('ANALYZE TABLE est');
      },
      // InnoDB samples pages.
      between: [2500, 10_000],
    },
    bound: {
      afterCommit: 'eventually',
      eventsDdl: `
      CREATE TABLE events (id INT AUTO_INCREMENT PRIMARY KEY, updated_at DATETIME(6) NOT NULL DEFAULT NOW(6), note TEXT, INDEX (updated_at, id));
      INSERT INTO events (note, updated_at) VALUES ('old', NOW(6) - INTERVAL 1 HOUR)`,
      lateGapMs: 200,
      expectHolder(held, session) {
        const tid = Number(session.id);
        const holder = held.map(
          (w) =>
            (w as unknown as { holder: { threadId: number; user: string; command: string; trxId: string } })
              .holder,
        );
        expect(holder.map((h) => h.threadId)).toContain(tid);
        const mine = holder.find((h) => h.threadId === tid)!;
        expect(mine).toMatchObject({ user: 'root', command: 'Sleep' });
        expect(mine.trxId).toMatch(/^\d+$/);
        expect(held.find((w) => w.message.includes(`KILL ${tid}`))!.message).toMatch(/idle in transaction/);
      },
      sequenceDdl: 'CREATE TABLE seqt (id BIGINT AUTO_INCREMENT PRIMARY KEY, note TEXT)',
      commitAfterMs: 300,
    },
    get privileges() {
      const name = need(db).name;
      const user = `ro_${name.slice(-10)}`;
      return {
        account: user,
        createAccount: `CREATE USER '${user}'@'%' IDENTIFIED BY 'ro-pw'`,
        privTable: `
        CREATE TABLE priv (id INT PRIMARY KEY, updated_at DATETIME(6) NOT NULL);
        INSERT INTO priv VALUES (1, '2020-01-01 00:00:00');
        GRANT SELECT ON \`${name}\`.priv TO '${user}'@'%'`,
        grantSessions: `GRANT PROCESS ON *.* TO '${user}'@'%'`,
        secretTable: `CREATE TABLE secret (id INT PRIMARY KEY); GRANT INSERT ON \`${name}\`.secret TO '${user}'@'%'`,
        dropAccount: `DROP USER '${user}'@'%'`,
        refusal: `GRANT PROCESS ON *.* TO '${user}'@'%';`,
        denied: `GRANT SELECT ON \`${name}\`.\`secret\` TO '${user}'@'%';`,
        lagOnlyLagMs: 1000,
      };
    },
    get refusals() {
      const name = need(db).name;
      return {
        wrongPassword:
          /^access denied for user "root" at 127\.0\.0\.1:\d+; check the user and password in the source URL/,
        missingDatabaseTable: 'no_such_db.x',
        cursorDdl: `
      CREATE TABLE cur_checks (id INT PRIMARY KEY, j JSON, e ENUM('b','a'), updated_at DATETIME(6));
      CREATE TABLE no_pk (updated_at DATETIME(6) NOT NULL, v INT, INDEX (updated_at))`,
        unorderable: ['j', 'e'],
        unorderableSays: 'cannot be ordered for keyset paging',
        indexAdvice: `ALTER TABLE \`${name}\`.\`cur_checks\` ADD INDEX (\`updated_at\`, \`id\`)`,
      };
    },
    async drop() {
      await Promise.all(sources.splice(0).map((s) => s.close()));
      await admin?.end();
      await db?.drop();
    },
  };
}
