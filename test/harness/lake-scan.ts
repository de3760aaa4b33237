/**
 * What a crash or end-to-end test reads as one lake table: every Parquet object of a plain table
 * (its folder's `*.parquet`), or the data files of an Iceberg table's current snapshot as
 * pyiceberg, a reader we did not write, plans its scan (test/readers/table_files.py) from the
 * newest metadata of the `file` catalog. The answer is a DuckDB `FROM` expression over exactly
 * those files, and the problems found on the way (a file a snapshot references that is gone).
 * A history table (docs/iceberg.md "History tables") is scanned the same way, and must also have
 * no delete file and the partition spec day(__commit_ts) (`historyScan`).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runReaderScript } from './readers.js';

export type TestTableFormat = 'plain' | 'iceberg';

export interface LakeScan {
  /**
   * `read_parquet([...], union_by_name = true)`: every row of every file read, rows a position
   * delete file deletes included (every version a current-state table's files ever held);
   * undefined when the table has no file.
   */
  readonly from: string | undefined;
  /**
   * The rows an Iceberg reader returns: `from` minus the rows the snapshot's position delete
   * files delete (a current-state table, decision 0026); `from` itself for a change log or a
   * plain table. Undefined when the table has no file.
   */
  readonly current: string | undefined;
  /** The files read (local paths). */
  readonly files: readonly string[];
  /** The position delete files the current snapshot applies (local paths; Iceberg only). */
  readonly deletes?: readonly string[];
  /** How many delete files the scan applies (an Iceberg table's, summed over its data files). */
  readonly deleteFiles: number;
  /** What is wrong with the table itself (referenced files missing). */
  readonly problems: readonly string[];
}

const quote = (p: string) => `'${p.replace(/'/g, "''")}'`;

/**
 * The newest `v<N>.metadata.json` of the `file` catalog's table in folder `tableDir` (a local
 * path), or undefined before the table's first commit.
 */
export function newestMetadataFile(tableDir: string): string | undefined {
  const hint = join(tableDir, 'metadata', 'version-hint.text');
  if (!existsSync(hint)) return undefined;
  // The hint may lag a commit (it is written after the swap): the newest version file wins.
  let version = Number(readFileSync(hint, 'utf8').trim());
  while (existsSync(join(tableDir, 'metadata', `v${version + 1}.metadata.json`))) version++;
  return join(tableDir, 'metadata', `v${version}.metadata.json`);
}

/**
 * `files` read as DuckDB rows minus the rows the position delete files `deletes` (local paths)
 * name: what an Iceberg reader returns. The columns are the files' own.
 */
export function withoutDeleted(files: readonly string[], deletes: readonly string[]): string {
  const data = `read_parquet([${files.map(quote).join(', ')}], union_by_name = true, filename = true, file_row_number = true)`;
  if (deletes.length === 0) return `(SELECT * EXCLUDE (filename, file_row_number) FROM ${data})`;
  return `(SELECT * EXCLUDE (filename, file_row_number) FROM ${data} AS d
    WHERE NOT EXISTS (SELECT 1 FROM read_parquet([${deletes.map(quote).join(', ')}]) AS x
      WHERE x.file_path = 'file://' || d.filename AND x.pos = d.file_row_number))`;
}

/**
 * The table in folder `tableDir` (a file:// lake's table folder) as a DuckDB scan. `plain` reads
 * every object of the folder; on a table that is an Iceberg table all the same (the lake's default
 * table format), `current` then also applies its current snapshot's position deletes.
 */
