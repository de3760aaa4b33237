/**
 * The state contract: a durable resume cursor per key, changed only by compare-and-set on a
 * version, guarded by a lease so two runs of one table never overlap (docs/contracts.md, and the
 * durability order in docs/architecture.md).
 *
 * Every implementation (DynamoDB, file, memory) gives the SAME guarantees:
 * - `commit` succeeds only if the stored version equals `expectedVersion` AND the caller still
 *   holds an unexpired lease; it then stores the value with version + 1 in ONE atomic step.
 * - `acquire` takes the lease only when it is free, expired, or already ours; `takeOver` also
 *   when it is held by one exact owner the caller proved dead.
 * - `note` writes only keys the lease protocol never touched, unconditionally (a record beside the
 *   state, such as a CDC source's last failure), and never a key that has a lease or a version.
 * - Every acquisition (`acquire`, `takeOver`) hands out the key's next fence number, one more
 *   than any the key ever had, stored with the record (not in the value); renew and commit keep
 *   it, release keeps it too, so a fence is never handed out twice (cursor-rules.ts).
 * - A loser gets a typed error (CursorConflictError, LeaseHeldError, LeaseLostError) and the
 *   stored state is untouched.
 * Time comes from the injected clock, so tests can move it.
 */

/** JSON-serializable state value. Each mode documents its own shape (docs/decisions/0001). */
export type StateValue = { readonly [k: string]: unknown };

export interface Lease {
  /** Who holds it: a run id (e.g. Lambda request id or `host:pid:uuid`). */
  readonly owner: string;
  /** Epoch milliseconds after which anyone may take it over. */
  readonly expiresAt: number;
  /**
   * The fence number of this acquisition: per state key, every `acquire` or `takeOver` gets one
   * more than the last one handed out (the first is 1), renew and commit keep it, and none is
   * ever handed out twice, not even after a release. A writer puts it into what it writes
   * (object names, incremental `__pos`), so whatever a writer that lost its lease still writes
   * sorts below, and never takes the name of, what a later holder writes (docs/decisions/0001).
   * 0 only on a lease taken before fences existed, until its next acquisition.
   */
  readonly fence: number;
}

export interface StateRecord {
  readonly key: string;
  /** 0 when nothing was ever committed for this key. */
  readonly version: number;
  readonly value: StateValue | undefined;
  readonly lease: Lease | undefined;
}

export interface CommitRequest {
  readonly owner: string;
  readonly expectedVersion: number;
  readonly value: StateValue;
  /** Renew the lease to now + this many ms in the same write (omit to keep its expiry). */
  readonly renewTtlMs?: number;
}

/** The injected clock: epoch milliseconds. One clock for the whole process. */
export type Clock = () => number;

export interface CursorStore {
  /** Reads the current record; version 0 and value undefined when none is stored. */
  load(key: string): Promise<StateRecord>;
  /** Takes (or re-takes) the lease for ttlMs. Throws LeaseHeldError if another owner holds it. */
  acquire(key: string, owner: string, ttlMs: number): Promise<StateRecord>;
  /**
   * Takes the lease like `acquire`, and also while it is held (live) by exactly `from`: for a
   * caller that proved `from` dead (a local process that is gone), so it need not wait out the
   * TTL. ONE conditional write, so it can never displace a holder other than `from`, e.g. one
   * that took the lease between the caller's check and this call: then LeaseHeldError names it.
   */
  takeOver(key: string, owner: string, ttlMs: number, from: string): Promise<StateRecord>;
  /** Extends our lease. Throws LeaseLostError if it expired or another owner took it. */
  renew(key: string, owner: string, ttlMs: number): Promise<Lease>;
  /**
   * Compare-and-set commit. Throws CursorConflictError when the version moved, LeaseLostError
   * when our lease expired or was taken. Returns the new record (version + 1).
   */
  commit(key: string, req: CommitRequest): Promise<StateRecord>;
  /** Gives the lease up if we hold it; a no-op otherwise. */
  release(key: string, owner: string): Promise<void>;
  /**
   * Stores `value` under `key` with no lease and no version check: the last note wins. For a
   * record of what happened that must be written when no lease can be had (a CDC source's last
   * failure, docs/decisions/0022), never for a cursor. A key the lease protocol ever used (a
   * lease, a fence or a committed version) is refused with StateError `STATE_KEY_LEASED` and left
   * untouched, so a note can never replace a commit. `load` reads a note as version 0, no lease.
   */
  note(key: string, value: StateValue): Promise<void>;
}

/**
 * Optional capability of a store (`tidemark check`): proves it exists and takes conditional
 * writes, with a probe record under `key` (a `check#...` key no run uses) that it removes again.
 * Throws a StateError naming the cause and the fix; leaves nothing behind when it resolves.
 */
export interface CursorStoreProbe {
  probe(key: string): Promise<void>;
}
