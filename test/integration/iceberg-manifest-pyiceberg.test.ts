/**
 * The decisive check of tidemark's Iceberg manifests (shared/iceberg/manifest.ts, avro.ts,
 * data-file.ts): a reader we did not write, pyiceberg 0.12 (.venv-readers, docs/test-readers.md),
 * reads a v2 table built by hand in a temp dir from tidemark's own pieces (./iceberg-table-fixture.ts:
 * Parquet from tidemark's encoders, manifests and manifest lists from our modules, snapshot ids
 * past 2^53; two appends whose entries inherit, then a rewrite of both manifests into one of
 * EXISTING entries). pyiceberg must read the rows at each snapshot, the record counts, the
 * inherited sequence numbers and the metrics (value, null counts, bounds decoded into int, long,
 * string, decimal, timestamp values), and nothing for a list column but its sizes. And the other
 * way round: our reader reads the manifest lists and manifests pyiceberg writes as pyiceberg does.
 *
 * Skips, saying so, where .venv-readers is not installed (scripts/install-test-readers.sh).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Schema } from '../../shared/dataplane/schema.js';
import { parquetDataFile } from '../../shared/iceberg/data-file.js';
import {
  EntryStatus,
  inheritFromManifest,
  readManifest,
  writeManifest,
} from '../../shared/iceberg/manifest.js';
import {
  type IcebergManifestFile,
  manifestFileOf,
  readManifestList,
  writeManifestList,
} from '../../shared/iceberg/manifest-list.js';
import type { IcebergField, IcebergSchema } from '../../shared/iceberg/spec.js';
import { encodeParquet } from '../../shared/sink/parquet-writer.js';
import { READERS_PYTHON, REPO_ROOT, readersMissing, runReaderScript } from '../harness/readers.js';
import {
  buildTable,
  expectReadableMetrics,
  FIELDS,
  fixtureRecord,
  metadataJson,
  SNAP_1,
  SNAP_2,
  SNAP_3,
  SPEC,
  withFieldIds,
} from './iceberg-table-fixture.js';

const execFileP = promisify(execFile);

/** A pyiceberg reader script's JSON for the table of the metadata file at `metadataPath`. */
const py = (script: string, metadataPath: string) =>
  runReaderScript<Record<string, unknown>>(script, [
    '--catalog',
    'static',
    '--metadata',
    `file://${metadataPath}`,
  ]);

type Row = Record<string, unknown>;
/** A map column of inspect.* as an object by field id. */
const byId = (pairs: unknown): Record<number, unknown> =>
  Object.fromEntries((pairs as [number, unknown][]).map(([k, v]) => [k, v]));

if (readersMissing) console.warn(`pyiceberg tests skipped: ${readersMissing}`);

