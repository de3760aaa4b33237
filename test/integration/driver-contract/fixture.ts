/**
 * What the driver contract scenarios (scenarios.ts) need of a database, so the same assertions
 * on an incremental source (introspection, keyset pages through both read paths, cursor kinds,
 * NULL cursors, the safe upper bound, refusals with their codes) run against PostgreSQL and
 * MySQL/MariaDB. Each driver's fixture (postgres-fixture.ts, mysql-fixture.ts) owns its SQL
 * dialect, how it inserts, and what it expects where the servers differ (type names, messages,
 * how a value reads); the scenarios own the assertions. The walk and refusal helpers here are
 * shared with the driver-only tests in each driver's test file.
 */
import { type RecordBatch, Table, tableToIPC } from 'apache-arrow';
import fc from 'fast-check';
import { expect } from 'vitest';
import { SourceError } from '../../../shared/contracts/errors.js';
import type {
  BatchIncrementalSource,
  IncrementalSource,
  Introspector,
  NullCursorCounter,
  RowEstimator,
  TableRef,
  Warning,
} from '../../../shared/contracts/source.js';
import { encodeRows } from '../../../shared/dataplane/encoder.js';
import { Op } from '../../../shared/dataplane/metadata.js';
import type { LogicalType, Schema } from '../../../shared/dataplane/schema.js';
import type { SqlSourceOptions } from '../../../shared/drivers/source-options.js';
import { incrementalPosPrefix } from '../../../shared/position/position.js';

/** The fixed `__ingest_ts` clock of every source the tests open. */
export const CLOCK_MS = 1_700_000_000_123;
export const INGEST_NS = BigInt(CLOCK_MS) * 1_000_000n;

/** What the scenarios call on a driver's incremental source (PostgresSource, MysqlSource). */
export type DriverSource = Introspector &
  IncrementalSource &
  BatchIncrementalSource &
  NullCursorCounter &
  RowEstimator & { close(): Promise<void> };

/** A column type under test: its DDL type and an arbitrary of values the fixture can insert. */
export interface TypeCase {
  readonly sql: string;
  readonly value: fc.Arbitrary<unknown>;
}

