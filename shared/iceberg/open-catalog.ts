/**
 * The lake's catalog from the spec's `lake.catalog` (docs/iceberg.md, "Catalogs"): which catalog
 * commits a lake's Iceberg tables, and where each lake target lives in it: its catalog identifier
 * and its folder in the lake store (the plain layout's table folder, shared/sink/layout.ts
 * `tablePrefix`, so an Iceberg table's data files sit where a plain table's objects would and its
 * metadata under `metadata/`).
 *
 * Owns the mapping from a target to (identifier, folder), one per catalog kind: `file` names a
 * table by its target (its folder IS its identity), `glue` by the documented Glue names
 * (./glue-names.ts; two targets on one Glue table are refused before anything is written).
 * A `rest` catalog that places tables (`placesTables`, default for S3 Tables) gets no folder from
 * the lake: each table's folder is the location the catalog assigned, opened by `openFolder` with
 * the lake's connection settings and marked `catalogOwnsFiles` (never listed or deleted from).
 * Opens no connection: the catalogs connect on first use.
 */
import type { Spec } from '../config/spec.js';
import { ConfigError } from '../contracts/errors.js';
import { tablePrefix } from '../sink/layout.js';
import type { ObjectStore } from '../sink/object-store.js';
import type { Catalog, TableIdent } from './catalog.js';
import { FileCatalog } from './file-catalog.js';
import { GlueCatalog } from './glue-catalog.js';
import { glueIdentOf, glueName, glueNameCollisionError, glueNameCollisions } from './glue-names.js';
import { openRestCatalog } from './rest-catalog.js';
import type { TableFolder } from './table-folder.js';

export type CatalogConfig = Spec['lake']['catalog'];

/** A lake target's place in its catalog and in the lake store. */
export interface LakeTableLocation {
  readonly ident: TableIdent;
  readonly folder: TableFolder;
}

/** The catalog of one lake, and where its targets are. */
export interface LakeCatalog {
  readonly catalog: Catalog;
  /**
   * Where `target`'s Iceberg table is. @throws SinkError `GLUE_NAME_COLLISION` (glue) for a name
   * another target took. With `placesTables` the folder is the lake's, unused by the table: its
   * files are at `placesTables.folderAt(<the table's metadata location>)`.
   */
  table(target: string): LakeTableLocation;
  /**
   * Set when the catalog assigns each table's location (S3 Tables): a new table is created with no
   * location, and its files go to the folder of the location the catalog answered with.
   */
  readonly placesTables?: {
    /** The folder of a location the catalog assigned, `catalogOwnsFiles`. */
    folderAt(location: string): TableFolder;
  };
}

export interface LakeCatalogOptions {
  readonly store: ObjectStore;
  /** The lake's key prefix in the store ('' = its root). */
  readonly prefix: string;
  /** Every target of the spec: a collision between two of them is refused up front. */
  readonly targets?: readonly string[];
  /**
   * Opens the store and key of a table location the catalog assigned (`s3://...`, `file:...`),
   * with the lake's credentials and endpoint; required for a catalog that places tables.
   */
  readonly openFolder?: (location: string) => { readonly store: ObjectStore; readonly key: string };
}

/** Whether `config` is a catalog that assigns each table's location: `placesTables`, default S3 Tables'. */
export function catalogPlacesTables(config: CatalogConfig): boolean {
  return config.type === 'rest' && (config.placesTables ?? config.sigv4?.service === 's3tables');
}

/** The folder key (no trailing `/`) of `target` in a lake at `prefix`. */
export function tableFolderKey(prefix: string, target: string): string {
  return tablePrefix(prefix, target).replace(/\/+$/, '');
}

/** Builds the lake's catalog. @throws ConfigError for a catalog this build cannot open. */
export function openLakeCatalog(config: CatalogConfig, options: LakeCatalogOptions): LakeCatalog {
  const { store, prefix } = options;
  const folderOf = (target: string): TableFolder => ({ store, key: tableFolderKey(prefix, target) });
  switch (config.type) {
    case 'file': {
      // The folder is the table's identity: the identifier carries the target itself.
      const catalog = new FileCatalog({ store, tableKey: (ident) => tableFolderKey(prefix, ident.name) });
      return {
        catalog,
        table: (target) => ({ ident: { namespace: '', name: target }, folder: folderOf(target) }),
      };
    }
    case 'glue': {
      const naming = { database: config.database };
      const collisions = glueNameCollisions(options.targets ?? [], naming);
      if (collisions[0]) throw glueNameCollisionError(collisions[0], collisions.length - 1);
      // Glue identifiers lose the target's spelling: each is mapped back to the target it came from.
      const targets = new Map<string, string>();
      const catalog = new GlueCatalog({
        store,
        tableKey: (ident) => {
          const target = targets.get(`${ident.namespace}.${ident.name}`);
          if (target === undefined)
            throw new ConfigError(
              'lake.catalog',
              `no lake target maps to the Glue table ${ident.namespace}.${ident.name} (a bug)`,
            );
          return tableFolderKey(prefix, target);
        },
        ...(config.region ? { region: config.region } : {}),
        ...(config.endpoint ? { endpoint: config.endpoint } : {}),
        ...(config.catalogId ? { catalogId: config.catalogId } : {}),
      });
      return {
        catalog,
        table: (target) => {
          const ident = glueIdentOf(target, naming);
          const text = `${ident.namespace}.${ident.name}`;
          const other = targets.get(text);
          if (other !== undefined && other !== target)
            throw glueNameCollisionError({ glue: text, targets: [other, target] });
          targets.set(text, target);
          return { ident, folder: folderOf(target) };
        },
      };
    }
    case 'rest': {
      // One namespace for the lake; the table is its target with the dots as `_` (as in Glue).
      const catalog = openRestCatalog(config);
      const open = options.openFolder;
      if (catalogPlacesTables(config) && open === undefined)
        throw new ConfigError('lake.catalog', 'places tables, but no store opener was given (a bug)');
      return {
        catalog,
        table: (target) => ({
          ident: { namespace: config.namespace, name: glueName(target) },
          folder: folderOf(target),
        }),
        ...(catalogPlacesTables(config) && open
          ? {
              placesTables: {
                folderAt: (location: string) => ({ ...open(location), catalogOwnsFiles: true }),
              },
            }
          : {}),
      };
    }
  }
}
