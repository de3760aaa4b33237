/**
 * PostgreSQL's side of the driver contract (scenarios.ts): a fresh database on the harness
 * server, the DDL of each scenario's tables in Postgres' dialect, inserts through postgres.js
 * (random values as text parameters cast to the column type), and what Postgres reads where the
 * servers differ: type names, the value forms of docs/types.md (infinities, BC dates, arrays),
 * pg_stat_activity's view of the session that holds the bound, and the messages of refusals.
 */
import fc from 'fast-check';
import postgres from 'postgres';
import { expect } from 'vitest';
import type { LogicalType } from '../../../shared/dataplane/schema.js';
import { PostgresSource, type PostgresSourceOptions } from '../../../shared/drivers/postgres/source.js';
import {
  daysToDateText,
  microsToTimestampText,
  TIMESTAMP_NEG_INFINITY,
} from '../../../shared/position/time-text.js';
import { type FreshDatabase, freshPgDatabase } from '../../harness/pg.js';
import { CLOCK_MS, type DriverFixture, decimalText, type TypeCase } from './fixture.js';

/** A table holding one of every read form, incl. NULLs, infinities, empty and padded values. */
export const valuesTable = (name: string, withEnum = true) => `
      CREATE TABLE ${name} (
        id int PRIMARY KEY, u timestamptz NOT NULL, n numeric(12,3), nu numeric, r real, d double precision,
        ch char(4), by bytea, uu uuid, j json, jb jsonb, m ${withEnum ? 'mood' : 'text'}, dt date, ts timestamp, tm time, iv interval,
        ia int[], ta text[], na numeric(5,2)[], tsa timestamptz[], ba bytea[], inet inet);
      INSERT INTO ${name} VALUES
        (1, '2020-01-01 00:00:00.000001+00', 3.5, 123456789012345678901234567890.123456789, 0.1, 1e300, 'c',
         '\\x0001ff', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '{"a": 12345678901234567890}', '{"b": [1,2]}', 'ok',
         '2024-02-29', '2024-01-01 12:00:00.5', '12:34:56.789', '1 year 2 mons 3 days 04:05:06.7',
         '{1,NULL,3}', '{"a,b","c\\"d",NULL,"NULL",""}', '{1.5,NULL}', '{"2024-01-01 00:00:00+05:30",infinity}',
         '{"\\\\x00",NULL}', '10.0.0.1/8'),
        (2, '2020-01-01 00:00:00.000002+00', NULL, 'NaN', 'NaN', '-Infinity', NULL, NULL, NULL, NULL, NULL, NULL,
         'infinity', '-infinity', NULL, NULL, '{}', '[0:1]={x,y}', NULL, NULL, '{}', NULL),
        (3, '1999-12-31 23:59:59.999999+00', -999999999.999, '-0.000001', '-0', 5e-324, '', '', NULL, 'null', 'null',
         'sad', '0044-03-15 BC', '0001-01-01 00:00:00 BC', '24:00:00', '-1 day', NULL, NULL, NULL, NULL, NULL, NULL)`;

const t = (kind: string, extra: object = {}): LogicalType => ({ kind, ...extra }) as LogicalType;
const list = (element: LogicalType): LogicalType => ({ kind: 'list', element });

const ALL_TYPES: [string, LogicalType][] = [
  ['id', t('int64')],
  ['s', t('int16')],
  ['i', t('int32')],
  ['b', t('int64')],
  ['n12', t('decimal', { precision: 12, scale: 3 })],
  ['n38', t('decimal', { precision: 38, scale: 38 })],
  ['n39', t('text')],
  ['nu', t('text')],
  ['r', t('float64')],
  ['d', t('float64')],
  ['bo', t('bool')],
  ['tx', t('text')],
  ['vc', t('text')],
  ['ch', t('text')],
  ['nm', t('text')],
  ['Quoted "Col"', t('text')],
  ['by', t('binary')],
  ['uu', t('text')],
  ['j', t('text')],
  ['jb', t('text')],
  ['m', t('text')],
  ['dt', t('date')],
  ['ts', t('timestamp', { utc: false })],
  ['tstz', t('timestamp', { utc: true })],
  ['tm', t('text')],
  ['ttz', t('text')],
  ['iv', t('text')],
  ['ia', list(t('int32'))],
  ['ta', list(t('text'))],
  ['na', list(t('decimal', { precision: 5, scale: 2 }))],
  ['tsa', list(t('timestamp', { utc: true }))],
  ['ua', list(t('text'))],
  ['ba', list(t('bool'))],
  ['fa', list(t('float64'))],
  ['ma', list(t('text'))],
  ['ja', list(t('text'))],
  ['nua', list(t('text'))],
  ['i2', t('text')],
  ['inet', t('text')],
  ['cidr', t('text')],
  ['mac', t('text')],
  ['x', t('text')],
  ['mo', t('text')],
  ['bi', t('text')],
  ['vb', t('text')],
  ['dm', t('decimal', { precision: 10, scale: 2 })],
  ['dp', t('int32')],
  ['dpa', list(t('int32'))],
  ['g', t('int32')],
  ['nn', t('int32')],
];

