/**
 * The CloudFormation stack of one pipeline, built from a parsed spec: the state table (DynamoDB),
 * the lake bucket (S3), one Lambda for all incremental tables, one EventBridge Scheduler schedule
 * per incremental table, and, when the spec has cdc tables, one Fargate service per cdc source
 * (./cdc-service.ts); the lake's Iceberg catalog (./lake-catalog.ts: the retained Glue database,
 * or S3 Tables grants) and, for a catalog Athena reads, an Athena workgroup
 * (./athena-workgroup.ts); least-privilege IAM (state access scoped by key prefix) and CloudWatch
 * alarms. The AwsSolutions cdk-nag pack passes; every suppression carries its reason here.
 *
 * Owns: what `cdk deploy` creates and the permissions it grants. Reads only the spec, the CDK
 * context (./context.ts) and the driver registry's static capabilities; never opens a database or
 * calls AWS (synth must work without credentials). Deployment-only rules (no local state, no
 * file:// lake) are enforced here, as ConfigErrors naming the spec field, so synth fails before
 * anything deploys.
 * Glue tables are not declared here: they need each table's columns, which only a database could
 * tell; the `glue` catalog creates each one at its first commit (docs/deploy.md).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  Annotations,
  type CfnElement,
  CfnOutput,
  Duration,
  RemovalPolicy,
  Stack,
  type StackProps,
  Tags,
  Token,
} from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cloudwatchActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as ecs from 'aws-cdk-lib/aws-ecs';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as scheduler from 'aws-cdk-lib/aws-scheduler';
import * as schedulerTargets from 'aws-cdk-lib/aws-scheduler-targets';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as snsSubscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import { assertModes } from '../shared/config/modes.js';
import {
  cdcTables,
  findTable,
  type IncrementalTableSpec,
  incrementalTables,
  lakeTargets,
  type Spec,
  tableTarget,
} from '../shared/config/spec.js';
import { ConfigError } from '../shared/contracts/errors.js';
import { AthenaWorkGroup, DEFAULT_SCAN_CUTOFF_GIB } from './athena-workgroup.js';
import { type CdcNetwork, CdcServices, defaultCdcImage } from './cdc-service.js';
import {
  CONTEXT,
  contextFlag,
  contextList,
  contextNumber,
  contextString,
  memoryMb,
  type Network,
  vpcNetwork,
} from './context.js';
import { LakeCatalog, tableBucketOf } from './lake-catalog.js';
import { acknowledge, LAKE_OBJECTS_REASON, lakeObjectsFinding } from './nag.js';

/** Lambda's maximum; the engine stops a safety margin before it and continues in a new run. */
export const FUNCTION_TIMEOUT = Duration.minutes(15);
/** Where the bundled spec lands in the Lambda file system (the asset root is /var/task). */
export const BUNDLED_SPEC_PATH = '/var/task/tidemark.yaml';

export interface TidemarkStackProps extends StackProps {
  /** The validated pipeline spec (`loadSpecFile` / `parseSpec`). */
  readonly spec: Spec;
  /**
   * The Lambda asset directory from `bundleHandler('incremental', dir, specFile)`: `index.js`, the
   * parquet-wasm `.wasm` and `tidemark.yaml` (the same spec, read by the function at run time).
   */
  readonly bundleDir: string;
  /**
   * The spec text the CDC tasks get in their environment: the app passes the file without its
   * comments (`deployedSpecText`, the same text as the Lambda bundle's `tidemark.yaml`); default:
   * the parsed spec as YAML.
   */
  readonly specText?: string;
  /** The CDC task image; default: the repo's Dockerfile as an image asset (Docker at deploy only). */
  readonly cdcImage?: ecs.ContainerImage;
}

/** The S3 location of the lake: bucket name and key prefix without leading/trailing slashes. */
export interface LakeLocation {
  readonly bucket: string;
  /** '' when the lake is the whole bucket. */
  readonly prefix: string;
}

/** Parses `lake.uri` for deployment. @throws ConfigError for a `file://` lake. */
export function lakeLocation(spec: Spec): LakeLocation {
  const m = /^s3:\/\/([^/]+)(?:\/(.*))?$/.exec(spec.lake.uri);
  if (!m) {
    throw new ConfigError(
      'lake.uri',
      `"${spec.lake.uri}" is a local directory; cdk deploy needs an S3 lake ("s3://bucket/prefix")`,
    );
  }
  return { bucket: m[1]!, prefix: (m[2] ?? '').replace(/^\/+|\/+$/g, '') };
}

