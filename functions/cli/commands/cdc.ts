/**
 * `tidemark cdc`: captures a spec's change-stream sources locally (every source with `mode: cdc`
 * tables, each under its own lease, concurrently; or the one named by `--source`) with the same
 * runner as the Fargate task (shared/pipeline/cdc-runner.ts). A holder proven gone (a local
 * process that died) is taken over at once; a live one makes this process a standby that takes
 * over when its lease expires.
 *
 * On a TTY stderr carries a live status line (per source: its state and position; per table:
 * rows, last flush, lag) under the log lines; elsewhere the logs are JSON lines.
 *
 * SIGINT / SIGTERM drain: stop reading, flush, commit, acknowledge, release the lease, within
 * the source's stopTimeoutSeconds. A requested stop of a long-running capture is its normal end,
 * so a drain exits 0 (unlike `tidemark run`'s 130 / 143, which say a sync stopped before it was
 * caught up). A second signal quits at once with 130 / 143 (the lease then stays; the next local
 * run takes it over, its holder being gone).
 */
import { parseArgs } from 'node:util';
import { createLogger } from '../../../shared/observability/log.js';
import {
  type CdcSourceStatus,
  CdcStatusBoard,
  runCdcSources,
  selectCdcSources,
} from '../../../shared/pipeline/cdc-runner.js';
import { isProvablyDead } from '../../../shared/state/lease-owner.js';
import { EXIT, specArg } from '../args.js';

export async function cmdCdc(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string', short: 'c' },
      source: { type: 'string', short: 's' },
    },
  });
  const spec = specArg(values);
  const names = selectCdcSources(spec, values.source);
  const board = new CdcStatusBoard(names);
  const tty = Boolean(process.stderr.isTTY);
  const line = tty ? new StatusLine(board) : undefined;
  const logger = createLogger({
    json: !tty,
    ...(line ? { write: (l: string) => line.log(l) } : {}),
  });
  const stop = new AbortController();
  let received: NodeJS.Signals | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    if (received) process.exit(sig === 'SIGTERM' ? EXIT.terminated : EXIT.interrupted);
    received = sig;
    logger.warn(
      `${sig}: draining: flush, commit, acknowledge, release the lease (${sig} again quits at once)`,
    );
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    await runCdcSources(spec, {
      logger,
      board,
      signal: stop.signal,
      isHolderDead: isProvablyDead,
      ...(values.source ? { source: values.source } : {}),
    });
    process.exitCode = EXIT.ok;
  } finally {
    line?.close();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/** How long ago an ISO time was, short. */
function ago(iso: string | undefined, now: number): string {
  if (!iso) return 'never';
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  return s < 120 ? `${s}s ago` : `${Math.round(s / 60)}m ago`;
}

/** A lag, short: `0.4s`, `12m`, `3h`, `40d`. */
function lagText(ms: number): string {
  const s = ms / 1000;
  if (s < 120) return `${s.toFixed(1)}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86_400)}d`;
}

/** One source's part of the status line. */
export function statusText(s: CdcSourceStatus, now: number): string {
  const head = `${s.source}: ${s.state}${s.position ? ` @ ${s.position}` : ''}`;
  const tables = Object.entries(s.tables).map(
    ([t, v]) =>
      `${t} ${v.rows} rows, flushed ${ago(v.lastFlushAt, now)}${v.lagMs !== undefined ? `, lag ${lagText(v.lagMs)}` : ''}${v.snapshot && v.snapshot.state !== 'complete' ? `, snapshot ${v.snapshot.rows} rows in ${v.snapshot.chunks} chunks` : ''}`,
  );
  return [head, ...tables].join(' | ');
}

/** The live status line on stderr: log lines print above it, it redraws every second. */
class StatusLine {
  private readonly timer: NodeJS.Timeout;
  private readonly unsubscribe: () => void;
  private drawn = false;

  constructor(private readonly board: CdcStatusBoard) {
    this.timer = setInterval(() => this.draw(), 1000);
    this.timer.unref();
    this.unsubscribe = board.onChange(() => this.draw());
  }

  log(l: string): void {
    this.clear();
    process.stderr.write(`${l}\n`);
    this.draw();
  }

  private clear(): void {
    if (this.drawn) process.stderr.write('\r\x1b[K');
    this.drawn = false;
  }

  private draw(): void {
    const now = Date.now();
    const text = this.board
      .all()
      .map((s) => statusText(s, now))
      .join('  ||  ');
    const width = process.stderr.columns || 160;
    this.clear();
    process.stderr.write(text.length > width - 1 ? `${text.slice(0, width - 2)}…` : text);
    this.drawn = true;
  }

  close(): void {
    clearInterval(this.timer);
    this.unsubscribe();
    this.clear();
  }
}
