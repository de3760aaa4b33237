/**
 * Current-state commits (issue 31, docs/decisions/0026-current-state-delete-form.md): the commit
 * of an upsert table that leaves it holding exactly the latest row per primary key. The write
 * collapses its rows per key and stages two things (decision 0024, step 1): the data file of the
 * surviving rows that are not deletes (an ordinary staged append, ./append.ts), and a "keys file",
 * `metadata/<commit id>-k0.parquet`, holding the key columns of EVERY key the write touched
 * (upserted or deleted), with the table's field ids. The catalog commit (step 3, `applyCurrentState`)
 * finds those keys' live rows in the table it is built on (./key-lookup.ts) and writes position
 * delete files for them, in the same snapshot as the data file: one row per key, deletes applied.
 *
 * Owns: the keys file's name and encoding, the table property that marks a table current-state
 * (`tidemark.table-kind`), the per-attempt position delete files and delete manifest, and the
 * clean-up of attempts that lost a conflict. The lookup runs against the very base each attempt
 * is built on, so a rebase after a conflict (another writer, a compaction) looks the keys up again
 * in the table as it is then; there is no window in which positions found in one snapshot are
 * applied to another. Recovery applying the state's pending commit later does the same.
 *
 * Invariants: the keys file is deleted once the table has the commit (it is read only to build
 * the commit); position delete files are named by commit id AND attempt (the snapshot id the
 * attempt would create), under `deletes/` in the table's folder, written only-if-absent; a commit
 * that finds no live row adds its data file alone (an `append`), and one that adds nothing and
 * deletes nothing makes no snapshot: it is recorded in the table's properties, through the same
 * compare-and-swap (so "nothing to delete" is never decided on a stale base). Never deletes a file an attempt that may have
 * committed wrote: only those of attempts a later attempt replaced.
 */
import type { RecordBatch } from 'apache-arrow';
import { SinkError } from '../contracts/errors.js';
import { encodeParquet } from '../sink/parquet-writer.js';
import {
  type AppendResult,
  commitSnapshot,
  RECORD_ONLY,
  type SnapshotBase,
  type SnapshotCommitOptions,
  type StagedAppend,
} from './append.js';
import type { AvroValue } from './avro-schema.js';
import { type Catalog, identText, type TableIdent } from './catalog.js';
import {
  currentSchemaOf,
  type KeyLookupCache,
  type KeyLookupStats,
  type KeyValue,
  lookupKeys,
  readKeyTuples,
} from './key-lookup.js';
import { EntryStatus, type IcebergDataFile, writeManifest } from './manifest.js';
import { type IcebergManifestFile, manifestFileOf } from './manifest-list.js';
import type { CommitIdentity } from './metadata.js';
import { type PositionDelete, writePositionDeletes } from './position-deletes.js';
import type { IcebergPartitionSpec, IcebergTableMetadata } from './spec.js';
import { folderPath, keyInFolder, type TableFolder } from './table-folder.js';

/** How a staged keys file's name ends: `metadata/<commit id>-k0.parquet`. */
export const STAGED_KEYS_SUFFIX = '-k0.parquet';

/** The table property that says what a tidemark table holds. */
export const TABLE_KIND_PROPERTY = 'tidemark.table-kind';

/**
 * `current-state`: one row per key, deletes applied (an upsert table, issue 31); `change-log`:
 * every change a row of its own (an append table, a history table). A table without the property
 * was created before issue 31, as a change log.
 */
export type TableKind = 'current-state' | 'change-log';

/** What `metadata` says the table holds; undefined for a table from before the property. */
export function tableKindOf(metadata: IcebergTableMetadata): TableKind | undefined {
  const kind = metadata.properties[TABLE_KIND_PROPERTY];
  return kind === 'current-state' || kind === 'change-log' ? kind : undefined;
}

/** The staged keys file of a commit: where it is, its size, the key columns it holds (by name). */
export interface StagedKeys {
  readonly uri: string;
  readonly length: number;
  /** Keys it holds (rows). */
  readonly rows: number;
  readonly columns: readonly string[];
}

/** A current-state commit as the catalog commit takes it: its data manifest (if any rows survive) and its keys. */
export interface StagedCurrentState {
  readonly commit: CommitIdentity;
  readonly data?: StagedAppend;
  readonly keys: StagedKeys;
}

export interface CurrentStateResult extends AppendResult {
  /** The last attempt's lookup (absent when the table had no snapshot or already had the commit). */
  readonly lookup?: KeyLookupStats;
  /** Rows the commit deleted by position. */
  readonly positionDeletes: number;
}

