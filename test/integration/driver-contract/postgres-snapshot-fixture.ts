/**
 * PostgreSQL's side of the snapshot contract (snapshot-scenarios.ts): a fresh database on the
 * harness server, a CDC source and its snapshot source (2 connections) to take chunkers from,
 * key cases under an ICU collation whose order is not byte order, a chunk read's two watermarks
 * (low, then high, around `ready`), and the refusal of a table without a primary key.
 */
import fc from 'fast-check';
import postgres from 'postgres';
import { expect } from 'vitest';
import { SourceError } from '../../../shared/contracts/errors.js';
import type { SnapshotSource } from '../../../shared/contracts/snapshot.js';
import { PostgresCdcSource } from '../../../shared/drivers/postgres/cdc/source.js';
import { PostgresSource } from '../../../shared/drivers/postgres/source.js';
import { type FreshDatabase, freshPgDatabase } from '../../harness/pg.js';
import { CLOCK_MS } from './fixture.js';
import type { SnapshotFixture } from './snapshot-fixture.js';

/** The ICU collation of the snapshot key cases: its order is not byte order. */
export const ICU = 'en-US-x-icu';

/** Table `name`: 300 rows (id bigint 1..300) of a dozen wire types, analyzed. */
export const snapTypesTable = (name: string) => `
      CREATE TABLE ${name} (
        id bigint PRIMARY KEY, amount numeric(12,2), note text, at timestamptz, d date, j jsonb,
        b bytea, ai int[], u uuid, ok boolean, f double precision, iv interval);
      INSERT INTO ${name}
        SELECT g, g * 1.25, CASE WHEN g % 7 = 0 THEN NULL ELSE 'n' || g END,
               timestamptz '2024-01-01 00:00:00.123456+00' + g * interval '1 minute',
               date '2024-02-29' + g, jsonb_build_object('g', g), decode(lpad(to_hex(g), 4, '0'), 'hex'),
               ARRAY[g, NULL, -g]::int[], md5(g::text)::uuid, g % 2 = 0, g / 3.0, g * interval '1 second'
        FROM generate_series(1, 300) g;
      ANALYZE ${name};`;

export type PostgresSnapshotFixture = SnapshotFixture & {
  readonly db: FreshDatabase;
  readonly sql: postgres.Sql;
  /** The CDC source the chunkers come from, and its snapshot source (2 connections). */
  readonly cdc: PostgresCdcSource;
  readonly snap: SnapshotSource;
  /** A CDC source on `url` (the caller closes it). */
  cdcSource(url: string): PostgresCdcSource;
};

