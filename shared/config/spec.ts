/**
 * The pipeline spec (`tidemark.yaml`): ONE schema for every entry point (CLI, Lambda, Fargate,
 * CDK). Validation names the exact field and the fix; nothing downstream re-validates.
 *
 * Owns: parsing, validation, defaults, `${env:NAME}` interpolation, and registering each source
 * URL's secrets for redaction (shared/observability/redact.ts) before anything can quote them.
 * Never opens a connection and never logs a secret: `redactSpec` is the only way a spec is
 * printed.
 *
 * A table's `mode` picks its shape: `incremental` (a cursor, pages, a schedule) or `cdc` (the
 * database log; `snapshot` required; per-source stream settings under `sources.<name>.cdc`,
 * resolved by `cdcSettings`). A source's `kind` is any kind the driver registry knows
 * (`driverKinds`), and every table's mode is judged against its kind's static capabilities by
 * the mode gate (./modes.ts) before a spec is returned, so no entry point can skip it.
 */
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { ConfigError, type ConfigProblem } from '../contracts/errors.js';
import {
  DEFAULT_LAKE_FORMAT,
  isLakeFormat,
  LAKE_FORMATS,
  type LakeFormat,
} from '../contracts/lake-format.js';
import { TABLE_FORMATS } from '../contracts/table-format.js';
import { driverKinds } from '../drivers/registry.js';
import { redact, registerUrlSecrets } from '../observability/redact.js';
import { checkModes } from './modes.js';
import { hashedPgName, PG_NAME_MAX } from './pg-names.js';
import { ambiguousUrlProblem } from './source-url.js';

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

/** Glue database, REST namespace: lowercase letters, digits and `_` (Athena's rule). */
const catalogDatabase = z
  .string()
  .regex(/^[a-z0-9_]{1,255}$/, 'must be 1-255 lowercase letters, digits or "_" (Glue and Athena names)');

