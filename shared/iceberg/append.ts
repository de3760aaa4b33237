/**
 * An append to an Iceberg table in the two halves decision 0024 splits it into: `stageAppend`
 * (step 1: one tidemark commit's data files listed in one manifest, written under a name unique
 * to the attempt, visible to no reader) and `applyAppend` (step 3: the catalog commit that adds
 * that manifest to the table, once, however often it is called). Between the two the caller
 * makes its state commit, which records the staged append: from there on the append is decided,
 * and whoever recovers applies it.
 *
 * Owns: the manifest list of the new snapshot (the parent's manifests plus the staged one, written
 * per attempt: each base gets its own list), the snapshot's counters, and the idempotence (the
 * commit id in the summary and the writer's property, ./metadata.ts `appendSnapshot`). The build
 * also keeps the table's metadata bounded (issue 30 item 4): data manifests with no live file left
 * (only the DELETED entries of a delete snapshot, ./delete-files.ts) not carried on, small
 * manifests merged (./merge.ts),
 * snapshots expired every 100th sequence number (./expire.ts), and after the commit succeeded the
 * manifest lists, manifests and old metadata files nothing names any more deleted. Never writes or
 * deletes data files, never touches tidemark's state.
 */
import { randomBytes } from 'node:crypto';
import { SinkError } from '../contracts/errors.js';
import type { CommitResult, LoadedTable, RetryOptions, TableIdent } from './catalog.js';
import { type Catalog, commitWithRetry, identText } from './catalog.js';
import { deleteAfterCommit, expireOnCommit } from './expire.js';
import { EntryStatus, type IcebergDataFile, writeManifest } from './manifest.js';
import {
  type IcebergManifestFile,
  ManifestContent,
  type ManifestSummary,
  manifestFileOf,
  readManifestList,
  writeManifestList,
} from './manifest-list.js';
import { mergeOnAppend } from './merge.js';
import {
  type AppendOptions,
  appendSnapshot,
  type CommitIdentity,
  currentSnapshot,
  newSnapshotId,
  recordCommit,
} from './metadata.js';
import type {
  IcebergPartitionSpec,
  IcebergSchema,
  IcebergSnapshot,
  IcebergTableMetadata,
  SnapshotId,
} from './spec.js';
import { folderPath, folderUriPrefix, type TableFolder } from './table-folder.js';

/** How a staged manifest's name ends: `<commit id>-m0.avro` (`stageAppend`). */
export const STAGED_MANIFEST_SUFFIX = '-m0.avro';

/** What `applyAppend` did: the commit, and the clean-up after it. */
export interface AppendResult extends CommitResult {
  /** Manifest lists, manifests and metadata files deleted after the commit (URIs). */
  readonly deletedFiles: readonly string[];
  /**
   * Why the clean-up after a successful commit failed, if it did: the commit stands, the files
   * stay (unreferenced, for maintenance); the caller logs it.
   */
  readonly cleanupError?: unknown;
}

/** One tidemark commit's data files, listed in a manifest no snapshot references yet. */
export interface StagedAppend {
  readonly commit: CommitIdentity;
  /** The manifest's full URI, as manifest lists name it. */
  readonly manifestPath: string;
  readonly manifestLength: number;
  readonly summary: ManifestSummary;
  readonly records: number;
  readonly dataFiles: number;
  readonly filesSize: number;
}

/**
 * Step 1: writes the manifest of `dataFiles` (ADDED entries that inherit their snapshot and
 * sequence numbers from the snapshot that will add them) as
 * `<table>/metadata/<commitId>-m0.avro`. The commit id must be unique to the attempt (decision
 * 0024: the caller's attempt-unique name), so the manifest is never rewritten once a state may
 * name it.
 */
export async function stageAppend(
  folder: TableFolder,
  options: {
    readonly commit: CommitIdentity;
    readonly schema: IcebergSchema;
    readonly spec: IcebergPartitionSpec;
    readonly dataFiles: readonly IcebergDataFile[];
  },
): Promise<StagedAppend> {
  if (!/^[A-Za-z0-9._-]+$/.test(options.commit.commitId))
    throw new SinkError(
      'SINK_WRITER_NAME',
      folder.key,
      `commit id ${JSON.stringify(options.commit.commitId)} cannot name a manifest (letters, digits, '.', '_' and '-' only; a bug)`,
    );
  const { bytes, summary } = writeManifest({
    schema: options.schema,
    spec: options.spec,
    entries: options.dataFiles.map((data_file) => ({ status: EntryStatus.ADDED, data_file })),
  });
  const key = folderPath(folder, `metadata/${options.commit.commitId}${STAGED_MANIFEST_SUFFIX}`);
  // Never over a manifest a state may already name (the same attempt-unique name twice is a bug).
  if ((await folder.store.putIfAbsent(key, bytes)) === 'exists')
    throw new SinkError(
      'SINK_OBJECT_EXISTS',
      folder.key,
      `refused to overwrite the staged manifest ${folder.store.uri(key)}: its name is unique per attempt, so another process staged it with the same lease fence; nothing was written (a bug: report it)`,
    );
  return {
    commit: options.commit,
    manifestPath: folder.store.uri(key),
    manifestLength: bytes.length,
    summary,
    records: options.dataFiles.reduce((n, f) => n + f.record_count, 0),
    dataFiles: options.dataFiles.length,
    filesSize: options.dataFiles.reduce((n, f) => n + f.file_size_in_bytes, 0),
  };
}

