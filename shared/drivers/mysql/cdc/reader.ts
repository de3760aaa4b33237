/**
 * The MySQL/MariaDB change-stream reader: the row binlog through `@vlasky/zongji` (built on
 * mysql2), implementing the CDC engine's `Reader` (shared/contracts/cdc.ts).
 *
 * Owns:
 *   - the stream: a binlog dump from `file:pos` (the end of the last committed transaction's
 *     event group; on a first start the server's current binlog end), filtered to the captured
 *     tables (`includeSchema`), with backpressure (zongji's connection is paused while the
 *     engine is behind);
 *   - positions: a row's `__pos` is `mysqlPosition(epoch, file index, start offset of its
 *     transaction's event group (the GTID event's, = nextPosition - size), ordinal per
 *     (transaction, table))`; the resume point after a transaction is its commit event's
 *     nextPosition, with the GTID position (MariaDB `domain-server-seq` per domain), the
 *     server identity and the epoch, as JSON (`MYSQL_POSITION_SCHEME`);
 *   - decoding write/update/delete rows straight into per-table Arrow writers: the row images
 *     themselves (../wire/binlog-rows.ts, zongji handing over the raw row area) for tables of the types
 *     it decodes, zongji's parsed rows through the incremental driver's read plans (./values.ts)
 *     otherwise, with identical values; an update whose before-image key differs bytewise from
 *     its after-image key as a delete plus an insert;
 *   - TableMap events: a changed column list (names and types; binlog_row_metadata=FULL gives
 *     the names) is a `schema` event through compareSchemas; TRUNCATE/DROP/RENAME of a
 *     captured table in a QUERY event is a `ddl` event;
 *   - purged binlogs (error 1236 from the dump) are a `gap`.
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
import { SourceError, TidemarkError } from '../../../contracts/errors.js';
import { type Batch, newBatch, type WriteMode } from '../../../dataplane/batch.js';
import { BatchEncoder, type ColumnWriter } from '../../../dataplane/encoder.js';
import { Op, type OpCode } from '../../../dataplane/metadata.js';
import type { Schema } from '../../../dataplane/schema.js';
import { compareSchemas } from '../../../dataplane/schema-rules.js';
import { binlogFileIndex, mysqlPosition } from '../../../position/position.js';
import { StreamQueue } from '../../cdc-queue.js';
import { streamSchema } from '../../cdc-schema.js';
import { MysqlConnection } from '../connect.js';
import { type ColumnInfo, catalogColumns, type TablePlan } from '../introspect.js';
import { type InfoColumn, mapColumn } from '../types.js';
import { GTID_MICROS, installGtidCommitMicros } from '../wire/binlog-gtid.js';
import {
  compile,
  decodeImage,
  installRawRowImages,
  keyDiffers,
  nullBitmapSize,
  RAW_HOOK,
  RAW_ROW_IMAGES,
  RawRows,
  type RowPlan,
  type TableMapEntry,
} from '../wire/binlog-rows.js';
import { addGtid, type GtidSet, parseGtidSet, renderGtidSet } from './gtid-set.js';
import { type BinlogAppender, binlogAppenderFor, keyBytes } from './values.js';

/** The scheme of MySQL resume positions (`SourcePosition.scheme`): a value is JSON. */
export const MYSQL_POSITION_SCHEME = 'mysql';

/** A MySQL resume point: after the transaction that ended at `file:pos`. */
export interface BinlogPoint {
  readonly file: string;
  readonly pos: number;
  /** MariaDB gtid_slave_pos-style `domain-server-seq` list (or MySQL's set), '' when unknown. */
  readonly gtid: string;
  /** The server the coordinates belong to (`@@server_uuid`, or `@@server_id` on MariaDB). */
  readonly server: string;
  readonly epoch: number;
}

export function binlogPosition(p: BinlogPoint): SourcePosition {
  return {
    scheme: MYSQL_POSITION_SCHEME,
    value: JSON.stringify({ file: p.file, pos: p.pos, gtid: p.gtid, server: p.server, epoch: p.epoch }),
    display: `${p.file}:${p.pos}`,
  };
}

/**
 * A snapshot watermark's `at` in this reader's scheme: the binlog coordinates `file:pos` (a
 * consistent snapshot's Binlog_snapshot_file/position), for `Reader.expectWatermark`.
 */
export function binlogAt(file: string, pos: number): SourcePosition {
  return { scheme: MYSQL_POSITION_SCHEME, value: JSON.stringify({ file, pos }), display: `${file}:${pos}` };
}

export function parseBinlogPosition(p: SourcePosition): BinlogPoint {
  if (p.scheme !== MYSQL_POSITION_SCHEME)
    throw new TidemarkError(
      'POSITION_SCHEME',
      `the stored position is of scheme "${p.scheme}", not a MySQL binlog position: it was written by another kind of source; reset the source's state`,
    );
  let v: Partial<BinlogPoint>;
  try {
    v = JSON.parse(p.value) as Partial<BinlogPoint>;
  } catch (e) {
    throw new TidemarkError('POSITION_SCHEME', `the stored MySQL position is not JSON: ${p.value}`, {
      cause: e,
    });
  }
  if (typeof v.file !== 'string' || typeof v.pos !== 'number')
    throw new TidemarkError('POSITION_SCHEME', `the stored MySQL position has no file and pos: ${p.value}`);
  return {
    file: v.file,
    pos: v.pos,
    gtid: typeof v.gtid === 'string' ? v.gtid : '',
    server: typeof v.server === 'string' ? v.server : '',
    epoch: typeof v.epoch === 'number' ? v.epoch : 0,
  };
}

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

