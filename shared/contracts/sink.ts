/**
 * The batch-shaped sink contract: write a batch, get object references; the engine then commits
 * the position (and the refs) to the cursor store. The sink never touches state.
 *
 * Objects are named only from what the run knows before it writes (the writer's identity, its
 * committed start position and its lease fence), so a retry by the same run overwrites instead
 * of adding a copy, a writer that lost its lease can never replace what a later holder wrote,
 * several writers can share one lake table, and `recover` can find what a crashed attempt of ONE
 * writer left past that writer's committed position without touching anyone else's.
 */
import type { Batch } from '../dataplane/batch.js';
import type { Schema } from '../dataplane/schema.js';
import type { StoredSchema } from '../dataplane/schema-rules.js';
import type { LakeFormat } from './lake-format.js';
import type { Position } from './source.js';
import type { TableFormat } from './table-format.js';

/**
 * Whose objects: a lake table and the writer that names them, `<pipeline>.<source>` (one
 * pipeline's reads from one source). Every write, recovery and writer listing is scoped to it.
 */
export interface LakeTable {
  /** Lake table name (`schema.table`, lowercase). */
  readonly table: string;
  /** Writer identity, `<pipeline>.<source>`. */
  readonly writer: string;
}

/**
 * Where one write goes: the lake table and writer, and the fence of the lease the writing run
 * holds (`Lease.fence`), which becomes part of the object's name. The same run retrying a write
 * (same fence) replaces its object; a later run (higher fence) writing from the same start
 * position creates another name, so an object of a writer that lost its lease but still runs can
 * never replace the new holder's.
 */
export interface WriteTarget extends LakeTable {
  readonly fence: number;
  /**
   * The lake format the table writes (shared/contracts/lake-format.ts): the engine resolves it
   * from the table's state; the sink writes it and records it in the footer. Default 1.
   */
  readonly format?: LakeFormat;
  /**
   * The table format (./table-format.ts), resolved by the engine from the table's state: an
   * `iceberg` table's writes are staged (`Sink.stage`) and committed to its catalog after the
   * state commit (`Sink.apply`). Undefined: plain.
   */
  readonly tableFormat?: TableFormat;
}

/**
 * An Iceberg commit decided by a state commit and applied to the table's catalog after it
 * (docs/decisions/0024-iceberg-commits.md): its data files are listed in a staged manifest no
 * snapshot references yet. JSON-safe: the state stores it, and whoever recovers applies it.
 */
export interface PendingCommit {
  /** The lake table (target) and the writer whose commit it is. */
  readonly table: string;
  readonly writer: string;
  /**
   * Unique per attempt: the stem of the commit's first data file (`<writer>.<position>.f<fence>`,
   * without a partitioned page's `.p<part>`).
   */
  readonly commitId: string;
  /**
   * The start position of the commit's data. A writer's commits to a table are applied in position
   * order, so the table recognises an earlier one as applied by it (shared/iceberg/metadata.ts
   * `hasCommit`). Absent in states written before it was recorded.
   */
  readonly position?: string;
  /** The staged manifest's URI and length; '' and 0 for a current-state commit of deletes only. */
  readonly manifest: string;
  readonly manifestLength: number;
  readonly dataFiles: number;
  readonly records: number;
  readonly filesSize: number;
  /** The partition spec id of the manifest's files; absent for spec 0 (every table tidemark creates). */
  readonly specId?: number;
  /** The manifest's partition summaries (base64 bounds); empty for an unpartitioned table. */
  readonly partitions: readonly {
    readonly n: boolean;
    readonly nan?: boolean;
    readonly lo?: string;
    readonly hi?: string;
  }[];
  /**
   * A current-state commit's staged keys file (shared/iceberg/current-state.ts): every key the
   * commit touched, whose older rows the catalog commit deletes by position. Absent: an append.
   */
  readonly keys?: {
    readonly uri: string;
    readonly length: number;
    readonly rows: number;
    readonly columns: readonly string[];
  };
  /**
   * A current-state commit's history table commit (`tables[].history`): staged in the same write,
   * recorded by the same state commit, applied first (shared/sink/lake-sink.ts `apply`).
   */
  readonly history?: PendingCommit;
}

