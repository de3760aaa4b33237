/**
 * Page compression outside the wasm (shared/sink/parquet-pages.cjs): parquet-wasm writes a file
 * UNCOMPRESSED, the rewrite compresses its pages with Node's zlib and moves every offset. Checked
 * on random tables of every logical kind (nulls, lists, dictionary and plain pages, several pages
 * and row groups, lake formats 1 and 2): DuckDB and arrow-rs read the same rows back, every offset
 * index entry points at a page of its size, the Thrift codec gives the footer's bytes back, and,
 * where this Node has zstd, the rewrite gives the very bytes parquet-wasm's own zstd writes.
 * gzip (native on every Node) runs the rewrite where zstd is not native (Node 20).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import zlib from 'node:zlib';
import { DuckDBInstance } from '@duckdb/node-api';
import { Table as ArrowTable, tableToIPC } from 'apache-arrow';
import fc from 'fast-check';
import {
  Compression,
  readParquet,
  Table as WasmTable,
  WriterPropertiesBuilder,
  WriterVersion,
  writeParquet,
} from 'parquet-wasm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogicalType, Schema } from '../../shared/dataplane/schema.js';
import {
  CODEC,
  compressPages,
  decodeStruct,
  encodeStruct,
  nativeCompressor,
  type ThriftStruct,
} from '../../shared/sink/parquet-pages.cjs';
import { encodeParquet, flatWriter, pageCompression } from '../../shared/sink/parquet-writer.js';
import { lakeRecord } from '../harness/lake-record.js';
import { arbitraryOf, KINDS } from '../harness/logical-arbitraries.js';

const hasNativeZstd = typeof (zlib as { zstdCompressSync?: unknown }).zstdCompressSync === 'function';
const gzip = nativeCompressor('gzip')!;

interface Case {
  readonly types: LogicalType[];
  readonly rows: unknown[][];
  readonly format: 1 | 2;
  readonly pageBytes: number;
  readonly groupRows: number;
}

/** Values of `t`; instants and dates within what DuckDB reads (years 1-9999). */
function valueArb(t: LogicalType): fc.Arbitrary<unknown> {
  if (t.kind === 'timestamp')
    return fc.bigInt({ min: -62_135_596_800_000_000n, max: 253_402_300_799_999_999n });
  if (t.kind === 'date') return fc.integer({ min: -719_162, max: 2_932_896 });
  return arbitraryOf(t);
}

const caseArb: fc.Arbitrary<Case> = fc
  .array(fc.constantFrom(...KINDS), { minLength: 1, maxLength: 4 })
  .chain((types) =>
    fc.record({
      types: fc.constant(types),
      rows: fc.array(fc.tuple(...types.map((t) => fc.option(valueArb(t), { nil: null, freq: 4 }))), {
        minLength: 1,
        maxLength: 300,
      }),
      format: fc.constantFrom(1 as const, 2 as const),
      // Small pages and groups: many pages per chunk, several chunks per file.
      pageBytes: fc.constantFrom(64, 512, 4096, 1 << 20),
      groupRows: fc.constantFrom(7, 100, 1_000_000),
    }),
  );

function lakeRecordOf(c: Case) {
  const schema: Schema = {
    columns: c.types.map((type, i) => ({ name: `c${i}`, type, nullable: true, sourceType: 'x' })),
    primaryKey: [],
  };
  return lakeRecord(schema, c.rows);
}

/** The case written by parquet-wasm with `codec`, the writer settings otherwise the case's. */
function writeWith(c: Case, codec: Compression): Uint8Array {
  const record = lakeRecordOf(c);
  const ipc = tableToIPC(new ArrowTable(record.schema, [record]), 'stream');
  const props = new WriterPropertiesBuilder()
    .setCompression(codec)
    .setWriterVersion(c.format === 2 ? WriterVersion.V2 : WriterVersion.V1)
    .setDataPageSizeLimit(c.pageBytes)
    .setDictionaryPageSizeLimit(c.pageBytes)
    .setMaxRowGroupSize(c.groupRows)
    .setColumnDictionaryEnabled('__pos', false)
    .setKeyValueMetadata(new Map([['tidemark.test', 'yes']]))
    .build();
  return writeParquet(WasmTable.fromIPCStream(ipc), props);
}

function footer(file: Uint8Array): { meta: ThriftStruct; start: number } {
  const length = new DataView(file.buffer, file.byteOffset + file.length - 8, 4).getUint32(0, true);
  const start = file.length - 8 - length;
  return { meta: decodeStruct(file, start).struct, start };
}

const f = (s: ThriftStruct, id: number) => s.fields.find((x) => x.id === id)?.value;
const items = (s: ThriftStruct, id: number) =>
  (f(s, id) as { items: ThriftStruct[] } | undefined)?.items ?? [];

/** Every offset index entry points at a page header whose page has the entry's size. */
function checkOffsetIndexes(file: Uint8Array): number {
  let pages = 0;
  for (const rg of items(footer(file).meta, 4)) {
    for (const cc of items(rg, 1)) {
      const at = f(cc, 4);
      if (at === undefined) continue;
      const oi = decodeStruct(file, Number(at)).struct;
      for (const loc of items(oi, 1)) {
        const offset = Number(f(loc, 1));
        const { struct: header, end } = decodeStruct(file, offset);
        expect(end - offset + Number(f(header, 3))).toBe(Number(f(loc, 2)));
        pages++;
      }
    }
  }
  return pages;
}

