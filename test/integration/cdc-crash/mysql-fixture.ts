/**
 * The MySQL CDC crash fixture (issue 13): a transactional workload (two writers running
 * multi-statement transactions of inserts, updates and deletes over accounts, orders and events,
 * primary-key changes among them, about a fifth of them rolled back) in a fresh database on the
 * harness MariaDB, the child test/harness/mysql-cdc-child.ts with a dump server id of its own,
 * and the source's truth.
 *
 * MySQL keeps no replica position on the server, so "the source is never confirmed past what is
 * durable" is checked on what a child resumes from and on what it acks:
 *   - after every kill the committed state position (file index, offset) never moved backwards
 *     (nor from what the child read at its kill), is at or before the binlog end (SHOW MASTER
 *     STATUS) and its GTID is one the server has;
 *   - every `setConfirmed` the engine calls is compared in the child with the committed state;
 *     one past it is written to `<dir>/violations`, which must stay empty.
 * At the end, with DuckDB over the lake's files: each (key, __pos) is in the lake once, and no row
 * a rolled-back transaction wrote (ids >= 1,000,000, the balance -999999, the note or kind
 * 'ROLLED_BACK') is in any lake version. Then each table against the source, exactly (every
 * column): plain tables by their latest version per key (max __pos, deletes applied); Iceberg
 * tables, current states (decision 0026), read as they are, with no dedupe, by pyiceberg, icebird
 * and Spark (when the suite has a session): no `__op = d` row, one row per key, equal to the
 * source's rows; and each table's history table (`<table>_history`) by its current snapshot's data
 * files: no delete file, partitioned by day(__commit_ts), and the plain tables' checks (each (key,
 * __pos) once, no rolled-back row, the latest version per key equal to the source: the same code).
 * TIDEMARK_MYCRASH_KEEP=1 keeps each run's directory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import type mysql from 'mysql2/promise';
import { gtidWentBack } from '../../../shared/drivers/mysql/cdc/failover.js';
import { CRASH_RENEW_EVERY_MS, type CrashMutation } from '../../harness/cdc-crash-config.js';
import { checkCurrentState, checkSampledSnapshots } from '../../harness/current-state-read.js';
import { historyScan, lakeScan, type TestTableFormat } from '../../harness/lake-scan.js';
import { type FreshDatabase, freshMysqlDatabase } from '../../harness/mysql.js';
import { mysqlClient } from '../../harness/mysql-cdc.js';
import {
  compareBinlog,
  MY_TABLES,
  type MyChildConfig,
  type MyTable,
} from '../../harness/mysql-cdc-crash-config.js';
import type { SparkSession } from '../../harness/readers.js';
import {
  AFTER_COMMIT_KILLS,
  AFTER_WRITE_KILLS,
  type CrashFixture,
  type CrashSource,
  icebergVariant,
  onCleanup,
  readLines,
} from './scenarios.js';

/** Longest a child may take to reach its kill point (start, introspect, stream, a few renewals). */
const CHILD_DEADLINE_MS = 60_000 + 30 * CRASH_RENEW_EVERY_MS;
/** Ids at or above this are only ever written by transactions that roll back. */
export const ROLLED_BACK_IDS = 1_000_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const randInt = (n: number) => 1 + Math.floor(Math.random() * n);
/** A dump server id of this file's own (distinct from the server's and other files'). */
let nextServerId = 7000 + Math.floor(Math.random() * 100_000) * 10;

const KEYS: Record<MyTable, string> = { accounts: 'id', orders: 'id', events: 'id' };
const COLUMNS: Record<MyTable, readonly string[]> = {
  accounts: ['id', 'balance'],
  orders: ['id', 'account_id', 'amount', 'note'],
  events: ['id', 'kind', 'payload'],
};

/** A value a reader read as the source's CAST(... AS CHAR) text (decimals with the column's scale). */
function canon(column: string, v: unknown): string | null {
  if (v === null || v === undefined) return null;
  return column === 'amount' ? Number(v).toFixed(2) : String(v);
}

