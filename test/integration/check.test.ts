/**
 * `tidemark check` and `tidemark invoke check` as an operator runs them: the real bin in a child
 * process against the harness's real servers (embedded Postgres, private MariaDB, dynalite,
 * s3rver). Every failure is provoked for real (a missing table, index, grant, DynamoDB, table,
 * bucket, an unwritable directory) and must name its fix and exit non-zero; a correct spec passes
 * with every line `ok` on Postgres and on MariaDB, and leaves no probe behind.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DescribeTableCommand, type DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import { ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cdcMissing } from '../../shared/config/modes.js';
import { driver } from '../../shared/drivers/registry.js';
import { freePort } from '../../shared/local/free-port.js';
import { DynamoCursorStore } from '../../shared/state/dynamo-cursor-store.js';
import { dynamoClient, s3Client } from '../harness/aws.js';
import { type CliResult, checkLine as line, runTidemark } from '../harness/check-cli.js';
import { type FreshDatabase, freshPgDatabase } from '../harness/pg.js';
import { testServers } from '../harness/servers.js';
import { mysqlFixture, postgresFixture, type SourceFixture } from './incremental/fixture.js';

/** Temp dirs of this file (specs, local state and lakes), removed when it ends. */
const dirs: string[] = [];
function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
/** The fixtures' limited login's password: it must never be printed. */
const LIMITED_PASSWORD = 'ro-pass';

/** Runs the real bin with `args` and `-c <spec file>` (the spec written to a fresh temp dir). */
function tidemark(args: string[], spec: object): Promise<CliResult> {
  return runTidemark(args, spec, tempDir('tidemark-check-'));
}

/** A DynamoDB table for a spec that should pass (created here: with an endpoint a run would create it). */
async function stateTable(dynamo: DynamoDBClient): Promise<string> {
  const name = `tidemark_check_${randomUUID().slice(0, 8)}`;
  await new DynamoCursorStore({ client: dynamo, tableName: name }).ensureTable();
  return name;
}

function awsState(table: string, endpoint = testServers().dynamoEndpoint) {
  return { dynamodb: { table, region: 'us-east-1', endpoint } };
}

/**
 * An s3rver lake of plain tables: s3rver ignores If-None-Match, so an Iceberg table's `file`
 * catalog fails there (its `lake catalog` line is check-iceberg.test.ts's).
 */
function awsLake(prefix: string, bucket = testServers().s3Bucket) {
  return {
    uri: `s3://${bucket}/${prefix}`,
    region: 'us-east-1',
    endpoint: testServers().s3Endpoint,
    forcePathStyle: true,
    tableFormat: 'plain',
  };
}

/** A spec for fixture `fx`: `tables` are [table, extra settings], state and lake as given. */
function specFor(
  fx: SourceFixture,
  tables: [string, Record<string, unknown>?][],
  where: { state: object; lake: object },
  url = fx.url,
) {
  return {
    pipeline: 'check-test',
    sources: { db: { kind: fx.kind, url, connectTimeoutSeconds: 5 } },
    ...where,
    tables: tables.map(([table, extra]) => ({
      source: 'db',
      table,
      mode: 'incremental',
      cursor: 'updated_at',
      writeMode: 'upsert',
      lagSeconds: 0,
      ...extra,
    })),
  };
}

/** A file state and lake in a fresh temp dir. */
function localWhere() {
  const dir = tempDir('tidemark-check-local-');
  return { state: { dir: join(dir, 'state') }, lake: { uri: `file://${join(dir, 'lake')}` } };
}

type CursorType = 'zoned' | 'wall' | 'nullable';

interface Dialect {
  /**
   * DDL of a table `name` in `schema` whose `updated_at` cursor has `cursorType`, with an index
   * leading with it or not, and a primary key `id` or none.
   */
  create(schema: string, name: string, cursorType: CursorType, indexed: boolean, keyed: boolean): string[];
  /** The exact GRANT the limited login is told to run. */
  grant(fx: SourceFixture): string;
  /** The statement a missing index is fixed with. */
  indexFix: RegExp;
}

