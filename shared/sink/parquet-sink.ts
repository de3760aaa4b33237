/**
 * The Parquet lake sink (`Sink` in shared/contracts/sink.ts): one write = one Parquet object named
 * from the write's start position and lease fence (`layout.ts`), stored through an `ObjectStore`
 * (S3 or a folder); for a partitioned Iceberg table, one object per partition tuple, the page's
 * parts (`layout.ts`, ./partition-rows.ts), all of the write's start position.
 *
 * Owns: turning a table's batches into one durable object (upsert collapse, lake cast, Parquet
 * encoding), the position-based recovery of a crashed attempt's objects, and the table listing.
 * Never commits a position and never reads state: the engine commits after `write` resolves, and
 * tells `recover` what is committed. Never deletes an object of another writer, nor one it cannot
 * place at or after the committed position: deleting a committed object is data loss, keeping a
 * leftover only a duplicate that readers drop by (primary key, `__pos`).
 *
 * `ObjectRef.rows` from `list` and `recover` is -1: a listing only knows keys and sizes, and
 * reading every footer to count rows would cost a GET per object.
 */
import { type RecordBatch, util } from 'apache-arrow';
import { SinkError } from '../contracts/errors.js';
import { DEFAULT_LAKE_FORMAT, FOOTER_FORMAT } from '../contracts/lake-format.js';
import type { LakeTable, ObjectRef, Sink, SinkProbe, WriteTarget } from '../contracts/sink.js';
import type { Position } from '../contracts/source.js';
import { type Batch, BatchError, requireUpsertKey, type WriteMode } from '../dataplane/batch.js';
import { type LakeFieldIds, lakeSchema, toLakeRecord, toLakeRecordWithIds } from '../dataplane/lake.js';
import { META_POS, METADATA_COLUMNS } from '../dataplane/metadata.js';
import type { Schema } from '../dataplane/schema.js';
import type { StoredSchema } from '../dataplane/schema-rules.js';
import { wireSchema } from '../dataplane/wire.js';
import type { AvroValue } from '../iceberg/avro-schema.js';
import { parquetDataFile } from '../iceberg/data-file.js';
import type { IcebergDataFile } from '../iceberg/manifest.js';
import type { IcebergSchema } from '../iceberg/spec.js';
import { folderPath, type TableFolder } from '../iceberg/table-folder.js';
import { collapseToLatest } from './collapse.js';
import {
  compareNameToPosition,
  compareStrings,
  fenceSuffix,
  objectKey,
  objectName,
  type ParsedName,
  parseObjectName,
  positionListBound,
  probeKey,
  SIDECAR_PREFIX,
  sidecarTarget,
  tablePrefix,
} from './layout.js';
import type { ObjectStore, StoredObject } from './object-store.js';
import { encodeParquetAsync, type ParquetCompression, warmEncoder } from './parquet-writer.js';
import { type PartitionPlan, splitByPartition } from './partition-rows.js';

export type { ObjectStore, StoredObject } from './object-store.js';

export interface ParquetSinkOptions {
  readonly store: ObjectStore;
  /** Key prefix inside the store (e.g. `lake/raw`); '' or undefined = the store's root. */
  readonly prefix?: string;
  /** Page compression; default zstd (docs/decisions/0006-parquet-writer.md). */
  readonly compression?: ParquetCompression;
  /** Upper bound on rows per row group; default 1Mi rows. */
  readonly maxRowGroupRows?: number;
}

/** Footer key/value metadata every object carries, readable with any Parquet tool. */
export const FOOTER_START_POSITION = 'tidemark.start_position';
export const FOOTER_TABLE = 'tidemark.table';
export const FOOTER_WRITE_MODE = 'tidemark.write_mode';
export const FOOTER_WRITER = 'tidemark.writer';
/** The lease fence of the run that wrote the object (decimal). */
export const FOOTER_FENCE = 'tidemark.fence';
/** The schema the object was written with (docs/schema-changes.md): version, hash, JSON. */
export const FOOTER_SCHEMA_VERSION = 'tidemark.schema_version';
export const FOOTER_SCHEMA_HASH = 'tidemark.schema_hash';
export const FOOTER_SCHEMA = 'tidemark.schema';
/** The lake format of the object (docs/lake-format.md), `1` or `2`. */
export { FOOTER_FORMAT };

