/**
 * Iceberg v2 manifest lists (spec "Manifest Lists"): the Avro file (./avro.ts) a snapshot points
 * to, one entry per manifest with its counts by entry status, its partition summaries and its
 * sequence numbers, written and read back by field id (./manifest-schemas.ts), so lists other
 * writers made (Spark, pyiceberg) read as well as ours.
 *
 * Owns: `IcebergManifestFile` and the summary of a manifest it is built from (`ManifestSummary`,
 * which ./manifest.ts returns with a manifest's bytes), the header key/values the spec requires
 * (`snapshot-id`, `parent-snapshot-id`, `sequence-number`, `format-version`), and a manifest's
 * minimum sequence number once its inheriting entries take the snapshot's. Values: snapshot ids
 * are `bigint`, sequence numbers, counts and lengths `number` (a read value past 2^53 is refused).
 * Pure: no I/O.
 */
import { readAvroFile, writeAvroFile } from './avro.js';
import type { AvroCodec } from './avro-codecs.js';
import {
  type AvroRecord,
  checkCount,
  FIELD_SUMMARY_ID,
  type FieldNames,
  fieldSchema,
  fieldsOf,
  MANIFEST_FILE_ID,
  MANIFEST_FILE_SCHEMA,
  optionalField,
  requireField,
  toBigint,
  toNumber,
  unwrapNull,
  valueById,
} from './manifest-schemas.js';

/** manifest_file `content` (field 517) and the manifest header's `content`. */
export const ManifestContent = { DATA: 0, DELETES: 1 } as const;
export type ManifestContent = (typeof ManifestContent)[keyof typeof ManifestContent];

/** One partition field's summary over a manifest (`field_summary`, element 508). */
export interface IcebergFieldSummary {
  readonly contains_null: boolean;
  readonly contains_nan?: boolean;
  readonly lower_bound?: Uint8Array;
  readonly upper_bound?: Uint8Array;
}

/** A manifest's data or delete files and their rows by entry status (ADDED, EXISTING, DELETED). */
export interface ManifestCounts {
  readonly added_files_count: number;
  readonly existing_files_count: number;
  readonly deleted_files_count: number;
  readonly added_rows_count: number;
  readonly existing_rows_count: number;
  readonly deleted_rows_count: number;
}

/** One manifest as a manifest list lists it (the `manifest_file` struct; its counts as above). */
export interface IcebergManifestFile extends ManifestCounts {
  readonly manifest_path: string;
  readonly manifest_length: number;
  readonly partition_spec_id: number;
  readonly content: ManifestContent;
  readonly sequence_number: number;
  readonly min_sequence_number: number;
  readonly added_snapshot_id: bigint;
  /** One per partition field of the manifest's spec, in spec order; `[]` unpartitioned. */
  readonly partitions?: readonly IcebergFieldSummary[];
  readonly key_metadata?: Uint8Array;
}

/**
 * What a manifest list needs of a manifest that only its bytes tell: counts by status, partition
 * summaries, and the smallest explicit data sequence number of its live entries.
 */
export interface ManifestSummary extends ManifestCounts {
  readonly partition_spec_id: number;
  readonly content: ManifestContent;
  readonly partitions: readonly IcebergFieldSummary[];
  /** The smallest sequence number live entries carry; undefined when none carries one. */
  readonly min_explicit_sequence_number: number | undefined;
  /** Whether a live entry inherits its sequence number (an ADDED entry written without one). */
  readonly inherits_sequence_number: boolean;
}

/** A manifest list as read. */
export interface ManifestListRead {
  readonly snapshotId: bigint | undefined;
  readonly parentSnapshotId: bigint | undefined;
  readonly sequenceNumber: number | undefined;
  readonly formatVersion: number;
  readonly manifests: IcebergManifestFile[];
}

/**
 * The manifest list entry of a manifest added by the snapshot `snapshotId` with sequence number
 * `sequenceNumber`: its inheriting entries take that number, so the manifest's minimum data
 * sequence number is the smaller of it and the entries' own.
 */
export function manifestFileOf(
  manifestPath: string,
  manifestLength: number,
  summary: ManifestSummary,
  snapshot: { readonly snapshotId: bigint; readonly sequenceNumber: number },
): IcebergManifestFile {
  const { min_explicit_sequence_number: explicit, inherits_sequence_number: inherits, ...listed } = summary;
  const min =
    explicit === undefined
      ? snapshot.sequenceNumber
      : inherits
        ? Math.min(explicit, snapshot.sequenceNumber)
        : explicit;
  return {
    manifest_path: manifestPath,
    manifest_length: checkCount('manifest_length', manifestLength),
    // The partition spec id, content, counts and partition summaries, as the manifest's bytes say.
    ...listed,
    sequence_number: snapshot.sequenceNumber,
    min_sequence_number: min,
    added_snapshot_id: snapshot.snapshotId,
  };
}

