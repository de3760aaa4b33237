/**
 * The PGCOPY binary decoder: reads `COPY (SELECT ...) TO STDOUT (FORMAT binary)` output chunk by
 * chunk and appends every field straight into the encoder's column writers, with no per-row
 * objects. Also decodes single binary values into the exact value universe (for the page's
 * last key, which becomes the resume token).
 *
 * Owns: the PGCOPY framing (signature, flags, header extension, tuples, trailer), reassembly of
 * tuples that straddle chunks, and each Postgres binary send format we read (types.ts WireKind).
 * Must never allocate per value on the hot path, and never round: infinities map to the
 * documented sentinels, out-of-range values are DataErrors.
 *
 * Format (Postgres docs, "COPY ... Binary Format"): 11-byte signature, int32 flags, int32 header
 * extension length + extension; per tuple an int16 field count, then per field an int32 length
 * (-1 = NULL) and that many bytes in the type's binary send format, all integers big-endian;
 * an int16 -1 ends the data.
 *
 * Guards (issue 9, schema changes are never silent): a field length below -1 is a protocol error
 * (SOURCE_PROTOCOL), never a step backwards. Every fixed-width send format is checked against its
 * width (one compare per field, `WIRE_WIDTH`), numeric against 8 + 2 * ndigits, list elements
 * likewise: a column whose type changed after introspection (int4 -> int8 between two pages)
 * delivers values of another width, and that is a SchemaChangedError, never wrong values. A type
 * change that keeps the width (text -> int4) is invisible here; the page's catalog check
 * (incremental.ts) catches it.
 */
import { DataError, SourceError } from '../../../contracts/errors.js';
import type { ColumnWriter } from '../../../dataplane/encoder.js';
import { SchemaChangedError } from '../../../dataplane/schema-rules.js';
import {
  DATE_INFINITY,
  DATE_NEG_INFINITY,
  TIMESTAMP_INFINITY,
  TIMESTAMP_NEG_INFINITY,
} from '../../../position/time-text.js';
import type { ValueContext } from '../../value-context.js';
import { multiDimensional, nonFiniteNumeric, timestampOutOfRange, type WireKind } from '../types.js';

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const SIGNATURE_LENGTH = 11;
const FLAGS_OFFSET = 11;
const EXTENSION_LENGTH_OFFSET = 15;
const HEADER_FIXED_LENGTH = 19;
/** Flags bit 16: every tuple carries an OID (only WITH OIDS, gone since PG 12). */
const FLAG_HAS_OIDS = 1 << 16;
/** A chunk whose memory is larger than this is not kept alive for the last row's key. */
const KEEP_CHUNK_MAX = 1 << 20;
const TRAILER = -1;
const NULL_LENGTH = -1;

/** Days from 1970-01-01 to 2000-01-01, Postgres' date epoch. */
export const PG_EPOCH_DAYS = 10_957;
/** Microseconds from 1970-01-01 to 2000-01-01, Postgres' timestamp epoch. */
export const PG_EPOCH_MICROS = 946_684_800_000_000;
const PG_EPOCH_MICROS_BIG = BigInt(PG_EPOCH_MICROS);
const INT32_MAX = 0x7fffffff;
const INT32_MIN = -0x80000000;
const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

// Binary NUMERIC: int16 ndigits, int16 weight, uint16 sign, int16 dscale, then base-10000 digits.
const NUMERIC_NDIGITS = 0;
const NUMERIC_WEIGHT = 2;
const NUMERIC_SIGN = 4;
const NUMERIC_DSCALE = 6;
const NUMERIC_DIGITS = 8;
const NUMERIC_NEG = 0x4000;
const NUMERIC_NAN = 0xc000;
const NUMERIC_PINF = 0xd000;
const NUMERIC_NINF = 0xf000;

// Binary array: int32 ndim, int32 has-null flag, int32 element OID, then per dimension int32
// size and int32 lower bound, then the elements as (int32 length, bytes).
const ARRAY_NDIM = 0;
const ARRAY_HEADER = 12;
const ARRAY_DIM_SIZE = 12;
const ARRAY_DIM_HEADER = 8;

const JSONB_VERSION = 1;
const UUID_BYTES = 16;
const UUID_TEXT_LENGTH = 36;

