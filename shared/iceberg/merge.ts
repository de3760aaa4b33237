/**
 * Manifest merging on append (issue 30 item 4): keeps the number of manifests a snapshot lists
 * bounded, so a table's manifest list and every reader's planning stay small however many commits
 * it took. Iceberg's table properties decide: `commit.manifest-merge.enabled` (default true),
 * `commit.manifest.min-count-to-merge` (default 100: merge once a snapshot would list more data
 * manifests of one partition spec than that) and `commit.manifest.target-size-bytes` (default
 * 8 MiB: a manifest that big is full and never rewritten again, so a merge rewrites at most the
 * small tail, not the whole table).
 *
 * Owns: which manifests are merged, and the merged manifest's entries and list entry. Invariants:
 * the merged manifest lists exactly the live entries of the manifests it replaces, as EXISTING
 * with the snapshot id and sequence numbers they inherited (DELETED entries are history and are
 * dropped), so the live files of the snapshot are unchanged; the snapshot's own new manifest is
 * never merged (its entries stay ADDED); delete manifests, manifests of other specs and
 * manifests outside the table's folder are kept as they are. Writes only the merged manifest,
 * under a name unique to the attempt; deletes nothing (the replaced manifests are still named by
 * older snapshots: ./expire.ts removes them once no snapshot does).
 */
import { randomBytes } from 'node:crypto';
import { SinkError } from '../contracts/errors.js';
import { EntryStatus, inheritFromManifest, readManifest, writeManifest } from './manifest.js';
import { type IcebergManifestFile, ManifestContent, manifestFileOf } from './manifest-list.js';
import type { IcebergTableMetadata } from './spec.js';
import { folderPath, keyInFolder, type TableFolder } from './table-folder.js';

export const MERGE_ENABLED_PROPERTY = 'commit.manifest-merge.enabled';
export const MIN_COUNT_TO_MERGE_PROPERTY = 'commit.manifest.min-count-to-merge';
export const TARGET_SIZE_PROPERTY = 'commit.manifest.target-size-bytes';
/** Iceberg's defaults of the three properties. */
export const MERGE_DEFAULTS = {
  enabled: true,
  minCountToMerge: 100,
  targetSizeBytes: 8 * 1024 * 1024,
} as const;

export interface MergeSettings {
  readonly enabled: boolean;
  readonly minCountToMerge: number;
  readonly targetSizeBytes: number;
}

/** The table's merge settings, Iceberg's defaults for a property that is absent or malformed. */
export function mergeSettings(properties: Readonly<Record<string, string>>): MergeSettings {
  const count = (key: string, fallback: number) => {
    const text = properties[key]?.trim();
    return text !== undefined && /^\d+$/.test(text) ? Number(text) : fallback;
  };
  const enabled = properties[MERGE_ENABLED_PROPERTY]?.trim().toLowerCase();
  return {
    enabled: enabled === undefined ? MERGE_DEFAULTS.enabled : enabled !== 'false',
    minCountToMerge: Math.max(2, count(MIN_COUNT_TO_MERGE_PROPERTY, MERGE_DEFAULTS.minCountToMerge)),
    targetSizeBytes: count(TARGET_SIZE_PROPERTY, MERGE_DEFAULTS.targetSizeBytes),
  };
}

export interface MergeResult {
  /** The new snapshot's manifests: `ours` first, then the merged one (if any), then the rest. */
  readonly manifests: readonly IcebergManifestFile[];
  /** Manifests the merged one replaced (still named by older snapshots). */
  readonly replaced: readonly string[];
  /** The merged manifest's URI, when one was written. */
  readonly created?: string;
}

/**
 * The manifest list of a new snapshot (`snapshotId`, `sequenceNumber`) on `base`: `ours` plus the
 * parent's `inherited` manifests, with the small data manifests of a spec merged into one when
 * the spec has more than `min-count-to-merge` data manifests. The merged manifest is written as
 * `<table>/metadata/<commitId>-merged-<snapshotId>-<random>.avro`.
 */
export async function mergeOnAppend(
  folder: TableFolder,
  base: IcebergTableMetadata,
  options: {
    readonly ours: IcebergManifestFile;
    readonly inherited: readonly IcebergManifestFile[];
    readonly snapshotId: bigint;
    readonly sequenceNumber: number;
    readonly commitId: string;
  },
): Promise<MergeResult> {
  const all = [options.ours, ...options.inherited];
  const settings = mergeSettings(base.properties);
  if (!settings.enabled) return { manifests: all, replaced: [] };
  const specId = options.ours.partition_spec_id;
  const sameKind = all.filter((m) => m.content === ManifestContent.DATA && m.partition_spec_id === specId);
  if (sameKind.length <= settings.minCountToMerge) return { manifests: all, replaced: [] };
  // Candidates: the parent's small data manifests of this spec that are ours to read.
  const candidates = options.inherited.filter(
    (m) =>
      m.content === ManifestContent.DATA &&
      m.partition_spec_id === specId &&
      m.manifest_length < settings.targetSizeBytes &&
      keyInFolder(folder, m.manifest_path) !== undefined,
  );
  if (candidates.length < 2) return { manifests: all, replaced: [] };
  // Oldest first, so the merged manifest lists files in the order they were added.
  const ordered = [...candidates].sort((a, b) => a.sequence_number - b.sequence_number);
  const entries = [];
  for (const m of ordered) {
    const key = keyInFolder(folder, m.manifest_path)!;
    const bytes = await folder.store.get(key);
    if (bytes === undefined)
      throw new SinkError(
        'ICEBERG_METADATA_INVALID',
        base.location,
        `the manifest ${m.manifest_path} of the table at ${base.location}'s current snapshot is missing: restore it, or reset the table`,
      );
    for (const e of readManifest(bytes).entries) {
      if (e.status === EntryStatus.DELETED) continue;
      entries.push({ ...inheritFromManifest(e, m), status: EntryStatus.EXISTING });
    }
  }
  const schema = base.schemas.find((s) => s['schema-id'] === base['current-schema-id']);
  const spec = base['partition-specs'].find((s) => s['spec-id'] === specId);
  if (schema === undefined || spec === undefined)
    throw new SinkError(
      'ICEBERG_METADATA_INVALID',
      base.location,
      `the table at ${base.location} lacks its current schema or partition spec ${specId}: its metadata is broken`,
    );
  const { bytes, summary } = writeManifest({ schema, spec, entries });
  const key = folderPath(
    folder,
    `metadata/${options.commitId}-merged-${options.snapshotId}-${randomBytes(4).toString('hex')}.avro`,
  );
  await folder.store.put(key, bytes);
  const merged = manifestFileOf(folder.store.uri(key), bytes.length, summary, {
    snapshotId: options.snapshotId,
    sequenceNumber: options.sequenceNumber,
  });
  const gone = new Set(ordered.map((m) => m.manifest_path));
  return {
    manifests: [options.ours, merged, ...options.inherited.filter((m) => !gone.has(m.manifest_path))],
    replaced: [...gone],
    created: merged.manifest_path,
  };
}
