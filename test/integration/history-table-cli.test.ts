/**
 * Issue 31, Deliver 4 through the real CLI: an incremental upsert table with `history: true`,
 * synced by `bin/tidemark.js run` three times with updates and inserts at the source between the
 * runs, into a `file://` lake (Iceberg, `file` catalog). pyiceberg reads the current-state table
 * equal to the source (one row per key, no deduplication), and the history table
 * `<target>_history` holding every version each run read, once (by `__pos`), partitioned by
 * day(`__commit_ts`) (incremental rows have none: one NULL partition). Then `tidemark reset
 * --delete-objects` empties both tables.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshPgDatabase } from '../harness/pg.js';
import { readersMissing, runReaderScript } from '../harness/readers.js';
import { localSpec, runCli } from './incremental/fixture.js';

const TABLE = 'public.items';
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** The newest metadata file of the table folder `folder` (file catalog: v<N>.metadata.json). */
async function read(folder: string, orderBy: string): Promise<Record<string, unknown>[]> {
  const { rows } = await runReaderScript<{ rows: Record<string, unknown>[] }>('read_table.py', [
    '--catalog',
    'static',
    '--metadata',
    `file://${folder}`,
    '--order-by',
    orderBy,
  ]);
  return rows;
}

describe.skipIf(readersMissing !== undefined)(
  'an upsert table with its history, through tidemark run',
  () => {
    let sql: postgres.Sql;
    let url: string;
    beforeAll(async () => {
      const db = await freshPgDatabase('history_cli');
      cleanups.push(() => db.drop());
      url = db.url;
      sql = postgres(url, { max: 1, onnotice: () => undefined });
      cleanups.push(() => sql.end());
      await sql.unsafe(
        `CREATE TABLE ${TABLE} (id bigint PRIMARY KEY, name text, updated_at timestamptz NOT NULL)`,
      );
    }, 120_000);

    it('three runs with updates between them: the table equals the source, the history every version once', async () => {
      const { spec, dir, lakeDir } = localSpec(
        { kind: 'postgres', url, table: TABLE },
        { writeMode: 'upsert', lagOnly: true, connectTimeoutSeconds: 10 },
      );
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      Object.assign(spec.tables[0]!, { history: true });
      // Every version a run reads: [id, name].
      const versions: [number, string][] = [];
      const runAndNote = async () => {
        const rows = await sql<{ id: string; name: string }[]>`SELECT id::text, name FROM public.items`;
        const r = await runCli(dir, spec, ['run']);
        expect(r.code, `tidemark run failed:\n${r.stdout}\n${r.stderr}`).toBe(0);
        return rows;
      };
      await sql.unsafe(
        `INSERT INTO ${TABLE} SELECT g, 'v1-' || g, now() - interval '1 hour' FROM generate_series(1, 50) g`,
      );
      for (const r of await runAndNote()) versions.push([Number(r.id), r.name]);
      // Between runs: updates of some keys (some twice: only the second is read), inserts.
      await sql.unsafe(`UPDATE ${TABLE} SET name = 'v2-' || id, updated_at = now() WHERE id % 5 = 0`);
      await sql.unsafe(`UPDATE ${TABLE} SET name = 'v3-' || id, updated_at = now() WHERE id % 10 = 0`);
      await sql.unsafe(`INSERT INTO ${TABLE} SELECT g, 'v1-' || g, now() FROM generate_series(51, 60) g`);
      const changed2 = await sql<{ id: string; name: string }[]>`
      SELECT id::text, name FROM public.items WHERE id % 5 = 0 OR id > 50`;
      await runAndNote();
      for (const r of changed2) versions.push([Number(r.id), r.name]);
      await sql.unsafe(`UPDATE ${TABLE} SET name = 'v4-' || id, updated_at = now() WHERE id % 7 = 0`);
      const changed3 = await sql<
        { id: string; name: string }[]
      >`SELECT id::text, name FROM public.items WHERE id % 7 = 0`;
      await runAndNote();
      for (const r of changed3) versions.push([Number(r.id), r.name]);

      const source = (
        await sql<{ id: string; name: string }[]>`SELECT id::text, name FROM public.items ORDER BY items.id`
      ).map((r) => [Number(r.id), r.name]);
      const current = await read(join(lakeDir, TABLE), 'id');
      expect(current.map((r) => [Number(r.id), r.name])).toEqual(source);
      const history = await read(join(lakeDir, `${TABLE}_history`), '__pos');
      const byKey = (rows: [number, string][]) =>
        [...rows].sort((a, b) => a[0] - b[0] || a[1].localeCompare(b[1]));
      expect(byKey(history.map((r) => [Number(r.id), String(r.name)]))).toEqual(byKey(versions));
      expect(new Set(history.map((r) => r.__pos)).size).toBe(history.length);

      const reset = await runCli(dir, spec, ['reset', '--table', TABLE, '--delete-objects']);
      expect(reset.code, `tidemark reset failed:\n${reset.stdout}\n${reset.stderr}`).toBe(0);
      expect(await read(join(lakeDir, TABLE), 'id')).toEqual([]);
      expect(await read(join(lakeDir, `${TABLE}_history`), '__pos')).toEqual([]);
    }, 600_000);
  },
);
