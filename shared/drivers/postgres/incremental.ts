/**
 * Incremental pages of a Postgres table: keyset pagination on (cursor, primary key) below the
 * safe upper bound (bound.ts), through two readers that return the same page:
 *   - `readRowPage`: a plain SELECT with bind parameters, every value read as its text output
 *     and parsed exactly (the row-map path, and the oracle the columnar path is tested against);
 *   - `readBatchPage`: the same SELECT inside `COPY ... TO STDOUT (FORMAT binary)`, decoded
 *     straight into the wire encoder (the fast path).
 *
 * Owns: the page SQL (one builder for both readers), keyset literals, `more` (LIMIT n + 1) and
 * the resume token. Both readers re-check the selected columns' catalog types after their
 * statements and before returning a page (`checkColumnsUnchanged`), so a column whose type
 * changed mid-run stops the table with a SchemaChangedError instead of reaching the lake. Must
 * never read past the bound, never compare a cursor through a lossy form (keys travel as exact
 * text cast to the column's own type), and never build per-row objects on the batch path.
 */
import { DataError, RowTooLargeError } from '../../contracts/errors.js';
import type { IncrementalPage, IncrementalResult, Warning } from '../../contracts/source.js';
import type { Clock } from '../../contracts/state.js';
import { type Batch, newBatch, type WriteMode } from '../../dataplane/batch.js';
import { BatchEncoder, rowBytes } from '../../dataplane/encoder.js';
import { Op } from '../../dataplane/metadata.js';
import type { Schema } from '../../dataplane/schema.js';
import { SchemaChangedError } from '../../dataplane/schema-rules.js';
import { decodeKey, encodeKey } from '../../position/key-codec.js';
import { ordinalHex } from '../../position/position.js';
import { checkPageSize, dataColumns, describeKey, emptyResult, PageBudget, readStatements } from '../page.js';
import type { ValueContext } from '../value-context.js';
import { highWaterBound, timeBound } from './bound.js';
import type { Sql } from './connect.js';
import { type ColumnInfo, checkColumnsUnchanged, type KeysetPlan, type TablePlan } from './introspect.js';
import { keyText, parseColumnText, quoteIdent, quoteLiteral } from './types.js';
import {
  ChangedWidthError,
  CopyBinaryDecoder,
  type CopyField,
  decodeBinaryValue,
  TupleTooLargeError,
} from './wire/binary-rows.js';
import { streamBinaryCopy } from './wire/copy-stream.js';

/** Bound settings of a page read (PostgresSourceOptions documents them). */
export interface BoundSettings {
  readonly lagMs: number;
  readonly stallAfterMs: number;
  readonly settleMs: number;
  /** Writers' zone for timestamp/date cursors (SqlSourceOptions.cursorTimeZone). */
  readonly cursorTimeZone?: string;
}

/** The alias of the table in page statements. */
const TABLE_ALIAS = 'src';

/** Largest number of rows a batch encoder allocates for up front; it grows past it. */
const MAX_INITIAL_CAPACITY = 65_536;

/** The bound of one page, as a predicate on the cursor; `empty` means read nothing now. */
type PageBound =
  | { readonly kind: 'below'; readonly text: string; readonly warnings: Warning[] }
  | { readonly kind: 'atMost'; readonly text: string; readonly warnings: Warning[] }
  | { readonly kind: 'empty'; readonly warnings: Warning[] };

/** Reads the page's bound. Runs BEFORE the page statement (bound.ts explains why). */
async function readBound(
  sql: Sql,
  plan: TablePlan,
  keyset: KeysetPlan,
  s: BoundSettings,
): Promise<PageBound> {
  if (keyset.bound.kind === 'time') {
    const b = await timeBound(sql, keyset.bound.type, s.lagMs, s.stallAfterMs, s.cursorTimeZone);
    return { kind: 'below', text: b.literal, warnings: b.warnings };
  }
  const hw = await highWaterBound(
    sql,
    plan.qualified,
    quoteIdent(keyset.cursor.name),
    s.settleMs,
    s.stallAfterMs,
  );
  if (hw.held || hw.literal === null) return { kind: 'empty', warnings: hw.warnings };
  return { kind: 'atMost', text: hw.literal, warnings: hw.warnings };
}

