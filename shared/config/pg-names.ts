/**
 * Postgres object names tidemark makes up (replication slots, publications): the 63-byte limit
 * and the one rule for fitting a longer name into it.
 *
 * Owns: that rule, so a default slot name (spec.ts `defaultCdcName`) and a derived
 * publication name (shared/drivers/postgres/cdc/publication.ts `insertOnlyPublicationName`) are cut alike. Never quotes:
 * the names it makes are `[a-z0-9_]` when its input is.
 */
import { createHash } from 'node:crypto';

/** The longest Postgres identifier (NAMEDATALEN - 1); slot names have the same limit. */
export const PG_NAME_MAX = 63;

/**
 * `name` cut to `PG_NAME_MAX - 9` characters plus `_` and 8 hex of sha256(`seed`): still valid,
 * and distinct from the name of another seed with the same prefix.
 */
export function hashedPgName(name: string, seed: string): string {
  const hash = createHash('sha256').update(seed).digest('hex').slice(0, 8);
  return `${name.slice(0, PG_NAME_MAX - 9)}_${hash}`;
}
