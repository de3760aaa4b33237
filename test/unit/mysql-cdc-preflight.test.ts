/**
 * The MySQL/MariaDB binlog preflight's judging (shared/drivers/mysql/cdc/preflight.ts
 * `judgeBinlog`) from `SHOW GLOBAL VARIABLES` / `SHOW GRANTS` fixtures: every failure branch, each
 * naming the setting and the fix for where the server runs. MySQL 8, RDS and Aurora cannot run
 * here (no server package), so these fixtures are their only coverage; MariaDB's are also shown
 * on real servers in test/integration/mysql-cdc-preflight.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { CheckItem } from '../../shared/contracts/check.js';
import type { BinlogFacts } from '../../shared/drivers/mysql/cdc/binlog-facts.js';
import { globalPrivileges, judgeBinlog, platformOf } from '../../shared/drivers/mysql/cdc/preflight.js';

/** MySQL 8.0 defaults (as `SHOW GLOBAL VARIABLES` prints them), self-hosted. */
const MYSQL8: Record<string, string> = {
  log_bin: 'ON',
  binlog_format: 'ROW',
  binlog_row_image: 'FULL',
  binlog_row_metadata: 'MINIMAL',
  binlog_transaction_compression: 'OFF',
  binlog_row_value_options: '',
  gtid_mode: 'OFF',
  enforce_gtid_consistency: 'OFF',
  server_id: '1',
  binlog_expire_logs_seconds: '2592000',
  binlog_expire_logs_auto_purge: 'ON',
  expire_logs_days: '0',
  basedir: '/usr/',
};

/** MariaDB 10.11 as the harness runs it, with binlog_row_metadata FULL. */
const MARIADB: Record<string, string> = {
  log_bin: 'ON',
  binlog_format: 'ROW',
  binlog_row_image: 'FULL',
  binlog_row_metadata: 'FULL',
  log_bin_compress: 'OFF',
  gtid_domain_id: '0',
  gtid_current_pos: '0-1-42',
  gtid_binlog_pos: '0-1-42',
  server_id: '1',
  binlog_expire_logs_seconds: '0',
  expire_logs_days: '0.000000',
  basedir: '/usr/',
};

const MYSQL_GRANTS = ['GRANT SELECT, RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`'];
const MARIADB_GRANTS = [
  "GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%` IDENTIFIED BY PASSWORD '*7B9E'",
  'GRANT SELECT ON `shop`.* TO `cdc`@`%`',
];

function mysql(vars: Record<string, string> = {}, more: Partial<BinlogFacts> = {}): BinlogFacts {
  return {
    flavor: 'mysql',
    version: '8.0.36',
    variables: { ...MYSQL8, ...vars },
    account: "'cdc'@'%'",
    grants: MYSQL_GRANTS,
    replicas: [],
    rds: false,
    ...more,
  };
}

function mariadb(vars: Record<string, string> = {}, more: Partial<BinlogFacts> = {}): BinlogFacts {
  return {
    flavor: 'mariadb',
    version: '10.11.19-MariaDB-0+deb12u1-log',
    variables: { ...MARIADB, ...vars },
    account: "'cdc'@'%'",
    grants: MARIADB_GRANTS,
    replicas: [],
    rds: false,
    ...more,
  };
}

/** RDS for MySQL 8: /rdsdbbin basedir; server variables such as binlog_expire_logs_seconds do not decide retention. */
function rds(retention: string | null | undefined, vars: Record<string, string> = {}): BinlogFacts {
  return mysql(
    { basedir: '/rdsdbbin/mysql-8.0.35.R2/', binlog_row_metadata: 'FULL', gtid_mode: 'ON', ...vars },
    { rds: true, rdsRetentionHours: retention },
  );
}

function aurora(vars: Record<string, string> = {}, retention: string | null = '24'): BinlogFacts {
  return mysql(
    { basedir: '/rdsdbbin/oscar/', aurora_version: '3.05.2', binlog_row_metadata: 'FULL', ...vars },
    { rds: true, rdsRetentionHours: retention },
  );
}

const OPTS = { serverId: 4242, binlogRetentionHours: 24 };

function judge(facts: BinlogFacts, opts: Partial<typeof OPTS> = {}): CheckItem[] {
  return judgeBinlog(facts, { ...OPTS, ...opts });
}

