/**
 * The CDK app (`cdk.json`: `npx tsx infra/app.ts`): loads the pipeline spec, bundles the
 * incremental handler with esbuild (no Docker: functions/bundle.ts, the same artifact
 * `tidemark invoke` runs) and synthesizes one stack, `tidemark-<pipeline>`: the incremental Lambda
 * and, for cdc tables, one Fargate service per source whose image is the repo's Dockerfile as an
 * image asset (synth only stages the build context; `cdk deploy` needs Docker to build it).
 *
 * Spec path: env TIDEMARK_SPEC_FILE, else context `tidemark:spec` (cdk.json sets `tidemark.yaml`,
 * `-c tidemark:spec=...` overrides it), else `tidemark.yaml`. The environment wins because cdk.json
 * always supplies the context value, so the variable could otherwise never take effect.
 *
 * The function and the tasks get the same text: the spec file without its comments
 * (`deployedSpecText`), so a comment never reaches the template or the asset.
 *
 * Never opens a database and never calls AWS; a wrong spec fails synth with the ConfigError
 * message (field and fix), not a stack trace.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { App } from 'aws-cdk-lib';
import { bundleHandler } from '../functions/bundle.js';
import { TidemarkError } from '../shared/contracts/errors.js';
import { redact } from '../shared/observability/redact.js';
import { CONTEXT } from './context.js';
import { deployedSpecText, loadDeployableSpec } from './deploy-spec.js';
import { assertDeployableSpec, TidemarkStack } from './incremental-stack.js';

const app = new App();
const specFile = resolve(
  process.env.TIDEMARK_SPEC_FILE ??
    (app.node.tryGetContext(CONTEXT.spec) as string | undefined) ??
    'tidemark.yaml',
);
// The bundle is staged into cdk.out by the asset system during synth; the temp copy is removed after.
const work = mkdtempSync(join(tmpdir(), 'tidemark-cdk-'));
const bundleDir = join(work, 'bundle');

try {
  const spec = loadDeployableSpec(specFile);
  assertDeployableSpec(spec);
  const specText = deployedSpecText(readFileSync(specFile, 'utf8'));
  const deployedSpecFile = join(work, 'tidemark.yaml');
  writeFileSync(deployedSpecFile, specText);
  const bundle = await bundleHandler('incremental', bundleDir, deployedSpecFile);
  process.stderr.write(
    `tidemark: pipeline ${spec.pipeline} from ${specFile}; incremental bundle ${bundle.bytes} B + wasm ${bundle.wasmBytes} B\n`,
  );
  new TidemarkStack(app, `tidemark-${spec.pipeline}`, {
    spec,
    bundleDir,
    specText,
    description: `tidemark pipeline ${spec.pipeline}: sync to ${spec.lake.uri}`,
    env: { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
  });
  app.synth();
} catch (e) {
  if (!(e instanceof TidemarkError)) throw e;
  process.stderr.write(`tidemark: ${redact(e.message)}\n`);
  process.exitCode = 1;
} finally {
  rmSync(work, { recursive: true, force: true });
}
