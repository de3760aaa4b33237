/**
 * Who may import whom (docs/architecture.md, "Folders and what each owns"), checked on the real source files:
 * - shared/contracts, shared/dataplane and shared/position are the seams: they import only each
 *   other and `apache-arrow` (no other internal module, no Node builtin, no other package);
 *   position is the pure `__pos`/cursor codec the data plane stamps into every row;
 * - nothing under shared/ imports functions/ or infra/;
 * - shared/engine never names a database client (`postgres`, `mysql2`) or a driver;
 * - drivers never import the engine;
 * - shared/iceberg (the table format) imports neither the drivers nor the engine;
 * - shared/config reaches the drivers only through the registry (the kinds and capabilities it
 *   validates a spec against), never a driver folder;
 * - shared/observability/redact.ts imports nothing, so every layer (drivers and config included)
 *   may use the one redaction without an import cycle;
 * - no import circles in shared/, functions/ and infra/, type-only imports included: a type both
 *   sides need lives where one direction puts it (a contract, the lower module), so each file
 *   can be read after the files it imports;
 * - every source file there opens with a header comment of at least two lines saying its role
 *   (what it owns, its invariants, the decision record of a format), before any code.
 *
 * Imports are read with TypeScript's own pre-processor (static, type-only, re-exports, dynamic
 * `import()` and `require`). The rule and circle checkers are first tested on synthetic files,
 * so a broken checker cannot pass silently.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** One import statement of one file, resolved far enough to judge it. */
interface ImportEdge {
  /** Repo-relative path of the importing file, `/`-separated. */
  readonly from: string;
  readonly specifier: string;
  /** Repo-relative target for relative imports, e.g. `shared/engine/run.js`. */
  readonly internal: string | undefined;
  /** Package name for bare imports (`@aws-sdk/client-s3`, `postgres`, `node:fs`). */
  readonly packageName: string | undefined;
}

interface Rule {
  readonly name: string;
  readonly appliesTo: (file: string) => boolean;
  /** A reason when the edge breaks the rule. */
  readonly check: (edge: ImportEdge) => string | undefined;
}

const under = (path: string, dir: string): boolean => path.startsWith(`${dir}/`);
const SEAMS = ['shared/contracts', 'shared/dataplane', 'shared/position'];
const REDACTION = 'shared/observability/redact.ts';

const RULES: readonly Rule[] = [
  {
    name: 'contracts, dataplane and position import only each other and apache-arrow',
    appliesTo: (file) => SEAMS.some((dir) => under(file, dir)),
    check: (edge) => {
      if (edge.internal !== undefined) {
        return SEAMS.some((dir) => under(edge.internal!, dir))
          ? undefined
          : `internal module ${edge.internal}`;
      }
      return edge.packageName === 'apache-arrow' ? undefined : `package ${edge.packageName}`;
    },
  },
  {
    name: 'shared/ never imports functions/ or infra/',
    appliesTo: (file) => under(file, 'shared'),
    check: (edge) =>
      edge.internal !== undefined && (under(edge.internal, 'functions') || under(edge.internal, 'infra'))
        ? `internal module ${edge.internal}`
        : undefined,
  },
  {
    name: 'the engine never names postgres, mysql2 or a driver',
    appliesTo: (file) => under(file, 'shared/engine'),
    check: (edge) => {
      if (edge.packageName === 'postgres' || edge.packageName === 'mysql2')
        return `package ${edge.packageName}`;
      if (edge.internal !== undefined && under(edge.internal, 'shared/drivers'))
        return `driver ${edge.internal}`;
      return undefined;
    },
  },
  {
    name: 'drivers never import the engine',
    appliesTo: (file) => under(file, 'shared/drivers'),
    check: (edge) =>
      edge.internal !== undefined && under(edge.internal, 'shared/engine')
        ? `engine ${edge.internal}`
        : undefined,
  },
  {
    name: 'the Iceberg format never imports drivers or the engine',
    appliesTo: (file) => under(file, 'shared/iceberg'),
    check: (edge) =>
      edge.internal !== undefined &&
      (under(edge.internal, 'shared/drivers') || under(edge.internal, 'shared/engine'))
        ? `internal module ${edge.internal}`
        : undefined,
  },
  {
    name: 'config reaches the drivers only through the registry',
    appliesTo: (file) => under(file, 'shared/config'),
    check: (edge) =>
      edge.internal !== undefined &&
      under(edge.internal, 'shared/drivers') &&
      edge.internal !== 'shared/drivers/registry.js'
        ? `driver ${edge.internal}`
        : undefined,
  },
  {
    name: 'redaction imports nothing',
    appliesTo: (file) => file === REDACTION,
    check: (edge) =>
      edge.internal !== undefined ? `internal module ${edge.internal}` : `package ${edge.packageName}`,
  },
];

