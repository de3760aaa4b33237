/**
 * The scripted CDC source (test/harness/scripted-source.ts) against its own model: it delivers
 * exactly the committed transactions in order, never rolled-back work; restarts resume after the
 * committed position and skip rows already durable (per-table `next`), also mid-transaction; a
 * start before the confirmed position is a gap; schema events, DDL, keepalives and scripted gaps
 * arrive where the script puts them; and the lake reconstructed from the cut batches equals
 * `expectedLake`, however the batches were cut (fast-check over generated scripts). Plus the
 * durable server state across a SIGKILLed child process and a throughput smoke (no timing asserts).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CdcEvent, CdcTable, SourcePosition } from '../../shared/contracts/cdc.js';
import type { Batch } from '../../shared/dataplane/batch.js';
import { META_COMMIT_TS, META_PHASE, META_SNAPSHOT } from '../../shared/dataplane/metadata.js';
import { parsePgPosition, pgPosition } from '../../shared/position/position.js';
import {
  allChanges,
  batchChanges,
  buildScript,
  type ChangeRecord,
  cellValue,
  committedChangeCount,
  expectedLake,
  generateScript,
  prng,
  reconstructLake,
  type Script,
  type ScriptedReader,
  ScriptedServer,
  scriptArbitrary,
  scriptCdcTables,
  scriptColumn,
  scriptedDriver,
  scriptedDriverWithoutStream,
  scriptedPosition,
  scriptFingerprint,
  scriptTable,
  sortChanges,
} from '../harness/scripted-source.js';

const HERE = dirname(fileURLToPath(import.meta.url));
let root: string;
let dirs = 0;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tidemark-scripted-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});
const freshDir = (): string => join(root, `s${dirs++}`);

/** Reads a reader to its end; cuts a table after a schema event, and everything per `cutAfter`. */
async function drain(
  reader: ScriptedReader,
  tables: readonly CdcTable[],
  options: {
    cutAfter?: (ev: CdcEvent, i: number) => boolean | readonly string[];
    onEvent?: (ev: CdcEvent, cut: Batch[]) => unknown;
  } = {},
): Promise<{ events: CdcEvent[]; batches: Batch[] }> {
  const events: CdcEvent[] = [];
  const batches: Batch[] = [];
  const cut = (names: readonly string[]): Batch[] => {
    const out: Batch[] = [];
    for (const n of names) {
      const b = reader.cut(n);
      if (b) out.push(b);
    }
    batches.push(...out);
    return out;
  };
  const all = tables.map((t) => t.ref.target);
  for (let i = 0; ; i++) {
    const ev = await reader.next(100);
    if (ev === undefined) {
      expect(reader.ended).toBe(true);
      break;
    }
    events.push(ev);
    let made: Batch[] = [];
    if (ev.kind === 'schema') made = cut([ev.table]);
    const which = options.cutAfter?.(ev, i) ?? false;
    if (which === true) made = made.concat(cut(all));
    else if (which !== false) made = made.concat(cut(which));
    if (options.onEvent?.(ev, made) === 'stop') return { events, batches };
  }
  cut(all);
  return { events, batches };
}

async function openOn(
  script: Script,
  dir = freshDir(),
  from: { position?: SourcePosition; next?: ReadonlyMap<string, string> } = {},
  tables = scriptCdcTables(script),
  rowsPerEvent?: number,
) {
  const server = new ScriptedServer(script, dir);
  const reader = server.openReader(tables, rowsPerEvent ? { rowsPerEvent } : {});
  await reader.start({
    position: from.position ?? (await reader.initialPosition()),
    next: from.next ?? new Map(),
  });
  return { server, reader, tables };
}

const stepOf = (pos: string): number => Number(parsePgPosition(pos).commitLsn);

