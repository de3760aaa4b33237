/**
 * Where an Iceberg table's files are: its folder as a key of the lake's object store, and the one
 * check every reader and deleter of the table's files goes through (`keyInFolder`): a URI the
 * table names is read or deleted only when it is under the table's folder.
 *
 * A folder the catalog placed (`catalogOwnsFiles`: S3 Tables assigns each table its own location,
 * e.g. `s3://<id>--table-s3`, the root of a bucket, so `key` may be '') takes tidemark's new files
 * but is never listed or deleted from: the catalog's unreferenced-file removal owns what no
 * snapshot references there (docs/iceberg.md "S3 Tables", decision 0025).
 */
import type { ObjectStore } from '../sink/object-store.js';

/** Where a table's files are: its folder as a key of the lake's object store. */
export interface TableFolder {
  readonly store: ObjectStore;
  /** The table's folder, e.g. `lake/public.orders` (no trailing `/`); '' for the store's root. */
  readonly key: string;
  /**
   * The catalog assigned this folder and removes unreferenced files in it itself: tidemark writes
   * new files here and never lists or deletes any.
   */
  readonly catalogOwnsFiles?: boolean;
}

/** The key of `rel` (e.g. `metadata/x.avro`) under the table's folder. */
export function folderPath(folder: TableFolder, rel: string): string {
  return folder.key === '' ? rel : `${folder.key}/${rel}`;
}

/** The folder's URI with its trailing `/`: every file of the table starts with it. */
export function folderUriPrefix(folder: TableFolder): string {
  const uri = folder.store.uri(folder.key);
  return uri.endsWith('/') ? uri : `${uri}/`;
}

/** The key under `folder` of a file the table names by URI, or undefined when it is elsewhere. */
export function keyInFolder(folder: TableFolder, uri: string): string | undefined {
  const prefix = folderUriPrefix(folder);
  if (!uri.startsWith(prefix)) return undefined;
  const rest = uri.slice(prefix.length);
  return rest.split('/').some((p) => p === '..' || p === '') ? undefined : folderPath(folder, rest);
}
