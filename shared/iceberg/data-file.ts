/**
 * A Parquet data file's Iceberg metrics, read from its footer: record count, file size, split
 * offsets (row-group starts), and per field id the column sizes, value counts, null counts and
 * lower/upper bounds in Iceberg's single-value serialization (spec Appendix D, ./single-value.ts),
 * what a manifest entry's `data_file` carries so readers can skip files by predicate.
 *
 * Owns: the walk from Parquet leaf columns to Iceberg field ids (the schema elements' `field_id`,
 * which the lake writes from the Arrow fields' `PARQUET:field_id`), the decode of Parquet
 * statistics into values of the field's Iceberg type, and the truncation of string and binary
 * bounds (Iceberg's default metrics mode `truncate(16)`).
 *
 * Invariants, each a bound a reader may prune by, so never a wrong one:
 * - bounds only from the statistics' `min_value`/`max_value` under the file's type-defined column
 *   order (never the deprecated signed `min`/`max`), only where every row group has them, never
 *   for a NaN, and never for a column inside a list or map (their counts are of levels, not
 *   values, so value and null counts are left out there too);
 * - a truncated lower bound is a prefix (smaller or equal); a truncated upper bound is a prefix
 *   whose last character (byte, for binary) is incremented, and is left out when none can be;
 *   a bound the Parquet writer marked inexact is kept for strings (while it is valid UTF-8) and
 *   binary only, where the Parquet spec makes it a bound still;
 * - no uuid bounds (readers disagree on uuid order: Java compares signed halves), no NaN counts
 *   (Parquet statistics do not count NaNs; absent means unknown, which readers handle).
 * Pure: reads the footer of the bytes it is given.
 */
import { decodeStruct, type ThriftStruct } from '../sink/parquet-pages.cjs';
import type { AvroValue } from './avro-schema.js';
import type { IcebergDataFile } from './manifest.js';
import {
  compareValues,
  type PrimitiveType,
  primitiveOf,
  type SingleValue,
  serializeValue,
} from './single-value.js';
import type { IcebergField, IcebergSchema, IcebergType } from './spec.js';

/** Iceberg's default `write.metadata.metrics.default`: truncate(16). */
export const DEFAULT_TRUNCATE_LENGTH = 16;

/** The metrics of one data file, keyed by Iceberg field id. */
export interface DataFileMetrics {
  readonly record_count: number;
  readonly file_size_in_bytes: number;
  readonly column_sizes: ReadonlyMap<number, number>;
  readonly value_counts: ReadonlyMap<number, number>;
  readonly null_value_counts: ReadonlyMap<number, number>;
  readonly lower_bounds: ReadonlyMap<number, Uint8Array>;
  readonly upper_bounds: ReadonlyMap<number, Uint8Array>;
  readonly split_offsets: readonly number[];
}

/** Which bound of a column: the smallest value or the largest. */
type Side = 'lower' | 'upper';

export interface MetricsOptions {
  /** Characters (string) or bytes (binary) a bound keeps; default 16, as Iceberg's default. */
  readonly truncateLength?: number;
}

