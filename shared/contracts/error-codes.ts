/**
 * The one closed list of the codes an operator can see, grouped by area as docs/errors.md is,
 * each with its one-line meaning (the page has the fix). `TidemarkError` takes only an
 * `ErrorCode`, a logged or returned warning only a `Code`, so a code that is not listed here does
 * not compile, and test/unit/error-codes-documented.test.ts holds this list and docs/errors.md
 * to each other in both directions.
 *
 * One list for errors and warnings, told apart by `kind`: a code names a condition, and some
 * conditions stop one path and only warn on another (`SCHEMA_CHANGED` stops a table or is logged
 * when the change continues; `STATE_TABLE_MISSING` fails a run and is a `check` warn line when the
 * run would create the table), so two lists would need the same name twice. `kind: 'warning'`
 * codes are never thrown (`ErrorCode` leaves them out); an `error` code may also label the log
 * line or `check` line of its own condition.
 *
 * Owns: the names and their meanings. Adding a code is adding an entry here and a row to
 * docs/errors.md; renaming one breaks operators' searches and alarms, so codes are never renamed.
 */

const error = (meaning: string) => ({ kind: 'error', meaning }) as const;
const warning = (meaning: string) => ({ kind: 'warning', meaning }) as const;

/** The codes by area: the sections of docs/errors.md. */
export const CODES_BY_AREA = {
  /** Spec and input. */
  spec: {
    CONFIG_INVALID: error(
      'the spec, a CLI argument or the task environment is wrong; the message names the field',
    ),
    MODE_CHANGED: error("a table's spec mode differs from the mode of its stored state"),
    EVENT_INVALID: error('the Lambda event has no table or names another pipeline'),
    CURSOR_COLUMN_CHANGED: error('the stored cursor was taken on another column than the spec names'),
    NULL_CURSOR: error('rows have NULL in the cursor column and nullCursor is refuse'),
    ICEBERG_PARTITION_INVALID: error(
      'a partition field is not over a key column (or __commit_ts of a change log), or its transform does not fit the column',
    ),
  },
  /** Source (database). */
  source: {
    SOURCE_URL_INVALID: error('the connection URL does not parse'),
    SOURCE_AUTH_FAILED: error('wrong user or password'),
    SOURCE_UNREACHABLE: error(
      'nothing answers at host:port, the name does not resolve, or what answers is not the database',
    ),
    SOURCE_TIMEOUT: error('the connection did not complete within connectTimeoutSeconds'),
    SOURCE_CONNECTION_LOST: error('an open connection died during a statement'),
    SOURCE_TLS: error('TLS negotiation failed'),
    SOURCE_DATABASE_MISSING: error('the database in the URL does not exist'),
    SOURCE_UNAVAILABLE: error('too many connections, or the server is starting or stopping'),
    SOURCE_VERSION_UNSUPPORTED: error('the server is older than the supported versions'),
    SOURCE_STANDBY: error('connected to a read replica without lagOnly'),
    SOURCE_PRIVILEGE: error('the role lacks a privilege the read needs; the message has the GRANT'),
    SOURCE_TABLE_MISSING: error('the table does not exist or is not visible to the role'),
    SOURCE_COLUMN_MISSING: error('the cursor column is not in the table'),
    CURSOR_COLUMN_MISSING: error('the cursor column is not in the table (check line and stored state)'),
    SCHEMA_CHANGED: error(
      "the table's columns changed at the source in a way that stops it (logged as a warning when the change continues)",
    ),
    SOURCE_CURSOR_INVALID: error("the cursor column's type cannot be ordered or encoded exactly"),
    SOURCE_KEY_MISSING: error('no primary key and the cursor is not UNIQUE NOT NULL'),
    SOURCE_TIME_ZONE: error(
      "MySQL's global time zone is named but the server's time zone tables are not loaded",
    ),
    SOURCE_PROTOCOL: error('the server sent something its wire format does not allow'),
    SOURCE_QUERY_FAILED: error("any other query failure; the server's message follows"),
    PAGE_TIMEOUT: error('a page read took longer than the page timeout and was aborted'),
    SOURCE_NOT_INCREMENTAL: error('the driver has no incremental read'),
    CURSOR_NOT_INDEXED: warning('no index on (cursor, pk): every page scans the table'),
    LAKE_FORMAT_KEPT: warning(
      "the spec's lake.format differs from the table's recorded format, which it keeps",
    ),
    TABLE_FORMAT_MISMATCH: error(
      "the spec's lake.tableFormat contradicts the table format the table's state records",
    ),
    BOUND_HELD: warning('a session idle in transaction holds the safe upper bound back'),
    CURSOR_WALL_CLOCK: warning(
      'the cursor is a wall-clock timestamp, so a writer with its own session time zone can mislead the bound',
    ),
  },
  /** Data. */
  data: {
    DATA_UNREPRESENTABLE: error('a value cannot be stored in the lake type without loss'),
    ROW_TOO_LARGE: error("one source row is larger than the table's maxRowBytes"),
    BATCH_INVALID: error('an internal batch invariant broke (a bug)'),
    LAKE_NAME_NOT_SNAKE_CASE: warning('a column name is not lowercase snake_case'),
    LAKE_NAME_COLLISION: error('two column names are equal once lowercased'),
    CDC_UNKNOWN_TABLE: error(
      'the change-stream reader delivered rows of a table the capture does not hold (a bug)',
    ),
    UPSERT_NO_KEY: error('a writeMode: upsert table has no primary key'),
  },
  /** State (cursor store). */
  state: {
    LEASE_HELD: error("another run holds the table's (or the CDC source's) lease"),
    LEASE_LOST: error('our lease expired or was taken over before a commit'),
    CURSOR_CONFLICT: error('another writer committed between our read and our write'),
    STATE_TOO_LARGE: error('a state value is over 350 KB'),
    STATE_CORRUPT: error(
      'a stored state item does not parse, or records a lake format this version does not write',
    ),
    STATE_TABLE_MISSING: error('the DynamoDB state table does not exist'),
    STATE_TABLE_NOT_ACTIVE: error('the DynamoDB state table is not ACTIVE'),
    STATE_UNREACHABLE: error('no DynamoDB endpoint answered'),
    STATE_WRONG_SERVICE: error('something answered at the DynamoDB endpoint, but not DynamoDB'),
    STATE_WRONG_REGION: error('DynamoDB answered that the request was meant for another region'),
    STATE_STORE_FAILED: error("the state store refused check's probe write"),
    STATE_REGION_MISSING: error('no region for DynamoDB'),
    STATE_CREDENTIALS: error('no AWS credentials'),
    STATE_ACCESS_DENIED: error('DynamoDB denied an action on the state table'),
    STATE_CONTENDED: error('a conditional write kept failing while the item kept changing'),
    STATE_LOCK_TIMEOUT: error("the local state dir's lock is held by a live process too long"),
    STATE_LOCK_LOST: error("the local state dir's lock was broken under us"),
    STATE_DIR_UNSUPPORTED: error("the state dir's file system has no hard links"),
    STATE_NOT_JSON: error('a caller passed a state value that is not JSON (a bug)'),
    STATE_INVALID_ARGUMENT: error('a caller passed an invalid argument to the state store (a bug)'),
    STATE_KEY_LEASED: error('a note was refused because its key is a leased state key'),
    STATE_MISSING: error('no state for the table, but the lake holds objects of this writer'),
    STATE_BEHIND_LAKE: error("the state's page counter is behind this writer's objects in the lake"),
    RESET_NEEDS_CHOICE: error('tidemark reset needs --keep-objects or --delete-objects'),
    SCHEMA_ACCEPT_NOTHING: error('tidemark schema accept found no state for the table'),
  },
  /** Lake (sink). */
  lake: {
    SINK_UNREACHABLE: error('no S3 endpoint answered'),
    SINK_WRONG_SERVICE: error('something answered at the S3 endpoint, but not S3'),
    SINK_BUCKET_MISSING: error('the bucket in lake.uri does not exist'),
    SINK_WRONG_REGION: error('the bucket is in another region than the client uses'),
    SINK_ACCESS_DENIED: error('S3 denied an action'),
    SINK_CREDENTIALS: error('no AWS credentials for S3'),
    SINK_REGION_MISSING: error('no region for S3'),
    SINK_DIR_UNWRITABLE: error('a file:// lake folder cannot be created or written'),
    SINK_DISK_FULL: error("the lake folder's disk is full"),
    SINK_STORE_FAILED: error('S3 or the lake directory refused a put, list or delete'),
    SINK_TABLE_NAME: error('an unusable lake table name (a bug)'),
    SINK_START_POSITION: error('an unusable object start position (a bug)'),
    SINK_FENCE: error('a write without a valid lease fence (a bug)'),
    SINK_OBJECT_EXISTS: error("an Iceberg table's data file name was already taken (a bug)"),
    SINK_BATCH_MISMATCH: error("a batch does not match its table's schema (a bug)"),
    SINK_WRITER_NAME: error('an unusable writer name (a bug)'),
    SINK_SIDECAR_MISSING: error('a hashed long object name lost its position sidecar'),
    ICEBERG_TYPE_CHANGE_REFUSED: error(
      "a column's lake type changed in a way an Iceberg table cannot take (not a promotion)",
    ),
    ICEBERG_METADATA_INVALID: error(
      "an Iceberg table's metadata file does not parse or is not format v2, or a change would break its invariants (a bug)",
    ),
    ICEBERG_TABLE_MISSING: error('a commit found no Iceberg metadata for its table'),
    ICEBERG_PARTITION_MISMATCH: error(
      "a table's partitionBy differs from the partition spec the existing Iceberg table was created with",
    ),
    ICEBERG_TABLE_KIND_MISMATCH: error(
      "an upsert table's Iceberg table is a change log (or an append table's a current-state table), and is never reinterpreted",
    ),
    ICEBERG_CONVERT_REFUSED: error(
      'tidemark convert was asked for a table it cannot convert (not an upsert Iceberg table tidemark wrote, or one without key columns)',
    ),
    ICEBERG_KEY_UNSUPPORTED: error(
      "a current-state table's key column has a type its rows cannot be found by (int, long, string, decimal, date, uuid only)",
    ),
    ICEBERG_DELETE_TARGET_GONE: error(
      "a commit's position deletes name a data file another commit removed from the table since the positions were found",
    ),
    ICEBERG_COMMIT_CONTENDED: error("a commit lost the catalog's compare-and-swap on every attempt"),
    ICEBERG_COMMIT_UNKNOWN: error(
      "the catalog did not answer a commit's last attempt, and the table does not have the commit",
    ),
    ICEBERG_CONDITIONAL_WRITES_UNSUPPORTED: error(
      'the lake store cannot create an object only if it is absent (S3 If-None-Match ignored, no hard links)',
    ),
    GLUE_UNREACHABLE: error('no Glue endpoint answered'),
    GLUE_WRONG_SERVICE: error('something answered at the Glue endpoint, but not Glue'),
    GLUE_REGION_MISSING: error('no region for Glue'),
    GLUE_CREDENTIALS: error('no AWS credentials for Glue'),
    GLUE_ACCESS_DENIED: error('Glue denied an action'),
    GLUE_WRONG_REGION: error('Glue answered for another region'),
    GLUE_DATABASE_MISSING: error('the Glue database of a lake table does not exist'),
    GLUE_FAILED: error('Glue refused a GetTable, CreateTable, UpdateTable or GetDatabase'),
    GLUE_TABLE_NOT_ICEBERG: error('the Glue table of a lake target exists and is not an Iceberg table'),
    GLUE_NAME_COLLISION: error('two lake targets map to one Glue table name'),
    REST_CATALOG_UNREACHABLE: error('the Iceberg REST catalog did not answer'),
    REST_CATALOG_ACCESS_DENIED: error(
      'the Iceberg REST catalog refused the credentials or the action (401/403)',
    ),
    REST_CATALOG_FAILED: error('the Iceberg REST catalog refused a request for another reason'),
  },
  /** Check (`tidemark check`): the lines of the change stream a CDC start also refuses on. */
  check: {
    // Postgres change stream
    CDC_NOT_CHECKED: warning('a cdc table of a kind that cannot be opened for a check was not checked'),
    CDC_WAL_LEVEL: error('wal_level is not logical'),
    CDC_REPLICATION_PRIVILEGE: error('the role or account may not replicate'),
    CDC_NO_FREE_SLOT: error('every replication slot is taken'),
    CDC_NO_FREE_SENDER: error('every WAL sender is taken'),
    CDC_SLOT_FOREIGN: error('a slot of that name exists but is not one this source can use'),
    CDC_WAL_UNBOUNDED: warning(
      'max_slot_wal_keep_size = -1: a slot that falls behind keeps WAL without limit',
    ),
    CDC_NO_REPLICA_IDENTITY: error('a table published for UPDATE/DELETE has no replica identity'),
    CDC_PUBLICATION_ALL_TABLES: error('the publication exists and is FOR ALL TABLES'),
    CDC_PUBLICATION_FOREIGN: error(
      'an unmarked publication holds a table the spec now captures through its other publication',
    ),
    CDC_PUBLICATION_PRIVILEGE: error('the role may not create or alter the publication'),
    CDC_NOT_PUBLISHABLE: error('the spec table is a view, materialized view or foreign table'),
    CDC_SLOT_INVALID: error(
      'the slot decodes with another plugin, belongs to another database, or is invalidated at a first start',
    ),
    CDC_SLOT_BUSY: error('another process streams from the slot'),
    CDC_PUBLICATION_MISSING: error('START_REPLICATION failed on the publication'),
    CDC_UNCHANGED_TOAST: error('an UPDATE left a TOASTed column unchanged and the table may not take that'),
    CDC_NAME_CLASH: error("the publication or slot is marked as another pipeline's or source's"),
    CDC_SLOT_IDLE: warning('the slot exists and no capture reads it'),
    // MySQL/MariaDB binlog
    CDC_LOG_BIN: error('log_bin is OFF: no binlog'),
    CDC_BINLOG_FORMAT: error('binlog_format is not ROW'),
    CDC_BINLOG_ROW_IMAGE: error('binlog_row_image is not FULL'),
    CDC_BINLOG_ROW_METADATA: error('binlog_row_metadata is not FULL: TableMaps carry no column names'),
    CDC_BINLOG_COMPRESSION: error('the binlog is compressed'),
    CDC_BINLOG_PARTIAL_JSON: error('binlog_row_value_options is PARTIAL_JSON'),
    CDC_NO_GTID: warning('gtid_mode is not ON: a failover loses the position'),
    CDC_SERVER_ID: error("cdc.serverId is the server's own or a connected replica's, or the server's is 0"),
    CDC_SERVER_ID_UNVERIFIED: warning('the connected replicas could not be listed'),
    CDC_BINLOG_RETENTION: error('binlogs are kept less than binlogRetentionHours'),
    CDC_BINLOG_FILTERED: error("binlog-do-db / binlog-ignore-db leave a cdc table's database out"),
    CDC_NO_PRIMARY_KEY: error('a cdc table in writeMode: upsert has no primary key'),
    CDC_NOT_CAPTURABLE: error('the spec table is a view, which the binlog does not log'),
  },
  /** CDC task (`tidemark cdc`). */
  cdc: {
    SOURCE_NOT_CDC: error("the source's driver kind has no change-stream reader"),
    POSITION_LOST: error('the log no longer holds the committed position'),
    DESTRUCTIVE_DDL: error('a TRUNCATE or destructive DDL on a table with onTruncate: fail'),
    CDC_UNSUPPORTED_TYPE: error('a captured column is of a type the binlog client cannot give exactly'),
    CDC_BINLOG_OFF: error('SHOW MASTER STATUS is empty at a first start: no binlog'),
    SNAPSHOT_KEY_MISSING: error('a snapshot of a table without a primary key (chunks are key ranges)'),
    SNAPSHOT_KEY_INVALID: error("a primary-key column's type cannot key snapshot chunks"),
    CDC_SNAPSHOT_NEEDS_WATERMARK_TABLE: error(
      'a MySQL snapshot needs a watermark table and none is configured',
    ),
    CDC_SNAPSHOT_WATERMARK_TABLE: error('the watermark table does not exist or cannot be written'),
    CDC_SNAPSHOT_UNSUPPORTED: error('snapshot: initial on a source whose driver cannot snapshot'),
    CDC_SNAPSHOT_NO_KEY: error('a snapshot: initial table has no primary key'),
    CDC_PRECONDITION: error('a start refused on a failed preflight line without a code of its own'),
    CDC_NO_POSITION: error(
      'the state holds tables but no resume position: a MySQL/MariaDB start stops, a Postgres start warns and resumes from the slot',
    ),
    CDC_SNAPSHOT_DROPPED: warning('an unfinished snapshot of a table now snapshot: never was dropped'),
    CDC_CONFIG: error('a cdc setting the driver needs is missing or malformed'),
    POSITION_SCHEME: error('the stored resume position was written by another kind of source'),
    STOP_TIMEOUT: error('the final flush of a drain did not finish within stopTimeoutSeconds'),
  },
  /** Local. */
  local: {
    LOCAL_POSTGRES_FAILED: error('the embedded PostgreSQL did not start'),
    INVOKE_FAILED: error('tidemark invoke: the function returned an error or timed out'),
  },
  /** Other. */
  other: {
    TIDEMARK_FLAT_WRITER_FALLBACK: warning(
      'the flat Parquet writer refused a schema or batch; parquet-wasm writes it',
    ),
    TIDEMARK_NATIVE_COMPRESSION_FALLBACK: warning(
      'the page rewrite refused a layout; parquet-wasm compresses the pages',
    ),
    UNEXPECTED: error(
      'an error that carries no code (a bug, or a library error nothing translated), wherever one is shown',
    ),
  },
} as const satisfies Record<string, Record<string, ReturnType<typeof error> | ReturnType<typeof warning>>>;

