/**
 * Snapshot chunks of MySQL/MariaDB tables (shared/contracts/snapshot.ts): the `SnapshotSource`
 * the CDC source opens (`MysqlCdcSource.openSnapshot`), on its own query connections (at most
 * `connections`, each a `MysqlConnection` with the incremental driver's session settings).
 *
 * Owns:
 *   - `nextBound`: the key `rows` rows past `after`, found by the database in its own key order
 *     (`ORDER BY <pk> LIMIT 1 OFFSET rows-1` over the primary key): text keys follow the
 *     column's collation, which JavaScript never imitates;
 *   - `read`: one chunk in one consistent snapshot, decoded with the incremental page decoders
 *     (types.ts appenders, result-fields.ts checks) straight into a wire-schema Batch, and its
 *     watermarks:
 *       MariaDB: `START TRANSACTION WITH CONSISTENT SNAPSHOT` reports the snapshot's exact
 *       binlog cut (`Binlog_snapshot_file`/`Binlog_snapshot_position`): the high watermark is
 *       registered at that position (`binlogAt`), no low watermark is needed;
 *       MySQL 8 (no such status; untested) or on request: the watermark-table mode (DBLog's
 *       original): a low row inserted before the snapshot and a high row after it, each in its
 *       own autocommitted transaction, which the reader matches by id in the binlog.
 * Keyset predicates are the incremental driver's expanded OR form (`keysetPredicate`): MariaDB
 * uses a primary-key range for it, not for a row constructor `(a, b) > (x, y)`.
 * Must never sort or compare key values in JavaScript, nor build row objects for a chunk.
 */
import { SourceError } from '../../contracts/errors.js';
import type {
  ChunkRequest,
  ChunkWindow,
  SnapshotOptions,
  SnapshotSource,
  TableChunker,
} from '../../contracts/snapshot.js';
import type { TableRef } from '../../contracts/source.js';
import { newBatch } from '../../dataplane/batch.js';
import { BatchEncoder } from '../../dataplane/encoder.js';
import { Op } from '../../dataplane/metadata.js';
import { describeType, type LogicalType, type Schema } from '../../dataplane/schema.js';
import { decodeKey, encodeKey, isKeyType } from '../../position/key-codec.js';
import { withConnectErrors } from '../connect-errors.js';
import { dataColumns } from '../page.js';
import { binlogAt } from './cdc/position.js';
import { type ConnectOptions, MysqlConnection, type RawRow, translateConnectError } from './connect.js';
import { keysetPredicate } from './incremental.js';
import { type ColumnInfo, introspectTable, TABLE_ALIAS, type TablePlan } from './introspect.js';
import { keyLiteral, parseValue, quoteIdent, rangeAppenderOf } from './types.js';
import { checkResultFields } from './wire/result-fields.js';
import { appendRow, LastKeyRow, RowRanges, walkRow } from './wire/text-rows.js';

/** Options of the MySQL snapshot source beyond the contract's. */
export interface MysqlSnapshotOptions extends SnapshotOptions {
  /** Use the watermark table even where the server reports the snapshot's binlog cut (tests). */
  readonly forceWatermarkTable?: boolean;
  /** `__ingest_ts` clock, ms since the epoch [Date.now]. */
  readonly clock?: () => number;
}

/** The watermark table's statement (docs/mysql-cdc.md). */
export function watermarkTableDdl(table: string): string {
  return `CREATE TABLE ${qualify(table)} (id VARCHAR(64) NOT NULL PRIMARY KEY, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB`;
}

/** The refusal of a snapshot on a server without Binlog_snapshot_* status and no watermark table. */
export function needsWatermarkTable(sourceName: string | undefined): SourceError {
  return new SourceError(
    'CDC_SNAPSHOT_NEEDS_WATERMARK_TABLE',
    `${sourceName ?? 'the source'}: the server does not report a consistent snapshot's binlog position (no Binlog_snapshot_position status: MySQL), so snapshot chunks need a watermark table; create it (${watermarkTableDdl('tidemark.watermarks')}), GRANT INSERT, DELETE ON \`tidemark\`.\`watermarks\` to the capture account, and set the source's cdc.snapshot.watermarkTable: tidemark.watermarks`,
  );
}

/** Watermark rows older than this are deleted (the table stays small). */
const WATERMARK_KEEP_MINUTES = 10;
/** At most one clean-up of the watermark table per this long. */
const CLEANUP_EVERY_MS = 60_000;

function qualify(table: string): string {
  const dot = table.indexOf('.');
  if (dot <= 0 || dot === table.length - 1)
    throw new SourceError(
      'CDC_CONFIG',
      `the snapshot watermark table "${table}" must be written as database.table (e.g. tidemark.watermarks)`,
    );
  return `${quoteIdent(table.slice(0, dot))}.${quoteIdent(table.slice(dot + 1))}`;
}

