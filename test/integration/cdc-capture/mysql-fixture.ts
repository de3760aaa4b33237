/**
 * The MySQL/MariaDB side of the in-process capture scenarios (./scenarios.ts), on the test
 * file's database and client: tables in that database, a binlog dump server id per capture, a
 * position lost by purging the binlogs past it (with a change after it).
 */
import type mysql from 'mysql2/promise';
import type { FreshDatabase } from '../../harness/mysql.js';
import { mysqlCdcSpec, startMysqlCapture } from '../../harness/mysql-cdc.js';
import type { CaptureFixture } from './scenarios.js';

/** The fixture on what `db()` and `sql()` return (read when a scenario runs). */
export function mysqlCaptureFixture(
  db: () => FreshDatabase,
  sql: () => mysql.Connection,
  serverId: () => number,
): CaptureFixture {
  const exec = async (statements: string): Promise<void> => {
    await sql().query(statements);
  };
  return {
    table: (name) => `${db().name}.${name}`,
    quotedTable: (name) => `\`${db().name}\`.${name}`,
    textType: 'varchar(10)',
    exec,
    spec: (_name, tables) => mysqlCdcSpec(db().url, serverId(), tables),
    start: startMysqlCapture,
    async losePosition(_name, table) {
      await exec(`INSERT INTO ${table} VALUES (3, 'lost')`);
      await exec('FLUSH BINARY LOGS');
      const [status] = await sql().query('SHOW MASTER STATUS');
      const current = (status as { File: string }[])[0]!.File;
      // MariaDB keeps a binlog until its binlog checkpoint has passed it: purge until it is gone.
      for (let i = 0; ; i++) {
        await exec(`PURGE BINARY LOGS TO '${current}'`);
        const [logs] = await sql().query('SHOW BINARY LOGS');
        if ((logs as { Log_name: string }[])[0]!.Log_name === current) break;
        if (i > 100) throw new Error(`the binlogs before ${current} could not be purged`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    gapDetail: '1236',
  };
}
