/**
 * One growable Arrow column for the wire encoder (`encoder.ts`): typed buffers we fill
 * ourselves and hand to `makeData` when the batch is finished.
 *
 * Owns: the buffer layout of every wire type (validity bitmap, bool bitmap, int8/16/32, int64 and
 * timestamp as 64-bit slots, float64, decimal128 words, utf8/binary offsets + bytes, list offsets
 * + an element writer), the range and value-universe checks, and the raw big-endian appenders a
 * binary decoder calls with wire bytes.
 * Must never: round, wrap or truncate a value (refuse it with a `DataError`), allocate per value
 * on the raw path, or know any database client.
 *
 * Why one class for every kind rather than a subclass per kind: V8 keeps inline caches per
 * function, so a shared helper (`slot()`) called on seven receiver shapes goes megamorphic and
 * every property access slows down. One shape keeps the hot path monomorphic; the kind is an
 * integer `code` switched on where behaviour differs.
 *
 * Determinism (both source paths must give byte-identical batches): every buffer starts zeroed,
 * a null slot of a fixed-width column stays zero, NaN is stored in its canonical bit pattern, and
 * a validity bitmap exists only once a column has seen a null.
 */
import type { Data, DataType, List } from 'apache-arrow';
import { makeData } from 'apache-arrow';
import { DataError } from '../contracts/errors.js';
import { BatchError } from './batch.js';
import {
  type DecimalTarget,
  writeDecimalText,
  writeDecimalUnscaled,
  writeNumericBinary,
} from './decimal128.js';
import { checkOrdinal } from './positions.js';
import { describeType, type LogicalType } from './schema.js';

// Multi-byte values are written through typed-array views in host byte order.
if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) {
  throw new Error('tidemark encoder requires a little-endian host (Arrow buffers are little-endian)');
}

/** Kind codes: the switch key of every kind-specific path. */
const K_BOOL = 0;
const K_INT8 = 1;
const K_INT16 = 2;
const K_INT32 = 3;
const K_DATE = 4;
const K_UINT8 = 5; // `__op` only: uint8 restricted to the op codes 0..2
const K_INT64 = 6;
const K_TIMESTAMP = 7;
const K_FLOAT64 = 8;
const K_DECIMAL = 9;
const K_TEXT = 10;
const K_BINARY = 11;
const K_LIST = 12;

/** The metadata column kinds (`metadata.ts`), which have no logical type of their own. */
export type MetaKind = 'op' | 'utf8' | 'timestamp_ns' | 'bool';
const META_KINDS: Record<MetaKind, { type: LogicalType; code: number; label: string }> = {
  op: { type: { kind: 'int8' }, code: K_UINT8, label: 'uint8 op code 0..2' },
  utf8: { type: { kind: 'text' }, code: K_TEXT, label: 'utf8' },
  timestamp_ns: { type: { kind: 'timestamp', utc: true }, code: K_TIMESTAMP, label: 'timestamp(ns, UTC)' },
  bool: { type: { kind: 'bool' }, code: K_BOOL, label: 'bool' },
};
/** Value ranges of the integer kinds narrower than int32. */
const SMALL_INT_RANGES: Partial<Record<number, [number, number]>> = {
  [K_INT8]: [-128, 127],
  [K_INT16]: [-32768, 32767],
  [K_UINT8]: [0, 2],
};

/** Bytes of one fixed-width slot by kind code (the page byte budget's count, see `byteLength`). */
const SLOT_BYTES: readonly number[] = [1, 1, 2, 4, 4, 1, 8, 8, 8, 16];
/** Bytes of one text/binary/list offset. */
const OFFSET_BYTES = 4;

