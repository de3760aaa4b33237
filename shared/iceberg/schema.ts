/**
 * The lake schema as an Iceberg schema (format v2, ./spec.ts): every column's Iceberg type and
 * field id, the ids kept across schema changes, and the ids the Parquet files carry
 * (`lakeFieldIdsOf`, which shared/dataplane/lake.ts writes as `PARQUET:field_id`).
 *
 * Owns: the Iceberg type of each logical kind and metadata column (docs/types.md, its Iceberg
 * column), field-id assignment, and the mapping of a lake schema change onto Iceberg schema
 * evolution (docs/schema-changes.md, its Iceberg column). Invariants:
 * - an id names one column (or list element) for the life of the table: kept by column name
 *   while the column exists; a new column, or a new list element, takes an id above
 *   last-column-id; an id is never given twice, not even to a column of the same name after a
 *   drop (a rename is a drop and an add: a new id).
 * - the Iceberg type of a kind is the type the lake's Parquet already holds for it
 *   (docs/reader-compatibility.md), so every file written before Iceberg reads under it.
 * - a column's type only moves as Iceberg promotes (int -> long, float -> double, decimal
 *   precision up at the same scale); a lake type narrower than the table's keeps the table's,
 *   which reads it as it reads files written before a promotion. Anything else is refused.
 * Never does I/O. The caller (./metadata.ts) gives a changed schema its final `schema-id`.
 */
import { TidemarkError } from '../contracts/errors.js';
import type { LakeFieldId, LakeFieldIds } from '../dataplane/lake.js';
import {
  isMetadataColumn,
  META_COMMIT_TS,
  META_INGEST_TS,
  META_OP,
  META_PHASE,
  META_POS,
  META_SNAPSHOT,
  type METADATA_COLUMNS,
  metadataFields,
} from '../dataplane/metadata.js';
import type { LogicalType, Schema } from '../dataplane/schema.js';
import type { IcebergField, IcebergList, IcebergPrimitive, IcebergSchema, IcebergType } from './spec.js';

/**
 * The Iceberg type of a logical kind that is not a list: what its Parquet already is
 * (docs/types.md). int8 and int16 are written as INT32 with an INT(8)/INT(16) annotation, which
 * Iceberg reads as `int`; a `text` column is Parquet STRING whatever it holds (uuid, json, time,
 * unbounded numeric: their lossless forms), so it is `string`, never `uuid` or `time`. A
 * decimal(1, s) is INT64 in the Parquet (arrow-rs), not the INT32 Iceberg's spec asks a writer
 * for: readers read it by its physical type (docs/types.md, "Iceberg").
 */
export function icebergPrimitiveOf(t: Exclude<LogicalType, { kind: 'list' }>): IcebergPrimitive {
  switch (t.kind) {
    case 'bool':
      return 'boolean';
    case 'int8':
    case 'int16':
    case 'int32':
      return 'int';
    case 'int64':
      return 'long';
    case 'float64':
      return 'double';
    case 'decimal':
      if (!Number.isInteger(t.precision) || t.precision < 1 || t.precision > 38)
        throw new Error(
          `decimal(${t.precision},${t.scale}): precision must be 1..38 (wider decimals are text)`,
        );
      if (!Number.isInteger(t.scale) || t.scale < 0 || t.scale > t.precision)
        throw new Error(`decimal(${t.precision},${t.scale}): scale must be 0..precision`);
      return `decimal(${t.precision}, ${t.scale})`;
    case 'text':
      return 'string';
    case 'binary':
      return 'binary';
    case 'date':
      return 'date';
    case 'timestamp':
      // Microseconds in both: the v2 types (timestamp_ns is v3, which Athena does not read).
      return t.utc ? 'timestamptz' : 'timestamp';
  }
}

/** The Iceberg type of a logical type as text (`long`, `list<decimal(20, 0)>`), for docs and messages. */
export function icebergTypeName(t: LogicalType): string {
  return t.kind === 'list' ? `list<${icebergTypeName(t.element)}>` : icebergPrimitiveOf(t);
}

