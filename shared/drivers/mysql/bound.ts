/**
 * The safe upper bound of an incremental page on MySQL/MariaDB, and the privilege it needs.
 *
 * Owns: what "safe" means for each cursor kind (docs/cursor.md, MySQL section), the
 * information_schema.INNODB_TRX queries, and the reports of sessions that hold the bound back.
 * Must never read the page itself: the bound is ALWAYS computed by a statement that runs before
 * the page's statement (see `timeBound`), and never silently waits forever (a held page is
 * reported, not hidden).
 *
 * Two kinds, as in the Postgres driver:
 * - Time cursors (DATETIME, TIMESTAMP, DATE): rows with cursor >= bound wait for a later page,
 *   bound = least(T0 - lag, start of the oldest other open InnoDB transaction - lag), where T0
 *   is a moment the transaction listing is proven newer than (INNODB_TRX is a cache of
 *   unbounded age: see `freshListing`).
 *   Two MySQL facts make the lag matter more than on Postgres: NOW() is the start of the
 *   STATEMENT, not of the transaction, and a transaction appears in INNODB_TRX only from its
 *   first InnoDB access (BEGIN alone starts nothing). A statement that took NOW() just before
 *   its transaction registered, or an application that computed its timestamp earlier, writes a
 *   value slightly below its trx_started; the lag covers that gap. trx_started has whole seconds
 *   only (floored), which errs on the safe side.
 * - Other cursors (integers, decimals, text...): no clock to bound by. The page is capped at the
 *   highest cursor value committed when the bound was read (the high-water mark), and is read only
 *   once every transaction open at that moment has ended (see `highWaterBound` for the order of
 *   the two reads). For AUTO_INCREMENT values this misses nothing; values not handed out in order
 *   (application ids, interleaved auto_increment_increment ranges, text) can still commit below
 *   pages already read, which the docs say, recommending a timestamp cursor or CDC.
 *
 * INNODB_TRX lists transactions of every database on the server (it does not say which tables a
 * transaction touches), so a transaction open in another database holds the bound back too: the
 * safe side. Its trx_started is in the server's SYSTEM time zone, whatever @@time_zone says;
 * CONVERT_TZ(.., 'SYSTEM', '+00:00') makes it UTC, like our session.
 */
import { SourceError } from '../../contracts/errors.js';
import type { Warning } from '../../contracts/source.js';
import { currentAccount, type MysqlConnection } from './connect.js';

/** A session whose open transaction holds the bound back, reported as a warning (code `BOUND_HELD`). */
export interface BoundHolder {
  /** INNODB_TRX.trx_id. */
  readonly trxId: string;
  /** The session's thread id (`KILL <threadId>` ends it). */
  readonly threadId: number;
  readonly user: string | null;
  readonly host: string | null;
  /** PROCESSLIST.COMMAND: `Sleep` means idle in transaction. */
  readonly command: string | null;
  /** The transaction start, UTC, whole seconds (`YYYY-MM-DD HH:MM:SS`). */
  readonly trxStarted: string;
  readonly ageMs: number;
}

/** A `Warning` with the holder's details, so the engine can log them as fields. */
export interface BoundHeldWarning extends Warning {
  readonly code: 'BOUND_HELD';
  readonly holder: BoundHolder;
}

/** How the bound of a time cursor is compared: TIMESTAMP (UTC), DATETIME (wall clock), DATE. */
export type TimeBoundType = 'timestamp' | 'datetime' | 'date';

/** trx_started as UTC (it is printed in the server's system time zone). */
const TRX_STARTED_UTC = "CONVERT_TZ(t.trx_started, 'SYSTEM', '+00:00')";
/** Other sessions' transactions (ours is excluded: it never writes). */
const OTHER_TRANSACTIONS =
  'information_schema.INNODB_TRX AS t WHERE t.trx_mysql_thread_id <> CONNECTION_ID()';

/**
 * Whether this account can see other sessions' transactions (INNODB_TRX needs PROCESS; both
 * supported servers refuse the read with ER_SPECIFIC_ACCESS_DENIED_ERROR without it, rather
 * than returning an empty table). Without it: refuses with the GRANT to run, unless the table
 * chose `lagOnly`, in which case the bound relies on the lag alone (returns false).
 */