export async function lakeScan(tableDir: string, format: TestTableFormat = 'plain'): Promise<LakeScan> {
  if (format === 'plain') {
    const files = existsSync(tableDir)
      ? readdirSync(tableDir)
          .filter((f) => f.endsWith('.parquet') && !f.startsWith('_'))
          .map((f) => join(tableDir, f))
      : [];
    const from =
      files.length > 0
        ? `read_parquet(${quote(join(tableDir, '*.parquet'))}, union_by_name = true)`
        : undefined;
    // An Iceberg table read as objects: its deletes still apply to what a reader sees.
    const hasDeletes = existsSync(join(tableDir, 'deletes')) && newestMetadataFile(tableDir) !== undefined;
    if (!hasDeletes || from === undefined)
      return { from, current: from, files, deleteFiles: 0, problems: [] };
    const planned = await lakeScan(tableDir, 'iceberg');
    const deletes = planned.deletes ?? [];
    return { from, current: withoutDeleted(files, deletes), files, deleteFiles: 0, problems: [] };
  }
  const metadata = newestMetadataFile(tableDir);
  if (metadata === undefined)
    return { from: undefined, current: undefined, files: [], deleteFiles: 0, problems: [] };
  let answer: { files: { path: string; deletes: number }[]; deletes?: string[]; missing: string[] };
  try {
    answer = await runReaderScript('table_files.py', [
      '--catalog',
      'static',
      '--metadata',
      `file://${metadata}`,
    ]);
  } catch (e) {
    // A manifest list or manifest the current snapshot names is gone, or does not parse.
    return {
      from: undefined,
      current: undefined,
      files: [],
      deleteFiles: 0,
      problems: [`the table cannot be read: ${(e as Error).message}`],
    };
  }
  const files = answer.files.map((f) => (f.path.startsWith('file:') ? fileURLToPath(f.path) : f.path));
  const problems = answer.missing.map((p) => `${p}: a file the table's current snapshot references is gone`);
  const present = files.filter((f) => existsSync(f));
  const local = (p: string) => (p.startsWith('file:') ? fileURLToPath(p) : p);
  const deletes = (answer.deletes ?? []).map(local).filter((f) => existsSync(f));
  return {
    from:
      present.length > 0
        ? `read_parquet([${present.map(quote).join(', ')}], union_by_name = true)`
        : undefined,
    current: present.length > 0 ? withoutDeleted(present, deletes) : undefined,
    files: present,
    deletes,
    deleteFiles: answer.files.reduce((n, f) => n + f.deletes, 0),
    problems,
  };
}

/**
 * The history table in folder `tableDir` (an Iceberg change log beside a current state) as a
 * DuckDB scan of its current snapshot, with what is wrong with it as a history table among the
 * problems: a delete file (a history only appends), or a default partition spec other than exactly
 * one field, day(__commit_ts) (read from the newest metadata JSON).
 */
export async function historyScan(tableDir: string): Promise<LakeScan> {
  const scan = await lakeScan(tableDir, 'iceberg');
  const problems = [...scan.problems];
  if (scan.deleteFiles > 0) problems.push(`the history has ${scan.deleteFiles} delete files`);
  const metadata = newestMetadataFile(tableDir);
  if (metadata !== undefined) {
    // Only the spec and the schema are read: no 64-bit id is used.
    const m = JSON.parse(readFileSync(metadata, 'utf8')) as {
      'current-schema-id': number;
      schemas: { 'schema-id': number; fields: { id: number; name: string }[] }[];
      'default-spec-id': number;
      'partition-specs': { 'spec-id': number; fields: { 'source-id': number; transform: string }[] }[];
    };
    const schema = m.schemas.find((s) => s['schema-id'] === m['current-schema-id']);
    const commitTs = schema?.fields.find((f) => f.name === '__commit_ts')?.id;
    const spec = m['partition-specs'].find((s) => s['spec-id'] === m['default-spec-id']);
    const fields = spec?.fields ?? [];
    if (
      commitTs === undefined ||
      fields.length !== 1 ||
      fields[0]!.transform !== 'day' ||
      fields[0]!['source-id'] !== commitTs
    )
      problems.push(
        `the history's partition spec is not day(__commit_ts) once: ${JSON.stringify(fields)} (__commit_ts is field ${commitTs})`,
      );
  }
  return { ...scan, problems };
}
