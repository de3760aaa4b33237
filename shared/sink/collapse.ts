/**
 * Upsert collapse: of all rows of one write that share a primary key, keep only the last change
 * by `__pos` (deletes included, as `__op = d` rows). The lake stays a change log; readers resolve
 * it with max(`__pos`) per key, and a write never carries superseded versions of a row.
 *
 * Owns: the collapse and the Arrow row-selection ("take") it needs, on wire records. Works on the
 * raw buffers: keys come from the key columns' bytes and values (never through `Vector.get`,
 * which turns microsecond timestamps into milliseconds and would merge distinct keys), `__pos`
 * is compared as bytes (positions are ASCII, so byte order is string order). Never reorders the
 * surviving rows and never copies a batch in which every row survives.
 */
import { type Data, DataType, makeData, RecordBatch, Struct } from 'apache-arrow';
import { META_POS } from '../dataplane/metadata.js';

/**
 * Where a row lives, packed into one number (batch * 2^31 + row) so the key map holds no
 * per-key objects: a million keys cost a million map entries, nothing more.
 */
const ROW_BITS = 2 ** 31;
const at = (batch: number, row: number) => batch * ROW_BITS + row;
const batchOf = (packed: number) => Math.floor(packed / ROW_BITS);
const rowOf = (packed: number) => packed % ROW_BITS;

/**
 * Collapses `records` (one table's wire records, in arrival order) to the last change per
 * primary key by `__pos`. Ties on `__pos` keep the later row. Rows whose key has a NULL part are
 * never merged (a NULL is not equal to anything). Returns records in the same order, each with
 * its surviving rows in their original order; records with no survivor are dropped.
 */
export function collapseToLatest(
  records: readonly RecordBatch[],
  primaryKey: readonly string[],
): RecordBatch[] {
  if (primaryKey.length === 0) throw new Error('collapseToLatest needs a primary key');
  const winners = new Map<unknown, number>();
  const posData: Data[] = [];
  const noKeyRows: number[] = [];
  records.forEach((record, b) => {
    const pos = record.data.children[record.schema.fields.findIndex((f) => f.name === META_POS)];
    if (!pos) throw new Error(`record has no ${META_POS} column`);
    posData.push(pos);
    const key = primaryKeyReader(record, primaryKey);
    for (let row = 0; row < record.numRows; row++) {
      const k = key(row);
      if (k === NULL_KEY) {
        noKeyRows.push(at(b, row));
        continue;
      }
      const prev = winners.get(k);
      if (prev === undefined || comparePos(posData[batchOf(prev)]!, rowOf(prev), pos, row) <= 0) {
        winners.set(k, at(b, row));
      }
    }
  });
  const keep: number[][] = records.map(() => []);
  for (const w of winners.values()) keep[batchOf(w)]!.push(rowOf(w));
  for (const w of noKeyRows) keep[batchOf(w)]!.push(rowOf(w));
  const out: RecordBatch[] = [];
  records.forEach((record, b) => {
    const rows = keep[b]!;
    if (rows.length === 0) return;
    if (rows.length === record.numRows) {
      out.push(record);
      return;
    }
    const indices = Int32Array.from(rows).sort();
    out.push(takeRecord(record, indices));
  });
  return out;
}

const NULL_KEY = Symbol('null key');
const decoder = new TextDecoder();
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * A function from row index to a Map key identifying the row's primary key. Single-column keys
 * use the value itself (number, bigint, string) where that is exact; composite keys join typed,
 * length-prefixed parts so no two distinct tuples meet.
 */
export function primaryKeyReader(
  record: RecordBatch,
  primaryKey: readonly string[],
): (row: number) => unknown {
  const parts = primaryKey.map((name) => {
    const i = record.schema.fields.findIndex((f) => f.name === name);
    const data = record.data.children[i];
    if (!data) throw new Error(`primary-key column "${name}" is not in the record`);
    return columnKey(data, name);
  });
  if (parts.length === 1) return parts[0]!;
  return (row) => {
    let k = '';
    for (const part of parts) {
      const v = part(row);
      if (v === NULL_KEY) return NULL_KEY;
      const s =
        typeof v === 'string' ? `s${v.length}:${v}` : `${typeof v === 'bigint' ? 'b' : 'n'}${String(v)};`;
      k += s;
    }
    return k;
  };
}

function columnKey(data: Data, name: string): (row: number) => unknown {
  const { type } = data;
  const valid = (row: number) => data.nullCount === 0 || data.getValid(row);
  if (DataType.isUtf8(type)) {
    const offsets = data.valueOffsets as Int32Array;
    const values = data.values as Uint8Array;
    return (row) =>
      valid(row) ? decoder.decode(values.subarray(offsets[row]!, offsets[row + 1]!)) : NULL_KEY;
  }
  if (DataType.isBinary(type)) {
    const offsets = data.valueOffsets as Int32Array;
    const values = data.values as Uint8Array;
    return (row) =>
      valid(row)
        ? Buffer.from(
            values.buffer,
            values.byteOffset + offsets[row]!,
            offsets[row + 1]! - offsets[row]!,
          ).toString('latin1')
        : NULL_KEY;
  }
  if (DataType.isBool(type)) {
    const bits = data.values as Uint8Array;
    return (row) => {
      const at = data.offset + row;
      return valid(row) ? (bits[at >> 3]! & (1 << (at & 7))) !== 0 : NULL_KEY;
    };
  }
  if (DataType.isDecimal(type)) {
    const words = data.values as Uint32Array;
    return (row) =>
      valid(row)
        ? `${words[4 * row]},${words[4 * row + 1]},${words[4 * row + 2]},${words[4 * row + 3]}`
        : NULL_KEY;
  }
  if ((DataType.isInt(type) && type.bitWidth === 64) || DataType.isTimestamp(type)) {
    // Map keys hash numbers faster than BigInts; beyond 2^53 the exact decimal text keys.
    const values = data.values as BigInt64Array;
    return (row) => {
      if (!valid(row)) return NULL_KEY;
      const v = values[row]!;
      return v >= -MAX_SAFE && v <= MAX_SAFE ? Number(v) : String(v);
    };
  }
  if (DataType.isInt(type) || DataType.isFloat(type) || DataType.isDate(type) || DataType.isTimestamp(type)) {
    // Fixed-width values are pre-sliced in Arrow JS: element `row` is values[row].
    const values = data.values as ArrayLike<number | bigint>;
    return (row) => (valid(row) ? values[row] : NULL_KEY);
  }
  throw new Error(`primary-key column "${name}" has type ${String(type)}, which cannot key an upsert`);
}