/** A hand-built script over two tables. */
function handScript(): Script {
  return buildScript({
    seed: 7,
    tables: [
      scriptTable('public.a', [
        ['n', 'int32'],
        ['s', 'text'],
      ]),
      scriptTable('public.b', [
        ['f', 'float64'],
        ['t', 'timestamp'],
      ]),
    ],
    steps: [
      /* 0 */ {
        kind: 'txn',
        commitTimeMs: 1_700_000_000_123,
        changes: [
          { table: 'public.a', op: 'insert', id: 1, values: { n: 10, s: 'one' } },
          { table: 'public.b', op: 'insert', id: 1 },
          { table: 'public.a', op: 'insert', id: 2, values: { n: 20, s: null } },
          { table: 'public.b', op: 'insert', id: 2 },
        ],
      },
      /* 1 */ { kind: 'keepalive' },
      /* 2 */ {
        kind: 'txn',
        rolledBack: true,
        changes: [{ table: 'public.a', op: 'update', id: 1, values: { n: 999, s: 'never' } }],
      },
      /* 3 */ {
        kind: 'txn',
        changes: [
          { table: 'public.a', op: 'update', id: 1, values: { n: 11, s: 'uno' } },
          { table: 'public.b', op: 'delete', id: 1 },
          { table: 'public.a', op: 'delete', id: 2 },
          { table: 'public.a', op: 'insert', id: 3, values: { n: 30, s: 'drei' } },
        ],
      },
      /* 4 */ { kind: 'truncate', table: 'public.b' },
      /* 5 */ { kind: 'ddl', table: 'public.a', detail: 'ALTER TABLE public.a DROP CONSTRAINT x' },
      /* 6 */ { kind: 'add-column', table: 'public.a', column: scriptColumn('extra', 'text') },
      /* 7 */ {
        kind: 'txn',
        changes: [
          { table: 'public.b', op: 'insert', id: 5 },
          { table: 'public.a', op: 'update', id: 3, values: { n: 31, s: 'drei', extra: 'x' } },
        ],
      },
      /* 8 */ { kind: 'keepalive' },
    ],
  });
}

