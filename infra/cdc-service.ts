/**
 * The CDC path of a pipeline's stack: one ECS cluster and ONE Fargate service per source that has
 * `mode: cdc` tables (desired count 1: the task holds the source's lease, `cdc#<pipeline>#<source>`),
 * in the database's VPC, with a container health check, the deployment circuit breaker, alarms on
 * a missing task, on lag and on a standby that never becomes active, and least-privilege roles.
 *
 * Owns: what the CDC task runs with (image, environment, grants, network path). The task image is
 * the repo's Dockerfile (`ContainerImage.fromAsset`): synth only stages the build context and
 * needs no Docker; `cdk deploy` builds and pushes it, so Docker is needed at deploy time.
 * The task's entrypoint (functions/cdc/main.ts, bundled to /app/cdc/index.js) reads:
 * `TIDEMARK_SPEC_FILE` (the Dockerfile's entrypoint writes `TIDEMARK_SPEC_YAML` there),
 * `TIDEMARK_CDC_SOURCE` (the one source this service runs) and `TIDEMARK_HEALTH_PORT`.
 */
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Duration, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cloudwatchActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import { Platform } from 'aws-cdk-lib/aws-ecr-assets';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import { stringify as toYaml } from 'yaml';
import { cdcSettings, cdcTables, lakeTargets, type Spec } from '../shared/config/spec.js';
import type { LakeCatalog } from './lake-catalog.js';
import { acknowledge, LAKE_OBJECTS_REASON, lakeObjectsFinding } from './nag.js';

/** The repo root: the Docker build context of the task image. */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** The port of the task's health endpoint (`GET /health`: 200 active or standby, 503 failing). */
export const HEALTH_PORT = 8080;
/** ECS kills a container at most 120 s after SIGTERM. */
export const MAX_STOP_TIMEOUT_SECONDS = 120;
/** Time the process needs to exit after its own stop timeout (flush, commit, release). */
export const STOP_MARGIN_SECONDS = 10;
/** The CloudWatch namespace of the task's EMF metrics (shared/observability/log.ts `metric`). */
export const METRIC_NAMESPACE = 'tidemark';

/** The container's stop timeout: the source's `cdc.stopTimeoutSeconds` plus a margin, at most 120 s. */
export function stopTimeoutSeconds(spec: Spec, source: string): number {
  return Math.min(
    MAX_STOP_TIMEOUT_SECONDS,
    cdcSettings(spec, source).stopTimeoutSeconds + STOP_MARGIN_SECONDS,
  );
}

/** The sources of the spec that have cdc tables, in spec order (one service each). */
export function cdcSources(spec: Spec): string[] {
  return [...new Set(cdcTables(spec).map((t) => t.source))];
}

/** The task image from the repo's Dockerfile; files .dockerignore leaves out are not staged. */
export function defaultCdcImage(): ecs.ContainerImage {
  return ecs.ContainerImage.fromAsset(REPO_ROOT, {
    file: 'Dockerfile',
    platform: Platform.LINUX_AMD64,
    // Also in .dockerignore; listed here so synth never stages them, whatever the ignore file says.
    exclude: [
      'node_modules',
      'cdk.out',
      '.git',
      '.tidemark',
      'lake',
      'coverage',
      '.tmp',
      'dist',
      'tidemark.yaml',
      // The test readers (scripts/install-test-readers.sh: a Python venv, Spark and its jars),
      // gigabytes the image never uses; symlinks in a worktree, which staging would copy through.
      '.venv-readers',
      '.readers',
    ],
  });
}

/** The one action ECR authorizes only on `*` (a registry login, not a repository's). */
export const ECR_LOGIN_ACTION = 'ecr:GetAuthorizationToken';

/**
 * The task's execution role (ECS pulls the image and writes the logs with it; CDK grants both when
 * the image asset and the log driver bind): the pull from the bootstrap repository is scoped to
 * that repository, but `ecr:GetAuthorizationToken` is a registry-wide login that AWS only grants
 * on `*`. cdk-nag's IAM5 finding `Resource::*` names no action, so the acknowledgement is bound
 * to that action by a synth check: any other action on `*` in this role fails synth.
 */
