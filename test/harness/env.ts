/**
 * Which servers the developer supplies through the environment instead of letting the harness
 * start them (LocalStack, real AWS, RDS, a local MariaDB...). One place for the variable names
 * and their precedence, read by global-setup.ts (what to start) and aws.ts (which credentials).
 *
 * Owns: reading these variables. Never starts or contacts anything.
 */

/** Endpoints/URLs given by the environment; undefined means the harness starts that server. */
export interface ExternalServers {
  /** TIDEMARK_TEST_PG_URL */
  readonly pgUrl: string | undefined;
  /** TIDEMARK_TEST_MYSQL_URL */
  readonly mysqlUrl: string | undefined;
  /** TIDEMARK_TEST_DYNAMO_ENDPOINT, else AWS_ENDPOINT_URL_DYNAMODB, else AWS_ENDPOINT_URL */
  readonly dynamoEndpoint: string | undefined;
  /** TIDEMARK_TEST_S3_ENDPOINT, else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL */
  readonly s3Endpoint: string | undefined;
  /** TIDEMARK_TEST_S3_BUCKET: required with an external S3 endpoint. */
  readonly s3Bucket: string | undefined;
}

export function externalServers(env: NodeJS.ProcessEnv = process.env): ExternalServers {
  const given = (...names: string[]): string | undefined =>
    names.map((name) => env[name]).find((value) => value !== undefined && value !== '');
  return {
    pgUrl: given('TIDEMARK_TEST_PG_URL'),
    mysqlUrl: given('TIDEMARK_TEST_MYSQL_URL'),
    dynamoEndpoint: given('TIDEMARK_TEST_DYNAMO_ENDPOINT', 'AWS_ENDPOINT_URL_DYNAMODB', 'AWS_ENDPOINT_URL'),
    s3Endpoint: given('TIDEMARK_TEST_S3_ENDPOINT', 'AWS_ENDPOINT_URL_S3', 'AWS_ENDPOINT_URL'),
    s3Bucket: given('TIDEMARK_TEST_S3_BUCKET'),
  };
}
