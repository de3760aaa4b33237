/**
 * The MySQL reader's snapshot watermarks (`expectWatermark` with a binlog position), without a
 * server: binlog events are fed to the reader's queue as zongji would hand them over, and the
 * reader's events are read back in order. Reported between event groups only: at the end of
 * the group that reaches the position, at the start of a group at or past it, at a rotation,
 * after a standalone event, and at once when already passed; rowsPos = m + epoch + file + pos - 1.
 */
import { describe, expect, it } from 'vitest';
import type { CdcEvent } from '../../shared/contracts/cdc.js';
import { binlogAt } from '../../shared/drivers/mysql/cdc/position.js';
import { MysqlCdcReader } from '../../shared/drivers/mysql/cdc/reader.js';
import { mysqlPosition } from '../../shared/position/position.js';

interface FakeEvent {
  getTypeName(): string;
  nextPosition: number;
  size: number;
  timestamp: number;
  [k: string]: unknown;
}

function ev(type: string, start: number, end: number, extra: Record<string, unknown> = {}): FakeEvent {
  return {
    getTypeName: () => type,
    nextPosition: end,
    size: end - start,
    timestamp: 1_700_000_000,
    ...extra,
  };
}

/** A reader positioned at binlog.000003:100 (as `start` would leave it), fed by hand. */
function reader(): { r: MysqlCdcReader; push: (e: FakeEvent) => void } {
  const r = new MysqlCdcReader({ url: 'mysql://u@h/x', heartbeatMs: 3_600_000 }, [], new Map(), {
    heartbeatMs: 3_600_000,
    serverId: 99,
  });
  const s = r as unknown as Record<string, unknown>;
  s.started = true;
  s.file = 'binlog.000003';
  s.fileIndex = 3;
  s.reachedFile = 3;
  s.reachedPos = 100;
  const queue = s.queue as { push(e: unknown): void };
  return { r, push: (e) => queue.push(e) };
}

/** The watermarks the reader reports from what it was fed (progress events left out). */
async function drain(r: MysqlCdcReader): Promise<CdcEvent[]> {
  const out: CdcEvent[] = [];
  for (;;) {
    const e = await r.next(20);
    if (!e) return out;
    if (e.kind !== 'progress') out.push(e);
  }
}

const gtid = (start: number, end: number, seq: number) =>
  ev('MariadbGtid', start, end, { domainId: 0, gtid: `0-1-${seq}` });
const prefix = (file: number, pos: number) => mysqlPosition(0, file, BigInt(pos) - 1n, 0).slice(0, 33);

describe('mysql reader: watermarks at a binlog position', () => {
  it('reports one at the end of the group that reaches it, not before', async () => {
    const { r, push } = reader();
    r.expectWatermark('a', binlogAt('binlog.000003', 500));
    push(gtid(100, 150, 1));
    push(ev('Xid', 370, 400));
    expect(await drain(r)).toEqual([]);
    push(gtid(400, 450, 2));
    expect(await drain(r)).toEqual([]);
    push(ev('Xid', 470, 500));
    expect(await drain(r)).toEqual([{ kind: 'watermark', id: 'a', rowsPos: prefix(3, 500) }]);
  });

  it('reports one at the start of a group past it (events in between were filtered)', async () => {
    const { r, push } = reader();
    r.expectWatermark('b', binlogAt('binlog.000003', 700));
    push(gtid(800, 850, 1));
    const got = await drain(r);
    expect(got[0]).toEqual({ kind: 'watermark', id: 'b', rowsPos: prefix(3, 700) });
  });

  it('reports one already passed at once, and one in an earlier file at a rotation', async () => {
    const { r, push } = reader();
    r.expectWatermark('c', binlogAt('binlog.000003', 100));
    expect(await r.next(0)).toEqual({ kind: 'watermark', id: 'c', rowsPos: prefix(3, 100) });
    r.expectWatermark('d', binlogAt('binlog.000003', 90_000));
    r.expectWatermark('e', binlogAt('binlog.000004', 385));
    expect(await drain(r)).toEqual([]);
    push(ev('Rotate', 200, 0, { binlogName: 'binlog.000004', position: 4 }));
    expect(await drain(r)).toEqual([{ kind: 'watermark', id: 'd', rowsPos: prefix(3, 90_000) }]);
    // The new file's header events (no group follows): enough to reach 385.
    push(ev('Format', 4, 256));
    push(ev('MariadbGtidList', 256, 300));
    push(ev('BinlogCheckpoint', 300, 385));
    expect(await drain(r)).toEqual([{ kind: 'watermark', id: 'e', rowsPos: prefix(4, 385) }]);
  });

  it('is woken by a registration while it waits', async () => {
    const { r } = reader();
    const waiting = r.next(5_000);
    r.expectWatermark('w', binlogAt('binlog.000003', 50));
    expect(await waiting).toEqual({ kind: 'watermark', id: 'w', rowsPos: prefix(3, 50) });
  });

  it('refuses a watermark without position when no watermark table is watched', () => {
    const { r } = reader();
    expect(() => r.expectWatermark('x')).toThrow(/watermark table/);
  });

  it('watermark table: a registered id inserted by a group is a watermark at its prefix, after the group', async () => {
    const { r, push } = reader();
    r.setWatermarkTable('db.wm');
    r.expectWatermark('lo');
    const rows = (ids: string[]) => ({
      tableId: 5,
      tableMap: { 5: { parentSchema: 'db', tableName: 'wm' } },
      rows: ids.map((id) => ({ id, at: 'x' })),
    });
    // Another window's id and an unregistered one: nothing.
    push(gtid(100, 150, 1));
    push(ev('WriteRows', 0, 0, rows(['other'])));
    expect(await drain(r)).toEqual([]);
    push(ev('Xid', 170, 200));
    expect(await drain(r)).toEqual([]);
    push(gtid(200, 250, 2));
    push(ev('WriteRows', 0, 0, rows(['lo'])));
    // Not inside the group: only once it has ended.
    expect(await drain(r)).toEqual([]);
    push(ev('Xid', 270, 300));
    expect(await drain(r)).toEqual([
      { kind: 'watermark', id: 'lo', rowsPos: mysqlPosition(0, 3, 200n, 0).slice(0, 33) },
    ]);
  });
});
