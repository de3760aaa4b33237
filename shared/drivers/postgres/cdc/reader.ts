/**
 * The Postgres change-stream reader: logical replication with the built-in `pgoutput` plugin
 * over a PERMANENT slot (docs/postgres-cdc.md), implementing the CDC engine's `Reader`
 * (shared/contracts/cdc.ts).
 *
 * Owns:
 *   - the stream: `START_REPLICATION SLOT s LOGICAL <lsn> (proto_version '1', publication_names
 *     ..., messages 'true')` on a postgres.js CopyBoth duplex, with backpressure (the socket is
 *     paused while the engine is behind), standby status updates on a timer and whenever a
 *     keepalive asks, and heartbeats (`pg_logical_emit_message`) when the captured tables are
 *     idle so the slot advances while other tables are busy;
 *   - positions: a row's `__pos` is `pgPosition(Begin.final_lsn, ordinal per (transaction,
 *     table))` (Begin's final_lsn is the Commit's LSN, so rows are stamped as they decode); the
 *     resume point after a transaction is its Commit's END LSN (resuming at the commit LSN
 *     itself would deliver it again); keepalive and heartbeat LSNs are progress between
 *     transactions;
 *   - decoding Insert/Update/Delete straight into per-table Arrow writers through the
 *     incremental driver's type plan (./values.ts), a primary-key change as a delete of the old
 *     key plus an insert of the new one, unchanged TOAST values ('u') from the old tuple under
 *     REPLICA IDENTITY FULL or read back by key at the flush (`unchangedToast: reread`);
 *   - snapshot windows: a `tidemark.watermark` logical message whose id the engine registered
 *     (`expectWatermark`) is a `watermark` event at its place in the stream, its `rowsPos` the
 *     message LSN - 1; every commit event carries the transaction's 32-bit xid (`txid`, from
 *     Begin) for the chunk's invisible-transaction check (../snapshot.ts);
 *   - Relation messages: identical ones are no-ops, a changed one is a `schema` event (the
 *     engine flushes the old schema's rows first); TRUNCATE is a `ddl` event;
 *   - a lost slot (missing, `wal_status = lost`, invalidated, or advanced past the stored
 *     position by someone else) is a `gap`; a slot another walsender still holds (SQLSTATE
 *     55006, e.g. the previous process's walsender that has not exited yet) is waited for.
 * Must never: acknowledge past what the engine confirmed, turn an unchanged value into NULL, or
 * write to a user table.
 */
import type { Duplex } from 'node:stream';
import type {
  CdcEvent,
  CdcRuntime,
  CdcTable,
  PendingRows,
  Reader,
  ReaderLog,
  SourcePosition,
  StartFrom,
} from '../../../contracts/cdc.js';
import { SourceError, TidemarkError } from '../../../contracts/errors.js';
import { type Batch, newBatch, type WriteMode } from '../../../dataplane/batch.js';
import { BatchEncoder, type ColumnWriter } from '../../../dataplane/encoder.js';
import { Op, type OpCode } from '../../../dataplane/metadata.js';
import type { Schema } from '../../../dataplane/schema.js';
import { compareSchemas } from '../../../dataplane/schema-rules.js';
import { formatLsn, ordinalHex, parseLsn, parsePgPosition, pgPosition } from '../../../position/position.js';
import { StreamQueue } from '../../cdc-queue.js';
import { streamSchema } from '../../cdc-schema.js';
import { type ConnectOptions, PostgresConnection, replicationClient, type Sql } from '../connect.js';
import { baseTypeOf, type ColumnInfo, resolveTypes, type TablePlan } from '../introspect.js';
import { quoteIdent, quoteLiteral, readPlan } from '../types.js';
import {
  COL_BINARY,
  COL_NULL,
  COL_TEXT,
  COL_UNCHANGED,
  MessageReader,
  pgTimeToNanos,
  type RelationMessage,
  standbyStatus,
  Tuple,
  XLOG_HEADER,
} from '../wire/pgoutput.js';
import { type Appender, appenderFor } from './values.js';

/** The scheme of Postgres resume positions (`SourcePosition.scheme`): a value is an LSN. */
export const PG_POSITION_SCHEME = 'pg-lsn';

/** Prefix of the reader's own logical messages. */
export const HEARTBEAT_PREFIX = 'tidemark.heartbeat';

/**
 * Prefix of snapshot watermark messages (`pg_logical_emit_message(false, WATERMARK_PREFIX, id)`,
 * emitted by the snapshot chunker, ../snapshot.ts); the content is the watermark id.
 */
export const WATERMARK_PREFIX = 'tidemark.watermark';

export function lsnPosition(lsn: bigint): SourcePosition {
  const text = formatLsn(lsn);
  return { scheme: PG_POSITION_SCHEME, value: text, display: text };
}

export function parseLsnPosition(p: SourcePosition): bigint {
  if (p.scheme !== PG_POSITION_SCHEME)
    throw new TidemarkError(
      'POSITION_SCHEME',
      `the stored position is of scheme "${p.scheme}", not a Postgres LSN: it was written by another kind of source; reset the source's state`,
    );
  return parseLsn(p.value);
}

