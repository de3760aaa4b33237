/**
 * One table the Postgres reader captures (as ../../mysql/cdc/table.ts is for MySQL): what the
 * stream says about the table itself, pgoutput's Relation message (its columns,
 * sent before the table's first row in a session and again after each change to them) and
 * Truncate (decision 0008 for what a schema change does to the lake).
 *
 * Owns:
 *   - mapping a Relation's columns onto the table's lake schema (relation index <-> schema
 *     index, the key's relation indexes) and the appenders of its column types (./values.ts),
 *     both chosen once per Relation so the row decode only indexes arrays;
 *   - telling a change: the columns as a signature (name, type OID, typmod), an identical one is
 *     a no-op, a changed one gives the new schema derived from the message itself (the catalog
 *     may have moved further on since this point of the log) through the schema rules;
 *   - TRUNCATE of captured tables as `ddl` events.
 * Switching encoders to a new schema is the reader's: it happens only once the old schema's
 * rows are cut. Must never map a schema column to a relation column of another name, nor drop
 * one silently: a lake column the Relation lacks is a SCHEMA_CHANGED error.
 */
import type { CdcEvent, CdcTable } from '../../../contracts/cdc.js';
import { SourceError } from '../../../contracts/errors.js';
import type { Schema } from '../../../dataplane/schema.js';
import { compareSchemas, type SchemaChange } from '../../../dataplane/schema-rules.js';
import { TableBuffer } from '../../cdc-buffer.js';
import { streamSchema } from '../../cdc-schema.js';
import type { PostgresConnection } from '../connect.js';
import { baseTypeOf, type ColumnInfo, resolveTypes, type TablePlan } from '../introspect.js';
import { readPlan } from '../types.js';
import type { MessageReader, RelationMessage } from '../wire/pgoutput.js';
import type { Deferred } from './toast.js';
import { type Appender, appenderFor } from './values.js';

/** A captured table as its Relation messages describe it (part of the reader's table state). */
export interface RelationState {
  readonly target: string;
  readonly source: string;
  /** Column names left out of the lake. */
  readonly excluded: ReadonlySet<string>;
  schema: Schema;
  /** Per schema column: its catalog facts (current Relation) and appender. */
  infos: ColumnInfo[];
  appenders: Appender[];
  /** Relation column index -> schema column index, -1 when excluded. */
  relToSchema: Int32Array;
  /** Schema column index -> relation column index. */
  schemaToRel: Int32Array;
  /** Relation column indexes of the primary key. */
  keyRel: number[];
  replicaIdentity: string;
  /** The columns as the last Relation (or introspection) described them: name, type, typmod. */
  signature: string;
  relid: number | undefined;
}

/** A Relation whose columns changed the lake schema: what the table switches to. */
export interface RelationChange {
  readonly schema: Schema;
  readonly infos: ColumnInfo[];
  readonly changes: readonly SchemaChange[];
}

/**
 * Takes in a Relation message of captured table `t`: identical columns (or a change of source
 * types only, same lake schema: new appenders) are mapped at once and give undefined; a lake
 * schema change is returned for the reader to switch to once the old rows are cut.
 */
export async function applyRelation(
  db: PostgresConnection,
  t: RelationState,
  rel: RelationMessage,
): Promise<RelationChange | undefined> {
  t.relid = rel.relid;
  t.replicaIdentity = rel.replicaIdentity;
  const signature = signatureOf(rel.columns.map((c) => [c.name, c.typeOid, c.typmod]));
  if (signature === t.signature) {
    mapRelation(t, rel, t.schema);
    return undefined;
  }
  // The columns changed: derive the new schema from the message (the catalog may have moved
  // further on since this point of the log).
  const infos = await columnsOf(db, rel);
  const kept = infos.filter((c) => !t.excluded.has(c.name));
  const old = t.schema;
  const schema = streamSchema(old, kept);
  t.signature = signature;
  const changes = compareSchemas(old, schema);
  // No change the rules see (the hash would not tell a source-type change, which they do).
  if (changes.length === 0) {
    // Same lake schema (a source-type-only change): new appenders, same encoder.
    t.infos = kept;
    t.appenders = appendersOf(old, kept, t.source);
    mapRelation(t, rel, old);
    return undefined;
  }
  return { schema, infos: kept, changes };
}

/** Maps the columns of `rel` onto `schema` (the table's current or new one). */
export function mapRelation(t: RelationState, rel: RelationMessage, schema: Schema): void {
  const index = new Map(schema.columns.map((c, i) => [c.name, i]));
  t.relToSchema = Int32Array.from(rel.columns.map((c) => index.get(c.name) ?? -1));
  t.schemaToRel = new Int32Array(schema.columns.length).fill(-1);
  rel.columns.forEach((c, i) => {
    const j = index.get(c.name);
    if (j !== undefined) t.schemaToRel[j] = i;
  });
  t.keyRel = schema.primaryKey.map((k) => rel.columns.findIndex((c) => c.name === k));
  for (let j = 0; j < schema.columns.length; j++)
    if (t.schemaToRel[j] === -1)
      throw new SourceError(
        'SCHEMA_CHANGED',
        `${t.target}: the stream's Relation message of ${t.source} has no column "${schema.columns[j]!.name}"`,
      );
}

