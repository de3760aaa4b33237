/**
 * What every driver's in-process CDC tests share (./pg-cdc.ts and ./mysql-cdc.ts add the
 * driver's part): a spec capturing tables of a fresh database into a temp dir, a capture running
 * in this process (the CDC runner over the real driver) until a condition holds, its failure,
 * the committed state, and the lake read back with DuckDB (latest version per key, every
 * version, every (key, __pos), the typed columns); an upsert Iceberg table's latest versions are
 * its current state as pyiceberg reads it (./current-state-read.ts), with no dedupe.
 *
 * A capture only counts as started once the driver's stream is really streaming (the `streams`
 * check the driver's helper passes): a change made before that may precede the stream's start
 * and is then, rightly, not captured. The helpers read the lake; they never write it.
 */

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { parseSpec, type Spec } from '../../shared/config/spec.js';
import type { CdcSummary } from '../../shared/engine/cdc/options.js';
import { type CdcState, parseCdcState } from '../../shared/engine/cdc/state.js';
import { createLogger } from '../../shared/observability/log.js';
import { runCdcSources } from '../../shared/pipeline/cdc-runner.js';
import { openStateStore } from '../../shared/pipeline/open.js';
import { currentStateProblems, readCurrentState } from './current-state-read.js';
import { lakeScan, type TestTableFormat } from './lake-scan.js';

/** The state key of the specs built here: pipeline `p`, source `src`. */
const STATE_KEY = 'cdc#p#src';

/** One captured table of a capture spec (any other table field passes through). */
export interface CdcTableSpec {
  readonly table: string;
  readonly writeMode?: 'upsert' | 'append';
  readonly [k: string]: unknown;
}

/**
 * A spec capturing `tables` of the `kind` database at `url` into `dir` (pipeline `p`, source
 * `src`, snapshot never, upsert, 1 s heartbeats and flushes unless `cdc` or a table says
 * otherwise). `cdc` holds the driver's stream settings (slot, publication, server id).
 */
export function cdcCaptureSpec(
  kind: 'postgres' | 'mysql',
  url: string,
  tables: readonly CdcTableSpec[],
  cdc: Record<string, unknown>,
  dir: string,
): { spec: Spec; dir: string } {
  const spec = parseSpec({
    pipeline: 'p',
    sources: { src: { kind, url, cdc: { heartbeatSeconds: 1, flushSeconds: 1, ...cdc } } },
    tables: tables.map((t) => ({ source: 'src', mode: 'cdc', snapshot: 'never', writeMode: 'upsert', ...t })),
    state: { dir: join(dir, 'state') },
    lake: { uri: `file://${join(dir, 'lake')}` },
  });
  return { spec, dir };
}

/** A fresh temp dir for a capture's state and lake, named `<prefix><random>`. */
export function captureDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** A running capture in this process. */
export interface Capture {
  readonly done: Promise<CdcSummary[]>;
  /** Rows committed to state per lake table (polls the state file). */
  committedRows(): Promise<Record<string, number>>;
  /** Waits until the stream streams and `pred(rows)` holds, or throws after `timeoutMs`. */
  until(pred: (rows: Record<string, number>) => boolean, timeoutMs?: number): Promise<void>;
  stop(): Promise<CdcSummary[]>;
  readonly logs: string[];
}

/**
 * Runs the spec's capture in this process. `until` first waits for `streams(logs)` (the driver's
 * "the stream is live" check), then for its condition; a failure of the run is thrown by `until`.
 */
