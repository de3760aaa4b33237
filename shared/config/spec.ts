/**
 * The pipeline spec (`tidemark.yaml`): ONE schema for every entry point (CLI, Lambda, Fargate,
 * CDK). Validation names the exact field and the fix; nothing downstream re-validates.
 *
 * Owns: parsing, validation, defaults, `${env:NAME}` interpolation, and registering each source
 * URL's secrets for redaction (shared/observability/redact.ts) before anything can quote them.
 * Never opens a connection and never logs a secret: `redactSpec` is the only way a spec is
 * printed.
 */
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ConfigError, type ConfigProblem } from '../contracts/errors.js';
import { redact, registerUrlSecrets } from '../observability/redact.js';

const identifier = z
  .string()
  .regex(
    /^[A-Za-z_][A-Za-z0-9_$]*\.[A-Za-z_][A-Za-z0-9_$]*$/,
    'must be "schema.table" (MySQL: "database.table")',
  );

/** An IANA zone name Node knows (the databases' zone tables have the same names) or `±HH:MM`. */
function isTimeZone(zone: string): boolean {
  if (/^[+-](0\d|1[0-4]):[0-5]\d$/.test(zone)) return true;
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(zone)) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

const scheduleExpr = z
  .string()
  .regex(
    /^(rate\(\d+ (minute|minutes|hour|hours|day|days)\)|cron\(.+\))$/,
    'must be an EventBridge expression such as "rate(5 minutes)" or "cron(0/15 * * * ? *)"',
  );

const sourceSchema = z
  .object({
    kind: z.enum(['postgres', 'mysql'], { message: 'must be "postgres" or "mysql"' }),
    /** Connection URL; may contain ${env:NAME}. Prefer `secretArn` in AWS. */
    url: z.string().min(1).optional(),
    /** AWS Secrets Manager secret whose SecretString is the URL or an RDS-style JSON secret. */
    secretArn: z.string().startsWith('arn:aws', 'must be a Secrets Manager ARN').optional(),
    connectTimeoutSeconds: z.number().positive().max(300).default(10),
  })
  .strict()
  .refine((s) => Boolean(s.url) !== Boolean(s.secretArn), {
    message: 'give exactly one of "url" or "secretArn"',
  });

const stateSchema = z
  .object({
    /** DynamoDB state table; created by the CDK app (or by `tidemark` locally when endpoint is set). */
    dynamodb: z
      .object({
        table: z.string().min(3),
        region: z.string().optional(),
        endpoint: z.string().url().optional(),
      })
      .strict()
      .optional(),
    /** Local directory for state (the file cursor store). */
    dir: z.string().min(1).optional(),
  })
  .strict()
  .refine((s) => Boolean(s.dynamodb) !== Boolean(s.dir), {
    message: 'give exactly one of "dynamodb" or "dir"',
  });

const lakeSchema = z
  .object({
    /** `s3://bucket/prefix` or `file://dir` (relative dirs resolve against the spec file). */
    uri: z
      .string()
      .regex(
        /^(s3:\/\/[a-z0-9.-]{3,63}(\/.*)?|file:\/\/.+)$/,
        'must be "s3://bucket/prefix" or "file://dir"',
      ),
    region: z.string().optional(),
    endpoint: z.string().url().optional(),
    forcePathStyle: z.boolean().optional(),
    compression: z.enum(['zstd', 'snappy']).default('zstd'),
  })
  .strict();

const BYTE_UNITS: Readonly<Record<string, number>> = { B: 1, KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30 };

/** `67108864` as `64 MiB`, for messages. */
function formatBytes(n: number): string {
  for (const unit of ['GiB', 'MiB', 'KiB'] as const) {
    const size = BYTE_UNITS[unit]!;
    if (n >= size && n % size === 0) return `${n / size} ${unit}`;
  }
  return `${n} B`;
}

/**
 * A size in bytes: a whole number, or a string such as `64MiB` / `"512 KiB"` (binary units B,
 * KiB, MiB, GiB), between `min` and `max`; `fallback` when absent.
 */
function byteSize(fallback: number, min: number, max: number) {
  const size = z.unknown().transform((v, ctx): number => {
    let n: number | undefined;
    if (typeof v === 'number') n = v;
    else if (typeof v === 'string') {
      const m = /^(\d+)\s*(B|KiB|MiB|GiB)$/.exec(v.trim());
      if (m) n = Number(m[1]) * BYTE_UNITS[m[2]!]!;
    }
    if (n === undefined || !Number.isSafeInteger(n)) {
      ctx.addIssue({
        code: 'custom',
        message: `must be a whole number of bytes or a size such as "64MiB" (units B, KiB, MiB, GiB), got ${JSON.stringify(v)}`,
      });
      return z.NEVER;
    }
    if (n < min || n > max) {
      ctx.addIssue({
        code: 'custom',
        message: `must be between ${formatBytes(min)} and ${formatBytes(max)}, got ${formatBytes(n)}`,
      });
      return z.NEVER;
    }
    return n;
  });
  return size.default(fallback);
}

