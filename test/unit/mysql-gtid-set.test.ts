/**
 * MySQL GTID sets (shared/drivers/mysql/cdc/gtid-set.ts): the text form MySQL prints for
 * `@@GLOBAL.gtid_executed` (uuids lowercase, sorted; intervals `a-b` or `a`, ':' separated, sets
 * ',' separated), adding GTIDs in any order, and membership.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  addGtid,
  addInterval,
  containsGtid,
  emptyGtidSet,
  parseGtidSet,
  renderGtidSet,
} from '../../shared/drivers/mysql/cdc/gtid-set.js';

const A = '3e11fa47-71ca-11e1-9e33-c80aa9429562';
const B = '2c256447-3f0d-431b-9a25-bddf1f1f6ef6';

describe('mysql gtid sets', () => {
  it('renders as MySQL does: sorted lowercase uuids, coalesced intervals', () => {
    const s = emptyGtidSet();
    for (const n of [9, 1, 2, 3, 7, 8, 5, 4]) addGtid(s, `${A.toUpperCase()}:${n}`);
    addGtid(s, B, 3);
    addGtid(s, B, 1);
    addGtid(s, B, 2);
    expect(renderGtidSet(s)).toBe(`${B}:1-3,${A}:1-5:7-9`);
    expect(renderGtidSet(emptyGtidSet())).toBe('');
  });

  it('parses @@gtid_executed text (newlines after commas, upper case, overlaps, unordered)', () => {
    const s = parseGtidSet(`${A.toUpperCase()}:7-9:1-5,\n${B}:1-3,\n${A}:4-6`);
    expect(renderGtidSet(s)).toBe(`${B}:1-3,${A}:1-9`);
    expect(renderGtidSet(parseGtidSet(''))).toBe('');
    expect(renderGtidSet(parseGtidSet(`${A}:1:3:2`))).toBe(`${A}:1-3`);
  });

  it('keeps tags (MySQL 8.3+) after the untagged intervals, sorted', () => {
    const s = parseGtidSet(`${A}:tag_b:2-3:tag_a:1,${A}:1-5`);
    expect(renderGtidSet(s)).toBe(`${A}:1-5:tag_a:1:tag_b:2-3`);
    addGtid(s, `${A}:tag_a:2`);
    expect(renderGtidSet(s)).toBe(`${A}:1-5:tag_a:1-2:tag_b:2-3`);
    expect(containsGtid(s, `${A}:tag_b:3`)).toBe(true);
    expect(containsGtid(s, `${A}:tag_b:1`)).toBe(false);
  });

  it('handles GNOs up to 2^63-1 exactly', () => {
    const max = (1n << 63n) - 1n;
    const s = addInterval(emptyGtidSet(), A, max - 1n, max);
    expect(renderGtidSet(s)).toBe(`${A}:${max - 1n}-${max}`);
    expect(containsGtid(s, `${A}:${max}`)).toBe(true);
    expect(() => addGtid(emptyGtidSet(), A, max + 1n)).toThrow(/out of range|invalid/);
  });

  it('rejects malformed text', () => {
    for (const bad of [`${A}`, `${A}:0`, `${A}:5-3`, `${A}:1-2-3`, 'nope:1', `${A}:x-1`, `${A}:tag_a`])
      expect(() => parseGtidSet(bad), bad).toThrow();
  });

  // Properties ----------------------------------------------------------------------------------
  const uuid = fc.constantFrom(
    A,
    B,
    '00000000-0000-0000-0000-000000000001',
    'ffffffff-ffff-ffff-ffff-ffffffffffff',
  );
  const gtids = fc.array(fc.tuple(uuid, fc.integer({ min: 1, max: 60 })), { maxLength: 80 });

  it('adding the same GTIDs in any order gives the same set', () => {
    fc.assert(
      fc.property(
        gtids.chain((g) =>
          fc.tuple(fc.constant(g), fc.shuffledSubarray(g, { minLength: g.length, maxLength: g.length })),
        ),
        ([g, shuffled]) => {
          const a = emptyGtidSet();
          const b = emptyGtidSet();
          for (const [u, n] of g) addGtid(a, `${u}:${n}`);
          for (const [u, n] of shuffled) addGtid(b, u, n);
          expect(renderGtidSet(b)).toBe(renderGtidSet(a));
        },
      ),
    );
  });

  it('contains exactly the added GTIDs, and intervals are disjoint, sorted and non-adjacent', () => {
    fc.assert(
      fc.property(gtids, (g) => {
        const s = emptyGtidSet();
        for (const [u, n] of g) addGtid(s, u, n);
        const added = new Set(g.map(([u, n]) => `${u}:${n}`));
        for (const u of [A, B])
          for (let n = 1; n <= 61; n++) expect(containsGtid(s, `${u}:${n}`)).toBe(added.has(`${u}:${n}`));
        for (const tags of s.values())
          for (const list of tags.values())
            for (let i = 1; i < list.length; i++) expect(list[i]![0] > list[i - 1]![1] + 1n).toBe(true);
      }),
    );
  });

  it('render/parse round-trips', () => {
    fc.assert(
      fc.property(gtids, (g) => {
        const s = emptyGtidSet();
        for (const [u, n] of g) addGtid(s, u, n);
        const text = renderGtidSet(s);
        expect(renderGtidSet(parseGtidSet(text))).toBe(text);
        expect(parseGtidSet(text)).toEqual(s);
      }),
    );
  });
});
