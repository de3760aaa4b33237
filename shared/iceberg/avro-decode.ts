/**
 * Avro binary decoding (Avro 1.11 specification, "Binary Encoding"): one value of a compiled
 * schema (./avro-schema.ts) read from a byte view. The container (./avro.ts) reads its header and
 * blocks with it, the snappy codec (./avro-codecs.ts) its varints.
 *
 * Owns: the decoding of every Avro type by the writer's schema (no reader-schema resolution) and
 * the refusal of malformed data: a value that runs past the end, a long of more than 10 bytes, an
 * int out of range, a string that is not UTF-8, an enum or union index the schema lacks.
 * Invariants: a `long` reads as a `bigint`, exact for any 64-bit value; `bytes` and `fixed` read as
 * copies, never views of the input. Pure.
 */
import { AvroError, type AvroValue, INT_MAX, INT_MIN, type SchemaNode, setField } from './avro-schema.js';

const utf8Strict = new TextDecoder('utf-8', { fatal: true });

export class AvroIn {
  /** A plain Uint8Array view (a Buffer's `slice` would share memory and stay a Buffer). */
  readonly buf: Uint8Array;
  readonly view: DataView;
  readonly end: number;
  at = 0;
  constructor(bytes: Uint8Array) {
    this.buf = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    this.end = bytes.length;
  }
  need(n: number): void {
    if (n < 0 || this.at + n > this.end) throw new AvroError('Avro data ends inside a value');
  }
  byte(): number {
    this.need(1);
    return this.buf[this.at++]!;
  }
  /** A zigzag varint: a bigint (any 64-bit value). */
  long(): bigint {
    // Up to 7 bytes (49 bits) in double arithmetic, the rest in bigint.
    let lo = 0;
    let shift = 0;
    let b: number;
    do {
      b = this.byte();
      lo += (b & 0x7f) * 2 ** shift;
      shift += 7;
    } while (b & 0x80 && shift < 49);
    let z = BigInt(lo);
    let bigShift = 49n;
    while (b & 0x80) {
      if (bigShift > 63n) throw new AvroError('an Avro long is longer than 10 bytes');
      b = this.byte();
      z |= BigInt(b & 0x7f) << bigShift;
      bigShift += 7n;
    }
    return z & 1n ? -(z >> 1n) - 1n : z >> 1n;
  }
  /** A zigzag varint that must fit `number` safely (lengths, counts, ints). */
  small(): number {
    const v = this.long();
    if (v < BigInt(Number.MIN_SAFE_INTEGER) || v > BigInt(Number.MAX_SAFE_INTEGER))
      throw new AvroError(`an Avro length or int of ${v} is out of range`);
    return Number(v);
  }
  take(n: number): Uint8Array {
    this.need(n);
    const out = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }
}

/** Reads one value of `node` at the input's position, advancing it. */
export function readValue(input: AvroIn, node: SchemaNode): AvroValue {
  switch (node.kind) {
    case 'null':
      return null;
    case 'boolean': {
      const b = input.byte();
      if (b > 1) throw new AvroError(`an Avro boolean holds byte ${b}`);
      return b === 1;
    }
    case 'int': {
      const v = input.small();
      if (v < INT_MIN || v > INT_MAX) throw new AvroError(`an Avro int holds ${v}`);
      return v;
    }
    case 'long':
      return input.long();
    case 'float': {
      input.need(4);
      const v = input.view.getFloat32(input.at, true);
      input.at += 4;
      return v;
    }
    case 'double': {
      input.need(8);
      const v = input.view.getFloat64(input.at, true);
      input.at += 8;
      return v;
    }
    case 'string':
      try {
        return utf8Strict.decode(input.take(input.small()));
      } catch (e) {
        if (e instanceof AvroError) throw e;
        throw new AvroError('an Avro string is not valid UTF-8');
      }
    case 'bytes':
      return new Uint8Array(input.take(input.small()));
    case 'fixed':
      return new Uint8Array(input.take(node.size));
    case 'enum': {
      const i = input.small();
      const s = node.symbols[i];
      if (s === undefined) throw new AvroError(`Avro enum ${node.name} has no symbol ${i}`);
      return s;
    }
    case 'array': {
      const out: AvroValue[] = [];
      for (let n = blockCount(input); n !== 0; n = blockCount(input)) {
        for (let i = 0; i < n; i++) out.push(readValue(input, node.items));
      }
      return out;
    }
    case 'map': {
      const out = new Map<string, AvroValue>();
      for (let n = blockCount(input); n !== 0; n = blockCount(input)) {
        for (let i = 0; i < n; i++) {
          const k = readValue(input, { kind: 'string' }) as string;
          out.set(k, readValue(input, node.values));
        }
      }
      return out;
    }
    case 'union': {
      const i = input.small();
      const b = node.branches[i];
      if (!b) throw new AvroError(`an Avro union has no branch ${i}`);
      return readValue(input, b);
    }
    case 'record': {
      const out: Record<string, AvroValue> = {};
      for (const f of node.fields) setField(out, f.name, readValue(input, f.type));
      return out;
    }
  }
}

/** The item count of the next array/map block (a negative count is followed by its byte size). */
export function blockCount(input: AvroIn): number {
  const n = input.small();
  if (n >= 0) return n;
  input.small();
  return -n;
}
