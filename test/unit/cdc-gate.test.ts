/**
 * The mode gate (shared/config/modes.ts) and the mode-change refusal
 * (shared/pipeline/mode-change.ts), with no server: a scripted driver kind registered in-process
 * (shared/drivers/registry.ts `registerDriver`) stands for a kind with a log reader, another for an
 * incremental-only kind; postgres and mysql (both with a log reader) are judged on their real,
 * truthful capabilities. `tidemark validate` and `tidemark run`
 * are called in-process (the registration lives in this process), with a file state store and a
 * file lake in a temp dir.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { cmdRun } from '../../functions/cli/commands/run.js';
import { cmdValidate } from '../../functions/cli/commands/validate.js';
import { assertModes, checkModes } from '../../shared/config/modes.js';
import { incrementalTables, parseSpec, type Spec } from '../../shared/config/spec.js';
import { ConfigError, TidemarkError } from '../../shared/contracts/errors.js';
import type { StateValue } from '../../shared/contracts/state.js';
import {
  BUILTIN_DRIVER_KINDS,
  capabilities,
  driver,
  driverKinds,
  registerDriver,
  unregisterDriver,
} from '../../shared/drivers/registry.js';
import { cdcStateKey } from '../../shared/engine/cdc/state-tables.js';
import { incrementalStateKey } from '../../shared/engine/incremental/state.js';
import { silentLogger } from '../../shared/observability/log.js';
import { checkPipeline } from '../../shared/pipeline/check.js';
import {
  assertModesUnchanged,
  findModeChanges,
  ModeChangedError,
} from '../../shared/pipeline/mode-change.js';
import { openLake, rowEncoder } from '../../shared/pipeline/open.js';
import { resetTable } from '../../shared/pipeline/reset-table.js';
import { runTable } from '../../shared/pipeline/run-table.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { scriptedDriver } from '../harness/scripted-driver.js';

/** Streams, resumes exactly, has a log reader: may serve cdc tables. */
const CAPABLE = 'scripted';
/** Declares mode cdc and a reader, but no stream and no recoverable position. */
const HALF = 'scripted-half';
/** Everything but the log reader (`openCdc`). */
const READERLESS = 'scripted-noreader';
/** Incremental only, no log reader: what mysql was before its binlog reader. */
const INC_ONLY = 'scripted-inconly';

beforeAll(() => {
  registerDriver(scriptedDriver(CAPABLE));
  registerDriver(scriptedDriver(HALF, { stream: false, recoverablePosition: false }));
  registerDriver(scriptedDriver(READERLESS, {}, { reader: false }));
  registerDriver({
    ...scriptedDriver(
      INC_ONLY,
      { stream: false, modes: ['incremental'], recoverablePosition: false },
      { reader: false },
    ),
    async openIncremental() {
      throw new Error(`the ${INC_ONLY} test driver opens nothing`);
    },
  });
});
afterAll(() => {
  for (const kind of [CAPABLE, HALF, READERLESS, INC_ONLY]) unregisterDriver(kind);
});

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-cdc-gate-'));
  dirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const incrementalTable = (source: string, table: string) => ({
  source,
  table,
  mode: 'incremental',
  cursor: 'updated_at',
  writeMode: 'append',
});
const cdcTable = (source: string, table: string) => ({
  source,
  table,
  mode: 'cdc',
  writeMode: 'upsert',
  snapshot: 'never',
});

/** A raw spec: sources by kind, the given tables, state and lake in `dir`. */
function rawSpec(dir: string, sources: Record<string, string>, tables: object[]): Record<string, unknown> {
  return {
    pipeline: 'shop',
    sources: Object.fromEntries(
      Object.entries(sources).map(([name, kind]) => [
        name,
        {
          kind,
          url: kind === 'mysql' ? 'mysql://u:pw@h:3306/db' : 'postgres://u:pw@h:5432/db',
          ...(kind === 'mysql' ? { cdc: { serverId: 4242 } } : {}),
        },
      ]),
    ),
    state: { dir: join(dir, 'state') },
    lake: { uri: `file://${join(dir, 'lake')}` },
    tables,
  };
}