function line(facts: BinlogFacts, check: string, opts: Partial<typeof OPTS> = {}): CheckItem {
  const found = judge(facts, opts).find((l) => l.check === check);
  if (!found) throw new Error(`no ${check} line`);
  return found;
}

describe('judgeBinlog: the lines', () => {
  it('MariaDB set up for CDC: every line ok, in a stable order, no MySQL-only line', () => {
    const lines = judge(mariadb());
    expect(lines.map((l) => [l.check, l.status])).toEqual([
      ['log_bin', 'ok'],
      ['binlog_format', 'ok'],
      ['binlog_row_image', 'ok'],
      ['binlog_row_metadata', 'ok'],
      ['binlog_compression', 'ok'],
      ['gtid', 'ok'],
      ['server_id', 'ok'],
      ['replication', 'ok'],
      ['binlog_retention', 'ok'],
      ['snapshot', 'ok'],
    ]);
    expect(line(mariadb(), 'snapshot').message).toContain('Binlog_snapshot_position');
    expect(line(mariadb(), 'gtid').message).toContain(
      'gtid_domain_id 0, gtid_current_pos 0-1-42, gtid_binlog_pos 0-1-42',
    );
    expect(line(mariadb(), 'binlog_retention').message).toContain('binlogs never expire');
    expect(line(mariadb(), 'replication').message).toBe("'cdc'@'%' has REPLICATION SLAVE and BINLOG MONITOR");
  });

  it('MySQL 8 defaults: binlog_row_metadata MINIMAL fails (SET PERSIST), no GTIDs warns, 30 days of binlog pass', () => {
    const lines = judge(mysql());
    expect(lines.map((l) => [l.check, l.status, l.code])).toEqual([
      ['log_bin', 'ok', undefined],
      ['binlog_format', 'ok', undefined],
      ['binlog_row_image', 'ok', undefined],
      ['binlog_row_metadata', 'fail', 'CDC_BINLOG_ROW_METADATA'],
      ['binlog_compression', 'ok', undefined],
      ['binlog_row_value_options', 'ok', undefined],
      ['gtid', 'warn', 'CDC_NO_GTID'],
      ['server_id', 'ok', undefined],
      ['replication', 'ok', undefined],
      ['binlog_retention', 'ok', undefined],
      ['snapshot', 'warn', 'CDC_SNAPSHOT_NEEDS_WATERMARK_TABLE'],
    ]);
    expect(lines.at(-1)!.message).toContain('cdc.snapshot.watermarkTable');
    const meta = lines[3]!.message;
    expect(meta).toContain('binlog_row_metadata is MINIMAL (the MySQL default)');
    expect(meta).toContain('ADD COLUMN ... FIRST');
    expect(meta).toContain('decodes under the wrong column names');
    expect(meta).toContain("run SET PERSIST binlog_row_metadata = 'FULL';");
    expect(lines[6]!.message).toContain('gtid_mode is OFF');
    expect(lines[6]!.message).toContain('a failover to another server is a POSITION_LOST');
    expect(lines[6]!.message).toContain('SET PERSIST enforce_gtid_consistency = ON');
    expect(lines[9]!.message).toBe(
      'binlog_expire_logs_seconds is 2592000 (720 hours), at least binlogRetentionHours 24',
    );
  });

  it('MySQL with gtid_mode ON: the gtid line is ok', () => {
    expect(line(mysql({ gtid_mode: 'ON' }), 'gtid')).toMatchObject({ status: 'ok' });
    expect(line(mysql({ gtid_mode: 'ON_PERMISSIVE' }), 'gtid')).toMatchObject({ status: 'warn' });
  });
});

