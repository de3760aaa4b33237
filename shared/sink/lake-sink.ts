/**
 * The lake's sink for both table formats (shared/contracts/table-format.ts): a plain table's
 * writes are the Parquet sink's objects as they always were; an Iceberg table's writes are the
 * same objects as the table's data files (its field ids in their columns, never rewritten),
 * staged into a manifest (`stage`) and committed to the table's catalog (`apply`) in the order of
 * docs/decisions/0024-iceberg-commits.md: data files and manifest, the state commit (the engine's,
 * shared/engine/durable-step.ts), then the catalog commit.
 *
 * Owns: an Iceberg table's life as the sync sees it: created on its first write with tidemark's
 * table properties, its schema evolved (one catalog commit, before data of the new schema is
 * written: a column added early reads as NULL, never as a wrong value), the staged manifest's name
 * and the commit's identity (the first data file's stem: writer, position, fence, so unique per
 * attempt and placed by recovery like the data files), the table's partition spec (the spec's
 * `partitionBy`, validated by shared/iceberg/partition.ts, fixed at the table's creation: a
 * different request for an existing table is refused, never ignored), the recovery of staged
 * manifests no state holds, and a writer's discard (`tidemark reset --delete-objects`: its files taken out of
 * the table's current snapshot before they are deleted). Never reads or commits state, never
 * applies a commit the caller did not hand it.
 *
 * A catalog that places tables (S3 Tables, `lake.catalog.placesTables`): the table is created with
 * no location, and its data files, staged manifests and manifest lists go under the location the
 * catalog assigned (./parquet-sink.ts `iceberg.folder`), where nothing is ever listed or deleted:
 * recovery leaves a crashed attempt's files there to the catalog's unreferenced-file removal (names
 * are unique per attempt, so none is ever rewritten or committed by mistake), and a discard commits
 * the delete snapshot and leaves the files to that removal too (decision 0025 "As built").
 */
import { randomUUID } from 'node:crypto';
import { Schema as ArrowSchema, makeData, RecordBatch, Struct } from 'apache-arrow';
import { SinkError } from '../contracts/errors.js';
import type { LakeTable, ObjectRef, PendingCommit, Sink, SinkProbe, WriteTarget } from '../contracts/sink.js';
import type { Position } from '../contracts/source.js';
import type { Batch } from '../dataplane/batch.js';
import { toLakeRecordWithIds } from '../dataplane/lake.js';
import { META_OP, Op } from '../dataplane/metadata.js';
import type { Schema } from '../dataplane/schema.js';
import type { StoredSchema } from '../dataplane/schema-rules.js';
import {
  type AppendResult,
  applyAppend,
  STAGED_MANIFEST_SUFFIX,
  type StagedAppend,
  stageAppend,
} from '../iceberg/append.js';
import { commitWithRetry, identText, type LoadedTable, type TableIdent } from '../iceberg/catalog.js';
import {
  applyCurrentState,
  type CurrentStateResult,
  encodeKeys,
  STAGED_KEYS_SUFFIX,
  type StagedKeys,
  stageKeys,
  TABLE_KIND_PROPERTY,
  type TableKind,
  tableKindOf,
} from '../iceberg/current-state.js';
import { deleteWriterFiles, stagedManifestKeys } from '../iceberg/delete-files.js';
import { TIDEMARK_TABLE_PROPERTIES } from '../iceberg/expire.js';
import { KeyLookupCache, LOOKUP_KEY_KINDS } from '../iceberg/key-lookup.js';
import type { IcebergManifestFile } from '../iceberg/manifest-list.js';
import {
  currentSnapshot,
  newTableMetadata,
  setProperties,
  setSchema,
  writerPositionProperty,
} from '../iceberg/metadata.js';
import type { LakeCatalog } from '../iceberg/open-catalog.js';
import { type PartitionFieldRequest, partitionSpecOf } from '../iceberg/partition.js';
import { icebergSchemaOf, lakeFieldIdsOf } from '../iceberg/schema.js';
import { primitiveOf } from '../iceberg/single-value.js';
import type { IcebergPartitionSpec, IcebergSchema, IcebergTableMetadata } from '../iceberg/spec.js';
import type { TableFolder } from '../iceberg/table-folder.js';
import { collapseToLatest, takeRecord } from './collapse.js';
import { compareStrings, objectName, PARQUET_SUFFIX, pageStem, parseObjectName } from './layout.js';
import type { DataFileRef, ParquetSink, ParquetWriteTarget } from './parquet-sink.js';
import { partitionPlanOf } from './partition-rows.js';