/**
 * A write's target as the Parquet sink takes it: with `iceberg`, the object is an Iceberg table's
 * data file: its columns carry the table's field ids, its ref the `data_file` a manifest lists,
 * and it is stored only if no object has its name (a data file that may be committed is never
 * rewritten: decision 0024).
 */
export interface ParquetWriteTarget extends WriteTarget {
  readonly iceberg?: {
    /** The table's current Iceberg schema, whose field ids the file carries. */
    readonly schema: IcebergSchema;
    readonly ids: LakeFieldIds;
    /**
     * The table's partitioning, when it is partitioned: a write's rows are split into one data
     * file per partition tuple (./partition-rows.ts), named as parts of the page (layout.ts).
     */
    readonly partition?: PartitionPlan;
    /**
     * Runs while the data file is stored, given its ref (the `data_file` is known from the encoded
     * bytes before the put): the lake sink stages the manifest there, so the two writes overlap.
     * The write resolves once both did; it fails if either failed (what the other left is a
     * crashed attempt's, which recovery removes). An unpartitioned table's only: a partitioned
     * page's manifest lists all its parts, staged after them.
     */
    readonly beside?: (ref: DataFileRef) => Promise<void>;
    /**
     * The table's folder when its catalog placed it (S3 Tables): the object, and its sidecar, go
     * to `<folder>/data/` in that folder's store instead of the table's folder under the lake.
     */
    readonly folder?: TableFolder;
  };
}

/** An Iceberg table's data file as written: its ref, and its `data_file` as a manifest lists it. */
export interface DataFileRef extends ObjectRef {
  readonly dataFile: IcebergDataFile;
}

/** Whether `prepare` encodes ahead (a switch for the bench: the lever measured beside the default). */
export const encodeAhead = { enabled: true };

/**
 * Prepared objects kept per table and writer: the pages a run reads ahead of its commits
 * (engine/incremental/read-ahead.ts `readAhead`), with room to spare. Past it the oldest is dropped
 * (its write, should it still come, encodes again).
 */
const PREPARED_MAX = 4;

/**
 * One encoded object of a write: its bytes and rows, and for a partitioned table its partition
 * tuple (Avro form). An unpartitioned write encodes exactly one, with no partition.
 */
interface Encoded {
  readonly bytes: Uint8Array;
  readonly rows: number;
  readonly partition?: Readonly<Record<string, AvroValue>>;
}

/** An object `prepare` is encoding, and the arguments its `write` must repeat to take it. */
interface Prepared {
  readonly target: ParquetWriteTarget;
  readonly schema: Schema;
  readonly startPosition: Position;
  readonly batches: readonly Batch[];
  readonly recorded: StoredSchema | undefined;
  readonly encoded: Promise<Encoded[] | undefined>;
}

function preparedKey(target: WriteTarget): string {
  return JSON.stringify([target.table, target.writer]);
}

/** A data object of a table with its start position (or best ordering key when unresolved). */
interface PlacedObject {
  readonly object: StoredObject;
  readonly parsed: ParsedName;
}

export class ParquetSink implements Sink, SinkProbe {
  private readonly store: ObjectStore;
  private readonly prefix: string;
  private readonly compression: ParquetCompression;
  private readonly maxRowGroupRows: number | undefined;
  /** Objects encoded ahead of their `write` (`prepare`), by table and writer, oldest first. */
  private readonly prepared = new Map<string, Prepared[]>();

