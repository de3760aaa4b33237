/**
 * The replication slot the Postgres reader streams from: a PERMANENT logical slot of the
 * `pgoutput` plugin (decision 0011; docs/postgres-cdc.md "Positions, acknowledgements and the
 * slot"). The slot, not the lake, holds the WAL the capture has not confirmed, so every start
 * first asks whether it still holds what the stored position needs.
 *
 * Owns:
 *   - the first start's position (the slot created, or an existing one used from where it is);
 *   - judging the slot at a resume: missing, lost (`wal_status = lost`, invalidated) or advanced
 *     past the stored position by another consumer is a `gap` (the changes in between are gone),
 *     a slot of another plugin or database is refused;
 *   - opening the stream (`START_REPLICATION ... LOGICAL`), waiting while another walsender still
 *     holds the slot (SQLSTATE 55006, e.g. the previous process's walsender that has not exited
 *     yet) and refusing a missing publication (42704) with what to run;
 *   - slot health: lag metrics and a warning before max_slot_wal_keep_size invalidates it;
 *   - the errors of the slot's stream: its connection lost, or a message it should not send.
 * Must never drop or advance the slot: only the stream's standby status updates (the reader's,
 * never past what the engine confirmed) move it.
 */
import type { Duplex } from 'node:stream';
import type { CdcEvent, ReaderLog, SourcePosition } from '../../../contracts/cdc.js';
import { SourceError } from '../../../contracts/errors.js';
import { formatLsn, parseLsn } from '../../../position/position.js';
import { type ConnectOptions, type PostgresConnection, replicationClient, type Sql } from '../connect.js';
import { quoteIdent, quoteLiteral } from '../types.js';
import { lsnPosition, parseLsnPosition } from './position.js';

export interface ReplicationSlotOptions extends ConnectOptions {
  readonly slot: string;
  /** publication_names for START_REPLICATION. */
  readonly publications: readonly string[];
  /** How long to wait for a slot another walsender holds (SQLSTATE 55006). */
  readonly busySlotWaitMs?: number;
}

/** A start the slot cannot serve from the stored position. */
export type GapEvent = Extract<CdcEvent, { kind: 'gap' }>;

/** What pg_replication_slots says of the slot, `lost` the reason it can no longer serve. */
interface SlotInfo {
  readonly plugin: string;
  readonly database: string;
  readonly current: string;
  readonly confirmed: string | null;
  readonly lost?: string;
}

const SLOT_BUSY = '55006';
const UNDEFINED_OBJECT = '42704';

/** One source's slot, read through the reader's catalog connection (see the module comment). */
export class ReplicationSlot {
  private version: number | undefined;

  constructor(
    private readonly opts: ReplicationSlotOptions,
    private readonly db: PostgresConnection,
    private readonly runtime: {
      readonly log: ReaderLog | undefined;
      readonly dims: Record<string, string>;
      readonly clock: () => number;
    },
  ) {}

  /**
   * A first start's position: the slot's, creating it. A slot that already exists (a first
   * start that created it and died before committing its position) is used from where it is:
   * nothing acknowledged it, so it still holds every change since it was created.
   */
  async initialPosition(): Promise<SourcePosition> {
    const slot = this.opts.slot;
    const info = await this.info();
    if (!info) {
      const [row] = await this.catalog((sql) =>
        sql.unsafe<{ lsn: string }[]>(
          "SELECT lsn::text AS lsn FROM pg_create_logical_replication_slot($1, 'pgoutput')",
          [slot],
        ),
      );
      this.runtime.log?.info('created the replication slot', { slot, lsn: row?.lsn });
      return lsnPosition(parseLsn(row!.lsn));
    }
    this.checkUsable(info, undefined);
    if (info.lost)
      throw new SourceError(
        'CDC_SLOT_INVALID',
        `${info.lost}; drop it (SELECT pg_drop_replication_slot('${slot}')) so a first start creates it anew`,
      );
    this.runtime.log?.warn(
      'the replication slot already exists on a first start: capturing from its position',
      {
        slot,
        confirmedFlushLsn: info.confirmed,
      },
    );
    return lsnPosition(info.confirmed ? parseLsn(info.confirmed) : 0n);
  }