// parquet.thrift field ids and enum values this module reads.
const FILE_SCHEMA = 2;
const FILE_NUM_ROWS = 3;
const FILE_ROW_GROUPS = 4;
const FILE_COLUMN_ORDERS = 7;
const SE_TYPE = 1;
const SE_TYPE_LENGTH = 2;
const SE_REPETITION = 3;
const SE_NUM_CHILDREN = 5;
const SE_CONVERTED_TYPE = 6;
const SE_SCALE = 7;
const SE_FIELD_ID = 9;
const SE_LOGICAL_TYPE = 10;
const RG_COLUMNS = 1;
const RG_NUM_ROWS = 3;
const RG_FILE_OFFSET = 5;
const CC_META = 3;
const CM_NUM_VALUES = 5;
const CM_TOTAL_COMPRESSED = 7;
const CM_DATA_PAGE_OFFSET = 9;
const CM_DICTIONARY_PAGE_OFFSET = 11;
const CM_STATISTICS = 12;
const ST_NULL_COUNT = 3;
const ST_MAX_VALUE = 5;
const ST_MIN_VALUE = 6;
const ST_IS_MAX_EXACT = 7;
const ST_IS_MIN_EXACT = 8;
const CO_TYPE_ORDER = 1;
const REPEATED = 2;
const PHYSICAL = { BOOLEAN: 0, INT32: 1, INT64: 2, INT96: 3, FLOAT: 4, DOUBLE: 5, BYTE_ARRAY: 6, FLBA: 7 };
// LogicalType union members and their fields.
const LT_DECIMAL = 5;
const LT_TIME = 7;
const LT_TIMESTAMP = 8;
const LT_INTEGER = 10;
const LT_DECIMAL_SCALE = 1;
const LT_TIME_UNIT = 2;
const LT_INT_SIGNED = 2;
const UNIT = { MILLIS: 1, MICROS: 2, NANOS: 3 };
// ConvertedType values.
const CT = {
  DECIMAL: 5,
  TIME_MILLIS: 7,
  TIME_MICROS: 8,
  TS_MILLIS: 9,
  TS_MICROS: 10,
  UINT_8: 11,
  UINT_64: 14,
};

const field = (s: ThriftStruct, id: number) => s.fields.find((f) => f.id === id)?.value;
const num = (s: ThriftStruct, id: number): number | undefined => {
  const v = field(s, id);
  return v === undefined ? undefined : Number(v);
};
const items = (s: ThriftStruct, id: number): ThriftStruct[] =>
  ((field(s, id) as { items: ThriftStruct[] } | undefined)?.items ?? []) as ThriftStruct[];

/** One Parquet leaf column, as the metrics need it. */
interface Leaf {
  readonly fieldId: number | undefined;
  /** Under a repeated group (a list or map): counts are of levels, bounds are not kept. */
  readonly repeated: boolean;
  readonly physical: number;
  readonly typeLength: number;
  /** How the Parquet stats encode a value (the Parquet logical type, reduced). */
  readonly encoding: StatEncoding;
}

type StatEncoding =
  | { readonly kind: 'plain'; readonly unsigned: boolean }
  | { readonly kind: 'decimal'; readonly scale: number }
  | { readonly kind: 'time'; readonly unit: number };

function encodingOf(e: ThriftStruct): StatEncoding {
  const logical = field(e, SE_LOGICAL_TYPE) as ThriftStruct | undefined;
  const member = logical?.fields[0];
  const converted = num(e, SE_CONVERTED_TYPE);
  if (member?.id === LT_DECIMAL)
    return { kind: 'decimal', scale: num(member.value as ThriftStruct, LT_DECIMAL_SCALE) ?? 0 };
  if (member === undefined && converted === CT.DECIMAL)
    return { kind: 'decimal', scale: num(e, SE_SCALE) ?? 0 };
  if (member?.id === LT_TIMESTAMP || member?.id === LT_TIME) {
    const unit = (field(member.value as ThriftStruct, LT_TIME_UNIT) as ThriftStruct | undefined)?.fields[0]
      ?.id;
    return { kind: 'time', unit: unit ?? 0 };
  }
  if (member === undefined && (converted === CT.TS_MILLIS || converted === CT.TIME_MILLIS))
    return { kind: 'time', unit: UNIT.MILLIS };
  if (member === undefined && (converted === CT.TS_MICROS || converted === CT.TIME_MICROS))
    return { kind: 'time', unit: UNIT.MICROS };
  if (member?.id === LT_INTEGER)
    return { kind: 'plain', unsigned: field(member.value as ThriftStruct, LT_INT_SIGNED) === false };
  if (member === undefined && converted !== undefined && converted >= CT.UINT_8 && converted <= CT.UINT_64)
    return { kind: 'plain', unsigned: true };
  return { kind: 'plain', unsigned: false };
}

