/**
 * The resume position of a change stream, a contract of its own: the stream contracts (cdc.ts)
 * and the snapshot contracts (snapshot.ts) both carry it, and neither imports the other for it.
 */

/**
 * Where a stream resumes: opaque to the engine, owned by the reader kind, JSON-safe so it is
 * stored as is in the state item. `scheme` says which reader kind can parse `value` (a Postgres
 * LSN `16/B374D848`; a MySQL `{gtid, file, pos, server, epoch}` rendered by its reader; the
 * scripted source's step number). Distinct from the per-row `__pos`, which only orders rows.
 */
export interface SourcePosition {
  readonly scheme: string;
  /** The resume point in the reader's own terms (bounded: part of a state item). */
  readonly value: string;
  /** Human-readable form for status and logs (e.g. `0/16B3748` or `mysql-bin.000012:4711`). */
  readonly display?: string;
}
