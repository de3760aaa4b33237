/**
 * A CDC start that is refused leaves nothing behind that blocks the fix, and `check` says what
 * the start would say (issue 28, trap 1), through the real CLI (bin/tidemark.js) on the harness
 * PostgreSQL, file state and file lake:
 *   - a table without a primary key under `snapshot: initial` (the default): `check` fails its
 *     `snapshot` line with CDC_SNAPSHOT_NO_KEY and the fix; `tidemark cdc` refuses with the same
 *     code and words, and leaves no state, no slot and no publication; with `snapshot: never`
 *     (and writeMode append) the next `tidemark cdc` captures the same target;
 *   - `writeMode: upsert` without a key: UPSERT_NO_KEY in check and at the start, never
 *     BATCH_INVALID at a flush;
 *   - two pipelines given the same publication name: the second is refused (CDC_NAME_CLASH),
 *     naming both pipelines, by check and by cdc; the first's publication keeps its tables;
 *   - a server with wal_level=replica (a private embedded PostgreSQL): `tidemark cdc` refuses
 *     with check's CDC_WAL_LEVEL line and fix, not the raw server error, and creates no
 *     publication; `status` then shows the failure.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultCdcName } from '../../shared/config/spec.js';
import { startEmbeddedPostgres } from '../../shared/local/embedded-postgres.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { BIN, CdcProcess } from '../harness/cdc-cli.js';
import { type FreshDatabase, freshPgDatabase } from '../harness/pg.js';
import { TEMPLATE_ROOT } from '../harness/templates.js';

const ROOT = join(import.meta.dirname, '..', '..');
const DEADLINE_MS = 90_000;

let db: FreshDatabase;
let admin: postgres.Sql;
const dirs: string[] = [];
const cleanups: (() => void)[] = [];
const slots: string[] = [];

beforeAll(async () => {
  db = await freshPgDatabase('cdc_refusals');
  admin = postgres(db.url, { max: 1, onnotice: () => undefined });
  await admin.unsafe('CREATE TABLE nokey (a INT, b TEXT)');
  // Publishable for UPDATE and DELETE: the only refusal left is the snapshot's.
  await admin.unsafe('ALTER TABLE nokey REPLICA IDENTITY FULL');
  await admin.unsafe('CREATE TABLE keyed (id INT PRIMARY KEY, b TEXT)');
  await admin.unsafe('CREATE TABLE other (id INT PRIMARY KEY, b TEXT)');
}, 120_000);

afterAll(async () => {
  for (const c of cleanups) c();
  for (const slot of slots)
    await admin
      .unsafe(
        `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '${slot}'`,
      )
      .catch(() => undefined);
  await admin?.end();
  await db?.drop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface TableLine {
  table: string;
  writeMode: 'append' | 'upsert';
  snapshot?: 'initial' | 'never';
  insertOnly?: boolean;
}

/** A spec of pipeline `pipeline` in `dir`; `publication` overrides the default name. */
function spec(
  dir: string,
  pipeline: string,
  tables: readonly TableLine[],
  publication?: string,
  url = db.url,
): string {
  const cdc = publication ? `, cdc: { publication: ${publication} }` : '';
  const path = join(dir, `${pipeline}.yaml`);
  writeFileSync(
    path,
    [
      `pipeline: ${pipeline}`,
      'sources:',
      `  db: { kind: postgres, url: "${url}"${cdc} }`,
      `state: { dir: ${join(dir, 'state')} }`,
      `lake: { uri: "file://${join(dir, 'lake')}" }`,
      'tables:',
      ...tables.map(
        (t) =>
          `  - { source: db, table: public.${t.table}, mode: cdc, writeMode: ${t.writeMode}${t.snapshot ? `, snapshot: ${t.snapshot}` : ''}${t.insertOnly ? ', insertOnly: true' : ''} }`,
      ),
      '',
    ].join('\n'),
  );
  slots.push(defaultCdcName(pipeline, 'db'));
  return path;
}

function cli(...args: string[]): { code: number | null; out: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: DEADLINE_MS,
  });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

function newDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'tidemark-cdc-refusals-'));
  dirs.push(d);
  return d;
}

