/**
 * The publications a Postgres source's change stream reads (`publication_names` of
 * START_REPLICATION): the main one, `publish = 'insert, update, delete, truncate'`, for the
 * tables whose changes are all captured, and `<publication>_ins`, `publish = 'insert'`, for
 * `insertOnly` tables (append-only, no primary key). Both `publish_via_partition_root = true`.
 *
 * Owns: the catalog reads that judge a table publishable (replica identity, primary key, the
 * TOASTable columns), the plan of what must exist (`planPublications`, pure except for catalog
 * reads, what `tidemark check` reports) and making it so (`ensurePublications`, what the reader
 * runs at start), each refusal a one-line SourceError naming the table or publication and the
 * exact statement that fixes it.
 *
 * Must never publish `FOR ALL TABLES`, nor a table whose UPDATEs and DELETEs Postgres would then
 * refuse: a table published for update/delete without a replica identity (no primary key under
 * REPLICA IDENTITY DEFAULT, or NOTHING) makes the APPLICATION's own UPDATE and DELETE on it fail.
 * Never drops a publication, never touches one that FOR ALL TABLES already publishes, never
 * creates a slot.
 *
 * When every table is insertOnly the main publication is not created (`names` holds only the
 * `_ins` one); a main publication left from an earlier spec is emptied of the tables it still
 * holds (it is not dropped), and so is an `_ins` publication once no table is insertOnly.
 */

import { hashedPgName, PG_NAME_MAX } from '../../../config/pg-names.js';
import { SourceError } from '../../../contracts/errors.js';
import type { Sql } from '../connect.js';
import { splitTableName } from '../introspect.js';
import { quoteIdent, quoteLiteral } from '../types.js';

/** A spec table as the publications see it. */
export interface PublishedTable {
  /** `schema.table` as in the spec. */
  readonly source: string;
  /** Captured through the insert-only publication: its UPDATEs and DELETEs are not captured. */
  readonly insertOnly: boolean;
}

/** pg_class.relreplident: default (the primary key), full, index, nothing. */
export type ReplicaIdentity = 'd' | 'f' | 'i' | 'n';

/** What the catalog says about a published table. */
export interface PublishedTableInfo {
  readonly replicaIdentity: ReplicaIdentity;
  readonly hasPrimaryKey: boolean;
  /** Columns that can be TOASTed (attstorage not plain), primary-key columns left out, in attnum order. */
  readonly toastable: readonly string[];
}

export interface PublicationSetup {
  /** publication_names to pass to START_REPLICATION, e.g. ['tidemark_p_s'] or ['tidemark_p_s', 'tidemark_p_s_ins'] */
  readonly names: readonly string[];
  /** statements that were executed (CREATE/ALTER PUBLICATION), for the log */
  readonly executed: readonly string[];
  /** per table: its replica identity as pg_class.relreplident ('d','f','i','n') and whether it has a primary key */
  readonly tables: ReadonlyMap<string, PublishedTableInfo>;
}

/** One publication of the plan: it matches, must be created or altered, or is left empty. */
export interface PublicationStatus {
  readonly name: string;
  readonly state: 'matches' | 'create' | 'alter';
  /** Its statements (empty when it matches). */
  readonly statements: readonly string[];
  /** The spec tables it must hold. */
  readonly tables: readonly string[];
}

/** What must exist, found by catalog reads only. */
export interface PublicationPlan {
  /** The publications START_REPLICATION names once the statements ran (those with tables). */
  readonly names: readonly string[];
  /** Every statement `ensurePublications` would run, in order (empty: everything matches). */
  readonly statements: readonly string[];
  /** Why `ensurePublications` would refuse: tables it may not publish, publications it may not make. */
  readonly problems: readonly SourceError[];
  readonly publications: readonly PublicationStatus[];
  /** The tables that exist, by spec name. */
  readonly tables: ReadonlyMap<string, PublishedTableInfo>;
}

/**
 * The capture a publication belongs to. tidemark marks the publications it creates with a
 * comment naming it (`tidemark pipeline=<p> source=<s> slot=<slot>`): it alters only the tables
 * of a publication marked as its own, only adds to one it did not create, and refuses a spec
 * whose publication or slot another capture's mark names.
 */
export interface PublicationOwner {
  readonly pipeline: string;
  readonly source: string;
  readonly slot: string;
}

const MARK = /^tidemark pipeline=(\S+) source=(\S+) slot=(\S+)$/;

/** The comment that marks a publication as `owner`'s. */
export function ownerMark(owner: PublicationOwner): string {
  return `tidemark pipeline=${owner.pipeline} source=${owner.source} slot=${owner.slot}`;
}

