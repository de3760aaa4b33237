/**
 * Defense in depth (shared/observability/redact.ts): the secrets the config resolves are
 * registered, and every output path hides them even where they appear without their URL, as a
 * driver message that echoes a password would: the logger (JSON and human), an Error handed on
 * (`redactError`), the Lambda handler's thrown result. The CLI's paths are exercised through the
 * real bin in test/integration/cli-redaction.test.ts.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Context } from 'aws-lambda';
import { afterAll, describe, expect, it } from 'vitest';
import { handler, shutdown } from '../../functions/incremental/handler.js';
import { urlFromSecretString } from '../../shared/config/secrets.js';
import { parseSpec } from '../../shared/config/spec.js';
import { ConfigError } from '../../shared/contracts/errors.js';
import { createLogger } from '../../shared/observability/log.js';
import {
  MIN_KNOWN_SECRET_LENGTH,
  redact,
  redactError,
  registerSecret,
  registerUrlSecrets,
} from '../../shared/observability/redact.js';

/** A spec around one source URL, with local state and lake (nothing is connected). */
function specWith(url: string) {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-redaction-'));
  return {
    pipeline: 'redaction',
    sources: { app: { kind: 'postgres', url } },
    state: { dir: join(dir, 'state') },
    lake: { uri: `file://${join(dir, 'lake')}` },
    tables: [
      {
        source: 'app',
        table: 'public.orders',
        mode: 'incremental',
        cursor: 'updated_at',
        writeMode: 'append',
      },
    ],
  };
}

describe('registered secrets', () => {
  it('are hidden from free text in every spelling a message may use', () => {
    registerUrlSecrets(
      'postgres://app:Gr%40nite%20Sl%C3%B6pe@db/shop?sslmode=require&sslpassword=KeyPhr%26se7',
    );
    expect(redact('FATAL: password "Gr@nite Slöpe" rejected')).toBe('FATAL: password "***" rejected');
    for (const spelling of ['Gr%40nite%20Sl%C3%B6pe', 'Gr%40nite+Sl%C3%B6pe', 'KeyPhr&se7', 'KeyPhr%26se7']) {
      expect(redact(`echo ${spelling}.`)).toBe('echo ***.');
    }
  });

  it('register what the drivers read, also where the shape reads more', () => {
    // The shape hides up to the last '@' of the line; WHATWG URL (postgres.js, mysql2) reads "pw4u".
    registerUrlSecrets('postgres://app:pw4u@db/shop?application_name=ops@corp');
    expect(redact('auth failed with "pw4u"')).toBe('auth failed with "***"');
  });

  it(`ignore values shorter than ${MIN_KNOWN_SECRET_LENGTH} characters in free text, not in URLs`, () => {
    registerSecret('q7!');
    registerUrlSecrets('postgres://app:k9@db/shop');
    expect(redact('a q7! k9 line')).toBe('a q7! k9 line');
    expect(redact('postgres://app:k9@db/shop')).toBe('postgres://app:***@db/shop');
  });

  it('are registered when a spec is parsed, before it is validated', () => {
    parseSpec(specWith('postgres://reader:Quartz:Lake=9@db:5432/shop'), { env: {} });
    expect(redact('server said: Quartz:Lake=9')).toBe('server said: ***');
    // Refused (the host cannot be told from the password), and registered all the same.
    expect(() => parseSpec(specWith('postgres://reader:Quartz#Lake?9@db:5432/shop'), { env: {} })).toThrow(
      ConfigError,
    );
    expect(redact('server said: Quartz#Lake?9')).toBe('server said: ***');
    const invalid = { ...specWith('postgres://reader:Basalt!Reef@db/shop'), tables: [] };
    expect(() => parseSpec(invalid, { env: {} })).toThrow(ConfigError);
    expect(redact('Basalt!Reef')).toBe('***');
  });

  it('are registered when a Secrets Manager secret is read, and a broken one is not quoted', () => {
    const arn = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:db';
    const rds = '{"username":"app","password":"Ob$idian:Tide/7","host":"db","port":5432,"dbname":"shop"}';
    expect(urlFromSecretString('postgres', rds, arn)).toBe(
      'postgres://app:Ob%24idian%3ATide%2F7@db:5432/shop',
    );
    expect(redact('echo Ob$idian:Tide/7 and Ob%24idian%3ATide%2F7')).toBe('echo *** and ***');
    // Refused (test/unit/source-url.test.ts), and registered before that.
    expect(() => urlFromSecretString('mysql', ' mysql://app:Cobalt@Fjord@db/shop\n', arn)).toThrow(
      ConfigError,
    );
    expect(redact('Cobalt@Fjord')).toBe('***');
    const broken = '{"username":"app","password":"Jasper Dune", host:"db"}';
    expect(() => urlFromSecretString('postgres', broken, arn)).toThrow(/is not valid JSON/);
    expect(redact(broken)).not.toContain('Jasper Dune');
  });
});

