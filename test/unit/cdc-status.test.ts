/**
 * `cdcStatus` (shared/engine/cdc/status.ts) over hand-made `cdc#` states and leases: a store and a
 * lake that answer from literals, liveness decided by the test.
 */
import { describe, expect, it } from 'vitest';
import type { ObjectRef, Sink } from '../../shared/contracts/sink.js';
import type { CursorStore, Lease, StateValue } from '../../shared/contracts/state.js';
import { type CdcFailure, cdcFailure, cdcFailureKey } from '../../shared/engine/cdc/failure.js';
import type { CdcState } from '../../shared/engine/cdc/state.js';
import { cdcStatus } from '../../shared/engine/cdc/status.js';
import type { HolderLiveness } from '../../shared/state/lease-owner.js';

const NOW = Date.parse('2026-12-01T12:00:00Z');
const iso = (secondsAgo: number) => new Date(NOW - secondsAgo * 1000).toISOString();
const LOCAL = 'buildhost:4242:12345:0badf00d';

function status(
  value: CdcState | undefined,
  opts: {
    lease?: Lease;
    liveness?: HolderLiveness;
    objects?: Record<string, ObjectRef[]>;
    tables?: string[];
    /** The source's recorded last failure (key `cdcfail#shop#pg`). */
    failure?: CdcFailure;
  } = {},
) {
  const store = {
    async load(key: string) {
      if (key === cdcFailureKey('shop', 'pg'))
        return { key, version: 0, value: opts.failure as StateValue | undefined, lease: undefined };
      return { key, version: value ? 3 : 0, value: value as StateValue | undefined, lease: opts.lease };
    },
  } as unknown as CursorStore;
  const listed: string[] = [];
  const sink = {
    async list(table: string, writer?: string) {
      listed.push(`${table}/${writer}`);
      return opts.objects?.[table] ?? [];
    },
  } as unknown as Sink;
  const tables = (opts.tables ?? ['public.orders', 'public.items']).map((t) => ({ source: t, target: t }));
  return {
    listed,
    run: () =>
      cdcStatus({
        pipeline: 'shop',
        source: 'pg',
        tables,
        writer: 'shop.pg',
        store,
        sink,
        now: NOW,
        liveness: () => opts.liveness ?? 'unknown',
      }),
  };
}

const ref = (bytes: number): ObjectRef => ({ uri: `file:///lake/x/${bytes}.parquet`, bytes, rows: -1 });

