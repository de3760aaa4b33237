/**
 * Snapshot watermarks on the Postgres stream: the snapshot chunker (../snapshot.ts) writes a
 * `tidemark.watermark` logical message (`pg_logical_emit_message`, non-transactional) around each
 * chunk it reads; the one whose id the engine registered (`Reader.expectWatermark`) becomes a
 * `watermark` event at its place in the stream (decision 0013, docs/postgres-cdc.md "Snapshots
 * (driver side)").
 *
 * Owns: the prefix, the registered ids and turning a message into the event, its `rowsPos`
 * (the message LSN - 1). Logical messages are database-wide and reach every slot: a watermark of
 * another pipeline is ignored, never an error.
 */
import type { CdcEvent } from '../../../contracts/cdc.js';
import type { MessageReader } from '../wire/pgoutput.js';
import { lsnPrefix } from './position.js';
import { protocolError } from './slot.js';

/**
 * Prefix of snapshot watermark messages (`pg_logical_emit_message(false, WATERMARK_PREFIX, id)`,
 * emitted by the snapshot chunker, ../snapshot.ts); the content is the watermark id.
 */
export const WATERMARK_PREFIX = 'tidemark.watermark';

/** The snapshot watermarks the engine registered and the stream has not reached. */
export class Watermarks {
  private readonly ids = new Set<string>();

  /** `slot`: the stream's, for its errors. */
  constructor(private readonly slot: string) {}

  /** Some id is registered: only then is a watermark message's content read. */
  get waiting(): boolean {
    return this.ids.size > 0;
  }

  /** Registers `id` (the reader's `expectWatermark`). */
  expect(id: string): void {
    this.ids.add(id);
  }

  /**
   * A non-transactional `tidemark.watermark` message (its flags, LSN and prefix read): a
   * `watermark` event when its content is a registered id, else nothing (other pipelines on the
   * same database emit their own: logical messages are database-wide and reach every slot).
   *
   * Verified on PostgreSQL 17 (test/integration/postgres-snapshot-driver.test.ts, and
   * docs/postgres-cdc.md "Snapshots (driver side)"):
   *   - the LSN pgoutput sends in 'M' is the END of the message's WAL record (the start of the
   *     next record), and equals what `pg_logical_emit_message` returns;
   *   - a transaction committed before the message has its commit record (Begin.final_lsn, the
   *     commit record's START) below the message record, so final_lsn < lsn - 1; one committed
   *     after it has final_lsn >= lsn > lsn - 1. So rows placed at `p` + hex(lsn - 1) (no
   *     ordinal) sort strictly after every `__pos` = pgPosition(final_lsn, ordinal) delivered
   *     before the watermark and strictly before every one delivered after it;
   *   - under proto_version 1 (no streaming of in-progress transactions) a transaction is decoded
   *     whole at its commit, so a non-transactional message never arrives between a Begin and
   *     its Commit: a transaction open across the message is delivered after it.
   */
  reached(lsn: bigint, m: MessageReader, inTxn: boolean): CdcEvent | undefined {
    const length = m.u32();
    if (m.off + length > m.endOff)
      throw protocolError(this.slot, 'a logical message longer than its payload');
    const id = m.buf.toString('utf8', m.off, m.off + length);
    m.off += length;
    if (!this.ids.has(id)) return undefined;
    if (inTxn)
      throw protocolError(
        this.slot,
        `the watermark message "${id}" inside a transaction (proto_version 1 never does that)`,
      );
    this.ids.delete(id);
    return { kind: 'watermark', id, rowsPos: lsnPrefix(lsn - 1n) };
  }
}
