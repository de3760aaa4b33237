/**
 * The Postgres driver against a real server. The contract it shares with every driver
 * (introspection, row path == batch path on random tables, keyset paging, NULL cursors, the safe
 * upper bound, refusals) runs from driver-contract/scenarios.ts on postgres-fixture.ts; this file
 * adds what only Postgres has: the raw COPY data phase (copy-tap.ts) against postgres.js#499,
 * values a lake cannot hold (NaN numerics, timestamps past int64 micros, multi-dimensional
 * arrays), schema changes between pages as the binary COPY decoder and the catalog check see
 * them, the binary decoders against the server, and infinities through Parquet to DuckDB.
 */

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import type { RecordBatch } from 'apache-arrow';
import fc from 'fast-check';
import type postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataError } from '../../shared/contracts/errors.js';
import { BatchEncoder } from '../../shared/dataplane/encoder.js';
import { toLakeRecord } from '../../shared/dataplane/lake.js';
import { Op } from '../../shared/dataplane/metadata.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { SchemaChangedError } from '../../shared/dataplane/schema-rules.js';
import { connect } from '../../shared/drivers/postgres/connect.js';
import { introspectTable } from '../../shared/drivers/postgres/introspect.js';
import type { PostgresSourceOptions } from '../../shared/drivers/postgres/source.js';
import { quoteLiteral } from '../../shared/drivers/postgres/types.js';
import {
  CopyBinaryDecoder,
  type CopyField,
  numericBinaryToText,
} from '../../shared/drivers/postgres/wire/binary-rows.js';
import { rawCopy } from '../../shared/drivers/postgres/wire/copy-tap.js';
import { incrementalPosPrefix } from '../../shared/position/position.js';
import { DATE_NEG_INFINITY } from '../../shared/position/time-text.js';
import { encodeParquet } from '../../shared/sink/parquet-writer.js';
import type { FreshDatabase } from '../harness/pg.js';
import { INGEST_NS, ipc } from './driver-contract/fixture.js';
import { postgresDriverFixture, valuesTable } from './driver-contract/postgres-fixture.js';
import { driverContractScenarios } from './driver-contract/scenarios.js';

const fx = postgresDriverFixture();
let db: FreshDatabase;
let admin: postgres.Sql;
const source = (opts: Partial<PostgresSourceOptions> = {}) => fx.source(opts);

beforeAll(async () => {
  await fx.setUp();
  db = fx.db;
  admin = fx.admin;
});

afterAll(async () => {
  await fx.drop();
});

driverContractScenarios('postgres', fx);

describe('connection health', () => {
  // The raw data phase (copy-tap.ts, plain sockets) and postgres.js' COPY stream (TLS) both.
  it.each([
    ['the tapped socket', true],
    ["postgres.js' COPY stream", false],
  ])(
    'keeps the connection usable after COPY pages that end right past the stream buffer (postgres.js#499), through %s',
    async (_, tapped) => {
      // ~100-byte rows: pages of 150..230 rows span the 16 KiB high-water mark that used to leave
      // the socket paused after the COPY ended, hanging the next statement forever.
      await admin.unsafe(`CREATE TABLE IF NOT EXISTS wide (id int PRIMARY KEY, pad text NOT NULL);
      INSERT INTO wide SELECT g, repeat('x', 80) FROM generate_series(1, 400) g ON CONFLICT DO NOTHING`);
      rawCopy.enabled = tapped;
      const phases = rawCopy.phases;
      try {
        const src = source();
        const { ref, schema } = await src.introspect({ source: 'public.wide' });
        const within = <T>(p: Promise<T>) =>
          Promise.race([
            p,
            new Promise<never>((_, reject) =>
              // A hang is forever: the bound only turns it into this failure before the test's
              // own timeout, generous for a loaded machine.
              setTimeout(() => reject(new Error('connection hung after COPY')), 30_000).unref(),
            ),
          ]);
        for (let pageSize = 150; pageSize <= 230; pageSize += 4) {
          const page = await within(
            src.incrementalBatch({
              table: ref,
              cursorColumn: 'id',
              after: '',
              pageSize,
              posPrefix: incrementalPosPrefix(1, 1),
              ordinalBase: 0,
              schema,
              writeMode: 'append',
            }),
          );
          expect(page.page!.record.numRows).toBe(pageSize);
          expect(await within(src.countNullCursors(ref, 'pad'))).toBe(0);
          await within(src.introspect({ source: 'public.wide' }));
        }
      } finally {
        rawCopy.enabled = true;
      }
      // Each page's COPY went the way this case names: 21 pages through the tap, or none.
      expect(rawCopy.phases - phases).toBe(tapped ? 21 : 0);
    },
  );
});

