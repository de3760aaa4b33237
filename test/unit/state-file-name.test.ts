/**
 * The file cursor store's key -> file name mapping: two keys must never share a file (the store
 * would mix two tables' cursors), and every name must be valid on common file systems.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { stateFileName } from '../../shared/state/file-cursor-store.js';

/** Lower-case letters, digits, `_-~`, `%` escapes (upper-case hex) and inner dots. */
const SAFE = /^(?:[a-z0-9_~-]|%[0-9A-F]{2}|%(?=\.json$))(?:[a-z0-9_.~-]|%[0-9A-F]{2})*\.json$/;

/** Keys shaped like ours plus arbitrary Unicode, case variants and long ones. */
const keyArb = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: fc.constantFrom('a', 'A', '.', '#', '%', '~', '/', '-', '_', '0'), maxLength: 30 }),
  fc.string({ unit: fc.constantFrom('x', 'X', '#', '.'), minLength: 150, maxLength: 400 }),
  fc
    .tuple(fc.stringMatching(/^[A-Za-z0-9_]{1,20}$/), fc.stringMatching(/^[A-Za-z0-9_$.]{1,60}$/))
    .map(([p, t]) => `inc#${p}#${t}`),
);

describe('stateFileName', () => {
  it('maps distinct keys to distinct names that differ even ignoring case', () => {
    fc.assert(
      fc.property(keyArb, keyArb, (a, b) => {
        fc.pre(a !== b);
        expect(stateFileName(a).toLowerCase()).not.toBe(stateFileName(b).toLowerCase());
      }),
      { numRuns: 5_000 },
    );
  });

  it('gives names of safe characters, never hidden or dot-only, at most 255 bytes', () => {
    fc.assert(
      fc.property(keyArb, (key) => {
        const name = stateFileName(key);
        expect(name).toMatch(SAFE);
        expect(Buffer.byteLength(name)).toBeLessThanOrEqual(255);
      }),
      { numRuns: 5_000 },
    );
  });

  it('keeps ordinary keys readable', () => {
    expect(stateFileName('inc#shop#public.orders')).toBe('inc%23shop%23public.orders.json');
    expect(stateFileName('inc#shop#public.Orders')).toBe('inc%23shop%23public.%4Frders.json');
    expect(stateFileName('..')).toBe('%2E..json');
    expect(stateFileName('')).toBe('%.json');
  });
});
