/**
 * The raw COPY OUT data phase of a postgres.js connection: a tap on the connection's socket that
 * hands every CopyData payload straight to a sink (the PGCOPY decoder) and passes every other
 * byte on to postgres.js unchanged.
 *
 * Why: postgres.js frames each server message, makes a Buffer view of every CopyData message
 * (one per row), pushes it into a Readable stream and, past its high-water mark, pauses the
 * socket; the reader then takes the rows one async iteration at a time. For a million-row page
 * that is a million buffers, stream pushes and promise turns before a single value is decoded
 * (docs/benchmarks.md, "Raw COPY data phase"). The tap takes only that phase over: connecting,
 * authentication, the query, CopyOutResponse, CopyDone, CommandComplete, errors and cancel stay
 * postgres.js'.
 *
 * Owns: the message framing of the server-to-client byte stream on one socket (type byte, int32
 * length including itself), tracked from the first byte the server sends so the tap always knows
 * where the next message starts, across socket chunks. While armed, after a CopyOutResponse
 * ('H'), CopyData ('d') messages are swallowed: their payload bytes go to the sink as ranges of
 * the socket chunk (no copy, no Buffer per row), possibly split across chunks (the sink
 * reassembles, as it did with postgres.js' chunks). CopyDone ('c') or ErrorResponse ('E') end
 * the phase and disarm the tap; both are passed on, so postgres.js ends the (then empty) COPY
 * stream or fails the query exactly as before. Notices and other asynchronous messages inside the
 * phase are passed on too.
 *
 * Socket chunks are Node's own per-read Buffers, never reused, so the sink may keep views of
 * them (the decoder keeps a straddling tuple and the last row's key that way).
 *
 * Plain TCP only: on a TLS connection postgres.js upgrades the socket itself and the bytes seen
 * here are ciphertext, so TLS connections are not tapped and use postgres.js' COPY stream
 * (copy-stream.ts keeps both paths).
 */
import type { Socket } from 'node:net';

/** Receives CopyData payload bytes `buf[start, end)`, in stream order. */
export type CopySink = (buf: Buffer, start: number, end: number) => void;

const COPY_OUT_RESPONSE = 0x48; // 'H'
const COPY_DATA = 0x64; // 'd'
const COPY_DONE = 0x63; // 'c'
const ERROR_RESPONSE = 0x45; // 'E'
/** A message header: the type byte and the int32 length (which counts itself, not the type). */
const HEADER = 5;

export class CopyTap {
  /** The header of the message that starts in this chunk's tail, while incomplete. */
  private readonly head = Buffer.alloc(HEADER);
  private headHave = 0;
  /** Bytes of the message being read that are still to come. */
  private remaining = 0;
  /** The sink of the running phase (undefined once released: the rest is dropped). */
  private sink: CopySink | undefined;
  /** Sinks of statements written, waiting for their CopyOutResponse. */
  private readonly queued: CopySink[] = [];
  /** Between CopyOutResponse and CopyDone / ErrorResponse of the armed statement. */
  private copying = false;
  /** The body being read is a CopyData payload of the armed phase: it goes to the sink. */
  private swallowing = false;

  constructor(private readonly forward: (chunk: Buffer) => void) {}

  /**
   * Routes the CopyData of a COPY statement just written to this socket to `sink`. Statements
   * are answered in the order they were written (postgres.js may pipeline), so sinks wait in
   * that order for their CopyOutResponse.
   */
  arm(sink: CopySink): void {
    this.queued.push(sink);
  }

  /** Stops routing to `sink`, armed or running. */
  release(sink: CopySink): void {
    const at = this.queued.indexOf(sink);
    if (at >= 0) this.queued.splice(at, 1);
    // A phase still running (its statement was given up) keeps swallowing its CopyData, now
    // dropped: postgres.js' COPY stream of it is gone or unread, and a push into it would pause
    // the socket for good.
    if (this.sink === sink) this.sink = undefined;
  }

