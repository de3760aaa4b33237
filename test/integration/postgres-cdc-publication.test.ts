/**
 * The Postgres CDC publications and preflight against the harness's real PostgreSQL
 * (wal_level=logical): the publications hold exactly the spec's tables (never FOR ALL TABLES),
 * follow a changed table set, put insertOnly tables in an insert-only publication, and refuse a
 * table whose UPDATEs and DELETEs publishing would break. In every accepted configuration the
 * application's own UPDATE and DELETE still work; a raw CREATE PUBLICATION shows they fail for
 * the configuration that is refused. The preflight lines are read from a real server and never
 * create anything.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cdcSettings, parseSpec, type Spec, type TableSpecConfig } from '../../shared/config/spec.js';
import type { CheckItem } from '../../shared/contracts/check.js';
import { SourceError } from '../../shared/contracts/errors.js';
import { preflightCdcSource, preflightCdcTable } from '../../shared/drivers/postgres/cdc/preflight.js';
import {
  ensurePublications,
  insertOnlyPublicationName,
  planPublications,
} from '../../shared/drivers/postgres/cdc/publication.js';
import { connect, type Sql } from '../../shared/drivers/postgres/connect.js';
import { checkPipeline } from '../../shared/pipeline/check.js';
import { type FreshDatabase, freshPgDatabase } from '../harness/pg.js';

let db: FreshDatabase;
let admin: postgres.Sql;
let sql: Sql;
let suffix: string;

beforeAll(async () => {
  db = await freshPgDatabase('cdc_pub');
  suffix = db.name
    .slice(-12)
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, '_');
  admin = postgres(db.url, { max: 1, onnotice: () => undefined });
  sql = connect({ url: db.url }).sql;
});

afterAll(async () => {
  await sql?.end();
  await admin?.end();
  await db?.drop();
});

/** A table `(id, note text)` with 3 rows; `pk` makes id its primary key. */
async function table(name: string, pk: boolean): Promise<void> {
  await admin.unsafe(
    `CREATE TABLE ${name} (id int ${pk ? 'PRIMARY KEY' : 'NOT NULL'}, note text, n numeric, at timestamptz);
     INSERT INTO ${name} SELECT g, 'row ' || g, g, now() FROM generate_series(1, 3) g`,
  );
}

/** The application's own UPDATE and DELETE on `name` (what a publication must never break). */
async function applicationWrites(name: string): Promise<void> {
  await admin.unsafe(`UPDATE ${name} SET note = note || '!' WHERE id = 1`);
  await admin.unsafe(`DELETE FROM ${name} WHERE id = 2`);
  await admin.unsafe(`INSERT INTO ${name} (id, note) VALUES (2, 'back')`);
}

async function published(pub: string): Promise<string[]> {
  const rows = await admin<{ t: string }[]>`
    SELECT schemaname || '.' || tablename AS t FROM pg_publication_tables WHERE pubname = ${pub} ORDER BY 1`;
  return rows.map((r) => r.t);
}

async function options(pub: string) {
  const [row] = await admin`
    SELECT puballtables, pubinsert, pubupdate, pubdelete, pubtruncate, pubviaroot FROM pg_publication WHERE pubname = ${pub}`;
  return row;
}

async function refusal(p: Promise<unknown>, code: string): Promise<SourceError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(SourceError);
  expect((e as SourceError).code).toBe(code);
  expect((e as SourceError).message).not.toContain('\n');
  return e as SourceError;
}

/** A LOGIN role (cluster-wide: dropped again) and a connection as it. */
async function withRole(
  name: string,
  attrs: string,
  fn: (roleSql: Sql, role: string) => Promise<void>,
): Promise<void> {
  const role = `${name}_${suffix}`;
  await admin.unsafe(`CREATE ROLE ${role} LOGIN PASSWORD 'pw' ${attrs}`);
  const url = new URL(db.url);
  url.username = role;
  url.password = 'pw';
  const roleSql = connect({ url: url.toString() }).sql;
  try {
    await fn(roleSql, role);
  } finally {
    await roleSql.end();
    await admin.unsafe(`DROP OWNED BY ${role}; DROP ROLE ${role}`);
  }
}

