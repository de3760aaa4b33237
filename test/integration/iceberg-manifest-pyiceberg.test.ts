/**
 * The decisive check of tidemark's Iceberg manifests (shared/iceberg/manifest.ts, avro.ts,
 * data-file.ts): a reader we did not write, pyiceberg 0.12 (.venv-readers, docs/test-readers.md),
 * reads a v2 table built by hand in a temp dir from tidemark's own pieces. Parquet data files from
 * tidemark's encoders (parquet-wasm through `encodeParquet`, and the flat writer through
 * `encodeFlat`) with `PARQUET:field_id` on the Arrow fields; manifests and manifest lists from
 * our modules; a minimal metadata.json written here (one schema with the same ids, unpartitioned,
 * snapshots whose ids are past 2^53 as Java's and pyiceberg's are). Three snapshots: two appends,
 * each a manifest whose entries inherit snapshot id and sequence numbers, the second carrying the
 * first's manifest forward from the list it read back; then a rewrite of both manifests into one
 * of EXISTING entries. pyiceberg must read the rows, the record counts, the inherited sequence
 * numbers and the metrics (value, null counts, bounds decoded into int, long, string, decimal,
 * timestamp values), and nothing for a list column but its sizes.
 *
 * Skips, saying so, where .venv-readers is not installed (scripts/install-test-readers.sh).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Schema as ArrowSchema, Field, List, RecordBatch } from 'apache-arrow';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeRows } from '../../shared/dataplane/encoder.js';
import { toLakeRecord } from '../../shared/dataplane/lake.js';
import { Op } from '../../shared/dataplane/metadata.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { parquetDataFile } from '../../shared/iceberg/data-file.js';
import {
  EntryStatus,
  type IcebergManifestFile,
  inheritFromManifest,
  liveEntries,
  manifestFileOf,
  readManifest,
  readManifestList,
  writeManifest,
  writeManifestList,
} from '../../shared/iceberg/manifest.js';
import type { IcebergField, IcebergSchema } from '../../shared/iceberg/spec.js';
import { nativeCompressor } from '../../shared/sink/parquet-pages.cjs';
import { encodeFlat, encodeParquet } from '../../shared/sink/parquet-writer.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const PYTHON = join(ROOT, '.venv-readers', 'bin', 'python');
const HAVE_READERS = existsSync(PYTHON);
const run = promisify(execFile);

// ---- the table: a lake schema, the same columns as an Iceberg schema, ids 1..n

const TABLE: Schema = {
  columns: [
    { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
    { name: 'qty', type: { kind: 'int32' }, nullable: true, sourceType: 'integer' },
    { name: 'name', type: { kind: 'text' }, nullable: true, sourceType: 'text' },
    {
      name: 'price',
      type: { kind: 'decimal', precision: 10, scale: 2 },
      nullable: true,
      sourceType: 'numeric(10,2)',
    },
    {
      name: 'big',
      type: { kind: 'decimal', precision: 38, scale: 9 },
      nullable: true,
      sourceType: 'numeric(38,9)',
    },
    { name: 'at', type: { kind: 'timestamp', utc: true }, nullable: true, sourceType: 'timestamptz' },
    { name: 'day', type: { kind: 'date' }, nullable: true, sourceType: 'date' },
    { name: 'ratio', type: { kind: 'float64' }, nullable: true, sourceType: 'double precision' },
    { name: 'ok', type: { kind: 'bool' }, nullable: true, sourceType: 'boolean' },
    { name: 'blob', type: { kind: 'binary' }, nullable: true, sourceType: 'bytea' },
  ],
  primaryKey: ['id'],
};

/** The Iceberg fields of the lake columns and the metadata tail, ids in lake field order from 1. */
const FIELDS: IcebergField[] = [
  { id: 1, name: 'id', required: true, type: 'long' },
  { id: 2, name: 'qty', required: false, type: 'int' },
  { id: 3, name: 'name', required: false, type: 'string' },
  { id: 4, name: 'price', required: false, type: 'decimal(10, 2)' },
  { id: 5, name: 'big', required: false, type: 'decimal(38, 9)' },
  { id: 6, name: 'at', required: false, type: 'timestamptz' },
  { id: 7, name: 'day', required: false, type: 'date' },
  { id: 8, name: 'ratio', required: false, type: 'double' },
  { id: 9, name: 'ok', required: false, type: 'boolean' },
  { id: 10, name: 'blob', required: false, type: 'binary' },
  { id: 11, name: '__op', required: true, type: 'string' },
  { id: 12, name: '__pos', required: true, type: 'string' },
  { id: 13, name: '__commit_ts', required: false, type: 'timestamptz' },
  { id: 14, name: '__ingest_ts', required: true, type: 'timestamptz' },
  { id: 15, name: '__snapshot', required: true, type: 'boolean' },
  { id: 16, name: '__phase', required: true, type: 'string' },
];
const ICEBERG: IcebergSchema = {
  type: 'struct',
  'schema-id': 0,
  'identifier-field-ids': [1],
  fields: FIELDS,
};
const SPEC = { 'spec-id': 0, fields: [] } as const;

