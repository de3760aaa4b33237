/**
 * The PGCOPY decoder's length guards (issue 9, schema changes are never silent), on buffers built
 * by hand: a value whose width is not its introspected type's is a SchemaChangedError
 * (SCHEMA_CHANGED) naming the column, a length below -1 is a protocol error (SOURCE_PROTOCOL),
 * and neither ever produces a value. The server-backed side (a column altered between two pages)
 * is in test/integration/postgres-driver.test.ts.
 *
 * Mutation check (done by hand when this file was written: each guard in wire/binary-rows.ts removed,
 * this file run, the guard restored; what each removal did):
 * - the fixed-width compare in decodeTuple: 11 tests fail. "int4 fed 8-byte values" decodes
 *   [0], [0], [1] (the high words of 5, 7 and 5e9, as in the trial); "a key-only field" decodes
 *   [['a']] with an 8-byte resume key; every "%s: only a N-byte value" case decodes a value (a
 *   0-byte bool reads the trailer's 0xff as true); the numeric test decodes a value; the
 *   corruption property fails (shrunk to one all-NULL row whose int4 got a 1-byte value).
 * - the length < -1 check of tupleEnd alone, or of decodeTuple alone: nothing fails (the other
 *   one refuses first: tupleEnd walks every tuple before it is decoded). Both removed: "a field
 *   length of -2" decodes ["cd"], [""], ["cd"]: the text column's end moved back 2 bytes and the
 *   third row overwrote the first ("ab" is lost); the int4 variant throws a RangeError instead.
 * - the numeric branch of wrongWidth: "numeric whose length does not match" decodes 1234.00 for
 *   bytes holding 1234.56 with ndigits 1 (the second digit silently dropped).
 * - the element width compare in appendList: "a list element of the wrong width" decodes [0, 0]
 *   for the int8[] elements 5 and 7.
 * - the element length < -1 check in appendList: "list element length -2" decodes [1, null].
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatDecimal, readDecimalUnscaled } from '../../shared/dataplane/decimal128.js';
import { BatchEncoder } from '../../shared/dataplane/encoder.js';
import type { LogicalType, Schema } from '../../shared/dataplane/schema.js';
import type { WireKind } from '../../shared/drivers/postgres/types.js';
import { CopyBinaryDecoder, type CopyField } from '../../shared/drivers/postgres/wire/binary-rows.js';

const TABLE = 'public.t';

// ---------------------------------------------------------------------------------------------
// Building PGCOPY binary by hand (wire/binary-rows.ts top comment: 11-byte signature, int32 flags,
// int32 header extension length; per tuple int16 field count, per field int32 length + bytes;
// int16 -1 ends the data).

function header(): Buffer {
  const h = Buffer.alloc(19);
  h.write('PGCOPY\n\xff\r\n\0', 0, 'latin1');
  h.writeInt32BE(0, 11);
  h.writeInt32BE(0, 15);
  return h;
}

const TRAILER = Buffer.from([0xff, 0xff]);

/** One field: its length word and bytes; null = SQL NULL; a number = a bare length word. */
type Field = Buffer | null | { readonly length: number; readonly raw: true };

function tuple(fields: readonly Field[]): Buffer {
  const parts: Buffer[] = [];
  const count = Buffer.alloc(2);
  count.writeInt16BE(fields.length, 0);
  parts.push(count);
  for (const f of fields) {
    const len = Buffer.alloc(4);
    len.writeInt32BE(f === null ? -1 : f.length, 0);
    parts.push(len);
    if (f !== null && !('raw' in f)) parts.push(f);
  }
  return Buffer.concat(parts);
}

function stream(tuples: readonly (readonly Field[])[]): Buffer {
  return Buffer.concat([header(), ...tuples.map(tuple), TRAILER]);
}

const int4 = (v: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(v, 0);
  return b;
};
const int8 = (v: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(v, 0);
  return b;
};
const text = (s: string) => Buffer.from(s, 'utf8');

/** Binary NUMERIC: int16 ndigits, int16 weight, uint16 sign, int16 dscale, base-10000 digits. */
function numeric(weight: number, dscale: number, digits: readonly number[], ndigits = digits.length): Buffer {
  const b = Buffer.alloc(8 + 2 * digits.length);
  b.writeInt16BE(ndigits, 0);
  b.writeInt16BE(weight, 2);
  b.writeUInt16BE(0, 4);
  b.writeInt16BE(dscale, 6);
  for (const [i, d] of digits.entries()) b.writeInt16BE(d, 8 + 2 * i);
  return b;
}

