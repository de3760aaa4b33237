/**
 * The errors an incremental run stops with, beyond the shared ones (shared/contracts/errors.ts):
 * a spec that no longer matches the stored cursor, rows the cursor would never reach, a state
 * that does not account for this writer's objects in the lake, and a page read that stalled.
 * Each is thrown before anything past the last committed page is written; the two state errors
 * before recovery deletes anything (./run.ts, the durability order).
 *
 * Owns the codes' messages, each with the way out (docs/errors.md).
 */
import { TidemarkError } from '../../contracts/errors.js';
import type { ObjectRef } from '../../contracts/sink.js';

/** The spec names another cursor column than the one the stored cursor was taken on. */
export class CursorColumnChangedError extends TidemarkError {
  override name = 'CursorColumnChangedError';
  constructor(table: string, before: string, after: string) {
    super(
      'CURSOR_COLUMN_CHANGED',
      `${table}: the stored cursor was taken on column "${before}" but the spec now says "${after}"; restore the spec or reset the table's state (tidemark reset) to resync from the start`,
    );
  }
}

/** Rows have NULL in the cursor column (`nullCursor: refuse`): no cursor would ever reach them. */
export class NullCursorError extends TidemarkError {
  override name = 'NullCursorError';
  constructor(table: string, column: string, count: number) {
    super(
      'NULL_CURSOR',
      `${table}: ${count} row(s) have NULL in cursor column "${column}" and would never be synced; backfill the column (e.g. UPDATE ... SET ${column} = now() WHERE ${column} IS NULL) or set nullCursor: skip to leave them out knowingly`,
    );
  }
}

/** How to re-sync a table on purpose when its state and the lake disagree. */
function resyncChoices(target: string, count: number): string {
  return `restore the state (the newest backup, or point "state:" at the store that has it), or re-sync on purpose: "tidemark reset -c SPEC --table ${target} --keep-objects" keeps the ${count} object(s) and writes after them (readers pick the newest version by __pos), "--delete-objects" deletes those ${count} object(s) first`;
}

/** The lake holds a writer's objects but the state store has no state for the table. */
export class StateMissingError extends TidemarkError {
  override name = 'StateMissingError';
  constructor(key: string, target: string, writer: string, objects: readonly ObjectRef[]) {
    const bytes = objects.reduce((n, o) => n + o.bytes, 0);
    super(
      'STATE_MISSING',
      `${target}: the state store has no state under ${key}, but the lake already holds ${objects.length} object(s) (${(bytes / 1e6).toFixed(1)} MB) written by ${writer}, the newest ${objects.at(-1)?.uri}; nothing was deleted or written. ${resyncChoices(target, objects.length)}`,
    );
  }
}

/** The lake holds a writer's objects from pages the state says were never committed. */
export class StateBehindLakeError extends TidemarkError {
  override name = 'StateBehindLakeError';
  constructor(
    key: string,
    target: string,
    writer: string,
    seq: number,
    ahead: readonly ObjectRef[],
    count: number,
  ) {
    super(
      'STATE_BEHIND_LAKE',
      `${target}: the state under ${key} says page ${seq} is next, but the lake holds ${ahead.length} object(s) of ${writer} from later pages (up to ${ahead.at(-1)?.uri}): the state is older than the lake (restored from a backup, or another state store); nothing was deleted or written. ${resyncChoices(target, count)}`,
    );
  }
}

/** A page read outlived the page timeout (./read-ahead.ts aborts it and its connection). */
export class PageTimeoutError extends TidemarkError {
  override name = 'PageTimeoutError';
  constructor(table: string, ms: number) {
    super(
      'PAGE_TIMEOUT',
      `${table}: a page read took longer than ${Math.round(ms / 1000)} s; the connection is closed and nothing past the last committed page was written; the next run resumes from there`,
    );
  }
}