  /** The LSN to stream from, or the gap when the slot no longer holds `position`. */
  async resumeAt(position: SourcePosition): Promise<bigint | GapEvent> {
    const slot = this.opts.slot;
    const info = await this.info();
    const at = parseLsnPosition(position);
    if (!info)
      return gap(
        `the replication slot "${slot}" does not exist (dropped, or the server was replaced or restored)`,
        position,
        undefined,
      );
    this.checkUsable(info, position);
    if (info.lost) return gap(info.lost, position, undefined);
    if (info.confirmed && parseLsn(info.confirmed) > at) {
      return gap(
        `the slot "${slot}" was advanced to ${info.confirmed} by another consumer, past the stored position ${position.value}`,
        position,
        lsnPosition(parseLsn(info.confirmed)),
      );
    }
    return at;
  }

  /**
   * Starts streaming from `lsn` on a new replication connection: the CopyBoth duplex and its
   * client (the caller ends both). Waits up to busySlotWaitMs while another walsender holds the
   * slot.
   */
  async open(lsn: bigint, signal?: AbortSignal): Promise<{ repl: Sql; stream: Duplex }> {
    const names = this.opts.publications.map((p) => p.replace(/'/g, "''")).join(',');
    const command = `START_REPLICATION SLOT ${quoteIdent(this.opts.slot)} LOGICAL ${formatLsn(lsn)} (proto_version '1', publication_names ${quoteLiteral(names)}, messages 'true')`;
    const deadline = this.runtime.clock() + (this.opts.busySlotWaitMs ?? 120_000);
    let announced = false;
    for (;;) {
      signal?.throwIfAborted();
      const repl = replicationClient({ ...this.opts, applicationName: 'tidemark-cdc' });
      try {
        const stream = (await repl.unsafe(command).writable()) as unknown as Duplex;
        return { repl, stream };
      } catch (e) {
        await repl.end({ timeout: 1 }).catch(() => undefined);
        const code = (e as { code?: string }).code;
        if (code === SLOT_BUSY && this.runtime.clock() < deadline) {
          if (!announced) {
            this.runtime.log?.warn(
              'the replication slot is still active for another walsender: waiting for it to exit',
              {
                slot: this.opts.slot,
              },
            );
            announced = true;
          }
          await new Promise((r) => setTimeout(r, 500));
          continue;
        }
        if (code === SLOT_BUSY)
          throw new SourceError(
            'CDC_SLOT_BUSY',
            `the replication slot "${this.opts.slot}" is in use by another process (SQLSTATE 55006) and stayed so for ${Math.round((this.opts.busySlotWaitMs ?? 120_000) / 1000)} s; stop the other consumer (SELECT active_pid FROM pg_replication_slots WHERE slot_name = '${this.opts.slot}'), or give this source another cdc.slot`,
            { cause: e },
          );
        if (code === UNDEFINED_OBJECT)
          throw new SourceError(
            'CDC_PUBLICATION_MISSING',
            `START_REPLICATION failed: ${(e as Error).message}; run tidemark check to see what the slot and publication need`,
            { cause: e },
          );
        throw e;
      }
    }
  }

  /** Slot health: lag bytes, wal_status, safe_wal_size; a warning before the slot is lost. */
  async report(): Promise<void> {
    const log = this.runtime.log;
    try {
      const [row] = await this.catalog((sql) =>
        sql.unsafe<
          {
            restart_lag: string | null;
            flush_lag: string | null;
            wal_status: string | null;
            safe: string | null;
          }[]
        >(
          `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::text AS restart_lag,
                  pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::text AS flush_lag,
                  wal_status, safe_wal_size::text AS safe
           FROM pg_replication_slots WHERE slot_name = $1`,
          [this.opts.slot],
        ),
      );
      if (!row) return;
      const dims = { ...this.runtime.dims, slot: this.opts.slot };
      log?.metric('SlotLagBytes', Number(row.restart_lag ?? 0), 'Bytes', dims);
      log?.metric('SlotConfirmedLagBytes', Number(row.flush_lag ?? 0), 'Bytes', dims);
      if (row.safe !== null) log?.metric('SlotSafeWalBytes', Number(row.safe), 'Bytes', dims);
      if (row.wal_status === 'unreserved' || (row.safe !== null && Number(row.safe) < 64 * 1024 * 1024))
        log?.warn(
          'the replication slot is close to losing its WAL (max_slot_wal_keep_size): the capture must catch up, or the slot is invalidated and the position lost',
          { slot: this.opts.slot, walStatus: row.wal_status, safeWalSize: row.safe },
        );
    } catch (e) {
      log?.warn('reading the slot health failed', { error: e });
    }
  }

  private checkUsable(info: SlotInfo, position: SourcePosition | undefined): void {
    const slot = this.opts.slot;
    if (info.plugin !== 'pgoutput')
      throw new SourceError(
        'CDC_SLOT_INVALID',
        `the replication slot "${slot}" uses the plugin "${info.plugin}", not pgoutput; drop it (SELECT pg_drop_replication_slot('${slot}')) or set sources.<name>.cdc.slot to another name${position ? '; the stored position then no longer applies' : ''}`,
      );
    if (info.database !== info.current)
      throw new SourceError(
        'CDC_SLOT_INVALID',
        `the replication slot "${slot}" belongs to database "${info.database}", not "${info.current}"; set sources.<name>.cdc.slot to a name of this database's own`,
      );
  }

  private async info(): Promise<SlotInfo | undefined> {
    const version = await this.serverVersion();
    const [row] = await this.catalog((sql) =>
      sql.unsafe<
        {
          plugin: string | null;
          database: string | null;
          current: string;
          wal_status: string | null;
          confirmed: string | null;
          invalid: string | null;
        }[]
      >(
        `SELECT plugin::text, database::text, current_database()::text AS current, wal_status,
                confirmed_flush_lsn::text AS confirmed,
                ${version >= 170000 ? 'invalidation_reason' : 'NULL::text'} AS invalid
         FROM pg_replication_slots WHERE slot_name = $1`,
        [this.opts.slot],
      ),
    );
    if (!row) return undefined;
    const lost =
      row.wal_status === 'lost'
        ? `the replication slot "${this.opts.slot}" lost the WAL it needed (wal_status = lost: max_slot_wal_keep_size was exceeded)`
        : row.invalid
          ? `the replication slot "${this.opts.slot}" was invalidated (${row.invalid})`
          : undefined;
    return {
      plugin: row.plugin ?? '',
      database: row.database ?? '',
      current: row.current,
      confirmed: row.confirmed,
      ...(lost ? { lost } : {}),
    };
  }

  /** server_version_num, read once: invalidation_reason exists from PostgreSQL 17. */
  private async serverVersion(): Promise<number> {
    this.version ??= Number(
      (
        await this.catalog((sql) =>
          sql.unsafe<{ v: string }[]>("SELECT current_setting('server_version_num') AS v"),
        )
      )[0]!.v,
    );
    return this.version;
  }

  private catalog<T>(fn: (sql: Sql) => Promise<T>): Promise<T> {
    return this.db.run(fn);
  }
}

/** The replication connection of `slot` was lost (`e` its error, undefined when it just ended). */
export function lostStreamError(slot: string, e: unknown): SourceError {
  const message = e instanceof Error ? e.message : 'the server ended the stream';
  return new SourceError(
    'SOURCE_CONNECTION_LOST',
    `the replication connection of slot "${slot}" was lost (${message}); nothing past the last acknowledged position is lost: restart the capture (the CDC task restarts by itself)`,
    e instanceof Error ? { cause: e } : undefined,
  );
}

/** The stream of `slot` sent `what`, which pgoutput protocol 1 never does. */
export function protocolError(slot: string, what: string): SourceError {
  return new SourceError(
    'SOURCE_PROTOCOL',
    `the replication stream of slot "${slot}" sent ${what}; restart the capture`,
  );
}

function gap(reason: string, from: SourcePosition, to: SourcePosition | undefined): GapEvent {
  return { kind: 'gap', reason, from, to };
}