/**
 * The `table` value a schedule puts in its event: the source table name when it names exactly this
 * spec entry, else the lake target (unique by validation). Checked with the handler's own lookup,
 * so a schedule can never run another table that happens to share a name.
 */
export function eventTableName(spec: Spec, table: IncrementalTableSpec, index: number): string {
  for (const name of [table.table, tableTarget(table)]) {
    if (findTable(spec, name) === table) return name;
  }
  throw new ConfigError(
    `tables[${index}].target`,
    `neither "${table.table}" nor "${tableTarget(table)}" names only this table; give it a distinct target`,
  );
}

/** The stack of one pipeline: state, lake, function, schedules, alarms. */
export class TidemarkStack extends Stack {
  /** The Lambda that runs every incremental table of the pipeline. */
  readonly incrementalFunction: lambda.Function;
  readonly stateTable: dynamodb.ITable;
  readonly lakeBucket: s3.IBucket;
  readonly schedules: readonly scheduler.Schedule[];
  /** The CDC cluster and services; undefined when the spec has no cdc table. */
  readonly cdc: CdcServices | undefined;
  /** The lake's catalog resources (Glue database) and the grants of committing to it. */
  readonly catalog: LakeCatalog;
  /** The Athena workgroup; undefined unless the catalog is one Athena reads (glue, S3 Tables). */
  readonly athena: AthenaWorkGroup | undefined;
  #network: Network | null | undefined;
  #accessLogs: s3.Bucket | undefined;

