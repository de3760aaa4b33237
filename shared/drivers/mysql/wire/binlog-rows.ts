/**
 * Row images of the binlog decoded straight into the column writers, without zongji's per-row
 * parse (JS values, strings for DATETIME/DECIMAL, one object per row) and without values.ts
 * turning those values back into text.
 *
 * How the raw bytes are obtained: zongji 0.9.0 parses rows in the `RowsEvent` constructor
 * (lib/rows_event.js), one `_fetchOneRow(parser)` call per row until the packet end (the
 * checksum already trimmed, a compressed event already inflated). `installRawRowImages()`
 * overrides that ONE method (on RowsEvent and on UpdateRows, which redefines it): when the
 * ZongJi instance carries a `RAW_HOOK` predicate that accepts the table, the first call takes
 * every remaining byte of the row area as a single `RawRows` and moves the parser to the end,
 * so `event.rows` is `[RawRows]`; otherwise it calls zongji's own method. The override checks
 * zongji's version and the shape of what it replaces (test/unit/mysql-cdc-row-image.test.ts
 * fails when they change).
 *
 * Decoding follows zongji's readRow/readMysqlValue exactly (bitmaps, null bitmap, per-type
 * widths from the TableMap metadata) and gives the writers the values the old path gives
 * (zongji value -> values.ts -> types.ts appenders); any value the fast arithmetic does not
 * cover (invalid calendar dates, TIME) is rebuilt as the very text zongji would produce and
 * handed to the column's old appender. Tables with a type or charset not listed in `compile`
 * keep zongji's parse.
 *
 * Owns: that decoding. Must never: append a value the old path would not.
 */
import { createRequire } from 'node:module';
import iconv from 'iconv-lite';
import { DataError } from '../../../contracts/errors.js';
import type { ColumnWriter } from '../../../dataplane/encoder.js';
import { type BinlogAppender, formatInet4, formatInet6, formatUuid } from '../cdc/values.js';
import type { ColumnInfo } from '../introspect.js';
import { jsonBinaryToText, loadZongjiJson } from './binlog-json.js';

/** Decode supported tables' row images here (false: every table through zongji's parse). */
export const RAW_ROW_IMAGES = true;

/** The ZongJi instance property holding the predicate `(tableMapEntry) => boolean`. */
export const RAW_HOOK = '__tidemarkRawRows';

export const ZONGJI_VERSION = '0.9.0';

/** Every row of one rows event, undecoded: `buf[start..end)` after the column bitmaps. */
export class RawRows {
  constructor(
    readonly entry: TableMapEntry,
    readonly buf: Buffer,
    readonly start: number,
    readonly end: number,
    readonly bitmap: Buffer,
    readonly bitmap2: Buffer | undefined,
    /** zongji's own parse of the same bytes (rows as zongji returns them). */
    readonly reparse: () => unknown[],
  ) {}
}

/** zongji's tableMap[tableId] (the parts read here). */
export interface TableMapEntry {
  readonly parentSchema: string;
  readonly tableName: string;
  readonly columns: readonly {
    readonly name: string;
    readonly type: number;
    readonly charset: string | null;
    readonly metadata: Record<string, number> | null | undefined;
  }[];
  readonly columnSchemas: readonly {
    readonly COLUMN_NAME: string;
    readonly COLUMN_TYPE: string;
    readonly UNSIGNED?: boolean;
    readonly ENUM_VALUES?: string[];
    readonly SET_VALUES?: string[];
  }[];
}

interface ZongjiRowsEvent {
  tableMap: Record<number, TableMapEntry>;
  tableId: number;
  rows: unknown[];
  columns_present_bitmap: Buffer;
  columns_present_bitmap2?: Buffer;
  _zongji: Record<string, unknown> | undefined;
}
interface ZongjiParser {
  _buffer: Buffer;
  _offset: number;
  _packetEnd: number;
}
type FetchOneRow = (this: ZongjiRowsEvent, parser: ZongjiParser) => unknown;
interface ZongjiParserClass {
  new (): ZongjiParser & { append(b: Buffer): void; reachedPacketEnd(): boolean };
}

let installed: Promise<void> | undefined;