export const CREATE_TABLES = `CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
  CREATE TABLE orders (id int PRIMARY KEY, account_id int NOT NULL, amount decimal(12,2) NOT NULL, note varchar(40));
  CREATE TABLE events (id bigint AUTO_INCREMENT PRIMARY KEY, kind varchar(20) NOT NULL, payload varchar(100))`;

interface WriterStats {
  committed: number;
  rolledBack: number;
  /** Transactions the server aborted (deadlock, lock wait): nothing of them was committed. */
  aborted: number;
  statements: number;
}

/** The MySQL part of a pair: the binlog end after the kill. */
export interface BinlogPair {
  readonly binlogEnd: string;
}

export interface WorkloadFacts {
  readonly writer: WriterStats;
  readonly lakeRows: Record<string, number>;
  readonly sourceRows: Record<string, number>;
}

/** One statement of a committed transaction (never a rolled-back marker). */
function committedStatement(seq: number, maxEvent: number): string {
  const id = randInt(300);
  switch (randInt(10)) {
    case 1:
      return `INSERT INTO accounts (id, balance) VALUES (${id}, ${randInt(10_000)}) ON DUPLICATE KEY UPDATE balance = balance + ${randInt(50)}`;
    case 2:
      return `UPDATE accounts SET balance = balance - ${randInt(50)} WHERE id = ${id}`;
    case 3:
      return `DELETE FROM accounts WHERE id = ${randInt(300)}`;
    case 4:
      return `INSERT INTO orders (id, account_id, amount, note) VALUES (${randInt(600)}, ${id}, ${randInt(99_999) / 100}, 'o${seq}') ON DUPLICATE KEY UPDATE amount = amount + 1.25, note = 'r${seq}'`;
    case 5:
      return `UPDATE orders SET note = 'u${seq}', amount = amount + 0.5 WHERE id = ${randInt(600)}`;
    case 6:
      return `DELETE FROM orders WHERE id = ${randInt(600)}`;
    case 7:
    case 8:
      return `INSERT INTO events (kind, payload) VALUES ('k${randInt(5)}', 'p${seq}')`;
    case 9:
      return `DELETE FROM events WHERE id = ${randInt(Math.max(1, maxEvent))}`;
    default:
      // A primary-key change (the reader's delete + insert); IGNORE skips a taken key.
      return `UPDATE IGNORE orders SET id = ${randInt(600)} WHERE id = ${randInt(600)}`;
  }
}

/** One statement of a transaction that will roll back: each leaves a marker if it ever shows. */
function rolledBackStatement(seq: number, maxEvent: number): string {
  switch (randInt(6)) {
    case 1:
      return `INSERT INTO accounts (id, balance) VALUES (${ROLLED_BACK_IDS + seq * 10 + randInt(9)}, 1)`;
    case 2:
      return `UPDATE accounts SET balance = -999999 WHERE id = ${randInt(300)}`;
    case 3:
      return `INSERT INTO orders (id, account_id, amount, note) VALUES (${ROLLED_BACK_IDS + seq * 10 + randInt(9)}, 1, 1.00, 'ROLLED_BACK')`;
    case 4:
      return `UPDATE orders SET note = 'ROLLED_BACK' WHERE id = ${randInt(600)}`;
    case 5:
      return `INSERT INTO events (kind, payload) VALUES ('ROLLED_BACK', 'ROLLED_BACK')`;
    default:
      // A rolled-back delete: only the final equality can catch it.
      return `DELETE FROM events WHERE id = ${randInt(Math.max(1, maxEvent))}`;
  }
}

