/**
 * `tidemark convert` per table: finds a spec's upsert tables in the lake's catalog and converts
 * each change-log one (written by the release before current-state tables) to the current-state
 * form once (../iceberg/convert-current-state.ts; docs/iceberg.md "Converting a change-log upsert
 * table"). The key columns are the Iceberg table's own identifier fields (the primary key its
 * writer recorded), never guessed.
 *
 * Owns: which tables are converted (the spec's `writeMode: upsert` tables, or the one named, which
 * must be one), and where each is (the catalog and folder the run would write it through). Never
 * touches tidemark's state and never opens a source.
 */
import { findTable, type Spec, type TableSpecConfig, tableTarget } from '../config/spec.js';
import { SinkError } from '../contracts/errors.js';
import { identText } from '../iceberg/catalog.js';
import {
  type ConvertProgress,
  type ConvertResult,
  convertToCurrentState,
} from '../iceberg/convert-current-state.js';
import { openLakeCatalog } from '../iceberg/open-catalog.js';
import { openLakeStore, openLocation } from '../sink/open-lake.js';
import { lakeStoreOptions } from './open.js';

/** What `tidemark convert` did to one table. */
export type ConvertTableOutcome = { readonly target: string; readonly ident: string } & (
  | ConvertResult
  | { readonly status: 'no-table' }
);

export interface ConvertTablesOptions {
  /** One table (source name or target); default every upsert table of the spec. */
  readonly table?: string;
  readonly nowMs?: () => number;
  /** Called before a table is converted. */
  readonly onTable?: (target: string) => void;
  readonly onProgress?: (target: string, progress: ConvertProgress) => void;
}

/**
 * Converts the spec's upsert tables (or `options.table`), in spec order, one after the other.
 * @throws SinkError `ICEBERG_CONVERT_REFUSED` for a named table that is not an upsert table, a
 *   plain lake, or a table without key columns; and what `convertToCurrentState` throws.
 */
export async function convertTables(
  spec: Spec,
  options: ConvertTablesOptions = {},
): Promise<ConvertTableOutcome[]> {
  let tables: TableSpecConfig[];
  if (options.table !== undefined) {
    const t = findTable(spec, options.table);
    if (t.writeMode !== 'upsert')
      throw new SinkError(
        'ICEBERG_CONVERT_REFUSED',
        tableTarget(t),
        `${tableTarget(t)} is writeMode: ${t.writeMode}, a change log by design: only upsert tables are converted to the current-state form`,
      );
    tables = [t];
  } else {
    tables = spec.tables.filter((t) => t.writeMode === 'upsert');
  }
  if (spec.lake.tableFormat === 'plain')
    throw new SinkError(
      'ICEBERG_CONVERT_REFUSED',
      spec.lake.uri,
      `lake.tableFormat is plain: its tables are Parquet objects, not Iceberg tables, and have no current-state form`,
    );
  const storeOptions = lakeStoreOptions(spec);
  const lake = openLakeStore(storeOptions);
  const lakeCatalog = openLakeCatalog(spec.lake.catalog, {
    store: lake.store,
    prefix: lake.prefix,
    targets: spec.tables.map(tableTarget),
    openFolder: (location) => openLocation(location, storeOptions),
  });
  const { catalog } = lakeCatalog;
  const nowMs = options.nowMs ?? Date.now;
  const outcomes: ConvertTableOutcome[] = [];
  for (const t of tables) {
    const target = tableTarget(t);
    const { ident, folder: lakeFolder } = lakeCatalog.table(target);
    // A file catalog's identifier has no namespace: the target is its name.
    const named = { target, ident: ident.namespace ? identText(ident) : ident.name };
    const loaded = await catalog.loadTable(ident);
    if (loaded === undefined) {
      outcomes.push({ ...named, status: 'no-table' });
      continue;
    }
    const folder = lakeCatalog.placesTables
      ? lakeCatalog.placesTables.folderAt(loaded.metadata.location)
      : lakeFolder;
    const meta = loaded.metadata;
    const schema = meta.schemas.find((s) => s['schema-id'] === meta['current-schema-id']);
    const keyColumns = (schema?.['identifier-field-ids'] ?? []).map(
      (id) => schema?.fields.find((f) => f.id === id)?.name ?? `#${id}`,
    );
    if (keyColumns.length === 0)
      throw new SinkError(
        'ICEBERG_CONVERT_REFUSED',
        target,
        `${identText(ident)} has no key columns (its schema has no identifier fields), so its rows cannot be told apart by key`,
      );
    options.onTable?.(target);
    const result = await convertToCurrentState(catalog, ident, folder, {
      keyColumns,
      nowMs,
      ...(options.onProgress ? { onProgress: (p: ConvertProgress) => options.onProgress?.(target, p) } : {}),
    });
    outcomes.push({ ...named, ...result });
  }
  return outcomes;
}
