/**
 * The wire encoder: turns source values into one Arrow `RecordBatch` in a table's wire schema
 * (`wire.ts`: data columns, then the six metadata columns), exactly and fast.
 *
 * Owns: the batch (one `ColumnWriter` per data column plus the metadata tail) and the two ways
 * in: the row-map path (`appendRow`, `encodeRows`: the value universe of schema.ts) and the
 * columnar path (a binary decoder calling `col(i)`'s raw appenders with wire bytes, no per-row
 * objects). Both write the same buffers through the same code, so equal rows give byte-identical
 * batches. apache-arrow's builders are not used: their timestamp builders take epoch milliseconds
 * as JS numbers and throw on a BigInt, so microseconds would pass through float math (checked
 * with apache-arrow 21.2.0 on 2026-12-01).
 *
 * Must never: round or truncate a value (a value a column cannot hold is a `DataError`), or
 * know any database client.
 */
import { type Schema as ArrowSchema, type Data, type DataType, RecordBatch, Struct } from 'apache-arrow';
import { DataError } from '../contracts/errors.js';
import { MAX_ORDINAL } from '../position/position.js';
import { BatchError } from './batch.js';
import { arrowData, ColumnWriter } from './column-writer.js';
import { type OpCode, PHASES, type Phase } from './metadata.js';
import { checkOrdinal, consecutivePositions } from './positions.js';
import type { LogicalType, Schema } from './schema.js';
import { wireSchema } from './wire.js';

export { ColumnWriter } from './column-writer.js';

const DEFAULT_CAPACITY = 1024;
const MIN_INT64 = -(2n ** 63n);
const MAX_INT64 = 2n ** 63n - 1n;

/** Options of a `BatchEncoder`. */
export interface BatchEncoderOptions {
  /** `__phase` of every row this encoder writes. */
  readonly phase: Phase;
  /** Rows to allocate for up front (buffers grow by doubling past it). Default 1024. */
  readonly capacity?: number;
}

/**
 * Encodes rows of one table into wire-schema `RecordBatch`es. Append each row's data values
 * (through `col(i)` or `appendValue`/`appendRow`) and its metadata (`appendMeta` or
 * `appendMetaOrdinal`), then `finish`. The encoder is reusable: `finish` hands its buffers to
 * the batch and starts empty ones sized for the batch just built.
 *
 * After a `DataError` the current batch is incomplete: call `reset()` (or drop the encoder).
 *
 * @example Columnar path (a binary decoder):
 * ```ts
 * const enc = new BatchEncoder(schema, { phase: 'incremental' });
 * const id = enc.col(0), price = enc.col(1), name = enc.col(2);
 * // per row:
 * id.appendInt64BE(buf, off); price.appendNumericBinary(buf, off2); name.appendUtf8Bytes(buf, s, e);
 * enc.appendMetaOrdinal(Op.update, prefix, ordinal, null, false);
 * const batch = enc.finish(ingestTsNanos);
 * ```
 */
export class BatchEncoder {
  readonly schema: Schema;
  /** The wire schema of the batches this encoder builds. */
  readonly wire: ArrowSchema;
  readonly phase: Phase;
  private readonly names: string[];
  private writers: ColumnWriter[] = [];
  private pos!: PosRun;
  private op!: MetaRun<OpCode>;
  private commitTs!: MetaRun<bigint | null>;
  private snapshot!: MetaRun<boolean>;
  private rows = 0;

  constructor(schema: Schema, options: BatchEncoderOptions) {
    this.schema = schema;
    this.wire = wireSchema(schema);
    if (!PHASES.includes(options.phase)) {
      throw new BatchError(`phase ${JSON.stringify(options.phase)} is not one of ${PHASES.join(', ')}`);
    }
    this.phase = options.phase;
    this.names = schema.columns.map((c) => c.name);
    this.allocate(options.capacity ?? DEFAULT_CAPACITY);
  }

  private allocate(capacity: number): void {
    const fields = this.wire.fields;
    this.writers = this.schema.columns.map(
      (c, i) => new ColumnWriter(c.name, c.type, c.nullable, fields[i]!.type, capacity),
    );
    const meta = this.schema.columns.length;
    const t = (k: number) => fields[meta + k]!.type;
    this.pos = new PosRun(new ColumnWriter('__pos', 'utf8', false, t(1), capacity));
    // Op, commit time and snapshot flag rarely change within a batch: each is kept as one value
    // until a row differs, and only then written per row (MetaRun).
    this.op = new MetaRun(new ColumnWriter('__op', 'op', false, t(0), capacity), (w, v) => w.appendInt(v));
    this.commitTs = new MetaRun(
      new ColumnWriter('__commit_ts', 'timestamp_ns', true, t(2), capacity),
      (w, v) => (v === null ? w.appendNull() : w.appendBigInt(v)),
    );
    this.snapshot = new MetaRun(new ColumnWriter('__snapshot', 'bool', false, t(4), capacity), (w, v) =>
      w.appendBool(v),
    );
    this.rows = 0;
  }

