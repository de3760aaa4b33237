/**
 * A table's Iceberg metadata (format v2, spec.ts) and the changes tidemark makes to it, as pure
 * functions: a new table, an appended snapshot, a new current schema, properties, the metadata
 * log, expired snapshots, and the commit-id check that makes a commit idempotent.
 *
 * Owns: the invariants of one metadata file as the spec states them and Iceberg Java checks them
 * on read: sequence numbers grow by one per snapshot (`last-sequence-number` is the greatest), a
 * snapshot's parent is the branch head it was appended on, `refs.main` and `current-snapshot-id`
 * name the same snapshot, the snapshot log and `last-updated-ms` never go back in time (a writer
 * whose clock is behind stamps the base's time instead), `last-column-id` never decreases, the
 * metadata log keeps at most `write.metadata.previous-versions-max` entries, and expiry never
 * removes the current snapshot or one a ref names.
 *
 * The commit protocol (the decision record of issue 30's commits): every tidemark commit carries
 * its commit id in its snapshot's summary (`tidemark.commit-id`) and in the table property
 * `tidemark.writer.<writerId>.commit` (the writer's last applied commit, which survives snapshot
 * expiry and other writers' commits); `hasCommit` finds either, and a commit the table has is a
 * no-op. A writer applies its commits in order, one pending at a time, so its property naming a
 * later commit never hides an earlier one that is missing. A snapshot that deleted all of a
 * writer's files (`tidemark reset --delete-objects`) starts the writer over: its commits before
 * that snapshot no longer count (`writerDiscardProperty`).
 *
 * Never does I/O and never reads the clock or randomness implicitly: times come in as `nowMs`,
 * snapshot ids from `newSnapshotId` (node:crypto). Manifests and manifest lists are
 * ./manifest.ts's; the catalogs that store the result are ./catalog.ts's.
 */
import { randomBytes } from 'node:crypto';
import { SinkError } from '../contracts/errors.js';
import { NO_SNAPSHOT } from './metadata-json.js';
import type {
  IcebergPartitionSpec,
  IcebergSchema,
  IcebergSnapshot,
  IcebergSnapshotRef,
  IcebergSnapshotSummary,
  IcebergTableMetadata,
  SnapshotId,
} from './spec.js';

export { NO_SNAPSHOT };

/** The branch that is the table's current state. */
export const MAIN_BRANCH = 'main';
/** Summary key of the tidemark commit a snapshot applied. */
export const COMMIT_ID_SUMMARY_KEY = 'tidemark.commit-id';
/** Iceberg's table property: how many previous metadata files the metadata log keeps. */
export const PREVIOUS_VERSIONS_MAX_PROPERTY = 'write.metadata.previous-versions-max';
/** Iceberg's default for `write.metadata.previous-versions-max`. */
export const PREVIOUS_VERSIONS_MAX_DEFAULT = 100;
/** Partition field ids start at 1000, so an unpartitioned table's last partition id is 999. */
const UNPARTITIONED_LAST_PARTITION_ID = 999;
/** 2^63 - 1: snapshot ids are positive signed 64-bit longs. */
const MAX_LONG = (1n << 63n) - 1n;

/** The table property that holds the last commit id `writerId` applied. */
export function writerCommitProperty(writerId: string): string {
  return `tidemark.writer.${writerId}.commit`;
}

/**
 * The table property that holds the start position of the last commit `writerId` applied with a
 * position (`CommitIdentity.position`); a commit without one (a discard) removes it.
 */
export function writerPositionProperty(writerId: string): string {
  return `tidemark.writer.${writerId}.position`;
}

/**
 * The table property that holds the sequence number of the snapshot that last deleted every data
 * file of `writerId` (./delete-files.ts, `tidemark reset --delete-objects`). The writer's positions
 * and fences may start over after such a reset (a lost state), so a commit id of its snapshots
 * before that one may come again: `hasCommit` looks for the writer's commits only from there on.
 */
export function writerDiscardProperty(writerId: string): string {
  return `tidemark.writer.${writerId}.discarded-at`;
}

/**
 * The sequence number from which snapshots count as `writerId`'s commits (`writerDiscardProperty`;
 * 0 when its files were never all deleted).
 */
export function writerCommitsFrom(metadata: IcebergTableMetadata, writerId: string): number {
  const text = metadata.properties[writerDiscardProperty(writerId)]?.trim();
  return text !== undefined && /^\d+$/.test(text) ? Number(text) : 0;
}

