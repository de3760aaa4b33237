/**
 * The Postgres driver against a real server: introspection maps every type as docs/types.md
 * says, the row path (text) and the batch path (binary COPY) return the same pages (same resume
 * tokens, byte-identical Arrow IPC) on random tables, keyset paging reads every row exactly once
 * through cursor ties and microsecond neighbours, the safe upper bound holds late commits back,
 * and every refusal is a one-line SourceError saying what to do.
 */

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { type RecordBatch, Table, tableToIPC } from 'apache-arrow';
import fc from 'fast-check';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataError, SourceError } from '../../shared/contracts/errors.js';
import type { TableRef } from '../../shared/contracts/source.js';
import { BatchEncoder, encodeRows } from '../../shared/dataplane/encoder.js';
import { toLakeRecord } from '../../shared/dataplane/lake.js';
import { Op } from '../../shared/dataplane/metadata.js';
import type { LogicalType, Schema } from '../../shared/dataplane/schema.js';
import { SchemaChangedError } from '../../shared/dataplane/schema-rules.js';
import { connect } from '../../shared/drivers/postgres/connect.js';
import { introspectTable } from '../../shared/drivers/postgres/introspect.js';
import { PostgresSource, type PostgresSourceOptions } from '../../shared/drivers/postgres/source.js';
import { quoteLiteral } from '../../shared/drivers/postgres/types.js';
import {
  CopyBinaryDecoder,
  type CopyField,
  numericBinaryToText,
} from '../../shared/drivers/postgres/wire/binary-rows.js';
import { rawCopy } from '../../shared/drivers/postgres/wire/copy-tap.js';
import { freePort } from '../../shared/local/free-port.js';
import { decodeKey } from '../../shared/position/key-codec.js';
import { incrementalPosPrefix } from '../../shared/position/position.js';
import {
  DATE_NEG_INFINITY,
  daysToDateText,
  microsToTimestampText,
  TIMESTAMP_NEG_INFINITY,
} from '../../shared/position/time-text.js';
import { encodeParquet } from '../../shared/sink/parquet-writer.js';
import { type FreshDatabase, freshPgDatabase } from '../harness/pg.js';

const CLOCK_MS = 1_700_000_000_123;
const INGEST_NS = BigInt(CLOCK_MS) * 1_000_000n;

let db: FreshDatabase;
let admin: postgres.Sql;
const sources: PostgresSource[] = [];

function source(opts: Partial<PostgresSourceOptions> = {}): PostgresSource {
  const s = new PostgresSource({ url: db.url, lagMs: 0, clock: () => CLOCK_MS, ...opts });
  sources.push(s);
  return s;
}

