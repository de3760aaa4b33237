/**
 * The scheduled incremental-sync Lambda. An EventBridge Scheduler event names the table
 * (`{"table": "public.orders"}`); the handler runs it until caught up or until the deadline
 * nears, then returns (and logs) a structured summary. With `selfContinue` and a backlog left it
 * invokes itself asynchronously, so a large first sync does not wait for the next schedule.
 *
 * The event `{"check": true, "table"?: "..."}` runs `tidemark check` instead (shared/pipeline/
 * check.ts) and returns its report: the checks run with the function's own network path,
 * credentials and IAM, and never sync. So no separate function or role is needed for them.
 *
 * A thin shell: config in, engine call, summary out. Spec from TIDEMARK_SPEC_FILE (bundled) or
 * TIDEMARK_SPEC (inline JSON); see docs/decisions/0004-config-and-secrets.md. A thrown error is
 * the invocation's result (and lands in CloudWatch): it leaves through `redactError`.
 */
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import type { Context } from 'aws-lambda';
import { forgetSecrets } from '../../shared/config/secrets.js';
import { findIncrementalTable, loadSpecFromEnv, type Spec } from '../../shared/config/spec.js';
import { TidemarkError } from '../../shared/contracts/errors.js';
import type { IncrementalSummary } from '../../shared/engine/incremental/options.js';
import { createLogger } from '../../shared/observability/log.js';
import { redactError } from '../../shared/observability/redact.js';
import { type CheckReport, checkPipeline } from '../../shared/pipeline/check.js';
import { type OpenPipeline, openPipeline } from '../../shared/pipeline/open.js';
import { runTable } from '../../shared/pipeline/run-table.js';
import { lambdaOwner } from '../../shared/state/lease-owner.js';

export interface IncrementalEvent {
  /** Source table (`schema.table`) or lake target name. */
  readonly table: string;
  /** Pipeline name; checked against the spec when given. */
  readonly pipeline?: string;
  /** Invoke self asynchronously while a backlog remains (default: TIDEMARK_SELF_CONTINUE=1). */
  readonly selfContinue?: boolean;
  /** How many continuations preceded this one (bounded by TIDEMARK_MAX_CONTINUATIONS). */
  readonly continuation?: number;
}

export interface IncrementalResponse extends IncrementalSummary {
  readonly continued: boolean;
}

/** Checks what a run needs instead of running (`tidemark check`); the response is the report. */
export interface CheckEvent {
  readonly check: true;
  /** Only this table (and its source, the state and the lake); default every table. */
  readonly table?: string;
  /** Pipeline name; checked against the spec when given. */
  readonly pipeline?: string;
}

let cached: { spec: Spec; pipeline: OpenPipeline } | undefined;
let cachedSpec: Spec | undefined;

function loadSpec(): Spec {
  return loadSpecFromEnv(__dirnameCompat());
}

function __dirnameCompat(): string {
  // The bundle is CommonJS (parquet-wasm needs __dirname); under tsx/ESM fall back to cwd.
  return typeof __dirname === 'string' ? __dirname : process.cwd();
}

function isCheckEvent(event: IncrementalEvent | CheckEvent): event is CheckEvent {
  return (event as CheckEvent).check === true;
}

/** The spec, read once per container. */
function specOnce(): Spec {
  cachedSpec ??= loadSpec();
  return cachedSpec;
}

/** Builds (once per container) the spec and the pipeline's state store, sink and sources. */
async function pipelineOnce(): Promise<{ spec: Spec; pipeline: OpenPipeline }> {
  if (!cached) {
    const spec = specOnce();
    // The sink outlives an invocation: its warnings are logged without a request id.
    cached = { spec, pipeline: await openPipeline(spec, { logger: createLogger({ json: true }) }) };
  }
  return cached;
}

