/**
 * Iceberg v2 manifests and manifest lists (shared/iceberg/manifest.ts): the field ids of the Avro
 * schemas are the spec's (checked against a table typed from the spec's "Manifests" and
 * "Manifest Lists" sections, not against the module's own constants); the header holds the key/
 * values the spec requires; random entries and manifest lists round-trip (63-bit snapshot ids,
 * maps of metrics, bounds, optional fields); partition tuples of a partitioned spec are typed by
 * their transforms and summarized; counts, minimum sequence numbers and inheritance follow the
 * spec; a manifest another writer named differently reads by field id. pyiceberg reading these
 * files is test/integration/iceberg-manifest-pyiceberg.test.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readAvroFile, writeAvroFile } from '../../shared/iceberg/avro.js';
import type { AvroSchema } from '../../shared/iceberg/avro-schema.js';
import {
  EntryStatus,
  type IcebergDataFile,
  type IcebergManifestEntry,
  inheritFromManifest,
  liveEntries,
  readManifest,
  writeManifest,
} from '../../shared/iceberg/manifest.js';
import {
  type IcebergManifestFile,
  manifestFileOf,
  readManifestList,
  writeManifestList,
} from '../../shared/iceberg/manifest-list.js';
import { deserializeValue, twosComplementBE } from '../../shared/iceberg/single-value.js';
import type { IcebergPartitionSpec, IcebergSchema } from '../../shared/iceberg/spec.js';

const SCHEMA: IcebergSchema = {
  type: 'struct',
  'schema-id': 3,
  'identifier-field-ids': [1],
  fields: [
    { id: 1, name: 'id', required: true, type: 'long' },
    { id: 2, name: 'region', required: false, type: 'string' },
    { id: 3, name: 'at', required: false, type: 'timestamptz' },
    { id: 4, name: 'price', required: false, type: 'decimal(9, 2)' },
    { id: 5, name: 'ratio', required: false, type: 'double' },
  ],
};
const UNPARTITIONED: IcebergPartitionSpec = { 'spec-id': 0, fields: [] };

// ---- the spec's field ids, typed from the spec text

/** manifest_entry (v2): name -> id. */
const ENTRY_IDS = { status: 0, snapshot_id: 1, sequence_number: 3, file_sequence_number: 4, data_file: 2 };
/** data_file (v2): name -> id, and the key/value (or element) ids of its maps and lists. */
const DATA_FILE_IDS: Record<string, [number, ...number[]]> = {
  content: [134],
  file_path: [100],
  file_format: [101],
  partition: [102],
  record_count: [103],
  file_size_in_bytes: [104],
  column_sizes: [108, 117, 118],
  value_counts: [109, 119, 120],
  null_value_counts: [110, 121, 122],
  nan_value_counts: [137, 138, 139],
  lower_bounds: [125, 126, 127],
  upper_bounds: [128, 129, 130],
  key_metadata: [131],
  split_offsets: [132, 133],
  equality_ids: [135, 136],
  sort_order_id: [140],
  referenced_data_file: [143],
};
/** manifest_file (v2) and field_summary. */
const MANIFEST_FILE_IDS = {
  manifest_path: 500,
  manifest_length: 501,
  partition_spec_id: 502,
  content: 517,
  sequence_number: 515,
  min_sequence_number: 516,
  added_snapshot_id: 503,
  added_files_count: 504,
  existing_files_count: 505,
  deleted_files_count: 506,
  added_rows_count: 512,
  existing_rows_count: 513,
  deleted_rows_count: 514,
  partitions: 507,
  key_metadata: 519,
};
const SUMMARY_IDS = { contains_null: 509, contains_nan: 518, lower_bound: 510, upper_bound: 511 };

type Json = { [k: string]: unknown };
const record = (s: unknown): Json => {
  const o = (Array.isArray(s) ? s.find((b) => b !== 'null') : s) as Json;
  return o;
};
const fieldsOf = (s: unknown) => (record(s).fields as Json[]) ?? [];
/** The ids a field's type carries below it: map key/value field ids, a list's element id. */
function innerIds(type: unknown): number[] {
  const t = record(type);
  if (t.type === 'array' && t.logicalType === 'map')
    return fieldsOf(t.items).map((f) => f['field-id'] as number);
  if (t.type === 'array') return [t['element-id'] as number];
  return [];
}

