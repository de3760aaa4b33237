/**
 * The Iceberg `file` catalog (shared/iceberg/file-catalog.ts) and the commit loop over it
 * (catalog.ts `commitWithRetry`), on a local folder and on S3:
 * - the Hadoop-catalog layout: `metadata/v<N>.metadata.json`, `version-hint.text` holding bare
 *   digits; a stale, missing or broken hint costs nothing; a hint set back by a slower writer is
 *   put right;
 * - the compare-and-swap: a stale base is a conflict and writes nothing; a commit the table has is
 *   not applied again (same commit id), also when the reply of the create that made it was lost;
 *   a writer that keeps losing gives up with ICEBERG_COMMIT_CONTENDED, one that never gets an
 *   answer with ICEBERG_COMMIT_UNKNOWN;
 * - a race: four processes commit to one table at once (with lost replies injected): every commit
 *   lands exactly once, in each writer's order, on one parent chain, one version per commit;
 * - S3 on moto (If-None-Match: * answered 412): the same catalog, the probe passes, concurrent
 *   writers each land once; s3rver (ignores the condition): the probe says so and the catalog
 *   refuses to write.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TidemarkError } from '../../shared/contracts/errors.js';
import {
  type Catalog,
  commitWithRetry,
  type LoadedTable,
  type TableIdent,
} from '../../shared/iceberg/catalog.js';
import { FileCatalog, VERSION_HINT_FILE } from '../../shared/iceberg/file-catalog.js';
import {
  appendSnapshot,
  COMMIT_ID_SUMMARY_KEY,
  type CommitIdentity,
  newSnapshotId,
  newTableMetadata,
} from '../../shared/iceberg/metadata.js';
import type { IcebergTableMetadata } from '../../shared/iceberg/spec.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { type ObjectStore, supportsConditionalWrites } from '../../shared/sink/object-store.js';
import { S3ObjectStore } from '../../shared/sink/s3-object-store.js';
import { s3Client } from '../harness/aws.js';
import { type MotoServer, motoS3Client, motoUnavailable, startMotoServer } from '../harness/moto-server.js';
import { testServers } from '../harness/servers.js';
import { raceWorkers, startWorker } from '../harness/worker-race.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const WORKER = join(HERE, 'iceberg-catalog-worker.ts');
const T: TableIdent = { namespace: 'shop', name: 'orders' };
const tableKey = (t: TableIdent) => `wh/${t.namespace}/${t.name}`;

function emptyTable(catalog: FileCatalog, ident: TableIdent = T): IcebergTableMetadata {
  return newTableMetadata({
    location: catalog.location(ident),
    schema: {
      type: 'struct',
      fields: [
        { id: 1, name: 'id', required: true, type: 'long' },
        { id: 2, name: 'note', required: false, type: 'string' },
      ],
    },
    lastColumnId: 2,
    properties: { 'write.format.default': 'parquet' },
    uuid: randomUUID(),
    nowMs: Date.now(),
  });
}

/** A build for commitWithRetry that appends one snapshot for `commit` on whatever base it gets. */
function appendFor(commit: CommitIdentity, records = 1) {
  return (current: LoadedTable) =>
    appendSnapshot(current.metadata, {
      snapshotId: newSnapshotId(current.metadata),
      manifestListPath: `${current.metadata.location}/metadata/snap-${commit.commitId}-v${current.version}.avro`,
      added: { dataFiles: 1, records, filesSize: 100 },
      commit,
      nowMs: Date.now(),
    });
}

async function rejection(fn: () => Promise<unknown>): Promise<TidemarkError> {
  try {
    await fn();
  } catch (e) {
    expect(e).toBeInstanceOf(TidemarkError);
    return e as TidemarkError;
  }
  throw new Error('expected a rejection, but it resolved');
}

/** `inner`, with a hook run before `putIfAbsent` / `put` of chosen keys. */
function hooked(
  inner: ObjectStore,
  hooks: {
    putIfAbsent?: (key: string, run: () => Promise<'created' | 'exists'>) => Promise<'created' | 'exists'>;
    put?: (key: string) => Promise<void>;
  },
): ObjectStore {
  return {
    uri: (key) => inner.uri(key),
    get: (key) => inner.get(key),
    list: (prefix, startAfter) => inner.list(prefix, startAfter),
    delete: (keys) => inner.delete(keys),
    async put(key, bytes) {
      await hooks.put?.(key);
      return inner.put(key, bytes);
    },
    putIfAbsent: (key, bytes) =>
      hooks.putIfAbsent
        ? hooks.putIfAbsent(key, () => inner.putIfAbsent(key, bytes))
        : inner.putIfAbsent(key, bytes),
  };
}

