/**
 * The one-time conversion of an upsert table written as a change log (by the release before
 * current-state tables, issue 31: every version of a row a row of its own, deletes as `__op = d`
 * rows) into the current-state form decision 0026 defines: exactly the latest row per primary
 * key, deletes applied (`tidemark convert`, docs/iceberg.md "Converting a change-log upsert table").
 *
 * Owns: the scan and the winner rule. No data value is decoded or rewritten: from every live data
 * file of the current snapshot only the key columns, `__pos` and `__op` are read (by field id,
 * ./key-lookup.ts `readFieldsRaw`), minus the positions existing position delete files already
 * delete. Per key the winner is the row with the greatest `__pos` (compared as bytes; a tie goes
 * to the later row: the later file in manifest order, the later position in a file, as
 * ../sink/collapse.ts keeps the later row of a write). Every other row of the key, and the winner
 * itself when its `__op` is `d`, is deleted by position: position delete files per partition of
 * the data files they name, one delete manifest, ONE snapshot (./append.ts `commitSnapshot`) that
 * also sets `tidemark.table-kind = current-state`. A table with nothing to delete gets the
 * property alone (a property-only commit, made only on the very snapshot that was scanned).
 *
 * Invariants: the scan runs inside each commit attempt against the base that attempt is built on
 * (a conflict rescans the new base), so positions found in one snapshot are never applied to
 * another; delete files and the delete manifest are named by a commit id and the attempt (the
 * snapshot id it would create), written only if absent, and only superseded attempts' files are
 * deleted. A table already `current-state` is left alone. A row with a NULL key part is never
 * merged with another (a NULL equals nothing) and stays as it is.
 *
 * Memory: per distinct key one map entry (the key's text and the winner's file index, position,
 * `__pos` and whether it is a delete: about 200 bytes for a short key), per row to delete one
 * number (8 bytes), and the key, `__pos` and `__op` values of one row group of one file at a time.
 * Ten million keys with as many superseded rows need about 2 GB of heap.
 */
import { randomUUID } from 'node:crypto';
import { SinkError } from '../contracts/errors.js';
import { META_OP, META_POS } from '../dataplane/metadata.js';
import { commitSnapshot, type SnapshotAdds } from './append.js';
import { type Catalog, commitWithRetry, identText, type RetryOptions, type TableIdent } from './catalog.js';
import {
  attemptName,
  deleteLeftovers,
  type RowToDelete,
  TABLE_KIND_PROPERTY,
  tableKindOf,
  writeAttemptDeletes,
} from './current-state.js';
import {
  currentSchemaOf,
  deletedPositionsOf,
  keyText,
  liveFilesOf,
  lookupKeyColumns,
  parquetValueOf,
  readFieldsRaw,
} from './key-lookup.js';
import type { IcebergDataFile } from './manifest.js';
import { type CommitIdentity, currentSnapshot, setProperties } from './metadata.js';
import type { SingleValue } from './single-value.js';
import type { IcebergTableMetadata } from './spec.js';
import type { TableFolder } from './table-folder.js';

/** The writer id a conversion commits as (its commit ids are `convert-<uuid>`). */
export const CONVERT_WRITER_ID = 'tidemark-convert';

/** How far a scan is, after each data file. */
export interface ConvertProgress {
  readonly filesRead: number;
  readonly files: number;
  readonly rowsScanned: number;
  readonly bytesRead: number;
}

export interface ConvertOptions {
  /** The table's primary key columns (its schema's identifier fields). */
  readonly keyColumns: readonly string[];
  readonly nowMs: () => number;
  readonly onProgress?: (progress: ConvertProgress) => void;
  readonly retry?: RetryOptions;
}

/** What a conversion did. */
export type ConvertResult =
  | { readonly status: 'already-current-state' }
  | {
      readonly status: 'converted';
      /** Live rows read (those existing delete files had deleted not counted). */
      readonly rowsScanned: number;
      /** Rows deleted by position: superseded versions and the keys whose last change is a delete. */
      readonly rowsDeleted: number;
      /** Rows left: one per live key. */
      readonly rowsKept: number;
      readonly deleteFiles: number;
      /** The snapshot the commit made (absent for a property-only commit: nothing to delete). */
      readonly snapshotId?: bigint;
      /** Why cleaning up superseded attempts' files failed, if it did (the commit stands). */
      readonly cleanupError?: unknown;
    };

/** The scan of one base: what to delete, per data file. */
interface Scan {
  readonly rowsScanned: number;
  readonly rowsKept: number;
  /** Per data file (manifest order), the positions to delete (unsorted). */
  readonly deletes: readonly { readonly file: IcebergDataFile; readonly positions: number[] }[];
}