/** The Iceberg type of each metadata column; required where the lake's field is not nullable. */
export const METADATA_ICEBERG_TYPES: Readonly<Record<(typeof METADATA_COLUMNS)[number], IcebergPrimitive>> = {
  // A dictionary of c/u/d in Arrow, a plain UTF8 column in Parquet.
  [META_OP]: 'string',
  [META_POS]: 'string',
  [META_COMMIT_TS]: 'timestamptz',
  [META_INGEST_TS]: 'timestamptz',
  [META_SNAPSHOT]: 'boolean',
  [META_PHASE]: 'string',
};

/** Each metadata column's `doc` in the Iceberg schema: what a reader sees as its comment. */
const METADATA_DOCS: Readonly<Record<(typeof METADATA_COLUMNS)[number], string>> = {
  [META_OP]: 'the change: c (insert), u (update or incremental read), d (delete)',
  [META_POS]:
    "the row version's position in the source, ordered as text (the latest version of a key has the greatest)",
  [META_COMMIT_TS]: 'commit time of the change at the source (null for snapshot and incremental rows)',
  [META_INGEST_TS]: 'when tidemark read the row',
  [META_SNAPSHOT]: 'true for rows of an initial snapshot',
  [META_PHASE]: 'incremental, snapshot or stream',
};

/** A lake schema's Iceberg schema and the table's last-column-id after it. */
export interface IcebergSchemaOf {
  readonly schema: IcebergSchema;
  /** The highest field id ever given in the table: the metadata's `last-column-id`. */
  readonly lastColumnId: number;
  /** False when the schema is the previous one (same fields, types, ids and identifier ids). */
  readonly changed: boolean;
  /** The previous schema's changes as Iceberg schema updates, in field order; empty for a new table. */
  readonly updates: readonly IcebergSchemaUpdate[];
}

/**
 * One Iceberg schema update a lake change became. `path` is a column name, or `name.element`
 * for a list's element. `keep-wider` changes nothing: the lake type narrowed and the table keeps
 * its type (files with the narrower type read under it as files from before a promotion do; a
 * data file's bounds for the column are still the table type's, e.g. 8-byte `long` bounds of an
 * INT32 column).
 */
export type IcebergSchemaUpdate =
  | { readonly kind: 'add-column'; readonly name: string; readonly id: number; readonly type: IcebergType }
  | { readonly kind: 'drop-column'; readonly name: string; readonly id: number }
  | {
      readonly kind: 'promote';
      readonly path: string;
      readonly from: IcebergPrimitive;
      readonly to: IcebergPrimitive;
    }
  | {
      readonly kind: 'keep-wider';
      readonly path: string;
      readonly type: IcebergPrimitive;
      readonly lake: IcebergPrimitive;
    }
  | { readonly kind: 'make-optional'; readonly path: string }
  | { readonly kind: 'move-columns'; readonly order: readonly string[] }
  | {
      readonly kind: 'identifier-fields';
      readonly from: readonly number[];
      readonly to: readonly number[];
    };

/** The table a schema belongs to and the lake's columns, for messages. */
export interface IcebergSchemaOptions {
  /** The lake table's name, named by a refusal. */
  readonly table?: string;
}

/**
 * A lake column's type change an Iceberg table cannot take: the files already written hold the
 * column's values under its field id in the old type, and Iceberg only promotes int -> long,
 * float -> double and decimal precision up at the same scale. Nothing was changed.
 */
export class IcebergSchemaChangeError extends TidemarkError {
  override name = 'IcebergSchemaChangeError';
  constructor(
    readonly table: string | undefined,
    /** The column, or `column.element` for a list's element. */
    readonly column: string,
    readonly from: string,
    readonly to: string,
    /** The column's source type now, when known. */
    readonly sourceType?: string,
  ) {
    const source = sourceType ? ` (source type ${sourceType})` : '';
    super(
      'ICEBERG_TYPE_CHANGE_REFUSED',
      `${table ? `${table}: ` : ''}column "${column}" changed type from Iceberg ${from} to ${to}${source}, which an Iceberg table cannot take: its files hold the column's values as ${from} under its field id, and Iceberg only promotes int -> long, float -> double and decimal precision up at the same scale. Nothing was written in the new type. To go on: undo the change at the source; or re-sync the table (tidemark reset --delete-objects, then run; a cdc table: a new "target:") so every file has the new type; or exclude the column for one run (accept the drop), then include it again: it comes back as a new column with a new field id, NULL in older rows, its old values readable by time travel (docs/schema-changes.md)`,
    );
  }
}

