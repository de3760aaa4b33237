/**
 * The check lines both SQL drivers' preflights share: what the keyset planner said about a table's
 * key, cursor and index, turned into `key`, `cursor` and `index` lines (shared/contracts/check.ts).
 *
 * Owns the wording of those lines, so `tidemark check` reads the same on every database. Never
 * queries: the driver plans the keyset (or catches its refusal) and passes the outcome in.
 */
import { type CheckItem, failed, passed, warned } from '../contracts/check.js';
import { isErrorCode } from '../contracts/error-codes.js';
import { SourceError, type TidemarkError } from '../contracts/errors.js';
import type { Warning } from '../contracts/source.js';

/** What a driver's keyset planner returned for a table, in the shape both drivers share. */
export interface KeysetOutcome {
  readonly primaryKey: readonly string[];
  readonly cursorColumn: string;
  /** The cursor column as introspected, when the table has it. */
  readonly column: { readonly name: string; readonly sourceType: string } | undefined;
  /** The planned keyset, or undefined when the planner refused (then `refusal` says why). */
  readonly keyset:
    | {
        readonly cursor: { readonly name: string; readonly sourceType: string };
        readonly keys: readonly { readonly name: string }[];
        readonly warnings: readonly Warning[];
      }
    | undefined;
  readonly refusal: unknown;
}

/** The `key`, `cursor` and `index` lines of a planned (or refused) keyset. */
export function keysetLines(o: KeysetOutcome): CheckItem[] {
  const items: CheckItem[] = [];
  const { keyset, refusal } = o;
  const keyMissing = (refusal as TidemarkError | undefined)?.code === 'SOURCE_KEY_MISSING';
  if (keyMissing) items.push(failed('key', refusal));
  else if (o.primaryKey.length > 0) items.push(passed('key', `primary key (${o.primaryKey.join(', ')})`));
  else if (keyset)
    items.push(
      passed(
        'key',
        `no primary key; cursor "${o.cursorColumn}" is UNIQUE NOT NULL, so it alone keys the pages`,
      ),
    );

  if (keyset) {
    items.push(
      passed(
        'cursor',
        `"${keyset.cursor.name}" ${keyset.cursor.sourceType}; pages keyed on (${keyset.keys.map((k) => k.name).join(', ')})`,
      ),
    );
    const unindexed = keyset.warnings.find((w) => w.code === 'CURSOR_NOT_INDEXED');
    items.push(
      unindexed ? warned('index', unindexed) : passed('index', `an index leads with "${o.cursorColumn}"`),
    );
  } else if (keyMissing && o.column) {
    // The keyset refused the key after it had accepted the cursor column's type.
    items.push(passed('cursor', `"${o.column.name}" ${o.column.sourceType}`));
  } else {
    items.push(failed('cursor', refusal));
  }
  return items;
}

/**
 * A CDC start's refusal from its preflight lines: the first line of `ids` that failed, thrown as
 * the source error `tidemark check` showed for it (same code, same words and fix), so a start
 * never fails with a raw server error where check had a line. Lines of other ids are left to
 * the run (warnings, and what the reader judges itself).
 */
export function refuseFailedPreconditions(
  source: string,
  lines: readonly CheckItem[],
  ids: ReadonlySet<string>,
): void {
  const fail = lines.find((l) => l.status === 'fail' && ids.has(l.check));
  if (fail)
    throw new SourceError(
      isErrorCode(fail.code) ? fail.code : 'CDC_PRECONDITION',
      `${source}: ${fail.message}`,
    );
}