/** Where a lake's Iceberg tables are registered (docs/iceberg.md "Catalogs"). */
const catalogSchema = z.discriminatedUnion('type', [
  z
    .object({
      /** No server: metadata under each table's folder, swapped by conditional writes. */
      type: z.literal('file'),
    })
    .strict(),
  z
    .object({
      /** The AWS Glue Data Catalog (Athena, EMR, Redshift Spectrum read it). */
      type: z.literal('glue'),
      /** The Glue database every table of the lake goes into (the CDK stack creates it; `tidemark check` says when it is missing). */
      database: catalogDatabase,
      /** The account whose catalog it is; default the caller's. */
      catalogId: z
        .string()
        .regex(/^\d{12}$/, 'must be a 12-digit AWS account id')
        .optional(),
      region: z.string().optional(),
      endpoint: z.string().url().optional(),
    })
    .strict(),
  z
    .object({
      /** An Iceberg REST catalog (S3 Tables, Glue's Iceberg endpoint, Polaris, Nessie). */
      type: z.literal('rest'),
      /** The catalog's base URI, e.g. `https://s3tables.us-east-1.amazonaws.com/iceberg`. */
      uri: z.string().url(),
      /** The warehouse (S3 Tables: the table bucket ARN). */
      warehouse: z.string().min(1).optional(),
      /** The namespace every table of the lake goes into. */
      namespace: catalogDatabase,
      /** SigV4-sign requests for this service (`s3tables`, `glue`); unset: unsigned. */
      sigv4: z
        .object({ service: z.string().min(1), region: z.string().min(1).optional() })
        .strict()
        .optional(),
      /** A bearer token (`${env:NAME}` to keep it out of the file). */
      token: z.string().min(1).optional(),
      /**
       * S3 Tables only (`sigv4.service: s3tables`): `cdk deploy` creates the table bucket named by
       * `warehouse` and `namespace` in it, both retained on stack deletion (docs/deploy.md).
       * Unset: both exist already, or the namespace is created at the first commit. Runs ignore it.
       */
      createTableBucket: z.boolean().optional(),
      /**
       * The catalog assigns each table's location (its create request names none) and removes
       * unreferenced files there: data files and manifests go under that location, which tidemark
       * never lists or deletes from (docs/iceberg.md "S3 Tables"). Default: true when signed for
       * `s3tables`, false otherwise (the table is at its folder under `lake.uri`).
       */
      placesTables: z.boolean().optional(),
    })
    .strict(),
]);

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
    /**
     * Lake format of tables synced for the first time (docs/lake-format.md): 1 (default, read
     * by every engine) or 2 (DataPage V2 and delta encodings: smaller, cheaper to write, not
     * read by Spark < 3.3 / Glue 3 or Redshift Spectrum). A table with state keeps its format.
     */
    format: z
      .unknown()
      .transform((v, ctx): LakeFormat => {
        if (isLakeFormat(v)) return v;
        ctx.addIssue({
          code: 'custom',
          message: `must be ${LAKE_FORMATS.join(' or ')} (a number: 1 = DataPage V1, read by every engine; 2 = DataPage V2 and delta encodings, see docs/lake-format.md), got ${JSON.stringify(v)}`,
        });
        return z.NEVER;
      })
      .default(DEFAULT_LAKE_FORMAT),
    /**
     * Table format (docs/iceberg.md): `iceberg` (each lake table an Apache Iceberg v2 table in
     * `catalog`) or `plain` (Parquet objects only, the layout before Iceberg). Unset: Iceberg for a
     * table synced for the first time, and the format a table's state records otherwise; an
     * explicit setting that contradicts a table's recorded format is refused.
     */
    tableFormat: z.enum(TABLE_FORMATS).optional(),
    /** Where Iceberg tables are registered; default `{ type: file }` (metadata under the table's folder). */
    catalog: catalogSchema.default({ type: 'file' }),
    /**
     * How long an Iceberg table keeps its snapshots (time travel): older ones are expired on
     * commit, the newest `minSnapshots` always kept. Default 24 hours, not Iceberg's 5 days: a
     * CDC table commits once a minute, and every kept snapshot is in the metadata file each
     * commit rewrites (5 days: 7,200 snapshots, a 5 MB file parsed and written per commit). Set on every commit as the table's
     * `history.expire.*` properties, so a change applies from the next commit on.
     */
    snapshotRetention: z
      .object({
        maxAgeHours: z
          .number()
          .positive()
          .max(24 * 3650)
          .default(24),
        minSnapshots: z.number().int().min(1).max(10_000).default(1),
      })
      .strict()
      .default({ maxAgeHours: 24, minSnapshots: 1 }),
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
/** Default flush budget of a CDC table's pending rows (`sources.<name>.cdc.flushBytes`), as pageBytes. */
export const DEFAULT_FLUSH_BYTES = 64 * 2 ** 20;
const MIN_PAGE_BYTES = 2 ** 20;
const MAX_PAGE_BYTES = 2 ** 30;

/** How `sources.<name>.kind` is spelled in messages: the registered kinds, built-ins first. */
function kindList(): string {
  const kinds = driverKinds().map((k) => `"${k}"`);
  return kinds.length <= 2 ? kinds.join(' or ') : `one of ${kinds.join(', ')}`;
}

/** A replication slot or publication name tidemark may use unquoted: `[a-z_][a-z0-9_]{0,62}`. */
const pgName = z
  .string()
  .regex(
    /^[a-z_][a-z0-9_]{0,62}$/,
    'must be a Postgres name: a lowercase letter or "_", then up to 62 lowercase letters, digits or "_"',
  );

/** Default of `sources.<name>.cdc.binlogRetentionHours` (MySQL/MariaDB). */
export const DEFAULT_BINLOG_RETENTION_HOURS = 24;

/** Largest MySQL server id (server_id is an unsigned 32-bit integer; 0 refuses replication). */
export const MAX_SERVER_ID = 2 ** 32 - 1;

/**
 * Per-source settings of the change stream (`sources.<name>.cdc`), read by the CDC task. The
 * block is optional; `cdcSettings` fills every default. Seconds are wall-clock seconds.
 */
