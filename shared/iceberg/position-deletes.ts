/**
 * Iceberg v2 position delete files (spec "Position Delete Files"): a Parquet file of
 * `(file_path, pos)` rows, each saying "row `pos` (0-based) of data file `file_path` is deleted",
 * and the `data_file` entry (content 1) a delete manifest lists it with. Library groundwork for
 * issue 31's current-state tables (docs/decisions/0026-current-state-delete-form.md); the commit
 * that adds them is ./row-delta.ts. Nothing in the sync writes them yet.
 *
 * Owns: the file's columns (`file_path` string, field id 2147483546; `pos` long, field id
 * 2147483545; both required, ids in the Arrow fields' `PARQUET:field_id` as the lake's data files
 * carry theirs), the row order the spec requires (by `file_path`, then `pos`; strings compared as
 * UTF-8 bytes, Iceberg's string order), and the entry's metrics.
 *
 * Invariants: rows are sorted and duplicates dropped; the entry's `file_path` and `pos` bounds
 * are exact (never truncated, as Java's `MetricsConfig.forPositionDelete` keeps them: readers
 * match a delete file to data files by the `file_path` bounds); `referenced_data_file` (field 143,
 * optional in v2) is set exactly when every row names one data file. A position delete file
 * applies to data files of the same partition only: the caller passes the partition tuple of the
 * data files its rows name, one partition per file. Pure apart from `writePositionDeletes`,
 * which puts the file in the table's folder.
 */
import {
  Schema as ArrowSchema,
  Field,
  Int64,
  makeData,
  RecordBatch,
  Struct,
  Utf8,
  vectorFromArray,
} from 'apache-arrow';
import { SinkError } from '../contracts/errors.js';
import { PARQUET_FIELD_ID } from '../dataplane/lake.js';
import { encodeParquet } from '../sink/parquet-writer.js';
import type { AvroValue } from './avro-schema.js';
import { parquetMetrics } from './data-file.js';
import { FileContent, type IcebergDataFile } from './manifest.js';
import { compareBytes, serializeValue } from './single-value.js';
import type { IcebergSchema } from './spec.js';
import type { TableFolder } from './table-folder.js';

/** Reserved field id of a position delete file's `file_path` column (spec "Reserved Field IDs"). */
export const DELETE_FILE_PATH_ID = 2147483546;
/** Reserved field id of a position delete file's `pos` column. */
export const DELETE_POS_ID = 2147483545;

/** The schema of a position delete file's columns, as Iceberg defines them. */
export const POSITION_DELETE_SCHEMA: IcebergSchema = {
  type: 'struct',
  'schema-id': 0,
  fields: [
    { id: DELETE_FILE_PATH_ID, name: 'file_path', required: true, type: 'string' },
    { id: DELETE_POS_ID, name: 'pos', required: true, type: 'long' },
  ],
};

/** One deleted row: the data file's full URI (as its manifest entry names it) and its 0-based position. */
export interface PositionDelete {
  readonly filePath: string;
  readonly pos: number | bigint;
}

const utf8 = new TextEncoder();

/** `deletes` in the spec's order (file_path as UTF-8 bytes, then pos), duplicates dropped. */
export function sortPositionDeletes(
  deletes: readonly PositionDelete[],
): { readonly filePath: string; readonly pos: bigint }[] {
  const rows = deletes.map((d) => {
    const pos = BigInt(d.pos);
    if (pos < 0n || pos > 0x7fff_ffff_ffff_ffffn)
      throw new RangeError(`position ${pos} of ${d.filePath} is not a row position`);
    return { filePath: d.filePath, bytes: utf8.encode(d.filePath), pos };
  });
  rows.sort((a, b) => compareBytes(a.bytes, b.bytes) || (a.pos < b.pos ? -1 : a.pos > b.pos ? 1 : 0));
  const out: { filePath: string; pos: bigint }[] = [];
  for (const r of rows) {
    const last = out.at(-1);
    if (last && last.filePath === r.filePath && last.pos === r.pos) continue;
    out.push({ filePath: r.filePath, pos: r.pos });
  }
  return out;
}

