/**
 * What every SQL driver shares, whatever the dialect: incremental page request checks, a page
 * read in statements under its byte budget, the empty page, one-time warnings, and
 * introspection's table-name split, column exclusions and "did you mean" table suggestions.
 * Dialect SQL stays in each driver; this module never names a database client.
 */
import { DataError, SourceError } from '../contracts/errors.js';
import type { IncrementalPage, IncrementalResult, Warning } from '../contracts/source.js';
import type { Schema } from '../dataplane/schema.js';

/** Refuses a page size that is not a positive integer. */
export function checkPageSize(req: IncrementalPage): void {
  if (!Number.isSafeInteger(req.pageSize) || req.pageSize < 1) {
    throw new DataError(`${req.table.source}: page size must be a positive integer, got ${req.pageSize}`);
  }
}

/**
 * The byte side of one page read: counts the page's data bytes row by row (the caller passes
 * `BatchEncoder.dataBytes`, or the running sum of `rowBytes` on the row path, after each row) and
 * says when the page is full. The row that reaches `pageBytes` is kept; the page closes after it,
 * so the next page starts after the last row kept. A page closed by bytes always reports `more`
 * (the reader stops before it could know), and the next read finds out.
 */
export class PageBudget {
  readonly pageBytes: number;
  readonly maxRowBytes: number;
  /** Data bytes of the rows added so far. */
  bytes = 0;
  /** A row brought the page to `pageBytes`: read no further. */
  full = false;

  constructor(req: IncrementalPage) {
    this.pageBytes = limitOf(req, 'pageBytes', req.pageBytes);
    this.maxRowBytes = limitOf(req, 'maxRowBytes', req.maxRowBytes);
  }

  /** Records one more row, the page now holding `bytes`; returns the row's own bytes. */
  add(bytes: number): number {
    const row = bytes - this.bytes;
    this.bytes = bytes;
    if (bytes >= this.pageBytes) this.full = true;
    return row;
  }
}

/**
 * How many rows one statement of a page asks for: all that `pageSize` still allows when there is
 * no byte budget or no size seen yet; else as many as the budget still holds at `rowBytes` each,
 * and at least twice the previous statement's, so a page needs few statements even when the
 * first rows were much bigger than the rest.
 */
export function rowsToAsk(
  budget: PageBudget,
  rest: number,
  rowBytes: number | undefined,
  previous: number,
): number {
  if (!Number.isFinite(budget.pageBytes) || rowBytes === undefined || rowBytes <= 0) return rest;
  const fit = Math.ceil((budget.pageBytes - budget.bytes) / rowBytes);
  return Math.max(1, Math.min(rest, Math.max(fit, 2 * previous)));
}

function limitOf(req: IncrementalPage, name: string, v: number | undefined): number {
  if (v === undefined) return Number.POSITIVE_INFINITY;
  if (!Number.isSafeInteger(v) || v < 1)
    throw new DataError(`${req.table.source}: ${name} must be a positive integer, got ${v}`);
  return v;
}

/**
 * After one statement of a page (both drivers read a page in statements sized by `rowsToAsk`):
 * whether the page is done and, if so, whether more rows follow. `appended` counts the page's rows
 * so far, `got` the rows this statement returned (its extra look-ahead row included), `asked` its
 * LIMIT. Undefined: read the next statement.
 */
export function pageOutcome(
  budget: PageBudget,
  pageSize: number,
  appended: number,
  stmt: { readonly got: number; readonly taken: number; readonly limit: number },
): { readonly more: boolean } | undefined {
  if (budget.full) return { more: true };
  if (appended === pageSize) return { more: stmt.got > stmt.taken };
  if (stmt.got < stmt.limit) return { more: false };
  return undefined;
}

/** What one statement of a page did: rows added to the page, rows returned (the look-ahead row included). */
export interface StatementRead {
  readonly appended: number;
  readonly got: number;
}

/** Bytes per row of the last page read with a byte budget, per keyset: the first guess of the next page. */
const rowBytesSeen = new WeakMap<object, number>();

/**
 * Reads one page in statements, as both drivers do: each asks for `rowsToAsk` rows (one more
 * when it may end the page by rows: that row tells `more`), `read` runs it after the last row
 * kept (`limit` its LIMIT, `rows` the rows it may add, `appended` the page's rows so far), until
 * `pageOutcome` says the page is done. `keyset`, the driver's keyset plan, keys the bytes per row
 * remembered for its next page. Once per statement, never per row.
 */
