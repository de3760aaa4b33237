/**
 * The Postgres snapshot source (shared/contracts/snapshot.ts): chunkers that read a captured
 * table's existing rows by primary-key range, each chunk in one DBLog window of the change
 * stream, on a pool of query connections of its own (docs/postgres-cdc.md, "Snapshots (driver
 * side)").
 *
 * Owns:
 *   - chunk bounds: `nextBound` asks the database for the key `rows` rows past `after`
 *     (`ORDER BY pk OFFSET rows-1 LIMIT 1` over a row comparison): the database orders and
 *     compares keys (its collations), never JavaScript;
 *   - one chunk read on ONE reserved connection: the low watermark message (autocommit), the
 *     running xids, a REPEATABLE READ READ ONLY transaction whose first statement takes the
 *     snapshot (`pg_current_snapshot()`: its xip, and the running xids at or above its xmax,
 *     become `invisible`, see `invisibleXids`), the chunk through
 *     binary COPY into a wire-schema Batch with the incremental decoder and column writers, the
 *     commit, `window.ready`, then the high watermark message;
 *   - the errors an operator can fix: a table without a primary key, a key type that cannot be
 *     a key token, a role that may not emit logical messages.
 * Must never: compare or sort key values in JavaScript, build row objects for a chunk, emit a
 * watermark before the engine registered it (`window.expect` comes first), or leave a reserved
 * connection in a transaction.
 *
 * Watermarks are `pg_logical_emit_message(false, 'tidemark.watermark', <id>)` (non-transactional,
 * so it is in the WAL at once, whatever the session does next); the reader (cdc/reader.ts)
 * reports a registered id as a `watermark` event at its place in the stream.
 */
import { SourceError, TidemarkError } from '../../contracts/errors.js';
import type {
  ChunkRequest,
  ChunkRows,
  ChunkWindow,
  SnapshotOptions,
  SnapshotSource,
  TableChunker,
} from '../../contracts/snapshot.js';
import type { TableRef } from '../../contracts/source.js';
import type { Clock } from '../../contracts/state.js';
import { newBatch } from '../../dataplane/batch.js';
import { BatchEncoder } from '../../dataplane/encoder.js';
import { Op } from '../../dataplane/metadata.js';
import { describeType, type LogicalType, type Schema } from '../../dataplane/schema.js';
import { decodeKey, encodeKey, isKeyType } from '../../position/key-codec.js';
import { dataColumns } from '../page.js';
import { WATERMARK_PREFIX } from './cdc/watermarks.js';
import {
  CONNECTION_OVER,
  type ConnectOptions,
  endpointOf,
  queryPool,
  type Sql,
  translateConnectError,
} from './connect.js';
import { copyFields, ctxOf, schemaFailure } from './incremental.js';
import { type ColumnInfo, checkColumnsUnchanged, introspectTable, type TablePlan } from './introspect.js';
import { keyText, parseColumnText, quoteIdent, quoteLiteral } from './types.js';
import { CopyBinaryDecoder, decodeBinaryValue } from './wire/binary-rows.js';
import { streamBinaryCopy } from './wire/copy-stream.js';

/** The alias of the table in chunk statements (keys are qualified with it, as on pages). */
const TABLE_ALIAS = 'src';
/** Largest number of rows a chunk's encoder allocates for up front; it grows past it. */
const MAX_INITIAL_CAPACITY = 65_536;
const INSUFFICIENT_PRIVILEGE = '42501';
const XID_MODULUS = 2n ** 32n;

/** What a snapshot source connects with (the CDC source's settings). */
export interface PostgresSnapshotOptions extends ConnectOptions {
  /** `__ingest_ts` clock, ms since the epoch. */
  readonly clock?: Clock;
}

/** A table's primary key as the chunk statements use it. */
interface KeyPlan {
  readonly plan: TablePlan;
  /** The primary-key columns, in key order. */
  readonly keys: readonly ColumnInfo[];
  /** Their logical types: what key tokens encode. */
  readonly types: readonly LogicalType[];
  /** `src."a", src."b"`: ORDER BY and the left side of a comparison. */
  readonly list: string;
}

/**
 * Chunkers over one source's tables (see the module comment). Each chunker introspects its table
 * on first use (the incremental introspection, so columns read exactly as on pages and in the
 * stream), and again when a request's schema names a column its plan does not have.
 */
export class PostgresSnapshotSource implements SnapshotSource {
  readonly connections: number;
  private readonly sql: Sql;
  private readonly clock: Clock;
  private closed = false;

