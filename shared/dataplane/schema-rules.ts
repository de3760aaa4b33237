/**
 * The schema-change rules (docs/schema-changes.md, docs/decisions/0008-schema-changes.md): one
 * comparison of the schema a table last wrote with its current canonical schema, used by the
 * incremental engine at run start, by the drivers' hot-path guards mid-run, and by the CDC
 * readers when a Relation message or a TableMap changes.
 *
 * The rules judge the LAKE type (the logical type, `schema.ts`): that is what readers of the
 * Parquet files can disagree on. The source type is named in every message.
 * - continue (a warning and a metric): an added column, a nullability change, a column order
 *   change, and a source-type change that keeps the lake type (varchar(10) -> varchar(200),
 *   real -> double precision: both read as the same lake type already);
 * - widen (policy `onWiden: stop | continue`, default stop): int8 < int16 < int32 < int64,
 *   decimal(p,s) -> decimal(p2,s) with p2 > p, and lists of those;
 * - stop: a dropped or renamed column, a narrowing, any other type change, a changed primary key.
 *
 * Owns: the classification and its words. Never does I/O; the caller decides what a stop does.
 */
import { TidemarkError } from '../contracts/errors.js';
import { type Column, describeType, type LogicalType, type Schema } from './schema.js';

/** What a table does when a column's lake type widens. */
export type WidenPolicy = 'stop' | 'continue';

/** One difference between the schema last written and the current one. */
export type SchemaChange =
  | { readonly kind: 'added'; readonly column: Column }
  | { readonly kind: 'nullability'; readonly column: string; readonly from: Column; readonly to: Column }
  | { readonly kind: 'reordered'; readonly from: readonly string[]; readonly to: readonly string[] }
  | { readonly kind: 'source-type'; readonly column: string; readonly from: Column; readonly to: Column }
  | { readonly kind: 'widened'; readonly column: string; readonly from: Column; readonly to: Column }
  | { readonly kind: 'dropped'; readonly column: Column }
  | { readonly kind: 'renamed'; readonly from: Column; readonly to: Column }
  | { readonly kind: 'narrowed'; readonly column: string; readonly from: Column; readonly to: Column }
  | { readonly kind: 'type-changed'; readonly column: string; readonly from: Column; readonly to: Column }
  | { readonly kind: 'primary-key'; readonly from: readonly string[]; readonly to: readonly string[] };

export type SchemaChangeKind = SchemaChange['kind'];

/** How each kind is handled: `widen` follows the table's `onWiden`. */
const HANDLING: Record<SchemaChangeKind, 'continue' | 'widen' | 'stop'> = {
  added: 'continue',
  nullability: 'continue',
  reordered: 'continue',
  'source-type': 'continue',
  widened: 'widen',
  dropped: 'stop',
  renamed: 'stop',
  narrowed: 'stop',
  'type-changed': 'stop',
  'primary-key': 'stop',
};

/** The outcome of the rules for one table. */
export interface SchemaVerdict {
  /** `same`: nothing changed; `continue`: record the new schema and go on; `stop`: stop the table. */
  readonly action: 'same' | 'continue' | 'stop';
  readonly changes: readonly SchemaChange[];
  /** The changes that stop the table (empty unless `action` is `stop`). */
  readonly stops: readonly SchemaChange[];
}

