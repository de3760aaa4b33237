/**
 * The batch-shaped sink contract: write a batch, get object references; the engine then commits
 * the position (and the refs) to the cursor store. The sink never touches state.
 *
 * Objects are named only from what the run knows before it writes (its committed start
 * position), so a retry from the same position overwrites instead of adding a copy, and
 * `recover` can find what a crashed attempt left past the committed position.
 */
import type { Batch } from '../dataplane/batch.js';
import type { Schema } from '../dataplane/schema.js';
import type { Position } from './source.js';

/** One durable object in the lake. */
export interface ObjectRef {
  /** Full URI, e.g. `s3://bucket/prefix/public.orders/i0000000000000001.parquet` or `file:///...`. */
  readonly uri: string;
  readonly bytes: number;
  readonly rows: number;
}

export interface Sink {
  /**
   * Writes the batches of one table as object(s) named from `startPosition`. Durable when the
   * promise resolves (S3 PutObject acknowledged / file fsynced and renamed).
   */
  write(
    table: string,
    schema: Schema,
    startPosition: Position,
    batches: readonly Batch[],
  ): Promise<ObjectRef[]>;
  /**
   * Deletes the objects of `table` whose start position is at or after `committed` (leftovers of
   * an attempt that crashed before its commit). Returns what it removed.
   */
  recover(table: string, committed: Position): Promise<ObjectRef[]>;
  /** Lists the table's objects in position order. */
  list(table: string): Promise<ObjectRef[]>;
}
