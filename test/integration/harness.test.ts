/**
 * Proves the harness servers are real and configured the way the integration tests rely on:
 * Postgres with logical decoding, MariaDB with a row binlog, DynamoDB with conditional writes,
 * S3 with streamed uploads and paginated listings through the harness clients.
 */
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  ConditionalCheckFailedException,
  CreateTableCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import {
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import mysql from 'mysql2/promise';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dynamoClient, s3Client } from '../harness/aws.js';
import { externalServers } from '../harness/env.js';
import { freshMysqlDatabase } from '../harness/mysql.js';
import { type FreshDatabase, freshPgDatabase } from '../harness/pg.js';
import { testServers } from '../harness/servers.js';

const suffix = randomBytes(4).toString('hex');

describe('PostgreSQL', () => {
  let db: FreshDatabase;
  let sql: postgres.Sql;
  beforeAll(async () => {
    db = await freshPgDatabase('harness');
    sql = postgres(db.url, { max: 1 });
  });
  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });

  it('runs with wal_level=logical (17 when the harness started it)', async () => {
    const [walLevel] = await sql`SHOW wal_level`;
    expect(walLevel?.wal_level).toBe('logical');
    if (!externalServers().pgUrl) {
      const [version] = await sql`SHOW server_version_num`;
      expect(Number(version?.server_version_num)).toBeGreaterThanOrEqual(170000);
      expect(Number(version?.server_version_num)).toBeLessThan(180000);
    }
  });

  it('creates and drops a pgoutput logical slot, and streams a change through it', async () => {
    const slot = `harness_${suffix}`;
    await sql`CREATE TABLE t (id int PRIMARY KEY, v text)`;
    await sql`CREATE PUBLICATION harness_pub FOR TABLE t`;
    const [created] =
      await sql`SELECT slot_name, lsn::text FROM pg_create_logical_replication_slot(${slot}, 'pgoutput')`;
    expect(created?.slot_name).toBe(slot);
    await sql`INSERT INTO t VALUES (1, 'x')`;
    const changes = await sql`
      SELECT count(*)::int AS n FROM pg_logical_slot_peek_binary_changes(
        ${slot}, NULL, NULL, 'proto_version', '1', 'publication_names', 'harness_pub')`;
    // BEGIN, RELATION, INSERT, COMMIT at least.
    expect(changes[0]?.n).toBeGreaterThanOrEqual(4);
    await sql`SELECT pg_drop_replication_slot(${slot})`;
    const left = await sql`SELECT 1 FROM pg_replication_slots WHERE slot_name = ${slot}`;
    expect(left.length).toBe(0);
  });

  it('drops a fresh database even when a replication slot still pins it', async () => {
    const other = await freshPgDatabase('harness_drop');
    const otherSql = postgres(other.url, { max: 1 });
    await otherSql`SELECT pg_create_logical_replication_slot(${`pin_${suffix}`}, 'pgoutput')`;
    await otherSql.end();
    await other.drop();
    const exists = await sql`SELECT 1 FROM pg_database WHERE datname = ${other.name}`;
    expect(exists.length).toBe(0);
  });
});

describe('MariaDB', () => {
  let db: FreshDatabase;
  let connection: mysql.Connection;
  beforeAll(async () => {
    db = await freshMysqlDatabase('harness');
    connection = await mysql.createConnection({ uri: db.url });
  });
  afterAll(async () => {
    await connection?.end();
    await db?.drop();
  });

  it('has the binary log on, in ROW format with full images', async () => {
    const [rows] = await connection.query<mysql.RowDataPacket[]>(
      "SHOW VARIABLES WHERE Variable_name IN ('log_bin', 'binlog_format', 'binlog_row_image')",
    );
    const variables = Object.fromEntries(rows.map((row) => [row.Variable_name, row.Value]));
    expect(variables).toEqual({ log_bin: 'ON', binlog_format: 'ROW', binlog_row_image: 'FULL' });
  });

  it('uses the fresh database and writes a row to the binlog', async () => {
    await connection.query('CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))');
    const [before] = await connection.query<mysql.RowDataPacket[]>('SHOW MASTER STATUS');
    await connection.query("INSERT INTO t VALUES (1, 'x')");
    const [after] = await connection.query<mysql.RowDataPacket[]>('SHOW MASTER STATUS');
    expect(after[0]?.File).toBeDefined();
    const moved =
      after[0]?.File !== before[0]?.File || Number(after[0]?.Position) > Number(before[0]?.Position);
    expect(moved).toBe(true);
  });

  it('serves the database named in the harness URL', async () => {
    const root = await mysql.createConnection({ uri: testServers().mysqlUrl });
    try {
      const [rows] = await root.query<mysql.RowDataPacket[]>('SELECT DATABASE() AS db');
      expect(rows[0]?.db).toBe(new URL(testServers().mysqlUrl).pathname.slice(1));
    } finally {
      await root.end();
    }
  });
});

describe('DynamoDB', () => {
  const client = dynamoClient();
  const table = `harness_${suffix}`;
  afterAll(async () => {
    await client.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined);
    client.destroy();
  });

  it('creates a table that is ACTIVE at once and enforces conditional puts', async () => {
    await client.send(
      new CreateTableCommand({
        TableName: table,
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    const described = await client.send(new DescribeTableCommand({ TableName: table }));
    expect(described.Table?.TableStatus).toBe('ACTIVE');

    const put = new PutItemCommand({
      TableName: table,
      Item: { pk: { S: 'cursor' }, version: { N: '1' } },
      ConditionExpression: 'attribute_not_exists(pk)',
    });
    await client.send(put);
    await expect(client.send(put)).rejects.toBeInstanceOf(ConditionalCheckFailedException);
  });
});

describe('S3', () => {
  const client = s3Client();
  const bucket = testServers().s3Bucket;
  const prefix = `harness-${suffix}/`;
  afterAll(() => client.destroy());

  it('has the harness bucket', async () => {
    await expect(client.send(new HeadBucketCommand({ Bucket: bucket }))).resolves.toBeDefined();
  });

  it('stores a streamed upload byte for byte (no aws-chunked framing)', async () => {
    const body = randomBytes(70_000);
    await client.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: `${prefix}streamed.bin`,
        Body: Readable.from([body.subarray(0, 30_000), body.subarray(30_000)]),
        ContentLength: body.length,
      }),
    );
    const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: `${prefix}streamed.bin` }));
    const bytes = Buffer.from(await got.Body!.transformToByteArray());
    expect(bytes.equals(body)).toBe(true);
  });

  it('pages ListObjectsV2 with continuation tokens, without --openssl-legacy-provider in this process', async () => {
    expect(`${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS ?? ''}`).not.toContain(
      'openssl-legacy-provider',
    );
    const keys = ['a', 'b', 'c', 'd', 'e'].map((name) => `${prefix}page/${name}.txt`);
    for (const key of keys) {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: key }));
    }
    const listed: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await client.send(
        new ListObjectsV2Command({
          Bucket: bucket,
          Prefix: `${prefix}page/`,
          MaxKeys: 2,
          ContinuationToken: token,
        }),
      );
      pages += 1;
      listed.push(...(page.Contents ?? []).map((object) => object.Key!));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    expect(pages).toBe(3);
    expect(listed).toEqual(keys);
  });
});
