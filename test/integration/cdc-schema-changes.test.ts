/**
 * Schema changes never strand a CDC source (issue 28, trap 6), through the real CLI on the
 * harness's PostgreSQL and MariaDB:
 * - a property over the column types of both databases: columns of the drawn types added (at
 *   drawn places) while `tidemark cdc` runs, a row written after them, a clean stop (SIGTERM) and
 *   a plain restart: the restart resumes with no SCHEMA_CHANGED, captures a row written after it,
 *   and the lake holds both rows with a value in every added column. The first run adds every
 *   type of the list at once; a few more draw small sets.
 * - a stopping change (DROP COLUMN) stops the capture; `tidemark schema accept` on the cdc table
 *   is refused while a task holds the source's lease, records the schema once it has stopped,
 *   and the next `tidemark cdc` resumes with the lake exact (DuckDB, `union_by_name`): the
 *   dropped column keeps its values in the objects written before the drop and is NULL after.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import type mysql from 'mysql2/promise';
import type postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCdcState } from '../../shared/engine/cdc/state.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { type FreshDatabase, freshMysqlDatabase } from '../harness/mysql.js';
import { mysqlClient } from '../harness/mysql-cdc.js';
import { freshPgDatabase } from '../harness/pg.js';
import { lakeLatest, pgClient, waitForActiveSlot } from '../harness/pg-cdc.js';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'tidemark.js');
/** Server ids of this file's binlog dumps: distinct from other files' and the server's own. */
let nextServerId = 9000 + Math.floor(Math.random() * 100_000) * 10;
const STATE_KEY = 'cdc#p#src';
const TIMEOUT = 120_000;

/** A column type to add: its DDL and a literal of a value for the row written after it. */
interface TypeCase {
  readonly ddl: string;
  readonly value: string;
}

const MARIADB_TYPES: readonly TypeCase[] = [
  { ddl: 'TINYINT', value: '-7' },
  { ddl: 'TINYINT UNSIGNED', value: '250' },
  { ddl: 'TINYINT(1)', value: '1' },
  { ddl: 'BOOL', value: 'TRUE' },
  { ddl: 'SMALLINT', value: '-300' },
  { ddl: 'SMALLINT UNSIGNED', value: '65000' },
  { ddl: 'MEDIUMINT', value: '-70000' },
  { ddl: 'MEDIUMINT UNSIGNED', value: '16000000' },
  { ddl: 'INT', value: '42' },
  { ddl: 'INT NOT NULL DEFAULT 0', value: '43' },
  { ddl: 'INT(5) ZEROFILL', value: '44' },
  { ddl: 'INT UNSIGNED', value: '4000000000' },
  { ddl: 'BIGINT', value: '-9000000000' },
  { ddl: 'BIGINT UNSIGNED', value: '18000000000000000000' },
  { ddl: 'DECIMAL(10,2)', value: '12345.67' },
  { ddl: 'DECIMAL(12,0) UNSIGNED', value: '123456789012' },
  { ddl: 'DECIMAL(50,10)', value: '1.5' },
  { ddl: 'FLOAT', value: '1.5' },
  { ddl: 'FLOAT(7,3)', value: '1234.5' },
  { ddl: 'DOUBLE', value: '2.25' },
  { ddl: 'DOUBLE(10,2)', value: '3.75' },
  { ddl: 'BIT(1)', value: "b'1'" },
  { ddl: 'BIT(12)', value: "b'101010101010'" },
  { ddl: 'YEAR', value: '2024' },
  { ddl: 'DATE', value: "'2024-02-29'" },
  { ddl: 'DATETIME', value: "'2024-02-29 12:34:56'" },
  { ddl: 'DATETIME(6)', value: "'2024-02-29 12:34:56.123456'" },
  { ddl: 'TIMESTAMP NULL', value: "'2024-02-29 12:34:56'" },
  { ddl: 'TIMESTAMP(3) NULL', value: "'2024-02-29 12:34:56.789'" },
  { ddl: 'TIME', value: "'-12:34:56'" },
  { ddl: 'TIME(6)', value: "'12:34:56.5'" },
  { ddl: 'CHAR(3)', value: "'abc'" },
  { ddl: 'VARCHAR(40)', value: "'héllo'" },
  { ddl: 'VARCHAR(40) CHARACTER SET latin1', value: "'latin'" },
  { ddl: 'TINYTEXT', value: "'t'" },
  { ddl: 'TEXT', value: "'text'" },
  { ddl: 'MEDIUMTEXT', value: "'medium'" },
  { ddl: 'LONGTEXT', value: "'long'" },
  { ddl: 'BINARY(4)', value: "x'01020304'" },
  { ddl: 'VARBINARY(20)', value: "x'0a0b'" },
  { ddl: 'TINYBLOB', value: "x'ff'" },
  { ddl: 'BLOB', value: "x'00ff'" },
  { ddl: 'MEDIUMBLOB', value: "x'abcd'" },
  { ddl: 'LONGBLOB', value: "x'beef'" },
  { ddl: "ENUM('a','b','c')", value: "'b'" },
  { ddl: "SET('x','y','z')", value: "'x,z'" },
  { ddl: 'JSON', value: `'{"a": [1, 2]}'` },
  { ddl: 'UUID', value: "'123e4567-e89b-12d3-a456-426614174000'" },
  { ddl: 'INET4', value: "'10.0.0.1'" },
  { ddl: 'INET6', value: "'2001:db8::1'" },
];

