/**
 * What a CDC run does before it streams (docs/decisions/0009-cdc-commit-protocol.md, "Recovery"):
 * where the position it resumes from is recovered. Under the lease, in this order:
 *   1. `introspect`: every configured table is introspected and judged before anything of it is
 *      recorded (./preconditions.ts refusals; a schema hash the table's entry does not record
 *      stops with SCHEMA_CHANGED; the lake format the entry keeps), giving the run its
 *      `Captured` records;
 *   2. `recover` (the reader is open by then, streaming nothing: its position scheme and start
 *      position are needed): a first start commits the initial state, with the reader's start
 *      position, BEFORE any object exists, so "no state but objects" always means a lost state
 *      (STATE_MISSING); a later start commits the entries of tables new to the capture, drops
 *      the unfinished snapshot of a table now `snapshot: never`, and gives a state without a
 *      position one (or stops, CDC_NO_POSITION, when the source keeps none of ours); then, per
 *      table, this writer's objects at or past its committed `next` (a crashed attempt's) are
 *      removed.
 * The run (./run.ts `execute`) then starts the reader at the committed position and each table's
 * `next`, and acknowledges that position again before reading.
 *
 * Owns those steps; commits go through ./flush.ts `commit` (one conditional write under the
 * lease). Never deletes another writer's objects, nor any object below a table's `next`.
 */
import type { SourcePosition } from '../../contracts/cdc.js';
import { TidemarkError } from '../../contracts/errors.js';
import { DEFAULT_LAKE_FORMAT, parseRecordedFormat, resolveLakeFormat } from '../../contracts/lake-format.js';
import type { LakeTable } from '../../contracts/sink.js';
import { parseRecordedTableFormat, resolveTableFormat } from '../../contracts/table-format.js';
import { SchemaChangedError, storedSchema } from '../../dataplane/schema-rules.js';
import { applyPending, recoverUncommitted } from '../durable-step.js';
import { commit, type FlushContext } from './flush.js';
import { cdcLakeSchema } from './lake-schema.js';
import type { Captured } from './options.js';
import { cdcTableRefusals } from './preconditions.js';
import { newTableSnapshot } from './snapshot.js';
import { type CdcTableState, entryWritesSchema, lastSchemaStop } from './state.js';

/** The part of a run (./run.ts `CdcRun`) recovery reads and fills, beyond what it commits with. */
export interface RecoveryContext extends FlushContext {
  /** The captured tables by lake name: filled by `introspect`. */
  readonly tables: Map<string, Captured>;
  /** Aborted when the run stops or is fenced. */
  readonly stopping: AbortController;
}

/** Introspects and judges every configured table, before anything of it is recorded. */
export async function introspect(run: RecoveryContext): Promise<void> {
  for (const config of run.opts.tables) {
    const { ref, schema } = await run.opts.introspector.introspect({
      source: config.source,
      target: config.target,
      exclude: config.exclude,
    });
    // Refused before anything of the table is recorded or created (state entry, publication,
    // slot), in the words `tidemark check` uses: a fixed spec then starts as if new.
    const [refusal] = cdcTableRefusals(config, schema);
    if (refusal) throw refusal;
    const lake = cdcLakeSchema(schema);
    const stored = run.state.tables[config.target];
    const recorded = storedSchema(lake, stored?.schemaVersion ?? 1);
    if (!entryWritesSchema(stored, lake)) {
      // The state keeps only the hash (the full schema is in the objects' footers): the rules
      // cannot tell what changed while the capture was down, so the operator must look. The
      // hash leaves source types out, so a schema the stream recorded (binlog `int`) matches
      // the catalog's (`int(11)`) here.
      const stop = lastSchemaStop(run.state, config.target);
      throw new SchemaChangedError(
        config.target,
        [],
        'start',
        `its schema hash is ${recorded.hash}, the state says the table wrote ${stored?.schemaHash}${stop ? `; the capture stopped at ${stop.at} on: ${stop.detail}` : ''}`,
        { mode: 'cdc' },
      );
    }
    // A table keeps the format its entry records; an entry that records none and never wrote an
    // object (no `next`) is as new as a missing one (docs/lake-format.md).
    const recordedFormat = parseRecordedFormat(`${config.target} in ${run.key}`, stored?.format);
    const lakeFormat = resolveLakeFormat(
      config.target,
      run.opts.lakeFormat ?? DEFAULT_LAKE_FORMAT,
      stored !== undefined && (recordedFormat !== undefined || stored.next !== undefined),
      recordedFormat,
    );
    if (lakeFormat.note)
      run.log.warn(lakeFormat.note, {
        code: 'LAKE_FORMAT_KEPT',
        table: config.target,
        format: lakeFormat.format,
      });
    // The table format, likewise: a table keeps its recorded one; an explicit spec setting that
    // contradicts it is refused here, before anything of the table is written.
    const recordedTableFormat = parseRecordedTableFormat(
      `${config.target} in ${run.key}`,
      stored?.tableFormat,
    );
    const tableFormat = resolveTableFormat(
      config.target,
      run.opts.tableFormat ?? { format: 'plain', explicit: false },
      stored !== undefined && (recordedTableFormat !== undefined || stored.next !== undefined),
      recordedTableFormat,
    );
    run.tables.set(config.target, {
      config,
      ref,
      schema: lake,
      recorded,
      format: lakeFormat.format,
      tableFormat,
      pendingSince: undefined,
      lastCommitTimeMs: undefined,
      stopped: stored?.stopped !== undefined,
    });
  }
}

