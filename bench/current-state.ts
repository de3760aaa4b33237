/**
 * Current-state commits (issue 31, decision 0026): what the key lookup costs a writer per commit,
 * against the same workload written as a change log. Per key kind (serial `bigint` keys, random
 * UUID `text` keys) two Iceberg tables on the `file` catalog in a local folder, written through
 * the sink's real path (LakeSink `write`, `stage`, `apply`, as shared/engine/durable-step.ts takes
 * them): a CURRENT-STATE table (`writeMode: upsert`) and a CHANGE-LOG table (`writeMode: append`).
 * Both are loaded with N rows (L upsert / append pages, each a commit), then take F flushes of the
 * same changes: C changes per flush (80% updates of live keys, 10% deletes, 10% inserts; inserts
 * at the top of the key range for serial keys, new random UUIDs otherwise; updates and deletes
 * uniform over the live keys, or, with `--updates recent`, over the newest 10% of the keys).
 *
 * Per flush and table: write + stage, and apply (the catalog commit; a current-state table's
 * includes the lookup and the position delete files), timed apart; the lookup's account
 * (`CurrentStateResult.lookup`: data files live / read / pruned, bytes read, delete files read) is
 * taken through LakeSink's `onApplied` observer; the apply's CPU (the process's, every thread) is
 * taken too, as a machine shared with other work slows the wall time more than the CPU. Every
 * table of every kind commits once per flush, in a rotating order (flush r starts at table r mod
 * n); ratios are paired per flush (current state / change log of the same key kind). Printed every F/10 flushes, then p50 / p99 per phase, the paired
 * ratios' median and range, and the snapshot's file counts at the end; the current-state table's
 * live rows (records - position deletes) are checked against the keys the bench holds.
 *
 *   npm run bench -- current-state [--quick] [--rows N] [--flushes F] [--keys serial|uuid|both]
 *                                  [--changes C] [--load-files L] [--updates uniform|recent]
 *                                  [--node PATH]
 *
 * Defaults: 100,000 rows in 10 load files, 200 flushes of 100 changes, both key kinds (--quick:
 * 10,000 rows, 30 flushes). `--node PATH` runs the bench again on that Node binary. Deterministic
 * keys and choices (a seeded generator). Owns its temp folder (removed at the end); starts no
 * process but itself again under `--node`.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { WriteTarget } from '../shared/contracts/sink.js';
import { type Batch, newBatch } from '../shared/dataplane/batch.js';
import { encodeRows } from '../shared/dataplane/encoder.js';
import { Op, type OpCode } from '../shared/dataplane/metadata.js';
import type { Schema } from '../shared/dataplane/schema.js';
import type { KeyLookupStats } from '../shared/iceberg/key-lookup.js';
import { currentSnapshot } from '../shared/iceberg/metadata.js';
import { openLakeCatalog } from '../shared/iceberg/open-catalog.js';
import { FileObjectStore } from '../shared/sink/file-object-store.js';
import { LakeSink } from '../shared/sink/lake-sink.js';
import { ParquetSink } from '../shared/sink/parquet-sink.js';
import { machineNote, median } from './support.js';

const argv = process.argv.slice(2);
const { values } = parseArgs({
  args: argv,
  options: {
    quick: { type: 'boolean', default: false },
    rows: { type: 'string' },
    flushes: { type: 'string' },
    keys: { type: 'string', default: 'both' },
    changes: { type: 'string', default: '100' },
    'load-files': { type: 'string', default: '10' },
    updates: { type: 'string', default: 'uniform' },
    node: { type: 'string' },
  },
  strict: true,
});

// --node: the same bench, once, on that Node (the re-run is told by the environment).
if (values.node !== undefined && process.env.TIDEMARK_BENCH_CURRENT_STATE_NODE !== values.node) {
  if (!existsSync(values.node)) throw new Error(`--node ${values.node}: no such file`);
  const script = fileURLToPath(import.meta.url);
  const run = spawnSync(values.node, ['--import', 'tsx', script, ...argv], {
    stdio: 'inherit',
    env: { ...process.env, TIDEMARK_BENCH_CURRENT_STATE_NODE: values.node },
  });
  process.exit(run.status ?? 1);
}

const rows = Number(values.rows ?? (values.quick ? 10_000 : 100_000));
const flushes = Number(values.flushes ?? (values.quick ? 30 : 200));
const changes = Number(values.changes);
const loadFiles = Number(values['load-files']);
const kinds = values.keys === 'both' ? (['serial', 'uuid'] as const) : [values.keys];
for (const k of kinds)
  if (k !== 'serial' && k !== 'uuid') throw new Error(`--keys: "${k}" is not serial, uuid or both`);
if (values.updates !== 'uniform' && values.updates !== 'recent')
  throw new Error(`--updates: "${values.updates}" is not uniform or recent`);
const recent = values.updates === 'recent';
const nUpdates = Math.round(changes * 0.8);
const nDeletes = Math.round(changes * 0.1);
const nInserts = changes - nUpdates - nDeletes;

type KeyKind = 'serial' | 'uuid';
type Key = bigint | string;

function schemaOf(kind: KeyKind): Schema {
  return {
    columns: [
      kind === 'serial'
        ? { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' }
        : { name: 'id', type: { kind: 'text' }, nullable: false, sourceType: 'uuid' },
      { name: 'customer', type: { kind: 'text' }, nullable: false, sourceType: 'text' },
      {
        name: 'amount',
        type: { kind: 'decimal', precision: 12, scale: 2 },
        nullable: false,
        sourceType: 'numeric(12,2)',
      },
      { name: 'qty', type: { kind: 'int32' }, nullable: true, sourceType: 'integer' },
      { name: 'payload', type: { kind: 'text' }, nullable: false, sourceType: 'jsonb' },
      {
        name: 'updated_at',
        type: { kind: 'timestamp', utc: true },
        nullable: false,
        sourceType: 'timestamptz',
      },
    ],
    primaryKey: ['id'],
  };
}

/** mulberry32: a small seeded generator, so every run makes the same keys and choices. */
function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The keys a kind's tables hold, in insertion order, with O(1) pick and delete. */
class Keys {
  private readonly live: Key[] = [];
  private readonly at = new Map<Key, number>();
  /** Every key ever inserted, in order (for `--updates recent`). */
  private readonly order: Key[] = [];
  private next = 1n;
  constructor(
    private readonly kind: KeyKind,
    private readonly random: () => number,
  ) {}
  get size(): number {
    return this.live.length;
  }
  fresh(): Key {
    if (this.kind === 'serial') return this.next++;
    const hex = Array.from({ length: 32 }, () => Math.floor(this.random() * 16).toString(16));
    hex[12] = '4';
    hex[16] = ((Number.parseInt(hex[16]!, 16) & 3) | 8).toString(16);
    const h = hex.join('');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }
  add(key: Key): void {
    this.at.set(key, this.live.length);
    this.live.push(key);
    this.order.push(key);
  }
  remove(key: Key): void {
    const i = this.at.get(key)!;
    const last = this.live.pop()!;
    if (last !== key) {
      this.live[i] = last;
      this.at.set(last, i);
    }
    this.at.delete(key);
  }
  /** `n` distinct live keys: uniform, or among the newest 10% of the keys ever inserted. */
  pick(n: number): Key[] {
    const out = new Set<Key>();
    const window = Math.max(n * 2, Math.floor(this.order.length / 10));
    while (out.size < n) {
      const key = recent
        ? this.order[this.order.length - 1 - Math.floor(this.random() * window)]!
        : this.live[Math.floor(this.random() * this.live.length)]!;
      if (this.at.has(key)) out.add(key);
    }
    return [...out];
  }
}

