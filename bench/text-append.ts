/**
 * Appending text values of 33-64 bytes (longer than the byte-loop limit) from socket-sized
 * chunks into a text column writer: the column writer's `appendUtf8Bytes` (a plain view over
 * the chunk's memory, read once per chunk) against a baseline measured in the same run, the
 * former copy (`target.set(chunk.subarray(start, end), pos)`, a Buffer view per value) into a
 * plain growing buffer, which does less bookkeeping than the writer. 1M values of the lengths
 * the incremental bench's `note` and `payload` columns have, 7 alternated rounds, paired ratios.
 *
 *   npx tsx bench/text-append.ts [values]   (npm run bench -- text-append)
 */
import { Utf8 } from 'apache-arrow';
import { ColumnWriter } from '../shared/dataplane/column-writer.js';

const VALUES = Number(process.argv[2] ?? 1_000_000);
const ROUNDS = 7;
const CHUNK = 65_536;

// Socket-like chunks, each holding whole values of 33-64 bytes (with a 4-byte gap between them,
// as COPY's length words).
const chunks: { buf: Buffer; spans: Int32Array }[] = [];
for (let made = 0; made < VALUES; ) {
  const buf = Buffer.alloc(CHUNK);
  const spans: number[] = [];
  let p = 0;
  while (made < VALUES) {
    const n = 33 + ((made * 7919) % 32);
    if (p + 4 + n > CHUNK) break;
    p += 4;
    for (let k = 0; k < n; k++) buf[p + k] = 97 + ((made + k) % 26);
    spans.push(p, p + n);
    p += n;
    made++;
  }
  chunks.push({ buf, spans: Int32Array.from(spans) });
}

function writer(): number {
  const w = new ColumnWriter('t', { kind: 'text' }, false, new Utf8(), 1024);
  for (const { buf, spans } of chunks) {
    for (let i = 0; i < spans.length; i += 2) w.appendUtf8Bytes(buf, spans[i]!, spans[i + 1]!);
  }
  return w.toData().length;
}

function baseline(): number {
  let target = Buffer.alloc(1 << 16);
  let pos = 0;
  let count = 0;
  for (const { buf, spans } of chunks) {
    for (let i = 0; i < spans.length; i += 2) {
      const start = spans[i]!;
      const end = spans[i + 1]!;
      if (pos + end - start > target.length) {
        const bigger = Buffer.alloc(target.length * 2);
        bigger.set(target.subarray(0, pos));
        target = bigger;
      }
      target.set(buf.subarray(start, end), pos);
      pos += end - start;
      count++;
    }
  }
  return count;
}

function cpuMs(fn: () => number): number {
  const before = process.cpuUsage();
  if (fn() !== VALUES) throw new Error('wrong count');
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000;
}

// Warm both up (JIT) before measuring.
cpuMs(writer);
cpuMs(baseline);
const ratios: number[] = [];
const w: number[] = [];
const b: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  // Alternate which goes first, so drift in the machine's load falls on both.
  let x: number;
  let y: number;
  if (r % 2 === 0) {
    x = cpuMs(writer);
    y = cpuMs(baseline);
  } else {
    y = cpuMs(baseline);
    x = cpuMs(writer);
  }
  w.push(x);
  b.push(y);
  ratios.push(x / y);
}
const median = (xs: number[]) => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)]!;
console.log(
  `${VALUES.toLocaleString('en-US')} text values of 33-64 bytes from 64 KiB chunks, ${ROUNDS} alternated rounds (CPU ms):`,
);
console.log(
  `  baseline, Buffer view per value: median ${median(b).toFixed(0)} ms  (${b.map((v) => v.toFixed(0)).join(' ')})`,
);
console.log(
  `  column writer appendUtf8Bytes:   median ${median(w).toFixed(0)} ms  (${w.map((v) => v.toFixed(0)).join(' ')})`,
);
console.log(
  `  writer / baseline per round: ${ratios.map((v) => v.toFixed(2)).join(' ')} (median ${median(ratios).toFixed(2)}x)`,
);
