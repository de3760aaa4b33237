/**
 * The MySQL reader's snapshot watermarks (`Reader.expectWatermark`, decision 0013): where a
 * snapshot chunk's rows sit among the stream's changes. Two kinds:
 *   - with `at` (binlog coordinates, `binlogAt`: a consistent snapshot's own position): reported
 *     once every event group starting before `at` has been decoded, its rows at the `__pos`
 *     prefix of `at` - 1;
 *   - without: reported when the watermark table's row with this id arrives (the chunker
 *     inserts it, ../snapshot.ts), its rows at the inserting group's prefix (after every change
 *     before the group, before every change after it).
 * Both are reported between event groups only, never inside a half-delivered transaction.
 *
 * Owns: the registered watermarks, the watermark table, and which watermarks are due. The reader
 * tells it how far the stream has been decoded and when groups open and close.
 */
import type { DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent } from '@vlasky/zongji';
import type { CdcEvent, SourcePosition } from '../../../contracts/cdc.js';
import { SourceError } from '../../../contracts/errors.js';
import { binlogFileIndex } from '../../../position/position.js';
import { RawRows } from '../wire/binlog-rows.js';
import { groupPrefix, parseBinlogPosition } from './position.js';

/** The snapshot watermarks one reader waits for (see the module comment). */
export class BinlogWatermarks {
  /** The watermark table (`setTable`), undefined until set. */
  table: { readonly database: string; readonly table: string } | undefined;
  /** Watermarks with an `at`: reported once the stream has reached it. */
  private readonly atMarks = new Map<string, { readonly file: number; readonly pos: number }>();
  /** Watermarks without `at`: ids of watermark-table rows not seen yet. */
  private readonly tableMarks = new Set<string>();
  /** Registered ids the open group inserted into the watermark table. */
  private txnMarks: string[] = [];
  /** Watermark events ready to be queued (the group that carried them has ended). */
  private readonly readyMarks: CdcEvent[] = [];

  /**
   * Sets the watermark table `db.table` (never a captured table: `captured` maps the captured
   * sources); false when it was that table already.
   */
  setTable(source: string, captured: ReadonlyMap<string, unknown>): boolean {
    const dot = source.indexOf('.');
    if (dot <= 0 || dot === source.length - 1)
      throw new SourceError(
        'CDC_CONFIG',
        `the snapshot watermark table "${source}" must be written as database.table (e.g. tidemark.watermarks)`,
      );
    if (captured.has(source))
      throw new SourceError(
        'CDC_CONFIG',
        `the snapshot watermark table ${source} is a captured table; give the watermarks a table of their own`,
      );
    const next = { database: source.slice(0, dot), table: source.slice(dot + 1) };
    const w = this.table;
    if (w && w.database === next.database && w.table === next.table) return false;
    this.table = next;
    return true;
  }

  /** Registers watermark `id`, at binlog coordinates `at` or, without, by the watermark table. */
  expect(id: string, at: SourcePosition | undefined): void {
    if (at !== undefined) {
      const p = parseBinlogPosition(at);
      this.atMarks.set(id, { file: binlogFileIndex(p.file), pos: p.pos });
    } else {
      if (!this.table)
        throw new SourceError(
          'CDC_SNAPSHOT_NEEDS_WATERMARK_TABLE',
          `watermark ${id} has no binlog position and the reader watches no watermark table (setWatermarkTable)`,
        );
      this.tableMarks.add(id);
    }
  }

  /** Whether `database.table` is the watermark table. */
  isTable(database: string, table: string): boolean {
    const w = this.table;
    return w !== undefined && database === w.database && table === w.table;
  }

  /** Rows of the watermark table: an inserted registered id is a watermark of the open group. */
  onRows(ev: WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent): void {
    if (ev.getTypeName() !== 'WriteRows' || this.tableMarks.size === 0) return;
    let rows: unknown[] = ev.rows;
    const raw = rows.length === 1 ? rows[0] : undefined;
    if (raw instanceof RawRows) rows = raw.reparse();
    for (const row of rows as Record<string, unknown>[]) {
      const v = row.id;
      const id = Buffer.isBuffer(v) ? v.toString('utf8') : String(v);
      if (this.tableMarks.delete(id)) this.txnMarks.push(id);
    }
  }

  /** An event group opened. */
  groupOpened(): void {
    this.txnMarks = [];
  }

  /** The open group ended; its watermark-table rows are watermarks at its `__pos` prefix. */
  groupClosed(prefix: string): void {
    for (const id of this.txnMarks) this.readyMarks.push({ kind: 'watermark', id, rowsPos: prefix });
    this.txnMarks = [];
  }

  /**
   * Appends to `out` the watermarks due now that every event before (`file` index, `pos`) has
   * been decoded, in coordinate epoch `epoch`; the caller calls it between groups only.
   */
  release(file: number, pos: number, epoch: number, out: CdcEvent[]): void {
    if (this.readyMarks.length > 0) out.push(...this.readyMarks.splice(0));
    if (this.atMarks.size === 0) return;
    for (const [id, m] of this.atMarks) {
      if (m.file > file || (m.file === file && m.pos > pos)) continue;
      this.atMarks.delete(id);
      out.push({ kind: 'watermark', id, rowsPos: groupPrefix(epoch, m.file, BigInt(m.pos) - 1n) });
    }
  }
}
