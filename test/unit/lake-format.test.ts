/**
 * The lake format rules (shared/contracts/lake-format.ts): a table without state takes the spec's
 * format; a table with state keeps the one it records (none recorded: 1) and says so when the
 * spec differs; a recorded format this build does not know is refused, not overwritten.
 */
import { describe, expect, it } from 'vitest';
import { TidemarkError } from '../../shared/contracts/errors.js';
import { parseRecordedFormat, resolveLakeFormat } from '../../shared/contracts/lake-format.js';
import { parseIncrementalState } from '../../shared/engine/incremental/state.js';

describe('lake format', () => {
  it('a new table takes the spec format, silently', () => {
    expect(resolveLakeFormat('t', 2, false, undefined)).toEqual({ format: 2 });
    expect(resolveLakeFormat('t', 1, false, undefined)).toEqual({ format: 1 });
  });

  it('a table with state keeps its recorded format, with a note when the spec differs', () => {
    expect(resolveLakeFormat('t', 2, true, 2)).toEqual({ format: 2 });
    const kept = resolveLakeFormat('s.t', 1, true, 2);
    expect(kept.format).toBe(2);
    expect(kept.note).toMatch(
      /^s\.t: keeps lake format 2; lake\.format: 1 applies to tables synced for the first time/,
    );
    expect(kept.note).toContain('tidemark reset');
    expect(resolveLakeFormat('t', 2, true, 1).format).toBe(1);
  });

  it('a table with state and no recorded format is format 1', () => {
    expect(resolveLakeFormat('t', 1, true, undefined)).toEqual({ format: 1 });
    const legacy = resolveLakeFormat('t', 2, true, undefined);
    expect(legacy.format).toBe(1);
    expect(legacy.note).toContain('written before lake formats were recorded');
  });

  it('refuses a recorded format it does not know', () => {
    expect(parseRecordedFormat('x', undefined)).toBeUndefined();
    expect(parseRecordedFormat('x', 2)).toBe(2);
    for (const bad of [3, '2', null]) {
      expect(() => parseRecordedFormat('x', bad)).toThrow(TidemarkError);
      expect(() => parseRecordedFormat('x', bad)).toThrow(
        /records lake format .* which this version of tidemark does not write/,
      );
    }
    const base = { cursor: '', cursorColumn: 'u', seq: 3 };
    expect(parseIncrementalState({ ...base, format: 2 }, 'u').format).toBe(2);
    expect(parseIncrementalState(base, 'u').format).toBeUndefined();
    expect(() => parseIncrementalState({ ...base, format: 9 }, 'u')).toThrow(/STATE_CORRUPT|lake format 9/);
  });
});
