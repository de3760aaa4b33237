/**
 * `tidemark check`: everything a run of a spec's tables needs, checked before it runs, as
 * structured lines (`ok` / `warn` / `fail`, each naming its fix). The same function serves the
 * CLI (`tidemark check`), the bundled handler (`tidemark invoke check`) and the deployed Lambda
 * (event `{"check": true}`), so the checks run where the real failures happen: with the
 * function's network path, credentials and IAM.
 *
 * Owns: which checks run for a spec, their order, and the rules that belong to no driver (the
 * NULL-cursor policy, upsert needs a key, a table never changes mode: a `mode` fail line per
 * table whose stored state is of the other mode, shared/pipeline/mode-change.ts); the drivers
 * judge their tables (contracts/check.ts `Preflight`) and their change streams (`CdcPreflight`:
 * log settings, slot, publication, per cdc table `table` and `toast`), the state store and the
 * lake their own probes; the Iceberg lines (a table's recorded `tableFormat`, the lake's catalog:
 * conditional writes for `file`, database and names for `glue`) are check-iceberg.ts's. Must
 * never sync, never create a table, bucket or folder a run would not, and never leave anything
 * behind but what a run also creates (a lake or state directory): its probes are deleted again.
 * Never prints.
 */
import { randomUUID } from 'node:crypto';
import {
  type CdcTableSpec,
  cdcSettings,
  findTable,
  type IncrementalTableSpec,
  isCdc,
  isIncremental,
  type Spec,
  type TableSpecConfig,
  tableTarget,
} from '../config/spec.js';
import { type CheckItem, type CheckStatus, failed, passed, type TablePreflight } from '../contracts/check.js';
import type { ClosableIncrementalSource } from '../contracts/driver.js';
import { TidemarkError } from '../contracts/errors.js';
import type { TableRef } from '../contracts/source.js';
import type { Clock, CursorStore } from '../contracts/state.js';
import { requireUpsertKey } from '../dataplane/batch.js';
import { findColumn, type Schema } from '../dataplane/schema.js';
import { driver } from '../drivers/registry.js';
import { cdcTableAccepted, cdcTableRefusals } from '../engine/cdc/preconditions.js';
import { NullCursorError } from '../engine/incremental/errors.js';
import { redact } from '../observability/redact.js';
import { openLakeSink } from '../sink/open-lake.js';
import { checkCatalog, checkTableFormats } from './check-iceberg.js';
import { findModeChanges } from './mode-change.js';
import {
  lakeStoreOptions,
  type OpenSources,
  openSources,
  openStateStore,
  type SourceReadSettings,
} from './open.js';

/**
 * The AWS calls the state and lake probes make, for the IAM the deployed function needs:
 * PutItem + DeleteItem on the state table, PutObject + DeleteObject(s) under the lake prefix,
 * all of which a run makes too (test/unit/infra.test.ts checks the stack grants them). The
 * conditional-write probe of a `file` catalog is a PutObject with If-None-Match (no other
 * action); a `glue` catalog's line needs `glue:GetDatabase` on its database, which the stack
 * grants with the catalog's other actions (infra/lake-catalog.ts `GLUE_CATALOG_ACTIONS`).
 */
export const CHECK_AWS_ACTIONS = [
  'dynamodb:PutItem',
  'dynamodb:DeleteItem',
  's3:PutObject',
  's3:DeleteObject',
] as const;

/** What a line is about. CDC preflight adds its checks as more items of `source` and `table`. */
export type CheckScope = 'source' | 'table' | 'state' | 'lake';

/** One line of the report. */
export interface CheckLine extends CheckItem {
  readonly scope: CheckScope;
  /** `sources.<name>`, the spec's `table` (`schema.table`), `state` or `lake`. */
  readonly subject: string;
  /** Table lines: the lake table (tells apart two spec tables reading one source table). */
  readonly target?: string;
}

/** The whole check of a spec. */
export interface CheckReport {
  readonly pipeline: string;
  readonly lines: readonly CheckLine[];
  readonly counts: Readonly<Record<CheckStatus, number>>;
  /** No line failed: a run has what it needs. */
  readonly passed: boolean;
}

export interface CheckOptions {
  /** Only this table (source name or lake target), as `--table`; its source, the state and the lake. */
  readonly table?: string;
  readonly clock?: Clock;
}