const micros = fc.bigInt({ min: -200_000_000_000_000_000n, max: 9_000_000_000_000_000_000n });
const days = fc.integer({ min: -2_000_000, max: 2_000_000 });
const safeText = fc.string({ unit: 'grapheme', maxLength: 12 }).filter((s) => !s.includes('\0'));
const arrayText = (el: fc.Arbitrary<string>) =>
  fc
    .array(fc.option(el, { nil: null }), { maxLength: 4 })
    .map((xs) => `{${xs.map((x) => (x === null ? 'NULL' : `"${x.replace(/[\\"]/g, '\\$&')}"`)).join(',')}}`);

/** Column types of the random tables, each with a value arbitrary of SQL input text. */
const TYPES: TypeCase[] = [
  { sql: 'smallint', value: fc.integer({ min: -32768, max: 32767 }).map(String) },
  { sql: 'integer', value: fc.integer().map(String) },
  { sql: 'bigint', value: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String) },
  { sql: 'numeric(12,3)', value: decimalText(12, 3) },
  { sql: 'numeric(38,0)', value: decimalText(38, 0) },
  { sql: 'numeric', value: fc.oneof(decimalText(40, 7), fc.constant('NaN')) },
  { sql: 'real', value: fc.float().map(String) },
  { sql: 'double precision', value: fc.double().map(String) },
  { sql: 'boolean', value: fc.boolean().map(String) },
  { sql: 'text', value: safeText },
  { sql: 'varchar(20)', value: safeText },
  { sql: 'char(5)', value: fc.string({ maxLength: 5 }).filter((s) => !s.includes('\0')) },
  {
    sql: 'bytea',
    value: fc.uint8Array({ maxLength: 10 }).map((b) => `\\x${Buffer.from(b).toString('hex')}`),
  },
  { sql: 'uuid', value: fc.uuid() },
  { sql: 'jsonb', value: fc.json({ maxDepth: 2 }).filter((j) => !j.includes('\\u0000')) },
  { sql: 'json', value: fc.json({ maxDepth: 2 }) },
  { sql: 'date', value: fc.oneof(days.map(daysToDateText), fc.constantFrom('infinity', '-infinity')) },
  {
    sql: 'timestamp',
    value: fc.oneof(
      micros.map((m) => microsToTimestampText(m, false)),
      fc.constant('infinity'),
    ),
  },
  {
    sql: 'timestamptz',
    value: fc.oneof(
      micros.map((m) => microsToTimestampText(m, true)),
      fc.constant('-infinity'),
    ),
  },
  {
    sql: 'interval',
    value: fc.constantFrom('1 day', '-3 hours 2 min', '1 year 2 mons', '00:00:00.000001'),
  },
  { sql: 'time', value: fc.constantFrom('00:00:00', '23:59:59.999999', '24:00:00', '12:00:00.5') },
  { sql: 'integer[]', value: arrayText(fc.integer().map(String)) },
  { sql: 'text[]', value: arrayText(safeText) },
  { sql: 'numeric(6,2)[]', value: arrayText(decimalText(6, 2)) },
  { sql: 'timestamptz[]', value: arrayText(micros.map((m) => microsToTimestampText(m, true))) },
  { sql: 'date[]', value: arrayText(days.map(daysToDateText)) },
  { sql: 'uuid[]', value: arrayText(fc.uuid()) },
  { sql: 'boolean[]', value: arrayText(fc.boolean().map(String)) },
  { sql: 'double precision[]', value: arrayText(fc.double().map(String)) },
];

