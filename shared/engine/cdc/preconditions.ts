/**
 * What a cdc table's configuration asks of its source table, judged from its introspected
 * schema: the refusals a CDC start makes BEFORE it records anything of the table (state entry,
 * publication, slot), and the ones `tidemark check` reports in the same words (shared/pipeline/
 * check.ts), so check never promises a start that would then be refused.
 *
 * Owns: those rules. Never reads the source itself.
 */
import { TidemarkError } from '../../contracts/errors.js';
import { requireUpsertKey, type WriteMode } from '../../dataplane/batch.js';
import type { Schema } from '../../dataplane/schema.js';

/** The parts of a cdc table's spec the rules judge. */
export interface CdcTableRules {
  readonly target: string;
  readonly writeMode: WriteMode;
  /** `initial` (the spec's default for cdc tables) loads the existing rows by key ranges. */
  readonly snapshot?: 'initial' | 'never';
}

/** The refusals of `t` over its source schema, each with the fix; empty when it may start. */
export function cdcTableRefusals(t: CdcTableRules, schema: Schema): TidemarkError[] {
  const refusals: TidemarkError[] = [];
  if (t.snapshot === 'initial' && schema.primaryKey.length === 0)
    refusals.push(
      new TidemarkError(
        'CDC_SNAPSHOT_NO_KEY',
        `table ${t.target} has no primary key, and a snapshot reads a table in ranges of its primary key; add one, or set snapshot: never on the table (only changes from then on are captured)`,
      ),
    );
  try {
    requireUpsertKey(t.target, t.writeMode, schema);
  } catch (e) {
    if (!(e instanceof TidemarkError)) throw e;
    refusals.push(e);
  }
  return refusals;
}

/** The `ok` line's words for a table the rules accept. */
export function cdcTableAccepted(t: CdcTableRules, schema: Schema): string {
  const key = schema.primaryKey.join(', ');
  const mode =
    t.writeMode === 'upsert' ? `upsert by its primary key (${key})` : 'append: every change is kept';
  return t.snapshot === 'initial' ? `${mode}; its rows are snapshotted by primary-key ranges (${key})` : mode;
}
