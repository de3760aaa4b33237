/**
 * Encoder throughput: 1M rows x (int64, timestamptz, numeric(12,2), text ~20 chars, bool,
 * float64, int32 with 10% nulls) into one wire-schema RecordBatch, three ways:
 *
 *   rows     encodeRows over row maps (the IncrementalSource path)
 *   typed    BatchEncoder typed appenders over JS column arrays
 *   copy     BatchEncoder raw appenders decoding a Postgres COPY-binary-shaped buffer
 *            (big-endian, int32 length per field) with no per-row objects: the columnar path
 *
 * against a baseline measured in the same run: apache-arrow's `vectorFromArray` over the same
 * column arrays (timestamps as lossy ms numbers and numeric as Utf8, since its builders cannot
 * carry exact micros or decimal text; no metadata columns), which does less work than we do.
 *
 * Run: npx tsx bench/encoder.ts [rows]
 */
import {
  Schema as ArrowSchema,
  Bool,
  type Data,
  Field,
  Float64,
  Int32,
  Int64,
  makeData,
  RecordBatch,
  Struct,
  TimestampMillisecond,
  Utf8,
  vectorFromArray,
} from 'apache-arrow';
import { BatchEncoder, encodeRows } from '../shared/dataplane/encoder.js';
import type { Schema } from '../shared/dataplane/schema.js';

const N = Number(process.argv[2] ?? 1_000_000);
const RUNS = 3;
const PREFIX = 'i00000000002a';
const INGEST = 1_700_000_000_000_000_000n;
const PG_EPOCH_MICROS = 946_684_800_000_000;