/** `WIRE_WIDTH` of a send format whose length varies. */
const VARIABLE_WIDTH = -1;
/** `WIRE_WIDTH` of numeric: 8 header bytes + 2 per base-10000 digit (`NUMERIC_DIGITS`). */
const NUMERIC_WIDTH = -2;

/** The byte length of each send format: fixed widths, or VARIABLE_WIDTH / NUMERIC_WIDTH. */
const WIRE_WIDTH: Readonly<Record<WireKind, number>> = {
  bool: 1,
  int2: 2,
  int4: 4,
  int8: 8,
  float8: 8,
  date: 4,
  timestamp: 8,
  uuid: UUID_BYTES,
  numeric: NUMERIC_WIDTH,
  text: VARIABLE_WIDTH,
  jsonb: VARIABLE_WIDTH,
  bytea: VARIABLE_WIDTH,
};

// Integer codes of the send formats: the per-value dispatch (`appendWire`) switches on these, a
// jump table, rather than on the WireKind strings (a chain of comparisons per value).
const W_BOOL = 0;
const W_INT2 = 1;
const W_INT4 = 2;
const W_INT8 = 3;
const W_FLOAT8 = 4;
const W_DATE = 5;
const W_TIMESTAMP = 6;
const W_UUID = 7;
const W_NUMERIC = 8;
const W_TEXT = 9;
const W_JSONB = 10;
const W_BYTEA = 11;
const WIRE_CODE: Readonly<Record<WireKind, number>> = {
  bool: W_BOOL,
  int2: W_INT2,
  int4: W_INT4,
  int8: W_INT8,
  float8: W_FLOAT8,
  date: W_DATE,
  timestamp: W_TIMESTAMP,
  uuid: W_UUID,
  numeric: W_NUMERIC,
  text: W_TEXT,
  jsonb: W_JSONB,
  bytea: W_BYTEA,
};

/**
 * Whether a non-null value of `len` bytes at `buf[p..)` has the width its send format has, given
 * the format's `WIRE_WIDTH` entry `width`. The caller has already compared `len !== width`.
 */
function wrongWidth(width: number, buf: Uint8Array, p: number, len: number): boolean {
  if (width === VARIABLE_WIDTH) return false;
  if (width !== NUMERIC_WIDTH) return true;
  return len < NUMERIC_DIGITS || len !== NUMERIC_DIGITS + 2 * int16(buf, p + NUMERIC_NDIGITS);
}

/** The width a value of `wire` should have had, for messages. */
function widthText(wire: WireKind, buf: Uint8Array, p: number, len: number): string {
  const width = WIRE_WIDTH[wire];
  if (width !== NUMERIC_WIDTH) return `${width} bytes`;
  if (len < NUMERIC_DIGITS) return `at least ${NUMERIC_DIGITS} bytes`;
  const ndigits = int16(buf, p + NUMERIC_NDIGITS);
  return `${NUMERIC_DIGITS + 2 * ndigits} bytes (8 + 2 per digit, ${ndigits} digits)`;
}

/**
 * A value of another width than its introspected type's: the column's type changed since the
 * table was introspected (e.g. int4 -> int8 between two pages of a run).
 */
function widthMismatch(
  ctx: ValueContext,
  wire: WireKind,
  buf: Uint8Array,
  p: number,
  len: number,
  what: 'value' | 'list element',
): ChangedWidthError {
  const type = what === 'value' ? 'type' : 'element type';
  return new ChangedWidthError(
    ctx,
    `column "${ctx.column}": a ${len}-byte ${what} arrived where its introspected ${type} ${wire} has ${widthText(wire, buf, p, len)}; the column type changed`,
  );
}

/**
 * The SchemaChangedError of a value whose width is not its introspected type's (`where` is
 * `page`; the table is `ctx.table`). `detail` says what arrived, for the page reader, which asks
 * the catalog what the column became.
 */
export class ChangedWidthError extends SchemaChangedError {
  constructor(
    readonly ctx: ValueContext,
    readonly detail: string,
  ) {
    super(ctx.table, [], 'page', detail);
  }
}

/** A length word below -1 (or a list that does not add up): the stream is not valid PGCOPY. */
function protocolError(ctx: ValueContext | undefined, what: string): SourceError {
  const where = ctx ? `${ctx.table}.${ctx.column}` : 'COPY binary stream';
  return new SourceError(
    'SOURCE_PROTOCOL',
    `${where}: protocol error: ${what}; the COPY binary stream is corrupt (a length is -1 for NULL or >= 0)`,
  );
}