const cdcSourceSchema = z
  .object({
    /** Postgres replication slot; default `tidemark_<pipeline>_<source>` (see `defaultCdcName`). */
    slot: pgName.optional(),
    /** Postgres publication; same default as the slot. */
    publication: pgName.optional(),
    /**
     * MySQL/MariaDB: the server id the binlog connection registers with. Must differ from every
     * other server and replica of that primary (a duplicate disconnects the other one), so there
     * is no default: required for a mysql source with cdc tables.
     */
    serverId: z
      .number()
      .int()
      .min(1, 'must be 1 or more (0 cannot replicate)')
      .max(MAX_SERVER_ID, `must be at most ${MAX_SERVER_ID} (server_id is 32-bit)`)
      .optional(),
    /**
     * MySQL/MariaDB: the binlog must keep at least this long (checked by `tidemark check`): the
     * position must survive an outage, not just a flush interval. Default 24
     * (`DEFAULT_BINLOG_RETENTION_HOURS`, filled by `cdcSettings` for mysql sources).
     */
    binlogRetentionHours: z
      .number()
      .min(1, 'must be at least 1 (hours)')
      .max(24 * 365)
      .optional(),
    /** How often an idle log makes progress visible (Postgres keepalive, MySQL heartbeat). */
    heartbeatSeconds: z.number().min(1).max(3600).default(10),
    /** A table's pending rows are written as one object at this many rows ... */
    flushRows: z.number().int().min(1).max(10_000_000).default(100_000),
    /** ... or this many bytes (Arrow data bytes, as pageBytes) ... */
    flushBytes: byteSize(DEFAULT_FLUSH_BYTES, MIN_PAGE_BYTES, MAX_PAGE_BYTES),
    /** ... or after this long, whichever comes first. */
    flushSeconds: z.number().min(1).max(3600).default(60),
    /**
     * The source is acknowledged (Postgres confirmed_flush_lsn) at least this often: pending rows
     * are flushed and committed when the last acknowledgement is older, so the server can free
     * its log (WAL retention).
     */
    maxAckLagSeconds: z.number().min(1).max(86_400).default(300),
    /**
     * With no rows to write, the position is still committed (and then acknowledged) this often,
     * so an idle captured table does not pin the server's log: Postgres' restart_lsn and WAL
     * retention follow the acknowledged position. One small state write per interval.
     */
    idleCommitSeconds: z.number().min(1).max(3600).default(10),
    /** The CDC task's lease on its source; renewed every third of it. */
    leaseTtlSeconds: z.number().min(15).max(3600).default(60),
    /**
     * After SIGTERM the task flushes, commits and releases its lease within this long. ECS kills a
     * task at most 120 s after SIGTERM, so at most 110 (10 s left for the process to exit).
     */
    stopTimeoutSeconds: z
      .number()
      .min(1)
      .max(110, 'must be at most 110: ECS stops a task at most 120 s after SIGTERM (stopTimeout)')
      .default(30),
    /**
     * How the source's `snapshot: initial` tables are loaded (docs/decisions/0013-snapshots.md):
     * chunks of `chunkRows` rows by primary-key range, `connections` chunks at once (each its own
     * query connection: the source's connection budget), at most `rowsPerSecond` rows a second
     * when set (so a snapshot does not hurt the production database). MySQL 8 (no consistent
     * snapshot position) needs `watermarkTable` (`db.table`, see docs/mysql-cdc.md).
     */
    snapshot: z
      .object({
        chunkRows: z.number().int().min(1).max(1_000_000).default(20_000),
        connections: z.number().int().min(1).max(16).default(2),
        rowsPerSecond: z.number().positive().optional(),
        watermarkTable: z
          .string()
          .regex(/^[A-Za-z0-9_$]+\.[A-Za-z0-9_$]+$/, 'must be "database.table"')
          .optional(),
      })
      .strict()
      .default({ chunkRows: 20_000, connections: 2 }),
    /** The log no longer holds the committed position (slot invalidated, binlog purged). */
    onPositionLost: z
      .enum(['fail', 'reset'])
      .refine((v) => v === 'fail', {
        message:
          '"reset" (start over with a new snapshot) arrives with on-demand re-snapshots in a later release; use "fail" (the default): the task stops and says what was lost',
      })
      .default('fail'),
  })
  .strict();

/** The `cdc:` block of a source as written, with its defaults filled. */
export type CdcSourceConfig = z.infer<typeof cdcSourceSchema>;