export interface LakeSinkOptions {
  /** Writes every object, plain or Iceberg data file. */
  readonly parquet: ParquetSink;
  /** Where Iceberg tables are committed; without it, an Iceberg write is refused. */
  readonly catalog?: LakeCatalog;
  /** The clock of snapshot timestamps; default Date.now. */
  readonly nowMs?: () => number;
  /**
   * Table properties set on every Iceberg table this sink creates or commits to (the spec's
   * `lake.snapshotRetention` as `history.expire.*`); merged over tidemark's own.
   */
  readonly tableProperties?: Readonly<Record<string, string>>;
  /**
   * Partition fields per lake table (the spec's `tables[].partitionBy`, by target name); a table
   * not listed is unpartitioned. Iceberg tables only (docs/iceberg.md "Partitions").
   */
  readonly partitionBy?: Readonly<Record<string, readonly PartitionFieldRequest[]>>;
  /**
   * Where a problem that does not fail the write goes (metadata files a committed commit could
   * not delete): the run's logger; default `process.emitWarning`.
   */
  readonly warn?: (message: string, fields: Readonly<Record<string, unknown>>) => void;
  /**
   * Per upsert table (by target name), the Iceberg table its full change log goes to beside its
   * current state (the spec's `tables[].history`: `<target>_history`). Written in the same write,
   * staged in the same pending commit (`PendingCommit.history`), applied before the current state.
   */
  readonly history?: Readonly<Record<string, string>>;
  /**
   * Called after each `apply` with the catalog commit's result (a current-state commit's carries
   * its key lookup's account, `lookup`): a window for a bench (bench/current-state.ts); changes
   * nothing the sink does. Must not throw. Default none.
   */
  readonly onApplied?: (table: string, result: AppendResult | CurrentStateResult) => void;
}

/** A history table's partitioning unless the spec says otherwise: a day of commits per partition. */
const HISTORY_PARTITION: readonly PartitionFieldRequest[] = [{ column: '__commit_ts', transform: 'day' }];

/** What an Iceberg table writes with: its current schema, that schema's field ids, its partition spec. */
interface IcebergTarget {
  /** The lake schema it was resolved for (the engine passes the same object page after page). */
  readonly lake: Schema;
  readonly iceberg: NonNullable<ParquetWriteTarget['iceberg']>;
  /** The table's (default) partition spec, which its staged manifests carry. */
  readonly spec: IcebergPartitionSpec;
  /** What the table holds: an upsert table's current state, or a change log (./../iceberg/current-state.ts). */
  readonly kind: TableKind;
}

/** The staged keys file of a current-state write, as a ref `write` returns beside its data files. */
interface KeysRef extends ObjectRef {
  readonly keys: StagedKeys;
}

function isKeysRef(ref: ObjectRef): ref is KeysRef {
  return (ref as Partial<KeysRef>).keys !== undefined;
}

/**
 * A current-state write's rows, collapsed per key: the batches of the rows that stay (the last
 * change of each key when it is not a delete) and the key columns of every key it touched.
 */
interface CurrentStateSplit {
  readonly live: readonly Batch[];
  readonly keys: readonly RecordBatch[];
  readonly keyRows: number;
  /** The write's every change, uncollapsed, as its history table's change log takes them. */
  readonly history: readonly Batch[];
}

/** A data file of a current-state write's history table. */
interface HistoryRef extends ObjectRef {
  readonly history: string;
}

function isHistoryRef(ref: ObjectRef): ref is HistoryRef {
  return (ref as Partial<HistoryRef>).history !== undefined;
}

export class LakeSink implements Sink, SinkProbe {
  private readonly parquet: ParquetSink;
  private readonly lakeCatalog: LakeCatalog | undefined;
  private readonly nowMs: () => number;
  private readonly tableProperties: Readonly<Record<string, string>>;
  private readonly partitionBy: Readonly<Record<string, readonly PartitionFieldRequest[]>>;
  private readonly warn: NonNullable<LakeSinkOptions['warn']>;
  private readonly history: Readonly<Record<string, string>>;
  private readonly onApplied: LakeSinkOptions['onApplied'];
  /** Per table: the Iceberg schema its writes carry, for the lake schema it was resolved for. */
  private readonly tables = new Map<string, IcebergTarget>();
  /**
   * Per table: the table as this sink's last catalog commit left it, the base its next commit is
   * built on without a load (the catalog's compare-and-swap still guards it: a table that moved
   * on is a conflict, loaded and rebased). Dropped on any failure.
   */
  private readonly lastCommitted = new Map<string, LoadedTable>();
  /** Manifests staged while their data file was stored (`write`), by that file's URI, until `stage` takes them. */
  private readonly stagedBeside = new Map<string, Promise<PendingCommit>>();
  /** Per table, when the catalog places tables: the folder of the location it assigned. */
  private readonly placed = new Map<string, TableFolder>();
  /**
   * What current-state commits' key lookups read of tables' immutable files, kept for the next
   * commit (a long-running writer looks up only what changed since; ../iceberg/key-lookup.ts).
   */
  private readonly lookupCache = new KeyLookupCache();
  /** A current-state write's split, by its batches (`prepare` and `write` get the same array). */
  private readonly splits = new WeakMap<readonly Batch[], CurrentStateSplit>();

  constructor(options: LakeSinkOptions) {
    this.parquet = options.parquet;
    this.lakeCatalog = options.catalog;
    this.nowMs = options.nowMs ?? Date.now;
    this.tableProperties = options.tableProperties ?? {};
    this.partitionBy = options.partitionBy ?? {};
    this.warn = options.warn ?? ((message) => process.emitWarning(message));
    this.history = options.history ?? {};
    this.onApplied = options.onApplied;
  }

