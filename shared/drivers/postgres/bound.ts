/**
 * The safe upper bound of an incremental page, and the privilege it needs.
 *
 * Owns: what "safe" means for each cursor kind (docs/cursor.md), the pg_stat_activity queries,
 * and the reports of sessions that hold the bound back. Must never read the page itself: the
 * bound is ALWAYS computed by a statement that runs before the page's statement (see
 * `timeBound`), and never silently waits forever (a held page is reported, not hidden).
 *
 * Two kinds:
 * - Time cursors (timestamp, timestamptz, date): rows with cursor >= bound wait for a later page,
 *   bound = least(clock_timestamp(), start of the oldest other open transaction) - lag.
 *   A transaction still open when the bound is read can only write cursor values >= its own
 *   start (now() is the transaction start), so nothing it commits later lands below the bound;
 *   `lag` absorbs clocks that are not the database's (application-set cursors) and the moment
 *   between a transaction taking its start time and appearing in pg_stat_activity.
 * - Other cursors (integers, numeric, text, uuid...): no clock to bound by. The page is capped at
 *   the highest cursor value committed when the bound was read (the high-water mark), and is
 *   read only once every transaction that was open at that moment has ended. For values handed
 *   out in increasing order (a sequence without per-session caching) this misses nothing: a
 *   value below the mark was handed out before the mark, so its transaction was open (and was
 *   waited for) or had committed. Values NOT handed out in order (app-generated ids, sequences
 *   with CACHE > 1, ORM id blocks, text) can still commit below pages already read: the docs say
 *   so and recommend a timestamp cursor set by the database or CDC.
 */
import { SourceError } from '../../contracts/errors.js';
import type { Warning } from '../../contracts/source.js';
import type { Sql } from './connect.js';

/** A session that holds the bound back, reported as a warning (code `BOUND_HELD`). */
export interface BoundHolder {
  readonly pid: number;
  readonly usename: string | null;
  readonly applicationName: string | null;
  readonly state: string | null;
  /** The transaction start as Postgres prints it. */
  readonly xactStart: string;
  readonly ageMs: number;
}

/** A `Warning` with the holder's details, so the engine can log them as fields. */
export interface BoundHeldWarning extends Warning {
  readonly code: 'BOUND_HELD';
  readonly holder: BoundHolder;
}

/**
 * Sessions whose open transactions can write rows we have not read yet: every backend of this
 * database except our own, walsenders (they stream, they do not write user rows) and autovacuum
 * (it runs long and never writes user rows). Kept as a deny list so a new kind of writer (a
 * background worker running jobs) holds the bound back rather than being missed.
 */
const OTHER_TRANSACTIONS = `
  SELECT pid, usename::text AS usename, application_name, state, xact_start
  FROM pg_stat_activity
  WHERE datname = current_database()
    AND pid <> pg_backend_pid()
    AND xact_start IS NOT NULL
    AND backend_type NOT IN ('walsender', 'autovacuum worker', 'autovacuum launcher')`;

const HOLDERS_JSON = `
  (SELECT coalesce(json_agg(json_build_object(
      'pid', pid, 'usename', usename, 'applicationName', application_name, 'state', state,
      'xactStart', xact_start::text,
      'ageMs', floor(extract(epoch FROM clock_timestamp() - xact_start) * 1000)::bigint)
    ORDER BY xact_start), '[]')::text
   FROM others WHERE xact_start < clock_timestamp() - $2::int * interval '1 millisecond')`;

/**
 * Refuses to run when the role cannot see other sessions' transactions (pg_stat_activity hides
 * `xact_start` of other roles' sessions) or the server is a standby (it cannot see the primary's),
 * unless the table chose `lagOnly`.
 */