  constructor(options: ParquetSinkOptions) {
    this.store = options.store;
    this.prefix = options.prefix ?? '';
    this.compression = options.compression ?? 'zstd';
    this.maxRowGroupRows = options.maxRowGroupRows;
  }

  /**
   * Starts the encoder for objects of `schema` in `target`'s lake format (the worker thread and
   * the flat writer's template), without waiting for it: a run calls this before its first page
   * is read. Stores and encodes nothing.
   */
  warm(target: WriteTarget, schema: Schema): void {
    warmEncoder(lakeSchema(schema), {
      compression: this.compression,
      format: target.format ?? DEFAULT_LAKE_FORMAT,
    });
  }

  /**
   * Starts encoding the object a coming `write` with these very arguments will store (the same
   * batches, schema and recorded schema objects), so the encode runs while the previous object
   * is still being stored and committed; that `write` then only stores it. Up to PREPARED_MAX
   * prepared objects per table and writer (one per page read ahead), taken by the write from
   * the same start position; a `write` with other arguments encodes its own and drops it, and
   * so does every object prepared before it (their writes never came). Stores nothing; an
   * encode error is reported by that `write`.
   */
  prepare(
    target: ParquetWriteTarget,
    schema: Schema,
    startPosition: Position,
    batches: readonly Batch[],
    recorded?: StoredSchema,
  ): void {
    if (!encodeAhead.enabled) return;
    const encoded = this.encodeObject(target, schema, startPosition, batches, recorded);
    encoded.catch(() => undefined); // reported by the write that takes it
    const key = preparedKey(target);
    const list = this.prepared.get(key) ?? [];
    list.push({ target, schema, startPosition, batches, recorded, encoded });
    if (list.length > PREPARED_MAX) list.shift();
    this.prepared.set(key, list);
  }

  /**
   * Writes all rows of `batches` as ONE object named from `startPosition` and `target.fence` (a
   * partitioned Iceberg table: one object per partition tuple, parts 0, 1, ... of that name),
   * replacing an object of an earlier attempt of the same run (same fence) from the same
   * position; an object another run (another fence) wrote from there keeps its own name. In
   * upsert mode the rows are first collapsed to the last change per primary key. Durable when it
   * resolves. An empty write stores nothing and returns [].
   */
  async write(
    target: ParquetWriteTarget,
    schema: Schema,
    startPosition: Position,
    batches: readonly Batch[],
    recorded?: StoredSchema,
  ): Promise<ObjectRef[]> {
    const key = preparedKey(target);
    const list = this.prepared.get(key) ?? [];
    const at = list.findIndex((p) => p.startPosition === startPosition);
    const ready = list[at];
    // It and whatever was prepared before it: writes come in position order.
    if (at >= 0) list.splice(0, at + 1);
    if (list.length === 0) this.prepared.delete(key);
    const same =
      ready !== undefined &&
      ready.target.fence === target.fence &&
      ready.target.format === target.format &&
      ready.target.iceberg?.ids === target.iceberg?.ids &&
      ready.target.iceberg?.partition === target.iceberg?.partition &&
      ready.schema === schema &&
      ready.startPosition === startPosition &&
      ready.recorded === recorded &&
      ready.batches.length === batches.length &&
      ready.batches.every((b, i) => b === batches[i]);
    const objects = await (same
      ? ready.encoded
      : this.encodeObject(target, schema, startPosition, batches, recorded));
    if (!objects) return [];
    if (target.iceberg?.partition) {
      // One data file per partition tuple, each a part of the page (layout.ts), in turn.
      const refs: ObjectRef[] = [];
      for (const [part, object] of objects.entries())
        refs.push(...(await this.storeObject(target, startPosition, object, part)));
      return refs;
    }
    return this.storeObject(target, startPosition, objects[0]!, undefined);
  }

