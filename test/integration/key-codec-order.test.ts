/**
 * The key codec's order checked against the databases themselves: random rows go into real
 * Postgres and MariaDB tables, each database sorts them (`ORDER BY col, id` and a three-part
 * tuple), and the tokens of the returned rows must come out in the same order, with equal tokens
 * exactly where the database says the values are equal. Values are read back in their exact text
 * form and converted with `time-text.ts`, which is cross-checked against the database's own
 * arithmetic (epoch microseconds, day differences). The two order properties are written once
 * (`expectColumnOrder`, `expectTupleOrder`) and run on each database's columns and ORDER BY.
 *
 * Also documents the two ways a database orders text differently from the tokens (non-C
 * collations, and MariaDB's PAD SPACE `utf8mb4_bin`): why `__pos` starts with a commit sequence.
 */
import fc from 'fast-check';
import mysql from 'mysql2/promise';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogicalType } from '../../shared/dataplane/schema.js';
import { encodeKey } from '../../shared/position/key-codec.js';
import {
  DATE_INFINITY,
  DATE_NEG_INFINITY,
  dateTextToDays,
  daysToDateText,
  microsToTimestampText,
  TIMESTAMP_INFINITY,
  TIMESTAMP_NEG_INFINITY,
  timestampTextToMicros,
} from '../../shared/position/time-text.js';
import { type FreshDatabase, freshMysqlDatabase } from '../harness/mysql.js';
import { freshPgDatabase } from '../harness/pg.js';

const ROWS = 200;
const RUNS = 3;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const MICROS_PER_DAY = 86_400_000_000n;

/** A column under test: its logical type, a row value arbitrary, how to write and read it. */
interface ColumnCase {
  readonly name: string;
  readonly sqlType: string;
  readonly type: LogicalType;
  readonly value: fc.Arbitrary<unknown>;
  /** Value -> what the insert sends. */
  readonly toSql: (v: unknown) => unknown;
  /** SQL expression reading the column back exactly (as text where the client would round). */
  readonly select: (col: string) => string;
  /** What the client returns for `select` -> the value universe. */
  readonly fromSql: (raw: unknown) => unknown;
}

/** Ties are what keyset pagination gets wrong: draw half the values from a tiny pool. */
function withTies<T>(wide: fc.Arbitrary<T>, ...pool: T[]): fc.Arbitrary<T> {
  return fc.oneof(wide, fc.constantFrom(...pool));
}

