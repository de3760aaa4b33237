/**
 * Per-table positions: the `__pos` every row carries and the start position an object is named
 * by. Within one table, positions sort lexicographically (plain string `<`, bytewise) in commit
 * order; the lake's "latest version of a row" (`max_by(row, __pos)`) and crash cleanup ("remove
 * objects that start at or after the committed position") both rely on it, so a scheme here that
 * sorts wrong would make readers pick stale rows and cleanup delete committed data.
 *
 * Owns: the three position schemes. Never interprets a cursor value: cursor tokens are
 * `key-codec.ts`. Every field is fixed-width lowercase hex, so lexicographic order is numeric
 * order field by field, and a one-letter scheme tag leads so a position says where it came from:
 *
 *   incremental   `j` + seq (12 hex) + fence (8 hex) + ordinal (8 hex)       29 chars
 *                 seq: the table's commit sequence, +1 per committed sync step;
 *                 fence: the writing run's lease fence (shared/contracts/state.ts `Lease.fence`),
 *                 so at one seq the row versions of a later lease holder win over what a holder
 *                 that lost its lease still wrote (a re-read of the same page, older versions);
 *                 ordinal: the row's index within that step.
 *   (legacy)      `i` + seq (12 hex) + ordinal (8 hex)                       21 chars
 *                 written before fences (decision 0003, amendment); still parsed. Every `j`
 *                 position sorts after every `i` one, so a lake written in both keeps its order:
 *                 a table's new rows come after all its old ones, no migration.
 *   Postgres CDC  `p` + commit LSN (16 hex) + ordinal (8 hex)                 25 chars
 *                 the COMMIT's LSN, not the change's: change LSNs of concurrent transactions
 *                 interleave, commit LSNs are in commit order; ordinal = change index in the
 *                 transaction.
 *   MySQL CDC     `m` + epoch (8 hex) + binlog file index (8 hex) + offset (16 hex) + ordinal (8 hex)   41 chars
 *                 epoch: bumped whenever binlog coordinates stop being comparable (failover to
 *                 another server, RESET MASTER/BINARY LOGS, a GTID domain/server change on
 *                 MariaDB): GTIDs are not a total order there (they restart after failover,
 *                 MariaDB has several domains), file:offset on one server is. file index: the
 *                 binlog file's numeric suffix. offset: where the transaction's event group
 *                 starts in that file (transactions are written whole, in commit order).
 *
 * Positions of different schemes are not comparable in meaning (`i...` < `j...` < `m...` <
 * `p...` only by letter): a table's positions come from one scheme; changing a table's scheme is
 * a resync. The one intended exception is `i` -> `j`: the same incremental steps before and after
 * fences, where "every `j` after every `i`" is exactly the order wanted.
 */
import { DataError } from '../contracts/errors.js';

const SEQ_WIDTH = 12;
const FENCE_WIDTH = 8;
const ORDINAL_WIDTH = 8;
const LSN_WIDTH = 16;
const EPOCH_WIDTH = 8;
const FILE_INDEX_WIDTH = 8;
const OFFSET_WIDTH = 16;

/** The largest incremental commit sequence (2^48 - 1: a step per millisecond for 8900 years). */
export const MAX_SEQ = 2 ** (SEQ_WIDTH * 4) - 1;
/** The largest ordinal within a step or transaction (2^32 - 1). */
export const MAX_ORDINAL = 2 ** (ORDINAL_WIDTH * 4) - 1;
/** The largest lease fence a position can carry (2^32 - 1 acquisitions of one table's lease). */
export const MAX_FENCE = 2 ** (FENCE_WIDTH * 4) - 1;

/** The scheme letter of incremental positions, and of those written before fences. */
export const INCREMENTAL_SCHEME = 'j';
export const LEGACY_INCREMENTAL_SCHEME = 'i';

const INCREMENTAL = /^j([0-9a-f]{12})([0-9a-f]{8})([0-9a-f]{8})$/;
const LEGACY_INCREMENTAL = /^i([0-9a-f]{12})([0-9a-f]{8})$/;
const PG = /^p([0-9a-f]{16})([0-9a-f]{8})$/;
const MYSQL = /^m([0-9a-f]{8})([0-9a-f]{8})([0-9a-f]{16})([0-9a-f]{8})$/;
const LSN_TEXT = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/;

// incremental ---------------------------------------------------------------------------------

