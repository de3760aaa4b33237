/**
 * The CDC engine's commit protocol on the scripted source, with a real file lake (ParquetSink)
 * and a real file state store (docs/decisions/0009-cdc-commit-protocol.md):
 *   - a fast-check property over random tables, transactions (rolled-back ones, huge ones),
 *     flush cuts and crashes at every point of the protocol: the lake reconstructed (latest row
 *     per key by __pos, deletes applied) equals the model; the ack never passes what is
 *     committed; no committed object is ever deleted; each committed change appears exactly
 *     once per (pk, __pos);
 *   - the policies: a gap is POSITION_LOST with the position kept before it; TRUNCATE is recorded
 *     and the stream goes on, or stops the source under onTruncate: fail; an added column
 *     continues in new objects;
 *   - the lease: a second process waits as a standby and takes over after expiry; SIGTERM-style
 *     abort flushes, commits, acks and releases.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { LeaseHeldError } from '../../shared/contracts/errors.js';
import { newBatch } from '../../shared/dataplane/batch.js';
import { encodeRows } from '../../shared/dataplane/encoder.js';
import { cdcLakeSchema } from '../../shared/engine/cdc/lake-schema.js';
import type { CdcPoint } from '../../shared/engine/cdc/options.js';
import { parseCdcState } from '../../shared/engine/cdc/state.js';
import { incrementalPosPrefix, incrementalStepStart } from '../../shared/position/position.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import {
  checkedStore,
  checkedStreamer,
  RecordingSink,
  runEngine,
  STATE_KEY,
  WRITER,
} from '../harness/cdc-engine.js';
import {
  allChanges,
  batchChanges,
  buildScript,
  expectedLake,
  generateScript,
  reconstructLake,
  type Script,
  ScriptedServer,
  scriptArbitrary,
  scriptColumn,
  scriptTable,
  sortChanges,
} from '../harness/scripted-source.js';

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'tidemark-cdc-'));
  dirs.push(d);
  return d;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

class Crash extends Error {}

const POINTS: readonly CdcPoint[] = ['before-write', 'after-write', 'after-commit', 'after-ack'];

/** Everything one scenario shares across its (crashing) runs. */
function world(script: Script) {
  const dir = tempDir();
  const server = new ScriptedServer(script, join(dir, 'server'));
  const sink = new RecordingSink(join(dir, 'lake'));
  const store = checkedStore(new FileCursorStore(join(dir, 'state')), sink);
  const violations: string[] = [];
  const streamer = checkedStreamer(server.streamer({ rowsPerEvent: 7 }), store, violations);
  return { dir, server, sink, store, violations, streamer };
}

/** Runs until the script has ended, crashing at `crashes` ((point, nth) pairs, one per run). */
async function runWithCrashes(
  script: Script,
  w: ReturnType<typeof world>,
  rows: number,
  crashes: readonly { point: CdcPoint; nth: number }[],
): Promise<{ runs: number; landed: string[] }> {
  const landed: string[] = [];
  for (let run = 0; run < crashes.length + 20; run++) {
    const crash = crashes[run];
    let seen = 0;
    try {
      const s = await runEngine({
        script,
        server: w.server,
        store: w.store,
        sink: w.sink,
        streamer: w.streamer,
        limits: { rows },
        extra: {
          faults: (point) => {
            if (crash && point === crash.point && ++seen === crash.nth) {
              landed.push(`${point}#${crash.nth}`);
              throw new Crash(point);
            }
          },
        },
      });
      if (s.stopped === 'ended' && run >= crashes.length) return { runs: run + 1, landed };
      if (s.stopped === 'ended' && !crash) return { runs: run + 1, landed };
    } catch (e) {
      if (!(e instanceof Crash)) throw e;
    }
  }
  throw new Error('the capture did not finish');
}

async function checkLake(script: Script, w: ReturnType<typeof world>): Promise<void> {
  const names = script.tables.map((t) => t.name);
  const lake = await w.sink.lake(names);
  expect(reconstructLake(lake, { tables: names })).toEqual(expectedLake(script));
  // Each committed change exactly once per (table, pk, __pos).
  const seen = sortChanges(batchChanges(lake)).map((c) => `${c.table}|${c.pk}|${c.pos}`);
  expect(new Set(seen).size).toBe(seen.length);
  expect(seen.length).toBe(allChanges(script).length);
  expect(w.violations).toEqual([]);
  expect(w.sink.deletedCommitted).toEqual([]);
}

