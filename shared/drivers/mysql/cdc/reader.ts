/**
 * The MySQL/MariaDB change-stream reader: the row binlog through `@vlasky/zongji` (built on
 * mysql2), implementing the CDC engine's `Reader` (shared/contracts/cdc.ts).
 *
 * Owns the streaming loop:
 *   - start: the stored position checked against the server it reaches (./failover.ts), then a
 *     binlog dump (./stream.ts) from `file:pos` (the end of the last committed transaction's
 *     event group; on a first start the server's current binlog end), or by GTID after a
 *     failover, filtered to the captured tables, with backpressure (zongji's connection is
 *     paused while the engine is behind);
 *   - next and decode: event groups (a GTID event or BEGIN up to its XID/COMMIT) as transactions.
 *     A row's `__pos` is its group's prefix (./position.ts: epoch, file index, start offset of
 *     the group, = the GTID event's nextPosition - size) plus an ordinal per (transaction,
 *     table); the resume point after a transaction is its commit event's nextPosition, with the
 *     GTID position, the server identity and the epoch. Rows go to their table (./table.ts,
 *     which also turns a changed TableMap into a `schema` event); TRUNCATE/DROP/RENAME of a
 *     captured table in a QUERY event is a `ddl` event (./ddl.ts); snapshot watermarks are
 *     reported between groups (./watermarks.ts); purged binlogs (error 1236 from the dump) are
 *     a `gap`;
 *   - close: the dump stopped, the catalog connection closed.
 * A transaction with no captured rows delivers no begin/commit: its end is `progress` (rate
 * limited to one per heartbeat interval), so an idle captured table still advances the position.
 * Must never: deliver a row below its table's `next`, or a commit position inside an event group.
 */
import type ZongJi from '@vlasky/zongji';
import type {
  AnyBinlogEvent,
  DeleteRowsEvent,
  GtidEvent,
  MariadbGtidEvent,
  QueryEvent,
  RotateEvent,
  TableMapEvent,
  UpdateRowsEvent,
  WriteRowsEvent,
} from '@vlasky/zongji';
import mysql from 'mysql2/promise';
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
import { SourceError } from '../../../contracts/errors.js';
import type { Batch } from '../../../dataplane/batch.js';
import { binlogFileIndex } from '../../../position/position.js';
import { StreamQueue } from '../../cdc-queue.js';
import { MysqlConnection } from '../connect.js';
import type { TablePlan } from '../introspect.js';
import { RAW_HOOK, RAW_ROW_IMAGES, type TableMapEntry } from '../wire/binlog-rows.js';
import { ddlEvents } from './ddl.js';
import { binlogEnd, type Resume, resumeOn } from './failover.js';
import { addGtid, type GtidSet, parseGtidSet, renderGtidSet } from './gtid-set.js';
import { type BinlogPoint, binlogPosition, groupPrefix, parseBinlogPosition } from './position.js';
import {
  BINLOG_GONE,
  type BinlogFilters,
  binlogFilters,
  installRowImages,
  openZongji,
  startDump,
} from './stream.js';
import { type MysqlCdcCounters, MysqlCdcTable } from './table.js';
import { BinlogWatermarks } from './watermarks.js';

export interface MysqlCdcReaderOptions {
  readonly url: string;
  readonly sourceName?: string;
  readonly connectTimeoutMs?: number;
  readonly heartbeatMs: number;
  readonly clock?: () => number;
  /** `__ingest_ts` of cut batches, ns since the epoch [wall clock]. */
  readonly ingestTsNanos?: () => bigint;
  /**
   * `db.table` of the snapshot watermark table (shared/drivers/mysql/snapshot.ts): its inserted
   * ids are matched against the registered watermarks; never a captured table.
   */
  readonly watermarkTable?: string;
}

