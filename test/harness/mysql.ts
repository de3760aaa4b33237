/**
 * One MariaDB/MySQL database per test file (or test) on the shared harness server, so files
 * that run in parallel never see each other's tables. (The binlog is server-wide: binlog tests
 * filter events by their database name.)
 *
 * Owns: creating and dropping those databases. Never drops a database it did not create.
 */
import mysql from 'mysql2/promise';
import { type FreshDatabase, uniqueDatabaseName } from './fresh-database.js';
import { testServers } from './servers.js';

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
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  let dropped: Promise<void> | undefined;
  return {
    name,
    url: url.toString(),
    drop: () => {
      dropped ??= withAdmin(serverUrl, async (connection) => {
        await connection.query(`DROP DATABASE IF EXISTS \`${name}\``);
      });
      return dropped;
    },
  };
}

async function withAdmin<T>(url: string, use: (connection: mysql.Connection) => Promise<T>): Promise<T> {
  const connection = await mysql.createConnection({ uri: url });
  try {
    return await use(connection);
  } finally {
    await connection.end();
  }
}
