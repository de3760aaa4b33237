// Page compression outside the wasm: parquet-wasm writes the file UNCOMPRESSED and this module
// compresses each page with Node's own zlib (native zstd from Node 22.15 / 23.8, which the Lambda
// and Fargate runtimes have), then rewrites the page headers, the column-chunk metadata, the
// offset indexes and the footer for the new sizes and offsets. Nothing else changes: the same
// pages (arrow-rs splits pages by their uncompressed size), encodings, statistics, column indexes
// and key/value metadata. Why: zstd inside the wasm costs about 2.6x native zstd on the same
// bytes, and the encode worker is on the sync's critical path (docs/decisions/0016-native-page-compression.md).
//
// Plain CommonJS so the encode worker (parquet-worker.cjs) requires it unchanged from a checkout
// and from its esbuild bundle; parquet-writer.ts imports it for the main-thread encode.
// Owns: the Thrift compact protocol subset Parquet metadata uses, and the rewrite. Pure: no I/O.
'use strict';
const zlib = require('node:zlib');

/** parquet.thrift CompressionCodec values of the codecs this module can write. */
const CODEC = { UNCOMPRESSED: 0, GZIP: 2, ZSTD: 6 };

/**
 * zstd level of the pages. arrow-rs (so parquet-wasm's ZSTD) writes level 1; level 1 here keeps
 * the objects the size they were (measured on the bench table: 40.2 MB either way).
 */
const ZSTD_LEVEL = 1;

/**
 * The native compressor of `codec` in this Node, or undefined when it has none (zstd before
 * Node 22.15): then the caller lets the wasm compress. gzip is native everywhere; it exists here
 * so the rewrite is exercised on every Node (the tests) and is not a lake option.
 */
function nativeCompressor(codec) {
  if (codec === 'zstd') {
    if (typeof zlib.zstdCompressSync !== 'function') return undefined;
    const options = { params: { [zlib.constants.ZSTD_c_compressionLevel]: ZSTD_LEVEL } };
    return { codec: CODEC.ZSTD, compress: (bytes) => zlib.zstdCompressSync(bytes, options) };
  }
  if (codec === 'gzip') return { codec: CODEC.GZIP, compress: (bytes) => zlib.gzipSync(bytes) };
  return undefined;
}

// ---- Thrift compact protocol (https://github.com/apache/thrift/blob/master/doc/specs/thrift-compact-protocol.md)
// A struct decodes to { fields: [{ id, type, value }] } in wire order; values: booleans, numbers
// (byte, i16, i32, double), bigint (i64), Uint8Array (binary), { elemType, items } (list, set),
// { keyType, valueType, entries } (map), structs. Encoding a decoded struct gives its bytes back
// (arrow-rs writes the canonical form: shortest varints, short list headers, field deltas).

const T = {
  TRUE: 1,
  FALSE: 2,
  BYTE: 3,
  I16: 4,
  I32: 5,
  I64: 6,
  DOUBLE: 7,
  BINARY: 8,
  LIST: 9,
  SET: 10,
  MAP: 11,
  STRUCT: 12,
};

