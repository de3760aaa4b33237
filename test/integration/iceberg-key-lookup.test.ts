/**
 * shared/iceberg/key-lookup.ts against pyiceberg: a table of several data files (tidemark's own
 * Parquet and manifests, committed through stageAppend/applyAppend and the `file` catalog) with
 * keys repeated across and within files (a change log); for random key sets the lookup returns
 * exactly the (file, position) of the live rows pyiceberg and pyarrow find for those keys
 * (test/readers/key_rows.py), for a long, a string, a decimal and a composite key; then a position
 * delete file (written here, minimal) excludes the rows it lists; and files whose key bounds
 * exclude every wanted key are not read (reads counted through a wrapped ObjectStore).
 */
import { createHash, randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { Field, Int64, makeData, RecordBatch, Schema, Struct, Utf8, vectorFromArray } from 'apache-arrow';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeRows } from '../../shared/dataplane/encoder.js';
import { toLakeRecordWithIds } from '../../shared/dataplane/lake.js';
import { Op } from '../../shared/dataplane/metadata.js';
import { applyAppend, parentManifests, stageAppend } from '../../shared/iceberg/append.js';
import type { TableIdent } from '../../shared/iceberg/catalog.js';
import { parquetDataFile } from '../../shared/iceberg/data-file.js';
import { FileCatalog } from '../../shared/iceberg/file-catalog.js';
import {
  type KeyValue,
  keyText,
  keyValueOf,
  lookupKeys,
  POSITION_DELETE_FILE_PATH_ID,
  POSITION_DELETE_POS_ID,
  type RowLocation,
} from '../../shared/iceberg/key-lookup.js';
import { EntryStatus, FileContent, writeManifest } from '../../shared/iceberg/manifest.js';
import { manifestFileOf, writeManifestList } from '../../shared/iceberg/manifest-list.js';
import {
  appendSnapshot,
  currentSnapshot,
  newSnapshotId,
  newTableMetadata,
} from '../../shared/iceberg/metadata.js';
import { icebergSchemaOf, lakeFieldIdsOf } from '../../shared/iceberg/schema.js';
import { primitiveOf } from '../../shared/iceberg/single-value.js';
import type { IcebergSchema } from '../../shared/iceberg/spec.js';
import type { TableFolder } from '../../shared/iceberg/table-folder.js';
import type { FileObjectStore } from '../../shared/sink/file-object-store.js';
import type { ObjectStore } from '../../shared/sink/object-store.js';
import { encodeParquet } from '../../shared/sink/parquet-writer.js';
import { S3ObjectStore } from '../../shared/sink/s3-object-store.js';
import { s3Client } from '../harness/aws.js';
import { readersMissing, runReaderScript } from '../harness/readers.js';
import { testServers } from '../harness/servers.js';
import { newFileCatalogTable, ORDERS_IDENT, ORDERS_KEY, stageRows, TABLE } from './iceberg-table-fixture.js';

const noPython = readersMissing === undefined ? undefined : `(pyiceberg SKIPPED: ${readersMissing})`;

const utf8 = new TextEncoder();
const IDENT: TableIdent = ORDERS_IDENT;
const TABLE_KEY = ORDERS_KEY;

let dir: string;
let store: FileObjectStore;
let catalog: FileCatalog;
let folder: TableFolder;
let schema: IcebergSchema;

/** A row of TABLE with key `id`; name and price derived from it (so every key column has repeats and bounds). */
function row(id: number, version: number): unknown[] {
  const cents = ((((id * 37) % 1000) + 1000) % 1000) - 300;
  const abs = Math.abs(cents);
  return [
    id,
    version,
    `n${String(id % 13).padStart(2, '0')}`,
    `${cents < 0 ? '-' : ''}${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, '0')}`,
    null,
    null,
    null,
    null,
    null,
    null,
  ];
}

/**
 * The data files: ids in ranges that barely overlap, a key repeated within a file and across
 * files (versions of one key in a change log).
 */
const FILES: number[][] = [
  [1, 2, 3, 4, 5, 5],
  [10, 11, 12, 13],
  [20, 21, 22, 22, 22],
  [1, 3, 4],
  [40, 41, 42],
  [50, 51, 40, 52, 53],
];
const ALL_IDS = [...new Set(FILES.flat())];

