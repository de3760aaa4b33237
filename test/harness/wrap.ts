/**
 * How the tests wrap the engine's real seams (a cursor store, a sink, a streamer's readers)
 * without switching anything in production code: an object with one member replaced and every
 * other member its own (bound to it), a sink with some of its steps replaced, and the ack check
 * every CDC harness puts between the engine and its reader (an acknowledged position must never
 * be past the committed state).
 *
 * The wrappers only observe or replace what they name; the crash suites' broken steps built on
 * them are in ./mutations.ts.
 */
import type { Reader, SourcePosition, Streamer } from '../../shared/contracts/cdc.js';
import type { Sink } from '../../shared/contracts/sink.js';
import type { CursorStore } from '../../shared/contracts/state.js';
import { parseCdcState } from '../../shared/engine/cdc/state.js';

/**
 * `target` with member `key` replaced by `member`; every other member is the target's own, its
 * methods bound to it (so a class instance's private state still works).
 */
export function withMember<T extends object, K extends keyof T>(target: T, key: K, member: T[K]): T {
  return new Proxy(target, {
    get(t, k) {
      if (k === key) return member;
      const v = Reflect.get(t, k) as unknown;
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
}

/** A sink whose steps are `inner`'s but for those `steps` replaces. */
export function sinkWith(inner: Sink, steps: Partial<Sink>): Sink {
  return {
    write: (...a) => inner.write(...a),
    recover: (...a) => inner.recover(...a),
    list: (...a) => inner.list(...a),
    discard: (...a) => inner.discard(...a),
    // An Iceberg sink's commit steps go on to it as they are.
    ...(inner.stage ? { stage: (...a: Parameters<NonNullable<Sink['stage']>>) => inner.stage!(...a) } : {}),
    ...(inner.apply ? { apply: (...a: Parameters<NonNullable<Sink['apply']>>) => inner.apply!(...a) } : {}),
    ...steps,
  };
}

/**
 * `sink` whose first write waits at a gate: after its page was read, before its PUT (a frozen
 * Lambda, a partitioned task). `atWrite` resolves with the writing run's fence when the write
 * arrives; `open()` lets it go on.
 */
export function pausedAtFirstWrite(sink: Sink): { sink: Sink; atWrite: Promise<number>; open: () => void } {
  let arrived!: (fence: number) => void;
  const atWrite = new Promise<number>((r) => {
    arrived = r;
  });
  let open!: () => void;
  const gate = new Promise<void>((r) => {
    open = r;
  });
  let first = true;
  const paused = sinkWith(sink, {
    write: async (target, schema, start, batches, recorded) => {
      if (first) {
        first = false;
        arrived(target.fence);
        await gate;
      }
      return sink.write(target, schema, start, batches, recorded);
    },
  });
  return { sink: paused, atWrite, open };
}

/**
 * A streamer whose readers hand every `setConfirmed` to `check` first, with the position then
 * committed under `stateKey` in `store` (read through the unwrapped store; undefined before the
 * first commit); `check` records an ack past it, the ack then goes on to the reader.
 */
export function ackCheckedStreamer(
  inner: Streamer,
  store: CursorStore,
  stateKey: string,
  check: (acked: SourcePosition, committed: SourcePosition | undefined) => void,
): Streamer {
  return {
    async openReader(tables, runtime) {
      const reader = await inner.openReader(tables, runtime);
      const setConfirmed: Reader['setConfirmed'] = async (position) => {
        check(position, parseCdcState((await store.load(stateKey)).value).position);
        await reader.setConfirmed(position);
      };
      return withMember(reader, 'setConfirmed', setConfirmed);
    },
  };
}
