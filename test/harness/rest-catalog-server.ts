/**
 * Starts and stops the Iceberg REST catalog test server (test/readers/RestCatalogServer.java over
 * the jars of test/readers/rest-catalog-jars.txt in `.readers/rest-catalog/`, docs/test-readers.md)
 * for the test file that needs a real REST catalog: Iceberg's own server side of the protocol over
 * a JdbcCatalog on SQLite, writing metadata files into a warehouse folder on this machine.
 *
 * Owns: that process, by pid (stopped by `stop()`, or at exit through owned-processes), on a free
 * 127.0.0.1 port, `java` from PATH; ready once it prints `ready <port>` and `GET /v1/config`
 * answers. `restCatalogMissing` tells a test to skip, with the install command, when java or the
 * jars are missing. Never binds anything but 127.0.0.1.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../shared/local/free-port.js';
import { ownProcess, stopProcess } from '../../shared/local/owned-processes.js';
import { REPO_ROOT } from './readers.js';

export const REST_CATALOG_JARS = join(REPO_ROOT, '.readers', 'rest-catalog');
const LAUNCHER = join(REPO_ROOT, 'test', 'readers', 'RestCatalogServer.java');
/** Compiling the launcher and starting Jetty takes a few seconds; a loaded CI machine more. */
const START_TIMEOUT_MS = 90_000;
const STOP_GRACE_MS = 5_000;

/** Why the REST catalog server cannot run here, or undefined when it can. */
export const restCatalogMissing: string | undefined = (() => {
  if (spawnSync('java', ['-version'], { stdio: 'ignore' }).status !== 0)
    return 'java is not on PATH (Java 17 runs the Iceberg REST catalog test server)';
  const jars = existsSync(REST_CATALOG_JARS) ? readdirSync(REST_CATALOG_JARS) : [];
  if (!jars.some((f) => f.startsWith('iceberg-core-') && f.endsWith('-tests.jar')))
    return `the Iceberg REST catalog server's jars are not in ${REST_CATALOG_JARS}; run bash scripts/install-test-readers.sh`;
  return undefined;
})();

export interface RestCatalogServer {
  /** e.g. `http://127.0.0.1:41237`: the catalog's base URI (`/v1/config` below it). */
  readonly uri: string;
  readonly pid: number;
  /** Stops the server and waits for it. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Spawns the server with its catalog database in `warehouse` (a folder; tables get the location
 * their create request names) and resolves once it answers. `token`: every request must then carry
 * `Authorization: Bearer <token>` (401 otherwise).
 */
export async function startRestCatalogServer(options: {
  readonly warehouse: string;
  readonly token?: string;
}): Promise<RestCatalogServer> {
  const port = await freePort();
  const child = spawn('java', ['-cp', `${REST_CATALOG_JARS}/*`, LAUNCHER, options.warehouse, String(port)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...(options.token ? { REST_CATALOG_TOKEN: options.token } : {}) },
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error('could not spawn java for the REST catalog server');
  const disown = ownProcess({ name: 'rest-catalog-server', pid, signal: 'SIGTERM', graceMs: STOP_GRACE_MS });
  let output = '';
  const keep = (text: string) => {
    output = (output + text).slice(-4_000);
  };
  child.stdout.setEncoding('utf8').on('data', keep);
  child.stderr.setEncoding('utf8').on('data', keep);
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  const uri = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (output.includes(`ready ${port}`)) {
      try {
        const reply = await fetch(`${uri}/v1/config`, {
          headers: options.token ? { authorization: `Bearer ${options.token}` } : {},
        });
        if (reply.ok) break;
      } catch {
        // not answering yet
      }
    }
    if (exited || Date.now() > deadline) {
      await stopProcess(pid, 'SIGKILL', 0);
      disown();
      throw new Error(
        `the REST catalog server did not answer at ${uri} (${exited ? 'it exited' : `within ${START_TIMEOUT_MS} ms`})\n--- output ---\n${output}`,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  child.unref();
  (child.stdout as unknown as { unref?: () => void }).unref?.();
  (child.stderr as unknown as { unref?: () => void }).unref?.();
  let stopped: Promise<void> | undefined;
  return {
    uri,
    pid,
    stop: () => {
      stopped ??= stopProcess(pid, 'SIGTERM', STOP_GRACE_MS).then(disown);
      return stopped;
    },
  };
}