const sourceSchema = z
  .object({
    /** A registered driver kind (shared/drivers/registry.ts `driverKinds`). */
    kind: z.string().superRefine((kind, ctx) => {
      if (!driverKinds().includes(kind)) ctx.addIssue({ code: 'custom', message: `must be ${kindList()}` });
    }),
    /**
     * Connection URL; may contain ${env:NAME}. Prefer `secretArn` in AWS. Refused when its host
     * cannot be told from its password (./source-url.ts); the message never quotes it.
     */
    url: z
      .string()
      .min(1)
      .superRefine((url, ctx) => {
        const problem = ambiguousUrlProblem(url);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      })
      .optional(),
    /** AWS Secrets Manager secret whose SecretString is the URL or an RDS-style JSON secret. */
    secretArn: z.string().startsWith('arn:aws', 'must be a Secrets Manager ARN').optional(),
    connectTimeoutSeconds: z.number().positive().max(300).default(10),
    /** Change-stream settings, for the source's `mode: cdc` tables. */
    cdc: cdcSourceSchema.optional(),
  })
  .strict()
  .refine((s) => Boolean(s.url) !== Boolean(s.secretArn), {
    message: 'give exactly one of "url" or "secretArn"',
  });

/** The fields every table has, whatever its mode. */
const tableFields = {
  /** Name of an entry under `sources`. */
  source: z.string().min(1),
  table: identifier,
  /** Lake table name; defaults to `table`. */
  target: z
    .string()
    .regex(/^[a-z0-9_]+\.[a-z0-9_]+$/, 'must be lowercase "schema.table"')
    .optional(),
  writeMode: z.enum(['append', 'upsert']),
  /** Columns left out of the lake. */
  exclude: z.array(z.string()).default([]),
  /**
   * A column whose lake type widens (int -> bigint, decimal precision up): stop the table
   * (default) or continue writing the wider type in new objects (docs/schema-changes.md).
   */
  onWiden: z.enum(['stop', 'continue']).default('stop'),
  /**
   * Iceberg partition fields of the table, in order (docs/iceberg.md "Partitions"); default none:
   * unpartitioned. Each a primary-key column (or `__commit_ts`, by year/month/day/hour) and an
   * Iceberg transform; checked against the table's schema at its first write, and fixed when the
   * table is created.
   */
  partitionBy: z
    .array(
      z
        .object({
          column: z.string().min(1),
          transform: z
            .string()
            .regex(
              /^(identity|year|month|day|hour|bucket\[[1-9]\d{0,9}\]|truncate\[[1-9]\d{0,9}\])$/,
              'must be identity, bucket[N], truncate[W], year, month, day or hour',
            ),
        })
        .strict(),
    )
    .refine(
      (fields) => new Set(fields.map((f) => `${f.column}\u0000${f.transform}`)).size === fields.length,
      'a partition field is listed twice',
    )
    .optional(),
  /**
   * An upsert table's full change log kept beside its current state, as a second Iceberg table
   * `<target>_history` partitioned by day(`__commit_ts`): every committed change once, with its
   * `__op`, `__pos` and `__commit_ts` (docs/iceberg.md "History tables"). Default false.
   */
  history: z.boolean().optional(),
};

const incrementalTableSchema = z
  .object({
    ...tableFields,
    /** Scheduled runs read pages keyset-paginated on (cursor, primary key). */
    mode: z.literal('incremental'),
    /** The cursor column, e.g. `updated_at`. */
    cursor: z.string().min(1),
    schedule: scheduleExpr.default('rate(5 minutes)'),
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
  })
  .strict();

const cdcTableSchema = z
  .object({
    ...tableFields,
    /** The CDC task streams the source's log (Postgres logical replication, the MySQL binlog). */
    mode: z.literal('cdc'),
    /**
     * What happens to the rows the table already has when the capture first meets it (a new
     * pipeline, or a table added to a running one): `initial` (default) loads them by DBLog
     * windows while the stream runs; `never` starts from the current log position and does
     * not load them.
     */
    snapshot: z
      .enum(['initial', 'never'], { error: () => 'must be "initial" or "never"' })
      .default('initial'),
    /**
     * A TRUNCATE in the log: `record` notes it and goes on (the lake keeps the rows written
     * before it), `fail` stops the table.
     */
    onTruncate: z.enum(['record', 'fail']).default('record'),
    /**
     * Postgres: an append-only table without a primary key, captured through an insert-only
     * publication: its UPDATEs and DELETEs are not captured.
     */
    insertOnly: z.boolean().default(false),
    /**
     * Postgres, a table without REPLICA IDENTITY FULL: an UPDATE that leaves a TOASTed column
     * unchanged carries no value for it in the log. `reread` reads it back by key at the flush
     * (the latest version is exact; an intermediate one may show a later value), `fail` stops.
     */
    unchangedToast: z.enum(['reread', 'fail']).default('reread'),
  })
  .strict();

