/**
 * A writer's discard of an Iceberg table (`tidemark reset --delete-objects`; LakeSink.discard,
 * shared/iceberg/delete-files.ts) on a file lake with the `file` catalog, two writers' commits
 * staged and applied through the LakeSink as the engine does:
 * - pyiceberg (static table, current snapshot) reads exactly the other writer's rows after it;
 * - the discarded writer's data files and staged manifests are gone, the other's stay;
 * - the `delete` snapshot lists the removed files as DELETED entries with its own snapshot id
 *   and states the counters; a second discard is a no-op (no snapshot, nothing deleted);
 * - the writer starting over reuses an old commit id (same position, same fence: a lost state)
 *   and its commit is applied all the same, and the next append drops the manifests that only
 *   held DELETED entries;
 * - a plain table's discard stays the Parquet sink's.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WriteTarget } from '../../shared/contracts/sink.js';
import { newBatch } from '../../shared/dataplane/batch.js';
import { BatchEncoder } from '../../shared/dataplane/encoder.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { EntryStatus, readManifest } from '../../shared/iceberg/manifest.js';
import { readManifestList } from '../../shared/iceberg/manifest-list.js';
import { currentSnapshot, writerDiscardProperty } from '../../shared/iceberg/metadata.js';
import { type LakeCatalog, openLakeCatalog } from '../../shared/iceberg/open-catalog.js';
import type { IcebergTableMetadata } from '../../shared/iceberg/spec.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { LakeSink } from '../../shared/sink/lake-sink.js';
import { ParquetSink } from '../../shared/sink/parquet-sink.js';
import { readersMissing, runReaderScript } from '../harness/readers.js';

const noPython = readersMissing === undefined ? undefined : `(pyiceberg SKIPPED: ${readersMissing})`;

const SCHEMA: Schema = {
  columns: [
    { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
    { name: 'name', type: { kind: 'text' }, nullable: true, sourceType: 'text' },
  ],
  primaryKey: ['id'],
};
const TABLE = 'public.orders';
const EU = 'shop.eu';
const US = 'shop.us';

let dir: string;
let store: FileObjectStore;
let lakeCatalog: LakeCatalog;
let sink: LakeSink;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tidemark-iceberg-discard-'));
  store = new FileObjectStore(dir);
  lakeCatalog = openLakeCatalog({ type: 'file' }, { store, prefix: 'lake' });
  sink = new LakeSink({ parquet: new ParquetSink({ store, prefix: 'lake' }), catalog: lakeCatalog });
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const target = (writer: string, table = TABLE): WriteTarget => ({
  table,
  writer,
  fence: 1,
  tableFormat: table === TABLE ? 'iceberg' : undefined,
});

/** Writes `ids` as one data file of `writer` starting at `position`, stages and applies its commit. */
async function commitRows(writer: string, position: string, ids: readonly number[]): Promise<void> {
  const enc = new BatchEncoder(SCHEMA, { phase: 'stream', capacity: ids.length });
  ids.forEach((id, i) => {
    enc.appendRow({ id: BigInt(id), name: `${writer} ${id}` });
    enc.appendMeta(1, `${position}${String(i).padStart(4, '0')}`, 1_700_000_000_000_000_000n, false);
  });
  const batch = newBatch({
    table: TABLE,
    record: enc.finish(1_700_000_000_000_000_001n),
    watermark: position,
    writeMode: 'append',
  });
  const refs = await sink.write(target(writer), SCHEMA, position, [batch]);
  expect(refs).toHaveLength(1);
  const pending = await sink.stage(target(writer), refs);
  await sink.apply(pending!);
}

const folderDir = () => join(dir, 'lake', TABLE);
const metadataDir = () => join(folderDir(), 'metadata');
const namesOf = (writer: string) => ({
  data: readdirSync(folderDir()).filter((f) => f.startsWith(`${writer}.`)),
  staged: readdirSync(metadataDir()).filter((f) => f.startsWith(`${writer}.`)),
});

async function loaded() {
  const { catalog } = lakeCatalog;
  const t = await catalog.loadTable(lakeCatalog.table(TABLE).ident);
  expect(t).toBeDefined();
  return t!;
}

/** The current snapshot's manifests with their entries. */
function currentManifests(metadata: IcebergTableMetadata) {
  const read = (uri: string) => new Uint8Array(readFileSync(fileURLToPath(uri)));
  const list = readManifestList(read(currentSnapshot(metadata)!['manifest-list']));
  return list.manifests.map((m) => ({ m, entries: readManifest(read(m.manifest_path)).entries }));
}

async function pyiceberg(): Promise<{ rows: { id: number; name: string }[] }> {
  return runReaderScript('read_table.py', [
    '--catalog',
    'static',
    '--metadata',
    (await loaded()).metadataLocation,
    '--order-by',
    'id',
  ]);
}

const idsOf = (rows: readonly { id: number }[]) => rows.map((r) => Number(r.id));