const TWO32 = 4294967296;
const MIN_INT64 = -(2n ** 63n);
const MAX_INT64 = 2n ** 63n - 1n;
const MAX_OFFSET = 2147483647;
/** Below this many UTF-16 units, a char loop beats a call into the UTF-8 encoder for ASCII. */
const ASCII_LOOP_MAX = 64;
/** Up to this many bytes, a byte loop beats `subarray` + `set` (which allocates a view). */
const COPY_LOOP_MAX = 32;
const HEX = new Uint8Array([48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 97, 98, 99, 100, 101, 102]);
const MIN_CAPACITY = 8;
/** Bytes per slot a text/binary column's byte buffer starts with (it grows by doubling past that). */
const INITIAL_BYTES_PER_SLOT = 16;

const NO_U8 = new Uint8Array(0);
const NO_I8 = new Int8Array(0);
const NO_I16 = new Int16Array(0);
const NO_I32 = new Int32Array(0);
const NO_I64 = new BigInt64Array(0);
const NO_U32 = new Uint32Array(0);
const NO_F64 = new Float64Array(0);
const NO_BUF = Buffer.alloc(0);

// A DataView over the last source buffer a raw appender read: decoders feed one chunk to every
// column in turn, so one cached view serves them all without a view per value.
let viewSource: Uint8Array = NO_U8;
let view: DataView = new DataView(NO_U8.buffer);
function viewOf(buf: Uint8Array): DataView {
  if (buf !== viewSource) {
    viewSource = buf;
    view = new DataView(buf.buffer as ArrayBuffer, buf.byteOffset, buf.byteLength);
  }
  return view;
}

/** Names a JS value's type for an error message (`Date`, `Array`, `bigint`, `undefined`...). */
function jsType(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v !== 'object') return typeof v;
  return (v as object).constructor?.name ?? 'object';
}

/** A validity bitmap with room for `capacity` slots, the first `valid` of them set. */
function onesBitmap(capacity: number, valid: number): Uint8Array {
  const bits = new Uint8Array((capacity + 7) >> 3);
  bits.fill(0xff, 0, valid >> 3);
  if ((valid & 7) !== 0) bits[valid >> 3] = (1 << (valid & 7)) - 1;
  return bits;
}

function grownU8(a: Uint8Array, n: number): Uint8Array {
  const b = new Uint8Array(n);
  b.set(a);
  return b;
}

/** The buffers of one Arrow array; `makeData`'s overloads key on static types known only at run time. */
interface ArrowDataProps {
  type: DataType;
  length: number;
  nullCount: number;
  nullBitmap?: Uint8Array | undefined;
  data?: ArrayBufferView;
  valueOffsets?: Int32Array;
  child?: Data;
  children?: Data[];
}

/** `makeData` for buffers assembled at run time. */
export function arrowData(props: ArrowDataProps): Data {
  return (makeData as (p: ArrowDataProps) => Data)(props);
}

/**
 * Appends the values of one column. `BatchEncoder.col(i)` hands these out; a binary decoder
 * resolves each column's writer once per batch and calls the appender for the column's kind.
 * An appender the column's kind does not support throws a `DataError`.
 *
 * Each appender adds exactly one value (for lists, `endList` adds the list). Integer appenders
 * check the column's range; nothing is ever wrapped, rounded or truncated. A refused value adds
 * nothing to its column (but the row is incomplete: see `BatchEncoder.reset`).
 */
