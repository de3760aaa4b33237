/**
 * MemCursorStore: the cursor store in process memory, for tests and ephemeral runs. It gives the
 * same guarantees as the file and DynamoDB stores (see cursor-rules.ts), including the value size
 * limit and JSON round-trip of values, so a test against it says something about the others.
 *
 * Owns: a map of key -> state (with its fence). Never shares a stored value object with a caller (a value goes in
 * through JSON, as the other stores store it, and comes out as a copy), never reads the wall
 * clock (time comes from the injected Clock).
 */
import type { Clock, StateRecord } from '../contracts/state.js';
import { EMPTY_STATE, type StoredState } from './cursor-rules.js';
import { StepCursorStore } from './step-cursor-store.js';

/**
 * An in-memory CursorStore (the operations are step-cursor-store.ts's). Each step is atomic
 * because it runs without an `await`.
 */
export class MemCursorStore extends StepCursorStore {
  readonly #states = new Map<string, StoredState>();

  /** @param clock epoch milliseconds; tests pass a movable one. */
  constructor(clock: Clock = Date.now) {
    super(clock);
  }

  protected async read(key: string): Promise<StoredState> {
    return this.#states.get(key) ?? EMPTY_STATE;
  }

  protected async step<S extends StoredState | undefined>(
    key: string,
    decide: (state: StoredState) => S,
  ): Promise<S> {
    const next = decide(this.#states.get(key) ?? EMPTY_STATE);
    if (next !== undefined) this.#states.set(key, next);
    return next;
  }

  /** Copies the value out so a caller mutating it cannot change the stored state. */
  protected override record(key: string, state: StoredState): StateRecord {
    return {
      key,
      version: state.version,
      value: state.value === undefined ? undefined : structuredClone(state.value),
      lease: state.lease === undefined ? undefined : { ...state.lease },
    };
  }
}
