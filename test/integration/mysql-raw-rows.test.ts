/**
 * The raw result-set reader (connect.ts `eachRow` + text-rows.ts `walkRow` + types.ts
 * `rangeAppenderOf`) against the mysql2 path (`each`: a Buffer per value, parseValue) on the
 * harness MariaDB: random rows of every supported type, NULLs, empty strings, multi-byte UTF-8
 * and latin1 text, values past 250 and 65 535 bytes (0xFC/0xFD length prefixes), in results big
 * enough that rows straddle socket chunks. Every value's range must be exactly mysql2's Buffer,
 * and the two batches byte-identical.
 */
import { Table, tableToIPC } from 'apache-arrow';
import fc from 'fast-check';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BatchEncoder } from '../../shared/dataplane/encoder.js';
import { Op } from '../../shared/dataplane/metadata.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { MysqlConnection, type RawRow } from '../../shared/drivers/mysql/connect.js';
import { introspectTable, type TablePlan } from '../../shared/drivers/mysql/introspect.js';
import { parseValue, rangeAppenderOf } from '../../shared/drivers/mysql/types.js';
import {
  binaryAppenderOf,
  binaryLayout,
  binaryReadable,
  binaryValueText,
  walkBinaryRow,
} from '../../shared/drivers/mysql/wire/binary-rows.js';
import { type ResultField, resultFieldOf } from '../../shared/drivers/mysql/wire/result-fields.js';
import { RowRanges, walkRow } from '../../shared/drivers/mysql/wire/text-rows.js';
import { type FreshDatabase, freshMysqlDatabase } from '../harness/mysql.js';

let db: FreshDatabase;
let admin: mysql.Connection;
let session: MysqlConnection;
let plan: TablePlan;

const COLUMNS: [name: string, ddl: string][] = [
  ['id', 'INT PRIMARY KEY'],
  ['ti', 'TINYINT'],
  ['su', 'SMALLINT UNSIGNED'],
  ['mi', 'MEDIUMINT'],
  ['i', 'INT'],
  ['iu', 'INT UNSIGNED'],
  ['bi', 'BIGINT'],
  ['bu', 'BIGINT UNSIGNED'],
  ['d', 'DECIMAL(38,10)'],
  ['d65', 'DECIMAL(65,30)'],
  ['f', 'FLOAT'],
  ['db', 'DOUBLE'],
  ['bt', 'BIT(10)'],
  ['y', 'YEAR'],
  ['dt', 'DATE'],
  ['dtm', 'DATETIME(6)'],
  ['ts', 'TIMESTAMP(6) NULL'],
  ['tm', 'TIME(6)'],
  ['vc', 'VARCHAR(400)'],
  ['l1', 'VARCHAR(300) CHARACTER SET latin1'],
  ['tx', 'MEDIUMTEXT'],
  ['bl', 'MEDIUMBLOB'],
  ['j', 'JSON'],
  ['e', "ENUM('sad','ok','')"],
  ['st', "SET('x','y','z')"],
];

const pad = (n: number, w = 2) => String(n).padStart(w, '0');
const int = (min: bigint, max: bigint) => fc.bigInt({ min, max }).map(String);
const long = (min: number, max: number) =>
  fc
    .tuple(fc.integer({ min, max }), fc.constantFrom('a', 'é', '€', '😀', 'x y'))
    .map(([n, u]) => u.repeat(Math.ceil(n / u.length)));
const text = (maxChars: number) =>
  fc.oneof(
    { weight: 5, arbitrary: fc.string({ unit: 'grapheme', maxLength: 30 }) },
    { weight: 1, arbitrary: fc.constant('') },
    { weight: 2, arbitrary: long(251, maxChars) },
  );
const datetime = fc
  .record({
    y: fc.integer({ min: 1000, max: 9999 }),
    mo: fc.integer({ min: 1, max: 12 }),
    d: fc.integer({ min: 1, max: 28 }),
    h: fc.integer({ min: 0, max: 23 }),
    mi: fc.integer({ min: 0, max: 59 }),
    s: fc.integer({ min: 0, max: 59 }),
    us: fc.integer({ min: 0, max: 999_999 }),
  })
  .map((t) => `${t.y}-${pad(t.mo)}-${pad(t.d)} ${pad(t.h)}:${pad(t.mi)}:${pad(t.s)}.${pad(t.us, 6)}`);