class Reader {
  constructor(bytes, at) {
    this.bytes = bytes;
    this.at = at;
  }
  byte() {
    if (this.at >= this.bytes.length) throw new Error('Parquet metadata ends inside a Thrift value');
    return this.bytes[this.at++];
  }
  varint() {
    let shift = 0n;
    let out = 0n;
    for (;;) {
      const b = this.byte();
      out |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return out;
      shift += 7n;
      if (shift > 70n) throw new Error('Parquet metadata holds a Thrift varint over 10 bytes');
    }
  }
  zigzag() {
    const v = this.varint();
    return (v >> 1n) ^ -(v & 1n);
  }
  value(type) {
    switch (type) {
      case T.TRUE:
        return true;
      case T.FALSE:
        return false;
      case T.BYTE: {
        const b = this.byte();
        return b > 127 ? b - 256 : b;
      }
      case T.I16:
      case T.I32:
        return Number(this.zigzag());
      case T.I64:
        return this.zigzag();
      case T.DOUBLE: {
        const view = new DataView(this.bytes.buffer, this.bytes.byteOffset + this.at, 8);
        this.at += 8;
        return view.getFloat64(0, true);
      }
      case T.BINARY: {
        const n = Number(this.varint());
        const start = this.at;
        this.at += n;
        if (this.at > this.bytes.length) throw new Error('Parquet metadata ends inside a Thrift binary');
        return this.bytes.subarray(start, this.at);
      }
      case T.LIST:
      case T.SET: {
        const head = this.byte();
        const elemType = head & 0x0f;
        const size = head >> 4 === 15 ? Number(this.varint()) : head >> 4;
        const items = [];
        // Booleans inside a collection are one byte each: 1 true, 2 false.
        for (let i = 0; i < size; i++)
          items.push(
            elemType === T.TRUE || elemType === T.FALSE ? this.byte() === T.TRUE : this.value(elemType),
          );
        return { elemType, items };
      }
      case T.MAP: {
        const size = Number(this.varint());
        if (size === 0) return { keyType: 0, valueType: 0, entries: [] };
        const kinds = this.byte();
        const keyType = kinds >> 4;
        const valueType = kinds & 0x0f;
        const entries = [];
        for (let i = 0; i < size; i++) entries.push([this.value(keyType), this.value(valueType)]);
        return { keyType, valueType, entries };
      }
      case T.STRUCT:
        return this.struct();
      default:
        throw new Error(`Parquet metadata holds an unknown Thrift type ${type}`);
    }
  }
  struct() {
    const fields = [];
    let last = 0;
    for (;;) {
      const head = this.byte();
      if (head === 0) return { fields };
      const type = head & 0x0f;
      const delta = head >> 4;
      const id = delta === 0 ? Number(this.zigzag()) : last + delta;
      last = id;
      fields.push({ id, type, value: this.value(type) });
    }
  }
}

class Writer {
  constructor() {
    this.buf = new Uint8Array(256);
    this.at = 0;
  }
  room(n) {
    if (this.at + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.at + n));
    next.set(this.buf.subarray(0, this.at));
    this.buf = next;
  }
  byte(b) {
    this.room(1);
    this.buf[this.at++] = b & 0xff;
  }
  varint(v) {
    let x = BigInt(v);
    for (;;) {
      const low = Number(x & 0x7fn);
      x >>= 7n;
      if (x === 0n) {
        this.byte(low);
        return;
      }
      this.byte(low | 0x80);
    }
  }
  zigzag(v) {
    const x = BigInt(v);
    this.varint(x >= 0n ? x << 1n : (-x << 1n) - 1n);
  }
  value(type, v) {
    switch (type) {
      case T.BYTE:
        this.byte(v);
        return;
      case T.I16:
      case T.I32:
      case T.I64:
        this.zigzag(v);
        return;
      case T.DOUBLE: {
        this.room(8);
        new DataView(this.buf.buffer, this.at, 8).setFloat64(0, v, true);
        this.at += 8;
        return;
      }
      case T.BINARY:
        this.varint(v.length);
        this.room(v.length);
        this.buf.set(v, this.at);
        this.at += v.length;
        return;
      case T.LIST:
      case T.SET: {
        const n = v.items.length;
        if (n < 15) this.byte((n << 4) | v.elemType);
        else {
          this.byte(0xf0 | v.elemType);
          this.varint(n);
        }
        for (const item of v.items) {
          if (v.elemType === T.TRUE || v.elemType === T.FALSE) this.byte(item ? T.TRUE : T.FALSE);
          else this.value(v.elemType, item);
        }
        return;
      }
      case T.MAP:
        this.varint(v.entries.length);
        if (v.entries.length === 0) return;
        this.byte((v.keyType << 4) | v.valueType);
        for (const [key, value] of v.entries) {
          this.value(v.keyType, key);
          this.value(v.valueType, value);
        }
        return;
      case T.STRUCT:
        this.struct(v);
        return;
      default:
        throw new Error(`cannot write Thrift type ${type}`);
    }
  }
  struct(s) {
    let last = 0;
    for (const f of s.fields) {
      // A boolean field carries its value in the type nibble.
      const type = f.type === T.TRUE || f.type === T.FALSE ? (f.value ? T.TRUE : T.FALSE) : f.type;
      const delta = f.id - last;
      if (delta > 0 && delta <= 15) this.byte((delta << 4) | type);
      else {
        this.byte(type);
        this.zigzag(f.id);
      }
      last = f.id;
      if (type !== T.TRUE && type !== T.FALSE) this.value(type, f.value);
    }
    this.byte(0);
  }
  bytes() {
    return this.buf.subarray(0, this.at);
  }
}

