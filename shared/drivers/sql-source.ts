/**
 * What both SQL drivers' incremental sources are and share: the source contracts they implement
 * (`SqlSource`), the guard every statement of theirs runs under (`guardRead`): a read the engine
 * gives up abandons the connection, and a failure leaves as a SourceError that names the table
 * and where the query ran; and the wall-clock text `WallClockZone` asks the database about.
 *
 * Owns the abort handling of a read and the wording of a failed query. Never names a client:
 * each driver's source.ts passes its connection's `abandon`, its connect.ts `translateConnectError`
 * and the place its statements run.
 */
import type { ClosableIncrementalSource } from '../contracts/driver.js';
import { SourceError } from '../contracts/errors.js';
import { microsToTimestampText } from '../position/time-text.js';
import { boundaryError } from './connect-errors.js';

/**
 * The contracts a SQL driver's incremental source implements: what the registry's
 * `openIncremental` returns (shared/contracts/driver.ts), every optional capability included.
 */
export type SqlSource = Required<ClosableIncrementalSource>;

/** Where a source's statements run, how its connection is given up, and how its failures read. */
export interface ReadBoundary {
  /** `host:port/database` (Postgres) or `host:port` (MySQL), as a failed query names it. */
  readonly at: string;
  /** Drops the connection under a stalled read (so the server stops the statement). */
  abandon(reason: unknown): void;
  /** The driver's connect.ts `translateConnectError`, bound to its endpoint and timeout. */
  translate(e: unknown): SourceError | undefined;
}

/**
 * Runs `fn`, turning connection failures and unexpected query errors into SourceErrors. When
 * `signal` aborts (the engine gave the page up), the connection is abandoned whichever statement
 * of the read is stalled (the bound's or the page's), so the server stops it and the next read
 * opens a new connection; `fn` then fails with the signal's reason.
 */
export async function guardRead<T>(
  b: ReadBoundary,
  table: string,
  fn: () => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  signal?.throwIfAborted();
  const onAbort = () => b.abandon(signal?.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    return await fn();
  } catch (e) {
    if (signal?.aborted) throw signal.reason;
    const known = boundaryError(e, b.translate);
    if (known) throw known;
    if (e instanceof Error && e.name === 'AbortError') throw e;
    const code = String((e as { code?: unknown }).code ?? '');
    throw new SourceError(
      'SOURCE_QUERY_FAILED',
      `${table}: query failed at ${b.at}${code ? ` (${code})` : ''}: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`,
      { cause: e },
    );
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}

/**
 * A wall-clock timestamp (`WallClockZone.wallClockToUtc`) as the text a driver asks its database
 * to place in a zone; undefined for infinities and BC years, which have no instant worth showing.
 */
export function wallClockText(wallMicros: bigint): string | undefined {
  const text = microsToTimestampText(wallMicros, false);
  return !/^\d{4}-/.test(text) || text.endsWith(' BC') ? undefined : text;
}
