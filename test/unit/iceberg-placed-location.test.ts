/**
 * Tables a catalog places (S3 Tables: `s3://<id>--table-s3`, the root of a bucket): which catalogs
 * place them by default (`catalogPlacesTables`), how a location the catalog assigned is opened
 * (`openLocation`: s3, and Java's `file:/dir` as well as `file:///dir`), and that a folder at a
 * bucket's root (key '') keeps the one rule of table-folder.ts: only keys under the folder, never
 * `..` or an empty segment.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { catalogPlacesTables } from '../../shared/iceberg/open-catalog.js';
import {
  folderPath,
  folderUriPrefix,
  keyInFolder,
  type TableFolder,
} from '../../shared/iceberg/table-folder.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { openLocation } from '../../shared/sink/open-lake.js';
import { S3ObjectStore } from '../../shared/sink/s3-object-store.js';

const LAKE = { uri: 's3://lake-bucket/raw', region: 'us-east-1' };

describe('catalogPlacesTables', () => {
  it('is on for S3 Tables unless turned off, off for other REST catalogs unless turned on, never for file or glue', () => {
    const rest = {
      type: 'rest',
      uri: 'https://s3tables.us-east-1.amazonaws.com/iceberg',
      namespace: 'ns',
    } as const;
    expect(catalogPlacesTables({ ...rest, sigv4: { service: 's3tables' } })).toBe(true);
    expect(catalogPlacesTables({ ...rest, sigv4: { service: 's3tables' }, placesTables: false })).toBe(false);
    expect(catalogPlacesTables({ ...rest, sigv4: { service: 'glue' } })).toBe(false);
    expect(catalogPlacesTables(rest)).toBe(false);
    expect(catalogPlacesTables({ ...rest, placesTables: true })).toBe(true);
    expect(catalogPlacesTables({ type: 'file' })).toBe(false);
    expect(catalogPlacesTables({ type: 'glue', database: 'db' })).toBe(false);
  });
});

describe('openLocation', () => {
  it('opens an S3 Tables location at its bucket root, and a path below a bucket at its key', () => {
    const root = openLocation('s3://0a1b2c3d-e4f5--table-s3', LAKE);
    expect(root.store).toBeInstanceOf(S3ObjectStore);
    expect(root.key).toBe('');
    expect(root.store.uri(folderPath(root, 'data/x.parquet'))).toBe(
      's3://0a1b2c3d-e4f5--table-s3/data/x.parquet',
    );
    const below = openLocation('s3://wh-bucket/ns/t/', LAKE);
    expect(below.key).toBe('ns/t');
    expect(below.store.uri(folderPath(below, 'metadata/m.avro'))).toBe('s3://wh-bucket/ns/t/metadata/m.avro');
  });

  it("opens Java's file:/dir and file:///dir alike, at the folder's key under its parent", () => {
    for (const location of ['file:/tmp/wh/ns/t', 'file:///tmp/wh/ns/t', 'file:///tmp/wh/ns/t/']) {
      const folder = openLocation(location, LAKE);
      expect(folder.store).toBeInstanceOf(FileObjectStore);
      expect(folder.key).toBe('t');
      expect(folderUriPrefix(folder)).toBe('file:///tmp/wh/ns/t/');
    }
  });

  it('refuses a location it cannot write to, naming it', () => {
    expect(() => openLocation('hdfs://nn/wh/t', LAKE)).toThrow(
      expect.objectContaining({
        code: 'REST_CATALOG_FAILED',
        message: expect.stringContaining('hdfs://nn/wh/t'),
      }),
    );
  });
});

describe('a table folder at the root of a bucket', () => {
  const folder: TableFolder = {
    store: new S3ObjectStore({ bucket: 'tbl--table-s3', region: 'us-east-1' }),
    key: '',
    catalogOwnsFiles: true,
  };

  it('names keys without a leading slash and finds only files under it', () => {
    expect(folderPath(folder, 'metadata/a.avro')).toBe('metadata/a.avro');
    expect(folderUriPrefix(folder)).toBe('s3://tbl--table-s3/');
    expect(keyInFolder(folder, 's3://tbl--table-s3/data/a.parquet')).toBe('data/a.parquet');
    expect(keyInFolder(folder, 's3://tbl--table-s3-other/data/a.parquet')).toBeUndefined();
    expect(keyInFolder(folder, 's3://tbl--table-s3//a.parquet')).toBeUndefined();
    expect(keyInFolder(folder, 's3://tbl--table-s3/data/../x')).toBeUndefined();
  });

  it('round-trips every clean relative key, as a folder below a prefix does', () => {
    const segment = fc.stringMatching(/^[A-Za-z0-9._=-]{1,12}$/).filter((s) => s !== '.' && s !== '..');
    const below: TableFolder = { ...folder, key: 'wh/ns/t' };
    fc.assert(
      fc.property(fc.array(segment, { minLength: 1, maxLength: 4 }), (parts) => {
        const rel = parts.join('/');
        for (const f of [folder, below]) {
          const key = folderPath(f, rel);
          expect(keyInFolder(f, f.store.uri(key))).toBe(key);
        }
      }),
    );
  });
});
