/**
 * The lake's Iceberg catalog as the stack deploys it (docs/deploy.md "Iceberg catalog"): for
 * `lake.catalog.type: glue` the Glue database (retained: dropping the stack must never drop the
 * catalog of the lake's tables) and the Glue grants of the roles that commit; for a `rest`
 * catalog signed for `s3tables` (S3 Tables' Iceberg REST endpoint) the S3 Tables grants on the
 * table bucket named by `lake.catalog.warehouse`, refused at synth when that is not a table
 * bucket ARN; with `lake.catalog.createTableBucket: true` the stack also creates that table bucket
 * (unreferenced-file removal on: tidemark never deletes there) and the namespace in it, both
 * retained like the Glue database, in the stack's own account and region. The `file` catalog needs nothing beyond the lake grants: its compare-and-swap is a
 * conditional PutObject (`If-None-Match`), which `s3:PutObject` already allows.
 *
 * Owns: which catalog calls each role may make, on exactly which resources. The Glue grant is the
 * three calls shared/iceberg/glue-catalog.ts makes (it never creates the database: the stack
 * does) on the catalog, the database and the Glue table of each target the role writes
 * (shared/iceberg/glue-names.ts: `{ database }` naming, collisions refused at synth); no `*`.
 * A namespace the stack creates is one the roles need not create: no `s3tables:CreateNamespace`.
 * Never calls AWS: every name comes from the spec.
 */
import {
  Annotations,
  ArnFormat,
  Aws,
  CfnOutput,
  type CfnResource,
  CfnRule,
  Fn,
  RemovalPolicy,
  Stack,
  Token,
} from 'aws-cdk-lib';
import * as glue from 'aws-cdk-lib/aws-glue';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as s3tables from 'aws-cdk-lib/aws-s3tables';
import { Construct } from 'constructs';
import { lakeTargets, type Spec } from '../shared/config/spec.js';
import { ConfigError } from '../shared/contracts/errors.js';
import { glueNamesOf } from '../shared/iceberg/glue-names.js';
import { acknowledge } from './nag.js';

/**
 * What the `glue` catalog calls (shared/iceberg/glue-catalog.ts), and nothing else: a run's
 * GetTable, CreateTable, UpdateTable, and `tidemark check`'s GetDatabase (its `lake glue` line).
 */
export const GLUE_CATALOG_ACTIONS = [
  'glue:GetDatabase',
  'glue:GetTable',
  'glue:CreateTable',
  'glue:UpdateTable',
] as const;

/**
 * S3 Tables actions on the table bucket itself: the Iceberg REST `getConfig` (GetTableBucket) and
 * `createNamespace` (CreateNamespace, which has no namespace condition key, so it cannot share the
 * namespace-scoped statement below).
 */
export const S3TABLES_BUCKET_ACTIONS = ['s3tables:GetTableBucket', 's3tables:CreateNamespace'] as const;

/**
 * The days of S3 Tables' unreferenced-file removal on a table bucket the stack creates: a file no
 * snapshot references (a crashed attempt's data file or manifest, a `reset --delete-objects`'d
 * table's files) becomes noncurrent after `unreferencedDays` and is deleted `noncurrentDays`
 * later. S3 Tables' defaults, written out: the template says what removes tidemark's leftovers.
 */
export const TABLE_BUCKET_UNREFERENCED_FILE_REMOVAL = {
  status: 'Enabled',
  unreferencedDays: 3,
  noncurrentDays: 10,
} as const;

/**
 * S3 Tables actions of the Iceberg REST operations a writer uses, each limited to the spec's
 * namespace by `s3tables:namespace` (every one of them carries that key): `loadNamespaceMetadata`
 * (GetNamespace), `createTable` (CreateTable, PutTableData), `tableExists` (GetTable), `loadTable`
 * (GetTableMetadataLocation, GetTableData), `updateTable` (UpdateTableMetadataLocation,
 * PutTableData, GetTableData). The Table* data actions also cover the data and metadata files,
 * which live in the table bucket's own storage, not in the lake bucket.
 */
export const S3TABLES_NAMESPACE_ACTIONS = [
  's3tables:GetNamespace',
  's3tables:CreateTable',
  's3tables:GetTable',
  's3tables:GetTableMetadataLocation',
  's3tables:UpdateTableMetadataLocation',
  's3tables:GetTableData',
  's3tables:PutTableData',
] as const;

