// Types of parquet-properties.cjs (plain CommonJS so the encode worker requires it unchanged).
import type { WriterProperties } from 'parquet-wasm';

/** The codecs by name (parquet-wasm's `Compression` names). */
export const CODECS: { readonly zstd: 'ZSTD'; readonly snappy: 'SNAPPY' };

/** What the writer properties are built from (parquet-writer.ts `EncodeSettings` holds more). */
export interface PropertySettings {
  readonly compression: 'zstd' | 'snappy';
  /** parquet-wasm writes UNCOMPRESSED and Node's zlib compresses the pages. */
  readonly native: boolean;
  readonly format: 1 | 2;
  readonly maxRowGroupRows: number;
  readonly maxRowGroupBytes: number;
  readonly dictionaryPageBytes: number;
  readonly plainColumns: readonly string[];
  readonly noStatisticsColumns: readonly string[];
  readonly keyValueMetadata: Readonly<Record<string, string>> | undefined;
}

/** parquet-wasm writer properties of `s`; `wasm` is the parquet-wasm module the caller loaded. */
export function writerProperties(wasm: typeof import('parquet-wasm'), s: PropertySettings): WriterProperties;
