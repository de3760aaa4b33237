/**
 * Helpers of the MySQL CDC tests (the twins of pg-cdc.ts): a spec capturing tables of a fresh
 * database through the binlog, a capture running in this process until a condition holds, and
 * a plain client. The lake is read back with pg-cdc.ts's DuckDB helpers (they are generic).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { parseSpec, type Spec } from '../../shared/config/spec.js';
import type { CdcSummary } from '../../shared/engine/cdc/options.js';
import { type CdcState, parseCdcState } from '../../shared/engine/cdc/state.js';
import { createLogger } from '../../shared/observability/log.js';
import { runCdcSources } from '../../shared/pipeline/cdc-runner.js';
import { openStateStore } from '../../shared/pipeline/open.js';
import type { Capture } from './pg-cdc.js';

export type { Capture } from './pg-cdc.js';
export { lakeHas, lakeLatest, lakeRows } from './pg-cdc.js';

export interface MysqlCdcTableSpec {
  readonly table: string;
  readonly writeMode?: 'upsert' | 'append';
  readonly [k: string]: unknown;
}

/**
 * A spec capturing `tables` of the database at `url` into a temp dir. The binlog dump's server
 * id must be unique among the server's replicas: captures running at once each take their own.
 */
export function mysqlCdcSpec(
  url: string,
  serverId: number,
  tables: readonly MysqlCdcTableSpec[],
  cdc: Record<string, unknown> = {},
  dir = mkdtempSync(join(tmpdir(), 'tidemark-mycdc-')),
): { spec: Spec; dir: string } {
  const spec = parseSpec({
    pipeline: 'p',
    sources: { src: { kind: 'mysql', url, cdc: { serverId, heartbeatSeconds: 1, flushSeconds: 1, ...cdc } } },
    tables: tables.map((t) => ({ source: 'src', mode: 'cdc', snapshot: 'never', writeMode: 'upsert', ...t })),
    state: { dir: join(dir, 'state') },
    lake: { uri: `file://${join(dir, 'lake')}` },
  });
  return { spec, dir };
}

/** The committed CDC state of the spec's source. */
export async function loadCdcState(spec: Spec): Promise<CdcState> {
  const store = await openStateStore(spec);
  const rec = await store.load('cdc#p#src');
  return parseCdcState(rec.value);
}

/**
 * Runs the spec's capture in this process. `until` first waits for the binlog dump to stream
 * (the reader logs `binlog streaming` once zongji is ready).
 */
export function startMysqlCapture(spec: Spec): Capture {
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
        const streaming = logs.some((l) => l.includes('binlog streaming'));
        const rows = await committedRows();
        if (streaming && pred(rows)) return;
        if (Date.now() > deadline)
          throw new Error(
            `capture did not reach the condition in ${timeoutMs} ms (streaming: ${streaming}); committed ${JSON.stringify(rows)}; logs:\n${logs.slice(-20).join('\n')}`,
          );
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop(): Promise<CdcSummary[]> {
      stop.abort();
      return done;
    },
  };
}

/** A plain client for the test's own statements (several statements per query allowed). */
export function mysqlClient(url: string): Promise<mysql.Connection> {
  return mysql.createConnection({
    uri: url,
    multipleStatements: true,
    dateStrings: true,
    supportBigNumbers: true,
    bigNumberStrings: true,
  });
}
