/**
 * `tidemark status`: per table the last run and the last error, the lease holder, the cursor,
 * row versions written against this pipeline's objects in the lake, and freshness
 * (shared/engine/incremental/status.ts). A block per table for people, or with `--json` exactly
 * one JSON object per table on stdout (a table whose state cannot be read is an error object).
 */
import { parseArgs } from 'node:util';
import { findIncrementalTable, isIncremental, tableTarget } from '../../../shared/config/spec.js';
import { recordError } from '../../../shared/engine/incremental/state.js';
import { incrementalStatus, type TableStatus } from '../../../shared/engine/incremental/status.js';
import { openPipeline } from '../../../shared/pipeline/open.js';
import { writerId } from '../../../shared/sink/layout.js';
import { holderLiveness, parseLeaseOwner } from '../../../shared/state/lease-owner.js';
import { EXIT, errorObject, specArg } from '../args.js';
import { clockText, leaseText, spanText, whenText } from '../human-time.js';

const STOPPED: Record<string, string> = {
  'caught-up': 'caught up',
  deadline: 'stopped at the deadline, more pending',
  'max-pages': 'stopped at --max-pages, more pending',
  interrupted: 'interrupted (Ctrl-C / SIGTERM), more pending',
  error: 'failed',
};

export async function cmdStatus(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string', short: 'c' },
      table: { type: 'string', short: 't' },
      json: { type: 'boolean' },
    },
  });
  const json = values.json ?? false;
  try {
    process.exitCode = await showTables(values, json);
  } catch (e) {
    // The error object on stdout keeps `--json` output parseable; main prints the line on stderr.
    if (json) process.stdout.write(`${JSON.stringify({ status: 'error', error: errorObject(e) })}\n`);
    throw e;
  }
}

/** Prints every selected table's status; returns the exit code. */
async function showTables(values: { config?: string; table?: string }, json: boolean): Promise<number> {
  const spec = specArg(values);
  const tables = values.table ? [findIncrementalTable(spec, values.table, 'tidemark status')] : spec.tables;
  const pipeline = await openPipeline(spec, { sourcesLazy: true });
  let failed = 0;
  try {
    for (const t of tables) {
      const target = tableTarget(t);
      if (!isIncremental(t)) {
        // A cdc table's state is its source's, written by the CDC task: not shown here yet.
        const note = 'mode: cdc; its status arrives with `tidemark cdc`, which runs it';
        if (json)
          process.stdout.write(
            `${JSON.stringify({ pipeline: spec.pipeline, table: target, status: 'skipped', mode: 'cdc', reason: note })}\n`,
          );
        else process.stdout.write(`${target}: skipped (${note})\n`);
        continue;
      }
      try {
        const s = await incrementalStatus({
          pipeline: spec.pipeline,
          table: { source: t.table, target, cursor: t.cursor },
          writer: writerId(spec.pipeline, t.source),
          store: pipeline.store,
          sink: pipeline.sink,
          now: Date.now(),
          liveness: (owner) => holderLiveness(parseLeaseOwner(owner)),
        });
        if (json) process.stdout.write(`${JSON.stringify(s)}\n`);
        else process.stdout.write(humanStatus(s, Date.now()));
      } catch (e) {
        failed += 1;
        const error = recordError(e);
        if (json)
          process.stdout.write(
            `${JSON.stringify({ pipeline: spec.pipeline, table: target, status: 'error', error })}\n`,
          );
        else process.stderr.write(`tidemark: ${target}: ${error.message}\n`);
      }
    }
  } finally {
    await pipeline.close();
  }
  return failed > 0 ? EXIT.error : EXIT.ok;
}

/** One table as a block of labelled lines. */
function humanStatus(s: TableStatus, now: number): string {
  const mb = (bytes: number) => `${(bytes / 1e6).toFixed(2)} MB`;
  const lines = [`${s.table}  (source ${s.source}, writer ${s.writer})`];
  const row = (label: string, text: string) => lines.push(`  ${label.padEnd(11)} ${text}`);
  if (!s.synced) {
    row('state', 'never synced: the first run reads the table from the start');
  } else {
    row('cursor', s.cursor === null ? '(start: the next run reads the table from the start)' : s.cursor);
    const r = s.lastRun;
    row(
      'last run',
      r === null
        ? '(not recorded)'
        : `${r.result === 'ok' ? 'ok' : `failed (${r.error?.code ?? 'error'})`}, ${STOPPED[r.stopped] ?? r.stopped}: ${r.rows} rows in ${r.pages} page(s), ${mb(r.bytes)}, ${(r.durationMs / 1000).toFixed(1)} s; ended ${whenText(Date.parse(r.finishedAt), now)}`,
    );
    if (s.schema)
      row('schema', `version ${s.schema.version} (${s.schema.columns} columns, hash ${s.schema.hash})`);
    const e = s.lastError;
    row('last error', e === null ? 'none' : `${whenText(Date.parse(e.at), now)}: ${e.code}: ${e.message}`);
    const moved = s.lastCommitAt === null ? 'never' : whenText(Date.parse(s.lastCommitAt), now);
    const fresh = s.freshness;
    row(
      'freshness',
      fresh === null
        ? `cursor last moved ${moved}`
        : `newest synced ${s.cursorColumn} ${clockText(Date.parse(fresh.newestCursorAt), now)} (${spanText(fresh.ageSeconds * 1000)} old); cursor last moved ${moved}`,
    );
    row(
      'lake',
      `${s.rowVersionsWritten} row version(s) written; ${s.lake.objects} object(s) of this writer, ${mb(s.lake.bytes)}`,
    );
  }
  const l = s.lease;
  const lease = l.held ? { owner: l.owner!, expiresAt: Date.parse(l.expiresAt!) } : undefined;
  row('lease', leaseText(lease, now, l.alive === null ? 'unknown' : l.alive ? 'alive' : 'dead'));
  return `${lines.join('\n')}\n\n`;
}