/** Writes a v2 manifest list: the snapshot's manifests, with the header readers expect. */
export function writeManifestList(list: {
  readonly snapshotId: bigint;
  readonly parentSnapshotId: bigint | undefined;
  readonly sequenceNumber: number;
  readonly manifests: readonly IcebergManifestFile[];
  readonly codec?: AvroCodec;
  readonly syncMarker?: Uint8Array;
}): Uint8Array {
  return writeAvroFile(
    MANIFEST_FILE_SCHEMA,
    list.manifests.map((m) => ({
      ...m,
      manifest_length: checkCount('manifest_length', m.manifest_length),
      partitions: m.partitions ?? null,
      key_metadata: m.key_metadata ?? null,
    })),
    {
      codec: list.codec ?? 'deflate',
      syncMarker: list.syncMarker,
      metadata: {
        'snapshot-id': String(list.snapshotId),
        'parent-snapshot-id': list.parentSnapshotId === undefined ? 'null' : String(list.parentSnapshotId),
        'sequence-number': String(list.sequenceNumber),
        'format-version': '2',
      },
    },
  );
}

/** Reads a manifest list (ours or another writer's), by field id. */
export function readManifestList(bytes: Uint8Array): ManifestListRead {
  const file = readAvroFile(bytes);
  const fields = fieldsOf(file.schema, 'manifest_file');
  const partitionsSchema = unwrapNull(fieldSchema(file.schema, MANIFEST_FILE_ID.partitions)) as
    | { items?: unknown }
    | undefined;
  const summaryFields: FieldNames = partitionsSchema?.items
    ? fieldsOf(partitionsSchema.items, 'field_summary')
    : new Map();
  const manifests = file.records.map((r): IcebergManifestFile => {
    const rec = r as AvroRecord;
    const value = (n: keyof typeof MANIFEST_FILE_ID) => valueById(rec, fields, MANIFEST_FILE_ID[n]);
    const num = (n: keyof typeof MANIFEST_FILE_ID) => toNumber(value(n), `manifest_file.${n}`);
    const count = (n: keyof typeof MANIFEST_FILE_ID) => requireField(num(n), `manifest_file.${n}`);
    const partitions = value('partitions') as AvroRecord[] | undefined;
    return {
      manifest_path: requireField(value('manifest_path'), 'manifest_file.manifest_path') as string,
      manifest_length: count('manifest_length'),
      partition_spec_id: count('partition_spec_id'),
      content: (num('content') ?? ManifestContent.DATA) as ManifestContent,
      sequence_number: num('sequence_number') ?? 0,
      min_sequence_number: num('min_sequence_number') ?? 0,
      added_snapshot_id: requireField(
        toBigint(value('added_snapshot_id')),
        'manifest_file.added_snapshot_id',
      ),
      added_files_count: count('added_files_count'),
      existing_files_count: count('existing_files_count'),
      deleted_files_count: count('deleted_files_count'),
      added_rows_count: count('added_rows_count'),
      existing_rows_count: count('existing_rows_count'),
      deleted_rows_count: count('deleted_rows_count'),
      ...optionalField(
        'partitions',
        partitions?.map((p) => fieldSummaryOf(p, summaryFields)),
      ),
      ...optionalField('key_metadata', value('key_metadata') as Uint8Array | undefined),
    };
  });
  const meta = file.metadata;
  const id = (s: string | undefined) => (s === undefined || s === 'null' ? undefined : BigInt(s));
  return {
    snapshotId: id(meta['snapshot-id']),
    parentSnapshotId: id(meta['parent-snapshot-id']),
    sequenceNumber: meta['sequence-number'] === undefined ? undefined : Number(meta['sequence-number']),
    formatVersion: Number(meta['format-version'] ?? 1),
    manifests,
  };
}

function fieldSummaryOf(rec: AvroRecord, fields: FieldNames): IcebergFieldSummary {
  const value = (n: keyof typeof FIELD_SUMMARY_ID) => valueById(rec, fields, FIELD_SUMMARY_ID[n]);
  return {
    contains_null: requireField(value('contains_null'), 'field_summary.contains_null') as boolean,
    ...optionalField('contains_nan', value('contains_nan') as boolean | undefined),
    ...optionalField('lower_bound', value('lower_bound') as Uint8Array | undefined),
    ...optionalField('upper_bound', value('upper_bound') as Uint8Array | undefined),
  };
}
