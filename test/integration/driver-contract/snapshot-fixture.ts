/**
 * What the snapshot contract scenarios (snapshot-scenarios.ts) need of a database, so the same
 * assertions on a SnapshotSource's TableChunker (bounds and chunks partition a table in the
 * database's key order, a chunk equals an incremental page of the same rows, a table without a
 * primary key is refused) run against PostgreSQL and MariaDB. Each driver's fixture
 * (postgres-snapshot-fixture.ts, mysql-snapshot-fixture.ts) owns the CDC source it opens
 * chunkers from, its key cases (collations whose order is not JavaScript's), and what differs:
 * the window calls a chunk read makes (Postgres low and high watermarks; MariaDB a high one at
 * its snapshot's binlog position) and the refusal's code. The window recorder and the table walk here are shared with
 * each driver's own snapshot tests.
 */
import { randomBytes } from 'node:crypto';
import { type RecordBatch, Table } from 'apache-arrow';
import type fc from 'fast-check';
import { expect } from 'vitest';
import type { SourcePosition } from '../../../shared/contracts/cdc.js';
import type { TidemarkError } from '../../../shared/contracts/errors.js';
import type { ChunkRows, ChunkWindow, TableChunker } from '../../../shared/contracts/snapshot.js';
import type { TableRef } from '../../../shared/contracts/source.js';
import type { Schema } from '../../../shared/dataplane/schema.js';
import type { DriverSource } from './fixture.js';

/** The test timeout of the snapshot tests (random tables, a reader running). */
export const T = { timeout: 180_000 };

/** One call a chunk read made on its window. */
export interface WindowCall {
  readonly kind: 'expect' | 'ready';
  readonly id?: string;
  readonly role?: 'low' | 'high';
  readonly at?: SourcePosition;
}

/** A window that records what the driver told it, in order. */
export interface RecordingWindow extends ChunkWindow {
  readonly calls: WindowCall[];
  /** The calls as text: `expect low <id>`, `ready`, `expect high <id>`. */
  readonly log: string[];
  /** The rows handed to `ready`; undefined until then. */
  rows: ChunkRows | undefined;
}

/** A window that records the driver's calls and registers each watermark with `reader`. */
export function recordingWindow(reader?: {
  expectWatermark?(id: string, at?: SourcePosition): void;
}): RecordingWindow {
  const w: RecordingWindow = {
    calls: [],
    log: [],
    rows: undefined,
    expect(id, role, at) {
      w.calls.push({ kind: 'expect', id, role, ...(at ? { at } : {}) });
      w.log.push(`expect ${role} ${id}`);
      reader?.expectWatermark?.(id, at);
    },
    ready(rows) {
      w.calls.push({ kind: 'ready' });
      w.log.push('ready');
      w.rows = rows;
    },
  };
  return w;
}

let windows = 0;
/** Watermark ids unique in this process (a Postgres watermark stays in the WAL). */
export function windowIds(): { low: string; high: string } {
  windows++;
  return { low: `w${windows}-low-${randomBytes(4).toString('hex')}`, high: `w${windows}-high` };
}

/** Column `name` of a record batch as JS values (objects as JSON). */
export function column(record: RecordBatch, name: string): unknown[] {
  const col = new Table(record).getChild(name);
  if (!col) throw new Error(`no column ${name}`);
  return [...col].map((v) => (v === null ? null : typeof v === 'object' ? JSON.stringify(v) : v));
}

/** A table's chunker, with the ref and schema it was opened on. */
export interface ChunkedTable {
  readonly ref: TableRef;
  readonly schema: Schema;
  readonly chunker: TableChunker;
}

/**
 * Reads the whole table the way the engine does: a bound `rows` past `after`, then the range
 * `(after, upTo]` in reads of at most `limit` rows (continuing after each read's lastKey while a
 * read came back full), then on from `upTo`. Returns each read's rows as `keyOf` renders them,
 * each range's bound and the lastKey of its last row.
 */
