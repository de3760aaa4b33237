/**
 * Main-thread CPU of building Postgres incremental pages, without a server: the bytes of a COPY
 * OUT data phase (CopyData messages of PGCOPY binary tuples, cut into 64 KiB socket chunks) of
 * rows shaped like the incremental bench's table (bench/incremental.ts: int8, text, numeric(12,2),
 * int4 with 10% nulls, float8, bool, timestamptz, text with 10% nulls, jsonb, timestamptz), fed
 * through the socket tap (copy-tap.ts) into the PGCOPY decoder and the batch encoder exactly as
 * a page read does (incremental.ts copyRows: metadata and the byte budget after every row), then
 * `finish`. A second figure adds what the sink does next on the main thread, the Arrow IPC
 * stream of each batch (`tableToIPC`), whose copies depend on the buffers the encoder hands over.
 *
 * Prints CPU-seconds per 1M rows (process.cpuUsage, user + system) for each round, their
 * medians, and a SHA-256 of every page's IPC bytes: equal digests mean byte-identical batches,
 * so running this in two worktrees compares both CPU and output.
 *
 *   npx tsx bench/pg-page.ts [rows] [rounds]   (npm run bench -- pg-page; default 1M rows, 7 rounds)
 */
import { createHash } from 'node:crypto';
import { Table, tableToIPC } from 'apache-arrow';
import { BatchEncoder } from '../shared/dataplane/encoder.js';
import type { Schema } from '../shared/dataplane/schema.js';
import type { WireKind } from '../shared/drivers/postgres/types.js';
import { CopyBinaryDecoder, type CopyField } from '../shared/drivers/postgres/wire/binary-rows.js';
import { CopyTap } from '../shared/drivers/postgres/wire/copy-tap.js';

const ROWS = Number(process.argv[2] ?? 1_000_000);
const ROUNDS = Number(process.argv[3] ?? 7);
/** Rounds run first and not counted: the JIT's tiers settle over the first two. */
const WARMUP = 2;
const PAGE = 50_000;
const CHUNK = 65_536;
const PREFIX = 'i00000000002a';
const INGEST = 1_700_000_000_000_000_000n;
const PG_EPOCH_MICROS = 946_684_800_000_000n;

const columns: {
  name: string;
  type: Schema['columns'][number]['type'];
  nullable: boolean;
  wire: WireKind;
}[] = [
  { name: 'id', type: { kind: 'int64' }, nullable: false, wire: 'int8' },
  { name: 'customer', type: { kind: 'text' }, nullable: false, wire: 'text' },
  { name: 'amount', type: { kind: 'decimal', precision: 12, scale: 2 }, nullable: false, wire: 'numeric' },
  { name: 'qty', type: { kind: 'int32' }, nullable: true, wire: 'int4' },
  { name: 'price', type: { kind: 'float64' }, nullable: false, wire: 'float8' },
  { name: 'active', type: { kind: 'bool' }, nullable: false, wire: 'bool' },
  { name: 'placed_at', type: { kind: 'timestamp', utc: true }, nullable: false, wire: 'timestamp' },
  { name: 'note', type: { kind: 'text' }, nullable: true, wire: 'text' },
  { name: 'payload', type: { kind: 'text' }, nullable: false, wire: 'jsonb' },
  { name: 'updated_at', type: { kind: 'timestamp', utc: true }, nullable: false, wire: 'timestamp' },
];
const schema: Schema = {
  primaryKey: ['id'],
  columns: columns.map((c) => ({ name: c.name, type: c.type, nullable: c.nullable, sourceType: c.wire })),
};

/** Postgres binary NUMERIC of an amount in cents (scale 2), as COPY sends it. */
function pgNumeric(cents: number): Buffer {
  const int = Math.floor(cents / 100);
  const frac = cents % 100;
  const groups: number[] = [];
  for (let v = int; v > 0; v = Math.floor(v / 10000)) groups.unshift(v % 10000);
  let weight = groups.length - 1;
  if (frac !== 0) groups.push(frac * 100);
  while (groups.length > 0 && groups[0] === 0) {
    groups.shift();
    weight--;
  }
  const b = Buffer.alloc(8 + 2 * groups.length);
  b.writeInt16BE(groups.length, 0);
  b.writeInt16BE(groups.length === 0 ? 0 : weight, 2);
  b.writeUInt16BE(0, 4);
  b.writeUInt16BE(2, 6);
  for (let k = 0; k < groups.length; k++) b.writeUInt16BE(groups[k]!, 8 + 2 * k);
  return b;
}

function int64(v: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(v);
  return b;
}

