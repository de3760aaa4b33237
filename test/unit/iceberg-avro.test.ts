/**
 * tidemark's Avro object container files (shared/iceberg/avro.ts): random schemas of every Avro
 * type (records nested, named types referred to by name, enums, fixed, arrays, maps, unions) and
 * random records round-trip through both codecs and any block size; the header keeps the schema
 * exactly as given (Iceberg's `field-id`, `element-id`, `key-id`, `value-id`); longs keep all 64
 * bits; a block written by another writer in snappy reads; a damaged file or a value that does
 * not fit its schema is refused with the field's path. pyiceberg reading these files is
 * test/integration/iceberg-manifest-pyiceberg.test.ts.
 */
import zlib from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readAvroFile, writeAvroFile } from '../../shared/iceberg/avro.js';
import { AvroError, type AvroSchema, type AvroValue } from '../../shared/iceberg/avro-schema.js';

// ---- random schemas, each with an arbitrary of its values and the value read back

interface Gen {
  readonly schema: AvroSchema;
  /** Values to write. */
  readonly values: fc.Arbitrary<unknown>;
  /** The value `readAvroFile` returns for a written one. */
  readonly read: (v: unknown) => AvroValue;
}

const same = (v: unknown) => v as AvroValue;

const primitives: Gen[] = [
  { schema: 'null', values: fc.constant(null), read: () => null },
  { schema: 'boolean', values: fc.boolean(), read: same },
  { schema: 'int', values: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), read: same },
  {
    schema: 'long',
    values: fc.oneof(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.maxSafeInteger()),
    read: (v) => BigInt(v as number | bigint),
  },
  { schema: 'float', values: fc.float({ noDefaultInfinity: false }), read: same },
  { schema: 'double', values: fc.double(), read: same },
  { schema: 'string', values: fc.string({ unit: 'grapheme', maxLength: 30 }), read: same },
  { schema: 'bytes', values: fc.uint8Array({ maxLength: 40 }), read: same },
  // A primitive with attributes, as Iceberg writes logical types.
  {
    schema: { type: 'long', logicalType: 'timestamp-micros', 'adjust-to-utc': true },
    values: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
    read: same,
  },
  { schema: { type: 'int', logicalType: 'date' }, values: fc.integer({ min: -1e6, max: 1e6 }), read: same },
];

let names = 0;
const fresh = (prefix: string) => `${prefix}${names++}`;

/** A schema tree of depth at most `depth`, named types unique within it. */
function genArb(depth: number): fc.Arbitrary<Gen> {
  const leaves = fc.oneof(
    fc.constantFrom(...primitives),
    fc.integer({ min: 0, max: 20 }).map((size): Gen => {
      const name = fresh('fx');
      return {
        schema: { type: 'fixed', name, size },
        values: fc.uint8Array({ minLength: size, maxLength: size }),
        read: same,
      };
    }),
    fc.uniqueArray(fc.stringMatching(/^[A-Z][A-Z0-9_]{0,5}$/), { minLength: 1, maxLength: 5 }).map(
      (symbols): Gen => ({
        schema: { type: 'enum', name: fresh('en'), symbols },
        values: fc.constantFrom(...symbols),
        read: same,
      }),
    ),
  );
  if (depth === 0) return leaves;
  const inner = genArb(depth - 1);
  return fc.oneof(
    { weight: 3, arbitrary: leaves },
    {
      weight: 1,
      arbitrary: inner.map(
        (g): Gen => ({
          schema: { type: 'array', items: g.schema, 'element-id': 100 + depth },
          values: fc.array(g.values, { maxLength: 4 }),
          read: (v) => (v as unknown[]).map(g.read),
        }),
      ),
    },
    {
      weight: 1,
      arbitrary: inner.map(
        (g): Gen => ({
          schema: { type: 'map', values: g.schema, 'key-id': 7, 'value-id': 8 },
          values: fc.dictionary(fc.string({ maxLength: 6 }), g.values, { maxKeys: 3 }),
          read: (v) => new Map(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, g.read(x)])),
        }),
      ),
    },
    {
      weight: 1,
      // An optional value, as Iceberg writes every optional field.
      arbitrary: inner
        .filter((g) => g.schema !== 'null' && !Array.isArray(g.schema))
        .map(
          (g): Gen => ({
            schema: ['null', g.schema],
            values: fc.option(g.values, { nil: null }),
            read: (v) => (v === null ? null : g.read(v)),
          }),
        ),
    },
    { weight: 2, arbitrary: recordArb(inner) },
  );
}