  /** Stores one encoded object of a write under its name (a part's name when `part` is set). */
  private async storeObject(
    target: ParquetWriteTarget,
    startPosition: Position,
    object: Encoded,
    part: number | undefined,
  ): Promise<ObjectRef[]> {
    const { table, writer, fence } = target;
    const { bytes, rows } = object;
    const placed = target.iceberg?.folder;
    const store = placed?.store ?? this.store;
    const { key: dataKey, sidecarKey } = placed
      ? placedObjectKey(placed, table, writer, startPosition, fence, part)
      : objectKey(this.prefix, table, writer, startPosition, fence, part);
    // The sidecar goes first: whenever a shortened object exists, its full position does too.
    if (sidecarKey) await store.put(sidecarKey, Buffer.from(startPosition, 'utf8'));
    const uri = store.uri(dataKey);
    if (!target.iceberg) {
      await store.put(dataKey, bytes);
      return [{ uri, bytes: bytes.byteLength, rows, writer, startPosition, fence }];
    }
    const dataFile = parquetDataFile(uri, bytes, target.iceberg.schema, {
      ...(object.partition ? { partition: object.partition } : {}),
    });
    const ref: DataFileRef = { uri, bytes: bytes.byteLength, rows, writer, startPosition, fence, dataFile };
    const [stored, beside] = await Promise.allSettled([
      store.putIfAbsent(dataKey, bytes),
      part === undefined ? target.iceberg.beside?.(ref) : undefined,
    ]);
    if (stored.status === 'rejected') throw stored.reason;
    if (stored.value === 'exists')
      throw new SinkError(
        'SINK_OBJECT_EXISTS',
        table,
        `refused to overwrite the data file ${uri}: a file of an Iceberg table may already be committed, and names are unique per attempt (writer, position, lease fence), so another process wrote this one with the same lease fence; nothing was written (a bug: report it)`,
      );
    if (beside.status === 'rejected') throw beside.reason;
    return [ref];
  }

  /**
   * The Parquet bytes and row count of one write's object (of each partition's object, for a
   * partitioned table); undefined when it has no rows.
   */
  private async encodeObject(
    target: ParquetWriteTarget,
    schema: Schema,
    startPosition: Position,
    batches: readonly Batch[],
    recorded?: StoredSchema,
  ): Promise<Encoded[] | undefined> {
    const { table, fence } = target;
    // Checked before any work: a missing fence must never produce a legacy (unfenced) name.
    fenceSuffix(table, fence);
    const live = batches.filter((b) => b.record.numRows > 0);
    if (live.length === 0) return undefined;
    const writeMode = checkBatches(table, schema, live);
    let records = live.map((b) => b.record);
    if (writeMode === 'upsert') {
      requireUpsertKey(table, writeMode, schema);
      records = collapseToLatest(records, schema.primaryKey);
    }
    const plan = target.iceberg?.partition;
    if (plan) {
      const groups = splitByPartition(table, records, plan);
      return Promise.all(
        groups.map(async (g) => ({
          ...(await this.encodeRecords(target, g.records, startPosition, writeMode, recorded)),
          partition: g.partition,
        })),
      );
    }
    return [await this.encodeRecords(target, records, startPosition, writeMode, recorded)];
  }

  /** One Parquet object of wire `records` (cast to the lake schema, with field ids for Iceberg). */
  private async encodeRecords(
    target: ParquetWriteTarget,
    records: readonly RecordBatch[],
    startPosition: Position,
    writeMode: WriteMode,
    recorded: StoredSchema | undefined,
  ): Promise<Encoded> {
    const { table, writer, fence } = target;
    const ids = target.iceberg?.ids;
    const lake = records.map((r) => (ids ? toLakeRecordWithIds(r, ids) : toLakeRecord(r)));
    const rows = lake.reduce((n, r) => n + r.numRows, 0);
    const format = target.format ?? DEFAULT_LAKE_FORMAT;
    const bytes = await encodeParquetAsync(lake, {
      compression: this.compression,
      format,
      ...(this.maxRowGroupRows ? { maxRowGroupRows: this.maxRowGroupRows } : {}),
      // Every row has its own position: a dictionary for it would only overflow.
      plainColumns: [META_POS],
      keyValueMetadata: {
        [FOOTER_TABLE]: table,
        [FOOTER_START_POSITION]: startPosition,
        [FOOTER_WRITE_MODE]: writeMode,
        [FOOTER_WRITER]: writer,
        [FOOTER_FENCE]: String(fence),
        [FOOTER_FORMAT]: String(format),
        ...(recorded
          ? {
              [FOOTER_SCHEMA_VERSION]: String(recorded.version),
              [FOOTER_SCHEMA_HASH]: recorded.hash,
              [FOOTER_SCHEMA]: JSON.stringify({ columns: recorded.columns, primaryKey: recorded.primaryKey }),
            }
          : {}),
      },
    });
    return { bytes, rows };
  }

