/**
 * An `ObjectStore` over one S3 bucket (AWS, LocalStack or s3rver: endpoint, region, path style
 * and credentials are all options, so one code path serves all three).
 *
 * Owns: the S3 calls of the sink. PutObject sends the body as bytes with its ContentLength and
 * Content-MD5 (never a stream: a streamed body is sent aws-chunked, which some emulators store
 * verbatim); ListObjectsV2 follows continuation tokens and passes `StartAfter`; DeleteObjects goes in chunks of 1000 keys
 * (the API limit) and fails loudly on any per-key error. `putIfAbsent` is PutObject with
 * `If-None-Match: *`: S3 answers 412 PreconditionFailed when the key exists (`exists`) and 409
 * ConditionalRequestConflict while another conditional write to the key is in flight, which AWS
 * says to retry; that is the one retry this store makes beyond the SDK's own policy. Never creates
 * buckets.
 */
import { createHash } from 'node:crypto';
import {
  DeleteObjectsCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  NoSuchKey,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { classifyAwsError } from '../aws/errors.js';
import { guardServiceReplies } from '../aws/service-guard.js';
import type { ErrorCode } from '../contracts/error-codes.js';
import { SinkError } from '../contracts/errors.js';
import type { ObjectStore, StoredObject } from './object-store.js';

/** DeleteObjects accepts at most this many keys per request. */
const DELETE_CHUNK = 1000;
/** Attempts of a conditional PutObject that S3 answers 409 ConditionalRequestConflict. */
const CONDITIONAL_CONFLICT_ATTEMPTS = 5;
/** First wait after a 409, doubled per attempt (with jitter). */
const CONDITIONAL_CONFLICT_WAIT_MS = 50;

export interface S3ObjectStoreOptions {
  readonly bucket: string;
  /** A ready client; when given, the connection options below are ignored. */
  readonly client?: S3Client;
  readonly region?: string;
  /** e.g. `http://127.0.0.1:4568` for s3rver or `http://localhost:4566` for LocalStack. */
  readonly endpoint?: string;
  /** Path-style URLs (`endpoint/bucket/key`); emulators need it. */
  readonly forcePathStyle?: boolean;
  /** Static credentials; default: the SDK's credential chain (Lambda role, env, profile). */
  readonly credentials?: S3ClientConfig['credentials'];
  /** Keys per ListObjectsV2 page (default 1000, the API maximum); small values test pagination. */
  readonly listPageSize?: number;
}

/** An S3-bucket-backed object store. */
export class S3ObjectStore implements ObjectStore {
  readonly bucket: string;
  readonly client: S3Client;
  private readonly listPageSize: number;
  /** The custom endpoint, if any: named in errors. */
  private readonly endpoint: string | undefined;

  constructor(options: S3ObjectStoreOptions) {
    this.bucket = options.bucket;
    this.endpoint = options.endpoint;
    this.listPageSize = options.listPageSize ?? 1000;
    this.client =
      options.client ??
      new S3Client({
        ...(options.region ? { region: options.region } : {}),
        ...(options.endpoint ? { endpoint: options.endpoint } : {}),
        ...(options.forcePathStyle !== undefined ? { forcePathStyle: options.forcePathStyle } : {}),
        ...(options.credentials ? { credentials: options.credentials } : {}),
        // SDK checksums only where the API requires them (DeleteObjects): with the default, a
        // streamed body goes aws-chunked, which s3rver stores verbatim. `put` sends its own
        // Content-MD5 instead, which S3 verifies (s3rver ignores it).
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
      });
    // An endpoint that answers but is not S3 fails as SINK_WRONG_SERVICE, not as a parse error.
    guardServiceReplies(this.client, 'S3');
  }

  uri(key: string): string {
    return `s3://${this.bucket}/${key}`;
  }

  async put(key: string, bytes: Uint8Array): Promise<void> {
    try {
      await this.client.send(this.putCommand(key, bytes, false));
    } catch (e) {
      throw this.failed('PutObject', key, e);
    }
  }

  async putIfAbsent(key: string, bytes: Uint8Array): Promise<'created' | 'exists'> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.client.send(this.putCommand(key, bytes, true));
        return 'created';
      } catch (e) {
        const { name, status } = errorShape(e);
        if (name === 'PreconditionFailed' || status === 412) return 'exists';
        const conflict = name === 'ConditionalRequestConflict' || status === 409;
        if (!conflict || attempt >= CONDITIONAL_CONFLICT_ATTEMPTS) throw this.failed('PutObject', key, e);
        const wait = CONDITIONAL_CONFLICT_WAIT_MS * 2 ** (attempt - 1);
        await new Promise((r) => setTimeout(r, wait / 2 + Math.random() * (wait / 2)));
      }
    }
  }

  private putCommand(key: string, bytes: Uint8Array, ifAbsent: boolean): PutObjectCommand {
    return new PutObjectCommand({
      Bucket: this.bucket,
      Key: key,
      Body: bytes,
      ContentLength: bytes.byteLength,
      // End-to-end integrity: S3 rejects the PUT (BadDigest) if the body it got has another MD5.
      ContentMD5: createHash('md5').update(bytes).digest('base64'),
      ContentType: key.endsWith('.parquet')
        ? 'application/vnd.apache.parquet'
        : key.endsWith('.json')
          ? 'application/json'
          : 'application/octet-stream',
      ...(ifAbsent ? { IfNoneMatch: '*' } : {}),
    });
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      return out.Body ? await out.Body.transformToByteArray() : new Uint8Array(0);
    } catch (e) {
      if (e instanceof NoSuchKey || (e as { name?: string }).name === 'NoSuchKey') return undefined;
      throw this.failed('GetObject', key, e);
    }
  }

  /** A ranged GetObject (`Range: bytes=start-(end-1)`); a range past the object's end reads nothing. */
  async getRange(key: string, start: number, end: number): Promise<Uint8Array | undefined> {
    if (end <= start) return (await this.exists(key)) ? new Uint8Array(0) : undefined;
    try {
      const out = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: `bytes=${start}-${end - 1}` }),
      );
      const bytes = out.Body ? await out.Body.transformToByteArray() : new Uint8Array(0);
      if (bytes.length <= end - start) return bytes;
      // More than asked for: a store that ignored the range (s3rver does for `bytes=0-0`) answered
      // from where its Content-Range says (the whole object: from 0).
      const from = Number(/^bytes (\d+)-/.exec(out.ContentRange ?? '')?.[1] ?? 0);
      return bytes.slice(start - from, end - from);
    } catch (e) {
      if (e instanceof NoSuchKey || (e as { name?: string }).name === 'NoSuchKey') return undefined;
      if ((e as { name?: string }).name === 'InvalidRange') return new Uint8Array(0);
      throw this.failed('GetObject', key, e);
    }
  }

  private async exists(key: string): Promise<boolean> {
    return (await this.getRange(key, 0, 1)) !== undefined;
  }

  async list(prefix: string, startAfter?: string): Promise<StoredObject[]> {
    const out: StoredObject[] = [];
    let token: string | undefined;
    try {
      do {
        const page = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: prefix,
            MaxKeys: this.listPageSize,
            // S3 ignores StartAfter once a continuation token is given; send it on the first page.
            ...(token
              ? { ContinuationToken: token }
              : startAfter !== undefined
                ? { StartAfter: startAfter }
                : {}),
          }),
        );
        for (const o of page.Contents ?? []) {
          if (o.Key !== undefined) out.push({ key: o.Key, size: o.Size ?? 0 });
        }
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
    } catch (e) {
      throw this.failed('ListObjectsV2', prefix, e);
    }
    // S3 lists in UTF-8 byte order; sort (and bound) anyway so every store and emulator keeps the
    // same contract.
    return out
      .filter((o) => startAfter === undefined || o.key > startAfter)
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += DELETE_CHUNK) {
      const chunk = keys.slice(i, i + DELETE_CHUNK);
      let errors: { Key?: string; Code?: string; Message?: string }[];
      try {
        const out = await this.client.send(
          new DeleteObjectsCommand({
            Bucket: this.bucket,
            Delete: { Objects: chunk.map((Key) => ({ Key })), Quiet: true },
          }),
        );
        errors = out.Errors ?? [];
      } catch (e) {
        throw this.failed('DeleteObjects', chunk[0]!, e);
      }
      if (errors.length > 0) {
        const first = errors[0]!;
        throw new SinkError(
          'SINK_STORE_FAILED',
          '',
          `DeleteObjects on s3://${this.bucket} failed for ${errors.length} key(s), first ${first.Key}: ${first.Code} ${first.Message ?? ''}; check the role has s3:DeleteObject on the lake prefix, then rerun (recovery is idempotent)`,
        );
      }
    }
  }

  private failed(op: string, key: string, cause: unknown): SinkError {
    const action =
      op === 'ListObjectsV2'
        ? 's3:ListBucket'
        : op === 'DeleteObjects'
          ? 's3:DeleteObject'
          : op === 'GetObject'
            ? 's3:GetObject'
            : 's3:PutObject';
    const failure = classifyAwsError(cause, {
      service: 'S3',
      field: 'lake',
      resource: `bucket ${this.bucket}`,
      action,
      endpoint: this.endpoint,
    });
    if (failure) {
      const code: ErrorCode = failure.kind === 'NOT_FOUND' ? 'SINK_BUCKET_MISSING' : `SINK_${failure.kind}`;
      // The endpoint is wrong, not the object: the message names the setting, no key before it.
      if (failure.kind === 'WRONG_SERVICE') return new SinkError(code, '', failure.message, { cause });
      const message =
        failure.kind === 'NOT_FOUND'
          ? `bucket ${this.bucket} does not exist${this.endpoint ? ` at ${this.endpoint}` : ''}; create it (cdk deploy does) or fix the bucket in lake.uri`
          : failure.message;
      return new SinkError(code, '', `${op} s3://${this.bucket}/${key}: ${message}`, { cause });
    }
    const why = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
    return new SinkError(
      'SINK_STORE_FAILED',
      '',
      `${op} s3://${this.bucket}/${key} failed (${why}); check the bucket exists, lake.endpoint / lake.region, and that the role may ${action} on it`,
      { cause },
    );
  }
}

function errorShape(e: unknown): { name: string | undefined; status: number | undefined } {
  const shape = e as { name?: string; $metadata?: { httpStatusCode?: number } } | undefined;
  return { name: shape?.name, status: shape?.$metadata?.httpStatusCode };
}
