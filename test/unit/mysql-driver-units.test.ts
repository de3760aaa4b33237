/**
 * The MySQL driver's pure parts: the server version check, URL handling that never leaks a
 * password, the batch path's byte parsers against the row path's parsers (time-text.ts) on every
 * text form MySQL prints, and keyset literals.
 */
import { Table, tableToIPC } from 'apache-arrow';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DataError, SourceError } from '../../shared/contracts/errors.js';
import { BatchEncoder } from '../../shared/dataplane/encoder.js';
import { Op } from '../../shared/dataplane/metadata.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { endpointOf, parseServerVersion } from '../../shared/drivers/mysql/connect.js';
import {
  appenderOf,
  type InfoColumn,
  keyLiteral,
  mapColumn,
  parseValue,
  type ReadPlan,
} from '../../shared/drivers/mysql/types.js';
import { daysToDateText } from '../../shared/position/time-text.js';
import { mysqlDatetimeText } from '../harness/mysql-arbitraries.js';

describe('server version', () => {
  it('accepts MariaDB 10.5+ and MySQL 8.0+ (Aurora included), refuses older ones with the supported list', () => {
    expect(parseServerVersion('10.11.19-MariaDB-0+deb12u1-log')).toMatchObject({
      flavor: 'mariadb',
      major: 10,
      minor: 11,
    });
    expect(parseServerVersion('10.5.0-MariaDB')).toMatchObject({ flavor: 'mariadb', major: 10, minor: 5 });
    expect(parseServerVersion('11.4.2-MariaDB')).toMatchObject({ flavor: 'mariadb', major: 11 });
    expect(parseServerVersion('8.0.36')).toMatchObject({ flavor: 'mysql', major: 8, minor: 0 });
    expect(parseServerVersion('8.0.mysql_aurora.3.05.2')).toMatchObject({ flavor: 'mysql', major: 8 });
    expect(parseServerVersion('9.1.0')).toMatchObject({ flavor: 'mysql', major: 9 });
    for (const old of ['10.4.32-MariaDB', '5.5.68-MariaDB', '5.7.44-log', '5.6.51']) {
      const e = (() => {
        try {
          parseServerVersion(old, 'db:3306');
        } catch (x) {
          return x;
        }
      })() as SourceError;
      expect(e).toBeInstanceOf(SourceError);
      expect(e.code).toBe('SOURCE_VERSION_UNSUPPORTED');
      expect(e.message).toContain(old);
      expect(e.message).toContain('MariaDB 10.5+ and MySQL 8.0+');
    }
    expect(() => parseServerVersion('unknown')).toThrow(SourceError);
  });
});

