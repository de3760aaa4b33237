/**
 * Must-shows of the Postgres CDC reader on the real harness PostgreSQL:
 *   1. one table with a column of every type in docs/types.md, captured by CDC and synced by the
 *      incremental path: both lakes hold the same values and Parquet types (also under a
 *      non-UTC database TimeZone);
 *   2. unchanged TOAST values: filled from the old tuple (REPLICA IDENTITY FULL) or reread;
 *   3. a table without a primary key: refused with the REPLICA IDENTITY FULL fix, captured after it;
 *   4. a primary-key change as a delete plus an insert;
 *   5. interleaved transactions over several tables: `__pos` order is commit order;
 *   6. TRUNCATE under onTruncate record / fail;
 *   7. ADD COLUMN mid-stream goes on, DROP COLUMN stops with SCHEMA_CHANGED;
 *   8. a slot dropped while stopped: POSITION_LOST and a gap event in the state.
 * 6 and 8 are the capture scenarios every driver runs (./cdc-capture/scenarios.ts) on the Postgres
 * fixture (./cdc-capture/postgres-fixture.ts).
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Spec } from '../../shared/config/spec.js';
import { PostgresCdcReader } from '../../shared/drivers/postgres/cdc/reader.js';
import {
  type CdcTableSpec,
  captureFailure as failure,
  lakeDiffs,
  lakeLatest,
  lakeRows,
  lakeTyped,
  loadCdcState as loadState,
  startedReaders,
} from '../harness/cdc-capture.js';
import { type FreshDatabase, freshPgDatabase } from '../harness/pg.js';
import { pgCdcSpec, pgClient, startCapture } from '../harness/pg-cdc.js';
import { postgresCaptureFixture } from './cdc-capture/postgres-fixture.js';
import { positionLostScenario, truncateScenarios } from './cdc-capture/scenarios.js';
import { incrementalCopy } from './incremental/fixture.js';

// Every PostgresCdcReader this file's captures start, to read its `seen` counters.
const readers = startedReaders(PostgresCdcReader);

const T = { timeout: 120_000 };

let db: FreshDatabase;
beforeAll(async () => {
  db = await freshPgDatabase('pgcdcval');
});
afterAll(() => db?.drop());

/** A capture spec with a slot and publication of its own (tests share the database). */
function cdcSpec(url: string, name: string, tables: readonly CdcTableSpec[]): { spec: Spec; dir: string } {
  return pgCdcSpec(url, tables, { slot: name, publication: name });
}

function readerOf(slot: string): PostgresCdcReader {
  const r = readers.filter((x) => (x as unknown as { opts: { slot: string } }).opts.slot === slot).at(-1);
  if (!r) throw new Error(`no reader of slot ${slot} was started`);
  return r;
}

// ---------------------------------------------------------------------------------------------
// 1. Every type, both paths

const EVERY_TYPE_DDL = `
  CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
  CREATE DOMAIN posint AS int CHECK (VALUE > 0);
  CREATE TABLE public.everything (
    seq bigserial PRIMARY KEY,
    i2 smallint, i4 integer, i8 bigint,
    n10_2 numeric(10,2), n38_10 numeric(38,10), n38_0 numeric(38,0), nu numeric,
    r real, d double precision,
    b boolean,
    t text, vc varchar(20), ch char(4), nm name,
    by bytea, u uuid, j json, jb jsonb,
    e mood, dom posint,
    dt date, ts timestamp, tstz timestamptz, tm time, tmtz timetz, iv interval,
    ai int[], ai2 smallint[], ai8 bigint[], at text[], ar real[], ad double precision[],
    an numeric(12,3)[], anu numeric[], ab boolean[], aby bytea[], au uuid[], aj json[], ajb jsonb[],
    adt date[], ats timestamp[], atstz timestamptz[], aiv interval[], ainet inet[], aenum mood[],
    amulti int[][],
    ip inet, ci cidr, mac macaddr, mac8 macaddr8, m money, bi bit(4), vb varbit,
    tsv tsvector, rng int4range, trng tstzrange, pt point
  );`;

