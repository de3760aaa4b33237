/**
 * tidemark's Iceberg partition transforms (shared/iceberg/transforms.ts) against pyiceberg 0.12's
 * (.venv-readers, test/readers/transforms.py): for fast-check-generated values of every type a
 * key column can have (int, long, date, timestamp, timestamptz, decimal, string, binary, uuid)
 * and every transform that applies to it (identity, bucket[N], truncate[W], year, month, day,
 * hour), both give the same partition value. The expected values are pyiceberg's, never a second
 * implementation of ours. Skips, saying so, where .venv-readers is not installed.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fromTwosComplementBE, primitiveOf, type SingleValue } from '../../shared/iceberg/single-value.js';
import type { IcebergType } from '../../shared/iceberg/spec.js';
import { murmur3x86_32, transformOf } from '../../shared/iceberg/transforms.js';
import { READERS_PYTHON, REPO_ROOT, readersMissing } from '../harness/readers.js';

const execFileP = promisify(execFile);

interface Case {
  readonly type: string;
  readonly transform: string;
  /** As transforms.py takes it (see its docstring). */
  readonly wire: unknown;
  /** As transformOf takes it. */
  readonly value: SingleValue | null;
}

async function pyiceberg(cases: readonly Case[]): Promise<unknown[]> {
  const child = execFileP(READERS_PYTHON, ['test/readers/transforms.py'], {
    cwd: REPO_ROOT,
    maxBuffer: 2 ** 26,
  });
  child.child.stdin!.end(
    JSON.stringify(cases.map((c) => ({ type: c.type, transform: c.transform, value: c.wire }))),
  );
  const { stdout } = await child;
  return JSON.parse(stdout) as unknown[];
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Ours, in transforms.py's output form. */
function ours(c: Case): unknown {
  const t = primitiveOf(c.type as IcebergType)!;
  const v = transformOf(c.transform, t)(c.value);
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
  if (v instanceof Uint8Array) return t.kind === 'decimal' ? String(fromTwosComplementBE(v)) : hex(v);
  if (typeof v === 'bigint') return v >= -(2n ** 31n) && v < 2n ** 31n ? Number(v) : String(v);
  return v;
}

const nullable = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: null, freq: 20 });
const bucket = fc.integer({ min: 1, max: 5000 }).map((n) => `bucket[${n}]`);
const width = (max: number) => fc.integer({ min: 1, max }).map((w) => `truncate[${w}]`);
// Years 1 to 9999: the dates Python (and so pyiceberg's time transforms) can hold.
const micros = fc.bigInt({ min: -62_135_596_800_000_000n, max: 253_402_300_799_999_999n });

function cases(type: string, transform: fc.Arbitrary<string>, value: fc.Arbitrary<[unknown, SingleValue]>) {
  return fc.record({ transform, v: nullable(value) }).map(
    ({ transform, v }): Case => ({
      type,
      transform,
      wire: v === null ? null : v[0],
      value: v === null ? null : v[1],
    }),
  );
}

const anyCase: fc.Arbitrary<Case> = fc.oneof(
  cases(
    'int',
    fc.oneof(fc.constant('identity'), bucket, width(1000)),
    fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }).map((n) => [n, n]),
  ),
  cases(
    'long',
    fc.oneof(fc.constant('identity'), bucket, width(1_000_000)),
    fc.bigInt({ min: -(2n ** 62n), max: 2n ** 62n }).map((n) => [String(n), n]),
  ),
  cases(
    'date',
    fc.constantFrom('identity', 'year', 'month', 'day', 'bucket[16]', 'bucket[7]'),
    fc.integer({ min: -719_162, max: 2_932_896 }).map((n) => [n, n]),
  ),
  ...(['timestamp', 'timestamptz'] as const).map((type) =>
    cases(
      type,
      fc.oneof(fc.constantFrom('identity', 'year', 'month', 'day', 'hour'), bucket),
      micros.map((n) => [String(n), n]),
    ),
  ),
  cases(
    'decimal(9, 2)',
    fc.oneof(fc.constant('identity'), bucket, width(10_000)),
    fc.bigInt({ min: -(10n ** 9n) + 1n, max: 10n ** 9n - 1n }).map((n) => [String(n), n]),
  ),
  cases(
    'decimal(38, 10)',
    fc.oneof(fc.constant('identity'), bucket, width(1_000_000)),
    fc.bigInt({ min: -(10n ** 38n) + 1n, max: 10n ** 38n - 1n }).map((n) => [String(n), n]),
  ),
  cases(
    'string',
    fc.oneof(fc.constant('identity'), bucket, width(20)),
    fc.string({ unit: 'grapheme', maxLength: 30 }).map((s) => [s, s]),
  ),
  cases(
    'binary',
    fc.oneof(fc.constant('identity'), bucket, width(20)),
    fc.uint8Array({ maxLength: 40 }).map((b) => [hex(b), b]),
  ),
  cases(
    'uuid',
    fc.oneof(fc.constant('identity'), bucket),
    fc.uint8Array({ minLength: 16, maxLength: 16 }).map((b) => [hex(b), b]),
  ),
);

describe.skipIf(readersMissing !== undefined)(
  `Iceberg partition transforms equal pyiceberg's${readersMissing ? ` (skipped: ${readersMissing})` : ''}`,
  () => {
    it("the spec's own examples (Appendix B)", () => {
      // hashInt(34) = hashLong(34) = 2017239379, hashString("iceberg") = 1210000089.
      const long34 = new Uint8Array(8);
      long34[0] = 34;
      expect(murmur3x86_32(long34)).toBe(2017239379);
      expect(murmur3x86_32(new TextEncoder().encode('iceberg'))).toBe(1210000089);
      expect(murmur3x86_32(new TextEncoder().encode('iceberg')) & 0x7fffffff).toBe(1210000089);
    });

    it('every transform of every key type, over generated values', async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(anyCase, { minLength: 100, maxLength: 400 }), async (batch) => {
          const theirs = await pyiceberg(batch);
          const differ = batch.flatMap((c, i) => {
            const mine = ours(c);
            return JSON.stringify(mine) === JSON.stringify(theirs[i])
              ? []
              : [{ type: c.type, transform: c.transform, value: c.wire, ours: mine, pyiceberg: theirs[i] }];
          });
          expect(differ).toEqual([]);
        }),
        // Each run is one pyiceberg process; a failure lists every differing case of its batch.
        { numRuns: 20, endOnFailure: true },
      );
    });
  },
);