  /**
   * Puts a small test object under the lake prefix (layout.ts `probeKey`) and deletes it again:
   * the two calls a run makes (PutObject, DeleteObjects), so a missing bucket, a missing grant or
   * an unwritable lake directory shows before a run needs them.
   */
  async probe(id: string): Promise<string> {
    const key = probeKey(this.prefix, id);
    const uri = this.store.uri(key);
    try {
      await this.store.put(key, Buffer.from('tidemark check: test object, deleted right away\n', 'utf8'));
      await this.store.delete([key]);
    } catch (e) {
      if (e instanceof SinkError) throw e;
      const code = (e as { code?: string }).code;
      throw new SinkError(
        'SINK_STORE_FAILED',
        '',
        `cannot write the test object ${uri} (${code ?? (e as Error).message}); fix lake.uri, or make the lake directory writable for this user`,
        { cause: e },
      );
    }
    return uri;
  }

  /**
   * Deletes the writer's objects of the table whose start position has the scheme of
   * `committed` (its first letter) and is at or after it (plain string order), whatever their
   * fence, and the sidecars that belong to them. Lists only from `committed` onwards (S3
   * StartAfter, layout.ts `positionListBound`), so its cost follows what is past the committed
   * position, not the table's history; other writers' objects are not even listed. An object of
   * another scheme (a legacy `i` object past a `j` position) is not this position's to judge and
   * stays. Returns the deleted data objects.
   *
   * @throws SinkError `SINK_START_POSITION` for an empty `committed` (it has no scheme);
   *   `SINK_SIDECAR_MISSING` when a shortened name can only be placed through its sidecar and the
   *   sidecar is gone or does not match; nothing is deleted then.
   */
  async recover(target: LakeTable, committed: Position): Promise<ObjectRef[]> {
    const { table, writer } = target;
    if (committed.length === 0) {
      throw new SinkError(
        'SINK_START_POSITION',
        table,
        `cannot recover ${table} from an empty committed position; the engine must pass the committed position (deleting all of a writer's objects is discard)`,
      );
    }
    const scheme = committed[0]!;
    const dir = tablePrefix(this.prefix, table);
    const { placed, sidecars } = await this.scan(dir, writer, {
      data: positionListBound(this.prefix, table, writer, committed),
      sidecars: positionListBound(this.prefix, table, writer, committed, true),
    });
    const doomed: PlacedObject[] = [];
    for (const p of placed) {
      if ((p.parsed.kind === 'plain' ? p.parsed.position : p.parsed.visible)[0] !== scheme) continue;
      let cmp = compareNameToPosition(p.parsed, committed);
      if (cmp === undefined) {
        const full = await this.readSidecar(dir, p, table);
        if (full === undefined) {
          throw new SinkError(
            'SINK_SIDECAR_MISSING',
            table,
            `cannot tell whether ${this.store.uri(p.object.key)} starts before or after the committed position ${committed}: its sidecar ${p.parsed.kind === 'hashed' ? p.parsed.sidecar : ''} is missing or does not match. Restore the sidecar, or read the object's footer key "${FOOTER_START_POSITION}" and delete the object by hand if that position is >= the committed one`,
          );
        }
        cmp = compareStrings(full, committed);
      }
      if (cmp >= 0) doomed.push(p);
    }
    // Sidecars whose data object is gone (a crash between the two PUTs) are exact: drop those
    // at or past the committed position.
    const orphans: string[] = [];
    const names = new Set(placed.map((p) => nameOf(p.object.key)));
    for (const [name, object] of sidecars) {
      const target = sidecarTarget(name);
      if (target === undefined || names.has(target)) continue;
      const bytes = await this.store.get(object.key);
      const full = bytes === undefined ? undefined : Buffer.from(bytes).toString('utf8');
      if (full !== undefined && full[0] === scheme && compareStrings(full, committed) >= 0)
        orphans.push(object.key);
    }
    // Data objects first, then their sidecars: an interrupted recovery never leaves a shortened
    // object without the sidecar that places it.
    await this.store.delete(doomed.map((p) => p.object.key));
    const doomedSidecars = doomed.flatMap((p) =>
      p.parsed.kind === 'hashed' ? [dir + p.parsed.sidecar] : [],
    );
    await this.store.delete([...doomedSidecars, ...orphans]);
    return doomed.map((p) => this.ref(p.object, p.parsed));
  }

