/**
 * One table the MySQL reader captures: its columns as the binlog's TableMaps describe them, and
 * its rows decoded into its buffer (../../cdc-buffer.ts, shared with the Postgres reader).
 *
 * Owns:
 *   - TableMap events: a changed column list (names and types; binlog_row_metadata=FULL gives
 *     the names) is a `schema` event through compareSchemas, the new schema swapped in once the
 *     old one's rows are cut; columns the table did not have are described by the catalog where
 *     it reads them the same way (`describeNewColumns`);
 *   - rows: the row images themselves (../wire/binlog-rows.ts, zongji handing over the raw row
 *     area) for tables of the types it decodes, zongji's parsed rows through the incremental
 *     driver's read plans (./values.ts) otherwise, with identical values; an update whose
 *     before-image key differs bytewise from its after-image key as a delete plus an insert;
 *   - `next`: rows whose `__pos` is below it are durable already and skipped.
 * The reader owns the transaction a row belongs to (its `__pos` prefix and commit time), passed
 * in per event. Must never: append a row below `next`, or a row of the old schema after a swap.
 */
import type { DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent } from '@vlasky/zongji';
import type { CdcEvent, CdcTable, ReaderLog } from '../../../contracts/cdc.js';
import { SourceError } from '../../../contracts/errors.js';
import { Op, type OpCode } from '../../../dataplane/metadata.js';
import type { Schema } from '../../../dataplane/schema.js';
import { compareSchemas } from '../../../dataplane/schema-rules.js';
import { TableBuffer } from '../../cdc-buffer.js';
import { streamSchema } from '../../cdc-schema.js';
import type { MysqlConnection } from '../connect.js';
import { type ColumnInfo, catalogColumns, type TablePlan } from '../introspect.js';
import { type InfoColumn, mapColumn } from '../types.js';
import {
  compile,
  decodeImage,
  keyDiffers,
  nullBitmapSize,
  RawRows,
  type RowPlan,
  type TableMapEntry,
} from '../wire/binlog-rows.js';
import { type BinlogAppender, binlogAppenderFor, keyBytes } from './values.js';

/** What the reader counts of what it decoded (tests read them as `MysqlCdcReader.seen`). */
export interface MysqlCdcCounters {
  keyChanges: number;
  tableMaps: number;
  skipped: number;
  rawEvents: number;
  zongjiEvents: number;
}

/** A schema change waiting for the old schema's rows to be cut. */
interface MysqlSwap {
  readonly schema: Schema;
  readonly infos: ColumnInfo[];
  readonly all: ColumnInfo[];
}

const SPATIAL =
  /^(geometry|point|linestring|polygon|multipoint|multilinestring|multipolygon|geometrycollection|geomcollection)\b/i;

/** One captured table's state (see the module comment). */
export class MysqlCdcTable extends TableBuffer<MysqlSwap> {
  readonly database: string;
  readonly table: string;
  /** Per schema column: its facts and appender. */
  infos: ColumnInfo[];
  appenders: BinlogAppender[];
  /** Every column of the table as last seen (excluded ones too), for the next TableMap. */
  all: ColumnInfo[];
  /** names + logical types of `all`: what a TableMap is compared with. */
  signature: string;
  /** Rows whose `__pos` is below this are durable already. */
  next = '';
  /** The last TableMap's table id, types, names and metadata, as compared. */
  mapKey = '';
  /** The row-image plan of the last TableMap entry under `infos` (../wire/binlog-rows.ts). */
  rowPlan: { entry: TableMapEntry; infos: ColumnInfo[]; plan: RowPlan | string } | undefined = undefined;
  /**
   * The catalog's description of the columns the next TableMap names for the first time, read
   * just before it is decoded (`describeNewColumns`); empty otherwise.
   */
  described: ReadonlyMap<string, ColumnInfo> = new Map();

