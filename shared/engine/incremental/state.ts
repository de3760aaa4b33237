/**
 * The state value of one incremental table (docs/decisions/0001-state-item-schema.md), stored
 * under `inc#<pipeline>#<target>` in the cursor store.
 *
 * `seq` counts committed pages; it names the next object (`incrementalPosPrefix(seq)`) and
 * prefixes every row's `__pos`, which is why positions sort in sync order for every cursor type.
 * `cursor` and `seq` are what a run resumes from; everything else is what `tidemark status`
 * shows, and a stored value whose display fields are missing or malformed still runs.
 */
import { TidemarkError } from '../../contracts/errors.js';
import { type LakeFormat, parseRecordedFormat } from '../../contracts/lake-format.js';
import type { PendingCommit } from '../../contracts/sink.js';
import { parseRecordedTableFormat, type TableFormat } from '../../contracts/table-format.js';
import { parseStoredSchema, type StoredSchema } from '../../dataplane/schema-rules.js';

/** The key of an incremental table's state item. */
export function incrementalStateKey(pipeline: string, target: string): string {
  return `inc#${pipeline}#${target}`;
}

/** Why a run stopped reading. */
export type StopReason = 'caught-up' | 'deadline' | 'max-pages' | 'interrupted' | 'error';

const STOP_REASONS: readonly string[] = ['caught-up', 'deadline', 'max-pages', 'interrupted', 'error'];

/** An error as the state records it: its documented code and the first line of its message. */
export interface RecordedError {
  readonly code: string;
  readonly message: string;
}

/** The outcome of the last run that still held its lease at the end (its final commit). */
export interface LastRun {
  /** ISO times. */
  readonly startedAt: string;
  readonly finishedAt: string;
  /** Lease owner of the run (shared/state/lease-owner.ts). */
  readonly owner: string;
  readonly result: 'ok' | 'error';
  readonly stopped: StopReason;
  /** Rows, pages and bytes this run committed. */
  readonly rows: number;
  readonly pages: number;
  readonly bytes: number;
  readonly durationMs: number;
  readonly error?: RecordedError;
}

export interface IncrementalState {
  /** Resume token: (cursor value, primary key) of the last committed row; '' = from the start. */
  readonly cursor: string;
  /** The token rendered for people (`updated_at=..., id=...`); display only. */
  readonly cursorText?: string;
  /** The cursor column the token was taken on. */
  readonly cursorColumn: string;
  /** Committed pages so far; the next object's start position is derived from it. */
  readonly seq: number;
  /** Row versions committed over the table's life. */
  readonly rowsTotal: number;
  /** ISO time of the last commit that moved the cursor. */
  readonly lastCommitAt?: string;
  /**
   * The cursor value of `cursor` as a UTC instant (epoch ms), for timestamp cursors: how fresh
   * the synced data is. Wall-clock cursors are placed in the source's time zone (WallClockZone).
   */
  readonly newestCursorMs?: number;
  /** Objects written by the last page commit (stored as `lastObjects` before 2026-12-01). */
  readonly objects?: readonly string[];
  /** The last run's outcome, written by its final commit. */
  readonly lastRun?: LastRun;
  /** The last failed run's error, kept after later runs succeed; `at` is an ISO time. */
  readonly lastError?: RecordedError & { readonly at: string };
  /**
   * The schema the table writes (docs/schema-changes.md): what a run compares the table's
   * current schema with. Undefined in a state written before schemas were recorded.
   */
  readonly schema?: StoredSchema;
  /**
   * The lake format the table's objects are written in (docs/lake-format.md). Undefined in a
   * state written before formats were recorded (format 1), and after a reset that deleted the
   * table's objects (the next run takes the spec's `lake.format`).
   */
  readonly format?: LakeFormat;
  /**
   * The table format (shared/contracts/table-format.ts). Undefined in a state written before
   * table formats were recorded (plain, once a page was committed).
   */
  readonly tableFormat?: TableFormat;
  /**
   * An Iceberg table's last commit decided by a page commit (docs/decisions/0024): applied to the
   * catalog right after that commit, and again by the next run's recovery (a no-op when the table
   * has it).
   */
  readonly pending?: PendingCommit;
}

export function initialIncrementalState(cursorColumn: string): IncrementalState {
  return { cursor: '', cursorColumn, seq: 0, rowsTotal: 0 };
}