  warm(target: WriteTarget, schema: Schema): void {
    this.parquet.warm(target, schema);
  }

  prepare(
    target: WriteTarget,
    schema: Schema,
    startPosition: Position,
    batches: readonly Batch[],
    recorded?: StoredSchema,
  ): void {
    if (target.tableFormat !== 'iceberg') {
      this.parquet.prepare(target, schema, startPosition, batches, recorded);
      return;
    }
    // Only once the table's schema is known (after its first write): ids are needed to encode.
    const known = this.tables.get(target.table);
    if (known?.lake !== schema) return;
    let rows = batches;
    if (known.kind === 'current-state') {
      let split: CurrentStateSplit;
      try {
        split = this.split(batches, schema, known);
      } catch {
        return; // the write reports it
      }
      rows = split.live;
      const history = this.history[target.table];
      const h = history === undefined ? undefined : this.tables.get(history);
      if (h?.lake === schema)
        this.parquet.prepare(
          { ...target, table: history!, iceberg: h.iceberg },
          schema,
          startPosition,
          split.history,
          recorded,
        );
      if (rows.length === 0) return;
    }
    this.parquet.prepare({ ...target, iceberg: known.iceberg }, schema, startPosition, rows, recorded);
  }

  async write(
    target: WriteTarget,
    schema: Schema,
    startPosition: Position,
    batches: readonly Batch[],
    recorded?: StoredSchema,
  ): Promise<ObjectRef[]> {
    if (target.tableFormat !== 'iceberg') {
      const asked = this.partitionBy[target.table];
      if (asked !== undefined && asked.length > 0)
        throw new SinkError(
          'ICEBERG_PARTITION_INVALID',
          target.table,
          `${target.table}: partitionBy applies to Iceberg tables only, and ${target.table} is a plain table (its state records tableFormat plain); remove partitionBy, or reset the table (tidemark reset --table ${target.table} --delete-objects) to write it anew as an Iceberg table`,
        );
      return this.parquet.write(target, schema, startPosition, batches, recorded);
    }
    const first = batches.find((b) => b.record.numRows > 0);
    if (first === undefined) return [];
    const kind: TableKind = first.writeMode === 'upsert' ? 'current-state' : 'change-log';
    const resolved = await this.icebergTarget(target, schema, kind);
    const { iceberg } = resolved;
    // The manifest is staged while the data file is stored (its entry is known from the bytes):
    // `stage` then returns it instead of writing it after the data file.
    const besideOf = (t: WriteTarget) => async (ref: DataFileRef) => {
      const staging = this.stageRefs(t, [ref]);
      this.stagedBeside.set(ref.uri, staging);
      staging.catch(() => this.stagedBeside.delete(ref.uri));
      await staging;
    };
    const beside = besideOf(target);
    if (kind === 'change-log')
      return this.parquet.write(
        { ...target, iceberg: { ...iceberg, beside } },
        schema,
        startPosition,
        batches,
        recorded,
      );
    // A current-state write: the rows that stay as data, every touched key in the keys file,
    // and every change in the history table when the table keeps one.
    const split = this.split(batches, schema, resolved);
    const { live, keys, keyRows } = split;
    const historyTable = this.history[target.table];
    const historyTarget = historyTable === undefined ? undefined : { ...target, table: historyTable };
    const historyResolved = historyTarget && (await this.icebergTarget(historyTarget, schema, 'change-log'));
    const { folder } = await this.filesAt(target.table);
    const commitId = pageStem(objectName(target.table, target.writer, startPosition, target.fence).name);
    const [data, staged, history] = await Promise.allSettled([
      live.length > 0
        ? this.parquet.write(
            { ...target, iceberg: { ...iceberg, beside } },
            schema,
            startPosition,
            live,
            recorded,
          )
        : Promise.resolve([]),
      stageKeys(folder, commitId, encodeKeys(keys), keyRows, schema.primaryKey),
      historyTarget && historyResolved
        ? this.parquet.write(
            { ...historyTarget, iceberg: { ...historyResolved.iceberg, beside: besideOf(historyTarget) } },
            schema,
            startPosition,
            split.history,
            recorded,
          )
        : Promise.resolve([]),
    ]);
    if (data.status === 'rejected') throw data.reason;
    if (staged.status === 'rejected') throw staged.reason;
    if (history.status === 'rejected') throw history.reason;
    const historyRefs: HistoryRef[] = history.value.map((r) => ({ ...r, history: historyTable! }));
    const keysRef: KeysRef = {
      uri: staged.value.uri,
      bytes: staged.value.length,
      rows: 0,
      writer: target.writer,
      startPosition,
      fence: target.fence,
      keys: staged.value,
    };
    return [...data.value, keysRef, ...historyRefs];
  }

