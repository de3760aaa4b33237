/**
 * What a crash or end-to-end test reads as one lake table: every Parquet object of a plain table
 * (its folder's `*.parquet`), or the data files of an Iceberg table's current snapshot as
 * pyiceberg, a reader we did not write, plans its scan (test/readers/table_files.py) from the
 * newest metadata of the `file` catalog. The answer is a DuckDB `FROM` expression over exactly
 * those files, and the problems found on the way (a file a snapshot references that is gone).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runReaderScript } from './readers.js';

export type TestTableFormat = 'plain' | 'iceberg';

export interface LakeScan {
  /** `read_parquet([...], union_by_name = true)`; undefined when the table has no file. */
  readonly from: string | undefined;
  /** The files read (local paths). */
  readonly files: readonly string[];
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

/** The table in folder `tableDir` (a file:// lake's table folder) as a DuckDB scan. */
export async function lakeScan(tableDir: string, format: TestTableFormat = 'plain'): Promise<LakeScan> {
  if (format === 'plain') {
    const files = existsSync(tableDir)
      ? readdirSync(tableDir)
          .filter((f) => f.endsWith('.parquet') && !f.startsWith('_'))
          .map((f) => join(tableDir, f))
      : [];
    return {
      from:
        files.length > 0
          ? `read_parquet(${quote(join(tableDir, '*.parquet'))}, union_by_name = true)`
          : undefined,
      files,
      problems: [],
    };
  }
  const metadata = newestMetadataFile(tableDir);
  if (metadata === undefined) return { from: undefined, files: [], problems: [] };
  let answer: { files: { path: string }[]; missing: string[] };
  try {
    answer = await runReaderScript('table_files.py', [
      '--catalog',
      'static',
      '--metadata',
      `file://${metadata}`,
    ]);
  } catch (e) {
    // A manifest list or manifest the current snapshot names is gone, or does not parse.
    return { from: undefined, files: [], problems: [`the table cannot be read: ${(e as Error).message}`] };
  }
  const files = answer.files.map((f) => (f.path.startsWith('file:') ? fileURLToPath(f.path) : f.path));
  const problems = answer.missing.map((p) => `${p}: a file the table's current snapshot references is gone`);
  const present = files.filter((f) => existsSync(f));
  return {
    from:
      present.length > 0
        ? `read_parquet([${present.map(quote).join(', ')}], union_by_name = true)`
        : undefined,
    files: present,
    problems,
  };
}
