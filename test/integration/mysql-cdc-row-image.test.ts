/**
 * The row-image decoder (shared/drivers/mysql/wire/binlog-rows.ts) against the old path (zongji's
 * parse + cdc/values.ts) on the harness MariaDB: random rows of every type the decoder supports
 * (NULLs, extremes, zero dates, non-ASCII and latin1 text, 2-byte length prefixes, key changes,
 * deletes, an excluded column) are written once, then the same binlog range is read by two
 * readers, one per path; every cut column but `__ingest_ts` must be byte-identical Arrow.
 */
import { Table, tableToIPC } from 'apache-arrow';
import type mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CdcTable } from '../../shared/contracts/cdc.js';
import { binlogPosition } from '../../shared/drivers/mysql/cdc/position.js';
import type { MysqlCdcReader } from '../../shared/drivers/mysql/cdc/reader.js';
import { MysqlCdcSource } from '../../shared/drivers/mysql/cdc/source.js';
import { cdcLakeSchema } from '../../shared/engine/cdc/lake-schema.js';
import { type FreshDatabase, freshMysqlDatabase } from '../harness/mysql.js';
import { mysqlClient } from '../harness/mysql-cdc.js';

const T = { timeout: 120_000 };

let db: FreshDatabase;
let sql: mysql.Connection;
beforeAll(async () => {
  db = await freshMysqlDatabase('myimg');
  sql = await mysqlClient(db.url);
});
afterAll(async () => {
  await sql?.end();
  await db?.drop();
});

// A small deterministic PRNG (mulberry32).
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(20261201);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const int = (lo: number, hi: number): number => lo + Math.floor(rand() * (hi - lo + 1));
const big = (lo: bigint, hi: bigint): bigint =>
  lo + (BigInt(Math.floor(rand() * 2 ** 52)) * (hi - lo)) / 2n ** 52n;
const digits = (n: number): string => Array.from({ length: n }, () => int(0, 9)).join('');
const hexText = (s: string): string => `_utf8mb4 X'${Buffer.from(s, 'utf8').toString('hex')}'`;
const hexBytes = (b: Buffer): string => `X'${b.toString('hex')}'`;
const p2 = (n: number): string => String(n).padStart(2, '0');
const frac = (n: number): string => (n === 0 ? '' : `.${digits(n)}`);
const date = (): string => `${String(int(1000, 9999)).padStart(4, '0')}-${p2(int(1, 12))}-${p2(int(1, 28))}`;
const clock = (): string => `${p2(int(0, 23))}:${p2(int(0, 59))}:${p2(int(0, 59))}`;
const decimal = (p: number, s: number): string =>
  rand() < 0.2
    ? `'${pick(['', '-'])}${pick(['9'.repeat(p - s) || '0', '0'])}${s ? `.${pick(['9'.repeat(s), '0'.repeat(s)])}` : ''}'`
    : `'${pick(['', '-'])}${digits(int(1, p - s)).replace(/^0+(?=\d)/, '')}${s ? `.${digits(s)}` : ''}'`;
const TEXTS = [
  '',
  'a',
  "a'b\\c",
  '😀 ünï',
  'café €ÿ',
  'xxxxxxxxxxxxxxxxxxxx',
  ' trailing ',
  'ascii only',
  'ÿ',
];
const LATIN1 = ['', 'café €ÿ', 'plain', 'ñÑ ß', 'Œuvre ‰', 'x'];

