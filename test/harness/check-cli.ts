/**
 * The real `tidemark` bin in a child process, for the `tidemark check` tests (check.test.ts,
 * check-iceberg.test.ts): a spec written to a folder of the caller's, the human check lines of
 * stdout parsed, and the `--json` lines parsed.
 *
 * Owns: the child's environment (emulator credentials unless external endpoints bring their own;
 * the SDK's Node-version warning off, so stderr carries tidemark's own errors only) and the
 * parsing of the check printer's two forms (functions/cli/commands/check.ts). Never starts a server.
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { externalServers } from './env.js';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'tidemark.js');

/** One human check line: `<status> <subject> <check>: <message>`. */
export interface CheckLineText {
  status: 'ok' | 'warn' | 'fail';
  subject: string;
  check: string;
  message: string;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The human check lines of stdout (without the summary line). */
  lines: CheckLineText[];
}

/** Credentials for the emulators (s3rver checks its own key pair); external endpoints use the environment's. */
export function emulatorEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    AWS_REGION: process.env.AWS_REGION ?? 'us-east-1',
    // The SDK warns on stderr about Node 20's end of support; stderr here is for tidemark's own errors.
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  };
  const ext = externalServers();
  if (!(ext.s3Endpoint || ext.dynamoEndpoint) || !process.env.AWS_ACCESS_KEY_ID) {
    env.AWS_ACCESS_KEY_ID = 'S3RVER';
    env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
  }
  return env;
}

/**
 * Runs the real bin with `args` and `-c <dir>/tidemark.json` (`spec` written there), in `dir`;
 * `env` on top of the emulators' environment.
 */
export function runTidemark(
  args: string[],
  spec: object,
  dir: string,
  env: NodeJS.ProcessEnv = {},
): Promise<CliResult> {
  const file = join(dir, 'tidemark.json');
  writeFileSync(file, JSON.stringify(spec));
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [BIN, ...args, '-c', file],
      {
        cwd: dir,
        encoding: 'utf8',
        timeout: 300_000,
        env: { ...process.env, ...emulatorEnv(), ...env },
      },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== 'number') return reject(error);
        const lines = stdout
          .split('\n')
          .map((l) => /^(ok|warn|fail) +(\S+) (\S+): (.*)$/.exec(l))
          .filter((m): m is RegExpExecArray => m !== null)
          .map((m) => ({ status: m[1], subject: m[2], check: m[3], message: m[4] }) as CheckLineText);
        resolve({ code: error ? (error.code as number) : 0, stdout, stderr, lines });
      },
    );
  });
}

/** The one line of `subject`'s `check`. */
export function checkLine(r: CliResult, subject: string, check: string): CheckLineText {
  const found = r.lines.filter((l) => l.subject === subject && l.check === check);
  expect(found, `${subject} ${check} in\n${r.stdout}${r.stderr}`).toHaveLength(1);
  return found[0]!;
}

/** The objects of `--json` output, one per line (the last is the summary). */
export function jsonLines(r: CliResult): Record<string, unknown>[] {
  return r.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
