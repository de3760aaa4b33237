/**
 * The raw result-set reader's row walk (shared/drivers/mysql/wire/text-rows.ts) against mysql2's own
 * reading, with no server: random rows of every read kind are framed as text-protocol row
 * packets (length-encoded strings, NULL as 0xFB, 0xFC/0xFD/0xFE lengths for values past 250,
 * 65 535 and 16 MiB bytes), cut into random socket chunks and fed through mysql2's PacketParser,
 * as a connection does. Each packet is read twice: by walkRow + rangeAppenderOf (the batch path),
 * and by mysql2's `readLengthCodedBuffer` (what `typeCast: false` rows are) + parseValue (the
 * row path). The ranges must be exactly mysql2's Buffers and the two batches byte-identical.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Table, tableToIPC } from 'apache-arrow';
import fc from 'fast-check';
import mysql from 'mysql2';
import { describe, expect, it } from 'vitest';
import { DataError } from '../../shared/contracts/errors.js';
import { BatchEncoder } from '../../shared/dataplane/encoder.js';
import { Op } from '../../shared/dataplane/metadata.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import {
  type InfoColumn,
  mapColumn,
  parseValue,
  type ReadPlan,
  rangeAppenderOf,
} from '../../shared/drivers/mysql/types.js';
import { binaryLayout, walkBinaryRow } from '../../shared/drivers/mysql/wire/binary-rows.js';
import type { ResultField } from '../../shared/drivers/mysql/wire/result-fields.js';
import { KEEP_PACKET_MAX, RowRanges, rowOf, walkRow } from '../../shared/drivers/mysql/wire/text-rows.js';
import { daysToDateText } from '../../shared/position/time-text.js';
import { mysqlDatetimeText } from '../harness/mysql-arbitraries.js';

// mysql2's packet framing and Packet readers (not in its package exports: loaded by file path).
const require = createRequire(import.meta.url);
const mysql2Dir = dirname(require.resolve('mysql2/package.json'));
interface Mysql2Packet {
  buffer: Buffer;
  offset: number;
  end: number;
  readLengthCodedBuffer(): Buffer | null;
  isEOF(): boolean;
}
const PacketParser = require(join(mysql2Dir, 'lib/packet_parser.js')) as new (
  onPacket: (p: Mysql2Packet) => void,
) => { execute(chunk: Buffer): void };

const MAX_PART = 0xffffff;

/** A length-encoded string (or NULL) as the server writes it. */
function lenenc(v: Buffer | null): Buffer {
  if (v === null) return Buffer.from([0xfb]);
  const n = v.length;
  let head: Buffer;
  if (n < 251) head = Buffer.from([n]);
  else if (n < 1 << 16) head = Buffer.from([0xfc, n & 0xff, n >> 8]);
  else if (n < 1 << 24) head = Buffer.from([0xfd, n & 0xff, (n >> 8) & 0xff, n >> 16]);
  else {
    head = Buffer.alloc(9);
    head[0] = 0xfe;
    head.writeUInt32LE(n % 2 ** 32, 1);
    head.writeUInt32LE(Math.floor(n / 2 ** 32), 5);
  }
  return Buffer.concat([head, v]);
}

/** Frames one payload as protocol packets (16 MiB - 1 parts; a full last part gets an empty one). */
function frame(payload: Buffer, seq: { n: number }): Buffer[] {
  const out: Buffer[] = [];
  let off = 0;
  for (;;) {
    const len = Math.min(MAX_PART, payload.length - off);
    const head = Buffer.from([len & 0xff, (len >> 8) & 0xff, len >> 16, seq.n++ & 0xff]);
    out.push(head, payload.subarray(off, off + len));
    off += len;
    if (len < MAX_PART) return out;
  }
}

/** Feeds `stream` to mysql2's PacketParser in chunks cut at `cuts` (fractions of its length). */
function parse(stream: Buffer, cuts: readonly number[], onPacket: (p: Mysql2Packet) => void): void {
  const parser = new PacketParser(onPacket);
  const at = [...new Set(cuts.map((c) => Math.floor(c * stream.length)))].sort((a, b) => a - b);
  let prev = 0;
  for (const c of [...at, stream.length]) {
    if (c > prev) parser.execute(Buffer.from(stream.subarray(prev, c)));
    prev = c;
  }
}

const info = (dataType: string, columnType = dataType, extra: Partial<InfoColumn> = {}): InfoColumn => ({
  name: 'c',
  dataType,
  columnType,
  nullable: true,
  numericPrecision: null,
  numericScale: null,
  charset: null,
  ...extra,
});

