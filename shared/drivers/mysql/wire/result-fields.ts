/**
 * The result-set guard of MySQL/MariaDB page reads (issue 9, docs/schema-changes.md): every page
 * statement's column definitions are compared with the ones its table's introspection saw,
 * before the first row is decoded, so a column whose type changed between two pages of a run
 * (`ALTER TABLE t MODIFY c BIGINT`) stops the run with SCHEMA_CHANGED instead of being decoded
 * by the old read plan into a wrong value.
 *
 * What is compared is what the decoder depends on and what stays the same for the same column
 * type on every connection of our session setup (connect.ts):
 *   - the type code, except that the string family (CHAR, VARCHAR, TEXT, BLOB, ENUM, SET, JSON)
 *     is one code: all of it is read as bytes of text; within it only binary (charset 63: BINARY,
 *     VARBINARY, BLOB) against text counts;
 *   - UNSIGNED for integers (INT UNSIGNED reads as int64, INT as int32);
 *   - for DECIMAL, the precision and scale its lake type is made of.
 * Never compared: columnLength of anything but DECIMAL (VARCHAR(10) -> VARCHAR(200), TINYINT(1),
 * a computed `col + 0e0`), decimals of temporal and floating types (fractional seconds), the
 * character set number (the connection's, after SET NAMES) and the BINARY flag (set for a `_bin`
 * collation too): they change with nothing the decoder reads, or with the connection.
 *
 * Owns: the signature recorded at introspection, the comparison, and its words (type codes by
 * name). Must never do I/O: the caller turns a mismatch into a SchemaChangedError.
 */

import type { FieldPacket } from 'mysql2';
import mysql from 'mysql2';

/** One result-set column as the server described it (mysql2 ColumnDefinition). */
export interface ResultField {
  /** `columnType`: a MySQL type code (`mysql.Types`). */
  readonly type: number;
  readonly unsigned: boolean;
  /** The BINARY flag (binary charset, or a binary collation). */
  readonly binaryFlag: boolean;
  readonly decimals: number;
  /** The collation id the values arrive in (63: binary). */
  readonly characterSet: number;
  readonly columnLength: number;
}

const UNSIGNED_FLAG = 32;
const BINARY_FLAG = 128;
const BINARY_CHARSET = 63;

const T = mysql.Types;
const STRING_FAMILY = new Set<number>([
  T.VARCHAR,
  T.VAR_STRING,
  T.STRING,
  T.TINY_BLOB,
  T.MEDIUM_BLOB,
  T.LONG_BLOB,
  T.BLOB,
  T.ENUM,
  T.SET,
  T.JSON,
]);
const INTEGERS = new Set<number>([T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.YEAR]);
const DECIMALS = new Set<number>([T.DECIMAL, T.NEWDECIMAL]);
/** Larger DECIMALs are read as text (types.ts): their precision does not matter to the decoder. */
const MAX_DECIMAL_PRECISION = 38;

/** The signature of one mysql2 field. */
export function resultFieldOf(f: FieldPacket): ResultField {
  const flags = typeof f.flags === 'number' ? f.flags : 0;
  return {
    type: Number(f.columnType ?? f.type),
    unsigned: (flags & UNSIGNED_FLAG) !== 0,
    binaryFlag: (flags & BINARY_FLAG) !== 0,
    decimals: Number(f.decimals),
    characterSet: Number(f.characterSet ?? f.charsetNr),
    columnLength: Number(f.columnLength ?? f.length),
  };
}

/** DECIMAL(p, s) as the column definition tells it: length = p + (s > 0 ? 1 : 0) + (signed ? 1 : 0). */
function decimalPrecision(f: ResultField): number {
  return f.columnLength - (f.decimals > 0 ? 1 : 0) - (f.unsigned ? 0 : 1);
}

/** The part of a signature the decoder depends on, as a comparable string (see the module doc). */
export function decodeShape(f: ResultField): string {
  if (STRING_FAMILY.has(f.type))
    return f.type !== T.JSON && f.characterSet === BINARY_CHARSET ? 'string:binary' : 'string:text';
  if (INTEGERS.has(f.type)) return `${f.type}:${f.unsigned ? 'unsigned' : 'signed'}`;
  if (DECIMALS.has(f.type)) {
    const p = decimalPrecision(f);
    return p <= MAX_DECIMAL_PRECISION ? `decimal(${p},${f.decimals})` : 'decimal:text';
  }
  return String(f.type);
}

