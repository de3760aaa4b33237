/**
 * Encodes lake records (`shared/dataplane/lake.ts`) into one Parquet file in memory, with
 * parquet-wasm 0.8 (arrow-rs compiled to WebAssembly). Why this writer, the codec default and the
 * measured numbers: docs/decisions/0006-parquet-writer.md; why it is fed in slices:
 * docs/decisions/0007-page-byte-budget.md.
 *
 * Owns: the Arrow JS -> Arrow IPC -> wasm -> Parquet path, the writer settings (built into
 * parquet-wasm properties by parquet-properties.cjs, which the worker uses too) and the
 * slicing that bounds the encoder's memory, which writer encodes an object (`writerChoice`), and
 * the encode worker's main-thread side; parquet-pages.cjs compresses the pages where Node's zlib
 * has the codec (docs/decisions/0016-native-page-compression.md), and tidemark's own writer
 * (parquet-flat.cjs, fed by parquet-flat-adapter.ts; docs/decisions/0018-flat-parquet-writer.md)
 * writes flat schemas in its place. Never casts types (the lake cast did that) and never touches
 * storage.
 *
 * Memory: the wasm module's linear memory grows to the largest working set it ever had and
 * never shrinks, and arrow-rs works on whole batches (the IPC copy, the decoded arrays, the page
 * buffers, the compressed pages: about 7x a batch). So the records reach the encoder in slices of
 * about `ENCODE_SLICE_BYTES` (at least one row), one at a time, and row groups also close by
 * bytes (`DEFAULT_MAX_ROW_GROUP_BYTES`): the encoder then holds one slice and one row group's
 * compressed pages, whatever the size of the object. Slicing does not change the bytes written:
 * arrow-rs splits pages and row groups by its own limits, not at batch boundaries.
 *
 * Loading: the static import resolves, through parquet-wasm's `node` export condition, to its
 * CommonJS build, which reads `parquet_wasm_bg.wasm` from its own `__dirname`. That works from
 * tsx/Node ESM and in an esbuild CJS bundle with the .wasm copied beside the bundle. Do not
 * switch to `createRequire(import.meta.url)`: esbuild empties `import.meta` in CJS output and the
 * bundle then fails at load.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { DataType, type RecordBatch, Table, tableToIPC } from 'apache-arrow';
import type { WarningCode } from '../contracts/error-codes.js';
import {
  DEFAULT_LAKE_FORMAT,
  isLakeFormat,
  LAKE_FORMATS,
  type LakeFormat,
} from '../contracts/lake-format.js';
import type { FlatWriterOptions } from './parquet-flat.cjs';
import { flatSliceOf, isFlat, schemaIpcOf, writeFlat } from './parquet-flat-adapter.js';
import { compressPages, nativeCompressor, type PageCompressor } from './parquet-pages.cjs';
import { CODECS, writerProperties } from './parquet-properties.cjs';

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
   * Upper bound on a row group's encoded bytes (arrow-rs `max_row_group_bytes`, checked after
   * each slice). Defaults to `DEFAULT_MAX_ROW_GROUP_BYTES`.
   */
  readonly maxRowGroupBytes?: number;
  /**
   * Columns written without dictionary encoding: columns whose values are (nearly) all distinct,
   * where a dictionary is built, overflows and is thrown away (`__pos`: ~70 ms per 1M rows).
   */
  readonly plainColumns?: readonly string[];
  /** Extra key/value pairs for the file footer (e.g. the start position), readable by any tool. */
  readonly keyValueMetadata?: Readonly<Record<string, string>>;
  /**
   * Lake format (shared/contracts/lake-format.ts, docs/lake-format.md): 1 (default) writes
   * arrow-rs writer version 1 (DataPage V1, dictionary with PLAIN fallback); 2 writes writer
   * version 2 (DataPage V2, DELTA_BINARY_PACKED / DELTA_BYTE_ARRAY fallback, RLE booleans).
   * Nothing else differs: same columns, logical types, statistics and footer keys.
   */
  readonly format?: LakeFormat;
}

/**
 * Default row-group bound: 1Mi rows, arrow-rs's own default. Row groups are the unit of
 * parallelism and skipping for Athena/Spark; bigger groups compress better, and a sink object
 * rarely exceeds one group anyway.
 */
export const DEFAULT_MAX_ROW_GROUP_ROWS = 1_048_576;

