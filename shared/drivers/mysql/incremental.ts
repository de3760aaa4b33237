/**
 * Incremental pages of a MySQL/MariaDB table: keyset pagination on (cursor, primary key) below
 * the safe upper bound (bound.ts), through two readers that run the SAME statement and return
 * the same page:
 *   - `readRowPage`: rows as maps in the exact value universe (the row-map path, and the oracle
 *     the columnar path is tested against);
 *   - `readBatchPage`: rows streamed off the wire straight into the wire encoder's appenders
 *     (the fast path; no row maps, no value objects).
 * Both read every value as the raw bytes of its text output (mysql2 `typeCast: false`).
 *
 * Every page statement's result set is checked against the introspected one before its first
 * row is decoded (result-fields.ts): a column whose type changed fails the page, never decodes
 * into a wrong value (index.ts turns that into SCHEMA_CHANGED).
 *
 * Owns: the page SQL (one builder for both readers), keyset literals, `more` (LIMIT n + 1) and
 * the resume token. Must never read past the bound, never compare a key through a lossy form
 * (types.ts `keyLiteral`), and never build per-row objects on the batch path.
 */
import type { FieldPacket } from 'mysql2';
import { RowTooLargeError } from '../../contracts/errors.js';
import type { IncrementalPage, IncrementalResult, Warning } from '../../contracts/source.js';
import type { Clock } from '../../contracts/state.js';
import { type Batch, newBatch, type WriteMode } from '../../dataplane/batch.js';
import { BatchEncoder, type ColumnWriter, rowBytes } from '../../dataplane/encoder.js';
import { Op } from '../../dataplane/metadata.js';
import type { Schema } from '../../dataplane/schema.js';
import { decodeKey, encodeKey } from '../../position/key-codec.js';
import { ordinalHex } from '../../position/position.js';
import { checkPageSize, dataColumns, describeKey, emptyResult, PageBudget, readStatements } from '../page.js';
import type { ValueContext } from '../value-context.js';
import { highWaterBound, timeBound } from './bound.js';
import type { MysqlConnection, RawRow } from './connect.js';
import { type ColumnInfo, type KeysetPlan, realDate, TABLE_ALIAS, type TablePlan } from './introspect.js';
import { keyLiteral, parseValue, quoteIdent, type RangeAppender, rangeAppenderOf } from './types.js';
import {
  binaryAppenderOf,
  binaryLayout,
  binaryReadable,
  binaryValueText,
  walkBinaryRow,
} from './wire/binary-rows.js';
import { checkResultFields, type ResultField, resultFieldOf } from './wire/result-fields.js';
import { appendRow, LastKeyRow, RowRanges, rowOf, walkRow } from './wire/text-rows.js';

/** Bound settings of a page read (MysqlSourceOptions documents them). */
export interface BoundSettings {
  readonly lagMs: number;
  readonly stallAfterMs: number;
  readonly settleMs: number;
  /** The account can read INNODB_TRX (false only with lagOnly). */
  readonly canSeeTransactions: boolean;
  /** Writers' zone for DATETIME/DATE cursors (SqlSourceOptions.cursorTimeZone). */
  readonly cursorTimeZone?: string;
}

/**
 * A high-water mark that has settled (every transaction open when it was read has ended) stays
 * safe for good: every value at or below it has committed or rolled back. It is reused while
 * pages below it remain (`more`), so a backlog waits for transactions once, not once per page.
 */
export interface SettledMark {
  literal?: string;
}

/** Largest number of rows a batch encoder allocates for up front; it grows past it. */
const MAX_INITIAL_CAPACITY = 65_536;

/** The bound of one page, as a predicate on the cursor; `empty` means read nothing now. */
type PageBound =
  | {
      readonly kind: 'predicate';
      readonly sql: string;
      readonly warnings: Warning[];
      /** A settled high-water mark (literal), kept for the next page. */
      readonly settled?: string;
      /** A time bound lowered by a (cached) transaction listing: see `recheckBound`. */
      readonly recheckAt?: number;
    }
  | { readonly kind: 'empty'; readonly warnings: Warning[] };