/** How a snapshot commit runs: its clock, what it sets beside the snapshot, its retries and base. */
export interface SnapshotCommitOptions {
  readonly nowMs: () => number;
  /** Table properties set in the same commit. */
  readonly properties?: Readonly<Record<string, string>>;
  /** More summary entries of the snapshot. */
  readonly summary?: Readonly<Record<string, string>>;
  readonly retry?: RetryOptions;
  /** The table as the caller last saw it: the first attempt's base (./catalog.ts `RetryOptions.base`). */
  readonly base?: LoadedTable;
}

/**
 * Step 3: adds the staged manifest to the table through `catalog`, as one snapshot on `main`:
 * a no-op when the table already has the commit (an earlier call, or another process applying
 * the same decided commit), rebased onto whatever the table became on a conflict
 * (./catalog.ts `commitWithRetry`). `properties` are set in the same commit (the writer's
 * position, for display and for a lost state).
 */
export function applyAppend(
  catalog: Catalog,
  ident: TableIdent,
  folder: TableFolder,
  staged: StagedAppend,
  options: SnapshotCommitOptions,
): Promise<AppendResult> {
  return commitSnapshot(catalog, ident, folder, staged.commit, options, (at) => ({
    ours: manifestFileOf(staged.manifestPath, staged.manifestLength, staged.summary, at),
    added: { dataFiles: staged.dataFiles, records: staged.records, filesSize: staged.filesSize },
  }));
}

/** What `commitSnapshot`'s `adds` returns for a commit that changes no row: recorded, no snapshot. */
export const RECORD_ONLY = Symbol('record the commit only');

/** The base a snapshot is built on, and the ids the new snapshot takes there. */
export interface SnapshotBase {
  readonly base: IcebergTableMetadata;
  readonly parent: IcebergSnapshot | undefined;
  /** The parent's manifests (none for a table without a snapshot). */
  readonly parentManifests: readonly IcebergManifestFile[];
  readonly snapshotId: SnapshotId;
  readonly sequenceNumber: number;
}

/** What one kind of snapshot adds on a base (./append.ts appends, ./row-delta.ts row deltas). */
export interface SnapshotAdds {
  /** The staged manifest the snapshot adds (merged with the parent's small ones of its spec). */
  readonly ours: IcebergManifestFile;
  /** Other staged manifests it adds, carried as they are (a row delta's delete manifest). */
  readonly besides?: readonly IcebergManifestFile[];
  readonly operation?: AppendOptions['operation'];
  readonly added: AppendOptions['added'];
}

/**
 * One snapshot on `main` through `commitWithRetry`, for every kind of tidemark snapshot that adds
 * staged manifests: per attempt, `adds` says what this base gets (it may throw to refuse the
 * base; or `RECORD_ONLY` when the commit changes no row there: it is then recorded in the table's
 * properties with no snapshot, `metadata.ts` `recordCommit`, through the same compare-and-swap;
 * or undefined when there is nothing to commit at all: no commit, `already-committed`); then the parent's live manifests carried on, small manifests merged, a manifest list of
 * the attempt's own, the snapshot and its summary, expiry; after the commit, the clean-up.
 */
export async function commitSnapshot(
  catalog: Catalog,
  ident: TableIdent,
  folder: TableFolder,
  commit: CommitIdentity,
  options: SnapshotCommitOptions,
  adds: (
    at: SnapshotBase,
  ) => SnapshotAdds | typeof RECORD_ONLY | undefined | Promise<SnapshotAdds | typeof RECORD_ONLY | undefined>,
): Promise<AppendResult> {
  // The expired manifest lists of the attempt that was last built: the committed one, if any.
  let expiredLists: readonly string[] = [];
  const result = await commitWithRetry(
    catalog,
    ident,
    commit,
    async (current: LoadedTable) => {
      const base = current.metadata;
      const parent = currentSnapshot(base);
      const snapshotId = newSnapshotId(base);
      const sequenceNumber = base['last-sequence-number'] + 1;
      const parentList = parent ? await parentManifests(folder, ident, parent['manifest-list']) : [];
      const add = await adds({ base, parent, parentManifests: parentList, snapshotId, sequenceNumber });
      if (add === undefined) return 'already-committed';
      if (add === RECORD_ONLY)
        return recordCommit(base, commit, {
          nowMs: options.nowMs(),
          ...(options.properties ? { properties: options.properties } : {}),
        });
      const merged = await mergeOnAppend(folder, base, {
        ours: add.ours,
        inherited: [...(add.besides ?? []), ...carriedOn(parentList)],
        snapshotId,
        sequenceNumber,
        commitId: commit.commitId,
      });
      const manifestListPath = await putManifestList(catalog, folder, {
        snapshotId,
        parentSnapshotId: parent?.['snapshot-id'],
        sequenceNumber,
        commitId: commit.commitId,
        manifests: merged.manifests,
      });
      const nowMs = options.nowMs();
      const appended = appendSnapshot(base, {
        snapshotId,
        manifestListPath,
        ...(add.operation ? { operation: add.operation } : {}),
        added: add.added,
        commit,
        nowMs,
        ...(options.properties ? { properties: options.properties } : {}),
        summary: { ...options.summary, ...mergeSummary(merged) },
      });
      const expiry = expireOnCommit(appended, nowMs);
      expiredLists = expiry?.manifestLists ?? [];
      return expiry?.metadata ?? appended;
    },
    options.base ? { ...options.retry, base: options.base } : options.retry,
  );
  return cleanUpAfter(folder, result, expiredLists);
}

