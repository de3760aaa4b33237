/**
 * The block codecs of Avro object container files (Avro 1.11 specification, "Required Codecs" and
 * "Optional Codecs"): what ./avro.ts compresses a block with and decompresses one with.
 *
 * Owns: `null` and `deflate` (raw DEFLATE, no zlib header) both ways, the ones tidemark writes
 * (Iceberg's manifests default to deflate); `snappy` (raw snappy, then the CRC-32 of the
 * uncompressed bytes, checked where Node's zlib has crc32) and `zstandard` (where Node's zlib has
 * zstd) read only, for manifests other writers made. Errors are AvroError (an unknown codec, data
 * that does not decompress). Pure.
 */
import zlib from 'node:zlib';
import { AvroIn } from './avro-decode.js';
import { AvroError } from './avro-schema.js';

/** The block codecs tidemark writes (Iceberg's default for manifests is `deflate`, "gzip"). */
export type AvroCodec = 'null' | 'deflate';

/** Whether `codec` is one tidemark writes. */
export function isWrittenCodec(codec: string): codec is AvroCodec {
  return codec === 'null' || codec === 'deflate';
}

/** A block's bytes compressed by `codec`. */
export function compressBlock(codec: AvroCodec, data: Uint8Array): Uint8Array {
  return codec === 'deflate' ? zlib.deflateRawSync(data) : data;
}

/** The decompression of a block written with `codec`; throws AvroError for a codec not read. */
export function decompressorOf(codec: string): (b: Uint8Array) => Uint8Array {
  switch (codec) {
    case 'null':
      return (b) => b;
    case 'deflate':
      return (b) => zlib.inflateRawSync(b);
    case 'snappy':
      return snappyBlock;
    case 'zstandard': {
      const z = (zlib as unknown as { zstdDecompressSync?: (b: Uint8Array) => Buffer }).zstdDecompressSync;
      if (z) return (b) => z(b);
      throw new AvroError(
        'this Avro file is zstandard-compressed and this Node has no zstd (Node >= 22.15 has)',
      );
    }
    default:
      throw new AvroError(`Avro codec ${codec} is not supported (null, deflate, snappy, zstandard are)`);
  }
}

/** An Avro snappy block: raw snappy data, then the CRC-32 (big-endian) of the uncompressed bytes. */
function snappyBlock(b: Uint8Array): Uint8Array {
  if (b.length < 4) throw new AvroError('an Avro snappy block is shorter than its checksum');
  const data = snappyDecompress(b.subarray(0, b.length - 4));
  const crc32 = (zlib as unknown as { crc32?: (d: Uint8Array) => number }).crc32;
  if (crc32) {
    const want = new DataView(b.buffer, b.byteOffset + b.length - 4, 4).getUint32(0, false);
    if (crc32(data) >>> 0 !== want) throw new AvroError('an Avro snappy block fails its CRC-32');
  }
  return data;
}

/** Decompresses raw snappy (the format's literal and copy elements; no framing). */
function snappyDecompress(src: Uint8Array): Uint8Array {
  const input = new AvroIn(src);
  let length = 0;
  for (let shift = 0; ; shift += 7) {
    const b = input.byte();
    length += (b & 0x7f) * 2 ** shift;
    if (!(b & 0x80)) break;
    if (shift > 28) throw new AvroError('a snappy length is too long');
  }
  const out = new Uint8Array(length);
  let at = 0;
  while (input.at < src.length) {
    const tag = input.byte();
    const type = tag & 3;
    if (type === 0) {
      let n = tag >> 2;
      if (n >= 60) {
        const extra = n - 59;
        n = 0;
        for (let i = 0; i < extra; i++) n |= input.byte() << (8 * i);
        n >>>= 0;
      }
      n += 1;
      if (at + n > length) throw new AvroError('snappy data overruns its length');
      out.set(input.take(n), at);
      at += n;
      continue;
    }
    let n: number;
    let offset: number;
    if (type === 1) {
      n = ((tag >> 2) & 7) + 4;
      offset = ((tag >> 5) << 8) | input.byte();
    } else if (type === 2) {
      n = (tag >> 2) + 1;
      offset = input.byte() | (input.byte() << 8);
    } else {
      n = (tag >> 2) + 1;
      offset = (input.byte() | (input.byte() << 8) | (input.byte() << 16) | (input.byte() << 24)) >>> 0;
    }
    if (offset === 0 || offset > at || at + n > length) throw new AvroError('snappy data has a bad copy');
    for (let i = 0; i < n; i++, at++) out[at] = out[at - offset]!;
  }
  if (at !== length) throw new AvroError('snappy data is shorter than its length');
  return out;
}