const POSTGRES_TYPES: readonly TypeCase[] = [
  { ddl: 'smallint', value: '-7' },
  { ddl: 'integer', value: '42' },
  { ddl: 'integer NOT NULL DEFAULT 0', value: '43' },
  { ddl: 'bigint', value: '-9000000000' },
  { ddl: 'numeric(10,2)', value: '12345.67' },
  { ddl: 'numeric', value: '1.5' },
  { ddl: 'real', value: '1.5' },
  { ddl: 'double precision', value: '2.25' },
  { ddl: 'boolean', value: 'true' },
  { ddl: 'text', value: "'text'" },
  { ddl: 'varchar(40)', value: "'héllo'" },
  { ddl: 'char(3)', value: "'abc'" },
  { ddl: 'bytea', value: "'\\x00ff'" },
  { ddl: 'uuid', value: "'123e4567-e89b-12d3-a456-426614174000'" },
  { ddl: 'json', value: `'{"a": [1, 2]}'` },
  { ddl: 'jsonb', value: `'{"a": [1, 2]}'` },
  { ddl: 'date', value: "'2024-02-29'" },
  { ddl: 'timestamp', value: "'2024-02-29 12:34:56.123456'" },
  { ddl: 'timestamptz', value: "'2024-02-29 12:34:56+02'" },
  { ddl: 'time', value: "'12:34:56'" },
  { ddl: 'timetz', value: "'12:34:56+02'" },
  { ddl: 'interval', value: "'1 day 2 hours'" },
  { ddl: 'integer[]', value: "'{1,2,NULL}'" },
  { ddl: 'text[]', value: `'{"a","b"}'` },
  { ddl: 'numeric(8,3)[]', value: "'{1.5}'" },
  { ddl: 'inet', value: "'10.0.0.1'" },
  { ddl: 'money', value: '12.34' },
  { ddl: 'int[][]', value: "'{{1,2},{3,4}}'" },
];

/** A running `tidemark cdc` child process. */
interface CdcProcess {
  readonly child: ChildProcess;
  stderr(): string;
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
}

const children = new Set<ChildProcess>();

function startCdc(dir: string, specFile: string): CdcProcess {
  const child = spawn(process.execPath, [BIN, 'cdc', '-c', specFile], {
    cwd: dir,
    env: { ...process.env, TIDEMARK_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (t: string) => {
    stderr += t;
  });
  child.stdout!.resume();
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.once('close', (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    }),
  );
  return { child, stderr: () => stderr, exited };
}

/** Stops a capture the way ECS does (SIGTERM drains) and waits for it to exit. */
async function stopCdc(p: CdcProcess): Promise<{ code: number | null; signal: string | null }> {
  if (p.child.exitCode === null) p.child.kill('SIGTERM');
  return p.exited;
}

/** Runs a one-shot CLI command to its end. */
async function cli(
  dir: string,
  args: readonly string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (t: string) => {
    stdout += t;
  });
  child.stderr!.setEncoding('utf8').on('data', (t: string) => {
    stderr += t;
  });
  const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
  children.delete(child);
  return { code, stdout, stderr };
}

/** Rows the CDC state says were committed for `target` (0 before the table's first flush). */
async function committedRows(dir: string, target: string): Promise<number> {
  const v = (await new FileCursorStore(join(dir, 'state')).load(STATE_KEY)).value;
  return v === undefined ? 0 : (parseCdcState(v).tables[target]?.rows ?? 0);
}

