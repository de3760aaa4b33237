/**
 * Bundles a Lambda handler (or the CDC task's entrypoint) with esbuild exactly as `cdk deploy` ships it: one CommonJS file
 * (parquet-wasm's node build needs __dirname), the Parquet encoder's worker thread beside it, the
 * parquet-wasm .wasm copied beside both, and the pipeline spec as `tidemark.yaml`. `tidemark invoke` and the CDK app both use this, so the local
 * invoke tests the same artifact that is deployed.
 */
import { copyFileSync, mkdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { build } from 'esbuild';
import { repoRoot } from './root.js';

const ROOT = repoRoot();

export interface BundleResult {
  readonly dir: string;
  readonly entry: string;
  readonly bytes: number;
  readonly wasmBytes: number;
}

/** The handlers that can be bundled, by name. */
export const HANDLERS = {
  incremental: 'functions/incremental/handler.ts',
  /** The CDC task's entrypoint (Fargate): run as `node index.js`. */
  cdc: 'functions/cdc/main.ts',
} as const;
export type HandlerName = keyof typeof HANDLERS;

export async function bundleHandler(
  name: HandlerName,
  outDir: string,
  specFile?: string,
): Promise<BundleResult> {
  mkdirSync(outDir, { recursive: true });
  const entry = join(outDir, 'index.js');
  await build({
    entryPoints: [join(ROOT, HANDLERS[name])],
    outfile: entry,
    bundle: true,
    platform: 'node',
    target: 'node22',
    format: 'cjs',
    minify: true,
    sourcemap: false,
    legalComments: 'none',
    // The Lambda runtime ships the AWS SDK v3, but pinning our own keeps behaviour identical
    // between local invoke and AWS; it costs ~1 MB.
    external: [],
    logLevel: 'error',
  });
  // The Parquet encoder's worker thread, bundled on its own beside index.js (it loads the same
  // .wasm from the same directory).
  await build({
    entryPoints: [join(ROOT, 'shared/sink/parquet-worker.cjs')],
    outfile: join(outDir, 'parquet-worker.cjs'),
    bundle: true,
    platform: 'node',
    target: 'node22',
    format: 'cjs',
    minify: true,
    legalComments: 'none',
    logLevel: 'error',
  });
  const require = createRequire(import.meta.url);
  const wasmSrc = join(dirname(require.resolve('parquet-wasm/node')), 'parquet_wasm_bg.wasm');
  const wasmDst = join(outDir, 'parquet_wasm_bg.wasm');
  copyFileSync(wasmSrc, wasmDst);
  if (specFile) copyFileSync(specFile, join(outDir, 'tidemark.yaml'));
  return { dir: outDir, entry, bytes: statSync(entry).size, wasmBytes: statSync(wasmDst).size };
}