describe('values a lake cannot hold', () => {
  async function bothFail(table: string, ddl: string, cursor: string, match: RegExp): Promise<void> {
    await admin.unsafe(ddl);
    const src = source();
    const { ref, schema } = await src.introspect({ source: `public.${table}` });
    const req = {
      table: ref,
      cursorColumn: cursor,
      after: '',
      pageSize: 10,
      posPrefix: incrementalPosPrefix(1, 1),
      ordinalBase: 0,
    };
    await expect(src.incremental(req)).rejects.toThrow(DataError);
    await expect(src.incremental(req)).rejects.toThrow(match);
    await expect(src.incrementalBatch({ ...req, schema, writeMode: 'append' })).rejects.toThrow(DataError);
    await expect(src.incrementalBatch({ ...req, schema, writeMode: 'append' })).rejects.toThrow(match);
    // The connection is still usable after a refused COPY page.
    expect((await src.introspect({ source: `public.${table}` })).schema.columns.length).toBeGreaterThan(0);
  }

  it('refuses NaN and infinities in a numeric(p,s) column, naming the column', async () => {
    await bothFail(
      'nan_dec',
      `CREATE TABLE nan_dec (id int PRIMARY KEY, amount numeric(10,2)); INSERT INTO nan_dec VALUES (1, 1), (2, 'NaN')`,
      'id',
      /public\.nan_dec\.amount: numeric value NaN/,
    );
  });

  it('refuses timestamps beyond int64 microseconds since 1970', async () => {
    await bothFail(
      'far_ts',
      `CREATE TABLE far_ts (id int PRIMARY KEY, t timestamp); INSERT INTO far_ts VALUES (1, '294270-01-01 00:00:00')`,
      'id',
      /public\.far_ts\.t: .*294 ?24[67] AD/,
    );
  });

  it('refuses a multi-dimensional value in a column declared one-dimensional', async () => {
    await bothFail(
      'md_arr',
      `CREATE TABLE md_arr (id int PRIMARY KEY, a int[]); INSERT INTO md_arr VALUES (1, '{{1,2},{3,4}}')`,
      'id',
      /public\.md_arr\.a: holds a multi-dimensional array/,
    );
  });
});