const POSTGRES: Dialect = {
  create(schema, name, cursorType, indexed, keyed) {
    const type = { zoned: 'timestamptz NOT NULL', wall: 'timestamp NOT NULL', nullable: 'timestamptz' }[
      cursorType
    ];
    return [
      `CREATE TABLE ${schema}.${name} (id bigint${keyed ? ' PRIMARY KEY' : ''}, v int, updated_at ${type})`,
      ...(indexed ? [`CREATE INDEX ON ${schema}.${name} (updated_at, id)`] : []),
      `INSERT INTO ${schema}.${name} VALUES (1, 1, now()), (2, 2, ${cursorType === 'nullable' ? 'NULL' : 'now()'})`,
    ];
  },
  grant: (fx) => `GRANT pg_read_all_stats TO ${new URL(fx.url).pathname.slice(1)}_ro;`,
  indexFix: /CREATE INDEX CONCURRENTLY ON "public"\."noindex" \("updated_at", "id"\);/,
};

const MARIADB: Dialect = {
  create(schema, name, cursorType, indexed, keyed) {
    const type = {
      zoned: 'TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)',
      wall: 'DATETIME(6) NOT NULL',
      nullable: 'TIMESTAMP(6) NULL',
    }[cursorType];
    return [
      `CREATE TABLE ${schema}.${name} (id BIGINT${keyed ? ' PRIMARY KEY' : ''}, v INT, updated_at ${type}${indexed ? ', INDEX (updated_at, id)' : ''})`,
      `INSERT INTO ${schema}.${name} VALUES (1, 1, NOW(6)), (2, 2, ${cursorType === 'nullable' ? 'NULL' : 'NOW(6)'})`,
    ];
  },
  grant: (fx) => `GRANT PROCESS ON *.* TO '${new URL(fx.url).pathname.slice(1)}_ro'@'%';`,
  indexFix:
    /ALTER TABLE `check_\w+`\.`noindex` ADD INDEX \(`updated_at`, `id`\), ALGORITHM=INPLACE, LOCK=NONE;/,
};

