/**
 * Starts and stops the local AWS emulators (dynalite for DynamoDB, s3rver for S3) in one child
 * process, `aws-emulators-process.mjs`, which runs with `--openssl-legacy-provider` (see there).
 *
 * Owns: that child, by pid. Never imports vitest; never binds anything but 127.0.0.1.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ownProcess, stopProcess } from '../../shared/local/owned-processes.js';

const CHILD_SCRIPT = fileURLToPath(new URL('./aws-emulators-process.mjs', import.meta.url));
const STOP_GRACE_MS = 5_000;

export interface AwsEmulatorOptions {
  /** Serve DynamoDB (dynalite, in memory). */
  readonly dynamo: boolean;
  /** Serve S3 (s3rver) with this bucket created; undefined: no S3. */
  readonly s3Bucket: string | undefined;
  /** Where s3rver keeps objects; the caller removes it after `stop()`. */
  readonly s3Dir: string;
  /** Default 30 s. */
  readonly startTimeoutMs?: number;
  /** Fixed ports (default: free ones). */
  readonly dynamoPort?: number;
  readonly s3Port?: number;
  /** Keep dynalite's tables in this folder instead of in memory. */
  readonly dynamoPath?: string;
  /** Let the emulators outlive this process's event loop? Default false: unref'd like the harness wants. */
  readonly keepAlive?: boolean;
}

export interface AwsEmulators {
  /** e.g. `http://127.0.0.1:41235`, when `dynamo` was asked for. */
  readonly dynamoEndpoint: string | undefined;
  /** e.g. `http://127.0.0.1:41236` (path-style buckets), when `s3Bucket` was given. */
  readonly s3Endpoint: string | undefined;
  readonly pid: number;
  /** Stops the child and waits for it. Idempotent. */
  stop(): Promise<void>;
}

interface ReadyMessage {
  readonly dynamoEndpoint?: string;
  readonly s3Endpoint?: string;
}

/** Spawns the emulator process and resolves with its endpoints once both listen. */
export async function startAwsEmulators(options: AwsEmulatorOptions): Promise<AwsEmulators> {
  const args = ['--openssl-legacy-provider', CHILD_SCRIPT, '--dir', options.s3Dir];
  if (options.dynamo) args.push('--dynamo');
  if (options.s3Bucket !== undefined) args.push('--s3-bucket', options.s3Bucket);
  if (options.dynamoPort !== undefined) args.push('--dynamo-port', String(options.dynamoPort));
  if (options.s3Port !== undefined) args.push('--s3-port', String(options.s3Port));
  if (options.dynamoPath !== undefined) args.push('--dynamo-path', options.dynamoPath);
  const timeoutMs = options.startTimeoutMs ?? 30_000;

  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`could not spawn ${process.execPath} ${CHILD_SCRIPT}`);
  const disown = ownProcess({ name: 'aws-emulators', pid, signal: 'SIGTERM', graceMs: STOP_GRACE_MS });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr = (stderr + text).slice(-4_000);
  });

  let ready: ReadyMessage;
  try {
    ready = await new Promise<ReadyMessage>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the AWS emulators did not start within ${timeoutMs} ms`)),
        timeoutMs,
      );
      child.once('message', (message) => {
        clearTimeout(timer);
        resolve(message as ReadyMessage);
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`the AWS emulator process exited during startup (code ${code}, signal ${signal})`));
      });
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
  } catch (error) {
    await stopProcess(pid, 'SIGKILL', 0);
    disown();
    throw new Error(`${(error as Error).message}\n--- stderr ---\n${stderr}`, { cause: error });
  }

  // Neither the process nor its IPC channel may keep vitest alive; stop() or the exit hook ends it.
  if (!options.keepAlive) {
    child.unref();
    child.channel?.unref();
    (child.stderr as unknown as { unref?: () => void } | null)?.unref?.();
  }

  let stopped: Promise<void> | undefined;
  return {
    dynamoEndpoint: ready.dynamoEndpoint,
    s3Endpoint: ready.s3Endpoint,
    pid,
    stop: () => {
      stopped ??= stopProcess(pid, 'SIGTERM', STOP_GRACE_MS).then(disown);
      return stopped;
    },
  };
}
