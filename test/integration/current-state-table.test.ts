/**
 * Current-state tables (issue 31, decision 0026) through the lake sink: an upsert write collapses
 * per key, stages its surviving rows and the keys it touched, and its catalog commit deletes the
 * keys' older rows by position. Read back by pyiceberg, icebird and Spark (readers we did not
 * write): each holds exactly the latest row per key, deletes applied, after every commit. Covers
 * two versions of one key in one commit, insert-delete-insert in one commit, a commit of deletes
 * only, a delete of a key the table never had, a key deleted and inserted again, a partitioned
 * table whose rows update and delete, a rebase onto another writer's commit (the lookup runs
 * again on the new base), recovery of a staged keys file, and the refusal to reinterpret a change
 * log as a current state (ICEBERG_TABLE_KIND_MISMATCH).
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PendingCommit } from '../../shared/contracts/sink.js';
import { newBatch } from '../../shared/dataplane/batch.js';
import { Op, type OpCode } from '../../shared/dataplane/metadata.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { TABLE_KIND_PROPERTY } from '../../shared/iceberg/current-state.js';
import { currentSnapshot } from '../../shared/iceberg/metadata.js';
import { type LakeCatalog, openLakeCatalog } from '../../shared/iceberg/open-catalog.js';
import type { PartitionFieldRequest } from '../../shared/iceberg/partition.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { LakeSink } from '../../shared/sink/lake-sink.js';
import { ParquetSink } from '../../shared/sink/parquet-sink.js';
import { wireRecord } from '../harness/lake-record.js';
import { readersMissing, runReaderScript, SparkSession, sparkMissing } from '../harness/readers.js';
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

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Lake {
  readonly dir: string;
  readonly catalog: LakeCatalog;
  readonly sink: LakeSink;
}

function newLake(partitionBy?: readonly PartitionFieldRequest[], history?: string): Lake {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-current-state-'));
  dirs.push(dir);
  const store = new FileObjectStore(dir);
  const catalog = openLakeCatalog({ type: 'file' }, { store, prefix: '' });
  const sink = new LakeSink({
    parquet: new ParquetSink({ store }),
    catalog,
    ...(partitionBy ? { partitionBy: { [TABLE]: partitionBy } } : {}),
    ...(history ? { history: { [TABLE]: history } } : {}),
  });
  return { dir, catalog, sink };
}

function write(seq: number, changes: readonly Change[], writeMode: 'upsert' | 'append' = 'upsert') {
  return changeBatches(seq, changes, writeMode);
}

async function commit(l: Lake, seq: number, changes: readonly Change[], writeMode?: 'upsert' | 'append') {
  const w = write(seq, changes, writeMode);
  const refs = await l.sink.write(target, SCHEMA, w.start, w.batches);
  const pending = await l.sink.stage(target, refs);
  expect(pending).toBeDefined();
  await l.sink.apply(pending!);
  return pending!;
}

/** The table's current metadata file. */
async function metadataLocation(l: Lake, table = TABLE): Promise<string> {
  const loaded = await l.catalog.catalog.loadTable(l.catalog.table(table).ident);
  return loaded!.metadataLocation;
}

async function pyiceberg(l: Lake): Promise<{ rows: Row[]; ops: string[] }> {
  return pyicebergRows(await metadataLocation(l));
}

async function icebird(l: Lake): Promise<Row[]> {
  return icebirdRows(await metadataLocation(l));
}

/** What a current state of `expected` reads as, by every reader there is. */
async function expectState(l: Lake, expected: Record<number, string | null>, spark?: SparkSession) {
  const want = sortRows(Object.entries(expected).map(([id, name]) => [Number(id), name] as Row));
  expect(await icebird(l)).toEqual(want);
  if (readersMissing === undefined) {
    const py = await pyiceberg(l);
    expect(py.rows).toEqual(want);
    // Deletes are applied, never rows of their own.
    expect(py.ops.filter((op) => op === 'd' || op === '2')).toEqual([]);
  }
  if (spark) {
    const { rows } = await spark.ask({ load: await metadataLocation(l), order_by: 'id' });
    expect(sortRows(rows.map((r) => [Number(r.id), (r.name ?? null) as string | null]))).toEqual(want);
  }
}

