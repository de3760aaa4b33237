/**
 * MySQL/MariaDB CDC preflight (`tidemark check`): what the row binlog of a source needs, checked
 * before `tidemark cdc` starts and reported line by line (ids `log_bin`, `binlog_format`,
 * `binlog_row_image`, `binlog_row_metadata`, `binlog_compression`, `binlog_row_value_options`
 * (MySQL only), `gtid`, `server_id`, `replication`, `binlog_retention`, `binlog_filter` (only when
 * the server filters the binlog by database), and per table `table` and `key`), each failure one message naming the setting and the fix for where the server runs
 * (self-hosted MySQL: SET PERSIST; MariaDB: SET GLOBAL plus my.cnf; RDS: the DB parameter group;
 * Aurora MySQL: the DB cluster parameter group).
 *
 * Owns: those lines and their wording. The judging is a pure function of what the server showed
 * (`judgeBinlog` over `BinlogFacts`: SHOW GLOBAL VARIABLES, SHOW GRANTS, the connected replicas,
 * RDS facts), so every branch is tested from fixtures, MySQL 8 and RDS included, which cannot
 * run here; binlog-facts.ts `readBinlogFacts` is the thin layer that reads them.
 *
 * Must never change anything: no SET, no CALL, no binlog connection (registering as a replica
 * would kick out a real replica with the same server id). Reads variables and grants only.
 */
import { type CdcPreflightTable, type CheckItem, failed, passed, step } from '../../../contracts/check.js';
import { SourceError } from '../../../contracts/errors.js';
import type { MysqlConnection } from '../connect.js';
import { introspectTable, splitTableName } from '../introspect.js';
import { type BinlogFacts, readBinlogFacts } from './binlog-facts.js';

/** Where the server runs: decides how a setting is changed. */
export type Platform = 'self' | 'rds' | 'aurora';

export interface MysqlCdcPreflightOptions {
  /** `sources.<name>.cdc.serverId`: the server id the binlog connection registers with. */
  readonly serverId: number;
  /** `sources.<name>.cdc.binlogRetentionHours`: the least binlog retention accepted. */
  readonly binlogRetentionHours: number;
  /** The source's cdc tables (the table lines are `preflightCdcTable`'s). */
  readonly tables?: readonly CdcPreflightTable[];
}

/** A cdc table as its lines need it: with its writeMode (a table without a key must be append). */
export interface MysqlCdcTable extends CdcPreflightTable {
  readonly writeMode?: 'append' | 'upsert';
}

/** The source-wide binlog lines, read from the server; never throws (an unreadable server is one `binlog` fail line). */
export async function preflightCdcSource(
  db: MysqlConnection,
  opts: MysqlCdcPreflightOptions,
): Promise<CheckItem[]> {
  let facts: BinlogFacts;
  try {
    facts = await readBinlogFacts(db);
  } catch (e) {
    return [failed('binlog', e)];
  }
  return judgeBinlog(facts, opts);
}

/** The source-wide lines from what the server showed: pure, so every branch is tested from fixtures. */
export function judgeBinlog(facts: BinlogFacts, opts: MysqlCdcPreflightOptions): CheckItem[] {
  const j = new Judge(facts);
  return [
    j.line('log_bin', () => j.logBin()),
    j.line('binlog_format', () => j.binlogFormat()),
    j.line('binlog_row_image', () => j.rowImage()),
    j.line('binlog_row_metadata', () => j.rowMetadata()),
    j.line('binlog_compression', () => j.compression()),
    ...(facts.flavor === 'mysql' ? [j.line('binlog_row_value_options', () => j.rowValueOptions())] : []),
    j.gtid(),
    j.serverId(opts.serverId),
    j.line('replication', () => j.grants()),
    j.retention(opts.binlogRetentionHours),
    j.snapshotCut(),
    ...j.filters(opts.tables ?? []),
  ];
}