describe('cdcStatus', () => {
  it('a source with no state: idle, no position, every table never captured', async () => {
    const s = await status(undefined).run();
    expect(s).toMatchObject({
      pipeline: 'shop',
      source: 'pg',
      mode: 'cdc',
      key: 'cdc#shop#pg',
      writer: 'shop.pg',
      state: 'idle',
      position: null,
      positionScheme: null,
      lastCommitAt: null,
      sinceLastCommitSeconds: null,
      events: [],
      lastFailure: null,
      lease: { held: false, owner: null, alive: null },
    });
    expect(s.tables.map((t) => [t.table, t.captured, t.next, t.rows, t.stopped])).toEqual([
      ['public.orders', false, null, 0, null],
      ['public.items', false, null, 0, null],
    ]);
  });

  it('a capturing source: position display, commit age, live local lease, per-table stats and lake', async () => {
    const state: CdcState = {
      position: { scheme: 'pg-lsn', value: '22787912', display: '0/15BB548' },
      lastCommitAt: iso(30),
      tables: {
        'public.orders': {
          next: 'c0000000015bb549',
          schemaHash: 'h1',
          schemaVersion: 2,
          rows: 1200,
          objects: 4,
          lastFlushAt: iso(45),
          lagMs: 1800,
        },
      },
    };
    const t = status(state, {
      lease: { owner: LOCAL, expiresAt: NOW + 20_000, fence: 7 },
      liveness: 'alive',
      objects: { 'public.orders': [ref(1000), ref(2500)] },
    });
    const s = await t.run();
    expect(t.listed).toEqual(['public.orders/shop.pg', 'public.items/shop.pg']);
    expect(s.state).toBe('active');
    expect(s.position).toBe('0/15BB548');
    expect(s.positionScheme).toBe('pg-lsn');
    expect(s.sinceLastCommitSeconds).toBe(30);
    expect(s.lease).toEqual({
      held: true,
      owner: LOCAL,
      holder: 'buildhost:4242',
      kind: 'local',
      alive: true,
      expiresAt: new Date(NOW + 20_000).toISOString(),
      expiresInSeconds: 20,
    });
    expect(s.tables[0]).toEqual({
      table: 'public.orders',
      source: 'public.orders',
      captured: true,
      next: 'c0000000015bb549',
      rows: 1200,
      objects: 4,
      lastFlushAt: iso(45),
      sinceLastFlushSeconds: 45,
      lagMs: 1800,
      schemaVersion: 2,
      schemaHash: 'h1',
      stopped: null,
      lake: { objects: 2, bytes: 3500 },
      snapshot: null,
    });
    expect(s.tables[1]).toMatchObject({
      table: 'public.items',
      captured: false,
      lake: { objects: 0, bytes: 0 },
    });
  });

  it('a table being snapshotted shows its state, counts and what is pending', async () => {
    const s = await status({
      tables: {
        'public.orders': {
          rows: 40_000,
          objects: 2,
          snapshot: {
            state: 'in_progress',
            pending: [{ after: 'k1.01', upTo: 'k1.02' }],
            rest: { after: 'k1.02' },
            rows: 40_000,
            chunks: 2,
            retries: 1,
            startedAt: iso(60),
          },
        },
        'public.items': {
          rows: 3,
          objects: 1,
          snapshot: { state: 'complete', pending: [], rest: null, rows: 3, chunks: 1, completedAt: iso(5) },
        },
      },
    }).run();
    expect(s.tables[0]!.snapshot).toEqual({
      state: 'in_progress',
      rows: 40_000,
      chunks: 2,
      pendingRanges: 1,
      divided: false,
      retries: 1,
      startedAt: iso(60),
      completedAt: null,
    });
    expect(s.tables[1]!.snapshot).toMatchObject({ state: 'complete', divided: true, pendingRanges: 0 });
  });

  it('a position without display shows its value', async () => {
    const s = await status({
      position: { scheme: 'binlog', value: 'mysql-bin.000012:4711' },
      tables: {},
    }).run();
    expect(s.position).toBe('mysql-bin.000012:4711');
  });

  it('a dead local holder: the lease is held but the source is idle', async () => {
    const s = await status(
      { tables: {} },
      { lease: { owner: LOCAL, expiresAt: NOW + 20_000, fence: 1 }, liveness: 'dead' },
    ).run();
    expect(s.lease).toMatchObject({ held: true, kind: 'local', alive: false });
    expect(s.state).toBe('idle');
  });

  it('a holder this host cannot check (a Lambda) counts as active; an expired lease as idle', async () => {
    const lambda = await status(
      { tables: {} },
      { lease: { owner: 'lambda:req-1', expiresAt: NOW + 5_000, fence: 1 }, liveness: 'unknown' },
    ).run();
    expect(lambda.state).toBe('active');
    expect(lambda.lease).toMatchObject({ holder: 'Lambda request req-1', kind: 'lambda', alive: null });
    const expired = await status(
      { tables: {} },
      { lease: { owner: LOCAL, expiresAt: NOW - 1, fence: 1 }, liveness: 'alive' },
    ).run();
    expect(expired.state).toBe('idle');
    expect(expired.lease.held).toBe(false);
  });

  it('stopped tables carry the event that stopped them: their own, else a source-wide gap', async () => {
    const gap = { at: iso(600), kind: 'gap' as const, table: '', detail: 'slot invalidated' };
    const truncate = { at: iso(300), kind: 'truncate' as const, table: 'public.items', detail: 'TRUNCATE' };
    const later = { at: iso(10), kind: 'ddl' as const, table: 'public.items', detail: 'after the stop' };
    const state: CdcState = {
      position: { scheme: 'pg-lsn', value: '1', display: '0/1' },
      tables: {
        'public.orders': { rows: 10, objects: 1, stopped: { at: iso(590), reason: 'position lost' } },
        'public.items': { rows: 5, objects: 1, stopped: { at: iso(300), reason: 'truncated' } },
        'public.other': { rows: 1, objects: 1, stopped: { at: iso(900), reason: 'by hand' } },
      },
      events: [gap, truncate, later],
    };
    const s = await status(state, { tables: ['public.orders', 'public.items', 'public.other'] }).run();
    expect(s.events).toEqual([gap, truncate, later]);
    expect(s.tables.map((t) => t.stopped)).toEqual([
      { at: iso(590), reason: 'position lost', event: gap },
      { at: iso(300), reason: 'truncated', event: truncate },
      { at: iso(900), reason: 'by hand', event: null },
    ]);
  });

  it('a state entry of a table the spec no longer lists is not shown; a corrupt state throws', async () => {
    const s = await status(
      { tables: { 'public.gone': { rows: 1, objects: 1 } } },
      { tables: ['public.orders'] },
    ).run();
    expect(s.tables.map((t) => t.table)).toEqual(['public.orders']);
    await expect(status({ tables: null } as unknown as CdcState).run()).rejects.toMatchObject({
      code: 'STATE_CORRUPT',
    });
  });
});