/** Reads one source's captured tables from its binlog (see the module comment). */
export class MysqlCdcReader implements Reader {
  readonly positionScheme = 'm';
  /** The binlog keeps no position of ours: a first position is its current end. */
  get keepsPosition(): boolean {
    return false;
  }
  private zongji: ZongJi | undefined;
  private readonly tables = new Map<string, MysqlCdcTable>();
  /** The catalog connection new TableMap columns are described through, opened on first use. */
  private catalog: MysqlConnection | undefined;
  private readonly bySource = new Map<string, MysqlCdcTable>();
  private readonly clock: () => number;
  private readonly ingestTs: () => bigint;
  private readonly log: ReaderLog | undefined;
  private readonly serverId: number;
  // The event queue (index-based) and the stream's state.
  private readonly queue = new StreamQueue<AnyBinlogEvent>();
  private streamError: unknown;
  private readonly events: CdcEvent[] = [];
  private gapDelivered = false;
  // Coordinates.
  private file = '';
  private fileIndex = 0;
  private epoch = 0;
  private server = '';
  private readonly gtids = new Map<string, string>();
  /** MySQL's executed GTID set (uuid:interval text in the position); undefined on MariaDB. */
  private mysqlGtids: GtidSet | undefined;
  /** The open transaction's MySQL `uuid:gno`, added to mysqlGtids at its commit. */
  private txnMysqlGtid: string | undefined;
  private floor: BinlogPoint | undefined;
  /** Set when this start resumes by GTID (failover to another server): the MariaDB GTID position. */
  private resumeGtid: string | undefined;
  /** The stored position a failover resumed from (another server's), for a gap's `from`. */
  private failoverFrom: SourcePosition | undefined;
  private lastProgress = 0;
  // Transaction state: a group opened by a GTID event (or BEGIN), begun for the engine lazily.
  private inGroup = false;
  private begun = false;
  private txn = 0;
  private txnPrefix = '';
  private txnCommitNs = 0n;
  private txnGtid: MariadbGtidEvent | undefined;
  private started = false;
  private closed = false;
  // Snapshot watermarks (`expectWatermark`). `reached`: every event before (file index, pos)
  // has been decoded (advanced between groups only, and at a group's start).
  private reachedFile = 0;
  private reachedPos = 0;
  private readonly marks = new BinlogWatermarks();
  /** Counters tests read. */
  readonly seen: MysqlCdcCounters = {
    keyChanges: 0,
    tableMaps: 0,
    skipped: 0,
    rawEvents: 0,
    zongjiEvents: 0,
  };
  /** How often the binlog connection was paused while the engine was behind. */
  get pauses(): number {
    return this.queue.pauses;
  }
  /** Decode row images with ../wire/binlog-rows.ts (false: through zongji's parse); read by `start`. */
  rawRowImages = RAW_ROW_IMAGES;

  constructor(
    private readonly opts: MysqlCdcReaderOptions,
    captured: readonly CdcTable[],
    plans: ReadonlyMap<string, TablePlan>,
    runtime: CdcRuntime,
  ) {
    if (runtime.serverId === undefined)
      throw new SourceError(
        'CDC_CONFIG',
        `${opts.sourceName ?? 'the source'}: a MySQL cdc source needs cdc.serverId (a replica server id unique among the server's replicas)`,
      );
    this.serverId = runtime.serverId;
    this.clock = opts.clock ?? Date.now;
    this.ingestTs = opts.ingestTsNanos ?? (() => BigInt(Date.now()) * 1_000_000n);
    this.log = runtime.log;
    if (opts.watermarkTable !== undefined) this.setWatermarkTable(opts.watermarkTable);
    for (const t of captured) {
      const plan = plans.get(t.ref.source);
      if (!plan) throw new Error(`mysql cdc: no introspection of ${t.ref.source}`);
      const state = new MysqlCdcTable(t, plan, this.seen);
      this.tables.set(t.ref.target, state);
      this.bySource.set(t.ref.source, state);
    }
  }

  get ended(): boolean {
    return false;
  }

  // -------------------------------------------------------------------------------------------
  // Start

  async initialPosition(signal?: AbortSignal): Promise<SourcePosition> {
    const conn = await this.control();
    try {
      const at = await binlogEnd(conn, signal);
      this.log?.info('first start: capturing from the current binlog end', { file: at.file, pos: at.pos });
      return binlogPosition(at);
    } finally {
      await conn.end().catch(() => undefined);
    }
  }