/** Decodes the Thrift struct at `at`: { struct, end }. */
function decodeStruct(bytes, at) {
  const r = new Reader(bytes, at);
  const struct = r.struct();
  return { struct, end: r.at };
}

function encodeStruct(struct) {
  const w = new Writer();
  w.struct(struct);
  return w.bytes();
}

function field(struct, id) {
  return struct.fields.find((f) => f.id === id);
}

/** The value of field `id` as a number (i64s are bigints on the wire), or undefined. */
function num(struct, id) {
  const f = field(struct, id);
  return f === undefined ? undefined : Number(f.value);
}

/** Sets field `id` (which must exist) to `value`, keeping its wire type. */
function set(struct, id, value) {
  const f = field(struct, id);
  if (!f) throw new Error(`Parquet metadata lacks field ${id}`);
  f.value = f.type === T.I64 ? BigInt(value) : value;
}

// Field ids of parquet.thrift, the ones the rewrite reads or changes.
const FILE_ROW_GROUPS = 4;
const RG_COLUMNS = 1;
const RG_TOTAL_BYTE_SIZE = 2;
const RG_FILE_OFFSET = 5;
const RG_TOTAL_COMPRESSED_SIZE = 6;
const CC_FILE_PATH = 1;
const CC_FILE_OFFSET = 2;
const CC_META = 3;
const CC_OFFSET_INDEX_OFFSET = 4;
const CC_OFFSET_INDEX_LENGTH = 5;
const CC_COLUMN_INDEX_OFFSET = 6;
const CC_COLUMN_INDEX_LENGTH = 7;
const CM_CODEC = 4;
const CM_TOTAL_UNCOMPRESSED = 6;
const CM_TOTAL_COMPRESSED = 7;
const CM_DATA_PAGE_OFFSET = 9;
const CM_INDEX_PAGE_OFFSET = 10;
const CM_DICTIONARY_PAGE_OFFSET = 11;
const CM_BLOOM_FILTER_OFFSET = 14;
const PH_TYPE = 1;
const PH_COMPRESSED_SIZE = 3;
const PH_CRC = 4;
const PH_DATA_PAGE_V2 = 8;
const PAGE_DATA_V2 = 3;
const V2_DEF_LEVELS_LENGTH = 5;
const V2_REP_LEVELS_LENGTH = 6;
const V2_IS_COMPRESSED = 7;
const OI_PAGE_LOCATIONS = 1;
const PL_OFFSET = 1;
const PL_COMPRESSED_SIZE = 2;

const MAGIC = [0x50, 0x41, 0x52, 0x31]; // PAR1

function isMagic(bytes, at) {
  return MAGIC.every((b, i) => bytes[at + i] === b);
}

/** The decoded footer (FileMetaData) of a Parquet file and where it starts. */
function footerOf(file) {
  const n = file.length;
  if (n < 12 || !isMagic(file, 0) || !isMagic(file, n - 4)) throw new Error('not a Parquet file');
  const footerLength = new DataView(file.buffer, file.byteOffset + n - 8, 4).getUint32(0, true);
  const footerStart = n - 8 - footerLength;
  const { struct: meta, end } = decodeStruct(file, footerStart);
  if (end !== n - 8) throw new Error('Parquet footer length does not match its metadata');
  return { meta, footerStart };
}