const utf8 = (s: string) => Buffer.from(s, 'utf8');
const latin1 = (s: string) => Buffer.from(s, 'latin1');
const digits = (min: bigint, max: bigint) => fc.bigInt({ min, max }).map((b) => latin1(String(b)));

/** A string of about `n` characters, multi-byte UTF-8 included. */
const longText = (min: number, max: number) =>
  fc
    .tuple(fc.integer({ min, max }), fc.constantFrom('a', 'é', '€', '😀', 'ab c'))
    .map(([n, unit]) => utf8(unit.repeat(Math.ceil(n / unit.length))));
const text = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }).map(utf8) },
  { weight: 1, arbitrary: fc.constant(Buffer.alloc(0)) },
  { weight: 2, arbitrary: longText(200, 400) },
  { weight: 1, arbitrary: longText(65_000, 70_000) },
);
const datetime = mysqlDatetimeText.map(latin1);
const date = fc.integer({ min: -719_528, max: 2_932_896 }).map((d) => latin1(daysToDateText(d)));

/** One column per read kind (and the MySQL types that share one), with the text the server prints. */
const COLUMNS: [InfoColumn, fc.Arbitrary<Buffer>][] = [
  [info('tinyint'), digits(-128n, 127n)],
  [info('smallint', 'smallint unsigned'), digits(0n, 65_535n)],
  [info('int'), digits(-(2n ** 31n), 2n ** 31n - 1n)],
  [info('int', 'int(10) unsigned'), digits(0n, 2n ** 32n - 1n)],
  [info('bigint'), digits(-(2n ** 63n), 2n ** 63n - 1n)],
  [info('bigint', 'bigint unsigned'), digits(0n, 2n ** 64n - 1n)],
  [
    info('decimal', 'decimal(38,10)', { numericPrecision: 38, numericScale: 10 }),
    fc.bigInt({ min: -(10n ** 38n) + 1n, max: 10n ** 38n - 1n }).map((u) => {
      const s = (u < 0n ? -u : u).toString().padStart(11, '0');
      return latin1(`${u < 0n ? '-' : ''}${s.slice(0, -10)}.${s.slice(-10)}`);
    }),
  ],
  [
    info('decimal', 'decimal(65,30)', { numericPrecision: 65, numericScale: 30 }),
    fc.constantFrom('0.000000000000000000000000000001', '-99999999999999999999999999999999999.5').map(latin1),
  ],
  [info('double'), fc.double({ noNaN: true, noDefaultInfinity: true }).map((x) => latin1(String(x)))],
  [info('year'), digits(1901n, 2155n)],
  [info('date'), fc.oneof(date, fc.constantFrom('0000-00-00', '2024-00-15').map(latin1))],
  [info('datetime', 'datetime(6)'), fc.oneof(datetime, fc.constant(latin1('0000-00-00 00:00:00')))],
  [info('timestamp', 'timestamp(6)'), datetime],
  [info('time', 'time(6)'), fc.constantFrom('-838:59:59.000000', '25:00:00.000001', '00:00:00').map(latin1)],
  [info('varchar', 'varchar(300)', { charset: 'utf8mb4' }), text],
  [info('longtext', 'longtext', { charset: 'utf8mb4' }), text],
  [info('json', 'json', { charset: 'utf8mb4' }), fc.json({ maxDepth: 2 }).map(utf8)],
  [info('enum', "enum('sad','ok')", { charset: 'utf8mb4' }), fc.constantFrom('sad', 'ok', '').map(utf8)],
  [info('set', "set('x','y')", { charset: 'utf8mb4' }), fc.constantFrom('', 'x', 'x,y').map(utf8)],
  [info('bit', 'bit(10)'), fc.uint8Array({ minLength: 2, maxLength: 2 }).map((u) => Buffer.from(u))],
  [
    info('blob'),
    fc.oneof(
      fc.uint8Array({ maxLength: 300 }).map((u) => Buffer.from(u)),
      fc.integer({ min: 65_536, max: 70_000 }).map((n) => Buffer.alloc(n, 0xfb)),
    ),
  ],
];

