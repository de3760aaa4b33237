/**
 * `tidemark run`: syncs a spec's incremental tables locally until caught up. `mode: cdc` tables
 * are skipped with a note (they run under `tidemark cdc`); a spec may mix both.
 * stdout carries the results only: one line per table, or with `--json` exactly one JSON object
 * per table (errors and skipped cdc tables too); logs and progress go to stderr.
 *
 * Ctrl-C (SIGINT) or SIGTERM stops cleanly: the page being written still commits, the read in
 * flight is abandoned, the lease is released and the run records that it was interrupted;
 * tables not started yet are reported as such; exit 130 / 143. A second signal quits at once
 * (the lease then stays, and the next local run takes it over: its holder is gone).
 */
import { parseArgs } from 'node:util';
import { findIncrementalTable, isIncremental, type Spec, tableTarget } from '../../../shared/config/spec.js';
import type { IncrementalSummary } from '../../../shared/engine/incremental/options.js';
import { recordError } from '../../../shared/engine/incremental/state.js';
import { createLogger, type Logger } from '../../../shared/observability/log.js';
import { openPipeline } from '../../../shared/pipeline/open.js';
import { runTable } from '../../../shared/pipeline/run-table.js';
import { holderLiveness, holderName, parseLeaseOwner } from '../../../shared/state/lease-owner.js';
import { EXIT, errorObject, errorText, specArg, UsageError } from '../args.js';
import { leaseText } from '../human-time.js';

/** What `--json` prints for one table (and for an error before any table ran). */
type TableResult =
  | (Omit<IncrementalSummary, 'leaseHolder'> & {
      readonly leaseHolder?: {
        readonly owner: string;
        readonly holder: string;
        readonly expiresAt: string | null;
      };
    })
  | {
      readonly pipeline?: string;
      readonly table?: string;
      readonly status: 'error';
      readonly error: { code: string; message: string };
    }
  | {
      readonly pipeline: string;
      readonly table: string;
      readonly status: 'not-started';
      readonly reason: 'interrupted';
    }
  | {
      readonly pipeline: string;
      readonly table: string;
      readonly status: 'skipped';
      readonly mode: 'cdc';
      readonly reason: string;
    };

/** Why `run` leaves a cdc table alone. */
const CDC_SKIPPED = 'mode: cdc; it runs under `tidemark cdc`, not `tidemark run`';