/** Values per column (after id), as insert parameters. */
const VALUES: fc.Arbitrary<unknown>[] = [
  int(-128n, 127n),
  int(0n, 65_535n),
  int(-8_388_608n, 8_388_607n),
  int(-(2n ** 31n), 2n ** 31n - 1n),
  int(0n, 2n ** 32n - 1n),
  int(-(2n ** 63n), 2n ** 63n - 1n),
  int(0n, 2n ** 64n - 1n),
  fc.bigInt({ min: -(10n ** 38n) + 1n, max: 10n ** 38n - 1n }).map((u) => {
    const s = (u < 0n ? -u : u).toString().padStart(11, '0');
    return `${u < 0n ? '-' : ''}${s.slice(0, -10)}.${s.slice(-10)}`;
  }),
  fc.bigInt({ min: -(10n ** 65n) + 1n, max: 10n ** 65n - 1n }).map((u) => {
    const s = (u < 0n ? -u : u).toString().padStart(31, '0');
    return `${u < 0n ? '-' : ''}${s.slice(0, -30)}.${s.slice(-30)}`;
  }),
  fc.float({ noNaN: true, noDefaultInfinity: true }).map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
  fc.integer({ min: 0, max: 1023 }),
  fc.integer({ min: 1901, max: 2155 }).map(String),
  datetime.map((t) => t.slice(0, 10)),
  datetime,
  fc
    .integer({ min: 1, max: 2_147_483_647 })
    .map((s) => new Date(s * 1000).toISOString().slice(0, 19).replace('T', ' ')),
  fc
    .tuple(fc.boolean(), fc.integer({ min: 0, max: 838 }), fc.integer({ min: 0, max: 59 }))
    .map(([neg, h, m]) => `${neg ? '-' : ''}${h}:${pad(m)}:00.000001`),
  text(390),
  // latin1 (cp1252 at the server) has no U+0080..U+009F: printable ASCII and U+00A0..U+00FF.
  fc.string({
    unit: fc
      .oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0xa0, max: 0xff }))
      .map((c) => String.fromCharCode(c)),
    maxLength: 300,
  }),
  fc.oneof({ weight: 7, arbitrary: text(390) }, { weight: 1, arbitrary: long(65_536, 70_000) }),
  fc.oneof(
    { weight: 7, arbitrary: fc.uint8Array({ maxLength: 300 }).map((u) => Buffer.from(u)) },
    { weight: 1, arbitrary: fc.integer({ min: 65_536, max: 70_000 }).map((n) => Buffer.alloc(n, 0xfb)) },
  ),
  fc.json({ maxDepth: 2 }),
  fc.constantFrom('sad', 'ok', ''),
  fc.constantFrom('', 'x', 'y,z', 'x,y,z'),
];
const ROW = fc.tuple(...VALUES.map((v) => fc.option(v, { nil: null, freq: 5 })));

beforeAll(async () => {
  db = await freshMysqlDatabase('my_raw_rows');
  admin = await mysql.createConnection({ uri: db.url, supportBigNumbers: true, bigNumberStrings: true });
  await admin.query("SET time_zone = '+00:00'");
  await admin.query(
    `CREATE TABLE t (${COLUMNS.map(([n, d]) => `\`${n}\` ${d}`).join(', ')}) CHARACTER SET utf8mb4`,
  );
  session = new MysqlConnection({ url: db.url });
  plan = await introspectTable(session, { source: `${db.name}.t` });
});

afterAll(async () => {
  await session?.close();
  await admin?.end();
  await db?.drop();
});

async function fill(rows: readonly (readonly unknown[])[]): Promise<void> {
  await admin.query('TRUNCATE TABLE t');
  const names = COLUMNS.map(([n]) => `\`${n}\``).join(', ');
  const marks = `(${COLUMNS.map(() => '?').join(', ')})`;
  for (let i = 0; i < rows.length; i += 50) {
    const part = rows.slice(i, i + 50);
    await admin.query(
      `INSERT INTO t (${names}) VALUES ${part.map(() => marks).join(', ')}`,
      part.flatMap((r, j) => [i + j, ...r]),
    );
  }
}

