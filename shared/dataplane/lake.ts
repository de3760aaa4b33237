/**
 * The LAKE schema: the Arrow types a table takes in Parquet, and the cast from a wire record
 * (`wire.ts`) to it. Also the Glue/Athena DDL type of every column and the column-name checks
 * readers need (docs/reader-compatibility.md, docs/decisions/0006-parquet-writer.md).
 *
 * Owns: the wire -> lake cast and the lake -> Glue type mapping. Data columns already travel in
 * lake types (microsecond timestamps, decimal128, DateDay, lists with an `element` child), so the
 * cast only touches the metadata tail:
 * - `__op` uint8 0/1/2 becomes `Dictionary<Uint8, Utf8>` over the SAME index buffer with the
 *   dictionary ['c', 'u', 'd']: zero-copy here, and Parquet stores it as a plain UTF8 string
 *   column (DuckDB reads VARCHAR, Glue `string`), which reads better than a bare number.
 * - `__commit_ts` / `__ingest_ts` nanoseconds become microseconds (floor division, exact for
 *   every int64, pre-1970 included), because NANOS is unreadable in Spark 3.x.
 * Never rounds, never widens or narrows a data column, never renames a column: a wire record
 * whose data columns are not lake-typed is refused, because a silent cast here would make two
 * files of one table disagree on a column's type.
 *
 * Field ids: given a `LakeFieldIds` (an Iceberg table's, from shared/iceberg/schema.ts
 * `lakeFieldIdsOf`) to `lakeSchema` or `toLakeRecordWithIds`, every field of the lake schema, a
 * list's `element` child included, carries its id as `PARQUET:field_id` metadata, which both
 * Parquet writers put in the file's schema (Iceberg reads a file's columns by id, a list's
 * element by its `element-id`). Without ids the schema is what it was before Iceberg: no field
 * carries metadata.
 */
import {
  Schema as ArrowSchema,
  type Data,
  DataType,
  DateUnit,
  Dictionary,
  Field,
  List,
  makeData,
  Precision,
  RecordBatch,
  Struct,
  Timestamp,
  TimeUnit,
  Uint8,
  Utf8,
  type Vector,
  vectorFromArray,
} from 'apache-arrow';
import { DataError } from '../contracts/errors.js';
import { BatchError } from './batch.js';
import {
  META_COMMIT_TS,
  META_INGEST_TS,
  META_OP,
  META_PHASE,
  META_POS,
  META_SNAPSHOT,
  METADATA_COLUMNS,
  metadataFields,
  OP_LETTERS,
} from './metadata.js';
import type { LogicalType, Schema } from './schema.js';
import { wireType } from './wire.js';

/**
 * Dictionary id of `__op` in every lake record. One fixed id and one shared dictionary vector,
 * so the batches of one object serialize to a single IPC dictionary (no replacement dictionaries).
 */
const OP_DICTIONARY_ID = 0;
const OP_DICTIONARY: Vector<Utf8> = vectorFromArray([...OP_LETTERS], new Utf8());
const OP_LAKE_TYPE = new Dictionary(new Utf8(), new Uint8(), OP_DICTIONARY_ID, false);
const TS_LAKE_TYPE = new Timestamp(TimeUnit.MICROSECOND, 'UTC');

/** The Arrow type a logical type is stored as in the lake (equal to its wire type). */
export function lakeType(t: LogicalType): DataType {
  return wireType(t);
}

/** The Arrow fields of the metadata tail in lake types, in wire order. */
export function lakeMetadataFields(): Field[] {
  return metadataFields().map((f) => {
    switch (f.name) {
      case META_OP:
        return new Field(f.name, OP_LAKE_TYPE, f.nullable);
      case META_COMMIT_TS:
      case META_INGEST_TS:
        return new Field(f.name, TS_LAKE_TYPE, f.nullable);
      default:
        return f;
    }
  });
}

/** The Arrow field metadata key both Parquet writers take a field's Parquet field id from. */
export const PARQUET_FIELD_ID = 'PARQUET:field_id';

/** The Parquet field id of a lake column, and of its list element when it is a list. */
export interface LakeFieldId {
  readonly id: number;
  /** The `element` child's id (Iceberg's `element-id`); set exactly when the column is a list. */
  readonly element?: LakeFieldId;
}

/** Field ids of a table's lake columns (data and metadata columns) by column name. */
export type LakeFieldIds = ReadonlyMap<string, LakeFieldId>;