describe('schema changes between pages of a run (issue 9)', () => {
  /**
   * Introspects `table` (cursor id, target `lake.<table>`), reads page 1 (page size 1) through
   * both paths, runs `ddl` in another session (the admin pool), then reads page 2 with the same
   * source object through both paths. Returns page 2's outcomes: [batch path, row path].
   */
  async function acrossChange(table: string, create: string, ddl: string): Promise<[unknown, unknown]> {
    await admin.unsafe(create);
    const src = source();
    const { ref, schema } = await src.introspect({ source: `public.${table}`, target: `lake.${table}` });
    const req = (after: string) => ({
      table: ref,
      cursorColumn: 'id',
      after,
      pageSize: 1,
      posPrefix: incrementalPosPrefix(1, 1),
      ordinalBase: 0,
    });
    const rows1 = await src.incremental(req(''));
    const batch1 = await src.incrementalBatch({ ...req(''), schema, writeMode: 'append' });
    expect(rows1.page).toHaveLength(1);
    expect(batch1.page!.record.numRows).toBe(1);
    expect(batch1.next).toBe(rows1.next);
    await admin.unsafe(ddl);
    const outcome = (p: Promise<unknown>) =>
      p.then(
        (page) => ({ page }),
        (e: unknown) => e,
      );
    const batch2 = await outcome(src.incrementalBatch({ ...req(batch1.next), schema, writeMode: 'append' }));
    // The same connection, after the refused COPY page.
    const rows2 = await outcome(src.incremental(req(rows1.next)));
    return [batch2, rows2];
  }

  /** A page refused with SCHEMA_CHANGED (never a batch), naming the target table and the column. */
  function refused(e: unknown, table: string, ...says: RegExp[]): void {
    expect(e).toBeInstanceOf(SchemaChangedError);
    expect(e).toMatchObject({ code: 'SCHEMA_CHANGED', table: `lake.${table}`, where: 'page' });
    const message = (e as Error).message;
    expect(message).toContain(`lake.${table}: the schema changed during this run (between its pages)`);
    for (const s of says) expect(message).toMatch(s);
    expect(message).not.toContain('\n');
  }

  it('int4 -> bigint between pages: page 2 is refused (the decoder sees 8-byte values), never decoded as 0, 0, 1', async () => {
    const [batch, rows] = await acrossChange(
      'sc_widen',
      'CREATE TABLE sc_widen (id int PRIMARY KEY, c int4); INSERT INTO sc_widen VALUES (1, 5), (2, 7)',
      'ALTER TABLE sc_widen ALTER COLUMN c TYPE bigint; INSERT INTO sc_widen VALUES (3, 5000000000)',
    );
    const widened = /column "c" widened from integer \(lake int32\) to bigint \(lake int64\)/;
    refused(
      batch,
      'sc_widen',
      widened,
      /column "c": a 8-byte value arrived where its introspected type int4 has 4 bytes/,
    );
    // The row path reads text ('7' parses either way): only the catalog check stops it.
    refused(rows, 'sc_widen', widened);
  });

  it('DROP COLUMN between pages: the COPY fails with 42703, which is a SCHEMA_CHANGED naming the column', async () => {
    const [batch, rows] = await acrossChange(
      'sc_drop',
      "CREATE TABLE sc_drop (id int PRIMARY KEY, c int4, d text); INSERT INTO sc_drop VALUES (1, 5, 'a'), (2, 7, 'b')",
      'ALTER TABLE sc_drop DROP COLUMN c',
    );
    for (const e of [batch, rows]) {
      refused(
        e,
        'sc_drop',
        /column "c" integer is gone/,
        /reading the page failed: column "c" does not exist \(SQLSTATE 42703\)/,
      );
      expect((e as Error).cause).toMatchObject({ code: '42703' });
    }
  });

  it('DROP TABLE between pages: 42P01 is a SCHEMA_CHANGED too, every read column gone', async () => {
    const [batch, rows] = await acrossChange(
      'sc_gone',
      'CREATE TABLE sc_gone (id int PRIMARY KEY, c int4); INSERT INTO sc_gone VALUES (1, 5), (2, 7)',
      'DROP TABLE sc_gone',
    );
    for (const e of [batch, rows]) {
      refused(
        e,
        'sc_gone',
        /column "c" integer is gone/,
        /column "id" integer is gone/,
        /\(SQLSTATE 42P01\)/,
      );
    }
  });

  it('text -> int4 between pages: only the catalog check can see it (the decoder takes 4-byte ints as text)', async () => {
    const [batch, rows] = await acrossChange(
      'sc_text',
      "CREATE TABLE sc_text (id int PRIMARY KEY, c text); INSERT INTO sc_text VALUES (1, '1234'), (2, '5678')",
      'ALTER TABLE sc_text ALTER COLUMN c TYPE int4 USING c::int4',
    );
    const changed = /column "c" changed type from text \(lake text\) to integer \(lake int32\)/;
    refused(batch, 'sc_text', changed);
    refused(rows, 'sc_text', changed);

    // Why the catalog check is needed: the decoder alone, over the introspected text field,
    // accepts the int4 5678 (bytes 00 00 16 2e) as a 4-byte text value, without an error.
    const chunks: Buffer[] = [];
    for await (const chunk of await admin
      .unsafe('COPY (SELECT c FROM sc_text WHERE id = 2) TO STDOUT (FORMAT binary)')
      .readable())
      chunks.push(chunk as Buffer);
    const textSchema: Schema = {
      columns: [{ name: 'c', type: { kind: 'text' }, nullable: true, sourceType: 'text' }],
      primaryKey: [],
    };
    const enc = new BatchEncoder(textSchema, { phase: 'incremental' });
    const dec = new CopyBinaryDecoder(
      [{ wire: 'text', list: false, writer: enc.col(0), ctx: { table: 'public.sc_text', column: 'c' } }],
      [0],
      10,
      (i) => enc.appendMetaOrdinal(Op.update, 'i000000000001', i, null, false),
    );
    dec.push(Buffer.concat(chunks));
    dec.end();
    expect(enc.finish(INGEST_NS).getChildAt(0)!.get(0)).toBe('\u0000\u0000\u0016.');
  });

  it('json -> jsonb keeps the lake type but not the read form: refused, naming both forms', async () => {
    const [batch, rows] = await acrossChange(
      'sc_json',
      `CREATE TABLE sc_json (id int PRIMARY KEY, j json); INSERT INTO sc_json VALUES (1, '{"a":1}'), (2, '{"b":2}')`,
      'ALTER TABLE sc_json ALTER COLUMN j TYPE jsonb',
    );
    const form = /column "j" was json, read as text, and is now jsonb, read as jsonb/;
    refused(batch, 'sc_json', /column "j" changed from json to jsonb; its lake type text stays/, form);
    refused(rows, 'sc_json', form);
  });

  it('varchar(10) -> varchar(200) between pages changes neither the lake type nor the read: page 2 is read', async () => {
    const [batch, rows] = await acrossChange(
      'sc_varchar',
      "CREATE TABLE sc_varchar (id int PRIMARY KEY, c varchar(10)); INSERT INTO sc_varchar VALUES (1, 'a'), (2, 'b')",
      'ALTER TABLE sc_varchar ALTER COLUMN c TYPE varchar(200)',
    );
    expect(
      (batch as { page: { page: { record: RecordBatch } } }).page.page.record.getChild('c')!.get(0),
    ).toBe('b');
    expect((rows as { page: { page: unknown[] } }).page.page).toEqual([{ id: 2, c: 'b' }]);
  });
});

