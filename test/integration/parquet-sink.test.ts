/**
 * The Parquet sink against real stores (s3rver through the harness S3 client, and a temp
 * folder), read back with DuckDB: one object per write named by its start position, a retry from
 * the same position overwrites, recovery deletes exactly the objects at or after the committed
 * position (property-tested over random position sets, long hashed names included: deleting a
 * committed object would be data loss), and upsert writes only the last change per key.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SinkError } from '../../shared/contracts/errors.js';
import type { ObjectRef } from '../../shared/contracts/sink.js';
import { type Batch, newBatch, type WriteMode } from '../../shared/dataplane/batch.js';
import { BatchEncoder } from '../../shared/dataplane/encoder.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { objectKey, tablePrefix } from '../../shared/sink/layout.js';
import type { ObjectStore } from '../../shared/sink/object-store.js';
import { openLakeSink } from '../../shared/sink/open-lake.js';
import { FOOTER_START_POSITION, ParquetSink } from '../../shared/sink/parquet-sink.js';
import { S3ObjectStore } from '../../shared/sink/s3-object-store.js';
import { s3Client } from '../harness/aws.js';
import { testServers } from '../harness/servers.js';

/** The writer most tests write as, and a second one sharing the same lake tables. */
const W = 'test.src';
const OTHER = 'test-us.src';
const at = (table: string, writer = W) => ({ table, writer });

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

