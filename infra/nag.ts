/**
 * cdk-nag (AwsSolutions, v3) acknowledgements: `Validations.of(scope).acknowledge`, inherited by
 * every resource under `scope`. Granular findings (IAM4/IAM5 name the policy or resource) are
 * acknowledged by their exact finding id, so a new wildcard elsewhere still fails the check.
 */
import { type CfnElement, Stack, Token, Validations } from 'aws-cdk-lib';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type { IConstruct } from 'constructs';

/** Acknowledges `id` (a rule, or `Rule[finding]`) on `scope` and everything under it. */
export function acknowledge(scope: IConstruct, id: string, reason: string): void {
  Validations.of(scope).acknowledge({ id, reason });
}

/** The IAM5 finding id of object access on `<prefix>/*` of the lake bucket (created or imported). */
export function lakeObjectsFinding(bucket: s3.IBucket, prefix: string): string {
  const suffix = prefix ? `/${prefix}/*` : '/*';
  const cfn = bucket.node.defaultChild as CfnElement | undefined;
  if (cfn && Token.isUnresolved(bucket.bucketArn)) {
    return `AwsSolutions-IAM5[Resource::<${Stack.of(bucket).getLogicalId(cfn)}.Arn>${suffix}]`;
  }
  return `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::${bucket.bucketName}${suffix}]`;
}

/** Why object access is granted on the prefix: the writers name their own keys under it. */
export const LAKE_OBJECTS_REASON =
  'Objects are written under keys the writer names itself (one per page or flush) below the lake prefix, so object access is granted on "<prefix>/*" of the one lake bucket, nothing wider; listing is a separate statement limited to the prefix.';
