/**
 * Prepared directories to copy instead of rebuilding: an initialised database cluster costs
 * initdb / mariadb-install-db time (0.5-1 s of CPU and tens of MB written) on every test run,
 * a copy of a pristine one a fraction of that.
 *
 * Owns: building a template once per key (atomically: built aside, then renamed into place, so
 * concurrent runs never see half a template) and copying it. A template is never modified
 * after it is in place; a new key (other binary, other settings) gets a new directory.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isProcessAlive } from './owned-processes.js';

const BUILDING = '.building-';

/**
 * A short key for a template: a hash of everything that makes two templates differ, e.g. the
 * binary's path, size and mtime (a package upgrade changes them) and the settings baked in.
 */
export async function templateKey(binary: string, ...parts: readonly string[]): Promise<string> {
  const info = await stat(binary);
  return createHash('sha256')
    .update([binary, info.size, info.mtimeMs, ...parts].join('\0'))
    .digest('hex')
    .slice(0, 16);
}

/**
 * The path of template `name` under `root`, building it with `build(dir)` first if missing.
 * `build` receives an empty, world-traversable directory and fills it.
 */
export async function ensureTemplate(
  root: string,
  name: string,
  build: (dir: string) => Promise<void>,
): Promise<string> {
  const final = join(root, name);
  if (existsSync(final)) return final;
  await mkdir(root, { recursive: true });
  // Server users (postgres, mysql) must reach templates below a root-owned directory.
  await chmod(root, 0o755).catch(() => undefined);
  await removeAbandonedBuilds(root);
  const building = join(root, `${name}${BUILDING}${process.pid}-${randomBytes(4).toString('hex')}`);
  await mkdir(building, { mode: 0o755 });
  try {
    await build(building);
    await rename(building, final);
  } catch (error) {
    await rm(building, { recursive: true, force: true });
    // Another run renamed its build into place first: use that one.
    if (existsSync(final)) return final;
    throw error;
  }
  return final;
}

/** Copies `template` to `target` (which must not exist), keeping owners and modes (`cp -a`). */
export function copyTemplate(template: string, target: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('cp', ['-a', template, target], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.setEncoding('utf8').on('data', (text: string) => {
      stderr += text;
    });
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`cp -a ${template} ${target} failed: ${stderr.trim()}`)),
    );
  });
}

/** Half-built templates of processes that died while building them. */
async function removeAbandonedBuilds(root: string): Promise<void> {
  for (const entry of await readdir(root).catch(() => [] as string[])) {
    const at = entry.indexOf(BUILDING);
    if (at < 0) continue;
    const pid = Number(entry.slice(at + BUILDING.length).split('-', 1)[0]);
    if (Number.isInteger(pid) && pid > 0 && !isProcessAlive(pid)) {
      await rm(join(root, entry), { recursive: true, force: true });
    }
  }
}
