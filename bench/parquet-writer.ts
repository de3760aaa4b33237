/**
 * Parquet writer benchmark: the same in-memory Arrow data (default 1M rows x 9 columns: int64,
 * timestamptz us, decimal(12,2), text, nullable text, bool, float64, nullable int32, date)
 * written by parquet-wasm with snappy (the baseline) and zstd, at two row-group bounds, and by
 * DuckDB's native COPY TO for reference; plus the whole sink path (lake cast of the wire
 * metadata tail + encode, 15 columns). Prints medians of alternated runs and ratios against the
 * baseline measured in the same run (absolute times vary by machine; ratios hold better).
 *
 * Usage: npx tsx bench/parquet-writer.ts [rows=1000000] [rounds=3] [--formats]
 * `--formats` (docs/lake-format.md) runs only the sink path, zstd, in lake format 1 and format 2,
 * alternated (after one unmeasured warm-up encode of each): per round the encode's CPU time (process.cpuUsage, the encode runs on this thread)
 * and wall time, the paired format 2 / format 1 ratios of each round, and the object sizes.
 * `--writers` (docs/decisions/0018-flat-parquet-writer.md) runs only the sink path, zstd, lake
 * format 1, written by tidemark's own flat writer and by parquet-wasm (both with the pages
 * compressed by Node's zlib), alternated the same way; where this Node has no zstd (Node 20) both
 * compress with gzip instead (`pageCompression.testCodec`), which it says. Run it with Node 22:
 * `/path/to/node22 --import tsx bench/parquet-writer.ts 1000000 7 --writers`.
 * Feeds docs/decisions/0006-parquet-writer.md. hyparquet-writer and parquetjs are not installed;
 * the figures 0006 gives for them come from an earlier trial outside this repository.
 */
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { DuckDBInstance } from '@duckdb/node-api';
import {
  Bool,
  type Data,
  DateDay,
  Decimal,
  Field,
  Float64,
  Int32,
  Int64,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  Table,
  Timestamp,
  TimeUnit,
  tableToIPC,
  Utf8,
} from 'apache-arrow';
import type { LakeFormat } from '../shared/contracts/lake-format.js';
import { toLakeRecord } from '../shared/dataplane/lake.js';
import { metadataFields } from '../shared/dataplane/metadata.js';
import { objectStartPosition } from '../shared/position/position.js';
import { nativeCompressor } from '../shared/sink/parquet-pages.cjs';
import {
  encodeParquet,
  flatWriter,
  type ParquetCompression,
  pageCompression,
} from '../shared/sink/parquet-writer.js';

const ARGS = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const FORMATS = process.argv.includes('--formats');
const WRITERS = process.argv.includes('--writers');
const ROWS = Number(ARGS[0] ?? 1_000_000);
const ROUNDS = Number(ARGS[1] ?? 3);
/** Rows per input RecordBatch, like sink pages. */
const BATCH_ROWS = 50_000;

