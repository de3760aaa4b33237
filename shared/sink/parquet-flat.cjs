// A Parquet writer of tidemark's own for flat lake schemas (no lists): DataPage V1 pages in the
// format's default encodings (a PLAIN dictionary page and RLE_DICTIONARY data pages, falling back
// to PLAIN once the dictionary passes its limit; PLAIN booleans; RLE definition levels), chunk
// statistics, and the very Parquet schema and ARROW:schema footer key parquet-wasm writes for the
// same Arrow schema: the schema is taken from a file parquet-wasm wrote (`templateOf`), so the
// two writers cannot disagree on a column's physical or logical type. Why: the wasm encode, and
// the Arrow IPC hand-over it needs, were the largest cost left on the encode worker
// (docs/decisions/0018-flat-parquet-writer.md). Lake format 1 only; lists and format 2 stay with
// parquet-wasm.
//
// Plain CommonJS so the encode worker (parquet-worker.cjs) requires it unchanged from a checkout
// and from its esbuild bundle; parquet-flat-adapter.ts imports it for the main-thread encode and
// builds the slices (FlatSlice, parquet-flat.d.cts). Pure: no I/O.
'use strict';
const { decodeStruct, encodeStruct } = require('./parquet-pages.cjs');

// parquet.thrift enums.
const TYPE = { BOOLEAN: 0, INT32: 1, INT64: 2, FLOAT: 4, DOUBLE: 5, BYTE_ARRAY: 6, FIXED_LEN_BYTE_ARRAY: 7 };
const ENC = { PLAIN: 0, RLE: 3, RLE_DICTIONARY: 8 };
const PAGE = { DATA: 0, DICTIONARY: 2 };
const REPETITION_OPTIONAL = 1;
// Thrift compact field types.
const T = { TRUE: 1, I16: 4, I32: 5, I64: 6, BINARY: 8, LIST: 9, STRUCT: 12 };

/** Rows per data page at most (arrow-rs's default `data_page_row_count_limit`). */
const PAGE_ROWS = 20_000;
/** A data page's value bytes at most, about (arrow-rs's default `data_page_size_limit`). */
const PAGE_BYTES = 2 ** 20;
/** Text/binary statistics longer than this are left out (min/max), not truncated. */
const STATISTICS_MAX_BYTES = 64;
const CREATED_BY = 'tidemark version 0.1.0 (flat writer)';

const utf8 = new TextEncoder();

// ---- Thrift struct building (encoded by parquet-pages.cjs's compact codec)
const i32 = (id, value) => ({ id, type: T.I32, value });
const i64 = (id, value) => ({ id, type: T.I64, value });
const bin = (id, value) => ({ id, type: T.BINARY, value });
const struct = (id, fields) => ({ id, type: T.STRUCT, value: { fields } });
const list = (id, elemType, items) => ({ id, type: T.LIST, value: { elemType, items } });
const bool = (id, value) => ({ id, type: T.TRUE, value });

function fieldOf(s, id) {
  return s.fields.find((f) => f.id === id);
}

/**
 * What the writer keeps of a file parquet-wasm wrote for the Arrow schema: its schema elements,
 * ARROW:schema key/value, column orders and version, and per leaf the physical type. Throws when
 * the schema is not flat (a group below the root).
 */
function templateOf(file) {
  const n = file.length;
  const footerLength = new DataView(file.buffer, file.byteOffset + n - 8, 4).getUint32(0, true);
  const { struct: meta } = decodeStruct(file, n - 8 - footerLength);
  const elements = fieldOf(meta, 2).value.items;
  const root = elements[0];
  const children = Number(fieldOf(root, 5)?.value ?? 0);
  if (children !== elements.length - 1) throw new Error('not a flat schema');
  const leaves = elements.slice(1).map((e) => {
    if (fieldOf(e, 5)) throw new Error('not a flat schema');
    return {
      name: Buffer.from(fieldOf(e, 4).value).toString('utf8'),
      nameBytes: fieldOf(e, 4).value,
      physical: Number(fieldOf(e, 1).value),
      typeLength: Number(fieldOf(e, 2)?.value ?? 0),
      optional: Number(fieldOf(e, 3)?.value ?? 0) === REPETITION_OPTIONAL,
    };
  });
  const kv = fieldOf(meta, 5)?.value.items ?? [];
  const arrowSchema = kv.find((e) => Buffer.from(fieldOf(e, 1).value).toString() === 'ARROW:schema');
  return {
    leaves,
    elements,
    arrowSchema,
    columnOrders: fieldOf(meta, 7)?.value,
    version: Number(fieldOf(meta, 1)?.value ?? 1),
  };
}

/** Templates by schema IPC: built once per schema on each thread (`templateFor`). */
const templates = new Map();

/**
 * The template of an Arrow schema, given as an Arrow IPC stream with no rows: parquet-wasm
 * writes it as an empty file (uncompressed, writer version 1) and `templateOf` reads that.
 * Cached per thread; throws when the schema is not flat.
 */
function templateFor(schemaIpc) {
  const key = Buffer.from(schemaIpc).toString('base64');
  let t = templates.get(key);
  if (!t) {
    const { Compression, Table, WriterPropertiesBuilder, writeParquet } = require('parquet-wasm');
    const props = new WriterPropertiesBuilder().setCompression(Compression.UNCOMPRESSED).build();
    t = templateOf(writeParquet(Table.fromIPCStream(schemaIpc), props));
    if (templates.size >= 64) templates.clear();
    templates.set(key, t);
  }
  return t;
}

// ---- bytes