/** The platform the facts show: Aurora MySQL has @@aurora_version, RDS its /rdsdbbin basedir or rds_configuration. */
export function platformOf(facts: BinlogFacts): Platform {
  if (facts.variables.aurora_version !== undefined) return 'aurora';
  return facts.rds ? 'rds' : 'self';
}

class Judge {
  readonly platform: Platform;
  private readonly v: Readonly<Record<string, string>>;
  private readonly mariadb: boolean;

  constructor(private readonly facts: BinlogFacts) {
    this.platform = platformOf(facts);
    this.v = facts.variables;
    this.mariadb = facts.flavor === 'mariadb';
  }

  /**
   * The `snapshot` line (docs/decisions/0013-snapshots.md): MariaDB's consistent snapshot names
   * its binlog position, an exact cut; MySQL's does not, so snapshot: initial tables need the
   * watermark table (a warning: a spec whose tables are all snapshot: never needs nothing).
   */
  snapshotCut(): CheckItem {
    if (this.mariadb)
      return passed(
        'snapshot',
        `${this.product} reports a consistent snapshot's binlog position (Binlog_snapshot_position): snapshot chunks are exact and write nothing to the server`,
      );
    return {
      check: 'snapshot',
      status: 'warn',
      code: 'CDC_SNAPSHOT_NEEDS_WATERMARK_TABLE',
      message: `${this.product} does not report a consistent snapshot's binlog position: snapshot: initial tables need a watermark table (cdc.snapshot.watermarkTable, docs/mysql-cdc.md; untested on MySQL 8 so far), or snapshot: never`,
    };
  }

  line(check: string, fn: () => string): CheckItem {
    try {
      return passed(check, fn());
    } catch (e) {
      return failed(check, e);
    }
  }

  private get product(): string {
    if (this.platform === 'aurora') return 'Aurora MySQL';
    const name = this.mariadb ? 'MariaDB' : 'MySQL';
    return this.platform === 'rds' ? `RDS for ${name}` : name;
  }

  /**
   * How to set a dynamic global variable where this server runs. `text` quotes the value in SQL.
   * Sessions already connected keep their old value: it is the new ones that log under it.
   */
  private fix(name: string, value: string, text = true, sessions = false): string {
    return (
      this.howToSet(name, value, text) +
      (sessions ? '; sessions already connected keep the old value until they reconnect' : '')
    );
  }

  private howToSet(name: string, value: string, text: boolean): string {
    const sqlValue = text ? `'${value}'` : value;
    switch (this.platform) {
      case 'aurora':
        return `set ${name} = ${value} in the DB cluster parameter group of the Aurora cluster (SET GLOBAL is not allowed on Aurora)`;
      case 'rds':
        return `set ${name} = ${value} in the DB parameter group of the instance (SET GLOBAL is not allowed on RDS)`;
      default:
        return this.mariadb
          ? `run SET GLOBAL ${name} = ${sqlValue}; and put ${name} = ${value} under [mariadb] in my.cnf so a restart keeps it (MariaDB has no SET PERSIST)`
          : `run SET PERSIST ${name} = ${sqlValue}; (kept across restarts)`;
    }
  }

  logBin(): string {
    const on = (this.v.log_bin ?? 'OFF').toUpperCase() === 'ON';
    if (on) return `log_bin is ON: ${this.product} ${this.facts.version} writes a binlog`;
    const how =
      this.platform === 'aurora'
        ? 'Aurora MySQL writes a binlog only when binlog_format is set in the DB cluster parameter group: set binlog_format = ROW there and reboot the writer instance'
        : this.platform === 'rds'
          ? 'RDS writes a binlog only with automated backups: set a backup retention period of 1 day or more (and binlog_format = ROW in the DB parameter group)'
          : this.mariadb
            ? 'put log_bin = mariadb-bin (and binlog_format = ROW) under [mariadb] in my.cnf and restart the server'
            : 'MySQL 8 logs by default: remove skip-log-bin / disable-log-bin from my.cnf (or set log_bin = binlog under [mysqld]) and restart the server';
    throw new SourceError(
      'CDC_LOG_BIN',
      `log_bin is OFF: the server writes no binlog, so there is no change stream; ${how}`,
    );
  }