export interface PostgresCdcReaderOptions extends ConnectOptions {
  readonly slot: string;
  /** publication_names for START_REPLICATION. */
  readonly publications: readonly string[];
  readonly heartbeatMs: number;
  /** How long to wait for a slot another walsender holds (SQLSTATE 55006). */
  readonly busySlotWaitMs?: number;
  readonly clock?: () => number;
  /** Most rows one `rows` event reports. */
  readonly rowsPerEvent?: number;
  /** `__ingest_ts` of cut batches, ns since the epoch [wall clock]. */
  readonly ingestTsNanos?: () => bigint;
}

/** A decoded value of a deferred row: text, null, or unchanged (to be read back). */
const UNCHANGED = Symbol('unchanged');
type Deferred = {
  readonly op: OpCode;
  readonly prefix: string;
  readonly ordinal: number;
  readonly commitNs: bigint;
  readonly values: (string | null | typeof UNCHANGED)[];
};

interface TableState {
  readonly target: string;
  readonly source: string;
  readonly writeMode: WriteMode;
  readonly insertOnly: boolean;
  readonly unchangedToast: 'reread' | 'fail';
  /** Column names left out of the lake. */
  readonly excluded: ReadonlySet<string>;
  schema: Schema;
  encoder: BatchEncoder;
  writers: ColumnWriter[];
  /** Per schema column: its catalog facts (current Relation) and appender. */
  infos: ColumnInfo[];
  appenders: Appender[];
  /** Relation column index -> schema column index, -1 when excluded. */
  relToSchema: Int32Array;
  /** Schema column index -> relation column index. */
  schemaToRel: Int32Array;
  /** Relation column indexes of the primary key. */
  keyRel: number[];
  replicaIdentity: string;
  /** The columns as the last Relation (or introspection) described them: name, type, typmod. */
  signature: string;
  relid: number | undefined;
  /** Rows below (nextLsn, nextOrd) are already durable. */
  nextLsn: bigint;
  nextOrd: number;
  /** Ordinal counter in the open transaction and the transaction it belongs to. */
  ord: number;
  ordTxn: number;
  /** `__pos` of the last row appended, as its transaction prefix and ordinal (a cut's watermark). */
  lastPrefix: string;
  lastOrd: number;
  /** Rows waiting for their unchanged TOAST values (reread), in order; appended at `settle`. */
  deferred: Deferred[] | undefined;
  deferredBytes: number;
  /** A new schema's encoder, switched to once the old one is cut. */
  swap: { schema: Schema; infos: ColumnInfo[]; rel: RelationMessage } | undefined;
}

const SLOT_BUSY = '55006';
const UNDEFINED_OBJECT = '42704';

/** Reads one source's captured tables from its slot (see the module comment). */
export class PostgresCdcReader implements Reader {
  readonly positionScheme = 'p';
  /** The slot keeps our position (see Reader.keepsPosition). */
  readonly keepsPosition = true;
  private readonly db: PostgresConnection;
  private repl: Sql | undefined;
  private stream: Duplex | undefined;
  private readonly tables = new Map<string, TableState>();
  private readonly bySource = new Map<string, TableState>();
  private readonly byRelid = new Map<number, TableState | null>();
  private readonly clock: () => number;
  private readonly rowsPerEvent: number;
  private readonly ingestTs: () => bigint;
  private readonly log: ReaderLog | undefined;
  private readonly dims: Record<string, string>;
  // The message queue (index-based) and the stream's state.
  private readonly queue = new StreamQueue<Buffer>();
  private streamError: unknown;
  private streamEnded = false;
  private readonly events: CdcEvent[] = [];
  // Transaction state.
  private inTxn = false;
  private txn = 0;
  private txnLsn = 0n;
  private txnPrefix = '';
  private txnCommitNs = 0n;
  /** The open transaction's xid (Begin), decimal: the commit event's `txid`. */
  private txnXid = '';
  /** Watermark ids the engine registered (`expectWatermark`) and the stream has not reached. */
  private readonly watermarks = new Set<string>();
  // Positions.
  private confirmed = 0n;
  /**
   * The newest position delivered (the start, a commit's end, a progress point): a keepalive's
   * WAL end may lie below where the stream was asked to start (the walsender reports how far it
   * has read, from the slot's restart point), and such a point must never become progress: the
   * state's position would move backwards, below the slot's confirmed_flush_lsn.
   */
  private floor = 0n;
  private lastActivity: number;
  private lastHeartbeat = 0;
  private statusTimer: NodeJS.Timeout | undefined;
  private slotTimer: NodeJS.Timeout | undefined;
  private started = false;
  private closed = false;
  private readonly msg = new MessageReader();
  private readonly newTuple = new Tuple();
  private readonly oldTuple = new Tuple();
  /** Counters tests and `check` read: what the decoder saw. */
  readonly seen = { unchangedToast: 0, filledFromOld: 0, reread: 0, keyChanges: 0, relations: 0 };