// ---- random entries

const counts = fc.option(
  fc
    .array(fc.tuple(fc.integer({ min: 1, max: 2000 }), fc.nat({ max: 2 ** 40 })), { maxLength: 5 })
    .map((e) => new Map(e)),
  { nil: undefined },
);
const bounds = fc.option(
  fc
    .array(fc.tuple(fc.integer({ min: 1, max: 2000 }), fc.uint8Array({ maxLength: 17 })), { maxLength: 5 })
    .map((e) => new Map(e)),
  { nil: undefined },
);
const opt = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });

const dataFileArb: fc.Arbitrary<IcebergDataFile> = fc
  .record({
    file_path: fc
      .string({ unit: 'grapheme', minLength: 1, maxLength: 40 })
      .map((s) => `s3://bucket/t/data/${s}.parquet`),
    record_count: fc.nat({ max: 2 ** 40 }),
    file_size_in_bytes: fc.nat({ max: 2 ** 45 }),
    column_sizes: counts,
    value_counts: counts,
    null_value_counts: counts,
    nan_value_counts: counts,
    lower_bounds: bounds,
    upper_bounds: bounds,
    key_metadata: opt(fc.uint8Array({ maxLength: 8 })),
    split_offsets: opt(
      fc.array(fc.nat({ max: 2 ** 45 }), { maxLength: 4 }).map((a) => a.sort((x, y) => x - y)),
    ),
    sort_order_id: opt(fc.nat({ max: 10 })),
  })
  .map((r) => {
    const out: Record<string, unknown> = { content: 0, file_format: 'PARQUET', partition: {} };
    for (const [k, v] of Object.entries(r)) if (v !== undefined) out[k] = v;
    return out as unknown as IcebergDataFile;
  });

const seq = fc.nat({ max: 2 ** 40 });
const snapshotId = fc.bigInt({ min: 1n, max: 2n ** 63n - 1n });

const entryArb: fc.Arbitrary<IcebergManifestEntry> = fc.oneof(
  // Added before its commit: everything inherited.
  dataFileArb.map((data_file) => ({ status: EntryStatus.ADDED, data_file })),
  // Added with explicit numbers, existing, deleted: the numbers written.
  fc
    .record({
      status: fc.constantFrom(EntryStatus.ADDED, EntryStatus.EXISTING, EntryStatus.DELETED),
      snapshot_id: snapshotId,
      sequence_number: seq,
      file_sequence_number: seq,
      data_file: dataFileArb,
    })
    .map((e) => e as IcebergManifestEntry),
);

const summaryArb = fc.record(
  {
    contains_null: fc.boolean(),
    contains_nan: fc.boolean(),
    lower_bound: fc.uint8Array({ maxLength: 8 }),
    upper_bound: fc.uint8Array({ maxLength: 8 }),
  },
  { requiredKeys: ['contains_null'] },
);

const manifestFileArb: fc.Arbitrary<IcebergManifestFile> = fc
  .record({
    manifest_path: fc.string({ minLength: 1, maxLength: 30 }).map((s) => `s3://b/t/metadata/${s}.avro`),
    manifest_length: fc.nat({ max: 2 ** 40 }),
    partition_spec_id: fc.nat({ max: 5 }),
    content: fc.constantFrom(0 as const, 1 as const),
    sequence_number: seq,
    min_sequence_number: seq,
    added_snapshot_id: snapshotId,
    added_files_count: fc.nat({ max: 2 ** 31 - 1 }),
    existing_files_count: fc.nat({ max: 2 ** 31 - 1 }),
    deleted_files_count: fc.nat({ max: 2 ** 31 - 1 }),
    added_rows_count: fc.nat({ max: 2 ** 50 }),
    existing_rows_count: fc.nat({ max: 2 ** 50 }),
    deleted_rows_count: fc.nat({ max: 2 ** 50 }),
    partitions: opt(fc.array(summaryArb, { maxLength: 3 })),
    key_metadata: opt(fc.uint8Array({ maxLength: 8 })),
  })
  .map(
    (r) =>
      Object.fromEntries(
        Object.entries(r).filter(([, v]) => v !== undefined),
      ) as unknown as IcebergManifestFile,
  );

