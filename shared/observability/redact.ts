/**
 * Redaction: the one place that decides what a secret looks like in text and hides it. Every
 * path that prints (the logger, the CLI, the Lambda handler's error result, the CDK app, the
 * demo) and every message that quotes a URL passes its text through `redact`.
 *
 * A secret is hidden by its shape, whatever characters it contains
 * (docs/decisions/0004-config-and-secrets.md, "Amended 2026-12-01"):
 * - the password of a URL's user-info: after `//` comes a user (up to the first `:`; no
 *   `/ ? #` or whitespace, but it may hold an `@`, as `reader@server` does), then `:`, then the
 *   password up to the LAST `@` of the line. postgres.js 3.4.9 and mysql2 3.24.6 both split a URL
 *   with WHATWG `new URL` (last `@` of the authority, first `:`), so for every URL they accept the
 *   split is theirs; a password with an un-encoded `/ ? #` does not parse for them, and is hidden
 *   as the user meant it;
 * - the value of a secret parameter (`?password=`, `&sslpassword=`, `password1=`, `pwd=`,
 *   `token=`, ... see SECRET_NAME) up to the end of the line, since an un-encoded `&` or `#` may
 *   be part of it;
 * - the value of a JSON field of such a name (the RDS secret `{"username", "password", ...}`).
 * Where a secret's end is ambiguous the longest reading is hidden: over-redaction can hide a host
 * or a parameter, it never shows part of a secret. Spans found by different rules are merged.
 *
 * Defense in depth: the secrets the config resolves (each source URL's password, a Secrets
 * Manager secret) are registered here, and `redact` also hides every registered value wherever
 * it appears, so a driver message that echoes a password without its URL is clean too.
 *
 * Owns: those rules and the registry. Must never import anything (drivers, config, the logger and
 * the CLI all import it) and never print.
 */

/** What a secret is replaced with. */
export const REDACTED = '***';

/**
 * A parameter or field name whose value is a secret, matched as the whole name, any case:
 * `pass`, `passwd`, `password`, `pwd` with any prefix (`sslpassword`, `db_password`) and an
 * optional digit or `sha1` suffix (mysql2 reads `password1`..`password3` and `passwordSha1` from
 * a URL's query), and `secret`, `secretstring`, `token` with any prefix (`client_secret`,
 * `X-Amz-Security-Token`). Names that only mention a secret (`secretArn`, `SecretId`) are not.
 */
const SECRET_NAME = String.raw`[\w.-]*(?:(?:pass(?:word|wd)?|pwd)(?:\d+|sha1)?|secret(?:string)?|token)`;
const SECRET_PARAMETER = new RegExp(`^${SECRET_NAME}$`, 'i');

/**
 * The shapes, each with a `keep` group (shown) followed by a `secret` group (hidden). Flags: `g`
 * for every match, `m` so `^`/`$` are line ends, `i` for parameter names.
 */
