/**
 * The Postgres driver's pure parts, without a server: the type mapping decisions, the array
 * literal parser, literal quoting, URL errors, connection error translation and the PGCOPY
 * framing rules (the server-backed checks of the same code are in
 * test/integration/postgres-driver.test.ts).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DataError } from '../../shared/contracts/errors.js';
import { BatchEncoder } from '../../shared/dataplane/encoder.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { endpointOf, translateConnectError } from '../../shared/drivers/postgres/connect.js';
import {
  numericPrecisionScale,
  OID,
  type PostgresType,
  parseArrayLiteral,
  parseColumnText,
  quoteLiteral,
  readPlan,
} from '../../shared/drivers/postgres/types.js';
import { CopyBinaryDecoder, type CopyField } from '../../shared/drivers/postgres/wire/binary-rows.js';

const ctx = { table: 'public.t', column: 'c' };
const base = (oid: number, typmod = -1, name = 'x'): PostgresType => ({
  oid,
  name,
  typtype: 'b',
  category: 'N',
  typmod,
});
const array = (element: PostgresType): PostgresType => ({
  oid: 1,
  name: `_${element.name}`,
  typtype: 'b',
  category: 'A',
  typmod: element.typmod,
  element,
});
/** numeric(p, s) typmod as Postgres stores it. */
const numericTypmod = (p: number, s: number) => ((p << 16) | (s & 0x7ff)) + 4;

describe('type mapping', () => {
  it('maps numeric(p,s) to decimal only when Arrow and every engine can hold it exactly', () => {
    expect(numericPrecisionScale(numericTypmod(12, 3))).toEqual({ precision: 12, scale: 3 });
    expect(numericPrecisionScale(-1)).toBeUndefined();
    expect(numericPrecisionScale(numericTypmod(5, -2))).toEqual({ precision: 5, scale: -2 }); // PG 15+
    const logical = (typmod: number) => readPlan(base(OID.numeric, typmod), 'n', 0).logical;
    expect(logical(numericTypmod(38, 38))).toEqual({ kind: 'decimal', precision: 38, scale: 38 });
    expect(logical(numericTypmod(39, 0))).toEqual({ kind: 'text' });
    expect(logical(numericTypmod(5, -2))).toEqual({ kind: 'text' });
    expect(logical(numericTypmod(3, 5))).toEqual({ kind: 'text' }); // PG 15 allows scale > precision
    expect(logical(-1)).toEqual({ kind: 'text' });
    expect(readPlan(base(OID.numeric, -1), 'n', 0).expr).toBe('"n"::text');
  });

  it('selects each column through one expression both paths share', () => {
    expect(readPlan(base(OID.float4), 'r', 0)).toEqual({
      expr: '"r"::float8',
      wire: 'float8',
      list: false,
      logical: { kind: 'float64' },
    });
    expect(readPlan(base(OID.timestamptz), 'a"b', 0)).toEqual({
      expr: '"a""b"',
      wire: 'timestamp',
      list: false,
      logical: { kind: 'timestamp', utc: true },
    });
    expect(readPlan(base(OID.interval), 'i', 0).expr).toBe('"i"::text');
    expect(readPlan({ ...base(99999), typtype: 'e' }, 'm', 0)).toMatchObject({
      expr: '"m"::text',
      wire: 'text',
    });
    expect(readPlan(array(base(OID.int4)), 'a', 1)).toEqual({
      expr: '"a"',
      wire: 'int4',
      list: true,
      logical: { kind: 'list', element: { kind: 'int32' } },
    });
    expect(readPlan(array(base(OID.float4)), 'a', 0).expr).toBe('"a"::float8[]');
    expect(readPlan(array(base(OID.interval)), 'a', 1)).toMatchObject({
      expr: '"a"::text[]',
      wire: 'text',
      list: true,
    });
    // Declared multi-dimensional: Postgres' array text, not a list.
    expect(readPlan(array(base(OID.int4)), 'a', 2)).toMatchObject({
      expr: '"a"::text',
      list: false,
      logical: { kind: 'text' },
    });
  });
});

