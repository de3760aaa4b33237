/**
 * Redaction by shape (shared/observability/redact.ts): the outside trial's findings as examples,
 * then a property over URL shapes and password alphabets. Leaks are judged by
 * test/harness/leaks.ts: no run of >= 4 characters of a secret, in any spelling, that the ideal
 * redaction would not show.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { REDACTED, redactShapes } from '../../shared/observability/redact.js';
import { leakedRuns, spellingsOf } from '../harness/leaks.js';

describe('redaction by shape', () => {
  it('hides a password with an un-encoded @ up to the last @, as the drivers split it', () => {
    expect(redactShapes('postgres://reader:p@ssw0rdQuartz@db.internal:5432/shop')).toBe(
      'postgres://reader:***@db.internal:5432/shop',
    );
    // An Azure-style user holds an @ too: the user ends at the first ':', as in WHATWG URL.
    expect(redactShapes('postgres://reader@srv:p@ss@srv.example:5432/db')).toBe(
      'postgres://reader@srv:***@srv.example:5432/db',
    );
  });

  it('hides a password with un-encoded : / # ? that the drivers cannot parse', () => {
    expect(redactShapes('mysql://app:pa:ss/wo#rd?x@127.0.0.1:1/shop?ssl=1')).toBe(
      'mysql://app:***@127.0.0.1:1/shop?ssl=1',
    );
    // WHATWG reads this one as host "u", port 12: the user meant "12/x" as the password.
    expect(redactShapes('postgres://u:12/x@h/db')).toBe('postgres://u:***@h/db');
    expect(redactShapes('mysql//app:hunter2@db')).toBe('mysql//app:***@db');
  });

  it('hides secret query parameters to the end of the line', () => {
    expect(redactShapes('postgresql://app@db/x?sslmode=require&password=hunter2&a=1')).toBe(
      'postgresql://app@db/x?sslmode=require&password=***',
    );
    for (const name of [
      'sslpassword',
      'PASSWORD',
      'password1',
      'passwordSha1',
      'pass',
      'passwd',
      'pwd',
      'token',
    ]) {
      expect(redactShapes(`mysql://u@h/d?ssl=1&${name}=a&b#c d`)).toBe(`mysql://u@h/d?ssl=1&${name}=***`);
    }
    expect(redactShapes('host=db user=app password=s3 cret')).toBe('host=db user=app password=***');
    expect(redactShapes('mysql://u@h/d?passive=1&secretArn=x')).toBe('mysql://u@h/d?passive=1&secretArn=x');
  });

  it('hides the password of an RDS JSON secret, also when the text is cut short', () => {
    const secret = '{"engine":"postgres","host":"db","username":"app","password":"p\\"w@x:1","port":5432}';
    expect(redactShapes(secret)).toBe(
      '{"engine":"postgres","host":"db","username":"app","password":"***","port":5432}',
    );
    expect(redactShapes('{"password": 123456, "secretArn": "arn:aws:x"}')).toBe(
      '{"password": ***, "secretArn": "arn:aws:x"}',
    );
    expect(redactShapes('Unexpected token, ..."password":"hunter2 and more')).toBe(
      'Unexpected token, ..."password":"***',
    );
    expect(redactShapes('{"SecretString":"{\\"password\\":\\"x\\"}"}')).toBe('{"SecretString":"***"}');
  });

  it('leaves text without a secret as it is, and is idempotent', () => {
    for (const text of [
      'postgres://db:5432/shop',
      'mysql://[::1]:3306/d?ssl=1',
      'postgres://app@db/x',
      'see https://docs.example.com/a/b',
      'cannot connect to Postgres at 127.0.0.1:1 (ECONNREFUSED)',
    ]) {
      expect(redactShapes(text)).toBe(text);
    }
    const once = redactShapes('postgres://u:p@w@h/db?password=x');
    expect(redactShapes(once)).toBe(once);
  });

  it('over-redacts rather than guess when an @ follows the host (documented)', () => {
    // The last @ of the line may be in the query: everything up to it is hidden, host included.
    expect(redactShapes('postgres://u:pw@h/db?application_name=a@b')).toBe('postgres://u:***@b');
    expect(redactShapes('postgres://u:pw@h/db?password=ab@cd')).toBe('postgres://u:***');
  });
});

// ---------------------------------------------------------------------------------------------
// The property: URL shapes x password alphabets.

const LETTERS = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'];
/** Everything that has broken a redactor before, and the rest of ASCII punctuation. */
const SPECIALS = [...'@:/#?%&= !"$\'()*+,;[]\\^`{|}~-_.<>'];
const UNICODE = ['é', 'ü', 'ß', '€', '日', '本', '🔑', '\u00a0'];

const char = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...LETTERS) },
  { weight: 3, arbitrary: fc.constantFrom(...SPECIALS) },
  { weight: 1, arbitrary: fc.constantFrom(...UNICODE) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }) },
);
const secretValue = fc.string({ unit: char, minLength: 1, maxLength: 24 });

type Spelling = 'raw' | 'encodeURIComponent' | 'userinfo';
const spelling = fc.constantFrom<Spelling>('raw', 'encodeURIComponent', 'userinfo');

