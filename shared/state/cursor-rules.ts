/**
 * The rules of the cursor store as pure functions: who may take, extend and give up a lease, when
 * a compare-and-set commit wins, and how big a value may be. The memory and file stores apply
 * them to the state they read under their lock; the DynamoDB store states the same rules as
 * ConditionExpressions and uses these functions to explain a failed condition.
 *
 * Owns: the decision for one operation on one key's state at one instant. Never does I/O, never
 * reads a clock (the caller passes `now`), never mutates its input.
 *
 * The rules (the same for every store):
 * - A lease is live at `now` while `now < expiresAt`; at `expiresAt` anyone may take it over.
 * - acquire: allowed when there is no live lease or the live lease is ours; sets
 *   `expiresAt = now + ttlMs`. Otherwise LeaseHeldError.
 * - takeOver(from): as acquire, and also allowed while the live lease is held by exactly `from`
 *   (a holder the caller proved dead); any other live holder still gets LeaseHeldError.
 * - renew: allowed only while our lease is live (an expired lease is lost even if nobody took
 *   it: the holder must re-acquire and reload). Otherwise LeaseLostError.
 * - commit: lease first (LeaseLostError without a live lease of ours, because such a writer must
 *   stop at once whatever the version), then version (CursorConflictError when the stored
 *   version is not `expectedVersion`). A win stores the value with version + 1.
 * - release: drops the lease if its owner is the caller (live or not); otherwise nothing.
 * - The version only moves on commit; a lease change never touches it.
 * - note: stores a value with no lease and no version check (last note wins), only on a key that
 *   never had a lease, a fence or a committed version; otherwise STATE_KEY_LEASED, untouched.
 * - Fence: every successful acquire and takeOver (a re-acquire by the holder included) sets the
 *   key's fence to its last fence + 1 and puts it on the new lease; a key never acquired, or
 *   stored before fences existed, has last fence 0, so its next acquisition gets 1. renew and
 *   commit keep it; release drops the lease and keeps the fence, so the next acquisition still
 *   counts on from it. A fence is never handed out twice for one key, and a later acquisition
 *   always has a higher one. Stores persist it beside the lease (DynamoDB attribute `fence`, the
 *   file store's `fence` field), never inside the value, and increment it in the same atomic
 *   step that takes the lease (DynamoDB: `ADD fence :one` in the acquire's conditional write;
 *   file and memory stores: under their lock). A lease's fence always equals the key's fence.
 */
import { CursorConflictError, LeaseHeldError, LeaseLostError, StateError } from '../contracts/errors.js';
import type { CommitRequest, Lease, StateRecord, StateValue } from '../contracts/state.js';

/**
 * Largest serialized value (UTF-8 bytes of its JSON) any store accepts. DynamoDB's item limit is
 * 400 KB including attribute names and the other fields; 350 KB leaves room for them. Every store
 * enforces it, so a state shape that outgrows it fails on a laptop before it fails in the cloud.
 */
export const MAX_STATE_VALUE_BYTES = 350 * 1024;

/** One key's state as every store persists it (the record without its key). */
export interface StoredState {
  readonly version: number;
  readonly value: StateValue | undefined;
  readonly lease: Lease | undefined;
  /** The last fence handed out for the key (0: none yet); `lease.fence` equals it. */
  readonly fence: number;
}

/** The state of a key nothing was ever written for. */
export const EMPTY_STATE: StoredState = { version: 0, value: undefined, lease: undefined, fence: 0 };

/** The record of `key` in `state`, as a store returns it (the memory store copies it out). */
export function recordOf(key: string, state: StoredState): StateRecord {
  return { key, version: state.version, value: state.value, lease: state.lease };
}

/** The state after a successful acquisition by `owner`: a new lease with the next fence. */
function acquired(state: StoredState, owner: string, ttlMs: number, now: number): StoredState {
  const fence = state.fence + 1;
  return { ...state, fence, lease: { owner, expiresAt: now + ttlMs, fence } };
}

/** True when `owner` holds a lease that is still live at `now`. */
export function holdsLiveLease(lease: Lease | undefined, owner: string, now: number): boolean {
  return lease !== undefined && lease.owner === owner && now < lease.expiresAt;
}

/** True when someone other than `owner` holds a lease that is still live at `now`. */
export function heldByOther(lease: Lease | undefined, owner: string, now: number): lease is Lease {
  return lease !== undefined && lease.owner !== owner && now < lease.expiresAt;
}

