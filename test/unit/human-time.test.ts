import { describe, expect, it } from 'vitest';
import { clockText, leaseText, relativeText, spanText } from '../../functions/cli/human-time.js';

const NOW = Date.parse('2026-12-01T11:28:05Z');

describe('human times on the command line', () => {
  it('clock times in UTC, with the date only when it is another day', () => {
    expect(clockText(Date.parse('2026-12-01T11:42:05Z'), NOW)).toBe('11:42:05 UTC');
    expect(clockText(Date.parse('2026-12-02T00:00:01Z'), NOW)).toBe('2026-12-02 00:00:01 UTC');
  });

  it('spans and relative times', () => {
    expect(spanText(45_400)).toBe('45 s');
    expect(spanText(14 * 60_000 + 20_000)).toBe('14 min');
    expect(spanText(125 * 60_000)).toBe('2 h 5 min');
    expect(spanText((3 * 24 + 4) * 3_600_000)).toBe('3 d 4 h');
    expect(relativeText(NOW + 14 * 60_000, NOW)).toBe('in 14 min');
    expect(relativeText(NOW - 3 * 60_000, NOW)).toBe('3 min ago');
  });

  it('a lease: free, expired, or held until a human time', () => {
    const lease = { owner: 'box:4242:977:0a1b2c3d', expiresAt: Date.parse('2026-12-01T11:42:05Z') };
    expect(leaseText(undefined, NOW, 'unknown')).toBe('free');
    expect(leaseText(lease, NOW, 'unknown')).toBe('held by box:4242 until 11:42:05 UTC (in 14 min)');
    expect(leaseText(lease, NOW, 'dead')).toMatch(/^held by box:4242 until .*; that process is gone/);
    expect(leaseText(lease, lease.expiresAt + 60_000, 'unknown')).toBe(
      'free (the lease of box:4242 expired 1 min ago)',
    );
  });
});