interface TableState {
  readonly target: string;
  readonly source: string;
  readonly database: string;
  readonly table: string;
  readonly writeMode: WriteMode;
  readonly excluded: ReadonlySet<string>;
  schema: Schema;
  encoder: BatchEncoder;
  writers: ColumnWriter[];
  /** Per schema column: its facts and appender. */
  infos: ColumnInfo[];
  appenders: BinlogAppender[];
  /** Every column of the table as last seen (excluded ones too), for the next TableMap. */
  all: ColumnInfo[];
  /** names + logical types of `all`: what a TableMap is compared with. */
  signature: string;
  /** Rows whose `__pos` is below this are durable already. */
  next: string;
  ord: number;
  ordTxn: number;
  lastPos: string;
  swap: { schema: Schema; infos: ColumnInfo[]; all: ColumnInfo[] } | undefined;
  /** The last TableMap's table id, types, names and metadata, as compared. */
  mapKey: string;
  /** The row-image plan of the last TableMap entry under `infos` (../wire/binlog-rows.ts). */
  rowPlan: { entry: TableMapEntry; infos: ColumnInfo[]; plan: RowPlan | string } | undefined;
  /**
   * The catalog's description of the columns the next TableMap names for the first time, read
   * just before it is decoded (`describeNewColumns`); empty otherwise.
   */
  described: ReadonlyMap<string, ColumnInfo>;
}

/** ER_MASTER_FATAL_ERROR_READING_BINLOG: the requested binlog (or GTID state) is gone. */
const BINLOG_GONE = 1236;
const SPATIAL =
  /^(geometry|point|linestring|polygon|multipoint|multilinestring|multipolygon|geometrycollection|geomcollection)\b/i;
const PREFIX_LENGTH = 33; // 'm' + epoch 8 + file 8 + offset 16

/** Reads one source's captured tables from its binlog (see the module comment). */
export class MysqlCdcReader implements Reader {
  readonly positionScheme = 'm';
  /** The binlog keeps no position of ours: a first position is its current end. */
  get keepsPosition(): boolean {
    return false;
  }
  private zongji: ZongJi | undefined;
  private readonly tables = new Map<string, TableState>();
  /** The catalog connection `describeNewColumns` reads through, opened on first use. */
  private catalog: MysqlConnection | undefined;
  private readonly bySource = new Map<string, TableState>();
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
  /** Watermarks with an `at`: reported once `reached` is at or past it. */
  private readonly atMarks = new Map<string, { readonly file: number; readonly pos: number }>();
  /** Watermarks without `at`: ids of watermark-table rows not seen yet. */
  private readonly tableMarks = new Set<string>();
  /** Registered ids the open group inserted into the watermark table. */
  private txnMarks: string[] = [];
  /** Watermark events ready to be queued (the group that carried them has ended). */
  private readonly readyMarks: CdcEvent[] = [];
  private watermarkTable: { readonly database: string; readonly table: string } | undefined;
  /** Counters tests read. */
  readonly seen = { keyChanges: 0, tableMaps: 0, skipped: 0, rawEvents: 0, zongjiEvents: 0 };
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
      const names = new Set(t.schema.columns.map((c) => c.name));
      const excluded = new Set(plan.columns.filter((c) => !names.has(c.name)).map((c) => c.name));
      const infos = t.schema.columns.map((c) => plan.columns.find((p) => p.name === c.name)!);
      const spatial = infos.find((c) => SPATIAL.test(c.sourceType));
      if (spatial)
        throw new SourceError(
          'CDC_UNSUPPORTED_TYPE',
          `${t.ref.source}.${spatial.name}: the binlog client decodes spatial values into coordinates without their SRID, so CDC cannot store the bytes the incremental path stores; exclude the column (tables[].exclude) or sync the table incrementally`,
        );
      const dot = t.ref.source.indexOf('.');
      const state: TableState = {
        target: t.ref.target,
        source: t.ref.source,
        database: t.ref.source.slice(0, dot),
        table: t.ref.source.slice(dot + 1),
        writeMode: t.writeMode,
        excluded,
        schema: t.schema,
        encoder: new BatchEncoder(t.schema, { phase: 'stream' }),
        writers: [],
        infos,
        appenders: [],
        all: [...plan.columns],
        signature: signatureOf(plan.columns),
        next: '',
        ord: 0,
        ordTxn: -1,
        lastPos: '',
        swap: undefined,
        mapKey: '',
        rowPlan: undefined,
        described: new Map(),
      };
      state.writers = writersOf(state.encoder);
      state.appenders = appendersOf(infos, t.ref.source);
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
      const server = await serverIdentity(conn);
      const status = await binlogStatus(conn);
      // The GTID position AT that file:pos, not read separately (a commit in between would
      // make them disagree): MySQL reports it with the status, MariaDB computes it.
      const [g] =
        status.executedGtidSet !== undefined
          ? [[{ g: status.executedGtidSet }]]
          : await conn
              .query('SELECT BINLOG_GTID_POS(?, ?) AS g', [status.file, status.pos])
              .catch(() => [[{ g: '' }]]);
      signal?.throwIfAborted();
      const gtid = String((g as { g: unknown }[])[0]?.g ?? '');
      const at: BinlogPoint = { file: status.file, pos: status.pos, gtid, server, epoch: 0 };
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
    let at: BinlogPoint;
    try {
      this.server = await serverIdentity(conn);
      at = parseBinlogPosition(from.position);
      const [g] = await conn.query('SELECT @@GLOBAL.gtid_binlog_pos AS g').catch(() => [[]]);
      const current = (g as { g?: unknown }[])[0]?.g;
      if (at.server !== '' && at.server !== this.server) {
        // Another server: its file:pos mean nothing here, but its binlog may hold the stored
        // GTID position (a promoted replica with log_slave_updates). Then resume by GTID in a
        // new coordinate epoch, so every __pos from here sorts after every earlier one.
        const why = failoverRefusal(at.gtid, typeof current === 'string' ? current : '');
        if (why !== undefined) {
          this.queueGap(
            `the stored binlog position belongs to server ${at.server}, but the source is now server ${this.server} (failover or a replaced server): its binlog coordinates do not apply, and it cannot resume by GTID (${why})`,
            from.position,
            undefined,
          );
          return;
        }
        const to = { server: this.server, gtid: at.gtid, epoch: at.epoch + 1 };
        this.log?.warn('the binlog coordinates changed: resuming by GTID on another server in a new epoch', {
          from: { server: at.server, file: at.file, pos: at.pos, gtid: at.gtid, epoch: at.epoch },
          to,
          epoch: to.epoch,
        });
        this.resumeGtid = at.gtid;
        this.failoverFrom = from.position;
        at = { ...at, server: this.server, epoch: to.epoch };
      }
      const reset =
        this.resumeGtid === undefined && typeof current === 'string'
          ? gtidWentBack(at.gtid, current)
          : undefined;
      if (reset) {
        this.queueGap(
          `the server's binlog GTID position ${current || '(empty)'} is behind the stored one (${reset}): its binlogs were reset (RESET MASTER) or it is another server, so the stored file:pos does not apply`,
          from.position,
          undefined,
        );
        return;
      }
    } finally {
      await conn.end().catch(() => undefined);
    }
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
    await this.startStreaming(at, from.position);
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