  binlogFormat(): string {
    const format = (this.v.binlog_format ?? '').toUpperCase();
    if (format === 'ROW') return 'binlog_format is ROW: every change is logged as rows';
    throw new SourceError(
      'CDC_BINLOG_FORMAT',
      `binlog_format is ${format || 'unset'}: CDC reads row events, ${
        format === 'STATEMENT' || format === 'MIXED'
          ? `and ${format} logs statements, whose rows are not in the binlog`
          : 'and this server logs none'
      }; ${this.fix('binlog_format', 'ROW', true, true)}`,
    );
  }

  rowImage(): string {
    const image = (this.v.binlog_row_image ?? 'FULL').toUpperCase();
    if (image === 'FULL') return 'binlog_row_image is FULL: every event carries all columns';
    throw new SourceError(
      'CDC_BINLOG_ROW_IMAGE',
      `binlog_row_image is ${image}: an UPDATE or DELETE then logs only some columns, and the lake row would lose the others; ${this.fix('binlog_row_image', 'FULL', true, true)}`,
    );
  }

  rowMetadata(): string {
    const meta = this.v.binlog_row_metadata?.toUpperCase();
    if (meta === 'FULL') return 'binlog_row_metadata is FULL: every row event names its columns';
    const why =
      'without column names in the binlog, a row written before ALTER TABLE ... ADD COLUMN ... FIRST (or in the middle) and replayed after it decodes under the wrong column names';
    if (meta === undefined) {
      throw new SourceError(
        'CDC_BINLOG_ROW_METADATA',
        `binlog_row_metadata does not exist on ${this.product} ${this.facts.version}: ${why}; upgrade to MySQL 8.0.14+ or MariaDB 10.5+ and set binlog_row_metadata = FULL`,
      );
    }
    throw new SourceError(
      'CDC_BINLOG_ROW_METADATA',
      `binlog_row_metadata is ${meta}${this.mariadb ? (meta === 'NO_LOG' ? ' (the MariaDB default)' : '') : meta === 'MINIMAL' ? ' (the MySQL default)' : ''}: ${why}; ${this.fix('binlog_row_metadata', 'FULL')}`,
    );
  }

  compression(): string {
    const name = this.mariadb ? 'log_bin_compress' : 'binlog_transaction_compression';
    const value = this.v[name];
    if (value === undefined) return `${name} does not exist on this server: the binlog is not compressed`;
    if (value.toUpperCase() !== 'ON') return `${name} is ${value}: the binlog is not compressed`;
    throw new SourceError(
      'CDC_BINLOG_COMPRESSION',
      `${name} is ON: the binlog holds compressed ${this.mariadb ? 'events' : 'transaction payloads'}, which the binlog client cannot decode; ${this.fix(name, 'OFF', false)}`,
    );
  }

  rowValueOptions(): string {
    const value = this.v.binlog_row_value_options ?? '';
    if (value === '') return 'binlog_row_value_options is empty: JSON updates are logged whole';
    throw new SourceError(
      'CDC_BINLOG_PARTIAL_JSON',
      `binlog_row_value_options is ${value}: JSON updates are logged as partial diffs, which the binlog client refuses; ${
        this.platform === 'self'
          ? "run SET PERSIST binlog_row_value_options = '';"
          : `set binlog_row_value_options to empty in the ${this.platform === 'aurora' ? 'DB cluster' : 'DB'} parameter group`
      }`,
    );
  }