function row(key: Key, version: number, i: number): Record<string, unknown> {
  return {
    id: key,
    customer: `customer-${String(i % 100_000).padStart(6, '0')}`,
    amount: `${1000 + (i % 9000)}.${String(version % 100).padStart(2, '0')}`,
    qty: i % 10 === 0 ? null : (i + version) % 1000,
    payload: JSON.stringify({ sku: `SKU-${i % 5000}`, v: version }),
    updated_at: 1_700_000_000_000_000n + BigInt(version) * 60_000_000n + BigInt(i),
  };
}

const position = (seq: number) => `c${String(seq).padStart(12, '0')}`;

/** One write's records (one per op group, positions rising in the given order). */
function records(schema: Schema, seq: number, groups: readonly (readonly [OpCode, readonly Key[]])[]) {
  let ordinal = 0;
  const out = [];
  for (const [op, keys] of groups) {
    if (keys.length === 0) continue;
    out.push(
      encodeRows(
        schema,
        keys.map((k, i) => row(k, seq, ordinal + i)),
        {
          posPrefix: position(seq),
          ordinalBase: ordinal,
          op,
          phase: 'stream',
          ingestTsNanos: 1_700_000_000_000_000_000n + BigInt(seq),
          commitTsNanos: 1_700_000_000_000_000_000n + BigInt(seq),
          snapshot: false,
        },
      ),
    );
    ordinal += keys.length;
  }
  return out;
}