/** [name, DDL, random SQL value or undefined for a generated column]. */
const COLUMNS: [string, string, (() => string) | undefined][] = [
  ['id', 'INT PRIMARY KEY', undefined],
  ['ti', 'TINYINT', () => String(int(-128, 127))],
  ['tb', 'TINYINT(1)', () => String(int(0, 1))],
  ['tu', 'TINYINT UNSIGNED', () => String(int(0, 255))],
  ['si', 'SMALLINT', () => String(int(-32768, 32767))],
  ['su', 'SMALLINT UNSIGNED', () => String(int(0, 65535))],
  ['mi', 'MEDIUMINT', () => String(int(-8388608, 8388607))],
  ['mu', 'MEDIUMINT UNSIGNED', () => String(int(0, 16777215))],
  ['i', 'INT', () => pick(['-2147483648', '2147483647', String(int(-2147483648, 2147483647))])],
  ['iu', 'INT UNSIGNED', () => pick(['0', '4294967295', String(int(0, 4294967295))])],
  [
    'bi',
    'BIGINT',
    () =>
      pick([
        '-9223372036854775808',
        '9223372036854775807',
        '9007199254740993',
        '-9007199254740993',
        String(big(-(2n ** 63n), 2n ** 63n - 1n)),
        String(int(-1000, 1000)),
      ]),
  ],
  [
    'bu',
    'BIGINT UNSIGNED',
    () => pick(['0', '18446744073709551615', '9007199254740993', String(big(0n, 2n ** 64n - 1n))]),
  ],
  ['d38', 'DECIMAL(38,10)', () => decimal(38, 10)],
  ['d65', 'DECIMAL(65,30)', () => decimal(65, 30)],
  ['d10', 'DECIMAL(10,2)', () => decimal(10, 2)],
  ['d12', 'DECIMAL(12,2)', () => decimal(12, 2)],
  ['d15', 'DECIMAL(15,5)', () => decimal(15, 5)],
  ['d9', 'DECIMAL(9,0)', () => decimal(9, 0)],
  ['d5', 'DECIMAL(5,5)', () => `'${pick(['', '-'])}0.${digits(5)}'`],
  ['f', 'FLOAT', () => pick(['-3.4e38', '16777217', '0.1', '-0e0', String((rand() - 0.5) * 1e6)])],
  [
    'db',
    'DOUBLE',
    () => pick(['-1.7976931348623157e308', '5e-324', '0.1', '-0e0', String((rand() - 0.5) * 1e12)]),
  ],
  ['fmd', 'FLOAT(7,3)', () => (rand() * 1000).toFixed(3)],
  ['dmd', 'DOUBLE(12,4)', () => (rand() * 1e6).toFixed(4)],
  ['bt', 'BIT(10)', () => `b'${int(0, 1023).toString(2)}'`],
  ['b64', 'BIT(64)', () => hexBytes(Buffer.from(Array.from({ length: 8 }, () => int(0, 255))))],
  ['y', 'YEAR', () => pick(['0', '1901', '2155', String(int(1901, 2155))])],
  ['dt', 'DATE', () => pick([`'${date()}'`, "'0000-00-00'", "'2024-00-15'", "'1000-01-01'", "'9999-12-31'"])],
  [
    'dtm',
    'DATETIME(6)',
    () => pick([`'${date()} ${clock()}${frac(6)}'`, "'0000-00-00 00:00:00'", "'9999-12-31 23:59:59.999999'"]),
  ],
  ['dt0', 'DATETIME', () => `'${date()} ${clock()}'`],
  ['dt3', 'DATETIME(3)', () => `'${date()} ${clock()}${frac(3)}'`],
  ['dt1', 'DATETIME(1)', () => `'${date()} ${clock()}${frac(1)}'`],
  [
    'ts',
    'TIMESTAMP(6) NULL',
    () =>
      pick([
        `'${int(1971, 2037)}-${p2(int(1, 12))}-${p2(int(1, 28))} ${clock()}${frac(6)}'`,
        "'0000-00-00 00:00:00'",
        "'1970-01-01 00:00:01.000000'",
        "'2038-01-19 03:14:07.999999'",
      ]),
  ],
  [
    'ts3',
    'TIMESTAMP(3) NULL',
    () => `'${int(1971, 2037)}-${p2(int(1, 12))}-${p2(int(1, 28))} ${clock()}${frac(3)}'`,
  ],
  ['ts0', 'TIMESTAMP NULL', () => `'${int(1971, 2037)}-${p2(int(1, 12))}-${p2(int(1, 28))} ${clock()}'`],
  [
    'tm',
    'TIME(6)',
    () => pick(["'-838:59:59.000000'", "'838:59:59.999999'", "'25:00:00.000001'", `'-${clock()}${frac(6)}'`]),
  ],
  ['tm0', 'TIME', () => pick([`'${clock()}'`, `'-${clock()}'`, "'-00:00:01'"])],
  ['tm3', 'TIME(3)', () => pick([`'${clock()}${frac(3)}'`, `'-${clock()}${frac(3)}'`])],
  ['vc', 'VARCHAR(20)', () => hexText(pick(TEXTS))],
  ['vl', 'VARCHAR(300)', () => hexText(pick(TEXTS).repeat(int(1, 10)).slice(0, 300))],
  ['l1', 'VARCHAR(20) CHARACTER SET latin1', () => hexText(pick(LATIN1))],
  ['lt1', 'TEXT CHARACTER SET latin1', () => hexText(pick(LATIN1))],
  ['ch', 'CHAR(5)', () => hexText(pick(['', 'a', 'abcde', 'ü  ', '😀']))],
  ['bn', 'BINARY(3)', () => hexBytes(Buffer.from(Array.from({ length: int(0, 3) }, () => int(0, 255))))],
  ['vb', 'VARBINARY(10)', () => hexBytes(Buffer.from(Array.from({ length: int(0, 10) }, () => int(0, 255))))],
  ['bl', 'BLOB', () => hexBytes(Buffer.from(Array.from({ length: int(0, 300) }, () => int(0, 255))))],
  ['tt', 'TINYTEXT', () => hexText(pick(TEXTS))],
  ['lt', 'LONGTEXT', () => hexText(pick(TEXTS).repeat(int(0, 100)))],
  ['j', 'JSON', () => hexText(pick(['[]', '{"a": 12345678901234567890}', 'null', '{"k": "ü😀"}']))],
  ['e', "ENUM('sad','ok','ünï')", () => pick(["'sad'", "'ok'", "'ünï'", "''"])],
  ['st', "SET('x','y','z')", () => pick(["''", "'x'", "'x,z'", "'x,y,z'"])],
  ['gv', 'BIGINT AS (i * 2) VIRTUAL', undefined],
  ['gs', "VARCHAR(30) AS (CONCAT(vc, '!')) STORED", undefined],
  [
    'uu',
    'UUID',
    () =>
      pick([
        "'00000000-0000-0000-0000-000000000000'",
        "'123e4567-e89b-12d3-a456-426614174000'",
        `'${Buffer.from(Array.from({ length: 16 }, () => int(0, 255)))
          .toString('hex')
          .replace(/^(.{8})(.{4})(.{4})(.{4})/, '$1-$2-$3-$4-')}'`,
      ]),
  ],
  [
    'i4',
    'INET4',
    () => pick(["'0.0.0.0'", "'255.255.255.255'", `'${int(0, 255)}.${int(0, 255)}.0.${int(0, 255)}'`]),
  ],
  [
    'i6',
    'INET6',
    () => pick(["'::'", "'::1'", "'::ffff:1.2.3.4'", "'::1.2.3.4'", "'2001:db8::ff00:42:8329'", "'fe80::'"]),
  ],
  ['ex', 'INT', () => String(int(0, 9))],
];
const WRITTEN = COLUMNS.filter(([n, , g]) => g !== undefined || n === 'id');