const PLANS: ReadPlan[] = COLUMNS.map(([c], i) => mapColumn({ ...c, name: `c${i}` }, `c${i}`).read);
const SCHEMA: Schema = {
  columns: PLANS.map((p, i) => ({ name: `c${i}`, type: p.logical, nullable: true, sourceType: 't' })),
  primaryKey: [],
};
const ctxs = PLANS.map((_, i) => ({ table: 'db.t', column: `c${i}` }));
const row = fc.tuple(...COLUMNS.map(([, v]) => fc.option(v, { nil: null, freq: 5 })));

function ipc(enc: BatchEncoder): Buffer {
  return Buffer.from(tableToIPC(new Table(enc.finish(1n))));
}

/** Reads `rows` framed and chunked as a server's result would arrive, both ways; returns both IPCs. */
function readBoth(rows: readonly (readonly (Buffer | null)[])[], cuts: readonly number[]): [Buffer, Buffer] {
  const seq = { n: 1 };
  const stream = Buffer.concat(rows.flatMap((r) => frame(Buffer.concat(r.map(lenenc)), seq)));
  const viaMysql2 = new BatchEncoder(SCHEMA, { phase: 'incremental' });
  const viaRanges = new BatchEncoder(SCHEMA, { phase: 'incremental' });
  const appenders = PLANS.map((p, i) => rangeAppenderOf(p, ctxs[i]!));
  const ranges = new RowRanges(PLANS.length);
  let n = 0;
  parse(stream, cuts, (packet) => {
    const { buffer, offset, end } = packet;
    walkRow(buffer, offset, end, ranges);
    for (let i = 0; i < PLANS.length; i++) {
      const s = ranges.starts[i]!;
      if (s < 0) viaRanges.col(i).appendNull();
      else appenders[i]!(viaRanges.col(i), buffer, s, ranges.ends[i]!);
    }
    viaRanges.appendMetaOrdinal(Op.update, 'i000000000001', n, null, false);
    for (let i = 0; i < PLANS.length; i++) {
      const v = packet.readLengthCodedBuffer();
      const s = ranges.starts[i]!;
      if (v === null) expect(s).toBe(-1);
      else expect(buffer.subarray(s, ranges.ends[i]!).equals(v)).toBe(true);
      viaMysql2.appendValue(i, parseValue(PLANS[i]!, v, ctxs[i]!));
    }
    expect(packet.offset).toBe(end);
    viaMysql2.appendMetaOrdinal(Op.update, 'i000000000001', n, null, false);
    n++;
  });
  expect(n).toBe(rows.length);
  return [ipc(viaMysql2), ipc(viaRanges)];
}

