/**
 * The Postgres change-stream reader: logical replication with the built-in `pgoutput` plugin
 * over a PERMANENT slot (docs/postgres-cdc.md, decision 0011), implementing the CDC engine's
 * `Reader` (shared/contracts/cdc.ts). This file is the streaming loop: start, next (each message
 * decoded as it is taken), acknowledge, close. Each other concern is a file next to it: the slot
 * (first position, gaps, START_REPLICATION, health) ./slot.ts, the position codec ./position.ts,
 * each captured table (PostgresCdcTable: Relation and Truncate messages) ./table.ts, heartbeats ./heartbeat.ts, snapshot watermarks
 * ./watermarks.ts, unchanged TOAST values read back ./toast.ts, text values ./values.ts, and
 * each table's buffered rows ../../cdc-buffer.ts (shared with the MySQL reader).
 *
 * Owns:
 *   - the stream: a postgres.js CopyBoth duplex with backpressure (the socket is paused while
 *     the engine is behind), standby status updates on a timer and whenever a keepalive asks;
 *   - positions: a row's `__pos` is `pgPosition(Begin.final_lsn, ordinal per (transaction,
 *     table))` (Begin's final_lsn is the Commit's LSN, so rows are stamped as they decode); the
 *     resume point after a transaction is its Commit's END LSN (resuming at the commit LSN
 *     itself would deliver it again); keepalive and heartbeat LSNs are progress between
 *     transactions;
 *   - decoding Insert/Update/Delete straight into per-table Arrow writers, a primary-key change
 *     as a delete of the old key plus an insert of the new one, unchanged TOAST values ('u') from
 *     the old tuple under REPLICA IDENTITY FULL or deferred to be read back at the flush;
 *   - the events: begin, rows, commit (with the transaction's 32-bit xid, `txid`, for the
 *     snapshot chunk's invisible-transaction check, ../snapshot.ts), progress, and in their place
 *     in the stream the gap, schema, ddl and watermark events of the files above.
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
import type { Batch } from '../../../dataplane/batch.js';
import { Op, type OpCode } from '../../../dataplane/metadata.js';
import { StreamQueue } from '../../cdc-queue.js';
import { PostgresConnection, type Sql } from '../connect.js';
import type { TablePlan } from '../introspect.js';
import {
  COL_BINARY,
  COL_NULL,
  COL_TEXT,
  MessageReader,
  pgTimeToNanos,
  type RelationMessage,
  standbyStatus,
  Tuple,
  XLOG_HEADER,
} from '../wire/pgoutput.js';
import { HEARTBEAT_PREFIX, Heartbeat } from './heartbeat.js';
import { lsnPosition, lsnPrefix, parseLsnPosition, parseTableNext } from './position.js';
import { lostStreamError, protocolError, ReplicationSlot, type ReplicationSlotOptions } from './slot.js';
import { applyRelation, PostgresCdcTable, truncateEvents } from './table.js';
import { defer, fillUnchanged, readBack } from './toast.js';
import { WATERMARK_PREFIX, Watermarks } from './watermarks.js';

export interface PostgresCdcReaderOptions extends ReplicationSlotOptions {
  readonly heartbeatMs: number;
  readonly clock?: () => number;
  /** Most rows one `rows` event reports. */
  readonly rowsPerEvent?: number;
  /** `__ingest_ts` of cut batches, ns since the epoch [wall clock]. */
  readonly ingestTsNanos?: () => bigint;
}

