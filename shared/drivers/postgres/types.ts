/**
 * Postgres type mapping: from a column's catalog type (after resolving domains) to its canonical
 * `LogicalType`, and to the one SQL expression both read paths select for it, together with the
 * exact value forms of that expression (its text form for the row path, its binary COPY form
 * for the columnar path). docs/types.md is the table behind this module.
 *
 * Owns: the mapping decisions, the row path's text parsers and the keyset literal rendering.
 * Must never approximate: a value with no exact home in its logical type is a `DataError`
 * naming the column, and types we do not decode are selected as `::text` (Postgres' own
 * canonical text, lossless by construction).
 *
 * Why one expression per column: the row path reads `<expr>` in text format and parses it, the
 * COPY path reads `<expr>` in binary format, so both paths see the same server-side value; a
 * cast such as `real -> float8` happens once, in Postgres, for both.
 */
import { DataError } from '../../contracts/errors.js';
import type { LogicalType } from '../../dataplane/schema.js';
import {
  dateTextToDays,
  daysToDateText,
  microsToTimestampText,
  TIMESTAMP_INFINITY,
  TIMESTAMP_NEG_INFINITY,
  timestampTextToMicros,
} from '../../position/time-text.js';
import { type ValueContext, withContext } from '../value-context.js';

/** Built-in type OIDs (pg_type.dat; stable across releases). */
export const OID = {
  bool: 16,
  bytea: 17,
  char: 18,
  name: 19,
  int8: 20,
  int2: 21,
  int4: 23,
  text: 25,
  json: 114,
  float4: 700,
  float8: 701,
  bpchar: 1042,
  varchar: 1043,
  date: 1082,
  time: 1083,
  timestamp: 1114,
  timestamptz: 1184,
  interval: 1186,
  timetz: 1266,
  numeric: 1700,
  uuid: 2950,
  jsonb: 3802,
} as const;

/**
 * The form a selected expression arrives in. Each names one Postgres binary send format (for
 * COPY) and one text output format (for the row path):
 *   bool, int2, int4, int8, float8, uuid, bytea, date, timestamp (both timestamp types: the same
 *   int64 micros since 2000, zone-free), numeric (only for decimal(p,s) columns), jsonb (a
 *   version byte, then text) and text (text, varchar, bpchar, name, json, and every `::text`
 *   cast: the UTF-8 bytes).
 */
export type WireKind =
  | 'bool'
  | 'int2'
  | 'int4'
  | 'int8'
  | 'float8'
  | 'numeric'
  | 'text'
  | 'jsonb'
  | 'bytea'
  | 'uuid'
  | 'date'
  | 'timestamp';

/** A column's catalog type with domains resolved to their base type. */
export interface PostgresType {
  readonly oid: number;
  /** pg_type.typname of the base type (e.g. `int4`, `citext`, `_int4`). */
  readonly name: string;
  /** pg_type.typtype: b base, e enum, c composite, r range, m multirange, p pseudo. */
  readonly typtype: string;
  /** pg_type.typcategory: `A` for arrays. */
  readonly category: string;
  /** The typmod that applies (the domain's, if the column's type is a domain). */
  readonly typmod: number;
  /** For arrays: the element type, domains resolved. */
  readonly element?: PostgresType;
}

/** How a column is read: the expression, what arrives, and what it means. */
export interface ReadPlan {
  /** SQL expression over the quoted column name, selected by both paths. */
  readonly expr: string;
  /** Form of a scalar value, or of each element when `list`. */
  readonly wire: WireKind;
  /** The value is a 1-D array of `wire` elements. */
  readonly list: boolean;
  readonly logical: LogicalType;
}

/** Quotes an identifier (`"a""b"`), always: names are case- and character-exact. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * A string literal that means exactly `s` whatever `standard_conforming_strings` says: `E'...'`
 * with backslashes doubled when `s` has any, else `'...'`; quotes are doubled. This is Postgres'
 * own `quote_literal` rule, needed because COPY takes no bind parameters.
 */
