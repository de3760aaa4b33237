/**
 * Iceberg metadata over many commits (issue 30 item 4): N appends of one small data file each
 * into a `file`-catalog table on a local folder, through shared/iceberg/append.ts (stage, then
 * apply), twice in the same run: with manifest merging (Iceberg's default min-count-to-merge 100)
 * and, as the baseline, with `commit.manifest-merge.enabled=false`. The two variants alternate in
 * turns of 100 commits, so both see the same machine. Both tables expire snapshots
 * (`history.expire.max-snapshot-age-ms=0`, `min-snapshots-to-keep=100`: without an age cut every
 * snapshot of the run would be younger than Iceberg's 5-day default) and delete old metadata files
 * (`write.metadata.delete-after-commit.enabled=true`, log cap 100).
 *
 * Prints every 1,000 commits per variant (every 100 with --quick): applyAppend latency p50/p99 (ms) over that chunk, the
 * current metadata.json bytes, manifest list bytes, manifests in the current snapshot, files
 * under metadata/; then totals. The data file is one tiny real Parquet file, written once; each
 * commit's entry names its own path (not rewritten: the bench measures metadata, not data).
 *
 *   npm run bench -- iceberg-commits [--commits N, default 10000] [--quick: 1000]
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeRows } from '../shared/dataplane/encoder.js';
import { toLakeRecordWithIds } from '../shared/dataplane/lake.js';
import { Op } from '../shared/dataplane/metadata.js';
import type { Schema } from '../shared/dataplane/schema.js';
import { applyAppend, stageAppend } from '../shared/iceberg/append.js';
import type { TableIdent } from '../shared/iceberg/catalog.js';
import { parquetDataFile } from '../shared/iceberg/data-file.js';
import {
  DELETE_AFTER_COMMIT_PROPERTY,
  MAX_SNAPSHOT_AGE_PROPERTY,
  MIN_SNAPSHOTS_TO_KEEP_PROPERTY,
} from '../shared/iceberg/expire.js';
import { FileCatalog } from '../shared/iceberg/file-catalog.js';
import type { IcebergDataFile } from '../shared/iceberg/manifest.js';
import { readManifestList } from '../shared/iceberg/manifest-list.js';
import { MERGE_ENABLED_PROPERTY } from '../shared/iceberg/merge.js';
import { currentSnapshot, newTableMetadata } from '../shared/iceberg/metadata.js';
import { icebergSchemaOf, lakeFieldIdsOf } from '../shared/iceberg/schema.js';
import type { IcebergSchema } from '../shared/iceberg/spec.js';
import type { TableFolder } from '../shared/iceberg/table-folder.js';
import { FileObjectStore } from '../shared/sink/file-object-store.js';
import { encodeParquet } from '../shared/sink/parquet-writer.js';

const argv = process.argv.slice(2);
const at = argv.indexOf('--commits');
const commits = argv.includes('--quick') ? 1_000 : at === -1 ? 10_000 : Number(argv[at + 1]);
if (!Number.isInteger(commits) || commits < 1) {
  console.error(`--commits needs a positive integer, got ${JSON.stringify(argv[at + 1] ?? '')}`);
  process.exit(2);
}
/** Commits per turn of a variant before the other's (both see the same machine). */
const CHUNK = 100;
/** Figures printed every this many commits of a variant (100 with --quick, to show a trend). */
const REPORT = commits <= 1_000 ? 100 : 1_000;
const IDENT: TableIdent = { namespace: 'bench', name: 'events' };
const TABLE: Schema = {
  columns: [{ name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' }],
  primaryKey: ['id'],
};

interface Variant {
  readonly name: string;
  readonly store: FileObjectStore;
  readonly catalog: FileCatalog;
  readonly folder: TableFolder;
  readonly latencies: number[];
  window: number[];
  done: number;
  location: string;
}

const root = mkdtempSync(join(tmpdir(), 'tidemark-iceberg-commits-'));
const of = icebergSchemaOf(TABLE);
const schema: IcebergSchema = of.schema;

async function variant(name: string, merge: boolean): Promise<Variant> {
  const store = new FileObjectStore(join(root, name));
  const catalog = new FileCatalog({
    store,
    tableKey: () => 'lake/bench.events',
    conditionalWrites: 'trusted',
  });
  await catalog.createTable(
    IDENT,
    newTableMetadata({
      location: catalog.location(IDENT),
      schema,
      lastColumnId: of.lastColumnId,
      properties: {
        [MERGE_ENABLED_PROPERTY]: String(merge),
        [MAX_SNAPSHOT_AGE_PROPERTY]: '0',
        [MIN_SNAPSHOTS_TO_KEEP_PROPERTY]: '100',
        [DELETE_AFTER_COMMIT_PROPERTY]: 'true',
      },
      uuid: randomUUID(),
      nowMs: Date.now(),
    }),
  );
  return {
    name,
    store,
    catalog,
    folder: { store, key: 'lake/bench.events' },
    latencies: [],
    window: [],
    done: 0,
    location: '',
  };
}

async function dataFile(v: Variant): Promise<IcebergDataFile> {
  const wire = encodeRows(TABLE, [{ id: 1n }], {
    posPrefix: 'i0000000001',
    ordinalBase: 0,
    op: Op.update,
    phase: 'incremental',
    ingestTsNanos: 1_700_000_000_000_000_000n,
    snapshot: false,
  });
  const bytes = encodeParquet([toLakeRecordWithIds(wire, lakeFieldIdsOf(schema))], { compression: 'zstd' });
  const key = `${v.folder.key}/data/one.parquet`;
  await v.store.put(key, bytes);
  return parquetDataFile(v.store.uri(key), bytes, schema);
}

function pct(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function figures(v: Variant) {
  const prefix = `${v.store.uri(v.folder.key)}/`;
  const key = (uri: string) => `${v.folder.key}/${uri.slice(prefix.length)}`;
  const loaded = (await v.catalog.loadTable(IDENT))!;
  const metadataBytes = (await v.store.get(key(loaded.metadataLocation)))!.length;
  const list = (await v.store.get(key(currentSnapshot(loaded.metadata)!['manifest-list'])))!;
  const files = (await v.store.list(`${v.folder.key}/metadata/`)).length;
  return {
    metadataBytes,
    listBytes: list.length,
    manifests: readManifestList(list).manifests.length,
    files,
    snapshots: loaded.metadata.snapshots.length,
  };
}

async function chunk(v: Variant, template: IcebergDataFile, n: number): Promise<void> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const c = v.done + i + 1;
    const commitId = `i${String(c).padStart(10, '0')}-a1`;
    const staged = await stageAppend(v.folder, {
      commit: { writerId: 'bench.app', commitId },
      schema,
      spec: { 'spec-id': 0, fields: [] },
      dataFiles: [{ ...template, file_path: v.store.uri(`${v.folder.key}/data/${commitId}.parquet`) }],
    });
    const t = process.hrtime.bigint();
    const result = await applyAppend(v.catalog, IDENT, v.folder, staged, { nowMs: Date.now });
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
    if (result.status !== 'committed' || result.cleanupError)
      throw new Error(`commit ${commitId}: ${result.status} ${String(result.cleanupError ?? '')}`);
  }
  v.done += n;
  v.latencies.push(...times);
  v.window.push(...times);
  if (v.done % REPORT !== 0 && v.done < commits) return;
  times.splice(0, times.length, ...v.window.sort((a, b) => a - b));
  v.window = [];
  const f = await figures(v);
  console.log(
    `${v.name.padEnd(9)} ${String(v.done).padStart(6)}  p50 ${pct(times, 50).toFixed(2).padStart(6)} ms  p99 ${pct(times, 99).toFixed(2).padStart(6)} ms  metadata.json ${String(f.metadataBytes).padStart(8)} B  list ${String(f.listBytes).padStart(7)} B  manifests ${String(f.manifests).padStart(5)}  snapshots ${String(f.snapshots).padStart(4)}  files in metadata/ ${String(f.files).padStart(6)}`,
  );
}

try {
  const merged = await variant('merge', true);
  const baseline = await variant('no-merge', false);
  const template = await dataFile(merged);
  await dataFile(baseline);
  console.log(
    `iceberg-commits: ${commits} commits per variant, alternating every ${CHUNK}, figures every ${REPORT} (p50/p99 over those); ${root}`,
  );
  const started = process.hrtime.bigint();
  while (merged.done < commits) {
    const n = Math.min(CHUNK, commits - merged.done);
    await chunk(merged, template, n);
    await chunk(baseline, template, n);
  }
  console.log(
    `total (${(Number(process.hrtime.bigint() - started) / 1e9).toFixed(1)} s wall, both variants):`,
  );
  for (const v of [merged, baseline]) {
    const sorted = [...v.latencies].sort((a, b) => a - b);
    const f = await figures(v);
    const sum = v.latencies.reduce((a, b) => a + b, 0);
    console.log(
      `  ${v.name.padEnd(9)} ${v.done} commits, ${(sum / 1000).toFixed(1)} s in applyAppend, p50 ${pct(sorted, 50).toFixed(2)} ms, p99 ${pct(sorted, 99).toFixed(2)} ms; at the end metadata.json ${f.metadataBytes} B, list ${f.listBytes} B, ${f.manifests} manifests, ${f.snapshots} snapshots, ${f.files} files in metadata/`,
    );
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
