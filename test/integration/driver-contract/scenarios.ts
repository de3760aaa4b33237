/**
 * The contract every driver's incremental source keeps, written once against a DriverFixture so
 * every driver runs the same assertions on a real server: introspection maps every type as
 * docs/types.md says, the row path and the batch path return the same pages (same resume tokens,
 * byte-identical Arrow IPC) on random tables, keyset paging reads every row exactly once through
 * cursor ties and microsecond neighbours, NULL cursors are counted and skipped, the safe upper
 * bound holds late commits back, and every refusal is a one-line SourceError with its code,
 * saying what to do. The fixture supplies each server's DDL and expected values; what only one
 * driver has (Postgres COPY, MySQL's protocols and INNODB_TRX) stays in that driver's test file.
 * Tests run in order and some read tables an earlier one made (`mood`, `priv`, `cur_checks`).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Schema } from '../../../shared/dataplane/schema.js';
import { freePort } from '../../../shared/local/free-port.js';
import { decodeKey } from '../../../shared/position/key-codec.js';
import { incrementalPosPrefix } from '../../../shared/position/position.js';
import {
  type AfterCommit,
  asUser,
  type DriverFixture,
  type DriverSource,
  oneLineSourceError,
  page1,
  walkBoth,
} from './fixture.js';

/** The contract scenarios on `fx`, which the test file sets up in its beforeAll. */
export function driverContractScenarios(name: string, fx: DriverFixture): void {
  describe(`${name}: source contract`, () => {
    introspection(fx);
    randomTables(fx);
    keysetPaging(fx);
    safeUpperBound(fx);
    refusals(fx);
  });
}

function introspection(fx: DriverFixture): void {
  describe('introspection', () => {
    it(`maps every type to its logical type, in column order${fx.titles.allTypes}`, async () => {
      const t = fx.allTypes;
      await fx.exec(t.ddl);
      const src = fx.source();
      const { ref, schema, warnings } = await src.introspect({
        source: `${fx.schema}.all_types`,
        target: 'lake.all_types',
      });
      expect(warnings).toEqual([]);
      expect(ref).toEqual({ source: `${fx.schema}.all_types`, target: 'lake.all_types', primaryKey: ['id'] });
      expect(schema.columns.map((c) => [c.name, c.type])).toEqual(t.columns);
      expect(schema.primaryKey).toEqual(['id']);
      const col = (n: string) => schema.columns.find((c) => c.name === n)!;
      for (const [n, nullable] of Object.entries(t.nullable)) expect(col(n).nullable, n).toBe(nullable);
      for (const [n, type] of Object.entries(t.sourceTypes)) {
        if (typeof type === 'string') expect(col(n).sourceType).toBe(type);
        else expect(col(n).sourceType).toMatch(type);
      }

      // Exclusions leave the schema but not the table; the primary key cannot be excluded.
      const ex = await src.introspect({ source: `${fx.schema}.all_types`, exclude: [...t.exclude] });
      expect(ex.schema.columns.map((c) => c.name)).not.toContain(t.exclude[0]);
      await oneLineSourceError(
        src.introspect({ source: `${fx.schema}.all_types`, exclude: ['id'] }),
        'SOURCE_COLUMN_MISSING',
      );
      await oneLineSourceError(
        src.introspect({ source: `${fx.schema}.all_types`, exclude: ['nope'] }),
        'SOURCE_COLUMN_MISSING',
      );
    });

    it(`reads every type exactly, the same through both paths${fx.titles.values}`, async () => {
      await fx.exec(fx.values.ddl);
      const src = fx.source();
      const { ref, schema } = await src.introspect({ source: `${fx.schema}.values_t` });
      const { rows } = await walkBoth(src, ref, schema, 'u', 2, fx.rereads);
      expect(rows.map((r) => r.id)).toEqual(fx.values.ids);
      fx.values.expectRows(rows);
    });
  });
}

