/**
 * The MySQL/MariaDB driver's connection: one mysql2 connection per source, opened lazily,
 * configured so values arrive as exact text (nothing is parsed into `Date` or a lossy `number`),
 * in UTC (`time_zone = '+00:00'`) and as UTF-8 (`SET NAMES utf8mb4`), on a server version we
 * support; and the one place that turns connection failures into one-line `SourceError`s.
 *
 * Owns: client options, session settings, the server version check, error translation, and the
 * lifetime of the connection: its setup is bounded by the connect timeout, a connection that dies
 * fails what runs on it at once (`SOURCE_CONNECTION_LOST`) and is replaced on next use, and an
 * abandoned one is also KILLed at the server. Must never log or embed a password: every message
 * names `user@host:port`, and a URL is only quoted through `redact`
 * (shared/observability/redact.ts). Also the session's account as GRANT statements name it
 * (`currentAccount`), which the bound, introspection and both preflights quote in their fixes.
 * How a streaming statement's rows reach the caller is wire/row-stream.ts's.
 */
import mysql, { type FieldPacket } from 'mysql2';
import { SourceError } from '../../contracts/errors.js';
import {
  databaseMissing,
  firstLine,
  type NetworkFailures,
  networkError,
  parseSourceUrl,
} from '../connect-errors.js';
import {
  type ConnectTarget,
  connectTimeoutError,
  DEFAULT_CONNECT_TIMEOUT_MS,
  withinConnectTimeout,
} from '../connect-timeout.js';
import {
  binaryRowPackets,
  type RowDelivery,
  rowEvents,
  streamStatement,
  textRowPackets,
} from './wire/row-stream.js';

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
export interface Endpoint extends ConnectTarget {
  readonly user: string;
  /** The URL's default database ('' when none). */
  readonly database: string;
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
  const u = parseSourceUrl(url, source, ['mysql:', 'mariadb:']);
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
  readonly server: ServerInfo;
  /** Statements running on this connection, each with the function that fails it from outside. */
  readonly running: Set<(e: unknown) => void>;
  /** Set once the connection is over (lost or abandoned): what every statement on it fails with. */
  ended?: () => Promise<unknown>;
}

/**
 * Errors with which the server itself says it ended the connection (they arrive as a statement's
 * error, before the socket closes), and what each means.
 */
const SERVER_ENDED: ReadonlyMap<number, string> = new Map([
  [1053, 'the server is shutting down'],
  [1927, 'the server killed it (KILL CONNECTION)'],
  [4031, 'the server closed it as idle (wait_timeout)'],
]);

/** Whether `e` means the connection is over (not just this statement failed). */
function endsConnection(e: unknown): boolean {
  const err = e as { fatal?: boolean; errno?: number };
  return err.fatal === true || SERVER_ENDED.has(Number(err.errno));
}

/**
 * One lazily opened connection with its session set up. Statements run one at a time, in call
 * order (mysql2 queues them). A connection that dies fails every statement on it at once with
 * `SOURCE_CONNECTION_LOST`, and the next call opens a new one; `abandon` drops it on purpose.
 */
export class MysqlConnection {
  readonly endpoint: Endpoint;
  private readonly config: mysql.ConnectionOptions;
  private readonly connectTimeoutMs: number;
  private opening: Promise<Open> | undefined;
  /** KILLs sent for abandoned connections; `close` waits for them. */
  private readonly kills = new Set<Promise<void>>();

