/**
 * `tidemark convert` (issue 31, deliverable 3): an upsert table the previous release wrote as a
 * change log (every version a row, deletes as `__op = d` rows, no `tidemark.table-kind`) is
 * converted once to the current-state form by position deletes, never silently reinterpreted.
 * The old table is built as that release wrote it: batches through a LakeSink with writeMode
 * append (several versions of a key across commits and within one, deletes, a key deleted and
 * inserted again), then the kind property removed. The expected current state is computed here
 * from the changes written, independently of the converter. Read back by pyiceberg, icebird and
 * Spark (readers we did not write). Covers: the refusal before conversion, conversion, a second
 * conversion that changes nothing, an upsert write after it, a partitioned table, a table with
 * nothing to delete (the kind alone), a rebase onto a commit that raced the conversion (the scan
 * is redone), and the real CLI (`tidemark convert`, text and --json).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSpec } from '../../shared/config/spec.js';
import { Op } from '../../shared/dataplane/metadata.js';
import { type Catalog, commitWithRetry } from '../../shared/iceberg/catalog.js';
import { convertToCurrentState } from '../../shared/iceberg/convert-current-state.js';
import { TABLE_KIND_PROPERTY } from '../../shared/iceberg/current-state.js';
import { currentSnapshot, setProperties } from '../../shared/iceberg/metadata.js';
import { type LakeCatalog, openLakeCatalog } from '../../shared/iceberg/open-catalog.js';
import type { PartitionFieldRequest } from '../../shared/iceberg/partition.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { LakeSink } from '../../shared/sink/lake-sink.js';
import { ParquetSink } from '../../shared/sink/parquet-sink.js';
import { readersMissing, SparkSession, sparkMissing } from '../harness/readers.js';
import {
  type Change,
  changeBatches,
  icebirdRows,
  pyicebergRows,
  type Row,
  SCHEMA,
  sortRows,
  TABLE,
  target,
} from './current-state-fixture.js';

const noSpark = sparkMissing === undefined ? undefined : `(Spark SKIPPED: ${sparkMissing})`;
const BIN = join(import.meta.dirname, '..', '..', 'bin', 'tidemark.js');

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Lake {
  readonly dir: string;
  readonly catalog: LakeCatalog;
  readonly partitionBy?: readonly PartitionFieldRequest[];
}

function newLake(partitionBy?: readonly PartitionFieldRequest[], dir?: string): Lake {
  const at = dir ?? mkdtempSync(join(tmpdir(), 'tidemark-convert-'));
  if (!dir) dirs.push(at);
  const catalog = openLakeCatalog({ type: 'file' }, { store: new FileObjectStore(at), prefix: '' });
  return { dir: at, catalog, ...(partitionBy ? { partitionBy } : {}) };
}

/** A new sink on the lake: a new run, which loads the table afresh. */
function sinkOf(l: Lake): LakeSink {
  return new LakeSink({
    parquet: new ParquetSink({ store: new FileObjectStore(l.dir) }),
    catalog: l.catalog,
    ...(l.partitionBy ? { partitionBy: { [TABLE]: l.partitionBy } } : {}),
  });
}

function write(seq: number, changes: readonly Change[], writeMode: 'upsert' | 'append') {
  return changeBatches(seq, changes, writeMode);
}

async function commit(
  sink: LakeSink,
  seq: number,
  changes: readonly Change[],
  writeMode: 'upsert' | 'append',
) {
  const w = write(seq, changes, writeMode);
  const pending = await sink.stage(target, await sink.write(target, SCHEMA, w.start, w.batches));
  expect(pending).toBeDefined();
  await sink.apply(pending!);
}

/** The latest non-deleted row per key of `commits`, applied in write order (positions rise with it). */
function currentStateOf(commits: readonly (readonly Change[])[]): Record<number, string | null> {
  const state = new Map<number, string | null>();
  for (const changes of commits)
    for (const [op, id, name] of changes) {
      if (op === Op.delete) state.delete(id);
      else state.set(id, name);
    }
  return Object.fromEntries(state);
}

/**
 * The table as the previous release wrote it: `commits` appended as a change log (one sink, one
 * run), then the kind property removed (that release set none).
 */