function spell(value: string, how: Spelling): string {
  if (how === 'raw') return value;
  if (how === 'encodeURIComponent') return encodeURIComponent(value);
  const u = new URL('x://h');
  u.password = value;
  return u.password;
}

const urlShape = fc.record({
  scheme: fc.constantFrom('postgres', 'postgresql', 'mysql'),
  // A user is never spelled with a raw ':', '/', '?', '#' or whitespace (it ends at the first ':').
  user: fc.option(
    fc.oneof(
      fc.stringMatching(/^[a-z][a-z0-9_.-]{0,11}$/),
      fc.constant(''),
      fc.constant('reader@srv'),
      fc.constant('app%40corp'),
    ),
    { nil: undefined },
  ),
  password: fc.option(fc.record({ value: secretValue, how: spelling }), { nil: undefined }),
  host: fc.oneof(
    fc.domain(),
    fc.ipV4(),
    fc.ipV6().map((a) => `[${a}]`),
    fc.constant('localhost'),
  ),
  port: fc.option(fc.integer({ min: 1, max: 65_535 }), { nil: undefined }),
  database: fc.option(fc.stringMatching(/^[a-z_][a-z0-9_]{0,15}$/), { nil: undefined }),
  params: fc.array(
    fc.tuple(
      fc.constantFrom('sslmode', 'application_name', 'connect_timeout', 'ssl', 'charset'),
      fc.stringMatching(/^[A-Za-z0-9_.-]{1,12}$/),
    ),
    { maxLength: 3 },
  ),
  // A secret parameter comes last: redaction hides everything after its '='.
  querySecret: fc.option(
    fc.record({
      name: fc.constantFrom('password', 'sslpassword', 'password1', 'pass', 'pwd'),
      value: secretValue,
      how: fc.constantFrom<Spelling>('raw', 'encodeURIComponent'),
    }),
    { nil: undefined },
  ),
});
type UrlShape = typeof urlShape extends fc.Arbitrary<infer T> ? T : never;

/** The URL, with `password`/`querySecret` spelled as generated, or replaced by `***`. */
function build(s: UrlShape, redacted: boolean): string {
  const userInfo =
    s.user === undefined
      ? ''
      : `${s.user}${s.password ? `:${redacted ? REDACTED : spell(s.password.value, s.password.how)}` : ''}@`;
  const query = s.params.map(([k, v]) => `${k}=${v}`);
  if (s.querySecret) {
    const q = s.querySecret;
    query.push(`${q.name}=${redacted ? REDACTED : spell(q.value, q.how)}`);
  }
  return (
    `${s.scheme}://${userInfo}${s.host}${s.port === undefined ? '' : `:${s.port}`}` +
    `/${s.database ?? ''}${query.length > 0 ? `?${query.join('&')}` : ''}`
  );
}

function secretsOf(s: UrlShape): string[] {
  const out: string[] = [];
  if (s.user !== undefined && s.password) out.push(...spellingsOf(s.password.value));
  if (s.querySecret) out.push(...spellingsOf(s.querySecret.value));
  return out;
}

/**
 * The documented cases where redaction hides more than the secret (so the exact output differs,
 * never by showing a secret): an un-encoded '@' in a query secret (the user-info then runs to
 * it), and a password that itself holds a secret-shaped `name=` or `"name":`.
 */
function overRedacts(s: UrlShape): boolean {
  const name = String.raw`[\w.-]*(?:(?:pass(?:word|wd)?|pwd)(?:\d+|sha1)?|secret(?:string)?|token)`;
  const password = s.user !== undefined && s.password ? spell(s.password.value, s.password.how) : '';
  return (
    (s.querySecret !== undefined && spell(s.querySecret.value, s.querySecret.how).includes('@')) ||
    new RegExp(String.raw`(?:^|[\s?&;])${name}=|"${name}"\s*:`, 'i').test(password)
  );
}

describe('redaction over URL shapes and password alphabets (property)', () => {
  it('never shows a run of >= 4 characters of a secret', () => {
    fc.assert(
      fc.property(urlShape, (s) => {
        const url = build(s, false);
        const out = redactShapes(url);
        expect(leakedRuns(out, secretsOf(s), build(s, true)), `${url}\n -> ${out}`).toEqual([]);
      }),
      { numRuns: 3000 },
    );
  });

  it('prints exactly the URL with each secret replaced by ***: user, host, port, database, parameters stay', () => {
    fc.assert(
      fc.property(urlShape, (s) => {
        fc.pre(!overRedacts(s));
        expect(redactShapes(build(s, false))).toBe(build(s, true));
      }),
      { numRuns: 3000 },
    );
  });

  it('hides a secret inside a longer line of text too', () => {
    fc.assert(
      fc.property(urlShape, fc.constantFrom('connect failed: ', '{"url": "', 'at '), (s, before) => {
        fc.pre(!overRedacts(s));
        expect(redactShapes(`${before}${build(s, false)}`)).toBe(`${before}${build(s, true)}`);
      }),
      { numRuns: 500 },
    );
  });
});
