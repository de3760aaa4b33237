/**
 * The Postgres snapshot driver (shared/drivers/postgres/snapshot.ts) and the reader's side of a
 * window (cdc/reader.ts) on the real harness PostgreSQL:
 *   a. chunks from repeated nextBound + read cover every row exactly once, each chunk in the
 *      database's key order: an int key, a text key under an ICU collation whose order is not
 *      byte order, a composite (text, int) key; random key sets (fast-check);
 *   b. a chunk's values equal an incremental page of the same rows (same wire types, same
 *      bytes), its metadata columns are the snapshot's, its lastKey the last row's token;
 *   c. with a running reader: registered watermarks arrive as `watermark` events in stream
 *      order, unregistered ones never; rowsPos sorts strictly between the `__pos` of a
 *      transaction committed before the window and one committed right after it on the same key;
 *      rowsPos is the message LSN (what pg_logical_emit_message returns) - 1;
 *   d. commit events carry txid = the writer's txid_current() mod 2^32;
 *   e. a transaction open in another session during the read is in `invisible`;
 *   and the refusals: a table without a primary key, a role that may not emit messages.
 */
import { randomBytes } from 'node:crypto';
import { type RecordBatch, Table, tableToIPC } from 'apache-arrow';
import fc from 'fast-check';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CdcEvent, Reader } from '../../shared/contracts/cdc.js';
import { SourceError } from '../../shared/contracts/errors.js';
import type {
  ChunkRows,
  ChunkWindow,
  SnapshotSource,
  TableChunker,
} from '../../shared/contracts/snapshot.js';
import type { TableRef } from '../../shared/contracts/source.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { PostgresCdcSource } from '../../shared/drivers/postgres/cdc/source.js';
import { WATERMARK_PREFIX } from '../../shared/drivers/postgres/cdc/watermarks.js';
import { invisibleXids } from '../../shared/drivers/postgres/snapshot.js';
import { PostgresSource } from '../../shared/drivers/postgres/source.js';
import { decodeKey } from '../../shared/position/key-codec.js';
import { incrementalPosPrefix, parseLsn, pgPosition } from '../../shared/position/position.js';
import { type FreshDatabase, freshPgDatabase } from '../harness/pg.js';

const CLOCK_MS = 1_700_000_000_123;
const INGEST_NS = BigInt(CLOCK_MS) * 1_000_000n;
const ICU = 'en-US-x-icu';
const T = { timeout: 180_000 };

let db: FreshDatabase;
let sql: postgres.Sql;
let cdc: PostgresCdcSource;
let snap: SnapshotSource;

function cdcSource(url: string): PostgresCdcSource {
  return new PostgresCdcSource({
    url,
    sourceName: 'sources.src',
    connectTimeoutMs: 10_000,
    heartbeatMs: 60_000,
    clock: () => CLOCK_MS,
  });
}

beforeAll(async () => {
  db = await freshPgDatabase('pgsnapdrv');
  sql = postgres(db.url, { max: 3, onnotice: () => undefined });
  const [icu] = await sql<
    { n: number }[]
  >`SELECT count(*)::int AS n FROM pg_collation WHERE collname = ${ICU}`;
  if (icu?.n !== 1) throw new Error(`the harness server has no collation ${ICU}`);
  cdc = cdcSource(db.url);
  snap = await cdc.openSnapshot({ connections: 2 });
});

afterAll(async () => {
  await snap?.close();
  await cdc?.close();
  await sql?.end();
  await db?.drop();
});

/** A window that records what the driver told it, in order. */
function recordingWindow(reader?: Reader): ChunkWindow & { calls: string[]; rows: ChunkRows | undefined } {
  const w = {
    calls: [] as string[],
    rows: undefined as ChunkRows | undefined,
    expect(id: string, role: 'low' | 'high') {
      w.calls.push(`expect ${role} ${id}`);
      reader?.expectWatermark?.(id);
    },
    ready(rows: ChunkRows) {
      w.calls.push('ready');
      w.rows = rows;
    },
  };
  return w;
}

let windows = 0;
function ids(): { low: string; high: string } {
  windows++;
  return { low: `w${windows}-low-${randomBytes(4).toString('hex')}`, high: `w${windows}-high` };
}