  async start(from: StartFrom, signal?: AbortSignal): Promise<void> {
    if (this.started) throw new Error('mysql cdc reader: start called twice');
    this.started = true;
    for (const t of this.tables.values()) {
      const next = from.next.get(t.target);
      if (next !== undefined) t.next = next;
    }
    const conn = await this.control();
    let resume: Resume;
    try {
      resume = await resumeOn(conn, from.position, this.log);
    } finally {
      await conn.end().catch(() => undefined);
    }
    this.server = resume.server;
    if (resume.gap !== undefined) {
      this.queueGap(resume.gap, from.position, undefined);
      return;
    }
    if (resume.byGtid !== undefined) {
      this.resumeGtid = resume.byGtid;
      this.failoverFrom = from.position;
    }
    const at = resume.at;
    signal?.throwIfAborted();
    this.file = at.file;
    this.fileIndex = binlogFileIndex(at.file);
    this.epoch = at.epoch;
    this.reachedFile = this.fileIndex;
    this.reachedPos = at.pos;
    // MariaDB's list is domain-server-seq; MySQL's set has uuid:interval entries.
    if (at.gtid.includes(':')) this.mysqlGtids = parseGtidSet(at.gtid);
    else
      for (const part of at.gtid.split(',').filter((s) => s.trim() !== '')) {
        const domain = part.trim().split('-')[0]!;
        this.gtids.set(domain, part.trim());
      }
    this.floor = at;
    await this.startStreaming(at);
  }

  private control(): Promise<mysql.Connection> {
    return mysql.createConnection({
      uri: this.opts.url,
      connectTimeout: this.opts.connectTimeoutMs ?? 10_000,
      supportBigNumbers: true,
      bigNumberStrings: true,
      dateStrings: true,
    });
  }

  private queueGap(reason: string, from: SourcePosition | undefined, to: SourcePosition | undefined): void {
    this.events.push({ kind: 'gap', reason, from, to });
    this.gapDelivered = true;
  }

  private async startStreaming(at: BinlogPoint): Promise<void> {
    if (this.rawRowImages) this.rawRowImages = await installRowImages(this.log);
    const z = await openZongji(this.opts.url, this.opts.connectTimeoutMs, this.log);
    this.zongji = z;
    if (this.rawRowImages)
      (z as unknown as Record<string, unknown>)[RAW_HOOK] = (entry: TableMapEntry): boolean => {
        const t = this.bySource.get(`${entry.parentSchema}.${entry.tableName}`);
        return t !== undefined && typeof t.planFor(entry) !== 'string';
      };
    const from =
      this.resumeGtid !== undefined ? { gtidSet: this.resumeGtid } : { filename: at.file, position: at.pos };
    return startDump(
      z,
      { serverId: this.serverId, from, filters: this.filters(), at },
      (ev) => {
        this.queue.source ??= z.connection ?? undefined;
        this.queue.push(ev);
      },
      (e) => {
        this.streamError ??= e;
        this.queue.notify();
      },
      this.log,
    );
  }

  /** What zongji passes on: the captured tables and the watermark table (./stream.ts). */
  private filters(): BinlogFilters {
    const w = this.marks.table;
    return binlogFilters(w ? [...this.tables.values(), w] : this.tables.values());
  }

  /**
   * Decodes the rows of the snapshot watermark table `db.table` too (its inserted ids are
   * matched against watermarks registered without `at`). Takes effect at once on a running
   * stream (zongji's filters), so it must be called before the first watermark row is written.
   */
  setWatermarkTable(source: string): void {
    if (!this.marks.setTable(source, this.bySource)) return;
    // Re-calling start on a running zongji only replaces its filters.
    if (this.zongji) this.zongji.start({ ...this.filters() } as never);
  }

