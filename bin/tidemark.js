#!/usr/bin/env node
// The tidemark CLI. Runs the TypeScript sources through tsx's loader, so a checkout needs no
// build step; functions/cli/main.ts does the work.
import { register } from 'tsx/esm/api';

register();
await import('../functions/cli/main.ts');