export async function cmdRun(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string', short: 'c' },
      table: { type: 'string', short: 't' },
      'max-pages': { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const json = values.json ?? false;
  try {
    const spec = specArg(values);
    const tables = values.table ? [findIncrementalTable(spec, values.table, 'tidemark run')] : spec.tables;
    const maxPages = values['max-pages'] === undefined ? undefined : Number(values['max-pages']);
    if (maxPages !== undefined && !(Number.isInteger(maxPages) && maxPages > 0))
      throw new UsageError('--max-pages takes a positive integer');
    process.exitCode = await runTables(spec, tables, { json, ...(maxPages ? { maxPages } : {}) });
  } catch (e) {
    // The error object on stdout keeps `--json` output parseable; main prints the line on stderr.
    if (json) print({ status: 'error', error: errorObject(e) });
    throw e;
  }
}

/** Runs the tables one after the other; returns the exit code. */
async function runTables(
  spec: Spec,
  tables: Spec['tables'],
  opts: { json: boolean; maxPages?: number },
): Promise<number> {
  const tty = !opts.json && Boolean(process.stderr.isTTY);
  const logger = createLogger({ json: opts.json || !tty });
  const interrupt = interruptOnSignals(logger);
  const pipeline = await openPipeline(spec, { logger });
  let failed = 0;
  let leaseHeld = 0;
  try {
    for (const t of tables) {
      const target = tableTarget(t);
      if (!isIncremental(t)) {
        report(opts.json, {
          pipeline: spec.pipeline,
          table: target,
          status: 'skipped',
          mode: 'cdc',
          reason: CDC_SKIPPED,
        });
        continue;
      }
      if (interrupt.signal.aborted) {
        report(opts.json, {
          pipeline: spec.pipeline,
          table: target,
          status: 'not-started',
          reason: 'interrupted',
        });
        continue;
      }
      try {
        const s = await runTable(spec, t, pipeline, {
          logger,
          progressTty: tty,
          takeOverDeadLocalHolders: true,
          signal: interrupt.signal,
          ...(opts.maxPages ? { maxPages: opts.maxPages } : {}),
        });
        if (s.status === 'lease-held') leaseHeld += 1;
        report(opts.json, withReadableHolder(s));
      } catch (e) {
        failed += 1;
        report(opts.json, { pipeline: spec.pipeline, table: target, status: 'error', error: recordError(e) });
      }
    }
  } finally {
    await pipeline.close();
    interrupt.dispose();
  }
  if (interrupt.received) return interrupt.received === 'SIGTERM' ? EXIT.terminated : EXIT.interrupted;
  if (failed > 0) return EXIT.error;
  return leaseHeld > 0 ? EXIT.leaseHeld : EXIT.ok;
}

/**
 * Turns the first SIGINT / SIGTERM into an abort of the run (what is durable stays, the lease is
 * released) and a second one into an immediate exit.
 */
function interruptOnSignals(logger: Logger): {
  readonly signal: AbortSignal;
  readonly received: NodeJS.Signals | undefined;
  dispose(): void;
} {
  const controller = new AbortController();
  let received: NodeJS.Signals | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    if (received) process.exit(sig === 'SIGTERM' ? EXIT.terminated : EXIT.interrupted);
    received = sig;
    logger.warn(
      `${sig}: stopping after the page in flight is committed; the lease is released (${sig} again quits at once)`,
    );
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    signal: controller.signal,
    get received() {
      return received;
    },
    dispose() {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

function withReadableHolder(s: IncrementalSummary): TableResult {
  if (!s.leaseHolder) return s as TableResult;
  const expiresAt = s.leaseHolder.expiresAt;
  return {
    ...s,
    leaseHolder: {
      owner: s.leaseHolder.owner,
      holder: holderName(parseLeaseOwner(s.leaseHolder.owner)),
      expiresAt: expiresAt === undefined ? null : new Date(expiresAt).toISOString(),
    },
  };
}

/** One table's result: a JSON line, or a line for people (errors on stderr). */
function report(json: boolean, r: TableResult): void {
  if (json) {
    print(r);
  } else if (r.status === 'error') {
    // Errors often start with the table already: say it once (`t: t: ...` helps nobody).
    const prefix = `${r.table}: `;
    const message = r.error.message.startsWith(prefix)
      ? r.error.message.slice(prefix.length)
      : r.error.message;
    process.stderr.write(errorText(`${r.table}: ${message}`));
  } else if (r.status === 'not-started') {
    console.log(`${r.table}: not started (interrupted)`);
  } else if (r.status === 'skipped') {
    console.log(`${r.table}: skipped (${r.reason})`);
  } else if (r.status === 'lease-held') {
    const h = r.leaseHolder;
    const lease = h
      ? { owner: h.owner, expiresAt: h.expiresAt ? Date.parse(h.expiresAt) : Date.now() }
      : undefined;
    const liveness = h ? holderLiveness(parseLeaseOwner(h.owner)) : 'unknown';
    console.log(
      `${r.table}: skipped, another run holds the lease (${leaseText(lease, Date.now(), liveness)})`,
    );
  } else {
    const rate = r.durationMs > 0 ? Math.round((r.rows / r.durationMs) * 1000) : 0;
    const end =
      r.stopped === 'interrupted'
        ? `, interrupted: the next run continues from page ${r.seqAfter}`
        : r.more
          ? `, more pending (${r.stopped === 'max-pages' ? 'max pages' : (r.stopped ?? 'deadline')})`
          : ', caught up';
    console.log(
      `${r.table}: ${r.rows} rows in ${r.pages} page(s), ${(r.bytes / 1e6).toFixed(2)} MB, ${(r.durationMs / 1000).toFixed(1)} s (${rate} rows/s)${end}`,
    );
  }
}

function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, (_k, v) => (typeof v === 'bigint' ? v.toString() : v))}\n`);
}