/** A bounded set of query connections, each lent to one user at a time. */
class SessionPool {
  private readonly idle: MysqlConnection[] = [];
  private readonly waiting: ((s: MysqlConnection) => void)[] = [];
  private readonly all: MysqlConnection[] = [];

  constructor(
    private readonly opts: ConnectOptions,
    readonly size: number,
  ) {}

  async use<T>(fn: (db: MysqlConnection) => Promise<T>): Promise<T> {
    const db = await this.take();
    try {
      return await fn(db);
    } finally {
      const next = this.waiting.shift();
      if (next) next(db);
      else this.idle.push(db);
    }
  }

  private take(): Promise<MysqlConnection> {
    const free = this.idle.pop();
    if (free) return Promise.resolve(free);
    if (this.all.length < this.size) {
      const db = new MysqlConnection(this.opts);
      this.all.push(db);
      return Promise.resolve(db);
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  async close(): Promise<void> {
    await Promise.all(this.all.map((db) => db.close().catch(() => undefined)));
  }
}

type CutMode = 'status' | 'table';

/** The MySQL/MariaDB snapshot source (see the module comment). */
export class MysqlSnapshotSource implements SnapshotSource {
  readonly connections: number;
  private readonly pool: SessionPool;
  private mode: Promise<CutMode> | undefined;
  private lastCleanup = 0;
  readonly clock: () => number;

  constructor(
    private readonly connect: ConnectOptions,
    private readonly options: MysqlSnapshotOptions,
  ) {
    if (!Number.isInteger(options.connections) || options.connections < 1)
      throw new SourceError(
        'CDC_CONFIG',
        `a snapshot needs at least one query connection (got ${options.connections})`,
      );
    if (options.watermarkTable !== undefined) qualify(options.watermarkTable);
    this.connections = options.connections;
    this.pool = new SessionPool({ ...connect, applicationName: 'tidemark-snapshot' }, options.connections);
    this.clock = options.clock ?? Date.now;
  }

  get watermarkTable(): string | undefined {
    return this.options.watermarkTable;
  }

  /** The engine's resolved schema arrives with each chunk request (`req.schema`). */
  chunker(table: TableRef, _schema: Schema): TableChunker {
    return new MysqlChunker(this, table);
  }

  /** Runs `fn` on one of the source's connections, translating connection failures. */
  async use<T>(fn: (db: MysqlConnection) => Promise<T>): Promise<T> {
    return this.pool.use((db) =>
      withConnectErrors(
        () => fn(db),
        (e) => translateConnectError(e, db.endpoint, this.connect.connectTimeoutMs),
      ),
    );
  }

  /** How chunks are cut: by the snapshot's binlog position (MariaDB) or by the watermark table. */
  cutMode(db: MysqlConnection): Promise<CutMode> {
    this.mode ??= (async (): Promise<CutMode> => {
      const wt = this.options.watermarkTable;
      if (this.options.forceWatermarkTable) {
        if (wt === undefined)
          throw new SourceError('CDC_CONFIG', 'forceWatermarkTable needs a watermarkTable');
        return 'table';
      }
      const rows = await db.query<{ Variable_name: string }>("SHOW STATUS LIKE 'binlog_snapshot_%'");
      if (rows.some((r) => /^binlog_snapshot_position$/i.test(r.Variable_name))) return 'status';
      if (wt === undefined) throw needsWatermarkTable(this.connect.sourceName);
      return 'table';
    })();
    this.mode.catch(() => {
      this.mode = undefined;
    });
    return this.mode;
  }

  /** Writes one watermark row (autocommitted: its own binlog group), keeping the table small. */
  async writeWatermark(db: MysqlConnection, id: string): Promise<void> {
    const wt = this.options.watermarkTable!;
    const q = qualify(wt);
    try {
      await db.query(`INSERT INTO ${q} (id) VALUES (?)`, [id]);
      const now = this.clock();
      if (now - this.lastCleanup >= CLEANUP_EVERY_MS) {
        this.lastCleanup = now;
        await db.query(`DELETE FROM ${q} WHERE at < NOW(6) - INTERVAL ${WATERMARK_KEEP_MINUTES} MINUTE`);
      }
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code === 'ER_NO_SUCH_TABLE')
        throw new SourceError(
          'CDC_SNAPSHOT_WATERMARK_TABLE',
          `the snapshot watermark table ${wt} does not exist; create it: ${watermarkTableDdl(wt)}`,
          { cause: e },
        );
      if (code === 'ER_TABLEACCESS_DENIED_ERROR' || code === 'ER_COLUMNACCESS_DENIED_ERROR')
        throw new SourceError(
          'CDC_SNAPSHOT_WATERMARK_TABLE',
          `the capture account cannot write the snapshot watermark table ${wt}: GRANT INSERT, DELETE ON ${qualify(wt)} TO <the capture account>`,
          { cause: e },
        );
      throw e;
    }
  }

  async close(): Promise<void> {
    await this.pool.close();
  }
}

/** The primary-key columns of a plan, refused when there are none or they cannot be ordered. */
function keyColumns(plan: TablePlan): { keys: ColumnInfo[]; types: LogicalType[] } {
  if (plan.primaryKey.length === 0)
    throw new SourceError(
      'SNAPSHOT_KEY_MISSING',
      `${plan.source} has no primary key: a snapshot reads it in primary-key chunks; add a primary key, or set snapshot: never for the table`,
    );
  const keys = plan.primaryKey.map((k) => plan.columns.find((c) => c.name === k)!);
  for (const c of keys) {
    const why =
      c.read.keyRefusal ??
      (isKeyType(c.read.logical) ? undefined : `read as ${describeType(c.read.logical)}`);
    if (why)
      throw new SourceError(
        'SNAPSHOT_KEY_INVALID',
        `${plan.source}: primary-key column "${c.name}" has type ${c.sourceType}, which snapshot chunks cannot be keyed by (${why}); set snapshot: never for the table`,
      );
  }
  return { keys, types: keys.map((k) => k.read.logical) };
}

interface Prepared {
  readonly plan: TablePlan;
  readonly keys: readonly ColumnInfo[];
  readonly keySql: readonly string[];
  readonly types: readonly LogicalType[];
}

export class MysqlChunker implements TableChunker {
  private prepared: Promise<Prepared> | undefined;

