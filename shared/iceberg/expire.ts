/**
 * Snapshot expiry on commit, and the removal after the commit of the metadata files it leaves
 * unreferenced (issue 30 item 4). Retention is Iceberg's table properties:
 * `history.expire.max-snapshot-age-ms` (default 5 days) and `history.expire.min-snapshots-to-keep`
 * (default 1); the metadata files the metadata log drops (`write.metadata.previous-versions-max`,
 * ./metadata.ts) are deleted when `write.metadata.delete-after-commit.enabled` is true. Iceberg's
 * default for that is false; tidemark sets it true on the tables it creates
 * (`TIDEMARK_TABLE_PROPERTIES`), so a table's metadata folder stays bounded without a maintenance
 * job; a table created by someone else keeps its owner's choice.
 *
 * When: expiry runs in the commit's build when the new snapshot's sequence number is a multiple
 * of `EXPIRE_EVERY_COMMITS` (100). Every commit would do the same work per expired snapshot but
 * pay the post-commit scan (reading every kept snapshot's manifest list) each time; a count
 * bound alone would be checked by every writer differently. The sequence number is the table's
 * own counter, shared by all writers, so exactly one commit in 100 expires, whoever makes it, and
 * the retention is overshot by at most 99 snapshots.
 *
 * Invariants: nothing is deleted before the commit that drops its last reference succeeded;
 * a manifest list or manifest is deleted only when no snapshot of the committed metadata names
 * it (read from that metadata's manifest lists: a later commit builds on its current snapshot,
 * which is kept, so it can name nothing deleted here); only files under the table's folder are
 * deleted. Data files are never deleted here: an append-only change log never removes one
 * (maintenance, issue 32, does).
 */

import { readManifestList } from './manifest-list.js';
import { type Expiry, expireSnapshots, PREVIOUS_VERSIONS_MAX_PROPERTY } from './metadata.js';
import type { IcebergTableMetadata } from './spec.js';
import { folderPath, keyInFolder, type TableFolder } from './table-folder.js';

export const MAX_SNAPSHOT_AGE_PROPERTY = 'history.expire.max-snapshot-age-ms';
export const MIN_SNAPSHOTS_TO_KEEP_PROPERTY = 'history.expire.min-snapshots-to-keep';
export const DELETE_AFTER_COMMIT_PROPERTY = 'write.metadata.delete-after-commit.enabled';
/** Iceberg's defaults: 5 days, 1 snapshot. */
export const EXPIRE_DEFAULTS = { maxSnapshotAgeMs: 5 * 24 * 60 * 60 * 1000, minSnapshotsToKeep: 1 } as const;
/** Expiry runs on the commits whose sequence number is a multiple of this (see the header). */
export const EXPIRE_EVERY_COMMITS = 100;
/**
 * What tidemark sets on the tables it creates: old metadata files deleted after the commit that
 * drops them from the log (Iceberg's default is false), and a log of 10 instead of 100. A CDC table
 * commits once a minute: its metadata file holds every kept snapshot (~0.7 KB each, ~1 MB at a
 * day's 1,440), and 100 old copies of it were 94% of a table's metadata folder (docs/benchmarks.md,
 * "Issue 30: Iceberg": 569 MB per table at 5 days' retention).
 */
export const TIDEMARK_TABLE_PROPERTIES: Readonly<Record<string, string>> = {
  [DELETE_AFTER_COMMIT_PROPERTY]: 'true',
  [PREVIOUS_VERSIONS_MAX_PROPERTY]: '10',
};

function count(properties: Readonly<Record<string, string>>, key: string, fallback: number): number {
  const text = properties[key]?.trim();
  return text !== undefined && /^\d+$/.test(text) ? Number(text) : fallback;
}

/**
 * `built` (a commit's new metadata) with the snapshots its retention expires, when this commit is
 * one that expires (its sequence number a multiple of `every`); undefined otherwise.
 */
export function expireOnCommit(
  built: IcebergTableMetadata,
  nowMs: number,
  every: number = EXPIRE_EVERY_COMMITS,
): Expiry | undefined {
  if (built['last-sequence-number'] % every !== 0) return undefined;
  const age = count(built.properties, MAX_SNAPSHOT_AGE_PROPERTY, EXPIRE_DEFAULTS.maxSnapshotAgeMs);
  const keep = Math.max(
    1,
    count(built.properties, MIN_SNAPSHOTS_TO_KEEP_PROPERTY, EXPIRE_DEFAULTS.minSnapshotsToKeep),
  );
  const expiry = expireSnapshots(built, { olderThanMs: nowMs - age, retainLast: keep, nowMs });
  return expiry.expired.length === 0 ? undefined : expiry;
}

/** Whether the table deletes the metadata files its metadata log drops. */
export function deletesOldMetadata(metadata: IcebergTableMetadata): boolean {
  return metadata.properties[DELETE_AFTER_COMMIT_PROPERTY]?.trim().toLowerCase() === 'true';
}

/**
 * After a commit of `committed` succeeded: deletes the expired snapshots' manifest lists
 * (`expiredLists`) and the manifests they name that no snapshot of `committed` names, and the
 * `droppedMetadataFiles` when the table deletes old metadata. Only files under `folder`, and none
 * in a folder the catalog owns the files of (S3 Tables: its unreferenced-file removal does it).
 * Returns the URIs deleted.
 */
export async function deleteAfterCommit(
  folder: TableFolder,
  committed: IcebergTableMetadata,
  expiredLists: readonly string[],
  droppedMetadataFiles: readonly string[],
): Promise<string[]> {
  if (folder.catalogOwnsFiles) return [];
  const doomed = new Set<string>();
  if (expiredLists.length > 0) {
    const named = new Set(committed.snapshots.map((s) => s['manifest-list']));
    const candidates = new Set<string>();
    for (const list of expiredLists) {
      if (named.has(list)) continue;
      const key = keyInFolder(folder, list);
      if (key === undefined) continue;
      const bytes = await folder.store.get(key);
      if (bytes !== undefined)
        for (const m of readManifestList(bytes).manifests) candidates.add(m.manifest_path);
      doomed.add(list);
    }
    for (const list of named) {
      if (candidates.size === 0) break;
      const key = keyInFolder(folder, list);
      const bytes = key === undefined ? undefined : await folder.store.get(key);
      if (bytes === undefined) {
        // A kept list we cannot read might name any candidate: delete no manifest.
        candidates.clear();
        break;
      }
      for (const m of readManifestList(bytes).manifests) candidates.delete(m.manifest_path);
    }
    for (const m of candidates) doomed.add(m);
  }
  if (deletesOldMetadata(committed)) for (const f of droppedMetadataFiles) doomed.add(f);
  const keys: string[] = [];
  const uris: string[] = [];
  for (const uri of doomed) {
    const key = keyInFolder(folder, uri);
    if (key === undefined || !key.startsWith(folderPath(folder, 'metadata/'))) continue;
    keys.push(key);
    uris.push(uri);
  }
  // Nothing names them any more: one that comes back after a crash is garbage, never read.
  if (keys.length > 0) await folder.store.delete(keys, { syncFolder: false });
  return uris;
}