const LONG_NAME = 'a name well past sixteen characters';

/** Rows of one data file: [id, qty, name, price, big, at (micros), day, ratio, ok, blob]. */
const FILE_A: unknown[][] = [
  [
    1,
    7,
    'apple',
    '12.50',
    '-99999999999999999999999999999.000000001',
    1_700_000_000_000_001n,
    19_000,
    0.5,
    true,
    Uint8Array.of(1, 2),
  ],
  [2, null, LONG_NAME, '-3.25', '0.000000001', -1n, -1, -0, false, null],
  [3, -2_147_483_648, null, null, null, null, null, null, null, new Uint8Array(0)],
];
const FILE_B: unknown[][] = [
  [
    4,
    2_147_483_647,
    'pear',
    '99999999.99',
    '12345678901234567890123456789.123456789',
    253_402_300_799_999_999n,
    2_932_896,
    1e300,
    true,
    Uint8Array.of(255),
  ],
  [5, 0, 'zebra', '0.00', '1.000000000', 0n, 0, -1.5, null, Uint8Array.of(0)],
];

function lakeRecord(schema: Schema, rows: readonly (readonly unknown[])[], posPrefix: string): RecordBatch {
  // int64 values are bigints on the wire; the rows above write small ones as numbers.
  const wire = (v: unknown, i: number) =>
    schema.columns[i]!.type.kind === 'int64' && typeof v === 'number' ? BigInt(v) : v;
  const objects = rows.map((r) => Object.fromEntries(r.map((v, i) => [schema.columns[i]!.name, wire(v, i)])));
  return toLakeRecord(
    encodeRows(schema, objects, {
      posPrefix,
      ordinalBase: 0,
      op: Op.update,
      phase: 'incremental',
      ingestTsNanos: 1_700_000_000_000_000_000n,
      snapshot: false,
    }),
  );
}

/** `record` with `PARQUET:field_id` on every field (and on a list's element: `elementIds`). */
function withFieldIds(record: RecordBatch, elementIds: ReadonlyMap<string, number> = new Map()): RecordBatch {
  const fields = record.schema.fields.map((f, i) => {
    let type = f.type;
    const elementId = elementIds.get(f.name);
    if (elementId !== undefined && f.type instanceof List) {
      const child = f.type.children[0]!;
      type = new List(
        new Field(child.name, child.type, child.nullable, new Map([['PARQUET:field_id', String(elementId)]])),
      );
    }
    return new Field(f.name, type, f.nullable, new Map([['PARQUET:field_id', String(i + 1)]]));
  });
  return new RecordBatch(new ArrowSchema(fields, record.schema.metadata), record.data);
}

// ---- the metadata file, with snapshot ids no double holds exactly

interface Snap {
  readonly id: bigint;
  readonly parent: bigint | undefined;
  readonly seq: number;
  readonly list: string;
  readonly operation: string;
}