  /** One chunk the server sent. */
  take(chunk: Buffer): void {
    const n = chunk.length;
    let p = 0;
    /** Start of the bytes to pass on that end at `p`; -1 while none are open. */
    let from = -1;
    while (p < n) {
      if (this.remaining > 0) {
        const k = Math.min(this.remaining, n - p);
        if (this.swallowing) this.sink?.(chunk, p, p + k);
        else if (from < 0) from = p;
        p += k;
        this.remaining -= k;
        continue;
      }
      // A message starts at p, or its header started in an earlier chunk (`headHave` bytes).
      const start = p;
      const carried = this.headHave;
      let type: number;
      let length: number;
      if (carried === 0 && n - p >= HEADER) {
        type = chunk[p]!;
        length = chunk.readUInt32BE(p + 1);
        p += HEADER;
      } else {
        const k = Math.min(HEADER - carried, n - p);
        chunk.copy(this.head, carried, p, p + k);
        this.headHave += k;
        p += k;
        if (this.headHave < HEADER) {
          // Its type is not known yet: pass on what came before it and hold the header back.
          if (from >= 0) this.forward(chunk.subarray(from, start));
          return;
        }
        this.headHave = 0;
        type = this.head[0]!;
        length = this.head.readUInt32BE(1);
      }
      this.swallowing = type === COPY_DATA && this.copying;
      this.remaining = Math.max(0, length - 4);
      if (this.swallowing) {
        if (from >= 0) this.forward(chunk.subarray(from, start));
        from = -1;
        continue;
      }
      // Passed on. A header held back from the last chunk goes first (`head` is reused: copied).
      if (carried > 0) this.forward(Buffer.from(this.head.subarray(0, carried)));
      if (from < 0) from = start;
      if (this.copying) {
        if (type === COPY_DONE || type === ERROR_RESPONSE) this.endPhase();
      } else if (type === COPY_OUT_RESPONSE && this.queued.length > 0) {
        this.sink = this.queued.shift();
        this.copying = true;
        rawCopy.phases++;
      } else if (type === ERROR_RESPONSE && this.queued.length > 0) {
        // The first waiting statement failed before its COPY phase began (e.g. a column gone).
        // Were it another statement's error, the COPY's data would reach postgres.js' stream,
        // which copy-stream.ts reads too: slower, never lost.
        this.queued.shift();
      }
    }
    if (from >= 0) this.forward(from === 0 ? chunk : chunk.subarray(from));
  }

  private endPhase(): void {
    this.copying = false;
    this.sink = undefined;
  }
}

/**
 * COPY statements waiting for their connection, by id. The id rides in the statement's text
 * (`copyMarker`): the tap of whichever socket postgres.js writes the statement to arms itself,
 * so a pool's and a reserved connection's statements find their own socket without postgres.js
 * telling which connection runs what.
 */
const waiting = new Map<number, Armed>();
let nextId = 1;

/**
 * Whether COPY statements register for the tap (on by default; tests turn it off to run the
 * postgres.js stream path, which TLS connections take) and how many phases taps have read.
 */
export const rawCopy = { enabled: true, phases: 0 };

/** A COPY statement's sink, and the tap that took it once the statement was written. */
export interface Armed {
  readonly id: number;
  readonly sink: CopySink;
  tap?: CopyTap;
}

const MARKER_OPEN = '/*tidemark-copy:';
const MARKER_CLOSE = 0x2a; // '*' of the closing '*/'

/** Registers `sink` for the COPY statement that starts with `copyMarker(armed)`. */
export function armCopy(sink: CopySink): Armed {
  const armed: Armed = { id: nextId++, sink };
  if (rawCopy.enabled) waiting.set(armed.id, armed);
  return armed;
}

/** The comment that ties a statement to its `armCopy` registration (put it first). */
export function copyMarker(armed: Armed): string {
  return `${MARKER_OPEN}${armed.id}*/`;
}

/** Ends a registration: nothing more goes to its sink. */
export function releaseCopy(armed: Armed): void {
  waiting.delete(armed.id);
  armed.tap?.release(armed.sink);
}

/** Arms `tap` for the registration whose marker the outgoing bytes carry, if any. */
function armFromWrite(tap: CopyTap, data: unknown): void {
  if (waiting.size === 0 || !Buffer.isBuffer(data)) return;
  const at = data.indexOf(MARKER_OPEN, 0, 'latin1');
  if (at < 0) return;
  let id = 0;
  for (let p = at + MARKER_OPEN.length; p < data.length && data[p] !== MARKER_CLOSE; p++) {
    id = id * 10 + (data[p]! - 0x30);
  }
  const armed = waiting.get(id);
  if (armed === undefined) return;
  waiting.delete(id);
  armed.tap = tap;
  tap.arm(armed.sink);
}

/**
 * Taps `socket`, a plain TCP connection postgres.js reads: every 'data' chunk goes through a
 * CopyTap before postgres.js sees it, and every write is checked for a COPY statement's marker.
 */
export function tapSocket(socket: Socket): void {
  type Emit = (this: Socket, event: string | symbol, ...args: unknown[]) => boolean;
  type Write = (this: Socket, data: unknown, ...rest: unknown[]) => boolean;
  const emit = socket.emit as Emit;
  const write = socket.write as Write;
  const tap = new CopyTap((chunk) => {
    emit.call(socket, 'data', chunk);
  });
  socket.emit = function tapped(this: Socket, event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'data') {
      tap.take(args[0] as Buffer);
      return true;
    }
    return emit.call(this, event, ...args);
  } as Socket['emit'];
  socket.write = function watched(this: Socket, data: unknown, ...rest: unknown[]): boolean {
    armFromWrite(tap, data);
    return write.call(this, data, ...rest);
  } as Socket['write'];
}
