/**
 * Pages bounded by bytes (IncrementalPage.pageBytes / maxRowBytes) on both drivers, against the
 * real harness servers: the row path and the batch path close every page after the same row (the
 * first that brings the page's data to the budget) and stay byte-identical; the keyset walk reads
 * every row exactly once across byte-closed pages (so the next page starts after the last row
 * kept, on a connection that was cut short mid-statement); a row larger than the budget comes
 * alone in its page or last in one; a row over the cap fails with RowTooLargeError naming its
 * key and size, and the source keeps working after it.
 *
 * Values are built server-side (repeat of md5 text) so the tables are quick to fill.
 */
import { type RecordBatch, Table, tableToIPC } from 'apache-arrow';
import mysql from 'mysql2/promise';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RowTooLargeError } from '../../shared/contracts/errors.js';
import type { TableRef } from '../../shared/contracts/source.js';
import { encodeRows, rowBytes } from '../../shared/dataplane/encoder.js';
import { Op } from '../../shared/dataplane/metadata.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { MysqlSource } from '../../shared/drivers/mysql/source.js';
import { PostgresSource } from '../../shared/drivers/postgres/source.js';
import { incrementalPosPrefix } from '../../shared/position/position.js';
import { type FreshDatabase, freshMysqlDatabase } from '../harness/mysql.js';
import { freshPgDatabase } from '../harness/pg.js';

const CLOCK_MS = 1_700_000_000_123;
const INGEST_NS = BigInt(CLOCK_MS) * 1_000_000n;
const KiB = 1024;
const MiB = 1024 * 1024;
/** The budget of the walks: small, so a few hundred KiB per row split pages. */
const BUDGET = 700 * KiB;
const ROWS = 48;
/**
 * Row i's value size in bytes (0 = NULL): mostly 100-300 KiB, every 9th row 1.5 MiB (over the
 * budget on its own), a few tiny ones; the cursor has ties (two rows per second).
 */
const size = (i: number): number =>
  i % 11 === 0 ? 0 : i % 9 === 0 ? 1.5 * MiB : i % 5 === 0 ? 32 : (100 + ((i * 37) % 200)) * KiB;

type AnySource = PostgresSource | MysqlSource;

function ipc(record: RecordBatch): Buffer {
  return Buffer.from(tableToIPC(new Table(record)));
}

interface Walk {
  readonly pages: Record<string, unknown>[][];
}

/**
 * Walks the table with both paths in lockstep under `pageBytes`: same `next` and `more`, and
 * byte-identical batches (batch path vs encodeRows of the row path's rows), page by page.
 */
async function walkBoth(
  src: AnySource,
  ref: TableRef,
  schema: Schema,
  pageSize: number,
  pageBytes: number,
): Promise<Walk> {
  const pages: Record<string, unknown>[][] = [];
  let after = '';
  for (let seq = 1; seq < 1000; seq++) {
    const posPrefix = incrementalPosPrefix(seq, 1);
    const req = { table: ref, cursorColumn: 'u', after, pageSize, pageBytes, posPrefix, ordinalBase: 0 };
    const r = await src.incremental(req);
    const b = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
    expect(b.next).toBe(r.next);
    expect(b.more).toBe(r.more);
    if (r.page.length === 0) {
      expect(b.page).toBeUndefined();
      return { pages };
    }
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
    pages.push(r.page);
    after = r.next;
    if (!r.more) return { pages };
  }
  throw new Error('the walk did not end');
}

/** Each page but the last closes at pageSize rows or at the first row that reaches pageBytes. */
function expectClosedByTheRule(
  schema: Schema,
  pages: Record<string, unknown>[][],
  pageSize: number,
  pageBytes: number,
) {
  pages.forEach((page, p) => {
    const sizes = page.map((row) => rowBytes(schema, row));
    const total = sizes.reduce((a, b) => a + b, 0);
    // No row before the last reached the budget: the page did not close too late ...
    expect(total - sizes.at(-1)!, `page ${p}`).toBeLessThan(pageBytes);
    // ... nor too early.
    if (p < pages.length - 1 && page.length < pageSize)
      expect(total, `page ${p}`).toBeGreaterThanOrEqual(pageBytes);
  });
}