/**
 * `field` with its Parquet field id (and its list element's) as field metadata; `field` itself
 * when `ids` is undefined. A list's new type is returned with it: the column's data must take it
 * too, so the record's data and schema name the same child field.
 *
 * @throws BatchError when `ids` lacks the column or its element (ids built from another schema).
 */
function withFieldId(field: Field, ids: LakeFieldIds | undefined): Field {
  if (ids === undefined) return field;
  const id = ids.get(field.name);
  if (id === undefined) {
    throw new BatchError(
      `column "${field.name}" has no field id; the ids were built from another schema than the record's (build them from the table's Iceberg schema)`,
    );
  }
  return new Field(
    field.name,
    typeWithIds(field.name, field.type, id),
    field.nullable,
    idMetadata(field, id),
  );
}

function typeWithIds(path: string, type: DataType, id: LakeFieldId): DataType {
  if (!DataType.isList(type)) return type;
  const child = type.children[0]!;
  if (id.element === undefined) {
    throw new BatchError(
      `list column "${path}" has no field id for its element; the ids were built from another schema`,
    );
  }
  const elementPath = `${path}.${child.name}`;
  const element = new Field(
    child.name,
    typeWithIds(elementPath, child.type, id.element),
    child.nullable,
    idMetadata(child, id.element),
  );
  return new List(element);
}

/** A list column's data under its type with ids (the same buffers; each level takes its child field). */
function retyped(data: Data, type: DataType): Data {
  if (!DataType.isList(type)) return data;
  const child = retyped(data.children[0]!, type.children[0]!.type);
  return data.clone(type, undefined, undefined, undefined, undefined, [child]);
}

function idMetadata(field: Field, id: LakeFieldId): Map<string, string> {
  return new Map([...field.metadata, [PARQUET_FIELD_ID, String(id.id)]]);
}

/**
 * The table's lake schema: data columns in schema order, then the metadata tail in lake types;
 * with `ids`, each field (list elements included) carries its Parquet field id.
 */
export function lakeSchema(schema: Schema, ids?: LakeFieldIds): ArrowSchema {
  const data = schema.columns.map((c) => new Field(c.name, lakeType(c.type), c.nullable));
  return new ArrowSchema([...data, ...lakeMetadataFields()].map((f) => withFieldId(f, ids)));
}

/**
 * Casts one wire record to the lake schema. Data columns pass through untouched (their buffers
 * are shared, not copied) after a type check; the metadata tail is cast as the module comment
 * says. Cost: one pass over `__op` (validation) and one new int64 buffer per timestamp column.
 *
 * @throws DataError when a data column is not lake-typed or `__op` holds a code other than 0/1/2.
 */
export function toLakeRecord(record: RecordBatch): RecordBatch {
  return castToLake(record, undefined);
}

/**
 * `toLakeRecord` for a table whose files carry field ids (an Iceberg table): every field, list
 * elements included, carries its Parquet field id, the schema `lakeSchema(schema, ids)` gives
 * (the same, byte for byte in IPC). The buffers are shared all the same. A function of its own,
 * not a second parameter, so `records.map(toLakeRecord)` can never pass an index for the ids.
 *
 * @throws DataError as `toLakeRecord`.
 * @throws BatchError when `ids` lacks a column of the record or a list's element.
 */
export function toLakeRecordWithIds(record: RecordBatch, ids: LakeFieldIds): RecordBatch {
  return castToLake(record, ids);
}

function castToLake(record: RecordBatch, ids: LakeFieldIds | undefined): RecordBatch {
  const fields = record.schema.fields;
  const dataCount = fields.length - METADATA_COLUMNS.length;
  const tail = fields.slice(dataCount).map((f) => f.name);
  if (dataCount < 0 || tail.join(',') !== METADATA_COLUMNS.join(',')) {
    throw new DataError(
      `record with columns ${fields.map((f) => f.name).join(', ')} does not end with the metadata columns ${METADATA_COLUMNS.join(', ')}; build it with wireSchema()`,
    );
  }
  const outFields: Field[] = [];
  const children: Data[] = [];
  for (let i = 0; i < fields.length; i++) {
    const field = fields[i]!;
    const data = record.data.children[i]!;
    if (i < dataCount) {
      assertLakeDataType(field.name, field.type);
      const out = withFieldId(field, ids);
      outFields.push(out);
      children.push(out.type === field.type ? data : retyped(data, out.type));
      continue;
    }
    switch (field.name) {
      case META_OP:
        outFields.push(withFieldId(new Field(field.name, OP_LAKE_TYPE, field.nullable), ids));
        children.push(opToLake(data));
        break;
      case META_COMMIT_TS:
      case META_INGEST_TS:
        outFields.push(withFieldId(new Field(field.name, TS_LAKE_TYPE, field.nullable), ids));
        children.push(timestampToMicros(field.name, data));
        break;
      case META_POS:
      case META_SNAPSHOT:
      case META_PHASE:
        outFields.push(withFieldId(field, ids));
        children.push(data);
        break;
    }
  }
  const schema = new ArrowSchema(outFields);
  return new RecordBatch(
    schema,
    makeData({ type: new Struct(outFields), length: record.numRows, nullCount: 0, children }),
  );
}

