/**
 * Dead connections fail fast, never hang (issue 7), through the same path as `tidemark run`
 * (spec -> pipeline -> engine -> driver), against real servers and real listeners:
 * - a private MariaDB SIGKILLed while tidemark's page statement waits at it fails the run with
 *   SOURCE_CONNECTION_LOST (the server-side kill of one session is a shared scenario,
 *   incremental/scenarios.ts, as is the stalled page);
 * - a source URL whose port answers with something that is not the database (an HTTP server, a
 *   listener that hangs up, one that never speaks) fails within connectTimeoutSeconds with a
 *   clear error, after one TCP connection: no connection storm.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import { afterAll, describe, expect, it } from 'vitest';
import { incrementalTables, parseSpec, type Spec } from '../../shared/config/spec.js';
import { incrementalStateKey } from '../../shared/engine/incremental/state.js';
import { silentLogger } from '../../shared/observability/log.js';
import { openPipeline } from '../../shared/pipeline/open.js';
import { runTable } from '../../shared/pipeline/run-table.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { startMariaDb } from '../harness/mariadb-server.js';
import { TEMPLATE_ROOT } from '../harness/templates.js';
import { eventually, stallFirstRead } from './incremental/fixture.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

/** A one-table spec with a local state dir and lake. */
function specFor(kind: 'postgres' | 'mysql', url: string, table: string, connectTimeoutSeconds = 10): Spec {
  const dir = tempDir('tidemark-conn-');
  return parseSpec({
    pipeline: 'conn',
    sources: { db: { kind, url, connectTimeoutSeconds } },
    state: { dir: join(dir, 'state') },
    lake: { uri: `file://${join(dir, 'lake')}` },
    tables: [
      {
        source: 'db',
        table,
        mode: 'incremental',
        cursor: 'updated_at',
        writeMode: 'append',
        pageSize: 100,
        lagSeconds: 0,
      },
    ],
  });
}

/** Runs the spec's table once, as `tidemark run` does; resolves with the error it failed with. */
async function failureOf(spec: Spec): Promise<{ code?: string; message: string }> {
  const pipeline = await openPipeline(spec);
  try {
    await runTable(spec, incrementalTables(spec)[0]!, pipeline, { logger: silentLogger });
  } catch (e) {
    return e as { code?: string; message: string };
  } finally {
    await pipeline.close();
  }
  throw new Error('the run succeeded; it should have failed');
}

describe('a MariaDB that dies during a page read', () => {
  it('SIGKILL of the server while the page statement runs fails the run with SOURCE_CONNECTION_LOST', async () => {
    const dir = tempDir('tidemark-sigkill-');
    const server = await startMariaDb({
      baseDir: dir,
      password: 'sigkill',
      database: 'shop',
      templateRoot: TEMPLATE_ROOT,
    });
    const admin = await mysql.createConnection({ uri: server.url });
    const holder = await mysql.createConnection({ uri: server.url });
    // Both lose their server below; an 'error' without a listener would end the test process.
    admin.on('error', () => undefined);
    holder.on('error', () => undefined);
    try {
      await admin.query(
        'CREATE TABLE items (id BIGINT PRIMARY KEY, v INT NOT NULL, updated_at DATETIME(6) NOT NULL, INDEX (updated_at, id))',
      );
      await admin.query(
        "INSERT INTO items SELECT seq, seq, TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq SECOND FROM seq_1_to_500",
      );
      const spec = specFor('mysql', server.url, 'shop.items');
      const base = await openPipeline(spec);
      const stalled = stallFirstRead(
        base,
        {
          lock: async (table) => {
            await holder.query(`LOCK TABLES ${table} WRITE`);
            return async () => undefined; // the server's death releases it
          },
        },
        'shop.items',
      );
      let err: { code?: string; message: string } | undefined;
      try {
        const run = runTable(spec, incrementalTables(spec)[0]!, stalled.pipeline, {
          logger: silentLogger,
          // Far past the test's timeout: a run that ends at all did not end by this timeout.
          pageTimeoutMs: 10 * 60_000,
        }).then(
          () => undefined,
          (e: unknown) => e as { code?: string; message: string },
        );
        // The page statement waits at the server for the lock: it cannot finish before the kill.
        await eventually('the page read waiting at the server', async () => {
          const [rows] = await admin.query(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = 'shop' AND STATE LIKE '%lock%' AND INFO LIKE 'SELECT%'",
          );
          return (rows as { ID: number }[]).map((r) => String(r.ID));
        });
        process.kill(server.pid, 'SIGKILL');
        err = await run;
      } finally {
        await stalled.release();
        await base.close();
      }
      expect(err?.code, err?.message).toBe('SOURCE_CONNECTION_LOST');
      expect(err!.message).toMatch(
        /^sources\.db: lost the connection to MySQL at 127\.0\.0\.1:\d+ \(connection id \d+\)/,
      );
      expect(err!.message).toContain('the server is gone');
      expect(err!.message).toContain('nothing past the last committed page was written; rerun');
      expect(err!.message).not.toContain('sigkill'); // the password
      const store = new FileCursorStore(spec.state.dir!);
      const rec = await store.load(incrementalStateKey(spec.pipeline, spec.tables[0]!.table));
      // Only the initial state a first run commits before any write: no page, no cursor.
      expect(rec.value).toMatchObject({ cursor: '', seq: 0 });
      expect(rec.lease).toBeUndefined();
    } finally {
      admin.destroy();
      holder.destroy();
      await server.stop();
    }
  });
});