/**
 * Default page byte budget. Peak memory of a run is a measured multiple of it plus a fixed base
 * (docs/decisions/0007-page-byte-budget.md): 64 MiB keeps the default Lambda (1769 MB) far from
 * its limit while a page still carries enough rows to compress well.
 */
export const DEFAULT_PAGE_BYTES = 64 * 2 ** 20;
/**
 * Default cap on one row. A row larger than the page budget is synced alone in its page when it
 * is within this cap; one row costs a larger multiple of its size than a page of small rows
 * (parquet-wasm encodes a row at a time, ~7x), so the default Lambda (1769 MB) holds rows up to
 * this size with room to spare (decision 0007). Raise it together with the function's memory.
 */
export const DEFAULT_MAX_ROW_BYTES = 64 * 2 ** 20;
const MIN_PAGE_BYTES = 2 ** 20;
const MAX_PAGE_BYTES = 2 ** 30;

const tableSchema = z
  .object({
    /** Name of an entry under `sources`. */
    source: z.string().min(1),
    table: identifier,
    /** Lake table name; defaults to `table`. */
    target: z
      .string()
      .regex(/^[a-z0-9_]+\.[a-z0-9_]+$/, 'must be lowercase "schema.table"')
      .optional(),
    mode: z.enum(['incremental']),
    /** The cursor column, e.g. `updated_at`. */
    cursor: z.string().min(1),
    schedule: scheduleExpr.default('rate(5 minutes)'),
    writeMode: z.enum(['append', 'upsert']),
    pageSize: z.number().int().min(1).max(1_000_000).default(50_000),
    /**
     * A page also closes after the first row that brings its data to this many bytes (as Arrow
     * data: value bytes plus fixed widths), so memory is bounded by bytes, not only by rows.
     */
    pageBytes: byteSize(DEFAULT_PAGE_BYTES, MIN_PAGE_BYTES, MAX_PAGE_BYTES),
    /** A single row larger than this fails the run (`ROW_TOO_LARGE`, naming its key) instead of being read. */
    maxRowBytes: byteSize(DEFAULT_MAX_ROW_BYTES, MIN_PAGE_BYTES, MAX_PAGE_BYTES),
    /** Rows whose cursor is newer than now - lag wait for a later run. */
    lagSeconds: z.number().min(0).max(86_400).default(5),
    /** Skip the running-transaction bound (and its privilege check); only the lag protects late commits. */
    lagOnly: z.boolean().default(false),
    /**
     * The zone writers stamp a `timestamp` (without time zone) / DATETIME / DATE cursor in, when
     * they set their own session zone (JDBC, many ORMs) instead of the database default: an IANA
     * name or `±HH:MM` (docs/cursor.md).
     */
    cursorTimeZone: z
      .string()
      .refine(
        isTimeZone,
        'must be an IANA time zone name such as "America/New_York" or an offset such as "-05:00"',
      )
      .optional(),
    /** What to do with rows whose cursor is NULL: refuse to run, or skip them (they never sync). */
    nullCursor: z.enum(['refuse', 'skip']).default('refuse'),
    /** Columns left out of the lake. */
    exclude: z.array(z.string()).default([]),
    /**
     * A column whose lake type widens (int -> bigint, decimal precision up): stop the table
     * (default) or continue writing the wider type in new objects (docs/schema-changes.md).
     */
    onWiden: z.enum(['stop', 'continue']).default('stop'),
  })
  .strict();

export const specSchema = z
  .object({
    /** Pipeline name: part of every state key and log line. */
    pipeline: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'must be lowercase letters, digits and dashes'),
    /** Source names are part of every object name (`<pipeline>.<source>.<position>.parquet`). */
    sources: z.record(
      z.string().regex(/^[a-z0-9_-]{1,63}$/, 'must be 1-63 lowercase letters, digits, "_" or "-"'),
      sourceSchema,
    ),
    state: stateSchema,
    lake: lakeSchema,
    tables: z.array(tableSchema).min(1, 'list at least one table'),
  })
  .strict();

export type Spec = z.infer<typeof specSchema>;
export type SourceSpec = Spec['sources'][string];
export type TableSpecConfig = Spec['tables'][number];

/** Suggested fixes for zod issue codes, so every error says what to do. */
function explainIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys') {
    return `unknown field(s) ${issue.keys.map((k) => `"${k}"`).join(', ')}; remove or fix the spelling`;
  }
  if (issue.code === 'invalid_type' && issue.message.includes('received undefined')) {
    return `is required (expected ${issue.expected})`;
  }
  return issue.message;
}