describe('judgeBinlog: each setting, MySQL and MariaDB wording', () => {
  it('log_bin OFF: my.cnf for MySQL and MariaDB, backups on RDS, the cluster parameter group on Aurora', () => {
    const my = line(mysql({ log_bin: 'OFF' }), 'log_bin');
    expect(my).toMatchObject({ status: 'fail', code: 'CDC_LOG_BIN' });
    expect(my.message).toContain('remove skip-log-bin / disable-log-bin from my.cnf');
    expect(my.message).toContain('restart');
    const maria = line(mariadb({ log_bin: 'OFF' }), 'log_bin');
    expect(maria.message).toContain(
      'put log_bin = mariadb-bin (and binlog_format = ROW) under [mariadb] in my.cnf',
    );
    expect(line(rds('24', { log_bin: 'OFF' }), 'log_bin').message).toContain(
      'RDS writes a binlog only with automated backups',
    );
    // Aurora without binlogging shows binlog_format OFF (the cluster parameter group's value).
    expect(line(aurora({ log_bin: 'OFF', binlog_format: 'OFF' }), 'binlog_format').message).toMatch(
      /^binlog_format is OFF: CDC reads row events, and this server logs none; set binlog_format = ROW in the DB cluster parameter group/,
    );
    const au = line(aurora({ log_bin: 'OFF' }), 'log_bin');
    expect(au.message).toContain(
      'Aurora MySQL writes a binlog only when binlog_format is set in the DB cluster parameter group: set binlog_format = ROW there and reboot the writer instance',
    );
  });

  it('binlog_format STATEMENT / MIXED fails: SET PERSIST (MySQL), SET GLOBAL + my.cnf (MariaDB), parameter groups', () => {
    const my = line(mysql({ binlog_format: 'STATEMENT' }), 'binlog_format');
    expect(my).toMatchObject({ status: 'fail', code: 'CDC_BINLOG_FORMAT' });
    expect(my.message).toContain('binlog_format is STATEMENT');
    expect(my.message).toContain(
      "run SET PERSIST binlog_format = 'ROW'; (kept across restarts); sessions already connected keep the old value until they reconnect",
    );
    const maria = line(mariadb({ binlog_format: 'MIXED' }), 'binlog_format');
    expect(maria.message).toContain(
      "run SET GLOBAL binlog_format = 'ROW'; and put binlog_format = ROW under [mariadb] in my.cnf so a restart keeps it (MariaDB has no SET PERSIST)",
    );
    expect(line(rds('24', { binlog_format: 'MIXED' }), 'binlog_format').message).toContain(
      'set binlog_format = ROW in the DB parameter group of the instance',
    );
    expect(line(aurora({ binlog_format: 'MIXED' }), 'binlog_format').message).toContain(
      'set binlog_format = ROW in the DB cluster parameter group of the Aurora cluster',
    );
  });

  it('binlog_row_image MINIMAL / NOBLOB fails', () => {
    const my = line(mysql({ binlog_row_image: 'MINIMAL' }), 'binlog_row_image');
    expect(my).toMatchObject({ status: 'fail', code: 'CDC_BINLOG_ROW_IMAGE' });
    expect(my.message).toContain("run SET PERSIST binlog_row_image = 'FULL';");
    expect(line(mariadb({ binlog_row_image: 'NOBLOB' }), 'binlog_row_image').message).toContain(
      "SET GLOBAL binlog_row_image = 'FULL';",
    );
  });

  it('binlog_row_metadata: MariaDB NO_LOG / MINIMAL fail with SET GLOBAL; a server without it says upgrade', () => {
    const noLog = line(mariadb({ binlog_row_metadata: 'NO_LOG' }), 'binlog_row_metadata');
    expect(noLog).toMatchObject({ status: 'fail', code: 'CDC_BINLOG_ROW_METADATA' });
    expect(noLog.message).toContain('binlog_row_metadata is NO_LOG (the MariaDB default)');
    expect(noLog.message).toContain("SET GLOBAL binlog_row_metadata = 'FULL';");
    expect(line(mariadb({ binlog_row_metadata: 'MINIMAL' }), 'binlog_row_metadata').message).toMatch(
      /^binlog_row_metadata is MINIMAL: /,
    );
    const { binlog_row_metadata: _, ...old } = MYSQL8;
    const missing = line({ ...mysql(), version: '8.0.13', variables: old }, 'binlog_row_metadata');
    expect(missing.message).toContain('binlog_row_metadata does not exist on MySQL 8.0.13');
    expect(missing.message).toContain('upgrade to MySQL 8.0.14+');
  });

  it('binlog compression: binlog_transaction_compression (MySQL) and log_bin_compress (MariaDB)', () => {
    const my = line(mysql({ binlog_transaction_compression: 'ON' }), 'binlog_compression');
    expect(my).toMatchObject({ status: 'fail', code: 'CDC_BINLOG_COMPRESSION' });
    expect(my.message).toContain('binlog_transaction_compression is ON');
    expect(my.message).toContain('run SET PERSIST binlog_transaction_compression = OFF;');
    const maria = line(mariadb({ log_bin_compress: 'ON' }), 'binlog_compression');
    expect(maria.message).toContain('log_bin_compress is ON');
    expect(maria.message).toContain('SET GLOBAL log_bin_compress = OFF;');
    // A MySQL 8.0.19 has no such variable: nothing is compressed.
    const { binlog_transaction_compression: _, ...old } = MYSQL8;
    expect(line({ ...mysql(), variables: old }, 'binlog_compression')).toMatchObject({ status: 'ok' });
  });

  it('binlog_row_value_options PARTIAL_JSON fails (MySQL only)', () => {
    const my = line(mysql({ binlog_row_value_options: 'PARTIAL_JSON' }), 'binlog_row_value_options');
    expect(my).toMatchObject({ status: 'fail', code: 'CDC_BINLOG_PARTIAL_JSON' });
    expect(my.message).toContain('which the binlog client refuses');
    expect(my.message).toContain("run SET PERSIST binlog_row_value_options = '';");
    expect(
      line(rds('24', { binlog_row_value_options: 'PARTIAL_JSON' }), 'binlog_row_value_options').message,
    ).toContain('set binlog_row_value_options to empty in the DB parameter group');
    expect(judge(mariadb()).some((l) => l.check === 'binlog_row_value_options')).toBe(false);
  });

  it('gtid on RDS: the parameter group', () => {
    expect(line(rds('24', { gtid_mode: 'OFF' }), 'gtid').message).toContain(
      'set enforce_gtid_consistency = ON and gtid_mode = ON in the DB parameter group',
    );
  });
});

