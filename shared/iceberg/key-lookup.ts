/**
 * Where the live rows of a set of primary keys are in an Iceberg table: for each key found, every
 * `(data file, 0-based row position)` of the current snapshot that holds it and no position delete
 * file has deleted. The lookup decision 0026 builds current-state commits on (position deletes
 * found through the table's own key columns); groundwork only, nothing calls it yet (issue 31).
 *
 * Owns: the pruning of data files by their manifest key bounds (a file is read only when some
 * wanted key lies inside the lower/upper bound of every key column; a file without bounds for a
 * column is never pruned on it), the read of the key columns alone (hyparquet over ranged reads of
 * the object store: the footer, then the key columns' chunks, one row group at a time), the
 * exclusion of positions deleted by the table's position delete files (content 1) whose sequence
 * number is not below the data file's, and the account of what was read (`KeyLookupStats`), for
 * a bench to measure. Its pieces are exported for a scan of the whole table
 * (./convert-current-state.ts): the live files of a snapshot (`liveFilesOf`), the positions
 * delete files delete (`deletedPositionsOf`), and the raw read of given field ids of a data file
 * (`readFieldsRaw`).
 *
 * Invariants: a file is matched by field id (Parquet `field_id`), never by column name; key values
 * compare in their Iceberg single-value form (./single-value.ts): int/date `number`, long
 * `bigint`, string `string`, decimal the unscaled `bigint`, uuid-as-string `string`. Parquet
 * values are decoded raw (no logical-type conversion), so a decimal never passes through a
 * float. Reads only files under the table's folder (./table-folder.ts `keyInFolder`). Equality
 * delete files are not applied: a table with one is refused (tidemark never writes them, decision
 * 0026). Pure reads: writes nothing.
 */
import { parquetMetadataAsync, parquetRead } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { SinkError } from '../contracts/errors.js';
import type { ObjectStore } from '../sink/object-store.js';
import { parentManifests } from './append.js';
import type { LoadedTable, TableIdent } from './catalog.js';
import { identText } from './catalog.js';
import {
  EntryStatus,
  FileContent,
  type IcebergDataFile,
  type IcebergManifestEntry,
  inheritFromManifest,
  readManifest,
} from './manifest.js';
import { ManifestContent } from './manifest-list.js';
import { currentSnapshot } from './metadata.js';
import {
  compareValues,
  deserializeValue,
  fromTwosComplementBE,
  type PrimitiveType,
  primitiveName,
  primitiveOf,
  type SingleValue,
} from './single-value.js';
import type { IcebergField, IcebergSchema, IcebergTableMetadata } from './spec.js';
import { keyInFolder, type TableFolder } from './table-folder.js';

/** Field ids of a position delete file's columns (spec "Position Delete Files"). */
export const POSITION_DELETE_FILE_PATH_ID = 2147483546;
export const POSITION_DELETE_POS_ID = 2147483545;

/** A key value as a caller gives it: see the module comment (a long may be a safe-integer `number`, a decimal its text). */
export type KeyValue = number | bigint | string;

/** One live row of a key. */
export interface RowLocation {
  readonly file_path: string;
  readonly pos: number;
}

/** What the lookup read, for a bench. */
export interface KeyLookupStats {
  /** Live data files of the current snapshot. */
  readonly dataFiles: number;
  /** Of those, skipped by their key bounds. */
  readonly dataFilesPruned: number;
  /** Of those, whose key columns were read. */
  readonly dataFilesRead: number;
  /** Bytes fetched from data files (footers and key column chunks). */
  readonly dataBytesRead: number;
  /** Key values scanned (rows of the files read). */
  readonly rowsScanned: number;
  /** Live position delete files of the current snapshot. */
  readonly deleteFiles: number;
  /** Of those, read (the others reference no file that was read). */
  readonly deleteFilesRead: number;
  readonly deleteBytesRead: number;
  /** Rows of wanted keys that a position delete file excluded. */
  readonly positionsDeleted: number;
  /** Manifests read (data and delete). */
  readonly manifestsRead: number;
}

export interface KeyLookupResult {
  /** Per wanted key that has a live row, every such row, by file then position. Key: `keyText`. */
  readonly rows: ReadonlyMap<string, readonly RowLocation[]>;
  /** The data files whose key columns were read, by path (their partition and spec, for deletes of their rows). */
  readonly files: ReadonlyMap<string, IcebergDataFile>;
  readonly stats: KeyLookupStats;
}