/** One durable object in the lake. */
export interface ObjectRef {
  /** Full URI, e.g. `s3://bucket/prefix/public.orders/shop.app.i000000000001.parquet` or `file:///...`. */
  readonly uri: string;
  readonly bytes: number;
  /** Rows in the object; -1 when it comes from a listing (counting would read every footer). */
  readonly rows: number;
  /** The writer that named it (listings; writes return their own). */
  readonly writer?: string;
  /** Its start position, when the name (or its sidecar) gives it. */
  readonly startPosition?: Position;
  /** The lease fence of the run that wrote it; absent for names from before fences. */
  readonly fence?: number;
}

export interface Sink {
  /**
   * Optional: objects of `schema` for `target` are coming. The sink may get its encoder ready
   * (start threads, build per-schema templates) while the first page is still being read.
   * Returns at once; stores and encodes nothing; never throws.
   */
  warm?(target: WriteTarget, schema: Schema): void;
  /**
   * Optional: the next `write` will have exactly these arguments (the same objects). The sink
   * may start its CPU work (encoding) now, while the previous write is still being stored and
   * committed, and must store nothing until that `write`. A `write` with other arguments
   * ignores what was prepared. Returns at once; errors surface from the `write`.
   */
  prepare?(
    target: WriteTarget,
    schema: Schema,
    startPosition: Position,
    batches: readonly Batch[],
    recorded?: StoredSchema,
  ): void;
  /**
   * Writes the batches of one table as object(s) named from `startPosition` and `target.fence`.
   * Durable when the promise resolves (S3 PutObject acknowledged / file fsynced and renamed).
   * `recorded` is the schema version the table writes (docs/schema-changes.md): its version, hash
   * and the schema itself go into every object's footer.
   */
  write(
    target: WriteTarget,
    schema: Schema,
    startPosition: Position,
    batches: readonly Batch[],
    recorded?: StoredSchema,
  ): Promise<ObjectRef[]>;
  /**
   * Deletes the objects of `target.writer` in `target.table` whose start position has the scheme
   * of `committed` (its first letter) and is at or after it, whatever their fence (leftovers of
   * that writer's attempts that never committed). Lists from `committed` onwards, never the
   * whole folder; objects of other writers are never considered. Returns what it removed.
   */
  recover(target: LakeTable, committed: Position): Promise<ObjectRef[]>;
  /**
   * Lists the table's objects: those of `writer` in start-position order (then by fence), or (no
   * writer) every writer's, ordered by writer then position. Names this layout did not write are
   * left out.
   */
  list(table: string, writer?: string): Promise<ObjectRef[]>;
  /**
   * Optional: the start position of `writer`'s last commit that the table itself records (an
   * Iceberg table's `tidemark.writer.<writer>.position`), or undefined. Where files cannot be listed
   * (a table its catalog places), it is what a reset that keeps the objects writes after: a
   * position at or below it would be taken for one already applied.
   */
  committedPosition?(table: string, writer: string): Promise<Position | undefined>;
  /**
   * Deletes EVERY object of `target.writer` in `target.table` (and their sidecars); other
   * writers' objects stay. Only for an operator's deliberate re-sync from scratch (`tidemark
   * reset --delete-objects`), never called by a run. A table with Iceberg metadata loses the
   * writer's data files from its current snapshot (a `delete` snapshot) before any is deleted, so
   * its readers never meet a missing file. Returns what it removed.
   */
  discard(target: LakeTable): Promise<ObjectRef[]>;
  /**
   * Iceberg tables only (absent: the sink writes plain tables only). Stages the commit of what
   * one `write` to an `iceberg` target returned: a manifest of its data files, under a name unique
   * to the attempt, visible to no reader. Undefined for a write of no files.
   */
  stage?(target: WriteTarget, refs: readonly ObjectRef[]): Promise<PendingCommit | undefined>;
  /**
   * Applies a commit the state holds to its table's catalog, once however often it is called (a
   * table that has the commit is left as it is). Resolves when the catalog has it.
   */
  apply?(pending: PendingCommit): Promise<void>;
}

/**
 * Optional capability of a sink (`tidemark check`): proves the lake takes writes and deletes
 * under its root, with a test object named from `id` that it deletes again. Resolves to that
 * object's URI; throws a SinkError naming the cause and the fix.
 */
export interface SinkProbe {
  probe(id: string): Promise<string>;
}