describe('current-state tables (writeMode upsert on Iceberg)', () => {
  let spark: SparkSession | undefined;
  beforeAll(async () => {
    if (noSpark === undefined) spark = await SparkSession.start();
  }, 180_000);
  afterAll(async () => {
    await spark?.quit();
  }, 60_000);

  it('hold the latest row per key after every commit: two versions in one commit, insert-delete-insert, deletes only, a key back after its delete', async () => {
    const l = newLake();
    await commit(l, 1, [
      [Op.create, 1, 'a'],
      [Op.create, 2, 'b'],
      [Op.create, 3, 'c'],
      [Op.create, 4, 'd'],
      [Op.create, 5, 'e'],
    ]);
    const loaded = await l.catalog.catalog.loadTable(l.catalog.table(TABLE).ident);
    expect(loaded!.metadata.properties[TABLE_KIND_PROPERTY]).toBe('current-state');
    expect(loaded!.metadata.schemas.at(-1)!['identifier-field-ids']).toEqual([1]);
    await expectState(l, { 1: 'a', 2: 'b', 3: 'c', 4: 'd', 5: 'e' }, spark);

    await commit(l, 2, [
      [Op.update, 2, 'b1'],
      [Op.update, 2, 'b2'], // two versions of one key in one commit: the later stays
      [Op.delete, 3, null],
      [Op.create, 6, 'f1'],
      [Op.delete, 6, null],
      [Op.create, 6, 'f2'], // insert-delete-insert in one commit: the last insert stays
      [Op.delete, 99, null], // a key the table never had
    ]);
    await expectState(l, { 1: 'a', 2: 'b2', 4: 'd', 5: 'e', 6: 'f2' }, spark);

    const deletesOnly = await commit(l, 3, [[Op.delete, 4, null]]);
    expect(deletesOnly.dataFiles).toBe(0);
    await expectState(l, { 1: 'a', 2: 'b2', 5: 'e', 6: 'f2' });

    await commit(l, 4, [[Op.create, 3, 'c2']]); // deleted, then inserted again
    await commit(l, 5, [[Op.update, 1, 'a2']]);
    await expectState(l, { 1: 'a2', 2: 'b2', 3: 'c2', 5: 'e', 6: 'f2' }, spark);

    const meta = (await l.catalog.catalog.loadTable(l.catalog.table(TABLE).ident))!.metadata;
    const ops = meta.snapshots.map((s) => s.summary.operation);
    expect(ops).toEqual(['append', 'overwrite', 'delete', 'append', 'overwrite']);
    // Rows deleted by position: 2 and 3 (commit 2; 6 and 99 had no row), 4 (3), none (4: 3 was gone), 1 (5).
    expect(currentSnapshot(meta)!.summary['total-position-deletes']).toBe('4');
  }, 240_000);

  it('a partitioned table (bucket of the key) whose rows update and delete stays exact', async () => {
    const l = newLake([{ column: 'id', transform: 'bucket[4]' }]);
    const ids = Array.from({ length: 20 }, (_, i) => i + 1);
    await commit(
      l,
      1,
      ids.map((id) => [Op.create, id, `v1-${id}`] as Change),
    );
    const expected: Record<number, string | null> = Object.fromEntries(ids.map((id) => [id, `v1-${id}`]));
    const changes: Change[] = [];
    for (const id of ids) {
      if (id % 3 === 0) {
        changes.push([Op.delete, id, null]);
        delete expected[id];
      } else if (id % 3 === 1) {
        changes.push([Op.update, id, `v2-${id}`]);
        expected[id] = `v2-${id}`;
      }
    }
    await commit(l, 2, changes);
    await expectState(l, expected, spark);
    // Delete files per partition of the rows they delete: more than one bucket was touched.
    const deletes = readdirSync(join(l.dir, TABLE, 'deletes'));
    expect(deletes.length).toBeGreaterThan(1);
  }, 240_000);

  it("rebases onto another writer's commit: the keys are looked up again in the table as it is then", async () => {
    const l = newLake();
    await commit(l, 1, [[Op.create, 1, 'a']]);
    // Another writer (its own sink, another writer id) adds key 2 after our sink's last commit.
    const other = new LakeSink({
      parquet: new ParquetSink({ store: new FileObjectStore(l.dir) }),
      catalog: openLakeCatalog({ type: 'file' }, { store: new FileObjectStore(l.dir), prefix: '' }),
    });
    const theirs = { ...target, writer: 'p.other' };
    const w = write(2, [[Op.create, 2, 'theirs']]);
    await other.apply((await other.stage(theirs, await other.write(theirs, SCHEMA, w.start, w.batches)))!);
    // Our commit, built on the table as our sink last committed it, updates key 2: the
    // compare-and-swap fails, the table is loaded, and the lookup finds their row.
    await commit(l, 3, [[Op.update, 2, 'ours']]);
    await expectState(l, { 1: 'a', 2: 'ours' });
  }, 120_000);

  it('recovery removes a staged keys file at or past the committed position; an applied commit deletes its own', async () => {
    const l = newLake();
    const p1 = await commit(l, 1, [[Op.create, 1, 'a']]);
    const w = write(2, [[Op.delete, 1, null]]);
    const pending: PendingCommit | undefined = await l.sink.stage(
      target,
      await l.sink.write(target, SCHEMA, w.start, w.batches),
    );
    expect(pending?.keys).toBeDefined();
    const metadataFiles = () => readdirSync(join(l.dir, TABLE, 'metadata'));
    const keysName = basename(pending!.keys!.uri);
    expect(metadataFiles()).toContain(keysName);
    const removed = await l.sink.recover(target, w.start);
    expect(removed.map((r) => basename(r.uri))).toContain(keysName);
    expect(metadataFiles()).not.toContain(keysName);
    // A committed commit's keys file has served: deleted once the table had the commit.
    expect(metadataFiles()).not.toContain(basename(p1.keys!.uri));
    await expectState(l, { 1: 'a' });
  }, 120_000);

  it('never reinterprets a change log as a current state, nor the reverse; an empty table takes the kind', async () => {
    const l = newLake();
    await commit(l, 1, [[Op.create, 1, 'a']], 'append');
    const w = write(2, [[Op.update, 1, 'b']]);
    const fresh = newLake();
    // A new sink (a new run) on the change-log table, asked to write it as a current state.
    const sink = new LakeSink({
      parquet: new ParquetSink({ store: new FileObjectStore(l.dir) }),
      catalog: l.catalog,
    });
    await expect(sink.write(target, SCHEMA, w.start, w.batches)).rejects.toMatchObject({
      code: 'ICEBERG_TABLE_KIND_MISMATCH',
      message: expect.stringContaining('tidemark convert'),
    });
    // The reverse: a current-state table written with writeMode append.
    await commit(fresh, 1, [[Op.create, 1, 'a']]);
    const sink2 = new LakeSink({
      parquet: new ParquetSink({ store: new FileObjectStore(fresh.dir) }),
      catalog: fresh.catalog,
    });
    const w2 = write(2, [[Op.update, 1, 'b']], 'append');
    await expect(sink2.write(target, SCHEMA, w2.start, w2.batches)).rejects.toMatchObject({
      code: 'ICEBERG_TABLE_KIND_MISMATCH',
    });
    await expectState(fresh, { 1: 'a' });
  }, 120_000);

  it('keeps the history beside the current state: every change once, partitioned by day of __commit_ts; a kill between the two catalog commits loses nothing', async () => {
    const HISTORY = 'public.items_history';
    const l = newLake(undefined, HISTORY);
    const changes: Change[][] = [
      [
        [Op.create, 1, 'a'],
        [Op.create, 2, 'b'],
        [Op.update, 2, 'b2'],
      ],
      [
        [Op.delete, 1, null],
        [Op.update, 2, 'b3'],
        [Op.create, 3, 'c'],
      ],
      [[Op.delete, 3, null]],
    ];
    await commit(l, 1, changes[0]!);
    // A pending commit whose history was applied and whose current state was not (a kill between
    // the two catalog commits), then applied again by recovery: each table gets it once.
    const w = write(2, changes[1]!);
    const pending = (await l.sink.stage(target, await l.sink.write(target, SCHEMA, w.start, w.batches)))!;
    expect(pending.history?.table).toBe(HISTORY);
    await l.sink.apply(pending.history!);
    await expectState(l, { 1: 'a', 2: 'b2' });
    const recovering = new LakeSink({
      parquet: new ParquetSink({ store: new FileObjectStore(l.dir) }),
      catalog: l.catalog,
      history: { [TABLE]: HISTORY },
    });
    await recovering.apply(pending);
    await recovering.apply(pending);
    await expectState(l, { 2: 'b3', 3: 'c' });
    await commit(l, 3, changes[2]!);
    await expectState(l, { 2: 'b3' }, spark);

    // The history: every change of every commit, once, with its op and position.
    const { rows } = await runReaderScript<{ rows: Record<string, unknown>[] }>('read_table.py', [
      '--catalog',
      'static',
      '--metadata',
      await metadataLocation(l, HISTORY),
      '--order-by',
      '__pos',
    ]);
    const letters = ['c', 'u', 'd'];
    expect(rows.map((r) => [Number(r.id), r.name ?? null, r.__op])).toEqual(
      changes.flat().map(([op, id, name]) => [id, name, letters[op]]),
    );
    const history = (await l.catalog.catalog.loadTable(l.catalog.table(HISTORY).ident))!.metadata;
    expect(history.properties[TABLE_KIND_PROPERTY]).toBe('change-log');
    expect(history['partition-specs'].at(-1)!.fields.map((f) => f.transform)).toEqual(['day']);
    expect(history.snapshots).toHaveLength(3);
  }, 240_000);

  it('property: random commits of inserts, updates and deletes (some keys many times in one commit) leave exactly the model, whatever the sink remembered', async () => {
    const change = fc.tuple(
      fc.constantFrom(Op.create, Op.update, Op.delete),
      fc.integer({ min: 1, max: 12 }),
    );
    const commits = fc.array(fc.array(change, { minLength: 1, maxLength: 10 }), {
      minLength: 1,
      maxLength: 6,
    });
    // Some runs restart the sink between commits: a new sink starts with nothing remembered.
    const restarts = fc.array(fc.boolean(), { minLength: 6, maxLength: 6 });
    await fc.assert(
      fc.asyncProperty(commits, restarts, async (cs, restart) => {
        let l = newLake();
        const model = new Map<number, string>();
        for (const [i, c] of cs.entries()) {
          if (restart[i])
            l = {
              ...l,
              sink: new LakeSink({
                parquet: new ParquetSink({ store: new FileObjectStore(l.dir) }),
                catalog: l.catalog,
              }),
            };
          const changes: Change[] = c.map(([op, id], j) => [op, id, op === Op.delete ? null : `c${i}-${j}`]);
          for (const [op, id, name] of changes) {
            if (op === Op.delete) model.delete(id);
            else model.set(id, name!);
          }
          await commit(l, i + 1, changes);
          const want = sortRows([...model].map(([id, name]) => [id, name] as Row));
          const meta = (await l.catalog.catalog.loadTable(l.catalog.table(TABLE).ident))!.metadata;
          // A table whose commits so far deleted keys it never held has no snapshot (icebird cannot open one).
          if (currentSnapshot(meta) === undefined) expect(want).toEqual([]);
          else expect(await icebird(l)).toEqual(want);
        }
      }),
      { numRuns: 40 },
    );
  }, 600_000);

  it('a key that is not the first column (Arrow select once paired it with the wrong column)', async () => {
    const l = newLake();
    const schema: Schema = { columns: [SCHEMA.columns[1]!, SCHEMA.columns[0]!], primaryKey: ['id'] };
    const put = async (seq: number, op: OpCode, id: number, name: string | null) => {
      const start = `j${String(seq).padStart(12, '0')}`;
      const batch = newBatch({
        table: TABLE,
        record: wireRecord(schema, [{ name, id: BigInt(id) }], { posPrefix: start, op }),
        watermark: undefined,
        writeMode: 'upsert',
      });
      await l.sink.apply((await l.sink.stage(target, await l.sink.write(target, schema, start, [batch])))!);
    };
    await put(1, Op.create, 1, 'a');
    await put(2, Op.create, 2, 'b');
    await put(3, Op.update, 1, 'a2');
    await put(4, Op.delete, 2, null);
    await expectState(l, { 1: 'a2' });
  }, 120_000);
});
