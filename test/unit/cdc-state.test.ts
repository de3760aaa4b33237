/**
 * A CDC source's state item stays under the store's size limit (shared/state/cursor-rules.ts
 * MAX_STATE_VALUE_BYTES) with 500 tables of the longest names, MySQL-sized positions and full
 * stats, and the event log stays bounded however many events the stream carries.
 */
import { describe, expect, it } from 'vitest';
import {
  type CdcState,
  type CdcTableState,
  EVENT_DETAIL,
  EVENT_LOG,
  parseCdcState,
  withEvent,
} from '../../shared/engine/cdc/state.js';
import { mysqlPosition } from '../../shared/position/position.js';
import { MAX_STATE_VALUE_BYTES, serializeValue } from '../../shared/state/cursor-rules.js';

describe('CDC state size', () => {
  it('500 tables with 64+64-character names, MySQL positions and snapshot entries fit under the limit', () => {
    const longKey = `k1.${'f'.repeat(256)}`;
    const tables: Record<string, CdcTableState> = {};
    for (let i = 0; i < 500; i++) {
      const name = `${'s'.repeat(60)}${String(i).padStart(4, '0')}.${'t'.repeat(60)}${String(i).padStart(4, '0')}`;
      tables[name] = {
        next: mysqlPosition(0xffffffff, 0xffffffff, 0xffffffffffffn, 0xfffffffe),
        schemaHash: 'ffffffffffffffff',
        schemaVersion: 999_999,
        rows: Number.MAX_SAFE_INTEGER,
        objects: 999_999_999,
        lastFlushAt: '2026-12-01T14:21:03.123Z',
        lagMs: 999_999_999,
        stopped: { at: '2026-12-01T14:21:03.123Z', reason: 'r'.repeat(100) },
        // Every table snapshotted; a few still at it, with long text keys (a 128-byte key is
        // 256 hex digits of token) in their pending ranges and rest (decision 0013: the
        // orchestrator works table by table, at most `connections` ranges in flight).
        snapshot:
          i < 4
            ? {
                state: 'in_progress',
                pending: Array.from({ length: 4 }, () => ({ after: longKey, upTo: longKey })),
                rest: { after: longKey },
                rows: Number.MAX_SAFE_INTEGER,
                chunks: 999_999_999,
                retries: 999_999,
                startedAt: '2026-12-01T14:21:03.123Z',
              }
            : {
                state: 'complete',
                rows: Number.MAX_SAFE_INTEGER,
                chunks: 999_999_999,
                startedAt: '2026-12-01T14:21:03.123Z',
                completedAt: '2026-12-01T14:21:03.123Z',
              },
      };
    }
    let state: CdcState = {
      // A MySQL GTID set of several servers plus file:pos, server identity and epoch.
      position: {
        scheme: 'mysql',
        value: JSON.stringify({
          gtid: Array.from(
            { length: 8 },
            (_, k) => `3E11FA47-71CA-11E1-9E33-C80AA9429${String(k).padStart(3, '0')}:1-999999999`,
          ).join(','),
          file: 'mysql-bin-changelog.999999',
          pos: 18446744073709,
          server: '3E11FA47-71CA-11E1-9E33-C80AA9429562',
          epoch: 4294967295,
        }),
        display: 'mysql-bin-changelog.999999:18446744073709',
      },
      tables,
      lastCommitAt: '2026-12-01T14:21:03.123Z',
    };
    for (let i = 0; i < 1000; i++)
      state = withEvent(state, {
        at: '2026-12-01T14:21:03.123Z',
        kind: 'truncate',
        table: Object.keys(tables)[i % 500]!,
        detail: 'x'.repeat(5000),
      });
    expect(state.events).toHaveLength(EVENT_LOG);
    expect(state.events!.every((e) => e.detail.length === EVENT_DETAIL)).toBe(true);
    const text = serializeValue('cdc#p#s', state as unknown as Record<string, unknown>);
    const bytes = Buffer.byteLength(text);
    console.log(`500-table CDC state: ${bytes} bytes of ${MAX_STATE_VALUE_BYTES}`);
    expect(bytes).toBeLessThan(MAX_STATE_VALUE_BYTES);
    expect(parseCdcState(JSON.parse(text))).toEqual(state);
  });

  it('refuses a corrupt state instead of starting over', () => {
    expect(() => parseCdcState({ tables: 'no' })).toThrow(/not valid/);
    expect(() => parseCdcState({ tables: {}, position: { scheme: 1 } })).toThrow(/not valid/);
    expect(parseCdcState(undefined)).toEqual({ tables: {} });
  });
});
