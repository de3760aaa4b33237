/**
 * The Postgres CDC reader on the real harness PostgreSQL: inserts, updates, deletes and a
 * primary-key change captured live through the CDC engine, the lake read back with DuckDB.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FreshDatabase, freshPgDatabase } from '../harness/pg.js';
import { lakeLatest, pgCdcSpec, pgClient, startCapture, waitForActiveSlot } from '../harness/pg-cdc.js';

let db: FreshDatabase;
beforeAll(async () => {
  db = await freshPgDatabase('pgcdc');
});
afterAll(() => db?.drop());

describe('postgres cdc', () => {
  it('captures inserts, updates, deletes and a key change; the lake equals the table', {
    timeout: 120_000,
  }, async () => {
    const sql = pgClient(db.url);
    try {
      await sql`CREATE TABLE public.orders (id int PRIMARY KEY, note text, amount numeric(12,2), at timestamptz, r real)`;
      const { spec, dir } = pgCdcSpec(db.url, [{ table: 'public.orders' }], {
        slot: 'tidemark_basic',
        publication: 'tidemark_basic',
      });
      const cap = startCapture(spec);
      await cap.until((r) => r['public.orders'] !== undefined);
      await waitForActiveSlot(sql, 'tidemark_basic');
      await sql`INSERT INTO orders SELECT g, 'n' || g, g * 1.5, now(), 0.1 FROM generate_series(1, 100) g`;
      await sql`UPDATE orders SET note = 'changed' WHERE id % 10 = 0`;
      await sql`DELETE FROM orders WHERE id % 7 = 0`;
      await sql`UPDATE orders SET id = 1000 WHERE id = 1`;
      const total = 100 + 10 + 14 + 2;
      await cap.until((r) => (r['public.orders'] ?? 0) >= total);
      await cap.stop();
      const source = await sql<
        { id: string; note: string; amount: string; r: string }[]
      >`SELECT id::text, note, amount::text, r::float8::text AS r FROM orders`;
      const lake = await lakeLatest(dir, 'public.orders', 'id', ['note', 'amount', 'r']);
      expect([...lake.keys()].sort()).toEqual(source.map((s) => s.id).sort());
      for (const s of source) {
        const l = lake.get(s.id)!;
        expect(l.note).toBe(s.note);
        expect(l.amount).toBe(s.amount);
        expect(Number(l.r)).toBe(Number(s.r));
      }
    } finally {
      await sql.end();
    }
  });

  it('captures a partitioned table through its root: one lake table, rows of every partition', {
    timeout: 120_000,
  }, async () => {
    const sql = pgClient(db.url);
    try {
      await sql.unsafe(`
        CREATE TABLE public.events (id int, at date, v text, PRIMARY KEY (id, at)) PARTITION BY RANGE (at);
        CREATE TABLE public.events_2025 PARTITION OF public.events FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
        CREATE TABLE public.events_2026 PARTITION OF public.events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');`);
      const { spec, dir } = pgCdcSpec(db.url, [{ table: 'public.events' }], {
        slot: 'tidemark_parts',
        publication: 'tidemark_parts',
      });
      const cap = startCapture(spec);
      await cap.until((r) => r['public.events'] !== undefined);
      await sql`INSERT INTO events SELECT g, date '2025-06-01' + (g * 2), 'v' || g FROM generate_series(1, 200) g`;
      await sql`UPDATE events SET v = 'moved' WHERE id % 20 = 0`;
      await cap.until((r) => (r['public.events'] ?? 0) >= 210);
      await cap.stop();
      const parts = await sql<{ n: number }[]>`SELECT count(DISTINCT tableoid)::int AS n FROM events`;
      expect(parts[0]!.n).toBe(2);
      const lake = await lakeLatest(dir, 'public.events', 'id', ['v']);
      expect(lake.size).toBe(200);
      expect([...lake.values()].filter((r) => r.v === 'moved').length).toBe(10);
    } finally {
      await sql.end();
    }
  });
});