export async function checkActivityPrivilege(sql: Sql, table: string, lagOnly: boolean): Promise<void> {
  if (lagOnly) return;
  const [row] = await sql.unsafe<{ role: string; ok: boolean; standby: boolean }[]>(
    `SELECT current_user::text AS role,
            (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
              OR pg_has_role(current_user, 'pg_read_all_stats', 'member') AS ok,
            pg_is_in_recovery() AS standby`,
  );
  if (row?.standby) {
    // A standby's pg_stat_activity lists its own sessions only: the primary's open
    // transactions, the ones that commit late, are invisible, so the bound would protect nothing.
    throw new SourceError(
      'SOURCE_STANDBY',
      `${table}: the source is a standby (read replica), where the primary's open transactions are invisible, so late commits could be skipped; ` +
        'point the source at the primary, or set lagOnly: true with a lag longer than your longest write transaction plus the replica delay',
    );
  }
  if (row?.ok) return;
  const role = row?.role ?? 'the source role';
  throw new SourceError(
    'SOURCE_PRIVILEGE',
    `${table}: role "${role}" cannot see other sessions' open transactions, so late commits could be skipped; ` +
      `run GRANT pg_read_all_stats TO ${quoteRole(role)}; or set lagOnly: true for this table to rely on the lag alone`,
  );
}

function quoteRole(role: string): string {
  return /^[a-z_][a-z0-9_$]*$/.test(role) ? role : `"${role.replace(/"/g, '""')}"`;
}

/** The SQL type a time bound is cast to, matching the cursor column. */
export type TimeBoundType = 'timestamptz' | 'timestamp' | 'date';

export interface TimeBound {
  /** The bound as text of the cursor's type (for a bind parameter or a quoted literal). */
  readonly literal: string;
  readonly warnings: BoundHeldWarning[];
}

/**
 * Reads the bound for a time cursor. MUST run as its own statement BEFORE the page's statement.
 *
 * The race this ordering prevents: a page statement takes its snapshot when it starts. Were the
 * bound read inside it, a transaction committing after that snapshot but before the
 * pg_stat_activity read would be neither visible to the page (too late for the snapshot) nor
 * listed as open (already gone), and its rows below the bound would be skipped for good. Read
 * first, every transaction is either listed (and bounds the page) or committed before the
 * page's snapshot (and visible to it).
 *
 * `clock_timestamp()`, not `now()`: now() is the statement's start, which is earlier than the
 * moment pg_stat_activity is read; the real clock is what a new transaction's start is compared
 * to. A `timestamp without time zone` cursor is compared in the session's time zone (the
 * database default, which writers' `now()::timestamp` also uses) or, when writers set their own
 * zone, in `writerZone` (an IANA name or `±HH:MM`); `date` cursors get the date of the bound, so
 * the current day is read once it is over.
 */
export async function timeBound(
  sql: Sql,
  type: TimeBoundType,
  lagMs: number,
  stallAfterMs: number,
  writerZone?: string,
): Promise<TimeBound> {
  const instant = `(least(clock_timestamp(), (SELECT min(xact_start) FROM others)) - $1::int * interval '1 millisecond')`;
  // AT TIME ZONE with an interval reads `-05:00` as UTC-5 (a text offset would be POSIX, sign
  // inverted); a name is looked up in the server's zone database.
  const zone =
    writerZone === undefined ? undefined : /^[+-]\d{2}:\d{2}$/.test(writerZone) ? `$3::interval` : `$3::text`;
  const value =
    type === 'timestamptz' || zone === undefined
      ? `${instant}::${type}`
      : `(${instant} AT TIME ZONE ${zone})::${type}`;
  const [row] = await sql.unsafe<{ bound: string; holders: string }[]>(
    `WITH others AS (${OTHER_TRANSACTIONS})
     SELECT (${value})::text AS bound,
            ${HOLDERS_JSON} AS holders`,
    zone === undefined ? [lagMs, stallAfterMs] : [lagMs, stallAfterMs, writerZone!],
  );
  return { literal: row!.bound, warnings: holderWarnings(row!.holders, 'holds the incremental bound back') };
}

/**
 * A wall-clock `timestamp` as UTC microseconds, read in the same zone the bound compares such
 * cursors in (the session's, i.e. the database default: connect.ts leaves TimeZone alone).
 */
export async function wallClockToUtcMicros(
  sql: Sql,
  wallText: string,
  writerZone?: string,
): Promise<bigint | undefined> {
  // In the writers' zone when the table names one (cursorTimeZone), as the bound is computed.
  const zone =
    writerZone === undefined ? undefined : /^[+-]\d{2}:\d{2}$/.test(writerZone) ? '$2::interval' : '$2::text';
  const instant =
    zone === undefined ? '$1::text::timestamp::timestamptz' : `($1::text::timestamp AT TIME ZONE ${zone})`;
  const [row] = await sql.unsafe<{ us: string | null }[]>(
    `SELECT (extract(epoch FROM ${instant}) * 1000000)::bigint::text AS us`,
    zone === undefined ? [wallText] : [wallText, writerZone!],
  );
  return row?.us == null ? undefined : BigInt(row.us);
}