export async function checkTransactionPrivilege(
  db: MysqlConnection,
  table: string,
  lagOnly: boolean,
): Promise<boolean> {
  try {
    await db.query('SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX');
    return true;
  } catch (e) {
    if ((e as { code?: string }).code !== 'ER_SPECIFIC_ACCESS_DENIED_ERROR') throw e;
    if (lagOnly) return false;
    throw new SourceError(
      'SOURCE_PRIVILEGE',
      `${table}: this account cannot see other sessions' open transactions (information_schema.INNODB_TRX needs PROCESS), so late commits could be skipped; ` +
        `run GRANT PROCESS ON *.* TO ${await currentAccount(db)}; or set lagOnly: true for this table to rely on the lag alone`,
      { cause: e },
    );
  }
}

export interface TimeBound {
  /** The bound as a SQL literal of the cursor's type; undefined when `held`. */
  readonly literal?: string;
  /** No fresh transaction listing could be had: the page must not be read now (`warnings` say why). */
  readonly held?: boolean;
  /**
   * Set when a listed transaction lowered the bound: the listing may be up to TRX_CACHE_MS old
   * and still show a transaction that has since committed. Reading the bound again from this
   * moment (epoch ms) on sees a listing at least as new as this one's read.
   */
  readonly recheckAt?: number;
  readonly warnings: BoundHeldWarning[];
}

/**
 * INNODB_TRX is served from a cache that InnoDB refills on a read only when nobody on the server
 * has read it for 100 ms (CACHE_MIN_IDLE_TIME_US in trx0i_s.cc). So a read gets a fresh listing
 * only after 100 ms of quiet, and a listing of ANY age while some session reads it more often
 * than that (measured on MariaDB 10.11: with one session reading every 25 ms, a listing 2 s
 * later still missed a transaction that had begun and showed one that had committed). Bounds
 * therefore never trust a listing's age: `freshListing` proves it. A transaction that committed
 * leaves the listing at a refill, so no sooner than this long after a read (`recheckAt`; 120: a
 * margin for clock granularity).
 */
export const TRX_CACHE_MS = 120;

/**
 * Between two reads of the listing while waiting: longer than InnoDB's 100 ms idle time, so
 * tidemark's own reads never keep the cache from being refilled, for itself or for another
 * pipeline reading the same server.
 */
const LISTING_POLL_MS = 150;

/** How long a bound tries for a fresh listing before it holds the page and says why. */
const FRESH_LISTING_MS = 2000;

/** An open transaction of another session, as a fresh listing shows it. */
interface ListedTransaction {
  readonly trxId: string;
  /** trx_started as UTC, whole seconds (`YYYY-MM-DD HH:MM:SS`). */
  readonly startedUtc: string;
}

/**
 * The other sessions' open transactions from a listing PROVEN newer than `since` (the server's
 * NOW(6) in our UTC session, read first): this session then starts a transaction of its own
 * (`WITH CONSISTENT SNAPSHOT`, so InnoDB registers it at once; READ ONLY, it changes nothing)
 * and reads INNODB_TRX until the listing shows it, which a cache filled before `since` cannot.
 * Every transaction the listing does not show had committed by the time the cache was filled,
 * or began after `since`. Rolls its own transaction back before returning. Undefined when no
 * such listing came within FRESH_LISTING_MS (some session keeps reading INNODB_TRX more often
 * than every 100 ms): the caller reads nothing now and reports it.
 */
