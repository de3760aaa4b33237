/**
 * The Postgres driver's connection: one postgres.js client per source, configured so every value
 * arrives as exact text (nothing is parsed into `Date` or `number` by the client), and the one
 * place that turns connection failures into one-line, actionable `SourceError`s.
 *
 * Owns: client options (session settings that make text output canonical), the lifetime of the
 * connection (`PostgresConnection`: a connect bounded by the connect timeout with one dial, a lost
 * connection reported as `SOURCE_CONNECTION_LOST` and replaced on next use, an abandoned one
 * terminated at the server), error translation. Must never log or embed a password: every
 * message names `user@host:port/db`, and a URL is only quoted through `redact`
 * (shared/observability/redact.ts).
 */
import { createConnection, type Socket } from 'node:net';
import postgres from 'postgres';
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
  timeoutSeconds,
  withinConnectTimeout,
} from '../connect-timeout.js';
import { negotiateTls, type TlsSettings, tlsOf } from './tls.js';
import { tapSocket } from './wire/copy-tap.js';

/** The postgres.js client type this driver uses (all values come back as text). */
export type Sql = postgres.Sql;

/** Connection options of a Postgres source. */
export interface ConnectOptions {
  /** `postgres://user:password@host:port/db?sslmode=require`. */
  readonly url: string;
  /** Give up connecting after this long (default 10 000 ms). */
  readonly connectTimeoutMs?: number;
  /** `application_name` shown in pg_stat_activity (default `tidemark`). */
  readonly applicationName?: string;
  /** How the spec names this source (e.g. `sources.app`), used in error messages. */
  readonly sourceName?: string;
}

/** Where a connection goes, for messages: never includes the password. */
export interface Endpoint extends ConnectTarget {
  readonly user: string;
  readonly database: string;
}

/**
 * Session settings sent in the startup packet, so they hold on every (re)connection:
 * - DateStyle ISO: `YYYY-MM-DD[ HH:MM:SS[.ffffff]][+HH[:MM]][ BC]`, what time-text.ts parses.
 * - IntervalStyle iso_8601: intervals as `P1Y2M3DT4H5M6S`, a standard text lakes can parse.
 * - extra_float_digits 1: shortest text that round-trips a float8 exactly (the default since
 *   PG 12, set because a server or database may have lowered it, which would round).
 * - bytea_output hex: `\x0102`, one unambiguous form.
 * - client_encoding UTF8: text bytes are copied into Arrow as-is.
 * TimeZone is deliberately NOT set: timestamptz text carries its offset (time-text.ts applies it)
 * and binary COPY is zone-free, while the session's default zone is the one writers use for
 * `timestamp without time zone` cursors, which the safe upper bound is computed in (bound.ts).
 */
const SESSION_SETTINGS = {
  DateStyle: 'ISO, MDY',
  IntervalStyle: 'iso_8601',
  extra_float_digits: '1',
  bytea_output: 'hex',
  client_encoding: 'UTF8',
} as const;

