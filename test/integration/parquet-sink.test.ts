/**
 * The Parquet sink against real stores (s3rver through the harness S3 client, and a temp
 * folder), read back with DuckDB: one object per write named by its start position and lease
 * fence, a retry by the same run (same fence) overwrites, a later run (higher fence) from the
 * same position writes beside it and never over it, recovery deletes exactly the objects of the
 * committed position's scheme at or after it, whatever their fence, and lists only from there
 * (property-tested over random position and fence sets, long hashed names and names from before
 * fences included: deleting a committed object would be data loss), and upsert writes only the
 * last change per key.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SinkError } from '../../shared/contracts/errors.js';
import type { ObjectRef } from '../../shared/contracts/sink.js';
import { type Batch, newBatch, type WriteMode } from '../../shared/dataplane/batch.js';
import { BatchEncoder } from '../../shared/dataplane/encoder.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { objectKey, positionListBound, tablePrefix } from '../../shared/sink/layout.js';
import type { ObjectStore } from '../../shared/sink/object-store.js';
import { openLakeSink } from '../../shared/sink/open-lake.js';
import { FOOTER_FENCE, FOOTER_START_POSITION, ParquetSink } from '../../shared/sink/parquet-sink.js';
import { S3ObjectStore } from '../../shared/sink/s3-object-store.js';
import { s3Client } from '../harness/aws.js';
import { testServers } from '../harness/servers.js';

/** The writer most tests write as, and a second one sharing the same lake tables. */
const W = 'test.src';
const OTHER = 'test-us.src';
/** A write target: table, writer and the writing run's lease fence. */
const at = (table: string, writer = W, fence = 1) => ({ table, writer, fence });

const SCHEMA: Schema = {
  columns: [
    { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
    { name: 'name', type: { kind: 'text' }, nullable: true, sourceType: 'text' },
  ],
  primaryKey: ['id'],
};

interface Change {
  readonly id: bigint;
  readonly name: string | null;
  readonly op: 0 | 1 | 2;
  readonly pos: string;
}

function batchOf(table: string, changes: readonly Change[], writeMode: WriteMode = 'append'): Batch {
  const enc = new BatchEncoder(SCHEMA, { phase: 'stream', capacity: changes.length + 1 });
  for (const c of changes) {
    enc.appendRow({ id: c.id, name: c.name });
    enc.appendMeta(c.op, c.pos, 1_700_000_000_000_000_001n, false);
  }
  return newBatch({
    table,
    record: enc.finish(1_700_000_000_000_000_999n),
    watermark: changes.at(-1)?.pos,
    writeMode,
  });
}

let scratch: string;
let duck: DuckDBInstance;
let conn: DuckDBConnection;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'tidemark-parquet-sink-'));
  duck = await DuckDBInstance.create(':memory:');
  conn = await duck.connect();
});
afterAll(async () => {
  conn?.closeSync();
  await rm(scratch, { recursive: true, force: true });
});

/** Reads an object's rows back with DuckDB, as `id|name|__op|__pos` text, and its footer. */
async function readBack(
  store: ObjectStore,
  key: string,
): Promise<{ rows: string[]; footerStart: string | undefined; footerFence: string | undefined }> {
  const bytes = await store.get(key);
  if (!bytes) throw new Error(`no object at ${key}`);
  const file = join(scratch, `${randomUUID()}.parquet`);
  await writeFile(file, bytes);
  const rows = await conn.runAndReadAll(
    `SELECT concat_ws('|', id::VARCHAR, coalesce(name, 'NULL'), __op, __pos) AS r FROM read_parquet('${file}') ORDER BY __pos`,
  );
  const kv = await conn.runAndReadAll(
    `SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata('${file}')`,
  );
  const footer = new Map(kv.getRowObjects().map((r) => [String(r.k), String(r.v)]));
  return {
    rows: rows.getRowObjects().map((r) => String(r.r)),
    footerStart: footer.get(FOOTER_START_POSITION),
    footerFence: footer.get(FOOTER_FENCE),
  };
}

