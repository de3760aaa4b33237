/**
 * The contract every driver's SnapshotSource and TableChunker keep (shared/contracts/snapshot.ts,
 * docs/decisions/0013-snapshots.md), written once against a SnapshotFixture so every driver runs
 * the same assertions on a real server:
 *   a. chunks from repeated nextBound + read cover every row exactly once, each chunk in the
 *      database's key order, for an int key, a text key under a collation whose order is not
 *      JavaScript's, and a composite (text, int) key, on random key sets (fast-check); each bound
 *      closes a range of exactly `rows` rows and is its last row's key;
 *   b. a chunk's batch equals an incremental page of the same rows (same wire types, same bytes),
 *      its metadata columns are the snapshot's, its lastKey the page's resume token;
 *   c. a table without a primary key is refused, saying what to do.
 * How a chunk sits in a running stream (watermarks, rowsPos, what the snapshot cannot see) is
 * each driver's own and stays in its snapshot test file.
 */
import { type RecordBatch, Table, tableToIPC } from 'apache-arrow';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { TidemarkError } from '../../../shared/contracts/errors.js';
import { decodeKey } from '../../../shared/position/key-codec.js';
import { incrementalPosPrefix } from '../../../shared/position/position.js';
import { INGEST_NS } from './fixture.js';
import {
  type ChunkedTable,
  column,
  type KeyCase,
  readAll,
  recordingWindow,
  type SnapshotFixture,
  T,
  windowIds,
} from './snapshot-fixture.js';

/** The snapshot contract scenarios on `fx`, which the test file sets up in its beforeAll. */
export function snapshotContractScenarios(name: string, fx: SnapshotFixture): void {
  describe(`${name}: snapshot contract`, () => {
    describe('bounds and chunks partition the table exactly, in the database order', () => {
      for (const c of fx.keyCases) it(c.name, T, () => partitions(fx, c));
    });
    describe('a chunk is an incremental page of the same rows', () => {
      it('same wire types and bytes; snapshot metadata; lastKey', T, () => chunkIsPage(fx));
    });
    describe('refusals say what to do', () => {
      it('a table without a primary key', T, async () => {
        await fx.exec(fx.noKey.ddl);
        const t = await fx.tableOf(fx.noKey.table);
        const e = await t.chunker.nextBound(undefined, 10).then(
          () => undefined,
          (x: unknown) => x,
        );
        expect(e).toBeInstanceOf(fx.noKey.error);
        expect((e as TidemarkError).code).toBe(fx.noKey.code);
        for (const says of fx.noKey.says) expect((e as Error).message).toMatch(says);
      });
    });
  });
}

async function partitions(fx: SnapshotFixture, c: KeyCase): Promise<void> {
  await fx.exec(c.ddl);
  const t: ChunkedTable = await fx.tableOf(c.table);
  const key = t.ref.primaryKey;
  const keyTypes = key.map((k) => t.schema.columns.find((col) => col.name === k)!.type);
  const keyOf = (rb: RecordBatch, i: number) => key.map((k) => String(column(rb, k)[i])).join('\t');
  const dbOrder = async () =>
    (await fx.query(`SELECT ${key.join(', ')} FROM ${c.table} ORDER BY ${key.join(', ')}`)).map((r) =>
      key.map((k) => String(r[k])).join('\t'),
    );
  /** Reads the table with bounds of `rows` rows and reads of at most `limit`, against `expected`. */
  const readsExactly = async (expected: readonly string[], rows: number, limit: number) => {
    const { chunks, bounds, lastKeys } = await readAll(t, rows, limit, keyOf);
    // Every row once, in the database's order, chunk after chunk.
    expect(chunks.flat()).toEqual(expected);
    // Every bound but the last closes a range of exactly `rows` rows and is its last row's key.
    expect(bounds.length).toBe(Math.floor(expected.length / rows) + 1);
    bounds.slice(0, -1).forEach((b, i) => {
      expect(decodeKey(keyTypes, b!).map(String).join('\t')).toBe(expected[(i + 1) * rows - 1]);
      expect(lastKeys[i]).toBe(b);
    });
    expect(bounds.at(-1)).toBeUndefined();
  };
  if (c.fixed) {
    // A fixed set first, where the database's order is known not to be JavaScript's.
    await c.fill(c.fixed.keys);
    const order = await dbOrder();
    c.fixed.expectOrder(order);
    await readsExactly(order, c.fixed.rows, c.fixed.limit);
  }
  await fc.assert(
    fc.asyncProperty(c.keys, c.sizes, async (keys, { rows, limit }) => {
      await c.fill(keys);
      await readsExactly(await dbOrder(), rows, limit);
    }),
    { numRuns: 12 },
  );
  if (fx.estimatesUnanalyzed) expect(await t.chunker.estimateRows!()).toBeTypeOf('number');
}

