/**
 * MySQL/MariaDB introspection: resolves a spec table through information_schema into its
 * canonical schema (columns in ORDINAL_POSITION order, primary key in key order) and the read
 * plan of every column, and validates a cursor column for keyset paging.
 *
 * Records, with the plan, how the server describes each column's read expression in a result
 * set (a `LIMIT 0` probe right after information_schema is read): page statements are checked
 * against it (result-fields.ts), and a page that finds its table changed is reported as
 * SCHEMA_CHANGED with the changes information_schema shows then (`schemaChangeOf`).
 *
 * Owns: the catalog queries and every refusal a table or cursor can earn before a page is read
 * (unknown table, no SELECT privilege, missing or unorderable cursor, no usable keyset), each a
 * one-line SourceError naming `database.table` and the fix. Must never read table rows except to
 * count NULL cursors, and never guess a type: the mapping lives in types.ts.
 */
import type { FieldPacket } from 'mysql2';
import { SourceError } from '../../contracts/errors.js';
import type { TableRef, TableSpec, Warning } from '../../contracts/source.js';
import { describeType, type Schema } from '../../dataplane/schema.js';
import { compareSchemas, type SchemaChange, SchemaChangedError } from '../../dataplane/schema-rules.js';
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
import { currentAccount, type MysqlConnection } from './connect.js';
import { type InfoColumn, mapColumn, quoteIdent, type ReadPlan } from './types.js';
import { type ResultField, ResultSetChanged, resultFieldOf } from './wire/result-fields.js';

/** The alias of the table in page statements; read expressions are qualified with it. */
export const TABLE_ALIAS = 'src';

/** One column as the driver reads it. */
export interface ColumnInfo {
  readonly name: string;
  /** NOT NULL at the source (the wire schema may still be nullable: zero dates). */
  readonly notNull: boolean;
  /** COLUMN_TYPE, e.g. `decimal(12,2)`, `int(10) unsigned`, for docs and messages. */
  readonly sourceType: string;
  readonly read: ReadPlan;
  /** Nullable in the canonical schema. */
  readonly nullable: boolean;
  /**
   * How the server describes `read.expr` in a result set, recorded at introspection; page
   * statements are checked against it (result-fields.ts). Undefined when not recorded.
   */
  readonly result?: ResultField;
}

/** One index, its columns in index order. */
export interface IndexInfo {
  readonly name: string;
  readonly unique: boolean;
  /** Column names; null for an expression part (MySQL functional index). */
  readonly columns: readonly (string | null)[];
  /** True when some part indexes only a prefix of its column. */
  readonly prefix: boolean;
}

/** A resolved table (../keyset.ts), with the indexes the keyset planner reads. */
export interface TablePlan extends ResolvedTable<ColumnInfo> {
  readonly indexes: readonly IndexInfo[];
}

/** How pages of one table are keyed (../keyset.ts), and whether zero dates are left out. */
export interface KeysetPlan extends Keyset<ColumnInfo, TimeBoundType> {
  /** The cursor is a DATE/DATETIME/TIMESTAMP: rows whose cursor is a zero date are never read. */
  readonly zeroDates: boolean;
}

/** Splits `database.table` at its first dot. */
export function splitTableName(source: string): { database: string; table: string } {
  const [database, table] = splitQualified(source, 'database.table (e.g. shop.orders)');
  return { database, table };
}

interface ColumnRow {
  name: string;
  dataType: string;
  columnType: string;
  isNullable: string;
  numericPrecision: string | number | null;
  numericScale: string | number | null;
  charset: string | null;
}

interface IndexRow {
  indexName: string;
  nonUnique: string | number;
  columnName: string | null;
  subPart: string | number | null;
}

/** Resolves a spec table into its plan. Throws SourceError for unknown tables and missing privileges. */
export async function introspectTable(db: MysqlConnection, spec: TableSpec): Promise<TablePlan> {
  const { database, table } = splitTableName(spec.source);
  const server = await db.server();
  const found = await db.query<{ type: string }>(
    'SELECT TABLE_TYPE AS type FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?',
    [database, table],
  );
  if (found.length === 0) throw await unknownTable(db, spec.source, database, table);
  const qualified = `${quoteIdent(database)}.${quoteIdent(table)}`;
  await checkSelect(db, spec.source, qualified);

  const catalog = await readCatalog(db, server.flavor, database, table);
  const { indexes, primaryKey } = catalog;
  const exclude = exclusions(
    spec.source,
    spec.exclude,
    catalog.columns.map((c) => c.name),
    primaryKey,
  );
  const columns = await withResultFields(
    db,
    qualified,
    catalog.columns,
    (c) => !exclude.has(c.name) || primaryKey.includes(c.name),
  );
  const schema = schemaOf(columns, exclude, primaryKey);
  const ref: TableRef = { source: spec.source, target: spec.target ?? spec.source, primaryKey };
  return { source: spec.source, qualified, columns, primaryKey, indexes, schema, ref };
}