function int16(buf: Uint8Array, off: number): number {
  return (((buf[off]! << 8) | buf[off + 1]!) << 16) >> 16;
}

function uint16(buf: Uint8Array, off: number): number {
  return (buf[off]! << 8) | buf[off + 1]!;
}

function int32(buf: Uint8Array, off: number): number {
  return (buf[off]! << 24) | (buf[off + 1]! << 16) | (buf[off + 2]! << 8) | buf[off + 3]!;
}

const HEX_DIGITS = new Uint8Array(Buffer.from('0123456789abcdef', 'latin1'));
/** Scratch for a uuid's canonical text; appendUtf8Bytes copies out of it. */
const uuidText = new Uint8Array(UUID_TEXT_LENGTH);

function writeUuidText(buf: Uint8Array, off: number): void {
  let o = 0;
  for (let k = 0; k < UUID_BYTES; k++) {
    if (k === 4 || k === 6 || k === 8 || k === 10) uuidText[o++] = 0x2d; // '-'
    const b = buf[off + k]!;
    uuidText[o++] = HEX_DIGITS[b >> 4]!;
    uuidText[o++] = HEX_DIGITS[b & 15]!;
  }
}

/** One selected field of the COPY output and where it goes. */
export interface CopyField {
  readonly wire: WireKind;
  /** A 1-D array of `wire` elements. */
  readonly list: boolean;
  /** The column writer; undefined when the field is only selected for the resume key. */
  readonly writer: ColumnWriter | undefined;
  /** For messages: `schema.table` and the column. */
  readonly ctx: ValueContext;
}

/** Appends one non-null scalar value of `wire` at `buf[p..p+len)` to `w`. Exported for tests. */
export function appendScalar(
  w: ColumnWriter,
  wire: WireKind,
  buf: Uint8Array,
  p: number,
  len: number,
  ctx: ValueContext,
): void {
  appendWire(w, WIRE_CODE[wire], buf, p, len, ctx);
}

/** `appendScalar` by the send format's code (`WIRE_CODE`): what the decoder calls per field. */
function appendWire(
  w: ColumnWriter,
  code: number,
  buf: Uint8Array,
  p: number,
  len: number,
  ctx: ValueContext,
): void {
  switch (code) {
    case W_BOOL:
      w.appendBool(buf[p] !== 0);
      return;
    case W_INT2:
      w.appendInt16BE(buf, p);
      return;
    case W_INT4:
      w.appendInt32BE(buf, p);
      return;
    case W_INT8:
      w.appendInt64BE(buf, p);
      return;
    case W_FLOAT8:
      w.appendFloat64BE(buf, p);
      return;
    case W_NUMERIC: {
      const sign = uint16(buf, p + NUMERIC_SIGN);
      if (sign === NUMERIC_NAN || sign === NUMERIC_PINF || sign === NUMERIC_NINF) {
        throw nonFiniteNumeric(
          ctx,
          sign === NUMERIC_NAN ? 'NaN' : sign === NUMERIC_PINF ? 'Infinity' : '-Infinity',
        );
      }
      w.appendNumericBinary(buf, p);
      return;
    }
    case W_TEXT:
      w.appendUtf8Bytes(buf, p, p + len);
      return;
    case W_JSONB:
      if (buf[p] !== JSONB_VERSION) throw unknownJsonbVersion(ctx, buf[p]!);
      w.appendUtf8Bytes(buf, p + 1, p + len);
      return;
    case W_BYTEA:
      w.appendBytes(buf, p, p + len);
      return;
    case W_UUID:
      writeUuidText(buf, p);
      w.appendUtf8Bytes(uuidText, 0, UUID_TEXT_LENGTH);
      return;
    case W_DATE: {
      const days = int32(buf, p);
      if (days === INT32_MAX) w.appendInt(DATE_INFINITY);
      else if (days === INT32_MIN) w.appendInt(DATE_NEG_INFINITY);
      else w.appendInt32BE(buf, p, PG_EPOCH_DAYS);
      return;
    }
    case W_TIMESTAMP: {
      const top = buf[p]!;
      // Only values within ~2^56 of the int64 limits (the infinities, and years past ~290000)
      // need the exact slow path; everything else is shifted to the Unix epoch without BigInt.
      if (top === 0x7f || top === 0x80) w.appendBigInt(timestampMicros(buf, p, ctx));
      else w.appendInt64BE(buf, p, PG_EPOCH_MICROS);
      return;
    }
  }
}

