/**
 * MySQL 8 decoding that no server here can exercise (the harness runs MariaDB 10.11 only; no
 * MySQL 8 package is installable): byte-level fixtures built by hand, parsed by the installed
 * @vlasky/zongji the way its binlog stream does.
 *
 * Where the facts come from (none were checked against a running MySQL 8):
 *   - binary JSON layout: MySQL's sql-common/json_binary.h / json_binary.cc as recalled (type
 *     byte; small object = count u16, size u16, key entries (offset u16, length u16), value
 *     entries (type u8, offset-or-inline u16), keys, values; offsets relative to the container's
 *     first byte after its type byte; literals/int16/uint16 inline in small containers; string
 *     length as 7-bit groups, high bit = more), cross-checked only against zongji's own reader
 *     (lib/json_decode.js), which was read here;
 *   - key order: MySQL stores an object's keys sorted by length, then bytewise (json_dom.h's key
 *     comparator, as recalled) and prints them in stored order with ", " and ": " separators
 *     (the separators as in the issue's example `{"a": 1, "b": [true, null]}`);
 *   - Gtid_log_event body: libs/mysql/binlog/event/control_events.cpp (Gtid_event reader) as
 *     recalled: flags u8, sid 16 bytes, gno i64 LE, lt_type u8 (2), last_committed i64,
 *     sequence_number i64, immediate_commit_timestamp 7 bytes (bit 55 set: an
 *     original_commit_timestamp of 7 bytes follows), transaction_length (packed integer),
 *     immediate_server_version u32 (bit 31 set: original_server_version follows).
 */
import { createRequire } from 'node:module';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import type { CdcEvent, CdcRuntime } from '../../shared/contracts/cdc.js';
import { parseBinlogPosition } from '../../shared/drivers/mysql/cdc/position.js';
import { MysqlCdcReader } from '../../shared/drivers/mysql/cdc/reader.js';
import { binlogAppenderFor } from '../../shared/drivers/mysql/cdc/values.js';
import type { ColumnInfo } from '../../shared/drivers/mysql/introspect.js';
import { mapColumn } from '../../shared/drivers/mysql/types.js';
import {
  GTID_MICROS,
  gtidCommitMicros,
  installGtidCommitMicros,
} from '../../shared/drivers/mysql/wire/binlog-gtid.js';
import { jsonBinaryToText, loadZongjiJson } from '../../shared/drivers/mysql/wire/binlog-json.js';
import { compile, decodeImage } from '../../shared/drivers/mysql/wire/binlog-rows.js';

const main = import.meta.resolve('@vlasky/zongji');
const zongjiVersion = (createRequire(main)('./package.json') as { version: string }).version;
const json = (await import(new URL('./lib/json_decode.js', main).href)) as {
  default(b: Buffer): unknown;
  jsonToText(v: unknown): string;
};
const events = (await import(new URL('./lib/binlog_event.js', main).href)) as {
  Gtid: new (parser: unknown, options: object, zongji: object) => Record<string, unknown>;
};
const { default: initBinlogClass } = (await import(new URL('./lib/sequence/binlog.js', main).href)) as {
  default: (z: object) => { prototype: Record<string, unknown> };
};
const { Parser } = (await import(new URL('./lib/reader.js', main).href)) as {
  Parser: new () => { append(b: Buffer): void; _offset: number };
};

// ---------------------------------------------------------------------------------------------
// A hand encoder of MySQL's binary JSON (small containers only).

type J =
  | null
  | boolean
  | string
  | { int16: number }
  | { int32: number }
  | { int64: bigint }
  | { uint64: bigint }
  | { double: number }
  | J[]
  | { obj: [string, J][] };

const T = {
  obj: 0x00,
  arr: 0x02,
  lit: 0x04,
  int16: 0x05,
  int32: 0x07,
  int64: 0x09,
  uint64: 0x0a,
  double: 0x0b,
  str: 0x0c,
};

const u16 = (n: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(n);
  return b;
};

function varLength(n: number): Buffer {
  const out: number[] = [];
  do {
    let byte = n & 0x7f;
    n = Math.floor(n / 128);
    if (n > 0) byte |= 0x80;
    out.push(byte);
  } while (n > 0);
  return Buffer.from(out);
}