  /**
   * Registers a snapshot watermark (shared/contracts/cdc.ts): with `at` (binlog coordinates,
   * `binlogAt`), reported once every event group starting before `at` has been delivered; without,
   * when the watermark table's row with this id arrives (`setWatermarkTable`).
   */
  expectWatermark(id: string, at?: SourcePosition): void {
    this.marks.expect(id, at);
    this.queue.notify();
  }

  /** Every event before (file index, pos) has been decoded. */
  private reach(file: number, pos: number): void {
    if (file > this.reachedFile || (file === this.reachedFile && pos > this.reachedPos)) {
      this.reachedFile = file;
      this.reachedPos = pos;
    }
  }

  /** Queues the watermarks the stream has reached, when no transaction is half delivered. */
  private releaseMarks(): void {
    if (this.inGroup && this.begun) return;
    this.marks.release(this.reachedFile, this.reachedPos, this.epoch, this.events);
  }

  // -------------------------------------------------------------------------------------------
  // Events

  async next(waitMs: number, signal?: AbortSignal): Promise<CdcEvent | undefined> {
    if (this.closed) throw new Error('mysql cdc reader: next after close');
    for (const t of this.tables.values()) if (t.swap) t.applySwap();
    this.releaseMarks();
    const queued = this.events.shift();
    if (queued) return queued;
    if (this.gapDelivered) return undefined; // nothing streams after a gap
    const deadline = this.clock() + waitMs;
    for (;;) {
      const ev = this.queue.take();
      if (ev === undefined) {
        if (this.streamError !== undefined) return this.onStreamError(this.streamError);
        this.releaseMarks();
        const mark = this.events.shift();
        if (mark) return mark;
        const left = deadline - this.clock();
        if (left <= 0 || signal?.aborted) return undefined;
        await this.queue.wait(left, signal);
        continue;
      }
      if (ev.getTypeName() === 'TableMap') await this.describeNewColumns(ev as TableMapEvent);
      const out = this.decode(ev);
      this.releaseMarks();
      if (out) return out;
      const more = this.events.shift();
      if (more) return more;
      // A long run of events without anything for the engine (other tables' transactions)
      // must not hold its timers (flush deadlines) past waitMs.
      if (this.clock() >= deadline) return undefined;
    }
  }

  private onStreamError(e: unknown): CdcEvent {
    if ((e as { errno?: number }).errno === BINLOG_GONE && !this.gapDelivered) {
      this.gapDelivered = true;
      const refused = this.resumeGtid !== undefined && this.txn === 0;
      const from = refused ? this.failoverFrom : this.floor ? binlogPosition(this.floor) : undefined;
      return {
        kind: 'gap',
        reason: `the server no longer has the binlog to resume from (${refused ? `GTID ${this.resumeGtid}, after a failover to server ${this.server}` : `${this.floor?.file}:${this.floor?.pos}`}): ${(e as Error).message} (error 1236: binlogs purged past the stored position; raise binlog retention)`,
        from,
        to: undefined,
      };
    }
    const message = e instanceof Error ? e.message : String(e);
    throw new SourceError(
      'SOURCE_CONNECTION_LOST',
      `the binlog connection was lost (${message}); nothing past the last acknowledged position is lost: restart the capture (the CDC task restarts by itself)`,
      e instanceof Error ? { cause: e } : undefined,
    );
  }

  private protocol(what: string): SourceError {
    return new SourceError('SOURCE_PROTOCOL', `the binlog stream sent ${what}; restart the capture`);
  }

