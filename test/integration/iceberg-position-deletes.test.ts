import { rm } from 'node:fs/promises';
import { basename } from 'node:path';
import fc from 'fast-check';
import { icebergRead } from 'icebird';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeRows } from '../../shared/dataplane/encoder.js';
import { toLakeRecordWithIds } from '../../shared/dataplane/lake.js';
import { Op } from '../../shared/dataplane/metadata.js';
import { applyAppend, parentManifests, stageAppend } from '../../shared/iceberg/append.js';
import type { TableIdent } from '../../shared/iceberg/catalog.js';
import { parquetDataFile } from '../../shared/iceberg/data-file.js';
import { deleteWriterFiles } from '../../shared/iceberg/delete-files.js';
import type { FileCatalog } from '../../shared/iceberg/file-catalog.js';
import { FileContent, type IcebergDataFile, readManifest } from '../../shared/iceberg/manifest.js';
import { ManifestContent } from '../../shared/iceberg/manifest-list.js';
import {
  DELETE_FILE_PATH_ID,
  DELETE_POS_ID,
  type PositionDelete,
  writePositionDeletes,
} from '../../shared/iceberg/position-deletes.js';
import { applyRowDelta, type StagedRowDelta, stageRowDelta } from '../../shared/iceberg/row-delta.js';
import { lakeFieldIdsOf } from '../../shared/iceberg/schema.js';
import { deserializeValue } from '../../shared/iceberg/single-value.js';
import type { IcebergSchema } from '../../shared/iceberg/spec.js';
import type { TableFolder } from '../../shared/iceberg/table-folder.js';
import { objectName } from '../../shared/sink/layout.js';
import { encodeParquet } from '../../shared/sink/parquet-writer.js';
import { withFileFetch } from '../harness/file-fetch.js';
import { readersMissing, runReaderScript, SparkSession, sparkMissing } from '../harness/readers.js';
import { newFileCatalogTable, ORDERS_IDENT, TABLE } from './iceberg-table-fixture.js';

const noPython = readersMissing === undefined ? undefined : `(pyiceberg SKIPPED: ${readersMissing})`;
const noSpark = sparkMissing === undefined ? undefined : `(Spark SKIPPED: ${sparkMissing})`;
const IDENT: TableIdent = ORDERS_IDENT;
const SPEC = { 'spec-id': 0, fields: [] };
const WRITER = 'shop.app';

/** One `file`-catalog table in its own directory. */
interface Lake {
  readonly dir: string;
  readonly catalog: FileCatalog;
  readonly folder: TableFolder;
  readonly schema: IcebergSchema;
}

async function newLake(properties: Readonly<Record<string, string>> = {}): Promise<Lake> {
  const { dir, catalog, folder, schema } = await newFileCatalogTable('iceberg-posdel', { properties });
  return { dir, catalog, folder, schema };
}

/** A data file of rows with these ids (row i at position i), written under data/<name>.parquet. */
async function dataFile(lake: Lake, name: string, ids: readonly number[]): Promise<IcebergDataFile> {
  const objects = ids.map((id) => ({
    ...Object.fromEntries(TABLE.columns.map((c) => [c.name, null])),
    id: BigInt(id),
    qty: id,
    name: `n${id}`,
  }));
  const wire = encodeRows(TABLE, objects, {
    posPrefix: `i${name}`,
    ordinalBase: 0,
    op: Op.update,
    phase: 'incremental',
    ingestTsNanos: 1_700_000_000_000_000_000n,
    snapshot: false,
  });
  const bytes = encodeParquet([toLakeRecordWithIds(wire, lakeFieldIdsOf(lake.schema))], {
    compression: 'zstd',
  });
  const key = `${lake.folder.key}/data/${name}.parquet`;
  await lake.folder.store.put(key, bytes);
  return parquetDataFile(lake.folder.store.uri(key), bytes, lake.schema);
}

async function append(lake: Lake, commitId: string, file: IcebergDataFile) {
  const staged = await stageAppend(lake.folder, {
    commit: { writerId: WRITER, commitId },
    schema: lake.schema,
    spec: SPEC,
    dataFiles: [file],
  });
  const r = await applyAppend(lake.catalog, IDENT, lake.folder, staged, { nowMs: Date.now });
  expect(r.status).toBe('committed');
  return r.table.metadata['current-snapshot-id'];
}