async function tableOf(source: string): Promise<{ ref: TableRef; schema: Schema; chunker: TableChunker }> {
  const { ref, schema } = await cdc.introspect({ source });
  return { ref, schema, chunker: snap.chunker(ref, schema) };
}

/** Column `name` of a record batch as JS values. */
function column(record: RecordBatch, name: string): unknown[] {
  const v = record.getChild(name);
  if (!v) throw new Error(`no column ${name}`);
  return Array.from({ length: record.numRows }, (_, i) => v.get(i));
}

/**
 * Reads the whole table the way the engine does: a bound `rows` past `after`, then the range
 * `(after, upTo]` in reads of at most `limit` rows (continuing after each read's lastKey while a
 * read came back full), then on from `upTo`. Returns each read's rows as `keyOf` renders them.
 */
async function readAll(
  t: { schema: Schema; chunker: TableChunker },
  rows: number,
  limit: number,
  keyOf: (record: RecordBatch, i: number) => string,
): Promise<{ chunks: string[][]; bounds: (string | undefined)[] }> {
  const chunks: string[][] = [];
  const bounds: (string | undefined)[] = [];
  let after: string | undefined;
  for (let guard = 0; guard < 10_000; guard++) {
    const upTo = await t.chunker.nextBound(after, rows);
    bounds.push(upTo);
    let from = after;
    let inRange = 0;
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
        ids(),
      );
      const r = w.rows!;
      const keys = r.batch
        ? Array.from({ length: r.batch.record.numRows }, (_, i) => keyOf(r.batch!.record, i))
        : [];
      expect(keys.length).toBe(r.rows);
      chunks.push(keys);
      inRange += r.rows;
      if (r.rows < limit) break;
      from = r.lastKey;
    }
    // A bound closes a range of exactly `rows` rows; the last range (no bound) holds fewer.
    if (upTo !== undefined) expect(inRange).toBe(rows);
    else expect(inRange).toBeLessThan(rows);
    if (upTo === undefined) return { chunks, bounds };
    after = upTo;
  }
  throw new Error('readAll did not end');
}

