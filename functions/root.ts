/**
 * The checkout's root (the folder of tidemark's package.json), found from this module's own
 * location, so the same code works from the TypeScript sources and from the bundled CLI
 * (dist/cli/main.mjs, functions/build-cli.ts), which sit at different depths.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | undefined;

export function repoRoot(): string {
  if (cached) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'tidemark') {
      cached = dir;
      return dir;
    }
    const up = dirname(dir);
    if (up === dir)
      throw new Error(`tidemark's package.json was not found above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}
