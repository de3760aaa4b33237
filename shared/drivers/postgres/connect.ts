/**
 * The Postgres driver's connection: one postgres.js client per source, configured so every value
 * arrives as exact text (nothing is parsed into `Date` or `number` by the client), and the one
 * place that turns connection failures into one-line, actionable `SourceError`s.
 *
 * Owns: client options (session settings that make text output canonical), error translation.
 * Must never log or embed a password: every message names `user@host:port/db`, and a URL is only
 * quoted through `redact` (shared/observability/redact.ts).
 */
import postgres from 'postgres';
import { SourceError } from '../../contracts/errors.js';
import { redact } from '../../observability/redact.js';

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
export interface Endpoint {
  readonly user: string;
  readonly host: string;
  readonly port: number;
  readonly database: string;
  /** `sources.x` or "the source URL". */
  readonly source: string;
}

export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

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
  let u: URL;
  try {
    u = new URL(url);
  } catch (e) {
    throw new SourceError(
      'SOURCE_URL_INVALID',
      `${sourceName ?? 'the source URL'} is not a valid URL; percent-encode @ : / # ? % in the user and password (docs/errors.md): ${redact(url)}`,
      { cause: e },
    );
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') {
    throw new SourceError(
      'SOURCE_URL_INVALID',
      `${sourceName ?? 'the source URL'} must start with postgres:// or postgresql://, got ${u.protocol}//`,
    );
  }
  return {
    user: decodeURIComponent(u.username) || 'postgres',
    host: u.hostname || 'localhost',
    port: u.port ? Number(u.port) : 5432,
    database:
      decodeURIComponent(u.pathname.replace(/^\//, '')) || decodeURIComponent(u.username) || 'postgres',
    source: sourceName ?? 'the source URL',
  };
}

/** Opens a lazy client (it connects on the first query). */
export function connect(opts: ConnectOptions): { sql: Sql; endpoint: Endpoint } {
  const endpoint = endpointOf(opts.url, opts.sourceName);
  const timeoutMs = opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const sql = postgres(opts.url, {
    max: 1,
    // Every value is selected as text (or read through binary COPY), so no type list is needed;
    // skipping it saves a round trip per connection.
    fetch_types: false,
    // postgres.js rounds up to whole seconds; keep sub-second timeouts (tests) at one second.
    connect_timeout: Math.max(1, Math.ceil(timeoutMs / 1000)),
    onnotice: () => {},
    connection: { ...SESSION_SETTINGS, application_name: opts.applicationName ?? 'tidemark' },
  });
  return { sql, endpoint };
}

/** Node socket error codes that mean "nothing answered at host:port". */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNRESET',
  'EPIPE',
  'CONNECTION_CLOSED',
]);
const NAME_NOT_RESOLVED = new Set(['ENOTFOUND', 'EAI_AGAIN']);
const TIMED_OUT = new Set(['CONNECT_TIMEOUT', 'ETIMEDOUT']);

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
        {
          cause: e,
        },
      );
    case '28000':
      return new SourceError(
        'SOURCE_AUTH_FAILED',
        `${at} refused user "${ep.user}" for database "${ep.database}": ${firstLine(e.message)}; add a pg_hba.conf entry, or use sslmode=require if only encrypted connections are allowed`,
        { cause: e },
      );
    case '3D000':
      return new SourceError(
        'SOURCE_DATABASE_MISSING',
        `database "${ep.database}" does not exist at ${at}; fix the database name in ${ep.source}`,
        { cause: e },
      );
    case '53300':
      return new SourceError(
        'SOURCE_UNAVAILABLE',
        `${at} has no free connection slots (too_many_connections); retry later or raise max_connections`,
        {
          cause: e,
        },
      );
    case '57P03':
      return new SourceError(
        'SOURCE_UNAVAILABLE',
        `${at} is starting up or shutting down; retry in a moment`,
        { cause: e },
      );
  }
  if (UNREACHABLE.has(code)) {
    return new SourceError(
      'SOURCE_UNREACHABLE',
      `cannot connect to Postgres at ${at} (${code}); check the host and port in ${ep.source} and that the server accepts TCP connections from here (security group, firewall, listen_addresses)`,
      { cause: e },
    );
  }
  if (NAME_NOT_RESOLVED.has(code)) {
    return new SourceError(
      'SOURCE_UNREACHABLE',
      `cannot resolve host "${ep.host}" (${code}); check the host in ${ep.source}`,
      {
        cause: e,
      },
    );
  }
  if (TIMED_OUT.has(code)) {
    const seconds = Math.max(1, Math.ceil((connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS) / 1000));
    return new SourceError(
      'SOURCE_TIMEOUT',
      `no answer from Postgres at ${at} within ${seconds} s; check network reachability (VPC, security group, firewall) or raise connectTimeoutSeconds`,
      { cause: e },
    );
  }
  if (/SSL|TLS|CERT/i.test(code) || /\b(SSL|TLS|certificate)\b/i.test(e.message)) {
    return new SourceError(
      'SOURCE_TLS',
      `TLS to ${at} failed: ${firstLine(e.message)}; check sslmode in ${ep.source} (require / verify-full with the server's CA)`,
      { cause: e },
    );
  }
  return undefined;
}

function firstLine(s: string): string {
  return s.split('\n')[0]!.trim();
}
