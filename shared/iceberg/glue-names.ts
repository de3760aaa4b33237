/**
 * Lake targets as Glue Data Catalog names (docs/iceberg.md "Catalogs: glue"): the one mapping
 * from a spec table's target (`public.orders`, `orders`) to the Glue database and table the `glue`
 * catalog commits to, and its refusal of two targets that land on one Glue table.
 *
 * Owns: the rule, a pure function of the target and the naming options. Glue and Athena keep
 * names lowercase, and Athena reads only `[a-z0-9_]` without quoting: every other character
 * becomes `_`, and each name is cut to Glue's 255 characters. So distinct targets can map to one
 * name (`Public.Orders` and `public.orders`, `a-b` and `a_b`); `glueNameCollisions` finds those
 * over the spec's targets, for `tidemark check` and the CDK app, and `glueNamesOf` refuses them
 * with `GLUE_NAME_COLLISION` naming both targets (`glueNameCollisionError`, the words check uses).
 */
import { SinkError } from '../contracts/errors.js';
import type { TableIdent } from './catalog.js';

/** Glue's limit on a database or table name, in characters. */
export const GLUE_NAME_MAX = 255;

/**
 * Where targets go: one fixed `database` (the table is the whole target, its dots `_`), or one
 * database per target schema named `<databasePrefix><schema>` (a target without a dot: schema
 * `default`). Default: `{ databasePrefix: '' }`.
 */
export type GlueNaming = { readonly database: string } | { readonly databasePrefix: string };

/** A name as Glue and Athena keep it: lowercase, `[a-z0-9_]`, at most 255 characters. */
export function glueName(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, '_')
    .slice(0, GLUE_NAME_MAX);
}

/** The Glue database and table of one lake target. */
export function glueIdentOf(target: string, naming: GlueNaming = { databasePrefix: '' }): TableIdent {
  if (target.length === 0) {
    throw new SinkError('SINK_TABLE_NAME', target, 'lake table name is empty; set a target name');
  }
  if ('database' in naming) {
    return { namespace: glueName(naming.database), name: glueName(target) };
  }
  const dot = target.indexOf('.');
  // `.orders` has no schema and `public.` no table: the database is then `default`, the table the whole target.
  const schema = dot <= 0 ? 'default' : target.slice(0, dot);
  const table = dot < 0 || dot === target.length - 1 ? target : target.slice(dot + 1);
  return { namespace: glueName(`${naming.databasePrefix}${schema}`), name: glueName(table) };
}

/** Two or more targets that map to one Glue table. */
export interface GlueNameCollision {
  /** `database.table` in Glue. */
  readonly glue: string;
  readonly targets: readonly string[];
}

/** The targets that share a Glue table with another, grouped by that table, in target order. */
export function glueNameCollisions(
  targets: readonly string[],
  naming: GlueNaming = { databasePrefix: '' },
): GlueNameCollision[] {
  const byGlue = new Map<string, string[]>();
  for (const target of new Set(targets)) {
    const ident = glueIdentOf(target, naming);
    const key = `${ident.namespace}.${ident.name}`;
    const list = byGlue.get(key);
    if (list) list.push(target);
    else byGlue.set(key, [target]);
  }
  return [...byGlue].filter(([, t]) => t.length > 1).map(([glue, t]) => ({ glue, targets: t }));
}

/**
 * The Glue ident of every target.
 * @throws SinkError `GLUE_NAME_COLLISION` naming the targets of the first collision (and how many more).
 */
export function glueNamesOf(
  targets: readonly string[],
  naming: GlueNaming = { databasePrefix: '' },
): Map<string, TableIdent> {
  const collisions = glueNameCollisions(targets, naming);
  const first = collisions[0];
  if (first) throw glueNameCollisionError(first, collisions.length - 1);
  return new Map(targets.map((t) => [t, glueIdentOf(t, naming)]));
}

/**
 * The refusal of one collision, naming its targets (and how many `more` collisions there are):
 * what `glueNamesOf` throws and `tidemark check` reports per collision.
 */
export function glueNameCollisionError(collision: GlueNameCollision, more = 0): SinkError {
  const others = more > 0 ? ` (and ${more} more collision(s))` : '';
  return new SinkError(
    'GLUE_NAME_COLLISION',
    collision.targets[0]!,
    `the lake tables ${collision.targets.map((t) => JSON.stringify(t)).join(' and ')} would both be the Glue table ${collision.glue} (Glue names are lowercase [a-z0-9_], at most ${GLUE_NAME_MAX} characters)${others}; give one of them another target`,
  );
}
