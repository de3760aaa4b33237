/**
 * The Arrow side of tidemark's own Parquet writer (shared/sink/parquet-flat.cjs,
 * docs/decisions/0018-flat-parquet-writer.md): which lake schemas it writes (`isFlat`, by
 * `flatKind` of each column's Arrow type), each Arrow record as the column arrays it takes
 * (`flatSliceOf`), the schema as the Arrow IPC it builds its template from (`schemaIpcOf`), and
 * the write of a whole object on the calling thread (`writeFlat`).
 *
 * Owns: that mapping and those copies. It decides no Parquet type: a kind only says how a
 * column's Arrow values are laid out, and the Parquet schema (physical and logical types, names,
 * repetition) is the template parquet-flat.cjs takes from a file parquet-wasm wrote for the same
 * Arrow schema, so both writers agree. Never changes the records: a slice's arrays are copies,
 * which can be transferred to the encode worker while the records stay as they are. Which writer
 * encodes an object is parquet-writer.ts `writerChoice`'s.
 */
import { DataType, DateUnit, type RecordBatch, Table, TimeUnit, tableToIPC } from 'apache-arrow';
import {
  type FlatColumn,
  type FlatSlice,
  FlatWriter,
  type FlatWriterOptions,
  templateFor,
} from './parquet-flat.cjs';
import type { PageCompressor } from './parquet-pages.cjs';

/** The slices written by tidemark's own writer, on this thread. */
export function writeFlat(
  schema: RecordBatch['schema'],
  slices: readonly RecordBatch[],
  settings: Omit<FlatWriterOptions, 'compressor'>,
  compressor: PageCompressor,
): Uint8Array {
  const writer = new FlatWriter(templateFor(schemaIpcOf(schema)), { ...settings, compressor });
  for (const slice of slices) writer.add(flatSliceOf(slice).slice);
  return writer.finish();
}

/**
 * Does tidemark's own writer write this schema? Every lake type but lists
 * (docs/decisions/0018-flat-parquet-writer.md lists them).
 */
export function isFlat(schema: RecordBatch['schema']): boolean {
  return schema.fields.every((f) => flatKind(f.type) !== undefined);
}

type FlatKind = FlatColumn['kind'];

function flatKind(t: DataType): FlatKind | undefined {
  if (DataType.isBool(t)) return 'bool';
  if (DataType.isInt(t)) {
    if (!t.isSigned) return undefined;
    return t.bitWidth === 8 ? 'i8' : t.bitWidth === 16 ? 'i16' : t.bitWidth === 32 ? 'i32' : 'i64';
  }
  if (DataType.isFloat(t))
    return t.ArrayType === Float64Array ? 'f64' : t.ArrayType === Float32Array ? 'f32' : undefined;
  if (DataType.isDecimal(t)) return t.bitWidth === 128 ? 'dec' : undefined;
  if (DataType.isUtf8(t) || DataType.isBinary(t)) return 'bytes';
  if (DataType.isDate(t)) return t.unit === DateUnit.DAY ? 'i32' : undefined;
  // The lake's timestamps are microseconds (lake.ts); arrow-rs converts other units' values.
  if (DataType.isTimestamp(t)) return t.unit === TimeUnit.MICROSECOND ? 'i64' : undefined;
  if (DataType.isDictionary(t))
    return DataType.isUtf8(t.dictionary) && t.indices.bitWidth <= 32 ? 'dict' : undefined;
  return undefined;
}

/** A copy of typed array `a`'s elements [from, to) as bytes (its own buffer, transferable). */
function bytesOf(a: ArrayBufferView, from: number, to: number): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset + from, to - from).slice();
}

/**
 * `record` as the flat writer's slice: each column's arrays copied (a memcpy of the rows'
 * ranges, nothing else), so the copies can be transferred to the worker while the records stay
 * as they are; `transfer` lists their buffers.
 */
export function flatSliceOf(record: RecordBatch): { slice: FlatSlice; transfer: ArrayBuffer[] } {
  const transfer: ArrayBuffer[] = [];
  const own = <A extends ArrayBufferView>(a: A): A => {
    transfer.push(a.buffer as ArrayBuffer);
    return a;
  };
  const n = record.numRows;
  const columns = record.data.children.map((d, i): FlatColumn => {
    const kind = flatKind(d.type);
    if (kind === undefined) throw new Error(`column ${record.schema.fields[i]!.name} is not flat`);
    // Validity bits of rows [offset, offset + n) of the full bitmap (Arrow JS keeps it whole).
    let validity: Uint8Array | undefined;
    let validityOffset = 0;
    if (d.nullCount > 0 && d.nullBitmap && d.nullBitmap.length > 0) {
      const first = d.offset >> 3;
      validity = own(bytesOf(d.nullBitmap, first, (d.offset + n + 7) >> 3));
      validityOffset = d.offset & 7;
    }
    const nullCount = validity ? d.nullCount : 0;
    switch (kind) {
      case 'bool': {
        const first = d.offset >> 3;
        const values = own(bytesOf(d.values, first, (d.offset + n + 7) >> 3));
        return { kind, nullCount, validity, validityOffset, values, valuesOffset: d.offset & 7 };
      }
      case 'bytes': {
        // Arrow JS slices valueOffsets to the rows, not the value bytes: rebase them to 0.
        const o = d.valueOffsets;
        const base = o[0]!;
        const offsets = own(new Int32Array(n + 1));
        for (let r = 0; r <= n; r++) offsets[r] = o[r]! - base;
        const data = own(bytesOf(d.values, base, o[n]!));
        return { kind, nullCount, validity, validityOffset, offsets, data };
      }
      case 'dict': {
        const dict = d.dictionary!.data[0]!;
        const entries = dict.length;
        const dictOffsets = own(dict.valueOffsets.slice(0, entries + 1));
        const dictData = own(bytesOf(dict.values, 0, dictOffsets[entries]!));
        const indices = own((d.values as Extract<FlatColumn, { kind: 'dict' }>['indices']).slice(0, n));

        return { kind, nullCount, validity, validityOffset, indices, dictOffsets, dictData };
      }
      default: {
        // Arrow JS slices fixed-width values to the rows already.
        const width = d.values.BYTES_PER_ELEMENT * (kind === 'dec' ? 4 : 1);
        const bytes = own(bytesOf(d.values, 0, n * width));
        return { kind, nullCount, validity, validityOffset, bytes };
      }
    }
  });
  return { slice: { numRows: n, columns }, transfer };
}

/** The Arrow IPC stream of `schema` with no rows (the worker builds the flat template from it). */
const schemaIpcs = new WeakMap<RecordBatch['schema'], Uint8Array>();
export function schemaIpcOf(schema: RecordBatch['schema']): Uint8Array {
  let ipc = schemaIpcs.get(schema);
  if (!ipc) {
    ipc = tableToIPC(new Table(schema), 'stream');
    schemaIpcs.set(schema, ipc);
  }
  return ipc;
}