  private async startStreaming(at: BinlogPoint, stored: SourcePosition | undefined): Promise<void> {
    if (this.rawRowImages) {
      // The overrides reach zongji's own files (import.meta.resolve): a bundle (the Lambda and
      // CDC task builds, CommonJS) has neither, and then zongji's own row parse serves (exact,
      // slower).
      try {
        await installRawRowImages();
      } catch (e) {
        this.rawRowImages = false;
        this.log?.warn('the fast row-image decoder is unavailable; zongji parses the rows (exact, slower)', {
          error: e,
        });
      }
    }
    // Loaded here, not at import: zongji (and the mysql2 it loads from disk) costs every other
    // run of the CLI tens of milliseconds of start-up.
    const { default: ZongJiClass } = await import('@vlasky/zongji');
    const z = new ZongJiClass({
      uri: this.opts.url,
      connectTimeout: this.opts.connectTimeoutMs ?? 10_000,
      dateStrings: true,
      timezone: 'Z',
      jsonStrings: true,
      supportBigNumbers: true,
      bigNumberStrings: true,
    } as never);
    this.zongji = z;
    try {
      installGtidCommitMicros(z);
    } catch (e) {
      this.log?.warn('MySQL 8 commit microseconds are unavailable; __commit_ts has seconds', { error: e });
    }
    if (this.rawRowImages)
      (z as unknown as Record<string, unknown>)[RAW_HOOK] = (entry: TableMapEntry): boolean => {
        const t = this.bySource.get(`${entry.parentSchema}.${entry.tableName}`);
        return t !== undefined && typeof this.planFor(t, entry) !== 'string';
      };
    return new Promise<void>((resolve, reject) => {
      let ready = false;
      z.on('binlog', (ev: AnyBinlogEvent) => {
        // MySQL 8: the commit micros binlog-gtid.ts read from this event's packet.
        const micros = (z as unknown as Record<string, unknown>)[GTID_MICROS];
        if (typeof micros === 'bigint' && ev.getTypeName() === 'Gtid')
          (ev as { commitMicros?: bigint }).commitMicros = micros;
        this.queue.source ??= z.connection ?? undefined;
        this.queue.push(ev);
      });
      z.on('error', (e: Error) => {
        if (!ready && (e as { errno?: number }).errno !== BINLOG_GONE) {
          reject(e);
          return;
        }
        this.streamError ??= e;
        this.queue.notify();
        // A dump refused at once (purged binlogs) never gets ready: the gap is the answer.
        resolve();
      });
      z.on('ready', () => {
        ready = true;
        this.log?.info('binlog streaming', { file: at.file, pos: at.pos, serverId: this.serverId });
        resolve();
      });
      z.start({
        serverId: this.serverId,
        // By GTID (MariaDB @slave_connect_state: the server ignores filename and position) after
        // a failover, else by the stored file:pos.
        ...(this.resumeGtid !== undefined
          ? { gtidSet: this.resumeGtid }
          : { filename: at.file, position: at.pos }),
        ...this.filters(),
      });
      void stored;
    });
  }