/** A resolved key column: its field, type and position in a key tuple. */
export interface KeyColumn {
  readonly field: IcebergField;
  readonly type: PrimitiveType;
}

/** The Iceberg types a key column may have for the lookup (and so for a current-state table). */
export const LOOKUP_KEY_KINDS: ReadonlySet<string> = new Set([
  'int',
  'long',
  'string',
  'decimal',
  'date',
  'uuid',
]);

/** The canonical value of `v` for a key column of type `t` (throws when it cannot be one). */
export function keyValueOf(t: PrimitiveType, v: KeyValue): SingleValue {
  const fail = () => new TypeError(`${String(v)} is not a key value of type ${primitiveName(t)}`);
  switch (t.kind) {
    case 'int':
    case 'date':
      if (typeof v === 'number' && Number.isInteger(v)) return v;
      if (typeof v === 'bigint' && v >= -(2n ** 31n) && v < 2n ** 31n) return Number(v);
      throw fail();
    case 'long':
      if (typeof v === 'bigint') return v;
      if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
      if (typeof v === 'string' && /^-?\d+$/.test(v)) return BigInt(v);
      throw fail();
    case 'decimal': {
      if (typeof v === 'bigint') return v;
      if (typeof v !== 'string') throw fail();
      const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(v);
      if (!m || (m[3] ?? '').length > t.scale) throw fail();
      const unscaled = BigInt(`${m[2]}${(m[3] ?? '').padEnd(t.scale, '0')}`);
      return m[1] === '-' ? -unscaled : unscaled;
    }
    case 'string':
    case 'uuid':
      if (typeof v === 'string') return t.kind === 'uuid' ? v.toLowerCase() : v;
      throw fail();
    default:
      throw fail();
  }
}

/** The text a key tuple (canonical values) is known by in `KeyLookupResult.rows`. */
export function keyText(values: readonly SingleValue[]): string {
  return JSON.stringify(values.map((v) => (typeof v === 'bigint' ? `${v}n` : v)));
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A raw Parquet value (no logical-type conversion) of a key column as its canonical value; undefined for NULL. */
export function parquetValueOf(t: PrimitiveType, raw: unknown): SingleValue | undefined {
  if (raw === null || raw === undefined) return undefined;
  switch (t.kind) {
    case 'int':
    case 'date':
      return typeof raw === 'bigint' ? Number(raw) : (raw as number);
    case 'long':
      return typeof raw === 'bigint' ? raw : BigInt(raw as number);
    case 'decimal':
      if (raw instanceof Uint8Array) return raw.length === 0 ? 0n : fromTwosComplementBE(raw);
      return typeof raw === 'bigint' ? raw : BigInt(raw as number);
    case 'string':
      return raw instanceof Uint8Array ? utf8.decode(raw) : String(raw);
    case 'uuid': {
      if (!(raw instanceof Uint8Array)) return String(raw).toLowerCase();
      const h = Buffer.from(raw).toString('hex');
      return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    }
    default:
      return undefined;
  }
}

/** Whether `v` lies within the file's bounds of `column` (true where a bound is missing or unreadable). */
function withinBounds(file: IcebergDataFile, column: KeyColumn, v: SingleValue): boolean {
  // uuid bounds are never trusted (readers disagree on their order, ./data-file.ts); keys as strings compare as strings.
  if (column.type.kind === 'uuid') return true;
  const bound = (map: ReadonlyMap<number, Uint8Array> | undefined) => {
    const bytes = map?.get(column.field.id);
    if (bytes === undefined) return undefined;
    try {
      return deserializeValue(column.type, bytes);
    } catch {
      return undefined;
    }
  };
  const lo = bound(file.lower_bounds);
  if (lo !== undefined && compareValues(column.type, v, lo) < 0) return false;
  const hi = bound(file.upper_bounds);
  if (hi !== undefined && compareValues(column.type, v, hi) > 0) return false;
  return true;
}

/** A ranged reader of one object, counting the bytes it fetched. */
function asyncBufferOf(
  store: ObjectStore,
  key: string,
  byteLength: number,
  count: (n: number) => void,
  missing: () => Error,
): { byteLength: number; slice(start: number, end?: number): Promise<ArrayBuffer> } {
  let whole: Promise<Uint8Array | undefined> | undefined;
  return {
    byteLength,
    async slice(start: number, end = byteLength) {
      let bytes: Uint8Array | undefined;
      if (store.getRange) {
        bytes = await store.getRange(key, start, end);
        if (bytes === undefined) throw missing();
        count(bytes.length);
      } else {
        // A store without ranged reads: fetched once, whole.
        if (!whole) {
          whole = store.get(key);
          const w = await whole;
          if (w === undefined) throw missing();
          count(w.length);
        }
        const w = await whole;
        if (w === undefined) throw missing();
        bytes = w.subarray(start, end);
      }
      return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length) as ArrayBuffer;
    },
  };
}