beforeAll(async () => {
  ({ dir, store, catalog, folder, schema } = await newFileCatalogTable('key-lookup'));
  for (const [f, ids] of FILES.entries()) {
    const n = String(f + 1).padStart(10, '0');
    const staged = await stageRows(
      folder,
      schema,
      { writerId: 'shop.app', commitId: `i${n}-a1` },
      ids.map((id, i) => row(id, i)),
      `i${n}`,
    );
    expect((await applyAppend(catalog, IDENT, folder, staged, { nowMs: Date.now })).status).toBe('committed');
  }
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const load = async () => (await catalog.loadTable(IDENT))!;

/** The columns' Iceberg types, for canonical key texts. */
const typesOf = (columns: readonly string[]) =>
  columns.map((c) => primitiveOf(schema.fields.find((f) => f.name === c)!.type)!);

/** pyiceberg's live rows (file, pos, key values) of the current snapshot. */
async function pyRows(columns: readonly string[]) {
  const answer = await runReaderScript<{ rows: { file_path: string; pos: number; key: KeyValue[] }[] }>(
    'key_rows.py',
    [
      '--catalog',
      'static',
      '--metadata',
      (await load()).metadataLocation,
      ...columns.flatMap((c) => ['--key', c]),
    ],
  );
  return answer.rows;
}

/** What the lookup of `keys` must return, from pyiceberg's rows: key text -> sorted locations. */
function expected(
  rows: readonly { file_path: string; pos: number; key: KeyValue[] }[],
  columns: readonly string[],
  keys: readonly (readonly KeyValue[])[],
): Map<string, RowLocation[]> {
  const types = typesOf(columns);
  const text = (k: readonly KeyValue[]) => keyText(k.map((v, i) => keyValueOf(types[i]!, v)));
  const wanted = new Set(keys.map(text));
  const out = new Map<string, RowLocation[]>();
  for (const r of rows) {
    const t = text(r.key);
    if (!wanted.has(t)) continue;
    out.set(t, [...(out.get(t) ?? []), { file_path: r.file_path, pos: r.pos }]);
  }
  return out;
}

const sorted = (m: ReadonlyMap<string, readonly RowLocation[]>) =>
  new Map(
    [...m.entries()]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, v]) => [
        k,
        [...v].sort((a, b) =>
          a.file_path < b.file_path ? -1 : a.file_path > b.file_path ? 1 : a.pos - b.pos,
        ),
      ]),
  );

/** Key tuples of `columns` drawn from the table's rows and from values it does not have. */
function keyArbitrary(columns: readonly string[]): fc.Arbitrary<KeyValue[][]> {
  const present = ALL_IDS.map((id) => {
    const r = row(id, 0);
    return columns.map((c) => r[TABLE.columns.findIndex((x) => x.name === c)] as KeyValue);
  });
  const absent = fc.integer({ min: -5, max: 70 }).map((id) => {
    const r = row(id, 0);
    return columns.map((c) => r[TABLE.columns.findIndex((x) => x.name === c)] as KeyValue);
  });
  return fc.array(fc.oneof(fc.constantFrom(...present), absent), { maxLength: 8 });
}

async function checkAgainstPyiceberg(columns: readonly string[], runs: number): Promise<void> {
  const rows = await pyRows(columns);
  const table = await load();
  await fc.assert(
    fc.asyncProperty(keyArbitrary(columns), async (keys) => {
      const got = await lookupKeys(folder, IDENT, table, columns, keys);
      expect(sorted(got.rows)).toEqual(sorted(expected(rows, columns, keys)));
      expect(got.stats.dataFilesRead + got.stats.dataFilesPruned).toBe(got.stats.dataFiles);
    }),
    { numRuns: runs },
  );
}

