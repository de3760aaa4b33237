// Types of parquet-flat.cjs (plain CommonJS so the encode worker requires it unchanged).
import type { PageCompressor } from './parquet-pages.cjs';

/**
 * One column of a slice, as plain arrays (posted to the worker as is). Row i of the slice is row
 * i of every array: `values` holds `numRows` values from its start, `offsets` `numRows + 1`
 * entries (which need not start at 0), `validity` bit `validityOffset + i` (LSB first) is 1 where
 * row i is not null. `validity` is absent when the column has no nulls in the slice.
 */
export type FlatColumn =
  | FixedColumn
  | {
      readonly kind: 'bool';
      readonly nullCount: number;
      readonly validity?: Uint8Array;
      readonly validityOffset: number;
      readonly values: Uint8Array;
      readonly valuesOffset: number;
    }
  | {
      readonly kind: 'bytes';
      readonly nullCount: number;
      readonly validity?: Uint8Array;
      readonly validityOffset: number;
      readonly offsets: Int32Array;
      readonly data: Uint8Array;
    }
  | {
      readonly kind: 'dict';
      readonly nullCount: number;
      readonly validity?: Uint8Array;
      readonly validityOffset: number;
      /** Dictionary index of each row (an Arrow Dictionary<Utf8, Int|Uint> column). */
      readonly indices: Uint8Array | Int8Array | Uint16Array | Int16Array | Int32Array | Uint32Array;
      readonly dictOffsets: Int32Array;
      readonly dictData: Uint8Array;
    };

/** Fixed-width values: `bytes` holds `numRows * width` little-endian bytes from its start. */
export interface FixedColumn {
  /** i8/i16/i32/i64 signed ints, f32/f64 IEEE, dec: Decimal128 (16 bytes, two's complement). */
  readonly kind: 'i8' | 'i16' | 'i32' | 'i64' | 'f32' | 'f64' | 'dec';
  readonly nullCount: number;
  readonly validity?: Uint8Array;
  readonly validityOffset: number;
  readonly bytes: Uint8Array;
}

export interface FlatSlice {
  readonly numRows: number;
  /** One per top-level field, in schema order. */
  readonly columns: readonly FlatColumn[];
}

/** What the writer takes from a file parquet-wasm wrote for the same Arrow schema. */
export interface FlatTemplate {
  readonly leaves: readonly {
    readonly name: string;
    readonly physical: number;
    readonly typeLength: number;
    readonly optional: boolean;
  }[];
}

export interface FlatWriterOptions {
  readonly compressor: PageCompressor;
  readonly maxRowGroupRows: number;
  readonly maxRowGroupBytes: number;
  readonly dictionaryPageBytes: number;
  /** Columns written without dictionary (`__pos`, large values). */
  readonly plainColumns: readonly string[];
  /** Columns written without statistics (large values). */
  readonly noStatisticsColumns: readonly string[];
  readonly keyValueMetadata: Readonly<Record<string, string>> | undefined;
}

/** The template of the file parquet-wasm wrote (any rows, uncompressed or not); throws when not flat. */
export function templateOf(wasmFile: Uint8Array): FlatTemplate;

/** The template of the Arrow schema in `schemaIpc` (an IPC stream with no rows), cached per thread. */
export function templateFor(schemaIpc: Uint8Array): FlatTemplate;

/** Writes one Parquet file from slices added in row order. */
export class FlatWriter {
  constructor(template: FlatTemplate, options: FlatWriterOptions);
  add(slice: FlatSlice): void;
  finish(): Uint8Array;
}

/**
 * The order statistics keep for two text/binary values `buf[as..as+al)` and `buf[bs..bs+bl)`:
 * unsigned bytes of their first 65 bytes (one past the longest min/max written); negative, zero
 * or positive. `view` is a DataView over `buf`'s ArrayBuffer, `buf` at offset 0 of it.
 */
export function compareStatIn(
  view: DataView,
  buf: Uint8Array,
  as: number,
  al: number,
  bs: number,
  bl: number,
): number;