/** Two connections running transactions until stopped; about 20% of them roll back. */
async function startWriter(url: string): Promise<{ stop(): Promise<WriterStats> }> {
  const stats: WriterStats = { committed: 0, rolledBack: 0, aborted: 0, statements: 0 };
  let stopping = false;
  let failure: unknown;
  let seq = 0;
  let maxEvent = 0;
  const conns = await Promise.all([mysqlClient(url), mysqlClient(url)]);
  const loops = conns.map(async (c) => {
    while (!stopping && failure === undefined) {
      const rollback = Math.random() < 0.2;
      const n = 2 + randInt(5);
      try {
        await c.query('BEGIN');
        // Every rolled-back transaction writes at least one marker row first.
        if (rollback)
          await c.query(
            `INSERT INTO orders (id, account_id, amount, note) VALUES (${ROLLED_BACK_IDS + ++seq * 10}, 1, 1.00, 'ROLLED_BACK')`,
          );
        for (let i = 0; i < n; i++) {
          const s = ++seq;
          const text =
            rollback && i % 2 === 0 ? rolledBackStatement(s, maxEvent) : committedStatement(s, maxEvent);
          const [r] = await c.query(text);
          const insertId = (r as { insertId?: number }).insertId ?? 0;
          if (text.startsWith('INSERT INTO events') && insertId > maxEvent) maxEvent = insertId;
          stats.statements++;
        }
        if (rollback) {
          await c.query('ROLLBACK');
          stats.rolledBack++;
        } else {
          await c.query('COMMIT');
          stats.committed++;
        }
      } catch (e) {
        const errno = (e as { errno?: number }).errno;
        // Deadlock / lock wait timeout between the two writers: the server rolled it back.
        if (errno === 1213 || errno === 1205) {
          await c.query('ROLLBACK').catch(() => undefined);
          stats.aborted++;
        } else failure = e;
      }
      await sleep(5);
    }
  });
  return {
    async stop() {
      stopping = true;
      await Promise.all(loops);
      for (const c of conns) await c.end().catch(() => undefined);
      if (failure !== undefined) throw failure;
      return stats;
    },
  };
}

/** The binlog end (SHOW MASTER STATUS) as a position value, and the server's GTID position. */
async function binlogEnd(sql: mysql.Connection): Promise<{ value: string; gtid: string }> {
  const [rows] = await sql.query('SHOW MASTER STATUS');
  const r = (rows as { File: string; Position: number | string }[])[0]!;
  const [g] = await sql.query('SELECT @@GLOBAL.gtid_binlog_pos AS g');
  return {
    value: JSON.stringify({ file: r.File, pos: Number(r.Position), epoch: 0 }),
    gtid: String((g as { g: unknown }[])[0]?.g ?? ''),
  };
}

const display = (value: string | null | undefined): string => {
  if (!value) return String(value);
  const v = JSON.parse(value) as { file: string; pos: number; gtid?: string };
  return `${v.file}:${v.pos}${v.gtid ? ` (${v.gtid})` : ''}`;
};