/** Fields only one mode has: a cdc table with `cursor:` is told so, not "unknown field". */
const INCREMENTAL_ONLY: readonly string[] = Object.keys(incrementalTableSchema.shape).filter(
  (k) => !(k in tableFields) && k !== 'mode',
);
const CDC_ONLY: readonly string[] = Object.keys(cdcTableSchema.shape).filter(
  (k) => !(k in tableFields) && k !== 'mode',
);

const tableSchema = z.discriminatedUnion('mode', [incrementalTableSchema, cdcTableSchema], {
  error: (iss) =>
    iss.code === 'invalid_union'
      ? 'must be "incremental" (scheduled runs on a cursor column) or "cdc" (the database log)'
      : undefined,
});

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
/** A `mode: incremental` table: the only kind runTable, the Lambda and the schedules take. */
export type IncrementalTableSpec = Extract<TableSpecConfig, { mode: 'incremental' }>;
/** A `mode: cdc` table: run by the CDC task. */
export type CdcTableSpec = Extract<TableSpecConfig, { mode: 'cdc' }>;

export function isIncremental(t: TableSpecConfig): t is IncrementalTableSpec {
  return t.mode === 'incremental';
}

export function isCdc(t: TableSpecConfig): t is CdcTableSpec {
  return t.mode === 'cdc';
}

/** The issue's problems, each with its field path and what to do. */
function explainIssue(issue: z.core.$ZodIssue, root: unknown): ConfigProblem[] {
  const path = issuePath(issue.path) || '(spec)';
  if (issue.code === 'unrecognized_keys') {
    // A field of the other mode gets its own line saying so; the rest are misspellings.
    const mode = modeAt(root, issue.path);
    const other = mode === 'cdc' ? INCREMENTAL_ONLY : mode === 'incremental' ? CDC_ONLY : [];
    const problems: ConfigProblem[] = issue.keys
      .filter((k) => other.includes(k))
      .map((k) => ({
        path: `${path}.${k}`,
        message:
          mode === 'cdc'
            ? `"${k}" is only for mode: incremental (a cdc table follows the database log: no cursor, pages or schedule); remove it, or set mode: incremental`
            : `"${k}" is only for mode: cdc; remove it, or set mode: cdc`,
      }));
    const unknown = issue.keys.filter((k) => !other.includes(k));
    if (unknown.length > 0) {
      problems.push({
        path,
        message: `unknown field(s) ${unknown.map((k) => `"${k}"`).join(', ')}; remove or fix the spelling`,
      });
    }
    return problems;
  }
  if (issue.code === 'invalid_type' && issue.message.includes('received undefined')) {
    return [{ path, message: `is required (expected ${issue.expected})` }];
  }
  return [{ path, message: issue.message }];
}

/** The `mode` written at a table's path in the raw spec (`tables[i]`), if it is one. */
function modeAt(root: unknown, path: readonly PropertyKey[]): string | undefined {
  if (path.length !== 2 || path[0] !== 'tables' || typeof path[1] !== 'number') return undefined;
  const table = (root as { tables?: unknown[] } | null)?.tables?.[path[1]];
  const mode = (table as { mode?: unknown } | null)?.mode;
  return typeof mode === 'string' ? mode : undefined;
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
    throwProblems(result.error.issues.flatMap((i) => explainIssue(i, interpolated)));
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
    if (t.history && t.writeMode !== 'upsert')
      problems.push({
        path: `tables[${i}].history`,
        message:
          'history keeps the change log beside a current-state table, so it needs writeMode: upsert; an append table is a change log already: remove history',
      });
  });
  spec.tables.forEach((t, i) => {
    const history = historyTarget(t);
    if (history !== undefined && targets.has(history))
      problems.push({
        path: `tables[${i}].history`,
        message: `the history table "${history}" is also another table's target; give one of them another target`,
      });
    if (history !== undefined) targets.add(history);
  });
  spec.tables.forEach((t, i) => {
    if (isCdc(t) && t.insertOnly && t.snapshot === 'initial')
      problems.push({
        path: `tables[${i}].snapshot`,
        message:
          'an insertOnly table (no primary key) cannot be snapshotted: chunks are primary-key ranges; set "snapshot: never" (its existing rows are then not loaded), or give the table a primary key',
      });
  });
  problems.push(...cdcSourceProblems(spec));
  // Every table's mode against its kind's capabilities (the gate, shared/config/modes.ts).
  problems.push(...checkModes(spec));
  throwProblems(problems);
  const baseDir = opts.baseDir ?? process.cwd();
  if (spec.lake.uri.startsWith('file://')) {
    const p = spec.lake.uri.slice('file://'.length);
    spec.lake.uri = `file://${isAbsolute(p) ? p : resolve(baseDir, p)}`;
  }
  if (spec.state.dir && !isAbsolute(spec.state.dir)) spec.state.dir = resolve(baseDir, spec.state.dir);
  return spec;
}

