/**
 * `tidemark cdc` as a process of its own, for the tests that drive the real CLI against the
 * harness servers: the bundled bin (bin/tidemark.js), or with `mutation` the CLI main from the
 * sources under test/harness/cli-mutated-child.ts (a broken durability step injected). Its
 * stdout and stderr are kept together and waited on by substring; a process still running when
 * the test file ends is killed by the `cleanup` the caller passes.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');
/** The CLI a user runs. */
export const BIN = join(ROOT, 'bin', 'tidemark.js');
const MUTATED = join(ROOT, 'test', 'harness', 'cli-mutated-child.ts');
/** Longest a process may take to log a line it is waited for (start-up on a loaded machine). */
export const LINE_DEADLINE_MS = 90_000;

export interface CdcProcessOptions {
  /** A `TIDEMARK_TEST_MUTATION` of cli-mutated-child.ts; the bundled bin when absent. */
  readonly mutation?: string | undefined;
  /** Appends the process's output here when it exits (kept for a failing test's post-mortem). */
  readonly logFile?: string;
  /** Registers the kill of a process left running. */
  readonly cleanup: (fn: () => void) => void;
}

export class CdcProcess {
  readonly child: ChildProcess;
  private out = '';
  readonly exited: Promise<number | null>;

  constructor(spec: string, options: CdcProcessOptions) {
    const { mutation, logFile } = options;
    const entry = mutation ? ['--import', 'tsx', MUTATED] : [BIN];
    this.child = spawn(process.execPath, [...entry, 'cdc', '-c', spec], {
      cwd: ROOT,
      env: { ...process.env, ...(mutation ? { TIDEMARK_TEST_MUTATION: mutation } : {}) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const stream of [this.child.stdout!, this.child.stderr!])
      stream.on('data', (b: Buffer) => {
        this.out += b.toString();
      });
    this.exited = new Promise((resolve) =>
      this.child.on('exit', (code) => {
        if (logFile) appendFileSync(logFile, `--- ${this.child.pid} exit ${code}\n${this.out}`);
        resolve(code);
      }),
    );
    options.cleanup(() => {
      if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    });
  }

  /** stdout and stderr so far. */
  get output(): string {
    return this.out;
  }

  /** Waits until the output holds `text`; fails when the process exits first or time runs out. */
  async waitForLine(text: string): Promise<void> {
    const end = Date.now() + LINE_DEADLINE_MS;
    while (!this.out.includes(text)) {
      if (this.child.exitCode !== null)
        throw new Error(`tidemark cdc exited (${this.child.exitCode}) before "${text}":\n${this.out}`);
      if (Date.now() > end) throw new Error(`tidemark cdc did not log "${text}" in time:\n${this.out}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Sends `signal`; resolves with the exit code. */
  async kill(signal: NodeJS.Signals): Promise<number | null> {
    this.child.kill(signal);
    return this.exited;
  }
}
