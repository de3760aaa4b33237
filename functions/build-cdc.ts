/**
 * Builds the CDC task bundle for the container image: `npx tsx functions/build-cdc.ts OUT_DIR`
 * writes OUT_DIR/index.js (functions/cdc/main.ts bundled by `bundleHandler('cdc', OUT_DIR)`), the
 * Parquet worker and the parquet-wasm binary. The Dockerfile runs it in its build stage; the
 * runtime stage runs `node /app/cdc/index.js`. No spec is bundled: the task gets it at run time
 * (TIDEMARK_SPEC_FILE, or TIDEMARK_SPEC_YAML written to a file by scripts/cdc-entrypoint.sh).
 */
import { resolve } from 'node:path';
import { bundleHandler, HANDLERS, type HandlerName } from './bundle.js';

const out = resolve(process.argv[2] ?? 'dist/cdc');
if (!('cdc' in HANDLERS)) {
  process.stderr.write(
    'tidemark: functions/bundle.ts has no "cdc" handler (HANDLERS.cdc = functions/cdc/main.ts); this build has no CDC entrypoint\n',
  );
  process.exit(1);
}
const bundle = await bundleHandler('cdc' as HandlerName, out);
process.stderr.write(`tidemark: cdc bundle ${bundle.bytes} B + wasm ${bundle.wasmBytes} B in ${out}\n`);