  constructor(
    private readonly settings: PostgresSnapshotOptions,
    options: SnapshotOptions,
  ) {
    if (!Number.isInteger(options.connections) || options.connections < 1)
      throw new TidemarkError(
        'CONFIG_INVALID',
        `${settings.sourceName ?? 'the source'}: a snapshot needs at least one query connection, got ${options.connections}`,
      );
    this.connections = options.connections;
    this.clock = settings.clock ?? Date.now;
    this.sql = queryPool({ ...settings, applicationName: 'tidemark-snapshot' }, options.connections);
  }

  /** Reads follow each request's schema (`ChunkRequest.schema`), as pages do. */
  chunker(table: TableRef, _schema: Schema): TableChunker {
    if (this.closed) throw new Error('postgres snapshot source: chunker after close');
    return new PostgresChunker(this, table);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.sql.end({ timeout: 5 });
  }

  /** @internal The pool (chunkers reserve connections of it). */
  get pool(): Sql {
    return this.sql;
  }

  /** @internal */
  get now(): Clock {
    return this.clock;
  }

  /** @internal A new introspection of `source`. */
  planOf(source: string): Promise<TablePlan> {
    return this.guard(() => introspectTable(this.sql, { source }));
  }

  /**
   * @internal Runs `fn`, turning a failure to connect or a connection lost under it into a
   * SourceError (anything else, a TidemarkError included, passes through).
   */
  async guard<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw this.translate(e);
    }
  }

  /**
   * @internal A client error as a SourceError where it is one; `connected`: the statement ran
   * on a connection already in use (a reserved one), so a closed connection was lost, not
   * refused. Errors without a client code (the engine's own, from `window`) pass through.
   */
  translate(e: unknown, connected = false): unknown {
    if (e instanceof TidemarkError || !(e instanceof Error)) return e;
    const code = String((e as { code?: unknown }).code ?? '');
    if (code === '') return e;
    const ep = endpointOf(this.settings.url, this.settings.sourceName);
    // A lost connection is not a failure to connect (translateConnectError would call it so).
    if (connected && CONNECTION_OVER.has(code))
      return new SourceError(
        'SOURCE_CONNECTION_LOST',
        `${ep.source}: a snapshot chunk lost its connection to Postgres at ${ep.host}:${ep.port}/${ep.database} (${code}: ${e.message.split('\n')[0]}); nothing of the chunk was handed over: the chunk is read again when the capture restarts`,
        { cause: e },
      );
    return translateConnectError(e, ep, this.settings.connectTimeoutMs) ?? e;
  }
}

/** One table's chunker (TableChunker): bounds, chunk reads, the row estimate. */
class PostgresChunker implements TableChunker {
  private resolved: Promise<KeyPlan> | undefined;

  constructor(
    private readonly src: PostgresSnapshotSource,
    private readonly table: TableRef,
  ) {}

  /** The table's key plan, refusing a table the snapshot cannot chunk. */
  private keyPlan(): Promise<KeyPlan> {
    this.resolved ??= this.resolve().catch((e: unknown) => {
      this.resolved = undefined;
      throw e;
    });
    return this.resolved;
  }

  private async resolve(): Promise<KeyPlan> {
    const plan = await this.src.planOf(this.table.source);
    if (plan.primaryKey.length === 0)
      throw new SourceError(
        'SNAPSHOT_KEY_MISSING',
        `${plan.source} has no primary key, and a snapshot reads a table in ranges of its primary key; add one (ALTER TABLE ${plan.qualified} ADD PRIMARY KEY (...)), or set snapshot: never on the table (only changes from now on are captured)`,
      );
    const keys = plan.primaryKey.map((k) => plan.columns.find((c) => c.name === k)!);
    for (const k of keys)
      if (!isKeyType(k.read.logical))
        throw new SourceError(
          'SOURCE_CURSOR_INVALID',
          `${plan.source}: primary-key column "${k.name}" has type ${k.sourceType} (read as ${describeType(k.read.logical)}), which a snapshot chunk bound cannot hold; set snapshot: never on the table`,
        );
    return {
      plan,
      keys,
      types: keys.map((k) => k.read.logical),
      list: keys.map((k) => `${TABLE_ALIAS}.${quoteIdent(k.name)}`).join(', '),
    };
  }