type ByArea = typeof CODES_BY_AREA;

/** The section of docs/errors.md whose table has the code's row. */
export type ErrorArea = keyof ByArea;

/** Every code an operator can see: an error's or a warning's. */
export type Code = { [A in ErrorArea]: keyof ByArea[A] & string }[ErrorArea];

type KindOf<C extends Code> = {
  [A in ErrorArea]: C extends keyof ByArea[A] ? (ByArea[A][C] extends { kind: infer K } ? K : never) : never;
}[ErrorArea];

/** A code a `TidemarkError` carries. */
export type ErrorCode = { [C in Code]: KindOf<C> extends 'error' ? C : never }[Code];

/** A code that is only ever logged, returned with a result or emitted: the work continues. */
export type WarningCode = { [C in Code]: KindOf<C> extends 'warning' ? C : never }[Code];

export interface CodeEntry {
  readonly area: ErrorArea;
  /** `error`: raised as a `TidemarkError`; `warning`: logged, returned or emitted, the work continues. */
  readonly kind: 'error' | 'warning';
  /** What happened, in one line; docs/errors.md has the fix. */
  readonly meaning: string;
}

/** Every code with its area, kind and meaning: `CODES_BY_AREA` flattened. */
export const ERROR_CODES: Readonly<Record<Code, CodeEntry>> = Object.freeze(
  Object.fromEntries(
    Object.entries(CODES_BY_AREA).flatMap(([area, codes]) =>
      Object.entries(codes).map(([code, entry]) => [code, { area, ...entry }]),
    ),
  ) as Record<Code, CodeEntry>,
);

/** Whether `code` is a listed error code (a `check` fail line's code is one; a warn line's may not be). */
export function isErrorCode(code: string | undefined): code is ErrorCode {
  return code !== undefined && Object.hasOwn(ERROR_CODES, code) && ERROR_CODES[code as Code].kind === 'error';
}