  gtid(): CheckItem {
    if (this.mariadb) {
      const current = this.v.gtid_current_pos || 'empty: nothing logged yet';
      const binlog = this.v.gtid_binlog_pos || 'empty';
      return passed(
        'gtid',
        `MariaDB GTIDs are always on: gtid_domain_id ${this.v.gtid_domain_id ?? '0'}, gtid_current_pos ${current}, gtid_binlog_pos ${binlog}; the position is kept as a GTID, so it survives a failover to a replica of the same domain`,
      );
    }
    const mode = (this.v.gtid_mode ?? 'OFF').toUpperCase();
    if (mode === 'ON') {
      return passed(
        'gtid',
        'gtid_mode is ON: the position is kept as a GTID set, so it survives a failover to a replica',
      );
    }
    const how =
      this.platform === 'self'
        ? 'SET PERSIST enforce_gtid_consistency = ON; then SET PERSIST gtid_mode step by step (OFF_PERMISSIVE, ON_PERMISSIVE, ON)'
        : `set enforce_gtid_consistency = ON and gtid_mode = ON in the ${this.platform === 'aurora' ? 'DB cluster' : 'DB'} parameter group`;
    return {
      check: 'gtid',
      status: 'warn',
      code: 'CDC_NO_GTID',
      message: `gtid_mode is ${mode}: the position is this server's binlog file:pos only, so a failover to another server is a POSITION_LOST; to survive one, ${how}`,
    };
  }

  serverId(ours: number): CheckItem {
    const own = Number(this.v.server_id ?? Number.NaN);
    const unique =
      'it must be unique among all replicas of the primary (a duplicate disconnects the other connection)';
    const fix = `choose another sources.<name>.cdc.serverId: ${unique}`;
    if (own === 0) {
      return failed(
        'server_id',
        new SourceError(
          'CDC_SERVER_ID',
          `the server's own server_id is 0, so it refuses replication connections; ${this.platform === 'self' ? 'set server_id (e.g. 1) in my.cnf and restart' : 'set server_id in the parameter group'}`,
        ),
      );
    }
    if (own === ours) {
      return failed(
        'server_id',
        new SourceError('CDC_SERVER_ID', `serverId ${ours} is the server's own @@server_id; ${fix}`),
      );
    }
    if ('unlisted' in this.facts.replicas) {
      return {
        check: 'server_id',
        status: 'warn',
        code: 'CDC_SERVER_ID_UNVERIFIED',
        message: `serverId ${ours} differs from the server's own @@server_id ${own}, but the connected replicas could not be listed (${this.facts.replicas.unlisted}${this.mariadb ? '; SHOW SLAVE HOSTS needs REPLICATION MASTER ADMIN on MariaDB' : ''}): ${unique}`,
      };
    }
    const clash = this.facts.replicas.find((r) => r.serverId === ours);
    if (clash) {
      return failed(
        'server_id',
        new SourceError(
          'CDC_SERVER_ID',
          `serverId ${ours} is already used by a connected replica${clash.host ? ` (${clash.host})` : ''} (${this.mariadb ? 'SHOW SLAVE HOSTS' : 'SHOW REPLICAS'}; if it is this source's own running tidemark cdc, that is expected); ${fix}`,
        ),
      );
    }
    const others = this.facts.replicas.map((r) => r.serverId);
    return passed(
      'server_id',
      `serverId ${ours} differs from the server's own @@server_id ${own} and from the ${others.length} connected replica(s)${others.length ? ` (${others.join(', ')})` : ''}; ${unique}, including those not connected now`,
    );
  }

  /** A `binlog_filter` line only when the server filters and a cdc table's database is filtered out. */
  filters(tables: readonly CdcPreflightTable[]): CheckItem[] {
    const f = this.facts.filters;
    if (!f || (f.doDb.length === 0 && f.ignoreDb.length === 0)) return [];
    const lost = [
      ...new Set(
        tables
          .map((t) => t.source.slice(0, Math.max(0, t.source.indexOf('.'))))
          .filter((d) => (f.doDb.length > 0 ? !f.doDb.includes(d) : f.ignoreDb.includes(d))),
      ),
    ];
    const shown =
      f.doDb.length > 0 ? `binlog-do-db=${f.doDb.join(',')}` : `binlog-ignore-db=${f.ignoreDb.join(',')}`;
    if (lost.length === 0)
      return [
        passed(
          'binlog_filter',
          `the server filters the binlog (${shown}); every cdc table's database is logged`,
        ),
      ];
    return [
      failed(
        'binlog_filter',
        new SourceError(
          'CDC_BINLOG_FILTERED',
          `the server filters the binlog (${shown}), so no change of database ${lost.map((d) => `"${d}"`).join(', ')} is ever logged; remove the filter from my.cnf (or the parameter group) and restart, or capture these tables with mode: incremental`,
        ),
      ),
    ];
  }