/**
 * Default bound on a row group's encoded bytes (before compression where Node's zlib compresses
 * the pages, `pageCompression`: parquet-wasm then holds them uncompressed; decision 0016): an
 * object of ordinary rows stays one row group
 * (a page within the default 64 MiB budget encodes to ~10 MB; a 1M-row object of the benchmark
 * table, 26 MB encoded, would be two); an object of values that do not compress is cut into
 * groups of about this size, so the encoder holds one group of compressed pages, not the object
 * (measured: 720 -> 552 MiB peak for 64 MiB pages of random 1 MiB values, against 64 MiB groups).
 */
export const DEFAULT_MAX_ROW_GROUP_BYTES = 16 * 2 ** 20;

/**
 * A column chunk's dictionary page stops growing at this many bytes; past it the writer goes on
 * in PLAIN encoding (the format's ordinary fallback, which every reader of
 * docs/reader-compatibility.md reads: DataPage V1 either way). arrow-rs defaults to 1 MiB, which
 * makes it hash and keep a dictionary of every value of a high-cardinality column (keys,
 * timestamps, doubles) before falling back. Measured with `npm run bench -- incremental` (1M
 * rows, docs/benchmarks.md): tidemark/by-hand 1.82x -> 1.48x, client CPU 8.98 -> 7.69 s, objects
 * 53.4 -> 40.2 MB (DuckDB's own: 38.3 MB). Low-cardinality columns (statuses, enums, flags)
 * keep their dictionary.
 */
export const DICTIONARY_PAGE_BYTES = 16 * 2 ** 10;

/** Arrow data per slice handed to the encoder (a slice is at least one row). */
export const ENCODE_SLICE_BYTES = 4 * 2 ** 20;

/**
 * A text or binary column whose values average at least this many bytes in an object is written
 * without dictionary and statistics: arrow-rs would copy values into a dictionary before finding
 * it too big, and keep full copies of the min and max values for statistics it truncates to 64
 * bytes anyway; each costs about two values' worth of memory and buys nothing for such values.
 */
export const LARGE_VALUE_BYTES = 64 * 2 ** 10;

let wasmModule: typeof import('parquet-wasm') | undefined;
/**
 * parquet-wasm on this thread, loaded on first use: the encode worker and the flat writer need
 * none of it here, and loading it costs every run ~20 ms of start-up. A literal `require` where
 * there is one (the CommonJS Lambda bundle, which bundles it; the CLI bundle's banner), else one
 * made for this module (the sources under tsx).
 */
function parquetWasm(): typeof import('parquet-wasm') {
  wasmModule ??= (
    typeof require === 'function' ? require('parquet-wasm') : createRequire(import.meta.url)('parquet-wasm')
  ) as typeof import('parquet-wasm');
  return wasmModule;
}

/**
 * Where pages are compressed. `native` (the default): where this Node has the codec natively
 * (zstd from Node 22.15 / 23.8, as the Lambda and Fargate runtimes have), parquet-wasm writes the
 * pages UNCOMPRESSED and parquet-pages.cjs compresses them with zlib, same pages and level, about
 * 2.6x less CPU than zstd inside the wasm; elsewhere (Node 20, snappy) the wasm compresses. The
 * switch exists for the bench (both paths in one run) and the tests. `testCodec` (tests only):
 * the natively compressed path compresses with gzip instead, so it runs on a Node without zstd.
 */
export const pageCompression: { native: boolean; testCodec?: 'gzip' } = { native: true };

/**
 * Which writer encodes an object whose pages Node's zlib compresses (`pageCompression`), in lake
 * format 1, of a flat schema (no lists): `enabled` (the default) takes tidemark's own writer,
 * shared/sink/parquet-flat.cjs (docs/decisions/0018-flat-parquet-writer.md); otherwise, and for
 * every other object, parquet-wasm. The switch exists for the bench and the tests.
 */
export const flatWriter = { enabled: true };

/** The writer settings of one object, as plain data (posted to the worker as is). */
interface EncodeSettings extends Omit<FlatWriterOptions, 'compressor'> {
  readonly compression: ParquetCompression;
  /** parquet-wasm writes UNCOMPRESSED and Node's zlib compresses the pages (`pageCompression`). */
  readonly native: boolean;
  /** The codec Node's zlib compresses with where `native`: `compression`, or the test codec. */
  readonly nativeCodec: ParquetCompression | 'gzip';
  /** tidemark's own writer encodes (`flatWriter`), not parquet-wasm. */
  readonly flat: boolean;
  readonly format: LakeFormat;
}

