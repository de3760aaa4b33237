/**
 * Runs one table of a pipeline spec through the incremental engine. The one function the CLI
 * (`run`, `demo`), the Lambda handler and the local invoke all call, so every entry point has the
 * same behaviour. It takes `mode: incremental` tables only (the type says so); first it refuses a
 * table its source's CDC state lists (a mode change, shared/pipeline/mode-change.ts).
 *
 * Owns: turning a spec table into engine options. Never decides sync semantics (the engine does)
 * and never prints (callers do).
 */

import { type IncrementalTableSpec, type Spec, tableTarget } from '../config/spec.js';
import type { Clock } from '../contracts/state.js';
import { configuredTableFormat } from '../contracts/table-format.js';
import type { IncrementalSummary } from '../engine/incremental/options.js';
import { runIncremental } from '../engine/incremental/run.js';
import type { Logger } from '../observability/log.js';
import { writerId } from '../sink/layout.js';
import { isProvablyDead, localOwner } from '../state/lease-owner.js';
import { assertModesUnchanged } from './mode-change.js';
import type { OpenPipeline } from './open.js';

/** Lease TTL: longer than a Lambda's 15-minute maximum, so a live run is never taken over. */
export const DEFAULT_LEASE_TTL_MS = 20 * 60 * 1000;

export interface RunTableOptions {
  readonly logger: Logger;
  readonly clock?: Clock;
  /** Lease owner; defaults to this process's id (shared/state/lease-owner.ts `localOwner`). */
  readonly owner?: string;
  /**
   * Take over at once a lease whose holder is a local process proven gone (same host, pid gone
   * or reused), instead of waiting for its TTL. For runs on a developer's or an operator's
   * machine (the CLI); a Lambda never sets it.
   */
  readonly takeOverDeadLocalHolders?: boolean;
  readonly remainingMs?: () => number;
  readonly safetyMarginMs?: number;
  readonly maxPages?: number;
  /** See IncrementalRunOptions.pageTimeoutMs. */
  readonly pageTimeoutMs?: number;
  readonly progressTty?: boolean;
  readonly leaseTtlMs?: number;
  /** With a deadline: the lease outlives it by this much (see IncrementalRunOptions). */
  readonly leaseGraceMs?: number;
  /** Aborted on Ctrl-C / SIGTERM: the run stops after the page in flight commits. */
  readonly signal?: AbortSignal;
}

export async function runTable(
  spec: Spec,
  table: IncrementalTableSpec,
  pipeline: OpenPipeline,
  opts: RunTableOptions,
): Promise<IncrementalSummary> {
  await assertModesUnchanged(spec, pipeline.store, [table]);
  const source = await pipeline.source(table.source, table);
  return runIncremental({
    pipeline: spec.pipeline,
    writer: writerId(spec.pipeline, table.source),
    table: {
      source: table.table,
      target: tableTarget(table),
      cursor: table.cursor,
      writeMode: table.writeMode,
      pageSize: table.pageSize,
      pageBytes: table.pageBytes,
      maxRowBytes: table.maxRowBytes,
      nullCursor: table.nullCursor,
      exclude: table.exclude,
      onWiden: table.onWiden,
    },
    lakeFormat: spec.lake.format,
    tableFormat: configuredTableFormat(spec.lake.tableFormat),
    source,
    store: pipeline.store,
    sink: pipeline.sink,
    logger: opts.logger,
    clock: opts.clock ?? Date.now,
    owner: opts.owner ?? localOwner(),
    ...(opts.takeOverDeadLocalHolders ? { isHolderDead: isProvablyDead } : {}),
    leaseTtlMs: opts.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS,
    encodeRows: pipeline.encodeRows,
    ...(opts.remainingMs ? { remainingMs: opts.remainingMs } : {}),
    ...(opts.safetyMarginMs !== undefined ? { safetyMarginMs: opts.safetyMarginMs } : {}),
    ...(opts.maxPages !== undefined ? { maxPages: opts.maxPages } : {}),
    ...(opts.pageTimeoutMs !== undefined ? { pageTimeoutMs: opts.pageTimeoutMs } : {}),
    ...(opts.leaseGraceMs !== undefined ? { leaseGraceMs: opts.leaseGraceMs } : {}),
    ...(opts.progressTty !== undefined ? { progressTty: opts.progressTty } : {}),
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
}