/** The leaves of the schema, in column-chunk order (a depth-first walk of the element list). */
function leavesOf(elements: readonly ThriftStruct[]): Leaf[] {
  const leaves: Leaf[] = [];
  let at = 1; // elements[0] is the root
  const walk = (repeated: boolean) => {
    const e = elements[at++];
    if (!e) throw new Error('the Parquet schema has fewer elements than its groups say');
    const here = repeated || num(e, SE_REPETITION) === REPEATED;
    const children = num(e, SE_NUM_CHILDREN);
    if (children !== undefined && (children > 0 || num(e, SE_TYPE) === undefined)) {
      for (let i = 0; i < children; i++) walk(here);
      return;
    }
    leaves.push({
      fieldId: num(e, SE_FIELD_ID),
      repeated: here,
      physical: num(e, SE_TYPE) ?? -1,
      typeLength: num(e, SE_TYPE_LENGTH) ?? 0,
      encoding: encodingOf(e),
    });
  };
  const rootChildren = elements[0] ? (num(elements[0], SE_NUM_CHILDREN) ?? 0) : 0;
  for (let i = 0; i < rootChildren; i++) walk(false);
  return leaves;
}

/** Field id -> Iceberg type, over the whole schema (struct fields, list elements, map keys and values). */
function typesById(fields: readonly IcebergField[]): Map<number, IcebergType> {
  const out = new Map<number, IcebergType>();
  const visit = (id: number, t: IcebergType) => {
    out.set(id, t);
    if (typeof t === 'string') return;
    if (t.type === 'struct') for (const f of t.fields) visit(f.id, f.type);
    else if (t.type === 'list') visit(t['element-id'], t.element);
    else {
      visit(t['key-id'], t.key);
      visit(t['value-id'], t.value);
    }
  };
  for (const f of fields) visit(f.id, f.type);
  return out;
}

/** The footer (FileMetaData) of a Parquet file. */
function footerOf(file: Uint8Array): ThriftStruct {
  const n = file.length;
  const magic = (at: number) =>
    file[at] === 0x50 && file[at + 1] === 0x41 && file[at + 2] === 0x52 && file[at + 3] === 0x31;
  if (n < 12 || !magic(0) || !magic(n - 4)) throw new Error('not a Parquet file (no PAR1 magic)');
  const length = new DataView(file.buffer, file.byteOffset + n - 8, 4).getUint32(0, true);
  if (length > n - 12) throw new Error('the Parquet footer length is past the file');
  return decodeStruct(file, n - 8 - length).struct;
}

// ---- statistics -> values of the Iceberg type