/** Validates a stored value; a corrupt item is an error, never silently a fresh start. */
export function parseIncrementalState(value: unknown, cursorColumn: string): IncrementalState {
  if (value === undefined) return initialIncrementalState(cursorColumn);
  const v = value as Partial<IncrementalState> & { lastObjects?: unknown };
  if (
    typeof v !== 'object' ||
    v === null ||
    typeof v.cursor !== 'string' ||
    typeof v.cursorColumn !== 'string' ||
    typeof v.seq !== 'number' ||
    !Number.isInteger(v.seq) ||
    v.seq < 0
  ) {
    throw new TidemarkError(
      'STATE_CORRUPT',
      `stored incremental state is not valid (${JSON.stringify(value).slice(0, 200)}); inspect it with tidemark status and reset the table if needed`,
    );
  }
  const objects = stringList(v.objects) ?? stringList(v.lastObjects);
  const lastRun = parseLastRun(v.lastRun);
  const lastError = parseRecordedError(v.lastError);
  const schema = parseStoredSchema(v.schema);
  const format = parseRecordedFormat('incremental state', v.format);
  const tableFormat = parseRecordedTableFormat('incremental state', v.tableFormat);
  const pending = parsePending(v.pending);
  return {
    cursor: v.cursor,
    cursorColumn: v.cursorColumn,
    seq: v.seq,
    rowsTotal: typeof v.rowsTotal === 'number' ? v.rowsTotal : 0,
    ...(typeof v.cursorText === 'string' ? { cursorText: v.cursorText } : {}),
    ...(typeof v.lastCommitAt === 'string' ? { lastCommitAt: v.lastCommitAt } : {}),
    ...(typeof v.newestCursorMs === 'number' ? { newestCursorMs: v.newestCursorMs } : {}),
    ...(objects ? { objects } : {}),
    ...(schema ? { schema } : {}),
    ...(format !== undefined ? { format } : {}),
    ...(tableFormat !== undefined ? { tableFormat } : {}),
    ...(pending ? { pending } : {}),
    ...(lastRun ? { lastRun } : {}),
    ...(lastError && typeof (v.lastError as { at?: unknown }).at === 'string'
      ? { lastError: { ...lastError, at: (v.lastError as { at: string }).at } }
      : {}),
  };
}

/** The first line of an error's message and its code, bounded so a state stays small. */
export function recordError(e: unknown): RecordedError {
  const code = (e as { code?: unknown })?.code;
  const message = e instanceof Error ? e.message : String(e);
  return {
    code: typeof code === 'string' ? code : 'UNEXPECTED',
    message: (message.split('\n')[0] ?? '').slice(0, 1000),
  };
}

/** A stored pending commit; one that is not whole is corrupt (never silently dropped: it is decided). */
function parsePending(v: unknown): PendingCommit | undefined {
  if (v === undefined) return undefined;
  const p = v as Partial<PendingCommit>;
  if (
    typeof p !== 'object' ||
    p === null ||
    typeof p.table !== 'string' ||
    typeof p.writer !== 'string' ||
    typeof p.commitId !== 'string' ||
    typeof p.manifest !== 'string' ||
    typeof p.manifestLength !== 'number' ||
    (p.position !== undefined && typeof p.position !== 'string') ||
    (p.keys !== undefined &&
      (typeof p.keys !== 'object' ||
        p.keys === null ||
        typeof p.keys.uri !== 'string' ||
        typeof p.keys.length !== 'number' ||
        !Array.isArray(p.keys.columns))) ||
    !Array.isArray(p.partitions)
  )
    throw new TidemarkError(
      'STATE_CORRUPT',
      `stored incremental state has a pending Iceberg commit that is not valid (${JSON.stringify(v).slice(0, 200)}); inspect it with tidemark status`,
    );
  parsePending(p.history);
  return p as PendingCommit;
}

function stringList(v: unknown): readonly string[] | undefined {
  return Array.isArray(v) && v.every((x) => typeof x === 'string') ? v : undefined;
}

function parseRecordedError(v: unknown): RecordedError | undefined {
  const e = v as Partial<RecordedError> | undefined;
  return typeof e === 'object' && e !== null && typeof e.code === 'string' && typeof e.message === 'string'
    ? { code: e.code, message: e.message }
    : undefined;
}

function parseLastRun(v: unknown): LastRun | undefined {
  const r = v as Partial<LastRun> | undefined;
  if (
    typeof r !== 'object' ||
    r === null ||
    typeof r.startedAt !== 'string' ||
    typeof r.finishedAt !== 'string' ||
    (r.result !== 'ok' && r.result !== 'error') ||
    !STOP_REASONS.includes(r.stopped as string)
  ) {
    return undefined;
  }
  const n = (x: unknown) => (typeof x === 'number' ? x : 0);
  const error = parseRecordedError(r.error);
  return {
    startedAt: r.startedAt,
    finishedAt: r.finishedAt,
    owner: typeof r.owner === 'string' ? r.owner : '',
    result: r.result,
    stopped: r.stopped as StopReason,
    rows: n(r.rows),
    pages: n(r.pages),
    bytes: n(r.bytes),
    durationMs: n(r.durationMs),
    ...(error ? { error } : {}),
  };
}
