/**
 * Iceberg's binary single-value serialization (spec Appendix D), the bytes of a column's lower
 * and upper bounds in a manifest and of a partition field's bounds in a manifest list, with the
 * order the spec compares values in.
 *
 * Owns: one value of a primitive type as bytes and back, the order of two values, and the parse
 * of a primitive type's JSON name (`decimal(9, 2)`, `fixed[16]`). Values in JS (byte values are always plain `Uint8Array` copies, never Buffers): `boolean`;
 * `number` for int, date, float, double; `bigint` for long, time, timestamp, timestamptz and a
 * decimal's unscaled value; `string`; `Uint8Array` for uuid, fixed, binary. Never a nested type
 * (struct, list, map have no single-value form). Pure.
 */
import { type IcebergPrimitive, type IcebergType, SIMPLE_PRIMITIVES, type SimplePrimitive } from './spec.js';

/** A primitive type, parsed. */
export type PrimitiveType =
  | { readonly kind: SimplePrimitive }
  | { readonly kind: 'decimal'; readonly precision: number; readonly scale: number }
  | { readonly kind: 'fixed'; readonly length: number };

/** A value of a primitive type (see the module comment). */
export type SingleValue = boolean | number | bigint | string | Uint8Array;

const SIMPLE: ReadonlySet<string> = new Set(SIMPLE_PRIMITIVES);

/** The primitive type named `type`, or undefined for a nested type or a name Iceberg v2 lacks. */
export function primitiveOf(type: IcebergType): PrimitiveType | undefined {
  if (typeof type !== 'string') return undefined;
  if (SIMPLE.has(type)) return { kind: type as SimplePrimitive };
  const d = /^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$/.exec(type);
  if (d) return { kind: 'decimal', precision: Number(d[1]), scale: Number(d[2]) };
  const f = /^fixed\[\s*(\d+)\s*\]$/.exec(type);
  if (f) return { kind: 'fixed', length: Number(f[1]) };
  return undefined;
}

/** The JSON name of a primitive type. */
export function primitiveName(t: PrimitiveType): IcebergPrimitive {
  if (t.kind === 'decimal') return `decimal(${t.precision}, ${t.scale})`;
  if (t.kind === 'fixed') return `fixed[${t.length}]`;
  return t.kind;
}

const utf8 = new TextEncoder();
const utf8Strict = new TextDecoder('utf-8', { fatal: true });

/** The bytes of `v` (of type `t`), as Appendix D has them. Throws on a value of another type. */
export function serializeValue(t: PrimitiveType, v: SingleValue): Uint8Array {
  const fail = () => new TypeError(`${String(v)} is not a value of Iceberg type ${primitiveName(t)}`);
  switch (t.kind) {
    case 'boolean':
      if (typeof v !== 'boolean') throw fail();
      return Uint8Array.of(v ? 1 : 0);
    case 'int':
    case 'date': {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 31) throw fail();
      const out = new Uint8Array(4);
      new DataView(out.buffer).setInt32(0, v, true);
      return out;
    }
    case 'long':
    case 'time':
    case 'timestamp':
    case 'timestamptz': {
      if (typeof v !== 'bigint' || v < -(2n ** 63n) || v >= 2n ** 63n) throw fail();
      const out = new Uint8Array(8);
      new DataView(out.buffer).setBigInt64(0, v, true);
      return out;
    }
    case 'float': {
      if (typeof v !== 'number') throw fail();
      const out = new Uint8Array(4);
      new DataView(out.buffer).setFloat32(0, v, true);
      return out;
    }
    case 'double': {
      if (typeof v !== 'number') throw fail();
      const out = new Uint8Array(8);
      new DataView(out.buffer).setFloat64(0, v, true);
      return out;
    }
    case 'string':
      if (typeof v !== 'string') throw fail();
      return utf8.encode(v);
    case 'uuid':
      if (!(v instanceof Uint8Array) || v.length !== 16) throw fail();
      return new Uint8Array(v);
    case 'fixed':
      if (!(v instanceof Uint8Array) || v.length !== t.length) throw fail();
      return new Uint8Array(v);
    case 'binary':
      if (!(v instanceof Uint8Array)) throw fail();
      return new Uint8Array(v);
    case 'decimal':
      if (typeof v !== 'bigint') throw fail();
      return twosComplementBE(v);
  }
}

/** The value `bytes` hold (of type `t`). Throws when the bytes cannot be one. */
export function deserializeValue(t: PrimitiveType, bytes: Uint8Array): SingleValue {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  const need = (n: number) => {
    if (bytes.length !== n) throw new TypeError(`${bytes.length} bytes are no ${primitiveName(t)} value`);
  };
  switch (t.kind) {
    case 'boolean':
      need(1);
      return bytes[0] !== 0;
    case 'int':
    case 'date':
      need(4);
      return view.getInt32(0, true);
    case 'long':
    case 'time':
    case 'timestamp':
    case 'timestamptz':
      need(8);
      return view.getBigInt64(0, true);
    case 'float':
      need(4);
      return view.getFloat32(0, true);
    case 'double':
      need(8);
      return view.getFloat64(0, true);
    case 'string':
      return utf8Strict.decode(bytes);
    case 'uuid':
      need(16);
      return new Uint8Array(bytes);
    case 'fixed':
      need(t.length);
      return new Uint8Array(bytes);
    case 'binary':
      return new Uint8Array(bytes);
    case 'decimal':
      return fromTwosComplementBE(bytes);
  }
}

/**
 * The order of two values of type `t`: negative, zero or positive. Numbers numerically with
 * -0 before +0 (NaN is never a bound); strings by their UTF-8 bytes (the order of code points);
 * binary, fixed and uuid by unsigned bytes; false before true.
 */
export function compareValues(t: PrimitiveType, a: SingleValue, b: SingleValue): number {
  switch (t.kind) {
    case 'float':
    case 'double': {
      const x = a as number;
      const y = b as number;
      if (x !== y) return x < y ? -1 : 1;
      if (x === 0) return (Object.is(x, -0) ? 0 : 1) - (Object.is(y, -0) ? 0 : 1);
      return 0;
    }
    case 'string':
      return compareBytes(utf8.encode(a as string), utf8.encode(b as string));
    case 'uuid':
    case 'fixed':
    case 'binary':
      return compareBytes(a as Uint8Array, b as Uint8Array);
    case 'boolean':
      return Number(a) - Number(b);
    default:
      return a === b ? 0 : (a as number | bigint) < (b as number | bigint) ? -1 : 1;
  }
}

/** Unsigned lexicographic order of two byte strings. */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = a[i]! - b[i]!;
    if (d !== 0) return d;
  }
  return a.length - b.length;
}

/** A signed integer as big-endian two's complement in the fewest bytes that hold it. */
export function twosComplementBE(v: bigint): Uint8Array {
  let n = 1;
  while (v < -(1n << BigInt(8 * n - 1)) || v >= 1n << BigInt(8 * n - 1)) n++;
  const out = new Uint8Array(n);
  let x = BigInt.asUintN(8 * n, v);
  for (let i = n - 1; i >= 0; i--) {
    out[i] = Number(x & 0xffn);
    x >>= 8n;
  }
  return out;
}

/** The signed integer in big-endian two's complement `bytes` (any length, at least one). */
export function fromTwosComplementBE(bytes: Uint8Array): bigint {
  if (bytes.length === 0) throw new TypeError('no bytes are no decimal value');
  let x = 0n;
  for (const b of bytes) x = (x << 8n) | BigInt(b);
  return BigInt.asIntN(8 * bytes.length, x);
}