  async nextBound(
    after: string | undefined,
    rows: number,
    signal?: AbortSignal,
  ): Promise<string | undefined> {
    if (!Number.isInteger(rows) || rows < 1)
      throw new RangeError(`postgres snapshot: nextBound needs a positive row count, got ${rows}`);
    signal?.throwIfAborted();
    const kp = await this.keyPlan();
    const params: string[] = [];
    // `$n::text::type`, as on the row path: the exact key text goes over the wire and Postgres
    // casts it to the column's own type, so the comparison is the column's (its collation).
    const bind = (text: string, c: ColumnInfo) => {
      params.push(text);
      return `$${params.length}::text::${c.castType}`;
    };
    const where = after === undefined ? '' : ` WHERE ${compare(kp, '>', keyExprs(kp, after, bind))}`;
    const q =
      `SELECT ${kp.keys.map((k, i) => `${k.read.expr} AS k${i}`).join(', ')} FROM ${kp.plan.qualified} AS ${TABLE_ALIAS}` +
      `${where} ORDER BY ${kp.list} OFFSET ${rows - 1} LIMIT 1`;
    const raw = await this.src.guard(async () => {
      try {
        return (await cancellable(
          this.src.pool.unsafe(q, params).raw(),
          signal,
        )) as unknown as (Buffer | null)[][];
      } catch (e) {
        signal?.throwIfAborted();
        throw await schemaFailure(this.src.pool, kp.plan, kp.keys, this.table.target, e, signal);
      }
    });
    const row = raw[0];
    if (row === undefined) return undefined;
    const values = kp.keys.map((k, i) =>
      parseColumnText(k.read, row[i]?.toString('utf8') ?? null, ctxOf(kp.plan, k)),
    );
    return encodeKey(kp.types, values);
  }

  async read(
    req: ChunkRequest,
    window: ChunkWindow,
    ids: { readonly low: string; readonly high: string },
    signal?: AbortSignal,
  ): Promise<void> {
    if (!Number.isInteger(req.limit) || req.limit < 1)
      throw new RangeError(`postgres snapshot: a chunk needs a positive row limit, got ${req.limit}`);
    signal?.throwIfAborted();
    let kp = await this.keyPlan();
    // A column the plan does not know (added since it was introspected): introspect once more.
    if (req.schema.columns.some((c) => !kp.plan.columns.some((p) => p.name === c.name))) {
      this.resolved = undefined;
      kp = await this.keyPlan();
    }
    const { plan } = kp;
    const data = dataColumns(plan, req.schema);
    const hidden = kp.keys.filter((k) => !data.includes(k));
    const selected = [...data, ...hidden];
    const conn = await this.src.guard(() => this.src.pool.reserve());
    let inTxn = false;
    try {
      // (1) The low watermark, registered before it exists.
      window.expect(ids.low, 'low');
      await this.emit(conn, ids.low, signal);
      // The transactions running now (after the low watermark, before the snapshot): see
      // `invisibleXids` for why the snapshot's xip alone is not enough.
      const [running] = await cancellable(conn.unsafe<{ x: string | null }[]>(RUNNING_XIDS_SQL), signal);
      // (2) The chunk's snapshot: taken by the transaction's first statement.
      await cancellable(conn.unsafe('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY'), signal);
      inTxn = true;
      const [snap] = await cancellable(
        conn.unsafe<{ s: string }[]>('SELECT pg_current_snapshot()::text AS s'),
        signal,
      );
      const invisible = invisibleXids(snap!.s, running?.x ? running.x.split(',') : []);
      // (3) The rows.
      const chunk = await this.copyChunk(conn, kp, req, data, selected, signal);
      // The columns the COPY read still have the types they were introspected with (the COPY's
      // ACCESS SHARE lock, held to COMMIT, keeps them so until then).
      if (chunk.rows > 0)
        try {
          await checkColumnsUnchanged(conn, plan, selected, this.table.target);
        } catch (e) {
          signal?.throwIfAborted();
          throw await schemaFailure(conn, plan, selected, this.table.target, e, signal);
        }
      // (4)
      await cancellable(conn.unsafe('COMMIT'), signal);
      inTxn = false;
      // (5) The rows are the engine's before the high watermark exists.
      window.ready({ ...chunk, invisible });
      // (6) The high watermark.
      window.expect(ids.high, 'high');
      await this.emit(conn, ids.high, signal);
    } catch (e) {
      if (inTxn) await conn.unsafe('ROLLBACK').catch(() => undefined);
      if (signal?.aborted && !(e instanceof TidemarkError)) signal.throwIfAborted();
      throw this.src.translate(e, true);
    } finally {
      conn.release();
    }
  }

