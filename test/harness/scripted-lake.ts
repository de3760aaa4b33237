/**
 * Reading batches back for the scripted source's model checks: the latest row per primary key
 * by `__pos` with deletes applied (`reconstructLake`, comparable with `expectedLake`), and every
 * row as a change (`batchChanges`, comparable with `allChanges`). Exact values: int64 and
 * timestamp cells are bigints (Arrow's getters would turn timestamps into milliseconds).
 *
 * Test-only.
 */
import { type Data, DataType, type RecordBatch } from 'apache-arrow';
import { META_OP, META_POS, METADATA_COLUMNS, OP_LETTERS } from '../../shared/dataplane/metadata.js';
import type { ChangeRecord, LakeRow, LakeTables } from './scripted-script.js';

/** Something holding rows of one table: a `Batch`, or a table name and an Arrow record. */
export interface TableRecord {
  readonly table: string;
  readonly record: RecordBatch;
}

export interface ReadOptions {
  /** The primary-key column of a table ['id']. */
  readonly key?: string | ((table: string) => string);
}

/** One cell, exactly, in the value universe of schema.ts (null for SQL NULL). */
export function cellValue(data: Data, i: number): unknown {
  if (!data.getValid(i)) return null;
  const { type } = data;
  const at = data.offset + i;
  if (DataType.isTimestamp(type) || (DataType.isInt(type) && type.bitWidth === 64)) {
    return (data.values as BigInt64Array)[at]!;
  }
  if (DataType.isBool(type)) return (((data.values as Uint8Array)[at >> 3]! >> (at & 7)) & 1) === 1;
  if (DataType.isUtf8(type)) {
    const o = data.valueOffsets as Int32Array;
    return Buffer.from((data.values as Uint8Array).subarray(o[at]!, o[at + 1]!)).toString('utf8');
  }
  if (DataType.isBinary(type)) {
    const o = data.valueOffsets as Int32Array;
    return new Uint8Array((data.values as Uint8Array).subarray(o[at]!, o[at + 1]!));
  }
  if (DataType.isList(type)) {
    const o = data.valueOffsets as Int32Array;
    const out: unknown[] = [];
    for (let j = o[at]!; j < o[at + 1]!; j++)
      out.push(cellValue(data.children[0]!, j - data.children[0]!.offset));
    return out;
  }
  if (DataType.isDecimal(type)) return Array.from((data.values as Uint32Array).subarray(4 * at, 4 * at + 4));
  return (data.values as ArrayLike<unknown>)[at];
}

interface Columns {
  readonly names: readonly string[];
  readonly data: readonly Data[];
  readonly dataColumns: number;
  readonly key: Data;
  readonly op: Data;
  readonly pos: Data;
}

function columnsOf(r: TableRecord, options: ReadOptions): Columns {
  const fields = r.record.schema.fields;
  const names = fields.map((f) => f.name);
  const data = r.record.data.children;
  const keyName = typeof options.key === 'function' ? options.key(r.table) : (options.key ?? 'id');
  const at = (name: string): Data => {
    const i = names.indexOf(name);
    if (i < 0) throw new Error(`${r.table}: the record has no column ${name}`);
    return data[i]!;
  };
  return {
    names,
    data,
    dataColumns: names.length - METADATA_COLUMNS.length,
    key: at(keyName),
    op: at(META_OP),
    pos: at(META_POS),
  };
}

function rowOf(c: Columns, i: number): Record<string, unknown> {
  const row: Record<string, unknown> = {};
  for (let j = 0; j < c.dataColumns; j++) row[c.names[j]!] = cellValue(c.data[j]!, i);
  return row;
}

const letter = (code: unknown): 'c' | 'u' | 'd' => {
  const l = OP_LETTERS[code as number];
  if (l === undefined) throw new Error(`__op ${String(code)} is not an op code`);
  return l;
};

/**
 * Reconstructs the lake from batches: per table, per primary key, the row with the greatest
 * `__pos` over all records (in any order), dropped when it is a delete. Rows are in the schema
 * of the record they came from, plus `__pos` and `__op`, as `expectedLake` gives them. Tables
 * with no surviving row are absent unless named in `tables`.
 */
export function reconstructLake(
  records: Iterable<TableRecord>,
  options: ReadOptions & { readonly tables?: Iterable<string> } = {},
): LakeTables {
  const best = new Map<string, Map<string, { pos: string; cols: Columns; i: number }>>();
  for (const r of records) {
    const c = columnsOf(r, options);
    let table = best.get(r.table);
    if (!table) {
      table = new Map();
      best.set(r.table, table);
    }
    for (let i = 0; i < r.record.numRows; i++) {
      const pk = String(cellValue(c.key, i));
      const pos = cellValue(c.pos, i) as string;
      const was = table.get(pk);
      if (was === undefined || pos > was.pos) table.set(pk, { pos, cols: c, i });
    }
  }
  const lake: LakeTables = new Map();
  for (const name of options.tables ?? []) lake.set(name, new Map());
  for (const [name, table] of best) {
    const rows = new Map<string, LakeRow>();
    for (const [pk, v] of table) {
      const op = letter(cellValue(v.cols.op, v.i));
      if (op === 'd') continue;
      rows.set(pk, { ...rowOf(v.cols, v.i), __pos: v.pos, __op: op });
    }
    lake.set(name, rows);
  }
  return lake;
}

/** Every row of the records as a change (table, pk, __pos, op, values), in record order. */
export function batchChanges(records: Iterable<TableRecord>, options: ReadOptions = {}): ChangeRecord[] {
  const out: ChangeRecord[] = [];
  for (const r of records) {
    const c = columnsOf(r, options);
    for (let i = 0; i < r.record.numRows; i++) {
      out.push({
        table: r.table,
        pk: String(cellValue(c.key, i)),
        pos: cellValue(c.pos, i) as string,
        op: letter(cellValue(c.op, i)),
        values: rowOf(c, i),
      });
    }
  }
  return out;
}

/** Sorts changes by (table, __pos) for order-insensitive comparison. */
export function sortChanges(changes: readonly ChangeRecord[]): ChangeRecord[] {
  return [...changes].sort((a, b) =>
    a.table !== b.table ? (a.table < b.table ? -1 : 1) : a.pos < b.pos ? -1 : a.pos > b.pos ? 1 : 0,
  );
}