function line(items: readonly CheckItem[], check: string): CheckItem {
  const found = items.filter((i) => i.check === check);
  expect(found, check).toHaveLength(1);
  return found[0]!;
}

describe('ensurePublications', () => {
  it('creates the publication with exactly the spec tables (never FOR ALL TABLES); a second call changes nothing', async () => {
    await table('a1', true);
    await table('b1', true);
    await table('other1', false);
    const setup = await ensurePublications(sql, 'pub_exact', [
      { source: 'public.a1', insertOnly: false },
      { source: 'public.b1', insertOnly: false },
    ]);
    expect(setup.names).toEqual(['pub_exact']);
    expect(setup.executed).toEqual([
      `CREATE PUBLICATION "pub_exact" FOR TABLE "public"."a1", "public"."b1" WITH (publish = 'insert, update, delete, truncate', publish_via_partition_root = true)`,
    ]);
    expect(await published('pub_exact')).toEqual(['public.a1', 'public.b1']);
    expect(await options('pub_exact')).toEqual({
      puballtables: false,
      pubinsert: true,
      pubupdate: true,
      pubdelete: true,
      pubtruncate: true,
      pubviaroot: true,
    });
    expect(setup.tables.get('public.a1')).toEqual({
      replicaIdentity: 'd',
      hasPrimaryKey: true,
      toastable: ['note', 'n'],
    });
    const again = await ensurePublications(sql, 'pub_exact', [
      { source: 'public.a1', insertOnly: false },
      { source: 'public.b1', insertOnly: false },
    ]);
    expect(again.executed).toEqual([]);
    expect(again.names).toEqual(['pub_exact']);
    await applicationWrites('a1');
    await applicationWrites('b1');
    // A table nobody published is untouched, its writes too (it has no replica identity).
    await applicationWrites('other1');
  });

  it('alters the publication when the table set or its options change', async () => {
    await table('a2', true);
    await table('b2', true);
    await ensurePublications(sql, 'pub_alter', [{ source: 'public.a2', insertOnly: false }]);
    const grown = await ensurePublications(sql, 'pub_alter', [
      { source: 'public.a2', insertOnly: false },
      { source: 'public.b2', insertOnly: false },
    ]);
    expect(grown.executed).toEqual([`ALTER PUBLICATION "pub_alter" SET TABLE "public"."a2", "public"."b2"`]);
    expect(await published('pub_alter')).toEqual(['public.a2', 'public.b2']);

    const shrunk = await ensurePublications(sql, 'pub_alter', [{ source: 'public.b2', insertOnly: false }]);
    expect(shrunk.executed).toEqual([`ALTER PUBLICATION "pub_alter" SET TABLE "public"."b2"`]);
    expect(await published('pub_alter')).toEqual(['public.b2']);

    await admin.unsafe(
      `ALTER PUBLICATION pub_alter SET (publish = 'insert', publish_via_partition_root = false)`,
    );
    const reset = await ensurePublications(sql, 'pub_alter', [{ source: 'public.b2', insertOnly: false }]);
    expect(reset.executed).toEqual([
      `ALTER PUBLICATION "pub_alter" SET (publish = 'insert, update, delete, truncate', publish_via_partition_root = true)`,
    ]);
    expect(await options('pub_alter')).toMatchObject({ pubupdate: true, pubdelete: true, pubviaroot: true });
    await applicationWrites('a2');
    await applicationWrites('b2');
  });

  it('puts insertOnly tables in a second, insert-only publication; all insertOnly: only that one', async () => {
    await table('keyed3', true);
    await table('log3', false);
    const setup = await ensurePublications(sql, 'pub_ins', [
      { source: 'public.keyed3', insertOnly: false },
      { source: 'public.log3', insertOnly: true },
    ]);
    expect(insertOnlyPublicationName('pub_ins')).toBe('pub_ins_ins');
    expect(setup.names).toEqual(['pub_ins', 'pub_ins_ins']);
    expect(setup.executed[1]).toBe(
      `CREATE PUBLICATION "pub_ins_ins" FOR TABLE "public"."log3" WITH (publish = 'insert', publish_via_partition_root = true)`,
    );
    expect(await published('pub_ins')).toEqual(['public.keyed3']);
    expect(await published('pub_ins_ins')).toEqual(['public.log3']);
    expect(await options('pub_ins_ins')).toMatchObject({
      pubinsert: true,
      pubupdate: false,
      pubdelete: false,
      pubtruncate: false,
      pubviaroot: true,
    });
    await applicationWrites('keyed3');
    await applicationWrites('log3');

    const only = await ensurePublications(sql, 'pub_only', [{ source: 'public.log3', insertOnly: true }]);
    expect(only.names).toEqual(['pub_only_ins']);
    expect(await options('pub_only')).toBeUndefined();
    await applicationWrites('log3');

    // Moving the table out of insertOnly empties the _ins publication (and it is no longer named).
    await admin.unsafe('ALTER TABLE log3 REPLICA IDENTITY FULL');
    const moved = await ensurePublications(sql, 'pub_ins', [
      { source: 'public.keyed3', insertOnly: false },
      { source: 'public.log3', insertOnly: false },
    ]);
    expect(moved.names).toEqual(['pub_ins']);
    expect(await published('pub_ins_ins')).toEqual([]);
    expect(await published('pub_ins')).toEqual(['public.keyed3', 'public.log3']);
    await applicationWrites('log3');
  });

  it('names a long insert-only publication within 63 bytes, distinct per publication', () => {
    const long = `p${'x'.repeat(62)}`;
    const name = insertOnlyPublicationName(long);
    expect(name.length).toBeLessThanOrEqual(63);
    expect(name).toMatch(/^[a-z0-9_]+$/);
    expect(name).not.toBe(insertOnlyPublicationName(`q${'x'.repeat(62)}`));
    expect(name).not.toBe(long);
  });

  it('refuses a table without primary key or replica identity (Postgres would break its UPDATEs); accepts it after REPLICA IDENTITY FULL or as insertOnly', async () => {
    await table('nopk4', false);
    // What the refusal guards against: published for update/delete as it is, the application's
    // own UPDATE and DELETE fail.
    await admin.unsafe('CREATE PUBLICATION raw4 FOR TABLE nopk4');
    const broken = await admin.unsafe(`UPDATE nopk4 SET note = 'x' WHERE id = 1`).catch((e: unknown) => e);
    expect(String((broken as Error).message)).toMatch(/does not have a replica identity/);
    const brokenDelete = await admin.unsafe('DELETE FROM nopk4 WHERE id = 1').catch((e: unknown) => e);
    expect(String((brokenDelete as Error).message)).toMatch(/does not have a replica identity/);
    await admin.unsafe('DROP PUBLICATION raw4');
    await applicationWrites('nopk4');

    const e = await refusal(
      ensurePublications(sql, 'pub_nopk', [{ source: 'public.nopk4', insertOnly: false }]),
      'CDC_NO_REPLICA_IDENTITY',
    );
    expect(e.message).toContain('public.nopk4');
    expect(e.message).toContain('ALTER TABLE "public"."nopk4" REPLICA IDENTITY FULL;');
    expect(e.message).toContain('insertOnly: true');
    expect(await options('pub_nopk')).toBeUndefined();
    await applicationWrites('nopk4');

    const asLog = await ensurePublications(sql, 'pub_nopk_log', [
      { source: 'public.nopk4', insertOnly: true },
    ]);
    expect(asLog.names).toEqual(['pub_nopk_log_ins']);
    await applicationWrites('nopk4');

    await admin.unsafe('ALTER TABLE nopk4 REPLICA IDENTITY FULL');
    const full = await ensurePublications(sql, 'pub_nopk', [{ source: 'public.nopk4', insertOnly: false }]);
    expect(full.names).toEqual(['pub_nopk']);
    expect(full.tables.get('public.nopk4')).toMatchObject({ replicaIdentity: 'f', hasPrimaryKey: false });
    await applicationWrites('nopk4');
  });

  it('refuses REPLICA IDENTITY NOTHING even with a primary key; accepts an index identity', async () => {
    await table('nothing5', true);
    await admin.unsafe('ALTER TABLE nothing5 REPLICA IDENTITY NOTHING');
    const e = await refusal(
      ensurePublications(sql, 'pub_nothing', [{ source: 'public.nothing5', insertOnly: false }]),
      'CDC_NO_REPLICA_IDENTITY',
    );
    expect(e.message).toContain('ALTER TABLE "public"."nothing5" REPLICA IDENTITY DEFAULT;');
    expect(e.message).toContain('ALTER TABLE "public"."nothing5" REPLICA IDENTITY FULL;');
    await applicationWrites('nothing5');

    await table('byindex5', false);
    await admin.unsafe(
      'CREATE UNIQUE INDEX byindex5_id ON byindex5 (id); ALTER TABLE byindex5 REPLICA IDENTITY USING INDEX byindex5_id',
    );
    const setup = await ensurePublications(sql, 'pub_index', [
      { source: 'public.byindex5', insertOnly: false },
    ]);
    expect(setup.tables.get('public.byindex5')).toMatchObject({ replicaIdentity: 'i', hasPrimaryKey: false });
    await applicationWrites('byindex5');
  });

  it('refuses an existing FOR ALL TABLES publication of that name', async () => {
    await table('a6', true);
    await admin.unsafe('CREATE PUBLICATION pub_all FOR ALL TABLES');
    try {
      const e = await refusal(
        ensurePublications(sql, 'pub_all', [{ source: 'public.a6', insertOnly: false }]),
        'CDC_PUBLICATION_ALL_TABLES',
      );
      expect(e.message).toContain('DROP PUBLICATION "pub_all";');
      expect(e.message).toContain('cdc.publication');
    } finally {
      await admin.unsafe('DROP PUBLICATION pub_all');
    }
  });

  it('refuses a missing table', async () => {
    const e = await refusal(
      ensurePublications(sql, 'pub_missing', [{ source: 'public.nowhere', insertOnly: false }]),
      'SOURCE_TABLE_MISSING',
    );
    expect(e.message).toContain('public.nowhere');
  });

  it('gives a role without privileges CDC_PUBLICATION_PRIVILEGE with the statement for an admin', async () => {
    await table('a7', true);
    await withRole('nopriv', '', async (roleSql, role) => {
      await admin.unsafe(`GRANT SELECT ON a7 TO ${role}`);
      const e = await refusal(
        ensurePublications(roleSql, 'pub_priv', [{ source: 'public.a7', insertOnly: false }]),
        'CDC_PUBLICATION_PRIVILEGE',
      );
      expect(e.message).toContain(
        `CREATE PUBLICATION "pub_priv" FOR TABLE "public"."a7" WITH (publish = 'insert, update, delete, truncate', publish_via_partition_root = true);`,
      );
      expect(e.message).toContain(`role "${role}"`);
      expect(await options('pub_priv')).toBeUndefined();

      // Created by an admin as planned: the role finds it matching and needs nothing more.
      const plan = await planPublications(roleSql, 'pub_priv', [{ source: 'public.a7', insertOnly: false }]);
      for (const s of plan.statements) await admin.unsafe(s);
      const setup = await ensurePublications(roleSql, 'pub_priv', [
        { source: 'public.a7', insertOnly: false },
      ]);
      expect(setup.executed).toEqual([]);

      // A change it may not make (the admin owns the publication) names the ALTER.
      await table('b7', true);
      const alter = await refusal(
        ensurePublications(roleSql, 'pub_priv', [
          { source: 'public.a7', insertOnly: false },
          { source: 'public.b7', insertOnly: false },
        ]),
        'CDC_PUBLICATION_PRIVILEGE',
      );
      expect(alter.message).toContain(`ALTER PUBLICATION "pub_priv" SET TABLE "public"."a7", "public"."b7";`);
    });
  });
});

