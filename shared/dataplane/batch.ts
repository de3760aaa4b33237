/**
 * The unit of work on the data plane: one table, one Arrow RecordBatch in that table's wire
 * schema (`wire.ts`), plus checkpoint bookkeeping.
 *
 * The watermark is `__pos` of the LAST row as received, captured before any transform.
 * Transforms reorder and drop rows; they may never move the watermark.
 *
 * Arrow JS buffers are garbage collected, so unlike Arrow's Go library there is no Release(); a batch is
 * still immutable once built and must not be mutated by a consumer.
 */
import type { RecordBatch } from 'apache-arrow';
import { TidemarkError } from '../contracts/errors.js';
import { METADATA_COLUMNS } from './metadata.js';
import type { Schema } from './schema.js';

/**
 * The write shape a batch serves. `upsert` collapses per primary key to the last change by
 * `__pos`; `append` keeps every change. There is no default: a batch without one is rejected.
 */
export type WriteMode = 'upsert' | 'append';

/** The resumable-backfill state machine value: a closed set. `''` = not in a snapshot. */
export type SnapshotState = '' | 'not_started' | 'in_progress' | 'complete';
const SNAPSHOT_STATES: readonly SnapshotState[] = ['', 'not_started', 'in_progress', 'complete'];

export interface Batch {
  /** The SINK-side target name (e.g. `public.orders`). */
  readonly table: string;
  /** The rows, in the table's wire schema: data columns, then the six metadata columns. */
  readonly record: RecordBatch;
  /** `__pos` of the last row as received: the commit point. Undefined for snapshot chunks. */
  readonly watermark: string | undefined;
  readonly writeMode: WriteMode;
  readonly snapshotState: SnapshotState;
  /** Chunk ids still to process, persisted with the position; undefined outside a snapshot. */
  readonly snapshotPending: readonly number[] | undefined;
  /** Monotonic batch sequence from a coordinator; 0 when there is none. */
  readonly seq: number;
  /** Stage instead of committing directly (coordinated commits). */
  readonly staged: boolean;
}

export class BatchError extends TidemarkError {
  override name = 'BatchError';
  constructor(message: string) {
    super('BATCH_INVALID', message);
  }
}

export interface NewBatch {
  table: string;
  record: RecordBatch;
  watermark: string | undefined;
  writeMode: WriteMode | undefined;
  snapshotState?: SnapshotState;
  snapshotPending?: readonly number[];
  seq?: number;
  staged?: boolean;
}

/**
 * Builds a batch and checks its invariants: a write mode is set, the snapshot state is in the
 * closed set, and the record ends with the six metadata columns in order.
 */
export function newBatch(b: NewBatch): Batch {
  if (b.writeMode !== 'upsert' && b.writeMode !== 'append') {
    throw new BatchError(
      `batch for ${b.table} has write mode ${JSON.stringify(b.writeMode)}; it must be "upsert" or "append" (unset is never defaulted)`,
    );
  }
  const snapshotState = b.snapshotState ?? '';
  if (!SNAPSHOT_STATES.includes(snapshotState)) {
    throw new BatchError(
      `batch for ${b.table} has snapshot state ${JSON.stringify(snapshotState)}; not in the closed set`,
    );
  }
  const names = b.record.schema.fields.map((f) => f.name);
  const tail = names.slice(names.length - METADATA_COLUMNS.length);
  if (tail.join(',') !== METADATA_COLUMNS.join(',')) {
    throw new BatchError(
      `batch for ${b.table} does not end with the metadata columns ${METADATA_COLUMNS.join(', ')}`,
    );
  }
  return Object.freeze({
    table: b.table,
    record: b.record,
    watermark: b.watermark,
    writeMode: b.writeMode,
    snapshotState,
    snapshotPending: b.snapshotPending,
    seq: b.seq ?? 0,
    staged: b.staged ?? false,
  });
}

/**
 * Refuses an upsert table without a primary key: upsert could not identify the row a change
 * replaces, a silent correctness bug. A configuration refusal (`UPSERT_NO_KEY`), which `check`
 * and every run's start make before anything is written; the sink keeps it as a last guard.
 */
export function requireUpsertKey(table: string, writeMode: WriteMode, schema: Schema): void {
  if (writeMode === 'upsert' && schema.primaryKey.length === 0) {
    throw new TidemarkError(
      'UPSERT_NO_KEY',
      `table ${table} is configured with writeMode: upsert but has no primary key; add a primary key or use writeMode: append`,
    );
  }
}