describe('array literals', () => {
  it('parses quoting, escapes, NULL versus "NULL", and explicit lower bounds', () => {
    expect(parseArrayLiteral('{}', ctx)).toEqual([]);
    expect(parseArrayLiteral('{1,NULL,3}', ctx)).toEqual(['1', null, '3']);
    expect(parseArrayLiteral('{"NULL",null,""}', ctx)).toEqual(['NULL', null, '']);
    expect(parseArrayLiteral('{"a,b","c\\"d","e\\\\f"}', ctx)).toEqual(['a,b', 'c"d', 'e\\f']);
    expect(parseArrayLiteral('[0:1]={x,y}', ctx)).toEqual(['x', 'y']);
  });

  it('refuses multi-dimensional values with a message naming the column', () => {
    expect(() => parseArrayLiteral('{{1,2},{3,4}}', ctx)).toThrow(
      /public\.t\.c: holds a multi-dimensional array/,
    );
    expect(() => parseArrayLiteral('[1:2][1:1]={{1},{2}}', ctx)).toThrow(DataError);
  });

  it('round-trips any list of strings written the way array_out quotes them', () => {
    fc.assert(
      fc.property(fc.array(fc.option(fc.string(), { nil: null })), (xs) => {
        const text = `{${xs.map((x) => (x === null ? 'NULL' : `"${x.replace(/[\\"]/g, '\\$&')}"`)).join(',')}}`;
        expect(parseArrayLiteral(text, ctx)).toEqual(xs);
      }),
    );
  });

  it('parses element values in the exact value universe', () => {
    const plan = readPlan(array(base(OID.int8)), 'a', 1);
    expect(parseColumnText(plan, '{9223372036854775807,NULL}', ctx)).toEqual([2n ** 63n - 1n, null]);
    expect(parseColumnText(readPlan(base(OID.numeric, numericTypmod(10, 2)), 'n', 0), '1.50', ctx)).toBe(
      '1.50',
    );
    expect(() =>
      parseColumnText(readPlan(base(OID.numeric, numericTypmod(10, 2)), 'n', 0), 'NaN', ctx),
    ).toThrow(/public\.t\.c: numeric value NaN cannot be stored in a decimal column/);
  });
});

describe('literals and secrets', () => {
  it('quotes literals the way quote_literal does', () => {
    expect(quoteLiteral("o'brien")).toBe("'o''brien'");
    expect(quoteLiteral('a\\b')).toBe("E'a\\\\b'");
    expect(quoteLiteral("\\'")).toBe("E'\\\\'''");
    expect(quoteLiteral('')).toBe("''");
  });

  it('names a URL that does not parse without its password', () => {
    // Un-encoded '/', '#' and '?' end the authority for WHATWG URL (and so for postgres.js).
    expect(() => endpointOf('postgres://app:pa:ss/wo#rd?x@db:5432/shop', 'sources.app')).toThrow(
      'sources.app is not a valid URL; percent-encode @ : / # ? % in the user and password (docs/errors.md): postgres://app:***@db:5432/shop',
    );
    // An un-encoded '@' parses, at the last '@', as postgres.js reads it.
    expect(endpointOf('postgres://app:p@ssw0rd@db:5433/shop')).toMatchObject({
      user: 'app',
      host: 'db',
      port: 5433,
    });
  });
});

