/**
 * One incremental run of one table: take the lease, load the cursor, recover, then loop
 * read page -> write Parquet -> commit cursor until caught up or the deadline nears, and end
 * with one more commit that records how the run went.
 *
 * Owns the run's sequence, and with it the durability order for the incremental path
 * (docs/architecture.md); each step is taken in the file named beside it:
 *   0. a table's first run commits its initial state BEFORE it writes any object, so "no state
 *      but objects of this writer in the lake" always means the state was lost, never a crash
 *      (./recovery.ts);
 *   1. the page's object is durable in the lake (sink.write resolved),
 *   2. only then the cursor moves, in ONE conditional write that also checks our lease
 *      (./commit.ts `commitPage`, one durable step per page);
 *   4. on start, THIS writer's objects at or past its committed position (a crashed attempt's)
 *      are removed; other writers' objects of the same lake table are never considered
 *      (./recovery.ts). (Step 3, the ack, has nothing to do here.)
 * A crash between any two steps loses nothing: the next run re-reads from the committed cursor;
 * its object takes a new name (its lease has a higher fence) and recovery has removed the crashed
 * attempt's. Every `__pos` and object name carries the run's lease fence, so what a run that lost
 * its lease still writes sorts below, and never replaces, what the new holder wrote. A state
 * that is missing or older than the lake (lost, restored from a backup, pointed at another
 * store) stops the run before anything is deleted.
 *
 * Pages are read ahead of the commits (./read-ahead.ts); reading changes nothing, so the order
 * above holds for every page. What a run is given and reports is in ./options.ts, the errors it
 * stops with in ./errors.ts. Works only through the contracts: it never names a database client
 * or a driver.
 */

import {
  CursorConflictError,
  LeaseHeldError,
  LeaseLostError,
  TidemarkError,
} from '../../contracts/errors.js';
import { DEFAULT_LAKE_FORMAT, resolveLakeFormat } from '../../contracts/lake-format.js';
import type { LakeTable } from '../../contracts/sink.js';
import type { TableRef, Warning } from '../../contracts/source.js';
import type { StateRecord } from '../../contracts/state.js';
import { resolveTableFormat } from '../../contracts/table-format.js';
import { requireUpsertKey } from '../../dataplane/batch.js';
import { findColumn, type Schema } from '../../dataplane/schema.js';
import {
  changeAdvice,
  describeChange,
  judgeSchema,
  SchemaChangedError,
  type StoredSchema,
  storedSchema,
} from '../../dataplane/schema-rules.js';
import type { Logger } from '../../observability/log.js';
import { Progress } from '../../observability/progress.js';
import { incrementalStepStart } from '../../position/position.js';
import { takeLease } from '../lease.js';
import { commitPage, type Durable, leaseTtl, recordOutcome, writeTarget } from './commit.js';
import { CursorColumnChangedError, NullCursorError } from './errors.js';
import type { IncrementalRunOptions, IncrementalSummary } from './options.js';
import { type PageResult, ReadAhead } from './read-ahead.js';
import { checkStateAgainstLake, removeUncommitted } from './recovery.js';
import {
  type IncrementalState,
  incrementalStateKey,
  initialIncrementalState,
  parseIncrementalState,
  type StopReason,
} from './state.js';