/** An ObjectStore that records every key read (whole or ranged) and the bytes returned. */
function countingStore(inner: ObjectStore) {
  const reads: string[] = [];
  const wrapped: ObjectStore = {
    uri: (k) => inner.uri(k),
    put: (k, b, d) => inner.put(k, b, d),
    putIfAbsent: (k, b) => inner.putIfAbsent(k, b),
    list: (p, s) => inner.list(p, s),
    delete: (k, d) => inner.delete(k, d),
    get: async (k) => {
      reads.push(k);
      return inner.get(k);
    },
    getRange: async (k, s, e) => {
      reads.push(k);
      return inner.getRange!(k, s, e);
    },
  };
  return { wrapped, reads };
}

describe('key lookup: the live rows of a set of keys', () => {
  it.skipIf(noPython !== undefined)(
    `finds exactly the rows pyiceberg reads, for random long keys ${noPython ?? ''}`,
    () => checkAgainstPyiceberg(['id'], 40),
    120_000,
  );

  it.skipIf(noPython !== undefined)(
    `finds exactly the rows pyiceberg reads, for string, decimal and composite keys ${noPython ?? ''}`,
    async () => {
      await checkAgainstPyiceberg(['name'], 15);
      await checkAgainstPyiceberg(['price'], 15);
      await checkAgainstPyiceberg(['id', 'name'], 15);
    },
    180_000,
  );

  it('reads only the files whose key bounds can hold a wanted key', async () => {
    const { wrapped, reads } = countingStore(store);
    const table = await load();
    const got = await lookupKeys({ store: wrapped, key: TABLE_KEY }, IDENT, table, ['id'], [[11], [12]]);
    const file2 = (p: string) => p.endsWith('i0000000002-a1.parquet');
    expect([...got.rows.values()].flat().every((r) => file2(r.file_path))).toBe(true);
    expect(got.rows.size).toBe(2);
    expect(got.stats).toMatchObject({ dataFiles: 6, dataFilesPruned: 5, dataFilesRead: 1 });
    const dataReads = [...new Set(reads.filter((k) => k.endsWith('.parquet')))];
    expect(dataReads).toHaveLength(1);
    expect(file2(dataReads[0]!)).toBe(true);
    expect(got.stats.dataBytesRead).toBeGreaterThan(0);

    // Id 1 is in files 1 and 4 (bounds 1..5 and 1..4): both read, rows in both.
    reads.length = 0;
    const one = await lookupKeys({ store: wrapped, key: TABLE_KEY }, IDENT, table, ['id'], [[1]]);
    expect(one.stats.dataFilesRead).toBe(2);
    expect(new Set(one.rows.get(keyText([1n]))!.map((r) => r.file_path)).size).toBe(2);

    // A key no file's bounds hold: no data file read at all.
    reads.length = 0;
    const none = await lookupKeys({ store: wrapped, key: TABLE_KEY }, IDENT, table, ['id'], [[1000]]);
    expect(none.rows.size).toBe(0);
    expect(none.stats.dataFilesRead).toBe(0);
    expect(reads.filter((k) => k.endsWith('.parquet'))).toEqual([]);
  });

  it.skipIf(noPython !== undefined)(
    `leaves out the positions a position delete file lists, as pyiceberg does ${noPython ?? ''}`,
    async () => {
      const table = await load();
      const dataFiles = (await lookupKeys(folder, IDENT, table, ['id'], [[22], [1]])).rows;
      const rows22 = dataFiles.get(keyText([22n]))!;
      const rows1 = dataFiles.get(keyText([1n]))!;
      expect(rows22).toHaveLength(3);
      expect(rows1).toHaveLength(2);
      // Delete two of key 22's three versions and one of key 1's two (minimal writer, test only).
      const gone = [rows22[0]!, rows22[2]!, rows1[0]!].sort((a, b) =>
        a.file_path < b.file_path ? -1 : a.file_path > b.file_path ? 1 : a.pos - b.pos,
      );
      await commitPositionDeletes(gone);

      const after = await load();
      const got = await lookupKeys(folder, IDENT, after, ['id'], [[22], [1]]);
      expect(got.rows.get(keyText([22n]))).toEqual([rows22[1]]);
      expect(got.rows.get(keyText([1n]))).toEqual([rows1[1]]);
      expect(got.stats).toMatchObject({ deleteFiles: 1, deleteFilesRead: 1, positionsDeleted: 3 });
      // pyiceberg applies the same delete file.
      expect(sorted(got.rows)).toEqual(sorted(expected(await pyRows(['id']), ['id'], [[22], [1]])));
      await checkAgainstPyiceberg(['id'], 15);
      // A key whose only file lies outside the delete file's file_path bounds: the delete file is not read.
      const far = await lookupKeys(folder, IDENT, after, ['id'], [[50]]);
      expect(far.rows.get(keyText([50n]))).toHaveLength(1);
      expect(far.stats).toMatchObject({ deleteFiles: 1, deleteFilesRead: 0, deleteBytesRead: 0 });
    },
    120_000,
  );
});