function configErrorOf(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

/** Writes `value` under `key` as a run would (lease, commit, release). */
async function putState(store: FileCursorStore, key: string, value: StateValue): Promise<void> {
  const r = await store.acquire(key, 'test-owner', 60_000);
  await store.commit(key, { owner: 'test-owner', expectedVersion: r.version, value });
  await store.release(key, 'test-owner');
}

describe('the registry tells the truth', () => {
  it('postgres and mysql stream (incremental and cdc, recoverable position, a log reader)', async () => {
    expect(BUILTIN_DRIVER_KINDS).toEqual(['postgres', 'mysql']);
    const pg = capabilities('postgres');
    expect(pg).toEqual({
      // DBLog snapshots: primary-key chunks between watermark messages (postgres/snapshot.ts).
      snapshot: true,
      chunkQuery: true,
      stream: true,
      maxConnections: 0,
      modes: ['incremental', 'cdc'],
      beforeImage: false,
      monotonicSequence: false,
      recoverablePosition: true,
    });
    expect(Object.isFrozen(pg)).toBe(true);
    expect(Object.isFrozen(pg.modes)).toBe(true);
    expect(driver('postgres').openCdc).toBeTypeOf('function');
    expect(driver('postgres').openIncremental).toBeTypeOf('function');
    // Declaring snapshot means the streamer opens chunkers (nothing connects until a query).
    const pgCdc = await driver('postgres').openCdc!({
      url: 'postgres://u:p@127.0.0.1:1/db',
      sourceName: 'sources.pg',
      connectTimeoutMs: 1000,
      slot: 's',
      publication: 'p',
      heartbeatMs: 1000,
    });
    expect(pgCdc.openSnapshot).toBeTypeOf('function');
    const snap = await pgCdc.openSnapshot!({ connections: 2 });
    expect(snap.connections).toBe(2);
    await snap.close();
    await pgCdc.close();

    const my = capabilities('mysql');
    expect(my).toEqual({
      // Snapshot chunks by primary key (shared/drivers/mysql/snapshot.ts).
      snapshot: true,
      chunkQuery: true,
      stream: true,
      maxConnections: 0,
      modes: ['incremental', 'cdc'],
      // Binlog row events carry the whole before image (binlog_row_image=FULL).
      beforeImage: true,
      monotonicSequence: false,
      recoverablePosition: true,
    });
    expect(Object.isFrozen(my)).toBe(true);
    expect(Object.isFrozen(my.modes)).toBe(true);
    expect(driver('mysql').openCdc).toBeTypeOf('function');
    expect(driver('mysql').openIncremental).toBeTypeOf('function');
  });

  it('registers and unregisters a kind; built-ins and duplicates are refused', () => {
    expect(driverKinds()).toEqual(['postgres', 'mysql', CAPABLE, HALF, READERLESS, INC_ONLY]);
    registerDriver(scriptedDriver('scripted-extra'));
    expect(driverKinds()).toContain('scripted-extra');
    unregisterDriver('scripted-extra');
    expect(driverKinds()).not.toContain('scripted-extra');
    expect(() => registerDriver(scriptedDriver('postgres'))).toThrow(/already registered/);
    expect(() => registerDriver(scriptedDriver(CAPABLE))).toThrow(/already registered/);
    expect(() => registerDriver(scriptedDriver('Bad Kind'))).toThrow(/lowercase/);
    expect(() => unregisterDriver('mysql')).toThrow(/built in/);
  });
});

describe('the mode gate', () => {
  it('refuses cdc tables on an incremental-only kind: one message per table naming the table, the kind and mode: incremental; passes postgres and mysql cdc tables', () => {
    const dir = tempDir();
    const e = configErrorOf(() =>
      parseSpec(
        rawSpec(dir, { pg: 'postgres', inc: INC_ONLY, my: 'mysql' }, [
          cdcTable('pg', 'public.orders'),
          incrementalTable('pg', 'public.items'),
          { ...cdcTable('inc', 'shop.orders'), target: 'inc.orders' },
          incrementalTable('inc', 'shop.items'),
          cdcTable('inc', 'shop.customers'),
          cdcTable('my', 'shop.payments'),
        ]),
      ),
    );
    expect(e.problems.map((p) => p.path)).toEqual(['tables[2].mode', 'tables[4].mode']);
    const [orders, customers] = e.problems;
    expect(orders!.message).toMatch(
      new RegExp(
        `^shop\\.orders \\(lake table inc\\.orders\\) is mode: cdc, but the ${INC_ONLY} driver \\(sources\\.inc\\) cannot stream`,
      ),
    );
    expect(customers!.message).toMatch(
      new RegExp(
        `^shop\\.customers is mode: cdc, but the ${INC_ONLY} driver \\(sources\\.inc\\) cannot stream`,
      ),
    );
    for (const p of e.problems) {
      expect(p.message).toContain(
        'capabilities: modes incremental (no cdc), stream false, recoverablePosition false, no log reader',
      );
      expect(p.message).toContain('set mode: incremental with a cursor column');
    }

    // The same postgres and mysql tables without the incremental-only kind's pass the gate: a
    // mysql cdc table with a serverId is accepted.
    const spec = parseSpec(
      rawSpec(dir, { pg: 'postgres', my: 'mysql' }, [
        cdcTable('pg', 'public.orders'),
        incrementalTable('pg', 'public.items'),
        cdcTable('my', 'shop.payments'),
      ]),
    );
    expect(spec.tables.map((t) => [t.table, t.mode])).toEqual([
      ['public.orders', 'cdc'],
      ['public.items', 'incremental'],
      ['shop.payments', 'cdc'],
    ]);
    expect(checkModes(spec)).toEqual([]);
    expect(() => assertModes(spec)).not.toThrow();
  });

  it('refuses a registered kind without stream and recoverablePosition, or without a log reader; passes a capable one', () => {
    const dir = tempDir();
    const half = configErrorOf(() => parseSpec(rawSpec(dir, { s: HALF }, [cdcTable('s', 'public.orders')])));
    expect(half.message).toBe(
      `tables[0].mode: public.orders is mode: cdc, but the ${HALF} driver (sources.s) cannot stream changes in this release (capabilities: stream false, recoverablePosition false); set mode: incremental with a cursor column (cursor: updated_at, say) for this table`,
    );
    const readerless = configErrorOf(() =>
      parseSpec(rawSpec(dir, { s: READERLESS }, [cdcTable('s', 'public.orders')])),
    );
    expect(readerless.message).toContain(
      `the ${READERLESS} driver (sources.s) cannot stream changes in this release (capabilities: no log reader)`,
    );

    // A spec mixing a capable kind's cdc tables with postgres incremental tables passes.
    const spec = parseSpec(
      rawSpec(dir, { s: CAPABLE, pg: 'postgres' }, [
        cdcTable('s', 'public.orders'),
        incrementalTable('pg', 'public.items'),
      ]),
    );
    expect(checkModes(spec)).toEqual([]);
    expect(() => assertModes(spec)).not.toThrow();
  });

  it('judges a hand-built spec too (cdk synth calls it on the spec it is given)', () => {
    const dir = tempDir();
    const spec = parseSpec(rawSpec(dir, { inc: INC_ONLY }, [incrementalTable('inc', 'shop.orders')]));
    const { cursor: _c, schedule: _s, ...rest } = incrementalTables(spec)[0]!;
    const handBuilt = {
      ...spec,
      tables: [
        {
          ...rest,
          mode: 'cdc',
          snapshot: 'never',
          onTruncate: 'record',
          insertOnly: false,
          unchangedToast: 'reread',
        },
      ],
    } as Spec;
    expect(checkModes(handBuilt).map((p) => p.path)).toEqual(['tables[0].mode']);
    expect(() => assertModes(handBuilt)).toThrow(
      new RegExp(`shop\\.orders is mode: cdc, but the ${INC_ONLY} driver`),
    );

    // The same hand-built table on a mysql source passes.
    const mySpec = parseSpec(rawSpec(dir, { my: 'mysql' }, [incrementalTable('my', 'shop.orders')]));
    const { cursor: _mc, schedule: _ms, ...myRest } = incrementalTables(mySpec)[0]!;
    const myHandBuilt = {
      ...mySpec,
      tables: [
        {
          ...myRest,
          mode: 'cdc',
          snapshot: 'never',
          onTruncate: 'record',
          insertOnly: false,
          unchangedToast: 'reread',
        },
      ],
    } as Spec;
    expect(checkModes(myHandBuilt)).toEqual([]);

    // And on a postgres source.
    const pgSpec = parseSpec(rawSpec(dir, { pg: 'postgres' }, [incrementalTable('pg', 'public.orders')]));
    const { cursor: _pc, schedule: _ps, ...pgRest } = incrementalTables(pgSpec)[0]!;
    const pgHandBuilt = {
      ...pgSpec,
      tables: [
        {
          ...pgRest,
          mode: 'cdc',
          snapshot: 'never',
          onTruncate: 'record',
          insertOnly: false,
          unchangedToast: 'reread',
        },
      ],
    } as Spec;
    expect(checkModes(pgHandBuilt)).toEqual([]);
    expect(() => assertModes(pgHandBuilt)).not.toThrow();
  });
});

/** Writes a spec file into a fresh dir; returns the file and the dir. */
function specFile(sources: Record<string, string>, tables: object[]): { file: string; dir: string } {
  const dir = tempDir();
  const file = join(dir, 'tidemark.json');
  writeFileSync(file, JSON.stringify(rawSpec(dir, sources, tables)));
  return { file, dir };
}

describe('tidemark validate and run, in-process', () => {
  afterEach(() => {
    vi.restoreAllMocks();
    process.exitCode = undefined;
  });

  it('validate refuses a cdc table its kind cannot stream, and prints a spec whose kind can', async () => {
    const half = specFile({ s: HALF }, [cdcTable('s', 'public.orders')]);
    await expect(cmdValidate(['-c', half.file])).rejects.toThrow(
      new RegExp(
        `^tables\\[0\\]\\.mode: public\\.orders is mode: cdc, but the ${HALF} driver .*set mode: incremental`,
      ),
    );
    const inc = specFile({ inc: INC_ONLY }, [cdcTable('inc', 'shop.orders')]);
    await expect(cmdValidate(['-c', inc.file])).rejects.toThrow(
      new RegExp(
        `^tables\\[0\\]\\.mode: shop\\.orders is mode: cdc, but the ${INC_ONLY} driver \\(sources\\.inc\\) cannot stream`,
      ),
    );

    const out: string[] = [];
    vi.spyOn(console, 'log').mockImplementation((line: string) => void out.push(line));
    const ok = specFile({ s: CAPABLE, pg: 'postgres' }, [
      cdcTable('s', 'public.orders'),
      incrementalTable('pg', 'public.items'),
    ]);
    await cmdValidate(['-c', ok.file]);
    expect(out.at(-1)).toBe(
      'ok: pipeline shop, 2 table(s) (1 incremental, 1 cdc); no table changed mode against the stored state',
    );
    // A mysql cdc table (with its serverId): its kind streams now.
    const my = specFile({ my: 'mysql' }, [
      cdcTable('my', 'shop.orders'),
      incrementalTable('my', 'shop.items'),
    ]);
    await cmdValidate(['-c', my.file]);
    expect(out.at(-1)).toBe(
      'ok: pipeline shop, 2 table(s) (1 incremental, 1 cdc); no table changed mode against the stored state',
    );
    // A postgres cdc table: its kind streams now.
    const pg = specFile({ pg: 'postgres' }, [
      cdcTable('pg', 'public.orders'),
      incrementalTable('pg', 'public.items'),
    ]);
    await cmdValidate(['-c', pg.file]);
    expect(out.at(-1)).toBe(
      'ok: pipeline shop, 2 table(s) (1 incremental, 1 cdc); no table changed mode against the stored state',
    );
  });

  it('run skips cdc tables with a note and refuses --table of a cdc table', async () => {
    const { file } = specFile({ s: CAPABLE }, [cdcTable('s', 'public.orders')]);
    const out: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      out.push(String(chunk));
      return true;
    });
    await cmdRun(['-c', file, '--json']);
    vi.restoreAllMocks();
    expect(out.map((l) => JSON.parse(l))).toEqual([
      {
        pipeline: 'shop',
        table: 'public.orders',
        status: 'skipped',
        mode: 'cdc',
        reason: 'mode: cdc; it runs under `tidemark cdc`, not `tidemark run`',
      },
    ]);
    expect(process.exitCode ?? 0).toBe(0);
    await expect(cmdRun(['-c', file, '--table', 'public.orders'])).rejects.toThrow(
      /^--table: public\.orders is a mode: cdc table; tidemark run handles mode: incremental tables only/,
    );
  });
});