  /** One binlog event; returns what the engine sees of it, if anything. */
  private decode(ev: AnyBinlogEvent): CdcEvent | undefined {
    switch (ev.getTypeName()) {
      case 'Rotate': {
        const r = ev as RotateEvent;
        if (r.binlogName && r.binlogName !== this.file) {
          this.file = r.binlogName;
          this.fileIndex = binlogFileIndex(r.binlogName);
        }
        if (!this.inGroup && r.binlogName) this.reach(binlogFileIndex(r.binlogName), Number(r.position));
        return undefined;
      }
      case 'MariadbGtid': {
        const g = ev as MariadbGtidEvent;
        this.openGroup(ev, g);
        return undefined;
      }
      case 'Gtid': {
        this.openGroup(ev, undefined);
        // MySQL 8: immediate_commit_timestamp (microseconds), when binlog-gtid.ts read it.
        const micros = (ev as { commitMicros?: unknown }).commitMicros;
        if (typeof micros === 'bigint') this.txnCommitNs = micros * 1000n;
        // MySQL: `uuid:gno` (`uuid:tag:gno` when tagged), into the executed set at the commit.
        this.mysqlGtids ??= this.gtids.size === 0 ? new Map() : undefined;
        this.txnMysqlGtid = (ev as GtidEvent).gtid;
        return undefined;
      }
      case 'AnonymousGtid':
        this.openGroup(ev, undefined);
        return undefined;
      case 'Query':
        return this.onQuery(ev as QueryEvent);
      case 'Xid':
        return this.closeGroup(ev);
      case 'TableMap':
        return this.onTableMap(ev as TableMapEvent);
      case 'WriteRows':
      case 'UpdateRows':
      case 'DeleteRows':
        return this.onRows(ev as WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent);
      case 'Heartbeat': {
        // The server's position while the dump idles (or after events it skipped).
        const h = ev as AnyBinlogEvent & { binlogName?: string; position?: number | bigint };
        const pos = Number(h.position ?? ev.nextPosition);
        if (!this.inGroup && h.binlogName && pos > 0) this.reach(binlogFileIndex(h.binlogName), pos);
        return undefined;
      }
      default:
        // Format description, GTID list, binlog checkpoint: standalone events between groups.
        if (!this.inGroup && ev.nextPosition > 0) this.reach(this.fileIndex, ev.nextPosition);
        return undefined;
    }
  }

  private openGroup(ev: AnyBinlogEvent, gtid: MariadbGtidEvent | undefined): void {
    const start = BigInt(ev.nextPosition - ev.size);
    this.inGroup = true;
    this.begun = false;
    this.txn++;
    this.txnGtid = gtid;
    this.txnMysqlGtid = undefined;
    this.txnPrefix = groupPrefix(this.epoch, this.fileIndex, start);
    this.txnCommitNs = BigInt(ev.timestamp) * 1_000_000n;
    this.marks.groupOpened();
    // Everything before the group's first event has been decoded.
    this.reach(this.fileIndex, Number(start));
  }

  /** The end of an event group: a commit when it had captured rows, else progress. */
  private closeGroup(ev: AnyBinlogEvent): CdcEvent | undefined {
    const txid = this.txnGtid?.gtid ?? this.txnMysqlGtid;
    // Watermark-table rows of this group: placed at its prefix (after every change before the
    // group, before every change after it), reported once the group has ended.
    this.marks.groupClosed(this.txnPrefix);
    if (this.txnGtid) this.gtids.set(String(this.txnGtid.domainId), this.txnGtid.gtid);
    if (this.txnMysqlGtid && this.mysqlGtids) addGtid(this.mysqlGtids, this.txnMysqlGtid);
    const wasBegun = this.begun;
    this.inGroup = false;
    this.begun = false;
    this.txnGtid = undefined;
    this.txnMysqlGtid = undefined;
    if (ev.nextPosition <= 0) return undefined;
    this.reach(this.fileIndex, ev.nextPosition);
    const point: BinlogPoint = {
      file: this.file,
      pos: ev.nextPosition,
      gtid: this.mysqlGtids ? renderGtidSet(this.mysqlGtids) : [...this.gtids.values()].join(','),
      server: this.server,
      epoch: this.epoch,
    };
    this.floor = point;
    if (wasBegun)
      return {
        kind: 'commit',
        position: binlogPosition(point),
        commitTimeMs: Number(this.txnCommitNs / 1_000_000n),
        ...(txid !== undefined ? { txid } : {}),
      };
    const now = this.clock();
    if (now - this.lastProgress < this.opts.heartbeatMs) return undefined;
    this.lastProgress = now;
    return { kind: 'progress', position: binlogPosition(point) };
  }

