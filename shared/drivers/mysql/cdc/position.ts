/**
 * The MySQL reader's positions: the resume point stored in the CDC state (`SourcePosition` of
 * scheme `mysql`, a JSON object) and the `__pos` prefix of a transaction's rows.
 *
 * A resume point is after a transaction: its commit event's end (`file:pos`), the GTID position
 * there (MariaDB `domain-server-seq` per domain, or MySQL's executed set), the server the
 * coordinates belong to and the coordinate epoch (bumped when resuming on another server, so
 * every later `__pos` sorts after every earlier one: decision 0012, and 0003 for `__pos`).
 * A row's `__pos` is its transaction's prefix (epoch, file index, start of the event group) plus
 * an ordinal per (transaction, table).
 *
 * Owns: that encoding and its parsing (a position of another scheme or shape is refused with
 * POSITION_SCHEME). Pure: no I/O.
 */
import type { SourcePosition } from '../../../contracts/cdc.js';
import { TidemarkError } from '../../../contracts/errors.js';
import { mysqlPosition } from '../../../position/position.js';

/** The scheme of MySQL resume positions (`SourcePosition.scheme`): a value is JSON. */
export const MYSQL_POSITION_SCHEME = 'mysql';

/** A MySQL resume point: after the transaction that ended at `file:pos`. */
export interface BinlogPoint {
  readonly file: string;
  readonly pos: number;
  /** MariaDB gtid_slave_pos-style `domain-server-seq` list (or MySQL's set), '' when unknown. */
  readonly gtid: string;
  /** The server the coordinates belong to (`@@server_uuid`, or `@@server_id` on MariaDB). */
  readonly server: string;
  readonly epoch: number;
}

export function binlogPosition(p: BinlogPoint): SourcePosition {
  return {
    scheme: MYSQL_POSITION_SCHEME,
    value: JSON.stringify({ file: p.file, pos: p.pos, gtid: p.gtid, server: p.server, epoch: p.epoch }),
    display: `${p.file}:${p.pos}`,
  };
}

/**
 * A snapshot watermark's `at` in this reader's scheme: the binlog coordinates `file:pos` (a
 * consistent snapshot's Binlog_snapshot_file/position), for `Reader.expectWatermark`.
 */
export function binlogAt(file: string, pos: number): SourcePosition {
  return { scheme: MYSQL_POSITION_SCHEME, value: JSON.stringify({ file, pos }), display: `${file}:${pos}` };
}

export function parseBinlogPosition(p: SourcePosition): BinlogPoint {
  if (p.scheme !== MYSQL_POSITION_SCHEME)
    throw new TidemarkError(
      'POSITION_SCHEME',
      `the stored position is of scheme "${p.scheme}", not a MySQL binlog position: it was written by another kind of source; reset the source's state`,
    );
  let v: Partial<BinlogPoint>;
  try {
    v = JSON.parse(p.value) as Partial<BinlogPoint>;
  } catch (e) {
    throw new TidemarkError('POSITION_SCHEME', `the stored MySQL position is not JSON: ${p.value}`, {
      cause: e,
    });
  }
  if (typeof v.file !== 'string' || typeof v.pos !== 'number')
    throw new TidemarkError('POSITION_SCHEME', `the stored MySQL position has no file and pos: ${p.value}`);
  return {
    file: v.file,
    pos: v.pos,
    gtid: typeof v.gtid === 'string' ? v.gtid : '',
    server: typeof v.server === 'string' ? v.server : '',
    epoch: typeof v.epoch === 'number' ? v.epoch : 0,
  };
}

const PREFIX_LENGTH = 33; // 'm' + epoch 8 + file 8 + offset 16

/**
 * The `__pos` prefix of the event group starting at `offset` of binlog file number `fileIndex`
 * in coordinate epoch `epoch`: a row's `__pos` is this plus its 8-hex-digit ordinal.
 */
export function groupPrefix(epoch: number, fileIndex: number, offset: bigint): string {
  return mysqlPosition(epoch, fileIndex, offset, 0).slice(0, PREFIX_LENGTH);
}