function randomTables(fx: DriverFixture): void {
  describe('random tables: row path == batch path', () => {
    it('walks identical pages (tokens and IPC bytes) and reads every row exactly once', async () => {
      const { types, cursors, keyTypes, keyText } = fx.random;
      const tableCase = fc.record({
        cursor: fc.constantFrom(...cursors),
        columns: fc.uniqueArray(fc.integer({ min: 0, max: types.length - 1 }), {
          minLength: 1,
          maxLength: 8,
        }),
        compositeKey: fc.boolean(),
        rowCount: fc.integer({ min: 0, max: 60 }),
        pageSize: fc.integer({ min: 1, max: 13 }),
        seed: fc.integer(),
      });
      const src = fx.source();
      let n = 0;
      await fx.random.around(() =>
        fc.assert(
          fc.asyncProperty(tableCase, async (tc) => {
            const name = `rnd_${n++}`;
            const cols = tc.columns.map((i, k) => ({ name: `c${k}`, type: types[i]! }));
            const keyCols = tc.compositeKey
              ? [`k1 ${keyTypes.int} NOT NULL`, `k2 ${keyTypes.text} NOT NULL`]
              : [`k1 ${keyTypes.int} NOT NULL`];
            const pk = tc.compositeKey ? '(k1, k2)' : '(k1)';
            await fx.random.create(
              name,
              [...keyCols, `cur ${tc.cursor.sql} NOT NULL`, ...cols.map((c) => `${c.name} ${c.type.sql}`)],
              pk,
            );
            if (tc.rowCount > 0) {
              const rowArb = fc.tuple(
                keyText,
                tc.cursor.value,
                fc.tuple(...cols.map((c) => fc.option(c.type.value, { nil: null, freq: 4 }))),
              );
              const rows = fc.sample(rowArb, { numRuns: tc.rowCount, seed: tc.seed });
              const keyTypeList = tc.compositeKey ? [keyTypes.int, keyTypes.text] : [keyTypes.int];
              await fx.random.insert(
                name,
                [...keyTypeList, tc.cursor.sql, ...cols.map((c) => c.type.sql)],
                rows.map(([k2, cur, vals], i) => [
                  ...(tc.compositeKey ? [i % 3, `${k2}#${i}`] : [i]),
                  cur,
                  ...vals,
                ]),
              );
            }
            const { ref, schema } = await src.introspect({ source: `${fx.schema}.${name}` });
            const walked = await walkBoth(src, ref, schema, 'cur', tc.pageSize, fx.rereads);
            // Every row exactly once, in the database's own (cursor, key) order.
            const keyList = tc.compositeKey ? 'k1, k2' : 'k1';
            const expected = await fx.query(`SELECT ${keyList} FROM ${name} ORDER BY cur, ${keyList}`);
            const key = (r: Record<string, unknown>) => (tc.compositeKey ? `${r.k1}|${r.k2}` : String(r.k1));
            expect(walked.rows.map(key)).toEqual(expected.map(key));
            expect(new Set(walked.tokens).size).toBe(walked.tokens.length);
            await fx.exec(`DROP TABLE ${name}`);
          }),
          { numRuns: 40 },
        ),
      );
    });
  });
}

