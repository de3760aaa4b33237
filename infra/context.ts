/**
 * The CDK context the stack reads (`cdk deploy -c key=value`, or cdk.json): the keys, each one's
 * parsing and range check, and what the VPC keys describe (the `Network` the Lambda and the CDC
 * tasks are placed in). docs/deploy.md explains every key.
 *
 * Owns: turning context values into settings. A bad value is a ConfigError naming `-c <key>`, so
 * synth fails before anything deploys. Never looks anything up: subnets and security groups are
 * imported by id, so synth needs no credentials.
 */
import { Fn, type Stack } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import type { Node } from 'constructs';
import { ConfigError } from '../shared/contracts/errors.js';

/**
 * Two full vCPUs. Lambda gives CPU in proportion to memory: about 1 vCPU of credit per 1,769 MB
 * (2 at 3,538 MB; 3 cores visible from 3,009 MB; 4 vCPUs of credit near 7,076 MB), while
 * `os.availableParallelism()` reports 2 even at 1,769 MB, so cores seen are not CPU had. A sync
 * keeps two threads busy, the main thread (read, decode, Arrow) and the Parquet encode worker
 * (shared/sink/parquet-writer.ts): at 1,769 MB they share one vCPU of credit. docs/deploy.md.
 */
export const DEFAULT_MEMORY_MB = 3538;

/** CDK context keys (`cdk deploy -c key=value`) the stack reads; docs/deploy.md explains each. */
export const CONTEXT = {
  spec: 'tidemark:spec',
  importBucket: 'tidemark:importBucket',
  importStateTable: 'tidemark:importStateTable',
  /** Use the existing Glue database of `lake.catalog.database` (e.g. one retained from a deleted stack). */
  importGlueDatabase: 'tidemark:importGlueDatabase',
  /** The Athena workgroup's per-query bytes-scanned cutoff, in GiB. */
  athenaScanCutoffGiB: 'tidemark:athenaScanCutoffGiB',
  memoryMb: 'tidemark:memoryMb',
  vpcId: 'tidemark:vpcId',
  subnetIds: 'tidemark:subnetIds',
  securityGroupIds: 'tidemark:securityGroupIds',
  alarmTopicArn: 'tidemark:alarmTopicArn',
  alarmEmail: 'tidemark:alarmEmail',
  /** CDC tasks reach AWS through the VPC's NAT (`nat`, default) or endpoints the stack creates. */
  cdcNetwork: 'tidemark:cdcNetwork',
  /** With `cdcNetwork=endpoints`: the subnets' route tables (S3/DynamoDB gateway endpoints). */
  routeTableIds: 'tidemark:routeTableIds',
  cdcLagAlarmSeconds: 'tidemark:cdcLagAlarmSeconds',
  cdcStandbyAlarmMinutes: 'tidemark:cdcStandbyAlarmMinutes',
} as const;

/** The function's memory from `tidemark:memoryMb`, default two vCPUs (DEFAULT_MEMORY_MB). */
export function memoryMb(node: Node): number {
  const raw = node.tryGetContext(CONTEXT.memoryMb) as unknown;
  if (raw === undefined) return DEFAULT_MEMORY_MB;
  const mb = Number(raw);
  if (!Number.isInteger(mb) || mb < 128 || mb > 10_240) {
    throw new ConfigError(
      `-c ${CONTEXT.memoryMb}`,
      `must be an integer from 128 to 10240 (MB), got "${String(raw)}"`,
    );
  }
  return mb;
}

/** Where the Lambda (when given) and the CDC tasks (always) run. */
export interface Network {
  readonly vpc: ec2.IVpc;
  readonly subnets: ec2.ISubnet[];
  /** Empty: each user creates its own group. */
  readonly securityGroups: ec2.ISecurityGroup[];
}

/**
 * VPC placement from context, for sources in private subnets (RDS). Subnets and security groups
 * are imported by id, so synth needs no lookup (and no credentials).
 */
export function vpcNetwork(stack: Stack): Network | undefined {
  const vpcId = contextString(stack.node, CONTEXT.vpcId);
  const subnetIds = contextList(stack.node, CONTEXT.subnetIds);
  const sgIds = contextList(stack.node, CONTEXT.securityGroupIds);
  if (!vpcId) {
    if (subnetIds.length > 0 || sgIds.length > 0) {
      throw new ConfigError(
        `-c ${CONTEXT.vpcId}`,
        `is required when ${CONTEXT.subnetIds} or ${CONTEXT.securityGroupIds} is given`,
      );
    }
    return undefined;
  }
  if (subnetIds.length === 0) {
    throw new ConfigError(
      `-c ${CONTEXT.subnetIds}`,
      'list the private subnet ids (comma-separated) the function and the CDC tasks run in',
    );
  }
  // Only the VPC id (for created security groups) and the subnets given here are rendered; the AZ
  // list is required by the import but never rendered, so no lookup is needed for it.
  const vpc = ec2.Vpc.fromVpcAttributes(stack, 'Vpc', { vpcId, availabilityZones: Fn.getAzs() });
  return {
    vpc,
    subnets: subnetIds.map((id, i) => ec2.Subnet.fromSubnetId(stack, `Subnet${i}`, id)),
    securityGroups: sgIds.map((id, i) =>
      ec2.SecurityGroup.fromSecurityGroupId(stack, `SecurityGroup${i}`, id),
    ),
  };
}

/** A number from context within [min, max], or the default. */
export function contextNumber(node: Node, key: string, fallback: number, min: number, max: number): number {
  const raw = node.tryGetContext(key) as unknown;
  if (raw === undefined || raw === null || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`-c ${key}`, `must be an integer from ${min} to ${max}, got "${String(raw)}"`);
  }
  return n;
}

export function contextString(node: Node, key: string): string | undefined {
  const v = node.tryGetContext(key) as unknown;
  if (v === undefined || v === null || v === '') return undefined;
  return String(v);
}

/** A list from context: a JSON array (cdk.json) or a comma-separated string (`-c key=a,b`). */
export function contextList(node: Node, key: string): string[] {
  const v = node.tryGetContext(key) as unknown;
  if (v === undefined || v === null) return [];
  const items = Array.isArray(v) ? v.map(String) : String(v).split(',');
  return items.map((s) => s.trim()).filter((s) => s.length > 0);
}

/** `-c key=true` arrives as the string "true"; cdk.json gives a boolean. */
export function contextFlag(node: Node, key: string): boolean {
  const v = node.tryGetContext(key) as unknown;
  return v === true || v === 'true';
}
