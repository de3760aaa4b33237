/**
 * The CDK stack of the incremental path, synthesized from real specs (no AWS, no Docker, no
 * database): what it creates, the exact scope of every IAM grant, the schedules' events, and the
 * synth-time refusals of specs that cannot be deployed. The Lambda asset is the real esbuild
 * bundle, built once, and checked for the three files the function needs at run time.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { App } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as iam from 'aws-cdk-lib/aws-iam';
import { AwsSolutionsChecks } from 'cdk-nag';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { bundleHandler } from '../../functions/bundle.js';
import { REPO_ROOT } from '../../infra/cdc-service.js';
import { CONTEXT } from '../../infra/context.js';
import { deployedSpecText, loadDeployableSpec } from '../../infra/deploy-spec.js';
import { assertDeployableSpec, TidemarkStack } from '../../infra/incremental-stack.js';
import { parseSpec } from '../../shared/config/spec.js';
import { ConfigError, SinkError } from '../../shared/contracts/errors.js';
import { registerDriver, unregisterDriver } from '../../shared/drivers/registry.js';
import { CHECK_AWS_ACTIONS } from '../../shared/pipeline/check.js';
import { probeKey } from '../../shared/sink/layout.js';
import { scriptedDriver } from '../harness/scripted-driver.js';

const execFileAsync = promisify(execFile);

const SECRET_ARN = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:shop-reader-AbCdEf';

/** A deployable spec: DynamoDB state, S3 lake under a prefix, two tables, one secret source. */
const rawSpec = (): Record<string, unknown> => ({
  pipeline: 'shop',
  sources: { app: { kind: 'postgres', secretArn: SECRET_ARN } },
  state: { dynamodb: { table: 'tidemark-shop-state' } },
  lake: { uri: 's3://tidemark-shop-lake/raw/' },
  tables: [
    { source: 'app', table: 'public.orders', mode: 'incremental', cursor: 'updated_at', writeMode: 'append' },
    {
      source: 'app',
      table: 'public.customers',
      mode: 'incremental',
      cursor: 'updated_at',
      writeMode: 'upsert',
      schedule: 'cron(0/15 * * * ? *)',
    },
  ],
});

let work: string;
let bundleDir: string;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'tidemark-infra-test-'));
  const specFile = join(work, 'tidemark.yaml');
  writeFileSync(specFile, toYaml(rawSpec()));
  bundleDir = join(work, 'bundle');
  const bundle = await bundleHandler('incremental', bundleDir, specFile);
  // Recorded in docs/deploy.md ("Bundle size").
  console.log(`incremental bundle: index.js ${bundle.bytes} B, parquet_wasm_bg.wasm ${bundle.wasmBytes} B`);
}, 120_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/**
 * Each App's assembly folder, under `work` (removed after the file): without one CDK makes a
 * /tmp/cdk.outXXXX per App and never removes it, with the staged assets in it (the task image's
 * build context among them): hundreds of folders and tens of GB after a few test runs.
 */
const appOutdir = (): string => mkdtempSync(join(work, 'cdk.out-'));

/** A stand-in task image: template tests need no Docker build context (one test uses the asset). */
const TEST_IMAGE = ecs.ContainerImage.fromRegistry('public.ecr.aws/example/tidemark-cdc:test');

function stackOf(
  raw: Record<string, unknown>,
  context: Record<string, unknown> = {},
  dir: string = bundleDir,
  cdcImage: ecs.ContainerImage | null = TEST_IMAGE,
): TidemarkStack {
  const app = new App({ context, outdir: appOutdir() });
  return new TidemarkStack(app, 'tidemark-shop', {
    spec: parseSpec(raw, { env: {} }),
    bundleDir: dir,
    env: { account: '123456789012', region: 'us-east-1' },
    ...(cdcImage ? { cdcImage } : {}),
  });
}

const synth = (raw: Record<string, unknown>, context?: Record<string, unknown>): Template =>
  Template.fromStack(stackOf(raw, context));

