/**
 * Every error code the product raises is in docs/errors.md with the operator's fix, and the page
 * documents no code the product lacks:
 * - the codes read from the sources (an error constructed with a code literal, a `code: '...'`
 *   field, a `super('...')`) each have a row, so a new code without its row fails here, not in an
 *   operator's hands;
 * - the typed list (shared/contracts/error-codes.ts, which `TidemarkError`, warnings, check lines
 *   and log fields are typed by) and the codes in the first column of the page's tables are the
 *   same set, each code in the section of its area; every listed code is named in the sources (so
 *   none is listed but never raised); and every other all-caps name the page shows in backticks
 *   is a known non-code (a setting, an environment variable, an errno, a server keyword).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { AWS_FAILURE_KINDS } from '../../shared/aws/errors.js';
import { CODES_BY_AREA, type Code, ERROR_CODES, type ErrorArea } from '../../shared/contracts/error-codes.js';

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

/** The H2 sections of docs/errors.md and the area of the codes their tables hold. */
const SECTIONS: Record<string, ErrorArea | undefined> = {
  'Exit codes of the CLI': undefined,
  'Spec and input': 'spec',
  'Source (database)': 'source',
  Data: 'data',
  'State (cursor store)': 'state',
  'Lake (sink)': 'lake',
  'Check (`tidemark check`)': 'check',
  'CDC task (`tidemark cdc`, functions/cdc/main.ts)': 'cdc',
  Local: 'local',
  Other: 'other',
};

/**
 * All-caps names docs/errors.md shows in backticks that are no code of ours, and why. A first
 * column's text after ` on ` names the field a code is about (`CONFIG_INVALID` on
 * `TIDEMARK_REGISTER`), so those are read as fields, not codes, and listed here too.
 */
const NOT_CODES: Record<string, string> = {
  AWS_ENDPOINT_URL: "the AWS SDK's endpoint environment variable a WRONG_SERVICE message names",
  AWS_ENDPOINT_URL_DYNAMODB: "the AWS SDK's DynamoDB endpoint environment variable",
  AWS_ENDPOINT_URL_S3: "the AWS SDK's S3 endpoint environment variable",
  AWS_PROFILE: "the AWS SDK's credentials profile variable, named in a fix",
  AWS_REGION: "the AWS SDK's region variable, named in a fix",
  TIDEMARK_CDC_SOURCE: 'an environment variable of the CDC task, the field a CONFIG_INVALID row is about',
  TIDEMARK_HEALTH_PORT: 'an environment variable of the CDC task, the field a CONFIG_INVALID row is about',
  TIDEMARK_REGISTER: 'an environment variable of the CDC task, the field a CONFIG_INVALID row is about',
  TIDEMARK_SPEC: 'an environment variable of the CDC task, the field a CONFIG_INVALID row is about',
  EACCES: "Node's errno code a SINK_DIR_UNWRITABLE or STATE_STORE_FAILED message carries",
  EROFS: "Node's errno code a SINK_DIR_UNWRITABLE or STATE_STORE_FAILED message carries",
  ENOTDIR: "Node's errno code a SINK_DIR_UNWRITABLE or STATE_STORE_FAILED message carries",
  ENOSPC: "Node's errno code a SINK_DISK_FULL message carries",
  EDQUOT: "Node's errno code a SINK_DISK_FULL message carries",
  DATETIME: 'a MySQL column type',
  TIMESTAMP: 'a MySQL column type',
  FULL: 'a server setting value (REPLICA IDENTITY FULL, binlog_row_image = FULL)',
  ROW: 'a server setting value (binlog_format = ROW)',
  REPLICATION: 'a Postgres role attribute (ALTER ROLE x REPLICATION)',
  START_REPLICATION: "the Postgres replication protocol's command",
  URL: 'the WHATWG URL class both drivers parse a URL with',
};

/** A documented row's codes: the backticked all-caps names of its first cell, before ` on ` and `(`. */
function rowCodes(line: string): string[] {
  const first = line.split('|')[1] ?? '';
  const head = first.split(' on ')[0]!.split('(')[0]!;
  return [...head.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1]!);
}

/** Every code of a table row's first column in docs/errors.md, with the areas of the sections it is in. */
function documentedCodes(doc: string): Map<string, Set<ErrorArea | undefined>> {
  const found = new Map<string, Set<ErrorArea | undefined>>();
  let area: ErrorArea | undefined;
  for (const line of doc.split('\n')) {
    const h2 = /^## (.+)$/.exec(line);
    if (h2) {
      if (!(h2[1]! in SECTIONS))
        throw new Error(`docs/errors.md: a section the test does not know: ${h2[1]}`);
      area = SECTIONS[h2[1]!];
    }
    if (!line.startsWith('|')) continue;
    for (const code of rowCodes(line)) {
      if (!found.has(code)) found.set(code, new Set());
      found.get(code)!.add(area);
    }
  }
  return found;
}