/** Writes the delete file (if any deletes) and stages the row delta. */
async function stageDelta(
  lake: Lake,
  commitId: string,
  dataFiles: readonly IcebergDataFile[],
  deletes: readonly PositionDelete[],
  resolvedAgainst: bigint | undefined,
  writerId = WRITER,
): Promise<StagedRowDelta> {
  const del = await writePositionDeletes(
    lake.folder,
    `${lake.folder.key}/data/${commitId}-deletes.parquet`,
    deletes,
  );
  return stageRowDelta(lake.folder, {
    commit: { writerId, commitId },
    schema: lake.schema,
    spec: SPEC,
    dataFiles,
    deleteFiles: [del],
    referencedDataFiles: deletes.map((d) => d.filePath),
    ...(resolvedAgainst === undefined ? {} : { resolvedAgainst }),
  });
}

const apply = (lake: Lake, staged: StagedRowDelta) =>
  applyRowDelta(lake.catalog, IDENT, lake.folder, staged, { nowMs: Date.now });

async function metadataLocation(lake: Lake): Promise<string> {
  return (await lake.catalog.loadTable(IDENT))!.metadataLocation;
}

async function pyiceberg(lake: Lake, snapshotId?: bigint): Promise<number[]> {
  const { rows } = await runReaderScript<{ rows: Record<string, unknown>[] }>('read_table.py', [
    '--catalog',
    'static',
    '--metadata',
    await metadataLocation(lake),
    '--order-by',
    'id',
    ...(snapshotId === undefined ? [] : ['--snapshot-id', String(snapshotId)]),
  ]);
  return rows.map((r) => Number(r.id));
}

async function icebird(lake: Lake): Promise<number[]> {
  const location = await metadataLocation(lake);
  const tableUrl = location.slice(0, location.lastIndexOf('/metadata/'));
  const rows = await withFileFetch(() => icebergRead({ tableUrl, metadataFileName: basename(location) }));
  return rows.map((r) => Number(r.id)).sort((a, b) => a - b);
}

