/**
 * The stale-writer takeover both stale-writer tests stage (plain objects in
 * test/integration/incremental/scenarios.ts, an Iceberg table in iceberg-stale-writer.test.ts):
 * writer A reads its first page and stalls right before the write (a frozen Lambda, a partitioned
 * task) while its short lease runs out; the source changes meanwhile; writer B takes the expired
 * lease (a higher fence) and syncs. `resumeA` lets A go on and answers how its run ended.
 */
import { expect } from 'vitest';
import type { IncrementalTableSpec, Spec } from '../../shared/config/spec.js';
import type { TidemarkError } from '../../shared/contracts/errors.js';
import type { CursorStore } from '../../shared/contracts/state.js';
import type { IncrementalSummary } from '../../shared/engine/incremental/options.js';
import { silentLogger } from '../../shared/observability/log.js';
import type { OpenPipeline } from '../../shared/pipeline/open.js';
import { runTable } from '../../shared/pipeline/run-table.js';
import { pausedAtFirstWrite } from './wrap.js';

export interface StaleTakeover {
  /** The lease fence A held. */
  readonly fenceA: number;
  /** B's run, which took the lease over. */
  readonly b: IncrementalSummary;
  /** Lets A's stalled write go on; resolves to the error A's run ended with (undefined: it succeeded). */
  resumeA(): Promise<TidemarkError | undefined>;
}

/**
 * A stalls at its first write holding a 1.5 s lease under `key` in `store` (asserted); `change`
 * runs at the source; once A's lease expired, B syncs the table to the end.
 */
export async function staleWriterTakeover(o: {
  readonly spec: Spec;
  readonly table: IncrementalTableSpec;
  readonly pipelineA: OpenPipeline;
  readonly pipelineB: OpenPipeline;
  readonly store: CursorStore;
  readonly key: string;
  readonly change: () => Promise<void>;
}): Promise<StaleTakeover> {
  const a = pausedAtFirstWrite(o.pipelineA.sink);
  const runA = runTable(
    o.spec,
    o.table,
    { ...o.pipelineA, sink: a.sink },
    { logger: silentLogger, owner: 'run-a', leaseTtlMs: 1_500 },
  ).then(
    () => undefined,
    (e: unknown) => e as TidemarkError,
  );
  const fenceA = await a.atWrite;
  await o.change();
  const held = await o.store.load(o.key);
  expect(held.lease).toMatchObject({ owner: 'run-a', fence: fenceA });
  await new Promise((r) => setTimeout(r, Math.max(0, held.lease!.expiresAt - Date.now()) + 50));
  const b = await runTable(o.spec, o.table, o.pipelineB, { logger: silentLogger, owner: 'run-b' });
  return {
    fenceA,
    b,
    resumeA: () => {
      a.open();
      return runA;
    },
  };
}
