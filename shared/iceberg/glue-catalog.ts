/**
 * The `glue` catalog: the AWS Glue Data Catalog, which Athena, EMR and Redshift Spectrum read
 * (docs/iceberg.md "Catalogs: glue", decision 0024). The table's metadata files live in the lake
 * store at `<table>/metadata/<5-digit version>-<uuid>.metadata.json` (Iceberg's naming: the uuid
 * makes every name unique, so a plain put, no conditional write); Glue holds which one is current
 * in the table's `metadata_location` parameter, as Iceberg's own GlueCatalog does.
 *
 * Owns: the Glue calls. The table is created on first commit (CreateTable, TableType
 * EXTERNAL_TABLE, `table_type=ICEBERG`, the columns of the current schema as Glue types: Athena
 * needs them); each commit is an UpdateTable guarded by the VersionId of the table as loaded (the
 * compare-and-swap: Glue answers ConcurrentModificationException when the table moved) with
 * `SkipArchive: true`, since an archived version per commit reaches the account's 1,000,000 table
 * versions within a week at 100 tables committing each minute. Before the UpdateTable the commit
 * also checks that Glue's `metadata_location` still is the base's, as Iceberg's GlueCatalog does.
 * A ConcurrentModificationException or a vanished table is `conflict`; a reply that never came (a
 * timeout, a 5xx after the SDK's retries, throttling) is `unknown`; access, credentials, region and
 * endpoint faults and invalid input throw `GLUE_*` codes (shared/aws/errors.ts classifies them).
 *
 * Never deletes metadata files (a lost race leaves its file unreferenced, as in Iceberg) and never
 * creates the Glue database (the CDK stack does; `GLUE_DATABASE_MISSING` otherwise;
 * `probeDatabase` is `tidemark check`'s look at it). The `version` of a `LoadedTable` is Glue's
 * VersionId.
 */
import { randomUUID } from 'node:crypto';
import {
  type Column,
  CreateTableCommand,
  GetDatabaseCommand,
  GetTableCommand,
  GlueClient,
  type GlueClientConfig,
  type Table,
  type TableInput,
  UpdateTableCommand,
} from '@aws-sdk/client-glue';
import { classifyAwsError } from '../aws/errors.js';
import type { ErrorCode } from '../contracts/error-codes.js';
import { SinkError } from '../contracts/errors.js';
import type { ObjectStore } from '../sink/object-store.js';
import type { Catalog, CommitOutcome, CreateOutcome, LoadedTable, TableIdent } from './catalog.js';
import { identText } from './catalog.js';
import { parseTableMetadata, serializeTableMetadata } from './metadata-json.js';
import type { IcebergTableMetadata, IcebergType } from './spec.js';

/** Glue table parameters of an Iceberg table (Iceberg's BaseMetastoreTableOperations names). */
export const TABLE_TYPE_PARAM = 'table_type';
export const METADATA_LOCATION_PARAM = 'metadata_location';
export const PREVIOUS_METADATA_LOCATION_PARAM = 'previous_metadata_location';
const METADATA_FOLDER = 'metadata';
const METADATA_FILE = /\/(\d+)-[^/]*\.metadata\.json$/;

/** Glue error names after which a commit certainly did not happen and a retry does not cure it. */
const INVALID_INPUT = new Set([
  'InvalidInputException',
  'ValidationException',
  'ResourceNumberLimitExceededException',
]);
/** The code of each classified AWS failure (shared/aws/errors.ts). */
const GLUE_CODES = {
  UNREACHABLE: 'GLUE_UNREACHABLE',
  WRONG_SERVICE: 'GLUE_WRONG_SERVICE',
  REGION_MISSING: 'GLUE_REGION_MISSING',
  CREDENTIALS: 'GLUE_CREDENTIALS',
  ACCESS_DENIED: 'GLUE_ACCESS_DENIED',
  WRONG_REGION: 'GLUE_WRONG_REGION',
  NOT_FOUND: 'GLUE_DATABASE_MISSING',
} as const satisfies Record<string, ErrorCode>;

export interface GlueCatalogOptions {
  /** The lake store the metadata files go to. */
  readonly store: ObjectStore;
  /** The table's folder as a key of `store`, e.g. `lake/public.orders` (no trailing `/`). */
  readonly tableKey: (ident: TableIdent) => string;
  /** A ready client; when given, the connection options below are ignored. */
  readonly client?: GlueClient;
  readonly region?: string;
  /** e.g. `http://127.0.0.1:5000` for moto; default: Glue's regional endpoint. */
  readonly endpoint?: string;
  /** Static credentials; default: the SDK's credential chain. */
  readonly credentials?: GlueClientConfig['credentials'];
  /** The Data Catalog's account id; default: the caller's account. */
  readonly catalogId?: string;
  /** The spec field that configures the catalog, named in messages. Default `lake.catalog`. */
  readonly field?: string;
}