/**
 * Removes what a crashed attempt left past each table's `next`; a first start commits the
 * initial state BEFORE any object exists, so "no state but objects" always means a lost state.
 */
export async function recover(run: RecoveryContext, firstStart: boolean, scheme: string): Promise<void> {
  const { sink, writer } = { sink: run.opts.sink, writer: run.opts.writer };
  if (firstStart) {
    for (const t of run.tables.values()) {
      // Only this reader's scheme: the same writer's incremental objects of the table (kept
      // by `tidemark reset` when the table moved to cdc) are not a lost CDC state.
      const ours = (await sink.list(t.config.target, writer)).filter((o) =>
        o.startPosition?.startsWith(scheme),
      );
      if (ours.length > 0) {
        throw new TidemarkError(
          'STATE_MISSING',
          `${t.config.target}: the state store has no state under ${run.key}, but the lake already holds ${ours.length} CDC object(s) of ${writer}; nothing was deleted or written. Restore the state, or remove those objects on purpose`,
        );
      }
    }
    const tables: Record<string, CdcTableState> = {};
    for (const t of run.tables.values()) tables[t.config.target] = newEntry(t);
    await commit(run, { ...run.state, position: await initialPosition(run), tables });
    return;
  }
  // A table the state does not know is new to the capture (added to a running pipeline): its
  // entry, with its snapshot to do, is committed before anything of it is written. A state
  // without a position (written by a release that committed it only at the first flush) gets
  // one now, before anything is read.
  const added = [...run.tables.values()].filter((t) => run.state.tables[t.config.target] === undefined);
  // A table now configured `snapshot: never` whose snapshot is not complete (e.g. recorded by a
  // start that was then refused): its snapshot is dropped, and only changes are captured.
  const unsnapshotted = [...run.tables.values()].filter((t) => {
    const s = run.state.tables[t.config.target]?.snapshot;
    return t.config.snapshot !== 'initial' && s !== undefined && s.state !== 'complete';
  });
  if (added.length > 0 || unsnapshotted.length > 0 || run.state.position === undefined) {
    const tables: Record<string, CdcTableState> = { ...run.state.tables };
    for (const t of added) tables[t.config.target] = newEntry(t);
    for (const t of unsnapshotted) {
      const { snapshot: _dropped, ...entry } = tables[t.config.target]!;
      tables[t.config.target] = entry;
      run.log.warn(
        "snapshot: never: the table's unfinished snapshot is dropped; only its changes are captured",
        {
          code: 'CDC_SNAPSHOT_DROPPED',
          table: t.config.target,
        },
      );
    }
    let position = run.state.position;
    if (position === undefined) {
      // Entries without a position: a start by a release that committed it only at the first
      // flush died before that flush. A source that keeps our position (a Postgres slot)
      // still holds every change since; one that does not (a binlog) would resume at its
      // current end and skip them, so that start stops and says so.
      if (!run.reader!.keepsPosition)
        throw new TidemarkError(
          'CDC_NO_POSITION',
          `${run.opts.sourceName}: the state records its tables since ${run.state.lastCommitAt ?? 'an earlier start'} but no resume position (a start by an earlier release died before its first flush), and this source keeps no position of ours, so the changes since then cannot be read again; give the tables a new target: (snapshot: initial loads their rows), or delete the state item ${run.key} to capture from now on`,
        );
      run.log.warn(
        "the state holds no resume position (an earlier start never committed one): capturing from the slot's position, which still holds every change since",
        { code: 'CDC_NO_POSITION' },
      );
      position = await initialPosition(run);
    }
    await commit(run, { ...run.state, position, tables });
    if (added.length > 0)
      run.log.info('tables added to the capture', { tables: added.map((t) => t.config.target) });
  }
  // An Iceberg table's commit the state decided is applied before anything else: the catalog
  // follows the state (docs/decisions/0024). A table that has it already is left as it is.
  // Every entry's, the tables no longer captured included: what the state decided is applied.
  await applyPending(
    sink,
    Object.values(run.state.tables).flatMap((e) => (e.pending ? [e.pending] : [])),
  );
  for (const t of run.tables.values()) {
    const lake: LakeTable = { table: t.config.target, writer };
    // Without a `next` the table never committed an object: all of ours OF THIS SCHEME are
    // leftovers (the bare scheme letter sorts below every position of it).
    const next = run.state.tables[t.config.target]?.next ?? scheme;
    const removed = await recoverUncommitted(sink, lake, next);
    if (removed.length > 0)
      run.log.warn('removed uncommitted objects of a crashed attempt', {
        table: t.config.target,
        objects: removed.map((r) => r.uri),
      });
  }
}

/**
 * The reader's start position, to be committed before the reader streams anything (docs/
 * decisions/0009: the start position is durable before the first event is read).
 */
async function initialPosition(run: RecoveryContext): Promise<SourcePosition> {
  const position = await run.reader!.initialPosition(run.stopping.signal);
  run.log.info('first start: committing the start position before capture begins', {
    position: position.display ?? position.value,
  });
  return position;
}

/** The entry of a table new to the capture: its schema and format, and its snapshot to do. */
function newEntry(t: Captured): CdcTableState {
  return {
    rows: 0,
    objects: 0,
    schemaHash: t.recorded.hash,
    schemaVersion: t.recorded.version,
    format: t.format,
    tableFormat: t.tableFormat,
    ...(t.config.snapshot === 'initial' ? { snapshot: newTableSnapshot() } : {}),
  };
}
