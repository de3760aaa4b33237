/**
 * Postgres introspection: resolves a spec table through pg_catalog into its canonical schema
 * (columns in attnum order, primary key in key order) and the read plan of every column, and
 * validates a cursor column for keyset paging.
 *
 * Owns: the catalog queries and every refusal a table or cursor can earn before a page is read
 * (unknown table, no SELECT privilege, missing or unorderable cursor, no usable keyset), each a
 * one-line SourceError naming `schema.table` and the fix. Must never read table rows except to
 * count NULL cursors, and never guess a type: the mapping lives in types.ts.
 *
 * Also owns the per-page catalog check (`checkColumnsUnchanged`): the columns a page read must
 * still have the types they were introspected with, else the page is refused with a
 * SchemaChangedError (issue 9).
 */
import { SourceError } from '../../contracts/errors.js';
import type { TableRef, TableSpec, Warning } from '../../contracts/source.js';
import type { Column, Schema } from '../../dataplane/schema.js';
import { describeType } from '../../dataplane/schema.js';
import { compareSchemas, SchemaChangedError } from '../../dataplane/schema-rules.js';
import { isKeyType } from '../../position/key-codec.js';
import {
  cursorMissing,
  type Keyset,
  keyMissing,
  notIndexed,
  type ResolvedTable,
  tieBreakers,
} from '../keyset.js';
import { exclusions, similarNames, splitQualified } from '../page.js';
import type { TimeBoundType } from './bound.js';
import type { Sql } from './connect.js';
import { OID, type PostgresType, quoteIdent, quoteLiteral, type ReadPlan, readPlan } from './types.js';

/** The oldest server release we support (docs/decisions/0005-supported-server-versions.md). */
export const MIN_SERVER_VERSION_NUM = 130000;

/** One column as the driver reads it. */
export interface ColumnInfo {
  readonly name: string;
  readonly attnum: number;
  readonly notNull: boolean;
  /** `format_type(type, typmod)`, e.g. `numeric(12,2)`, for docs and messages. */
  readonly sourceType: string;
  /** The type name a keyset literal is cast to: the column's type without typmod (no rounding). */
  readonly castType: string;
  /** The base type OID (domains resolved). */
  readonly baseOid: number;
  /** pg_attribute.atttypid as declared (a domain's own OID): what the page check compares. */
  readonly attTypeOid: number;
  /** pg_attribute.atttypmod. */
  readonly attTypmod: number;
  /** pg_attribute.attndims. */
  readonly attNdims: number;
  /** For arrays: the element's base type OID (domains resolved); 0 otherwise. */
  readonly elementOid: number;
  readonly read: ReadPlan;
}

/** A resolved table (../keyset.ts), with the OID the catalog checks use. */
export interface TablePlan extends ResolvedTable<ColumnInfo> {
  /** pg_class.oid as text (OIDs exceed int4). */
  readonly oid: string;
}

/** How pages of one table are keyed (../keyset.ts). */
export type KeysetPlan = Keyset<ColumnInfo, TimeBoundType>;

interface ClassRow {
  oid: string;
  relkind: string;
  can_select: boolean;
  version: number;
}

interface AttributeRow {
  attnum: number;
  attname: string;
  attnotnull: boolean;
  attndims: number;
  type_oid: string;
  typmod: number;
  source_type: string;
  cast_type: string;
}

export interface TypeRow {
  oid: number;
  typname: string;
  typtype: string;
  typcategory: string;
  typelem: number;
  typbasetype: number;
  typtypmod: number;
}

/** Splits `schema.table` at its first dot (spec names are validated to have exactly one). */
export function splitTableName(source: string): { schema: string; table: string } {
  const [schema, table] = splitQualified(source, 'schema.table (e.g. public.orders)');
  return { schema, table };
}

const RELKINDS = "('r','p','v','m','f')";