const EVERY_TYPE_COLUMNS = [
  'i2',
  'i4',
  'i8',
  'n10_2',
  'n38_10',
  'n38_0',
  'nu',
  'r',
  'd',
  'b',
  't',
  'vc',
  'ch',
  'nm',
  'by',
  'u',
  'j',
  'jb',
  'e',
  'dom',
  'dt',
  'ts',
  'tstz',
  'tm',
  'tmtz',
  'iv',
  'ai',
  'ai2',
  'ai8',
  'at',
  'ar',
  'ad',
  'an',
  'anu',
  'ab',
  'aby',
  'au',
  'aj',
  'ajb',
  'adt',
  'ats',
  'atstz',
  'aiv',
  'ainet',
  'aenum',
  'amulti',
  'ip',
  'ci',
  'mac',
  'mac8',
  'm',
  'bi',
  'vb',
  'tsv',
  'rng',
  'trng',
  'pt',
] as const;

/** Rows as SQL value lists in EVERY_TYPE_COLUMNS order. */
const EVERY_TYPE_ROWS: string[][] = [
  [
    '1',
    '2',
    '3',
    '12.34',
    `'${'9'.repeat(28)}.${'9'.repeat(10)}'`,
    `'${'9'.repeat(38)}'`,
    `'123456789012345678901234567890123456789012345.678901234567890123'`,
    '0.1',
    '0.1',
    'true',
    `'héllo 😀 "quoted" \\ back\nline\ttab'`,
    `'varchar'`,
    `'c'`,
    `'a_name'`,
    `'\\x00ff01'::bytea`,
    `'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'`,
    `'{"b": [1, 2],  "a": 12345678901234567890}'`,
    `'{"b": [1, 2],  "a": 12345678901234567890}'`,
    `'happy'`,
    '7',
    `'2024-02-29'`,
    `'2024-02-29 12:34:56.789012'`,
    `'2024-02-29 12:34:56.789012+05:45'`,
    `'13:45:12.345678'`,
    `'13:45:12.345678+05:30'`,
    `'1 year 2 mons 3 days 04:05:06.7'`,
    `'{1,NULL,3}'`,
    `'{-32768,NULL,32767}'`,
    `'{9223372036854775807,NULL,-9223372036854775808}'`,
    `'{a,NULL,"😀","with,comma","",NULL}'`,
    `'{0.1,NULL,NaN,Infinity,-Infinity}'`,
    `'{0.1,NULL,NaN,-0,5e-324}'`,
    `'{1.5,NULL,-2.125}'`,
    `'{1e-50,NULL,NaN,123456789012345678901234567890123456789012}'`,
    `'{t,NULL,f}'`,
    `ARRAY['\\x00'::bytea, NULL, '\\xdeadbeef'::bytea]`,
    `'{A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11,NULL}'`,
    `ARRAY['{"x": 1}'::json, NULL]`,
    `ARRAY['{"x": [1, 2]}'::jsonb, NULL]`,
    `'{1969-12-31,NULL,infinity,-infinity}'`,
    `'{"1969-12-31 23:59:59.999999",NULL,infinity}'`,
    `'{"1969-12-31 23:59:59.999999+00",NULL,-infinity}'`,
    `'{"1 day",NULL,"-1 mons"}'`,
    `'{10.0.0.1,NULL}'`,
    `'{sad,NULL,happy}'`,
    `'{{1,2},{3,NULL}}'`,
    `'192.168.0.1/24'`,
    `'10.0.0.0/8'`,
    `'08:00:2b:01:02:03'`,
    `'08:00:2b:01:02:03:04:05'`,
    `'12.34'`,
    `B'1010'`,
    `B'101'`,
    `'a fat cat'::tsvector`,
    `'[1,5)'`,
    `'[2024-01-01 00:00:00+00,2024-06-01 12:00:00.5+02)'`,
    `'(1.5,-2)'`,
  ],
  [
    '-32768',
    '-2147483648',
    '-9223372036854775808',
    '-99999999.99',
    `'-${'9'.repeat(28)}.${'9'.repeat(10)}'`,
    `'-${'9'.repeat(38)}'`,
    `'NaN'`,
    `'NaN'`,
    `'NaN'`,
    'false',
    `''`,
    `''`,
    `'abcd'`,
    `''`,
    `''::bytea`,
    `'00000000-0000-0000-0000-000000000000'`,
    `'[]'`,
    `'{}'`,
    `'sad'`,
    '2147483647',
    `'infinity'`,
    `'infinity'`,
    `'infinity'`,
    `'24:00:00'`,
    `'00:00:00-14'`,
    `'-1 days'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'::1'`,
    `'::/0'`,
    `'ff:ff:ff:ff:ff:ff'`,
    `'ff:ff:ff:ff:ff:ff:ff:ff'`,
    `'-92233720368547758.08'`,
    `B'0000'`,
    `B''`,
    `''::tsvector`,
    `'empty'`,
    `'(,)'`,
    `'(0,0)'`,
  ],
  [
    '32767',
    '2147483647',
    '9223372036854775807',
    '99999999.99',
    `'-0.0000000001'`,
    '0',
    `'Infinity'`,
    `'Infinity'`,
    `'-Infinity'`,
    'true',
    `'x'`,
    `'${'v'.repeat(20)}'`,
    `'ab'`,
    `'${'n'.repeat(63)}'`,
    `'\\xffffffff'::bytea`,
    `'ffffffff-ffff-ffff-ffff-ffffffffffff'`,
    `'null'`,
    `'null'`,
    `'ok'`,
    '1',
    `'-infinity'`,
    `'-infinity'`,
    `'-infinity'`,
    `'00:00:00'`,
    `'23:59:59.999999+14'`,
    `'P1Y2M3DT4H5M6.7S'`,
    `'[0:1]={7,8}'`,
    `'{NULL}'`,
    `'{NULL}'`,
    `'{NULL}'`,
    `'{NULL}'`,
    `'{Infinity}'`,
    `'{NULL}'`,
    `'{-Infinity}'`,
    `'{NULL}'`,
    `'{NULL}'`,
    `'{NULL}'`,
    `'{NULL}'`,
    `'{NULL}'`,
    `'{NULL}'`,
    `'{NULL}'`,
    `'{NULL}'`,
    `'{NULL}'`,
    `'{NULL}'`,
    `'{NULL}'`,
    `'{{NULL}}'`,
    `'255.255.255.255'`,
    `'2001:db8::/32'`,
    `'00:00:00:00:00:00'`,
    `'00:00:00:00:00:00:00:00'`,
    `'92233720368547758.07'`,
    `B'1111'`,
    `B'1111111111111111111111'`,
    `'z:1A'::tsvector`,
    `'[-2147483648,2147483647)'`,
    `'[-infinity,infinity]'`,
    `'(-1e300,1e300)'`,
  ],
  [
    '0',
    '0',
    '9007199254740993',
    '0.00',
    `'0.0000000000'`,
    '1',
    `'-0.000000000000000000000000000000000000000000001'`,
    `'-0'`,
    `'-0'`,
    'false',
    `'日本語'`,
    `' padded '`,
    `' c'`,
    `'x'`,
    `'\\x'::bytea`,
    `'123e4567-e89b-12d3-a456-426614174000'`,
    `'{"k": "v\\u00e9"}'`,
    `'{"k": "v\\u00e9", "a": 1.0e1}'`,
    `'happy'`,
    '42',
    `'1969-12-31'`,
    `'1900-01-01 00:00:00.000001'`,
    `'1960-06-15 10:20:30.123456+02'`,
    `'00:00:00.000001'`,
    `'12:00:00+00'`,
    `'0'`,
    `'{-1,0,1}'`,
    `'{0}'`,
    `'{0}'`,
    `'{"NULL",null}'`,
    `'{1e-45,3.4028235e38}'`,
    `'{1.7976931348623157e308}'`,
    `'{0.000}'`,
    `'{Infinity}'`,
    `'{f}'`,
    `'{"\\\\x"}'`,
    `'{}'`,
    `'{}'`,
    `'{}'`,
    `'{"0044-03-15 BC"}'`,
    `'{"0044-03-15 12:00:00 BC"}'`,
    `'{"1900-01-01 00:00:00.000001+00"}'`,
    `'{P1D}'`,
    `'{::1}'`,
    `'{ok}'`,
    `'{{1},{2}}'`,
    `'10.1.2.3'`,
    `'10.1.2.0/24'`,
    `'01:02:03:04:05:06'`,
    `'01:02:03:04:05:06:07:08'`,
    `'0'`,
    `B'0101'`,
    `B'0'`,
    `'a:1 b:2'::tsvector`,
    `'[0,1]'`,
    `'[1900-01-01 00:00:00+00,)'`,
    `'(0.1,0.2)'`,
  ],
  // A row NULL in every nullable column (dom and the arrays included).
  EVERY_TYPE_COLUMNS.map(() => 'NULL'),
];

