/**
 * The COPY tap's framing (shared/drivers/postgres/wire/copy-tap.ts), on generated server byte streams
 * cut into random socket chunks (fast-check): the sink gets exactly the CopyData payloads of the
 * armed phase, in order, and postgres.js gets every other byte, in order, unchanged; a released
 * phase drops the rest of its CopyData instead of passing it on.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CopyTap } from '../../shared/drivers/postgres/wire/copy-tap.js';

/** One backend message: type byte, int32 length (counting itself), body. */
function message(type: string, body: Uint8Array): Buffer {
  const m = Buffer.alloc(5 + body.length);
  m[0] = type.charCodeAt(0);
  m.writeUInt32BE(4 + body.length, 1);
  m.set(body, 5);
  return m;
}

const body = (max: number) => fc.uint8Array({ maxLength: max });
/** Messages a server may send outside a COPY phase or between its CopyData (notices). */
const other = fc.tuple(fc.constantFrom('Z', 'S', 'N', 'C', 'T', 'D', 'K', 'R'), body(40));

/** A stream: messages before, CopyOutResponse, data (with notices between), CopyDone, after. */
const streams = fc.record({
  before: fc.array(other, { maxLength: 4 }),
  data: fc.array(fc.oneof({ weight: 5, arbitrary: body(300) }, { weight: 1, arbitrary: other }), {
    maxLength: 30,
  }),
  end: fc.constantFrom('c', 'E'),
  after: fc.array(other, { maxLength: 4 }),
  cuts: fc.array(fc.integer({ min: 1, max: 400 }), { minLength: 1, maxLength: 200 }),
});

type Stream = typeof streams extends fc.Arbitrary<infer T> ? T : never;

/** The wire bytes, the payloads a sink must get, and the bytes postgres.js must get. */
function build(s: Stream): { wire: Buffer; payloads: Buffer; passed: Buffer } {
  const wire: Buffer[] = [];
  const payloads: Buffer[] = [];
  const passed: Buffer[] = [];
  const add = (m: Buffer, pass: boolean) => {
    wire.push(m);
    if (pass) passed.push(m);
  };
  for (const [t, b] of s.before) add(message(t, b), true);
  add(message('H', Buffer.from([1, 0, 0])), true);
  for (const d of s.data) {
    if (d instanceof Uint8Array) {
      add(message('d', d), false);
      payloads.push(Buffer.from(d));
    } else add(message(d[0], d[1]), true);
  }
  add(message(s.end, Buffer.from('x\0')), true);
  // CopyData after the phase ended belongs to nobody's sink: it is passed on.
  add(message('d', Buffer.from('late')), true);
  for (const [t, b] of s.after) add(message(t, b), true);
  return { wire: Buffer.concat(wire), payloads: Buffer.concat(payloads), passed: Buffer.concat(passed) };
}

/** `wire` cut at the given chunk lengths (repeated), each chunk a fresh Buffer like a socket's. */
function chunks(wire: Buffer, cuts: readonly number[]): Buffer[] {
  const out: Buffer[] = [];
  for (let p = 0, k = 0; p < wire.length; k++) {
    const n = Math.min(cuts[k % cuts.length]!, wire.length - p);
    out.push(Buffer.from(wire.subarray(p, p + n)));
    p += n;
  }
  return out;
}

describe('CopyTap', () => {
  it('hands the armed phase CopyData to the sink and passes every other byte on, across any chunking', () => {
    fc.assert(
      fc.property(streams, (s) => {
        const { wire, payloads, passed } = build(s);
        const got: Buffer[] = [];
        const fwd: Buffer[] = [];
        const tap = new CopyTap((c) => fwd.push(Buffer.from(c)));
        tap.arm((buf, start, end) => got.push(Buffer.from(buf.subarray(start, end))));
        for (const c of chunks(wire, s.cuts)) tap.take(c);
        expect(Buffer.concat(got).equals(payloads)).toBe(true);
        expect(Buffer.concat(fwd).equals(passed)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('passes everything on when nothing is armed', () => {
    fc.assert(
      fc.property(streams, (s) => {
        const { wire } = build(s);
        const fwd: Buffer[] = [];
        const tap = new CopyTap((c) => fwd.push(Buffer.from(c)));
        for (const c of chunks(wire, s.cuts)) tap.take(c);
        expect(Buffer.concat(fwd).equals(wire)).toBe(true);
      }),
      { numRuns: 100 },
    );
  });

  it('drops the rest of a released phase CopyData (never passes it to postgres.js) and keeps framing', () => {
    fc.assert(
      fc.property(streams, fc.nat(), (s, at) => {
        const { wire, passed } = build(s);
        const fwd: Buffer[] = [];
        let delivered = 0;
        const tap = new CopyTap((c) => fwd.push(Buffer.from(c)));
        const sink = (_b: Buffer, start: number, end: number) => {
          delivered += end - start;
        };
        tap.arm(sink);
        const cs = chunks(wire, s.cuts);
        // copy-stream.ts releases once its statement's COPY phase began (or failed): from the
        // chunk after the one that completed the CopyOutResponse header on.
        const hEnd = s.before.reduce((n, [, b]) => n + 5 + b.length, 0) + 5;
        let first = 0;
        for (let seen = 0; seen < hEnd; first++) seen += cs[first]!.length;
        const releaseAt = first + (at % (cs.length - first + 1));
        cs.forEach((c, k) => {
          if (k === releaseAt) tap.release(sink);
          tap.take(c);
        });
        // What postgres.js sees is the same whenever the release came: no CopyData of the phase.
        expect(Buffer.concat(fwd).equals(passed)).toBe(true);
        const before = cs.slice(0, releaseAt).reduce((n, c) => n + c.length, 0);
        expect(delivered).toBeLessThanOrEqual(before);
      }),
      { numRuns: 200 },
    );
  });

  it('a statement that fails before its COPY phase gives up its place to the next one', () => {
    const a: number[] = [];
    const b: number[] = [];
    const tap = new CopyTap(() => undefined);
    tap.arm((buf, s, e) => a.push(...buf.subarray(s, e)));
    tap.arm((buf, s, e) => b.push(...buf.subarray(s, e)));
    tap.take(
      Buffer.concat([
        message('E', Buffer.from('SERROR\0')),
        message('Z', Buffer.from('I')),
        message('H', Buffer.alloc(3)),
        message('d', Buffer.from([7])),
        message('c', Buffer.alloc(0)),
      ]),
    );
    expect(a).toEqual([]);
    expect(b).toEqual([7]);
  });

  it('routes two statements written back to back to their own sinks, in order', () => {
    const a: number[] = [];
    const b: number[] = [];
    const tap = new CopyTap(() => undefined);
    tap.arm((buf, s, e) => a.push(...buf.subarray(s, e)));
    tap.arm((buf, s, e) => b.push(...buf.subarray(s, e)));
    const phase = (v: number) =>
      Buffer.concat([
        message('H', Buffer.alloc(3)),
        message('d', Buffer.from([v, v])),
        message('c', Buffer.alloc(0)),
      ]);
    tap.take(Buffer.concat([phase(1), message('Z', Buffer.from('I')), phase(2)]));
    expect(a).toEqual([1, 1]);
    expect(b).toEqual([2, 2]);
  });
});