/**
 * How objects of `schema` are compressed and who writes them: Node's zlib where it has the codec
 * (`native`), and tidemark's flat writer where that holds for a flat schema in lake format 1.
 */
function writerChoice(
  schema: RecordBatch['schema'],
  options: Pick<ParquetWriteOptions, 'compression' | 'format'>,
): Pick<EncodeSettings, 'native' | 'nativeCodec' | 'flat' | 'format'> {
  const nativeCodec = pageCompression.testCodec ?? options.compression ?? 'zstd';
  const native = pageCompression.native && nativeCompressor(nativeCodec) !== undefined;
  const format = options.format ?? DEFAULT_LAKE_FORMAT;
  return {
    native,
    nativeCodec,
    flat: native && flatWriter.enabled && format === 1 && isFlat(schema),
    format,
  };
}

/** The slices of one object and its writer settings. */
function planEncode(
  records: readonly RecordBatch[],
  options: ParquetWriteOptions,
): { slices: RecordBatch[]; settings: EncodeSettings; schema: RecordBatch['schema'] } {
  if (records.length === 0) throw new Error('encodeParquet needs at least one record batch');
  checkCompression(options.compression);
  checkFormat(options.format);
  const large = largeValueColumns(records);
  return {
    schema: records[0]!.schema,
    slices: records.flatMap((r) => sliceRecord(r, ENCODE_SLICE_BYTES)),
    settings: {
      compression: options.compression ?? 'zstd',
      ...writerChoice(records[0]!.schema, options),
      maxRowGroupRows: options.maxRowGroupRows ?? DEFAULT_MAX_ROW_GROUP_ROWS,
      maxRowGroupBytes: options.maxRowGroupBytes ?? DEFAULT_MAX_ROW_GROUP_BYTES,
      dictionaryPageBytes: DICTIONARY_PAGE_BYTES,
      plainColumns: [...new Set([...(options.plainColumns ?? []), ...large])],
      noStatisticsColumns: large,
      keyValueMetadata: options.keyValueMetadata,
    },
  };
}

/** The finished file: parquet-wasm's bytes, or with its pages compressed here (`s.native`). */
function finishFile(bytes: Uint8Array, s: EncodeSettings): Uint8Array {
  return s.native ? compressPages(bytes, nativeCompressor(s.nativeCodec)!) : bytes;
}

/** Top-level text/binary columns whose values average at least LARGE_VALUE_BYTES. */
function largeValueColumns(records: readonly RecordBatch[]): string[] {
  const fields = records[0]!.schema.fields;
  const rows = records.reduce((n, r) => n + r.numRows, 0);
  if (rows === 0) return [];
  const out: string[] = [];
  fields.forEach((f, i) => {
    if (!DataType.isUtf8(f.type) && !DataType.isBinary(f.type)) return;
    let bytes = 0;
    for (const r of records) {
      const offsets = r.data.children[i]!.valueOffsets;
      bytes += offsets[r.numRows]! - offsets[0]!;
    }
    if (bytes / rows >= LARGE_VALUE_BYTES) out.push(f.name);
  });
  return out;
}

/**
 * Zero-copy slices of `record` of about `maxBytes` each (counting text/binary value bytes plus
 * 16 bytes a row for the fixed-width columns), each at least one row.
 */
function sliceRecord(record: RecordBatch, maxBytes: number): RecordBatch[] {
  const n = record.numRows;
  if (n === 0) return [];
  const offsets = record.data.children
    .filter((c) => DataType.isUtf8(c.type) || DataType.isBinary(c.type))
    .map((c) => c.valueOffsets);
  // Bytes of rows [0, i): monotonic, so each slice's end is found by bisection, not row by row.
  const upTo = (i: number): number => {
    let b = 16 * i;
    for (const o of offsets) b += o[i]! - o[0]!;
    return b;
  };
  const out: RecordBatch[] = [];
  let start = 0;
  while (start < n) {
    // The last end whose rows since `start` fit, and at least one row.
    const base = upTo(start);
    let lo = start + 1;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (upTo(mid) - base <= maxBytes) lo = mid;
      else hi = mid - 1;
    }
    out.push(start === 0 && lo === n ? record : record.slice(start, lo));
    start = lo;
  }
  return out;
}

/** One slice as its own Arrow IPC stream. */
function sliceIpc(slice: RecordBatch): Uint8Array {
  return tableToIPC(new Table(slice.schema, [slice]), 'stream');
}

