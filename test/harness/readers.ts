/**
 * The readers tidemark did not write (docs/test-readers.md), as tests find and drive them: the
 * Python venv `.venv-readers` (pyiceberg, pyarrow, PySpark, moto) and Spark's jars
 * `.readers/jars`, both installed by scripts/install-test-readers.sh.
 *
 * Owns: where they are, why a test skips when they are missing (`readersMissing`,
 * `sparkMissing`: undefined when installed, else a sentence naming the install command), one
 * reader script of test/readers run to its JSON output (`runReaderScript`), and one long-lived
 * Spark session of test/readers/spark_reader.py answering a JSON line per request
 * (`SparkSession`). Starts no process at import.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The venv's executables (python, moto_server). */
export const READERS_BIN = join(REPO_ROOT, '.venv-readers', 'bin');
export const READERS_PYTHON = join(READERS_BIN, 'python');
export const READERS_JARS = join(REPO_ROOT, '.readers', 'jars');
const INSTALL = 'run bash scripts/install-test-readers.sh';

/** Why pyiceberg and pyarrow cannot run here, or undefined when they can. */
export const readersMissing: string | undefined = existsSync(READERS_PYTHON)
  ? undefined
  : `.venv-readers is not installed (${READERS_PYTHON} is missing); ${INSTALL}`;

/** Why Spark with Iceberg's runtime cannot run here, or undefined when it can. */
export const sparkMissing: string | undefined =
  readersMissing ??
  (existsSync(READERS_JARS) && readdirSync(READERS_JARS).some((f) => f.startsWith('iceberg-spark-runtime'))
    ? undefined
    : `no Iceberg Spark runtime in ${READERS_JARS}; ${INSTALL}`);

const execFileP = promisify(execFile);

/**
 * Runs test/readers/`script` with `args` under the venv's Python, from the repository root, and
 * returns its stdout parsed as JSON; a failure carries the script's stderr.
 */
export async function runReaderScript<T>(script: string, args: readonly string[]): Promise<T> {
  try {
    const { stdout } = await execFileP(READERS_PYTHON, [join('test', 'readers', script), ...args], {
      cwd: REPO_ROOT,
      maxBuffer: 64 * 2 ** 20,
    });
    return JSON.parse(stdout) as T;
  } catch (e) {
    const stderr = (e as { stderr?: string }).stderr ?? '';
    throw new Error(`${script} failed: ${stderr || String(e)}`);
  }
}

/** One answer of spark_reader.py: a query's or a table's columns and rows. */
export interface SparkAnswer {
  readonly columns: string[];
  readonly rows: Record<string, unknown>[];
}

/** One Spark session (test/readers/spark_reader.py): a JSON line per request, a JSON line per answer. */
export class SparkSession {
  private readonly lines: Interface;
  private readonly queue: ((line: string) => void)[] = [];
  private readonly buffered: string[] = [];
  /** The end of Spark's log (stderr), for the error when the session dies. */
  private stderrTail = '';

  private constructor(private readonly child: ReturnType<typeof spawnSpark>) {
    child.stderr.on('data', (d: Buffer) => {
      this.stderrTail = (this.stderrTail + d.toString()).slice(-4000);
    });
    this.lines = createInterface({ input: child.stdout });
    this.lines.on('line', (line) => {
      const next = this.queue.shift();
      if (next) next(line);
      else this.buffered.push(line);
    });
  }

  /** Starts spark_reader.py with `args` (catalog flags) in UTC and waits until it is ready. */
  static async start(args: readonly string[] = []): Promise<SparkSession> {
    const session = new SparkSession(spawnSpark(args));
    const first = JSON.parse(await session.next()) as { ready?: boolean };
    if (!first.ready) throw new Error(`spark_reader.py did not start: ${JSON.stringify(first)}`);
    return session;
  }

  private next(): Promise<string> {
    const line = this.buffered.shift();
    if (line !== undefined) return Promise.resolve(line);
    return new Promise((resolve, reject) => {
      this.queue.push(resolve);
      this.child.once('exit', (code) =>
        reject(new Error(`spark_reader.py exited (${code}): ${this.stderrTail}`)),
      );
    });
  }

  /** Sends one request (`{sql}`, `{table}`, `{load, order_by}`: see spark_reader.py) and reads its answer. */
  async ask(request: object): Promise<SparkAnswer> {
    this.child.stdin.write(`${JSON.stringify(request)}\n`);
    const answer = JSON.parse(await this.next()) as SparkAnswer & { ok: boolean; error?: string };
    if (!answer.ok) throw new Error(`Spark: ${answer.error} (request ${JSON.stringify(request)})`);
    return answer;
  }

  /** Asks the session to quit; kills it when it has not exited after 30 s. */
  async quit(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.stdin.end(`${JSON.stringify({ quit: true })}\n`);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  }
}

function spawnSpark(args: readonly string[]) {
  return spawn(READERS_PYTHON, ['test/readers/spark_reader.py', ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, TZ: 'UTC' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}
