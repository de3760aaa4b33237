/**
 * A row delta on an Iceberg table (Iceberg Java's `RowDelta`): one snapshot that adds data files
 * and position delete files together, in the two halves decision 0024 splits a commit into, as
 * ./append.ts does for appends: `stageRowDelta` (step 1: a data manifest and a delete manifest,
 * named by the attempt-unique commit id, visible to no reader) and `applyRowDelta` (step 3: the
 * catalog commit, once, however often it is called). Library groundwork for issue 31
 * (docs/decisions/0026-current-state-delete-form.md); nothing in the sync calls it yet.
 *
 * Owns: the snapshot's manifest list (the staged manifests plus the parent's, small data
 * manifests merged by ./merge.ts; delete manifests are carried as they are), its operation
 * (`overwrite` when it adds data, `delete` when it only deletes), its delete-file counters, and
 * the check that every data file its deletes reference is still live in the base it is built on.
 *
 * Sequence numbers: the staged entries are ADDED and inherit the snapshot's sequence number, and a
 * position delete applies to data files whose data sequence number is lower than or equal to its
 * own: so a row delta may delete rows of data files it adds itself, as well as older rows.
 *
 * Conflicts (0026 "Conflicts", amending 0024): an append rebases blindly, a row delta does not.
 * Its positions were resolved against one snapshot (`resolvedAgainst`); when the base it is built
 * on differs, every referenced data file (other than its own) must still be live there, else the
 * commit fails with ICEBERG_DELETE_TARGET_GONE instead of applying deletes to nothing (a row a
 * compaction rewrote elsewhere would survive: a ghost). The caller re-resolves those keys.
 * Never writes or deletes data files, never touches tidemark's state.
 */
import { SinkError } from '../contracts/errors.js';
import {
  type AppendResult,
  commitSnapshot,
  type SnapshotCommitOptions,
  STAGED_MANIFEST_SUFFIX,
} from './append.js';
import type { TableIdent } from './catalog.js';
import { type Catalog, identText } from './catalog.js';
import { EntryStatus, FileContent, type IcebergDataFile, liveEntries, writeManifest } from './manifest.js';
import {
  type IcebergManifestFile,
  ManifestContent,
  type ManifestSummary,
  manifestFileOf,
} from './manifest-list.js';
import type { CommitIdentity } from './metadata.js';
import type { IcebergPartitionSpec, IcebergSchema } from './spec.js';
import { folderPath, keyInFolder, type TableFolder } from './table-folder.js';

/** How a staged delete manifest's name ends: `<commit id>-d0.avro` (`stageRowDelta`). */
export const STAGED_DELETE_MANIFEST_SUFFIX = '-d0.avro';

/** A staged manifest: its URI, length and the summary its list entry is built from. */
export interface StagedManifest {
  readonly path: string;
  readonly length: number;
  readonly summary: ManifestSummary;
}

/** One tidemark commit's added data files and position delete files, in manifests no snapshot references yet. */
export interface StagedRowDelta {
  readonly commit: CommitIdentity;
  /** Absent when the commit adds no data file (a `delete` snapshot). */
  readonly dataManifest?: StagedManifest;
  readonly deleteManifest: StagedManifest;
  /** The snapshot the delete positions were resolved against (absent: an empty table). */
  readonly resolvedAgainst?: bigint;
  /** Data files the deletes name that the commit does not add itself: must be live in the base. */
  readonly referencedDataFiles: readonly string[];
  readonly records: number;
  readonly dataFiles: number;
  readonly deleteFiles: number;
  readonly positionDeletes: number;
  /** Bytes of the added data and delete files. */
  readonly filesSize: number;
}

function checkCommitId(folder: TableFolder, commitId: string): void {
  if (!/^[A-Za-z0-9._-]+$/.test(commitId))
    throw new SinkError(
      'SINK_WRITER_NAME',
      folder.key,
      `commit id ${JSON.stringify(commitId)} cannot name a manifest (letters, digits, '.', '_' and '-' only; a bug)`,
    );
}

async function putManifest(folder: TableFolder, name: string, bytes: Uint8Array): Promise<string> {
  const key = folderPath(folder, `metadata/${name}`);
  if ((await folder.store.putIfAbsent(key, bytes)) === 'exists')
    throw new SinkError(
      'SINK_OBJECT_EXISTS',
      folder.key,
      `refused to overwrite the staged manifest ${folder.store.uri(key)}: its name is unique per attempt, so another process staged it with the same lease fence; nothing was written (a bug: report it)`,
    );
  return folder.store.uri(key);
}

/**
 * Step 1: writes `<table>/metadata/<commitId>-m0.avro` listing `dataFiles` (when there are any)
 * and `<commitId>-d0.avro` listing `deleteFiles` (position delete files, ./position-deletes.ts),
 * all ADDED entries that inherit their snapshot and sequence numbers. `referencedDataFiles`: the
 * data files the deletes' rows name (`referenced_data_file`, or the file's rows); those the
 * commit adds itself are left out of the conflict check. `resolvedAgainst`: the snapshot id the
 * positions were found in.
 */
