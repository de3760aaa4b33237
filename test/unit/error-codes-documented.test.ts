/**
 * Every error code the product raises is in docs/errors.md with the operator's fix: the codes
 * are read from the sources (an error constructed with a code literal, a `code: '...'` field, a
 * `super('...')`), so a new code without its row fails here, not in an operator's hands.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const PRODUCT = ['shared', 'functions', 'infra'];
const PATTERNS = [
  /new\s+\w*Error\(\s*['"]([A-Z][A-Z0-9_]{3,})['"]/g,
  /\bcode:\s*['"]([A-Z][A-Z0-9_]{3,})['"]/g,
  /super\(\s*['"]([A-Z][A-Z0-9_]{3,})['"]/g,
];
/** Codes that never reach an operator as they are, and why. */
const NOT_OURS: Record<string, string> = {
  ECONNRESET: "a socket error shaped like Node's, which the Postgres connect translation names",
  SSL_PROTOCOL: "a TLS error shaped like Node's, which the Postgres connect translation names",
  SSL_REFUSED: "a TLS error shaped like Node's, which the Postgres connect translation names",
};

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true })
    .map(String)
    .filter((f) => /\.(ts|cjs|mjs)$/.test(f) && !f.endsWith('.d.ts') && !f.includes('node_modules'))
    .map((f) => join(ROOT, dir, f));
}

describe('error codes', () => {
  it('every code the sources raise has a row in docs/errors.md', () => {
    const raised = new Map<string, string>();
    for (const file of PRODUCT.flatMap(sources)) {
      const text = readFileSync(file, 'utf8');
      for (const pattern of PATTERNS)
        for (const m of text.matchAll(pattern)) if (!raised.has(m[1]!)) raised.set(m[1]!, file);
    }
    const doc = readFileSync(join(ROOT, 'docs', 'errors.md'), 'utf8');
    const undocumented = [...raised]
      .filter(([code]) => !(code in NOT_OURS) && !doc.includes(`\`${code}\``))
      .map(([code, file]) => `${code} (${file.slice(ROOT.length + 1)})`);
    // The extraction itself works: it finds codes everyone knows are raised.
    expect(raised.has('SCHEMA_CHANGED') && raised.has('CDC_WAL_LEVEL')).toBe(true);
    expect(undocumented).toEqual([]);
  });
});
