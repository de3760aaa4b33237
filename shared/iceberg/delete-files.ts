/**
 * Every data file of one writer taken out of an Iceberg table, then deleted: what `tidemark reset
 * --delete-objects` does to an Iceberg table (docs/iceberg.md, "Reset"). A plain table's objects
 * can simply be deleted; an Iceberg table's are named by its snapshots, so deleting them alone
 * would leave every reader failing on missing files.
 *
 * Owns: the `delete` snapshot (Iceberg's DeleteFiles, as Java's `MergingSnapshotProducer` writes
 * it): through `commitWithRetry`, the current manifests with every live entry of the writer's data
 * files rewritten as DELETED (status 2, the new snapshot's id, their sequence numbers kept), the
 * other entries of those manifests EXISTING, manifests without any of the writer's files kept as
 * they are; its counters (`deleted-data-files`, `deleted-records`, `removed-files-size`, the
 * totals) and the writer's discard mark (./metadata.ts `writerDiscardProperty`: the writer's
 * positions may start over, so its commits before this snapshot no longer count). Idempotent by
 * its commit id; a table with none of the writer's files live gets no snapshot at all (only the
 * mark, in a commit of its own, when snapshots of the writer's commits still count).
 *
 * Which files are the writer's: data files under the table's folder whose name parses as one of
 * its objects (shared/sink/layout.ts `parseObjectName`). Files maintenance rewrote under other
 * names are not the writer's any more and stay.
 *
 * Invariants: nothing is deleted before the commit that dropped its last live reference
 * succeeded (or the table was found to reference none of the writer's files); then the data
 * files the commit removed and the writer's staged manifests (`<writer>.<position>.f<fence>-m0.avro`,
 * ./append.ts) are deleted, never a file outside the table's folder. Snapshots older than the
 * delete still name the deleted files: reading the table as of such a snapshot (time travel)
 * fails until expiry removes it. Never touches tidemark's state.
 */

import { randomBytes } from 'node:crypto';
import { SinkError } from '../contracts/errors.js';
import { PARQUET_SUFFIX, parseObjectName } from '../sink/layout.js';
import { parentManifests, STAGED_MANIFEST_SUFFIX } from './append.js';
import type { CommitResult, LoadedTable, RetryOptions, TableIdent } from './catalog.js';
import { type Catalog, commitWithRetry, identText } from './catalog.js';
import { STAGED_KEYS_SUFFIX } from './current-state.js';
import { deleteAfterCommit, expireOnCommit } from './expire.js';
import {
  EntryStatus,
  FileContent,
  type IcebergDataFile,
  type IcebergManifestEntry,
  inheritFromManifest,
  readManifest,
  writeManifest,
} from './manifest.js';
import {
  type IcebergManifestFile,
  ManifestContent,
  manifestFileOf,
  readManifestList,
  writeManifestList,
} from './manifest-list.js';
import {
  appendSnapshot,
  COMMIT_ID_SUMMARY_KEY,
  type CommitIdentity,
  currentSnapshot,
  newSnapshotId,
  setProperties,
  writerCommitProperty,
  writerCommitsFrom,
  writerDiscardProperty,
  writerPositionProperty,
} from './metadata.js';
import type { IcebergTableMetadata } from './spec.js';
import { folderPath, keyInFolder, type TableFolder } from './table-folder.js';

/** What `deleteWriterFiles` did. */
export interface WriterFilesDeleted extends CommitResult {
  /** The writer's data files the commit took out of the table (none when it was already done). */
  readonly removed: readonly IcebergDataFile[];
  /** Files deleted from the store after the commit: those data files and the writer's staged manifests (URIs). */
  readonly deletedFiles: readonly string[];
  /**
   * Why deleting the metadata the commit left unreferenced (expired manifest lists, old metadata
   * files) failed, if it did: the commit and the deletions above stand; the caller logs it.
   */
  readonly cleanupError?: unknown;
}

/**
 * Takes every live data file of `writerId` out of the table in one `delete` snapshot, then deletes
 * those files and the writer's staged manifests (not in a folder the catalog owns the files of:
 * its unreferenced-file removal deletes them there). `commitId` (default: `discard-` and 16 random hex
 * digits) must be new to the table: a call is one deletion, its retries are idempotent.
 *
 * @throws SinkError `ICEBERG_METADATA_INVALID` when a manifest the current snapshot names is missing
 *   or outside the table's folder (whether it lists the writer's files cannot be told: nothing is
 *   changed); what `commitWithRetry` throws; the store's error when a deletion after the commit
 *   fails (the commit stands: calling again finds nothing to commit and deletes the rest).
 */
