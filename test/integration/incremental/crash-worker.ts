/**
 * A child process for the incremental crash scenario: runs one incremental sync of the spec in
 * TM_SPEC through the real pipeline (runTable, openPipeline: the real source, file state, file
 * lake), and SIGKILLs itself at a NAMED point of the durability order that a running sync
 * reaches (TM_CRASH_KILL = `<point>#<nth>`, nth = which page of this run):
 *
 *   before-write   the page is read, its object not yet written;
 *   after-write    the page's object is durable in the lake (sink.write resolved), its cursor
 *                  commit not yet made: the window recovery exists for;
 *   after-commit   the page's cursor commit resolved, the next page not yet written (an Iceberg
 *                  table: its catalog commit not yet applied);
 *   after-apply    an Iceberg table only: the page's catalog commit applied.
 *
 * On an Iceberg table `after-write` is after the page's manifest is staged too (sink.stage), and
 * the leftovers then name the staged manifest beside the data file.
 *
 * Right before it dies the child appends the point to `<TM_CRASH_DIR>/kills` (fsync'd), so the
 * parent knows exactly where each kill landed (and fails when one did not). It also records, per
 * run (TM_CRASH_RUN), what recovery removed (`recoveries`) and, at an after-write kill, the object
 * it leaves behind (`leftovers`), so the parent can check that the next run removed exactly that.
 *
 * TM_CRASH_KILL=timed: the parent kills the child itself, a moment after the child announced its
 * first page write on stdout (`armed`, with `timed` recorded); when the sync ends before the kill
 * the child records `timed-finished`, so a timed kill that did not land during the sync shows.
 *
 * TM_CRASH_MUTATION: one step of the durability order replaced by a broken one, for the
 * scenario's self-checks (it must then FAIL). Never a switch in production code: always a wrapper
 * of the sink or the store injected here, UNDER the kill points, which stay where the engine sees
 * them (as the CDC engine's fault hooks do, test/harness/cdc-child.ts).
 *
 * Without TM_CRASH_KILL the run is a clean one: it prints its summary (JSON) on stdout.
 */
import { basename } from 'node:path';
import { incrementalTables, parseSpec } from '../../../shared/config/spec.js';
import type { Sink } from '../../../shared/contracts/sink.js';
import type { CursorStore } from '../../../shared/contracts/state.js';
import { silentLogger } from '../../../shared/observability/log.js';
import { openPipeline } from '../../../shared/pipeline/open.js';
import { runTable } from '../../../shared/pipeline/run-table.js';
import {
  catalogFirst,
  commitBeforeWrite,
  durableBeforeWrite,
  noopRecover,
  record,
} from '../../harness/mutations.js';
import { sinkWith, withMember } from '../../harness/wrap.js';

/** Where a running sync is killed (see the file comment). */
export type KillPoint = 'before-write' | 'after-write' | 'after-commit' | 'after-apply';

/** A broken step of the durability order the crash scenario must catch. */
export type Mutation = 'noop-recover' | 'commit-before-write' | 'durable-before-write' | 'catalog-first';

function die(): never {
  process.kill(process.pid, 'SIGKILL');
  throw new Error('unreachable: SIGKILL did not end the process');
}

/**
 * The kill points, where the engine sees its sink and store: the `nth` page write of this run
 * (before it / after it resolved) and the cursor commit that follows it (the only commit made
 * right after a page write: the initial and the run's final commits are not page commits).
 */