/** Footer bytes fetched first (hyparquet reads more when the footer is larger). */
const FOOTER_FETCH = 64 * 1024;

interface ParquetColumns {
  readonly file: ReturnType<typeof asyncBufferOf>;
  readonly metadata: Awaited<ReturnType<typeof parquetMetadataAsync>>;
  /** Top-level column name of each wanted field id. */
  readonly names: ReadonlyMap<number, string>;
}

/** Opens a Parquet file: its footer, with the wanted columns' logical types dropped (raw values). */
async function openParquet(
  store: ObjectStore,
  key: string,
  size: number,
  fieldIds: readonly number[],
  count: (n: number) => void,
  missing: () => Error,
): Promise<ParquetColumns> {
  const file = asyncBufferOf(store, key, size, count, missing);
  const metadata = await parquetMetadataAsync(file, { initialFetchSize: Math.min(FOOTER_FETCH, size) });
  const names = new Map<number, string>();
  // schema[0] is the root; a top-level leaf is a child of it with no children of its own.
  const rootChildren = metadata.schema[0]?.num_children ?? 0;
  let i = 1;
  for (let c = 0; c < rootChildren && i < metadata.schema.length; c++) {
    const el = metadata.schema[i]!;
    if (!el.num_children && el.field_id !== undefined && fieldIds.includes(el.field_id)) {
      names.set(el.field_id, el.name);
      // Raw values: no DECIMAL -> float, no UTF8 -> string here (decoded by the Iceberg type).
      (el as { converted_type?: unknown }).converted_type = undefined;
      (el as { logical_type?: unknown }).logical_type = undefined;
    }
    i += 1 + subtreeSize(metadata.schema, i);
  }
  return { file, metadata, names };
}

/** How many schema elements lie under element `i` (its descendants). */
function subtreeSize(schema: readonly { num_children?: number }[], i: number): number {
  let n = 0;
  let j = i + 1;
  for (let c = 0; c < (schema[i]?.num_children ?? 0); c++) {
    const d = 1 + subtreeSize(schema, j);
    n += d;
    j += d;
  }
  return n;
}

/** Rows `start` to `end` of one column, raw (the range is one row group: only its chunk is fetched). */
function readColumn(pq: ParquetColumns, name: string, start: number, end: number): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    parquetRead({
      file: pq.file,
      metadata: pq.metadata,
      columns: [name],
      rowStart: start,
      rowEnd: end,
      rowFormat: 'array',
      compressors,
      utf8: false,
      onComplete: (rows: unknown[][]) => resolve(rows.map((r) => r[0])),
    }).catch(reject);
  });
}

/** One column's raw values, row group by row group (`each(values)`). */
async function eachGroup(
  pq: ParquetColumns,
  name: string,
  each: (values: readonly unknown[]) => void,
): Promise<void> {
  let start = 0;
  for (const rg of pq.metadata.row_groups) {
    const rows = Number(rg.num_rows);
    if (rows > 0) each(await readColumn(pq, name, start, start + rows));
    start += rows;
  }
}

/** A live file of a snapshot with its (inherited) data sequence number. */
/** Files read at once by a lookup: on S3 each read is a GET or two, and they are independent. */
const READ_CONCURRENCY = 8;

