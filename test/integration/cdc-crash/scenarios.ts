/**
 * The CDC crash must-show, written once against a CrashFixture so every driver runs the same
 * protocol: a workload writes the captured tables while the driver's CDC child process (`runCdc`
 * over the real reader, file state, file lake) is SIGKILLed at ASSERTED points of its commit
 * protocol (before the write, between write and commit, between commit and ack, after the ack,
 * during a lease renewal; with Iceberg tables also after the catalog commit and between a history
 * table's catalog commit and its current state's). Each kill is recorded by the child (fsync'd) right before it dies; a
 * kill that did not land is a problem. After every kill the committed state position must not
 * have moved backwards, and the fixture checks it against what the source says (the Postgres
 * slot, the MariaDB binlog end and GTIDs). Afterwards the workload stops, a clean child catches
 * up to the source's head and is stopped by SIGTERM (exit 0), and the fixture compares the lake
 * with the source's truth.
 *
 * The first child (which commits the first position) is SIGKILLed idle by the test; the fixture
 * marks that moment as "capture started". The mutation self-checks run the same checker under a
 * broken protocol (test/harness/mutations.ts, injected in the child): each must be DETECTED by
 * the check that guards the step it breaks, which is the driver's, so each fixture names the
 * kills and the problem that shows each mutation.
 *
 * This file owns the run (children, kills, landing checks, the clean catch-up) and the shared
 * assertions; a fixture owns its server, tables, workload and every check of the source.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { parseCdcState } from '../../../shared/engine/cdc/state.js';
import { FileCursorStore } from '../../../shared/state/file-cursor-store.js';
import {
  type ChildPoint,
  CRASH_STATE_KEY,
  type CrashChildConfig,
  type CrashKill,
  type CrashMutation,
  type KillLine,
} from '../../harness/cdc-crash-config.js';
import type { TestTableFormat } from '../../harness/lake-scan.js';
import type { SparkSession } from '../../harness/readers.js';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const POINTS: readonly ChildPoint[] = ['before-write', 'after-write', 'after-commit', 'after-ack', 'renewal'];

/**
 * One child generation: SIGKILLed the `nth` time it reaches `point` (with `moved`, counting only
 * commits that moved the committed position); `quiet`: with the workload paused; `idleCommitMs`:
 * the child's idle-commit interval.
 */
export interface Kill extends CrashKill {
  readonly quiet?: boolean;
  readonly idleCommitMs?: number;
}

/** What the run records after each kill: the committed state position, and the fixture's part. */
export type Pair<D> = {
  readonly generation: number;
  readonly point: string;
  readonly nth: number;
  readonly committed: string | null;
  /** What the child read from the state right before it killed itself. */
  readonly committedAtKill: string | null;
} & D;

export interface Outcome<D, F> {
  readonly problems: string[];
  readonly pairs: Pair<D>[];
  /** The fixture's counts of what ran and what the lake holds (printed, and in failure messages). */
  readonly facts: F;
}

/** A running workload against the captured tables. */
export interface Workload {
  /** Ends it (each transaction ends cleanly); throws if it failed. */
  stop(): Promise<void>;
}

/** One crash run's source: a fresh database with the captured tables, and a directory. */
export interface CrashSource<D, F> {
  /** The child config without a kill: `dir` holds the state, the lake, the kills and the logs. */
  readonly config: CrashChildConfig;
  /** The first child has committed its first position (before it is killed idle): capture started. */
  captureStarted(): Promise<void>;
  /**
   * After a kill (`at` names it in messages): the fixture's part of the pair and what is wrong
   * with the committed position `committed` against the source.
   */
  afterKill(
    at: string,
    committed: string | null,
    committedAtKill: string | null,
  ): Promise<{ pair: D; problems: string[] }>;
  startWorkload(): Promise<Workload>;
  /** The source's head (WAL head, binlog end) as a position value. */
  head(): Promise<string>;
  /**
   * After the clean child stopped at `finalPos` (`lastCommitted`: the position after the last
   * kill): the fixture's final checks, then the lake against the source's truth.
   */
  finish(
    finalPos: string | undefined,
    lastCommitted: string | null,
  ): Promise<{ problems: string[]; facts: F }>;
}

