/**
 * A source URL whose host cannot be told from its password is refused before anything connects
 * (shared/config/source-url.ts): in `sources.<name>.url` as written or from `${env:NAME}`, and in
 * a Secrets Manager secret. Then a property: a URL the rule lets through is read by WHATWG `URL`
 * (what postgres.js and mysql2 split with) with the host, user and password the user meant, and
 * the rule refuses exactly the user-infos with an un-encoded `@ / ? #`. The same passwords through
 * the real CLI: test/integration/cli-redaction.test.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { urlFromSecretString } from '../../shared/config/secrets.js';
import { AMBIGUOUS_URL, ambiguousUrlProblem } from '../../shared/config/source-url.js';
import { parseSpec } from '../../shared/config/spec.js';
import { ConfigError } from '../../shared/contracts/errors.js';

const spec = (url: string) => ({
  pipeline: 'shop',
  sources: { app: { kind: 'postgres', url } },
  state: { dir: '/tmp/state' },
  lake: { uri: 'file:///tmp/lake' },
  tables: [
    { source: 'app', table: 'public.orders', mode: 'incremental', cursor: 'updated_at', writeMode: 'append' },
  ],
});

function errorOf(run: () => unknown): ConfigError {
  try {
    run();
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

/** The issue's trap: `check` printed six characters of this password as a host it could not resolve. */
const TRAP = 'postgres://app:hunter2@Zq9xK7/tail@127.0.0.1:5432/db';

describe('an ambiguous source URL', () => {
  it('is refused by the spec naming the setting and the encodings, quoting no part of it', () => {
    const e = errorOf(() => parseSpec(spec(TRAP), { env: {} }));
    expect(e.code).toBe('CONFIG_INVALID');
    expect(e.path).toBe('sources.app.url');
    expect(e.message).toBe(`sources.app.url: ${AMBIGUOUS_URL}`);
    expect(e.message).not.toContain('\n');
    for (const fix of ['"@" as %40', '"/" as %2F', '"#" as %23', '"?" as %3F', '":" in the user as %3A'])
      expect(e.message).toContain(fix);
    for (const part of ['hunter2', 'Zq9x', 'tail', '127.0.0.1']) expect(e.message).not.toContain(part);
  });

  it("is refused when it comes from an environment variable, and listed with the spec's other problems", () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the spec's own ${env:NAME} syntax
    const raw = { ...spec('${env:APP_URL}'), tables: [] };
    const e = errorOf(() => parseSpec(raw, { env: { APP_URL: TRAP } }));
    expect(e.problems.map((p) => p.path).sort()).toEqual(['sources.app.url', 'tables']);
    expect(e.message).not.toMatch(/hunter2|Zq9x|tail/);
  });

  it("is refused in a Secrets Manager secret, naming the source's secretArn", () => {
    const arn = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:db';
    const e = errorOf(() => urlFromSecretString('postgres', `${TRAP}\n`, arn, 'sources.app.secretArn'));
    expect(e.message).toBe(`sources.app.secretArn: the URL in secret ${arn} ${AMBIGUOUS_URL}`);
    // The RDS JSON shape is encoded by us: whatever the password holds, the URL is fine.
    const rds = JSON.stringify({
      username: 'a@b',
      password: 'hunter2@Zq9xK7/tail#?',
      host: 'db',
      port: 5432,
    });
    expect(new URL(urlFromSecretString('postgres', rds, arn)).host).toBe('db:5432');
  });

  it('covers each un-encoded character, in the user and in the password, and an "@" after the host', () => {
    for (const url of [
      'mysql://app:p@ss@db/shop',
      'mysql://app:pa/ss@db/shop',
      'mysql://app:pa?ss@db/shop',
      'mysql://app:pa#ss@db/shop',
      'postgres://u:12/x@h/db',
      'postgres://reader@srv:pw@srv.example:5432/db',
      'postgres://us/er@h/db',
      'postgres://u:pw@h/db?application_name=ops@corp',
      '  postgres://app:p@ss@db/shop',
    ])
      expect(ambiguousUrlProblem(url), url).toBe(AMBIGUOUS_URL);
    for (const url of [
      'postgres://app:pa:ss@db:5432/shop',
      'postgres://app:hunter2%40Zq9xK7%2Ftail@127.0.0.1:5432/db',
      'postgres://reader%40srv:pw@srv.example/db',
      'postgres://db/shop?password=Qu4rtz?Lake#9',
      'postgres://u@[::1]:5432/db?sslmode=disable',
      'postgres://u:pw@/db?host=/var/run/postgresql',
      'not a url @ all/x@y',
    ])
      expect(ambiguousUrlProblem(url), url).toBeUndefined();
    expect(() => parseSpec(spec('postgres://app:pa:ss@db:5432/shop'), { env: {} })).not.toThrow();
  });
});