function rowValues(id: number): string {
  return WRITTEN.map(([n, , g]) => (n === 'id' ? String(id) : rand() < 0.15 ? 'NULL' : g!())).join(', ');
}

describe('mysql cdc: row-image decoder == zongji + values.ts', () => {
  it('gives byte-identical Arrow columns for random rows of every supported type', T, async () => {
    const d = db.name;
    await sql.query(`CREATE TABLE \`${d}\`.img (${COLUMNS.map(([n, ddl]) => `${n} ${ddl}`).join(', ')})`);
    const [status] = await sql.query('SHOW MASTER STATUS');
    const st = (status as { File: string; Position: number }[])[0]!;
    const start = binlogPosition({ file: st.File, pos: Number(st.Position), gtid: '', server: '', epoch: 0 });
    await sql.query(`SET SESSION sql_mode = ''; SET time_zone = '+00:00'`);
    const names = WRITTEN.map(([n]) => n).join(', ');
    let changes = 0;
    let id = 0;
    for (let txn = 0; txn < 25; txn++) {
      await sql.query('BEGIN');
      const rows: string[] = [];
      for (let k = 0; k < 40; k++) rows.push(`(${rowValues(++id)})`);
      await sql.query(`INSERT INTO \`${d}\`.img (${names}) VALUES ${rows.join(', ')}`);
      changes += rows.length;
      for (let k = 0; k < 10; k++) {
        const target = int(id - 39, id);
        const sets = WRITTEN.filter(([n]) => n !== 'id')
          .filter(() => rand() < 0.3)
          .map(([n]) => `${n} = ${rowValues(0).split(', ')[WRITTEN.findIndex(([m]) => m === n)]}`);
        if (sets.length === 0) continue;
        const [r] = await sql.query(`UPDATE \`${d}\`.img SET ${sets.join(', ')} WHERE id = ${target}`);
        changes += (r as { affectedRows: number }).affectedRows;
      }
      // A key change (a delete plus an insert on both paths) and deletes.
      const [kc] = await sql.query(`UPDATE \`${d}\`.img SET id = ${id + 1000} WHERE id = ${id - 5}`);
      changes += 2 * (kc as { affectedRows: number }).affectedRows;
      const [del] = await sql.query(`DELETE FROM \`${d}\`.img WHERE id IN (${id - 1}, ${id - 2}, ${id - 3})`);
      changes += (del as { affectedRows: number }).affectedRows;
      await sql.query('COMMIT');
    }
    await sql.query(`SET SESSION sql_mode = DEFAULT; SET time_zone = DEFAULT`);

    const read = async (raw: boolean, serverId: number) => {
      const source = new MysqlCdcSource({
        url: db.url,
        sourceName: 'img',
        connectTimeoutMs: 10_000,
        serverId,
        heartbeatMs: 10_000,
      });
      try {
        const { ref, schema } = await source.introspect({ source: `${d}.img` });
        const kept = { ...schema, columns: schema.columns.filter((c) => c.name !== 'ex') };
        const tables: CdcTable[] = [{ ref, schema: cdcLakeSchema(kept), writeMode: 'append' }];
        const reader = (await source.openReader(tables, { heartbeatMs: 10_000, serverId })) as MysqlCdcReader;
        reader.rawRowImages = raw;
        await reader.start({ position: start, next: new Map() });
        const batches = [];
        let seen = 0;
        const deadline = Date.now() + 60_000;
        while (seen < changes && Date.now() < deadline) {
          const ev = await reader.next(1000);
          if (ev?.kind === 'rows') {
            seen += ev.count;
            if (reader.pending(ref.target).rows >= 100) batches.push(reader.cut(ref.target)!);
          }
        }
        const last = reader.cut(ref.target);
        if (last) batches.push(last);
        return { batches, seen, counters: { ...reader.seen } };
      } finally {
        await source.close();
      }
    };
    const base = 5000 + Math.floor(Math.random() * 100_000) * 10;
    // The fast reader first: the old path then runs with zongji's method overridden (no hook).
    const fast = await read(true, base + 1);
    const old = await read(false, base);
    console.log(
      `row-image equality: ${changes} changes, ${old.batches.length} batches, raw events ${fast.counters.rawEvents}, key changes ${old.counters.keyChanges}`,
    );
    expect(old.seen).toBe(changes);
    expect(fast.seen).toBe(changes);
    expect(old.counters.rawEvents).toBe(0);
    expect(fast.counters.rawEvents).toBeGreaterThan(0);
    expect(fast.counters.zongjiEvents).toBe(0);
    expect(fast.counters.keyChanges).toBe(old.counters.keyChanges);
    expect(fast.batches.map((b) => b.record.numRows)).toEqual(old.batches.map((b) => b.record.numRows));
    const diffs: string[] = [];
    for (let k = 0; k < old.batches.length; k++) {
      const a = old.batches[k]!.record;
      const b = fast.batches[k]!.record;
      expect(b.schema.fields.map((f) => f.name)).toEqual(a.schema.fields.map((f) => f.name));
      for (let c = 0; c < a.numCols; c++) {
        const name = a.schema.fields[c]!.name;
        if (name === '__ingest_ts') continue;
        const ipc = (r: typeof a) => Buffer.from(tableToIPC(new Table({ [name]: r.getChildAt(c)! })));
        if (!ipc(a).equals(ipc(b))) {
          const av = a.getChildAt(c)!.toArray();
          const bv = b.getChildAt(c)!.toArray();
          let at = -1;
          for (let r = 0; r < a.numRows; r++)
            if (String(a.getChildAt(c)!.get(r)) !== String(b.getChildAt(c)!.get(r))) {
              at = r;
              break;
            }
          diffs.push(
            `batch ${k} column ${name}: first differing row ${at}: old ${String(at >= 0 ? a.getChildAt(c)!.get(at) : av.length)} fast ${String(at >= 0 ? b.getChildAt(c)!.get(at) : bv.length)}`,
          );
        }
      }
    }
    expect(diffs).toEqual([]);
  });
});
