/**
 * A column added while `tidemark cdc` runs, then the process SIGKILLed (no drain), through the
 * real CLI on the harness PostgreSQL and MariaDB: the restart must resume, with the lake exact.
 *
 * The trap: another table's pending rows hold the committed position behind the table's rows
 * written before the ALTER. If only the altered table were flushed at the schema change, a
 * restart would replay those older rows under the old column list against the catalog's newer
 * one: "column dropped", a stopped source, and `schema accept` with nothing to accept. The
 * engine flushes every table at a schema change, so the committed position reaches the
 * transaction that carried the new columns. The kill lands after the schema change was
 * captured (its log line), before any flush of the default 60 s.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultCdcName } from '../../shared/config/spec.js';
import { CdcProcess } from '../harness/cdc-cli.js';
import { freshMysqlDatabase } from '../harness/mysql.js';
import { mysqlClient } from '../harness/mysql-cdc.js';
import { freshPgDatabase } from '../harness/pg.js';

const DEADLINE_MS = 90_000;
const cleanup: (() => Promise<unknown> | unknown)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c();
});

interface Db {
  readonly kind: 'postgres' | 'mysql';
  readonly url: string;
  /** `schema.` or `database.` prefix of the spec's table names. */
  readonly prefix: string;
  exec(sql: string): Promise<void>;
  /** `id|v|n` per row of `table`, sorted. */
  rows(table: string): Promise<string[]>;
}

async function open(kind: 'postgres' | 'mysql', pipeline: string): Promise<Db> {
  if (kind === 'postgres') {
    const db = await freshPgDatabase('schema_crash');
    const sql = postgres(db.url, { max: 1, onnotice: () => undefined });
    cleanup.push(async () => {
      await sql
        .unsafe(
          `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '${defaultCdcName(pipeline, 'db')}'`,
        )
        .catch(() => undefined);
      await sql.end();
      await db.drop();
    });
    return {
      kind,
      url: db.url,
      prefix: 'public',
      exec: async (q) => void (await sql.unsafe(q)),
      rows: async (t) =>
        (await sql.unsafe<{ r: string }[]>(`SELECT concat_ws('|', id, v, n) AS r FROM ${t} ORDER BY id`)).map(
          (x) => x.r,
        ),
    };
  }
  const db = await freshMysqlDatabase('schema_crash');
  const sql = await mysqlClient(db.url);
  cleanup.push(async () => {
    await sql.end();
    await db.drop();
  });
  return {
    kind,
    url: db.url,
    prefix: db.name,
    exec: async (q) => void (await sql.query(q)),
    rows: async (t) => {
      const [rows] = await sql.query(`SELECT concat_ws('|', id, v, n) AS r FROM ${t} ORDER BY id`);
      return (rows as { r: string }[]).map((x) => x.r);
    },
  };
}

function writeSpec(dir: string, db: Db, pipeline: string, flushSeconds: number): string {
  const cdc =
    db.kind === 'mysql'
      ? `{ serverId: ${5000 + Math.floor(Math.random() * 100_000)}, flushSeconds: ${flushSeconds} }`
      : `{ flushSeconds: ${flushSeconds} }`;
  const path = join(dir, `spec-${flushSeconds}.yaml`);
  const table = (t: string) =>
    `  - { source: db, table: ${db.prefix}.${t}, mode: cdc, writeMode: upsert, snapshot: never }`;
  writeFileSync(
    path,
    [
      `pipeline: ${pipeline}`,
      'sources:',
      `  db: { kind: ${db.kind}, url: "${db.url}", cdc: ${cdc} }`,
      `state: { dir: ${join(dir, 'state')} }`,
      `lake: { uri: "file://${join(dir, 'lake')}" }`,
      'tables:',
      table('a'),
      table('b'),
      '',
    ].join('\n'),
  );
  return path;
}

function capture(spec: string): CdcProcess {
  return new CdcProcess(spec, { cleanup: (fn) => cleanup.push(fn) });
}

async function waitFor(what: string, ok: () => boolean | Promise<boolean>, out: () => string): Promise<void> {
  const end = Date.now() + DEADLINE_MS;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`${what} did not happen in time:\n${out()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The latest version per id of a lake table (deletes dropped), as `id|v|n`, sorted by id. */
async function lakeRows(dir: string, target: string, withN: boolean): Promise<string[]> {
  const folder = join(dir, 'lake', target);
  const files = readdirSync(folder, { recursive: true })
    .map(String)
    .filter((f) => f.endsWith('.parquet'));
  if (files.length === 0) return [];
  const duck = await DuckDBInstance.create(':memory:');
  const conn = await duck.connect();
  try {
    const n = withN ? 'n' : 'NULL';
    const rows = (
      await conn.runAndReadAll(
        `SELECT concat_ws('|', id, v, ${n}) FROM (
           SELECT *, row_number() OVER (PARTITION BY id ORDER BY __pos DESC) AS rn
           FROM read_parquet('${folder}/**/*.parquet', union_by_name = true)) WHERE rn = 1 AND __op <> 'd' ORDER BY id`,
      )
    ).getRows();
    return rows.map((r) => String(r[0]));
  } finally {
    conn.closeSync();
    duck.closeSync();
  }
}

describe.each(['postgres', 'mysql'] as const)('%s: a column added, then a SIGKILL', (kind) => {
  it('resumes without SCHEMA_CHANGED, the lake exact', async () => {
    const pipeline = `schemacrash-${Math.random().toString(36).slice(2, 8)}`;
    const db = await open(kind, pipeline);
    const dir = mkdtempSync(join(tmpdir(), 'tidemark-schema-crash-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    await db.exec('CREATE TABLE a (id INT PRIMARY KEY, v INT NOT NULL)');
    await db.exec('CREATE TABLE b (id INT PRIMARY KEY, v INT NOT NULL, n INT)');
    const first = capture(writeSpec(dir, db, pipeline, 60));
    await first.waitForLine('"capturing"');
    // b's rows stay pending (60 s flush) and hold the position; a is written before and after
    // its ALTER.
    await db.exec('INSERT INTO b (id, v, n) VALUES (1, 1, 1)');
    await db.exec('INSERT INTO a (id, v) VALUES (1, 1), (2, 2)');
    await db.exec('ALTER TABLE a ADD COLUMN n INT');
    await db.exec('INSERT INTO a (id, v, n) VALUES (3, 3, 3)');
    await db.exec('UPDATE a SET n = 10 WHERE id = 1');
    await first.waitForLine('schema changed');
    // The point: the change was captured, nothing drained.
    await first.kill('SIGKILL');

    await db.exec('INSERT INTO a (id, v, n) VALUES (4, 4, 4)');
    await db.exec('INSERT INTO b (id, v, n) VALUES (2, 2, 2)');
    const second = capture(writeSpec(dir, db, pipeline, 1));
    const target = (t: string) => `${db.prefix}.${t}`;
    await waitFor(
      'the lake to hold every row',
      async () =>
        second.child.exitCode !== null ||
        ((await lakeRows(dir, target('a'), true).catch(() => [])).length === 4 &&
          (await lakeRows(dir, target('b'), true).catch(() => [])).length === 2),
      () => second.output,
    );
    expect(second.output).not.toContain('SCHEMA_CHANGED');
    expect(await second.kill('SIGTERM'), second.output).toBe(0);
    expect(await lakeRows(dir, target('a'), true)).toEqual(await db.rows('a'));
    expect(await lakeRows(dir, target('b'), true)).toEqual(await db.rows('b'));
  }, 300_000);
});
