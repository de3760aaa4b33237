/**
 * TLS on the Postgres query connections (shared/drivers/postgres/tls.ts): negotiated by the
 * driver before postgres.js gets the socket, so COPY pages over TLS still take the raw data
 * phase (copy-tap.ts). Against a private server with a self-signed certificate made here:
 * sslmode=require reads pages through the tap on an encrypted session; prefer falls back to plain
 * on a server without TLS; require against that server, and verify-full against the self-signed
 * certificate, fail with SOURCE_TLS naming sslmode.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SourceError } from '../../shared/contracts/errors.js';
import { PostgresSource } from '../../shared/drivers/postgres/source.js';
import { rawCopy } from '../../shared/drivers/postgres/wire/copy-tap.js';
import { type EmbeddedPostgres, startEmbeddedPostgres } from '../../shared/local/embedded-postgres.js';
import { incrementalPosPrefix } from '../../shared/position/position.js';
import { TEMPLATE_ROOT } from '../harness/templates.js';

let tlsServer: EmbeddedPostgres;
let plainServer: EmbeddedPostgres;
const sources: PostgresSource[] = [];
const admins = new Map<EmbeddedPostgres, postgres.Sql>();

/** A plain superuser client of `pg` (no TLS), ended after the tests. */
function admin(pg: EmbeddedPostgres): postgres.Sql {
  let sql = admins.get(pg);
  if (!sql) {
    sql = postgres(pg.url, { max: 1, onnotice: () => {} });
    admins.set(pg, sql);
  }
  return sql;
}

/** `url` with `sslmode=<mode>`. */
function withSsl(url: string, mode: string): string {
  const u = new URL(url);
  u.searchParams.set('sslmode', mode);
  return u.toString();
}

function source(url: string): PostgresSource {
  const s = new PostgresSource({ url, lagMs: 0, clock: () => Date.parse('2030-01-01T00:00:00Z') });
  sources.push(s);
  return s;
}

/** Turns TLS on in a running cluster: a self-signed certificate in its data dir, then a reload. */
async function enableTls(pg: EmbeddedPostgres): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'tidemark-tls-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-subj',
        '/CN=localhost',
        '-days',
        '2',
        '-keyout',
        join(dir, 'server.key'),
        '-out',
        join(dir, 'server.crt'),
      ],
      { stdio: 'ignore' },
    );
    // The server runs as the data dir's owner and wants its key readable by it alone.
    const { uid, gid } = statSync(pg.dataDir);
    for (const f of ['server.key', 'server.crt']) {
      const to = join(pg.dataDir, f);
      writeFileSync(to, await readFile(join(dir, f)));
      chownSync(to, uid, gid);
      chmodSync(to, 0o600);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe('ALTER SYSTEM SET ssl = on');
    await sql.unsafe('SELECT pg_reload_conf()');
  } finally {
    await sql.end();
  }
}

beforeAll(async () => {
  [tlsServer, plainServer] = await Promise.all([
    startEmbeddedPostgres({ durable: false, templateRoot: TEMPLATE_ROOT }),
    startEmbeddedPostgres({ durable: false, templateRoot: TEMPLATE_ROOT }),
  ]);
  await enableTls(tlsServer);
  const sql = postgres(tlsServer.url, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`CREATE TABLE t (id int PRIMARY KEY, pad text NOT NULL);
      INSERT INTO t SELECT g, repeat(md5(g::text), 20) FROM generate_series(1, 3000) g`);
  } finally {
    await sql.end();
  }
}, 180_000);

afterAll(async () => {
  await Promise.all(sources.splice(0).map((s) => s.close()));
  await Promise.all([...admins.values()].map((sql) => sql.end()));
  await Promise.all([tlsServer?.stop(), plainServer?.stop()]);
});

describe('postgres TLS', () => {
  it('sslmode=require: an encrypted session, and COPY pages through the raw data phase', async () => {
    const src = source(withSsl(tlsServer.url, 'require'));
    const { ref, schema } = await src.introspect({ source: 'public.t' });
    const phases = rawCopy.phases;
    let after = '';
    let rows = 0;
    let pages = 0;
    for (;;) {
      const page = await src.incrementalBatch({
        table: ref,
        cursorColumn: 'id',
        after,
        pageSize: 700,
        posPrefix: incrementalPosPrefix(1, 1),
        ordinalBase: rows,
        schema,
        writeMode: 'append',
      });
      const n = page.page?.record.numRows ?? 0;
      rows += n;
      pages += 1;
      if (!page.more) break;
      after = page.next;
    }
    expect(rows).toBe(3000);
    // Every page's COPY went through the tap (one or more statements per page).
    expect(rawCopy.phases - phases).toBeGreaterThanOrEqual(pages);
    // And the sessions the driver reads on are encrypted: the server says so for them.
    const [seen] = await admin(tlsServer)<{ n: string; ssl: boolean | null }[]>`
      SELECT count(*)::text AS n, bool_and(s.ssl) AS ssl
      FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
      WHERE a.application_name = 'tidemark'`;
    expect(Number(seen?.n)).toBeGreaterThanOrEqual(1);
    expect(seen?.ssl).toBe(true);
  });

  it('sslmode=prefer against a server without TLS connects in plain text', async () => {
    await admin(plainServer).unsafe('CREATE TABLE IF NOT EXISTS p (id int PRIMARY KEY)');
    const { schema } = await source(withSsl(plainServer.url, 'prefer')).introspect({ source: 'public.p' });
    expect(schema.columns.map((c) => c.name)).toEqual(['id']);
  });

  it('sslmode=require against a server without TLS, and verify-full against a self-signed certificate, fail with SOURCE_TLS', async () => {
    for (const url of [withSsl(plainServer.url, 'require'), withSsl(tlsServer.url, 'verify-full')]) {
      const err = await source(url)
        .introspect({ source: 'public.t' })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(SourceError);
      expect((err as SourceError).code).toBe('SOURCE_TLS');
      expect((err as Error).message).toMatch(/sslmode/);
      expect((err as Error).message).not.toContain(':postgres@');
    }
  });
});