/** The owner a publication's comment names; undefined for an unmarked publication. */
export function parseOwnerMark(comment: string | null | undefined): PublicationOwner | undefined {
  const m = MARK.exec(comment ?? '');
  return m ? { pipeline: m[1]!, source: m[2]!, slot: m[3]! } : undefined;
}

const sameCapture = (a: PublicationOwner, b: PublicationOwner) =>
  a.pipeline === b.pipeline && a.source === b.source;

const PUBLISH_ALL = 'insert, update, delete, truncate';
const PUBLISH_INSERT = 'insert';

/** The insert-only publication of `publication`: `<publication>_ins`, cut to 63 bytes like a default slot name. */
export function insertOnlyPublicationName(publication: string): string {
  const name = `${publication}_ins`;
  return Buffer.byteLength(name) <= PG_NAME_MAX ? name : hashedPgName(name, publication);
}

interface TableRow {
  relkind: string;
  ident: ReplicaIdentity;
  has_pk: boolean;
  owns: boolean;
  toastable: string;
}

/** A spec table found in the catalog. */
interface FoundTable extends PublishedTableInfo {
  readonly source: string;
  readonly qualified: string;
  readonly insertOnly: boolean;
  readonly owned: boolean;
}

interface PublicationRow {
  oid: string;
  puballtables: boolean;
  pubinsert: boolean;
  pubupdate: boolean;
  pubdelete: boolean;
  pubtruncate: boolean;
  pubviaroot: boolean;
  owns: boolean;
  owner: string;
  mark: string | null;
}

interface PublishedRow {
  nsp: string;
  rel: string;
  narrowed: boolean;
}

/** A publication that exists: its options and the tables it holds. */
interface Existing extends PublicationRow {
  readonly tables: readonly { readonly source: string; readonly qualified: string }[];
  /** It has a row filter, a column list or a schema (FOR TABLES IN SCHEMA): not exactly its tables. */
  readonly narrowed: boolean;
}

interface Context {
  readonly role: string;
  readonly database: string;
  readonly mayCreate: boolean;
  readonly version: number;
}

/** Plans (never executes) what must exist; pure except for catalog reads. */
export async function planPublications(
  sql: Sql,
  publication: string,
  tables: readonly PublishedTable[],
  owner?: PublicationOwner,
): Promise<PublicationPlan> {
  const ctx = await context(sql);
  const problems: SourceError[] = [];
  if (owner) problems.push(...(await clashes(sql, publication, owner)));
  const found: FoundTable[] = [];
  for (const t of tables) {
    const r = await readTable(sql, t);
    if (r instanceof SourceError) problems.push(r);
    else found.push(r);
  }
  for (const t of found) {
    const refusal = t.insertOnly ? undefined : identityRefusal(t);
    if (refusal) problems.push(refusal);
  }
  const captured = new Set(found.map((t) => t.source));
  const wanted = [
    { name: publication, publish: PUBLISH_ALL, tables: found.filter((t) => !t.insertOnly) },
    {
      name: insertOnlyPublicationName(publication),
      publish: PUBLISH_INSERT,
      tables: found.filter((t) => t.insertOnly),
    },
  ];
  const publications: PublicationStatus[] = [];
  for (const w of wanted) {
    const existing = await readPublication(sql, w.name, ctx.version);
    const p = planOne(w.name, w.publish, w.tables, existing, ctx, owner, captured);
    if (p.problem) problems.push(p.problem);
    if (p.status) publications.push(p.status);
  }
  return {
    names: publications.filter((p) => p.tables.length > 0).map((p) => p.name),
    statements: publications.flatMap((p) => p.statements),
    problems,
    publications,
    tables: new Map(
      found.map((t) => [
        t.source,
        { replicaIdentity: t.replicaIdentity, hasPrimaryKey: t.hasPrimaryKey, toastable: t.toastable },
      ]),
    ),
  };
}

/**
 * Creates or alters the publication(s) so they hold EXACTLY the given tables; throws SourceError
 * with the exact statement to run when the role may not.
 */
