/**
 * The `rest` catalog (shared/iceberg/rest-catalog.ts) against Iceberg's own REST catalog server
 * (test/harness/rest-catalog-server.ts: RESTCatalogAdapter over a JdbcCatalog, which checks a
 * commit's requirements and writes the metadata files itself), with a file lake for the data
 * files and manifests tidemark writes, and a bearer token the server demands.
 *
 * The table is created on first commit (its namespace with it), appended to through
 * stageAppend/applyAppend and reloaded. A second writer commits between our load and our commit
 * (the `beforeCommit` hook of the wrapped fetch), so the race is deterministic: the server refuses
 * our `assert-ref-snapshot-id` with 409 and commitWithRetry must rebase, losing neither commit. A
 * reply dropped after the server applied the commit (`loseReply`) must be settled by the reload,
 * not applied twice. Then the refusals (a wrong token, nothing listening), and pyiceberg's own
 * REST catalog reading every row. Skipped, with the install command, when java or the server's
 * jars are missing (CI has them).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyAppend, type StagedAppend } from '../../shared/iceberg/append.js';
import type { TableIdent } from '../../shared/iceberg/catalog.js';
import {
  COMMIT_ID_SUMMARY_KEY,
  newTableMetadata,
  writerCommitProperty,
} from '../../shared/iceberg/metadata.js';
import { RestCatalog } from '../../shared/iceberg/rest-catalog.js';
import { icebergSchemaOf } from '../../shared/iceberg/schema.js';
import type { IcebergSchema } from '../../shared/iceberg/spec.js';
import type { TableFolder } from '../../shared/iceberg/table-folder.js';
import { redact } from '../../shared/observability/redact.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { readersMissing, runReaderScript } from '../harness/readers.js';
import {
  type RestCatalogServer,
  restCatalogMissing,
  startRestCatalogServer,
} from '../harness/rest-catalog-server.js';
import { FILE_A, FILE_B, stageRows, TABLE } from './iceberg-table-fixture.js';

const IDENT: TableIdent = { namespace: 'tidemark_public', name: 'orders' };
const TABLE_KEY = 'lake/public.orders';

interface FetchHook {
  /** Runs before the next commit request (a POST to the table) is sent (once). */
  beforeCommit?: () => Promise<void>;
  /** The next commit request reaches the server and is applied; its reply is lost (once). */
  loseReply?: boolean;
  /** Every commit request's body, parsed. */
  commits: { requirements: { type: string }[]; updates: { action: string }[] }[];
}

/** `fetch` with the test's hooks on the commit requests of IDENT; everything else passes. */
function hookedFetch(hook: FetchHook): typeof fetch {
  return async (input, init) => {
    const url = new URL(String(input));
    const commit = init?.method === 'POST' && url.pathname.endsWith(`/tables/${IDENT.name}`);
    if (!commit) return fetch(input, init);
    const run = hook.beforeCommit;
    hook.beforeCommit = undefined;
    if (run) await run();
    hook.commits.push(JSON.parse(String(init.body)));
    const reply = await fetch(input, init);
    if (hook.loseReply) {
      hook.loseReply = false;
      await reply.text(); // the server has answered: the commit is applied
      throw new TypeError('fetch failed (the reply was lost: test)');
    }
    return reply;
  };
}

