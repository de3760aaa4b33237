/**
 * The `tidemark` command line: validate a spec, check everything a run needs, run tables locally
 * until caught up, capture the change-stream sources (`cdc`), invoke the BUNDLED Lambda handler in a fresh process (our `sam local invoke`),
 * show status, reset a table, convert an old change-log upsert table, and the embedded demo behind `npm start`. One file per command in
 * commands/.
 *
 * A thin shell over shared/: parse arguments, call, print. Exit 0 on success; on error a headline
 * `tidemark: <reason>` on stderr, at most args.ts `HEADLINE_MAX` characters (a longer reason's
 * details on indented lines after it), and the exit code of args.ts `EXIT` (listed in the usage
 * text). A closed stdout or stderr ends the process quietly (below).
 * Every error it prints, and the spec `validate` prints, passes through `redact`
 * (shared/observability/redact.ts).
 */
// The AWS SDK's Node 20 deprecation banner (8 lines on stderr at the first client) is for SDK
// maintainers' users, not ours: tidemark's Lambda runs Node 22, and the CLI supports Node 20.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { redact } from '../../shared/observability/redact.js';
import { repoRoot } from '../root.js';
import { errorLines, exitCodeOf, UsageError } from './args.js';
import { cmdCdc } from './commands/cdc.js';
import { cmdCheck } from './commands/check.js';
import { cmdConvert } from './commands/convert.js';
import { cmdInvoke } from './commands/invoke.js';
import { cmdReset } from './commands/reset.js';
import { cmdRun } from './commands/run.js';
import { cmdSchema } from './commands/schema.js';
import { cmdStatus } from './commands/status.js';
import { cmdUnlock } from './commands/unlock.js';
import { cmdValidate } from './commands/validate.js';

const USAGE = `usage: tidemark <command> [options]

Every command reads the spec from -c FILE, default ./tidemark.yaml.

commands:
  validate -c FILE [--state]            check a pipeline spec and print it (secrets redacted):
                                        every table's mode against its driver kind, and tables
                                        that changed mode against the state (a state.dir always;
                                        DynamoDB state with --state)
  check -c FILE [--table T] [--json]    before the first run: check that the sources connect, the
                                        tables, keys, cursors, indexes and grants are usable, and
                                        the state store and the lake take writes; exit 1 if any fails
  run -c FILE [--table T] [--max-pages N] [--json]
                                        sync the incremental tables locally until caught up
                                        (mode: cdc tables are skipped); with --json stdout
                                        carries exactly one JSON object per table (errors too)
                                        and logs go to stderr. Ctrl-C / SIGTERM stops after the
                                        page in flight is committed and releases the lease
  cdc -c FILE [--source NAME]           capture the mode: cdc tables: every source that has
                                        some (each under its own lease, concurrently) or the one
                                        named; runs until stopped (a finite source: until its
                                        end). A live status line on a TTY (per table: rows, last
                                        flush, lag; the source position), JSON logs otherwise. A
                                        source whose lease another live process holds waits as a
                                        standby and takes over when it expires. Ctrl-C / SIGTERM
                                        drain (flush, commit, ack, release within the source's
                                        stopTimeoutSeconds) and exit 0: for this long-running
                                        capture a requested stop is success
  invoke incremental -c FILE --table T [--timeout SECONDS] [--logs]
                                        run the bundled Lambda handler in a fresh process, as
                                        deployed (timeout default 900 s; --logs prints the
                                        function's log lines, always shown when it fails)
  invoke check -c FILE [--table T] [--json] [--timeout SECONDS]
                                        the same checks, inside the bundled Lambda handler
  status -c FILE [--table T] [--json]   per table: the last run (result, rows, why it stopped)
                                        and the last error, the lease holder, the cursor, row
                                        versions written vs. objects in the lake, freshness;
                                        --json: one JSON object per table on stdout
  reset -c FILE --table T [--keep-objects | --delete-objects]
                                        forget a table's cursor (next run resyncs from the start);
                                        when the state is lost or older than the lake, say what
                                        happens to this pipeline's objects in the lake: keep them
                                        (write after them) or delete them first. After a mode
                                        change (MODE_CHANGED): retires the incremental state of a
                                        table now mode: cdc; takes a table now mode: incremental
                                        out of the CDC state (--delete-objects)
  convert -c FILE [--table T] [--json]  convert once the upsert Iceberg tables a release before
                                        current-state tables wrote as change logs: older versions
                                        and deleted keys are deleted by position (no data file is
                                        rewritten), the table marked current-state; run it while
                                        no writer of the table runs. Per table: rows scanned and
                                        deleted, delete files, the snapshot, or already
                                        current-state
  schema accept -c FILE --table T       after a schema change stopped a table (SCHEMA_CHANGED):
                                        record its current schema as the one it writes; the
                                        next run continues from its cursor with new objects
  unlock -c FILE --table T [--force]    remove a table's lease whose holder is gone: a local
                                        process that died is removed at once, one still running
                                        is refused; a Lambda or another host's holder needs
                                        --force (a writer still running could still write)
  demo                                  embedded Postgres -> Parquet demo (npm start)
  --version                             print the version

exit codes:
  0    success
  1    an error (on stderr: tidemark: <reason>, its details indented after it)
  2    usage error
  75   another run holds a table's lease (run: that table was skipped; unlock: refused)
  130  run stopped by Ctrl-C (SIGINT), 143 by SIGTERM, after committing what was durable
       (cdc: a drain after a signal exits 0; 130 / 143 only when a second signal quits at once)
`;