function acknowledgeEcrLogin(role: iam.IRole): void {
  acknowledge(
    role,
    'AwsSolutions-IAM5[Resource::*]',
    `${ECR_LOGIN_ACTION} cannot be scoped to a resource: AWS requires "*" for it (it returns a registry login token, not access to a repository). It is the only action this execution role has on "*" (synth fails otherwise); the image pull itself (BatchGetImage, GetDownloadUrlForLayer, BatchCheckLayerAvailability) is granted on the one asset repository.`,
  );
  role.node.addValidation({
    validate: () => {
      const policy = role.node.tryFindChild('DefaultPolicy') as iam.Policy | undefined;
      if (!policy) return [];
      const doc = Stack.of(role).resolve(policy.document.toJSON()) as {
        Statement?: { Effect: string; Action: string | string[]; Resource: unknown }[];
      };
      const wider = (doc.Statement ?? [])
        .filter((st) => st.Effect === 'Allow' && [st.Resource].flat().includes('*'))
        .flatMap((st) => [st.Action].flat())
        .filter((action) => action !== ECR_LOGIN_ACTION);
      return wider.length === 0
        ? []
        : [
            `the CDC task's execution role allows ${wider.join(', ')} on "*": only ${ECR_LOGIN_ACTION} may be granted on "*" (the IAM5 acknowledgement covers that action alone); scope the others to their resources`,
          ];
    },
  });
}

/** How the task reaches AWS from its private subnets. */
export type CdcNetwork = 'nat' | 'endpoints';

export interface CdcServicesProps {
  readonly spec: Spec;
  readonly stateTable: dynamodb.ITable;
  readonly lakeBucket: s3.IBucket;
  /** Objects under this ARN pattern, listing under this prefix ('' = whole bucket). */
  readonly lakePrefix: string;
  /** The lake's catalog: each task role gets the catalog calls of its own source's cdc tables. */
  readonly catalog: LakeCatalog;
  readonly vpc: ec2.IVpc;
  readonly subnets: ec2.ISubnet[];
  /** Given security groups; none: one is created (all egress, no ingress). */
  readonly securityGroups: ec2.ISecurityGroup[];
  readonly network: CdcNetwork;
  /** With `network: endpoints`: the subnets' route tables, for the S3/DynamoDB gateway endpoints. */
  readonly routeTableIds: string[];
  readonly image: ecs.ContainerImage;
  /**
   * The spec text for the task's environment (app.ts: the file without its comments, so none is
   * rendered into the template); default: the parsed spec as YAML (it parses back to the same spec).
   */
  readonly specText?: string;
  readonly alarmTopic?: sns.ITopic;
  /** Alarm when the task's `LagSeconds` stays above this. */
  readonly lagAlarmSeconds: number;
  /** Alarm when no task of a service reports `Active` 1 for this many minutes. */
  readonly standbyAlarmMinutes: number;
}

/** The cluster, the per-source services and what they need. */
export class CdcServices extends Construct {
  readonly cluster: ecs.Cluster;
  readonly services: ReadonlyMap<string, ecs.FargateService>;
  readonly securityGroups: ec2.ISecurityGroup[];