describe('preflightCdcSource', () => {
  it('reports wal_level, version, slots, senders, an absent slot, wal_keep and the publication to create, creating nothing', async () => {
    await table('a8', true);
    const slot = `pf_absent_${suffix}`;
    const items = await preflightCdcSource(sql, {
      slot,
      publication: 'pub_pf',
      tables: [{ source: 'public.a8', insertOnly: false }],
    });
    expect(items.map((i) => i.check)).toEqual([
      'wal_level',
      'version',
      'replication',
      'slots',
      'senders',
      'slot',
      'wal_keep',
      'publication',
      'watermarks',
    ]);
    expect(line(items, 'watermarks')).toMatchObject({ status: 'ok' });
    expect(line(items, 'watermarks').message).toContain('pg_logical_emit_message is allowed');
    expect(line(items, 'wal_level')).toMatchObject({ status: 'ok', message: 'wal_level is logical' });
    expect(line(items, 'version').status).toBe('ok');
    expect(line(items, 'replication')).toMatchObject({ status: 'ok' });
    expect(line(items, 'slots').status).toBe('ok');
    expect(line(items, 'senders').status).toBe('ok');
    expect(line(items, 'slot')).toMatchObject({ status: 'ok' });
    expect(line(items, 'slot').message).toContain('will be created on first start');
    // The harness keeps the default max_slot_wal_keep_size = -1.
    expect(line(items, 'wal_keep')).toMatchObject({ status: 'warn', code: 'CDC_WAL_UNBOUNDED' });
    expect(line(items, 'wal_keep').message).toContain('full disk');
    const pub = line(items, 'publication');
    expect(pub.status).toBe('ok');
    expect(pub.message).toContain(
      'will be created on first start: CREATE PUBLICATION "pub_pf" FOR TABLE "public"."a8"',
    );
    // Nothing was created.
    expect(await options('pub_pf')).toBeUndefined();
    expect(await admin`SELECT 1 FROM pg_replication_slots WHERE slot_name = ${slot}`).toHaveLength(0);

    await ensurePublications(sql, 'pub_pf', [{ source: 'public.a8', insertOnly: false }]);
    const after = await preflightCdcSource(sql, {
      slot,
      publication: 'pub_pf',
      tables: [{ source: 'public.a8', insertOnly: false }],
    });
    expect(line(after, 'publication')).toMatchObject({
      status: 'ok',
      message: '"pub_pf" holds exactly public.a8',
    });
  });

  it('reports an existing slot: plugin, activity, confirmed_flush_lsn, lag; a foreign plugin fails', async () => {
    const slot = `pf_slot_${suffix}`;
    await admin`SELECT pg_create_logical_replication_slot(${slot}, 'pgoutput')`;
    try {
      const items = await preflightCdcSource(sql, { slot, publication: 'pub_pf_slot', tables: [] });
      const s = line(items, 'slot');
      // No capture reads it: a warning, since the server keeps its WAL until one does.
      expect(s).toMatchObject({ status: 'warn', code: 'CDC_SLOT_IDLE' });
      expect(s.message).toContain(`slot "${slot}" exists (pgoutput, inactive, wal_status reserved`);
      expect(s.message).toContain('no capture reads it');
      expect(s.message).toMatch(/confirmed_flush_lsn [0-9A-F]+\/[0-9A-F]+/);
      expect(s.message).toContain('of WAL retained behind restart_lsn');
      expect(line(items, 'slots').message).toContain(`slot "${slot}" exists`);
    } finally {
      await admin`SELECT pg_drop_replication_slot(${slot})`;
    }
    const foreign = `pf_decoding_${suffix}`;
    await admin`SELECT pg_create_logical_replication_slot(${foreign}, 'test_decoding')`;
    try {
      const items = await preflightCdcSource(sql, { slot: foreign, publication: 'pub_pf_slot', tables: [] });
      expect(line(items, 'slot')).toMatchObject({ status: 'fail', code: 'CDC_SLOT_FOREIGN' });
      expect(line(items, 'slot').message).toContain('test_decoding');
    } finally {
      await admin`SELECT pg_drop_replication_slot(${foreign})`;
    }
  });

  it('fails replication for a LOGIN role without REPLICATION (ALTER ROLE), and the publication it may not create', async () => {
    await table('a9', true);
    await withRole('norepl', '', async (roleSql, role) => {
      await admin.unsafe(`GRANT SELECT ON a9 TO ${role}`);
      const items = await preflightCdcSource(roleSql, {
        slot: `pf_norepl_${suffix}`,
        publication: 'pub_norepl',
        tables: [{ source: 'public.a9', insertOnly: false }],
      });
      const r = line(items, 'replication');
      expect(r).toMatchObject({ status: 'fail', code: 'CDC_REPLICATION_PRIVILEGE' });
      expect(r.message).toContain(`ALTER ROLE "${role}" REPLICATION;`);
      const p = line(items, 'publication');
      expect(p).toMatchObject({ status: 'fail', code: 'CDC_PUBLICATION_PRIVILEGE' });
      expect(p.message).toContain('CREATE PUBLICATION "pub_norepl"');
    });
    await withRole('repl', 'REPLICATION', async (roleSql, role) => {
      const items = await preflightCdcSource(roleSql, {
        slot: `pf_repl_${suffix}`,
        publication: 'p',
        tables: [],
      });
      expect(line(items, 'replication')).toMatchObject({
        status: 'ok',
        message: `role "${role}" has REPLICATION`,
      });
    });
  });

  it('fails the publication line with the no-replica-identity refusal', async () => {
    await table('nopk10', false);
    const items = await preflightCdcSource(sql, {
      slot: `pf_nopk_${suffix}`,
      publication: 'pub_pf_nopk',
      tables: [{ source: 'public.nopk10', insertOnly: false }],
    });
    const p = line(items, 'publication');
    expect(p).toMatchObject({ status: 'fail', code: 'CDC_NO_REPLICA_IDENTITY' });
    expect(p.message).toContain('ALTER TABLE "public"."nopk10" REPLICA IDENTITY FULL;');
  });
});

