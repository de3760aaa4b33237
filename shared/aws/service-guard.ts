/**
 * Tells a reply of the AWS service from a reply of something else at the same address: a web
 * server answering `404 Not Found`, an HTML page, another service's JSON. Without it an endpoint
 * that answers but is the wrong service surfaces as the SDK's parse error (`Unexpected token 'N'`,
 * `XML parse error`, `UnknownError`), or worse as a success: a DynamoDB read of another service's
 * `{}`-shaped JSON is an empty state, an S3 put answered `200` by a web server looks written.
 *
 * Owns: one middleware per client, between the HTTP handler and the SDK's deserializer, that reads
 * the raw reply (status, content type, body) and throws `WrongServiceError` when it cannot be the
 * service's; the body is handed on to the deserializer unchanged otherwise. Judges by the shape
 * every implementation of the protocol shares (AWS, LocalStack, dynalite, s3rver, MinIO), never by
 * vendor headers. Never reads an S3 object's body (GetObject's and HeadObject's replies are the
 * object's own), never names credentials (the URL it carries is an origin only).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { S3Client } from '@aws-sdk/client-s3';

/** The services whose replies are judged. */
export type GuardedService = 'DynamoDB' | 'S3';

/** What a reply from the wrong service showed; classifyAwsError turns it into `*_WRONG_SERVICE`. */
export class WrongServiceError extends Error {
  override name = 'WrongServiceError';
  constructor(
    readonly service: GuardedService,
    /** The origin the request went to (`http://127.0.0.1:4566`): no path, no credentials. */
    readonly url: string,
    readonly status: number,
    /** The reply's media type without parameters, `''` when none. */
    readonly contentType: string,
    /** The start of the body, printable and short (`"` shown as `'`), `''` when empty. */
    readonly bodyStart: string,
  ) {
    super(`${url} answered ${replyText(status, contentType, bodyStart)}, which is no ${service} reply`);
  }
}

/** `HTTP 404 (text/plain) "Not Found"`: the reply as a message shows it. */
export function replyText(status: number, contentType: string, bodyStart: string): string {
  return `HTTP ${status}${contentType ? ` (${contentType})` : ''}${bodyStart ? ` "${bodyStart}"` : ' with an empty body'}`;
}

/** How much of a wrong reply's body a message quotes. */
const BODY_QUOTE_CHARS = 32;
const MIDDLEWARE_NAME = 'tidemarkServiceGuard';
const guarded = new WeakSet<object>();

/** The parts of a raw HTTP reply and request the guard reads (the SDK's HttpResponse/HttpRequest). */
interface RawResponse {
  statusCode: number;
  headers: Record<string, string | undefined>;
  body?: unknown;
}
interface RawRequest {
  method?: string;
  protocol?: string;
  hostname?: string;
  port?: number;
}

/**
 * Adds the reply guard to `client` (once; a client passed in by a caller is guarded too, so a
 * store judges every reply whoever built its client).
 */
export function guardServiceReplies(client: DynamoDBClient | S3Client, service: GuardedService): void {
  if (guarded.has(client)) return;
  guarded.add(client);
  const collect = client.config.streamCollector;
  const middleware =
    (next: (args: unknown) => Promise<{ response: unknown }>, context: { commandName?: string }) =>
    async (args: unknown) => {
      const result = await next(args);
      const response = result.response as RawResponse;
      const request = (args as { request?: RawRequest }).request ?? {};
      const ok = response.statusCode >= 200 && response.statusCode < 300;
      // An S3 object's reply carries the object itself: its type and bytes are the user's.
      if (service === 'S3' && ok && /^(Get|Head)Object/.test(context.commandName ?? '')) return result;
      const body: Uint8Array =
        response.body instanceof Uint8Array ? response.body : await collect(response.body as never);
      response.body = body;
      const contentType = mediaType(response.headers);
      const text = new TextDecoder().decode(body);
      const fits =
        service === 'DynamoDB'
          ? isDynamoReply(response, ok, text)
          : isS3Reply(response, ok, contentType, text, request.method);
      if (fits) return result;
      const wrong = new WrongServiceError(
        service,
        origin(request),
        response.statusCode,
        contentType,
        quote(text),
      );
      // A 5xx may be a gateway in front of the real service (a 502/503 page): the SDK's retry
      // takes it as transient by its status, and only a reply that stays wrong fails, as this.
      if (response.statusCode >= 500)
        Object.assign(wrong, { $metadata: { httpStatusCode: response.statusCode } });
      throw wrong;
    };
  // 'after' the deserializer is nearer the HTTP handler: the reply is read before it is parsed.
  client.middlewareStack.addRelativeTo(middleware as never, {
    relation: 'after',
    toMiddleware: 'deserializerMiddleware',
    name: MIDDLEWARE_NAME,
    override: true,
  });
}

/**
 * DynamoDB speaks JSON 1.0 both ways: every reply is a JSON object, an error's names its type
 * (`__type`, or the `x-amzn-errortype` header), a success's members are the API's PascalCase
 * shapes (`Item`, `Attributes`, `Table`, ...; `{}` for a bare PutItem).
 */
function isDynamoReply(response: RawResponse, ok: boolean, text: string): boolean {
  if (!ok && response.statusCode >= 500 && hasAwsRequestId(response)) return true; // the SDK retries it
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return false;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return false;
  if (!ok)
    return (
      typeof (parsed as { __type?: unknown }).__type === 'string' ||
      header(response, 'x-amzn-errortype') !== ''
    );
  return Object.keys(parsed).every((k) => /^[A-Z]/.test(k));
}

/**
 * S3 answers in XML or not at all: an error is an XML document (but for HEAD, which has no body),
 * a success of the operations tidemark sends other than GetObject is empty (PutObject) or XML
 * (ListObjectsV2, DeleteObjects). HTML is never S3's.
 */
function isS3Reply(
  response: RawResponse,
  ok: boolean,
  contentType: string,
  text: string,
  method: string | undefined,
): boolean {
  if (!ok && response.statusCode >= 500 && hasAwsRequestId(response)) return true; // the SDK retries it
  if (contentType.includes('html') || contentType.includes('json')) return false;
  const start = text.replace(/^\uFEFF/, '').trimStart();
  if (start === '') return ok || method === 'HEAD';
  return start.startsWith('<') && !/^<(!doctype\s+html|html[\s>])/i.test(start);
}

function hasAwsRequestId(response: RawResponse): boolean {
  return header(response, 'x-amzn-requestid') !== '' || header(response, 'x-amz-request-id') !== '';
}

function header(response: RawResponse, name: string): string {
  for (const [k, v] of Object.entries(response.headers ?? {})) if (k.toLowerCase() === name) return v ?? '';
  return '';
}

function mediaType(headers: RawResponse['headers']): string {
  const ct = header({ statusCode: 0, headers }, 'content-type');
  return ct.split(';')[0]!.trim().toLowerCase();
}

function origin(request: RawRequest): string {
  const protocol = request.protocol ?? 'https:';
  const port = request.port ? `:${request.port}` : '';
  return `${protocol.endsWith(':') ? protocol : `${protocol}:`}//${request.hostname ?? '?'}${port}`;
}

/**
 * The body's start on one line, printable only, its double quotes shown as single ones (it is
 * quoted in "..."): enough to recognise what answered.
 */
function quote(text: string): string {
  const flat = text
    .replace(/[^\x20-\x7e]+/g, ' ')
    .replace(/\s+/g, ' ')
    .replace(/"/g, "'")
    .trim();
  return flat.length > BODY_QUOTE_CHARS ? `${flat.slice(0, BODY_QUOTE_CHARS)}...` : flat;
}