  constructor(scope: Construct, id: string, props: CdcServicesProps) {
    super(scope, id);
    const { spec } = props;
    this.cluster = new ecs.Cluster(this, 'Cluster', {
      vpc: props.vpc,
      // RunningTaskCount (the task-failure alarm) is a Container Insights metric.
      containerInsightsV2: ecs.ContainerInsights.ENABLED,
    });
    this.securityGroups =
      props.securityGroups.length > 0
        ? props.securityGroups
        : [
            new ec2.SecurityGroup(this, 'TaskSecurityGroup', {
              vpc: props.vpc,
              description: `tidemark ${spec.pipeline} CDC tasks - allow this group into the database security group`,
              allowAllOutbound: true,
            }),
          ];
    if (props.network === 'endpoints') this.#endpoints(props);

    // The spec the task runs, as YAML in its environment (loadDeployableSpec refused ${env:} in its
    // values, deployedSpecText dropped its comments, and synth warns on inline URLs: credentials
    // come from Secrets Manager at run time).
    const specYaml = props.specText ?? toYaml(spec);
    const services = new Map<string, ecs.FargateService>();
    for (const source of cdcSources(spec)) {
      services.set(source, this.#service(props, source, specYaml));
    }
    this.services = services;
  }

  #service(props: CdcServicesProps, source: string, specYaml: string): ecs.FargateService {
    const { spec } = props;
    const id = `Source-${source}`;
    const taskRole = new iam.Role(this, `${id}-TaskRole`, {
      assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com'),
      description: `tidemark ${spec.pipeline}: CDC task of source ${source}`,
    });
    const taskDef = new ecs.FargateTaskDefinition(this, `${id}-Task`, {
      cpu: 512,
      memoryLimitMiB: 1024,
      taskRole,
      runtimePlatform: {
        cpuArchitecture: ecs.CpuArchitecture.X86_64,
        operatingSystemFamily: ecs.OperatingSystemFamily.LINUX,
      },
    });
    const logGroup = new logs.LogGroup(this, `${id}-Logs`, { retention: logs.RetentionDays.ONE_MONTH });
    taskDef.addContainer('cdc', {
      image: props.image,
      essential: true,
      logging: ecs.LogDrivers.awsLogs({ logGroup, streamPrefix: 'cdc' }),
      environment: {
        TIDEMARK_SPEC_YAML: specYaml,
        TIDEMARK_CDC_SOURCE: source,
        TIDEMARK_PIPELINE: spec.pipeline,
        TIDEMARK_HEALTH_PORT: String(HEALTH_PORT),
        TIDEMARK_METRICS: 'emf',
      },
      stopTimeout: Duration.seconds(stopTimeoutSeconds(spec, source)),
      healthCheck: {
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell default, expanded by the container
        command: ['CMD-SHELL', 'curl -f http://127.0.0.1:${TIDEMARK_HEALTH_PORT:-8080}/health || exit 1'],
        interval: Duration.seconds(30),
        timeout: Duration.seconds(5),
        retries: 3,
        startPeriod: Duration.seconds(60),
      },
    });
    this.#grant(taskRole, props, source);
    acknowledgeEcrLogin(taskDef.obtainExecutionRole());

    const service = new ecs.FargateService(this, `${id}-Service`, {
      cluster: this.cluster,
      taskDefinition: taskDef,
      desiredCount: 1,
      // One task per source holds the lease: a deployment stops the old task (SIGTERM: flush,
      // commit, release) before it starts the new one; a task started early would only wait as
      // a standby until the lease expires.
      minHealthyPercent: 0,
      maxHealthyPercent: 100,
      circuitBreaker: { enable: true, rollback: true },
      vpcSubnets: { subnets: props.subnets },
      securityGroups: this.securityGroups,
      assignPublicIp: false,
    });
    this.#alarms(props, source, service);
    acknowledge(
      taskDef,
      'AwsSolutions-ECS2',
      'The environment holds only non-secret settings: the spec (synth refuses env interpolation in it and warns on inline URLs; source credentials are read from Secrets Manager by the task at run time), the source name and the health port.',
    );
    return service;
  }