  constructor(opts: ConnectOptions) {
    this.endpoint = endpointOf(opts.url, opts.sourceName);
    this.connectTimeoutMs = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.config = {
      uri: opts.url,
      connectTimeout: this.connectTimeoutMs,
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
    const open = await this.open();
    return this.statement<T[]>(open, (done, fail) => {
      const callback = (err: unknown, rows: unknown) => (err ? fail(err) : done(rows as T[]));
      // Without values the text is sent as is: a `?` inside a quoted name stays a `?`.
      if (values.length > 0) open.core.query(sql, values as unknown[], callback);
      else open.core.query(sql, callback);
    });
  }

  /**
   * Runs `sql` and hands each row to `onRow` as it arrives, as raw text bytes (`typeCast: false`,
   * one Buffer per value, sliced from the packet, no copy). Resolves once the server has sent
   * the whole result, so the connection is always left drained, even when `onRow` stops using
   * rows or throws (the first error thrown is rethrown after the end). Abort abandons the
   * connection (the next call opens a new one). `onFields` gets the result set's column
   * definitions before the first row (mysql2's 'fields' event); when it throws, no row is
   * delivered, the result is drained and the statement fails with what it threw.
   */
  async each(
    sql: string,
    onRow: (row: RawRow) => void,
    signal?: AbortSignal,
    onFields?: (fields: readonly FieldPacket[]) => void,
  ): Promise<void> {
    return this.stream(sql, signal, onFields, rowEvents<RawRow>(onRow));
  }

  /**
   * `each` with the row data phase taken over (the raw result-set reader, issue 15): `onRow`
   * gets each text-protocol row packet as its buffer and payload range `buf[start..end)` (one
   * length-encoded string per column; text-rows.ts walks it), instead of a row of Buffers.
   * mysql2 still connects, sends the statement, reads the column definitions (`onFields`, before
   * the first row, as in `each`), the end of the result, errors and the packet sequence; only
   * its row parser and per-row 'result' event are skipped. `buf` is mysql2's, never written
   * again (text-rows.ts `rowOf` says why): slices of it may be kept. Same drain, abort and
   * failure rules as `each`.
   */
  async eachRow(
    sql: string,
    onRow: (buf: Buffer, start: number, end: number) => void,
    signal?: AbortSignal,
    onFields?: (fields: readonly FieldPacket[]) => void,
  ): Promise<void> {
    return this.stream(sql, signal, onFields, textRowPackets(onRow));
  }

  /**
   * `eachRow` through the binary protocol (a prepared statement, COM_STMT_EXECUTE): `onRow` gets
   * each binary row packet's payload range (binary-rows.ts walks it). mysql2 prepares, executes,
   * reads the column definitions (`onFields`) and the end; its binary row parser, which it
   * builds per statement after the column definitions, is never built. Same drain, abort and
   * failure rules as `each`.
   */
  async eachBinaryRow(
    sql: string,
    onRow: (buf: Buffer, start: number, end: number) => void,
    signal?: AbortSignal,
    onFields?: (fields: readonly FieldPacket[]) => void,
  ): Promise<void> {
    return this.stream(sql, signal, onFields, binaryRowPackets(onRow), true);
  }

  /**
   * Runs `sql` as a streaming statement whose rows `rows` delivers (wire/row-stream.ts
   * `streamStatement`), on this connection's lifetime: an abort abandons the connection.
   */
  private async stream(
    sql: string,
    signal: AbortSignal | undefined,
    onFields: ((fields: readonly FieldPacket[]) => void) | undefined,
    rows: RowDelivery,
    binary = false,
  ): Promise<void> {
    signal?.throwIfAborted();
    const open = await this.open();
    const onAbort = () => this.abandon(signal?.reason ?? new Error('aborted'));
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await this.statement<void>(open, (done, fail) =>
        streamStatement(open.core, sql, binary, signal, onFields, rows, done, fail),
      );
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Runs `sql` and returns every row as raw text bytes (see `each`, also for `onFields`). */
  async raw(
    sql: string,
    signal?: AbortSignal,
    onFields?: (fields: readonly FieldPacket[]) => void,
  ): Promise<RawRow[]> {
    const rows: RawRow[] = [];
    await this.each(sql, (r) => rows.push(r), signal, onFields);
    return rows;
  }

  /** Runs `sql` (a `LIMIT 0` probe) and returns its result set's column definitions. */
  async fields(sql: string): Promise<readonly FieldPacket[]> {
    let got: readonly FieldPacket[] = [];
    await this.each(
      sql,
      () => undefined,
      undefined,
      (f) => {
        got = f;
      },
    );
    return got;
  }

  /**
   * Drops the connection at once, failing whatever runs on it with `reason`, and KILLs its
   * thread from a second connection: closing the socket does not stop a statement the server is
   * running (it would go on, holding its locks). The next statement opens a new connection.
   * Used when a read is given up (the engine's page timeout); a no-op without a connection.
   */
  abandon(reason: unknown): void {
    const opening = this.opening;
    this.opening = undefined;
    opening?.then(
      (open) => {
        if (open.ended) return;
        open.ended = () => Promise.resolve(reason);
        for (const fail of [...open.running]) fail(reason);
        open.core.destroy();
        this.kill(open.server.connectionId);
      },
      () => undefined,
    );
  }

  /** Closes the connection (waits for the running statement, and for KILLs `abandon` sent). */
  async close(): Promise<void> {
    const opening = this.opening;
    this.opening = undefined;
    const open = await opening?.catch(() => undefined);
    if (open && !open.ended) {
      await new Promise<void>((resolve) =>
        open.core.end((err) => {
          if (err) open.core.destroy();
          resolve();
        }),
      );
    }
    await Promise.all([...this.kills]);
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
    let open: Open | undefined;
    // After the setup, a connection that dies while no statement with a callback runs (idle, or
    // streaming a page) reports it only here: mysql2 tells nothing to a streaming statement.
    core.on('error', (e) => {
      if (open) this.lose(open, e);
    });
    const setup = (async () => {
      await new Promise<void>((resolve, reject) => core.connect((err) => (err ? reject(err) : resolve())));
      const promise = core.promise();
      await promise.query(SESSION_SETUP);
      const [rows] = await promise.query('SELECT VERSION() AS version, CONNECTION_ID() AS id');
      const row = (rows as { version: string; id: number | string }[])[0]!;
      const at = `${this.endpoint.host}:${this.endpoint.port}`;
      return { ...parseServerVersion(row.version, at), connectionId: Number(row.id) };
    })();
    try {
      // mysql2's connectTimeout ends with the handshake; the bound covers the session setup too.
      const server = await withinConnectTimeout(setup, this.connectTimeoutMs, () =>
        connectTimeoutError('MySQL', this.endpoint, this.connectTimeoutMs),
      );
      open = { core, server, running: new Set() };
      return open;
    } catch (e) {
      core.destroy();
      throw e;
    }
  }

  /**
   * Runs one statement on `open`. It settles when mysql2 reports its end or error, or when the
   * connection is over: mysql2 reports a lost connection only to statements that have a
   * callback, and a streaming statement has none, so without this it would wait forever.
   */
  private statement<T>(
    open: Open,
    run: (done: (value: T) => void, fail: (e: unknown) => void) => void,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (open.ended) {
        void open.ended().then(reject);
        return;
      }
      let settled = false;
      const settle = (finish: () => void) => {
        if (settled) return;
        settled = true;
        open.running.delete(failFromOutside);
        finish();
      };
      const failFromOutside = (e: unknown) => settle(() => reject(e));
      open.running.add(failFromOutside);
      run(
        (value) => settle(() => resolve(value)),
        (e) => {
          // The connection is over: `lose` fails this statement (and any other) with the cause.
          if (endsConnection(e)) this.lose(open, e);
          else settle(() => reject(e));
        },
      );
    });
  }