describe('cdcStatus: the last failure', () => {
  const failure: CdcFailure = {
    at: iso(60),
    code: 'CDC_WAL_LEVEL',
    message: 'sources.pg: wal_level is replica; set wal_level = logical and restart the server',
  };
  const committed = (secondsAgo: number): CdcState => ({ lastCommitAt: iso(secondsAgo), tables: {} });

  it('a failed first start (no state at all) shows it', async () => {
    expect((await status(undefined, { failure }).run()).lastFailure).toEqual(failure);
  });

  it('a failure after the last commit shows it; one in the same millisecond too (a stop commits, then throws)', async () => {
    expect((await status(committed(120), { failure }).run()).lastFailure).toEqual(failure);
    expect((await status(committed(60), { failure }).run()).lastFailure).toEqual(failure);
  });

  it('a commit after the failure supersedes it: null', async () => {
    expect((await status(committed(59), { failure }).run()).lastFailure).toBeNull();
  });

  it('a recorded value that is not a failure is none', async () => {
    const junk = { at: 3 } as unknown as CdcFailure;
    expect((await status(committed(120), { failure: junk }).run()).lastFailure).toBeNull();
  });
});

describe('cdcFailure: what is recorded of an error', () => {
  const AT = Date.parse('2026-12-07T14:00:00Z');

  it('the code, the first line and the further lines as detail, at the given time', () => {
    const e = Object.assign(new Error('first line; the fix\n  - one\n  - two'), { code: 'CONFIG_INVALID' });
    expect(cdcFailure(e, AT)).toEqual({
      at: '2026-12-07T14:00:00.000Z',
      code: 'CONFIG_INVALID',
      message: 'first line; the fix',
      detail: '- one\n  - two',
    });
  });

  it('an error without a code is UNEXPECTED; a thrown non-error is its text', () => {
    expect(cdcFailure(new Error('boom'), AT)).toMatchObject({ code: 'UNEXPECTED', message: 'boom' });
    expect(cdcFailure('text', AT)).toMatchObject({ code: 'UNEXPECTED', message: 'text' });
  });

  it('is bounded, and holds no secret (redacted before it is recorded)', () => {
    const long = cdcFailure(new Error(`${'x'.repeat(5000)}\n${'y'.repeat(5000)}`), AT);
    expect(long.message.length).toBeLessThanOrEqual(1000);
    expect(long.detail!.length).toBeLessThanOrEqual(2000);
    const url = cdcFailure(new Error('cannot connect to postgres://app:Zq9xK7secret@db:5432/app'), AT);
    expect(url.message).not.toContain('Zq9xK7secret');
  });
});