function unknownJsonbVersion(ctx: ValueContext, v: number): DataError {
  return new DataError(
    `${ctx.table}.${ctx.column}: jsonb binary format version ${v} is unknown (expected 1)`,
  );
}

/** A binary timestamp as micros since 1970, the infinities as the time-text.ts sentinels. */
function timestampMicros(buf: Uint8Array, p: number, ctx: ValueContext): bigint {
  const v = Buffer.from(buf.buffer, buf.byteOffset + p, 8).readBigInt64BE(0);
  if (v === INT64_MAX) return TIMESTAMP_INFINITY;
  if (v === INT64_MIN) return TIMESTAMP_NEG_INFINITY;
  const micros = v + PG_EPOCH_MICROS_BIG;
  if (micros >= TIMESTAMP_INFINITY) throw timestampOutOfRange(ctx);
  return micros;
}

/**
 * Appends a non-null 1-D binary array at `buf[p..p+len)` as one list value. Each element's length
 * is checked like a field's: below -1 is a protocol error, another width than the element type's
 * is a SchemaChangedError; the elements must end exactly at the array's end.
 */
function appendList(
  w: ColumnWriter,
  wire: WireKind,
  buf: Uint8Array,
  p: number,
  len: number,
  ctx: ValueContext,
): void {
  const end = p + len;
  if (len < ARRAY_HEADER) throw protocolError(ctx, `an array value of ${len} bytes has no header`);
  const ndim = int32(buf, p + ARRAY_NDIM);
  const child = w.beginList();
  if (ndim === 0) {
    w.endList();
    return;
  }
  if (ndim !== 1) throw multiDimensional(ctx);
  const width = WIRE_WIDTH[wire];
  const code = WIRE_CODE[wire];
  const n = int32(buf, p + ARRAY_DIM_SIZE);
  let q = p + ARRAY_HEADER + ARRAY_DIM_HEADER;
  for (let k = 0; k < n; k++) {
    if (q + 4 > end) throw protocolError(ctx, `an array of ${n} elements ends after ${k}`);
    const elen = int32(buf, q);
    q += 4;
    if (elen < 0) {
      if (elen !== NULL_LENGTH) throw protocolError(ctx, `list element ${k + 1} has length ${elen}`);
      child.appendNull();
    } else {
      if (q + elen > end)
        throw protocolError(ctx, `list element ${k + 1} of ${elen} bytes overruns its array`);
      if (elen !== width && wrongWidth(width, buf, q, elen))
        throw widthMismatch(ctx, wire, buf, q, elen, 'list element');
      appendWire(child, code, buf, q, elen, ctx);
      q += elen;
    }
  }
  if (q !== end)
    throw protocolError(ctx, `an array value of ${len} bytes holds ${q - p} bytes of elements and header`);
  w.endList();
}

/**
 * Decodes one non-null binary value into the exact value universe (types.ts `parseText` gives
 * the same values from text). Used for the page's last key, not on the per-row path.
 */
export function decodeBinaryValue(
  wire: WireKind,
  buf: Uint8Array,
  p: number,
  len: number,
  ctx: ValueContext,
): unknown {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  switch (wire) {
    case 'bool':
      return buf[p] !== 0;
    case 'int2':
      return int16(buf, p);
    case 'int4':
      return int32(buf, p);
    case 'int8':
      return b.readBigInt64BE(p);
    case 'float8':
      return b.readDoubleBE(p);
    case 'numeric':
      return numericBinaryToText(buf, p);
    case 'text':
      return b.toString('utf8', p, p + len);
    case 'jsonb':
      return b.toString('utf8', p + 1, p + len);
    case 'bytea':
      return new Uint8Array(buf.subarray(p, p + len));
    case 'uuid':
      writeUuidText(buf, p);
      return Buffer.from(uuidText).toString('latin1');
    case 'date': {
      const days = int32(buf, p);
      if (days === INT32_MAX) return DATE_INFINITY;
      if (days === INT32_MIN) return DATE_NEG_INFINITY;
      return days + PG_EPOCH_DAYS;
    }
    case 'timestamp':
      return timestampMicros(buf, p, ctx);
  }
}

