/**
 * The `rest` catalog: a server speaking the Iceberg REST catalog protocol (the spec's
 * rest-catalog-open-api.yaml): S3 Tables, Glue's Iceberg endpoint, Polaris, Nessie, Lakekeeper
 * (docs/iceberg.md "Catalogs: rest", decision 0025). The server owns the metadata files: it writes
 * each new `<table>/metadata/NNNNN-<uuid>.metadata.json` and answers with its location, so this
 * catalog never writes to the lake; tidemark writes data files, manifests and manifest lists.
 *
 * Owns: the HTTP calls, their authentication and what their answers mean. `GET /v1/config` once
 * (the `prefix` of the paths from its overrides, the warehouse passed as its query); load is
 * `GET .../namespaces/{ns}/tables/{t}` (404: no table); create is `POST .../tables` with the
 * metadata's schema, partition spec, sort order, properties and location (the namespace created
 * first when the server says it is missing; 409 is `exists`); a commit is `POST .../tables/{t}`
 * with the requirements and updates ./rest-updates.ts derives from base and updated metadata, the
 * requirement on `main`'s snapshot being the compare-and-swap. 409 (CommitFailedException) is
 * `conflict`; a 5xx, a timeout or a broken connection during a commit is `unknown` (the Iceberg
 * spec's CommitStateUnknown), settled by commitWithRetry's reload; 401/403/419 throw
 * `REST_CATALOG_ACCESS_DENIED`, any other refusal `REST_CATALOG_FAILED`.
 *
 * Requests are SigV4-signed when `sigv4` is set (service `s3tables` or `glue`; the SDK's signer
 * and default credential chain) or carry `Authorization: Bearer <token>`; the token is registered
 * with the redactor and never put in a message. Never deletes a file. A server that places the
 * tables itself (S3 Tables: no ListObjectsV2 or DeleteObject on its buckets) is the lake's
 * `placesTables` (./open-catalog.ts): a create then names no location, and nothing where the
 * server put a table is listed or deleted. The `version` of a `LoadedTable` is its metadata
 * location.
 */
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { SignatureV4 } from '@smithy/signature-v4';
import type { ErrorCode } from '../contracts/error-codes.js';
import { SinkError } from '../contracts/errors.js';
import { registerSecret } from '../observability/redact.js';
import type { Catalog, CommitOutcome, CreateOutcome, LoadedTable, TableIdent } from './catalog.js';
import { identText } from './catalog.js';
import { type JsonValue, parseJson, parseTableMetadata, stringifyJson } from './metadata-json.js';
import { restCommitOf } from './rest-updates.js';
import type { IcebergTableMetadata } from './spec.js';

/** A request that got no answer within this is abandoned (a commit's outcome is then `unknown`). */
const DEFAULT_TIMEOUT_MS = 30_000;
/** Statuses that say the caller may not: a missing or wrong credential, or a refused action. */
const DENIED = new Set([401, 403, 419]);

/** The `rest` settings of `lake.catalog` (shared/config/spec.ts). */
export interface RestCatalogConfig {
  readonly uri: string;
  readonly warehouse?: string;
  readonly namespace: string;
  readonly sigv4?: { readonly service: string; readonly region?: string };
  readonly token?: string;
}

export interface RestCatalogOptions {
  /** The catalog's base URI, without `/v1` (e.g. `https://s3tables.us-east-1.amazonaws.com/iceberg`). */
  readonly uri: string;
  /** Sent as `GET /v1/config?warehouse=` (S3 Tables: the table bucket's ARN). */
  readonly warehouse?: string;
  /** SigV4-sign each request for this service and region (default region: the URI's, else AWS_REGION). */
  readonly sigv4?: { readonly service: string; readonly region?: string };
  /** Credentials for SigV4; default the SDK's default chain. */
  readonly credentials?: ConstructorParameters<typeof SignatureV4>[0]['credentials'];
  /** A bearer token sent as `Authorization`; registered with the redactor. */
  readonly token?: string;
  /** The HTTP client; default the global `fetch` (tests wrap it to lose a reply). */
  readonly fetch?: typeof fetch;
  /** Per-request timeout; default 30 s. */
  readonly timeoutMs?: number;
  /** The spec field that configures the catalog, named in messages. Default `lake.catalog`. */
  readonly field?: string;
}

/** What one request got: a status and its JSON body (undefined when empty or not JSON). */
interface Reply {
  readonly status: number;
  readonly body: JsonValue | undefined;
  readonly text: string;
}

/** A request that got no reply: the connection failed or timed out. */
class NoReply extends Error {
  override readonly name = 'NoReply';
}

