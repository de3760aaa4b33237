/**
 * One PostgreSQL database per test file (or test) on the shared harness server, so files that
 * run in parallel never see each other's tables, publications or slots.
 *
 * Owns: creating and dropping those databases. Never drops a database it did not create.
 */
import postgres from 'postgres';
import { databaseHandle, databaseUrl, type FreshDatabase, uniqueDatabaseName } from './fresh-database.js';
import { testServers } from './servers.js';

export type { FreshDatabase } from './fresh-database.js';

/**
 * Creates a database named `<prefix>_<random>` on the harness PostgreSQL and returns its URL.
 * `drop()` first ends its sessions and drops its replication slots (a slot pins its database).
 *
 * @example
 * let db: FreshDatabase;
 * beforeAll(async () => { db = await freshPgDatabase('incremental'); });
 * afterAll(() => db.drop());
 */
export async function freshPgDatabase(prefix: string): Promise<FreshDatabase> {
  const serverUrl = testServers().pgUrl;
  const name = uniqueDatabaseName(prefix);
  await withAdmin(serverUrl, (sql) => sql.unsafe(`CREATE DATABASE "${name}"`));
  return databaseHandle(name, databaseUrl(serverUrl, name), () =>
    withAdmin(serverUrl, (sql) => dropDatabase(sql, name)),
  );
}

async function dropDatabase(sql: postgres.Sql, name: string): Promise<void> {
  // A slot in use by a walsender cannot be dropped: end those sessions first. The slot turns
  // inactive only once the walsender has exited, so retry for a while.
  const deadline = Date.now() + 10_000;
  for (;;) {
    await sql`SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
              WHERE database = ${name} AND active_pid IS NOT NULL`;
    try {
      await sql`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = ${name}`;
      break;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  // WITH (FORCE) ends any remaining sessions (pools a test forgot to close).
  await sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
}

async function withAdmin<T>(url: string, use: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(url, { max: 1, onnotice: () => undefined });
  try {
    return await use(sql);
  } finally {
    await sql.end();
  }
}