export class ColumnWriter {
  /** Column name (list elements: `name[]`), used in every error message. */
  readonly name: string;
  /** What the column holds, for messages: `int64`, `decimal(12,2)`, `list<text>`... */
  readonly kind: string;
  readonly nullable: boolean;
  /** The column's Arrow wire type. */
  readonly arrowType: DataType;
  /** Values (including nulls) appended since the batch started. */
  length = 0;
  /** Nulls among them. */
  nullCount = 0;
  private readonly code: number;
  /** Slots the value buffers have room for; 0 until the first append allocates them. */
  private capacity = 0;
  /** Slots the first allocation makes room for. */
  private readonly initialCapacity: number;
  private validity: Uint8Array | null = null;
  private readonly min: number;
  private readonly max: number;
  /** bool: value bitmap; uint8: values. */
  private u8: Uint8Array = NO_U8;
  private i8: Int8Array = NO_I8;
  private i16: Int16Array = NO_I16;
  /** int32/date: values; int64/timestamp: the `i64` memory as (low, high) int32 pairs. */
  private i32: Int32Array = NO_I32;
  private i64: BigInt64Array = NO_I64;
  private f64: Float64Array = NO_F64;
  /** decimal: four uint32 words per value, least significant first. */
  private words: Uint32Array = NO_U32;
  private readonly decimal: DecimalTarget;
  /** text/binary/list: offsets[i]..offsets[i+1] is value i (bytes, or child elements). */
  private offsets: Int32Array = NO_I32;
  /** text/binary bytes: a Node Buffer so strings encode in place (`write`) without a view per value. */
  private data: Buffer = NO_BUF;
  private pos = 0;
  /** list: the element writer; elements are always nullable on the wire. */
  private readonly child: ColumnWriter | null;
  private open = false;
  /** The last `__pos` prefix and its UTF-8 bytes, encoded once per batch. */
  private prefix = '';
  private prefixBytes: Uint8Array = NO_U8;
  /** The last source `copyBytes` copied from and its memory (see there); dropped by toData. */
  private source: Uint8Array | undefined;
  private sourceMemory: ArrayBufferLike = NO_U8.buffer;
  private sourceOffset = 0;

  /** A writer for a data column (or list element) of logical type `t`. */
  constructor(name: string, t: LogicalType, nullable: boolean, arrowType: DataType, capacity: number);
  /** @internal A writer for a metadata column. */
  constructor(name: string, t: MetaKind, nullable: boolean, arrowType: DataType, capacity: number);
  constructor(
    name: string,
    t: LogicalType | MetaKind,
    nullable: boolean,
    arrowType: DataType,
    capacity: number,
  ) {
    this.name = name;
    this.nullable = nullable;
    this.arrowType = arrowType;
    this.initialCapacity = Math.max(capacity, MIN_CAPACITY);
    const meta = typeof t === 'string' ? META_KINDS[t] : undefined;
    const lt = meta?.type ?? (t as LogicalType);
    this.kind = meta?.label ?? describeType(lt);
    this.code = meta?.code ?? codeOf(lt);
    [this.min, this.max] = SMALL_INT_RANGES[this.code] ?? [-2147483648, 2147483647];
    this.decimal =
      lt.kind === 'decimal'
        ? { column: name, precision: lt.precision, scale: lt.scale }
        : { column: name, precision: 38, scale: 0 };
    this.child =
      lt.kind === 'list'
        ? new ColumnWriter(
            `${name}[]`,
            lt.element,
            true,
            (arrowType as List).children[0]!.type,
            this.initialCapacity,
          )
        : null;
    // No buffers yet: they are allocated on the first append (`grow`), so a writer that never
    // receives a value (the encoder's next batch after the last page, a metadata column kept
    // constant) costs no memory and no zeroing.
  }

  /** Allocates zeroed value buffers for `n` slots (first use and every growth). */
  private allocate(n: number): void {
    switch (this.code) {
      case K_BOOL:
        this.u8 = grownU8(this.u8, (n + 7) >> 3);
        break;
      case K_UINT8:
        this.u8 = grownU8(this.u8, n);
        break;
      case K_INT8: {
        const a = new Int8Array(n);
        a.set(this.i8);
        this.i8 = a;
        break;
      }
      case K_INT16: {
        const a = new Int16Array(n);
        a.set(this.i16);
        this.i16 = a;
        break;
      }
      case K_INT32:
      case K_DATE: {
        const a = new Int32Array(n);
        a.set(this.i32);
        this.i32 = a;
        break;
      }
      case K_INT64:
      case K_TIMESTAMP: {
        const a = new BigInt64Array(n);
        a.set(this.i64);
        this.i64 = a;
        this.i32 = new Int32Array(a.buffer);
        break;
      }
      case K_FLOAT64: {
        const a = new Float64Array(n);
        a.set(this.f64);
        this.f64 = a;
        this.u8 = new Uint8Array(a.buffer);
        break;
      }
      case K_DECIMAL: {
        const a = new Uint32Array(n * 4);
        a.set(this.words);
        this.words = a;
        break;
      }
      case K_TEXT:
      case K_BINARY:
      case K_LIST: {
        const a = new Int32Array(n + 1);
        a.set(this.offsets);
        this.offsets = a;
        break;
      }
    }
  }