/** Compares `__pos` of two rows as bytes (positions are ASCII). */
function comparePos(a: Data, rowA: number, b: Data, rowB: number): number {
  const ao = a.valueOffsets as Int32Array;
  const bo = b.valueOffsets as Int32Array;
  const av = a.values as Uint8Array;
  const bv = b.values as Uint8Array;
  let i = ao[rowA]!;
  const aEnd = ao[rowA + 1]!;
  let j = bo[rowB]!;
  const bEnd = bo[rowB + 1]!;
  for (; i < aEnd && j < bEnd; i++, j++) {
    const d = av[i]! - bv[j]!;
    if (d !== 0) return d;
  }
  return aEnd - i - (bEnd - j);
}

/** The rows `indices` (ascending or not) of a record, as a new record of the same schema. */
export function takeRecord(record: RecordBatch, indices: Int32Array): RecordBatch {
  const children = record.data.children.map((c) => takeData(c, indices));
  return new RecordBatch(
    record.schema,
    makeData({ type: new Struct(record.schema.fields), length: indices.length, nullCount: 0, children }),
  );
}

/**
 * Arrow "take" for the wire types: fixed-width numbers, decimals, dates, timestamps, bool, utf8,
 * binary and lists of those. Copies only the selected values.
 */
export function takeData(data: Data, indices: Int32Array): Data {
  const n = indices.length;
  const { type } = data;
  let nullCount = 0;
  let nullBitmap: Uint8Array | undefined;
  if (data.nullCount > 0) {
    nullBitmap = new Uint8Array((n + 7) >> 3);
    for (let i = 0; i < n; i++) {
      if (data.getValid(indices[i]!)) nullBitmap[i >> 3]! |= 1 << (i & 7);
      else nullCount++;
    }
  }
  const base = { type, length: n, nullCount, nullBitmap };
  if (DataType.isBool(type)) {
    const bits = new Uint8Array((n + 7) >> 3);
    const src = data.values as Uint8Array;
    for (let i = 0; i < n; i++) {
      const at = data.offset + indices[i]!;
      if (src[at >> 3]! & (1 << (at & 7))) bits[i >> 3]! |= 1 << (i & 7);
    }
    return makeData({ ...base, type, data: bits });
  }
  if (DataType.isUtf8(type) || DataType.isBinary(type)) {
    const offsets = data.valueOffsets as Int32Array;
    const values = data.values as Uint8Array;
    const outOffsets = new Int32Array(n + 1);
    let total = 0;
    for (let i = 0; i < n; i++) {
      const r = indices[i]!;
      total += offsets[r + 1]! - offsets[r]!;
      outOffsets[i + 1] = total;
    }
    const outValues = new Uint8Array(total);
    for (let i = 0; i < n; i++) {
      const r = indices[i]!;
      outValues.set(values.subarray(offsets[r]!, offsets[r + 1]!), outOffsets[i]!);
    }
    return DataType.isUtf8(type)
      ? makeData({ ...base, type, valueOffsets: outOffsets, data: outValues })
      : makeData({
          ...base,
          type: type as DataType & typeof type,
          valueOffsets: outOffsets,
          data: outValues,
        });
  }
  if (DataType.isList(type)) {
    const offsets = data.valueOffsets as Int32Array;
    const outOffsets = new Int32Array(n + 1);
    const childRows: number[] = [];
    for (let i = 0; i < n; i++) {
      const r = indices[i]!;
      for (let j = offsets[r]!; j < offsets[r + 1]!; j++) childRows.push(j);
      outOffsets[i + 1] = childRows.length;
    }
    const child = takeData(data.children[0]!, Int32Array.from(childRows));
    return makeData({ ...base, type, valueOffsets: outOffsets, child });
  }
  if (
    DataType.isInt(type) ||
    DataType.isFloat(type) ||
    DataType.isDate(type) ||
    DataType.isTimestamp(type) ||
    DataType.isDecimal(type)
  ) {
    const values = data.values as Int32Array | BigInt64Array;
    const stride = data.stride;
    const Ctor = values.constructor as new (length: number) => typeof values;
    const out = new Ctor(n * stride);
    if (stride === 1) {
      for (let i = 0; i < n; i++) out[i] = values[indices[i]!]!;
    } else {
      for (let i = 0; i < n; i++) {
        const from = indices[i]! * stride;
        for (let s = 0; s < stride; s++) out[i * stride + s] = values[from + s]!;
      }
    }
    return makeData({ ...base, type, data: out } as Parameters<typeof makeData>[0]);
  }
  throw new Error(`take: unsupported Arrow type ${String(type)}`);
}
