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
import { parseSpec, type Spec } from '../../shared/config/spec.js';
import type { CdcSummary } from '../../shared/engine/cdc/run.js';
import { parseCdcState } from '../../shared/engine/cdc/state.js';
import { createLogger } from '../../shared/observability/log.js';
import { runCdcSources } from '../../shared/pipeline/cdc-runner.js';
import { openStateStore } from '../../shared/pipeline/open.js';

export interface PgCdcTableSpec {
  readonly table: string;
  readonly writeMode?: 'upsert' | 'append';
  readonly [k: string]: unknown;
}

/** A spec capturing `tables` of the database at `url` into a temp dir. */
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
  return {
    done,
    logs,
    committedRows,
    async until(pred, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
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

/** Waits until the replication slot `slot` exists and a walsender streams from it. */
export async function waitForActiveSlot(sql: postgres.Sql, slot: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [r] = await sql<
      { active: boolean }[]
    >`SELECT active FROM pg_replication_slots WHERE slot_name = ${slot}`;
    if (r?.active) return;
    if (Date.now() > deadline) throw new Error(`slot ${slot} was not streaming within ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 100));
  }
}