/** Compares the schema a table last wrote with its current one, column by column. */
export function compareSchemas(last: Schema, current: Schema): SchemaChange[] {
  const changes: SchemaChange[] = [];
  const now = new Map(current.columns.map((c) => [c.name, c]));
  const before = new Map(last.columns.map((c) => [c.name, c]));
  const dropped = last.columns.filter((c) => !now.has(c.name));
  const added = current.columns.filter((c) => !before.has(c.name));

  // A column gone and a new one at the same position with the same type: a rename.
  const renamedTo = new Map<string, Column>();
  for (const d of dropped) {
    const at = last.columns.indexOf(d);
    const candidate = current.columns[at];
    if (candidate && added.includes(candidate) && sameLogical(d.type, candidate.type)) {
      renamedTo.set(d.name, candidate);
    }
  }
  const renamedNames = new Set([...renamedTo.values()].map((c) => c.name));
  for (const d of dropped) {
    const to = renamedTo.get(d.name);
    changes.push(to ? { kind: 'renamed', from: d, to } : { kind: 'dropped', column: d });
  }
  for (const a of added) if (!renamedNames.has(a.name)) changes.push({ kind: 'added', column: a });

  for (const c of current.columns) {
    const was = before.get(c.name);
    if (!was) continue;
    const type = typeChange(was.type, c.type);
    if (type !== 'same') changes.push({ kind: type, column: c.name, from: was, to: c });
    else if (was.sourceType !== c.sourceType)
      changes.push({ kind: 'source-type', column: c.name, from: was, to: c });
    if (was.nullable !== c.nullable) changes.push({ kind: 'nullability', column: c.name, from: was, to: c });
  }

  const keptBefore = last.columns.map((c) => c.name).filter((n) => now.has(n));
  const keptNow = current.columns.map((c) => c.name).filter((n) => before.has(n));
  if (keptBefore.join('\u0000') !== keptNow.join('\u0000'))
    changes.push({ kind: 'reordered', from: keptBefore, to: keptNow });

  if (last.primaryKey.join('\u0000') !== current.primaryKey.join('\u0000'))
    changes.push({ kind: 'primary-key', from: last.primaryKey, to: current.primaryKey });
  return changes;
}

/** Applies the rules: what the table does about `changes` under its widening policy. */
export function schemaVerdict(changes: readonly SchemaChange[], onWiden: WidenPolicy): SchemaVerdict {
  const stops = changes.filter((c) => {
    const h = HANDLING[c.kind];
    return h === 'stop' || (h === 'widen' && onWiden === 'stop');
  });
  if (stops.length > 0) return { action: 'stop', changes, stops };
  return { action: changes.length === 0 ? 'same' : 'continue', changes, stops: [] };
}

/** Compare and apply in one call. */
export function judgeSchema(last: Schema, current: Schema, onWiden: WidenPolicy): SchemaVerdict {
  return schemaVerdict(compareSchemas(last, current), onWiden);
}

function sameLogical(a: LogicalType, b: LogicalType): boolean {
  return typeChange(a, b) === 'same';
}

const INT_RANK: Partial<Record<LogicalType['kind'], number>> = { int8: 1, int16: 2, int32: 3, int64: 4 };

/** How a column's lake type moved. */
function typeChange(a: LogicalType, b: LogicalType): 'same' | 'widened' | 'narrowed' | 'type-changed' {
  const ra = INT_RANK[a.kind];
  const rb = INT_RANK[b.kind];
  if (ra !== undefined && rb !== undefined) return ra === rb ? 'same' : ra < rb ? 'widened' : 'narrowed';
  if (a.kind !== b.kind) return 'type-changed';
  switch (a.kind) {
    case 'decimal': {
      const d = b as typeof a;
      if (a.scale !== d.scale) return 'type-changed';
      return a.precision === d.precision ? 'same' : a.precision < d.precision ? 'widened' : 'narrowed';
    }
    case 'timestamp':
      return a.utc === (b as typeof a).utc ? 'same' : 'type-changed';
    case 'list':
      return typeChange(a.element, (b as typeof a).element);
    default:
      return 'same';
  }
}

function typeText(c: Column): string {
  return `${c.sourceType} (lake ${describeType(c.type)})`;
}