async function oldChangeLog(l: Lake, commits: readonly (readonly Change[])[]): Promise<void> {
  const sink = sinkOf(l);
  for (let i = 0; i < commits.length; i++) await commit(sink, i + 1, commits[i]!, 'append');
  await commitWithRetry(
    l.catalog.catalog,
    l.catalog.table(TABLE).ident,
    { writerId: 'test', commitId: 'drop-kind' },
    (t) => setProperties(t.metadata, {}, { remove: [TABLE_KIND_PROPERTY], nowMs: Date.now() }),
  );
  expect((await table(l)).metadata.properties[TABLE_KIND_PROPERTY]).toBeUndefined();
}

async function table(l: Lake) {
  return (await l.catalog.catalog.loadTable(l.catalog.table(TABLE).ident))!;
}

function convert(l: Lake, catalog: Catalog = l.catalog.catalog) {
  const { ident, folder } = l.catalog.table(TABLE);
  return convertToCurrentState(catalog, ident, folder, { keyColumns: ['id'], nowMs: Date.now });
}

/** The data files under the table's folder (never rewritten by a conversion). */
function dataFiles(l: Lake): string[] {
  const files: string[] = [];
  const walk = (rel: string) => {
    for (const e of readdirSync(join(l.dir, TABLE, rel), { withFileTypes: true })) {
      const path = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        if (path !== 'metadata' && path !== 'deletes') walk(path);
      } else if (e.name.endsWith('.parquet')) files.push(path);
    }
  };
  walk('');
  return files.sort();
}

async function pyiceberg(l: Lake): Promise<{ rows: Row[]; ops: string[] }> {
  return pyicebergRows((await table(l)).metadataLocation);
}

async function icebird(l: Lake): Promise<Row[]> {
  return icebirdRows((await table(l)).metadataLocation);
}

/** Every reader there is reads exactly `expected`, and no `d` row. */
async function expectState(l: Lake, expected: Record<number, string | null>, spark?: SparkSession) {
  const want = sortRows(Object.entries(expected).map(([id, name]) => [Number(id), name] as Row));
  expect(await icebird(l)).toEqual(want);
  if (readersMissing === undefined) {
    const py = await pyiceberg(l);
    expect(py.rows).toEqual(want);
    expect(py.ops.filter((op) => op === 'd')).toEqual([]);
  }
  if (spark) {
    const { rows } = await spark.ask({ load: (await table(l)).metadataLocation, order_by: 'id' });
    expect(sortRows(rows.map((r) => [Number(r.id), (r.name ?? null) as string | null]))).toEqual(want);
  }
}

/** Versions across commits and within one, deletes, a key deleted and inserted again, a delete of a key never written. */
const HISTORY: readonly (readonly Change[])[] = [
  [
    [Op.create, 1, 'a'],
    [Op.create, 2, 'b'],
    [Op.create, 3, 'c'],
    [Op.create, 4, 'd'],
    [Op.create, 5, 'e'],
  ],
  [
    [Op.update, 2, 'b1'],
    [Op.update, 2, 'b2'],
    [Op.delete, 3, null],
    [Op.create, 6, 'f1'],
    [Op.delete, 6, null],
    [Op.create, 6, 'f2'],
    [Op.delete, 99, null],
  ],
  [[Op.delete, 4, null]],
  [
    [Op.create, 3, 'c2'],
    [Op.update, 1, 'a2'],
    [Op.update, 1, 'a3'],
  ],
  [
    [Op.delete, 5, null],
    [Op.update, 6, 'f3'],
  ],
  [[Op.create, 5, 'e2']],
];
const HISTORY_ROWS = HISTORY.reduce((n, c) => n + c.length, 0);