function sourceChecks(name: string, makeFixture: () => Promise<SourceFixture>, dialect: Dialect): void {
  describe(`tidemark check: ${name}`, () => {
    let fx: SourceFixture;
    let schema: string;
    let dynamo: DynamoDBClient;
    let s3: S3Client;
    const t = (table: string) => `${schema}.${table}`;

    beforeAll(async () => {
      fx = await makeFixture();
      schema = fx.table.split('.')[0]!;
      dynamo = dynamoClient();
      s3 = s3Client();
      for (const [table, type, indexed, keyed] of [
        ['orders', 'zoned', true, true],
        ['noindex', 'zoned', false, true],
        ['wallclock', 'wall', true, true],
        ['nullable', 'nullable', true, true],
        ['nokey', 'zoned', true, false],
      ] as const) {
        for (const stmt of dialect.create(schema, table, type, indexed, keyed)) await fx.exec(stmt);
      }
    });
    afterAll(async () => {
      dynamo?.destroy();
      s3?.destroy();
      await fx?.drop();
    });

    it('passes a correct spec with every line ok, against DynamoDB and S3, and leaves no probe behind', async () => {
      const table = await stateTable(dynamo);
      const prefix = `check-${randomUUID().slice(0, 8)}`;
      const r = await tidemark(
        ['check'],
        specFor(fx, [[t('orders')]], { state: awsState(table), lake: awsLake(prefix) }),
      );
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.lines.map((l) => `${l.subject} ${l.check}`)).toEqual([
        'sources.db connect',
        ...['table', 'key', 'cursor', 'nulls', 'index', 'timezone', 'privilege', 'writeMode'].map(
          (c) => `${t('orders')} ${c}`,
        ),
        'state dynamodb',
        'lake s3',
      ]);
      expect(r.lines.filter((l) => l.status !== 'ok')).toEqual([]);
      expect(r.stdout).toMatch(/pipeline check-test: 11 ok, 0 warn, 0 fail; ready to run/);
      expect(line(r, 'sources.db', 'connect').message).toMatch(
        fx.kind === 'postgres' ? /^PostgreSQL 1\d/ : /^MariaDB 1\d/,
      );
      expect(line(r, 'state', 'dynamodb').message).toContain(
        `table ${table} at ${testServers().dynamoEndpoint}`,
      );
      // The probes are gone: no item in the state table, no object under the lake prefix.
      const items = await dynamo.send(new ScanCommand({ TableName: table }));
      expect(items.Items ?? []).toEqual([]);
      const objects = await s3.send(
        new ListObjectsV2Command({ Bucket: testServers().s3Bucket, Prefix: `${prefix}/` }),
      );
      expect(objects.Contents ?? []).toEqual([]);
    });

    it('fails a missing table, a missing key and NULL cursors, naming the fix; --table checks one table', async () => {
      const spec = specFor(
        fx,
        [
          [t('ordrs')],
          [t('noindex')],
          [t('wallclock')],
          [t('nullable')],
          [t('nullable'), { target: 'x.skipped', nullCursor: 'skip' }],
          [t('nokey'), { writeMode: 'append' }],
        ],
        localWhere(),
      );
      const r = await tidemark(['check'], spec);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe('');
      const missing = line(r, t('ordrs'), 'table');
      expect(missing.status).toBe('fail');
      expect(missing.message).toMatch(/does not exist or is not visible.*did you mean .*orders/);
      expect(r.lines.filter((l) => l.subject === t('ordrs'))).toHaveLength(1);

      const nulls = r.lines.filter((l) => l.subject === t('nullable') && l.check === 'nulls');
      expect(nulls.map((l) => l.status)).toEqual(['fail', 'ok']);
      expect(nulls[0]!.message).toMatch(
        /1 row\(s\) have NULL in cursor column "updated_at".*backfill.*nullCursor: skip/,
      );
      expect(nulls[1]!.message).toContain('nullCursor: skip');

      const key = line(r, t('nokey'), 'key');
      expect(key.status).toBe('fail');
      expect(key.message).toMatch(
        /has no primary key .*add a primary key \(or a UNIQUE NOT NULL cursor column\)/,
      );
      expect(r.lines.filter((l) => l.status === 'fail')).toEqual([missing, nulls[0], key]);
      expect(r.stdout).toMatch(/, 3 fail; fix the failed checks before running/);

      // A missing index and a wall-clock cursor only warn: exit 0 when nothing else fails.
      const noindex = await tidemark(['check', '--table', t('noindex')], spec);
      expect(noindex.code).toBe(0);
      const index = line(noindex, t('noindex'), 'index');
      expect(index.status).toBe('warn');
      expect(index.message).toMatch(dialect.indexFix);
      expect(noindex.lines.filter((l) => l.status !== 'ok')).toEqual([index]);
      expect(noindex.lines.some((l) => l.subject === t('wallclock'))).toBe(false);

      const wall = await tidemark(['check', '--table', t('wallclock')], spec);
      expect(wall.code).toBe(0);
      const zone = line(wall, t('wallclock'), 'timezone');
      expect(zone.status).toBe('warn');
      expect(zone.message).toMatch(/sets its own .*time.?zone.*misreads.*docs\/cursor\.md/i);
    });

    it('fails a login without the privilege to see other transactions with the exact GRANT; lagOnly passes', async () => {
      const limited = await fx.limitedUserUrl();
      const r = await tidemark(['check'], specFor(fx, [[t('orders')]], localWhere(), limited));
      expect(r.code).toBe(1);
      const privilege = line(r, t('orders'), 'privilege');
      expect(privilege.status).toBe('fail');
      expect(privilege.message).toContain(dialect.grant(fx));
      expect(privilege.message).toContain('lagOnly: true');
      expect(r.lines.filter((l) => l.status === 'fail')).toEqual([privilege]);

      const lagOnly = await tidemark(
        ['check'],
        specFor(fx, [[t('orders'), { lagOnly: true, lagSeconds: 30 }]], localWhere(), limited),
      );
      expect(lagOnly.code).toBe(0);
      expect(lagOnly.lines.filter((l) => l.status !== 'ok')).toEqual([]);
      expect(line(lagOnly, t('orders'), 'privilege').message).toMatch(/lagOnly: true.*only the lag \(30 s\)/);
      for (const out of [r.stdout, r.stderr, lagOnly.stdout, lagOnly.stderr])
        expect(out).not.toContain(LIMITED_PASSWORD);
    });
  });
}

