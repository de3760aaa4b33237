// Types of parquet-properties.cjs (plain CommonJS so the encode worker requires it unchanged).
import type { WriterProperties } from 'parquet-wasm';
import type { FlatWriterOptions } from './parquet-flat.cjs';

/** The codecs by name (parquet-wasm's `Compression` names). */
export const CODECS: { readonly zstd: 'ZSTD'; readonly snappy: 'SNAPPY' };

/**
 * What the writer properties are built from: the flat writer's settings (row groups, dictionary
 * and statistics per column, metadata; parquet-flat.cjs) and the codec and lake format.
 */
export interface PropertySettings extends Omit<FlatWriterOptions, 'compressor'> {
  readonly compression: 'zstd' | 'snappy';
  /** parquet-wasm writes UNCOMPRESSED and Node's zlib compresses the pages. */
  readonly native: boolean;
  readonly format: 1 | 2;
}

/** parquet-wasm writer properties of `s`; `wasm` is the parquet-wasm module the caller loaded. */
export function writerProperties(wasm: typeof import('parquet-wasm'), s: PropertySettings): WriterProperties;