/** Reads one source's captured tables from its slot (see the module comment). */
export class PostgresCdcReader implements Reader {
  readonly positionScheme = 'p';
  /** The slot keeps our position (see Reader.keepsPosition). */
  readonly keepsPosition = true;
  private readonly db: PostgresConnection;
  private readonly slot: ReplicationSlot;
  private repl: Sql | undefined;
  private stream: Duplex | undefined;
  private readonly tables = new Map<string, PostgresCdcTable>();
  private readonly bySource = new Map<string, PostgresCdcTable>();
  private readonly byRelid = new Map<number, PostgresCdcTable | null>();
  private readonly clock: () => number;
  private readonly rowsPerEvent: number;
  private readonly ingestTs: () => bigint;
  private readonly log: ReaderLog | undefined;
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
  private readonly watermarks: Watermarks;
  // Positions.
  private confirmed = 0n;
  /**
   * The newest position delivered (the start, a commit's end, a progress point): a keepalive's
   * WAL end may lie below where the stream was asked to start (the walsender reports how far it
   * has read, from the slot's restart point), and such a point must never become progress: the
   * state's position would move backwards, below the slot's confirmed_flush_lsn.
   */
  private floor = 0n;
  private readonly heartbeat: Heartbeat;
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
    this.slot = new ReplicationSlot(opts, this.db, {
      log: this.log,
      dims: { ...(runtime.dims ?? {}) },
      clock: this.clock,
    });
    this.heartbeat = new Heartbeat(this.db, opts.slot, opts.heartbeatMs, this.clock, this.log);
    this.watermarks = new Watermarks(opts.slot);
    for (const t of captured) {
      const plan = plans.get(t.ref.source);
      if (!plan) throw new Error(`postgres cdc: no introspection of ${t.ref.source}`);
      const state = new PostgresCdcTable(t, plan);
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
      const next = parseTableNext(from.next.get(t.target));
      if (next) {
        t.nextLsn = next.lsn;
        t.nextOrd = next.ordinal;
      }
    }
    const startLsn = await this.slot.resumeAt(from.position);
    if (typeof startLsn !== 'bigint') {
      this.events.push(startLsn); // a gap: nothing streams
      return;
    }
    this.confirmed = startLsn;
    this.floor = startLsn;
    const { repl, stream } = await this.slot.open(startLsn, signal);
    this.repl = repl;
    this.attach(stream);
    const every = Math.max(200, Math.min(10_000, Math.floor(this.opts.heartbeatMs / 2)));
    this.statusTimer = setInterval(() => this.sendStatus(false), every);
    this.statusTimer.unref();
    this.slotTimer = setInterval(() => void this.slot.report(), 60_000);
    this.slotTimer.unref();
  }

  /** A first start's position: the slot's, creating it (./slot.ts). */
  initialPosition(): Promise<SourcePosition> {
    return this.slot.initialPosition();
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
    for (const t of this.tables.values()) if (t.swap) t.applySwap();
    const queued = this.events.shift();
    if (queued) return queued;
    if (!this.stream) return undefined; // a gap was queued and delivered: nothing streams
    const deadline = this.clock() + waitMs;
    let run: { t: PostgresCdcTable; count: number; bytes: number } | undefined;
    for (;;) {
      const chunk = this.queue.take();
      if (chunk === undefined) {
        if (run) return this.rowsEvent(run);
        if (this.streamError !== undefined) throw lostStreamError(this.opts.slot, this.streamError);
        if (this.streamEnded) throw lostStreamError(this.opts.slot, undefined);
        await this.heartbeat.maybe();
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
        if (t === undefined)
          throw protocolError(this.opts.slot, `a row of relation ${relid} before its Relation message`);
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

  private rowsEvent(run: { t: PostgresCdcTable; count: number; bytes: number }): CdcEvent {
    this.heartbeat.activity();
    return { kind: 'rows', table: run.t.target, count: run.count, bytes: run.bytes };
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
          this.txnPrefix = lsnPrefix(finalLsn);
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
          this.heartbeat.activity();
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
          const [first, ...rest] = truncateEvents(m, this.byRelid);
          this.events.push(...rest);
          return first;
        }
      case 0x4d /* M */:
        {
          const transactional = (m.u8() & 1) === 1;
          const lsn = m.u64();
          const prefix = m.cstring();
          if (!transactional && !this.inTxn && prefix === HEARTBEAT_PREFIX && lsn > this.floor)
            return this.progress(lsn);
          if (!transactional && prefix === WATERMARK_PREFIX && this.watermarks.waiting)
            return this.watermarks.reached(lsn, m, this.inTxn);
          return undefined;
        }
      default:
        // 'Y' Type and 'O' Origin carry nothing the reader needs (types come from the catalog).
        return undefined;
    }
  }

  /**
   * Registers a snapshot watermark (shared/contracts/cdc.ts `Reader.expectWatermark`): the
   * `tidemark.watermark` message whose content is `id` becomes a `watermark` event when the
   * stream reaches it (./watermarks.ts). `at` is not used: Postgres watermarks are always found in
   * the stream.
   */
  expectWatermark(id: string, _at?: SourcePosition): void {
    this.watermarks.expect(id);
  }

  /** A Relation message: a captured table's columns mapped anew, or a `schema` event. */
  private async onRelation(rel: RelationMessage): Promise<CdcEvent | undefined> {
    this.seen.relations++;
    const t = this.bySource.get(`${rel.namespace}.${rel.name}`) ?? null;
    this.byRelid.set(rel.relid, t);
    if (!t) return undefined;
    const change = await applyRelation(this.db, t, rel);
    if (!change) return undefined;
    const { schema, infos, changes } = change;
    t.swap = { schema, infos, rel };
    if (t.encoder.rowCount === 0 && !t.deferred) t.applySwap();
    return { kind: 'schema', table: t.target, schema, changes };
  }

  // -------------------------------------------------------------------------------------------
  // Rows

  /** Decodes one I/U/D of `t` (the relid already read); returns the rows appended (0..2). */
  private decodeRow(t: PostgresCdcTable, tag: number, m: MessageReader): number {
    t.enterTxn(this.txn);
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
      throw protocolError(this.opts.slot, `an Update without its new tuple (0x${kind.toString(16)})`);
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
  private emit(t: PostgresCdcTable, op: OpCode, tup: Tuple, old: Tuple | undefined): number {
    const o = t.ord++;
    if (this.txnLsn < t.nextLsn || (this.txnLsn === t.nextLsn && o < t.nextOrd)) return 0;
    t.lastPrefix = this.txnPrefix;
    t.lastOrd = o;
    const buf = this.msg.buf;
    const s2r = t.schemaToRel;
    const ncols = s2r.length;
    const unchanged = fillUnchanged(t, tup, old, this.seen);
    if (unchanged || t.deferred) {
      defer(t, op, tup, buf, this.txnPrefix, o, this.txnCommitNs);
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
      else
        throw protocolError(this.opts.slot, `a binary value in ${t.target} (the stream was asked for text)`);
    }
    t.encoder.appendMetaOrdinal(op, this.txnPrefix, o, this.txnCommitNs, false);
    return 1;
  }

  /** Appends each table's deferred rows, their unchanged TOAST values read back (./toast.ts). */
  async settle(tables: readonly string[]): Promise<void> {
    for (const target of tables) {
      const t = this.tables.get(target);
      if (!t?.deferred) continue;
      const rows = t.deferred;
      this.seen.reread += await readBack(this.db, t, rows);
      for (const d of rows) {
        for (let j = 0; j < d.values.length; j++) {
          const v = d.values[j];
          const w = t.writers[j]!;
          if (typeof v !== 'string') w.appendNull();
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
    return t.cut(this.ingestTs);
  }

  private state(table: string): PostgresCdcTable {
    const t = this.tables.get(table);
    if (!t) throw new Error(`postgres cdc reader: ${table} is not a captured table`);
    return t;
  }

  // -------------------------------------------------------------------------------------------
  // Acknowledgement and close

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

/** True when a key column's text differs between `old` and `nu` (both in `buf`), bytewise. */
function keyChanged(t: PostgresCdcTable, old: Tuple, nu: Tuple, buf: Buffer): boolean {
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