  constructor(
    private readonly source: MysqlSnapshotSource,
    private readonly ref: TableRef,
  ) {}

  private prepare(db: MysqlConnection): Promise<Prepared> {
    this.prepared ??= (async () => {
      const plan = await introspectTable(db, { source: this.ref.source });
      const { keys, types } = keyColumns(plan);
      return { plan, keys, types, keySql: keys.map((k) => `${TABLE_ALIAS}.${quoteIdent(k.name)}`) };
    })();
    this.prepared.catch(() => {
      this.prepared = undefined;
    });
    return this.prepared;
  }

  /** Key literals of a token (the database compares them, in its collation). */
  private literals(p: Prepared, token: string): string[] {
    const values = decodeKey(p.types, token);
    return values.map((v, i) => keyLiteral(p.keys[i]!.read, v));
  }

  private rangeSql(p: Prepared, after: string | undefined, upTo: string | undefined): string {
    const parts: string[] = [];
    if (after !== undefined) parts.push(keysetPredicate(p.keySql, this.literals(p, after), '>'));
    if (upTo !== undefined) parts.push(keysetPredicate(p.keySql, this.literals(p, upTo), '<='));
    return parts.length === 0 ? '' : ` WHERE ${parts.join(' AND ')}`;
  }

  private boundSql(p: Prepared, after: string | undefined, rows: number): string {
    return (
      `SELECT ${p.keys.map((k) => k.read.expr).join(', ')} FROM ${p.plan.qualified} AS ${TABLE_ALIAS}` +
      `${this.rangeSql(p, after, undefined)} ORDER BY ${p.keySql.join(', ')} LIMIT 1 OFFSET ${rows - 1}`
    );
  }

  private chunkSql(
    p: Prepared,
    selected: readonly ColumnInfo[],
    range: ChunkRequest['range'],
    limit: number,
  ): string {
    return (
      `SELECT ${selected.map((c) => c.read.expr).join(', ')} FROM ${p.plan.qualified} AS ${TABLE_ALIAS}` +
      `${this.rangeSql(p, range.after, range.upTo)} ORDER BY ${p.keySql.join(', ')} LIMIT ${limit}`
    );
  }

  /** The statements `nextBound` and `read` run for these arguments (EXPLAIN in tests, docs). */
  async statements(
    range: ChunkRequest['range'],
    limit: number,
  ): Promise<{ readonly bound: string; readonly chunk: string }> {
    return this.source.use(async (db) => {
      const p = await this.prepare(db);
      return {
        bound: this.boundSql(p, range.after, limit),
        chunk: this.chunkSql(p, p.plan.columns, range, limit),
      };
    });
  }

  private tokenOf(p: Prepared, row: RawRow, offset: number): string {
    const values = p.keys.map((k, i) =>
      parseValue(k.read, row[offset + i]!, { table: p.plan.source, column: k.name }),
    );
    return encodeKey(p.types, values);
  }

