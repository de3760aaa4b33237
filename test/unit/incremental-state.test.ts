import { describe, expect, it } from 'vitest';
import { TidemarkError } from '../../shared/contracts/errors.js';
import { parseIncrementalState, recordError } from '../../shared/engine/incremental/state.js';

describe('incremental state value', () => {
  it('reads a value stored before the 2026-12-01 shape: lastObjects becomes objects', () => {
    const old = {
      cursor: 'k2.abc',
      cursorText: 'updated_at=2024-01-01 00:00:00+00, id=7',
      cursorColumn: 'updated_at',
      seq: 3,
      rowsTotal: 2500,
      lastCommitAt: '2026-11-30T10:00:00.000Z',
      lastObjects: ['file:///lake/public.orders/p.s.i000000000002.parquet'],
    };
    expect(parseIncrementalState(old, 'updated_at')).toEqual({
      cursor: 'k2.abc',
      cursorText: 'updated_at=2024-01-01 00:00:00+00, id=7',
      cursorColumn: 'updated_at',
      seq: 3,
      rowsTotal: 2500,
      lastCommitAt: '2026-11-30T10:00:00.000Z',
      objects: ['file:///lake/public.orders/p.s.i000000000002.parquet'],
    });
  });

  it('keeps a well-formed lastRun and lastError, drops malformed display fields, refuses a corrupt cursor', () => {
    const lastRun = {
      startedAt: '2026-12-01T11:00:00.000Z',
      finishedAt: '2026-12-01T11:00:02.000Z',
      owner: 'box:1:2:0a1b2c3d',
      result: 'error',
      stopped: 'error',
      rows: 10,
      pages: 1,
      bytes: 99,
      durationMs: 2000,
      error: { code: 'SOURCE_PRIVILEGE', message: 'permission denied' },
    };
    const lastError = { code: 'SOURCE_PRIVILEGE', message: 'permission denied', at: lastRun.finishedAt };
    const base = { cursor: '', cursorColumn: 'c', seq: 0 };
    expect(parseIncrementalState({ ...base, lastRun, lastError, newestCursorMs: 5 }, 'c')).toMatchObject({
      lastRun,
      lastError,
      newestCursorMs: 5,
    });
    const odd = parseIncrementalState(
      { ...base, lastRun: { result: 'maybe' }, lastError: 'x', objects: [1] },
      'c',
    );
    expect(odd).toEqual({ ...base, rowsTotal: 0 });
    expect(() => parseIncrementalState({ cursor: 1, cursorColumn: 'c', seq: 0 }, 'c')).toThrow(/not valid/);
  });

  it('records an error as its code and the first line of its message, bounded', () => {
    expect(recordError(new TidemarkError('PAGE_TIMEOUT', 'slow\nsecond line'))).toEqual({
      code: 'PAGE_TIMEOUT',
      message: 'slow',
    });
    expect(recordError(new Error('x'.repeat(5000)))).toEqual({
      code: 'UNEXPECTED',
      message: 'x'.repeat(1000),
    });
  });
});
