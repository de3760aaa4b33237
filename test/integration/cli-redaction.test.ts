/**
 * Secrets through the real CLI (bin/tidemark.js in a child process), for the passwords that
 * broke redaction before: an un-encoded `@`, un-encoded `: / # ?`, a query-string password, and
 * spaces with unicode. For each, `validate` and a failing `run` over four sources: Postgres and
 * MariaDB at an unreachable 127.0.0.1 port, and the harness servers with a wrong password. No
 * output may hold a run of >= 4 characters of the password in any spelling that the CLI would
 * not print anyway (test/harness/leaks.ts): "anyway" is the output of the same commands on a
 * spec whose passwords are `***`. The host, port and database stay visible.
 *
 * One URL with an un-encoded `@` in the password also connects, for each driver: they split it at
 * the last `@`, where redaction does.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mysql from 'mysql2/promise';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshMysqlDatabase } from '../harness/mysql.js';
import { type FreshDatabase, freshPgDatabase } from '../harness/pg.js';
import { leakedRuns, spellingsOf } from '../harness/leaks.js';
import { testServers } from '../harness/servers.js';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'tidemark.js');
/** Nothing listens on port 1 of 127.0.0.1: connecting is refused at once. */
const UNREACHABLE = '127.0.0.1:1';

function tidemark(args: string[]) {
  const r = spawnSync(process.execPath, [BIN, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

interface Source {
  readonly name: string;
  readonly kind: 'postgres' | 'mysql';
  /** The URL as the user wrote it. */
  readonly url: string;
  /** The same URL with the password replaced by `***`: what may be printed. */
  readonly visible: string;
  readonly table: string;
}

/** A spec file over `sources`, one table each (local state and lake). */
function writeSpec(sources: readonly Source[], opts: { lagOnly?: boolean } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-cli-redaction-'));
  const file = join(dir, 'tidemark.yaml');
  const spec = {
    pipeline: 'cli-redaction',
    sources: Object.fromEntries(
      sources.map((s) => [s.name, { kind: s.kind, url: s.url, connectTimeoutSeconds: 10 }]),
    ),
    state: { dir: './state' },
    lake: { uri: 'file://./lake' },
    tables: sources.map((s) => ({
      source: s.name,
      table: s.table,
      target: `${s.name}.orders`,
      mode: 'incremental',
      cursor: 'updated_at',
      writeMode: 'append',
      lagSeconds: 0,
      lagOnly: opts.lagOnly ?? false,
    })),
  };
  // JSON is YAML: every character of the URLs arrives as written.
  writeFileSync(file, JSON.stringify(spec, null, 2));
  return file;
}

/** How a password sits in a URL: `user:<password>@` or a query parameter. */
type Placement =
  | { readonly at: 'userinfo' }
  | { readonly at: 'query'; readonly pg: string; readonly mysql: string };

interface Case {
  readonly title: string;
  /** The password as it is written in the URL. */
  readonly written: string;
  readonly placement: Placement;
}

const CASES: readonly Case[] = [
  { title: 'an un-encoded @', written: 'p@ssw0rdQuartz', placement: { at: 'userinfo' } },
  { title: 'un-encoded : / # ?', written: 'pa:ss/wo#rd?x', placement: { at: 'userinfo' } },
  {
    title: 'percent-encoded : / # ?',
    written: encodeURIComponent('pa:ss/wo#rd?x'),
    placement: { at: 'userinfo' },
  },
  { title: 'spaces and unicode', written: 'Gl€tscher Ünd 🔑 Firn', placement: { at: 'userinfo' } },
  {
    // libpq reads ?password=, mysql2 reads ?password1= (and ignores ?password=). No raw '&': the
    // drivers would read the rest as a parameter name, and mysql2 prints unknown names itself
    // (console.error), outside tidemark's output; decision 0004 (amended) says to encode it.
    title: 'a query-string password',
    written: 'Qu4rtz?Lake#9',
    placement: {
      at: 'query',
      pg: 'sslmode=disable&password=Qu4rtz?Lake#9',
      mysql: 'password1=Qu4rtz?Lake#9',
    },
  },
];

/** `scheme://user[:password]@host/db[?query]`, as written and as it may be printed. */
function url(scheme: string, user: string, host: string, db: string, c: Case, query: string | undefined) {
  if (c.placement.at === 'userinfo') {
    return {
      url: `${scheme}://${user}:${c.written}@${host}/${db}`,
      visible: `${scheme}://${user}:***@${host}/${db}`,
    };
  }
  const name = query!.slice(0, query!.indexOf(c.written));
  return {
    url: `${scheme}://${user}@${host}/${db}?${query}`,
    visible: `${scheme}://${user}@${host}/${db}?${name}***`,
  };
}

describe('the CLI never prints a password, whatever it contains', () => {
  const servers = () => ({ pg: new URL(testServers().pgUrl), mysql: new URL(testServers().mysqlUrl) });

  /** The four failing sources of a case, named `<prefix><where>`. */
  function sourcesFor(c: Case, prefix: string): Source[] {
    const { pg, mysql: my } = servers();
    const q = c.placement.at === 'query' ? c.placement : undefined;
    const pgDb = pg.pathname.slice(1);
    const myDb = my.pathname.slice(1);
    return [
      {
        name: `${prefix}pgdown`,
        kind: 'postgres',
        ...url('postgres', 'reader', UNREACHABLE, 'shop', c, q?.pg),
        table: 'public.orders',
      },
      {
        name: `${prefix}mydown`,
        kind: 'mysql',
        ...url('mysql', 'reader', UNREACHABLE, 'shop', c, q?.mysql),
        table: 'shop.orders',
      },
      // The harness servers' own users, with the wrong password.
      {
        name: `${prefix}pgwrong`,
        kind: 'postgres',
        ...url('postgresql', pg.username, pg.host, pgDb, c, q?.pg),
        table: 'public.orders',
      },
      {
        name: `${prefix}mywrong`,
        kind: 'mysql',
        ...url('mysql', my.username, my.host, myDb, c, q?.mysql),
        table: `${myDb}.orders`,
      },
    ];
  }

  /** validate, then run, on one spec: everything both printed. */
  function validateAndRun(sources: readonly Source[]) {
    const spec = writeSpec(sources);
    const validate = tidemark(['validate', '-c', spec]);
    const run = tidemark(['run', '-c', spec]);
    return { validate, run, output: [validate.stdout, validate.stderr, run.stdout, run.stderr].join('\n') };
  }

  // Every case in one spec (two CLI runs instead of two per case); each test reads its own lines.
  const sources = new Map<Case, Source[]>();
  let all: ReturnType<typeof validateAndRun>;
  /** What the CLI prints whatever the password: the same sources with `***` as the password. */
  let anyway: string;

  beforeAll(() => {
    for (const [i, c] of CASES.entries()) sources.set(c, sourcesFor(c, `c${i}`));
    all = validateAndRun([...sources.values()].flat());
    const control = sourcesFor({ ...CASES[0]!, written: '***' }, '');
    // One URL that does not parse, for the fixed words of that message too.
    control.push({ ...control[0]!, name: 'pgbad', url: `postgres://reader:***@${UNREACHABLE}x/shop` });
    const controlRun = validateAndRun(control);
    expect(controlRun.run.stderr).toContain('not a valid URL');
    anyway = controlRun.output;
  });

  it('validate succeeds and run fails, one line per table', () => {
    expect(all.validate.code, all.validate.stderr).toBe(0);
    expect(all.run.code).toBe(1);
    expect(all.run.stderr.trim().split('\n')).toHaveLength(CASES.length * 4);
  });

  for (const c of CASES) {
    it(`${c.title}: validate and a failing run print no part of it`, () => {
      const mine = sources.get(c)!;
      const visible = [anyway, ...[...sources.values()].flat().map((s) => s.visible)].join('\n');
      const secrets = spellingsOf(c.written).flatMap((s) => spellingsOf(s));
      expect(leakedRuns(all.output, secrets, visible), all.output).toEqual([]);

      const lines = all.run.stderr.split('\n');
      for (const s of mine) {
        expect(all.validate.stdout).toContain(JSON.stringify(s.visible));
        const line = lines.find((l) => l.startsWith(`tidemark: ${s.name}.orders: `));
        expect(line, `a line for ${s.name}`).toBeDefined();
        // Each line still says where it went, so an operator can act on it.
        if (line!.includes('not a valid URL')) expect(line!.endsWith(s.visible)).toBe(true);
        else expect(line).toContain(` ${new URL(s.visible.replace('***', 'x')).host}`);
      }
    });
  }

  describe('a password with an un-encoded @ connects: the drivers split at the last @, as redaction does', () => {
    const password = 'p@ssw0rdQuartz';
    const role = `redact_${randomBytes(4).toString('hex')}`;
    let pgDb: FreshDatabase;
    let myDb: FreshDatabase;

    beforeAll(async () => {
      pgDb = await freshPgDatabase('cli_redaction');
      const admin = postgres(pgDb.url, { max: 1, onnotice: () => {} });
      await admin.unsafe(`CREATE ROLE ${role} LOGIN PASSWORD '${password}';
        CREATE TABLE orders (id bigint PRIMARY KEY, updated_at timestamptz NOT NULL);
        INSERT INTO orders SELECT g, TIMESTAMP '2024-01-01' + g * INTERVAL '1 second' FROM generate_series(1, 10) g;
        GRANT SELECT ON orders TO ${role};`);
      await admin.end();
      myDb = await freshMysqlDatabase('cli_redaction');
      const my = await mysql.createConnection({ uri: myDb.url, multipleStatements: true });
      await my.query(`CREATE USER '${role}'@'%' IDENTIFIED BY '${password}';
        GRANT SELECT ON \`${myDb.name}\`.* TO '${role}'@'%';
        CREATE TABLE \`${myDb.name}\`.orders (id bigint PRIMARY KEY, updated_at datetime(6) NOT NULL);
        INSERT INTO \`${myDb.name}\`.orders VALUES (1, '2024-01-01 00:00:01'), (2, '2024-01-01 00:00:02');`);
      await my.end();
    });
    afterAll(async () => {
      await pgDb?.drop();
      const admin = postgres(testServers().pgUrl, { max: 1, onnotice: () => {} });
      await admin.unsafe(`DROP ROLE IF EXISTS ${role}`);
      await admin.end();
      await myDb?.drop();
      const my = await mysql.createConnection({ uri: testServers().mysqlUrl });
      await my.query(`DROP USER IF EXISTS '${role}'@'%'`);
      await my.end();
    });

    it('runs both tables, and validate shows the user and host but not the password', () => {
      const pg = new URL(pgDb.url);
      const my = new URL(myDb.url);
      const sources: Source[] = [
        {
          name: 'pg',
          kind: 'postgres',
          url: `postgres://${role}:${password}@${pg.host}/${pgDb.name}`,
          visible: `postgres://${role}:***@${pg.host}/${pgDb.name}`,
          table: 'public.orders',
        },
        {
          name: 'my',
          kind: 'mysql',
          url: `mysql://${role}:${password}@${my.host}/${myDb.name}`,
          visible: `mysql://${role}:***@${my.host}/${myDb.name}`,
          table: `${myDb.name}.orders`,
        },
      ];
      const spec = writeSpec(sources, { lagOnly: true });
      const validate = tidemark(['validate', '-c', spec]);
      const run = tidemark(['run', '-c', spec]);
      const output = [validate.stdout, validate.stderr, run.stdout, run.stderr].join('\n');
      expect(leakedRuns(output, spellingsOf(password), sources.map((s) => s.visible).join('\n'))).toEqual([]);
      for (const s of sources) expect(validate.stdout).toContain(JSON.stringify(s.visible));
      // Log lines go to stderr (checked for leaks above); no error line among them.
      expect(run.stderr).not.toMatch(/^tidemark: /m);
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(/pg\.orders: 10 rows .*caught up/);
      expect(run.stdout).toMatch(/my\.orders: 2 rows .*caught up/);
    });
  });
});
