/**
 * What the incremental engine tests need of a source database, so the same scenarios (ties, late
 * commit, crash, overlap, deadline, bad input) run against PostgreSQL now and MySQL/MariaDB with
 * the next driver. Each fixture owns its dialect's SQL; the scenarios own the assertions.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import postgres from 'postgres';
import { parseSpec, type Spec } from '../../../shared/config/spec.js';
import { silentLogger } from '../../../shared/observability/log.js';
import { openPipeline } from '../../../shared/pipeline/open.js';
import { type RunTableOptions, runTable } from '../../../shared/pipeline/run-table.js';
import type { IncrementalSummary } from '../../../shared/engine/incremental-run.js';
import { freshPgDatabase, type FreshDatabase } from '../../harness/pg.js';

/** One row of the test table as both sides compare it. */
export interface TestRow {
  id: string;
  v: number;
  /** Microseconds since the epoch, as text (exact). */
  updatedAt: string;
}

export interface SourceFixture {
  readonly kind: 'postgres' | 'mysql';
  readonly url: string;
  /** `schema.table` of the test table. */
  readonly table: string;
  exec(sql: string): Promise<void>;
  /** Creates the test table: id bigint pk, v int, note text, updated_at (micro precision, indexed). */
  createTable(name?: string): Promise<void>;
  /** Inserts ids [from, to) with updated_at = the given SQL expression. */
  insertRange(from: number, to: number, updatedAtSql: string): Promise<void>;
  /** The table's rows, ordered by id. */
  rows(): Promise<TestRow[]>;
  /** A second session that can hold a transaction open. */
  session(): Promise<{ exec(sql: string): Promise<void>; close(): Promise<void> }>;
  drop(): Promise<void>;
}

export async function postgresFixture(prefix: string): Promise<SourceFixture> {
  const db: FreshDatabase = await freshPgDatabase(prefix);
  const sql = postgres(db.url, { max: 2, onnotice: () => {} });
  const table = 'public.items';
  return {
    kind: 'postgres',
    url: db.url,
    table,
    exec: async (s) => {
      await sql.unsafe(s);
    },
    async createTable(name = table) {
      await sql.unsafe(`CREATE TABLE ${name} (id bigint PRIMARY KEY, v int NOT NULL, note text, updated_at timestamptz NOT NULL);
                        CREATE INDEX ON ${name} (updated_at, id);`);
    },
    async insertRange(from, to, updatedAtSql) {
      await sql.unsafe(
        `INSERT INTO ${table} SELECT g, g % 1000, 'note ' || g, ${updatedAtSql} FROM generate_series(${from}, ${to - 1}) g`,
      );
    },
    async rows() {
      const r = await sql.unsafe<{ pk: string; v: number; u: string }[]>(
        `SELECT id::text AS pk, v, (extract(epoch FROM updated_at) * 1000000)::bigint::text AS u FROM ${table} ORDER BY id`,
      );
      return r.map((x) => ({ id: x.pk, v: x.v, updatedAt: x.u }));
    },
    async session() {
      const s = postgres(db.url, { max: 1, onnotice: () => {} });
      const reserved = await s.reserve();
      return {
        exec: async (q: string) => {
          await reserved.unsafe(q);
        },
        close: async () => {
          reserved.release();
          await s.end({ timeout: 1 });
        },
      };
    },
    async drop() {
      await sql.end({ timeout: 1 });
      await db.drop();
    },
  };
}

/** A local spec for one fixture table: file state, file lake in a fresh temp dir. */
export function localSpec(
  fx: SourceFixture,
  table: Partial<{ pageSize: number; lagSeconds: number; lagOnly: boolean; writeMode: 'append' | 'upsert'; cursor: string; table: string }> = {},
  url = fx.url,
): { spec: Spec; dir: string; lakeDir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-inc-'));
  const lakeDir = join(dir, 'lake');
  const spec = parseSpec({
    pipeline: 'test',
    sources: { db: { kind: fx.kind, url, connectTimeoutSeconds: 3 } },
    state: { dir: join(dir, 'state') },
    lake: { uri: `file://${lakeDir}` },
    tables: [
      {
        source: 'db',
        table: table.table ?? fx.table,
        mode: 'incremental',
        cursor: table.cursor ?? 'updated_at',
        writeMode: table.writeMode ?? 'append',
        pageSize: table.pageSize ?? 1000,
        lagSeconds: table.lagSeconds ?? 0,
        lagOnly: table.lagOnly ?? false,
      },
    ],
  });
  return { spec, dir, lakeDir };
}

/** Runs the spec's first table once through the same path as the CLI and the Lambda. */
export async function runOnce(spec: Spec, opts: Partial<RunTableOptions> = {}): Promise<IncrementalSummary> {
  const pipeline = await openPipeline(spec);
  try {
    return await runTable(spec, spec.tables[0]!, pipeline, { logger: silentLogger, ...opts });
  } finally {
    await pipeline.close();
  }
}

/** Every row version in a local lake table: (id, v, updated_at, __pos), read with DuckDB. */
export async function lakeRows(lakeDir: string, target: string): Promise<(TestRow & { pos: string })[]> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    const glob = join(lakeDir, target, '*.parquet');
    const files = (await conn.runAndReadAll(`SELECT count(*) FROM glob('${glob}')`)).getRows()[0]![0];
    if (Number(files) === 0) return [];
    const r = await conn.runAndReadAll(
      `SELECT CAST(id AS VARCHAR), v, CAST(epoch_us(updated_at) AS VARCHAR), __pos
       FROM read_parquet('${glob}') ORDER BY id, __pos`,
    );
    return r.getRows().map(([id, v, u, pos]) => ({ id: String(id), v: Number(v), updatedAt: String(u), pos: String(pos) }));
  } finally {
    conn.closeSync();
  }
}

/** The latest version of each row by max(__pos), ordered by id: what a reader of the lake sees. */
export function latest(rows: (TestRow & { pos: string })[]): TestRow[] {
  const byId = new Map<string, TestRow & { pos: string }>();
  for (const r of rows) {
    const cur = byId.get(r.id);
    if (!cur || cur.pos < r.pos) byId.set(r.id, r);
  }
  return [...byId.values()]
    .sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1))
    .map(({ id, v, updatedAt }) => ({ id, v, updatedAt }));
}
