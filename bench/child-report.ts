/**
 * The measured part of a benchmark child process (bench/cdc-child.ts, bench/cdc-mysql-child.ts):
 * its wall seconds, CPU of all threads and of the main thread alone, peak RSS, written as one JSON
 * line on stdout for the parent. Imports nothing heavy, so the child's own figures stay its own.
 */
import { readFileSync, writeSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

/** What every child reports besides its own counts. */
export interface ChildRunReport {
  /** Seconds from process start to the measured part (node, tsx, imports). */
  readonly startupSeconds: number;
  /** Wall seconds of the measured part. */
  readonly runSeconds: number;
  /** User + system CPU seconds of the whole process (all threads) during the measured part. */
  readonly runCpuSeconds: number;
  /** Of which the main thread (from /proc/self/task); the rest is the Parquet worker, GC, libuv. */
  readonly mainThreadCpuSeconds: number | undefined;
  /** process.resourceUsage().maxRSS, KiB. */
  readonly maxRssKiB: number;
}

/** CPU seconds (user + system) of the main thread, from /proc; undefined off Linux. */
function mainThreadCpu(): number | undefined {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state): utime is field 14, stime field 15 (clock ticks, 100 Hz).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

/**
 * Runs the measured part, writes its report (`run`'s counts plus the figures above) as one JSON
 * line on stdout and exits. `run` may give its own `runSeconds` (e.g. until the durable commit);
 * otherwise the wall time of `run` counts.
 */
export async function reportChildRun<R extends object>(
  run: () => Promise<{ readonly result: R; readonly runSeconds?: number }>,
): Promise<never> {
  const startupSeconds = process.uptime();
  const cpuBefore = process.cpuUsage();
  const mainBefore = mainThreadCpu();
  const started = performance.now();
  const { result, runSeconds } = await run();
  const wall = (performance.now() - started) / 1000;
  const cpuRun = process.cpuUsage(cpuBefore);
  const mainAfter = mainThreadCpu();
  const report: ChildRunReport & R = {
    startupSeconds,
    runSeconds: runSeconds ?? wall,
    runCpuSeconds: (cpuRun.user + cpuRun.system) / 1e6,
    mainThreadCpuSeconds:
      mainBefore === undefined || mainAfter === undefined ? undefined : mainAfter - mainBefore,
    maxRssKiB: process.resourceUsage().maxRSS,
    ...result,
  };
  writeSync(1, `${JSON.stringify(report)}\n`);
  process.exit(0);
}