export function quoteLiteral(s: string): string {
  const quoted = s.replace(/'/g, "''");
  return s.includes('\\') ? `E'${quoted.replace(/\\/g, '\\\\')}'` : `'${quoted}'`;
}

const NUMERIC_TYPMOD_HEADER = 4; // VARHDRSZ
const MAX_DECIMAL_PRECISION = 38;

/** numeric(p, s) from its typmod, or undefined for unbounded numeric. */
export function numericPrecisionScale(typmod: number): { precision: number; scale: number } | undefined {
  if (typmod < NUMERIC_TYPMOD_HEADER) return undefined;
  const t = typmod - NUMERIC_TYPMOD_HEADER;
  // PG 15 allows a negative scale (11-bit two's complement); older releases never set the bit.
  return { precision: (t >> 16) & 0xffff, scale: ((t & 0x7ff) ^ 1024) - 1024 };
}

const TEXT_LIKE = new Set<number>([OID.text, OID.varchar, OID.bpchar, OID.name, OID.json]);

/** Scalar read of a non-array type (also used for array elements, where `elementOf` says so). */
function scalarPlan(
  t: PostgresType,
  col: string,
): { expr: string; wire: WireKind; logical: LogicalType; needsTextCast: boolean } {
  const self = { expr: col, needsTextCast: false };
  switch (t.oid) {
    case OID.bool:
      return { ...self, wire: 'bool', logical: { kind: 'bool' } };
    case OID.int2:
      return { ...self, wire: 'int2', logical: { kind: 'int16' } };
    case OID.int4:
      return { ...self, wire: 'int4', logical: { kind: 'int32' } };
    case OID.int8:
      return { ...self, wire: 'int8', logical: { kind: 'int64' } };
    case OID.float8:
      return { ...self, wire: 'float8', logical: { kind: 'float64' } };
    case OID.float4:
      // Widened exactly by Postgres for both paths: 0.1::real is 0.10000000149011612 as float8.
      return { expr: `${col}::float8`, needsTextCast: false, wire: 'float8', logical: { kind: 'float64' } };
    case OID.numeric: {
      const ps = numericPrecisionScale(t.typmod);
      if (
        ps &&
        ps.precision >= 1 &&
        ps.precision <= MAX_DECIMAL_PRECISION &&
        ps.scale >= 0 &&
        ps.scale <= ps.precision
      ) {
        return {
          ...self,
          wire: 'numeric',
          logical: { kind: 'decimal', precision: ps.precision, scale: ps.scale },
        };
      }
      return { expr: `${col}::text`, needsTextCast: true, wire: 'text', logical: { kind: 'text' } };
    }
    case OID.bytea:
      return { ...self, wire: 'bytea', logical: { kind: 'binary' } };
    case OID.uuid:
      return { ...self, wire: 'uuid', logical: { kind: 'text' } };
    case OID.jsonb:
      return { ...self, wire: 'jsonb', logical: { kind: 'text' } };
    case OID.date:
      return { ...self, wire: 'date', logical: { kind: 'date' } };
    case OID.timestamp:
      return { ...self, wire: 'timestamp', logical: { kind: 'timestamp', utc: false } };
    case OID.timestamptz:
      return { ...self, wire: 'timestamp', logical: { kind: 'timestamp', utc: true } };
  }
  if (TEXT_LIKE.has(t.oid)) return { ...self, wire: 'text', logical: { kind: 'text' } };
  // Everything else (time, timetz, interval, enums, citext, inet, cidr, macaddr, money, bit, xml,
  // ranges, composites, geometry...): Postgres' own canonical text, lossless by construction.
  return { expr: `${col}::text`, needsTextCast: true, wire: 'text', logical: { kind: 'text' } };
}

/**
 * The read plan of a column of type `t` (domains already resolved). `ndims` is
 * pg_attribute.attndims: arrays declared with more than one dimension are read as text; arrays
 * declared 1-D (or undeclared, 0) become lists, and a multi-dimensional VALUE arriving in such a
 * column is a DataError (Postgres does not enforce declared dimensions).
 */
export function readPlan(t: PostgresType, columnName: string, ndims: number): ReadPlan {
  const col = quoteIdent(columnName);
  if (t.category === 'A' && t.element && ndims <= 1 && t.element.category !== 'A') {
    const el = scalarPlan(t.element, 'x');
    if (el.needsTextCast) {
      return {
        expr: `${col}::text[]`,
        wire: 'text',
        list: true,
        logical: { kind: 'list', element: { kind: 'text' } },
      };
    }
    const expr = t.element.oid === OID.float4 ? `${col}::float8[]` : col;
    return { expr, wire: el.wire, list: true, logical: { kind: 'list', element: el.logical } };
  }
  if (t.category === 'A') {
    return { expr: `${col}::text`, wire: 'text', list: false, logical: { kind: 'text' } };
  }
  const s = scalarPlan(t, col);
  return { expr: s.expr, wire: s.wire, list: false, logical: s.logical };
}

// ---------------------------------------------------------------------------------------------
// Row path: text forms -> the exact value universe

/** The largest finite timestamp, in micros since 1970, that does not collide with `infinity`. */
const MAX_FINITE_MICROS = TIMESTAMP_INFINITY - 1n;

/** Refuses a finite timestamp that int64 micros since 1970 cannot hold (beyond ~294246 AD). */
export function timestampOutOfRange(ctx: ValueContext): DataError {
  return new DataError(
    `${ctx.table}.${ctx.column}: a timestamp beyond 294246 AD does not fit int64 microseconds since 1970 (Parquet/Arrow); ` +
      'fix the value or exclude the column',
  );
}

/** Parses one value of `wire` from its Postgres text output (DateStyle ISO, bytea hex). */
export function parseText(wire: WireKind, text: string, ctx: ValueContext): unknown {
  switch (wire) {
    case 'bool':
      return text === 't';
    case 'int2':
    case 'int4':
      return Number(text);
    case 'int8':
      return BigInt(text);
    case 'float8':
      // 'NaN', 'Infinity' and '-Infinity' parse as their JS namesakes.
      return Number(text);
    case 'numeric':
      if (text === 'NaN' || text === 'Infinity' || text === '-Infinity') throw nonFiniteNumeric(ctx, text);
      return text;
    case 'text':
    case 'jsonb':
    case 'uuid':
      return text;
    case 'bytea':
      return new Uint8Array(Buffer.from(text.slice(2), 'hex'));
    case 'date':
      return withContext(ctx, () => dateTextToDays(text));
    case 'timestamp': {
      const micros = withContext(ctx, () => timestampTextToMicros(text));
      if (micros !== TIMESTAMP_INFINITY && micros !== TIMESTAMP_NEG_INFINITY && micros > MAX_FINITE_MICROS) {
        throw timestampOutOfRange(ctx);
      }
      return micros;
    }
  }
}

/** NaN or ±Infinity in a numeric(p, s) column: a decimal column cannot hold it. */
export function nonFiniteNumeric(ctx: ValueContext, shown: string): DataError {
  return new DataError(
    `${ctx.table}.${ctx.column}: numeric value ${shown} cannot be stored in a decimal column; ` +
      'exclude the column, or change its type to unbounded numeric (read as exact text)',
  );
}

/** Parses a column's text output per its read plan (lists: a 1-D array literal). */
export function parseColumnText(plan: ReadPlan, text: string | null, ctx: ValueContext): unknown {
  if (text === null) return null;
  if (!plan.list) return parseText(plan.wire, text, ctx);
  const elements = parseArrayLiteral(text, ctx);
  const out: unknown[] = new Array(elements.length);
  for (let i = 0; i < elements.length; i++) {
    const e = elements[i]!;
    out[i] = e === null ? null : parseText(plan.wire, e, ctx);
  }
  return out;
}

/** A multi-dimensional array value in a column read as a list. */
export function multiDimensional(ctx: ValueContext): DataError {
  return new DataError(
    `${ctx.table}.${ctx.column}: holds a multi-dimensional array value, but the column is read as a list; ` +
      'declare the column with its dimensions (e.g. int[][]) so it is read as text, or exclude it',
  );
}

/**
 * Parses a 1-D Postgres array literal (`{1,NULL,"a \"b\""}`, optionally prefixed by explicit
 * bounds `[0:2]=`) into element texts, `null` for SQL NULL. Elements are split on `,`: every
 * list element type we read (numbers, text, uuid, bytea, dates, timestamps) uses it.
 */
export function parseArrayLiteral(text: string, ctx: ValueContext): (string | null)[] {
  let i = 0;
  if (text.charCodeAt(0) === 0x5b /* [ */) {
    const eq = text.indexOf('=');
    if (text.lastIndexOf('[', eq) > 0) throw multiDimensional(ctx);
    i = eq + 1;
  }
  if (text[i] !== '{')
    throw new DataError(`${ctx.table}.${ctx.column}: unreadable array text ${JSON.stringify(text)}`);
  i++;
  const out: (string | null)[] = [];
  if (text[i] === '}') return out;
  const n = text.length;
  for (;;) {
    const c = text[i];
    if (c === '{') throw multiDimensional(ctx);
    if (c === '"') {
      let s = '';
      i++;
      for (;;) {
        const ch = text[i];
        if (ch === undefined) throw new DataError(`${ctx.table}.${ctx.column}: unterminated array element`);
        if (ch === '\\') {
          s += text[i + 1];
          i += 2;
        } else if (ch === '"') {
          i++;
          break;
        } else {
          s += ch;
          i++;
        }
      }
      out.push(s);
    } else {
      let j = i;
      while (j < n && text[j] !== ',' && text[j] !== '}') j++;
      const raw = text.slice(i, j);
      out.push(raw.toUpperCase() === 'NULL' ? null : raw);
      i = j;
    }
    if (text[i] === ',') {
      i++;
      continue;
    }
    if (text[i] === '}') return out;
    throw new DataError(`${ctx.table}.${ctx.column}: unreadable array text ${JSON.stringify(text)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Keyset literals: exact value -> Postgres input text

/**
 * Renders a key value (cursor or primary-key part, in the exact value universe) as the text
 * Postgres' input function of the column's type reads back to the same value. The caller casts
 * it to the column type (`$1::type` or `'...'::type`), so comparisons use the column's own
 * ordering.
 */
export function keyText(logical: LogicalType, v: unknown): string {
  switch (logical.kind) {
    case 'bool':
      return v ? 'true' : 'false';
    case 'int8':
    case 'int16':
    case 'int32':
    case 'int64':
      return String(v);
    case 'float64':
      // Shortest round-trip text; 'NaN', 'Infinity', '-Infinity' are float8 input too.
      return String(v);
    case 'decimal':
    case 'text':
      return v as string;
    case 'binary':
      return `\\x${Buffer.from(v as Uint8Array).toString('hex')}`;
    case 'date':
      return daysToDateText(v as number);
    case 'timestamp':
      return microsToTimestampText(v as bigint, logical.utc);
    case 'list':
      throw new DataError('a list column cannot be part of a cursor or key');
  }
}