describe('output paths', () => {
  registerSecret('Amber-Gale-42');

  it('the logger: message and every string field, JSON and human', () => {
    const lines: string[] = [];
    for (const json of [true, false]) {
      const logger = createLogger({ json, write: (l) => lines.push(l), metrics: false });
      logger.error('driver said Amber-Gale-42', {
        url: 'mysql://app:p@ss:w/rd@db:3306/shop',
        error: new Error('bad value "Amber-Gale-42"'),
        nested: { list: ['Amber-Gale-42'] },
      });
    }
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line).not.toContain('Amber-Gale-42');
      expect(line).not.toMatch(/p@ss|w\/rd/);
      expect(line).toContain('mysql://app:***@db:3306/shop');
    }
    expect(JSON.parse(lines[0]!).error.message).toBe('bad value "***"');
  });

  it('an Error handed on: message, stack, string properties and causes', () => {
    const cause = Object.assign(new TypeError('Invalid URL'), {
      input: 'postgres://u:pa:ss/wo#rd?x@db/shop',
    });
    const e = redactError(new Error('echo Amber-Gale-42', { cause }));
    expect(e.message).toBe('echo ***');
    expect(e.stack).not.toContain('Amber-Gale-42');
    expect((e.cause as { input: string }).input).toBe('postgres://u:***@db/shop');
  });

  describe('the Lambda handler', () => {
    const context = { awsRequestId: 'req-1', getRemainingTimeInMillis: () => 60_000 } as unknown as Context;
    const failure = (event: { table: string }) =>
      handler(event, context).then(
        () => {
          throw new Error('the handler should fail');
        },
        (e: unknown) => e as Error,
      );
    afterAll(async () => {
      delete process.env.TIDEMARK_SPEC;
      await shutdown();
    });

    it('throws (its invocation result) without a registered secret, wherever the text came from', async () => {
      // The spec's password is registered when the handler parses it. findTable quotes the event's
      // table name; here that name is the password, standing in for a driver that echoes it.
      process.env.TIDEMARK_SPEC = JSON.stringify(
        specWith('postgres://reader:Onyx:Harbor=5@127.0.0.1:1/shop'),
      );
      const thrown = await failure({ table: 'Onyx:Harbor=5' });
      expect(thrown).toBeInstanceOf(ConfigError);
      expect(thrown.message).toContain('no table "***"');
      expect(thrown.stack).not.toContain('Onyx:Harbor=5');
    });

    it('refuses a spec whose URL hides the host in the password, quoting none of it', async () => {
      await shutdown();
      process.env.TIDEMARK_SPEC = JSON.stringify(
        specWith('postgres://reader:hunter2@Zq9xK7/tail@127.0.0.1:1/shop'),
      );
      const thrown = await failure({ table: 'public.orders' });
      expect(thrown).toBeInstanceOf(ConfigError);
      expect(thrown.message).toMatch(/^sources\.app\.url: has an "@" after an un-encoded/);
      expect(thrown.message).toContain('"/" as %2F');
      for (const part of ['hunter2', 'Zq9xK7', 'tail@'])
        expect(thrown.message + thrown.stack).not.toContain(part);
    });

    it('does not quote an inline spec that is not JSON', async () => {
      await shutdown();
      process.env.TIDEMARK_SPEC = '{"sources": {"app": {"url": "postgres://u:Slate Fern@db"}}, nope}';
      const thrown = await failure({ table: 'public.orders' });
      expect(thrown.message).toBe('TIDEMARK_SPEC: is not valid JSON');
    });
  });
});
