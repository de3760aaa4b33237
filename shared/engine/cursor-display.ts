/**
 * A human-readable rendering of a resume token, stored next to it in the state item so
 * `tidemark status` and the run summary show `updated_at=2024-05-01 10:00:00.123456+00, id=42`
 * instead of the opaque token. Display only: the token stays the source of truth.
 */
import type { LogicalType, Schema } from '../dataplane/schema.js';
import { findColumn } from '../dataplane/schema.js';
import { decodeKey } from '../position/key-codec.js';
import { daysToDateText, microsToTimestampText } from '../position/time-text.js';

function show(t: LogicalType, v: unknown): string {
  if (t.kind === 'timestamp' && typeof v === 'bigint') return microsToTimestampText(v, t.utc);
  if (t.kind === 'date' && typeof v === 'number') return daysToDateText(v);
  if (v instanceof Uint8Array) return `\\x${Buffer.from(v).toString('hex')}`;
  return String(v);
}

/** `cursor=value, pk=value...`, or undefined when the token does not decode with these types. */
export function describeCursor(schema: Schema, cursorColumn: string, token: string): string | undefined {
  if (token === '') return undefined;
  const names = [cursorColumn, ...schema.primaryKey.filter((k) => k !== cursorColumn)];
  const columns = names.map((n) => findColumn(schema, n));
  if (columns.some((c) => c === undefined)) return undefined;
  for (const n of [names.length, 1]) {
    try {
      const types = columns.slice(0, n).map((c) => c!.type);
      const values = decodeKey(types, token);
      return values.map((v, i) => `${names[i]}=${show(types[i]!, v)}`).join(', ');
    } catch {
      // Not this shape (e.g. a table keyed by its cursor alone): try the next.
    }
  }
  return undefined;
}
