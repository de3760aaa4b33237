#!/usr/bin/env -S node --initial-old-space-size=128
// The tidemark CLI. Runs the bundled CLI (dist/cli/main.mjs, built by `npm install`'s prepare
// step: functions/build-cli.ts) when it is there, else the TypeScript sources through tsx's
// loader (a checkout installed with --ignore-scripts, or TIDEMARK_FROM_SOURCE=1 while working on
// the sources). functions/cli/main.ts does the work either way. The shebang's node flags are
// functions/cli/node-flags.ts's (why there: see that file).
import { existsSync } from 'node:fs';
import module from 'node:module';

const bundle = new URL('../dist/cli/main.mjs', import.meta.url);
if (!process.env.TIDEMARK_FROM_SOURCE && existsSync(bundle)) {
  // Node >= 22.1 keeps V8's compiled code of the bundle on disk (NODE_COMPILE_CACHE, else
  // <tmpdir>/node-compile-cache): every run after the first starts ~50 ms sooner.
  // NODE_DISABLE_COMPILE_CACHE=1 turns it off; older Nodes have no such function.
  module.enableCompileCache?.();
  await import(bundle.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../functions/cli/main.ts');
}
