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
 * Must never import anything (drivers, config, the logger and the CLI all import it) and never
 * print.
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

/** `text` safe to print: every secret hidden. The one function output paths call. */
export function redact(text: string): string {
  return redactShapes(text);
}