describe('judgeBinlog: server_id', () => {
  it("fails on the server's own server_id, naming it and that it must be unique among all replicas", () => {
    const own = line(mysql({ server_id: '4242' }), 'server_id');
    expect(own).toMatchObject({ status: 'fail', code: 'CDC_SERVER_ID' });
    expect(own.message).toContain("serverId 4242 is the server's own @@server_id");
    expect(own.message).toContain('it must be unique among all replicas of the primary');
  });

  it('fails on a connected replica with the same id (SHOW REPLICAS / SHOW SLAVE HOSTS)', () => {
    const replicas = [
      { serverId: 2, host: 'replica-a:3306' },
      { serverId: 4242, host: 'replica-b:3306' },
    ];
    const my = line(mysql({}, { replicas }), 'server_id');
    expect(my).toMatchObject({ status: 'fail', code: 'CDC_SERVER_ID' });
    expect(my.message).toContain(
      'serverId 4242 is already used by a connected replica (replica-b:3306) (SHOW REPLICAS',
    );
    expect(line(mariadb({}, { replicas }), 'server_id').message).toContain('(SHOW SLAVE HOSTS');
    const ok = line(mysql({}, { replicas: [replicas[0]!] }), 'server_id');
    expect(ok).toMatchObject({ status: 'ok' });
    expect(ok.message).toContain(
      "differs from the server's own @@server_id 1 and from the 1 connected replica(s) (2)",
    );
  });

  it('warns when the replicas cannot be listed, and fails on a server whose server_id is 0', () => {
    const w = line(mariadb({}, { replicas: { unlisted: 'Access denied' } }), 'server_id');
    expect(w).toMatchObject({ status: 'warn', code: 'CDC_SERVER_ID_UNVERIFIED' });
    expect(w.message).toContain('SHOW SLAVE HOSTS needs REPLICATION MASTER ADMIN on MariaDB');
    expect(w.message).toContain('unique among all replicas of the primary');
    const zero = line(mysql({ server_id: '0' }), 'server_id');
    expect(zero).toMatchObject({ status: 'fail', code: 'CDC_SERVER_ID' });
    expect(zero.message).toContain('refuses replication connections');
  });
});