  private grow(): void {
    const n = this.capacity === 0 ? this.initialCapacity : this.capacity * 2;
    this.allocate(n);
    if (this.validity !== null) this.validity = grownU8(this.validity, (n + 7) >> 3);
    this.capacity = n;
  }

  /** Claims the next slot as a valid value and returns its index. Read buffers only after it: it may grow them. */
  private slot(): number {
    const i = this.length;
    if (i === this.capacity) this.grow();
    if (this.validity !== null) this.validity[i >> 3]! |= 1 << (i & 7);
    this.length = i + 1;
    return i;
  }

  /** Appends SQL NULL. A column declared NOT NULL refuses it. */
  appendNull(): void {
    if (!this.nullable) {
      throw new DataError(
        `column "${this.name}" (${this.kind}) is declared NOT NULL but a NULL arrived; ` +
          `the source's schema changed or the driver mapped a value to null: re-discover the table`,
      );
    }
    const i = this.length;
    if (i === this.capacity) this.grow();
    if (this.validity === null) this.validity = onesBitmap(this.capacity, i);
    switch (this.code) {
      case K_DECIMAL: // a refused value may have left words in this slot
        this.words.fill(0, i * 4, i * 4 + 4);
        break;
      case K_TEXT:
      case K_BINARY:
        this.offsets[i + 1] = this.pos;
        break;
      case K_LIST:
        if (this.open) throw this.unbalanced();
        this.offsets[i + 1] = this.child!.length;
        break;
    }
    this.length = i + 1;
    this.nullCount++;
  }

  /**
   * Appends one value of the row-map value universe (schema.ts): `null`, or the JS type of the
   * column's kind (bool: boolean; int8/16/32, date: number; int64, timestamp: bigint; float64:
   * number; decimal: exact text; text: string; binary: Uint8Array; list: array). Another JS
   * type (including `undefined`) is a `DataError`.
   */
  appendValue(v: unknown): void {
    if (v === null) {
      this.appendNull();
      return;
    }
    switch (this.code) {
      case K_BOOL:
        if (typeof v !== 'boolean') throw this.wrongType(v, 'a boolean');
        this.appendBool(v);
        break;
      case K_INT8:
      case K_INT16:
      case K_INT32:
      case K_DATE:
      case K_UINT8:
        if (typeof v !== 'number') throw this.wrongType(v, 'an integer number');
        this.appendInt(v);
        break;
      case K_INT64:
      case K_TIMESTAMP:
        if (typeof v !== 'bigint')
          throw this.wrongType(v, this.code === K_INT64 ? 'a bigint' : 'a bigint of microseconds');
        this.appendBigInt(v);
        break;
      case K_FLOAT64:
        if (typeof v !== 'number') throw this.wrongType(v, 'a number');
        this.appendFloat64(v);
        break;
      case K_DECIMAL:
        if (typeof v !== 'string') throw this.wrongType(v, 'exact decimal text (a string)');
        this.appendDecimalText(v);
        break;
      case K_TEXT:
        if (typeof v !== 'string') throw this.wrongType(v, 'a string');
        this.appendText(v);
        break;
      case K_BINARY:
        if (!(v instanceof Uint8Array)) throw this.wrongType(v, 'a Uint8Array');
        this.appendBytes(v);
        break;
      default: {
        if (!Array.isArray(v)) throw this.wrongType(v, 'an array');
        const child = this.beginList();
        for (let k = 0; k < v.length; k++) child.appendValue(v[k]);
        this.endList();
      }
    }
  }

  /** bool. */
  appendBool(b: boolean): void {
    if (this.code !== K_BOOL) throw this.unsupported('appendBool');
    const i = this.slot();
    if (b) this.u8[i >> 3]! |= 1 << (i & 7);
  }