  /** `plan`: the table's introspection; `seen`: the reader's counters, shared by its tables. */
  constructor(
    t: CdcTable,
    plan: TablePlan,
    private readonly seen: MysqlCdcCounters,
  ) {
    const names = new Set(t.schema.columns.map((c) => c.name));
    const excluded = new Set(plan.columns.filter((c) => !names.has(c.name)).map((c) => c.name));
    const infos = t.schema.columns.map((c) => plan.columns.find((p) => p.name === c.name)!);
    const spatial = infos.find((c) => SPATIAL.test(c.sourceType));
    if (spatial)
      throw new SourceError(
        'CDC_UNSUPPORTED_TYPE',
        `${t.ref.source}.${spatial.name}: the binlog client decodes spatial values into coordinates without their SRID, so CDC cannot store the bytes the incremental path stores; exclude the column (tables[].exclude) or sync the table incrementally`,
      );
    super(t, excluded);
    const dot = t.ref.source.indexOf('.');
    this.database = t.ref.source.slice(0, dot);
    this.table = t.ref.source.slice(dot + 1);
    this.infos = infos;
    this.appenders = appendersOf(infos, t.ref.source);
    this.all = [...plan.columns];
    this.signature = signatureOf(plan.columns);
  }

  // -------------------------------------------------------------------------------------------
  // Table maps and schemas

  /** A TableMap of this table: a `schema` event when its columns changed the lake schema. */
  onTableMap(ev: TableMapEvent): CdcEvent | undefined {
    // The same table id, types and names as the last TableMap: nothing changed (the common
    // case, one TableMap per transaction), without mapping every column again.
    const key = `${ev.tableId}|${ev.columnTypes.join(',')}|${(ev.columnNames ?? []).join('\u0000')}|${JSON.stringify(ev.columnsMetadata)}`;
    if (key === this.mapKey) return undefined;
    const entry = ev.tableMap[ev.tableId];
    const cols = entry?.columnSchemas;
    if (!ev.hasSelfDescribingMetadata())
      throw new SourceError(
        'CDC_BINLOG_ROW_METADATA',
        `${this.source}: the binlog's TableMap carries no column names (binlog_row_metadata is not FULL), so a row written before an ALTER TABLE would decode under the wrong columns; SET GLOBAL binlog_row_metadata = FULL (and in the server's configuration), then restart the capture`,
      );
    if (!cols || cols.length !== ev.columnCount) return undefined;
    const prior = this.swap?.all ?? this.all;
    const all = cols.map((c): ColumnInfo => {
      const before = prior.find((p) => p.name === c.COLUMN_NAME) ?? this.described.get(c.COLUMN_NAME);
      const info = columnFromMap(c, before);
      return before && sameShape(before, info) ? before : info;
    });
    const signature = signatureOf(all);
    this.mapKey = key;
    if (signature === (this.swap ? signatureOf(this.swap.all) : this.signature)) return undefined;
    const kept = all.filter((c) => !this.excluded.has(c.name));
    const old = this.swap?.schema ?? this.schema;
    const schema = streamSchema(old, kept);
    this.signature = signature;
    const changes = compareSchemas(old, schema);
    // No change the rules see (the hash would not tell a source-type change, which they do).
    if (changes.length === 0) {
      // Same lake schema (a source-type-only change or a column left out): new facts, same encoder.
      this.all = all;
      if (!this.swap) {
        this.infos = this.schema.columns.map(
          (c) => kept.find((k) => k.name === c.name) ?? this.infos.find((i) => i.name === c.name)!,
        );
        this.appenders = appendersOf(this.infos, this.source);
      }
      return undefined;
    }
    this.swap = { schema, infos: kept, all };
    if (this.encoder.rowCount === 0) this.applySwap();
    return { kind: 'schema', table: this.target, schema, changes };
  }

  /**
   * A TableMap naming columns the table did not have: their description is the catalog's, read
   * now, wherever it reads the same way as the binlog's (`sameShape`; onTableMap decides). The
   * binlog's own says less than the catalog: `int` for `int(11)`, `longtext` for MariaDB's
   * `json`, fixed `binary(16)` for `uuid`; a column described from it would not be the column
   * the next start introspects (another source type, for UUID/INET another lake type), and its
   * schema hash would not match. The catalog may have moved on since this point of the log: a
   * column it no longer has, or has with another shape, keeps the binlog's description.
   * `catalog` opens (once) the connection the catalog is read through.
   */
  async describeNewColumns(
    ev: TableMapEvent,
    catalog: () => MysqlConnection,
    log: ReaderLog | undefined,
  ): Promise<void> {
    const prior = this.swap?.all ?? this.all;
    const names = ev.columnNames ?? [];
    // The common case, one TableMap per transaction naming the same columns: no set, no query.
    if (names.length === prior.length && names.every((n, i) => prior[i]!.name === n)) {
      if (this.described.size > 0) this.described = new Map();
      return;
    }
    const known = new Set(prior.map((c) => c.name));
    const fresh = new Set(names.filter((n) => !known.has(n)));
    this.described = new Map();
    if (fresh.size === 0) return;
    try {
      const columns = await catalogColumns(catalog(), this.source);
      this.described = new Map(columns.filter((c) => fresh.has(c.name)).map((c) => [c.name, c]));
    } catch (e) {
      log?.warn(
        `${this.source}: reading the catalog's description of new columns failed; the binlog's is used`,
        {
          error: e instanceof Error ? e.message : String(e),
          columns: [...fresh],
        },
      );
    }
  }