/** The canonical schema of `columns` without the excluded ones. */
function schemaOf(
  columns: readonly ColumnInfo[],
  exclude: ReadonlySet<string>,
  primaryKey: readonly string[],
): Schema {
  return {
    columns: columns
      .filter((c) => !exclude.has(c.name))
      .map((c) => ({ name: c.name, type: c.read.logical, nullable: c.nullable, sourceType: c.sourceType })),
    primaryKey,
  };
}

/**
 * A table's columns as information_schema describes them now (ORDINAL_POSITION order, mapped by
 * types.ts), without the result-set probe: the binlog reader describes columns a TableMap names
 * for the first time with them.
 */
export async function catalogColumns(db: MysqlConnection, source: string): Promise<ColumnInfo[]> {
  const { database, table } = splitTableName(source);
  return (await readCatalog(db, (await db.server()).flavor, database, table)).columns;
}

/** A table's columns (ORDINAL_POSITION order, mapped by types.ts), indexes and primary key, from information_schema. */
async function readCatalog(
  db: MysqlConnection,
  flavor: 'mariadb' | 'mysql',
  database: string,
  table: string,
): Promise<{ columns: ColumnInfo[]; indexes: IndexInfo[]; primaryKey: string[] }> {
  const rows = await db.query<ColumnRow>(
    `SELECT COLUMN_NAME AS name, LOWER(DATA_TYPE) AS dataType, COLUMN_TYPE AS columnType, IS_NULLABLE AS isNullable,
            NUMERIC_PRECISION AS numericPrecision, NUMERIC_SCALE AS numericScale, CHARACTER_SET_NAME AS charset
     FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`,
    [database, table],
  );
  // MariaDB's JSON is LONGTEXT with a json_valid() check: same mapping, named json in the docs.
  const jsonColumns = new Set<string>();
  if (flavor === 'mariadb' && rows.some((r) => r.dataType === 'longtext')) {
    const checks = await db.query<{ clause: string }>(
      `SELECT CHECK_CLAUSE AS clause FROM information_schema.CHECK_CONSTRAINTS
       WHERE CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ?`,
      [database, table],
    );
    for (const c of checks) {
      const m = /^json_valid\(`((?:[^`]|``)+)`\)$/i.exec(c.clause.trim());
      if (m) jsonColumns.add(m[1]!.replace(/``/g, '`'));
    }
  }
  const columns: ColumnInfo[] = rows.map((r) => {
    const info: InfoColumn = {
      name: r.name,
      dataType: r.dataType,
      columnType: r.columnType,
      nullable: r.isNullable === 'YES',
      numericPrecision: r.numericPrecision === null ? null : Number(r.numericPrecision),
      numericScale: r.numericScale === null ? null : Number(r.numericScale),
      charset: r.charset,
      jsonAlias: jsonColumns.has(r.name),
    };
    const m = mapColumn(info, `${TABLE_ALIAS}.${quoteIdent(r.name)}`);
    return {
      name: r.name,
      notNull: !info.nullable,
      sourceType: m.sourceType,
      read: m.read,
      nullable: m.nullable,
    };
  });

  const indexRows = await db.query<IndexRow>(
    `SELECT INDEX_NAME AS indexName, NON_UNIQUE AS nonUnique, COLUMN_NAME AS columnName, SUB_PART AS subPart
     FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX`,
    [database, table],
  );
  const byName = new Map<string, { unique: boolean; columns: (string | null)[]; prefix: boolean }>();
  for (const r of indexRows) {
    let ix = byName.get(r.indexName);
    if (!ix) {
      ix = { unique: Number(r.nonUnique) === 0, columns: [], prefix: false };
      byName.set(r.indexName, ix);
    }
    ix.columns.push(r.columnName);
    if (r.subPart !== null) ix.prefix = true;
  }
  const indexes: IndexInfo[] = [...byName].map(([name, ix]) => ({ name, ...ix }));
  const primaryKey = (indexes.find((i) => i.name === 'PRIMARY')?.columns ?? []).filter(
    (c): c is string => c !== null,
  );
  return { columns, indexes, primaryKey };
}