/** The value's type byte and data (no type byte); `inline` is the u16 slot value when inlined. */
function encode(v: J): { type: number; data: Buffer; inline?: number } {
  if (v === null) return { type: T.lit, data: Buffer.alloc(0), inline: 0 };
  if (v === true) return { type: T.lit, data: Buffer.alloc(0), inline: 1 };
  if (v === false) return { type: T.lit, data: Buffer.alloc(0), inline: 2 };
  if (typeof v === 'string') {
    const s = Buffer.from(v, 'utf8');
    return { type: T.str, data: Buffer.concat([varLength(s.length), s]) };
  }
  if (Array.isArray(v))
    return container(
      T.arr,
      v.map((x) => [undefined, x]),
    );
  if ('obj' in v) return container(T.obj, v.obj);
  if ('int16' in v) return { type: T.int16, data: Buffer.alloc(0), inline: v.int16 & 0xffff };
  const b = Buffer.alloc(8);
  if ('int32' in v) {
    b.writeInt32LE(v.int32);
    return { type: T.int32, data: b.subarray(0, 4) };
  }
  if ('int64' in v) b.writeBigInt64LE(v.int64);
  else if ('uint64' in v) b.writeBigUInt64LE(v.uint64);
  else b.writeDoubleLE(v.double);
  return { type: 'int64' in v ? T.int64 : 'uint64' in v ? T.uint64 : T.double, data: b };
}

function container(type: number, members: [string | undefined, J][]): { type: number; data: Buffer } {
  const n = members.length;
  const isObj = type === T.obj;
  const header = 4 + (isObj ? n * 4 : 0) + n * 3;
  const keys = members.map(([k]) => Buffer.from(k ?? '', 'utf8'));
  let at = header + keys.reduce((s, k) => s + k.length, 0);
  const keyEntries: Buffer[] = [];
  let keyAt = header;
  for (const k of isObj ? keys : []) {
    keyEntries.push(u16(keyAt), u16(k.length));
    keyAt += k.length;
  }
  const valueEntries: Buffer[] = [];
  const values: Buffer[] = [];
  for (const [, m] of members) {
    const e = encode(m);
    if (e.inline !== undefined) valueEntries.push(Buffer.from([e.type]), u16(e.inline));
    else {
      valueEntries.push(Buffer.from([e.type]), u16(at));
      values.push(e.data);
      at += e.data.length;
    }
  }
  const body = Buffer.concat([...keyEntries, ...valueEntries, ...(isObj ? keys : []), ...values]);
  return { type, data: Buffer.concat([u16(n), u16(at), body]) };
}

function jsonb(v: J): Buffer {
  const e = encode(v);
  if (e.inline !== undefined) {
    // A scalar document: the type byte and its value (inline types are stored whole).
    return Buffer.concat([Buffer.from([e.type]), e.type === T.lit ? Buffer.from([e.inline]) : u16(e.inline)]);
  }
  return Buffer.concat([Buffer.from([e.type]), e.data]);
}

const text = (v: J) => json.jsonToText(json.default(jsonb(v)));

// Opaque JSON values are printed by zongji's own decoder, loaded with the row-image override.
beforeAll(() => loadZongjiJson(import.meta.resolve('@vlasky/zongji')));