/** A type code by name (`LONGLONG`), as mysql2 names it. */
export function typeName(code: number): string {
  const name = (mysql.Types as unknown as Record<number, string | undefined>)[code];
  return typeof name === 'string' ? name : `type ${code}`;
}

/** What SQL types a signature most likely is, for the hint in messages. */
function sqlGuess(f: ResultField): string {
  const u = f.unsigned && INTEGERS.has(f.type) ? ' UNSIGNED' : '';
  const bin = f.characterSet === BINARY_CHARSET;
  switch (f.type) {
    case T.TINY:
      return `TINYINT${u}`;
    case T.SHORT:
      return `SMALLINT${u}`;
    case T.INT24:
      return `MEDIUMINT${u}`;
    case T.LONG:
      return `INT${u}`;
    case T.LONGLONG:
      return `BIGINT${u}`;
    case T.YEAR:
      return 'YEAR';
    case T.DECIMAL:
    case T.NEWDECIMAL:
      return `DECIMAL(${decimalPrecision(f)},${f.decimals})`;
    case T.FLOAT:
    case T.DOUBLE:
      return 'DOUBLE';
    case T.VARCHAR:
    case T.VAR_STRING:
      return bin ? 'VARBINARY' : 'VARCHAR';
    case T.STRING:
      return bin ? 'BINARY' : 'CHAR';
    case T.TINY_BLOB:
    case T.MEDIUM_BLOB:
    case T.LONG_BLOB:
    case T.BLOB:
      return bin ? 'BLOB' : 'TEXT';
    case T.DATE:
    case T.NEWDATE:
      return 'DATE';
    case T.DATETIME:
      return 'DATETIME';
    case T.TIMESTAMP:
      return 'TIMESTAMP';
    case T.TIME:
      return 'TIME';
    case T.BIT:
      return 'BIT';
    case T.GEOMETRY:
      return 'a spatial type';
    default:
      return typeName(f.type);
  }
}

/** A signature in words: `LONGLONG`, `LONG UNSIGNED`, `VAR_STRING (binary)`, `NEWDECIMAL(12,2)`. */
export function describeField(f: ResultField): string {
  if (DECIMALS.has(f.type)) return `${typeName(f.type)}(${decimalPrecision(f)},${f.decimals})`;
  const u = f.unsigned && INTEGERS.has(f.type) ? ' UNSIGNED' : '';
  const bin = STRING_FAMILY.has(f.type) && f.characterSet === BINARY_CHARSET ? ' (binary)' : '';
  return `${typeName(f.type)}${u}${bin}`;
}

/** A page statement whose result set no longer matches the introspected columns. */
export class ResultSetChanged extends Error {
  override name = 'ResultSetChanged';
  constructor(
    /** The first column that differs. */
    readonly column: string,
    /** One line naming the column and the old and new types. */
    readonly detail: string,
  ) {
    super(detail);
  }
}

/** A selected column with the signature introspection recorded (undefined: not recorded). */
export interface SelectedColumn {
  readonly name: string;
  readonly result?: ResultField;
}

/**
 * Compares a statement's fields with the introspected signatures of the columns it selects (in
 * select order) and throws `ResultSetChanged` at the first difference the decoder depends on.
 */
export function checkResultFields(selected: readonly SelectedColumn[], fields: readonly FieldPacket[]): void {
  if (fields.length !== selected.length) {
    throw new ResultSetChanged(
      selected[Math.min(fields.length, selected.length - 1)]?.name ?? '',
      `the result set now has ${fields.length} columns where the page selects ${selected.length}`,
    );
  }
  for (let i = 0; i < selected.length; i++) {
    const was = selected[i]!.result;
    if (was === undefined) continue;
    const now = resultFieldOf(fields[i]!);
    if (decodeShape(now) === decodeShape(was)) continue;
    const name = selected[i]!.name;
    const guess = `${sqlGuess(was)} -> ${sqlGuess(now)}?`;
    throw new ResultSetChanged(
      name,
      `column "${name}": the result set now says ${describeField(now)} where introspection saw ${describeField(was)} (${guess})`,
    );
  }
}