  /** Rows whose metadata has been appended since the last `finish`. */
  get rowCount(): number {
    return this.rows;
  }

  /**
   * Bytes of the data columns appended since the last `finish` (`ColumnWriter.byteLength`):
   * what the page byte budget counts. The row path's twin is `rowBytes`; equal rows give equal counts.
   */
  get dataBytes(): number {
    let n = 0;
    const writers = this.writers;
    for (let i = 0; i < writers.length; i++) n += writers[i]!.byteLength;
    return n;
  }

  /** The writer of data column `i` (schema order). Resolve it again after `finish`/`reset`. */
  col(i: number): ColumnWriter {
    const w = this.writers[i];
    if (w === undefined) throw new RangeError(`column index ${i} outside 0..${this.writers.length - 1}`);
    return w;
  }

  /** Appends one value-universe value to data column `i`. */
  appendValue(i: number, v: unknown): void {
    this.col(i).appendValue(v);
  }

  /**
   * Appends every data column of a row map (keys are column names; SQL NULL is `null`; a
   * missing key is a `DataError`). Metadata is appended separately.
   */
  appendRow(row: Readonly<Record<string, unknown>>): void {
    const writers = this.writers;
    const names = this.names;
    for (let i = 0; i < writers.length; i++) writers[i]!.appendValue(row[names[i]!]);
  }

  /** Appends the per-row metadata: `__op`, `__pos`, `__commit_ts` (ns since epoch or null), `__snapshot`. */
  appendMeta(op: OpCode, pos: string, commitTsNanos: bigint | null, snapshot: boolean): void {
    checkMeta(op, commitTsNanos);
    this.pos.pushText(pos);
    this.appendMetaTail(op, commitTsNanos, snapshot);
  }

  /**
   * Like `appendMeta` with `__pos = posPrefix + ordinalHex(ordinal)` (position.ts), written
   * straight into the buffer without building the string.
   */
  appendMetaOrdinal(
    op: OpCode,
    posPrefix: string,
    ordinal: number,
    commitTsNanos: bigint | null,
    snapshot: boolean,
  ): void {
    checkMeta(op, commitTsNanos);
    this.pos.pushOrdinal(posPrefix, ordinal);
    this.appendMetaTail(op, commitTsNanos, snapshot);
  }

  /** Adds the rest of a row's metadata once its values are checked and `__pos` is written: cannot fail. */
  private appendMetaTail(op: OpCode, commitTsNanos: bigint | null, snapshot: boolean): void {
    const rows = this.rows;
    this.op.push(op, rows);
    this.commitTs.push(commitTsNanos, rows);
    this.snapshot.push(snapshot, rows);
    this.rows = rows + 1;
  }

  /** Drops everything appended since the last `finish` (e.g. after a `DataError`). */
  reset(): void {
    this.allocate(Math.max(this.rows, DEFAULT_CAPACITY));
  }

  /**
   * Builds the batch of the rows appended so far, `__ingest_ts` = `ingestTsNanos` (ns since the
   * epoch) and `__phase` = this encoder's phase on every row, then starts an empty batch.
   * Throws a `BatchError` if a data column does not hold exactly one value per row.
   */
  finish(ingestTsNanos: bigint): RecordBatch {
    const n = this.rows;
    for (const w of this.writers) {
      if (w.length !== n || w.isOpen) {
        throw new BatchError(
          `column "${w.name}" holds ${w.length} values for ${n} rows: a row was appended incompletely; ` +
            `every row needs one value per column and one appendMeta call`,
        );
      }
    }
    if (typeof ingestTsNanos !== 'bigint' || ingestTsNanos < MIN_INT64 || ingestTsNanos > MAX_INT64) {
      throw new BatchError(
        `__ingest_ts ${String(ingestTsNanos)} is not a bigint of nanoseconds in the int64 range`,
      );
    }
    const fields = this.wire.fields;
    const meta = this.schema.columns.length;
    const t = (k: number) => fields[meta + k]!.type;
    const children: Data[] = this.writers.map((w) => w.toData());
    children.push(
      this.op.toData((v) =>
        arrowData({ type: t(0), length: n, nullCount: 0, data: new Uint8Array(n).fill(v) }),
      ),
      this.pos.toData(t(1)),
      this.commitTs.toData((v) =>
        v === null
          ? arrowData({
              type: t(2),
              length: n,
              nullCount: n,
              nullBitmap: new Uint8Array((n + 7) >> 3),
              data: new BigInt64Array(n),
            })
          : arrowData({ type: t(2), length: n, nullCount: 0, data: new BigInt64Array(n).fill(v) }),
      ),
      arrowData({ type: t(3), length: n, nullCount: 0, data: new BigInt64Array(n).fill(ingestTsNanos) }),
      this.snapshot.toData((v) =>
        arrowData({ type: t(4), length: n, nullCount: 0, data: constantBits(v, n) }),
      ),
      constantUtf8(t(5), this.phase, n),
    );
    const record = arrowData({ type: new Struct(fields), length: n, nullCount: 0, children });
    const batch = new RecordBatch(this.wire, record as Data<Struct>);
    this.allocate(Math.max(n, 8));
    return batch;
  }
}