/** The Postgres snapshot fixture: database `pgsnapdrv_*` on the harness server; `setUp` creates it. */
export function postgresSnapshotFixture(): PostgresSnapshotFixture {
  let db: FreshDatabase | undefined;
  let sql: postgres.Sql | undefined;
  let cdc: PostgresCdcSource | undefined;
  let snap: SnapshotSource | undefined;
  const sources: PostgresSource[] = [];
  const need = <T>(x: T | undefined): T => {
    if (x === undefined) throw new Error('the Postgres snapshot fixture is not set up (beforeAll)');
    return x;
  };
  const cdcSource = (url: string) =>
    new PostgresCdcSource({
      url,
      sourceName: 'sources.src',
      connectTimeoutMs: 10_000,
      heartbeatMs: 60_000,
      clock: () => CLOCK_MS,
    });
  // Upper and lower case, accents, punctuation and digits: ICU orders them unlike bytes.
  const letters = fc.constantFrom('a', 'A', 'b', 'B', 'z', 'Z', 'é', 'E', 'e', 'ß', 'ä', '-', ' ', '1', '_');
  const text = fc.string({ unit: letters, minLength: 1, maxLength: 4 });
  const fixedText = ['a', 'B', 'b', 'A', 'ä', 'z', 'Z', 'é', 'e', '-a', 'a-', '1'];
  return {
    kind: 'postgres',
    keyCases: [
      {
        name: 'int key',
        table: 'snap_int',
        ddl: 'CREATE TABLE snap_int (id int PRIMARY KEY, v text)',
        keys: fc
          .uniqueArray(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 150 })
          .map((ks) => ks.map((k) => [k])),
        async fill(keys) {
          const s = need(sql);
          await s`TRUNCATE snap_int`;
          if (keys.length > 0)
            await s`INSERT INTO snap_int SELECT k, 'v' || k FROM unnest(${s.array(keys.map((k) => k[0] as number))}::int[]) AS k`;
        },
        sizes: fc.record({ rows: fc.integer({ min: 1, max: 40 }), limit: fc.integer({ min: 1, max: 60 }) }),
      },
      {
        name: `text key under ${ICU} (not byte order)`,
        table: 'snap_text',
        ddl: `CREATE TABLE snap_text (k text COLLATE "${ICU}" PRIMARY KEY, n int)`,
        keys: fc.uniqueArray(text, { maxLength: 120 }).map((ks) => ks.map((k) => [k])),
        async fill(keys) {
          const s = need(sql);
          await s`TRUNCATE snap_text`;
          if (keys.length > 0)
            await s`INSERT INTO snap_text SELECT k, 0 FROM unnest(${s.array(keys.map((k) => k[0] as string))}::text[]) AS k`;
        },
        sizes: fc.record({ rows: fc.integer({ min: 1, max: 30 }), limit: fc.integer({ min: 1, max: 40 }) }),
        fixed: {
          keys: fixedText.map((k) => [k]),
          rows: 3,
          limit: 2,
          expectOrder(dbOrder) {
            expect(dbOrder).not.toEqual([...fixedText].sort());
            expect(dbOrder.indexOf('a')).toBeLessThan(dbOrder.indexOf('B')); // 'B' < 'a' in bytes
          },
        },
      },
      {
        name: `composite (text ${ICU}, int) key: row comparison`,
        table: 'snap_comp',
        ddl: `CREATE TABLE snap_comp (t text COLLATE "${ICU}", n int, v text, PRIMARY KEY (t, n))`,
        keys: fc.uniqueArray(
          fc.tuple(fc.constantFrom('a', 'B', 'b', 'é', 'E', 'Z'), fc.integer({ min: -3, max: 3 })),
          {
            maxLength: 42,
            selector: ([s, n]) => `${s}\u0000${n}`,
          },
        ),
        async fill(keys) {
          const s = need(sql);
          await s`TRUNCATE snap_comp`;
          if (keys.length > 0)
            await s`INSERT INTO snap_comp SELECT a, b, 'x' FROM unnest(${s.array(keys.map((k) => k[0] as string))}::text[], ${s.array(keys.map((k) => k[1] as number))}::int[]) AS u(a, b)`;
        },
        sizes: fc.record({ rows: fc.integer({ min: 1, max: 10 }), limit: fc.integer({ min: 1, max: 12 }) }),
      },
    ],
    async setUp() {
      db = await freshPgDatabase('pgsnapdrv');
      sql = postgres(db.url, { max: 3, onnotice: () => undefined });
      const [icu] = await sql<
        { n: number }[]
      >`SELECT count(*)::int AS n FROM pg_collation WHERE collname = ${ICU}`;
      if (icu?.n !== 1) throw new Error(`the harness server has no collation ${ICU}`);
      cdc = cdcSource(db.url);
      snap = await cdc.openSnapshot({ connections: 2 });
    },
    get db() {
      return need(db);
    },
    get sql() {
      return need(sql);
    },
    get cdc() {
      return need(cdc);
    },
    get snap() {
      return need(snap);
    },
    cdcSource,
    schema: 'public',
    async exec(text) {
      await need(sql).unsafe(text);
    },
    async query(text) {
      return [...(await need(sql).unsafe(text))] as Record<string, unknown>[];
    },
    async tableOf(name) {
      const { ref, schema } = await need(cdc).introspect({ source: `public.${name}` });
      return { ref, schema, chunker: need(snap).chunker(ref, schema) };
    },
    incrementalSource() {
      const s = new PostgresSource({ url: need(db).url, lagMs: 0, clock: () => CLOCK_MS });
      sources.push(s);
      return s;
    },
    pageRetries: 0,
    estimatesUnanalyzed: false,
    chunkPage: {
      table: 'snap_types',
      ddl: snapTypesTable('snap_types'),
      rows: 300,
      expectWindow(w, ids) {
        expect(w.log).toEqual([`expect low ${ids.low}`, 'ready', `expect high ${ids.high}`]);
      },
    },
    noKey: {
      table: 'snap_nopk',
      ddl: 'CREATE TABLE snap_nopk (a int, b text)',
      error: SourceError,
      code: 'SNAPSHOT_KEY_MISSING',
      says: [/public\.snap_nopk has no primary key/, /snapshot: never/],
    },
    async drop() {
      await Promise.all(sources.splice(0).map((s) => s.close()));
      await snap?.close();
      await cdc?.close();
      await sql?.end();
      await db?.drop();
    },
  };
}