/** The `glue` catalog over one Glue Data Catalog and the lake's object store. */
export class GlueCatalog implements Catalog {
  readonly kind = 'glue';
  readonly client: GlueClient;
  private readonly store: ObjectStore;
  private readonly tableKey: (ident: TableIdent) => string;
  private readonly endpoint: string | undefined;
  private readonly catalogId: string | undefined;
  private readonly field: string;

  constructor(options: GlueCatalogOptions) {
    this.store = options.store;
    this.tableKey = (ident) => options.tableKey(ident).replace(/\/+$/, '');
    this.endpoint = options.endpoint;
    this.catalogId = options.catalogId;
    this.field = options.field ?? 'lake.catalog';
    this.client =
      options.client ??
      new GlueClient({
        ...(options.region ? { region: options.region } : {}),
        ...(options.endpoint ? { endpoint: options.endpoint } : {}),
        ...(options.credentials ? { credentials: options.credentials } : {}),
      });
  }

  /** The table's location as its metadata records it: the folder's URI. */
  location(ident: TableIdent): string {
    return this.store.uri(this.tableKey(ident));
  }

  async loadTable(ident: TableIdent): Promise<LoadedTable | undefined> {
    const table = await this.getTable(ident);
    if (table === undefined) return undefined;
    const location = this.metadataLocationOf(ident, table);
    const bytes = await this.store.get(this.keyOf(ident, location));
    if (bytes === undefined) {
      throw new SinkError(
        'ICEBERG_METADATA_INVALID',
        identText(ident),
        `the Glue table ${identText(ident)} names the metadata file ${location}, which is missing from the lake store; restore it, or point the table's ${METADATA_LOCATION_PARAM} at the newest metadata file in its metadata/ folder`,
      );
    }
    return {
      metadata: parseTableMetadata(new TextDecoder().decode(bytes), location),
      metadataLocation: location,
      version: table.VersionId ?? '',
    };
  }

  async createTable(ident: TableIdent, metadata: IcebergTableMetadata): Promise<CreateOutcome> {
    if ((await this.getTable(ident)) !== undefined) return { status: 'exists' };
    const location = await this.writeMetadata(ident, 0, metadata);
    try {
      await this.client.send(
        new CreateTableCommand({
          ...(this.catalogId ? { CatalogId: this.catalogId } : {}),
          DatabaseName: ident.namespace,
          TableInput: tableInput(ident, metadata, { [METADATA_LOCATION_PARAM]: location }),
        }),
      );
    } catch (e) {
      if (errorName(e) === 'AlreadyExistsException') return { status: 'exists' };
      if (errorName(e) === 'EntityNotFoundException')
        throw this.databaseMissing(ident.namespace, identText(ident), e);
      throw this.failed('CreateTable', ident, e);
    }
    return { status: 'created', table: await this.loadedAfter(ident, metadata, location, '') };
  }

  async commitTable(
    ident: TableIdent,
    base: LoadedTable,
    updated: IcebergTableMetadata,
  ): Promise<CommitOutcome> {
    let current: Table | undefined;
    try {
      current = await this.getTable(ident);
    } catch (e) {
      if (e instanceof SinkError && e.code === 'GLUE_UNREACHABLE') return { status: 'unknown', cause: e };
      throw e;
    }
    // Dropped, or moved on: the reload sees which.
    if (current === undefined || current.Parameters?.[METADATA_LOCATION_PARAM] !== base.metadataLocation) {
      return { status: 'conflict' };
    }
    let location: string;
    try {
      location = await this.writeMetadata(ident, nextVersion(base), updated);
    } catch (e) {
      // Nothing is committed without the file; a transient store fault is retried like a lost reply.
      if (e instanceof SinkError && (e.code === 'SINK_UNREACHABLE' || e.code === 'SINK_STORE_FAILED')) {
        return { status: 'unknown', cause: e };
      }
      throw e;
    }
    try {
      await this.client.send(
        new UpdateTableCommand({
          ...(this.catalogId ? { CatalogId: this.catalogId } : {}),
          DatabaseName: ident.namespace,
          VersionId: base.version,
          SkipArchive: true,
          TableInput: tableInput(ident, updated, {
            ...current.Parameters,
            [METADATA_LOCATION_PARAM]: location,
            [PREVIOUS_METADATA_LOCATION_PARAM]: base.metadataLocation,
          }),
        }),
      );
    } catch (e) {
      const name = errorName(e);
      if (name === 'ConcurrentModificationException' || name === 'EntityNotFoundException') {
        return { status: 'conflict' };
      }
      if (INVALID_INPUT.has(name)) throw this.failed('UpdateTable', ident, e);
      const failure = this.classify('UpdateTable', ident, e);
      if (failure && failure.kind !== 'UNREACHABLE') throw this.failed('UpdateTable', ident, e);
      return { status: 'unknown', cause: e };
    }
    return { status: 'committed', table: await this.loadedAfter(ident, updated, location, base.version) };
  }