function keysetPaging(fx: DriverFixture): void {
  describe('keyset paging', () => {
    it('reads every row exactly once when 10,000 rows share one cursor value (page size 97)', async () => {
      await fx.exec(fx.ties);
      const src = fx.source();
      const { ref, schema } = await src.introspect({
        source: `${fx.schema}.ties`,
        cursorColumn: 'updated_at',
      });
      const walked = await walkBoth(src, ref, schema, 'updated_at', 97, fx.rereads);
      expect(walked.pages).toBe(Math.ceil(10_000 / 97));
      expect(walked.rows.map((r) => r.id)).toEqual(Array.from({ length: 10_000 }, (_, i) => i + 1));
    });

    it(`keeps ${fx.titles.micro} exact: rows 1 µs apart come one per page, in order`, async () => {
      await fx.exec(fx.micro.ddl);
      const src = fx.source();
      const { ref, schema } = await src.introspect({ source: `${fx.schema}.micro` });
      const walked = await walkBoth(src, ref, schema, 'updated_at', 1, fx.rereads);
      expect(walked.rows.map((r) => r.id)).toEqual(Array.from({ length: 20 }, (_, i) => 20 - i));
      const base = 1_646_370_367_000_000n;
      expect(
        walked.tokens.map(
          (t) => decodeKey([{ kind: 'timestamp', utc: fx.micro.utc }, { kind: 'int32' }], t)[0],
        ),
      ).toEqual(Array.from({ length: 20 }, (_, i) => base + BigInt(i)));
    });

    it('pages a text cursor holding quotes, backslashes and unicode through both paths', async () => {
      await fx.quoted.create();
      const src = fx.source();
      const { ref, schema } = await src.introspect({ source: `${fx.schema}.quoted` });
      const walked = await walkBoth(src, ref, schema, 'name', 1, fx.rereads);
      const expected = await fx.query('SELECT name FROM quoted ORDER BY name');
      expect(walked.rows.map((r) => r.name)).toEqual(expected.map((r) => r.name));
      expect(walked.rows).toHaveLength(fx.quoted.names.length);
    });

    it('uses the cursor alone as keyset when the table has no primary key but the cursor is UNIQUE NOT NULL', async () => {
      await fx.exec(fx.nopk.ddl);
      const src = fx.source();
      const { ref, schema } = await src.introspect({ source: `${fx.schema}.nopk`, cursorColumn: 'seq' });
      expect(schema.primaryKey).toEqual([]);
      const walked = await walkBoth(src, ref, schema, 'seq', 4, fx.rereads);
      expect(walked.rows.map((r) => r.seq)).toEqual(
        Array.from({ length: fx.nopk.rows }, (_, i) => BigInt(i + 1)),
      );
    });

    it(`pages by an excluded cursor column and counts (and skips) NULL${fx.titles.nulls} cursors`, async () => {
      const t = fx.nulls;
      await fx.exec(t.ddl);
      const src = fx.source();
      const { ref, schema } = await src.introspect({ source: `${fx.schema}.nulls`, exclude: ['updated_at'] });
      expect(schema.columns.map((c) => c.name)).toEqual(['id', 'v']);
      expect(await src.countNullCursors(ref, 'updated_at')).toBe(t.nullCursors);
      const walked = await walkBoth(src, ref, schema, 'updated_at', t.pageSize, fx.rereads);
      expect(walked.rows.map((r) => r.id)).toEqual(t.ids);
      for (const other of t.others) {
        const o = await src.introspect({ source: `${fx.schema}.${other.table}` });
        for (const [column, count] of other.counts)
          expect(await src.countNullCursors(o.ref, column)).toBe(count);
      }
    });

    it(`estimates the row count from ${fx.titles.estimate} statistics, for the first sync ETA`, async () => {
      const e = fx.estimate;
      await fx.exec(e.ddl);
      const src = fx.source();
      const { ref } = await src.introspect({ source: `${fx.schema}.est` });
      if (e.unanalyzedIsUndefined) expect(await src.estimateRows(ref)).toBeUndefined(); // never analyzed: no guess
      await e.fill();
      const n = await src.estimateRows(ref);
      // The server's statistics: an estimate, not a count.
      expect(n).toBeGreaterThan(e.between[0]);
      expect(n).toBeLessThan(e.between[1]);
    });
  });
}

/**
 * Reads from `after` (pages of one row, both paths) until `want` notes arrived: with `at once`
 * the pages that follow hold them and the walk ends where `more` says; with `eventually` it
 * reads until they come (for at most a minute).
 */
async function readOn(
  src: DriverSource,
  req: ReturnType<typeof page1>,
  schema: Schema,
  after: string,
  want: number,
  afterCommit: AfterCommit,
): Promise<unknown[]> {
  const notes: unknown[] = [];
  let token = after;
  const deadline = Date.now() + 60_000;
  for (let seq = 2; ; seq++) {
    const r = { ...req, after: token, pageSize: 1, posPrefix: incrementalPosPrefix(seq, 1) };
    const rows = await src.incremental(r);
    const batch = await src.incrementalBatch({ ...r, schema, writeMode: 'append' });
    expect(batch.next).toBe(rows.next);
    notes.push(...rows.page.map((x) => x.note));
    token = rows.next;
    if (afterCommit === 'at once') {
      if (!rows.more) return notes;
    } else {
      if (notes.length >= want || Date.now() >= deadline) return notes;
      if (rows.page.length === 0) await new Promise((done) => setTimeout(done, 200));
    }
  }
}