describe('binary decoding against the server', () => {
  it('decodes COPY output split at any byte boundary exactly as in one piece', async () => {
    await admin.unsafe(valuesTable('copy_split', false));
    const { sql } = connect({ url: db.url });
    try {
      const plan = await introspectTable(sql, { source: 'public.copy_split' });
      const copy = `COPY (SELECT ${plan.columns.map((c) => c.read.expr).join(', ')} FROM ${plan.qualified} ORDER BY id) TO STDOUT (FORMAT binary)`;
      const chunks: Buffer[] = [];
      for await (const chunk of await sql.unsafe(copy).readable()) chunks.push(chunk as Buffer);
      const bytes = Buffer.concat(chunks);
      const decode = (pieces: Uint8Array[]) => {
        const enc = new BatchEncoder(plan.schema, { phase: 'incremental' });
        const fields: CopyField[] = plan.columns.map((c, i) => ({
          wire: c.read.wire,
          list: c.read.list,
          writer: enc.col(i),
          ctx: { table: plan.source, column: c.name },
        }));
        const dec = new CopyBinaryDecoder(fields, [0], 100, (i) =>
          enc.appendMetaOrdinal(Op.update, 'i000000000001', i, null, false),
        );
        for (const p of pieces) dec.push(p);
        dec.end();
        expect(dec.appended).toBe(3);
        return ipc(enc.finish(INGEST_NS));
      };
      const whole = decode([bytes]);
      await fc.assert(
        fc.property(
          fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 40 }),
          (cuts) => {
            const at = [0, ...cuts.sort((a, b) => a - b), bytes.length];
            const pieces = at.slice(1).map((end, k) => bytes.subarray(at[k]!, end));
            expect(decode(pieces).equals(whole)).toBe(true);
          },
        ),
        { numRuns: 300 },
      );
      // Byte by byte, the worst case for reassembly.
      expect(decode(Array.from(bytes, (b) => Uint8Array.of(b))).equals(whole)).toBe(true);
      // A stream cut before its trailer is refused, not taken as a short page.
      expect(() => decode([bytes.subarray(0, bytes.length - 2)])).toThrow(/ended early/);
    } finally {
      await sql.end();
    }
  });

  it('quotes any string so the server reads it back unchanged, whatever standard_conforming_strings says', async () => {
    const text = fc.string({
      unit: fc.oneof(
        fc.constantFrom("'", '\\', '"', '$', 'E', '\n'),
        fc.constant('x'),
        fc.string({ unit: 'grapheme', maxLength: 1 }),
      ),
    });
    const conn = await admin.reserve();
    try {
      for (const scs of ['on', 'off']) {
        await conn.unsafe(`SET standard_conforming_strings = ${scs}`);
        await fc.assert(
          fc.asyncProperty(
            fc.array(
              text.filter((s) => !s.includes('\0')),
              { minLength: 1, maxLength: 10 },
            ),
            async (xs) => {
              const rows = await conn.unsafe<{ v: string }[]>(
                `SELECT v FROM (VALUES ${xs.map((x) => `(${quoteLiteral(x)})`).join(', ')}) AS t(v)`,
              );
              expect(rows.map((r) => r.v)).toEqual(xs);
            },
          ),
          { numRuns: 100 },
        );
      }
    } finally {
      await conn.unsafe('RESET standard_conforming_strings');
      conn.release();
    }
  });

  it('prints binary NUMERIC exactly as numeric_out does', async () => {
    const digits = (max: number) =>
      fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: 1, maxLength: max });
    const numeric = fc.oneof(
      fc.tuple(fc.boolean(), digits(45), digits(30)).map(([neg, w, f]) => `${neg ? '-' : ''}${w}.${f}`),
      fc.tuple(fc.boolean(), digits(8)).map(([neg, w]) => `${neg ? '-' : ''}${w}`),
      fc.constantFrom(
        'NaN',
        'Infinity',
        '-Infinity',
        '0',
        '0.000',
        '-0.0001',
        '1e-20',
        '1e40',
        '10000',
        '0.00010000',
      ),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(numeric, { minLength: 1, maxLength: 20 }), async (xs) => {
        const rows = await admin.unsafe<{ t: string; b: Buffer }[]>(
          `SELECT x::text AS t, numeric_send(x) AS b FROM unnest($1::text::numeric[]) AS u(x)`,
          [`{${xs.join(',')}}`],
        );
        for (const r of rows) expect(numericBinaryToText(r.b, 0)).toBe(r.t);
      }),
      { numRuns: 100 },
    );
  });
});