/** A 1-D binary array of element OID `oid`: int32 ndim, has-null, oid, size, lower bound, elements. */
function array(oid: number, elements: readonly Field[]): Buffer {
  const head = Buffer.alloc(20);
  head.writeInt32BE(1, 0);
  head.writeInt32BE(elements.includes(null) ? 1 : 0, 4);
  head.writeInt32BE(oid, 8);
  head.writeInt32BE(elements.length, 12);
  head.writeInt32BE(1, 16);
  // The same (int32 length, bytes) framing as a tuple's fields, without the count.
  return Buffer.concat([head, tuple(elements).subarray(2)]);
}

// ---------------------------------------------------------------------------------------------
// Decoding into a real encoder

interface Col {
  readonly name: string;
  readonly wire: WireKind;
  readonly type: LogicalType;
  readonly list?: boolean;
  /** Selected only for the resume key: no column writer. */
  readonly keyOnly?: boolean;
}

type Outcome =
  | { readonly values: unknown[][]; readonly lastKey?: Buffer | undefined }
  | { readonly error: { readonly name: string; readonly code: unknown; readonly message: string } };

/** Decodes `bytes` (in `chunks` pieces) over `cols`; the values per row, or the error thrown. */
function decode(cols: readonly Col[], bytes: Buffer, cuts: readonly number[] = [], withKey = false): Outcome {
  const data = cols.filter((c) => !c.keyOnly);
  const schema: Schema = {
    columns: data.map((c) => ({ name: c.name, type: c.type, nullable: true, sourceType: c.wire })),
    primaryKey: [],
  };
  const enc = new BatchEncoder(schema, { phase: 'incremental' });
  let w = 0;
  const fields: CopyField[] = cols.map((c) => ({
    wire: c.wire,
    list: c.list ?? false,
    writer: c.keyOnly ? undefined : enc.col(w++),
    ctx: { table: TABLE, column: c.name },
  }));
  const dec = new CopyBinaryDecoder(fields, [0], Number.MAX_SAFE_INTEGER, (i) =>
    enc.appendMetaOrdinal(1, 'i000000000001', i, null, false),
  );
  try {
    let at = 0;
    for (const cut of [...cuts].sort((a, b) => a - b)) {
      dec.push(bytes.subarray(at, cut));
      at = cut;
    }
    dec.push(bytes.subarray(at));
    dec.end();
  } catch (e) {
    const x = e as Error & { code?: unknown };
    return { error: { name: x.name, code: x.code, message: x.message } };
  }
  const record = enc.finish(0n);
  const values: unknown[][] = [];
  for (let r = 0; r < record.numRows; r++) {
    values.push(
      data.map((c, i) => {
        const vec = record.getChildAt(i)!;
        if (!vec.isValid(r)) return null;
        if (c.type.kind === 'decimal') {
          const d = vec.data[0]!;
          return formatDecimal(
            readDecimalUnscaled(d.values as Uint32Array, (d.offset + r) * 4),
            c.type.scale,
          );
        }
        const v = vec.get(r);
        if (c.list) return Array.from({ length: v.length }, (_, k) => v.get(k));
        return v;
      }),
    );
  }
  if (!withKey) return { values };
  const k = dec.lastKey(0);
  const lastKey =
    k === undefined || k.length < 0 ? undefined : Buffer.from(k.buf.subarray(k.start, k.start + k.length));
  return { values, lastKey };
}

const c4: Col = { name: 'c', wire: 'int4', type: { kind: 'int32' } };