describe('CDC engine on the scripted source', () => {
  it('property: the lake equals the model whatever the flush cuts and crashes', async () => {
    await fc.assert(
      fc.asyncProperty(
        scriptArbitrary({
          maxTables: 4,
          maxTransactions: 40,
          maxTxnSize: 12,
          maxHugeSize: 120,
          events: false,
        }),
        fc.integer({ min: 1, max: 60 }),
        fc.array(fc.record({ point: fc.constantFrom(...POINTS), nth: fc.integer({ min: 1, max: 6 }) }), {
          maxLength: 4,
        }),
        async (script, rows, crashes) => {
          const w = world(script);
          await runWithCrashes(script, w, rows, crashes);
          await checkLake(script, w);
          // After the end the source is acknowledged up to the committed position.
          const state = parseCdcState((await w.store.load(STATE_KEY)).value);
          expect(await w.server.confirmed()).toEqual(state.position);
        },
      ),
      { numRuns: 25 },
    );
  });

  it('every crash point is reached and recovered from, with huge transactions cut inside', async () => {
    const script = generateScript({
      seed: 7,
      tables: 3,
      transactions: 60,
      hugeFraction: 0.1,
      hugeSize: { min: 300, max: 600 },
    });
    for (const point of POINTS) {
      const w = world(script);
      const { landed } = await runWithCrashes(script, w, 50, [
        { point, nth: 1 },
        { point, nth: 3 },
        { point, nth: 5 },
      ]);
      // The faults landed where the test says, or the test proves nothing.
      expect(landed).toEqual([`${point}#1`, `${point}#3`, `${point}#5`]);
      await checkLake(script, w);
    }
  });

  it('a gap stops the source with POSITION_LOST and keeps the position before it', async () => {
    const t = scriptTable('public.g', [['v', 'int32']]);
    const script = buildScript({
      tables: [t],
      steps: [
        { kind: 'txn', changes: [{ table: 'public.g', op: 'insert', id: 1 }] },
        { kind: 'gap', reason: 'the slot was invalidated', lost: 1 },
        { kind: 'txn', changes: [{ table: 'public.g', op: 'insert', id: 2 }] },
        { kind: 'txn', changes: [{ table: 'public.g', op: 'insert', id: 3 }] },
      ],
    });
    const w = world(script);
    await expect(runEngine({ ...w, script })).rejects.toMatchObject({ code: 'POSITION_LOST' });
    const state = parseCdcState((await w.store.load(STATE_KEY)).value);
    expect(state.events?.map((e) => e.kind)).toEqual(['gap']);
    expect(state.position?.value).toBe('0');
    expect(Number((await w.server.confirmed())?.value ?? 0)).toBeLessThanOrEqual(0);
  });

  it('a TRUNCATE is recorded and the stream goes on; under onTruncate: fail it stops the source', async () => {
    const t = scriptTable('public.tr', [['v', 'text']]);
    const steps = [
      { kind: 'txn' as const, changes: [{ table: 'public.tr', op: 'insert' as const, id: 1 }] },
      { kind: 'truncate' as const, table: 'public.tr' },
      { kind: 'txn' as const, changes: [{ table: 'public.tr', op: 'insert' as const, id: 2 }] },
    ];
    const script = buildScript({ tables: [t], steps });
    const w = world(script);
    const s = await runEngine({ ...w, script });
    expect(s.stopped).toBe('ended');
    const state = parseCdcState((await w.store.load(STATE_KEY)).value);
    expect(state.events?.map((e) => `${e.kind}:${e.table}`)).toEqual(['truncate:public.tr']);
    await checkLake(script, w);

    const w2 = world(script);
    const failing = runEngine({
      ...w2,
      script,
      extra: {
        tables: [
          {
            source: 'public.tr',
            target: 'public.tr',
            writeMode: 'upsert',
            exclude: [],
            onWiden: 'stop',
            onTruncate: 'fail',
          },
        ],
      },
    });
    await expect(failing).rejects.toMatchObject({ code: 'DESTRUCTIVE_DDL' });
    // The row before the truncate is durable and acked; the one after is not.
    const s2 = parseCdcState((await w2.store.load(STATE_KEY)).value);
    expect(s2.tables['public.tr']?.rows).toBe(1);
  });

  it('an added column continues in new objects', async () => {
    const t = scriptTable('public.ac', [['v', 'int32']]);
    const script = buildScript({
      tables: [t],
      steps: [
        { kind: 'txn', changes: [{ table: 'public.ac', op: 'insert', id: 1 }] },
        { kind: 'add-column', table: 'public.ac', column: scriptColumn('extra', 'text') },
        { kind: 'txn', changes: [{ table: 'public.ac', op: 'insert', id: 2 }] },
      ],
    });
    const w = world(script);
    const s = await runEngine({ ...w, script });
    expect(s.stopped).toBe('ended');
    await checkLake(script, w);
    const state = parseCdcState((await w.store.load(STATE_KEY)).value);
    expect(state.tables['public.ac']?.schemaVersion).toBe(2);
  });

  it('a second process waits as a standby and takes over after the lease expires', async () => {
    const script = generateScript({ seed: 3, tables: 2, transactions: 30 });
    const w = world(script);
    // A holder that never renews: its lease simply runs out.
    await w.store.acquire(STATE_KEY, 'dead-holder', 1500);
    await expect(runEngine({ ...w, script, extra: { standby: false } })).rejects.toBeInstanceOf(
      LeaseHeldError,
    );
    const s = await runEngine({ ...w, script });
    expect(s.stopped).toBe('ended');
    expect(s.standbyMs).toBeGreaterThan(0);
    await checkLake(script, w);
  });

  it('an abort (SIGTERM) flushes, commits, acks and releases the lease', async () => {
    const script = generateScript({ seed: 11, tables: 2, transactions: 400 });
    const dir = tempDir();
    const server = new ScriptedServer(script, join(dir, 'server'));
    const sink = new RecordingSink(join(dir, 'lake'));
    const store = checkedStore(new FileCursorStore(join(dir, 'state')), sink);
    const violations: string[] = [];
    // A slow log: the abort lands while it still has transactions to deliver.
    const streamer = checkedStreamer(server.streamer({ rowsPerEvent: 5, delayMs: 2 }), store, violations);
    const stop = new AbortController();
    let commits = 0;
    const run = runEngine({
      script,
      server,
      store,
      sink,
      streamer,
      limits: { rows: 1_000_000 },
      extra: {
        signal: stop.signal,
        faults: (p) => {
          if (p === 'after-commit') commits++;
        },
      },
    });
    setTimeout(() => stop.abort(), 300);
    const s = await run;
    expect(s.stopped).toBe('interrupted');
    expect(commits).toBeGreaterThanOrEqual(1);
    expect(violations).toEqual([]);
    const rec = await store.load(STATE_KEY);
    expect(rec.lease).toBeUndefined();
    const state = parseCdcState(rec.value);
    expect(await server.confirmed()).toEqual(state.position);
    // Everything up to the committed position is in the lake, nothing after it was lost: a
    // second run finishes the script and the lake equals the model.
    const w = {
      server,
      store,
      sink,
      streamer: checkedStreamer(server.streamer(), store, violations),
      violations,
    };
    const again = await runEngine({ ...w, script });
    expect(again.stopped).toBe('ended');
    await checkLake(script, { ...w, dir });
  });
  it('a stale writer whose lease was taken cannot replace a committed object nor win over committed rows', async () => {
    const script = generateScript({ seed: 5, tables: 2, transactions: 80 });
    const w = world(script);
    // A's second write stalls until B has finished: A's lease (1.5 s, never renewed) expires
    // meanwhile, B takes over with a higher fence and commits, then A's late PUT lands.
    let writes = 0;
    let resume!: () => void;
    const stalled = new Promise<void>((r) => {
      resume = r;
    });
    // B starts only once A holds the lease (A writes only under it): started together, a slow
    // start of A on a loaded machine let B take the lease first and A run second, unopposed.
    let aWrites!: () => void;
    const aHoldsLease = new Promise<void>((r) => {
      aWrites = r;
    });
    const written: string[] = [];
    const stale: typeof w.sink = Object.assign(Object.create(w.sink) as typeof w.sink, {
      write: async (...args: Parameters<typeof w.sink.write>) => {
        aWrites();
        if (++writes === 2) await stalled;
        const refs = await w.sink.write(...args);
        written.push(...refs.map((r) => `A ${r.uri}`));
        return refs;
      },
    });
    const a = runEngine({
      ...w,
      script,
      sink: stale,
      owner: 'writer-a',
      limits: { rows: 20 },
      extra: { leaseTtlMs: 1500, renewEveryMs: 3_600_000, skewMarginMs: 200 },
    }).then(
      () => 'finished',
      (e: unknown) => (e as { code?: string }).code ?? String(e),
    );
    const bSink: typeof w.sink = Object.assign(Object.create(w.sink) as typeof w.sink, {
      write: async (...args: Parameters<typeof w.sink.write>) => {
        const refs = await w.sink.write(...args);
        written.push(...refs.map((r) => `B ${r.uri}`));
        return refs;
      },
    });
    await Promise.race([aHoldsLease, a]); // (an A that ends without writing fails below)
    const b = await runEngine({ ...w, script, sink: bSink, owner: 'writer-b', limits: { rows: 25 } });
    expect(b.stopped).toBe('ended');
    expect(b.standbyMs).toBeGreaterThan(0);
    resume();
    // A stops at its commit: its lease is gone.
    expect(await a).toBe('LEASE_LOST');
    const uris = written.map((x) => x.slice(2));
    // A's late object has a name of its own (its fence): no committed object was replaced.
    expect(new Set(uris).size).toBe(uris.length);
    expect(written.some((x) => x.startsWith('A '))).toBe(true);
    const names = script.tables.map((t) => t.name);
    const lake = await w.sink.lake(names);
    // What A left only duplicates committed (pk, __pos) rows with the same values; the lake
    // still reconstructs to the model.
    expect(reconstructLake(lake, { tables: names })).toEqual(expectedLake(script));
    const byKey = new Map<string, string>();
    for (const c of batchChanges(lake)) {
      const k = `${c.table}|${c.pk}|${c.pos}`;
      const v = JSON.stringify(c.values, (_, x) => (typeof x === 'bigint' ? x.toString() : x));
      if (byKey.has(k)) expect(byKey.get(k)).toBe(v);
      byKey.set(k, v);
    }
  });

  it("never deletes nor counts as a lost state the same writer's incremental objects of a table that moved to cdc", async () => {
    const script = generateScript({ seed: 9, tables: 2, transactions: 30 });
    const w = world(script);
    // What `tidemark reset` keeps when a table moves from incremental to cdc: the same writer's
    // `j` objects in the table's folder, written under the incremental state's fence.
    const t0 = script.tables[0]!;
    const schema = cdcLakeSchema(t0.schema);
    const row = Object.fromEntries(schema.columns.map((c) => [c.name, c.name === 'id' ? 999_999n : null]));
    const record = encodeRows(schema, [row], {
      posPrefix: incrementalPosPrefix(0, 1),
      ordinalBase: 0,
      op: 1,
      phase: 'incremental',
      snapshot: false,
      ingestTsNanos: 0n,
    });
    const [kept] = await w.sink.write(
      { table: t0.name, writer: WRITER, fence: 1 },
      schema,
      incrementalStepStart(0),
      [newBatch({ table: t0.name, record, watermark: undefined, writeMode: 'upsert' })],
    );
    // A crashed first flush of the CDC capture would leave `p` objects; the first start must
    // neither refuse (STATE_MISSING) nor delete the `j` object, and the capture must finish.
    const s = await runEngine({ ...w, script, limits: { rows: 7 } });
    expect(s.stopped).toBe('ended');
    const listed = (await w.sink.inner.list(t0.name, WRITER)).map((o) => o.uri);
    expect(listed).toContain(kept!.uri);
    // A restart (recovery of every table, from `next`) keeps it too.
    const again = await runEngine({ ...w, script });
    expect(again.stopped).toBe('ended');
    expect((await w.sink.inner.list(t0.name, WRITER)).map((o) => o.uri)).toContain(kept!.uri);
    const names = script.tables.map((t) => t.name);
    const cdcOnly = (await w.sink.lake(names)).filter((r) => r.record !== record);
    expect(reconstructLake(cdcOnly, { tables: names })).toEqual(expectedLake(script));
  });

  it('flushes a quiet table by the age of its oldest pending row while another keeps streaming', async () => {
    // One row for public.quiet, then a slow stream for public.busy only: public.quiet is never
    // touched again, so only the age check can flush it before the end.
    const quiet = scriptTable('public.quiet', [['v', 'int32']]);
    const busy = scriptTable('public.busy', [['v', 'int32']]);
    const steps = [
      { kind: 'txn' as const, changes: [{ table: 'public.quiet', op: 'insert' as const, id: 1 }] },
      ...Array.from({ length: 80 }, (_, k) => ({
        kind: 'txn' as const,
        changes: [{ table: 'public.busy', op: 'insert' as const, id: k + 1 }],
      })),
    ];
    const script = buildScript({ tables: [quiet, busy], steps });
    const w = world(script);
    const slow = checkedStreamer(w.server.streamer({ rowsPerEvent: 1, delayMs: 3 }), w.store, w.violations);
    const quietRows: number[] = [];
    const s = await runEngine({
      ...w,
      script,
      streamer: slow,
      limits: { rows: 1_000_000, ms: 20 },
      extra: {
        faults: async (point) => {
          if (point !== 'after-commit') return;
          const state = parseCdcState((await w.store.load(STATE_KEY)).value);
          quietRows.push(state.tables['public.quiet']?.rows ?? 0);
        },
      },
    });
    expect(s.stopped).toBe('ended');
    // public.quiet's row was committed by a flush before the last one (the end's).
    expect(quietRows.slice(0, -1)).toContain(1);
    await checkLake(script, w);
  });
});