function cursorSql(keyset: KeysetPlan): string {
  return `${TABLE_ALIAS}.${quoteIdent(keyset.cursor.name)}`;
}

/** Reads the page's bound. Runs BEFORE the page statement (bound.ts explains why). */
async function readBound(
  db: MysqlConnection,
  plan: TablePlan,
  keyset: KeysetPlan,
  s: BoundSettings,
  settled: SettledMark,
  signal?: AbortSignal,
): Promise<PageBound> {
  const c = cursorSql(keyset);
  if (keyset.bound.kind === 'time') {
    const b = await timeBound(
      db,
      keyset.bound.type,
      s.lagMs,
      s.stallAfterMs,
      s.canSeeTransactions,
      s.cursorTimeZone,
    );
    if (b.held || b.literal === undefined) return { kind: 'empty', warnings: b.warnings };
    return {
      kind: 'predicate',
      sql: `${c} < ${b.literal}`,
      warnings: b.warnings,
      ...(b.recheckAt ? { recheckAt: b.recheckAt } : {}),
    };
  }
  if (settled.literal !== undefined)
    return { kind: 'predicate', sql: `${c} <= ${settled.literal}`, warnings: [], settled: settled.literal };
  const markSql = `SELECT ${keyset.cursor.read.expr} FROM ${plan.qualified} AS ${TABLE_ALIAS} WHERE ${c} IS NOT NULL ORDER BY ${c} DESC LIMIT 1`;
  const hw = await highWaterBound(db, markSql, s.settleMs, s.canSeeTransactions, signal);
  if (hw.held || hw.mark === null) return { kind: 'empty', warnings: hw.warnings };
  const literal = keyLiteral(
    keyset.cursor.read,
    parseValue(keyset.cursor.read, hw.mark, ctxOf(plan, keyset.cursor)),
  );
  return { kind: 'predicate', sql: `${c} <= ${literal}`, warnings: hw.warnings, settled: literal };
}

/**
 * A time bound lowered by a listed transaction may be lower than it needs to be: even a fresh
 * INNODB_TRX listing (bound.ts `freshListing`) can still list a transaction that has committed
 * since it was filled. That only delays rows,
 * never skips them, but a run that ends on such a page would leave rows committed before it
 * started for the next run. So when a page is the last one (`more` false) and its bound was
 * lowered, the bound is read again once the cache must have been refreshed (`recheckAt`), and
 * the page is read again if the bound moved. Full pages never wait: the bound did not limit them.
 */
async function recheckBound(
  db: MysqlConnection,
  plan: TablePlan,
  keyset: KeysetPlan,
  s: BoundSettings,
  settled: SettledMark,
  page: PreparedPage,
  signal?: AbortSignal,
): Promise<PreparedPage | undefined> {
  const at = page.bound.recheckAt;
  if (at === undefined) return undefined;
  const wait = at - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  signal?.throwIfAborted();
  const bound = await readBound(db, plan, keyset, s, settled, signal);
  if (bound.kind === 'empty' || bound.sql === page.bound.sql) return undefined;
  return buildPage(plan, keyset, page.after, page.data, page.limit, bound);
}

/**
 * The page statement. The keyset predicate is written as ORs (`c > v OR (c = v AND k > w) OR
 * ...`), never as a row comparison `(c, k) > (v, w)`: MariaDB does not use an index range for
 * the row comparison (a full scan and sort per page: ~2 s instead of ~10 ms for a 1,000-row page of a
 * 1M-row table, measured here on 2026-12-01, see docs/benchmarks.md).
 */
