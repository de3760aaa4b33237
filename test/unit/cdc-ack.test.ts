/**
 * The durable low-water mark (shared/engine/cdc/ack.ts) against a direct model over random
 * streams of begin/rows/commit/progress and flush cuts (fast-check): the resume point is always
 * the newest transaction that is durable together with every one before it, never one with a
 * row not yet durable, and `resumeIf` predicts exactly what `markDurable` then gives.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { SourcePosition } from '../../shared/contracts/cdc.js';
import { AckTracker } from '../../shared/engine/cdc/ack.js';

const TABLES = ['a', 'b', 'c'];
const pos = (n: number): SourcePosition => ({ scheme: 'test', value: String(n) });

type Step =
  | { kind: 'txn'; rows: [number, number][] }
  | { kind: 'progress' }
  | { kind: 'flush'; tables: number[] }
  /** A transaction left open while a flush cuts into it, then committed. */
  | { kind: 'openFlush'; rows: [number, number][]; tables: number[] };

const rowsArb = fc.array(fc.tuple(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 1, max: 5 })), {
  maxLength: 4,
});
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  rowsArb.map((rows) => ({ kind: 'txn' as const, rows })),
  fc.constant({ kind: 'progress' as const }),
  fc
    .uniqueArray(fc.integer({ min: 0, max: 2 }), { maxLength: 3 })
    .map((tables) => ({ kind: 'flush' as const, tables })),
  fc
    .tuple(rowsArb, fc.uniqueArray(fc.integer({ min: 0, max: 2 }), { maxLength: 3 }))
    .map(([rows, tables]) => ({ kind: 'openFlush' as const, rows, tables })),
);

describe('AckTracker', () => {
  it('resumes at the newest point whose every earlier change is durable', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 40 }), (steps) => {
        const t = new AckTracker(pos(0));
        // The model: each resume point with the appended counts per table it needs durable.
        const points: { n: number; needs: Map<string, number> }[] = [];
        const appended = new Map<string, number>();
        const durable = new Map<string, number>();
        let n = 0;
        const expected = (): number => {
          let at = 0;
          for (const p of points) {
            if ([...p.needs].some(([tb, c]) => (durable.get(tb) ?? 0) < c)) break;
            at = p.n;
          }
          return at;
        };
        const flush = (tables: number[]) => {
          const marks = new Map(tables.map((i) => [TABLES[i]!, appended.get(TABLES[i]!) ?? 0]));
          const predicted = t.resumeIf(marks);
          t.markDurable(marks);
          for (const [tb, c] of marks) durable.set(tb, Math.max(durable.get(tb) ?? 0, c));
          expect(t.position).toEqual(predicted);
        };
        const append = (rows: [number, number][], needs: Map<string, number>) => {
          for (const [i, c] of rows) {
            const tb = TABLES[i]!;
            t.rows(tb, c);
            appended.set(tb, (appended.get(tb) ?? 0) + c);
            needs.set(tb, appended.get(tb)!);
          }
        };
        for (const s of steps) {
          if (s.kind === 'txn' || s.kind === 'openFlush') {
            const needs = new Map<string, number>();
            t.begin();
            append(s.rows, needs);
            if (s.kind === 'openFlush') {
              flush(s.tables);
              // The open transaction is not a resume point however durable its rows are.
              expect(t.position).toEqual(pos(expected()));
            }
            n += 1;
            t.commit(pos(n));
            points.push({ n, needs });
          } else if (s.kind === 'progress') {
            n += 1;
            t.progress(pos(n));
            points.push({ n, needs: new Map() });
          } else {
            flush(s.tables);
          }
          expect(t.position).toEqual(pos(expected()));
        }
        // Flushing everything makes the newest point the resume point.
        flush([0, 1, 2]);
        expect(t.position).toEqual(pos(n));
      }),
      { numRuns: 500 },
    );
  });

  it('ignores a keepalive inside a transaction and refuses rows outside one', () => {
    const t = new AckTracker(undefined);
    t.begin();
    t.rows('a', 1);
    t.progress(pos(5));
    t.commit(pos(6));
    expect(t.position).toBeUndefined();
    t.markDurable(new Map([['a', 1]]));
    expect(t.position).toEqual(pos(6));
    expect(() => t.rows('a', 1)).toThrow(/outside a transaction/);
    expect(() => t.markDurable(new Map([['a', 2]]))).toThrow(/more rows durable than appended/);
  });
});
