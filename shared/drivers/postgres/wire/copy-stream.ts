/**
 * Runs one `COPY (SELECT ...) TO STDOUT (FORMAT binary)` statement into a `CopyBinaryDecoder`:
 * the streaming loop both binary readers share (incremental pages, incremental.ts, and snapshot
 * chunks, snapshot.ts).
 *
 * Owns: the COPY OUT lifetime on one postgres.js connection: feeding every chunk to the decoder,
 * cancelling the statement when the decoder closed the page, refused a chunk or the caller
 * aborted, and leaving the connection usable afterwards (never mid-COPY, never with a cancel
 * request still in flight). Never interprets rows.
 */
import type { Sql } from '../connect.js';
import type { CopyBinaryDecoder } from './binary-rows.js';
import { armCopy, copyMarker, releaseCopy } from './copy-tap.js';

/** SQLSTATE of a statement ended by a cancel request. */
export const QUERY_CANCELED = '57014';

/**
 * Streams `COPY (<select>) TO STDOUT (FORMAT binary)` into `decoder`. Returns what the decoder
 * threw on a chunk (the rest of the stream was dropped and the statement cancelled), or
 * undefined; the caller decides what a failure means and calls `decoder.end()` itself. A server
 * error other than our own cancel is thrown. When `signal` aborts, the statement is cancelled
 * and this returns as if the decoder had closed: the caller checks the signal.
 */
export async function streamBinaryCopy(
  sql: Sql,
  select: string,
  decoder: CopyBinaryDecoder,
  signal?: AbortSignal,
): Promise<unknown> {
  let failure: unknown;
  // Stopping a COPY early takes a cancel request (the protocol has no other way out of COPY OUT
  // but closing the connection). The server then ends the statement with 57014, or finishes it
  // first if it was already done; either way the connection stays usable. The cancel is awaited
  // before returning, so it can never hit the next statement: postgres.js resolves it once the
  // server has taken it, and a backend that is idle by then ignores it. The server only notices
  // between rows, so a cancel costs the row in flight: `rowsToAsk` keeps cancels rare.
  let cancelling: Promise<unknown> | undefined;
  const cancel = () => {
    cancelling ??= Promise.resolve(query.cancel()).catch(() => undefined);
  };
  // One chunk of COPY data, from the tap (a range of a socket chunk) or from postgres.js' stream.
  // After a decode failure or once the page is full, the rest is dropped unread while the cancel
  // takes effect: the connection must not be left mid-COPY.
  const take = (chunk: Uint8Array, start: number, end: number) => {
    if (failure !== undefined || decoder.closed) return;
    try {
      decoder.pushRange(chunk, start, end);
    } catch (e) {
      failure = e;
    }
    if (failure !== undefined || decoder.closed) cancel();
  };
  // On a plain socket the tap hands the CopyData straight to the decoder (copy-tap.ts) and
  // postgres.js' stream stays empty; on TLS nothing takes the registration and the stream
  // carries the data.
  const armed = armCopy(take);
  const query = sql.unsafe(`${copyMarker(armed)} COPY (${select}) TO STDOUT (FORMAT binary)`);
  const onAbort = () => cancel();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    try {
      const stream = await query.readable();
      // postgres.js 3.4 pauses the socket when its COPY stream buffer passes the high-water mark
      // and resumes it only from the stream's read(); if CopyDone arrives in the same socket chunk
      // the stream has ended by then, read() is never called again, and the NEXT query on this
      // connection hangs forever (porsager/postgres#1016). Calling the stream's own read() once
      // after the end resumes the socket (a no-op when it was never paused). Only the stream
      // path (TLS) can get there: the tap never pushes into the stream.
      try {
        for await (const chunk of stream) take(chunk as Buffer, 0, (chunk as Buffer).length);
      } finally {
        (stream as unknown as { _read(n: number): void })._read(0);
      }
    } catch (e) {
      // The statement ended by our own cancel (page full, a refused row, an abort) is expected.
      if (!(cancelling && (e as { code?: unknown }).code === QUERY_CANCELED)) throw e;
    } finally {
      releaseCopy(armed);
      await cancelling;
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  return failure;
}
