/**
 * Partitioned Iceberg tables through the lake sink (shared/sink/lake-sink.ts, `partitionBy`), on a
 * file lake with the `file` catalog, read back by pyiceberg 0.12 (test/readers/partition_files.py):
 * every row there; each page one data file per partition tuple, named as the page's parts; each
 * file's partition tuple (ours, in the manifest) equal to what pyiceberg's own transforms give
 * its rows; a filter on a partition source column prunes files in pyiceberg's scan plan; recovery
 * removes every part of an uncommitted page, and a discard every committed one. Spark 3.5 +
 * Iceberg 1.12 reads the same table's rows, identity partition column included, and its `files`
 * table's partition tuples. Iceberg's own REST catalog server creates the table with the spec asked
 * for, and the table's commits carry the tuples. And the refusals: a non-key column, a time transform of a non-time
 * column, and a spec other than the existing table's (either way round).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WriteTarget } from '../../shared/contracts/sink.js';
import { newBatch } from '../../shared/dataplane/batch.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { openLakeCatalog } from '../../shared/iceberg/open-catalog.js';
import type { PartitionFieldRequest } from '../../shared/iceberg/partition.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { LakeSink } from '../../shared/sink/lake-sink.js';
import { parseObjectName } from '../../shared/sink/layout.js';
import { type DataFileRef, ParquetSink } from '../../shared/sink/parquet-sink.js';
import { wireRecord } from '../harness/lake-record.js';
import { readersMissing, runReaderScript, SparkSession, sparkMissing } from '../harness/readers.js';
import {
  type RestCatalogServer,
  restCatalogMissing,
  startRestCatalogServer,
} from '../harness/rest-catalog-server.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const SCHEMA: Schema = {
  columns: [
    { name: 'region', type: { kind: 'text' }, nullable: false, sourceType: 'text' },
    { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
    { name: 'name', type: { kind: 'text' }, nullable: true, sourceType: 'text' },
  ],
  primaryKey: ['region', 'id'],
};

const PARTITION_BY: PartitionFieldRequest[] = [
  { column: 'region', transform: 'identity' },
  { column: 'id', transform: 'bucket[4]' },
  { column: '__commit_ts', transform: 'day' },
];

const TABLE = 'public.orders';
const target: WriteTarget = { table: TABLE, writer: 'p.src', fence: 1, tableFormat: 'iceberg' };
const DAY_NS = 86_400n * 10n ** 9n;
/** 2024-05-01T12:00Z in nanoseconds. */
const T0 = 1_714_564_800n * 10n ** 9n;

/** A sink on the lake in `dir` (a new one by default); `partitionBy` null: unpartitioned. */
function lake(dir?: string, partitionBy: readonly PartitionFieldRequest[] | null = PARTITION_BY) {
  const root = dir ?? mkdtempSync(join(tmpdir(), 'tidemark-partitions-'));
  if (!dir) dirs.push(root);
  const store = new FileObjectStore(root);
  const catalog = openLakeCatalog({ type: 'file' }, { store, prefix: '' });
  const sink = new LakeSink({
    parquet: new ParquetSink({ store }),
    catalog,
    ...(partitionBy ? { partitionBy: { [TABLE]: partitionBy } } : {}),
  });
  return { dir: root, catalog, sink };
}