  /** Ends a connection that died: statements on it fail with SOURCE_CONNECTION_LOST. Once per connection. */
  private lose(open: Open, cause: unknown): void {
    if (open.ended) return;
    // The next statement opens a new connection; `opening` may already be a newer one.
    const opening = this.opening;
    void opening?.then(
      (current) => {
        if (current === open && this.opening === opening) this.opening = undefined;
      },
      () => undefined,
    );
    open.core.destroy();
    // Described on demand: a connection that died idle (wait_timeout between runs) needs no probe.
    let described: Promise<SourceError> | undefined;
    const ended = () => {
      described ??= this.connectionLost(open, cause);
      return described;
    };
    open.ended = ended;
    if (open.running.size === 0) return;
    void ended().then((err) => {
      for (const fail of [...open.running]) fail(err);
    });
  }

  /**
   * SOURCE_CONNECTION_LOST saying what ended the connection. When the server did not say (the
   * socket just closed, as after KILL CONNECTION or a crash), a new connection tells the two
   * apart: if it gets through, the server is up and our connection was killed or dropped.
   */
  private async connectionLost(open: Open, cause: unknown): Promise<SourceError> {
    const e = cause as { code?: unknown; errno?: unknown; message?: unknown };
    const code = String(e.code ?? 'unknown');
    const errno = typeof e.errno === 'number' ? `, errno ${e.errno}` : '';
    let what = SERVER_ENDED.get(Number(e.errno));
    if (what === undefined) {
      const failed = await this.probe();
      what =
        failed === undefined
          ? 'the server closed it and still accepts connections, so it was killed (KILL CONNECTION, a timeout such as wait_timeout) or a proxy dropped it'
          : `the server is gone: a new connection fails too (${failed}); it stopped, crashed or is restarting`;
    }
    const ep = this.endpoint;
    return new SourceError(
      'SOURCE_CONNECTION_LOST',
      `${ep.source}: lost the connection to MySQL at ${ep.host}:${ep.port} (connection id ${open.server.connectionId}) during a statement: ${what} (mysql2 ${code}${errno}: ${firstLine(String(e.message ?? ''))}); nothing past the last committed page was written; rerun (the next run resumes from there)`,
      { cause },
    );
  }