  /**
   * Lists the table's data objects: one writer's in start-position order (then by fence, a
   * name from before fences first), or every writer's ordered by writer, then position.
   */
  async list(table: string, writer?: string): Promise<ObjectRef[]> {
    const dir = tablePrefix(this.prefix, table);
    const { placed } = await this.scan(dir, writer);
    const sortKeys = new Map<PlacedObject, string>();
    const positions = new Map<PlacedObject, string | undefined>();
    for (const p of placed) {
      if (p.parsed.kind === 'plain') {
        positions.set(p, p.parsed.position);
        sortKeys.set(p, p.parsed.position);
      } else {
        // Best effort without a sidecar: the visible prefix orders it against most names.
        const full = await this.readSidecar(dir, p, table);
        positions.set(p, full);
        sortKeys.set(p, full ?? `${p.parsed.visible}\uffff${p.parsed.hash}`);
      }
    }
    return [...placed]
      .sort(
        (a, b) =>
          compareStrings(a.parsed.writer, b.parsed.writer) ||
          compareStrings(sortKeys.get(a)!, sortKeys.get(b)!) ||
          (a.parsed.fence ?? 0) - (b.parsed.fence ?? 0),
      )
      .map((p) => this.ref(p.object, p.parsed, positions.get(p)));
  }

  /** Deletes every object of the writer in the table, data objects before their sidecars. */
  async discard(target: LakeTable): Promise<ObjectRef[]> {
    const dir = tablePrefix(this.prefix, target.table);
    const { placed, sidecars } = await this.scan(dir, target.writer);
    await this.store.delete(placed.map((p) => p.object.key));
    await this.store.delete([...sidecars.values()].map((o) => o.key));
    return placed.map((p) => this.ref(p.object, p.parsed));
  }

  /**
   * Lists a table folder (or, with a writer, only that writer's names in it, and with `after`
   * only those past the given bounds): the data objects (parsed) and sidecars by name. Other
   * writers' objects are never returned for a writer.
   */
  private async scan(
    dir: string,
    writer: string | undefined,
    after?: { readonly data: string; readonly sidecars: string },
  ): Promise<{ placed: PlacedObject[]; sidecars: Map<string, StoredObject> }> {
    const placed: PlacedObject[] = [];
    const sidecars = new Map<string, StoredObject>();
    const listing =
      writer === undefined
        ? await this.store.list(dir)
        : // Two listings by key prefix: the writer's data objects, and its sidecars (`_<writer>.`).
          [
            ...(await this.store.list(`${dir}${writer}.`, after?.data)),
            ...(await this.store.list(`${dir}${SIDECAR_PREFIX}${writer}.`, after?.sidecars)),
          ];
    for (const object of listing) {
      const name = object.key.slice(dir.length);
      const parsed = parseObjectName(name);
      if (parsed) {
        if (writer === undefined || parsed.writer === writer) placed.push({ object, parsed });
        continue;
      }
      const data = sidecarTarget(name);
      if (data !== undefined && (writer === undefined || parseObjectName(data)?.writer === writer))
        sidecars.set(name, object);
      // Anything else (temp files, foreign objects, sub-folders) is not ours: leave it alone.
    }
    return { placed, sidecars };
  }

