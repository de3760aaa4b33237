/**
 * The MySQL/MariaDB driver's connection: one mysql2 connection per source, opened lazily,
 * configured so values arrive as exact text (nothing is parsed into `Date` or a lossy `number`),
 * in UTC (`time_zone = '+00:00'`) and as UTF-8 (`SET NAMES utf8mb4`), on a server version we
 * support; and the one place that turns connection failures into one-line `SourceError`s.
 *
 * Owns: client options, session settings, the server version check, error translation, and the
 * lifetime of the connection (a connection that died is replaced on next use). Must never log or
 * embed a password: every message names `user@host:port`, and a URL is only quoted through
 * `redact` (shared/observability/redact.ts).
 */
import mysql from 'mysql2';
import type { Connection as PromiseConnection } from 'mysql2/promise';
import { SourceError } from '../../contracts/errors.js';
import { redact } from '../../observability/redact.js';

/** Connection options of a MySQL/MariaDB source. */
export interface ConnectOptions {
  /** `mysql://user:password@host:port/db` (query parameters such as `ssl` pass through to mysql2). */
  readonly url: string;
  /** Give up connecting after this long (default 10 000 ms). */
  readonly connectTimeoutMs?: number;
  /** How the spec names this source (e.g. `sources.app`), used in error messages. */
  readonly sourceName?: string;
  /** `program_name` connection attribute (performance_schema.session_connect_attrs). Default `tidemark`. */
  readonly applicationName?: string;
}

/** Where a connection goes, for messages: never includes the password. */
export interface Endpoint {
  readonly user: string;
  readonly host: string;
  readonly port: number;
  /** The URL's default database ('' when none). */
  readonly database: string;
  /** `sources.x` or "the source URL". */
  readonly source: string;
}

/** What the server is, read once per connection. */
export interface ServerInfo {
  readonly flavor: 'mariadb' | 'mysql';
  /** `VERSION()` as the server prints it. */
  readonly version: string;
  readonly major: number;
  readonly minor: number;
  /** `CONNECTION_ID()`: excluded from the transactions that bound a page. */
  readonly connectionId: number;
}

/** One row of a raw query: each value the bytes of the server's text output, or null. */
export type RawRow = (Buffer | null)[];

export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** The oldest releases we support (docs/decisions/0005-supported-server-versions.md). */
export const MIN_MARIADB: readonly [number, number] = [10, 5];
export const MIN_MYSQL: readonly [number, number] = [8, 0];

/**
 * Session settings run on every new connection, before anything else:
 * - NAMES utf8mb4: text of any column charset (latin1 included) is converted by the server to
 *   UTF-8, whose bytes go into Arrow as they are.
 * - time_zone '+00:00': TIMESTAMP values are printed, and TIMESTAMP literals read, in UTC, so
 *   their text is the UTC instant. Literals never carry an offset: MariaDB drops it silently.
 */
const SESSION_SETUP = "SET NAMES utf8mb4, time_zone = '+00:00'";