describe('tidemark convert: a change-log upsert table converted once to the current-state form', () => {
  let spark: SparkSession | undefined;
  beforeAll(async () => {
    if (noSpark === undefined) spark = await SparkSession.start();
  }, 180_000);
  afterAll(async () => {
    await spark?.quit();
  }, 60_000);

  it('refused before, converted by position deletes, the same after a second conversion, written by upsert after', async () => {
    const l = newLake();
    await oldChangeLog(l, HISTORY);
    const expected = currentStateOf(HISTORY);
    expect(expected).toEqual({ 1: 'a3', 2: 'b2', 3: 'c2', 5: 'e2', 6: 'f3' });

    // (a) An upsert write to the unconverted table is refused, never reinterpreted.
    const w = write(10, [[Op.update, 1, 'x']], 'upsert');
    await expect(sinkOf(l).write(target, SCHEMA, w.start, w.batches)).rejects.toMatchObject({
      code: 'ICEBERG_TABLE_KIND_MISMATCH',
    });

    // (b) Converted: one delete snapshot, no data file rewritten, exactly the current state read.
    const filesBefore = dataFiles(l);
    const snapshotsBefore = (await table(l)).metadata.snapshots.length;
    const result = await convert(l);
    expect(result).toMatchObject({
      status: 'converted',
      rowsScanned: HISTORY_ROWS,
      rowsKept: 5,
      rowsDeleted: HISTORY_ROWS - 5,
      deleteFiles: 1,
    });
    const after = (await table(l)).metadata;
    expect(after.properties[TABLE_KIND_PROPERTY]).toBe('current-state');
    expect(after.snapshots.length).toBe(snapshotsBefore + 1);
    expect(currentSnapshot(after)!['snapshot-id']).toBe(result.status === 'converted' && result.snapshotId);
    expect(currentSnapshot(after)!.summary.operation).toBe('delete');
    expect(dataFiles(l)).toEqual(filesBefore);
    await expectState(l, expected, spark);

    // (c) Again: already current-state, nothing committed.
    const location = (await table(l)).metadataLocation;
    expect(await convert(l)).toEqual({ status: 'already-current-state' });
    expect((await table(l)).metadataLocation).toBe(location);

    // (d) An upsert write works now and stays a current state.
    await commit(
      sinkOf(l),
      20,
      [
        [Op.update, 2, 'b3'],
        [Op.delete, 1, null],
        [Op.create, 7, 'g'],
      ],
      'upsert',
    );
    await expectState(l, { 2: 'b3', 3: 'c2', 5: 'e2', 6: 'f3', 7: 'g' }, spark);
  }, 300_000);

  it('a partitioned table (bucket of the key): position deletes per partition, exact current state', async () => {
    const l = newLake([{ column: 'id', transform: 'bucket[4]' }]);
    const ids = Array.from({ length: 24 }, (_, i) => i + 1);
    const history: Change[][] = [
      ids.map((id) => [Op.create, id, `v1-${id}`] as Change),
      ids.flatMap((id): Change[] =>
        id % 3 === 0
          ? [[Op.delete, id, null]]
          : id % 3 === 1
            ? [
                [Op.update, id, `v2-${id}`],
                [Op.update, id, `v3-${id}`],
              ]
            : [],
      ),
      ids.filter((id) => id % 6 === 0).map((id) => [Op.create, id, `back-${id}`] as Change),
    ];
    await oldChangeLog(l, history);
    const result = await convert(l);
    expect(result.status).toBe('converted');
    if (result.status !== 'converted') return;
    expect(result.deleteFiles).toBeGreaterThan(1);
    expect(readdirSync(join(l.dir, TABLE, 'deletes')).length).toBe(result.deleteFiles);
    await expectState(l, currentStateOf(history), spark);
    await commit(sinkOf(l), 10, [[Op.update, 1, 'after']], 'upsert');
    await expectState(l, { ...currentStateOf(history), 1: 'after' });
  }, 300_000);

  it('a table with nothing to delete takes the kind alone, in a commit without a snapshot', async () => {
    const l = newLake();
    const history: Change[][] = [[[Op.create, 1, 'a']], [[Op.create, 2, 'b']]];
    await oldChangeLog(l, history);
    const snapshots = (await table(l)).metadata.snapshots.length;
    expect(await convert(l)).toMatchObject({
      status: 'converted',
      rowsScanned: 2,
      rowsDeleted: 0,
      rowsKept: 2,
    });
    const after = (await table(l)).metadata;
    expect(after.properties[TABLE_KIND_PROPERTY]).toBe('current-state');
    expect(after.snapshots.length).toBe(snapshots);
    await expectState(l, { 1: 'a', 2: 'b' });
  }, 120_000);

  it('a commit that races the conversion is scanned too: the compare-and-swap fails and the new base is scanned again', async () => {
    const l = newLake();
    // Kind change-log set explicitly (an append writer's table), so another append writer may commit to it.
    const sink = sinkOf(l);
    await commit(sink, 1, HISTORY[0]!, 'append');
    await commit(sink, 2, HISTORY[1]!, 'append');
    const racing: Change[] = [
      [Op.update, 1, 'raced'],
      [Op.delete, 2, null],
    ];
    const real = l.catalog.catalog;
    let raced = 0;
    const catalog: Catalog = {
      kind: real.kind,
      ...(real.commitSyncsMetadataFolder ? { commitSyncsMetadataFolder: true } : {}),
      loadTable: (ident) => real.loadTable(ident),
      createTable: (ident, m) => real.createTable(ident, m),
      async commitTable(ident, base, updated) {
        if (raced++ === 0) await commit(sink, 3, racing, 'append');
        return real.commitTable(ident, base, updated);
      },
    };
    const result = await convert(l, catalog);
    expect(raced).toBe(2);
    const all = [HISTORY[0]!, HISTORY[1]!, racing];
    expect(result).toMatchObject({
      status: 'converted',
      rowsScanned: all.reduce((n, c) => n + c.length, 0),
    });
    // Superseded attempt's files are gone: one delete file, the committed one's.
    expect(readdirSync(join(l.dir, TABLE, 'deletes'))).toHaveLength(1);
    await expectState(l, currentStateOf(all));
  }, 120_000);
});

