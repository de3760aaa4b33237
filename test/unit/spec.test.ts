import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cdcSettings,
  defaultCdcName,
  findIncrementalTable,
  findTable,
  historyTarget,
  incrementalTables,
  lakeTargets,
  loadSpecFile,
  parseSpec,
  redactSpec,
  type Spec,
} from '../../shared/config/spec.js';
import { ConfigError } from '../../shared/contracts/errors.js';
import { registerDriver, unregisterDriver } from '../../shared/drivers/registry.js';
import { scriptedDriver } from '../harness/scripted-driver.js';

const base = () => ({
  pipeline: 'shop',
  sources: { app: { kind: 'postgres', url: 'postgres://u:secret@h:5432/db' } },
  state: { dir: '/tmp/state' },
  lake: { uri: 'file:///tmp/lake' },
  tables: [
    { source: 'app', table: 'public.orders', mode: 'incremental', cursor: 'updated_at', writeMode: 'append' },
  ],
});

/** The first incremental table of a parsed spec. */
const firstInc = (spec: Spec) => incrementalTables(spec)[0]!;

function errorOf(raw: unknown): ConfigError {
  try {
    parseSpec(raw, { env: {} });
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

describe('pipeline spec', () => {
  it('accepts the example file and fills defaults', () => {
    const spec = loadSpecFile(join(import.meta.dirname, '..', '..', 'tidemark.example.yaml'), {
      PGPASSWORD: 'pw',
    });
    const t = firstInc(spec);
    expect(t.pageSize).toBe(50_000);
    expect(t.nullCursor).toBe('refuse');
    expect(spec.lake.compression).toBe('zstd');
    expect(spec.sources.app!.url).toContain(':pw@');
    expect(spec.lake.uri.startsWith('file:///')).toBe(true);
  });

  it('lake.format: 1 by default, 2 on request, anything else refused naming the choices', () => {
    expect(parseSpec(base(), { env: {} }).lake.format).toBe(1);
    expect(
      parseSpec({ ...base(), lake: { uri: 'file:///tmp/lake', format: 2 } }, { env: {} }).lake.format,
    ).toBe(2);
    for (const bad of [3, 0, '2', 'v2', 1.5, null]) {
      const e = errorOf({ ...base(), lake: { uri: 'file:///tmp/lake', format: bad } });
      expect(e.path).toBe('lake.format');
      expect(e.message).toContain(`lake.format: must be 1 or 2`);
      expect(e.message).toContain(`got ${JSON.stringify(bad)}`);
    }
  });

  it('tables[].partitionBy: unset by default; known transforms taken; others and repeats refused at load', () => {
    expect(firstInc(parseSpec(base(), { env: {} })).partitionBy).toBeUndefined();
    const withPartitions = (partitionBy: unknown) => ({
      ...base(),
      tables: [{ ...base().tables[0]!, partitionBy }],
    });
    const fields = [
      { column: 'id', transform: 'bucket[16]' },
      { column: 'region', transform: 'identity' },
      { column: 'id', transform: 'truncate[1000]' },
      { column: '__commit_ts', transform: 'day' },
    ];
    expect(firstInc(parseSpec(withPartitions(fields), { env: {} })).partitionBy).toEqual(fields);
    for (const transform of ['bucket[0]', 'bucket', 'days', 'void', 'truncate[-1]', 'Day']) {
      const e = errorOf(withPartitions([{ column: 'id', transform }]));
      expect(e.path).toBe('tables[0].partitionBy[0].transform');
      expect(e.message).toContain('must be identity, bucket[N], truncate[W], year, month, day or hour');
    }
    const twice = errorOf(withPartitions([fields[0], fields[0]]));
    expect(twice.path).toBe('tables[0].partitionBy');
    expect(twice.message).toContain('a partition field is listed twice');
    expect(errorOf(withPartitions([{ column: 'id', transform: 'day', extra: 1 }])).path).toBe(
      'tables[0].partitionBy[0]',
    );
  });

  it('names the exact field and the fix', () => {
    const unknown = base() as Record<string, unknown>;
    (unknown.tables as Record<string, unknown>[])[0]!.cursr = 'x';
    expect(errorOf(unknown).message).toMatch(/^tables\[0\]: unknown field\(s\) "cursr"/);

    const noCursor = base();
    delete (noCursor.tables[0] as Partial<(typeof noCursor.tables)[0]>).cursor;
    expect(errorOf(noCursor).message).toMatch(/^tables\[0\]\.cursor: is required/);

    const badMode = base();
    (badMode.tables[0] as Record<string, unknown>).writeMode = 'merge';
    expect(errorOf(badMode).path).toBe('tables[0].writeMode');

    const badSource = base();
    badSource.tables[0]!.source = 'nope';
    expect(errorOf(badSource).message).toContain('tables[0].source: names source "nope"');

    const badLake = base();
    badLake.lake.uri = 'gs://x';
    expect(errorOf(badLake).message).toContain('lake.uri');

    const badSchedule = base();
    (badSchedule.tables[0] as Record<string, unknown>).schedule = 'every 5 minutes';
    expect(errorOf(badSchedule).message).toContain('rate(5 minutes)');

    const both = base() as Record<string, unknown>;
    both.state = { dir: '/x', dynamodb: { table: 'tbl' } };
    expect(errorOf(both).message).toContain('exactly one of "dynamodb" or "dir"');
  });

  it('accepts IANA zones and offsets as cursorTimeZone, nothing else', () => {
    for (const zone of ['America/New_York', 'UTC', 'Asia/Kolkata', '-05:00', '+05:30']) {
      const ok = base();
      (ok.tables[0] as Record<string, unknown>).cursorTimeZone = zone;
      expect(firstInc(parseSpec(ok)).cursorTimeZone).toBe(zone);
    }
    for (const zone of ['Mars/Base', "UTC'; DROP TABLE x; --", '5', '-25:00', '']) {
      const bad = base();
      (bad.tables[0] as Record<string, unknown>).cursorTimeZone = zone;
      expect(errorOf(bad).path, zone).toBe('tables[0].cursorTimeZone');
    }
  });

  it('lists every problem of a spec, each with its field and fix', () => {
    const bad = base() as Record<string, unknown>;
    (bad.tables as Record<string, unknown>[])[0]!.writeMode = 'merge';
    (bad.tables as Record<string, unknown>[])[0]!.pageSize = 0;
    (bad.lake as Record<string, unknown>).uri = 'gs://x';
    const e = errorOf(bad);
    expect(e.problems.map((p) => p.path).sort()).toEqual([
      'lake.uri',
      'tables[0].pageSize',
      'tables[0].writeMode',
    ]);
    expect(e.message).toMatch(/^3 problems in the spec:\n {2}- /);
    expect(e.message).not.toContain('more problem');
    const refs = base();
    refs.tables.push({ ...refs.tables[0]!, source: 'nope' }, { ...refs.tables[0]! });
    expect(errorOf(refs).problems.map((p) => p.path)).toEqual([
      'tables[1].source',
      'tables[1].target',
      'tables[2].target',
    ]);
  });

  it('reads the page byte budget and row cap as bytes or sizes with binary units, within bounds', () => {
    const t = firstInc(parseSpec(base()));
    expect(t.pageBytes).toBe(64 * 2 ** 20);
    expect(t.maxRowBytes).toBe(64 * 2 ** 20);
    const sized = base();
    Object.assign(sized.tables[0]!, { pageBytes: '16MiB', maxRowBytes: 300_000_000 });
    const u = firstInc(parseSpec(sized));
    expect(u.pageBytes).toBe(16 * 2 ** 20);
    expect(u.maxRowBytes).toBe(300_000_000);
    const spaced = base();
    Object.assign(spaced.tables[0]!, { pageBytes: '1 GiB' });
    expect(firstInc(parseSpec(spaced)).pageBytes).toBe(2 ** 30);

    const unit = base();
    Object.assign(unit.tables[0]!, { pageBytes: '64MB' });
    expect(errorOf(unit).message).toMatch(
      /^tables\[0\]\.pageBytes: must be a whole number of bytes or a size such as "64MiB"/,
    );
    const small = base();
    Object.assign(small.tables[0]!, { pageBytes: 1000 });
    expect(errorOf(small).message).toBe('tables[0].pageBytes: must be between 1 MiB and 1 GiB, got 1000 B');
    const big = base();
    Object.assign(big.tables[0]!, { maxRowBytes: '2GiB' });
    expect(errorOf(big).message).toContain(
      'tables[0].maxRowBytes: must be between 1 MiB and 1 GiB, got 2 GiB',
    );
    const fraction = base();
    Object.assign(fraction.tables[0]!, { pageBytes: 2 ** 20 + 0.5 });
    expect(errorOf(fraction).path).toBe('tables[0].pageBytes');
  });

  it('refuses a missing environment variable by name, and two tables writing one lake table', () => {
    const env = base();
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the spec's own ${env:NAME} syntax
    env.sources.app.url = 'postgres://u:${env:NOPE_PW}@h/db';
    expect(errorOf(env).message).toContain('NOPE_PW is not set');
    const dup = base();
    dup.tables.push({ ...dup.tables[0]! });
    expect(errorOf(dup).message).toContain('two tables write to lake table "public.orders"');
  });

  it('a history table needs writeMode upsert and a name no other table takes; lakeTargets lists it', () => {
    const append = base();
    Object.assign(append.tables[0]!, { history: true });
    expect(errorOf(append).message).toContain(
      'tables[0].history: history keeps the change log beside a current-state table, so it needs writeMode: upsert',
    );
    const taken = base();
    Object.assign(taken.tables[0]!, { history: true, writeMode: 'upsert' });
    taken.tables.push({
      ...taken.tables[0]!,
      history: false,
      target: 'public.orders_history',
    } as (typeof taken.tables)[0]);
    expect(errorOf(taken).message).toContain(
      'the history table "public.orders_history" is also another table\'s target',
    );
    const ok = base();
    Object.assign(ok.tables[0]!, { history: true, writeMode: 'upsert' });
    const spec = parseSpec(ok, { env: {} });
    expect(lakeTargets(spec.tables[0]!)).toEqual(['public.orders', 'public.orders_history']);
    expect(historyTarget(spec.tables[0]!)).toBe('public.orders_history');
    expect(lakeTargets(parseSpec(base(), { env: {} }).tables[0]!)).toEqual(['public.orders']);
  });

  it('redacts passwords wherever a spec is printed', () => {
    const spec = parseSpec(base());
    expect(JSON.stringify(redactSpec(spec))).not.toContain('secret');
    // The outside trial: an un-encoded @ printed most of the password (now refused by the spec,
    // test/unit/source-url.test.ts), ?password= all of it.
    const trial = base();
    trial.sources.app.url = 'postgres://reader:p%40ssw0rdQuartz@db:5432/shop?password=Qu4rtzQuery';
    (trial.lake as Record<string, unknown>).endpoint = 'http://key:s3cretKey@localhost:4566';
    const printed = redactSpec(parseSpec(trial));
    expect(printed.sources.app!.url).toBe('postgres://reader:***@db:5432/shop?password=***');
    expect(printed.lake.endpoint).toBe('http://key:***@localhost:4566');
    expect(printed.tables).toEqual(parseSpec(trial).tables);
  });

  it('finds tables by source name or target and lists known ones otherwise', () => {
    const spec = parseSpec(base());
    expect(findIncrementalTable(spec, 'public.orders', 'run').cursor).toBe('updated_at');
    expect(findTable(spec, 'public.orders').mode).toBe('incremental');
    expect(() => findTable(spec, 'public.nope')).toThrow(/known: public.orders/);
  });

  it('reports unreadable and invalid YAML files with their path', () => {
    const dir = mkdtempSync(join(tmpdir(), 'spec-'));
    const f = join(dir, 'bad.yaml');
    writeFileSync(f, 'pipeline: [unclosed');
    expect(() => loadSpecFile(f)).toThrow(/bad.yaml is not valid YAML/);
    expect(() => loadSpecFile(join(dir, 'missing.yaml'))).toThrow(/cannot read spec file/);
  });
});

/** A spec with one cdc table on source `app` of `kind` (the scripted kind streams; postgres does not). */
const cdcBase = (kind = 'scripted', table: Record<string, unknown> = {}) => ({
  pipeline: 'shop',
  sources: { app: { kind, url: 'postgres://u:secret@h:5432/db' } } as Record<string, Record<string, unknown>>,
  state: { dir: '/tmp/state' },
  lake: { uri: 'file:///tmp/lake' },
  tables: [
    { source: 'app', table: 'public.orders', mode: 'cdc', writeMode: 'upsert', snapshot: 'never', ...table },
  ] as Record<string, unknown>[],
});

describe('pipeline spec: cdc tables and the cdc block', () => {
  beforeAll(() => registerDriver(scriptedDriver('scripted')));
  afterAll(() => unregisterDriver('scripted'));

  it('accepts a cdc table with its defaults, and none of the incremental fields', () => {
    const t = parseSpec(cdcBase()).tables[0]!;
    expect(t).toEqual({
      source: 'app',
      table: 'public.orders',
      mode: 'cdc',
      writeMode: 'upsert',
      snapshot: 'never',
      onTruncate: 'record',
      insertOnly: false,
      unchangedToast: 'reread',
      exclude: [],
      onWiden: 'stop',
    });
    const set = parseSpec(
      cdcBase('scripted', { onTruncate: 'fail', exclude: ['secret'], target: 'raw.orders' }),
    );
    expect(set.tables[0]).toMatchObject({ onTruncate: 'fail', exclude: ['secret'], target: 'raw.orders' });
    expect(incrementalTables(set)).toEqual([]);
  });

  it('defaults snapshot to "initial", accepts "never", refuses others and an insertOnly table snapshotting', () => {
    const none = cdcBase();
    delete none.tables[0]!.snapshot;
    const parsed = parseSpec(none).tables[0] as { snapshot: string };
    expect(parsed.snapshot).toBe('initial');
    expect(
      (parseSpec(cdcBase('scripted', { snapshot: 'never' })).tables[0] as { snapshot: string }).snapshot,
    ).toBe('never');
    expect(errorOf(cdcBase('scripted', { snapshot: 'sometimes' })).path).toBe('tables[0].snapshot');
    const noKey = cdcBase('scripted', { insertOnly: true });
    delete noKey.tables[0]!.snapshot;
    expect(errorOf(noKey).message).toMatch(
      /^tables\[0\]\.snapshot: an insertOnly table \(no primary key\) cannot be snapshotted: .* set "snapshot: never"/,
    );
    expect(() => parseSpec(cdcBase('scripted', { insertOnly: true, snapshot: 'never' }))).not.toThrow();
  });

  it('says a cursor and the other incremental fields are only for mode: incremental, and the reverse', () => {
    const e = errorOf(
      cdcBase('scripted', { cursor: 'updated_at', pageSize: 10, schedule: 'rate(5 minutes)', cursr: 'x' }),
    );
    expect(e.problems.map((p) => p.path)).toEqual([
      'tables[0].cursor',
      'tables[0].pageSize',
      'tables[0].schedule',
      'tables[0]',
    ]);
    expect(e.problems[0]!.message).toBe(
      '"cursor" is only for mode: incremental (a cdc table follows the database log: no cursor, pages or schedule); remove it, or set mode: incremental',
    );
    expect(e.problems[3]!.message).toBe('unknown field(s) "cursr"; remove or fix the spelling');

    const inc = base();
    Object.assign(inc.tables[0]!, { snapshot: 'never', onTruncate: 'fail' });
    expect(errorOf(inc).problems.map((p) => `${p.path}: ${p.message}`)).toEqual([
      'tables[0].snapshot: "snapshot" is only for mode: cdc; remove it, or set mode: cdc',
      'tables[0].onTruncate: "onTruncate" is only for mode: cdc; remove it, or set mode: cdc',
    ]);
  });

  it('names the modes when mode is missing or misspelled, and still requires a cursor for incremental', () => {
    for (const mode of [undefined, 'CDC', 'log']) {
      const bad = base();
      (bad.tables[0] as Record<string, unknown>).mode = mode;
      expect(errorOf(bad).message).toBe(
        'tables[0].mode: must be "incremental" (scheduled runs on a cursor column) or "cdc" (the database log)',
      );
    }
    const noCursor = base();
    delete (noCursor.tables[0] as Partial<(typeof noCursor.tables)[0]>).cursor;
    expect(errorOf(noCursor).message).toBe('tables[0].cursor: is required (expected string)');
  });

  it('validates kind against the registered drivers', () => {
    const bad = base() as Record<string, unknown>;
    (bad.sources as Record<string, Record<string, unknown>>).app!.kind = 'oracle';
    expect(errorOf(bad).message).toBe('sources.app.kind: must be one of "postgres", "mysql", "scripted"');
    unregisterDriver('scripted');
    try {
      expect(errorOf(bad).message).toBe('sources.app.kind: must be "postgres" or "mysql"');
      expect(errorOf(cdcBase()).message).toContain('sources.app.kind: must be "postgres" or "mysql"');
    } finally {
      registerDriver(scriptedDriver('scripted'));
    }
  });

  it('fills the cdc block defaults (cdcSettings), also without a block', () => {
    const spec = parseSpec(base());
    expect(cdcSettings(spec, 'app')).toEqual({
      kind: 'postgres',
      slot: 'tidemark_shop_app',
      publication: 'tidemark_shop_app',
      heartbeatSeconds: 10,
      flushRows: 100_000,
      flushBytes: 64 * 2 ** 20,
      flushSeconds: 60,
      maxAckLagSeconds: 300,
      idleCommitSeconds: 10,
      leaseTtlSeconds: 60,
      stopTimeoutSeconds: 30,
      snapshot: { chunkRows: 20_000, connections: 2 },
      onPositionLost: 'fail',
    });
    const given = base();
    (given.sources.app as Record<string, unknown>).cdc = {
      slot: 'my_slot',
      flushBytes: '16MiB',
      leaseTtlSeconds: 15,
      stopTimeoutSeconds: 110,
    };
    const s = cdcSettings(parseSpec(given), 'app');
    expect(s).toMatchObject({ slot: 'my_slot', publication: 'tidemark_shop_app', flushBytes: 16 * 2 ** 20 });
    expect(s).toMatchObject({ leaseTtlSeconds: 15, stopTimeoutSeconds: 110 });
    expect(() => cdcSettings(spec, 'nope')).toThrow(
      /sources\.nope: is not a source of pipeline shop \(known: app\)/,
    );

    const my = base();
    my.sources.app = { kind: 'mysql', url: 'mysql://u:secret@h:3306/db', cdc: { serverId: 4242 } } as never;
    const m = cdcSettings(parseSpec(my), 'app');
    expect(m.serverId).toBe(4242);
    expect(m.binlogRetentionHours).toBe(24);
    expect(m.slot).toBeUndefined();
    (my.sources.app as unknown as { cdc: Record<string, unknown> }).cdc.binlogRetentionHours = 168;
    expect(cdcSettings(parseSpec(my), 'app').binlogRetentionHours).toBe(168);
  });

  it('defaults slot and publication to tidemark_<pipeline>_<source>, "-" as "_", hashed past 63 characters', () => {
    expect(defaultCdcName('shop', 'app')).toBe('tidemark_shop_app');
    expect(defaultCdcName('shop-eu', 'app-db')).toMatch(/^tidemark_shop_eu_app_db_[0-9a-f]{8}$/);
    // Two pipelines whose names meet once `-` becomes `_` never share a slot.
    expect(defaultCdcName('shop-eu', 'app')).not.toBe(defaultCdcName('shop', 'eu-app'));
    expect(defaultCdcName('shop-eu', 'app').startsWith('tidemark_shop_eu_app_')).toBe(true);
    const pipeline = `p${'a'.repeat(62)}`;
    const long = defaultCdcName(pipeline, 'orders-db');
    expect(long).toHaveLength(63);
    expect(long).toMatch(/^[a-z_][a-z0-9_]{0,62}$/);
    expect(long.startsWith(`tidemark_${pipeline}`.slice(0, 54))).toBe(true);
    expect(long).toMatch(/_[0-9a-f]{8}$/);
    expect(defaultCdcName(pipeline, 'orders-db')).toBe(long);
    // Two sources whose names only differ past the cut keep distinct names.
    expect(defaultCdcName(pipeline, 'orders-eu')).not.toBe(long);
    // Exactly 63 characters is kept as is.
    const fits = `p${'b'.repeat(50)}`;
    expect(defaultCdcName(fits, 'ab')).toBe(`tidemark_${fits}_ab`);
    expect(defaultCdcName(fits, 'ab')).toHaveLength(63);

    const spec = parseSpec({
      ...base(),
      pipeline: 'shop-eu',
      sources: { 'app-db': base().sources.app },
      tables: [{ ...base().tables[0]!, source: 'app-db' }],
    });
    expect(cdcSettings(spec, 'app-db').slot).toBe(defaultCdcName('shop-eu', 'app-db'));
  });

  it('refuses wrong cdc settings, naming the field and the fix', () => {
    const withCdc = (cdc: Record<string, unknown>, kind = 'postgres') => {
      const raw = base();
      raw.sources.app = { kind, url: 'postgres://u:secret@h:5432/db', cdc } as never;
      return errorOf(raw);
    };
    expect(withCdc({ slot: 'Orders-Slot' }).message).toBe(
      'sources.app.cdc.slot: must be a Postgres name: a lowercase letter or "_", then up to 62 lowercase letters, digits or "_"',
    );
    expect(withCdc({ publication: 'p'.repeat(64) }).path).toBe('sources.app.cdc.publication');
    expect(withCdc({ publication: '1pub' }).path).toBe('sources.app.cdc.publication');
    expect(withCdc({ stopTimeoutSeconds: 111 }).message).toBe(
      'sources.app.cdc.stopTimeoutSeconds: must be at most 110: ECS stops a task at most 120 s after SIGTERM (stopTimeout)',
    );
    expect(withCdc({ leaseTtlSeconds: 10 }).path).toBe('sources.app.cdc.leaseTtlSeconds');
    expect(withCdc({ flushBytes: '64MB' }).message).toMatch(
      /^sources\.app\.cdc\.flushBytes: must be a whole number of bytes/,
    );
    expect(withCdc({ onPositionLost: 'reset' }).message).toBe(
      'sources.app.cdc.onPositionLost: "reset" (start over with a new snapshot) arrives with on-demand re-snapshots in a later release; use "fail" (the default): the task stops and says what was lost',
    );
    expect(withCdc({ slots: 'x' }).message).toBe(
      'sources.app.cdc: unknown field(s) "slots"; remove or fix the spelling',
    );
    expect(withCdc({ serverId: 7 }).message).toBe(
      'sources.app.cdc.serverId: is a MySQL setting, and sources.app is postgres; remove it',
    );
    expect(withCdc({ binlogRetentionHours: 24 }).message).toBe(
      'sources.app.cdc.binlogRetentionHours: is a MySQL setting, and sources.app is postgres; remove it',
    );
    expect(withCdc({ binlogRetentionHours: 0.5 }, 'mysql').message).toBe(
      'sources.app.cdc.binlogRetentionHours: must be at least 1 (hours)',
    );
    expect(withCdc({ slot: 'x' }, 'mysql').message).toBe(
      'sources.app.cdc.slot: is a Postgres setting, and sources.app is mysql; remove it',
    );
    for (const serverId of [0, 2 ** 32, 1.5]) {
      expect(withCdc({ serverId }, 'mysql').path, String(serverId)).toBe('sources.app.cdc.serverId');
    }
    for (const serverId of [1, 2 ** 32 - 1]) {
      const raw = base();
      raw.sources.app = { kind: 'mysql', url: 'mysql://u@h/db', cdc: { serverId } } as never;
      expect(cdcSettings(parseSpec(raw), 'app').serverId).toBe(serverId);
    }
  });

  it('requires serverId for a mysql source with cdc tables, and distinct slot names per spec', () => {
    const my = cdcBase('mysql');
    my.sources.app = { kind: 'mysql', url: 'mysql://u@h/db' };
    const e = errorOf(my);
    // Only the serverId: the mode gate passes mysql cdc tables (the kind has a binlog reader).
    expect(e.problems.map((p) => p.path)).toEqual(['sources.app.cdc.serverId']);
    expect(e.problems[0]!.message).toMatch(
      /^is required for a mysql source with cdc tables: .*\(SELECT @@server_id on each\), 1 to 4294967295$/,
    );

    // "app-db" and "app_db" no longer share a default name ("-" turned into "_" adds a hash);
    // a slot given by hand that equals another source's default is refused.
    const two = cdcBase('postgres');
    const taken = defaultCdcName('shop', 'app-db');
    two.sources = {
      'app-db': two.sources.app!,
      app_db: { ...two.sources.app!, cdc: { slot: taken, publication: taken } },
    };
    two.tables = [
      { ...two.tables[0]!, source: 'app-db' },
      { ...two.tables[0]!, source: 'app_db', target: 'other.orders' },
    ];
    const problems = errorOf(two).problems.map((p) => `${p.path}: ${p.message}`);
    expect(problems.slice(0, 2)).toEqual([
      expect.stringMatching(
        /^sources\.app_db\.cdc\.slot: slot "tidemark_shop_app_db_[0-9a-f]{8}" is also sources\.app-db's/,
      ),
      expect.stringMatching(
        /^sources\.app_db\.cdc\.publication: publication "tidemark_shop_app_db_[0-9a-f]{8}" is also sources\.app-db's/,
      ),
    ]);
    // Only those two: the mode gate passes postgres cdc tables (the kind has a log reader).
    expect(problems).toHaveLength(2);
    // Distinct names pass.
    two.sources.app_db = { ...two.sources['app-db']!, cdc: { slot: 'other_slot', publication: 'other_pub' } };
    const spec = parseSpec(two, { env: {} });
    expect(cdcSettings(spec, 'app-db').slot).toBe(defaultCdcName('shop', 'app-db'));
    expect(cdcSettings(spec, 'app_db')).toMatchObject({ slot: 'other_slot', publication: 'other_pub' });
  });

  it('accepts a cdc table on postgres, and one on mysql with a serverId', () => {
    const pg = parseSpec(cdcBase('postgres'), { env: {} });
    expect(pg.tables.map((t) => [t.source, t.table, t.mode])).toEqual([['app', 'public.orders', 'cdc']]);
    expect(cdcSettings(pg, 'app')).toMatchObject({
      kind: 'postgres',
      slot: defaultCdcName('shop', 'app'),
      publication: defaultCdcName('shop', 'app'),
    });

    const my = cdcBase('mysql');
    my.sources.app = { kind: 'mysql', url: 'mysql://u@h/db', cdc: { serverId: 7 } };
    const spec = parseSpec(my, { env: {} });
    expect(spec.tables.map((t) => [t.source, t.table, t.mode])).toEqual([['app', 'public.orders', 'cdc']]);
    expect(cdcSettings(spec, 'app')).toMatchObject({ kind: 'mysql', serverId: 7 });
    expect(cdcSettings(spec, 'app').slot).toBeUndefined();

    // Without the serverId the same spec is refused, naming the setting.
    my.sources.app = { kind: 'mysql', url: 'mysql://u@h/db' };
    expect(errorOf(my).problems.map((p) => p.path)).toEqual(['sources.app.cdc.serverId']);
  });

  it('finds incremental tables for commands that only run those', () => {
    const raw = cdcBase();
    raw.sources.pg = base().sources.app;
    raw.tables.push({ ...base().tables[0]!, source: 'pg', table: 'public.items' });
    const spec = parseSpec(raw);
    // The scripted kind streams but has no incremental read: the gate says so.
    raw.tables[1]!.source = 'app';
    expect(errorOf(raw).message).toBe(
      'tables[1].mode: public.items is mode: incremental, but the scripted driver (sources.app) has no incremental read (modes: cdc); set mode: cdc for this table',
    );
    expect(() => findIncrementalTable(spec, 'public.orders', 'tidemark run')).toThrow(
      '--table: public.orders is a mode: cdc table; tidemark run handles mode: incremental tables only (cdc tables run under `tidemark cdc`)',
    );
    expect(findIncrementalTable(spec, 'public.items', 'tidemark run').cursor).toBe('updated_at');
  });
});