describe('bounds and chunks partition the table exactly, in the database order', () => {
  it('int key', T, async () => {
    await sql`CREATE TABLE snap_int (id int PRIMARY KEY, v text)`;
    const t = await tableOf('public.snap_int');
    const keyOf = (rb: RecordBatch, i: number) => String(column(rb, 'id')[i]);
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 150 }),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 60 }),
        async (keys, rows, limit) => {
          await sql`TRUNCATE snap_int`;
          if (keys.length > 0)
            await sql`INSERT INTO snap_int SELECT k, 'v' || k FROM unnest(${sql.array(keys)}::int[]) AS k`;
          const expected = (await sql<{ k: string }[]>`SELECT id::text AS k FROM snap_int ORDER BY id`).map(
            (r) => r.k,
          );
          const { chunks, bounds } = await readAll(t, rows, limit, keyOf);
          expect(chunks.flat()).toEqual(expected);
          // Every bound but the last closes a range of exactly `rows` rows.
          expect(bounds.length).toBe(Math.floor(expected.length / rows) + 1);
          bounds.slice(0, -1).forEach((b, i) => {
            expect(decodeKey([{ kind: 'int32' }], b!)).toEqual([Number(expected[(i + 1) * rows - 1])]);
          });
          expect(bounds.at(-1)).toBeUndefined();
        },
      ),
      { numRuns: 12 },
    );
  });

  // Upper and lower case, accents, punctuation and digits: ICU orders them unlike bytes.
  const letters = fc.constantFrom('a', 'A', 'b', 'B', 'z', 'Z', 'é', 'E', 'e', 'ß', 'ä', '-', ' ', '1', '_');
  const text = fc.string({ unit: letters, minLength: 1, maxLength: 4 });

  it(`text key under ${ICU} (not byte order)`, T, async () => {
    await sql.unsafe(`CREATE TABLE snap_text (k text COLLATE "${ICU}" PRIMARY KEY, n int)`);
    const t = await tableOf('public.snap_text');
    const keyOf = (rb: RecordBatch, i: number) => String(column(rb, 'k')[i]);
    // A fixed set first, where the database's order is known not to be JavaScript's.
    const fixed = ['a', 'B', 'b', 'A', 'ä', 'z', 'Z', 'é', 'e', '-a', 'a-', '1'];
    await sql`INSERT INTO snap_text SELECT k, 0 FROM unnest(${sql.array(fixed)}::text[]) AS k`;
    const dbOrder = (await sql<{ k: string }[]>`SELECT k FROM snap_text ORDER BY k`).map((r) => r.k);
    expect(dbOrder).not.toEqual([...fixed].sort());
    expect(dbOrder.indexOf('a')).toBeLessThan(dbOrder.indexOf('B')); // 'B' < 'a' in bytes
    const fixedRead = await readAll(t, 3, 2, keyOf);
    expect(fixedRead.chunks.flat()).toEqual(dbOrder);
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(text, { maxLength: 120 }),
        fc.integer({ min: 1, max: 30 }),
        fc.integer({ min: 1, max: 40 }),
        async (keys, rows, limit) => {
          await sql`TRUNCATE snap_text`;
          if (keys.length > 0)
            await sql`INSERT INTO snap_text SELECT k, 0 FROM unnest(${sql.array(keys)}::text[]) AS k`;
          const expected = (await sql<{ k: string }[]>`SELECT k FROM snap_text ORDER BY k`).map((r) => r.k);
          const { chunks } = await readAll(t, rows, limit, keyOf);
          expect(chunks.flat()).toEqual(expected);
        },
      ),
      { numRuns: 12 },
    );
  });

  it(`composite (text ${ICU}, int) key: row comparison`, T, async () => {
    await sql.unsafe(`CREATE TABLE snap_comp (t text COLLATE "${ICU}", n int, v text, PRIMARY KEY (t, n))`);
    const t = await tableOf('public.snap_comp');
    const keyOf = (rb: RecordBatch, i: number) => JSON.stringify([column(rb, 't')[i], column(rb, 'n')[i]]);
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(
          fc.tuple(fc.constantFrom('a', 'B', 'b', 'é', 'E', 'Z'), fc.integer({ min: -3, max: 3 })),
          {
            maxLength: 42,
            selector: ([s, n]) => `${s}\u0000${n}`,
          },
        ),
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 1, max: 12 }),
        async (keys, rows, limit) => {
          await sql`TRUNCATE snap_comp`;
          if (keys.length > 0)
            await sql`INSERT INTO snap_comp SELECT a, b, 'x' FROM unnest(${sql.array(keys.map((k) => k[0]))}::text[], ${sql.array(keys.map((k) => k[1]))}::int[]) AS u(a, b)`;
          const expected = (
            await sql<{ t: string; n: number }[]>`SELECT t, n FROM snap_comp ORDER BY t, n`
          ).map((r) => JSON.stringify([r.t, r.n]));
          const { chunks } = await readAll(t, rows, limit, keyOf);
          expect(chunks.flat()).toEqual(expected);
        },
      ),
      { numRuns: 12 },
    );
  });
});

