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
 * commit id in the summary and the writer's property, ./metadata.ts `appendSnapshot`). Never
 * writes or deletes data files, never touches tidemark's state.
 */
import { randomBytes } from 'node:crypto';
import { SinkError } from '../contracts/errors.js';
import type { ObjectStore } from '../sink/object-store.js';
import type { CommitResult, LoadedTable, RetryOptions, TableIdent } from './catalog.js';
import { type Catalog, commitWithRetry, identText } from './catalog.js';
import {
  EntryStatus,
  type IcebergDataFile,
  type IcebergManifestFile,
  type ManifestSummary,
  manifestFileOf,
  readManifestList,
  writeManifest,
  writeManifestList,
} from './manifest.js';
import { appendSnapshot, type CommitIdentity, currentSnapshot, newSnapshotId } from './metadata.js';
import type { IcebergPartitionSpec, IcebergSchema } from './spec.js';

/** Where a table's files are: its folder as a key of the lake's object store. */
export interface TableFolder {
  readonly store: ObjectStore;
  /** The table's folder, e.g. `lake/public.orders` (no trailing `/`). */
  readonly key: string;
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
  const key = `${folder.key}/metadata/${options.commit.commitId}-m0.avro`;
  await folder.store.put(key, bytes);
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
  options: {
    readonly nowMs: () => number;
    readonly properties?: Readonly<Record<string, string>>;
    readonly summary?: Readonly<Record<string, string>>;
    readonly retry?: RetryOptions;
  },
): Promise<CommitResult> {
  return commitWithRetry(
    catalog,
    ident,
    staged.commit,
    async (current: LoadedTable) => {
      const base = current.metadata;
      const parent = currentSnapshot(base);
      const snapshotId = newSnapshotId(base);
      const sequenceNumber = base['last-sequence-number'] + 1;
      const ours = manifestFileOf(staged.manifestPath, staged.manifestLength, staged.summary, {
        snapshotId,
        sequenceNumber,
      });
      const inherited = parent ? await parentManifests(folder, ident, parent['manifest-list']) : [];
      // A list per attempt: this base's parent and sequence number are in it.
      const listKey = `${folder.key}/metadata/snap-${snapshotId}-${randomBytes(4).toString('hex')}-${staged.commit.commitId}.avro`;
      await folder.store.put(
        listKey,
        writeManifestList({
          snapshotId,
          parentSnapshotId: parent?.['snapshot-id'],
          sequenceNumber,
          manifests: [ours, ...inherited],
        }),
      );
      return appendSnapshot(base, {
        snapshotId,
        manifestListPath: folder.store.uri(listKey),
        added: { dataFiles: staged.dataFiles, records: staged.records, filesSize: staged.filesSize },
        commit: staged.commit,
        nowMs: options.nowMs(),
        ...(options.properties ? { properties: options.properties } : {}),
        ...(options.summary ? { summary: options.summary } : {}),
      });
    },
    options.retry,
  );
}

/** The manifests of the parent snapshot, read from its manifest list under the table's folder. */
async function parentManifests(
  folder: TableFolder,
  ident: TableIdent,
  listPath: string,
): Promise<IcebergManifestFile[]> {
  const prefix = `${folder.store.uri(folder.key)}/`;
  if (!listPath.startsWith(prefix))
    throw new SinkError(
      'ICEBERG_METADATA_INVALID',
      identText(ident),
      `the current snapshot of ${identText(ident)} names its manifest list ${listPath}, outside the table's folder ${prefix}: tidemark reads manifests only there`,
    );
  const bytes = await folder.store.get(`${folder.key}/${listPath.slice(prefix.length)}`);
  if (bytes === undefined)
    throw new SinkError(
      'ICEBERG_METADATA_INVALID',
      identText(ident),
      `the manifest list ${listPath} of ${identText(ident)}'s current snapshot is missing: restore it, or reset the table`,
    );
  return readManifestList(bytes).manifests;
}
