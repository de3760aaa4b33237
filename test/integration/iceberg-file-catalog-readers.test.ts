/**
 * Readers tidemark did not write accept the `file` catalog's tables (docs/test-readers.md):
 * - pyiceberg's StaticTable loads a new, empty table from its `v1.metadata.json` and from the
 *   table folder (through `version-hint.text`), with the schema's ids, types and identifier
 *   fields and the properties, and scans it empty; after two appends it loads the snapshots with
 *   their 63-bit ids exact, parents, sequence numbers, summaries, refs and both logs;
 * - Spark 3.5 with Iceberg 1.12's Hadoop catalog reads the same folders as tables, lists the
 *   snapshots and metadata log through its metadata tables, and commits to one itself
 *   (`ALTER TABLE ... SET TBLPROPERTIES`), after which tidemark's catalog loads Spark's version
 *   and commits on top of it, keeping what Spark wrote.
 * Tables with data need the manifests (./manifest.ts): not here. Each reader is skipped, saying
 * what to install, when its venv or jars are missing.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commitWithRetry, type TableIdent } from '../../shared/iceberg/catalog.js';
import { FileCatalog, VERSION_HINT_FILE } from '../../shared/iceberg/file-catalog.js';
import { appendSnapshot, COMMIT_ID_SUMMARY_KEY, newTableMetadata } from '../../shared/iceberg/metadata.js';
import type { IcebergSchema } from '../../shared/iceberg/spec.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { readersMissing, runReaderScript, SparkSession, sparkMissing } from '../harness/readers.js';

const noPython = readersMissing === undefined ? undefined : `(skipped: ${readersMissing})`;
const noSpark = sparkMissing === undefined ? undefined : `(skipped: ${sparkMissing})`;

const SCHEMA: Omit<IcebergSchema, 'schema-id'> = {
  type: 'struct',
  'identifier-field-ids': [1],
  fields: [
    { id: 1, name: 'id', required: true, type: 'long' },
    { id: 2, name: 'amount', required: false, type: 'decimal(38, 9)' },
    { id: 3, name: 'at', required: false, type: 'timestamptz' },
    {
      id: 4,
      name: 'tags',
      required: false,
      type: { type: 'list', 'element-id': 5, element: 'string', 'element-required': false },
    },
    { id: 6, name: '__pos', required: true, type: 'string' },
  ],
};
/** Beyond 2^53, so an id that passed through a double would come back changed. */
const BIG_IDS = [(1n << 62n) + 12_345n, (1n << 63n) - 3n];
const tableKey = (t: TableIdent) => `wh/${t.namespace}/${t.name}`;

interface Inspected {
  metadata_location: string;
  format_version: number;
  table_uuid: string;
  location: string;
  last_column_id: number;
  last_sequence_number: number;
  schema_id: number;
  schema: { id: number; name: string; type: string; required: boolean }[];
  identifier_field_ids: number[];
  spec_fields: number;
  sort_order_fields: number;
  properties: Record<string, string>;
  current_snapshot_id: string | null;
  snapshots: {
    id: string;
    parent: string | null;
    sequence_number: number;
    manifest_list: string;
    summary: Record<string, string>;
  }[];
  refs: Record<string, string>;
  snapshot_log: string[];
  metadata_log: string[];
  rows?: number;
}

function inspect(target: string, scan = false): Promise<Inspected> {
  return runReaderScript<Inspected>('inspect_metadata.py', [target, ...(scan ? ['--scan'] : [])]);
}