/**
 * The Iceberg schema of a lake schema. Without `previous`, a new table's: ids 1, 2, ... to the
 * columns in lake order (data columns, then the six metadata columns), then to list elements,
 * as Iceberg assigns a new table's ids; every column required where the lake's is not nullable;
 * `schema-id` 0. With `previous` (the table's current schema and last-column-id), the same as
 * `evolveIcebergSchema`.
 *
 * @throws IcebergSchemaChangeError as `evolveIcebergSchema`.
 */
export function icebergSchemaOf(
  lake: Schema,
  previous?: { readonly schema: IcebergSchema; readonly lastColumnId: number },
  options: IcebergSchemaOptions = {},
): IcebergSchemaOf {
  if (previous) return evolveIcebergSchema(previous.schema, previous.lastColumnId, lake, options);
  return build(lake, undefined, 0, options);
}

/**
 * The schema `current` becomes when the table's lake schema is `lake` now: ids kept by column
 * name; an added column (or a column back after a drop, or a rename's new name) optional with a
 * new id above `lastColumnId`; a column gone dropped (its id is not given again); a column's type
 * promoted where Iceberg promotes it, kept where the lake type is narrower than the table's;
 * required -> optional followed, optional never made required again (older files may hold
 * NULLs); the columns in the lake's order; the identifier fields the key's. `schema-id` is
 * current's + 1 when anything changed (metadata.ts may give another unused one).
 *
 * @throws IcebergSchemaChangeError naming the first column whose type Iceberg cannot change so.
 */
export function evolveIcebergSchema(
  current: IcebergSchema,
  lastColumnId: number,
  lake: Schema,
  options: IcebergSchemaOptions = {},
): IcebergSchemaOf {
  return build(lake, current, lastColumnId, options);
}

/** The shape a column wants in Iceberg: a primitive, or a list of a shape. */
type Want =
  | { readonly kind: 'primitive'; readonly type: IcebergPrimitive }
  | { readonly kind: 'list'; readonly element: Want };

interface WantedColumn {
  readonly name: string;
  readonly want: Want;
  readonly nullable: boolean;
  readonly sourceType?: string;
}

function wantOf(t: LogicalType): Want {
  return t.kind === 'list'
    ? { kind: 'list', element: wantOf(t.element) }
    : { kind: 'primitive', type: icebergPrimitiveOf(t) };
}

/** The lake's columns in lake order: data columns, then the metadata tail (as lake.ts writes them). */
function wantedColumns(lake: Schema): WantedColumn[] {
  return [
    ...lake.columns.map((c) => ({
      name: c.name,
      want: wantOf(c.type),
      nullable: c.nullable,
      sourceType: c.sourceType,
    })),
    ...metadataFields().map((f) => {
      const name = f.name as (typeof METADATA_COLUMNS)[number];
      return {
        name,
        want: { kind: 'primitive', type: METADATA_ICEBERG_TYPES[name] } as Want,
        nullable: f.nullable,
      };
    }),
  ];
}