/**
 * `readBound`, where a table or cursor column that is gone (the bound statement reads the
 * table for a high-water cursor) is a schema change, as in the page statement.
 */
async function boundOrSchemaChange(
  sql: Sql,
  plan: TablePlan,
  keyset: KeysetPlan,
  settings: BoundSettings,
  selected: readonly ColumnInfo[],
  req: IncrementalPage,
): Promise<PageBound> {
  try {
    return await readBound(sql, plan, keyset, settings);
  } catch (e) {
    throw await schemaFailure(sql, plan, selected, req.table.target, e, req.signal);
  }
}

/** The SQL type a bound literal is cast to. */
function boundCast(keyset: KeysetPlan): string {
  return keyset.bound.kind === 'time' ? keyset.bound.type : keyset.cursor.castType;
}

/**
 * The page statement. `after` and `bound` are SQL expressions already cast to the key types
 * (bind parameters for the row path, quoted literals for COPY).
 */
function pageSql(
  plan: TablePlan,
  keyset: KeysetPlan,
  select: readonly string[],
  after: readonly string[] | undefined,
  bound: { op: '<' | '<='; expr: string },
  limit: number,
): string {
  // Keys are qualified with the table alias: an unqualified ORDER BY name would bind to a
  // select-list output of the same name, e.g. `"ip"::text`, and order by its text instead.
  const keys = keyset.keys.map((k) => `${TABLE_ALIAS}.${quoteIdent(k.name)}`);
  const cursor = keys[0]!;
  // The row comparison (c, pk...) > (...) is one btree range on an index over (c, pk...);
  // without a keyset (first page) NULL cursors are excluded explicitly (the bound excludes them
  // too, but say it: NULL cursors are never synced, by policy).
  const from =
    after === undefined
      ? `${cursor} IS NOT NULL`
      : keys.length === 1
        ? `${cursor} > ${after[0]}`
        : `(${keys.join(', ')}) > (${after.join(', ')})`;
  return (
    `SELECT ${select.map((e, i) => `${e} AS f${i}`).join(', ')} FROM ${plan.qualified} AS ${TABLE_ALIAS}` +
    ` WHERE ${from} AND ${cursor} ${bound.op} ${bound.expr}` +
    ` ORDER BY ${keys.join(', ')} LIMIT ${limit}`
  );
}

/** The decoded `after` token as key texts, or undefined for the first page. */
function afterTexts(keyset: KeysetPlan, after: string): string[] | undefined {
  if (after === '') return undefined;
  const values = decodeKey(keyset.types, after);
  return values.map((v, i) => keyText(keyset.types[i]!, v));
}

/** The context a value of column `c` is parsed in (errors name the table and column). */
export function ctxOf(plan: TablePlan, c: ColumnInfo): ValueContext {
  return { table: plan.source, column: c.name };
}

/**
 * The binary COPY fields of `selected` (the data columns, then hidden key columns): the first
 * `dataCount` write into the encoder's column writers, the rest are read for the keyset only.
 */
export function copyFields(
  plan: TablePlan,
  selected: readonly ColumnInfo[],
  dataCount: number,
  enc: BatchEncoder,
): CopyField[] {
  return selected.map((c, i) => ({
    wire: c.read.wire,
    list: c.read.list,
    writer: i < dataCount ? enc.col(i) : undefined,
    ctx: ctxOf(plan, c),
  }));
}

/**
 * Row path: the page as row maps in the exact value universe (keys = `plan.schema` column
 * names). Rows past the bound are left for a later page.
 */