/** The CopyData payloads of one page (rows `from..from+PAGE`): header + tuples + trailer. */
function pagePayloads(from: number): Buffer[] {
  const header = Buffer.alloc(19);
  Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1').copy(header);
  const out: Buffer[] = [header];
  let seed = from + 1;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  for (let i = from + 1; i <= from + PAGE; i++) {
    const ts = (us: bigint) => int64(us - PG_EPOCH_MICROS);
    const f8 = Buffer.alloc(8);
    f8.writeDoubleBE(rand() * 1000);
    const qty = i % 10 === 0 ? null : Buffer.from([0, 0, ((i % 500) >> 8) & 255, (i % 500) & 255]);
    const note =
      i % 10 === 3 ? null : Buffer.from(`note ${createHash('md5').update(String(i)).digest('hex')}`);
    const payload = Buffer.concat([
      Buffer.from([1]),
      Buffer.from(`{"n": ${i % 97}, "sku": "SKU-${i % 5000}", "gift": ${i % 11 === 0}}`),
    ]);
    const fields: (Buffer | null)[] = [
      int64(BigInt(i)),
      Buffer.from(`customer-${String((i * 7919) % 100000).padStart(6, '0')}`),
      pgNumeric(Math.floor(rand() * 10_000_000)),
      qty,
      f8,
      Buffer.from([i % 3 !== 0 ? 1 : 0]),
      ts(1_640_995_200_000_000n + BigInt(i) * 7_000_000n + BigInt(Math.floor(rand() * 1e6))),
      note,
      payload,
      ts(1_672_531_200_000_000n + BigInt(i >> 1) * 1_000_000n + BigInt((i >> 1) % 1000)),
    ];
    const parts: Buffer[] = [Buffer.from([0, fields.length])];
    for (const f of fields) {
      const len = Buffer.alloc(4);
      len.writeInt32BE(f === null ? -1 : f.length);
      parts.push(len);
      if (f !== null) parts.push(f);
    }
    out.push(Buffer.concat(parts));
  }
  out.push(Buffer.from([0xff, 0xff]));
  return out;
}

/** The server's bytes of one page's COPY OUT: CopyOutResponse, CopyData each, CopyDone; in socket chunks. */
function socketChunks(payloads: Buffer[]): Buffer[] {
  const msgs: Buffer[] = [Buffer.from([0x48, 0, 0, 0, 7, 1, 0, 0])];
  for (const p of payloads) {
    const h = Buffer.alloc(5);
    h[0] = 0x64;
    h.writeUInt32BE(p.length + 4, 1);
    msgs.push(h, p);
  }
  msgs.push(Buffer.from([0x63, 0, 0, 0, 4]));
  const all = Buffer.concat(msgs);
  const chunks: Buffer[] = [];
  for (let p = 0; p < all.length; p += CHUNK) chunks.push(Buffer.from(all.subarray(p, p + CHUNK)));
  return chunks;
}

const pages: Buffer[][] = [];
for (let from = 0; from < ROWS; from += PAGE) pages.push(socketChunks(pagePayloads(from)));

/** Reads one page as copyRows does and returns its batch. */
function readPage(chunks: Buffer[], ordinalBase: number) {
  const enc = new BatchEncoder(schema, { phase: 'incremental', capacity: PAGE });
  const fields: CopyField[] = columns.map((c) => ({
    wire: c.wire,
    list: false,
    writer: enc.col(columns.indexOf(c)),
    ctx: { table: 'public.bench', column: c.name },
  }));
  let maxRow = 0;
  let before = 0;
  const decoder = new CopyBinaryDecoder(fields, [9, 0], PAGE, (i) => {
    enc.appendMetaOrdinal(1, PREFIX, ordinalBase + i, null, false);
    const bytes = enc.dataBytes;
    maxRow = Math.max(maxRow, bytes - before);
    before = bytes;
    return false;
  });
  const tap = new CopyTap(() => undefined);
  tap.arm((buf, start, end) => decoder.pushRange(buf, start, end));
  for (const c of chunks) tap.take(c);
  decoder.end();
  if (decoder.appended !== PAGE) throw new Error(`page of ${decoder.appended} rows`);
  return enc.finish(INGEST);
}

const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const perMillion = (s: number) => (s * 1_000_000) / ROWS;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

const build: number[] = [];
const withIpc: number[] = [];
let digest = '';
for (let r = -WARMUP; r < ROUNDS; r++) {
  const hash = createHash('sha256');
  const t0 = cpu();
  const batches = pages.map((chunks, k) => readPage(chunks, k * PAGE));
  const t1 = cpu();
  for (const b of batches) hash.update(tableToIPC(new Table(b.schema, [b]), 'stream'));
  const t2 = cpu();
  digest = hash.digest('hex');
  if (r < 0) continue;
  build.push(perMillion(t1 - t0));
  withIpc.push(perMillion(t2 - t0));
  console.log(
    `round ${r + 1}: build ${build[r]!.toFixed(3)} CPU-s/1M rows, + IPC ${withIpc[r]!.toFixed(3)} CPU-s/1M rows`,
  );
}
console.log(
  `median of ${ROUNDS} (after ${WARMUP} warm-up rounds): build ${median(build).toFixed(3)}, build + IPC ${median(withIpc).toFixed(3)} CPU-s per 1M rows (${ROWS} rows, pages of ${PAGE})`,
);
console.log(`ipc sha256 ${digest}`);