/** Refuses metadata a row cannot carry, before anything of the row's metadata is written. */
function checkMeta(op: OpCode, commitTsNanos: bigint | null): void {
  if (op !== 0 && op !== 1 && op !== 2) {
    throw new DataError(
      `__op ${String(op)} is not an op code (0 = c, 1 = u, 2 = d); the source emitted an unknown change kind`,
    );
  }
  if (commitTsNanos !== null && !(commitTsNanos >= MIN_INT64 && commitTsNanos <= MAX_INT64)) {
    throw new DataError(
      `__commit_ts ${String(commitTsNanos)} is not a bigint of nanoseconds in the int64 range (years 1677..2262)`,
    );
  }
}

/**
 * A metadata column that is usually constant within a batch (op, commit time, snapshot flag):
 * held as one value until a row brings another, then written per row from there on. Both ways
 * give the same bytes; the constant way costs one comparison per row.
 */
class MetaRun<T> {
  private value: T | undefined = undefined;
  private started = false;
  private mixed = false;
  constructor(
    private readonly writer: ColumnWriter,
    private readonly write: (w: ColumnWriter, v: T) => void,
  ) {}

  /** Adds row `rows` (the count of rows before it) with value `v`. */
  push(v: T, rows: number): void {
    if (this.mixed) {
      this.write(this.writer, v);
    } else if (!this.started) {
      this.started = true;
      this.value = v;
      // Validate the value once through the writer (range, null policy); discarded if constant.
      this.write(this.writer, v);
    } else if (v !== this.value) {
      for (let r = 1; r < rows; r++) this.write(this.writer, this.value as T);
      this.mixed = true;
      this.write(this.writer, v);
    }
  }

  /** The column so far; `constant` builds it when every row had the same value. */
  toData(constant: (v: T) => Data): Data {
    return this.mixed || !this.started ? this.writer.toData() : constant(this.value as T);
  }
}

/**
 * The `__pos` column. A page's rows usually carry one prefix and consecutive ordinals: while they
 * do, only the first ordinal and the count are kept, and `toData` builds the column in one pass
 * (`consecutivePositions`). The first row that breaks the run writes the run's positions into the
 * writer, and every row from there on goes there too. Both ways give the same bytes.
 */
class PosRun {
  private prefix = '';
  private base = 0;
  private count = 0;
  private mixed = false;
  constructor(private readonly writer: ColumnWriter) {}

  /** Adds `prefix + ordinalHex(ordinal)`; a value that is not an ordinal is ordinalHex's DataError. */
  pushOrdinal(prefix: string, ordinal: number): void {
    if (!this.mixed) {
      if (this.count === 0) {
        checkOrdinal(ordinal);
        this.prefix = prefix;
        this.base = ordinal;
        this.count = 1;
        return;
      }
      if (ordinal === this.base + this.count && prefix === this.prefix && ordinal <= MAX_ORDINAL) {
        this.count++;
        return;
      }
      this.spill();
    }
    this.writer.appendPrefixedOrdinal(prefix, ordinal);
  }

  /** Adds the position `pos` as it is. */
  pushText(pos: string): void {
    if (!this.mixed) this.spill();
    this.writer.appendText(pos);
  }

  /** Writes the run so far into the writer, which takes every later row. */
  private spill(): void {
    for (let k = 0; k < this.count; k++) this.writer.appendPrefixedOrdinal(this.prefix, this.base + k);
    this.mixed = true;
  }