  /**
   * Collapses a current-state write per key (the last change by `__pos` wins: two versions of a
   * key leave the later, insert-delete-insert the last insert, a delete no row) and splits it into
   * the rows that stay and the key columns of every key touched (lake records with field ids).
   * Memoised by `batches`, so `prepare` and `write` hand the Parquet sink the same batches.
   */
  private split(batches: readonly Batch[], schema: Schema, resolved: IcebergTarget): CurrentStateSplit {
    const known = this.splits.get(batches);
    if (known) return known;
    const nonEmpty = batches.filter((b) => b.record.numRows > 0);
    const template = nonEmpty.at(-1)!;
    const records = collapseToLatest(
      nonEmpty.map((b) => b.record),
      schema.primaryKey,
    );
    const live: Batch[] = [];
    const keys: RecordBatch[] = [];
    let keyRows = 0;
    for (const record of records) {
      keys.push(selectColumns(toLakeRecordWithIds(record, resolved.iceberg.ids), schema.primaryKey));
      keyRows += record.numRows;
      const opAt = record.schema.fields.findIndex((f) => f.name === META_OP);
      const ops = record.data.children[opAt]!.values as Uint8Array;
      const stay: number[] = [];
      for (let row = 0; row < record.numRows; row++) if (ops[row] !== Op.delete) stay.push(row);
      if (stay.length === record.numRows) live.push({ ...template, record });
      else if (stay.length > 0) live.push({ ...template, record: takeRecord(record, Int32Array.from(stay)) });
    }
    // The history keeps every change: as a change log's rows (no collapse), in arrival order.
    const historyTable = this.history[template.table];
    const history =
      historyTable === undefined
        ? []
        : nonEmpty.map((b) => ({ ...b, table: historyTable, writeMode: 'append' as const }));
    const split = { live, keys, keyRows, history };
    this.splits.set(batches, split);
    return split;
  }

  async stage(target: WriteTarget, refs: readonly ObjectRef[]): Promise<PendingCommit | undefined> {
    if (target.tableFormat !== 'iceberg' || refs.length === 0) return undefined;
    const keysRef = refs.find(isKeysRef);
    const historyRefs = refs.filter(isHistoryRef);
    const dataRefs = refs.filter((r) => !isKeysRef(r) && !isHistoryRef(r));
    const pending = dataRefs.length > 0 ? await this.stageData(target, dataRefs) : undefined;
    if (!keysRef) return pending;
    const { keys } = keysRef;
    const history =
      historyRefs.length > 0
        ? { history: await this.stageData({ ...target, table: historyRefs[0]!.history }, historyRefs) }
        : {};
    if (pending) return { ...pending, keys, ...history };
    // Deletes only: no data manifest, the commit named as its keys file is.
    const name = keys.uri.slice(keys.uri.lastIndexOf('/') + 1);
    return {
      ...history,
      table: target.table,
      writer: target.writer,
      commitId: name.slice(0, -STAGED_KEYS_SUFFIX.length),
      ...(keysRef.startPosition === undefined ? {} : { position: keysRef.startPosition }),
      manifest: '',
      manifestLength: 0,
      dataFiles: 0,
      records: 0,
      filesSize: 0,
      partitions: [],
      keys,
    };
  }

  private stageData(target: WriteTarget, refs: readonly ObjectRef[]): Promise<PendingCommit> {
    const beside = refs.length === 1 ? this.stagedBeside.get(refs[0]!.uri) : undefined;
    if (beside) {
      this.stagedBeside.delete(refs[0]!.uri);
      return beside;
    }
    return this.stageRefs(target, refs);
  }

  /** Writes the manifest of `refs` (this sink's data files of one write) and returns its pending commit. */
  private async stageRefs(target: WriteTarget, refs: readonly ObjectRef[]): Promise<PendingCommit> {
    const { ident, folder } = await this.filesAt(target.table);
    const known = this.tables.get(target.table);
    // The refs this sink's `write` returned for the target: Iceberg data files.
    const dataFiles = (refs as readonly Partial<DataFileRef>[]).map((r) => {
      if (!r.dataFile || !known)
        throw new SinkError(
          'ICEBERG_METADATA_INVALID',
          target.table,
          `cannot stage ${r.uri} into ${identText(ident)}: it was not written as an Iceberg data file (a bug)`,
        );
      return r.dataFile;
    });
    const first = refs[0]!.uri;
    // The page's stem: a partitioned page's files are its parts, all of one position.
    const commitId = pageStem(first.slice(first.lastIndexOf('/') + 1));
    const position = refs[0]!.startPosition;
    const staged = await stageAppend(folder, {
      commit: { writerId: target.writer, commitId, ...(position === undefined ? {} : { position }) },
      schema: known!.iceberg.schema,
      spec: known!.spec,
      dataFiles,
    });
    return pendingOf(target, staged);
  }