/** Runs one incremental sync of one table. Throws typed errors; a held lease is a normal summary. */
export async function runIncremental(opts: IncrementalRunOptions): Promise<IncrementalSummary> {
  const started = opts.clock();
  const { table, store, logger } = opts;
  const key = incrementalStateKey(opts.pipeline, table.target);
  const lake: LakeTable = { table: table.target, writer: opts.writer };
  const log = logger.child({ pipeline: opts.pipeline, table: table.target });

  let record: StateRecord;
  let tookOverFrom: string | undefined;
  try {
    ({ record, tookOverFrom } = await takeLease(store, key, opts.owner, leaseTtl(opts), opts.isHolderDead));
  } catch (e) {
    if (e instanceof LeaseHeldError) {
      log.warn('lease held by another run; exiting without changes', {
        holder: e.holder,
        expiresAt: e.expiresAt,
      });
      const state = parseIncrementalState((await store.load(key)).value, table.cursor);
      return {
        ...emptySummary(opts, 'lease-held', state, opts.clock() - started),
        leaseHolder: { owner: e.holder ?? 'unknown', expiresAt: e.expiresAt },
      };
    }
    throw e;
  }
  if (tookOverFrom !== undefined)
    log.warn('took over the lease of a run whose process is gone', { holder: tookOverFrom });
  // This run's fence: every `__pos` it writes carries it, so at one page a later lease holder's
  // rows win over what this run might still write after losing its lease (and vice versa).
  const fence = record.lease!.fence;

  const durable: Durable = { version: record.version, state: undefined, rows: 0, pages: 0, bytes: 0 };
  try {
    const before = record.value
      ? parseIncrementalState(record.value, table.cursor)
      : initialIncrementalState(table.cursor);
    if (record.value !== undefined) durable.state = before;
    if (before.cursorColumn !== table.cursor)
      throw new CursorColumnChangedError(table.target, before.cursorColumn, table.cursor);

    const { ref, schema, warnings } = await opts.source.introspect({
      source: table.source,
      target: table.target,
      exclude: table.exclude,
      cursorColumn: table.cursor,
    });
    requireUpsertKey(table.target, table.writeMode, schema);
    if (!findColumn(schema, table.cursor)) {
      throw new TidemarkError(
        'CURSOR_COLUMN_MISSING',
        `${table.source}: cursor column "${table.cursor}" is not in the table`,
      );
    }
    for (const w of warnings) log.warn(w.message, { code: w.code });
    if (table.nullCursor === 'refuse' && opts.source.countNullCursors) {
      const nulls = await opts.source.countNullCursors(ref, table.cursor);
      if (nulls > 0) throw new NullCursorError(table.source, table.cursor, nulls);
    }

    // The schema the table writes from now on: the recorded one, or the current one when the
    // rules let the change through (a stop throws before anything is deleted or written).
    const { recorded, notes } = schemaToWrite(opts, log, before.schema, schema);
    // The lake format: a table keeps the one it was first written in (docs/lake-format.md). A
    // state that records none and never committed a page (a first run's, or one reset with its
    // objects deleted) is a new table.
    const isNew = record.value === undefined || (before.format === undefined && before.seq === 0);
    const lakeFormat = resolveLakeFormat(
      table.target,
      opts.lakeFormat ?? DEFAULT_LAKE_FORMAT,
      !isNew,
      before.format,
    );
    if (lakeFormat.note) log.warn(lakeFormat.note, { code: 'LAKE_FORMAT_KEPT', format: lakeFormat.format });
    // The table format, likewise; an explicit spec setting that contradicts it is refused here.
    const tableFormat = resolveTableFormat(
      table.target,
      opts.tableFormat ?? { format: 'plain', explicit: false },
      !(record.value === undefined || (before.tableFormat === undefined && before.seq === 0)),
      before.tableFormat,
    );
    const start: IncrementalState =
      recorded === before.schema && before.format === lakeFormat.format && before.tableFormat === tableFormat
        ? before
        : { ...before, schema: recorded, format: lakeFormat.format, tableFormat };
    record = await checkStateAgainstLake(opts, key, lake, record, start);
    if (record.value !== undefined && start !== before) {
      record = await opts.store.commit(key, {
        owner: opts.owner,
        expectedVersion: record.version,
        value: start as unknown as Record<string, unknown>,
        renewTtlMs: leaseTtl(opts),
      });
    }
    durable.version = record.version;
    durable.state = start;

    // Step 4 of the durability order: a crashed attempt's objects go before anything new is written.
    const recovered = await removeUncommitted(opts, log, lake, before.seq, before.pending);

    const summary = await pageLoop(
      opts,
      log,
      key,
      fence,
      durable,
      start,
      ref,
      schema,
      [...warnings, ...notes],
      recovered,
      started,
    );
    const stopped = summary.stopped ?? 'caught-up';
    await recordOutcome(opts, log, key, durable, { started, stopped, schema });
    return tookOverFrom === undefined ? summary : { ...summary, tookOverFrom };
  } catch (e) {
    // A run that lost its lease, or whose state another writer moved, records nothing.
    if (!(e instanceof LeaseLostError || e instanceof CursorConflictError))
      await recordOutcome(opts, log, key, durable, { started, stopped: 'error', error: e });
    throw e;
  } finally {
    await store
      .release(key, opts.owner)
      .catch((e: unknown) => log.warn('lease release failed; it will expire', { error: e }));
  }
}

