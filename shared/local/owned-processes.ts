/**
 * Server processes and scratch directories this program started, and the promise that they do
 * not outlive it: a normal stop goes through each server's own `stop()`, and whatever is still
 * registered when the process exits, or gets SIGINT/SIGTERM/SIGHUP, is stopped synchronously
 * here (a local Postgres or MariaDB left running holds its port and temp dir until reboot).
 *
 * Owns: the exit and signal hooks, and the by-pid stop used by them. Never signals a pid that
 * was not registered here or handed in explicitly by its caller, and never kills by name.
 * SIGKILL of this process cannot be caught: callers that need it reap leftovers on next start.
 */
import { readFileSync, rmSync } from 'node:fs';

/** How to stop a process in an emergency (exit or signal): a signal, then SIGKILL after the grace. */
export interface OwnedProcess {
  /** Shown in messages, e.g. `postgres`. */
  readonly name: string;
  readonly pid: number;
  /** The signal that shuts the server down without help (postgres: SIGINT = fast shutdown). */
  readonly signal: NodeJS.Signals;
  /** How long to wait for it to exit before SIGKILL. */
  readonly graceMs: number;
}

const ownedProcesses = new Map<number, OwnedProcess>();
const ownedDirectories = new Set<string>();
const SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
let hooksInstalled = false;

/**
 * Registers a started server so it is stopped if this process exits without stopping it.
 * Returns the function to call once the server was stopped normally.
 */
export function ownProcess(process_: OwnedProcess): () => void {
  installHooks();
  ownedProcesses.set(process_.pid, process_);
  return () => {
    ownedProcesses.delete(process_.pid);
  };
}

/**
 * Registers a scratch directory to remove at exit (after the owned processes are stopped, so
 * none of them recreates files in it). Returns the function that unregisters it.
 */
export function ownDirectory(path: string): () => void {
  installHooks();
  ownedDirectories.add(path);
  return () => {
    ownedDirectories.delete(path);
  };
}

/** True while `pid` exists and is not a zombie (an exited child not yet reaped still answers kill 0). */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 3, after the parenthesised command name (which may itself contain spaces).
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true; // No /proc (macOS): trust kill 0.
  }
}

/**
 * The command line of `pid` (Linux `/proc`), or undefined where it cannot be read. Used to make
 * sure a pid from a pid file still is the server we started before signalling it.
 */
export function processCommandLine(pid: number): readonly string[] | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return raw.split('\0').filter((part) => part !== '');
  } catch {
    return undefined;
  }
}

/**
 * Stops `pid` and waits for it: `signal`, then SIGKILL after `graceMs`. Resolves once it is gone.
 * Safe to call on a pid that already exited.
 */
export async function stopProcess(pid: number, signal: NodeJS.Signals, graceMs: number): Promise<void> {
  if (!sendSignal(pid, signal)) return;
  const deadline = Date.now() + graceMs;
  while (isProcessAlive(pid)) {
    if (Date.now() >= deadline) {
      sendSignal(pid, 'SIGKILL');
      await waitUntilGone(pid, 5_000);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The synchronous twin of {@link stopProcess}, for exit handlers where no event loop runs. */
export function stopProcessSync(pid: number, signal: NodeJS.Signals, graceMs: number): void {
  if (!sendSignal(pid, signal)) return;
  const deadline = Date.now() + graceMs;
  while (isProcessAlive(pid)) {
    if (Date.now() >= deadline) {
      sendSignal(pid, 'SIGKILL');
      sleepSync(20);
      return;
    }
    sleepSync(10);
  }
}

/** Stops every registered process and removes every registered directory, synchronously. */
function stopEverythingNow(): void {
  for (const owned of [...ownedProcesses.values()]) {
    stopProcessSync(owned.pid, owned.signal, owned.graceMs);
    ownedProcesses.delete(owned.pid);
  }
  for (const dir of [...ownedDirectories]) {
    rmSync(dir, { recursive: true, force: true });
    ownedDirectories.delete(dir);
  }
}

function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', stopEverythingNow);
  for (const signal of SIGNALS) {
    const onSignal = (): void => {
      stopEverythingNow();
      process.removeListener(signal, onSignal);
      // Adding a listener cancels Node's default "exit on signal"; when nobody else (such as
      // vitest) handles the signal, re-raise it so the process still ends as the sender meant.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}

/** Returns false when the process does not exist (any more). */
function sendSignal(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

async function waitUntilGone(pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (isProcessAlive(pid) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
