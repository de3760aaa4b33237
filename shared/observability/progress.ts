/**
 * Progress of a long operation: rows, rows/s, pages and (when a total is known) ETA. On a TTY it
 * redraws one status line at most 4 times a second; elsewhere it logs a structured line every
 * `intervalMs` so Lambda/Fargate logs show the run advancing.
 */
import type { Logger } from './log.js';

export interface ProgressOptions {
  label: string;
  logger: Logger;
  tty?: boolean;
  intervalMs?: number;
  /** Estimated total rows, when the source can tell; enables ETA. */
  total?: number;
  now?: () => number;
}

export class Progress {
  private rows = 0;
  private pages = 0;
  private bytes = 0;
  private readonly started: number;
  private lastDraw = 0;
  private readonly tty: boolean;
  private readonly now: () => number;

  constructor(private readonly opts: ProgressOptions) {
    this.tty = opts.tty ?? Boolean(process.stderr.isTTY);
    this.now = opts.now ?? Date.now;
    this.started = this.now();
  }

  /** Records one committed page. */
  add(rows: number, bytes: number): void {
    this.rows += rows;
    this.pages += 1;
    this.bytes += bytes;
    const t = this.now();
    const every = this.tty ? 250 : (this.opts.intervalMs ?? 10_000);
    if (t - this.lastDraw >= every) {
      this.lastDraw = t;
      this.draw(false);
    }
  }

  /** Rows per second since start. */
  rate(): number {
    const s = (this.now() - this.started) / 1000;
    return s > 0 ? this.rows / s : 0;
  }

  /** Seconds left at the current rate, when a total is known; 0 once past it. */
  etaSeconds(): number | undefined {
    const rate = this.rate();
    if (!this.opts.total || rate <= 0) return undefined;
    return Math.max(0, Math.ceil((this.opts.total - this.rows) / rate));
  }

  private line(): string {
    const left = this.etaSeconds();
    const eta = left !== undefined ? `  eta ${left}s` : '';
    return `${this.opts.label}: ${this.rows.toLocaleString('en-US')} rows  ${Math.round(this.rate()).toLocaleString('en-US')} rows/s  ${this.pages} pages  ${(this.bytes / 1e6).toFixed(1)} MB${eta}`;
  }

  private draw(final: boolean): void {
    if (this.tty) {
      process.stderr.write(`\r\x1b[K${this.line()}${final ? '\n' : ''}`);
    } else {
      this.opts.logger.info('progress', {
        label: this.opts.label,
        rows: this.rows,
        pages: this.pages,
        bytes: this.bytes,
        rowsPerSecond: Math.round(this.rate()),
        ...(this.opts.total ? { totalEstimate: this.opts.total, etaSeconds: this.etaSeconds() } : {}),
      });
    }
  }

  /** Draws the final line (TTY) and stops. */
  done(): void {
    if (this.tty && this.pages > 0) this.draw(true);
  }
}