/** Cursor kinds: type, a value pool with many ties (times all in the past). */
const CURSORS: TypeCase[] = [
  {
    sql: 'timestamptz',
    value: fc
      .integer({ min: 0, max: 5 })
      .map((k) => microsToTimestampText(1_600_000_000_000_000n + BigInt(k), true)),
  },
  {
    sql: 'timestamp',
    value: fc.integer({ min: -3, max: 3 }).map((k) => microsToTimestampText(-1n + BigInt(k), false)),
  },
  { sql: 'date', value: fc.integer({ min: 0, max: 3 }).map((k) => daysToDateText(18_000 + k)) },
  { sql: 'bigint', value: fc.integer({ min: -2, max: 3 }).map(String) },
  { sql: 'numeric(10,2)', value: fc.constantFrom('1.00', '1.01', '-5.50', '0.00') },
  { sql: 'text', value: fc.constantFrom("o'brien", 'a\\b', '"q"', 'zz', '') },
  // Read as text but ordered natively: text order differs ('10.0.0.10' < '10.0.0.2').
  { sql: 'inet', value: fc.constantFrom('10.0.0.2', '10.0.0.10', '9.0.0.1', '::1', '10.0.0.2/8') },
  { sql: 'interval', value: fc.constantFrom('1 day', '25 hours', '-1 mon', '00:00:00.000001', '30 days') },
  { sql: 'real', value: fc.constantFrom('0.1', '-0', 'NaN', 'Infinity', '1e-40', '3.4e38') },
  {
    sql: 'uuid',
    value: fc.constantFrom('00000000-0000-0000-0000-000000000001', 'ffffffff-0000-0000-0000-000000000000'),
  },
  { sql: 'bytea', value: fc.constantFrom('\\x', '\\x00', '\\x0001', '\\xff') },
  { sql: 'boolean', value: fc.boolean().map(String) },
];

const QUOTED_NAMES = [
  "o'brien",
  "it''s",
  'back\\slash',
  '\\x00',
  '"dq"',
  "E'x'",
  '$$',
  'ünï 😀',
  '',
  ' ',
  "'; DROP TABLE quoted; --",
];

export type PostgresDriverFixture = DriverFixture<PostgresSource> & {
  readonly db: FreshDatabase;
  readonly admin: postgres.Sql;
};