/** `check --json` lines of a table: { check: status/code }. */
function checkLines(
  path: string,
  subject: string,
): Record<string, { status: string; code?: string; message: string }> {
  const r = cli('check', '-c', path, '--json');
  const lines: Record<string, { status: string; code?: string; message: string }> = {};
  for (const l of r.out.split('\n')) {
    if (!l.startsWith('{')) continue;
    const o = JSON.parse(l) as {
      subject?: string;
      check?: string;
      status: string;
      code?: string;
      message: string;
    };
    if (o.subject === subject && o.check) lines[o.check] = o;
  }
  return lines;
}

async function slotExists(slot: string): Promise<boolean> {
  return (await admin`SELECT 1 FROM pg_replication_slots WHERE slot_name = ${slot}`).length > 0;
}

async function publicationTables(name: string): Promise<string[]> {
  const rows = await admin<
    { t: string }[]
  >`SELECT tablename::text AS t FROM pg_publication_tables WHERE pubname = ${name} ORDER BY 1`;
  return rows.map((r) => r.t);
}

/** Starts `tidemark cdc`, waits for `capturing`, stops it by SIGTERM; its exit code and output. */
async function captureOnce(path: string): Promise<{ code: number | null; out: string }> {
  const p = new CdcProcess(path, { cleanup: (fn) => cleanups.push(fn) });
  await p.waitForLine('"capturing"');
  const code = await p.kill('SIGTERM');
  return { code, out: p.output };
}