function pageSql(
  plan: TablePlan,
  keyset: KeysetPlan,
  selected: readonly ColumnInfo[],
  after: readonly string[] | undefined,
  bound: string,
  limit: number,
): string {
  // Keys are qualified with the table alias: an unqualified ORDER BY name could bind to a
  // select-list expression of the same name.
  const keys = keyset.keys.map((k) => `${TABLE_ALIAS}.${quoteIdent(k.name)}`);
  const cursor = keys[0]!;
  let from: string;
  if (after === undefined) {
    from = `${cursor} IS NOT NULL`;
  } else {
    from = keysetPredicate(keys, after, '>');
  }
  const zero = keyset.zeroDates ? ` AND ${realDate(cursor)}` : '';
  return (
    `SELECT ${selected.map((c) => c.read.expr).join(', ')} FROM ${plan.qualified} AS ${TABLE_ALIAS}` +
    ` WHERE ${from} AND ${bound}${zero} ORDER BY ${keys.join(', ')} LIMIT ${limit}`
  );
}

/**
 * `(keys) > (literals)` (or `<=`) in key order, written as ORs (`a > x OR (a = x AND b > y)`),
 * which MariaDB turns into a primary-key range (the row constructor it does not: see `pageSql`).
 * `keys` are qualified column names, `literals` their key literals (types.ts `keyLiteral`).
 */
export function keysetPredicate(
  keys: readonly string[],
  literals: readonly string[],
  op: '>' | '<=',
): string {
  const strict = op === '>' ? '>' : '<';
  const ors: string[] = [];
  for (let i = 0; i < keys.length; i++) {
    const eq = keys.slice(0, i).map((k, j) => `${k} = ${literals[j]}`);
    const last = i === keys.length - 1 ? op : strict;
    ors.push([...eq, `${keys[i]} ${last} ${literals[i]}`].join(' AND '));
  }
  return ors.length === 1 ? ors[0]! : `(${ors.map((o) => `(${o})`).join(' OR ')})`;
}

/** The decoded `after` token as key literals, or undefined for the first page. */
function afterLiterals(keyset: KeysetPlan, after: string): string[] | undefined {
  if (after === '') return undefined;
  const values = decodeKey(keyset.types, after);
  return values.map((v, i) => keyLiteral(keyset.keys[i]!.read, v));
}

function ctxOf(plan: TablePlan, c: ColumnInfo): ValueContext {
  return { table: plan.source, column: c.name };
}

/** The statement of one page and what it selects: data columns (in `data` order), then hidden keys. */
interface PreparedPage {
  readonly kind: 'page';
  readonly sql: string;
  readonly data: readonly ColumnInfo[];
  readonly selected: readonly ColumnInfo[];
  readonly after: readonly string[] | undefined;
  readonly limit: number;
  readonly bound: Extract<PageBound, { kind: 'predicate' }>;
}

function buildPage(
  plan: TablePlan,
  keyset: KeysetPlan,
  after: readonly string[] | undefined,
  data: readonly ColumnInfo[],
  limit: number,
  bound: Extract<PageBound, { kind: 'predicate' }>,
): PreparedPage {
  const hidden = keyset.keys.filter((k) => !data.includes(k));
  const selected = [...data, ...hidden];
  return {
    kind: 'page',
    sql: pageSql(plan, keyset, selected, after, bound.sql, limit),
    data,
    selected,
    after,
    limit,
    bound,
  };
}

async function preparePage(
  db: MysqlConnection,
  plan: TablePlan,
  keyset: KeysetPlan,
  req: IncrementalPage,
  data: readonly ColumnInfo[],
  settings: BoundSettings,
  settled: SettledMark,
): Promise<PreparedPage | Extract<PageBound, { kind: 'empty' }>> {
  checkPageSize(req);
  const after = afterLiterals(keyset, req.after);
  const bound = await readBound(db, plan, keyset, settings, settled, req.signal);
  if (bound.kind === 'empty') return bound;
  return buildPage(plan, keyset, after, data, req.pageSize + 1, bound);
}

/** Keeps a settled high-water mark for the next page only when this page did not reach it. */
function keepMark(settled: SettledMark, page: PreparedPage, more: boolean): void {
  if (more && page.bound.settled !== undefined) settled.literal = page.bound.settled;
  else delete settled.literal;
}

