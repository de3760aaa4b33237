/**
 * Binlog values -> the lake values of the incremental MySQL driver (docs/types.md, MySQL).
 *
 * zongji decodes a row image into JS values (numbers, exact strings for big integers and
 * DECIMALs, `YYYY-MM-DD[ HH:MM:SS[.ffffff]]` strings under `dateStrings` and `timezone: 'Z'`,
 * Buffers for binary and BIT, JSON text under `jsonStrings`). Each column's appender turns that
 * value into the bytes the incremental driver's text read would give for the same row and hands
 * them to the same appender (`appenderOf` in ../types.ts), so both modes store identical values:
 *   - YEAR `0000` arrives as 1900 (zongji adds 1900 to the stored byte 0; 1900 is not a valid
 *     YEAR) and is stored as 0, as the server prints it;
 *   - a zero TIMESTAMP arrives as the epoch second 0 (`1970-01-01 00:00:00`, outside the
 *     TIMESTAMP range otherwise) and is NULL like every zero date;
 *   - zero DATE/DATETIME values arrive as `0000-00-00...` text and are NULL through `appenderOf`;
 *   - an ENUM's invalid-value index 0 (the empty string) arrives as `undefined`: '';
 *   - MariaDB's UUID, INET4 and INET6 arrive as fixed binary (the FULL row metadata describes
 *     them as BINARY(16)/BINARY(4)) and are printed as the server prints them.
 *
 * Owns: that conversion. Never parses a value a second way: the bytes go to types.ts.
 */
import { DataError } from '../../../contracts/errors.js';
import type { ColumnWriter } from '../../../dataplane/encoder.js';
import type { ValueContext } from '../../value-context.js';
import type { ColumnInfo } from '../introspect.js';
import { appenderOf } from '../types.js';

/** Appends one binlog value (never undefined-as-missing: the caller checks presence). */
export type BinlogAppender = (w: ColumnWriter, v: unknown) => void;

const ZERO_TIMESTAMP = /^1970-01-01 00:00:00(\.0*)?$/;

function textBytes(v: unknown): Buffer {
  if (Buffer.isBuffer(v)) return v;
  if (typeof v === 'string') return Buffer.from(v, 'utf8');
  if (typeof v === 'number' || typeof v === 'bigint') return Buffer.from(String(v), 'latin1');
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  throw new DataError(`a binlog value of type ${typeof v} where text was expected`);
}

function dataTypeOf(info: ColumnInfo): string {
  return info.sourceType.toLowerCase().split(/[\s(]/)[0] ?? '';
}

/** The appender of one column (`ctx` names it in errors). */
export function binlogAppenderFor(info: ColumnInfo, ctx: ValueContext): BinlogAppender {
  const plan = info.read;
  const text = appenderOf(plan, ctx);
  const withCtx =
    (f: BinlogAppender): BinlogAppender =>
    (w, v) => {
      try {
        f(w, v);
      } catch (e) {
        if (e instanceof DataError && !e.message.startsWith(`${ctx.table}.`))
          throw new DataError(`${ctx.table}.${ctx.column}: ${e.message}`, { cause: e });
        throw e;
      }
    };
  const type = dataTypeOf(info);
  switch (plan.kind) {
    case 'int':
      if (type === 'year') return (w, v) => w.appendInt(v === 1900 ? 0 : Number(v));
      return withCtx((w, v) => (typeof v === 'number' ? w.appendInt(v) : text(w, textBytes(v))));
    case 'int64':
      return withCtx((w, v) =>
        typeof v === 'number' && Number.isSafeInteger(v)
          ? w.appendInt(v)
          : typeof v === 'bigint'
            ? w.appendBigInt(v)
            : text(w, textBytes(v)),
      );
    case 'decimal':
      return withCtx((w, v) => w.appendDecimalText(typeof v === 'string' ? v : String(v)));
    case 'float':
      return withCtx((w, v) => w.appendFloat64(typeof v === 'number' ? v : Number(String(v))));
    case 'text':
      if (type === 'uuid' || type === 'inet4' || type === 'inet6') {
        const format = type === 'uuid' ? formatUuid : type === 'inet4' ? formatInet4 : formatInet6;
        return withCtx((w, v) => w.appendText(Buffer.isBuffer(v) ? format(v) : String(v)));
      }
      return withCtx((w, v) => {
        if (v === undefined) {
          w.appendText('');
          return;
        }
        const b = textBytes(v);
        w.appendUtf8Bytes(b, 0, b.length);
      });
    case 'binary':
      return withCtx((w, v) => {
        const b = textBytes(v);
        w.appendBytes(b, 0, b.length);
      });
    case 'date':
      return withCtx((w, v) => text(w, textBytes(v)));
    case 'datetime':
      if (type === 'timestamp')
        return withCtx((w, v) => {
          if (typeof v === 'string' && ZERO_TIMESTAMP.test(v)) w.appendNull();
          else text(w, textBytes(v));
        });
      return withCtx((w, v) => text(w, textBytes(v)));
  }
}

/** MariaDB's UUID text: 8-4-4-4-12 lowercase hex of the 16 bytes. */
export function formatUuid(b: Buffer): string {
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** INET4 text: dotted quad of the 4 network-order bytes. */
export function formatInet4(b: Buffer, off = 0): string {
  return `${b[off]}.${b[off + 1]}.${b[off + 2]}.${b[off + 3]}`;
}

/**
 * INET6 text as MariaDB prints it: RFC 5952 (lowercase groups, the longest run of two or more
 * zero groups as '::', the leftmost on a tie), IPv4-mapped `::ffff:a.b.c.d` and IPv4-compatible
 * `::a.b.c.d` (except `::` and `::1`) in dotted form.
 */
export function formatInet6(b: Buffer): string {
  if (b.subarray(0, 10).every((x) => x === 0)) {
    if (b[10] === 0xff && b[11] === 0xff) return `::ffff:${formatInet4(b, 12)}`;
    if (b[10] === 0 && b[11] === 0 && b.readUInt32BE(12) > 1) return `::${formatInet4(b, 12)}`;
  }
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(b.readUInt16BE(i));
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = (g: number[]) => g.map((x) => x.toString(16)).join(':');
  if (bestStart === -1) return hex(groups);
  return `${hex(groups.slice(0, bestStart))}::${hex(groups.slice(bestStart + bestLength))}`;
}

/** The bytes a key value compares by (bytewise, as the key-change rule says). */
export function keyBytes(v: unknown): Buffer | null {
  if (v === null || v === undefined) return null;
  return textBytes(v);
}