/**
 * Writes the records (all of one lake schema) as one Parquet file and returns its bytes, on the
 * calling thread, all slices in one wasm table (so its memory is that of the whole object; the
 * sink uses `encodeParquetAsync`). The records must be non-empty and share their schema. Same
 * bytes as `encodeParquetAsync`.
 */
export function encodeParquet(
  records: readonly RecordBatch[],
  options: ParquetWriteOptions = {},
): Uint8Array {
  const { slices, settings, schema } = planEncode(records, options);
  if (settings.flat) {
    try {
      return writeFlat(schema, slices, settings, nativeCompressor(settings.nativeCodec)!);
    } catch (e) {
      warnFlatFallback(e);
    }
  }
  const ipc = tableToIPC(new Table(records[0]!.schema, slices), 'stream');
  // writeParquet consumes (frees) both the wasm table and the properties.
  const { Table: WasmTable, writeParquet } = parquetWasm();
  const encode = (s: EncodeSettings) =>
    writeParquet(WasmTable.fromIPCStream(ipc), writerProperties(parquetWasm(), s));
  if (!settings.native) return encode(settings);
  try {
    return finishFile(encode(settings), settings);
  } catch (e) {
    // A layout the page rewrite does not know: the wasm compresses instead (slower, same pages).
    warnNativeFallback(e);
    return encode({ ...settings, native: false });
  }
}

/**
 * The file tidemark's own writer writes of `records` with its pages compressed by `compressor`
 * (any codec Node's zlib has: the tests use gzip where this Node has no zstd), or undefined where
 * that writer does not write the object (a list column, lake format 2). Same bytes as the sink's
 * encode of the object with `compressor`'s codec.
 */
export function encodeFlat(
  records: readonly RecordBatch[],
  options: ParquetWriteOptions,
  compressor: PageCompressor,
): Uint8Array | undefined {
  const { slices, settings, schema } = planEncode(records, options);
  if ((options.format ?? DEFAULT_LAKE_FORMAT) !== 1 || !isFlat(schema)) return undefined;
  return writeFlat(schema, slices, settings, compressor);
}

let warnedFlatFallback = false;
/** Warns once per process that the flat writer refused an object (`e`: why); the wasm writes it. */
function warnFlatFallback(e: unknown): void {
  if (warnedFlatFallback) return;
  warnedFlatFallback = true;
  process.emitWarning(
    `Parquet objects are written by parquet-wasm instead of tidemark's own writer: ${e instanceof Error ? e.message : String(e)}`,
    { code: 'TIDEMARK_FLAT_WRITER_FALLBACK' satisfies WarningCode },
  );
}

let warnedNativeFallback = false;
/** Warns once per process that the page rewrite refused a layout (`e`: why). */
function warnNativeFallback(e: unknown): void {
  if (warnedNativeFallback) return;
  warnedNativeFallback = true;
  process.emitWarning(
    `Parquet pages are compressed inside parquet-wasm instead of by Node's zlib: ${e instanceof Error ? e.message : String(e)}`,
    { code: 'TIDEMARK_NATIVE_COMPRESSION_FALLBACK' satisfies WarningCode },
  );
}