describe('position deletes in row-delta commits, read by pyiceberg, icebird and Spark', () => {
  let lake: Lake;
  let a: IcebergDataFile;
  let b: IcebergDataFile;
  let delta2: StagedRowDelta;
  let snap1: bigint | undefined;
  let snap2: bigint | undefined;
  let spark: SparkSession | undefined;

  beforeAll(async () => {
    lake = await newLake();
    if (noSpark === undefined) spark = await SparkSession.start();
  }, 180_000);
  afterAll(async () => {
    await spark?.quit();
    if (lake) await rm(lake.dir, { recursive: true, force: true });
  }, 60_000);

  it('commits an append, then a row delta deleting rows of the older file and of its own new file', async () => {
    a = await dataFile(lake, 'a', [1, 2, 3]);
    snap1 = await append(lake, 'c1', a);
    b = await dataFile(lake, 'b', [10, 11, 12]);
    delta2 = await stageDelta(
      lake,
      'c2',
      [b],
      [
        { filePath: b.file_path, pos: 0 }, // id 10: a row of this very commit
        { filePath: a.file_path, pos: 1 }, // id 2
      ],
      snap1,
    );
    expect(delta2.referencedDataFiles).toEqual([a.file_path]);
    const r = await apply(lake, delta2);
    expect(r.status).toBe('committed');
    const table = r.table.metadata;
    const snap = table.snapshots.at(-1)!;
    snap2 = snap['snapshot-id'];
    expect(snap.summary).toMatchObject({
      operation: 'overwrite',
      'added-data-files': '1',
      'added-records': '3',
      'added-delete-files': '1',
      'added-position-delete-files': '1',
      'added-position-deletes': '2',
      'total-data-files': '2',
      'total-records': '6',
      'total-delete-files': '1',
      'total-position-deletes': '2',
    });
    // The delete file's entry: content 1, sorted rows' exact bounds, no referenced_data_file (two files).
    const manifest = readManifest(
      new Uint8Array(
        (await lake.folder.store.get(`${lake.folder.key}/metadata/c2-d0.avro`)) ?? new Uint8Array(),
      ),
    );
    expect(manifest.content).toBe('deletes');
    const entry = manifest.entries[0]!.data_file;
    expect(entry.content).toBe(FileContent.POSITION_DELETES);
    expect(entry.record_count).toBe(2);
    expect(entry.referenced_data_file).toBeUndefined();
    const str = (m: ReadonlyMap<number, Uint8Array> | undefined, id: number) =>
      deserializeValue({ kind: id === DELETE_POS_ID ? 'long' : 'string' }, m!.get(id)!);
    // 'a.parquet' sorts before 'b.parquet': the bounds are the two paths, whole.
    expect(str(entry.lower_bounds, DELETE_FILE_PATH_ID)).toBe(a.file_path);
    expect(str(entry.upper_bounds, DELETE_FILE_PATH_ID)).toBe(b.file_path);
    expect(str(entry.lower_bounds, DELETE_POS_ID)).toBe(0n);
    expect(str(entry.upper_bounds, DELETE_POS_ID)).toBe(1n);
  });

  it('applies the same staged row delta once, however often it is applied', async () => {
    const before = (await lake.catalog.loadTable(IDENT))!.metadata.snapshots.length;
    expect((await apply(lake, delta2)).status).toBe('already-committed');
    expect((await lake.catalog.loadTable(IDENT))!.metadata.snapshots.length).toBe(before);
  });

  it("rebases a delete-only row delta over another writer's append", async () => {
    // Resolved against snapshot 2; another writer appends before it is applied.
    const delta3 = await stageDelta(
      lake,
      'c3',
      [],
      [
        { filePath: b.file_path, pos: 2 }, // id 12
        { filePath: a.file_path, pos: 2 }, // id 3
      ],
      snap2,
    );
    const other = await dataFile(lake, 'd', [20]);
    const staged = await stageAppend(lake.folder, {
      commit: { writerId: 'other.app', commitId: 'o1' },
      schema: lake.schema,
      spec: SPEC,
      dataFiles: [other],
    });
    expect((await applyAppend(lake.catalog, IDENT, lake.folder, staged, { nowMs: Date.now })).status).toBe(
      'committed',
    );
    const r = await apply(lake, delta3);
    expect(r.status).toBe('committed');
    const snap = r.table.metadata.snapshots.at(-1)!;
    expect(snap.summary).toMatchObject({
      operation: 'delete',
      'added-delete-files': '1',
      'added-position-deletes': '2',
      'total-delete-files': '2',
      'total-position-deletes': '4',
      'total-records': '7',
    });
  });

  it('refuses a row delta whose referenced data file another commit removed, committing nothing', async () => {
    const l = await newLake();
    try {
      // A writer's data file, then a row delta resolved against it, then the file taken out of the table.
      const victimName = objectName('public.orders', 'victim.app', 'i0000000001', 1).name;
      const victim = await dataFile(l, victimName.slice(0, -'.parquet'.length), [1, 2]);
      const s1 = await append(l, 'v1', victim);
      const staged = await stageDelta(l, 'v2', [], [{ filePath: victim.file_path, pos: 0 }], s1);
      const removed = await deleteWriterFiles(l.catalog, IDENT, l.folder, {
        writerId: 'victim.app',
        nowMs: Date.now,
      });
      expect(removed.removed.map((f) => f.file_path)).toEqual([victim.file_path]);
      const before = (await l.catalog.loadTable(IDENT))!.metadata;
      await expect(apply(l, staged)).rejects.toMatchObject({ code: 'ICEBERG_DELETE_TARGET_GONE' });
      const after = (await l.catalog.loadTable(IDENT))!.metadata;
      expect(after.snapshots.length).toBe(before.snapshots.length);
      expect(after['current-snapshot-id']).toBe(before['current-snapshot-id']);
    } finally {
      await rm(l.dir, { recursive: true, force: true });
    }
  });

  it('merges small data manifests on a row delta and carries every delete manifest as it is', async () => {
    const l = await newLake({ 'commit.manifest.min-count-to-merge': '2' });
    try {
      const files = [];
      for (const [i, ids] of [
        [1, 2],
        [3, 4],
        [5, 6],
      ].entries()) {
        const f = await dataFile(l, `m${i}`, ids);
        files.push(f);
        await append(l, `m${i}`, f);
      }
      const s3 = (await l.catalog.loadTable(IDENT))!.metadata['current-snapshot-id'];
      const n = await dataFile(l, 'n', [7, 8]);
      const d1 = await stageDelta(
        l,
        'n1',
        [n],
        [
          { filePath: files[0]!.file_path, pos: 0 },
          { filePath: n.file_path, pos: 1 },
        ],
        s3,
      );
      const r1 = await apply(l, d1);
      const d2 = await stageDelta(
        l,
        'n2',
        [],
        [{ filePath: files[2]!.file_path, pos: 1 }],
        r1.table.metadata['current-snapshot-id'],
      );
      const r2 = await apply(l, d2);
      const snap = r2.table.metadata.snapshots.at(-1)!;
      const list = await parentManifests(l.folder, IDENT, snap['manifest-list']);
      const deletes = list.filter((m) => m.content === ManifestContent.DELETES);
      expect(deletes.map((m) => basename(m.manifest_path)).sort()).toEqual(['n1-d0.avro', 'n2-d0.avro']);
      // Four data manifests were written (m0..m2, n1); merging left fewer live in the list.
      expect(list.filter((m) => m.content === ManifestContent.DATA).length).toBeLessThan(4);
      // n2's delete file names one data file: referenced_data_file (field 143, optional in v2) is set.
      const n2 = readManifest(
        (await l.folder.store.get(`${l.folder.key}/metadata/n2-d0.avro`)) ?? new Uint8Array(),
      );
      expect(n2.entries[0]!.data_file.referenced_data_file).toBe(files[2]!.file_path);
      const expected = [2, 3, 4, 5, 7];
      expect(await icebird(l)).toEqual(expected);
      if (noPython === undefined) expect(await pyiceberg(l)).toEqual(expected);
      if (spark) {
        const { rows } = await spark.ask({ load: await metadataLocation(l), order_by: 'id' });
        expect(rows.map((r) => Number(r.id))).toEqual(expected);
      }
    } finally {
      await rm(l.dir, { recursive: true, force: true });
    }
  }, 120_000);

  it.skipIf(noPython !== undefined)(
    `pyiceberg reads exactly the surviving rows, now and as of snapshot 2 ${noPython ?? ''}`,
    async () => {
      expect(await pyiceberg(lake)).toEqual([1, 11, 20]);
      expect(await pyiceberg(lake, snap2)).toEqual([1, 3, 11, 12]);
      expect(await pyiceberg(lake, snap1)).toEqual([1, 2, 3]);
    },
    120_000,
  );

  it('icebird reads exactly the surviving rows', async () => {
    expect(await icebird(lake)).toEqual([1, 11, 20]);
  });

  it.skipIf(noSpark !== undefined)(
    `Spark (Iceberg Java) reads exactly the surviving rows ${noSpark ?? ''}`,
    async () => {
      const { rows } = await spark!.ask({ load: await metadataLocation(lake), order_by: 'id' });
      expect(rows.map((r) => Number(r.id))).toEqual([1, 11, 20]);
    },
    180_000,
  );

  it.skipIf(noPython !== undefined)(
    `property: for random delete sets over an older file and the commit's own file, readers return exactly the rest ${noPython ?? ''}`,
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 6 }),
          fc.integer({ min: 1, max: 6 }),
          fc.array(fc.nat(), { maxLength: 12 }),
          async (n, m, picks) => {
            const l = await newLake();
            try {
              const older = await dataFile(
                l,
                'p',
                Array.from({ length: n }, (_, i) => i),
              );
              const s1 = await append(l, 'p1', older);
              const newer = await dataFile(
                l,
                'q',
                Array.from({ length: m }, (_, i) => 100 + i),
              );
              // picks index the n + m rows; repeats are fine (duplicates are dropped); at least one delete.
              const chosen = new Set(picks.map((p) => p % (n + m)));
              if (chosen.size === 0) chosen.add(0);
              const deletes = [...chosen].map((k) =>
                k < n ? { filePath: older.file_path, pos: k } : { filePath: newer.file_path, pos: k - n },
              );
              const staged = await stageDelta(l, 'p2', [newer], deletes, s1);
              expect((await apply(l, staged)).status).toBe('committed');
              const all = [
                ...Array.from({ length: n }, (_, i) => i),
                ...Array.from({ length: m }, (_, i) => 100 + i),
              ];
              const expected = all.filter((_, k) => !chosen.has(k));
              expect(await pyiceberg(l)).toEqual(expected);
              expect(await icebird(l)).toEqual(expected);
            } finally {
              await rm(l.dir, { recursive: true, force: true });
            }
          },
        ),
        { numRuns: 8 },
      );
    },
    300_000,
  );
});