/**
 * Binary NUMERIC as the exact text Postgres' numeric_out prints: `-` for negatives, the integer
 * part without leading zeros (at least `0`), then exactly dscale fractional digits; `NaN`,
 * `Infinity`, `-Infinity` for the specials.
 */
export function numericBinaryToText(buf: Uint8Array, p: number): string {
  const ndigits = int16(buf, p + NUMERIC_NDIGITS);
  const weight = int16(buf, p + NUMERIC_WEIGHT);
  const sign = uint16(buf, p + NUMERIC_SIGN);
  const dscale = int16(buf, p + NUMERIC_DSCALE);
  if (sign === NUMERIC_NAN) return 'NaN';
  if (sign === NUMERIC_PINF) return 'Infinity';
  if (sign === NUMERIC_NINF) return '-Infinity';
  const digit = (d: number) => (d >= 0 && d < ndigits ? int16(buf, p + NUMERIC_DIGITS + 2 * d) : 0);
  let s = sign === NUMERIC_NEG ? '-' : '';
  if (weight < 0) s += '0';
  else for (let d = 0; d <= weight; d++) s += d === 0 ? String(digit(d)) : String(digit(d)).padStart(4, '0');
  if (dscale > 0) {
    let frac = '';
    for (let d = weight + 1; frac.length < dscale; d++) frac += String(digit(d)).padStart(4, '0');
    s += `.${frac.slice(0, dscale)}`;
  }
  return s;
}

/**
 * A tuple on the wire is larger than the decoder was allowed to buffer. `bytes` is what its
 * length words promised when it was refused (a lower bound while the tuple was incomplete).
 */
export class TupleTooLargeError extends Error {
  override name = 'TupleTooLargeError';
  constructor(
    readonly bytes: number,
    readonly complete: boolean,
  ) {
    super(`a COPY tuple of ${complete ? '' : 'at least '}${bytes} bytes is over the limit`);
  }
}

/**
 * Streams PGCOPY binary chunks into column writers. Feed every chunk to `push`, then call
 * `end`. Tuples past `limit` are counted but not appended (the page reads `LIMIT n + 1` to learn
 * whether more rows exist). `onRow(i)` runs after row i's fields were appended (the caller
 * appends the metadata columns there); when it returns true the page is closed: nothing after
 * that row is decoded, buffered or appended, and `end` accepts a stream cut short.
 *
 * A tuple whose length words add up to more than `maxTupleBytes` is refused with
 * `TupleTooLargeError` as soon as they show it, before it is decoded (and, when it straddles
 * chunks, before the rest of it is buffered here).
 *
 * The last appended row's key fields stay addressable (`lastKey`) without copying: the decoder
 * keeps a reference to the chunk that held them.
 */
export class CopyBinaryDecoder {
  private readonly fields: readonly CopyField[];
  private readonly limit: number;
  private readonly onRow: (i: number) => unknown;
  private readonly maxTupleBytes: number;
  /** Field indexes whose values form the resume key, in key order. */
  private readonly keyFields: readonly number[];
  /** Start and length of each key field in `lastKeyBuf` for the last appended row. */
  private readonly keySpans: Int32Array;
  private lastKeyBuf: Uint8Array | undefined;
  /** Where the last row's key bytes are copied when its chunk is too big to keep (`copyKeys`). */
  private keyCopy = new Uint8Array(64);
  private readonly fieldStarts: Int32Array;
  private readonly fieldLens: Int32Array;
  /** `WIRE_WIDTH` of each field's send format; VARIABLE_WIDTH for lists (their elements are checked). */
  private readonly widths: Int32Array;
  /** `WIRE_CODE` of each field's send format (of its elements for lists). */
  private readonly codes: Int32Array;

  private headerDone = false;
  private finished = false;
  /** `onRow` closed the page: the rest of the stream is ignored. */
  closed = false;
  /** Tuples seen, appended or not. */
  tuples = 0;
  /** Tuples appended (at most `limit`). */
  appended = 0;