describe('a chunk is an incremental page of the same rows', () => {
  it('same wire types and bytes; snapshot metadata; lastKey; estimateRows', T, async () => {
    await sql.unsafe(`
      CREATE TABLE snap_types (
        id bigint PRIMARY KEY, amount numeric(12,2), note text, at timestamptz, d date, j jsonb,
        b bytea, ai int[], u uuid, ok boolean, f double precision, iv interval);
      INSERT INTO snap_types
        SELECT g, g * 1.25, CASE WHEN g % 7 = 0 THEN NULL ELSE 'n' || g END,
               timestamptz '2024-01-01 00:00:00.123456+00' + g * interval '1 minute',
               date '2024-02-29' + g, jsonb_build_object('g', g), decode(lpad(to_hex(g), 4, '0'), 'hex'),
               ARRAY[g, NULL, -g]::int[], md5(g::text)::uuid, g % 2 = 0, g / 3.0, g * interval '1 second'
        FROM generate_series(1, 300) g;
      ANALYZE snap_types;`);
    const t = await tableOf('public.snap_types');
    const inc = new PostgresSource({ url: db.url, lagMs: 0, clock: () => CLOCK_MS });
    try {
      const page = await inc.incrementalBatch({
        table: t.ref,
        cursorColumn: 'id',
        after: '',
        pageSize: 1000,
        posPrefix: incrementalPosPrefix(1, 1),
        ordinalBase: 0,
        schema: t.schema,
        writeMode: 'upsert',
      });
      const w = recordingWindow();
      const i = ids();
      await t.chunker.read({ range: {}, limit: 1000, schema: t.schema, writeMode: 'upsert' }, w, i);
      expect(w.calls).toEqual([`expect low ${i.low}`, 'ready', `expect high ${i.high}`]);
      const r = w.rows!;
      expect(r.rows).toBe(300);
      expect(r.lastKey).toBe(page.next);
      expect(decodeKey([{ kind: 'int64' }], r.lastKey!)).toEqual([300n]);
      const chunk = r.batch!;
      expect(chunk.table).toBe('public.snap_types');
      expect(chunk.writeMode).toBe('upsert');
      expect(chunk.watermark).toBeUndefined();
      const names = t.schema.columns.map((c) => c.name);
      const pageRecord = page.page!.record;
      expect(chunk.record.numRows).toBe(pageRecord.numRows);
      for (const name of names) {
        const a = chunk.record.schema.fields.find((f) => f.name === name)!;
        const b = pageRecord.schema.fields.find((f) => f.name === name)!;
        expect(String(a.type)).toBe(String(b.type));
      }
      const data = (rb: RecordBatch) => Buffer.from(tableToIPC(new Table(rb).select(names)));
      expect(data(chunk.record).equals(data(pageRecord))).toBe(true);
      // The metadata of a snapshot chunk.
      const n = chunk.record.numRows;
      expect(column(chunk.record, '__op')).toEqual(Array(n).fill(0));
      expect(column(chunk.record, '__pos')).toEqual(Array(n).fill(''));
      expect(column(chunk.record, '__commit_ts')).toEqual(Array(n).fill(null));
      const ingest = chunk.record.getChild('__ingest_ts')!.data[0]!.values as BigInt64Array;
      expect(Array.from(ingest)).toEqual(Array(n).fill(INGEST_NS));
      expect(column(chunk.record, '__snapshot')).toEqual(Array(n).fill(true));
      expect(column(chunk.record, '__phase')).toEqual(Array(n).fill('snapshot'));
      // A range: (100, 200] in at most 50 rows.
      const part = recordingWindow();
      const upTo = await t.chunker.nextBound(undefined, 200);
      const after = await t.chunker.nextBound(undefined, 100);
      await t.chunker.read(
        { range: { after: after!, upTo: upTo! }, limit: 50, schema: t.schema, writeMode: 'append' },
        part,
        ids(),
      );
      expect(column(part.rows!.batch!.record, 'id').map(Number)).toEqual(
        Array.from({ length: 50 }, (_, k) => 101 + k),
      );
      expect(decodeKey([{ kind: 'int64' }], part.rows!.lastKey!)).toEqual([150n]);
      // An empty range: no batch, no lastKey.
      const empty = recordingWindow();
      await t.chunker.read(
        { range: { after: r.lastKey! }, limit: 10, schema: t.schema, writeMode: 'upsert' },
        empty,
        ids(),
      );
      expect(empty.rows).toEqual({
        batch: undefined,
        rows: 0,
        lastKey: undefined,
        invisible: expect.any(Array),
      });
      expect(await t.chunker.estimateRows!()).toBe(300);
      // A column added since the chunker introspected: a request in the new schema reads it.
      await sql`ALTER TABLE snap_types ADD COLUMN extra int DEFAULT 7`;
      const wider = (await cdc.introspect({ source: 'public.snap_types' })).schema;
      expect(wider.columns.map((c) => c.name)).toContain('extra');
      const w2 = recordingWindow();
      await t.chunker.read({ range: {}, limit: 5, schema: wider, writeMode: 'upsert' }, w2, ids());
      expect(column(w2.rows!.batch!.record, 'extra')).toEqual([7, 7, 7, 7, 7]);
    } finally {
      await inc.close();
    }
  });
});

/** Events of a running reader until `done` holds; on each commit, `cut` gives its rows' last `__pos`. */
type Logged = CdcEvent & { readonly lastPos?: string };
async function drain(
  reader: Reader,
  table: string,
  done: (log: readonly Logged[]) => boolean,
  timeoutMs = 60_000,
): Promise<Logged[]> {
  const log: Logged[] = [];
  const deadline = Date.now() + timeoutMs;
  while (!done(log)) {
    if (Date.now() > deadline)
      throw new Error(`the stream did not deliver in time: ${JSON.stringify(log.map((e) => e.kind))}`);
    const ev = await reader.next(500);
    if (!ev || ev.kind === 'rows' || ev.kind === 'begin' || ev.kind === 'progress') continue;
    if (ev.kind === 'commit') {
      const b = reader.cut(table);
      log.push({ ...ev, ...(b?.watermark ? { lastPos: b.watermark } : {}) });
    } else log.push(ev);
  }
  return log;
}