  constructor(
    private readonly opts: PostgresCdcReaderOptions,
    captured: readonly CdcTable[],
    plans: ReadonlyMap<string, TablePlan>,
    runtime: CdcRuntime,
  ) {
    this.db = new PostgresConnection({ ...opts, applicationName: 'tidemark-cdc-catalog' });
    this.clock = opts.clock ?? Date.now;
    this.rowsPerEvent = Math.max(1, opts.rowsPerEvent ?? 1024);
    this.ingestTs = opts.ingestTsNanos ?? (() => BigInt(Date.now()) * 1_000_000n);
    this.log = runtime.log;
    this.dims = { ...(runtime.dims ?? {}) };
    this.lastActivity = this.clock();
    for (const t of captured) {
      const plan = plans.get(t.ref.source);
      if (!plan) throw new Error(`postgres cdc: no introspection of ${t.ref.source}`);
      const names = new Set(t.schema.columns.map((c) => c.name));
      const excluded = new Set(plan.columns.filter((c) => !names.has(c.name)).map((c) => c.name));
      const infos = t.schema.columns.map((c) => plan.columns.find((p) => p.name === c.name)!);
      const state: TableState = {
        target: t.ref.target,
        source: t.ref.source,
        writeMode: t.writeMode,
        insertOnly: t.insertOnly === true,
        unchangedToast: t.unchangedToast ?? 'reread',
        excluded,
        schema: t.schema,
        encoder: new BatchEncoder(t.schema, { phase: 'stream' }),
        writers: [],
        infos,
        appenders: [],
        relToSchema: new Int32Array(0),
        schemaToRel: new Int32Array(0),
        keyRel: [],
        replicaIdentity: 'd',
        signature: signatureOf(plan.columns.map((c) => [c.name, c.attTypeOid, c.attTypmod])),
        relid: undefined,
        nextLsn: -1n,
        nextOrd: 0,
        ord: 0,
        ordTxn: -1,
        lastPrefix: '',
        lastOrd: 0,
        deferred: undefined,
        deferredBytes: 0,
        swap: undefined,
      };
      state.writers = writersOf(state.encoder);
      state.appenders = appendersOf(state.schema, infos, t.ref.source);
      this.tables.set(t.ref.target, state);
      this.bySource.set(t.ref.source, state);
    }
  }

  get ended(): boolean {
    return false;
  }

  // -------------------------------------------------------------------------------------------
  // Start

  async start(from: StartFrom, signal?: AbortSignal): Promise<void> {
    if (this.started) throw new Error('postgres cdc reader: start called twice');
    this.started = true;
    for (const t of this.tables.values()) {
      const next = from.next.get(t.target);
      if (next !== undefined && next >= 'p' && next < 'q') {
        const { commitLsn, ordinal } = parsePgPosition(next);
        t.nextLsn = commitLsn;
        t.nextOrd = ordinal;
      } else if (next !== undefined && next >= 'q') {
        t.nextLsn = 2n ** 64n;
      }
    }
    const startLsn = await this.prepareSlot(from.position);
    if (startLsn === undefined) return; // a gap is queued
    this.confirmed = startLsn;
    this.floor = startLsn;
    await this.startStreaming(startLsn, signal);
  }

  /**
   * A first start's position: the slot's, creating it. A slot that already exists (a first
   * start that created it and died before committing its position) is used from where it is:
   * nothing acknowledged it, so it still holds every change since it was created.
   */
  async initialPosition(): Promise<SourcePosition> {
    const slot = this.opts.slot;
    const info = await this.slotInfo();
    if (!info) {
      const [row] = await this.catalog((sql) =>
        sql.unsafe<{ lsn: string }[]>(
          "SELECT lsn::text AS lsn FROM pg_create_logical_replication_slot($1, 'pgoutput')",
          [slot],
        ),
      );
      this.log?.info('created the replication slot', { slot, lsn: row?.lsn });
      return lsnPosition(parseLsn(row!.lsn));
    }
    this.checkSlotUsable(info, undefined);
    if (info.lost)
      throw new SourceError(
        'CDC_SLOT_INVALID',
        `${info.lost}; drop it (SELECT pg_drop_replication_slot('${slot}')) so a first start creates it anew`,
      );
    this.log?.warn('the replication slot already exists on a first start: capturing from its position', {
      slot,
      confirmedFlushLsn: info.confirmed,
    });
    return lsnPosition(info.confirmed ? parseLsn(info.confirmed) : 0n);
  }

  /** The LSN to stream from; undefined when a gap is queued. */
  private async prepareSlot(position: SourcePosition): Promise<bigint | undefined> {
    const slot = this.opts.slot;
    const info = await this.slotInfo();
    const at = parseLsnPosition(position);
    if (!info)
      return this.queueGap(
        `the replication slot "${slot}" does not exist (dropped, or the server was replaced or restored)`,
        position,
        undefined,
      );
    this.checkSlotUsable(info, position);
    if (info.lost) return this.queueGap(info.lost, position, undefined);
    if (info.confirmed && parseLsn(info.confirmed) > at) {
      return this.queueGap(
        `the slot "${slot}" was advanced to ${info.confirmed} by another consumer, past the stored position ${position.value}`,
        position,
        lsnPosition(parseLsn(info.confirmed)),
      );
    }
    return at;
  }

  private queueGap(
    reason: string,
    from: SourcePosition | undefined,
    to: SourcePosition | undefined,
  ): undefined {
    this.events.push({ kind: 'gap', reason, from, to });
    return undefined;
  }