beforeAll(async () => {
  db = await freshPgDatabase('pg_driver');
  admin = postgres(db.url, { max: 4, onnotice: () => {} });
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
  src: PostgresSource,
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
    const r = await src.incremental(req);
    const b = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
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

/** A table holding one of every read form, incl. NULLs, infinities, empty and padded values. */
const valuesTable = (name: string, withEnum = true) => `
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

describe('introspection', () => {
  it('maps every supported type to its logical type, in attnum order, skipping dropped columns', async () => {
    await admin.unsafe(`
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
      ALTER TABLE all_types DROP COLUMN gone;`);
    const src = source();
    const { ref, schema, warnings } = await src.introspect({
      source: 'public.all_types',
      target: 'lake.all_types',
    });
    expect(warnings).toEqual([]);
    expect(ref).toEqual({ source: 'public.all_types', target: 'lake.all_types', primaryKey: ['id'] });
    const t = (kind: string, extra: object = {}): LogicalType => ({ kind, ...extra }) as LogicalType;
    const list = (element: LogicalType): LogicalType => ({ kind: 'list', element });
    const expected: [string, LogicalType][] = [
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
    expect(schema.columns.map((c) => [c.name, c.type])).toEqual(expected);
    expect(schema.primaryKey).toEqual(['id']);
    expect(schema.columns.find((c) => c.name === 'id')!.nullable).toBe(false);
    expect(schema.columns.find((c) => c.name === 'nn')!.nullable).toBe(false);
    expect(schema.columns.find((c) => c.name === 'i')!.nullable).toBe(true);
    expect(schema.columns.find((c) => c.name === 'n12')!.sourceType).toBe('numeric(12,3)');

    // Exclusions leave the schema but not the table; the primary key cannot be excluded.
    const ex = await src.introspect({ source: 'public.all_types', exclude: ['x', 'mo'] });
    expect(ex.schema.columns.map((c) => c.name)).not.toContain('x');
    await oneLineSourceError(
      src.introspect({ source: 'public.all_types', exclude: ['id'] }),
      'SOURCE_COLUMN_MISSING',
    );
    await oneLineSourceError(
      src.introspect({ source: 'public.all_types', exclude: ['nope'] }),
      'SOURCE_COLUMN_MISSING',
    );
  });

  it('reads every type exactly, the same through both paths', async () => {
    await admin.unsafe(valuesTable('values_t'));
    const src = source();
    const { ref, schema } = await src.introspect({ source: 'public.values_t' });
    const { rows } = await walkBoth(src, ref, schema, 'u', 2);
    expect(rows.map((r) => r.id)).toEqual([3, 1, 2]);
    const [r3, r1, r2] = rows as [Record<string, unknown>, Record<string, unknown>, Record<string, unknown>];
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
  });
});

describe('random tables: row path == batch path', () => {
  /** A column type under test: DDL type, a value arbitrary, and the value's SQL input text. */
  interface TypeCase {
    readonly sql: string;
    readonly value: fc.Arbitrary<string>;
  }
  const micros = fc.bigInt({ min: -200_000_000_000_000_000n, max: 9_000_000_000_000_000_000n });
  const days = fc.integer({ min: -2_000_000, max: 2_000_000 });
  const safeText = fc.string({ unit: 'grapheme', maxLength: 12 }).filter((s) => !s.includes('\0'));
  const arrayText = (el: fc.Arbitrary<string>) =>
    fc
      .array(fc.option(el, { nil: null }), { maxLength: 4 })
      .map(
        (xs) => `{${xs.map((x) => (x === null ? 'NULL' : `"${x.replace(/[\\"]/g, '\\$&')}"`)).join(',')}}`,
      );
  const decimal = (p: number, s: number) =>
    fc.bigInt({ min: -(10n ** BigInt(p)) + 1n, max: 10n ** BigInt(p) - 1n }).map((v) => {
      const neg = v < 0n;
      const digits = (neg ? -v : v).toString().padStart(s + 1, '0');
      return `${neg ? '-' : ''}${digits.slice(0, digits.length - s)}${s > 0 ? `.${digits.slice(digits.length - s)}` : ''}`;
    });
  const TYPES: TypeCase[] = [
    { sql: 'smallint', value: fc.integer({ min: -32768, max: 32767 }).map(String) },
    { sql: 'integer', value: fc.integer().map(String) },
    { sql: 'bigint', value: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String) },
    { sql: 'numeric(12,3)', value: decimal(12, 3) },
    { sql: 'numeric(38,0)', value: decimal(38, 0) },
    { sql: 'numeric', value: fc.oneof(decimal(40, 7), fc.constant('NaN')) },
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
    { sql: 'numeric(6,2)[]', value: arrayText(decimal(6, 2)) },
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
    let n = 0;
    await fc.assert(
      fc.asyncProperty(tableCase, async (tc) => {
        const name = `rnd_${n++}`;
        const cols = tc.columns.map((i, k) => ({ name: `c${k}`, type: TYPES[i]! }));
        const keyCols = tc.compositeKey ? ['k1 int NOT NULL', 'k2 text NOT NULL'] : ['k1 int NOT NULL'];
        const pk = tc.compositeKey ? '(k1, k2)' : '(k1)';
        await admin.unsafe(
          `CREATE TABLE ${name} (${keyCols.join(', ')}, cur ${tc.cursor.sql} NOT NULL, ${cols
            .map((c) => `${c.name} ${c.type.sql}`)
            .join(', ')}, PRIMARY KEY ${pk})`,
        );
        if (tc.rowCount > 0) {
          const rowArb = fc.tuple(
            fc.string({ maxLength: 3 }).filter((s) => !s.includes('\0')),
            tc.cursor.value,
            fc.tuple(...cols.map((c) => fc.option(c.type.value, { nil: null, freq: 4 }))),
          );
          const rows = fc.sample(rowArb, { numRuns: tc.rowCount, seed: tc.seed });
          const params: (string | null)[] = [];
          const tuples = rows.map(([k2, cur, vals], i) => {
            const ph = (v: string | null, type: string) => {
              params.push(v);
              return `$${params.length}::text::${type}`;
            };
            const keys = tc.compositeKey
              ? [ph(String(i % 3), 'int'), ph(`${k2}#${i}`, 'text')]
              : [ph(String(i), 'int')];
            return `(${[...keys, ph(cur, tc.cursor.sql), ...vals.map((v, k) => ph(v, cols[k]!.type.sql))].join(', ')})`;
          });
          await admin.unsafe(`INSERT INTO ${name} VALUES ${tuples.join(', ')}`, params);
        }
        const { ref, schema } = await src.introspect({ source: `public.${name}` });
        const walked = await walkBoth(src, ref, schema, 'cur', tc.pageSize);
        // Every row exactly once, in the database's own (cursor, key) order.
        const expected = await admin.unsafe(
          `SELECT k1${tc.compositeKey ? ', k2' : ''} FROM ${name} ORDER BY cur, k1${tc.compositeKey ? ', k2' : ''}`,
        );
        expect(walked.rows.map((r) => (tc.compositeKey ? `${r.k1}|${r.k2}` : String(r.k1)))).toEqual(
          expected.map((r) => (tc.compositeKey ? `${r.k1}|${r.k2}` : String(r.k1))),
        );
        expect(new Set(walked.tokens).size).toBe(walked.tokens.length);
        await admin.unsafe(`DROP TABLE ${name}`);
      }),
      { numRuns: 40 },
    );
  });
});