/** Resolves a spec table into its plan. Throws SourceError for unknown tables and missing privileges. */
export async function introspectTable(sql: Sql, spec: TableSpec): Promise<TablePlan> {
  const { schema: nsp, table: rel } = splitTableName(spec.source);
  const [cls] = await sql.unsafe<ClassRow[]>(
    `SELECT c.oid::text AS oid, c.relkind::text AS relkind, has_table_privilege(c.oid, 'SELECT') AS can_select,
            current_setting('server_version_num')::int AS version
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ${RELKINDS}`,
    [nsp, rel],
  );
  if (!cls) throw await unknownTable(sql, spec.source, nsp, rel);
  if (cls.version < MIN_SERVER_VERSION_NUM) {
    throw new SourceError(
      'SOURCE_VERSION_UNSUPPORTED',
      `${spec.source}: the server runs PostgreSQL ${Math.floor(cls.version / 10000)}; tidemark supports PostgreSQL 13 and later`,
    );
  }
  if (!cls.can_select) {
    const [who] = await sql.unsafe<{ role: string }[]>('SELECT current_user::text AS role');
    throw new SourceError(
      'SOURCE_PRIVILEGE',
      `${spec.source}: role "${who?.role}" may not SELECT from it; run GRANT SELECT ON ${quoteIdent(nsp)}.${quoteIdent(rel)} TO ${quoteIdent(who?.role ?? '')};`,
    );
  }
  const attrs = await sql.unsafe<AttributeRow[]>(
    `SELECT a.attnum::int AS attnum, a.attname::text AS attname, a.attnotnull, a.attndims::int AS attndims,
            a.atttypid::text AS type_oid, a.atttypmod::int AS typmod,
            format_type(a.atttypid, a.atttypmod) AS source_type, format_type(a.atttypid, -1) AS cast_type
     FROM pg_attribute a
     WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
     ORDER BY a.attnum`,
    [cls.oid],
  );
  const types = await resolveTypes(
    sql,
    attrs.map((a) => Number(a.type_oid)),
  );
  const columns: ColumnInfo[] = attrs.map((a) => {
    const t = baseTypeOf(types, Number(a.type_oid), a.typmod);
    return {
      name: a.attname,
      attnum: a.attnum,
      notNull: a.attnotnull,
      sourceType: a.source_type,
      castType: a.cast_type,
      baseOid: t.oid,
      attTypeOid: Number(a.type_oid),
      attTypmod: a.typmod,
      attNdims: a.attndims,
      elementOid: t.element?.oid ?? 0,
      read: readPlan(t, a.attname, a.attndims),
    };
  });
  const pkRows = await sql.unsafe<{ attname: string }[]>(
    `SELECT a.attname::text AS attname
     FROM pg_index i
     CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
     JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
     WHERE i.indrelid = $1 AND i.indisprimary
     ORDER BY k.ord`,
    [cls.oid],
  );
  const primaryKey = pkRows.map((r) => r.attname);

  const exclude = exclusions(
    spec.source,
    spec.exclude,
    columns.map((c) => c.name),
    primaryKey,
  );
  const schema: Schema = {
    columns: columns
      .filter((c) => !exclude.has(c.name))
      .map((c) => ({ name: c.name, type: c.read.logical, nullable: !c.notNull, sourceType: c.sourceType })),
    primaryKey,
  };
  const ref: TableRef = { source: spec.source, target: spec.target ?? spec.source, primaryKey };
  return {
    source: spec.source,
    qualified: `${quoteIdent(nsp)}.${quoteIdent(rel)}`,
    oid: cls.oid,
    columns,
    primaryKey,
    schema,
    ref,
  };
}

/** One column's catalog facts as the page check reads them. */
interface CurrentAttributeRow {
  attnum: number;
  attname: string;
  type_oid: string;
  typmod: number;
  attndims: number;
  source_type: string;
}

function toColumn(c: ColumnInfo): Column {
  return { name: c.name, type: c.read.logical, nullable: !c.notNull, sourceType: c.sourceType };
}

/**
 * The per-page catalog check: re-reads (attname, atttypid, atttypmod, attndims) of the columns a
 * page selected, by the table's OID and each column's attnum, and compares them with what
 * introspection recorded. Runs AFTER the page's statement(s) and before the page is returned:
 * an ALTER that committed before a statement is seen here (the statement cannot overlap an
 * ALTER, which takes an ACCESS EXCLUSIVE lock), and one after this check did not touch the page.
 *
 * When something differs, the current columns are mapped as introspection maps them and
 * `compareSchemas` names the changes; a change that keeps both the lake type and the form the
 * values were read in (varchar(10) -> varchar(200)) did not affect the page and passes (the next
 * run's start reports it); anything else throws SchemaChangedError(`table`, changes, 'page').
 * A dropped column is `dropped`, a renamed one (same attnum, new name) `renamed`; a table
 * dropped (or dropped and re-created: a new OID) shows every column dropped. `detail` (e.g. the
 * server's message of the statement that failed) goes into the error. One small query per
 * page; the type lookups only run when something changed.
 */
