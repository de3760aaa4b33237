/**
 * MemCursorStore: the cursor store in process memory, for tests and ephemeral runs. It gives the
 * same guarantees as the file and DynamoDB stores (see cursor-rules.ts), including the value size
 * limit and JSON round-trip of values, so a test against it says something about the others.
 *
 * Owns: a map of key -> state (with its fence). Never shares a stored value object with a caller (a value goes in
 * through JSON, as the other stores store it, and comes out as a copy), never reads the wall
 * clock (time comes from the injected Clock).
 */
import type {
  Clock,
  CommitRequest,
  CursorStore,
  Lease,
  StateRecord,
  StateValue,
} from '../contracts/state.js';
import {
  checkOwner,
  checkTtl,
  decideAcquire,
  decideCommit,
  decideNote,
  decideRelease,
  decideRenew,
  decideTakeOver,
  EMPTY_STATE,
  type StoredState,
  serializeValue,
} from './cursor-rules.js';

/** An in-memory CursorStore. Each operation is atomic because it runs without an `await`. */
export class MemCursorStore implements CursorStore {
  readonly #states = new Map<string, StoredState>();
  readonly #clock: Clock;

  /** @param clock epoch milliseconds; tests pass a movable one. */
  constructor(clock: Clock = Date.now) {
    this.#clock = clock;
  }

  async load(key: string): Promise<StateRecord> {
    return toRecord(key, this.#get(key));
  }

  async acquire(key: string, owner: string, ttlMs: number): Promise<StateRecord> {
    checkOwner(key, owner);
    checkTtl(key, ttlMs);
    const next = decideAcquire(key, this.#get(key), owner, ttlMs, this.#clock());
    this.#states.set(key, next);
    return toRecord(key, next);
  }

  async takeOver(key: string, owner: string, ttlMs: number, from: string): Promise<StateRecord> {
    checkOwner(key, owner);
    checkOwner(key, from);
    checkTtl(key, ttlMs);
    const next = decideTakeOver(key, this.#get(key), owner, ttlMs, from, this.#clock());
    this.#states.set(key, next);
    return toRecord(key, next);
  }

  async renew(key: string, owner: string, ttlMs: number): Promise<Lease> {
    checkOwner(key, owner);
    checkTtl(key, ttlMs);
    const next = decideRenew(key, this.#get(key), owner, ttlMs, this.#clock());
    this.#states.set(key, next);
    return next.lease!;
  }

  async commit(key: string, req: CommitRequest): Promise<StateRecord> {
    checkOwner(key, req.owner);
    if (req.renewTtlMs !== undefined) checkTtl(key, req.renewTtlMs, 'renewTtlMs');
    const text = serializeValue(key, req.value);
    const next = { ...decideCommit(key, this.#get(key), req, this.#clock()), value: JSON.parse(text) };
    this.#states.set(key, next);
    return toRecord(key, next);
  }

  async release(key: string, owner: string): Promise<void> {
    const next = decideRelease(this.#get(key), owner);
    if (next !== undefined) this.#states.set(key, next);
  }

  async note(key: string, value: StateValue): Promise<void> {
    const text = serializeValue(key, value);
    this.#states.set(key, decideNote(key, this.#get(key), JSON.parse(text) as StateValue));
  }

  #get(key: string): StoredState {
    return this.#states.get(key) ?? EMPTY_STATE;
  }
}

/** Copies the value out so a caller mutating it cannot change the stored state. */
function toRecord(key: string, state: StoredState): StateRecord {
  return {
    key,
    version: state.version,
    value: state.value === undefined ? undefined : structuredClone(state.value),
    lease: state.lease === undefined ? undefined : { ...state.lease },
  };
}