/** One tidemark commit: who applies it and its id, unique per writer. */
export interface CommitIdentity {
  readonly writerId: string;
  readonly commitId: string;
  /**
   * The start position of the commit's data, for a writer whose commits are applied in position
   * order (the sync's: one pending at a time per table). Recorded as the writer's
   * `writerPositionProperty`, it lets `hasCommit` recognise any EARLIER commit of the writer as
   * applied, after its snapshot expired too. Absent: not ordered (a discard, a schema change).
   */
  readonly position?: string;
}

/** A metadata change that breaks the metadata's invariants: a bug in the caller. */
function broken(location: string, why: string): SinkError {
  return new SinkError(
    'ICEBERG_METADATA_INVALID',
    location,
    `refused to change the Iceberg metadata of ${location}: ${why} (a bug: report it); nothing was written`,
  );
}

export interface NewTableOptions {
  /** The table's folder as a URI: `s3://bucket/lake/orders`, `file:///data/lake/orders`. */
  readonly location: string;
  /** The first schema; its `schema-id` becomes 0 whatever it was. */
  readonly schema: Omit<IcebergSchema, 'schema-id'> & { readonly 'schema-id'?: number };
  /** The highest field id assigned so far (at least every id in `schema`). */
  readonly lastColumnId: number;
  /** Default: unpartitioned (spec 0, no fields). Its `spec-id` becomes 0. */
  readonly partitionSpec?: IcebergPartitionSpec;
  readonly properties: Readonly<Record<string, string>>;
  /** The table's UUID (`randomUUID()`), fixed for its life. */
  readonly uuid: string;
  readonly nowMs: number;
}

/**
 * The metadata of a new, empty table: format v2, schema 0, partition spec 0 (unpartitioned unless
 * given), sort order 0 (unsorted), no snapshot (`current-snapshot-id` -1, which Iceberg Java,
 * pyiceberg and DuckDB all read as none), empty logs and refs.
 */
export function newTableMetadata(options: NewTableOptions): IcebergTableMetadata {
  const schema: IcebergSchema = { ...options.schema, 'schema-id': 0 };
  const spec: IcebergPartitionSpec = { ...(options.partitionSpec ?? { fields: [] }), 'spec-id': 0 };
  const lastColumnId = Math.max(options.lastColumnId, maxFieldId(schema));
  return {
    'format-version': 2,
    'table-uuid': options.uuid,
    location: options.location.replace(/\/+$/, ''),
    'last-sequence-number': 0,
    'last-updated-ms': options.nowMs,
    'last-column-id': lastColumnId,
    'current-schema-id': 0,
    schemas: [schema],
    'default-spec-id': 0,
    'partition-specs': [spec],
    'last-partition-id': Math.max(UNPARTITIONED_LAST_PARTITION_ID, ...spec.fields.map((f) => f['field-id'])),
    'default-sort-order-id': 0,
    'sort-orders': [{ 'order-id': 0, fields: [] }],
    properties: { ...options.properties },
    'current-snapshot-id': NO_SNAPSHOT,
    refs: {},
    snapshots: [],
    'snapshot-log': [],
    'metadata-log': [],
  };
}

/** The snapshot `main` points at, or undefined for a table without one. */
export function currentSnapshot(metadata: IcebergTableMetadata): IcebergSnapshot | undefined {
  const id = metadata.refs?.[MAIN_BRANCH]?.['snapshot-id'] ?? metadata['current-snapshot-id'];
  if (id === undefined || id === NO_SNAPSHOT) return undefined;
  return metadata.snapshots.find((s) => s['snapshot-id'] === id);
}

/**
 * A fresh snapshot id: a random positive 63-bit long, as Iceberg draws them, that no snapshot of
 * `metadata` has. (A collision with a concurrent writer's id is caught when the commit is rebased
 * onto the metadata that holds it: `appendSnapshot` refuses a duplicate.)
 */
export function newSnapshotId(
  metadata: IcebergTableMetadata,
  random: (bytes: number) => Uint8Array = randomBytes,
): SnapshotId {
  const taken = new Set(metadata.snapshots.map((s) => s['snapshot-id']));
  for (;;) {
    const bytes = random(8);
    let id = 0n;
    for (const b of bytes) id = (id << 8n) | BigInt(b);
    id &= MAX_LONG;
    if (id !== 0n && !taken.has(id)) return id;
  }
}