export async function deleteWriterFiles(
  catalog: Catalog,
  ident: TableIdent,
  folder: TableFolder,
  options: {
    readonly writerId: string;
    readonly commitId?: string;
    readonly nowMs: () => number;
    readonly retry?: RetryOptions;
  },
): Promise<WriterFilesDeleted> {
  const commit: CommitIdentity = {
    writerId: options.writerId,
    commitId: options.commitId ?? `discard-${randomBytes(8).toString('hex')}`,
  };
  const owns = (file: IcebergDataFile) => isWritersDataFile(folder, options.writerId, file);
  // What the attempt that was last built removed and expired: the committed one's, if any.
  let removed: IcebergDataFile[] = [];
  let expiredLists: readonly string[] = [];
  const result = await commitWithRetry(
    catalog,
    ident,
    commit,
    async (current: LoadedTable) => {
      removed = [];
      const base = current.metadata;
      const parent = currentSnapshot(base);
      if (parent === undefined) return 'already-committed';
      const snapshotId = newSnapshotId(base);
      const sequenceNumber = base['last-sequence-number'] + 1;
      const manifests: IcebergManifestFile[] = [];
      const listed = await parentManifests(folder, ident, parent['manifest-list']);
      for (const [i, m] of listed.entries()) {
        const rewritten = await withoutWriterFiles(folder, ident, m, owns, {
          snapshotId,
          sequenceNumber,
          name: `${commit.commitId}-${snapshotId}-${randomBytes(4).toString('hex')}-d${i}`,
        });
        manifests.push(rewritten?.manifest ?? m);
        if (rewritten) removed.push(...rewritten.removed);
      }
      if (removed.length === 0) {
        // Nothing of the writer's is live, but snapshots of its commits may still count (their
        // files were rewritten under other names): they must not hide its new commits.
        if (!countsWriterCommits(base, commit.writerId)) return 'already-committed';
        return setProperties(
          base,
          {
            [writerDiscardProperty(commit.writerId)]: String(sequenceNumber),
            [writerCommitProperty(commit.writerId)]: commit.commitId,
          },
          { remove: [writerPositionProperty(commit.writerId)], nowMs: options.nowMs() },
        );
      }
      const listKey = folderPath(
        folder,
        `metadata/snap-${snapshotId}-${randomBytes(4).toString('hex')}-${commit.commitId}.avro`,
      );
      await folder.store.put(
        listKey,
        writeManifestList({
          snapshotId,
          parentSnapshotId: parent['snapshot-id'],
          sequenceNumber,
          manifests,
        }),
      );
      const nowMs = options.nowMs();
      const deleted = appendSnapshot(base, {
        snapshotId,
        manifestListPath: folder.store.uri(listKey),
        operation: 'delete',
        added: { dataFiles: 0, records: 0, filesSize: 0 },
        removed: {
          dataFiles: removed.length,
          records: removed.reduce((n, f) => n + f.record_count, 0),
          filesSize: removed.reduce((n, f) => n + f.file_size_in_bytes, 0),
        },
        commit,
        properties: { [writerDiscardProperty(commit.writerId)]: String(sequenceNumber) },
        nowMs,
      });
      const expiry = expireOnCommit(deleted, nowMs);
      expiredLists = expiry?.manifestLists ?? [];
      return expiry?.metadata ?? deleted;
    },
    options.retry,
  );
  if (result.status !== 'committed') {
    removed = [];
    expiredLists = [];
  }
  // The catalog removes unreferenced files in a folder it placed (S3 Tables): no list, no delete.
  if (folder.catalogOwnsFiles) return { ...result, removed, deletedFiles: [] };
  // The table references none of the writer's files now: they and its staged manifests can go.
  const named = await currentManifestPaths(folder, ident, result.table);
  const dataKeys = removed.map((f) => keyInFolder(folder, f.file_path)!);
  const staged = (await stagedManifestKeys(folder, options.writerId)).filter(
    (key) => !named.has(folder.store.uri(key)),
  );
  await folder.store.delete(dataKeys);
  await folder.store.delete(staged);
  const deletedFiles = [...dataKeys, ...staged].map((key) => folder.store.uri(key));
  if (result.status !== 'committed') return { ...result, removed, deletedFiles };
  try {
    await deleteAfterCommit(folder, result.table.metadata, expiredLists, result.droppedMetadataFiles);
    return { ...result, removed, deletedFiles };
  } catch (cleanupError) {
    return { ...result, removed, deletedFiles, cleanupError };
  }
}

/**
 * The keys of `writerId`'s staged manifests in the table's metadata folder (`<writer>.<position>
 * .f<fence>-m0.avro`, as its data files are named), whatever snapshot names them.
 */