/** One line per change, naming the column and the old and new types. */
export function describeChange(c: SchemaChange): string {
  switch (c.kind) {
    case 'added':
      return `column "${c.column.name}" ${c.column.sourceType} was added`;
    case 'nullability':
      return `column "${c.column}" is now ${c.to.nullable ? 'nullable' : 'NOT NULL'}`;
    case 'reordered':
      return `columns were reordered (${c.from.join(', ')} -> ${c.to.join(', ')})`;
    case 'source-type':
      return `column "${c.column}" changed from ${c.from.sourceType} to ${c.to.sourceType}; its lake type ${describeType(c.to.type)} stays`;
    case 'widened':
      return `column "${c.column}" widened from ${typeText(c.from)} to ${typeText(c.to)}`;
    case 'dropped':
      return `column "${c.column.name}" ${c.column.sourceType} is gone (dropped, or left out by exclude:)`;
    case 'renamed':
      return `column "${c.from.name}" is gone and "${c.to.name}" ${c.to.sourceType} appeared in its place (a rename?)`;
    case 'narrowed':
      return `column "${c.column}" narrowed from ${typeText(c.from)} to ${typeText(c.to)}`;
    case 'type-changed':
      return `column "${c.column}" changed type from ${typeText(c.from)} to ${typeText(c.to)}`;
    case 'primary-key':
      return `the primary key changed from (${c.from.join(', ') || 'none'}) to (${c.to.join(', ') || 'none'})`;
  }
}

/** What readers should know about a change that continues, for the warning line. */
export function changeAdvice(c: SchemaChange): string | undefined {
  if (c.kind === 'added') {
    return `rows already in the lake have no value for "${c.column.name}": readers see NULL there (even if the column has a DEFAULT) until the table is re-synced (tidemark reset --delete-objects, then run); read the files with union_by_name = true`;
  }
  if (c.kind === 'widened') {
    return `older objects keep ${describeType(c.from.type)}: DuckDB (union_by_name) and Athena/Trino read both, Spark fails on mixed types in one table (docs/schema-changes.md)`;
  }
  return undefined;
}

/** A SchemaChangedError's options: the table's mode decides which ways on its message offers. */
export interface SchemaChangedOptions extends ErrorOptions {
  /** Default: `cdc` for a change found in the change stream, `incremental` otherwise. */
  readonly mode?: 'incremental' | 'cdc';
}

/**
 * A table's schema changed in a way its rules stop on, found at run start, between two pages
 * of a run, or in the change stream. Nothing of the changed read reached the lake; the position
 * stays where it was. The message offers only the ways on that work for the table's mode: a cdc
 * table is never reset (`tidemark reset` refuses it), so it is offered `schema accept` under the
 * CDC task's stopped lease, undoing the change, or a new `target:`.
 */
export class SchemaChangedError extends TidemarkError {
  override name = 'SchemaChangedError';
  readonly mode: 'incremental' | 'cdc';
  constructor(
    readonly table: string,
    readonly changes: readonly SchemaChange[],
    readonly where: 'start' | 'page' | 'stream',
    detail?: string,
    options?: SchemaChangedOptions,
  ) {
    const mode = options?.mode ?? (where === 'stream' ? 'cdc' : 'incremental');
    const what = changes.map(describeChange).join('; ');
    const when =
      where === 'start'
        ? 'since it last wrote'
        : where === 'page'
          ? 'during this run (between its pages); nothing of the changed page reached the lake'
          : 'in the change stream';
    const widen = changes.some((c) => c.kind === 'widened')
      ? ', or set onWiden: continue on the table for widenings (docs/schema-changes.md)'
      : '';
    const waysOn =
      mode === 'cdc'
        ? `To go on: tidemark schema accept --table ${table} once its tidemark cdc task has stopped (records the current schema in the source's CDC state; the next tidemark cdc resumes the capture with it, and new objects use it), or undo the change at the source, or give the table a new "target:" (a new lake table, loaded afresh)${widen}`
        : `To go on: tidemark schema accept --table ${table} (records the current schema; new objects use it) or tidemark reset --table ${table} (resync)${widen}`;
    super(
      'SCHEMA_CHANGED',
      `${table}: the schema changed ${when}: ${what || detail || 'the columns no longer match what was introspected'}${detail && what ? ` (${detail})` : ''}. ${waysOn}`,
      options,
    );
    this.mode = mode;
  }
}

/** The schema a table wrote, as its state and every object's footer keep it. */
export interface StoredSchema {
  /** 1 for the first recorded schema, +1 at every recorded change. */
  readonly version: number;
  /** `schemaHash` of the schema below. */
  readonly hash: string;
  readonly columns: readonly Column[];
  readonly primaryKey: readonly string[];
}