let duck: Awaited<ReturnType<typeof DuckDBInstance.create>>;
let dir: string;
beforeAll(async () => {
  duck = await DuckDBInstance.create(':memory:');
  dir = mkdtempSync(join(tmpdir(), 'parquet-pages-'));
});
afterAll(() => {
  duck?.closeSync();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * The rows DuckDB reads from `file` (a hash of each whole row, in file order: values such as
 * year-290000 timestamps do not convert to JS) and the codecs it reports.
 */
async function duckRead(file: Uint8Array, name: string): Promise<{ rows: string; codecs: string[] }> {
  const path = join(dir, name);
  writeFileSync(path, file);
  const c = await duck.connect();
  try {
    const rows = await c.runAndReadAll(`SELECT hash(t)::VARCHAR FROM read_parquet('${path}') t`);
    const codecs = await c.runAndReadAll(`SELECT DISTINCT compression FROM parquet_metadata('${path}')`);
    return {
      rows: JSON.stringify(rows.getRowsJson()),
      codecs: codecs.getRowsJson().map((r) => String(r[0])),
    };
  } finally {
    c.closeSync();
  }
}

function arrowRead(file: Uint8Array): Buffer {
  return Buffer.from(readParquet(file).intoIPCStream());
}

describe('compressing Parquet pages outside the wasm', () => {
  it('keeps every row, page and offset of random tables (gzip: native on every Node)', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        const plain = writeWith(c, Compression.UNCOMPRESSED);
        // The Thrift codec gives the footer's bytes back, so untouched fields stay as written.
        const { meta, start } = footer(plain);
        expect(
          Buffer.from(encodeStruct(meta)).equals(Buffer.from(plain.subarray(start, plain.length - 8))),
        ).toBe(true);
        const packed = compressPages(plain, gzip);
        const before = await duckRead(plain, `p${n}.parquet`);
        const after = await duckRead(packed, `g${n++}.parquet`);
        expect(after.rows).toBe(before.rows);
        expect(before.codecs).toEqual(['UNCOMPRESSED']);
        expect(after.codecs).toEqual(['GZIP']);
        expect(arrowRead(packed).equals(arrowRead(plain))).toBe(true);
        // The same number of pages, each where the offset index says and of the size it says.
        expect(checkOffsetIndexes(packed)).toBe(checkOffsetIndexes(plain));
        // The metadata tells the codec it wrote; the key/value metadata is kept.
        const chunk = f(items(items(footer(packed).meta, 4)[0]!, 1)[0]!, 3) as ThriftStruct;
        expect(f(chunk, 4)).toBe(CODEC.GZIP);
        expect(Buffer.from(packed).includes(Buffer.from('tidemark.test'))).toBe(true);
      }),
      { numRuns: 40 },
    );
  }, 180_000);

  it.runIf(hasNativeZstd)('writes the very bytes parquet-wasm zstd writes, where Node has zstd', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const ours = compressPages(writeWith(c, Compression.UNCOMPRESSED), nativeCompressor('zstd')!);
        expect(Buffer.from(ours).equals(Buffer.from(writeWith(c, Compression.ZSTD)))).toBe(true);
      }),
      { numRuns: 60 },
    );
  });

  it('refuses what it does not know, so the wasm compresses instead', () => {
    const c: Case = {
      types: [{ kind: 'int64' }],
      rows: [[1n], [2n]],
      format: 1,
      pageBytes: 1 << 20,
      groupRows: 100,
    };
    expect(() => compressPages(writeWith(c, Compression.SNAPPY), gzip)).toThrow(/already compressed/);
    const plain = writeWith(c, Compression.UNCOMPRESSED);
    expect(() => compressPages(plain.subarray(1), gzip)).toThrow(/not a Parquet file/);
    // A byte nobody accounts for between the page indexes and the footer.
    const { start } = footer(plain);
    const padded = new Uint8Array(plain.length + 1);
    padded.set(plain.subarray(0, start));
    padded.set(plain.subarray(start), start + 1);
    expect(() => compressPages(padded, gzip)).toThrow(/unknown bytes before its footer/);
  });

  it('the lake encoder picks native compression only where this Node has the codec', () => {
    const c: Case = {
      types: [{ kind: 'text' }, { kind: 'int64' }],
      rows: Array.from({ length: 500 }, (_, i) => [`v${i % 7}`, BigInt(i)]),
      format: 1,
      pageBytes: 1 << 20,
      groupRows: 1_000_000,
    };
    const record = lakeRecordOf(c);
    try {
      // parquet-wasm writes either way (the flat writer, which also compresses natively, is off).
      flatWriter.enabled = false;
      pageCompression.native = false;
      const wasm = encodeParquet([record], { compression: 'zstd' });
      pageCompression.native = true;
      const native = encodeParquet([record], { compression: 'zstd' });
      // zstd level 1 either way: the same bytes whichever compresses (on Node 20 the wasm does).
      expect(Buffer.from(native).equals(Buffer.from(wasm))).toBe(true);
      expect(nativeCompressor('zstd') !== undefined).toBe(hasNativeZstd);
      expect(nativeCompressor('snappy')).toBeUndefined();
    } finally {
      pageCompression.native = true;
      flatWriter.enabled = true;
    }
  });
});