function safeUpperBound(fx: DriverFixture): void {
  describe('safe upper bound', () => {
    it('holds rows back behind an open transaction, so a late commit with an older cursor is not skipped', async () => {
      await fx.exec(fx.bound.eventsDdl);
      const src = fx.source({ lagMs: 0, stallAfterMs: 0 });
      const { ref, schema } = await src.introspect({
        source: `${fx.schema}.events`,
        cursorColumn: 'updated_at',
      });
      const writer = await fx.session();
      try {
        await writer.exec('BEGIN');
        await writer.exec("INSERT INTO events (note) VALUES ('late')"); // updated_at = now, in this transaction
        await new Promise((r) => setTimeout(r, fx.bound.lateGapMs));
        await fx.exec("INSERT INTO events (note) VALUES ('after-1'), ('after-2')"); // committed, newer cursor
        const req = page1(ref, 'updated_at');
        const rowPage = await src.incremental(req);
        const batchPage = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
        // Without the bound this page would hold after-1 and after-2, and its token would pass the
        // late row's cursor: the late row would never be read.
        expect(rowPage.page.map((r) => r.note)).toEqual(['old']);
        expect(batchPage.page!.record.numRows).toBe(1);
        expect(batchPage.next).toBe(rowPage.next);
        expect(rowPage.more).toBe(false);
        fx.bound.expectHolder(rowPage.warnings?.filter((w) => w.code === 'BOUND_HELD') ?? [], writer);

        await writer.exec('COMMIT');
        const notes = await readOn(src, req, schema, rowPage.next, 3, fx.bound.afterCommit);
        expect(notes).toEqual(['late', 'after-1', 'after-2']);
      } finally {
        await writer.exec('ROLLBACK').catch(() => undefined);
        await writer.close();
      }
    });

    it(`holds ${fx.titles.sequence} cursor page until transactions open at the high-water read have ended`, async () => {
      await fx.exec(fx.bound.sequenceDdl);
      const src = fx.source({ lagMs: 300 });
      const { ref, schema } = await src.introspect({ source: `${fx.schema}.seqt`, cursorColumn: 'id' });
      const writer = await fx.session();
      try {
        await writer.exec('BEGIN');
        await writer.exec("INSERT INTO seqt (note) VALUES ('late')"); // id 1, not committed
        await fx.exec("INSERT INTO seqt (note) VALUES ('early')"); // id 2, committed
        const req = page1(ref, 'id');
        const held = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
        expect(held.page).toBeUndefined();
        expect(held.next).toBe('');
        expect(held.warnings?.map((w) => w.code)).toContain('BOUND_HELD');
        const rowsHeld = await src.incremental(req);
        expect(rowsHeld.page).toEqual([]);

        // Commit while a page is waiting: the page then reads both rows. (`eventually`: it may be
        // held once more on a loaded machine, when the commit lands after its settle time, or with
        // TIDEMARK_TEST_MYSQL_URL, where another test file's transaction holds it: then the next
        // page reads them. MySQL's settle loop reads INNODB_TRX every 150 ms, so the cache,
        // refilled only after 100 ms unread, does see the commit.)
        const pending = src.incremental({ ...req });
        await new Promise((r) => setTimeout(r, fx.bound.commitAfterMs));
        await writer.exec('COMMIT');
        let page = await pending;
        if (fx.bound.afterCommit === 'eventually')
          for (let deadline = Date.now() + 60_000; page.page.length === 0 && Date.now() < deadline; )
            page = await src.incremental(req);
        expect(page.page.map((r) => r.note)).toEqual(['late', 'early']);
      } finally {
        await writer.exec('ROLLBACK').catch(() => undefined);
        await writer.close();
      }
    });

    it(`refuses ${fx.titles.privileges}, with the GRANT to run; lagOnly accepts it`, async () => {
      const p = fx.privileges;
      await fx.exec(p.createAccount);
      try {
        await fx.exec(p.privTable);
        const url = asUser(fx.url, p.account, 'ro-pw');
        const strict = fx.source({ url });
        const { ref, schema } = await strict.introspect({ source: `${fx.schema}.priv` });
        const req = page1(ref, 'updated_at', 10);
        const e = await oneLineSourceError(
          strict.incrementalBatch({ ...req, schema, writeMode: 'append' }),
          'SOURCE_PRIVILEGE',
        );
        expect(e.message).toContain(p.refusal);
        expect(e.message).toContain('lagOnly');
        await oneLineSourceError(
          strict.introspect({ source: `${fx.schema}.priv`, cursorColumn: 'updated_at' }),
          'SOURCE_PRIVILEGE',
        );

        const lagOnly = fx.source({
          url,
          lagOnly: true,
          ...(p.lagOnlyLagMs !== undefined ? { lagMs: p.lagOnlyLagMs } : {}),
        });
        await lagOnly.introspect({ source: `${fx.schema}.priv` });
        const page = await lagOnly.incrementalBatch({ ...req, schema, writeMode: 'append' });
        expect(page.page!.record.numRows).toBe(1);

        await fx.exec(p.grantSessions);
        const granted = fx.source({ url });
        await granted.introspect({ source: `${fx.schema}.priv` });
        expect((await granted.incremental(req)).page).toHaveLength(1);

        await fx.exec(p.secretTable);
        const denied = await oneLineSourceError(
          lagOnly.introspect({ source: `${fx.schema}.secret` }),
          'SOURCE_PRIVILEGE',
        );
        expect(denied.message).toContain(p.denied);
      } finally {
        await fx.closeSources();
        await fx.exec(p.dropAccount);
      }
    });
  });
}

