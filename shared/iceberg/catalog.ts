/**
 * The catalog seam: what every Iceberg catalog tidemark commits through keeps (`file` now,
 * ./file-catalog.ts; Glue and REST later), and the one commit loop over it, `commitWithRetry`.
 *
 * Owns: the compare-and-swap contract and the retry decisions. A catalog swaps a table's current
 * metadata only if it is still the version the change was built on; a lost race is a `conflict`,
 * a reply that never came an `unknown`. Both are settled the same way, never by resending: reload
 * the table, look for the commit's id (metadata.ts `hasCommit`: a commit whose first attempt did
 * land, or whose lost reply hid a success, is found there and is done), and otherwise rebuild the
 * change on the new current metadata and swap again, a bounded number of times. The CAS on one
 * version makes the rebuild safe: an earlier attempt still in flight can only land on a version
 * the reload has not seen, which is the one the retry targets, so at most one of them lands.
 *
 * Never writes data or manifests (the caller's `build` does, for the base it is given) and never
 * reads the clock but for the waits between attempts.
 */
import { SinkError } from '../contracts/errors.js';
import { type CommitIdentity, hasCommit, type MetadataLogEntry, recordPreviousMetadata } from './metadata.js';
import type { IcebergTableMetadata } from './spec.js';

/** A table's name in its catalog: one namespace level (a Glue database), then the table. */
export interface TableIdent {
  readonly namespace: string;
  readonly name: string;
}

/** `namespace.name`, as messages show a table. */
export function identText(ident: TableIdent): string {
  return `${ident.namespace}.${ident.name}`;
}

/** A table as loaded: its current metadata, where that is stored, and the catalog's version of it. */
export interface LoadedTable {
  readonly metadata: IcebergTableMetadata;
  /** The current metadata file's URI (`s3://.../metadata/v3.metadata.json`). */
  readonly metadataLocation: string;
  /** The catalog's token for this state (file: the N of `v<N>.metadata.json`); opaque to callers. */
  readonly version: string;
}

export type CreateOutcome =
  | { readonly status: 'created'; readonly table: LoadedTable }
  | { readonly status: 'exists' };

/**
 * What a compare-and-swap did: `committed` (the table now is the given metadata), `conflict` (the
 * table had moved past `base`: nothing was written), `unknown` (the request may or may not have
 * taken effect: a lost reply, a timeout).
 */
export type CommitOutcome =
  | { readonly status: 'committed'; readonly table: LoadedTable }
  | { readonly status: 'conflict' }
  | { readonly status: 'unknown'; readonly cause: unknown };

export interface Catalog {
  /** `file`, `glue`, `rest`: named in messages. */
  readonly kind: string;
  /**
   * The table's current state, or undefined when the catalog has no such table.
   * @throws SinkError `ICEBERG_METADATA_INVALID` when the current metadata file does not parse.
   */
  loadTable(ident: TableIdent): Promise<LoadedTable | undefined>;
  /** Creates the table with `metadata` as its first version; `exists` (nothing written) when it is there. */
  createTable(ident: TableIdent, metadata: IcebergTableMetadata): Promise<CreateOutcome>;
  /**
   * Makes `updated` the table's current metadata if `base` still is: the compare-and-swap. Writes
   * `updated` as given (the metadata log is the caller's: `commitWithRetry` records it).
   * @throws SinkError when the catalog refused for a reason a retry does not cure (access denied,
   *   missing bucket, a store that ignores conditional writes); nothing changed then.
   */
  commitTable(ident: TableIdent, base: LoadedTable, updated: IcebergTableMetadata): Promise<CommitOutcome>;
}

/** What `build` returns: the new metadata for this base, or that the base already has the commit. */
export type BuildResult = IcebergTableMetadata | 'already-committed';

export interface RetryOptions {
  /** Attempts in all, the first included. Default: the table's `commit.retry.num-retries` + 1, else 5. */
  readonly maxAttempts?: number;
  /** Wait before the second attempt, doubled each time up to `maxWaitMs`, with jitter. Default: `commit.retry.min-wait-ms`, else 100. */
  readonly minWaitMs?: number;
  /** Default: `commit.retry.max-wait-ms`, else 60 000. */
  readonly maxWaitMs?: number;
  /** How to wait (tests pass a no-op); default setTimeout. */
  readonly sleep?: (ms: number) => Promise<void>;
  /**
   * The table as the caller last saw it (its own previous commit's result): the first attempt is
   * built on it instead of a load, which saves reading and parsing the current metadata when no
   * one else committed since. Safe because the swap is a compare-and-swap on that version: if the
   * table moved on, the swap is a `conflict` and the next attempt loads. A base that already has
   * the commit is not trusted: the table is loaded to confirm.
   */
  readonly base?: LoadedTable;
}

export interface CommitResult {
  /** `committed` by this call, or `already-committed`: the table had the commit (an earlier attempt or run). */
  readonly status: 'committed' | 'already-committed';
  /** The table after: the committed version, or the loaded one that has the commit. */
  readonly table: LoadedTable;
  readonly attempts: number;
  /** Metadata files the metadata log no longer names (see `recordPreviousMetadata`). */
  readonly droppedMetadataFiles: readonly string[];
}

/** Iceberg's table properties for commit retries, and their defaults. */
const RETRY_PROPERTIES = {
  retries: ['commit.retry.num-retries', 4],
  minWaitMs: ['commit.retry.min-wait-ms', 100],
  maxWaitMs: ['commit.retry.max-wait-ms', 60_000],
} as const;

