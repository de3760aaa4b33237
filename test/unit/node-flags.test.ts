/**
 * The CLI's node flags (functions/cli/node-flags.ts) are what every way of starting the CLI
 * passes: the shebang of bin/tidemark.js (through `env -S`), and the package's `start` and
 * `tidemark` scripts. A flag added in one place and not the others fails here. The flags are
 * also started for real: a node that does not know one exits with an error.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI_NODE_FLAGS } from '../../functions/cli/node-flags.js';
import { repoRoot } from '../../functions/root.js';

const root = repoRoot();
const flags = CLI_NODE_FLAGS.join(' ');

describe('the CLI node flags', () => {
  it('are the shebang of bin/tidemark.js', () => {
    const first = readFileSync(join(root, 'bin/tidemark.js'), 'utf8').split('\n')[0];
    expect(first).toBe(`#!/usr/bin/env -S node ${flags}`);
  });

  it('are in the start and tidemark scripts, in front of bin/tidemark.js', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(pkg.scripts.start).toBe(`node ${flags} bin/tidemark.js demo`);
    expect(pkg.scripts.tidemark).toBe(`node ${flags} bin/tidemark.js`);
  });

  it('start this node, and set the old generation it starts with', () => {
    const out = execFileSync(
      process.execPath,
      [...CLI_NODE_FLAGS, '-p', "require('node:v8').getHeapStatistics().total_available_size > 0"],
      { encoding: 'utf8' },
    );
    expect(out.trim()).toBe('true');
    // A V8 flag node does not know is an error, so a misspelt flag cannot pass as a no-op.
    expect(() =>
      execFileSync(process.execPath, ['--initial-old-space-sise=128', '-e', '0'], { stdio: 'pipe' }),
    ).toThrow();
  });
});
