/**
 * A private MariaDB for the test run, from the system's `mariadbd` (Debian `mariadb-server`):
 * row-based binlog with full row images (what the binlog reader needs), utf8mb4, a root
 * password for TCP, and one database created up front.
 *
 * Owns: install, start and stop of that one server, by pid, in a directory the caller gives.
 * Never touches the system MariaDB service (its port, socket or data dir) and never imports
 * vitest, so a script can use it too.
 */
import { execFileSync, spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { chown, mkdir, readFile, writeFile } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import mysql from 'mysql2/promise';
import { freePort } from '../../shared/local/free-port.js';
import { ownProcess, stopProcess } from '../../shared/local/owned-processes.js';
import { copyTemplate, ensureTemplate, templateKey } from '../../shared/local/template-dir.js';

const STOP_SIGNAL: NodeJS.Signals = 'SIGTERM';
/**
 * Passed to both install and server. An 8 MB redo log instead of 96 MB: a quarter of the data
 * dir to write at install. No native AIO: io_uring rings count against the locked-memory limit
 * (8 MB here, less in many containers), and with several instances up at once (parallel test
 * runs) InnoDB then fails to start.
 */
const INNODB_FLAGS = ['--innodb-log-file-size=8M', '--innodb-use-native-aio=0'];
const STOP_GRACE_MS = 10_000;
const INSTALL_FIX =
  'Install it with `apt-get install -y mariadb-server` (Debian/Ubuntu; the harness starts its own ' +
  'private instance, the system service is not used), or point the tests at a running server with ' +
  'TIDEMARK_TEST_MYSQL_URL=mysql://root:PASSWORD@127.0.0.1:3306/tidemark_test';

export interface MariaDbOptions {
  /** An empty directory for data, socket, logs; the caller removes it after `stop()`. */
  readonly baseDir: string;
  /** Password set for root@localhost and root@127.0.0.1. */
  readonly password: string;
  /** Database created at start (utf8mb4) and named in the returned URL. */
  readonly database: string;
  /** How long install plus start may take. Default 60 s. */
  readonly startTimeoutMs?: number;
  /**
   * A directory for installed data dirs to copy (template-dir.ts), built there on first use;
   * saves the mariadb-install-db time. Default: install afresh.
   */
  readonly templateRoot?: string;
  /**
   * More `mariadbd` flags, after the harness's own (a later flag wins: `--binlog-format=STATEMENT`,
   * `--skip-log-bin`), for a server set up wrong on purpose. Default none.
   */
  readonly serverArgs?: readonly string[];
}

export interface MariaDbServer {
  /** e.g. `mysql://root:pw@127.0.0.1:41234/tidemark_test` */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** Shuts the server down (SIGTERM, SIGKILL after 10 s) and waits for it. Idempotent. */
  stop(): Promise<void>;
}

export interface MariaDbBinaries {
  readonly mariadbd: string;
  readonly installDb: string;
}

/**
 * Finds `mariadbd` and `mariadb-install-db` on PATH or in the usual sbin directories (which a
 * non-login shell may not have on PATH). Throws an error naming the fix when they are missing.
 */
export function findMariaDbBinaries(): MariaDbBinaries {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/local/sbin', '/usr/bin'];
  const find = (name: string): string | undefined =>
    dirs
      .filter((dir) => dir !== '')
      .map((dir) => join(dir, name))
      .find((path) => {
        try {
          accessSync(path, constants.X_OK);
          return true;
        } catch {
          return false;
        }
      });
  const mariadbd = find('mariadbd');
  const installDb = find('mariadb-install-db');
  if (!mariadbd || !installDb) {
    throw new Error(
      `MariaDB server binaries not found (${!mariadbd ? 'mariadbd' : 'mariadb-install-db'} is not on PATH, ` +
        `/usr/sbin or /usr/local/sbin); the MySQL tests need a real server. ${INSTALL_FIX}`,
    );
  }
  return { mariadbd, installDb };
}

/** Installs a fresh data dir in `baseDir`, starts `mariadbd` on a free 127.0.0.1 port, waits until it serves. */
export async function startMariaDb(options: MariaDbOptions): Promise<MariaDbServer> {
  const binaries = findMariaDbBinaries();
  const timeoutMs = options.startTimeoutMs ?? 60_000;
  // mariadbd drops to the mysql user when started as root and must own everything it writes.
  const owner = process.getuid?.() === 0 ? mysqlSystemUser() : undefined;
  const userFlag = owner ? ['--user=mysql'] : [];
  const dataDir = join(options.baseDir, 'data');
  const errorLog = join(options.baseDir, 'error.log');

  // Root sets the password over TCP and creates the database before the first client connects.
  const initFile = join(options.baseDir, 'init.sql');
  const password = quoteString(options.password);
  await writeFile(
    initFile,
    [
      `ALTER USER 'root'@'localhost' IDENTIFIED BY ${password};`,
      `ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY ${password};`,
      `CREATE DATABASE IF NOT EXISTS ${quoteIdentifier(options.database)} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;`,
      '',
    ].join('\n'),
  );
  if (owner) for (const path of [options.baseDir, initFile]) await chown(path, owner.uid, owner.gid);

  const install = async (target: string): Promise<void> => {
    await mkdir(target, { recursive: true });
    if (owner) await chown(target, owner.uid, owner.gid);
    await run(
      binaries.installDb,
      [
        '--no-defaults',
        `--datadir=${target}`,
        ...userFlag,
        '--auth-root-authentication-method=normal',
        '--skip-test-db',
        '--skip-name-resolve',
        ...INNODB_FLAGS,
      ],
      timeoutMs,
    );
  };
  if (options.templateRoot === undefined) {
    await install(dataDir);
  } else {
    const key = await templateKey(binaries.mariadbd, ...INNODB_FLAGS, String(owner?.uid));
    const template = await ensureTemplate(options.templateRoot, `mariadb-${key}`, (dir) =>
      install(join(dir, 'data')),
    );
    await copyTemplate(join(template, 'data'), dataDir);
  }

  const port = await freePort();
  const child = spawn(
    binaries.mariadbd,
    [
      '--no-defaults',
      `--datadir=${dataDir}`,
      `--socket=${join(options.baseDir, 'mariadbd.sock')}`,
      `--pid-file=${join(options.baseDir, 'mariadbd.pid')}`,
      `--log-error=${errorLog}`,
      `--port=${port}`,
      '--bind-address=127.0.0.1',
      ...userFlag,
      `--init-file=${initFile}`,
      `--log-bin=${join(dataDir, 'binlog')}`,
      '--binlog-format=ROW',
      '--binlog-row-image=FULL',
      // Column names in every TableMap: the binlog reader decodes rows written before an ALTER
      // under their own names (under the default NO_LOG they land under the new columns).
      '--binlog-row-metadata=FULL',
      '--server-id=1',
      '--character-set-server=utf8mb4',
      '--collation-server=utf8mb4_unicode_ci',
      '--skip-name-resolve',
      // A throwaway server: no fsync per commit.
      '--innodb-flush-log-at-trx-commit=2',
      '--sync-binlog=0',
      ...INNODB_FLAGS,
      ...(options.serverArgs ?? []),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    stderr = (stderr + text).slice(-4_000);
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`could not spawn ${binaries.mariadbd}`);
  const disown = ownProcess({ name: 'mariadbd', pid, signal: STOP_SIGNAL, graceMs: STOP_GRACE_MS });
  let exited: string | undefined;
  child.once('exit', (code, signal) => {
    exited = `code ${code}, signal ${signal}`;
  });

  const url = `mysql://root:${encodeURIComponent(options.password)}@127.0.0.1:${port}/${options.database}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const connection = await mysql.createConnection({ uri: url, connectTimeout: 1_000 });
      await connection.end();
      break;
    } catch (error) {
      // Only "not listening yet" is worth a retry. A server error (access denied, unknown
      // database) means the init file failed: mariadbd logs that and serves on regardless.
      const notYet = exited === undefined && (error as { sqlState?: string }).sqlState === undefined;
      const timedOut = Date.now() > deadline;
      if (!notYet || timedOut) {
        const why = exited
          ? `exited during startup (${exited})`
          : timedOut
            ? `did not accept connections within ${timeoutMs} ms`
            : 'refused the harness connection (did the init file fail?)';
        await stopProcess(pid, 'SIGKILL', 0);
        disown();
        const log = await readFile(errorLog, 'utf8').catch(() => '');
        throw new Error(
          `mariadbd ${why}: ${(error as Error).message}\n--- ${errorLog} ---\n${errorLines(log || stderr)}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
  child.unref();
  (child.stderr as unknown as { unref?: () => void } | null)?.unref?.();

  let stopped: Promise<void> | undefined;
  return {
    url,
    port,
    pid,
    stop: () => {
      stopped ??= stopProcess(pid, STOP_SIGNAL, STOP_GRACE_MS).then(disown);
      return stopped;
    },
  };
}

function mysqlSystemUser(): { uid: number; gid: number } {
  try {
    return {
      uid: Number(execFileSync('id', ['-u', 'mysql'], { encoding: 'utf8' }).trim()),
      gid: Number(execFileSync('id', ['-g', 'mysql'], { encoding: 'utf8' }).trim()),
    };
  } catch (error) {
    throw new Error(`running as root, but there is no mysql user for mariadbd to run as. ${INSTALL_FIX}`, {
      cause: error,
    });
  }
}

function run(file: string, args: readonly string[], timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    let output = '';
    child.stdout?.setEncoding('utf8').on('data', (text: string) => {
      output += text;
    });
    child.stderr?.setEncoding('utf8').on('data', (text: string) => {
      output += text;
    });
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${file} failed (code ${code}, signal ${signal}):\n${errorLines(output)}`));
    });
  });
}

function quoteString(value: string): string {
  return `'${value.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
}

function quoteIdentifier(name: string): string {
  return `\`${name.replaceAll('`', '``')}\``;
}

/** The server's [ERROR] lines (its help text after a failure buries them), else the last lines. */
function errorLines(output: string): string {
  const errors = output.split('\n').filter((line) => line.includes('[ERROR]') || line.startsWith('ERROR'));
  return errors.length > 0 ? errors.slice(-15).join('\n') : tail(output, 30);
}

function tail(text: string, lines: number): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}
