/**
 * Spark 3.5 with the Iceberg 1.12 runtime (Java: the reference implementation) reads the v2
 * table of ./iceberg-table-fixture.ts, built from tidemark's own Parquet, manifests and manifest
 * lists, by its metadata file (no catalog): the rows of the current snapshot, and the `files` and
 * `entries` metadata tables, whose metrics Java decodes by field id and type (readable_metrics)
 * and whose snapshot ids (past 2^53) and sequence numbers it inherits from our manifest list.
 * One Spark process for the file (test/readers/spark_reader.py, docs/test-readers.md).
 *
 * Skips, saying so, where .venv-readers or Spark's jars (.readers/jars) are not installed
 * (scripts/install-test-readers.sh).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SparkSession, sparkMissing } from '../harness/readers.js';
import {
  type BuiltTable,
  buildTable,
  expectReadableMetrics,
  LONG_NAME,
  SNAP_1,
  SNAP_2,
  SNAP_3,
} from './iceberg-table-fixture.js';

type Row = Record<string, unknown>;

if (sparkMissing) console.warn(`Spark tests skipped: ${sparkMissing}`);

describe.skipIf(sparkMissing !== undefined)(
  `Spark (Iceberg's Java implementation) reads tidemark's manifests${sparkMissing ? ` (SKIPPED: ${sparkMissing})` : ''}`,
  () => {
    let dir: string;
    let spark: SparkSession | undefined;
    /** The rows Spark answers `request` with. */
    const rowsOf = async (request: object): Promise<Row[]> => (await spark!.ask(request)).rows;
    let table: BuiltTable;
    const uri = (path: string) => `file://${path}`;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'tidemark-iceberg-spark-'));
      table = buildTable(dir);
      spark = await SparkSession.start();
    }, 120_000);
    afterAll(async () => {
      await spark?.quit();
      if (dir) rmSync(dir, { recursive: true, force: true });
    }, 60_000);

    it('reads the rows of every snapshot', async () => {
      for (const [n, ids] of [
        [1, [1, 2, 3]],
        [2, [1, 2, 3, 4, 5]],
        [3, [1, 2, 3, 4, 5]],
      ] as const) {
        const rows = await rowsOf({ load: uri(table.metadata(n)), order_by: 'id' });
        expect(rows.map((r) => r.id)).toEqual(ids);
      }
      const rows = await rowsOf({ load: uri(table.metadata(3)), order_by: 'id' });
      expect(rows[0]).toMatchObject({
        id: 1,
        name: 'apple',
        price: '12.50',
        big: '-99999999999999999999999999999.000000001',
        at: '2023-11-14T22:13:20.000001',
        blob: '0102',
      });
      expect(rows[1]).toMatchObject({ name: LONG_NAME, price: '-3.25', at: '1969-12-31T23:59:59.999999' });
    });

    it('reads the entries with the snapshot ids and sequence numbers they inherited', async () => {
      const entries = await rowsOf({ load: `${uri(table.metadata(3))}#entries` });
      const seen = entries.map((e) => [
        e.status,
        e.snapshot_id,
        e.sequence_number,
        e.file_sequence_number,
        (e.data_file as Row).file_path,
      ]);
      expect(seen).toEqual(
        expect.arrayContaining([
          [0, String(SNAP_1), 1, 1, uri(table.pathA)],
          [0, String(SNAP_2), 2, 2, uri(table.pathB)],
        ]),
      );
      expect(entries).toHaveLength(2);
      const manifests = await rowsOf({ load: `${uri(table.metadata(3))}#manifests` });
      expect(manifests).toEqual([
        expect.objectContaining({
          path: uri(join(dir, 't', 'metadata', 'm3.avro')),
          length: table.m3.bytes.length,
          added_snapshot_id: String(SNAP_3),
          existing_data_files_count: 2,
        }),
      ]);
    });

    it('reads the metrics, bounds decoded by type', async () => {
      const files = new Map(
        (await rowsOf({ load: `${uri(table.metadata(3))}#files` })).map((f) => [f.file_path, f]),
      );
      const a = files.get(uri(table.pathA))!;
      const b = files.get(uri(table.pathB))!;
      expect(a).toMatchObject({
        record_count: 3,
        file_size_in_bytes: table.fileA.length,
        file_format: 'PARQUET',
      });
      expect(b).toMatchObject({ record_count: 2, file_size_in_bytes: table.fileB.length });
      expectReadableMetrics({ a, b });
      const metrics = (f: Row, column: string) => (f.readable_metrics as Record<string, Row>)[column]!;
      expect(metrics(a, 'at')).toMatchObject({
        lower_bound: '1969-12-31T23:59:59.999999',
        upper_bound: '2023-11-14T22:13:20.000001',
      });
    });
  },
);
