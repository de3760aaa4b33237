/**
 * Table formats (docs/iceberg.md, "Table format"): what a lake table IS, beside the Parquet layout
 * of its files (./lake-format.ts, `lake.format`). `iceberg`: an Apache Iceberg v2 table, its data
 * files committed through a catalog (docs/decisions/0024-iceberg-commits.md); `plain`: Parquet
 * objects only, the layout every table had before Iceberg (decision 0002).
 *
 * A table keeps the format it was first written in, recorded in its state. The spec's
 * `lake.tableFormat` decides a table synced for the first time (unset: Iceberg); for a table with
 * state it may only repeat the recorded format: a contradiction is refused, never silently
 * applied (a plain table's objects are not an Iceberg table's, and the reverse).
 */
import { TidemarkError } from './errors.js';

export const TABLE_FORMATS = ['iceberg', 'plain'] as const;
export type TableFormat = (typeof TABLE_FORMATS)[number];

/** The format of a new table when the spec sets none. */
export const DEFAULT_TABLE_FORMAT: TableFormat = 'iceberg';

/**
 * The format of a table that has state but records none: it was written before table formats
 * existed, as plain objects.
 */
export const UNRECORDED_TABLE_FORMAT: TableFormat = 'plain';

/** What the spec says: the format for new tables, and whether the operator set it explicitly. */
export interface ConfiguredTableFormat {
  readonly format: TableFormat;
  readonly explicit: boolean;
}

/** The spec's `lake.tableFormat` as the engine takes it (unset: Iceberg, not explicit). */
export function configuredTableFormat(setting: TableFormat | undefined): ConfiguredTableFormat {
  return setting === undefined
    ? { format: DEFAULT_TABLE_FORMAT, explicit: false }
    : { format: setting, explicit: true };
}

/**
 * The format a stored state records; undefined when it records none. A value this build does not
 * know (a newer tidemark wrote it) is refused.
 */
export function parseRecordedTableFormat(where: string, v: unknown): TableFormat | undefined {
  if (v === undefined) return undefined;
  if ((TABLE_FORMATS as readonly unknown[]).includes(v)) return v as TableFormat;
  throw new TidemarkError(
    'STATE_CORRUPT',
    `${where}: the stored state records table format ${JSON.stringify(v)}, which this version of tidemark does not write (it writes ${TABLE_FORMATS.join(' and ')}); run the tidemark version that wrote it, or inspect the item`,
  );
}

/**
 * The format a table writes with. A new table (`hasState` false: no state, or a state that never
 * committed anything) takes the configured format. A table with state keeps its recorded format
 * (none recorded: plain); an explicit setting that differs is refused with the way out.
 *
 * @throws TidemarkError `TABLE_FORMAT_MISMATCH` when `lake.tableFormat` is set and contradicts the
 *   table's recorded format.
 */
export function resolveTableFormat(
  table: string,
  configured: ConfiguredTableFormat,
  hasState: boolean,
  recorded: TableFormat | undefined,
): TableFormat {
  if (!hasState) return configured.format;
  const format = recorded ?? UNRECORDED_TABLE_FORMAT;
  if (!configured.explicit || configured.format === format) return format;
  throw new TidemarkError(
    'TABLE_FORMAT_MISMATCH',
    `${table}: lake.tableFormat is ${configured.format}, but the table was written as ${format}${recorded === undefined ? ' (before table formats were recorded)' : ''}; nothing was written. Remove lake.tableFormat to keep each table in its recorded format, or run tidemark reset --table ${table} --delete-objects to write it anew as ${configured.format}`,
  );
}