sourceChecks('Postgres', () => postgresFixture('check_pg'), POSTGRES);
sourceChecks('MariaDB', () => mysqlFixture('check_my'), MARIADB);

describe('tidemark check: state store and lake', () => {
  let fx: SourceFixture;
  let dynamo: DynamoDBClient;
  let table: string;

  beforeAll(async () => {
    fx = await postgresFixture('check_aws');
    await fx.createTable();
    dynamo = dynamoClient();
    table = await stateTable(dynamo);
  });
  afterAll(async () => {
    dynamo?.destroy();
    await fx?.drop();
  });

  it('fails an unreachable DynamoDB and a missing bucket, naming the fix', async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    const r = await tidemark(
      ['check'],
      specFor(fx, [[fx.table]], {
        state: awsState(table, closed),
        lake: awsLake('raw', `tidemark-missing-${randomUUID().slice(0, 8)}`),
      }),
    );
    expect(r.code).toBe(1);
    const state = line(r, 'state', 'dynamodb');
    expect(state.status).toBe('fail');
    expect(state.message).toMatch(
      new RegExp(
        `at ${closed}: no DynamoDB endpoint answered at ${closed} \\(ECONNREFUSED\\).*check state\\.dynamodb\\.endpoint and state\\.dynamodb\\.region`,
      ),
    );
    const lake = line(r, 'lake', 's3');
    expect(lake.status).toBe('fail');
    expect(lake.message).toMatch(/bucket tidemark-missing-\w+ does not exist .*; create it/);
    expect(r.lines.filter((l) => l.status === 'fail')).toEqual([state, lake]);
  });

  it('warns that a missing DynamoDB table (endpoint set) will be created by the run, and does not create it', async () => {
    const missing = `tidemark_check_missing_${randomUUID().slice(0, 8)}`;
    const r = await tidemark(
      ['check'],
      specFor(fx, [[fx.table]], { state: awsState(missing), lake: awsLake('raw') }),
    );
    expect(r.code).toBe(0);
    const state = line(r, 'state', 'dynamodb');
    expect(state.status).toBe('warn');
    expect(state.message).toMatch(
      /does not exist yet; with state\.dynamodb\.endpoint set the first run creates it/,
    );
    await expect(dynamo.send(new DescribeTableCommand({ TableName: missing }))).rejects.toMatchObject({
      name: 'ResourceNotFoundException',
    });
  });

  it('fails an unwritable lake dir and state dir; --json prints one parseable object per line and a summary', async () => {
    const dir = tempDir('tidemark-check-unwritable-');
    const file = join(dir, 'regular-file');
    writeFileSync(file, 'not a directory\n');
    const spec = specFor(fx, [[fx.table]], {
      state: { dir: join(file, 'state') },
      lake: { uri: `file://${join(file, 'lake')}` },
    });
    const r = await tidemark(['check', '--json'], spec);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('');
    const out = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const summary = out.at(-1)!;
    expect(summary).toEqual({
      type: 'summary',
      pipeline: 'check-test',
      ok: out.length - 3,
      warn: 0,
      fail: 2,
      passed: false,
    });
    const checks = out.slice(0, -1);
    expect(checks.every((c) => c.type === 'check')).toBe(true);
    const state = checks.find((c) => c.scope === 'state')!;
    expect(state).toMatchObject({ check: 'dir', status: 'fail', code: 'STATE_STORE_FAILED' });
    expect(state.message).toMatch(
      /cannot write to the state directory .*regular-file\/state \(ENOTDIR\); fix state\.dir/,
    );
    const lake = checks.find((c) => c.scope === 'lake')!;
    expect(lake).toMatchObject({ check: 'dir', status: 'fail', code: 'SINK_DIR_UNWRITABLE' });
    expect(lake.message).toMatch(
      /regular-file\/lake.*ENOTDIR.*lake\.uri .* must be a folder this user can create and write/,
    );
  });
});