function recordArb(inner: fc.Arbitrary<Gen>): fc.Arbitrary<Gen> {
  return fc.array(inner, { maxLength: 5 }).map((gens): Gen => {
    const fields = gens.map((g, i) => ({ name: `f${i}`, type: g.schema, 'field-id': 1000 + i, doc: 'd' }));
    return {
      schema: { type: 'record', name: fresh('r'), namespace: 'ns.x', fields },
      values: fc
        .tuple(...gens.map((g) => g.values))
        .map((vs) => Object.fromEntries(vs.map((v, i) => [`f${i}`, v]))),
      read: (v) =>
        Object.fromEntries(
          gens.map((g, i) => [`f${i}`, g.read((v as Record<string, unknown>)[`f${i}`])]),
        ) as AvroValue,
    };
  });
}

const caseArb = genArb(3).chain((g) =>
  fc.record({
    gen: fc.constant(g),
    records: fc.array(g.values, { maxLength: 30 }),
    codec: fc.constantFrom('null' as const, 'deflate' as const),
    blockBytes: fc.constantFrom(1, 64, 65536),
    metadata: fc.dictionary(
      fc.stringMatching(/^[a-z][a-z.-]{0,8}$/),
      fc.string({ unit: 'grapheme', maxLength: 20 }),
      {
        maxKeys: 3,
      },
    ),
  }),
);

/** An Avro long as its zigzag varint. */
function varint(v: bigint): number[] {
  let z = v >= 0n ? v << 1n : (-v << 1n) - 1n;
  const out: number[] = [];
  while (z >= 0x80n) {
    out.push(Number(z & 0x7fn) | 0x80);
    z >>= 7n;
  }
  out.push(Number(z));
  return out;
}

