/**
 * The object-store seam under the Parquet sink and the Iceberg `file` catalog: the operations they
 * need from S3 or a local directory, and nothing else. Implementations: `s3-object-store.ts` (AWS
 * S3, LocalStack, s3rver) and `file-object-store.ts` (a directory, for local runs and tests).
 *
 * Owns: the contract every store keeps, and `supportsConditionalWrites`, the probe that tells a
 * store that keeps `putIfAbsent`'s promise from one that silently overwrites (s3rver, older S3
 * compatibles). Never knows about Parquet, positions or tables: keys are opaque `/`-separated
 * ASCII strings relative to the store's root (bucket or directory).
 */

/** One stored object as a listing shows it. */
export interface StoredObject {
  /** Key relative to the store's root, e.g. `lake/public.orders/i01.parquet`. */
  readonly key: string;
  readonly size: number;
}

/**
 * How much of a write or delete must be durable when it resolves. `syncFolder: false` (default
 * true): the object's bytes are durable, but its name (a new, replaced or removed folder entry)
 * only once a later durable write to the same folder resolved. Only a local folder has anything to
 * skip (its fsync); on S3 every request is durable. For an object that a later write in the same
 * folder makes reachable (an Iceberg manifest list before the metadata.json that names it), or one
 * whose loss or return after a crash is harmless (a version hint, a deleted old metadata file).
 */
export interface Durability {
  readonly syncFolder?: boolean;
}

export interface ObjectStore {
  /** The URI of a key, for `ObjectRef.uri` (e.g. `s3://bucket/key`, `file:///dir/key`). */
  uri(key: string): string;
  /**
   * Stores `bytes` under `key`, replacing any object there. Durable when the promise resolves
   * (S3 acknowledged the PUT; a file is fsynced, renamed into place and its folder fsynced), and
   * atomic: a reader sees the old object or the new one, never a partial one.
   */
  put(key: string, bytes: Uint8Array, durability?: Durability): Promise<void>;
  /**
   * Stores `bytes` under `key` only if no object is there: `created`, or `exists` with nothing
   * written. Atomic against concurrent calls on the same key (S3 `If-None-Match: *`; a directory:
   * link(2) of a fsynced temp file), durable like `put`. `exists` can also follow a lost reply to
   * a request that did create the object (the SDK's retry then finds it): a caller that must know
   * whose object it is reads it back. A store that ignores the condition (s3rver) answers
   * `created` every time; `supportsConditionalWrites` finds that out.
   * @throws SinkError `ICEBERG_CONDITIONAL_WRITES_UNSUPPORTED` where the store cannot do it at all
   *   (a directory on a file system without hard links), or the store's usual errors.
   */
  putIfAbsent(key: string, bytes: Uint8Array): Promise<'created' | 'exists'>;
  /** The object's bytes, or undefined when there is none. */
  get(key: string): Promise<Uint8Array | undefined>;
  /**
   * Bytes `start` (inclusive) to `end` (exclusive) of the object, fewer where it ends first, or
   * undefined when there is none. Optional: a reader that wants a part of a large object (the
   * key columns of a Parquet file, shared/iceberg/key-lookup.ts) uses it where the store has it
   * and falls back to `get` otherwise.
   */
  getRange?(key: string, start: number, end: number): Promise<Uint8Array | undefined>;
  /**
   * Every object whose key starts with `prefix` (plain string prefix), sorted by key; with
   * `startAfter`, only those whose key sorts strictly after it (S3 ListObjectsV2 `StartAfter`:
   * the listing begins there instead of at the prefix, so a caller that needs only the tail of a
   * long folder never pages through the rest). `startAfter` need not be a key that exists.
   */
  list(prefix: string, startAfter?: string): Promise<StoredObject[]>;
  /** Deletes the keys; keys that do not exist are fine. Durable when the promise resolves (see `Durability`). */
  delete(keys: readonly string[], durability?: Durability): Promise<void>;
}

/**
 * Whether `store` keeps `putIfAbsent`'s promise: puts a small object at `key` twice with the
 * condition and expects the second to be refused, then deletes it. False for a store that answers
 * the second put `created` (it overwrote). `key` should be a throw-away name of the caller's (e.g.
 * layout.ts `probeKey`): an object already there is deleted first.
 */
export async function supportsConditionalWrites(store: ObjectStore, key: string): Promise<boolean> {
  const body = new TextEncoder().encode('tidemark: conditional-write probe, deleted right away\n');
  try {
    if ((await store.putIfAbsent(key, body)) === 'exists') {
      // A probe left by a run that died between its puts and its delete.
      await store.delete([key]);
      await store.putIfAbsent(key, body);
    }
    return (await store.putIfAbsent(key, body)) === 'exists';
  } finally {
    await store.delete([key]);
  }
}