async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'validate':
      return cmdValidate(rest);
    case 'check':
      return cmdCheck(rest);
    case 'cdc':
      return cmdCdc(rest);
    case 'run':
      return cmdRun(rest);
    case 'invoke':
      return cmdInvoke(rest);
    case 'status':
      return cmdStatus(rest);
    case 'reset':
      return cmdReset(rest);
    case 'unlock':
      return cmdUnlock(rest);
    case 'schema':
      return cmdSchema(rest);
    case 'convert':
      return cmdConvert(rest);
    case 'demo': {
      const { runDemo } = await import('./demo.js');
      return runDemo();
    }
    case '--version':
    case '-v':
    case 'version': {
      const pkg = JSON.parse(readFileSync(join(repoRoot(), 'package.json'), 'utf8')) as {
        version: string;
      };
      process.stdout.write(`tidemark ${pkg.version}\n`);
      return;
    }
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE);
      return;
    default:
      throw new UsageError(`unknown command "${cmd}"`);
  }
}

/**
 * Commands that do work past their output (sync, capture, a local Lambda): a closed pipe cuts
 * that work short, so they do not end as a success.
 */
const WORKING_COMMANDS = new Set(['run', 'cdc', 'invoke', 'demo']);
/** 128 + SIGPIPE: what a shell reports for a process a closed pipe ended. */
const EXIT_CLOSED_PIPE = 141;

// A reader that stops early (`tidemark status | head -1`) closes the pipe. That ends the command
// at once and quietly, as SIGPIPE ends other tools: never a stack trace. A command whose output
// was all there was to do exits with the code it had so far (0, unless it had already failed); a
// working command (run, cdc) was stopped mid-work, which a supervisor or `set -o pipefail` must
// see: 141. Stopping is as safe as a kill at that point (the state holds only what was committed).
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE') throw e;
    const working = WORKING_COMMANDS.has(process.argv[2] ?? '');
    process.exit(working && !process.exitCode ? EXIT_CLOSED_PIPE : Number(process.exitCode ?? 0));
  });
}

main(process.argv.slice(2)).catch((e: unknown) => {
  // The code first: a closed stderr ends the process on the write below, with this code.
  process.exitCode = exitCodeOf(e);
  if (e instanceof UsageError) {
    process.stderr.write(`${errorLines(e)}\n${USAGE}`);
    return;
  }
  process.stderr.write(errorLines(e));
  if (process.env.TIDEMARK_DEBUG) process.stderr.write(`${redact(inspect(e))}\n`);
});