/** The resume token of a row (its key columns' raw values). */
function tokenOf(plan: TablePlan, keyset: KeysetPlan, selected: readonly ColumnInfo[], row: RawRow): string {
  const values = keyset.keys.map((k) => parseValue(k.read, row[selected.indexOf(k)]!, ctxOf(plan, k)));
  return encodeKey(keyset.types, values);
}

/**
 * Row path: the page as row maps in the exact value universe (keys = `plan.schema` column
 * names). Rows past the bound are left for a later page.
 */
export async function readRowPage(
  db: MysqlConnection,
  plan: TablePlan,
  keyset: KeysetPlan,
  req: IncrementalPage,
  settings: BoundSettings,
  settled: SettledMark,
): Promise<IncrementalResult<Record<string, unknown>[]>> {
  const data = plan.schema.columns.map((c) => plan.columns.find((x) => x.name === c.name)!);
  const first = await preparePage(db, plan, keyset, req, data, settings, settled);
  if (first.kind === 'empty') return emptyResult(req, [], first.warnings);
  let page: PreparedPage = first;
  for (;;) {
    const selected = page.selected;
    const raw = await db.raw(page.sql, req.signal, (fields) => checkResultFields(selected, fields));
    // The same byte budget as the batch path, counted from the row maps (rowBytes equals what
    // the encoder adds for the row), so both paths close the page after the same row.
    const budget = new PageBudget(req);
    const rows: Record<string, unknown>[] = [];
    for (let r = 0; r < Math.min(raw.length, req.pageSize) && !budget.full; r++) {
      const values = raw[r]!;
      const row: Record<string, unknown> = {};
      for (let i = 0; i < data.length; i++)
        row[data[i]!.name] = parseValue(data[i]!.read, values[i]!, ctxOf(plan, data[i]!));
      const size = budget.add(budget.bytes + rowBytes(plan.schema, row));
      if (size > budget.maxRowBytes)
        throw rowTooLarge(plan, keyset, page.selected, values, size, budget.maxRowBytes);
      rows.push(row);
    }
    const more = budget.full || raw.length > req.pageSize;
    const again: PreparedPage | undefined = more
      ? undefined
      : await recheckBound(db, plan, keyset, settings, settled, page, req.signal);
    if (again) {
      page = again;
      continue;
    }
    keepMark(settled, page, more);
    const n = rows.length;
    const warnings = page.bound.warnings;
    if (n === 0) return emptyResult(req, rows, warnings);
    return {
      next: tokenOf(plan, keyset, page.selected, raw[n - 1]!),
      page: rows,
      more,
      ...(warnings.length > 0 ? { warnings } : {}),
    };
  }
}

/** The columnar page request (IncrementalPage plus what the batch needs). */
export interface BatchPageRequest extends IncrementalPage {
  readonly schema: Schema;
  readonly writeMode: WriteMode;
}

/**
 * Batch path: the same page as `readRowPage`, streamed row by row into one wire-schema batch
 * whose bytes equal `encodeRows` of the row path's rows (same `__ingest_ts` clock reading).
 * Columns follow `req.schema` (the engine's resolved schema), matched to the table by name.
 */
export async function readBatchPage(
  db: MysqlConnection,
  plan: TablePlan,
  keyset: KeysetPlan,
  req: BatchPageRequest,
  settings: BoundSettings,
  settled: SettledMark,
  clock: Clock,
): Promise<IncrementalResult<Batch | undefined>> {
  const data = dataColumns(plan, req.schema);
  const first = await preparePage(db, plan, keyset, req, data, settings, settled);
  if (first.kind === 'empty') return emptyResult(req, undefined, first.warnings);
  let page: PreparedPage = first;
  for (;;) {
    const read = await streamPage(db, plan, keyset, page, req);
    const again: PreparedPage | undefined = read.more
      ? undefined
      : await recheckBound(db, plan, keyset, settings, settled, page, req.signal);
    if (again) {
      page = again;
      continue;
    }
    keepMark(settled, page, read.more);
    const warnings = page.bound.warnings;
    if (read.last === undefined) return emptyResult(req, undefined, warnings);
    const record = read.enc.finish(BigInt(clock()) * 1_000_000n);
    const batch = newBatch({
      table: req.table.target,
      record,
      watermark: req.posPrefix + ordinalHex(req.ordinalBase + read.rows - 1),
      writeMode: req.writeMode,
    });
    return {
      next: tokenOf(plan, keyset, page.selected, read.last),
      page: batch,
      more: read.more,
      ...(warnings.length > 0 ? { warnings } : {}),
    };
  }
}