export async function readAll(
  t: { schema: Schema; chunker: TableChunker },
  rows: number,
  limit: number,
  keyOf: (record: RecordBatch, i: number) => string,
): Promise<{ chunks: string[][]; bounds: (string | undefined)[]; lastKeys: (string | undefined)[] }> {
  const chunks: string[][] = [];
  const bounds: (string | undefined)[] = [];
  const lastKeys: (string | undefined)[] = [];
  let after: string | undefined;
  for (let guard = 0; guard < 10_000; guard++) {
    const upTo = await t.chunker.nextBound(after, rows);
    bounds.push(upTo);
    let from = after;
    let inRange = 0;
    let lastKey: string | undefined;
    for (;;) {
      const w = recordingWindow();
      await t.chunker.read(
        {
          range: { ...(from ? { after: from } : {}), ...(upTo ? { upTo } : {}) },
          limit,
          schema: t.schema,
          writeMode: 'upsert',
        },
        w,
        windowIds(),
      );
      const r = w.rows!;
      const keys = r.batch
        ? Array.from({ length: r.batch.record.numRows }, (_, i) => keyOf(r.batch!.record, i))
        : [];
      expect(keys.length).toBe(r.rows);
      chunks.push(keys);
      inRange += r.rows;
      lastKey = r.lastKey ?? lastKey;
      if (r.rows < limit) break;
      from = r.lastKey;
    }
    lastKeys.push(lastKey);
    // A bound closes a range of exactly `rows` rows; the last range (no bound) holds fewer.
    if (upTo !== undefined) expect(inRange).toBe(rows);
    else expect(inRange).toBeLessThan(rows);
    if (upTo === undefined) return { chunks, bounds, lastKeys };
    after = upTo;
  }
  throw new Error('readAll did not end');
}

/** A primary key to chunk by: its table, and random key sets to fill it with. */
export interface KeyCase {
  /** The scenario's title. */
  readonly name: string;
  readonly table: string;
  readonly ddl: string;
  /** Key sets, each key the values of the key columns in order. */
  readonly keys: fc.Arbitrary<readonly (readonly unknown[])[]>;
  /** Empties the table and inserts a row per key (duplicates under the collation are dropped). */
  fill(keys: readonly (readonly unknown[])[]): Promise<void>;
  /** Rows per bound and the read limit. */
  readonly sizes: fc.Arbitrary<{ readonly rows: number; readonly limit: number }>;
  /** A fixed key set read first, whose database order `expectOrder` checks is not JavaScript's. */
  readonly fixed?: {
    readonly keys: readonly (readonly unknown[])[];
    readonly rows: number;
    readonly limit: number;
    expectOrder(dbOrder: readonly string[]): void;
  };
}

/**
 * One driver's side of the snapshot contract. Built when the test file loads (`keyCases` name
 * the scenarios); `setUp` makes the database and opens the CDC source and its snapshot source.
 */
export interface SnapshotFixture {
  readonly kind: 'postgres' | 'mysql';
  readonly keyCases: readonly KeyCase[];
  setUp(): Promise<void>;
  /** Where the test tables live: `${schema}.${table}`. */
  readonly schema: string;
  exec(sql: string): Promise<void>;
  query(sql: string): Promise<Record<string, unknown>[]>;
  /** Introspects `name` through the CDC source; its chunker comes from the file's snapshot source. */
  tableOf(name: string): Promise<ChunkedTable>;
  /** An incremental source on the same database, with the fixed clock; `drop` closes it. */
  incrementalSource(): DriverSource;
  /** How many times the incremental page is read again while the bound holds rows back (a shared server). */
  readonly pageRetries: number;
  /** A never-analyzed table has a row estimate (InnoDB's statistics always exist). */
  readonly estimatesUnanalyzed: boolean;
  /** Table `table` (id bigint key 1..rows): a chunk of it equals an incremental page. */
  readonly chunkPage: {
    readonly table: string;
    readonly ddl: string;
    readonly rows: number;
    /** Asserts the window calls of a read of the whole table with watermark ids `ids`. */
    expectWindow(w: RecordingWindow, ids: { low: string; high: string }): void;
  };
  /** Table `table` without a primary key, and how nextBound refuses it. */
  readonly noKey: {
    readonly table: string;
    readonly ddl: string;
    readonly error: abstract new (...args: never[]) => TidemarkError;
    readonly code: string;
    readonly says: readonly RegExp[];
  };
  drop(): Promise<void>;
}
