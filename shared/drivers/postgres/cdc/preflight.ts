/**
 * Postgres CDC preflight (`tidemark check`): what the change stream of a source needs, checked
 * before `tidemark cdc` starts and reported line by line (ids `wal_level`, `version`,
 * `replication`, `slots`, `senders`, `slot`, `wal_keep`, `publication`, and per table `toast`),
 * each failure one message naming the fix.
 *
 * Owns: those lines and their wording; the publication line reports what
 * publication.ts `planPublications` plans, so a check and a start never disagree.
 *
 * Must never create, alter or drop anything: no slot, no publication (a slot left behind by a
 * check would keep WAL forever). Reads catalogs and settings only, on a normal connection.
 */
import { type CheckItem, failed, passed, step } from '../../../contracts/check.js';
import { SourceError } from '../../../contracts/errors.js';
import type { Sql } from '../connect.js';
import { quoteIdent } from '../types.js';
import {
  type PublicationOwner,
  type PublicationPlan,
  type PublishedTable,
  type PublishedTableInfo,
  planPublications,
  publishedTableInfo,
} from './publication.js';

/** CDC needs `messages 'true'` of pgoutput (PostgreSQL 14). */
export const MIN_CDC_SERVER_VERSION_NUM = 140000;

export interface PostgresCdcPreflightOptions {
  readonly slot: string;
  readonly publication: string;
  readonly tables: readonly PublishedTable[];
  /** The capture checked: another capture's publication or slot of the same name is refused. */
  readonly owner?: PublicationOwner;
}

/** The source-wide CDC lines; never throws (a statement that fails is that line's `fail`). */
export async function preflightCdcSource(sql: Sql, opts: PostgresCdcPreflightOptions): Promise<CheckItem[]> {
  return [
    await step('wal_level', () => walLevel(sql)),
    await step('version', () => serverVersion(sql)),
    await step('replication', () => replicationRole(sql)),
    await step('slots', () => freeSlots(sql, opts.slot)),
    await step('senders', () => freeSenders(sql)),
    await slotItem(sql, opts.slot),
    await walKeepLine(sql, opts.slot),
    ...(await publicationLines(sql, opts)),
    await watermarkLine(sql),
  ];
}

/**
 * The `watermarks` line: heartbeats and snapshot windows (docs/decisions/0013-snapshots.md) are
 * logical messages the role must be allowed to emit. A warning, not a failure: a capture whose
 * tables are all `snapshot: never` runs without (its idle slot then advances only with changes).
 */
async function watermarkLine(sql: Sql): Promise<CheckItem> {
  try {
    const r = await one<{ ok: boolean; role: string }>(
      sql,
      // The text-content overload (PostgreSQL 17 added a `flush` argument with a default).
      `SELECT coalesce(bool_or(has_function_privilege(p.oid, 'EXECUTE')), false) AS ok, current_user::text AS role
       FROM pg_catalog.pg_proc p
       WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname = 'pg_logical_emit_message'
         AND p.proargtypes[2] = 'pg_catalog.text'::pg_catalog.regtype`,
    );
    if (r.ok)
      return passed(
        'watermarks',
        'pg_logical_emit_message is allowed: heartbeats and snapshot watermarks are logical messages (no table is written)',
      );
    return {
      check: 'watermarks',
      status: 'warn',
      code: 'SOURCE_PRIVILEGE',
      message: `role ${r.role} may not call pg_logical_emit_message: snapshot: initial tables cannot be snapshotted and an idle slot is not advanced by heartbeats; GRANT EXECUTE ON FUNCTION pg_catalog.pg_logical_emit_message(boolean, text, text) TO "${r.role}"; (PostgreSQL 17 and later: (boolean, text, text, boolean)) (or set snapshot: never)`,
    };
  } catch (e) {
    return failed('watermarks', e);
  }
}

/**
 * The `toast` line of one table: how unchanged TOASTed values (which the log does not carry
 * under the default replica identity) are filled in. `info` is the publication plan's fact about
 * the table; without it, the catalog is read.
 */
export async function preflightCdcTable(
  sql: Sql,
  table: PublishedTable,
  info?: PublishedTableInfo,
): Promise<CheckItem> {
  return step('toast', async () => {
    const facts = info ?? (await publishedTableInfo(sql, table));
    if (facts.replicaIdentity === 'f')
      return 'REPLICA IDENTITY FULL: unchanged TOAST values come from the old row (exact)';
    if (facts.toastable.length === 0) return 'no column can be TOASTed: every UPDATE carries every value';
    if (table.insertOnly)
      return `insertOnly: only INSERTs are captured, and an INSERT carries every value (TOASTable: ${names(facts.toastable)})`;
    return `unchangedToast: reread: values of unchanged TOASTed columns (${names(facts.toastable)}) are read back by key at each flush; REPLICA IDENTITY FULL would make them exact at the cost of logging the whole old row on every UPDATE/DELETE`;
  });
}