/**
 * The columns with the result-set signature of their read expressions (result-fields.ts),
 * from one `SELECT <read exprs> FROM t LIMIT 0`, run right after information_schema was read:
 * what every page statement's result set is compared with. An account with SELECT on some
 * columns only gets the signatures of the columns pages read (`needed`: schema and key columns);
 * the others (an excluded column) are then not compared.
 */
async function withResultFields(
  db: MysqlConnection,
  qualified: string,
  columns: readonly ColumnInfo[],
  needed: (c: ColumnInfo) => boolean,
): Promise<ColumnInfo[]> {
  const probe = (cs: readonly ColumnInfo[]) =>
    db.fields(`SELECT ${cs.map((c) => c.read.expr).join(', ')} FROM ${qualified} AS ${TABLE_ALIAS} LIMIT 0`);
  let probed: readonly ColumnInfo[] = columns;
  let fields: readonly FieldPacket[];
  try {
    fields = await probe(probed);
  } catch (e) {
    if ((e as { code?: string }).code !== 'ER_COLUMNACCESS_DENIED_ERROR') throw e;
    probed = columns.filter(needed);
    fields = await probe(probed);
  }
  const byColumn = new Map(probed.map((c, i) => [c, fields[i] ? resultFieldOf(fields[i]!) : undefined]));
  return columns.map((c) => {
    const result = byColumn.get(c);
    return result ? { ...c, result } : c;
  });
}

const SCHEMA_ERRORS = new Set(['ER_BAD_FIELD_ERROR', 'ER_NO_SUCH_TABLE']);

/**
 * A page read's failure as a SchemaChangedError, when it means the table changed since `plan`
 * was introspected: the result set differs from the introspected one (`ResultSetChanged`), or
 * a statement names a column or table that is gone (ER_BAD_FIELD_ERROR 1054, ER_NO_SUCH_TABLE
 * 1146). The changes are those of information_schema read again now (compareSchemas over the
 * same exclusions), so the message names the old and new source types; when that read fails or
 * finds nothing, the detail alone says what differs. Undefined for any other failure.
 */
export async function schemaChangeOf(
  db: MysqlConnection,
  plan: TablePlan,
  target: string,
  e: unknown,
): Promise<SchemaChangedError | undefined> {
  let detail: string;
  if (e instanceof ResultSetChanged) detail = e.detail;
  else if (SCHEMA_ERRORS.has(String((e as { code?: unknown }).code ?? '')))
    detail = `the server says: ${String((e as { message?: unknown }).message ?? '').split('\n')[0]}`;
  else return undefined;
  let changes: SchemaChange[] = [];
  try {
    const { database, table } = splitTableName(plan.source);
    const catalog = await readCatalog(db, (await db.server()).flavor, database, table);
    if (catalog.columns.length > 0) {
      const kept = new Set(plan.schema.columns.map((c) => c.name));
      const exclude = new Set(plan.columns.map((c) => c.name).filter((n) => !kept.has(n)));
      changes = compareSchemas(plan.schema, schemaOf(catalog.columns, exclude, catalog.primaryKey));
    }
  } catch {
    // The detail says what differs; a failing catalog read must not hide the stop.
  }
  return new SchemaChangedError(target, changes, 'page', detail, { cause: e });
}

/** Refuses a table the account may see but not SELECT from (e.g. only INSERT was granted). */
async function checkSelect(db: MysqlConnection, source: string, qualified: string): Promise<void> {
  try {
    await db.query(`SELECT 1 FROM ${qualified} LIMIT 0`);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code !== 'ER_TABLEACCESS_DENIED_ERROR' && code !== 'ER_COLUMNACCESS_DENIED_ERROR') throw e;
    throw new SourceError(
      'SOURCE_PRIVILEGE',
      `${source}: this account may not SELECT from it; run GRANT SELECT ON ${qualified} TO ${await currentAccount(db)};`,
      { cause: e },
    );
  }
}

/** A "no such table" error listing up to three similar table names the account can see. */
async function unknownTable(
  db: MysqlConnection,
  source: string,
  database: string,
  table: string,
): Promise<SourceError> {
  const rows = await db.query<{ db: string; t: string }>(
    `SELECT TABLE_SCHEMA AS db, TABLE_NAME AS t FROM information_schema.TABLES
     WHERE TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys') LIMIT 5000`,
  );
  const similar = similarNames(
    `${database}.${table}`,
    rows.map((r) => `${r.db}.${r.t}`),
  );
  const hint =
    similar.length > 0 ? `; did you mean ${similar.join(', ')}?` : '; check the database and table name';
  return new SourceError(
    'SOURCE_TABLE_MISSING',
    `table ${source} does not exist or is not visible to this account${hint}`,
  );
}

