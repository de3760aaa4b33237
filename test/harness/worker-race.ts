/**
 * Races of worker processes: a TypeScript worker script run by Node through tsx prints `ready`
 * once started and waits for a line on stdin, so that every worker of a race begins at once; it
 * prints its result as one JSON line and exits 0. The cross-process tests of the file cursor store
 * (test/integration/cursor-store-worker.ts) and of the Iceberg file catalog
 * (test/integration/iceberg-catalog-worker.ts) race their workers with it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Starts `script` (a path to a .ts file) with `args` under Node and tsx, stdio piped. */
export function startWorker(script: string, args: readonly string[]): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', script, ...args], {
    cwd: REPO_ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

/** Resolves when the child prints `ready`; rejects if it exits first. */
export function readyOf(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    child.stdout!.on('data', (d: Buffer) => {
      seen += d.toString();
      if (seen.includes('ready')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`worker exited with ${code} before it was ready`)));
  });
}

/**
 * Waits until every child is ready, releases them at once (one line on stdin) and returns the
 * JSON result each printed after `ready`; rejects with a worker's stderr when one exits non-zero.
 */
export async function raceWorkers<T>(children: readonly ChildProcess[]): Promise<T[]> {
  const results = children.map(
    (child) =>
      new Promise<T>((resolve, reject) => {
        let out = '';
        let err = '';
        child.stdout!.on('data', (d) => {
          out += d;
        });
        child.stderr!.on('data', (d) => {
          err += d;
        });
        child.on('error', reject);
        child.on('exit', (code) => {
          if (code !== 0) reject(new Error(`worker exited ${code}: ${err}`));
          else resolve(JSON.parse(out.replace('ready', '').trim()) as T);
        });
      }),
  );
  await Promise.all(children.map(readyOf));
  for (const child of children) child.stdin!.end('go\n');
  return Promise.all(results);
}