  /** The column so far (`type`: its utf8 wire type). */
  toData(type: DataType): Data {
    if (this.mixed) return this.writer.toData();
    const { offsets, values } = consecutivePositions(Buffer.from(this.prefix, 'utf8'), this.base, this.count);
    return arrowData({ type, length: this.count, nullCount: 0, valueOffsets: offsets, data: values });
  }
}

/** A bool bitmap of `n` bits all equal to `v` (bits past `n` stay zero, as the per-row path leaves them). */
function constantBits(v: boolean, n: number): Uint8Array {
  const bits = new Uint8Array((n + 7) >> 3);
  if (v) {
    bits.fill(0xff);
    if ((n & 7) !== 0) bits[bits.length - 1] = (1 << (n & 7)) - 1;
  }
  return bits;
}

/** A utf8 column holding the same string on each of `n` rows. */
function constantUtf8(type: DataType, value: string, n: number): Data {
  const bytes = Buffer.from(value, 'utf8');
  const w = bytes.length;
  const offsets = new Int32Array(n + 1);
  for (let i = 1; i <= n; i++) offsets[i] = i * w;
  const data = new Uint8Array(n * w);
  if (w > 0 && n > 0) {
    data.set(bytes);
    // Doubling copies: log2(n) calls instead of n.
    for (let filled = w; filled < data.length; filled *= 2)
      data.copyWithin(filled, 0, Math.min(filled, data.length - filled));
  }
  return arrowData({ type, length: n, nullCount: 0, valueOffsets: offsets, data });
}

/** Bytes of one fixed-width value of the page byte budget's count (`ColumnWriter.byteLength`). */
const FIXED_BYTES: Readonly<Record<string, number>> = {
  bool: 1,
  int8: 1,
  int16: 2,
  int32: 4,
  date: 4,
  int64: 8,
  timestamp: 8,
  float64: 8,
  decimal: 16,
};
const OFFSET_BYTES = 4;

/**
 * The bytes one value of the row-map universe (schema.ts) adds to a column of type `t`, as
 * `ColumnWriter.byteLength` counts them: the fixed width (a null too), or a 4-byte offset plus
 * the UTF-8/binary bytes (lists: plus their elements).
 */
export function valueBytes(t: LogicalType, v: unknown): number {
  switch (t.kind) {
    case 'text':
      return OFFSET_BYTES + (typeof v === 'string' ? Buffer.byteLength(v, 'utf8') : 0);
    case 'binary':
      return OFFSET_BYTES + (v instanceof Uint8Array ? v.length : 0);
    case 'list': {
      let n = OFFSET_BYTES;
      if (Array.isArray(v)) for (const e of v) n += valueBytes(t.element, e);
      return n;
    }
    default:
      return FIXED_BYTES[t.kind]!;
  }
}

/** The bytes a row map adds to a batch of `schema` (the row path's `BatchEncoder.dataBytes`). */
export function rowBytes(schema: Schema, row: Readonly<Record<string, unknown>>): number {
  let n = 0;
  for (const c of schema.columns) n += valueBytes(c.type, row[c.name] ?? null);
  return n;
}

/** The metadata of a page of row maps: every row gets the same op, phase, commit time and snapshot flag. */
export interface RowsMeta {
  /** `__pos` of row i is `posPrefix + ordinalHex(ordinalBase + i)`. */
  readonly posPrefix: string;
  readonly ordinalBase: number;
  readonly op: OpCode;
  readonly phase: Phase;
  /** `__ingest_ts`, nanoseconds since the epoch. */
  readonly ingestTsNanos: bigint;
  /** `__commit_ts`, nanoseconds since the epoch; null/absent where the source does not know it. */
  readonly commitTsNanos?: bigint | null;
  readonly snapshot: boolean;
}

/**
 * Encodes row maps (the value universe of schema.ts) into one wire-schema batch. Built on
 * `BatchEncoder`, so the same rows appended through raw appenders give identical bytes.
 */
export function encodeRows(
  schema: Schema,
  rows: readonly Readonly<Record<string, unknown>>[],
  meta: RowsMeta,
): RecordBatch {
  const enc = new BatchEncoder(schema, { phase: meta.phase, capacity: rows.length });
  const commitTs = meta.commitTsNanos ?? null;
  for (let r = 0; r < rows.length; r++) {
    enc.appendRow(rows[r]!);
    enc.appendMetaOrdinal(meta.op, meta.posPrefix, meta.ordinalBase + r, commitTs, meta.snapshot);
  }
  return enc.finish(meta.ingestTsNanos);
}