/**
 * Compresses every page of `file` (an UNCOMPRESSED Parquet file as arrow-rs writes it: column
 * chunks back to back after the magic, then the column indexes and offset indexes, then the
 * footer) with `compressor` ({ codec, compress }) and returns the new file. Throws on a layout it
 * does not know (page CRCs, bloom filters, index pages, external column chunks, bytes between
 * regions): the caller then lets the wasm compress instead, so an unknown layout costs time, never
 * a wrong file.
 */
function compressPages(file, compressor) {
  const { meta, footerStart } = footerOf(file);

  const parts = [file.subarray(0, 4)];
  let written = 4;
  const emit = (bytes) => {
    parts.push(bytes);
    written += bytes.length;
  };
  /** Old file offset of a page or chunk end -> its new offset. */
  const moved = new Map();
  /** Old page offset -> the page's new size with its header (for the offset indexes). */
  const pageSizes = new Map();
  const mapOffset = (old, what) => {
    const to = moved.get(old);
    if (to === undefined) throw new Error(`Parquet ${what} ${old} is not at a page boundary`);
    return to;
  };

  let cursor = 4;
  const chunks = [];
  for (const rg of field(meta, FILE_ROW_GROUPS)?.value.items ?? []) {
    let rgCompressed = 0;
    let rgHeaderGrowth = 0;
    for (const cc of field(rg, RG_COLUMNS).value.items) {
      const cm = field(cc, CC_META)?.value;
      if (!cm || field(cc, CC_FILE_PATH)) throw new Error('Parquet column chunk in another file');
      if (num(cm, CM_CODEC) !== CODEC.UNCOMPRESSED)
        throw new Error('Parquet column chunk is already compressed');
      if (field(cm, CM_INDEX_PAGE_OFFSET) || field(cm, CM_BLOOM_FILTER_OFFSET)) {
        throw new Error('Parquet column chunk has index pages or a bloom filter');
      }
      const dataPage = num(cm, CM_DATA_PAGE_OFFSET);
      const dictPage = num(cm, CM_DICTIONARY_PAGE_OFFSET);
      const start = dictPage !== undefined && dictPage < dataPage ? dictPage : dataPage;
      const end = start + num(cm, CM_TOTAL_COMPRESSED);
      if (start !== cursor) throw new Error(`Parquet column chunk at ${start}, expected ${cursor}`);
      const newStart = written;
      let headerGrowth = 0;
      for (let at = start; at < end; ) {
        const { struct: header, end: bodyStart } = decodeStruct(file, at);
        if (field(header, PH_CRC)) throw new Error('Parquet page carries a CRC');
        const bodyEnd = bodyStart + num(header, PH_COMPRESSED_SIZE);
        if (bodyEnd > end) throw new Error('Parquet page runs past its column chunk');
        // A V2 data page keeps its levels uncompressed in front of the values, and its values
        // too (is_compressed false) where compressing them gives no fewer bytes than the levels
        // and values together: arrow-rs's own rule, so the page is the one its zstd writes.
        let levels = 0;
        const raw = () => file.subarray(bodyStart + levels, bodyEnd);
        let values;
        if (num(header, PH_TYPE) === PAGE_DATA_V2) {
          const v2 = field(header, PH_DATA_PAGE_V2).value;
          levels = num(v2, V2_DEF_LEVELS_LENGTH) + num(v2, V2_REP_LEVELS_LENGTH);
          const packed = compressor.compress(raw());
          const shrinks = packed.length < bodyEnd - bodyStart;
          values = shrinks ? packed : raw();
          const flag = field(v2, V2_IS_COMPRESSED);
          if (flag) flag.value = shrinks;
          else if (!shrinks) v2.fields.push({ id: V2_IS_COMPRESSED, type: T.FALSE, value: false });
        } else {
          values = compressor.compress(raw());
        }
        set(header, PH_COMPRESSED_SIZE, levels + values.length);
        const newHeader = encodeStruct(header);
        headerGrowth += newHeader.length - (bodyStart - at);
        moved.set(at, written);
        const pageStart = written;
        emit(newHeader);
        if (levels > 0) emit(file.subarray(bodyStart, bodyStart + levels));
        emit(values);
        pageSizes.set(at, written - pageStart);
        at = bodyEnd;
      }
      moved.set(end, written);
      set(cm, CM_CODEC, compressor.codec);
      set(cm, CM_TOTAL_COMPRESSED, written - newStart);
      set(cm, CM_TOTAL_UNCOMPRESSED, num(cm, CM_TOTAL_UNCOMPRESSED) + headerGrowth);
      set(cm, CM_DATA_PAGE_OFFSET, mapOffset(dataPage, 'data page offset'));
      if (dictPage !== undefined)
        set(cm, CM_DICTIONARY_PAGE_OFFSET, mapOffset(dictPage, 'dictionary page offset'));
      // file_offset is deprecated; arrow-rs writes 0 there, which stays.
      const fileOffset = num(cc, CC_FILE_OFFSET);
      if (fileOffset) set(cc, CC_FILE_OFFSET, mapOffset(fileOffset, 'column chunk offset'));
      rgCompressed += written - newStart;
      rgHeaderGrowth += headerGrowth;
      chunks.push(cc);
      cursor = end;
    }
    if (field(rg, RG_FILE_OFFSET))
      set(rg, RG_FILE_OFFSET, mapOffset(num(rg, RG_FILE_OFFSET), 'row group offset'));
    if (field(rg, RG_TOTAL_COMPRESSED_SIZE)) set(rg, RG_TOTAL_COMPRESSED_SIZE, rgCompressed);
    set(rg, RG_TOTAL_BYTE_SIZE, num(rg, RG_TOTAL_BYTE_SIZE) + rgHeaderGrowth);
  }

  // The page indexes, in file order: column indexes are copied, offset indexes rewritten.
  const indexes = [];
  for (const cc of chunks) {
    if (field(cc, CC_COLUMN_INDEX_OFFSET)) {
      indexes.push({
        cc,
        kind: 'column',
        at: num(cc, CC_COLUMN_INDEX_OFFSET),
        length: num(cc, CC_COLUMN_INDEX_LENGTH),
      });
    }
    if (field(cc, CC_OFFSET_INDEX_OFFSET)) {
      indexes.push({
        cc,
        kind: 'offset',
        at: num(cc, CC_OFFSET_INDEX_OFFSET),
        length: num(cc, CC_OFFSET_INDEX_LENGTH),
      });
    }
  }
  indexes.sort((a, b) => a.at - b.at);
  for (const index of indexes) {
    if (index.at !== cursor) throw new Error(`Parquet page index at ${index.at}, expected ${cursor}`);
    cursor = index.at + index.length;
    if (index.kind === 'column') {
      set(index.cc, CC_COLUMN_INDEX_OFFSET, written);
      emit(file.subarray(index.at, cursor));
      continue;
    }
    const { struct: oi, end } = decodeStruct(file, index.at);
    if (end !== cursor) throw new Error('Parquet offset index length does not match its content');
    for (const location of field(oi, OI_PAGE_LOCATIONS).value.items) {
      const old = num(location, PL_OFFSET);
      set(location, PL_OFFSET, mapOffset(old, 'offset index page'));
      set(location, PL_COMPRESSED_SIZE, pageSizes.get(old));
    }
    const bytes = encodeStruct(oi);
    set(index.cc, CC_OFFSET_INDEX_OFFSET, written);
    set(index.cc, CC_OFFSET_INDEX_LENGTH, bytes.length);
    emit(bytes);
  }
  if (cursor !== footerStart)
    throw new Error(`Parquet file has ${footerStart - cursor} unknown bytes before its footer`);

  const footer = encodeStruct(meta);
  emit(footer);
  const tail = new Uint8Array(8);
  new DataView(tail.buffer).setUint32(0, footer.length, true);
  tail.set(MAGIC, 4);
  emit(tail);

  const out = new Uint8Array(written);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

module.exports = {
  compressPages,
  nativeCompressor,
  decodeStruct,
  encodeStruct,
  CODEC,
};