function checkFormat(f: unknown): void {
  if (f !== undefined && !isLakeFormat(f)) {
    throw new Error(`unknown lake format ${JSON.stringify(f)}; use ${LAKE_FORMATS.join(' or ')}`);
  }
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

/** One encode in flight on the worker: the slices it has not pulled yet, and its promise. */
interface Pending {
  slices: RecordBatch[];
  next: number;
  /** The worker's flat writer takes the slices (`EncodeSettings.flat`). */
  flat: boolean;
  /**
   * Encodes the object again in parquet-wasm (the flat writer failed) with the wasm compressing
   * (the page rewrite refused its layout).
   */
  retryInWasm(): void;
  resolve(bytes: Uint8Array): void;
  reject(e: Error): void;
}

/** What the worker sends: a request for the next slice, the result, or a failure. */
type WorkerMessage =
  | { readonly id: number; readonly pull: true }
  | { readonly id: number; readonly bytes: Uint8Array }
  | { readonly id: number; readonly nativeFailed: string }
  | { readonly id: number; readonly flatFailed: string }
  | { readonly id: number; readonly error: string };

let worker: Worker | undefined;
let workerBroken = false;
const pending = new Map<number, Pending>();
let nextId = 0;

function encoderWorker(): Worker | undefined {
  if (worker || workerBroken) return worker;
  try {
    const w = new Worker(workerScript(), { execArgv: [] });
    w.on('message', (m: WorkerMessage) => {
      const p = pending.get(m.id);
      if (!p) return;
      if ('pull' in m) {
        // One slice at a time, as the encoder asks: only one slice's IPC copy exists at once.
        const slice = p.slices[p.next];
        if (slice === undefined) {
          p.slices = []; // the worker has everything: let the records go
          w.postMessage({ id: m.id, done: true });
        } else {
          p.next++;
          if (p.flat) {
            // The flat writer takes the columns' arrays, copied out of the records (no IPC).
            const { slice: flat, transfer } = flatSliceOf(slice);
            w.postMessage({ id: m.id, flat }, transfer);
          } else {
            const ipc = sliceIpc(slice);
            w.postMessage({ id: m.id, ipc }, [ipc.buffer as ArrayBuffer]);
          }
        }
        return;
      }
      pending.delete(m.id);
      if (pending.size === 0) w.unref();
      if ('nativeFailed' in m) {
        warnNativeFallback(m.nativeFailed);
        p.retryInWasm();
      } else if ('flatFailed' in m) {
        warnFlatFallback(m.flatFailed);
        p.retryInWasm();
      } else if ('error' in m) p.reject(new Error(`Parquet encode failed: ${m.error}`));
      else p.resolve(m.bytes);
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
 * `encodeParquet` on a worker thread, streamed: the worker pulls the records slice by slice (each
 * slice's Arrow IPC built here and transferred, not copied), encodes them with parquet-wasm's
 * streaming writer on another core, and the bytes come back transferred. Falls back to the main
 * thread when no worker can be started. Same bytes as `encodeParquet`.
 */
export function encodeParquetAsync(
  records: readonly RecordBatch[],
  options: ParquetWriteOptions = {},
): Promise<Uint8Array> {
  const w = encoderWorker();
  if (!w) {
    try {
      return Promise.resolve(encodeParquet(records, options));
    } catch (e) {
      return Promise.reject(e);
    }
  }
  let plan: ReturnType<typeof planEncode>;
  try {
    plan = planEncode(records, options);
  } catch (e) {
    return Promise.reject(e);
  }
  // One encode on the worker at a time, in call order: an object prepared ahead (ParquetSink
  // `prepare`) waits for the one before it instead of slowing it down, and the wasm memory holds
  // one object's row group, not several.
  const encoded = workerQueue.then(() => {
    // The worker may have died meanwhile (its 'error' rejected what it held): then this thread.
    const live = encoderWorker();
    return live
      ? encodeOnWorker(live, plan.schema, plan.slices, plan.settings)
      : encodeParquet(records, options);
  });
  workerQueue = encoded.then(
    () => undefined,
    () => undefined,
  );
  return encoded;
}

/**
 * Gets the encoder ready for objects of lake schema `schema` without waiting for it: starts the
 * worker thread (module loads, parquet-wasm) and, where the flat writer will encode them (lake
 * format 1, Node's zlib compresses), has it build the schema's template now. A run calls this
 * before its first page is read, so that start-up overlaps the read instead of delaying the
 * first page's encode (decision 0021). Encodes nothing and never throws: a failure here is met
 * again, and reported, by the first real encode.
 */
export function warmEncoder(
  schema: RecordBatch['schema'],
  options: Pick<ParquetWriteOptions, 'compression' | 'format'> = {},
): void {
  try {
    const w = encoderWorker();
    if (w && writerChoice(schema, options).flat) w.postMessage({ warm: schemaIpcOf(schema) });
  } catch {
    // The first encode meets the same failure and reports it.
  }
}

/** The encode the next one waits for (see encodeParquetAsync). */
let workerQueue: Promise<void> = Promise.resolve();

function encodeOnWorker(
  w: Worker,
  schema: RecordBatch['schema'],
  slices: RecordBatch[],
  settings: EncodeSettings,
): Promise<Uint8Array> {
  const id = nextId++;
  return new Promise<Uint8Array>((resolve, reject) => {
    const retry: EncodeSettings = settings.flat
      ? { ...settings, flat: false }
      : { ...settings, native: false };
    const retryInWasm = () => encodeOnWorker(w, schema, slices, retry).then(resolve, reject);
    pending.set(id, { slices, next: 0, flat: settings.flat, retryInWasm, resolve, reject });
    w.ref();
    if (settings.flat) w.postMessage({ id, settings, schemaIpc: schemaIpcOf(schema) });
    else w.postMessage({ id, settings });
  });
}
