/**
 * `tidemark status`: per table the last run and the last error, the lease holder, the cursor,
 * row versions written against this pipeline's objects in the lake, and freshness
 * (shared/engine/incremental/status.ts). A block per table for people, or with `--json` exactly
 * one JSON object per table on stdout (a table whose state cannot be read is an error object).
 * Then per CDC source of the selected cdc tables (shared/engine/cdc/status.ts): its position,
 * lease and whether anyone captures, its last failure (a failed start included) until a later
 * start commits, its event log, and its tables; one block, or one JSON object
 * (`mode: "cdc"`, with a `tables` array) per source.
 */
import { parseArgs } from 'node:util';
import { findTable, isIncremental, tableTarget } from '../../../shared/config/spec.js';
import type { CdcStreamEvent } from '../../../shared/engine/cdc/state.js';
import { type CdcSourceStatus, cdcStatus } from '../../../shared/engine/cdc/status.js';
import { recordError } from '../../../shared/engine/incremental/state.js';
import { incrementalStatus, type TableStatus } from '../../../shared/engine/incremental/status.js';
import { openPipeline } from '../../../shared/pipeline/open.js';
import { writerId } from '../../../shared/sink/layout.js';
import { holderLiveness, parseLeaseOwner } from '../../../shared/state/lease-owner.js';
import { EXIT, errorObject, errorText, specArg } from '../args.js';
import { clockText, leaseText, relativeText, spanText, whenText } from '../human-time.js';

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

