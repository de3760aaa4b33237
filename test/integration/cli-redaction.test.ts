/**
 * Secrets through the real CLI (bin/tidemark.js in a child process), for the passwords that
 * broke redaction before: percent-encoded `: / # ?`, an un-encoded `:`, a query-string password,
 * and spaces with unicode. For each, `validate` and a failing `run` over four sources: Postgres
 * and MariaDB at an unreachable 127.0.0.1 port, and the harness servers with a wrong password. No
 * output may hold a run of >= 4 characters of the password in any spelling that the CLI would
 * not print anyway (test/harness/leaks.ts): "anyway" is the output of the same commands on a
 * spec whose passwords are `***`. The host, port and database stay visible.
 *
 * A user-info with an un-encoded `@ / # ?` (the host cannot be told from the password) is refused
 * by every command before it connects, naming the setting and the encodings
 * (shared/config/source-url.ts). Property: generated passwords of `@ / : # ?` and letters, as
 * written and percent-encoded, through `validate`, `check`, `run` and `cdc` against the harness
 * servers: no run of 4 characters of any password in any output at all.
 *
 * A password with an `@`, percent-encoded, connects for each driver.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import mysql from 'mysql2/promise';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEAK_RUN, leakedRuns, spellingsOf } from '../harness/leaks.js';
import { freshMysqlDatabase } from '../harness/mysql.js';
import { type FreshDatabase, freshPgDatabase } from '../harness/pg.js';
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

/**
 * A spec file over `sources`, one table each (local state and lake): incremental tables, or with
 * `mode: 'cdc'` cdc tables (each mysql source its own server id).
 */