async function openTransactional(
  mutation?: CrashMutation,
  tableFormat: TestTableFormat = 'plain',
  spark?: SparkSession,
): Promise<CrashSource<BinlogPair, WorkloadFacts>> {
  const db: FreshDatabase = await freshMysqlDatabase('mycrash');
  onCleanup(() => db.drop());
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-mycrash-'));
  if (process.env.TIDEMARK_MYCRASH_KEEP) process.stdout.write(`[mysql crash] keeping ${dir}\n`);
  else onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const sql = await mysqlClient(db.url);
  onCleanup(() => sql.end());
  await sql.query(CREATE_TABLES);

  const config: MyChildConfig = {
    dir,
    url: db.url,
    database: db.name,
    serverId: nextServerId++,
    ...(mutation ? { mutation } : {}),
    ...(tableFormat === 'iceberg' ? { tableFormat } : {}),
  };
  const stats: WriterStats = { committed: 0, rolledBack: 0, aborted: 0, statements: 0 };
  return {
    config,
    async captureStarted() {
      // The first child committed the binlog end at its start: everything after must arrive.
    },
    async afterKill(at, committed, committedAtKill) {
      const end = await binlogEnd(sql);
      const pair = { binlogEnd: end.value };
      const problems: string[] = [];
      if (committed === null) {
        // The first child committed a position before the first kill: it is never missing here.
        problems.push(`${at}: the state holds no position`);
        return { pair, problems };
      }
      if (committedAtKill !== null && compareBinlog(committed, committedAtKill) < 0)
        problems.push(
          `${at}: the state position went back from ${display(committedAtKill)} (at the kill) to ${display(committed)}`,
        );
      if (compareBinlog(committed, end.value, true) > 0)
        problems.push(
          `${at}: the state position ${display(committed)} is past the binlog end ${display(end.value)}`,
        );
      const storedGtid = (JSON.parse(committed) as { gtid?: string }).gtid ?? '';
      const wentBack = gtidWentBack(storedGtid, end.gtid);
      if (wentBack)
        problems.push(`${at}: the state's GTID ${storedGtid} is past the server's ${end.gtid} (${wentBack})`);
      return { pair, problems };
    },
    async startWorkload() {
      const writer = await startWriter(db.url);
      return {
        async stop() {
          const s = await writer.stop();
          stats.committed += s.committed;
          stats.rolledBack += s.rolledBack;
          stats.aborted += s.aborted;
          stats.statements += s.statements;
        },
      };
    },
    head: async () => (await binlogEnd(sql)).value,
    async finish(finalPos, lastCommitted) {
      const problems: string[] = [];
      if (finalPos && lastCommitted && compareBinlog(finalPos, lastCommitted) < 0)
        problems.push(
          `the clean child moved the state back from ${display(lastCommitted)} to ${display(finalPos)}`,
        );
      const violations = readLines(dir, 'violations');
      if (violations.length > 0)
        problems.push(
          `acked past the durable state position ${violations.length} times; the first: ${violations[0]}`,
        );
      if (stats.committed === 0 || stats.rolledBack === 0)
        problems.push(`the workload did not run: ${JSON.stringify(stats)}`);
      const checked = await checkLake(dir, db.name, sql, tableFormat, spark);
      problems.push(...checked.problems);
      return {
        problems,
        facts: { writer: stats, lakeRows: checked.lakeRows, sourceRows: checked.sourceRows },
      };
    },
  };
}

/**
 * Every version the lake rows `from` (a DuckDB FROM) hold of table `label`, once per (key, __pos),
 * and none a rolled-back transaction wrote (`markers`, a WHERE condition).
 */
async function versionProblems(
  conn: DuckDBConnection,
  label: string,
  from: string,
  key: string,
  markers: string,
): Promise<string[]> {
  const problems: string[] = [];
  const dup = Number(
    (
      await conn.runAndReadAll(`SELECT count(*) - count(DISTINCT ("${key}", __pos)) FROM ${from}`)
    ).getRows()[0]![0],
  );
  if (dup > 0) problems.push(`${label}: ${dup} duplicate (key, __pos) lake rows`);
  const rolled = Number(
    (await conn.runAndReadAll(`SELECT count(*) FROM ${from} WHERE ${markers}`)).getRows()[0]![0],
  );
  if (rolled > 0) problems.push(`${label}: ${rolled} lake versions were written by rolled-back transactions`);
  return problems;
}

/**
 * The latest version per key of the change rows `from` (max __pos; a key whose latest is a delete
 * is gone) against the source's rows `src` (key -> the columns' values as JSON), exactly: a plain
 * table's objects, or a history table's current snapshot.
 */
async function latestProblems(
  conn: DuckDBConnection,
  label: string,
  from: string,
  key: string,
  cols: readonly string[],
  src: ReadonlyMap<string, string>,
): Promise<string[]> {
  const problems: string[] = [];
  const latest = new Map<string, string>();
  const rows = (
    await conn.runAndReadAll(
      `SELECT ${cols.map((c) => `CAST("${c}" AS VARCHAR)`).join(', ')}, CAST(__op AS VARCHAR) FROM (
         SELECT *, row_number() OVER (PARTITION BY "${key}" ORDER BY __pos DESC) AS rn FROM ${from})
       WHERE rn = 1`,
    )
  ).getRows();
  for (const row of rows) {
    const op = String(row[cols.length]);
    if (op === 'd') continue;
    const values = row.slice(0, cols.length).map((v) => (v === null ? null : String(v)));
    latest.set(String(values[cols.indexOf(key)]), JSON.stringify(values));
  }
  let missing = 0;
  let wrong = 0;
  let extra = 0;
  const samples: string[] = [];
  for (const [k, v] of src) {
    const l = latest.get(k);
    if (l === undefined) missing++;
    else if (l !== v) {
      wrong++;
      if (samples.length < 3) samples.push(`${k}: lake ${l} source ${v}`);
    }
  }
  for (const k of latest.keys()) if (!src.has(k)) extra++;
  if (missing > 0) problems.push(`${label}: ${missing} source rows have no live latest lake version`);
  if (wrong > 0)
    problems.push(
      `${label}: ${wrong} rows' latest lake version differs from the source (${samples.join('; ')})`,
    );
  if (extra > 0) problems.push(`${label}: ${extra} keys are live in the lake but not in the source`);
  return problems;
}