  grants(): string {
    const account = this.facts.account;
    if (!this.facts.grants) {
      throw new SourceError(
        'CDC_REPLICATION_PRIVILEGE',
        `SHOW GRANTS failed (${this.facts.grantsError ?? 'unknown error'}), so the replication privileges of ${account} are unknown`,
      );
    }
    const held = globalPrivileges(this.facts.grants);
    // MariaDB 10.5+: REPLICATION CLIENT is an alias of BINLOG MONITOR (SHOW GRANTS prints the latter).
    if (this.mariadb && held.has('REPLICATION CLIENT')) held.add('BINLOG MONITOR');
    const needed = this.mariadb
      ? ['REPLICATION SLAVE', 'BINLOG MONITOR']
      : ['REPLICATION SLAVE', 'REPLICATION CLIENT'];
    const all = held.has('ALL PRIVILEGES') || held.has('ALL');
    const missing = all ? [] : needed.filter((p) => !held.has(p));
    if (missing.length === 0)
      return `${account} has ${needed.join(' and ')}${all ? ' (ALL PRIVILEGES)' : ''}`;
    const roles = this.facts.grants.some((g) =>
      /^GRANT\s+`[^`]*`@`[^`]*`(\s*,\s*`[^`]*`@`[^`]*`)*\s+TO\s/i.test(g),
    );
    throw new SourceError(
      'CDC_REPLICATION_PRIVILEGE',
      `${account} lacks ${missing.join(' and ')}, which reading the binlog needs${this.mariadb ? ' (MariaDB 10.5+: BINLOG MONITOR for the binlog position and file list; REPLICATION SLAVE ADMIN is not needed)' : ''}${roles ? '; privileges of its roles count only when the role is active by default' : ''}: run GRANT ${missing.join(', ')} ON *.* TO ${account};`,
    );
  }

  retention(hours: number): CheckItem {
    try {
      return passed('binlog_retention', this.retentionLine(hours));
    } catch (e) {
      return failed('binlog_retention', e);
    }
  }

