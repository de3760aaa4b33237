/**
 * Object layout: names are deterministic, ASCII-safe, reversible and injective; a listing of
 * plain names sorts in position order; a shortened (hashed) name is ordered against a position
 * from its visible prefix whenever that decides it, and otherwise says "ask the sidecar" instead
 * of guessing (recovery deletes by this comparison, so a wrong answer would delete committed data).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SinkError } from '../../shared/contracts/errors.js';
import {
  compareNameToPosition,
  compareStrings,
  decodeSegment,
  encodeSegment,
  objectKey,
  objectName,
  parseObjectName,
  sidecarTarget,
  tablePrefix,
  writerId,
  writerPrefix,
} from '../../shared/sink/layout.js';

const W = 'shop.app';

const POSITION_CHARS = '0123456789abcdefghijklmnopqrstuvwxyz'.split('');
const position = (minLength: number, maxLength: number) =>
  fc.array(fc.constantFrom(...POSITION_CHARS), { minLength, maxLength }).map((cs) => cs.join(''));

describe('encodeSegment', () => {
  it('round-trips any text and only emits [a-z0-9._-] and %XX', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), (s) => {
        const e = encodeSegment(s);
        expect(e).toMatch(/^(?:[a-z0-9._-]|%[0-9A-F]{2})*$/);
        expect(decodeSegment(e)).toBe(s);
      }),
      { numRuns: 500 },
    );
  });

  it('keeps case distinct and escapes names readers would hide', () => {
    expect(encodeSegment('public.orders')).toBe('public.orders');
    expect(encodeSegment('Public.Orders')).toBe('%50ublic.%4Frders');
    expect(encodeSegment('_tmp')).toBe('%5Ftmp');
    expect(encodeSegment('.hidden')).toBe('%2Ehidden');
    expect(encodeSegment('a_b')).toBe('a_b');
    expect(encodeSegment('a/b')).toBe('a%2Fb');
    expect(encodeSegment('é')).toBe('%C3%A9');
  });
});

describe('object names', () => {
  it('names a table folder under the prefix', () => {
    expect(tablePrefix('', 'public.orders')).toBe('public.orders/');
    expect(tablePrefix('/lake/raw/', 'public.orders')).toBe('lake/raw/public.orders/');
    expect(objectKey('lake', 'public.orders', W, 'i000000000001').key).toBe(
      'lake/public.orders/shop.app.i000000000001.parquet',
    );
    expect(writerPrefix('lake', 'public.orders', W)).toBe('lake/public.orders/shop.app.');
    expect(() => tablePrefix('lake', '')).toThrow(SinkError);
    expect(() => objectName('t', W, '')).toThrow(SinkError);
  });

  it('parses plain names back to their position, and plain listings sort in position order', () => {
    fc.assert(
      fc.property(fc.uniqueArray(position(1, 100), { minLength: 1, maxLength: 30 }), (positions) => {
        const names = positions.map((p) => objectName('t', W, p).name);
        for (let i = 0; i < positions.length; i++) {
          expect(objectName('t', W, positions[i]!).sidecar).toBeUndefined();
          expect(parseObjectName(names[i]!)).toEqual({ kind: 'plain', writer: W, position: positions[i] });
        }
        const byName = [...names]
          .sort(compareStrings)
          .map((n) => (parseObjectName(n) as { position: string }).position);
        expect(byName).toEqual([...positions].sort(compareStrings));
      }),
      { numRuns: 300 },
    );
  });

  it('shortens long positions to prefix~hash, deterministically and within file-name limits', () => {
    const long = 'm'.repeat(150);
    const a = objectName('t', W, long);
    expect(a).toEqual(objectName('t', W, long));
    expect(a.name).toMatch(/^shop\.app\.m{80}~[0-9a-f]{16}\.parquet$/);
    expect(a.sidecar).toBe(`_${a.name.replace('.parquet', '')}.pos`);
    expect(sidecarTarget(a.sidecar!)).toBe(a.name);
    const parsed = parseObjectName(a.name);
    expect(parsed).toMatchObject({ kind: 'hashed', writer: W, visible: 'm'.repeat(80), sidecar: a.sidecar });
    expect(objectName('t', W, `${long}x`).name).not.toBe(a.name);
    // A cut never splits an escape: 79 safe chars then escapes.
    const escaped = objectName('t', W, `${'a'.repeat(79)}${'~'.repeat(30)}`);
    const visible = (parseObjectName(escaped.name) as { visible: string }).visible;
    expect(visible).toBe('a'.repeat(79));
  });

  it('orders a hashed name against a position only when its visible prefix decides it', () => {
    // Positions sharing long prefixes: the case where hashing loses information.
    const stem = position(70, 90);
    const positions = fc
      .tuple(stem, fc.array(position(0, 60), { minLength: 2, maxLength: 8 }))
      .map(([s, tails]) => tails.map((t) => s + t));
    fc.assert(
      fc.property(positions, position(1, 150), (ps, other) => {
        for (const p of [...ps, other]) {
          const parsed = parseObjectName(objectName('t', W, p).name)!;
          for (const c of [...ps, other, p, '', p.slice(0, 80), p.slice(0, 81)]) {
            const got = compareNameToPosition(parsed, c);
            if (got !== undefined) expect(got).toBe(compareStrings(p, c));
            // Only a shortened name may be undecided, and only against a position sharing its visible prefix.
            if (got === undefined) {
              expect(parsed.kind).toBe('hashed');
              expect(c.startsWith((parsed as { visible: string }).visible)).toBe(true);
            }
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('ignores names the layout did not write', () => {
    for (const name of [
      'notes.txt',
      'A.parquet',
      '%61.parquet', // non-canonical spelling of "a"
      '.i01.parquet.abc.tmp',
      '_abc~0123456789abcdef.pos',
      `${'a'.repeat(101)}.parquet`, // too long to be plain, not hashed either
      'abc~0123.parquet',
      '.parquet',
      'sub/i01.parquet',
      'i000000000001.parquet', // named before writers were named: nobody's to delete
      'shop.i01.parquet', // no source part
      'Shop.app.i01.parquet',
      'shop.app..parquet',
      'shop.app..i01.parquet', // a position's leading dot is always escaped
      '-shop.app.i01.parquet',
      `shop.${'a'.repeat(64)}.i01.parquet`, // source longer than the spec allows
    ]) {
      expect(parseObjectName(name), name).toBeUndefined();
    }
    expect(sidecarTarget('_abc.pos')).toBeUndefined();
    expect(sidecarTarget('_i01~0123456789abcdef.pos')).toBeUndefined();
  });

  it('names carry the writer: writers never share a name, and every name parses back to its writer', () => {
    const pipeline = fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,20}$/);
    const source = fc.stringMatching(/^[a-z0-9_-]{1,20}$/);
    fc.assert(
      fc.property(pipeline, source, pipeline, source, position(1, 150), (p1, s1, p2, s2, pos) => {
        const w1 = writerId(p1, s1);
        const w2 = writerId(p2, s2);
        const a = objectName('t', w1, pos);
        const b = objectName('t', w2, pos);
        expect(parseObjectName(a.name)?.writer).toBe(w1);
        if (a.sidecar) expect(parseObjectName(sidecarTarget(a.sidecar)!)?.writer).toBe(w1);
        if (w1 !== w2) {
          expect(a.name).not.toBe(b.name);
          // A writer's listing prefix never matches another writer's names.
          expect(b.name.startsWith(`${w1}.`)).toBe(false);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('refuses writer names the spec cannot produce', () => {
    expect(writerId('shop-eu', 'app_1')).toBe('shop-eu.app_1');
    for (const [p, s] of [
      ['Shop', 'app'],
      ['shop', 'a.b'],
      ['shop.x', 'app'],
      ['', 'app'],
      ['shop', ''],
      ['-shop', 'app'],
    ] as const) {
      expect(() => writerId(p, s), `${p}/${s}`).toThrow(SinkError);
    }
    expect(() => objectName('t', 'shop', 'i01')).toThrow(SinkError);
  });
});