describe('watermarks in a running stream', () => {
  it(
    'registered watermarks in stream order; rowsPos between the changes around the window; txid; invisible',
    T,
    async () => {
      await sql`CREATE TABLE snap_stream (id int PRIMARY KEY, v text)`;
      await sql`INSERT INTO snap_stream SELECT g, 'v' || g FROM generate_series(1, 20) g`;
      const t = await tableOf('public.snap_stream');
      const reader = await cdc.openReader([{ ref: t.ref, schema: t.schema, writeMode: 'upsert' }], {
        heartbeatMs: 60_000,
        slot: 'tidemark_snapdrv',
        publication: 'tidemark_snapdrv',
      });
      try {
        await reader.start({ position: await reader.initialPosition(), next: new Map() });
        // (d) A transaction before the window, its xid read by the writer.
        const x1 = await sql.begin(async (tx) => {
          await tx`UPDATE snap_stream SET v = 'before' WHERE id = 1`;
          const [r] = await tx<{ x: string }[]>`SELECT txid_current()::text AS x`;
          return r!.x;
        });
        // Someone else's watermark: never reported.
        await sql`SELECT pg_logical_emit_message(false, ${WATERMARK_PREFIX}, 'other-pipeline')`;
        const w = recordingWindow(reader);
        const i = ids();
        await t.chunker.read({ range: {}, limit: 100, schema: t.schema, writeMode: 'upsert' }, w, i);
        expect(column(w.rows!.batch!.record, 'v')[0]).toBe('before');
        // A transaction right after the window, on the same key.
        const x2 = await sql.begin(async (tx) => {
          await tx`UPDATE snap_stream SET v = 'after' WHERE id = 1`;
          const [r] = await tx<{ x: string }[]>`SELECT txid_current()::text AS x`;
          return r!.x;
        });
        // A watermark emitted by hand: rowsPos is what pg_logical_emit_message returned, - 1.
        reader.expectWatermark!('by-hand');
        const [m] = await sql<
          { lsn: string }[]
        >`SELECT pg_logical_emit_message(false, ${WATERMARK_PREFIX}, 'by-hand')::text AS lsn`;

        const log = await drain(reader, t.ref.target, (l) =>
          l.some((e) => e.kind === 'watermark' && e.id === 'by-hand'),
        );
        const kinds = log.map((e) => (e.kind === 'watermark' ? `watermark ${e.id}` : e.kind));
        expect(kinds).toEqual([
          'commit',
          `watermark ${i.low}`,
          `watermark ${i.high}`,
          'commit',
          'watermark by-hand',
        ]);
        const [c1, low, high, c2, byHand] = log as [
          Extract<Logged, { kind: 'commit' }>,
          Extract<Logged, { kind: 'watermark' }>,
          Extract<Logged, { kind: 'watermark' }>,
          Extract<Logged, { kind: 'commit' }>,
          Extract<Logged, { kind: 'watermark' }>,
        ];
        expect(c1.txid).toBe(String(BigInt(x1) % 2n ** 32n));
        expect(c2.txid).toBe(String(BigInt(x2) % 2n ** 32n));
        expect(c1.lastPos).toMatch(/^p[0-9a-f]{24}$/);
        expect(c2.lastPos).toMatch(/^p[0-9a-f]{24}$/);
        for (const wm of [low, high, byHand]) expect(wm.rowsPos).toMatch(/^p[0-9a-f]{16}$/);
        // Chunk rows at rowsPos + any ordinal sort strictly between the two updates of id 1.
        for (const wm of [low, high]) {
          expect(`${wm.rowsPos}00000000` > c1.lastPos!).toBe(true);
          expect(`${wm.rowsPos}ffffffff` < c2.lastPos!).toBe(true);
        }
        expect(low.rowsPos < high.rowsPos).toBe(true);
        expect(byHand.rowsPos).toBe(pgPosition(parseLsn(m!.lsn) - 1n, 0).slice(0, 17));
        expect(`${byHand.rowsPos}00000000` > c2.lastPos!).toBe(true);
        // The ids were consumed: emitting one again reports nothing.
        await sql`SELECT pg_logical_emit_message(false, ${WATERMARK_PREFIX}, ${i.low})`;
        await sql`UPDATE snap_stream SET v = 'last' WHERE id = 2`;
        const tail = await drain(reader, t.ref.target, (l) => l.some((e) => e.kind === 'commit'));
        expect(tail.map((e) => e.kind)).toEqual(['commit']);

        // (e) A transaction open in another session during the read is invisible to the chunk:
        // first as the newest xid (at the snapshot's xmax, not in its xip), then, once a later
        // transaction completed, as an xid of the xip list.
        const other = await sql.reserve();
        try {
          await other`BEGIN`;
          await other`INSERT INTO snap_stream VALUES (1000, 'open')`;
          const [open] = await other<{ x: string }[]>`SELECT txid_current()::text AS x`;
          const openXid = String(BigInt(open!.x) % 2n ** 32n);
          const w2 = recordingWindow(reader);
          await t.chunker.read({ range: {}, limit: 2000, schema: t.schema, writeMode: 'upsert' }, w2, ids());
          expect(w2.rows!.invisible).toContain(openXid);
          expect(column(w2.rows!.batch!.record, 'id')).not.toContain(1000);
          expect(w2.rows!.rows).toBe(20);
          await sql`UPDATE snap_stream SET v = 'later' WHERE id = 3`;
          const w3 = recordingWindow(reader);
          await t.chunker.read({ range: {}, limit: 2000, schema: t.schema, writeMode: 'upsert' }, w3, ids());
          expect(w3.rows!.invisible).toContain(openXid);
          expect(w3.rows!.rows).toBe(20);
        } finally {
          await other`ROLLBACK`.catch(() => undefined);
          other.release();
        }
      } finally {
        await reader.close();
      }
    },
  );

  it('invisible: the xip list and the running xids at or above xmax, as 32-bit xids', () => {
    expect(invisibleXids('100:104:100,102', [])).toEqual(['100', '102']);
    expect(invisibleXids('5:5:', [])).toEqual([]);
    // Running when read: 99 and 101 below xmax and not in xip ended before the snapshot.
    expect(invisibleXids('100:104:100,102', ['99', '101', '102', '104', '107'])).toEqual([
      '100',
      '102',
      '104',
      '107',
    ]);
    // An epoch past the first: xid8 = epoch * 2^32 + xid.
    const e = 2n ** 32n;
    expect(invisibleXids(`${e + 7n}:${e + 9n}:${e + 8n}`, ['9'])).toEqual(['8', '9']);
    // Around the wrap: xmax 2^32 - 2 (epoch 0); running 4294967295 and 3 (epoch 1) are above it.
    expect(invisibleXids(`${e - 5n}:${e - 2n}:`, ['4294967290', '4294967295', '3'])).toEqual([
      '4294967295',
      '3',
    ]);
    expect(() => invisibleXids('garbage', [])).toThrow(SourceError);
  });
});