/** The `rest` catalog over one Iceberg REST server. */
export class RestCatalog implements Catalog {
  readonly kind = 'rest';
  private readonly base: string;
  private readonly options: RestCatalogOptions;
  private readonly field: string;
  private readonly fetch: typeof fetch;
  private readonly signer: SignatureV4 | undefined;
  /** `/v1/<prefix>`, settled once by `GET /v1/config` (a rejection is retried next time). */
  private prefixed: Promise<string> | undefined;

  constructor(options: RestCatalogOptions) {
    this.options = options;
    this.base = options.uri.replace(/\/+$/, '');
    this.field = options.field ?? 'lake.catalog';
    this.fetch = options.fetch ?? globalThis.fetch;
    if (options.token !== undefined) registerSecret(options.token);
    if (options.sigv4) {
      const region =
        options.sigv4.region ??
        regionOfUri(this.base) ??
        process.env.AWS_REGION ??
        process.env.AWS_DEFAULT_REGION;
      if (region === undefined) {
        throw new SinkError(
          'REST_CATALOG_FAILED',
          this.base,
          `${this.field}.sigv4 has no region and none is in ${this.base} or AWS_REGION; set ${this.field}.sigv4.region`,
        );
      }
      this.signer = new SignatureV4({
        service: options.sigv4.service,
        region,
        credentials: options.credentials ?? defaultProvider(),
        sha256: Sha256,
      });
    }
  }

  async loadTable(ident: TableIdent): Promise<LoadedTable | undefined> {
    const reply = await this.request('GET', await this.tablePath(ident), 'load', ident);
    if (reply.status === 404) return undefined;
    if (reply.status !== 200) throw this.refused('load', ident, reply);
    return this.loaded('load', ident, reply);
  }

  async createTable(ident: TableIdent, metadata: IcebergTableMetadata): Promise<CreateOutcome> {
    const schema = metadata.schemas.find((s) => s['schema-id'] === metadata['current-schema-id']);
    const spec = metadata['partition-specs'].find((s) => s['spec-id'] === metadata['default-spec-id']);
    const order = metadata['sort-orders'].find((s) => s['order-id'] === metadata['default-sort-order-id']);
    const body = {
      name: ident.name,
      ...(metadata.location ? { location: metadata.location } : {}),
      schema,
      'partition-spec': spec,
      'write-order': order,
      'stage-create': false,
      properties: metadata.properties,
    };
    const path = `${await this.pathRoot()}/namespaces/${encodeURIComponent(ident.namespace)}/tables`;
    let reply = await this.request('POST', path, 'create', ident, body);
    if (reply.status === 404 && errorType(reply) === 'NoSuchNamespaceException') {
      await this.createNamespace(ident);
      reply = await this.request('POST', path, 'create', ident, body);
    }
    if (reply.status === 409) return { status: 'exists' };
    if (reply.status !== 200) throw this.refused('create', ident, reply);
    const table = this.loaded('create', ident, reply);
    // A server assigns fresh field ids to a new table's schema; data files are written with ours.
    const created = table.metadata.schemas.find(
      (s) => s['schema-id'] === table.metadata['current-schema-id'],
    );
    if (stringifyJson(created?.fields ?? null) !== stringifyJson(schema?.fields ?? null)) {
      throw new SinkError(
        'ICEBERG_METADATA_INVALID',
        identText(ident),
        `the REST catalog at ${this.base} created ${identText(ident)} with other field ids or types than tidemark asked for; drop the table in the catalog (tidemark writes data files with its own ids) and report a bug`,
      );
    }
    return { status: 'created', table };
  }

  async commitTable(
    ident: TableIdent,
    base: LoadedTable,
    updated: IcebergTableMetadata,
  ): Promise<CommitOutcome> {
    const { requirements, updates } = restCommitOf(identText(ident), base.metadata, updated);
    const body = {
      identifier: { namespace: [ident.namespace], name: ident.name },
      requirements,
      updates,
    };
    let reply: Reply;
    try {
      reply = await this.request('POST', await this.tablePath(ident), 'commit', ident, body);
    } catch (e) {
      if (e instanceof NoReply) return { status: 'unknown', cause: e };
      throw e;
    }
    // 404: the table was dropped; the reload tells commitWithRetry so.
    if (reply.status === 409 || reply.status === 404) return { status: 'conflict' };
    if (reply.status >= 500) {
      return { status: 'unknown', cause: new Error(`HTTP ${reply.status}: ${describe(reply)}`) };
    }
    if (reply.status !== 200) throw this.refused('commit', ident, reply);
    return { status: 'committed', table: this.loaded('commit', ident, reply) };
  }