describe('a table never changes mode in place', () => {
  /** A spec with the capable kind's source `s` and a postgres source `pg`, state in a temp dir. */
  function setup(tables: object[]) {
    const dir = tempDir();
    const spec = parseSpec(rawSpec(dir, { s: CAPABLE, pg: 'postgres' }, tables));
    return { spec, dir, store: new FileCursorStore(spec.state.dir!), sink: openLake(spec) };
  }

  it('refuses a cdc table whose incremental state exists; a new target passes; reset retires the state', async () => {
    const { spec, store, sink } = setup([cdcTable('s', 'public.orders')]);
    expect(await findModeChanges(spec, store)).toEqual([]);
    const key = incrementalStateKey('shop', 'public.orders');
    await putState(store, key, { cursor: 'k1.00', cursorColumn: 'updated_at', seq: 3, rowsTotal: 30 });

    const [e, ...more] = await findModeChanges(spec, store);
    expect(more).toEqual([]);
    expect(e).toBeInstanceOf(ModeChangedError);
    expect(e!.code).toBe('MODE_CHANGED');
    expect(e!.message).toBe(
      'public.orders: the spec says mode: cdc, but the table has incremental state (inc#shop#public.orders); a table never changes mode in place. Give it a new "target:" (a new lake table; the old one keeps its objects), or retire the incremental state with "tidemark reset -c SPEC --table public.orders" (its objects stay and the CDC rows sort after them; add --delete-objects to delete them first)',
    );
    await expect(assertModesUnchanged(spec, store)).rejects.toThrow(ModeChangedError);

    // validate reads a state dir always.
    const file = join(spec.state.dir!, '..', 'tidemark.json');
    writeFileSync(
      file,
      JSON.stringify(
        rawSpec(join(spec.state.dir!, '..'), { s: CAPABLE, pg: 'postgres' }, [
          cdcTable('s', 'public.orders'),
        ]),
      ),
    );
    await expect(cmdValidate(['-c', file])).rejects.toMatchObject({ code: 'MODE_CHANGED' });

    // A new target is a new lake table with no state.
    const renamed = { ...spec, tables: [{ ...spec.tables[0]!, target: 'public.orders_cdc' }] } as Spec;
    expect(await findModeChanges(renamed, store)).toEqual([]);

    // tidemark reset retires it: the state stays (seq keeps counting), marked, and no longer counts.
    const r = await resetTable(spec, spec.tables[0]!, {
      store,
      sink,
      owner: 'test-owner',
      now: () => Date.UTC(2027, 0, 2),
    });
    expect(r.kind).toBe('retired');
    expect((await store.load(key)).value).toMatchObject({
      cursor: '',
      cursorColumn: 'updated_at',
      seq: 3,
      retired: { at: '2027-01-02T00:00:00.000Z', mode: 'cdc' },
    });
    expect(await findModeChanges(spec, store)).toEqual([]);
    // Nothing left to retire.
    await expect(resetTable(spec, spec.tables[0]!, { store, sink, owner: 'test-owner' })).rejects.toThrow(
      /public\.orders is a mode: cdc table without incremental state to retire/,
    );
  });

  it("refuses an incremental table its source's CDC state lists, before opening the source, until reset --delete-objects", async () => {
    const { spec, store, sink } = setup([
      incrementalTable('pg', 'public.orders'),
      incrementalTable('pg', 'public.items'),
    ]);
    const key = cdcStateKey('shop', 'pg');
    await putState(store, key, {
      position: { scheme: 'p', value: '0/16B3748' },
      tables: { 'public.orders': { phase: 'stream' }, 'other.t': {} },
    });

    const changes = await findModeChanges(spec, store);
    expect(changes.map((e) => [e.table, e.from, e.to, e.key])).toEqual([
      ['public.orders', 'cdc', 'incremental', 'cdc#shop#pg'],
    ]);
    expect(changes[0]!.message).toBe(
      'public.orders: the spec says mode: incremental, but the CDC state of its source (cdc#shop#pg) lists the table; a table never changes mode in place. Give it a new "target:" (a new lake table; the old one keeps its objects), or take it out of the CDC state with "tidemark reset -c SPEC --table public.orders --delete-objects" (its objects go too: CDC positions sort after incremental ones, so readers would keep the old CDC rows)',
    );

    // Every run checks first: the source is never opened.
    const pipeline = {
      store,
      sink,
      encodeRows: rowEncoder,
      source: () => Promise.reject(new Error('the source must not be opened')),
      close: async () => {},
    };
    const [orders, items] = incrementalTables(spec);
    await expect(runTable(spec, orders!, pipeline, { logger: silentLogger })).rejects.toMatchObject({
      code: 'MODE_CHANGED',
    });
    await expect(runTable(spec, items!, pipeline, { logger: silentLogger })).rejects.toThrow(
      'the source must not be opened',
    );

    // Leaving CDC deletes the objects: kept, CDC rows would win over every incremental row.
    await expect(resetTable(spec, orders!, { store, sink, owner: 'test-owner' })).rejects.toMatchObject({
      code: 'RESET_NEEDS_CHOICE',
      message: expect.stringContaining('leaving CDC needs --delete-objects'),
    });
    await expect(
      resetTable(spec, orders!, { store, sink, owner: 'test-owner', objects: 'keep' }),
    ).rejects.toBeInstanceOf(TidemarkError);
    const r = await resetTable(spec, orders!, { store, sink, owner: 'test-owner', objects: 'delete' });
    expect(r.kind).toBe('left-cdc');
    const after = await store.load(key);
    // The other table's entry and every other field stay as stored.
    expect(after.value).toEqual({ position: { scheme: 'p', value: '0/16B3748' }, tables: { 'other.t': {} } });
    expect(after.lease).toBeUndefined();
    expect(await findModeChanges(spec, store)).toEqual([]);
    expect((await store.load(incrementalStateKey('shop', 'public.orders'))).value).toMatchObject({
      cursor: '',
      seq: 0,
    });
  });

  it('tidemark check: a mode fail line for a changed table, a warn line for each cdc table', async () => {
    const { spec, store } = setup([cdcTable('s', 'public.orders'), { ...cdcTable('s', 'public.items') }]);
    await putState(store, incrementalStateKey('shop', 'public.orders'), {
      cursor: '',
      cursorColumn: 'updated_at',
      seq: 1,
    });
    const report = await checkPipeline(spec);
    expect(report.lines.map((l) => [l.subject, l.check, l.status, l.code])).toEqual([
      ['public.orders', 'mode', 'warn', 'CDC_NOT_CHECKED'],
      ['public.items', 'mode', 'warn', 'CDC_NOT_CHECKED'],
      ['public.orders', 'mode', 'fail', 'MODE_CHANGED'],
      ['state', 'dir', 'ok', undefined],
      ['lake', 'dir', 'ok', undefined],
      ['lake', 'catalog', 'ok', undefined],
    ]);
    expect(report.lines[2]!.message).toMatch(/^the spec says mode: cdc, but the table has incremental state/);
    expect(report.passed).toBe(false);
  });

  it('a source without CDC state gets no item from a check or a reset', async () => {
    const { spec, store, sink } = setup([incrementalTable('pg', 'public.orders')]);
    await resetTable(spec, incrementalTables(spec)[0]!, { store, sink, owner: 'test-owner' });
    expect(await store.load(cdcStateKey('shop', 'pg'))).toMatchObject({
      version: 0,
      value: undefined,
      lease: undefined,
    });
  });
});