  /** The full start position of a shortened name, if its sidecar exists and matches the name. */
  private async readSidecar(dir: string, p: PlacedObject, table: string): Promise<string | undefined> {
    if (p.parsed.kind !== 'hashed') return p.parsed.position;
    const bytes = await this.store.get(dir + p.parsed.sidecar);
    if (bytes === undefined) return undefined;
    const full = Buffer.from(bytes).toString('utf8');
    const expected = objectKey(this.prefix, table, p.parsed.writer, full, p.parsed.fence, p.parsed.part).key;
    return expected === p.object.key ? full : undefined;
  }

  private ref(object: StoredObject, parsed: ParsedName, position?: Position): ObjectRef {
    const startPosition = parsed.kind === 'plain' ? parsed.position : position;
    return {
      uri: this.store.uri(object.key),
      bytes: object.size,
      rows: -1,
      writer: parsed.writer,
      ...(startPosition !== undefined ? { startPosition } : {}),
      ...(parsed.fence !== undefined ? { fence: parsed.fence } : {}),
    };
  }
}

function nameOf(key: string): string {
  return key.slice(key.lastIndexOf('/') + 1);
}

/**
 * Checks that every batch belongs to `table`, shares one write mode, and carries the table's
 * wire schema (same data columns, names and Arrow types, in order). Returns the write mode.
 */
function checkBatches(table: string, schema: Schema, batches: readonly Batch[]): WriteMode {
  const mode = batches[0]!.writeMode;
  const expected = wireSchema(schema).fields;
  for (const b of batches) {
    if (b.table !== table) {
      throw new SinkError(
        'SINK_BATCH_MISMATCH',
        table,
        `a batch for table ${b.table} was passed to the write of ${table}`,
      );
    }
    if (b.writeMode !== mode) {
      throw new BatchError(
        `batches of one write to ${table} mix write modes ${mode} and ${b.writeMode}; write them separately`,
      );
    }
    const got = b.record.schema.fields;
    const same =
      got.length === expected.length &&
      got.every((f, i) => f.name === expected[i]!.name && util.compareTypes(f.type, expected[i]!.type));
    if (!same) {
      const describe = (fs: readonly { name: string; type: unknown }[]) =>
        fs
          .slice(0, fs.length - METADATA_COLUMNS.length)
          .map((f) => `${f.name} ${String(f.type)}`)
          .join(', ');
      throw new SinkError(
        'SINK_BATCH_MISMATCH',
        table,
        `a batch of ${table} does not match the table's wire schema: got [${describe(got)}], expected [${describe(expected)}]; the source's schema changed under the run, rerun to re-introspect`,
      );
    }
  }
  return mode;
}

/**
 * The key (and sidecar key) of an object of a table its catalog placed: `data/<object name>` in
 * the table's folder, as Iceberg writers lay data files out, named as under the lake (writer,
 * start position, fence: unique per attempt, so never rewritten).
 */
function placedObjectKey(
  folder: TableFolder,
  table: string,
  writer: string,
  startPosition: Position,
  fence: number,
  part?: number,
): { key: string; sidecarKey: string | undefined } {
  const { name, sidecar } = objectName(table, writer, startPosition, fence, part);
  return {
    key: folderPath(folder, `data/${name}`),
    sidecarKey: sidecar === undefined ? undefined : folderPath(folder, `data/${sidecar}`),
  };
}