  private onQuery(q: QueryEvent): CdcEvent | undefined {
    const text = q.query.trim();
    const upper = text.slice(0, 16).toUpperCase();
    if (upper === 'BEGIN' || upper.startsWith('START TRANSACTION')) {
      if (!this.inGroup) this.openGroup(q, undefined);
      return undefined;
    }
    if (upper === 'COMMIT' || upper === 'ROLLBACK') return this.closeGroup(q);
    // DDL and other statements: a standalone group that ends with this event.
    for (const d of ddlEvents(text, q.schema, this.bySource)) this.events.push(d);
    if (this.inGroup && !this.begun) {
      const p = this.closeGroup(q);
      if (p) this.events.push(p);
    } else if (!this.inGroup && q.nextPosition > 0) {
      this.reach(this.fileIndex, q.nextPosition);
      this.floor = {
        ...(this.floor ?? { gtid: '', server: this.server, epoch: this.epoch }),
        file: this.file,
        pos: q.nextPosition,
      };
    }
    return this.events.shift();
  }

  private onTableMap(ev: TableMapEvent): CdcEvent | undefined {
    this.seen.tableMaps++;
    return this.bySource.get(`${ev.schemaName}.${ev.tableName}`)?.onTableMap(ev);
  }

  /** Before a TableMap is decoded: the catalog's description of columns it names first (./table.ts). */
  private async describeNewColumns(ev: TableMapEvent): Promise<void> {
    const t = this.bySource.get(`${ev.schemaName}.${ev.tableName}`);
    if (!t) return;
    await t.describeNewColumns(
      ev,
      () =>
        (this.catalog ??= new MysqlConnection({
          url: this.opts.url,
          sourceName: this.opts.sourceName,
          connectTimeoutMs: this.opts.connectTimeoutMs,
          applicationName: 'tidemark-cdc',
        })),
      this.log,
    );
  }

  private onRows(ev: WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent): CdcEvent | undefined {
    const entry = ev.tableMap[ev.tableId];
    if (!entry) return undefined;
    const t = this.bySource.get(`${entry.parentSchema}.${entry.tableName}`);
    if (!t) {
      if (this.marks.isTable(entry.parentSchema, entry.tableName)) this.marks.onRows(ev);
      return undefined;
    }
    if (!this.inGroup) throw this.protocol(`rows of ${t.source} outside a transaction`);
    if (t.swap) {
      // The engine has not cut the old schema's rows: it must before asking for more.
      throw new Error(`mysql cdc reader: ${t.target} has rows in its old schema after a schema event`);
    }
    t.enterTxn(this.txn);
    const before = t.encoder.dataBytes;
    const count = t.append(ev, this.txnPrefix, this.txnCommitNs);
    if (count === 0) return undefined;
    const events: CdcEvent[] = [];
    if (!this.begun) {
      this.begun = true;
      events.push({ kind: 'begin' });
    }
    events.push({ kind: 'rows', table: t.target, count, bytes: t.encoder.dataBytes - before });
    const first = events.shift()!;
    this.events.unshift(...events);
    return first;
  }

  // -------------------------------------------------------------------------------------------
  // Batches, acknowledgement, close

  pending(table: string): PendingRows {
    return this.state(table).pending();
  }

  cut(table: string): Batch | undefined {
    return this.state(table).cut(this.ingestTs);
  }

  private state(table: string): MysqlCdcTable {
    const t = this.tables.get(table);
    if (!t) throw new Error(`mysql cdc reader: ${table} is not a captured table`);
    return t;
  }

  /** MySQL keeps no replica position on the server: the engine's state is the only record. */
  async setConfirmed(position: SourcePosition): Promise<void> {
    parseBinlogPosition(position);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.catalog?.close().catch(() => undefined);
    const z = this.zongji;
    this.zongji = undefined;
    if (z) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 2_000);
        z.once('stopped', () => {
          clearTimeout(timer);
          resolve();
        });
        try {
          z.stop();
        } catch {
          clearTimeout(timer);
          resolve();
        }
      });
    }
  }
}