/**
 * The pages of one run, from `before`: take the next page read ahead, write and commit it, until
 * the source is caught up or a stop rule refused the next read (./read-ahead.ts).
 */
async function pageLoop(
  opts: IncrementalRunOptions,
  log: Logger,
  key: string,
  fence: number,
  durable: Durable,
  before: IncrementalState,
  ref: TableRef,
  schema: Schema,
  introWarnings: readonly Warning[],
  recovered: number,
  started: number,
): Promise<IncrementalSummary> {
  const { table } = opts;
  // A first sync reads the whole table: catalog statistics give the ETA. Later runs read a
  // backlog whose size nothing cheap can tell, so they show rows and rate only.
  const total =
    before.cursor === '' && opts.source.estimateRows
      ? await opts.source.estimateRows(ref).catch(() => undefined)
      : undefined;
  const progress = new Progress({
    label: table.target,
    logger: log,
    tty: opts.progressTty ?? false,
    now: opts.clock,
    ...(total ? { total } : {}),
  });
  const warnings: Warning[] = [...introWarnings];
  let state = before;
  let version = durable.version;
  let rows = 0;
  let pages = 0;
  let bytes = 0;
  let objects = 0;
  let more = true;
  let stopped: StopReason = 'caught-up';
  let slowestPageMs = 0;

  const target = (s: IncrementalState) => writeTarget(opts, fence, s);
  // Pages are read ahead of the commits (./read-ahead.ts, decision 0021).
  const reads = new ReadAhead({
    opts,
    ref,
    schema,
    fence,
    from: { after: state.cursor, seq: state.seq },
    slowestPageMs: () => slowestPageMs,
    // Each page starts encoding as soon as it arrived. Lake format and recorded schema do not
    // change within a run: the write that takes it repeats these very arguments.
    prepare: (page, seq) =>
      opts.sink.prepare?.(target(state), schema, incrementalStepStart(seq), [page], state.schema),
  });
  reads.pump();
  // The encoder starts (its thread, the schema's template) while the first page is read.
  if (reads.pending > 0) opts.sink.warm?.(target(state), schema);
  let pageStart = opts.clock();
  /** The last committed page's catalog commit, still running (an Iceberg table). */
  let applying: Promise<void> | undefined;
  for (;;) {
    const reading = reads.next();
    if (reading === undefined) {
      if (reads.refused) stopped = reads.refused;
      break;
    }
    let page: PageResult;
    try {
      page = await reading;
    } catch (e) {
      // Interrupted (Ctrl-C, SIGTERM) while a page was being read: the read is aborted (the
      // source drops its connection on the same signal); everything committed so far stays.
      if (!opts.signal?.aborted) throw e;
      stopped = 'interrupted';
      break;
    }
    for (const w of page.warnings ?? []) {
      log.warn(w.message, { code: w.code });
      if (w.code === 'BOUND_HELD')
        log.metric('BoundHeld', 1, 'Count', { pipeline: opts.pipeline, table: table.target });
      if (!warnings.some((x) => x.code === w.code)) warnings.push(w);
    }
    if (!page.page || page.page.record.numRows === 0) {
      more = false;
      break;
    }
    reads.taken(page.page);

    // The page's object, then its cursor: one durable step (./commit.ts).
    const committed = await commitPage(
      opts,
      key,
      fence,
      schema,
      version,
      state,
      page.page,
      page.next,
      applying,
    );
    applying = committed.applied;
    version = committed.version;
    state = committed.state;
    rows += committed.rows;
    pages += 1;
    bytes += committed.bytes;
    Object.assign(durable, { version, state, rows, pages, bytes });
    objects += committed.objects;
    progress.add(committed.rows, committed.bytes);
    // A page's cost is the whole cycle (read wait + write + commit): the margin must cover it.
    slowestPageMs = Math.max(slowestPageMs, opts.clock() - pageStart);
    pageStart = opts.clock();
    log.debug('page committed', { rows: committed.rows, seq: state.seq, bytes: committed.bytes });
    if (!page.more) {
      more = false;
      break;
    }
    more = true;
  }
  // The last page's catalog commit: the run is done when the table has it.
  await applying;
  progress.done();

  const summary: IncrementalSummary = {
    pipeline: opts.pipeline,
    table: table.target,
    status: 'ok',
    rows,
    pages,
    bytes,
    objects,
    cursorBefore: before.cursor,
    cursorAfter: state.cursor,
    seqBefore: before.seq,
    seqAfter: state.seq,
    more,
    stopped: more ? stopped : 'caught-up',
    recovered,
    durationMs: opts.clock() - started,
    warnings,
  };
  log.metric('RowsSynced', rows, 'Count', { pipeline: opts.pipeline, table: table.target });
  return summary;
}