function configErrorOf(build: () => unknown): ConfigError {
  try {
    build();
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

interface Statement {
  Action: string | string[];
  Resource: unknown;
  Condition?: Record<string, Record<string, unknown>>;
}

/** Every statement of every IAM policy attached to the function's role, flattened. */
function functionStatements(t: Template): Statement[] {
  const fnRole = Object.values(t.findResources('AWS::Lambda::Function'))[0]!.Properties.Role['Fn::GetAtt'][0];
  return Object.values(t.findResources('AWS::IAM::Policy'))
    .filter((p) => JSON.stringify(p.Properties.Roles) === JSON.stringify([{ Ref: fnRole }]))
    .flatMap((p) => p.Properties.PolicyDocument.Statement as Statement[]);
}

const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);
const logicalId = (t: Template, type: string): string =>
  type === 'AWS::S3::Bucket'
    ? Object.keys(t.findResources(type, { Properties: { BucketName: 'tidemark-shop-lake' } }))[0]!
    : Object.keys(t.findResources(type))[0]!;

describe('TidemarkStack (incremental path)', { timeout: 120_000 }, () => {
  let t: Template;
  beforeAll(() => {
    t = synth(rawSpec());
  }, 120_000);

  it('bundles index.js, the parquet-wasm binary and the spec into the asset', () => {
    expect(statSync(join(bundleDir, 'index.js')).size).toBeGreaterThan(100_000);
    // The wasm module starts with "\0asm": a truncated or text copy would fail at the first run.
    expect(readFileSync(join(bundleDir, 'parquet_wasm_bg.wasm')).subarray(0, 4)).toEqual(
      Buffer.from([0, 0x61, 0x73, 0x6d]),
    );
    expect(loadDeployableSpec(join(bundleDir, 'tidemark.yaml')).tables).toHaveLength(2);
  });

  it('creates a retained, pay-per-request state table keyed by pk with point-in-time recovery', () => {
    t.resourceCountIs('AWS::DynamoDB::Table', 1);
    t.hasResource('AWS::DynamoDB::Table', {
      DeletionPolicy: 'Retain',
      UpdateReplacePolicy: 'Retain',
      Properties: {
        TableName: 'tidemark-shop-state',
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        BillingMode: 'PAY_PER_REQUEST',
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      },
    });
  });

  it('creates an encrypted, private, versioned, TLS-only lake bucket that survives stack deletion', () => {
    t.hasResource('AWS::S3::Bucket', {
      DeletionPolicy: 'Retain',
      Properties: {
        BucketName: 'tidemark-shop-lake',
        BucketEncryption: {
          ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
        },
        PublicAccessBlockConfiguration: {
          BlockPublicAcls: true,
          BlockPublicPolicy: true,
          IgnorePublicAcls: true,
          RestrictPublicBuckets: true,
        },
        VersioningConfiguration: { Status: 'Enabled' },
      },
    });
    t.hasResourceProperties('AWS::S3::BucketPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
        ]),
      },
    });
  });

  it('runs one arm64 Node 22 function with the bundled spec, 15 min timeout and one vCPU', () => {
    t.resourceCountIs('AWS::Lambda::Function', 1);
    t.hasResourceProperties('AWS::Lambda::Function', {
      Runtime: 'nodejs22.x',
      Architectures: ['arm64'],
      Handler: 'index.handler',
      Timeout: 900,
      MemorySize: 3538,
      Environment: {
        Variables: { TIDEMARK_SPEC_FILE: '/var/task/tidemark.yaml', TIDEMARK_SELF_CONTINUE: '1' },
      },
      LoggingConfig: { LogGroup: { Ref: logicalId(t, 'AWS::Logs::LogGroup') } },
    });
    const fn = Object.values(t.findResources('AWS::Lambda::Function'))[0]!;
    expect(fn.Properties.ReservedConcurrentExecutions).toBeUndefined();
    expect(fn.Properties.VpcConfig).toBeUndefined();
    t.hasResourceProperties('AWS::Logs::LogGroup', { RetentionInDays: 30 });
    // Lambda's own async retries would race the next schedule; the schedule is the retry.
    t.hasResourceProperties('AWS::Lambda::EventInvokeConfig', { MaximumRetryAttempts: 0 });
  });

  it('schedules each table once, with its expression and a {table, pipeline} event, no retries', () => {
    const schedules = Object.values(t.findResources('AWS::Scheduler::Schedule'));
    expect(schedules).toHaveLength(2);
    const byExpr = new Map(schedules.map((s) => [s.Properties.ScheduleExpression as string, s.Properties]));
    expect([...byExpr.keys()].sort()).toEqual(['cron(0/15 * * * ? *)', 'rate(5 minutes)']);
    expect(JSON.parse(byExpr.get('rate(5 minutes)')!.Target.Input)).toEqual({
      table: 'public.orders',
      pipeline: 'shop',
    });
    expect(JSON.parse(byExpr.get('cron(0/15 * * * ? *)')!.Target.Input)).toEqual({
      table: 'public.customers',
      pipeline: 'shop',
    });
    const fnId = logicalId(t, 'AWS::Lambda::Function');
    for (const s of byExpr.values()) {
      expect(s.FlexibleTimeWindow).toEqual({ Mode: 'OFF' });
      expect(s.Target.RetryPolicy.MaximumRetryAttempts).toBe(0);
      expect(s.Target.Arn).toEqual({ 'Fn::GetAtt': [fnId, 'Arn'] });
    }
    // The scheduler's role may invoke the function and nothing else.
    const roleId = (schedules[0]!.Properties.Target.RoleArn['Fn::GetAtt'] as string[])[0]!;
    const rolePolicies = Object.values(t.findResources('AWS::IAM::Policy')).filter(
      (p) => JSON.stringify(p.Properties.Roles) === JSON.stringify([{ Ref: roleId }]),
    );
    const actions = rolePolicies.flatMap((p) =>
      (p.Properties.PolicyDocument.Statement as Statement[]).flatMap(actionsOf),
    );
    expect(new Set(actions)).toEqual(new Set(['lambda:InvokeFunction']));
  });

  it("grants what `tidemark check` in the function does: its probe item and its test object's key", () => {
    // The check event runs in this function with this role: no DescribeTable, no ListBucket
    // outside the prefix. Its probes use only actions granted for runs, on the same resources.
    const statements = functionStatements(t);
    const stateId = logicalId(t, 'AWS::DynamoDB::Table');
    for (const action of CHECK_AWS_ACTIONS) {
      const granted = statements.filter((s) => actionsOf(s).includes(action));
      expect(granted, action).toHaveLength(1);
      if (action.startsWith('dynamodb:'))
        expect(granted[0]!.Resource).toEqual({ 'Fn::GetAtt': [stateId, 'Arn'] });
      else expect(JSON.stringify(granted[0]!.Resource)).toContain('/raw/*');
    }
    // The test object lives under the granted `raw/*` (the spec says `s3://tidemark-shop-lake/raw/`).
    expect(probeKey('raw/', 'shop.0f6c')).toMatch(/^raw\/[^/]+$/);
  });

  it('scopes state access to the state table, lake access to the prefix, secrets to the named ARN', () => {
    const statements = functionStatements(t);
    const stateId = logicalId(t, 'AWS::DynamoDB::Table');
    const bucketId = logicalId(t, 'AWS::S3::Bucket');
    const fnId = logicalId(t, 'AWS::Lambda::Function');

    // Writes only on the pipeline's incremental and check-probe keys; CDC keys read-only (the
    // mode-change check), through dynamodb:LeadingKeys.
    const dynamo = statements.filter((s) => actionsOf(s).some((a) => a.startsWith('dynamodb:')));
    expect(dynamo.map((s) => [new Set(actionsOf(s)), s.Resource, s.Condition])).toEqual([
      [
        new Set(['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem']),
        { 'Fn::GetAtt': [stateId, 'Arn'] },
        { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['inc#shop#*', 'check#shop#*'] } },
      ],
      [
        new Set(['dynamodb:GetItem']),
        { 'Fn::GetAtt': [stateId, 'Arn'] },
        { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['cdc#shop#*'] } },
      ],
    ]);

    const objects = statements.find((s) => actionsOf(s).includes('s3:PutObject'))!;
    expect(new Set(actionsOf(objects))).toEqual(new Set(['s3:PutObject', 's3:GetObject', 's3:DeleteObject']));
    expect(objects.Resource).toEqual({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [bucketId, 'Arn'] }, '/raw/*']] });
    const list = statements.find((s) => actionsOf(s).includes('s3:ListBucket'))!;
    expect(list.Resource).toEqual({ 'Fn::GetAtt': [bucketId, 'Arn'] });
    expect(list.Condition).toEqual({ StringLike: { 's3:prefix': ['raw/*'] } });

    const secrets = statements.filter((s) => actionsOf(s).some((a) => a.startsWith('secretsmanager:')));
    expect(secrets.map((s) => [actionsOf(s), s.Resource])).toEqual([
      [['secretsmanager:GetSecretValue'], SECRET_ARN],
    ]);

    const invoke = statements.filter((s) => actionsOf(s).includes('lambda:InvokeFunction'));
    expect(invoke.map((s) => s.Resource)).toEqual([{ 'Fn::GetAtt': [fnId, 'Arn'] }]);

    // No data-plane action on a wildcard resource, and no wildcard actions at all.
    for (const s of statements) {
      const dataPlane = actionsOf(s).some((a) => /^(dynamodb|s3|secretsmanager|lambda):/.test(a));
      if (dataPlane) expect(JSON.stringify(s.Resource)).not.toMatch(/"\*"|"arn:[^"]*:\*"/);
      for (const a of actionsOf(s)) expect(a).not.toContain('*');
    }
  });

  it('alarms on failed runs and on runs near the timeout', () => {
    t.resourceCountIs('AWS::CloudWatch::Alarm', 2);
    t.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'Errors',
      Namespace: 'AWS/Lambda',
      Statistic: 'Sum',
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
      EvaluationPeriods: 2,
    });
    t.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'Duration',
      ExtendedStatistic: 'p99',
      Threshold: 810_000,
      ComparisonOperator: 'GreaterThanThreshold',
    });
    t.resourceCountIs('AWS::SNS::Topic', 0);
  });

  it('outputs the state table, bucket and function names', () => {
    const outputs = t.findOutputs('*');
    expect(outputs.StateTableName?.Value).toEqual({ Ref: logicalId(t, 'AWS::DynamoDB::Table') });
    expect(outputs.LakeBucketName?.Value).toEqual({ Ref: logicalId(t, 'AWS::S3::Bucket') });
    expect(outputs.IncrementalFunctionName?.Value).toEqual({ Ref: logicalId(t, 'AWS::Lambda::Function') });
  });

  it('takes memory, VPC placement and an alarm e-mail from context', () => {
    const ctx = synth(rawSpec(), {
      [CONTEXT.memoryMb]: '3008',
      [CONTEXT.vpcId]: 'vpc-0123456789abcdef0',
      [CONTEXT.subnetIds]: 'subnet-0aaa,subnet-0bbb',
      [CONTEXT.securityGroupIds]: 'sg-0ccc',
      [CONTEXT.alarmEmail]: 'ops@example.com',
    });
    ctx.hasResourceProperties('AWS::Lambda::Function', {
      MemorySize: 3008,
      VpcConfig: { SubnetIds: ['subnet-0aaa', 'subnet-0bbb'], SecurityGroupIds: ['sg-0ccc'] },
    });
    // Imported by id: nothing in the template needs a lookup (synth runs without credentials).
    expect(JSON.stringify(ctx.toJSON())).not.toContain('Fn::GetAZs');
    const topicId = logicalId(ctx, 'AWS::SNS::Topic');
    ctx.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'ops@example.com' });
    for (const alarm of Object.values(ctx.findResources('AWS::CloudWatch::Alarm'))) {
      expect(alarm.Properties.AlarmActions).toEqual([{ Ref: topicId }]);
    }
  });

  it('imports an existing bucket and state table by name when told to, with the same scoped grants', () => {
    const imported = synth(rawSpec(), { [CONTEXT.importBucket]: 'true', [CONTEXT.importStateTable]: true });
    imported.resourceCountIs('AWS::S3::Bucket', 0);
    imported.resourceCountIs('AWS::DynamoDB::Table', 0);
    const json = JSON.stringify(functionStatements(imported));
    expect(json).toContain(':s3:::tidemark-shop-lake/raw/*');
    expect(json).toContain(':table/tidemark-shop-state');
  });

  it('names the lake target in the event when two sources share a table name', () => {
    const raw = rawSpec();
    raw.sources = {
      app: { kind: 'postgres', secretArn: SECRET_ARN },
      eu: { kind: 'postgres', secretArn: `${SECRET_ARN}2` },
    };
    raw.tables = [
      {
        source: 'app',
        table: 'public.orders',
        mode: 'incremental',
        cursor: 'updated_at',
        writeMode: 'append',
      },
      {
        source: 'eu',
        table: 'public.orders',
        target: 'eu.orders',
        mode: 'incremental',
        cursor: 'updated_at',
        writeMode: 'append',
      },
    ];
    const inputs = Object.values(synth(raw).findResources('AWS::Scheduler::Schedule')).map(
      (s) => JSON.parse(s.Properties.Target.Input).table,
    );
    expect(inputs.sort()).toEqual(['eu.orders', 'public.orders']);
  });

  it('refuses specs and settings that cannot be deployed, naming the field and the fix', () => {
    const local = rawSpec();
    local.state = { dir: '/tmp/state' };
    expect(configErrorOf(() => stackOf(local)).message).toBe(
      'state.dir: is local-only; use state.dynamodb for cdk deploy',
    );

    // The app runs the same spec rules before bundling.
    expect(configErrorOf(() => assertDeployableSpec(parseSpec(local, { env: {} }))).message).toMatch(
      /^state\.dir: /,
    );

    const fileLake = rawSpec();
    fileLake.lake = { uri: 'file:///tmp/lake' };
    expect(configErrorOf(() => stackOf(fileLake)).message).toMatch(
      /^lake\.uri: .*local directory.*s3:\/\/bucket\/prefix/,
    );

    const otherRegion = rawSpec();
    otherRegion.state = { dynamodb: { table: 'tidemark-shop-state', region: 'eu-west-1' } };
    expect(configErrorOf(() => stackOf(otherRegion)).message).toMatch(
      /^state\.dynamodb\.region: is eu-west-1 but the stack deploys to us-east-1/,
    );

    expect(configErrorOf(() => stackOf(rawSpec(), { [CONTEXT.memoryMb]: 'lots' })).message).toMatch(
      /tidemark:memoryMb.*128 to 10240/,
    );
    expect(configErrorOf(() => stackOf(rawSpec(), { [CONTEXT.subnetIds]: 'subnet-1' })).message).toMatch(
      /tidemark:vpcId.*is required/,
    );
    // A bundle without its spec would deploy, then fail at the first scheduled run.
    expect(configErrorOf(() => stackOf(rawSpec(), {}, work)).message).toMatch(/has no index\.js/);
  });

  it('refuses at synth, through the mode gate, a cdc table whose kind cannot stream (an incremental-only kind); postgres and mysql ones pass it', () => {
    const events = {
      source: 'app',
      table: 'public.events',
      mode: 'cdc',
      writeMode: 'append',
      snapshot: 'never',
    };
    const kind = 'scripted-inconly';
    registerDriver({
      ...scriptedDriver(
        kind,
        { stream: false, modes: ['incremental'], recoverablePosition: false },
        { reader: false },
      ),
      async openIncremental() {
        throw new Error(`the ${kind} test driver opens nothing`);
      },
    });
    try {
      const inc = rawSpec();
      inc.sources = { app: { kind, secretArn: SECRET_ARN } };
      inc.tables = [...(inc.tables as object[]), events];
      expect(configErrorOf(() => stackOf(inc, VPC_CONTEXT)).message).toMatch(
        new RegExp(
          `^tables\\[2\\]\\.mode: public\\.events is mode: cdc, but the ${kind} driver \\(sources\\.app\\) cannot stream changes .*; set mode: incremental with a cursor column`,
        ),
      );
      expect(configErrorOf(() => assertDeployableSpec(parseSpec(inc, { env: {} }))).message).toMatch(
        new RegExp(`^tables\\[2\\]\\.mode: .*the ${kind} driver .*cannot stream`),
      );
    } finally {
      unregisterDriver(kind);
    }

    // Postgres and mysql stream now: the gate passes their cdc tables, and the stack asks for
    // the VPC the CDC task runs in (the gate would have answered first).
    const pg = rawSpec();
    pg.tables = [...(pg.tables as object[]), events];
    expect(() => assertDeployableSpec(parseSpec(pg, { env: {} }))).not.toThrow();
    expect(configErrorOf(() => stackOf(pg)).message).toMatch(
      /^-c tidemark:vpcId: is required for cdc tables: the CDC tasks run in the database's VPC/,
    );
    const my = rawSpec();
    my.sources = { app: { kind: 'mysql', secretArn: SECRET_ARN, cdc: { serverId: 5400 } } };
    my.tables = [...(my.tables as object[]), events];
    expect(() => assertDeployableSpec(parseSpec(my, { env: {} }))).not.toThrow();
    expect(configErrorOf(() => stackOf(my)).message).toMatch(
      /^-c tidemark:vpcId: is required for cdc tables: the CDC tasks run in the database's VPC/,
    );
  });

  it('synthesizes the CDC service for a postgres cdc table, beside the incremental function', () => {
    const pg = rawSpec();
    pg.tables = [
      ...(pg.tables as object[]),
      { source: 'app', table: 'public.events', mode: 'cdc', writeMode: 'append', snapshot: 'never' },
    ];
    const t = synth(pg, VPC_CONTEXT);
    t.resourceCountIs('AWS::Lambda::Function', 1);
    t.resourceCountIs('AWS::ECS::Cluster', 1);
    t.resourceCountIs('AWS::ECS::Service', 1);
    const defs = Object.values(t.findResources('AWS::ECS::TaskDefinition'));
    expect(defs).toHaveLength(1);
    const env = Object.fromEntries(
      defs[0]!.Properties.ContainerDefinitions[0].Environment.map((e: { Name: string; Value: string }) => [
        e.Name,
        e.Value,
      ]),
    );
    expect(env.TIDEMARK_CDC_SOURCE).toBe('app');
    expect(loadSpecText(env.TIDEMARK_SPEC_YAML).sources.app).toMatchObject({
      kind: 'postgres',
      secretArn: SECRET_ARN,
    });
  });

  it('warns at synth about settings that only make sense locally', () => {
    const raw = rawSpec();
    raw.sources = { app: { kind: 'postgres', url: 'postgres://reader@db.internal:5432/shop' } };
    raw.lake = { uri: 's3://tidemark-shop-lake/raw', endpoint: 'http://localhost:4566' };
    const annotations = Annotations.fromStack(stackOf(raw));
    annotations.hasWarning('*', Match.stringLikeRegexp('sources\\.app uses "url"'));
    annotations.hasWarning('*', Match.stringLikeRegexp('lake\\.endpoint is set'));
    Annotations.fromStack(stackOf(rawSpec())).hasNoWarning('*', Match.anyValue());
  });

  it('refuses a spec file that relies on env interpolation, and a missing one, with the ConfigError message', () => {
    const file = join(work, 'env.yaml');
    const raw = rawSpec();
    raw.lake = { uri: `s3://\${env:LAKE_BUCKET}/raw` };
    writeFileSync(file, toYaml(raw));
    expect(configErrorOf(() => loadDeployableSpec(file, { LAKE_BUCKET: 'b' })).message).toMatch(
      /^lake\.uri: uses \$\{env:LAKE_BUCKET\}, which the deployed function cannot resolve/,
    );
    expect(configErrorOf(() => loadDeployableSpec(join(work, 'nope.yaml'))).message).toMatch(
      /cannot read spec file/,
    );
  });
});