describe.skipIf(restCatalogMissing !== undefined)(
  `rest catalog on Iceberg's REST server ${restCatalogMissing ?? ''}`,
  () => {
    const token = `tok-${randomBytes(12).toString('hex')}`;
    let dir: string;
    let server: RestCatalogServer;
    let store: FileObjectStore;
    let folder: TableFolder;
    let schema: IcebergSchema;
    const ours: FetchHook = { commits: [] };
    let catalog: RestCatalog;
    let other: RestCatalog;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'tidemark-rest-'));
      store = new FileObjectStore(join(dir, 'lake-root'));
      folder = { store, key: TABLE_KEY };
      server = await startRestCatalogServer({ warehouse: join(dir, 'warehouse'), token });
      catalog = new RestCatalog({ uri: server.uri, token, fetch: hookedFetch(ours) });
      other = new RestCatalog({ uri: server.uri, token });
      schema = icebergSchemaOf(TABLE).schema;
    }, 120_000);
    afterAll(async () => {
      await server?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    const stage = (
      writerId: string,
      commitId: string,
      rows: readonly (readonly unknown[])[],
      posPrefix: string,
    ) => stageRows(folder, schema, { writerId, commitId }, rows, posPrefix);
    const apply = (through: RestCatalog, staged: StagedAppend) =>
      applyAppend(through, IDENT, folder, staged, { nowMs: Date.now, retry: { sleep: async () => {} } });

    it('creates the table and its namespace on first commit, with the schema and location asked for', async () => {
      expect(await catalog.loadTable(IDENT)).toBeUndefined();
      const of = icebergSchemaOf(TABLE);
      const location = store.uri(TABLE_KEY);
      const created = await catalog.createTable(
        IDENT,
        newTableMetadata({
          location,
          schema: of.schema,
          lastColumnId: of.lastColumnId,
          properties: { 'tidemark.test': 'yes' },
          uuid: randomUUID(),
          nowMs: Date.now(),
        }),
      );
      expect(created.status).toBe('created');
      if (created.status !== 'created') return;
      // The server wrote the first metadata file, in the table's folder.
      expect(created.table.metadataLocation).toMatch(
        /\/lake-root\/lake\/public\.orders\/metadata\/00000-[0-9a-f-]{36}\.metadata\.json$/,
      );
      expect(created.table.metadata.location.replace(/^file:\/*/, '/')).toBe(
        location.replace(/^file:\/*/, '/'),
      );
      expect(created.table.metadata.schemas[0]!.fields).toEqual(of.schema.fields);
      expect(created.table.metadata.properties['tidemark.test']).toBe('yes');
      const loaded = (await catalog.loadTable(IDENT))!;
      expect(loaded.metadataLocation).toBe(created.table.metadataLocation);
      expect(loaded.metadata['table-uuid']).toBe(created.table.metadata['table-uuid']);
      expect((await catalog.createTable(IDENT, loaded.metadata)).status).toBe('exists');
    });

    it('commits an append with requirements on the table and main, and loads follow', async () => {
      const before = (await catalog.loadTable(IDENT))!;
      const result = await apply(catalog, await stage('shop.app', 'i0000000001-a1', FILE_A, 'i0000000001'));
      expect(result.status).toBe('committed');
      expect(result.attempts).toBe(1);
      const loaded = (await catalog.loadTable(IDENT))!;
      expect(loaded.metadataLocation).toBe(result.table.metadataLocation);
      expect(loaded.metadataLocation).toMatch(/\/metadata\/00001-[0-9a-f-]{36}\.metadata\.json$/);
      expect(loaded.metadata.snapshots).toHaveLength(1);
      expect(loaded.metadata.properties[writerCommitProperty('shop.app')]).toBe('i0000000001-a1');
      expect(loaded.metadata['metadata-log'].map((e) => e['metadata-file'])).toEqual([
        before.metadataLocation,
      ]);
      expect(ours.commits).toHaveLength(1);
      expect(ours.commits[0]!.requirements).toEqual([
        { type: 'assert-table-uuid', uuid: before.metadata['table-uuid'] },
        { type: 'assert-ref-snapshot-id', ref: 'main', 'snapshot-id': null },
      ]);
      expect(ours.commits[0]!.updates.map((u) => u.action)).toEqual([
        'add-snapshot',
        'set-snapshot-ref',
        'set-properties',
      ]);
    });

    it("rebases a commit that lost the race to another writer's, losing neither", async () => {
      const theirs = await stage(
        'other.app',
        'i0000000009-b1',
        [[9, 1, 'fig', '1.00', null, 0n, 0, 1, true, null]],
        'i0000000009',
      );
      const mine = await stage('shop.app', 'i0000000004-a1', FILE_B, 'i0000000004');
      let raced = false;
      ours.beforeCommit = async () => {
        // After our load and build, before our commit reaches the server.
        expect((await apply(other, theirs)).status).toBe('committed');
        raced = true;
      };
      const result = await apply(catalog, mine);
      expect(raced).toBe(true);
      expect(result.status).toBe('committed');
      expect(result.attempts).toBe(2);
      const table = (await catalog.loadTable(IDENT))!.metadata;
      expect(table.snapshots.map((s) => s.summary[COMMIT_ID_SUMMARY_KEY])).toEqual([
        'i0000000001-a1',
        'i0000000009-b1',
        'i0000000004-a1',
      ]);
      expect(table.snapshots.at(-1)!.summary['total-records']).toBe(
        String(FILE_A.length + FILE_B.length + 1),
      );
      expect(table.properties[writerCommitProperty('other.app')]).toBe('i0000000009-b1');
      expect(table.properties[writerCommitProperty('shop.app')]).toBe('i0000000004-a1');
    });

    it('settles a commit whose reply was lost by reloading: applied once, not twice', async () => {
      const staged = await stage(
        'lost.app',
        'i0000000012-c1',
        [[12, 1, 'kiwi', '2.00', null, 0n, 0, 1, true, null]],
        'i0000000012',
      );
      const before = (await catalog.loadTable(IDENT))!.metadata.snapshots.length;
      const sent = ours.commits.length;
      ours.loseReply = true;
      const result = await apply(catalog, staged);
      expect(ours.loseReply).toBe(false);
      expect(result.status).toBe('already-committed');
      expect(result.attempts).toBe(2); // the second attempt's reload found it
      expect(ours.commits.length - sent).toBe(1); // never sent again
      const table = (await catalog.loadTable(IDENT))!.metadata;
      expect(table.snapshots).toHaveLength(before + 1);
      expect(table.snapshots.at(-1)!.summary[COMMIT_ID_SUMMARY_KEY]).toBe('i0000000012-c1');
    });

    it('refuses a wrong token without showing it, and names an endpoint where nothing listens', async () => {
      const wrong = `bad-${randomBytes(8).toString('hex')}`;
      const denied = await new RestCatalog({ uri: server.uri, token: wrong })
        .loadTable(IDENT)
        .catch((e: unknown) => e);
      expect(denied).toMatchObject({ code: 'REST_CATALOG_ACCESS_DENIED' });
      expect((denied as Error).message).toContain('401');
      expect((denied as Error).message).toContain('lake.catalog.token');
      expect((denied as Error).message).not.toContain(wrong);
      expect(redact(`Authorization: Bearer ${wrong}`)).not.toContain(wrong);
      const none = await new RestCatalog({ uri: server.uri }).loadTable(IDENT).catch((e: unknown) => e);
      expect(none).toMatchObject({ code: 'REST_CATALOG_ACCESS_DENIED' });
      expect((none as Error).message).toContain('set lake.catalog.token');
      const closed = await new RestCatalog({ uri: 'http://127.0.0.1:9', timeoutMs: 5_000 })
        .loadTable(IDENT)
        .catch((e: unknown) => e);
      expect(closed).toMatchObject({ code: 'REST_CATALOG_UNREACHABLE' });
      expect((closed as Error).message).toContain('http://127.0.0.1:9');
    });

    it.skipIf(readersMissing !== undefined)(
      "is read by pyiceberg's own REST catalog: every row of every commit, once",
      async () => {
        const { rows } = await runReaderScript<{ rows: Record<string, unknown>[] }>('read_table.py', [
          '--catalog',
          'rest',
          '--uri',
          server.uri,
          '--token',
          token,
          '--table',
          `${IDENT.namespace}.${IDENT.name}`,
          '--order-by',
          'id',
        ]);
        const expected = [...FILE_A, ...FILE_B, [9, 1, 'fig'], [12, 1, 'kiwi']]
          .map((r) => [Number(r[0]), r[1], r[2]])
          .sort((a, b) => (a[0] as number) - (b[0] as number));
        expect(rows.map((r) => [Number(r.id), r.qty, r.name])).toEqual(expected);
      },
      120_000,
    );
  },
);
