/**
 * The check lines both SQL drivers' preflights share: a table's lines in their order (`table`,
 * `key`, `cursor`, `index`, `timezone`, `privilege`), with the wording of all but the driver's
 * own facts, and what the keyset planner said about a table's key, cursor and index turned into
 * `key`, `cursor` and `index` lines (shared/contracts/check.ts).
 *
 * Owns the order and the wording of those lines, so `tidemark check` reads the same on every
 * database. Never queries: the driver's preflight.ts passes in the steps that do (introspection,
 * the keyset plan, the time zone and privilege checks) and the words that name its own facts.
 */
import {
  type CheckItem,
  failed,
  type PreflightTable,
  passed,
  step,
  type TablePreflight,
  warned,
} from '../contracts/check.js';
import { isErrorCode } from '../contracts/error-codes.js';
import { SourceError, type TidemarkError } from '../contracts/errors.js';
import type { Warning } from '../contracts/source.js';
import type { Keyset, KeysetColumn, ResolvedTable } from './keyset.js';

/** The bound settings of the table's source, as the `privilege` line reports them. */
export interface PreflightBound {
  readonly lagOnly: boolean;
  readonly lagMs: number;
}

/** A driver's steps of a table's check (`tableLines`); each throws as a run would. */
export interface TableChecks<P extends ResolvedTable<KeysetColumn>, T extends string> {
  /** Who the `table` line says may SELECT: the `role` (Postgres), the `account` (MySQL). */
  readonly who: 'role' | 'account';
  introspect(): Promise<P>;
  keyset(plan: P): Promise<Keyset<KeysetColumn, T>>;
  /** The `timezone` line of a keyset bounded by the time cursor `cursor` of bound type `type`. */
  timeZone(plan: P, cursor: string, type: T): Promise<CheckItem>;
  /** Checks the privilege the bound reads other sessions' transactions with. */
  privilege(plan: P): Promise<void>;
  /** The `privilege` line once it passed (without lagOnly): what the source can see. */
  readonly seesTransactions: string;
}

/** Every table line a driver can judge: table, key, cursor, index, timezone, privilege. */
export async function tableLines<P extends ResolvedTable<KeysetColumn>, T extends string>(
  t: PreflightTable,
  bound: PreflightBound,
  checks: TableChecks<P, T>,
): Promise<TablePreflight> {
  let plan: P;
  try {
    plan = await checks.introspect();
  } catch (e) {
    return { items: [failed('table', e)] };
  }
  const items: CheckItem[] = [
    passed('table', `exists, and this ${checks.who} may SELECT from it (${plan.columns.length} columns)`),
  ];
  const cursor = plan.columns.find((c) => c.name === t.cursorColumn);
  let keyset: Keyset<KeysetColumn, T> | undefined;
  let refusal: unknown;
  try {
    keyset = await checks.keyset(plan);
  } catch (e) {
    refusal = e;
  }
  items.push(
    ...keysetLines({
      primaryKey: plan.primaryKey,
      cursorColumn: t.cursorColumn,
      column: cursor,
      keyset,
      refusal,
    }),
  );
  if (keyset?.bound.kind === 'time')
    items.push(await checks.timeZone(plan, keyset.cursor.name, keyset.bound.type));

  items.push(
    await step('privilege', async () => {
      await checks.privilege(plan);
      return bound.lagOnly
        ? `lagOnly: true: other sessions' open transactions are not consulted; only the lag (${bound.lagMs / 1000} s) protects against late commits`
        : checks.seesTransactions;
    }),
  );
  return {
    items,
    ...(cursor ? { resolved: { ref: plan.ref, schema: plan.schema, cursorNotNull: cursor.notNull } } : {}),
  };
}

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