async function freshListing(
  db: MysqlConnection,
  signal?: AbortSignal,
): Promise<{ readonly since: string; readonly others: ListedTransaction[] } | undefined> {
  const [t0] = await db.query<{ now: string }>("SELECT DATE_FORMAT(NOW(6), '%Y-%m-%d %H:%i:%s.%f') AS now");
  await db.query('START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY');
  try {
    const deadline = Date.now() + FRESH_LISTING_MS;
    for (;;) {
      const rows = await db.query<{ mine: string | number; trxId: string | number; started: string }>(
        `SELECT t.trx_mysql_thread_id = CONNECTION_ID() AS mine, t.trx_id AS trxId,
                DATE_FORMAT(${TRX_STARTED_UTC}, '%Y-%m-%d %H:%i:%s') AS started
         FROM information_schema.INNODB_TRX AS t`,
      );
      if (rows.some((r) => Number(r.mine) === 1)) {
        const others = rows
          .filter((r) => Number(r.mine) !== 1)
          .map((r) => ({ trxId: String(r.trxId), startedUtc: r.started }));
        return { since: t0!.now, others };
      }
      if (Date.now() >= deadline) return undefined;
      await sleep(LISTING_POLL_MS, signal);
    }
  } finally {
    await db.query('ROLLBACK');
  }
}

/** The warning of a page held because no fresh transaction listing could be had. */
function staleListingWarning(what: string): BoundHeldWarning {
  return {
    code: 'BOUND_HELD',
    message:
      `information_schema.INNODB_TRX was not refreshed within ${FRESH_LISTING_MS / 1000} s, so open transactions cannot be seen and ${what}: ` +
      'InnoDB refills that listing only after 100 ms without reads, and some session reads it more often (a monitoring tool, or a client polling it); ' +
      'slow that reader down, or set lagOnly: true for this table to rely on the lag alone',
    holder: {
      trxId: '?',
      threadId: 0,
      user: null,
      host: null,
      command: null,
      trxStarted: '?',
      ageMs: 0,
    },
  };
}

/** A UTC `YYYY-MM-DD HH:MM:SS[.ffffff]` text as a DATETIME(6) SQL expression. */
function utcLiteral(text: string): string {
  if (!/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?$/.test(text)) {
    throw new Error(`unexpected server time text ${JSON.stringify(text)}`);
  }
  return `CAST('${text}' AS DATETIME(6))`;
}

/**
 * Reads the bound for a time cursor. MUST run as its own statement BEFORE the page's statement.
 *
 * The race this ordering prevents: the page statement reads a consistent snapshot taken when it
 * starts. Were the bound read inside it, a transaction committing after that snapshot but before
 * the INNODB_TRX read would be neither visible to the page (too late for the snapshot) nor listed
 * as open (already gone), and its rows below the bound would be skipped for good. Read first,
 * every transaction is either listed (and bounds the page) or committed before the page's
 * snapshot (and visible to it).
 *
 * The listing comes from `freshListing`, newer than its `since`; transactions it does not show
 * began after `since`, so
 *   bound = least(since - lag, oldest listed trx_started - lag)
 * (and a page is held, not read, when no fresh listing could be had).
 *
 * TIMESTAMP cursors compare in UTC (our session's zone). DATETIME cursors hold wall-clock values
 * that writers take in their session zone, by default the server's @@global.time_zone (or
 * `writerZone` when writers set their own: an IANA name, which needs the server's time zone
 * tables, or `±HH:MM`), so the bound is converted to it; DATE cursors get the date of that, so a
 * day is read once it is over.
 * Without the privilege (lagOnly) INNODB_TRX is not read and the bound is NOW(6) - lag.
 */
