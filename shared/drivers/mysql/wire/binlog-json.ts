/**
 * MySQL's binary JSON (a JSON column's bytes in a row image) -> the text MySQL prints for it.
 *
 * Walks the same layout @vlasky/zongji 0.9.0's lib/json_decode.js reads (small/large object and
 * array, literals, int16/uint16/int32/uint32/int64/uint64, double, string with a 7-bit-group
 * length, opaque) and writes the text directly instead of building a JS object first, so keys
 * stay in their stored order (a JS object moves integer-like keys first and loses `__proto__`).
 * Everything else is printed as zongji's `jsonToText` prints it today: ", " and ": " separators,
 * strings and keys through JSON.stringify, 64-bit integers exact, other numbers via String().
 * Opaque values (DECIMAL, dates, times, binary strings inside JSON) are handed to zongji's own
 * decoder for that one value, so their text is zongji's.
 *
 * Owns: that serialization. Must never: print a value zongji's text would print differently,
 * other than the key order and `__proto__`.
 */

const SMALL_OBJECT = 0;
const LARGE_OBJECT = 1;
const SMALL_ARRAY = 2;
const LARGE_ARRAY = 3;
const LITERAL = 4;
const INT16 = 5;
const UINT16 = 6;
const INT32 = 7;
const UINT32 = 8;
const INT64 = 9;
const UINT64 = 10;
const DOUBLE = 11;
const STRING = 12;
const OPAQUE = 15;

const LITERALS = ['null', 'true', 'false'];

interface ZongjiJson {
  default(b: Buffer): unknown;
  jsonToText(v: unknown): string;
}
/** zongji's own JSON decoder, for opaque values: loaded with the row-image override. */
let zongjiJson: ZongjiJson | undefined;

/** Loads zongji's JSON decoder (binlog-rows.ts calls it before it decodes any row). */
export async function loadZongjiJson(main: string): Promise<void> {
  zongjiJson ??= (await import(new URL('./lib/json_decode.js', main).href)) as ZongjiJson;
}

/** The text of one binary JSON document (a non-empty JSON column value). */
export function jsonBinaryToText(buf: Buffer): string {
  const out: string[] = [];
  write(buf, 0, 0, false, false, out);
  return out.join('');
}

/** A 7-bit-group length at `at`: [length, bytes used]. */
function varLength(buf: Buffer, at: number): [number, number] {
  let n = 0;
  let mul = 1;
  let used = 0;
  for (;;) {
    const b = buf[at + used];
    if (b === undefined) throw new RangeError('binary JSON: a length runs past the value');
    used++;
    n += (b & 0x7f) * mul;
    if ((b & 0x80) === 0) return [n, used];
    mul *= 128;
  }
}

/**
 * Writes the value whose type byte is at `entry` (the document's first byte when `root`, else a
 * value entry of the container whose type byte is at `parent`; `large`: that container's entry
 * widths).
 */
function write(
  buf: Buffer,
  entry: number,
  parent: number,
  large: boolean,
  nested: boolean,
  out: string[],
): void {
  const type = buf.readUInt8(entry);
  // Where the value's type byte would be; its data starts one byte later.
  const at = nested ? (large ? buf.readUInt32LE(entry + 1) : buf.readUInt16LE(entry + 1)) + parent : 0;
  switch (type) {
    case INT16:
      out.push(String(buf.readInt16LE(entry + 1)));
      return;
    case UINT16:
      out.push(String(buf.readUInt16LE(entry + 1)));
      return;
    case LITERAL: {
      const s = LITERALS[buf.readUInt8(entry + 1)];
      if (s === undefined) throw new Error(`binary JSON: literal ${buf.readUInt8(entry + 1)}`);
      out.push(s);
      return;
    }
    case STRING: {
      const [len, used] = varLength(buf, at + 1);
      out.push(JSON.stringify(buf.toString('utf8', at + 1 + used, at + 1 + used + len)));
      return;
    }
    case SMALL_OBJECT:
    case LARGE_OBJECT:
      container(buf, at, type === LARGE_OBJECT, true, out);
      return;
    case SMALL_ARRAY:
    case LARGE_ARRAY:
      container(buf, at, type === LARGE_ARRAY, false, out);
      return;
    case DOUBLE:
      out.push(String(buf.readDoubleLE(at + 1)));
      return;
    case INT32:
      out.push(String(large ? buf.readInt32LE(entry + 1) : buf.readInt32LE(at + 1)));
      return;
    case UINT32:
      out.push(String(large ? buf.readUInt32LE(entry + 1) : buf.readUInt32LE(at + 1)));
      return;
    case INT64:
      out.push(String(buf.readBigInt64LE(at + 1)));
      return;
    case UINT64:
      out.push(String(buf.readBigUInt64LE(at + 1)));
      return;
    case OPAQUE: {
      // zongji's decode of this one value: a root opaque document of the same bytes.
      const [len, used] = varLength(buf, at + 2);
      const doc = Buffer.concat([Buffer.from([OPAQUE]), buf.subarray(at + 1, at + 2 + used + len)]);
      if (!zongjiJson) throw new Error('binlog-json.ts: loadZongjiJson was not called before decoding');
      out.push(zongjiJson.jsonToText(zongjiJson.default(doc)));
      return;
    }
    default:
      throw new Error(`JSON Type Not Implemented: ${type}`);
  }
}

/** An object or array whose type byte is at `at`. */
function container(buf: Buffer, at: number, large: boolean, isObject: boolean, out: string[]): void {
  const w = large ? 4 : 2;
  const count = large ? buf.readUInt32LE(at + 1) : buf.readUInt16LE(at + 1);
  const keyEntries = at + 1 + 2 * w;
  const valueEntries = keyEntries + (isObject ? count * (w + 2) : 0);
  out.push(isObject ? '{' : '[');
  for (let i = 0; i < count; i++) {
    if (i > 0) out.push(', ');
    if (isObject) {
      const k = keyEntries + i * (w + 2);
      const start = at + 1 + (large ? buf.readUInt32LE(k) : buf.readUInt16LE(k));
      const end = start + buf.readUInt16LE(k + w);
      out.push(JSON.stringify(buf.toString('utf8', start, end)), ': ');
    }
    write(buf, valueEntries + i * (w + 1), at, large, true, out);
  }
  out.push(isObject ? '}' : ']');
}