/**
 * Every string a product source names as a literal (comments aside), and the codes built from
 * the AWS classifier's kinds (`STATE_${failure.kind}`, `SINK_${failure.kind}`).
 */
function namedInSources(): Set<string> {
  const named = new Set<string>();
  for (const file of PRODUCT.flatMap(sources)) {
    const text = readFileSync(file, 'utf8');
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false);
    const visit = (node: ts.Node): void => {
      if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) named.add(node.text);
      if (
        ts.isTemplateExpression(node) &&
        /^[A-Z]+_$/.test(node.head.text) &&
        node.templateSpans.length === 1 &&
        node.templateSpans[0]!.literal.text === '' &&
        /\.kind$/.test(node.templateSpans[0]!.expression.getText(source))
      ) {
        for (const kind of AWS_FAILURE_KINDS) named.add(`${node.head.text}${kind}`);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return named;
}

describe('the typed list of codes', () => {
  const doc = readFileSync(join(ROOT, 'docs', 'errors.md'), 'utf8');
  const listed = Object.keys(ERROR_CODES) as Code[];
  const documented = documentedCodes(doc);

  it('reads the codes of the page and of the sources (the checks below would pass on nothing)', () => {
    expect(listed.length).toBeGreaterThanOrEqual(100);
    expect(documented.size).toBeGreaterThanOrEqual(100);
    expect(rowCodes('| `CONFIG_INVALID` on `TIDEMARK_REGISTER` | meaning | fix | no |')).toEqual([
      'CONFIG_INVALID',
    ]);
    expect(rowCodes('| `SOURCE_COLUMN_MISSING` / `CURSOR_COLUMN_MISSING` | m |')).toEqual([
      'SOURCE_COLUMN_MISSING',
      'CURSOR_COLUMN_MISSING',
    ]);
    expect(rowCodes('| `POSITION_LOST` (line `SLOT`) | m |')).toEqual(['POSITION_LOST']);
    const named = namedInSources();
    expect(
      named.has('SCHEMA_CHANGED') && named.has('STATE_WRONG_SERVICE') && named.has('SINK_CREDENTIALS'),
    ).toBe(true);
  });

  it('has a row in docs/errors.md for every listed code, in the section of its area', () => {
    expect(listed.filter((code) => !documented.has(code))).toEqual([]);
    expect(
      listed
        .filter((code) => documented.has(code) && !documented.get(code)!.has(ERROR_CODES[code].area))
        .map(
          (code) => `${code}: area ${ERROR_CODES[code].area}, documented under ${[...documented.get(code)!]}`,
        ),
    ).toEqual([]);
  });

  it('documents no code that is not listed', () => {
    expect([...documented.keys()].filter((code) => !(code in ERROR_CODES))).toEqual([]);
  });

  it('lists no code the sources never raise', () => {
    const named = namedInSources();
    expect(listed.filter((code) => !named.has(code))).toEqual([]);
  });

  it('holds every code the sources raise, and the page shows no other all-caps name unexplained', () => {
    const raised = new Set<string>();
    for (const file of PRODUCT.flatMap(sources)) {
      const text = readFileSync(file, 'utf8');
      for (const pattern of PATTERNS) for (const m of text.matchAll(pattern)) raised.add(m[1]!);
    }
    expect(
      [...raised].filter((code) => !(code in ERROR_CODES) && !(code in NOT_OURS) && !(code in NOT_CODES)),
    ).toEqual([]);
    const shown = new Set([...doc.matchAll(/`([A-Z][A-Z0-9_]{2,})`/g)].map((m) => m[1]!));
    expect([...shown].filter((name) => !(name in ERROR_CODES) && !(name in NOT_CODES))).toEqual([]);
    // Every explanation still explains something the page or the sources show.
    expect(Object.keys(NOT_CODES).filter((name) => !shown.has(name) && !raised.has(name))).toEqual([]);
  });

  it('has each code in one area, with one meaning line', () => {
    const inAreas = Object.values(CODES_BY_AREA).flatMap((codes) => Object.keys(codes));
    expect(inAreas.filter((code, i) => inAreas.indexOf(code) !== i)).toEqual([]);
    expect(inAreas.length).toBe(listed.length);
    for (const code of listed) {
      const meaning = ERROR_CODES[code].meaning;
      expect(meaning.length, code).toBeGreaterThan(10);
      expect(meaning, code).not.toContain('\n');
    }
  });
});