  /**
   * What zongji passes on: the captured tables (and the watermark table), and every event that
   * moves the position between groups (format, GTID list, checkpoint, heartbeat), so a snapshot
   * watermark at the binlog end is reported on an idle server.
   */
  private filters(): { includeSchema: Record<string, string[]>; includeEvents: string[] } {
    const include: Record<string, string[]> = {};
    const add = (database: string, table: string) => {
      const list = include[database] ?? [];
      if (!list.includes(table)) list.push(table);
      include[database] = list;
    };
    for (const t of this.tables.values()) add(t.database, t.table);
    if (this.watermarkTable) add(this.watermarkTable.database, this.watermarkTable.table);
    return {
      includeSchema: include,
      includeEvents: [
        'rotate',
        'tablemap',
        'writerows',
        'updaterows',
        'deleterows',
        'xid',
        'query',
        'mariadbgtid',
        'gtid',
        'anonymousgtid',
        'heartbeat',
        'format',
        'mariadbgtidlist',
        'binlogcheckpoint',
        'previousgtids',
        'unknown',
      ],
    };
  }

  /**
   * Decodes the rows of the snapshot watermark table `db.table` too (its inserted ids are
   * matched against watermarks registered without `at`). Takes effect at once on a running
   * stream (zongji's filters), so it must be called before the first watermark row is written.
   */
  setWatermarkTable(source: string): void {
    const dot = source.indexOf('.');
    if (dot <= 0 || dot === source.length - 1)
      throw new SourceError(
        'CDC_CONFIG',
        `the snapshot watermark table "${source}" must be written as database.table (e.g. tidemark.watermarks)`,
      );
    if (this.bySource.has(source))
      throw new SourceError(
        'CDC_CONFIG',
        `the snapshot watermark table ${source} is a captured table; give the watermarks a table of their own`,
      );
    const next = { database: source.slice(0, dot), table: source.slice(dot + 1) };
    const w = this.watermarkTable;
    if (w && w.database === next.database && w.table === next.table) return;
    this.watermarkTable = next;
    // Re-calling start on a running zongji only replaces its filters.
    if (this.zongji) this.zongji.start({ ...this.filters() } as never);
  }

  /**
   * Registers a snapshot watermark (shared/contracts/cdc.ts): with `at` (binlog coordinates,
   * `binlogAt`), reported once every event group starting before `at` has been delivered; without,
   * when the watermark table's row with this id arrives (`setWatermarkTable`).
   */
  expectWatermark(id: string, at?: SourcePosition): void {
    if (at !== undefined) {
      const p = parseBinlogPosition(at);
      this.atMarks.set(id, { file: binlogFileIndex(p.file), pos: p.pos });
    } else {
      if (!this.watermarkTable)
        throw new SourceError(
          'CDC_SNAPSHOT_NEEDS_WATERMARK_TABLE',
          `watermark ${id} has no binlog position and the reader watches no watermark table (setWatermarkTable)`,
        );
      this.tableMarks.add(id);
    }
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
    if (this.readyMarks.length > 0) this.events.push(...this.readyMarks.splice(0));
    if (this.atMarks.size === 0) return;
    for (const [id, m] of this.atMarks) {
      if (m.file > this.reachedFile || (m.file === this.reachedFile && m.pos > this.reachedPos)) continue;
      this.atMarks.delete(id);
      const rowsPos = mysqlPosition(this.epoch, m.file, BigInt(m.pos) - 1n, 0).slice(0, PREFIX_LENGTH);
      this.events.push({ kind: 'watermark', id, rowsPos });
    }
  }

  // -------------------------------------------------------------------------------------------
  // Events

  async next(waitMs: number, signal?: AbortSignal): Promise<CdcEvent | undefined> {
    if (this.closed) throw new Error('mysql cdc reader: next after close');
    for (const t of this.tables.values()) if (t.swap) this.applySwap(t);
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
    this.txnPrefix = mysqlPosition(this.epoch, this.fileIndex, start, 0).slice(0, PREFIX_LENGTH);
    this.txnCommitNs = BigInt(ev.timestamp) * 1_000_000n;
    this.txnMarks = [];
    // Everything before the group's first event has been decoded.
    this.reach(this.fileIndex, Number(start));
  }