export function startCdcCapture(spec: Spec, streams: (logs: readonly string[]) => Promise<boolean>): Capture {
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
    const rec = await (await store).load(STATE_KEY);
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
        const streaming = await streams(logs);
        const rows = await committedRows();
        if (streaming && pred(rows)) return;
        if (Date.now() > deadline)
          throw new Error(
            `capture did not reach the condition in ${timeoutMs} ms (streaming: ${streaming}); committed ${JSON.stringify(rows)}; logs:\n${logs.slice(-20).join('\n')}`,
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

/** The capture's error, or a failure when it is still running after `ms` or ended normally. */
export async function captureFailure(cap: Capture, ms = 60_000): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'running'>((r) => {
    timer = setTimeout(() => r('running'), ms);
  });
  try {
    const r = await Promise.race([
      cap.done.then(
        () => 'ended' as const,
        (e: unknown) => ({ e }),
      ),
      timeout,
    ]);
    if (r === 'running') {
      await cap.stop().catch(() => undefined);
      throw new Error(`the capture was expected to fail but was still running after ${ms} ms`);
    }
    if (r === 'ended') throw new Error('the capture was expected to fail but ended normally');
    return r.e;
  } finally {
    clearTimeout(timer);
  }
}

/** The committed CDC state of the spec's source. */
export async function loadCdcState(spec: Spec): Promise<CdcState> {
  const store = await openStateStore(spec);
  const rec = await store.load(STATE_KEY);
  return parseCdcState(rec.value);
}

/**
 * Every reader of class `reader` started from now on in this process, in start order (the
 * registry imports the same module instance, so a wrapper of `start` sees each one): for the
 * readers' `seen` counters.
 */
export function startedReaders<R extends { start(...args: never[]): unknown }>(reader: {
  prototype: R;
}): R[] {
  const started: R[] = [];
  const original = reader.prototype.start;
  reader.prototype.start = function (this: R, ...args: Parameters<R['start']>) {
    started.push(this);
    return original.apply(this, args);
  } as R['start'];
  return started;
}

/**
 * Runs `read` on a DuckDB connection with a FROM expression over lake table `table`'s files, or returns
 * `none` when the table has no object yet.
 */
async function readLake<T>(
  dir: string,
  table: string,
  none: T,
  read: (conn: DuckDBConnection, from: string) => Promise<T>,
  tableFormat: TestTableFormat = 'plain',
  rows: 'every version' | 'current' = 'every version',
): Promise<T> {
  // Every object (plain), or an Iceberg table's current snapshot as pyiceberg plans its scan.
  const scan = await lakeScan(join(dir, 'lake', table), tableFormat);
  if (scan.problems.length > 0) throw new Error(`${table}: ${scan.problems.join('; ')}`);
  // `current`: what an Iceberg reader returns (a current-state table's position deletes applied).
  const from = rows === 'current' ? scan.current : scan.from;
  if (from === undefined) return none;
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    return await read(conn, from);
  } finally {
    conn.closeSync();
  }
}

const asText = (columns: readonly string[]) =>
  columns.map((c) => `CAST("${c}" AS VARCHAR) AS "${c}"`).join(', ');

/**
 * Latest version per key of a lake table (rows whose `__op` is 'd' dropped), as JSON-ish text.
 * An Iceberg table (written with writeMode upsert: a current state, decision 0026) is read as it
 * is by pyiceberg: a `__op = d` row or a key with two rows throws, nothing is deduplicated.
 */
export async function lakeLatest(
  dir: string,
  table: string,
  key: string,
  columns: readonly string[],
  tableFormat: TestTableFormat = 'plain',
): Promise<Map<string, Record<string, unknown>>> {
  const out = new Map<string, Record<string, unknown>>();
  if (tableFormat === 'iceberg') {
    const rows = await readCurrentState(join(dir, 'lake', table), 'pyiceberg');
    const text = (v: unknown) => (v === null || v === undefined ? null : String(v));
    // Only the shape of a current state: the caller compares the values with its source.
    const broken = currentStateProblems(`${table} (pyiceberg)`, rows, {
      key,
      columns: [key],
      rows: new Map(rows.map((r) => [String(text(r[key])), [text(r[key])]])),
    });
    if (broken.length > 0) throw new Error(broken.join('; '));
    for (const r of rows)
      out.set(String(text(r[key])), {
        k: text(r[key]),
        ...Object.fromEntries(columns.map((c) => [c, text(r[c])])),
        __op: r.__op,
      });
    return out;
  }
  return readLake(
    dir,
    table,
    out,
    async (conn, from) => {
      const reader = await conn.runAndReadAll(
        `SELECT CAST("${key}" AS VARCHAR) AS k, ${asText(columns)}, __op FROM (
         SELECT *, row_number() OVER (PARTITION BY "${key}" ORDER BY __pos DESC) AS rn
         FROM ${from}) WHERE rn = 1 AND __op <> 'd'`,
      );
      for (const row of reader.getRowObjects()) out.set(String(row.k), row as Record<string, unknown>);
      return out;
    },
    tableFormat,
    'current',
  );
}