describe('fixed-width values of another width are a schema change', () => {
  it('int4 fed 8-byte values 5, 7, 5e9 (the trial: int4 -> bigint mid-run) throws SCHEMA_CHANGED naming the column', () => {
    const out = decode([c4], stream([[int8(5n)], [int8(7n)], [int8(5_000_000_000n)]]));
    // Without the guard this is { values: [[0], [0], [1]] }: the high words.
    expect(out).toEqual({
      error: expect.objectContaining({ name: 'SchemaChangedError', code: 'SCHEMA_CHANGED' }),
    });
    const { message } = (out as { error: { message: string } }).error;
    expect(message).toContain(
      'public.t: the schema changed during this run (between its pages); nothing of the changed page reached the lake: ' +
        'column "c": a 8-byte value arrived where its introspected type int4 has 4 bytes; the column type changed.',
    );
    expect(message).toContain('tidemark schema accept --table public.t');
  });

  it('decodes the same column when the widths are right (the guard costs nothing else)', () => {
    expect(decode([c4], stream([[int4(5)], [null], [int4(-7)]]), [], true)).toEqual({
      values: [[5], [null], [-7]],
      lastKey: int4(-7),
    });
  });

  it('checks a key-only field too (its bytes become the resume token)', () => {
    const cols: Col[] = [
      { name: 'id', wire: 'int4', type: { kind: 'int32' }, keyOnly: true },
      { name: 'v', wire: 'text', type: { kind: 'text' } },
    ];
    const out = decode(cols, stream([[int8(5_000_000_000n), text('a')]]), [], true);
    // Without the guard: values [['a']] and a resume key whose int4 reading is 1.
    expect(out).toEqual({ error: expect.objectContaining({ code: 'SCHEMA_CHANGED' }) });
    expect((out as { error: { message: string } }).error.message).toContain('column "id": a 8-byte value');
  });

  it.each([
    ['bool', 1, { kind: 'bool' }],
    ['int2', 2, { kind: 'int16' }],
    ['int8', 8, { kind: 'int64' }],
    ['float8', 8, { kind: 'float64' }],
    ['date', 4, { kind: 'date' }],
    ['timestamp', 8, { kind: 'timestamp', utc: true }],
    ['uuid', 16, { kind: 'text' }],
  ] as const)('%s: only a %d-byte value is accepted', (wire, width, type) => {
    const col: Col = { name: 'x', wire, type };
    for (const len of [width - 1, width + 1, 2 * width, 0]) {
      if (len < 0) continue;
      const out = decode([col], stream([[Buffer.alloc(len, 0)]]));
      expect(out).toEqual({ error: expect.objectContaining({ code: 'SCHEMA_CHANGED' }) });
      expect((out as { error: { message: string } }).error.message).toContain(
        `column "x": a ${len}-byte value arrived where its introspected type ${wire} has ${width} bytes`,
      );
    }
    expect(decode([col], stream([[Buffer.alloc(width, 0)]]))).toHaveProperty('values');
  });
});

describe('numeric: the length is 8 + 2 * ndigits', () => {
  const dec: Col = { name: 'amount', wire: 'numeric', type: { kind: 'decimal', precision: 10, scale: 2 } };

  it('decodes a well-formed numeric(10,2)', () => {
    // 1234.56 = digits [1234, 5600], weight 0, dscale 2.
    expect(decode([dec], stream([[numeric(0, 2, [1234, 5600])]]))).toMatchObject({ values: [['1234.56']] });
  });

  it('refuses a numeric whose length does not match its ndigits (both ways)', () => {
    // ndigits says 1 but 2 digits follow (12 bytes where 10 were due), and ndigits 3 with 2 digits.
    for (const bytes of [numeric(0, 2, [1234, 5600], 1), numeric(0, 2, [1234, 5600], 3)]) {
      const out = decode([dec], stream([[bytes]]));
      expect(out).toEqual({ error: expect.objectContaining({ code: 'SCHEMA_CHANGED' }) });
      expect((out as { error: { message: string } }).error.message).toMatch(
        /column "amount": a 12-byte value arrived where its introspected type numeric has (10|14) bytes \(8 \+ 2 per digit, [13] digits\)/,
      );
    }
    // Shorter than the 8-byte header (e.g. an int4 where a numeric was introspected).
    const out = decode([dec], stream([[int4(1234)]]));
    expect((out as { error: { message: string } }).error.message).toContain(
      'a 4-byte value arrived where its introspected type numeric has at least 8 bytes',
    );
  });
});

describe('a length below -1 is a protocol error, never a value', () => {
  const t: Col = { name: 'note', wire: 'text', type: { kind: 'text' } };

  it('a field length of -2 in a text column throws SOURCE_PROTOCOL naming table.column and the length', () => {
    const out = decode([t], stream([[text('ab')], [{ length: -2, raw: true }], [text('cd')]]));
    // Without the guards the text column's end offset moves 2 bytes back, over "ab".
    expect(out).toEqual({
      error: {
        name: 'SourceError',
        code: 'SOURCE_PROTOCOL',
        message:
          'public.t.note: protocol error: field 1 of a tuple has length -2; the COPY binary stream is corrupt (a length is -1 for NULL or >= 0)',
      },
    });
  });

  it('is refused in a fixed-width column and in any chunking of the stream', () => {
    const bytes = stream([[int4(1)], [{ length: -2, raw: true }]]);
    for (let cut = 1; cut < bytes.length; cut++) {
      expect(decode([c4], bytes, [cut])).toEqual({
        error: expect.objectContaining({ code: 'SOURCE_PROTOCOL' }),
      });
    }
  });
});