/**
 * Streams one page (below `page`'s bound) into a new encoder: rows appended, the last row kept
 * for its key. With a byte budget the page may take several statements, each asking for about
 * as many rows as the budget still holds at the bytes per row seen so far (`rowsToAsk`), the next
 * continuing after the last row kept; the page is the same whatever the statements were.
 */
async function streamPage(
  db: MysqlConnection,
  plan: TablePlan,
  keyset: KeysetPlan,
  page: PreparedPage,
  req: BatchPageRequest,
): Promise<{ enc: BatchEncoder; rows: number; more: boolean; last: RawRow | undefined }> {
  const enc = new BatchEncoder(req.schema, {
    phase: 'incremental',
    capacity: Math.min(req.pageSize, MAX_INITIAL_CAPACITY),
  });
  const budget = new PageBudget(req);
  const st: Statement = {
    db,
    plan,
    keyset,
    page,
    req,
    enc,
    budget,
    appenders: page.data.map((c) => rangeAppenderOf(c.read, ctxOf(plan, c))),
    keyIndexes: keyset.keys.map((k) => page.selected.indexOf(k)),
  };
  let after = page.after;
  let last: RawRow | undefined;
  const { appended, more } = await readStatements(budget, req.pageSize, keyset, async (limit, rows, kept) => {
    const sql =
      kept === 0 && limit === page.limit
        ? page.sql
        : buildPage(plan, keyset, after, page.data, limit, page.bound).sql;
    const r = await streamRows(st, sql, rows, kept);
    if (r.last) {
      const row = r.last;
      last = row;
      after = keyset.keys.map((k) =>
        keyLiteral(k.read, parseValue(k.read, row[page.selected.indexOf(k)]!, ctxOf(plan, k))),
      );
    }
    return { appended: r.appended, got: r.seen };
  });
  return { enc, rows: appended, more, last };
}

/** What every statement of one page shares. */
interface Statement {
  readonly db: MysqlConnection;
  readonly plan: TablePlan;
  readonly keyset: KeysetPlan;
  readonly page: PreparedPage;
  readonly req: BatchPageRequest;
  readonly enc: BatchEncoder;
  readonly budget: PageBudget;
  readonly appenders: readonly RangeAppender[];
  readonly keyIndexes: readonly number[];
}

/**
 * Runs one statement of a page, appending at most `rows` of its rows (ordinals continuing after
 * `appended`); returns what it appended, the rows it saw and the last row appended.
 */