describe('keyset paging', () => {
  it('reads every row exactly once when 10,000 rows share one cursor value (page size 97)', async () => {
    await admin.unsafe(`
      CREATE TABLE ties (id int PRIMARY KEY, updated_at timestamptz NOT NULL);
      CREATE INDEX ties_cursor ON ties (updated_at, id);
      INSERT INTO ties SELECT g, '2021-06-01 00:00:00.123456+00' FROM generate_series(1, 10000) g`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: 'public.ties', cursorColumn: 'updated_at' });
    const walked = await walkBoth(src, ref, schema, 'updated_at', 97);
    expect(walked.pages).toBe(Math.ceil(10_000 / 97));
    expect(walked.rows.map((r) => r.id)).toEqual(Array.from({ length: 10_000 }, (_, i) => i + 1));
  });

  it('keeps cursor microseconds exact: rows 1 µs apart come one per page, in order', async () => {
    await admin.unsafe(`
      CREATE TABLE micro (id int PRIMARY KEY, updated_at timestamptz NOT NULL);
      INSERT INTO micro SELECT g, '2022-03-04 05:06:07.000000+00'::timestamptz + (20 - g) * interval '1 microsecond'
      FROM generate_series(1, 20) g`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: 'public.micro' });
    const walked = await walkBoth(src, ref, schema, 'updated_at', 1);
    expect(walked.rows.map((r) => r.id)).toEqual(Array.from({ length: 20 }, (_, i) => 20 - i));
    const base = 1_646_370_367_000_000n;
    expect(
      walked.tokens.map((t) => decodeKey([{ kind: 'timestamp', utc: true }, { kind: 'int32' }], t)[0]),
    ).toEqual(Array.from({ length: 20 }, (_, i) => base + BigInt(i)));
  });

  it('pages a text cursor holding quotes, backslashes and unicode through both paths', async () => {
    await admin.unsafe(`CREATE TABLE quoted (name text PRIMARY KEY, note int)`);
    const names = [
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
    await admin`INSERT INTO quoted ${admin(names.map((name, note) => ({ name, note })))}`;
    const src = source();
    const { ref, schema } = await src.introspect({ source: 'public.quoted' });
    const walked = await walkBoth(src, ref, schema, 'name', 1);
    const expected = await admin`SELECT name FROM quoted ORDER BY name`;
    expect(walked.rows.map((r) => r.name)).toEqual(expected.map((r) => r.name));
    expect(walked.rows).toHaveLength(names.length);
  });

  it('uses the cursor alone as keyset when the table has no primary key but the cursor is UNIQUE NOT NULL', async () => {
    await admin.unsafe(`
      CREATE TABLE nopk (seq bigint NOT NULL UNIQUE, v text);
      INSERT INTO nopk SELECT g, 'v' || g FROM generate_series(1, 25) g`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: 'public.nopk', cursorColumn: 'seq' });
    expect(schema.primaryKey).toEqual([]);
    const walked = await walkBoth(src, ref, schema, 'seq', 4);
    expect(walked.rows.map((r) => r.seq)).toEqual(Array.from({ length: 25 }, (_, i) => BigInt(i + 1)));
  });

  it('pages by an excluded cursor column and counts (and skips) NULL cursors', async () => {
    await admin.unsafe(`
      CREATE TABLE nulls (id int PRIMARY KEY, updated_at timestamptz, v int);
      INSERT INTO nulls SELECT g, CASE WHEN g % 4 = 0 THEN NULL ELSE '2020-01-01+00'::timestamptz + g * interval '1 s' END, g
      FROM generate_series(1, 40) g`);
    const src = source();
    const { ref, schema } = await src.introspect({ source: 'public.nulls', exclude: ['updated_at'] });
    expect(schema.columns.map((c) => c.name)).toEqual(['id', 'v']);
    expect(await src.countNullCursors(ref, 'updated_at')).toBe(10);
    const walked = await walkBoth(src, ref, schema, 'updated_at', 7);
    expect(walked.rows.map((r) => r.id)).toEqual(
      Array.from({ length: 40 }, (_, i) => i + 1).filter((g) => g % 4 !== 0),
    );
    await admin.unsafe('CREATE TABLE notnull_cursor (id int PRIMARY KEY, c int NOT NULL)');
    const nn = await src.introspect({ source: 'public.notnull_cursor' });
    expect(await src.countNullCursors(nn.ref, 'c')).toBe(0);
  });
});

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