/** One page of `seq`: a batch per commit day, `ids` in each, regions alternating eu/us. */
function page(seq: number, days: readonly { day: number; ids: readonly number[] }[]) {
  const posPrefix = `j${String(seq).padStart(12, '0')}`;
  let ordinalBase = 0;
  const batches = days.map(({ day, ids }) => {
    const rows = ids.map((id) => ({ region: id % 2 === 0 ? 'eu' : 'us', id: BigInt(id), name: `n${id}` }));
    const record = wireRecord(SCHEMA, rows, {
      posPrefix,
      ordinalBase,
      commitTsNanos: T0 + BigInt(day) * DAY_NS,
    });
    ordinalBase += ids.length;
    return newBatch({ table: TABLE, record, watermark: undefined, writeMode: 'append' });
  });
  return { start: posPrefix, batches };
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

interface PartitionFiles {
  spec: { name: string; source: string; transform: string }[];
  files: {
    path: string;
    records: number;
    partition: Record<string, unknown>;
    rows_partitions: Record<string, unknown>[];
  }[];
  planned: number;
}

const partitionFiles = (dir: string, filter?: string) =>
  runReaderScript<PartitionFiles>('partition_files.py', [
    '--catalog',
    'static',
    '--metadata',
    `file://${join(dir, TABLE)}`,
    ...(filter ? ['--filter', filter] : []),
  ]);

describe.skipIf(readersMissing)('a partitioned Iceberg table, read by pyiceberg', () => {
  it("one data file per partition tuple, each tuple pyiceberg's transform of its rows; filters prune files", async () => {
    const { dir, sink } = lake();
    const p1 = page(1, [
      { day: 0, ids: range(1, 40) },
      { day: 1, ids: range(41, 60) },
    ]);
    const refs1 = await sink.write(target, SCHEMA, p1.start, p1.batches);
    await sink.apply((await sink.stage(target, refs1))!);
    const p2 = page(2, [{ day: 2, ids: range(61, 80) }]);
    const refs2 = await sink.write(target, SCHEMA, p2.start, p2.batches);
    await sink.apply((await sink.stage(target, refs2))!);

    // Names: the page's position and fence, a part each, numbered from 0.
    for (const [refs, start] of [
      [refs1, p1.start],
      [refs2, p2.start],
    ] as const) {
      const parsed = refs.map((r) => parseObjectName(r.uri.slice(r.uri.lastIndexOf('/') + 1)));
      expect(parsed.map((p) => (p?.kind === 'plain' ? p.position : undefined))).toEqual(
        refs.map(() => start),
      );
      expect(parsed.map((p) => p?.part)).toEqual(refs.map((_, i) => i));
    }
    // 2 regions x up to 4 buckets per day: more than one file per page.
    expect(refs1.length).toBeGreaterThan(2);

    const read = await runReaderScript<{ rows: Record<string, unknown>[] }>('read_table.py', [
      '--catalog',
      'static',
      '--metadata',
      `file://${join(dir, TABLE)}`,
      '--order-by',
      'id',
    ]);
    expect(read.rows.map((r) => r.id)).toEqual(range(1, 80));

    const all = await partitionFiles(dir);
    expect(all.spec).toEqual([
      { name: 'region', source: 'region', transform: 'identity' },
      { name: 'id_bucket', source: 'id', transform: 'bucket[4]' },
      { name: '__commit_ts_day', source: '__commit_ts', transform: 'day' },
    ]);
    expect(all.files).toHaveLength(refs1.length + refs2.length);
    expect(all.files.reduce((n, f) => n + f.records, 0)).toBe(80);
    for (const f of all.files) expect(f.rows_partitions).toEqual([f.partition]);
    // Distinct tuples across a page's files: one file per tuple.
    const tuples = all.files.map((f) => JSON.stringify(f.partition));
    expect(new Set(tuples).size).toBe(tuples.length);
    // The day of each batch: 2024-05-01 is day 19844.
    expect(new Set(all.files.map((f) => f.partition.__commit_ts_day))).toEqual(
      new Set([19844, 19845, 19846]),
    );

    // Pruning by the partition values: region (identity), id (bucket), __commit_ts (day).
    const eu = await partitionFiles(dir, "region == 'eu'");
    expect(eu.planned).toBe(all.files.filter((f) => f.partition.region === 'eu').length);
    expect(eu.planned).toBeLessThan(all.files.length);
    const one = await partitionFiles(dir, 'id == 7');
    expect(one.planned).toBeGreaterThanOrEqual(1);
    expect(one.planned).toBeLessThan(eu.planned);
    const day = await partitionFiles(dir, "__commit_ts >= '2024-05-03T00:00:00+00:00'");
    expect(day.planned).toBe(all.files.filter((f) => f.partition.__commit_ts_day === 19846).length);
  });

  it('recovery removes every part of a page at or past the committed position, and its staged manifest; discard every committed part', async () => {
    const { dir, sink } = lake();
    const p1 = page(1, [{ day: 0, ids: range(1, 10) }]);
    await sink.apply((await sink.stage(target, await sink.write(target, SCHEMA, p1.start, p1.batches)))!);
    const p2 = page(2, [{ day: 0, ids: range(11, 30) }]);
    const orphanRefs = await sink.write(target, SCHEMA, p2.start, p2.batches);
    expect(orphanRefs.length).toBeGreaterThan(1);
    const orphan = await sink.stage(target, orphanRefs);
    const removed = await sink.recover(target, p2.start);
    expect(removed.map((r) => r.uri).sort()).toEqual(
      [...orphanRefs.map((r) => r.uri), orphan!.manifest].sort(),
    );
    expect((await partitionFiles(dir)).files.reduce((n, f) => n + f.records, 0)).toBe(10);

    // A writer's discard (tidemark reset --delete-objects) takes every part out of the snapshot.
    const committedParts = (await partitionFiles(dir)).files.length;
    expect(committedParts).toBeGreaterThan(1);
    expect((await sink.discard(target)).length).toBe(committedParts);
    expect((await partitionFiles(dir)).files).toEqual([]);
  });
});

describe('partitionBy refusals', () => {
  const write = (sink: LakeSink, seq = 1) => {
    const p = page(seq, [{ day: 0, ids: [1, 2] }]);
    return sink.write(target, SCHEMA, p.start, p.batches);
  };

  it('refuses a column outside the key, and a time transform of a column that is no time', async () => {
    await expect(
      write(lake(undefined, [{ column: 'name', transform: 'identity' }]).sink),
    ).rejects.toMatchObject({
      code: 'ICEBERG_PARTITION_INVALID',
      message: expect.stringContaining('only the primary key'),
    });
    await expect(write(lake(undefined, [{ column: 'region', transform: 'day' }]).sink)).rejects.toMatchObject(
      {
        code: 'ICEBERG_PARTITION_INVALID',
        message: expect.stringContaining('day does not apply to a string column'),
      },
    );
  });

  it("refuses a spec other than the existing table's, either way round, and writes nothing", async () => {
    const { dir, sink } = lake();
    const p = page(1, [{ day: 0, ids: [1, 2] }]);
    await sink.apply((await sink.stage(target, await sink.write(target, SCHEMA, p.start, p.batches)))!);
    for (const other of [null, [{ column: 'id', transform: 'bucket[8]' }], PARTITION_BY.slice(0, 2)]) {
      await expect(write(lake(dir, other).sink)).rejects.toMatchObject({
        code: 'ICEBERG_PARTITION_MISMATCH',
        message: expect.stringContaining('tidemark reset --table public.orders --delete-objects'),
      });
    }
    // The same spec again is taken.
    expect((await write(lake(dir).sink, 2)).length).toBeGreaterThan(0);

    const plain = lake(undefined, null);
    await write(plain.sink);
    await expect(write(lake(plain.dir).sink)).rejects.toMatchObject({
      code: 'ICEBERG_PARTITION_MISMATCH',
      message: expect.stringContaining('is partitioned by nothing (unpartitioned)'),
    });
  });
});

describe.skipIf(sparkMissing !== undefined)('a partitioned Iceberg table, read by Spark', () => {
  let spark: SparkSession | undefined;
  beforeAll(async () => {
    spark = await SparkSession.start();
  }, 180_000);
  afterAll(async () => {
    await spark?.quit();
  }, 60_000);

  it("reads every row, and the files table's partition tuples are ours", async () => {
    const { dir, sink } = lake();
    const p1 = page(1, [
      { day: 0, ids: range(1, 30) },
      { day: 1, ids: range(31, 40) },
    ]);
    const refs = await sink.write(target, SCHEMA, p1.start, p1.batches);
    await sink.apply((await sink.stage(target, refs))!);
    const folder = `file://${join(dir, TABLE)}`;
    const rows = await spark!.ask({ load: folder, order_by: 'id' });
    expect(rows.rows.map((r) => [r.region, Number(r.id), r.name])).toEqual(
      range(1, 40).map((id) => [id % 2 === 0 ? 'eu' : 'us', id, `n${id}`]),
    );
    const files = await spark!.ask({ load: `${folder}#files` });
    const ours = (refs as DataFileRef[]).map((r) => r.dataFile);
    expect(files.rows).toHaveLength(ours.length);
    for (const f of files.rows) {
      const mine = ours.find((d) => d.file_path === f.file_path)!;
      const partition = f.partition as Record<string, unknown>;
      expect([partition.region, partition.id_bucket]).toEqual([
        mine.partition.region,
        mine.partition.id_bucket,
      ]);
    }
  }, 300_000);
});

describe.skipIf(restCatalogMissing !== undefined || readersMissing !== undefined)(
  "a partitioned table in Iceberg's REST catalog server",
  () => {
    let server: RestCatalogServer | undefined;
    let root = '';
    beforeAll(async () => {
      root = mkdtempSync(join(tmpdir(), 'tidemark-partitions-rest-'));
      dirs.push(root);
      server = await startRestCatalogServer({ warehouse: join(root, 'warehouse'), token: 'tok-partitions' });
    }, 120_000);
    afterAll(async () => {
      await server?.stop();
    });

    it('is created with the spec asked for, and pyiceberg reads each file with its tuple', async () => {
      const store = new FileObjectStore(join(root, 'lake'));
      const catalog = openLakeCatalog(
        { type: 'rest', uri: server!.uri, namespace: 'tidemark_public', token: 'tok-partitions' },
        { store, prefix: '' },
      );
      const sink = new LakeSink({
        parquet: new ParquetSink({ store }),
        catalog,
        partitionBy: { [TABLE]: PARTITION_BY },
      });
      const p1 = page(1, [
        { day: 0, ids: range(1, 20) },
        { day: 3, ids: range(21, 30) },
      ]);
      const refs = await sink.write(target, SCHEMA, p1.start, p1.batches);
      await sink.apply((await sink.stage(target, refs))!);
      const loaded = (await catalog.catalog.loadTable(catalog.table(TABLE).ident))!;
      const spec = loaded.metadata['partition-specs'].find(
        (s) => s['spec-id'] === loaded.metadata['default-spec-id'],
      )!;
      expect(spec.fields.map((f) => [f.name, f.transform, f['field-id']])).toEqual([
        ['region', 'identity', 1000],
        ['id_bucket', 'bucket[4]', 1001],
        ['__commit_ts_day', 'day', 1002],
      ]);
      const read = await runReaderScript<PartitionFiles>('partition_files.py', [
        '--catalog',
        'static',
        '--metadata',
        loaded.metadataLocation,
      ]);
      expect(read.files).toHaveLength(refs.length);
      expect(read.files.reduce((n, f) => n + f.records, 0)).toBe(30);
      for (const f of read.files) expect(f.rows_partitions).toEqual([f.partition]);
      // A second sink asking for another spec is refused by the table the server holds.
      const other = new LakeSink({
        parquet: new ParquetSink({ store }),
        catalog,
        partitionBy: { [TABLE]: [{ column: 'id', transform: 'bucket[4]' }] },
      });
      const p2 = page(2, [{ day: 0, ids: [31] }]);
      await expect(other.write(target, SCHEMA, p2.start, p2.batches)).rejects.toMatchObject({
        code: 'ICEBERG_PARTITION_MISMATCH',
      });
    });
  },
);