export interface HighWaterBound {
  /** The highest committed cursor value as text, or null when no row has a cursor value. */
  readonly literal: string | null;
  /** True when open transactions did not end in time: the page must not be read now. */
  readonly held: boolean;
  readonly warnings: BoundHeldWarning[];
}

const SETTLE_POLL_MS = 25;

/**
 * Reads the high-water bound for a non-time cursor: the highest committed cursor value, then
 * waits (up to `settleMs`) until every transaction open at that moment has ended. `held` when
 * some did not: the caller reads nothing this time and reports the holders.
 */
export async function highWaterBound(
  sql: Sql,
  qualifiedTable: string,
  quotedCursor: string,
  settleMs: number,
  stallAfterMs: number,
): Promise<HighWaterBound> {
  // One statement: its snapshot gives the mark, and pg_stat_activity is read after that snapshot,
  // so a transaction is either in the snapshot, or listed, or commits after the listing, in
  // which case it began after the mark was handed out and writes only higher values.
  const [row] = await sql.unsafe<{ hw: string | null; open: string }[]>(
    `WITH others AS (${OTHER_TRANSACTIONS})
     SELECT (SELECT t.${quotedCursor}::text AS mark FROM ${qualifiedTable} AS t
             WHERE t.${quotedCursor} IS NOT NULL ORDER BY t.${quotedCursor} DESC LIMIT 1) AS hw,
            (SELECT coalesce(json_agg(json_build_object('pid', pid, 'xactStart', xact_start::text)), '[]')::text
             FROM others) AS open`,
  );
  const hw = row!.hw;
  const open = JSON.parse(row!.open) as { pid: number; xactStart: string }[];
  if (hw === null || open.length === 0) return { literal: hw, held: false, warnings: [] };
  const deadline = Date.now() + settleMs;
  const pids = `{${open.map((o) => o.pid).join(',')}}`;
  const starts = `{${open.map((o) => `"${o.xactStart}"`).join(',')}}`;
  for (;;) {
    const [still] = await sql.unsafe<{ n: string; holders: string }[]>(
      `WITH others AS (${OTHER_TRANSACTIONS}
         AND (pid, xact_start) IN (SELECT * FROM unnest($1::text::int[], $3::text::timestamptz[])))
       SELECT (SELECT count(*) FROM others)::text AS n, ${HOLDERS_JSON} AS holders`,
      [pids, stallAfterMs, starts],
    );
    if (still!.n === '0') return { literal: hw, held: false, warnings: [] };
    if (Date.now() >= deadline) {
      // Report every session we waited for when the page is held back entirely, not only the
      // stalled ones: nothing is read until they end.
      const [all] = await sql.unsafe<{ holders: string }[]>(
        `WITH others AS (${OTHER_TRANSACTIONS}
           AND (pid, xact_start) IN (SELECT * FROM unnest($1::text::int[], $3::text::timestamptz[])))
         SELECT ${HOLDERS_JSON} AS holders`,
        [pids, 0, starts],
      );
      return {
        literal: hw,
        held: true,
        warnings: holderWarnings(all!.holders, 'holds the page back (high-water cursor)'),
      };
    }
    await new Promise((r) => setTimeout(r, SETTLE_POLL_MS));
  }
}

function holderWarnings(json: string, what: string): BoundHeldWarning[] {
  const holders = JSON.parse(json) as BoundHolder[];
  return holders.map((h) => ({
    code: 'BOUND_HELD',
    message:
      `session pid ${h.pid} (user ${h.usename ?? '?'}, application '${h.applicationName ?? ''}', ${h.state ?? 'unknown state'}) ` +
      `has had a transaction open since ${h.xactStart} (${Math.round(h.ageMs / 1000)} s) and ${what}; ` +
      `end it (pg_terminate_backend(${h.pid})) or fix the client that leaves transactions open`,
    holder: h,
  }));
}