/** A Parquet statistics value (PLAIN bytes of one value) as a value of Iceberg type `t`, or undefined. */
function statValue(leaf: Leaf, t: PrimitiveType, b: Uint8Array, side: Side): SingleValue | undefined {
  const view = new DataView(b.buffer, b.byteOffset, b.length);
  const enc = leaf.encoding;
  const integer = (): bigint | undefined => {
    if (leaf.physical === PHYSICAL.INT32 && b.length === 4)
      return enc.kind === 'plain' && enc.unsigned
        ? BigInt(view.getUint32(0, true))
        : BigInt(view.getInt32(0, true));
    if (leaf.physical === PHYSICAL.INT64 && b.length === 8)
      return enc.kind === 'plain' && enc.unsigned ? view.getBigUint64(0, true) : view.getBigInt64(0, true);
    return undefined;
  };
  const inRange = (v: bigint | undefined, bits: number) =>
    v !== undefined && v >= -(1n << BigInt(bits - 1)) && v < 1n << BigInt(bits - 1) ? v : undefined;
  switch (t.kind) {
    case 'boolean':
      return leaf.physical === PHYSICAL.BOOLEAN && b.length === 1 ? b[0] !== 0 : undefined;
    case 'int':
    case 'date': {
      if (enc.kind !== 'plain') return undefined;
      const v = inRange(integer(), 32);
      return v === undefined ? undefined : Number(v);
    }
    case 'long':
      return enc.kind === 'plain' ? inRange(integer(), 64) : undefined;
    case 'time':
    case 'timestamp':
    case 'timestamptz': {
      if (enc.kind !== 'time' || (leaf.physical !== PHYSICAL.INT64 && leaf.physical !== PHYSICAL.INT32))
        return undefined;
      const v = integer();
      if (v === undefined) return undefined;
      if (enc.unit === UNIT.MICROS) return v;
      if (enc.unit === UNIT.MILLIS) return inRange(v * 1000n, 64);
      if (enc.unit === UNIT.NANOS) {
        // Micros rounded outward, so the bound still holds.
        const q = v / 1000n;
        const r = v % 1000n;
        if (r === 0n) return q;
        return side === 'lower' ? (v < 0n ? q - 1n : q) : v < 0n ? q : q + 1n;
      }
      return undefined;
    }
    case 'float':
    case 'double': {
      let v: number;
      if (leaf.physical === PHYSICAL.FLOAT && b.length === 4) v = view.getFloat32(0, true);
      else if (leaf.physical === PHYSICAL.DOUBLE && b.length === 8 && t.kind === 'double')
        v = view.getFloat64(0, true);
      else return undefined;
      return Number.isNaN(v) ? undefined : v;
    }
    case 'decimal': {
      if (enc.kind !== 'decimal' || enc.scale !== t.scale) return undefined;
      if (leaf.physical === PHYSICAL.INT32 || leaf.physical === PHYSICAL.INT64) {
        const v =
          leaf.physical === PHYSICAL.INT32 && b.length === 4 ? BigInt(view.getInt32(0, true)) : undefined;
        return (
          v ?? (leaf.physical === PHYSICAL.INT64 && b.length === 8 ? view.getBigInt64(0, true) : undefined)
        );
      }
      if ((leaf.physical === PHYSICAL.FLBA || leaf.physical === PHYSICAL.BYTE_ARRAY) && b.length > 0) {
        let x = 0n;
        for (const byte of b) x = (x << 8n) | BigInt(byte);
        return BigInt.asIntN(8 * b.length, x);
      }
      return undefined;
    }
    case 'string':
      if (leaf.physical !== PHYSICAL.BYTE_ARRAY) return undefined;
      try {
        return new TextDecoder('utf-8', { fatal: true }).decode(b);
      } catch {
        return undefined;
      }
    case 'binary':
      return leaf.physical === PHYSICAL.BYTE_ARRAY || leaf.physical === PHYSICAL.FLBA
        ? new Uint8Array(b)
        : undefined;
    case 'fixed':
      return leaf.physical === PHYSICAL.FLBA && b.length === t.length ? new Uint8Array(b) : undefined;
    case 'uuid':
      return undefined;
  }
}

/** The first `n` code points of `s` (a prefix: a valid lower bound). */
export function truncateStringLower(s: string, n: number): string {
  const cps = [...s];
  return cps.length <= n ? s : cps.slice(0, n).join('');
}

/** The smallest `n`-code-point string at least `s`'s upper bound: its prefix, last code point + 1; undefined when none. */
export function truncateStringUpper(s: string, n: number): string | undefined {
  const cps = [...s];
  if (cps.length <= n) return s;
  for (let k = n - 1; k >= 0; k--) {
    let cp = cps[k]!.codePointAt(0)! + 1;
    if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xe000; // skip the surrogates: not characters
    if (cp <= 0x10ffff) return cps.slice(0, k).join('') + String.fromCodePoint(cp);
  }
  return undefined;
}

/** The first `n` bytes of `b`. */
export function truncateBinaryLower(b: Uint8Array, n: number): Uint8Array {
  return b.length <= n ? b : new Uint8Array(b.subarray(0, n));
}

/** The first `n` bytes of `b` with the last incremented (carrying); undefined when all are 0xff. */
export function truncateBinaryUpper(b: Uint8Array, n: number): Uint8Array | undefined {
  if (b.length <= n) return b;
  for (let k = n - 1; k >= 0; k--) {
    if (b[k]! < 0xff) {
      const out = new Uint8Array(b.subarray(0, k + 1));
      out[k]! += 1;
      return out;
    }
  }
  return undefined;
}