function names(columns: readonly string[]): string {
  return columns.map((c) => `"${c}"`).join(', ');
}

async function one<T>(sql: Sql, query: string, params: string[] = []): Promise<T> {
  const [row] = await sql.unsafe<T[]>(query, params);
  return row!;
}

async function walLevel(sql: Sql): Promise<string> {
  const { level } = await one<{ level: string }>(sql, "SELECT current_setting('wal_level') AS level");
  if (level !== 'logical') {
    throw new SourceError(
      'CDC_WAL_LEVEL',
      `wal_level is ${level}, logical replication needs logical: set wal_level = logical and restart; on RDS/Aurora set rds.logical_replication = 1 in the DB (cluster) parameter group and reboot`,
    );
  }
  return 'wal_level is logical';
}

async function serverVersion(sql: Sql): Promise<string> {
  const v = await one<{ num: number; text: string }>(
    sql,
    "SELECT current_setting('server_version_num')::int AS num, current_setting('server_version') AS text",
  );
  if (v.num < MIN_CDC_SERVER_VERSION_NUM) {
    throw new SourceError(
      'SOURCE_VERSION_UNSUPPORTED',
      `PostgreSQL ${v.text}: CDC needs PostgreSQL 14 or later (pgoutput's messages option); upgrade, or use mode: incremental, which works from PostgreSQL 13`,
    );
  }
  return `PostgreSQL ${v.text} streams pgoutput with messages`;
}

async function replicationRole(sql: Sql): Promise<string> {
  const r = await one<{ role: string; repl: boolean; su: boolean; rds: boolean; rds_member: boolean }>(
    sql,
    `SELECT r.rolname::text AS role, r.rolreplication AS repl, r.rolsuper AS su,
            EXISTS (SELECT 1 FROM pg_roles g WHERE g.rolname = 'rds_replication') AS rds,
            EXISTS (SELECT 1 FROM pg_roles g WHERE g.rolname = 'rds_replication' AND pg_has_role(r.oid, g.oid, 'MEMBER')) AS rds_member
     FROM pg_roles r WHERE r.rolname = current_user`,
  );
  if (r.su) return `role "${r.role}" is a superuser`;
  if (r.repl) return `role "${r.role}" has REPLICATION`;
  if (r.rds_member) return `role "${r.role}" is a member of rds_replication`;
  const role = quoteIdent(r.role);
  throw new SourceError(
    'CDC_REPLICATION_PRIVILEGE',
    r.rds
      ? `role "${r.role}" may not stream changes: on RDS/Aurora run GRANT rds_replication TO ${role};`
      : `role "${r.role}" may not stream changes (no REPLICATION attribute): run ALTER ROLE ${role} REPLICATION;`,
  );
}

async function freeSlots(sql: Sql, slot: string): Promise<string> {
  const s = await one<{ max: number; used: number; ours: boolean }>(
    sql,
    `SELECT current_setting('max_replication_slots')::int AS max,
            (SELECT count(*) FROM pg_replication_slots)::int AS used,
            EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1) AS ours`,
    [slot],
  );
  if (s.ours) return `slot "${slot}" exists (${s.used} of max_replication_slots ${s.max} in use)`;
  if (s.max - s.used <= 0) {
    throw new SourceError(
      'CDC_NO_FREE_SLOT',
      `all ${s.max} replication slots are in use (max_replication_slots), so slot "${slot}" cannot be created: raise max_replication_slots (needs a restart), or drop a slot nobody reads (SELECT slot_name, active FROM pg_replication_slots)`,
    );
  }
  return `${s.max - s.used} of max_replication_slots ${s.max} free`;
}

async function freeSenders(sql: Sql): Promise<string> {
  const s = await one<{ max: number; used: number }>(
    sql,
    `SELECT current_setting('max_wal_senders')::int AS max, (SELECT count(*) FROM pg_stat_replication)::int AS used`,
  );
  if (s.max - s.used <= 0) {
    throw new SourceError(
      'CDC_NO_FREE_SENDER',
      `all ${s.max} WAL senders are busy (max_wal_senders), so the change stream cannot connect: raise max_wal_senders (needs a restart), or end a replication connection nobody needs (pg_stat_replication)`,
    );
  }
  return `${s.max - s.used} of max_wal_senders ${s.max} free`;
}

interface SlotRow {
  plugin: string | null;
  slot_type: string;
  database: string | null;
  here: string;
  temporary: boolean;
  active: boolean;
  wal_status: string | null;
  confirmed_flush_lsn: string | null;
  restart_lsn: string | null;
  lag: string | null;
  safe_wal_size: string | null;
}

async function readSlot(sql: Sql, slot: string): Promise<SlotRow | undefined> {
  const [row] = await sql.unsafe<SlotRow[]>(
    `SELECT plugin::text, slot_type::text, database::text, current_database()::text AS here, temporary, active,
            wal_status, confirmed_flush_lsn::text, restart_lsn::text,
            pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END,
                            restart_lsn)::bigint::text AS lag,
            safe_wal_size::text
     FROM pg_replication_slots WHERE slot_name = $1`,
    [slot],
  );
  return row;
}