/** A listener on a free 127.0.0.1 port that counts the TCP connections it accepted. */
interface Listener {
  readonly port: number;
  readonly connections: () => number;
  close(): Promise<void>;
}

async function listen(kind: 'http' | 'hang-up' | 'silent'): Promise<Listener> {
  const sockets = new Set<net.Socket>();
  let count = 0;
  const server =
    kind === 'http'
      ? http.createServer((_req, res) => res.end('not a database\n'))
      : net.createServer((socket) => {
          if (kind === 'hang-up') socket.destroy();
        });
  server.on('connection', (socket: net.Socket) => {
    count += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => count,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('a source URL whose port answers with something that is not the database', () => {
  const cases: readonly {
    kind: 'postgres' | 'mysql';
    listener: 'http' | 'hang-up' | 'silent';
    code: string;
    says: RegExp;
  }[] = [
    {
      kind: 'postgres',
      listener: 'http',
      code: 'SOURCE_UNREACHABLE',
      says: /^no PostgreSQL server answered at 127\.0\.0\.1:PORT: something there accepted the connection and closed it/,
    },
    {
      kind: 'postgres',
      listener: 'hang-up',
      code: 'SOURCE_UNREACHABLE',
      says: /^no PostgreSQL server answered at 127\.0\.0\.1:PORT: something there accepted the connection and closed it/,
    },
    {
      kind: 'postgres',
      listener: 'silent',
      code: 'SOURCE_TIMEOUT',
      says: /^no PostgreSQL server answered at 127\.0\.0\.1:PORT within 2 s; check the host and port in sources\.db/,
    },
    {
      kind: 'mysql',
      listener: 'http',
      code: 'SOURCE_TIMEOUT',
      says: /^no MySQL server answered at 127\.0\.0\.1:PORT within 2 s; check the host and port in sources\.db/,
    },
    {
      kind: 'mysql',
      listener: 'hang-up',
      code: 'SOURCE_UNREACHABLE',
      says: /^cannot connect to MySQL at 127\.0\.0\.1:PORT \(PROTOCOL_CONNECTION_LOST\)/,
    },
    {
      kind: 'mysql',
      listener: 'silent',
      code: 'SOURCE_TIMEOUT',
      says: /^no MySQL server answered at 127\.0\.0\.1:PORT within 2 s/,
    },
  ];

  for (const c of cases) {
    it(`${c.kind} at a ${c.listener} listener fails with ${c.code} (connectTimeoutSeconds: 2) after one TCP connection`, async () => {
      const l = await listen(c.listener);
      try {
        const url =
          c.kind === 'postgres'
            ? `postgres://app:secret@127.0.0.1:${l.port}/shop`
            : `mysql://app:secret@127.0.0.1:${l.port}/shop`;
        const err = await failureOf(
          specFor(c.kind, url, c.kind === 'postgres' ? 'public.items' : 'shop.items', 2),
        );
        expect(err.code, err.message).toBe(c.code);
        expect(err.message).toMatch(new RegExp(c.says.source.replace('PORT', String(l.port))));
        expect(err.message).not.toContain('secret');
        expect(l.connections()).toBe(1);
        // Nothing keeps connecting after the failure (postgres.js would redial without pause).
        await new Promise((r) => setTimeout(r, 500));
        expect(l.connections()).toBe(1);
      } finally {
        await l.close();
      }
    });
  }
});