export async function ensurePublications(
  sql: Sql,
  publication: string,
  tables: readonly PublishedTable[],
  owner?: PublicationOwner,
): Promise<PublicationSetup> {
  for (let attempt = 0; ; attempt++) {
    const plan = await planPublications(sql, publication, tables, owner);
    if (plan.problems[0]) throw plan.problems[0];
    try {
      if (plan.statements.length > 0)
        await sql.begin(async (tx) => {
          for (const s of plan.statements) await tx.unsafe(s);
        });
    } catch (e) {
      const code = String((e as { code?: unknown }).code ?? '');
      // Created or altered by another process between the plan and here: plan again, once.
      if ((code === '42710' || code === '40001') && attempt === 0) continue;
      if (code === '42501') throw privilegeError(plan.statements, await context(sql), e);
      throw e;
    }
    return { names: plan.names, executed: plan.statements, tables: plan.tables };
  }
}

async function context(sql: Sql): Promise<Context> {
  const [row] = await sql.unsafe<{ role: string; database: string; may_create: boolean; version: number }[]>(
    `SELECT current_user::text AS role, current_database()::text AS database,
            has_database_privilege(current_database(), 'CREATE') AS may_create,
            current_setting('server_version_num')::int AS version`,
  );
  return { role: row!.role, database: row!.database, mayCreate: row!.may_create, version: row!.version };
}

/** The catalog facts of one spec table; throws the SourceError of why it cannot be published. */
export async function publishedTableInfo(sql: Sql, t: PublishedTable): Promise<PublishedTableInfo> {
  const r = await readTable(sql, t);
  if (r instanceof SourceError) throw r;
  return { replicaIdentity: r.replicaIdentity, hasPrimaryKey: r.hasPrimaryKey, toastable: r.toastable };
}

/** The catalog facts of one spec table, or why it cannot be published. */
async function readTable(sql: Sql, t: PublishedTable): Promise<FoundTable | SourceError> {
  const { schema, table } = splitTableName(t.source);
  const [row] = await sql.unsafe<TableRow[]>(
    `SELECT c.relkind::text AS relkind, c.relreplident::text AS ident,
            EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary) AS has_pk,
            pg_has_role(c.relowner, 'USAGE') AS owns,
            COALESCE((SELECT json_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a
                      WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attstorage <> 'p'
                        AND NOT EXISTS (SELECT 1 FROM pg_index i
                                        WHERE i.indrelid = c.oid AND i.indisprimary AND a.attnum = ANY (i.indkey))),
                     '[]'::json)::text AS toastable
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relname = $2`,
    [schema, table],
  );
  const qualified = `${quoteIdent(schema)}.${quoteIdent(table)}`;
  if (!row) {
    return new SourceError(
      'SOURCE_TABLE_MISSING',
      `${t.source}: no such table in this database, so it cannot be published; fix the table name in the spec or create it`,
    );
  }
  if (row.relkind !== 'r' && row.relkind !== 'p') {
    return new SourceError(
      'CDC_NOT_PUBLISHABLE',
      `${t.source}: is not a table (relkind ${row.relkind}: a view, materialized view or foreign table has no change log); capture the tables it reads, or use mode: incremental`,
    );
  }
  return {
    source: t.source,
    qualified,
    insertOnly: t.insertOnly,
    owned: row.owns,
    replicaIdentity: row.ident,
    hasPrimaryKey: row.has_pk,
    toastable: JSON.parse(row.toastable) as string[],
  };
}

/**
 * CDC_NO_REPLICA_IDENTITY for a table published for update/delete that has no replica identity:
 * Postgres would refuse the application's own UPDATEs and DELETEs on it.
 */
function identityRefusal(t: FoundTable): SourceError | undefined {
  const full = `ALTER TABLE ${t.qualified} REPLICA IDENTITY FULL;`;
  const insertOnly = `or declare insertOnly: true on the spec table if it is append-only (captured through an insert-only publication: its UPDATEs and DELETEs are not captured)`;
  const why =
    "publishing it for UPDATE and DELETE would make the application's own UPDATEs and DELETEs on it fail";
  if (t.replicaIdentity === 'n') {
    return new SourceError(
      'CDC_NO_REPLICA_IDENTITY',
      `${t.source}: REPLICA IDENTITY NOTHING: ${why}; run ${t.hasPrimaryKey ? `ALTER TABLE ${t.qualified} REPLICA IDENTITY DEFAULT; (the primary key identifies rows) or ` : ''}${full} (then every UPDATE/DELETE logs the whole old row: more WAL), ${insertOnly}`,
    );
  }
  if (t.replicaIdentity === 'd' && !t.hasPrimaryKey) {
    return new SourceError(
      'CDC_NO_REPLICA_IDENTITY',
      `${t.source}: no primary key and REPLICA IDENTITY DEFAULT, so no replica identity: ${why}; run ${full} (then every UPDATE/DELETE logs the whole old row: more WAL), ${insertOnly}`,
    );
  }
  return undefined;
}