/** Polls `ok` every 200 ms; fails with the capture's stderr when it exits first or time runs out. */
async function until(p: CdcProcess, what: string, ok: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await ok())) {
    if (p.child.exitCode !== null)
      throw new Error(`tidemark cdc exited (${p.child.exitCode}) before ${what}:\n${p.stderr()}`);
    if (Date.now() > deadline)
      throw new Error(`tidemark cdc did not reach "${what}" in ${ms} ms:\n${p.stderr()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A database's side of the scenarios. */
interface Db {
  readonly name: 'postgres' | 'mariadb';
  readonly types: readonly TypeCase[];
  /** `database.table` / `schema.table` of a table named `t`. */
  qualified(t: string): string;
  exec(statement: string): Promise<void>;
  rows(statement: string): Promise<Record<string, unknown>[]>;
  /** The spec's source (a fresh slot / server id for each spec). */
  source(tag: string): Record<string, unknown>;
  /** Waits until the capture streams (Postgres: its slot has a walsender). */
  streaming(tag: string): Promise<void>;
  /** Removes what a spec left at the server (Postgres: its slot and publication). */
  cleanUp(tag: string): Promise<void>;
  /** ADD COLUMN clauses: MariaDB places them anywhere; Postgres only at the end. */
  addColumn(name: string, ddl: string, place: number, existing: readonly string[]): string;
  quote(name: string): string;
}

let pg: FreshDatabase;
let my: FreshDatabase;
let pgSql: postgres.Sql;
let mySql: mysql.Connection;

beforeAll(async () => {
  [pg, my] = await Promise.all([freshPgDatabase('cdcschema'), freshMysqlDatabase('cdcschema')]);
  pgSql = pgClient(pg.url);
  mySql = await mysqlClient(my.url);
}, TIMEOUT);

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await pgSql?.end();
  await mySql?.end();
  await Promise.all([pg?.drop(), my?.drop()]);
}, TIMEOUT);

function postgresDb(): Db {
  return {
    name: 'postgres',
    types: POSTGRES_TYPES,
    qualified: (t) => `public.${t}`,
    exec: async (s) => {
      await pgSql.unsafe(s);
    },
    rows: async (s) => (await pgSql.unsafe(s)) as unknown as Record<string, unknown>[],
    source: (tag) => ({
      kind: 'postgres',
      url: pg.url,
      cdc: {
        slot: `tm_${tag}`,
        publication: `tm_${tag}`,
        heartbeatSeconds: 1,
        flushSeconds: 1,
        idleCommitSeconds: 1,
      },
    }),
    streaming: (tag) => waitForActiveSlot(pgSql, `tm_${tag}`),
    cleanUp: async (tag) => {
      await pgSql`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ${`tm_${tag}`} AND NOT active`;
      await pgSql.unsafe(`DROP PUBLICATION IF EXISTS tm_${tag}`);
    },
    addColumn: (name, ddl) => `ADD COLUMN ${name} ${ddl}`,
    quote: (n) => `"${n}"`,
  };
}

function mariadbDb(): Db {
  return {
    name: 'mariadb',
    types: MARIADB_TYPES,
    qualified: (t) => `${my.name}.${t}`,
    exec: async (s) => {
      await mySql.query(s);
    },
    rows: async (s) => (await mySql.query(s))[0] as Record<string, unknown>[],
    source: () => ({
      kind: 'mysql',
      url: my.url,
      cdc: { serverId: nextServerId++, heartbeatSeconds: 1, flushSeconds: 1, idleCommitSeconds: 1 },
    }),
    streaming: async () => undefined,
    cleanUp: async () => undefined,
    addColumn: (name, ddl, place, existing) => {
      const where = place % (existing.length + 1);
      return `ADD COLUMN ${name} ${ddl} ${where === 0 ? 'FIRST' : `AFTER ${existing[where - 1]}`}`;
    },
    quote: (n) => `\`${n}\``,
  };
}

let tableNo = 0;

/** A spec capturing one table of `db` into a new temp dir. */
function specFor(db: Db, table: string, tag: string): { dir: string; specFile: string } {
  const dir = mkdtempSync(join(tmpdir(), `tidemark-cdcschema-${db.name}-`));
  const specFile = join(dir, 'spec.json');
  writeFileSync(
    specFile,
    JSON.stringify({
      pipeline: 'p',
      sources: { src: db.source(tag) },
      tables: [
        { source: 'src', table: db.qualified(table), mode: 'cdc', snapshot: 'never', writeMode: 'upsert' },
      ],
      state: { dir: join(dir, 'state') },
      lake: { uri: `file://${join(dir, 'lake')}` },
    }),
  );
  return { dir, specFile };
}

