/**
 * The one zongji internal binlog-rows.ts overrides (RowsEvent._fetchOneRow, @vlasky/zongji 0.9.0):
 * installing checks the version and the shape of what it replaces, so an upgrade that changes
 * them fails here (and at the reader's start) instead of decoding rows wrongly.
 */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import {
  compile,
  installRawRowImages,
  nullBitmapSize,
  ZONGJI_VERSION,
} from '../../shared/drivers/mysql/wire/binlog-rows.js';

const main = import.meta.resolve('@vlasky/zongji');

describe('mysql cdc row images: the zongji override', () => {
  it('is pinned to the installed zongji version', () => {
    const pkg = createRequire(main)('./package.json') as { version: string };
    expect(pkg.version).toBe(ZONGJI_VERSION);
  });

  it('replaces _fetchOneRow on RowsEvent and UpdateRows, once, and keeps zongji parsing without the hook', async () => {
    const rows = await import(new URL('./lib/rows_event.js', main).href);
    const base = Object.getPrototypeOf(rows.WriteRows.prototype);
    const before = base._fetchOneRow;
    expect(String(before)).toMatch(
      /readRow\(parser, tablemap, this\.columns_present_bitmap, this\._zongji\)/,
    );
    expect(String(rows.UpdateRows.prototype._fetchOneRow)).toMatch(/before: readRow\(parser/);
    await installRawRowImages();
    await installRawRowImages();
    expect(base._fetchOneRow.raw).toBe(true);
    expect(rows.UpdateRows.prototype._fetchOneRow.raw).toBe(true);
    expect(rows.DeleteRows.prototype._fetchOneRow).toBe(base._fetchOneRow);
    // Without the hook the override calls zongji's own method (readRow over the parser).
    const calls: unknown[] = [];
    const self = {
      tableMap: { 7: { columns: [], columnSchemas: [] } },
      tableId: 7,
      rows: [],
      columns_present_bitmap: Buffer.alloc(0),
      _zongji: {},
    };
    const parser = {
      _buffer: Buffer.alloc(0),
      _offset: 0,
      _packetEnd: 0,
      parseBuffer: (n: number) => {
        calls.push(n);
        return Buffer.alloc(n);
      },
    };
    expect(base._fetchOneRow.call(self, parser)).toEqual({});
    expect(calls).toEqual([0]);
  });

  it('counts null-bitmap bytes over the present columns', () => {
    expect(nullBitmapSize(Buffer.from([0xff]))).toBe(1);
    expect(nullBitmapSize(Buffer.from([0xff, 0x01]))).toBe(2);
    expect(nullBitmapSize(Buffer.from([0x0f, 0x00]))).toBe(1);
  });

  it('leaves a table with a type it does not decode to zongji', () => {
    const entry = {
      parentSchema: 'd',
      tableName: 't',
      columns: [{ name: 'g', type: 255, charset: null, metadata: { length_size: 4 } }],
      columnSchemas: [{ COLUMN_NAME: 'g', COLUMN_TYPE: 'geometry' }],
    };
    expect(typeof compile(entry, [], [], [])).toBe('string');
  });
});