describe('a refused CDC start leaves nothing behind, and check says it first', () => {
  it('a table without a key under snapshot: initial; then snapshot: never starts the same target', async () => {
    const dir = newDir();
    const pipeline = `refuse-${Math.random().toString(36).slice(2, 8)}`;
    const slot = defaultCdcName(pipeline, 'db');
    const refused = spec(dir, pipeline, [{ table: 'nokey', writeMode: 'append' }]);

    const lines = checkLines(refused, 'public.nokey');
    expect(lines.snapshot).toMatchObject({ status: 'fail', code: 'CDC_SNAPSHOT_NO_KEY' });
    expect(lines.snapshot!.message).toContain('set snapshot: never');

    const run = cli('cdc', '-c', refused);
    expect(run.code).not.toBe(0);
    expect(run.out).toContain('CDC_SNAPSHOT_NO_KEY');
    // In check's words.
    expect(run.out).toContain(lines.snapshot!.message.slice(0, 60));
    expect(run.out).not.toContain('BATCH_INVALID');
    // Nothing recorded, nothing created.
    expect((await new FileCursorStore(join(dir, 'state')).load(`cdc#${pipeline}#db`)).value).toBeUndefined();
    expect(await slotExists(slot)).toBe(false);
    expect(await publicationTables(slot)).toEqual([]);

    // The fix the line names, on the same spec and target: it starts.
    spec(dir, pipeline, [{ table: 'nokey', writeMode: 'append', snapshot: 'never' }]);
    expect(checkLines(refused, 'public.nokey').snapshot).toBeUndefined();
    const started = await captureOnce(refused);
    expect(started.out).toContain('"capturing"');
    expect(started.code).toBe(0);
    expect(await slotExists(slot), started.out).toBe(true);
  }, 300_000);

  it('writeMode: upsert without a key is refused by check and at the start, never at a flush', async () => {
    const dir = newDir();
    const pipeline = `upsert-${Math.random().toString(36).slice(2, 8)}`;
    const path = spec(dir, pipeline, [{ table: 'nokey', writeMode: 'upsert', snapshot: 'never' }]);
    expect(checkLines(path, 'public.nokey').writeMode).toMatchObject({
      status: 'fail',
      code: 'UPSERT_NO_KEY',
    });
    const run = cli('cdc', '-c', path);
    expect(run.code).not.toBe(0);
    expect(run.out).toContain('UPSERT_NO_KEY');
    expect(run.out).toContain('use writeMode: append');
    expect(await slotExists(defaultCdcName(pipeline, 'db'))).toBe(false);
  }, 300_000);

  it('a second pipeline with the same publication name is refused naming both; no publication loses a table', async () => {
    const dir = newDir();
    const a = `pub-a-${Math.random().toString(36).slice(2, 8)}`;
    const b = `pub-b-${Math.random().toString(36).slice(2, 8)}`;
    const publication = `tidemark_shared_${Math.random().toString(36).slice(2, 8)}`;
    const first = spec(dir, a, [{ table: 'keyed', writeMode: 'upsert', snapshot: 'never' }], publication);
    const started = await captureOnce(first);
    expect(started.code).toBe(0);
    expect(await publicationTables(publication)).toEqual(['keyed']);

    const second = spec(dir, b, [{ table: 'other', writeMode: 'upsert', snapshot: 'never' }], publication);
    const r = cli('check', '-c', second, '--json');
    const pub = r.out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { check?: string; status?: string; code?: string; message?: string })
      .find((l) => l.check === 'publication');
    expect(pub).toMatchObject({ status: 'fail', code: 'CDC_NAME_CLASH' });
    expect(pub!.message).toContain(`pipeline "${a}"`);
    expect(pub!.message).toContain(`pipeline "${b}"`);

    const run = cli('cdc', '-c', second);
    expect(run.code).not.toBe(0);
    expect(run.out).toContain('CDC_NAME_CLASH');
    expect(run.out).toContain(`pipeline "${a}"`);
    // Neither publication lost a table: the first's still holds exactly its own.
    expect(await publicationTables(publication)).toEqual(['keyed']);
    expect(await slotExists(defaultCdcName(b, 'db'))).toBe(false);
    // The first pipeline still starts on it.
    expect((await captureOnce(first)).code).toBe(0);
    expect(await publicationTables(publication)).toEqual(['keyed']);
  }, 300_000);

  it('wal_level=replica: the start refuses in the words of check, creates nothing, and status shows it', async () => {
    const server = await startEmbeddedPostgres({
      durable: false,
      templateRoot: TEMPLATE_ROOT,
      settings: { wal_level: 'replica' },
    });
    try {
      const sql = postgres(server.url, { max: 1, onnotice: () => undefined });
      try {
        await sql.unsafe('CREATE TABLE t (id INT PRIMARY KEY)');
        const dir = newDir();
        const pipeline = `replica-${Math.random().toString(36).slice(2, 8)}`;
        const path = spec(
          dir,
          pipeline,
          [{ table: 't', writeMode: 'upsert', snapshot: 'never' }],
          undefined,
          server.url,
        );
        const source = checkLines(path, 'sources.db');
        expect(source.wal_level).toMatchObject({ status: 'fail', code: 'CDC_WAL_LEVEL' });
        const run = cli('cdc', '-c', path);
        expect(run.code).not.toBe(0);
        expect(run.out).toContain('CDC_WAL_LEVEL');
        expect(run.out).toContain('set wal_level = logical and restart');
        expect(run.out).not.toContain('logical decoding requires');
        const pubs = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_publication`;
        expect(pubs[0]!.n).toBe(0);
        const status = cli('status', '-c', path, '--json');
        expect(status.out).toContain('CDC_WAL_LEVEL');
      } finally {
        await sql.end();
      }
    } finally {
      await server.stop();
    }
  }, 300_000);

  it('a publication made by hand is only added to; a table that must leave it is refused with the statement', async () => {
    const dir = newDir();
    const pipeline = `hand-${Math.random().toString(36).slice(2, 8)}`;
    const publication = `hand_${Math.random().toString(36).slice(2, 8)}`;
    await admin.unsafe('CREATE TABLE IF NOT EXISTS bystander (id INT PRIMARY KEY)');
    await admin.unsafe(`CREATE PUBLICATION ${publication} FOR TABLE bystander, other`);
    // keyed is added; bystander (not captured) stays: tidemark did not put it there.
    const path = spec(
      dir,
      pipeline,
      [
        { table: 'keyed', writeMode: 'upsert', snapshot: 'never' },
        { table: 'other', writeMode: 'upsert', snapshot: 'never' },
      ],
      publication,
    );
    expect((await captureOnce(path)).code).toBe(0);
    expect(await publicationTables(publication)).toEqual(['bystander', 'keyed', 'other']);
    // other moves to the insert-only publication: it must leave this one, which is not tidemark's.
    spec(
      dir,
      pipeline,
      [
        { table: 'keyed', writeMode: 'upsert', snapshot: 'never' },
        { table: 'other', writeMode: 'append', snapshot: 'never', insertOnly: true },
      ],
      publication,
    );
    const run = cli('cdc', '-c', path);
    expect(run.code).not.toBe(0);
    expect(run.out).toContain('CDC_PUBLICATION_FOREIGN');
    expect(run.out).toContain(`DROP TABLE "public"."other"`);
    expect(await publicationTables(publication)).toEqual(['bystander', 'keyed', 'other']);
  }, 300_000);
});