export async function timeBound(
  db: MysqlConnection,
  type: TimeBoundType,
  lagMs: number,
  stallAfterMs: number,
  canSeeTransactions: boolean,
  writerZone?: string,
): Promise<TimeBound> {
  const lag = `INTERVAL ${Math.round(lagMs * 1000)} MICROSECOND`;
  let oldest = '(SELECT NULL AS oldest)';
  let nowSide = `(NOW(6) - ${lag})`;
  if (canSeeTransactions) {
    const listing = await freshListing(db);
    if (!listing)
      return { held: true, warnings: [staleListingWarning('the incremental bound cannot be read')] };
    const first = listing.others.map((o) => o.startedUtc).sort()[0];
    oldest = `(SELECT ${first === undefined ? 'NULL' : utcLiteral(first)} AS oldest)`;
    // A transaction the listing does not show began after `since`: its rows are at or above
    // since - lag (the lag covers a NOW() taken before its transaction registered).
    nowSide = `LEAST(NOW(6) - ${lag}, ${utcLiteral(listing.since)} - ${lag})`;
  }
  const trxSide = `(o.oldest - ${lag})`;
  const utc = `LEAST(${nowSide}, COALESCE(${trxSide}, ${nowSide}))`;
  // The spec validated the zone's spelling ([A-Za-z0-9_/+-] only), so it can be a literal.
  const zone = writerZone === undefined ? '@@global.time_zone' : `'${writerZone}'`;
  const local = `CONVERT_TZ(${utc}, '+00:00', ${zone})`;
  const value =
    type === 'timestamp'
      ? `DATE_FORMAT(${utc}, '%Y-%m-%d %H:%i:%s.%f')`
      : type === 'datetime'
        ? `DATE_FORMAT(${local}, '%Y-%m-%d %H:%i:%s.%f')`
        : `DATE_FORMAT(${local}, '%Y-%m-%d')`;
  const [row] = await db.query<{
    bound: string | null;
    ageUs: string | number | null;
    lowered: string | number | null;
  }>(
    `SELECT ${value} AS bound, TIMESTAMPDIFF(MICROSECOND, o.oldest, NOW(6)) AS ageUs, ${trxSide} < ${nowSide} AS lowered FROM ${oldest} AS o`,
  );
  if (!row?.bound) {
    throw new SourceError(
      'SOURCE_TIME_ZONE',
      writerZone === undefined
        ? "the server's @@global.time_zone cannot be converted from UTC (named zones need the time zone tables: mysql_tzinfo_to_sql); load them or set a numeric time_zone"
        : `cursorTimeZone "${writerZone}" cannot be converted from UTC on this server (named zones need the time zone tables: mysql_tzinfo_to_sql); load them or give the offset, e.g. "-05:00"`,
    );
  }
  // Taken once the listing has been read: the cache it came from was filled before this moment.
  const readAt = Date.now();
  const stalled = row.ageUs !== null && Number(row.ageUs) > stallAfterMs * 1000;
  return {
    literal: `'${row.bound}'`,
    ...(Number(row.lowered) === 1 ? { recheckAt: readAt + TRX_CACHE_MS } : {}),
    warnings: stalled ? await holders(db, stallAfterMs, undefined, 'holds the incremental bound back') : [],
  };
}

/**
 * A DATETIME value as UTC microseconds, converted from `@@global.time_zone` like the bound of
 * DATETIME cursors; undefined when the server cannot convert (a named zone without the time
 * zone tables).
 */
export async function wallClockToUtcMicros(
  db: MysqlConnection,
  wallText: string,
  writerZone?: string,
): Promise<bigint | undefined> {
  // In the writers' zone when the table names one (cursorTimeZone), as the bound is computed.
  const [row] = await db.query<{ us: string | null }>(
    "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', CONVERT_TZ(CAST(? AS DATETIME(6)), COALESCE(?, @@global.time_zone), '+00:00')) AS CHAR) AS us",
    [wallText, writerZone ?? null],
  );
  return row?.us == null ? undefined : BigInt(row.us);
}

export interface HighWaterBound {
  /** The highest committed cursor value (raw text bytes), or null when no row has a cursor value. */
  readonly mark: Buffer | null;
  /** True when open transactions did not end in time: the page must not be read now. */
  readonly held: boolean;
  readonly warnings: BoundHeldWarning[];
}

/**
 * Reads the high-water bound for a non-time cursor: the highest committed cursor value, then
 * waits (up to `settleMs`) until every transaction open at that moment has ended; `held` when
 * some did not (the caller reads nothing this time and reports the holders).
 *
 * The mark is read by one statement and the open transactions by a later one, from a listing
 * proven newer than the mark (`freshListing` starts after it): a transaction not listed has
 * either committed (and the page, read later, sees it) or had not yet touched InnoDB when the
 * mark was read, so any AUTO_INCREMENT value it takes is above the mark. A listed transaction
 * that has in fact ended leaves the cache once it is refilled, so polling sees it go.
 * Without the privilege (lagOnly) nothing can be listed: the page waits `settleMs` instead, so a
 * value handed out before the mark has had the lag to commit.
 */
