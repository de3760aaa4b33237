// TEMPORARY stand-in (not committed): replaced by the real module from the preflight branch.
import type { Sql } from '../connect.js';
import { quoteIdent } from '../types.js';
export interface PublishedTable {
  readonly source: string;
  readonly insertOnly: boolean;
}
export interface PublicationSetup {
  readonly names: readonly string[];
  readonly executed: readonly string[];
}
export async function ensurePublications(
  sql: Sql,
  publication: string,
  tables: readonly PublishedTable[],
): Promise<PublicationSetup> {
  const [row] = await sql.unsafe('SELECT 1 FROM pg_publication WHERE pubname = $1', [publication]);
  const executed: string[] = [];
  if (!row) {
    const list = tables
      .map((t) => {
        const [s, n] = t.source.split('.');
        return `${quoteIdent(s!)}.${quoteIdent(n!)}`;
      })
      .join(', ');
    const st = `CREATE PUBLICATION ${quoteIdent(publication)} FOR TABLE ${list} WITH (publish_via_partition_root = true)`;
    await sql.unsafe(st);
    executed.push(st);
  }
  return { names: [publication], executed };
}