/** Lake folder with two tables: `shop.empty` (no snapshot) and `shop.snaps` (two appends). */
async function makeTables(dir: string) {
  const catalog = new FileCatalog({ store: new FileObjectStore(dir), tableKey });
  const empty = { namespace: 'shop', name: 'empty' };
  const snaps = { namespace: 'shop', name: 'snaps' };
  for (const ident of [empty, snaps]) {
    await catalog.createTable(
      ident,
      newTableMetadata({
        location: catalog.location(ident),
        schema: SCHEMA,
        lastColumnId: 6,
        properties: { 'write.format.default': 'parquet', 'tidemark.table': `public.${ident.name}` },
        uuid: randomUUID(),
        nowMs: Date.now(),
      }),
    );
  }
  for (const [i, snapshotId] of BIG_IDS.entries()) {
    const commit = { writerId: 'shop.app', commitId: `c${i + 1}` };
    await commitWithRetry(catalog, snaps, commit, (current) =>
      appendSnapshot(current.metadata, {
        snapshotId,
        manifestListPath: `${current.metadata.location}/metadata/snap-${snapshotId}-1-${randomUUID()}.avro`,
        added: { dataFiles: 2, records: 10 * (i + 1), filesSize: 4096 },
        commit,
        summary: { 'tidemark.position': `j${i}` },
        nowMs: Date.now(),
      }),
    );
  }
  return { catalog, empty, snaps };
}

describe.skipIf(noPython !== undefined)(`pyiceberg reads the file catalog's tables ${noPython ?? ''}`, () => {
  let dir = '';
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tidemark-iceberg-py-'));
    await makeTables(dir);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('loads an empty table from v1.metadata.json and from its folder, schema and properties as written', async () => {
    const folder = join(dir, 'wh', 'shop', 'empty');
    const byFile = await inspect(join(folder, 'metadata', 'v1.metadata.json'), true);
    const byFolder = await inspect(folder, true);
    expect(byFolder.metadata_location).toBe(join(folder, 'metadata', 'v1.metadata.json'));
    for (const t of [byFile, byFolder]) {
      expect(t).toMatchObject({
        format_version: 2,
        location: `file://${folder}`,
        last_column_id: 6,
        last_sequence_number: 0,
        schema_id: 0,
        identifier_field_ids: [1],
        spec_fields: 0,
        sort_order_fields: 0,
        properties: { 'write.format.default': 'parquet', 'tidemark.table': 'public.empty' },
        current_snapshot_id: null,
        snapshots: [],
        refs: {},
        rows: 0,
      });
      expect(t.schema).toEqual([
        { id: 1, name: 'id', type: 'long', required: true },
        { id: 2, name: 'amount', type: 'decimal(38, 9)', required: false },
        { id: 3, name: 'at', type: 'timestamptz', required: false },
        { id: 4, name: 'tags', type: 'list<string>', required: false },
        { id: 6, name: '__pos', type: 'string', required: true },
      ]);
    }
  });

  it('loads the snapshots of a table with appends: 63-bit ids exact, chain, summaries, refs, logs', async () => {
    const folder = join(dir, 'wh', 'shop', 'snaps');
    const t = await inspect(folder);
    const [a, b] = BIG_IDS.map(String);
    expect(t.metadata_location).toBe(join(folder, 'metadata', 'v3.metadata.json'));
    expect(t.current_snapshot_id).toBe(b);
    expect(t.snapshots.map((s) => [s.id, s.parent, s.sequence_number])).toEqual([
      [a, null, 1],
      [b, a, 2],
    ]);
    expect(t.snapshots[1]!.summary).toMatchObject({
      operation: 'append',
      'added-data-files': '2',
      'added-records': '20',
      'total-data-files': '4',
      'total-records': '30',
      [COMMIT_ID_SUMMARY_KEY]: 'c2',
      'tidemark.position': 'j1',
    });
    expect(t.refs).toEqual({ main: b });
    expect(t.snapshot_log).toEqual([a, b]);
    expect(t.metadata_log).toEqual([1, 2].map((v) => `file://${folder}/metadata/v${v}.metadata.json`));
    expect(t.last_sequence_number).toBe(2);
    expect(t.properties['tidemark.writer.shop.app.commit']).toBe('c2');
  });
});

