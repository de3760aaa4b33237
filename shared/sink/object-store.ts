/**
 * The object-store seam under the Parquet sink: the five operations the sink needs from S3 or a
 * local directory, and nothing else. Implementations: `s3-object-store.ts` (AWS S3, LocalStack,
 * s3rver) and `file-object-store.ts` (a directory, for local runs and tests).
 *
 * Owns: the contract every store keeps. Never knows about Parquet, positions or tables: keys are
 * opaque `/`-separated ASCII strings relative to the store's root (bucket or directory).
 */

/** One stored object as a listing shows it. */
export interface StoredObject {
  /** Key relative to the store's root, e.g. `lake/public.orders/i01.parquet`. */
  readonly key: string;
  readonly size: number;
}

export interface ObjectStore {
  /** The URI of a key, for `ObjectRef.uri` (e.g. `s3://bucket/key`, `file:///dir/key`). */
  uri(key: string): string;
  /**
   * Stores `bytes` under `key`, replacing any object there. Durable when the promise resolves
   * (S3 acknowledged the PUT; a file is fsynced, renamed into place and its folder fsynced), and
   * atomic: a reader sees the old object or the new one, never a partial one.
   */
  put(key: string, bytes: Uint8Array): Promise<void>;
  /** The object's bytes, or undefined when there is none. */
  get(key: string): Promise<Uint8Array | undefined>;
  /**
   * Every object whose key starts with `prefix` (plain string prefix), sorted by key; with
   * `startAfter`, only those whose key sorts strictly after it (S3 ListObjectsV2 `StartAfter`:
   * the listing begins there instead of at the prefix, so a caller that needs only the tail of a
   * long folder never pages through the rest). `startAfter` need not be a key that exists.
   */
  list(prefix: string, startAfter?: string): Promise<StoredObject[]>;
  /** Deletes the keys; keys that do not exist are fine. Durable when the promise resolves. */
  delete(keys: readonly string[]): Promise<void>;
}
