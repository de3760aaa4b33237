/**
 * The per-table buffer both change-stream readers keep (a Postgres or MySQL reader's state of
 * one captured table extends it): the table's rows decoded since the last cut, in an Arrow
 * encoder of its current lake schema, until the engine cuts them into a batch (at a flush, and
 * before a schema change takes effect).
 *
 * Owns: the encoder and its column writers, the ordinal that numbers the table's rows within a
 * transaction (a row's `__pos` is its transaction's prefix plus this ordinal), the position of
 * the last row appended (the cut batch's watermark), and the schema swap: a changed schema waits
 * in `swap` until the old schema's rows are cut, then gets an encoder of its own, so one batch
 * never mixes two schemas. The readers append each row to `writers` and `encoder` directly.
 * Never decodes a value or reads the log: what decoding needs (column facts, appenders, where
 * the stream resumes) is the driver's own.
 */
import type { CdcTable, PendingRows } from '../contracts/cdc.js';
import { type Batch, newBatch, type WriteMode } from '../dataplane/batch.js';
import { BatchEncoder, type ColumnWriter } from '../dataplane/encoder.js';
import type { Schema } from '../dataplane/schema.js';
import { ordinalHex } from '../position/position.js';

/** One captured table's buffered rows; `Swap` is what a driver keeps of a pending schema change. */
export class TableBuffer<Swap extends { readonly schema: Schema }> {
  /** The lake table (`CdcTable.ref.target`). */
  readonly target: string;
  /** The source table (`CdcTable.ref.source`). */
  readonly source: string;
  readonly writeMode: WriteMode;
  /** Column names left out of the lake. */
  readonly excluded: ReadonlySet<string>;
  /** The lake schema of the buffered rows. */
  schema: Schema;
  encoder: BatchEncoder;
  /** The encoder's column writer per schema column (new ones after every cut). */
  writers: ColumnWriter[];
  /** Ordinal counter in the open transaction and the transaction it belongs to. */
  ord = 0;
  ordTxn = -1;
  /** `__pos` of the last row appended, as its transaction prefix and ordinal (a cut's watermark). */
  lastPrefix = '';
  lastOrd = 0;
  /** A new schema, switched to (`switchSchema`) once the old one's rows are cut. */
  swap: Swap | undefined = undefined;

  constructor(table: CdcTable, excluded: ReadonlySet<string>) {
    this.target = table.ref.target;
    this.source = table.ref.source;
    this.writeMode = table.writeMode;
    this.excluded = excluded;
    this.schema = table.schema;
    this.encoder = new BatchEncoder(table.schema, { phase: 'stream' });
    this.writers = writersOf(this.encoder);
  }

  /** Restarts the ordinals at 0 when `txn` (the reader's transaction counter) is a new transaction. */
  enterTxn(txn: number): void {
    if (this.ordTxn !== txn) {
      this.ordTxn = txn;
      this.ord = 0;
    }
  }

  /** The rows and bytes in the encoder. */
  pending(): PendingRows {
    return { rows: this.encoder.rowCount, bytes: this.encoder.dataBytes };
  }

  /** The buffered rows as a batch (undefined when there are none); the encoder starts anew. */
  cut(ingestTs: () => bigint): Batch | undefined {
    const enc = this.encoder;
    if (enc.rowCount === 0) return undefined;
    const record = enc.finish(ingestTs());
    this.writers = writersOf(enc);
    const watermark = this.lastPrefix + ordinalHex(this.lastOrd);
    return newBatch({ table: this.target, record, watermark, writeMode: this.writeMode });
  }

  /**
   * Switches to the pending schema when none of the old one's rows are buffered: its own encoder
   * and writers. Returns the swap applied (the driver then installs its column facts), undefined
   * when there is none or rows of the old schema wait for a cut.
   */
  protected switchSchema(): Swap | undefined {
    const swap = this.swap;
    if (swap === undefined || this.encoder.rowCount > 0) return undefined;
    this.swap = undefined;
    this.schema = swap.schema;
    this.encoder = new BatchEncoder(swap.schema, { phase: 'stream' });
    this.writers = writersOf(this.encoder);
    return swap;
  }
}

function writersOf(enc: BatchEncoder): ColumnWriter[] {
  return enc.schema.columns.map((_, j) => enc.col(j));
}
