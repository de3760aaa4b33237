/**
 * What both change-stream readers do when the log describes a table's columns anew (a pgoutput
 * Relation message, a binlog TableMap): the lake schema the rows after it are written in.
 *
 * Owns that one rule: columns in the log's order, each column's lake type from the driver's read
 * plan, the primary key kept from the table's current schema, key columns keeping their
 * nullability and every other column nullable (a DELETE may carry only the key: decision 0010).
 * Never reads a catalog or compares schemas (the schema rules do).
 */
import type { LogicalType, Schema } from '../dataplane/schema.js';

/** A column as a reader's driver describes it. */
export interface StreamColumn {
  readonly name: string;
  readonly sourceType: string;
  readonly read: { readonly logical: LogicalType };
}

/** The schema `columns` (exclusions already applied) give a table whose schema was `old`. */
export function streamSchema(old: Schema, columns: readonly StreamColumn[]): Schema {
  const keys = new Set(old.primaryKey);
  return {
    columns: columns.map((c) => {
      const before = old.columns.find((o) => o.name === c.name);
      return {
        name: c.name,
        type: c.read.logical,
        nullable: keys.has(c.name) ? (before?.nullable ?? false) : true,
        sourceType: c.sourceType,
      };
    }),
    primaryKey: old.primaryKey,
  };
}