/** What an appended snapshot adds: the counters of its summary. */
export interface AddedFiles {
  readonly dataFiles: number;
  readonly records: number;
  /** Bytes of the added data (and delete) files. */
  readonly filesSize: number;
  readonly deleteFiles?: number;
  readonly positionDeleteFiles?: number;
  readonly equalityDeleteFiles?: number;
  readonly positionDeletes?: number;
  readonly equalityDeletes?: number;
}

/** What a snapshot removes from the table: data files no longer live (a `delete` snapshot). */
export interface RemovedFiles {
  readonly dataFiles: number;
  readonly records: number;
  /** Bytes of the removed data files. */
  readonly filesSize: number;
}

/**
 * The `added-*` and the removing counter of each `total-*` counter (Iceberg's snapshot summary,
 * Java's `SnapshotSummary`: `deleted-data-files`, `deleted-records`, `removed-files-size`).
 */
const TOTALS: readonly (readonly [total: string, added: string, removed?: string])[] = [
  ['total-data-files', 'added-data-files', 'deleted-data-files'],
  ['total-delete-files', 'added-delete-files'],
  ['total-records', 'added-records', 'deleted-records'],
  ['total-files-size', 'added-files-size', 'removed-files-size'],
  ['total-position-deletes', 'added-position-deletes'],
  ['total-equality-deletes', 'added-equality-deletes'],
];

export interface AppendOptions {
  /** From `newSnapshotId(base)`; refused if `base` already has it. */
  readonly snapshotId: SnapshotId;
  /** The snapshot's manifest list (written for this base: the parent's manifests and the new ones). */
  readonly manifestListPath: string;
  readonly added: AddedFiles;
  /** Data files the snapshot removes (its manifests list them as DELETED); `delete` snapshots. */
  readonly removed?: RemovedFiles;
  /** The tidemark commit this snapshot applies: recorded in the summary and the writer's property. */
  readonly commit: CommitIdentity;
  /** Default `append`; `overwrite` or `delete` for a snapshot that adds delete files. */
  readonly operation?: IcebergSnapshotSummary['operation'];
  /** More summary entries (strings), e.g. the source position the commit reaches. */
  readonly summary?: Readonly<Record<string, string>>;
  /** Default: the table's current schema. */
  readonly schemaId?: number;
  /** Table properties to set in the same commit. */
  readonly properties?: Readonly<Record<string, string>>;
  readonly nowMs: number;
}

/**
 * `base` with one more snapshot on `main`: sequence number `last-sequence-number + 1`, parent the
 * current snapshot, a summary with Iceberg's counters (`added-*` from `added`, `deleted-*` and
 * `removed-files-size` from `removed`, `total-*` carried on from the parent's summary; a total the
 * parent lacks, or one that would go below zero, is left out, as Iceberg does) and the
 * commit id, then the snapshot log, `refs.main`, `current-snapshot-id`, the writer's commit
 * property and `last-updated-ms`.
 *
 * @throws SinkError `ICEBERG_METADATA_INVALID` when `base` already has the snapshot id, or the
 *   schema id is not one of its schemas.
 */
