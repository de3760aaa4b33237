/**
 * Resolves a source's connection URL: inline `url` (already `${env:..}`-interpolated) or an AWS
 * Secrets Manager secret (`secretArn`) fetched once per process and cached, as a Lambda container
 * or the Fargate task would. A secret holds either a URL or the RDS JSON shape
 * ({engine, host, port, username, password, dbname}).
 *
 * Registers what a secret holds for redaction (shared/observability/redact.ts) as soon as it is
 * read. Never logs or returns a secret inside an error message.
 */
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { ConfigError } from '../contracts/errors.js';
import { registerSecret, registerUrlSecrets } from '../observability/redact.js';
import { ambiguousUrlProblem } from './source-url.js';
import type { SourceSpec } from './spec.js';

const cache = new Map<string, Promise<string>>();

function urlFromRdsSecret(kind: SourceSpec['kind'], s: Record<string, unknown>, arn: string): string {
  const { host, port, username, password } = s;
  const dbname = s.dbname ?? s.database ?? (kind === 'postgres' ? 'postgres' : '');
  if (typeof host !== 'string' || typeof username !== 'string' || typeof password !== 'string') {
    throw new ConfigError(
      'secretArn',
      `secret ${arn} is JSON but lacks host/username/password (RDS secret shape)`,
    );
  }
  const scheme = kind === 'postgres' ? 'postgres' : 'mysql';
  const p = port ?? (kind === 'postgres' ? 5432 : 3306);
  return `${scheme}://${encodeURIComponent(username)}:${encodeURIComponent(password)}@${host}:${p}/${String(dbname)}`;
}

/**
 * The connection URL a secret's SecretString holds: the URL itself, or one built from the RDS
 * JSON shape. Registers the secret (the whole text, the password, the URL's secrets) for
 * redaction before anything can fail and quote it. A URL whose host cannot be told from its
 * password (./source-url.ts) is a ConfigError on `setting` (the source's `secretArn`), as the
 * same URL in `sources.<name>.url` is refused by the spec.
 */
export function urlFromSecretString(
  kind: SourceSpec['kind'],
  text: string,
  arn: string,
  setting = 'secretArn',
): string {
  registerSecret(text.trim());
  if (!text.trimStart().startsWith('{')) {
    const url = text.trim();
    registerUrlSecrets(url);
    const problem = ambiguousUrlProblem(url);
    if (problem) throw new ConfigError(setting, `the URL in secret ${arn} ${problem}`);
    return url;
  }
  let secret: Record<string, unknown>;
  try {
    secret = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // No cause and not its message: V8 quotes the text around the error, which may be the password.
    throw new ConfigError(
      'secretArn',
      `secret ${arn} starts with "{" but is not valid JSON (RDS secret shape)`,
    );
  }
  if (typeof secret.password === 'string') registerSecret(secret.password);
  const url = urlFromRdsSecret(kind, secret, arn);
  registerUrlSecrets(url);
  return url;
}

/**
 * The connection URL of a source, fetching its secret if it has one. `name` is the source's name
 * under `sources`, for the setting an error names.
 */
export async function resolveSourceUrl(
  source: SourceSpec,
  opts: { readonly name?: string; readonly client?: SecretsManagerClient } = {},
): Promise<string> {
  const { name, client } = opts;
  if (source.url) return source.url;
  const arn = source.secretArn!;
  let p = cache.get(arn);
  if (!p) {
    p = (async () => {
      // Loaded only for a secret: the SDK client costs every other run ~20 ms of start-up.
      const { GetSecretValueCommand, SecretsManagerClient } = await import('@aws-sdk/client-secrets-manager');
      const sm = client ?? new SecretsManagerClient({});
      const out = await sm.send(new GetSecretValueCommand({ SecretId: arn })).catch((e: unknown) => {
        throw new ConfigError(
          'secretArn',
          `cannot read secret ${arn}: ${(e as Error).name}; check the role's secretsmanager:GetSecretValue permission`,
          { cause: e },
        );
      });
      const text = out.SecretString;
      if (!text) throw new ConfigError('secretArn', `secret ${arn} has no SecretString`);
      return urlFromSecretString(source.kind, text, arn, name ? `sources.${name}.secretArn` : 'secretArn');
    })();
    cache.set(arn, p);
    p.catch(() => cache.delete(arn));
  }
  return p;
}

/** Forgets cached secrets (after an authentication failure, a rotated secret is re-read). */
export function forgetSecrets(): void {
  cache.clear();
}