describe('reads end cleanly', () => {
  it('an abort cancels a chunk read blocked at the server; the one connection is reusable', T, async () => {
    await sql`CREATE TABLE snap_abort (id int PRIMARY KEY, v text)`;
    await sql`INSERT INTO snap_abort SELECT g, 'v' FROM generate_series(1, 50) g`;
    const one = await cdc.openSnapshot({ connections: 1 });
    const locker = await sql.reserve();
    try {
      const { ref, schema } = await cdc.introspect({ source: 'public.snap_abort' });
      const chunker = one.chunker(ref, schema);
      await locker`BEGIN`;
      await locker`LOCK TABLE snap_abort IN ACCESS EXCLUSIVE MODE`;
      const ac = new AbortController();
      const w = recordingWindow();
      const reading = chunker
        .read({ range: {}, limit: 100, schema, writeMode: 'upsert' }, w, ids(), ac.signal)
        .then(
          () => 'read',
          (e: unknown) => e,
        );
      // Wait until the chunk's COPY waits for the lock, then abort it.
      for (let i = 0; ; i++) {
        const [r] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_locks
          WHERE relation = 'snap_abort'::regclass AND NOT granted`;
        if (r!.n > 0) break;
        if (i > 600)
          throw new Error(
            `the chunk read never waited for the lock: ${String(await Promise.race([reading, 'still running']))}; ${JSON.stringify(w.calls)}; ${JSON.stringify(await sql`SELECT pid, application_name, state, wait_event_type, query FROM pg_stat_activity WHERE datname = current_database()`)}`,
          );
        await new Promise((res) => setTimeout(res, 100));
      }
      const reason = new Error('stop the chunk');
      ac.abort(reason);
      expect(await reading).toBe(reason);
      expect(w.calls).toEqual([expect.stringMatching(/^expect low /)]);
      await locker`ROLLBACK`;
      // Nothing of ours is left in a transaction, and the pool's only connection reads again.
      const [idle] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE application_name = 'tidemark-snapshot' AND state LIKE 'idle in transaction%'`;
      expect(idle!.n).toBe(0);
      const again = recordingWindow();
      await chunker.read({ range: {}, limit: 100, schema, writeMode: 'upsert' }, again, ids());
      expect(again.rows!.rows).toBe(50);
    } finally {
      await locker`ROLLBACK`.catch(() => undefined);
      locker.release();
      await one.close();
    }
  });

  it('a partitioned table: chunks through its root, estimate from its leaves', T, async () => {
    await sql.unsafe(`
      CREATE TABLE snap_parts (id int, at date, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
      CREATE TABLE snap_parts_a PARTITION OF snap_parts FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
      CREATE TABLE snap_parts_b PARTITION OF snap_parts FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
      INSERT INTO snap_parts SELECT g, date '2025-06-01' + g * 3 FROM generate_series(1, 120) g;
      ANALYZE snap_parts;`);
    const t = await tableOf('public.snap_parts');
    expect(await t.chunker.estimateRows!()).toBe(120);
    const { chunks } = await readAll(t, 25, 25, (rb, i) => String(column(rb, 'id')[i]));
    expect(chunks.flat()).toEqual(Array.from({ length: 120 }, (_, k) => String(k + 1)));
  });
});

describe('refusals say what to do', () => {
  it('a table without a primary key', T, async () => {
    await sql`CREATE TABLE snap_nopk (a int, b text)`;
    const t = await tableOf('public.snap_nopk');
    const e = await t.chunker.nextBound(undefined, 10).then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(SourceError);
    expect((e as SourceError).code).toBe('SOURCE_KEY_MISSING');
    expect((e as Error).message).toMatch(/public\.snap_nopk has no primary key/);
    expect((e as Error).message).toMatch(/snapshot: never/);
  });

  it('a role that may not run pg_logical_emit_message', T, async () => {
    const role = `snaplow_${randomBytes(4).toString('hex')}`;
    await sql`CREATE TABLE snap_priv (id int PRIMARY KEY)`;
    await sql`INSERT INTO snap_priv VALUES (1), (2)`;
    await sql.unsafe(`CREATE ROLE ${role} LOGIN PASSWORD 'pw'; GRANT SELECT ON snap_priv TO ${role};
      REVOKE EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text, boolean) FROM PUBLIC`);
    const url = new URL(db.url);
    url.username = role;
    url.password = 'pw';
    const low = cdcSource(url.toString());
    const lowSnap = await low.openSnapshot({ connections: 1 });
    try {
      const { ref, schema } = await low.introspect({ source: 'public.snap_priv' });
      const chunker = lowSnap.chunker(ref, schema);
      expect(await chunker.nextBound(undefined, 1)).toBeDefined(); // reading is allowed
      const w = recordingWindow();
      const e = await chunker.read({ range: {}, limit: 10, schema, writeMode: 'upsert' }, w, ids()).then(
        () => undefined,
        (x: unknown) => x,
      );
      expect(e).toBeInstanceOf(SourceError);
      expect((e as SourceError).code).toBe('SOURCE_PRIVILEGE');
      expect((e as Error).message).toContain(
        `GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean,text,text,boolean) TO "${role}"`,
      );
      expect(w.rows).toBeUndefined();
      // The connection went back to the pool usable, outside a transaction.
      expect(await chunker.nextBound(undefined, 2)).toBeDefined();
    } finally {
      await lowSnap.close();
      await low.close();
      await sql.unsafe(`GRANT EXECUTE ON FUNCTION pg_logical_emit_message(boolean, text, text, boolean) TO PUBLIC;
        DROP OWNED BY ${role}; DROP ROLE ${role}`);
    }
  });
});