/**
 * Every table against the source (plain: its latest lake version per key; Iceberg: its current
 * state as each reader reads it), duplicates and rolled-back rows in every lake version.
 */
export async function checkLake(
  dir: string,
  database: string,
  sql: mysql.Connection,
  tableFormat: TestTableFormat = 'plain',
  spark?: SparkSession,
): Promise<{ problems: string[]; lakeRows: Record<string, number>; sourceRows: Record<string, number> }> {
  const problems: string[] = [];
  const lakeRows: Record<string, number> = {};
  const sourceRows: Record<string, number> = {};
  const duck = await DuckDBInstance.create(':memory:');
  const conn = await duck.connect();
  const markers: Record<MyTable, string> = {
    accounts: `id >= ${ROLLED_BACK_IDS} OR balance = -999999`,
    orders: `id >= ${ROLLED_BACK_IDS} OR note = 'ROLLED_BACK'`,
    events: `kind = 'ROLLED_BACK' OR payload = 'ROLLED_BACK'`,
  };
  try {
    for (const t of MY_TABLES) {
      const key = KEYS[t];
      const cols = COLUMNS[t];
      const [srcRaw] = await sql.query(
        `SELECT ${cols.map((c) => `CAST(\`${c}\` AS CHAR) AS \`${c}\``).join(', ')} FROM \`${t}\``,
      );
      const src = new Map<string, string>();
      for (const r of srcRaw as Record<string, string | null>[])
        src.set(String(r[key]), JSON.stringify(cols.map((c) => r[c])));
      sourceRows[t] = src.size;
      const [bad] = await sql.query(`SELECT count(*) AS n FROM \`${t}\` WHERE ${markers[t]}`);
      if (Number((bad as { n: unknown }[])[0]!.n) > 0)
        problems.push(`${t}: the source holds rolled-back markers`);

      // Every object (plain), or an Iceberg table's current snapshot as pyiceberg plans its scan
      // (its data files: every version the table ever held, rows its deletes removed included).
      const tableDir = join(dir, 'lake', `${database}.${t}`);
      const scan = await lakeScan(tableDir, tableFormat);
      problems.push(...scan.problems.map((p) => `${t}: ${p}`));
      if (scan.from === undefined) {
        lakeRows[t] = 0;
        if (src.size > 0) problems.push(`${t}: the lake has no files, the source ${src.size} rows`);
        continue;
      }
      lakeRows[t] = Number((await conn.runAndReadAll(`SELECT count(*) FROM ${scan.from}`)).getRows()[0]![0]);
      problems.push(...(await versionProblems(conn, t, scan.from, key, markers[t])));

      if (tableFormat === 'iceberg') {
        // A current state, read as it is: one row per key, equal to the source (no dedupe).
        const checked = await checkCurrentState(
          t,
          tableDir,
          { key, columns: cols, rows: new Map([...src].map(([k, v]) => [k, JSON.parse(v)])), canon },
          spark,
        );
        problems.push(...checked.problems);
        // Earlier snapshots, sampled: each the shape of a current state (the source's state then
        // is not known here).
        problems.push(...(await checkSampledSnapshots(t, tableDir, key)).problems);
        lakeRows[t] = checked.rows;
        // Its history: every committed change once, none rolled back, and its latest version
        // per key is the source's row (as a plain table's is).
        const h = `${t}_history`;
        const history = await historyScan(join(dir, 'lake', `${database}.${h}`));
        problems.push(...history.problems.map((p) => `${h}: ${p}`));
        if (history.from === undefined) {
          if (src.size > 0) problems.push(`${h}: the lake has no files, the source ${src.size} rows`);
          continue;
        }
        lakeRows[h] = Number(
          (await conn.runAndReadAll(`SELECT count(*) FROM ${history.from}`)).getRows()[0]![0],
        );
        problems.push(...(await versionProblems(conn, h, history.from, key, markers[t])));
        problems.push(...(await latestProblems(conn, h, history.from, key, cols, src)));
        continue;
      }
      problems.push(...(await latestProblems(conn, t, scan.from, key, cols, src)));
    }
    if (Object.values(lakeRows).reduce((a, b) => a + b, 0) === 0) problems.push('the lake is empty');
    return { problems, lakeRows, sourceRows };
  } finally {
    conn.closeSync();
  }
}