/** A table bucket ARN, as S3 Tables' API pattern has it (service `s3tables` only). */
const TABLE_BUCKET_ARN = /^arn:(aws[-a-z0-9]*):s3tables:([a-z0-9-]+):(\d{12}):bucket\/([a-z0-9_-]{3,63})$/;

/** An S3 Tables table bucket named by `lake.catalog.warehouse`. */
export interface TableBucket {
  readonly arn: string;
  readonly region: string;
  readonly account: string;
  readonly name: string;
}

/**
 * What the stack deploys for the spec's catalog: `glue`, `s3tables` (a `rest` catalog signed for
 * `s3tables`), `other-rest` (a REST catalog with its own auth: nothing in IAM), `file`, or `none`
 * (`lake.tableFormat: plain`: no table is registered anywhere).
 */
export type DeployedCatalog = 'glue' | 's3tables' | 'other-rest' | 'file' | 'none';

export function deployedCatalog(spec: Spec): DeployedCatalog {
  if (spec.lake.tableFormat === 'plain') return 'none';
  const catalog = spec.lake.catalog;
  if (catalog.type === 'rest') return catalog.sigv4?.service === 's3tables' ? 's3tables' : 'other-rest';
  return catalog.type;
}

/**
 * The table bucket of an S3 Tables REST catalog; undefined for every other catalog.
 * @throws ConfigError naming `lake.catalog.warehouse` when it is missing or not a table bucket ARN.
 */
export function tableBucketOf(spec: Spec): TableBucket | undefined {
  const catalog = spec.lake.catalog;
  if (catalog.type === 'rest' && catalog.createTableBucket && catalog.sigv4?.service !== 's3tables') {
    throw new ConfigError(
      'lake.catalog.createTableBucket',
      `is S3 Tables' only: it makes the stack create the table bucket of an S3 Tables catalog (sigv4.service: s3tables, warehouse: the table bucket's ARN), and this REST catalog is ${catalog.sigv4 ? `signed for ${catalog.sigv4.service}` : 'not signed for s3tables'}; remove it`,
    );
  }
  if (catalog.type !== 'rest' || catalog.sigv4?.service !== 's3tables') return undefined;
  const warehouse = catalog.warehouse;
  const m = warehouse === undefined ? null : TABLE_BUCKET_ARN.exec(warehouse);
  if (!m) {
    throw new ConfigError(
      'lake.catalog.warehouse',
      `${warehouse === undefined ? 'is missing' : `"${warehouse}" is not a table bucket ARN`}: S3 Tables' Iceberg REST endpoint (sigv4.service: s3tables) takes the table bucket's ARN as its warehouse, "arn:aws:s3tables:<region>:<account>:bucket/<name>", and the stack scopes its grants to that bucket`,
    );
  }
  return { arn: warehouse!, region: m[2]!, account: m[3]!, name: m[4]! };
}

export interface LakeCatalogProps {
  readonly spec: Spec;
  /** Use an existing Glue database (`tidemark:importGlueDatabase`) instead of creating it. */
  readonly importDatabase: boolean;
}

/** The catalog resources of the lake and the grants of the roles that commit to it. */
export class LakeCatalog extends Construct {
  readonly kind: DeployedCatalog;
  /** The Glue database the stack created; undefined when imported or not a `glue` catalog. */
  readonly database: glue.CfnDatabase | undefined;
  /** The S3 Tables table bucket the stack created (`createTableBucket: true`), else undefined. */
  readonly createdTableBucket: s3tables.CfnTableBucket | undefined;
  /** The namespace the stack created in `createdTableBucket`, else undefined. */
  readonly createdNamespace: s3tables.CfnNamespace | undefined;
  /** The Glue database of the lake's tables (`glue` only). */
  readonly databaseName: string | undefined;
  readonly tableBucket: TableBucket | undefined;
  readonly #glueTables: ReadonlyMap<string, string>;
  readonly #catalogAccount: string;
  /** The REST catalog's namespace (`s3tables` only). */
  readonly #restNamespace: string | undefined;