/**
 * Checks a spec: each source connects; each table exists with a key, a usable cursor (NULL
 * policy, index, time zone) and the privileges its bound needs; the state store and the lake
 * take a probe write and delete; a table with state records the format `lake.tableFormat` asks
 * for; when a table would be Iceberg, its catalog can commit. Never throws for what it checks (a
 * `fail` line instead); an unknown `table` is a ConfigError.
 */
export async function checkPipeline(spec: Spec, opts: CheckOptions = {}): Promise<CheckReport> {
  const clock = opts.clock ?? Date.now;
  const tables = opts.table ? [findTable(spec, opts.table)] : spec.tables;
  const id = randomUUID();
  const sources = openSources(spec, clock);
  let lines: CheckLine[];
  try {
    const probe = `${spec.pipeline}.${id}`;
    const [sourceLines, stateLine, lakeLine] = await Promise.all([
      checkSources(spec, tables, sources),
      checkState(spec, `check#${spec.pipeline}#${id}`, clock),
      checkLake(spec, probe),
    ]);
    const store = stateLine.status === 'fail' ? undefined : await stateReader(spec, clock);
    const modeLines = store ? await checkModeChanges(spec, tables, store) : [];
    const formats = await checkTableFormats(spec, tables, store);
    const formatLines = formats.items.map(({ table, item }) => ({
      ...item,
      scope: 'table' as const,
      subject: table.table,
      target: tableTarget(table),
    }));
    const catalogLines = formats.iceberg
      ? (await checkCatalog(spec, probe, lakeLine.status !== 'fail')).map((item) => ({
          ...item,
          scope: 'lake' as const,
          subject: 'lake',
        }))
      : [];
    lines = [
      ...sourceLines,
      ...cdcLines(spec, tables),
      ...modeLines,
      ...formatLines,
      stateLine,
      lakeLine,
      ...catalogLines,
    ];
  } finally {
    await sources.close();
  }
  const counts = { ok: 0, warn: 0, fail: 0 };
  for (const l of lines) counts[l.status] += 1;
  return { pipeline: spec.pipeline, lines, counts, passed: counts.fail === 0 };
}

/**
 * A `mode` warn line per cdc table of a source that cannot be opened for a check (a kind without
 * an incremental source): the spec gate let it through (its kind can stream), but the log
 * reader's checks (slot, publication, binlog settings, grants) come with `tidemark cdc`.
 */
function cdcLines(spec: Spec, tables: readonly TableSpecConfig[]): CheckLine[] {
  return tables
    .filter((t) => t.mode === 'cdc' && !checkable(spec, t.source))
    .map((t) => ({
      scope: 'table' as const,
      subject: t.table,
      target: tableTarget(t),
      check: 'mode',
      status: 'warn' as const,
      code: 'CDC_NOT_CHECKED',
      message:
        "mode: cdc; tidemark check does not check cdc tables yet (the log reader's checks arrive with `tidemark cdc`)",
    }));
}

/** The state store for reading, or undefined when it cannot be opened (the state line says why). */
async function stateReader(spec: Spec, clock: Clock): Promise<CursorStore | undefined> {
  try {
    return await openStateStore(spec, { clock, ensureTable: false });
  } catch {
    return undefined;
  }
}

/**
 * A `mode` fail line per table whose stored state is of the other mode (MODE_CHANGED). Reads the
 * state store only; when it cannot be read, the state line says why and no line is added.
 */
async function checkModeChanges(
  spec: Spec,
  tables: readonly TableSpecConfig[],
  store: CursorStore,
): Promise<CheckLine[]> {
  let changes: Awaited<ReturnType<typeof findModeChanges>>;
  try {
    changes = await findModeChanges(spec, store, tables);
  } catch {
    return [];
  }
  return changes.map((e) => {
    const t = tables.find((x) => tableTarget(x) === e.table)!;
    const item = failed('mode', e);
    // The line names the table already.
    const message = item.message.startsWith(`${e.table}: `)
      ? item.message.slice(e.table.length + 2)
      : item.message;
    return { ...item, message, scope: 'table' as const, subject: t.table, target: e.table };
  });
}

/**
 * The read settings a source is opened with for its cdc tables when it has no incremental table
 * (the check reads catalogs only: no bound, so no lag and no activity privilege).
 */
