/**
 * The connection failures both SQL drivers read alike, whatever the client library: a URL that
 * is not one, nothing answering at host:port, a host name that does not resolve, a connect
 * timeout, a TLS failure; and what becomes of an error at a source's boundary. Each driver's
 * connect.ts translates its own server's codes first (authentication, a missing database, no
 * free connection) and hands the rest here.
 *
 * Owns the wording of those messages, so `tidemark` says the same for every database. Never
 * names a client library and never embeds a password: a URL is quoted only through `redact`.
 */
import { SourceError, TidemarkError } from '../contracts/errors.js';
import { redact } from '../observability/redact.js';
import { type ConnectTarget, connectTimeoutError } from './connect-timeout.js';

/**
 * Parses a source URL, refusing one that does not parse or whose scheme is not one of
 * `protocols` (`['postgres:', 'postgresql:']`); `source` names it in the message (`sources.x`).
 */
export function parseSourceUrl(url: string, source: string, protocols: readonly string[]): URL {
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
  if (!protocols.includes(u.protocol)) {
    throw new SourceError(
      'SOURCE_URL_INVALID',
      `${source} must start with ${protocols.map((p) => `${p}//`).join(' or ')}, got ${u.protocol}//`,
    );
  }
  return u;
}

/** How one driver's client reports network failures, and the words its messages use. */
export interface NetworkFailures {
  /** The server as "cannot connect to ..." names it (`Postgres`, `MySQL`). */
  readonly server: string;
  /** The server as the timeout message names it (connect-timeout.ts). */
  readonly product: 'PostgreSQL' | 'MySQL';
  /** The client's own codes for "nothing answered at host:port", besides Node's. */
  readonly unreachable: ReadonlySet<string>;
  /** The client's own codes for a connect timeout that ran out, besides Node's ETIMEDOUT. */
  readonly timedOut: ReadonlySet<string>;
  /** The server setting that decides the addresses it listens on (`listen_addresses`). */
  readonly listenSetting: string;
  /** What to check after a TLS failure, for the source named `source`. */
  tlsFix(source: string): string;
}

/** Node socket error codes that mean "nothing answered at host:port". */
const UNREACHABLE = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', 'EPIPE']);
/** Node's codes for a host name that does not resolve. */
const NAME_NOT_RESOLVED = new Set(['ENOTFOUND', 'EAI_AGAIN']);

/**
 * A network-level connect failure (`code` is the error's client code) as a one-line SourceError
 * saying what to check; undefined when `e` is none of them.
 */
export function networkError(
  e: Error,
  code: string,
  target: ConnectTarget,
  connectTimeoutMs: number,
  f: NetworkFailures,
): SourceError | undefined {
  const at = `${target.host}:${target.port}`;
  if (UNREACHABLE.has(code) || f.unreachable.has(code)) {
    return new SourceError(
      'SOURCE_UNREACHABLE',
      `cannot connect to ${f.server} at ${at} (${code}); check the host and port in ${target.source} and that the server accepts TCP connections from here (security group, firewall, ${f.listenSetting})`,
      { cause: e },
    );
  }
  if (NAME_NOT_RESOLVED.has(code)) {
    return new SourceError(
      'SOURCE_UNREACHABLE',
      `cannot resolve host "${target.host}" (${code}); check the host in ${target.source}`,
      { cause: e },
    );
  }
  if (code === 'ETIMEDOUT' || f.timedOut.has(code))
    return connectTimeoutError(f.product, target, connectTimeoutMs, e);
  if (/SSL|TLS|CERT/i.test(code) || /\b(SSL|TLS|certificate)\b/i.test(e.message)) {
    return new SourceError(
      'SOURCE_TLS',
      `TLS to ${at} failed: ${firstLine(e.message)}; ${f.tlsFix(target.source)}`,
      { cause: e },
    );
  }
  return undefined;
}

/** SOURCE_DATABASE_MISSING: the URL's database is not on the server. */
export function databaseMissing(
  target: ConnectTarget & { readonly database: string },
  cause: Error,
): SourceError {
  return new SourceError(
    'SOURCE_DATABASE_MISSING',
    `database "${target.database}" does not exist at ${target.host}:${target.port}; fix the database name in ${target.source}`,
    { cause },
  );
}

/**
 * An error at a source's boundary that already says what to do: a TidemarkError as it is, a
 * connect failure as the driver's `translate` reads it (connect.ts `translateConnectError`).
 * Undefined for anything else, which the caller rethrows or words with its own context.
 */
export function boundaryError(
  e: unknown,
  translate: (e: unknown) => SourceError | undefined,
): TidemarkError | undefined {
  if (e instanceof TidemarkError) return e;
  return translate(e);
}

/** Runs `run`, rethrowing its failure as `boundaryError` reads it (anything else as it is). */
export async function withConnectErrors<T>(
  run: () => Promise<T>,
  translate: (e: unknown) => SourceError | undefined,
): Promise<T> {
  try {
    return await run();
  } catch (e) {
    throw boundaryError(e, translate) ?? e;
  }
}

/** The first line of a client's message, trimmed (server messages can carry a DETAIL below). */
export function firstLine(s: string): string {
  return s.split('\n')[0]!.trim();
}
