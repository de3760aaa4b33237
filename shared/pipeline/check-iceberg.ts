/**
 * `tidemark check`'s Iceberg lines (docs/iceberg.md "Checked by tidemark check"): per table with
 * state, the table format it records against `lake.tableFormat` (line `tableFormat`, in the run's
 * own words: contracts/table-format.ts `resolveTableFormat`); and, when a table of the check would
 * write Iceberg, the lake's catalog: `file` needs a store that enforces conditional writes (line
 * `catalog`: `supportsConditionalWrites` on a throw-away object next to the lake probe), `glue`
 * its database (line `glue`: GetDatabase) and targets that map to distinct Glue tables (line
 * `glueNames`).
 *
 * Owns: which of these lines a spec gets, and which format each table would write, by the rule the
 * engine applies (shared/engine/incremental/run.ts and engine/cdc/recovery.ts: a state that
 * records no format and never wrote anything is a new table). Reads state only; its one write is
 * the conditional-write probe, deleted again. Never creates a Glue database or table. Returns
 * items, not lines: check.ts says where each belongs.
 */
import { lakeTargets, type Spec, type TableSpecConfig, tableTarget } from '../config/spec.js';
import { type CheckItem, failed, passed } from '../contracts/check.js';
import { TidemarkError } from '../contracts/errors.js';
import type { CursorStore } from '../contracts/state.js';
import {
  configuredTableFormat,
  parseRecordedTableFormat,
  resolveTableFormat,
  type TableFormat,
} from '../contracts/table-format.js';
import { type CdcTableState, cdcStateKey } from '../engine/cdc/state.js';
import { cdcStateTables } from '../engine/cdc/state-tables.js';
import { incrementalStateKey, parseIncrementalState } from '../engine/incremental/state.js';
import { GlueCatalog } from '../iceberg/glue-catalog.js';
import { glueNameCollisionError, glueNameCollisions } from '../iceberg/glue-names.js';
import { catalogPlacesTables, openLakeCatalog } from '../iceberg/open-catalog.js';
import { RestCatalog } from '../iceberg/rest-catalog.js';
import { redact } from '../observability/redact.js';
import { probeKey } from '../sink/layout.js';
import { supportsConditionalWrites } from '../sink/object-store.js';
import { openLakeStore, openLocation } from '../sink/open-lake.js';
import { lakeStoreOptions } from './open.js';

/** A table's `tableFormat` item. */
export interface TableFormatItem {
  readonly table: TableSpecConfig;
  readonly item: CheckItem;
}

/** What the state says about the tables' formats. */
export interface TableFormatCheck {
  /** One item per table whose state exists (or does not parse: `STATE_CORRUPT`). */
  readonly items: readonly TableFormatItem[];
  /** Some table would write Iceberg: its recorded format, or, for a new table, the spec's. */
  readonly iceberg: boolean;
}

/** A table's stored format: whether it counts as written (`hasState`), and what it records. */
interface StoredFormat {
  readonly hasState: boolean;
  readonly recorded: TableFormat | undefined;
}

/**
 * Per table, its recorded table format against `lake.tableFormat`. `store` undefined (the state
 * could not be opened; the state line says why): every table counts as new.
 */
export async function checkTableFormats(
  spec: Spec,
  tables: readonly TableSpecConfig[],
  store: Pick<CursorStore, 'load'> | undefined,
): Promise<TableFormatCheck> {
  const configured = configuredTableFormat(spec.lake.tableFormat);
  const cdcStates = new Map<string, Promise<Readonly<Record<string, CdcTableState>>>>();
  const items: TableFormatItem[] = [];
  let iceberg = false;
  for (const t of tables) {
    const target = tableTarget(t);
    let stored: StoredFormat;
    try {
      stored = store
        ? await storedFormat(spec, t, store, cdcStates)
        : { hasState: false, recorded: undefined };
    } catch (e) {
      // A state the run could not parse either is this table's failure; a store that cannot be
      // read (a DynamoDB table the first run creates) is the state line's, and the table new.
      if (e instanceof TidemarkError && e.code === 'STATE_CORRUPT')
        items.push({ table: t, item: withoutTarget(failed('tableFormat', e), target) });
      iceberg ||= configured.format === 'iceberg';
      continue;
    }
    if (!stored.hasState) {
      iceberg ||= configured.format === 'iceberg';
      continue;
    }
    const written = stored.recorded ?? 'plain';
    iceberg ||= written === 'iceberg';
    try {
      resolveTableFormat(target, configured, true, stored.recorded);
    } catch (e) {
      if (!(e instanceof TidemarkError) || e.code !== 'TABLE_FORMAT_MISMATCH') throw e;
      items.push({ table: t, item: withoutTarget(failed('tableFormat', e), target) });
      continue;
    }
    const since = stored.recorded === undefined ? ' (written before table formats were recorded)' : '';
    items.push({
      table: t,
      item: passed(
        'tableFormat',
        configured.explicit
          ? `written as ${written}${since}, as lake.tableFormat says`
          : `written as ${written}${since}; it keeps that format (lake.tableFormat is unset)`,
      ),
    });
  }
  return { items, iceberg };
}