/** The current winner of a key. */
interface Winner {
  file: number;
  pos: number;
  /** `__pos` as latin1 text: one code unit per byte, so string order is byte order. */
  at: string;
  deleted: boolean;
}

const OP_DELETE = 'd'.charCodeAt(0);

function rawText(raw: unknown): string | undefined {
  if (raw === null || raw === undefined) return undefined;
  if (raw instanceof Uint8Array)
    return Buffer.from(raw.buffer, raw.byteOffset, raw.length).toString('latin1');
  return Buffer.from(String(raw), 'utf8').toString('latin1');
}

function isDeleteOp(raw: unknown): boolean {
  if (raw instanceof Uint8Array) return raw.length === 1 && raw[0] === OP_DELETE;
  return raw === 'd';
}

function refused(ident: TableIdent, why: string): SinkError {
  return new SinkError('ICEBERG_CONVERT_REFUSED', identText(ident), `${identText(ident)} ${why}`);
}

/**
 * Reads the key columns, `__pos` and `__op` of every live data file of `meta`'s current snapshot
 * and decides, per key, which rows go (see the module comment).
 */
async function scan(
  folder: TableFolder,
  ident: TableIdent,
  meta: IcebergTableMetadata,
  keyColumns: readonly string[],
  onProgress: ((p: ConvertProgress) => void) | undefined,
): Promise<Scan> {
  const schema = currentSchemaOf(ident, meta);
  let columns: ReturnType<typeof lookupKeyColumns>;
  try {
    columns = lookupKeyColumns(ident, schema, keyColumns);
  } catch (e) {
    throw new SinkError(
      'ICEBERG_KEY_UNSUPPORTED',
      identText(ident),
      `${(e as Error).message}: a current-state table's rows are found by their key`,
    );
  }
  const posField = schema.fields.find((f) => f.name === META_POS);
  const opField = schema.fields.find((f) => f.name === META_OP);
  if (!posField || !opField)
    throw refused(ident, `has no ${META_POS} or ${META_OP} column: it is not a table tidemark wrote`);
  const live = await liveFilesOf(folder, ident, meta);
  const deleted = await deletedPositionsOf(
    folder,
    ident,
    live.deletes,
    new Map(live.data.map(({ file, seq }) => [file.file_path, seq])),
  );
  const ids = [...columns.map((c) => c.field.id), posField.id, opField.id];
  const winners = new Map<string, Winner>();
  const toDelete: number[][] = live.data.map(() => []);
  let rowsScanned = 0;
  let bytesRead = deleted.deleteBytesRead;
  for (let f = 0; f < live.data.length; f++) {
    const { file } = live.data[f]!;
    const gone = deleted.positions.get(file.file_path);
    bytesRead += await readFieldsRaw(folder, ident, file, ids, (groupStart, values) => {
      const keyValues = columns.map((c) => values.get(c.field.id)!);
      const posValues = values.get(posField.id)!;
      const opValues = values.get(opField.id)!;
      for (let i = 0; i < posValues.length; i++) {
        const pos = groupStart + i;
        if (gone?.has(pos)) continue;
        rowsScanned++;
        const tuple: SingleValue[] = [];
        let nullKey = false;
        for (let c = 0; c < columns.length; c++) {
          const v = parquetValueOf(columns[c]!.type, keyValues[c]![i]);
          if (v === undefined) nullKey = true;
          else tuple.push(v);
        }
        // A NULL is equal to nothing: such a row is never merged and stays.
        if (nullKey) continue;
        const at = rawText(posValues[i]);
        if (at === undefined)
          throw new SinkError(
            'ICEBERG_METADATA_INVALID',
            identText(ident),
            `row ${pos} of ${file.file_path} in ${identText(ident)} has no ${META_POS}`,
          );
        const text = keyText(tuple);
        const row: Winner = { file: f, pos, at, deleted: isDeleteOp(opValues[i]) };
        const before = winners.get(text);
        if (before === undefined) {
          winners.set(text, row);
        } else if (row.at >= before.at) {
          // Ties go to the later row (later file in manifest order, later position in a file).
          toDelete[before.file]!.push(before.pos);
          winners.set(text, row);
        } else {
          toDelete[f]!.push(pos);
        }
      }
    });
    onProgress?.({ filesRead: f + 1, files: live.data.length, rowsScanned, bytesRead });
  }
  let rowsKept = 0;
  for (const w of winners.values()) {
    if (w.deleted) toDelete[w.file]!.push(w.pos);
    else rowsKept++;
  }
  return {
    rowsScanned,
    rowsKept,
    deletes: live.data
      .map(({ file }, i) => ({ file, positions: toDelete[i]! }))
      .filter((d) => d.positions.length > 0),
  };
}