describe('tidemark invoke check: the checks inside the bundled Lambda handler', () => {
  let fx: SourceFixture;
  let dynamo: DynamoDBClient;

  beforeAll(async () => {
    fx = await postgresFixture('check_invoke');
    await fx.createTable();
    dynamo = dynamoClient();
  });
  afterAll(async () => {
    dynamo?.destroy();
    await fx?.drop();
  });

  it('returns all ok for a correct spec and the failures for a broken one', async () => {
    const where = {
      state: awsState(await stateTable(dynamo)),
      lake: awsLake(`invoke-${randomUUID().slice(0, 8)}`),
    };
    const good = await tidemark(['invoke', 'check'], specFor(fx, [[fx.table]], where));
    expect(good.stderr).toBe('');
    expect(good.code).toBe(0);
    expect(good.lines.length).toBe(11);
    expect(good.lines.filter((l) => l.status !== 'ok')).toEqual([]);

    const limited = await fx.limitedUserUrl();
    const bad = await tidemark(
      ['invoke', 'check', '--json'],
      specFor(fx, [[fx.table], ['public.nosuch']], where, limited),
    );
    expect(bad.code).toBe(1);
    const out = bad.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, string>);
    const failed = out.filter((c) => c.status === 'fail').map((c) => `${c.subject} ${c.check} ${c.code}`);
    expect(failed).toEqual([
      `${fx.table} privilege SOURCE_PRIVILEGE`,
      'public.nosuch table SOURCE_TABLE_MISSING',
    ]);
    expect(out.at(-1)).toMatchObject({ type: 'summary', fail: 2, passed: false });
    expect(bad.stdout).not.toContain(LIMITED_PASSWORD);
  });
});

/**
 * Postgres cdc tables through the real bin. The spec gate refuses them until the postgres
 * driver has its log reader (`openCdc`); this runs by itself once it does (the same lines are
 * tested in process today: test/integration/postgres-cdc-publication.test.ts).
 */
describe.skipIf(cdcMissing(driver('postgres')).length > 0)('tidemark check: Postgres cdc tables', () => {
  let db: FreshDatabase;
  beforeAll(async () => {
    db = await freshPgDatabase('check_cdc');
    const sql = postgres(db.url, { max: 1, onnotice: () => undefined });
    await sql.unsafe(`CREATE TABLE orders (id int PRIMARY KEY, note text);
      CREATE TABLE events (at timestamptz NOT NULL, body jsonb);
      CREATE TABLE nokey (id int, note text)`);
    await sql.end();
  });
  afterAll(() => db?.drop());

  function cdcSpec(tables: [string, Record<string, unknown>?][]) {
    return {
      pipeline: 'check-cdc',
      sources: { db: { kind: 'postgres', url: db.url, connectTimeoutSeconds: 5 } },
      ...localWhere(),
      tables: tables.map(([table, extra]) => ({
        source: 'db',
        table,
        mode: 'cdc',
        snapshot: 'never',
        writeMode: 'append',
        ...extra,
      })),
    };
  }

  it('reports the change-stream lines and per table its toast line; a table without replica identity fails with the fix', async () => {
    const good = await tidemark(
      ['check'],
      cdcSpec([['public.orders'], ['public.events', { insertOnly: true }]]),
    );
    expect(good.code, good.stdout + good.stderr).toBe(0);
    for (const check of ['wal_level', 'version', 'replication', 'slots', 'senders', 'slot', 'publication'])
      expect(line(good, 'sources.db', check).status).toBe('ok');
    expect(line(good, 'sources.db', 'wal_keep').status).toBe('warn');
    expect(line(good, 'sources.db', 'slot').message).toContain('will be created on first start');
    expect(line(good, 'public.orders', 'toast').message).toContain('unchangedToast: reread');
    expect(line(good, 'public.events', 'table').status).toBe('ok');

    const bad = await tidemark(['check'], cdcSpec([['public.nokey']]));
    expect(bad.code).toBe(1);
    const pub = line(bad, 'sources.db', 'publication');
    expect(pub.status).toBe('fail');
    expect(pub.message).toContain('ALTER TABLE "public"."nokey" REPLICA IDENTITY FULL;');
  });
});
