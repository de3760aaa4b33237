/**
 * Helpers of the Postgres CDC tests: a spec for a fresh database, a capture running in this
 * process (the CDC runner over the real driver) until a condition holds, and the lake read back
 * with DuckDB as "latest version per key" to compare with the source table.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import postgres from 'postgres';
import { cdcSettings, parseSpec, type Spec } from '../../shared/config/spec.js';
import type { CdcSummary } from '../../shared/engine/cdc/options.js';
import { parseCdcState } from '../../shared/engine/cdc/state.js';
import { createLogger } from '../../shared/observability/log.js';
import { runCdcSources } from '../../shared/pipeline/cdc-runner.js';
import { openStateStore } from '../../shared/pipeline/open.js';

export interface PgCdcTableSpec {
  readonly table: string;
  readonly writeMode?: 'upsert' | 'append';
  readonly [k: string]: unknown;
}

/**
 * A spec capturing `tables` of the database at `url` into a temp dir. Slots are global to the
 * server: tests running in parallel must each name their own (`cdc.slot`).
 */
export function pgCdcSpec(
  url: string,
  tables: readonly PgCdcTableSpec[],
  cdc: Record<string, unknown> = {},
  dir = mkdtempSync(join(tmpdir(), 'tidemark-pgcdc-')),
): { spec: Spec; dir: string } {
  const spec = parseSpec({
    pipeline: 'p',
    sources: { src: { kind: 'postgres', url, cdc: { heartbeatSeconds: 1, flushSeconds: 1, ...cdc } } },
    tables: tables.map((t) => ({ source: 'src', mode: 'cdc', snapshot: 'never', writeMode: 'upsert', ...t })),
    state: { dir: join(dir, 'state') },
    lake: { uri: `file://${join(dir, 'lake')}` },
  });
  return { spec, dir };
}

/** A running capture in this process. */
export interface Capture {
  readonly done: Promise<CdcSummary[]>;
  /** Rows committed to state per lake table (polls the state file). */
  committedRows(): Promise<Record<string, number>>;
  /** Waits until `pred(rows)` holds, or throws after `timeoutMs`. */
  until(pred: (rows: Record<string, number>) => boolean, timeoutMs?: number): Promise<void>;
  stop(): Promise<CdcSummary[]>;
  readonly logs: string[];
}

/**
 * Runs the spec's capture in this process. `until` first waits for the source's slot to stream:
 * the engine commits its first state before the reader creates the slot, so a change made right
 * after the state appears could precede the slot (and is then, rightly, not captured).
 */
export function startCapture(spec: Spec): Capture {
  const stop = new AbortController();
  const logs: string[] = [];
  const logger = createLogger({ json: true, write: (l) => logs.push(l), metrics: false });
  const done = runCdcSources(spec, { logger, signal: stop.signal });
  let failure: unknown;
  done.catch((e: unknown) => {
    failure = e;
  });
  const store = openStateStore(spec);
  const committedRows = async (): Promise<Record<string, number>> => {
    const rec = await (await store).load('cdc#p#src');
    if (rec.value === undefined) return {};
    const state = parseCdcState(rec.value);
    return Object.fromEntries(Object.entries(state.tables).map(([k, v]) => [k, v.rows]));
  };
  let streaming = false;
  const slotStreams = async (): Promise<boolean> => {
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
  };
  return {
    done,
    logs,
    committedRows,
    async until(pred, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        if (failure === undefined && !(await slotStreams())) {
          if (Date.now() > deadline)
            throw new Error(
              `the slot did not stream in ${timeoutMs} ms; logs:\n${logs.slice(-20).join('\n')}`,
            );
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
        if (failure !== undefined) throw failure;
        const rows = await committedRows();
        if (pred(rows)) return;
        if (Date.now() > deadline)
          throw new Error(
            `capture did not reach the condition in ${timeoutMs} ms; committed ${JSON.stringify(rows)}; logs:\n${logs.slice(-20).join('\n')}`,
          );
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop() {
      stop.abort();
      return done;
    },
  };
}

/** Latest version per key of a lake table (rows whose `__op` is 'd' dropped), as JSON-ish text. */
export async function lakeLatest(
  dir: string,
  table: string,
  key: string,
  columns: readonly string[],
): Promise<Map<string, Record<string, unknown>>> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    const glob = join(dir, 'lake', table, '*.parquet');
    const files = Number((await conn.runAndReadAll(`SELECT count(*) FROM glob('${glob}')`)).getRows()[0]![0]);
    const out = new Map<string, Record<string, unknown>>();
    if (files === 0) return out;
    const cols = columns.map((c) => `CAST("${c}" AS VARCHAR) AS "${c}"`).join(', ');
    const reader = await conn.runAndReadAll(
      `SELECT CAST("${key}" AS VARCHAR) AS k, ${cols}, __op FROM (
         SELECT *, row_number() OVER (PARTITION BY "${key}" ORDER BY __pos DESC) AS rn
         FROM read_parquet('${glob}', union_by_name = true)) WHERE rn = 1 AND __op <> 'd'`,
    );
    for (const row of reader.getRowObjects()) out.set(String(row.k), row as Record<string, unknown>);
    return out;
  } finally {
    conn.closeSync();
  }
}

/** Whether any lake row of `table` satisfies the SQL condition `where` (false without objects). */
export async function lakeHas(dir: string, table: string, where: string): Promise<boolean> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    const glob = join(dir, 'lake', table, '*.parquet');
    const files = Number((await conn.runAndReadAll(`SELECT count(*) FROM glob('${glob}')`)).getRows()[0]![0]);
    if (files === 0) return false;
    const r = await conn.runAndReadAll(`SELECT count(*) FROM read_parquet('${glob}') WHERE ${where}`);
    return Number(r.getRows()[0]![0]) > 0;
  } finally {
    conn.closeSync();
  }
}

/** Every lake row of a table (all versions) as objects with text values. */
export async function lakeRows(
  dir: string,
  table: string,
  columns: readonly string[],
): Promise<Record<string, unknown>[]> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    const glob = join(dir, 'lake', table, '*.parquet');
    const files = Number((await conn.runAndReadAll(`SELECT count(*) FROM glob('${glob}')`)).getRows()[0]![0]);
    if (files === 0) return [];
    const cols = columns.map((c) => `CAST("${c}" AS VARCHAR) AS "${c}"`).join(', ');
    const r = await conn.runAndReadAll(
      `SELECT ${cols} FROM read_parquet('${glob}', union_by_name = true) ORDER BY __pos`,
    );
    return r.getRowObjects() as Record<string, unknown>[];
  } finally {
    conn.closeSync();
  }
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
