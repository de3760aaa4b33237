/**
 * Iceberg commits of a CDC pipeline over days of flushes (issue 30): T tables, one flush per
 * minute, C flushes, through the sink's real commit path: `LakeSink.stage` (the manifest) and
 * `LakeSink.apply` (the catalog commit) with the `file` catalog on a local folder, in the order
 * shared/engine/durable-step.ts takes them (every table's stage in parallel, then every table's
 * apply in parallel). The clock the sink is given advances 60 s per flush, so the production
 * retention behaves as in production: tidemark's table properties (metadata files deleted after
 * commit, the metadata log capped at 10) and Iceberg's default retention (snapshots older than 5
 * days expired, on every 100th sequence number): a table holds about 7,200 snapshots before
 * expiry cuts any.
 *
 * Each table's first flush commits a real data file (LakeSink.write: a Parquet file of 10 rows of
 * a 10-column table, with its metrics); later flushes commit a copy of its `data_file` entry
 * under the name the next flush would write (shared/sink/layout.ts objectKey), not written: the
 * bench measures metadata, not data. No state commit (the cursor store is not what grows).
 *
 * Prints per plan and every report interval: the catalog commit latency (one table's `apply`
 * inside the flush, p50/p99 over the interval), the flush's apply phase (all tables in parallel),
 * `stage` p50, and the metadata: metadata.json bytes, the metadata/ folder (bytes, files),
 * manifests in the current snapshot, snapshots (the largest over the plan's tables; folder
 * bytes also summed over tables).
 *
 *   npm run bench -- iceberg-cdc [--plans 100x100,1x10000] [--quick: 20x100,1x300] [--report N]
 *                                [--retention-minutes N] [--time-limit SECONDS per plan]
 *
 * `--retention-minutes` creates the tables first (as an owner setting `history.expire.max-snapshot-
 * age-ms` would) so the steady state of expiry is reached in fewer flushes; `--time-limit` stops a
 * plan early (a 5-day retention at one flush a minute holds ~7,200 snapshots, and the commit's
 * cost grows with them: see docs/benchmarks.md, "Issue 30").
 * A plan `TxC` is T tables x C flushes; plans run one after the other, each in a fresh folder.
 * Owns its temp folder (removed at the end); starts no process.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { ObjectRef, PendingCommit, WriteTarget } from '../shared/contracts/sink.js';
import { newBatch } from '../shared/dataplane/batch.js';
import { encodeRows } from '../shared/dataplane/encoder.js';
import { Op } from '../shared/dataplane/metadata.js';
import type { Schema } from '../shared/dataplane/schema.js';
import { MAX_SNAPSHOT_AGE_PROPERTY, TIDEMARK_TABLE_PROPERTIES } from '../shared/iceberg/expire.js';
import { readManifestList } from '../shared/iceberg/manifest-list.js';
import { currentSnapshot, newTableMetadata } from '../shared/iceberg/metadata.js';
import { openLakeCatalog } from '../shared/iceberg/open-catalog.js';
import { icebergSchemaOf } from '../shared/iceberg/schema.js';
import { FileObjectStore } from '../shared/sink/file-object-store.js';
import { LakeSink } from '../shared/sink/lake-sink.js';
import { objectKey } from '../shared/sink/layout.js';
import { type DataFileRef, ParquetSink } from '../shared/sink/parquet-sink.js';
import { machineNote } from './support.js';

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    plans: { type: 'string' },
    quick: { type: 'boolean', default: false },
    report: { type: 'string' },
    'retention-minutes': { type: 'string' },
    'time-limit': { type: 'string' },
  },
  strict: true,
});
const plans = (values.plans ?? (values.quick ? '20x100,1x300' : '100x100,1x10000')).split(',').map((p) => {
  const m = /^(\d+)x(\d+)$/.exec(p.trim());
  if (!m) throw new Error(`--plans: "${p}" is not TABLESxFLUSHES, e.g. 100x200`);
  return { tables: Number(m[1]), flushes: Number(m[2]) };
});

const MINUTE = 60_000;
/** `--retention-minutes`: the tables are created with this snapshot age instead of Iceberg's 5 days. */
const retentionMinutes =
  values['retention-minutes'] === undefined ? undefined : Number(values['retention-minutes']);
/** `--time-limit`: a plan stops after this many seconds (its figures so far are printed). */
const timeLimitSeconds =
  values['time-limit'] === undefined ? Number.POSITIVE_INFINITY : Number(values['time-limit']);