/** The checks every driver must pass, on a table `t(id, u, v)` filled with `size(i)` values. */
function byteBudgetSuite(
  name: string,
  open: () => Promise<{ src: () => AnySource; qualified: (t: string) => string }>,
) {
  describe(name, () => {
    let ctx: Awaited<ReturnType<typeof open>>;
    beforeAll(async () => {
      ctx = await open();
    });

    it('closes pages at the first row reaching pageBytes, the same row on both paths, reading every row once', async () => {
      const src = ctx.src();
      const { ref, schema } = await src.introspect({ source: ctx.qualified('t'), cursorColumn: 'u' });
      for (const pageSize of [1000, 3]) {
        const { pages } = await walkBoth(src, ref, schema, pageSize, BUDGET);
        expectClosedByTheRule(schema, pages, pageSize, BUDGET);
        const ids = pages.flat().map((r) => Number(r.id));
        expect(ids).toEqual(Array.from({ length: ROWS }, (_, i) => i + 1));
        const lengths = pages.flat().map((r) => (r.v === null ? 0 : String(r.v).length));
        expect(lengths).toEqual(Array.from({ length: ROWS }, (_, i) => size(i + 1)));
        if (pageSize === 1000) {
          // The budget, not the row count, split the table.
          expect(pages.length).toBeGreaterThanOrEqual(
            Math.floor(lengths.reduce((a, b) => a + b, 0) / (BUDGET + 1.5 * MiB)),
          );
          expect(pages.length).toBeGreaterThan(5);
          // A row larger than the budget is alone in its page when it comes first in it.
          for (const page of pages) {
            const big = page.findIndex((r) => r.v !== null && String(r.v).length > BUDGET);
            if (big >= 0) expect(big).toBe(page.length - 1);
          }
        }
      }
    });

    it('without pageBytes, pages close by rows only', async () => {
      const src = ctx.src();
      const { ref, schema } = await src.introspect({ source: ctx.qualified('t'), cursorColumn: 'u' });
      const page = await src.incrementalBatch({
        table: ref,
        cursorColumn: 'u',
        after: '',
        pageSize: 1000,
        posPrefix: incrementalPosPrefix(1, 1),
        ordinalBase: 0,
        schema,
        writeMode: 'append',
      });
      expect(page.page!.record.numRows).toBe(ROWS);
      expect(page.more).toBe(false);
    });

    it('refuses a row over maxRowBytes with its key and size on both paths, and keeps working', async () => {
      const src = ctx.src();
      const { ref, schema } = await src.introspect({ source: ctx.qualified('t'), cursorColumn: 'u' });
      const req = {
        table: ref,
        cursorColumn: 'u',
        after: '',
        pageSize: 1000,
        pageBytes: 64 * MiB,
        maxRowBytes: MiB,
        posPrefix: incrementalPosPrefix(1, 1),
        ordinalBase: 0,
      };
      for (const read of [
        () => src.incremental(req),
        () => src.incrementalBatch({ ...req, schema, writeMode: 'append' }),
      ]) {
        const e = await read().then(
          () => undefined,
          (x: unknown) => x,
        );
        expect(e).toBeInstanceOf(RowTooLargeError);
        const err = e as RowTooLargeError;
        expect(err.code).toBe('ROW_TOO_LARGE');
        // Row 9 is the first of 1.5 MiB.
        expect(err.key).toMatch(/^u=.*, id=9$/);
        expect(err.bytes).toBeGreaterThan(MiB);
        expect(err.bytes).toBeLessThan(1.6 * MiB);
        expect(err.message).toContain('id=9');
        expect(err.message).toContain('maxRowBytes (1.00 MiB)');
        expect(err.message).not.toContain('\n');
      }
      // The connection is usable afterwards (Postgres: the COPY was cancelled; MySQL: reconnected).
      const after = await src.incrementalBatch({ ...req, maxRowBytes: 2 * MiB, schema, writeMode: 'append' });
      expect(after.page!.record.numRows).toBeGreaterThan(8);
    });
  });
}

let pgDb: FreshDatabase;
let pgAdmin: postgres.Sql;
let myDb: FreshDatabase;
let myAdmin: mysql.Connection;
const opened: AnySource[] = [];

afterAll(async () => {
  await Promise.all(opened.map((s) => s.close()));
  await pgAdmin?.end();
  await pgDb?.drop();
  await myAdmin?.end();
  await myDb?.drop();
});

byteBudgetSuite('Postgres', async () => {
  pgDb = await freshPgDatabase('page_bytes');
  pgAdmin = postgres(pgDb.url, { max: 1, onnotice: () => {} });
  await pgAdmin.unsafe(`CREATE TABLE t (id int PRIMARY KEY, u timestamptz NOT NULL, v text)`);
  for (let i = 1; i <= ROWS; i++) {
    const v =
      size(i) === 0 ? 'NULL' : `substr(repeat(md5('${i}'), ${Math.ceil(size(i) / 32)}), 1, ${size(i)})`;
    await pgAdmin.unsafe(
      `INSERT INTO t VALUES (${i}, timestamptz '2024-01-01 00:00:00+00' + ${Math.floor(i / 2)} * interval '1 second', ${v})`,
    );
  }
  await pgAdmin.unsafe('CREATE INDEX ON t (u, id)');
  return {
    src: () => {
      const s = new PostgresSource({ url: pgDb.url, lagMs: 0, clock: () => CLOCK_MS });
      opened.push(s);
      return s;
    },
    qualified: (t) => `public.${t}`,
  };
});

byteBudgetSuite('MySQL', async () => {
  myDb = await freshMysqlDatabase('page_bytes');
  myAdmin = await mysql.createConnection({ uri: myDb.url });
  await myAdmin.query("SET time_zone = '+00:00'");
  await myAdmin.query(
    'CREATE TABLE t (id INT PRIMARY KEY, u DATETIME(6) NOT NULL, v LONGTEXT, INDEX (u, id))',
  );
  for (let i = 1; i <= ROWS; i++) {
    const v =
      size(i) === 0 ? 'NULL' : `SUBSTR(REPEAT(MD5('${i}'), ${Math.ceil(size(i) / 32)}), 1, ${size(i)})`;
    await myAdmin.query(
      `INSERT INTO t VALUES (${i}, TIMESTAMP '2024-01-01 00:00:00' + INTERVAL ${Math.floor(i / 2)} SECOND, ${v})`,
    );
  }
  return {
    src: () => {
      // A generous lag: the shared server's other transactions must not hold the bound back.
      const s = new MysqlSource({ url: myDb.url, lagMs: 10_000, clock: () => CLOCK_MS });
      opened.push(s);
      return s;
    },
    qualified: (t) => `${myDb.name}.${t}`,
  };
});