  constructor(scope: Construct, id: string, props: TidemarkStackProps) {
    super(scope, id, props);
    const { spec } = props;
    const incremental = incrementalTables(spec);
    assertDeployableSpec(spec);
    checkEnvironment(this, spec);
    checkBundle(props.bundleDir);
    Tags.of(this).add('tidemark:pipeline', spec.pipeline);

    this.stateTable = this.#stateTable(spec);
    const lake = lakeLocation(spec);
    this.lakeBucket = this.#lakeBucket(lake);

    const logGroup = new logs.LogGroup(this, 'IncrementalLogs', { retention: logs.RetentionDays.ONE_MONTH });
    const fn = new lambda.Function(this, 'Incremental', {
      description: `tidemark ${spec.pipeline}: incremental sync of ${incremental.length} table(s)`,
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: memoryMb(this.node),
      timeout: FUNCTION_TIMEOUT,
      code: lambda.Code.fromAsset(props.bundleDir),
      handler: 'index.handler',
      logGroup,
      environment: {
        TIDEMARK_SPEC_FILE: BUNDLED_SPEC_PATH,
        TIDEMARK_SELF_CONTINUE: '1',
      },
      ...this.#lambdaPlacement(),
    });
    this.incrementalFunction = fn;
    // Scheduler and self-continuation invoke asynchronously; Lambda would retry a failed event
    // twice on its own, overlapping the next schedule. The next schedule is the retry (a lease
    // guards overlaps), and a queued event older than an hour is stale: a newer one is coming.
    fn.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.hours(1) });

    this.#grantState(fn, spec);
    this.#grantLake(fn, lake);
    this.#grantSecrets(fn, spec);
    this.catalog = new LakeCatalog(this, 'LakeCatalog', {
      spec,
      importDatabase: contextFlag(this.node, CONTEXT.importGlueDatabase),
    });
    this.catalog.grant(fn.role!, incremental.flatMap(lakeTargets));
    // Self-continuation needs lambda:InvokeFunction on the function itself. On the role's default
    // policy that is a cycle (the function waits for its policy, the policy needs the function's
    // ARN), so it lives in a separate policy created after the function.
    new iam.Policy(this, 'SelfContinuePolicy', {
      roles: [fn.role!],
      statements: [
        new iam.PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [fn.functionArn] }),
      ],
    });

    this.schedules = incremental.map((t) => {
      const index = spec.tables.indexOf(t);
      return new scheduler.Schedule(this, `Schedule-${tableTarget(t)}`, {
        description: `tidemark ${spec.pipeline}: incremental sync of ${t.table}`,
        schedule: scheduler.ScheduleExpression.expression(t.schedule),
        timeWindow: scheduler.TimeWindow.off(),
        target: new schedulerTargets.LambdaInvoke(fn, {
          input: scheduler.ScheduleTargetInput.fromObject({
            table: eventTableName(spec, t, index),
            pipeline: spec.pipeline,
          }),
          // A missed or failed run is retried by the next schedule, never by a parallel attempt.
          retryAttempts: 0,
        }),
      });
    });

    const topic = this.#alarmTopic();
    this.#alarms(fn, topic);
    this.cdc = this.#cdc(spec, lake, topic, props.cdcImage, props.specText);
    this.athena = this.#athena(spec);
    // A first run or task start must find the database (or S3 Tables namespace) its first commit
    // creates a table in.
    const catalogResource = this.catalog.createdCatalog;
    if (catalogResource)
      for (const user of [fn, ...(this.cdc?.services.values() ?? [])])
        user.node.addDependency(catalogResource);
    this.#nag(fn, lake);

    new CfnOutput(this, 'StateTableName', {
      value: this.stateTable.tableName,
      description: 'DynamoDB state table',
    });
    new CfnOutput(this, 'LakeBucketName', {
      value: this.lakeBucket.bucketName,
      description: 'S3 lake bucket',
    });
    new CfnOutput(this, 'LakeUri', { value: spec.lake.uri, description: 'Where the Parquet objects land' });
    if (fn.isBoundToVpc) {
      new CfnOutput(this, 'IncrementalSecurityGroupIds', {
        value: fn.connections.securityGroups.map((g) => g.securityGroupId).join(','),
        description: "Allow these into the database's security group (Postgres 5432, MySQL 3306)",
      });
    }
    new CfnOutput(this, 'IncrementalFunctionName', {
      value: fn.functionName,
      description: 'Incremental Lambda (invoke with {"table": "schema.table"})',
    });
  }

  #stateTable(spec: Spec): dynamodb.ITable {
    const name = spec.state.dynamodb!.table;
    if (contextFlag(this.node, CONTEXT.importStateTable)) {
      return dynamodb.Table.fromTableName(this, 'State', name);
    }
    return new dynamodb.Table(this, 'State', {
      tableName: name,
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      // Cursors are the only record of what the lake holds: losing them means a full re-sync.
      removalPolicy: RemovalPolicy.RETAIN,
    });
  }

  #lakeBucket(lake: LakeLocation): s3.IBucket {
    if (contextFlag(this.node, CONTEXT.importBucket)) {
      return s3.Bucket.fromBucketName(this, 'Lake', lake.bucket);
    }
    return new s3.Bucket(this, 'Lake', {
      bucketName: lake.bucket,
      serverAccessLogsBucket: this.#accessLogBucket(),
      serverAccessLogsPrefix: 'lake/',
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      versioned: true,
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [
        // Retries overwrite and crash recovery deletes by design; keep those old versions a
        // while for recovery from mistakes, not forever.
        {
          noncurrentVersionExpiration: Duration.days(30),
          abortIncompleteMultipartUploadAfter: Duration.days(7),
        },
      ],
    });
  }

  /**
   * The server access logs of the stack's buckets (AwsSolutions-S1), in a bucket of their own, kept
   * 90 days; created with the first bucket that logs (none with an imported lake and no Athena).
   */
  #accessLogBucket(): s3.Bucket {
    if (this.#accessLogs) return this.#accessLogs;
    const accessLogs = new s3.Bucket(this, 'LakeAccessLogs', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [{ expiration: Duration.days(90) }],
    });
    acknowledge(
      accessLogs,
      'AwsSolutions-S1',
      "This is the stack's access-log bucket: logging it into itself would loop, and into a third bucket only moves the finding.",
    );
    this.#accessLogs = accessLogs;
    return accessLogs;
  }

  /** The Athena workgroup, for a catalog Athena reads: Glue, or S3 Tables (through its integration). */
  #athena(spec: Spec): AthenaWorkGroup | undefined {
    if (this.catalog.kind !== 'glue' && this.catalog.kind !== 's3tables') return undefined;
    const athena = new AthenaWorkGroup(this, 'Athena', {
      pipeline: spec.pipeline,
      accessLogs: this.#accessLogBucket(),
      scanCutoffGiB: contextNumber(
        this.node,
        CONTEXT.athenaScanCutoffGiB,
        DEFAULT_SCAN_CUTOFF_GIB,
        1,
        1_048_576,
      ),
    });
    new CfnOutput(this, 'AthenaWorkGroupName', {
      value: athena.workGroup.ref,
      description: 'Athena workgroup for queries of the lake (engine v3, results encrypted, scan cutoff)',
    });
    new CfnOutput(this, 'AthenaResultsBucketName', {
      value: athena.resultsBucket.bucketName,
      description: 'Where the workgroup writes query results (expired after 30 days)',
    });
    return athena;
  }

  /**
   * Item reads and conditional writes on the state table, nothing else (no scans, no DDL), on the
   * pipeline's incremental keys (`inc#<pipeline>#*`) and `tidemark check` probe keys
   * (`check#<pipeline>#*`) only; the CDC keys (`cdc#<pipeline>#*`) read-only, for the mode-change
   * check (shared/pipeline/mode-change.ts: an incremental table its source's CDC state lists).
   */
  #grantState(fn: lambda.Function, spec: Spec): void {
    fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'],
        resources: [this.stateTable.tableArn],
        conditions: {
          'ForAllValues:StringLike': {
            'dynamodb:LeadingKeys': [`inc#${spec.pipeline}#*`, `check#${spec.pipeline}#*`],
          },
        },
      }),
    );
    fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:GetItem'],
        resources: [this.stateTable.tableArn],
        conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [`cdc#${spec.pipeline}#*`] } },
      }),
    );
  }

  /** Object read/write/delete under the lake prefix, and listing restricted to that prefix. */
  #grantLake(fn: lambda.Function, lake: LakeLocation): void {
    fn.addToRolePolicy(
      new iam.PolicyStatement({
        // DeleteObject also authorises DeleteObjects (batch), which crash recovery uses.
        actions: ['s3:PutObject', 's3:GetObject', 's3:DeleteObject'],
        resources: [this.lakeBucket.arnForObjects(lake.prefix ? `${lake.prefix}/*` : '*')],
      }),
    );
    fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['s3:ListBucket'],
        resources: [this.lakeBucket.bucketArn],
        ...(lake.prefix ? { conditions: { StringLike: { 's3:prefix': [`${lake.prefix}/*`] } } } : {}),
      }),
    );
  }

  /** GetSecretValue on exactly the secrets the sources name. */
  #grantSecrets(fn: lambda.Function, spec: Spec): void {
    const arns = [...new Set(Object.values(spec.sources).flatMap((s) => (s.secretArn ? [s.secretArn] : [])))];
    if (arns.length === 0) return;
    fn.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: arns }),
    );
  }

  #alarms(fn: lambda.Function, topic: sns.ITopic | undefined): void {
    const errors = new cloudwatch.Alarm(this, 'IncrementalErrors', {
      alarmDescription:
        'An incremental run failed (LeaseHeld is not a failure). The log group has the error with table and fix.',
      metric: fn.metricErrors({ period: Duration.minutes(5), statistic: cloudwatch.Stats.SUM }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      // Any failure in the last two periods: sparse schedules (hourly, daily) still alarm, and a
      // flapping table does not toggle the state every period.
      evaluationPeriods: 2,
      datapointsToAlarm: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const nearTimeout = new cloudwatch.Alarm(this, 'IncrementalNearTimeout', {
      alarmDescription:
        'p99 run time stays near the 15 min timeout: a backlog is not catching up (expected during a first large sync) or a source is slow.',
      metric: fn.metricDuration({ period: Duration.minutes(15), statistic: cloudwatch.Stats.p(99) }),
      threshold: Math.round(FUNCTION_TIMEOUT.toMilliseconds() * 0.9),
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 3,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    if (topic) {
      for (const alarm of [errors, nearTimeout]) {
        alarm.addAlarmAction(new cloudwatchActions.SnsAction(topic));
        alarm.addOkAction(new cloudwatchActions.SnsAction(topic));
      }
    }
  }

  /** The network of the VPC context settings, built once (the Lambda and the CDC tasks share it). */
  #networkOf(): Network | undefined {
    if (this.#network === undefined) this.#network = vpcNetwork(this) ?? null;
    return this.#network ?? undefined;
  }

  #lambdaPlacement(): Pick<lambda.FunctionProps, 'vpc' | 'vpcSubnets' | 'securityGroups'> {
    const net = this.#networkOf();
    if (!net) return {};
    return {
      vpc: net.vpc,
      vpcSubnets: { subnets: net.subnets },
      // Without ids CDK creates one group (all egress, no ingress): allow it into the database's group.
      ...(net.securityGroups.length > 0 ? { securityGroups: net.securityGroups } : {}),
    };
  }

  /** The CDC services when the spec has cdc tables (the mode gate already passed every one). */
  #cdc(
    spec: Spec,
    lake: LakeLocation,
    topic: sns.ITopic | undefined,
    image: ecs.ContainerImage | undefined,
    specText: string | undefined,
  ): CdcServices | undefined {
    if (cdcTables(spec).length === 0) return undefined;
    const net = this.#networkOf();
    if (!net) {
      throw new ConfigError(
        `-c ${CONTEXT.vpcId}`,
        `is required for cdc tables: the CDC tasks run in the database's VPC; give ${CONTEXT.vpcId} and ${CONTEXT.subnetIds} (private subnets)`,
      );
    }
    const network = contextString(this.node, CONTEXT.cdcNetwork) ?? 'nat';
    if (network !== 'nat' && network !== 'endpoints') {
      throw new ConfigError(`-c ${CONTEXT.cdcNetwork}`, `must be "nat" or "endpoints", got "${network}"`);
    }
    const routeTableIds = contextList(this.node, CONTEXT.routeTableIds);
    if (network === 'endpoints' && routeTableIds.length === 0) {
      throw new ConfigError(
        `-c ${CONTEXT.routeTableIds}`,
        `is required with ${CONTEXT.cdcNetwork}=endpoints: the route tables of the subnets, for the S3 and DynamoDB gateway endpoints`,
      );
    }
    const cdc = new CdcServices(this, 'Cdc', {
      spec,
      stateTable: this.stateTable,
      lakeBucket: this.lakeBucket,
      lakePrefix: lake.prefix,
      catalog: this.catalog,
      vpc: net.vpc,
      subnets: net.subnets,
      securityGroups: net.securityGroups,
      network: network as CdcNetwork,
      routeTableIds,
      image: image ?? defaultCdcImage(),
      ...(specText !== undefined ? { specText } : {}),
      ...(topic ? { alarmTopic: topic } : {}),
      lagAlarmSeconds: contextNumber(this.node, CONTEXT.cdcLagAlarmSeconds, 900, 1, 86_400),
      standbyAlarmMinutes: contextNumber(this.node, CONTEXT.cdcStandbyAlarmMinutes, 10, 1, 1440),
    });
    new CfnOutput(this, 'CdcClusterName', {
      value: cdc.cluster.clusterName,
      description: 'ECS cluster of the CDC tasks',
    });
    new CfnOutput(this, 'CdcSecurityGroupIds', {
      value: cdc.securityGroups.map((g) => g.securityGroupId).join(','),
      description: "Allow these into the database's security group (Postgres 5432, MySQL 3306)",
    });
    return cdc;
  }

  /** cdk-nag (AwsSolutions) findings this stack keeps on purpose, each with its reason. */
  #nag(fn: lambda.Function, lake: LakeLocation): void {
    acknowledge(
      fn,
      'AwsSolutions-L1',
      'The bundle is built (esbuild target node22) and tested on Node.js 22, an LTS runtime Lambda supports; the runtime moves with the tested target, not ahead of it.',
    );
    const role = fn.role!;
    acknowledge(
      role,
      'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
      "AWSLambdaBasicExecutionRole is the AWS-maintained minimum for the function's CloudWatch Logs writes (CreateLogStream, PutLogEvents); every data-plane grant is inline and scoped.",
    );
    acknowledge(
      role,
      'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]',
      "AWSLambdaVPCAccessExecutionRole (in a VPC only) is the AWS-maintained minimum for the function's network interfaces in the given subnets.",
    );
    acknowledge(role, lakeObjectsFinding(this.lakeBucket, lake.prefix), LAKE_OBJECTS_REASON);
    // The scheduler target's role is a stack-level singleton; the finding names this function only.
    acknowledge(
      this,
      `AwsSolutions-IAM5[Resource::<${this.getLogicalId(fn.node.defaultChild as CfnElement)}.Arn>:*]`,
      'CDK-generated EventBridge Scheduler role: lambda:InvokeFunction on the incremental function and its versions/aliases ("<function arn>:*"), that one function and nothing else.',
    );
  }

  /** An existing topic (`tidemark:alarmTopicArn`), a new one mailing `tidemark:alarmEmail`, or none. */
  #alarmTopic(): sns.ITopic | undefined {
    const arn = contextString(this.node, CONTEXT.alarmTopicArn);
    const email = contextString(this.node, CONTEXT.alarmEmail);
    if (arn && email) {
      throw new ConfigError(
        `-c ${CONTEXT.alarmEmail}`,
        `give either ${CONTEXT.alarmTopicArn} or ${CONTEXT.alarmEmail}, not both`,
      );
    }
    if (arn) return sns.Topic.fromTopicArn(this, 'AlarmTopic', arn);
    if (!email) return undefined;
    const topic = new sns.Topic(this, 'AlarmTopic', { displayName: 'tidemark alarms', enforceSSL: true });
    topic.addSubscription(new snsSubscriptions.EmailSubscription(email));
    new CfnOutput(this, 'AlarmTopicArn', { value: topic.topicArn });
    return topic;
  }
}

