/**
 * Heartbeats: when the captured tables were idle for heartbeatMs, the reader writes a
 * `tidemark.heartbeat` logical message into the WAL (`pg_logical_emit_message`, non-transactional,
 * so it is in the WAL at once, its content the slot's name). The reader delivers its LSN as
 * progress between transactions, so the slot advances (and the server may recycle WAL) while
 * only other tables are busy (docs/postgres-cdc.md "Positions, acknowledgements and the slot").
 *
 * Owns: the prefix, when to emit one, and emitting it. Logical messages are database-wide and
 * reach every slot, so another pipeline's heartbeat may arrive too: it is progress all the same
 * (its LSN is a point of this stream). A heartbeat that fails is a warning: the capture goes on.
 */
import type { ReaderLog } from '../../../contracts/cdc.js';
import type { PostgresConnection } from '../connect.js';

/** Prefix of the reader's own logical messages. */
export const HEARTBEAT_PREFIX = 'tidemark.heartbeat';

/** Heartbeats of one slot (its name is the message's content). */
export class Heartbeat {
  private lastActivity: number;
  private lastHeartbeat = 0;

  constructor(
    private readonly db: PostgresConnection,
    private readonly slot: string,
    private readonly heartbeatMs: number,
    private readonly clock: () => number,
    private readonly log: ReaderLog | undefined,
  ) {
    this.lastActivity = clock();
  }

  /** The captured tables moved (rows delivered, a transaction committed). */
  activity(): void {
    this.lastActivity = this.clock();
  }

  /** Emits a heartbeat message when the captured tables were idle for heartbeatMs. */
  async maybe(): Promise<void> {
    const now = this.clock();
    if (now - this.lastActivity < this.heartbeatMs || now - this.lastHeartbeat < this.heartbeatMs) return;
    this.lastHeartbeat = now;
    try {
      await this.db.run((sql) =>
        sql.unsafe('SELECT pg_logical_emit_message(false, $1, $2)', [HEARTBEAT_PREFIX, this.slot]),
      );
    } catch (e) {
      this.log?.warn('the heartbeat failed; the slot advances only with captured changes until it works', {
        error: e,
      });
    }
  }
}