  /**
   * Applies a pending commit to its table's catalog, once however often it is called. A commit
   * with a history applies the history table's commit first: a reader may see the history a
   * commit ahead of the current state (until this call, or recovery's, applies the second),
   * never a change in the current state that its history lacks.
   */
  async apply(pending: PendingCommit): Promise<void> {
    if (pending.history) await this.apply(pending.history);
    const { catalog } = this.requireCatalog(pending.table);
    const { ident, folder } = await this.filesAt(pending.table);
    const base = this.lastCommitted.get(pending.table);
    this.lastCommitted.delete(pending.table);
    const options = {
      nowMs: this.nowMs,
      ...(Object.keys(this.tableProperties).length > 0 ? { properties: this.tableProperties } : {}),
      ...(base ? { base } : {}),
    };
    const result = pending.keys
      ? await applyCurrentState(
          catalog,
          ident,
          folder,
          {
            commit: stagedOf(pending).commit,
            ...(pending.dataFiles > 0 ? { data: stagedOf(pending) } : {}),
            keys: pending.keys,
          },
          { ...options, cache: this.lookupCache },
        )
      : await applyAppend(catalog, ident, folder, stagedOf(pending), options);
    this.lastCommitted.set(pending.table, result.table);
    this.onApplied?.(pending.table, result);
    if (result.cleanupError !== undefined) {
      // The commit stands; what it left unreferenced stays for maintenance.
      this.warn(`${identText(ident)}: metadata files left after a commit could not be deleted`, {
        table: identText(ident),
        error: String(result.cleanupError),
      });
    }
  }

  /**
   * The plain sink's recovery of data objects at or past `committed`, and the staged manifests of
   * `target.writer` named at or past it (a crashed attempt's, which no state holds). Where the
   * catalog places tables, an Iceberg table's files are not under the lake: those a crashed
   * attempt left stay for the catalog's unreferenced-file removal (nothing there is listed or
   * deleted), and only the lake's own folder (a plain table's objects) is recovered.
   */
  async recover(target: LakeTable, committed: Position): Promise<ObjectRef[]> {
    const removed = await this.recoverTable(target, committed);
    const history = this.history[target.table];
    if (history === undefined) return removed;
    // The history table's files of a write are named from the same position as the table's.
    return [...removed, ...(await this.recoverTable({ ...target, table: history }, committed))];
  }

  private async recoverTable(target: LakeTable, committed: Position): Promise<ObjectRef[]> {
    const removed = await this.parquet.recover(target, committed);
    if (this.lakeCatalog === undefined || this.lakeCatalog.placesTables) return removed;
    const { folder } = this.location(target.table);
    const store = folder.store;
    const dir = `${folder.key}/metadata/`;
    const scheme = committed[0];
    const doomed: string[] = [];
    for (const o of await store.list(`${dir}${target.writer}.`)) {
      const name = o.key.slice(dir.length);
      // Staged manifests and staged keys files, named by their commit id.
      const suffix = [STAGED_MANIFEST_SUFFIX, STAGED_KEYS_SUFFIX].find((x) => name.endsWith(x));
      if (suffix === undefined) continue;
      const parsed = parseObjectName(name.slice(0, -suffix.length) + PARQUET_SUFFIX);
      if (parsed?.kind !== 'plain' || parsed.writer !== target.writer) continue;
      if (parsed.position[0] === scheme && compareStrings(parsed.position, committed) >= 0)
        doomed.push(o.key);
    }
    await store.delete(doomed);
    return [...removed, ...doomed.map((key) => ({ uri: store.uri(key), bytes: -1, rows: -1 }))];
  }

  list(table: string, writer?: string): Promise<ObjectRef[]> {
    return this.parquet.list(table, writer);
  }

  async committedPosition(table: string, writer: string): Promise<Position | undefined> {
    if (this.lakeCatalog === undefined) return undefined;
    const loaded = await this.lakeCatalog.catalog.loadTable(this.location(table).ident);
    return loaded?.metadata.properties[writerPositionProperty(writer)];
  }

  /**
   * Every object of `target.writer` in the table deleted. A table with Iceberg metadata in the
   * catalog first takes the writer's data files out of its current snapshot (a `delete` snapshot,
   * shared/iceberg/delete-files.ts), so readers never meet a missing file; then the files, its
   * staged manifests, and whatever else the writer left there (crashed attempts' objects,
   * sidecars). A plain table (none in the catalog) is the Parquet sink's discard.
   */
  async discard(target: LakeTable): Promise<ObjectRef[]> {
    const removed = await this.discardTable(target);
    const history = this.history[target.table];
    if (history === undefined) return removed;
    return [...removed, ...(await this.discardTable({ ...target, table: history }))];
  }

  private async discardTable(target: LakeTable): Promise<ObjectRef[]> {
    this.tables.delete(target.table);
    this.lookupCache.clear();
    this.lastCommitted.delete(target.table);
    this.placed.delete(target.table);
    if (this.lakeCatalog === undefined) return this.parquet.discard(target);
    const { catalog, placesTables } = this.lakeCatalog;
    const { ident, folder: lakeFolder } = this.location(target.table);
    const loaded = await catalog.loadTable(ident);
    if (loaded === undefined) {
      const removed = await this.parquet.discard(target);
      if (!placesTables) await lakeFolder.store.delete(await stagedManifestKeys(lakeFolder, target.writer));
      return removed;
    }
    // A placed table's files: the delete snapshot only (deleteWriterFiles deletes nothing there).
    const folder = placesTables ? placesTables.folderAt(loaded.metadata.location) : lakeFolder;
    const result = await deleteWriterFiles(catalog, ident, folder, {
      writerId: target.writer,
      nowMs: this.nowMs,
    });
    if (result.cleanupError !== undefined) {
      // The commit stands; what it left unreferenced stays for maintenance.
      this.warn(`${identText(ident)}: metadata files left after a commit could not be deleted`, {
        table: identText(ident),
        error: String(result.cleanupError),
      });
    }
    const committed: ObjectRef[] = result.removed.map((f) => ({
      uri: f.file_path,
      bytes: f.file_size_in_bytes,
      rows: f.record_count,
      writer: target.writer,
    }));
    const seen = new Set(committed.map((r) => r.uri));
    const rest = (await this.parquet.discard(target)).filter((r) => !seen.has(r.uri));
    return [...committed, ...rest];
  }

