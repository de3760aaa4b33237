/**
 * The `glue` catalog (shared/iceberg/glue-catalog.ts) through moto's Glue and S3 servers
 * (test/harness/moto-server.ts): the table created on first commit as an Iceberg table Athena can
 * read, each commit an UpdateTable that moves `metadata_location`, loads that follow it, and
 * pyiceberg's own GlueCatalog pointed at moto reading every row (skipped when .venv-readers is
 * missing, like moto itself).
 *
 * moto ignores UpdateTable's VersionId (docs/test-readers.md), which is the whole compare-and-swap
 * on AWS. `versionIdShim` puts Glue's rule back in the test's clients: before an UpdateTable it
 * reads the table's current VersionId and throws ConcurrentModificationException, as Glue does,
 * when the request names another. Its `beforeUpdate` hook orders two committers explicitly: the
 * other writer commits between our load (and our metadata_location check) and our UpdateTable, so
 * the race is deterministic; commitWithRetry must then reload and rebase, losing nothing. Its
 * `loseReply` lets an UpdateTable land and hides the reply (a timeout): the reload must find the
 * commit, not apply it twice. Then the refusals: a missing database, a Hive table of the same
 * name, an endpoint where nothing listens.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  ConcurrentModificationException,
  CreateDatabaseCommand,
  CreateTableCommand,
  GetTableCommand,
  GlueClient,
  UpdateTableCommand,
} from '@aws-sdk/client-glue';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyAppend, type StagedAppend } from '../../shared/iceberg/append.js';
import type { TableIdent } from '../../shared/iceberg/catalog.js';
import { GlueCatalog } from '../../shared/iceberg/glue-catalog.js';
import {
  COMMIT_ID_SUMMARY_KEY,
  newTableMetadata,
  writerCommitProperty,
} from '../../shared/iceberg/metadata.js';
import { icebergSchemaOf } from '../../shared/iceberg/schema.js';
import type { IcebergSchema } from '../../shared/iceberg/spec.js';
import type { TableFolder } from '../../shared/iceberg/table-folder.js';
import { S3ObjectStore } from '../../shared/sink/s3-object-store.js';
import {
  MOTO_CREDENTIALS,
  MOTO_REGION,
  type MotoServer,
  motoS3Client,
  motoUnavailable,
  startMotoServer,
} from '../harness/moto-server.js';
import { FILE_A, FILE_B, stageRows, TABLE } from './iceberg-table-fixture.js';

const execFileP = promisify(execFile);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const PYTHON = join(ROOT, '.venv-readers', 'bin', 'python');
const skip = motoUnavailable();

const BUCKET = 'glue-lake';
const IDENT: TableIdent = { namespace: 'tidemark_public', name: 'orders' };
const TABLE_KEY = 'lake/public.orders';

/** A Glue client for moto. */
function glueClient(endpoint: string): GlueClient {
  return new GlueClient({ endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
}

interface ShimHook {
  /** Runs before the next UpdateTable (once). */
  beforeUpdate?: () => Promise<void>;
  /** The next UpdateTable lands, and its reply is lost: the client sees a timeout (once). */
  loseReply?: boolean;
  /** Every UpdateTable's input, when set. */
  updates?: UpdateTableCommand['input'][];
}

/**
 * Glue's VersionId rule, which moto leaves out: an UpdateTable naming a VersionId other than the
 * table's current one fails with ConcurrentModificationException. `hook.beforeUpdate`, when set,
 * runs first (once: it is cleared before it runs).
 */
function versionIdShim(client: GlueClient, endpoint: string, hook: ShimHook) {
  const reader = glueClient(endpoint);
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === UpdateTableCommand.name) {
        const run = hook.beforeUpdate;
        hook.beforeUpdate = undefined;
        if (run) await run();
        const input = args.input as UpdateTableCommand['input'];
        hook.updates?.push(input);
        const current = await reader.send(
          new GetTableCommand({ DatabaseName: input.DatabaseName, Name: input.TableInput!.Name }),
        );
        if (input.VersionId !== undefined && input.VersionId !== current.Table?.VersionId) {
          throw new ConcurrentModificationException({
            message: `VersionId ${input.VersionId} is not the current version ${current.Table?.VersionId}`,
            $metadata: { httpStatusCode: 400 },
          });
        }
      }
      const out = await next(args);
      if (context.commandName === UpdateTableCommand.name && hook.loseReply) {
        hook.loseReply = false;
        throw Object.assign(new Error('the reply was lost (test)'), { name: 'TimeoutError' });
      }
      return out;
    },
    { step: 'initialize', name: 'versionIdShim' },
  );
}