function issuePath(path: readonly PropertyKey[]): string {
  return path
    .map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`))
    .join('');
}

/** Replaces `${env:NAME}` in every string of the raw spec; a missing variable is a ConfigError. */
function interpolate(value: unknown, path: string, env: NodeJS.ProcessEnv): unknown {
  if (typeof value === 'string') {
    return value.replace(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => {
      const v = env[name];
      if (v === undefined) throw new ConfigError(path, `environment variable ${name} is not set`);
      return v;
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => interpolate(v, `${path}[${i}]`, env));
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, interpolate(v, path ? `${path}.${k}` : k, env)]),
    );
  }
  return value;
}

/** Registers the secrets of every source URL in a raw spec, valid or not (redact.ts). */
function registerSourceSecrets(raw: unknown): void {
  const sources = (raw as { sources?: unknown } | null)?.sources;
  if (!sources || typeof sources !== 'object') return;
  for (const source of Object.values(sources)) {
    const url = (source as { url?: unknown } | null)?.url;
    if (typeof url === 'string') registerUrlSecrets(url);
  }
}

/**
 * Validates a raw (already YAML/JSON-parsed) spec. `baseDir` resolves relative `file://` lake
 * URIs and state dirs. Throws one ConfigError listing every wrong field and its fix.
 */
export function parseSpec(raw: unknown, opts: { baseDir?: string; env?: NodeJS.ProcessEnv } = {}): Spec {
  const env = opts.env ?? process.env;
  const interpolated = interpolate(raw, '', env);
  registerSourceSecrets(interpolated);
  const result = specSchema.safeParse(interpolated);
  if (!result.success) {
    const problems = result.error.issues.map((i) => ({
      path: issuePath(i.path) || '(spec)',
      message: explainIssue(i),
    }));
    throwProblems(problems);
    throw new ConfigError('(spec)', 'is not valid');
  }
  const spec = result.data;
  const problems: ConfigProblem[] = [];
  const known = Object.keys(spec.sources).join(', ');
  spec.tables.forEach((t, i) => {
    if (!spec.sources[t.source]) {
      problems.push({
        path: `tables[${i}].source`,
        message: `names source "${t.source}", which is not under "sources" (known: ${known})`,
      });
    }
  });
  const targets = new Set<string>();
  spec.tables.forEach((t, i) => {
    const target = tableTarget(t);
    if (targets.has(target))
      problems.push({ path: `tables[${i}].target`, message: `two tables write to lake table "${target}"` });
    targets.add(target);
  });
  throwProblems(problems);
  const baseDir = opts.baseDir ?? process.cwd();
  if (spec.lake.uri.startsWith('file://')) {
    const p = spec.lake.uri.slice('file://'.length);
    spec.lake.uri = `file://${isAbsolute(p) ? p : resolve(baseDir, p)}`;
  }
  if (spec.state.dir && !isAbsolute(spec.state.dir)) spec.state.dir = resolve(baseDir, spec.state.dir);
  return spec;
}

/** Throws one ConfigError listing every problem (none: returns). */
function throwProblems(problems: readonly ConfigProblem[]): void {
  const [first, ...more] = problems;
  if (first) throw new ConfigError(first.path, first.message, { more });
}

/** Reads and validates a YAML (or JSON) spec file. */
export function loadSpecFile(path: string, env?: NodeJS.ProcessEnv): Spec {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError('', `cannot read spec file ${path}: ${(e as Error).message}`, { cause: e });
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (e) {
    throw new ConfigError('', `${path} is not valid YAML: ${(e as Error).message.split('\n')[0]}`, {
      cause: e,
    });
  }
  return parseSpec(raw, { baseDir: dirname(resolve(path)), ...(env ? { env } : {}) });
}

/** The lake table name of a spec table: `target` or the lowercased source `table`. */
export function tableTarget(t: TableSpecConfig): string {
  return t.target ?? t.table.toLowerCase();
}

/** Finds a table by its source name or target; a ConfigError lists the known names. */
export function findTable(spec: Spec, name: string): TableSpecConfig {
  const t = spec.tables.find((x) => x.table === name || tableTarget(x) === name);
  if (!t) {
    throw new ConfigError(
      '--table',
      `no table "${name}" in pipeline ${spec.pipeline} (known: ${spec.tables.map((x) => x.table).join(', ')})`,
    );
  }
  return t;
}

/**
 * A copy of the spec safe to print: every string passed through `redact`, source URLs and
 * anything else a user may have put a credential in (an endpoint URL, say).
 */
export function redactSpec(spec: Spec): Spec {
  return JSON.parse(JSON.stringify(spec, (_k, v: unknown) => (typeof v === 'string' ? redact(v) : v)));
}