/** Whether any lake row of `table` satisfies the SQL condition `where` (false without objects). */
export async function lakeHas(dir: string, table: string, where: string): Promise<boolean> {
  return readLake(dir, table, false, async (conn, from) => {
    const r = await conn.runAndReadAll(`SELECT count(*) FROM ${from} WHERE ${where}`);
    return Number(r.getRows()[0]![0]) > 0;
  });
}

/** Every lake row of a table (all versions, by `__pos`) as objects with text values. */
export async function lakeRows(
  dir: string,
  table: string,
  columns: readonly string[],
  tableFormat: TestTableFormat = 'plain',
): Promise<Record<string, unknown>[]> {
  return readLake(
    dir,
    table,
    [],
    async (conn, from) => {
      const r = await conn.runAndReadAll(`SELECT ${asText(columns)} FROM ${from} ORDER BY __pos`);
      return r.getRowObjects() as Record<string, unknown>[];
    },
    tableFormat,
  );
}

/** Every (key, __pos, __op) of a lake table, by `__pos`. */
export async function lakePositions(
  dir: string,
  table: string,
  key = 'id',
): Promise<{ k: string; pos: string; op: string }[]> {
  return readLake(dir, table, [], async (conn, from) => {
    const r = await conn.runAndReadAll(
      `SELECT CAST("${key}" AS VARCHAR) AS k, __pos AS pos, __op AS op FROM ${from} ORDER BY __pos`,
    );
    return r.getRowObjects().map((o) => ({ k: String(o.k), pos: String(o.pos), op: String(o.op) }));
  });
}

/** A lake table's data columns as text by key, and their DuckDB types (metadata columns left out). */
export interface TypedLake {
  readonly rows: Map<string, Record<string, string | null>>;
  readonly types: Record<string, string>;
}

/**
 * The data columns `[key, ...columns]` of a lake table's objects (`glob`) as VARCHAR by `key`,
 * and every data column's DuckDB type. `latest`: the latest version per key (deletes dropped);
 * otherwise every row, a key seen twice an error. `timeZone`: DuckDB's session zone, which
 * prints TIMESTAMP WITH TIME ZONE values.
 */
export async function lakeTyped(
  glob: string,
  key: string,
  columns: readonly string[],
  opts: { readonly latest?: boolean; readonly timeZone?: string } = {},
): Promise<TypedLake> {
  const inst = await DuckDBInstance.create(':memory:');
  const conn = await inst.connect();
  try {
    if (opts.timeZone) await conn.run(`SET TimeZone = '${opts.timeZone}'`);
    const described = (
      await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet('${glob}', union_by_name = true)`)
    ).getRowObjects();
    const types = Object.fromEntries(
      described
        .filter((c) => !String(c.column_name).startsWith('__'))
        .map((c) => [String(c.column_name), String(c.column_type)]),
    );
    const cols = asText(columns.includes(key) ? columns : [key, ...columns]);
    const from = `read_parquet('${glob}', union_by_name = true)`;
    const r = await conn.runAndReadAll(
      opts.latest
        ? `SELECT ${cols} FROM (SELECT *, row_number() OVER (PARTITION BY "${key}" ORDER BY __pos DESC) AS rn
             FROM ${from}) WHERE rn = 1 AND __op <> 'd' ORDER BY "${key}"`
        : `SELECT ${cols} FROM ${from} ORDER BY "${key}"`,
    );
    const rows = new Map<string, Record<string, string | null>>();
    for (const row of r.getRowObjects()) {
      const k = String(row[key]);
      if (rows.has(k)) throw new Error(`${glob}: ${key} ${k} twice`);
      rows.set(k, row as Record<string, string | null>);
    }
    return { rows, types };
  } finally {
    conn.closeSync();
  }
}

/**
 * Where two typed lakes of the same table differ in `columns`, row by row of `a` (one line per
 * differing value, values cut to 80 characters): empty when they agree.
 */
export function lakeDiffs(
  a: TypedLake,
  b: TypedLake,
  columns: readonly string[],
  names: { readonly key: string; readonly a: string; readonly b: string },
): string[] {
  const diffs: string[] = [];
  for (const [k, x] of a.rows) {
    const y = b.rows.get(k)!;
    for (const col of columns)
      if (x[col] !== y[col])
        diffs.push(
          `${names.key} ${k} ${col}: ${names.a} ${JSON.stringify(x[col])?.slice(0, 80)} != ${names.b} ${JSON.stringify(y[col])?.slice(0, 80)}`,
        );
  }
  return diffs;
}