export function appendSnapshot(base: IcebergTableMetadata, options: AppendOptions): IcebergTableMetadata {
  const id = options.snapshotId;
  if (id <= 0n || id > MAX_LONG) throw broken(base.location, `snapshot id ${id} is not a positive long`);
  if (base.snapshots.some((s) => s['snapshot-id'] === id))
    throw broken(base.location, `snapshot id ${id} is taken (draw it with newSnapshotId on this base)`);
  const schemaId = options.schemaId ?? base['current-schema-id'];
  if (!base.schemas.some((s) => s['schema-id'] === schemaId))
    throw broken(base.location, `schema id ${schemaId} is not one of the table's schemas`);
  const parent = currentSnapshot(base);
  const timestamp = notBefore(base, options.nowMs);
  const sequenceNumber = base['last-sequence-number'] + 1;

  const added: Record<string, string> = {};
  const a = options.added;
  const r = options.removed;
  const put = (key: string, n: number | undefined, always = false) => {
    if (n !== undefined && (always || n > 0)) added[key] = String(n);
  };
  // An append always states what it added; a snapshot that removes states what it removed.
  const adds = r === undefined;
  put('added-data-files', a.dataFiles, adds);
  put('added-records', a.records, adds);
  put('added-files-size', a.filesSize, adds);
  put('added-delete-files', a.deleteFiles);
  put('added-position-delete-files', a.positionDeleteFiles);
  put('added-equality-delete-files', a.equalityDeleteFiles);
  put('added-position-deletes', a.positionDeletes);
  put('added-equality-deletes', a.equalityDeletes);
  put('deleted-data-files', r?.dataFiles, !adds);
  put('deleted-records', r?.records, !adds);
  put('removed-files-size', r?.filesSize, !adds);
  const totals: Record<string, string> = {};
  for (const [total, addedKey, removedKey] of TOTALS) {
    const before = parent === undefined ? '0' : parent.summary[total];
    if (before === undefined || !/^\d+$/.test(before)) continue;
    const after =
      BigInt(before) + BigInt(added[addedKey] ?? '0') - BigInt((removedKey && added[removedKey]) ?? '0');
    // A parent whose totals do not cover what is removed has wrong totals: state none.
    if (after >= 0n) totals[total] = String(after);
  }
  const summary: IcebergSnapshotSummary = {
    ...options.summary,
    operation: options.operation ?? 'append',
    ...added,
    ...totals,
    [COMMIT_ID_SUMMARY_KEY]: options.commit.commitId,
  };
  const snapshot: IcebergSnapshot = {
    'snapshot-id': id,
    ...(parent ? { 'parent-snapshot-id': parent['snapshot-id'] } : {}),
    'sequence-number': sequenceNumber,
    'timestamp-ms': timestamp,
    'manifest-list': options.manifestListPath,
    summary,
    'schema-id': schemaId,
  };
  const main: IcebergSnapshotRef = { ...base.refs?.[MAIN_BRANCH], 'snapshot-id': id, type: 'branch' };
  return {
    ...base,
    'last-sequence-number': sequenceNumber,
    'last-updated-ms': timestamp,
    properties: withWriterCommit({ ...base.properties, ...options.properties }, options.commit),
    'current-snapshot-id': id,
    refs: { ...base.refs, [MAIN_BRANCH]: main },
    snapshots: [...base.snapshots, snapshot],
    'snapshot-log': [...base['snapshot-log'], { 'snapshot-id': id, 'timestamp-ms': timestamp }],
  };
}

/**
 * `base` recording `commit` as its writer's last applied one, with no snapshot: a commit that
 * changes no row (a current-state commit of deletes of keys the table does not hold). Committed
 * through the catalog's compare-and-swap like any other, so it is decided on the table as it is.
 */
export function recordCommit(
  base: IcebergTableMetadata,
  commit: CommitIdentity,
  options: { readonly properties?: Readonly<Record<string, string>>; readonly nowMs: number },
): IcebergTableMetadata {
  return {
    ...base,
    'last-updated-ms': notBefore(base, options.nowMs),
    properties: withWriterCommit({ ...base.properties, ...options.properties }, commit),
  };
}

/** `properties` naming `commit` as its writer's last applied one (and its position, or none). */
function withWriterCommit(
  properties: Record<string, string>,
  commit: CommitIdentity,
): Record<string, string> {
  properties[writerCommitProperty(commit.writerId)] = commit.commitId;
  if (commit.position === undefined) delete properties[writerPositionProperty(commit.writerId)];
  else properties[writerPositionProperty(commit.writerId)] = commit.position;
  return properties;
}

/**
 * Whether `metadata` already has the commit: the writer's property names it; or `position` (the
 * commit's, when the writer applies its commits in position order) sorts before the position of
 * the writer's last applied commit, of the same scheme (its first letter): an earlier commit,
 * applied before that one, whose snapshot may have expired since; or a snapshot's summary names it
 * (a snapshot another writer's later commit did not hide), counting only snapshots from the one
 * that last deleted the writer's files on (`writerDiscardProperty`, which also drops the position).
 */
export function hasCommit(
  metadata: IcebergTableMetadata,
  writerId: string,
  commitId: string,
  position?: string,
): boolean {
  if (metadata.properties[writerCommitProperty(writerId)] === commitId) return true;
  const last = metadata.properties[writerPositionProperty(writerId)];
  if (position !== undefined && last !== undefined && last[0] === position[0] && position < last) return true;
  // Snapshots before the writer's files were all deleted hold ids its new commits may reuse.
  const from = writerCommitsFrom(metadata, writerId);
  return metadata.snapshots.some(
    (s) => s['sequence-number'] >= from && s.summary[COMMIT_ID_SUMMARY_KEY] === commitId,
  );
}