/**
 * Starts `tidemark cdc` and waits until it captures: rows are inserted (ids from 1) until one is
 * committed, so a change made next is captured whatever the start position is.
 */
async function startCapturing(
  db: Db,
  dir: string,
  specFile: string,
  table: string,
  tag: string,
): Promise<CdcProcess> {
  const p = startCdc(dir, specFile);
  const target = db.qualified(table);
  await until(
    p,
    'the state is written',
    async () => (await new FileCursorStore(join(dir, 'state')).load(STATE_KEY)).value !== undefined,
  );
  await db.streaming(tag);
  let id = 1;
  await until(p, 'the first row is committed', async () => {
    if ((await committedRows(dir, target)) > 0) return true;
    await db.exec(`INSERT INTO ${table} (id, v) VALUES (${id++}, 'before')`);
    return false;
  });
  return p;
}

/** Inserts a row and waits until the capture committed it. */
async function writeAndWait(
  db: Db,
  p: CdcProcess,
  dir: string,
  table: string,
  insert: string,
): Promise<void> {
  const target = db.qualified(table);
  const before = await committedRows(dir, target);
  await db.exec(insert);
  await until(
    p,
    `the row of "${insert}" is committed`,
    async () => (await committedRows(dir, target)) > before,
  );
}

/** Added columns, their type cases and places. */
const addedArb = (types: readonly TypeCase[]) =>
  fc.uniqueArray(fc.record({ type: fc.integer({ min: 0, max: types.length - 1 }), place: fc.nat(8) }), {
    minLength: 1,
    maxLength: 3,
    selector: (a) => a.type,
  });

async function addedColumnsResume(db: Db, added: readonly { type: number; place: number }[]): Promise<void> {
  const n = ++tableNo;
  const table = `t${n}`;
  const tag = `cdcschema_${process.pid}_${n}`;
  await db.exec(`CREATE TABLE ${table} (id int PRIMARY KEY, v varchar(20))`);
  const { dir, specFile } = specFor(db, table, tag);
  const target = db.qualified(table);
  try {
    const first = await startCapturing(db, dir, specFile, table, tag);
    const existing = ['id', 'v'];
    const cols = added.map((a, i) => ({ name: `c${i}`, ...db.types[a.type]!, place: a.place }));
    const clauses = cols.map((c) => {
      const clause = db.addColumn(c.name, c.ddl, c.place, existing);
      existing.push(c.name);
      return clause;
    });
    await db.exec(`ALTER TABLE ${table} ${clauses.join(', ')}`);
    const names = cols.map((c) => c.name);
    await writeAndWait(
      db,
      first,
      dir,
      table,
      `INSERT INTO ${table} (id, v, ${names.join(', ')}) VALUES (1000, 'after', ${cols.map((c) => c.value).join(', ')})`,
    );
    expect(await stopCdc(first), first.stderr()).toEqual({ code: 0, signal: null });

    // A plain restart: nothing changed while it was down.
    const second = startCdc(dir, specFile);
    await db.streaming(tag);
    await writeAndWait(
      db,
      second,
      dir,
      table,
      `INSERT INTO ${table} (id, v, ${names.join(', ')}) VALUES (2000, 'restarted', ${cols.map((c) => c.value).join(', ')})`,
    );
    const end = await stopCdc(second);
    expect(second.stderr(), `${cols.map((c) => c.ddl).join(', ')}`).not.toContain('SCHEMA_CHANGED');
    expect(end, second.stderr()).toEqual({ code: 0, signal: null });

    const lake = await lakeLatest(dir, target, 'id', ['v', ...names]);
    for (const id of ['1000', '2000']) {
      const row = lake.get(id);
      expect(row, `row ${id} in the lake`).toBeDefined();
      for (const c of cols) expect(row![c.name], `${c.ddl} of row ${id}`).not.toBeNull();
    }
  } finally {
    await db.cleanUp(tag);
  }
}

/**
 * A dropped column stops the capture; accept is refused while a task runs, records the schema
 * once it stopped, and the restart resumes with the lake exact.
 */
