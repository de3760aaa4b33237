/**
 * The one-writer guarantee of a CDC run (docs/decisions/0009-cdc-commit-protocol.md, "The
 * lease"): the source's lease (`cdc#<pipeline>#<source>`, shared/engine/lease.ts) is taken
 * before anything is read, held for the whole run, and a run that can no longer prove it holds
 * it stops before anyone else may take it.
 *
 * Owns:
 *   - taking the lease, waiting as a standby while a live holder has it (`acquireOrStandby`);
 *   - renewal on its own timer, apart from the commits (each of which renews it too, and re-arms
 *     the fence: ./flush.ts `committedAs`);
 *   - the self-fence: armed for the lease's TTL minus the skew margin, fired by that timer or by a
 *     renewal that finds the lease lost. Once fenced the run writes, commits and acks nothing
 *     more (every step of ./flush.ts calls `check` first), its reader is closed, and its lease is
 *     not released (it is no longer ours).
 * A fence never un-fences: a later start takes the lease again, with a higher fence number.
 */
import { LeaseHeldError, LeaseLostError } from '../../contracts/errors.js';
import type { StateRecord } from '../../contracts/state.js';
import type { Logger } from '../../observability/log.js';
import { takeLease } from '../lease.js';
import type { CdcRunOptions } from './options.js';

/** Takes the lease, waiting as a standby while a live holder has it; undefined when interrupted. */
export async function acquireOrStandby(
  opts: CdcRunOptions,
  key: string,
  log: Logger,
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>,
): Promise<StateRecord | undefined> {
  let announced = false;
  for (;;) {
    try {
      return (await takeLease(opts.store, key, opts.owner, opts.leaseTtlMs, opts.isHolderDead)).record;
    } catch (e) {
      if (!(e instanceof LeaseHeldError) || opts.standby === false) throw e;
      if (!announced) {
        log.info('standby: another process holds the lease; taking over when it expires', {
          holder: e.holder,
          expiresAt: e.expiresAt,
        });
        announced = true;
        opts.onState?.('standby');
      }
      const wait = Math.max(50, Math.min(opts.leaseTtlMs, (e.expiresAt ?? 0) - opts.clock() + 10));
      try {
        await sleep(wait, opts.signal);
      } catch {
        return undefined;
      }
      if (opts.signal?.aborted) return undefined;
    }
  }
}

/** The held lease of one run: its renewal timer and its self-fence. */
export class LeaseFence {
  /** Set when the lease could not be renewed: nothing may be written, committed or acked. */
  private error: Error | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  private fenceTimer: NodeJS.Timeout | undefined;

  /** `onFence` stops the run's reading (abort its wait, close its reader) once fenced. */
  constructor(
    private readonly opts: CdcRunOptions,
    private readonly key: string,
    private readonly log: Logger,
    private readonly onFence: (e: Error) => void,
  ) {}

  /** Why the run is fenced; undefined while it holds the lease. */
  get fenced(): Error | undefined {
    return this.error;
  }

  /** Renews the lease on its own timer; a failed renewal fences this writer. */
  startRenewal(): void {
    const every = this.opts.renewEveryMs ?? Math.max(1000, Math.floor(this.opts.leaseTtlMs / 3));
    this.schedule();
    this.renewTimer = setInterval(() => {
      void (async () => {
        if (this.error) return;
        try {
          await this.opts.faults?.('renewal');
          await this.opts.store.renew(this.key, this.opts.owner, this.opts.leaseTtlMs);
          this.schedule();
        } catch (e) {
          if (e instanceof LeaseLostError) this.fence(e);
          else this.log.warn('lease renewal failed; retrying before it expires', { error: e });
        }
      })();
    }, every);
    this.renewTimer.unref?.();
  }

  /** Arms the self-fence for the current lease: stop before expiry minus the skew margin. */
  schedule(): void {
    clearTimeout(this.fenceTimer);
    const ms = Math.max(0, this.opts.leaseTtlMs - (this.opts.skewMarginMs ?? 5000));
    this.fenceTimer = setTimeout(() => this.fence(new LeaseLostError(this.key, this.opts.owner)), ms);
    this.fenceTimer.unref?.();
  }

  private fence(e: Error): void {
    if (this.error) return;
    this.error = e;
    this.log.error('lease could not be renewed: stopped writing and acknowledging', { error: e });
    this.onFence(e);
  }

  /** Throws once fenced: called before every write, commit and ack. */
  check(): void {
    if (this.error) throw this.error;
  }

  /** Stops both timers (shutdown); a fence already set stays. */
  stop(): void {
    clearInterval(this.renewTimer);
    clearTimeout(this.fenceTimer);
  }
}
