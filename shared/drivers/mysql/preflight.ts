/**
 * MySQL/MariaDB preflight (`tidemark check`): what an incremental run of a table needs, checked
 * before it runs and reported line by line instead of as the first refusal. Composes
 * introspect.ts and bound.ts, so a check fails with the same message and fix a run would. The
 * same lines, in the same order, as the Postgres preflight: both run ../preflight-lines.ts
 * `tableLines`, which owns that order and the shared wording.
 *
 * Owns: this driver's steps and words for the table lines, the `connect` line, and the one
 * warning only a check gives (a DATETIME cursor). Must never write and never read table rows: the NULL count is the caller's
 * (it applies the spec's `nullCursor` policy).
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
import { checkTransactionPrivilege, type TimeBoundType, timeBound } from './bound.js';
import { currentAccount, type MysqlConnection } from './connect.js';
import { introspectTable, keysetPlan, type TablePlan } from './introspect.js';

/** Runs a statement with the source's error translation (connection failures become SourceErrors). */
export type Guard = <T>(fn: () => Promise<T>) => Promise<T>;

/** The bound settings of the table's source; the DATETIME check reads a bound with them. */
export interface MysqlPreflightBound extends PreflightBound {
  readonly stallAfterMs: number;
}

/** The `connect` line: server flavor and version, endpoint and account (never the password). */
export async function preflightConnection(db: MysqlConnection, guard: Guard): Promise<CheckItem[]> {
  return [
    await step('connect', async () => {
      const server = await guard(() => db.server());
      const account = await guard(() => currentAccount(db));
      const ep = db.endpoint;
      return `${server.flavor === 'mariadb' ? 'MariaDB' : 'MySQL'} ${server.version} at ${ep.host}:${ep.port} as ${account}`;
    }),
  ];
}

/** Every table line a driver can judge, in the shared order (../preflight-lines.ts `tableLines`). */
export async function preflightTable(
  db: MysqlConnection,
  t: PreflightTable,
  bound: MysqlPreflightBound,
  guard: Guard,
): Promise<TablePreflight> {
  return tableLines(t, bound, {
    who: 'account',
    introspect: () => guard(() => introspectTable(db, t)),
    keyset: async (plan) => keysetPlan(plan, t.cursorColumn),
    timeZone: (plan, cursor, type) => timeZoneLine(db, plan, cursor, type, bound, guard),
    privilege: async (plan) => {
      await guard(() => checkTransactionPrivilege(db, plan.source, bound.lagOnly));
    },
    seesTransactions: `this account sees other sessions' open transactions (PROCESS: information_schema.INNODB_TRX), so a late commit holds the bound back`,
  });
}

/**
 * DATETIME and DATE bounds are converted to the server's @@global.time_zone, which needs the
 * time zone tables for a named zone (else a run stops with SOURCE_TIME_ZONE): the bound is read
 * once here, without the transaction listing, to find out. A DATETIME cursor is a wall clock
 * writers take in their session zone; a writer whose session sets another zone (many ORMs set
 * UTC) stamps values the bound misreads by the difference, so its late commits can be skipped.
 */
async function timeZoneLine(
  db: MysqlConnection,
  plan: TablePlan,
  c: string,
  type: TimeBoundType,
  bound: MysqlPreflightBound,
  guard: Guard,
): Promise<CheckItem> {
  if (type === 'timestamp') {
    return passed('timezone', `"${c}" is a TIMESTAMP: stored and compared in UTC, whatever zone writers use`);
  }
  try {
    await guard(() => timeBound(db, type, bound.lagMs, bound.stallAfterMs, false));
    if (type === 'date') {
      return passed('timezone', `"${c}" is a DATE: a day is read once it is over in the server's time zone`);
    }
    const [row] = await guard(() => db.query<{ zone: string }>('SELECT @@global.time_zone AS zone'));
    return {
      check: 'timezone',
      status: 'warn',
      code: 'CURSOR_WALL_CLOCK',
      message:
        `${plan.source}: cursor "${c}" is a DATETIME (a wall clock), so the bound is computed in the server's time zone (@@global.time_zone ${row?.zone}); ` +
        `a writer that sets its own session time_zone stamps rows the bound misreads, and their late commits can be skipped; ` +
        `make it a TIMESTAMP, run the server in UTC, or keep a lag above any difference (docs/cursor.md, MySQL cursor types)`,
    };
  } catch (e) {
    return failed('timezone', e);
  }
}
