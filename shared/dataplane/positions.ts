/**
 * Places rows in the stream after the fact: a new `__pos` column for a wire record whose rows
 * were read before their position was known (snapshot chunks, shared/engine/cdc/snapshot.ts),
 * and the builder of a `__pos` column of consecutive ordinals that both this and the encoder
 * (a batch whose rows continue one another, encoder.ts) use.
 *
 * Row i gets `prefix + ordinalHex(base + i)` (shared/position/position.ts). Built straight into
 * one values buffer and one offsets array: every position has the same length, so no per-row
 * string is made.
 */
import { makeData, RecordBatch, Struct, Utf8 } from 'apache-arrow';
import { MAX_ORDINAL, ordinalHex } from '../position/position.js';
import { META_POS } from './metadata.js';

/** Hex digits of an ordinal in a position (`ordinalHex`). */
const ORDINAL_DIGITS = 8;
const HEX = new Uint8Array(Buffer.from('0123456789abcdef', 'latin1'));

/** Throws ordinalHex's DataError unless `ordinal` is an integer in 0..MAX_ORDINAL. */
export function checkOrdinal(ordinal: number): void {
  if (!(ordinal >= 0 && ordinal <= MAX_ORDINAL && Math.floor(ordinal) === ordinal)) ordinalHex(ordinal);
}

/**
 * The utf8 buffers of `n` positions `prefix + ordinalHex(base + i)` (`prefix`: its bytes). The
 * caller has checked that `base + n - 1` is an ordinal. The ordinal's hex digits are counted up
 * in place from one row to the next (a carry past the last digit is rare), not formatted per row.
 */
export function consecutivePositions(
  prefix: Uint8Array,
  base: number,
  n: number,
): { offsets: Int32Array; values: Uint8Array } {
  const head = prefix.length;
  const width = head + ORDINAL_DIGITS;
  const values = new Uint8Array(n * width);
  const offsets = new Int32Array(n + 1);
  // The ordinal of the current row as digit values, most significant first.
  const digits = new Uint8Array(ORDINAL_DIGITS);
  for (let d = ORDINAL_DIGITS - 1, v = base; d >= 0; d--, v = Math.floor(v / 16)) digits[d] = v % 16;
  // The prefix of every row first, by doubling copies of the first row (log2(n) memcpys).
  if (n > 0) {
    values.set(prefix);
    for (let filled = width; filled < values.length; filled *= 2)
      values.copyWithin(filled, 0, Math.min(filled, values.length - filled));
  }
  for (let i = 0, at = head; i < n; i++, at += width) {
    for (let d = 0; d < ORDINAL_DIGITS; d++) values[at + d] = HEX[digits[d]!]!;
    offsets[i + 1] = (i + 1) * width;
    let d = ORDINAL_DIGITS - 1;
    while (d > 0 && digits[d] === 15) digits[d--] = 0;
    digits[d]!++;
  }
  return { offsets, values };
}

/** `record` with its `__pos` column replaced by `prefix + ordinalHex(base + i)` for row i. */
export function withPositions(record: RecordBatch, prefix: string, base: number): RecordBatch {
  const index = record.schema.fields.findIndex((f) => f.name === META_POS);
  if (index < 0) throw new Error(`record has no ${META_POS} column`);
  const n = record.numRows;
  ordinalHex(base + Math.max(0, n - 1)); // throws when the ordinals would not fit
  const { offsets, values } = consecutivePositions(Buffer.from(prefix, 'latin1'), base, n);
  const pos = makeData({ type: new Utf8(), length: n, nullCount: 0, valueOffsets: offsets, data: values });
  const children = record.data.children.slice();
  children[index] = pos;
  return new RecordBatch(
    record.schema,
    makeData({ type: new Struct(record.schema.fields), length: n, nullCount: 0, children }),
  );
}
