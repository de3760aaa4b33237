/**
 * The CDC task's entrypoint (Fargate): the CDC runner of `tidemark cdc`
 * (shared/pipeline/cdc-runner.ts) with JSON logs, EMF metrics through the logger's `metric()`,
 * and an HTTP health endpoint for the container's health check.
 *
 * Configuration (environment):
 *   TIDEMARK_SPEC_FILE     the spec [tidemark.yaml beside the bundle]; or TIDEMARK_SPEC, inline JSON
 *   TIDEMARK_CDC_SOURCE    capture only this source [every source with mode: cdc tables]
 *   TIDEMARK_HEALTH_HOST   where the health endpoint listens [127.0.0.1; a container sets 0.0.0.0]
 *   TIDEMARK_HEALTH_PORT   its port [8080; 0 picks a free one, logged as `health endpoint`]
 *   TIDEMARK_REGISTER      for tests and plugins: a module (path or file: URL) imported before the
 *                          spec is parsed; its `register({ registerDriver, arrow })` export (or
 *                          default export) adds driver kinds. The bundle has its own copy of the
 *                          registry and of Apache Arrow, so the module is handed both (`RegisterApi`)
 *                          and must build its batches with that `arrow`.
 *
 * The health endpoint answers every GET with JSON: 200 `{state: 'starting'|'standby'|'active'|
 * 'stopped', sources: [...]}` while healthy (a standby waiting for the lease IS healthy), 503
 * `{state: 'failing', error, sources}` once the runner failed (the process then exits 1 after a
 * short grace, so the health check sees it).
 *
 * No lease holder is ever judged dead here (a task cannot see another task's process): a crashed
 * task's lease is taken over when it expires (leaseTtlSeconds).
 *
 * SIGTERM (ECS stopping the task) / SIGINT drain: stop reading, flush, commit, acknowledge,
 * release, within stopTimeoutSeconds; then exit 0. A second signal exits at once (143 / 130).
 */
import { createServer, type Server } from 'node:http';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as arrow from 'apache-arrow';
import { forgetSecrets } from '../../shared/config/secrets.js';
import { loadSpecFromEnv, type Spec } from '../../shared/config/spec.js';
import { ConfigError, codeOf } from '../../shared/contracts/errors.js';
import { registerDriver } from '../../shared/drivers/registry.js';
import { createLogger, type Logger } from '../../shared/observability/log.js';
import { redact } from '../../shared/observability/redact.js';
import { CdcStatusBoard, runCdcSources, selectCdcSources } from '../../shared/pipeline/cdc-runner.js';

/** What a TIDEMARK_REGISTER module is handed. */
export interface RegisterApi {
  readonly registerDriver: typeof registerDriver;
  /**
   * The Apache Arrow this process writes with. A driver's batches must be built with it: Arrow
   * objects of another copy of the library (a plugin's own node_modules) are not recognized.
   */
  readonly arrow: typeof arrow;
}

const DEFAULT_HEALTH_HOST = '127.0.0.1';
const DEFAULT_HEALTH_PORT = 8080;
/** How long a failed runner keeps answering 503 before the process exits. */
const FAILING_GRACE_MS = Number(process.env.TIDEMARK_FAILING_GRACE_MS ?? 2000);

function loadSpec(): Spec {
  return loadSpecFromEnv(typeof __dirname === 'string' ? __dirname : process.cwd());
}

/** Imports the TIDEMARK_REGISTER module and hands it `registerDriver`. */
async function loadRegistrations(spec: string): Promise<void> {
  const url = spec.startsWith('file:') ? spec : pathToFileURL(isAbsolute(spec) ? spec : resolve(spec)).href;
  // A real dynamic import, also in the CommonJS bundle (esbuild would turn `import()` into require).
  const load = new Function('u', 'return import(u)') as (u: string) => Promise<Record<string, unknown>>;
  const mod = await load(url);
  const register = (mod.register ?? mod.default) as ((api: RegisterApi) => unknown) | undefined;
  if (typeof register !== 'function')
    throw new ConfigError('TIDEMARK_REGISTER', `${spec} exports no register({ registerDriver }) function`);
  await register({ registerDriver, arrow });
}

/** The health endpoint over the runner's status board. */
function startHealth(board: CdcStatusBoard, failure: () => unknown, logger: Logger): Promise<Server> {
  const host = process.env.TIDEMARK_HEALTH_HOST || DEFAULT_HEALTH_HOST;
  const port = Number(process.env.TIDEMARK_HEALTH_PORT || DEFAULT_HEALTH_PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new ConfigError('TIDEMARK_HEALTH_PORT', 'must be a port number, 0 to 65535');
  const server = createServer((_req, res) => {
    const failed = failure();
    const sources = board.all();
    const state = failed !== undefined ? 'failing' : board.overall();
    // The task's error once the runner has thrown it; before that (its source is still closing)
    // the failing source's own, so a 503 always says why.
    const error =
      failed !== undefined
        ? { code: codeOf(failed), message: redact(failed instanceof Error ? failed.message : String(failed)) }
        : state === 'failing'
          ? sources.find((s) => s.state === 'failing' && s.error !== undefined)?.error
          : undefined;
    const body = { state, sources, ...(error !== undefined ? { error } : {}) };
    res.writeHead(state === 'failing' ? 503 : 200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  return new Promise((resolvePromise, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const addr = server.address();
      logger.info('health endpoint', {
        host,
        port: typeof addr === 'object' && addr ? addr.port : port,
      });
      resolvePromise(server);
    });
  });
}

export async function main(): Promise<number> {
  const logger = createLogger({ json: true });
  const stop = new AbortController();
  let received: NodeJS.Signals | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    if (received) process.exit(sig === 'SIGTERM' ? 143 : 130);
    received = sig;
    logger.warn(`${sig}: draining: flush, commit, acknowledge, release the lease`);
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let server: Server | undefined;
  let failed: unknown;
  try {
    if (process.env.TIDEMARK_REGISTER) await loadRegistrations(process.env.TIDEMARK_REGISTER);
    const spec = loadSpec();
    const only = process.env.TIDEMARK_CDC_SOURCE || undefined;
    const board = new CdcStatusBoard(selectCdcSources(spec, only));
    server = await startHealth(board, () => failed, logger);
    try {
      const summaries = await runCdcSources(spec, {
        logger,
        board,
        signal: stop.signal,
        ...(only ? { source: only } : {}),
      });
      logger.info('the CDC task stopped', { summaries });
      return 0;
    } catch (e) {
      failed = e;
      logger.error('the CDC task failed', { code: codeOf(e), error: e });
      // Answer 503 for a moment so the health check sees the failure, then exit.
      await new Promise((r) => setTimeout(r, FAILING_GRACE_MS));
      return 1;
    }
  } catch (e) {
    logger.error('the CDC task could not start', {
      code: codeOf(e),
      error: e,
    });
    return 1;
  } finally {
    forgetSecrets();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    server?.closeAllConnections();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`${redact(String(e))}\n`);
    process.exitCode = 1;
  },
);