/** Deterministic PRNG (mulberry32) so every run writes the same bytes. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function validity(n: number, nullEvery: number, rnd: () => number): { bitmap: Uint8Array; nulls: number } {
  const bitmap = new Uint8Array(Math.ceil(n / 8));
  let nulls = 0;
  for (let i = 0; i < n; i++) {
    if (rnd() < 1 / nullEvery) nulls++;
    else bitmap[i >> 3]! |= 1 << (i & 7);
  }
  return { bitmap, nulls };
}

function utf8Column(n: number, text: (i: number) => string | null): Data<Utf8> {
  const offsets = new Int32Array(n + 1);
  const bitmap = new Uint8Array(Math.ceil(n / 8));
  const parts: string[] = [];
  let nulls = 0;
  let pos = 0;
  for (let i = 0; i < n; i++) {
    const s = text(i);
    if (s === null) nulls++;
    else {
      bitmap[i >> 3]! |= 1 << (i & 7);
      parts.push(s);
      pos += s.length; // ASCII only
    }
    offsets[i + 1] = pos;
  }
  const bytes = Buffer.from(parts.join(''), 'latin1');
  return makeData({
    type: new Utf8(),
    length: n,
    nullCount: nulls,
    nullBitmap: nulls ? bitmap : null,
    valueOffsets: offsets,
    data: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length),
  });
}

const WORDS = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet'];

/** One batch of the 9-column benchmark table, rows [start, start + n). */
function makeBatch(start: number, n: number, seed: number): RecordBatch {
  const rnd = prng(seed);
  const id = new BigInt64Array(n);
  const ts = new BigInt64Array(n);
  const amount = new Uint32Array(n * 4);
  const flag = new Uint8Array(Math.ceil(n / 8));
  const score = new Float64Array(n);
  const qty = new Int32Array(n);
  const day = new Int32Array(n);
  const base = 1_700_000_000_000_000n;
  for (let i = 0; i < n; i++) {
    const row = start + i;
    id[i] = BigInt(row);
    ts[i] = base + BigInt(row) * 1_000n + BigInt(Math.floor(rnd() * 1000));
    const cents = Math.floor(rnd() * 1e9) - 1e8;
    amount[4 * i] = cents >>> 0;
    const fill = cents < 0 ? 0xffffffff : 0;
    amount[4 * i + 1] = fill;
    amount[4 * i + 2] = fill;
    amount[4 * i + 3] = fill;
    if (rnd() < 0.5) flag[i >> 3]! |= 1 << (i & 7);
    score[i] = rnd() * 1000;
    qty[i] = Math.floor(rnd() * 100);
    day[i] = 18_000 + (row % 3650);
  }
  const noteNulls = prng(seed + 1);
  const qtyValid = validity(n, 10, prng(seed + 2));
  const fields = [
    new Field('id', new Int64(), false),
    new Field('created_at', new Timestamp(TimeUnit.MICROSECOND, 'UTC'), false),
    new Field('amount', new Decimal(2, 12, 128), false),
    new Field('customer', new Utf8(), false),
    new Field('note', new Utf8(), true),
    new Field('active', new Bool(), false),
    new Field('score', new Float64(), false),
    new Field('qty', new Int32(), true),
    new Field('day', new DateDay(), false),
  ];
  const children = [
    makeData({ type: new Int64(), length: n, data: id }),
    makeData({ type: new Timestamp(TimeUnit.MICROSECOND, 'UTC'), length: n, data: ts }),
    makeData({ type: new Decimal(2, 12, 128), length: n, data: amount }),
    utf8Column(n, (i) => `customer-${(start + i) % 50_000}`),
    utf8Column(n, (i) =>
      noteNulls() < 0.1 ? null : `${WORDS[(start + i) % 10]} ${WORDS[(start + i * 7) % 10]} ${i % 997}`,
    ),
    makeData({ type: new Bool(), length: n, data: flag }),
    makeData({ type: new Float64(), length: n, data: score }),
    makeData({
      type: new Int32(),
      length: n,
      nullCount: qtyValid.nulls,
      nullBitmap: qtyValid.bitmap,
      data: qty,
    }),
    makeData({ type: new DateDay(), length: n, data: day }),
  ];
  const schema = new Schema(fields);
  return new RecordBatch(schema, makeData({ type: new Struct(fields), length: n, nullCount: 0, children }));
}

/**
 * The same batch with the wire metadata tail appended (what the sink really writes): `__pos` is
 * an incremental position per row, `__commit_ts` ns, constant `__ingest_ts`/`__phase`.
 */
function withWireMetadata(batch: RecordBatch, start: number): RecordBatch {
  const n = batch.numRows;
  const ops = new Uint8Array(n).fill(1);
  const commit = new BigInt64Array(n);
  for (let i = 0; i < n; i++) commit[i] = 1_700_000_000_000_000_000n + BigInt(start + i) * 1_000_123n;
  const meta = metadataFields();
  const children = [
    ...batch.data.children,
    makeData({ type: meta[0]!.type, length: n, data: ops }),
    utf8Column(n, (i) => objectStartPosition(1, start + i)),
    makeData({ type: meta[2]!.type, length: n, data: commit }),
    makeData({ type: meta[3]!.type, length: n, data: new BigInt64Array(n).fill(1_700_000_001_000_000_000n) }),
    makeData({ type: meta[4]!.type, length: n, data: new Uint8Array(Math.ceil(n / 8)) }),
    utf8Column(n, () => 'incremental'),
  ];
  const fields = [...batch.schema.fields, ...meta];
  return new RecordBatch(
    new Schema(fields),
    makeData({ type: new Struct(fields), length: n, nullCount: 0, children }),
  );
}

