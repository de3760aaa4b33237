/**
 * Starts and stops a moto server (`.venv-readers/bin/moto_server`, docs/test-readers.md) for the
 * test file that needs AWS behaviour the harness's s3rver and dynalite do not have: S3 conditional
 * writes (`If-None-Match: *` answered 412), Glue. One server per test file, on a free 127.0.0.1
 * port, ready once `GET /moto-api/data.json` answers.
 *
 * Owns: that process, by pid (stopped by `stop()`, or at exit through owned-processes), and
 * `motoS3Client`, an S3 client for it. Never binds anything but 127.0.0.1. `motoUnavailable()`
 * tells a test to skip, with the install command, when the readers' venv is not installed.
 *
 * moto answers a successful PutObject / DeleteObject with an empty body typed `text/html`
 * (Flask's default), which the S3 stores' reply guard (shared/aws/service-guard.ts) rightly takes
 * for a web server; S3 sends no such type. `motoS3Client` drops the type of empty 2xx replies, and
 * nothing else.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { S3Client } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { freePort } from '../../shared/local/free-port.js';
import { ownProcess, stopProcess } from '../../shared/local/owned-processes.js';
import { READERS_BIN } from './readers.js';

const MOTO_SERVER = join(READERS_BIN, 'moto_server');
const START_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 5_000;
/** The credentials and region every client of the server uses (moto accepts any). */
export const MOTO_CREDENTIALS = { accessKeyId: 'testing', secretAccessKey: 'testing' } as const;
export const MOTO_REGION = 'us-east-1';

/** Why moto cannot run here, or undefined when it can. */
export function motoUnavailable(): string | undefined {
  return existsSync(MOTO_SERVER)
    ? undefined
    : `moto is not installed (${MOTO_SERVER} is missing): run bash scripts/install-test-readers.sh`;
}

export interface MotoServer {
  /** e.g. `http://127.0.0.1:41237`: S3 (path style), Glue and DynamoDB at once. */
  readonly endpoint: string;
  readonly pid: number;
  /** Stops the server and waits for it. Idempotent. */
  stop(): Promise<void>;
}

/** Spawns moto_server and resolves once it answers. */
export async function startMotoServer(): Promise<MotoServer> {
  const port = await freePort();
  const child = spawn(MOTO_SERVER, ['-H', '127.0.0.1', '-p', String(port)], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, AWS_EC2_METADATA_DISABLED: 'true' },
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`could not spawn ${MOTO_SERVER}`);
  const disown = ownProcess({ name: 'moto_server', pid, signal: 'SIGTERM', graceMs: STOP_GRACE_MS });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr = (stderr + text).slice(-4_000);
  });
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    try {
      const reply = await fetch(`${endpoint}/moto-api/data.json`);
      if (reply.ok) break;
    } catch {
      // not listening yet
    }
    if (exited || Date.now() > deadline) {
      await stopProcess(pid, 'SIGKILL', 0);
      disown();
      throw new Error(
        `moto_server did not answer at ${endpoint} (${exited ? 'it exited' : `within ${START_TIMEOUT_MS} ms`})\n--- stderr ---\n${stderr}`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.unref();
  (child.stderr as unknown as { unref?: () => void } | null)?.unref?.();
  let stopped: Promise<void> | undefined;
  return {
    endpoint,
    pid,
    stop: () => {
      stopped ??= stopProcess(pid, 'SIGTERM', STOP_GRACE_MS).then(disown);
      return stopped;
    },
  };
}

/** Drops the `text/html` type moto puts on empty 2xx replies (see the header). */
class MotoHttpHandler extends NodeHttpHandler {
  override async handle(
    ...args: Parameters<NodeHttpHandler['handle']>
  ): ReturnType<NodeHttpHandler['handle']> {
    const out = await super.handle(...args);
    const { response } = out;
    const type = Object.keys(response.headers).find((k) => k.toLowerCase() === 'content-type');
    const length = Object.entries(response.headers).find(([k]) => k.toLowerCase() === 'content-length')?.[1];
    if (
      response.statusCode >= 200 &&
      response.statusCode < 300 &&
      type &&
      length === '0' &&
      /html/.test(response.headers[type]!)
    )
      delete response.headers[type];
    return out;
  }
}

/** An S3 client for `endpoint` (path style, moto's credentials, checksums only where required). */
export function motoS3Client(endpoint: string): S3Client {
  return new S3Client({
    endpoint,
    region: MOTO_REGION,
    credentials: MOTO_CREDENTIALS,
    forcePathStyle: true,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    requestHandler: new MotoHttpHandler(),
  });
}