describe.each([
  { zone: undefined, label: 'server default TimeZone' },
  { zone: 'Asia/Kolkata', label: 'database TimeZone Asia/Kolkata' },
])('every type, CDC lake == incremental lake ($label)', ({ zone }) => {
  let tdb: FreshDatabase;
  beforeAll(async () => {
    tdb = await freshPgDatabase('pgcdctypes');
    if (zone) {
      const admin = pgClient(tdb.url);
      await admin.unsafe(`ALTER DATABASE "${tdb.name}" SET TimeZone = '${zone}'`);
      await admin.end();
    }
  });
  afterAll(() => tdb?.drop());

  it('every column of every row and every Parquet type agree', T, async () => {
    const sql = pgClient(tdb.url);
    try {
      if (zone) {
        const [row] = await sql<{ tz: string }[]>`SELECT current_setting('TimeZone') AS tz`;
        expect(row!.tz).toBe(zone);
      }
      await sql.unsafe(EVERY_TYPE_DDL);
      const { spec, dir } = cdcSpec(tdb.url, 'types', [{ table: 'public.everything' }]);
      const cap = startCapture(spec);
      try {
        await cap.until((r) => r['public.everything'] !== undefined, 60_000);
        for (const values of EVERY_TYPE_ROWS)
          await sql.unsafe(
            `INSERT INTO public.everything (${EVERY_TYPE_COLUMNS.join(', ')}) VALUES (${values.join(', ')})`,
          );
        await cap.until((r) => (r['public.everything'] ?? 0) >= EVERY_TYPE_ROWS.length, 60_000);
      } finally {
        await cap.stop();
      }

      // The incremental path over the same table, into a lake of its own.
      const inc = await incrementalCopy('postgres', tdb.url, 'public.everything', 'seq');
      const summary = inc.summary;
      expect(summary.rows).toBe(EVERY_TYPE_ROWS.length);

      // Every version (no key twice), as VARCHAR by `seq`, and the DuckDB types.
      const lakeTable = (lakeDir: string) =>
        lakeTyped(join(lakeDir, 'public.everything', '*.parquet'), 'seq', EVERY_TYPE_COLUMNS);
      const cdc = await lakeTable(join(dir, 'lake'));
      const incLake = await lakeTable(inc.lakeDir);
      expect(cdc.types).toEqual(incLake.types);
      expect(Object.keys(cdc.types)).toEqual(['seq', ...EVERY_TYPE_COLUMNS]);
      expect([...cdc.rows.keys()]).toEqual([...incLake.rows.keys()]);
      expect(cdc.rows.size).toBe(EVERY_TYPE_ROWS.length);
      const names = { key: 'seq', a: 'cdc', b: 'incremental' };
      expect(lakeDiffs(cdc, incLake, EVERY_TYPE_COLUMNS, names)).toEqual([]);
      // The NULL row is NULL everywhere in both lakes.
      const nullRow = cdc.rows.get(String(EVERY_TYPE_ROWS.length))!;
      for (const col of EVERY_TYPE_COLUMNS) expect(nullRow[col], col).toBeNull();
    } finally {
      await sql.end();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// 2. TOAST

describe('unchanged TOAST values', () => {
  it(
    'are filled from the old tuple (FULL) and reread (default); an updated-then-deleted row ends deleted',
    T,
    async () => {
      const sql = pgClient(db.url);
      try {
        for (const name of ['toast_full', 'toast_def']) {
          await sql.unsafe(`CREATE TABLE public.${name} (id int PRIMARY KEY, big text, small int)`);
          await sql.unsafe(`ALTER TABLE public.${name} ALTER COLUMN big SET STORAGE EXTERNAL`);
        }
        await sql`ALTER TABLE public.toast_full REPLICA IDENTITY FULL`;
        const big = new Map([1, 2, 3].map((id) => [id, randomBytes(12 * 1024).toString('base64')]));
        const { spec, dir } = cdcSpec(db.url, 'toast', [
          { table: 'public.toast_full' },
          // append: the sink keeps every version (upsert collapses a batch to the last change
          // per key), so the update version of a row deleted before the flush is visible.
          { table: 'public.toast_def', writeMode: 'append' },
        ]);
        const cap = startCapture(spec);
        try {
          await cap.until(
            (r) => r['public.toast_full'] !== undefined && r['public.toast_def'] !== undefined,
            60_000,
          );
          for (const name of ['toast_full', 'toast_def'])
            for (const [id, text] of big)
              await sql.unsafe(`INSERT INTO public.${name} VALUES ($1, $2, 0)`, [id, text]);
          // The value really is stored out of line (TOASTed).
          const [stored] = await sql<
            { n: number }[]
          >`SELECT pg_column_size(big)::int AS n FROM toast_def WHERE id = 1`;
          expect(stored!.n).toBeGreaterThanOrEqual(10 * 1024);
          await cap.until((r) => r['public.toast_full'] === 3 && r['public.toast_def'] === 3, 60_000);
          const reader = readerOf('toast');
          const before = { ...reader.seen };
          await sql`UPDATE toast_full SET small = 1 WHERE id = 1`;
          await cap.until((r) => r['public.toast_full'] === 4, 60_000);
          expect(reader.seen.unchangedToast).toBeGreaterThan(before.unchangedToast);
          expect(reader.seen.filledFromOld).toBeGreaterThan(before.filledFromOld);
          const mid = { ...reader.seen };
          await sql`UPDATE toast_def SET small = 1 WHERE id = 1`;
          // Updated, then deleted before the flush rereads it: the reread finds no row.
          await sql.begin(async (tx) => {
            await tx`UPDATE toast_def SET small = 2 WHERE id = 2`;
            await tx`DELETE FROM toast_def WHERE id = 2`;
          });
          await cap.until((r) => r['public.toast_def'] === 6, 60_000);
          expect(reader.seen.unchangedToast).toBeGreaterThan(mid.unchangedToast);
          expect(reader.seen.reread).toBeGreaterThan(mid.reread);
        } finally {
          await cap.stop();
        }

        const full = await lakeRows(dir, 'public.toast_full', ['id', 'big', 'small', '__op']);
        const fullUpdate = full.find((r) => r.__op === 'u' && r.id === '1');
        expect(fullUpdate?.small).toBe('1');
        expect(fullUpdate?.big).toBe(big.get(1));

        const def = await lakeRows(dir, 'public.toast_def', ['id', 'big', 'small', '__op']);
        const defUpdate = def.find((r) => r.__op === 'u' && r.id === '1');
        expect(defUpdate?.small).toBe('1');
        expect(defUpdate?.big).toBe(big.get(1));
        const gone = def.filter((r) => r.id === '2').map((r) => ({ op: r.__op, big: r.big, small: r.small }));
        expect(gone).toEqual([
          { op: 'c', big: big.get(2), small: '0' },
          { op: 'u', big: null, small: '2' },
          { op: 'd', big: null, small: null },
        ]);
        // Latest state exact.
        for (const name of ['toast_full', 'toast_def']) {
          const source = await sql.unsafe<{ id: string; big: string; small: string }[]>(
            `SELECT id::text, big, small::text FROM public.${name} ORDER BY id`,
          );
          const lake = await lakeLatest(dir, `public.${name}`, 'id', ['big', 'small']);
          expect([...lake.keys()].sort()).toEqual(source.map((s) => s.id));
          for (const s of source) {
            expect(lake.get(s.id)!.big).toBe(s.big);
            expect(lake.get(s.id)!.small).toBe(s.small);
          }
        }
      } finally {
        await sql.end();
      }
    },
  );
});

// ---------------------------------------------------------------------------------------------
// 3. No primary key

describe('a table without a primary key', () => {
  it(
    'is refused under the default identity with the REPLICA IDENTITY FULL fix, and not published',
    T,
    async () => {
      const sql = pgClient(db.url);
      try {
        await sql`CREATE TABLE public.nopk (a int, b text)`;
        await sql`INSERT INTO nopk VALUES (1, 'one'), (2, 'two')`;
        const { spec } = cdcSpec(db.url, 'nopk_refused', [{ table: 'public.nopk', writeMode: 'append' }]);
        const cap = startCapture(spec);
        const e = await failure(cap, 30_000);
        expect(e).toMatchObject({ code: 'CDC_NO_REPLICA_IDENTITY' });
        expect(String((e as Error).message)).toMatch(/ALTER TABLE .*nopk.* REPLICA IDENTITY FULL/);
        // Refused before publishing: the application's own writes still work.
        await sql`UPDATE nopk SET b = 'uno' WHERE a = 1`;
        await sql`DELETE FROM nopk WHERE a = 2`;
      } finally {
        await sql.end();
      }
    },
  );

  it(
    'is captured (append) after REPLICA IDENTITY FULL; the application still updates and deletes it',
    T,
    async () => {
      const sql = pgClient(db.url);
      try {
        await sql`CREATE TABLE public.nopk_full (a int, b text)`;
        await sql`ALTER TABLE public.nopk_full REPLICA IDENTITY FULL`;
        const { spec, dir } = cdcSpec(db.url, 'nopk_full', [
          { table: 'public.nopk_full', writeMode: 'append' },
        ]);
        const cap = startCapture(spec);
        try {
          await cap.until((r) => r['public.nopk_full'] !== undefined, 60_000);
          await sql`INSERT INTO nopk_full VALUES (1, 'one'), (2, 'two'), (3, 'three')`;
          const updated = await sql`UPDATE nopk_full SET b = 'uno' WHERE a = 1`;
          expect(updated.count).toBe(1);
          const deleted = await sql`DELETE FROM nopk_full WHERE a = 2`;
          expect(deleted.count).toBe(1);
          await cap.until((r) => (r['public.nopk_full'] ?? 0) >= 5, 60_000);
        } finally {
          await cap.stop();
        }
        const rows = await lakeRows(dir, 'public.nopk_full', ['a', 'b', '__op']);
        expect(rows).toEqual([
          { a: '1', b: 'one', __op: 'c' },
          { a: '2', b: 'two', __op: 'c' },
          { a: '3', b: 'three', __op: 'c' },
          { a: '1', b: 'uno', __op: 'u' },
          { a: '2', b: 'two', __op: 'd' },
        ]);
      } finally {
        await sql.end();
      }
    },
  );
});

// ---------------------------------------------------------------------------------------------
// 4. Key change

describe('a primary-key change', () => {
  it('is a delete of the old key and an insert of the new one', T, async () => {
    const sql = pgClient(db.url);
    try {
      await sql`CREATE TABLE public.kc (id int PRIMARY KEY, v text)`;
      const { spec, dir } = cdcSpec(db.url, 'kc', [{ table: 'public.kc' }]);
      const cap = startCapture(spec);
      try {
        await cap.until((r) => r['public.kc'] !== undefined, 60_000);
        await sql`INSERT INTO kc SELECT g, 'v' || g FROM generate_series(1, 5) g`;
        await sql`UPDATE kc SET id = id + 1000 WHERE id <= 3`;
        await cap.until((r) => (r['public.kc'] ?? 0) >= 5 + 6, 60_000);
        expect(readerOf('kc').seen.keyChanges).toBe(3);
      } finally {
        await cap.stop();
      }
      // The upsert table is a current state (Iceberg, decision 0026): the old keys' rows are
      // deleted, the new keys' rows inserted with the old values.
      const lake = await lakeLatest(dir, 'public.kc', 'id', ['v']);
      expect([...lake.keys()].sort()).toEqual(['1001', '1002', '1003', '4', '5']);
      for (const id of [1, 2, 3])
        expect(lake.get(String(id + 1000))?.v, `insert of ${id + 1000}`).toBe(`v${id}`);
    } finally {
      await sql.end();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// 5. Interleaved transactions

describe('interleaved transactions over several tables', () => {
  it('have __pos order equal to commit order', T, async () => {
    const sql = pgClient(db.url);
    const c1 = pgClient(db.url);
    const c2 = pgClient(db.url);
    const s1 = await c1.reserve();
    const s2 = await c2.reserve();
    try {
      await sql`CREATE TABLE public.ia (id serial PRIMARY KEY, txn text)`;
      await sql`CREATE TABLE public.ib (id serial PRIMARY KEY, txn text)`;
      const { spec, dir } = cdcSpec(db.url, 'inter', [{ table: 'public.ia' }, { table: 'public.ib' }]);
      const cap = startCapture(spec);
      const commits: { txn: string; lsn: string }[] = [];
      let rows = 0;
      try {
        await cap.until((r) => r['public.ia'] !== undefined && r['public.ib'] !== undefined, 60_000);
        const commit = async (s: typeof s1, txn: string) => {
          await s.unsafe('COMMIT');
          const [row] = await s.unsafe<{ lsn: string }[]>('SELECT pg_current_wal_lsn()::text AS lsn');
          commits.push({ txn, lsn: row!.lsn });
        };
        for (let round = 0; round < 4; round++) {
          const x = `r${round}x`;
          const y = `r${round}y`;
          await s1.unsafe('BEGIN');
          await s1.unsafe(`INSERT INTO ia (txn) VALUES ('${x}')`);
          await s2.unsafe('BEGIN');
          await s2.unsafe(`INSERT INTO ib (txn) VALUES ('${y}')`);
          await s2.unsafe(`INSERT INTO ia (txn) VALUES ('${y}')`);
          await s1.unsafe(`INSERT INTO ib (txn) VALUES ('${x}'), ('${x}')`);
          await s2.unsafe(`INSERT INTO ib (txn) VALUES ('${y}')`);
          await s1.unsafe(`INSERT INTO ia (txn) VALUES ('${x}')`);
          rows += 7;
          // Alternate which of the two commits first; the one begun first commits second in odd rounds.
          if (round % 2 === 0) {
            await commit(s2, y);
            await commit(s1, x);
          } else {
            await commit(s1, x);
            await commit(s2, y);
          }
        }
        await cap.until((r) => (r['public.ia'] ?? 0) + (r['public.ib'] ?? 0) >= rows, 60_000);
      } finally {
        await cap.stop();
      }
      const inst = await DuckDBInstance.create(':memory:');
      const conn = await inst.connect();
      try {
        const r = await conn.runAndReadAll(
          `SELECT txn, __pos FROM (
             SELECT txn, __pos FROM read_parquet('${join(dir, 'lake', 'public.ia', '*.parquet')}')
             UNION ALL
             SELECT txn, __pos FROM read_parquet('${join(dir, 'lake', 'public.ib', '*.parquet')}'))
           ORDER BY __pos`,
        );
        const order = r.getRows().map(([txn]) => String(txn));
        expect(order.length).toBe(rows);
        // Each transaction's rows are contiguous, and transactions come in commit order.
        const runs = order.filter((t, i) => i === 0 || order[i - 1] !== t);
        expect(runs).toEqual(commits.map((c) => c.txn));
        // The recorded WAL positions after each COMMIT grow in that order too.
        const lsns = commits.map(
          (c) => BigInt(`0x${c.lsn.split('/')[0]}`) * 2n ** 32n + BigInt(`0x${c.lsn.split('/')[1]}`),
        );
        for (let i = 1; i < lsns.length; i++) expect(lsns[i]! > lsns[i - 1]!).toBe(true);
      } finally {
        conn.closeSync();
      }
    } finally {
      s1.release();
      s2.release();
      await c1.end();
      await c2.end();
      await sql.end();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// 6. TRUNCATE

const captures = postgresCaptureFixture(() => db);

describe('TRUNCATE', () => {
  truncateScenarios(captures);
});

// ---------------------------------------------------------------------------------------------
// 7. Schema change mid-stream

describe('a schema change mid-stream', () => {
  it(
    'ADD COLUMN goes on with the column in new objects; DROP COLUMN stops with SCHEMA_CHANGED',
    T,
    async () => {
      const sql = pgClient(db.url);
      try {
        await sql`CREATE TABLE public.sc (id int PRIMARY KEY, a text)`;
        const { spec, dir } = cdcSpec(db.url, 'sc', [{ table: 'public.sc' }]);
        const cap = startCapture(spec);
        try {
          await cap.until((r) => r['public.sc'] !== undefined, 60_000);
          await sql`INSERT INTO sc VALUES (1, 'one')`;
          await cap.until((r) => r['public.sc'] === 1, 60_000);
          await sql`ALTER TABLE sc ADD COLUMN extra int`;
          await sql`INSERT INTO sc VALUES (2, 'two', 22)`;
          await cap.until((r) => r['public.sc'] === 2, 60_000);
          const rows = await lakeRows(dir, 'public.sc', ['id', 'a', 'extra']);
          expect(rows).toEqual([
            { id: '1', a: 'one', extra: null },
            { id: '2', a: 'two', extra: '22' },
          ]);
          await sql`ALTER TABLE sc DROP COLUMN a`;
          await sql`INSERT INTO sc VALUES (3, 33)`;
          const e = await failure(cap);
          expect(e).toMatchObject({ code: 'SCHEMA_CHANGED' });
        } finally {
          await cap.stop().catch(() => undefined);
        }
        const state = await loadState(spec);
        expect(state.events?.some((x) => x.kind === 'schema' && x.table === 'public.sc')).toBe(true);
      } finally {
        await sql.end();
      }
    },
  );
});

// ---------------------------------------------------------------------------------------------
// 8. Slot dropped while stopped

describe('a slot dropped while the capture is stopped', () => {
  positionLostScenario(captures);
});
