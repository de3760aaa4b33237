/**
 * Where an Iceberg table's files are: its folder as a key of the lake's object store, and the one
 * check every reader and deleter of the table's files goes through (`keyInFolder`): a URI the
 * table names is read or deleted only when it is under the table's folder.
 */
import type { ObjectStore } from '../sink/object-store.js';

/** Where a table's files are: its folder as a key of the lake's object store. */
export interface TableFolder {
  readonly store: ObjectStore;
  /** The table's folder, e.g. `lake/public.orders` (no trailing `/`). */
  readonly key: string;
}

/** The key under `folder` of a file the table names by URI, or undefined when it is elsewhere. */
export function keyInFolder(folder: TableFolder, uri: string): string | undefined {
  const prefix = `${folder.store.uri(folder.key)}/`;
  if (!uri.startsWith(prefix)) return undefined;
  const rest = uri.slice(prefix.length);
  return rest.split('/').some((p) => p === '..' || p === '') ? undefined : `${folder.key}/${rest}`;
}