/** An object store that records what each `list` call asked for and returned. */
class RecordingStore implements ObjectStore {
  readonly lists: { prefix: string; startAfter: string | undefined; keys: string[] }[] = [];
  constructor(private readonly inner: ObjectStore) {}
  uri(key: string): string {
    return this.inner.uri(key);
  }
  put(key: string, bytes: Uint8Array): Promise<void> {
    return this.inner.put(key, bytes);
  }
  putIfAbsent(key: string, bytes: Uint8Array): Promise<'created' | 'exists'> {
    return this.inner.putIfAbsent(key, bytes);
  }
  get(key: string): Promise<Uint8Array | undefined> {
    return this.inner.get(key);
  }
  async list(prefix: string, startAfter?: string) {
    const out = await this.inner.list(prefix, startAfter);
    this.lists.push({ prefix, startAfter, keys: out.map((o) => o.key) });
    return out;
  }
  delete(keys: readonly string[]): Promise<void> {
    return this.inner.delete(keys);
  }
}

interface StoreCase {
  readonly name: string;
  /** A fresh store and key prefix for one test. */
  make(): Promise<{ store: ObjectStore; prefix: string }>;
}

const STORES: StoreCase[] = [
  {
    name: 's3 (harness S3)',
    async make() {
      return {
        store: new S3ObjectStore({ bucket: testServers().s3Bucket, client: s3Client(), listPageSize: 3 }),
        prefix: `parquet-sink-${randomUUID()}`,
      };
    },
  },
  {
    name: 'file (temp dir)',
    async make() {
      const dir = await mkdtemp(join(scratch, 'store-'));
      return { store: new FileObjectStore(dir), prefix: 'lake' };
    },
  },
];