/** The imports of one file's text. */
function importsOf(file: string, text: string): ImportEdge[] {
  const { importedFiles } = ts.preProcessFile(text, true, true);
  return importedFiles.map(({ fileName: specifier }) => {
    if (specifier.startsWith('.')) {
      return {
        from: file,
        specifier,
        internal: posix.normalize(posix.join(posix.dirname(file), specifier)),
        packageName: undefined,
      };
    }
    const parts = specifier.split('/');
    const packageName = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
    return { from: file, specifier, internal: undefined, packageName };
  });
}

/** Every rule violation in `files` (repo-relative path → source text). */
function violations(files: ReadonlyMap<string, string>): string[] {
  const found: string[] = [];
  for (const [file, text] of files) {
    const rules = RULES.filter((rule) => rule.appliesTo(file));
    if (rules.length === 0) continue;
    for (const edge of importsOf(file, text)) {
      for (const rule of rules) {
        const reason = rule.check(edge);
        if (reason) found.push(`${file}: imports '${edge.specifier}' (${reason}): breaks "${rule.name}"`);
      }
    }
  }
  return found;
}

/**
 * The import circles among `files`: each set of files that reach each other through their
 * imports (type-only ones included), sorted, one file importing itself included. A relative
 * `.js` specifier names the `.ts` file beside it; imports of anything outside `files` are no edge.
 */