/** The columns' signature a Relation is compared by: [name, type OID, typmod] each. */
export function signatureOf(cols: readonly (readonly [string, number, number])[]): string {
  return JSON.stringify(cols);
}

/** One appender per schema column, from its catalog facts. */
export function appendersOf(schema: Schema, infos: readonly ColumnInfo[], source: string): Appender[] {
  return schema.columns.map((c, j) => {
    const info = infos[j]!;
    return appenderFor(info.read, info.baseOid, info.elementOid, { table: source, column: c.name });
  });
}

/**
 * A Truncate message (its tag read): one `ddl` event per captured table it names, in its order.
 * `byRelid` holds the Relations seen, null for a table not captured.
 */
export function truncateEvents(
  m: MessageReader,
  byRelid: ReadonlyMap<number, { readonly target: string; readonly source: string } | null>,
): CdcEvent[] {
  const n = m.i32();
  m.u8();
  const events: CdcEvent[] = [];
  for (let i = 0; i < n; i++) {
    const t = byRelid.get(m.u32());
    if (t)
      events.push({
        kind: 'ddl',
        ddl: { source: 'postgres', kind: 'truncate', table: t.target, detail: `TRUNCATE ${t.source}` },
      });
  }
  return events;
}

/** Catalog facts of a Relation's columns, from its type OIDs (domains and arrays resolved). */
async function columnsOf(db: PostgresConnection, rel: RelationMessage): Promise<ColumnInfo[]> {
  return db.run(async (sql) => {
    const types = await resolveTypes(
      sql,
      rel.columns.map((c) => c.typeOid),
    );
    const formats = await sql.unsafe<{ f: string; c: string }[]>(
      `SELECT format_type(t.oid, t.mod) AS f, format_type(t.oid, -1) AS c
         FROM unnest($1::text::oid[], $2::text::int4[]) WITH ORDINALITY AS t(oid, mod, i) ORDER BY t.i`,
      [`{${rel.columns.map((c) => c.typeOid).join(',')}}`, `{${rel.columns.map((c) => c.typmod).join(',')}}`],
    );
    const dims = await sql.unsafe<{ attname: string; attndims: number; attnum: number }[]>(
      'SELECT attname::text, attndims::int, attnum::int FROM pg_attribute WHERE attrelid = $1::oid AND attnum > 0 AND NOT attisdropped',
      [String(rel.relid)],
    );
    return rel.columns.map((c, i): ColumnInfo => {
      const t = baseTypeOf(types, c.typeOid, c.typmod);
      const d = dims.find((x) => x.attname === c.name);
      return {
        name: c.name,
        attnum: d?.attnum ?? i + 1,
        notNull: false,
        sourceType: formats[i]?.f ?? '',
        castType: formats[i]?.c ?? '',
        baseOid: t.oid,
        attTypeOid: c.typeOid,
        attTypmod: c.typmod,
        attNdims: d?.attndims ?? 0,
        elementOid: t.element?.oid ?? 0,
        read: readPlan(t, c.name, d?.attndims ?? 0),
      };
    });
  });
}

/** A schema change waiting for the old schema's rows to be cut: its Relation mapped then. */
interface PostgresSwap {
  readonly schema: Schema;
  readonly infos: ColumnInfo[];
  readonly rel: RelationMessage;
}

/**
 * A captured table: its rows pending (../../cdc-buffer.ts: encoder, ordinals, cut, schema
 * swap), its Relation mapping (below), where it resumes and its deferred rows.
 */
export class PostgresCdcTable extends TableBuffer<PostgresSwap> implements RelationState {
  readonly insertOnly: boolean;
  readonly unchangedToast: 'reread' | 'fail';
  infos: ColumnInfo[];
  appenders: Appender[];
  relToSchema = new Int32Array(0);
  schemaToRel = new Int32Array(0);
  keyRel: number[] = [];
  replicaIdentity = 'd';
  signature: string;
  relid: number | undefined = undefined;
  /** Rows below (nextLsn, nextOrd) are already durable. */
  nextLsn = -1n;
  nextOrd = 0;
  /** Rows waiting for their unchanged TOAST values (reread), in order; appended at `settle`. */
  deferred: Deferred[] | undefined = undefined;
  deferredBytes = 0;

  constructor(t: CdcTable, plan: TablePlan) {
    const names = new Set(t.schema.columns.map((c) => c.name));
    const excluded = new Set(plan.columns.filter((c) => !names.has(c.name)).map((c) => c.name));
    const infos = t.schema.columns.map((c) => plan.columns.find((p) => p.name === c.name)!);
    super(t, excluded);
    this.insertOnly = t.insertOnly === true;
    this.unchangedToast = t.unchangedToast ?? 'reread';
    this.infos = infos;
    this.appenders = appendersOf(t.schema, infos, t.ref.source);
    this.signature = signatureOf(plan.columns.map((c) => [c.name, c.attTypeOid, c.attTypmod]));
  }

  /** Switches to a pending schema once the old one's rows are cut and none wait for reread. */
  applySwap(): void {
    if (this.deferred) return;
    const swap = this.switchSchema();
    if (!swap) return;
    this.infos = swap.infos;
    this.appenders = appendersOf(swap.schema, swap.infos, this.source);
    mapRelation(this, swap.rel, swap.schema);
  }
}