describe.skipIf(skip !== undefined)(`glue catalog on moto ${skip ?? ''}`, () => {
  let moto: MotoServer;
  let store: S3ObjectStore;
  let folder: TableFolder;
  let schema: IcebergSchema;
  const ours: ShimHook & { updates: UpdateTableCommand['input'][] } = {
    updates: [],
  };
  let catalog: GlueCatalog;
  let other: GlueCatalog;
  let glue: GlueClient;

  beforeAll(async () => {
    moto = await startMotoServer();
    const s3 = motoS3Client(moto.endpoint);
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    store = new S3ObjectStore({ bucket: BUCKET, client: s3 });
    folder = { store, key: TABLE_KEY };
    glue = glueClient(moto.endpoint);
    await glue.send(new CreateDatabaseCommand({ DatabaseInput: { Name: IDENT.namespace } }));
    const mine = glueClient(moto.endpoint);
    versionIdShim(mine, moto.endpoint, ours);
    catalog = new GlueCatalog({ store, tableKey: () => TABLE_KEY, client: mine });
    const theirs = glueClient(moto.endpoint);
    versionIdShim(theirs, moto.endpoint, {});
    other = new GlueCatalog({ store, tableKey: () => TABLE_KEY, client: theirs });
    schema = icebergSchemaOf(TABLE).schema;
  }, 60_000);
  afterAll(async () => {
    await moto?.stop();
  });

  /** Writes one data file of `rows` to the lake and stages its commit. */
  const stage = (
    writerId: string,
    commitId: string,
    rows: readonly (readonly unknown[])[],
    posPrefix: string,
  ) => stageRows(folder, schema, { writerId, commitId }, rows, posPrefix);
  const apply = (through: GlueCatalog, staged: StagedAppend) =>
    applyAppend(through, IDENT, folder, staged, { nowMs: Date.now, retry: { sleep: async () => {} } });
  const glueTable = async () =>
    (await glue.send(new GetTableCommand({ DatabaseName: IDENT.namespace, Name: IDENT.name }))).Table!;

  it('creates the table on first commit: an Iceberg table with its columns, Athena-style', async () => {
    expect(await catalog.loadTable(IDENT)).toBeUndefined();
    const of = icebergSchemaOf(TABLE);
    const created = await catalog.createTable(
      IDENT,
      newTableMetadata({
        location: catalog.location(IDENT),
        schema: of.schema,
        lastColumnId: of.lastColumnId,
        properties: {},
        uuid: randomUUID(),
        nowMs: Date.now(),
      }),
    );
    expect(created.status).toBe('created');
    const t = await glueTable();
    expect(t.TableType).toBe('EXTERNAL_TABLE');
    expect(t.Parameters?.table_type).toBe('ICEBERG');
    expect(t.Parameters?.metadata_location).toMatch(
      new RegExp(`^s3://${BUCKET}/${TABLE_KEY}/metadata/00000-[0-9a-f-]{36}\\.metadata\\.json$`),
    );
    expect(t.StorageDescriptor?.Location).toBe(`s3://${BUCKET}/${TABLE_KEY}`);
    const columns = t.StorageDescriptor?.Columns ?? [];
    expect(columns.map((c) => c.Name)).toEqual(schema.fields.map((f) => f.name));
    expect(columns[0]).toMatchObject({ Name: TABLE.columns[0]!.name, Type: 'bigint' });
    const again = await catalog.createTable(IDENT, (await catalog.loadTable(IDENT))!.metadata);
    expect(again.status).toBe('exists');
  });

  it('commits by UpdateTable: metadata_location moves, the previous one is kept, loads follow', async () => {
    const before = (await catalog.loadTable(IDENT))!;
    const result = await apply(catalog, await stage('shop.app', 'i0000000001-a1', FILE_A, 'i0000000001'));
    expect(result.status).toBe('committed');
    const t = await glueTable();
    expect(t.Parameters?.metadata_location).toMatch(/\/metadata\/00001-[0-9a-f-]{36}\.metadata\.json$/);
    expect(t.Parameters?.previous_metadata_location).toBe(before.metadataLocation);
    const loaded = (await catalog.loadTable(IDENT))!;
    expect(loaded.metadataLocation).toBe(t.Parameters?.metadata_location);
    expect(loaded.version).toBe(t.VersionId);
    expect(loaded.version).not.toBe(before.version);
    expect(loaded.metadata.snapshots).toHaveLength(1);
    expect(loaded.metadata.properties[writerCommitProperty('shop.app')]).toBe('i0000000001-a1');
    // What moto cannot check: the update named the loaded version and skipped Glue's archive.
    expect(ours.updates).toHaveLength(1);
    expect(ours.updates[0]).toMatchObject({ VersionId: before.version, SkipArchive: true });
    expect(ours.updates[0]!.TableInput?.TableType).toBe('EXTERNAL_TABLE');
  });

  it('turns a stale VersionId into a conflict (the shim holds moto to Glue)', async () => {
    const stale = (await catalog.loadTable(IDENT))!;
    const loaded = { ...stale, version: String(Number(stale.version) - 1) };
    const outcome = await catalog.commitTable(IDENT, loaded, stale.metadata);
    expect(outcome.status).toBe('conflict');
    expect((await glueTable()).Parameters?.metadata_location).toBe(stale.metadataLocation);
  });

  it("rebases a commit whose UpdateTable lost the race to another writer's, losing neither", async () => {
    const theirs = await stage(
      'other.app',
      'i0000000009-b1',
      [[9, 1, 'fig', '1.00', null, 0n, 0, 1, true, null]],
      'i0000000009',
    );
    const mine = await stage('shop.app', 'i0000000004-a1', FILE_B, 'i0000000004');
    let raced = false;
    ours.beforeUpdate = async () => {
      // After our load and metadata_location check, before our UpdateTable reaches Glue.
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
    expect(table.snapshots.at(-1)!.summary['total-records']).toBe(String(FILE_A.length + FILE_B.length + 1));
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
    ours.loseReply = true;
    const result = await apply(catalog, staged);
    expect(ours.loseReply).toBe(false);
    expect(result.status).toBe('already-committed');
    expect(result.attempts).toBe(2); // the second attempt's reload found it
    const table = (await catalog.loadTable(IDENT))!.metadata;
    expect(table.snapshots).toHaveLength(before + 1);
    expect(table.snapshots.at(-1)!.summary[COMMIT_ID_SUMMARY_KEY]).toBe('i0000000012-c1');
  });

  it('refuses what it must not write to, with codes an operator can act on', async () => {
    // No such database: never created by tidemark.
    const missing = { namespace: 'no_such_db', name: 't' };
    const metadata = (await catalog.loadTable(IDENT))!.metadata;
    await expect(catalog.createTable(missing, metadata)).rejects.toMatchObject({
      code: 'GLUE_DATABASE_MISSING',
    });
    // A Hive table of the same name: not overwritten.
    await glue.send(
      new CreateTableCommand({
        DatabaseName: IDENT.namespace,
        TableInput: {
          Name: 'hive_orders',
          TableType: 'EXTERNAL_TABLE',
          Parameters: { classification: 'parquet' },
        },
      }),
    );
    const hive = { namespace: IDENT.namespace, name: 'hive_orders' };
    await expect(catalog.loadTable(hive)).rejects.toMatchObject({ code: 'GLUE_TABLE_NOT_ICEBERG' });
    // Nothing listening at the endpoint.
    const closed = new GlueCatalog({
      store,
      tableKey: () => TABLE_KEY,
      endpoint: 'http://127.0.0.1:9',
      region: MOTO_REGION,
      credentials: MOTO_CREDENTIALS,
    });
    const err = await closed.loadTable(IDENT).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'GLUE_UNREACHABLE' });
    expect((err as Error).message).toContain('http://127.0.0.1:9');
  });

  it.skipIf(!existsSync(PYTHON))(
    'is read by pyiceberg through its own Glue catalog: every row of every commit, once',
    async () => {
      const { stdout } = await execFileP(
        PYTHON,
        [
          join(ROOT, 'test', 'readers', 'read_table.py'),
          '--catalog',
          'glue',
          '--glue-endpoint',
          moto.endpoint,
          '--s3-endpoint',
          moto.endpoint,
          '--region',
          MOTO_REGION,
          '--access-key-id',
          MOTO_CREDENTIALS.accessKeyId,
          '--secret-access-key',
          MOTO_CREDENTIALS.secretAccessKey,
          '--table',
          `${IDENT.namespace}.${IDENT.name}`,
          '--order-by',
          'id',
        ],
        { cwd: ROOT, maxBuffer: 64 * 2 ** 20 },
      );
      const { rows } = JSON.parse(stdout) as { rows: Record<string, unknown>[] };
      expect(rows.map((r) => Number(r.id))).toEqual([1, 2, 3, 4, 5, 9, 12]);
    },
    120_000,
  );
});