/**
 * `base` with `schema` as its current schema: an existing schema with the same fields and
 * identifier fields becomes current again (no new id, as Iceberg reuses it), otherwise it is added
 * with the next schema id. `last-column-id` becomes the greatest of the base's, `lastColumnId` and
 * the schema's field ids: ids are never reused. The same schema as the current one returns `base`.
 */
export function setSchema(
  base: IcebergTableMetadata,
  schema: Omit<IcebergSchema, 'schema-id'> & { readonly 'schema-id'?: number },
  options: { readonly lastColumnId: number; readonly nowMs: number },
): IcebergTableMetadata {
  const shape = schemaShape(schema);
  const lastColumnId = Math.max(base['last-column-id'], options.lastColumnId, maxFieldId(schema));
  const existing = base.schemas.find((s) => schemaShape(s) === shape);
  if (
    existing &&
    existing['schema-id'] === base['current-schema-id'] &&
    lastColumnId === base['last-column-id']
  )
    return base;
  const schemaId = existing?.['schema-id'] ?? Math.max(...base.schemas.map((s) => s['schema-id'])) + 1;
  return {
    ...base,
    'last-updated-ms': notBefore(base, options.nowMs),
    'last-column-id': lastColumnId,
    'current-schema-id': schemaId,
    schemas: existing ? base.schemas : [...base.schemas, { ...schema, 'schema-id': schemaId }],
  };
}

/** `base` with properties set (and some removed); `base` itself when nothing changes. */
export function setProperties(
  base: IcebergTableMetadata,
  set: Readonly<Record<string, string>>,
  options: { readonly remove?: readonly string[]; readonly nowMs: number },
): IcebergTableMetadata {
  const properties: Record<string, string> = { ...base.properties, ...set };
  for (const key of options.remove ?? []) delete properties[key];
  const same =
    Object.keys(properties).length === Object.keys(base.properties).length &&
    Object.entries(properties).every(([k, v]) => base.properties[k] === v);
  if (same) return base;
  return { ...base, properties, 'last-updated-ms': notBefore(base, options.nowMs) };
}

/** An entry of the metadata log: a metadata file that was current until a later one. */
export interface MetadataLogEntry {
  readonly 'metadata-file': string;
  readonly 'timestamp-ms': number;
}

/**
 * `updated` with the metadata file it replaces (`previous`, the base's file and its
 * `last-updated-ms`) at the end of its metadata log, the log cut to the newest
 * `write.metadata.previous-versions-max` entries (default 100). Returns the entries cut off: their
 * files are no longer named by the table (a caller with `write.metadata.delete-after-commit.enabled`
 * may delete them).
 */
export function recordPreviousMetadata(
  updated: IcebergTableMetadata,
  previous: MetadataLogEntry,
): { readonly metadata: IcebergTableMetadata; readonly dropped: readonly MetadataLogEntry[] } {
  const max = previousVersionsMax(updated);
  const log = [...updated['metadata-log'], previous];
  const cut = Math.max(0, log.length - max);
  return {
    metadata: { ...updated, 'metadata-log': log.slice(cut) },
    dropped: log.slice(0, cut),
  };
}

/** `write.metadata.previous-versions-max` of the table, or Iceberg's default (at least 1). */
export function previousVersionsMax(metadata: IcebergTableMetadata): number {
  const text = metadata.properties[PREVIOUS_VERSIONS_MAX_PROPERTY];
  const n =
    text !== undefined && /^\d+$/.test(text.trim()) ? Number(text.trim()) : PREVIOUS_VERSIONS_MAX_DEFAULT;
  return Math.max(1, n);
}

export interface ExpireOptions {
  /** Snapshots stamped before this are expired, unless kept below. */
  readonly olderThanMs: number;
  /** Keep at least this many of the newest snapshots of `main`'s history (the current one counts). */
  readonly retainLast: number;
  readonly nowMs: number;
}

export interface Expiry {
  /** `base` without the expired snapshots; `base` itself when none expired. */
  readonly metadata: IcebergTableMetadata;
  readonly expired: readonly SnapshotId[];
  /** Manifest lists no kept snapshot names: deletable once this metadata is committed. */
  readonly manifestLists: readonly string[];
  /** Statistics files (`statistics`, `partition-statistics`) of expired snapshots. */
  readonly statisticsFiles: readonly string[];
}

