/**
 * Encodes lake records (`shared/dataplane/lake.ts`) into one Parquet file in memory, with
 * parquet-wasm 0.8 (arrow-rs compiled to WebAssembly). Why this writer, the codec default and the
 * measured numbers: docs/decisions/0006-parquet-writer.md.
 *
 * Owns: the Arrow JS -> Arrow IPC -> wasm -> Parquet path and the writer properties. Never casts
 * types (the lake cast did that) and never touches storage.
 *
 * Loading: the static import resolves, through parquet-wasm's `node` export condition, to its
 * CommonJS build, which reads `parquet_wasm_bg.wasm` from its own `__dirname`. That works from
 * tsx/Node ESM and in an esbuild CJS bundle with the .wasm copied beside the bundle. Do not
 * switch to `createRequire(import.meta.url)`: esbuild empties `import.meta` in CJS output and the
 * bundle then fails at load.
 */
import { type RecordBatch, Table, tableToIPC } from 'apache-arrow';
import { Compression, Table as WasmTable, WriterPropertiesBuilder, writeParquet } from 'parquet-wasm';

/** The codecs tidemark writes; both are read by Athena, Spark, Trino and DuckDB. */
export type ParquetCompression = 'zstd' | 'snappy';

/** How to write one Parquet file. */
export interface ParquetWriteOptions {
  /** Page compression; zstd by default (smaller files, see decision 0006). */
  readonly compression?: ParquetCompression;
  /**
   * Upper bound on rows per row group (arrow-rs buffers across batches until it is reached).
   * Defaults to `DEFAULT_MAX_ROW_GROUP_ROWS`.
   */
  readonly maxRowGroupRows?: number;
  /**
   * Columns written without dictionary encoding: columns whose values are (nearly) all distinct,
   * where a dictionary is built, overflows and is thrown away (`__pos`: ~70 ms per 1M rows).
   */
  readonly plainColumns?: readonly string[];
  /** Extra key/value pairs for the file footer (e.g. the start position), readable by any tool. */
  readonly keyValueMetadata?: Readonly<Record<string, string>>;
}

/**
 * Default row-group bound: 1Mi rows, arrow-rs's own default. Row groups are the unit of
 * parallelism and skipping for Athena/Spark; bigger groups compress better, and a sink object
 * rarely exceeds one group anyway.
 */
export const DEFAULT_MAX_ROW_GROUP_ROWS = 1_048_576;

const CODECS: Record<ParquetCompression, Compression> = {
  zstd: Compression.ZSTD,
  snappy: Compression.SNAPPY,
};

/**
 * Writes the records (all of one lake schema) as one Parquet file and returns its bytes.
 * The records must be non-empty and share their schema.
 */
export function encodeParquet(
  records: readonly RecordBatch[],
  options: ParquetWriteOptions = {},
): Uint8Array {
  if (records.length === 0) throw new Error('encodeParquet needs at least one record batch');
  const ipc = tableToIPC(new Table(records[0]!.schema, records as RecordBatch[]), 'stream');
  let builder = new WriterPropertiesBuilder()
    .setCompression(CODECS[options.compression ?? 'zstd'])
    .setMaxRowGroupSize(options.maxRowGroupRows ?? DEFAULT_MAX_ROW_GROUP_ROWS);
  for (const column of options.plainColumns ?? [])
    builder = builder.setColumnDictionaryEnabled(column, false);
  if (options.keyValueMetadata)
    builder = builder.setKeyValueMetadata(new Map(Object.entries(options.keyValueMetadata)));
  // writeParquet consumes (frees) both the wasm table and the properties.
  return writeParquet(WasmTable.fromIPCStream(ipc), builder.build());
}
