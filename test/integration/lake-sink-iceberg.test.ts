/**
 * The lake sink on Iceberg tables (shared/sink/lake-sink.ts), on a file lake with the `file`
 * catalog, read back by pyiceberg: a table created on its first write with the spec's snapshot
 * retention as its properties; a commit applied twice is one snapshot; a column added between two
 * writes is a schema commit before the data (its id new, the old ids kept, older rows NULL); and
 * recovery removes a staged manifest and data file at or past the committed position, never one
 * before it. icebird (npm), a third reader, reads the table too. The `onApplied` observer gets
 * each commit's result (a current-state commit's key lookup account).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { icebergRead } from 'icebird';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { WriteTarget } from '../../shared/contracts/sink.js';
import { newBatch } from '../../shared/dataplane/batch.js';
import { Op, type OpCode } from '../../shared/dataplane/metadata.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { resetIncremental } from '../../shared/engine/incremental/reset.js';
import { commitWithRetry } from '../../shared/iceberg/catalog.js';
import { MAX_SNAPSHOT_AGE_PROPERTY, MIN_SNAPSHOTS_TO_KEEP_PROPERTY } from '../../shared/iceberg/expire.js';
import { COMMIT_ID_SUMMARY_KEY, expireSnapshots } from '../../shared/iceberg/metadata.js';
import { openLakeCatalog } from '../../shared/iceberg/open-catalog.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { LakeSink } from '../../shared/sink/lake-sink.js';
import { ParquetSink } from '../../shared/sink/parquet-sink.js';
import { MemCursorStore } from '../../shared/state/mem-cursor-store.js';
import { withFileFetch } from '../harness/file-fetch.js';
import { wireRecord } from '../harness/lake-record.js';
import { readersMissing, runReaderScript } from '../harness/readers.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const V1: Schema = {
  columns: [
    { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
    { name: 'name', type: { kind: 'text' }, nullable: true, sourceType: 'text' },
  ],
  primaryKey: ['id'],
};
const V2: Schema = {
  ...V1,
  columns: [...V1.columns, { name: 'qty', type: { kind: 'int32' }, nullable: true, sourceType: 'integer' }],
};

function lake() {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-lakesink-'));
  dirs.push(dir);
  const store = new FileObjectStore(dir);
  const catalog = openLakeCatalog({ type: 'file' }, { store, prefix: '' });
  const sink = new LakeSink({
    parquet: new ParquetSink({ store }),
    catalog,
    tableProperties: { [MAX_SNAPSHOT_AGE_PROPERTY]: '3600000', [MIN_SNAPSHOTS_TO_KEEP_PROPERTY]: '3' },
  });
  return { dir, store, catalog, sink };
}

const target: WriteTarget = { table: 'public.items', writer: 'p.src', fence: 1, tableFormat: 'iceberg' };

function page(schema: Schema, seq: number, rows: Record<string, unknown>[]) {
  const posPrefix = `j${String(seq).padStart(12, '0')}`;
  return {
    start: posPrefix,
    batch: newBatch({
      table: target.table,
      record: wireRecord(schema, rows, { posPrefix }),
      watermark: undefined,
      writeMode: 'append',
    }),
  };
}

async function readTable(dir: string) {
  return runReaderScript<{ rows: Record<string, unknown>[]; schema: { id: number; name: string }[] }>(
    'read_table.py',
    ['--catalog', 'static', '--metadata', `file://${join(dir, 'public.items')}`, '--order-by', 'id'],
  );
}

describe.skipIf(readersMissing)('the lake sink on an Iceberg table', () => {
  it('creates the table with the retention properties, applies a commit once however often, evolves the schema before the data', async () => {
    const { dir, catalog, sink } = lake();
    const p1 = page(V1, 1, [
      { id: 1n, name: 'a' },
      { id: 2n, name: 'b' },
    ]);
    const refs = await sink.write(target, V1, p1.start, [p1.batch]);
    const pending = await sink.stage(target, refs);
    expect(pending).toBeDefined();
    await sink.apply(pending!);
    await sink.apply(pending!); // a second apply (recovery after a crash) is a no-op
    const loaded = await catalog.catalog.loadTable(catalog.table(target.table).ident);
    expect(loaded!.metadata.snapshots).toHaveLength(1);
    expect(loaded!.metadata.properties).toMatchObject({
      [MAX_SNAPSHOT_AGE_PROPERTY]: '3600000',
      [MIN_SNAPSHOTS_TO_KEEP_PROPERTY]: '3',
    });

    // A column added at the source: the table's schema gains it (a new id) before any file has it.
    const p2 = page(V2, 2, [{ id: 3n, name: 'c', qty: 7 }]);
    const refs2 = await sink.write(target, V2, p2.start, [p2.batch]);
    await sink.apply((await sink.stage(target, refs2))!);
    const read = await readTable(dir);
    expect(read.rows.map((r) => [r.id, r.name, r.qty])).toEqual([
      [1, 'a', null],
      [2, 'b', null],
      [3, 'c', 7],
    ]);
    const ids = Object.fromEntries(read.schema.map((f) => [f.name, f.id]));
    expect(ids.id).toBe(1);
    expect(ids.name).toBe(2);
    // qty comes after every id the first schema gave (its columns and the six metadata columns).
    expect(ids.qty).toBeGreaterThan(Math.max(...Object.values(ids).filter((v) => v !== ids.qty)));
  });

  it('builds its next commit on the table as it last committed it, and rebases when someone else committed since', async () => {
    const { dir, store, catalog, sink } = lake();
    // A second sink (another pipeline, a maintenance job) on the same lake and catalog.
    const second = new LakeSink({ parquet: new ParquetSink({ store }), catalog });
    const otherTarget: WriteTarget = { ...target, writer: 'p.other' };
    const p1 = page(V1, 1, [{ id: 1n, name: 'a' }]);
    await sink.apply((await sink.stage(target, await sink.write(target, V1, p1.start, [p1.batch])))!);
    const ident = catalog.table(target.table).ident;
    const afterFirst = (await catalog.catalog.loadTable(ident))!.version;
    // The other writer commits: this sink's remembered table is now one version behind.
    const q1 = page(V1, 1, [{ id: 10n, name: 'x' }]);
    const q1Refs = await second.write(otherTarget, V1, q1.start, [q1.batch]);
    await second.apply((await second.stage(otherTarget, q1Refs))!);
    expect((await catalog.catalog.loadTable(ident))!.version).not.toBe(afterFirst);
    const loads = vi.spyOn(catalog.catalog, 'loadTable');
    const p2 = page(V1, 2, [{ id: 2n, name: 'b' }]);
    await sink.apply((await sink.stage(target, await sink.write(target, V1, p2.start, [p2.batch])))!);
    expect(loads).toHaveBeenCalled(); // the swap on the remembered version lost: loaded, rebased
    loads.mockClear();
    const p3 = page(V1, 3, [{ id: 3n, name: 'c' }]);
    await sink.apply((await sink.stage(target, await sink.write(target, V1, p3.start, [p3.batch])))!);
    expect(loads).not.toHaveBeenCalled(); // no one else committed: built on what it remembered
    loads.mockRestore();
    const loaded = (await catalog.catalog.loadTable(ident))!;
    expect(loaded.metadata.snapshots).toHaveLength(4);
    expect((await readTable(dir)).rows.map((r) => r.id)).toEqual([1, 2, 3, 10]);
  });

  it("a stale writer's decided commit, applied by the new holder and since expired, is recognised by its position: not added twice", async () => {
    const { dir, catalog, sink } = lake();
    const ident = catalog.table(target.table).ident;
    // Writer A decides C1 (its state holds the pending commit) and stalls before its catalog commit.
    const p1 = page(V1, 1, [{ id: 1n, name: 'a' }]);
    const c1 = (await sink.stage(target, await sink.write(target, V1, p1.start, [p1.batch])))!;
    expect(c1.position).toBe(p1.start);
    // The new holder (same writer, next fence) recovers: applies C1 from the state, then commits on.
    const next = new LakeSink({ parquet: new ParquetSink({ store: new FileObjectStore(dir) }), catalog });
    const holder: WriteTarget = { ...target, fence: 2 };
    await next.apply(c1);
    for (const [seq, id] of [
      [2, 2n],
      [3, 3n],
    ] as const) {
      const p = page(V1, seq, [{ id, name: 'b' }]);
      await next.apply((await next.stage(holder, await next.write(holder, V1, p.start, [p.batch])))!);
    }
    // Retention expires C1's snapshot: no summary names it any more.
    await commitWithRetry(
      catalog.catalog,
      ident,
      { writerId: 'maintenance', commitId: 'expire-1' },
      (t) =>
        expireSnapshots(t.metadata, {
          olderThanMs: Number.MAX_SAFE_INTEGER,
          retainLast: 1,
          nowMs: Date.now(),
        }).metadata,
    );
    const expired = (await catalog.catalog.loadTable(ident))!.metadata;
    expect(expired.snapshots.map((s) => s.summary[COMMIT_ID_SUMMARY_KEY])).not.toContain(c1.commitId);
    // A wakes up and applies its decided C1: the table has it (an earlier position of the writer).
    await sink.apply(c1);
    expect((await catalog.catalog.loadTable(ident))!.metadata.snapshots).toHaveLength(
      expired.snapshots.length,
    );
    expect((await readTable(dir)).rows.map((r) => r.id)).toEqual([1, 2, 3]);
    // Why the position is recorded: without it, the same commit is not recognised and lands twice.
    const { position: _, ...unordered } = c1;
    await new LakeSink({ parquet: new ParquetSink({ store: new FileObjectStore(dir) }), catalog }).apply(
      unordered,
    );
    expect((await readTable(dir)).rows.map((r) => r.id)).toEqual([1, 1, 2, 3]);
  });

  it('a commit whose clean-up failed stands, and the sink reports it as a structured warning', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tidemark-lakesink-'));
    dirs.push(dir);
    const files = new FileObjectStore(dir);
    // A store that refuses to delete metadata files: the old ones a commit drops stay.
    const store = Object.assign(Object.create(files) as FileObjectStore, {
      delete: async (keys: readonly string[]) => {
        if (keys.some((k) => k.endsWith('.metadata.json'))) throw new Error('AccessDenied: s3:DeleteObject');
        return files.delete(keys);
      },
    });
    const catalog = openLakeCatalog({ type: 'file' }, { store, prefix: '' });
    const warnings: { message: string; fields: Readonly<Record<string, unknown>> }[] = [];
    const sink = new LakeSink({
      parquet: new ParquetSink({ store }),
      catalog,
      warn: (message, fields) => warnings.push({ message, fields }),
    });
    // Tidemark's tables keep 10 old metadata files: the 12th commit drops one.
    for (let seq = 1; seq <= 12; seq++) {
      const p = page(V1, seq, [{ id: BigInt(seq), name: 'x' }]);
      await sink.apply((await sink.stage(target, await sink.write(target, V1, p.start, [p.batch])))!);
    }
    expect(warnings.length).toBeGreaterThan(0);
    expect(warnings[0]!.message).toMatch(/metadata files left after a commit could not be deleted/);
    expect(warnings[0]!.fields).toMatchObject({
      table: '.public.items',
      error: expect.stringMatching(/AccessDenied/),
    });
    expect((await readTable(dir)).rows.map((r) => r.id)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  });

  it('a reset after a lost state that keeps the objects writes after the last commit the table records, even where no file can be listed', async () => {
    const { sink } = lake();
    for (const seq of [0, 1, 2]) {
      const p = page(V1, seq, [{ id: BigInt(seq), name: 'x' }]);
      await sink.apply((await sink.stage(target, await sink.write(target, V1, p.start, [p.batch])))!);
    }
    expect(await sink.committedPosition(target.table, target.writer)).toBe(page(V1, 2, []).start);
    // The data files cannot be listed (a table its catalog places: S3 Tables), and the state is lost.
    for (const o of await sink.list(target.table, target.writer)) rmSync(new URL(o.uri));
    expect(await sink.list(target.table, target.writer)).toEqual([]);
    const reset = (objects?: 'keep') =>
      resetIncremental({
        key: 'incremental/p/public.items',
        lake: { table: target.table, writer: target.writer },
        cursorColumn: 'id',
        store: new MemCursorStore(),
        sink,
        owner: 'operator',
        ...(objects ? { objects } : {}),
      });
    // Positions from 0 again would be taken for commits the table has: the operator must choose.
    await expect(reset()).rejects.toMatchObject({ code: 'RESET_NEEDS_CHOICE' });
    expect((await reset('keep')).nextSeq).toBe(3);
  });

  it('recovery removes the staged manifest and data file at or past the committed position, none before it', async () => {
    const { dir, sink } = lake();
    const p1 = page(V1, 1, [{ id: 1n, name: 'a' }]);
    const committed = await sink.stage(target, await sink.write(target, V1, p1.start, [p1.batch]));
    await sink.apply(committed!);
    // A crashed attempt of page 2: written and staged, never committed.
    const p2 = page(V1, 2, [{ id: 2n, name: 'b' }]);
    const orphanRefs = await sink.write(target, V1, p2.start, [p2.batch]);
    const orphan = await sink.stage(target, orphanRefs);
    const removed = await sink.recover(target, p2.start);
    expect(removed.map((r) => r.uri).sort()).toEqual([orphanRefs[0]!.uri, orphan!.manifest].sort());
    expect(existsSync(new URL(orphan!.manifest))).toBe(false);
    expect(existsSync(new URL(committed!.manifest))).toBe(true);
    expect((await readTable(dir)).rows.map((r) => r.id)).toEqual([1]);
  });
});

describe('the lake sink on an Iceberg table, read by icebird (npm)', () => {
  it('icebird reads every committed row of the table and its evolved schema', async () => {
    const { dir, sink } = lake();
    for (const [seq, schema, rows] of [
      [
        1,
        V1,
        [
          { id: 1n, name: 'a' },
          { id: 2n, name: 'b' },
        ],
      ],
      [2, V2, [{ id: 3n, name: 'c', qty: 7 }]],
    ] as const) {
      const p = page(schema, seq, [...rows]);
      await sink.apply((await sink.stage(target, await sink.write(target, schema, p.start, [p.batch])))!);
    }
    const rows = await withFileFetch(() =>
      icebergRead({ tableUrl: pathToFileURL(join(dir, 'public.items')).href }),
    );
    const got = rows
      .map((r) => [String(r.id), r.name, r.qty ?? null, r.__op])
      .sort((a, b) => String(a[0]).localeCompare(String(b[0])));
    expect(got).toEqual([
      ['1', 'a', null, 'u'],
      ['2', 'b', null, 'u'],
      ['3', 'c', 7, 'u'],
    ]);
  });
});

describe("the lake sink's onApplied observer", () => {
  it("hands each catalog commit's result to the observer: a current-state commit's key lookup and rows deleted, none for a change log", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tidemark-lakesink-observer-'));
    dirs.push(dir);
    const store = new FileObjectStore(dir);
    const seen: { table: string; lookup?: unknown; positionDeletes?: number; status: string }[] = [];
    const sink = new LakeSink({
      parquet: new ParquetSink({ store }),
      catalog: openLakeCatalog({ type: 'file' }, { store, prefix: '' }),
      onApplied: (table, result) => {
        const r = result as { lookup?: unknown; positionDeletes?: number; status: string };
        seen.push({ table, lookup: r.lookup, positionDeletes: r.positionDeletes, status: r.status });
      },
    });
    const commit = async (
      t: WriteTarget,
      seq: number,
      mode: 'upsert' | 'append',
      changes: [OpCode, number][],
    ) => {
      const posPrefix = `j${String(seq).padStart(12, '0')}`;
      const batches = changes.map(([op, id], i) =>
        newBatch({
          table: t.table,
          record: wireRecord(V1, [{ id: BigInt(id), name: `n${id}` }], { posPrefix: `${posPrefix}${i}`, op }),
          watermark: undefined,
          writeMode: mode,
        }),
      );
      await sink.apply((await sink.stage(t, await sink.write(t, V1, posPrefix, batches)))!);
    };
    const current: WriteTarget = { ...target, table: 'public.current' };
    const log: WriteTarget = { ...target, table: 'public.log' };
    await commit(current, 1, 'upsert', [
      [Op.create, 1],
      [Op.create, 2],
      [Op.create, 3],
    ]);
    await commit(current, 2, 'upsert', [
      [Op.update, 2],
      [Op.delete, 3],
      [Op.create, 4],
    ]);
    await commit(log, 1, 'append', [[Op.create, 1]]);
    // The first commit had no snapshot to look keys up in; the second found keys 2 and 3 in the one data file.
    expect(seen.map((s) => [s.table, s.status, s.positionDeletes])).toEqual([
      ['public.current', 'committed', 0],
      ['public.current', 'committed', 2],
      ['public.log', 'committed', undefined],
    ]);
    expect(seen[0]!.lookup).toBeUndefined();
    expect(seen[1]!.lookup).toMatchObject({
      dataFiles: 1,
      dataFilesRead: 1,
      dataFilesPruned: 0,
      rowsScanned: 3,
    });
    expect(seen[2]!.lookup).toBeUndefined();
  });
});