const PREFIX = 'lake';
const WRITER = 'bench.src';
const TABLE: Schema = {
  columns: [
    { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
    { name: 'customer', type: { kind: 'text' }, nullable: false, sourceType: 'text' },
    {
      name: 'amount',
      type: { kind: 'decimal', precision: 12, scale: 2 },
      nullable: false,
      sourceType: 'numeric(12,2)',
    },
    { name: 'qty', type: { kind: 'int32' }, nullable: true, sourceType: 'integer' },
    { name: 'price', type: { kind: 'float64' }, nullable: false, sourceType: 'double precision' },
    { name: 'active', type: { kind: 'bool' }, nullable: false, sourceType: 'boolean' },
    { name: 'placed_at', type: { kind: 'timestamp', utc: true }, nullable: false, sourceType: 'timestamptz' },
    { name: 'note', type: { kind: 'text' }, nullable: true, sourceType: 'text' },
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

function pct(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}
const ms = (x: number) => x.toFixed(1).padStart(7);
const position = (flush: number) => `c${String(flush).padStart(12, '0')}`;

/** Ten rows of the table, as one CDC batch. */
function batch(table: string) {
  const rows = Array.from({ length: 10 }, (_, i) => ({
    id: BigInt(i + 1),
    customer: `customer-${String(i).padStart(6, '0')}`,
    amount: `${1000 + i}.25`,
    qty: i % 3 === 0 ? null : i,
    price: i * 1.5,
    active: i % 2 === 0,
    placed_at: 1_700_000_000_000_000n + BigInt(i),
    note: i % 4 === 0 ? null : `note ${i}`,
    payload: JSON.stringify({ sku: `SKU-${i}`, n: i }),
    updated_at: 1_700_000_000_000_000n + BigInt(i) * 1_000_000n,
  }));
  const record = encodeRows(TABLE, rows, {
    posPrefix: position(0),
    ordinalBase: 0,
    op: Op.create,
    phase: 'stream',
    ingestTsNanos: 1_700_000_000_000_000_000n,
    commitTsNanos: 1_700_000_000_000_000_000n,
    snapshot: false,
  });
  return newBatch({ table, record, watermark: position(0), writeMode: 'append' });
}

async function runPlan(tables: number, flushes: number): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'tidemark-iceberg-cdc-'));
  try {
    const store = new FileObjectStore(root);
    const lake = openLakeCatalog({ type: 'file' }, { store, prefix: PREFIX });
    const clock = { now: Date.now() };
    const sink = new LakeSink({
      parquet: new ParquetSink({ store, prefix: PREFIX, compression: 'zstd' }),
      catalog: lake,
      nowMs: () => clock.now,
    });
    const targets: WriteTarget[] = Array.from({ length: tables }, (_, t) => ({
      table: `bench.t${String(t).padStart(3, '0')}`,
      writer: WRITER,
      fence: 1,
      tableFormat: 'iceberg',
    }));
    // With --retention-minutes the tables are created first, as their owner would, with that age.
    if (retentionMinutes !== undefined)
      for (const target of targets) {
        const { ident, folder } = lake.table(target.table);
        const first = icebergSchemaOf(TABLE, undefined, { table: target.table });
        await lake.catalog.createTable(
          ident,
          newTableMetadata({
            location: folder.store.uri(folder.key),
            schema: first.schema,
            lastColumnId: first.lastColumnId,
            properties: {
              ...TIDEMARK_TABLE_PROPERTIES,
              [MAX_SNAPSHOT_AGE_PROPERTY]: String(retentionMinutes * MINUTE),
            },
            uuid: randomUUID(),
            nowMs: clock.now,
          }),
        );
      }
    // The first data file of each table, written for real (creates the table unless made above); its entry is the template.
    const templates: ObjectRef[] = [];
    for (const target of targets) {
      const refs = await sink.write(target, TABLE, position(0), [batch(target.table)]);
      templates.push(refs[0]!);
    }
    const refsOf = (t: number, flush: number): ObjectRef[] => {
      // The refs LakeSink's write returned: Iceberg data files.
      const template = templates[t]! as DataFileRef;
      if (flush === 1) return [template];
      const uri = store.uri(objectKey(PREFIX, targets[t]!.table, WRITER, position(flush - 1), 1).key);
      const ref: DataFileRef = {
        ...template,
        uri,
        startPosition: position(flush - 1),
        dataFile: { ...template.dataFile, file_path: uri },
      };
      return [ref];
    };
    const report = Number(values.report ?? (flushes <= 1_000 ? Math.max(1, flushes / 10) : 1_000));
    console.log(
      `\nplan: ${tables} table(s) x ${flushes} flushes, one per simulated minute (${((flushes * MINUTE) / 86_400_000).toFixed(2)} days); ` +
        `snapshot retention ${retentionMinutes === undefined ? "Iceberg's default, 5 days" : `${retentionMinutes} minutes (--retention-minutes)`}; figures every ${report} flushes; ${root}`,
    );
    console.log(
      '  flushes | commit p50 / p99 ms (one table) | flush apply p50 / p99 ms (all tables) | stage p50 ms | metadata.json B (max) | metadata/ B max / sum | files max | manifests max | snapshots max',
    );
    const all = { commit: [] as number[], flush: [] as number[], stage: [] as number[] };
    let win = { commit: [] as number[], flush: [] as number[], stage: [] as number[] };
    const started = performance.now();
    let done = 0;
    for (let flush = 1; flush <= flushes; flush++) {
      clock.now += MINUTE;
      // durable-step's order: every table's write + stage in parallel, (state commit), every apply in parallel.
      const pending: PendingCommit[] = await Promise.all(
        targets.map(async (target, t) => {
          const s = performance.now();
          const p = await sink.stage(target, refsOf(t, flush));
          win.stage.push(performance.now() - s);
          return p!;
        }),
      );
      const f = performance.now();
      await Promise.all(
        pending.map(async (p) => {
          const s = performance.now();
          await sink.apply(p);
          win.commit.push(performance.now() - s);
        }),
      );
      win.flush.push(performance.now() - f);
      done = flush;
      const overTime = (performance.now() - started) / 1000 > timeLimitSeconds;
      if (flush % report !== 0 && flush !== flushes && !overTime) continue;
      for (const k of ['commit', 'flush', 'stage'] as const) {
        all[k].push(...win[k]);
        win[k].sort((a, b) => a - b);
      }
      const fig = await figures(store, lake, targets);
      console.log(
        `  ${String(flush).padStart(7)} | ${ms(pct(win.commit, 50))} / ${ms(pct(win.commit, 99))} | ${ms(pct(win.flush, 50))} / ${ms(pct(win.flush, 99))} | ${ms(pct(win.stage, 50))} | ${String(fig.metadataJson).padStart(10)} | ${String(fig.folderMax).padStart(10)} / ${String(fig.folderSum).padStart(11)} | ${String(fig.files).padStart(5)} | ${String(fig.manifests).padStart(4)} | ${String(fig.snapshots).padStart(5)}`,
      );
      win = { commit: [], flush: [], stage: [] };
      if (overTime && flush < flushes) {
        console.log(`  stopped by --time-limit ${timeLimitSeconds} s after ${flush} of ${flushes} flushes`);
        break;
      }
    }
    const wall = (performance.now() - started) / 1000;
    for (const k of ['commit', 'flush', 'stage'] as const) all[k].sort((a, b) => a - b);
    const fig = await figures(store, lake, targets);
    console.log(
      `  total: ${tables * done} commits in ${wall.toFixed(1)} s wall; commit (one table) p50 ${pct(all.commit, 50).toFixed(1)} ms, p99 ${pct(all.commit, 99).toFixed(1)} ms, max ${all.commit.at(-1)!.toFixed(1)} ms; ` +
        `flush apply (${tables} tables) p50 ${pct(all.flush, 50).toFixed(1)} ms, p99 ${pct(all.flush, 99).toFixed(1)} ms; stage p50 ${pct(all.stage, 50).toFixed(1)} ms, p99 ${pct(all.stage, 99).toFixed(1)} ms`,
    );
    console.log(
      `  at the end (largest table): metadata.json ${fig.metadataJson} B, metadata/ ${fig.folderMax} B in ${fig.files} files, ${fig.manifests} manifests in the current snapshot, ${fig.snapshots} snapshots; all tables' metadata/ ${fig.folderSum} B`,
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** The metadata figures over the plan's tables (each the largest over tables; folder bytes also summed). */
async function figures(
  store: FileObjectStore,
  lake: ReturnType<typeof openLakeCatalog>,
  targets: readonly WriteTarget[],
) {
  const out = { metadataJson: 0, folderMax: 0, folderSum: 0, files: 0, manifests: 0, snapshots: 0 };
  for (const target of targets) {
    const { ident, folder } = lake.table(target.table);
    const loaded = (await lake.catalog.loadTable(ident))!;
    const key = (uri: string) => `${folder.key}/${uri.slice(store.uri(folder.key).length + 1)}`;
    const listed = await store.list(`${folder.key}/metadata/`);
    const bytes = listed.reduce((n, o) => n + o.size, 0);
    const list = (await store.get(key(currentSnapshot(loaded.metadata)!['manifest-list'])))!;
    out.metadataJson = Math.max(out.metadataJson, (await store.get(key(loaded.metadataLocation)))!.length);
    out.folderMax = Math.max(out.folderMax, bytes);
    out.folderSum += bytes;
    out.files = Math.max(out.files, listed.length);
    out.manifests = Math.max(out.manifests, readManifestList(list).manifests.length);
    out.snapshots = Math.max(out.snapshots, loaded.metadata.snapshots.length);
  }
  return out;
}

console.log(`iceberg-cdc: ${machineNote()}`);
for (const { tables, flushes } of plans) await runPlan(tables, flushes);
console.log(`\nmachine after: ${machineNote()}`);