  private pending: Uint8Array[] = [];
  private pendingLength = 0;
  /** Bytes the pending data needs before another attempt can make progress. */
  private pendingNeed = 0;

  constructor(
    fields: readonly CopyField[],
    keyFields: readonly number[],
    limit: number,
    onRow: (i: number) => unknown,
    maxTupleBytes = Number.POSITIVE_INFINITY,
  ) {
    this.fields = fields;
    this.keyFields = keyFields;
    this.limit = limit;
    this.onRow = onRow;
    this.maxTupleBytes = maxTupleBytes;
    this.keySpans = new Int32Array(keyFields.length * 2);
    this.fieldStarts = new Int32Array(fields.length);
    this.fieldLens = new Int32Array(fields.length);
    this.widths = Int32Array.from(fields, (f) => (f.list ? VARIABLE_WIDTH : WIRE_WIDTH[f.wire]));
    this.codes = Int32Array.from(fields, (f) => WIRE_CODE[f.wire]);
  }

  /** Decodes every complete tuple of `chunk` (plus what earlier chunks left over). */
  push(chunk: Uint8Array): void {
    this.pushRange(chunk, 0, chunk.length);
  }

  /**
   * Decodes every complete tuple of the stream bytes `chunk[start, end)` (plus what earlier
   * ranges left over). The decoder may keep views of `chunk` (a tuple that straddles ranges, the
   * last row's key): `chunk` must not be overwritten afterwards.
   */
  pushRange(chunk: Uint8Array, start: number, end: number): void {
    if (this.closed || end <= start) return;
    let buf = chunk;
    let off = start;
    let n = end;
    if (this.pendingLength > 0) {
      this.pending.push(chunk.subarray(start, end));
      this.pendingLength += end - start;
      // Concatenating only once enough bytes are there keeps a huge tuple spread over many
      // chunks linear instead of quadratic.
      if (this.pendingLength < this.pendingNeed) return;
      buf = Buffer.concat(this.pending, this.pendingLength);
      off = 0;
      n = buf.length;
      this.pending = [];
      this.pendingLength = 0;
    }
    if (!this.headerDone) {
      const headerEnd = this.headerEnd(buf, off, n);
      if (headerEnd < 0) {
        this.keep(buf, off, n, -headerEnd);
        return;
      }
      off = headerEnd;
      this.headerDone = true;
    }
    while (off < n) {
      if (this.finished) throw new DataError('COPY binary stream has data after its trailer');
      const tupleEnd = this.tupleEnd(buf, off, n);
      if (tupleEnd < 0) {
        // -tupleEnd - off: the bytes the tuple needs at least, by the length words seen so far.
        if (-tupleEnd - off > this.maxTupleBytes) throw new TupleTooLargeError(-tupleEnd - off, false);
        this.keep(buf, off, n, -tupleEnd - off);
        return;
      }
      if (tupleEnd - off > this.maxTupleBytes) throw new TupleTooLargeError(tupleEnd - off, true);
      this.decodeTuple(buf, off);
      off = tupleEnd;
      if (this.closed) {
        this.pending = [];
        this.pendingLength = 0;
        return;
      }
    }
  }

  /** Checks that the stream ended with the trailer. */
  end(): void {
    if (this.closed) return;
    if (!this.finished || this.pendingLength > 0) {
      throw new DataError('COPY binary stream ended early (no trailer); the connection was cut mid-page');
    }
  }

  /** The last appended row's key field `k` as (buffer, start, length); length -1 = NULL. */
  lastKey(k: number): { buf: Uint8Array; start: number; length: number } | undefined {
    if (this.lastKeyBuf === undefined) return undefined;
    return { buf: this.lastKeyBuf, start: this.keySpans[2 * k]!, length: this.keySpans[2 * k + 1]! };
  }

  /** The key fields of the row just decoded from `buf`, copied into `keyCopy`; spans rebased. */
  private copyKeys(buf: Uint8Array): Uint8Array {
    const spans = this.keySpans;
    let need = 0;
    for (let k = 0; k < spans.length; k += 2) need += Math.max(0, spans[k + 1]!);
    if (this.keyCopy.length < need) this.keyCopy = new Uint8Array(Math.max(need, 2 * this.keyCopy.length));
    let at = 0;
    for (let k = 0; k < spans.length; k += 2) {
      const len = spans[k + 1]!;
      if (len > 0) this.keyCopy.set(buf.subarray(spans[k]!, spans[k]! + len), at);
      spans[k] = at;
      if (len > 0) at += len;
    }
    return this.keyCopy;
  }

