/**
 * The Postgres reader's positions: the resume point kept in state (`SourcePosition` of scheme
 * `pg-lsn`, an LSN) and the `__pos` prefix of a transaction's rows (decision 0003, the `p`
 * scheme of shared/position/position.ts).
 *
 * Owns the codec only: what an LSN means is the reader's (a commit's END LSN is where the stream
 * resumes after that transaction, a keepalive or heartbeat LSN is progress between transactions;
 * docs/postgres-cdc.md "Positions, acknowledgements and the slot"). Must never accept a position
 * of another scheme: a MySQL position read as an LSN would resume somewhere arbitrary.
 */
import type { SourcePosition } from '../../../contracts/cdc.js';
import { TidemarkError } from '../../../contracts/errors.js';
import { formatLsn, parseLsn, parsePgPosition, pgPosition } from '../../../position/position.js';

/** The scheme of Postgres resume positions (`SourcePosition.scheme`): a value is an LSN. */
export const PG_POSITION_SCHEME = 'pg-lsn';

export function lsnPosition(lsn: bigint): SourcePosition {
  const text = formatLsn(lsn);
  return { scheme: PG_POSITION_SCHEME, value: text, display: text };
}

export function parseLsnPosition(p: SourcePosition): bigint {
  if (p.scheme !== PG_POSITION_SCHEME)
    throw new TidemarkError(
      'POSITION_SCHEME',
      `the stored position is of scheme "${p.scheme}", not a Postgres LSN: it was written by another kind of source; reset the source's state`,
    );
  return parseLsn(p.value);
}

/**
 * The `__pos` prefix (`p` + 16 hex, without the 8-hex ordinal) of rows placed at `lsn`: a
 * transaction's rows (its commit LSN, Begin's final_lsn) or a snapshot chunk's (a watermark's
 * LSN - 1). Once per transaction, never per row.
 */
export function lsnPrefix(lsn: bigint): string {
  return pgPosition(lsn, 0).slice(0, 17);
}

/**
 * Where a table's rows resume, from its `StartFrom.next`: rows below (lsn, ordinal) are durable
 * already. A `p` position is parsed; one past every `p` position (a later scheme letter) holds
 * back every row; none (or an earlier scheme) holds back none (undefined).
 */
export function parseTableNext(next: string | undefined): { lsn: bigint; ordinal: number } | undefined {
  if (next !== undefined && next >= 'p' && next < 'q') {
    const { commitLsn, ordinal } = parsePgPosition(next);
    return { lsn: commitLsn, ordinal };
  }
  if (next !== undefined && next >= 'q') return { lsn: 2n ** 64n, ordinal: 0 };
  return undefined;
}