/**
 * A bound of `side` as Iceberg's truncate(n) keeps it: strings and binaries cut to `n`, an upper
 * one rounded up (undefined when it cannot be); other types as they are.
 */
function truncatedBound(t: PrimitiveType, v: SingleValue, side: Side, n: number): SingleValue | undefined {
  if (t.kind === 'string')
    return side === 'lower' ? truncateStringLower(v as string, n) : truncateStringUpper(v as string, n);
  if (t.kind === 'binary')
    return side === 'lower'
      ? truncateBinaryLower(v as Uint8Array, n)
      : truncateBinaryUpper(v as Uint8Array, n);
  return v;
}

/** Whether a row group's chunk statistics hold a min (or max) Iceberg may use. */
function statBytes(
  stats: ThriftStruct | undefined,
  side: Side,
): { bytes: Uint8Array; exact: boolean } | undefined {
  if (!stats) return undefined;
  const bytes = field(stats, side === 'lower' ? ST_MIN_VALUE : ST_MAX_VALUE) as Uint8Array | undefined;
  if (!bytes) return undefined;
  const exact = field(stats, side === 'lower' ? ST_IS_MIN_EXACT : ST_IS_MAX_EXACT);
  return { bytes, exact: exact !== false };
}

/**
 * The metrics of the Parquet file `file` (its whole bytes) for a table of `schema`: leaf columns
 * are matched to fields by their Parquet field id; a column without one, or whose id the schema
 * does not have, gets no metrics.
 */