function withKillPoints(
  sink: Sink,
  store: CursorStore,
  dir: string,
  run: string,
  kill: { point: KillPoint; nth: number } | 'timed' | undefined,
): { sink: Sink; store: CursorStore } {
  let writes = 0;
  let commits = 0;
  let applies = 0;
  let pageWritten = false;
  let pageStaged = false;
  // The crash scenario syncs a new table: Iceberg unless the spec says plain.
  const iceberg = spec.lake.tableFormat !== 'plain';
  const at = (point: KillPoint, n: number) =>
    kill !== undefined && kill !== 'timed' && kill.point === point && kill.nth === n;
  return {
    sink: sinkWith(sink, {
      write: async (...args) => {
        writes++;
        if (at('before-write', writes)) {
          record(dir, 'kills', `before-write#${writes}`);
          die();
        }
        if (kill === 'timed' && writes === 1) {
          record(dir, 'kills', 'timed');
          process.stdout.write('armed\n');
        }
        const refs = await sink.write(...args);
        if (!iceberg && at('after-write', writes)) {
          record(dir, 'leftovers', `${run} ${refs.map((r) => basename(r.uri)).join(' ')}`);
          record(dir, 'kills', `after-write#${writes}`);
          die();
        }
        pageWritten = true;
        return refs;
      },
      ...(iceberg
        ? {
            stage: async (...a: Parameters<NonNullable<Sink['stage']>>) => {
              const pending = await sink.stage!(...a);
              if (at('after-write', writes)) {
                const names = [
                  ...a[1].map((r) => basename(r.uri)),
                  ...(pending ? [basename(pending.manifest)] : []),
                ];
                record(dir, 'leftovers', `${run} ${names.join(' ')}`);
                record(dir, 'kills', `after-write#${writes}`);
                die();
              }
              pageStaged = pending !== undefined;
              return pending;
            },
            apply: async (...a: Parameters<NonNullable<Sink['apply']>>) => {
              await sink.apply!(...a);
              // Only a page's own catalog commit counts (recovery applies the state's too).
              if (pageStaged) {
                pageStaged = false;
                if (at('after-apply', ++applies)) {
                  record(dir, 'kills', `after-apply#${applies}`);
                  die();
                }
              }
            },
          }
        : {}),
      recover: async (...a) => {
        const removed = await sink.recover(...a);
        record(dir, 'recoveries', `${run} ${removed.map((r) => basename(r.uri)).join(' ')}`.trimEnd());
        return removed;
      },
    }),
    store: withMember(store, 'commit', async (...a) => {
      const page = pageWritten;
      pageWritten = false;
      const committed = await store.commit(...a);
      if (page && at('after-commit', ++commits)) {
        record(dir, 'kills', `after-commit#${commits}`);
        die();
      }
      return committed;
    }),
  };
}

const env = process.env;
const spec = parseSpec(JSON.parse(env.TM_SPEC!));
const dir = env.TM_CRASH_DIR!;
const run = env.TM_CRASH_RUN ?? '0';
const kill = (() => {
  const k = env.TM_CRASH_KILL;
  if (!k) return undefined;
  if (k === 'timed') return 'timed' as const;
  const [point, nth] = k.split('#');
  return { point: point as KillPoint, nth: Number(nth) };
})();
const mutation = env.TM_CRASH_MUTATION as Mutation | undefined;

const pipeline = await openPipeline(spec);
let sink = pipeline.sink;
let store = pipeline.store;
if (mutation === 'noop-recover') sink = noopRecover(sink);
if (mutation === 'commit-before-write') ({ sink, store } = commitBeforeWrite(sink, store));
if (mutation === 'durable-before-write') sink = durableBeforeWrite(sink);
if (mutation === 'catalog-first') sink = catalogFirst(sink);
({ sink, store } = withKillPoints(sink, store, dir, run, kill));

const summary = await runTable(
  spec,
  incrementalTables(spec)[0]!,
  { ...pipeline, sink, store },
  {
    logger: silentLogger,
    // A killed run's lease is taken over at once: its process is provably gone.
    takeOverDeadLocalHolders: true,
    ...(env.TM_CRASH_LEASE_TTL_MS ? { leaseTtlMs: Number(env.TM_CRASH_LEASE_TTL_MS) } : {}),
  },
);
if (kill === 'timed') record(dir, 'kills', 'timed-finished');
await pipeline.close();
process.stdout.write(`${JSON.stringify(summary)}\n`);
