/**
 * Broken steps of the durability order, as wrappers a crash test's child process injects around
 * the real sink and store (never switches in production code): each crash suite must FAIL under
 * each of them. Also the fsync'd record a child writes right before it kills itself, so the
 * parent knows where each kill landed.
 */
import { appendFileSync, closeSync, fsyncSync, openSync } from 'node:fs';
import { join } from 'node:path';
import type { Streamer } from '../../shared/contracts/cdc.js';
import type { ObjectRef, Sink } from '../../shared/contracts/sink.js';
import type { KeyRange, TableChunker } from '../../shared/contracts/snapshot.js';
import type { CursorStore, StateValue } from '../../shared/contracts/state.js';
import { sinkWith, withMember } from './wrap.js';

export function record(dir: string, file: string, line: string): void {
  const path = join(dir, file);
  appendFileSync(path, `${line}\n`);
  const fd = openSync(path, 'r');
  fsyncSync(fd);
  closeSync(fd);
}

/** A ref for an object that is not (yet) written. */
export function pendingRef(batches: Parameters<Sink['write']>[3]): ObjectRef {
  return { uri: 'pending', bytes: 0, rows: batches.reduce((n, b) => n + b.record.numRows, 0) };
}

/** Mutation: a recovery that removes nothing (and says so). */
export function noopRecover(inner: Sink): Sink {
  if (!inner.apply) return sinkWith(inner, { recover: async () => [] });
  // An Iceberg sink: recovery's roll-forward is disabled too. Recovery applies the state's
  // pending commits before the run writes anything; from the first write on, `apply` is the
  // flush's own catalog commit and goes through.
  let wrote = false;
  return sinkWith(inner, {
    recover: async () => [],
    write: (...args) => {
      wrote = true;
      return inner.write(...args);
    },
    apply: async (...args) => {
      if (wrote) await inner.apply!(...args);
    },
  });
}

/**
 * Mutation (Iceberg): the commit order reversed, catalog first. Each staged commit is applied to
 * the catalog at once, before the state commit that should decide it; recovery stays as it is
 * (it deletes this writer's files at or past the state's `next`). A kill between the two commits
 * leaves a snapshot whose files recovery then deletes (or whose rows the retry writes again).
 */
export function catalogFirst(inner: Sink): Sink {
  return sinkWith(inner, {
    stage: async (...args) => {
      const pending = await inner.stage!(...args);
      if (pending) await inner.apply!(pending);
      return pending;
    },
  });
}

/**
 * Mutation: the durability order reversed. The sink's write only takes the page and answers at
 * once; the real write starts when the cursor commit that follows it has resolved, so the
 * cursor is durable before the object is (a page's write waits for the previous page's, so the
 * pages still reach the lake one by one, each after its commit).
 */
export function commitBeforeWrite(sink: Sink, store: CursorStore): { sink: Sink; store: CursorStore } {
  let taken: (() => Promise<ObjectRef[]>) | undefined;
  let writing: Promise<unknown> = Promise.resolve();
  return {
    sink: sinkWith(sink, {
      write: async (...args) => {
        await writing;
        taken = () => sink.write(...args);
        return [pendingRef(args[3])];
      },
    }),
    store: withMember(store, 'commit', async (...a) => {
      const committed = await store.commit(...a);
      const write = taken;
      taken = undefined;
      if (write) writing = write();
      return committed;
    }),
  };
}

/**
 * Mutation: a sink that says "durable" before it has written anything; the write runs in the
 * background a while later (long after the page's cursor commit, which takes milliseconds).
 */
export function durableBeforeWrite(inner: Sink): Sink {
  return sinkWith(inner, {
    write: async (...args) => {
      setTimeout(() => {
        inner.write(...args).catch(() => undefined);
      }, 1000);
      return [pendingRef(args[3])];
    },
  });
}

/** A reader that acknowledges every commit as soon as it reads it, before anything is durable. */
export function ackBeforeCommit(inner: Streamer): Streamer {
  return {
    async openReader(tables, runtime) {
      const reader = await inner.openReader(tables, runtime);
      return withMember(reader, 'next', async (waitMs, signal) => {
        const ev = await reader.next(waitMs, signal);
        if (ev?.kind === 'commit') await reader.setConfirmed(ev.position);
        return ev;
      });
    },
  };
}

/**
 * Mutation (snapshots, decision 0013 "Windows batched into flushes"): the old eager rule. A
 * window's range leaves the pending ranges as soon as its high watermark arrives, in whatever
 * state commit comes next (an idle commit, another table's flush), not in the commit of the
 * flush that writes its rows. The wrapper learns each window's range from the chunk read (its
 * high watermark id), sees the watermark in the stream, and takes the range out of every later
 * commit's snapshot progress (a progress left with nothing to do is marked complete).
 */
export function eagerRangeDone(
  inner: Streamer,
  store: CursorStore,
): { streamer: Streamer; store: CursorStore } {
  const byHigh = new Map<string, KeyRange>();
  const landed: KeyRange[] = [];
  const streamer: Streamer = {
    async openReader(tables, runtime) {
      const reader = await inner.openReader(tables, runtime);
      return withMember(reader, 'next', async (waitMs, signal) => {
        const ev = await reader.next(waitMs, signal);
        const range = ev?.kind === 'watermark' ? byHigh.get(ev.id) : undefined;
        if (range) landed.push(range);
        return ev;
      });
    },
  };
  if (inner.openSnapshot) {
    const open = inner.openSnapshot.bind(inner);
    streamer.openSnapshot = async (options) => {
      const source = await open(options);
      return withMember(source, 'chunker', (ref, schema) => {
        const c = source.chunker(ref, schema);
        return withMember(c, 'read', ((req, window, ids, signal) => {
          byHigh.set(ids.high, req.range);
          return c.read(req, window, ids, signal);
        }) as TableChunker['read']);
      });
    };
  }
  const same = (a: KeyRange, b: KeyRange) => a.after === b.after && a.upTo === b.upTo;
  const strip = (value: StateValue): StateValue => {
    const v = JSON.parse(JSON.stringify(value)) as {
      tables?: Record<string, { snapshot?: { state: string; pending?: KeyRange[]; rest?: unknown } }>;
    };
    for (const t of Object.values(v.tables ?? {})) {
      const s = t.snapshot;
      if (!s?.pending) continue;
      s.pending = s.pending.filter((r) => !landed.some((l) => same(l, r)));
      if (s.pending.length === 0 && s.rest === null) s.state = 'complete';
    }
    return v as StateValue;
  };
  return {
    streamer,
    store: withMember(store, 'commit', (key, req) => store.commit(key, { ...req, value: strip(req.value) })),
  };
}
