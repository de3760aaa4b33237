/**
 * `tidemark invoke`: our `sam local invoke`. Bundles the handler with esbuild exactly as deployed
 * (functions/bundle.ts), then runs the bundle in a FRESH Node process with a Lambda-like event and
 * context, deadline included: `getRemainingTimeInMillis()` counts down from the timeout and the
 * process is killed when it passes, as Lambda would.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { bundleHandler, type HandlerName } from '../bundle.js';

export interface InvokeOptions {
  readonly handler: HandlerName;
  readonly specFile: string;
  readonly event: unknown;
  readonly timeoutMs: number;
  /** Extra environment for the function process (endpoints, credentials for emulators). */
  readonly env?: NodeJS.ProcessEnv;
  /** Reuse a bundle directory (tests bundle once). */
  readonly bundleDir?: string;
}

export interface InvokeResult {
  readonly response: unknown;
  readonly error: string | undefined;
  readonly durationMs: number;
  readonly timedOut: boolean;
  readonly logs: string;
}

// The runner mimics the Lambda Node runtime's call: handler(event, context) with a deadline.
const RUNNER = `
const { handler } = require(process.env.TM_BUNDLE);
const deadline = Date.now() + Number(process.env.TM_TIMEOUT_MS);
// Lambda freezes the function at its deadline; here the process ends, which is what a timed-out
// invocation looks like to the state and the lake (no more writes, no commit).
setTimeout(() => { process.stdout.write('\\n@@TM_TIMEOUT@@\\n'); process.exit(124); }, Number(process.env.TM_TIMEOUT_MS)).unref();
const context = {
  awsRequestId: process.env.TM_REQUEST_ID,
  functionName: 'tidemark-local-' + process.env.TM_HANDLER,
  functionVersion: '$LATEST',
  invokedFunctionArn: 'arn:aws:lambda:local:000000000000:function:tidemark-local',
  memoryLimitInMB: '1024',
  logGroupName: '/aws/lambda/tidemark-local',
  logStreamName: 'local',
  callbackWaitsForEmptyEventLoop: false,
  getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
};
Promise.resolve(handler(JSON.parse(process.env.TM_EVENT), context)).then(
  (r) => { process.stdout.write('\\n@@TM_RESULT@@' + JSON.stringify(r) + '\\n'); process.exit(0); },
  (e) => { process.stdout.write('\\n@@TM_ERROR@@' + JSON.stringify({ name: e && e.name, message: e && e.message }) + '\\n'); process.exit(1); },
);
`;

export async function invokeLocal(opts: InvokeOptions): Promise<InvokeResult> {
  const dir = opts.bundleDir ?? mkdtempSync(join(tmpdir(), 'tidemark-invoke-'));
  const bundle = opts.bundleDir
    ? { entry: join(dir, 'index.js') }
    : await bundleHandler(opts.handler, dir, opts.specFile);
  const runner = join(dir, 'runner.cjs');
  writeFileSync(runner, RUNNER);
  const started = Date.now();
  const child = spawn(process.execPath, [runner], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      ...opts.env,
      TM_BUNDLE: bundle.entry,
      TM_TIMEOUT_MS: String(opts.timeoutMs),
      TM_REQUEST_ID: randomUUID(),
      TM_HANDLER: opts.handler,
      TM_EVENT: JSON.stringify(opts.event),
      TIDEMARK_SPEC_FILE: resolve(opts.specFile),
      AWS_LAMBDA_FUNCTION_NAME: `tidemark-local-${opts.handler}`,
    },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  let timedOut = false;
  // Backstop only: the runner ends itself at the deadline (measured from the handler call, as
  // Lambda measures it, after the bundle has loaded).
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, opts.timeoutMs + 10_000);
  await new Promise<void>((res) => child.on('close', () => res()));
  clearTimeout(timer);
  const durationMs = Date.now() - started;
  if (out.includes('@@TM_TIMEOUT@@')) timedOut = true;
  const logs = out.replace(/\n@@TM_(RESULT|ERROR|TIMEOUT)@@.*\n?$/s, '') + err;
  const result = /@@TM_RESULT@@(.*)/.exec(out);
  const error = /@@TM_ERROR@@(.*)/.exec(out);
  if (result) return { response: JSON.parse(result[1]!), error: undefined, durationMs, timedOut, logs };
  const message = error
    ? (JSON.parse(error[1]!) as { message: string }).message
    : timedOut
      ? `Task timed out after ${(opts.timeoutMs / 1000).toFixed(2)} seconds`
      : `function process exited without a result: ${err.trim().split('\n').slice(-3).join(' | ')}`;
  return { response: undefined, error: message, durationMs, timedOut, logs };
}