export interface CrashFixture<D, F> {
  /** Prefix of the printed lines, e.g. `pgbench crash`. */
  readonly tag: string;
  /** The child process (repo-relative): `node --import tsx <child> '<config JSON>'`. */
  readonly child: string;
  /** The title of the 20-kill scenario (its claims are the driver's). */
  readonly title: string;
  /** Longest a child may take to reach its kill point (and the first child its first commit). */
  readonly childDeadlineMs: number;
  /** Longest the clean child may take to catch up to the head. */
  readonly cleanChildDeadlineMs: number;
  /** What the source's head is called in messages (`WAL head`, `binlog end`). */
  readonly headName: string;
  /** <0, 0, >0 as committed position `a` is before, at, after `b`. */
  compare(a: string, b: string): number;
  /** Whether committed position `pos` is at or past the head `head` read from the source. */
  reached(pos: string, head: string): boolean;
  /** A position value (or its absence) for messages. */
  display(value: string | null | undefined): string;
  /** A pair as the failure messages show it. */
  showPair(pair: Pair<D>): unknown;
  /** The 20-kill scenario's printed report. */
  report(outcome: Outcome<D, F>): string;
  /** Per mutation, in the order run: the kills, and the problem that must show it. */
  readonly mutants: Readonly<Partial<Record<CrashMutation, { kills: readonly Kill[]; detectedBy: RegExp }>>>;
  /** The protocol points the 20 kills cycle through (default: POINTS). */
  readonly points?: readonly ChildPoint[];
  /**
   * `tableFormat` `iceberg`: the captured tables are Iceberg tables (the lake check reads them as
   * such: the upsert tables as current states, by pyiceberg, icebird and `spark` when given).
   */
  open(
    mutation?: CrashMutation,
    tableFormat?: TestTableFormat,
    spark?: SparkSession,
  ): Promise<CrashSource<D, F>>;
}

/**
 * `fx` with its tables written as Iceberg tables (a `file` catalog in the child's lake): the
 * same workload, kills and checks, the lake read as each table's current snapshot (an upsert
 * table as it is, a current state: by pyiceberg, icebird and Spark; its history table
 * `<target>_history` as a change log), two kill points more (`between-tables`: a history table's
 * catalog commit applied, its current state's not; `after-apply`: after the catalog commit, before
 * the ack) and the mutants that break the Iceberg commit order
 * (docs/decisions/0024-iceberg-commits.md).
 */
export function icebergVariant<D, F>(
  fx: CrashFixture<D, F>,
  mutants: CrashFixture<D, F>['mutants'],
): CrashFixture<D, F> {
  return {
    ...fx,
    tag: `${fx.tag} (Iceberg)`,
    title: `Iceberg tables: ${fx.title}; no file a snapshot references is ever deleted`,
    points: [...POINTS.slice(0, 3), 'between-tables', 'after-apply', ...POINTS.slice(3)],
    mutants,
    open: (mutation, _format, spark) => fx.open(mutation, 'iceberg', spark),
  };
}

const cleanups: (() => Promise<void> | void)[] = [];

/** Runs `fn` after the file's tests (in reverse order of registration), even after a failure. */
export function onCleanup(fn: () => Promise<void> | void): void {
  cleanups.push(fn);
}

async function runCleanups(): Promise<void> {
  for (const c of cleanups.splice(0).reverse()) await c();
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Child {
  readonly proc: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  stderr(): string;
}

function startChild(script: string, config: CrashChildConfig, logFile: string): Child {
  const proc = spawn(process.execPath, ['--import', 'tsx', join(ROOT, script), JSON.stringify(config)], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve, reject) => {
    proc.on('error', reject);
    proc.on('exit', (code, signal) => {
      writeFileSync(logFile, stderr);
      resolve({ code, signal });
    });
  });
  onCleanup(async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill('SIGKILL');
      await exited;
    }
  });
  return { proc, exited, stderr: () => stderr };
}

/** The lines of `<dir>/<file>` (none if it does not exist). */
export function readLines(dir: string, file: string): string[] {
  try {
    return readFileSync(join(dir, file), 'utf8').split('\n').filter(Boolean);
  } catch {
    return [];
  }
}

const readKills = (dir: string): KillLine[] => readLines(dir, 'kills').map((l) => JSON.parse(l) as KillLine);

async function committedPosition(dir: string): Promise<string | undefined> {
  const rec = await new FileCursorStore(join(dir, 'state')).load(CRASH_STATE_KEY);
  return parseCdcState(rec.value).position?.value;
}

/**
 * The workload against the captured tables, `kills` child generations each SIGKILLed at its
 * point, then a clean child to the source's head; returns what is wrong (empty: the protocol
 * held).
 */