/** A spec with the two incremental tables and cdc tables on two sources of a streaming test kind. */
function cdcSpec(): Record<string, unknown> {
  const raw = rawSpec();
  raw.sources = {
    app: { kind: 'postgres', secretArn: SECRET_ARN },
    log: { kind: 'scripted', secretArn: `${SECRET_ARN}-log`, cdc: { stopTimeoutSeconds: 100 } },
    audit: { kind: 'scripted', secretArn: `${SECRET_ARN}-audit` },
  };
  const cdc = (source: string, table: string) => ({
    source,
    table,
    mode: 'cdc',
    writeMode: 'append',
    snapshot: 'never',
  });
  raw.tables = [
    ...(raw.tables as object[]),
    cdc('log', 'public.events'),
    cdc('log', 'public.clicks'),
    cdc('audit', 'audit.trail'),
  ];
  return raw;
}

const VPC_CONTEXT = {
  [CONTEXT.vpcId]: 'vpc-0123456789abcdef0',
  [CONTEXT.subnetIds]: 'subnet-0aaa,subnet-0bbb',
};

/** Every statement of the policies attached to role `roleId`. */
function roleStatements(t: Template, roleId: string): Statement[] {
  return Object.values(t.findResources('AWS::IAM::Policy'))
    .filter((p) => JSON.stringify(p.Properties.Roles) === JSON.stringify([{ Ref: roleId }]))
    .flatMap((p) => p.Properties.PolicyDocument.Statement as Statement[]);
}