  /** The end of an event group: a commit when it had captured rows, else progress. */
  private closeGroup(ev: AnyBinlogEvent): CdcEvent | undefined {
    const txid = this.txnGtid?.gtid ?? this.txnMysqlGtid;
    // Watermark-table rows of this group: placed at its prefix (after every change before the
    // group, before every change after it), reported once the group has ended.
    for (const id of this.txnMarks) this.readyMarks.push({ kind: 'watermark', id, rowsPos: this.txnPrefix });
    this.txnMarks = [];
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
    const ddl = this.destructive(text, q.schema);
    for (const d of ddl) this.events.push(d);
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

  /** TRUNCATE, DROP and RENAME of captured tables named in `sql` (default database `schema`). */
  private destructive(sql: string, schema: string): CdcEvent[] {
    const out: CdcEvent[] = [];
    for (const hit of destructiveTargets(sql, schema)) {
      const t = this.bySource.get(hit.table);
      if (t)
        out.push({
          kind: 'ddl',
          ddl: { source: 'mysql', kind: hit.kind, table: t.target, detail: sql.slice(0, 500) },
        });
    }
    return out;
  }

  // -------------------------------------------------------------------------------------------
  // Table maps and schemas

  private onTableMap(ev: TableMapEvent): CdcEvent | undefined {
    this.seen.tableMaps++;
    const t = this.bySource.get(`${ev.schemaName}.${ev.tableName}`);
    if (!t) return undefined;
    // The same table id, types and names as the last TableMap: nothing changed (the common
    // case, one TableMap per transaction), without mapping every column again.
    const key = `${ev.tableId}|${ev.columnTypes.join(',')}|${(ev.columnNames ?? []).join('\u0000')}|${JSON.stringify(ev.columnsMetadata)}`;
    if (key === t.mapKey) return undefined;
    const entry = ev.tableMap[ev.tableId];
    const cols = entry?.columnSchemas;
    if (!ev.hasSelfDescribingMetadata())
      throw new SourceError(
        'CDC_BINLOG_ROW_METADATA',
        `${t.source}: the binlog's TableMap carries no column names (binlog_row_metadata is not FULL), so a row written before an ALTER TABLE would decode under the wrong columns; SET GLOBAL binlog_row_metadata = FULL (and in the server's configuration), then restart the capture`,
      );
    if (!cols || cols.length !== ev.columnCount) return undefined;
    const prior = t.swap?.all ?? t.all;
    const all = cols.map((c): ColumnInfo => {
      const before = prior.find((p) => p.name === c.COLUMN_NAME) ?? t.described.get(c.COLUMN_NAME);
      const info = columnFromMap(c, before);
      return before && sameShape(before, info) ? before : info;
    });
    const signature = signatureOf(all);
    t.mapKey = key;
    if (signature === (t.swap ? signatureOf(t.swap.all) : t.signature)) return undefined;
    const kept = all.filter((c) => !t.excluded.has(c.name));
    const old = t.swap?.schema ?? t.schema;
    const schema = streamSchema(old, kept);
    t.signature = signature;
    const changes = compareSchemas(old, schema);
    // No change the rules see (the hash would not tell a source-type change, which they do).
    if (changes.length === 0) {
      // Same lake schema (a source-type-only change or a column left out): new facts, same encoder.
      t.all = all;
      if (!t.swap) {
        t.infos = t.schema.columns.map(
          (c) => kept.find((k) => k.name === c.name) ?? t.infos.find((i) => i.name === c.name)!,
        );
        t.appenders = appendersOf(t.infos, t.source);
      }
      return undefined;
    }
    t.swap = { schema, infos: kept, all };
    if (t.encoder.rowCount === 0) this.applySwap(t);
    return { kind: 'schema', table: t.target, schema, changes };
  }

  /**
   * A TableMap naming columns the table did not have: their description is the catalog's, read
   * now, wherever it reads the same way as the binlog's (`sameShape`; onTableMap decides). The
   * binlog's own says less than the catalog: `int` for `int(11)`, `longtext` for MariaDB's
   * `json`, fixed `binary(16)` for `uuid`; a column described from it would not be the column
   * the next start introspects (another source type, for UUID/INET another lake type), and its
   * schema hash would not match. The catalog may have moved on since this point of the log: a
   * column it no longer has, or has with another shape, keeps the binlog's description.
   */
  private async describeNewColumns(ev: TableMapEvent): Promise<void> {
    const t = this.bySource.get(`${ev.schemaName}.${ev.tableName}`);
    if (!t) return;
    const prior = t.swap?.all ?? t.all;
    const names = ev.columnNames ?? [];
    // The common case, one TableMap per transaction naming the same columns: no set, no query.
    if (names.length === prior.length && names.every((n, i) => prior[i]!.name === n)) {
      if (t.described.size > 0) t.described = new Map();
      return;
    }
    const known = new Set(prior.map((c) => c.name));
    const fresh = new Set(names.filter((n) => !known.has(n)));
    t.described = new Map();
    if (fresh.size === 0) return;
    try {
      this.catalog ??= new MysqlConnection({
        url: this.opts.url,
        sourceName: this.opts.sourceName,
        connectTimeoutMs: this.opts.connectTimeoutMs,
        applicationName: 'tidemark-cdc',
      });
      const columns = await catalogColumns(this.catalog, t.source);
      t.described = new Map(columns.filter((c) => fresh.has(c.name)).map((c) => [c.name, c]));
    } catch (e) {
      this.log?.warn(
        `${t.source}: reading the catalog's description of new columns failed; the binlog's is used`,
        {
          error: e instanceof Error ? e.message : String(e),
          columns: [...fresh],
        },
      );
    }
  }

  private applySwap(t: TableState): void {
    if (t.encoder.rowCount > 0 || !t.swap) return;
    const { schema, infos, all } = t.swap;
    t.swap = undefined;
    t.schema = schema;
    t.infos = infos;
    t.all = all;
    t.signature = signatureOf(all);
    t.encoder = new BatchEncoder(schema, { phase: 'stream' });
    t.writers = writersOf(t.encoder);
    t.appenders = appendersOf(infos, t.source);
  }

  // -------------------------------------------------------------------------------------------
  // Rows

  private onRows(ev: WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent): CdcEvent | undefined {
    const entry = ev.tableMap[ev.tableId];
    if (!entry) return undefined;
    const t = this.bySource.get(`${entry.parentSchema}.${entry.tableName}`);
    if (!t) {
      const w = this.watermarkTable;
      if (w && entry.parentSchema === w.database && entry.tableName === w.table) this.onWatermarkRows(ev);
      return undefined;
    }
    if (!this.inGroup) throw this.protocol(`rows of ${t.source} outside a transaction`);
    if (t.swap) {
      // The engine has not cut the old schema's rows: it must before asking for more.
      throw new Error(`mysql cdc reader: ${t.target} has rows in its old schema after a schema event`);
    }
    if (t.ordTxn !== this.txn) {
      t.ordTxn = this.txn;
      t.ord = 0;
    }
    const before = t.encoder.dataBytes;
    let count = 0;
    const name: string = ev.getTypeName();
    let rows: unknown[] = ev.rows;
    const raw = rows.length === 1 ? rows[0] : undefined;
    if (raw instanceof RawRows) {
      const plan = this.planFor(t, raw.entry);
      if (typeof plan !== 'string') {
        this.seen.rawEvents++;
        count = this.emitRaw(t, name, raw, plan);
        rows = [];
      } else rows = raw.reparse();
    }
    if (rows.length > 0) this.seen.zongjiEvents++;
    if (name === 'WriteRows') {
      for (const row of rows as Record<string, unknown>[]) count += this.emit(t, Op.create, row);
    } else if (name === 'DeleteRows') {
      for (const row of rows as Record<string, unknown>[]) count += this.emit(t, Op.delete, row);
    } else {
      for (const { before: old, after } of rows as UpdateRowsEvent['rows']) {
        if (keyChanged(t, old, after)) {
          this.seen.keyChanges++;
          count += this.emit(t, Op.delete, old);
          count += this.emit(t, Op.create, after);
        } else count += this.emit(t, Op.update, after);
      }
    }
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

  /** Inserted watermark-table rows: a registered id is a watermark at this group's prefix. */
  private onWatermarkRows(ev: WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent): void {
    if (ev.getTypeName() !== 'WriteRows' || this.tableMarks.size === 0) return;
    let rows: unknown[] = ev.rows;
    const raw = rows.length === 1 ? rows[0] : undefined;
    if (raw instanceof RawRows) rows = raw.reparse();
    for (const row of rows as Record<string, unknown>[]) {
      const v = row.id;
      const id = Buffer.isBuffer(v) ? v.toString('utf8') : String(v);
      if (this.tableMarks.delete(id)) this.txnMarks.push(id);
    }
  }

  /** The row-image plan of `entry` under the table's current columns (a string: not decodable). */
  private planFor(t: TableState, entry: TableMapEntry): RowPlan | string {
    const c = t.rowPlan;
    if (c !== undefined && c.entry === entry && c.infos === t.infos) return c.plan;
    const plan = compile(entry, t.infos, t.appenders, t.schema.primaryKey);
    t.rowPlan = { entry, infos: t.infos, plan };
    return plan;
  }

  /** Whether ordinal `o` of this transaction is at or past the table's `next` (else counted skipped). */
  private admit(t: TableState, o: number): boolean {
    // `next` below the transaction's prefix: every ordinal of it is past `next`.
    if (t.next < this.txnPrefix) return true;
    if (this.txnPrefix + o.toString(16).padStart(8, '0') < t.next) {
      this.seen.skipped++;
      return false;
    }
    return true;
  }

  /** The rows of a raw rows event, decoded straight into the writers (as `emit` would). */
  private emitRaw(t: TableState, name: string, raw: RawRows, plan: RowPlan): number {
    const { buf, end, bitmap } = raw;
    const nb1 = nullBitmapSize(bitmap);
    const writers = t.writers;
    const enc = t.encoder;
    const prefix = this.txnPrefix;
    const commit = this.txnCommitNs;
    let off = raw.start;
    let count = 0;
    let last = -1;
    const one = (op: OpCode, at: number, bm: Buffer, nb: number): void => {
      const o = t.ord++;
      if (!this.admit(t, o)) return;
      decodeImage(plan, buf, at, bm, nb, writers, undefined, t.source);
      enc.appendMetaOrdinal(op, prefix, o, commit, false);
      last = o;
      count++;
    };
    if (name !== 'UpdateRows') {
      const op = name === 'WriteRows' ? Op.create : Op.delete;
      while (off < end) {
        const o = t.ord;
        if (t.next >= prefix && !this.admit(t, o)) {
          t.ord++;
          off = decodeImage(plan, buf, off, bitmap, nb1, undefined);
          continue;
        }
        t.ord++;
        off = decodeImage(plan, buf, off, bitmap, nb1, writers, undefined, t.source);
        enc.appendMetaOrdinal(op, prefix, o, commit, false);
        last = o;
        count++;
      }
    } else {
      const bitmap2 = raw.bitmap2!;
      const nb2 = nullBitmapSize(bitmap2);
      const n = plan.cols.length * 2;
      const sa = new Int32Array(n);
      const sb = new Int32Array(n);
      while (off < end) {
        const after = decodeImage(plan, buf, off, bitmap, nb1, undefined, sa);
        const next = decodeImage(plan, buf, after, bitmap2, nb2, undefined, sb);
        if (keyDiffers(plan, buf, sa, sb)) {
          this.seen.keyChanges++;
          one(Op.delete, off, bitmap, nb1);
          one(Op.create, after, bitmap2, nb2);
        } else one(Op.update, after, bitmap2, nb2);
        off = next;
      }
    }
    if (last >= 0) t.lastPos = prefix + last.toString(16).padStart(8, '0');
    return count;
  }

  /** Appends one row; 0 when it is below the table's `next`. */
  private emit(t: TableState, op: OpCode, row: Record<string, unknown>): number {
    const o = t.ord++;
    const pos = this.txnPrefix + o.toString(16).padStart(8, '0');
    if (pos < t.next) {
      this.seen.skipped++;
      return 0;
    }
    t.lastPos = pos;
    const cols = t.schema.columns;
    for (let j = 0; j < cols.length; j++) {
      const c = cols[j]!.name;
      const v = row[c];
      const w = t.writers[j]!;
      if (v === null || (v === undefined && !(c in row))) w.appendNull();
      else t.appenders[j]!(w, v);
    }
    t.encoder.appendMetaOrdinal(op, this.txnPrefix, o, this.txnCommitNs, false);
    return 1;
  }

  pending(table: string): PendingRows {
    const t = this.state(table);
    return { rows: t.encoder.rowCount, bytes: t.encoder.dataBytes };
  }

  cut(table: string): Batch | undefined {
    const t = this.state(table);
    const enc = t.encoder;
    if (enc.rowCount === 0) return undefined;
    const record = enc.finish(this.ingestTs());
    t.writers = writersOf(enc);
    return newBatch({ table: t.target, record, watermark: t.lastPos, writeMode: t.writeMode });
  }

  private state(table: string): TableState {
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

/** The server's identity in positions: MySQL's @@server_uuid; MariaDB has none, its @@server_id. */
async function serverIdentity(conn: mysql.Connection): Promise<string> {
  const [rows] = await conn
    .query('SELECT @@server_uuid AS id')
    .catch(() => conn.query('SELECT @@server_id AS id'));
  return String((rows as { id: unknown }[])[0]?.id ?? '');
}
/** `SHOW BINARY LOG STATUS` (MySQL 8.2+) or `SHOW MASTER STATUS`. */
async function binlogStatus(
  conn: mysql.Connection,
): Promise<{ file: string; pos: number; executedGtidSet?: string }> {
  let rows: unknown;
  try {
    [rows] = await conn.query('SHOW MASTER STATUS');
  } catch {
    [rows] = await conn.query('SHOW BINARY LOG STATUS');
  }
  const r = (rows as { File?: string; Position?: number | string; Executed_Gtid_Set?: string }[])[0];
  if (!r?.File)
    throw new SourceError(
      'CDC_BINLOG_OFF',
      'the server has no binary log (SHOW MASTER STATUS is empty): start it with log_bin, binlog_format=ROW, binlog_row_image=FULL, binlog_row_metadata=FULL',
    );
  return {
    file: r.File,
    pos: Number(r.Position),
    // MySQL only (MariaDB's status has no such column).
    ...(typeof r.Executed_Gtid_Set === 'string'
      ? { executedGtidSet: r.Executed_Gtid_Set.replace(/\s+/g, '') }
      : {}),
  };
}

/**
 * Why the stored MariaDB GTID position cannot be resumed from on another server whose
 * `gtid_binlog_pos` is `current`, or undefined when it can: every stored domain must be there at
 * or past its stored sequence (the new server has applied it), and the server must have no
 * domain the stored position lacks (its events in that domain would be replayed from its oldest
 * binlog: a new GTID domain stays a gap). Whether its binlogs still hold the continuation the
 * dump answers (error 1236 otherwise, a gap).
 */
export function failoverRefusal(stored: string, current: string): string | undefined {
  const parse = (text: string) =>
    text
      .split(',')
      .map((x) => x.trim())
      .filter((x) => x !== '')
      .map((x) => {
        const m = /^(\d+)-(\d+)-(\d+)$/.exec(x);
        return m ? { domain: m[1]!, seq: BigInt(m[3]!), text: x } : undefined;
      });
  const was = parse(stored);
  if (was.length === 0) return 'the stored position has no GTIDs';
  if (was.some((x) => x === undefined)) return `the stored GTID position ${stored} is not a MariaDB one`;
  const now = new Map(
    parse(current)
      .filter((x) => x !== undefined)
      .map((x) => [x.domain, x]),
  );
  for (const w of was) {
    const is = now.get(w!.domain);
    if (!is) return `the server's GTID position ${current || '(empty)'} has no domain ${w!.domain}`;
    if (is.seq < w!.seq) return `the server's GTID position ${current} is behind the stored ${w!.text}`;
  }
  const known = new Set(was.map((w) => w!.domain));
  for (const d of now.keys())
    if (!known.has(d))
      return `the server's GTID position ${current} has domain ${d}, which the stored one lacks`;
  return undefined;
}

/**
 * The first domain whose stored MariaDB GTID (`domain-server-seq`) the server's binlog position
 * has not reached (same server id, lower sequence, or the domain gone): coordinates were reset.
 * Undefined when every stored domain is at or past its stored GTID (or nothing was stored).
 */
export function gtidWentBack(stored: string, current: string): string | undefined {
  const parse = (text: string) =>
    new Map(
      text
        .split(',')
        .map((x) => x.trim())
        .filter((x) => /^\d+-\d+-\d+$/.test(x))
        .map((x) => {
          const [d, server, seq] = x.split('-');
          return [d!, { server: server!, seq: BigInt(seq!), text: x }] as const;
        }),
    );
  const now = parse(current);
  for (const [domain, was] of parse(stored)) {
    const is = now.get(domain);
    if (!is) return `domain ${domain}: ${was.text}, now absent`;
    if (is.seq < was.seq && is.server === was.server) return `domain ${domain}: ${was.text}, now ${is.text}`;
  }
  return undefined;
}

/** A column as a FULL-metadata TableMap describes it, mapped like introspection would. */
function columnFromMap(
  c: { COLUMN_NAME: string; COLUMN_TYPE: string; CHARACTER_SET_NAME: string | null },
  before: ColumnInfo | undefined,
): ColumnInfo {
  const columnType = c.COLUMN_TYPE;
  const dataType = columnType.toLowerCase().split(/[\s(]/)[0] ?? '';
  const dec = /^decimal\((\d+),(\d+)\)/i.exec(columnType);
  const jsonAlias = before?.sourceType === 'json' && dataType === 'longtext';
  const info: InfoColumn = {
    name: c.COLUMN_NAME,
    dataType,
    columnType,
    nullable: true,
    numericPrecision: dec ? Number(dec[1]) : null,
    numericScale: dec ? Number(dec[2]) : null,
    charset: c.CHARACTER_SET_NAME,
    jsonAlias,
  };
  const m = mapColumn(info, c.COLUMN_NAME);
  return {
    name: c.COLUMN_NAME,
    notNull: false,
    sourceType: m.sourceType,
    read: m.read,
    nullable: m.nullable,
  };
}

/** Whether two descriptions of a column read the same way (the binlog omits some details). */
function sameShape(a: ColumnInfo, b: ColumnInfo): boolean {
  if (JSON.stringify(a.read.logical) === JSON.stringify(b.read.logical) && a.read.kind === b.read.kind)
    return true;
  // MariaDB's UUID/INET4/INET6 are fixed binary in the binlog's metadata.
  return /^(uuid|inet4|inet6)$/i.test(a.sourceType) && b.read.kind === 'binary';
}

function signatureOf(cols: readonly ColumnInfo[]): string {
  return JSON.stringify(cols.map((c) => [c.name, c.read.kind, c.read.logical]));
}

function writersOf(enc: BatchEncoder): ColumnWriter[] {
  return enc.schema.columns.map((_, j) => enc.col(j));
}

function appendersOf(infos: readonly ColumnInfo[], source: string): BinlogAppender[] {
  return infos.map((info) => binlogAppenderFor(info, { table: source, column: info.name }));
}

function keyChanged(t: TableState, old: Record<string, unknown>, nu: Record<string, unknown>): boolean {
  for (const k of t.schema.primaryKey) {
    const a = keyBytes(old[k]);
    const b = keyBytes(nu[k]);
    if (a === null || b === null) {
      if (a !== b) return true;
      continue;
    }
    if (!a.equals(b)) return true;
  }
  return false;
}

/**
 * The tables a statement truncates, drops or renames away (`database.table`, unquoted; names
 * without a database are in `defaultDb`, the QUERY event's current database). Only TRUNCATE,
 * DROP TABLE, RENAME TABLE and ALTER TABLE ... RENAME [TO|AS] are recognized; comments are
 * ignored.
 */
export function destructiveTargets(
  sql: string,
  defaultDb: string,
): { kind: 'truncate' | 'ddl'; table: string }[] {
  const stripped = sql
    .replace(/\/\*.*?\*\//gs, ' ')
    .replace(/--\s[^\n]*/g, ' ')
    .trim();
  const unquote = (p: string) => {
    const t = p.trim();
    return t.startsWith('`') ? t.slice(1, -1).replace(/``/g, '`') : t;
  };
  const resolve = (name: string): string => {
    const parts = splitDotted(name.trim());
    return parts.length >= 2
      ? `${unquote(parts[0]!)}.${unquote(parts[1]!)}`
      : `${defaultDb}.${unquote(parts[0] ?? '')}`;
  };
  const name = '((?:`(?:[^`]|``)+`|[\\w$]+)(?:\\s*\\.\\s*(?:`(?:[^`]|``)+`|[\\w$]+))?)';
  let m = new RegExp(`^TRUNCATE\\s+(?:TABLE\\s+)?${name}`, 'i').exec(stripped);
  if (m) return [{ kind: 'truncate', table: resolve(m[1]!) }];
  m = /^DROP\s+(?:TEMPORARY\s+)?TABLES?\s+(?:IF\s+EXISTS\s+)?(.*?)(?:\s+(?:RESTRICT|CASCADE))?\s*$/is.exec(
    stripped,
  );
  if (m) return splitNames(m[1]!).map((n) => ({ kind: 'ddl', table: resolve(n) }));
  m = /^RENAME\s+TABLES?\s+(.*)$/is.exec(stripped);
  if (m)
    return splitNames(m[1]!).flatMap((pair) => {
      const from = pair.split(/\s+TO\s+/i)[0];
      return from ? [{ kind: 'ddl' as const, table: resolve(from) }] : [];
    });
  m = new RegExp(`^ALTER\\s+(?:ONLINE\\s+|IGNORE\\s+)*TABLE\\s+${name}\\s+(.*)$`, 'is').exec(stripped);
  if (m && /(^|,)\s*RENAME\s+(?!(?:COLUMN|INDEX|KEY)\b)/i.test(m[2] ?? ''))
    return [{ kind: 'ddl', table: resolve(m[1]!) }];
  return [];
}

/** Splits `a`.`b` / a.b at the dot outside backquotes. */
function splitDotted(name: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  for (const ch of name) {
    if (ch === '`') quoted = !quoted;
    if (ch === '.' && !quoted) {
      out.push(cur.trim());
      cur = '';
    } else cur += ch;
  }
  out.push(cur.trim());
  return out;
}

/** Splits a comma-separated list of (possibly backquoted) names or `a TO b` pairs. */
function splitNames(list: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  for (const ch of list) {
    if (ch === '`') quoted = !quoted;
    if (ch === ',' && !quoted) {
      out.push(cur.trim());
      cur = '';
    } else cur += ch;
  }
  if (cur.trim() !== '') out.push(cur.trim());
  return out;
}