/**
 * Expires the snapshots stamped before `olderThanMs`, except the current one, any a ref names and
 * the newest `retainLast` of `main`'s history. The snapshot log loses the expired snapshots' entries
 * and everything before the last of them (a log with a gap would claim a later snapshot was current
 * during the expired one's time, as Iceberg reasons); statistics of expired snapshots go too.
 * Manifests and data files only the expired snapshots reached are not found here (that needs the
 * manifests, ./manifest.ts).
 */
export function expireSnapshots(base: IcebergTableMetadata, options: ExpireOptions): Expiry {
  const kept = new Set<SnapshotId>();
  for (const ref of Object.values(base.refs ?? {})) kept.add(ref['snapshot-id']);
  const current = currentSnapshot(base);
  if (current) kept.add(current['snapshot-id']);
  const byId = new Map(base.snapshots.map((s) => [s['snapshot-id'], s]));
  let walk = current;
  for (let n = 0; walk && n < options.retainLast; n++) {
    kept.add(walk['snapshot-id']);
    walk = walk['parent-snapshot-id'] === undefined ? undefined : byId.get(walk['parent-snapshot-id']);
  }
  const expired = base.snapshots.filter(
    (s) => !kept.has(s['snapshot-id']) && s['timestamp-ms'] < options.olderThanMs,
  );
  if (expired.length === 0) return { metadata: base, expired: [], manifestLists: [], statisticsFiles: [] };
  const gone = new Set(expired.map((s) => s['snapshot-id']));
  const snapshots = base.snapshots.filter((s) => !gone.has(s['snapshot-id']));
  const stillNamed = new Set(snapshots.map((s) => s['manifest-list']));

  let snapshotLog: IcebergTableMetadata['snapshot-log'] = [];
  for (const entry of base['snapshot-log']) {
    snapshotLog = gone.has(entry['snapshot-id']) ? [] : [...snapshotLog, entry];
  }
  const raw = base as unknown as Record<string, unknown>;
  const statisticsFiles: string[] = [];
  const statistics: Record<string, unknown> = {};
  for (const key of ['statistics', 'partition-statistics']) {
    const list = raw[key];
    if (!Array.isArray(list)) continue;
    statistics[key] = list.filter((e: { 'snapshot-id'?: unknown; 'statistics-path'?: unknown }) => {
      if (!gone.has(e['snapshot-id'] as SnapshotId)) return true;
      if (typeof e['statistics-path'] === 'string') statisticsFiles.push(e['statistics-path']);
      return false;
    });
  }
  return {
    metadata: {
      ...base,
      ...statistics,
      'last-updated-ms': notBefore(base, options.nowMs),
      snapshots,
      'snapshot-log': snapshotLog,
    },
    expired: expired.map((s) => s['snapshot-id']),
    manifestLists: [...new Set(expired.map((s) => s['manifest-list']))].filter((p) => !stillNamed.has(p)),
    statisticsFiles,
  };
}

/**
 * `nowMs`, or the base's latest time when the clock is behind it: Iceberg Java refuses metadata
 * whose snapshot log or metadata log goes back in time by more than a minute, and two writers'
 * clocks differ.
 */
function notBefore(base: IcebergTableMetadata, nowMs: number): number {
  const lastSnapshot = base['snapshot-log'].at(-1)?.['timestamp-ms'] ?? 0;
  return Math.max(nowMs, base['last-updated-ms'], lastSnapshot);
}

function maxFieldId(schema: { readonly fields: IcebergSchema['fields'] }): number {
  let max = 0;
  const visit = (type: unknown): void => {
    if (typeof type !== 'object' || type === null) return;
    const t = type as Record<string, unknown>;
    if (t.type === 'struct') {
      for (const f of t.fields as IcebergSchema['fields']) {
        max = Math.max(max, f.id);
        visit(f.type);
      }
    } else if (t.type === 'list') {
      max = Math.max(max, t['element-id'] as number);
      visit(t.element);
    } else if (t.type === 'map') {
      max = Math.max(max, t['key-id'] as number, t['value-id'] as number);
      visit(t.key);
      visit(t.value);
    }
  };
  visit({ type: 'struct', fields: schema.fields });
  return max;
}

/** A schema's fields and identifier fields as one comparable string (its id left out). */
function schemaShape(schema: Omit<IcebergSchema, 'schema-id'>): string {
  return JSON.stringify([schema.fields, [...(schema['identifier-field-ids'] ?? [])].sort((a, b) => a - b)]);
}
