/**
 * A v2 Iceberg table built by hand from tidemark's own pieces, for the tests that hand it to
 * readers we did not write (pyiceberg, Spark): Parquet data files from tidemark's encoders
 * (parquet-wasm through `encodeParquet`, the flat writer through `encodeFlat`) with
 * `PARQUET:field_id` on the Arrow fields, manifests and manifest lists from
 * shared/iceberg/manifest.ts, metrics from data-file.ts, and minimal metadata files written here
 * (one schema with the same ids, unpartitioned, snapshot ids past 2^53 as Java's and pyiceberg's
 * are). Three snapshots: two appends, each a manifest whose entries inherit snapshot id and
 * sequence numbers, the second carrying the first's manifest forward from the list it read back;
 * then a rewrite of both manifests into one of EXISTING entries.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Schema as ArrowSchema, Field, List, RecordBatch } from 'apache-arrow';
import { expect } from 'vitest';
import { encodeRows } from '../../shared/dataplane/encoder.js';
import { toLakeRecordWithIds } from '../../shared/dataplane/lake.js';
import { Op } from '../../shared/dataplane/metadata.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { type StagedAppend, stageAppend } from '../../shared/iceberg/append.js';
import type { TableIdent } from '../../shared/iceberg/catalog.js';
import { parquetDataFile } from '../../shared/iceberg/data-file.js';
import { FileCatalog } from '../../shared/iceberg/file-catalog.js';
import {
  EntryStatus,
  type IcebergManifestEntry,
  liveEntries,
  writeManifest,
} from '../../shared/iceberg/manifest.js';
import {
  type IcebergManifestFile,
  manifestFileOf,
  readManifestList,
  writeManifestList,
} from '../../shared/iceberg/manifest-list.js';
import { newTableMetadata } from '../../shared/iceberg/metadata.js';
import { icebergSchemaOf, lakeFieldIdsOf } from '../../shared/iceberg/schema.js';
import type { IcebergField, IcebergSchema } from '../../shared/iceberg/spec.js';
import type { TableFolder } from '../../shared/iceberg/table-folder.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { nativeCompressor } from '../../shared/sink/parquet-pages.cjs';
import { encodeFlat, encodeParquet } from '../../shared/sink/parquet-writer.js';
import { lakeRecord } from '../harness/lake-record.js';

// ---- the table: a lake schema, the same columns as an Iceberg schema, ids 1..n

type Row = Record<string, unknown>;

export const TABLE: Schema = {
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
export const FIELDS: IcebergField[] = [
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
export const ICEBERG: IcebergSchema = {
  type: 'struct',
  'schema-id': 0,
  'identifier-field-ids': [1],
  fields: FIELDS,
};
export const SPEC = { 'spec-id': 0, fields: [] } as const;

export const LONG_NAME = 'a name well past sixteen characters';

/** Rows of one data file: [id, qty, name, price, big, at (micros), day, ratio, ok, blob]. */
export const FILE_A: unknown[][] = [
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
export const FILE_B: unknown[][] = [
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

/**
 * The metrics readers decode from files A and B (`readable_metrics` of their `files` table:
 * bounds by column type, counts), for the columns whose values pyiceberg and Spark print alike;
 * timestamps differ in form (pyiceberg prints the offset), so each reader's test checks those.
 */
export const READABLE_METRICS: Readonly<Record<'a' | 'b', Readonly<Record<string, object>>>> = {
  a: {
    id: { lower_bound: 1, upper_bound: 3, value_count: 3, null_value_count: 0 },
    qty: { lower_bound: -2_147_483_648, upper_bound: 7, null_value_count: 1 },
    // Strings: truncated to 16 characters (an upper bound would get its last one incremented).
    name: { lower_bound: LONG_NAME.slice(0, 16), upper_bound: 'apple' },
    price: { lower_bound: '-3.25', upper_bound: '12.50' },
    big: { lower_bound: '-99999999999999999999999999999.000000001', upper_bound: '0.000000001' },
    day: { lower_bound: '1969-12-31', upper_bound: '2022-01-08' },
    ok: { lower_bound: false, upper_bound: true },
  },
  b: {
    qty: { lower_bound: 0, upper_bound: 2_147_483_647 },
    name: { lower_bound: 'pear', upper_bound: 'zebra' },
    price: { lower_bound: '0.00', upper_bound: '99999999.99' },
    day: { lower_bound: '1970-01-01', upper_bound: '9999-12-31' },
    ratio: { lower_bound: -1.5, upper_bound: 1e300 },
    blob: { lower_bound: '00', upper_bound: 'ff' },
  },
};

/** Checks a reader's `files` rows of A and B against READABLE_METRICS, column by column. */
export function expectReadableMetrics(files: { readonly a: Row; readonly b: Row }): void {
  for (const file of ['a', 'b'] as const) {
    const metrics = files[file].readable_metrics as Record<string, Row>;
    for (const [column, expected] of Object.entries(READABLE_METRICS[file]))
      expect(metrics[column], `file ${file}, column ${column}`).toMatchObject(expected);
  }
}

/** Rows written as FILE_A's are (small int64 values as numbers) as a lake record at `posPrefix`. */
export function fixtureRecord(
  schema: Schema,
  rows: readonly (readonly unknown[])[],
  posPrefix: string,
): RecordBatch {
  // int64 values are bigints on the wire; the rows above write small ones as numbers.
  const wire = (v: unknown, i: number) =>
    schema.columns[i]!.type.kind === 'int64' && typeof v === 'number' ? BigInt(v) : v;
  const objects = rows.map((r) => Object.fromEntries(r.map((v, i) => [schema.columns[i]!.name, wire(v, i)])));
  return lakeRecord(schema, objects, { posPrefix });
}

/** `record` with `PARQUET:field_id` on every field (and on a list's element: `elementIds`). */
export function withFieldIds(
  record: RecordBatch,
  elementIds: ReadonlyMap<string, number> = new Map(),
): RecordBatch {
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

export interface Snap {
  readonly id: bigint;
  readonly parent: bigint | undefined;
  readonly seq: number;
  readonly list: string;
  readonly operation: string;
}

export function metadataJson(
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

export const SNAP_1 = 2n ** 62n + 11n;
export const SNAP_2 = 2n ** 62n + 22n;
export const SNAP_3 = 2n ** 63n - 33n;

/** What `buildTable` wrote, for the tests to compare readers' answers with. */
export interface BuiltTable {
  readonly pathA: string;
  readonly pathB: string;
  readonly fileA: Uint8Array;
  readonly fileB: Uint8Array;
  /** Snapshot 1's manifest list entry, and the list as snapshot 2 read it back. */
  readonly mf1: IcebergManifestFile;
  readonly previous: readonly IcebergManifestFile[];
  /** The merged manifest of snapshot 3 and its list entry. */
  readonly m3: { readonly bytes: Uint8Array };
  readonly mf3: IcebergManifestFile;
  /** The metadata file of snapshot n (1..3). */
  readonly metadata: (n: number) => string;
}

/** Writes the table under `dir`/t: data/, metadata/ (v1..v3.metadata.json). */
export function buildTable(dir: string): BuiltTable {
  mkdirSync(join(dir, 't', 'data'), { recursive: true });
  mkdirSync(join(dir, 't', 'metadata'), { recursive: true });
  const meta = (name: string) => join(dir, 't', 'metadata', name);
  const uri = (path: string) => `file://${path}`;
  // Data file A by parquet-wasm (encodeParquet), B by tidemark's flat writer (gzip pages).
  const fileA = encodeParquet([withFieldIds(fixtureRecord(TABLE, FILE_A, 'i000000000001'))], {
    compression: 'snappy',
  });
  const fileB = encodeFlat(
    [withFieldIds(fixtureRecord(TABLE, FILE_B, 'i000000000002'))],
    {},
    nativeCompressor('gzip')!,
  );
  if (!fileB) throw new Error('the flat writer wrote no file for a flat schema');
  const pathA = join(dir, 't', 'data', 'a.parquet');
  const pathB = join(dir, 't', 'data', 'b.parquet');
  writeFileSync(pathA, fileA);
  writeFileSync(pathB, fileB);

  /**
   * Snapshot `n` (sequence number `n`): manifest m<n>.avro of `entries`, and list<n>.avro of it
   * and the `carried` manifests. Returns the manifest and its list entry.
   */
  const snapshot = (
    n: number,
    ids: { readonly snapshotId: bigint; readonly parentSnapshotId: bigint | undefined },
    entries: IcebergManifestEntry[],
    carried: readonly IcebergManifestFile[] = [],
  ) => {
    const m = writeManifest({ schema: ICEBERG, spec: SPEC, entries });
    writeFileSync(meta(`m${n}.avro`), m.bytes);
    const mf = manifestFileOf(uri(meta(`m${n}.avro`)), m.bytes.length, m.summary, {
      snapshotId: ids.snapshotId,
      sequenceNumber: n,
    });
    writeFileSync(
      meta(`list${n}.avro`),
      writeManifestList({ ...ids, sequenceNumber: n, manifests: [mf, ...carried] }),
    );
    return { m, mf };
  };
  const readList = (n: number) => readManifestList(new Uint8Array(readFileSync(meta(`list${n}.avro`))));

  // Snapshot 1: append A. The manifest is written before the commit: no snapshot id, no sequence numbers.
  const { mf: mf1 } = snapshot(1, { snapshotId: SNAP_1, parentSnapshotId: undefined }, [
    { status: EntryStatus.ADDED, data_file: parquetDataFile(uri(pathA), fileA, ICEBERG) },
  ]);

  // Snapshot 2: append B; the list carries snapshot 1's manifest forward as read back.
  const previous = readList(1);
  snapshot(
    2,
    { snapshotId: SNAP_2, parentSnapshotId: SNAP_1 },
    [{ status: EntryStatus.ADDED, data_file: parquetDataFile(uri(pathB), fileB, ICEBERG) }],
    previous.manifests,
  );

  // Snapshot 3: both manifests merged into one of EXISTING entries, sequence numbers kept.
  const live = liveEntries(
    readList(2).manifests.map((m) => ({
      manifest: m,
      bytes: new Uint8Array(readFileSync(m.manifest_path.slice('file://'.length))),
    })),
  );
  const { m: m3, mf: mf3 } = snapshot(
    3,
    { snapshotId: SNAP_3, parentSnapshotId: SNAP_2 },
    live.map((e) => ({ ...e, status: EntryStatus.EXISTING })),
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

  return {
    pathA,
    pathB,
    fileA,
    fileB,
    mf1,
    previous: previous.manifests,
    m3,
    mf3,
    metadata: (n) => meta(`v${n}.metadata.json`),
  };
}

/**
 * The sink's path for rows of TABLE (ids as numbers): the wire record, the lake cast with the
 * table's field ids, one Parquet data file under the table's `data/`, and its commit staged
 * (shared/iceberg/append.ts `stageAppend`) under `commitId`.
 */
export async function stageRows(
  folder: TableFolder,
  schema: IcebergSchema,
  commit: { readonly writerId: string; readonly commitId: string },
  rows: readonly (readonly unknown[])[],
  posPrefix: string,
): Promise<StagedAppend> {
  const objects = rows.map((r) =>
    Object.fromEntries(r.map((v, i) => [TABLE.columns[i]!.name, i === 0 ? BigInt(v as number) : v])),
  );
  const wire = encodeRows(TABLE, objects, {
    posPrefix,
    ordinalBase: 0,
    op: Op.update,
    phase: 'incremental',
    ingestTsNanos: 1_700_000_000_000_000_000n,
    snapshot: false,
  });
  const bytes = encodeParquet([toLakeRecordWithIds(wire, lakeFieldIdsOf(schema))], { compression: 'zstd' });
  const key = `${folder.key}/data/${commit.commitId}.parquet`;
  await folder.store.put(key, bytes);
  return stageAppend(folder, {
    commit,
    schema,
    spec: { 'spec-id': 0, fields: [] },
    dataFiles: [parquetDataFile(folder.store.uri(key), bytes, schema)],
  });
}

// ---- an empty table of TABLE in a `file` catalog, for the commit tests

/** A new table of `TABLE` (ids from `icebergSchemaOf`) in a `file` catalog under a fresh temp folder. */
export interface FileCatalogTable {
  readonly dir: string;
  readonly store: FileObjectStore;
  readonly catalog: FileCatalog;
  readonly folder: TableFolder;
  readonly schema: IcebergSchema;
}

/** `public.orders` at `lake/public.orders`, as the commit tests name it. */
export const ORDERS_IDENT: TableIdent = { namespace: 'public', name: 'orders' };
export const ORDERS_KEY = 'lake/public.orders';

/**
 * Creates `ORDERS_IDENT` (unpartitioned, `properties`) in a `file` catalog on a fresh folder
 * named `tidemark-<prefix>-*`; asserts it was created.
 */
export async function newFileCatalogTable(
  prefix: string,
  options: {
    readonly properties?: Readonly<Record<string, string>>;
    readonly nowMs?: number;
    readonly conditionalWrites?: 'verify' | 'trusted';
  } = {},
): Promise<FileCatalogTable> {
  const dir = await mkdtemp(join(tmpdir(), `tidemark-${prefix}-`));
  const store = new FileObjectStore(dir);
  const catalog = new FileCatalog({
    store,
    tableKey: () => ORDERS_KEY,
    ...(options.conditionalWrites ? { conditionalWrites: options.conditionalWrites } : {}),
  });
  const of = icebergSchemaOf(TABLE);
  const created = await catalog.createTable(
    ORDERS_IDENT,
    newTableMetadata({
      location: catalog.location(ORDERS_IDENT),
      schema: of.schema,
      lastColumnId: of.lastColumnId,
      properties: { ...options.properties },
      uuid: randomUUID(),
      nowMs: options.nowMs ?? Date.now(),
    }),
  );
  expect(created.status).toBe('created');
  return { dir, store, catalog, folder: { store, key: ORDERS_KEY }, schema: of.schema };
}
