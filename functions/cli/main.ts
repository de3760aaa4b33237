/**
 * The `tidemark` command line: validate a spec, run tables locally until caught up, invoke the
 * BUNDLED Lambda handler in a fresh process (our `sam local invoke`), show status, reset a table,
 * and the embedded demo behind `npm start`.
 *
 * A thin shell over shared/: parse arguments, call, print. Exit 0 on success; on error one line
 * `tidemark: <reason>` on stderr and exit 1 (2 for usage errors). Every error it prints, and the
 * spec `validate` prints, passes through `redact` (shared/observability/redact.ts).
 */
import { inspect, parseArgs } from 'node:util';
import { findTable, loadSpecFile, redactSpec, type Spec, tableTarget } from '../../shared/config/spec.js';
import { TidemarkError } from '../../shared/contracts/errors.js';
import { incrementalStateKey } from '../../shared/engine/incremental-run.js';
import { parseIncrementalState } from '../../shared/engine/incremental-state.js';
import { createLogger } from '../../shared/observability/log.js';
import { redact } from '../../shared/observability/redact.js';
import { openPipeline } from '../../shared/pipeline/open.js';
import { defaultOwner, runTable } from '../../shared/pipeline/run-table.js';

const USAGE = `usage: tidemark <command> [options]

commands:
  validate -c FILE                      check a pipeline spec and print it (secrets redacted)
  run -c FILE [--table T] [--max-pages N]
                                        sync tables locally until caught up
  invoke incremental -c FILE --table T [--timeout SECONDS]
                                        run the bundled Lambda handler in a fresh process
  status -c FILE                        per table: cursor, last commit, rows
  reset -c FILE --table T               forget a table's cursor (next run resyncs from the start)
  demo                                  embedded Postgres -> Parquet demo (npm start)
`;

class UsageError extends Error {}

function specArg(values: { config?: string | undefined }): Spec {
  if (!values.config) throw new UsageError('missing -c FILE (the pipeline spec)');
  return loadSpecFile(values.config);
}

async function cmdValidate(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { config: { type: 'string', short: 'c' } } });
  const spec = specArg(values);
  console.log(JSON.stringify(redactSpec(spec), null, 2));
  console.log(`ok: pipeline ${spec.pipeline}, ${spec.tables.length} table(s)`);
}

async function cmdRun(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string', short: 'c' },
      table: { type: 'string', short: 't' },
      'max-pages': { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const spec = specArg(values);
  const tables = values.table ? [findTable(spec, values.table)] : spec.tables;
  const tty = !values.json && Boolean(process.stderr.isTTY);
  const logger = createLogger({ json: values.json ?? !tty });
  const pipeline = await openPipeline(spec);
  let failed = 0;
  try {
    for (const t of tables) {
      try {
        const s = await runTable(spec, t, pipeline, {
          logger,
          progressTty: tty,
          ...(values['max-pages'] ? { maxPages: Number(values['max-pages']) } : {}),
        });
        if (s.status === 'lease-held') {
          console.log(`${s.table}: skipped, another run holds the lease`);
        } else {
          const rate = s.durationMs > 0 ? Math.round((s.rows / s.durationMs) * 1000) : 0;
          console.log(
            `${s.table}: ${s.rows} rows in ${s.pages} page(s), ${(s.bytes / 1e6).toFixed(2)} MB, ${(s.durationMs / 1000).toFixed(1)} s (${rate} rows/s)${s.more ? ', more pending' : ', caught up'}`,
          );
        }
      } catch (e) {
        failed += 1;
        console.error(`tidemark: ${tableTarget(t)}: ${oneLine(e)}`);
      }
    }
  } finally {
    await pipeline.close();
  }
  if (failed > 0) process.exitCode = 1;
}

async function cmdInvoke(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c' },
      table: { type: 'string', short: 't' },
      timeout: { type: 'string' },
    },
  });
  if (positionals[0] !== 'incremental') throw new UsageError('invoke takes a handler name: invoke incremental ...');
  if (!values.config) throw new UsageError('missing -c FILE (the pipeline spec)');
  if (!values.table) throw new UsageError('missing --table T');
  const spec = loadSpecFile(values.config);
  findTable(spec, values.table);
  const { invokeLocal } = await import('./invoke.js');
  const out = await invokeLocal({
    handler: 'incremental',
    specFile: values.config,
    event: { table: values.table, pipeline: spec.pipeline },
    timeoutMs: Number(values.timeout ?? 900) * 1000,
  });
  console.log(JSON.stringify(out.response, null, 2));
  if (out.error) throw new TidemarkError('INVOKE_FAILED', out.error);
}

async function cmdStatus(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { config: { type: 'string', short: 'c' } } });
  const spec = specArg(values);
  const pipeline = await openPipeline(spec, { sourcesLazy: true });
  try {
    const rows = [];
    for (const t of spec.tables) {
      const rec = await pipeline.store.load(incrementalStateKey(spec.pipeline, tableTarget(t)));
      const st = parseIncrementalState(rec.value, t.cursor);
      const lease = rec.lease && rec.lease.expiresAt > Date.now() ? `held by ${rec.lease.owner}` : 'free';
      rows.push({
        table: tableTarget(t),
        cursor: st.cursorText ?? (st.cursor || '(start)'),
        pages: st.seq,
        rows: st.rowsTotal,
        lastCommit: st.lastCommitAt ?? 'never',
        lagSeconds: st.lastCommitAt ? Math.round((Date.now() - Date.parse(st.lastCommitAt)) / 1000) : null,
        lease,
      });
    }
    console.table(rows);
  } finally {
    await pipeline.close();
  }
}

async function cmdReset(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { config: { type: 'string', short: 'c' }, table: { type: 'string', short: 't' } },
  });
  const spec = specArg(values);
  if (!values.table) throw new UsageError('missing --table T');
  const t = findTable(spec, values.table);
  const pipeline = await openPipeline(spec, { sourcesLazy: true });
  const key = incrementalStateKey(spec.pipeline, tableTarget(t));
  const owner = defaultOwner();
  try {
    const rec = await pipeline.store.acquire(key, owner, 60_000);
    const st = parseIncrementalState(rec.value, t.cursor);
    // seq keeps counting: resynced rows get positions after every existing object, so readers'
    // max(__pos) still picks the newest version and no old object is overwritten.
    await pipeline.store.commit(key, {
      owner,
      expectedVersion: rec.version,
      value: { ...st, cursor: '', cursorColumn: t.cursor },
    });
    await pipeline.store.release(key, owner);
    console.log(`${tableTarget(t)}: cursor reset; the next run resyncs from the start (positions continue at page ${st.seq})`);
  } finally {
    await pipeline.close();
  }
}

/** The first line of an error, redacted: what the CLI prints. */
function oneLine(e: unknown): string {
  return redact(e instanceof Error ? (e.message.split('\n')[0] ?? e.name) : String(e));
}

async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'validate':
      return cmdValidate(rest);
    case 'run':
      return cmdRun(rest);
    case 'invoke':
      return cmdInvoke(rest);
    case 'status':
      return cmdStatus(rest);
    case 'reset':
      return cmdReset(rest);
    case 'demo': {
      const { runDemo } = await import('./demo.js');
      return runDemo();
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

main(process.argv.slice(2)).catch((e: unknown) => {
  if (e instanceof UsageError) {
    process.stderr.write(`tidemark: ${oneLine(e)}\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  process.stderr.write(`tidemark: ${oneLine(e)}\n`);
  if (process.env.TIDEMARK_DEBUG) process.stderr.write(`${redact(inspect(e))}\n`);
  process.exitCode = 1;
});