export async function checkColumnsUnchanged(
  sql: Sql,
  plan: TablePlan,
  selected: readonly ColumnInfo[],
  table: string,
  detail?: string,
  options?: ErrorOptions,
): Promise<void> {
  const rows = await sql.unsafe<CurrentAttributeRow[]>(
    `SELECT a.attnum::int AS attnum, a.attname::text AS attname, a.atttypid::text AS type_oid,
            a.atttypmod::int AS typmod, a.attndims::int AS attndims,
            format_type(a.atttypid, a.atttypmod) AS source_type
     FROM pg_attribute a
     WHERE a.attrelid = $1::oid AND a.attnum = ANY($2::text::int2[]) AND NOT a.attisdropped`,
    [plan.oid, `{${selected.map((c) => c.attnum).join(',')}}`],
  );
  const now = new Map(rows.map((r) => [r.attnum, r]));
  const changed = selected.filter((c) => {
    const r = now.get(c.attnum);
    return (
      r === undefined ||
      r.attname !== c.name ||
      Number(r.type_oid) !== c.attTypeOid ||
      r.typmod !== c.attTypmod ||
      r.attndims !== c.attNdims
    );
  });
  if (changed.length === 0) return;

  const types = await resolveTypes(
    sql,
    changed.flatMap((c) => {
      const r = now.get(c.attnum);
      return r ? [Number(r.type_oid)] : [];
    }),
  );
  const current: Column[] = [];
  const readForms: string[] = [];
  for (const c of selected) {
    const r = now.get(c.attnum);
    if (r === undefined) continue;
    if (!changed.includes(c)) {
      current.push(toColumn(c));
      continue;
    }
    const read = readPlan(baseTypeOf(types, Number(r.type_oid), r.typmod), r.attname, r.attndims);
    // Nullability is not compared here (only types are re-read): the introspected one stays.
    current.push({ name: r.attname, type: read.logical, nullable: !c.notNull, sourceType: r.source_type });
    const form = (p: ReadPlan) => `${p.list ? 'a list of ' : ''}${p.wire}`;
    // A change of lake type is named by compareSchemas; one that keeps it but arrives in another
    // form (json -> jsonb: both text in the lake) is named here.
    const sameLake = describeType(read.logical) === describeType(c.read.logical);
    if (sameLake && (read.wire !== c.read.wire || read.list !== c.read.list)) {
      readForms.push(
        `column "${c.name}" was ${c.sourceType}, read as ${form(c.read)}, and is now ${r.source_type}, read as ${form(read)}`,
      );
    }
  }
  const changes = compareSchemas(
    { columns: selected.map(toColumn), primaryKey: [] },
    { columns: current, primaryKey: [] },
  );
  if (readForms.length === 0 && changes.every((ch) => ch.kind === 'source-type')) return;
  const details = [...(detail ? [detail] : []), ...readForms];
  throw new SchemaChangedError(
    table,
    changes,
    'page',
    details.length > 0 ? details.join('; ') : undefined,
    options,
  );
}

/** Loads pg_type rows for `oids` and everything they refer to (domain bases, array elements). */
export async function resolveTypes(sql: Sql, oids: readonly number[]): Promise<Map<number, TypeRow>> {
  const known = new Map<number, TypeRow>();
  let want = [...new Set(oids)];
  while (want.length > 0) {
    const rows = await sql.unsafe<
      (Omit<TypeRow, 'oid' | 'typelem' | 'typbasetype'> & Record<'oid' | 'typelem' | 'typbasetype', string>)[]
    >(
      `SELECT t.oid::text AS oid, t.typname::text AS typname, t.typtype::text AS typtype,
              t.typcategory::text AS typcategory, t.typelem::text AS typelem,
              t.typbasetype::text AS typbasetype, t.typtypmod::int AS typtypmod
       FROM pg_type t WHERE t.oid = ANY($1::text::oid[])`,
      [`{${want.join(',')}}`],
    );
    for (const raw of rows) {
      const r = {
        ...raw,
        oid: Number(raw.oid),
        typelem: Number(raw.typelem),
        typbasetype: Number(raw.typbasetype),
      };
      known.set(r.oid, r);
    }
    want = [];
    for (const r of rows) {
      for (const ref of [Number(r.typbasetype), Number(r.typelem)])
        if (ref !== 0 && !known.has(ref)) want.push(ref);
    }
    want = [...new Set(want)];
  }
  return known;
}

/** A column type with domains resolved (a domain's typmod wins over an unset column typmod). */
export function baseTypeOf(types: Map<number, TypeRow>, oid: number, typmod: number): PostgresType {
  let t = types.get(oid)!;
  let mod = typmod;
  while (t.typtype === 'd') {
    if (mod < 0) mod = t.typtypmod;
    t = types.get(t.typbasetype)!;
  }
  const element = t.typcategory === 'A' && t.typelem !== 0 ? baseTypeOf(types, t.typelem, mod) : undefined;
  return {
    oid: t.oid,
    name: t.typname,
    typtype: t.typtype,
    category: t.typcategory,
    typmod: mod,
    ...(element ? { element } : {}),
  };
}

/** A "no such table" error listing up to three similar table names the role can see. */
async function unknownTable(sql: Sql, source: string, nsp: string, rel: string): Promise<SourceError> {
  const rows = await sql.unsafe<{ name: string; nsp: string; rel: string }[]>(
    `SELECT n.nspname::text AS nsp, c.relname::text AS rel
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relkind IN ${RELKINDS}
       AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
     LIMIT 5000`,
  );
  const scored = similarNames(
    `${nsp}.${rel}`,
    rows.map((r) => `${r.nsp}.${r.rel}`),
  );
  const hint =
    scored.length > 0
      ? `; did you mean ${scored.join(', ')}?`
      : '; check the schema and table name (names are case-sensitive)';
  return new SourceError(
    'SOURCE_TABLE_MISSING',
    `table ${source} does not exist or is not visible to this role${hint}`,
  );
}