/** Runs `each` over `items`, at most `limit` at once; rejects with the first failure. */
async function forEachLimit<T>(
  items: readonly T[],
  limit: number,
  each: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await each(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

export interface LiveFile {
  readonly file: IcebergDataFile;
  readonly seq: number;
}

/** A data file's key index: key text -> its row positions (one number when there is one). */
type FileKeys = Map<string, number | number[]>;

/**
 * What lookups of one writer have read of a table's immutable files, kept for the next lookup:
 * manifests' entries, position delete files' rows, data files' key indexes. Sound because those
 * files never change: each is written once, only-if-absent, under a name unique to its attempt
 * (a data file's writer, position and fence; a manifest's or delete file's commit id and
 * attempt), so a name always means the same bytes. Which files are live is never cached: each
 * lookup reads the snapshot's manifest list. Bounded by `maxEntries` (rows of data and delete
 * files held); the least recently used files go first. A lost or cold cache costs reads, never
 * a wrong answer.
 */
export class KeyLookupCache {
  private readonly manifests = new Map<string, readonly IcebergManifestEntry[]>();
  private readonly deleteRows = new Map<string, { readonly paths: string[]; readonly pos: number[] }>();
  private readonly dataKeys = new Map<string, FileKeys>();
  private readonly sizes = new Map<string, number>();
  private entries = 0;

  /** @param maxEntries rows of data and delete files held at most (about 100 bytes each). */
  constructor(readonly maxEntries = 1_000_000) {}

  /** Rows held now. */
  get size(): number {
    return this.entries;
  }

  manifest(path: string): readonly IcebergManifestEntry[] | undefined {
    return this.touch(this.manifests, `m${path}`, path);
  }

  setManifest(path: string, entries: readonly IcebergManifestEntry[]): void {
    // Entries are few per manifest (files, not rows): counted as one row each.
    this.remember(this.manifests, `m${path}`, path, entries, entries.length);
  }

  deletes(path: string): { readonly paths: string[]; readonly pos: number[] } | undefined {
    return this.touch(this.deleteRows, `d${path}`, path);
  }

  setDeletes(path: string, rows: { readonly paths: string[]; readonly pos: number[] }): void {
    this.remember(this.deleteRows, `d${path}`, path, rows, rows.pos.length);
  }

  keys(path: string, ids: readonly number[]): FileKeys | undefined {
    return this.touch(this.dataKeys, `k${path}`, `${path}\u0000${ids.join(',')}`);
  }

  setKeys(path: string, ids: readonly number[], index: FileKeys, rows: number): void {
    this.remember(this.dataKeys, `k${path}`, `${path}\u0000${ids.join(',')}`, index, rows);
  }

  /** Forgets everything (a table's files were deleted: names may come back with other bytes). */
  clear(): void {
    this.manifests.clear();
    this.deleteRows.clear();
    this.dataKeys.clear();
    this.sizes.clear();
    this.entries = 0;
  }

  private touch<V>(map: Map<string, V>, sizeKey: string, key: string): V | undefined {
    const v = map.get(key);
    if (v === undefined) return undefined;
    // Most recently used last: Map iteration order is insertion order.
    map.delete(key);
    map.set(key, v);
    const n = this.sizes.get(sizeKey);
    if (n !== undefined) {
      this.sizes.delete(sizeKey);
      this.sizes.set(sizeKey, n);
    }
    return v;
  }

  private remember<V>(map: Map<string, V>, sizeKey: string, key: string, value: V, rows: number): void {
    if (rows > this.maxEntries) return;
    if (!map.has(key)) {
      map.set(key, value);
      this.sizes.set(sizeKey, (this.sizes.get(sizeKey) ?? 0) + rows);
      this.entries += rows;
    }
    for (const [oldest, n] of this.sizes) {
      if (this.entries <= this.maxEntries) break;
      this.sizes.delete(oldest);
      this.entries -= n;
      const path = oldest.slice(1);
      if (oldest[0] === 'm') this.manifests.delete(path);
      else if (oldest[0] === 'd') this.deleteRows.delete(path);
      else for (const k of this.dataKeys.keys()) if (k.startsWith(`${path}\u0000`)) this.dataKeys.delete(k);
    }
  }
}

/** The live data and position delete files of a table's current snapshot, in manifest order. */
export interface LiveFiles {
  readonly data: readonly LiveFile[];
  readonly deletes: readonly LiveFile[];
  /** Manifests read. */
  readonly manifestsRead: number;
}

/** Reads only files under the table's folder: the key of `uri` there, or a SinkError. */
function keyIn(folder: TableFolder, ident: TableIdent, uri: string, what: string): string {
  const key = keyInFolder(folder, uri);
  if (key === undefined)
    throw new SinkError(
      'ICEBERG_METADATA_INVALID',
      identText(ident),
      `${identText(ident)} names ${what} ${uri}, outside the table's folder: tidemark reads files only there`,
    );
  return key;
}

function missingLiveFile(ident: TableIdent, uri: string): SinkError {
  return new SinkError(
    'ICEBERG_METADATA_INVALID',
    identText(ident),
    `${uri}, a live file of ${identText(ident)}'s current snapshot, is missing: restore it, or reset the table`,
  );
}

function requireParquet(ident: TableIdent, file: IcebergDataFile): void {
  if (file.file_format.toUpperCase() !== 'PARQUET')
    throw new Error(
      `${file.file_path} of ${identText(ident)} is ${file.file_format}: the key lookup reads Parquet files only`,
    );
}

/**
 * The live files of `metadata`'s current snapshot (none without one), data files in the order
 * their manifests list them.
 * @throws SinkError `ICEBERG_METADATA_INVALID` when a manifest is outside the folder or missing;
 *   Error when the table has equality delete files.
 */
export async function liveFilesOf(
  folder: TableFolder,
  ident: TableIdent,
  metadata: IcebergTableMetadata,
  cache?: KeyLookupCache,
): Promise<LiveFiles> {
  const data: LiveFile[] = [];
  const deletes: LiveFile[] = [];
  let manifestsRead = 0;
  const snapshot = currentSnapshot(metadata);
  if (!snapshot) return { data, deletes, manifestsRead };
  const manifests = await parentManifests(folder, ident, snapshot['manifest-list']);
  // Read at once, taken in list order (data files keep their manifest order).
  const read: (readonly IcebergManifestEntry[])[] = [];
  await forEachLimit(manifests, READ_CONCURRENCY, async (m, i) => {
    let entries = cache?.manifest(m.manifest_path);
    if (entries === undefined) {
      const bytes = await folder.store.get(keyIn(folder, ident, m.manifest_path, 'the manifest'));
      if (bytes === undefined)
        throw new SinkError(
          'ICEBERG_METADATA_INVALID',
          identText(ident),
          `the manifest ${m.manifest_path} of ${identText(ident)} is missing`,
        );
      manifestsRead++;
      entries = readManifest(bytes).entries;
      cache?.setManifest(m.manifest_path, entries);
    }
    read[i] = entries;
  });
  for (const [i, m] of manifests.entries()) {
    for (const e of read[i]!) {
      if (e.status === EntryStatus.DELETED) continue;
      const live = inheritFromManifest(e, m);
      const item = { file: live.data_file, seq: live.sequence_number ?? 0 };
      if (m.content === ManifestContent.DATA) data.push(item);
      else if (live.data_file.content === FileContent.POSITION_DELETES) deletes.push(item);
      else
        throw new Error(
          `${identText(ident)} has equality delete files (${live.data_file.file_path}): the key lookup applies position deletes only`,
        );
    }
  }
  return { data, deletes, manifestsRead };
}

/** What `deletedPositionsOf` read. */
export interface DeletedPositions {
  /** Deleted positions per data file path. */
  readonly positions: ReadonlyMap<string, ReadonlySet<number>>;
  readonly deleteFilesRead: number;
  readonly deleteBytesRead: number;
}

/**
 * The positions of the data files `dataSeq` (path -> data sequence number) that the position
 * delete files `deletes` delete: a delete applies to a data file whose sequence number is not
 * above its own. A delete file whose `referenced_data_file` or `file_path` bounds reach none of
 * the files is not read.
 * @throws SinkError `ICEBERG_METADATA_INVALID` when a delete file is missing, outside the folder,
 *   or lacks the file_path/pos columns.
 */
export async function deletedPositionsOf(
  folder: TableFolder,
  ident: TableIdent,
  deletes: readonly LiveFile[],
  dataSeq: ReadonlyMap<string, number>,
  cache?: KeyLookupCache,
): Promise<DeletedPositions> {
  const deleted = new Map<string, Set<number>>();
  let deleteFilesRead = 0;
  let deleteBytesRead = 0;
  const pathType: PrimitiveType = { kind: 'string' };
  const pathField = {
    id: POSITION_DELETE_FILE_PATH_ID,
    name: 'file_path',
    required: true,
    type: 'string',
  } as const;
  await forEachLimit(deletes, READ_CONCURRENCY, async ({ file: del, seq }) => {
    if (del.referenced_data_file !== undefined && !dataSeq.has(del.referenced_data_file)) return;
    const reaches = [...dataSeq.keys()].some((p) =>
      withinBounds(del, { field: pathField, type: pathType }, p),
    );
    if (!reaches) return;
    const apply = (rows: { readonly paths: string[]; readonly pos: number[] }) => {
      for (let i = 0; i < rows.pos.length; i++) {
        const path = rows.paths[i]!;
        const fileSeq = dataSeq.get(path);
        if (fileSeq === undefined || seq < fileSeq) continue;
        const set = deleted.get(path) ?? new Set<number>();
        deleted.set(path, set);
        set.add(rows.pos[i]!);
      }
    };
    const known = cache?.deletes(del.file_path);
    if (known) {
      apply(known);
      return;
    }
    requireParquet(ident, del);
    deleteFilesRead++;
    const pq = await openParquet(
      folder.store,
      keyIn(folder, ident, del.file_path, 'the position delete file'),
      del.file_size_in_bytes,
      [POSITION_DELETE_FILE_PATH_ID, POSITION_DELETE_POS_ID],
      (n) => {
        deleteBytesRead += n;
      },
      () => missingLiveFile(ident, del.file_path),
    );
    const pathName = pq.names.get(POSITION_DELETE_FILE_PATH_ID);
    const posName = pq.names.get(POSITION_DELETE_POS_ID);
    if (pathName === undefined || posName === undefined)
      throw new SinkError(
        'ICEBERG_METADATA_INVALID',
        identText(ident),
        `the position delete file ${del.file_path} of ${identText(ident)} has no file_path/pos columns (field ids ${POSITION_DELETE_FILE_PATH_ID}, ${POSITION_DELETE_POS_ID})`,
      );
    const paths: string[] = [];
    await eachGroup(pq, pathName, (values) => {
      for (let i = 0; i < values.length; i++) paths.push(parquetValueOf(pathType, values[i]) as string);
    });
    const pos: number[] = [];
    await eachGroup(pq, posName, (values) => {
      for (let i = 0; i < values.length; i++) pos.push(Number(values[i]));
    });
    const rows = { paths, pos };
    cache?.setDeletes(del.file_path, rows);
    apply(rows);
  });
  return { positions: deleted, deleteFilesRead, deleteBytesRead };
}

/**
 * Reads the columns with field ids `fieldIds` (top-level primitives) of the live data file `file`,
 * raw (no logical-type conversion: strings as UTF-8 bytes, decimals as their unscaled bytes),
 * one row group at a time: `each(groupStart, columns)` gets the group's first row position and
 * its values per field id. Only the footer and those columns' chunks are fetched. Returns the
 * bytes fetched.
 * @throws SinkError `ICEBERG_METADATA_INVALID` when the file is missing, outside the table's
 *   folder, or has no column of a wanted field id.
 */
export async function readFieldsRaw(
  folder: TableFolder,
  ident: TableIdent,
  file: IcebergDataFile,
  fieldIds: readonly number[],
  each: (groupStart: number, columns: ReadonlyMap<number, readonly unknown[]>) => void,
): Promise<number> {
  requireParquet(ident, file);
  let bytesRead = 0;
  const pq = await openParquet(
    folder.store,
    keyIn(folder, ident, file.file_path, 'the data file'),
    file.file_size_in_bytes,
    fieldIds,
    (n) => {
      bytesRead += n;
    },
    () => missingLiveFile(ident, file.file_path),
  );
  const names = fieldIds.map((id) => {
    const name = pq.names.get(id);
    if (name === undefined)
      throw new SinkError(
        'ICEBERG_METADATA_INVALID',
        identText(ident),
        `the data file ${file.file_path} of ${identText(ident)} has no column with field id ${id}`,
      );
    return name;
  });
  // Column by column per row group, so only one group's values are held at a time.
  let groupStart = 0;
  for (const rg of pq.metadata.row_groups) {
    const n = Number(rg.num_rows);
    if (n > 0) {
      const columns = new Map<number, readonly unknown[]>();
      for (let c = 0; c < fieldIds.length; c++)
        columns.set(fieldIds[c]!, await readColumn(pq, names[c]!, groupStart, groupStart + n));
      each(groupStart, columns);
    }
    groupStart += n;
  }
  return bytesRead;
}

/**
 * The current schema of `meta`.
 * @throws SinkError `ICEBERG_METADATA_INVALID` when the metadata has none.
 */
export function currentSchemaOf(ident: TableIdent, meta: IcebergTableMetadata): IcebergSchema {
  const schema = meta.schemas.find((s) => s['schema-id'] === meta['current-schema-id']);
  if (!schema)
    throw new SinkError(
      'ICEBERG_METADATA_INVALID',
      identText(ident),
      `${identText(ident)} has no current schema`,
    );
  return schema;
}

/**
 * The key columns `keyColumns` of `schema`, each of a type the lookup takes (`LOOKUP_KEY_KINDS`).
 * @throws TypeError when one is unknown or of another type.
 */
export function lookupKeyColumns(
  ident: TableIdent,
  schema: IcebergSchema,
  keyColumns: readonly string[],
): KeyColumn[] {
  if (keyColumns.length === 0) throw new TypeError('a key lookup needs at least one key column');
  return keyColumns.map((name) => {
    const field = schema.fields.find((f) => f.name === name);
    const type = field ? primitiveOf(field.type) : undefined;
    if (!field || !type || !LOOKUP_KEY_KINDS.has(type.kind))
      throw new TypeError(
        `${identText(ident)} has no key column ${name} of type int, long, string, decimal, date or uuid`,
      );
    return { field, type };
  });
}

/**
 * The live rows of `keys` (tuples in the order of `keyColumns`) in `table`'s current snapshot.
 * @throws SinkError `ICEBERG_METADATA_INVALID` when a manifest or file the snapshot names is
 *   outside the table's folder or missing.
 * @throws TypeError when a key column is unknown or of a type the lookup does not take, or a key
 *   value is not one of its column's type; Error when the table has equality delete files.
 */
export async function lookupKeys(
  folder: TableFolder,
  ident: TableIdent,
  table: LoadedTable,
  keyColumns: readonly string[],
  keys: readonly (readonly KeyValue[])[],
  cache?: KeyLookupCache,
): Promise<KeyLookupResult> {
  const meta = table.metadata;
  const schema = currentSchemaOf(ident, meta);
  const columns = lookupKeyColumns(ident, schema, keyColumns);
  const wanted = new Map<string, SingleValue[]>();
  for (const k of keys) {
    if (k.length !== columns.length)
      throw new TypeError(`a key has ${k.length} values for ${columns.length} key columns`);
    const values = k.map((v, i) => keyValueOf(columns[i]!.type, v));
    wanted.set(keyText(values), values);
  }
  const stats = {
    dataFiles: 0,
    dataFilesPruned: 0,
    dataFilesRead: 0,
    dataBytesRead: 0,
    rowsScanned: 0,
    deleteFiles: 0,
    deleteFilesRead: 0,
    deleteBytesRead: 0,
    positionsDeleted: 0,
    manifestsRead: 0,
  };
  const rows = new Map<string, RowLocation[]>();
  const files = new Map<string, IcebergDataFile>();
  if (!currentSnapshot(meta) || wanted.size === 0) return { rows, files, stats };

  // The current snapshot's live files, with their inherited sequence numbers.
  const { data, deletes, manifestsRead } = await liveFilesOf(folder, ident, meta, cache);
  stats.manifestsRead = manifestsRead;
  stats.dataFiles = data.length;
  stats.deleteFiles = deletes.length;

  // Prune: a file stays when some wanted key lies within the bounds of every key column.
  const wantedValues = [...wanted.values()];
  const candidates = data.filter(({ file }) => {
    const keep = wantedValues.some((values) => columns.every((c, i) => withinBounds(file, c, values[i]!)));
    if (!keep) stats.dataFilesPruned++;
    return keep;
  });
  if (candidates.length === 0) return { rows, files, stats };

  // Positions deleted per candidate file (by delete files whose sequence number is not below the file's).
  const candidateSeq = new Map(candidates.map(({ file, seq }) => [file.file_path, seq]));
  const deleted = await deletedPositionsOf(folder, ident, deletes, candidateSeq, cache);
  stats.deleteFilesRead = deleted.deleteFilesRead;
  stats.deleteBytesRead = deleted.deleteBytesRead;

  // Read the key columns of each candidate; a row matches when its tuple is wanted.
  const ids = columns.map((c) => c.field.id);
  const found = (text: string, file: IcebergDataFile, pos: number, gone: ReadonlySet<number> | undefined) => {
    if (gone?.has(pos)) {
      stats.positionsDeleted++;
      return;
    }
    const list = rows.get(text) ?? [];
    rows.set(text, list);
    list.push({ file_path: file.file_path, pos });
  };
  await forEachLimit(candidates, READ_CONCURRENCY, async ({ file }) => {
    files.set(file.file_path, file);
    const gone = deleted.positions.get(file.file_path);
    if (cache) {
      // The file's whole key index, read once per cache: then a wanted key costs a map lookup.
      let index = cache.keys(file.file_path, ids);
      if (index === undefined) {
        stats.dataFilesRead++;
        const built: FileKeys = new Map();
        let n = 0;
        stats.dataBytesRead += await readFieldsRaw(folder, ident, file, ids, (groupStart, values) => {
          const count = values.get(ids[0]!)!.length;
          for (let i = 0; i < count; i++) {
            const tuple = columns.map((c) => parquetValueOf(c.type, values.get(c.field.id)![i]));
            if (tuple.some((v) => v === undefined)) continue;
            const text = keyText(tuple as SingleValue[]);
            const pos = groupStart + i;
            const had = built.get(text);
            if (had === undefined) built.set(text, pos);
            else if (typeof had === 'number') built.set(text, [had, pos]);
            else had.push(pos);
          }
          n += count;
          stats.rowsScanned += count;
        });
        cache.setKeys(file.file_path, ids, built, n);
        index = built;
      }
      for (const text of wanted.keys()) {
        const at = index.get(text);
        if (at === undefined) continue;
        if (typeof at === 'number') found(text, file, at, gone);
        else for (const pos of at) found(text, file, pos, gone);
      }
      return;
    }
    stats.dataFilesRead++;
    stats.dataBytesRead += await readFieldsRaw(folder, ident, file, ids, (groupStart, values) => {
      const n = values.get(ids[0]!)!.length;
      for (let i = 0; i < n; i++) {
        const tuple = columns.map((c) => parquetValueOf(c.type, values.get(c.field.id)![i]));
        if (tuple.some((v) => v === undefined)) continue;
        const text = keyText(tuple as SingleValue[]);
        if (wanted.has(text)) found(text, file, groupStart + i, gone);
      }
      stats.rowsScanned += n;
    });
  });
  // Files were read at once: each key's rows in file (manifest) order, then by position.
  const order = new Map(candidates.map(({ file }, i) => [file.file_path, i]));
  for (const list of rows.values())
    list.sort((a, b) => order.get(a.file_path)! - order.get(b.file_path)! || a.pos - b.pos);
  return { rows, files, stats };
}

/**
 * Every row's key tuple (the columns `keyColumns` of `schema`, matched by field id) of the Parquet
 * file at `uri` in the table's folder, in row order: the staged keys of a current-state commit
 * (./current-state.ts). Values in the form `lookupKeys` takes; a row with a NULL key part is left out.
 * @throws SinkError `ICEBERG_METADATA_INVALID` when the file is missing, outside the folder, or lacks a key column.
 */
export async function readKeyTuples(
  folder: TableFolder,
  ident: TableIdent,
  uri: string,
  size: number,
  schema: IcebergSchema,
  keyColumns: readonly string[],
): Promise<SingleValue[][]> {
  const invalid = (why: string) =>
    new SinkError(
      'ICEBERG_METADATA_INVALID',
      identText(ident),
      `the staged keys file ${uri} of ${identText(ident)} ${why}`,
    );
  const key = keyInFolder(folder, uri);
  if (key === undefined) throw invalid("is outside the table's folder");
  const columns = keyColumns.map((name) => {
    const field = schema.fields.find((f) => f.name === name);
    const type = field ? primitiveOf(field.type) : undefined;
    if (!field || !type)
      throw invalid(`names key column ${name}, which the table's schema does not have as a primitive`);
    return { field, type };
  });
  const pq = await openParquet(
    folder.store,
    key,
    size,
    columns.map((c) => c.field.id),
    () => undefined,
    () => invalid('is missing: restore it, or reset the table'),
  );
  const total = Number(pq.metadata.num_rows);
  const tuples: (SingleValue | undefined)[][] = Array.from({ length: total }, () => []);
  for (const c of columns) {
    const name = pq.names.get(c.field.id);
    if (name === undefined) throw invalid(`has no column with field id ${c.field.id} (${c.field.name})`);
    let at = 0;
    await eachGroup(pq, name, (values) => {
      for (let i = 0; i < values.length; i++, at++) tuples[at]!.push(parquetValueOf(c.type, values[i]));
    });
  }
  return tuples.filter((t): t is SingleValue[] => t.every((v) => v !== undefined));
}