describe.skipIf(noSpark !== undefined)(
  `Spark's Hadoop catalog reads and writes the file catalog's tables ${noSpark ?? ''}`,
  () => {
    let dir = '';
    let tables: Awaited<ReturnType<typeof makeTables>>;
    let spark: SparkSession | undefined;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'tidemark-iceberg-spark-'));
      tables = await makeTables(dir);
      spark = await SparkSession.start([
        '--hadoop',
        `h=file://${join(dir, 'wh')}`,
        '--conf',
        'spark.sql.catalog.h.cache-enabled=false',
      ]);
    }, 120_000);
    afterAll(async () => {
      await spark?.quit();
      await rm(dir, { recursive: true, force: true });
    }, 60_000);

    it('reads the empty table, the snapshots and the metadata log', async () => {
      const empty = await spark!.ask({ table: 'h.shop.empty' });
      expect(empty.columns).toEqual(['id', 'amount', 'at', 'tags', '__pos']);
      expect(empty.rows).toEqual([]);
      const snapshots = await spark!.ask({
        sql: 'SELECT snapshot_id, parent_id, operation, summary FROM h.shop.snaps.snapshots ORDER BY committed_at, snapshot_id',
      });
      expect(
        snapshots.rows.map((r) => [
          String(r.snapshot_id),
          r.parent_id === null ? null : String(r.parent_id),
          r.operation,
        ]),
      ).toEqual([
        [String(BIG_IDS[0]), null, 'append'],
        [String(BIG_IDS[1]), String(BIG_IDS[0]), 'append'],
      ]);
      expect((snapshots.rows[1]!.summary as Record<string, string>)[COMMIT_ID_SUMMARY_KEY]).toBe('c2');
      const log = await spark!.ask({
        sql: 'SELECT file, latest_snapshot_id FROM h.shop.snaps.metadata_log_entries ORDER BY timestamp, file',
      });
      expect(log.rows.map((r) => String(r.file).replace(/^file:(\/\/)?/, ''))).toEqual(
        [1, 2, 3].map((v) => join(dir, 'wh', 'shop', 'snaps', 'metadata', `v${v}.metadata.json`)),
      );
    });

    it("commits on top of Spark's own commit, keeping what Spark wrote", async () => {
      const { catalog, empty } = tables;
      await spark!.ask({ sql: "ALTER TABLE h.shop.empty SET TBLPROPERTIES ('maintained.by' = 'spark')" });
      const metaDir = join(dir, 'wh', 'shop', 'empty', 'metadata');
      // Iceberg Java writes the hint as tidemark does: the bare number.
      expect(await readFile(join(metaDir, VERSION_HINT_FILE), 'utf8')).toBe('2');
      const afterSpark = (await catalog.loadTable(empty))!;
      expect(afterSpark.version).toBe('2');
      expect(afterSpark.metadata.properties['maintained.by']).toBe('spark');
      const commit = { writerId: 'shop.app', commitId: 'after-spark' };
      const r = await commitWithRetry(catalog, empty, commit, (current) =>
        appendSnapshot(current.metadata, {
          snapshotId: BIG_IDS[1]!,
          manifestListPath: `${current.metadata.location}/metadata/snap-x.avro`,
          added: { dataFiles: 0, records: 0, filesSize: 0 },
          commit,
          nowMs: Date.now(),
        }),
      );
      expect(r.table.version).toBe('3');
      // Fields Iceberg Java writes that tidemark's types do not name survive tidemark's commit.
      const javaKeys = Object.keys(afterSpark.metadata);
      expect(Object.keys(r.table.metadata)).toEqual(expect.arrayContaining(javaKeys));
      const props = await spark!.ask({ sql: 'SHOW TBLPROPERTIES h.shop.empty' });
      const asMap = Object.fromEntries(props.rows.map((row) => [row.key, row.value]));
      expect(asMap).toMatchObject({
        'maintained.by': 'spark',
        'tidemark.writer.shop.app.commit': 'after-spark',
      });
      const snaps = await spark!.ask({ sql: 'SELECT snapshot_id FROM h.shop.empty.snapshots' });
      expect(snaps.rows.map((row) => String(row.snapshot_id))).toEqual([String(BIG_IDS[1])]);
    });
  },
);
