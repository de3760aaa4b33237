/**
 * One MariaDB/MySQL database per test file (or test) on the shared harness server, so files
 * that run in parallel never see each other's tables. (The binlog is server-wide: binlog tests
 * filter events by their database name.) Or, for a file whose assertions depend on what the
 * whole server does, a database on a private server of its own (`privateMysqlDatabase`).
 *
 * Owns: creating and dropping those databases, and the private servers' lifetime. Never drops
 * a database it did not create.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { externalServers } from './env.js';
import { databaseHandle, databaseUrl, type FreshDatabase, uniqueDatabaseName } from './fresh-database.js';
import { startMariaDb } from './mariadb-server.js';
import { createRunDir } from './run-dir.js';
import { testServers } from './servers.js';
import { TEMPLATE_ROOT } from './templates.js';

export type { FreshDatabase } from './fresh-database.js';

/**
 * Creates a database named `<prefix>_<random>` (utf8mb4) on the harness MariaDB and returns
 * its root URL.
 *
 * @example
 * let db: FreshDatabase;
 * beforeAll(async () => { db = await freshMysqlDatabase('binlog'); });
 * afterAll(() => db.drop());
 */
export async function freshMysqlDatabase(prefix: string): Promise<FreshDatabase> {
  const serverUrl = testServers().mysqlUrl;
  const name = uniqueDatabaseName(prefix);
  await withAdmin(serverUrl, (connection) =>
    connection.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`),
  );
  return databaseHandle(name, databaseUrl(serverUrl, name), () =>
    withAdmin(serverUrl, async (connection) => {
      await connection.query(`DROP DATABASE IF EXISTS \`${name}\``);
    }),
  );
}

/**
 * Like `freshMysqlDatabase`, but on a private MariaDB started for the caller (a copy of the
 * installed template: well under a second), stopped by pid and removed by `drop()`; if the worker
 * dies first, the exit hooks stop it, and after a SIGKILL the next run reaps it (run-dir.ts).
 *
 * For test files whose assertions depend on server-wide state that other files running at the
 * same time change. The incremental bound is one: it reads information_schema.INNODB_TRX, which
 * lists every database's transactions, and is a cache InnoDB refreshes only once nobody has read
 * it for 100 ms, so a session of another file that polls it keeps it showing transactions that
 * ended and missing ones that began since (the bound then holds its page: bound.ts
 * `freshListing`), and another file's open transactions hold the bound back.
 *
 * When TIDEMARK_TEST_MYSQL_URL names the developer's server, that server is used instead (a
 * fresh database on it, as `freshMysqlDatabase`): the suite then runs against the server it was
 * pointed at, and these files share it with the others again.
 */
export async function privateMysqlDatabase(prefix: string): Promise<FreshDatabase> {
  if (externalServers().mysqlUrl !== undefined) return freshMysqlDatabase(prefix);
  const name = uniqueDatabaseName(prefix);
  const runDir = await createRunDir();
  try {
    const baseDir = join(runDir.path, 'mariadb');
    await mkdir(baseDir);
    const server = await startMariaDb({
      baseDir,
      password: 'tidemark',
      database: name,
      templateRoot: TEMPLATE_ROOT,
    });
    return databaseHandle(name, server.url, () => server.stop().then(() => runDir.remove()));
  } catch (error) {
    await runDir.remove();
    throw error;
  }
}

async function withAdmin<T>(url: string, use: (connection: mysql.Connection) => Promise<T>): Promise<T> {
  const connection = await mysql.createConnection({ uri: url });
  try {
    return await use(connection);
  } finally {
    await connection.end();
  }
}