  probe(id: string): Promise<string> {
    return this.parquet.probe(id);
  }

  /**
   * The Iceberg schema `target`'s next data file carries: the table's current schema once `schema`
   * is in it. A first write creates the table; a schema the table does not have yet is added in
   * its own catalog commit, before any file of it is written.
   */
  private async icebergTarget(target: WriteTarget, schema: Schema, kind: TableKind): Promise<IcebergTarget> {
    const known = this.tables.get(target.table);
    if (known?.lake === schema && known.kind === kind) return known;
    const { catalog, placesTables } = this.requireCatalog(target.table);
    const { ident, folder } = this.location(target.table);
    let loaded = await catalog.loadTable(ident);
    const asked = this.partitionBy[target.table] ?? (this.isHistory(target.table) ? HISTORY_PARTITION : []);
    const partitioned = { primaryKey: schema.primaryKey, rows: 'versions' as const };
    if (loaded === undefined) {
      const first = icebergSchemaOf(schema, undefined, { table: target.table });
      const created = await catalog.createTable(
        ident,
        newTableMetadata({
          // A catalog that places tables is asked for none: it answers with the one it assigned.
          location: placesTables ? '' : folder.store.uri(folder.key),
          schema: first.schema,
          lastColumnId: first.lastColumnId,
          partitionSpec: partitionSpecOf(first.schema, partitioned, asked, { tableName: target.table }).spec,
          properties: { ...TIDEMARK_TABLE_PROPERTIES, ...this.tableProperties, [TABLE_KIND_PROPERTY]: kind },
          uuid: randomUUID(),
          nowMs: this.nowMs(),
        }),
      );
      loaded = created.status === 'created' ? created.table : await catalog.loadTable(ident);
      if (loaded === undefined)
        throw new SinkError(
          'ICEBERG_TABLE_MISSING',
          target.table,
          `the Iceberg table ${identText(ident)} was neither created nor found in the ${catalog.kind} catalog; nothing was written`,
        );
    }
    const placed = placesTables ? this.placedFolder(target.table, loaded) : undefined;
    await this.withKind(loaded, target, kind);
    const current = await this.withSchema(loaded, target, schema);
    if (kind === 'current-state')
      requireLookupKey(target.table, identText(ident), current, schema.primaryKey);
    // Every tidemark table is a change log: each row version is a row of its own, never rewritten.
    const wanted = partitionSpecOf(current, partitioned, asked, { tableName: target.table }).spec;
    const spec = partitionSpecIn(loaded.metadata, target.table, identText(ident), current, wanted);
    const plan = partitionPlanOf(spec, current);
    const resolved: IcebergTarget = {
      lake: schema,
      iceberg: {
        schema: current,
        ids: lakeFieldIdsOf(current),
        ...(plan ? { partition: plan } : {}),
        ...(placed ? { folder: placed } : {}),
      },
      spec,
      kind,
    };
    this.tables.set(target.table, resolved);
    return resolved;
  }

  /**
   * Makes sure the table holds what `kind` writes. A table of the other kind is refused, never
   * reinterpreted: a change log (every version a row, deletes as `__op = d` rows) read as a current
   * state would show ghosts and stale versions, and the reverse loses history. An empty table
   * (no rows yet) takes the kind in a commit of its own; a table from before the property is a
   * change log.
   *
   * @throws SinkError `ICEBERG_TABLE_KIND_MISMATCH` naming the way out.
   */
  private async withKind(loaded: LoadedTable, target: WriteTarget, kind: TableKind): Promise<void> {
    // A table from before the property is a change log.
    const has = tableKindOf(loaded.metadata) ?? 'change-log';
    if (has === kind) return;
    const { catalog } = this.requireCatalog(target.table);
    const { ident } = this.location(target.table);
    const rows = Number(currentSnapshot(loaded.metadata)?.summary['total-records'] ?? '0');
    if (rows === 0) {
      await commitWithRetry(
        catalog,
        ident,
        { writerId: target.writer, commitId: `kind-${randomUUID()}` },
        (t) => {
          const now = tableKindOf(t.metadata);
          if (now === kind) return 'already-committed';
          if (Number(currentSnapshot(t.metadata)?.summary['total-records'] ?? '0') > 0)
            throw kindMismatch(target.table, identText(ident), now ?? 'change-log', kind);
          return setProperties(t.metadata, { [TABLE_KIND_PROPERTY]: kind }, { nowMs: this.nowMs() });
        },
      );
      return;
    }
    throw kindMismatch(target.table, identText(ident), has, kind);
  }