  /**
   * The table as this writer left it. Its VersionId is read back (UpdateTable does not return
   * it); when that read fails or another commit followed, the token is one Glue never issued, so
   * a commit built on it is a `conflict` and reloads: safe, never wrong.
   */
  private async loadedAfter(
    ident: TableIdent,
    metadata: IcebergTableMetadata,
    location: string,
    baseVersion: string,
  ): Promise<LoadedTable> {
    let version = `${baseVersion}+`;
    try {
      const after = await this.getTable(ident);
      if (after?.Parameters?.[METADATA_LOCATION_PARAM] === location && after.VersionId)
        version = after.VersionId;
    } catch {
      // The commit stands; the token stays one that only conflicts.
    }
    return { metadata, metadataLocation: location, version };
  }

  /**
   * GetDatabase of `database`, for `tidemark check`: the database a lake's tables go into exists
   * and the caller may read it. Its location, if any, is returned.
   * @throws SinkError `GLUE_DATABASE_MISSING`, or the `GLUE_*` code of a classified failure
   *   (access, credentials, region, endpoint), else `GLUE_FAILED`.
   */
  async probeDatabase(database: string): Promise<{ readonly locationUri?: string }> {
    try {
      const out = await this.client.send(
        new GetDatabaseCommand({
          ...(this.catalogId ? { CatalogId: this.catalogId } : {}),
          Name: database,
        }),
      );
      return out.Database?.LocationUri ? { locationUri: out.Database.LocationUri } : {};
    } catch (e) {
      if (errorName(e) === 'EntityNotFoundException') throw this.databaseMissing(database, database, e);
      const failure = classifyAwsError(e, {
        service: 'Glue',
        field: this.field,
        resource: `database ${database}${this.catalogId ? ` of catalog ${this.catalogId}` : ''}`,
        action: 'glue:GetDatabase',
        endpoint: this.endpoint,
      });
      if (failure && failure.kind !== 'NOT_FOUND')
        throw new SinkError(
          GLUE_CODES[failure.kind],
          database,
          `GetDatabase ${database}: ${failure.message}`,
          {
            cause: e,
          },
        );
      if (failure) throw this.databaseMissing(database, database, e);
      const why = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      throw new SinkError(
        'GLUE_FAILED',
        database,
        `GetDatabase of the Glue database ${database} failed (${why}); check ${this.field}.region / ${this.field}.endpoint and that the role may glue:GetDatabase on it`,
        { cause: e },
      );
    }
  }

  /** GetTable; undefined when the table (or its database) does not exist. */
  private async getTable(ident: TableIdent): Promise<Table | undefined> {
    try {
      const out = await this.client.send(
        new GetTableCommand({
          ...(this.catalogId ? { CatalogId: this.catalogId } : {}),
          DatabaseName: ident.namespace,
          Name: ident.name,
        }),
      );
      return out.Table;
    } catch (e) {
      if (errorName(e) === 'EntityNotFoundException') return undefined;
      throw this.failed('GetTable', ident, e);
    }
  }

  private metadataLocationOf(ident: TableIdent, table: Table): string {
    const type = table.Parameters?.[TABLE_TYPE_PARAM];
    const location = table.Parameters?.[METADATA_LOCATION_PARAM];
    if (type?.toUpperCase() !== 'ICEBERG' || !location) {
      throw new SinkError(
        'GLUE_TABLE_NOT_ICEBERG',
        identText(ident),
        `the Glue table ${identText(ident)} is not an Iceberg table (${TABLE_TYPE_PARAM}=${type ?? 'unset'}, ${location ? 'with' : 'no'} ${METADATA_LOCATION_PARAM}); tidemark does not write over it: drop it in Glue, or give the lake table another target`,
      );
    }
    return location;
  }

  /** The store key of a metadata URI in this lake. */
  private keyOf(ident: TableIdent, uri: string): string {
    const root = this.store.uri('');
    if (!uri.startsWith(root)) {
      throw new SinkError(
        'ICEBERG_METADATA_INVALID',
        identText(ident),
        `the Glue table ${identText(ident)} names the metadata file ${uri}, outside the lake ${root}; tidemark commits only to tables in its lake`,
      );
    }
    return uri.slice(root.length);
  }