/** A second session of the test database that can hold a transaction open. */
export interface Session {
  /** The server's id of the session (Postgres backend pid, MySQL connection id), as text. */
  readonly id: string;
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * How a driver's bound lets rows through once the transaction that held them commits:
 * `at once` (the next pages read them; Postgres sees the commit in pg_stat_activity at once);
 * `eventually` (read until they arrive: MariaDB's INNODB_TRX listing is a cache, refreshed only
 * after 100 ms unread, and with TIDEMARK_TEST_MYSQL_URL it lists other test files' transactions).
 */
export type AfterCommit = 'at once' | 'eventually';

/**
 * One driver's side of the contract. Built when the test file loads (the scenarios' titles come
 * from `titles`); `setUp` makes the database (the file's beforeAll), and everything that names
 * it (`url`, `schema`, `privileges`) is read only inside a test.
 */
export interface DriverFixture<S extends DriverSource = DriverSource> {
  readonly kind: 'postgres' | 'mysql';
  /** The words where a scenario's title names what it shows for this driver. */
  readonly titles: {
    /** After 'maps every type to its logical type, in column order'. */
    readonly allTypes: string;
    /** After 'reads every type exactly, the same through both paths'. */
    readonly values: string;
    /** 'keeps <micro> exact: rows 1 µs apart ...'. */
    readonly micro: string;
    /** After 'counts (and skips) NULL'. */
    readonly nulls: string;
    /** Whose statistics estimate the row count. */
    readonly estimate: string;
    /** 'holds <sequence> cursor page ...'. */
    readonly sequence: string;
    /** 'refuses <privileges>, with the GRANT to run'. */
    readonly privileges: string;
  };
  setUp(): Promise<void>;
  readonly url: string;
  /** Where the test tables live: `${schema}.${table}` (Postgres `public`, MySQL the database). */
  readonly schema: string;
  /** A source on the test database with the file's defaults (fixed clock, lag); `drop` closes it. */
  source(opts?: Partial<SqlSourceOptions>): S;
  /** Closes every source opened so far. */
  closeSources(): Promise<void>;
  /** Runs one string of statements (several allowed) as the admin. */
  exec(sql: string): Promise<void>;
  /** Runs a query as the admin and returns its rows (values as the client gives them). */
  query(sql: string): Promise<Record<string, unknown>[]>;
  /** How many times walkBoth reads a pair of pages again before it compares them (walkBoth). */
  readonly rereads: number;
  /** Opens a second session (for a transaction the bound must wait for). */
  session(): Promise<Session>;

  /** Table `all_types`: one column of every type the driver maps. */
  readonly allTypes: {
    readonly ddl: string;
    /** Every column in order, with its logical type. */
    readonly columns: readonly (readonly [string, LogicalType])[];
    readonly nullable: Readonly<Record<string, boolean>>;
    /** A type name the schema keeps, exact or as a pattern. */
    readonly sourceTypes: Readonly<Record<string, string | RegExp>>;
    /** Two columns that may be excluded. */
    readonly exclude: readonly [string, string];
  };
  /** Table `values_t`: one of every read form, with cursor `u`. */
  readonly values: {
    readonly ddl: string;
    /** The ids in cursor order. */
    readonly ids: readonly number[];
    /** Asserts the values each row read as (rows in cursor order). */
    expectRows(rows: readonly Record<string, unknown>[]): void;
  };
  /** Random tables (k1 int [, k2 text] key, cursor `cur`, columns c0..): the row path equals the batch path. */
  readonly random: {
    readonly types: readonly TypeCase[];
    /** Cursor kinds: a type and a value pool with many ties (times all in the past). */
    readonly cursors: readonly TypeCase[];
    /** The DDL types of the key columns. */
    readonly keyTypes: { readonly int: string; readonly text: string };
    /** Values of the text key's prefix. */
    readonly keyText: fc.Arbitrary<string>;
    create(name: string, columns: readonly string[], primaryKey: string): Promise<void>;
    /** Inserts rows of values of the given DDL types (key values are numbers and strings). */
    insert(name: string, types: readonly string[], rows: readonly (readonly unknown[])[]): Promise<void>;
    /** Runs the property in the session state it needs (MySQL: zero dates allowed). */
    around(run: () => Promise<void>): Promise<void>;
  };
  /** Table `ties`: 10,000 rows (ids 1..10000), one updated_at, indexed (updated_at, id). */
  readonly ties: string;
  /** Table `micro`: ids 1..20, updated_at 2022-03-04 05:06:07 plus (20 - id) µs; `utc`: an instant. */
  readonly micro: { readonly ddl: string; readonly utc: boolean };
  /** Table `quoted` (name text key, note int) holding `names`. */
  readonly quoted: { readonly names: readonly string[]; create(): Promise<void> };
  /** Table `nopk`: seq 1..rows UNIQUE NOT NULL, no primary key. */
  readonly nopk: { readonly ddl: string; readonly rows: number };
  /** Table `nulls` (id, updated_at, v) with NULL cursors, and other tables' cursor counts. */
  readonly nulls: {
    readonly ddl: string;
    readonly nullCursors: number;
    readonly pageSize: number;
    /** The ids read, in cursor order. */
    readonly ids: readonly number[];
    readonly others: readonly { readonly table: string; readonly counts: readonly [string, number][] }[];
  };
  /** Table `est` (id key) and the row count estimate once 5000 rows are in and analyzed. */
  readonly estimate: {
    readonly ddl: string;
    /** Never analyzed, the estimate is undefined (no guess). */
    readonly unanalyzedIsUndefined: boolean;
    /** Inserts ids 1..5000 and analyzes the table. */
    fill(): Promise<void>;
    readonly between: readonly [number, number];
  };
  readonly bound: {
    readonly afterCommit: AfterCommit;
    /** Table `events` (id generated, updated_at defaulting to now, note) holding 'old', an hour old. */
    readonly eventsDdl: string;
    /** How long the late transaction waits after its insert before the newer rows commit. */
    readonly lateGapMs: number;
    /** Asserts the BOUND_HELD warnings name the session that holds the bound back. */
    expectHolder(held: readonly Warning[], session: Session): void;
    /** Table `seqt` (generated bigint id, note): the cursor is a sequence. */
    readonly sequenceDdl: string;
    /** How long the held page waits before the holder commits. */
    readonly commitAfterMs: number;
  };
  /** A login that may read `priv` but not see other sessions' transactions (password `ro-pw`). */
  readonly privileges: {
    readonly account: string;
    readonly createAccount: string;
    /** Creates `priv` (id, updated_at) with one row and lets the account read it. */
    readonly privTable: string;
    readonly grantSessions: string;
    /** Creates `secret`, which the account may not read. */
    readonly secretTable: string;
    readonly dropAccount: string;
    /** What the refusal says to run. */
    readonly refusal: string;
    /** What reading `secret` says to run. */
    readonly denied: string;
    /** The lag of the lagOnly source, when not the fixture's default. */
    readonly lagOnlyLagMs?: number;
  };
  readonly refusals: {
    readonly wrongPassword: RegExp;
    /** A table name in the (missing) database of the URL. */
    readonly missingDatabaseTable: string;
    /** Tables `cur_checks` (id key, unorderable columns, updated_at not indexed) and `no_pk`. */
    readonly cursorDdl: string;
    readonly unorderable: readonly string[];
    readonly unorderableSays: string;
    /** What the CURSOR_NOT_INDEXED warning says to run. */
    readonly indexAdvice: string;
  };
  drop(): Promise<void>;
}

export function ipc(record: RecordBatch): Buffer {
  return Buffer.from(tableToIPC(new Table(record)));
}

export interface Walked {
  readonly rows: Record<string, unknown>[];
  readonly pages: number;
  readonly tokens: string[];
}

/**
 * Walks every page with both paths in lockstep and asserts they agree page by page: same `next`,
 * same `more`, and byte-identical IPC (batch path vs encodeRows of the row path's rows).
 * Each read computes its own safe upper bound; on a shared MariaDB another test file's
 * transaction can move it between the two reads. A real path difference repeats, so with
 * `rereads` the pair is read again (up to that many times) before it is compared.
 */
export async function walkBoth(
  src: DriverSource,
  ref: TableRef,
  schema: Schema,
  cursorColumn: string,
  pageSize: number,
  rereads = 0,
): Promise<Walked> {
  const rows: Record<string, unknown>[] = [];
  const tokens: string[] = [];
  let after = '';
  for (let seq = 1; ; seq++) {
    const posPrefix = incrementalPosPrefix(seq, 1);
    const req = { table: ref, cursorColumn, after, pageSize, posPrefix, ordinalBase: 0 };
    let r = await src.incremental(req);
    let b = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
    for (let attempt = 0; attempt < rereads && (b.next !== r.next || b.more !== r.more); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      r = await src.incremental(req);
      b = await src.incrementalBatch({ ...req, schema, writeMode: 'append' });
    }
    expect(b.next).toBe(r.next);
    expect(b.more).toBe(r.more);
    if (r.page.length === 0) {
      expect(b.page).toBeUndefined();
      return { rows, pages: seq - 1, tokens };
    }
    expect(r.page.length).toBeLessThanOrEqual(pageSize);
    const expected = encodeRows(schema, r.page, {
      posPrefix,
      ordinalBase: 0,
      op: Op.update,
      phase: 'incremental',
      ingestTsNanos: INGEST_NS,
      snapshot: false,
    });
    expect(b.page!.record.numRows).toBe(r.page.length);
    expect(ipc(b.page!.record).equals(ipc(expected))).toBe(true);
    expect(b.page!.watermark).toBe(`${posPrefix}${(r.page.length - 1).toString(16).padStart(8, '0')}`);
    rows.push(...r.page);
    tokens.push(r.next);
    after = r.next;
    if (!r.more) return { rows, pages: seq, tokens };
  }
}

/** The rejection of `p`: a SourceError with `code`, on one line. */
export async function oneLineSourceError(p: Promise<unknown>, code: string): Promise<SourceError> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(SourceError);
  const se = e as SourceError;
  expect(se.code).toBe(code);
  expect(se.message).not.toContain('\n');
  return se;
}

/** The request of a first page (run 1, step 1). */
export const page1 = (ref: TableRef, cursorColumn: string, pageSize = 100) => ({
  table: ref,
  cursorColumn,
  after: '',
  pageSize,
  posPrefix: incrementalPosPrefix(1, 1),
  ordinalBase: 0,
});

/** Decimal text of precision `p` and scale `s`, over the whole range. */
export const decimalText = (p: number, s: number): fc.Arbitrary<string> =>
  fc.bigInt({ min: -(10n ** BigInt(p)) + 1n, max: 10n ** BigInt(p) - 1n }).map((v) => {
    const neg = v < 0n;
    const digits = (neg ? -v : v).toString().padStart(s + 1, '0');
    return `${neg ? '-' : ''}${digits.slice(0, digits.length - s)}${s > 0 ? `.${digits.slice(digits.length - s)}` : ''}`;
  });

/** `url` logged in as `user` with `password`. */
export function asUser(url: string, user: string, password: string): string {
  const u = new URL(url);
  u.username = user;
  u.password = password;
  return u.toString();
}