describe("an Iceberg table's discard of one writer", () => {
  it('takes the writer out of the current snapshot, then deletes its files; the other writer stays', async () => {
    await commitRows(EU, 'j0001', [1, 2, 3]);
    await commitRows(US, 'j0001', [101, 102]);
    await commitRows(EU, 'j0002', [4, 5]);
    expect(namesOf(EU).data).toHaveLength(2);
    expect(namesOf(EU).staged).toHaveLength(2);
    const before = (await loaded()).metadata;
    expect(before.snapshots).toHaveLength(3);

    const removed = await sink.discard({ table: TABLE, writer: EU });
    expect(removed.map((r) => r.rows).sort()).toEqual([2, 3]);
    expect(removed.every((r) => r.writer === EU)).toBe(true);

    // The files of EU are gone, data and staged manifests; US's stay.
    expect(namesOf(EU)).toEqual({ data: [], staged: [] });
    expect(namesOf(US).data).toHaveLength(1);
    expect(namesOf(US).staged).toHaveLength(1);

    // One delete snapshot with Iceberg's counters and the writer's discard mark.
    const after = (await loaded()).metadata;
    expect(after.snapshots).toHaveLength(4);
    const snap = currentSnapshot(after)!;
    expect(snap['parent-snapshot-id']).toBe(before['current-snapshot-id']);
    expect(snap.summary).toMatchObject({
      operation: 'delete',
      'deleted-data-files': '2',
      'deleted-records': '5',
      'total-data-files': '1',
      'total-records': '2',
    });
    expect(snap.summary['added-data-files']).toBeUndefined();
    expect(Number(snap.summary['total-files-size'])).toBe(
      Number(currentSnapshot(before)!.summary['total-files-size']) -
        Number(snap.summary['removed-files-size']),
    );
    expect(after.properties[writerDiscardProperty(EU)]).toBe(String(snap['sequence-number']));

    // Its manifests: EU's entries DELETED by this snapshot (sequence numbers kept), US's live.
    const entries = currentManifests(after).flatMap(({ entries }) => entries);
    const eu = entries.filter((e) => e.data_file.file_path.includes(`/${EU}.`));
    const us = entries.filter((e) => e.data_file.file_path.includes(`/${US}.`));
    expect(eu.map((e) => e.status)).toEqual([EntryStatus.DELETED, EntryStatus.DELETED]);
    expect(eu.map((e) => e.snapshot_id)).toEqual([snap['snapshot-id'], snap['snapshot-id']]);
    expect(eu.map((e) => e.sequence_number).sort()).toEqual([1, 3]);
    expect(us).toHaveLength(1);
    expect(us[0]!.status).not.toBe(EntryStatus.DELETED);
  });

  it.skipIf(noPython !== undefined)(
    `is read by pyiceberg as exactly the other writer's rows ${noPython ?? ''}`,
    async () => {
      const read = await pyiceberg();
      expect(idsOf(read.rows)).toEqual([101, 102]);
      expect(read.rows.map((r) => r.name)).toEqual([`${US} 101`, `${US} 102`]);
    },
  );

  it('is a no-op the second time: no snapshot, nothing deleted', async () => {
    const before = await loaded();
    expect(await sink.discard({ table: TABLE, writer: EU })).toEqual([]);
    const after = await loaded();
    expect(after.metadataLocation).toBe(before.metadataLocation);
    expect(namesOf(US).data).toHaveLength(1);
  });

  it('applies the commits of the writer starting over, even one whose id an old snapshot carries', async () => {
    // A lost state: the writer's positions and fences start over, so its first commit has the id
    // of its first commit before the discard (same position, same fence, same file name).
    const oldIds = (await loaded()).metadata.snapshots.map((s) => s.summary['tidemark.commit-id']);
    await commitRows(EU, 'j0001', [7, 8]);
    const after = (await loaded()).metadata;
    const snap = currentSnapshot(after)!;
    expect(oldIds).toContain(snap.summary['tidemark.commit-id']);
    expect(snap.summary).toMatchObject({ operation: 'append', 'added-records': '2', 'total-records': '4' });
    // The manifests that held only DELETED entries are not carried on.
    const manifests = currentManifests(after);
    for (const { m } of manifests) expect(m.added_files_count + m.existing_files_count).toBeGreaterThan(0);
    expect(manifests.flatMap(({ entries }) => entries).every((e) => e.status !== EntryStatus.DELETED)).toBe(
      true,
    );
    if (noPython === undefined) expect(idsOf((await pyiceberg()).rows)).toEqual([7, 8, 101, 102]);
  });

  it("leaves a plain table's discard to the Parquet sink: its objects go, no metadata appears", async () => {
    const plain = 'public.plain';
    const enc = new BatchEncoder(SCHEMA, { phase: 'stream', capacity: 1 });
    enc.appendRow({ id: 1n, name: 'x' });
    enc.appendMeta(1, 'j00010000', null, false);
    const batch = newBatch({ table: plain, record: enc.finish(1n), watermark: 'j0001', writeMode: 'append' });
    await sink.write(target(EU, plain), SCHEMA, 'j0001', [batch]);
    expect(readdirSync(join(dir, 'lake', plain))).toHaveLength(1);
    const removed = await sink.discard({ table: plain, writer: EU });
    expect(removed).toHaveLength(1);
    expect(
      readdirSync(join(dir, 'lake')).includes(plain) ? readdirSync(join(dir, 'lake', plain)) : [],
    ).toEqual([]);
    expect(await lakeCatalog.catalog.loadTable(lakeCatalog.table(plain).ident)).toBeUndefined();
  });
});