type Mode = 'upsert' | 'append';
interface Table {
  readonly kind: KeyKind;
  readonly mode: Mode;
  readonly target: WriteTarget;
  readonly schema: Schema;
  /** Per flush: write + stage ms, apply ms. */
  readonly writeStage: number[];
  readonly apply: number[];
  /** Per flush: the process's CPU ms (user + system, every thread) during the apply. */
  readonly applyCpu: number[];
  /** Per flush (current state only): the lookup's account and the rows deleted. */
  readonly lookups: (KeyLookupStats | undefined)[];
  readonly positionDeletes: number[];
  loadMs: number;
}

const root = mkdtempSync(join(tmpdir(), 'tidemark-current-state-'));
const store = new FileObjectStore(root);
const lake = openLakeCatalog({ type: 'file' }, { store, prefix: 'lake' });
const observed = new Map<string, { lookup?: KeyLookupStats; positionDeletes: number }>();
const sink = new LakeSink({
  parquet: new ParquetSink({ store, prefix: 'lake', compression: 'zstd' }),
  catalog: lake,
  onApplied: (table, result) => {
    const r = result as { lookup?: KeyLookupStats; positionDeletes?: number };
    observed.set(table, {
      ...(r.lookup ? { lookup: r.lookup } : {}),
      positionDeletes: r.positionDeletes ?? 0,
    });
  },
});

function tableOf(kind: KeyKind, mode: Mode): Table {
  return {
    kind,
    mode,
    target: {
      table: `bench.${kind}_${mode === 'upsert' ? 'current' : 'log'}`,
      writer: 'bench.src',
      fence: 1,
      tableFormat: 'iceberg',
    },
    schema: schemaOf(kind),
    writeStage: [],
    apply: [],
    applyCpu: [],
    lookups: [],
    positionDeletes: [],
    loadMs: 0,
  };
}

/** One commit of `recs` to `t`; returns [write + stage ms, apply ms, apply CPU ms]. */
async function commit(
  t: Table,
  seq: number,
  recs: ReturnType<typeof records>,
): Promise<[number, number, number]> {
  const batches: Batch[] = recs.map((record) =>
    newBatch({ table: t.target.table, record, watermark: undefined, writeMode: t.mode }),
  );
  observed.delete(t.target.table);
  const s = performance.now();
  const refs = await sink.write(t.target, t.schema, position(seq), batches);
  const pending = await sink.stage(t.target, refs);
  const m = performance.now();
  const cpu = process.cpuUsage();
  if (pending) await sink.apply(pending);
  const e = performance.now();
  const used = process.cpuUsage(cpu);
  return [m - s, e - m, (used.user + used.system) / 1000];
}

function pct(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}
const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);
const kb = (x: number) => `${(x / 1024).toFixed(0)} KiB`;
const ratios = (a: readonly number[], b: readonly number[]) => a.map((x, i) => x / b[i]!);
const rangeText = (r: readonly number[]) => `${f2(median(r))}x [${f2(Math.min(...r))}-${f2(Math.max(...r))}]`;

async function snapshotFigures(t: Table) {
  const loaded = (await lake.catalog.loadTable(lake.table(t.target.table).ident))!;
  const summary = currentSnapshot(loaded.metadata)!.summary;
  const n = (k: string) => Number(summary[k] ?? 0);
  return {
    dataFiles: n('total-data-files'),
    deleteFiles: n('total-delete-files'),
    records: n('total-records'),
    positionDeletes: n('total-position-deletes'),
    snapshots: loaded.metadata.snapshots.length,
  };
}

interface Kind {
  readonly kind: KeyKind;
  readonly keys: Keys;
  readonly cs: Table;
  readonly cl: Table;
}