describe('Avro object container files', () => {
  it('round-trips random schemas and records, any codec and block size', () => {
    fc.assert(
      fc.property(caseArb, ({ gen, records, codec, blockBytes, metadata }) => {
        const metadataWithoutReserved = Object.fromEntries(
          Object.entries(metadata).filter(([k]) => !k.startsWith('avro.')),
        );
        const bytes = writeAvroFile(gen.schema, records, {
          codec,
          blockBytes,
          metadata: metadataWithoutReserved,
        });
        const file = readAvroFile(bytes);
        expect(file.schema).toEqual(gen.schema);
        expect(file.codec).toBe(codec);
        expect(file.metadata).toEqual(metadataWithoutReserved);
        expect(file.records).toEqual(records.map(gen.read));
      }),
      { numRuns: 300 },
    );
  });

  it('keeps the schema in the header exactly as given, Iceberg ids and all', () => {
    const schema = {
      type: 'record',
      name: 'manifest_entry',
      fields: [
        { name: 'status', type: 'int', 'field-id': 0 },
        {
          name: 'm',
          type: [
            'null',
            {
              type: 'array',
              logicalType: 'map',
              items: {
                type: 'record',
                name: 'k1_v2',
                fields: [
                  { name: 'key', type: 'int', 'field-id': 1 },
                  { name: 'value', type: 'long', 'field-id': 2 },
                ],
              },
            },
          ],
          default: null,
          'field-id': 3,
        },
        { name: 'l', type: { type: 'array', items: 'long', 'element-id': 4 }, 'field-id': 5 },
        { name: 's', type: { type: 'map', values: 'int', 'key-id': 6, 'value-id': 7 }, 'field-id': 8 },
      ],
    } as const;
    const bytes = writeAvroFile(schema, [{ status: 1, m: [{ key: 1, value: 2n }], l: [3], s: { a: 1 } }]);
    // The JSON text itself is in the header, byte for byte.
    expect(Buffer.from(bytes).includes(Buffer.from(JSON.stringify(schema)))).toBe(true);
    expect(readAvroFile(bytes).schema).toEqual(schema);
  });

  it('writes the bytes the Avro specification gives (header, zigzag varints, one block)', () => {
    const sync = new Uint8Array(16).fill(7);
    const bytes = writeAvroFile(
      { type: 'record', name: 'r', fields: [{ name: 'x', type: 'long' }] },
      [{ x: -65n }],
      {
        codec: 'null',
        syncMarker: sync,
      },
    );
    const schemaJson = '{"type":"record","name":"r","fields":[{"name":"x","type":"long"}]}';
    const expected = [
      ...Buffer.from('Obj\x01', 'latin1'),
      ...varint(2n), // two metadata entries
      ...varint(11n),
      ...Buffer.from('avro.schema'),
      ...varint(BigInt(schemaJson.length)),
      ...Buffer.from(schemaJson),
      ...varint(10n),
      ...Buffer.from('avro.codec'),
      ...varint(4n),
      ...Buffer.from('null'),
      0,
      ...sync,
      ...varint(1n), // one record
      ...varint(2n), // of two bytes
      0x81,
      0x01, // -65 zigzagged: 129
      ...sync,
    ];
    expect([...bytes]).toEqual(expected);
  });

  it('keeps every bit of a long, and refuses a number past 2^53', () => {
    const schema = { type: 'record', name: 'r', fields: [{ name: 'id', type: 'long' }] } as const;
    const ids = [2n ** 63n - 1n, -(2n ** 63n), 2n ** 62n + 11n, 0n, -1n];
    const read = readAvroFile(
      writeAvroFile(
        schema,
        ids.map((id) => ({ id })),
      ),
    );
    expect(read.records).toEqual(ids.map((id) => ({ id })));
    expect(() => writeAvroFile(schema, [{ id: 2 ** 53 + 2 }])).toThrow(/id: expected a long/);
    expect(() => writeAvroFile(schema, [{ id: 2n ** 63n }])).toThrow(AvroError);
  });

  it('fills a missing field from its default, and refuses a missing field without one', () => {
    const schema = {
      type: 'record',
      name: 'r',
      fields: [
        { name: 'a', type: ['null', 'long'], default: null },
        { name: 'b', type: 'bytes', default: '\u00ff\u0001' },
        { name: 'c', type: 'long', default: 5 },
      ],
    } as const;
    expect(readAvroFile(writeAvroFile(schema, [{}])).records).toEqual([
      { a: null, b: Uint8Array.of(255, 1), c: 5n },
    ]);
    const strict = {
      type: 'record',
      name: 's',
      fields: [{ name: 'x', type: { type: 'record', name: 't', fields: [{ name: 'y', type: 'string' }] } }],
    } as const;
    expect(() => writeAvroFile(strict, [{ x: {} }])).toThrow(/x\.y: expected a string, got undefined/);
  });

  it('chooses the union branch a value fits, and refuses one it does not', () => {
    const schema = [
      'null',
      'int',
      'long',
      'string',
      { type: 'fixed', name: 'f4', size: 4 },
      'bytes',
    ] as const;
    const values = [null, 5, 2n ** 40n, 'x', Uint8Array.of(1, 2, 3, 4), Uint8Array.of(1)];
    expect(readAvroFile(writeAvroFile(schema, values)).records).toEqual([
      null,
      5,
      2n ** 40n,
      'x',
      Uint8Array.of(1, 2, 3, 4),
      Uint8Array.of(1),
    ]);
    expect(() => writeAvroFile(['null', 'int'], [true])).toThrow(
      /expected a value of one of the union's 2 branches/,
    );
  });

  it('refers to a named type by name, in its namespace, and may nest a record in itself', () => {
    const schema = {
      type: 'record',
      name: 'node',
      namespace: 'a.b',
      fields: [
        { name: 'v', type: { type: 'fixed', name: 'four', size: 4 } },
        { name: 'w', type: 'four' },
        { name: 'x', type: 'a.b.four' },
        { name: 'next', type: ['null', 'node'], default: null },
      ],
    } as const;
    const four = Uint8Array.of(1, 2, 3, 4);
    const value = { v: four, w: four, x: four, next: { v: four, w: four, x: four, next: null } };
    expect(readAvroFile(writeAvroFile(schema, [value])).records).toEqual([value]);
    expect(() =>
      writeAvroFile({ type: 'record', name: 'r', fields: [{ name: 'x', type: 'nope' }] }, []),
    ).toThrow(/unknown type "nope"/);
  });

  it('reads arrays and maps written in several blocks, and blocks with byte sizes', () => {
    // An array of longs [1, 2, 3] as two blocks, the second with a negative count and its size.
    const schema = { type: 'array', items: 'long' } as const;
    const body = [
      ...varint(1n),
      ...varint(1n),
      ...varint(-2n),
      ...varint(2n),
      ...varint(2n),
      ...varint(3n),
      0,
    ];
    const sync = new Uint8Array(16).fill(3);
    const file = Uint8Array.from([
      ...writeAvroFile(schema, [], { codec: 'null', syncMarker: sync }),
      ...varint(1n),
      ...varint(BigInt(body.length)),
      ...body,
      ...sync,
    ]);
    expect(readAvroFile(file).records).toEqual([[1n, 2n, 3n]]);
  });

  it('reads snappy blocks (literals and copies, CRC-32 checked)', () => {
    const schema = 'string';
    const record = [...varint(12n), ...Buffer.from('abcdabcdabcd')];
    // Snappy: length 13, a literal of 5 bytes (the varint and "abcd"), then a 1-byte-offset copy of 8 at offset 4.
    const snappy = [13, (5 - 1) << 2, ...record.slice(0, 5), 0b001 | ((8 - 4) << 2), 4];
    const crc = zlib.crc32(Uint8Array.from(record));
    const block = [...snappy, (crc >>> 24) & 0xff, (crc >>> 16) & 0xff, (crc >>> 8) & 0xff, crc & 0xff];
    const sync = new Uint8Array(16).fill(9);
    const header = writeAvroFile(schema, [], { codec: 'null', syncMarker: sync });
    const snappyHeader = Buffer.from(header).toString('latin1').replace('\x08null', '\x0csnappy');
    const file = Uint8Array.from([
      ...Buffer.from(snappyHeader, 'latin1'),
      ...varint(1n),
      ...varint(BigInt(block.length)),
      ...block,
      ...sync,
    ]);
    expect(readAvroFile(file)).toMatchObject({ codec: 'snappy', records: ['abcdabcdabcd'] });
    const broken = Uint8Array.from(file);
    broken[broken.length - 17]! ^= 1; // the CRC's last byte
    expect(() => readAvroFile(broken)).toThrow(/CRC-32/);
  });

  it('refuses a damaged file', () => {
    const bytes = writeAvroFile('long', [1n, 2n], { codec: 'deflate' });
    expect(() => readAvroFile(bytes.subarray(1))).toThrow(/Obj1 magic/);
    expect(() => readAvroFile(bytes.subarray(0, bytes.length - 3))).toThrow(AvroError);
    const badSync = Uint8Array.from(bytes);
    badSync[badSync.length - 1]! ^= 0xff;
    expect(() => readAvroFile(badSync)).toThrow(/sync marker/);
    expect(() => writeAvroFile('int', [], { metadata: { 'avro.codec': 'x' } })).toThrow(/reserved/);
  });
});