  /**
   * Whether `namespace` exists (`GET .../namespaces/{ns}`; S3 Tables: `s3tables:GetNamespace`):
   * `tidemark check`'s line for a catalog that places tables, which it checks through the
   * catalog only. A missing one is created at the first commit.
   * @throws SinkError as every call: access denied, unreachable, refused.
   */
  async probeNamespace(namespace: string): Promise<boolean> {
    const op = `load the namespace ${namespace} of`;
    const path = `${await this.pathRoot()}/namespaces/${encodeURIComponent(namespace)}`;
    const reply = await this.request('GET', path, op, undefined);
    if (reply.status === 404) return false;
    if (reply.status !== 200) throw this.refused(op, undefined, reply);
    return true;
  }

  private async createNamespace(ident: TableIdent): Promise<void> {
    const reply = await this.request(
      'POST',
      `${await this.pathRoot()}/namespaces`,
      'create the namespace of',
      ident,
      {
        namespace: [ident.namespace],
        properties: {},
      },
    );
    if (reply.status !== 200 && reply.status !== 409)
      throw this.refused('create the namespace of', ident, reply);
  }

  /** The `LoadTableResult` / `CommitTableResponse` of a reply as a `LoadedTable`. */
  private loaded(op: string, ident: TableIdent, reply: Reply): LoadedTable {
    const body = reply.body as Record<string, JsonValue> | undefined;
    const location = body?.['metadata-location'];
    if (typeof location !== 'string' || typeof body?.metadata !== 'object' || body.metadata === null) {
      throw new SinkError(
        'REST_CATALOG_FAILED',
        identText(ident),
        `the REST catalog at ${this.base} answered the ${op} of ${identText(ident)} without "metadata-location" and "metadata" (${reply.text.slice(0, 200)}); is ${this.field}.uri an Iceberg REST catalog?`,
      );
    }
    return {
      metadata: parseTableMetadata(stringifyJson(body.metadata), location),
      metadataLocation: location,
      version: location,
    };
  }

  private async tablePath(ident: TableIdent): Promise<string> {
    return `${await this.pathRoot()}/namespaces/${encodeURIComponent(ident.namespace)}/tables/${encodeURIComponent(ident.name)}`;
  }

  /** `/v1` plus the server's prefix (`GET /v1/config`'s overrides, else its defaults). */
  private pathRoot(): Promise<string> {
    this.prefixed ??= (async () => {
      const query = this.options.warehouse ? `?warehouse=${encodeURIComponent(this.options.warehouse)}` : '';
      const reply = await this.request('GET', `/v1/config${query}`, 'read the config of', undefined);
      if (reply.status !== 200) throw this.refused('read the config of', undefined, reply);
      const body = reply.body as {
        overrides?: Record<string, JsonValue>;
        defaults?: Record<string, JsonValue>;
      };
      const prefix = body?.overrides?.prefix ?? body?.defaults?.prefix;
      return typeof prefix === 'string' && prefix !== '' ? `/v1/${prefix.replace(/^\/+|\/+$/g, '')}` : '/v1';
    })();
    const pending = this.prefixed;
    pending.catch(() => {
      if (this.prefixed === pending) this.prefixed = undefined;
    });
    return pending;
  }