describe('scripted source: delivery', () => {
  it('delivers the committed transactions in order, with the events the script puts between them', async () => {
    const script = handScript();
    const { reader, tables } = await openOn(script);
    const { events, batches } = await drain(reader, tables, { cutAfter: (ev) => ev.kind === 'commit' });
    const shape = events.map((e) =>
      e.kind === 'rows'
        ? `rows ${e.table} ${e.count}`
        : e.kind === 'commit' || e.kind === 'progress'
          ? `${e.kind} ${e.position.display}`
          : e.kind === 'ddl'
            ? `ddl ${e.ddl.kind} ${e.ddl.table}`
            : e.kind === 'schema'
              ? `schema ${e.table} ${e.changes.map((c) => c.kind).join(',')}`
              : e.kind,
    );
    expect(shape).toEqual([
      'begin',
      'rows public.a 1',
      'rows public.b 1',
      'rows public.a 1',
      'rows public.b 1',
      'commit step 0',
      'progress step 1',
      // step 2 rolled back: nothing
      'begin',
      'rows public.a 1',
      'rows public.b 1',
      'rows public.a 2',
      'commit step 3',
      'ddl truncate public.b',
      'ddl ddl public.a',
      'begin',
      'rows public.b 1',
      // the added column's Relation message comes just before the table's next row
      'schema public.a added',
      'rows public.a 1',
      'commit step 7',
      'progress step 8',
    ]);
    const commit = events.find((e) => e.kind === 'commit');
    expect(commit).toEqual({
      kind: 'commit',
      position: { scheme: 'scripted', value: '0', display: 'step 0' },
      commitTimeMs: 1_700_000_000_123,
    });
    for (const e of events) {
      if (e.kind === 'rows') expect(e.bytes).toBeGreaterThan(0);
    }
    // Every batch carries only committed, not-rolled-back rows, once each.
    expect(sortChanges(batchChanges(batches))).toEqual(sortChanges(allChanges(script)));
    expect(batchChanges(batches).some((c) => stepOf(c.pos) === 2)).toBe(false);
    expect(reconstructLake(batches, { tables: ['public.a', 'public.b'] })).toEqual(expectedLake(script));
  });

  it('writes ops c/u/d, ordinals per transaction and table, commit time, phase stream, key-only deletes', async () => {
    const script = handScript();
    const { reader, tables } = await openOn(script);
    const { batches } = await drain(reader, tables, { cutAfter: (ev) => ev.kind === 'commit' });
    const changes = batchChanges(batches);
    const a3 = changes.filter((c) => c.table === 'public.a' && stepOf(c.pos) === 3);
    expect(a3.map((c) => [c.pos, c.op, c.pk])).toEqual([
      [pgPosition(3n, 0), 'u', '1'],
      [pgPosition(3n, 1), 'd', '2'],
      [pgPosition(3n, 2), 'c', '3'],
    ]);
    expect(a3[0]!.values).toEqual({ id: 1n, n: 11, s: 'uno' });
    // A delete knows only the key (default replica identity).
    expect(a3[1]!.values).toEqual({ id: 2n, n: null, s: null });
    const b1 = changes.find((c) => c.table === 'public.b' && c.op === 'd')!;
    expect(b1.values).toEqual({ id: 1n, f: null, t: null });
    expect(b1.pos).toBe(pgPosition(3n, 0));
    const first = batches[0]!;
    expect(first.watermark).toBe(pgPosition(0n, 1));
    expect(first.writeMode).toBe('upsert');
    const rec = first.record;
    const col = (name: string) => rec.data.children[rec.schema.fields.findIndex((f) => f.name === name)]!;
    expect(cellValue(col(META_COMMIT_TS), 0)).toBe(1_700_000_000_123n * 1_000_000n);
    expect(cellValue(col(META_PHASE), 0)).toBe('stream');
    expect(cellValue(col(META_SNAPSHOT), 0)).toBe(false);
    // Non-key columns are nullable on the wire, the key is not.
    expect(
      rec.schema.fields.filter((f) => !f.name.startsWith('__')).map((f) => [f.name, f.nullable]),
    ).toEqual([
      ['id', false],
      ['n', true],
      ['s', true],
    ]);
  });

  it('rolled-back work never appears, in generated scripts with many rollbacks', async () => {
    const script = generateScript({ seed: 11, tables: 4, transactions: 300, rollbackFraction: 0.4 });
    const rolledBack = new Set(
      script.steps.flatMap((s, n) => (s.kind === 'txn' && s.rolledBack && s.count > 0 ? [n] : [])),
    );
    expect(rolledBack.size).toBeGreaterThan(50);
    const { reader, tables } = await openOn(script);
    const { events, batches } = await drain(reader, tables, { cutAfter: (ev) => ev.kind === 'commit' });
    const commits = events.flatMap((e) => (e.kind === 'commit' ? [Number(e.position.value)] : []));
    const committed = script.steps.flatMap((s, n) => (s.kind === 'txn' && !s.rolledBack ? [n] : []));
    expect(commits).toEqual(committed);
    const changes = batchChanges(batches);
    expect(changes.some((c) => rolledBack.has(stepOf(c.pos)))).toBe(false);
    expect(sortChanges(changes)).toEqual(sortChanges(allChanges(script)));
  });

  it('each commit closes exactly its transaction; a huge one arrives in many rows events', async () => {
    const script = generateScript({
      seed: 3,
      tables: 3,
      transactions: 40,
      hugeFraction: 0.1,
      hugeSize: { min: 3000, max: 5000 },
      interleave: 0,
    });
    const byStep = new Map<number, ChangeRecord[]>();
    for (const c of allChanges(script)) byStep.set(stepOf(c.pos), [...(byStep.get(stepOf(c.pos)) ?? []), c]);
    const { reader, tables } = await openOn(script, freshDir(), {}, undefined, 500);
    let maxRowsEvents = 0;
    let rowsEvents = 0;
    let open = false;
    await drain(reader, tables, {
      cutAfter: (ev) => ev.kind === 'commit',
      onEvent: (ev, cut) => {
        if (ev.kind === 'begin') {
          expect(open).toBe(false);
          open = true;
          rowsEvents = 0;
        }
        if (ev.kind === 'rows') {
          expect(open).toBe(true);
          expect(ev.count).toBeLessThanOrEqual(500);
          rowsEvents++;
        }
        if (ev.kind === 'progress') expect(open).toBe(false);
        if (ev.kind === 'commit') {
          open = false;
          maxRowsEvents = Math.max(maxRowsEvents, rowsEvents);
          const want = byStep.get(Number(ev.position.value)) ?? [];
          expect(sortChanges(batchChanges(cut))).toEqual(sortChanges(want));
        }
      },
    });
    expect(maxRowsEvents).toBeGreaterThanOrEqual(6);
  });

  it('skips tables it does not capture and names targets in events and batches', async () => {
    const script = handScript();
    const tables: CdcTable[] = [
      {
        ref: { source: 'public.a', target: 'lake.a', primaryKey: ['id'] },
        schema: script.tables[0]!.schema,
        writeMode: 'append',
      },
    ];
    const { reader } = await openOn(script, freshDir(), {}, tables);
    const { events, batches } = await drain(reader, tables, { cutAfter: (ev) => ev.kind === 'commit' });
    expect(events.some((e) => e.kind === 'rows' && e.table !== 'lake.a')).toBe(false);
    expect(events.filter((e) => e.kind === 'ddl').map((e) => e.kind === 'ddl' && e.ddl.table)).toEqual([
      'lake.a',
    ]);
    expect(batches.every((b) => b.table === 'lake.a' && b.writeMode === 'append')).toBe(true);
    const want = allChanges(script).filter((c) => c.table === 'public.a');
    expect(batchChanges(batches).map((c) => c.pos)).toEqual(want.map((c) => c.pos));
  });

  it('a schema event leaves the old rows pending; next() refuses to go on until they are cut', async () => {
    const script = handScript();
    const { reader } = await openOn(script, freshDir(), { position: scriptedPosition(3) });
    const seen: CdcEvent[] = [];
    for (;;) {
      const ev = (await reader.next(0))!;
      seen.push(ev);
      if (ev.kind === 'schema') break;
    }
    const schema = seen.at(-1)!;
    expect(schema.kind === 'schema' && schema.schema.columns.map((c) => c.name)).toEqual([
      'id',
      'n',
      's',
      'extra',
    ]);
    // Nothing of public.a is pending here (resumed after step 3), so it goes on.
    expect(reader.pending('public.a').rows).toBe(0);
    expect(await reader.next(0)).toMatchObject({ kind: 'rows', table: 'public.a', count: 1 });
    const b = reader.cut('public.a')!;
    expect(b.record.schema.fields.map((f) => f.name).slice(0, 4)).toEqual(['id', 'n', 's', 'extra']);
    expect(batchChanges([b])[0]!.values).toEqual({ id: 3n, n: 31, s: 'drei', extra: 'x' });

    // From the start with nothing cut: public.a's rows of steps 0 and 3 are pending at the event.
    const again = (await openOn(script)).reader;
    let ev: CdcEvent | undefined;
    do ev = await again.next(0);
    while (ev?.kind !== 'schema');
    expect(again.pending('public.a').rows).toBe(5);
    await expect(again.next(0)).rejects.toThrow(/old schema/);
  });

  it('a resumed reader whose table schema lags the script gets a schema event before the first row', async () => {
    const script = handScript();
    // The engine still knows public.a without `extra` (it resumed after the add-column step).
    const { reader, tables } = await openOn(script, freshDir(), { position: scriptedPosition(6) });
    const { events, batches } = await drain(reader, tables);
    expect(events.filter((e) => e.kind === 'schema').map((e) => e.kind === 'schema' && e.table)).toEqual([
      'public.a',
    ]);
    expect(reconstructLake(batches).get('public.a')!.get('3')).toMatchObject({ extra: 'x', n: 31 });
  });

  it('a scripted gap is delivered and the lost steps are skipped', async () => {
    const script = buildScript({
      tables: [scriptTable('public.a', [['n', 'int32']])],
      steps: [
        { kind: 'txn', changes: [{ table: 'public.a', op: 'insert', id: 1 }] },
        { kind: 'gap', reason: 'slot invalidated', lost: 2 },
        { kind: 'txn', changes: [{ table: 'public.a', op: 'insert', id: 2 }] },
        { kind: 'add-column', table: 'public.a', column: scriptColumn('m', 'text') },
        { kind: 'txn', changes: [{ table: 'public.a', op: 'insert', id: 3 }] },
      ],
    });
    const { reader, tables } = await openOn(script);
    const { events, batches } = await drain(reader, tables);
    expect(events.map((e) => e.kind)).toEqual([
      'begin',
      'rows',
      'commit',
      'gap',
      'begin',
      'schema',
      'rows',
      'commit',
    ]);
    expect(events[3]).toEqual({
      kind: 'gap',
      reason: 'slot invalidated',
      from: scriptedPosition(0),
      to: scriptedPosition(3),
    });
    expect(reconstructLake(batches)).toEqual(expectedLake(script));
    expect([...expectedLake(script, { includeLost: true }).get('public.a')!.keys()]).toEqual(['1', '2', '3']);
  });
});

