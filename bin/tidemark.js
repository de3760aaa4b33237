#!/usr/bin/env node
// The tidemark CLI. Runs the bundled CLI (dist/cli/main.mjs, built by `npm install`'s prepare
// step: functions/build-cli.ts) when it is there, else the TypeScript sources through tsx's
// loader (a checkout installed with --ignore-scripts, or TIDEMARK_FROM_SOURCE=1 while working on
// the sources). functions/cli/main.ts does the work either way.
import { existsSync } from 'node:fs';

const bundle = new URL('../dist/cli/main.mjs', import.meta.url);
if (!process.env.TIDEMARK_FROM_SOURCE && existsSync(bundle)) {
  await import(bundle.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../functions/cli/main.ts');
}