  /** int8/int16/int32/date (range-checked), int64 and timestamp (any safe integer). */
  appendInt(n: number): void {
    switch (this.code) {
      case K_INT32:
      case K_DATE: {
        if ((n | 0) !== n) throw this.outOfRange(n);
        const i = this.slot();
        this.i32[i] = n;
        return;
      }
      case K_INT64:
      case K_TIMESTAMP: {
        if (!Number.isSafeInteger(n)) throw this.outOfRange(n);
        const hi = Math.floor(n / TWO32);
        const i = this.slot() << 1;
        this.i32[i] = n - hi * TWO32; // ToInt32 keeps the low 32 bits
        this.i32[i + 1] = hi;
        return;
      }
      case K_INT8:
      case K_INT16:
      case K_UINT8: {
        if ((n | 0) !== n || n < this.min || n > this.max) throw this.outOfRange(n);
        const i = this.slot();
        if (this.code === K_INT8) this.i8[i] = n;
        else if (this.code === K_INT16) this.i16[i] = n;
        else this.u8[i] = n;
        return;
      }
      default:
        throw this.unsupported('appendInt');
    }
  }

  /** int64, timestamp. */
  appendBigInt(b: bigint): void {
    if (this.code !== K_INT64 && this.code !== K_TIMESTAMP) throw this.unsupported('appendBigInt');
    if (b < MIN_INT64 || b > MAX_INT64) throw this.outOfRange(b);
    const i = this.slot();
    this.i64[i] = b;
  }

  /** Big-endian int16 at `buf[off..off+2]`: integer columns (range-checked), int64, timestamp. */
  appendInt16BE(buf: Uint8Array, off: number): void {
    this.appendInt(viewOf(buf).getInt16(off));
  }

  /**
   * Big-endian int32 at `buf[off..off+4]` plus `bias` (a safe integer, e.g. the days between
   * 1970-01-01 and a source's epoch): integer columns (range-checked), date, int64, timestamp.
   */
  appendInt32BE(buf: Uint8Array, off: number, bias = 0): void {
    this.appendInt(viewOf(buf).getInt32(off) + bias);
  }

  /**
   * Big-endian int64 at `buf[off..off+8]` plus `bias` (a safe integer, e.g. the microseconds
   * from 1970 to 2000 for Postgres timestamps), exact and without BigInt: int64, timestamp.
   * A sum outside the int64 range is a `DataError`.
   */
  appendInt64BE(buf: Uint8Array, off: number, bias = 0): void {
    if (this.code !== K_INT64 && this.code !== K_TIMESTAMP) throw this.unsupported('appendInt64BE');
    const dv = viewOf(buf);
    let hi = dv.getInt32(off);
    let lo = dv.getUint32(off + 4);
    if (bias !== 0) {
      const biasHi = Math.floor(bias / TWO32);
      lo += bias - biasHi * TWO32;
      hi += biasHi;
      if (lo >= TWO32) {
        lo -= TWO32;
        hi += 1;
      }
      if (hi > 0x7fffffff || hi < -0x80000000) {
        throw new DataError(
          `a value of column "${this.name}" (${this.kind}) leaves the int64 range once moved by ${bias}; ` +
            `the source sent an out-of-range value (e.g. an infinity the driver did not map)`,
        );
      }
    }
    const i = this.slot() << 1;
    this.i32[i] = lo;
    this.i32[i + 1] = hi;
  }

  /** float64; every NaN is stored as the canonical quiet NaN 0x7ff8000000000000. */
  appendFloat64(x: number): void {
    if (this.code !== K_FLOAT64) throw this.unsupported('appendFloat64');
    const i = this.slot();
    if (Number.isNaN(x)) {
      // Write the bytes: storing a NaN through Float64Array may keep its payload.
      this.f64[i] = 0;
      this.u8[(i << 3) + 6] = 0xf8;
      this.u8[(i << 3) + 7] = 0x7f;
    } else {
      this.f64[i] = x;
    }
  }