function writeSpec(sources: readonly Source[], opts: { lagOnly?: boolean; mode?: 'cdc' } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-cli-redaction-'));
  const file = join(dir, 'tidemark.yaml');
  const cdc = opts.mode === 'cdc';
  const spec = {
    pipeline: 'cli-redaction',
    sources: Object.fromEntries(
      sources.map((s, i) => [
        s.name,
        {
          kind: s.kind,
          url: s.url,
          connectTimeoutSeconds: 10,
          ...(cdc && s.kind === 'mysql' ? { cdc: { serverId: 28_000 + i } } : {}),
        },
      ]),
    ),
    state: { dir: './state' },
    lake: { uri: 'file://./lake' },
    tables: sources.map((s) => ({
      source: s.name,
      table: s.table,
      target: `${s.name}.orders`,
      writeMode: 'append',
      ...(cdc
        ? { mode: 'cdc', snapshot: 'never' }
        : { mode: 'incremental', cursor: 'updated_at', lagSeconds: 0, lagOnly: opts.lagOnly ?? false }),
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
  { title: 'an un-encoded :', written: 'pa:ss:Wo:rdQuartz', placement: { at: 'userinfo' } },
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

  /**
   * For each password (spelled as in the URL), a Postgres and a MariaDB source at the harness
   * servers, logging in as their user with that (wrong) password: `<prefix><i>` and `<prefix><i>my`.
   */
  function sourcesOf(passwords: readonly string[], prefix: string): Source[] {
    const { pg, mysql: my } = servers();
    const myDb = my.pathname.slice(1);
    return passwords.flatMap((written, i): Source[] => [
      {
        name: `${prefix}${i}`,
        kind: 'postgres',
        url: `postgres://${pg.username}:${written}@${pg.host}${pg.pathname}`,
        visible: `postgres://${pg.username}:***@${pg.host}${pg.pathname}`,
        table: 'public.orders',
      },
      {
        name: `${prefix}${i}my`,
        kind: 'mysql',
        url: `mysql://${my.username}:${written}@${my.host}${my.pathname}`,
        visible: `mysql://${my.username}:***@${my.host}${my.pathname}`,
        table: `${myDb}.orders`,
      },
    ]);
  }

  /** Every run of >= LEAK_RUN characters of a password, in any spelling, found in `output` at all. */
  function strictRuns(output: string, passwords: readonly string[]): string[] {
    const secrets = passwords.flatMap((p) => spellingsOf(p)).flatMap((p) => spellingsOf(p));
    return leakedRuns(output, secrets, '').filter((run) => Array.from(run).length >= LEAK_RUN);
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
    // One headline per table; a long reason's details follow on indented lines (args.ts errorText).
    expect(all.run.stderr.split('\n').filter((l) => l.startsWith('tidemark:'))).toHaveLength(
      CASES.length * 4,
    );
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

  describe('a user-info with an un-encoded @ / # ? is refused by every command before it connects', () => {
    /** Every line names the setting and the encodings. */
    const FIXES = ['"@" as %40', '"/" as %2F', '"#" as %23', '"?" as %3F', '":" in the user as %3A'];

    it("issue 28's trap: one line, the setting and the fix, no part of the password, for every command", () => {
      const password = 'hunter2@Zq9xK7/tail';
      const [app] = sourcesOf([password], 'app').filter((s) => s.kind === 'postgres');
      const specs = { incremental: writeSpec([app!]), cdc: writeSpec([app!], { mode: 'cdc' }) };
      for (const [command, spec] of [
        ['validate', specs.incremental],
        ['check', specs.incremental],
        ['run', specs.incremental],
        ['status', specs.incremental],
        ['check', specs.cdc],
        ['cdc', specs.cdc],
      ] as const) {
        const r = tidemark([command, '-c', spec]);
        const output = r.stdout + r.stderr;
        expect(r.code, `${command}: ${output}`).toBe(1);
        expect(r.stdout, command).toBe('');
        expect(r.stderr, command).toMatch(
          /^tidemark: sources\.app0\.url: has an "@" after an un-encoded "@"[^\n]*\n( {2}[^\n]*\n)*$/,
        );
        for (const fix of FIXES) expect(r.stderr, command).toContain(fix);
        expect(strictRuns(output, [password]), `${command}: ${output}`).toEqual([]);
      }
    });

    describe('generated passwords of letters and @ / : # ?, through validate, check, run and cdc (property)', () => {
      /**
       * One or two letters, then one of `specials`, repeated: every run of 4 characters holds a
       * special between letters, which no host, port, timestamp or word of the output does, so a
       * run found in the output is a leak, not chance. Fixed seed: the same passwords every time.
       */
      const generated = (specials: string, numRuns: number) =>
        fc.sample(
          fc
            .array(fc.tuple(fc.stringMatching(/^[A-Za-z]{1,2}$/), fc.constantFrom(...specials)), {
              minLength: 2,
              maxLength: 5,
            })
            .map((parts) => parts.map(([letters, special]) => letters + special).join(''))
            .filter((p) => specials === ':' || /[@/#?]/.test(p)),
          { seed: 28, numRuns },
        );
      /** Refused as written: the earlier trial's passwords and generated ones. */
      const ambiguous = ['p@ssw0rdQuartz', 'pa:ss/wo#rd?x', 'hunter2@Zq9xK7/tail', ...generated('@/:#?', 6)];
      /** Legal as written: a ':' in the password. */
      const colons = generated(':', 3);
      const passwords = [...ambiguous, ...colons];
      /** Each command's stdout + stderr, by spec. */
      const outputs = new Map<string, ReturnType<typeof tidemark>>();
      const commands = (label: string, spec: string, list: readonly string[]) => {
        for (const command of list) outputs.set(`${label} ${command}`, tidemark([command, '-c', spec]));
      };

      beforeAll(() => {
        const written = sourcesOf(ambiguous, 'w');
        commands('written', writeSpec(written), ['validate', 'check', 'run']);
        commands('written cdc', writeSpec(written, { mode: 'cdc' }), ['cdc']);
        // Percent-encoded, and the colon-only ones also as written: these connect, and fail to log in.
        const legal = [...sourcesOf(passwords.map(encodeURIComponent), 'e'), ...sourcesOf(colons, 'c')];
        commands('legal', writeSpec(legal), ['validate', 'check', 'run']);
        commands('legal cdc', writeSpec(legal, { mode: 'cdc' }), ['check', 'cdc']);
      });

      it('no run of 4 characters of any password, in any spelling, in any output', () => {
        expect(passwords.length).toBe(12);
        for (const [what, r] of outputs) {
          const output = r.stdout + r.stderr;
          expect(strictRuns(output, passwords), `${what}: ${output}`).toEqual([]);
        }
      });

      it('as written, every command refuses the spec, one line per URL with the fix', () => {
        for (const what of ['written validate', 'written check', 'written run', 'written cdc cdc']) {
          const r = outputs.get(what)!;
          expect(r.code, `${what}: ${r.stderr}`).toBe(1);
          expect(r.stdout, what).toBe('');
          const lines = r.stderr.trim().split('\n');
          expect(lines[0], what).toBe(`tidemark: ${ambiguous.length * 2} problems in the spec:`);
          expect(lines.slice(1).map((l) => l.slice(0, l.indexOf(':')))).toEqual(
            sourcesOf(ambiguous, 'w').map((s) => `  - sources.${s.name}.url`),
          );
          for (const line of lines.slice(1)) for (const fix of FIXES) expect(line).toContain(fix);
        }
      });

      it('percent-encoded (and a bare ":" as written), validate passes and every command reaches the servers', () => {
        const legal = [...sourcesOf(passwords.map(encodeURIComponent), 'e'), ...sourcesOf(colons, 'c')];
        expect(outputs.get('legal validate')!.code).toBe(0);
        const run = outputs.get('legal run')!;
        expect(run.code).toBe(1);
        for (const s of legal)
          expect(run.stderr).toMatch(
            new RegExp(`^tidemark: ${s.name}\\.orders: .*(password|[Aa]ccess denied)`, 'm'),
          );
        for (const what of ['legal check', 'legal cdc check', 'legal cdc cdc']) {
          const r = outputs.get(what)!;
          expect(r.code, `${what}: ${r.stdout}${r.stderr}`).toBe(1);
          for (const s of legal) expect(r.stdout + r.stderr, what).toContain(s.name);
        }
      });
    });
  });

  describe('a password with an @ connects percent-encoded, and is refused un-encoded', () => {
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

    /** Both sources, with the password spelled `written`. */
    function sources(written: string): Source[] {
      const pg = new URL(pgDb.url);
      const my = new URL(myDb.url);
      return [
        {
          name: 'pg',
          kind: 'postgres',
          url: `postgres://${role}:${written}@${pg.host}/${pgDb.name}`,
          visible: `postgres://${role}:***@${pg.host}/${pgDb.name}`,
          table: 'public.orders',
        },
        {
          name: 'my',
          kind: 'mysql',
          url: `mysql://${role}:${written}@${my.host}/${myDb.name}`,
          visible: `mysql://${role}:***@${my.host}/${myDb.name}`,
          table: `${myDb.name}.orders`,
        },
      ];
    }

    it('un-encoded, validate and run refuse it before connecting, naming each URL and %40', () => {
      const spec = writeSpec(sources(password), { lagOnly: true });
      for (const command of ['validate', 'run']) {
        const r = tidemark([command, '-c', spec]);
        expect(r.code, r.stderr).toBe(1);
        expect(r.stdout).toBe('');
        expect(r.stderr).toMatch(/^tidemark: 2 problems in the spec:\n/);
        for (const name of ['pg', 'my'])
          expect(r.stderr).toContain(`  - sources.${name}.url: has an "@" after`);
        expect(r.stderr).toContain('"@" as %40');
        expect(leakedRuns(r.stdout + r.stderr, spellingsOf(password), '')).toEqual([]);
      }
    });

    it('percent-encoded, runs both tables, and validate shows the user and host but not the password', () => {
      const encoded = sources(encodeURIComponent(password));
      const spec = writeSpec(encoded, { lagOnly: true });
      const validate = tidemark(['validate', '-c', spec]);
      const run = tidemark(['run', '-c', spec]);
      const output = [validate.stdout, validate.stderr, run.stdout, run.stderr].join('\n');
      expect(leakedRuns(output, spellingsOf(password), '')).toEqual([]);
      for (const s of encoded) expect(validate.stdout).toContain(JSON.stringify(s.visible));
      // Log lines go to stderr (checked for leaks above); no error line among them.
      expect(run.stderr).not.toMatch(/^tidemark: /m);
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(/pg\.orders: 10 rows .*caught up/);
      expect(run.stdout).toMatch(/my\.orders: 2 rows .*caught up/);
    });
  });
});