describe('scripted source: positions, restarts and the server state', () => {
  it('restart from a committed position delivers exactly the remaining transactions', async () => {
    const script = generateScript({ seed: 5, tables: 3, transactions: 80 });
    const commits = script.steps.flatMap((s, n) => (s.kind === 'txn' && !s.rolledBack ? [n] : []));
    const at = commits[30]!;
    const { reader, tables } = await openOn(script, freshDir(), { position: scriptedPosition(at) });
    const { events, batches } = await drain(reader, tables);
    expect(events.flatMap((e) => (e.kind === 'commit' ? [Number(e.position.value)] : []))).toEqual(
      commits.filter((n) => n > at),
    );
    expect(events.some((e) => (e.kind === 'progress' ? Number(e.position.value) <= at : false))).toBe(false);
    expect(sortChanges(batchChanges(batches))).toEqual(sortChanges(allChanges(script, { after: at })));
  });

  it('expectedLake(script, upTo) is the lake right after the commit at step upTo', async () => {
    const script = generateScript({ seed: 8, tables: 3, transactions: 60, inject: [] });
    const at = script.steps.flatMap((s, n) => (s.kind === 'txn' && !s.rolledBack ? [n] : []))[25]!;
    const { reader, tables } = await openOn(script);
    const { batches } = await drain(reader, tables, {
      cutAfter: (ev) => ev.kind === 'commit',
      onEvent: (ev) => (ev.kind === 'commit' && Number(ev.position.value) === at ? 'stop' : undefined),
    });
    const names = script.tables.map((t) => t.name);
    expect(reconstructLake(batches, { tables: names })).toEqual(expectedLake(script, at));
    expect(expectedLake(script, at)).not.toEqual(expectedLake(script));
    expect(sortChanges(batchChanges(batches))).toEqual(sortChanges(allChanges(script, at)));
  });

  it('per-table next skips the rows of a transaction already durable from a cut in its middle', async () => {
    const script = buildScript({
      tables: [scriptTable('public.a', [['n', 'int32']]), scriptTable('public.b', [['s', 'text']])],
      steps: [
        { kind: 'txn', changes: [{ table: 'public.a', op: 'insert', id: 1 }] },
        {
          kind: 'txn',
          changes: Array.from({ length: 30 }, (_, i) => ({
            table: i % 3 === 0 ? 'public.b' : 'public.a',
            op: 'insert' as const,
            id: 100 + i,
          })),
        },
      ],
    });
    // A cut mid-transaction made public.a's rows up to ordinal 7 of step 1 durable; the state
    // still says "after step 0".
    const next = new Map([
      ['public.a', pgPosition(1n, 8)],
      ['public.b', pgPosition(0n, 0)],
    ]);
    const { reader, tables } = await openOn(script, freshDir(), { position: scriptedPosition(0), next });
    const { events, batches } = await drain(reader, tables);
    const rows = (t: string) =>
      events.reduce((n, e) => n + (e.kind === 'rows' && e.table === t ? e.count : 0), 0);
    expect(rows('public.a')).toBe(20 - 8);
    expect(rows('public.b')).toBe(10);
    const a = batchChanges(batches).filter((c) => c.table === 'public.a');
    expect(a[0]!.pos).toBe(pgPosition(1n, 8));
    expect(a.map((c) => c.pos)).toEqual(
      allChanges(script, { after: 0 })
        .filter((c) => c.table === 'public.a')
        .slice(8)
        .map((c) => c.pos),
    );
  });

  it('a start before the confirmed position gets a gap, at it none; the state is durable and monotonic', async () => {
    const script = generateScript({ seed: 9, tables: 2, transactions: 30, rollbackFraction: 0 });
    const dir = freshDir();
    const first = await openOn(script, dir);
    await first.reader.setConfirmed(scriptedPosition(10));
    await first.reader.setConfirmed(scriptedPosition(4)); // moving back is ignored
    await first.reader.close();
    await first.reader.close();
    // Another server instance (another process would do the same) reads the file.
    expect(await new ScriptedServer(script, dir).confirmed()).toEqual(scriptedPosition(10));

    const before = await openOn(script, dir, { position: scriptedPosition(5) });
    const gap = await before.reader.next(0);
    expect(gap).toEqual({
      kind: 'gap',
      reason: expect.stringContaining('step 10'),
      from: scriptedPosition(5),
      to: scriptedPosition(10),
    });
    const rest = await drain(before.reader, before.tables);
    const firstCommit = rest.events.find((e) => e.kind === 'commit');
    expect(firstCommit?.kind === 'commit' && Number(firstCommit.position.value)).toBeGreaterThan(10);

    const fresh = await openOn(script, dir);
    expect(await fresh.reader.next(0)).toMatchObject({
      kind: 'gap',
      from: scriptedPosition(-1),
      to: scriptedPosition(10),
    });

    const exact = await openOn(script, dir, { position: scriptedPosition(10) });
    const ev = await exact.reader.next(0);
    expect(ev?.kind).not.toBe('gap');
    const all = await drain(exact.reader, exact.tables);
    expect(all.events.some((e) => e.kind === 'gap')).toBe(false);

    await expect(new ScriptedServer(generateScript({ seed: 10 }), dir).confirmed()).rejects.toThrow(
      /another script/,
    );
  });

  it('a reader SIGKILLed in a child process leaves a confirmed position another process resumes from', async () => {
    const params = { seed: 21, tables: 3, transactions: 400, rollbackFraction: 0.1 };
    const script = generateScript(params);
    const dir = freshDir();
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(HERE, '../harness/scripted-child.ts'), dir, JSON.stringify(params), '3'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
      child.on('exit', (code, signal) => resolve(signal ?? code)),
    );
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if ((out.match(/^confirmed /gm) ?? []).length >= 5) resolve();
      });
      child.on('exit', () => reject(new Error(`child exited early: ${out}\n${err}`)));
    });
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    expect(out).not.toMatch(/ended/);
    const printed = [...out.matchAll(/^confirmed (\d+)$/gm)].map((m) => Number(m[1]));
    const confirmed = await new ScriptedServer(script, dir).confirmed();
    expect(confirmed).toBeDefined();
    const c = Number(confirmed!.value);
    // What the child printed was durable; it may have confirmed one more before the kill.
    expect(c).toBeGreaterThanOrEqual(printed.at(-1)!);
    const { reader, tables } = await openOn(script, dir, { position: confirmed });
    const { events } = await drain(reader, tables);
    expect(events.some((e) => e.kind === 'gap')).toBe(false);
    expect(events.flatMap((e) => (e.kind === 'commit' ? [Number(e.position.value)] : []))).toEqual(
      script.steps.flatMap((s, n) => (s.kind === 'txn' && !s.rolledBack && n > c ? [n] : [])),
    );
  });
});