/** The statement reading `cols` of t in key order, their value contexts, and a fresh encoder for them. */
function readerOf(cols: typeof plan.columns) {
  const schema: Schema = {
    columns: cols.map((c) => ({
      name: c.name,
      type: c.read.logical,
      nullable: true,
      sourceType: c.sourceType,
    })),
    primaryKey: [],
  };
  return {
    sql: `SELECT ${cols.map((c) => c.read.expr).join(', ')} FROM ${plan.qualified} AS src ORDER BY src.id`,
    ctx: cols.map((c) => ({ table: plan.source, column: c.name })),
    encoder: () => new BatchEncoder(schema, { phase: 'incremental' }),
  };
}

/** Row `n`'s metadata columns, the same for every reader compared. */
function meta(e: BatchEncoder, n: number): void {
  e.appendMetaOrdinal(Op.update, 'i000000000001', n, null, false);
}

const ipcOf = (e: BatchEncoder): Buffer => Buffer.from(tableToIPC(new Table(e.finish(1n))));

/** Reads the table both ways; checks every range against mysql2's Buffer; returns both IPCs. */
async function readBoth(): Promise<{ rows: number; viaMysql2: Buffer; viaRanges: Buffer }> {
  const cols = plan.columns;
  const { sql, ctx, encoder } = readerOf(cols);
  const a = encoder();
  const raw: RawRow[] = await session.raw(sql);
  raw.forEach((r, n) => {
    for (let i = 0; i < cols.length; i++) a.appendValue(i, parseValue(cols[i]!.read, r[i]!, ctx[i]!));
    meta(a, n);
  });
  const b = encoder();
  const appenders = cols.map((c, i) => rangeAppenderOf(c.read, ctx[i]!));
  const ranges = new RowRanges(cols.length);
  let n = 0;
  await session.eachRow(sql, (buf, start, end) => {
    walkRow(buf, start, end, ranges);
    const want = raw[n]!;
    for (let i = 0; i < cols.length; i++) {
      const s = ranges.starts[i]!;
      if (s < 0) {
        expect(want[i]).toBeNull();
        b.col(i).appendNull();
      } else {
        expect(buf.subarray(s, ranges.ends[i]!).equals(want[i]!)).toBe(true);
        appenders[i]!(b.col(i), buf, s, ranges.ends[i]!);
      }
    }
    meta(b, n);
    n++;
  });
  expect(n).toBe(raw.length);
  return {
    rows: n,
    viaMysql2: ipcOf(a),
    viaRanges: ipcOf(b),
  };
}

/**
 * Reads the table's binary-readable columns (all but TIME) twice: through the binary protocol
 * (eachBinaryRow + walkBinaryRow + binaryAppenderOf) and as text rows through parseValue (the
 * row path). Each value's key text (binaryValueText) must parse to the text's value. Returns
 * both IPCs.
 */
async function readBinaryAndText(): Promise<{ rows: number; viaText: Buffer; viaBinary: Buffer }> {
  const cols = plan.columns.filter((c) => binaryReadable(c.read, c.result));
  expect(cols.map((c) => c.name)).not.toContain('tm');
  expect(cols.length).toBe(plan.columns.length - 1);
  const { sql, ctx, encoder } = readerOf(cols);
  const a = encoder();
  const raw: RawRow[] = await session.raw(sql);
  const values = raw.map((r) => cols.map((c, i) => parseValue(c.read, r[i]!, ctx[i]!)));
  values.forEach((r, n) => {
    for (let i = 0; i < cols.length; i++) a.appendValue(i, r[i]);
    meta(a, n);
  });
  const b = encoder();
  let fields: ResultField[] = [];
  let layout: Int8Array = new Int8Array(0);
  let appenders: ReturnType<typeof binaryAppenderOf>[] = [];
  const ranges = new RowRanges(cols.length);
  let n = 0;
  await session.eachBinaryRow(
    sql,
    (buf, start, end) => {
      walkBinaryRow(buf, start, end, layout, ranges);
      for (let i = 0; i < cols.length; i++) {
        const s = ranges.starts[i]!;
        if (s < 0) {
          expect(raw[n]![i]).toBeNull();
          b.col(i).appendNull();
          continue;
        }
        const e = ranges.ends[i]!;
        appenders[i]!(b.col(i), buf, s, e);
        // The resume key's text reads as the same value.
        expect(parseValue(cols[i]!.read, binaryValueText(fields[i]!, buf, s, e), ctx[i]!)).toEqual(
          values[n]![i],
        );
      }
      meta(b, n);
      n++;
    },
    undefined,
    (f) => {
      fields = f.map(resultFieldOf);
      layout = binaryLayout(fields);
      appenders = cols.map((c, i) => binaryAppenderOf(c.read, fields[i]!, ctx[i]!));
    },
  );
  expect(n).toBe(raw.length);
  return {
    rows: n,
    viaText: ipcOf(a),
    viaBinary: ipcOf(b),
  };
}