const CDC_CHECK_READ: SourceReadSettings = { lagSeconds: 0, lagOnly: true };

/** The source can be opened for a check (its kind has an incremental source, whose connection the checks use). */
function checkable(spec: Spec, name: string): boolean {
  const kind = spec.sources[name]?.kind;
  if (kind === undefined) return false;
  try {
    return driver(kind).openIncremental !== undefined;
  } catch {
    return false;
  }
}

/**
 * Each source's `connect` line, then its incremental tables' lines, then its change stream's
 * lines and its cdc tables' lines; tables of a source that failed to connect are not checked.
 */
async function checkSources(
  spec: Spec,
  tables: readonly TableSpecConfig[],
  sources: OpenSources,
): Promise<CheckLine[]> {
  const lines: CheckLine[] = [];
  const incremental = tables.filter(isIncremental);
  const cdc = tables.filter(isCdc).filter((t) => checkable(spec, t.source));
  const names = [...new Set([...incremental, ...cdc].map((t) => t.source))];
  for (const name of names) {
    const subject = `sources.${name}`;
    const own = incremental.filter((t) => t.source === name);
    const read = own[0] ?? CDC_CHECK_READ;
    const connect = await withSource(sources, name, read, 'connect', async (src) => {
      if (!src.preflightSource)
        return [fail('connect', `the ${spec.sources[name]?.kind} driver has no preflight check`)];
      return src.preflightSource();
    });
    lines.push(...connect.map((item) => ({ ...item, scope: 'source' as const, subject })));
    if (connect.some((item) => item.status === 'fail')) continue;
    for (const t of own) {
      const items = await withSource(sources, name, t, 'table', (src) => checkTable(t, src));
      const target = tableTarget(t);
      lines.push(...items.map((item) => ({ ...item, scope: 'table' as const, subject: t.table, target })));
    }
    const ownCdc = cdc.filter((t) => t.source === name);
    if (ownCdc.length > 0) lines.push(...(await checkCdcSource(spec, name, ownCdc, read, sources)));
  }
  return lines;
}

/**
 * A source's change-stream lines (the driver's `CdcPreflight`: settings, role, slot,
 * publication; MySQL: binlog settings, server id, grants, retention), then per cdc table its
 * lines (`table`, and `toast` or `key`). A driver without it gets one `cdc` warn line for the source.
 */
async function checkCdcSource(
  spec: Spec,
  name: string,
  tables: readonly CdcTableSpec[],
  read: SourceReadSettings,
  sources: OpenSources,
): Promise<CheckLine[]> {
  const subject = `sources.${name}`;
  const kind = spec.sources[name]?.kind;
  const preflightTables = tables.map((t) => ({
    source: t.table,
    target: tableTarget(t),
    exclude: t.exclude,
    insertOnly: t.insertOnly,
    writeMode: t.writeMode,
  }));
  const sourceItems = await withSource(sources, name, read, 'cdc', async (src) => {
    if (!src.preflightCdcSource) {
      return [
        {
          check: 'cdc',
          status: 'warn' as const,
          code: 'CDC_NOT_CHECKED',
          message: `${tables.length} cdc table(s); the ${kind} driver has no change-stream check yet`,
        },
      ];
    }
    const { slot, publication, serverId, binlogRetentionHours } = cdcSettings(spec, name);
    return src.preflightCdcSource(
      {
        pipeline: spec.pipeline,
        ...(slot ? { slot } : {}),
        ...(publication ? { publication } : {}),
        ...(serverId !== undefined ? { serverId } : {}),
        ...(binlogRetentionHours !== undefined ? { binlogRetentionHours } : {}),
      },
      preflightTables,
    );
  });
  const lines: CheckLine[] = sourceItems.map((item) => ({ ...item, scope: 'source' as const, subject }));
  for (const [i, t] of tables.entries()) {
    const items = await withSource(sources, name, read, 'table', async (src) => {
      const driverLines = src.preflightCdcTable ? await src.preflightCdcTable(preflightTables[i]!) : [];
      const engineLines = await cdcTableLines(t, src);
      // Upsert without a key is the engine's refusal, in the words the start uses: a driver's
      // failed `key` line saying the same (MySQL's CDC_NO_PRIMARY_KEY) gives way to it.
      const upsertRefused = engineLines.some((l) => l.code === 'UPSERT_NO_KEY');
      return [
        ...driverLines.filter((l) => !(upsertRefused && l.check === 'key' && l.status === 'fail')),
        ...engineLines,
      ];
    });
    const target = tableTarget(t);
    lines.push(
      ...items.map((item) => ({
        ...withoutSubject(item, t.table),
        scope: 'table' as const,
        subject: t.table,
        target,
      })),
    );
  }
  return lines;
}