async function readPublication(sql: Sql, name: string, version: number): Promise<Existing | undefined> {
  const [row] = await sql.unsafe<PublicationRow[]>(
    `SELECT p.oid::text AS oid, p.puballtables, p.pubinsert, p.pubupdate, p.pubdelete, p.pubtruncate, p.pubviaroot,
            pg_has_role(p.pubowner, 'USAGE') AS owns, pg_get_userbyid(p.pubowner)::text AS owner,
            obj_description(p.oid, 'pg_publication') AS mark
     FROM pg_publication p WHERE p.pubname = $1`,
    [name],
  );
  if (!row) return undefined;
  const pg15 = version >= 150000;
  const rels = await sql.unsafe<PublishedRow[]>(
    `SELECT n.nspname::text AS nsp, c.relname::text AS rel,
            ${pg15 ? 'r.prqual IS NOT NULL OR r.prattrs IS NOT NULL' : 'false'} AS narrowed
     FROM pg_publication_rel r JOIN pg_class c ON c.oid = r.prrelid JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE r.prpubid = $1::oid ORDER BY n.nspname, c.relname`,
    [row.oid],
  );
  let schemas = false;
  if (pg15) {
    const [s] = await sql.unsafe<{ any: boolean }[]>(
      'SELECT EXISTS (SELECT 1 FROM pg_publication_namespace WHERE pnpubid = $1::oid) AS any',
      [row.oid],
    );
    schemas = s?.any ?? false;
  }
  return {
    ...row,
    tables: rels.map((r) => ({
      source: `${r.nsp}.${r.rel}`,
      qualified: `${quoteIdent(r.nsp)}.${quoteIdent(r.rel)}`,
    })),
    narrowed: schemas || rels.some((r) => r.narrowed),
  };
}

/**
 * Another capture's marks that name this capture's publication (or its insert-only twin) or slot:
 * two captures sharing either would take each other's tables out, or each other's changes.
 */
async function clashes(sql: Sql, publication: string, owner: PublicationOwner): Promise<SourceError[]> {
  const rows = await sql.unsafe<{ name: string; mark: string | null }[]>(
    `SELECT p.pubname::text AS name, obj_description(p.oid, 'pg_publication') AS mark FROM pg_publication p`,
  );
  const ours = new Set([publication, insertOnlyPublicationName(publication)]);
  const found: SourceError[] = [];
  for (const r of rows) {
    const other = parseOwnerMark(r.mark);
    if (!other || sameCapture(other, owner)) continue;
    const shared = [
      ours.has(r.name) ? `publication "${r.name}"` : '',
      other.slot === owner.slot ? `slot "${owner.slot}"` : '',
    ].filter(Boolean);
    if (shared.length === 0) continue;
    found.push(
      new SourceError(
        'CDC_NAME_CLASH',
        `${shared.join(' and ')} belong(s) to pipeline "${other.pipeline}" source "${other.source}" (publication "${r.name}"), not to pipeline "${owner.pipeline}" source "${owner.source}": set ${owner.source}.cdc.publication and slot to names of this capture's own`,
      ),
    );
  }
  return found;
}

