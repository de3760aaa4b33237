/**
 * The Postgres snapshot driver (shared/drivers/postgres/snapshot.ts) and the reader's side of a
 * window (cdc/reader.ts) on the real harness PostgreSQL. The contract every driver's chunker
 * keeps (bounds and chunks partition int, ICU text and composite keys exactly in the database's
 * order; a chunk equals an incremental page; a table without a primary key is refused) runs
 * from driver-contract/snapshot-scenarios.ts on postgres-snapshot-fixture.ts; this file adds
 * what only Postgres has:
 *   a. a chunk read of a key range in pieces, an empty range, the planner's estimate, and a
 *      column added since the chunker introspected;
 *   b. with a running reader: registered watermarks arrive as `watermark` events in stream
 *      order, unregistered ones never; rowsPos sorts strictly between the `__pos` of a
 *      transaction committed before the window and one committed right after it on the same key;
 *      rowsPos is the message LSN (what pg_logical_emit_message returns) - 1;
 *   c. commit events carry txid = the writer's txid_current() mod 2^32;
 *   d. a transaction open in another session during the read is in `invisible`;
 *   e. an abort of a blocked read, a partitioned table;
 *   and the refusal of a role that may not emit messages.
 */
import { randomBytes } from 'node:crypto';
import type postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CdcEvent, Reader } from '../../shared/contracts/cdc.js';
import { SourceError } from '../../shared/contracts/errors.js';
import type { PostgresCdcSource } from '../../shared/drivers/postgres/cdc/source.js';
import { WATERMARK_PREFIX } from '../../shared/drivers/postgres/cdc/watermarks.js';
import { invisibleXids } from '../../shared/drivers/postgres/snapshot.js';
import { decodeKey } from '../../shared/position/key-codec.js';
import { parseLsn, pgPosition } from '../../shared/position/position.js';
import type { FreshDatabase } from '../harness/pg.js';
import { postgresSnapshotFixture, snapTypesTable } from './driver-contract/postgres-snapshot-fixture.js';
import { column, windowIds as ids, readAll, recordingWindow, T } from './driver-contract/snapshot-fixture.js';
import { snapshotContractScenarios } from './driver-contract/snapshot-scenarios.js';

const fx = postgresSnapshotFixture();
let db: FreshDatabase;
let sql: postgres.Sql;
let cdc: PostgresCdcSource;
const cdcSource = (url: string) => fx.cdcSource(url);

beforeAll(async () => {
  await fx.setUp();
  ({ db, sql, cdc } = fx);
});

afterAll(async () => {
  await fx.drop();
});

snapshotContractScenarios('postgres', fx);

describe('a chunk is an incremental page of the same rows', () => {
  it('a range read in pieces, an empty range, estimateRows, a column added since', T, async () => {
    await sql.unsafe(snapTypesTable('snap_range'));
    const t = await fx.tableOf('snap_range');
    const whole = recordingWindow();
    await t.chunker.read({ range: {}, limit: 1000, schema: t.schema, writeMode: 'upsert' }, whole, ids());
    const r = whole.rows!;
    expect(r.rows).toBe(300);
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
    await sql`ALTER TABLE snap_range ADD COLUMN extra int DEFAULT 7`;
    const wider = (await cdc.introspect({ source: 'public.snap_range' })).schema;
    expect(wider.columns.map((c) => c.name)).toContain('extra');
    const w2 = recordingWindow();
    await t.chunker.read({ range: {}, limit: 5, schema: wider, writeMode: 'upsert' }, w2, ids());
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
      const t = await fx.tableOf('snap_stream');
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
            `the chunk read never waited for the lock: ${String(await Promise.race([reading, 'still running']))}; ${JSON.stringify(w.log)}; ${JSON.stringify(await sql`SELECT pid, application_name, state, wait_event_type, query FROM pg_stat_activity WHERE datname = current_database()`)}`,
          );
        await new Promise((res) => setTimeout(res, 100));
      }
      const reason = new Error('stop the chunk');
      ac.abort(reason);
      expect(await reading).toBe(reason);
      expect(w.log).toEqual([expect.stringMatching(/^expect low /)]);
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
    const t = await fx.tableOf('snap_parts');
    expect(await t.chunker.estimateRows!()).toBe(120);
    const { chunks } = await readAll(t, 25, 25, (rb, i) => String(column(rb, 'id')[i]));
    expect(chunks.flat()).toEqual(Array.from({ length: 120 }, (_, k) => String(k + 1)));
  });
});

describe('refusals say what to do', () => {
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
