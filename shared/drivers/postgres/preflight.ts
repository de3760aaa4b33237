/**
 * Postgres preflight (`tidemark check`): what an incremental run of a table needs, checked
 * before it runs and reported line by line instead of as the first refusal. Composes
 * introspect.ts and bound.ts, so a check fails with the same message and fix a run would.
 *
 * Owns: this driver's steps and words for the table lines, whose order and shared wording are
 * ../preflight-lines.ts `tableLines`; the `connect` line; and the one warning only a check gives
 * (a `timestamp without time zone` cursor). Must never write and never read table rows: the NULL
 * count is the caller's (it applies the spec's `nullCursor` policy).
 */
import {
  type CheckItem,
  failed,
  type PreflightTable,
  passed,
  step,
  type TablePreflight,
} from '../../contracts/check.js';
import { type PreflightBound, tableLines } from '../preflight-lines.js';
import { checkActivityPrivilege, type TimeBoundType } from './bound.js';
import type { Endpoint, Sql } from './connect.js';
import { introspectTable, keysetPlan, type TablePlan } from './introspect.js';

/** Runs a step on the source's connection (PostgresSource.guard: its errors become SourceErrors). */
export type Guard = <T>(fn: (sql: Sql) => Promise<T>) => Promise<T>;

/** The `connect` line: server version, endpoint and role (never the password). */
export async function preflightConnection(ep: Endpoint, guard: Guard): Promise<CheckItem[]> {
  return [
    await step('connect', async () => {
      const [row] = await guard((sql) =>
        sql.unsafe<{ role: string; version: string }[]>(
          "SELECT current_user::text AS role, current_setting('server_version') AS version",
        ),
      );
      return `PostgreSQL ${row?.version} at ${ep.host}:${ep.port}/${ep.database} as role "${row?.role}"`;
    }),
  ];
}

/** Every table line a driver can judge, in the shared order (../preflight-lines.ts `tableLines`). */
export async function preflightTable(
  t: PreflightTable,
  bound: PreflightBound,
  guard: Guard,
): Promise<TablePreflight> {
  return tableLines(t, bound, {
    who: 'role',
    introspect: () => guard((sql) => introspectTable(sql, t)),
    keyset: (plan) => guard((sql) => keysetPlan(sql, plan, t.cursorColumn)),
    timeZone: (plan, cursor, type) => timeZoneLine(plan, cursor, type, guard),
    privilege: (plan) => guard((sql) => checkActivityPrivilege(sql, plan.source, bound.lagOnly)),
    seesTransactions:
      "this role sees other sessions' open transactions (pg_read_all_stats), so a late commit holds the bound back",
  });
}

/**
 * A `timestamp without time zone` cursor is compared in the session's zone, the database
 * default, which is what writers' `now()` uses; a writer whose session sets another TimeZone
 * (many ORMs and drivers set UTC) stamps wall-clock values the bound misreads by the difference,
 * so its late commits can fall below a page already read.
 */
async function timeZoneLine(
  plan: TablePlan,
  c: string,
  type: TimeBoundType,
  guard: Guard,
): Promise<CheckItem> {
  if (type !== 'timestamp') {
    return passed(
      'timezone',
      type === 'date'
        ? `"${c}" is a date: a day is read once it is over in the database's time zone`
        : `"${c}" is timestamptz: the bound compares absolute times, whatever zone writers use`,
    );
  }
  try {
    const [row] = await guard((sql) =>
      sql.unsafe<{ zone: string }[]>("SELECT current_setting('TimeZone') AS zone"),
    );
    return {
      check: 'timezone',
      status: 'warn',
      code: 'CURSOR_WALL_CLOCK',
      message:
        `${plan.source}: cursor "${c}" is timestamp without time zone, so the bound is computed in the database's time zone (${row?.zone}); ` +
        `a writer that sets its own TimeZone stamps rows the bound misreads, and their late commits can be skipped; ` +
        `make it timestamptz, or keep every writer on the database's zone with a lag above any difference (docs/cursor.md, time cursors)`,
    };
  } catch (e) {
    return failed('timezone', e);
  }
}