/** A property-only commit found that the table moved on since it was scanned: scan again. */
class MovedOn extends Error {}

/**
 * Converts the change-log upsert table `ident` (kind `change-log`, or no kind: the previous
 * release's) to a current-state table in one catalog commit; a table already `current-state` is
 * left alone. Must run while no writer of the table runs (an upsert writer refuses the table
 * until it is converted; an append writer would add rows the scan did not see, which the
 * compare-and-swap catches: the scan is redone on the new base).
 *
 * @throws SinkError `ICEBERG_KEY_UNSUPPORTED` when a key column has a type rows cannot be found by;
 *   `ICEBERG_CONVERT_REFUSED` when the table has no `__pos`/`__op` column;
 *   `ICEBERG_METADATA_INVALID` when a file the snapshot names is missing or outside the folder;
 *   and what `commitWithRetry` throws.
 */
export async function convertToCurrentState(
  catalog: Catalog,
  ident: TableIdent,
  folder: TableFolder,
  options: ConvertOptions,
): Promise<ConvertResult> {
  for (;;) {
    const commit: CommitIdentity = { writerId: CONVERT_WRITER_ID, commitId: `convert-${randomUUID()}` };
    let already = false;
    let last: Scan | undefined;
    let scannedSnapshot: bigint | undefined;
    let rowsDeleted = 0;
    let deleteFileCount = 0;
    // Files each attempt wrote, in attempt order: all but the last are garbage once the call returns.
    const attempts: string[][] = [];
    const properties = { [TABLE_KIND_PROPERTY]: 'current-state' };
    const result = await commitSnapshot(
      catalog,
      ident,
      folder,
      commit,
      { nowMs: options.nowMs, properties, ...(options.retry ? { retry: options.retry } : {}) },
      async (at): Promise<SnapshotAdds | undefined> => {
        const written: string[] = [];
        attempts.push(written);
        rowsDeleted = 0;
        deleteFileCount = 0;
        already = tableKindOf(at.base) === 'current-state';
        if (already) return undefined;
        last = await scan(folder, ident, at.base, options.keyColumns, options.onProgress);
        scannedSnapshot = at.parent?.['snapshot-id'];
        if (last.deletes.length === 0) return undefined;
        const rows: RowToDelete[] = [];
        for (const { file, positions } of last.deletes)
          for (const pos of positions)
            rows.push({ filePath: file.file_path, pos, partition: file.partition });
        const d = await writeAttemptDeletes(
          folder,
          ident,
          at,
          attemptName(commit.commitId, at),
          rows,
          written,
        );
        rowsDeleted = d.rows;
        deleteFileCount = d.files;
        return {
          ours: d.manifest,
          operation: 'delete',
          added: {
            dataFiles: 0,
            records: 0,
            filesSize: d.bytes,
            deleteFiles: d.files,
            positionDeleteFiles: d.files,
            positionDeletes: d.rows,
          },
        };
      },
    );
    // Attempts a later attempt replaced never committed; the last one may have, so its files stay.
    const cleanupError = await deleteLeftovers(folder, attempts.slice(0, -1).flat(), result.cleanupError);
    const cleanup = cleanupError === undefined ? {} : { cleanupError };
    if (already) return { status: 'already-current-state' };
    const scanned = last as Scan | undefined;
    if (scanned === undefined) throw new Error('convert: no attempt scanned the table (a bug)');
    if (result.status === 'committed') {
      const snapshotId = currentSnapshot(result.table.metadata)?.['snapshot-id'];
      return {
        status: 'converted',
        rowsScanned: scanned.rowsScanned,
        rowsDeleted,
        rowsKept: scanned.rowsKept,
        deleteFiles: deleteFileCount,
        ...(snapshotId !== undefined ? { snapshotId } : {}),
        ...cleanup,
      };
    }
    // Nothing to delete: the kind alone, on the very snapshot that was scanned.
    try {
      const set = await commitWithRetry(
        catalog,
        ident,
        commit,
        (t) => {
          if (tableKindOf(t.metadata) === 'current-state') return 'already-committed';
          if (currentSnapshot(t.metadata)?.['snapshot-id'] !== scannedSnapshot) throw new MovedOn();
          return setProperties(t.metadata, properties, { nowMs: options.nowMs() });
        },
        options.retry,
      );
      if (set.status === 'already-committed' && tableKindOf(set.table.metadata) === 'current-state')
        return { status: 'already-current-state' };
    } catch (e) {
      if (e instanceof MovedOn) continue;
      throw e;
    }
    return {
      status: 'converted',
      rowsScanned: scanned.rowsScanned,
      rowsDeleted: 0,
      rowsKept: scanned.rowsKept,
      deleteFiles: 0,
      ...cleanup,
    };
  }
}