describe('the tidemark convert command', () => {
  function cli(
    dir: string,
    args: string[],
  ): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      execFile(
        process.execPath,
        [BIN, ...args],
        { cwd: dir, encoding: 'utf8', timeout: 120_000 },
        (e, stdout, stderr) => {
          if (e && typeof e.code !== 'number') reject(e);
          else resolve({ code: e ? (e.code as number) : 0, stdout, stderr });
        },
      );
    });
  }

  it('converts the spec’s upsert tables, leaves append tables alone, refuses an append table by name', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tidemark-convert-cli-'));
    dirs.push(dir);
    const lakeDir = join(dir, 'lake');
    const table = (name: string, writeMode: 'append' | 'upsert') => ({
      source: 'db',
      table: name,
      target: name,
      mode: 'incremental',
      cursor: 'updated_at',
      writeMode,
    });
    const spec = parseSpec({
      pipeline: 'p',
      sources: { db: { kind: 'postgres', url: 'postgres://u@127.0.0.1:1/db' } },
      state: { dir: join(dir, 'state') },
      lake: { uri: `file://${lakeDir}` },
      tables: [table(TABLE, 'upsert'), table('public.log', 'append'), table('public.never', 'upsert')],
    });
    const specFile = join(dir, 'tidemark.json');
    writeFileSync(specFile, JSON.stringify(spec));
    const l = newLake(undefined, lakeDir);
    await oldChangeLog(l, HISTORY);

    const text = await cli(dir, ['convert', '-c', specFile]);
    expect(text.stderr).toBe('');
    expect(text.code).toBe(0);
    const lines = text.stdout.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      new RegExp(
        `^${TABLE}: converted: ${HISTORY_ROWS} rows scanned, ${HISTORY_ROWS - 5} deleted by position in 1 delete file\\(s\\), 5 current rows; snapshot \\d+$`,
      ),
    );
    expect(lines[1]).toMatch(/^public\.never: no Iceberg table/);
    await expectState(l, currentStateOf(HISTORY));

    const again = await cli(dir, ['convert', '-c', specFile, '--table', TABLE, '--json']);
    expect(again.code).toBe(0);
    expect(
      again.stdout
        .trim()
        .split('\n')
        .map((s) => JSON.parse(s)),
    ).toEqual([{ table: TABLE, ident: TABLE, status: 'already-current-state' }]);

    const refused = await cli(dir, ['convert', '-c', specFile, '--table', 'public.log', '--json']);
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.stdout.trim())).toMatchObject({
      status: 'error',
      error: { code: 'ICEBERG_CONVERT_REFUSED' },
    });
    expect(refused.stderr).toMatch(/^tidemark: .*writeMode: append/);
  }, 180_000);
});
