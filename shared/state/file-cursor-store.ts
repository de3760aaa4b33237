/**
 * FileCursorStore: the cursor store as one JSON file per key in a local directory, for local runs
 * (`tidemark invoke`, `npm start`). It gives the same guarantees as the DynamoDB store, across
 * processes too: two local runs of one table fence each other exactly as two Lambdas would.
 *
 * Owns: the state files of its directory, their lock files and leftover temp files.
 * Never leaves a torn state file: every write goes to a temp file that is fsynced and renamed
 * over the old one (then the directory is fsynced), so a crash leaves the old or the new file.
 * Never decides a rule itself: it reads, applies cursor-rules.ts, and writes, all under a lock
 * (so the fence an acquisition hands out is read, incremented and written in one locked step).
 *
 * Locking. The read-check-write of acquire/renew/commit/release is serialized across processes by
 * `<state file>.lock`, created exclusively (staged content hard-linked into place, which fails
 * with EEXIST exactly like an O_EXCL create but never shows an empty lock) and holding
 * {pid, host, nonce, createdAt}. A lock whose holder pid is dead (same host) or that is older
 * than `lockStaleMs` is broken, under a second exclusive file `<lock>.break` so two waiters cannot
 * both break it and delete a fresh lock. Lock times use the wall clock (Date.now), not the
 * injected Clock: the lock is about real processes, while the Clock only decides lease expiry and
 * can be moved by tests. Plain reads (`load`) take no lock: rename makes every read see a
 * complete file. One residual race is accepted: a holder that is alive but slower than
 * `lockStaleMs` can lose its lock between its last check and its rename.
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  type FileHandle,
  link,
  mkdir,
  open,
  readdir,
  readFile,
  rename,
  stat,
  unlink,
  writeFile,
} from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { StateError } from '../contracts/errors.js';
import type { Clock, CursorStoreProbe, Lease, StateValue } from '../contracts/state.js';
import { EMPTY_STATE, type StoredState } from './cursor-rules.js';
import { StepCursorStore } from './step-cursor-store.js';

/** Tuning of the cross-process lock. The defaults suit a laptop; tests shorten them. */
export interface FileCursorStoreOptions {
  /**
   * A lock older than this is taken as abandoned even when its holder pid looks alive (a hung
   * process, a reused pid, a holder on another host). The locked section takes milliseconds.
   * Default 15 000.
   */
  readonly lockStaleMs?: number;
  /** How long one operation waits for the lock before failing with STATE_LOCK_TIMEOUT. Default 30 000. */
  readonly lockTimeoutMs?: number;
}

/** A lock file with content we cannot read (not written by this module) is stale after this. */
const UNREADABLE_LOCK_GRACE_MS = 2_000;
/** A `.break` file lives for a moment; one older than this belongs to a breaker that hangs. */
const BREAK_FILE_GRACE_MS = 2_000;
/** Backoff between lock attempts: starts small because the locked section is short. */
const LOCK_BACKOFF_MIN_MS = 1;
const LOCK_BACKOFF_MAX_MS = 50;
/** Encoded file names longer than this are cut and suffixed with a hash (file names stop at 255 bytes). */
const MAX_ENCODED_NAME = 160;

/** What a lock file holds. */
interface LockInfo {
  readonly pid: number;
  readonly host: string;
  readonly nonce: string;
  /** Wall-clock epoch ms when the lock was taken. */
  readonly createdAt: number;
}

/** What is found at a lock path: nothing, or a lock with an identity to compare before breaking it. */
type LockState =
  | { readonly kind: 'gone' }
  | {
      readonly kind: 'held';
      readonly identity: string;
      readonly info: LockInfo | undefined;
      readonly mtimeMs: number;
    };

/** The on-disk shape of a state file. */
interface StateFile {
  readonly key: string;
  readonly version: number;
  readonly value?: StateValue;
  /** The lease's fence is the file's `fence`, so it is stored once, there. */
  readonly lease?: Omit<Lease, 'fence'>;
  /**
   * The last fence handed out for the key (cursor-rules.ts); absent in files written before
   * fences existed (read as 0) and until the first acquisition.
   */
  readonly fence?: number;
  /** Injected-clock epoch ms of the last write. */
  readonly updatedAt: number;
}

/**
 * Maps a key to a file name safe on every common file system: `[a-z0-9_-]` and non-leading dots
 * stay, everything else (including upper case, for case-insensitive file systems) becomes `%XX`
 * of its UTF-8 bytes. Long names are cut and suffixed with a SHA-256 of the key; the key is also
 * stored inside the file, so a collision is detected rather than silently shared.
 */
