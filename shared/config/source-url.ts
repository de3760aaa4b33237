/**
 * The one rule a source URL must meet before anything connects with it: its host can be told from
 * its user-info. Applied by `parseSpec` to every `sources.<name>.url` (after `${env:NAME}`
 * interpolation) and by the secret reader to a URL a Secrets Manager secret holds, so every
 * command and entry point refuses such a URL before it opens a connection.
 *
 * Why: WHATWG `new URL` (postgres.js and mysql2 both split with it) ends the authority at the
 * first `/ ? #` and the user-info at the authority's last `@`. A password with an un-encoded `/`
 * (`hunter2@Zq9xK7/tail`) makes part of the password the host, and the driver's error then
 * quotes it ("cannot resolve host "Zq9xK7""), which no redaction can tell from a host name. An
 * un-encoded `@` alone parses the way the user meant, but one `/ ? #` more and it does not, so
 * the rule is one: nothing between `scheme://` and the last `@` may be `@ / ? #`
 * (docs/decisions/0004-config-and-secrets.md, amended 2026-12-07).
 *
 * Owns: that rule and its message. Must never quote the URL or any part of it: the message is
 * the same whatever the URL holds.
 */

/** `scheme://`, the start of every URL the drivers read. */
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;

/** Characters that may not come before the last `@` after `scheme://`, un-encoded. */
const BEFORE_LAST_AT = /[@/?#]/;

/**
 * Why `url` is refused, or undefined when its user-info is unambiguous. Text that does not start
 * with `scheme://` is left to the driver's own parse (`SOURCE_URL_INVALID`).
 * @example ambiguousUrlProblem('postgres://app:hunter2@Zq9xK7/tail@db:5432/shop') // the message
 * @example ambiguousUrlProblem('postgres://app:hunter2%40Zq9xK7%2Ftail@db:5432/shop') // undefined
 */
export function ambiguousUrlProblem(url: string): string | undefined {
  const text = url.trimStart();
  const scheme = SCHEME.exec(text);
  if (!scheme) return undefined;
  const rest = text.slice(scheme[0].length);
  const lastAt = rest.lastIndexOf('@');
  if (lastAt < 0 || !BEFORE_LAST_AT.test(rest.slice(0, lastAt))) return undefined;
  return AMBIGUOUS_URL;
}

/** The message: which characters, their encodings, and that the URL is not shown. */
export const AMBIGUOUS_URL =
  'has an "@" after an un-encoded "@", "/", "#" or "?", so the host cannot be told from the password (the URL is not shown); percent-encode them in the user and password: "@" as %40, "/" as %2F, "#" as %23, "?" as %3F, and ":" in the user as %3A (an "@" in the path or query as %40)';