describe('preflightCdcTable', () => {
  it('says how unchanged TOAST values are filled: reread by key, exact under FULL', async () => {
    await table('toast11', true);
    const reread = await preflightCdcTable(sql, { source: 'public.toast11', insertOnly: false });
    expect(reread.status).toBe('ok');
    expect(reread.message).toContain('unchangedToast: reread');
    expect(reread.message).toContain('"note", "n"');
    expect(reread.message).not.toContain('"id"');
    await admin.unsafe('ALTER TABLE toast11 REPLICA IDENTITY FULL');
    const exact = await preflightCdcTable(sql, { source: 'public.toast11', insertOnly: false });
    expect(exact.message).toContain('unchanged TOAST values come from the old row (exact)');
    const missing = await preflightCdcTable(sql, { source: 'public.nowhere', insertOnly: false });
    expect(missing).toMatchObject({ status: 'fail', code: 'SOURCE_TABLE_MISSING' });
  });
});

/**
 * `checkPipeline` on a spec with postgres cdc tables. The spec gate (shared/config/modes.ts)
 * refuses them until the postgres driver has its log reader (`openCdc`), so the spec is
 * hand-built from a parsed one: the wiring is tested now, the CLI test in check.test.ts runs once
 * the gate opens.
 */
describe('tidemark check with postgres cdc tables (in process, hand-built spec)', () => {
  it('adds the change-stream lines after the connect line, then each cdc table its table and toast lines', async () => {
    await table('inc12', true);
    await table('keyed12', true);
    await table('log12', false);
    const dir = mkdtempSync(join(tmpdir(), 'tidemark-cdc-check-'));
    try {
      const parsed = parseSpec({
        pipeline: 'cdccheck',
        sources: { app: { kind: 'postgres', url: db.url, connectTimeoutSeconds: 5 } },
        state: { dir: join(dir, 'state') },
        lake: { uri: `file://${join(dir, 'lake')}` },
        tables: [
          {
            source: 'app',
            table: 'public.inc12',
            mode: 'incremental',
            cursor: 'id',
            writeMode: 'upsert',
            lagSeconds: 0,
          },
        ],
      });
      const cdc = (table: string, insertOnly: boolean): TableSpecConfig => ({
        source: 'app',
        table,
        mode: 'cdc',
        writeMode: 'append',
        exclude: [],
        onWiden: 'stop',
        snapshot: 'never',
        onTruncate: 'record',
        insertOnly,
        unchangedToast: 'reread',
      });
      const spec: Spec = {
        ...parsed,
        tables: [
          ...parsed.tables,
          cdc('public.keyed12', false),
          cdc('public.log12', true),
          cdc('public.nopk12', false),
        ],
      };
      await table('nopk12', false);
      const report = await checkPipeline(spec);
      const rows = report.lines.map((l) => [l.subject, l.check, l.status]);
      const { slot, publication } = cdcSettings(spec, 'app');
      expect(rows).toEqual([
        ['sources.app', 'connect', 'ok'],
        ['public.inc12', 'table', 'ok'],
        ...report.lines
          .filter((l) => l.subject === 'public.inc12' && l.check !== 'table')
          .map((l) => [l.subject, l.check, l.status]),
        ['sources.app', 'wal_level', 'ok'],
        ['sources.app', 'version', 'ok'],
        ['sources.app', 'replication', 'ok'],
        ['sources.app', 'slots', 'ok'],
        ['sources.app', 'senders', 'ok'],
        ['sources.app', 'slot', 'ok'],
        ['sources.app', 'wal_keep', 'warn'],
        ['sources.app', 'publication', 'fail'],
        ['sources.app', 'watermarks', 'ok'],
        ['public.keyed12', 'table', 'ok'],
        ['public.keyed12', 'toast', 'ok'],
        ['public.keyed12', 'writeMode', 'ok'],
        ['public.log12', 'table', 'ok'],
        ['public.log12', 'toast', 'ok'],
        ['public.log12', 'writeMode', 'ok'],
        ['public.nopk12', 'table', 'ok'],
        ['public.nopk12', 'toast', 'ok'],
        ['public.nopk12', 'writeMode', 'ok'],
        ['state', 'dir', 'ok'],
        ['lake', 'dir', 'ok'],
        ['lake', 'catalog', 'ok'],
      ]);
      const pub = report.lines.find((l) => l.check === 'publication')!;
      expect(pub.code).toBe('CDC_NO_REPLICA_IDENTITY');
      expect(pub.message).toContain('ALTER TABLE "public"."nopk12" REPLICA IDENTITY FULL;');
      expect(report.lines.find((l) => l.check === 'slot')!.message).toContain(
        `slot "${slot}" does not exist yet`,
      );
      expect(report.lines.some((l) => l.code === 'CDC_NOT_CHECKED')).toBe(false);
      expect(
        report.lines.find((l) => l.subject === 'public.keyed12' && l.check === 'toast')!.message,
      ).toContain('unchangedToast: reread');
      expect(report.passed).toBe(false);
      // A check creates nothing.
      expect(await options(publication!)).toBeUndefined();
      expect(await options(insertOnlyPublicationName(publication!))).toBeUndefined();
      expect(await admin`SELECT 1 FROM pg_replication_slots WHERE slot_name = ${slot!}`).toHaveLength(0);

      // Fixed as the line says, the source passes (the warning on unbounded WAL stays).
      await admin.unsafe('ALTER TABLE nopk12 REPLICA IDENTITY FULL');
      const fixed = await checkPipeline(spec);
      expect(fixed.lines.find((l) => l.check === 'publication')).toMatchObject({ status: 'ok' });
      expect(fixed.lines.find((l) => l.check === 'publication')!.message).toContain(
        `"${publication}" will be created on first start: CREATE PUBLICATION`,
      );
      expect(fixed.passed).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
