/**
 * The schema a CDC table writes to the lake, from its introspected (or streamed) source schema:
 * every column outside the primary key nullable, because under Postgres' default replica
 * identity a DELETE carries only the key (docs/decisions/0010-cdc-nullability.md). The run
 * (./run.ts, ./recovery.ts), `schema accept` (./schema.ts) and the benches all take it from
 * here, so the hash a table's entry records is the same everywhere.
 *
 * Key columns keep their declared nullability; nothing else changes.
 */
import type { Schema } from '../../dataplane/schema.js';

/**
 * CDC wire schemas mark every non-key column nullable: under Postgres' default replica identity a
 * DELETE carries only the key (docs/decisions/0010-cdc-nullability.md).
 */
export function cdcLakeSchema(schema: Schema): Schema {
  const keys = new Set(schema.primaryKey);
  return {
    ...schema,
    columns: schema.columns.map((c) => (keys.has(c.name) || c.nullable ? c : { ...c, nullable: true })),
  };
}