/** Prints every selected table's status, then every selected CDC source's; returns the exit code. */
async function showTables(values: { config?: string; table?: string }, json: boolean): Promise<number> {
  const spec = specArg(values);
  const tables = values.table ? [findTable(spec, values.table)] : spec.tables;
  const pipeline = await openPipeline(spec, { sourcesLazy: true });
  let failed = 0;
  const fail = (what: Record<string, string>, name: string, e: unknown) => {
    failed += 1;
    const error = recordError(e);
    if (json)
      process.stdout.write(
        `${JSON.stringify({ pipeline: spec.pipeline, ...what, status: 'error', error })}\n`,
      );
    else process.stderr.write(errorText(`${name}: ${error.message}`));
  };
  try {
    for (const t of tables) {
      if (!isIncremental(t)) continue;
      const target = tableTarget(t);
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
        fail({ table: target }, target, e);
      }
    }
    // A cdc table's state is its source's: one block (one JSON object) per source, its tables in it.
    const sources = new Map<string, { source: string; target: string }[]>();
    for (const t of tables) {
      if (isIncremental(t)) continue;
      const list = sources.get(t.source) ?? [];
      list.push({ source: t.table, target: tableTarget(t) });
      sources.set(t.source, list);
    }
    for (const [source, list] of sources) {
      try {
        const s = await cdcStatus({
          pipeline: spec.pipeline,
          source,
          tables: list,
          writer: writerId(spec.pipeline, source),
          store: pipeline.store,
          sink: pipeline.sink,
          now: Date.now(),
          liveness: (owner) => holderLiveness(parseLeaseOwner(owner)),
        });
        if (json) process.stdout.write(`${JSON.stringify(s)}\n`);
        else process.stdout.write(humanCdcStatus(s, Date.now()));
      } catch (e) {
        fail({ source, mode: 'cdc' }, `sources.${source} (cdc)`, e);
      }
    }
  } finally {
    await pipeline.close();
  }
  return failed > 0 ? EXIT.error : EXIT.ok;
}

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(2)} MB`;

/** One CDC source as a block of labelled lines, then a block per table of it. */
function humanCdcStatus(s: CdcSourceStatus, now: number): string {
  const lines = [`sources.${s.source}  (mode cdc, state ${s.key}, writer ${s.writer})`];
  const row = (label: string, text: string, indent = '  ') =>
    lines.push(`${indent}${label.padEnd(11)} ${text}`);
  const l = s.lease;
  const lease = l.held ? { owner: l.owner!, expiresAt: Date.parse(l.expiresAt!) } : undefined;
  row(
    'state',
    s.state === 'active'
      ? 'active: a live lease holder captures the stream'
      : s.lastFailure !== null
        ? 'idle: the capture failed (last failure below); nobody captures the stream'
        : l.held
          ? 'idle: the lease holder is gone; nobody captures (the next `tidemark cdc` takes the lease over)'
          : 'idle: no lease; nobody captures the stream',
  );
  row('lease', leaseText(lease, now, l.alive === null ? 'unknown' : l.alive ? 'alive' : 'dead'));
  row(
    'position',
    s.position === null
      ? '(none committed: the first capture starts at the current log position)'
      : `${s.position} (${s.positionScheme})`,
  );
  row('last commit', s.lastCommitAt === null ? 'never' : whenText(Date.parse(s.lastCommitAt), now));
  // Shown until a later start commits (shared/engine/cdc/failure.ts); its message names the fix.
  const f = s.lastFailure;
  row(
    'last failure',
    f === null ? 'none' : `${f.at} (${relativeText(Date.parse(f.at), now)}) ${f.code}: ${f.message}`,
  );
  for (const line of f?.detail?.split('\n') ?? []) row('', line);
  if (s.events.length === 0) row('events', 'none');
  for (const [i, e] of s.events.entries())
    row(i === 0 ? 'events' : '', `${whenText(Date.parse(e.at), now)}: ${eventText(e)}`);
  for (const t of s.tables) {
    lines.push(`  ${t.table}  (source ${t.source})`);
    const trow = (label: string, text: string) => row(label, text, '    ');
    if (!t.captured) {
      trow('state', 'never captured: the state has no entry for it yet');
    } else {
      trow(
        'state',
        t.stopped === null
          ? 'capturing'
          : `STOPPED ${whenText(Date.parse(t.stopped.at), now)}: ${t.stopped.reason}; its changes are dropped until it is re-snapshotted${t.stopped.event ? ` (${eventText(t.stopped.event)}, ${whenText(Date.parse(t.stopped.event.at), now)})` : ''}`,
      );
      trow('next', t.next ?? '(no flush yet)');
      trow(
        'last flush',
        t.lastFlushAt === null
          ? 'never'
          : `${whenText(Date.parse(t.lastFlushAt), now)}${t.lagMs === null ? '' : `; lag ${spanText(t.lagMs)}`}`,
      );
      if (t.schemaVersion !== null)
        trow('schema', `version ${t.schemaVersion} (hash ${t.schemaHash ?? '?'})`);
      if (t.snapshot !== null)
        trow(
          'snapshot',
          t.snapshot.state === 'complete'
            ? `complete: ${t.snapshot.rows} row(s) in ${t.snapshot.chunks} chunk(s)${t.snapshot.completedAt ? `, ${whenText(Date.parse(t.snapshot.completedAt), now)}` : ''}`
            : `${t.snapshot.state.replace('_', ' ')}: ${t.snapshot.rows} row(s) in ${t.snapshot.chunks} chunk(s) so far, ${t.snapshot.pendingRanges} range(s) pending${t.snapshot.divided ? '' : ' and the rest of the table not yet divided'}${t.snapshot.retries ? `, ${t.snapshot.retries} chunk(s) read again` : ''}; it goes on when the capture runs`,
        );
    }
    trow(
      'lake',
      `${t.rows} row(s) in ${t.objects} object(s) committed; ${t.lake.objects} object(s) of this writer, ${mb(t.lake.bytes)}`,
    );
  }
  return `${lines.join('\n')}\n\n`;
}

function eventText(e: CdcStreamEvent): string {
  const what = e.kind === 'gap' ? 'gap (changes lost to the log)' : e.kind;
  return `${what}${e.table ? ` on ${e.table}` : ''}: ${e.detail}`;
}

/** One table as a block of labelled lines. */
function humanStatus(s: TableStatus, now: number): string {
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
