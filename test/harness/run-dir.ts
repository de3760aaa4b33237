/**
 * The scratch directory of one test run (`$TMPDIR/tidemark-test-XXXXXX`), marked with the pid
 * of the process that owns it, and the reaper for run directories whose owner died without
 * cleaning up (vitest SIGKILLed: its servers keep running, holding ports and disk).
 *
 * Owns: creating, marking and removing run directories, and stopping the leftover servers of
 * dead runs. A process is only signalled when its command line names the dead run's directory,
 * so no system service and no live run is ever touched.
 */
import { readdirSync } from 'node:fs';
import { chmod, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  isProcessAlive,
  ownDirectory,
  processCommandLine,
  stopProcess,
} from '../../shared/local/owned-processes.js';

const PREFIX = 'tidemark-test-';
const OWNER_FILE = 'owner.pid';
/** A run dir without an owner file is only a leftover once it is clearly not being set up. */
const UNMARKED_AGE_MS = 10 * 60_000;

/** A run directory; `remove()` deletes it (call after its servers stopped). */
export interface RunDir {
  readonly path: string;
  remove(): Promise<void>;
}

/** Creates the run directory (world-traversable: postgres and mysql users write below it). */
export async function createRunDir(): Promise<RunDir> {
  const path = await mkdtemp(join(tmpdir(), PREFIX));
  const release = ownDirectory(path);
  await chmod(path, 0o755);
  await writeFile(join(path, OWNER_FILE), `${process.pid}\n`);
  return {
    path,
    remove: async () => {
      await rm(path, { recursive: true, force: true });
      release();
    },
  };
}

/**
 * Stops the servers of run directories whose owner process is gone and removes those
 * directories. Returns the directories reaped.
 */
export async function reapStaleRunDirs(): Promise<string[]> {
  const entries = await readdir(tmpdir()).catch(() => [] as string[]);
  const stale: string[] = [];
  for (const entry of entries) {
    if (!entry.startsWith(PREFIX)) continue;
    const path = join(tmpdir(), entry);
    if (await isStale(path)) stale.push(path);
  }
  if (stale.length === 0) return stale;
  await Promise.all(leftoverProcesses(stale).map(({ pid, signal }) => stopProcess(pid, signal, 5_000)));
  await Promise.all(stale.map((path) => rm(path, { recursive: true, force: true })));
  return stale;
}

async function isStale(path: string): Promise<boolean> {
  try {
    const owner = Number((await readFile(join(path, OWNER_FILE), 'utf8')).trim());
    return !(Number.isInteger(owner) && owner > 0 && isProcessAlive(owner));
  } catch {
    const info = await stat(path).catch(() => undefined);
    return info !== undefined && Date.now() - info.mtimeMs > UNMARKED_AGE_MS;
  }
}

/** Processes (Linux /proc) whose command line points into one of `dirs`. */
function leftoverProcesses(dirs: readonly string[]): { pid: number; signal: NodeJS.Signals }[] {
  let pids: number[];
  try {
    pids = readdirSync('/proc')
      .filter((name) => /^\d+$/.test(name))
      .map(Number);
  } catch {
    return []; // No /proc: nothing we can identify safely.
  }
  const found: { pid: number; signal: NodeJS.Signals }[] = [];
  for (const pid of pids) {
    if (pid === process.pid) continue;
    const commandLine = processCommandLine(pid);
    if (!commandLine?.some((arg) => dirs.some((dir) => arg.includes(`${dir}/`) || arg === dir))) continue;
    // postgres: SIGQUIT = immediate shutdown, which also ends its children and frees shared memory.
    const signal: NodeJS.Signals = commandLine[0]?.endsWith('postgres') ? 'SIGQUIT' : 'SIGTERM';
    found.push({ pid, signal });
  }
  return found;
}