/**
 * Applies the schema rules (shared/dataplane/schema-rules.ts) at run start: the schema the run
 * writes with. The first recorded schema is version 1; a change the rules let through is
 * recorded as the next version, with a warning per change and a `SchemaChanged` metric; a
 * change they stop on throws SchemaChangedError.
 */
function schemaToWrite(
  opts: IncrementalRunOptions,
  log: Logger,
  last: StoredSchema | undefined,
  current: Schema,
): { recorded: StoredSchema; notes: Warning[] } {
  if (last === undefined) return { recorded: storedSchema(current, 1), notes: [] };
  const verdict = judgeSchema(last, current, opts.table.onWiden ?? 'stop');
  if (verdict.action === 'same') return { recorded: last, notes: [] };
  if (verdict.action === 'stop') throw new SchemaChangedError(opts.table.target, verdict.stops, 'start');
  const next = storedSchema(current, last.version + 1);
  const notes: Warning[] = [];
  for (const c of verdict.changes) {
    const advice = changeAdvice(c);
    const message = `schema changed: ${describeChange(c)}${advice ? `; ${advice}` : ''}`;
    log.warn(message, { code: 'SCHEMA_CHANGED', change: c.kind, schemaVersion: next.version });
    notes.push({ code: 'SCHEMA_CHANGED', message });
  }
  log.metric('SchemaChanged', verdict.changes.length, 'Count', {
    pipeline: opts.pipeline,
    table: opts.table.target,
  });
  return { recorded: next, notes };
}

function emptySummary(
  opts: IncrementalRunOptions,
  status: IncrementalSummary['status'],
  state: IncrementalState,
  durationMs: number,
): IncrementalSummary {
  return {
    pipeline: opts.pipeline,
    table: opts.table.target,
    status,
    rows: 0,
    pages: 0,
    bytes: 0,
    objects: 0,
    cursorBefore: state.cursor,
    cursorAfter: state.cursor,
    seqBefore: state.seq,
    seqAfter: state.seq,
    more: false,
    recovered: 0,
    durationMs,
    warnings: [],
  };
}
