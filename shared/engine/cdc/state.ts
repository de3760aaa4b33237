/**
 * The state value of one CDC source (docs/decisions/0009-cdc-commit-protocol.md), stored under
 * `cdc#<pipeline>#<source>`: the source's resume position and, per captured table, `next` (the
 * first `__pos` NOT yet durable: exclusive, so recovery from it never deletes a committed
 * object), the schema hash the table writes, and stats. Plus a short log of gaps and destructive
 * DDL the stream carried.
 *
 * One item holds every table of a source, so its size is bounded: per table a few short fields
 * (500 tables with the longest names and MySQL-sized positions fit under the store's limit,
 * test/unit/cdc-state.test.ts); the event log keeps the newest EVENT_LOG entries, each detail cut
 * to EVENT_DETAIL characters. The full schema of a table lives in its objects' footers.
 */
import type { DestructiveDDL, SourcePosition } from '../../contracts/cdc.js';
import { TidemarkError } from '../../contracts/errors.js';
import type { LakeFormat } from '../../contracts/lake-format.js';
import type { PendingCommit } from '../../contracts/sink.js';
import type { TableFormat } from '../../contracts/table-format.js';
import type { Schema } from '../../dataplane/schema.js';
import { schemaHash, schemaHashWithSourceTypes } from '../../dataplane/schema-rules.js';
import type { TableSnapshot } from './snapshot.js';

/** Entries kept in the event log. */
export const EVENT_LOG = 20;
/** Characters kept of an event's detail. */
export const EVENT_DETAIL = 300;

export interface CdcTableState {
  /** The first `__pos` not yet durable; undefined before the table's first flush. */
  readonly next?: string;
  /** `schemaHash` of the schema the table writes, and its version. */
  readonly schemaHash?: string;
  readonly schemaVersion?: number;
  /**
   * The lake format the table's objects are written in (docs/lake-format.md); undefined in an
   * entry written before formats were recorded (format 1 once the table wrote an object).
   */
  readonly format?: LakeFormat;
  /** The table format (shared/contracts/table-format.ts); undefined in an entry from before formats: plain. */
  readonly tableFormat?: TableFormat;
  /**
   * An Iceberg table's last commit decided by a state commit (docs/decisions/0024): applied to the
   * catalog right after that commit, and again by recovery (a no-op when the table has it).
   */
  readonly pending?: PendingCommit;
  /** Rows committed over the table's life, objects written. */
  readonly rows: number;
  readonly objects: number;
  /** ISO time of the table's last flush commit. */
  readonly lastFlushAt?: string;
  /** Source commit -> durable lag of the last flushed row, ms. */
  readonly lagMs?: number;
  /**
   * The table's snapshot (docs/decisions/0013-snapshots.md): pending key ranges and counts;
   * absent for a table captured with `snapshot: never` (or before snapshots existed).
   */
  readonly snapshot?: TableSnapshot;
  /** A stopped table: its changes are dropped until it is re-snapshotted. */
  readonly stopped?: { readonly at: string; readonly reason: string };
}

/** A gap or a destructive DDL the stream carried, as the state records it. */
export interface CdcStreamEvent {
  readonly at: string;
  readonly kind: 'gap' | 'truncate' | 'ddl' | 'schema';
  readonly table: string;
  readonly detail: string;
}

export interface CdcState {
  /** Where the stream resumes; undefined before the first commit of a position. */
  readonly position?: SourcePosition;
  readonly tables: { readonly [target: string]: CdcTableState };
  /** Newest last, at most EVENT_LOG entries. */
  readonly events?: readonly CdcStreamEvent[];
  /** ISO time of the last commit. */
  readonly lastCommitAt?: string;
}

/** The key of a CDC source's state item. */
export function cdcStateKey(pipeline: string, source: string): string {
  return `cdc#${pipeline}#${source}`;
}

export function initialCdcState(): CdcState {
  return { tables: {} };
}

/** Validates a stored value; a corrupt item is an error, never silently a fresh start. */
export function parseCdcState(value: unknown): CdcState {
  if (value === undefined) return initialCdcState();
  const v = value as Partial<CdcState>;
  const pos = v.position as Partial<SourcePosition> | undefined;
  if (
    typeof v !== 'object' ||
    v === null ||
    typeof v.tables !== 'object' ||
    v.tables === null ||
    (pos !== undefined && (typeof pos.scheme !== 'string' || typeof pos.value !== 'string'))
  ) {
    throw new TidemarkError(
      'STATE_CORRUPT',
      `stored CDC state is not valid (${JSON.stringify(value).slice(0, 200)}); inspect it with tidemark status`,
    );
  }
  return v as CdcState;
}

/** `state` with `event` appended to its log (newest EVENT_LOG kept, detail bounded). */
export function withEvent(state: CdcState, event: CdcStreamEvent): CdcState {
  const e = { ...event, detail: event.detail.slice(0, EVENT_DETAIL) };
  return { ...state, events: [...(state.events ?? []), e].slice(-EVENT_LOG) };
}

/** The state log entry of a destructive DDL. */
export function ddlEvent(ddl: DestructiveDDL, at: string): CdcStreamEvent {
  return { at, kind: ddl.kind, table: ddl.table, detail: ddl.detail };
}

/**
 * Whether a table's entry says it writes `lake` (its CDC lake schema): the entry keeps only
 * `schemaHash`, so the hashes are compared. An entry without a hash (written before hashes were
 * recorded) says nothing, and matches; so does a hash written by a release that still hashed the
 * source types (`schemaHashWithSourceTypes`), for the same lake schema.
 */
export function entryWritesSchema(entry: CdcTableState | undefined, lake: Schema): boolean {
  const stored = entry?.schemaHash;
  return stored === undefined || stored === schemaHash(lake) || stored === schemaHashWithSourceTypes(lake);
}

/** The newest schema stop the state's event log holds for `target`, if any. */
export function lastSchemaStop(state: CdcState, target: string): CdcStreamEvent | undefined {
  return state.events?.findLast((e) => e.kind === 'schema' && e.table === target);
}