  /** Switches to a pending schema once the old one's rows are cut (TableBuffer.switchSchema). */
  applySwap(): void {
    const swap = this.switchSchema();
    if (!swap) return;
    this.infos = swap.infos;
    this.all = swap.all;
    this.signature = signatureOf(swap.all);
    this.appenders = appendersOf(swap.infos, this.source);
  }

  // -------------------------------------------------------------------------------------------
  // Rows

  /**
   * Appends the rows of one WriteRows/UpdateRows/DeleteRows event of the open transaction
   * (`prefix`: its `__pos` prefix, `commitNs`: its commit time); returns how many were appended
   * (rows below `next` are skipped).
   */
  append(ev: WriteRowsEvent | UpdateRowsEvent | DeleteRowsEvent, prefix: string, commitNs: bigint): number {
    let count = 0;
    const name: string = ev.getTypeName();
    let rows: unknown[] = ev.rows;
    const raw = rows.length === 1 ? rows[0] : undefined;
    if (raw instanceof RawRows) {
      const plan = this.planFor(raw.entry);
      if (typeof plan !== 'string') {
        this.seen.rawEvents++;
        count = this.emitRaw(name, raw, plan, prefix, commitNs);
        rows = [];
      } else rows = raw.reparse();
    }
    if (rows.length > 0) this.seen.zongjiEvents++;
    if (name === 'WriteRows') {
      for (const row of rows as Record<string, unknown>[])
        count += this.emit(Op.create, row, prefix, commitNs);
    } else if (name === 'DeleteRows') {
      for (const row of rows as Record<string, unknown>[])
        count += this.emit(Op.delete, row, prefix, commitNs);
    } else {
      for (const { before: old, after } of rows as UpdateRowsEvent['rows']) {
        if (keyChanged(this, old, after)) {
          this.seen.keyChanges++;
          count += this.emit(Op.delete, old, prefix, commitNs);
          count += this.emit(Op.create, after, prefix, commitNs);
        } else count += this.emit(Op.update, after, prefix, commitNs);
      }
    }
    return count;
  }

  /** The row-image plan of `entry` under the table's current columns (a string: not decodable). */
  planFor(entry: TableMapEntry): RowPlan | string {
    const c = this.rowPlan;
    if (c !== undefined && c.entry === entry && c.infos === this.infos) return c.plan;
    const plan = compile(entry, this.infos, this.appenders, this.schema.primaryKey);
    this.rowPlan = { entry, infos: this.infos, plan };
    return plan;
  }

  /** Whether ordinal `o` of the transaction `prefix` is at or past `next` (else counted skipped). */
  private admit(prefix: string, o: number): boolean {
    // `next` below the transaction's prefix: every ordinal of it is past `next`.
    if (this.next < prefix) return true;
    if (prefix + o.toString(16).padStart(8, '0') < this.next) {
      this.seen.skipped++;
      return false;
    }
    return true;
  }