/**
 * The `cdc:` blocks against their sources' kinds: slot and publication are Postgres settings,
 * serverId MySQL's (required once the source has cdc tables), and two Postgres sources of one
 * spec never share a slot or publication name (a default one included).
 */
function cdcSourceProblems(spec: Spec): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const taken = new Map<string, string>();
  for (const [name, source] of Object.entries(spec.sources)) {
    const at = `sources.${name}.cdc`;
    const hasCdcTables = spec.tables.some((t) => t.source === name && isCdc(t));
    if (source.kind !== 'postgres') {
      for (const field of ['slot', 'publication'] as const) {
        if (source.cdc?.[field] !== undefined)
          problems.push({
            path: `${at}.${field}`,
            message: `is a Postgres setting, and sources.${name} is ${source.kind}; remove it`,
          });
      }
    }
    for (const field of ['serverId', 'binlogRetentionHours'] as const) {
      if (source.kind !== 'mysql' && source.cdc?.[field] !== undefined) {
        problems.push({
          path: `${at}.${field}`,
          message: `is a MySQL setting, and sources.${name} is ${source.kind}; remove it`,
        });
      }
    }
    if (source.kind === 'mysql' && hasCdcTables && source.cdc?.serverId === undefined) {
      problems.push({
        path: `${at}.serverId`,
        message: `is required for a mysql source with cdc tables: the server id its binlog connection registers with, different from every server and replica of that primary (SELECT @@server_id on each), 1 to ${MAX_SERVER_ID}`,
      });
    }
    if (source.kind === 'postgres' && hasCdcTables) {
      const settings = cdcSettings(spec, name);
      for (const field of ['slot', 'publication'] as const) {
        const value = settings[field]!;
        const other = taken.get(`${field}\0${value}`);
        if (other) {
          problems.push({
            path: `${at}.${field}`,
            message: `${field} "${value}" is also sources.${other}'s${source.cdc?.[field] ? '' : ' (the default name)'}; two sources on one database must not share it: set a distinct cdc.${field}`,
          });
        }
        taken.set(`${field}\0${value}`, name);
      }
    }
  }
  return problems;
}

/** Throws one ConfigError listing every problem (none: returns). */
function throwProblems(problems: readonly ConfigProblem[]): void {
  const [first, ...more] = problems;
  if (first) throw new ConfigError(first.path, first.message, { more });
}

/**
 * The spec of a deployed process (the Lambda handler, the CDC task): `TIDEMARK_SPEC` (the spec
 * as inline JSON) if set, else the file `TIDEMARK_SPEC_FILE`, else `tidemark.yaml` in `beside`
 * (the bundle's directory).
 */