/**
 * Applies one tidemark commit through `catalog`: load, skip if the table has the commit, build the
 * new metadata on what was loaded, record the replaced metadata file in its log, swap. On a
 * conflict or an unknown outcome: wait, reload, and again (the reload settles an unknown: the
 * commit is there or it is not). `build` is called once per attempt with that attempt's base and
 * must derive everything from it (sequence number, parent, manifest list); it may write files, and
 * should name them uniquely per attempt.
 *
 * @throws SinkError `ICEBERG_TABLE_MISSING` when the table does not exist (create it first);
 *   `ICEBERG_COMMIT_CONTENDED` when every attempt lost the race; `ICEBERG_COMMIT_UNKNOWN` when the
 *   last attempt's outcome stayed unknown and the table does not have the commit;
 *   `ICEBERG_METADATA_INVALID` when the table was dropped and created again between attempts; and
 *   whatever the catalog or `build` throw.
 */
export async function commitWithRetry(
  catalog: Catalog,
  ident: TableIdent,
  commit: CommitIdentity,
  build: (current: LoadedTable) => BuildResult | Promise<BuildResult>,
  options: RetryOptions = {},
): Promise<CommitResult> {
  const name = identText(ident);
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  let uuid: string | undefined;
  let lastUnknown: { cause: unknown } | undefined;
  let conflicts = 0;
  let maxAttempts = options.maxAttempts;
  let base = options.base;
  for (let attempt = 1; ; attempt++) {
    const cached =
      attempt === 1 && base && !hasCommit(base.metadata, commit.writerId, commit.commitId, commit.position)
        ? base
        : undefined;
    const current = cached ?? (await catalog.loadTable(ident));
    if (current === undefined) {
      throw new SinkError(
        'ICEBERG_TABLE_MISSING',
        name,
        `the Iceberg table ${name} has no metadata in the ${catalog.kind} catalog (deleted under tidemark?); commit ${commit.commitId} of ${commit.writerId} was not applied: restore the table's metadata folder, or reset the table to write it anew`,
      );
    }
    const table = current.metadata;
    if (uuid !== undefined && table['table-uuid'] !== uuid) {
      throw new SinkError(
        'ICEBERG_METADATA_INVALID',
        name,
        `the Iceberg table ${name} was dropped and created again while commit ${commit.commitId} was being applied (table-uuid ${uuid}, now ${table['table-uuid']}); the commit was not applied to the new table`,
      );
    }
    uuid = table['table-uuid'];
    maxAttempts ??= retryProperty(table, 'retries') + 1;
    if (hasCommit(table, commit.writerId, commit.commitId, commit.position)) {
      return { status: 'already-committed', table: current, attempts: attempt, droppedMetadataFiles: [] };
    }
    const built = await build(current);
    if (built === 'already-committed') {
      return { status: 'already-committed', table: current, attempts: attempt, droppedMetadataFiles: [] };
    }
    const previous: MetadataLogEntry = {
      'metadata-file': current.metadataLocation,
      'timestamp-ms': table['last-updated-ms'],
    };
    const { metadata: updated, dropped } = recordPreviousMetadata(built, previous);
    const outcome = await catalog.commitTable(ident, current, updated);
    if (outcome.status === 'committed') {
      return {
        status: 'committed',
        table: outcome.table,
        attempts: attempt,
        droppedMetadataFiles: dropped.map((e) => e['metadata-file']),
      };
    }
    if (outcome.status === 'conflict') {
      // A conflict on a cached base is no contention: the table moved since the caller saw it.
      // Its attempt is taken again on a loaded table, as if the cache had not been there.
      if (cached) {
        base = undefined;
        uuid = undefined;
        maxAttempts = options.maxAttempts;
        attempt--;
        continue;
      }
      conflicts++;
      lastUnknown = undefined;
    } else {
      lastUnknown = { cause: outcome.cause };
    }
    if (attempt >= maxAttempts) {
      // One more read settles the last attempt: its reply may have been the only thing lost.
      const after = await catalog.loadTable(ident);
      if (
        after &&
        after.metadata['table-uuid'] === uuid &&
        hasCommit(after.metadata, commit.writerId, commit.commitId, commit.position)
      ) {
        return { status: 'already-committed', table: after, attempts: attempt, droppedMetadataFiles: [] };
      }
      if (lastUnknown) {
        throw new SinkError(
          'ICEBERG_COMMIT_UNKNOWN',
          name,
          `commit ${commit.commitId} of ${commit.writerId} to the Iceberg table ${name} got no answer from the ${catalog.kind} catalog in ${attempt} attempts (${describe(lastUnknown.cause)}), and the table does not have it; the next run applies it again`,
          { cause: lastUnknown.cause },
        );
      }
      throw new SinkError(
        'ICEBERG_COMMIT_CONTENDED',
        name,
        `commit ${commit.commitId} of ${commit.writerId} to the Iceberg table ${name} lost the race to another writer ${conflicts} times in ${attempt} attempts; the next run applies it again (raise commit.retry.num-retries on the table if writers keep colliding)`,
      );
    }
    const min = options.minWaitMs ?? retryProperty(table, 'minWaitMs');
    const max = options.maxWaitMs ?? retryProperty(table, 'maxWaitMs');
    const wait = Math.min(max, min * 2 ** (attempt - 1));
    await sleep(wait / 2 + Math.random() * (wait / 2));
  }
}

function retryProperty(metadata: IcebergTableMetadata, which: keyof typeof RETRY_PROPERTIES): number {
  const [key, fallback] = RETRY_PROPERTIES[which];
  const text = metadata.properties[key]?.trim();
  return text !== undefined && /^\d+$/.test(text) ? Number(text) : fallback;
}

function describe(cause: unknown): string {
  return cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
}
