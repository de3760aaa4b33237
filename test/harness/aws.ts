/**
 * AWS SDK v3 clients for the harness's DynamoDB and S3 (`testServers()`), with the settings the
 * local emulators need. Tests build their clients here and nowhere else.
 *
 * Owns: client construction for tests. Never creates tables or buckets; never reads real AWS
 * credentials unless the endpoint itself came from the environment (env.ts).
 */
import { DynamoDBClient, type DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { externalServers } from './env.js';
import { testServers } from './servers.js';

const REGION = 'us-east-1';
/**
 * s3rver checks SigV4 signatures against this one built-in key pair; dynalite accepts any.
 * Used whenever the harness started the emulator.
 */
const EMULATOR_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } as const;

/**
 * A DynamoDB client for the test DynamoDB (dynalite unless given by the environment).
 * `overrides` are merged last.
 */
export function dynamoClient(overrides: DynamoDBClientConfig = {}): DynamoDBClient {
  return new DynamoDBClient({
    endpoint: testServers().dynamoEndpoint,
    region: process.env.AWS_REGION ?? REGION,
    ...credentialsFor(externalServers().dynamoEndpoint),
    ...overrides,
  });
}

/**
 * An S3 client for the test S3 (s3rver unless given by the environment); the bucket is
 * `testServers().s3Bucket`. `overrides` are merged last.
 */
export function s3Client(overrides: S3ClientConfig = {}): S3Client {
  return new S3Client({
    endpoint: testServers().s3Endpoint,
    region: process.env.AWS_REGION ?? REGION,
    ...credentialsFor(externalServers().s3Endpoint),
    // s3rver serves buckets by path only (no virtual-host DNS on 127.0.0.1).
    forcePathStyle: true,
    // With the SDK's default (WHEN_SUPPORTED) a streamed PutObject is sent aws-chunked with a
    // trailing checksum, which s3rver stores verbatim as the object body.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    ...overrides,
  });
}

/**
 * Emulators get the fixed emulator key. An endpoint given by the environment (LocalStack, real
 * AWS) gets the SDK's default credential chain when the environment has credentials, else the
 * same dummy key (LocalStack accepts any).
 */
function credentialsFor(externalEndpoint: string | undefined): { credentials?: typeof EMULATOR_CREDENTIALS } {
  const env = process.env;
  if (externalEndpoint && (env.AWS_ACCESS_KEY_ID || env.AWS_PROFILE || env.AWS_WEB_IDENTITY_TOKEN_FILE))
    return {};
  return { credentials: EMULATOR_CREDENTIALS };
}