export async function crashRun<D, F>(
  fx: CrashFixture<D, F>,
  kills: readonly Kill[],
  mutation?: CrashMutation,
  spark?: SparkSession,
): Promise<Outcome<D, F>> {
  const src = await fx.open(mutation, undefined, spark);
  const base = src.config;
  const dir = base.dir;
  const problems: string[] = [];
  const pairs: Pair<D>[] = [];
  const log = (i: number | string) => join(dir, `child-${i}.log`);

  /** After a kill: the committed state position, checked against the last one and the source. */
  const checkPair = async (
    generation: number,
    point: ChildPoint | 'idle',
    nth: number,
    committedAtKill: string | null,
  ): Promise<void> => {
    const committed = (await committedPosition(dir)) ?? null;
    const before = pairs.at(-1)?.committed ?? null;
    const at = `generation ${generation} (${point}#${nth})`;
    // The durable resume position only moves forward: a child never commits a position below the
    // one it started from.
    if (before !== null && committed !== null && fx.compare(committed, before) < 0)
      problems.push(
        `${at}: the state position moved backwards, from ${fx.display(before)} to ${fx.display(committed)}`,
      );
    const checked = await src.afterKill(at, committed, committedAtKill);
    pairs.push({ generation, point, nth, committed, committedAtKill, ...checked.pair });
    problems.push(...checked.problems);
  };

  // The first start commits a position; every change after the source's head at that moment
  // must arrive. Then it is SIGKILLed while idle.
  const first = startChild(fx.child, base, log('first'));
  const firstDeadline = Date.now() + fx.childDeadlineMs;
  while ((await committedPosition(dir)) === undefined) {
    if (first.proc.exitCode !== null) throw new Error(`the first child exited: ${first.stderr()}`);
    if (Date.now() > firstDeadline)
      throw new Error(`the first child committed no position in ${fx.childDeadlineMs} ms: ${first.stderr()}`);
    await sleep(100);
  }
  await src.captureStarted();
  let generations = 1;
  const committedAtIdle = (await committedPosition(dir)) ?? null;
  first.proc.kill('SIGKILL');
  await first.exited;
  // The parent killed this one: it records the kill line itself.
  writeFileSync(
    join(dir, 'kills'),
    `${JSON.stringify({ point: 'idle', nth: 1, committed: committedAtIdle } satisfies KillLine)}\n`,
  );
  await checkPair(-1, 'idle', 1, committedAtIdle);

  let workload: Workload | undefined = await src.startWorkload();
  try {
    for (const [i, { quiet, idleCommitMs, ...kill }] of kills.entries()) {
      if (quiet && workload) {
        await workload.stop();
        workload = undefined;
      } else if (!quiet && !workload) workload = await src.startWorkload();
      const child = startChild(
        fx.child,
        { ...base, kill, ...(idleCommitMs ? { idleCommitMs } : {}) },
        log(i),
      );
      generations++;
      const timer = setTimeout(() => child.proc.kill('SIGKILL'), fx.childDeadlineMs);
      const r = await child.exited;
      clearTimeout(timer);
      const lines = readKills(dir);
      const landed = lines.length === generations ? lines.at(-1) : undefined;
      if (r.signal !== 'SIGKILL')
        problems.push(
          `generation ${i}: expected a SIGKILL at ${kill.point}#${kill.nth}, the child exited ${r.code ?? r.signal}: ${child.stderr().slice(-2500)}`,
        );
      else if (!landed || landed.point !== kill.point || landed.nth !== kill.nth)
        problems.push(
          `generation ${i}: the kill at ${kill.point}#${kill.nth} did not land (killed after ${fx.childDeadlineMs} ms, or recorded ${JSON.stringify(lines.at(-1))})`,
        );
      if (!landed) {
        // Keep the kills file aligned with the generations.
        writeFileSync(
          join(dir, 'kills'),
          `${[...lines, { point: kill.point, nth: -1, committed: null }].map((l) => JSON.stringify(l)).join('\n')}\n`,
        );
      }
      await checkPair(i, kill.point, kill.nth, landed?.committed ?? null);
    }
  } finally {
    if (workload) await workload.stop();
  }

  // The workload has stopped: everything it committed is before this head.
  const stop = await src.head();
  const stateStore = new FileCursorStore(join(dir, 'state'));
  const versionBefore = (await stateStore.load(CRASH_STATE_KEY)).version;
  const last = startChild(fx.child, base, log('last'));
  const lastDeadline = Date.now() + fx.cleanChildDeadlineMs;
  let caughtUp = false;
  while (last.proc.exitCode === null && Date.now() < lastDeadline) {
    // The child has written the state (taken the lease: its SIGTERM handler is installed) and
    // its committed position reached the head at the stop.
    const rec = await stateStore.load(CRASH_STATE_KEY);
    const pos = parseCdcState(rec.value).position?.value;
    if (rec.version > versionBefore && pos !== undefined && fx.reached(pos, stop)) {
      caughtUp = true;
      break;
    }
    await sleep(200);
  }
  last.proc.kill('SIGTERM');
  const lastExit = await last.exited;
  if (!caughtUp)
    problems.push(
      `the clean child did not reach the ${fx.headName} ${fx.display(stop)} (state at ${fx.display(await committedPosition(dir))}): ${last.stderr().slice(-800)}`,
    );
  if (lastExit.code !== 0)
    problems.push(
      `the clean child did not drain and exit 0 on SIGTERM (${lastExit.code ?? lastExit.signal}): ${last.stderr().slice(-800)}`,
    );
  const finished = await src.finish(await committedPosition(dir), pairs.at(-1)?.committed ?? null);
  problems.push(...finished.problems);
  return { problems, pairs, facts: finished.facts };
}