/** The table's state as the engine reads it at a start (see the header). */
async function storedFormat(
  spec: Spec,
  t: TableSpecConfig,
  store: Pick<CursorStore, 'load'>,
  cdcStates: Map<string, Promise<Readonly<Record<string, CdcTableState>>>>,
): Promise<StoredFormat> {
  const target = tableTarget(t);
  if (t.mode === 'incremental') {
    const { value } = await store.load(incrementalStateKey(spec.pipeline, target));
    if (value === undefined) return { hasState: false, recorded: undefined };
    const state = parseIncrementalState(value, t.cursor);
    return {
      hasState: !(state.tableFormat === undefined && state.seq === 0),
      recorded: state.tableFormat,
    };
  }
  const key = cdcStateKey(spec.pipeline, t.source);
  let entries = cdcStates.get(t.source);
  if (!entries) {
    entries = store.load(key).then(({ value }) => {
      cdcStateTables(key, value);
      return (value?.tables ?? {}) as Record<string, CdcTableState>;
    });
    cdcStates.set(t.source, entries);
  }
  const entry = (await entries)[target];
  if (entry === undefined) return { hasState: false, recorded: undefined };
  const recorded = parseRecordedTableFormat(`${target} in ${key}`, entry.tableFormat);
  return { hasState: recorded !== undefined || entry.next !== undefined, recorded };
}

/** Where the lake is, for messages: its URI, and its endpoint when one is set. */
function lakeWhere(spec: Spec): string {
  return `${spec.lake.uri}${spec.lake.endpoint ? ` at ${redact(spec.lake.endpoint)}` : ''}`;
}

/**
 * The catalog's items, for a check in which some table would write Iceberg. `id` names the
 * conditional-write probe (beside the lake probe); `lakeWritable` false (the lake line failed)
 * skips that probe, which would fail for the same reason.
 */
export async function checkCatalog(spec: Spec, id: string, lakeWritable: boolean): Promise<CheckItem[]> {
  const config = spec.lake.catalog;
  switch (config.type) {
    case 'file':
      return lakeWritable ? [await conditionalWritesItem(spec, id)] : [];
    case 'glue':
      return [await glueDatabaseItem(spec), glueNamesItem(spec)];
    case 'rest':
      if (catalogPlacesTables(config)) return [await placedCatalogItem(spec)];
      return openedItems(spec);
    default:
      return openedItems(spec);
  }
}

/**
 * A catalog that places tables (S3 Tables): checked through the catalog only, never by listing or
 * deleting where it keeps the tables' files (S3 Tables allows neither): its config and namespace
 * answer (line `rest`).
 */
async function placedCatalogItem(spec: Spec): Promise<CheckItem> {
  const config = spec.lake.catalog;
  if (config.type !== 'rest') throw new Error('placedCatalogItem: not a rest catalog');
  try {
    const options = lakeStoreOptions(spec);
    const { catalog } = openLakeCatalog(config, {
      ...openLakeStore(options),
      openFolder: (location) => openLocation(location, options),
    });
    if (!(catalog instanceof RestCatalog)) throw new Error(`lake.catalog: ${catalog.kind}, not rest (a bug)`);
    const exists = await catalog.probeNamespace(config.namespace);
    return passed(
      'rest',
      `REST catalog ${redact(config.uri)}${config.warehouse ? ` (warehouse ${config.warehouse})` : ''}: namespace ${config.namespace} ${exists ? 'exists' : 'is created at the first commit'}; the catalog places each table's files itself, checked through the catalog only (nothing there is listed or deleted)`,
    );
  } catch (e) {
    return failed('rest', e);
  }
}