describe('key lookup in a large file', () => {
  it('reads the key column only, row group by row group, with positions across groups', async () => {
    const ident: TableIdent = { namespace: 'public', name: 'wide' };
    const tableKey = 'lake/public.wide';
    const wideCatalog = new FileCatalog({ store, tableKey: () => tableKey });
    const wide: TableFolder = { store, key: tableKey };
    const of = icebergSchemaOf(TABLE);
    await wideCatalog.createTable(
      ident,
      newTableMetadata({
        location: wideCatalog.location(ident),
        schema: of.schema,
        lastColumnId: of.lastColumnId,
        properties: {},
        uuid: randomUUID(),
        nowMs: Date.now(),
      }),
    );
    // 20,000 rows, id = 2 * position, a wide name column that does not compress, 4 row groups.
    const hash = (i: number) => createHash('sha256').update(String(i)).digest('hex');
    const objects = Array.from({ length: 20_000 }, (_, i) => ({
      id: BigInt(2 * i),
      qty: i,
      name: hash(i).repeat(3),
      price: null,
      big: null,
      at: null,
      day: null,
      ratio: null,
      ok: null,
      blob: null,
    }));
    const wire = encodeRows(TABLE, objects, {
      posPrefix: 'i0000000001',
      ordinalBase: 0,
      op: Op.update,
      phase: 'incremental',
      ingestTsNanos: 1_700_000_000_000_000_000n,
      snapshot: false,
    });
    const bytes = encodeParquet([toLakeRecordWithIds(wire, lakeFieldIdsOf(of.schema))], {
      compression: 'zstd',
      maxRowGroupRows: 5_000,
    });
    const key = `${tableKey}/data/wide.parquet`;
    await store.put(key, bytes);
    const dataFile = parquetDataFile(store.uri(key), bytes, of.schema);
    expect(dataFile.split_offsets?.length).toBe(4);
    const staged = await stageAppend(wide, {
      commit: { writerId: 'shop.app', commitId: 'i0000000001-a1' },
      schema: of.schema,
      spec: { 'spec-id': 0, fields: [] },
      dataFiles: [dataFile],
    });
    expect((await applyAppend(wideCatalog, ident, wide, staged, { nowMs: Date.now })).status).toBe(
      'committed',
    );

    const table = (await wideCatalog.loadTable(ident))!;
    const wanted = [0, 4_999, 5_000, 12_345, 19_999].map((p) => [2 * p]);
    const got = await lookupKeys(wide, ident, table, ['id'], [...wanted, [1], [40_000]]);
    expect(sorted(got.rows)).toEqual(
      sorted(
        new Map(
          wanted.map(([id]) => [keyText([BigInt(id!)]), [{ file_path: store.uri(key), pos: id! / 2 }]]),
        ),
      ),
    );
    expect(got.stats.rowsScanned).toBe(20_000);
    // The key column and the footer, not the wide name column: a small part of the file.
    expect(got.stats.dataBytesRead).toBeLessThan(bytes.length / 4);
  });
});

