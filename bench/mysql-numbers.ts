/**
 * Appending MariaDB DECIMAL(12,2) and DOUBLE text (the incremental-mysql bench's `amount` and
 * `price` shapes: ROUND(RAND() * 100000, 2) and the shortest round-trip text of RAND() * 1000)
 * from socket-sized chunks: the batch path's range appenders (types.ts `rangeAppenderOf`, bytes
 * parsed in place) against the string path they replaced (`toString('latin1')` per value, then
 * `appendDecimalText` / `Number`), measured in the same run. 1M values per kind, 7 alternated
 * rounds, paired ratios. Never asserts a time: it prints.
 *
 *   npx tsx bench/mysql-numbers.ts [values]   (npm run bench -- mysql-numbers)
 */
import { Decimal, Float64 } from 'apache-arrow';
import { ColumnWriter } from '../shared/dataplane/column-writer.js';
import { mapColumn, type RangeAppender, rangeAppenderOf } from '../shared/drivers/mysql/types.js';

const VALUES = Number(process.argv[2] ?? 1_000_000);
const ROUNDS = 7;
const CHUNK = 65_536;

/** Deterministic uniform [0, 1) (mulberry32), so every run sees the same values. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Socket-like chunks of whole values, each after a one-byte length as in a row packet. */
function chunksOf(text: () => string): { buf: Buffer; spans: Int32Array }[] {
  const out: { buf: Buffer; spans: Int32Array }[] = [];
  for (let made = 0; made < VALUES; ) {
    const buf = Buffer.alloc(CHUNK);
    const spans: number[] = [];
    let p = 0;
    while (made < VALUES) {
      const s = text();
      if (p + 1 + s.length > CHUNK) break;
      buf[p++] = s.length;
      buf.write(s, p, 'latin1');
      spans.push(p, p + s.length);
      p += s.length;
      made++;
    }
    out.push({ buf, spans: Int32Array.from(spans) });
  }
  return out;
}

const rd = random(1);
const rp = random(2);
const kinds = [
  {
    name: 'DECIMAL(12,2)',
    column: mapColumn(
      {
        name: 'amount',
        dataType: 'decimal',
        columnType: 'decimal(12,2)',
        nullable: false,
        numericPrecision: 12,
        numericScale: 2,
        charset: null,
      },
      'c',
    ).read,
    writer: () =>
      new ColumnWriter(
        'amount',
        { kind: 'decimal', precision: 12, scale: 2 },
        false,
        new Decimal(2, 12, 128),
        1024,
      ),
    chunks: chunksOf(() => (Math.round(rd() * 100_000_00) / 100).toFixed(2)),
    strings: ((w, b, s, e) => w.appendDecimalText(b.toString('latin1', s, e))) as RangeAppender,
  },
  {
    name: 'DOUBLE',
    column: mapColumn(
      {
        name: 'price',
        dataType: 'double',
        columnType: 'double',
        nullable: false,
        numericPrecision: 22,
        numericScale: null,
        charset: null,
      },
      'c',
    ).read,
    writer: () => new ColumnWriter('price', { kind: 'float64' }, false, new Float64(), 1024),
    chunks: chunksOf(() => String(rp() * 1000)),
    strings: ((w, b, s, e) => w.appendFloat64(Number(b.toString('latin1', s, e)))) as RangeAppender,
  },
];

function cpuMs(kind: (typeof kinds)[number], append: RangeAppender): number {
  const before = process.cpuUsage();
  const w = kind.writer();
  for (const { buf, spans } of kind.chunks) {
    for (let i = 0; i < spans.length; i += 2) append(w, buf, spans[i]!, spans[i + 1]!);
  }
  if (w.toData().length !== VALUES) throw new Error('wrong count');
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000;
}

const median = (xs: number[]) => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)]!;
for (const kind of kinds) {
  const bytes = rangeAppenderOf(kind.column, { table: 'bench.t', column: kind.name });
  // Warm both up (JIT) before measuring.
  cpuMs(kind, bytes);
  cpuMs(kind, kind.strings);
  const b: number[] = [];
  const s: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    // Alternate which goes first, so drift in the machine's load falls on both.
    if (r % 2 === 0) {
      b.push(cpuMs(kind, bytes));
      s.push(cpuMs(kind, kind.strings));
    } else {
      s.push(cpuMs(kind, kind.strings));
      b.push(cpuMs(kind, bytes));
    }
  }
  const ratios = b.map((x, i) => x / s[i]!);
  console.log(`${VALUES.toLocaleString('en-US')} ${kind.name} values, ${ROUNDS} alternated rounds (CPU ms):`);
  console.log(
    `  string per value:  median ${median(s).toFixed(0)} ms  (${s.map((v) => v.toFixed(0)).join(' ')})`,
  );
  console.log(
    `  bytes in place:    median ${median(b).toFixed(0)} ms  (${b.map((v) => v.toFixed(0)).join(' ')})`,
  );
  console.log(
    `  bytes / string per round: ${ratios.map((v) => v.toFixed(2)).join(' ')} (median ${median(ratios).toFixed(2)}x)`,
  );
}