function opToLake(data: Data): Data {
  if (!DataType.isInt(data.type) || data.type.bitWidth !== 8 || data.type.isSigned) {
    throw new DataError(`${META_OP} must be uint8 on the wire, got ${String(data.type)}`);
  }
  const codes = data.values as Uint8Array;
  for (let i = 0; i < data.length; i++) {
    // Null slots may hold anything; the wire field is non-nullable, but stay correct if not.
    if (codes[i]! > 2 && data.getValid(i)) {
      throw new DataError(`${META_OP} holds code ${codes[i]} at row ${i}; only 0 (c), 1 (u) and 2 (d) exist`);
    }
  }
  return makeData({
    type: OP_LAKE_TYPE,
    offset: data.offset,
    length: data.length,
    nullCount: data.nullCount,
    nullBitmap: data.nullBitmap,
    data: codes,
    dictionary: OP_DICTIONARY,
  });
}

/**
 * Floor-divides int64 nanoseconds by 1000 (BigInt `/` truncates toward zero, so negative
 * non-multiples step down once). Measured on 1M values: ~30 ms, no slower than a hi/lo int32
 * split in doubles, so the plain form stays.
 */
export function nanosToMicrosFloor(nanos: BigInt64Array): BigInt64Array {
  const n = nanos.length;
  const out = new BigInt64Array(n);
  for (let i = 0; i < n; i++) {
    const v = nanos[i]!;
    const q = v / 1000n;
    out[i] = v < 0n && q * 1000n !== v ? q - 1n : q;
  }
  return out;
}

function timestampToMicros(name: string, data: Data): Data {
  const ts = data.type;
  if (!DataType.isTimestamp(ts)) {
    throw new DataError(`${name} must be a timestamp on the wire, got ${String(ts)}`);
  }
  if (ts.timezone !== 'UTC') {
    throw new DataError(`${name} must be a UTC timestamp on the wire, got timezone ${String(ts.timezone)}`);
  }
  const values = data.values as BigInt64Array;
  let micros: BigInt64Array;
  switch (ts.unit) {
    case TimeUnit.NANOSECOND:
      micros = nanosToMicrosFloor(values);
      break;
    case TimeUnit.MICROSECOND:
      micros = values;
      break;
    default:
      throw new DataError(`${name} must be nanoseconds (or microseconds) on the wire, got ${String(ts)}`);
  }
  return makeData({
    type: TS_LAKE_TYPE,
    offset: data.offset,
    length: data.length,
    nullCount: data.nullCount,
    nullBitmap: data.nullBitmap,
    data: micros,
  });
}

/**
 * Checks that a data column's Arrow type is one the lake stores as is: signed ints, float64,
 * decimal128 (p <= 38), utf8, binary, bool, DateDay, Timestamp(us, 'UTC' | none) and lists of
 * those with an `element` child. Unsigned ints would get Parquet unsigned annotations (trino#27274),
 * seconds/nanos timestamps and Date64 are misread or unreadable by some engines.
 *
 * @throws DataError naming the column and what the encoder must produce instead.
 */
export function assertLakeDataType(column: string, type: DataType): void {
  const bad = (why: string) =>
    new DataError(`column "${column}" has Arrow type ${String(type)}; ${why} (docs/reader-compatibility.md)`);
  if (DataType.isBool(type) || DataType.isUtf8(type) || DataType.isBinary(type)) return;
  if (DataType.isInt(type)) {
    if (!type.isSigned) throw bad('unsigned integers must be widened to a signed type or decimal(20,0)');
    return;
  }
  if (DataType.isFloat(type)) {
    if (type.precision !== Precision.DOUBLE) throw bad('floats are stored as float64');
    return;
  }
  if (DataType.isDecimal(type)) {
    if (type.bitWidth !== 128 || type.precision < 1 || type.precision > 38) {
      throw bad('decimals must be decimal128 with precision 1..38');
    }
    return;
  }
  if (DataType.isDate(type)) {
    if (type.unit !== DateUnit.DAY) throw bad('dates must be DateDay (days since 1970)');
    return;
  }
  if (DataType.isTimestamp(type)) {
    if (type.unit !== TimeUnit.MICROSECOND) throw bad('timestamps must be microseconds');
    if (type.timezone !== null && type.timezone !== 'UTC')
      throw bad('timestamps carry timezone "UTC" or none');
    return;
  }
  if (DataType.isList(type)) {
    const child = type.children[0];
    if (child?.name !== 'element') throw bad('list children must be named "element"');
    assertLakeDataType(`${column}.element`, child.type);
    return;
  }
  throw bad('not a lake type');
}