/** A decimal text with up to `whole` integer and `fraction` fraction digits. */
function decimalText(whole: number, fraction: number): fc.Arbitrary<string> {
  return fc
    .tuple(
      fc.boolean(),
      fc.bigInt({ min: 0n, max: 10n ** BigInt(whole) - 1n }),
      fc.nat({ max: fraction }),
      fc.bigInt({ min: 0n, max: 10n ** BigInt(fraction) - 1n }),
    )
    .map(([negative, w, scale, f]) => {
      const frac = scale === 0 ? '' : `.${(f % 10n ** BigInt(scale)).toString().padStart(scale, '0')}`;
      return `${negative ? '-' : ''}${w}${frac}`;
    });
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
const asText = (raw: unknown) => raw as string;
const noNul = (s: string) => !s.includes('\u0000');

function tokenOf(types: readonly LogicalType[], row: readonly unknown[]): string {
  return encodeKey(types, row);
}

/**
 * Asserts the tokens of rows in database order are non-decreasing, and equal exactly where the
 * database said "equal to the previous row" (`eqPrev`).
 */
function expectSameOrder(label: string, tokens: readonly string[], eqPrev: readonly boolean[]): void {
  for (let i = 1; i < tokens.length; i++) {
    const [prev, cur] = [tokens[i - 1]!, tokens[i]!];
    if (eqPrev[i]) expect(cur, `${label}: row ${i} equals row ${i - 1} in the database`).toBe(prev);
    else
      expect(
        prev < cur,
        `${label}: row ${i - 1} sorts before row ${i} in the database\n${prev}\n${cur}`,
      ).toBe(true);
  }
}

/** A database the order properties run against: its columns, and its ORDER BY. */
interface OrderedDatabase {
  readonly columns: readonly ColumnCase[];
  /** Replaces the table's rows with `data` (ids, and a value per column per row). */
  load(data: [bigint[], unknown[][]]): Promise<void>;
  /**
   * Rows in the database's order of (columns..., id) as universe tuples, with "equal to the
   * previous row".
   */
  ordered(
    columns: readonly ColumnCase[],
    withId: boolean,
  ): Promise<{ tuples: unknown[][]; eqPrev: boolean[] }>;
  /**
   * Also check, ordering by (col, id), that every value read back has the token of the value
   * sent (decimals compare as numbers: MariaDB pads to the column scale).
   */
  readonly readBackByToken?: boolean;
}

/** ROWS rows: unique ids (ties at the int64 limits and 0 likely) and a value per column. */
function rowsArbitrary(columns: readonly ColumnCase[]): fc.Arbitrary<[bigint[], unknown[][]]> {
  return fc.tuple(
    fc.uniqueArray(withTies(fc.bigInt({ min: INT64_MIN, max: INT64_MAX }), INT64_MIN, INT64_MAX, 0n), {
      minLength: ROWS,
      maxLength: ROWS,
    }),
    fc.array(fc.tuple(...columns.map((c) => c.value)), { minLength: ROWS, maxLength: ROWS }),
  );
}

/** Tokens sort as ORDER BY col, and as ORDER BY (col, id), for every column of `db`. */
async function expectColumnOrder(db: OrderedDatabase): Promise<void> {
  await fc.assert(
    fc.asyncProperty(rowsArbitrary(db.columns), async (data) => {
      await db.load(data);
      const [ids, values] = data;
      const inserted = new Map(ids.map((id, i) => [String(id), values[i]!]));
      for (const [j, column] of db.columns.entries()) {
        for (const withId of [false, true]) {
          const { tuples, eqPrev } = await db.ordered([column], withId);
          expect(tuples).toHaveLength(ROWS);
          const types = withId ? [column.type, { kind: 'int64' } as const] : [column.type];
          expectSameOrder(
            `${column.name}${withId ? ', id' : ''}`,
            tuples.map((t) => tokenOf(types, t)),
            eqPrev,
          );
          if (withId) expect(eqPrev.every((e) => !e)).toBe(true);
          if (withId && db.readBackByToken) {
            for (const t of tuples) {
              const sent = inserted.get(String(t[1]))![j];
              expect(tokenOf([column.type], [t[0]])).toBe(tokenOf([column.type], [sent]));
            }
          }
        }
      }
    }),
    { numRuns: RUNS, endOnFailure: true },
  );
}

/** Tokens sort as ORDER BY over three-part tuples: each of `combos` (column names), then id. */
async function expectTupleOrder(db: OrderedDatabase, combos: readonly string[][]): Promise<void> {
  const byName = (n: string) => db.columns.find((c) => c.name === n)!;
  await fc.assert(
    fc.asyncProperty(rowsArbitrary(db.columns), async (data) => {
      await db.load(data);
      for (const names of combos) {
        const columns = names.map(byName);
        const { tuples, eqPrev } = await db.ordered(columns, true);
        expectSameOrder(
          names.join(', '),
          tuples.map((t) => tokenOf([...columns.map((c) => c.type), { kind: 'int64' }], t)),
          eqPrev,
        );
      }
    }),
    { numRuns: RUNS, endOnFailure: true },
  );
}

// ---------------------------------------------------------------------------------------------
// Postgres

const PG_MIN_MICROS = -210_866_803_200_000_000n; // 4714-11-24 00:00 BC
const PG_MIN_DAYS = -2_440_588;
const PG_MAX_DAYS = 2_145_042_905; // 5874897-12-31

const pgText = fc.string({ unit: 'binary', maxLength: 8 }).filter(noNul);
const pgTimestamp = withTies(
  fc.oneof(
    fc.bigInt({ min: PG_MIN_MICROS, max: INT64_MAX - 1n }),
    fc.bigInt({ min: -(10n ** 15n), max: 10n ** 15n }), // 1938..2001, pre-1970 included
    fc.bigInt({ min: 253_402_214_400_000_000n, max: 253_402_300_799_999_999n }), // 9999-12-31
  ),
  TIMESTAMP_INFINITY,
  TIMESTAMP_NEG_INFINITY,
  0n,
  -1n,
  1n,
);

const PG_COLUMNS: ColumnCase[] = [
  {
    name: 'c_int8',
    sqlType: 'bigint',
    type: { kind: 'int64' },
    value: withTies(
      fc.bigInt({ min: INT64_MIN, max: INT64_MAX }),
      INT64_MIN,
      INT64_MAX,
      2n ** 53n,
      2n ** 53n + 1n,
      0n,
    ),
    toSql: String,
    select: (c) => `${c}::text`,
    fromSql: (raw) => BigInt(raw as string),
  },
  {
    name: 'c_int4',
    sqlType: 'integer',
    type: { kind: 'int32' },
    value: withTies(fc.integer(), -1, 0, 1, 2 ** 31 - 1, -(2 ** 31)),
    toSql: String,
    select: (c) => `${c}::text`,
    fromSql: (raw) => Number(raw),
  },
  {
    name: 'c_int2',
    sqlType: 'smallint',
    type: { kind: 'int16' },
    value: fc.integer({ min: -32768, max: 32767 }),
    toSql: String,
    select: (c) => `${c}::text`,
    fromSql: (raw) => Number(raw),
  },
  {
    name: 'c_num',
    sqlType: 'numeric',
    type: { kind: 'decimal', precision: 1000, scale: 0 },
    value: withTies(
      fc.oneof(decimalText(60, 40), decimalText(3, 3)),
      'NaN',
      'Infinity',
      '-Infinity',
      '0',
      '1.5',
      '1.50',
      '-0.0001',
      `0.${'0'.repeat(29)}1`,
      '9'.repeat(38),
    ),
    toSql: String,
    select: (c) => `${c}::text`,
    fromSql: asText,
  },
  {
    name: 'c_tstz',
    sqlType: 'timestamptz',
    type: { kind: 'timestamp', utc: true },
    value: pgTimestamp,
    toSql: (v) => microsToTimestampText(v as bigint, true),
    select: (c) => `${c}::text`,
    fromSql: (raw) => timestampTextToMicros(raw as string),
  },
  {
    name: 'c_ts',
    sqlType: 'timestamp',
    type: { kind: 'timestamp', utc: false },
    value: pgTimestamp,
    toSql: (v) => microsToTimestampText(v as bigint, false),
    select: (c) => `${c}::text`,
    fromSql: (raw) => timestampTextToMicros(raw as string),
  },
  {
    name: 'c_date',
    sqlType: 'date',
    type: { kind: 'date' },
    value: withTies(
      fc.integer({ min: PG_MIN_DAYS, max: PG_MAX_DAYS }),
      DATE_INFINITY,
      DATE_NEG_INFINITY,
      0,
      -1,
      2_932_896,
    ),
    toSql: (v) => daysToDateText(v as number),
    select: (c) => `${c}::text`,
    fromSql: (raw) => dateTextToDays(raw as string),
  },
  {
    name: 'c_text',
    sqlType: 'text COLLATE "C"',
    type: { kind: 'text' },
    value: withTies(
      fc.oneof(
        pgText,
        fc.string({ unit: fc.constantFrom('a', 'b', '!', ' ', '\u00e9', '\uffff', '😀'), maxLength: 4 }),
      ),
      '',
      ' ',
      '!',
      'a',
      'ab',
      '😀',
    ),
    toSql: String,
    select: (c) => c,
    fromSql: asText,
  },
  {
    name: 'c_uuid',
    sqlType: 'uuid',
    type: { kind: 'text' },
    value: withTies(
      fc.uuid(),
      '00000000-0000-0000-0000-000000000000',
      'ffffffff-ffff-ffff-ffff-ffffffffffff',
    ),
    toSql: String,
    select: (c) => `${c}::text`,
    fromSql: asText,
  },
  {
    name: 'c_bytea',
    sqlType: 'bytea',
    type: { kind: 'binary' },
    value: withTies(
      fc.uint8Array({ maxLength: 8 }),
      new Uint8Array([]),
      new Uint8Array([0]),
      new Uint8Array([0, 0]),
    ),
    toSql: (v) => `\\x${hex(v as Uint8Array)}`,
    select: (c) => `encode(${c}, 'hex')`,
    fromSql: (raw) => new Uint8Array(Buffer.from(raw as string, 'hex')),
  },
  {
    name: 'c_bool',
    sqlType: 'boolean',
    type: { kind: 'bool' },
    value: fc.boolean(),
    toSql: String,
    select: (c) => `${c}::text`,
    fromSql: (raw) => raw === 'true',
  },
  {
    name: 'c_float',
    sqlType: 'double precision',
    type: { kind: 'float64' },
    value: withTies(fc.double(), Number.NaN, Infinity, -Infinity, 0, -0, 1),
    toSql: (v) => (Object.is(v, -0) ? '-0' : String(v)),
    select: (c) => `${c}::text`,
    fromSql: (raw) => Number(raw),
  },
];

describe('key codec order vs Postgres ORDER BY', () => {
  let db: FreshDatabase;
  let sql: postgres.Sql;

  beforeAll(async () => {
    db = await freshPgDatabase('key_codec_order');
    sql = postgres(db.url, { max: 1, onnotice: () => {}, connection: { TimeZone: 'UTC' } });
    const columns = PG_COLUMNS.map((c) => `${c.name} ${c.sqlType} NOT NULL`).join(', ');
    await sql.unsafe(`CREATE TABLE t (id bigint PRIMARY KEY, ${columns})`);
  });

  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  async function load([ids, rows]: [bigint[], unknown[][]]): Promise<void> {
    await sql.unsafe('TRUNCATE t');
    const records = rows.map((row, i) => {
      const record: Record<string, unknown> = { id: String(ids[i]) };
      PG_COLUMNS.forEach((c, j) => {
        record[c.name] = c.toSql(row[j]);
      });
      return record;
    });
    await sql.unsafe('INSERT INTO t SELECT * FROM json_populate_recordset(NULL::t, $1::text::json)', [
      JSON.stringify(records),
    ]);
  }

  /**
   * Rows in the database's order of (columns..., id) as universe tuples, with "equal to the
   * previous row". Output aliases must not shadow table columns: ORDER BY prefers the alias.
   */
  async function ordered(
    columns: readonly ColumnCase[],
    withId: boolean,
  ): Promise<{ tuples: unknown[][]; eqPrev: boolean[] }> {
    const key = [...columns.map((c) => c.name), ...(withId ? ['id'] : [])];
    const rowExpr = key.length === 1 ? key[0]! : `ROW(${key.join(', ')})`;
    const rows = await sql.unsafe(
      `SELECT ${columns.map((c, i) => `${c.select(c.name)} AS v${i}`).join(', ')}, id::text AS id_text,
              COALESCE(${rowExpr} = lag(${rowExpr}) OVER (ORDER BY ${key.join(', ')}), false) AS eq_prev
         FROM t ORDER BY ${key.join(', ')}`,
    );
    return {
      tuples: rows.map((r) => [
        ...columns.map((c, i) => c.fromSql(r[`v${i}`])),
        ...(withId ? [BigInt(r.id_text as string)] : []),
      ]),
      eqPrev: rows.map((r) => r.eq_prev as boolean),
    };
  }

  const pg: OrderedDatabase = { columns: PG_COLUMNS, load, ordered };

  it('tokens sort as ORDER BY col, and as ORDER BY (col, id), for every column type', () =>
    expectColumnOrder(pg));

  it('tokens sort as ORDER BY over three-part tuples (cursor, text pk part, id)', () =>
    expectTupleOrder(pg, [
      ['c_tstz', 'c_text'],
      ['c_num', 'c_bytea'],
      ['c_bool', 'c_float'],
      ['c_date', 'c_uuid'],
    ]));

  it('reads timestamps and dates back exactly, agreeing with the database arithmetic', async () => {
    await fc.assert(
      fc.asyncProperty(rowsArbitrary(PG_COLUMNS), async (data) => {
        await load(data);
        const rows = await sql.unsafe(`
          SELECT id::text AS id, c_tstz::text AS tstz, c_ts::text AS ts, c_date::text AS d,
                 CASE WHEN isfinite(c_tstz) THEN (extract(epoch FROM c_tstz) * 1000000)::numeric(30, 0)::text END AS tstz_us,
                 CASE WHEN isfinite(c_ts) THEN (extract(epoch FROM c_ts) * 1000000)::numeric(30, 0)::text END AS ts_us,
                 CASE WHEN isfinite(c_date) THEN (c_date - date '1970-01-01')::text END AS d_days
            FROM t`);
        const [ids, values] = data;
        const inserted = new Map(ids.map((id, i) => [String(id), values[i]!]));
        const at = (n: string) => PG_COLUMNS.findIndex((c) => c.name === n);
        for (const r of rows) {
          const row = inserted.get(r.id as string)!;
          expect(timestampTextToMicros(r.tstz as string)).toBe(row[at('c_tstz')]);
          expect(timestampTextToMicros(r.ts as string)).toBe(row[at('c_ts')]);
          expect(dateTextToDays(r.d as string)).toBe(row[at('c_date')]);
          // Postgres prints what we print: the text forms round-trip character for character.
          expect(microsToTimestampText(timestampTextToMicros(r.tstz as string), true)).toBe(r.tstz);
          expect(microsToTimestampText(timestampTextToMicros(r.ts as string), false)).toBe(r.ts);
          expect(daysToDateText(dateTextToDays(r.d as string))).toBe(r.d);
          if (r.tstz_us !== null)
            expect(timestampTextToMicros(r.tstz as string)).toBe(BigInt(r.tstz_us as string));
          if (r.ts_us !== null) expect(timestampTextToMicros(r.ts as string)).toBe(BigInt(r.ts_us as string));
          if (r.d_days !== null) expect(dateTextToDays(r.d as string)).toBe(Number(r.d_days));
        }
      }),
      { numRuns: RUNS, endOnFailure: true },
    );
  });

  it('agrees with Postgres on the calendar limits and the infinities', async () => {
    const [r] = await sql.unsafe(`
      SELECT ('5874897-12-31'::date - date '1970-01-01') AS max_days,
             ('4714-11-24 BC'::date - date '1970-01-01') AS min_days,
             '4714-11-24 00:00:00+00 BC'::timestamptz::text AS min_tstz,
             'infinity'::timestamptz::text AS inf, '-infinity'::date::text AS neg_inf`);
    expect(r!.max_days).toBe(PG_MAX_DAYS);
    expect(r!.min_days).toBe(PG_MIN_DAYS);
    expect(timestampTextToMicros(r!.min_tstz as string)).toBe(PG_MIN_MICROS);
    expect(timestampTextToMicros(r!.inf as string)).toBe(TIMESTAMP_INFINITY);
    expect(dateTextToDays(r!.neg_inf as string)).toBe(DATE_NEG_INFINITY);
  });

  it('documents: a non-C collation orders text differently from the tokens', async () => {
    const strings = ['a', 'B', 'b', 'A', 'a b', 'ab', 'é', 'f'];
    const [icu] = await sql.unsafe(
      `SELECT collname FROM pg_collation WHERE collname IN ('en-US-x-icu', 'und-x-icu', 'en_US.utf8') ORDER BY collname LIMIT 1`,
    );
    const order = async (collation: string) =>
      (
        await sql.unsafe(`SELECT s FROM unnest($1::text[]) AS s ORDER BY s COLLATE "${collation}"`, [strings])
      ).map((r) => r.s as string);
    const byToken = [...strings].sort((x, y) => {
      const [tx, ty] = [tokenOf([{ kind: 'text' }], [x]), tokenOf([{ kind: 'text' }], [y])];
      return tx < ty ? -1 : tx > ty ? 1 : 0;
    });
    expect(await order('C')).toEqual(byToken);
    expect(icu, 'this Postgres has no ICU or en_US collation to show the difference with').toBeDefined();
    const natural = await order(icu!.collname as string);
    // e.g. en-US: a, A, a b, ab, b, B, é, f   vs bytes: A, B, a, a b, ab, b, f, é
    expect(natural).not.toEqual(byToken);
  });
});

// ---------------------------------------------------------------------------------------------
// MariaDB

const MY_MIN_MICROS = timestampTextToMicros('1000-01-01 00:00:00');
const MY_MAX_MICROS = timestampTextToMicros('9999-12-31 23:59:59.999999');
const MY_TS_MIN = timestampTextToMicros('1970-01-01 00:00:01');
const MY_TS_MAX = timestampTextToMicros('2038-01-19 03:14:07.999999');

const MY_COLUMNS: ColumnCase[] = [
  {
    name: 'c_int8',
    sqlType: 'BIGINT',
    type: { kind: 'int64' },
    value: withTies(fc.bigInt({ min: INT64_MIN, max: INT64_MAX }), INT64_MIN, INT64_MAX, 2n ** 53n + 1n, 0n),
    toSql: String,
    select: (c) => c,
    fromSql: (raw) => BigInt(raw as string | number),
  },
  {
    name: 'c_int4',
    sqlType: 'INT',
    type: { kind: 'int32' },
    value: withTies(fc.integer(), -1, 0, 1),
    toSql: (v) => v,
    select: (c) => c,
    fromSql: (raw) => raw,
  },
  {
    name: 'c_int1',
    sqlType: 'TINYINT',
    type: { kind: 'int8' },
    value: fc.integer({ min: -128, max: 127 }),
    toSql: (v) => v,
    select: (c) => c,
    fromSql: (raw) => raw,
  },
  {
    name: 'c_dec38',
    sqlType: 'DECIMAL(38,10)',
    type: { kind: 'decimal', precision: 38, scale: 10 },
    value: withTies(
      fc.oneof(decimalText(28, 10), decimalText(2, 2)),
      '0',
      '-0.0001',
      '1.5',
      `${'9'.repeat(28)}.${'9'.repeat(10)}`,
    ),
    toSql: String,
    select: (c) => c,
    fromSql: asText,
  },
  {
    name: 'c_dec65',
    sqlType: 'DECIMAL(65,30)',
    type: { kind: 'decimal', precision: 65, scale: 30 },
    value: withTies(
      decimalText(35, 30),
      '0',
      `0.${'0'.repeat(29)}1`,
      `-0.${'0'.repeat(29)}1`,
      `-${'9'.repeat(35)}`,
    ),
    toSql: String,
    select: (c) => c,
    fromSql: asText,
  },
  {
    name: 'c_dt',
    sqlType: 'DATETIME(6)',
    type: { kind: 'timestamp', utc: false },
    value: withTies(
      fc.bigInt({ min: MY_MIN_MICROS, max: MY_MAX_MICROS }),
      MY_MIN_MICROS,
      MY_MAX_MICROS,
      -1n,
      0n,
      1n,
    ),
    toSql: (v) => microsToTimestampText(v as bigint, false),
    select: (c) => c,
    fromSql: (raw) => timestampTextToMicros(raw as string),
  },
  {
    name: 'c_tstamp',
    sqlType: 'TIMESTAMP(6) NULL',
    type: { kind: 'timestamp', utc: true },
    value: withTies(fc.bigInt({ min: MY_TS_MIN, max: MY_TS_MAX }), MY_TS_MIN, MY_TS_MAX),
    toSql: (v) => microsToTimestampText(v as bigint, false),
    select: (c) => c,
    fromSql: (raw) => timestampTextToMicros(raw as string),
  },
  {
    name: 'c_date',
    sqlType: 'DATE',
    type: { kind: 'date' },
    value: withTies(fc.integer({ min: Number(MY_MIN_MICROS / MICROS_PER_DAY), max: 2_932_896 }), -1, 0, 1),
    toSql: (v) => daysToDateText(v as number),
    select: (c) => c,
    fromSql: (raw) => dateTextToDays(raw as string),
  },
  {
    name: 'c_bin',
    sqlType: 'VARBINARY(16)',
    type: { kind: 'binary' },
    value: withTies(
      fc.uint8Array({ maxLength: 8 }),
      new Uint8Array([]),
      new Uint8Array([0]),
      new Uint8Array([0, 0]),
    ),
    toSql: (v) => Buffer.from(v as Uint8Array),
    select: (c) => c,
    fromSql: (raw) => new Uint8Array(raw as Buffer),
  },
  {
    // NO PAD: utf8mb4_bin is PAD SPACE in MariaDB (see the documenting test below).
    name: 'c_text',
    sqlType: 'VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin',
    type: { kind: 'text' },
    value: withTies(
      fc.oneof(
        fc.string({ unit: 'binary', maxLength: 8 }),
        fc.string({
          unit: fc.constantFrom('a', 'b', '!', ' ', '\u0000', '\u00e9', '\uffff', '😀'),
          maxLength: 4,
        }),
      ),
      '',
      ' ',
      'a',
      'a ',
    ),
    toSql: String,
    select: (c) => c,
    fromSql: asText,
  },
  {
    name: 'c_bool',
    sqlType: 'BOOLEAN',
    type: { kind: 'bool' },
    value: fc.boolean(),
    toSql: (v) => (v ? 1 : 0),
    select: (c) => c,
    fromSql: (raw) => raw === 1,
  },
  {
    name: 'c_dbl',
    sqlType: 'DOUBLE',
    type: { kind: 'float64' },
    value: withTies(fc.double({ noNaN: true, noDefaultInfinity: true }), 0, -0, 1, -1, 988363526545097.9),
    toSql: (v) => v,
    // Read as the server's text and parsed here, as the driver does (typeCast: false; `ordered`
    // below): mysql2's own parse of a DOUBLE is not exact (988363526545097.9 came back as
    // 988363526545098), and CAST(... AS CHAR) prints 15 digits.
    select: (c) => c,
    fromSql: (raw) => Number(raw),
  },
];

describe('key codec order vs MariaDB ORDER BY', () => {
  let db: FreshDatabase;
  let connection: mysql.Connection;

  beforeAll(async () => {
    db = await freshMysqlDatabase('key_codec_order');
    connection = await mysql.createConnection({
      uri: db.url,
      dateStrings: true,
      supportBigNumbers: true,
      bigNumberStrings: true,
    });
    await connection.query("SET time_zone = '+00:00'");
    const columns = MY_COLUMNS.map((c) => `${c.name} ${c.sqlType}`).join(', ');
    await connection.query(`CREATE TABLE t (id BIGINT PRIMARY KEY, ${columns}) ENGINE=InnoDB`);
  });

  afterAll(async () => {
    await connection?.end();
    await db?.drop();
  });

  async function load([ids, rows]: [bigint[], unknown[][]]): Promise<void> {
    await connection.query('TRUNCATE t');
    const values = rows.map((row, i) => [String(ids[i]), ...MY_COLUMNS.map((c, j) => c.toSql(row[j]))]);
    await connection.query(`INSERT INTO t (id, ${MY_COLUMNS.map((c) => c.name).join(', ')}) VALUES ?`, [
      values,
    ]);
  }

  async function ordered(
    columns: readonly ColumnCase[],
    withId: boolean,
  ): Promise<{ tuples: unknown[][]; eqPrev: boolean[] }> {
    const key = [...columns.map((c) => c.name), ...(withId ? ['id'] : [])];
    const equalPrev = key.map((k) => `${k} <=> lag(${k}) OVER (ORDER BY ${key.join(', ')})`).join(' AND ');
    const [rows] = await connection.query({
      sql: `SELECT ${columns.map((c, i) => `${c.select(c.name)} AS v${i}`).join(', ')}, id, COALESCE(${equalPrev}, 0) AS eq_prev
         FROM t ORDER BY ${key.join(', ')}`,
      // DOUBLE as the server's text (see c_dbl).
      typeCast: (field, next) => (field.type === 'DOUBLE' ? field.string() : next()),
    });
    const list = rows as Record<string, unknown>[];
    return {
      tuples: list.map((r) => [
        ...columns.map((c, i) => c.fromSql(r[`v${i}`])),
        ...(withId ? [BigInt(r.id as string)] : []),
      ]),
      eqPrev: list.map((r) => Number(r.eq_prev) === 1),
    };
  }

  // Values read back exactly (decimals compare as numbers: MariaDB pads to the column scale).
  const maria: OrderedDatabase = { columns: MY_COLUMNS, load, ordered, readBackByToken: true };

  it('tokens sort as ORDER BY col, and as ORDER BY (col, id), for every column type', () =>
    expectColumnOrder(maria));

  it('tokens sort as ORDER BY over three-part tuples (cursor, text/binary pk part, id)', () =>
    expectTupleOrder(maria, [
      ['c_dt', 'c_text'],
      ['c_dec65', 'c_bin'],
      ['c_bool', 'c_dbl'],
      ['c_date', 'c_dec38'],
    ]));

  it('documents: utf8mb4_unicode_ci and PAD SPACE utf8mb4_bin order text differently from the tokens', async () => {
    const strings = ['a', 'B', 'b', 'A', 'a\u0001', 'a ', 'ab'];
    const order = async (collation: string) => {
      const [rows] = await connection.query(
        `SELECT s FROM JSON_TABLE(?, '$[*]' COLUMNS (s VARCHAR(16) CHARACTER SET utf8mb4 PATH '$')) AS j
          ORDER BY s COLLATE ${collation}, BINARY s`,
        [JSON.stringify(strings)],
      );
      return (rows as { s: string }[]).map((r) => r.s);
    };
    const byToken = [...strings].sort((x, y) => {
      const [tx, ty] = [tokenOf([{ kind: 'text' }], [x]), tokenOf([{ kind: 'text' }], [y])];
      return tx < ty ? -1 : tx > ty ? 1 : 0;
    });
    expect(await order('utf8mb4_nopad_bin')).toEqual(byToken);
    expect(await order('utf8mb4_unicode_ci')).not.toEqual(byToken);
    // PAD SPACE compares 'a' as 'a ' (so 'a' = 'a ' and 'a' > 'a\x01'); bytes say 'a' < 'a\x01' < 'a '.
    const padded = await order('utf8mb4_bin');
    expect(padded).not.toEqual(byToken);
    expect(padded.indexOf('a\u0001')).toBeLessThan(padded.indexOf('a'));
  });

  it('documents: MariaDB silently drops a zone offset in a literal, so MySQL literals carry none', async () => {
    const plain = microsToTimestampText(1_704_164_645_123_456n, false);
    expect(plain).toBe('2024-01-02 03:04:05.123456');
    const [rows] = await connection.query(
      'SELECT CAST(? AS DATETIME(6)) AS plain, CAST(? AS DATETIME(6)) AS shifted',
      [plain, `${plain}+05:30`],
    );
    const [r] = rows as { plain: string; shifted: string }[];
    expect(r!.plain).toBe(plain);
    // '+05:30' means 5.5 hours earlier in UTC, but MariaDB reads the same wall clock (a warning only).
    expect(r!.shifted).toBe(plain);
  });
});