  /** The table's current schema once it holds `schema` (a schema commit when it did not). */
  private async withSchema(loaded: LoadedTable, target: WriteTarget, schema: Schema): Promise<IcebergSchema> {
    const { catalog } = this.requireCatalog(target.table);
    const { ident } = this.location(target.table);
    const evolve = (t: LoadedTable) => {
      const m = t.metadata;
      const currentSchema = m.schemas.find((s) => s['schema-id'] === m['current-schema-id'])!;
      return icebergSchemaOf(
        schema,
        { schema: currentSchema, lastColumnId: m['last-column-id'] },
        { table: target.table },
      );
    };
    const first = evolve(loaded);
    if (!first.changed) return first.schema;
    const result = await commitWithRetry(
      catalog,
      ident,
      { writerId: target.writer, commitId: `schema-${randomUUID()}` },
      (t) => {
        const evolved = evolve(t);
        if (!evolved.changed) return 'already-committed';
        return setSchema(t.metadata, evolved.schema, {
          lastColumnId: evolved.lastColumnId,
          nowMs: this.nowMs(),
        });
      },
    );
    return evolve(result.table).schema;
  }

  /** Whether `table` is some upsert table's history table. */
  private isHistory(table: string): boolean {
    return Object.values(this.history).includes(table);
  }

  private requireCatalog(table: string): LakeCatalog {
    if (this.lakeCatalog) return this.lakeCatalog;
    throw new SinkError(
      'ICEBERG_TABLE_MISSING',
      table,
      `${table} is an Iceberg table, but this lake sink has no catalog (a bug: the pipeline opens it from lake.catalog)`,
    );
  }

  private location(table: string) {
    return this.requireCatalog(table).table(table);
  }

  /**
   * Where `table`'s Iceberg files are: its folder under the lake, or, where the catalog places
   * tables, the folder of the location the catalog assigned (from the loaded table, once).
   * @throws SinkError `ICEBERG_TABLE_MISSING` when the catalog places tables and has no such table.
   */
  private async filesAt(table: string): Promise<{ ident: TableIdent; folder: TableFolder }> {
    const { catalog, placesTables } = this.requireCatalog(table);
    const { ident, folder } = this.location(table);
    if (!placesTables) return { ident, folder };
    const known = this.placed.get(table);
    if (known) return { ident, folder: known };
    const loaded = await catalog.loadTable(ident);
    if (loaded === undefined)
      throw new SinkError(
        'ICEBERG_TABLE_MISSING',
        table,
        `the Iceberg table ${identText(ident)} is not in the ${catalog.kind} catalog, which places its files: nothing can be staged or committed to it (was it dropped?)`,
      );
    return { ident, folder: this.placedFolder(table, loaded) };
  }

  /** The folder of the location the catalog assigned `table` (remembered for the sink's life). */
  private placedFolder(table: string, loaded: LoadedTable): TableFolder {
    const folder = this.requireCatalog(table).placesTables!.folderAt(loaded.metadata.location);
    this.placed.set(table, folder);
    return folder;
  }
}

/**
 * The table's default partition spec, when it has the fields `wanted` asks for (the same source
 * columns and transforms, in order).
 *
 * @throws SinkError `ICEBERG_PARTITION_MISMATCH` otherwise: a table's partitioning is fixed at its
 *   creation, and a request is never ignored.
 */
function partitionSpecIn(
  metadata: IcebergTableMetadata,
  table: string,
  ident: string,
  schema: IcebergSchema,
  wanted: IcebergPartitionSpec,
): IcebergPartitionSpec {
  const spec = metadata['partition-specs'].find((s) => s['spec-id'] === metadata['default-spec-id']);
  const fields = spec?.fields ?? [];
  const same =
    fields.length === wanted.fields.length &&
    fields.every(
      (f, i) =>
        f['source-id'] === wanted.fields[i]!['source-id'] && f.transform === wanted.fields[i]!.transform,
    );
  if (spec !== undefined && same) return spec;
  const text = (fs: IcebergPartitionSpec['fields']) =>
    fs.length === 0
      ? 'nothing (unpartitioned)'
      : fs
          .map((f) => {
            const column =
              schema.fields.find((c) => c.id === f['source-id'])?.name ?? `field ${f['source-id']}`;
            return `{ column: ${column}, transform: ${f.transform} }`;
          })
          .join(', ');
  throw new SinkError(
    'ICEBERG_PARTITION_MISMATCH',
    table,
    `${table}: the Iceberg table ${ident} is partitioned by ${text(fields)}, but partitionBy asks for ${text(wanted.fields)}; a table's partitioning is fixed when it is created. Set partitionBy to the table's, or to repartition: tidemark reset --table ${table} --delete-objects, then drop the table in its catalog (file catalog: delete its metadata/ folder) so the next run creates it anew; nothing was written`,
  );
}

/**
 * The columns `names` of `record`, in that order, sharing its buffers. Not Arrow's
 * `RecordBatch.select`: in apache-arrow 21 it pairs the selected fields with the wrong children
 * when a selected column is not the record's first (a key after an `ADD COLUMN ... FIRST`).
 */