/** The parent's manifests a new snapshot carries on: a data manifest with no live file left (a delete snapshot's DELETED entries) is history. */
function carriedOn(parentList: readonly IcebergManifestFile[]): IcebergManifestFile[] {
  return parentList.filter(
    (m) => m.content !== ManifestContent.DATA || m.added_files_count + m.existing_files_count > 0,
  );
}

/**
 * Writes a new snapshot's manifest list under a name of its own per attempt (this base's parent
 * and sequence number are in it) and returns its URI. Its folder entry is left to the catalog
 * commit when that commit syncs the same folder (a local `file` catalog).
 */
async function putManifestList(
  catalog: Catalog,
  folder: TableFolder,
  list: {
    readonly snapshotId: bigint;
    readonly parentSnapshotId: bigint | undefined;
    readonly sequenceNumber: number;
    readonly commitId: string;
    readonly manifests: readonly IcebergManifestFile[];
  },
): Promise<string> {
  const key = folderPath(
    folder,
    `metadata/snap-${list.snapshotId}-${randomBytes(4).toString('hex')}-${list.commitId}.avro`,
  );
  await folder.store.put(
    key,
    writeManifestList({
      snapshotId: list.snapshotId,
      parentSnapshotId: list.parentSnapshotId,
      sequenceNumber: list.sequenceNumber,
      manifests: list.manifests,
    }),
    // Reachable only through the metadata file whose creation syncs the same folder.
    { syncFolder: catalog.commitSyncsMetadataFolder !== true },
  );
  return folder.store.uri(key);
}

/** The snapshot summary's entries of a merge on append (none when nothing was merged). */
function mergeSummary(merged: {
  readonly created?: unknown;
  readonly replaced: readonly unknown[];
}): Readonly<Record<string, string>> {
  return merged.created === undefined
    ? {}
    : { 'manifests-created': '1', 'manifests-replaced': String(merged.replaced.length) };
}

/**
 * After a commit: the expired manifest lists, the manifests only they named and the metadata files
 * the log dropped, deleted; a failure of that is returned (the commit stands), never thrown.
 */
async function cleanUpAfter(
  folder: TableFolder,
  result: CommitResult,
  expiredLists: readonly string[],
): Promise<AppendResult> {
  if (result.status !== 'committed') return { ...result, deletedFiles: [] };
  try {
    const deletedFiles = await deleteAfterCommit(
      folder,
      result.table.metadata,
      expiredLists,
      result.droppedMetadataFiles,
    );
    return { ...result, deletedFiles };
  } catch (cleanupError) {
    return { ...result, deletedFiles: [], cleanupError };
  }
}

/**
 * The manifests of a snapshot (the parent of the one being built), read from its manifest list
 * under the table's folder.
 * @throws SinkError `ICEBERG_METADATA_INVALID` when the list is outside the folder or missing.
 */
export async function parentManifests(
  folder: TableFolder,
  ident: TableIdent,
  listPath: string,
): Promise<IcebergManifestFile[]> {
  const prefix = folderUriPrefix(folder);
  if (!listPath.startsWith(prefix))
    throw new SinkError(
      'ICEBERG_METADATA_INVALID',
      identText(ident),
      `the current snapshot of ${identText(ident)} names its manifest list ${listPath}, outside the table's folder ${prefix}: tidemark reads manifests only there`,
    );
  const bytes = await folder.store.get(folderPath(folder, listPath.slice(prefix.length)));
  if (bytes === undefined)
    throw new SinkError(
      'ICEBERG_METADATA_INVALID',
      identText(ident),
      `the manifest list ${listPath} of ${identText(ident)}'s current snapshot is missing: restore it, or reset the table`,
    );
  return readManifestList(bytes).manifests;
}