export async function readStatements(
  budget: PageBudget,
  pageSize: number,
  keyset: object,
  read: (limit: number, rows: number, appended: number) => Promise<StatementRead>,
): Promise<{ readonly appended: number; readonly more: boolean }> {
  let appended = 0;
  let asked = 0;
  for (;;) {
    const rest = pageSize - appended;
    const rows = rowsToAsk(
      budget,
      rest,
      appended > 0 ? budget.bytes / appended : rowBytesSeen.get(keyset),
      asked,
    );
    asked = rows;
    // Only a statement that may end the page by rows asks for one more: it tells `more`.
    const limit = rows === rest ? rows + 1 : rows;
    const r = await read(limit, rows, appended);
    appended += r.appended;
    const done = pageOutcome(budget, pageSize, appended, { got: r.got, taken: r.appended, limit });
    if (done) {
      if (appended > 0 && Number.isFinite(budget.pageBytes))
        rowBytesSeen.set(keyset, budget.bytes / appended);
      return { appended, more: done.more };
    }
  }
}

/**
 * The table's columns of a resolved wire schema, in its order, matched by name: what a batch
 * reader selects (then the key columns the schema leaves out, for the resume key).
 */
export function dataColumns<C extends { readonly name: string }>(
  table: { readonly source: string; readonly columns: readonly C[] },
  schema: Schema,
): C[] {
  return schema.columns.map((c) => {
    const col = table.columns.find((x) => x.name === c.name);
    if (!col) {
      throw new DataError(
        `${table.source}: column "${c.name}" of the resolved schema is not in the table any more; re-introspect the table`,
      );
    }
    return col;
  });
}

/** A row's key for messages: `name=text` pairs, each text cut to 64 characters. */
export function describeKey(names: readonly string[], texts: readonly (string | null)[]): string {
  return names
    .map((name, i) => {
      const t = texts[i];
      if (t === null || t === undefined) return `${name}=NULL`;
      return `${name}=${t.length > 64 ? `${t.slice(0, 64)}...` : t}`;
    })
    .join(', ');
}

/** A page with nothing in it: resume where we were. */
export function emptyResult<T>(
  req: IncrementalPage,
  page: T,
  warnings: readonly Warning[],
): IncrementalResult<T> {
  return { next: req.after, page, more: false, ...(warnings.length > 0 ? { warnings } : {}) };
}

/** Adds one-time warnings (if any) in front of a page result's own. */
export function withWarnings<T>(
  r: IncrementalResult<T>,
  extra: readonly Warning[] | undefined,
): IncrementalResult<T> {
  if (!extra || extra.length === 0) return r;
  return { ...r, warnings: [...extra, ...(r.warnings ?? [])] };
}

/**
 * Validates `exclude` against the table's columns: an unknown name is a typo, and a primary-key
 * column cannot be left out (the lake needs it to resolve row versions). Returns the set.
 */
export function exclusions(
  table: string,
  exclude: readonly string[] | undefined,
  columnNames: readonly string[],
  primaryKey: readonly string[],
): Set<string> {
  const set = new Set(exclude ?? []);
  for (const name of set) {
    if (!columnNames.includes(name)) {
      throw new SourceError(
        'SOURCE_COLUMN_MISSING',
        `${table}: excluded column "${name}" does not exist; columns are ${columnNames.join(', ')}`,
      );
    }
    if (primaryKey.includes(name)) {
      throw new SourceError(
        'SOURCE_COLUMN_MISSING',
        `${table}: primary-key column "${name}" cannot be excluded (the lake needs it to resolve row versions)`,
      );
    }
  }
  return set;
}

/**
 * Splits a spec table name at its first dot into its container (schema, database) and table;
 * `form` is the expected form as the refusal shows it (`schema.table (e.g. public.orders)`).
 */
export function splitQualified(source: string, form: string): readonly [string, string] {
  const dot = source.indexOf('.');
  if (dot <= 0 || dot === source.length - 1) {
    throw new SourceError('SOURCE_TABLE_MISSING', `table "${source}" must be written as ${form}`);
  }
  return [source.slice(0, dot), source.slice(dot + 1)];
}

/** Up to three of `candidates` close to `target` (case-insensitive edit distance), closest first. */
export function similarNames(target: string, candidates: readonly string[]): string[] {
  const t = target.toLowerCase();
  return candidates
    .map((name) => ({ name, d: editDistance(name.toLowerCase(), t) }))
    .filter((x) => x.d <= Math.max(2, Math.floor(t.length / 4)))
    .sort((a, b) => a.d - b.d || a.name.localeCompare(b.name))
    .slice(0, 3)
    .map((x) => x.name);
}

/** Levenshtein distance (small strings only). */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length]!;
}