  /** Emits one watermark message in autocommit on `conn`. */
  private async emit(conn: Sql, id: string, signal: AbortSignal | undefined): Promise<void> {
    try {
      await cancellable(
        conn.unsafe('SELECT pg_logical_emit_message(false, $1::text, $2::text)::text AS lsn', [
          WATERMARK_PREFIX,
          id,
        ]),
        signal,
      );
    } catch (e) {
      if ((e as { code?: unknown }).code !== INSUFFICIENT_PRIVILEGE) throw e;
      const [who] = await conn
        .unsafe<{ role: string; f: string | null }[]>(
          `SELECT current_user::text AS role,
                  (SELECT p.oid::regprocedure::text FROM pg_proc p
                   WHERE p.proname = 'pg_logical_emit_message' AND p.proargtypes[2] = 'text'::regtype
                   LIMIT 1) AS f`,
        )
        .catch(() => [undefined]);
      const fn = who?.f ?? 'pg_logical_emit_message(boolean, text, text)';
      throw new SourceError(
        'SOURCE_PRIVILEGE',
        `${this.table.source}: role "${who?.role ?? '?'}" may not run pg_logical_emit_message, which marks each snapshot chunk's window in the change stream (${(e as Error).message.split('\n')[0]}); run GRANT EXECUTE ON FUNCTION ${fn} TO ${quoteIdent(who?.role ?? 'the_role')}; or set snapshot: never on the table`,
        { cause: e },
      );
    }
  }

  /** Step (3): the chunk's rows through binary COPY into one wire-schema batch. */
  private async copyChunk(
    conn: Sql,
    kp: KeyPlan,
    req: ChunkRequest,
    data: readonly ColumnInfo[],
    selected: readonly ColumnInfo[],
    signal: AbortSignal | undefined,
  ): Promise<Omit<ChunkRows, 'invisible'>> {
    const { plan } = kp;
    const enc = new BatchEncoder(req.schema, {
      phase: 'snapshot',
      capacity: Math.min(req.limit, MAX_INITIAL_CAPACITY),
    });
    const fields = copyFields(plan, selected, data.length, enc);
    const keyFields = kp.keys.map((k) => selected.indexOf(k));
    // COPY takes no bind parameters: key texts go in as quoted literals cast to the column type.
    const literal = (text: string, c: ColumnInfo) => `${quoteLiteral(text)}::${c.castType}`;
    const where: string[] = [];
    if (req.range.after !== undefined) where.push(compare(kp, '>', keyExprs(kp, req.range.after, literal)));
    if (req.range.upTo !== undefined) where.push(compare(kp, '<=', keyExprs(kp, req.range.upTo, literal)));
    const select =
      `SELECT ${selected.map((c, i) => `${c.read.expr} AS f${i}`).join(', ')} FROM ${plan.qualified} AS ${TABLE_ALIAS}` +
      (where.length > 0 ? ` WHERE ${where.join(' AND ')}` : '') +
      ` ORDER BY ${kp.list} LIMIT ${req.limit}`;
    const decoder = new CopyBinaryDecoder(fields, keyFields, req.limit, () => {
      // `__pos` is a placeholder: the engine places the chunk once its high watermark arrives.
      enc.appendMeta(Op.create, '', null, true);
      return false;
    });
    let failure: unknown;
    try {
      failure = await streamBinaryCopy(conn, select, decoder, signal);
    } catch (e) {
      signal?.throwIfAborted();
      throw await schemaFailure(conn, plan, selected, this.table.target, e, signal);
    }
    signal?.throwIfAborted();
    if (failure !== undefined)
      throw await schemaFailure(conn, plan, selected, this.table.target, failure, signal);
    decoder.end();
    const rows = decoder.appended;
    if (rows === 0) return { batch: undefined, rows: 0, lastKey: undefined };
    const lastKey = encodeKey(
      kp.types,
      kp.keys.map((k, i) => {
        const span = decoder.lastKey(i)!;
        return decodeBinaryValue(k.read.wire, span.buf, span.start, span.length, ctxOf(plan, k));
      }),
    );
    const record = enc.finish(BigInt(this.src.now()) * 1_000_000n);
    const batch = newBatch({
      table: this.table.target,
      record,
      watermark: undefined,
      writeMode: req.writeMode,
    });
    return { batch, rows, lastKey };
  }

