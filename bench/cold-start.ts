/**
 * Cold start of the incremental Lambda bundle: bundles the handler exactly as deployed, then
 * measures in fresh Node processes (median of N) the time to load the bundle (`require`, which
 * compiles parquet-wasm and loads Arrow and the AWS SDK) against a bare `node -e ""` baseline
 * measured in the same run. Prints bundle sizes too, and the zipped asset's.
 *
 *   npm run bench -- cold-start [--runs N]   (default 7)
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleHandler } from '../functions/bundle.js';

// Without --runs, indexOf is -1 and argv[0] (the node binary) used to be parsed as NaN: 0 runs.
const runsAt = process.argv.indexOf('--runs');
const runs = runsAt === -1 ? 7 : Number(process.argv[runsAt + 1]);
if (!Number.isInteger(runs) || runs < 1) {
  console.error(`--runs needs a positive integer, got ${JSON.stringify(process.argv[runsAt + 1] ?? '')}`);
  process.exit(2);
}
const dir = mkdtempSync(join(tmpdir(), 'tidemark-cold-'));
const b = await bundleHandler('incremental', dir);

function wallMs(args: string[]): number {
  const t = process.hrtime.bigint();
  const r = spawnSync(process.execPath, args, { cwd: dir, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
  return Number(process.hrtime.bigint() - t) / 1e6;
}
function inProcessMs(): number {
  const r = spawnSync(
    process.execPath,
    [
      '-e',
      `const t=process.hrtime.bigint();require(${JSON.stringify(b.entry)});console.log(Number(process.hrtime.bigint()-t)/1e6)`,
    ],
    { cwd: dir, encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(r.stderr);
  return Number(r.stdout.trim());
}
const median = (xs: number[]) => xs.sort((a, c) => a - c)[Math.floor(xs.length / 2)]!;

const bare: number[] = [];
const whole: number[] = [];
const load: number[] = [];
for (let i = 0; i < runs; i++) {
  bare.push(wallMs(['-e', '']));
  whole.push(wallMs(['-e', `require(${JSON.stringify(b.entry)})`]));
  load.push(inProcessMs());
}
console.log(
  `bundle: index.js ${(b.bytes / 1e6).toFixed(2)} MB, parquet_wasm_bg.wasm ${(b.wasmBytes / 1e6).toFixed(2)} MB`,
);
// The asset as uploaded is a zip of the bundle directory (deflate, maximum level as CDK's asset
// zipping uses); /usr/bin/zip makes the same kind of archive.
const zipped = join(mkdtempSync(join(tmpdir(), 'tidemark-zip-')), 'asset.zip');
const zip = spawnSync('zip', ['-r', '-q', '-9', zipped, '.'], { cwd: dir, encoding: 'utf8' });
console.log(
  zip.status === 0
    ? `asset zipped (zip -9 of the bundle directory): ${(statSync(zipped).size / 1e6).toFixed(2)} MB`
    : `asset zipped: not measured (zip: ${zip.error?.message ?? zip.stderr.trim()})`,
);
console.log(`median of ${runs}:`);
console.log(`  node -e ""            ${median(bare).toFixed(0)} ms (baseline)`);
console.log(
  `  node + load bundle    ${median(whole).toFixed(0)} ms (${(median(whole) / median(bare)).toFixed(2)}x baseline)`,
);
console.log(`  require(bundle) only  ${median(load).toFixed(0)} ms`);
