/**
 * The errors the CDC engine stops a source with, beyond the shared ones (shared/contracts/
 * errors.ts): what the stream itself carried that the capture must not go past. Each is thrown
 * only after the event is recorded in the source's state (./state.ts event log) with the position
 * before it, so a restart resumes exactly there and `tidemark status` shows why it stopped.
 *
 * Owns the codes' messages, each with the way out (docs/errors.md).
 */
import type { SourcePosition } from '../../contracts/cdc.js';
import { TidemarkError } from '../../contracts/errors.js';

/** The source can no longer deliver changes from where the state says to resume. */
export class PositionLostError extends TidemarkError {
  override name = 'PositionLostError';
  constructor(source: string, reason: string, from: SourcePosition | undefined) {
    super(
      'POSITION_LOST',
      `${source}: the change stream cannot resume from ${from?.display ?? from?.value ?? 'the stored position'}: ${reason}. Changes since then are lost to the log; the gap is recorded in the state. Re-snapshot the source's tables (a later release automates it as onPositionLost: reset), or reset the source's state to start over from the current log position`,
    );
  }
}

/** A TRUNCATE or destructive DDL arrived on a table under `onTruncate: fail`. */
export class DestructiveDdlError extends TidemarkError {
  override name = 'DestructiveDdlError';
  constructor(table: string, kind: string, detail: string) {
    super(
      'DESTRUCTIVE_DDL',
      `${table}: the stream carried a ${kind.toUpperCase()} (${detail.slice(0, 200)}), and the table says onTruncate: fail; the position stays before it. Re-snapshot the table, or set onTruncate: record to record such events and go on`,
    );
  }
}