  async estimateRows(): Promise<number | undefined> {
    const plan = await this.src.planOf(this.table.source);
    // A partitioned table's own reltuples is -1: its leaves hold the rows (pg_partition_tree
    // lists nothing for a table that is not partitioned).
    const [row] = await this.src.guard(() =>
      this.src.pool.unsafe<{ n: string | null }[]>(
        `SELECT CASE WHEN bool_or(c.reltuples < 0) THEN NULL ELSE sum(c.reltuples) END::text AS n
         FROM pg_class c
         WHERE (c.oid = $1::oid AND c.relkind <> 'p')
            OR c.oid IN (SELECT t.relid FROM pg_partition_tree($1::oid) t WHERE t.isleaf)`,
        [plan.oid],
      ),
    );
    if (row?.n === null || row?.n === undefined) return undefined;
    const n = Number(row.n);
    return Number.isFinite(n) && n >= 0 ? Math.round(n) : undefined;
  }
}

/** The SQL expressions of a key token's parts, each rendered by `render` (a parameter or literal). */
function keyExprs(kp: KeyPlan, token: string, render: (text: string, c: ColumnInfo) => string): string[] {
  const values = decodeKey(kp.types, token);
  return values.map((v, i) => render(keyText(kp.types[i]!, v), kp.keys[i]!));
}

/** `key op (exprs)`: one column compared as itself, a composite key as a row comparison. */
function compare(kp: KeyPlan, op: '>' | '<=', exprs: readonly string[]): string {
  return kp.keys.length === 1 ? `${kp.list} ${op} ${exprs[0]}` : `(${kp.list}) ${op} (${exprs.join(', ')})`;
}

/**
 * The top-level xids (32-bit, decimal, comma-separated) of every transaction running now:
 * sessions' (pg_stat_activity.backend_xid, shown to every role) and prepared ones.
 */
const RUNNING_XIDS_SQL = `SELECT string_agg(x, ',') AS x FROM (
  SELECT backend_xid::text AS x FROM pg_stat_activity WHERE backend_xid IS NOT NULL
  UNION SELECT transaction::text FROM pg_prepared_xacts) r`;

/**
 * The transactions a chunk's snapshot cannot see although they may have committed in the WAL
 * before its low watermark, as the 32-bit xids the stream's Begin messages carry (decimal):
 * `snapshot` is the chunk's `pg_current_snapshot()` text (`xmin:xmax:xip,...`, xid8s), `running`
 * the xids running after the low watermark and before the snapshot (RUNNING_XIDS_SQL).
 *
 * The xip list alone misses some: Postgres sets a snapshot's xmax to the latest COMPLETED xid
 * + 1, so a running transaction with the newest xid is at or above xmax and not in xip (seen on
 * PostgreSQL 17: one open transaction, snapshot `757:757:`). Such a transaction that committed
 * in the WAL before the low watermark (its commit record written, the session still waiting,
 * e.g. for a synchronous standby) was running when `running` was read (it got its xid before
 * its commit record, so before the watermark, and it was still running at the snapshot, after
 * the read), so it is in `running`; the running xids at or above xmax are added. Extra ids
 * (transactions that ended before the snapshot) cost at most a needless re-read of the chunk.
 */
export function invisibleXids(snapshot: string, running: readonly string[]): string[] {
  const bad = () =>
    new SourceError('SOURCE_PROTOCOL', `pg_current_snapshot() returned "${snapshot}", not xmin:xmax:xip`);
  const parts = snapshot.split(':');
  if (parts.length !== 3 || !/^\d+$/.test(parts[0]!) || !/^\d+$/.test(parts[1]!)) throw bad();
  const xmax = BigInt(parts[1]!) % XID_MODULUS;
  const out = new Set<string>();
  if (parts[2] !== '')
    for (const x of parts[2]!.split(',')) {
      if (!/^\d+$/.test(x)) throw bad();
      out.add(String(BigInt(x) % XID_MODULUS));
    }
  for (const r of running) {
    if (!/^\d+$/.test(r)) continue;
    const x = BigInt(r) % XID_MODULUS;
    // At or above xmax in the circular xid order (a running xid is within 2^31 of xmax).
    if ((x - xmax + XID_MODULUS) % XID_MODULUS < XID_MODULUS / 2n) out.add(String(x));
  }
  return [...out];
}

/** Awaits a postgres.js query, cancelling it at the server when `signal` aborts. */
async function cancellable<T>(
  query: PromiseLike<T> & { cancel(): unknown },
  signal: AbortSignal | undefined,
): Promise<T> {
  if (!signal) return await query;
  const onAbort = () => {
    void Promise.resolve(query.cancel()).catch(() => undefined);
  };
  if (signal.aborted) onAbort();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await query;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