async function streamRows(
  st: Statement,
  sql: string,
  rows: number,
  appended: number,
): Promise<{ appended: number; seen: number; last: RawRow | undefined }> {
  const { plan, keyset, page, req, enc, budget, appenders, keyIndexes } = st;
  const { posPrefix, ordinalBase } = req;
  // Once the page is full (or a row is refused) the rest of the result is not wanted: the
  // statement is abandoned through the read's abort, which closes the connection (the next
  // statement opens a new one) instead of draining rows that may be large. `rowsToAsk` keeps
  // that rare.
  const stop = new AbortController();
  const full = new PageFull();
  const signal = req.signal ? AbortSignal.any([req.signal, stop.signal]) : stop.signal;
  // What the row callback writes to, dropped when the statement ends: an abandoned statement's
  // connection may keep the callback reachable for a while, and must not keep the page with it.
  let target: { readonly writers: ColumnWriter[] } | undefined = {
    writers: page.data.map((_, i) => enc.col(i)),
  };
  let seen = 0;
  let taken = 0;
  // Each row packet is walked by offsets (text-rows.ts) into `ranges`, and its values appended
  // from those ranges: no Buffer per value, no array per row. The last row appended is kept as
  // its packet and its key values' ranges, made into a row for its key once the statement is over.
  const ranges = new RowRanges(page.selected.length);
  const lastKey = new LastKeyRow(page.selected.length, keyIndexes);
  // Rows past `rows` (the one extra row that tells `more`) are counted, not appended; unless
  // the page closes by bytes, the statement is read to its end, so the connection is left drained.
  // The binary protocol where every selected column has a binary reading (binary-rows.ts); its
  // walk, appenders and key text follow the statement's own column definitions, checked first.
  const binary = binaryRows.enabled && page.selected.every((c) => binaryReadable(c.read, c.result));
  let layout: Int8Array = new Int8Array(0);
  let rowAppenders = appenders;
  let fieldsSeen: ResultField[] = [];
  const onFields = (fields: readonly FieldPacket[]) => {
    checkResultFields(page.selected, fields);
    if (!binary) return;
    fieldsSeen = fields.map(resultFieldOf);
    layout = binaryLayout(fieldsSeen);
    rowAppenders = page.data.map((c, i) => {
      if (!binaryReadable(c.read, fieldsSeen[i])) throw new Error(`column "${c.name}" has no binary reading`);
      return binaryAppenderOf(c.read, fieldsSeen[i]!, ctxOf(plan, c));
    });
  };
  /** The kept key values as the text-protocol bytes parseValue reads. */
  const keyRow = (row: RawRow | undefined): RawRow | undefined =>
    !binary || row === undefined
      ? row
      : row.map((v, i) => (v === null ? null : binaryValueText(fieldsSeen[i]!, v, 0, v.length)));
  try {
    await (binary ? st.db.eachBinaryRow.bind(st.db) : st.db.eachRow.bind(st.db))(
      sql,
      (buf, start, end) => {
        if (seen++ >= rows || target === undefined) return;
        if (binary) walkBinaryRow(buf, start, end, layout, ranges);
        else walkRow(buf, start, end, ranges);
        appendRow(buf, ranges, target.writers, rowAppenders);
        enc.appendMetaOrdinal(Op.update, posPrefix, ordinalBase + appended + taken, null, false);
        taken++;
        lastKey.keep(buf, ranges);
        const size = budget.add(enc.dataBytes);
        if (size > budget.maxRowBytes)
          stop.abort(
            rowTooLarge(
              plan,
              keyset,
              page.selected,
              keyRow(rowOf(buf, ranges, keyIndexes, 0))!,
              size,
              budget.maxRowBytes,
            ),
          );
        else if (budget.full) stop.abort(full);
      },
      signal,
      // Before the first row: a column whose type changed since introspection fails the statement.
      onFields,
    );
  } catch (e) {
    if (e !== full) throw e;
  } finally {
    target = undefined;
  }
  return { appended: taken, seen, last: keyRow(lastKey.take()) };
}

/**
 * Whether page reads may use the binary protocol (binary-rows.ts); off, every page reads text
 * rows. A switch for the bench and the tests (the text reading stays the row path's oracle).
 */
export const binaryRows = { enabled: true };

/** The abort reason of a page closed by its byte budget (not an error). */
class PageFull extends Error {
  override name = 'PageFull';
}

function rowTooLarge(
  plan: TablePlan,
  keyset: KeysetPlan,
  selected: readonly ColumnInfo[],
  row: RawRow,
  bytes: number,
  limit: number,
): RowTooLargeError {
  const key = describeKey(
    keyset.keys.map((k) => k.name),
    keyset.keys.map((k) => row[selected.indexOf(k)]?.toString('utf8') ?? null),
  );
  return new RowTooLargeError(plan.source, key, bytes, limit);
}