const SHAPES: readonly RegExp[] = [
  // URL user-info: the greedy `secret` backtracks to the last `@` of the line.
  /(?<keep>\/\/[^:/?#\s]*:)(?<secret>[^\r\n]*)(?=@)/g,
  // `name=value` after `?`, `&`, `;`, whitespace or a line start (URL query, libpq key=value).
  new RegExp(String.raw`(?<keep>(?:^|[\s?&;])${SECRET_NAME}=)(?<secret>[^\r\n]*)`, 'gim'),
  // JSON string value: up to its closing quote (kept), or the line end when cut short.
  new RegExp(String.raw`(?<keep>"${SECRET_NAME}"\s*:\s*")(?<secret>(?:[^"\\\r\n]|\\.)*)`, 'gim'),
  // JSON bare value (a number, say).
  new RegExp(String.raw`(?<keep>"${SECRET_NAME}"\s*:\s*)(?<secret>[^\s"{[,}\]][^\s,}\]]*)`, 'gim'),
];

/** The [start, end) ranges of `text` that hold a secret by shape, sorted and merged. */
function secretSpans(text: string): [number, number][] {
  const spans: [number, number][] = [];
  for (const shape of SHAPES) {
    for (const m of text.matchAll(shape)) {
      const start = m.index + m.groups!.keep!.length;
      spans.push([start, start + m.groups!.secret!.length]);
    }
  }
  spans.sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const span of spans) {
    const last = merged[merged.length - 1];
    if (last && span[0] <= last[1]) last[1] = Math.max(last[1], span[1]);
    else merged.push(span);
  }
  return merged;
}

/**
 * `text` with every secret found by its shape replaced by `***`. Idempotent; text without a
 * secret shape is returned unchanged.
 * @example redactShapes('postgres://reader:p@ss:w/rd@db:5432/shop') // 'postgres://reader:***@db:5432/shop'
 */
export function redactShapes(text: string): string {
  const spans = secretSpans(text);
  if (spans.length === 0) return text;
  let out = '';
  let at = 0;
  for (const [start, end] of spans) {
    out += text.slice(at, start) + REDACTED;
    at = end;
  }
  return out + text.slice(at);
}

/**
 * Registered secrets shorter than this many characters are not hidden from free text: 1 to 3
 * characters occur in ordinary words, ports and timestamps, and hiding them everywhere would
 * garble every line. Such a password is still hidden wherever it sits in a URL, a secret
 * parameter or a JSON field (by shape).
 */
export const MIN_KNOWN_SECRET_LENGTH = 4;

/** Every registered spelling of every registered secret. */
const known = new Set<string>();
/** `known` as one alternation, longest first (a secret that holds another is hidden whole). */
let knownPattern: RegExp | undefined;

/** The spellings a secret takes in messages: as is, percent-, form- and JSON-encoded. */
function spellingsOf(value: string): string[] {
  const userInfo = new URL('x://h');
  userInfo.password = value;
  return [
    value,
    encodeURIComponent(value),
    userInfo.password,
    new URLSearchParams({ v: value }).toString().slice(2),
    JSON.stringify(value).slice(1, -1),
  ];
}

/**
 * Registers a secret value: from now on `redact` hides it in any text, in each of its spellings.
 * Values shorter than MIN_KNOWN_SECRET_LENGTH are ignored.
 */
export function registerSecret(value: string): void {
  if (Array.from(value).length < MIN_KNOWN_SECRET_LENGTH) return;
  const before = known.size;
  for (const spelling of spellingsOf(value)) known.add(spelling);
  if (known.size === before) return;
  const alternatives = [...known]
    .sort((a, b) => b.length - a.length)
    .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  knownPattern = new RegExp(alternatives.join('|'), 'g');
}

/** `text` percent-decoded, or as it is when it is not valid percent-encoding. */
function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * Registers the secrets of a connection URL both as redaction finds them by shape (as written
 * and decoded) and as the drivers read them (WHATWG `URL`, decoded: the password, each secret
 * query parameter up to its `&`), so whichever one a driver echoes is hidden.
 */
export function registerUrlSecrets(url: string): void {
  for (const [start, end] of secretSpans(url)) {
    registerSecret(url.slice(start, end));
    registerSecret(decoded(url.slice(start, end)));
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return; // no driver connects with it: the readings by shape are all there is
  }
  registerSecret(decoded(parsed.password));
  for (const [name, value] of parsed.searchParams) {
    if (SECRET_PARAMETER.test(name)) registerSecret(value);
  }
}

/** `text` safe to print: secrets hidden by shape, then every registered secret. */
export function redact(text: string): string {
  const shaped = redactShapes(text);
  return knownPattern ? shaped.replace(knownPattern, REDACTED) : shaped;
}

/**
 * Hides secrets in an error, in place, for paths that hand the Error object on (the Lambda
 * handler's thrown error becomes the invocation's result): the message, the stack (which copied
 * the message when the error was made), every other string property (Node's URL error keeps the
 * `input`), down the `cause` chain. Returns the same error.
 */
export function redactError<T>(error: T): T {
  let e: unknown = error;
  for (let depth = 0; e instanceof Error && depth < 10; depth++) {
    const fields = e as unknown as Record<string, unknown>;
    for (const key of Object.getOwnPropertyNames(e)) {
      const value = fields[key];
      if (typeof value !== 'string') continue;
      try {
        fields[key] = redact(value);
      } catch {
        // a read-only property (a frozen error): nothing can be done about it here
      }
    }
    e = e.cause;
  }
  return error;
}