const lostReply = () => Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });

describe('file catalog on a local folder', () => {
  let dir = '';
  let store: FileObjectStore;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tidemark-iceberg-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** A fresh table name per test, and a catalog on the shared folder. */
  function fresh(): { catalog: FileCatalog; ident: TableIdent; metaDir: string } {
    store = new FileObjectStore(dir);
    const ident = { namespace: 'shop', name: `t_${randomUUID().slice(0, 8)}` };
    return {
      catalog: new FileCatalog({ store, tableKey }),
      ident,
      metaDir: join(dir, tableKey(ident), 'metadata'),
    };
  }

  it('creates v1.metadata.json and a hint of bare digits, and refuses to create it twice', async () => {
    const { catalog, ident, metaDir } = fresh();
    expect(await catalog.loadTable(ident)).toBeUndefined();
    const metadata = emptyTable(catalog, ident);
    const created = await catalog.createTable(ident, metadata);
    expect(created.status).toBe('created');
    expect((await readdir(metaDir)).sort()).toEqual(['v1.metadata.json', VERSION_HINT_FILE]);
    expect(await readFile(join(metaDir, VERSION_HINT_FILE), 'utf8')).toBe('1');
    const loaded = await catalog.loadTable(ident);
    expect(loaded).toEqual({
      metadata,
      metadataLocation: `file://${metaDir}/v1.metadata.json`,
      version: '1',
    });
    expect(metadata.location).toBe(`file://${join(dir, tableKey(ident))}`);
    expect(await catalog.createTable(ident, emptyTable(catalog, ident))).toEqual({ status: 'exists' });
    expect(await readdir(metaDir)).toHaveLength(2);
  });

  it('commits v2, v3 with the metadata log, and applies a commit id only once', async () => {
    const { catalog, ident, metaDir } = fresh();
    await catalog.createTable(ident, emptyTable(catalog, ident));
    const c1 = { writerId: 'shop.app', commitId: 'c1' };
    const r1 = await commitWithRetry(catalog, ident, c1, appendFor(c1));
    expect(r1).toMatchObject({ status: 'committed', attempts: 1, table: { version: '2' } });
    const c2 = { writerId: 'shop.app', commitId: 'c2' };
    const r2 = await commitWithRetry(catalog, ident, c2, appendFor(c2));
    expect(r2.table.version).toBe('3');
    expect(await readFile(join(metaDir, VERSION_HINT_FILE), 'utf8')).toBe('3');
    const loaded = (await catalog.loadTable(ident))!;
    expect(loaded.metadata['metadata-log'].map((e) => e['metadata-file'])).toEqual([
      `file://${metaDir}/v1.metadata.json`,
      `file://${metaDir}/v2.metadata.json`,
    ]);
    expect(loaded.metadata.snapshots.map((s) => s.summary[COMMIT_ID_SUMMARY_KEY])).toEqual(['c1', 'c2']);

    // The same commit again (a run that crashed before recording it applied): nothing is written.
    let built = 0;
    const again = await commitWithRetry(catalog, ident, c2, (cur) => {
      built++;
      return appendFor(c2)(cur);
    });
    expect(again).toMatchObject({ status: 'already-committed', table: { version: '3' } });
    expect(built).toBe(0);
    expect((await readdir(metaDir)).filter((f) => f.endsWith('.metadata.json'))).toHaveLength(3);
  });

  it('answers conflict to a stale base and writes nothing', async () => {
    const { catalog, ident, metaDir } = fresh();
    await catalog.createTable(ident, emptyTable(catalog, ident));
    const base = (await catalog.loadTable(ident))!;
    const a = { writerId: 'a', commitId: 'a1' };
    await commitWithRetry(catalog, ident, a, appendFor(a));
    const v2 = await readFile(join(metaDir, 'v2.metadata.json'));
    const b = { writerId: 'b', commitId: 'b1' };
    expect(await catalog.commitTable(ident, base, appendFor(b)(base))).toEqual({ status: 'conflict' });
    expect(await readFile(join(metaDir, 'v2.metadata.json'))).toEqual(v2);
    expect((await readdir(metaDir)).filter((f) => f.endsWith('.metadata.json'))).toHaveLength(2);
  });

  it('finds the newest version whatever the hint says: stale, missing or garbage', async () => {
    const { catalog, ident, metaDir } = fresh();
    await catalog.createTable(ident, emptyTable(catalog, ident));
    for (const id of ['c1', 'c2', 'c3']) {
      const c = { writerId: 'w', commitId: id };
      await commitWithRetry(catalog, ident, c, appendFor(c));
    }
    const hint = join(metaDir, VERSION_HINT_FILE);
    for (const text of ['1', '2\n', 'v9', '', '0', '99']) {
      await writeFile(hint, text);
      expect((await catalog.loadTable(ident))?.version, JSON.stringify(text)).toBe('4');
    }
    await rm(hint);
    expect((await catalog.loadTable(ident))?.version).toBe('4');
    // The next commit writes a good hint again.
    const c = { writerId: 'w', commitId: 'c4' };
    await commitWithRetry(catalog, ident, c, appendFor(c));
    expect(await readFile(hint, 'utf8')).toBe('5');
  });

  it('puts the hint right when a slower writer set it back', async () => {
    const { catalog, ident, metaDir } = fresh();
    await catalog.createTable(ident, emptyTable(catalog, ident));
    const other = new FileCatalog({ store: new FileObjectStore(dir), tableKey });
    let raced = false;
    // Just before this writer puts hint 2, another writer commits v3 and writes hint 3.
    const slow = new FileCatalog({
      store: hooked(new FileObjectStore(dir), {
        async put(key) {
          if (!key.endsWith(VERSION_HINT_FILE) || raced) return;
          raced = true;
          const c = { writerId: 'fast', commitId: 'f1' };
          await commitWithRetry(other, ident, c, appendFor(c));
        },
      }),
      tableKey,
    });
    const c = { writerId: 'slow', commitId: 's1' };
    await commitWithRetry(slow, ident, c, appendFor(c));
    expect(raced).toBe(true);
    expect(await readFile(join(metaDir, VERSION_HINT_FILE), 'utf8')).toBe('3');
  });

  it('settles a lost reply by re-reading: the commit that landed is not applied again', async () => {
    const { ident } = fresh();
    let lose = true;
    const catalog = new FileCatalog({
      store: hooked(store, {
        async putIfAbsent(key, run) {
          const outcome = await run();
          if (key.endsWith('.metadata.json') && !key.endsWith('/v1.metadata.json') && lose) {
            lose = false;
            throw lostReply();
          }
          return outcome;
        },
      }),
      tableKey,
    });
    await catalog.createTable(ident, emptyTable(catalog, ident));
    const c = { writerId: 'w', commitId: 'once' };
    const r = await commitWithRetry(catalog, ident, c, appendFor(c), { sleep: async () => {} });
    expect(r).toMatchObject({ status: 'already-committed', attempts: 2, table: { version: '2' } });
    const loaded = (await catalog.loadTable(ident))!;
    expect(loaded.version).toBe('2');
    expect(loaded.metadata.snapshots).toHaveLength(1);
  });

  it('retries a request that failed before it was made, and gives up with ICEBERG_COMMIT_UNKNOWN when none is answered', async () => {
    const { ident } = fresh();
    let failures = 1;
    const catalog = new FileCatalog({
      store: hooked(store, {
        async putIfAbsent(key, run) {
          if (key.endsWith('.metadata.json') && !key.endsWith('/v1.metadata.json') && failures-- > 0)
            throw lostReply();
          return run();
        },
      }),
      tableKey,
    });
    await catalog.createTable(ident, emptyTable(catalog, ident));
    const c = { writerId: 'w', commitId: 'x1' };
    expect(await commitWithRetry(catalog, ident, c, appendFor(c), { sleep: async () => {} })).toMatchObject({
      status: 'committed',
      attempts: 2,
    });
    failures = Number.POSITIVE_INFINITY;
    const d = { writerId: 'w', commitId: 'x2' };
    const e = await rejection(() =>
      commitWithRetry(catalog, ident, d, appendFor(d), { maxAttempts: 3, sleep: async () => {} }),
    );
    expect(e.code).toBe('ICEBERG_COMMIT_UNKNOWN');
    expect(e.message).toContain('3 attempts');
    expect((e.cause as { code?: string }).code).toBe('ECONNRESET');
    expect((await catalog.loadTable(ident))?.version).toBe('2');
  });

  it('gives up with ICEBERG_COMMIT_CONTENDED when another writer wins every time', async () => {
    const { catalog, ident } = fresh();
    await catalog.createTable(ident, emptyTable(catalog, ident));
    const rival = new FileCatalog({ store: new FileObjectStore(dir), tableKey });
    let n = 0;
    const c = { writerId: 'loser', commitId: 'l1' };
    const e = await rejection(() =>
      commitWithRetry(
        catalog,
        ident,
        c,
        async (current) => {
          // Between this writer's load and its swap, the rival commits.
          const r = { writerId: 'rival', commitId: `r${++n}` };
          await commitWithRetry(rival, ident, r, appendFor(r));
          return appendFor(c)(current);
        },
        { maxAttempts: 3, sleep: async () => {} },
      ),
    );
    expect(e.code).toBe('ICEBERG_COMMIT_CONTENDED');
    const loaded = (await catalog.loadTable(ident))!;
    expect(loaded.metadata.snapshots.map((s) => s.summary[COMMIT_ID_SUMMARY_KEY])).toEqual([
      'r1',
      'r2',
      'r3',
    ]);
  });

  it('refuses to commit to a table that is not there', async () => {
    const { catalog, ident } = fresh();
    const c = { writerId: 'w', commitId: 'x' };
    expect((await rejection(() => commitWithRetry(catalog, ident, c, appendFor(c)))).code).toBe(
      'ICEBERG_TABLE_MISSING',
    );
  });

  it('refuses a metadata file that does not parse, naming it', async () => {
    const { catalog, ident, metaDir } = fresh();
    await catalog.createTable(ident, emptyTable(catalog, ident));
    await writeFile(join(metaDir, 'v2.metadata.json'), '{"format-version": 1}');
    const e = await rejection(() => catalog.loadTable(ident));
    expect(e.code).toBe('ICEBERG_METADATA_INVALID');
    expect(e.message).toContain(`${metaDir}/v2.metadata.json`);
  });

  it('probes a folder as keeping conditional writes', async () => {
    expect(await supportsConditionalWrites(new FileObjectStore(dir), `probe-${randomUUID()}`)).toBe(true);
    expect((await readdir(dir)).filter((f) => f.startsWith('probe-'))).toEqual([]);
  });
});