describe('TidemarkStack (CDC services, with a registered streaming test kind)', { timeout: 120_000 }, () => {
  let t: Template;
  beforeAll(() => {
    registerDriver(scriptedDriver('scripted'));
    t = synth(cdcSpec(), VPC_CONTEXT);
  }, 120_000);
  afterAll(() => unregisterDriver('scripted'));

  it('runs one Fargate service per cdc source: one task, stop timeout from the spec, health check, circuit breaker', () => {
    t.resourceCountIs('AWS::ECS::Cluster', 1);
    t.hasResourceProperties('AWS::ECS::Cluster', {
      ClusterSettings: [{ Name: 'containerInsights', Value: 'enabled' }],
    });
    const services = Object.values(t.findResources('AWS::ECS::Service'));
    expect(services).toHaveLength(2);
    for (const s of services) {
      expect(s.Properties).toMatchObject({
        LaunchType: 'FARGATE',
        DesiredCount: 1,
        DeploymentConfiguration: {
          MinimumHealthyPercent: 0,
          MaximumPercent: 100,
          DeploymentCircuitBreaker: { Enable: true, Rollback: true },
        },
        NetworkConfiguration: {
          AwsvpcConfiguration: { AssignPublicIp: 'DISABLED', Subnets: ['subnet-0aaa', 'subnet-0bbb'] },
        },
      });
    }
    const containers = Object.values(t.findResources('AWS::ECS::TaskDefinition')).map(
      (d) => d.Properties.ContainerDefinitions[0],
    );
    const bySource = new Map(
      containers.map((c) => [
        c.Environment.find((e: { Name: string }) => e.Name === 'TIDEMARK_CDC_SOURCE').Value,
        c,
      ]),
    );
    expect([...bySource.keys()].sort()).toEqual(['audit', 'log']);
    // cdc.stopTimeoutSeconds + 10 s to exit (ECS allows at most 120): 100 -> 110, default 30 -> 40.
    expect(bySource.get('log').StopTimeout).toBe(110);
    expect(bySource.get('audit').StopTimeout).toBe(40);
    for (const c of bySource.values()) {
      expect(c.HealthCheck).toEqual({
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell default, expanded by the container
        Command: ['CMD-SHELL', 'curl -f http://127.0.0.1:${TIDEMARK_HEALTH_PORT:-8080}/health || exit 1'],
        Interval: 30,
        Timeout: 5,
        Retries: 3,
        StartPeriod: 60,
      });
      const env = Object.fromEntries(
        c.Environment.map((e: { Name: string; Value: string }) => [e.Name, e.Value]),
      );
      expect(env.TIDEMARK_HEALTH_PORT).toBe('8080');
      expect(env.TIDEMARK_PIPELINE).toBe('shop');
      // The spec travels as written: it names the secret, never a password.
      expect(loadSpecText(env.TIDEMARK_SPEC_YAML).sources.log?.secretArn).toBe(`${SECRET_ARN}-log`);
      expect(c.LogConfiguration.LogDriver).toBe('awslogs');
    }
    t.hasResourceProperties('AWS::Logs::LogGroup', { RetentionInDays: 30 });
  });

  it('gives the task the spec file as written when the app passes it', () => {
    const text = toYaml(cdcSpec());
    const app = new App({ context: VPC_CONTEXT, outdir: appOutdir() });
    const stack = new TidemarkStack(app, 'tidemark-shop', {
      spec: parseSpec(cdcSpec(), { env: {} }),
      specText: text,
      bundleDir,
      cdcImage: TEST_IMAGE,
      env: { account: '123456789012', region: 'us-east-1' },
    });
    const envs = Object.values(Template.fromStack(stack).findResources('AWS::ECS::TaskDefinition')).map((d) =>
      d.Properties.ContainerDefinitions[0].Environment.find(
        (e: { Name: string }) => e.Name === 'TIDEMARK_SPEC_YAML',
      ),
    );
    expect(envs.map((e) => e.Value)).toEqual([text, text]);
  });

  it('schedules only the incremental tables', () => {
    const tables = Object.values(t.findResources('AWS::Scheduler::Schedule')).map(
      (s) => JSON.parse(s.Properties.Target.Input).table,
    );
    expect(tables.sort()).toEqual(['public.customers', 'public.orders']);
  });

  it("scopes each task role to the pipeline's cdc# keys (inc# read-only), the lake prefix and its own secret", () => {
    const stateId = logicalId(t, 'AWS::DynamoDB::Table');
    const taskRoles = Object.values(t.findResources('AWS::ECS::TaskDefinition')).map(
      (d) =>
        [
          d.Properties.ContainerDefinitions[0].Environment.find(
            (e: { Name: string }) => e.Name === 'TIDEMARK_CDC_SOURCE',
          ).Value,
          d.Properties.TaskRoleArn['Fn::GetAtt'][0],
        ] as const,
    );
    expect(taskRoles).toHaveLength(2);
    for (const [source, roleId] of taskRoles) {
      const statements = roleStatements(t, roleId);
      const dynamo = statements.filter((s) => actionsOf(s).some((a) => a.startsWith('dynamodb:')));
      expect(dynamo.map((s) => [new Set(actionsOf(s)), s.Resource, s.Condition])).toEqual([
        [
          new Set(['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem']),
          { 'Fn::GetAtt': [stateId, 'Arn'] },
          { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['cdc#shop#*'] } },
        ],
        [
          new Set(['dynamodb:GetItem']),
          { 'Fn::GetAtt': [stateId, 'Arn'] },
          { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['inc#shop#*'] } },
        ],
      ]);
      const secrets = statements.filter((s) => actionsOf(s).includes('secretsmanager:GetSecretValue'));
      expect(secrets.map((s) => s.Resource)).toEqual([`${SECRET_ARN}-${source}`]);
      const objects = statements.find((s) => actionsOf(s).includes('s3:PutObject'))!;
      expect(JSON.stringify(objects.Resource)).toContain('/raw/*');
      const list = statements.find((s) => actionsOf(s).includes('s3:ListBucket'))!;
      expect(list.Condition).toEqual({ StringLike: { 's3:prefix': ['raw/*'] } });
      for (const s of statements) for (const a of actionsOf(s)) expect(a).not.toContain('*');
    }
    // The incremental function keeps its inc#/check# scope beside the tasks.
    expect(
      functionStatements(t)
        .filter((s) => actionsOf(s).includes('dynamodb:PutItem'))
        .map((s) => s.Condition),
    ).toEqual([{ 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['inc#shop#*', 'check#shop#*'] } }]);
  });

  it('alarms per source on no running task, lag and a standby that never becomes active', () => {
    const alarms = Object.values(t.findResources('AWS::CloudWatch::Alarm')).map((a) => a.Properties);
    const of = (name: string) => alarms.filter((a) => a.MetricName === name);
    expect(of('RunningTaskCount')).toHaveLength(2);
    expect(of('RunningTaskCount')[0]).toMatchObject({
      Namespace: 'ECS/ContainerInsights',
      Statistic: 'Minimum',
      Threshold: 1,
      ComparisonOperator: 'LessThanThreshold',
      TreatMissingData: 'breaching',
    });
    expect(of('LagSeconds')).toHaveLength(2);
    expect(of('LagSeconds')[0]).toMatchObject({
      Namespace: 'tidemark',
      Threshold: 900,
      ComparisonOperator: 'GreaterThanThreshold',
    });
    expect(of('Active')).toHaveLength(2);
    expect(of('Active')[0]).toMatchObject({
      Namespace: 'tidemark',
      Statistic: 'Maximum',
      Threshold: 1,
      ComparisonOperator: 'LessThanThreshold',
      EvaluationPeriods: 10,
      TreatMissingData: 'breaching',
    });
    expect(of('Active').flatMap((a) => a.Dimensions)).toContainEqual({ Name: 'source', Value: 'log' });
  });

  it('uses the NAT by default, or creates gateway (S3, DynamoDB) and interface (ECR, Logs, Secrets Manager) endpoints', () => {
    t.resourceCountIs('AWS::EC2::VPCEndpoint', 0);
    const ep = synth(cdcSpec(), {
      ...VPC_CONTEXT,
      [CONTEXT.cdcNetwork]: 'endpoints',
      [CONTEXT.routeTableIds]: 'rtb-0aaa,rtb-0bbb',
    });
    const endpoints = Object.values(ep.findResources('AWS::EC2::VPCEndpoint')).map((e) => e.Properties);
    const gateways = endpoints.filter((e) => e.VpcEndpointType === 'Gateway');
    expect(gateways.map((g) => g.ServiceName).sort()).toEqual([
      'com.amazonaws.us-east-1.dynamodb',
      'com.amazonaws.us-east-1.s3',
    ]);
    for (const g of gateways) expect(g.RouteTableIds).toEqual(['rtb-0aaa', 'rtb-0bbb']);
    const interfaces = endpoints.filter((e) => e.VpcEndpointType === 'Interface');
    expect(JSON.stringify(interfaces.map((i) => i.ServiceName))).toMatch(
      /ecr\.api.*ecr\.dkr.*logs.*secretsmanager/,
    );
    expect(
      configErrorOf(() => stackOf(cdcSpec(), { ...VPC_CONTEXT, [CONTEXT.cdcNetwork]: 'endpoints' })).message,
    ).toMatch(/tidemark:routeTableIds.*is required/);
    expect(
      configErrorOf(() => stackOf(cdcSpec(), { ...VPC_CONTEXT, [CONTEXT.cdcNetwork]: 'vpn' })).message,
    ).toMatch(/must be "nat" or "endpoints"/);
    expect(configErrorOf(() => stackOf(cdcSpec())).message).toMatch(
      /tidemark:vpcId.*required for cdc tables/,
    );
  });

  it('builds the default task image from the repo Dockerfile as an asset, without Docker at synth', () => {
    const stack = stackOf(cdcSpec(), VPC_CONTEXT, bundleDir, null);
    const withAsset = Template.fromStack(stack);
    const image = Object.values(withAsset.findResources('AWS::ECS::TaskDefinition'))[0]!.Properties
      .ContainerDefinitions[0].Image;
    expect(JSON.stringify(image)).toContain('cdk-hnb659fds-container-assets');
    // The staged build context has the Dockerfile and none of what .dockerignore leaves out: the
    // test readers' venv and Spark (2.4 GB staged per synth before they were excluded).
    const outdir = (stack.node.root as App).outdir;
    const context = readdirSync(outdir)
      .map((d) => join(outdir, d))
      .find((d) => existsSync(join(d, 'Dockerfile')))!;
    const staged = readdirSync(context);
    expect(staged).toContain('Dockerfile');
    for (const excluded of ['node_modules', '.git', '.venv-readers', '.readers']) {
      expect(staged).not.toContain(excluded);
    }
    for (const line of ['.venv-readers', '.readers', 'node_modules']) {
      expect(readFileSync(join(REPO_ROOT, '.dockerignore'), 'utf8').split('\n')).toContain(line);
    }
    const dockerfile = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/^USER node$/m);
    expect(dockerfile).toMatch(/CMD \["node", "\/app\/cdc\/index\.js"\]/);
    expect(dockerfile).toContain('functions/build-cdc.ts');
  });

  it('passes the AwsSolutions cdk-nag pack over the real image asset, every remaining finding acknowledged with a reason', () => {
    // The real asset (null: the default image), not the stand-in: its execution role carries the
    // ECR pull grants that only an asset image adds.
    for (const stack of [
      stackOf(cdcSpec(), { ...VPC_CONTEXT, [CONTEXT.alarmEmail]: 'ops@example.com' }, bundleDir, null),
      stackOf(
        cdcSpec(),
        { ...VPC_CONTEXT, [CONTEXT.cdcNetwork]: 'endpoints', [CONTEXT.routeTableIds]: 'rtb-0aaa' },
        bundleDir,
        null,
      ),
    ]) {
      expectNagClean(stack);
    }
  });

  it('grants the execution role ecr:GetAuthorizationToken alone on "*" and fails synth on any other action there', () => {
    const stack = stackOf(cdcSpec(), VPC_CONTEXT, bundleDir, null);
    const t = Template.fromStack(stack);
    const execRoles = Object.values(t.findResources('AWS::ECS::TaskDefinition')).map(
      (d) => d.Properties.ExecutionRoleArn['Fn::GetAtt'][0] as string,
    );
    expect(execRoles).toHaveLength(2);
    for (const role of execRoles) {
      const statements = roleStatements(t, role);
      expect(statements.filter((s) => s.Resource === '*').map((s) => s.Action)).toEqual([
        'ecr:GetAuthorizationToken',
      ]);
      const pull = statements.find((s) => actionsOf(s).includes('ecr:BatchGetImage'))!;
      expect(JSON.stringify(pull.Resource)).toContain('repository/cdk-hnb659fds-container-assets');
    }

    const wider = stackOf(cdcSpec(), VPC_CONTEXT, bundleDir, null);
    const service = wider.cdc!.services.get('log')!;
    service.taskDefinition
      .obtainExecutionRole()
      .addToPrincipalPolicy(new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: ['*'] }));
    expect(() => Template.fromStack(wider)).toThrow(
      /execution role allows s3:GetObject on "\*": only ecr:GetAuthorizationToken may be granted on "\*"/,
    );
  });
});