describe.skipIf(readersMissing !== undefined)(
  `pyiceberg reads tidemark's manifests${readersMissing ? ` (SKIPPED: ${readersMissing})` : ''}`,
  () => {
    let dir: string;
    const meta = (name: string) => join(dir, 't', 'metadata', name);
    const uri = (path: string) => `file://${path}`;

    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'tidemark-iceberg-'));
    });
    afterAll(() => {
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('reads two appends and a manifest rewrite: rows, counts, inherited sequence numbers, metrics', async () => {
      const built = buildTable(dir);
      const { pathA, pathB, fileA, fileB, m3, mf3 } = built;
      expect(built.previous).toEqual([built.mf1]);
      expect(mf3).toMatchObject({ existing_files_count: 2, existing_rows_count: 5, min_sequence_number: 1 });

      // The rows, at each snapshot.
      for (const [n, ids] of [
        [1, [1, 2, 3]],
        [2, [1, 2, 3, 4, 5]],
        [3, [1, 2, 3, 4, 5]],
      ] as const) {
        const read = await py('read_table.py', meta(`v${n}.metadata.json`));
        expect((read.rows as Row[]).map((r) => r.id).sort()).toEqual(ids);
      }
      const table = await py('read_table.py', meta('v3.metadata.json'));
      const rows = new Map((table.rows as Row[]).map((r) => [r.id, r]));
      expect(rows.get(1)).toMatchObject({
        qty: 7,
        name: 'apple',
        price: '12.50',
        big: '-99999999999999999999999999999.000000001',
        at: '2023-11-14T22:13:20.000001+00:00',
        day: '2022-01-08',
        ratio: 0.5,
        ok: true,
        blob: '0102',
        __op: 'u',
      });
      expect(rows.get(3)).toMatchObject({ qty: -2_147_483_648, name: null, price: null, at: null, blob: '' });
      expect(rows.get(4)).toMatchObject({ price: '99999999.99', at: '9999-12-31T23:59:59.999999+00:00' });

      // The metadata tree as pyiceberg reads it.
      const tree = await py('iceberg_metadata.py', meta('v3.metadata.json'));
      expect(tree.snapshot_id).toBe(String(SNAP_3));
      expect(tree.manifests).toEqual([
        expect.objectContaining({
          manifest_path: uri(meta('m3.avro')),
          manifest_length: m3.bytes.length,
          content: 0,
          sequence_number: 3,
          min_sequence_number: 1,
          added_snapshot_id: String(SNAP_3),
          added_files_count: 0,
          existing_files_count: 2,
          deleted_files_count: 0,
          existing_rows_count: 5,
          partitions: [],
        }),
      ]);
      const entries = tree.entries as Row[];
      expect(
        entries.map((e) => [
          e.status,
          e.snapshot_id,
          e.sequence_number,
          e.file_sequence_number,
          (e.data_file as Row).file_path,
        ]),
      ).toEqual(
        expect.arrayContaining([
          [0, String(SNAP_1), 1, 1, uri(pathA)],
          [0, String(SNAP_2), 2, 2, uri(pathB)],
        ]),
      );
      expect(entries).toHaveLength(2);

      const files = new Map((tree.files as Row[]).map((f) => [f.file_path, f]));
      const a = files.get(uri(pathA))!;
      const b = files.get(uri(pathB))!;
      expect(a).toMatchObject({
        content: 0,
        file_format: 'PARQUET',
        record_count: 3,
        file_size_in_bytes: fileA.length,
      });
      expect(b).toMatchObject({ record_count: 2, file_size_in_bytes: fileB.length });
      for (const f of [a, b]) {
        expect(
          Object.keys(byId(f.column_sizes))
            .map(Number)
            .sort((x, y) => x - y),
        ).toEqual(FIELDS.map((x) => x.id));
        expect((f.split_offsets as number[]).length).toBeGreaterThan(0);
      }
      expect(byId(a.value_counts)).toMatchObject({ 1: 3, 2: 3, 3: 3, 6: 3, 12: 3 });
      expect(byId(a.null_value_counts)).toMatchObject({ 1: 0, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 10: 1, 12: 0 });
      expect(byId(b.null_value_counts)).toMatchObject({ 2: 0, 3: 0, 9: 1, 10: 0 });

      // Bounds, decoded by pyiceberg into the columns' types.
      expectReadableMetrics({ a, b });
      const metrics = (f: Row, column: string) => (f.readable_metrics as Record<string, Row>)[column]!;
      expect(metrics(a, 'at')).toMatchObject({
        lower_bound: '1969-12-31T23:59:59.999999+00:00',
        upper_bound: '2023-11-14T22:13:20.000001+00:00',
      });
      expect(metrics(b, 'at')).toMatchObject({
        lower_bound: '1970-01-01T00:00:00.000000+00:00',
        upper_bound: '9999-12-31T23:59:59.999999+00:00',
      });
      expect(metrics(a, '__pos').lower_bound).toMatch(/^i000000000001/);

      // What we read back of our own manifest equals what pyiceberg read.
      const ours = readManifest(m3.bytes).entries.map((e) => inheritFromManifest(e, mf3));
      expect(ours.map((e) => [e.snapshot_id, e.sequence_number])).toEqual([
        [SNAP_2, 2],
        [SNAP_1, 1],
      ]);
    });

    it('reads a table with a list column: rows, and no bounds or counts for its element', async () => {
      const schema: Schema = {
        columns: [
          { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
          {
            name: 'tags',
            type: { kind: 'list', element: { kind: 'text' } },
            nullable: true,
            sourceType: 'text[]',
          },
        ],
        primaryKey: ['id'],
      };
      const fields: IcebergField[] = [
        { id: 1, name: 'id', required: true, type: 'long' },
        {
          id: 2,
          name: 'tags',
          required: false,
          type: { type: 'list', 'element-id': 17, element: 'string', 'element-required': false },
        },
        ...FIELDS.slice(10).map((f, i) => ({ ...f, id: 3 + i })),
      ];
      const iceberg: IcebergSchema = { type: 'struct', 'schema-id': 0, fields };
      const rows = [
        [1, ['b', null, 'a']],
        [2, null],
        [3, []],
      ];
      const file = encodeParquet(
        [withFieldIds(fixtureRecord(schema, rows, 'i000000000003'), new Map([['tags', 17]]))],
        {
          compression: 'snappy',
        },
      );
      const base = join(dir, 'lists');
      mkdirSync(join(base, 'metadata'), { recursive: true });
      const path = join(base, 'data.parquet');
      writeFileSync(path, file);
      const dataFile = parquetDataFile(uri(path), file, iceberg);
      expect(dataFile.column_sizes?.has(17)).toBe(true);
      expect(dataFile.value_counts?.has(17)).toBe(false);
      expect(dataFile.lower_bounds?.has(17)).toBe(false);
      const m = writeManifest({
        schema: iceberg,
        spec: SPEC,
        entries: [{ status: EntryStatus.ADDED, data_file: dataFile }],
      });
      writeFileSync(join(base, 'metadata', 'm.avro'), m.bytes);
      const snapshot = 2n ** 60n + 5n;
      const mf: IcebergManifestFile = manifestFileOf(
        uri(join(base, 'metadata', 'm.avro')),
        m.bytes.length,
        m.summary,
        {
          snapshotId: snapshot,
          sequenceNumber: 1,
        },
      );
      writeFileSync(
        join(base, 'metadata', 'list.avro'),
        writeManifestList({
          snapshotId: snapshot,
          parentSnapshotId: undefined,
          sequenceNumber: 1,
          manifests: [mf],
        }),
      );
      const metaPath = join(base, 'metadata', 'v1.metadata.json');
      writeFileSync(
        metaPath,
        metadataJson(uri(base), iceberg, 17, [
          {
            id: snapshot,
            parent: undefined,
            seq: 1,
            list: uri(join(base, 'metadata', 'list.avro')),
            operation: 'append',
          },
        ]),
      );
      const read = await py('read_table.py', metaPath);
      const byRow = new Map((read.rows as Row[]).map((r) => [r.id, r.tags]));
      expect(byRow).toEqual(
        new Map<unknown, unknown>([
          [1, ['b', null, 'a']],
          [2, null],
          [3, []],
        ]),
      );
      const tree = await py('iceberg_metadata.py', metaPath);
      const f = (tree.files as Row[])[0]!;
      expect(f.record_count).toBe(3);
      expect(byId(f.lower_bounds)[1]).toBe('0100000000000000');
      expect(byId(f.lower_bounds)[17]).toBeUndefined();
      expect(byId(f.value_counts)[17]).toBeUndefined();
    });

    it("reads pyiceberg's own manifest lists and manifests as pyiceberg does", async () => {
      // pyiceberg writes a table (two appends) in its SQL catalog; our reader must see its tree.
      const base = join(dir, 'foreign');
      mkdirSync(base, { recursive: true });
      const { stdout } = await execFileP(READERS_PYTHON, ['-c', WRITE_WITH_PYICEBERG, base], {
        cwd: REPO_ROOT,
      });
      const metadataPath = (JSON.parse(stdout) as { metadata: string }).metadata.replace(/^file:\/\//, '');
      const tree = await py('iceberg_metadata.py', metadataPath);
      // The current snapshot's manifest list, found without parsing its 63-bit id into a double.
      const metadataText = readFileSync(metadataPath, 'utf8');
      const listOf = new RegExp(
        `"snapshot-id"\\s*:\\s*${tree.snapshot_id}\\s*,[^}]*?"manifest-list"\\s*:\\s*"([^"]+)"`,
      );
      const listPath = listOf.exec(metadataText)?.[1];
      expect(listPath, 'the current snapshot and its manifest list in the metadata file').toBeDefined();
      const list = readManifestList(readFileSync(listPath!.replace(/^file:\/\//, '')));
      expect(String(list.snapshotId)).toBe(tree.snapshot_id);
      const asPyiceberg = (m: IcebergManifestFile) => ({
        manifest_path: m.manifest_path,
        manifest_length: m.manifest_length,
        content: m.content,
        sequence_number: m.sequence_number,
        min_sequence_number: m.min_sequence_number,
        added_snapshot_id: String(m.added_snapshot_id),
        added_files_count: m.added_files_count,
        existing_files_count: m.existing_files_count,
        deleted_files_count: m.deleted_files_count,
        added_rows_count: m.added_rows_count,
        existing_rows_count: m.existing_rows_count,
        deleted_rows_count: m.deleted_rows_count,
      });
      expect(list.manifests.map(asPyiceberg)).toEqual(
        (tree.manifests as Row[]).map((m) => {
          const { partitions: _p, partition_spec_id: _s, ...rest } = m;
          return rest;
        }),
      );
      expect(list.manifests).toHaveLength(2);

      const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
      const sortedPairs = (
        m: ReadonlyMap<number, unknown> | undefined,
        f: (v: never) => unknown = (v) => v,
      ) =>
        [...(m ?? new Map())].map(([k, v]) => [k, f(v as never)]).sort((x, y) => Number(x[0]) - Number(y[0]));
      const ours = list.manifests.flatMap((m) =>
        readManifest(readFileSync(m.manifest_path.replace(/^file:\/\//, ''))).entries.map((e) => {
          const x = inheritFromManifest(e, m);
          const f = x.data_file;
          return {
            status: x.status,
            snapshot_id: String(x.snapshot_id),
            sequence_number: x.sequence_number,
            file_sequence_number: x.file_sequence_number,
            file_path: f.file_path,
            file_format: f.file_format,
            record_count: f.record_count,
            file_size_in_bytes: f.file_size_in_bytes,
            value_counts: sortedPairs(f.value_counts),
            null_value_counts: sortedPairs(f.null_value_counts),
            lower_bounds: sortedPairs(f.lower_bounds, hex),
            upper_bounds: sortedPairs(f.upper_bounds, hex),
          };
        }),
      );
      const theirs = (tree.entries as Row[]).map((e) => {
        const f = e.data_file as Row;
        const pairs = (v: unknown) => [...((v as [number, unknown][]) ?? [])].sort((x, y) => x[0] - y[0]);
        return {
          status: e.status,
          snapshot_id: String(e.snapshot_id),
          sequence_number: e.sequence_number,
          file_sequence_number: e.file_sequence_number,
          file_path: f.file_path,
          file_format: f.file_format,
          record_count: f.record_count,
          file_size_in_bytes: f.file_size_in_bytes,
          value_counts: pairs(f.value_counts),
          null_value_counts: pairs(f.null_value_counts),
          lower_bounds: pairs(f.lower_bounds),
          upper_bounds: pairs(f.upper_bounds),
        };
      });
      expect(ours).toEqual(theirs);
      expect(ours.map((e) => e.sequence_number).sort()).toEqual([1, 2]);
      expect(ours.every((e) => e.lower_bounds.length > 0)).toBe(true);
    });
  },
);

/** pyiceberg creates a table in a SQL catalog under argv[1] and appends twice; prints its metadata location. */
const WRITE_WITH_PYICEBERG = `
import datetime, decimal, json, sys
import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
base = sys.argv[1]
catalog = SqlCatalog("lake", uri=f"sqlite:///{base}/catalog.db", warehouse=f"file://{base}/wh")
catalog.create_namespace("ns")
schema = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("price", pa.decimal128(10, 2)),
    pa.field("at", pa.timestamp("us", tz="UTC")),
])
table = catalog.create_table("ns.t", schema=schema)
utc = datetime.timezone.utc
table.append(pa.table({"id": [1, 2], "name": ["a", None], "price": [decimal.Decimal("1.50"), None],
    "at": [datetime.datetime(2024, 1, 2, tzinfo=utc), None]}, schema=schema))
table.append(pa.table({"id": [3], "name": ["zz"], "price": [decimal.Decimal("-7.25")],
    "at": [datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=utc)]}, schema=schema))
print(json.dumps({"metadata": catalog.load_table("ns.t").metadata_location}))
`;