interface WorkerResult {
  readonly statuses: Record<string, number>;
  readonly attempts: number;
}

/** Races one catalog worker per writer (test/harness/worker-race.ts): their results. */
function raceCatalogWorkers(
  dir: string,
  writers: string[],
  count: number,
  faults: boolean,
): Promise<WorkerResult[]> {
  return raceWorkers<WorkerResult>(
    writers.map((w) => startWorker(WORKER, [dir, w, String(count), faults ? '1' : '0'])),
  );
}

/**
 * The table after a race: every commit id exactly once, each writer's in its order, one parent
 * chain from the current snapshot back to the first with sequence numbers 1..n, one version per
 * commit.
 */
async function expectEveryCommitOnce(
  catalog: Catalog,
  ident: TableIdent,
  writers: string[],
  count: number,
): Promise<void> {
  const loaded = (await catalog.loadTable(ident))!;
  const m = loaded.metadata;
  const n = writers.length * count;
  const ids = m.snapshots.map((s) => s.summary[COMMIT_ID_SUMMARY_KEY]!);
  expect(ids).toHaveLength(n);
  expect(new Set(ids).size).toBe(n);
  for (const w of writers) {
    expect(ids.filter((id) => id.startsWith(`${w}-`))).toEqual(
      Array.from({ length: count }, (_, i) => `${w}-${i + 1}`),
    );
  }
  const byId = new Map(m.snapshots.map((s) => [s['snapshot-id'], s]));
  const chain: bigint[] = [];
  for (
    let s = byId.get(m['current-snapshot-id']!);
    s;
    s = s['parent-snapshot-id'] === undefined ? undefined : byId.get(s['parent-snapshot-id'])
  ) {
    chain.push(s['snapshot-id']);
  }
  expect(chain).toHaveLength(n);
  expect(chain.map((id) => byId.get(id)!['sequence-number'])).toEqual(
    Array.from({ length: n }, (_, i) => n - i),
  );
  expect(m['last-sequence-number']).toBe(n);
  expect(loaded.version).toBe(String(n + 1));
  expect(m.snapshots.at(-1)!.summary['total-data-files']).toBe(String(n));
  for (const w of writers) expect(m.properties[`tidemark.writer.${w}.commit`]).toBe(`${w}-${count}`);
}

