/**
 * Taking a table's lease for a run or a reset: `acquire`, and when the lease is held by a holder
 * the caller proved dead (a local process that is gone), `takeOver` from exactly that holder
 * instead of waiting out its TTL.
 *
 * Owns that one decision. Never judges liveness itself (the caller's `isHolderDead`; the CLI
 * passes shared/state/lease-owner.ts `isProvablyDead`, the Lambda passes nothing), and never
 * takes over from a holder it was not told is dead.
 */
import { LeaseHeldError } from '../contracts/errors.js';
import type { CursorStore, StateRecord } from '../contracts/state.js';

export interface TakenLease {
  readonly record: StateRecord;
  /** The dead holder whose lease was taken over, if any. */
  readonly tookOverFrom?: string;
}

/**
 * Acquires the lease of `key`; throws LeaseHeldError when a holder that is not provably dead has
 * it (including one that took it between our check and our takeover).
 */
export async function takeLease(
  store: CursorStore,
  key: string,
  owner: string,
  ttlMs: number,
  isHolderDead?: (owner: string) => boolean,
): Promise<TakenLease> {
  try {
    return { record: await store.acquire(key, owner, ttlMs) };
  } catch (e) {
    if (!(e instanceof LeaseHeldError) || e.holder === undefined || !isHolderDead?.(e.holder)) throw e;
    return { record: await store.takeOver(key, owner, ttlMs, e.holder), tookOverFrom: e.holder };
  }
}