/** The keys file's bytes: `records` are lake records (field ids on their fields) of the key columns only. */
export function encodeKeys(records: readonly RecordBatch[]): Uint8Array {
  return encodeParquet(records, { compression: 'zstd' });
}

/** Where `commitId`'s keys file goes in the table's folder. */
export function stagedKeysKey(folder: TableFolder, commitId: string): string {
  return folderPath(folder, `metadata/${commitId}${STAGED_KEYS_SUFFIX}`);
}

/**
 * Writes the keys file of `commitId` (only if absent: its name is unique per attempt) and
 * returns it as the pending commit records it.
 */
export async function stageKeys(
  folder: TableFolder,
  commitId: string,
  bytes: Uint8Array,
  rows: number,
  columns: readonly string[],
): Promise<StagedKeys> {
  const key = stagedKeysKey(folder, commitId);
  if ((await folder.store.putIfAbsent(key, bytes)) === 'exists')
    throw new SinkError(
      'SINK_OBJECT_EXISTS',
      folder.key,
      `refused to overwrite the staged keys file ${folder.store.uri(key)}: its name is unique per attempt, so another process staged it with the same lease fence; nothing was written (a bug: report it)`,
    );
  return { uri: folder.store.uri(key), length: bytes.length, rows, columns };
}

/** A row to delete by position, with the partition of the data file it is in. */
export interface RowToDelete {
  readonly filePath: string;
  readonly pos: number;
  readonly partition: Readonly<Record<string, AvroValue>>;
}

/** An attempt's position deletes, staged: the delete manifest's list entry and what it adds. */
export interface AttemptDeletes {
  readonly manifest: IcebergManifestFile;
  readonly files: number;
  readonly rows: number;
  readonly bytes: number;
}

/**
 * Writes `rows` as position delete files of one attempt, one per partition of the data files they
 * name (the spec scopes position deletes so), `deletes/<attempt>.<n>.parquet`, and their delete
 * manifest `metadata/<attempt>-d.avro`, all only-if-absent; each key written is pushed on
 * `written` before it is written (the caller deletes a superseded attempt's). `attempt` is unique
 * to the attempt: a commit id and the snapshot id the attempt would create.
 */
export async function writeAttemptDeletes(
  folder: TableFolder,
  ident: TableIdent,
  at: SnapshotBase,
  attempt: string,
  rows: readonly RowToDelete[],
  written: string[],
): Promise<AttemptDeletes> {
  const groups = new Map<
    string,
    { partition: Readonly<Record<string, AvroValue>>; rows: PositionDelete[] }
  >();
  for (const { filePath, pos, partition } of rows) {
    const k = partitionKey(partition);
    const group = groups.get(k) ?? { partition, rows: [] };
    groups.set(k, group);
    group.rows.push({ filePath, pos });
  }
  const deleteFiles: IcebergDataFile[] = [];
  let i = 0;
  for (const group of groups.values()) {
    const key = folderPath(folder, `deletes/${attempt}.${i++}.parquet`);
    written.push(key);
    deleteFiles.push(await writePositionDeletes(folder, key, group.rows, group.partition));
  }
  const { bytes, summary } = writeManifest({
    schema: currentSchemaOf(ident, at.base),
    spec: defaultSpecOf(at.base),
    content: 'deletes',
    entries: deleteFiles.map((data_file) => ({ status: EntryStatus.ADDED, data_file })),
  });
  const manifestKey = folderPath(folder, `metadata/${attempt}-d.avro`);
  written.push(manifestKey);
  if ((await folder.store.putIfAbsent(manifestKey, bytes)) === 'exists')
    throw new SinkError(
      'SINK_OBJECT_EXISTS',
      identText(ident),
      `refused to overwrite the delete manifest ${folder.store.uri(manifestKey)}: its name is unique per attempt (a bug: report it)`,
    );
  return {
    manifest: manifestFileOf(folder.store.uri(manifestKey), bytes.length, summary, at),
    files: deleteFiles.length,
    rows: rows.length,
    bytes: deleteFiles.reduce((n, f) => n + f.file_size_in_bytes, 0),
  };
}

/**
 * Deletes `keys` (files of attempts that never committed, a served keys file) after a commit:
 * returns the clean-up error to report, `previous` first; the commit stands either way.
 */
export async function deleteLeftovers(
  folder: TableFolder,
  keys: readonly string[],
  previous: unknown,
): Promise<unknown> {
  if (keys.length === 0) return previous;
  try {
    await folder.store.delete([...keys]);
    return previous;
  } catch (e) {
    return previous ?? e;
  }
}

/** The name of an attempt's files: the commit id and the snapshot id the attempt would create. */
export function attemptName(commitId: string, at: SnapshotBase): string {
  return `${commitId}.s${at.snapshotId.toString(16)}`;
}