describe('scripted source: the model (properties)', () => {
  it('generation is deterministic', () => {
    const p = { seed: 42, tables: 5, transactions: 200, hugeFraction: 0.05 };
    expect(scriptFingerprint(generateScript(p))).toBe(scriptFingerprint(generateScript(p)));
    expect(scriptFingerprint(generateScript({ ...p, seed: 43 }))).not.toBe(
      scriptFingerprint(generateScript(p)),
    );
    const exact = generateScript({ seed: 1, tables: 2, changes: 1234 });
    expect(committedChangeCount(exact)).toBe(1234);
  });

  it('rows reconstructed from batches cut at every commit equal expectedLake', async () => {
    await fc.assert(
      fc.asyncProperty(scriptArbitrary(), async (script) => {
        const { reader, tables } = await openOn(script);
        const { batches } = await drain(reader, tables, { cutAfter: (ev) => ev.kind === 'commit' });
        expect(reconstructLake(batches, { tables: script.tables.map((t) => t.name) })).toEqual(
          expectedLake(script),
        );
        expect(sortChanges(batchChanges(batches))).toEqual(sortChanges(allChanges(script)));
      }),
      { numRuns: 60 },
    );
  });

  it('cuts at arbitrary points (inside transactions too) do not change the reconstruction', async () => {
    await fc.assert(
      fc.asyncProperty(
        scriptArbitrary(),
        fc.integer(),
        fc.constantFrom(0.05, 0.3, 0.9),
        fc.integer({ min: 1, max: 64 }),
        async (script, seed, p, rowsPerEvent) => {
          const r = prng(seed);
          const { reader, tables } = await openOn(script, freshDir(), {}, undefined, rowsPerEvent);
          const names = tables.map((t) => t.ref.target);
          const { batches } = await drain(reader, tables, {
            cutAfter: () => (r() < p ? names.filter(() => r() < 0.5) : false),
          });
          for (const b of batches) expect(b.watermark).toBe(batchChanges([b]).at(-1)!.pos);
          const changes = batchChanges(batches);
          expect(new Set(changes.map((c) => `${c.table} ${c.pos}`)).size).toBe(changes.length);
          expect(sortChanges(changes)).toEqual(sortChanges(allChanges(script)));
          expect(reconstructLake(batches, { tables: script.tables.map((t) => t.name) })).toEqual(
            expectedLake(script),
          );
        },
      ),
      { numRuns: 60 },
    );
  });

  it('crash and resume (from the committed position, per-table next, confirmed) delivers each change once', async () => {
    await fc.assert(
      fc.asyncProperty(
        scriptArbitrary({ events: false }),
        fc.integer(),
        fc.integer({ min: 1, max: 40 }),
        async (script, seed, flushRows) => {
          const r = prng(seed);
          const dir = freshDir();
          // The engine's durable state: committed position, per-table next, batches in the lake.
          let position: SourcePosition | undefined;
          const next = new Map<string, string>();
          const lake: Batch[] = [];
          for (let run = 0; run < 20; run++) {
            const { reader, tables } = await openOn(
              script,
              dir,
              { position, next: new Map(next) },
              undefined,
              8,
            );
            const names = tables.map((t) => t.ref.target);
            const crashAt = run < 19 && r() < 0.8 ? Math.floor(r() * 60) : Number.POSITIVE_INFINITY;
            const flush = (table: string): void => {
              const b = reader.cut(table);
              if (!b) return;
              lake.push(b);
              const { commitLsn, ordinal } = parsePgPosition(b.watermark!);
              next.set(table, pgPosition(commitLsn, ordinal + 1));
            };
            let i = 0;
            let crashed = false;
            for (;;) {
              const ev = await reader.next(0);
              if (ev === undefined) break;
              if (i++ === crashAt) {
                crashed = true;
                break;
              }
              expect(ev.kind).not.toBe('gap');
              if (ev.kind === 'rows' && reader.pending(ev.table).rows >= flushRows) flush(ev.table);
              if (ev.kind === 'commit' && r() < 0.5) {
                for (const n of names) flush(n);
                position = ev.position;
                await reader.setConfirmed(position);
              }
            }
            await reader.close();
            if (!crashed) {
              for (const n of names) flush(n);
              break;
            }
          }
          const changes = batchChanges(lake);
          expect(new Set(changes.map((c) => `${c.table} ${c.pos}`)).size).toBe(changes.length);
          expect(sortChanges(changes)).toEqual(sortChanges(allChanges(script)));
          expect(reconstructLake(lake, { tables: script.tables.map((t) => t.name) })).toEqual(
            expectedLake(script),
          );
        },
      ),
      { numRuns: 40 },
    );
  });
});