/** Reads an object's rows back with DuckDB, as `id|name|__op|__pos` text. */
async function readBack(
  store: ObjectStore,
  key: string,
): Promise<{ rows: string[]; footerStart: string | undefined }> {
  const bytes = await store.get(key);
  if (!bytes) throw new Error(`no object at ${key}`);
  const file = join(scratch, `${randomUUID()}.parquet`);
  await writeFile(file, bytes);
  const rows = await conn.runAndReadAll(
    `SELECT concat_ws('|', id::VARCHAR, coalesce(name, 'NULL'), __op, __pos) AS r FROM read_parquet('${file}') ORDER BY __pos`,
  );
  const kv = await conn.runAndReadAll(
    `SELECT decode(value) AS v FROM parquet_kv_metadata('${file}') WHERE decode(key) = '${FOOTER_START_POSITION}'`,
  );
  return {
    rows: rows.getRowObjects().map((r) => String(r.r)),
    footerStart: kv.getRowObjects()[0]?.v as string | undefined,
  };
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
    const listed = await sink.list(t);
    expect(listed.map((r) => r.uri)).toEqual(
      ['i00', 'i01', 'i02', 'i10'].map((p) => store.uri(objectKey(prefix, t, W, p).key)),
    );
    expect(listed.map((r) => r.bytes)).toEqual(
      ['i00', 'i01', 'i02', 'i10'].map(
        (p) => refs.find((r) => r.uri === store.uri(objectKey(prefix, t, W, p).key))!.bytes,
      ),
    );
    const back = await readBack(store, objectKey(prefix, t, W, 'i02').key);
    expect(back).toEqual({ rows: ['2|n2|u|i02x'], footerStart: 'i02' });
    // Another table with a name that is a prefix of this one does not leak into the listing.
    await sink.write(at('public.order'), SCHEMA, 'i00', [
      batchOf('public.order', [{ id: 9n, name: null, op: 0, pos: 'i00x' }]),
    ]);
    expect(await sink.list(t)).toHaveLength(4);
    expect(await sink.write(at(t), SCHEMA, 'i20', [])).toEqual([]);
  });

  it('overwrites the object of an earlier attempt from the same start position', async () => {
    const { store, prefix } = await storeCase.make();
    const sink = new ParquetSink({ store, prefix, compression: 'snappy' });
    const t = 'public.retry';
    await sink.write(at(t), SCHEMA, 'i05', [batchOf(t, [{ id: 1n, name: 'first attempt', op: 1, pos: 'i05a' }])]);
    const second = await sink.write(at(t), SCHEMA, 'i05', [
      batchOf(t, [
        { id: 1n, name: 'second attempt', op: 1, pos: 'i05a' },
        { id: 2n, name: null, op: 2, pos: 'i05b' },
      ]),
    ]);
    const listed = await sink.list(t);
    expect(listed.map((r) => r.uri)).toEqual([second[0]!.uri]);
    expect(listed[0]!.bytes).toBe(second[0]!.bytes);
    expect((await readBack(store, objectKey(prefix, t, W, 'i05').key)).rows).toEqual([
      '1|second attempt|u|i05a',
      '2|NULL|d|i05b',
    ]);
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
    expect((await readBack(store, objectKey(prefix, t, W, 'p001').key)).rows).toEqual([
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
      sink.write(at(t), SCHEMA, 'p003', [batchOf(t, changes[0]!, 'upsert'), batchOf(t, changes[1]!, 'append')]),
    ).rejects.toThrow(/mix write modes/);
    await expect(sink.write(at(t), SCHEMA, 'p003', [batchOf('public.other', changes[0]!)])).rejects.toThrow(
      SinkError,
    );
    const noKey: Schema = { ...SCHEMA, primaryKey: [] };
    await expect(sink.write(at(t), noKey, 'p003', [batchOf(t, changes[0]!, 'upsert')])).rejects.toThrow(
      /no primary key/,
    );
  });

  it('recover deletes exactly the objects starting at or after the committed position', async () => {
    const { store, prefix } = await storeCase.make();
    const sink = new ParquetSink({ store, prefix, compression: 'snappy' });
    const chars = (set: string, min: number, max: number) =>
      fc.array(fc.constantFrom(...set.split('')), { minLength: min, maxLength: max }).map((c) => c.join(''));
    // Short positions over a tiny alphabet collide on prefixes; long ones (shortened to
    // prefix~hash + sidecar) share a stem longer than the visible prefix.
    const positions = fc.oneof(
      chars('0az', 1, 4),
      fc.tuple(fc.constant('m'.repeat(85)), chars('0az', 16, 24)).map(([s, t]) => s + t),
    );
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(positions, { minLength: 1, maxLength: 7 }),
        fc.oneof(positions, fc.constant('')),
        fc.boolean(),
        async (starts, other, useExisting) => {
          const t = `public.recover_${run++}`;
          for (const s of starts) {
            await sink.write(at(t), SCHEMA, s, [
              batchOf(t, [{ id: 1n, name: s.slice(0, 5), op: 1, pos: `${s}0` }]),
            ]);
          }
          // Another writer of the same lake table (a second pipeline or shard), with objects at
          // the same and at later positions, and an object named before writers were named.
          for (const s of [...starts, other || 'z']) {
            await sink.write(at(t, OTHER), SCHEMA, s, [
              batchOf(t, [{ id: 2n, name: 'other writer', op: 1, pos: `${s}0` }]),
            ]);
          }
          const dir = tablePrefix(prefix, t);
          const othersBefore = (await store.list(dir)).filter((o) => o.key.includes(`/${OTHER}.`) || o.key.includes(`/_${OTHER}.`));
          await store.put(`${dir}notes.txt`, Buffer.from('not ours'));
          await store.put(`${dir}sub/i00.parquet`, Buffer.from('not ours either'));
          await store.put(`${dir}i00.parquet`, Buffer.from('a name without a writer'));
          const committed = useExisting ? starts[Math.floor(starts.length / 2)]! : other;
          const uriOf = (p: string) => store.uri(objectKey(prefix, t, W, p).key);
          const removed = await sink.recover(at(t), committed);
          const expectRemoved = starts.filter((s) => s >= committed).sort();
          const expectKept = starts.filter((s) => s < committed).sort();
          expect(removed.map((r) => r.uri).sort()).toEqual(expectRemoved.map(uriOf).sort());
          expect((await sink.list(t, W)).map((r) => r.uri)).toEqual(expectKept.map(uriOf));
          // Sidecars go with their objects; foreign objects stay.
          const keys = (await store.list(dir)).map((o) => o.key);
          const sidecars = (ps: string[]) => ps.flatMap((p) => objectKey(prefix, t, W, p).sidecarKey ?? []);
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
    expect((await readBack(store, objectKey(prefix, t, W, 'i00').key)).rows).toEqual([`1|${W}|u|i000`]);
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
    const { sidecarKey } = objectKey(prefix, t, W, `${stem}a`);
    await store.delete([sidecarKey!]);
    const err = await sink.recover(at(t), `${stem}b`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SinkError);
    expect((err as SinkError).code).toBe('SINK_SIDECAR_MISSING');
    expect(await sink.list(t)).toHaveLength(2);
    // An orphan sidecar (crash between the two PUTs) at/after the committed position goes.
    const orphan = objectKey(prefix, t, W, `${stem}z`).sidecarKey!;
    await store.put(orphan, Buffer.from(`${stem}z`));
    await store.put(sidecarKey!, Buffer.from(`${stem}a`));
    const removed = await sink.recover(at(t), `${stem}b`);
    expect(removed.map((r) => r.uri)).toEqual([store.uri(objectKey(prefix, t, W, `${stem}c`).key)]);
    expect((await store.list(tablePrefix(prefix, t))).map((o) => o.key)).toEqual(
      [objectKey(prefix, t, W, `${stem}a`).key, sidecarKey!].sort(),
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
    expect(ref!.uri).toBe(`file://${dir}/public.t/${W}.i01.parquet`);
    const s3 = openLakeSink({
      uri: `s3://${testServers().s3Bucket}/via-uri-${randomUUID()}`,
      client: s3Client(),
    });
    const [s3ref] = await s3.write(at('public.t'), SCHEMA, 'i01', [
      batchOf('public.t', [{ id: 1n, name: 'x', op: 1, pos: 'i010' }]),
    ]);
    expect(s3ref!.uri).toMatch(
      new RegExp(`^s3://${testServers().s3Bucket}/via-uri-[0-9a-f-]+/public\\.t/test\\.src\\.i01\\.parquet$`),
    );
    expect(() => openLakeSink({ uri: 'gs://bucket' })).toThrow(/neither/);
  });
});