describe('safe upper bound', () => {
  it('holds rows back behind an open transaction, so a late commit with an older cursor is not skipped', async () => {
    await admin.unsafe(`
      CREATE TABLE events (id serial PRIMARY KEY, updated_at timestamptz NOT NULL DEFAULT now(), note text);
      INSERT INTO events (note, updated_at) VALUES ('old', now() - interval '1 hour')`);
    const src = source({ stallAfterMs: 0 });
    const { ref, schema } = await src.introspect({ source: 'public.events', cursorColumn: 'updated_at' });
    const writer = await admin.reserve();
    try {
      await writer`BEGIN`;
      await writer`INSERT INTO events (note) VALUES ('late')`; // updated_at = this transaction's start
      const [who] = await writer<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
      const pid = who!.pid;
      await new Promise((r) => setTimeout(r, 20));
      await admin`INSERT INTO events (note) VALUES ('after-1'), ('after-2')`; // committed, newer cursor
      const req = {
        table: ref,
        cursorColumn: 'updated_at',
        after: '',
        pageSize: 100,
        posPrefix: incrementalPosPrefix(1, 1),
        ordinalBase: 0,
      };
      const rowPage = await src.incremental(req);
      const batchPage = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
      // Without the bound this page would hold after-1 and after-2, and its token would pass the
      // late row's cursor: the late row would never be read.
      expect(rowPage.page.map((r) => r.note)).toEqual(['old']);
      expect(batchPage.page!.record.numRows).toBe(1);
      expect(batchPage.next).toBe(rowPage.next);
      expect(rowPage.more).toBe(false);
      const held = rowPage.warnings?.filter((w) => w.code === 'BOUND_HELD') ?? [];
      expect(held.map((w) => (w as unknown as { holder: { pid: number } }).holder.pid)).toContain(pid);
      expect(held[0]!.message).toMatch(/pg_terminate_backend/);

      await writer`COMMIT`;
      const walked = await walkFrom(src, ref, schema, rowPage.next);
      expect(walked).toEqual(['late', 'after-1', 'after-2']);
    } finally {
      await writer`ROLLBACK`.catch(() => undefined);
      writer.release();
    }
  });

  it('holds a sequence cursor page until transactions open at the high-water read have ended', async () => {
    await admin.unsafe(`CREATE TABLE seqt (id bigserial PRIMARY KEY, note text)`);
    const src = source({ lagMs: 300 });
    const { ref, schema } = await src.introspect({ source: 'public.seqt', cursorColumn: 'id' });
    const writer = await admin.reserve();
    try {
      await writer`BEGIN`;
      await writer`INSERT INTO seqt (note) VALUES ('late')`; // id 1, not committed
      await admin`INSERT INTO seqt (note) VALUES ('early')`; // id 2, committed
      const req = {
        table: ref,
        cursorColumn: 'id',
        after: '',
        pageSize: 100,
        posPrefix: incrementalPosPrefix(1, 1),
        ordinalBase: 0,
      };
      const held = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
      expect(held.page).toBeUndefined();
      expect(held.next).toBe('');
      expect(held.warnings?.map((w) => w.code)).toContain('BOUND_HELD');
      const rowsHeld = await src.incremental(req);
      expect(rowsHeld.page).toEqual([]);

      // Commit while a page is waiting: the page then reads both rows.
      const pending = src.incremental({ ...req });
      await new Promise((r) => setTimeout(r, 100));
      await writer`COMMIT`;
      const page = await pending;
      expect(page.page.map((r) => r.note)).toEqual(['late', 'early']);
    } finally {
      await writer`ROLLBACK`.catch(() => undefined);
      writer.release();
    }
  });

  it('refuses a role that cannot see other sessions, with the GRANT to run; lagOnly accepts it', async () => {
    const role = `ro_${db.name.slice(-12)}`;
    await admin.unsafe(`CREATE ROLE ${role} LOGIN PASSWORD 'ro-pw'`);
    try {
      await admin.unsafe(`CREATE TABLE priv (id int PRIMARY KEY, updated_at timestamptz NOT NULL);
        INSERT INTO priv VALUES (1, '2020-01-01+00'); GRANT SELECT ON priv TO ${role}`);
      const url = new URL(db.url);
      url.username = role;
      url.password = 'ro-pw';
      const strict = source({ url: url.toString() });
      const { ref, schema } = await strict.introspect({ source: 'public.priv' });
      const req = {
        table: ref,
        cursorColumn: 'updated_at',
        after: '',
        pageSize: 10,
        posPrefix: incrementalPosPrefix(1, 1),
        ordinalBase: 0,
      };
      const e = await oneLineSourceError(
        strict.incrementalBatch({ ...req, schema, writeMode: 'append' }),
        'SOURCE_PRIVILEGE',
      );
      expect(e.message).toContain(`GRANT pg_read_all_stats TO ${role};`);
      expect(e.message).toContain('lagOnly');

      const lagOnly = source({ url: url.toString(), lagOnly: true });
      await lagOnly.introspect({ source: 'public.priv' });
      const page = await lagOnly.incrementalBatch({ ...req, schema, writeMode: 'append' });
      expect(page.page!.record.numRows).toBe(1);

      await admin.unsafe(`GRANT pg_read_all_stats TO ${role}`);
      const granted = source({ url: url.toString() });
      await granted.introspect({ source: 'public.priv' });
      expect((await granted.incremental(req)).page).toHaveLength(1);

      await admin.unsafe(`CREATE TABLE secret (id int PRIMARY KEY)`);
      const denied = await oneLineSourceError(
        lagOnly.introspect({ source: 'public.secret' }),
        'SOURCE_PRIVILEGE',
      );
      expect(denied.message).toContain(`GRANT SELECT ON "public"."secret" TO "${role}";`);
    } finally {
      await Promise.all(sources.splice(0).map((s) => s.close()));
      await admin.unsafe(`DROP OWNED BY ${role}; DROP ROLE ${role}`);
    }
  });
});