  private keep(buf: Uint8Array, from: number, end: number, need: number): void {
    const rest = buf.subarray(from, end);
    this.pending = [rest];
    this.pendingLength = rest.length;
    this.pendingNeed = need;
  }

  /**
   * Offset after the header that starts at `off`, or -(bytes needed from `off`) when
   * `buf[off, n)` does not hold all of it.
   */
  private headerEnd(buf: Uint8Array, off: number, n: number): number {
    if (n - off < HEADER_FIXED_LENGTH) return -HEADER_FIXED_LENGTH;
    for (let k = 0; k < SIGNATURE_LENGTH; k++) {
      if (buf[off + k] !== SIGNATURE[k])
        throw new DataError('COPY output does not start with the PGCOPY binary signature');
    }
    if ((int32(buf, off + FLAGS_OFFSET) & FLAG_HAS_OIDS) !== 0) {
      throw new DataError('COPY binary output carries row OIDs; tidemark never asks for them');
    }
    const length = HEADER_FIXED_LENGTH + int32(buf, off + EXTENSION_LENGTH_OFFSET);
    return n - off < length ? -length : off + length;
  }

  /**
   * Offset after the tuple at `off`, or -(absolute offset the buffer must reach) when the tuple
   * does not end before `n`. Walks only the length words.
   */
  private tupleEnd(buf: Uint8Array, off: number, n: number): number {
    if (off + 2 > n) return -(off + 2);
    const count = int16(buf, off);
    if (count === TRAILER) return off + 2;
    let p = off + 2;
    for (let k = 0; k < count; k++) {
      if (p + 4 > n) return -(p + 4);
      const len = int32(buf, p);
      p += 4;
      if (len > 0) {
        p += len;
        if (p > n) return -p;
      } else if (len < NULL_LENGTH) {
        throw protocolError(this.fields[k]?.ctx, `field ${k + 1} of a tuple has length ${len}`);
      }
    }
    return p;
  }

  private decodeTuple(buf: Uint8Array, off: number): void {
    const count = int16(buf, off);
    if (count === TRAILER) {
      this.finished = true;
      return;
    }
    const fields = this.fields;
    if (count !== fields.length) {
      throw new DataError(`COPY tuple has ${count} fields, expected ${fields.length}`);
    }
    const index = this.tuples++;
    if (index >= this.limit) return;
    let p = off + 2;
    const starts = this.fieldStarts;
    const lens = this.fieldLens;
    const widths = this.widths;
    const codes = this.codes;
    for (let k = 0; k < count; k++) {
      const len = int32(buf, p);
      p += 4;
      starts[k] = p;
      lens[k] = len;
      const f = fields[k]!;
      // Checked for every field, key-only ones too: their bytes become the resume token.
      if (len < 0) {
        if (len !== NULL_LENGTH) throw protocolError(f.ctx, `field ${k + 1} of a tuple has length ${len}`);
      } else if (len !== widths[k] && wrongWidth(widths[k]!, buf, p, len)) {
        throw widthMismatch(f.ctx, f.wire, buf, p, len, 'value');
      }
      const w = f.writer;
      if (w !== undefined) {
        if (len === NULL_LENGTH) w.appendNull();
        else if (f.list) appendList(w, f.wire, buf, p, len, f.ctx);
        else appendWire(w, codes[k]!, buf, p, len, f.ctx);
      }
      if (len > 0) p += len;
    }
    const keys = this.keyFields;
    const spans = this.keySpans;
    for (let k = 0; k < keys.length; k++) {
      const fi = keys[k]!;
      spans[2 * k] = starts[fi]!;
      spans[2 * k + 1] = lens[fi]!;
    }
    // Referencing the chunk keeps its memory alive until the next row: fine for a socket chunk,
    // not for a big row's own buffer (a 40 MiB value would stay in memory twice). Copy the key
    // bytes out of those.
    this.lastKeyBuf = buf.buffer.byteLength > KEEP_CHUNK_MAX ? this.copyKeys(buf) : buf;
    this.appended++;
    if (this.onRow(index) === true) this.closed = true;
  }
}
