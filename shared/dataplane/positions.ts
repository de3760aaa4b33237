/**
 * Places rows in the stream after the fact: a new `__pos` column for a wire record whose rows
 * were read before their position was known (snapshot chunks, shared/engine/cdc/snapshot.ts).
 *
 * Row i gets `prefix + ordinalHex(base + i)` (shared/position/position.ts). Built straight into
 * one values buffer and one offsets array: every position has the same length, so no per-row
 * string is made.
 */
import { makeData, RecordBatch, Struct, Utf8 } from 'apache-arrow';
import { ordinalHex } from '../position/position.js';
import { META_POS } from './metadata.js';

/** `record` with its `__pos` column replaced by `prefix + ordinalHex(base + i)` for row i. */
export function withPositions(record: RecordBatch, prefix: string, base: number): RecordBatch {
  const index = record.schema.fields.findIndex((f) => f.name === META_POS);
  if (index < 0) throw new Error(`record has no ${META_POS} column`);
  const n = record.numRows;
  ordinalHex(base + Math.max(0, n - 1)); // throws when the ordinals would not fit
  const head = Buffer.from(prefix, 'latin1');
  const width = head.length + 8;
  const values = new Uint8Array(n * width);
  const offsets = new Int32Array(n + 1);
  for (let i = 0; i < n; i++) {
    const at = i * width;
    values.set(head, at);
    let v = base + i;
    for (let d = width - 1; d >= head.length; d--) {
      const digit = v % 16;
      values[at + d] = digit < 10 ? 48 + digit : 87 + digit;
      v = Math.floor(v / 16);
    }
    offsets[i + 1] = at + width;
  }
  const pos = makeData({ type: new Utf8(), length: n, nullCount: 0, valueOffsets: offsets, data: values });
  const children = record.data.children.slice();
  children[index] = pos;
  return new RecordBatch(
    record.schema,
    makeData({ type: new Struct(record.schema.fields), length: n, nullCount: 0, children }),
  );
}