/**
 * The engine's rules for a cdc table (shared/engine/cdc/preconditions.ts): the refusals a CDC
 * start makes before it records anything, in its own words; nothing when the table cannot be
 * read (the driver's `table` line says why).
 */
async function cdcTableLines(t: CdcTableSpec, src: ClosableIncrementalSource): Promise<CheckItem[]> {
  let schema: Schema;
  try {
    ({ schema } = await src.introspect({ source: t.table, target: tableTarget(t), exclude: t.exclude }));
  } catch {
    return [];
  }
  const rules = { target: tableTarget(t), writeMode: t.writeMode, snapshot: t.snapshot };
  const refusals = cdcTableRefusals(rules, schema);
  if (refusals.length === 0) return [passed('writeMode', cdcTableAccepted(rules, schema))];
  return refusals.map((e) => failed(e.code === 'CDC_SNAPSHOT_NO_KEY' ? 'snapshot' : 'writeMode', e));
}

/**
 * Runs `fn` on the source a table reads with. A source that cannot even be opened (bad URL,
 * unreadable secret) is a `connect` failure; anything `fn` throws, a `check` failure: a check
 * reports, it does not stop at the first problem.
 */
async function withSource(
  sources: OpenSources,
  name: string,
  table: SourceReadSettings,
  check: string,
  fn: (src: ClosableIncrementalSource) => Promise<CheckItem[]>,
): Promise<CheckItem[]> {
  let src: ClosableIncrementalSource;
  try {
    src = await sources.source(name, table);
  } catch (e) {
    return [failed('connect', e)];
  }
  try {
    return await fn(src);
  } catch (e) {
    return [failed(check, e)];
  }
}

/** The driver's lines for a table, plus the rules that are the engine's: NULL cursors, upsert key. */
async function checkTable(t: IncrementalTableSpec, src: ClosableIncrementalSource): Promise<CheckItem[]> {
  if (!src.preflightTable) return [fail('table', 'the driver has no preflight check')];
  const pf: TablePreflight = await src.preflightTable({
    source: t.table,
    target: tableTarget(t),
    exclude: t.exclude,
    cursorColumn: t.cursor,
  });
  const items = pf.items.map((item) => withoutSubject(item, t.table));
  if (!pf.resolved) return items;
  const { ref, schema, cursorNotNull } = pf.resolved;
  const extra: CheckItem[] = [];
  if (!findColumn(schema, t.cursor)) {
    extra.push({
      check: 'cursor',
      status: 'fail',
      code: 'CURSOR_COLUMN_MISSING',
      message: `cursor column "${t.cursor}" is excluded from the lake (exclude:); remove it from exclude, the engine needs it`,
    });
  } else {
    extra.push(await nullsLine(t, src, ref, cursorNotNull, findColumn(schema, t.cursor)!.nullable));
  }
  // NULLs belong beside the cursor line; the rest of the driver's lines follow.
  const at = items.findIndex((i) => i.check === 'cursor');
  items.splice(at < 0 ? items.length : at + 1, 0, ...extra.map((item) => withoutSubject(item, t.table)));
  try {
    // Throws the run's own refusal (UPSERT_NO_KEY) when upsert has no key to collapse by.
    requireUpsertKey(tableTarget(t), t.writeMode, schema);
    items.push(
      passed(
        'writeMode',
        t.writeMode === 'upsert'
          ? `upsert: each object keeps the last change per primary key (${schema.primaryKey.join(', ')})`
          : 'append: every row version read is kept',
      ),
    );
  } catch (e) {
    if (!(e instanceof TidemarkError) || e.code !== 'UPSERT_NO_KEY') throw e;
    items.push(failed('writeMode', e));
  }
  return items;
}

/**
 * The NULL-cursor policy: rows whose cursor is NULL (MySQL: or a zero date) are never reached by
 * the keyset, so `nullCursor: refuse` (the default) stops a run that finds any, as this line does.
 */