/** Refuses a non-positive or non-integer TTL: a lease that expires at once fences nothing. */
export function checkTtl(key: string, ttlMs: number, what = 'ttlMs'): void {
  if (!Number.isSafeInteger(ttlMs) || ttlMs <= 0) {
    throw new StateError(
      'STATE_INVALID_ARGUMENT',
      key,
      `${what} for ${key} must be a positive integer of milliseconds, got ${ttlMs}`,
    );
  }
}

/** Refuses an empty owner: an empty string would match a missing owner in some stores. */
export function checkOwner(key: string, owner: string): void {
  if (typeof owner !== 'string' || owner.length === 0) {
    throw new StateError('STATE_INVALID_ARGUMENT', key, `lease owner for ${key} must be a non-empty string`);
  }
}

/**
 * Serializes a value to the JSON text a store persists, refusing one that is not JSON or larger
 * than MAX_STATE_VALUE_BYTES. The error says how big it is and what to do.
 */
export function serializeValue(key: string, value: StateValue): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (cause) {
    throw new StateError(
      'STATE_NOT_JSON',
      key,
      `state value for ${key} is not JSON-serializable (${(cause as Error).message}); store bigint and binary values as strings`,
      { cause },
    );
  }
  if (text === undefined || value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new StateError('STATE_NOT_JSON', key, `state value for ${key} must be a JSON object`);
  }
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_STATE_VALUE_BYTES) {
    throw new StateError(
      'STATE_TOO_LARGE',
      key,
      `state value for ${key} is ${bytes} bytes as JSON, over the ${MAX_STATE_VALUE_BYTES}-byte limit of one state item (DynamoDB items stop at 400 KB); store large parts (e.g. snapshot chunk plans) in S3 and keep a reference in the state`,
    );
  }
  return text;
}

/** Applies `acquire`; throws LeaseHeldError when another owner's lease is live. */
export function decideAcquire(
  key: string,
  state: StoredState,
  owner: string,
  ttlMs: number,
  now: number,
): StoredState {
  return decideTakeOver(key, state, owner, ttlMs, undefined, now);
}

/**
 * Applies `takeOver`: `acquire`, except that a live lease of exactly `from` is replaced too
 * (without `from`, exactly `acquire`).
 */
export function decideTakeOver(
  key: string,
  state: StoredState,
  owner: string,
  ttlMs: number,
  from: string | undefined,
  now: number,
): StoredState {
  if (heldByOther(state.lease, owner, now) && state.lease.owner !== from) {
    throw new LeaseHeldError(key, state.lease.owner, state.lease.expiresAt);
  }
  return acquired(state, owner, ttlMs, now);
}

/** Applies `renew` (the fence stays); throws LeaseLostError unless our lease is live. */
export function decideRenew(
  key: string,
  state: StoredState,
  owner: string,
  ttlMs: number,
  now: number,
): StoredState {
  if (!holdsLiveLease(state.lease, owner, now)) throw new LeaseLostError(key, owner);
  return { ...state, lease: { ...state.lease!, expiresAt: now + ttlMs } };
}

/**
 * Applies `commit`: lease first, then version. Returns the new state with version + 1 and the
 * value as given (the caller stores its serialized form).
 */
export function decideCommit(key: string, state: StoredState, req: CommitRequest, now: number): StoredState {
  if (!holdsLiveLease(state.lease, req.owner, now)) throw new LeaseLostError(key, req.owner);
  if (state.version !== req.expectedVersion) {
    throw new CursorConflictError(key, req.expectedVersion, state.version);
  }
  const lease =
    req.renewTtlMs === undefined ? state.lease : { ...state.lease!, expiresAt: now + req.renewTtlMs };
  return { version: state.version + 1, value: req.value, lease, fence: state.fence };
}

/**
 * Applies `release`; returns undefined when there is nothing to change (not our lease). The
 * fence stays: the next acquisition counts on from it.
 */
export function decideRelease(state: StoredState, owner: string): StoredState | undefined {
  if (state.lease === undefined || state.lease.owner !== owner) return undefined;
  return { ...state, lease: undefined };
}

/**
 * Applies `note`: allowed only on a key the lease protocol never used (no lease, no fence, no
 * committed version), so a note never replaces a commit nor a commit's lease. Returns the new
 * state: version 0, the value, no lease.
 */
export function decideNote(key: string, state: StoredState, value: StateValue): StoredState {
  if (state.lease !== undefined || state.fence > 0 || state.version > 0) {
    throw new StateError(
      'STATE_KEY_LEASED',
      key,
      `${key} is a state key under the lease protocol (version ${state.version}, fence ${state.fence}); a note may not replace it, nothing was written`,
    );
  }
  return { version: 0, value, lease: undefined, fence: 0 };
}
