/**
 * What an AWS SDK failure means for an operator: one classifier for every AWS call tidemark makes
 * (DynamoDB state, S3 lake, Secrets Manager), so each failure becomes one line that names the
 * spec field to fix and how, the way source errors already do.
 *
 * Owns: mapping an SDK error (network errors carry a Node `code`; service errors a `name` and an
 * HTTP status; client-side errors only a message) to a stable code and an actionable message.
 * Never prints credentials: messages name fields, endpoints, regions and resources only.
 */

import { replyText, WrongServiceError } from './service-guard.js';

/** Where the failed call went, in the spec's words. */
export interface AwsCallContext {
  /** `DynamoDB`, `S3`, `Secrets Manager`. */
  readonly service: string;
  /** The spec field that configures the call, e.g. `state.dynamodb` or `lake`. */
  readonly field: string;
  /** What was addressed: `table tidemark-state`, `bucket my-lake`. */
  readonly resource: string;
  /** The IAM action the call needs, e.g. `dynamodb:GetItem`. */
  readonly action: string;
  /** A custom endpoint, when one is set. */
  readonly endpoint?: string | undefined;
}

/** What an AWS failure can be classified as; each store's code is `<prefix>_<kind>` (STATE_, SINK_). */
export const AWS_FAILURE_KINDS = [
  'UNREACHABLE',
  'WRONG_SERVICE',
  'REGION_MISSING',
  'CREDENTIALS',
  'ACCESS_DENIED',
  'WRONG_REGION',
  'NOT_FOUND',
] as const;

/** A classified AWS failure: `code` is `<prefix>_<kind>`, documented in docs/errors.md. */
export interface AwsFailure {
  readonly kind: (typeof AWS_FAILURE_KINDS)[number];
  readonly message: string;
}

/**
 * The endpoint setting the SDK used, as the operator set it: the spec's field, else the SDK's own
 * environment variables (it reads `AWS_ENDPOINT_URL_<SERVICE>`, then `AWS_ENDPOINT_URL`), else
 * none (the regional endpoint).
 */
function endpointSetting(ctx: AwsCallContext): string | undefined {
  if (ctx.endpoint) return `${ctx.field}.endpoint`;
  const own = `AWS_ENDPOINT_URL_${ctx.service.toUpperCase().replace(/\s+/g, '_')}`;
  if (process.env[own]) return own;
  if (process.env.AWS_ENDPOINT_URL) return 'AWS_ENDPOINT_URL';
  return undefined;
}

/** An endpoint URL as messages show it: its credentials, if any, dropped. */
function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.href.replace(/\/$/, '');
  } catch {
    return url.replace(/\/\/[^/@]*@/, '//');
  }
}

/**
 * One line, whose start is the headline even when cut (functions/cli/args.ts cuts long lines at
 * a clause boundary, never inside parentheses or quotes): the setting, its URL, the question; the
 * reply that gave it away last.
 */
function wrongServiceMessage(e: WrongServiceError, ctx: AwsCallContext): string {
  const setting = endpointSetting(ctx);
  const url = shownUrl(ctx.endpoint ?? e.url);
  const reply = `it answered ${replyText(e.status, e.contentType, e.bodyStart)}`;
  const a = /^(S3|[AEIOU])/.test(ctx.service) ? 'an' : 'a';
  if (!setting) {
    return `the ${ctx.service} endpoint ${url} is not ${ctx.service} (a proxy in between? or set ${ctx.field}.endpoint): ${reply}`;
  }
  return `${setting} ${url} is not ${ctx.service} (is it ${a} ${ctx.service} endpoint?): ${reply}`;
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);

interface SdkErrorShape {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
  Region?: string;
  Endpoint?: string;
}

/**
 * Classifies `err`; undefined when it is none of the known operator-fixable kinds (then the
 * caller keeps its generic message with the SDK's own words).
 */
export function classifyAwsError(err: unknown, ctx: AwsCallContext): AwsFailure | undefined {
  const e = (err ?? {}) as SdkErrorShape;
  const name = e.name ?? '';
  const message = e.message ?? '';
  const status = e.$metadata?.httpStatusCode;
  const where = ctx.endpoint ? `at ${ctx.endpoint}` : 'at its regional endpoint';
  if (err instanceof WrongServiceError || name === 'WrongServiceError') {
    return { kind: 'WRONG_SERVICE', message: wrongServiceMessage(err as WrongServiceError, ctx) };
  }
  if ((e.code && NETWORK_CODES.has(e.code)) || name === 'TimeoutError' || name === 'RequestTimeout') {
    return {
      kind: 'UNREACHABLE',
      // The fix in the first clause: the CLI's headline ends at a clause boundary that fits.
      message: `no ${ctx.service} endpoint answered ${where} (${e.code ?? name}) for ${ctx.resource}: check ${ctx.field}.endpoint and ${ctx.field}.region; this network must reach ${ctx.service} (a VPC endpoint or NAT in AWS; locally, the emulator running)`,
    };
  }
  if (/region is missing/i.test(message)) {
    return {
      kind: 'REGION_MISSING',
      message: `no AWS region for ${ctx.service} (${ctx.resource}); set ${ctx.field}.region in the spec or AWS_REGION in the environment`,
    };
  }
  if (name === 'CredentialsProviderError' || /could not load credentials/i.test(message)) {
    return {
      kind: 'CREDENTIALS',
      message: `no AWS credentials for ${ctx.service} (${ctx.resource}); in AWS the function's role provides them, locally set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (any non-empty values for an emulator)`,
    };
  }
  if (
    name === 'PermanentRedirect' ||
    name === 'AuthorizationHeaderMalformed' ||
    (status === 301 && ctx.service === 'S3') ||
    /wrong region|expecting '[a-z0-9-]+'|must be addressed using the specified endpoint/i.test(message)
  ) {
    const expected = /expecting '([a-z0-9-]+)'/i.exec(message)?.[1] ?? e.Region;
    return {
      kind: 'WRONG_REGION',
      message: `${ctx.resource} is in another region${expected ? ` (${expected})` : ''} than the client uses; set ${ctx.field}.region${expected ? `: ${expected}` : " to the bucket's region"}`,
    };
  }
  if (
    name === 'AccessDeniedException' ||
    name === 'AccessDenied' ||
    name === 'UnrecognizedClientException' ||
    name === 'InvalidAccessKeyId' ||
    name === 'SignatureDoesNotMatch' ||
    status === 403
  ) {
    return {
      kind: 'ACCESS_DENIED',
      message: `${ctx.service} denied ${ctx.action} on ${ctx.resource} (${name || status}); grant the role ${ctx.action} on it (the CDK stack does for the resources in the spec), or check the credentials`,
    };
  }
  if (name === 'NoSuchBucket' || name === 'ResourceNotFoundException') {
    return {
      kind: 'NOT_FOUND',
      message: `${ctx.resource} does not exist${ctx.endpoint ? ` ${where}` : ''}; deploy the stack (cdk deploy creates it) or fix ${ctx.field}`,
    };
  }
  return undefined;
}