export function stateFileName(key: string): string {
  let name = '';
  for (const byte of Buffer.from(key, 'utf8')) {
    const safe =
      (byte >= 0x61 && byte <= 0x7a) || // a-z
      (byte >= 0x30 && byte <= 0x39) || // 0-9
      byte === 0x5f || // _
      byte === 0x2d || // -
      (byte === 0x2e && name.length > 0); // . but never leading ('.', '..', hidden files)
    name += safe ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  if (name.length === 0) name = '%';
  if (name.length > MAX_ENCODED_NAME) {
    // Cut on an escape boundary so the kept part stays readable as `%XX` escapes.
    let cut = 100;
    if (name[cut - 1] === '%') cut -= 1;
    else if (name[cut - 2] === '%') cut -= 2;
    name = `${name.slice(0, cut)}~${createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
  }
  return `${name}.json`;
}

/**
 * A CursorStore keeping one JSON file per key in `dir`, safe across processes on one host (the
 * operations are step-cursor-store.ts's; a step runs under the key's lock file).
 */
export class FileCursorStore extends StepCursorStore implements CursorStoreProbe {
  readonly #dir: string;
  readonly #lockStaleMs: number;
  readonly #lockTimeoutMs: number;
  /** Keys whose leftover temp files this instance already swept. */
  readonly #swept = new Set<string>();

  /**
   * @param dir directory of the state files; created on first write.
   * @param clock epoch milliseconds deciding lease expiry; tests pass a movable one.
   */
  constructor(dir: string, clock: Clock = Date.now, options: FileCursorStoreOptions = {}) {
    super(clock);
    this.#dir = dir;
    this.#lockStaleMs = options.lockStaleMs ?? 15_000;
    this.#lockTimeoutMs = options.lockTimeoutMs ?? 30_000;
  }

  /** The path of the state file of `key` (for operators and tests). */
  pathOf(key: string): string {
    return join(this.#dir, stateFileName(key));
  }

  /**
   * Takes the lease of a probe key through the real write path (directory, hard-linked lock,
   * fsynced temp file, rename) and removes its state file again, so an unwritable directory or
   * one without hard links shows before a run needs it.
   */
  async probe(key: string): Promise<void> {
    try {
      await this.acquire(key, `check:${process.pid}:${randomUUID()}`, 60_000);
      await unlink(this.pathOf(key));
    } catch (err) {
      if (err instanceof StateError) throw err;
      throw new StateError(
        'STATE_STORE_FAILED',
        key,
        `cannot write to the state directory ${this.#dir} (${errCode(err) ?? (err as Error).message}); fix state.dir, or make the directory writable for this user`,
        { cause: err },
      );
    }
  }

  protected step<S extends StoredState | undefined>(
    key: string,
    decide: (state: StoredState) => S,
  ): Promise<S> {
    return this.#withLock(key, async (lock) => {
      const next = decide(await this.read(key));
      if (next !== undefined) await this.#write(key, next, lock);
      return next;
    });
  }

  /** Reads a state file; a missing file is the empty state, an unreadable one a STATE_CORRUPT error. */
  protected async read(key: string): Promise<StoredState> {
    const path = this.pathOf(key);
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (err) {
      if (errCode(err) === 'ENOENT') return EMPTY_STATE;
      throw err;
    }
    let parsed: StateFile;
    try {
      parsed = JSON.parse(text) as StateFile;
    } catch (cause) {
      throw corrupt(key, path, 'it is not valid JSON', cause);
    }
    if (
      parsed === null ||
      typeof parsed !== 'object' ||
      !Number.isSafeInteger(parsed.version) ||
      parsed.version < 0
    ) {
      throw corrupt(key, path, 'it has no valid version');
    }
    if (parsed.key !== key) {
      throw corrupt(key, path, `it holds the state of another key (${JSON.stringify(parsed.key)})`);
    }
    const fence = parsed.fence ?? 0;
    if (!Number.isSafeInteger(fence) || fence < 0) throw corrupt(key, path, 'it has no valid fence');
    const lease =
      parsed.lease === undefined
        ? undefined
        : { owner: parsed.lease.owner, expiresAt: parsed.lease.expiresAt, fence };
    return { version: parsed.version, value: parsed.value, lease, fence };
  }

  /**
   * Replaces the state file atomically: temp file, fsync, check the lock is still ours, rename,
   * fsync the directory (so the rename itself survives a power cut).
   */
  async #write(key: string, state: StoredState, lock: LockInfo): Promise<void> {
    const path = this.pathOf(key);
    const body: StateFile = {
      key,
      version: state.version,
      ...(state.value === undefined ? {} : { value: state.value }),
      ...(state.lease === undefined
        ? {}
        : { lease: { owner: state.lease.owner, expiresAt: state.lease.expiresAt } }),
      ...(state.fence === 0 ? {} : { fence: state.fence }),
      updatedAt: this.clock(),
    };
    const tmp = `${path}.tmp-${process.pid}-${randomUUID()}`;
    const handle = await open(tmp, 'wx', 0o644);
    try {
      await handle.writeFile(JSON.stringify(body), 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      // Fencing for a holder slower than lockStaleMs: if its lock was broken, it must not
      // overwrite what the new holder may already have written.
      const current = await readLock(lockPathOf(path));
      if (current.kind !== 'held' || current.identity !== lock.nonce) {
        throw new StateError(
          'STATE_LOCK_LOST',
          key,
          `held the lock of ${path} longer than ${this.#lockStaleMs} ms and another process broke it; nothing was written, retry the run`,
        );
      }
      await rename(tmp, path);
    } catch (err) {
      await unlink(tmp).catch(() => undefined);
      throw err;
    }
    await fsyncDir(this.#dir);
  }

  /** Runs `fn` holding the key's cross-process lock. */
  async #withLock<T>(key: string, fn: (lock: LockInfo) => Promise<T>): Promise<T> {
    const path = this.pathOf(key);
    await mkdir(this.#dir, { recursive: true });
    const { lock, brokeStale } = await this.#lock(key, path);
    try {
      // Temp files exist only while a holder writes; under the lock any we find belong to a
      // holder that died (or lost its lock). Sweep once per key per instance and after a break.
      if (brokeStale || !this.#swept.has(key)) {
        await removeLeftovers(this.#dir, stateFileName(key));
        this.#swept.add(key);
      }
      return await fn(lock);
    } finally {
      await unlockIfOurs(lockPathOf(path), lock);
    }
  }

  async #lock(key: string, path: string): Promise<{ lock: LockInfo; brokeStale: boolean }> {
    const lockPath = lockPathOf(path);
    const lock = newLockInfo();
    const deadline = Date.now() + this.#lockTimeoutMs;
    let brokeStale = false;
    let backoff = LOCK_BACKOFF_MIN_MS;
    for (;;) {
      if (await createExclusive(lockPath, lock)) return { lock, brokeStale };
      const holder = await readLock(lockPath);
      if (holder.kind === 'gone') continue;
      if (isStale(holder, this.#lockStaleMs)) {
        brokeStale = (await breakLock(lockPath, holder.identity)) || brokeStale;
        continue;
      }
      if (Date.now() >= deadline) {
        const who = holder.info ? `pid ${holder.info.pid} on ${holder.info.host}` : 'an unknown process';
        throw new StateError(
          'STATE_LOCK_TIMEOUT',
          key,
          `waited ${this.#lockTimeoutMs} ms for the lock ${lockPath} held by ${who}; if no tidemark process is using this state directory, delete the lock file`,
        );
      }
      await sleep(backoff + Math.random() * backoff);
      backoff = Math.min(backoff * 2, LOCK_BACKOFF_MAX_MS);
    }
  }
}

function lockPathOf(statePath: string): string {
  return `${statePath}.lock`;
}

function newLockInfo(): LockInfo {
  return { pid: process.pid, host: hostname(), nonce: randomUUID(), createdAt: Date.now() };
}

/**
 * Creates `path` holding `info`, exclusively: false when it already exists. The content is
 * written to `<path>-<pid>-<nonce>` first and hard-linked into place (link fails with EEXIST like
 * an O_EXCL create), so the lock never exists without its content. With a plain O_EXCL create, a
 * holder killed between create and write leaves an empty lock whose owner nobody can check.
 */
async function createExclusive(path: string, info: LockInfo): Promise<boolean> {
  const staged = `${path}-${info.pid}-${info.nonce}`;
  // No fsync: after a power cut no holder survives, so a lost lock file is harmless.
  await writeFile(staged, JSON.stringify({ ...info, createdAt: Date.now() }), { flag: 'wx', mode: 0o644 });
  try {
    await link(staged, path);
    return true;
  } catch (err) {
    const code = errCode(err);
    if (code === 'EEXIST') return false;
    if (code === 'EPERM' || code === 'ENOTSUP' || code === 'ENOSYS') {
      throw new StateError(
        'STATE_DIR_UNSUPPORTED',
        '',
        `the state directory of ${path} does not support hard links, which its lock needs; put the state directory on a local disk`,
        { cause: err },
      );
    }
    throw err;
  } finally {
    await unlink(staged).catch(() => undefined);
  }
}

async function readLock(lockPath: string): Promise<LockState> {
  let text: string;
  let mtimeMs: number;
  let ino: number;
  try {
    const st = await stat(lockPath);
    mtimeMs = st.mtimeMs;
    ino = st.ino;
    text = await readFile(lockPath, 'utf8');
  } catch (err) {
    if (errCode(err) === 'ENOENT') return { kind: 'gone' };
    throw err;
  }
  try {
    const info = JSON.parse(text) as LockInfo;
    if (
      typeof info.nonce === 'string' &&
      Number.isSafeInteger(info.pid) &&
      typeof info.createdAt === 'number'
    ) {
      return { kind: 'held', identity: info.nonce, info, mtimeMs };
    }
  } catch {
    // Not ours to explain (written by hand or by another tool): judged by its age alone.
  }
  return { kind: 'held', identity: `unreadable:${ino}:${mtimeMs}`, info: undefined, mtimeMs };
}

/** A lock is abandoned when its holder pid is dead (same host) or it is older than `staleMs`. */
function isStale(holder: Extract<LockState, { kind: 'held' }>, staleMs: number): boolean {
  const now = Date.now();
  if (holder.info === undefined) return now - holder.mtimeMs > UNREADABLE_LOCK_GRACE_MS;
  if (holder.info.host === hostname() && !pidAlive(holder.info.pid)) return true;
  return now - holder.info.createdAt > staleMs;
}

/**
 * Deletes a stale lock, but only while holding `<lock>.break` and only if the lock is still the
 * one judged stale: without this, waiter A could delete the stale lock, waiter B take a fresh one,
 * and waiter C (who judged the old one stale too) delete B's. Returns true if it deleted it.
 */
async function breakLock(lockPath: string, staleIdentity: string): Promise<boolean> {
  const breakPath = `${lockPath}.break`;
  if (!(await createExclusive(breakPath, newLockInfo()))) {
    // Another waiter is breaking it right now (for microseconds), or died doing so.
    const breaker = await readLock(breakPath);
    if (breaker.kind === 'held' && isStale(breaker, BREAK_FILE_GRACE_MS)) {
      await unlink(breakPath).catch(() => undefined);
    }
    return false;
  }
  try {
    const again = await readLock(lockPath);
    if (again.kind === 'held' && again.identity === staleIdentity) {
      await unlink(lockPath).catch((err) => {
        if (errCode(err) !== 'ENOENT') throw err;
      });
      return true;
    }
    return false;
  } finally {
    await unlink(breakPath).catch(() => undefined);
  }
}

/** Removes the lock if it is still ours; if it was broken meanwhile, the new holder's lock stays. */
async function unlockIfOurs(lockPath: string, lock: LockInfo): Promise<void> {
  const current = await readLock(lockPath);
  if (current.kind === 'held' && current.identity === lock.nonce) {
    await unlink(lockPath).catch(() => undefined);
  }
}

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

/**
 * Sweeps what dead writers of one state file left: temp state files (only a lock holder writes
 * them and the caller holds the lock now, so every one found is garbage) and staged lock files of
 * dead pids (a live pid may be about to link its own). Names are matched exactly: another key's
 * state file may well start with this file's name (key `a` and key `a.json.tmp-x`).
 */
async function removeLeftovers(dir: string, fileName: string): Promise<void> {
  const base = fileName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const tempFile = new RegExp(`^${base}\\.tmp-\\d+-${UUID}$`);
  const stagedLock = new RegExp(`^${base}\\.lock(?:\\.break)?-(\\d+)-${UUID}$`);
  const garbage = (await readdir(dir)).filter((n) => {
    if (tempFile.test(n)) return true;
    const pid = stagedLock.exec(n)?.[1];
    return pid !== undefined && !pidAlive(Number(pid));
  });
  await Promise.all(garbage.map((n) => unlink(join(dir, n)).catch(() => undefined)));
}

/** fsync of the directory makes a rename durable; some platforms cannot open a directory for it. */
async function fsyncDir(dir: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(dir, 'r');
    await handle.sync();
  } catch (err) {
    const code = errCode(err);
    if (code !== 'EISDIR' && code !== 'EPERM' && code !== 'EINVAL' && code !== 'EBADF') throw err;
  } finally {
    await handle?.close();
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to another user.
    return errCode(err) === 'EPERM';
  }
}

function corrupt(key: string, path: string, why: string, cause?: unknown): StateError {
  return new StateError(
    'STATE_CORRUPT',
    key,
    `state file ${path} of ${key} cannot be used: ${why}; restore it from a backup, or delete it to start ${key} over from nothing`,
    cause === undefined ? undefined : { cause },
  );
}

function errCode(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
