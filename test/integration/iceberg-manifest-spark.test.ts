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
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BuiltTable, buildTable, LONG_NAME, SNAP_1, SNAP_2, SNAP_3 } from './iceberg-table-fixture.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const PYTHON = join(ROOT, '.venv-readers', 'bin', 'python');
const JARS = join(ROOT, '.readers', 'jars');
const HAVE_SPARK =
  existsSync(PYTHON) && existsSync(JARS) && readdirSync(JARS).some((f) => f.startsWith('iceberg-spark'));

type Row = Record<string, unknown>;

/** One long-lived spark_reader.py: a JSON line per request, a JSON line per answer. */
class Spark {
  private readonly lines: AsyncIterator<string>;
  private constructor(readonly child: ChildProcessWithoutNullStreams) {
    this.lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  }
  static async start(): Promise<Spark> {
    const child = spawn(PYTHON, ['test/readers/spark_reader.py'], {
      cwd: ROOT,
      env: { ...process.env, TZ: 'UTC' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stderr.resume();
    const spark = new Spark(child);
    const ready = JSON.parse(await spark.next()) as { ready?: boolean };
    if (!ready.ready) throw new Error(`spark_reader.py did not start: ${JSON.stringify(ready)}`);
    return spark;
  }
  private async next(): Promise<string> {
    const { value, done } = await this.lines.next();
    if (done) throw new Error('spark_reader.py exited');
    return value;
  }
  async ask(request: object): Promise<Row[]> {
    this.child.stdin.write(`${JSON.stringify(request)}\n`);
    const answer = JSON.parse(await this.next()) as { ok: boolean; rows: Row[]; error?: string };
    if (!answer.ok) throw new Error(`Spark: ${answer.error}`);
    return answer.rows;
  }
  async stop(): Promise<void> {
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.stdin.end(`${JSON.stringify({ quit: true })}\n`);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  }
}

if (!HAVE_SPARK)
  console.warn(
    'Spark tests skipped: .venv-readers or .readers/jars is not installed (bash scripts/install-test-readers.sh)',
  );

describe.skipIf(!HAVE_SPARK)(
  `Spark (Iceberg's Java implementation) reads tidemark's manifests${HAVE_SPARK ? '' : ' (SKIPPED: .venv-readers or .readers/jars is not installed; run bash scripts/install-test-readers.sh)'}`,
  () => {
    let dir: string;
    let spark: Spark | undefined;
    let table: BuiltTable;
    const uri = (path: string) => `file://${path}`;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'tidemark-iceberg-spark-'));
      table = buildTable(dir);
      spark = await Spark.start();
    }, 120_000);
    afterAll(async () => {
      await spark?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    }, 60_000);

    it('reads the rows of every snapshot', async () => {
      for (const [n, ids] of [
        [1, [1, 2, 3]],
        [2, [1, 2, 3, 4, 5]],
        [3, [1, 2, 3, 4, 5]],
      ] as const) {
        const rows = await spark!.ask({ load: uri(table.metadata(n)), order_by: 'id' });
        expect(rows.map((r) => r.id)).toEqual(ids);
      }
      const rows = await spark!.ask({ load: uri(table.metadata(3)), order_by: 'id' });
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
      const entries = await spark!.ask({ load: `${uri(table.metadata(3))}#entries` });
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
      const manifests = await spark!.ask({ load: `${uri(table.metadata(3))}#manifests` });
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
        (await spark!.ask({ load: `${uri(table.metadata(3))}#files` })).map((f) => [f.file_path, f]),
      );
      const a = files.get(uri(table.pathA))!;
      const b = files.get(uri(table.pathB))!;
      expect(a).toMatchObject({
        record_count: 3,
        file_size_in_bytes: table.fileA.length,
        file_format: 'PARQUET',
      });
      expect(b).toMatchObject({ record_count: 2, file_size_in_bytes: table.fileB.length });
      const metrics = (f: Row, column: string) => (f.readable_metrics as Record<string, Row>)[column]!;
      expect(metrics(a, 'id')).toMatchObject({
        lower_bound: 1,
        upper_bound: 3,
        value_count: 3,
        null_value_count: 0,
      });
      expect(metrics(a, 'qty')).toMatchObject({
        lower_bound: -2_147_483_648,
        upper_bound: 7,
        null_value_count: 1,
      });
      expect(metrics(a, 'name')).toMatchObject({ lower_bound: LONG_NAME.slice(0, 16), upper_bound: 'apple' });
      expect(metrics(a, 'price')).toMatchObject({ lower_bound: '-3.25', upper_bound: '12.50' });
      expect(metrics(a, 'big')).toMatchObject({
        lower_bound: '-99999999999999999999999999999.000000001',
        upper_bound: '0.000000001',
      });
      expect(metrics(a, 'at')).toMatchObject({
        lower_bound: '1969-12-31T23:59:59.999999',
        upper_bound: '2023-11-14T22:13:20.000001',
      });
      expect(metrics(b, 'day')).toMatchObject({ lower_bound: '1970-01-01', upper_bound: '9999-12-31' });
      expect(metrics(b, 'ratio')).toMatchObject({ lower_bound: -1.5, upper_bound: 1e300 });
      expect(metrics(b, 'blob')).toMatchObject({ lower_bound: '00', upper_bound: 'ff' });
    });
  },
);
