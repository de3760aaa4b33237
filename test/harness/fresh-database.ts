/**
 * What `freshPgDatabase` (pg.ts) and `freshMysqlDatabase` (mysql.ts) return, and how they name
 * databases so parallel test files never collide.
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

/** `<prefix>_<12 hex>`, lower case, only [a-z0-9_], within the 63/64-byte identifier limits. */
export function uniqueDatabaseName(prefix: string): string {
  const clean =
    prefix
      .toLowerCase()
      .replace(/[^a-z0-9_]+/g, '_')
      .slice(0, 40) || 'db';
  return `${clean}_${randomBytes(6).toString('hex')}`;
}
