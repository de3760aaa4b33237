import { describe, expect, it } from 'vitest';
import { createLogger } from '../../shared/observability/log.js';
import { Progress } from '../../shared/observability/progress.js';

describe('Progress', () => {
  it('logs rows, rate and an ETA from the estimated total when not on a TTY', () => {
    const lines: string[] = [];
    const logger = createLogger({ json: true, write: (l) => lines.push(l) });
    let now = 1_000_000;
    const p = new Progress({
      label: 'public.t',
      logger,
      tty: false,
      intervalMs: 1000,
      total: 10_000,
      now: () => now,
    });
    now += 2000;
    p.add(2000, 50_000); // 1,000 rows/s: 8,000 left
    const first = JSON.parse(lines.at(-1)!) as Record<string, number>;
    expect(first).toMatchObject({
      msg: 'progress',
      rows: 2000,
      pages: 1,
      rowsPerSecond: 1000,
      totalEstimate: 10_000,
      etaSeconds: 8,
    });
    now += 500;
    p.add(500, 1);
    expect(lines).toHaveLength(1); // within the interval: no new line
    now += 5500;
    p.add(6000, 1);
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ rows: 8500, etaSeconds: 2 });
  });

  it('has no ETA without a total', () => {
    const p = new Progress({
      label: 't',
      logger: createLogger({ json: true, write: () => {} }),
      tty: false,
      now: () => 5,
    });
    expect(p.etaSeconds()).toBeUndefined();
  });
});