describe.each(STORES)('ParquetSink on $name', (storeCase) => {
  it('writes one object per write, lists in position order, and DuckDB reads the rows', async () => {
    const { store, prefix } = await storeCase.make();
    const sink = new ParquetSink({ store, prefix });
    const t = 'public.orders';
    const refs: ObjectRef[] = [];
    // Written out of order; listed in position order.
    for (const [start, id] of [
      ['i02', 2n],
      ['i00', 0n],
      ['i01', 1n],
      ['i10', 10n],
    ] as const) {
      refs.push(
        ...(await sink.write(at(t), SCHEMA, start, [
          batchOf(t, [{ id, name: `n${id}`, op: 1, pos: `${start}x` }]),
        ])),
      );
    }
    expect(refs.map((r) => r.rows)).toEqual([1, 1, 1, 1]);
    expect(refs.map((r) => r.fence)).toEqual([1, 1, 1, 1]);
    const listed = await sink.list(t);
    expect(listed.map((r) => r.uri)).toEqual(
      ['i00', 'i01', 'i02', 'i10'].map((p) => store.uri(objectKey(prefix, t, W, p, 1).key)),
    );
    expect(listed.map((r) => [r.startPosition, r.fence])).toEqual([
      ['i00', 1],
      ['i01', 1],
      ['i02', 1],
      ['i10', 1],
    ]);
    expect(listed.map((r) => r.bytes)).toEqual(
      ['i00', 'i01', 'i02', 'i10'].map(
        (p) => refs.find((r) => r.uri === store.uri(objectKey(prefix, t, W, p, 1).key))!.bytes,
      ),
    );
    expect(objectKey(prefix, t, W, 'i02', 1).key).toBe(`${tablePrefix(prefix, t)}${W}.i02.f00000001.parquet`);
    const back = await readBack(store, objectKey(prefix, t, W, 'i02', 1).key);
    expect(back).toEqual({ rows: ['2|n2|u|i02x'], footerStart: 'i02', footerFence: '1' });
    // Another table with a name that is a prefix of this one does not leak into the listing.
    await sink.write(at('public.order'), SCHEMA, 'i00', [
      batchOf('public.order', [{ id: 9n, name: null, op: 0, pos: 'i00x' }]),
    ]);
    expect(await sink.list(t)).toHaveLength(4);
    expect(await sink.write(at(t), SCHEMA, 'i20', [])).toEqual([]);
  });

  it('an object prepared ahead is stored only by the write with the same arguments; another write encodes its own', async () => {
    const { store, prefix } = await storeCase.make();
    const sink = new ParquetSink({ store, prefix });
    const encodes = vi.spyOn(sink as unknown as { encodeObject: () => unknown }, 'encodeObject');
    const t = 'public.ahead';
    const a = [batchOf(t, [{ id: 1n, name: 'prepared', op: 1, pos: 'i07a' }])];
    sink.prepare(at(t), SCHEMA, 'i07', a);
    expect(await sink.list(t)).toEqual([]); // prepared, not stored
    const [ref] = await sink.write(at(t), SCHEMA, 'i07', a);
    expect(encodes).toHaveBeenCalledTimes(1); // the write took the prepared object
    expect((await readBack(store, objectKey(prefix, t, W, 'i07', 1).key)).rows).toEqual([
      '1|prepared|u|i07a',
    ]);
    expect(ref!.rows).toBe(1);

    // Prepared for other batches (or another position or fence): the write encodes its own.
    sink.prepare(at(t), SCHEMA, 'i08', [batchOf(t, [{ id: 2n, name: 'stale', op: 1, pos: 'i08a' }])]);
    await sink.write(at(t), SCHEMA, 'i08', [batchOf(t, [{ id: 2n, name: 'fresh', op: 1, pos: 'i08b' }])]);
    sink.prepare(at(t), SCHEMA, 'i09', a);
    await sink.write(at(t, W, 2), SCHEMA, 'i09', a);
    expect(encodes).toHaveBeenCalledTimes(5);
    expect((await readBack(store, objectKey(prefix, t, W, 'i08', 1).key)).rows).toEqual(['2|fresh|u|i08b']);
    expect((await sink.list(t)).map((r) => [r.startPosition, r.fence])).toEqual([
      ['i07', 1],
      ['i08', 1],
      ['i09', 2],
    ]);
  });

  it('objects prepared for two pages ahead are each taken by their own write', async () => {
    const { store, prefix } = await storeCase.make();
    const sink = new ParquetSink({ store, prefix });
    const encodes = vi.spyOn(sink as unknown as { encodeObject: () => unknown }, 'encodeObject');
    const t = 'public.twoahead';
    const b = (id: bigint, pos: string) => [batchOf(t, [{ id, name: pos, op: 1, pos }])];
    const [p10, p11, p12] = [b(10n, 'i10a'), b(11n, 'i11a'), b(12n, 'i12a')];
    sink.warm(at(t), SCHEMA); // encodes and stores nothing
    sink.prepare(at(t), SCHEMA, 'i10', p10);
    sink.prepare(at(t), SCHEMA, 'i11', p11);
    sink.prepare(at(t), SCHEMA, 'i12', p12);
    expect(await sink.list(t)).toEqual([]);
    await sink.write(at(t), SCHEMA, 'i10', p10);
    await sink.write(at(t), SCHEMA, 'i11', p11);
    await sink.write(at(t), SCHEMA, 'i12', p12);
    expect(encodes).toHaveBeenCalledTimes(3); // every write took its prepared object
    for (const [pos, name] of [
      ['i10', '10|i10a|u|i10a'],
      ['i11', '11|i11a|u|i11a'],
      ['i12', '12|i12a|u|i12a'],
    ] as const)
      expect((await readBack(store, objectKey(prefix, t, W, pos, 1).key)).rows).toEqual([name]);
  });

  it('a retry by the same run (same fence) overwrites; a later run (higher fence) from the same position writes beside it', async () => {
    const { store, prefix } = await storeCase.make();
    const sink = new ParquetSink({ store, prefix, compression: 'snappy' });
    const t = 'public.retry';
    const keyOf = (fence: number) => objectKey(prefix, t, W, 'i05', fence).key;
    await sink.write(at(t, W, 1), SCHEMA, 'i05', [
      batchOf(t, [{ id: 1n, name: 'first attempt', op: 1, pos: 'i05a' }]),
    ]);
    const retry = await sink.write(at(t, W, 1), SCHEMA, 'i05', [
      batchOf(t, [
        { id: 1n, name: 'second attempt', op: 1, pos: 'i05a' },
        { id: 2n, name: null, op: 2, pos: 'i05b' },
      ]),
    ]);
    const listed = await sink.list(t);
    expect(listed.map((r) => r.uri)).toEqual([retry[0]!.uri]);
    expect(listed[0]!.bytes).toBe(retry[0]!.bytes);
    expect((await readBack(store, keyOf(1))).rows).toEqual(['1|second attempt|u|i05a', '2|NULL|d|i05b']);

    // The run never committed. The next run (fence 2) recovers from the same committed position
    // before it writes, which removes the uncommitted object, then writes its own.
    expect((await sink.recover(at(t), 'i05')).map((r) => [r.startPosition, r.fence])).toEqual([['i05', 1]]);
    const next = await sink.write(at(t, W, 2), SCHEMA, 'i05', [
      batchOf(t, [{ id: 1n, name: 'new holder', op: 1, pos: 'i05c' }]),
    ]);
    expect(next[0]).toMatchObject({ uri: store.uri(keyOf(2)), startPosition: 'i05', fence: 2 });

    // The run of fence 1 was only stalled: its late PUT from the same position takes its own
    // name, and the new holder's object stays exactly as written.
    await sink.write(at(t, W, 1), SCHEMA, 'i05', [
      batchOf(t, [{ id: 1n, name: 'stale', op: 1, pos: 'i05a' }]),
    ]);
    expect((await sink.list(t, W)).map((r) => [r.startPosition, r.fence, r.bytes])).toEqual([
      ['i05', 1, expect.any(Number)],
      ['i05', 2, next[0]!.bytes],
    ]);
    expect((await readBack(store, keyOf(2))).rows).toEqual(['1|new holder|u|i05c']);
    expect((await readBack(store, keyOf(1))).rows).toEqual(['1|stale|u|i05a']);
    // A fence is required: no write may produce a name without one.
    for (const fence of [0, -1, 1.5, 2 ** 32, Number.NaN, undefined]) {
      await expect(
        sink.write({ table: t, writer: W, fence } as never, SCHEMA, 'i06', [
          batchOf(t, [{ id: 3n, name: 'x', op: 1, pos: 'i06a' }]),
        ]),
        String(fence),
      ).rejects.toMatchObject({ code: 'SINK_FENCE' });
    }
  });

  it('upsert writes only the max-__pos change per key, deletes kept; append keeps every change', async () => {
    const { store, prefix } = await storeCase.make();
    const sink = new ParquetSink({ store, prefix });
    const t = 'public.upserts';
    const changes: Change[][] = [
      [
        { id: 1n, name: 'v1', op: 0, pos: 'p001' },
        { id: 1n, name: 'v3', op: 1, pos: 'p003' },
        { id: 2n, name: 'born', op: 0, pos: 'p004' },
        { id: 1n, name: 'v2', op: 1, pos: 'p002' },
      ],
      [
        { id: 2n, name: 'gone', op: 2, pos: 'p005' },
        { id: 3n, name: 'only', op: 1, pos: 'p006' },
      ],
    ];
    const [ref] = await sink.write(
      at(t),
      SCHEMA,
      'p001',
      changes.map((c) => batchOf(t, c, 'upsert')),
    );
    expect(ref!.rows).toBe(3);
    expect((await readBack(store, objectKey(prefix, t, W, 'p001', 1).key)).rows).toEqual([
      '1|v3|u|p003',
      '2|gone|d|p005',
      '3|only|u|p006',
    ]);
    const [appended] = await sink.write(
      at(t),
      SCHEMA,
      'p002',
      changes.map((c) => batchOf(t, c, 'append')),
    );
    expect(appended!.rows).toBe(6);
    await expect(
      sink.write(at(t), SCHEMA, 'p003', [
        batchOf(t, changes[0]!, 'upsert'),
        batchOf(t, changes[1]!, 'append'),
      ]),
    ).rejects.toThrow(/mix write modes/);
    await expect(sink.write(at(t), SCHEMA, 'p003', [batchOf('public.other', changes[0]!)])).rejects.toThrow(
      SinkError,
    );
    const noKey: Schema = { ...SCHEMA, primaryKey: [] };
    await expect(sink.write(at(t), noKey, 'p003', [batchOf(t, changes[0]!, 'upsert')])).rejects.toThrow(
      /no primary key/,
    );
  });

  it('recover deletes exactly the objects of the committed scheme at or after the committed position, any fence, listing only from there', async () => {
    const { store: inner, prefix } = await storeCase.make();
    const store = new RecordingStore(inner);
    const sink = new ParquetSink({ store, prefix, compression: 'snappy' });
    const chars = (set: string, min: number, max: number) =>
      fc.array(fc.constantFrom(...set.split('')), { minLength: min, maxLength: max }).map((c) => c.join(''));
    // Short positions over a tiny alphabet collide on prefixes; long ones (shortened to
    // prefix~hash + sidecar) share a stem longer than the visible prefix. First letters 0, a, m
    // and z stand for schemes: recovery only judges the committed position's.
    const positions = fc.oneof(
      chars('0az', 1, 4),
      fc.tuple(fc.constant('m'.repeat(85)), chars('0az', 16, 24)).map(([s, t]) => s + t),
    );
    // Each start position written by one to three runs (fences), or before fences (no fence).
    const fences = fc.uniqueArray(
      fc.constantFrom<number | undefined>(undefined, 1, 2, 7, 0x10, 2 ** 32 - 1),
      {
        minLength: 1,
        maxLength: 3,
      },
    );
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(fc.tuple(positions, fences), { minLength: 1, maxLength: 7, selector: ([p]) => p }),
        positions,
        fc.boolean(),
        async (written, other, useExisting) => {
          const t = `public.recover_${run++}`;
          const versions = written.flatMap(([s, fs]) => fs.map((fence) => ({ s, fence })));
          for (const { s, fence } of versions) {
            const rows = [batchOf(t, [{ id: 1n, name: s.slice(0, 5), op: 1, pos: `${s}0` }])];
            if (fence !== undefined) {
              await sink.write(at(t, W, fence), SCHEMA, s, rows);
            } else {
              // An object named before fences: the same layout without the fence part.
              const legacy = objectKey(prefix, t, W, s, undefined);
              if (legacy.sidecarKey) await store.put(legacy.sidecarKey, Buffer.from(s));
              await store.put(legacy.key, Buffer.from('written before fences'));
            }
          }
          // Another writer of the same lake table (a second pipeline or shard), with objects at
          // the same and at later positions, and an object named before writers were named.
          for (const s of [...written.map(([p]) => p), other]) {
            await sink.write(at(t, OTHER, 3), SCHEMA, s, [
              batchOf(t, [{ id: 2n, name: 'other writer', op: 1, pos: `${s}0` }]),
            ]);
          }
          const dir = tablePrefix(prefix, t);
          const othersBefore = (await store.list(dir)).filter(
            (o) => o.key.includes(`/${OTHER}.`) || o.key.includes(`/_${OTHER}.`),
          );
          await store.put(`${dir}notes.txt`, Buffer.from('not ours'));
          await store.put(`${dir}sub/i00.parquet`, Buffer.from('not ours either'));
          await store.put(`${dir}i00.parquet`, Buffer.from('a name without a writer'));
          const committed = useExisting ? written[Math.floor(written.length / 2)]![0] : other;
          const keyOf = (v: { s: string; fence: number | undefined }) =>
            objectKey(prefix, t, W, v.s, v.fence);
          const order = (
            a: { s: string; fence: number | undefined },
            b: { s: string; fence: number | undefined },
          ) => (a.s < b.s ? -1 : a.s > b.s ? 1 : 0) || (a.fence ?? 0) - (b.fence ?? 0);
          store.lists.length = 0;
          const removed = await sink.recover(at(t), committed);
          // The rule: same scheme (first letter) and at or after the committed position.
          const doomed = (v: { s: string }) => v.s[0] === committed[0] && v.s >= committed;
          const expectRemoved = versions.filter(doomed).sort(order);
          const expectKept = versions.filter((v) => !doomed(v)).sort(order);
          expect(removed.map((r) => r.uri).sort()).toEqual(
            expectRemoved.map((v) => store.uri(keyOf(v).key)).sort(),
          );
          expect(removed.map((r) => r.fence).sort()).toEqual(expectRemoved.map((v) => v.fence).sort());
          // Recovery listed this writer's names from the committed position on, never the folder:
          // no plain name of a position before it was even returned.
          expect(store.lists.map((l) => l.startAfter)).toEqual([
            positionListBound(prefix, t, W, committed),
            positionListBound(prefix, t, W, committed, true),
          ]);
          for (const v of versions.filter((x) => x.s < committed && !keyOf(x).sidecarKey))
            for (const l of store.lists) expect(l.keys).not.toContain(keyOf(v).key);
          const listed = await sink.list(t, W);
          expect(listed.map((r) => r.uri)).toEqual(expectKept.map((v) => store.uri(keyOf(v).key)));
          expect(listed.map((r) => [r.startPosition, r.fence])).toEqual(
            expectKept.map((v) => [v.s, v.fence]),
          );
          // Sidecars go with their objects; foreign objects stay.
          const keys = (await store.list(dir)).map((o) => o.key);
          const sidecars = (vs: typeof versions) => vs.flatMap((v) => keyOf(v).sidecarKey ?? []);
          for (const k of sidecars(expectRemoved)) expect(keys).not.toContain(k);
          for (const k of sidecars(expectKept)) expect(keys).toContain(k);
          expect(keys).toContain(`${dir}notes.txt`);
          expect(keys).toContain(`${dir}sub/i00.parquet`);
          expect(keys).toContain(`${dir}i00.parquet`);
          // Not one object or sidecar of the other writer was touched.
          for (const o of othersBefore) expect(keys).toContain(o.key);
          // Recovery is idempotent.
          expect(await sink.recover(at(t), committed)).toEqual([]);
        },
      ),
      { numRuns: storeCase.name.startsWith('s3') ? 25 : 60 },
    );
    // An empty position has no scheme: recovery refuses it rather than judge every object.
    await expect(sink.recover(at('public.recover_empty'), '')).rejects.toMatchObject({
      code: 'SINK_START_POSITION',
    });
  });

  it('recovery of a long history lists only what lies past the committed position', async () => {
    const { store: inner, prefix } = await storeCase.make();
    const store = new RecordingStore(inner);
    const sink = new ParquetSink({ store, prefix });
    const t = 'public.history';
    // 40 committed pages of the incremental scheme, a legacy `i` page, and a leftover at page 40.
    const pos = (seq: number, fence: number) =>
      `j${seq.toString(16).padStart(12, '0')}${fence.toString(16).padStart(8, '0')}`;
    const legacy = objectKey(prefix, t, W, 'i00000000000000000000', undefined).key;
    await store.put(legacy, Buffer.from('written before fences'));
    for (let seq = 0; seq <= 40; seq++) {
      await sink.write(at(t, W, 3), SCHEMA, pos(seq, 3), [
        batchOf(t, [{ id: BigInt(seq), name: 'p', op: 1, pos: `${pos(seq, 3)}00000000` }]),
      ]);
    }
    store.lists.length = 0;
    const committed = `j${(40).toString(16).padStart(12, '0')}`;
    const removed = await sink.recover(at(t), committed);
    expect(removed.map((r) => r.startPosition)).toEqual([pos(40, 3)]);
    expect(store.lists.flatMap((l) => l.keys)).toEqual([objectKey(prefix, t, W, pos(40, 3), 3).key]);
    const kept = await sink.list(t, W);
    expect(kept).toHaveLength(41);
    expect(kept[0]).toMatchObject({ startPosition: 'i00000000000000000000' });
    expect(kept[0]!.fence).toBeUndefined();
  });

  it('two writers share a lake table: each lists, recovers and discards only its own objects', async () => {
    const { store, prefix } = await storeCase.make();
    const sink = new ParquetSink({ store, prefix });
    const t = 'public.sharded';
    for (const [writer, id] of [
      [W, 1n],
      [OTHER, 2n],
    ] as const) {
      for (const start of ['i00', 'i01', 'i02']) {
        await sink.write(at(t, writer), SCHEMA, start, [
          batchOf(t, [{ id, name: writer, op: 1, pos: `${start}0` }]),
        ]);
      }
    }
    // Same start positions, two objects each: names carry the writer.
    expect((await sink.list(t)).map((r) => [r.writer, r.startPosition])).toEqual([
      [OTHER, 'i00'],
      [OTHER, 'i01'],
      [OTHER, 'i02'],
      [W, 'i00'],
      [W, 'i01'],
      [W, 'i02'],
    ]);
    const removed = await sink.recover(at(t, W), 'i01');
    expect(removed.map((r) => r.startPosition)).toEqual(['i01', 'i02']);
    expect((await sink.list(t, OTHER)).map((r) => r.startPosition)).toEqual(['i00', 'i01', 'i02']);
    expect((await sink.list(t, W)).map((r) => r.startPosition)).toEqual(['i00']);
    // A writer whose name is a prefix of another's ("test" vs "test-us") never sees the other's.
    expect(await sink.list(t, 'test.s')).toEqual([]);
    const discarded = await sink.discard(at(t, OTHER));
    expect(discarded).toHaveLength(3);
    expect((await sink.list(t)).map((r) => [r.writer, r.startPosition])).toEqual([[W, 'i00']]);
    expect((await readBack(store, objectKey(prefix, t, W, 'i00', 1).key)).rows).toEqual([`1|${W}|u|i000`]);
  });

  it('refuses to guess when a shortened name cannot be placed without its sidecar', async () => {
    const { store, prefix } = await storeCase.make();
    const sink = new ParquetSink({ store, prefix });
    const t = 'public.long';
    const stem = 'm'.repeat(110);
    await sink.write(at(t), SCHEMA, `${stem}a`, [
      batchOf(t, [{ id: 1n, name: 'committed', op: 1, pos: `${stem}a0` }]),
    ]);
    await sink.write(at(t), SCHEMA, `${stem}c`, [
      batchOf(t, [{ id: 2n, name: 'leftover', op: 1, pos: `${stem}c0` }]),
    ]);
    const { key: committedKey, sidecarKey } = objectKey(prefix, t, W, `${stem}a`, 1);
    // The fence follows the hash: the sidecar's name is the object's stem, fence included.
    expect(committedKey).toMatch(/~[0-9a-f]{16}\.f00000001\.parquet$/);
    expect(sidecarKey).toMatch(/\/_test\.src\.m{80}~[0-9a-f]{16}\.f00000001\.pos$/);
    await store.delete([sidecarKey!]);
    const err = await sink.recover(at(t), `${stem}b`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SinkError);
    expect((err as SinkError).code).toBe('SINK_SIDECAR_MISSING');
    expect(await sink.list(t)).toHaveLength(2);
    // An orphan sidecar (crash between the two PUTs) at/after the committed position goes.
    const orphan = objectKey(prefix, t, W, `${stem}z`, 2).sidecarKey!;
    await store.put(orphan, Buffer.from(`${stem}z`));
    await store.put(sidecarKey!, Buffer.from(`${stem}a`));
    const removed = await sink.recover(at(t), `${stem}b`);
    expect(removed.map((r) => r.uri)).toEqual([store.uri(objectKey(prefix, t, W, `${stem}c`, 1).key)]);
    expect((await store.list(tablePrefix(prefix, t))).map((o) => o.key)).toEqual(
      [committedKey, sidecarKey!].sort(),
    );
  });
});

