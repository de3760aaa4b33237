import { rm } from 'node:fs/promises';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeRows } from '../../shared/dataplane/encoder.js';
import { toLakeRecordWithIds } from '../../shared/dataplane/lake.js';
import { Op } from '../../shared/dataplane/metadata.js';
import { applyAppend, stageAppend } from '../../shared/iceberg/append.js';
import type { TableIdent } from '../../shared/iceberg/catalog.js';
import { parquetDataFile } from '../../shared/iceberg/data-file.js';
import {
  DELETE_AFTER_COMMIT_PROPERTY,
  MAX_SNAPSHOT_AGE_PROPERTY,
  MIN_SNAPSHOTS_TO_KEEP_PROPERTY,
} from '../../shared/iceberg/expire.js';
import type { FileCatalog } from '../../shared/iceberg/file-catalog.js';
import {
  EntryStatus,
  FileContent,
  type IcebergDataFile,
  liveEntries,
} from '../../shared/iceberg/manifest.js';
import { readManifestList } from '../../shared/iceberg/manifest-list.js';
import {
  MERGE_ENABLED_PROPERTY,
  MIN_COUNT_TO_MERGE_PROPERTY,
  TARGET_SIZE_PROPERTY,
} from '../../shared/iceberg/merge.js';
import { currentSnapshot, PREVIOUS_VERSIONS_MAX_PROPERTY } from '../../shared/iceberg/metadata.js';
import { lakeFieldIdsOf } from '../../shared/iceberg/schema.js';
import type { IcebergSchema, IcebergTableMetadata } from '../../shared/iceberg/spec.js';
import type { TableFolder } from '../../shared/iceberg/table-folder.js';
import type { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { encodeParquet } from '../../shared/sink/parquet-writer.js';
import { readersMissing, runReaderScript } from '../harness/readers.js';
import { newFileCatalogTable, ORDERS_IDENT, ORDERS_KEY, TABLE } from './iceberg-table-fixture.js';

const noPython = readersMissing === undefined ? undefined : `(pyiceberg SKIPPED: ${readersMissing})`;

const IDENT: TableIdent = ORDERS_IDENT;
const TABLE_KEY = ORDERS_KEY;
const SPEC = { 'spec-id': 0, fields: [] };
const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

interface Table {
  store: FileObjectStore;
  catalog: FileCatalog;
  folder: TableFolder;
  schema: IcebergSchema;
}

async function newTable(properties: Record<string, string>): Promise<Table> {
  const { dir, store, catalog, folder, schema } = await newFileCatalogTable('iceberg-bounded', {
    properties,
    nowMs: 1_000,
    conditionalWrites: 'trusted',
  });
  dirs.push(dir);
  return { store, catalog, folder, schema };
}

/** A data file entry (no bytes: the manifests are what is checked here). */
function fakeFile(t: Table, name: string): IcebergDataFile {
  return {
    content: FileContent.DATA,
    file_path: t.store.uri(`${TABLE_KEY}/data/${name}.parquet`),
    file_format: 'PARQUET',
    partition: {},
    record_count: 1,
    file_size_in_bytes: 100,
  };
}

async function appendFiles(t: Table, commitId: string, files: IcebergDataFile[], nowMs: number) {
  const staged = await stageAppend(t.folder, {
    commit: { writerId: 'shop.app', commitId },
    schema: t.schema,
    spec: SPEC,
    dataFiles: files,
  });
  const result = await applyAppend(t.catalog, IDENT, t.folder, staged, { nowMs: () => nowMs });
  expect(result.status).toBe('committed');
  expect(result.cleanupError).toBeUndefined();
  return result;
}

async function currentManifests(t: Table, metadata: IcebergTableMetadata) {
  const list = readManifestList((await t.store.get(keyOf(t, currentSnapshot(metadata)!['manifest-list'])))!);
  return Promise.all(
    list.manifests.map(async (manifest) => ({
      manifest,
      bytes: (await t.store.get(keyOf(t, manifest.manifest_path)))!,
    })),
  );
}

function keyOf(t: Table, uri: string): string {
  const prefix = `${t.store.uri(TABLE_KEY)}/`;
  expect(uri.startsWith(prefix)).toBe(true);
  return `${TABLE_KEY}/${uri.slice(prefix.length)}`;
}

describe('manifest merging on append', () => {
  it('keeps the live files exactly the appended ones, each once, with their sequence numbers', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 30 }),
        fc.integer({ min: 2, max: 5 }),
        fc.boolean(),
        async (sizes, minCount, smallTarget) => {
          const t = await newTable({
            [MIN_COUNT_TO_MERGE_PROPERTY]: String(minCount),
            // A small target makes merged manifests "full", so they are kept as they are.
            ...(smallTarget ? { [TARGET_SIZE_PROPERTY]: '3000' } : {}),
          });
          const expected = new Map<string, number>();
          let metadata: IcebergTableMetadata | undefined;
          for (const [i, n] of sizes.entries()) {
            const files = Array.from({ length: n }, (_, j) => fakeFile(t, `c${i}-f${j}`));
            const result = await appendFiles(t, `c${i}`, files, 2_000 + i);
            metadata = result.table.metadata;
            for (const f of files) expected.set(f.file_path, metadata['last-sequence-number']);
          }
          const manifests = await currentManifests(t, metadata!);
          const live = liveEntries(manifests);
          expect(live.map((e) => e.data_file.file_path).sort()).toEqual([...expected.keys()].sort());
          for (const e of live) {
            expect(e.sequence_number).toBe(expected.get(e.data_file.file_path));
            expect(e.file_sequence_number).toBe(expected.get(e.data_file.file_path));
          }
          // Counts and min sequence numbers in the list match what the manifests hold.
          for (const one of manifests) {
            const own = liveEntries([one]);
            expect(one.manifest.added_files_count + one.manifest.existing_files_count).toBe(own.length);
            if (own.length > 0)
              expect(one.manifest.min_sequence_number).toBe(Math.min(...own.map((e) => e.sequence_number!)));
          }
          if (!smallTarget) expect(manifests.length).toBeLessThanOrEqual(minCount + 1);
        },
      ),
      { numRuns: 12 },
    );
  }, 240_000);

  it('leaves the manifests alone when commit.manifest-merge.enabled is false', async () => {
    const t = await newTable({ [MERGE_ENABLED_PROPERTY]: 'false', [MIN_COUNT_TO_MERGE_PROPERTY]: '2' });
    let result: Awaited<ReturnType<typeof appendFiles>> | undefined;
    for (let i = 0; i < 6; i++) result = await appendFiles(t, `c${i}`, [fakeFile(t, `f${i}`)], 2_000 + i);
    const manifests = await currentManifests(t, result!.table.metadata);
    expect(manifests).toHaveLength(6);
    expect(
      liveEntries(manifests).every(
        (e) => e.status === EntryStatus.ADDED || e.status === EntryStatus.EXISTING,
      ),
    ).toBe(true);
  });
});

