/**
 * What a MySQL/MariaDB server shows about its binlog, read for the CDC preflight (preflight.ts):
 * `BinlogFacts`, gathered by `readBinlogFacts` from SHOW GLOBAL VARIABLES, CURRENT_USER() and
 * SHOW GRANTS, the connected replicas (SHOW REPLICAS / SHOW SLAVE HOSTS), the binlog filters
 * (SHOW MASTER STATUS / SHOW BINARY LOG STATUS) and, on RDS, mysql.rds_configuration.
 *
 * Owns: those statements and the fallbacks between server versions and flavors. Judges nothing:
 * preflight.ts `judgeBinlog` turns the facts into lines, a pure function so that every branch is
 * tested from fixtures. Must never change anything (no SET, no CALL, no binlog connection):
 * reads variables, grants and status only.
 */
import { currentAccount, type MysqlConnection } from '../connect.js';

/** The variables the judging reads (SHOW GLOBAL VARIABLES; absent ones do not exist on that server). */
export const BINLOG_VARIABLES = [
  'log_bin',
  'binlog_format',
  'binlog_row_image',
  'binlog_row_metadata',
  'binlog_transaction_compression',
  'log_bin_compress',
  'binlog_row_value_options',
  'gtid_mode',
  'enforce_gtid_consistency',
  'gtid_domain_id',
  'gtid_current_pos',
  'gtid_binlog_pos',
  'server_id',
  'binlog_expire_logs_seconds',
  'binlog_expire_logs_auto_purge',
  'expire_logs_days',
  'basedir',
  'aurora_version',
] as const;

/** Everything the judging needs, as the server showed it. */
export interface BinlogFacts {
  readonly flavor: 'mariadb' | 'mysql';
  /** `VERSION()`. */
  readonly version: string;
  /** SHOW GLOBAL VARIABLES, names in lower case; a variable the server lacks is absent. */
  readonly variables: Readonly<Record<string, string>>;
  /** `'user'@'host'` of the session (CURRENT_USER()), as a GRANT names it. */
  readonly account: string;
  /** SHOW GRANTS, one statement per entry; undefined when it could not be read (`grantsError`). */
  readonly grants?: readonly string[];
  readonly grantsError?: string;
  /** Server ids of the connected replicas (SHOW REPLICAS / SHOW SLAVE HOSTS), or why they could not be listed. */
  readonly replicas:
    | readonly { readonly serverId: number; readonly host?: string }[]
    | { readonly unlisted: string };
  /** Amazon RDS or Aurora: `@@basedir` under /rdsdbbin, or `mysql.rds_configuration` exists. */
  readonly rds: boolean;
  /**
   * RDS: `binlog retention hours` of mysql.rds_configuration: a number as text, null for NULL
   * (the RDS default), undefined when it could not be read.
   */
  readonly rdsRetentionHours?: string | null;
  /**
   * The server's binlog filters (SHOW MASTER STATUS Binlog_Do_DB / Binlog_Ignore_DB): databases
   * whose rows are never logged; undefined when they could not be read.
   */
  readonly filters?: { readonly doDb: readonly string[]; readonly ignoreDb: readonly string[] };
}

/** Reads `BinlogFacts`. Throws only when the variables cannot be read; grants and replicas report their own failure. */
export async function readBinlogFacts(db: MysqlConnection): Promise<BinlogFacts> {
  const server = await db.server();
  const rows = await db.query<Record<string, string>>(
    `SHOW GLOBAL VARIABLES WHERE Variable_name IN (${BINLOG_VARIABLES.map((v) => `'${v}'`).join(', ')})`,
  );
  const variables: Record<string, string> = {};
  for (const row of rows) {
    const [name, value] = Object.values(row);
    if (name !== undefined) variables[String(name).toLowerCase()] = String(value ?? '');
  }
  const account = await currentAccount(db);
  let grants: string[] | undefined;
  let grantsError: string | undefined;
  try {
    grants = (await db.query<Record<string, string>>('SHOW GRANTS')).map((r) => String(Object.values(r)[0]));
  } catch (e) {
    grantsError = messageOf(e);
  }
  const replicas = await readReplicas(db, server.flavor);
  const filters = await readFilters(db);
  let rds = (variables.basedir ?? '').startsWith('/rdsdbbin');
  if (!rds) {
    const [t] = await db
      .query<{ n: string | number }>(
        "SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'mysql' AND TABLE_NAME = 'rds_configuration'",
      )
      .catch(() => []);
    rds = Number(t?.n ?? 0) > 0;
  }
  let rdsRetentionHours: string | null | undefined;
  if (rds) {
    try {
      const [r] = await db.query<{ value: string | null }>(
        "SELECT value FROM mysql.rds_configuration WHERE name = 'binlog retention hours'",
      );
      rdsRetentionHours = r ? r.value : undefined;
    } catch {
      rdsRetentionHours = undefined;
    }
  }
  return {
    flavor: server.flavor,
    version: server.version,
    variables,
    account,
    ...(grants ? { grants } : {}),
    ...(grantsError !== undefined ? { grantsError } : {}),
    replicas,
    rds,
    ...(rds ? { rdsRetentionHours } : {}),
    ...(filters ? { filters } : {}),
  };
}

/** Binlog_Do_DB / Binlog_Ignore_DB (MySQL 8.4 only has SHOW BINARY LOG STATUS); undefined when unreadable. */
async function readFilters(db: MysqlConnection): Promise<BinlogFacts['filters']> {
  for (const sql of ['SHOW MASTER STATUS', 'SHOW BINARY LOG STATUS']) {
    try {
      const [row] = await db.query<Record<string, unknown>>(sql);
      const list = (name: string) =>
        String(Object.entries(row ?? {}).find(([k]) => k.toLowerCase() === name)?.[1] ?? '')
          .split(',')
          .map((d) => d.trim())
          .filter((d) => d !== '');
      return { doDb: list('binlog_do_db'), ignoreDb: list('binlog_ignore_db') };
    } catch (e) {
      if ((e as { code?: string }).code !== 'ER_PARSE_ERROR') return undefined;
    }
  }
  return undefined;
}

async function readReplicas(
  db: MysqlConnection,
  flavor: 'mariadb' | 'mysql',
): Promise<BinlogFacts['replicas']> {
  // MySQL 8.0.22+ has SHOW REPLICAS (8.4 only that); MariaDB 10.11 only SHOW SLAVE HOSTS.
  const statements = flavor === 'mysql' ? ['SHOW REPLICAS', 'SHOW SLAVE HOSTS'] : ['SHOW SLAVE HOSTS'];
  let last: unknown;
  for (const sql of statements) {
    try {
      const rows = await db.query<Record<string, unknown>>(sql);
      return rows.map((r) => {
        const get = (name: string) => Object.entries(r).find(([k]) => k.toLowerCase() === name)?.[1];
        const host = get('host');
        return {
          serverId: Number(get('server_id')),
          ...(host ? { host: `${String(host)}:${String(get('port') ?? '')}` } : {}),
        };
      });
    } catch (e) {
      last = e;
      if ((e as { code?: string }).code !== 'ER_PARSE_ERROR') break;
    }
  }
  return { unlisted: messageOf(last) };
}

function messageOf(e: unknown): string {
  return e instanceof Error ? (e.message.split('\n')[0] ?? e.name) : String(e);
}