  private checkSlotUsable(info: SlotInfo, position: SourcePosition | undefined): void {
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

  private async slotInfo(): Promise<SlotInfo | undefined> {
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

  private version: number | undefined;
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

  private async startStreaming(lsn: bigint, signal?: AbortSignal): Promise<void> {
    const names = this.opts.publications.map((p) => p.replace(/'/g, "''")).join(',');
    const command = `START_REPLICATION SLOT ${quoteIdent(this.opts.slot)} LOGICAL ${formatLsn(lsn)} (proto_version '1', publication_names ${quoteLiteral(names)}, messages 'true')`;
    const deadline = this.clock() + (this.opts.busySlotWaitMs ?? 120_000);
    let announced = false;
    for (;;) {
      signal?.throwIfAborted();
      const repl = replicationClient({ ...this.opts, applicationName: 'tidemark-cdc' });
      try {
        const stream = (await repl.unsafe(command).writable()) as unknown as Duplex;
        this.repl = repl;
        this.attach(stream);
        break;
      } catch (e) {
        await repl.end({ timeout: 1 }).catch(() => undefined);
        const code = (e as { code?: string }).code;
        if (code === SLOT_BUSY && this.clock() < deadline) {
          if (!announced) {
            this.log?.warn(
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
    const every = Math.max(200, Math.min(10_000, Math.floor(this.opts.heartbeatMs / 2)));
    this.statusTimer = setInterval(() => this.sendStatus(false), every);
    this.statusTimer.unref();
    this.slotTimer = setInterval(() => void this.reportSlot(), 60_000);
    this.slotTimer.unref();
  }

  private attach(stream: Duplex): void {
    this.stream = stream;
    this.queue.source = stream;
    stream.on('data', (chunk: Buffer) => {
      this.queue.push(chunk);
    });
    stream.on('error', (e: unknown) => {
      this.streamError ??= e;
      this.queue.notify();
    });
    stream.on('end', () => {
      this.streamEnded = true;
      this.queue.notify();
    });
    stream.on('close', () => {
      this.streamEnded = true;
      this.queue.notify();
    });
  }

  // -------------------------------------------------------------------------------------------
  // Events

  async next(waitMs: number, signal?: AbortSignal): Promise<CdcEvent | undefined> {
    if (this.closed) throw new Error('postgres cdc reader: next after close');
    for (const t of this.tables.values()) if (t.swap) this.applySwap(t);
    const queued = this.events.shift();
    if (queued) return queued;
    if (!this.stream) return undefined; // a gap was queued and delivered: nothing streams
    const deadline = this.clock() + waitMs;
    let run: { t: TableState; count: number; bytes: number } | undefined;
    for (;;) {
      const chunk = this.queue.take();
      if (chunk === undefined) {
        if (run) return this.rowsEvent(run);
        if (this.streamError !== undefined) throw this.lostStream(this.streamError);
        if (this.streamEnded) throw this.lostStream(undefined);
        await this.maybeHeartbeat();
        const left = deadline - this.clock();
        if (left <= 0 || signal?.aborted) return undefined;
        await this.queue.wait(left, signal);
        continue;
      }
      const type = chunk[0];
      if (type === 0x6b /* k */) {
        const walEnd = chunk.readBigUInt64BE(1);
        if (chunk[17] === 1) this.sendStatus(true);
        if (!this.inTxn && !run && walEnd > this.floor) return this.progress(walEnd);
        if (run) return this.rowsEvent(run);
        continue;
      }
      if (type !== 0x77 /* w */) continue;
      const m = this.msg.reset(chunk, XLOG_HEADER, chunk.length);
      const tag = chunk[XLOG_HEADER]!;
      // Row changes extend the current run of one table; anything else ends it first.
      if (tag === 0x49 /* I */ || tag === 0x55 /* U */ || tag === 0x44 /* D */) {
        m.off++;
        const relid = m.u32();
        const t = this.byRelid.get(relid);
        if (t === undefined) throw this.protocol(`a row of relation ${relid} before its Relation message`);
        if (t === null) continue; // not captured
        if (run && run.t !== t) {
          this.queue.unread();
          return this.rowsEvent(run);
        }
        if (t.swap) {
          // The engine has not cut the old schema's rows yet: hand over what we have.
          this.queue.unread();
          if (run) return this.rowsEvent(run);
          throw new Error(`postgres cdc reader: ${t.target} has rows in its old schema after a schema event`);
        }
        const bytesBefore = t.encoder.dataBytes + t.deferredBytes;
        const n = this.decodeRow(t, tag, m);
        if (n === 0) continue;
        run ??= { t, count: 0, bytes: 0 };
        run.count += n;
        run.bytes += t.encoder.dataBytes + t.deferredBytes - bytesBefore;
        if (run.count >= this.rowsPerEvent) return this.rowsEvent(run);
        continue;
      }
      if (run) {
        this.queue.unread();
        return this.rowsEvent(run);
      }
      const ev = await this.decodeOther(tag, m);
      if (ev) return ev;
    }
  }

  private progress(lsn: bigint): CdcEvent {
    this.floor = lsn;
    return { kind: 'progress', position: lsnPosition(lsn) };
  }

  private rowsEvent(run: { t: TableState; count: number; bytes: number }): CdcEvent {
    this.lastActivity = this.clock();
    return { kind: 'rows', table: run.t.target, count: run.count, bytes: run.bytes };
  }

  private lostStream(e: unknown): SourceError {
    const message = e instanceof Error ? e.message : 'the server ended the stream';
    return new SourceError(
      'SOURCE_CONNECTION_LOST',
      `the replication connection of slot "${this.opts.slot}" was lost (${message}); nothing past the last acknowledged position is lost: restart the capture (the CDC task restarts by itself)`,
      e instanceof Error ? { cause: e } : undefined,
    );
  }

  private protocol(what: string): SourceError {
    return new SourceError(
      'SOURCE_PROTOCOL',
      `the replication stream of slot "${this.opts.slot}" sent ${what}; restart the capture`,
    );
  }

  /** Everything but row changes. */
  private async decodeOther(tag: number, m: MessageReader): Promise<CdcEvent | undefined> {
    m.off++;
    switch (tag) {
      case 0x42 /* B */:
        {
          const finalLsn = m.u64();
          const commitTs = m.i64();
          const xid = m.u32();
          this.inTxn = true;
          this.txnXid = String(xid);
          this.txn++;
          this.txnLsn = finalLsn;
          this.txnPrefix = pgPosition(finalLsn, 0).slice(0, 17);
          this.txnCommitNs = pgTimeToNanos(commitTs);
          return { kind: 'begin' };
        }
      case 0x43 /* C */:
        {
          m.u8();
          m.u64(); // commit LSN (= Begin's final_lsn)
          const endLsn = m.u64();
          const commitTs = m.i64();
          this.inTxn = false;
          this.lastActivity = this.clock();
          if (endLsn > this.floor) this.floor = endLsn;
          return {
            kind: 'commit',
            position: lsnPosition(endLsn),
            commitTimeMs: Number(pgTimeToNanos(commitTs) / 1_000_000n),
            txid: this.txnXid,
          };
        }
      case 0x52 /* R */:
        return this.onRelation(m.relation());
      case 0x54 /* T */:
        {
          const n = m.i32();
          m.u8();
          const targets: string[] = [];
          for (let i = 0; i < n; i++) {
            const t = this.byRelid.get(m.u32());
            if (t) targets.push(t.target);
          }
          for (const target of targets.slice(1))
            this.events.push({
              kind: 'ddl',
              ddl: {
                source: 'postgres',
                kind: 'truncate',
                table: target,
                detail: `TRUNCATE ${this.tables.get(target)!.source}`,
              },
            });
          const first = targets[0];
          if (first === undefined) return undefined;
          return {
            kind: 'ddl',
            ddl: {
              source: 'postgres',
              kind: 'truncate',
              table: first,
              detail: `TRUNCATE ${this.tables.get(first)!.source}`,
            },
          };
        }
      case 0x4d /* M */:
        {
          const transactional = (m.u8() & 1) === 1;
          const lsn = m.u64();
          const prefix = m.cstring();
          if (!transactional && !this.inTxn && prefix === HEARTBEAT_PREFIX && lsn > this.floor)
            return this.progress(lsn);
          if (!transactional && prefix === WATERMARK_PREFIX && this.watermarks.size > 0)
            return this.onWatermark(lsn, m);
          return undefined;
        }
      default:
        // 'Y' Type and 'O' Origin carry nothing the reader needs (types come from the catalog).
        return undefined;
    }
  }

  // -------------------------------------------------------------------------------------------
  // Snapshot watermarks

  /**
   * Registers a snapshot watermark (shared/contracts/cdc.ts `Reader.expectWatermark`): the
   * `tidemark.watermark` message whose content is `id` becomes a `watermark` event when the
   * stream reaches it. `at` is not used: Postgres watermarks are always found in the stream.
   */
  expectWatermark(id: string, _at?: SourcePosition): void {
    this.watermarks.add(id);
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
  private onWatermark(lsn: bigint, m: MessageReader): CdcEvent | undefined {
    const length = m.u32();
    if (m.off + length > m.endOff) throw this.protocol('a logical message longer than its payload');
    const id = m.buf.toString('utf8', m.off, m.off + length);
    m.off += length;
    if (!this.watermarks.has(id)) return undefined;
    if (this.inTxn)
      throw this.protocol(
        `the watermark message "${id}" inside a transaction (proto_version 1 never does that)`,
      );
    this.watermarks.delete(id);
    return { kind: 'watermark', id, rowsPos: pgPosition(lsn - 1n, 0).slice(0, 17) };
  }

  // -------------------------------------------------------------------------------------------
  // Relations and schemas

  private async onRelation(rel: RelationMessage): Promise<CdcEvent | undefined> {
    this.seen.relations++;
    const t = this.bySource.get(`${rel.namespace}.${rel.name}`) ?? null;
    this.byRelid.set(rel.relid, t);
    if (!t) return undefined;
    t.relid = rel.relid;
    t.replicaIdentity = rel.replicaIdentity;
    const signature = signatureOf(rel.columns.map((c) => [c.name, c.typeOid, c.typmod]));
    if (signature === t.signature) {
      this.mapRelation(t, rel, t.schema);
      return undefined;
    }
    // The columns changed: derive the new schema from the message (the catalog may have moved
    // further on since this point of the log).
    const infos = await this.columnsOf(rel);
    const kept = infos.filter((c) => !t.excluded.has(c.name));
    const old = t.schema;
    const schema = streamSchema(old, kept);
    t.signature = signature;
    const changes = compareSchemas(old, schema);
    // No change the rules see (the hash would not tell a source-type change, which they do).
    if (changes.length === 0) {
      // Same lake schema (a source-type-only change): new appenders, same encoder.
      t.infos = kept;
      t.appenders = appendersOf(old, kept, t.source);
      this.mapRelation(t, rel, old);
      return undefined;
    }
    t.swap = { schema, infos: kept, rel };
    if (t.encoder.rowCount === 0 && !t.deferred) this.applySwap(t);
    return { kind: 'schema', table: t.target, schema, changes };
  }

  private applySwap(t: TableState): void {
    if (t.encoder.rowCount > 0 || t.deferred) return;
    const { schema, infos, rel } = t.swap!;
    t.swap = undefined;
    t.schema = schema;
    t.infos = infos;
    t.encoder = new BatchEncoder(schema, { phase: 'stream' });
    t.writers = writersOf(t.encoder);
    t.appenders = appendersOf(schema, infos, t.source);
    this.mapRelation(t, rel, schema);
  }

  private mapRelation(t: TableState, rel: RelationMessage, schema: Schema): void {
    const index = new Map(schema.columns.map((c, i) => [c.name, i]));
    t.relToSchema = Int32Array.from(rel.columns.map((c) => index.get(c.name) ?? -1));
    t.schemaToRel = new Int32Array(schema.columns.length).fill(-1);
    rel.columns.forEach((c, i) => {
      const j = index.get(c.name);
      if (j !== undefined) t.schemaToRel[j] = i;
    });
    t.keyRel = schema.primaryKey.map((k) => rel.columns.findIndex((c) => c.name === k));
    for (let j = 0; j < schema.columns.length; j++)
      if (t.schemaToRel[j] === -1)
        throw new SourceError(
          'SCHEMA_CHANGED',
          `${t.target}: the stream's Relation message of ${t.source} has no column "${schema.columns[j]!.name}"`,
        );
  }

  /** Catalog facts of a Relation's columns, from its type OIDs (domains and arrays resolved). */
  private async columnsOf(rel: RelationMessage): Promise<ColumnInfo[]> {
    return this.catalog(async (sql) => {
      const types = await resolveTypes(
        sql,
        rel.columns.map((c) => c.typeOid),
      );
      const formats = await sql.unsafe<{ f: string; c: string }[]>(
        `SELECT format_type(t.oid, t.mod) AS f, format_type(t.oid, -1) AS c
         FROM unnest($1::text::oid[], $2::text::int4[]) WITH ORDINALITY AS t(oid, mod, i) ORDER BY t.i`,
        [
          `{${rel.columns.map((c) => c.typeOid).join(',')}}`,
          `{${rel.columns.map((c) => c.typmod).join(',')}}`,
        ],
      );
      const dims = await sql.unsafe<{ attname: string; attndims: number; attnum: number }[]>(
        'SELECT attname::text, attndims::int, attnum::int FROM pg_attribute WHERE attrelid = $1::oid AND attnum > 0 AND NOT attisdropped',
        [String(rel.relid)],
      );
      return rel.columns.map((c, i): ColumnInfo => {
        const t = baseTypeOf(types, c.typeOid, c.typmod);
        const d = dims.find((x) => x.attname === c.name);
        return {
          name: c.name,
          attnum: d?.attnum ?? i + 1,
          notNull: false,
          sourceType: formats[i]?.f ?? '',
          castType: formats[i]?.c ?? '',
          baseOid: t.oid,
          attTypeOid: c.typeOid,
          attTypmod: c.typmod,
          attNdims: d?.attndims ?? 0,
          elementOid: t.element?.oid ?? 0,
          read: readPlan(t, c.name, d?.attndims ?? 0),
        };
      });
    });
  }

  // -------------------------------------------------------------------------------------------
  // Rows

  /** Decodes one I/U/D of `t` (the relid already read); returns the rows appended (0..2). */
  private decodeRow(t: TableState, tag: number, m: MessageReader): number {
    if (t.ordTxn !== this.txn) {
      t.ordTxn = this.txn;
      t.ord = 0;
    }
    const nu = this.newTuple;
    const old = this.oldTuple;
    if (tag === 0x49 /* I */) {
      m.u8(); // 'N'
      m.tuple(nu);
      return this.emit(t, Op.create, nu, undefined);
    }
    if (tag === 0x44 /* D */) {
      m.u8(); // 'K' or 'O'
      m.tuple(old);
      return this.emit(t, Op.delete, old, undefined);
    }
    // Update: an optional old tuple ('K' key changed under the default identity, 'O' FULL).
    let kind = m.u8();
    let hasOld = false;
    if (kind === 0x4b /* K */ || kind === 0x4f /* O */) {
      m.tuple(old);
      hasOld = true;
      kind = m.u8();
    }
    if (kind !== 0x4e /* N */)
      throw this.protocol(`an Update without its new tuple (0x${kind.toString(16)})`);
    m.tuple(nu);
    if (hasOld && keyChanged(t, old, nu, m.buf)) {
      this.seen.keyChanges++;
      // A primary-key change: the old key is deleted, the new one inserted.
      const a = this.emit(t, Op.delete, old, undefined);
      return a + this.emit(t, Op.create, nu, old);
    }
    return this.emit(t, Op.update, nu, hasOld ? old : undefined);
  }

  /** Appends one row (or defers it for reread); 0 when below the table's `next`. */
  private emit(t: TableState, op: OpCode, tup: Tuple, old: Tuple | undefined): number {
    const o = t.ord++;
    if (this.txnLsn < t.nextLsn || (this.txnLsn === t.nextLsn && o < t.nextOrd)) return 0;
    t.lastPrefix = this.txnPrefix;
    t.lastOrd = o;
    const buf = this.msg.buf;
    const s2r = t.schemaToRel;
    const ncols = s2r.length;
    let unchanged = false;
    for (let j = 0; j < ncols; j++) {
      const r = s2r[j]!;
      if (r < tup.count && tup.kind[r] === COL_UNCHANGED) {
        this.seen.unchangedToast++;
        if (old && r < old.count && (old.kind[r] === COL_TEXT || old.kind[r] === COL_BINARY)) {
          this.seen.filledFromOld++;
          tup.kind[r] = old.kind[r]!;
          tup.start[r] = old.start[r]!;
          tup.end[r] = old.end[r]!;
        } else unchanged = true;
      }
    }
    if (unchanged && t.unchangedToast === 'fail')
      throw new SourceError(
        'CDC_UNCHANGED_TOAST',
        `${t.target}: an UPDATE left a TOASTed column unchanged, so the log did not carry its value, and the table says unchangedToast: fail; run ALTER TABLE ${t.source} REPLICA IDENTITY FULL (exact, more WAL), or set unchangedToast: reread`,
      );
    if (unchanged || t.deferred) {
      this.defer(t, op, tup, o, buf);
      return 1;
    }
    const writers = t.writers;
    const appenders = t.appenders;
    for (let j = 0; j < ncols; j++) {
      const r = s2r[j]!;
      const w = writers[j]!;
      const k = r < tup.count ? tup.kind[r]! : COL_NULL;
      if (k === COL_TEXT) appenders[j]!(w, buf, tup.start[r]!, tup.end[r]!);
      else if (k === COL_NULL) w.appendNull();
      else throw this.protocol(`a binary value in ${t.target} (the stream was asked for text)`);
    }
    t.encoder.appendMetaOrdinal(op, this.txnPrefix, o, this.txnCommitNs, false);
    return 1;
  }

  private defer(t: TableState, op: OpCode, tup: Tuple, o: number, buf: Buffer): void {
    const values: Deferred['values'] = [];
    let bytes = 0;
    for (let j = 0; j < t.schemaToRel.length; j++) {
      const r = t.schemaToRel[j]!;
      const k = r < tup.count ? tup.kind[r]! : COL_NULL;
      if (k === COL_TEXT) {
        const s = buf.toString('utf8', tup.start[r]!, tup.end[r]!);
        bytes += tup.end[r]! - tup.start[r]! + 8;
        values.push(s);
      } else if (k === COL_UNCHANGED) values.push(UNCHANGED);
      else values.push(null);
    }
    if (!t.deferred) t.deferred = [];
    t.deferred.push({ op, prefix: this.txnPrefix, ordinal: o, commitNs: this.txnCommitNs, values });
    t.deferredBytes += bytes;
  }

  // -------------------------------------------------------------------------------------------
  // Reread: unchanged TOAST values read back by key, once per flush

  async settle(tables: readonly string[]): Promise<void> {
    for (const target of tables) {
      const t = this.tables.get(target);
      if (!t?.deferred) continue;
      const rows = t.deferred;
      const need = new Set<number>();
      for (const d of rows)
        for (let j = 0; j < d.values.length; j++) if (d.values[j] === UNCHANGED) need.add(j);
      const keyIdx = t.schema.primaryKey.map((k) => t.schema.columns.findIndex((c) => c.name === k));
      const lookups = rows.filter((d) => d.values.includes(UNCHANGED));
      const found =
        need.size > 0 && lookups.length > 0 ? await this.reread(t, keyIdx, [...need], lookups) : new Map();
      this.seen.reread += lookups.length;
      for (const d of rows) {
        const key = JSON.stringify(keyIdx.map((j) => d.values[j]));
        const current = found.get(key);
        for (let j = 0; j < d.values.length; j++) {
          const raw = d.values[j];
          const v = raw === UNCHANGED ? (current?.get(j) ?? null) : raw;
          const w = t.writers[j]!;
          if (v === null || v === undefined) w.appendNull();
          else {
            const b = Buffer.from(v, 'utf8');
            t.appenders[j]!(w, b, 0, b.length);
          }
        }
        t.encoder.appendMetaOrdinal(d.op, d.prefix, d.ordinal, d.commitNs, false);
      }
      t.deferred = undefined;
      t.deferredBytes = 0;
    }
  }

  /** The current text of columns `cols` of the rows keyed as in `rows`; a row gone is absent. */
  private async reread(
    t: TableState,
    keyIdx: number[],
    cols: number[],
    rows: Deferred[],
  ): Promise<Map<string, Map<number, string | null>>> {
    if (keyIdx.some((j) => j < 0))
      throw new SourceError(
        'CDC_UNCHANGED_TOAST',
        `${t.target}: an unchanged TOASTed value must be read back by key, but the table's key is not captured; set REPLICA IDENTITY FULL on ${t.source}`,
      );
    const keys = rows.map((d) => keyIdx.map((j) => d.values[j] as string));
    const plan = t.infos;
    const { schema: nsp, table: rel } = splitQualified(t.source);
    const on = keyIdx
      .map((j, i) => `t.${quoteIdent(t.schema.columns[j]!.name)} = (k.v->>${i})::${plan[j]!.castType}`)
      .join(' AND ');
    const select = cols.map((j, i) => `t.${quoteIdent(t.schema.columns[j]!.name)}::text AS c${i}`).join(', ');
    const result = await this.catalog((sql) =>
      sql.unsafe<Record<string, string | null>[]>(
        `SELECT k.v::text AS key, ${select}
         FROM jsonb_array_elements($1::text::jsonb) AS k(v)
         JOIN ${quoteIdent(nsp)}.${quoteIdent(rel)} t ON ${on}`,
        [JSON.stringify(keys)],
      ),
    );
    const out = new Map<string, Map<number, string | null>>();
    for (const row of result) {
      const key = JSON.stringify(JSON.parse(row.key as string));
      const values = new Map<number, string | null>();
      for (let i = 0; i < cols.length; i++) values.set(cols[i]!, row[`c${i}`] ?? null);
      out.set(key, values);
    }
    return out;
  }

  pending(table: string): PendingRows {
    const t = this.state(table);
    return {
      rows: t.encoder.rowCount + (t.deferred?.length ?? 0),
      bytes: t.encoder.dataBytes + t.deferredBytes,
    };
  }

  cut(table: string): Batch | undefined {
    const t = this.state(table);
    if (t.deferred)
      throw new Error(`postgres cdc reader: ${table} has rows awaiting reread: settle() before cut()`);
    const enc = t.encoder;
    if (enc.rowCount === 0) return undefined;
    const record = enc.finish(this.ingestTs());
    t.writers = writersOf(enc);
    const watermark = t.lastPrefix + ordinalHex(t.lastOrd);
    return newBatch({ table: t.target, record, watermark, writeMode: t.writeMode });
  }

  private state(table: string): TableState {
    const t = this.tables.get(table);
    if (!t) throw new Error(`postgres cdc reader: ${table} is not a captured table`);
    return t;
  }

  // -------------------------------------------------------------------------------------------
  // Acknowledgement, heartbeats, slot health

  async setConfirmed(position: SourcePosition): Promise<void> {
    const lsn = parseLsnPosition(position);
    if (lsn <= this.confirmed) return;
    this.confirmed = lsn;
    this.sendStatus(false);
  }

  private sendStatus(reply: boolean): void {
    const s = this.stream;
    if (!s || this.closed || s.destroyed) return;
    s.write(standbyStatus(this.confirmed, BigInt(Date.now()) * 1000n, reply));
  }

  /** Emits a heartbeat message when the captured tables were idle for heartbeatMs. */
  private async maybeHeartbeat(): Promise<void> {
    const now = this.clock();
    if (now - this.lastActivity < this.opts.heartbeatMs || now - this.lastHeartbeat < this.opts.heartbeatMs)
      return;
    this.lastHeartbeat = now;
    try {
      await this.catalog((sql) =>
        sql.unsafe('SELECT pg_logical_emit_message(false, $1, $2)', [HEARTBEAT_PREFIX, this.opts.slot]),
      );
    } catch (e) {
      this.log?.warn('the heartbeat failed; the slot advances only with captured changes until it works', {
        error: e,
      });
    }
  }

  /** Slot health: lag bytes, wal_status, safe_wal_size; a warning before the slot is lost. */
  private async reportSlot(): Promise<void> {
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
      const dims = { ...this.dims, slot: this.opts.slot };
      this.log?.metric('SlotLagBytes', Number(row.restart_lag ?? 0), 'Bytes', dims);
      this.log?.metric('SlotConfirmedLagBytes', Number(row.flush_lag ?? 0), 'Bytes', dims);
      if (row.safe !== null) this.log?.metric('SlotSafeWalBytes', Number(row.safe), 'Bytes', dims);
      if (row.wal_status === 'unreserved' || (row.safe !== null && Number(row.safe) < 64 * 1024 * 1024))
        this.log?.warn(
          'the replication slot is close to losing its WAL (max_slot_wal_keep_size): the capture must catch up, or the slot is invalidated and the position lost',
          { slot: this.opts.slot, walStatus: row.wal_status, safeWalSize: row.safe },
        );
    } catch (e) {
      this.log?.warn('reading the slot health failed', { error: e });
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    clearInterval(this.statusTimer);
    clearInterval(this.slotTimer);
    // The last status: what the engine confirmed, never more.
    this.sendStatus(false);
    this.closed = true;
    const s = this.stream;
    this.stream = undefined;
    if (s && !s.destroyed) s.end();
    await this.repl?.end({ timeout: 2 }).catch(() => undefined);
    await this.db.close().catch(() => undefined);
  }
}

interface SlotInfo {
  readonly plugin: string;
  readonly database: string;
  readonly current: string;
  readonly confirmed: string | null;
  readonly lost?: string;
}

function signatureOf(cols: readonly (readonly [string, number, number])[]): string {
  return JSON.stringify(cols);
}

function writersOf(enc: BatchEncoder): ColumnWriter[] {
  return enc.schema.columns.map((_, j) => enc.col(j));
}

function appendersOf(schema: Schema, infos: readonly ColumnInfo[], source: string): Appender[] {
  return schema.columns.map((c, j) => {
    const info = infos[j]!;
    return appenderFor(info.read, info.baseOid, info.elementOid, { table: source, column: c.name });
  });
}

/** True when a key column's text differs between `old` and `nu` (both in `buf`), bytewise. */
function keyChanged(t: TableState, old: Tuple, nu: Tuple, buf: Buffer): boolean {
  for (const r of t.keyRel) {
    if (r < 0 || r >= old.count) continue;
    const ko = old.kind[r];
    if (ko === COL_NULL) continue; // 'K' tuples carry only the key
    if (ko !== nu.kind[r]) return true;
    if (ko !== COL_TEXT && ko !== COL_BINARY) continue;
    if (buf.compare(buf, old.start[r]!, old.end[r]!, nu.start[r]!, nu.end[r]!) !== 0) return true;
  }
  return false;
}

function splitQualified(source: string): { schema: string; table: string } {
  const dot = source.indexOf('.');
  return { schema: source.slice(0, dot), table: source.slice(dot + 1) };
}
