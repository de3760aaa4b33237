/**
 * A human-readable rendering of a resume token, stored next to it in the state item so
 * `tidemark status` and the run summary show `updated_at=2024-05-01 10:00:00.123456+00, id=42`
 * instead of the opaque token, and the token's cursor value as a time, for freshness. Display
 * only: the token stays the source of truth.
 */
import type { LogicalType, Schema } from '../../dataplane/schema.js';
import { findColumn } from '../../dataplane/schema.js';
import { decodeKey } from '../../position/key-codec.js';
import { daysToDateText, microsToTimestampText } from '../../position/time-text.js';

function show(t: LogicalType, v: unknown): string {
  if (t.kind === 'timestamp' && typeof v === 'bigint') return microsToTimestampText(v, t.utc);
  if (t.kind === 'date' && typeof v === 'number') return daysToDateText(v);
  if (v instanceof Uint8Array) return `\\x${Buffer.from(v).toString('hex')}`;
  return String(v);
}

interface DecodedToken {
  readonly names: readonly string[];
  readonly types: readonly LogicalType[];
  readonly values: readonly unknown[];
}

/** The token's keyset (cursor first), or undefined when it does not decode with these types. */
function decodeToken(schema: Schema, cursorColumn: string, token: string): DecodedToken | undefined {
  if (token === '') return undefined;
  const names = [cursorColumn, ...schema.primaryKey.filter((k) => k !== cursorColumn)];
  const columns = names.map((n) => findColumn(schema, n));
  if (columns.some((c) => c === undefined)) return undefined;
  for (const n of [names.length, 1]) {
    try {
      const types = columns.slice(0, n).map((c) => c!.type);
      return { names, types, values: decodeKey(types, token) };
    } catch {
      // Not this shape (e.g. a table keyed by its cursor alone): try the next.
    }
  }
  return undefined;
}

/** `cursor=value, pk=value...`, or undefined when the token does not decode with these types. */
export function describeCursor(schema: Schema, cursorColumn: string, token: string): string | undefined {
  const d = decodeToken(schema, cursorColumn, token);
  return d?.values.map((v, i) => `${d.names[i]}=${show(d.types[i]!, v)}`).join(', ');
}

/**
 * The token's cursor value as a time: `utc` microseconds for a zoned timestamp, `wall`
 * microseconds for a wall-clock one (timestamp without time zone, DATETIME), which only the
 * source can place in time (WallClockZone). Undefined for other cursor types.
 */
export function cursorTime(
  schema: Schema,
  cursorColumn: string,
  token: string,
): { readonly utc: bigint } | { readonly wall: bigint } | undefined {
  const d = decodeToken(schema, cursorColumn, token);
  const type = d?.types[0];
  const value = d?.values[0];
  if (type?.kind !== 'timestamp' || typeof value !== 'bigint') return undefined;
  return type.utc ? { utc: value } : { wall: value };
}