describe('file catalog: writers racing from several processes', () => {
  let dir = '';
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tidemark-iceberg-race-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('4 processes x 12 commits with lost replies: every commit lands once, on one chain', async () => {
    const ident = { namespace: 'race', name: 'events' };
    const catalog = new FileCatalog({
      store: new FileObjectStore(dir),
      tableKey: (t) => `${t.namespace}/${t.name}`,
    });
    await catalog.createTable(ident, emptyTable(catalog, ident));
    const writers = ['p.w1', 'p.w2', 'p.w3', 'p.w4'];
    const results = await raceCatalogWorkers(dir, writers, 12, true);
    await expectEveryCommitOnce(catalog, ident, writers, 12);
    // The race was real: writers lost CAS rounds and settled lost replies.
    expect(results.reduce((sum, r) => sum + r.attempts, 0)).toBeGreaterThan(48);
    const files = await readdir(join(dir, 'race', 'events', 'metadata'));
    expect(files.filter((f) => f.endsWith('.metadata.json'))).toHaveLength(49);
    expect(files.filter((f) => f.startsWith('.'))).toEqual([]);
  });
});

describe.skipIf(motoUnavailable() !== undefined)(
  `file catalog on S3 (moto) ${motoUnavailable() ?? ''}`,
  () => {
    let moto: MotoServer;
    let client: S3Client;
    const bucket = 'tidemark-iceberg';
    beforeAll(async () => {
      moto = await startMotoServer();
      client = motoS3Client(moto.endpoint);
      await client.send(new CreateBucketCommand({ Bucket: bucket }));
    });
    afterAll(async () => {
      client?.destroy();
      await moto?.stop();
    });

    it('putIfAbsent: created, then exists, the first object kept', async () => {
      const store = new S3ObjectStore({ bucket, client });
      expect(await store.putIfAbsent('k/one', new TextEncoder().encode('first'))).toBe('created');
      expect(await store.putIfAbsent('k/one', new TextEncoder().encode('second'))).toBe('exists');
      expect(new TextDecoder().decode(await store.get('k/one'))).toBe('first');
      expect(await supportsConditionalWrites(store, 'k/probe')).toBe(true);
      expect(await store.get('k/probe')).toBeUndefined();
    });

    it('creates, commits and loads a table; concurrent writers each land once', async () => {
      const ident = { namespace: 'shop', name: `t_${randomUUID().slice(0, 8)}` };
      const catalogs = Array.from(
        { length: 3 },
        () => new FileCatalog({ store: new S3ObjectStore({ bucket, client }), tableKey }),
      );
      const first = catalogs[0]!;
      const metadata = emptyTable(first, ident);
      expect(metadata.location).toBe(`s3://${bucket}/wh/shop/${ident.name}`);
      expect((await first.createTable(ident, metadata)).status).toBe('created');
      const writers = ['s.a', 's.b', 's.c'];
      await Promise.all(
        writers.map(async (w, i) => {
          for (let k = 1; k <= 4; k++) {
            const c = { writerId: w, commitId: `${w}-${k}` };
            await commitWithRetry(catalogs[i]!, ident, c, appendFor(c), {
              maxAttempts: 100,
              minWaitMs: 1,
              maxWaitMs: 10,
            });
          }
        }),
      );
      await expectEveryCommitOnce(first, ident, writers, 4);
      const hint = await new S3ObjectStore({ bucket, client }).get(
        `${tableKey(ident)}/metadata/${VERSION_HINT_FILE}`,
      );
      expect(Number(new TextDecoder().decode(hint))).toBeLessThanOrEqual(13);
    });
  },
);

describe('file catalog on s3rver, which ignores If-None-Match', () => {
  it('is found out by the probe, and the catalog refuses to write', async () => {
    const { s3Bucket } = testServers();
    const client = s3Client();
    try {
      const store = new S3ObjectStore({ bucket: s3Bucket, client });
      const prefix = `iceberg-${randomUUID().slice(0, 8)}`;
      expect(await supportsConditionalWrites(store, `${prefix}/probe`)).toBe(false);
      expect(await store.list(`${prefix}/`)).toEqual([]);
      const catalog = new FileCatalog({ store, tableKey: (t) => `${prefix}/${t.namespace}/${t.name}` });
      const e = await rejection(() => catalog.createTable(T, emptyTable(catalog)));
      expect(e.code).toBe('ICEBERG_CONDITIONAL_WRITES_UNSUPPORTED');
      expect(await store.list(`${prefix}/`)).toEqual([]);
    } finally {
      client.destroy();
    }
  });
});