  /** Big-endian IEEE float64 at `buf[off..off+8]`: float64. */
  appendFloat64BE(buf: Uint8Array, off: number): void {
    this.appendFloat64(viewOf(buf).getFloat64(off));
  }

  /** Big-endian IEEE float32 at `buf[off..off+4]`, widened exactly: float64. */
  appendFloat32BE(buf: Uint8Array, off: number): void {
    this.appendFloat64(viewOf(buf).getFloat32(off));
  }

  // The decimal parsers validate while writing into the next slot; the slot is claimed only on
  // success, and a later value or null rewrites all four words, so a refused value leaves no trace.

  /** Exact decimal text (`-12.30`), rescaled exactly to the column's scale ("1.5" -> 150 at scale 2): decimal. */
  appendDecimalText(s: string): void {
    this.reserveDecimal('appendDecimalText');
    writeDecimalText(s, this.decimal, this.words, this.length * 4);
    this.slot();
  }

  /** The unscaled integer (value x 10^scale): decimal. */
  appendDecimalUnscaled(v: bigint): void {
    this.reserveDecimal('appendDecimalUnscaled');
    writeDecimalUnscaled(v, this.decimal, this.words, this.length * 4);
    this.slot();
  }

  /** A Postgres binary NUMERIC at `buf[off..]` (header + base-10000 digits): decimal. */
  appendNumericBinary(buf: Uint8Array, off: number): void {
    this.reserveDecimal('appendNumericBinary');
    writeNumericBinary(buf, off, this.decimal, this.words, this.length * 4);
    this.slot();
  }

  private reserveDecimal(appender: string): void {
    if (this.code !== K_DECIMAL) throw this.unsupported(appender);
    if (this.length === this.capacity) this.grow();
  }

  /** A JS string, written as UTF-8 (a lone surrogate becomes U+FFFD, as TextEncoder does): text. */
  appendText(s: string): void {
    if (this.code !== K_TEXT) throw this.unsupported('appendText');
    const n = s.length;
    // A UTF-16 unit takes at most 3 UTF-8 bytes (a surrogate pair: 4 bytes for 2 units).
    this.ensureBytes(n * 3);
    const d = this.data;
    const pos = this.pos;
    if (n < ASCII_LOOP_MAX) {
      let k = 0;
      for (; k < n; k++) {
        const c = s.charCodeAt(k);
        if (c >= 0x80) break;
        d[pos + k] = c;
      }
      if (k === n) {
        this.close(pos + n);
        return;
      }
    }
    this.close(pos + d.write(s, pos));
  }

  /** UTF-8 bytes `buf[start..end)` copied as they are (the caller guarantees valid UTF-8): text. */
  appendUtf8Bytes(buf: Uint8Array, start: number, end: number): void {
    if (this.code !== K_TEXT) throw this.unsupported('appendUtf8Bytes');
    this.copyBytes(buf, start, end);
  }

  /** Bytes `buf[start..end)` (default: all of `buf`): binary. */
  appendBytes(buf: Uint8Array, start = 0, end = buf.length): void {
    if (this.code !== K_BINARY) throw this.unsupported('appendBytes');
    this.copyBytes(buf, start, end);
  }

  /**
   * @internal `prefix` followed by `ordinal` as 8 lowercase hex digits: `__pos` =
   * `prefix + ordinalHex(ordinal)` (position.ts) without building the string.
   */
  appendPrefixedOrdinal(prefix: string, ordinal: number): void {
    checkOrdinal(ordinal);
    if (prefix !== this.prefix) {
      this.prefix = prefix;
      this.prefixBytes = Buffer.from(prefix, 'utf8');
    }
    const p = this.prefixBytes;
    this.ensureBytes(p.length + 8);
    const d = this.data;
    let pos = this.pos;
    for (let k = 0; k < p.length; k++) d[pos++] = p[k]!;
    // Two 16-bit halves keep the shifts within int32 semantics.
    const hi = Math.floor(ordinal / 65536);
    const lo = ordinal - hi * 65536;
    d[pos] = HEX[hi >>> 12]!;
    d[pos + 1] = HEX[(hi >>> 8) & 15]!;
    d[pos + 2] = HEX[(hi >>> 4) & 15]!;
    d[pos + 3] = HEX[hi & 15]!;
    d[pos + 4] = HEX[lo >>> 12]!;
    d[pos + 5] = HEX[(lo >>> 8) & 15]!;
    d[pos + 6] = HEX[(lo >>> 4) & 15]!;
    d[pos + 7] = HEX[lo & 15]!;
    this.close(pos + 8);
  }