/** The flushes' changes of one kind: the keys picked, removed and added (the bench's copy of the table's keys). */
function changesOf(k: Kind) {
  const picked = k.keys.pick(nUpdates + nDeletes);
  const deletes = picked.slice(nUpdates);
  const inserts = Array.from({ length: nInserts }, () => k.keys.fresh());
  for (const key of deletes) k.keys.remove(key);
  for (const key of inserts) k.keys.add(key);
  return [
    [Op.update, picked.slice(0, nUpdates)],
    [Op.delete, deletes],
    [Op.create, inserts],
  ] as const;
}

/** Every table of every kind, the first rotating with `round` (round r starts at table r mod n). */
function rotation(tables: readonly Table[], round: number): Table[] {
  const n = tables.length;
  return tables.map((_, i) => tables[(round + i) % n]!);
}

function windowLine(k: Kind, flush: number, from: number): string {
  const { cs, cl } = k;
  const win = (xs: readonly number[]) => xs.slice(from);
  const l = cs.lookups.at(-1);
  return (
    `  ${k.kind.padEnd(6)} ${String(flush).padStart(5)} | ${f1(median(win(cs.apply))).padStart(7)} / ${f1(median(win(cl.apply))).padStart(6)}, ${f2(median(ratios(win(cs.apply), win(cl.apply))))}x` +
    ` | ${f1(median(win(cs.applyCpu))).padStart(6)} / ${f1(median(win(cl.applyCpu))).padStart(5)}` +
    ` | ${f1(median(win(cs.writeStage))).padStart(6)} / ${f1(median(win(cl.writeStage))).padStart(6)}` +
    ` | ${l ? `${l.dataFiles} / ${l.dataFilesRead} / ${l.dataFilesPruned}, ${l.rowsScanned}, ${kb(l.dataBytesRead)} | ${l.deleteFiles} / ${l.deleteFilesRead}, ${kb(l.deleteBytesRead)} | ${l.manifestsRead}` : 'no lookup'}`
  );
}

async function summary(k: Kind, report: number): Promise<void> {
  const { cs, cl } = k;
  console.log(`
keys: ${k.kind}`);
  for (const t of [cs, cl]) {
    const total = t.writeStage.map((w, i) => w + t.apply[i]!);
    console.log(
      `  ${t.mode === 'upsert' ? 'current state' : 'change log   '}: load ${(t.loadMs / 1000).toFixed(1)} s; write+stage p50 ${f1(pct(t.writeStage, 50))} / p99 ${f1(pct(t.writeStage, 99))} ms; ` +
        `apply p50 ${f1(pct(t.apply, 50))} / p99 ${f1(pct(t.apply, 99))} ms (CPU p50 ${f1(pct(t.applyCpu, 50))} / p99 ${f1(pct(t.applyCpu, 99))} ms); flush total p50 ${f1(pct(total, 50))} / p99 ${f1(pct(total, 99))} ms`,
    );
  }
  const totalOf = (t: Table) => t.writeStage.map((w, i) => w + t.apply[i]!);
  console.log(
    `  paired ratios, current state / change log, median [range] over ${flushes} flushes: write+stage ${rangeText(ratios(cs.writeStage, cl.writeStage))}, ` +
      `apply ${rangeText(ratios(cs.apply, cl.apply))}, apply CPU ${rangeText(ratios(cs.applyCpu, cl.applyCpu))}, flush total ${rangeText(ratios(totalOf(cs), totalOf(cl)))}; ` +
      `first 10% of flushes: apply ${rangeText(ratios(cs.apply.slice(0, report), cl.apply.slice(0, report)))}; ` +
      `last 10%: apply ${rangeText(ratios(cs.apply.slice(-report), cl.apply.slice(-report)))}`,
  );
  const ls = cs.lookups.filter((x): x is KeyLookupStats => x !== undefined);
  const sum = (f: (s: KeyLookupStats) => number) => ls.reduce((n, s) => n + f(s), 0);
  console.log(
    `  lookups (${ls.length}): data files read ${sum((s) => s.dataFilesRead)} of ${sum((s) => s.dataFiles)} live (${f1(
      (100 * sum((s) => s.dataFilesPruned)) /
        Math.max(
          1,
          sum((s) => s.dataFiles),
        ),
    )}% pruned), ` +
      `data bytes read p50 ${kb(
        pct(
          ls.map((s) => s.dataBytesRead),
          50,
        ),
      )} / max ${kb(Math.max(...ls.map((s) => s.dataBytesRead)))}, ` +
      `key rows scanned p50 ${pct(
        ls.map((s) => s.rowsScanned),
        50,
      )}, delete files read ${sum((s) => s.deleteFilesRead)} of ${sum((s) => s.deleteFiles)} live, delete bytes read p50 ${kb(
        pct(
          ls.map((s) => s.deleteBytesRead),
          50,
        ),
      )}; ` +
      `rows deleted by position ${cs.positionDeletes.reduce((a, b) => a + b, 0)}`,
  );
  for (const t of [cs, cl]) {
    const fig = await snapshotFigures(t);
    console.log(
      `  at the end, ${t.mode === 'upsert' ? 'current state' : 'change log'}: ${fig.dataFiles} data files, ${fig.deleteFiles} delete files, ${fig.records} records, ${fig.positionDeletes} position deletes, ${fig.snapshots} snapshots`,
    );
    if (t.mode === 'upsert') {
      const live = fig.records - fig.positionDeletes;
      console.log(
        `  check: current state's live rows ${live} ${live === k.keys.size ? '=' : '!='} the ${k.keys.size} keys the bench holds`,
      );
      if (live !== k.keys.size) process.exitCode = 1;
    }
  }
}