export async function stageRowDelta(
  folder: TableFolder,
  options: {
    readonly commit: CommitIdentity;
    readonly schema: IcebergSchema;
    readonly spec: IcebergPartitionSpec;
    readonly dataFiles: readonly IcebergDataFile[];
    readonly deleteFiles: readonly IcebergDataFile[];
    readonly referencedDataFiles: readonly string[];
    readonly resolvedAgainst?: bigint;
  },
): Promise<StagedRowDelta> {
  checkCommitId(folder, options.commit.commitId);
  if (options.deleteFiles.length === 0)
    throw new RangeError('a row delta without delete files is an append (./append.ts stageAppend)');
  for (const f of options.deleteFiles)
    if (f.content !== FileContent.POSITION_DELETES)
      throw new RangeError(
        `a row delta adds position delete files only: ${f.file_path} has content ${f.content}`,
      );
  let dataManifest: StagedManifest | undefined;
  if (options.dataFiles.length > 0) {
    const { bytes, summary } = writeManifest({
      schema: options.schema,
      spec: options.spec,
      entries: options.dataFiles.map((data_file) => ({ status: EntryStatus.ADDED, data_file })),
    });
    const path = await putManifest(folder, `${options.commit.commitId}${STAGED_MANIFEST_SUFFIX}`, bytes);
    dataManifest = { path, length: bytes.length, summary };
  }
  const { bytes, summary } = writeManifest({
    schema: options.schema,
    spec: options.spec,
    content: 'deletes',
    entries: options.deleteFiles.map((data_file) => ({ status: EntryStatus.ADDED, data_file })),
  });
  const path = await putManifest(folder, `${options.commit.commitId}${STAGED_DELETE_MANIFEST_SUFFIX}`, bytes);
  const own = new Set(options.dataFiles.map((f) => f.file_path));
  const sum = (files: readonly IcebergDataFile[], f: (d: IcebergDataFile) => number) =>
    files.reduce((n, d) => n + f(d), 0);
  return {
    commit: options.commit,
    ...(dataManifest ? { dataManifest } : {}),
    deleteManifest: { path, length: bytes.length, summary },
    ...(options.resolvedAgainst === undefined ? {} : { resolvedAgainst: options.resolvedAgainst }),
    referencedDataFiles: [...new Set(options.referencedDataFiles)].filter((p) => !own.has(p)).sort(),
    records: sum(options.dataFiles, (d) => d.record_count),
    dataFiles: options.dataFiles.length,
    deleteFiles: options.deleteFiles.length,
    positionDeletes: sum(options.deleteFiles, (d) => d.record_count),
    filesSize: sum([...options.dataFiles, ...options.deleteFiles], (d) => d.file_size_in_bytes),
  };
}

/** The paths of the live data files the manifests list (ADDED or EXISTING entries of data manifests). */
async function liveDataFiles(
  folder: TableFolder,
  ident: TableIdent,
  manifests: readonly IcebergManifestFile[],
): Promise<Set<string>> {
  const read = [];
  for (const m of manifests) {
    if (m.content !== ManifestContent.DATA) continue;
    const key = keyInFolder(folder, m.manifest_path);
    const bytes = key === undefined ? undefined : await folder.store.get(key);
    if (bytes === undefined)
      throw new SinkError(
        'ICEBERG_METADATA_INVALID',
        identText(ident),
        `the manifest ${m.manifest_path} of ${identText(ident)}'s current snapshot is missing or outside the table's folder: restore it, or reset the table`,
      );
    read.push({ manifest: m, bytes });
  }
  return new Set(liveEntries(read).map((e) => e.data_file.file_path));
}

/**
 * Step 3: adds the staged manifests to the table through `catalog`, as one snapshot on `main`
 * (operation `overwrite`, or `delete` when no data is added): a no-op when the table already has
 * the commit, rebased onto whatever the table became on a conflict, provided every referenced
 * data file is still live there. `properties` are set in the same commit.
 *
 * @throws SinkError `ICEBERG_DELETE_TARGET_GONE` when the base the snapshot would be built on is
 *   not the one the positions were resolved against and a referenced data file is no longer live
 *   in it (nothing is committed); and what `commitWithRetry` throws.
 */
export function applyRowDelta(
  catalog: Catalog,
  ident: TableIdent,
  folder: TableFolder,
  staged: StagedRowDelta,
  options: SnapshotCommitOptions,
): Promise<AppendResult> {
  return commitSnapshot(catalog, ident, folder, staged.commit, options, async (at) => {
    if (staged.referencedDataFiles.length > 0 && at.parent?.['snapshot-id'] !== staged.resolvedAgainst) {
      const live = await liveDataFiles(folder, ident, at.parentManifests);
      const gone = staged.referencedDataFiles.filter((p) => !live.has(p));
      if (gone.length > 0)
        throw new SinkError(
          'ICEBERG_DELETE_TARGET_GONE',
          identText(ident),
          `commit ${staged.commit.commitId} deletes rows of ${gone.length} data file(s) of ${identText(ident)} that are no longer in the table (rewritten or removed by another commit since snapshot ${staged.resolvedAgainst ?? 'none'}), e.g. ${gone[0]}: nothing was committed; its rows must be looked up again in the current table`,
        );
    }
    const ids = { snapshotId: at.snapshotId, sequenceNumber: at.sequenceNumber };
    const { deleteManifest: d, dataManifest: m } = staged;
    const deletes = manifestFileOf(d.path, d.length, d.summary, ids);
    const data = m ? manifestFileOf(m.path, m.length, m.summary, ids) : undefined;
    // merge.ts merges the parent's small data manifests of `ours`' spec; delete manifests are kept as they are.
    return {
      ours: data ?? deletes,
      besides: data ? [deletes] : [],
      operation: staged.dataFiles > 0 ? 'overwrite' : 'delete',
      added: {
        dataFiles: staged.dataFiles,
        records: staged.records,
        filesSize: staged.filesSize,
        deleteFiles: staged.deleteFiles,
        positionDeleteFiles: staged.deleteFiles,
        positionDeletes: staged.positionDeletes,
      },
    };
  });
}