async function nullsLine(
  t: IncrementalTableSpec,
  src: ClosableIncrementalSource,
  ref: TableRef,
  notNull: boolean,
  readsAsNull: boolean,
): Promise<CheckItem> {
  if (t.nullCursor === 'skip') {
    return passed(
      'nulls',
      notNull && !readsAsNull
        ? `"${t.cursor}" is NOT NULL (nullCursor: skip has nothing to skip)`
        : `rows whose "${t.cursor}" is NULL are left out and never synced (nullCursor: skip)`,
    );
  }
  try {
    const n = src.countNullCursors ? await src.countNullCursors(ref, t.cursor) : 0;
    if (n > 0) return failed('nulls', new NullCursorError(t.table, t.cursor, n));
  } catch (e) {
    return failed('nulls', e);
  }
  if (notNull) {
    return passed(
      'nulls',
      readsAsNull ? `"${t.cursor}" is NOT NULL and holds no zero dates` : `"${t.cursor}" is NOT NULL`,
    );
  }
  return passed(
    'nulls',
    `"${t.cursor}" is nullable but holds no NULL now; a NULL would stop runs (NULL_CURSOR) until backfilled: make it NOT NULL, or set nullCursor: skip`,
  );
}

/**
 * The state store takes a conditional put and delete of a probe item (line `dynamodb`), or a
 * probe state file is written and removed (line `dir`).
 */
async function checkState(spec: Spec, key: string, clock: Clock): Promise<CheckLine> {
  const d = spec.state.dynamodb;
  const line = (item: CheckItem): CheckLine => ({ ...item, scope: 'state', subject: 'state' });
  const check = d ? 'dynamodb' : 'dir';
  const where = d
    ? `table ${d.table}${d.endpoint ? ` at ${redact(d.endpoint)}` : d.region ? ` in ${d.region}` : ''}`
    : `${spec.state.dir}`;
  try {
    const store = await openStateStore(spec, { clock, ensureTable: false });
    await store.probe(key);
    return line(
      passed(
        check,
        d
          ? `${where}: a conditional put and delete of probe item ${key} work`
          : `${where} is writable (a probe state file was written and removed)`,
      ),
    );
  } catch (e) {
    if (d?.endpoint && (e as TidemarkError).code === 'STATE_TABLE_MISSING') {
      // The one thing check leaves to the run: with an endpoint the run creates the table.
      return line({
        check,
        status: 'warn',
        code: 'STATE_TABLE_MISSING',
        message: `${where} does not exist yet; with state.dynamodb.endpoint set the first run creates it (in AWS, cdk deploy does)`,
      });
    }
    // A state dir's errors name the directory already; DynamoDB's do not name the endpoint.
    const item = failed(check, e);
    return line(d ? { ...item, message: `${where}: ${item.message}` } : item);
  }
}

/**
 * The lake store takes a put and a delete of a test object under its prefix (line `s3`, or `dir`
 * for a lake dir). The store alone: its catalog has lines of its own (check-iceberg.ts).
 */
async function checkLake(spec: Spec, id: string): Promise<CheckLine> {
  const line = (item: CheckItem): CheckLine => ({ ...item, scope: 'lake', subject: 'lake' });
  const s3 = spec.lake.uri.startsWith('s3://');
  const check = s3 ? 's3' : 'dir';
  const where = `${spec.lake.uri}${spec.lake.endpoint ? ` at ${redact(spec.lake.endpoint)}` : ''}`;
  try {
    const uri = await openLakeSink(lakeStoreOptions(spec)).probe(id);
    return line(passed(check, `${where} is writable (test object ${uri} was put and deleted)`));
  } catch (e) {
    // Errors name the object, not the endpoint: say where it went.
    const item = failed(check, e);
    return line(spec.lake.endpoint ? { ...item, message: `${where}: ${item.message}` } : item);
  }
}

function fail(check: string, message: string): CheckItem {
  return { check, status: 'fail', message };
}

/** Drops a leading `schema.table: ` from a driver message: the line already names the table. */
function withoutSubject(item: CheckItem, table: string): CheckItem {
  return item.message.startsWith(`${table}: `)
    ? { ...item, message: item.message.slice(table.length + 2) }
    : item;
}