export async function readRowPage(
  sql: Sql,
  plan: TablePlan,
  keyset: KeysetPlan,
  req: IncrementalPage,
  settings: BoundSettings,
): Promise<IncrementalResult<Record<string, unknown>[]>> {
  checkPageSize(req);
  const afterValues = afterTexts(keyset, req.after);
  const data = plan.schema.columns.map((c) => plan.columns.find((x) => x.name === c.name)!);
  const hidden = keyset.keys.filter((k) => !data.includes(k));
  const selected = [...data, ...hidden];
  const bound = await boundOrSchemaChange(sql, plan, keyset, settings, selected, req);
  if (bound.kind === 'empty') return emptyResult(req, [], bound.warnings);

  const params: string[] = [];
  // `$n::text::type`, not `$n::type`: postgres.js serializes a parameter by the type the server
  // describes for it, and for timestamps that means through a millisecond JS Date. Typed as
  // text, the exact text goes over the wire untouched and Postgres casts it.
  const param = (text: string, cast: string) => {
    params.push(text);
    return `$${params.length}::text::${cast}`;
  };
  const after = afterValues?.map((t, i) => param(t, keyset.keys[i]!.castType));
  const boundExpr = param(bound.text, boundCast(keyset));
  const q = pageSql(
    plan,
    keyset,
    selected.map((c) => c.read.expr),
    after,
    { op: bound.kind === 'below' ? '<' : '<=', expr: boundExpr },
    req.pageSize + 1,
  );
  // raw(): every value as the bytes of its text output, untouched by postgres.js' parsers (which
  // would turn timestamps into millisecond Dates and JSON into objects).
  let raw: (Buffer | null)[][];
  try {
    raw = (await sql.unsafe(q, params).raw()) as unknown as (Buffer | null)[][];
  } catch (e) {
    throw await schemaFailure(sql, plan, selected, req.table.target, e, req.signal);
  }
  // Before parsing: a value whose column changed type must not be parsed as the old type.
  if (raw.length > 0) await checkColumnsUnchanged(sql, plan, selected, req.table.target);

  // The same byte budget as the batch path, counted from the row maps (rowBytes equals what
  // the encoder adds for the row), so both paths close the page after the same row.
  const budget = new PageBudget(req);
  let n = Math.min(raw.length, req.pageSize);
  const rows: Record<string, unknown>[] = [];
  let lastValues: unknown[] = [];
  for (let r = 0; r < n; r++) {
    const texts = raw[r]!;
    const values = selected.map((c, i) =>
      parseColumnText(c.read, texts[i]?.toString('utf8') ?? null, ctxOf(plan, c)),
    );
    const row: Record<string, unknown> = {};
    for (let i = 0; i < data.length; i++) row[data[i]!.name] = values[i];
    const size = budget.add(budget.bytes + rowBytes(plan.schema, row));
    if (size > budget.maxRowBytes) {
      const keyTexts = keyset.keys.map((k) => texts[selected.indexOf(k)]?.toString('utf8') ?? null);
      throw rowTooLarge(plan, keyset, keyTexts, size, budget.maxRowBytes, false);
    }
    rows.push(row);
    lastValues = values;
    if (budget.full) n = r + 1;
  }
  if (n === 0) return emptyResult(req, rows, bound.warnings);
  const keyValues = keyset.keys.map((k) => lastValues[selected.indexOf(k)]);
  return {
    next: encodeKey(keyset.types, keyValues),
    page: rows,
    more: budget.full || raw.length > req.pageSize,
    ...(bound.warnings.length > 0 ? { warnings: bound.warnings } : {}),
  };
}

/** The columnar page request (IncrementalPage plus what the batch needs). */
export interface BatchPageRequest extends IncrementalPage {
  readonly schema: Schema;
  readonly writeMode: WriteMode;
}

/**
 * Batch path: the same page as `readRowPage`, through binary COPY into one wire-schema batch
 * whose bytes equal `encodeRows` of the row path's rows (same `__ingest_ts` clock reading).
 * Columns follow `req.schema` (the engine's resolved schema), matched to the table by name.
 *
 * With a byte budget the page may take several statements: each asks for about as many rows as
 * the budget still holds at the bytes per row seen so far (`rowsToAsk`), and the next one
 * continues after the last row kept, until the budget, `pageSize` or the end of the rows. A
 * statement the budget fills before its end (rows bigger than expected) is cancelled. The page
 * is the same whatever the statements were: rows in keyset order up to the first that reaches
 * the budget, below one bound read before the first statement.
 */