async function chunkIsPage(fx: SnapshotFixture): Promise<void> {
  const c = fx.chunkPage;
  await fx.exec(c.ddl);
  const t = await fx.tableOf(c.table);
  const inc = fx.incrementalSource();
  const pageOf = () =>
    inc.incrementalBatch({
      table: t.ref,
      cursorColumn: 'id',
      after: '',
      pageSize: 1000,
      posPrefix: incrementalPosPrefix(1, 1),
      ordinalBase: 0,
      schema: t.schema,
      writeMode: 'upsert',
    });
  // The incremental bound waits for every open transaction on a shared server: another test
  // file's open transaction can hold the page back for a while.
  let page = await pageOf();
  for (let i = 0; i < fx.pageRetries && page.page?.record.numRows !== c.rows; i++) {
    await new Promise((r) => setTimeout(r, 500));
    page = await pageOf();
  }
  const w = recordingWindow();
  const ids = windowIds();
  await t.chunker.read({ range: {}, limit: 1000, schema: t.schema, writeMode: 'upsert' }, w, ids);
  c.expectWindow(w, ids);
  const r = w.rows!;
  expect(r.rows).toBe(c.rows);
  expect(r.lastKey).toBe(page.next);
  expect(decodeKey([{ kind: 'int64' }], r.lastKey!)).toEqual([BigInt(c.rows)]);
  const chunk = r.batch!;
  expect(chunk.table).toBe(`${fx.schema}.${c.table}`);
  expect(chunk.writeMode).toBe('upsert');
  expect(chunk.watermark).toBeUndefined();
  const names = t.schema.columns.map((col) => col.name);
  const pageRecord = page.page!.record;
  expect(chunk.record.numRows).toBe(pageRecord.numRows);
  for (const name of names) {
    const a = chunk.record.schema.fields.find((f) => f.name === name)!;
    const b = pageRecord.schema.fields.find((f) => f.name === name)!;
    expect(String(a.type)).toBe(String(b.type));
    expect(column(chunk.record, name)).toEqual(column(pageRecord, name));
  }
  const data = (rb: RecordBatch) => Buffer.from(tableToIPC(new Table(rb).select(names)));
  expect(data(chunk.record).equals(data(pageRecord))).toBe(true);
  // The metadata of a snapshot chunk.
  const n = chunk.record.numRows;
  expect(column(chunk.record, '__op')).toEqual(Array(n).fill(0));
  expect(column(chunk.record, '__pos')).toEqual(Array(n).fill(''));
  expect(column(chunk.record, '__commit_ts')).toEqual(Array(n).fill(null));
  const ingest = chunk.record.getChild('__ingest_ts')!.data[0]!.values as BigInt64Array;
  expect(Array.from(ingest)).toEqual(Array(n).fill(INGEST_NS));
  expect(column(chunk.record, '__ingest_ts').map(String)).toEqual(
    column(pageRecord, '__ingest_ts').map(String),
  );
  expect(column(chunk.record, '__snapshot')).toEqual(Array(n).fill(true));
  expect(column(chunk.record, '__phase')).toEqual(Array(n).fill('snapshot'));
}