/** Overrides zongji's `_fetchOneRow` once (see the module comment); throws when zongji changed. */
export function installRawRowImages(): Promise<void> {
  installed ??= (async () => {
    const main = import.meta.resolve('@vlasky/zongji');
    const version = (createRequire(main)('./package.json') as { version: string }).version;
    if (version !== ZONGJI_VERSION)
      throw new Error(
        `binlog-rows.ts overrides @vlasky/zongji ${ZONGJI_VERSION} internals, but ${version} is installed: check lib/rows_event.js and update binlog-rows.ts`,
      );
    await loadZongjiJson(main);
    const rows = (await import(new URL('./lib/rows_event.js', main).href)) as {
      WriteRows: { prototype: object };
      UpdateRows: { prototype: object };
    };
    const codes = (await import(new URL('./lib/code_map.js', main).href)) as {
      getEventClass(code: number): unknown;
    };
    if (codes.getEventClass(0x1e) !== rows.WriteRows || codes.getEventClass(0x1f) !== rows.UpdateRows)
      throw new Error('@vlasky/zongji: lib/rows_event.js is not the module its code map uses');
    const base = Object.getPrototypeOf(rows.WriteRows.prototype) as { _fetchOneRow?: FetchOneRow };
    const upd = rows.UpdateRows.prototype as { _fetchOneRow?: FetchOneRow };
    for (const p of [base, upd]) {
      const original = p._fetchOneRow;
      if (
        typeof original !== 'function' ||
        original.length !== 1 ||
        !/readRow\(parser/.test(String(original))
      )
        throw new Error('@vlasky/zongji: RowsEvent._fetchOneRow is not the function binlog-rows.ts replaces');
      if ((original as { raw?: boolean }).raw) continue;
      const patched: FetchOneRow = function (this: ZongjiRowsEvent, parser: ZongjiParser) {
        const hook = this._zongji?.[RAW_HOOK] as ((e: TableMapEntry) => boolean) | undefined;
        const entry = this.tableMap[this.tableId];
        if (hook !== undefined && entry !== undefined && this.rows.length === 0 && hook(entry)) {
          const start = parser._offset;
          const end = parser._packetEnd;
          const buf = parser._buffer;
          parser._offset = end;
          const Parser = parser.constructor as ZongjiParserClass;
          const self = {
            tableMap: { [this.tableId]: entry },
            tableId: this.tableId,
            rows: [] as unknown[],
            columns_present_bitmap: this.columns_present_bitmap,
            columns_present_bitmap2: this.columns_present_bitmap2,
            _zongji: this._zongji,
          };
          const reparse = (): unknown[] => {
            const p = new Parser();
            p.append(buf.subarray(start, end));
            const out: unknown[] = [];
            while (!p.reachedPacketEnd()) out.push(original.call(self, p));
            return out;
          };
          return new RawRows(
            entry,
            buf,
            start,
            end,
            this.columns_present_bitmap,
            this.columns_present_bitmap2,
            reparse,
          );
        }
        return original.call(this, parser);
      };
      (patched as { raw?: boolean }).raw = true;
      p._fetchOneRow = patched;
    }
  })();
  return installed;
}

// ---------------------------------------------------------------------------------------------
// Types (zongji's MysqlTypes codes)

const T_TINY = 1;
const T_SHORT = 2;
const T_LONG = 3;
const T_FLOAT = 4;
const T_DOUBLE = 5;
const T_LONGLONG = 8;
const T_INT24 = 9;
const T_DATE = 10;
const T_YEAR = 13;
const T_VARCHAR = 15;
const T_BIT = 16;
const T_TIMESTAMP2 = 17;
const T_DATETIME2 = 18;
const T_TIME2 = 19;
const T_JSON = 245;
const T_NEWDECIMAL = 246;
const T_ENUM = 247;
const T_SET = 248;
const T_TINY_BLOB = 249;
const T_MEDIUM_BLOB = 250;
const T_LONG_BLOB = 251;
const T_BLOB = 252;
const T_STRING = 254;

// Column operations.
const OP_INT = 1; // signed/unsigned 1-4 bytes -> appendInt
const OP_INT64 = 2; // 8 bytes -> appendInt / appendBigInt
const OP_INT_DECIMAL = 3; // integer -> decimal(p, 0) writer
const OP_FLOAT = 4;
const OP_DOUBLE = 5;
const OP_DECIMAL = 6; // NEWDECIMAL -> decimal writer (unscaled)
const OP_DECIMAL_TEXT = 7; // NEWDECIMAL -> text writer
const OP_YEAR = 8;
const OP_DATE = 9;
const OP_DATETIME2 = 10;
const OP_TIMESTAMP2 = 11;
const OP_TIME2 = 12;
const OP_TEXT = 13; // length-prefixed text (utf8 or latin1)
const OP_BYTES = 14; // length-prefixed bytes
const OP_BINARY_FIXED = 15; // BINARY(n): re-padded to n
const OP_ENUM = 16;
const OP_SET = 17;
const OP_BIT = 18;
const OP_UUID = 19; // MariaDB UUID/INET4/INET6 as BINARY(n): re-padded, printed as the server does
const OP_INET4 = 20;
const OP_INET6 = 21;
const OP_JSON = 22; // MySQL binary JSON -> MySQL's text (binlog-json.ts)

interface ColPlan {
  readonly op: number;
  /** Schema column index, -1 when the column is not captured. */
  readonly w: number;
  readonly name: string;
  /** Value width (ints, enum/set, bit), length-prefix width (strings/blobs), fraction bytes. */
  readonly size: number;
  readonly unsigned: boolean;
  readonly precision: number;
  readonly scale: number;
  readonly latin1: boolean;
  readonly choices: readonly string[];
  readonly choiceBytes: readonly Buffer[];
  /** The column's old appender, for values rebuilt as zongji's text. */
  readonly text: BinlogAppender | undefined;
  /** Whether a key comparison must compare decoded text, not bytes (float, latin1/utf8 text). */
  readonly keyByValue: boolean;
}

/** A compiled table: how one image maps to the writers. */
export interface RowPlan {
  readonly cols: readonly ColPlan[];
  /** Schema columns no image column feeds (always NULL). */
  readonly missing: readonly number[];
  /** Image column indexes of the primary key, in key order (-1: not in the image). */
  readonly key: readonly number[];
}

const UTF8 = new Set(['utf8', 'utf8mb3', 'utf8mb4']);

/**
 * The plan for a TableMap entry under the table's current schema columns, or a reason the
 * table must take zongji's parse.
 */
export function compile(
  entry: TableMapEntry,
  infos: readonly ColumnInfo[],
  appenders: readonly BinlogAppender[],
  primaryKey: readonly string[],
): RowPlan | string {
  const cols: ColPlan[] = [];
  const fed = new Set<number>();
  for (let i = 0; i < entry.columns.length; i++) {
    const c = entry.columns[i]!;
    const s = entry.columnSchemas[i];
    if (!s) return `no column schema for ${c.name}`;
    const w = infos.findIndex((x) => x.name === c.name);
    if (w >= 0) fed.add(w);
    const info = w >= 0 ? infos[w] : undefined;
    const kind = info?.read.kind;
    const dataType = info ? (info.sourceType.toLowerCase().split(/[\s(]/)[0] ?? '') : '';
    const md = c.metadata ?? {};
    const def = s.COLUMN_TYPE;
    const unsigned = s.UNSIGNED !== undefined ? s.UNSIGNED : def.indexOf('unsigned') !== -1;
    let op = 0;
    let size = 0;
    let precision = 0;
    let scale = 0;
    let latin1 = false;
    let choices: string[] = [];
    let keyByValue = false;
    const textCharset = (): boolean => {
      if (c.charset !== null && UTF8.has(c.charset)) return true;
      if (c.charset === 'latin1') {
        latin1 = true;
        return true;
      }
      return false;
    };
    switch (c.type) {
      case T_TINY:
      case T_SHORT:
      case T_INT24:
      case T_LONG:
        size = c.type === T_TINY ? 1 : c.type === T_SHORT ? 2 : c.type === T_INT24 ? 3 : 4;
        if (kind === 'int' || kind === 'int64' || info === undefined) op = OP_INT;
        break;
      case T_LONGLONG:
        size = 8;
        if (kind === 'int64' || kind === 'int' || info === undefined) op = OP_INT64;
        else if (kind === 'decimal' && info.read.logical.kind === 'decimal' && info.read.logical.scale === 0)
          op = OP_INT_DECIMAL;
        break;
      case T_FLOAT:
        if (kind === 'float' || info === undefined) op = OP_FLOAT;
        break;
      case T_DOUBLE:
        if (kind === 'float' || info === undefined) op = OP_DOUBLE;
        break;
      case T_NEWDECIMAL:
        precision = md.precision ?? -1;
        scale = md.decimals ?? -1;
        if (precision < 1 || scale < 0) break;
        if (info === undefined || kind === 'text') op = OP_DECIMAL_TEXT;
        else if (
          kind === 'decimal' &&
          info.read.logical.kind === 'decimal' &&
          info.read.logical.scale === scale &&
          info.read.logical.precision >= precision
        )
          op = OP_DECIMAL;
        break;
      case T_YEAR:
        if (kind === 'int' || info === undefined) op = OP_YEAR;
        break;
      case T_DATE:
        if (kind === 'date' || info === undefined) op = OP_DATE;
        break;
      case T_DATETIME2:
        size = Math.ceil((md.decimals ?? 0) / 2);
        precision = md.decimals ?? 0;
        if (info === undefined || (kind === 'datetime' && dataType === 'datetime')) op = OP_DATETIME2;
        break;
      case T_TIMESTAMP2:
        size = Math.ceil((md.decimals ?? 0) / 2);
        precision = md.decimals ?? 0;
        if (info === undefined || (kind === 'datetime' && dataType === 'timestamp')) op = OP_TIMESTAMP2;
        break;
      case T_TIME2:
        precision = md.decimals ?? 0;
        if (info === undefined || kind === 'text') op = OP_TIME2;
        break;
      case T_VARCHAR:
      case T_STRING: {
        size = (md.max_length ?? 0) > 255 ? 2 : 1;
        const prefix = def.substr(0, 6);
        if (def === 'uuid' || def === 'inet4' || def === 'inet6' || prefix === 'vector') break;
        if (dataType === 'uuid' || dataType === 'inet4' || dataType === 'inet6') {
          // values.ts prints zongji's re-padded Buffer (FULL metadata says BINARY(n)).
          precision = Number.parseInt(def.substr(7, def.length - 2), 10);
          if (prefix === 'binary' && kind === 'text' && Number.isFinite(precision))
            op = dataType === 'uuid' ? OP_UUID : dataType === 'inet4' ? OP_INET4 : OP_INET6;
          break;
        }
        if (prefix === 'binary') {
          precision = Number.parseInt(def.substr(7, def.length - 2), 10);
          if (Number.isFinite(precision) && (kind === 'binary' || info === undefined)) op = OP_BINARY_FIXED;
        } else if (prefix === 'varbin') {
          if (kind === 'binary' || info === undefined) op = OP_BYTES;
        } else if (textCharset() && (kind === 'text' || info === undefined)) {
          op = OP_TEXT;
          keyByValue = true;
        }
        break;
      }
      case T_TINY_BLOB:
      case T_MEDIUM_BLOB:
      case T_LONG_BLOB:
      case T_BLOB:
        size = md.length_size ?? 0;
        if (size < 1 || size > 4) break;
        if (c.charset === null) {
          if (kind === 'binary' || info === undefined) op = OP_BYTES;
        } else if (textCharset() && (kind === 'text' || info === undefined)) {
          op = OP_TEXT;
          keyByValue = true;
        }
        break;
      case T_ENUM:
      case T_SET:
        size = md.size ?? 0;
        if (!(size >= 1 && size <= 8) || (c.type === T_ENUM && size > 2)) break;
        choices =
          (c.type === T_ENUM ? s.ENUM_VALUES : s.SET_VALUES) ?? parseChoices(def, c.type === T_ENUM ? 5 : 4);
        if (kind === 'text' || info === undefined) op = c.type === T_ENUM ? OP_ENUM : OP_SET;
        break;
      case T_JSON:
        size = md.length_size ?? 0;
        if (size < 1 || size > 4) break;
        // Bytes compare as keys (a JSON column is never in a primary key).
        if (kind === 'text' || info === undefined) op = OP_JSON;
        break;
      case T_BIT:
        size = Math.floor(((md.bits ?? 0) + 7) / 8);
        if (kind === 'binary' || info === undefined) op = OP_BIT;
        break;
      default:
        break;
    }
    if (op === 0) return `${c.name}: binlog type ${c.type} as ${kind ?? 'excluded'} is not decoded here`;
    if (op === OP_FLOAT || op === OP_DOUBLE) keyByValue = true;
    cols.push({
      op,
      w,
      name: c.name,
      size,
      unsigned,
      precision,
      scale,
      latin1,
      choices,
      choiceBytes: choices.map((x) => Buffer.from(String(x), 'utf8')),
      text: w >= 0 ? appenders[w] : undefined,
      keyByValue,
    });
  }
  const missing: number[] = [];
  for (let j = 0; j < infos.length; j++) if (!fed.has(j)) missing.push(j);
  const key = primaryKey.map((k) => cols.findIndex((c) => c.name === k));
  return { cols, missing, key };
}

/** zongji's parseSetEnumTypeDef. */
function parseChoices(type: string, prefixLen: number): string[] {
  return type
    .substr(prefixLen, type.length - prefixLen - 1)
    .split(',')
    .map((opt) => (opt[0] === '"' || opt[0] === "'" ? opt.substr(1, opt.length - 2) : opt));
}

// ---------------------------------------------------------------------------------------------
// Decoding

const BIT_COUNT = new Uint8Array(256);
for (let i = 1; i < 256; i++) BIT_COUNT[i] = (i & 1) + BIT_COUNT[i >> 1]!;

/** Null-bitmap bytes of an image under the columns-present `bitmap`. */
export function nullBitmapSize(bitmap: Buffer): number {
  let bits = 0;
  for (let i = 0; i < bitmap.length; i++) bits += BIT_COUNT[bitmap[i]!]!;
  return (bits + 7) >> 3;
}

const TWO32 = 4294967296;
const MICROS_PER_DAY = 86_400_000_000;
const SAFE_DAYS = 104_000;
const FRAC_SCALE = [1, 10000, 100, 1]; // micros per stored fraction unit, by fraction bytes 0..3
const DIG_BYTES = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];
const POW10_4 = [1, 10000, 100000000];
const INT_GROUPS = new Array<number>(8).fill(0);
const NUMERIC = new Uint8Array(8 + 2 * 8);
const POW10 = [1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000];

/** zongji's zeroPad: the last `size` characters of `num` left-padded with zeros. */
function zeroPad(num: number | string, size: number): string {
  const s = `00000000000000000000000000000000${num}`;
  return s.substr(s.length - size);
}

function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

function lastDayOfMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

function isAscii(buf: Buffer, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (buf[i]! >= 0x80) return false;
  return true;
}

/** zongji's readTemporalFraction value (digits after the point, `precision` of them). */
function fractionValue(buf: Buffer, off: number, precision: number): number {
  const bytes = Math.ceil(precision / 2);
  let f = buf.readIntBE(off, bytes);
  if (precision % 2 !== 0) f /= 10;
  if (f < 0) f *= -1;
  return f;
}

/**
 * Decodes (w !== undefined) or skips one non-NULL value of `c` at `off`; returns the offset after
 * it. `span` receives [start, end) of the value's bytes when given.
 */
function value(c: ColPlan, buf: Buffer, off: number, w: ColumnWriter | undefined): number {
  switch (c.op) {
    case OP_INT: {
      const n = c.unsigned ? buf.readUIntLE(off, c.size) : buf.readIntLE(off, c.size);
      if (w) w.appendInt(n);
      return off + c.size;
    }
    case OP_INT64:
    case OP_INT_DECIMAL: {
      if (w) {
        const lo = buf.readUInt32LE(off);
        const hi = c.unsigned ? buf.readUInt32LE(off + 4) : buf.readInt32LE(off + 4);
        if (c.op === OP_INT_DECIMAL)
          w.appendDecimalUnscaled(c.unsigned ? buf.readBigUInt64LE(off) : buf.readBigInt64LE(off));
        else if (hi >= -0x200000 && hi < 0x200000) {
          const n = hi * TWO32 + lo;
          if (Number.isSafeInteger(n)) w.appendInt(n);
          else w.appendBigInt(BigInt(n));
        } else w.appendBigInt(c.unsigned ? buf.readBigUInt64LE(off) : buf.readBigInt64LE(off));
      }
      return off + 8;
    }
    case OP_FLOAT:
      if (w) w.appendFloat64(buf.readFloatLE(off));
      return off + 4;
    case OP_DOUBLE:
      if (w) w.appendFloat64(buf.readDoubleLE(off));
      return off + 8;
    case OP_DECIMAL:
    case OP_DECIMAL_TEXT:
      return decimal(c, buf, off, w);
    case OP_YEAR:
      if (w) {
        const y = buf[off]!;
        w.appendInt(y === 0 ? 0 : y + 1900);
      }
      return off + 1;
    case OP_DATE: {
      if (w) {
        const raw = buf.readUIntLE(off, 3);
        const year = raw >>> 9;
        const month = (raw >>> 5) & 15;
        const day = raw & 31;
        if (month === 0 || day === 0) w.appendNull();
        else if (month <= 12 && day <= lastDayOfMonth(year, month))
          w.appendInt(daysFromCivil(year, month, day));
        else c.text!(w, `${zeroPad(year, 4)}-${zeroPad(month, 2)}-${zeroPad(day, 2)}`);
      }
      return off + 3;
    }
    case OP_DATETIME2: {
      if (w) {
        const hi = buf.readUInt32BE(off);
        const lo = buf.readUInt32BE(off + 1);
        const ym = (hi >>> 14) & 0x1ffff;
        const year = Math.floor(ym / 13);
        const month = ym % 13;
        const day = (lo >>> 17) & 31;
        const hour = (lo >>> 12) & 31;
        const minute = (lo >>> 6) & 63;
        const second = lo & 63;
        if (month === 0 || day === 0) w.appendNull();
        else if (
          month <= 12 &&
          day <= lastDayOfMonth(year, month) &&
          hour < 24 &&
          minute < 60 &&
          second < 60
        ) {
          const frac = c.size === 0 ? 0 : buf.readUIntBE(off + 5, c.size) * FRAC_SCALE[c.size]!;
          const days = daysFromCivil(year, month, day);
          const secs = hour * 3600 + minute * 60 + second;
          if (days > -SAFE_DAYS && days < SAFE_DAYS)
            w.appendInt(days * MICROS_PER_DAY + secs * 1_000_000 + frac);
          else w.appendBigInt(BigInt(days) * BigInt(MICROS_PER_DAY) + BigInt(secs * 1_000_000 + frac));
        } else {
          const f = c.precision ? `.${zeroPad(fractionValue(buf, off + 5, c.precision), c.precision)}` : '';
          c.text!(
            w,
            `${zeroPad(year, 4)}-${zeroPad(month, 2)}-${zeroPad(day, 2)} ${zeroPad(hour, 2)}:${zeroPad(minute, 2)}:${zeroPad(second, 2)}${f}`,
          );
        }
      }
      return off + 5 + c.size;
    }
    case OP_TIMESTAMP2: {
      if (w) {
        const sec = buf.readUInt32BE(off);
        const frac = c.size === 0 ? 0 : buf.readUIntBE(off + 4, c.size) * FRAC_SCALE[c.size]!;
        if (sec === 0 && frac === 0) w.appendNull();
        else w.appendInt(sec * 1_000_000 + frac);
      }
      return off + 4 + c.size;
    }
    case OP_TIME2: {
      const fb = Math.ceil(c.precision / 2);
      if (w) w.appendText(time2Text(buf, off, c.precision));
      return off + 3 + fb;
    }
    case OP_TEXT: {
      const len = c.size === 1 ? buf[off]! : buf.readUIntLE(off, c.size);
      const s = off + c.size;
      const e = s + len;
      if (w) {
        if (isAscii(buf, s, e)) w.appendUtf8Bytes(buf, s, e);
        else if (c.latin1) w.appendText(iconv.decode(buf.subarray(s, e), 'cp1252', { stripBOM: false }));
        else w.appendText(buf.toString('utf8', s, e));
      }
      return e;
    }
    case OP_JSON: {
      const len = c.size === 1 ? buf[off]! : buf.readUIntLE(off, c.size);
      const s = off + c.size;
      // zongji: an empty value is NULL, anything else its text (here in stored key order).
      if (w) {
        if (len === 0) w.appendNull();
        else c.text!(w, jsonBinaryToText(buf.subarray(s, s + len)));
      }
      return s + len;
    }
    case OP_BYTES: {
      const len = c.size === 1 ? buf[off]! : buf.readUIntLE(off, c.size);
      const s = off + c.size;
      if (w) w.appendBytes(buf, s, s + len);
      return s + len;
    }
    case OP_BINARY_FIXED: {
      const len = c.size === 1 ? buf[off]! : buf.readUIntLE(off, c.size);
      const s = off + c.size;
      if (w) {
        if (len === c.precision) w.appendBytes(buf, s, s + len);
        else {
          const padded = Buffer.alloc(c.precision, 0);
          buf.copy(padded, 0, s, s + Math.min(len, c.precision));
          w.appendBytes(padded, 0, padded.length);
        }
      }
      return s + len;
    }
    case OP_UUID:
    case OP_INET4:
    case OP_INET6: {
      const len = c.size === 1 ? buf[off]! : buf.readUIntLE(off, c.size);
      const s = off + c.size;
      if (w) {
        const padded = Buffer.alloc(c.precision, 0);
        buf.copy(padded, 0, s, s + Math.min(len, c.precision));
        w.appendText(
          c.op === OP_UUID
            ? formatUuid(padded)
            : c.op === OP_INET4
              ? formatInet4(padded)
              : formatInet6(padded),
        );
      }
      return s + len;
    }
    case OP_ENUM: {
      if (w) {
        const raw = c.size === 1 ? buf[off]! : buf.readUInt16LE(off);
        const b = c.choiceBytes[raw - 1];
        if (b === undefined) w.appendText('');
        else w.appendUtf8Bytes(b, 0, b.length);
      }
      return off + c.size;
    }
    case OP_SET: {
      if (w) w.appendText(setText(c, buf, off));
      return off + c.size;
    }
    case OP_BIT:
      if (w) w.appendBytes(buf, off, off + c.size);
      return off + c.size;
    default:
      throw new Error(`row-image: unknown op ${c.op}`);
  }
}

/** zongji's SET text (including its handling of bits beyond the value list). */
function setText(c: ColPlan, buf: Buffer, off: number): string {
  let low: number;
  let high = 0;
  if (c.size === 8) {
    low = buf.readUInt32LE(off);
    high = buf.readUInt32LE(off + 4);
  } else low = buf.readUIntLE(off, c.size);
  const choices = c.choices;
  let result = '';
  for (let i = 0; low >= 2 ** i; i++) if (low & (2 ** i)) result += `${choices[i]},`;
  if (high) for (let i = 0; high >= 2 ** i; i++) if (high & (2 ** i)) result += `${choices[i + 32]},`;
  if (result.length > 0) result = result.substr(0, result.length - 1);
  return result;
}

/** zongji's TIME2 text. */
function time2Text(buf: Buffer, off: number, precision: number): string {
  let raw = (buf.readInt8(off) << 16) + buf.readUInt16BE(off + 1);
  const fraction = precision ? fractionValue(buf, off + 3, precision) : undefined;
  const isNegative = (raw & (1 << 23)) === 0;
  if (isNegative) raw = raw ^ ((1 << 24) - 1);
  const hour = (raw & (((1 << 22) - 1) ^ ((1 << 12) - 1))) >> 12;
  const minute = (raw & (((1 << 12) - 1) ^ ((1 << 6) - 1))) >> 6;
  let second = raw & ((1 << 6) - 1);
  if (isNegative && (fraction === undefined || fraction === 0)) second++;
  let s = `${isNegative ? '-' : ''}${zeroPad(hour, hour > 99 ? 3 : 2)}:${zeroPad(minute, 2)}:${zeroPad(second, 2)}`;
  if (fraction !== undefined) s += `.${zeroPad(fraction, precision)}`;
  return s;
}

/** `n` big-endian bytes at `p` XOR `mask`, the sign bit of the decimal's first byte (`first`) flipped. */
function decimalGroup(buf: Buffer, p: number, n: number, first: number, mask: number): number {
  let v = 0;
  for (let k = 0; k < n; k++) {
    let b = buf[p + k]!;
    if (p + k === first) b ^= 0x80;
    v = v * 256 + (b ^ mask);
  }
  return v;
}

/** MySQL binary DECIMAL at `off` -> the writer (unscaled) or zongji's text; returns the end. */
function decimal(c: ColPlan, buf: Buffer, off: number, w: ColumnWriter | undefined): number {
  const scale = c.scale;
  const integral = c.precision - scale;
  const uncompIntegral = Math.floor(integral / 9);
  const uncompFractional = Math.floor(scale / 9);
  const compIntegral = integral - uncompIntegral * 9;
  const compFractional = scale - uncompFractional * 9;
  const size =
    uncompIntegral * 4 + DIG_BYTES[compIntegral]! + uncompFractional * 4 + DIG_BYTES[compFractional]!;
  if (!w) return off + size;
  const positive = (buf[off]! & 0x80) !== 0;
  const mask = positive ? 0 : 0xff;
  let pos = off;
  if (c.op === OP_DECIMAL && c.precision <= 15 && scale <= 12) {
    // Exact in doubles (< 10^15); handed over as a Postgres binary NUMERIC (base-10000 groups
    // aligned at the decimal point), which the writer converts in double arithmetic too.
    let iv = 0;
    const ci = DIG_BYTES[compIntegral]!;
    if (ci > 0) {
      iv = decimalGroup(buf, pos, ci, off, mask);
      pos += ci;
    }
    for (let i = 0; i < uncompIntegral; i++, pos += 4) iv = iv * 1e9 + decimalGroup(buf, pos, 4, off, mask);
    let fv = 0;
    for (let i = 0; i < uncompFractional; i++, pos += 4) fv = fv * 1e9 + decimalGroup(buf, pos, 4, off, mask);
    const cf = DIG_BYTES[compFractional]!;
    if (cf > 0) fv = fv * POW10[compFractional]! + decimalGroup(buf, pos, cf, off, mask);
    const fg = (scale + 3) >> 2;
    let f4 = fv * POW10[4 * fg - scale]!;
    let ng = 0;
    for (let x = iv; x > 0; x = Math.floor(x / 10000)) INT_GROUPS[ng++] = x % 10000;
    const nd = ng + fg;
    const num = NUMERIC;
    num[0] = nd >> 8;
    num[1] = nd & 0xff;
    const weight = (ng - 1) & 0xffff;
    num[2] = weight >> 8;
    num[3] = weight & 0xff;
    num[4] = positive ? 0 : 0x40;
    num[5] = 0;
    num[6] = 0;
    num[7] = scale;
    let q = 8;
    for (let k = ng - 1; k >= 0; k--, q += 2) {
      const g = INT_GROUPS[k]!;
      num[q] = g >> 8;
      num[q + 1] = g & 0xff;
    }
    for (let k = fg - 1; k >= 0; k--, q += 2) {
      const d = POW10_4[k]!;
      const g = Math.floor(f4 / d);
      f4 -= g * d;
      num[q] = g >> 8;
      num[q + 1] = g & 0xff;
    }
    w.appendNumericBinary(num, 0);
    return off + size;
  }
  // zongji's digit text.
  let intDigits = '';
  const ci = DIG_BYTES[compIntegral]!;
  if (ci > 0) {
    intDigits += decimalGroup(buf, pos, ci, off, mask).toString(10);
    pos += ci;
  }
  for (let i = 0; i < uncompIntegral; i++, pos += 4)
    intDigits += zeroPad(decimalGroup(buf, pos, 4, off, mask).toString(10), 9);
  intDigits = intDigits.replace(/^0+(?=\d)/, '');
  if (intDigits === '') intDigits = '0';
  let fractionDigits = '';
  for (let k = 0; k < uncompFractional; k++, pos += 4)
    fractionDigits += zeroPad(decimalGroup(buf, pos, 4, off, mask).toString(10), 9);
  const cf = DIG_BYTES[compFractional]!;
  if (cf > 0) fractionDigits += zeroPad(decimalGroup(buf, pos, cf, off, mask).toString(10), compFractional);
  let str = (positive ? '' : '-') + intDigits;
  if (scale > 0) str += `.${fractionDigits}`;
  if (c.op === OP_DECIMAL) w.appendDecimalText(str);
  else w.appendText(str);
  return off + size;
}

const isSet = (bitmap: Buffer, i: number): boolean => (bitmap[i >> 3]! & (1 << (i & 7))) !== 0;

/**
 * One row image at `off` under the columns-present `bitmap` (its null bitmap first): appended to
 * `writers` (undefined: skipped). `spans` (when given) receives each image column's value
 * [start, end) (start -1: NULL or absent). Returns the offset after the image.
 */
export function decodeImage(
  plan: RowPlan,
  buf: Buffer,
  off: number,
  bitmap: Buffer,
  nullBytes: number,
  writers: readonly ColumnWriter[] | undefined,
  spans?: Int32Array,
  ctx?: string,
): number {
  const nulls = off;
  let p = off + nullBytes;
  const cols = plan.cols;
  let nb = 0;
  let i = 0;
  try {
    for (; i < cols.length; i++) {
      const c = cols[i]!;
      const w = writers !== undefined && c.w >= 0 ? writers[c.w] : undefined;
      if (!isSet(bitmap, i)) {
        w?.appendNull();
        if (spans) spans[2 * i] = -1;
        continue;
      }
      if ((buf[nulls + (nb >> 3)]! & (1 << (nb & 7))) !== 0) {
        w?.appendNull();
        if (spans) spans[2 * i] = -1;
      } else {
        const s = p;
        p = value(c, buf, p, w);
        if (spans) {
          spans[2 * i] = s;
          spans[2 * i + 1] = p;
        }
      }
      nb++;
    }
  } catch (e) {
    if (e instanceof DataError && ctx !== undefined && !e.message.startsWith(`${ctx}.`))
      throw new DataError(`${ctx}.${cols[i]?.name}: ${e.message}`, { cause: e });
    throw e;
  }
  if (writers !== undefined) for (const j of plan.missing) writers[j]!.appendNull();
  return p;
}

/** Whether the key columns of two images differ, as the old path compares them (keyBytes). */
export function keyDiffers(plan: RowPlan, buf: Buffer, a: Int32Array, b: Int32Array): boolean {
  for (const i of plan.key) {
    if (i < 0) continue;
    const as = a[2 * i]!;
    const bs = b[2 * i]!;
    if (as < 0 || bs < 0) {
      if (as !== bs) return true;
      continue;
    }
    const ae = a[2 * i + 1]!;
    const be = b[2 * i + 1]!;
    if (buf.compare(buf, bs, be, as, ae) === 0) continue;
    const c = plan.cols[i]!;
    if (!c.keyByValue) return true;
    if (keyText(c, buf, as, ae) !== keyText(c, buf, bs, be)) return true;
  }
  return false;
}

/** The text the old path's key bytes are of, for the columns whose bytes can differ for one value. */
function keyText(c: ColPlan, buf: Buffer, s: number, e: number): string {
  switch (c.op) {
    case OP_FLOAT:
      return String(buf.readFloatLE(s));
    case OP_DOUBLE:
      return String(buf.readDoubleLE(s));
    default: {
      const body = buf.subarray(s + c.size, e);
      return c.latin1 ? iconv.decode(body, 'cp1252', { stripBOM: false }) : body.toString('utf8');
    }
  }
}
