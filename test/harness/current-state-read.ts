/**
 * A current-state Iceberg table (writeMode upsert, docs/decisions/0026-current-state-delete-form.md)
 * read AS IS by readers we did not write, and checked against the source's rows. The readers:
 * pyiceberg (test/readers/read_table.py, its scan applies the position deletes), icebird (over
 * `withFileFetch`) and Spark (a running `SparkSession`, the newest metadata file loaded). No
 * reader's rows are deduplicated: what a reader returns is the table, and it must hold no
 * `__op = d` row, exactly one row per key, each equal to the source's row, and no key the source
 * lacks. Earlier snapshots, sampled, are read too and must have the shape of a current state (one
 * row per key, no delete row): the source's state at such a snapshot is not known here. Owns only
 * the reading and the comparison; the caller owns the source's truth.
 */
import { readFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { icebergRead } from 'icebird';
import { withFileFetch } from './file-fetch.js';
import { newestMetadataFile } from './lake-scan.js';
import { runReaderScript, type SparkSession } from './readers.js';

export type CurrentStateReader = 'pyiceberg' | 'icebird' | 'spark';

type Row = Record<string, unknown>;

/** The rows `reader` reads from the current snapshot of the table in folder `tableDir`. */
export async function readCurrentState(
  tableDir: string,
  reader: CurrentStateReader,
  spark?: SparkSession,
): Promise<Row[]> {
  const metadata = newestMetadataFile(tableDir);
  if (metadata === undefined) return [];
  if (reader === 'pyiceberg') {
    const answer = await runReaderScript<{ rows: Row[] }>('read_table.py', [
      '--catalog',
      'static',
      '--metadata',
      pathToFileURL(metadata).href,
    ]);
    return answer.rows;
  }
  if (reader === 'icebird')
    return withFileFetch(() =>
      icebergRead({
        tableUrl: pathToFileURL(dirname(dirname(metadata))).href,
        metadataFileName: basename(metadata),
      }),
    ) as Promise<Row[]>;
  if (!spark) throw new Error('no Spark session');
  return (await spark.ask({ load: pathToFileURL(metadata).href })).rows;
}

/**
 * A `__op = d` row, or a key with more than one row, in one reader's read of a current state
 * (`label` names both): the wording the crash suites' mutants match.
 */
export function shapeProblems(
  label: string,
  rows: readonly Row[],
  key: string,
  canon = defaultCanon,
): string[] {
  const problems: string[] = [];
  const deletes = rows.filter((r) => r.__op === 'd').length;
  if (deletes > 0) problems.push(`${label}: ${deletes} rows are deletes (__op = d)`);
  const counts = new Map<string, number>();
  for (const r of rows) {
    const k = canon(key, r[key]) ?? 'null';
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  const repeated = [...counts.entries()].filter(([, n]) => n > 1);
  if (repeated.length > 0)
    problems.push(
      `${label}: ${repeated.length} keys have more than one row (e.g. ${repeated[0]![0]}: ${repeated[0]![1]} rows)`,
    );
  return problems;
}

/** What a current-state table must equal. */
export interface SourceTruth {
  /** The key column (one column). */
  readonly key: string;
  /** The compared columns, the key among them. */
  readonly columns: readonly string[];
  /** The source's rows by key: each the compared columns' values as text (null for NULL). */
  readonly rows: ReadonlyMap<string, readonly (string | null)[]>;
  /** Keys the table must hold (default: every source key); other source keys may be absent. */
  readonly required?: ReadonlySet<string>;
  /** A read value as the source's text (default: `String(v)`, null for null). */
  readonly canon?: (column: string, value: unknown) => string | null;
}

const defaultCanon = (_c: string, v: unknown) => (v === null || v === undefined ? null : String(v));

/**
 * What is wrong with `rows` (one reader's read of a current-state table, `label` naming both)
 * against `truth`, one line per kind of wrong: the wording the crash suites' mutants match.
 */
export function currentStateProblems(label: string, rows: readonly Row[], truth: SourceTruth): string[] {
  const canon = truth.canon ?? defaultCanon;
  const problems = shapeProblems(label, rows, truth.key, canon);
  const byKey = new Map<string, Row[]>();
  for (const r of rows) {
    const k = canon(truth.key, r[truth.key]) ?? 'null';
    const same = byKey.get(k);
    if (same) same.push(r);
    else byKey.set(k, [r]);
  }
  let missing = 0;
  let extra = 0;
  const wrong: string[] = [];
  for (const k of truth.required ?? truth.rows.keys()) if (!byKey.has(k)) missing++;
  for (const [k, rs] of byKey) {
    const want = truth.rows.get(k);
    if (want === undefined) {
      extra++;
      continue;
    }
    for (const r of rs) {
      const got = truth.columns.map((c) => canon(c, r[c]));
      if (JSON.stringify(got) !== JSON.stringify(want))
        wrong.push(`${k}: lake ${JSON.stringify(got)} source ${JSON.stringify(want)}`);
    }
  }
  if (missing > 0) problems.push(`${label}: ${missing} source rows have no lake row`);
  if (wrong.length > 0)
    problems.push(
      `${label}: ${wrong.length} lake rows differ from the source (${wrong.slice(0, 3).join('; ')})`,
    );
  if (extra > 0) problems.push(`${label}: ${extra} keys are in the lake but not in the source`);
  return problems;
}

/**
 * The table in `tableDir` read by pyiceberg, icebird and (when given) Spark, each checked against
 * `truth`; `table` names it in the problems. A reader that cannot read the table is a problem.
 */
export async function checkCurrentState(
  table: string,
  tableDir: string,
  truth: SourceTruth,
  spark?: SparkSession,
): Promise<{ problems: string[]; rows: number }> {
  const readers: CurrentStateReader[] = ['pyiceberg', 'icebird', ...(spark ? (['spark'] as const) : [])];
  const problems: string[] = [];
  let rows = 0;
  for (const reader of readers) {
    let read: Row[];
    try {
      read = await readCurrentState(tableDir, reader, spark);
    } catch (e) {
      problems.push(`${table} (${reader}): the table cannot be read: ${(e as Error).message.slice(0, 400)}`);
      continue;
    }
    if (reader === 'pyiceberg') rows = read.length;
    problems.push(...currentStateProblems(`${table} (${reader})`, read, truth));
  }
  return { problems, rows };
}

/**
 * Up to `samples` snapshots before the current one of the table in `tableDir` (evenly spread over
 * its history), each read by pyiceberg as of that snapshot: each must have the shape of a current
 * state (`shapeProblems`). Returns the problems and how many snapshots were read.
 */
export async function checkSampledSnapshots(
  table: string,
  tableDir: string,
  key: string,
  samples = 4,
): Promise<{ problems: string[]; read: number }> {
  const metadata = newestMetadataFile(tableDir);
  if (metadata === undefined) return { problems: [], read: 0 };
  // Snapshot ids are 64-bit: taken from the JSON text, never through a float; in the order the
  // file lists them (oldest first), the current one left out.
  const text = readFileSync(metadata, 'utf8');
  const current = /"current-snapshot-id"\s*:\s*(-?\d+)/.exec(text)?.[1];
  const earlier = [...new Set([...text.matchAll(/"snapshot-id"\s*:\s*(-?\d+)/g)].map((m) => m[1]!))].filter(
    (id) => id !== current,
  );
  if (earlier.length === 0) return { problems: [], read: 0 };
  const step = Math.max(1, Math.floor(earlier.length / samples));
  const picked = earlier.filter((_, i) => i % step === step - 1).slice(-samples);
  const problems: string[] = [];
  for (const id of picked) {
    try {
      const answer = await runReaderScript<{ rows: Row[] }>('read_table.py', [
        '--catalog',
        'static',
        '--metadata',
        pathToFileURL(metadata).href,
        '--snapshot-id',
        id,
      ]);
      problems.push(...shapeProblems(`${table} (pyiceberg, snapshot ${id})`, answer.rows, key));
    } catch (e) {
      problems.push(
        `${table} (pyiceberg, snapshot ${id}): the table cannot be read: ${(e as Error).message.slice(0, 400)}`,
      );
    }
  }
  return { problems, read: picked.length };
}