describe('raw row walk == mysql2 rows', () => {
  it('random rows of every read kind, NULLs, empty and long values, cut into random socket chunks', () => {
    fc.assert(
      fc.property(
        fc.array(row, { minLength: 1, maxLength: 12 }),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 20 }),
        (rows, cuts) => {
          const [a, b] = readBoth(rows, cuts);
          expect(b.equals(a)).toBe(true);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('a value past 16 MiB: an 8-byte length, and a payload mysql2 joins from 16 MiB parts', () => {
    const big = Buffer.alloc(MAX_PART + 1000, 0x61);
    big.write('😀 end', big.length - 10, 'utf8');
    const rows = [COLUMNS.map((_, i) => (i === 14 ? big : i === 0 ? latin1('7') : null))];
    const [a, b] = readBoth(rows, [0.1, 0.5, 0.99]);
    expect(b.equals(a)).toBe(true);
    // Exactly one part full: the payload ends with an empty packet.
    const exact = Buffer.alloc(MAX_PART - 5 - (COLUMNS.length - 1), 0x62);
    const [c, d] = readBoth([COLUMNS.map((_, i) => (i === 14 ? exact : null))], [0.3]);
    expect(d.equals(c)).toBe(true);
  });

  it('refuses a packet that does not hold exactly the columns, or a length past its end', () => {
    const r = new RowRanges(2);
    const two = Buffer.concat([lenenc(latin1('ab')), lenenc(null)]);
    walkRow(two, 0, two.length, r);
    expect([r.starts, r.ends]).toEqual([
      [1, -1],
      [3, -1],
    ]);
    expect(() => walkRow(two, 0, two.length - 1, r)).toThrow(/does not hold 2 length-encoded values/);
    const three = Buffer.concat([two, lenenc(latin1('x'))]);
    expect(() => walkRow(three, 0, three.length, r)).toThrow(/does not hold 2/);
    const long = Buffer.from([0xfc, 0xff, 0x00, 0x61]);
    expect(() => walkRow(long, 0, long.length, new RowRanges(1))).toThrow(/does not hold 1/);
    expect(() => walkRow(Buffer.from([0xff]), 0, 1, new RowRanges(1))).toThrow(/does not hold 1/);
  });

  it('keeps key values as slices of a small packet and as copies of a big one', () => {
    const r = new RowRanges(3);
    const small = Buffer.concat([lenenc(latin1('k1')), lenenc(latin1('v')), lenenc(null)]);
    walkRow(small, 0, small.length, r);
    const kept = rowOf(small, r, [0, 2], KEEP_PACKET_MAX);
    expect(kept.map((v) => v?.toString())).toEqual(['k1', undefined, undefined]);
    expect(kept[0]!.buffer).toBe(small.buffer);
    const big = Buffer.concat([lenenc(latin1('k2')), lenenc(Buffer.alloc(KEEP_PACKET_MAX)), lenenc(null)]);
    walkRow(big, 0, big.length, r);
    const copied = rowOf(big, r, [0], KEEP_PACKET_MAX);
    expect(copied[0]!.toString()).toBe('k2');
    expect(copied[0]!.buffer).not.toBe(big.buffer);
    expect(copied[1]).toBeNull();
  });

  it('an impossible calendar date fails with the row path error, naming the column', () => {
    const i = COLUMNS.findIndex(([c]) => c.dataType === 'datetime');
    const bad = Buffer.concat([latin1('xx'), latin1('2024-02-30 00:00:00'), latin1('yy')]);
    const enc = new BatchEncoder(SCHEMA, { phase: 'incremental' });
    const run = () => rangeAppenderOf(PLANS[i]!, ctxs[i]!)(enc.col(i), bad, 2, bad.length - 2);
    expect(run).toThrow(DataError);
    expect(run).toThrow(`db.t.c${i}: '2024-02-30 00:00:00' is not a calendar date`);
  });
});

describe('binary row walk (binary-rows.ts walkBinaryRow)', () => {
  const field = (type: number): ResultField => ({
    type,
    unsigned: false,
    binaryFlag: false,
    decimals: 0,
    characterSet: 45,
    columnLength: 0,
  });
  // LONG (4 bytes), DATETIME (a length byte and its struct), VARCHAR (a length-encoded string).
  const layout = binaryLayout([
    field(mysql.Types.LONG),
    field(mysql.Types.DATETIME),
    field(mysql.Types.VAR_STRING),
  ]);
  /** A binary row of three columns: the 0x00 header, a NULL bitmap of (3 + 9) / 8 bytes, the values. */
  const binaryRow = (nullBits: number, ...values: Buffer[]) =>
    Buffer.concat([Buffer.from([0, nullBits << 2]), ...values]);
  const int = Buffer.from([7, 0, 0, 0]);
  const when = Buffer.from([4, 0xe8, 0x07, 12, 4]);

  it('reads fixed, temporal and length-encoded values by offsets, NULLs from the bitmap', () => {
    const r = new RowRanges(3);
    const row = binaryRow(0, int, when, lenenc(latin1('ab')));
    walkBinaryRow(row, 0, row.length, layout, r);
    expect([r.starts, r.ends]).toEqual([
      [2, 7, 12],
      [6, 11, 14],
    ]);
    const nulls = binaryRow(0b101, when);
    walkBinaryRow(nulls, 0, nulls.length, layout, r);
    expect([r.starts, r.ends]).toEqual([
      [-1, 3, -1],
      [-1, 7, -1],
    ]);
  });

  it('refuses a row whose values do not fit the packet, or a NULL mark among its values', () => {
    const r = new RowRanges(3);
    const refuses = (row: Buffer) =>
      expect(() => walkBinaryRow(row, 0, row.length, layout, r)).toThrow(/does not hold 3 values/);
    refuses(binaryRow(0, int, when, Buffer.from([0xfb])));
    refuses(binaryRow(0, int, when, Buffer.from([0xfc, 0x05, 0x00, 0x61])));
    refuses(binaryRow(0, int, when, Buffer.from([0xff])));
    refuses(binaryRow(0, int, when));
    refuses(binaryRow(0, int, Buffer.from([7, 0xe8, 0x07])));
    refuses(binaryRow(0, int.subarray(0, 3)));
    refuses(binaryRow(0, int, when, lenenc(latin1('ab')), Buffer.from([0])));
    const header = binaryRow(0, int, when, lenenc(latin1('ab')));
    header[0] = 1;
    refuses(header);
  });
});