  private retentionLine(hours: number): string {
    const need = `binlogRetentionHours ${hours}`;
    const why = 'the position must survive an outage of the reader';
    if (this.platform !== 'self') {
      const set = `CALL mysql.rds_set_configuration('binlog retention hours', ${Math.ceil(hours)});`;
      const max = this.platform === 'aurora' ? 2160 : 168;
      const cap =
        hours > max ? ` (${this.product} keeps at most ${max} hours: lower binlogRetentionHours)` : '';
      const value = this.facts.rdsRetentionHours;
      if (value === undefined) {
        throw new SourceError(
          'CDC_BINLOG_RETENTION',
          `${this.product}: binlog retention hours could not be read (mysql.rds_configuration; see CALL mysql.rds_show_configuration;); its default NULL purges binlogs as soon as possible, and ${why}: run ${set}${cap}`,
        );
      }
      if (value === null) {
        throw new SourceError(
          'CDC_BINLOG_RETENTION',
          `${this.product}: binlog retention hours is NULL (the default): binlogs are purged as soon as possible, and ${why} (${need}): run ${set}${cap}`,
        );
      }
      if (Number(value) < hours) {
        throw new SourceError(
          'CDC_BINLOG_RETENTION',
          `${this.product}: binlog retention hours is ${value}, less than ${need}: ${why}; run ${set}${cap}`,
        );
      }
      return `${this.product}: binlog retention hours is ${value} (${need})`;
    }
    if ((this.v.binlog_expire_logs_auto_purge ?? 'ON').toUpperCase() === 'OFF') {
      return `binlog_expire_logs_auto_purge is OFF: binlogs are never purged automatically (the disk is the limit; purge them yourself, keeping at least ${hours} hours)`;
    }
    const seconds = Number(this.v.binlog_expire_logs_seconds ?? 0);
    const days = Number(this.v.expire_logs_days ?? 0);
    const kept = seconds > 0 ? seconds : days > 0 ? days * 86_400 : 0;
    const shown =
      seconds > 0
        ? `binlog_expire_logs_seconds is ${seconds} (${hoursText(seconds)})`
        : days > 0
          ? `expire_logs_days is ${this.v.expire_logs_days} (${hoursText(days * 86_400)})`
          : undefined;
    if (shown === undefined) {
      return `binlogs never expire (binlog_expire_logs_seconds 0, expire_logs_days 0): the disk is the limit; purge them yourself, keeping at least ${hours} hours`;
    }
    if (kept >= hours * 3600) return `${shown}, at least ${need}`;
    throw new SourceError(
      'CDC_BINLOG_RETENTION',
      `${shown}, less than ${need}: ${why}; ${this.fix('binlog_expire_logs_seconds', String(Math.ceil(hours * 3600)), false)}`,
    );
  }
}

/** The global privileges (`ON *.*`) of SHOW GRANTS statements, upper case. */
export function globalPrivileges(grants: readonly string[]): Set<string> {
  const held = new Set<string>();
  for (const g of grants) {
    const m = /^GRANT\s+(.+?)\s+ON\s+\*\.\*\s+TO\s/i.exec(g);
    if (!m) continue;
    for (const p of m[1]!.split(',')) held.add(p.trim().replace(/\s+/g, ' ').toUpperCase());
  }
  return held;
}

function hoursText(seconds: number): string {
  const h = seconds / 3600;
  return `${Number.isInteger(h) ? h : h.toFixed(1)} hours`;
}

/**
 * A cdc table's lines: `table` (it exists, this account may SELECT from it, its columns map) and
 * `key` (a primary key, which UPDATEs and DELETEs are applied by, or writeMode append).
 */
export async function preflightCdcTable(db: MysqlConnection, t: MysqlCdcTable): Promise<CheckItem[]> {
  let plan: Awaited<ReturnType<typeof introspectTable>>;
  try {
    const { database, table } = splitTableName(t.source);
    const [row] = await db.query<{ type: string }>(
      'SELECT TABLE_TYPE AS type FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?',
      [database, table],
    );
    // MariaDB's SYSTEM VERSIONED and SEQUENCE are logged like base tables; a view is not logged.
    if (row?.type === 'VIEW') {
      throw new SourceError(
        'CDC_NOT_CAPTURABLE',
        `${t.source}: a view, and the binlog logs rows of base tables only; capture the tables behind it, or use mode: incremental`,
      );
    }
    plan = await introspectTable(db, t);
  } catch (e) {
    return [failed('table', e)];
  }
  const items = [
    passed('table', `exists, and this account may SELECT from it (${plan.columns.length} columns)`),
  ];
  const key = await step('key', async () => {
    if (plan.primaryKey.length > 0)
      return `primary key (${plan.primaryKey.join(', ')}): changes are applied by it`;
    if (t.writeMode === 'append' || t.insertOnly)
      return 'no primary key: writeMode append keeps every change as a row';
    throw new SourceError(
      'CDC_NO_PRIMARY_KEY',
      `${t.source}: no primary key, so its UPDATEs and DELETEs cannot be applied by key (writeMode upsert): add a PRIMARY KEY, or set writeMode: append`,
    );
  });
  items.push(key);
  return items;
}