function metadataJson(
  location: string,
  schema: IcebergSchema,
  lastColumnId: number,
  snaps: readonly Snap[],
): string {
  const current = snaps.at(-1)!;
  // Long ids go in as JSON number text: JSON.stringify has no bigint, pyiceberg reads any integer.
  const snapshots = snaps.map(
    (s) =>
      `{"snapshot-id":${s.id},${s.parent === undefined ? '' : `"parent-snapshot-id":${s.parent},`}"sequence-number":${s.seq},"timestamp-ms":${1_700_000_000_000 + s.seq},"manifest-list":${JSON.stringify(s.list)},"summary":{"operation":"${s.operation}"},"schema-id":0}`,
  );
  return `{
  "format-version": 2,
  "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
  "location": ${JSON.stringify(location)},
  "last-sequence-number": ${current.seq},
  "last-updated-ms": ${1_700_000_000_000 + current.seq},
  "last-column-id": ${lastColumnId},
  "schemas": [${JSON.stringify(schema)}],
  "current-schema-id": 0,
  "partition-specs": [{"spec-id": 0, "fields": []}],
  "default-spec-id": 0,
  "last-partition-id": 999,
  "properties": {},
  "current-snapshot-id": ${current.id},
  "snapshots": [${snapshots.join(',')}],
  "snapshot-log": [${snaps.map((s) => `{"snapshot-id":${s.id},"timestamp-ms":${1_700_000_000_000 + s.seq}}`).join(',')}],
  "metadata-log": [],
  "sort-orders": [{"order-id": 0, "fields": []}],
  "default-sort-order-id": 0,
  "refs": {"main": {"snapshot-id": ${current.id}, "type": "branch"}}
}`;
}

async function py(script: string, metadataPath: string): Promise<Record<string, unknown>> {
  try {
    const { stdout } = await run(
      PYTHON,
      [join('test/readers', script), '--catalog', 'static', '--metadata', `file://${metadataPath}`],
      { cwd: ROOT, maxBuffer: 64 * 2 ** 20 },
    );
    return JSON.parse(stdout) as Record<string, unknown>;
  } catch (e) {
    const stderr = (e as { stderr?: string }).stderr ?? '';
    throw new Error(`pyiceberg (${script}) failed: ${stderr || String(e)}`);
  }
}

type Row = Record<string, unknown>;
/** A map column of inspect.* as an object by field id. */
const byId = (pairs: unknown): Record<number, unknown> =>
  Object.fromEntries((pairs as [number, unknown][]).map(([k, v]) => [k, v]));

const SNAP_1 = 2n ** 62n + 11n;
const SNAP_2 = 2n ** 62n + 22n;
const SNAP_3 = 2n ** 63n - 33n;

