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
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
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
  checkCompression(options.compression);
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

function checkCompression(c: string | undefined): void {
  if (c !== undefined && !Object.hasOwn(CODECS, c)) {
    throw new Error(`unknown Parquet compression "${c}"; use ${Object.keys(CODECS).join(' or ')}`);
  }
}

/**
 * The worker script: beside this module in a checkout; beside the bundle (functions/bundle.ts
 * builds it) when this code runs as the Lambda's CommonJS bundle, where import.meta is empty.
 */
function workerScript(): string {
  if (typeof __dirname === 'string' && existsSync(join(__dirname, 'parquet-worker.cjs'))) {
    return join(__dirname, 'parquet-worker.cjs');
  }
  return fileURLToPath(new URL('./parquet-worker.cjs', import.meta.url));
}

interface Pending {
  resolve(bytes: Uint8Array): void;
  reject(e: Error): void;
}

let worker: Worker | undefined;
let workerBroken = false;
const pending = new Map<number, Pending>();
let nextId = 0;

function encoderWorker(): Worker | undefined {
  if (worker || workerBroken) return worker;
  try {
    const w = new Worker(workerScript(), { execArgv: [] });
    w.on('message', (m: { id: number; bytes?: Uint8Array; error?: string }) => {
      const p = pending.get(m.id);
      pending.delete(m.id);
      if (pending.size === 0) w.unref();
      if (m.error !== undefined) p?.reject(new Error(`Parquet encode failed: ${m.error}`));
      else p?.resolve(m.bytes!);
    });
    w.on('error', (e) => {
      workerBroken = true;
      worker = undefined;
      for (const p of pending.values()) p.reject(e);
      pending.clear();
    });
    w.unref();
    worker = w;
  } catch {
    workerBroken = true; // no worker threads here: encode on the main thread
  }
  return worker;
}

/**
 * `encodeParquet` on a worker thread: the Arrow IPC stream is built here and transferred (not
 * copied), the wasm encode runs on another core, and the bytes come back transferred. Falls back
 * to the main thread when no worker can be started. Same bytes as `encodeParquet`.
 */
export function encodeParquetAsync(
  records: readonly RecordBatch[],
  options: ParquetWriteOptions = {},
): Promise<Uint8Array> {
  const w = encoderWorker();
  if (!w) return Promise.resolve(encodeParquet(records, options));
  if (records.length === 0) return Promise.reject(new Error('encodeParquet needs at least one record batch'));
  try {
    checkCompression(options.compression);
  } catch (e) {
    return Promise.reject(e);
  }
  const ipc = tableToIPC(new Table(records[0]!.schema, records as RecordBatch[]), 'stream');
  const id = nextId++;
  return new Promise<Uint8Array>((resolve, reject) => {
    pending.set(id, { resolve, reject });
    w.ref();
    w.postMessage(
      {
        id,
        ipc,
        compression: options.compression ?? 'zstd',
        maxRowGroupRows: options.maxRowGroupRows ?? DEFAULT_MAX_ROW_GROUP_ROWS,
        plainColumns: options.plainColumns ?? [],
        keyValueMetadata: options.keyValueMetadata,
      },
      [ipc.buffer as ArrayBuffer],
    );
  });
}
