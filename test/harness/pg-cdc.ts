/**
 * Helpers of the Postgres CDC tests: what every driver's capture shares (./cdc-capture.ts: the
 * spec, the capture in this process, the lake read back with DuckDB) with Postgres' part: the
 * slot a capture must see streaming before it counts as started, and a plain client.
 */
import postgres from 'postgres';
import { cdcSettings, type Spec } from '../../shared/config/spec.js';
import type { Capture, CdcTableSpec } from './cdc-capture.js';
import { captureDir, cdcCaptureSpec, startCdcCapture } from './cdc-capture.js';

export type { Capture } from './cdc-capture.js';
export { lakeHas, lakeLatest, lakeRows } from './cdc-capture.js';

/**
 * A spec capturing `tables` of the database at `url` into a temp dir. Slots are global to the
 * server: tests running in parallel must each name their own (`cdc.slot`).
 */
export function pgCdcSpec(
  url: string,
  tables: readonly CdcTableSpec[],
  cdc: Record<string, unknown> = {},
  dir = captureDir('tidemark-pgcdc-'),
): { spec: Spec; dir: string } {
  return cdcCaptureSpec('postgres', url, tables, cdc, dir);
}

/**
 * Runs the spec's capture in this process. `until` first waits for the source's slot to stream:
 * the engine commits its first state before the reader creates the slot, so a change made right
 * after the state appears could precede the slot (and is then, rightly, not captured).
 */
export function startCapture(spec: Spec): Capture {
  let streaming = false;
  return startCdcCapture(spec, async () => {
    if (streaming) return true;
    const url = spec.sources.src?.url;
    if (!url) return true;
    const sql = postgres(url, { max: 1, onnotice: () => undefined });
    try {
      streaming = await walsenderStreams(sql, cdcSettings(spec, 'src').slot ?? '');
      return streaming;
    } finally {
      await sql.end();
    }
  });
}

/** A plain client for the test's own statements. */
export function pgClient(url: string): postgres.Sql {
  return postgres(url, { max: 2, onnotice: () => undefined });
}

/**
 * Whether a walsender streams from `slot`. Not just `active`: a slot being created is active too
 * (held by the creating backend, which may wait for every running transaction to end), and a
 * change made then precedes the slot's consistent point.
 */
async function walsenderStreams(sql: postgres.Sql, slot: string): Promise<boolean> {
  const [r] = await sql<{ n: number }[]>`
    SELECT count(*)::int AS n FROM pg_replication_slots s JOIN pg_stat_activity a ON a.pid = s.active_pid
    WHERE s.slot_name = ${slot} AND a.backend_type = 'walsender'`;
  return (r?.n ?? 0) > 0;
}

/** Waits until the replication slot `slot` exists and a walsender streams from it. */
export async function waitForActiveSlot(sql: postgres.Sql, slot: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await walsenderStreams(sql, slot)) return;
    if (Date.now() > deadline) throw new Error(`slot ${slot} was not streaming within ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 100));
  }
}
