/**
 * Helpers of the MySQL CDC tests (the twins of pg-cdc.ts): what every driver's capture shares
 * (./cdc-capture.ts: the spec, the capture in this process, the lake read back with DuckDB) with
 * MySQL's part: the binlog dump's server id a capture needs, the `binlog streaming` line a
 * capture must have logged before it counts as started, and a plain client.
 */
import mysql from 'mysql2/promise';
import type { Spec } from '../../shared/config/spec.js';
import type { Capture, CdcTableSpec } from './cdc-capture.js';
import { captureDir, cdcCaptureSpec, startCdcCapture } from './cdc-capture.js';

export type { Capture } from './cdc-capture.js';
export { lakeHas, lakeLatest, lakeRows, loadCdcState } from './cdc-capture.js';

/**
 * A spec capturing `tables` of the database at `url` into a temp dir. The binlog dump's server
 * id must be unique among the server's replicas: captures running at once each take their own.
 */
export function mysqlCdcSpec(
  url: string,
  serverId: number,
  tables: readonly CdcTableSpec[],
  cdc: Record<string, unknown> = {},
  dir = captureDir('tidemark-mycdc-'),
): { spec: Spec; dir: string } {
  return cdcCaptureSpec('mysql', url, tables, { serverId, ...cdc }, dir);
}

/**
 * Server ids for a test file's binlog dumps, from `base` plus a random multiple of 10 (so files
 * running at once on the shared server rarely meet), each distinct from the last and from the
 * server's own (1).
 */
export function serverIds(base: number): () => number {
  let next = base + Math.floor(Math.random() * 100_000) * 10;
  return () => next++;
}

/**
 * Runs the spec's capture in this process. `until` first waits for the binlog dump to stream
 * (the reader logs `binlog streaming` once zongji is ready).
 */
export function startMysqlCapture(spec: Spec): Capture {
  return startCdcCapture(spec, async (logs) => logs.some((l) => l.includes('binlog streaming')));
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