/** This session's prepared statements: prepared and closed (SHOW SESSION STATUS). */
async function statementCounts(): Promise<{ prepared: number; closed: number }> {
  const rows = await session.query<{ Variable_name: string; Value: string }>(
    "SHOW SESSION STATUS WHERE Variable_name IN ('Com_stmt_prepare', 'Com_stmt_close')",
  );
  const get = (name: string) => Number(rows.find((r) => r.Variable_name === name)?.Value);
  return { prepared: get('Com_stmt_prepare'), closed: get('Com_stmt_close') };
}

describe('binary-protocol rows == text rows (harness MariaDB)', () => {
  it('random rows of every binary-readable type, with NULLs and zero/edge values', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(ROW, { minLength: 1, maxLength: 15 }), async (rows) => {
        await fill(rows);
        const got = await readBinaryAndText();
        expect(got.rows).toBe(rows.length);
        expect(got.viaBinary.equals(got.viaText)).toBe(true);
      }),
      { numRuns: 25 },
    );
  }, 240_000);

  it('a result of many rows (rows straddle socket chunks), and every statement is closed at the server', async () => {
    await fill(fc.sample(ROW, { numRuns: 1500, seed: 43 }));
    const before = await statementCounts();
    const got = await readBinaryAndText();
    expect(got.rows).toBe(1500);
    expect(got.viaBinary.equals(got.viaText)).toBe(true);
    await session.eachBinaryRow('SELECT id FROM t ORDER BY id LIMIT 3', () => undefined);
    await expect(session.eachBinaryRow('SELECT nope FROM t', () => undefined)).rejects.toThrow(/nope/);
    const after = await statementCounts();
    // Two statements prepared (the third failed to prepare), both closed: none left open.
    expect(after.prepared - before.prepared).toBe(3);
    expect(after.closed - before.closed).toBe(2);
  }, 240_000);
});

describe('raw result-set reader == mysql2 rows (harness MariaDB)', () => {
  it('random rows of every supported type', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(ROW, { minLength: 1, maxLength: 15 }), async (rows) => {
        await fill(rows);
        const got = await readBoth();
        expect(got.rows).toBe(rows.length);
        expect(got.viaRanges.equals(got.viaMysql2)).toBe(true);
      }),
      { numRuns: 25 },
    );
  }, 240_000);

  it('a result of many rows: rows straddle socket chunks', async () => {
    const rows = fc.sample(ROW, { numRuns: 1500, seed: 42 });
    await fill(rows);
    const got = await readBoth();
    expect(got.rows).toBe(1500);
    expect(got.viaRanges.equals(got.viaMysql2)).toBe(true);
  }, 240_000);

  it('an empty result, and an error mid-statement, end the statement as `each` does', async () => {
    await admin.query('TRUNCATE TABLE t');
    let seen = 0;
    await session.eachRow('SELECT id FROM t', () => seen++);
    expect(seen).toBe(0);
    await expect(session.eachRow('SELECT nope FROM t', () => seen++)).rejects.toThrow(/nope/);
    // The connection is still usable afterwards.
    expect(await session.query<{ one: number }>('SELECT 1 AS one')).toEqual([{ one: 1 }]);
    // A row callback that throws fails the statement once the result is drained.
    await fill(fc.sample(ROW, { numRuns: 3, seed: 7 }));
    await expect(
      session.eachRow('SELECT id FROM t ORDER BY id', () => {
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await session.query<{ one: number }>('SELECT 1 AS one')).toEqual([{ one: 1 }]);
  });
});