describe('object stores', () => {
  it('S3: lists across pages and deletes in bulk', async () => {
    const store = new S3ObjectStore({ bucket: testServers().s3Bucket, client: s3Client(), listPageSize: 2 });
    const prefix = `paging-${randomUUID()}/`;
    const keys = Array.from({ length: 7 }, (_, i) => `${prefix}k${i}`);
    for (const k of keys) await store.put(k, Buffer.from(k));
    expect((await store.list(prefix)).map((o) => o.key)).toEqual(keys);
    expect(Buffer.from((await store.get(keys[3]!))!).toString()).toBe(keys[3]);
    expect(await store.get(`${prefix}missing`)).toBeUndefined();
    await store.delete([...keys.slice(0, 5), `${prefix}missing`]);
    expect((await store.list(prefix)).map((o) => o.key)).toEqual(keys.slice(5));
  });

  it('list(prefix, startAfter) returns only the keys after startAfter: S3 across pages, a folder by filtering', async () => {
    const dir = await mkdtemp(join(scratch, 'after-'));
    const stores: [string, ObjectStore, string][] = [
      [
        's3',
        new S3ObjectStore({ bucket: testServers().s3Bucket, client: s3Client(), listPageSize: 2 }),
        `after-${randomUUID()}/`,
      ],
      ['file', new FileObjectStore(dir), 'after/'],
    ];
    for (const [name, store, prefix] of stores) {
      const keys = ['a.0', 'a.1', 'a.1.x', 'a.2', 'a.20', 'a.3', 'b.0', 'sub/a.9'].map(
        (k) => `${prefix}${k}`,
      );
      for (const k of keys) await store.put(k, Buffer.from(k));
      const listAfter = async (p: string, start?: string) =>
        (await store.list(prefix + p, start)).map((o) => o.key);
      expect(await listAfter('a.', undefined), name).toEqual(keys.slice(0, 6));
      // An existing key is excluded, a key that does not exist bounds just the same.
      expect(await listAfter('a.', `${prefix}a.1`), name).toEqual(keys.slice(2, 6));
      expect(await listAfter('a.', `${prefix}a.1.w`), name).toEqual(keys.slice(2, 6));
      expect(await listAfter('a.', `${prefix}a.2`), name).toEqual(keys.slice(4, 6));
      // Below the prefix: everything; past its last key: nothing; the prefix still applies.
      expect(await listAfter('a.', prefix), name).toEqual(keys.slice(0, 6));
      expect(await listAfter('a.', `${prefix}a.3`), name).toEqual([]);
      expect(await listAfter('', `${prefix}a.3`), name).toEqual(keys.slice(6));
    }
  });

  it('file: hides temp files of a crashed put and never leaves its root', async () => {
    const dir = await mkdtemp(join(scratch, 'files-'));
    const store = new FileObjectStore(dir);
    await store.put('a/b/x.parquet', Buffer.from('x'));
    await mkdir(join(dir, 'a', 'b'), { recursive: true });
    await writeFile(join(dir, 'a', 'b', '.y.parquet.0011aa.tmp'), 'partial');
    expect(await store.list('a/')).toEqual([{ key: 'a/b/x.parquet', size: 1 }]);
    expect(await store.list('a/b/x')).toEqual([{ key: 'a/b/x.parquet', size: 1 }]);
    expect(await store.list('nothing/')).toEqual([]);
    await expect(store.put('../escape', Buffer.from('x'))).rejects.toThrow(/clean relative path/);
    expect(store.uri('a/b/%41.parquet')).toBe(`file://${dir}/a/b/%2541.parquet`);
  });

  it('openLakeSink picks the store from the lake URI', async () => {
    const dir = await mkdtemp(join(scratch, 'lake-'));
    const sink = openLakeSink({ uri: `file://${dir}` });
    const [ref] = await sink.write(at('public.t'), SCHEMA, 'i01', [
      batchOf('public.t', [{ id: 1n, name: 'x', op: 1, pos: 'i010' }]),
    ]);
    expect(ref!.uri).toBe(`file://${dir}/public.t/${W}.i01.f00000001.parquet`);
    const s3 = openLakeSink({
      uri: `s3://${testServers().s3Bucket}/via-uri-${randomUUID()}`,
      client: s3Client(),
    });
    const [s3ref] = await s3.write(at('public.t'), SCHEMA, 'i01', [
      batchOf('public.t', [{ id: 1n, name: 'x', op: 1, pos: 'i010' }]),
    ]);
    expect(s3ref!.uri).toMatch(
      new RegExp(
        `^s3://${testServers().s3Bucket}/via-uri-[0-9a-f-]+/public\\.t/test\\.src\\.i01\\.f00000001\\.parquet$`,
      ),
    );
    expect(() => openLakeSink({ uri: 'gs://bucket' })).toThrow(/neither/);
  });
});