  private copyBytes(buf: Uint8Array, start: number, end: number): void {
    const n = end - start;
    this.ensureBytes(n);
    const d = this.data;
    const pos = this.pos;
    if (n <= COPY_LOOP_MAX) {
      for (let k = 0; k < n; k++) d[pos + k] = buf[start + k]!;
    } else {
      // A plain Uint8Array view over the source's memory: `buf.subarray` on a Buffer builds a
      // Buffer (a slower constructor), and `buf.buffer` / `byteOffset` are getters worth reading
      // once per source chunk, not per value (values of a column come from the same socket chunk
      // many times in a row). docs/benchmarks.md, "Text values over 32 bytes".
      if (buf !== this.source) {
        this.source = buf;
        this.sourceMemory = buf.buffer;
        this.sourceOffset = buf.byteOffset;
      }
      d.set(new Uint8Array(this.sourceMemory, this.sourceOffset + start, n), pos);
    }
    this.close(pos + n);
  }

  /** Makes sure `need` more bytes fit after the current end of the byte buffer. */
  private ensureBytes(need: number): void {
    const want = this.pos + need;
    if (want <= this.data.length) return;
    if (want > MAX_OFFSET) {
      throw new BatchError(
        `column "${this.name}" holds more than 2 GiB of ${this.kind} in one batch; lower the batch size`,
      );
    }
    // Doubling, or room for one more value as large as this one, whichever is more: a column of
    // big values (tens of MiB each) then fills its page without a copy per value. Capacity that
    // is never written costs address space, not memory (fresh zeroed pages). The first buffer
    // has INITIAL_BYTES_PER_SLOT bytes per slot of the writer's initial capacity.
    const size = Math.max(
      want + need,
      this.data.length === 0 ? this.initialCapacity * INITIAL_BYTES_PER_SLOT : this.data.length * 2,
    );
    const next = Buffer.alloc(Math.min(size, MAX_OFFSET));
    this.data.copy(next, 0, 0, this.pos);
    this.data = next;
  }

  /** Ends a text/binary value at byte `end`. */
  private close(end: number): void {
    this.pos = end;
    const i = this.slot();
    this.offsets[i + 1] = end;
  }

  /** Days since 1970-01-01 (may be negative): date. */
  appendDays(n: number): void {
    if (this.code !== K_DATE) throw this.unsupported('appendDays');
    this.appendInt(n);
  }

  /** Microseconds since the Unix epoch: timestamp. */
  appendMicros(b: bigint): void {
    if (this.code !== K_TIMESTAMP) throw this.unsupported('appendMicros');
    this.appendBigInt(b);
  }

  /**
   * Opens a list value and returns the element writer: append the elements to it (elements may
   * be null), then call `endList()`: list.
   */
  beginList(): ColumnWriter {
    if (this.code !== K_LIST) throw this.unsupported('beginList');
    if (this.open) throw this.unbalanced();
    this.open = true;
    return this.child!;
  }

  /** Closes the list opened by `beginList()`: list. */
  endList(): void {
    if (this.code !== K_LIST) throw this.unsupported('endList');
    if (!this.open) throw new BatchError(`column "${this.name}": endList() without beginList()`);
    this.open = false;
    const i = this.slot();
    this.offsets[i + 1] = this.child!.length;
  }

  /** True while a list is open: the current row is incomplete. */
  get isOpen(): boolean {
    return this.open;
  }