async function droppedColumnAccepted(db: Db): Promise<void> {
  const n = ++tableNo;
  const table = `d${n}`;
  const tag = `cdcschema_${process.pid}_${n}`;
  const target = db.qualified(table);
  await db.exec(`CREATE TABLE ${table} (id int PRIMARY KEY, v varchar(20), legacy varchar(20))`);
  const { dir, specFile } = specFor(db, table, tag);
  try {
    const first = await startCapturing(db, dir, specFile, table, tag);
    await writeAndWait(
      db,
      first,
      dir,
      table,
      `INSERT INTO ${table} (id, v, legacy) VALUES (100, 'a', 'L100'), (101, 'b', 'L101'), (102, 'c', 'L102')`,
    );

    // Accept while the capture holds the source's lease: refused, with the fix.
    const held = await cli(dir, ['schema', 'accept', '-c', specFile, '--table', target]);
    expect(held.code, held.stdout + held.stderr).not.toBe(0);
    // (The harness's password is "tidemark", so printed text shows the word as ***.)
    expect(held.stderr).toMatch(
      /holds cdc#p#src [\s\S]*its schema was not changed[\s\S]*stop that task first/,
    );

    await db.exec(`ALTER TABLE ${table} DROP COLUMN legacy`);
    await db.exec(`INSERT INTO ${table} (id, v) VALUES (103, 'd')`);
    await db.exec(`UPDATE ${table} SET v = 'a2' WHERE id = 100`);
    const stopped = await first.exited;
    expect(stopped.code, first.stderr()).not.toBe(0);
    expect(first.stderr()).toContain('SCHEMA_CHANGED');
    expect(first.stderr()).toContain('legacy');
    // Only ways on that work for a cdc table: no reset (it refuses cdc tables).
    expect(first.stderr()).toContain(`schema accept --table ${target}`);
    expect(first.stderr()).not.toMatch(/\breset\b/);

    // A plain restart stops again, at its start, with the same ways on.
    const again = startCdc(dir, specFile);
    const end = await again.exited;
    expect(end.code, again.stderr()).not.toBe(0);
    expect(again.stderr()).toContain('SCHEMA_CHANGED');
    expect(again.stderr()).toContain('legacy');
    expect(again.stderr()).toContain(`schema accept --table ${target}`);
    expect(again.stderr()).not.toMatch(/\breset\b/);

    const accepted = await cli(dir, ['schema', 'accept', '-c', specFile, '--table', target]);
    expect(accepted.code, accepted.stdout + accepted.stderr).toBe(0);
    expect(accepted.stdout).toMatch(/recorded schema version 2 \(was 1\)/);
    // A second accept finds nothing to do.
    const twice = await cli(dir, ['schema', 'accept', '-c', specFile, '--table', target]);
    expect(twice.code, twice.stdout + twice.stderr).toBe(0);
    expect(twice.stdout).toContain('nothing to accept');

    const resumed = startCdc(dir, specFile);
    await db.streaming(tag);
    await writeAndWait(db, resumed, dir, table, `INSERT INTO ${table} (id, v) VALUES (104, 'e')`);
    await until(resumed, 'every row is committed', async () => {
      const lake = await lakeLatest(dir, target, 'id', ['v']);
      return lake.get('103') !== undefined && lake.get('100')?.v === 'a2';
    });
    const done = await stopCdc(resumed);
    expect(resumed.stderr()).not.toContain('SCHEMA_CHANGED');
    expect(done, resumed.stderr()).toEqual({ code: 0, signal: null });

    // The lake is the table exactly; the dropped column has its values where they were written
    // before the drop, NULL in every row version written after it.
    const lake = await lakeLatest(dir, target, 'id', ['v', 'legacy']);
    const source = await db.rows(`SELECT id, v FROM ${table} ORDER BY id`);
    expect([...lake.values()].map((r) => [r.k, r.v]).sort()).toEqual(
      source.map((r) => [String(r.id), String(r.v)]).sort(),
    );
    expect(lake.get('101')?.legacy).toBe('L101');
    expect(lake.get('102')?.legacy).toBe('L102');
    for (const id of ['100', '103', '104']) expect(lake.get(id)?.legacy, `legacy of ${id}`).toBeNull();
  } finally {
    await db.cleanUp(tag);
  }
}

describe.each([
  ['postgres', postgresDb],
  ['mariadb', mariadbDb],
] as const)('%s cdc schema changes', (_name, make) => {
  it('a column of any type added while tidemark cdc runs: a clean stop and a plain restart resume, the lake holds the rows', {
    timeout: 900_000,
  }, async () => {
    const db = make();
    const all = db.types.map((_, type) => ({ type, place: type }));
    await fc.assert(
      fc.asyncProperty(addedArb(db.types), (added) => addedColumnsResume(db, added)),
      { numRuns: 3, examples: [[all]], endOnFailure: true },
    );
  });

  it('after DROP COLUMN stops the capture, schema accept and a restart resume it, the lake exact', {
    timeout: 300_000,
  }, async () => {
    await droppedColumnAccepted(make());
  });
});