/**
 * Validates `cursorColumn` for keyset paging and returns the keyset: (cursor, primary key...).
 * Refuses a missing cursor, a cursor or key column whose order the keyset cannot follow (JSON,
 * ENUM, SET, BIT, spatial), and a table without primary key unless the cursor alone is UNIQUE
 * and NOT NULL. Warns (not refuses) when no index leads with the cursor column.
 */
export function keysetPlan(plan: TablePlan, cursorColumn: string): KeysetPlan {
  const cursor = plan.columns.find((c) => c.name === cursorColumn);
  if (!cursor) throw cursorMissing(plan, cursorColumn, true);
  const refuseType = (c: ColumnInfo, role: string) => {
    const why =
      c.read.keyRefusal ??
      (isKeyType(c.read.logical) ? undefined : `read as ${describeType(c.read.logical)}`);
    if (why) {
      throw new SourceError(
        'SOURCE_CURSOR_INVALID',
        `${plan.source}: ${role} column "${c.name}" has type ${c.sourceType}, which cannot be ordered for keyset paging (${why}); pick a cursor of a scalar type such as DATETIME(6), TIMESTAMP(6) or BIGINT`,
      );
    }
  };
  refuseType(cursor, 'cursor');

  let rest: ColumnInfo[];
  if (plan.primaryKey.length > 0) {
    rest = tieBreakers(plan, cursorColumn);
    for (const k of rest) refuseType(k, 'primary-key');
  } else {
    const unique = plan.indexes.some(
      (i) => i.unique && !i.prefix && i.columns.length === 1 && i.columns[0] === cursorColumn,
    );
    if (!unique || !cursor.notNull) throw keyMissing(plan, cursor);
    rest = [];
  }
  const keys = [cursor, ...rest];

  const warnings: Warning[] = [];
  if (!plan.indexes.some((i) => i.columns[0] === cursorColumn && !i.prefix)) {
    const keyList = keys.map((k) => quoteIdent(k.name)).join(', ');
    warnings.push(
      notIndexed(
        plan,
        cursorColumn,
        `ALTER TABLE ${plan.qualified} ADD INDEX (${keyList}), ALGORITHM=INPLACE, LOCK=NONE;`,
      ),
    );
  }

  const t = cursor.read.logical;
  const bound: KeysetPlan['bound'] =
    t.kind === 'timestamp'
      ? { kind: 'time', type: t.utc ? 'timestamp' : 'datetime' }
      : t.kind === 'date'
        ? { kind: 'time', type: 'date' }
        : { kind: 'highWater' };
  const zeroDates = cursor.read.kind === 'date' || cursor.read.kind === 'datetime';
  return { cursor, keys, types: keys.map((k) => k.read.logical), bound, zeroDates, warnings };
}

/** The predicate that keeps rows whose cursor is a zero date (or zero-in-date) out of pages. */
export function realDate(cursorSql: string): string {
  return `MONTH(${cursorSql}) <> 0 AND DAYOFMONTH(${cursorSql}) <> 0`;
}

/**
 * Counts rows whose cursor is NULL, or a zero date (which reads as NULL; docs/mysql.md). 0
 * without a query when the column is NOT NULL and not a date/time type.
 */
export async function countNullCursors(
  db: MysqlConnection,
  plan: TablePlan,
  cursorColumn: string,
): Promise<number> {
  const cursor = plan.columns.find((c) => c.name === cursorColumn);
  if (!cursor) throw cursorMissing(plan, cursorColumn, false);
  const zeroDates = cursor.read.kind === 'date' || cursor.read.kind === 'datetime';
  if (cursor.notNull && !zeroDates) return 0;
  const c = `${TABLE_ALIAS}.${quoteIdent(cursorColumn)}`;
  const where = zeroDates ? `${c} IS NULL OR NOT (${realDate(c)})` : `${c} IS NULL`;
  const [row] = await db.query<{ n: string | number }>(
    `SELECT COUNT(*) AS n FROM ${plan.qualified} AS ${TABLE_ALIAS} WHERE ${where}`,
  );
  return Number(row!.n);
}
