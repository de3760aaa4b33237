/**
 * What `freshPgDatabase` (pg.ts) and `freshMysqlDatabase` (mysql.ts) return, how they name
 * databases so parallel test files never collide, and the handle both build (a drop that runs
 * once however often it is called).
 */
import { randomBytes } from 'node:crypto';

/** A database created for one test file. */
export interface FreshDatabase {
  /** The database's name, e.g. `cursor_tests_3f9a1c0b2d4e`. */
  readonly name: string;
  /** Superuser/root URL of this database. */
  readonly url: string;
  /** Drops the database (ending its sessions first). Idempotent. */
  drop(): Promise<void>;
}

/**
 * The handle of database `name` at `url`: `drop` runs `dropIt` the first time and returns that
 * same promise every time after.
 */
export function databaseHandle(name: string, url: string, dropIt: () => Promise<void>): FreshDatabase {
  let dropped: Promise<void> | undefined;
  return {
    name,
    url,
    drop: () => {
      dropped ??= dropIt();
      return dropped;
    },
  };
}

/** The URL of database `name` on the server at `serverUrl` (the same login). */
export function databaseUrl(serverUrl: string, name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** `<prefix>_<12 hex>`, lower case, only [a-z0-9_], within the 63/64-byte identifier limits. */
export function uniqueDatabaseName(prefix: string): string {
  const clean =
    prefix
      .toLowerCase()
      .replace(/[^a-z0-9_]+/g, '_')
      .slice(0, 40) || 'db';
  return `${clean}_${randomBytes(6).toString('hex')}`;
}