/**
 * The Parquet bytes of a position delete file holding `deletes` (sorted, duplicates dropped), and
 * the rows as written. Refuses an empty set: a delete file of no rows deletes nothing.
 */
export function encodePositionDeletes(deletes: readonly PositionDelete[]): {
  readonly bytes: Uint8Array;
  readonly rows: readonly { readonly filePath: string; readonly pos: bigint }[];
} {
  const rows = sortPositionDeletes(deletes);
  if (rows.length === 0) throw new RangeError('a position delete file needs at least one row');
  const fields = [
    new Field('file_path', new Utf8(), false, new Map([[PARQUET_FIELD_ID, String(DELETE_FILE_PATH_ID)]])),
    new Field('pos', new Int64(), false, new Map([[PARQUET_FIELD_ID, String(DELETE_POS_ID)]])),
  ];
  const paths = vectorFromArray(
    rows.map((r) => r.filePath),
    new Utf8(),
  );
  const positions = vectorFromArray(BigInt64Array.from(rows.map((r) => r.pos)));
  const data = makeData({
    type: new Struct(fields),
    length: rows.length,
    nullCount: 0,
    children: [paths.data[0]!, positions.data[0]!],
  });
  const record = new RecordBatch(new ArrowSchema(fields), data);
  return { bytes: encodeParquet([record], { compression: 'zstd' }), rows };
}

/**
 * The `data_file` of a position delete file: content POSITION_DELETES, format PARQUET,
 * `partition` (the partition tuple of the data files its rows name; `{}` unpartitioned), counts
 * and sizes from the file's footer, exact bounds from `rows` (as `encodePositionDeletes` returned
 * them), and `referenced_data_file` when the rows name one data file.
 */
export function positionDeleteFile(
  path: string,
  bytes: Uint8Array,
  rows: readonly { readonly filePath: string; readonly pos: bigint }[],
  partition: Readonly<Record<string, AvroValue>> = {},
): IcebergDataFile {
  if (rows.length === 0) throw new RangeError('a position delete file needs at least one row');
  const m = parquetMetrics(bytes, POSITION_DELETE_SCHEMA);
  // Rows are sorted by file_path: the first and last are its bounds; pos is sorted per file only.
  let lo = rows[0]!.pos;
  let hi = lo;
  for (const r of rows) {
    if (r.pos < lo) lo = r.pos;
    if (r.pos > hi) hi = r.pos;
  }
  const first = rows[0]!.filePath;
  const last = rows.at(-1)!.filePath;
  return {
    content: FileContent.POSITION_DELETES,
    file_path: path,
    file_format: 'PARQUET',
    partition,
    record_count: m.record_count,
    file_size_in_bytes: m.file_size_in_bytes,
    column_sizes: m.column_sizes,
    value_counts: m.value_counts,
    null_value_counts: m.null_value_counts,
    lower_bounds: new Map([
      [DELETE_FILE_PATH_ID, serializeValue({ kind: 'string' }, first)],
      [DELETE_POS_ID, serializeValue({ kind: 'long' }, lo)],
    ]),
    upper_bounds: new Map([
      [DELETE_FILE_PATH_ID, serializeValue({ kind: 'string' }, last)],
      [DELETE_POS_ID, serializeValue({ kind: 'long' }, hi)],
    ]),
    split_offsets: m.split_offsets,
    ...(first === last ? { referenced_data_file: first } : {}),
  };
}

/**
 * Writes a position delete file of `deletes` at `key` in the table's folder (a name unique to
 * the attempt: refused if it exists) and returns its `data_file` entry.
 */
export async function writePositionDeletes(
  folder: TableFolder,
  key: string,
  deletes: readonly PositionDelete[],
  partition: Readonly<Record<string, AvroValue>> = {},
): Promise<IcebergDataFile> {
  const { bytes, rows } = encodePositionDeletes(deletes);
  if ((await folder.store.putIfAbsent(key, bytes)) === 'exists')
    throw new SinkError(
      'SINK_OBJECT_EXISTS',
      folder.key,
      `refused to overwrite the position delete file ${folder.store.uri(key)}: its name is unique per attempt, so another process wrote it; nothing was written (a bug: report it)`,
    );
  return positionDeleteFile(folder.store.uri(key), bytes, rows, partition);
}