/** Any other catalog: it opens as the run opens it (a catalog this build cannot open is refused). */
function openedItems(spec: Spec): CheckItem[] {
  // openLakeCatalog refuses a catalog this build cannot open, as the run does.
  try {
    const lake = openLakeStore(lakeStoreOptions(spec));
    openLakeCatalog(spec.lake.catalog, lake);
    return [];
  } catch (e) {
    return [failed('catalog', e)];
  }
}

/** `file` catalog: the lake store refuses a second create-only put of a test object. */
async function conditionalWritesItem(spec: Spec, id: string): Promise<CheckItem> {
  const where = lakeWhere(spec);
  try {
    const { store, prefix } = openLakeStore(lakeStoreOptions(spec));
    const key = probeKey(prefix, `${id}.conditional`);
    if (await supportsConditionalWrites(store, key)) {
      return passed(
        'catalog',
        `file catalog: ${where} enforces conditional writes (a second create-only put of test object ${store.uri(key)} was refused; it was deleted), so each Iceberg metadata version has one writer`,
      );
    }
    return {
      check: 'catalog',
      status: 'fail',
      code: 'ICEBERG_CONDITIONAL_WRITES_UNSUPPORTED',
      message: `file catalog: ${where} ignores conditional writes (a second create-only put with If-None-Match: * of test object ${store.uri(key)} replaced it instead of failing with 412), so two commits could take one metadata version of an Iceberg table; use a store that enforces If-None-Match (AWS S3, MinIO; moto locally), or lake.catalog: {type: glue, database: ...}, or lake.tableFormat: plain`,
    };
  } catch (e) {
    // Store errors name the object, not the endpoint: say where it went.
    const item = failed('catalog', e);
    return spec.lake.endpoint ? { ...item, message: `${where}: ${item.message}` } : item;
  }
}

/** `glue` catalog: its database exists and may be read (GetDatabase). */
async function glueDatabaseItem(spec: Spec): Promise<CheckItem> {
  const config = spec.lake.catalog;
  if (config.type !== 'glue') throw new Error('glueDatabaseItem: not a glue catalog');
  const at = config.endpoint ? ` at ${redact(config.endpoint)}` : config.region ? ` in ${config.region}` : '';
  const of = config.catalogId ? ` of catalog ${config.catalogId}` : '';
  try {
    const { catalog } = openLakeCatalog(config, openLakeStore(lakeStoreOptions(spec)));
    if (!(catalog instanceof GlueCatalog)) throw new Error(`lake.catalog: ${catalog.kind}, not glue (a bug)`);
    await catalog.probeDatabase(config.database);
    return passed(
      'glue',
      `Glue database ${config.database}${of} exists${at}; each Iceberg table is created in it on its first commit`,
    );
  } catch (e) {
    return failed('glue', e);
  }
}

/** `glue` catalog: the spec's targets map to distinct Glue tables (all of them: the run refuses any collision). */
function glueNamesItem(spec: Spec): CheckItem {
  const config = spec.lake.catalog;
  if (config.type !== 'glue') throw new Error('glueNamesItem: not a glue catalog');
  const targets = [...new Set(spec.tables.flatMap(lakeTargets))];
  const collisions = glueNameCollisions(targets, { database: config.database });
  const [first, ...more] = collisions;
  if (first) return failed('glueNames', glueNameCollisionError(first, more.length));
  return passed(
    'glueNames',
    `the ${targets.length} lake target(s) map to ${targets.length} distinct Glue table(s) in ${config.database}`,
  );
}

/** Drops a leading `<target>: ` from a message: the line names the table already. */
function withoutTarget(item: CheckItem, target: string): CheckItem {
  return item.message.startsWith(`${target}: `)
    ? { ...item, message: item.message.slice(target.length + 2) }
    : item;
}