/**
 * The prefix of every `__pos` written by incremental commit step `seq` under the lease with
 * fence `fence`: `j` + 12 hex digits of seq + 8 of the fence. `__pos` of row i of the step is
 * `incrementalPosPrefix(seq, fence) + ordinalHex(i)`, so positions order by (seq, fence,
 * ordinal): a later step always wins, and at one step the higher fence (the later lease holder).
 */
export function incrementalPosPrefix(seq: number, fence: number): string {
  return `j${fixedHex(seq, SEQ_WIDTH, 'incremental commit sequence')}${fixedHex(fence, FENCE_WIDTH, 'lease fence')}`;
}

/**
 * The lowest incremental position of step `seq`: `j` + its 12 hex digits. Every row of step
 * `seq` (whatever its fence) sorts after it, everything of earlier steps (and every legacy `i`
 * position) before it. It is the start position the step's object is named by (the writing
 * run's fence goes into the name beside it, shared/sink/layout.ts), and the committed position
 * recovery deletes from.
 */
export function incrementalStepStart(seq: number): string {
  return `j${fixedHex(seq, SEQ_WIDTH, 'incremental commit sequence')}`;
}

/**
 * The least position after `pos` that a later row of the same table can have: `pos` with its
 * trailing ordinal plus one (every scheme ends in one). A CDC table's `next`, the first `__pos`
 * not yet durable, is this of its last durable row.
 */
export function positionAfter(pos: string): string {
  const tail = pos.slice(-ORDINAL_WIDTH);
  if (!/^[0-9a-f]{8}$/.test(tail))
    throw malformed(pos, `a position ending in ${ORDINAL_WIDTH} lowercase hex digits`);
  return pos.slice(0, -ORDINAL_WIDTH) + ordinalHex(Number.parseInt(tail, 16) + 1);
}

/** An ordinal as 8 hex digits (0 <= n < 2^32), the fixed-width tail of every position. */
export function ordinalHex(n: number): string {
  return fixedHex(n, ORDINAL_WIDTH, 'ordinal');
}

/**
 * The position of row `ordinal` of incremental step `seq` under fence `fence` (an object's
 * first row: `ordinal` 0). Every object and row of a later step sorts after every one of this
 * step, and at this step those of a higher fence after those of a lower one.
 */
export function objectStartPosition(seq: number, fence: number, ordinal = 0): string {
  return incrementalPosPrefix(seq, fence) + ordinalHex(ordinal);
}

/** An incremental position's fields; `fence` is undefined for a legacy `i` position. */
export interface IncrementalPositionFields {
  readonly seq: number;
  readonly fence: number | undefined;
  readonly ordinal: number;
}

/** Parses an incremental position (a row's `__pos`, `j` or legacy `i`) back to its fields. */
export function parseIncrementalPosition(pos: string): IncrementalPositionFields {
  const j = INCREMENTAL.exec(pos);
  if (j) {
    return {
      seq: Number.parseInt(j[1]!, 16),
      fence: Number.parseInt(j[2]!, 16),
      ordinal: Number.parseInt(j[3]!, 16),
    };
  }
  const i = LEGACY_INCREMENTAL.exec(pos);
  if (!i) {
    throw malformed(
      pos,
      `'j' + ${SEQ_WIDTH} + ${FENCE_WIDTH} + ${ORDINAL_WIDTH} (or, written before fences, 'i' + ${SEQ_WIDTH} + ${ORDINAL_WIDTH}) lowercase hex digits`,
    );
  }
  return { seq: Number.parseInt(i[1]!, 16), fence: undefined, ordinal: Number.parseInt(i[2]!, 16) };
}

/**
 * The commit step of an incremental object's start position or a row position: `j` + seq
 * (`incrementalStepStart`), + fence (`incrementalPosPrefix`), + ordinal (a row's `__pos`), or
 * legacy `i` + seq (+ ordinal); undefined for any other scheme.
 */
export function incrementalSeqOf(startPosition: string): number | undefined {
  const m =
    /^j([0-9a-f]{12})(?:[0-9a-f]{8}){0,2}$/.exec(startPosition) ??
    /^i([0-9a-f]{12})(?:[0-9a-f]{8})?$/.exec(startPosition);
  return m ? Number.parseInt(m[1]!, 16) : undefined;
}

// Postgres CDC --------------------------------------------------------------------------------