  /**
   * State items of this pipeline's CDC keys, reads of its incremental keys, the lake prefix, the
   * catalog calls of the source's cdc tables, the source's secret.
   */
  #grant(role: iam.Role, props: CdcServicesProps, source: string): void {
    const { spec } = props;
    role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'],
        resources: [props.stateTable.tableArn],
        conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [`cdc#${spec.pipeline}#*`] } },
      }),
    );
    // The mode-change check (shared/pipeline/mode-change.ts) reads the incremental state a cdc
    // table could have: read-only.
    role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:GetItem'],
        resources: [props.stateTable.tableArn],
        conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [`inc#${spec.pipeline}#*`] } },
      }),
    );
    const objects = props.lakeBucket.arnForObjects(props.lakePrefix ? `${props.lakePrefix}/*` : '*');
    role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['s3:PutObject', 's3:GetObject', 's3:DeleteObject'],
        resources: [objects],
      }),
    );
    role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['s3:ListBucket'],
        resources: [props.lakeBucket.bucketArn],
        ...(props.lakePrefix
          ? { conditions: { StringLike: { 's3:prefix': [`${props.lakePrefix}/*`] } } }
          : {}),
      }),
    );
    props.catalog.grant(
      role,
      cdcTables(spec)
        .filter((t) => t.source === source)
        .flatMap(lakeTargets),
    );
    const secretArn = spec.sources[source]?.secretArn;
    if (secretArn) {
      role.addToPolicy(
        new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [secretArn] }),
      );
    }
    acknowledge(role, lakeObjectsFinding(props.lakeBucket, props.lakePrefix), LAKE_OBJECTS_REASON);
  }

  #alarms(props: CdcServicesProps, source: string, service: ecs.FargateService): void {
    const dims = { pipeline: props.spec.pipeline, source };
    const running = new cloudwatch.Alarm(this, `${source}-TaskNotRunning`, {
      alarmDescription: `CDC source ${source}: no running task for 5 minutes (crash loop, image pull, or the deployment circuit breaker rolled back). The service's events and log group say why.`,
      metric: new cloudwatch.Metric({
        namespace: 'ECS/ContainerInsights',
        metricName: 'RunningTaskCount',
        dimensionsMap: { ClusterName: this.cluster.clusterName, ServiceName: service.serviceName },
        statistic: cloudwatch.Stats.MINIMUM,
        period: Duration.minutes(1),
      }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
      evaluationPeriods: 5,
      treatMissingData: cloudwatch.TreatMissingData.BREACHING,
    });
    const lag = new cloudwatch.Alarm(this, `${source}-Lag`, {
      alarmDescription: `CDC source ${source}: the lake is more than ${props.lagAlarmSeconds} s behind the database log for 15 minutes.`,
      metric: new cloudwatch.Metric({
        namespace: METRIC_NAMESPACE,
        metricName: 'LagSeconds',
        dimensionsMap: dims,
        statistic: cloudwatch.Stats.MAXIMUM,
        period: Duration.minutes(5),
      }),
      threshold: props.lagAlarmSeconds,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 3,
      // No lag data while no task is active: that is the other two alarms' case.
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const standby = new cloudwatch.Alarm(this, `${source}-NeverActive`, {
      alarmDescription: `CDC source ${source}: no task has held the source's lease for ${props.standbyAlarmMinutes} minutes (a standby that never takes over: another holder, or it cannot reach the state table).`,
      metric: new cloudwatch.Metric({
        namespace: METRIC_NAMESPACE,
        metricName: 'Active',
        dimensionsMap: dims,
        statistic: cloudwatch.Stats.MAXIMUM,
        period: Duration.minutes(1),
      }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
      evaluationPeriods: props.standbyAlarmMinutes,
      treatMissingData: cloudwatch.TreatMissingData.BREACHING,
    });
    if (props.alarmTopic) {
      for (const alarm of [running, lag, standby]) {
        alarm.addAlarmAction(new cloudwatchActions.SnsAction(props.alarmTopic));
        alarm.addOkAction(new cloudwatchActions.SnsAction(props.alarmTopic));
      }
    }
  }

  /** Gateway endpoints for S3 and DynamoDB, interface endpoints for ECR, Logs and Secrets Manager. */
  #endpoints(props: CdcServicesProps): void {
    const region = Stack.of(this).region;
    for (const [name, service] of [
      ['S3', 's3'],
      ['DynamoDb', 'dynamodb'],
    ] as const) {
      new ec2.CfnVPCEndpoint(this, `${name}Endpoint`, {
        vpcId: props.vpc.vpcId,
        serviceName: `com.amazonaws.${region}.${service}`,
        vpcEndpointType: 'Gateway',
        routeTableIds: props.routeTableIds,
      });
    }
    const endpointSg = new ec2.SecurityGroup(this, 'EndpointSecurityGroup', {
      vpc: props.vpc,
      description: 'tidemark CDC interface endpoints: HTTPS from the CDC tasks',
      allowAllOutbound: false,
    });
    for (const sg of this.securityGroups) endpointSg.connections.allowFrom(sg, ec2.Port.tcp(443));
    for (const [name, service] of [
      ['EcrApi', ec2.InterfaceVpcEndpointAwsService.ECR],
      ['EcrDkr', ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER],
      ['Logs', ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS],
      ['SecretsManager', ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER],
    ] as const) {
      new ec2.InterfaceVpcEndpoint(this, `${name}Endpoint`, {
        vpc: props.vpc,
        service,
        subnets: { subnets: props.subnets },
        securityGroups: [endpointSg],
        open: false,
        privateDnsEnabled: true,
      });
    }
  }
}