/**
 * The `slot` line; a warning for a slot no reader is attached to: it retains WAL until a
 * capture reads it again (a first start that failed, a task that is down, a source dropped from
 * the spec), which the disk pays for.
 */
async function slotItem(sql: Sql, slot: string): Promise<CheckItem> {
  const item = await step('slot', () => slotLine(sql, slot));
  if (item.status !== 'ok') return item;
  const s = await readSlot(sql, slot).catch(() => undefined);
  if (!s || s.active) return item;
  return {
    ...item,
    status: 'warn',
    code: 'CDC_SLOT_IDLE',
    message: `${item.message}: no capture reads it, and the server keeps its WAL until one does; run tidemark cdc, or drop the slot (SELECT pg_drop_replication_slot('${slot}');) if this source is no longer captured`,
  };
}

async function slotLine(sql: Sql, slot: string): Promise<string> {
  const s = await readSlot(sql, slot);
  if (!s) return `slot "${slot}" does not exist yet: it will be created on first start`;
  const drop = `SELECT pg_drop_replication_slot('${slot}');`;
  const other = (what: string) =>
    new SourceError(
      'CDC_SLOT_FOREIGN',
      `slot "${slot}" exists but ${what}, so it is not this source's: drop it (${drop}) if nothing reads it, or choose another name in sources.<name>.cdc.slot`,
    );
  if (s.slot_type !== 'logical') throw other('is a physical slot');
  if (s.plugin !== 'pgoutput') throw other(`decodes with plugin ${s.plugin}, not pgoutput`);
  if (s.database !== s.here) throw other(`belongs to database "${s.database}", not "${s.here}"`);
  if (s.temporary) throw other('is temporary');
  if (s.wal_status === 'lost') {
    throw new SourceError(
      'POSITION_LOST',
      `slot "${slot}" is invalidated (wal_status lost: it fell further behind than max_slot_wal_keep_size and its WAL was removed), so the changes since its position are gone: drop the slot (${drop}) and re-snapshot the source's tables or reset the source's CDC state`,
    );
  }
  return `slot "${slot}" exists (pgoutput, ${s.active ? 'active: a reader is attached' : 'inactive'}, wal_status ${s.wal_status}, confirmed_flush_lsn ${s.confirmed_flush_lsn}, ${bytes(s.lag)} of WAL retained behind restart_lsn ${s.restart_lsn})`;
}

async function walKeepLine(sql: Sql, slot: string): Promise<CheckItem> {
  try {
    const k = await one<{ keep: string; raw: string }>(
      sql,
      `SELECT current_setting('max_slot_wal_keep_size') AS keep, setting AS raw
       FROM pg_settings WHERE name = 'max_slot_wal_keep_size'`,
    );
    if (Number(k.raw) < 0) {
      return {
        check: 'wal_keep',
        status: 'warn',
        code: 'CDC_WAL_UNBOUNDED',
        message:
          'max_slot_wal_keep_size is -1: a slot that falls behind keeps WAL without limit: the risk is a full disk; set max_slot_wal_keep_size (then a slot too far behind is invalidated instead, and the tables re-snapshot)',
      };
    }
    const s = await readSlot(sql, slot);
    const headroom =
      s?.safe_wal_size != null
        ? `; slot "${slot}" may fall ${bytes(s.safe_wal_size)} further behind before it is invalidated`
        : '';
    return passed(
      'wal_keep',
      `max_slot_wal_keep_size is ${k.keep}: a slot further behind is invalidated${headroom}`,
    );
  } catch (e) {
    return failed('wal_keep', e);
  }
}

/** The publication lines: the plan's refusals as fails, else one line of what exists or will be made. */
async function publicationLines(sql: Sql, opts: PostgresCdcPreflightOptions): Promise<CheckItem[]> {
  let plan: PublicationPlan;
  try {
    plan = await planPublications(sql, opts.publication, opts.tables, opts.owner);
  } catch (e) {
    return [failed('publication', e)];
  }
  if (plan.problems.length > 0) return plan.problems.map((p) => failed('publication', p));
  const parts = plan.publications.map((p) =>
    p.state === 'matches'
      ? `"${p.name}" holds exactly ${p.tables.length ? p.tables.join(', ') : 'no table'}`
      : `"${p.name}" will be ${p.state === 'create' ? 'created' : 'altered'} on first start: ${p.statements.join('; ')}`,
  );
  return [passed('publication', parts.join('; ') || 'no table to publish')];
}

/** `1234567` as `1.2 MB` (the byte count of an LSN difference or a size setting). */
function bytes(text: string | null): string {
  const n = Number(text ?? 0);
  if (n < 1024) return `${n} bytes`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}