describe('scripted source: driver registration and throughput', () => {
  it('scriptedDriver opens a Streamer whose readers read the script', async () => {
    const script = handScript();
    const dir = freshDir();
    const d = scriptedDriver({ script, dir });
    expect(d.kind).toBe('scripted');
    expect(d.capabilities).toMatchObject({
      modes: ['cdc'],
      stream: true,
      recoverablePosition: true,
      beforeImage: false,
    });
    expect(scriptedDriverWithoutStream({ script, dir }).capabilities).toMatchObject({
      modes: ['cdc'],
      stream: false,
      recoverablePosition: false,
    });
    await expect(d.openIncremental({})).rejects.toThrow(/only cdc/);
    const streamer = await d.openCdc();
    const tables = scriptCdcTables(script);
    const reader = (await streamer.openReader(tables, { heartbeatMs: 1000 })) as ScriptedReader;
    await reader.start({ position: await reader.initialPosition(), next: new Map() });
    const { batches } = await drain(reader, tables);
    expect(reconstructLake(batches, { tables: ['public.a', 'public.b'] })).toEqual(expectedLake(script));
  });

  it('throughput smoke: 200k changes over 10 tables', async () => {
    const t0 = performance.now();
    const script = generateScript({ seed: 1, tables: 10, changes: 200_000, rollbackFraction: 0.05 });
    const t1 = performance.now();
    const { reader, tables } = await openOn(script, freshDir(), {}, undefined, 4096);
    let rows = 0;
    let events = 0;
    let batches = 0;
    for (;;) {
      const ev = await reader.next(0);
      if (ev === undefined) break;
      events++;
      if (ev.kind === 'rows') {
        rows += ev.count;
        if (reader.pending(ev.table).rows >= 16_384 && reader.cut(ev.table)) batches++;
      }
    }
    for (const t of tables) if (reader.cut(t.ref.target)) batches++;
    const t2 = performance.now();
    expect(rows).toBe(200_000);
    console.log(
      `[scripted source] generated 200k changes in ${(t1 - t0).toFixed(0)} ms; read ${rows} rows ` +
        `(${events} events, ${batches} batches) in ${(t2 - t1).toFixed(0)} ms: ` +
        `${Math.round(rows / ((t2 - t1) / 1000)).toLocaleString('en')} rows/s`,
    );
  });
});
