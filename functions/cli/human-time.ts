/**
 * Times and leases as an operator reads them on a terminal: `11:42:05 UTC (in 14 min)`,
 * `3 min ago`, `held by host:pid until ...`. Display only: JSON output carries ISO times and
 * numbers, never these strings' parts.
 */
import type { Lease } from '../../shared/contracts/state.js';
import { type HolderLiveness, holderName, parseLeaseOwner } from '../../shared/state/lease-owner.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** `11:42:05 UTC` on the same UTC day as `now`, else `2026-12-02 11:42:05 UTC`. */
export function clockText(ms: number, now: number): string {
  const iso = new Date(ms).toISOString();
  const sameDay = iso.slice(0, 10) === new Date(now).toISOString().slice(0, 10);
  return `${sameDay ? iso.slice(11, 19) : `${iso.slice(0, 10)} ${iso.slice(11, 19)}`} UTC`;
}

/** A span as `45 s`, `14 min`, `2 h 5 min`, `3 d 4 h`. */
export function spanText(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < MINUTE) return `${Math.round(abs / 1000)} s`;
  if (abs < HOUR) return `${Math.round(abs / MINUTE)} min`;
  if (abs < 2 * DAY) {
    const minutes = Math.round(abs / MINUTE);
    return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
  }
  const hours = Math.round(abs / HOUR);
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

/** `in 14 min` or `3 min ago`. */
export function relativeText(ms: number, now: number): string {
  return ms >= now ? `in ${spanText(ms - now)}` : `${spanText(now - ms)} ago`;
}

/** `11:28:04 UTC (3 min ago)`. */
export function whenText(ms: number, now: number): string {
  return `${clockText(ms, now)} (${relativeText(ms, now)})`;
}

/**
 * `free`, or `held by host:pid until 11:42:05 UTC (in 14 min)` with what is known of the holder:
 * a local process that is gone is said to be gone (the next local run takes the lease over).
 */
export function leaseText(
  lease: Pick<Lease, 'owner' | 'expiresAt'> | undefined,
  now: number,
  liveness: HolderLiveness,
): string {
  if (lease === undefined) return 'free';
  const holder = parseLeaseOwner(lease.owner);
  if (lease.expiresAt <= now)
    return `free (the lease of ${holderName(holder)} expired ${relativeText(lease.expiresAt, now)})`;
  const text = `held by ${holderName(holder)} until ${whenText(lease.expiresAt, now)}`;
  if (liveness === 'dead') return `${text}; that process is gone: the next local run takes the lease over`;
  if (liveness === 'alive') return `${text}; the process is running`;
  return text;
}