function defaultSpecOf(meta: IcebergTableMetadata): IcebergPartitionSpec {
  const spec = meta['partition-specs'].find((s) => s['spec-id'] === meta['default-spec-id']);
  if (!spec) throw new Error(`table metadata has no default partition spec ${meta['default-spec-id']}`);
  return spec;
}

/** A partition tuple as a map key (bigints spelled out, byte arrays as hex). */
function partitionKey(partition: Readonly<Record<string, AvroValue>>): string {
  return JSON.stringify(partition, (_k, v: unknown) =>
    typeof v === 'bigint' ? `${v}n` : v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v,
  );
}

/**
 * Step 3 of a current-state commit: one snapshot that adds the staged data file(s) and deletes, by
 * position, every live row the table it is built on holds for the staged keys. A no-op when the
 * table already has the commit; rebased (looked up again) on a conflict. `properties` are set in
 * the same commit.
 *
 * @throws SinkError `ICEBERG_METADATA_INVALID` when the keys file or a file the table names is
 *   missing; and what `commitWithRetry` throws.
 */
export async function applyCurrentState(
  catalog: Catalog,
  ident: TableIdent,
  folder: TableFolder,
  staged: StagedCurrentState,
  options: SnapshotCommitOptions & {
    /** What earlier lookups of this writer read of the table's immutable files (./key-lookup.ts). */
    readonly cache?: KeyLookupCache;
  },
): Promise<CurrentStateResult> {
  const { commit, data, keys } = staged;
  // Key values read from a key column of a lookup type: int, long, string, decimal, date, uuid.
  let tuples: KeyValue[][] | undefined;
  let lookup: KeyLookupStats | undefined;
  let positionDeletes = 0;
  // Files each attempt wrote, in attempt order: all but the last are garbage once the call returns.
  const attempts: string[][] = [];
  const result = await commitSnapshot(catalog, ident, folder, commit, options, async (at) => {
    const written: string[] = [];
    attempts.push(written);
    const dataManifest = data
      ? manifestFileOf(data.manifestPath, data.manifestLength, data.summary, at)
      : undefined;
    const addedData = data
      ? { dataFiles: data.dataFiles, records: data.records, filesSize: data.filesSize }
      : { dataFiles: 0, records: 0, filesSize: 0 };
    positionDeletes = 0;
    if (at.parent === undefined) return dataManifest ? { ours: dataManifest, added: addedData } : RECORD_ONLY;
    const schema = currentSchemaOf(ident, at.base);
    tuples ??= (await readKeyTuples(
      folder,
      ident,
      keys.uri,
      keys.length,
      schema,
      keys.columns,
    )) as KeyValue[][];
    const found = await lookupKeys(
      folder,
      ident,
      { metadata: at.base, metadataLocation: '', version: '' },
      keys.columns,
      tuples,
      options.cache,
    );
    lookup = found.stats;
    const rows: RowToDelete[] = [];
    for (const locations of found.rows.values())
      for (const { file_path, pos } of locations)
        rows.push({ filePath: file_path, pos, partition: found.files.get(file_path)?.partition ?? {} });
    if (rows.length === 0) return dataManifest ? { ours: dataManifest, added: addedData } : RECORD_ONLY;
    const d = await writeAttemptDeletes(folder, ident, at, attemptName(commit.commitId, at), rows, written);
    positionDeletes = d.rows;
    const deletes = d.manifest;
    return {
      ours: dataManifest ?? deletes,
      besides: dataManifest ? [deletes] : [],
      operation: dataManifest ? 'overwrite' : 'delete',
      added: {
        ...addedData,
        filesSize: addedData.filesSize + d.bytes,
        deleteFiles: d.files,
        positionDeleteFiles: d.files,
        positionDeletes,
      },
    };
  });
  // Attempts a later attempt replaced never committed; the last one may have (even when the
  // catalog's reply was lost), so its files stay. The keys file has served once the table has the
  // commit (a later apply of it finds the commit and reads no keys); a catalog that owns its
  // folder removes unreferenced files itself.
  const superseded = attempts.slice(0, -1).flat();
  if (!folder.catalogOwnsFiles) {
    const key = keyInFolder(folder, keys.uri);
    if (key !== undefined) superseded.push(key);
  }
  const cleanupError = await deleteLeftovers(folder, superseded, result.cleanupError);
  return {
    ...result,
    ...(cleanupError === undefined ? {} : { cleanupError }),
    ...(lookup ? { lookup } : {}),
    positionDeletes: result.status === 'committed' ? positionDeletes : 0,
  };
}