async function run(): Promise<void> {
  const all: Kind[] = kinds.map((kind, i) => ({
    kind: kind as KeyKind,
    keys: new Keys(kind as KeyKind, generator(31 + i)),
    cs: tableOf(kind as KeyKind, 'upsert'),
    cl: tableOf(kind as KeyKind, 'append'),
  }));
  const tables = all.flatMap((k) => [k.cs, k.cl]);
  const kindOf = new Map(all.flatMap((k) => [[k.cs, k] as const, [k.cl, k] as const]));
  console.log(
    `keys: ${kinds.join(', ')}; ${rows} rows in ${loadFiles} load commits per table, then ${flushes} flushes of ${changes} changes ` +
      `(${nUpdates} updates, ${nDeletes} deletes, ${nInserts} inserts; updates/deletes ${recent ? 'among the newest 10% of keys' : 'uniform over the live keys'}); ` +
      `${tables.length} tables, the first of a round rotating`,
  );
  // The load: pages of fresh keys, the same to both tables of a kind.
  let seq = 0;
  const perPage = Math.ceil(rows / loadFiles);
  for (let page = 0; page < loadFiles; page++) {
    seq++;
    const recs = new Map<Kind, ReturnType<typeof records>>();
    for (const k of all) {
      const batch: Key[] = [];
      for (let i = 0; i < perPage && k.keys.size < rows; i++) {
        const key = k.keys.fresh();
        k.keys.add(key);
        batch.push(key);
      }
      recs.set(k, records(k.cs.schema, seq, [[Op.create, batch]]));
    }
    for (const t of rotation(tables, page)) {
      const [w, a] = await commit(t, seq, recs.get(kindOf.get(t)!)!);
      t.loadMs += w + a;
    }
  }
  const report = Math.max(1, Math.floor(flushes / 10));
  console.log(
    '  keys  flush | apply p50 ms: current / log, paired ratio | apply CPU p50 ms: current / log | write+stage p50 ms: current / log | lookup (last flush): data files live / read / pruned, key rows scanned, data bytes read | delete files live / read, bytes | manifests read',
  );
  let from = 0;
  for (let flush = 1; flush <= flushes; flush++) {
    seq++;
    const recs = new Map(all.map((k) => [k, records(k.cs.schema, seq, changesOf(k))] as const));
    for (const t of rotation(tables, flush)) {
      const [w, a, c] = await commit(t, seq, recs.get(kindOf.get(t)!)!);
      t.writeStage.push(w);
      t.apply.push(a);
      t.applyCpu.push(c);
      const seen = observed.get(t.target.table);
      t.lookups.push(seen?.lookup);
      t.positionDeletes.push(seen?.positionDeletes ?? 0);
    }
    if (flush % report !== 0 && flush !== flushes) continue;
    for (const k of all) console.log(windowLine(k, flush, from));
    from = flush;
  }
  for (const k of all) await summary(k, report);
}

try {
  console.log(`current-state: ${machineNote()}; folder ${root}`);
  await run();
  console.log(`\nmachine after: ${machineNote()}`);
} finally {
  rmSync(root, { recursive: true, force: true });
}