interface Variant {
  readonly name: string;
  /** Writes the data to `file`, returns the time of the measured part in ms. */
  run(file: string): Promise<number>;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** One way of encoding the sink path's objects, for `compareEncodes`. */
interface Encode {
  readonly name: string;
  encode(): Uint8Array;
}

/**
 * The encodes, alternated (one unmeasured warm-up each; round r starts at a different one), CPU
 * and wall per round, and each one's paired ratios against the first.
 */
function compareEncodes(title: string, encodes: readonly Encode[]): void {
  const cpu = encodes.map((): number[] => []);
  const wall = encodes.map((): number[] => []);
  const size = encodes.map(() => 0);
  const load: string[] = [];
  // One unmeasured encode each first: the wasm memory grows to its working set once, JIT warms.
  for (const e of encodes) e.encode();
  for (let round = 0; round < ROUNDS; round++) {
    load.push(
      loadavg()
        .map((l) => l.toFixed(2))
        .join('/'),
    );
    // Alternate which goes first, so a load change mid-round hits each the same way.
    for (let k = 0; k < encodes.length; k++) {
      const i = (round + k) % encodes.length;
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const bytes = encodes[i]!.encode();
      const ms = performance.now() - t0;
      const c = process.cpuUsage(c0);
      cpu[i]!.push((c.user + c.system) / 1e6);
      wall[i]!.push(ms / 1000);
      size[i] = bytes.byteLength;
    }
  }
  const per1M = (s: number) => (s * 1e6) / ROWS;
  console.log(
    `${ROWS} rows, ${title} (9 data + 6 metadata columns), ${ROUNDS} alternated rounds; node ${process.version}`,
  );
  console.log(`load averages (1/5/15 min) at each round: ${load.join('  ')}`);
  encodes.forEach((e, i) => {
    console.log(
      `${e.name}: CPU-s per 1M rows median ${per1M(median(cpu[i]!)).toFixed(2)} (rounds ${cpu[i]!.map((x) => per1M(x).toFixed(2)).join(' ')}), wall s median ${median(wall[i]!).toFixed(2)}, ${(size[i]! / 1e6).toFixed(2)} MB`,
    );
  });
  for (let i = 1; i < encodes.length; i++) {
    const ratios = (m: number[][]) => m[i]!.map((x, r) => x / m[0]![r]!);
    const [c, w] = [ratios(cpu), ratios(wall)];
    console.log(
      `${encodes[i]!.name} / ${encodes[0]!.name} per round: CPU ${c.map((r) => r.toFixed(2)).join(' ')} (median ${median(c).toFixed(2)}), wall ${w.map((r) => r.toFixed(2)).join(' ')} (median ${median(w).toFixed(2)}), size ${(size[i]! / size[0]!).toFixed(2)}`,
    );
  }
}

/** `--formats`: the sink path (zstd) in lake format 1 and 2. */
function compareFormats(wire: readonly RecordBatch[]): void {
  const formats: readonly LakeFormat[] = [1, 2];
  compareEncodes(
    'sink path zstd',
    formats.map((format) => ({
      name: `format ${format}`,
      encode: () =>
        encodeParquet(wire.map(toLakeRecord), { compression: 'zstd', plainColumns: ['__pos'], format }),
    })),
  );
}

/** `--writers`: the sink path (zstd, format 1) by the flat writer and by parquet-wasm. */
function compareWriters(wire: readonly RecordBatch[]): void {
  const native = nativeCompressor('zstd') !== undefined;
  if (!native) pageCompression.testCodec = 'gzip';
  const by = (flat: boolean): Encode => ({
    name: flat ? 'flat writer' : 'parquet-wasm',
    encode() {
      flatWriter.enabled = flat;
      try {
        return encodeParquet(wire.map(toLakeRecord), { compression: 'zstd', plainColumns: ['__pos'] });
      } finally {
        flatWriter.enabled = true;
      }
    },
  });
  compareEncodes(
    native ? 'sink path, zstd pages by Node' : 'sink path, GZIP pages by Node (this Node has no zstd)',
    [by(false), by(true)],
  );
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-bench-'));
  try {
    const batches: RecordBatch[] = [];
    for (let start = 0, seed = 1; start < ROWS; start += BATCH_ROWS, seed++) {
      batches.push(makeBatch(start, Math.min(BATCH_ROWS, ROWS - start), seed));
    }
    const wire = batches.map((b, i) => withWireMetadata(b, i * BATCH_ROWS));
    if (FORMATS) {
      compareFormats(wire);
      return;
    }
    if (WRITERS) {
      compareWriters(wire);
      return;
    }
    const sinkPath = (compression: ParquetCompression): Variant => ({
      name: `sink path ${compression} (+6 meta cols)`,
      async run(file) {
        const t0 = performance.now();
        const bytes = encodeParquet(wire.map(toLakeRecord), { compression, plainColumns: ['__pos'] });
        const ms = performance.now() - t0;
        writeFileSync(file, bytes);
        return ms;
      },
    });
    const castOnly: Variant = {
      name: 'lake cast only (part of sink path)',
      async run(file) {
        const t0 = performance.now();
        const lake = wire.map(toLakeRecord);
        const ms = performance.now() - t0;
        writeFileSync(file, String(lake.length));
        return ms;
      },
    };
    const wasm = (compression: ParquetCompression, maxRowGroupRows?: number): Variant => ({
      name: `parquet-wasm ${compression}${maxRowGroupRows ? ` rg=${maxRowGroupRows}` : ''}`,
      async run(file) {
        const t0 = performance.now();
        const bytes = encodeParquet(batches, {
          compression,
          ...(maxRowGroupRows ? { maxRowGroupRows } : {}),
        });
        const ms = performance.now() - t0;
        writeFileSync(file, bytes);
        return ms;
      },
    });
    // The IPC step alone, to show how much of the parquet-wasm time is the JS -> wasm hand-off.
    const ipcOnly: Variant = {
      name: 'arrow IPC only (part of the above)',
      async run(file) {
        const t0 = performance.now();
        const ipc = tableToIPC(new Table(batches[0]!.schema, batches), 'stream');
        const ms = performance.now() - t0;
        writeFileSync(file, ipc.subarray(0, 1));
        return ms;
      },
    };

    // DuckDB reference: load the baseline file into a DuckDB table (not timed), then time COPY TO.
    const seedFile = join(dir, 'seed.parquet');
    writeFileSync(seedFile, encodeParquet(batches, { compression: 'snappy' }));
    const duck = await DuckDBInstance.create(':memory:', { threads: '2' });
    const conn = await duck.connect();
    await conn.run(`CREATE TABLE t AS SELECT * FROM read_parquet('${seedFile}')`);
    const duckdb = (codec: string): Variant => ({
      name: `duckdb COPY TO ${codec}`,
      async run(file) {
        const t0 = performance.now();
        await conn.run(`COPY t TO '${file}' (FORMAT parquet, COMPRESSION ${codec})`);
        return performance.now() - t0;
      },
    });

    const variants: Variant[] = [
      wasm('snappy'),
      wasm('zstd'),
      wasm('snappy', 122_880),
      wasm('zstd', 122_880),
      ipcOnly,
      castOnly,
      sinkPath('snappy'),
      sinkPath('zstd'),
      duckdb('snappy'),
      duckdb('zstd'),
    ];
    const times = new Map<string, number[]>(variants.map((v) => [v.name, []]));
    const sizes = new Map<string, number>();
    for (let round = 0; round < ROUNDS; round++) {
      for (const v of variants) {
        const file = join(dir, `out-${variants.indexOf(v)}.parquet`);
        times.get(v.name)!.push(await v.run(file));
        sizes.set(v.name, statSync(file).size);
      }
    }
    conn.closeSync();

    const baseName = variants[0]!.name;
    const baseMs = median(times.get(baseName)!);
    const baseSize = sizes.get(baseName)!;
    console.log(
      `${ROWS} rows x 9 columns in ${batches.length} batches, ${ROUNDS} alternated rounds, median ms`,
    );
    console.log(`node ${process.version}, baseline = ${baseName}`);
    console.log(
      'variant'.padEnd(38),
      'ms'.padStart(8),
      'rows/s'.padStart(10),
      'MB'.padStart(8),
      'time x'.padStart(7),
      'size x'.padStart(7),
    );
    for (const v of variants) {
      const ms = median(times.get(v.name)!);
      const size = sizes.get(v.name)!;
      const isIpc = v === ipcOnly || v === castOnly;
      console.log(
        v.name.padEnd(38),
        ms.toFixed(0).padStart(8),
        Math.round(ROWS / (ms / 1000))
          .toString()
          .padStart(10),
        (isIpc ? '-' : (size / 1e6).toFixed(2)).padStart(8),
        (ms / baseMs).toFixed(2).padStart(7),
        (isIpc ? '-' : (size / baseSize).toFixed(2)).padStart(7),
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