function selectColumns(record: RecordBatch, names: readonly string[]): RecordBatch {
  const at = names.map((name) => {
    const i = record.schema.fields.findIndex((f) => f.name === name);
    if (i < 0) throw new Error(`the record has no column ${name}`);
    return i;
  });
  const fields = at.map((i) => record.schema.fields[i]!);
  const children = at.map((i) => record.data.children[i]!);
  return new RecordBatch(
    new ArrowSchema(fields, record.schema.metadata),
    makeData({ type: new Struct(fields), length: record.numRows, nullCount: 0, children }),
  );
}

function kindMismatch(table: string, ident: string, has: TableKind, wants: TableKind): SinkError {
  const fix =
    wants === 'current-state'
      ? `convert it once: tidemark convert -c <config> --table ${table} (docs/iceberg.md "Current-state tables"), or set writeMode: append to keep it a change log`
      : `set writeMode: upsert again, or write the change log elsewhere: tidemark reset --table ${table} --delete-objects, then drop the table in its catalog`;
  const what = (k: TableKind) =>
    k === 'current-state' ? 'a current-state table (one row per key)' : 'a change log (every change a row)';
  return new SinkError(
    'ICEBERG_TABLE_KIND_MISMATCH',
    table,
    `${table}: the Iceberg table ${ident} is ${what(has)}, but writeMode ${wants === 'current-state' ? 'upsert' : 'append'} writes ${what(wants)}; ${fix}; nothing was written`,
  );
}

/**
 * @throws SinkError `ICEBERG_KEY_UNSUPPORTED` when a key column of a current-state table has a
 *   type its rows cannot be found by (./../iceberg/key-lookup.ts `LOOKUP_KEY_KINDS`).
 */
function requireLookupKey(table: string, ident: string, schema: IcebergSchema, key: readonly string[]): void {
  for (const name of key) {
    const field = schema.fields.find((f) => f.name === name);
    const type = field ? primitiveOf(field.type) : undefined;
    if (type && LOOKUP_KEY_KINDS.has(type.kind)) continue;
    throw new SinkError(
      'ICEBERG_KEY_UNSUPPORTED',
      table,
      `${table}: key column ${name} of ${ident} is ${typeof field?.type === 'string' ? field.type : 'not a primitive'}, and a current-state table (writeMode upsert) finds its rows by keys of type int, long, string, decimal, date or uuid; set writeMode: append (a change log), or give the source table a primary key of such columns; nothing was written`,
    );
  }
}

/** The state's form of a staged append. */
function pendingOf(target: WriteTarget, staged: StagedAppend): PendingCommit {
  const b64 = (b: Uint8Array | undefined) =>
    b === undefined ? undefined : Buffer.from(b).toString('base64');
  return {
    table: target.table,
    writer: target.writer,
    commitId: staged.commit.commitId,
    ...(staged.commit.position === undefined ? {} : { position: staged.commit.position }),
    manifest: staged.manifestPath,
    manifestLength: staged.manifestLength,
    dataFiles: staged.dataFiles,
    records: staged.records,
    filesSize: staged.filesSize,
    ...(staged.summary.partition_spec_id === 0 ? {} : { specId: staged.summary.partition_spec_id }),
    partitions: staged.summary.partitions.map((p) => ({
      n: p.contains_null,
      ...(p.contains_nan === undefined ? {} : { nan: p.contains_nan }),
      ...(p.lower_bound === undefined ? {} : { lo: b64(p.lower_bound) }),
      ...(p.upper_bound === undefined ? {} : { hi: b64(p.upper_bound) }),
    })),
  };
}

/** A pending commit as `applyAppend` takes it: its manifest holds ADDED entries only. */
export function stagedOf(p: PendingCommit): StagedAppend {
  const bytes = (s: string | undefined) =>
    s === undefined ? undefined : new Uint8Array(Buffer.from(s, 'base64'));
  const partitions: IcebergManifestFile['partitions'] = p.partitions.map((s) => ({
    contains_null: s.n,
    ...(s.nan === undefined ? {} : { contains_nan: s.nan }),
    ...(s.lo === undefined ? {} : { lower_bound: bytes(s.lo)! }),
    ...(s.hi === undefined ? {} : { upper_bound: bytes(s.hi)! }),
  }));
  return {
    commit: {
      writerId: p.writer,
      commitId: p.commitId,
      ...(p.position === undefined ? {} : { position: p.position }),
    },
    manifestPath: p.manifest,
    manifestLength: p.manifestLength,
    summary: {
      partition_spec_id: p.specId ?? 0,
      content: 0,
      partitions: partitions ?? [],
      added_files_count: p.dataFiles,
      existing_files_count: 0,
      deleted_files_count: 0,
      added_rows_count: p.records,
      existing_rows_count: 0,
      deleted_rows_count: 0,
      min_explicit_sequence_number: undefined,
      inherits_sequence_number: true,
    },
    records: p.records,
    dataFiles: p.dataFiles,
    filesSize: p.filesSize,
  };
}
