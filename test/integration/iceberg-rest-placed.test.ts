/**
 * A `rest` catalog that places tables (`lake.catalog.placesTables`, S3 Tables' way: the create
 * request names no location, the catalog assigns one and removes unreferenced files there), on
 * Iceberg's own REST catalog server (test/harness/rest-catalog-server.ts), whose JdbcCatalog gives
 * each new table `<its warehouse>/<namespace>/<table>`: a root other than the lake's.
 *
 * The lake sink (shared/sink/lake-sink.ts) writes the table's data files, staged manifests and
 * manifest lists under that location, through a store the test wraps to FAIL any list or delete
 * (S3 Tables has neither), across a sync of three pages with two crashed attempts in the engine's
 * order of calls (write, stage, the state commit holding the pending commit, apply; a crash is the
 * sink dropped at that point and a new sink, as a new process, recovering): one killed after its
 * data file was written, one after its state commit and before its catalog commit, whose pending
 * commit the next run applies. pyiceberg's own REST catalog then reads exactly the source's rows.
 * A discard (`reset --delete-objects`) commits the delete snapshot and deletes nothing.
 *
 * Then the same through the real engine on a harness Postgres table: `runOnce` (openPipeline, the
 * location opened by `openLocation`), `tidemark check` (its `rest` line) and `tidemark reset
 * --delete-objects` by the CLI; and the incremental crash worker (incremental/crash-worker.ts)
 * SIGKILLed after a page's data file and staged manifest, then after a page's state commit and
 * before its catalog commit, then a clean run: no recovery removes anything, no file under the
 * catalog's location disappears, and pyiceberg reads the source's rows once. (The engine runs use
 * the plain file store: the list/delete guard is the sink-level test's.) Skipped, with the install
 * command, when java, the server's jars or the readers are missing.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSpec, type Spec, tableTarget } from '../../shared/config/spec.js';
import type { PendingCommit, WriteTarget } from '../../shared/contracts/sink.js';
import { newBatch } from '../../shared/dataplane/batch.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { type CatalogConfig, openLakeCatalog } from '../../shared/iceberg/open-catalog.js';
import { checkCatalog } from '../../shared/pipeline/check-iceberg.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { LakeSink } from '../../shared/sink/lake-sink.js';
import type { ObjectStore } from '../../shared/sink/object-store.js';
import { openLocation } from '../../shared/sink/open-lake.js';
import { ParquetSink } from '../../shared/sink/parquet-sink.js';
import { wireRecord } from '../harness/lake-record.js';
import { readersMissing, runReaderScript } from '../harness/readers.js';
import {
  type RestCatalogServer,
  restCatalogMissing,
  startRestCatalogServer,
} from '../harness/rest-catalog-server.js';
import { localSpec, postgresFixture, runCli, runOnce, type SourceFixture } from './incremental/fixture.js';

const SCHEMA: Schema = {
  columns: [
    { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
    { name: 'name', type: { kind: 'text' }, nullable: true, sourceType: 'text' },
  ],
  primaryKey: ['id'],
};
const TABLE = 'public.items';
const CRASH_WORKER = join(import.meta.dirname, 'incremental', 'crash-worker.ts');
const NAMESPACE = 'placed';

/** A store over the catalog's location that refuses what S3 Tables refuses: any list or delete. */
function noListNoDelete(store: ObjectStore, refused: string[]): ObjectStore {
  return {
    uri: (key) => store.uri(key),
    put: (key, bytes) => store.put(key, bytes),
    putIfAbsent: (key, bytes) => store.putIfAbsent(key, bytes),
    get: (key) => store.get(key),
    list: async (prefix) => {
      refused.push(`list ${store.uri(prefix)}`);
      throw new Error(
        `test: ListObjectsV2 under the catalog's location (${store.uri(prefix)}) is not allowed`,
      );
    },
    delete: async (keys) => {
      refused.push(`delete ${keys.join(',')}`);
      throw new Error(`test: DeleteObject under the catalog's location (${keys.join(', ')}) is not allowed`);
    },
  };
}

/** The source's page `seq` of rows, at positions `j<seq>`. */
function page(seq: number, rows: Record<string, unknown>[]) {
  const posPrefix = `j${String(seq).padStart(12, '0')}`;
  return {
    start: posPrefix,
    batch: newBatch({
      table: TABLE,
      record: wireRecord(SCHEMA, rows, { posPrefix }),
      watermark: undefined,
      writeMode: 'append',
    }),
  };
}

/** Every file under `dir`, as paths relative to it. */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return (readdirSync(dir, { recursive: true, withFileTypes: true }) as import('node:fs').Dirent[])
    .filter((d) => d.isFile())
    .map((d) => join(d.parentPath, d.name).slice(dir.length + 1))
    .sort();
}

