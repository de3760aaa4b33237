/**
 * shared/iceberg/position-deletes.ts without a table: the file's rows in the spec's order (read
 * back with hyparquet, a Parquet reader we did not write), its Parquet field ids, and the entry's
 * exact bounds and `referenced_data_file`. Readers applying the files: the integration test
 * test/integration/iceberg-position-deletes.test.ts.
 */
import fc from 'fast-check';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { describe, expect, it } from 'vitest';
import { FileContent } from '../../shared/iceberg/manifest.js';
import {
  DELETE_FILE_PATH_ID,
  DELETE_POS_ID,
  encodePositionDeletes,
  positionDeleteFile,
} from '../../shared/iceberg/position-deletes.js';
import { compareBytes, deserializeValue } from '../../shared/iceberg/single-value.js';

const utf8 = new TextEncoder();
const buffer = (b: Uint8Array) => b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;

describe('position delete files', () => {
  it('writes file_path and pos with their reserved field ids, required', () => {
    const { bytes } = encodePositionDeletes([{ filePath: 's3://b/t/data/x.parquet', pos: 3 }]);
    const meta = parquetMetadata(buffer(bytes));
    const columns = meta.schema.slice(1).map((e) => [e.name, e.field_id, e.repetition_type]);
    expect(columns).toEqual([
      ['file_path', DELETE_FILE_PATH_ID, 'REQUIRED'],
      ['pos', DELETE_POS_ID, 'REQUIRED'],
    ]);
  });

  it('property: rows come back sorted by file_path (UTF-8 bytes) then pos, each pair once', async () => {
    const path = fc.constantFrom(
      's3://b/t/data/a.parquet',
      's3://b/t/data/ä.parquet',
      's3://b/t/data/\u{1F600}.parquet',
      's3://b/t/data/\uFFFD.parquet',
      'file:///x/y',
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ filePath: path, pos: fc.bigInt({ min: 0n, max: 2n ** 40n }) }), {
          minLength: 1,
          maxLength: 40,
        }),
        async (deletes) => {
          const { bytes, rows } = encodePositionDeletes(deletes);
          const read = (await parquetReadObjects({ file: buffer(bytes), compressors })) as {
            file_path: string;
            pos: bigint;
          }[];
          expect(read.map((r) => [r.file_path, BigInt(r.pos)])).toEqual(rows.map((r) => [r.filePath, r.pos]));
          const key = (d: { filePath: string; pos: bigint }) => `${d.filePath}\u0000${d.pos}`;
          expect(new Set(rows.map(key))).toEqual(new Set(deletes.map(key)));
          expect(rows.length).toBe(new Set(deletes.map(key)).size);
          for (let i = 1; i < rows.length; i++) {
            const c = compareBytes(utf8.encode(rows[i - 1]!.filePath), utf8.encode(rows[i]!.filePath));
            expect(c < 0 || (c === 0 && rows[i - 1]!.pos < rows[i]!.pos)).toBe(true);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('states exact bounds (never truncated) and referenced_data_file only when one data file is named', () => {
    const long = `s3://bucket/warehouse/public.orders/data/${'x'.repeat(80)}.parquet`;
    const other = `s3://bucket/warehouse/public.orders/data/${'y'.repeat(80)}.parquet`;
    const one = encodePositionDeletes([
      { filePath: long, pos: 9 },
      { filePath: long, pos: 4 },
    ]);
    const f1 = positionDeleteFile('s3://bucket/d1.parquet', one.bytes, one.rows);
    expect(f1.content).toBe(FileContent.POSITION_DELETES);
    expect(f1.record_count).toBe(2);
    expect(f1.file_size_in_bytes).toBe(one.bytes.length);
    expect(f1.referenced_data_file).toBe(long);
    const path = (b: ReadonlyMap<number, Uint8Array> | undefined) =>
      deserializeValue({ kind: 'string' }, b!.get(DELETE_FILE_PATH_ID)!);
    const pos = (b: ReadonlyMap<number, Uint8Array> | undefined) =>
      deserializeValue({ kind: 'long' }, b!.get(DELETE_POS_ID)!);
    expect([path(f1.lower_bounds), path(f1.upper_bounds)]).toEqual([long, long]);
    expect([pos(f1.lower_bounds), pos(f1.upper_bounds)]).toEqual([4n, 9n]);

    const two = encodePositionDeletes([
      { filePath: other, pos: 1 },
      { filePath: long, pos: 7 },
    ]);
    const f2 = positionDeleteFile('s3://bucket/d2.parquet', two.bytes, two.rows, { day: 19_000 });
    expect(f2.referenced_data_file).toBeUndefined();
    expect(f2.partition).toEqual({ day: 19_000 });
    expect([path(f2.lower_bounds), path(f2.upper_bounds)]).toEqual([long, other]);
    expect([pos(f2.lower_bounds), pos(f2.upper_bounds)]).toEqual([1n, 7n]);
  });

  it('refuses an empty delete set and a negative position', () => {
    expect(() => encodePositionDeletes([])).toThrow(RangeError);
    expect(() => encodePositionDeletes([{ filePath: 'f', pos: -1 }])).toThrow(RangeError);
  });
});