/** A growable byte buffer, reused page after page. */
class Bytes {
  constructor(size = 1 << 16) {
    this.buf = new Uint8Array(size);
    this.view = new DataView(this.buf.buffer);
    this.at = 0;
  }
  room(n) {
    if (this.at + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.at + n));
    next.set(this.buf.subarray(0, this.at));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  byte(b) {
    this.room(1);
    this.buf[this.at++] = b;
  }
  u32(v) {
    this.room(4);
    this.view.setUint32(this.at, v, true);
    this.at += 4;
  }
  varint(v) {
    this.room(5);
    while (v > 0x7f) {
      this.buf[this.at++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    this.buf[this.at++] = v;
  }
  bytes(src, start, end) {
    const n = end - start;
    this.room(n);
    if (n <= 32) {
      const buf = this.buf;
      let at = this.at;
      for (let i = start; i < end; i++) buf[at++] = src[i];
    } else this.buf.set(src.subarray(start, end), this.at);
    this.at += n;
  }
}

/**
 * The RLE / bit-packed hybrid encoding of `values[0..n)` at `width` bits (1-24) into `out`:
 * runs of 8 or more equal values as RLE runs, the rest bit-packed in groups of 8.
 */
function hybrid(out, values, n, width) {
  const valueBytes = (width + 7) >> 3;
  let literalStart = 0;
  let i = 0;
  while (i < n) {
    const v = values[i];
    let j = i + 1;
    while (j < n && values[j] === v) j++;
    const pad = (8 - ((i - literalStart) & 7)) & 7;
    if (j - i - pad >= 8) {
      packed(out, values, literalStart, i + pad, width);
      out.varint((j - i - pad) << 1);
      for (let b = 0; b < valueBytes; b++) out.byte((v >>> (8 * b)) & 0xff);
      literalStart = j;
    }
    i = j;
  }
  packed(out, values, literalStart, n, width);
}

/** `values[from..to)` bit-packed (LSB first), padded with zeros to a multiple of 8 values. */
function packed(out, values, from, to, width) {
  if (to <= from) return;
  const groups = (to - from + 7) >> 3;
  out.varint((groups << 1) | 1);
  out.room(groups * width);
  const buf = out.buf;
  let at = out.at;
  let acc = 0;
  let bits = 0;
  const end = from + groups * 8;
  for (let i = from; i < end; i++) {
    acc |= (i < to ? values[i] : 0) << bits;
    bits += width;
    while (bits >= 8) {
      buf[at++] = acc & 0xff;
      acc >>>= 8;
      bits -= 8;
    }
  }
  out.at = at;
}

/** Is row `i` of `c` valid (not null)? */
function valid(c, i) {
  if (c.validity === undefined) return true;
  const bit = c.validityOffset + i;
  return (c.validity[bit >> 3] & (1 << (bit & 7))) !== 0;
}

// ---- statistics: min/max kept as PLAIN bytes of one value

/**
 * Chunk statistics of one column: null count and, unless switched off, min and max over the
 * non-null values as the PLAIN bytes Parquet's statistics hold.
 */
class Stats {
  constructor(physical, typeLength, enabled) {
    this.physical = physical;
    this.typeLength = typeLength;
    this.enabled = enabled;
    this.nulls = 0;
    this.min = undefined;
    this.max = undefined;
    // INT32, FLOAT, DOUBLE, BOOLEAN: the running min and max as numbers (NaN skipped). INT64:
    // their (high, low) words, and `min`/`max` as bytes; text and FLBA: `min`/`max` as bytes.
    this.lo = undefined;
    this.hi = undefined;
    this.loH = 0;
    this.loL = 0;
    this.hiH = 0;
    this.hiL = 0;
  }
}

/** The 8 little-endian bytes of the int64 (high signed word, low unsigned word). */
function int64Bytes(high, low) {
  const out = new Uint8Array(8);
  const v = new DataView(out.buffer);
  v.setUint32(0, low, true);
  v.setInt32(4, high, true);
  return out;
}

function compareBytes(a, as, al, b, bs, bl) {
  const n = Math.min(al, bl);
  for (let k = 0; k < n; k++) {
    const d = a[as + k] - b[bs + k];
    if (d !== 0) return d;
  }
  return al - bl;
}

/** Bytes of a text value that statistics keep and compare: one past the longest written. */
const STAT_PREFIX = STATISTICS_MAX_BYTES + 1;

/**
 * `compareBytes` of the values' first STAT_PREFIX bytes. Exact whenever one side is at most
 * STATISTICS_MAX_BYTES long (the order is decided within its length + 1 bytes), which is every
 * comparison a written min or max depends on: a chunk whose true min or max is longer writes
 * neither. So a long JSON value costs at most 65 byte comparisons, not its shared prefix.
 */
function compareStat(a, as, al, b, bs, bl) {
  return compareBytes(a, as, Math.min(al, STAT_PREFIX), b, bs, Math.min(bl, STAT_PREFIX));
}

/**
 * `compareStat` of two values of one Bytes (`view` over it, `buf` its bytes, both from offset 0),
 * four bytes at a time: big-endian words order as their bytes do. The values of a column often
 * share a long prefix (positions, keys, timestamps as text), which a byte loop walks one by one.
 * Only the sign of the result means anything.
 */
function compareStatIn(view, buf, as, al, bs, bl) {
  const an = Math.min(al, STAT_PREFIX);
  const bn = Math.min(bl, STAT_PREFIX);
  const n = Math.min(an, bn);
  let k = 0;
  for (; k + 4 <= n; k += 4) {
    const x = view.getUint32(as + k);
    const y = view.getUint32(bs + k);
    if (x !== y) return x < y ? -1 : 1;
  }
  for (; k < n; k++) {
    const d = buf[as + k] - buf[bs + k];
    if (d !== 0) return d;
  }
  return an - bn;
}

/** The statistics copy of a text value: its first STAT_PREFIX bytes. */
function statCopy(buf, start, len) {
  return buf.slice(start, start + Math.min(len, STAT_PREFIX));
}

/** A decimal's big-endian two's complement bytes compared as signed numbers. */
function compareSignedBe(a, as, b, bs, n) {
  const d = ((a[as] << 24) >> 24) - ((b[bs] << 24) >> 24);
  if (d !== 0) return d;
  for (let k = 1; k < n; k++) {
    const e = a[as + k] - b[bs + k];
    if (e !== 0) return e;
  }
  return 0;
}

/** Folds the PLAIN-encoded non-null values `plain[0..end)` (`count` values) into `s`. */
function foldStats(s, plain, end, count) {
  if (!s.enabled || count === 0) return;
  const buf = plain.buf;
  const view = plain.view;
  if (buf.byteOffset !== 0) throw new Error('page scratch is not at offset 0');
  switch (s.physical) {
    case TYPE.INT32: {
      // PLAIN values start at offset 0 of the page scratch: aligned views.
      const v = new Int32Array(buf.buffer, 0, count);
      let lo = s.lo ?? 2 ** 31;
      let hi = s.hi ?? -(2 ** 31) - 1;
      for (let k = 0; k < count; k++) {
        const x = v[k];
        if (x < lo) lo = x;
        if (x > hi) hi = x;
      }
      s.lo = lo;
      s.hi = hi;
      return;
    }
    case TYPE.INT64: {
      // (high word signed, low word unsigned) pairs, compared as such.
      const v = new Int32Array(buf.buffer, 0, count * 2);
      let loH = s.min === undefined ? 2 ** 31 : s.loH;
      let loL = s.min === undefined ? 0 : s.loL;
      let hiH = s.min === undefined ? -(2 ** 31) - 1 : s.hiH;
      let hiL = s.min === undefined ? 0 : s.hiL;
      for (let k = 0; k < 2 * count; k += 2) {
        const h = v[k + 1];
        if (h < loH || (h === loH && v[k] >>> 0 < loL)) {
          loH = h;
          loL = v[k] >>> 0;
        }
        if (h > hiH || (h === hiH && v[k] >>> 0 > hiL)) {
          hiH = h;
          hiL = v[k] >>> 0;
        }
      }
      s.loH = loH;
      s.loL = loL;
      s.hiH = hiH;
      s.hiL = hiL;
      s.min = int64Bytes(loH, loL);
      s.max = int64Bytes(hiH, hiL);
      return;
    }
    case TYPE.FLOAT:
    case TYPE.DOUBLE: {
      const v =
        s.physical === TYPE.DOUBLE
          ? new Float64Array(buf.buffer, 0, count)
          : new Float32Array(buf.buffer, 0, count);
      let lo = s.lo ?? Number.POSITIVE_INFINITY;
      let hi = s.hi ?? Number.NEGATIVE_INFINITY;
      let any = s.lo !== undefined;
      for (let k = 0; k < count; k++) {
        const x = v[k];
        if (Number.isNaN(x)) continue; // NaN is not ordered: left out, as arrow-rs does
        any = true;
        if (x < lo) lo = x;
        if (x > hi) hi = x;
      }
      if (any) {
        s.lo = lo;
        s.hi = hi;
      }
      return;
    }
    case TYPE.BOOLEAN: {
      // PLAIN booleans are bits; the caller passes the values as bytes here (see plainBool).
      for (let k = 0; k < count; k++) {
        const v = (buf[k >> 3] >> (k & 7)) & 1;
        if (s.lo === undefined || v < s.lo) s.lo = v;
        if (s.hi === undefined || v > s.hi) s.hi = v;
      }
      return;
    }
    case TYPE.BYTE_ARRAY: {
      // The first value is both; after it, a value above the max cannot be below the min (one
      // comparison for ascending data such as positions and keys).
      let lo = 4;
      let loLen = view.getUint32(0, true);
      let hi = lo;
      let hiLen = loLen;
      for (let at = lo + loLen; at < end; ) {
        const len = view.getUint32(at, true);
        const start = at + 4;
        // Most values differ from the max in their first byte: decide those without the call.
        const first = len > 0 && hiLen > 0 ? buf[start] - buf[hi] : 0;
        const up = first !== 0 ? first : compareStatIn(view, buf, start, len, hi, hiLen);
        if (up > 0) {
          hi = start;
          hiLen = len;
        } else if (up < 0 && compareStatIn(view, buf, start, len, lo, loLen) < 0) {
          lo = start;
          loLen = len;
        }
        at = start + len;
      }
      if (s.min === undefined || compareStat(buf, lo, loLen, s.min, 0, s.min.length) < 0)
        s.min = statCopy(buf, lo, loLen);
      if (s.max === undefined || compareStat(buf, hi, hiLen, s.max, 0, s.max.length) > 0)
        s.max = statCopy(buf, hi, hiLen);
      return;
    }
    case TYPE.FIXED_LEN_BYTE_ARRAY: {
      const n = s.typeLength;
      let lo = -1;
      let hi = -1;
      for (let at = 0; at < end; at += n) {
        if (lo < 0 || compareSignedBe(buf, at, buf, lo, n) < 0) lo = at;
        if (hi < 0 || compareSignedBe(buf, at, buf, hi, n) > 0) hi = at;
      }
      if (s.min === undefined || compareSignedBe(buf, lo, s.min, 0, n) < 0) s.min = buf.slice(lo, lo + n);
      if (s.max === undefined || compareSignedBe(buf, hi, s.max, 0, n) > 0) s.max = buf.slice(hi, hi + n);
      return;
    }
    default:
      throw new Error(`no statistics for Parquet type ${s.physical}`);
  }
}

/** The Statistics struct (field 12 of ColumnMetaData) of `s`, or undefined. */
function statisticsStruct(s) {
  if (!s.enabled) return undefined;
  let min;
  let max;
  if (s.physical === TYPE.INT32 && s.lo !== undefined) {
    min = new Uint8Array(4);
    max = new Uint8Array(4);
    new DataView(min.buffer).setInt32(0, s.lo, true);
    new DataView(max.buffer).setInt32(0, s.hi, true);
  } else if ((s.physical === TYPE.FLOAT || s.physical === TYPE.DOUBLE) && s.lo !== undefined) {
    const w = s.physical === TYPE.DOUBLE ? 8 : 4;
    min = new Uint8Array(w);
    max = new Uint8Array(w);
    // Parquet's rule for zeros: a min of zero is written -0, a max of zero +0.
    const lo = s.lo === 0 ? -0 : s.lo;
    const hi = s.hi === 0 ? 0 : s.hi;
    if (w === 8) {
      new DataView(min.buffer).setFloat64(0, lo, true);
      new DataView(max.buffer).setFloat64(0, hi, true);
    } else {
      new DataView(min.buffer).setFloat32(0, lo, true);
      new DataView(max.buffer).setFloat32(0, hi, true);
    }
  } else if (s.physical === TYPE.BOOLEAN && s.lo !== undefined) {
    min = Uint8Array.of(s.lo);
    max = Uint8Array.of(s.hi);
  } else if (s.min !== undefined) {
    min = s.min;
    max = s.max;
    if (
      s.physical === TYPE.BYTE_ARRAY &&
      (min.length > STATISTICS_MAX_BYTES || max.length > STATISTICS_MAX_BYTES)
    ) {
      min = undefined;
      max = undefined;
    }
  }
  const fields = [];
  // The deprecated min/max (fields 1, 2) too for numbers and FIXED_LEN_BYTE_ARRAY decimals, as
  // arrow-rs writes them: older readers read only those; their order is the signed one these
  // types have.
  const deprecated = s.physical !== TYPE.BYTE_ARRAY && s.physical !== TYPE.BOOLEAN;
  if (min !== undefined && deprecated) fields.push(bin(1, max), bin(2, min));
  fields.push(i64(3, s.nulls));
  if (min !== undefined) fields.push(bin(5, max), bin(6, min), bool(7, true), bool(8, true));
  return { fields };
}

// ---- PLAIN values of a page: rows [from, to) of column `c` into `out`; returns the value count

function plainValues(c, leaf, from, to, out) {
  const allValid = c.validity === undefined;
  let count = 0;
  switch (c.kind) {
    case 'i8':
    case 'i16':
    case 'i32': {
      // Widened to INT32 (arrow-rs writes Int8/Int16 as INT32 with an INT(8|16) annotation).
      // `out` is the page scratch at offset 0 (aligned); `c.bytes` is its own buffer.
      const b = c.bytes;
      const src =
        c.kind === 'i8'
          ? new Int8Array(b.buffer, b.byteOffset, b.length)
          : c.kind === 'i16'
            ? new Int16Array(b.buffer, b.byteOffset, b.length >> 1)
            : new Int32Array(b.buffer, b.byteOffset, b.length >> 2);
      out.room((to - from) * 4);
      const dst = new Int32Array(out.buf.buffer, out.at, to - from);
      if (allValid) {
        if (c.kind === 'i32') dst.set(src.subarray(from, to));
        else for (let i = from; i < to; i++) dst[i - from] = src[i];
        count = to - from;
      } else {
        const bits = c.validity;
        const bit0 = c.validityOffset;
        for (let i = from; i < to; i++) {
          const bit = bit0 + i;
          if ((bits[bit >> 3] & (1 << (bit & 7))) !== 0) dst[count++] = src[i];
        }
      }
      out.at += count * 4;
      return count;
    }
    case 'i64':
    case 'f32':
    case 'f64': {
      const w = c.kind === 'f32' ? 4 : 8;
      if (allValid) {
        out.bytes(c.bytes, from * w, to * w);
        return to - from;
      }
      // Words of 4 bytes: one for f32, two for the 8-byte kinds.
      const words = w >> 2;
      const b = c.bytes;
      const src = new Int32Array(b.buffer, b.byteOffset, b.length >> 2);
      out.room((to - from) * w);
      const dst = new Int32Array(out.buf.buffer, out.at, (to - from) * words);
      const bits = c.validity;
      const bit0 = c.validityOffset;
      let d = 0;
      for (let i = from; i < to; i++) {
        const bit = bit0 + i;
        if ((bits[bit >> 3] & (1 << (bit & 7))) === 0) continue;
        dst[d++] = src[i * words];
        if (words === 2) dst[d++] = src[i * words + 1];
        count++;
      }
      out.at += count * w;
      return count;
    }
    case 'dec': {
      // Decimal128 (16 bytes little-endian two's complement) as INT32, INT64 or big-endian FLBA,
      // as arrow-rs writes it for the column's precision (the template's physical type).
      const b = c.bytes;
      if (leaf.physical !== TYPE.FIXED_LEN_BYTE_ARRAY) {
        const words = leaf.physical === TYPE.INT32 ? 1 : 2;
        const src = new Int32Array(b.buffer, b.byteOffset, b.length >> 2);
        out.room((to - from) * 4 * words);
        const dst = new Int32Array(out.buf.buffer, out.at, (to - from) * words);
        let d = 0;
        for (let i = from; i < to; i++) {
          if (!allValid && !valid(c, i)) continue;
          dst[d++] = src[i * 4];
          if (words === 2) dst[d++] = src[i * 4 + 1];
          count++;
        }
        out.at += count * 4 * words;
        return count;
      }
      const n = leaf.typeLength;
      out.room((to - from) * n);
      const buf = out.buf;
      let at = out.at;
      for (let i = from; i < to; i++) {
        if (!allValid && !valid(c, i)) continue;
        const base = i * 16;
        for (let k = 0; k < n; k++) buf[at + k] = b[base + n - 1 - k];
        at += n;
        count++;
      }
      out.at = at;
      return count;
    }
    case 'bytes': {
      const offsets = c.offsets;
      const base = offsets[from];
      const size = offsets[to] - base;
      // The rows' values are copied in one piece to where the last one ends up (4 bytes per row
      // further on), then each moves down in place behind its length: a value's new place never
      // reaches past its old start, nor a length into a value not yet moved. No subarray per
      // value (a value over 32 bytes was one each, with `set`).
      out.room(size + 4 * (to - from));
      const buf = out.buf;
      let at = out.at;
      const staged = at + 4 * (to - from) - base;
      buf.set(c.data.subarray(base, base + size), staged + base);
      for (let i = from; i < to; i++) {
        if (!allValid && !valid(c, i)) continue;
        const a = offsets[i] + staged;
        const b = offsets[i + 1] + staged;
        const n = b - a;
        buf[at] = n & 0xff;
        buf[at + 1] = (n >>> 8) & 0xff;
        buf[at + 2] = (n >>> 16) & 0xff;
        buf[at + 3] = n >>> 24;
        at += 4;
        if (n <= 32) for (let k = a; k < b; k++) buf[at++] = buf[k];
        else {
          buf.copyWithin(at, a, b);
          at += n;
        }
        count++;
      }
      out.at = at;
      return count;
    }
    case 'dict': {
      const offsets = c.dictOffsets;
      const data = c.dictData;
      for (let i = from; i < to; i++) {
        if (!allValid && !valid(c, i)) continue;
        const k = c.indices[i];
        const a = offsets[k];
        const b = offsets[k + 1];
        out.u32(b - a);
        out.bytes(data, a, b);
        count++;
      }
      return count;
    }
    case 'bool': {
      const n = to - from;
      out.room((n >> 3) + 1);
      const buf = out.buf;
      const start = out.at;
      buf.fill(0, start, start + (n >> 3) + 1);
      for (let i = from; i < to; i++) {
        if (!allValid && !valid(c, i)) continue;
        const bit = c.valuesOffset + i;
        if (c.values[bit >> 3] & (1 << (bit & 7))) buf[start + (count >> 3)] |= 1 << (count & 7);
        count++;
      }
      out.at = start + ((count + 7) >> 3);
      return count;
    }
    default:
      throw new Error(`unknown flat column kind ${c.kind}`);
  }
}

// ---- dictionary of one column chunk: PLAIN entries and an open-addressing hash of them

/** A 32-bit hash of `buf[start..start+len)`, four bytes a step. */
function hashBytes(buf, start, len) {
  let h = Math.imul(len, 0x9e3779b1);
  const end = start + len;
  let k = start;
  for (; k + 4 <= end; k += 4) {
    h = Math.imul(h ^ (buf[k] | (buf[k + 1] << 8) | (buf[k + 2] << 16) | (buf[k + 3] << 24)), 0x85ebca6b);
    h ^= h >>> 13;
  }
  for (; k < end; k++) h = Math.imul(h ^ buf[k], 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

class Dictionary {
  /** Of a column chunk of `physical` type: four- and eight-byte values, or text/binary. */
  constructor(physical, limit) {
    this.width =
      physical === TYPE.INT32 || physical === TYPE.FLOAT
        ? 4
        : physical === TYPE.INT64 || physical === TYPE.DOUBLE
          ? 8
          : 0; // 0: BYTE_ARRAY, entries length-prefixed
    this.limit = limit;
    this.entries = new Bytes(1024);
    this.starts = new Int32Array(64); // key start of each entry in `entries`
    this.lengths = new Int32Array(64);
    this.hashes = new Int32Array(64);
    /** Four- and eight-byte entries as words (low, high), for `indexWords`. */
    this.words = new Int32Array(128);
    this.count = 0;
    this.slots = new Int32Array(256).fill(-1);
    this.indices = new Int32Array(1024);
  }
  room(count) {
    if (this.indices.length < count) this.indices = new Int32Array(count);
  }
  /**
   * Dictionary indices of the `count` PLAIN four- or eight-byte values at the start of `plain`
   * into `this.indices`, hashed and compared as words (the page scratch is aligned); false (and
   * the dictionary as it was) when the entries would pass the limit.
   */
  encodePlain(plain, count) {
    this.room(count);
    const before = this.count;
    const beforeBytes = this.entries.at;
    const buf = plain.buf;
    const w = this.width;
    const words = w >> 2;
    const v = new Int32Array(buf.buffer, 0, count * words);
    const indices = this.indices;
    for (let k = 0; k < count; k++) {
      const lo = v[k * words];
      const hi = words === 2 ? v[k * words + 1] : 0;
      const index = this.indexWords(lo, hi, buf, k * w);
      if (index < 0) return this.rollback(before, beforeBytes);
      indices[k] = index;
    }
    return true;
  }
  /** `index` for a 4- or 8-byte value given as its words (`hi` 0 for 4 bytes) and its bytes. */
  indexWords(lo, hi, buf, at) {
    const hash = Math.imul(lo ^ Math.imul(hi, 0x85ebca6b), 0x9e3779b1) ^ hi;
    const mask = this.slots.length - 1;
    const words = this.words;
    for (let slot = (hash ^ (hash >>> 15)) & mask; ; slot = (slot + 1) & mask) {
      const e = this.slots[slot];
      if (e < 0) break;
      if (words[2 * e] === lo && words[2 * e + 1] === hi) return e;
    }
    return this.add(buf, at, this.width, hash ^ (hash >>> 15), lo, hi);
  }
  /** Indices of the non-null text/binary values of rows [from, to) of `c`, read in place. */
  encodeBytes(c, from, to) {
    this.room(to - from);
    const before = this.count;
    const beforeBytes = this.entries.at;
    const offsets = c.offsets;
    const data = c.data;
    const indices = this.indices;
    let v = 0;
    for (let i = from; i < to; i++) {
      if (c.validity !== undefined && !valid(c, i)) continue;
      const a = offsets[i];
      const index = this.index(data, a, offsets[i + 1] - a);
      if (index < 0) return this.rollback(before, beforeBytes);
      indices[v++] = index;
    }
    this.valueCount = v;
    return true;
  }
  /** Indices of rows [from, to) of an Arrow dictionary column: its entries looked up once. */
  encodeArrowDictionary(c, from, to) {
    this.room(to - from);
    const before = this.count;
    const beforeBytes = this.entries.at;
    const o = c.dictOffsets;
    const map = new Int32Array(o.length - 1).fill(-1);
    const indices = this.indices;
    let v = 0;
    for (let i = from; i < to; i++) {
      if (c.validity !== undefined && !valid(c, i)) continue;
      const k = c.indices[i];
      let index = map[k];
      if (index < 0) {
        index = this.index(c.dictData, o[k], o[k + 1] - o[k]);
        map[k] = index;
        if (index < 0) return this.rollback(before, beforeBytes);
      }
      indices[v++] = index;
    }
    this.valueCount = v;
    return true;
  }
  /** The entry of `buf[start..start+len)`, added when new; -1 when it would pass the limit. */
  index(buf, start, len) {
    const hash = hashBytes(buf, start, len);
    const mask = this.slots.length - 1;
    const entries = this.entries.buf;
    let slot = hash & mask;
    for (; ; slot = (slot + 1) & mask) {
      const e = this.slots[slot];
      if (e < 0) break;
      if (this.hashes[e] !== (hash | 0) || this.lengths[e] !== len) continue;
      const s = this.starts[e];
      let k = 0;
      while (k < len && entries[s + k] === buf[start + k]) k++;
      if (k === len) return e;
    }
    return this.add(buf, start, len, hash, 0, 0);
  }
  /** A new entry (its slot is the free one `hash` probes to); -1 when it would pass the limit. */
  add(buf, start, len, hash, lo, hi) {
    if (this.entries.at + (this.width === 0 ? 4 : 0) + len > this.limit) return -1;
    const e = this.count++;
    if (e === this.starts.length) {
      const grow = (a) => {
        const b = new Int32Array(a.length * 2);
        b.set(a);
        return b;
      };
      this.starts = grow(this.starts);
      this.lengths = grow(this.lengths);
      this.hashes = grow(this.hashes);
      this.words = grow(this.words);
    }
    if (this.width === 0) this.entries.u32(len);
    this.starts[e] = this.entries.at;
    this.lengths[e] = len;
    this.hashes[e] = hash;
    this.words[2 * e] = lo;
    this.words[2 * e + 1] = hi;
    this.entries.bytes(buf, start, start + len);
    const mask = this.slots.length - 1;
    let slot = hash & mask;
    while (this.slots[slot] >= 0) slot = (slot + 1) & mask;
    this.slots[slot] = e;
    if (this.count * 2 > this.slots.length) this.rehash(this.slots.length * 2);
    return e;
  }
  rehash(size) {
    const slots = new Int32Array(size).fill(-1);
    const mask = size - 1;
    for (let e = 0; e < this.count; e++) {
      let slot = this.hashes[e] & mask;
      while (slots[slot] >= 0) slot = (slot + 1) & mask;
      slots[slot] = e;
    }
    this.slots = slots;
  }
  /** Forgets the entries added since (`count`, `bytes`); returns false (the page overflowed). */
  rollback(count, bytes) {
    this.count = count;
    this.entries.at = bytes;
    this.rehash(this.slots.length);
    return false;
  }
}

/** Folds the dictionary's entries (text/binary: every value its pages hold) into `s`. */
function foldEntries(s, dict) {
  if (!s.enabled || dict.count === 0) return;
  const { buf, view } = dict.entries;
  let lo = -1;
  let hi = -1;
  for (let e = 0; e < dict.count; e++) {
    const at = dict.starts[e];
    const len = dict.lengths[e];
    if (lo < 0 || compareStatIn(view, buf, at, len, dict.starts[lo], dict.lengths[lo]) < 0) lo = e;
    if (hi < 0 || compareStatIn(view, buf, at, len, dict.starts[hi], dict.lengths[hi]) > 0) hi = e;
  }
  const min = statCopy(buf, dict.starts[lo], dict.lengths[lo]);
  const max = statCopy(buf, dict.starts[hi], dict.lengths[hi]);
  if (s.min === undefined || compareStat(min, 0, min.length, s.min, 0, s.min.length) < 0) s.min = min;
  if (s.max === undefined || compareStat(max, 0, max.length, s.max, 0, s.max.length) > 0) s.max = max;
}

// ---- the writer

/** Bits to store 0..max (at least 1). */
function bitWidth(max) {
  let w = 1;
  while (max >= 2 ** w) w++;
  return w;
}

class ColumnChunk {
  constructor(leaf, options) {
    this.leaf = leaf;
    // No dictionary for booleans and FIXED_LEN_BYTE_ARRAY decimals, as arrow-rs writes in writer
    // version 1 (docs/lake-format.md), nor for the caller's plain columns.
    const dictionaryOff =
      leaf.physical === TYPE.BOOLEAN ||
      leaf.physical === TYPE.FIXED_LEN_BYTE_ARRAY ||
      options.plainColumns.includes(leaf.name);
    this.dictionary = dictionaryOff ? undefined : new Dictionary(leaf.physical, options.dictionaryPageBytes);
    this.stats = new Stats(leaf.physical, leaf.typeLength, !options.noStatisticsColumns.includes(leaf.name));
    this.pages = []; // header + body, compressed
    this.numValues = 0;
    this.uncompressed = 0;
    this.compressed = 0;
    this.plainPages = 0;
    this.dictPages = 0;
  }
}

class FlatWriter {
  constructor(template, options) {
    this.template = template;
    this.options = options;
    this.compress = options.compressor.compress;
    this.codec = options.compressor.codec;
    this.parts = [Uint8Array.of(0x50, 0x41, 0x52, 0x31)];
    this.written = 4;
    this.rowGroups = [];
    this.numRows = 0;
    this.plain = new Bytes();
    this.page = new Bytes();
    this.startGroup();
  }

  startGroup() {
    this.chunks = this.template.leaves.map((leaf) => new ColumnChunk(leaf, this.options));
    this.groupRows = 0;
  }

  /** Adds the rows of `slice` (FlatSlice) to the current row group, closing it when full. */
  add(slice) {
    const leaves = this.template.leaves;
    if (slice.columns.length !== leaves.length) throw new Error('slice does not match the schema');
    let from = 0;
    while (from < slice.numRows) {
      const take = Math.min(slice.numRows - from, this.options.maxRowGroupRows - this.groupRows);
      for (let c = 0; c < leaves.length; c++)
        this.addColumn(this.chunks[c], slice.columns[c], from, from + take);
      this.groupRows += take;
      from += take;
      const bytes = this.chunks.reduce((n, ch) => n + ch.uncompressed, 0);
      if (this.groupRows >= this.options.maxRowGroupRows || bytes >= this.options.maxRowGroupBytes)
        this.closeGroup();
    }
  }

  /** Rows [from, to) of column `c` as data pages of `chunk`. */
  addColumn(chunk, c, from, to) {
    const leaf = chunk.leaf;
    let start = from;
    while (start < to) {
      let end = Math.min(to, start + PAGE_ROWS);
      if (c.kind === 'bytes') {
        // Cut by value bytes as well: a page of about PAGE_BYTES (at least one row).
        const o = c.offsets;
        if (o[end] - o[start] > PAGE_BYTES) {
          let lo = start + 1;
          let hi = end;
          while (lo < hi) {
            const mid = (lo + hi) >> 1;
            if (o[mid] - o[start] > PAGE_BYTES) hi = mid;
            else lo = mid + 1;
          }
          end = Math.max(start + 1, lo - 1);
        }
      }
      this.writePage(chunk, c, leaf, start, end);
      start = end;
    }
  }

  writePage(chunk, c, leaf, from, to) {
    const rows = to - from;
    const plain = this.plain;
    plain.at = 0;
    // Text and binary values are looked up in the dictionary where they are; their PLAIN bytes
    // (and statistics, which then come from the dictionary's entries) only on a PLAIN page.
    const dict = chunk.fellBack ? undefined : chunk.dictionary;
    let count = -1;
    let indexed = false;
    if (dict !== undefined && (c.kind === 'bytes' || c.kind === 'dict')) {
      indexed = c.kind === 'bytes' ? dict.encodeBytes(c, from, to) : dict.encodeArrowDictionary(c, from, to);
      if (indexed) count = dict.valueCount;
    }
    if (!indexed) {
      count = plainValues(c, leaf, from, to, plain);
      foldStats(chunk.stats, plain, plain.at, count);
      if (dict !== undefined && c.kind !== 'bytes' && c.kind !== 'dict')
        indexed = dict.encodePlain(plain, count);
    }
    if (dict !== undefined && !indexed) chunk.fellBack = true;
    chunk.stats.nulls += rows - count;

    const page = this.page;
    page.at = 0;
    if (leaf.optional) {
      // Definition levels (V1: RLE hybrid at bit width 1 behind a 4-byte length).
      const lengthAt = page.at;
      page.u32(0);
      if (c.validity === undefined) {
        page.varint(rows << 1);
        page.byte(1);
      } else {
        if (!(this.levels?.length >= rows)) this.levels = new Uint8Array(rows);
        const levels = this.levels;
        for (let i = 0; i < rows; i++) levels[i] = valid(c, from + i) ? 1 : 0;
        hybrid(page, levels, rows, 1);
      }
      page.view.setUint32(lengthAt, page.at - lengthAt - 4, true);
    } else if (count !== rows) throw new Error(`column ${leaf.name} is required but has nulls`);

    let encoding = ENC.PLAIN;
    if (indexed) {
      encoding = ENC.RLE_DICTIONARY;
      const width = bitWidth(Math.max(0, dict.count - 1));
      page.byte(width);
      hybrid(page, dict.indices, count, width);
      chunk.dictPages++;
    } else {
      page.bytes(plain.buf, 0, plain.at);
      chunk.plainPages++;
    }
    this.addPage(chunk, PAGE.DATA, page, {
      fields: [i32(1, rows), i32(2, encoding), i32(3, ENC.RLE), i32(4, ENC.RLE)],
    });
    chunk.numValues += rows;
  }

  /** Compresses `body` and keeps it with its page header in `chunk`. */
  addPage(chunk, type, body, pageHeader) {
    const raw = body.buf.subarray(0, body.at);
    const packed = this.compress(raw);
    const header = encodeStruct({
      fields: [
        i32(1, type),
        i32(2, raw.length),
        i32(3, packed.length),
        struct(type === PAGE.DATA ? 5 : 7, pageHeader.fields),
      ],
    });
    chunk.pages.push(header, packed);
    chunk.uncompressed += header.length + raw.length;
    chunk.compressed += header.length + packed.length;
  }

  closeGroup() {
    if (this.groupRows === 0) return;
    const columns = [];
    const groupStart = this.written;
    let total = 0;
    let totalCompressed = 0;
    for (const chunk of this.chunks) {
      const leaf = chunk.leaf;
      const chunkStart = this.written;
      let dictionaryOffset;
      if (chunk.dictPages > 0) {
        const d = chunk.dictionary;
        if (leaf.physical === TYPE.BYTE_ARRAY) foldEntries(chunk.stats, d);
        dictionaryOffset = this.written;
        const dictChunk = { pages: [], uncompressed: 0, compressed: 0 };
        this.addPage(dictChunk, PAGE.DICTIONARY, d.entries, {
          fields: [i32(1, d.count), i32(2, ENC.PLAIN), { id: 3, type: 2, value: false }],
        });
        for (const p of dictChunk.pages) this.emit(p);
        chunk.uncompressed += dictChunk.uncompressed;
        chunk.compressed += dictChunk.compressed;
      }
      const dataPageOffset = this.written;
      for (const p of chunk.pages) this.emit(p);
      chunk.pages = [];
      const encodings = [ENC.PLAIN, ENC.RLE];
      if (chunk.dictPages > 0) encodings.push(ENC.RLE_DICTIONARY);
      const encodingStats = [];
      if (chunk.dictPages > 0)
        encodingStats.push({ fields: [i32(1, PAGE.DICTIONARY), i32(2, ENC.PLAIN), i32(3, 1)] });
      if (chunk.plainPages > 0)
        encodingStats.push({ fields: [i32(1, PAGE.DATA), i32(2, ENC.PLAIN), i32(3, chunk.plainPages)] });
      if (chunk.dictPages > 0)
        encodingStats.push({
          fields: [i32(1, PAGE.DATA), i32(2, ENC.RLE_DICTIONARY), i32(3, chunk.dictPages)],
        });
      const meta = [
        i32(1, leaf.physical),
        list(2, T.I32, encodings),
        list(3, T.BINARY, [leaf.nameBytes]),
        i32(4, this.codec),
        i64(5, chunk.numValues),
        i64(6, chunk.uncompressed),
        i64(7, chunk.compressed),
        i64(9, dataPageOffset),
      ];
      if (dictionaryOffset !== undefined) meta.push(i64(11, dictionaryOffset));
      const statistics = statisticsStruct(chunk.stats);
      if (statistics) meta.push({ id: 12, type: T.STRUCT, value: statistics });
      meta.push(list(13, T.STRUCT, encodingStats));
      columns.push({ fields: [i64(2, 0), struct(3, meta)] });
      total += chunk.uncompressed;
      totalCompressed += this.written - chunkStart;
    }
    this.rowGroups.push({
      fields: [
        list(1, T.STRUCT, columns),
        i64(2, total),
        i64(3, this.groupRows),
        i64(5, groupStart),
        i64(6, totalCompressed),
        { id: 7, type: T.I16, value: this.rowGroups.length },
      ],
    });
    this.numRows += this.groupRows;
    this.startGroup();
  }

  emit(bytes) {
    this.parts.push(bytes);
    this.written += bytes.length;
  }

  /** The file: the last row group, then the footer. */
  finish() {
    this.closeGroup();
    const t = this.template;
    const kv = [];
    for (const [key, value] of Object.entries(this.options.keyValueMetadata ?? {}))
      kv.push({ fields: [bin(1, utf8.encode(key)), bin(2, utf8.encode(value))] });
    if (t.arrowSchema) kv.push(t.arrowSchema);
    const fields = [
      i32(1, t.version),
      list(2, T.STRUCT, t.elements),
      i64(3, this.numRows),
      list(4, T.STRUCT, this.rowGroups),
    ];
    if (kv.length > 0) fields.push(list(5, T.STRUCT, kv));
    fields.push(bin(6, utf8.encode(CREATED_BY)));
    if (t.columnOrders) fields.push({ id: 7, type: T.LIST, value: t.columnOrders });
    const footer = encodeStruct({ fields });
    this.emit(footer);
    const tail = new Uint8Array(8);
    new DataView(tail.buffer).setUint32(0, footer.length, true);
    tail.set([0x50, 0x41, 0x52, 0x31], 4);
    this.emit(tail);
    const out = new Uint8Array(this.written);
    let at = 0;
    for (const p of this.parts) {
      out.set(p, at);
      at += p.length;
    }
    this.parts = [];
    return out;
  }
}

module.exports = { templateOf, templateFor, FlatWriter, compareStatIn };