function importCircles(files: ReadonlyMap<string, string>): string[][] {
  const graph = new Map<string, string[]>();
  for (const [file, text] of files) {
    const targets = importsOf(file, text)
      .map((edge) => edge.internal?.replace(/\.js$/, '.ts'))
      .filter((target): target is string => target !== undefined && files.has(target));
    graph.set(file, [...new Set(targets)]);
  }
  // Tarjan's strongly connected components.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file)!) {
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || graph.get(file)!.includes(file)) circles.push(component.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return circles.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/**
 * Circles still there, each with the reason it is not gone yet: the check below fails on any
 * other circle, and on an entry here that is no circle any more (remove it then).
 */
const KNOWN_CIRCLES: ReadonlyMap<string, string> = new Map([]);

/** All .ts files under `dir` (repo-relative), skipping node_modules. */
function sourceFiles(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (absolute: string): void => {
    for (const entry of readdirSync(absolute, { withFileTypes: true })) {
      const path = join(absolute, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules') walk(path);
      } else if (entry.name.endsWith('.ts')) {
        files.set(relative(ROOT, path).split(sep).join('/'), readFileSync(path, 'utf8'));
      }
    }
  };
  walk(join(ROOT, dir));
  return files;
}

describe('the import rule checker', () => {
  it('reads every kind of import', () => {
    const edges = importsOf(
      'shared/engine/run.ts',
      [
        "import { a } from './a.js';",
        "import type { B } from '../contracts/source.js';",
        "export * from '../drivers/postgres/reader.js';",
        "const m = await import('mysql2/promise');",
        "import '@aws-sdk/client-s3';",
      ].join('\n'),
    );
    expect(edges.map((edge) => edge.internal ?? edge.packageName)).toEqual([
      'shared/engine/a.js',
      'shared/contracts/source.js',
      'shared/drivers/postgres/reader.js',
      'mysql2',
      '@aws-sdk/client-s3',
    ]);
  });

  it('reports each forbidden edge and accepts the allowed ones', () => {
    const files = new Map([
      [
        'shared/contracts/ok.ts',
        "import type { Schema } from '../dataplane/schema.js';\nimport { Table } from 'apache-arrow';",
      ],
      [
        'shared/contracts/bad.ts',
        "import { x } from '../engine/run.js';\nimport { readFileSync } from 'node:fs';\nimport { z } from 'zod';",
      ],
      ['shared/dataplane/bad.ts', "import type { S3Client } from '@aws-sdk/client-s3';"],
      [
        'shared/state/bad.ts',
        "import { handler } from '../../functions/incremental/handler.js';\nimport '../../infra/app.js';",
      ],
      [
        'shared/engine/bad.ts',
        "import postgres from 'postgres';\nimport mysql from 'mysql2/promise';\nimport { r } from '../drivers/mysql/reader.js';",
      ],
      ['shared/engine/ok.ts', "import type { Source } from '../contracts/source.js';"],
      ['shared/drivers/postgres/bad.ts', "import { loop } from '../../engine/page-loop.js';"],
      [
        'shared/drivers/postgres/ok.ts',
        "import postgres from 'postgres';\nimport type { Batch } from '../../dataplane/batch.js';",
      ],
      ['functions/cli/ok.ts', "import { run } from '../../shared/engine/run.js';"],
      [
        'shared/iceberg/bad.ts',
        "import { r } from '../drivers/postgres/reader.js';\nimport { run } from '../engine/run.js';",
      ],
      [
        'shared/iceberg/ok.ts',
        "import { SinkError } from '../contracts/errors.js';\nimport type { ObjectStore } from '../sink/object-store.js';",
      ],
      ['shared/config/ok.ts', "import { driverKinds } from '../drivers/registry.js';"],
      ['shared/config/bad.ts', "import { PostgresSource } from '../drivers/postgres/index.js';"],
      [REDACTION, "import { x } from './log.js';\nimport { URL } from 'node:url';"],
    ]);
    const found = violations(files);
    expect(found.filter((v) => v.includes('/ok.ts'))).toEqual([]);
    expect(found.filter((v) => v.startsWith('shared/contracts/bad.ts'))).toHaveLength(3);
    expect(found.filter((v) => v.startsWith('shared/dataplane/bad.ts'))).toHaveLength(1);
    expect(found.filter((v) => v.startsWith('shared/state/bad.ts'))).toHaveLength(2);
    expect(found.filter((v) => v.startsWith('shared/engine/bad.ts'))).toHaveLength(3);
    expect(found.filter((v) => v.startsWith('shared/drivers/postgres/bad.ts'))).toHaveLength(1);
    expect(found.filter((v) => v.startsWith(REDACTION))).toHaveLength(2);
    expect(found.filter((v) => v.startsWith('shared/config/bad.ts'))).toHaveLength(1);
    expect(found.filter((v) => v.startsWith('shared/iceberg/bad.ts'))).toHaveLength(2);
  });
});

describe('the import circle checker', () => {
  it('finds circles through type-only, dynamic and re-export imports, and nothing else', () => {
    const files = new Map([
      ['shared/a/one.ts', "import type { Two } from './two.js';"],
      ['shared/a/two.ts', "import { one } from './one.js';\nimport { leaf } from '../leaf.js';"],
      ['shared/b/x.ts', "export * from './y.js';"],
      ['shared/b/y.ts', "const z = await import('./z.js');"],
      ['shared/b/z.ts', "import type { X } from './x.js';\nimport 'node:fs';"],
      ['shared/self.ts', "import type { Self } from './self.js';"],
      ['shared/leaf.ts', "import { external } from '../functions/elsewhere.js';"],
      ['shared/chain.ts', "import type { One } from './a/one.js';"],
    ]);
    expect(importCircles(files)).toEqual([
      ['shared/a/one.ts', 'shared/a/two.ts'],
      ['shared/b/x.ts', 'shared/b/y.ts', 'shared/b/z.ts'],
      ['shared/self.ts'],
    ]);
  });
});

describe('the real source tree', () => {
  const files = sourceFiles('shared');

  it('is found (the rules below would pass vacuously on an empty tree)', () => {
    const paths = [...files.keys()];
    expect(paths.length).toBeGreaterThanOrEqual(10);
    for (const seed of [
      'shared/contracts/source.ts',
      'shared/contracts/errors.ts',
      'shared/dataplane/batch.ts',
      REDACTION,
    ]) {
      expect(paths).toContain(seed);
    }
    const edges = [...files].flatMap(([file, text]) => importsOf(file, text));
    expect(edges.length).toBeGreaterThanOrEqual(10);
  });

  it('obeys who-may-import-whom', () => {
    expect(violations(files)).toEqual([]);
  });

  it('has no import circles, type-only imports included, but the known ones', () => {
    const all = new Map([...files, ...sourceFiles('functions'), ...sourceFiles('infra')]);
    const circles = importCircles(all).map((circle) => circle.join(' '));
    expect(circles.filter((circle) => !KNOWN_CIRCLES.has(circle))).toEqual([]);
    expect([...KNOWN_CIRCLES.keys()].filter((circle) => !circles.includes(circle))).toEqual([]);
  });

  it('opens every file with a header comment that says its role', () => {
    const all = new Map([...files, ...sourceFiles('functions'), ...sourceFiles('infra')]);
    const bare = [...all].filter(([, text]) => headerLines(text) < 2).map(([file]) => file);
    expect(bare).toEqual([]);
  });
});

/** How many lines the comment that opens `text` spans (0 when code comes first). */
function headerLines(text: string): number {
  const body = text.replace(/^#!.*\n/, '').trimStart();
  if (body.startsWith('/*')) {
    const end = body.indexOf('*/');
    return end < 0 ? 0 : body.slice(0, end).split('\n').length;
  }
  let n = 0;
  for (const line of body.split('\n')) {
    if (!line.trimStart().startsWith('//')) break;
    n += 1;
  }
  return n;
}

describe('the header check', () => {
  it('counts block and line comments, and nothing that starts with code', () => {
    expect(headerLines('/**\n * Role.\n * Invariant.\n */\nexport const a = 1;\n')).toBe(4);
    expect(headerLines('// Role.\n// Invariant.\nexport const a = 1;\n')).toBe(2);
    expect(headerLines('/** One line. */\nexport const a = 1;\n')).toBe(1);
    expect(headerLines("import x from 'y';\n/**\n * Late.\n */\n")).toBe(0);
  });
});