describe.skipIf(restCatalogMissing !== undefined || readersMissing !== undefined)(
  `a REST catalog that places tables ${restCatalogMissing ?? readersMissing ?? ''}`,
  () => {
    let dir: string;
    let server: RestCatalogServer;
    let warehouse: string;
    let lakeDir: string;
    const refused: string[] = [];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'tidemark-rest-placed-'));
      warehouse = join(dir, 'catalog-warehouse');
      lakeDir = join(dir, 'lake');
      server = await startRestCatalogServer({ warehouse });
    }, 120_000);
    afterAll(async () => {
      await server?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    /** A new sink, as a new process opens it: the lake, and the catalog's locations behind the guard. */
    function openSink(): LakeSink {
      const config: CatalogConfig = {
        type: 'rest',
        uri: server.uri,
        namespace: NAMESPACE,
        placesTables: true,
      };
      const lake = new FileObjectStore(lakeDir);
      const lakeCatalog = openLakeCatalog(config, {
        store: lake,
        prefix: '',
        openFolder: (location) => {
          const { store, key } = openLocation(location, { uri: pathToFileURL(lakeDir).href });
          return { store: noListNoDelete(store, refused), key };
        },
      });
      return new LakeSink({ parquet: new ParquetSink({ store: lake }), catalog: lakeCatalog });
    }

    const target = (fence: number): WriteTarget => ({
      table: TABLE,
      writer: 'p.src',
      fence,
      tableFormat: 'iceberg',
    });

    it('writes under the location the catalog assigned, never lists or deletes there, recovers two crashes; pyiceberg reads the source', async () => {
      // Run 1 (fence 1): page 1, committed all the way.
      const run1 = openSink();
      const p1 = page(1, [
        { id: 1n, name: 'a' },
        { id: 2n, name: 'b' },
      ]);
      const refs1 = await run1.write(target(1), SCHEMA, p1.start, [p1.batch]);
      const pending1 = await run1.stage(target(1), refs1);
      await run1.apply(pending1!);
      // The server places a table where its create request says, else under its own warehouse:
      // there it is, so the request named none.
      const placedDir = join(warehouse, NAMESPACE, 'public_items');
      const placedUri = pathToFileURL(placedDir).href;
      expect(refs1[0]!.uri.startsWith(`${placedUri}/data/`)).toBe(true);
      expect(pending1!.manifest.startsWith(`${placedUri}/metadata/`)).toBe(true);
      expect(filesUnder(lakeDir)).toEqual([]);

      // Run 2 (fence 2): page 2's data file written, then killed (nothing staged, no state).
      const run2 = openSink();
      const p2 = page(2, [{ id: 3n, name: 'c' }]);
      const crashedRefs = await run2.write(target(2), SCHEMA, p2.start, [p2.batch]);
      expect(crashedRefs[0]!.uri.startsWith(`${placedUri}/data/`)).toBe(true);

      // Run 3 (fence 3): recovers from page 1's position, writes page 2 again and page 3; it is
      // killed after page 3's state commit (its pending commit is in the state), before the catalog's.
      const run3 = openSink();
      expect(await run3.recover(target(3), p2.start)).toEqual([]);
      const refs2 = await run3.write(target(3), SCHEMA, p2.start, [p2.batch]);
      expect(refs2[0]!.uri).not.toBe(crashedRefs[0]!.uri); // unique per attempt: nothing rewritten
      await run3.apply((await run3.stage(target(3), refs2))!);
      const p3 = page(3, [
        { id: 4n, name: 'd' },
        { id: 5n, name: 'e' },
      ]);
      const refs3 = await run3.write(target(3), SCHEMA, p3.start, [p3.batch]);
      const decided: PendingCommit = JSON.parse(JSON.stringify(await run3.stage(target(3), refs3)));

      // Run 4 (fence 4): recovery, then the state's pending commit applied (twice: idempotent).
      const run4 = openSink();
      const p4 = page(4, []);
      expect(await run4.recover(target(4), p4.start)).toEqual([]);
      await run4.apply(decided);
      await run4.apply(decided);

      expect(refused).toEqual([]);
      // The crashed attempt's file stays for the catalog's unreferenced-file removal.
      expect(existsSync(new URL(crashedRefs[0]!.uri))).toBe(true);
      expect(filesUnder(lakeDir)).toEqual([]);
      const read = await runReaderScript<{ rows: Record<string, unknown>[] }>('read_table.py', [
        '--catalog',
        'rest',
        '--uri',
        server.uri,
        '--table',
        `${NAMESPACE}.public_items`,
        '--order-by',
        'id',
      ]);
      expect(read.rows.map((r) => [Number(r.id), r.name])).toEqual([
        [1, 'a'],
        [2, 'b'],
        [3, 'c'],
        [4, 'd'],
        [5, 'e'],
      ]);

      // reset --delete-objects: the delete snapshot is committed; the files are left to the catalog.
      const before = filesUnder(placedDir).filter((f) => f.startsWith('data/'));
      const discarded = await openSink().discard(target(5));
      expect(discarded.map((r) => r.uri).sort()).toEqual(
        [refs1[0]!.uri, refs2[0]!.uri, refs3[0]!.uri].sort(),
      );
      expect(refused).toEqual([]);
      expect(filesUnder(placedDir).filter((f) => f.startsWith('data/'))).toEqual(before);
      const after = await runReaderScript<{ rows: Record<string, unknown>[] }>('read_table.py', [
        '--catalog',
        'rest',
        '--uri',
        server.uri,
        '--table',
        `${NAMESPACE}.public_items`,
      ]);
      expect(after.rows).toEqual([]);
    }, 240_000);

    it("tidemark check's lake line asks the catalog only: its namespace, no probe object where it places tables", async () => {
      const spec = (namespace: string) =>
        parseSpec(
          {
            pipeline: 'shop',
            sources: { app: { kind: 'postgres', url: 'postgres://u:secret@127.0.0.1:9/db' } },
            state: { dir: join(dir, 'state') },
            lake: {
              uri: pathToFileURL(lakeDir).href,
              catalog: { type: 'rest', uri: server.uri, namespace, placesTables: true },
            },
            tables: [
              {
                source: 'app',
                table: 'public.items',
                mode: 'incremental',
                cursor: 'id',
                writeMode: 'append',
              },
            ],
          },
          { env: {} },
        );
      const files = filesUnder(warehouse);
      expect(await checkCatalog(spec(NAMESPACE), 'probe-1', true)).toEqual([
        {
          check: 'rest',
          status: 'ok',
          message: expect.stringMatching(
            /namespace placed exists; the catalog places each table's files itself/,
          ),
        },
      ]);
      expect(await checkCatalog(spec('not_yet'), 'probe-2', true)).toEqual([
        expect.objectContaining({
          check: 'rest',
          status: 'ok',
          message: expect.stringContaining('namespace not_yet is created at the first commit'),
        }),
      ]);
      // Nothing written where the catalog keeps its tables, nor in the lake.
      expect(filesUnder(warehouse)).toEqual(files);
      const closed = parseSpec(
        {
          ...spec(NAMESPACE),
          lake: {
            uri: pathToFileURL(lakeDir).href,
            catalog: { type: 'rest', uri: 'http://127.0.0.1:9', namespace: 'x', placesTables: true },
          },
        },
        { env: {} },
      );
      expect(await checkCatalog(closed, 'probe-3', true)).toEqual([
        expect.objectContaining({ check: 'rest', status: 'fail', code: 'REST_CATALOG_UNREACHABLE' }),
      ]);
    }, 120_000);

    /** A local spec of `fx` (300-row pages) whose lake catalog is the REST server, placing tables in `namespace`. */
    const placedSpec = (fx: SourceFixture, pipeline: string, namespace: string) => {
      const local = localSpec(fx, { pageSize: 300, pipeline });
      const spec: Spec = {
        ...local.spec,
        lake: {
          ...local.spec.lake,
          catalog: { type: 'rest', uri: server.uri, namespace, placesTables: true },
        },
      };
      return { local, spec };
    };

    it('the engine and the CLI (run, check, reset --delete-objects) on a Postgres table: the files under the catalog location, none deleted', async () => {
      const fx: SourceFixture = await postgresFixture('rest_placed');
      try {
        await fx.createTable();
        await fx.insertRange(1, 701, fx.plus(fx.ts('2024-01-01 00:00:00'), 'g', 'millisecond'));
        const { local, spec } = placedSpec(fx, 'placed', 'engine');
        const target = tableTarget(spec.tables[0]!);
        for (let i = 0; i < 10 && (await runOnce(spec)).more; i++);
        const placedDir = join(warehouse, 'engine', 'public_items');
        const read = async () =>
          (
            await runReaderScript<{ rows: { id: number; v: number }[] }>('read_table.py', [
              '--catalog',
              'rest',
              '--uri',
              server.uri,
              '--table',
              'engine.public_items',
              '--order-by',
              'id',
            ])
          ).rows.map((r) => [Number(r.id), r.v]);
        const source = (await fx.rows()).map((r) => [Number(r.id), r.v]);
        expect(source).toHaveLength(700);
        expect(await read()).toEqual(source);
        // Three pages of 300, 300 and 100 rows: three data files, all under the catalog's location.
        const dataFiles = filesUnder(placedDir).filter((f) => f.endsWith('.parquet'));
        expect(dataFiles).toHaveLength(3);
        expect(dataFiles.every((f) => f.startsWith('data/'))).toBe(true);
        expect(filesUnder(join(local.lakeDir, target)).filter((f) => !f.startsWith('_'))).toEqual([]);

        const check = await runCli(local.dir, spec, ['check', '--table', target]);
        expect(check.stdout).toMatch(
          /ok +lake rest: .*namespace engine exists; the catalog places each table's files itself/,
        );

        const before = filesUnder(placedDir);
        const reset = await runCli(local.dir, spec, ['reset', '--table', target, '--delete-objects']);
        expect(reset.code, `${reset.stdout}\n${reset.stderr}`).toBe(0);
        expect(await read()).toEqual([]);
        // Nothing was deleted where the catalog keeps the table: every file is still there.
        const after = filesUnder(placedDir);
        expect(before.filter((f) => !after.includes(f))).toEqual([]);
        rmSync(local.dir, { recursive: true, force: true });
      } finally {
        await fx.drop();
      }
    }, 240_000);

    it('SIGKILLed runs of the engine (after a data file, after a state commit before the catalog commit) recover without deleting there; pyiceberg reads the source once', async () => {
      const fx: SourceFixture = await postgresFixture('rest_placed_kill');
      try {
        await fx.createTable();
        await fx.insertRange(1, 1001, fx.plus(fx.ts('2024-01-01 00:00:00'), 'g', 'millisecond'));
        const { local, spec } = placedSpec(fx, 'killed', 'killed');
        const placedDir = join(warehouse, 'killed', 'public_items');
        const crashDir = join(local.dir, 'crash');
        mkdirSync(crashDir);
        const worker = (run: number, kill?: string) =>
          new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>(
            (resolve, reject) => {
              const child = spawn(process.execPath, ['--import', 'tsx', CRASH_WORKER], {
                cwd: join(import.meta.dirname, '..', '..'),
                stdio: ['ignore', 'pipe', 'pipe'],
                env: {
                  ...process.env,
                  TM_SPEC: JSON.stringify(spec),
                  TM_CRASH_DIR: crashDir,
                  TM_CRASH_RUN: String(run),
                  ...(kill ? { TM_CRASH_KILL: kill } : {}),
                },
              });
              let stdout = '';
              let stderr = '';
              child.stdout.on('data', (d: Buffer) => {
                stdout += d.toString();
              });
              child.stderr.on('data', (d: Buffer) => {
                stderr += d.toString();
              });
              child.on('error', reject);
              child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
            },
          );
        const lines = (name: string) =>
          existsSync(join(crashDir, name))
            ? readFileSync(join(crashDir, name), 'utf8').split('\n').filter(Boolean)
            : [];

        // Run 0: killed with page 2's data file and staged manifest written, nothing committed.
        const r0 = await worker(0, 'after-write#2');
        expect(r0.signal, r0.stderr).toBe('SIGKILL');
        const left = lines('leftovers').map((l) => l.split(' ').slice(1))[0]!;
        expect(left).toHaveLength(2);
        // Run 1: killed after page 1's state commit (its pending commit), before the catalog's.
        const r1 = await worker(1, 'after-commit#1');
        expect(r1.signal, r1.stderr).toBe('SIGKILL');
        expect(lines('kills')).toEqual(['after-write#2', 'after-commit#1']);
        const beforeClean = filesUnder(placedDir);
        // Run 2: clean; it applies the pending commit and catches up.
        const r2 = await worker(2);
        expect(r2.code, r2.stderr).toBe(0);
        expect(JSON.parse(r2.stdout.trim().split('\n').at(-1)!)).toMatchObject({ status: 'ok', more: false });

        // No recovery removed anything, and no file under the catalog's location went away: run
        // 0's leftovers stay for the catalog's unreferenced-file removal.
        expect(lines('recoveries')).toEqual(['0', '1', '2']);
        const after = filesUnder(placedDir);
        expect(beforeClean.filter((f) => !after.includes(f))).toEqual([]);
        for (const name of left) expect(after.some((f) => f.endsWith(`/${name}`))).toBe(true);
        const read = await runReaderScript<{ rows: { id: number; v: number }[] }>('read_table.py', [
          '--catalog',
          'rest',
          '--uri',
          server.uri,
          '--table',
          'killed.public_items',
          '--order-by',
          'id',
        ]);
        expect(read.rows.map((r) => [Number(r.id), r.v])).toEqual(
          (await fx.rows()).map((r) => [Number(r.id), r.v]),
        );
        rmSync(local.dir, { recursive: true, force: true });
      } finally {
        await fx.drop();
      }
    }, 300_000);
  },
);