describe('list elements', () => {
  const list4: Col = {
    name: 'ia',
    wire: 'int4',
    list: true,
    type: { kind: 'list', element: { kind: 'int32' } },
  };

  it('decodes a well-formed int4[]', () => {
    expect(decode([list4], stream([[array(23, [int4(1), null, int4(3)])]]))).toMatchObject({
      values: [[[1, null, 3]]],
    });
  });

  it('a list element of the wrong width (int4[] -> int8[]) throws SCHEMA_CHANGED', () => {
    const out = decode([list4], stream([[array(20, [int8(5n), int8(7n)])]]));
    // Without the guard: [[0, 0]], the high words (the walk steps by each element's own length).
    expect(out).toEqual({ error: expect.objectContaining({ code: 'SCHEMA_CHANGED' }) });
    expect((out as { error: { message: string } }).error.message).toContain(
      'column "ia": a 8-byte list element arrived where its introspected element type int4 has 4 bytes',
    );
  });

  it('a list element length of -2 is a protocol error; so is an array whose elements overrun it', () => {
    const bad = array(23, [int4(1), { length: -2, raw: true }]);
    expect(decode([list4], stream([[bad]]))).toEqual({
      error: expect.objectContaining({
        code: 'SOURCE_PROTOCOL',
        message: expect.stringContaining('list element 2 has length -2'),
      }),
    });
    const overrun = array(23, [int4(1), int4(2)]);
    overrun.writeInt32BE(3, 12); // says 3 elements, holds 2
    expect(decode([list4], stream([[overrun]]))).toEqual({
      error: expect.objectContaining({ code: 'SOURCE_PROTOCOL' }),
    });
  });
});

describe('property: random int4/int8/text rows', () => {
  const cols: Col[] = [
    { name: 'a', wire: 'int4', type: { kind: 'int32' } },
    { name: 'b', wire: 'int8', type: { kind: 'int64' } },
    { name: 's', wire: 'text', type: { kind: 'text' } },
  ];
  const WIDTH = [4, 8] as const;
  const row = fc.tuple(
    fc.option(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { nil: null }),
    fc.option(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), { nil: null }),
    fc.option(fc.string({ unit: 'grapheme', maxLength: 20 }), { nil: null }),
  );
  const fieldsOf = (r: readonly [number | null, bigint | null, string | null]): Field[] => [
    r[0] === null ? null : int4(r[0]),
    r[1] === null ? null : int8(r[1]),
    r[2] === null ? null : text(r[2]),
  ];
  const rows = fc.array(row, { minLength: 1, maxLength: 30 });
  const cuts = fc.array(fc.nat(), { maxLength: 4 });

  it('a correct buffer decodes to the same values, however it is chunked', () => {
    fc.assert(
      fc.property(rows, cuts, (rs, cs) => {
        const bytes = stream(rs.map(fieldsOf));
        const out = decode(
          cols,
          bytes,
          cs.map((c) => c % bytes.length),
        );
        expect(out).toHaveProperty(
          'values',
          rs.map((r) => [...r]),
        );
      }),
      { numRuns: 200 },
    );
  });

  it('any fixed-width length corrupted to another positive width throws SCHEMA_CHANGED, never values', () => {
    const corruption = fc.record({
      at: fc.nat(),
      col: fc.constantFrom(0, 1),
      width: fc.integer({ min: 1, max: 24 }),
      fill: fc.integer({ min: 0, max: 255 }),
    });
    fc.assert(
      fc.property(rows, corruption, cuts, (rs, k, cs) => {
        fc.pre(k.width !== WIDTH[k.col]);
        const tuples = rs.map(fieldsOf);
        // The corrupted field keeps a self-consistent framing: only its width is wrong.
        tuples[k.at % tuples.length]![k.col] = Buffer.alloc(k.width, k.fill);
        const bytes = stream(tuples);
        const out = decode(
          cols,
          bytes,
          cs.map((c) => c % bytes.length),
        );
        expect(out).toEqual({ error: expect.objectContaining({ code: 'SCHEMA_CHANGED' }) });
        expect((out as { error: { message: string } }).error.message).toContain(
          `column "${cols[k.col]!.name}": a ${k.width}-byte value arrived where its introspected type ${cols[k.col]!.wire} has ${WIDTH[k.col]} bytes`,
        );
      }),
      { numRuns: 200 },
    );
  });
});