/**
 * Validates `cursorColumn` for keyset paging and returns the keyset: (cursor, primary key...).
 * Refuses a missing, unorderable or non-key-typed cursor, and a table without primary key unless
 * the cursor alone is unique and NOT NULL. Warns (not refuses) when no index leads with the
 * cursor column.
 */
export async function keysetPlan(sql: Sql, plan: TablePlan, cursorColumn: string): Promise<KeysetPlan> {
  const cursor = plan.columns.find((c) => c.name === cursorColumn);
  if (!cursor) throw cursorMissing(plan, cursorColumn, true);
  const refuseType = (c: ColumnInfo, role: string) => {
    if (!isKeyType(c.read.logical)) {
      throw new SourceError(
        'SOURCE_CURSOR_INVALID',
        `${plan.source}: ${role} column "${c.name}" has type ${c.sourceType} (read as ${describeType(c.read.logical)}), which cannot be a keyset column; pick a scalar column`,
      );
    }
  };
  refuseType(cursor, 'cursor');

  let rest: ColumnInfo[];
  if (plan.primaryKey.length > 0) {
    rest = tieBreakers(plan, cursorColumn);
    for (const k of rest) refuseType(k, 'primary-key');
  } else {
    const [u] = await sql.unsafe<{ unique: boolean }[]>(
      `SELECT EXISTS (
         SELECT 1 FROM pg_index i
         WHERE i.indrelid = $1 AND i.indisunique AND i.indisvalid AND i.indpred IS NULL AND i.indexprs IS NULL
           AND i.indnkeyatts = 1 AND i.indkey[0] = $2) AS unique`,
      [plan.oid, cursor.attnum],
    );
    if (!u?.unique || !cursor.notNull) throw keyMissing(plan, cursor);
    rest = [];
  }
  const keys = [cursor, ...rest];

  // Let Postgres judge orderability: ORDER BY and a row comparison need a btree ordering for
  // every key type (json, xml, point... have none). WHERE false reads nothing.
  const keyList = keys.map((k) => quoteIdent(k.name)).join(', ');
  try {
    await sql.unsafe(
      `SELECT 1 FROM ${plan.qualified} WHERE false AND (${keyList}) > (${keyList}) ORDER BY ${keyList} LIMIT 0`,
    );
  } catch (e) {
    throw new SourceError(
      'SOURCE_CURSOR_INVALID',
      `${plan.source}: keyset (${keys.map((k) => `${k.name} ${k.sourceType}`).join(', ')}) cannot be ordered: ${(e as Error).message}; pick a cursor of an orderable type`,
      { cause: e },
    );
  }

  const warnings: Warning[] = [];
  const [ix] = await sql.unsafe<{ indexed: boolean }[]>(
    `SELECT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = $1 AND i.indisvalid AND i.indpred IS NULL AND i.indkey[0] = $2) AS indexed`,
    [plan.oid, cursor.attnum],
  );
  if (!ix?.indexed)
    warnings.push(
      notIndexed(plan, cursorColumn, `CREATE INDEX CONCURRENTLY ON ${plan.qualified} (${keyList});`),
    );

  const bound: KeysetPlan['bound'] =
    cursor.baseOid === OID.timestamptz
      ? { kind: 'time', type: 'timestamptz' }
      : cursor.baseOid === OID.timestamp
        ? { kind: 'time', type: 'timestamp' }
        : cursor.baseOid === OID.date
          ? { kind: 'time', type: 'date' }
          : { kind: 'highWater' };
  return { cursor, keys, types: keys.map((k) => k.read.logical), bound, warnings };
}

/** Counts rows whose cursor is NULL (0 without a query when the column is NOT NULL). */
export async function countNullCursors(sql: Sql, plan: TablePlan, cursorColumn: string): Promise<number> {
  const cursor = plan.columns.find((c) => c.name === cursorColumn);
  if (!cursor) throw cursorMissing(plan, cursorColumn, false);
  if (cursor.notNull) return 0;
  const [row] = await sql.unsafe<{ n: string }[]>(
    `SELECT count(*)::text AS n FROM ${plan.qualified} WHERE ${quoteIdent(cursorColumn)} IS NULL`,
  );
  return Number(row!.n);
}

/** A SQL literal of `text` cast to the column's type. */
export function castLiteral(text: string, c: ColumnInfo): string {
  return `${quoteLiteral(text)}::${c.castType}`;
}
