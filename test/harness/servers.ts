/**
 * What the harness hands to every test file: the addresses of the real servers started once per
 * test run by `global-setup.ts` (or given by environment variables, so the same tests run against
 * LocalStack, RDS or a developer's own servers).
 *
 * Tests read them with `testServers()`; they never start servers themselves.
 */
import { inject } from 'vitest';

export interface TestServers {
  /** Superuser URL of a PostgreSQL 17 with wal_level=logical, e.g. postgres://postgres:pw@127.0.0.1:5555/postgres */
  readonly pgUrl: string;
  /** Root URL of a MariaDB with row binlog, naming a database that exists, e.g. mysql://root:pw@127.0.0.1:3307/tidemark_test */
  readonly mysqlUrl: string;
  /** DynamoDB endpoint (dynalite), e.g. http://127.0.0.1:4567 */
  readonly dynamoEndpoint: string;
  /** S3 endpoint (s3rver, path style), e.g. http://127.0.0.1:4568 */
  readonly s3Endpoint: string;
  /** A bucket that exists on s3Endpoint. */
  readonly s3Bucket: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    tidemarkServers: TestServers;
  }
}

export function testServers(): TestServers {
  return inject('tidemarkServers');
}