/** The Postgres fixture: database `pg_driver_*` on the harness server; `setUp` creates it. */
export function postgresDriverFixture(): PostgresDriverFixture {
  let db: FreshDatabase | undefined;
  let admin: postgres.Sql | undefined;
  const sources: PostgresSource[] = [];
  const need = <T>(x: T | undefined): T => {
    if (x === undefined) throw new Error('the Postgres driver fixture is not set up (beforeAll)');
    return x;
  };
  const role = () => `ro_${need(db).name.slice(-12)}`;
  return {
    kind: 'postgres',
    titles: {
      allTypes: ', skipping dropped columns',
      values: '',
      micro: 'cursor microseconds',
      nulls: '',
      estimate: 'planner',
      sequence: 'a sequence',
      privileges: 'a role that cannot see other sessions',
    },
    async setUp() {
      db = await freshPgDatabase('pg_driver');
      admin = postgres(db.url, { max: 4, onnotice: () => {} });
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
    schema: 'public',
    source(opts: Partial<PostgresSourceOptions> = {}) {
      const s = new PostgresSource({ url: need(db).url, lagMs: 0, clock: () => CLOCK_MS, ...opts });
      sources.push(s);
      return s;
    },
    async closeSources() {
      await Promise.all(sources.splice(0).map((s) => s.close()));
    },
    async exec(sql) {
      await need(admin).unsafe(sql);
    },
    async query(sql) {
      return [...(await need(admin).unsafe(sql))] as Record<string, unknown>[];
    },
    rereads: 0,
    async session() {
      const writer = await need(admin).reserve();
      const [who] = await writer<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
      return {
        id: String(who!.pid),
        exec: async (sql) => {
          await writer.unsafe(sql);
        },
        close: async () => writer.release(),
      };
    },

    allTypes: {
      ddl: `
      CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
      CREATE DOMAIN money2 AS numeric(10,2);
      CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
      CREATE TABLE all_types (
        id bigint PRIMARY KEY, gone int, s smallint, i integer, b bigint, n12 numeric(12,3), n38 numeric(38,38),
        n39 numeric(39,2), nu numeric, r real, d double precision, bo boolean, tx text, vc varchar(10), ch char(3),
        nm name, "Quoted ""Col""" text, by bytea, uu uuid, j json, jb jsonb, m mood, dt date, ts timestamp, tstz timestamptz,
        tm time, ttz timetz, iv interval, ia int[], ta text[], na numeric(5,2)[], tsa timestamptz[], ua uuid[],
        ba bool[], fa real[], ma mood[], ja jsonb[], nua numeric[], i2 int[][], inet inet, cidr cidr, mac macaddr,
        x xml, mo money, bi bit(3), vb varbit, dm money2, dp posint, dpa posint[],
        g int GENERATED ALWAYS AS (i * 2) STORED, nn int NOT NULL DEFAULT 0
      );
      ALTER TABLE all_types DROP COLUMN gone;`,
      columns: ALL_TYPES,
      nullable: { id: false, nn: false, i: true },
      sourceTypes: { n12: 'numeric(12,3)' },
      exclude: ['x', 'mo'],
    },
    values: {
      ddl: valuesTable('values_t'),
      ids: [3, 1, 2],
      expectRows(rows) {
        const [r3, r1, r2] = rows as [
          Record<string, unknown>,
          Record<string, unknown>,
          Record<string, unknown>,
        ];
        expect(r1).toMatchObject({
          u: 1_577_836_800_000_001n,
          n: '3.500',
          nu: '123456789012345678901234567890.123456789',
          r: 0.10000000149011612,
          d: 1e300,
          ch: 'c   ',
          by: new Uint8Array([0, 1, 255]),
          uu: 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
          j: '{"a": 12345678901234567890}',
          jb: '{"b": [1, 2]}',
          m: 'ok',
          dt: 19_782,
          ts: 1_704_110_400_500_000n,
          tm: '12:34:56.789',
          iv: 'P1Y2M3DT4H5M6.7S',
          ia: [1, null, 3],
          ta: ['a,b', 'c"d', null, 'NULL', ''],
          na: ['1.50', null],
          tsa: [1_704_047_400_000_000n, 2n ** 63n - 1n],
          ba: [new Uint8Array([0]), null],
          inet: '10.0.0.1/8',
        });
        expect(r2).toMatchObject({
          nu: 'NaN',
          d: Number.NEGATIVE_INFINITY,
          dt: 2 ** 31 - 1,
          ts: TIMESTAMP_NEG_INFINITY,
          ia: [],
          ta: ['x', 'y'],
          ba: [],
        });
        expect(Number.isNaN(r2.r)).toBe(true);
        expect(r3).toMatchObject({
          nu: '-0.000001',
          d: 5e-324,
          ch: '    ',
          by: new Uint8Array([]),
          j: 'null',
          tm: '24:00:00',
          iv: 'P-1D',
        });
        expect(Object.is(r3.r, -0)).toBe(true);
        expect(daysToDateText(r3.dt as number)).toBe('0044-03-15 BC');
        expect(microsToTimestampText(r3.ts as bigint, false)).toBe('0001-01-01 00:00:00 BC');
      },
    },
    random: {
      types: TYPES,
      cursors: CURSORS,
      keyTypes: { int: 'int', text: 'text' },
      keyText: fc.string({ maxLength: 3 }).filter((s) => !s.includes('\0')),
      async create(name, columns, primaryKey) {
        await need(admin).unsafe(`CREATE TABLE ${name} (${columns.join(', ')}, PRIMARY KEY ${primaryKey})`);
      },
      async insert(name, types, rows) {
        const params: (string | null)[] = [];
        const tuples = rows.map(
          (row) =>
            `(${row
              .map((v, k) => {
                params.push(v === null ? null : String(v));
                return `$${params.length}::text::${types[k]}`;
              })
              .join(', ')})`,
        );
        await need(admin).unsafe(`INSERT INTO ${name} VALUES ${tuples.join(', ')}`, params);
      },
      around: (run) => run(),
    },
    ties: `
      CREATE TABLE ties (id int PRIMARY KEY, updated_at timestamptz NOT NULL);
      CREATE INDEX ties_cursor ON ties (updated_at, id);
      INSERT INTO ties SELECT g, '2021-06-01 00:00:00.123456+00' FROM generate_series(1, 10000) g`,
    micro: {
      ddl: `
      CREATE TABLE micro (id int PRIMARY KEY, updated_at timestamptz NOT NULL);
      INSERT INTO micro SELECT g, '2022-03-04 05:06:07.000000+00'::timestamptz + (20 - g) * interval '1 microsecond'
      FROM generate_series(1, 20) g`,
      utc: true,
    },
    quoted: {
      names: QUOTED_NAMES,
      async create() {
        const sql = need(admin);
        await sql.unsafe(`CREATE TABLE quoted (name text PRIMARY KEY, note int)`);
        await sql`INSERT INTO quoted ${sql(QUOTED_NAMES.map((name, note) => ({ name, note })))}`;
      },
    },
    nopk: {
      ddl: `
      CREATE TABLE nopk (seq bigint NOT NULL UNIQUE, v text);
      INSERT INTO nopk SELECT g, 'v' || g FROM generate_series(1, 25) g`,
      rows: 25,
    },
    nulls: {
      ddl: `
      CREATE TABLE nulls (id int PRIMARY KEY, updated_at timestamptz, v int);
      INSERT INTO nulls SELECT g, CASE WHEN g % 4 = 0 THEN NULL ELSE '2020-01-01+00'::timestamptz + g * interval '1 s' END, g
      FROM generate_series(1, 40) g;
      CREATE TABLE notnull_cursor (id int PRIMARY KEY, c int NOT NULL)`,
      nullCursors: 10,
      pageSize: 7,
      ids: Array.from({ length: 40 }, (_, i) => i + 1).filter((g) => g % 4 !== 0),
      others: [{ table: 'notnull_cursor', counts: [['c', 0]] }],
    },
    estimate: {
      ddl: 'CREATE TABLE est (id int PRIMARY KEY)',
      unanalyzedIsUndefined: true,
      async fill() {
        await need(admin).unsafe('INSERT INTO est SELECT generate_series(1, 5000); ANALYZE est');
      },
      between: [4000, 6000],
    },
    bound: {
      afterCommit: 'at once',
      eventsDdl: `
      CREATE TABLE events (id serial PRIMARY KEY, updated_at timestamptz NOT NULL DEFAULT now(), note text);
      INSERT INTO events (note, updated_at) VALUES ('old', now() - interval '1 hour')`,
      lateGapMs: 20,
      expectHolder(held, session) {
        expect(held.map((w) => (w as unknown as { holder: { pid: number } }).holder.pid)).toContain(
          Number(session.id),
        );
        expect(held[0]!.message).toMatch(/pg_terminate_backend/);
      },
      sequenceDdl: 'CREATE TABLE seqt (id bigserial PRIMARY KEY, note text)',
      commitAfterMs: 100,
    },
    get privileges() {
      const r = role();
      return {
        account: r,
        createAccount: `CREATE ROLE ${r} LOGIN PASSWORD 'ro-pw'`,
        privTable: `CREATE TABLE priv (id int PRIMARY KEY, updated_at timestamptz NOT NULL);
        INSERT INTO priv VALUES (1, '2020-01-01+00'); GRANT SELECT ON priv TO ${r}`,
        grantSessions: `GRANT pg_read_all_stats TO ${r}`,
        secretTable: `CREATE TABLE secret (id int PRIMARY KEY)`,
        dropAccount: `DROP OWNED BY ${r}; DROP ROLE ${r}`,
        refusal: `GRANT pg_read_all_stats TO ${r};`,
        denied: `GRANT SELECT ON "public"."secret" TO "${r}";`,
      };
    },
    refusals: {
      wrongPassword:
        /^authentication failed for user "postgres" at 127\.0\.0\.1:\d+; check the password in the source URL$/,
      missingDatabaseTable: 'public.x',
      cursorDdl: `
      CREATE TABLE cur_checks (id int PRIMARY KEY, j json, updated_at timestamptz);
      CREATE TABLE no_pk (updated_at timestamptz NOT NULL, v int)`,
      unorderable: ['j'],
      unorderableSays: 'cannot be ordered',
      indexAdvice: 'CREATE INDEX CONCURRENTLY ON "public"."cur_checks" ("updated_at", "id");',
    },
    async drop() {
      await Promise.all(sources.splice(0).map((s) => s.close()));
      await admin?.end();
      await db?.drop();
    },
  };
}