/** The Glue/Athena (Hive DDL) type of a logical type, e.g. `decimal(12,2)`, `array<int>`. */
export function glueType(t: LogicalType): string {
  switch (t.kind) {
    case 'bool':
      return 'boolean';
    case 'int8':
      return 'tinyint';
    case 'int16':
      return 'smallint';
    case 'int32':
      return 'int';
    case 'int64':
      return 'bigint';
    case 'float64':
      return 'double';
    case 'decimal':
      return `decimal(${t.precision},${t.scale})`;
    case 'text':
      return 'string';
    case 'binary':
      return 'binary';
    case 'date':
      return 'date';
    case 'timestamp':
      // Hive DDL has one timestamp type; the UTC flag lives in the Parquet logical type.
      return 'timestamp';
    case 'list':
      return `array<${glueType(t.element)}>`;
  }
}

/** Glue/Athena types of the metadata columns (`__op` is the letter c/u/d). */
export const METADATA_GLUE_TYPES: Readonly<Record<(typeof METADATA_COLUMNS)[number], string>> = {
  [META_OP]: 'string',
  [META_POS]: 'string',
  [META_COMMIT_TS]: 'timestamp',
  [META_INGEST_TS]: 'timestamp',
  [META_SNAPSHOT]: 'boolean',
  [META_PHASE]: 'string',
};

/** One column of a Glue table definition. */
export interface GlueColumn {
  readonly name: string;
  readonly type: string;
}

/** The Glue columns of a table: data columns in schema order, then the metadata columns. */
export function glueColumns(schema: Schema): GlueColumn[] {
  return [
    ...schema.columns.map((c) => ({ name: c.name, type: glueType(c.type) })),
    ...METADATA_COLUMNS.map((name) => ({ name, type: METADATA_GLUE_TYPES[name] })),
  ];
}

/** A finding of `checkLakeColumnNames`. `error` findings make the table unreadable somewhere. */
export interface LakeNameWarning {
  readonly code: 'LAKE_NAME_NOT_SNAKE_CASE' | 'LAKE_NAME_COLLISION';
  readonly severity: 'warning' | 'error';
  readonly column: string;
  readonly message: string;
}

const SNAKE_CASE = /^[a-z_][a-z0-9_]*$/;

/**
 * Checks column names against what lake readers need: Athena and Glue lowercase every name and
 * Spark prefers lowercase, so a name that is not lowercase snake_case is a warning (it reads, but
 * queries must quote or lowercase it), and two names equal up to case (data or metadata columns)
 * are an error: Athena/Glue would see one column twice and fail or read the wrong one.
 * Fix either by renaming the column at the source or excluding it.
 */
export function checkLakeColumnNames(schema: Schema): LakeNameWarning[] {
  const out: LakeNameWarning[] = [];
  const seen = new Map<string, string>();
  for (const name of METADATA_COLUMNS) seen.set(name, name);
  for (const c of schema.columns) {
    if (!SNAKE_CASE.test(c.name)) {
      out.push({
        code: 'LAKE_NAME_NOT_SNAKE_CASE',
        severity: 'warning',
        column: c.name,
        message: `column "${c.name}" is not lowercase snake_case; Athena/Glue will show it as "${c.name.toLowerCase()}" and Spark may need it quoted. Rename it at the source if you can.`,
      });
    }
    const folded = c.name.toLowerCase();
    const other = seen.get(folded);
    if (other !== undefined) {
      out.push({
        code: 'LAKE_NAME_COLLISION',
        severity: 'error',
        column: c.name,
        message: `column "${c.name}" collides with "${other}" once lowercased (Athena/Glue/Spark are case-insensitive); rename one of them at the source or exclude it`,
      });
    } else {
      seen.set(folded, c.name);
    }
  }
  return out;
}