export function parquetMetrics(
  file: Uint8Array,
  schema: IcebergSchema,
  options: MetricsOptions = {},
): DataFileMetrics {
  const truncate = options.truncateLength ?? DEFAULT_TRUNCATE_LENGTH;
  if (!Number.isInteger(truncate) || truncate < 1)
    throw new RangeError('truncateLength must be a positive integer');
  const meta = footerOf(file);
  const leaves = leavesOf(items(meta, FILE_SCHEMA));
  const types = typesById(schema.fields);
  const typeOrdered = items(meta, FILE_COLUMN_ORDERS).map((o) => o.fields[0]?.id === CO_TYPE_ORDER);
  const groups = items(meta, FILE_ROW_GROUPS);

  const sizes = new Map<number, number>();
  const values = new Map<number, number>();
  const nulls = new Map<number, number>();
  const lower = new Map<number, SingleValue>();
  const upper = new Map<number, SingleValue>();
  /** Field ids a row group left without null counts or bounds: none of them is kept. */
  const noNulls = new Set<number>();
  const noLower = new Set<number>();
  const noUpper = new Set<number>();
  const add = (m: Map<number, number>, id: number, v: number) => m.set(id, (m.get(id) ?? 0) + v);
  const splitOffsets: number[] = [];
  let rows = 0;
  // A file of no rows (no row group) still says what it holds: nothing.
  for (const leaf of leaves) {
    if (leaf.fieldId === undefined || !types.has(leaf.fieldId)) continue;
    sizes.set(leaf.fieldId, 0);
    if (leaf.repeated) continue;
    values.set(leaf.fieldId, 0);
    nulls.set(leaf.fieldId, 0);
  }

  for (const group of groups) {
    rows += num(group, RG_NUM_ROWS) ?? 0;
    const chunks = items(group, RG_COLUMNS);
    if (chunks.length !== leaves.length)
      throw new Error(`a Parquet row group has ${chunks.length} columns, the schema ${leaves.length}`);
    const first = chunks[0] ? (field(chunks[0], CC_META) as ThriftStruct | undefined) : undefined;
    // Where the row group starts, as Java's reader computes it: its first column's first page.
    const start =
      (first ? num(first, CM_DICTIONARY_PAGE_OFFSET) || num(first, CM_DATA_PAGE_OFFSET) : undefined) ??
      num(group, RG_FILE_OFFSET);
    if (start !== undefined) splitOffsets.push(start);
    chunks.forEach((chunk, i) => {
      const leaf = leaves[i]!;
      const id = leaf.fieldId;
      const cm = field(chunk, CC_META) as ThriftStruct | undefined;
      if (id === undefined || !types.has(id) || !cm) return;
      add(sizes, id, num(cm, CM_TOTAL_COMPRESSED) ?? 0);
      if (leaf.repeated) return;
      add(values, id, num(cm, CM_NUM_VALUES) ?? 0);
      const stats = field(cm, CM_STATISTICS) as ThriftStruct | undefined;
      const nullCount = stats ? num(stats, ST_NULL_COUNT) : undefined;
      if (nullCount === undefined) noNulls.add(id);
      else add(nulls, id, nullCount);
      const t = primitiveOf(types.get(id)!);
      const rowsHere = num(cm, CM_NUM_VALUES) ?? 0;
      if (!t || !typeOrdered[i]) {
        noLower.add(id);
        noUpper.add(id);
        return;
      }
      // A chunk of nulls only has no min/max and constrains nothing.
      const allNull = nullCount !== undefined && nullCount === rowsHere;
      for (const side of ['lower', 'upper'] as const) {
        if (allNull) continue;
        const skip = side === 'lower' ? noLower : noUpper;
        const s = statBytes(stats, side);
        let v = s ? statValue(leaf, t, s.bytes, side) : undefined;
        // An inexact lower bound is still a lower bound; an inexact upper one only while it decodes.
        if (v !== undefined && s && !s.exact && t.kind !== 'string' && t.kind !== 'binary') v = undefined;
        if (v === undefined) {
          skip.add(id);
          continue;
        }
        const into = side === 'lower' ? lower : upper;
        const have = into.get(id);
        if (
          have === undefined ||
          (side === 'lower' ? compareValues(t, v, have) < 0 : compareValues(t, v, have) > 0)
        )
          into.set(id, v);
      }
    });
  }

  /** The kept bounds of one side: serialized, strings and binaries truncated to `truncate`. */
  const serialized = (found: ReadonlyMap<number, SingleValue>, skip: ReadonlySet<number>, side: Side) => {
    const out = new Map<number, Uint8Array>();
    for (const [id, v0] of found) {
      if (skip.has(id)) continue;
      const t = primitiveOf(types.get(id)!)!;
      const v = truncatedBound(t, v0, side, truncate);
      if (v !== undefined) out.set(id, serializeValue(t, v));
    }
    return out;
  };
  const lowerBounds = serialized(lower, noLower, 'lower');
  const upperBounds = serialized(upper, noUpper, 'upper');
  for (const id of noNulls) nulls.delete(id);

  const declared = num(meta, FILE_NUM_ROWS);
  return {
    record_count: declared ?? rows,
    file_size_in_bytes: file.length,
    column_sizes: sizes,
    value_counts: values,
    null_value_counts: nulls,
    lower_bounds: lowerBounds,
    upper_bounds: upperBounds,
    split_offsets: splitOffsets.sort((a, b) => a - b),
  };
}

/**
 * The `data_file` of a Parquet data file: its metrics from the footer, content DATA, format
 * PARQUET, its partition tuple (`options.partition`, Avro form by partition field name; `{}` for
 * an unpartitioned table, the default). `path` is the full URI a reader opens.
 */
export function parquetDataFile(
  path: string,
  file: Uint8Array,
  schema: IcebergSchema,
  options: MetricsOptions & {
    readonly sortOrderId?: number;
    readonly partition?: Readonly<Record<string, AvroValue>>;
  } = {},
): IcebergDataFile {
  const m = parquetMetrics(file, schema, options);
  return {
    content: 0,
    file_path: path,
    file_format: 'PARQUET',
    partition: options.partition ?? {},
    record_count: m.record_count,
    file_size_in_bytes: m.file_size_in_bytes,
    column_sizes: m.column_sizes,
    value_counts: m.value_counts,
    null_value_counts: m.null_value_counts,
    lower_bounds: m.lower_bounds,
    upper_bounds: m.upper_bounds,
    split_offsets: m.split_offsets,
    ...(options.sortOrderId === undefined ? {} : { sort_order_id: options.sortOrderId }),
  };
}