describe('judgeBinlog: grants', () => {
  it('MySQL needs REPLICATION SLAVE and REPLICATION CLIENT: the exact GRANT for what is missing', () => {
    const g = line(mysql({}, { grants: ['GRANT REPLICATION SLAVE ON *.* TO `cdc`@`%`'] }), 'replication');
    expect(g).toMatchObject({ status: 'fail', code: 'CDC_REPLICATION_PRIVILEGE' });
    expect(g.message).toContain("run GRANT REPLICATION CLIENT ON *.* TO 'cdc'@'%';");
    const none = line(
      mysql(
        {},
        { grants: ['GRANT USAGE ON *.* TO `cdc`@`%`', 'GRANT ALL PRIVILEGES ON `shop`.* TO `cdc`@`%`'] },
      ),
      'replication',
    );
    expect(none.message).toContain("run GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%';");
    expect(
      line(
        mysql({}, { grants: ['GRANT ALL PRIVILEGES ON *.* TO `root`@`%` WITH GRANT OPTION'] }),
        'replication',
      ),
    ).toMatchObject({ status: 'ok' });
  });

  it('MariaDB needs BINLOG MONITOR too (REPLICATION CLIENT is its alias), not REPLICATION SLAVE ADMIN', () => {
    const g = line(mariadb({}, { grants: ['GRANT REPLICATION SLAVE ON *.* TO `cdc`@`%`'] }), 'replication');
    expect(g).toMatchObject({ status: 'fail', code: 'CDC_REPLICATION_PRIVILEGE' });
    expect(g.message).toContain("run GRANT BINLOG MONITOR ON *.* TO 'cdc'@'%';");
    expect(g.message).toContain('REPLICATION SLAVE ADMIN is not needed');
    expect(
      line(
        mariadb({}, { grants: ['GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`'] }),
        'replication',
      ),
    ).toMatchObject({ status: 'ok' });
  });

  it('fails when SHOW GRANTS cannot be read; mentions roles when only a role holds them', () => {
    const g = line(mysql({}, { grants: undefined, grantsError: 'boom' }), 'replication');
    expect(g).toMatchObject({ status: 'fail', code: 'CDC_REPLICATION_PRIVILEGE' });
    expect(g.message).toContain('SHOW GRANTS failed (boom)');
    const role = line(
      mysql({}, { grants: ['GRANT USAGE ON *.* TO `cdc`@`%`', 'GRANT `repl`@`%` TO `cdc`@`%`'] }),
      'replication',
    );
    expect(role.message).toContain('privileges of its roles count only when the role is active by default');
  });

  it('globalPrivileges reads only ON *.* grants', () => {
    expect([
      ...globalPrivileges(['GRANT SELECT,  REPLICATION   SLAVE ON *.* TO x', 'GRANT INSERT ON `a`.* TO x']),
    ]).toEqual(['SELECT', 'REPLICATION SLAVE']);
  });
});