/** `n` kills cycling through the protocol points, each at its 1st, 2nd or 3rd reach. */
export function schedule(n: number, points: readonly ChildPoint[] = POINTS): Kill[] {
  return Array.from({ length: n }, (_, i) => ({ point: points[i % points.length]!, nth: 1 + (i % 3) }));
}

/** An outcome as the failure messages show it. */
export function summarize<D, F>(fx: CrashFixture<D, F>, o: Outcome<D, F>): string {
  return JSON.stringify(
    { problems: o.problems, ...o.facts, pairs: o.pairs.map((p) => fx.showPair(p)) },
    null,
    2,
  );
}

/** Kills of the `noop-recover` mutant: a crashed attempt's objects left in the lake. */
export const AFTER_WRITE_KILLS: readonly Kill[] = [
  { point: 'after-write', nth: 2 },
  { point: 'after-write', nth: 3 },
  { point: 'after-write', nth: 2 },
  { point: 'after-write', nth: 1 },
];

/** Kills of the `commit-before-write` mutant: a page committed but never written. */
export const AFTER_COMMIT_KILLS: readonly Kill[] = [
  { point: 'after-commit', nth: 2 },
  { point: 'after-commit', nth: 3 },
  { point: 'after-commit', nth: 2 },
  { point: 'after-commit', nth: 1 },
];

/**
 * The scenarios every driver runs, registered in the caller's `describe`: the 20-kill run, and one
 * mutation self-check per broken protocol step. `spark`: the file's Spark session, when it has one
 * (Iceberg tables are then read by Spark too).
 */
export function cdcCrashScenarios<D, F>(
  fx: CrashFixture<D, F>,
  spark: () => SparkSession | undefined = () => undefined,
): void {
  afterAll(runCleanups);

  it(fx.title, { timeout: 15 * 60_000 }, async () => {
    const started = Date.now();
    const outcome = await crashRun(fx, schedule(20, fx.points), undefined, spark());
    process.stdout.write(
      `[${fx.tag}] ${((Date.now() - started) / 1000).toFixed(1)} s, ${fx.report(outcome)}\n`,
    );
    expect(outcome.problems, summarize(fx, outcome)).toEqual([]);
    // The idle kill of the first child, then the 20 kills at protocol points.
    expect(outcome.pairs).toHaveLength(21);
  });

  // Mutation self-checks: each broken protocol must be DETECTED by the same checker, by the
  // check that guards the step it breaks.
  for (const [mutation, { kills, detectedBy }] of Object.entries(fx.mutants) as [
    CrashMutation,
    { kills: readonly Kill[]; detectedBy: RegExp },
  ][]) {
    it(`detects a broken protocol: ${mutation}`, { timeout: 10 * 60_000 }, async () => {
      const outcome = await crashRun(fx, kills, mutation, spark());
      process.stdout.write(
        `[${fx.tag}, mutation ${mutation}] detected ${outcome.problems.length} problem(s), the first: ${String(outcome.problems[0]).slice(0, 300)}\n`,
      );
      // Only the violation the broken step causes counts (not, say, a workload that did not run).
      const violations = outcome.problems.filter((p) => detectedBy.test(p));
      expect(violations.length, summarize(fx, outcome)).toBeGreaterThan(0);
    });
  }
}