describe('snapshot expiry on commit', () => {
  it('keeps the metadata folder exactly what the table names, every 100th commit', async () => {
    const t = await newTable({
      [MIN_COUNT_TO_MERGE_PROPERTY]: '4',
      [MAX_SNAPSHOT_AGE_PROPERTY]: '0',
      [MIN_SNAPSHOTS_TO_KEEP_PROPERTY]: '3',
      [PREVIOUS_VERSIONS_MAX_PROPERTY]: '5',
      [DELETE_AFTER_COMMIT_PROPERTY]: 'true',
    });
    const all: string[] = [];
    let deleted = 0;
    for (let i = 1; i <= 200; i++) {
      const f = fakeFile(t, `f${i}`);
      all.push(f.file_path);
      const result = await appendFiles(t, `c${i}`, [f], 2_000 + i);
      deleted += result.deletedFiles.length;
      const metadata = result.table.metadata;
      expect(metadata['metadata-log'].length).toBeLessThanOrEqual(5);
      if (i % 100 !== 0) continue;
      expect(metadata.snapshots).toHaveLength(3);
      // What the table names: metadata files, manifest lists, their manifests.
      const named = new Set<string>([result.table.metadataLocation]);
      for (const e of metadata['metadata-log']) named.add(e['metadata-file']);
      for (const s of metadata.snapshots) {
        named.add(s['manifest-list']);
        const list = readManifestList((await t.store.get(keyOf(t, s['manifest-list'])))!);
        for (const m of list.manifests) named.add(m.manifest_path);
      }
      const present = (await t.store.list(`${TABLE_KEY}/metadata/`))
        .map((o) => t.store.uri(o.key))
        .filter((u) => !u.endsWith('version-hint.text'));
      expect(present.sort()).toEqual([...named].sort());
      const live = liveEntries(await currentManifests(t, metadata));
      expect(live.map((e) => e.data_file.file_path).sort()).toEqual([...all].sort());
    }
    expect(deleted).toBeGreaterThan(0);
  }, 240_000);

  it('expires nothing younger than history.expire.max-snapshot-age-ms', async () => {
    const t = await newTable({ [MIN_COUNT_TO_MERGE_PROPERTY]: '4' });
    let result: Awaited<ReturnType<typeof appendFiles>> | undefined;
    for (let i = 1; i <= 100; i++) result = await appendFiles(t, `c${i}`, [fakeFile(t, `f${i}`)], 2_000 + i);
    expect(result!.table.metadata.snapshots).toHaveLength(100);
    // Iceberg's default is false: old metadata files stay.
    expect(result!.deletedFiles).toEqual([]);
  }, 240_000);
});