/** Parses the parts of a connection URL that messages may show. */
export function endpointOf(url: string, sourceName?: string): Endpoint {
  const source = sourceName ?? 'the source URL';
  const u = parseSourceUrl(url, source, ['postgres:', 'postgresql:']);
  return {
    user: decodeURIComponent(u.username) || 'postgres',
    host: u.hostname || 'localhost',
    port: u.port ? Number(u.port) : 5432,
    database:
      decodeURIComponent(u.pathname.replace(/^\//, '')) || decodeURIComponent(u.username) || 'postgres',
    source,
  };
}

/** postgres.js' `socket` option (README, "Custom socket"), which its type declarations lack. */
interface SocketOption {
  readonly socket?: () => Promise<Socket>;
}

/** postgres.js options of every client of a source; `extra` adds the per-client hooks. */
function clientOptions(
  opts: ConnectOptions,
  extra: postgres.Options<Record<string, never>> & SocketOption = {},
) {
  const timeoutMs = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  return {
    max: 1,
    // Every value is selected as text (or read through binary COPY), so no type list is needed;
    // skipping it saves a round trip per connection.
    fetch_types: false,
    // postgres.js rounds up to whole seconds; keep sub-second timeouts (tests) at one second.
    connect_timeout: timeoutSeconds(timeoutMs),
    onnotice: () => {},
    connection: { ...SESSION_SETTINGS, application_name: opts.applicationName ?? 'tidemark' },
    ...extra,
  };
}

/**
 * Options of a query client (not the walsender): its sockets are dialled, put under TLS as the
 * URL says (tls.ts, instead of by postgres.js, whose `ssl` is then off) and tapped for COPY
 * (copy-tap.ts). `socket` in `extra` replaces the dial (PostgresConnection counts its dials).
 */
function queryClientOptions(
  opts: ConnectOptions,
  extra: postgres.Options<Record<string, never>> & SocketOption = {},
) {
  const ep = endpointOf(opts.url, opts.sourceName);
  return clientOptions(opts, { ssl: false, socket: () => openSocket(ep, tlsOf(opts.url)), ...extra });
}

/** A connected socket to `ep` for postgres.js: TLS negotiated as `tls` says, tapped for COPY. */
function openSocket(ep: Endpoint, tls: TlsSettings): Promise<Socket> {
  return dial(ep.host, ep.port).then(async (raw) => {
    let socket: Socket;
    try {
      socket = await negotiateTls(raw, ep.host, tls);
    } catch (e) {
      raw.destroy();
      throw e;
    }
    tapSocket(socket);
    return socket;
  });
}

/**
 * A replication client (walsender, `replication: database`) for logical streaming: exactly the
 * session settings of every other client (pgoutput's text follows them, so both read paths see
 * the same text), and no idle or lifetime limit (the stream runs for days). TimeZone is left at
 * the server's (database's) default like every other client: timestamptz text carries its offset
 * (parsed to the same micros in any zone), while types read as text that embed a timestamptz
 * (tstzrange, composites) print it in the session zone, which must then be the incremental
 * path's too (tested under a non-UTC database zone).
 * Only simple-protocol statements work on it (`sql.unsafe` without parameters).
 */
export function replicationClient(opts: ConnectOptions): Sql {
  return postgres(
    opts.url,
    clientOptions(opts, {
      idle_timeout: 0,
      max_lifetime: null,
      connection: {
        ...SESSION_SETTINGS,
        replication: 'database',
        application_name: opts.applicationName ?? 'tidemark-cdc',
      } as Record<string, string>,
    }),
  );
}

/**
 * A lazy pool of at most `max` connections with every client's session settings (so binary COPY
 * and text values read exactly as on the incremental path): the snapshot chunker's query
 * connections, each chunk read on one it reserves. Connect failures reject as postgres.js
 * reports them (`translateConnectError` reads them).
 */
export function queryPool(opts: ConnectOptions, max: number): Sql {
  // fetch_types stays on here: in postgres.js 3.4.9 `sql.reserve()` on a connection it has to
  // open first never resolves without it (the new connection's first ReadyForQuery skips the
  // reserve request and hands the connection to nobody; the type fetch's ReadyForQuery is what
  // hands it over). The cost is one catalog query per new connection; values are unaffected
  // (chunks read binary COPY and raw text, never parsed values).
  return postgres(opts.url, queryClientOptions(opts, { max, fetch_types: true }));
}

/** Opens a lazy client (it connects on the first query). Tests and tools; sources use `PostgresConnection`. */
export function connect(opts: ConnectOptions): { sql: Sql; endpoint: Endpoint } {
  const endpoint = endpointOf(opts.url, opts.sourceName);
  return { sql: postgres(opts.url, queryClientOptions(opts)), endpoint };
}

/** The backend a client talks to, read by its first query: what `abandon` terminates. */
interface Backend {
  readonly pid: number;
  /**
   * The server's `now()` at the first query, as text. Our backend started before it; a later
   * backend reusing the pid started after ours ended, so after it: `backend_start <= seenAt`
   * with the pid names ours alone.
   */
  readonly seenAt: string;
}

interface Client {
  readonly sql: Sql;
  /** The first query answered (within the connect timeout). */
  readonly ready: Promise<Backend>;
  /** Dropped on purpose (`abandon`): its statements' failures are not a lost connection. */
  abandoned?: boolean;
}

/**
 * The first query of every client: which backend it got. Functions only: a view such as
 * pg_stat_activity would cost a new backend ~10 ms of catalog lookups on every connect.
 */
const BACKEND_SQL = 'SELECT pg_backend_pid()::text AS pid, now()::text AS seen_at';

/** Error codes that mean the connection under a statement is over, not just the statement. */
export const CONNECTION_OVER: ReadonlySet<string> = new Set([
  'CONNECTION_CLOSED',
  'CONNECTION_DESTROYED',
  'CONNECTION_ENDED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  '57P01', // admin_shutdown: pg_terminate_backend, or a smart/fast shutdown
  '57P02', // crash_shutdown
  '57P05', // idle_session_timeout
  '25P03', // idle_in_transaction_session_timeout
]);

const ENDED_BY: Readonly<Record<string, string>> = {
  '57P01': 'the server terminated it (pg_terminate_backend, or a server shutdown)',
  '57P02': 'the server crashed',
  '57P05': 'the server closed it after idle_session_timeout',
  '25P03': 'the server closed it after idle_in_transaction_session_timeout',
};

/**
 * The source's connection: one postgres.js client at a time, opened lazily. A client counts as
 * connected once its first query answered within the connect timeout; until then it gets ONE
 * dial, and when it fails or times out it is ended, so nothing keeps connecting. A client whose
 * connection closes is retired and the next use opens a new one (and learns its backend).
 */
export class PostgresConnection {
  readonly endpoint: Endpoint;
  private readonly opts: ConnectOptions;
  private readonly tls: TlsSettings;
  private readonly timeoutMs: number;
  private current: Client | undefined;
  /** Clients being ended and backends being terminated; `close` waits for them. */
  private readonly cleanups = new Set<Promise<unknown>>();

  constructor(opts: ConnectOptions) {
    this.endpoint = endpointOf(opts.url, opts.sourceName);
    this.opts = opts;
    this.tls = tlsOf(opts.url);
    this.timeoutMs = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  }

  /**
   * Runs `fn` on a connected client. A connection lost under it (terminated, server gone)
   * retires the client and fails with `SOURCE_CONNECTION_LOST`; connect failures reject as
   * postgres.js reports them (`translateConnectError` reads them), a timeout as SOURCE_TIMEOUT.
   */
  async run<T>(fn: (sql: Sql) => Promise<T>): Promise<T> {
    const client = this.current ?? this.open();
    const backend = await client.ready;
    try {
      return await fn(client.sql);
    } catch (e) {
      const code = String((e as { code?: unknown }).code ?? '');
      if (!CONNECTION_OVER.has(code) || client.abandoned) throw e;
      this.retire(client);
      throw await this.connectionLost(e, code, backend);
    }
  }

  /**
   * Drops the current client at once (its statements fail) and terminates its backend from a
   * second connection: a busy backend does not read its socket, so closing the socket alone
   * would leave the statement running at the server, holding its locks. The next use opens a
   * new client. Used when a read is given up (the engine's page timeout).
   */
  abandon(): void {
    const client = this.current;
    if (!client) return;
    client.abandoned = true;
    this.retire(client);
    this.track(
      client.ready.then(
        (backend) => this.terminate(backend),
        () => undefined,
      ),
    );
  }

  /** Ends the client (waits up to 5 s for a running query) and whatever `abandon` started. */
  async close(): Promise<void> {
    const client = this.current;
    this.current = undefined;
    if (client) await client.sql.end({ timeout: 5 });
    await Promise.all([...this.cleanups]);
  }

  private open(): Client {
    const client = this.client();
    this.current = client;
    client.ready.catch(() => this.retire(client));
    return client;
  }

  /** A new client, its first query sent; `ready` rejects (and the client is ended) on failure. */
  private client(): Client {
    let dials = 0;
    let answered = false;
    // Assigned below; the hooks run only once the client connects.
    let self: Client | undefined;
    const sql = postgres(
      this.opts.url,
      queryClientOptions(this.opts, {
        // postgres.js redials its first connection at once, without limit, when the socket
        // closes before the server answered (and restarts its connect timer each time): at a
        // port where something else accepts and hangs up (a web server, a proxy) that is
        // hundreds of connections a second. So: one dial until the server has answered.
        socket: () => {
          dials += 1;
          if (dials > 1 && !answered) return Promise.reject(notPostgresError(this.endpoint));
          return openSocket(this.endpoint, this.tls);
        },
        // A closed connection retires its client, so `abandon` never terminates a backend the
        // client reconnected away from.
        onclose: () => {
          if (self) this.retire(self);
        },
      }),
    );
    const first = sql.unsafe<{ pid: string; seen_at: string }[]>(BACKEND_SQL).then(([row]) => {
      answered = true;
      return { pid: Number(row!.pid), seenAt: row!.seen_at };
    });
    const ready = withinConnectTimeout(first, this.timeoutMs, () =>
      connectTimeoutError('PostgreSQL', this.endpoint, this.timeoutMs),
    ).catch((e: unknown) => {
      this.track(sql.end({ timeout: 0 }));
      throw e;
    });
    self = { sql, ready };
    return self;
  }

  /**
   * SOURCE_CONNECTION_LOST saying what ended the connection. When the server did not say (the
   * socket just closed: postgres.js reports a terminated backend as CONNECTION_CLOSED too), a
   * new connection tells the two apart: if it gets through, the server is up and our backend
   * was terminated or dropped.
   */
  private async connectionLost(e: unknown, code: string, backend: Backend): Promise<SourceError> {
    let what = ENDED_BY[code];
    if (what === undefined) {
      const probe = this.client();
      const failed = await probe.ready.then(
        () => undefined,
        (err: unknown) => String((err as { code?: unknown }).code ?? err),
      );
      await probe.sql.end({ timeout: 0 });
      what =
        failed === undefined
          ? 'the server closed it and still accepts connections, so the backend was terminated (pg_terminate_backend, a session timeout) or a proxy dropped it'
          : `the server is gone: a new connection fails too (${failed}); it stopped, crashed or is restarting`;
    }
    const ep = this.endpoint;
    const detail = e instanceof Error ? `: ${firstLine(e.message)}` : '';
    return new SourceError(
      'SOURCE_CONNECTION_LOST',
      `${ep.source}: lost the connection to Postgres at ${ep.host}:${ep.port}/${ep.database} (backend pid ${backend.pid}) during a statement: ${what} (${code}${detail}); nothing past the last committed page was written; rerun (the next run resumes from there)`,
      { cause: e },
    );
  }

  private retire(client: Client): void {
    if (this.current === client) this.current = undefined;
    this.track(client.sql.end({ timeout: 0 }));
  }

  /** Terminates `backend` if it is still the one we had (a role may terminate its own backends). */
  private async terminate(backend: Backend): Promise<void> {
    const side = this.client();
    try {
      await side.ready;
      await side.sql.unsafe(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1::text::int AND backend_start <= $2::text::timestamptz',
        [String(backend.pid), backend.seenAt],
      );
    } catch {
      // The server is gone or refuses us: the backend ends when it next writes to the closed socket.
    } finally {
      await side.sql.end({ timeout: 0 });
    }
  }

  private track(p: Promise<unknown>): void {
    const settled = p.catch(() => undefined);
    this.cleanups.add(settled);
    void settled.then(() => this.cleanups.delete(settled));
  }
}

/** A TCP connection to host:port, resolved once connected (postgres.js' `socket` hook). */
function dial(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host, port });
    socket.setNoDelay(true);
    // postgres.js reads the host from its socket for TLS server name checks (it sets it on its own).
    (socket as Socket & { host?: string }).host = host;
    socket.once('connect', () => {
      socket.removeListener('error', reject);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/** SOURCE_UNREACHABLE: something at host:port accepted the dial and closed it without a PostgreSQL reply. */
function notPostgresError(ep: Endpoint): SourceError {
  return new SourceError(
    'SOURCE_UNREACHABLE',
    `no PostgreSQL server answered at ${ep.host}:${ep.port}: something there accepted the connection and closed it without a PostgreSQL reply (a web server or a proxy?); check the host and port in ${ep.source}`,
  );
}

/** How postgres.js and Node report network failures, in this driver's words (connect-errors.ts). */
const NETWORK: NetworkFailures = {
  server: 'Postgres',
  product: 'PostgreSQL',
  // Node socket error codes (and postgres.js' for a dial that closed) that mean "nothing answered at host:port".
  unreachable: new Set([
    'ECONNREFUSED',
    'EHOSTUNREACH',
    'ENETUNREACH',
    'ECONNRESET',
    'EPIPE',
    'CONNECTION_CLOSED',
  ]),
  timedOut: new Set(['CONNECT_TIMEOUT', 'ETIMEDOUT']),
  listenSetting: 'listen_addresses',
  tlsFix: (source) => `check sslmode in ${source} (require / verify-full with the server's CA)`,
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
  const who = `user "${ep.user}" at ${at}`;
  switch (code) {
    case '28P01':
      return new SourceError(
        'SOURCE_AUTH_FAILED',
        `authentication failed for ${who}; check the password in ${ep.source}`,
        { cause: e },
      );
    case '28000':
      return new SourceError(
        'SOURCE_AUTH_FAILED',
        `${at} refused user "${ep.user}" for database "${ep.database}": ${firstLine(e.message)}; add a pg_hba.conf entry, or use sslmode=require if only encrypted connections are allowed`,
        { cause: e },
      );
    case '3D000':
      return databaseMissing(ep, e);
    case '53300':
      return new SourceError(
        'SOURCE_UNAVAILABLE',
        `${at} has no free connection slots (too_many_connections); retry later or raise max_connections`,
        { cause: e },
      );
    case '57P03':
      return new SourceError(
        'SOURCE_UNAVAILABLE',
        `${at} is starting up or shutting down; retry in a moment`,
        { cause: e },
      );
  }
  return networkError(e, code, ep, connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS, NETWORK);
}