/** Reads the rest of `events` from `after`, both paths, returning notes. */
async function walkFrom(
  src: PostgresSource,
  ref: TableRef,
  schema: Schema,
  after: string,
): Promise<unknown[]> {
  const notes: unknown[] = [];
  let token = after;
  for (let seq = 2; ; seq++) {
    const req = {
      table: ref,
      cursorColumn: 'updated_at',
      after: token,
      pageSize: 1,
      posPrefix: incrementalPosPrefix(seq, 1),
      ordinalBase: 0,
    };
    const r = await src.incremental(req);
    const b = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
    expect(b.next).toBe(r.next);
    notes.push(...r.page.map((x) => x.note));
    token = r.next;
    if (!r.more) return notes;
  }
}

describe('refusals are one-line SourceErrors', () => {
  it('wrong password', async () => {
    const url = new URL(db.url);
    url.password = 'not-the-password';
    const e = await oneLineSourceError(
      source({ url: url.toString() }).introspect({ source: 'public.priv' }),
      'SOURCE_AUTH_FAILED',
    );
    expect(e.message).toMatch(
      /^authentication failed for user "postgres" at 127\.0\.0\.1:\d+; check the password in the source URL$/,
    );
    expect(e.message).not.toContain('not-the-password');
  });

  it('unreachable port', async () => {
    const url = new URL(db.url);
    url.port = String(await freePort());
    const e = await oneLineSourceError(
      source({ url: url.toString() }).introspect({ source: 'public.x' }),
      'SOURCE_UNREACHABLE',
    );
    expect(e.message).toContain(`127.0.0.1:${url.port}`);
  });

  it('missing database', async () => {
    const url = new URL(db.url);
    url.pathname = '/no_such_db';
    await oneLineSourceError(
      source({ url: url.toString() }).introspect({ source: 'public.x' }),
      'SOURCE_DATABASE_MISSING',
    );
  });

  it('unknown table, with similar names', async () => {
    await admin.unsafe('CREATE TABLE customers (id int PRIMARY KEY)');
    const e = await oneLineSourceError(
      source().introspect({ source: 'public.custmers' }),
      'SOURCE_TABLE_MISSING',
    );
    expect(e.message).toContain('public.custmers');
    expect(e.message).toContain('did you mean public.customers');
  });

  it('missing cursor column, unorderable cursor, no primary key with a non-unique cursor', async () => {
    await admin.unsafe(`
      CREATE TABLE cur_checks (id int PRIMARY KEY, j json, updated_at timestamptz);
      CREATE TABLE no_pk (updated_at timestamptz NOT NULL, v int)`);
    const src = source();
    const missing = await oneLineSourceError(
      src.introspect({ source: 'public.cur_checks', cursorColumn: 'updatd_at' }),
      'SOURCE_CURSOR_INVALID',
    );
    expect(missing.message).toContain('"updatd_at" does not exist');
    const unorderable = await oneLineSourceError(
      src.introspect({ source: 'public.cur_checks', cursorColumn: 'j' }),
      'SOURCE_CURSOR_INVALID',
    );
    expect(unorderable.message).toContain('cannot be ordered');
    const noPk = await oneLineSourceError(
      src.introspect({ source: 'public.no_pk', cursorColumn: 'updated_at' }),
      'SOURCE_KEY_MISSING',
    );
    expect(noPk.message).toContain('public.no_pk has no primary key');
    // The same checks run on the first page when introspect was not given the cursor.
    const { ref } = await src.introspect({ source: 'public.no_pk' });
    await oneLineSourceError(
      src.incremental({
        table: ref,
        cursorColumn: 'updated_at',
        after: '',
        pageSize: 5,
        posPrefix: incrementalPosPrefix(1, 1),
        ordinalBase: 0,
      }),
      'SOURCE_KEY_MISSING',
    );
  });

  it('warns (does not refuse) when no index leads with the cursor column', async () => {
    const src = source();
    const { warnings } = await src.introspect({ source: 'public.cur_checks', cursorColumn: 'updated_at' });
    expect(warnings.map((w) => w.code)).toEqual(['CURSOR_NOT_INDEXED']);
    expect(warnings[0]!.message).toContain(
      'CREATE INDEX CONCURRENTLY ON "public"."cur_checks" ("updated_at", "id");',
    );
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
  it('estimates the row count from planner statistics, for the first sync ETA', async () => {
    await admin.unsafe('CREATE TABLE est (id int PRIMARY KEY)');
    const src = source();
    const { ref } = await src.introspect({ source: 'public.est' });
    expect(await src.estimateRows(ref)).toBeUndefined(); // never analyzed: no guess
    await admin.unsafe('INSERT INTO est SELECT generate_series(1, 5000); ANALYZE est');
    const n = await src.estimateRows(ref);
    expect(n).toBeGreaterThan(4000);
    expect(n).toBeLessThan(6000);
  });

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