describe('judgeBinlog: binlog retention', () => {
  it('MySQL: binlog_expire_logs_seconds below binlogRetentionHours fails with SET PERSIST', () => {
    const r = line(mysql({ binlog_expire_logs_seconds: '3600' }), 'binlog_retention');
    expect(r).toMatchObject({ status: 'fail', code: 'CDC_BINLOG_RETENTION' });
    expect(r.message).toContain(
      'binlog_expire_logs_seconds is 3600 (1 hours), less than binlogRetentionHours 24',
    );
    expect(r.message).toContain('the position must survive an outage');
    expect(r.message).toContain('run SET PERSIST binlog_expire_logs_seconds = 86400;');
    expect(
      line(mysql({ binlog_expire_logs_seconds: '172800' }), 'binlog_retention', { binlogRetentionHours: 72 })
        .status,
    ).toBe('fail');
  });

  it('MySQL: 0 falls back to expire_logs_days; both 0, or auto purge OFF, never expire', () => {
    expect(
      line(mysql({ binlog_expire_logs_seconds: '0', expire_logs_days: '7' }), 'binlog_retention'),
    ).toMatchObject({
      status: 'ok',
      message: 'expire_logs_days is 7 (168 hours), at least binlogRetentionHours 24',
    });
    expect(
      line(mysql({ binlog_expire_logs_seconds: '0', expire_logs_days: '0' }), 'binlog_retention').message,
    ).toContain('binlogs never expire');
    expect(
      line(
        mysql({ binlog_expire_logs_seconds: '60', binlog_expire_logs_auto_purge: 'OFF' }),
        'binlog_retention',
      ),
    ).toMatchObject({ status: 'ok' });
  });

  it('MariaDB: binlog_expire_logs_seconds / expire_logs_days, fixed with SET GLOBAL + my.cnf', () => {
    const r = line(
      mariadb({ binlog_expire_logs_seconds: '3600', expire_logs_days: '0.041667' }),
      'binlog_retention',
    );
    expect(r).toMatchObject({ status: 'fail', code: 'CDC_BINLOG_RETENTION' });
    expect(r.message).toContain('SET GLOBAL binlog_expire_logs_seconds = 86400;');
    expect(r.message).toContain('under [mariadb] in my.cnf');
    const days = line(
      mariadb({ binlog_expire_logs_seconds: '0', expire_logs_days: '0.5' }),
      'binlog_retention',
    );
    expect(days.message).toContain('expire_logs_days is 0.5 (12 hours), less than binlogRetentionHours 24');
  });

  it('RDS: NULL (the default) fails with CALL mysql.rds_set_configuration; too few hours too; enough passes', () => {
    const nul = line(rds(null), 'binlog_retention');
    expect(nul).toMatchObject({ status: 'fail', code: 'CDC_BINLOG_RETENTION' });
    expect(nul.message).toContain(
      'RDS for MySQL: binlog retention hours is NULL (the default): binlogs are purged as soon as possible',
    );
    expect(nul.message).toContain("run CALL mysql.rds_set_configuration('binlog retention hours', 24);");
    const few = line(rds('12'), 'binlog_retention');
    expect(few.message).toContain('binlog retention hours is 12, less than binlogRetentionHours 24');
    expect(line(rds('48'), 'binlog_retention')).toMatchObject({ status: 'ok' });
    // RDS's own server variable is not what keeps binlogs there.
    expect(line(rds(null, { binlog_expire_logs_seconds: '2592000' }), 'binlog_retention').status).toBe(
      'fail',
    );
    const unread = line(rds(undefined), 'binlog_retention');
    expect(unread.message).toContain('could not be read');
    expect(unread.message).toContain('CALL mysql.rds_show_configuration;');
    expect(line(rds(null), 'binlog_retention', { binlogRetentionHours: 200 }).message).toContain(
      "rds_set_configuration('binlog retention hours', 200); (RDS for MySQL keeps at most 168 hours",
    );
    const mariaRds = mariadb(
      { basedir: '/rdsdbbin/mariadb-10.11.6.R1/' },
      { rds: true, rdsRetentionHours: null },
    );
    expect(line(mariaRds, 'binlog_retention').message).toMatch(
      /^RDS for MariaDB: binlog retention hours is NULL/,
    );
  });

  it('Aurora MySQL: the same procedure, up to 2160 hours', () => {
    const r = line(aurora({}, null), 'binlog_retention');
    expect(r.message).toContain('Aurora MySQL: binlog retention hours is NULL');
    expect(r.message).toContain("CALL mysql.rds_set_configuration('binlog retention hours', 24);");
    expect(line(aurora({}, null), 'binlog_retention', { binlogRetentionHours: 720 }).message).not.toContain(
      'at most',
    );
  });
});

describe('judgeBinlog: binlog filters', () => {
  const tables = [
    { source: 'shop.orders', insertOnly: false },
    { source: 'audit.log', insertOnly: false },
  ];
  it('no line without filters; ok when every cdc database is logged; fail naming the filtered database', () => {
    expect(
      judgeBinlog(mysql({}, { filters: { doDb: [], ignoreDb: [] } }), { ...OPTS, tables }).some(
        (l) => l.check === 'binlog_filter',
      ),
    ).toBe(false);
    const ok = judgeBinlog(mysql({}, { filters: { doDb: [], ignoreDb: ['scratch'] } }), {
      ...OPTS,
      tables,
    }).at(-1)!;
    expect(ok).toMatchObject({ check: 'binlog_filter', status: 'ok' });
    const ignored = judgeBinlog(mariadb({}, { filters: { doDb: [], ignoreDb: ['audit'] } }), {
      ...OPTS,
      tables,
    }).at(-1)!;
    expect(ignored).toMatchObject({ check: 'binlog_filter', status: 'fail', code: 'CDC_BINLOG_FILTERED' });
    expect(ignored.message).toContain(
      '(binlog-ignore-db=audit), so no change of database "audit" is ever logged',
    );
    const only = judgeBinlog(mysql({}, { filters: { doDb: ['shop'], ignoreDb: [] } }), {
      ...OPTS,
      tables,
    }).at(-1)!;
    expect(only.message).toContain('(binlog-do-db=shop), so no change of database "audit" is ever logged');
  });
});

describe('platformOf', () => {
  it('reads RDS from /rdsdbbin or rds_configuration, Aurora from aurora_version', () => {
    expect(platformOf(mysql())).toBe('self');
    expect(platformOf(rds('24'))).toBe('rds');
    expect(platformOf(mysql({}, { rds: true }))).toBe('rds');
    expect(platformOf(aurora())).toBe('aurora');
  });
});