export async function highWaterBound(
  db: MysqlConnection,
  markSql: string,
  settleMs: number,
  canSeeTransactions: boolean,
  signal?: AbortSignal,
): Promise<HighWaterBound> {
  const [markRow] = await db.raw(markSql, signal);
  const mark = markRow?.[0] ?? null;
  if (mark === null) return { mark: null, held: false, warnings: [] };
  if (!canSeeTransactions) {
    if (settleMs > 0) await sleep(settleMs, signal);
    return { mark, held: false, warnings: [] };
  }
  // The listing must be newer than the mark: `freshListing` starts after the mark was read.
  const listing = await freshListing(db, signal);
  if (!listing) {
    return { mark, held: true, warnings: [staleListingWarning('the page is held back (high-water cursor)')] };
  }
  if (listing.others.length === 0) return { mark, held: false, warnings: [] };
  // trx_id is BIGINT UNSIGNED: listed as digits, never as quoted strings (compared as doubles).
  const ids = listing.others.map((o) => o.trxId).filter((id) => /^\d+$/.test(id));
  const inList = `t.trx_id IN (${ids.join(', ')})`;
  const deadline = Date.now() + settleMs;
  for (;;) {
    const [still] = await db.query<{ n: string | number }>(
      `SELECT COUNT(*) AS n FROM ${OTHER_TRANSACTIONS} AND ${inList}`,
    );
    if (Number(still!.n) === 0) return { mark, held: false, warnings: [] };
    if (Date.now() >= deadline) {
      // Every transaction we waited for is reported, not only old ones: nothing is read until they end.
      return {
        mark,
        held: true,
        warnings: await holders(db, -1, inList, 'holds the page back (high-water cursor)'),
      };
    }
    // A listing older than `listing` can only still show these transactions (the safe side).
    await sleep(LISTING_POLL_MS, signal);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(done, ms);
    function done() {
      signal?.removeEventListener('abort', abort);
      resolve();
    }
    function abort() {
      clearTimeout(timer);
      reject(signal?.reason);
    }
    signal?.addEventListener('abort', abort, { once: true });
  });
}

interface HolderRow {
  trxId: string | number;
  threadId: string | number;
  user: string | null;
  host: string | null;
  command: string | null;
  started: string;
  ageUs: string | number;
}

/** Transactions open longer than `olderThanMs` (and matching `extra`), oldest first, as warnings. */
async function holders(
  db: MysqlConnection,
  olderThanMs: number,
  extra: string | undefined,
  what: string,
): Promise<BoundHeldWarning[]> {
  const age = `TIMESTAMPDIFF(MICROSECOND, ${TRX_STARTED_UTC}, NOW(6))`;
  const rows = await db.query<HolderRow>(
    `SELECT t.trx_id AS trxId, t.trx_mysql_thread_id AS threadId, p.USER AS user, p.HOST AS host, p.COMMAND AS command,
            DATE_FORMAT(${TRX_STARTED_UTC}, '%Y-%m-%d %H:%i:%s') AS started, ${age} AS ageUs
     FROM information_schema.INNODB_TRX AS t LEFT JOIN information_schema.PROCESSLIST AS p ON p.ID = t.trx_mysql_thread_id
     WHERE t.trx_mysql_thread_id <> CONNECTION_ID() AND ${age} > ${Math.round(olderThanMs * 1000)}${extra ? ` AND ${extra}` : ''}
     ORDER BY t.trx_started`,
  );
  return rows.map((r) => {
    const holder: BoundHolder = {
      trxId: String(r.trxId),
      threadId: Number(r.threadId),
      user: r.user,
      host: r.host,
      command: r.command,
      trxStarted: r.started,
      ageMs: Math.floor(Number(r.ageUs) / 1000),
    };
    return {
      code: 'BOUND_HELD' as const,
      message:
        `session thread ${holder.threadId} (user ${holder.user ?? '?'}@${holder.host ?? '?'}, ${holder.command === 'Sleep' ? 'idle in transaction' : (holder.command ?? 'unknown state')}) ` +
        `has had transaction ${holder.trxId} open since ${holder.trxStarted} UTC (${Math.round(holder.ageMs / 1000)} s) and ${what}; ` +
        `end it (KILL ${holder.threadId}) or fix the client that leaves transactions open`,
      holder,
    };
  });
}