describe.skipIf(!HAVE_READERS)(
  `pyiceberg reads tidemark's manifests${HAVE_READERS ? '' : ' (SKIPPED: .venv-readers is not installed; run bash scripts/install-test-readers.sh)'}`,
  () => {
    let dir: string;
    const meta = (name: string) => join(dir, 't', 'metadata', name);
    const uri = (path: string) => `file://${path}`;

    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'tidemark-iceberg-'));
      mkdirSync(join(dir, 't', 'data'), { recursive: true });
      mkdirSync(join(dir, 't', 'metadata'), { recursive: true });
    });
    afterAll(() => {
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('reads two appends and a manifest rewrite: rows, counts, inherited sequence numbers, metrics', async () => {
      // Data file A by parquet-wasm (encodeParquet), B by tidemark's flat writer (gzip pages).
      const fileA = encodeParquet([withFieldIds(lakeRecord(TABLE, FILE_A, 'i000000000001'))], {
        compression: 'snappy',
      });
      const fileB = encodeFlat(
        [withFieldIds(lakeRecord(TABLE, FILE_B, 'i000000000002'))],
        {},
        nativeCompressor('gzip')!,
      );
      expect(fileB, 'the flat writer wrote no file for a flat schema').toBeInstanceOf(Uint8Array);
      const pathA = join(dir, 't', 'data', 'a.parquet');
      const pathB = join(dir, 't', 'data', 'b.parquet');
      writeFileSync(pathA, fileA);
      writeFileSync(pathB, fileB!);

      // Snapshot 1: append A. The manifest is written before the commit: no snapshot id, no sequence numbers.
      const m1 = writeManifest({
        schema: ICEBERG,
        spec: SPEC,
        entries: [{ status: EntryStatus.ADDED, data_file: parquetDataFile(uri(pathA), fileA, ICEBERG) }],
      });
      writeFileSync(meta('m1.avro'), m1.bytes);
      const mf1 = manifestFileOf(uri(meta('m1.avro')), m1.bytes.length, m1.summary, {
        snapshotId: SNAP_1,
        sequenceNumber: 1,
      });
      writeFileSync(
        meta('list1.avro'),
        writeManifestList({
          snapshotId: SNAP_1,
          parentSnapshotId: undefined,
          sequenceNumber: 1,
          manifests: [mf1],
        }),
      );

      // Snapshot 2: append B; the list carries snapshot 1's manifest forward as read back.
      const m2 = writeManifest({
        schema: ICEBERG,
        spec: SPEC,
        entries: [{ status: EntryStatus.ADDED, data_file: parquetDataFile(uri(pathB), fileB!, ICEBERG) }],
      });
      writeFileSync(meta('m2.avro'), m2.bytes);
      const previous = readManifestList(new Uint8Array(readFileSync(meta('list1.avro'))));
      expect(previous.manifests).toEqual([mf1]);
      const mf2 = manifestFileOf(uri(meta('m2.avro')), m2.bytes.length, m2.summary, {
        snapshotId: SNAP_2,
        sequenceNumber: 2,
      });
      writeFileSync(
        meta('list2.avro'),
        writeManifestList({
          snapshotId: SNAP_2,
          parentSnapshotId: SNAP_1,
          sequenceNumber: 2,
          manifests: [mf2, ...previous.manifests],
        }),
      );

      // Snapshot 3: both manifests merged into one of EXISTING entries, sequence numbers kept.
      const live = liveEntries(
        readManifestList(new Uint8Array(readFileSync(meta('list2.avro')))).manifests.map((m) => ({
          manifest: m,
          bytes: new Uint8Array(readFileSync(m.manifest_path.slice('file://'.length))),
        })),
      );
      const m3 = writeManifest({
        schema: ICEBERG,
        spec: SPEC,
        entries: live.map((e) => ({ ...e, status: EntryStatus.EXISTING })),
      });
      writeFileSync(meta('m3.avro'), m3.bytes);
      const mf3 = manifestFileOf(uri(meta('m3.avro')), m3.bytes.length, m3.summary, {
        snapshotId: SNAP_3,
        sequenceNumber: 3,
      });
      expect(mf3).toMatchObject({ existing_files_count: 2, existing_rows_count: 5, min_sequence_number: 1 });
      writeFileSync(
        meta('list3.avro'),
        writeManifestList({
          snapshotId: SNAP_3,
          parentSnapshotId: SNAP_2,
          sequenceNumber: 3,
          manifests: [mf3],
        }),
      );

      const snaps: Snap[] = [
        { id: SNAP_1, parent: undefined, seq: 1, list: uri(meta('list1.avro')), operation: 'append' },
        { id: SNAP_2, parent: SNAP_1, seq: 2, list: uri(meta('list2.avro')), operation: 'append' },
        { id: SNAP_3, parent: SNAP_2, seq: 3, list: uri(meta('list3.avro')), operation: 'replace' },
      ];
      for (let n = 1; n <= 3; n++) {
        writeFileSync(
          meta(`v${n}.metadata.json`),
          metadataJson(uri(join(dir, 't')), ICEBERG, 16, snaps.slice(0, n)),
        );
      }

      // The rows, at each snapshot.
      for (const [n, ids] of [
        [1, [1, 2, 3]],
        [2, [1, 2, 3, 4, 5]],
        [3, [1, 2, 3, 4, 5]],
      ] as const) {
        const read = await py('read_table.py', meta(`v${n}.metadata.json`));
        expect((read.rows as Row[]).map((r) => r.id).sort()).toEqual(ids);
      }
      const table = await py('read_table.py', meta('v3.metadata.json'));
      const rows = new Map((table.rows as Row[]).map((r) => [r.id, r]));
      expect(rows.get(1)).toMatchObject({
        qty: 7,
        name: 'apple',
        price: '12.50',
        big: '-99999999999999999999999999999.000000001',
        at: '2023-11-14T22:13:20.000001+00:00',
        day: '2022-01-08',
        ratio: 0.5,
        ok: true,
        blob: '0102',
        __op: 'u',
      });
      expect(rows.get(3)).toMatchObject({ qty: -2_147_483_648, name: null, price: null, at: null, blob: '' });
      expect(rows.get(4)).toMatchObject({ price: '99999999.99', at: '9999-12-31T23:59:59.999999+00:00' });

      // The metadata tree as pyiceberg reads it.
      const tree = await py('iceberg_metadata.py', meta('v3.metadata.json'));
      expect(tree.snapshot_id).toBe(String(SNAP_3));
      expect(tree.manifests).toEqual([
        expect.objectContaining({
          manifest_path: uri(meta('m3.avro')),
          manifest_length: m3.bytes.length,
          content: 0,
          sequence_number: 3,
          min_sequence_number: 1,
          added_snapshot_id: String(SNAP_3),
          added_files_count: 0,
          existing_files_count: 2,
          deleted_files_count: 0,
          existing_rows_count: 5,
          partitions: [],
        }),
      ]);
      const entries = tree.entries as Row[];
      expect(
        entries.map((e) => [
          e.status,
          e.snapshot_id,
          e.sequence_number,
          e.file_sequence_number,
          (e.data_file as Row).file_path,
        ]),
      ).toEqual(
        expect.arrayContaining([
          [0, String(SNAP_1), 1, 1, uri(pathA)],
          [0, String(SNAP_2), 2, 2, uri(pathB)],
        ]),
      );
      expect(entries).toHaveLength(2);

      const files = new Map((tree.files as Row[]).map((f) => [f.file_path, f]));
      const a = files.get(uri(pathA))!;
      const b = files.get(uri(pathB))!;
      expect(a).toMatchObject({
        content: 0,
        file_format: 'PARQUET',
        record_count: 3,
        file_size_in_bytes: fileA.length,
      });
      expect(b).toMatchObject({ record_count: 2, file_size_in_bytes: fileB!.length });
      for (const f of [a, b]) {
        expect(
          Object.keys(byId(f.column_sizes))
            .map(Number)
            .sort((x, y) => x - y),
        ).toEqual(FIELDS.map((x) => x.id));
        expect((f.split_offsets as number[]).length).toBeGreaterThan(0);
      }
      expect(byId(a.value_counts)).toMatchObject({ 1: 3, 2: 3, 3: 3, 6: 3, 12: 3 });
      expect(byId(a.null_value_counts)).toMatchObject({ 1: 0, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 10: 1, 12: 0 });
      expect(byId(b.null_value_counts)).toMatchObject({ 2: 0, 3: 0, 9: 1, 10: 0 });

      // Bounds, decoded by pyiceberg into the columns' types.
      const metrics = (f: Row, column: string) => (f.readable_metrics as Record<string, Row>)[column]!;
      expect(metrics(a, 'id')).toMatchObject({
        lower_bound: 1,
        upper_bound: 3,
        value_count: 3,
        null_value_count: 0,
      });
      expect(metrics(a, 'qty')).toMatchObject({ lower_bound: -2_147_483_648, upper_bound: 7 });
      expect(metrics(b, 'qty')).toMatchObject({ lower_bound: 0, upper_bound: 2_147_483_647 });
      // Strings: truncated to 16 characters, the upper bound's last one incremented.
      expect(metrics(a, 'name')).toMatchObject({ lower_bound: LONG_NAME.slice(0, 16), upper_bound: 'apple' });
      expect(metrics(b, 'name')).toMatchObject({ lower_bound: 'pear', upper_bound: 'zebra' });
      expect(metrics(a, 'price')).toMatchObject({ lower_bound: '-3.25', upper_bound: '12.50' });
      expect(metrics(b, 'price')).toMatchObject({ lower_bound: '0.00', upper_bound: '99999999.99' });
      expect(metrics(a, 'big')).toMatchObject({
        lower_bound: '-99999999999999999999999999999.000000001',
        upper_bound: '0.000000001',
      });
      expect(metrics(a, 'at')).toMatchObject({
        lower_bound: '1969-12-31T23:59:59.999999+00:00',
        upper_bound: '2023-11-14T22:13:20.000001+00:00',
      });
      expect(metrics(b, 'at')).toMatchObject({
        lower_bound: '1970-01-01T00:00:00.000000+00:00',
        upper_bound: '9999-12-31T23:59:59.999999+00:00',
      });
      expect(metrics(a, 'day')).toMatchObject({ lower_bound: '1969-12-31', upper_bound: '2022-01-08' });
      expect(metrics(b, 'ratio')).toMatchObject({ lower_bound: -1.5, upper_bound: 1e300 });
      expect(metrics(a, 'ok')).toMatchObject({ lower_bound: false, upper_bound: true });
      expect(metrics(b, 'blob')).toMatchObject({ lower_bound: '00', upper_bound: 'ff' });
      expect(metrics(a, '__pos').lower_bound).toMatch(/^i000000000001/);

      // What we read back of our own manifest equals what pyiceberg read.
      const ours = readManifest(m3.bytes).entries.map((e) => inheritFromManifest(e, mf3));
      expect(ours.map((e) => [e.snapshot_id, e.sequence_number])).toEqual([
        [SNAP_2, 2],
        [SNAP_1, 1],
      ]);
    });

    it('reads a table with a list column: rows, and no bounds or counts for its element', async () => {
      const schema: Schema = {
        columns: [
          { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
          {
            name: 'tags',
            type: { kind: 'list', element: { kind: 'text' } },
            nullable: true,
            sourceType: 'text[]',
          },
        ],
        primaryKey: ['id'],
      };
      const fields: IcebergField[] = [
        { id: 1, name: 'id', required: true, type: 'long' },
        {
          id: 2,
          name: 'tags',
          required: false,
          type: { type: 'list', 'element-id': 17, element: 'string', 'element-required': false },
        },
        ...FIELDS.slice(10).map((f, i) => ({ ...f, id: 3 + i })),
      ];
      const iceberg: IcebergSchema = { type: 'struct', 'schema-id': 0, fields };
      const rows = [
        [1, ['b', null, 'a']],
        [2, null],
        [3, []],
      ];
      const file = encodeParquet(
        [withFieldIds(lakeRecord(schema, rows, 'i000000000003'), new Map([['tags', 17]]))],
        {
          compression: 'snappy',
        },
      );
      const base = join(dir, 'lists');
      mkdirSync(join(base, 'metadata'), { recursive: true });
      const path = join(base, 'data.parquet');
      writeFileSync(path, file);
      const dataFile = parquetDataFile(uri(path), file, iceberg);
      expect(dataFile.column_sizes?.has(17)).toBe(true);
      expect(dataFile.value_counts?.has(17)).toBe(false);
      expect(dataFile.lower_bounds?.has(17)).toBe(false);
      const m = writeManifest({
        schema: iceberg,
        spec: SPEC,
        entries: [{ status: EntryStatus.ADDED, data_file: dataFile }],
      });
      writeFileSync(join(base, 'metadata', 'm.avro'), m.bytes);
      const snapshot = 2n ** 60n + 5n;
      const mf: IcebergManifestFile = manifestFileOf(
        uri(join(base, 'metadata', 'm.avro')),
        m.bytes.length,
        m.summary,
        {
          snapshotId: snapshot,
          sequenceNumber: 1,
        },
      );
      writeFileSync(
        join(base, 'metadata', 'list.avro'),
        writeManifestList({
          snapshotId: snapshot,
          parentSnapshotId: undefined,
          sequenceNumber: 1,
          manifests: [mf],
        }),
      );
      const metaPath = join(base, 'metadata', 'v1.metadata.json');
      writeFileSync(
        metaPath,
        metadataJson(uri(base), iceberg, 17, [
          {
            id: snapshot,
            parent: undefined,
            seq: 1,
            list: uri(join(base, 'metadata', 'list.avro')),
            operation: 'append',
          },
        ]),
      );
      const read = await py('read_table.py', metaPath);
      const byRow = new Map((read.rows as Row[]).map((r) => [r.id, r.tags]));
      expect(byRow).toEqual(
        new Map<unknown, unknown>([
          [1, ['b', null, 'a']],
          [2, null],
          [3, []],
        ]),
      );
      const tree = await py('iceberg_metadata.py', metaPath);
      const f = (tree.files as Row[])[0]!;
      expect(f.record_count).toBe(3);
      expect(byId(f.lower_bounds)[1]).toBe('0100000000000000');
      expect(byId(f.lower_bounds)[17]).toBeUndefined();
      expect(byId(f.value_counts)[17]).toBeUndefined();
    });
  },
);