export const mysqlCrashFixture: CrashFixture<BinlogPair, WorkloadFacts> = {
  tag: 'mysql crash',
  child: 'test/harness/mysql-cdc-child.ts',
  title:
    'ends with the source rows, duplicates none, shows no rolled-back row; the position never moves back nor is acked past the durable state',
  childDeadlineMs: CHILD_DEADLINE_MS,
  cleanChildDeadlineMs: 3 * CHILD_DEADLINE_MS,
  headName: 'binlog end',
  compare: (a, b) => compareBinlog(a, b),
  // SHOW MASTER STATUS has no epoch: by (file index, offset) alone.
  reached: (pos, head) => compareBinlog(pos, head, true) >= 0,
  display,
  showPair: (p) => ({ ...p, committed: display(p.committed), binlogEnd: display(p.binlogEnd) }),
  report: (o) =>
    `writer ${JSON.stringify(o.facts.writer)}, lake rows ${JSON.stringify(o.facts.lakeRows)}, source rows ${JSON.stringify(o.facts.sourceRows)}, committed positions:\n${o.pairs
      .map(
        (p) =>
          `  ${p.generation} ${p.point}#${p.nth}: ${display(p.committed)} <= end ${display(p.binlogEnd)}`,
      )
      .join('\n')}`,
  // Each mutant is detected by the check that guards the step it breaks.
  mutants: {
    // A crashed attempt's objects are not removed: its rows are in the lake twice.
    'noop-recover': { kills: AFTER_WRITE_KILLS, detectedBy: /duplicate \(key, __pos\)/ },
    // The durability order reversed (state committed before the object is written): a kill
    // after the commit loses the page.
    'commit-before-write': {
      kills: AFTER_COMMIT_KILLS,
      detectedBy:
        /have no live latest lake version|differs from the source|live in the lake but not in the source/,
    },
    // The ack moves before the state commit. MySQL keeps no replica position, so the server
    // never shows it (and no row is lost by it): only the reader-interface check sees it.
    'ack-before-commit': {
      kills: [
        { point: 'before-write', nth: 2 },
        { point: 'after-write', nth: 2 },
      ],
      detectedBy: /acked past the durable state position/,
    },
  },
  open: openTransactional,
};

/**
 * The same transactional workload with Iceberg tables (docs/decisions/0024-iceberg-commits.md):
 * the tables read as their current snapshots, 20 kills over the protocol points and the one
 * between the catalog commit and the ack.
 */
export const mysqlIcebergCrashFixture: CrashFixture<BinlogPair, WorkloadFacts> = icebergVariant(
  mysqlCrashFixture,
  {
    // Recovery disabled: a kill between the state commit and the catalog commit loses that
    // commit's rows from the table.
    'noop-recover': {
      kills: AFTER_COMMIT_KILLS,
      detectedBy: /have no lake row|differ from the source|in the lake but not in the source/,
    },
    // Catalog first, with delete-from-`next` recovery: the snapshot's files deleted (or written twice).
    'catalog-first': {
      kills: AFTER_WRITE_KILLS,
      detectedBy: /is gone|cannot be read|duplicate \(key, __pos\)|more than one row/,
    },
  },
);