  /**
   * The column's data bytes so far, as the page byte budget counts them: a fixed-width slot per
   * value (nulls included; bool counts 1), and for text/binary/list values a 4-byte offset plus
   * the value's bytes (list: its elements'). Validity bitmaps and buffer slack are not counted.
   * `valueBytes` (encoder.ts) gives the same count for a value of the row-map universe.
   */
  get byteLength(): number {
    switch (this.code) {
      case K_TEXT:
      case K_BINARY:
        return this.pos + OFFSET_BYTES * this.length;
      case K_LIST:
        return OFFSET_BYTES * this.length + this.child!.byteLength;
      default:
        return SLOT_BYTES[this.code]! * this.length;
    }
  }

  /** @internal Arrow data of everything appended (buffers are handed over, not copied). */
  toData(): Data {
    // The batch must not keep the last socket chunk (or a big row's buffer) alive.
    this.source = undefined;
    this.sourceMemory = NO_U8.buffer;
    // A writer that never received a value has no buffers: a text/binary/list column still needs
    // its one offset (0).
    if (this.capacity === 0) this.allocate(0);
    const n = this.length;
    const base = {
      type: this.arrowType,
      length: n,
      nullCount: this.nullCount,
      nullBitmap: this.validity === null ? undefined : this.validity.subarray(0, (n + 7) >> 3),
    };
    switch (this.code) {
      case K_BOOL:
        return arrowData({ ...base, data: this.u8.subarray(0, (n + 7) >> 3) });
      case K_UINT8:
        return arrowData({ ...base, data: this.u8.subarray(0, n) });
      case K_INT8:
        return arrowData({ ...base, data: this.i8.subarray(0, n) });
      case K_INT16:
        return arrowData({ ...base, data: this.i16.subarray(0, n) });
      case K_INT32:
      case K_DATE:
        return arrowData({ ...base, data: this.i32.subarray(0, n) });
      case K_INT64:
      case K_TIMESTAMP:
        return arrowData({ ...base, data: this.i64.subarray(0, n) });
      case K_FLOAT64:
        return arrowData({ ...base, data: this.f64.subarray(0, n) });
      case K_DECIMAL:
        return arrowData({ ...base, data: this.words.subarray(0, n * 4) });
      case K_TEXT:
      case K_BINARY:
        return arrowData({
          ...base,
          valueOffsets: this.offsets.subarray(0, n + 1),
          data: new Uint8Array(this.data.buffer, this.data.byteOffset, this.pos),
        });
      default:
        return arrowData({
          ...base,
          valueOffsets: this.offsets.subarray(0, n + 1),
          child: this.child!.toData(),
        });
    }
  }

  private wrongType(v: unknown, expected: string): DataError {
    return new DataError(
      `column "${this.name}" (${this.kind}) takes ${expected} or null, got ${jsType(v)}; ` +
        `the driver's value mapping must produce the value universe of shared/dataplane/schema.ts`,
    );
  }

  private outOfRange(v: number | bigint): DataError {
    return new DataError(
      `value ${v} does not fit column "${this.name}" (${this.kind}); widen the column's type in the schema`,
    );
  }

  private unsupported(appender: string): DataError {
    return new DataError(`column "${this.name}" is ${this.kind}; ${appender} cannot append to it`);
  }

  private unbalanced(): BatchError {
    return new BatchError(
      `column "${this.name}": a list was opened with beginList() and not closed with endList()`,
    );
  }
}

function codeOf(t: LogicalType): number {
  switch (t.kind) {
    case 'bool':
      return K_BOOL;
    case 'int8':
      return K_INT8;
    case 'int16':
      return K_INT16;
    case 'int32':
      return K_INT32;
    case 'date':
      return K_DATE;
    case 'int64':
      return K_INT64;
    case 'timestamp':
      return K_TIMESTAMP;
    case 'float64':
      return K_FLOAT64;
    case 'decimal':
      return K_DECIMAL;
    case 'text':
      return K_TEXT;
    case 'binary':
      return K_BINARY;
    case 'list':
      return K_LIST;
  }
}