  /** Writes `<table>/metadata/<version>-<uuid>.metadata.json` (a unique name: a plain put). */
  private async writeMetadata(
    ident: TableIdent,
    version: number,
    metadata: IcebergTableMetadata,
  ): Promise<string> {
    const key = `${this.tableKey(ident)}/${METADATA_FOLDER}/${String(version).padStart(5, '0')}-${randomUUID()}.metadata.json`;
    await this.store.put(key, new TextEncoder().encode(serializeTableMetadata(metadata)));
    return this.store.uri(key);
  }

  private classify(op: string, ident: TableIdent, cause: unknown) {
    return classifyAwsError(cause, {
      service: 'Glue',
      field: this.field,
      resource: `table ${identText(ident)}`,
      action: `glue:${op}`,
      endpoint: this.endpoint,
    });
  }

  private failed(op: string, ident: TableIdent, cause: unknown): SinkError {
    const failure = this.classify(op, ident, cause);
    if (failure) {
      if (failure.kind === 'NOT_FOUND') return this.databaseMissing(ident.namespace, identText(ident), cause);
      return new SinkError(
        GLUE_CODES[failure.kind],
        identText(ident),
        `${op} ${identText(ident)}: ${failure.message}`,
        {
          cause,
        },
      );
    }
    const why = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
    return new SinkError(
      'GLUE_FAILED',
      identText(ident),
      `${op} of the Glue table ${identText(ident)} failed (${why}); check ${this.field}.region / ${this.field}.endpoint and that the role may glue:${op} on it`,
      { cause },
    );
  }

  /** `GLUE_DATABASE_MISSING` for `database`; `subject` is the table that needed it (or the database). */
  private databaseMissing(database: string, subject: string, cause: unknown): SinkError {
    return new SinkError(
      'GLUE_DATABASE_MISSING',
      subject,
      `the Glue database ${database} does not exist${this.endpoint ? ` at ${this.endpoint}` : ''}; create it (cdk deploy does; or aws glue create-database --database-input Name=${database}) or fix ${this.field}.database (docs/iceberg.md)`,
      { cause },
    );
  }
}

/** The number of the next metadata file: the base's plus one (a foreign name: the log's length). */
function nextVersion(base: LoadedTable): number {
  const m = METADATA_FILE.exec(base.metadataLocation);
  return m && m[1]!.length <= 9 ? Number(m[1]) + 1 : base.metadata['metadata-log'].length + 1;
}

/** The Glue table definition of `metadata`: Iceberg's parameters, location, the current schema's columns. */
function tableInput(
  ident: TableIdent,
  metadata: IcebergTableMetadata,
  parameters: Record<string, string>,
): TableInput {
  const schema = metadata.schemas.find((s) => s['schema-id'] === metadata['current-schema-id']);
  const columns: Column[] = (schema?.fields ?? []).map((f) => ({
    Name: f.name,
    Type: glueTypeOfIceberg(f.type),
    ...(f.doc ? { Comment: f.doc } : {}),
    Parameters: {
      'iceberg.field.id': String(f.id),
      'iceberg.field.optional': String(!f.required),
      'iceberg.field.current': 'true',
    },
  }));
  return {
    Name: ident.name,
    TableType: 'EXTERNAL_TABLE',
    Parameters: { ...parameters, [TABLE_TYPE_PARAM]: 'ICEBERG', EXTERNAL: 'TRUE' },
    StorageDescriptor: { Location: metadata.location, Columns: columns },
  };
}

/** An Iceberg type as a Glue (Hive) type, as Iceberg's IcebergToGlueConverter writes it. */
export function glueTypeOfIceberg(t: IcebergType): string {
  if (typeof t === 'string') {
    const decimal = /^decimal\((\d+),\s*(\d+)\)$/.exec(t);
    if (decimal) return `decimal(${decimal[1]},${decimal[2]})`;
    if (t.startsWith('fixed[')) return 'binary';
    switch (t) {
      case 'long':
        return 'bigint';
      case 'timestamptz':
        return 'timestamp';
      case 'time':
      case 'uuid':
        return 'string';
      default:
        return t;
    }
  }
  switch (t.type) {
    case 'struct':
      return `struct<${t.fields.map((f) => `${f.name}:${glueTypeOfIceberg(f.type)}`).join(',')}>`;
    case 'list':
      return `array<${glueTypeOfIceberg(t.element)}>`;
    case 'map':
      return `map<${glueTypeOfIceberg(t.key)},${glueTypeOfIceberg(t.value)}>`;
  }
}

function errorName(e: unknown): string {
  return (e as { name?: string } | undefined)?.name ?? '';
}
