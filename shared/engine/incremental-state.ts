/**
 * The state value of one incremental table (docs/decisions/0001-state-item-schema.md), stored
 * under `inc#<pipeline>#<target>` in the cursor store.
 *
 * `seq` counts committed pages; it names the next object (`incrementalPosPrefix(seq)`) and
 * prefixes every row's `__pos`, which is why positions sort in sync order for every cursor type.
 */
import { TidemarkError } from '../contracts/errors.js';

export interface IncrementalState {
  /** Resume token: (cursor value, primary key) of the last committed row; '' = from the start. */
  readonly cursor: string;
  /** The token rendered for people (`updated_at=..., id=...`); display only. */
  readonly cursorText?: string;
  /** The cursor column the token was taken on. */
  readonly cursorColumn: string;
  /** Committed pages so far; the next object's start position is derived from it. */
  readonly seq: number;
  /** Rows committed over the table's life. */
  readonly rowsTotal: number;
  /** ISO time of the last commit. */
  readonly lastCommitAt?: string;
  /** Objects of the last commit. */
  readonly lastObjects?: readonly string[];
}

export function initialIncrementalState(cursorColumn: string): IncrementalState {
  return { cursor: '', cursorColumn, seq: 0, rowsTotal: 0 };
}

/** Validates a stored value; a corrupt item is an error, never silently a fresh start. */
export function parseIncrementalState(value: unknown, cursorColumn: string): IncrementalState {
  if (value === undefined) return initialIncrementalState(cursorColumn);
  const v = value as Partial<IncrementalState>;
  if (
    typeof v !== 'object' ||
    v === null ||
    typeof v.cursor !== 'string' ||
    typeof v.cursorColumn !== 'string' ||
    typeof v.seq !== 'number' ||
    !Number.isInteger(v.seq) ||
    v.seq < 0
  ) {
    throw new TidemarkError(
      'STATE_CORRUPT',
      `stored incremental state is not valid (${JSON.stringify(value).slice(0, 200)}); inspect it with tidemark status and reset the table if needed`,
    );
  }
  return {
    cursor: v.cursor,
    cursorColumn: v.cursorColumn,
    seq: v.seq,
    rowsTotal: typeof v.rowsTotal === 'number' ? v.rowsTotal : 0,
    ...(typeof v.cursorText === 'string' ? { cursorText: v.cursorText } : {}),
    ...(v.lastCommitAt ? { lastCommitAt: v.lastCommitAt } : {}),
    ...(v.lastObjects ? { lastObjects: v.lastObjects } : {}),
  };
}
