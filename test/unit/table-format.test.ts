/**
 * The table format a table writes with (shared/contracts/table-format.ts): a new table takes the
 * spec's setting (unset: Iceberg), a table with state keeps what it records (nothing recorded:
 * plain), and only an explicit setting that contradicts the recorded format is refused.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  configuredTableFormat,
  parseRecordedTableFormat,
  resolveTableFormat,
  TABLE_FORMATS,
  type TableFormat,
} from '../../shared/contracts/table-format.js';

const format = fc.constantFrom(...TABLE_FORMATS);

describe('resolveTableFormat', () => {
  it('a new table: the setting, Iceberg when unset', () => {
    expect(resolveTableFormat('t', configuredTableFormat(undefined), false, undefined)).toBe('iceberg');
    expect(resolveTableFormat('t', configuredTableFormat('plain'), false, undefined)).toBe('plain');
  });

  it('a table written before table formats stays plain while the setting is unset', () => {
    expect(resolveTableFormat('t', configuredTableFormat(undefined), true, undefined)).toBe('plain');
  });

  it('refuses an explicit setting that contradicts the recorded format, naming the way out', () => {
    expect(() =>
      resolveTableFormat('public.orders', configuredTableFormat('iceberg'), true, undefined),
    ).toThrow(
      /TABLE_FORMAT_MISMATCH|lake.tableFormat is iceberg, but the table was written as plain .*reset --table public.orders --delete-objects/,
    );
    try {
      resolveTableFormat('t', configuredTableFormat('plain'), true, 'iceberg');
      expect.unreachable();
    } catch (e) {
      expect((e as { code?: string }).code).toBe('TABLE_FORMAT_MISMATCH');
    }
  });

  it('with state: the recorded format whatever an unset setting; a matching setting passes', () => {
    fc.assert(
      fc.property(format, fc.option(format, { nil: undefined }), (recorded, setting) => {
        const configured = configuredTableFormat(setting);
        if (setting !== undefined && setting !== recorded) {
          expect(() => resolveTableFormat('t', configured, true, recorded)).toThrow();
          return;
        }
        expect(resolveTableFormat('t', configured, true, recorded)).toBe(recorded);
      }),
    );
  });

  it('a recorded value this build does not know is a corrupt state, never a fresh start', () => {
    expect(parseRecordedTableFormat('x', undefined)).toBeUndefined();
    for (const f of TABLE_FORMATS) expect(parseRecordedTableFormat('x', f)).toBe(f as TableFormat);
    expect(() => parseRecordedTableFormat('x', 'delta')).toThrow(/does not write/);
  });
});