describe('connection errors', () => {
  const ep = { user: 'app', host: 'db.example', port: 5433, database: 'shop', source: 'sources.app' };
  const err = (code: string, message = 'x') => Object.assign(new Error(message), { code });

  it('says what to check, on one line, without the password', () => {
    expect(translateConnectError(err('28P01'), ep)?.message).toBe(
      'authentication failed for user "app" at db.example:5433; check the password in sources.app',
    );
    expect(translateConnectError(err('3D000'), ep)?.code).toBe('SOURCE_DATABASE_MISSING');
    expect(translateConnectError(err('ECONNREFUSED'), ep)?.code).toBe('SOURCE_UNREACHABLE');
    expect(translateConnectError(err('ENOTFOUND'), ep)?.message).toContain(
      'cannot resolve host "db.example"',
    );
    expect(translateConnectError(err('CONNECT_TIMEOUT'), ep, 2500)?.message).toContain('within 3 s');
    expect(
      translateConnectError(err('DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed certificate'), ep)?.code,
    ).toBe('SOURCE_TLS');
    expect(
      translateConnectError(err('28000', 'no pg_hba.conf entry for host "1.2.3.4", no encryption\nmore'), ep)
        ?.message,
    ).toMatch(
      /^db\.example:5433 refused user "app" for database "shop": no pg_hba\.conf entry .*, no encryption; .*sslmode=require if only encrypted connections are allowed$/,
    );
    expect(translateConnectError(err('42P01'), ep)).toBeUndefined();
    expect(translateConnectError('nope', ep)).toBeUndefined();
  });
});

describe('PGCOPY framing', () => {
  const schema: Schema = {
    columns: [{ name: 'i', type: { kind: 'int32' }, nullable: true, sourceType: 'integer' }],
    primaryKey: [],
  };
  const header = (flags = 0, ext: number[] = []) => {
    const h = Buffer.alloc(19 + ext.length);
    h.write('PGCOPY\n\xff\r\n\0', 0, 'latin1');
    h.writeInt32BE(flags, 11);
    h.writeInt32BE(ext.length, 15);
    Buffer.from(ext).copy(h, 19);
    return h;
  };
  const tuple = (v: number | null) => {
    const b = Buffer.alloc(v === null ? 6 : 10);
    b.writeInt16BE(1, 0);
    if (v === null) b.writeInt32BE(-1, 2);
    else {
      b.writeInt32BE(4, 2);
      b.writeInt32BE(v, 6);
    }
    return b;
  };
  const trailer = Buffer.from([0xff, 0xff]);
  const decode = (bytes: Buffer, limit = 10) => {
    const enc = new BatchEncoder(schema, { phase: 'incremental' });
    const fields: CopyField[] = [{ wire: 'int4', list: false, writer: enc.col(0), ctx }];
    const dec = new CopyBinaryDecoder(fields, [0], limit, (i) =>
      enc.appendMetaOrdinal(1, 'i000000000001', i, null, false),
    );
    dec.push(bytes);
    dec.end();
    return { dec, values: Array.from(enc.finish(0n).getChildAt(0)!.toArray() as Int32Array) };
  };

  it('skips a header extension, counts tuples past the limit without appending them, and keeps the last key', () => {
    const bytes = Buffer.concat([header(0, [1, 2, 3]), tuple(7), tuple(null), tuple(-5), tuple(9), trailer]);
    const { dec, values } = decode(bytes, 3);
    expect(dec.tuples).toBe(4);
    expect(dec.appended).toBe(3);
    expect(values).toEqual([7, 0, -5]);
    const last = dec.lastKey(0)!;
    expect(last.length).toBe(4);
    expect(Buffer.from(last.buf).readInt32BE(last.start)).toBe(-5);
  });

  it('refuses a wrong signature, row OIDs, data after the trailer and a missing trailer', () => {
    expect(() =>
      decode(Buffer.concat([Buffer.from('PGCOPX\n\xff\r\n\0\0\0\0\0\0\0\0\0', 'latin1'), trailer])),
    ).toThrow(/signature/);
    expect(() => decode(Buffer.concat([header(1 << 16), trailer]))).toThrow(/OIDs/);
    expect(() => decode(Buffer.concat([header(), trailer, tuple(1)]))).toThrow(/after its trailer/);
    expect(() => decode(Buffer.concat([header(), tuple(1)]))).toThrow(/ended early/);
  });
});