/** A data file with only the fields the spec requires. */
const minimalFile = (path: string, records = 1): IcebergDataFile => ({
  content: 0,
  file_path: path,
  file_format: 'PARQUET',
  partition: {},
  record_count: records,
  file_size_in_bytes: 1,
});

describe('Iceberg manifests', () => {
  it("writes the spec's field ids and the header key/values v2 requires", () => {
    const { bytes } = writeManifest({
      schema: SCHEMA,
      spec: UNPARTITIONED,
      entries: [
        {
          status: EntryStatus.ADDED,
          data_file: {
            content: 0,
            file_path: 'f',
            file_format: 'PARQUET',
            partition: {},
            record_count: 1,
            file_size_in_bytes: 1,
          },
        },
      ],
    });
    const file = readAvroFile(bytes);
    const entry = fieldsOf(file.schema);
    expect(Object.fromEntries(entry.map((f) => [f.name, f['field-id']]))).toEqual(ENTRY_IDS);
    const dataFile = fieldsOf(entry.find((f) => f.name === 'data_file')!.type);
    expect(Object.fromEntries(dataFile.map((f) => [f.name, [f['field-id'], ...innerIds(f.type)]]))).toEqual(
      DATA_FILE_IDS,
    );
    // Optional fields are unions with null first and a null default (spec Appendix A).
    for (const f of [...entry, ...dataFile]) {
      if (Array.isArray(f.type)) expect([f.type[0], f.default]).toEqual(['null', null]);
    }
    expect(record(dataFile.find((f) => f.name === 'partition')!.type)).toEqual({
      type: 'record',
      name: 'r102',
      fields: [],
    });
    expect(file.metadata).toEqual({
      schema: JSON.stringify(SCHEMA),
      'schema-id': '3',
      'partition-spec': '[]',
      'partition-spec-id': '0',
      'format-version': '2',
      content: 'data',
    });
    expect(file.codec).toBe('deflate');
  });

  it("writes the manifest list's field ids and header", () => {
    const bytes = writeManifestList({
      snapshotId: 2n ** 62n + 1n,
      parentSnapshotId: undefined,
      sequenceNumber: 4,
      manifests: [],
    });
    const file = readAvroFile(bytes);
    const fields = fieldsOf(file.schema);
    expect(Object.fromEntries(fields.map((f) => [f.name, f['field-id']]))).toEqual(MANIFEST_FILE_IDS);
    const partitions = record(fields.find((f) => f.name === 'partitions')!.type);
    expect(partitions['element-id']).toBe(508);
    expect(Object.fromEntries(fieldsOf(partitions.items).map((f) => [f.name, f['field-id']]))).toEqual(
      SUMMARY_IDS,
    );
    expect(file.metadata).toEqual({
      'snapshot-id': String(2n ** 62n + 1n),
      'parent-snapshot-id': 'null',
      'sequence-number': '4',
      'format-version': '2',
    });
  });

  it('round-trips random entries, and counts them by status', () => {
    fc.assert(
      fc.property(
        fc.array(entryArb, { maxLength: 12 }),
        fc.constantFrom('null' as const, 'deflate' as const),
        (entries, codec) => {
          const { bytes, summary } = writeManifest({ schema: SCHEMA, spec: UNPARTITIONED, entries, codec });
          const read = readManifest(bytes);
          expect(read.entries).toEqual(entries);
          expect(read).toMatchObject({
            schema: SCHEMA,
            schemaId: 3,
            spec: UNPARTITIONED,
            formatVersion: 2,
            content: 'data',
          });
          const by = (s: EntryStatus) => entries.filter((e) => e.status === s);
          const rows = (es: IcebergManifestEntry[]) => es.reduce((n, e) => n + e.data_file.record_count, 0);
          expect(summary).toMatchObject({
            added_files_count: by(EntryStatus.ADDED).length,
            existing_files_count: by(EntryStatus.EXISTING).length,
            deleted_files_count: by(EntryStatus.DELETED).length,
            added_rows_count: rows(by(EntryStatus.ADDED)),
            existing_rows_count: rows(by(EntryStatus.EXISTING)),
            deleted_rows_count: rows(by(EntryStatus.DELETED)),
            partitions: [],
          });
        },
      ),
      { numRuns: 150 },
    );
  });

  it('round-trips random manifest lists, 63-bit snapshot ids included', () => {
    fc.assert(
      fc.property(
        fc.array(manifestFileArb, { maxLength: 8 }),
        snapshotId,
        fc.option(snapshotId, { nil: undefined }),
        seq,
        (manifests, id, parent, sequenceNumber) => {
          const read = readManifestList(
            writeManifestList({ snapshotId: id, parentSnapshotId: parent, sequenceNumber, manifests }),
          );
          expect(read).toEqual({
            snapshotId: id,
            parentSnapshotId: parent,
            sequenceNumber,
            formatVersion: 2,
            manifests,
          });
        },
      ),
      { numRuns: 150 },
    );
  });

  it('types a partitioned spec by its transforms, summarizes it, and reads the tuple back by name', () => {
    const spec: IcebergPartitionSpec = {
      'spec-id': 2,
      fields: [
        { 'source-id': 2, 'field-id': 1000, name: 'region', transform: 'identity' },
        { 'source-id': 3, 'field-id': 1001, name: 'at_day', transform: 'day' },
        { 'source-id': 1, 'field-id': 1002, name: 'id bucket', transform: 'bucket[16]' },
        { 'source-id': 4, 'field-id': 1003, name: 'price', transform: 'identity' },
        { 'source-id': 5, 'field-id': 1004, name: 'ratio', transform: 'identity' },
      ],
    };
    const file = (partition: IcebergDataFile['partition'], n: number): IcebergManifestEntry => ({
      status: EntryStatus.ADDED,
      data_file: {
        content: 0,
        file_path: `f${n}`,
        file_format: 'PARQUET',
        partition,
        record_count: n,
        file_size_in_bytes: 10,
      },
    });
    // A decimal(9, 2) partition value in its Avro form: a 4-byte two's complement fixed.
    const fixed4 = (v: bigint) => {
      const out = new Uint8Array(4);
      new DataView(out.buffer).setInt32(0, Number(v), false);
      return out;
    };
    const entries = [
      file({ region: 'eu', at_day: 19_000, 'id bucket': 3, price: fixed4(-150n), ratio: Number.NaN }, 1),
      file({ region: 'us', at_day: 18_000, 'id bucket': 15, price: fixed4(99n), ratio: 2.5 }, 2),
      file({ region: null, at_day: 18_500, 'id bucket': 0, price: null, ratio: -0 }, 3),
    ];
    const { bytes, summary } = writeManifest({ schema: SCHEMA, spec, entries });
    const partition = record(
      fieldsOf(fieldsOf(readAvroFile(bytes).schema).find((f) => f.name === 'data_file')!.type).find(
        (f) => f.name === 'partition',
      )!.type,
    );
    expect(partition.fields).toEqual([
      { name: 'region', type: ['null', 'string'], default: null, 'field-id': 1000 },
      {
        name: 'at_day',
        type: ['null', { type: 'int', logicalType: 'date' }],
        default: null,
        'field-id': 1001,
      },
      {
        name: 'id_x20bucket',
        type: ['null', 'int'],
        default: null,
        'field-id': 1002,
        'iceberg-field-name': 'id bucket',
      },
      {
        name: 'price',
        type: [
          'null',
          { type: 'fixed', name: 'decimal_9_2', size: 4, logicalType: 'decimal', precision: 9, scale: 2 },
        ],
        default: null,
        'field-id': 1003,
      },
      { name: 'ratio', type: ['null', 'double'], default: null, 'field-id': 1004 },
    ]);
    const read = readManifest(bytes);
    expect(read.spec).toEqual(spec);
    expect(read.entries.map((e) => e.data_file.partition)).toEqual(entries.map((e) => e.data_file.partition));

    const [region, day, bucket, price, ratio] = summary.partitions;
    expect(region).toMatchObject({ contains_null: true, contains_nan: false });
    expect(new TextDecoder().decode(region!.lower_bound)).toBe('eu');
    expect(new TextDecoder().decode(region!.upper_bound)).toBe('us');
    expect([
      deserializeValue({ kind: 'date' }, day!.lower_bound!),
      deserializeValue({ kind: 'date' }, day!.upper_bound!),
    ]).toEqual([18_000, 19_000]);
    expect(bucket).toMatchObject({ contains_null: false });
    expect(deserializeValue({ kind: 'int' }, bucket!.upper_bound!)).toBe(15);
    expect(price!.lower_bound).toEqual(twosComplementBE(-150n));
    expect(price!.upper_bound).toEqual(twosComplementBE(99n));
    expect(ratio).toMatchObject({ contains_null: false, contains_nan: true });
    expect(Object.is(deserializeValue({ kind: 'double' }, ratio!.lower_bound!), -0)).toBe(true);
    expect(deserializeValue({ kind: 'double' }, ratio!.upper_bound!)).toBe(2.5);

    // The list carries the summaries, and the partition bounds survive a round trip.
    const mf = manifestFileOf('m.avro', bytes.length, summary, { snapshotId: 9n, sequenceNumber: 1 });
    expect(
      readManifestList(
        writeManifestList({
          snapshotId: 9n,
          parentSnapshotId: undefined,
          sequenceNumber: 1,
          manifests: [mf],
        }),
      ).manifests,
    ).toEqual([mf]);
  });

  it('takes the smallest live data sequence number, the new one for inheriting entries', () => {
    const f = (n: number) => minimalFile(`f${n}`, n);
    const min = (entries: IcebergManifestEntry[]) =>
      manifestFileOf('m', 1, writeManifest({ schema: SCHEMA, spec: UNPARTITIONED, entries }).summary, {
        snapshotId: 1n,
        sequenceNumber: 5,
      }).min_sequence_number;
    expect(min([{ status: EntryStatus.ADDED, data_file: f(1) }])).toBe(5);
    expect(
      min([
        { status: EntryStatus.ADDED, data_file: f(1) },
        {
          status: EntryStatus.EXISTING,
          snapshot_id: 1n,
          sequence_number: 3,
          file_sequence_number: 3,
          data_file: f(2),
        },
      ]),
    ).toBe(3);
    expect(
      min([
        {
          status: EntryStatus.EXISTING,
          snapshot_id: 1n,
          sequence_number: 7,
          file_sequence_number: 7,
          data_file: f(2),
        },
      ]),
    ).toBe(7);
    // A deleted entry is not live: its number does not count.
    expect(
      min([
        {
          status: EntryStatus.DELETED,
          snapshot_id: 1n,
          sequence_number: 1,
          file_sequence_number: 1,
          data_file: f(2),
        },
        {
          status: EntryStatus.EXISTING,
          snapshot_id: 1n,
          sequence_number: 4,
          file_sequence_number: 4,
          data_file: f(3),
        },
      ]),
    ).toBe(4);
  });

  it('inherits snapshot id and sequence numbers from the manifest list, for added entries only', () => {
    const df = minimalFile('a');
    const { bytes, summary } = writeManifest({
      schema: SCHEMA,
      spec: UNPARTITIONED,
      entries: [
        { status: EntryStatus.ADDED, data_file: df },
        {
          status: EntryStatus.EXISTING,
          snapshot_id: 7n,
          sequence_number: 2,
          file_sequence_number: 1,
          data_file: { ...df, file_path: 'b' },
        },
        {
          status: EntryStatus.DELETED,
          snapshot_id: 8n,
          sequence_number: 3,
          file_sequence_number: 3,
          data_file: { ...df, file_path: 'c' },
        },
      ],
    });
    const manifest = manifestFileOf('m', bytes.length, summary, {
      snapshotId: 2n ** 63n - 1n,
      sequenceNumber: 9,
    });
    const live = liveEntries([{ manifest, bytes }]);
    expect(
      live.map((e) => [
        e.data_file.file_path,
        e.status,
        e.snapshot_id,
        e.sequence_number,
        e.file_sequence_number,
      ]),
    ).toEqual([
      ['a', 1, 2n ** 63n - 1n, 9, 9],
      ['b', 0, 7n, 2, 1],
    ]);
    expect(
      inheritFromManifest({ status: EntryStatus.ADDED, sequence_number: 4, data_file: df }, manifest),
    ).toMatchObject({ sequence_number: 4, file_sequence_number: 9 });
  });

  it('refuses what the spec forbids', () => {
    const df = minimalFile('a');
    const write = (entries: IcebergManifestEntry[], content?: 'data' | 'deletes') => () =>
      writeManifest({ schema: SCHEMA, spec: UNPARTITIONED, entries, content });
    expect(write([{ status: EntryStatus.EXISTING, data_file: df }])).toThrow(
      /must carry its sequence numbers/,
    );
    expect(write([{ status: EntryStatus.ADDED, data_file: { ...df, content: 1 } }])).toThrow(
      /data manifest cannot list a file of content 1/,
    );
    expect(write([{ status: EntryStatus.ADDED, data_file: df }], 'deletes')).toThrow(/deletes manifest/);
    expect(write([{ status: 5 as EntryStatus, data_file: df }])).toThrow(/status 5/);
    expect(write([{ status: EntryStatus.ADDED, data_file: { ...df, record_count: -1 } }])).toThrow(
      /record_count/,
    );
  });

  it("reads another writer's manifest by field id, whatever it names the fields", () => {
    // Field names changed, fields reordered, an unknown field added: the ids decide.
    const schema: AvroSchema = {
      type: 'record',
      name: 'entry',
      fields: [
        { name: 'extra', type: 'string', 'field-id': 9999 },
        {
          name: 'file',
          'field-id': 2,
          type: {
            type: 'record',
            name: 'df',
            fields: [
              { name: 'path', type: 'string', 'field-id': 100 },
              { name: 'rows', type: 'long', 'field-id': 103 },
              { name: 'fmt', type: 'string', 'field-id': 101 },
              { name: 'size', type: 'long', 'field-id': 104 },
              { name: 'part', type: { type: 'record', name: 'p', fields: [] }, 'field-id': 102 },
              {
                name: 'lb',
                type: {
                  type: 'array',
                  logicalType: 'map',
                  items: {
                    type: 'record',
                    name: 'kv',
                    fields: [
                      { name: 'k', type: 'int', 'field-id': 126 },
                      { name: 'v', type: 'bytes', 'field-id': 127 },
                    ],
                  },
                },
                'field-id': 125,
              },
            ],
          },
        },
        { name: 'st', type: 'int', 'field-id': 0 },
      ],
    };
    const bytes = writeAvroFile(
      schema,
      [
        {
          extra: 'x',
          file: {
            path: 's3://b/x.parquet',
            rows: 5n,
            fmt: 'parquet',
            size: 10n,
            part: {},
            lb: [{ k: 1, v: Uint8Array.of(7) }],
          },
          st: 1,
        },
      ],
      {
        metadata: {
          schema: JSON.stringify(SCHEMA),
          'partition-spec': '[]',
          'partition-spec-id': '0',
          'format-version': '2',
          content: 'data',
        },
      },
    );
    expect(readManifest(bytes).entries).toEqual([
      {
        status: 1,
        data_file: {
          content: 0,
          file_path: 's3://b/x.parquet',
          file_format: 'parquet',
          partition: {},
          record_count: 5,
          file_size_in_bytes: 10,
          lower_bounds: new Map([[1, Uint8Array.of(7)]]),
        },
      },
    ]);
  });
});