export function loadSpecFromEnv(beside: string, env: NodeJS.ProcessEnv = process.env): Spec {
  const inline = env.TIDEMARK_SPEC;
  if (inline) {
    let raw: unknown;
    try {
      raw = JSON.parse(inline);
    } catch {
      // Not V8's message: it quotes the text around the error, which may hold a source URL.
      throw new ConfigError('TIDEMARK_SPEC', 'is not valid JSON');
    }
    return parseSpec(raw);
  }
  return loadSpecFile(env.TIDEMARK_SPEC_FILE ?? `${beside}/tidemark.yaml`);
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

/** The incremental tables of a spec, in spec order. */
export function incrementalTables(spec: Spec): IncrementalTableSpec[] {
  return spec.tables.filter(isIncremental);
}

/** The cdc tables of a spec, in spec order. */
export function cdcTables(spec: Spec): CdcTableSpec[] {
  return spec.tables.filter(isCdc);
}

/** The lake table name of a spec table: `target` or the lowercased source `table`. */
export function tableTarget(t: TableSpecConfig): string {
  return t.target ?? t.table.toLowerCase();
}

/** The lake table an upsert table's history goes to (`<target>_history`), when it keeps one. */
export function historyTarget(t: TableSpecConfig): string | undefined {
  return t.history ? `${tableTarget(t)}_history` : undefined;
}

/** Every lake table a table writes: its target, and its history table when it keeps one. */
export function lakeTargets(t: TableSpecConfig): string[] {
  const history = historyTarget(t);
  return history === undefined ? [tableTarget(t)] : [tableTarget(t), history];
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
 * Finds an incremental table for a command that only handles those (`run`, `schema accept`,
 * `unlock`, the Lambda): a cdc table is a ConfigError saying where it runs instead.
 */
export function findIncrementalTable(spec: Spec, name: string, command: string): IncrementalTableSpec {
  const t = findTable(spec, name);
  if (isIncremental(t)) return t;
  throw new ConfigError(
    '--table',
    `${tableTarget(t)} is a mode: cdc table; ${command} handles mode: incremental tables only (cdc tables run under \`tidemark cdc\`)`,
  );
}

/**
 * The default Postgres slot and publication name of a source: `tidemark_<pipeline>_<source>`
 * with `-` turned into `_`. Pipeline names have no `_`, so without a `-` the first `_` after
 * `tidemark_` tells pipeline and source apart; once a `-` was turned into `_` two pipelines could
 * meet in one name (`shop-eu` + `app` and `shop` + `eu-app`) and share a slot, which loses
 * changes, so such a name ends in `_` + 8 hex of sha256(pipeline NUL source). So does a name
 * longer than 63 characters (Postgres' limit), cut to fit: it stays valid and distinct.
 */
export function defaultCdcName(pipeline: string, source: string): string {
  const plain = `tidemark_${pipeline}_${source}`;
  const name = plain.replaceAll('-', '_');
  if (name === plain && name.length <= PG_NAME_MAX) return name;
  return hashedPgName(name, `${pipeline}\0${source}`);
}

/** A source's change-stream settings with every default resolved (`cdcSettings`). */
export interface CdcSettings
  extends Omit<CdcSourceConfig, 'slot' | 'publication' | 'serverId' | 'binlogRetentionHours'> {
  readonly kind: string;
  /** Postgres sources: the slot and publication (given, or `defaultCdcName`). */
  readonly slot?: string;
  readonly publication?: string;
  /** MySQL sources: the server id (required by the spec once the source has cdc tables). */
  readonly serverId?: number;
  /** MySQL sources: the least binlog retention `tidemark check` accepts (default 24). */
  readonly binlogRetentionHours?: number;
}

/** The `cdc:` settings of source `sourceName`, defaults filled (the block may be absent). */
export function cdcSettings(spec: Spec, sourceName: string): CdcSettings {
  const source = spec.sources[sourceName];
  if (!source) {
    throw new ConfigError(
      `sources.${sourceName}`,
      `is not a source of pipeline ${spec.pipeline} (known: ${Object.keys(spec.sources).join(', ')})`,
    );
  }
  // Parsing is idempotent on an already-parsed block: it only fills what is missing.
  const { slot, publication, serverId, binlogRetentionHours, ...rest } = cdcSourceSchema.parse(
    source.cdc ?? {},
  );
  const fallback = defaultCdcName(spec.pipeline, sourceName);
  return {
    ...rest,
    kind: source.kind,
    ...(source.kind === 'postgres' ? { slot: slot ?? fallback, publication: publication ?? fallback } : {}),
    ...(source.kind === 'mysql' && serverId !== undefined ? { serverId } : {}),
    ...(source.kind === 'mysql'
      ? { binlogRetentionHours: binlogRetentionHours ?? DEFAULT_BINLOG_RETENTION_HOURS }
      : {}),
  };
}

/**
 * A copy of the spec safe to print: every string passed through `redact`, source URLs and
 * anything else a user may have put a credential in (an endpoint URL, say).
 */
export function redactSpec(spec: Spec): Spec {
  return JSON.parse(JSON.stringify(spec, (_k, v: unknown) => (typeof v === 'string' ? redact(v) : v)));
}