function build(
  lake: Schema,
  current: IcebergSchema | undefined,
  lastColumnId: number,
  options: IcebergSchemaOptions,
): IcebergSchemaOf {
  const columns = wantedColumns(lake);
  const names = new Set<string>();
  for (const c of columns) {
    if (names.has(c.name)) throw new Error(`column "${c.name}" appears twice in the lake schema`);
    names.add(c.name);
  }
  // A last-column-id below an id in use would give that id again: trust the larger.
  let next = Math.max(lastColumnId, current ? maxFieldId(current.fields) : 0);
  const fresh = () => ++next;
  const before = new Map((current?.fields ?? []).map((f) => [f.name, f]));
  const updates: IcebergSchemaUpdate[] = [];

  // Top-level ids first, then nested ones, as Iceberg numbers a new table's fields.
  const ids = columns.map((c) => before.get(c.name)?.id ?? fresh());
  const fields: IcebergField[] = columns.map((c, i) => {
    const id = ids[i]!;
    const was = before.get(c.name);
    // A metadata column's doc is ours; a data column keeps one someone gave it (Spark's COMMENT).
    const doc = isMetadataColumn(c.name)
      ? METADATA_DOCS[c.name as (typeof METADATA_COLUMNS)[number]]
      : before.get(c.name)?.doc;
    const docs = doc !== undefined ? { doc } : {};
    if (was === undefined) {
      const type = freshType(c.want, fresh);
      // A column added to an existing table is optional: its older files have no value for it.
      if (current) updates.push({ kind: 'add-column', name: c.name, id, type });
      return { id, name: c.name, required: current === undefined && !c.nullable, type, ...docs };
    }
    const required = was.required && !c.nullable;
    if (was.required && !required) updates.push({ kind: 'make-optional', path: c.name });
    const type = reconcile(c.name, was.type, c.want, fresh, updates, options.table, c.sourceType);
    return { id, name: c.name, required, type, ...docs };
  });

  for (const f of current?.fields ?? [])
    if (!names.has(f.name)) updates.push({ kind: 'drop-column', name: f.name, id: f.id });
  if (current) {
    const keptBefore = current.fields.map((f) => f.name).filter((n) => names.has(n));
    const keptNow = fields.map((f) => f.name).filter((n) => before.has(n));
    if (keptBefore.join('\u0000') !== keptNow.join('\u0000'))
      updates.push({ kind: 'move-columns', order: fields.map((f) => f.name) });
  }

  const identifier = identifierFieldIds(lake.primaryKey, fields);
  const previousIdentifier = current?.['identifier-field-ids'] ?? [];
  if (current && identifier.join(',') !== previousIdentifier.join(','))
    updates.push({ kind: 'identifier-fields', from: previousIdentifier, to: identifier });

  const body = { fields, identifier };
  const changed = current === undefined || !sameSchema(current, body);
  const schemaId = current === undefined ? 0 : changed ? current['schema-id'] + 1 : current['schema-id'];
  const schema: IcebergSchema = {
    type: 'struct',
    'schema-id': schemaId,
    ...(identifier.length > 0 ? { 'identifier-field-ids': identifier } : {}),
    fields,
  };
  return { schema, lastColumnId: next, changed, updates };
}

/** A new column's type: its list elements take new ids (element after element, outside in). */
function freshType(want: Want, fresh: () => number): IcebergType {
  if (want.kind === 'primitive') return want.type;
  const id = fresh();
  return {
    type: 'list',
    'element-id': id,
    element: freshType(want.element, fresh),
    'element-required': false,
  };
}

/** A kept column's type under the lake's wish: the same, promoted, or kept wider; else refused. */
function reconcile(
  path: string,
  was: IcebergType,
  want: Want,
  fresh: () => number,
  updates: IcebergSchemaUpdate[],
  table: string | undefined,
  sourceType: string | undefined,
): IcebergType {
  const refuse = () =>
    new IcebergSchemaChangeError(table, path, typeText(was), typeText(freshType(want, () => 0)), sourceType);
  if (want.kind === 'list') {
    if (typeof was !== 'object' || was.type !== 'list') throw refuse();
    const elementPath = `${path}.element`;
    const element = reconcile(elementPath, was.element, want.element, fresh, updates, table, sourceType);
    if (was['element-required']) updates.push({ kind: 'make-optional', path: elementPath });
    const list: IcebergList = {
      type: 'list',
      'element-id': was['element-id'],
      element,
      'element-required': false,
    };
    return list;
  }
  if (typeof was !== 'string') throw refuse();
  if (samePrimitive(was, want.type)) return was;
  if (promotes(was, want.type)) {
    updates.push({ kind: 'promote', path, from: was, to: want.type });
    return want.type;
  }
  if (promotes(want.type, was)) {
    updates.push({ kind: 'keep-wider', path, type: was, lake: want.type });
    return was;
  }
  throw refuse();
}

/** Whether Iceberg (v2) promotes a column of type `from` to `to`. */
export function promotes(from: IcebergPrimitive, to: IcebergPrimitive): boolean {
  if (from === 'int' && to === 'long') return true;
  if (from === 'float' && to === 'double') return true;
  const a = parseDecimal(from);
  const b = parseDecimal(to);
  return a !== undefined && b !== undefined && a.scale === b.scale && b.precision > a.precision;
}

const DECIMAL = /^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$/;