/** A position delete file of `rows` (sorted by file, pos) committed as its own snapshot. */
async function commitPositionDeletes(rows: readonly RowLocation[]): Promise<void> {
  const arrow = new Schema([
    new Field(
      'file_path',
      new Utf8(),
      false,
      new Map([['PARQUET:field_id', String(POSITION_DELETE_FILE_PATH_ID)]]),
    ),
    new Field('pos', new Int64(), false, new Map([['PARQUET:field_id', String(POSITION_DELETE_POS_ID)]])),
  ]);
  const paths = vectorFromArray(
    rows.map((r) => r.file_path),
    new Utf8(),
  );
  const positions = vectorFromArray(
    rows.map((r) => BigInt(r.pos)),
    new Int64(),
  );
  const batch = new RecordBatch(
    arrow,
    makeData({
      type: new Struct(arrow.fields),
      length: rows.length,
      nullCount: 0,
      children: [paths.data[0]!, positions.data[0]!],
    }),
  );
  const bytes = encodeParquet([batch], { compression: 'zstd' });
  const key = `${TABLE_KEY}/data/deletes-1.parquet`;
  await store.put(key, bytes);
  const base = await load();
  const parent = currentSnapshot(base.metadata)!;
  const snapshotId = newSnapshotId(base.metadata);
  const sequenceNumber = base.metadata['last-sequence-number'] + 1;
  const m = writeManifest({
    schema,
    spec: { 'spec-id': 0, fields: [] },
    content: 'deletes',
    entries: [
      {
        status: EntryStatus.ADDED,
        data_file: {
          content: FileContent.POSITION_DELETES,
          file_path: store.uri(key),
          file_format: 'PARQUET',
          partition: {},
          record_count: rows.length,
          file_size_in_bytes: bytes.length,
          // The file_path bounds readers prune delete files by (here: files 1 and 3).
          lower_bounds: new Map([[POSITION_DELETE_FILE_PATH_ID, utf8.encode(rows[0]!.file_path)]]),
          upper_bounds: new Map([[POSITION_DELETE_FILE_PATH_ID, utf8.encode(rows.at(-1)!.file_path)]]),
        },
      },
    ],
  });
  const mKey = `${TABLE_KEY}/metadata/deletes-1-m0.avro`;
  await store.put(mKey, m.bytes);
  const listKey = `${TABLE_KEY}/metadata/snap-deletes-1.avro`;
  await store.put(
    listKey,
    writeManifestList({
      snapshotId,
      parentSnapshotId: parent['snapshot-id'],
      sequenceNumber,
      manifests: [
        ...(await parentManifests(folder, IDENT, parent['manifest-list'])),
        manifestFileOf(store.uri(mKey), m.bytes.length, m.summary, { snapshotId, sequenceNumber }),
      ],
    }),
  );
  const updated = appendSnapshot(base.metadata, {
    snapshotId,
    manifestListPath: store.uri(listKey),
    added: {
      dataFiles: 0,
      records: 0,
      filesSize: 0,
      deleteFiles: 1,
      positionDeleteFiles: 1,
      positionDeletes: rows.length,
    },
    operation: 'delete',
    commit: { writerId: 'test.deletes', commitId: 'd0000000001-a1' },
    nowMs: Date.now(),
  });
  expect((await catalog.commitTable(IDENT, base, updated)).status).toBe('committed');
}

describe('ObjectStore.getRange', () => {
  const stores: [string, () => ObjectStore][] = [
    ['file', () => store],
    ['s3 (harness S3)', () => new S3ObjectStore({ bucket: testServers().s3Bucket, client: s3Client() })],
  ];
  it.each(stores)(
    '%s: returns the bytes of the range, fewer at the end, undefined for a missing object',
    async (_, make) => {
      const s = make();
      const prefix = `range-${randomUUID()}`;
      const bytes = Uint8Array.from({ length: 1000 }, (_, i) => i % 251);
      await s.put(`${prefix}/x.bin`, bytes);
      // One byte (`bytes=0-0`), which s3rver answers with the whole object.
      expect(await s.getRange!(`${prefix}/x.bin`, 0, 1)).toEqual(bytes.slice(0, 1));
      await fc.assert(
        fc.asyncProperty(fc.nat(1200), fc.nat(1200), async (a, b) => {
          const [start, end] = a <= b ? [a, b] : [b, a];
          expect(await s.getRange!(`${prefix}/x.bin`, start, end)).toEqual(bytes.slice(start, end));
        }),
        { numRuns: 40 },
      );
      expect(await s.getRange!(`${prefix}/missing.bin`, 0, 10)).toBeUndefined();
      expect(await s.getRange!(`${prefix}/missing.bin`, 5, 5)).toBeUndefined();
    },
    60_000,
  );
});