/** The position of change `ordinal` of the transaction that committed at `commitLsn`. */
export function pgPosition(commitLsn: bigint, ordinal: number): string {
  return `p${fixedHexBig(commitLsn, LSN_WIDTH, 'commit LSN')}${ordinalHex(ordinal)}`;
}

/** Parses a `pgPosition` back. */
export function parsePgPosition(pos: string): { commitLsn: bigint; ordinal: number } {
  const m = PG.exec(pos);
  if (!m) throw malformed(pos, `'p' + ${LSN_WIDTH} + ${ORDINAL_WIDTH} lowercase hex digits`);
  return { commitLsn: BigInt(`0x${m[1]}`), ordinal: Number.parseInt(m[2]!, 16) };
}

/** Parses Postgres' LSN text (`16/B374D848`: high and low 32 bits in hex) into a 64-bit number. */
export function parseLsn(text: string): bigint {
  const m = LSN_TEXT.exec(text);
  if (!m) throw new DataError(`'${text}' is not a Postgres LSN like '16/B374D848'`);
  return (BigInt(`0x${m[1]}`) << 32n) | BigInt(`0x${m[2]}`);
}

/** Formats a 64-bit LSN the way Postgres prints it (`%X/%X`: upper case, no zero padding). */
export function formatLsn(lsn: bigint): string {
  fixedHexBig(lsn, LSN_WIDTH, 'LSN');
  return `${(lsn >> 32n).toString(16).toUpperCase()}/${(lsn & 0xffffffffn).toString(16).toUpperCase()}`;
}

// MySQL CDC -----------------------------------------------------------------------------------

/**
 * The position of row change `ordinal` of the transaction whose event group starts at
 * `offset` in binlog file number `fileIndex`, within coordinate epoch `epoch` (see the module
 * comment: bump the epoch whenever file:offset stops being comparable with what came before).
 */
export function mysqlPosition(epoch: number, fileIndex: number, offset: bigint, ordinal: number): string {
  return (
    'm' +
    fixedHex(epoch, EPOCH_WIDTH, 'binlog epoch') +
    fixedHex(fileIndex, FILE_INDEX_WIDTH, 'binlog file index') +
    fixedHexBig(offset, OFFSET_WIDTH, 'binlog offset') +
    ordinalHex(ordinal)
  );
}

/** Parses a `mysqlPosition` back. */
export function parseMysqlPosition(pos: string): {
  epoch: number;
  fileIndex: number;
  offset: bigint;
  ordinal: number;
} {
  const m = MYSQL.exec(pos);
  if (!m)
    throw malformed(
      pos,
      `'m' + ${EPOCH_WIDTH} + ${FILE_INDEX_WIDTH} + ${OFFSET_WIDTH} + ${ORDINAL_WIDTH} lowercase hex digits`,
    );
  return {
    epoch: Number.parseInt(m[1]!, 16),
    fileIndex: Number.parseInt(m[2]!, 16),
    offset: BigInt(`0x${m[3]}`),
    ordinal: Number.parseInt(m[4]!, 16),
  };
}

/** The numeric suffix of a binlog file name (`mysql-bin.000123` -> 123), the `fileIndex` of a position. */
export function binlogFileIndex(fileName: string): number {
  const m = /\.(\d+)$/.exec(fileName);
  const index = m ? Number(m[1]) : Number.NaN;
  if (!Number.isSafeInteger(index) || index > 2 ** (FILE_INDEX_WIDTH * 4) - 1) {
    throw new DataError(`binlog file name '${fileName}' does not end in a numeric suffix like '.000123'`);
  }
  return index;
}

// ---------------------------------------------------------------------------------------------

function fixedHex(n: number, width: number, what: string): string {
  if (!Number.isSafeInteger(n) || n < 0 || n >= 2 ** (width * 4)) {
    throw new DataError(`${what} ${n} is not an integer in 0..2^${width * 4}-1`);
  }
  return n.toString(16).padStart(width, '0');
}

function fixedHexBig(n: bigint, width: number, what: string): string {
  if (typeof n !== 'bigint' || n < 0n || n >= 1n << BigInt(width * 4)) {
    throw new DataError(`${what} ${n} is not a bigint in 0..2^${width * 4}-1`);
  }
  return n.toString(16).padStart(width, '0');
}

function malformed(pos: string, expected: string): DataError {
  return new DataError(`position '${pos}' is not ${expected}; it was not written by this tidemark version`);
}