describe('connection URLs', () => {
  it('names user, host, port and database, and redacts the password anywhere', () => {
    expect(endpointOf('mysql://app:s3cr%40t@db.example:3307/shop?ssl=true', 'sources.app')).toEqual({
      user: 'app',
      host: 'db.example',
      port: 3307,
      database: 'shop',
      source: 'sources.app',
    });
    expect(endpointOf('mysql://db')).toMatchObject({ user: 'root', port: 3306, database: '' });
    const bad = (() => {
      try {
        endpointOf('mysql//app:hunter2@db');
      } catch (e) {
        return e as SourceError;
      }
    })();
    expect(bad!.code).toBe('SOURCE_URL_INVALID');
    expect(bad!.message).not.toContain('hunter2');
    expect(() => endpointOf('mysql://app:pa:ss/wo#rd?x@db:3306/shop')).toThrow(
      /: mysql:\/\/app:\*\*\*@db:3306\/shop$/,
    );
    expect(() => endpointOf('postgres://u:p@h/db')).toThrow(/mysql:\/\//);
  });
});

const info = (dataType: string, columnType = dataType, extra: Partial<InfoColumn> = {}): InfoColumn => ({
  name: 'c',
  dataType,
  columnType,
  nullable: false,
  numericPrecision: null,
  numericScale: null,
  charset: null,
  ...extra,
});

/** Encodes raw text values of one column through both paths; returns the two IPC byte strings. */
function bothPaths(plan: ReadPlan, nullable: boolean, values: (string | null)[]): [Buffer, Buffer] {
  const schema: Schema = {
    columns: [{ name: 'c', type: plan.logical, nullable, sourceType: 't' }],
    primaryKey: [],
  };
  const ctx = { table: 'db.t', column: 'c' };
  const row = new BatchEncoder(schema, { phase: 'incremental' });
  const batch = new BatchEncoder(schema, { phase: 'incremental' });
  const append = appenderOf(plan, ctx);
  values.forEach((v, i) => {
    const buf = v === null ? null : Buffer.from(v, 'latin1');
    row.appendValue(0, parseValue(plan, buf, ctx));
    row.appendMetaOrdinal(Op.update, 'i000000000001', i, null, false);
    if (buf === null) batch.col(0).appendNull();
    else append(batch.col(0), buf);
    batch.appendMetaOrdinal(Op.update, 'i000000000001', i, null, false);
  });
  return [
    Buffer.from(tableToIPC(new Table(row.finish(1n)))),
    Buffer.from(tableToIPC(new Table(batch.finish(1n)))),
  ];
}

describe('byte parsers of the batch path == value parsers of the row path', () => {
  const datetimeText = mysqlDatetimeText;
  const zeroish = fc
    .tuple(
      fc.integer({ min: 0, max: 9999 }),
      fc.integer({ min: 0, max: 12 }),
      fc.integer({ min: 0, max: 31 }),
    )
    .filter(([, m, d]) => m === 0 || d === 0)
    .map(
      ([y, m, d]) =>
        `${String(y).padStart(4, '0')}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`,
    );

  it('DATETIME/TIMESTAMP text of every precision, zero dates included (NULL)', () => {
    const plan = mapColumn(info('datetime', 'datetime(6)'), 'c').read;
    fc.assert(
      fc.property(
        fc.array(
          fc.option(
            fc.oneof(
              datetimeText,
              zeroish.map((d) => `${d} 00:00:00`),
            ),
            { nil: null },
          ),
          { maxLength: 30 },
        ),
        (xs) => {
          const [a, b] = bothPaths(plan, true, xs);
          expect(b.equals(a)).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('DATE text, zero dates included (NULL)', () => {
    const plan = mapColumn(info('date'), 'c').read;
    const date = fc.integer({ min: -719_528, max: 2_932_896 }).map(daysToDateText);
    fc.assert(
      fc.property(fc.array(fc.option(fc.oneof(date, zeroish), { nil: null }), { maxLength: 30 }), (xs) => {
        const [a, b] = bothPaths(plan, true, xs);
        expect(b.equals(a)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('integers of every width, unsigned widened, and doubles', () => {
    const cases: [InfoColumn, fc.Arbitrary<string>][] = [
      [info('tinyint'), fc.integer({ min: -128, max: 127 }).map(String)],
      [info('int', 'int(10) unsigned'), fc.integer({ min: 0, max: 4294967295 }).map(String)],
      [
        info('bigint'),
        fc
          .oneof(
            fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
            // Around 2^53 and every digit count, where number parsing stops being exact.
            fc.bigInt({ min: -(2n ** 53n) - 3n, max: -(2n ** 53n) + 3n }),
            fc.bigInt({ min: 2n ** 53n - 3n, max: 2n ** 53n + 3n }),
            fc
              .integer({ min: 1, max: 18 })
              .chain((d) => fc.bigInt({ min: -(10n ** BigInt(d)) + 1n, max: 10n ** BigInt(d) - 1n })),
          )
          .map(String),
      ],
      [info('bigint', 'bigint unsigned'), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map(String)],
      [info('year'), fc.integer({ min: 1901, max: 2155 }).map(String)],
      [info('double'), fc.double({ noNaN: true, noDefaultInfinity: true }).map(String)],
    ];
    for (const [col, value] of cases) {
      const plan = mapColumn(col, 'c').read;
      fc.assert(
        fc.property(fc.array(value, { maxLength: 20 }), (xs) => {
          const [a, b] = bothPaths(plan, false, xs);
          expect(b.equals(a)).toBe(true);
        }),
        { numRuns: 100 },
      );
    }
  });

  it('refuses an impossible calendar date on both paths, naming the column', () => {
    const plan = mapColumn(info('datetime'), 'c').read;
    const ctx = { table: 'db.t', column: 'c' };
    expect(() => parseValue(plan, Buffer.from('2024-02-30 00:00:00'), ctx)).toThrow(
      /db\.t\.c: '2024-02-30 00:00:00' is not a calendar date/,
    );
    const enc = new BatchEncoder(
      { columns: [{ name: 'c', type: plan.logical, nullable: true, sourceType: 't' }], primaryKey: [] },
      { phase: 'incremental' },
    );
    expect(() => appenderOf(plan, ctx)(enc.col(0), Buffer.from('2024-02-30 00:00:00'))).toThrow(DataError);
  });
});

describe('keyset literals', () => {
  const plan = (dataType: string, columnType = dataType, extra: Partial<InfoColumn> = {}) =>
    mapColumn(info(dataType, columnType, extra), 'c').read;

  it('writes numbers unquoted and exact, doubles with an exponent, text and bytes as hex, dates quoted', () => {
    expect(keyLiteral(plan('bigint'), -(2n ** 63n))).toBe('-9223372036854775808');
    expect(keyLiteral(plan('bigint', 'bigint unsigned'), '18446744073709551615')).toBe(
      '18446744073709551615',
    );
    expect(
      keyLiteral(
        plan('decimal', 'decimal(65,30)', { numericPrecision: 65, numericScale: 30 }),
        '-1.000000000000000000000000000001',
      ),
    ).toBe('-1.000000000000000000000000000001');
    expect(keyLiteral(plan('int'), 42)).toBe('42');
    expect(keyLiteral(plan('double'), 0.1)).toBe('0.1e0');
    expect(keyLiteral(plan('double'), 1e300)).toBe('1e+300');
    expect(keyLiteral(plan('varchar', 'varchar(10)', { charset: 'utf8mb4' }), "o'b\\😀")).toBe(
      `_utf8mb4 X'${Buffer.from("o'b\\😀").toString('hex')}'`,
    );
    expect(keyLiteral(plan('varbinary', 'varbinary(4)'), new Uint8Array([0, 255]))).toBe("X'00ff'");
    expect(keyLiteral(plan('date'), 19_782)).toBe("'2024-02-29'");
    expect(keyLiteral(plan('datetime', 'datetime(6)'), 1_577_836_800_000_001n)).toBe(
      "'2020-01-01 00:00:00.000001'",
    );
    expect(() =>
      keyLiteral(
        plan('decimal', 'decimal(5,2)', { numericPrecision: 5, numericScale: 2 }),
        '1; DROP TABLE t',
      ),
    ).toThrow(DataError);
  });

  it('refuses keyset columns whose order the keyset cannot follow', () => {
    expect(plan('enum', "enum('b','a')").keyRefusal).toMatch(/member index/);
    expect(plan('set', "set('x')").keyRefusal).toBeDefined();
    expect(plan('json').keyRefusal).toBeDefined();
    expect(plan('longtext', 'longtext', { charset: 'utf8mb4', jsonAlias: true }).keyRefusal).toBeDefined();
    expect(plan('bit', 'bit(8)').keyRefusal).toBeDefined();
    expect(plan('point').keyRefusal).toBeDefined();
    expect(plan('datetime').keyRefusal).toBeUndefined();
    expect(plan('varchar', 'varchar(3)', { charset: 'latin1' }).keyRefusal).toBeUndefined();
  });
});
