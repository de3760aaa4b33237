/**
 * The constructor options every SQL source takes (Postgres and MySQL/MariaDB alike), and their
 * defaults; and the connection options among them, which every connection of a driver takes
 * (its connect.ts `ConnectOptions`). Each driver documents only what differs (which privilege,
 * which catalog view).
 */
import type { Clock } from '../contracts/state.js';

export interface SqlSourceOptions {
  /** Connection URL, e.g. `postgres://user:pw@host:5432/db` or `mysql://user:pw@host:3306/db`. */
  readonly url: string;
  /** Connection timeout. Default 10 000 ms. */
  readonly connectTimeoutMs?: number;
  /**
   * Time cursors: rows newer than (oldest open transaction start, or now) minus this wait for a
   * later page; absorbs clock skew of application-set cursors. Non-time cursors: how long a
   * page waits for transactions open at the high-water read to end. Default 5 000 ms.
   */
  readonly lagMs?: number;
  /**
   * Run without the privilege to see other sessions' transactions (Postgres `pg_read_all_stats`,
   * MySQL `PROCESS`) and rely on the lag alone. Default false: refuse without it, with the GRANT.
   */
  readonly lagOnly?: boolean;
  /** How the server shows this client (Postgres `application_name`, MySQL `program_name`). Default `tidemark`. */
  readonly applicationName?: string;
  /** A transaction open longer than this that holds the bound back is reported (`BOUND_HELD`). Default 60 000 ms. */
  readonly stallAfterMs?: number;
  /**
   * The time zone writers stamp `timestamp` (without time zone) / DATETIME / DATE cursors in, when
   * it is not the database's default (JDBC and many ORMs set the session zone to the client's):
   * an IANA name (`America/New_York`) or an offset (`-05:00`). The safe upper bound is computed
   * in it; otherwise late commits of writers west of the default zone fall below the bound.
   * Ignored for `timestamptz` / TIMESTAMP cursors, which are absolute instants.
   */
  readonly cursorTimeZone?: string;
  /** How the spec names this source (e.g. `sources.app`), for error messages. */
  readonly sourceName?: string;
  /** The clock of `__ingest_ts` (epoch ms). Default `Date.now`. */
  readonly clock?: Clock;
}

export const DEFAULT_LAG_MS = 5_000;
export const DEFAULT_STALL_AFTER_MS = 60_000;

/** Where a SQL driver's connection goes and how messages name it (connect.ts `ConnectOptions`). */
export interface ConnectionOptions {
  readonly url: string;
  readonly connectTimeoutMs?: number;
  readonly sourceName?: string;
  readonly applicationName?: string;
}

/** The connection options among `o` (a source's options, the CDC settings), none of the rest. */
export function connectionOf(o: ConnectionOptions): ConnectionOptions {
  return {
    url: o.url,
    ...(o.connectTimeoutMs !== undefined ? { connectTimeoutMs: o.connectTimeoutMs } : {}),
    ...(o.sourceName !== undefined ? { sourceName: o.sourceName } : {}),
    ...(o.applicationName !== undefined ? { applicationName: o.applicationName } : {}),
  };
}
