/**
 * What every `tidemark` command shares: the exit codes, the usage error (exit 2), the spec
 * argument and how an error is printed (a short headline, its details on the lines after it).
 */
import { existsSync } from 'node:fs';
import { loadSpecFile, type Spec } from '../../shared/config/spec.js';
import { ConfigError, TidemarkError } from '../../shared/contracts/errors.js';
import { type RecordedError, recordError } from '../../shared/engine/incremental/state.js';
import { redact } from '../../shared/observability/redact.js';

/** The exit codes of `tidemark`, as the usage text and docs/errors.md list them. */
export const EXIT = {
  ok: 0,
  error: 1,
  usage: 2,
  /** Another run holds a table's lease (EX_TEMPFAIL: try again later). */
  leaseHeld: 75,
  /** Stopped by SIGINT (Ctrl-C) / SIGTERM after committing what was durable: 128 + signal. */
  interrupted: 130,
  terminated: 143,
} as const;

/** The exit code for an error that ends a command. */
export function exitCodeOf(e: unknown): number {
  if (e instanceof UsageError) return EXIT.usage;
  if (e instanceof TidemarkError && e.code === 'LEASE_HELD') return EXIT.leaseHeld;
  return EXIT.error;
}

/** A wrong command line: main prints it with the usage text and exits 2. */
export class UsageError extends Error {}

/** The spec file every command reads when `-c` is not given. */
export const DEFAULT_SPEC_FILE = 'tidemark.yaml';

/** The spec file named by `-c`, or `./tidemark.yaml` when it exists. */
export function specPath(values: { config?: string | undefined }): string {
  if (values.config) return values.config;
  if (existsSync(DEFAULT_SPEC_FILE)) return DEFAULT_SPEC_FILE;
  throw new UsageError(
    `no -c FILE given and there is no ./${DEFAULT_SPEC_FILE}; pass the pipeline spec with -c (start from tidemark.example.yaml)`,
  );
}

/** Loads the spec named by `-c` (default `./tidemark.yaml`). */
export function specArg(values: { config?: string | undefined }): Spec {
  return loadSpecFile(specPath(values));
}

/**
 * What the CLI prints after `tidemark: `: the first line of an error's message, or, for a spec
 * with several problems, the count line and one line per problem (fix them all in one go).
 */
export function oneLine(e: unknown): string {
  if (e instanceof ConfigError && e.problems.length > 1) return redact(e.message);
  return redact(e instanceof Error ? (e.message.split('\n')[0] ?? e.name) : String(e));
}

/**
 * The longest first line an error prints, `tidemark: ` included: a headline a terminal shows
 * whole and a log search matches on. What does not fit follows on indented lines.
 */
export const HEADLINE_MAX = 200;

/**
 * A reason as the CLI prints it on stderr: `tidemark: <headline>` of at most HEADLINE_MAX
 * characters, then the rest of the reason's first line on lines indented by two spaces, cut at
 * its clause boundaries (`; `, `. `, then `, `, then a space; never inside parentheses or quotes),
 * then the reason's further lines as they are (a spec's problem list). Every error message stays
 * whole in `--json` output and the state; only its printing is cut. Secrets are hidden
 * (`redact`). Ends with a newline.
 */
export function errorText(reason: string): string {
  const PREFIX = 'tidemark: ';
  // Hidden before the cut, so no secret is split across two lines.
  const [first = '', ...more] = redact(reason).split('\n');
  const head = `${PREFIX}${first}`;
  const cut =
    head.length > HEADLINE_MAX ? cutPoint(head, HEADLINE_MAX, 'headline', PREFIX.length) : undefined;
  const headline = cut ? head.slice(0, cut.end).trimEnd() : head;
  const details = cut ? cutAtClauses(head.slice(cut.next).trim(), HEADLINE_MAX - 2).map((d) => `  ${d}`) : [];
  return `${[headline, ...details, ...more].join('\n')}\n`;
}

/** An error's printed lines (errorText of oneLine). */
export function errorLines(e: unknown): string {
  return errorText(oneLine(e));
}

/** `text` in lines of at most `max` characters, each ending at the last clause boundary that fits. */
function cutAtClauses(text: string, max: number): string[] {
  const lines: string[] = [];
  let rest = text.trim();
  while (rest.length > max) {
    const { end, next } = cutPoint(rest, max, 'detail');
    lines.push(rest.slice(0, end).trimEnd());
    rest = rest.slice(next).trimStart();
  }
  if (rest) lines.push(rest);
  return lines;
}

/**
 * Where to cut `s` so that its first line has at most `max` characters: after the last `; `
 * or sentence end `. ` (not `e.g. `) that fits, else after the last `, `, else at the last
 * space, else at `max` (a headline drops the `;` or `,` it ends at, a detail line keeps it);
 * none before `from` (the `tidemark: ` prefix). Boundaries inside parentheses or double quotes
 * do not count: a headline never ends half-way through an aside or a quoted name.
 */
function cutPoint(
  s: string,
  max: number,
  line: 'headline' | 'detail',
  from = 0,
): { end: number; next: number } {
  let clause: { end: number; next: number } | undefined;
  let comma: { end: number; next: number } | undefined;
  let space: { end: number; next: number } | undefined;
  let depth = 0;
  let quoted = false;
  for (let i = 0; i < s.length && i <= max; i++) {
    const c = s[i];
    if (c === '"') quoted = !quoted;
    else if (c === '(' || c === '[') depth++;
    else if ((c === ')' || c === ']') && depth > 0) depth--;
    if (s[i + 1] !== ' ') continue;
    if (c === ' ' || i <= from) continue;
    const top = depth === 0 && !quoted;
    if (top && c === ';' && i + 1 <= max) clause = { end: line === 'headline' ? i : i + 1, next: i + 2 };
    else if (top && c === '.' && i + 1 <= max && !/\b(e\.g|i\.e|etc|vs)$/.test(s.slice(0, i)))
      clause = { end: i + 1, next: i + 2 };
    else if (top && c === ',' && i + 1 <= max) comma = { end: line === 'headline' ? i : i + 1, next: i + 2 };
    else if (i + 1 <= max) space = { end: i + 1, next: i + 2 };
  }
  return clause ?? comma ?? space ?? { end: max, next: max };
}

/** An error as `--json` output carries it: its documented code (a usage error is CONFIG_INVALID). */
export function errorObject(e: unknown): RecordedError {
  return e instanceof UsageError ? { code: 'CONFIG_INVALID', message: e.message } : recordError(e);
}