export async function readBatchPage(
  sql: Sql,
  plan: TablePlan,
  keyset: KeysetPlan,
  req: BatchPageRequest,
  settings: BoundSettings,
  clock: Clock,
): Promise<IncrementalResult<Batch | undefined>> {
  checkPageSize(req);
  const data = dataColumns(plan, req.schema);
  const hidden = keyset.keys.filter((k) => !data.includes(k));
  const selected = [...data, ...hidden];
  const bound = await boundOrSchemaChange(sql, plan, keyset, settings, selected, req);
  if (bound.kind === 'empty') return emptyResult(req, undefined, bound.warnings);
  const enc = new BatchEncoder(req.schema, {
    phase: 'incremental',
    capacity: Math.min(req.pageSize, MAX_INITIAL_CAPACITY),
  });
  const fields = copyFields(plan, selected, data.length, enc);
  const budget = new PageBudget(req);
  const statement: CopyStatement = { sql, plan, keyset, selected, fields, enc, budget, bound, req };

  let after = afterTexts(keyset, req.after);
  let lastKey: unknown[] | undefined;
  let read: { readonly appended: number; readonly more: boolean };
  try {
    read = await readStatements(budget, req.pageSize, keyset, async (limit, rows, kept) => {
      const r = await copyRows(statement, after, limit, rows, kept);
      if (r.lastKey) {
        lastKey = r.lastKey;
        after = lastKey.map((v, k) => keyText(keyset.types[k]!, v));
      }
      return { appended: r.appended, got: r.tuples };
    });
  } catch (e) {
    throw await schemaFailure(sql, plan, selected, req.table.target, e, req.signal);
  }
  const { appended, more } = read;
  // After the last statement, before the batch exists: nothing of a changed page is returned.
  // A page that read nothing returns nothing, and skips the query.
  if (appended > 0) await checkColumnsUnchanged(sql, plan, selected, req.table.target);

  if (appended === 0 || lastKey === undefined) return emptyResult(req, undefined, bound.warnings);
  const { posPrefix, ordinalBase } = req;
  const record = enc.finish(BigInt(clock()) * 1_000_000n);
  const batch = newBatch({
    table: req.table.target,
    record,
    watermark: posPrefix + ordinalHex(ordinalBase + appended - 1),
    writeMode: req.writeMode,
  });
  return {
    next: encodeKey(keyset.types, lastKey),
    page: batch,
    more,
    ...(bound.warnings.length > 0 ? { warnings: bound.warnings } : {}),
  };
}

/** What every statement of one page shares. */
interface CopyStatement {
  readonly sql: Sql;
  readonly plan: TablePlan;
  readonly keyset: KeysetPlan;
  readonly selected: readonly ColumnInfo[];
  readonly fields: readonly CopyField[];
  readonly enc: BatchEncoder;
  readonly budget: PageBudget;
  readonly bound: Extract<PageBound, { kind: 'below' | 'atMost' }>;
  readonly req: BatchPageRequest;
}

/**
 * One COPY statement of a page: up to `limit` rows after the key `after` (key texts; undefined:
 * from the start), appending at most `rows` of them to the page's encoder (ordinals continuing
 * after `appended`). Returns what it appended, the tuples it saw and the last row's key values.
 */
async function copyRows(
  st: CopyStatement,
  after: readonly string[] | undefined,
  limit: number,
  rows: number,
  appended: number,
): Promise<{ appended: number; tuples: number; lastKey: unknown[] | undefined }> {
  const { sql, plan, keyset, selected, enc, budget, bound, req } = st;
  const select = pageSql(
    plan,
    keyset,
    selected.map((c) => c.read.expr),
    after?.map((t, i) => `${quoteLiteral(t)}::${keyset.keys[i]!.castType}`),
    { op: bound.kind === 'below' ? '<' : '<=', expr: `${quoteLiteral(bound.text)}::${boundCast(keyset)}` },
    limit,
  );
  const keyFields = keyset.keys.map((k) => selected.indexOf(k));
  const { posPrefix, ordinalBase } = req;
  const lastKeyValues = (): unknown[] =>
    keyset.keys.map((k, i) => {
      const span = decoder.lastKey(i)!;
      return decodeBinaryValue(k.read.wire, span.buf, span.start, span.length, ctxOf(plan, k));
    });
  const decoder = new CopyBinaryDecoder(
    st.fields,
    keyFields,
    rows,
    (i) => {
      enc.appendMetaOrdinal(Op.update, posPrefix, ordinalBase + appended + i, null, false);
      const size = budget.add(enc.dataBytes);
      if (size > budget.maxRowBytes) {
        const texts = lastKeyValues().map((v, k) => keyText(keyset.types[k]!, v));
        throw rowTooLarge(plan, keyset, texts, size, budget.maxRowBytes, false);
      }
      return budget.full;
    },
    // A tuple over the cap (by its wire size, within a few bytes per field of its Arrow size for
    // the types big rows are made of; the Arrow size is checked above once decoded) is refused
    // before it is decoded into the page, as soon as its length words show it: on a tapped socket
    // (copy-tap.ts) before the rest of it has arrived; on postgres.js' stream (TLS) once its
    // CopyData message has, which still saves decoding and encoding it.
    budget.maxRowBytes,
  );

  const failure = await streamBinaryCopy(sql, select, decoder, req.signal);
  req.signal?.throwIfAborted();
  if (failure instanceof TupleTooLargeError) {
    const lastKept =
      decoder.appended > 0 ? lastKeyValues().map((v, k) => keyText(keyset.types[k]!, v)) : after;
    const texts = await nextKeyTexts(sql, plan, keyset, lastKept, bound);
    throw rowTooLarge(plan, keyset, texts, failure.bytes, budget.maxRowBytes, !failure.complete);
  }
  if (failure !== undefined) throw failure;
  decoder.end();
  return {
    appended: decoder.appended,
    tuples: decoder.tuples,
    lastKey: decoder.appended > 0 ? lastKeyValues() : undefined,
  };
}

