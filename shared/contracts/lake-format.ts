/**
 * Lake format versions (docs/lake-format.md, docs/decisions/0014-lake-format-versions.md): how a
 * lake table's Parquet objects are laid out, recorded per table in its state and in every
 * object's footer (`tidemark.format`).
 *
 * - format 1: DataPage V1 and arrow-rs' default V1 encodings (dictionary, PLAIN fallback). Every
 *   engine of docs/reader-compatibility.md reads it. The default, and what every table written
 *   before formats existed is.
 * - format 2: arrow-rs writer version 2 (DataPage V2 pages; DELTA_BINARY_PACKED for integer and
 *   DELTA_BYTE_ARRAY for text/binary fallback pages, RLE for booleans; footer format version 2).
 *   Same logical types and columns as format 1 (`__op` stays a string). Older engines do not read
 *   it (Spark < 3.3 / Glue 3, Redshift Spectrum: docs/lake-format.md).
 *
 * A table keeps the format it was first written with: the spec's `lake.format` only decides a
 * table that has no state yet (`resolveLakeFormat`).
 */
import { TidemarkError } from './errors.js';

export type LakeFormat = 1 | 2;

export const LAKE_FORMATS: readonly LakeFormat[] = [1, 2];

/** The format of a table with no recorded format: what tidemark wrote before formats existed. */
export const DEFAULT_LAKE_FORMAT: LakeFormat = 1;

/** Footer key/value key carrying the object's format, as decimal text. */
export const FOOTER_FORMAT = 'tidemark.format';

export function isLakeFormat(v: unknown): v is LakeFormat {
  return (LAKE_FORMATS as readonly unknown[]).includes(v);
}

/**
 * The format a stored state records: undefined when it records none (written before formats,
 * i.e. format 1). A value this build does not know (a newer tidemark wrote it) is refused: writing
 * another format into that table would mix formats in it.
 */
export function parseRecordedFormat(where: string, v: unknown): LakeFormat | undefined {
  if (v === undefined) return undefined;
  if (isLakeFormat(v)) return v;
  throw new TidemarkError(
    'STATE_CORRUPT',
    `${where}: the stored state records lake format ${JSON.stringify(v)}, which this version of tidemark does not write (it writes ${LAKE_FORMATS.join(' and ')}); run the tidemark version that wrote it, or inspect the item`,
  );
}

/** What a run writes with, and the note to log when the spec asks for something else. */
export interface ResolvedLakeFormat {
  readonly format: LakeFormat;
  /** Set when the table keeps a recorded format that differs from the spec's `lake.format`. */
  readonly note?: string;
}

/**
 * The format a table writes with. A table with no state (`hasState` false) is new: it takes the
 * spec's format, which its first commit records. A table with state keeps its recorded format (no
 * recorded format: 1), whatever the spec says, so all of its objects share one layout; the note
 * says so when the two differ.
 */
export function resolveLakeFormat(
  table: string,
  configured: LakeFormat,
  hasState: boolean,
  recorded: LakeFormat | undefined,
): ResolvedLakeFormat {
  if (!hasState) return { format: configured };
  const format = recorded ?? DEFAULT_LAKE_FORMAT;
  if (format === configured) return { format };
  return {
    format,
    note: `${table}: keeps lake format ${format}${recorded === undefined ? ' (written before lake formats were recorded)' : ''}; lake.format: ${configured} applies to tables synced for the first time. To rewrite this table in format ${configured}, run tidemark reset --table ${table} --delete-objects (its objects are deleted, the next run syncs it again from the start); a reset that keeps the objects keeps the format`,
  };
}