describe('a table after many appends with merging and expiry', () => {
  it.skipIf(noPython !== undefined)(
    `is read by pyiceberg: every row of every commit, once ${noPython ?? ''}`,
    async () => {
      const t = await newTable({
        [MIN_COUNT_TO_MERGE_PROPERTY]: '4',
        [MAX_SNAPSHOT_AGE_PROPERTY]: '0',
        [MIN_SNAPSHOTS_TO_KEEP_PROPERTY]: '2',
        [PREVIOUS_VERSIONS_MAX_PROPERTY]: '3',
        [DELETE_AFTER_COMMIT_PROPERTY]: 'true',
      });
      const commits = 120;
      let location = '';
      for (let i = 1; i <= commits; i++) {
        const row = [i, 1, `n${i}`, '1.00', null, 0n, 0, 1, true, null];
        const objects = [
          Object.fromEntries(row.map((v, c) => [TABLE.columns[c]!.name, c === 0 ? BigInt(v as number) : v])),
        ];
        const posPrefix = `i${String(i).padStart(10, '0')}`;
        const wire = encodeRows(TABLE, objects, {
          posPrefix,
          ordinalBase: 0,
          op: Op.update,
          phase: 'incremental',
          ingestTsNanos: 1_700_000_000_000_000_000n,
          snapshot: false,
        });
        const bytes = encodeParquet([toLakeRecordWithIds(wire, lakeFieldIdsOf(t.schema))], {
          compression: 'zstd',
        });
        const key = `${TABLE_KEY}/data/${posPrefix}.parquet`;
        await t.store.put(key, bytes);
        const result = await appendFiles(
          t,
          `${posPrefix}-a1`,
          [parquetDataFile(t.store.uri(key), bytes, t.schema)],
          Date.now(),
        );
        location = result.table.metadataLocation;
      }
      const { rows } = await runReaderScript<{ rows: Record<string, unknown>[] }>('read_table.py', [
        '--catalog',
        'static',
        '--metadata',
        location,
        '--order-by',
        'id',
      ]);
      expect(rows.map((r) => Number(r.id))).toEqual(Array.from({ length: commits }, (_, i) => i + 1));
    },
    240_000,
  );
});
