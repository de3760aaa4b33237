/**
 * The raw result-set reader's row walk (issue 15): a MySQL/MariaDB text-protocol row packet is
 * one length-encoded string per column (a first byte below 0xFB is the length itself; 0xFB is
 * NULL; 0xFC, 0xFD and 0xFE are followed by a 2-, 3- and 8-byte little-endian length), so each
 * value is a range of the packet, read by offsets: no Buffer per value and no array per row
 * (mysql2's row parser builds both). connect.ts `eachRow` hands the packets, the page readers
 * (incremental.ts, snapshot.ts) append the ranges through types.ts `rangeAppenderOf`.
 *
 * Owns: the length-encoded string walk and its refusal of a packet that does not hold exactly
 * the expected columns. Must never read outside the packet.
 */
import type { ColumnWriter } from '../../../dataplane/encoder.js';
import type { RawRow } from '../connect.js';
import type { RangeAppender } from '../types.js';

/** NULL marker of a length-encoded string. */
const NULL_MARK = 0xfb;
const LEN2 = 0xfc;
const LEN3 = 0xfd;
const LEN8 = 0xfe;

/**
 * The ranges of one row's values, filled by `walkRow`: value `i` is `buf[starts[i]..ends[i])`,
 * or NULL when `starts[i]` is -1. One per statement, reused for every row.
 */
export class RowRanges {
  readonly starts: number[];
  readonly ends: number[];
  constructor(readonly width: number) {
    this.starts = new Array<number>(width).fill(-1);
    this.ends = new Array<number>(width).fill(-1);
  }
}

/**
 * Walks the row packet payload `buf[start..end)` into `r`: exactly `r.width` length-encoded
 * values, which must end where the packet ends. Throws on a packet of any other shape (a
 * protocol error: the result-field check has already compared the column count).
 */
export function walkRow(buf: Buffer, start: number, end: number, r: RowRanges): void {
  const width = r.width;
  let p = start;
  for (let i = 0; i < width; i++) {
    p = readLenenc(buf, p, end, r, i);
    if (p < 0) throw malformed(i, width, start, end);
  }
  if (p !== end) throw malformed(width, width, start, end);
}

/**
 * Reads the length-encoded string at `buf[p..end)` as value `i` of `r` (NULL for the 0xFB mark)
 * and returns the offset after it, or -1 when there is none there (no byte left, a first byte of
 * 0xFF) or it runs past `end`. Shared by the text and the binary row walks (binary-rows.ts).
 */
export function readLenenc(buf: Buffer, p: number, end: number, r: RowRanges, i: number): number {
  if (p >= end) return -1;
  const b = buf[p]!;
  let len: number;
  if (b < NULL_MARK) {
    len = b;
    p += 1;
  } else if (b === NULL_MARK) {
    r.starts[i] = -1;
    r.ends[i] = -1;
    return p + 1;
  } else if (b === LEN2) {
    len = buf[p + 1]! | (buf[p + 2]! << 8);
    p += 3;
  } else if (b === LEN3) {
    len = buf[p + 1]! | (buf[p + 2]! << 8) | (buf[p + 3]! << 16);
    p += 4;
  } else if (b === LEN8 && p + 9 <= end) {
    len = buf.readUInt32LE(p + 1) + buf.readUInt32LE(p + 5) * 0x1_0000_0000;
    p += 9;
  } else {
    return -1;
  }
  // Past `end` also when the length bytes themselves were (p is then beyond it already).
  if (p + len > end) return -1;
  r.starts[i] = p;
  r.ends[i] = p + len;
  return p + len;
}

function malformed(i: number, width: number, start: number, end: number): Error {
  return new Error(
    `MySQL protocol: a row packet of ${end - start} bytes does not hold ${width} length-encoded values (value ${i + 1} runs past its end or the packet has more)`,
  );
}

/**
 * A packet buffer larger than this is not kept for a resume key: the key values are copied out
 * of it (`rowOf`), so a big row's packet of many MiB can go once its page is read.
 */
export const KEEP_PACKET_MAX = 1 << 20;

/**
 * The values `indexes` of the row in `r` as Buffers (the others null), for the resume key and
 * error messages: slices of the packet, or copies when the packet's memory is bigger than
 * `keepMax` (a big row's packet is not kept alive for a few key bytes). mysql2 never writes into
 * a packet's buffer once it is handed over (a socket chunk, or a payload it allocated for a
 * packet that spans chunks or 16 MiB parts, or zlib's output under the compressed protocol; its
 * PacketParser reuses only the Packet object, and a paused connection queues `clone()`s sharing
 * the same bytes: mysql2 3.24, lib/packet_parser.js, lib/base/connection.js), so a slice stays
 * valid.
 */
export function rowOf(buf: Buffer, r: RowRanges, indexes: readonly number[], keepMax: number): RawRow {
  const row: RawRow = new Array(r.width).fill(null);
  const copy = buf.buffer.byteLength > keepMax;
  for (const i of indexes) {
    const s = r.starts[i]!;
    if (s < 0) continue;
    const v = buf.subarray(s, r.ends[i]!);
    row[i] = copy ? Buffer.from(v) : v;
  }
  return row;
}

/** Appends the row `walkRow` left in `r` (values of `buf`) to `writers`, one appender per column. */
export function appendRow(
  buf: Buffer,
  r: RowRanges,
  writers: readonly ColumnWriter[],
  appenders: readonly RangeAppender[],
): void {
  const { starts, ends } = r;
  for (let i = 0; i < writers.length; i++) {
    const s = starts[i]!;
    if (s < 0) writers[i]!.appendNull();
    else appenders[i]!(writers[i]!, buf, s, ends[i]!);
  }
}

/**
 * The last row appended, kept for its resume key as its packet's buffer and the ranges of its
 * key values: `keep` per row (no copy), `take` once the statement is over.
 */
export class LastKeyRow {
  private buf: Buffer | undefined;
  private readonly ranges: RowRanges;

  constructor(
    width: number,
    private readonly keyIndexes: readonly number[],
  ) {
    this.ranges = new RowRanges(width);
  }

  /** Remembers the key values of the row `walkRow` just left in `r`. */
  keep(buf: Buffer, r: RowRanges): void {
    this.buf = buf;
    for (const k of this.keyIndexes) {
      this.ranges.starts[k] = r.starts[k]!;
      this.ranges.ends[k] = r.ends[k]!;
    }
  }

  /**
   * The kept row's key values (`rowOf`, copied out of a packet over KEEP_PACKET_MAX), undefined
   * when no row was kept; lets go of the packet (the row callback may stay reachable from an
   * abandoned connection and must not hold it).
   */
  take(): RawRow | undefined {
    const buf = this.buf;
    this.buf = undefined;
    return buf === undefined ? undefined : rowOf(buf, this.ranges, this.keyIndexes, KEEP_PACKET_MAX);
  }
}