/** The schema with a version, ready to store. */
export function storedSchema(schema: Schema, version: number): StoredSchema {
  return {
    version,
    hash: schemaHash(schema),
    columns: schema.columns.map((c) => ({
      name: c.name,
      type: c.type,
      nullable: c.nullable,
      sourceType: c.sourceType,
    })),
    primaryKey: [...schema.primaryKey],
  };
}

/** Validates a stored schema; anything malformed is undefined (the caller records a new one). */
export function parseStoredSchema(v: unknown): StoredSchema | undefined {
  const s = v as Partial<StoredSchema> | undefined;
  if (
    typeof s !== 'object' ||
    s === null ||
    typeof s.version !== 'number' ||
    typeof s.hash !== 'string' ||
    !Array.isArray(s.columns) ||
    !Array.isArray(s.primaryKey) ||
    !s.columns.every(
      (c) =>
        typeof c === 'object' &&
        c !== null &&
        typeof c.name === 'string' &&
        typeof c.nullable === 'boolean' &&
        typeof c.sourceType === 'string' &&
        isLogicalType(c.type),
    )
  ) {
    return undefined;
  }
  return s as StoredSchema;
}

function isLogicalType(t: unknown): t is LogicalType {
  const x = t as { kind?: unknown; precision?: unknown; scale?: unknown; utc?: unknown; element?: unknown };
  if (typeof x !== 'object' || x === null || typeof x.kind !== 'string') return false;
  switch (x.kind) {
    case 'decimal':
      return typeof x.precision === 'number' && typeof x.scale === 'number';
    case 'timestamp':
      return typeof x.utc === 'boolean';
    case 'list':
      return isLogicalType(x.element);
    default:
      return ['bool', 'int8', 'int16', 'int32', 'int64', 'float64', 'text', 'binary', 'date'].includes(
        x.kind,
      );
  }
}

/**
 * The canonical text a schema is hashed from: what the lake's files carry, in order (each
 * column's name, lake type and nullability, and the primary key). The source type is left out:
 * it names the column for messages, and its spelling depends on where it was read, not on the
 * table. A catalog says `int(11)` (MariaDB), `json`, `float(7,3)` where a MySQL binlog TableMap
 * says `int`, `longtext`, `float`, for the very same column; a CDC state keeps only this hash,
 * so a schema recorded from the log must hash like the same table introspected at the next
 * start. A change of the source type alone keeps the lake type (the rules let it continue), so
 * the hash has nothing to tell about it.
 */
function canonicalText(schema: Schema): string {
  return JSON.stringify([
    schema.columns.map((c) => [c.name, describeType(c.type), c.nullable]),
    schema.primaryKey,
  ]);
}

/**
 * A short, stable fingerprint of a schema (64-bit FNV-1a over its canonical text, 16 hex
 * digits): equal schemas hash equal; used to tell "changed" cheaply, never to prove "same".
 * Schemas that differ only in their columns' source types hash equal (see `canonicalText`).
 */
export function schemaHash(schema: Schema): string {
  return fnv1a64(canonicalText(schema));
}

/**
 * The hash states written before the source type was left out of `schemaHash` carry (the
 * source types hashed too). A CDC start accepts a stored hash equal to this one as unchanged,
 * and the next commit records `schemaHash`: an upgrade does not stop every captured table.
 */
export function schemaHashWithSourceTypes(schema: Schema): string {
  return fnv1a64(
    JSON.stringify([
      schema.columns.map((c) => [c.name, describeType(c.type), c.nullable, c.sourceType]),
      schema.primaryKey,
    ]),
  );
}

function fnv1a64(text: string): string {
  let h = 0xcbf29ce484222325n;
  const prime = 0x100000001b3n;
  const mask = 0xffffffffffffffffn;
  for (let i = 0; i < text.length; i++) {
    h ^= BigInt(text.charCodeAt(i));
    h = (h * prime) & mask;
  }
  return h.toString(16).padStart(16, '0');
}