function refusals(fx: DriverFixture): void {
  describe('refusals are one-line SourceErrors', () => {
    it('wrong password', async () => {
      const url = new URL(fx.url);
      url.password = 'not-the-password';
      const e = await oneLineSourceError(
        fx.source({ url: url.toString() }).introspect({ source: `${fx.schema}.priv` }),
        'SOURCE_AUTH_FAILED',
      );
      expect(e.message).toMatch(fx.refusals.wrongPassword);
      expect(e.message).not.toContain('not-the-password');
    });

    it('unreachable port', async () => {
      const url = new URL(fx.url);
      url.port = String(await freePort());
      const e = await oneLineSourceError(
        fx.source({ url: url.toString() }).introspect({ source: `${fx.schema}.x` }),
        'SOURCE_UNREACHABLE',
      );
      expect(e.message).toContain(`127.0.0.1:${url.port}`);
    });

    it('missing database', async () => {
      const url = new URL(fx.url);
      url.pathname = '/no_such_db';
      await oneLineSourceError(
        fx.source({ url: url.toString() }).introspect({ source: fx.refusals.missingDatabaseTable }),
        'SOURCE_DATABASE_MISSING',
      );
    });

    it('unknown table, with similar names', async () => {
      await fx.exec('CREATE TABLE customers (id INT PRIMARY KEY)');
      const e = await oneLineSourceError(
        fx.source().introspect({ source: `${fx.schema}.custmers` }),
        'SOURCE_TABLE_MISSING',
      );
      expect(e.message).toContain(`${fx.schema}.custmers`);
      expect(e.message).toContain(`did you mean ${fx.schema}.customers`);
    });

    it('missing cursor column, unorderable cursor, no primary key with a non-unique cursor', async () => {
      const r = fx.refusals;
      await fx.exec(r.cursorDdl);
      const src = fx.source();
      const missing = await oneLineSourceError(
        src.introspect({ source: `${fx.schema}.cur_checks`, cursorColumn: 'updatd_at' }),
        'SOURCE_CURSOR_INVALID',
      );
      expect(missing.message).toContain('"updatd_at" does not exist');
      for (const c of r.unorderable) {
        const unorderable = await oneLineSourceError(
          src.introspect({ source: `${fx.schema}.cur_checks`, cursorColumn: c }),
          'SOURCE_CURSOR_INVALID',
        );
        expect(unorderable.message).toContain(r.unorderableSays);
      }
      const noPk = await oneLineSourceError(
        src.introspect({ source: `${fx.schema}.no_pk`, cursorColumn: 'updated_at' }),
        'SOURCE_KEY_MISSING',
      );
      expect(noPk.message).toContain(`${fx.schema}.no_pk has no primary key`);
      // The same checks run on the first page when introspect was not given the cursor.
      const { ref } = await src.introspect({ source: `${fx.schema}.no_pk` });
      await oneLineSourceError(src.incremental(page1(ref, 'updated_at', 5)), 'SOURCE_KEY_MISSING');
    });

    it('warns (does not refuse) when no index leads with the cursor column', async () => {
      const src = fx.source();
      const { warnings } = await src.introspect({
        source: `${fx.schema}.cur_checks`,
        cursorColumn: 'updated_at',
      });
      expect(warnings.map((w) => w.code)).toEqual(['CURSOR_NOT_INDEXED']);
      expect(warnings[0]!.message).toContain(fx.refusals.indexAdvice);
    });
  });
}