  async nextBound(
    after: string | undefined,
    rows: number,
    signal?: AbortSignal,
  ): Promise<string | undefined> {
    if (!Number.isInteger(rows) || rows < 1)
      throw new RangeError(`nextBound: rows must be a positive integer`);
    return this.source.use(async (db) => {
      const p = await this.prepare(db);
      const sql = this.boundSql(p, after, rows);
      const got = await db.raw(sql, signal, (fields) => checkResultFields(p.keys, fields));
      return got.length === 0 ? undefined : this.tokenOf(p, got[0]!, 0);
    });
  }

  async read(
    req: ChunkRequest,
    window: ChunkWindow,
    ids: { readonly low: string; readonly high: string },
    signal?: AbortSignal,
  ): Promise<void> {
    if (!Number.isInteger(req.limit) || req.limit < 1)
      throw new RangeError(`read: limit must be a positive integer (got ${req.limit})`);
    await this.source.use(async (db) => {
      const p = await this.prepare(db);
      const mode = await this.source.cutMode(db);
      const data = dataColumns(p.plan, req.schema);
      const hidden = p.keys.filter((k) => !data.includes(k));
      const selected = [...data, ...hidden];
      const keyIndexes = p.keys.map((k) => selected.indexOf(k));
      const sql = this.chunkSql(p, selected, req.range, req.limit);

      if (mode === 'table') {
        window.expect(ids.low, 'low');
        await this.source.writeWatermark(db, ids.low);
      }
      const enc = new BatchEncoder(req.schema, { phase: 'snapshot', capacity: Math.min(req.limit, 65_536) });
      const appenders = data.map((c) => rangeAppenderOf(c.read, { table: p.plan.source, column: c.name }));
      const writers = data.map((_, i) => enc.col(i));
      // Row packets walked by offsets (text-rows.ts), as the incremental batch path does; the
      // last row is kept as its packet's buffer and its key values' ranges.
      const ranges = new RowRanges(selected.length);
      const lastKey = new LastKeyRow(selected.length, keyIndexes);
      let rows = 0;
      let cut: { file: string; pos: number } | undefined;
      await db.query('START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY');
      try {
        const { connectionId } = await db.server();
        if (mode === 'status') {
          const st = await db.query<{ Variable_name: string; Value: string }>(
            "SHOW STATUS LIKE 'binlog_snapshot_%'",
          );
          const file = st.find((r) => /^binlog_snapshot_file$/i.test(r.Variable_name))?.Value;
          const pos = st.find((r) => /^binlog_snapshot_position$/i.test(r.Variable_name))?.Value;
          if (!file || pos === undefined)
            throw new SourceError(
              'CDC_BINLOG_OFF',
              `${p.plan.source}: the consistent snapshot reports no binlog position (Binlog_snapshot_file is empty): the server needs log_bin`,
            );
          cut = { file, pos: Number(pos) };
        }
        await db.eachRow(
          sql,
          (buf, start, end) => {
            walkRow(buf, start, end, ranges);
            appendRow(buf, ranges, writers, appenders);
            enc.appendMeta(Op.create, '', null, true);
            rows++;
            lastKey.keep(buf, ranges);
          },
          signal,
          (fields) => checkResultFields(selected, fields),
        );
        // A connection replaced in between would have run the chunk outside the snapshot.
        if ((await db.server()).connectionId !== connectionId)
          throw new SourceError(
            'SOURCE_CONNECTION_LOST',
            `${p.plan.source}: the snapshot connection was replaced while a chunk was read; the chunk is read again`,
          );
        await db.query('COMMIT');
      } catch (e) {
        await db.query('ROLLBACK').catch(() => undefined);
        throw e;
      }
      const lastRow = lastKey.take();
      const lastToken =
        lastRow === undefined
          ? undefined
          : this.tokenOf(
              p,
              keyIndexes.map((i) => lastRow[i]!),
              0,
            );
      const batch =
        rows === 0
          ? undefined
          : newBatch({
              table: this.ref.target,
              record: enc.finish(BigInt(this.source.clock()) * 1_000_000n),
              watermark: undefined,
              writeMode: req.writeMode,
            });
      window.ready({ batch, rows, lastKey: lastToken });
      if (mode === 'status') window.expect(ids.high, 'high', binlogAt(cut!.file, cut!.pos));
      else {
        window.expect(ids.high, 'high');
        await this.source.writeWatermark(db, ids.high);
      }
    });
  }

  async estimateRows(): Promise<number | undefined> {
    const dot = this.ref.source.indexOf('.');
    return this.source.use(async (db) => {
      const rows = await db.query<{ n: string | number | null }>(
        'SELECT TABLE_ROWS AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?',
        [this.ref.source.slice(0, dot), this.ref.source.slice(dot + 1)],
      );
      const n = rows[0]?.n;
      return n === null || n === undefined ? undefined : Number(n);
    });
  }
}
