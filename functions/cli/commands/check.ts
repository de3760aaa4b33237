/**
 * `tidemark check`: everything a run needs, checked before it runs (shared/pipeline/check.ts),
 * one line per check on stdout, `ok` / `warn` / `fail` with the fix; exit 1 when a line failed.
 * With --json, one JSON object per line plus a summary object, and nothing else on stdout.
 * `tidemark invoke check` prints the deployed handler's report with the same printer.
 */
import { parseArgs } from 'node:util';
import { type CheckReport, checkPipeline } from '../../../shared/pipeline/check.js';
import { specArg } from '../args.js';

export async function cmdCheck(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string', short: 'c' },
      table: { type: 'string', short: 't' },
      json: { type: 'boolean' },
    },
  });
  const spec = specArg(values);
  const report = await checkPipeline(spec, values.table ? { table: values.table } : {});
  printReport(report, values.json ?? false);
}

/** Prints a report as lines (or JSON lines) and sets exit code 1 when a check failed. */
export function printReport(report: CheckReport, json: boolean): void {
  const { counts } = report;
  if (json) {
    for (const l of report.lines) console.log(JSON.stringify({ type: 'check', ...l }));
    console.log(
      JSON.stringify({ type: 'summary', pipeline: report.pipeline, ...counts, passed: report.passed }),
    );
  } else {
    for (const l of report.lines) console.log(`${l.status.padEnd(5)}${l.subject} ${l.check}: ${l.message}`);
    console.log(
      `pipeline ${report.pipeline}: ${counts.ok} ok, ${counts.warn} warn, ${counts.fail} fail; ${
        report.passed ? 'ready to run' : 'fix the failed checks before running'
      }`,
    );
  }
  if (!report.passed) process.exitCode = 1;
}