/**
 * Rules a spec must pass to be deployed, beyond spec validation: state and lake in AWS, and every
 * table's mode served by its source's driver kind (the mode gate, shared/config/modes.ts; static
 * capabilities, nothing is opened: postgres and mysql cdc tables pass, a kind without a log reader
 * is refused). Cheap and independent of the stack, so the app runs it before spending seconds on
 * bundling.
 * @throws ConfigError naming the spec field and the fix.
 */
export function assertDeployableSpec(spec: Spec): void {
  if (spec.state.dir !== undefined) {
    throw new ConfigError('state.dir', 'is local-only; use state.dynamodb for cdk deploy');
  }
  lakeLocation(spec);
  tableBucketOf(spec);
  assertModes(spec);
}

/**
 * What depends on the target environment: regions named in the spec must be the stack's, and
 * settings that only make sense locally (endpoints, inline URLs) are flagged as synth warnings.
 */
function checkEnvironment(stack: Stack, spec: Spec): void {
  for (const [name, source] of Object.entries(spec.sources)) {
    if (source.url !== undefined) {
      Annotations.of(stack).addWarningV2(
        'tidemark:sourceUrl',
        `sources.${name} uses "url": the URL is bundled into the Lambda asset as written; use "secretArn" in AWS`,
      );
    }
  }
  const region = Token.isUnresolved(stack.region) ? undefined : stack.region;
  // The Glue database is created in the stack's region; a REST catalog may be in any region.
  const catalog = spec.lake.catalog;
  for (const [path, r] of [
    ['state.dynamodb.region', spec.state.dynamodb?.region],
    ['lake.region', spec.lake.region],
    ['lake.catalog.region', catalog.type === 'glue' ? catalog.region : undefined],
  ] as const) {
    if (r !== undefined && region !== undefined && r !== region) {
      throw new ConfigError(path, `is ${r} but the stack deploys to ${region}; remove it or deploy to ${r}`);
    }
  }
  for (const [path, endpoint] of [
    ['state.dynamodb.endpoint', spec.state.dynamodb?.endpoint],
    ['lake.endpoint', spec.lake.endpoint],
    ['lake.catalog.endpoint', catalog.type === 'glue' ? catalog.endpoint : undefined],
  ] as const) {
    if (endpoint !== undefined) {
      Annotations.of(stack).addWarningV2(
        'tidemark:endpoint',
        `${path} is set (${endpoint}): the deployed function will call it instead of AWS; remove it unless you deploy to LocalStack`,
      );
    }
  }
}

/** The asset must be a finished bundle: a missing spec would only fail at the first scheduled run. */
function checkBundle(dir: string): void {
  for (const file of ['index.js', 'parquet_wasm_bg.wasm', 'tidemark.yaml']) {
    if (!existsSync(join(dir, file))) {
      throw new ConfigError(
        '',
        `Lambda bundle ${dir} has no ${file}; build it with bundleHandler('incremental', dir, specFile)`,
      );
    }
  }
}