describe('infinities in the lake', () => {
  it('reach DuckDB through Parquet: both infinities read back as infinities', async () => {
    await admin.unsafe(`
      CREATE TABLE inf (id int PRIMARY KEY, tstz timestamptz, ts timestamp, d date);
      INSERT INTO inf VALUES (1, 'infinity', 'infinity', 'infinity'), (2, '-infinity', '-infinity', '-infinity'),
                             (3, '2024-01-01 00:00:00.000001+00', '1969-12-31 23:59:59.999999', '1970-01-01')`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: 'public.inf' });
    const page = await src.incrementalBatch({
      table: ref,
      cursorColumn: 'id',
      after: '',
      pageSize: 10,
      posPrefix: incrementalPosPrefix(1, 1),
      ordinalBase: 0,
      schema,
      writeMode: 'append',
    });
    const dir = await mkdtemp(join(tmpdir(), 'pg-inf-'));
    try {
      const file = join(dir, 'inf.parquet');
      await writeFile(file, encodeParquet([toLakeRecord(page.page!.record)]));
      const duck = await DuckDBInstance.create(':memory:');
      const con = await duck.connect();
      const read = async (q: string) => (await con.runAndReadAll(q)).getRowObjectsJson();
      expect(
        await read(`SELECT id, isinf(tstz) AS a, isinf(ts) AS b, isinf(d) AS c FROM '${file}' ORDER BY id`),
      ).toEqual([
        { id: 1, a: true, b: true, c: true },
        // Our -infinity is DuckDB's: INT64_MIN + 1 micros, INT32_MIN + 1 days (time-text.ts).
        { id: 2, a: true, b: true, c: true },
        { id: 3, a: false, b: false, c: false },
      ]);
      expect(
        await read(
          `SELECT epoch_us(tstz)::VARCHAR AS t, (d - DATE '1970-01-01')::VARCHAR AS d FROM '${file}' WHERE id = 2`,
        ),
        // DuckDB gives no epoch for an infinite timestamp; the date keeps its day number.
      ).toEqual([{ t: null, d: String(DATE_NEG_INFINITY) }]);
      expect(
        await read(
          `SELECT tstz::VARCHAR AS a, ts::VARCHAR AS b, d::VARCHAR AS c FROM '${file}' WHERE id = 3`,
        ),
      ).toEqual([{ a: '2024-01-01 00:00:00.000001+00', b: '1969-12-31 23:59:59.999999', c: '1970-01-01' }]);
      con.closeSync();
      duck.closeSync();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
