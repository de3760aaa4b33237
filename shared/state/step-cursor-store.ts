/**
 * StepCursorStore: the cursor store operations of a store that applies cursor-rules.ts itself,
 * each in one atomic step: check the arguments, then read the key's state, decide with the rules
 * and write the result. The memory store (mem-cursor-store.ts) and the file store
 * (file-cursor-store.ts) extend it; their `step` is what makes it atomic (no `await` inside it;
 * the key's lock file). The DynamoDB store states the rules as conditions instead
 * (dynamo-cursor-store.ts) and does not extend it.
 *
 * Owns: the order of check, decide and write, and what each operation returns. Never does I/O
 * itself (`read` and `step` are the store's) and never reads the wall clock: lease expiry is
 * decided at the injected Clock's time.
 */
import type {
  Clock,
  CommitRequest,
  CursorStore,
  Lease,
  StateRecord,
  StateValue,
} from '../contracts/state.js';
import type { StoredState } from './cursor-rules.js';
import * as rules from './cursor-rules.js';

/** A CursorStore over a store's own read and atomic read-decide-write step. */
export abstract class StepCursorStore implements CursorStore {
  /** @param clock epoch milliseconds deciding lease expiry; tests pass a movable one. */
  protected constructor(protected readonly clock: Clock) {}

  /** The key's state as stored now (a plain read, no lock). */
  protected abstract read(key: string): Promise<StoredState>;

  /**
   * In one atomic step: reads the key's state, passes it to `decide`, and stores what `decide`
   * returns (nothing when undefined). Resolves with what `decide` returned.
   */
  protected abstract step<S extends StoredState | undefined>(
    key: string,
    decide: (state: StoredState) => S,
  ): Promise<S>;

  /** The record a caller gets of a stored state (the memory store hands out a copy). */
  protected record(key: string, state: StoredState): StateRecord {
    return rules.recordOf(key, state);
  }

  async load(key: string): Promise<StateRecord> {
    return this.record(key, await this.read(key));
  }

  async acquire(key: string, owner: string, ttlMs: number): Promise<StateRecord> {
    rules.checkOwner(key, owner);
    rules.checkTtl(key, ttlMs);
    const next = await this.step(key, (s) => rules.decideAcquire(key, s, owner, ttlMs, this.clock()));
    return this.record(key, next);
  }

  async takeOver(key: string, owner: string, ttlMs: number, from: string): Promise<StateRecord> {
    rules.checkOwner(key, owner);
    rules.checkOwner(key, from);
    rules.checkTtl(key, ttlMs);
    const next = await this.step(key, (s) => rules.decideTakeOver(key, s, owner, ttlMs, from, this.clock()));
    return this.record(key, next);
  }

  async renew(key: string, owner: string, ttlMs: number): Promise<Lease> {
    rules.checkOwner(key, owner);
    rules.checkTtl(key, ttlMs);
    const next = await this.step(key, (s) => rules.decideRenew(key, s, owner, ttlMs, this.clock()));
    return next.lease!;
  }

  async commit(key: string, req: CommitRequest): Promise<StateRecord> {
    rules.checkOwner(key, req.owner);
    if (req.renewTtlMs !== undefined) rules.checkTtl(key, req.renewTtlMs, 'renewTtlMs');
    // Serialize (and size-check) before the step: a refused value costs no I/O. The value stored
    // is the JSON's, as every store keeps it.
    const text = rules.serializeValue(key, req.value);
    const next = await this.step(key, (s) => ({
      ...rules.decideCommit(key, s, req, this.clock()),
      value: JSON.parse(text) as StateValue,
    }));
    return this.record(key, next);
  }

  async release(key: string, owner: string): Promise<void> {
    await this.step(key, (s) => rules.decideRelease(s, owner));
  }

  async note(key: string, value: StateValue): Promise<void> {
    const text = rules.serializeValue(key, value);
    await this.step(key, (s) => rules.decideNote(key, s, JSON.parse(text) as StateValue));
  }
}