/** Parses the parts of a connection URL that messages may show. */
export function endpointOf(url: string, sourceName?: string): Endpoint {
  const source = sourceName ?? 'the source URL';
  let u: URL;
  try {
    u = new URL(url);
  } catch (e) {
    throw new SourceError(
      'SOURCE_URL_INVALID',
      `${source} is not a valid URL; percent-encode @ : / # ? % in the user and password (docs/errors.md): ${redact(url)}`,
      { cause: e },
    );
  }
  if (u.protocol !== 'mysql:' && u.protocol !== 'mariadb:') {
    throw new SourceError(
      'SOURCE_URL_INVALID',
      `${source} must start with mysql:// or mariadb://, got ${u.protocol}//`,
    );
  }
  return {
    user: decodeURIComponent(u.username) || 'root',
    host: u.hostname || 'localhost',
    port: u.port ? Number(u.port) : 3306,
    database: decodeURIComponent(u.pathname.replace(/^\//, '')),
    source,
  };
}

/**
 * Reads `VERSION()` text into flavor and version, refusing releases older than we support.
 * @example parseServerVersion('10.11.6-MariaDB-0+deb12u1-log') // { flavor: 'mariadb', major: 10, minor: 11, ... }
 */
export function parseServerVersion(version: string, at = 'the server'): Omit<ServerInfo, 'connectionId'> {
  const m = /^(\d+)\.(\d+)/.exec(version);
  if (!m)
    throw new SourceError(
      'SOURCE_VERSION_UNSUPPORTED',
      `${at} reports version "${version}", which tidemark cannot read`,
    );
  const flavor = /mariadb/i.test(version) ? 'mariadb' : 'mysql';
  const major = Number(m[1]);
  const minor = Number(m[2]);
  const [minMajor, minMinor] = flavor === 'mariadb' ? MIN_MARIADB : MIN_MYSQL;
  if (major < minMajor || (major === minMajor && minor < minMinor)) {
    throw new SourceError(
      'SOURCE_VERSION_UNSUPPORTED',
      `${at} runs ${flavor === 'mariadb' ? 'MariaDB' : 'MySQL'} ${version}; tidemark supports MariaDB ${MIN_MARIADB.join('.')}+ and MySQL ${MIN_MYSQL.join('.')}+ (docs/decisions/0005-supported-server-versions.md)`,
    );
  }
  return { flavor, version, major, minor };
}

interface Open {
  readonly core: mysql.Connection;
  readonly promise: PromiseConnection;
  readonly server: ServerInfo;
}

/**
 * One lazily opened connection with its session set up. Statements run one at a time, in call
 * order (mysql2 queues them); a connection that fails fatally is dropped and the next call opens
 * a new one.
 */
export class MysqlSession {
  readonly endpoint: Endpoint;
  private readonly config: mysql.ConnectionOptions;
  private opening: Promise<Open> | undefined;
  /** The connection `opening` resolves to, once its handshake is done. */
  private current: mysql.Connection | undefined;

  constructor(opts: ConnectOptions) {
    this.endpoint = endpointOf(opts.url, opts.sourceName);
    this.config = {
      uri: opts.url,
      connectTimeout: opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
      // Exact text for everything mysql2 would otherwise turn into a Date or a rounded number
      // (ordinary queries only; page reads take raw bytes, see `each`).
      dateStrings: true,
      supportBigNumbers: true,
      bigNumberStrings: true,
      decimalNumbers: false,
      jsonStrings: true,
      charset: 'UTF8MB4_GENERAL_CI',
      multipleStatements: false,
      connectAttributes: { program_name: opts.applicationName ?? 'tidemark' },
    };
  }

  /** The server's flavor and version (opens the connection). */
  async server(): Promise<ServerInfo> {
    return (await this.open()).server;
  }

  /** Runs `sql` with `?` placeholders (client-side escaped) and returns its rows as objects. */
  async query<T>(sql: string, values: readonly unknown[] = []): Promise<T[]> {
    const { promise } = await this.open();
    try {
      // Without values the text is sent as is: a `?` inside a quoted name stays a `?`.
      const [rows] =
        values.length > 0 ? await promise.query(sql, values as unknown[]) : await promise.query(sql);
      return rows as unknown as T[];
    } catch (e) {
      this.dropIfFatal(e);
      throw e;
    }
  }

  /**
   * Runs `sql` and hands each row to `onRow` as it arrives, as raw text bytes (`typeCast: false`,
   * one Buffer per value, sliced from the packet, no copy). Resolves once the server has sent
   * the whole result, so the connection is always left drained, even when `onRow` stops using
   * rows or throws (the first error thrown is rethrown after the end). Abort destroys the
   * connection (the next call opens a new one).
   */
  async each(sql: string, onRow: (row: RawRow) => void, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    const { core } = await this.open();
    await new Promise<void>((resolve, reject) => {
      let failure: unknown;
      let settled = false;
      const onAbort = () => {
        failure ??= signal?.reason ?? new Error('aborted');
        core.destroy();
        this.opening = undefined;
        finish();
      };
      const finish = () => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener('abort', onAbort);
        if (failure !== undefined) reject(failure);
        else resolve();
      };
      const q = core.query({ sql, rowsAsArray: true, typeCast: false });
      q.on('result', (row: unknown) => {
        if (failure !== undefined) return;
        try {
          onRow(row as RawRow);
        } catch (e) {
          failure = e;
        }
      });
      q.on('error', (e: Error) => {
        failure ??= e;
        this.dropIfFatal(e);
      });
      q.on('end', finish);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Runs `sql` and returns every row as raw text bytes (see `each`). */
  async raw(sql: string, signal?: AbortSignal): Promise<RawRow[]> {
    const rows: RawRow[] = [];
    await this.each(sql, (r) => rows.push(r), signal);
    return rows;
  }

  /** Closes the connection (waits for the running statement). */
  async close(): Promise<void> {
    const opening = this.opening;
    this.opening = undefined;
    const open = await opening?.catch(() => undefined);
    if (!open) return;
    await open.promise.end().catch(() => open.core.destroy());
  }

  private open(): Promise<Open> {
    if (!this.opening) {
      const p = this.connect();
      this.opening = p;
      p.catch(() => {
        if (this.opening === p) this.opening = undefined;
      });
    }
    return this.opening;
  }

  private async connect(): Promise<Open> {
    const core = mysql.createConnection(this.config);
    // Fatal errors after the handshake (server gone, connection killed) arrive here when no
    // statement is running; drop the connection so the next call reconnects.
    core.on('error', () => {
      if (core === this.current) this.opening = undefined;
    });
    await new Promise<void>((resolve, reject) => core.connect((err) => (err ? reject(err) : resolve())));
    this.current = core;
    const promise = core.promise();
    try {
      await promise.query(SESSION_SETUP);
      const [rows] = await promise.query('SELECT VERSION() AS version, CONNECTION_ID() AS id');
      const row = (rows as { version: string; id: number | string }[])[0]!;
      const at = `${this.endpoint.host}:${this.endpoint.port}`;
      return {
        core,
        promise,
        server: { ...parseServerVersion(row.version, at), connectionId: Number(row.id) },
      };
    } catch (e) {
      core.destroy();
      throw e;
    }
  }

  private dropIfFatal(e: unknown): void {
    if ((e as { fatal?: boolean }).fatal) this.opening = undefined;
  }
}

/** Node socket error codes that mean "nothing answered at host:port". */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNRESET',
  'EPIPE',
  'PROTOCOL_CONNECTION_LOST',
]);
const NAME_NOT_RESOLVED = new Set(['ENOTFOUND', 'EAI_AGAIN']);

/**
 * Turns a connection-phase failure into a one-line `SourceError` saying what to check; returns
 * undefined for anything else (a query error), which the caller handles with its own context.
 */
export function translateConnectError(
  e: unknown,
  ep: Endpoint,
  connectTimeoutMs?: number,
): SourceError | undefined {
  if (!(e instanceof Error)) return undefined;
  const code = String((e as { code?: unknown }).code ?? '');
  const at = `${ep.host}:${ep.port}`;
  switch (code) {
    case 'ER_ACCESS_DENIED_ERROR':
      return new SourceError(
        'SOURCE_AUTH_FAILED',
        `access denied for user "${ep.user}" at ${at}; check the user and password in ${ep.source} (and that the account may connect from this host)`,
        { cause: e },
      );
    case 'ER_HOST_NOT_PRIVILEGED':
      return new SourceError(
        'SOURCE_AUTH_FAILED',
        `${at} does not let this host connect: ${firstLine(e.message)}; create the account for this client's host (e.g. 'user'@'%')`,
        { cause: e },
      );
    case 'ER_BAD_DB_ERROR':
      return new SourceError(
        'SOURCE_DATABASE_MISSING',
        `database "${ep.database}" does not exist at ${at}; fix the database name in ${ep.source}`,
        { cause: e },
      );
    case 'ER_DBACCESS_DENIED_ERROR':
      return new SourceError(
        'SOURCE_PRIVILEGE',
        `user "${ep.user}" may not use database "${ep.database}" at ${at}; run GRANT SELECT ON \`${ep.database}\`.* TO '${ep.user}'@'%'; (or the account's host)`,
        { cause: e },
      );
    case 'ER_CON_COUNT_ERROR':
      return new SourceError(
        'SOURCE_UNAVAILABLE',
        `${at} has no free connection slots (too many connections); retry later or raise max_connections`,
        {
          cause: e,
        },
      );
  }
  if (UNREACHABLE.has(code)) {
    return new SourceError(
      'SOURCE_UNREACHABLE',
      `cannot connect to MySQL at ${at} (${code}); check the host and port in ${ep.source} and that the server accepts TCP connections from here (security group, firewall, bind-address)`,
      { cause: e },
    );
  }
  if (NAME_NOT_RESOLVED.has(code)) {
    return new SourceError(
      'SOURCE_UNREACHABLE',
      `cannot resolve host "${ep.host}" (${code}); check the host in ${ep.source}`,
      { cause: e },
    );
  }
  if (code === 'ETIMEDOUT') {
    const seconds = Math.max(1, Math.ceil((connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS) / 1000));
    return new SourceError(
      'SOURCE_TIMEOUT',
      `no answer from MySQL at ${at} within ${seconds} s; check network reachability (VPC, security group, firewall) or raise connectTimeoutSeconds`,
      { cause: e },
    );
  }
  if (/SSL|TLS|CERT/i.test(code) || /\b(SSL|TLS|certificate)\b/i.test(e.message)) {
    return new SourceError(
      'SOURCE_TLS',
      `TLS to ${at} failed: ${firstLine(e.message)}; check the ssl parameters in ${ep.source}`,
      {
        cause: e,
      },
    );
  }
  return undefined;
}

function firstLine(s: string): string {
  return s.split('\n')[0]!.trim();
}