  /** The rows of a raw rows event, decoded straight into the writers (as `emit` would). */
  private emitRaw(name: string, raw: RawRows, plan: RowPlan, prefix: string, commit: bigint): number {
    const { buf, end, bitmap } = raw;
    const nb1 = nullBitmapSize(bitmap);
    const writers = this.writers;
    const enc = this.encoder;
    let off = raw.start;
    let count = 0;
    let last = -1;
    const one = (op: OpCode, at: number, bm: Buffer, nb: number): void => {
      const o = this.ord++;
      if (!this.admit(prefix, o)) return;
      decodeImage(plan, buf, at, bm, nb, writers, undefined, this.source);
      enc.appendMetaOrdinal(op, prefix, o, commit, false);
      last = o;
      count++;
    };
    if (name !== 'UpdateRows') {
      const op = name === 'WriteRows' ? Op.create : Op.delete;
      while (off < end) {
        const o = this.ord;
        if (this.next >= prefix && !this.admit(prefix, o)) {
          this.ord++;
          off = decodeImage(plan, buf, off, bitmap, nb1, undefined);
          continue;
        }
        this.ord++;
        off = decodeImage(plan, buf, off, bitmap, nb1, writers, undefined, this.source);
        enc.appendMetaOrdinal(op, prefix, o, commit, false);
        last = o;
        count++;
      }
    } else {
      const bitmap2 = raw.bitmap2!;
      const nb2 = nullBitmapSize(bitmap2);
      const n = plan.cols.length * 2;
      const sa = new Int32Array(n);
      const sb = new Int32Array(n);
      while (off < end) {
        const after = decodeImage(plan, buf, off, bitmap, nb1, undefined, sa);
        const next = decodeImage(plan, buf, after, bitmap2, nb2, undefined, sb);
        if (keyDiffers(plan, buf, sa, sb)) {
          this.seen.keyChanges++;
          one(Op.delete, off, bitmap, nb1);
          one(Op.create, after, bitmap2, nb2);
        } else one(Op.update, after, bitmap2, nb2);
        off = next;
      }
    }
    if (last >= 0) {
      this.lastPrefix = prefix;
      this.lastOrd = last;
    }
    return count;
  }

  /** Appends one row; 0 when it is below `next`. */
  private emit(op: OpCode, row: Record<string, unknown>, prefix: string, commitNs: bigint): number {
    const o = this.ord++;
    const pos = prefix + o.toString(16).padStart(8, '0');
    if (pos < this.next) {
      this.seen.skipped++;
      return 0;
    }
    this.lastPrefix = prefix;
    this.lastOrd = o;
    const cols = this.schema.columns;
    for (let j = 0; j < cols.length; j++) {
      const c = cols[j]!.name;
      const v = row[c];
      const w = this.writers[j]!;
      if (v === null || (v === undefined && !(c in row))) w.appendNull();
      else this.appenders[j]!(w, v);
    }
    this.encoder.appendMetaOrdinal(op, prefix, o, commitNs, false);
    return 1;
  }
}

/** A column as a FULL-metadata TableMap describes it, mapped like introspection would. */
function columnFromMap(
  c: { COLUMN_NAME: string; COLUMN_TYPE: string; CHARACTER_SET_NAME: string | null },
  before: ColumnInfo | undefined,
): ColumnInfo {
  const columnType = c.COLUMN_TYPE;
  const dataType = columnType.toLowerCase().split(/[\s(]/)[0] ?? '';
  const dec = /^decimal\((\d+),(\d+)\)/i.exec(columnType);
  const jsonAlias = before?.sourceType === 'json' && dataType === 'longtext';
  const info: InfoColumn = {
    name: c.COLUMN_NAME,
    dataType,
    columnType,
    nullable: true,
    numericPrecision: dec ? Number(dec[1]) : null,
    numericScale: dec ? Number(dec[2]) : null,
    charset: c.CHARACTER_SET_NAME,
    jsonAlias,
  };
  const m = mapColumn(info, c.COLUMN_NAME);
  return {
    name: c.COLUMN_NAME,
    notNull: false,
    sourceType: m.sourceType,
    read: m.read,
    nullable: m.nullable,
  };
}

/** Whether two descriptions of a column read the same way (the binlog omits some details). */
function sameShape(a: ColumnInfo, b: ColumnInfo): boolean {
  if (JSON.stringify(a.read.logical) === JSON.stringify(b.read.logical) && a.read.kind === b.read.kind)
    return true;
  // MariaDB's UUID/INET4/INET6 are fixed binary in the binlog's metadata.
  return /^(uuid|inet4|inet6)$/i.test(a.sourceType) && b.read.kind === 'binary';
}

function signatureOf(cols: readonly ColumnInfo[]): string {
  return JSON.stringify(cols.map((c) => [c.name, c.read.kind, c.read.logical]));
}

function appendersOf(infos: readonly ColumnInfo[], source: string): BinlogAppender[] {
  return infos.map((info) => binlogAppenderFor(info, { table: source, column: info.name }));
}

function keyChanged(t: MysqlCdcTable, old: Record<string, unknown>, nu: Record<string, unknown>): boolean {
  for (const k of t.schema.primaryKey) {
    const a = keyBytes(old[k]);
    const b = keyBytes(nu[k]);
    if (a === null || b === null) {
      if (a !== b) return true;
      continue;
    }
    if (!a.equals(b)) return true;
  }
  return false;
}