/** User and password characters: the four that end a part, `:`, `%`, and ordinary ones. */
const char = fc.constantFrom(...'aZ9_-.~!$&=+ @/?#:%€'.split(''), 'ß', '🔑');
const part = (minLength: number) => fc.string({ unit: char, minLength, maxLength: 14 });
const urlShape = fc.record({
  scheme: fc.constantFrom('postgres', 'postgresql', 'mysql'),
  // A user never holds a raw ':' here: nothing can tell it from the user/password separator.
  user: part(0).map((u) => u.replaceAll(':', '')),
  password: fc.option(part(1), { nil: undefined }),
  encoded: fc.boolean(),
  host: fc.oneof(fc.domain(), fc.ipV4(), fc.constant('[::1]'), fc.constant('localhost')),
  port: fc.option(fc.integer({ min: 1, max: 65_535 }), { nil: undefined }),
  rest: fc.constantFrom('/shop', '/shop?sslmode=disable', '/', '', '?ssl=true#frag'),
});
type UrlShape = typeof urlShape extends fc.Arbitrary<infer T> ? T : never;

function build(s: UrlShape): string {
  const spell = (v: string) => (s.encoded ? encodeURIComponent(v) : v);
  const password = s.password === undefined ? '' : `:${spell(s.password)}`;
  return `${s.scheme}://${spell(s.user)}${password}@${s.host}${s.port === undefined ? '' : `:${s.port}`}${s.rest}`;
}

/** `text` percent-decoded, or undefined when it is not valid percent-encoding. */
function decoded(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

describe('the rule over user and password alphabets (property)', () => {
  it('refuses exactly an un-encoded "@ / ? #" in the user-info; what it lets through parses as meant', () => {
    fc.assert(
      fc.property(urlShape, (s) => {
        const url = build(s);
        const userInfo = `${s.user}${s.password === undefined ? '' : `:${s.password}`}`;
        const refused = ambiguousUrlProblem(url) !== undefined;
        expect(refused, url).toBe(!s.encoded && /[@/?#]/.test(userInfo));
        if (refused) return;
        let parsed: URL;
        try {
          parsed = new URL(url);
        } catch {
          return; // a bad port or host: the driver's own SOURCE_URL_INVALID, with the URL redacted
        }
        const meant = new URL(
          `${s.scheme}://u:p@${s.host}${s.port === undefined ? '' : `:${s.port}`}${s.rest}`,
        );
        expect(parsed.host, url).toBe(meant.host);
        // As the drivers read them (decodeURIComponent); a raw '%' that is no escape cannot be read back.
        const user = decoded(s.encoded ? encodeURIComponent(s.user) : s.user);
        if (user !== undefined && decoded(parsed.username) !== undefined)
          expect(decoded(parsed.username), url).toBe(user);
        if (s.password !== undefined) {
          const password = decoded(s.encoded ? encodeURIComponent(s.password) : s.password);
          if (password !== undefined && decoded(parsed.password) !== undefined)
            expect(decoded(parsed.password), url).toBe(password);
        }
      }),
      { numRuns: 3000 },
    );
  });
});