/** Runs AwsSolutions over the stack; fails listing every unacknowledged error or warning. */
function expectNagClean(stack: TidemarkStack): void {
  const report = new AwsSolutionsChecks(undefined, { verbose: true }).validateScope(stack);
  const open = report.violations.map(
    (v) =>
      `${v.ruleName}: ${v.violatingResources.map((r) => r.resourceLogicalId ?? r.constructPath).join(', ')}`,
  );
  expect(open).toEqual([]);
}

function loadSpecText(text: string): { sources: Record<string, { secretArn: string }> } {
  const file = join(work, `spec-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, text);
  return loadDeployableSpec(file) as unknown as { sources: Record<string, { secretArn: string }> };
}

describe('cdk-nag over the incremental-only stack', { timeout: 120_000 }, () => {
  it('passes AwsSolutions with the reasoned acknowledgements (default, VPC and alarm e-mail)', () => {
    expectNagClean(stackOf(rawSpec()));
    expectNagClean(
      stackOf(rawSpec(), {
        [CONTEXT.vpcId]: 'vpc-0123456789abcdef0',
        [CONTEXT.subnetIds]: 'subnet-0aaa',
        [CONTEXT.alarmEmail]: 'ops@example.com',
      }),
    );
  });
});

/** The two-table spec with its lake's catalog set to `catalog`. */
function catalogSpec(
  catalog: Record<string, unknown>,
  base: Record<string, unknown> = rawSpec(),
): Record<string, unknown> {
  return { ...base, lake: { uri: 's3://tidemark-shop-lake/raw/', catalog } };
}

const GLUE = { type: 'glue', database: 'shop' };
const TABLE_BUCKET = 'arn:aws:s3tables:us-east-1:123456789012:bucket/shop-tables';
const S3TABLES = {
  type: 'rest',
  uri: 'https://s3tables.us-east-1.amazonaws.com/iceberg',
  warehouse: TABLE_BUCKET,
  namespace: 'shop',
  sigv4: { service: 's3tables' },
};

/** A resource as text: `Fn::Join`s flattened, the partition and account pseudo-parameters named. */
function arnText(resource: unknown): string {
  if (typeof resource === 'string') return resource;
  const r = resource as Record<string, unknown>;
  if (r.Ref === 'AWS::Partition') return 'aws';
  if (r.Ref === 'AWS::AccountId') return '<AccountId>';
  if (r.Ref === 'AWS::Region') return '<Region>';
  const join = r['Fn::Join'] as [string, unknown[]] | undefined;
  if (join) return join[1].map(arnText).join(join[0]);
  return JSON.stringify(resource);
}

/** The statements of `statements` naming an action of `service`, as [actions, resources, condition]. */
const serviceGrants = (statements: Statement[], service: string) =>
  statements
    .filter((s) => actionsOf(s).some((a) => a.startsWith(`${service}:`)))
    .map((s) => [new Set(actionsOf(s)), [s.Resource].flat().map(arnText), s.Condition]);

/** The task role of each CDC source, by source name. */
function taskRoleIds(t: Template): Map<string, string> {
  return new Map(
    Object.values(t.findResources('AWS::ECS::TaskDefinition')).map((d) => [
      d.Properties.ContainerDefinitions[0].Environment.find(
        (e: { Name: string }) => e.Name === 'TIDEMARK_CDC_SOURCE',
      ).Value as string,
      d.Properties.TaskRoleArn['Fn::GetAtt'][0] as string,
    ]),
  );
}

describe('TidemarkStack (Iceberg catalogs: Glue database, S3 Tables grants, Athena workgroup)', {
  timeout: 180_000,
}, () => {
  beforeAll(() => registerDriver(scriptedDriver('scripted')));
  afterAll(() => unregisterDriver('scripted'));
  const glueArn = (resource: string) => `arn:aws:glue:us-east-1:123456789012:${resource}`;

  it('creates the Glue database of lake.catalog.database, retained on deletion and replacement', () => {
    const t = synth(catalogSpec(GLUE));
    t.resourceCountIs('AWS::Glue::Database', 1);
    t.hasResource('AWS::Glue::Database', {
      DeletionPolicy: 'Retain',
      UpdateReplacePolicy: 'Retain',
      Properties: { CatalogId: '123456789012', DatabaseInput: { Name: 'shop' } },
    });
    expect(t.findOutputs('GlueDatabaseName').GlueDatabaseName?.Value).toBe('shop');
    // The function is created after the database its first commit creates a table in.
    const dbId = logicalId(t, 'AWS::Glue::Database');
    expect(Object.values(t.findResources('AWS::Lambda::Function'))[0]!.DependsOn).toContain(dbId);
    // Imported: no database resource, the same grants.
    const imported = synth(catalogSpec(GLUE), { [CONTEXT.importGlueDatabase]: 'true' });
    imported.resourceCountIs('AWS::Glue::Database', 0);
    expect(serviceGrants(functionStatements(imported), 'glue')).toEqual(
      serviceGrants(functionStatements(t), 'glue'),
    );
  });

  it("grants the function the glue catalog's calls (and check's GetDatabase) on the catalog, the database and its own tables: no wildcard", () => {
    const t = synth(catalogSpec(GLUE));
    expect(serviceGrants(functionStatements(t), 'glue')).toEqual([
      [
        new Set(['glue:GetDatabase', 'glue:GetTable', 'glue:CreateTable', 'glue:UpdateTable']),
        [
          glueArn('catalog'),
          glueArn('database/shop'),
          glueArn('table/shop/public_orders'),
          glueArn('table/shop/public_customers'),
        ],
        undefined,
      ],
    ]);
    // No Glue action on any wildcard resource, anywhere in the stack.
    for (const policy of Object.values(t.findResources('AWS::IAM::Policy'))) {
      for (const s of policy.Properties.PolicyDocument.Statement as Statement[]) {
        if (!actionsOf(s).some((a) => a.startsWith('glue:'))) continue;
        for (const r of [s.Resource].flat().map(arnText)) expect(r).not.toContain('*');
      }
    }
    // Another account's catalog (lake.catalog.catalogId): the grants name it; the database is
    // that account's to create, so the stack imports it or refuses.
    const otherCatalog = catalogSpec({ ...GLUE, catalogId: '210987654321' });
    const other = synth(otherCatalog, { [CONTEXT.importGlueDatabase]: 'true' });
    expect(serviceGrants(functionStatements(other), 'glue')[0]![1]).toEqual([
      'arn:aws:glue:us-east-1:210987654321:catalog',
      'arn:aws:glue:us-east-1:210987654321:database/shop',
      'arn:aws:glue:us-east-1:210987654321:table/shop/public_orders',
      'arn:aws:glue:us-east-1:210987654321:table/shop/public_customers',
    ]);
    other.resourceCountIs('AWS::Glue::Database', 0);
    expect(configErrorOf(() => stackOf(otherCatalog)).message).toMatch(
      /^lake\.catalog\.catalogId: is another account's Data Catalog \(210987654321, the stack deploys to 123456789012\).*tidemark:importGlueDatabase=true/,
    );
    synth(catalogSpec({ ...GLUE, catalogId: '123456789012' })).hasResourceProperties('AWS::Glue::Database', {
      CatalogId: '123456789012',
    });
  });

  it("gives each CDC task role the Glue tables of its own source's cdc tables only", () => {
    const t = synth(catalogSpec(GLUE, cdcSpec()), VPC_CONTEXT);
    const roles = taskRoleIds(t);
    const dbId = logicalId(t, 'AWS::Glue::Database');
    for (const service of Object.values(t.findResources('AWS::ECS::Service'))) {
      expect(service.DependsOn).toContain(dbId);
    }
    const tablesOf = (statements: Statement[]) =>
      (serviceGrants(statements, 'glue')[0]![1] as string[]).filter((r) => r.includes(':table/'));
    expect(tablesOf(roleStatements(t, roles.get('log')!))).toEqual([
      glueArn('table/shop/public_events'),
      glueArn('table/shop/public_clicks'),
    ]);
    expect(tablesOf(roleStatements(t, roles.get('audit')!))).toEqual([glueArn('table/shop/audit_trail')]);
    expect(tablesOf(functionStatements(t))).toEqual([
      glueArn('table/shop/public_orders'),
      glueArn('table/shop/public_customers'),
    ]);
  });

  it('refuses two targets that would share one Glue table, naming both', () => {
    const raw = catalogSpec(GLUE);
    // Distinct lake targets, one Glue name: the database naming joins schema and table with "_".
    raw.tables = [
      {
        source: 'app',
        table: 'public.a',
        target: 'sales_eu.orders',
        mode: 'incremental',
        cursor: 'id',
        writeMode: 'append',
      },
      {
        source: 'app',
        table: 'public.b',
        target: 'sales.eu_orders',
        mode: 'incremental',
        cursor: 'id',
        writeMode: 'append',
      },
    ];
    let caught: unknown;
    try {
      stackOf(raw);
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(SinkError);
    expect((caught as SinkError).code).toBe('GLUE_NAME_COLLISION');
    expect((caught as SinkError).message).toMatch(
      /"sales_eu\.orders" and "sales\.eu_orders" would both be the Glue table shop\.sales_eu_orders/,
    );
  });

  it('creates the Athena workgroup tidemark-<pipeline>: engine v3, enforced, SSE-S3 results in their own bucket, a scan cutoff', () => {
    const t = synth(catalogSpec(GLUE));
    t.resourceCountIs('AWS::Athena::WorkGroup', 1);
    const [id, wg] = Object.entries(t.findResources('AWS::Athena::WorkGroup'))[0]!;
    const config = wg.Properties.WorkGroupConfiguration;
    expect(wg.Properties.Name).toBe('tidemark-shop');
    expect(config).toMatchObject({
      EnforceWorkGroupConfiguration: true,
      EngineVersion: { SelectedEngineVersion: 'Athena engine version 3' },
      BytesScannedCutoffPerQuery: 100 * 2 ** 30,
      ResultConfiguration: { EncryptionConfiguration: { EncryptionOption: 'SSE_S3' } },
    });
    const results = Object.keys(
      t.findResources('AWS::S3::Bucket', {
        Properties: { LifecycleConfiguration: { Rules: [Match.objectLike({ ExpirationInDays: 30 })] } },
      }),
    );
    expect(results).toHaveLength(1);
    expect(config.ResultConfiguration.OutputLocation).toEqual({
      'Fn::Join': ['', ['s3://', { Ref: results[0] }, '/results/']],
    });
    t.hasResource('AWS::S3::Bucket', {
      DeletionPolicy: 'Retain',
      Properties: Match.objectLike({
        BucketEncryption: {
          ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
        },
        LoggingConfiguration: Match.objectLike({ LogFilePrefix: 'athena-results/' }),
      }),
    });
    expect(t.findOutputs('AthenaWorkGroupName').AthenaWorkGroupName?.Value).toEqual({ Ref: id });

    const tight = synth(catalogSpec(GLUE), { [CONTEXT.athenaScanCutoffGiB]: '10' });
    tight.hasResourceProperties('AWS::Athena::WorkGroup', {
      WorkGroupConfiguration: Match.objectLike({ BytesScannedCutoffPerQuery: 10 * 2 ** 30 }),
    });
    expect(
      configErrorOf(() => stackOf(catalogSpec(GLUE), { [CONTEXT.athenaScanCutoffGiB]: '0' })).message,
    ).toMatch(/tidemark:athenaScanCutoffGiB.*integer from 1/);
    // With an imported lake the results bucket still has its access logs.
    const imported = synth(catalogSpec(GLUE), { [CONTEXT.importBucket]: 'true' });
    imported.resourceCountIs('AWS::S3::Bucket', 2);
  });

  it('grants S3 Tables (rest, sigv4 s3tables) on the warehouse table bucket, its tables limited to the namespace', () => {
    const t = synth(catalogSpec(S3TABLES));
    expect(serviceGrants(functionStatements(t), 's3tables')).toEqual([
      [new Set(['s3tables:GetTableBucket', 's3tables:CreateNamespace']), [TABLE_BUCKET], undefined],
      [
        new Set([
          's3tables:GetNamespace',
          's3tables:CreateTable',
          's3tables:GetTable',
          's3tables:GetTableMetadataLocation',
          's3tables:UpdateTableMetadataLocation',
          's3tables:GetTableData',
          's3tables:PutTableData',
        ]),
        [TABLE_BUCKET, `${TABLE_BUCKET}/table/*`],
        { StringEquals: { 's3tables:namespace': 'shop' } },
      ],
    ]);
    expect(serviceGrants(functionStatements(t), 'glue')).toEqual([]);
    t.resourceCountIs('AWS::Glue::Database', 0);
    t.resourceCountIs('AWS::Athena::WorkGroup', 1);
    // The CDC tasks get the same, for their own tables.
    const cdc = synth(catalogSpec(S3TABLES, cdcSpec()), VPC_CONTEXT);
    for (const roleId of taskRoleIds(cdc).values()) {
      expect(serviceGrants(roleStatements(cdc, roleId), 's3tables')).toEqual(
        serviceGrants(functionStatements(t), 's3tables'),
      );
    }
  });

  it('creates the table bucket and namespace of createTableBucket, retained, before the function and the tasks; no CreateNamespace grant', () => {
    const spec = catalogSpec({ ...S3TABLES, createTableBucket: true }, cdcSpec());
    const t = synth(spec, VPC_CONTEXT);
    t.resourceCountIs('AWS::S3Tables::TableBucket', 1);
    t.hasResource('AWS::S3Tables::TableBucket', {
      DeletionPolicy: 'Retain',
      UpdateReplacePolicy: 'Retain',
      Properties: {
        TableBucketName: 'shop-tables',
        EncryptionConfiguration: { SSEAlgorithm: 'AES256' },
        UnreferencedFileRemoval: { Status: 'Enabled', UnreferencedDays: 3, NoncurrentDays: 10 },
      },
    });
    const bucketId = logicalId(t, 'AWS::S3Tables::TableBucket');
    t.resourceCountIs('AWS::S3Tables::Namespace', 1);
    t.hasResource('AWS::S3Tables::Namespace', {
      DeletionPolicy: 'Retain',
      UpdateReplacePolicy: 'Retain',
      Properties: { Namespace: 'shop', TableBucketARN: { 'Fn::GetAtt': [bucketId, 'TableBucketARN'] } },
    });
    const namespaceId = logicalId(t, 'AWS::S3Tables::Namespace');
    // The runs get the ARN the spec names: the one the stack creates (same name, account, region).
    t.hasOutput('TableBucketArn', { Value: { 'Fn::GetAtt': [bucketId, 'TableBucketARN'] } });
    // Environment known at synth: no template rule needed.
    expect(Object.keys(t.toJSON().Rules ?? {}).filter((id) => id.includes('TableBucket'))).toEqual([]);
    const fn = Object.values(t.findResources('AWS::Lambda::Function'))[0]!;
    expect(fn.DependsOn).toContain(namespaceId);
    const services = Object.values(t.findResources('AWS::ECS::Service'));
    expect(services.length).toBeGreaterThan(0);
    for (const service of services) expect(service.DependsOn).toContain(namespaceId);
    const namespaceGrant = [
      new Set([
        's3tables:GetNamespace',
        's3tables:CreateTable',
        's3tables:GetTable',
        's3tables:GetTableMetadataLocation',
        's3tables:UpdateTableMetadataLocation',
        's3tables:GetTableData',
        's3tables:PutTableData',
      ]),
      [TABLE_BUCKET, `${TABLE_BUCKET}/table/*`],
      { StringEquals: { 's3tables:namespace': 'shop' } },
    ];
    const expected = [[new Set(['s3tables:GetTableBucket']), [TABLE_BUCKET], undefined], namespaceGrant];
    expect(serviceGrants(functionStatements(t), 's3tables')).toEqual(expected);
    for (const roleId of taskRoleIds(t).values()) {
      expect(serviceGrants(roleStatements(t, roleId), 's3tables')).toEqual(expected);
    }
    // Without createTableBucket nothing is created (the existing bucket's grants are unchanged).
    const existing = synth(catalogSpec(S3TABLES));
    existing.resourceCountIs('AWS::S3Tables::TableBucket', 0);
    existing.resourceCountIs('AWS::S3Tables::Namespace', 0);
    expectNagClean(stackOf(spec, VPC_CONTEXT));
  });

  it('refuses createTableBucket for a table bucket in another account or region, or a catalog that is not S3 Tables', () => {
    for (const [warehouse, what] of [
      ['arn:aws:s3tables:us-east-1:210987654321:bucket/shop-tables', 'account 210987654321'],
      ['arn:aws:s3tables:eu-west-1:123456789012:bucket/shop-tables', 'region eu-west-1'],
    ] as const) {
      expect(
        configErrorOf(() => stackOf(catalogSpec({ ...S3TABLES, warehouse, createTableBucket: true })))
          .message,
      ).toMatch(
        new RegExp(`^lake\\.catalog\\.warehouse: names a table bucket in ${what} but the stack deploys to`),
      );
    }
    const glueRest = {
      type: 'rest',
      uri: 'https://glue.us-east-1.amazonaws.com/iceberg',
      warehouse: '123456789012',
      namespace: 'shop',
      sigv4: { service: 'glue' },
      createTableBucket: true,
    };
    for (const raw of [catalogSpec(glueRest), catalogSpec({ ...glueRest, sigv4: undefined })]) {
      const pattern = /^lake\.catalog\.createTableBucket: is S3 Tables' only/;
      expect(configErrorOf(() => stackOf(raw)).message).toMatch(pattern);
      expect(configErrorOf(() => assertDeployableSpec(parseSpec(raw, { env: {} }))).message).toMatch(pattern);
    }
    // An environment-agnostic stack: a template rule fails the deployment in another account/region.
    const app = new App({ outdir: appOutdir() });
    const agnostic = new TidemarkStack(app, 'tidemark-shop', {
      spec: parseSpec(catalogSpec({ ...S3TABLES, createTableBucket: true }), { env: {} }),
      bundleDir,
      cdcImage: TEST_IMAGE,
    });
    const rules = Object.entries(Template.fromStack(agnostic).toJSON().Rules ?? {})
      .filter(([id]) => id.includes('TableBucket'))
      .map(([, rule]) => rule) as { Assertions: { Assert: unknown }[] }[];
    expect(rules.map((r) => r.Assertions.map((a) => a.Assert))).toEqual([
      [
        {
          'Fn::And': [
            { 'Fn::Equals': [{ Ref: 'AWS::AccountId' }, '123456789012'] },
            { 'Fn::Equals': [{ Ref: 'AWS::Region' }, 'us-east-1'] },
          ],
        },
      ],
    ]);
  });

  it('refuses an S3 Tables warehouse that is not a table bucket ARN, naming lake.catalog.warehouse', () => {
    for (const [warehouse, why] of [
      ['s3://shop-tables', '"s3://shop-tables" is not a table bucket ARN'],
      ['arn:aws:s3:::shop-tables', 'is not a table bucket ARN'],
      ['arn:aws:s3tables:us-east-1:123456789012:bucket/shop-tables/table/x', 'is not a table bucket ARN'],
      [undefined, 'is missing'],
    ] as const) {
      const raw = catalogSpec({ ...S3TABLES, warehouse });
      const pattern = new RegExp(`^lake\\.catalog\\.warehouse: .*${why.replace(/[.*"/]/g, '\\$&')}`);
      expect(configErrorOf(() => stackOf(raw)).message).toMatch(pattern);
      // Before bundling, as the app runs it.
      expect(configErrorOf(() => assertDeployableSpec(parseSpec(raw, { env: {} }))).message).toMatch(pattern);
    }
  });

  it('adds nothing for the file catalog (conditional PutObject is s3:PutObject), a plain lake or another REST catalog', () => {
    for (const t of [
      synth(rawSpec()),
      synth(catalogSpec({ type: 'file' })),
      synth({
        ...catalogSpec(GLUE),
        lake: { uri: 's3://tidemark-shop-lake/raw/', tableFormat: 'plain', catalog: GLUE },
      }),
      synth(catalogSpec({ type: 'rest', uri: 'https://polaris.example.com/api/catalog', namespace: 'shop' })),
    ]) {
      t.resourceCountIs('AWS::Glue::Database', 0);
      t.resourceCountIs('AWS::Athena::WorkGroup', 0);
      const actions = functionStatements(t).flatMap(actionsOf);
      expect(actions.filter((a) => /^(glue|s3tables|athena):/.test(a))).toEqual([]);
    }
    Annotations.fromStack(
      stackOf(
        catalogSpec({ type: 'rest', uri: 'https://polaris.example.com/api/catalog', namespace: 'shop' }),
      ),
    ).hasWarning(
      '*',
      Match.stringLikeRegexp('REST catalog at https://polaris.example.com/api/catalog .*grants nothing'),
    );
    Annotations.fromStack(
      stackOf({
        ...rawSpec(),
        lake: { uri: 's3://tidemark-shop-lake/raw/', tableFormat: 'plain', catalog: GLUE },
      }),
    ).hasWarning('*', Match.stringLikeRegexp('unused with lake.tableFormat: plain'));
  });

  it('refuses a Glue catalog region other than the stack region', () => {
    expect(configErrorOf(() => stackOf(catalogSpec({ ...GLUE, region: 'eu-west-1' }))).message).toMatch(
      /^lake\.catalog\.region: is eu-west-1 but the stack deploys to us-east-1/,
    );
  });

  it('passes the AwsSolutions cdk-nag pack with a Glue catalog (incremental, CDC, imported lake) and with S3 Tables', () => {
    expectNagClean(stackOf(catalogSpec(GLUE)));
    expectNagClean(stackOf(catalogSpec(GLUE, cdcSpec()), VPC_CONTEXT));
    expectNagClean(stackOf(catalogSpec(GLUE), { [CONTEXT.importBucket]: 'true' }));
    expectNagClean(stackOf(catalogSpec(S3TABLES, cdcSpec()), VPC_CONTEXT));
  });
});

describe('cdk synth of the deploy example through the app (infra/app.ts)', { timeout: 180_000 }, () => {
  it('embeds the spec without its comments: no embedded-parameter warning, the same spec in the task and the Lambda asset', async () => {
    // The example with its commented cdc table switched on, so the task definition embeds the spec.
    const example = readFileSync(join(REPO_ROOT, 'tidemark.deploy.example.yaml'), 'utf8');
    const cdcLine = /^( {2})# (- \{ source: app, table: public\.payments, mode: cdc\b.*)$/m;
    expect(example).toMatch(cdcLine);
    expect(example).toContain('${env:'); // the comment that CloudFormation would flag
    const text = example.replace(cdcLine, '$1$2');
    const specFile = join(work, 'deploy-example-cdc.yaml');
    writeFileSync(specFile, text);
    const out = join(work, 'cdk.out');
    await execFileAsync(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'infra/app.ts')], {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        TIDEMARK_SPEC_FILE: specFile,
        CDK_OUTDIR: out,
        CDK_CONTEXT_JSON: JSON.stringify({
          [CONTEXT.vpcId]: 'vpc-0123456789abcdef0',
          [CONTEXT.subnetIds]: 'subnet-0123456789abcdef0,subnet-0fedcba9876543210',
        }),
      },
    });

    const report = JSON.parse(readFileSync(join(out, 'validation-report.json'), 'utf8')) as {
      pluginReports: { violations: { ruleName: string; description: string }[] }[];
    };
    // Was: E1029 "Found an embedded parameter '${env:}' outside of an 'Fn::Sub'" from the
    // example's own header comment. With well-formed VPC and subnet ids nothing else is flagged.
    const violations = report.pluginReports
      .flatMap((r) => r.violations)
      .map((v) => `${v.ruleName}: ${v.description}`);
    expect(violations).toEqual([]);

    const template = Template.fromJSON(
      JSON.parse(readFileSync(join(out, 'tidemark-shop.template.json'), 'utf8')) as Record<string, unknown>,
    );
    const [taskDef] = Object.values(template.findResources('AWS::ECS::TaskDefinition'));
    const env = taskDef!.Properties.ContainerDefinitions[0].Environment as { Name: string; Value: string }[];
    const specYaml = env.find((e) => e.Name === 'TIDEMARK_SPEC_YAML')!.Value;
    expect(specYaml).not.toContain('#');
    // The same spec: the file and the embedded text parse to the same value.
    expect(parseYaml(specYaml)).toEqual(parseYaml(text));
    const lambdaAsset = readdirSync(out)
      .map((d) => join(out, d, 'tidemark.yaml'))
      .filter((f) => existsSync(f));
    expect(lambdaAsset).toHaveLength(1);
    expect(readFileSync(lambdaAsset[0]!, 'utf8')).toBe(specYaml);

    // The example's Glue catalog: the retained database, the Athena workgroup, and each role's
    // Glue grant on its own tables of that database.
    template.hasResource('AWS::Glue::Database', {
      DeletionPolicy: 'Retain',
      UpdateReplacePolicy: 'Retain',
      Properties: Match.objectLike({ DatabaseInput: Match.objectLike({ Name: 'shop' }) }),
    });
    template.hasResourceProperties('AWS::Athena::WorkGroup', { Name: 'tidemark-shop' });
    const glueTables = (roleId: string) =>
      serviceGrants(roleStatements(template, roleId), 'glue')
        .flatMap(([, resources]) => resources as string[])
        .filter((r) => r.includes(':table/'));
    const fnRole = Object.values(template.findResources('AWS::Lambda::Function'))[0]!.Properties.Role[
      'Fn::GetAtt'
    ][0] as string;
    expect(glueTables(fnRole)).toEqual([
      'arn:aws:glue:<Region>:<AccountId>:table/shop/public_orders',
      'arn:aws:glue:<Region>:<AccountId>:table/shop/public_customers',
    ]);
    expect(glueTables(taskRoleIds(template).get('app')!)).toEqual([
      'arn:aws:glue:<Region>:<AccountId>:table/shop/public_payments',
    ]);
  });
});

describe('deployedSpecText', () => {
  it('drops every comment and keeps the value: anchors, aliases, quoted "#", block scalars, flow collections', () => {
    const text = [
      '# c-head',
      'pipeline: shop   # c-trailing',
      'sources: &s',
      '  # c-before-key',
      '  app: { kind: postgres, secretArn: "arn:x#y" }  # c-flow',
      'copy: *s',
      "quoted: 'a # not a comment'",
      'block: |',
      '  line # kept, part of the value',
      '  two',
      'folded: >-',
      '  one',
      '  two',
      'list:',
      '  - 1 # c-item',
      '  # c-between',
      '  - 2',
      '# c-tail',
      '',
    ].join('\n');
    const out = deployedSpecText(text);
    expect(parseYaml(out)).toEqual(parseYaml(text));
    expect(out).not.toMatch(/c-[a-z]/);
    expect(out).toContain('&s');
    expect(out).toContain('*s');
  });
});