  /**
   * One request, signed or with the token, with a timeout.
   * @throws NoReply when no answer came; SinkError `REST_CATALOG_UNREACHABLE` is the caller's call.
   */
  private async request(
    method: 'GET' | 'POST',
    path: string,
    op: string,
    ident: TableIdent | undefined,
    body?: unknown,
  ): Promise<Reply> {
    const url = new URL(this.base + path);
    const text = body === undefined ? undefined : stringifyJson(body);
    let headers: Record<string, string> = {
      accept: 'application/json',
      ...(text === undefined ? {} : { 'content-type': 'application/json' }),
    };
    if (this.options.token !== undefined) headers.authorization = `Bearer ${this.options.token}`;
    if (this.signer) headers = await this.sign(url, method, headers, text ?? '');
    let response: Response;
    let answer: string;
    try {
      response = await this.fetch(url, {
        method,
        headers,
        ...(text === undefined ? {} : { body: text }),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS),
      });
      answer = await response.text();
    } catch (e) {
      const why = e instanceof Error ? `${e.name}: ${e.message}${causeOf(e)}` : String(e);
      const fault = new NoReply(`no reply from ${url.origin} to ${method} ${url.pathname} (${why})`, {
        cause: e,
      });
      if (op === 'commit') throw fault;
      throw new SinkError(
        'REST_CATALOG_UNREACHABLE',
        ident ? identText(ident) : this.base,
        `the REST catalog at ${this.base} did not answer (${op} ${ident ? identText(ident) : 'the catalog'}: ${why}); check ${this.field}.uri and that the server is up`,
        { cause: fault },
      );
    }
    let parsed: JsonValue | undefined;
    try {
      parsed = answer === '' ? undefined : parseJson(answer);
    } catch {
      parsed = undefined;
    }
    return { status: response.status, body: parsed, text: answer };
  }

  /** The headers of `url` signed with SigV4, the body's SHA-256 among them (S3 Tables wants it). */
  private async sign(url: URL, method: string, headers: Record<string, string>, body: string) {
    const query: Record<string, string> = {};
    for (const [k, v] of url.searchParams) query[k] = v;
    const signed = await this.signer!.sign({
      method,
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: url.pathname,
      query,
      headers: {
        ...headers,
        host: url.host,
        'x-amz-content-sha256': createHash('sha256').update(body).digest('hex'),
      },
      body,
    });
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(signed.headers)) if (k !== 'host') out[k] = v;
    return out;
  }

  private refused(op: string, ident: TableIdent | undefined, reply: Reply): SinkError {
    const what = ident ? identText(ident) : 'the catalog';
    const code: ErrorCode = DENIED.has(reply.status) ? 'REST_CATALOG_ACCESS_DENIED' : 'REST_CATALOG_FAILED';
    const fix =
      code === 'REST_CATALOG_ACCESS_DENIED'
        ? this.options.sigv4
          ? `the AWS credentials may not (grant the role ${this.options.sigv4.service}:* on the catalog and its tables, or fix ${this.field}.sigv4)`
          : this.options.token !== undefined
            ? `check ${this.field}.token (expired, or not allowed to)`
            : `the catalog wants credentials: set ${this.field}.token, or ${this.field}.sigv4 for an AWS endpoint`
        : `check ${this.field}.uri${this.options.warehouse ? ` and ${this.field}.warehouse` : ''}`;
    return new SinkError(
      code,
      what,
      `the REST catalog at ${this.base} refused to ${op} ${what}: HTTP ${reply.status} ${describe(reply)}; ${fix}`,
    );
  }
}

/** The RestCatalog of `lake.catalog` with `type: rest` (the namespace is the caller's). */
export function openRestCatalog(
  config: RestCatalogConfig,
  options: Omit<RestCatalogOptions, 'uri' | 'warehouse' | 'sigv4' | 'token'> = {},
): RestCatalog {
  return new RestCatalog({
    ...options,
    uri: config.uri,
    ...(config.warehouse !== undefined ? { warehouse: config.warehouse } : {}),
    ...(config.sigv4 !== undefined ? { sigv4: config.sigv4 } : {}),
    ...(config.token !== undefined ? { token: config.token } : {}),
  });
}

/** The region of an AWS endpoint URI (`https://s3tables.us-east-1.amazonaws.com/iceberg`). */
export function regionOfUri(uri: string): string | undefined {
  return /^https?:\/\/[^/]*?\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?(?:[:/]|$)/.exec(uri)?.[1];
}

/** The spec's `ErrorModel` of a reply: `type: message`, else the start of the body. */
function describe(reply: Reply): string {
  const error = (reply.body as { error?: { type?: unknown; message?: unknown } } | undefined)?.error;
  if (error && typeof error === 'object')
    return `${String(error.type ?? 'error')}: ${String(error.message ?? '')}`;
  return reply.text.slice(0, 200) || '(no body)';
}

function errorType(reply: Reply): string | undefined {
  const type = (reply.body as { error?: { type?: unknown } } | undefined)?.error?.type;
  return typeof type === 'string' ? type : undefined;
}

function causeOf(e: Error): string {
  const cause = (e as { cause?: unknown }).cause;
  return cause instanceof Error ? ` (${cause.message})` : '';
}

/** SHA-256 and HMAC-SHA-256 for the SigV4 signer, from node:crypto. */
class Sha256 {
  private readonly secret: string | Uint8Array | undefined;
  private hash: Hash | Hmac;

  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.secret =
      secret === undefined || typeof secret === 'string'
        ? secret
        : ArrayBuffer.isView(secret)
          ? new Uint8Array(secret.buffer, secret.byteOffset, secret.byteLength)
          : new Uint8Array(secret);
    this.hash = this.fresh();
  }

  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(
      typeof data === 'string'
        ? data
        : ArrayBuffer.isView(data)
          ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
          : new Uint8Array(data),
    );
  }

  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }

  reset(): void {
    this.hash = this.fresh();
  }

  private fresh(): Hash | Hmac {
    return this.secret === undefined ? createHash('sha256') : createHmac('sha256', this.secret);
  }
}