  /** Opens and closes one connection: undefined when it got through, else the code it failed with. */
  private probe(): Promise<string | undefined> {
    return new Promise((resolve) => {
      const c = mysql.createConnection(this.config);
      c.on('error', () => undefined);
      c.connect((err) => {
        c.destroy();
        resolve(err ? String((err as { code?: unknown }).code ?? err.message) : undefined);
      });
    });
  }

  /** KILLs a connection's thread from a new connection (users may always kill their own). */
  private kill(connectionId: number): void {
    const killer = mysql.createConnection(this.config);
    killer.on('error', () => undefined);
    const done = new Promise<void>((resolve) => {
      // Failure is fine: a server we cannot reach ends the thread by its own timeouts.
      killer.query(`KILL CONNECTION ${Number(connectionId)}`, () => {
        killer.destroy();
        resolve();
      });
    });
    this.kills.add(done);
    void done.then(() => this.kills.delete(done));
  }
}

/** `'user'@'host'` of the session's account, as GRANT statements name it. */
export async function currentAccount(db: MysqlConnection): Promise<string> {
  const [row] = await db.query<{ account: string }>('SELECT CURRENT_USER() AS account');
  const account = row?.account ?? 'user@%';
  const at = account.lastIndexOf('@');
  const user = at < 0 ? account : account.slice(0, at);
  const host = at < 0 ? '%' : account.slice(at + 1);
  return `'${user.replace(/'/g, "''")}'@'${host.replace(/'/g, "''")}'`;
}

/** How mysql2 and Node report network failures, in this driver's words (connect-errors.ts). */
const NETWORK: NetworkFailures = {
  server: 'MySQL',
  product: 'MySQL',
  // mysql2: a connection closed before the handshake ended; its timeout is Node's ETIMEDOUT.
  unreachable: new Set(['PROTOCOL_CONNECTION_LOST']),
  timedOut: new Set(),
  listenSetting: 'bind-address',
  tlsFix: (source) => `check the ssl parameters in ${source}`,
};

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
      return databaseMissing(ep, e);
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
        { cause: e },
      );
  }
  return networkError(e, code, ep, connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS, NETWORK);
}
