/**
 * Opens the Parquet sink for a lake URI from the pipeline spec: `s3://bucket/prefix` (AWS,
 * LocalStack, s3rver) or `file:///abs/dir` (a local folder).
 *
 * Owns: URI parsing and the choice of object store, for the lake and for a table location a
 * catalog assigned (`openLocation`: S3 Tables' `s3://<id>--table-s3`, or Java's `file:/dir` form
 * of a local one), opened with the lake's connection settings. Never reads the environment:
 * endpoint, region and credentials come in as options (the caller maps `AWS_ENDPOINT_URL` etc.).
 */

import { basename, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { ConfigError, SinkError } from '../contracts/errors.js';
import { FileObjectStore } from './file-object-store.js';
import type { ObjectStore } from './object-store.js';
import { ParquetSink } from './parquet-sink.js';
import type { ParquetCompression } from './parquet-writer.js';
import { S3ObjectStore } from './s3-object-store.js';

export interface LakeSinkOptions {
  /** `s3://bucket[/prefix]` or `file:///absolute/dir`. */
  readonly uri: string;
  readonly compression?: ParquetCompression;
  readonly maxRowGroupRows?: number;
  /** S3 only: a ready client (then the connection options are ignored). */
  readonly client?: S3Client;
  readonly region?: string;
  readonly endpoint?: string;
  readonly forcePathStyle?: boolean;
  readonly credentials?: S3ClientConfig['credentials'];
}

/** A lake's object store and the key prefix inside it. */
export interface LakeStore {
  readonly store: ObjectStore;
  /** '' when the lake is the store's root. */
  readonly prefix: string;
}

/** Opens the object store of a lake URI. @throws ConfigError for a URI that is neither s3:// nor file://. */
export function openLakeStore(options: LakeSinkOptions): LakeStore {
  const { uri } = options;
  const s3 = /^s3:\/\/([^/]+)(?:\/(.*))?$/.exec(uri);
  if (s3) {
    const store = new S3ObjectStore({
      bucket: s3[1]!,
      ...(options.client ? { client: options.client } : {}),
      ...(options.region ? { region: options.region } : {}),
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
      ...(options.forcePathStyle !== undefined ? { forcePathStyle: options.forcePathStyle } : {}),
      ...(options.credentials ? { credentials: options.credentials } : {}),
    });
    return { store, prefix: (s3[2] ?? '').replace(/^\/+|\/+$/g, '') };
  }
  if (uri.startsWith('file://')) {
    const dir = uri.slice('file://'.length);
    if (!dir.startsWith('/'))
      throw new ConfigError('lake.uri', `file:// lake "${uri}" must name an absolute directory`);
    return { store: new FileObjectStore(dir), prefix: '' };
  }
  throw new ConfigError('lake.uri', `"${uri}" is neither s3://bucket/prefix nor file:///dir`);
}

/**
 * The store and key of a table location a catalog assigned, opened like the lake (`options`: its
 * region, endpoint, credentials; its `uri` is ignored): `s3://bucket[/key]`, `file:///dir` or
 * `file:/dir` (how Java's catalogs write a local location).
 * @throws SinkError `REST_CATALOG_FAILED` for a location of any other scheme.
 */
export function openLocation(
  location: string,
  options: LakeSinkOptions,
): { store: ObjectStore; key: string } {
  const local = /^file:\/(?!\/)/.test(location) ? `file://${location.slice('file:'.length)}` : location;
  if (local.startsWith('file://')) {
    // The folder's parent is the store's root (a file store has no URI for its root itself).
    const path = fileURLToPath(local.replace(/\/+$/, ''));
    return { store: new FileObjectStore(dirname(path)), key: basename(path) };
  }
  if (/^s3:\/\/[^/]+/.test(location)) {
    const { store, prefix } = openLakeStore({ ...options, uri: location });
    return { store, key: prefix };
  }
  throw new SinkError(
    'REST_CATALOG_FAILED',
    location,
    `the catalog placed a table at ${location}, which is neither s3:// nor file://: tidemark cannot write its files there`,
  );
}

/** Builds the Parquet sink for a lake URI. @throws ConfigError for a URI that is neither s3:// nor file://. */
export function openLakeSink(
  options: LakeSinkOptions,
  lake: LakeStore = openLakeStore(options),
): ParquetSink {
  return new ParquetSink({
    store: lake.store,
    prefix: lake.prefix,
    ...(options.compression ? { compression: options.compression } : {}),
    ...(options.maxRowGroupRows ? { maxRowGroupRows: options.maxRowGroupRows } : {}),
  });
}
