/**
 * The CDC engine in a process of its own, for crash tests that SIGKILL it at named points of the
 * commit protocol:
 *
 *   node --import tsx test/harness/cdc-child.ts '<ChildConfig JSON>'
 *
 * Runs the engine on the scripted source (file state, file lake, the server state in `dir`).
 * With `kill`, the process records the point in `<dir>/kills` (fsync'd) and SIGKILLs itself the
 * `nth` time it reaches `kill.point`, so the parent knows exactly where each kill landed. With
 * `mutation`, one part of the protocol is replaced by a broken one (the crash suite must then
 * fail): never a switch in production code, always a wrapper injected here.
 */
import { join } from 'node:path';
import type { Streamer } from '../../shared/contracts/cdc.js';
import type { Sink } from '../../shared/contracts/sink.js';
import type { CursorStore, StateRecord } from '../../shared/contracts/state.js';
import type { CdcPoint } from '../../shared/engine/cdc/options.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { ParquetSink } from '../../shared/sink/parquet-sink.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { isProvablyDead, localOwner } from '../../shared/state/lease-owner.js';
import { runEngine } from './cdc-engine.js';
import { ackBeforeCommit, durableBeforeWrite, noopRecover, record } from './mutations.js';
import { generateScript, ScriptedServer, type ScriptParams } from './scripted-source.js';

/** A broken protocol step the crash suite must catch. */
export type Mutation = 'durable-before-write' | 'ack-before-persist' | 'noop-recover' | 'ack-before-commit';

export interface ChildConfig {
  readonly dir: string;
  readonly script: ScriptParams;
  readonly rows: number;
  readonly kill?: { readonly point: CdcPoint; readonly nth: number };
  readonly mutation?: Mutation;
  readonly leaseTtlMs?: number;
  readonly delayMs?: number;
}

/** A store whose commit answers before it has persisted anything. */
function ackBeforePersist(inner: CursorStore): CursorStore {
  let version: number | undefined;
  return new Proxy(inner, {
    get(target, key) {
      if (key === 'commit') {
        return async (k: string, req: Parameters<CursorStore['commit']>[1]): Promise<StateRecord> => {
          const expected = version ?? req.expectedVersion;
          setTimeout(() => {
            target.commit(k, { ...req, expectedVersion: expected }).catch(() => undefined);
          }, 200);
          version = expected + 1;
          return { key: k, version: version, value: req.value, lease: undefined };
        };
      }
      const v = Reflect.get(target, key) as unknown;
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2]!) as ChildConfig;
  const script = generateScript(config.script);
  const server = new ScriptedServer(script, join(config.dir, 'server'));
  let sink: Sink = new ParquetSink({ store: new FileObjectStore(join(config.dir, 'lake')) });
  let store: CursorStore = new FileCursorStore(join(config.dir, 'state'));
  let streamer: Streamer = server.streamer({
    rowsPerEvent: 7,
    ...(config.delayMs ? { delayMs: config.delayMs } : {}),
  });
  if (config.mutation === 'durable-before-write') sink = durableBeforeWrite(sink);
  if (config.mutation === 'ack-before-persist') store = ackBeforePersist(store);
  if (config.mutation === 'noop-recover') sink = noopRecover(sink);
  if (config.mutation === 'ack-before-commit') streamer = ackBeforeCommit(streamer);
  let seen = 0;
  const kill = config.kill;
  // SIGTERM / SIGINT stop the capture as the Fargate task's would: flush, commit, ack, release.
  const stop = new AbortController();
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.once(sig, () => stop.abort());
  const summary = await runEngine({
    script,
    server,
    store,
    sink,
    streamer,
    limits: { rows: config.rows },
    owner: localOwner(),
    extra: {
      signal: stop.signal,
      // A killed child's lease is taken over at once: its process is provably gone.
      isHolderDead: isProvablyDead,
      ...(config.leaseTtlMs ? { leaseTtlMs: config.leaseTtlMs, skewMarginMs: 500 } : {}),
      faults: (point) => {
        if (kill && point === kill.point && ++seen === kill.nth) {
          record(config.dir, 'kills', `${point}#${kill.nth}`);
          process.kill(process.pid, 'SIGKILL');
        }
      },
    },
  });
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  process.exitCode = 0;
}

main().catch((e: unknown) => {
  process.stderr.write(`${(e as { code?: string }).code ?? 'ERROR'}: ${String((e as Error).stack ?? e)}\n`);
  process.exit(1);
});