  constructor(scope: Construct, id: string, props: LakeCatalogProps) {
    super(scope, id);
    const { spec } = props;
    const stack = Stack.of(this);
    this.kind = deployedCatalog(spec);
    this.tableBucket = this.kind === 's3tables' ? tableBucketOf(spec) : undefined;
    const catalog = spec.lake.catalog;
    this.#restNamespace = catalog.type === 'rest' ? catalog.namespace : undefined;
    this.#catalogAccount = (catalog.type === 'glue' ? catalog.catalogId : undefined) ?? stack.account;
    const created =
      this.tableBucket && catalog.type === 'rest' && catalog.createTableBucket
        ? this.#createTableBucket(this.tableBucket, catalog.namespace)
        : undefined;
    this.createdTableBucket = created?.bucket;
    this.createdNamespace = created?.namespace;
    if (this.kind === 'other-rest') {
      Annotations.of(stack).addWarningV2(
        'tidemark:restCatalogAccess',
        `lake.catalog is a REST catalog at ${catalog.type === 'rest' ? catalog.uri : ''} not signed for s3tables: the stack grants nothing for it; its own auth (token, or its IAM for sigv4) must let the function and the CDC tasks commit`,
      );
    } else if (this.kind === 'none' && catalog.type !== 'file') {
      Annotations.of(stack).addWarningV2(
        'tidemark:catalogUnused',
        `lake.catalog (${catalog.type}) is unused with lake.tableFormat: plain: no table is registered in it, so the stack creates and grants nothing for it`,
      );
    }
    if (this.kind !== 'glue' || catalog.type !== 'glue') {
      this.#glueTables = new Map();
      this.database = undefined;
      this.databaseName = undefined;
      return;
    }
    this.databaseName = catalog.database;
    // Every target of the spec lands in the one database: two that map to one Glue table are
    // refused here (GLUE_NAME_COLLISION), before anything deploys.
    const idents = glueNamesOf(spec.tables.flatMap(lakeTargets), { database: catalog.database });
    this.#glueTables = new Map([...idents].map(([target, ident]) => [target, ident.name]));
    const account = stack.account;
    if (!props.importDatabase && !Token.isUnresolved(account) && this.#catalogAccount !== account) {
      throw new ConfigError(
        'lake.catalog.catalogId',
        `is another account's Data Catalog (${this.#catalogAccount}, the stack deploys to ${account}): the stack cannot create the database there; create ${catalog.database} in that account, let its catalog policy admit this account's roles, and deploy with -c tidemark:importGlueDatabase=true`,
      );
    }
    this.database = props.importDatabase
      ? undefined
      : new glue.CfnDatabase(this, 'Database', {
          catalogId: this.#catalogAccount,
          databaseInput: {
            name: catalog.database,
            description: `tidemark ${spec.pipeline}: the Iceberg tables of ${spec.lake.uri}`,
          },
        });
    // The catalog is the only record of which metadata file is each table's current one: a
    // stack deletion or a replacement must leave it (and every table in it) alone.
    this.database?.applyRemovalPolicy(RemovalPolicy.RETAIN);
    new CfnOutput(stack, 'GlueDatabaseName', {
      value: catalog.database,
      description: 'Glue database of the Iceberg tables (Athena: the query context database)',
    });
  }

  /**
   * What a first run or task start must find in place: the Glue database or the S3 Tables namespace
   * the stack created; undefined when it created neither.
   */
  get createdCatalog(): CfnResource | undefined {
    return this.database ?? this.createdNamespace;
  }