const schema: Schema = {
  primaryKey: ['id'],
  columns: [
    { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
    {
      name: 'updated_at',
      type: { kind: 'timestamp', utc: true },
      nullable: false,
      sourceType: 'timestamptz',
    },
    {
      name: 'price',
      type: { kind: 'decimal', precision: 12, scale: 2 },
      nullable: false,
      sourceType: 'numeric(12,2)',
    },
    { name: 'name', type: { kind: 'text' }, nullable: false, sourceType: 'text' },
    { name: 'active', type: { kind: 'bool' }, nullable: false, sourceType: 'boolean' },
    { name: 'score', type: { kind: 'float64' }, nullable: false, sourceType: 'double precision' },
    { name: 'qty', type: { kind: 'int32' }, nullable: true, sourceType: 'integer' },
  ],
};

// ---- data (not timed) ----
let seed = 42;
function rand(): number {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed / 0x7fffffff;
}
const ids: bigint[] = [];
const micros: bigint[] = [];
const millis: number[] = [];
const prices: string[] = [];
const names: string[] = [];
const actives: boolean[] = [];
const scores: number[] = [];
const qtys: (number | null)[] = [];
for (let i = 0; i < N; i++) {
  ids.push(BigInt(i) + 9_000_000_000n);
  const us = 1_600_000_000_000_000 + Math.floor(rand() * 1e14);
  micros.push(BigInt(us));
  millis.push(Math.floor(us / 1000));
  prices.push((Math.floor(rand() * 1e9) / 100).toFixed(2));
  // Through a Buffer so the string is flat, as strings decoded from a driver's wire bytes are
  // (a template/padEnd result is a rope that the first charCodeAt would flatten inside the timing).
  names.push(Buffer.from(`customer-${Math.floor(rand() * 1e10)}`.padEnd(20, 'x')).toString());
  actives.push(rand() < 0.5);
  scores.push(rand() * 1000);
  qtys.push(rand() < 0.1 ? null : Math.floor(rand() * 1e6));
}
const rows = Array.from({ length: N }, (_, i) => ({
  id: ids[i],
  updated_at: micros[i],
  price: prices[i],
  name: names[i],
  active: actives[i],
  score: scores[i],
  qty: qtys[i],
}));

/** Postgres binary NUMERIC of a 2-decimal text, as COPY sends it. */
function pgNumeric(text: string): Uint8Array {
  const [int, frac = ''] = text.split('.');
  const i = int!.padStart(Math.ceil(int!.length / 4) * 4, '0');
  const f = frac.padEnd(4, '0');
  let groups = (i + f).match(/\d{4}/g)!.map(Number);
  let weight = i.length / 4 - 1;
  while (groups.length > 0 && groups[0] === 0) {
    groups = groups.slice(1);
    weight--;
  }
  while (groups.length > 0 && groups[groups.length - 1] === 0) groups = groups.slice(0, -1);
  const b = Buffer.alloc(8 + 2 * groups.length);
  b.writeInt16BE(groups.length, 0);
  b.writeInt16BE(groups.length === 0 ? 0 : weight, 2);
  b.writeUInt16BE(0, 4);
  b.writeUInt16BE(2, 6);
  groups.forEach((g, k) => {
    b.writeUInt16BE(g, 8 + 2 * k);
  });
  return b;
}

// A COPY-binary-shaped body: per row int16 field count, per field int32 length (-1 = NULL) + bytes.
const copyParts: Buffer[] = [];
for (let r = 0; r < N; r++) {
  const fields: (Uint8Array | null)[] = [];
  const id = Buffer.alloc(8);
  id.writeBigInt64BE(ids[r]!);
  const ts = Buffer.alloc(8);
  ts.writeBigInt64BE(micros[r]! - BigInt(PG_EPOCH_MICROS));
  const sc = Buffer.alloc(8);
  sc.writeDoubleBE(scores[r]!);
  const q = qtys[r];
  let qb: Buffer | null = null;
  if (q !== null && q !== undefined) {
    qb = Buffer.alloc(4);
    qb.writeInt32BE(q);
  }
  fields.push(
    id,
    ts,
    pgNumeric(prices[r]!),
    Buffer.from(names[r]!),
    Buffer.from([actives[r] ? 1 : 0]),
    sc,
    qb,
  );
  const head = Buffer.alloc(2);
  head.writeInt16BE(fields.length);
  copyParts.push(head);
  for (const f of fields) {
    const len = Buffer.alloc(4);
    len.writeInt32BE(f === null ? -1 : f.length);
    copyParts.push(len);
    if (f !== null) copyParts.push(Buffer.from(f));
  }
}
const copyBody = Buffer.concat(copyParts);
copyParts.length = 0;

// ---- the four ways ----

function viaRows(): RecordBatch {
  return encodeRows(schema, rows, {
    posPrefix: PREFIX,
    ordinalBase: 0,
    op: 1,
    phase: 'incremental',
    ingestTsNanos: INGEST,
    snapshot: false,
  });
}

function viaTyped(): RecordBatch {
  const enc = new BatchEncoder(schema, { phase: 'incremental', capacity: N });
  const [id, ts, price, name, active, score, qty] = [0, 1, 2, 3, 4, 5, 6].map((i) => enc.col(i));
  for (let r = 0; r < N; r++) {
    id!.appendBigInt(ids[r]!);
    ts!.appendMicros(micros[r]!);
    price!.appendDecimalText(prices[r]!);
    name!.appendText(names[r]!);
    active!.appendBool(actives[r]!);
    score!.appendFloat64(scores[r]!);
    const q = qtys[r]!;
    if (q === null) qty!.appendNull();
    else qty!.appendInt(q);
    enc.appendMetaOrdinal(1, PREFIX, r, null, false);
  }
  return enc.finish(INGEST);
}

function viaCopy(): RecordBatch {
  const enc = new BatchEncoder(schema, { phase: 'incremental', capacity: N });
  const w = [0, 1, 2, 3, 4, 5, 6].map((i) => enc.col(i));
  const [id, ts, price, name, active, score, qty] = w;
  const buf = copyBody;
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let off = 0;
  for (let r = 0; r < N; r++) {
    off += 2; // field count
    let len = dv.getInt32(off);
    off += 4;
    id!.appendInt64BE(buf, off);
    off += len;
    len = dv.getInt32(off);
    off += 4;
    ts!.appendInt64BE(buf, off, PG_EPOCH_MICROS);
    off += len;
    len = dv.getInt32(off);
    off += 4;
    price!.appendNumericBinary(buf, off);
    off += len;
    len = dv.getInt32(off);
    off += 4;
    name!.appendUtf8Bytes(buf, off, off + len);
    off += len;
    len = dv.getInt32(off);
    off += 4;
    active!.appendBool(buf[off] !== 0);
    off += len;
    len = dv.getInt32(off);
    off += 4;
    score!.appendFloat64BE(buf, off);
    off += len;
    len = dv.getInt32(off);
    off += 4;
    if (len < 0) qty!.appendNull();
    else {
      qty!.appendInt32BE(buf, off);
      off += len;
    }
    enc.appendMetaOrdinal(1, PREFIX, r, null, false);
  }
  return enc.finish(INGEST);
}

function baseline(): RecordBatch {
  const cols: [string, Data][] = [
    ['id', vectorFromArray(ids, new Int64()).data[0]!],
    ['updated_at', vectorFromArray(millis, new TimestampMillisecond('UTC')).data[0]!],
    ['price', vectorFromArray(prices, new Utf8()).data[0]!],
    ['name', vectorFromArray(names, new Utf8()).data[0]!],
    ['active', vectorFromArray(actives, new Bool()).data[0]!],
    ['score', vectorFromArray(scores, new Float64()).data[0]!],
    ['qty', vectorFromArray(qtys, new Int32()).data[0]!],
  ];
  const fields = cols.map(([n, d]) => new Field(n, d.type, true));
  const struct = makeData({
    type: new Struct(fields),
    length: N,
    nullCount: 0,
    children: cols.map(([, d]) => d),
  });
  return new RecordBatch(new ArrowSchema(fields), struct);
}

// ---- timing: alternate the ways, report medians ----
// CPU time of this process (user + system), not wall time: the 2-core machines this runs on are
// often shared, and CPU time keeps the ratios stable under load. Wall time is printed as well.
function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}
const ways: [string, () => RecordBatch][] = [
  ['baseline (apache-arrow vectorFromArray)', baseline],
  ['encodeRows (row maps)', viaRows],
  ['typed appenders (JS columns)', viaTyped],
  ['raw appenders (COPY binary bytes)', viaCopy],
];
const cpuTimes = new Map<string, number[]>(ways.map(([n]) => [n, []]));
const wallTimes = new Map<string, number[]>(ways.map(([n]) => [n, []]));
for (let run = 0; run < RUNS + 1; run++) {
  for (const [label, fn] of ways) {
    const w0 = performance.now();
    const c0 = cpuMs();
    const rb = fn();
    const cpu = cpuMs() - c0;
    const wall = performance.now() - w0;
    if (rb.numRows !== N) throw new Error(`${label} built ${rb.numRows} rows`);
    if (run > 0) {
      // run 0 warms the JIT
      cpuTimes.get(label)!.push(cpu);
      wallTimes.get(label)!.push(wall);
    }
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const base = median(cpuTimes.get(ways[0]![0])!);
console.log(`${N} rows x 7 columns (+6 metadata columns on our paths), median of ${RUNS} runs, CPU time`);
for (const [label] of ways) {
  const ms = median(cpuTimes.get(label)!);
  const rate = Math.round((N / ms) * 1000);
  console.log(
    `${label.padEnd(42)} ${ms.toFixed(0).padStart(6)} ms ${rate.toLocaleString('en').padStart(11)} rows/s  ${(base / ms).toFixed(2).padStart(5)}x baseline  (wall ${median(wallTimes.get(label)!).toFixed(0)} ms)`,
  );
}
