/**
 * The Athena workgroup of a pipeline, `tidemark-<pipeline>` (docs/deploy.md "Athena"): engine
 * version 3, its settings enforced over the client's (results location, SSE-S3 encryption, the
 * per-query bytes-scanned cutoff), query results in a bucket of their own that expires them.
 *
 * Owns: where query results go and what a query may scan. Results are kept apart from the lake:
 * whoever queries needs write access to the results location, which in the lake bucket would put
 * people's writes next to the pipeline's data; and results are disposable (expired after
 * RESULTS_EXPIRY_DAYS) while the lake bucket keeps old versions and may be imported (its
 * lifecycle is not the stack's to change). Grants no one anything: queriers bring their own IAM.
 */
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as athena from 'aws-cdk-lib/aws-athena';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';

/** Athena's engine version 3 (Trino-based; reads Iceberg v2 tables from the Glue catalog). */
export const ATHENA_ENGINE_VERSION = 'Athena engine version 3';
/** Query results are reproducible by running the query again: kept this long, then expired. */
export const RESULTS_EXPIRY_DAYS = 30;
/** Default per-query scan cutoff: a query reading more is cancelled (Athena bills per byte scanned). */
export const DEFAULT_SCAN_CUTOFF_GIB = 100;

export interface AthenaWorkGroupProps {
  readonly pipeline: string;
  /** Server access logs of the results bucket (prefix `athena-results/`). */
  readonly accessLogs: s3.IBucket;
  /** Per-query bytes-scanned cutoff, in GiB (`tidemark:athenaScanCutoffGiB`). */
  readonly scanCutoffGiB: number;
}

/** The workgroup and its results bucket. */
export class AthenaWorkGroup extends Construct {
  readonly workGroup: athena.CfnWorkGroup;
  readonly resultsBucket: s3.Bucket;
  /** `tidemark-<pipeline>`. */
  readonly name: string;

  constructor(scope: Construct, id: string, props: AthenaWorkGroupProps) {
    super(scope, id);
    this.name = `tidemark-${props.pipeline}`;
    this.resultsBucket = new s3.Bucket(this, 'Results', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      serverAccessLogsBucket: props.accessLogs,
      serverAccessLogsPrefix: 'athena-results/',
      // Retained like every bucket of the stack (CloudFormation cannot delete a non-empty one);
      // the lifecycle empties it within RESULTS_EXPIRY_DAYS either way.
      removalPolicy: RemovalPolicy.RETAIN,
      lifecycleRules: [
        {
          expiration: Duration.days(RESULTS_EXPIRY_DAYS),
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
      ],
    });
    this.workGroup = new athena.CfnWorkGroup(this, 'WorkGroup', {
      name: this.name,
      description: `tidemark ${props.pipeline}: queries of the lake's tables`,
      state: 'ENABLED',
      // Without it CloudFormation cannot delete a workgroup that has run queries or has saved
      // ones: `cdk destroy` drops the workgroup with its history and saved queries (the results
      // stay in the retained results bucket until they expire).
      recursiveDeleteOption: true,
      workGroupConfiguration: {
        enforceWorkGroupConfiguration: true,
        engineVersion: { selectedEngineVersion: ATHENA_ENGINE_VERSION },
        publishCloudWatchMetricsEnabled: true,
        bytesScannedCutoffPerQuery: props.scanCutoffGiB * 2 ** 30,
        resultConfiguration: {
          outputLocation: this.resultsBucket.s3UrlForObject('results/'),
          encryptionConfiguration: { encryptionOption: 'SSE_S3' },
        },
      },
    });
  }
}
