/**
 * An `ObjectStore` over a local directory: keys are relative paths under `root`. Used by local
 * runs (`file://` lakes) and tests; DuckDB, Spark and friends read the folder as they read S3.
 *
 * Owns: durable, atomic file replacement. `put` writes a hidden temp file in the target folder,
 * fsyncs it, renames it over the target and fsyncs the folder, so after it resolves the object
 * survives a crash and a reader never sees half a file (with `syncFolder: false`, object-store.ts
 * `Durability`, the folder's fsync is left to a later durable write in the same folder). `putIfAbsent` does the same but hard-links
 * the temp file to the target instead of renaming it: link(2) fails with EEXIST when the target
 * exists, atomically, which is the Iceberg `file` catalog's compare-and-swap on one folder (local
 * disks and NFS keep it; a file system without hard links is refused). Never follows a key
 * outside `root`.
 * A crash mid-put can leave a hidden `.<name>.<id>.tmp` file; readers skip hidden files and
 * `list` does not show them.
 */
import { randomBytes } from 'node:crypto';
import type { Dirent } from 'node:fs';
import { link, mkdir, open, readdir, readFile, rename, stat, unlink } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { SinkError } from '../contracts/errors.js';
import type { Durability, ObjectStore, StoredObject } from './object-store.js';

const TEMP_SUFFIX = '.tmp';
/** Node error codes of a folder that cannot be written. ENOENT: a parent vanished or cannot be made. */
const UNWRITABLE = new Set(['EACCES', 'EPERM', 'EROFS', 'ENOTDIR', 'EEXIST', 'EISDIR', 'ENOENT']);
/** Node error codes of a full disk or quota. */
const FULL = new Set(['ENOSPC', 'EDQUOT']);

/** A directory-backed object store. */
export class FileObjectStore implements ObjectStore {
  /** Absolute root directory. */
  readonly root: string;

  /** @param root directory that holds the objects (created on first put). */
  constructor(root: string) {
    this.root = resolve(root);
  }

  uri(key: string): string {
    return pathToFileURL(this.path(key)).href;
  }

  async put(key: string, bytes: Uint8Array, durability?: Durability): Promise<void> {
    const target = this.path(key);
    try {
      await this.putFile(target, bytes, durability?.syncFolder ?? true);
    } catch (e) {
      throw this.failed('write', target, e);
    }
  }

  private async putFile(target: string, bytes: Uint8Array, syncFolder: boolean): Promise<void> {
    const dir = dirname(target);
    const temp = await this.writeTemp(target, bytes);
    let renamed = false;
    try {
      await rename(temp, target);
      renamed = true;
      if (syncFolder) await fsyncDir(dir);
    } finally {
      if (!renamed) await unlink(temp).catch(() => {});
    }
  }