describe(`MySQL 8 binary JSON through zongji ${zongjiVersion} (hand-built bytes)`, () => {
  // [document as stored (keys in MySQL's stored order), the text MySQL 8 prints for it]
  const cases: [string, J, string][] = [
    [
      'the issue example',
      {
        obj: [
          ['a', { int16: 1 }],
          ['b', [true, null]],
        ],
      },
      '{"a": 1, "b": [true, null]}',
    ],
    [
      'nested object and array, keys by length then bytes',
      {
        obj: [
          ['id', { int64: 9007199254740993n }],
          ['tags', ['x', 'ü€😀', false]],
          [
            'nested',
            {
              obj: [
                ['d', { double: 3.25 }],
                ['f', false],
                ['n', { int16: -32768 }],
              ],
            },
          ],
        ],
      },
      '{"id": 9007199254740993, "tags": ["x", "ü€😀", false], "nested": {"d": 3.25, "f": false, "n": -32768}}',
    ],
    [
      '64-bit extremes and int32',
      [
        { int64: -9223372036854775808n },
        { uint64: 18446744073709551615n },
        { int32: -100000 },
        { double: -0.5 },
      ],
      '[-9223372036854775808, 18446744073709551615, -100000, -0.5]',
    ],
    ['escapes in strings', ['quote" back\\ nl\n tab\t'], '["quote\\" back\\\\ nl\\n tab\\t"]'],
    ['a string longer than 127 bytes (two-byte length)', ['é'.repeat(100)], `["${'é'.repeat(100)}"]`],
    [
      'empty containers',
      {
        obj: [
          ['a', []],
          ['b', { obj: [] }],
        ],
      },
      '{"a": [], "b": {}}',
    ],
    ['scalar documents: string', 'ü', '"ü"'],
    ['scalar documents: true', true, 'true'],
    ['scalar documents: null', null, 'null'],
    ['scalar documents: int64', { int64: 9007199254740993n }, '9007199254740993'],
  ];
  for (const [name, doc, mysql] of cases)
    it(`${name}: ${mysql.slice(0, 60)}`, () => {
      expect(text(doc)).toBe(mysql);
      expect(jsonBinaryToText(jsonb(doc))).toBe(mysql);
    });

  it('the encoder agrees with the layout: the example is 1 + 4 + 2*4 + 2*3 + 2 + (4 + 2*3) bytes', () => {
    const b = jsonb({
      obj: [
        ['a', { int16: 1 }],
        ['b', [true, null]],
      ],
    });
    expect(b.length).toBe(1 + 4 + 8 + 6 + 2 + 10);
    expect(b.readUInt16LE(3)).toBe(b.length - 1); // the object's size field
  });

  // Found with these fixtures: zongji builds a JS object, so its text differs from MySQL's for
  // keys that are array indices (JS orders them first, ascending) and for `__proto__` (an
  // assignment to the prototype, the member is lost). binlog-json.ts writes the text straight
  // from the bytes, in stored order; the zongji assertions pin its behaviour so a fix in zongji
  // shows up here.
  it('integer-like keys keep their stored order (MySQL stores "b" before "10"); zongji reorders', () => {
    const doc: J = {
      obj: [
        ['b', { int16: 1 }],
        ['10', { int16: 2 }],
      ],
    };
    expect(jsonBinaryToText(jsonb(doc))).toBe('{"b": 1, "10": 2}');
    expect(text(doc)).toBe('{"10": 2, "b": 1}');
  });

  it('a "__proto__" key is kept; zongji drops it', () => {
    const doc: J = {
      obj: [
        ['a', { int16: 2 }],
        ['__proto__', { obj: [['x', 'y']] }],
      ],
    };
    expect(jsonBinaryToText(jsonb(doc))).toBe('{"a": 2, "__proto__": {"x": "y"}}');
    expect(text(doc)).toBe('{"a": 2}');
  });

  // The MySQL text of a J, written independently of both decoders: stored order, ", " and ": ",
  // strings through JSON.stringify, 64-bit integers exact, doubles as String() (zongji's).
  const mysqlText = (v: J): string => {
    if (v === null) return 'null';
    if (typeof v === 'boolean') return String(v);
    if (typeof v === 'string') return JSON.stringify(v);
    if (Array.isArray(v)) return `[${v.map(mysqlText).join(', ')}]`;
    if ('obj' in v) return `{${v.obj.map(([k, x]) => `${JSON.stringify(k)}: ${mysqlText(x)}`).join(', ')}}`;
    if ('int16' in v) return String(v.int16);
    if ('int32' in v) return String(v.int32);
    if ('int64' in v) return String(v.int64);
    if ('uint64' in v) return String(v.uint64);
    return String(v.double);
  };
  const scalar: fc.Arbitrary<J> = fc.oneof(
    fc.constantFrom<J>(null, true, false),
    fc.string({ unit: 'grapheme', maxLength: 20 }),
    fc.string({ unit: 'binary', maxLength: 200 }).filter((x) => !/[\uD800-\uDFFF]/.test(x)),
    fc.integer({ min: -32768, max: 32767 }).map((n) => ({ int16: n })),
    fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }).map((n) => ({ int32: n })),
    fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map((n) => ({ int64: n })),
    fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map((n) => ({ uint64: n })),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => ({ double: n })),
  );
  const key = fc.oneof(
    fc.string({ maxLength: 8 }),
    fc.constantFrom('__proto__', '10', '0', 'constructor', 'toString', 'ü', '1e3', '-1'),
    fc.nat(1000).map(String),
  );
  const doc = fc.letrec<{ v: J }>((tie) => ({
    v: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      scalar,
      fc.array(tie('v'), { maxLength: 5 }),
      fc
        .uniqueArray(fc.tuple(key, tie('v')), { selector: ([k]) => k, maxLength: 5 })
        .map((obj): J => ({ obj })),
    ),
  })).v;

  it('property: jsonBinaryToText of the encoded bytes is the MySQL text', () => {
    fc.assert(
      fc.property(doc, (v) => {
        const b = jsonb(v);
        // The hand encoder's small containers hold up to 64 KiB.
        fc.pre(b.length < 65536);
        expect(jsonBinaryToText(b)).toBe(mysqlText(v));
      }),
      { numRuns: 500 },
    );
  });

  it('large containers (u32 offsets, int32 inline) and opaque values print as zongji prints them', () => {
    const u32 = (n: number) => {
      const b = Buffer.alloc(4);
      b.writeUInt32LE(n);
      return b;
    };
    // A large object {"a": int32 -5, "bb": "xy", "c": [uint16 7, opaque VAR_STRING 0x0102]}.
    const header = 8 + 3 * 6 + 3 * 5;
    const keys = Buffer.from('abbc');
    const strAt = header + keys.length;
    const str = Buffer.from([2, 0x78, 0x79]);
    const arrAt = strAt + str.length;
    const opaque = Buffer.from([253, 2, 1, 2]);
    const arr = Buffer.concat([
      u16(2),
      u16(4 + 6 + opaque.length),
      Buffer.from([6]),
      u16(7),
      Buffer.from([15]),
      u16(10),
      opaque,
    ]);
    const i32 = Buffer.alloc(4);
    i32.writeInt32LE(-5);
    const doc = Buffer.concat([
      Buffer.from([1]),
      u32(3),
      u32(arrAt + arr.length),
      ...[u32(header), u16(1), u32(header + 1), u16(2), u32(header + 3), u16(1)],
      ...[Buffer.from([7]), i32, Buffer.from([12]), u32(strAt), Buffer.from([2]), u32(arrAt)],
      keys,
      str,
      arr,
    ]);
    const zongji = json.jsonToText(json.default(doc));
    expect(zongji).toBe('{"a": -5, "bb": "xy", "c": [7, "base64:type253:AQI="]}');
    expect(jsonBinaryToText(doc)).toBe(zongji);
  });

  it('row images decode a MySQL JSON column (type 245) through jsonBinaryToText; empty is NULL', () => {
    const info = {
      name: 'doc',
      notNull: false,
      ...mapColumn(
        {
          name: 'doc',
          dataType: 'json',
          columnType: 'json',
          nullable: true,
          numericPrecision: null,
          numericScale: null,
          charset: null,
        } as unknown as Parameters<typeof mapColumn>[0],
        '`doc`',
      ),
    } as unknown as ColumnInfo;
    const entry = {
      parentSchema: 'd',
      tableName: 't',
      columns: [{ name: 'doc', type: 245, charset: null, metadata: { length_size: 4 } }],
      columnSchemas: [{ COLUMN_NAME: 'doc', COLUMN_TYPE: 'json' }],
    };
    const plan = compile(entry, [info], [binlogAppenderFor(info, { table: 'd.t', column: 'doc' })], []);
    if (typeof plan === 'string') throw new Error(plan);
    const got: (string | null)[] = [];
    const writer = {
      appendUtf8Bytes: (b: Buffer, s: number, e: number) => got.push(b.toString('utf8', s, e)),
      appendText: (s: string) => got.push(s),
      appendNull: () => got.push(null),
    };
    const doc = jsonb({
      obj: [
        ['b', { int16: 1 }],
        ['10', ['x', { int64: 9007199254740993n }]],
        ['__proto__', null],
      ],
    });
    const len = (n: number) => {
      const b = Buffer.alloc(4);
      b.writeUInt32LE(n);
      return b;
    };
    const image = Buffer.concat([Buffer.from([0]), len(doc.length), doc, Buffer.from([0]), len(0)]);
    let off = decodeImage(plan, image, 0, Buffer.from([1]), 1, [writer as never]);
    off = decodeImage(plan, image, off, Buffer.from([1]), 1, [writer as never]);
    expect(off).toBe(image.length);
    expect(got).toEqual(['{"b": 1, "10": ["x", 9007199254740993], "__proto__": null}', null]);
  });

  it('the lake path stores the text unchanged (a JSON column is a text column of those bytes)', () => {
    const mapping = mapColumn(
      {
        name: 'doc',
        dataType: 'json',
        columnType: 'json',
        nullable: true,
        numericPrecision: null,
        numericScale: null,
        charset: null,
      } as unknown as Parameters<typeof mapColumn>[0],
      '`doc`',
    );
    const info = { name: 'doc', notNull: false, ...mapping } as unknown as ColumnInfo;
    expect(info.sourceType).toBe('json');
    const append = binlogAppenderFor(info, { table: 'db.t', column: 'doc' });
    const got: Buffer[] = [];
    const writer = {
      appendUtf8Bytes: (b: Buffer, s: number, e: number) => got.push(Buffer.from(b.subarray(s, e))),
      appendText: (s: string) => got.push(Buffer.from(s, 'utf8')),
    };
    for (const [, doc, mysql] of cases) {
      got.length = 0;
      append(writer as never, text(doc));
      expect(Buffer.concat(got).toString('utf8')).toBe(mysql);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Gtid_log_event (type 33) bodies.

const SID = Buffer.from('3e11fa4771ca11e19e33c80aa9429562', 'hex');
const UUID = '3e11fa47-71ca-11e1-9e33-c80aa9429562';

function int64(n: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64LE(n);
  return b;
}
function uint56(n: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(n);
  return b.subarray(0, 7);
}

/** A MySQL 8.0 Gtid_log_event body (no checksum). */
function gtidBody(gno: bigint, immediateMicros: bigint, originalMicros?: bigint): Buffer {
  const flag = 1n << 55n;
  return Buffer.concat([
    Buffer.from([0x01]), // flags: FLAG_MAY_HAVE_SBR
    SID,
    int64(gno),
    Buffer.from([0x02]), // LOGICAL_TIMESTAMP_TYPECODE
    int64(41n), // last_committed
    int64(42n), // sequence_number
    uint56(originalMicros === undefined ? immediateMicros : immediateMicros | flag),
    ...(originalMicros === undefined ? [] : [uint56(originalMicros)]),
    Buffer.from([0xfa]), // transaction_length 250, a one-byte packed integer
    (() => {
      const b = Buffer.alloc(4);
      b.writeUInt32LE(80036); // immediate_server_version, bit 31 clear: no original version
      return b;
    })(),
  ]);
}

function parseGtid(body: Buffer, headerSeconds: number, nextPosition: number): Record<string, unknown> {
  const parser = new Parser();
  parser.append(body);
  const ev = new events.Gtid(
    parser,
    { timestamp: headerSeconds * 1000, nextPosition, size: body.length, eventType: 33 },
    { useChecksum: false },
  );
  expect(parser._offset).toBe(body.length); // the rest of the body is skipped, not misread
  return ev;
}

describe(`MySQL 8 Gtid events through zongji ${zongjiVersion} (hand-built bytes)`, () => {
  const commitMicros = 1_764_612_000_123_456n; // 2025-12-01T18:00:00.123456Z

  it('gives uuid:gno (lowercase dashed uuid), also with an original_commit_timestamp', () => {
    const a = parseGtid(gtidBody(7n, commitMicros), 1_764_612_000, 500);
    expect(a.gtid).toBe(`${UUID}:7`);
    expect(a.sid).toBe(UUID);
    expect(a.gno).toBe(7);
    const b = parseGtid(gtidBody(2n ** 60n, commitMicros, commitMicros - 5_000_000n), 1_764_612_000, 500);
    expect(b.gtid).toBe(`${UUID}:${2n ** 60n}`); // beyond 2^53: an exact string
  });

  it('drops immediate_commit_timestamp: zongji keeps neither it nor the event bytes', () => {
    const ev = parseGtid(gtidBody(7n, commitMicros), 1_764_612_000, 500);
    expect(Object.keys(ev).sort()).toEqual([
      'flags',
      'gno',
      'gtid',
      'nextPosition',
      'sid',
      'size',
      'timestamp',
    ]);
    // Hence binlog-gtid.ts, which reads the micros from the packet (below); zongji's event
    // itself still has only the header's seconds.
    expect(ev.timestamp).toBe(1_764_612_000_000);
  });

  it('binlog-gtid.ts reads immediate_commit_timestamp (also with an original one); 5.7 bodies have none', () => {
    expect(gtidCommitMicros(gtidBody(7n, commitMicros))).toBe(commitMicros);
    expect(gtidCommitMicros(gtidBody(7n, commitMicros, commitMicros - 5_000_000n))).toBe(commitMicros);
    expect(gtidCommitMicros(gtidBody(7n, commitMicros).subarray(0, 42))).toBeUndefined();
  });

  it("binlog-gtid.ts wraps this zongji's Binlog.binlogData: the micros are there while the Gtid event is delivered", () => {
    for (const useChecksum of [false, true]) {
      const z: Record<string, unknown> = {
        useChecksum,
        options: {},
        stopped: false,
        _executedGtids: null,
        _skipEvent: () => false,
        _trackGtidProgress: () => undefined,
      };
      installGtidCommitMicros(z);
      z.BinlogClass = initBinlogClass(z);
      const C = z.BinlogClass as { prototype: Record<string, unknown> };
      expect((C.prototype.binlogData as { gtidMicros?: boolean }).gtidMicros).toBe(true);
      const seen: [unknown, unknown][] = [];
      const seq = Object.create(C.prototype) as Record<string, unknown>;
      seq._callback = (err: unknown, ev: Record<string, unknown>) => {
        if (err) throw err;
        seen.push([ev?.gtid, z[GTID_MICROS]]);
      };
      const body = gtidBody(7n, commitMicros);
      const header = Buffer.alloc(20);
      header[5] = 33;
      header.writeUInt32LE(19 + body.length + (useChecksum ? 4 : 0), 10);
      header.writeUInt32LE(900, 14);
      const buffer = Buffer.concat([header, body, Buffer.alloc(useChecksum ? 4 : 0)]);
      const packet = { buffer, offset: 0, end: buffer.length, isEOF: () => false, isError: () => false };
      const next = (seq.binlogData as (p: unknown, c: unknown) => unknown).call(seq, packet, undefined);
      expect(next).toBe(C.prototype.binlogData);
      expect(seen).toEqual([[`${UUID}:7`, commitMicros]]);
      expect(z[GTID_MICROS]).toBeUndefined();
    }
  });

  it('the reader takes the Gtid event commit micros for __commit_ts (ns); without them, the header seconds', () => {
    const reader = new MysqlCdcReader(
      { url: 'mysql://127.0.0.1/x', heartbeatMs: 0, clock: () => 1e12 },
      [],
      new Map(),
      { serverId: 9, heartbeatMs: 0 } as CdcRuntime,
    );
    const r = reader as unknown as { decode(e: unknown): unknown; txnCommitNs: bigint };
    const ev = parseGtid(gtidBody(7n, commitMicros), 1_764_612_000, 579);
    r.decode(ev);
    expect(r.txnCommitNs).toBe(1_764_612_000_000_000_000n);
    (ev as { commitMicros?: bigint }).commitMicros = commitMicros;
    r.decode(ev);
    expect(r.txnCommitNs).toBe(commitMicros * 1000n);
  });

  it('the reader adds each committed uuid:gno to the position as a MySQL GTID set', () => {
    const reader = new MysqlCdcReader(
      { url: 'mysql://127.0.0.1/x', heartbeatMs: 0, clock: () => 1e12 },
      [],
      new Map(),
      {
        serverId: 9,
        heartbeatMs: 0,
      } as CdcRuntime,
    );
    const decode = (ev: unknown) =>
      (reader as unknown as { decode(e: unknown): CdcEvent | undefined }).decode(ev);
    const xid = (next: number) => ({
      getTypeName: () => 'Xid',
      nextPosition: next,
      size: 31,
      timestamp: 1e12,
    });
    const positions: string[] = [];
    let next = 1000;
    for (const gno of [3n, 1n, 2n, 5n]) {
      const ev = parseGtid(gtidBody(gno, commitMicros), 1_764_612_000, next + 79);
      decode(ev);
      next += 200;
      const out = decode(xid(next));
      expect(out?.kind).toBe('progress');
      positions.push(parseBinlogPosition((out as Extract<CdcEvent, { kind: 'progress' }>).position).gtid);
    }
    expect(positions).toEqual([`${UUID}:3`, `${UUID}:1:3`, `${UUID}:1-3`, `${UUID}:1-3:5`]);
  });
});