  /**
   * Creates `bucket` (the spec's warehouse) and `namespace` in it, both retained. The warehouse ARN
   * names an account and a region: they must be the stack's, checked at synth when the stack's
   * environment is known and by a template rule otherwise (the deployment fails before creating
   * anything), so the ARN the runs use is the one created.
   * @throws ConfigError naming `lake.catalog.warehouse` when its account or region is not the stack's.
   */
  #createTableBucket(
    bucket: TableBucket,
    namespace: string,
  ): { bucket: s3tables.CfnTableBucket; namespace: s3tables.CfnNamespace } {
    const stack = Stack.of(this);
    for (const [what, want, stackValue] of [
      ['account', bucket.account, stack.account],
      ['region', bucket.region, stack.region],
    ] as const) {
      if (!Token.isUnresolved(stackValue) && stackValue !== want) {
        throw new ConfigError(
          'lake.catalog.warehouse',
          `names a table bucket in ${what} ${want} but the stack deploys to ${stackValue}; with createTableBucket the stack creates the table bucket in its own ${what}: write that ${what} into the ARN, or deploy to ${want}`,
        );
      }
    }
    if (Token.isUnresolved(stack.account) || Token.isUnresolved(stack.region)) {
      new CfnRule(this, 'TableBucketInStackEnvironment', {
        assertions: [
          {
            assert: Fn.conditionAnd(
              Fn.conditionEquals(Aws.ACCOUNT_ID, bucket.account),
              Fn.conditionEquals(Aws.REGION, bucket.region),
            ),
            assertDescription: `lake.catalog.warehouse (${bucket.arn}) names another account or region than the stack's: with createTableBucket the stack creates the table bucket in its own account and region`,
          },
        ],
      });
    }
    const tableBucket = new s3tables.CfnTableBucket(this, 'TableBucket', {
      tableBucketName: bucket.name,
      encryptionConfiguration: { sseAlgorithm: 'AES256' },
      unreferencedFileRemoval: { ...TABLE_BUCKET_UNREFERENCED_FILE_REMOVAL },
    });
    const created = new s3tables.CfnNamespace(this, 'Namespace', {
      tableBucketArn: tableBucket.attrTableBucketArn,
      namespace,
    });
    // Like the Glue database: the table bucket is the only record of which metadata file is each
    // table's current one (and holds the tables' files); a stack deletion must leave it alone.
    tableBucket.applyRemovalPolicy(RemovalPolicy.RETAIN);
    created.applyRemovalPolicy(RemovalPolicy.RETAIN);
    new CfnOutput(stack, 'TableBucketArn', {
      value: tableBucket.attrTableBucketArn,
      description: `S3 Tables table bucket of the Iceberg tables (namespace ${namespace}; Athena: catalog s3tablescatalog/${bucket.name})`,
    });
    return { bucket: tableBucket, namespace: created };
  }

  /**
   * Grants `role` the catalog calls of committing to `targets` (the lake tables it writes):
   * nothing for `file`, `other-rest` and `none`, nor for a role that writes no table.
   */
  grant(role: iam.IRole, targets: readonly string[]): void {
    if (targets.length === 0) return;
    if (this.kind === 'glue') {
      role.addToPrincipalPolicy(
        new iam.PolicyStatement({
          actions: [...GLUE_CATALOG_ACTIONS],
          resources: [
            this.#glueArn('catalog'),
            this.#glueArn('database', this.databaseName!),
            ...[...new Set(targets)].map((t) =>
              this.#glueArn('table', `${this.databaseName}/${this.#glueTable(t)}`),
            ),
          ],
        }),
      );
    } else if (this.kind === 's3tables') {
      const bucket = this.tableBucket!;
      // The namespace the stack created is there before any run: creating it is not the roles' call.
      const bucketActions = this.createdNamespace
        ? S3TABLES_BUCKET_ACTIONS.filter((a) => a !== 's3tables:CreateNamespace')
        : S3TABLES_BUCKET_ACTIONS;
      role.addToPrincipalPolicy(
        new iam.PolicyStatement({ actions: [...bucketActions], resources: [bucket.arn] }),
      );
      role.addToPrincipalPolicy(
        new iam.PolicyStatement({
          actions: [...S3TABLES_NAMESPACE_ACTIONS],
          resources: [bucket.arn, `${bucket.arn}/table/*`],
          conditions: { StringEquals: { 's3tables:namespace': this.#restNamespace! } },
        }),
      );
      acknowledge(
        role,
        `AwsSolutions-IAM5[Resource::${bucket.arn}/table/*]`,
        `S3 Tables names a table's ARN by the id it assigns when the table is created (".../table/<table id>"), unknown at synth; the grant is on the tables of the one table bucket ${bucket.name} and limited by the condition s3tables:namespace to the spec's namespace.`,
      );
    }
  }

  #glueTable(target: string): string {
    const name = this.#glueTables.get(target);
    if (name === undefined) throw new Error(`LakeCatalog: ${target} is not a target of the spec`);
    return name;
  }

  #glueArn(resource: 'catalog' | 'database' | 'table', resourceName?: string): string {
    return Stack.of(this).formatArn({
      service: 'glue',
      resource,
      account: this.#catalogAccount,
      ...(resourceName === undefined
        ? { arnFormat: ArnFormat.NO_RESOURCE_NAME }
        : { resourceName, arnFormat: ArnFormat.SLASH_RESOURCE_NAME }),
    });
  }
}
