/**
 * The connect timeout both SQL drivers apply (`connectTimeoutSeconds` in the spec): it bounds a
 * connection's whole setup — dial, handshake, authentication and the first query — not only the
 * TCP dial, because a port where something else answers (a web server, a proxy) can accept the
 * dial and then never complete the database handshake.
 *
 * Owns: the bound and the one message that says nothing answered in time. Must never retry:
 * the caller ends the client so no further connection attempts are made.
 */
import { SourceError } from '../contracts/errors.js';

/** The connect timeout when the spec sets none (`connectTimeoutSeconds`). */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** Where a connection goes, as the message shows it. */
export interface ConnectTarget {
  readonly host: string;
  readonly port: number;
  /** `sources.x` or "the source URL". */
  readonly source: string;
}

/** Whole seconds as the message shows them (a sub-second test timeout reads as 1 s). */
export function timeoutSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** `SOURCE_TIMEOUT`: no `product` server answered at the target within the connect timeout. */
export function connectTimeoutError(
  product: 'PostgreSQL' | 'MySQL',
  target: ConnectTarget,
  ms: number,
  cause?: unknown,
): SourceError {
  return new SourceError(
    'SOURCE_TIMEOUT',
    `no ${product} server answered at ${target.host}:${target.port} within ${timeoutSeconds(ms)} s; check the host and port in ${target.source} (the database's, not a web server's or proxy's) and the network path (VPC, security group, firewall), or raise connectTimeoutSeconds`,
    cause === undefined ? undefined : { cause },
  );
}

/**
 * Resolves with `setup`, or rejects with `onTimeout()` when it has not settled within `ms`.
 * `onTimeout` is where the caller ends its client, so a library that retries on its own stops.
 */
export function withinConnectTimeout<T>(setup: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  setup.catch(() => {}); // a late failure after the timeout is not an unhandled rejection
  return Promise.race([setup, timeout]).finally(() => clearTimeout(timer));
}