  async putIfAbsent(key: string, bytes: Uint8Array): Promise<'created' | 'exists'> {
    const target = this.path(key);
    const dir = dirname(target);
    let temp: string | undefined;
    try {
      temp = await this.writeTemp(target, bytes);
      try {
        await link(temp, target);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'EEXIST') return 'exists';
        if (code === 'EPERM' || code === 'ENOTSUP' || code === 'ENOSYS' || code === 'EOPNOTSUPP') {
          throw new SinkError(
            'ICEBERG_CONDITIONAL_WRITES_UNSUPPORTED',
            '',
            `cannot create ${target} only-if-absent: the file system of ${this.root} has no hard links (${code}), which the Iceberg file catalog's commit needs; put lake.uri on a local disk or NFS`,
            { cause: e },
          );
        }
        throw e;
      }
      await unlink(temp);
      temp = undefined;
      await fsyncDir(dir);
      return 'created';
    } catch (e) {
      if (e instanceof SinkError) throw e;
      throw this.failed('write', target, e);
    } finally {
      if (temp !== undefined) await unlink(temp).catch(() => {});
    }
  }

  /** Writes `bytes` to a fsynced hidden temp file beside `target` (its folder made first). */
  private async writeTemp(target: string, bytes: Uint8Array): Promise<string> {
    const dir = dirname(target);
    await this.ensureDir(dir);
    const temp = join(
      dir,
      `.${target.slice(dir.length + 1)}.${randomBytes(6).toString('hex')}${TEMP_SUFFIX}`,
    );
    try {
      const fh = await open(temp, 'wx');
      try {
        await fh.writeFile(bytes);
        await fh.sync();
      } finally {
        await fh.close();
      }
    } catch (e) {
      await unlink(temp).catch(() => {});
      throw e;
    }
    return temp;
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    try {
      return await readFile(this.path(key));
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  async getRange(key: string, start: number, end: number): Promise<Uint8Array | undefined> {
    let handle: Awaited<ReturnType<typeof open>>;
    try {
      handle = await open(this.path(key), 'r');
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
    try {
      const out = new Uint8Array(Math.max(0, end - start));
      let done = 0;
      while (done < out.length) {
        const { bytesRead } = await handle.read(out, done, out.length - done, start + done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
      return done === out.length ? out : out.slice(0, done);
    } finally {
      await handle.close();
    }
  }

  /** `startAfter` is emulated: the folder is read whole, then names at or below it are dropped. */
  async list(prefix: string, startAfter?: string): Promise<StoredObject[]> {
    const folder = prefix.slice(0, prefix.lastIndexOf('/') + 1);
    const out: StoredObject[] = [];
    const walk = async (dir: string): Promise<void> => {
      let entries: Dirent[];
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch (e) {
        if (isNotFound(e)) return;
        throw e;
      }
      for (const entry of entries) {
        const full = join(dir, entry.name);
        if (entry.isDirectory()) {
          await walk(full);
        } else if (entry.isFile() && !(entry.name.startsWith('.') && entry.name.endsWith(TEMP_SUFFIX))) {
          const key = relative(this.root, full).split(sep).join('/');
          if (key.startsWith(prefix) && (startAfter === undefined || key > startAfter))
            out.push({ key, size: (await stat(full)).size });
        }
      }
    };
    try {
      await walk(folder ? this.path(folder.slice(0, -1)) : this.root);
    } catch (e) {
      throw this.failed('list', folder ? this.path(folder.slice(0, -1)) : this.root, e);
    }
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async delete(keys: readonly string[], durability?: Durability): Promise<void> {
    const dirs = new Set<string>();
    for (const key of keys) {
      const path = this.path(key);
      try {
        await unlink(path);
        dirs.add(dirname(path));
      } catch (e) {
        if (!isNotFound(e)) throw this.failed('delete', path, e);
      }
    }
    if (durability?.syncFolder ?? true) for (const dir of dirs) await fsyncDir(dir);
  }

  /**
   * A file-system failure as one SinkError that names the path, the cause and the fix: a lake
   * folder that cannot be written (permissions, read-only mount, a file where a folder should
   * be) or a full disk. Anything else keeps its Node code in the message.
   */
  private failed(op: string, path: string, cause: unknown): SinkError {
    const code = (cause as NodeJS.ErrnoException | undefined)?.code ?? '';
    const why = `${code || 'error'}: ${(cause as Error)?.message ?? String(cause)}`;
    if (FULL.has(code)) {
      return new SinkError(
        'SINK_DISK_FULL',
        '',
        `cannot ${op} ${path} (${why}); the lake folder's disk is full: free space or point lake.uri at another disk; nothing past the last durable object was committed`,
        { cause },
      );
    }
    if (UNWRITABLE.has(code)) {
      return new SinkError(
        'SINK_DIR_UNWRITABLE',
        '',
        `cannot ${op} ${path} (${why}); lake.uri (${this.root}) must be a folder this user can create and write (not read-only, not under a regular file)`,
        { cause },
      );
    }
    return new SinkError(
      'SINK_STORE_FAILED',
      '',
      `cannot ${op} ${path} (${why}); check lake.uri (${this.root})`,
      {
        cause,
      },
    );
  }

  /** Maps a key to a path under root; refuses keys that would escape it. */
  private path(key: string): string {
    const parts = key.split('/');
    if (key.includes('\\') || key.includes('\0') || parts.some((p) => p === '' || p === '.' || p === '..')) {
      throw new Error(`object key ${JSON.stringify(key)} is not a clean relative path`);
    }
    return join(this.root, ...parts);
  }

  /** Creates `dir` and fsyncs the parent of every folder it had to create. */
  private async ensureDir(dir: string): Promise<void> {
    const first = await mkdir(dir, { recursive: true });
    if (first === undefined) return;
    for (let d = resolve(first); ; d = join(d, relative(d, dir).split(sep)[0]!)) {
      await fsyncDir(dirname(d));
      if (d === dir) break;
    }
  }
}

async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

function isNotFound(e: unknown): boolean {
  return (e as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';
}