/** The statements (and the refusal, if any) that make publication `name` hold exactly `tables`. */
function planOne(
  name: string,
  publish: string,
  tables: readonly FoundTable[],
  existing: Existing | undefined,
  ctx: Context,
  owner: PublicationOwner | undefined,
  captured: ReadonlySet<string>,
): { status?: PublicationStatus; problem?: SourceError } {
  const q = quoteIdent(name);
  const list = tables.map((t) => t.qualified).join(', ');
  const options = `publish = '${publish}', publish_via_partition_root = true`;
  const sources = tables.map((t) => t.source);
  const mark = owner ? [`COMMENT ON PUBLICATION ${q} IS ${quoteLiteral(ownerMark(owner))}`] : [];
  if (!existing) {
    if (tables.length === 0) return {};
    const statements = [`CREATE PUBLICATION ${q} FOR TABLE ${list} WITH (${options})`, ...mark];
    const notOwned = tables.filter((t) => !t.owned).map((t) => t.source);
    const problem =
      ctx.mayCreate && notOwned.length === 0
        ? undefined
        : privilegeError(
            statements,
            ctx,
            undefined,
            [
              ctx.mayCreate ? '' : `CREATE on database ${quoteIdent(ctx.database)}`,
              notOwned.length ? `ownership of ${notOwned.join(', ')}` : '',
            ]
              .filter(Boolean)
              .join(' and '),
            `create publication ${q}`,
          );
    return {
      status: { name, state: 'create', statements, tables: sources },
      ...(problem ? { problem } : {}),
    };
  }
  if (existing.puballtables) {
    return {
      problem: new SourceError(
        'CDC_PUBLICATION_ALL_TABLES',
        `publication ${q} exists and is FOR ALL TABLES: it publishes every table of the database for UPDATE and DELETE, so a table without a replica identity would break the application's UPDATEs and DELETEs; tidemark publishes only its tables: drop it (DROP PUBLICATION ${q};) if nothing else uses it, or choose another publication name in sources.<name>.cdc.publication`,
      ),
    };
  }
  const statements: string[] = [];
  const want = new Set(sources);
  const have = new Set(existing.tables.map((t) => t.source));
  const sameTables = !existing.narrowed && want.size === have.size && [...want].every((s) => have.has(s));
  const marked = parseOwnerMark(existing.mark);
  let foreignProblem: SourceError | undefined;
  if (owner && !(marked && sameCapture(marked, owner)) && !sameTables) {
    // Not created by this capture (by hand, or by a release before the marks): tables are only
    // ever added to it, never taken out; another capture's publication was refused by `clashes`.
    const missing = tables.filter((t) => !have.has(t.source));
    if (missing.length > 0)
      statements.push(`ALTER PUBLICATION ${q} ADD TABLE ${missing.map((t) => t.qualified).join(', ')}`);
    // A table this capture takes through its other publication (insertOnly moved) must leave
    // this one, or its UPDATEs and DELETEs stay published: the operator removes it, or hands the
    // publication over to tidemark by marking it.
    const moved = existing.tables.filter((t) => !want.has(t.source) && captured.has(t.source));
    if (moved.length > 0)
      foreignProblem = new SourceError(
        'CDC_PUBLICATION_FOREIGN',
        `publication ${q} was not created by this capture (no tidemark mark) and holds ${moved.map((t) => t.source).join(', ')}, which the spec now captures through another publication; tidemark never removes a table from a publication it did not create: run ALTER PUBLICATION ${q} DROP TABLE ${moved.map((t) => t.qualified).join(', ')}; or hand it over with COMMENT ON PUBLICATION ${q} IS ${quoteLiteral(ownerMark(owner))};`,
      );
  } else if (!sameTables) {
    statements.push(
      tables.length > 0
        ? `ALTER PUBLICATION ${q} SET TABLE ${list}`
        : `ALTER PUBLICATION ${q} DROP TABLE ${existing.tables.map((t) => t.qualified).join(', ')}`,
    );
  }
  const all = publish === PUBLISH_ALL;
  const sameOptions =
    existing.pubinsert &&
    existing.pubupdate === all &&
    existing.pubdelete === all &&
    existing.pubtruncate === all &&
    existing.pubviaroot;
  // An empty publication nobody reads keeps whatever options it has.
  if (!sameOptions && tables.length > 0) statements.push(`ALTER PUBLICATION ${q} SET (${options})`);
  if (foreignProblem)
    return { status: { name, state: 'alter', statements, tables: sources }, problem: foreignProblem };
  if (statements.length === 0) return { status: { name, state: 'matches', statements, tables: sources } };
  const added = tables.filter((t) => !have.has(t.source) && !t.owned).map((t) => t.source);
  const problem =
    existing.owns && added.length === 0
      ? undefined
      : privilegeError(
          statements,
          ctx,
          undefined,
          [
            existing.owns ? '' : `ownership of the publication (owner "${existing.owner}")`,
            added.length ? `ownership of ${added.join(', ')}` : '',
          ]
            .filter(Boolean)
            .join(' and '),
          `alter publication ${q}, which differs from the spec's tables`,
        );
  return { status: { name, state: 'alter', statements, tables: sources }, ...(problem ? { problem } : {}) };
}

/** CDC_PUBLICATION_PRIVILEGE: the statements an admin (a superuser or the tables' owner) must run. */
function privilegeError(
  statements: readonly string[],
  ctx: Context,
  cause?: unknown,
  needs?: string,
  what = 'create or alter the publications',
): SourceError {
  const reason =
    needs ??
    (cause instanceof Error
      ? `the server refused: ${cause.message.split('\n')[0]}`
      : 'it lacks the privilege');
  return new SourceError(
    'CDC_PUBLICATION_PRIVILEGE',
    `role "${ctx.role}" may not ${what} (it needs ${reason}); have a superuser or the tables' owner run: ${statements.map((s) => `${s};`).join(' ')}`,
    cause === undefined ? undefined : { cause },
  );
}