/** `decimal(P, S)` as numbers; undefined for any other type. Spacing as a reader may write it. */
function parseDecimal(t: string): { precision: number; scale: number } | undefined {
  const m = DECIMAL.exec(t);
  return m ? { precision: Number(m[1]), scale: Number(m[2]) } : undefined;
}

function samePrimitive(a: string, b: string): boolean {
  if (a === b) return true;
  const da = parseDecimal(a);
  const db = parseDecimal(b);
  return da !== undefined && db !== undefined && da.precision === db.precision && da.scale === db.scale;
}

function typeText(t: IcebergType): string {
  if (typeof t === 'string') return t;
  if (t.type === 'list') return `list<${typeText(t.element)}>`;
  if (t.type === 'map') return `map<${typeText(t.key)}, ${typeText(t.value)}>`;
  return `struct<${t.fields.map((f) => `${f.name}: ${typeText(f.type)}`).join(', ')}>`;
}

/**
 * The key's field ids, in key order, when Iceberg takes them as identifier fields: every key
 * column required and of a primitive type other than float/double (the spec's rule). Otherwise
 * none: a partial key would claim rows unique by fewer columns than they are. A MySQL key with a
 * DATE column has none, since zero dates make every DATE column nullable (docs/types.md).
 */
function identifierFieldIds(primaryKey: readonly string[], fields: readonly IcebergField[]): number[] {
  const byName = new Map(fields.map((f) => [f.name, f]));
  const key = primaryKey.map((n) => byName.get(n));
  const usable = key.every(
    (f) => f?.required === true && typeof f.type === 'string' && f.type !== 'float' && f.type !== 'double',
  );
  return usable ? key.map((f) => f!.id) : [];
}

function maxFieldId(fields: readonly IcebergField[]): number {
  let max = 0;
  const visit = (t: IcebergType) => {
    if (typeof t === 'string') return;
    if (t.type === 'list') {
      max = Math.max(max, t['element-id']);
      visit(t.element);
    } else if (t.type === 'map') {
      max = Math.max(max, t['key-id'], t['value-id']);
      visit(t.key);
      visit(t.value);
    } else {
      for (const f of t.fields) {
        max = Math.max(max, f.id);
        visit(f.type);
      }
    }
  };
  for (const f of fields) {
    max = Math.max(max, f.id);
    visit(f.type);
  }
  return max;
}

/** Structural equality of the parts a schema change touches (key order and decimal spacing aside). */
function sameSchema(
  a: IcebergSchema,
  b: { fields: readonly IcebergField[]; identifier: readonly number[] },
): boolean {
  const ids = a['identifier-field-ids'] ?? [];
  if (ids.length !== b.identifier.length || ids.some((id, i) => id !== b.identifier[i])) return false;
  return a.fields.length === b.fields.length && a.fields.every((f, i) => sameField(f, b.fields[i]!));
}

function sameField(a: IcebergField, b: IcebergField): boolean {
  return (
    a.id === b.id &&
    a.name === b.name &&
    a.required === b.required &&
    a.doc === b.doc &&
    sameType(a.type, b.type)
  );
}

function sameType(a: IcebergType, b: IcebergType): boolean {
  if (typeof a === 'string' || typeof b === 'string')
    return typeof a === 'string' && typeof b === 'string' && samePrimitive(a, b);
  if (a.type === 'list' && b.type === 'list')
    return (
      a['element-id'] === b['element-id'] &&
      a['element-required'] === b['element-required'] &&
      sameType(a.element, b.element)
    );
  // tidemark writes no maps or structs; a schema holding one is not one this module made.
  return false;
}

/**
 * The Parquet field ids of a table's lake columns, from its Iceberg schema, for
 * shared/dataplane/lake.ts (`lakeSchema(schema, ids)`, `toLakeRecordWithIds`): each column's id
 * and, for a list, its element's (`element-id`).
 */
export function lakeFieldIdsOf(schema: IcebergSchema): LakeFieldIds {
  const idOf = (id: number, t: IcebergType): LakeFieldId => {
    if (typeof t === 'object' && t.type === 'list') return { id, element: idOf(t['element-id'], t.element) };
    return { id };
  };
  return new Map(schema.fields.map((f) => [f.name, idOf(f.id, f.type)]));
}