export async function handler(event: IncrementalEvent, context: Context): Promise<IncrementalResponse>;
export async function handler(event: CheckEvent, context: Context): Promise<CheckReport>;
export async function handler(
  event: IncrementalEvent | CheckEvent,
  context: Context,
): Promise<IncrementalResponse | CheckReport> {
  try {
    return await runEvent(event, context);
  } catch (e) {
    throw redactError(e);
  }
}

async function runEvent(
  event: IncrementalEvent | CheckEvent,
  context: Context,
): Promise<IncrementalResponse | CheckReport> {
  const logger = createLogger({ json: true, fields: { requestId: context.awsRequestId } });
  if (isCheckEvent(event)) {
    // Its own connections, not the cached pipeline: opening that would create a missing state
    // table (with an endpoint), and a check changes nothing.
    const spec = specOnce();
    if (event.pipeline && event.pipeline !== spec.pipeline) {
      throw new TidemarkError(
        'EVENT_INVALID',
        `event names pipeline "${event.pipeline}" but this function runs "${spec.pipeline}"`,
      );
    }
    const report = await checkPipeline(spec, event.table ? { table: event.table } : {});
    for (const l of report.lines) {
      if (l.status !== 'ok') logger.warn(l.message, { check: { ...l } });
    }
    logger.info('check finished', { check: { passed: report.passed, ...report.counts } });
    return report;
  }
  const { spec, pipeline } = await pipelineOnce();
  if (event.pipeline && event.pipeline !== spec.pipeline) {
    throw new TidemarkError(
      'EVENT_INVALID',
      `event names pipeline "${event.pipeline}" but this function runs "${spec.pipeline}"`,
    );
  }
  if (!event.table)
    throw new TidemarkError('EVENT_INVALID', 'event has no "table" (expected {"table": "schema.table"})');
  // Schedules exist for incremental tables only (infra); a cdc table named here is refused.
  const table = findIncrementalTable(spec, event.table, 'the incremental Lambda');
  const margin = Number(process.env.TIDEMARK_SAFETY_MARGIN_MS ?? 15_000);
  try {
    const summary = await runTable(spec, table, pipeline, {
      logger,
      owner: lambdaOwner(context.awsRequestId),
      remainingMs: () => context.getRemainingTimeInMillis(),
      safetyMarginMs: margin,
      ...(process.env.TIDEMARK_LEASE_GRACE_MS
        ? { leaseGraceMs: Number(process.env.TIDEMARK_LEASE_GRACE_MS) }
        : {}),
    });
    const continuation = event.continuation ?? 0;
    const maxContinuations = Number(process.env.TIDEMARK_MAX_CONTINUATIONS ?? 20);
    const wantsContinue = event.selfContinue ?? process.env.TIDEMARK_SELF_CONTINUE === '1';
    let continued = false;
    if (summary.more && wantsContinue && continuation < maxContinuations) {
      await new LambdaClient({}).send(
        new InvokeCommand({
          FunctionName: context.functionName,
          InvocationType: 'Event',
          Payload: Buffer.from(JSON.stringify({ ...event, continuation: continuation + 1 })),
        }),
      );
      continued = true;
    }
    const response = { ...summary, continued };
    logger.info('incremental run finished', { summary: response });
    return response;
  } catch (e) {
    // After any failure the next invocation starts clean: new connections (a stalled or broken
    // one is not reused), and a re-read secret in case it was rotated.
    if ((e as TidemarkError).code === 'SOURCE_AUTH_FAILED') forgetSecrets();
    await shutdown().catch(() => undefined);
    logger.error('incremental run failed', {
      table: table.table,
      error:
        e instanceof Error
          ? { name: e.name, code: (e as TidemarkError).code, message: e.message }
          : String(e),
    });
    throw e;
  }
}

/** Closes the cached pipeline's connections (local runs and tests; a Lambda container just freezes). */
export async function shutdown(): Promise<void> {
  const c = cached;
  cached = undefined;
  cachedSpec = undefined;
  if (c) await c.pipeline.close();
}
