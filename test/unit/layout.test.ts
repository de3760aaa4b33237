/**
 * Object layout: names are deterministic, ASCII-safe, reversible and injective; they carry the
 * writing run's fence (`.f` + 8 hex), and names from before fences still parse; a listing of
 * plain names sorts in (position, fence) order; a shortened (hashed) name is ordered against a
 * position from its visible prefix whenever that decides it, and otherwise says "ask the sidecar"
 * instead of guessing (recovery deletes by this comparison, so a wrong answer would delete
 * committed data); and `positionListBound` never sorts above a name recovery must see. A
 * partitioned page's parts (`.p` + 6 digits after the fence) parse back to the page's position,
 * fence and part, share the page's stem, and sort past the bound like the page's single file.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SinkError } from '../../shared/contracts/errors.js';
import {
  compareNameToPosition,
  compareStrings,
  decodeSegment,
  encodeSegment,
  fenceSuffix,
  MAX_NAME_FENCE,
  objectKey,
  objectName,
  pageStem,
  parseObjectName,
  positionListBound,
  sidecarTarget,
  tablePrefix,
  writerId,
  writerPrefix,
} from '../../shared/sink/layout.js';

const W = 'shop.app';

const POSITION_CHARS = '0123456789abcdefghijklmnopqrstuvwxyz'.split('');
const position = (minLength: number, maxLength: number) =>
  fc.array(fc.constantFrom(...POSITION_CHARS), { minLength, maxLength }).map((cs) => cs.join(''));
/** Fences over their whole range, often at the edges. */
const fenceArb = fc.oneof(
  fc.integer({ min: 1, max: MAX_NAME_FENCE }),
  fc.integer({ min: 1, max: 20 }),
  fc.constantFrom(1, 15, 16, 255, 256, MAX_NAME_FENCE),
);

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
    expect(objectKey('lake', 'public.orders', W, 'j00000000000100000003', 3).key).toBe(
      'lake/public.orders/shop.app.j00000000000100000003.f00000003.parquet',
    );
    // The name an object had before fences, for recognising those.
    expect(objectKey('lake', 'public.orders', W, 'i000000000001', undefined).key).toBe(
      'lake/public.orders/shop.app.i000000000001.parquet',
    );
    expect(writerPrefix('lake', 'public.orders', W)).toBe('lake/public.orders/shop.app.');
    expect(positionListBound('lake', 'public.orders', W, 'j000000000001')).toBe(
      'lake/public.orders/shop.app.j000000000001',
    );
    expect(positionListBound('lake', 'public.orders', W, 'j000000000001', true)).toBe(
      'lake/public.orders/_shop.app.j000000000001',
    );
    expect(() => tablePrefix('lake', '')).toThrow(SinkError);
    expect(() => objectName('t', W, '', 1)).toThrow(SinkError);
  });

  it('puts the fence into the name as .f + 8 hex, refusing what no lease hands out', () => {
    expect(fenceSuffix('t', 1)).toBe('.f00000001');
    expect(fenceSuffix('t', 0xabc)).toBe('.f00000abc');
    expect(fenceSuffix('t', MAX_NAME_FENCE)).toBe('.fffffffff');
    for (const bad of [0, -1, 1.5, MAX_NAME_FENCE + 1, Number.NaN]) {
      expect(() => objectName('t', W, 'i01', bad), String(bad)).toThrow(SinkError);
    }
    fc.assert(
      fc.property(position(1, 150), fenceArb, fenceArb, (p, f, g) => {
        const a = objectName('t', W, p, f);
        const parsed = parseObjectName(a.name)!;
        expect(parsed.fence).toBe(f);
        expect(parsed.writer).toBe(W);
        if (parsed.kind === 'plain') expect(parsed.position).toBe(p);
        else expect(p.startsWith(parsed.visible)).toBe(true);
        if (a.sidecar) expect(sidecarTarget(a.sidecar)).toBe(a.name);
        // A new fence from the same position is another name (and another sidecar); a name
        // from before fences is another one still.
        if (f !== g) expect(objectName('t', W, p, g).name).not.toBe(a.name);
        const legacy = objectName('t', W, p, undefined);
        expect(legacy.name).not.toBe(a.name);
        expect(parseObjectName(legacy.name)?.fence).toBeUndefined();
      }),
      { numRuns: 500 },
    );
  });

  it('parses plain names back to their position and fence, and plain listings sort in (position, fence) order', () => {
    const versions = fc.uniqueArray(fc.tuple(position(1, 100), fenceArb), {
      minLength: 1,
      maxLength: 30,
      selector: ([p, f]) => `${p}/${f}`,
    });
    fc.assert(
      fc.property(versions, (vs) => {
        const names = vs.map(([p, f]) => objectName('t', W, p, f).name);
        for (let i = 0; i < vs.length; i++) {
          const [p, f] = vs[i]!;
          expect(objectName('t', W, p, f).sidecar).toBeUndefined();
          expect(parseObjectName(names[i]!)).toEqual({ kind: 'plain', writer: W, position: p, fence: f });
        }
        const byName = [...names].sort(compareStrings).map((n) => {
          const parsed = parseObjectName(n) as { position: string; fence: number };
          return [parsed.position, parsed.fence];
        });
        expect(byName).toEqual([...vs].sort(([p1, f1], [p2, f2]) => compareStrings(p1, p2) || f1 - f2));
      }),
      { numRuns: 300 },
    );
    // Names from before fences still parse, with no fence.
    expect(parseObjectName('shop.app.i000000000001.parquet')).toEqual({
      kind: 'plain',
      writer: W,
      position: 'i000000000001',
      fence: undefined,
    });
  });

  it('positionListBound sorts below every name starting at or after its position, above every plain one before it', () => {
    // Positions sharing long prefixes (shortened names) and short ones colliding on prefixes.
    const stem = position(70, 90);
    const positions = fc.oneof(
      position(1, 6),
      fc.tuple(stem, position(0, 40)).map(([a, b]) => a + b),
    );
    fc.assert(
      fc.property(
        fc.array(fc.tuple(positions, fc.option(fenceArb, { nil: undefined })), {
          minLength: 1,
          maxLength: 12,
        }),
        positions,
        (vs, committed) => {
          const bound = positionListBound('lake', 't', W, committed);
          const sidecarBound = positionListBound('lake', 't', W, committed, true);
          for (const [p, f] of [...vs, [committed, 1] as const, [`${committed}0`, undefined] as const]) {
            const { key, sidecarKey } = objectKey('lake', 't', W, p, f);
            if (p >= committed) {
              expect(key > bound, `${p} vs ${committed}`).toBe(true);
              if (sidecarKey) expect(sidecarKey > sidecarBound).toBe(true);
            } else if (!sidecarKey) {
              expect(key < bound, `${p} vs ${committed}`).toBe(true);
            }
          }
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('shortens long positions to prefix~hash, deterministically and within file-name limits', () => {
    const long = 'm'.repeat(150);
    const a = objectName('t', W, long, 5);
    expect(a).toEqual(objectName('t', W, long, 5));
    // The fence follows the hash, so `~` + 16 hex still ends the shortened position.
    expect(a.name).toMatch(/^shop\.app\.m{80}~[0-9a-f]{16}\.f00000005\.parquet$/);
    expect(a.name.length).toBeLessThan(255);
    expect(a.sidecar).toBe(`_${a.name.replace('.parquet', '')}.pos`);
    expect(sidecarTarget(a.sidecar!)).toBe(a.name);
    const parsed = parseObjectName(a.name);
    expect(parsed).toMatchObject({
      kind: 'hashed',
      writer: W,
      visible: 'm'.repeat(80),
      sidecar: a.sidecar,
      fence: 5,
    });
    expect(objectName('t', W, `${long}x`, 5).name).not.toBe(a.name);
    // A shortened name from before fences still parses.
    const legacy = objectName('t', W, long, undefined);
    expect(legacy.name).toMatch(/^shop\.app\.m{80}~[0-9a-f]{16}\.parquet$/);
    expect(parseObjectName(legacy.name)).toMatchObject({
      kind: 'hashed',
      visible: 'm'.repeat(80),
      fence: undefined,
    });
    expect(sidecarTarget(legacy.sidecar!)).toBe(legacy.name);
    // A cut never splits an escape: 79 safe chars then escapes.
    const escaped = objectName('t', W, `${'a'.repeat(79)}${'~'.repeat(30)}`, 1);
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
          const parsed = parseObjectName(objectName('t', W, p, 1).name)!;
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
      'shop.app.i01.f00000000.parquet', // fence 0 is never handed out
      'shop.app..f00000001.parquet', // a fence without a position
      'shop.app.f00000001.parquet'.replace('app.', 'app..'), // the same, spelled differently
      `shop.app.${'a'.repeat(101)}.f00000001.parquet`, // too long to be plain, fence or not
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
        const a = objectName('t', w1, pos, 1);
        const b = objectName('t', w2, pos, 1);
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
    expect(() => objectName('t', 'shop', 'i01', 1)).toThrow(SinkError);
  });
});

describe('partition parts of a page', () => {
  it('parse back to the position, fence and part, share the page stem, and sort at or past the bound', () => {
    fc.assert(
      fc.property(position(1, 140), fenceArb, fc.integer({ min: 0, max: 999_999 }), (pos, fence, part) => {
        const single = objectName('public.t', W, pos, fence);
        const { name, sidecar } = objectName('public.t', W, pos, fence, part);
        expect(name).toMatch(/\.f[0-9a-f]{8}\.p[0-9]{6}\.parquet$/);
        const parsed = parseObjectName(name)!;
        expect(parsed.writer).toBe(W);
        expect(parsed.fence).toBe(fence);
        expect(parsed.part).toBe(part);
        expect(parseObjectName(single.name)!.part).toBeUndefined();
        expect(pageStem(name)).toBe(single.name.slice(0, -'.parquet'.length));
        expect(pageStem(single.name)).toBe(single.name.slice(0, -'.parquet'.length));
        if (parsed.kind === 'plain') {
          expect(parsed.position).toBe(pos);
          expect(sidecar).toBeUndefined();
        } else {
          // Each part of a shortened name has a sidecar of its own, which names it.
          expect(sidecar).toBe(parsed.sidecar);
          expect(sidecarTarget(sidecar!)).toBe(name);
        }
        expect(compareNameToPosition(parsed, pos) ?? 0).toBe(0);
        const bound = positionListBound('', 'public.t', W, pos);
        expect(compareStrings(bound, `${tablePrefix('', 'public.t')}${name}`)).toBe(-1);
      }),
    );
  });

  it('refuses a part without a fence or out of range', () => {
    expect(() => objectName('public.t', W, 'j1', undefined, 0)).toThrow(SinkError);
    expect(() => objectName('public.t', W, 'j1', 1, 1_000_000)).toThrow(SinkError);
    expect(() => objectName('public.t', W, 'j1', 1, -1)).toThrow(SinkError);
  });
});