/** SQLSTATEs of a page statement naming a column or table that is gone (dropped or renamed). */
const UNDEFINED_COLUMN = '42703';
const UNDEFINED_TABLE = '42P01';

/**
 * What a failed page statement means. A statement that names a column or table that is gone
 * (42703, 42P01) is a schema change: a SchemaChangedError with the server's message, and with the
 * changes when the catalog shows them. A value of the wrong width (the decoder's
 * ChangedWidthError) or one the old type cannot read (a DataError) may come from a type change
 * too: when the catalog shows one, the SchemaChangedError names it; otherwise the error stands.
 * Anything else (a lost connection, an abort, a row too large) is returned unchanged.
 */
export async function schemaFailure(
  sql: Sql,
  plan: TablePlan,
  selected: readonly ColumnInfo[],
  table: string,
  e: unknown,
  signal?: AbortSignal,
): Promise<unknown> {
  const code = (e as { code?: unknown } | undefined)?.code;
  const gone = code === UNDEFINED_COLUMN || code === UNDEFINED_TABLE;
  if (!gone && !(e instanceof SchemaChangedError) && !(e instanceof DataError)) return e;
  if (signal?.aborted) return e;
  const detail = gone
    ? `reading the page failed: ${(e as Error).message.split('\n')[0]} (SQLSTATE ${code})`
    : e instanceof ChangedWidthError
      ? e.detail
      : undefined;
  try {
    await checkColumnsUnchanged(sql, plan, selected, table, detail, { cause: e });
  } catch (found) {
    if (found instanceof SchemaChangedError) return found;
    // The check itself failed (e.g. the connection is gone): report the page's own failure.
  }
  return gone ? new SchemaChangedError(table, [], 'page', detail, { cause: e }) : e;
}

function rowTooLarge(
  plan: TablePlan,
  keyset: KeysetPlan,
  keyTexts: readonly (string | null)[],
  bytes: number,
  limit: number,
  atLeast: boolean,
): RowTooLargeError {
  const key = describeKey(
    keyset.keys.map((k) => k.name),
    keyTexts,
  );
  return new RowTooLargeError(plan.source, key, bytes, limit, atLeast);
}

/**
 * The key (as text) of the first row after the key `after` (key texts; undefined: from the
 * start) below the page's bound: the row a refused tuple belongs to, read with a one-row
 * statement that selects only the key columns.
 */
async function nextKeyTexts(
  sql: Sql,
  plan: TablePlan,
  keyset: KeysetPlan,
  after: readonly string[] | undefined,
  bound: Extract<PageBound, { kind: 'below' | 'atMost' }>,
): Promise<(string | null)[]> {
  const literals = after?.map((t, i) => `${quoteLiteral(t)}::${keyset.keys[i]!.castType}`);
  const q = pageSql(
    plan,
    keyset,
    keyset.keys.map((k) => k.read.expr),
    literals,
    { op: bound.kind === 'below' ? '<' : '<=', expr: `${quoteLiteral(bound.text)}::${boundCast(keyset)}` },
    1,
  );
  const raw = (await sql.unsafe(q).raw()) as unknown as (Buffer | null)[][];
  return keyset.keys.map((_, i) => raw[0]?.[i]?.toString('utf8') ?? null);
}