export async function stagedManifestKeys(folder: TableFolder, writerId: string): Promise<string[]> {
  const dir = folderPath(folder, 'metadata/');
  const keys: string[] = [];
  for (const o of await folder.store.list(`${dir}${writerId}.`)) {
    const name = o.key.slice(dir.length);
    // Staged manifests and staged keys files (./current-state.ts), named by their commit id.
    const suffix = [STAGED_MANIFEST_SUFFIX, STAGED_KEYS_SUFFIX].find((x) => name.endsWith(x));
    if (suffix === undefined) continue;
    const parsed = parseObjectName(name.slice(0, -suffix.length) + PARQUET_SUFFIX);
    if (parsed?.writer === writerId) keys.push(o.key);
  }
  return keys;
}

/**
 * Whether a snapshot `hasCommit` still counts for `writerId` (from its discard mark on) applied one
 * of the writer's commits (an id named like its data files, ./append.ts).
 */
function countsWriterCommits(metadata: IcebergTableMetadata, writerId: string): boolean {
  // Its position orders its commits (./metadata.ts hasCommit) even when no snapshot of it is kept.
  if (metadata.properties[writerPositionProperty(writerId)] !== undefined) return true;
  const from = writerCommitsFrom(metadata, writerId);
  return metadata.snapshots.some((s) => {
    const id = s.summary[COMMIT_ID_SUMMARY_KEY];
    return (
      s['sequence-number'] >= from &&
      id !== undefined &&
      parseObjectName(id + PARQUET_SUFFIX)?.writer === writerId
    );
  });
}

/** Whether `file` is a data file `writerId` wrote in the table's folder (by its name). */
function isWritersDataFile(folder: TableFolder, writerId: string, file: IcebergDataFile): boolean {
  if (file.content !== FileContent.DATA) return false;
  if (keyInFolder(folder, file.file_path) === undefined) return false;
  const name = file.file_path.slice(file.file_path.lastIndexOf('/') + 1);
  return parseObjectName(name)?.writer === writerId;
}

/**
 * `m` rewritten for the snapshot (`snapshotId`, `sequenceNumber`) with the writer's live entries
 * DELETED and the other live entries EXISTING (the DELETED entries of earlier snapshots are
 * history and dropped, as Iceberg does), written as `<name>.avro`; undefined when `m` lists none of
 * the writer's live files (it is kept as it is). Delete manifests are kept: the writer writes none.
 */
async function withoutWriterFiles(
  folder: TableFolder,
  ident: TableIdent,
  m: IcebergManifestFile,
  owns: (file: IcebergDataFile) => boolean,
  at: { readonly snapshotId: bigint; readonly sequenceNumber: number; readonly name: string },
): Promise<{ manifest: IcebergManifestFile; removed: IcebergDataFile[] } | undefined> {
  if (m.content !== ManifestContent.DATA) return undefined;
  if (m.added_files_count + m.existing_files_count === 0) return undefined;
  const key = keyInFolder(folder, m.manifest_path);
  const bytes = key === undefined ? undefined : await folder.store.get(key);
  if (bytes === undefined)
    throw new SinkError(
      'ICEBERG_METADATA_INVALID',
      identText(ident),
      `the manifest ${m.manifest_path} of ${identText(ident)}'s current snapshot is ${key === undefined ? "outside the table's folder" : 'missing'}, so whether it lists files being deleted cannot be told; nothing was changed: restore it, or drop the table`,
    );
  const read = readManifest(bytes);
  const removed: IcebergDataFile[] = [];
  const entries: IcebergManifestEntry[] = [];
  for (const e of read.entries) {
    if (e.status === EntryStatus.DELETED) continue;
    const inherited = inheritFromManifest(e, m);
    if (owns(e.data_file)) {
      removed.push(e.data_file);
      entries.push({ ...inherited, status: EntryStatus.DELETED, snapshot_id: at.snapshotId });
    } else {
      entries.push({ ...inherited, status: EntryStatus.EXISTING });
    }
  }
  if (removed.length === 0) return undefined;
  const { bytes: written, summary } = writeManifest({ schema: read.schema, spec: read.spec, entries });
  const writtenKey = folderPath(folder, `metadata/${at.name}.avro`);
  await folder.store.put(writtenKey, written);
  return {
    manifest: manifestFileOf(folder.store.uri(writtenKey), written.length, summary, at),
    removed,
  };
}

/** The manifests `table`'s current snapshot names (URIs); none without a snapshot. */
async function currentManifestPaths(
  folder: TableFolder,
  ident: TableIdent,
  table: LoadedTable,
): Promise<Set<string>> {
  const snapshot = currentSnapshot(table.metadata);
  if (snapshot === undefined) return new Set();
  const key = keyInFolder(folder, snapshot['manifest-list']);
  const bytes = key === undefined ? undefined : await folder.store.get(key);
  if (bytes === undefined)
    throw new SinkError(
      'ICEBERG_METADATA_INVALID',
      identText(ident),
      `the manifest list ${snapshot['manifest-list']} of ${identText(ident)}'s current snapshot is missing or outside the table's folder; no file was deleted`,
    );
  return new Set(readManifestList(bytes).manifests.map((m) => m.manifest_path));
}
