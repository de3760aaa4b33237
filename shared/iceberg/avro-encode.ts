/**
 * Avro binary encoding (Avro 1.11 specification, "Binary Encoding"): one value of a compiled
 * schema (./avro-schema.ts) appended to a growable buffer. The container (./avro.ts) writes its
 * header and blocks with it.
 *
 * Owns: the encoding of every Avro type, the choice of a union's branch (the first one the value
 * fits), a field's JSON `default` where the value leaves the field out, and the error that names
 * the path of a value that does not fit (`data_file.partition.id: expected an int ...`).
 * Invariants: a `long` is exact for any 64-bit value (a `number` within the safe range or a
 * `bigint`); a value that does not fit its schema throws AvroError naming its path. Pure.
 */
import { AvroError, INT_MAX, INT_MIN, type SchemaNode, setField } from './avro-schema.js';

/** A growable byte buffer. */
export class AvroOut {
  buf = new Uint8Array(1024);
  view = new DataView(this.buf.buffer);
  at = 0;

  room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.at + n));
    next.set(this.buf.subarray(0, this.at));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  byte(b: number): void {
    this.room(1);
    this.buf[this.at++] = b;
  }
  bytes(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.at);
    this.at += b.length;
  }
  /** A zigzag varint of a long (a number within the safe range, or a bigint). */
  long(v: number | bigint): void {
    if (typeof v === 'number' && v >= INT_MIN && v <= INT_MAX) {
      // 32-bit fast path: zigzag in unsigned 32-bit arithmetic.
      let z = ((v << 1) ^ (v >> 31)) >>> 0;
      this.room(5);
      while (z >= 0x80) {
        this.buf[this.at++] = (z & 0x7f) | 0x80;
        z >>>= 7;
      }
      this.buf[this.at++] = z;
      return;
    }
    const x = BigInt(v);
    let z = x >= 0n ? x << 1n : (-x << 1n) - 1n;
    this.room(10);
    while (z >= 0x80n) {
      this.buf[this.at++] = Number(z & 0x7fn) | 0x80;
      z >>= 7n;
    }
    this.buf[this.at++] = Number(z);
  }
  result(): Uint8Array {
    return this.buf.slice(0, this.at);
  }
}

const utf8 = new TextEncoder();
const LONG_MIN = -(2n ** 63n);
const LONG_MAX = 2n ** 63n - 1n;

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'undefined';
  if (v instanceof Uint8Array) return `${v.length} bytes`;
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${JSON.stringify(v)}`;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return (
    typeof v === 'object' &&
    v !== null &&
    !Array.isArray(v) &&
    !(v instanceof Uint8Array) &&
    !(v instanceof Map)
  );
}

/** Whether `v` can be written as `node` (the union branch choice; shallow for complex types). */
function fits(node: SchemaNode, v: unknown): boolean {
  switch (node.kind) {
    case 'null':
      return v === null || v === undefined;
    case 'boolean':
      return typeof v === 'boolean';
    case 'int':
      return typeof v === 'number' && Number.isInteger(v) && v >= INT_MIN && v <= INT_MAX;
    case 'long':
      return (
        (typeof v === 'number' && Number.isSafeInteger(v)) ||
        (typeof v === 'bigint' && v >= LONG_MIN && v <= LONG_MAX)
      );
    case 'float':
    case 'double':
      return typeof v === 'number';
    case 'string':
      return typeof v === 'string';
    case 'bytes':
      return v instanceof Uint8Array;
    case 'fixed':
      return v instanceof Uint8Array && v.length === node.size;
    case 'enum':
      return typeof v === 'string' && node.symbols.includes(v);
    case 'array':
      return Array.isArray(v);
    case 'map':
      return v instanceof Map || isPlainObject(v);
    case 'record':
      return isPlainObject(v);
    case 'union':
      return node.branches.some((b) => fits(b, v));
  }
}

/** The value a field's JSON `default` stands for (Avro: a union's default is of its first branch). */
function defaultValue(node: SchemaNode, json: unknown, path: string): unknown {
  const t = node.kind === 'union' ? node.branches[0] : node;
  if (!t) throw new AvroError(`${path}: a union without branches has no default`);
  switch (t.kind) {
    case 'bytes':
    case 'fixed': {
      // JSON defaults of bytes are strings whose code points 0-255 are the bytes.
      if (typeof json !== 'string') throw new AvroError(`${path}: default of bytes is not a string`);
      return Uint8Array.from(json, (c) => c.charCodeAt(0) & 0xff);
    }
    case 'long':
      return typeof json === 'number' ? BigInt(json) : json;
    case 'array':
      return Array.isArray(json) ? json.map((x, i) => defaultValue(t.items, x, `${path}[${i}]`)) : json;
    case 'map':
      return isPlainObject(json)
        ? new Map(Object.entries(json).map(([k, x]) => [k, defaultValue(t.values, x, `${path}.${k}`)]))
        : json;
    case 'record': {
      if (!isPlainObject(json)) return json;
      const out: Record<string, unknown> = {};
      for (const f of t.fields) {
        if (Object.hasOwn(json, f.name))
          setField(out, f.name, defaultValue(f.type, json[f.name], `${path}.${f.name}`));
      }
      return out;
    }
    default:
      return json;
  }
}

/** Appends `v` as a value of `node`; `path` names the field in the error when it does not fit. */
export function writeValue(out: AvroOut, node: SchemaNode, v: unknown, path: string): void {
  switch (node.kind) {
    case 'null':
      if (v !== null && v !== undefined) throw mismatch(path, 'null', v);
      return;
    case 'boolean':
      if (typeof v !== 'boolean') throw mismatch(path, 'a boolean', v);
      out.byte(v ? 1 : 0);
      return;
    case 'int':
      if (!fits(node, v)) throw mismatch(path, 'an int (32-bit integer)', v);
      out.long(v as number);
      return;
    case 'long':
      if (!fits(node, v)) throw mismatch(path, 'a long (a safe integer number or a 64-bit bigint)', v);
      out.long(v as number | bigint);
      return;
    case 'float':
      if (typeof v !== 'number') throw mismatch(path, 'a float', v);
      out.room(4);
      out.view.setFloat32(out.at, v, true);
      out.at += 4;
      return;
    case 'double':
      if (typeof v !== 'number') throw mismatch(path, 'a double', v);
      out.room(8);
      out.view.setFloat64(out.at, v, true);
      out.at += 8;
      return;
    case 'string': {
      if (typeof v !== 'string') throw mismatch(path, 'a string', v);
      const b = utf8.encode(v);
      out.long(b.length);
      out.bytes(b);
      return;
    }
    case 'bytes':
      if (!(v instanceof Uint8Array)) throw mismatch(path, 'bytes (Uint8Array)', v);
      out.long(v.length);
      out.bytes(v);
      return;
    case 'fixed':
      if (!(v instanceof Uint8Array) || v.length !== node.size) throw mismatch(path, `${node.size} bytes`, v);
      out.bytes(v);
      return;
    case 'enum': {
      const i = typeof v === 'string' ? node.symbols.indexOf(v) : -1;
      if (i < 0) throw mismatch(path, `one of ${node.symbols.join(', ')}`, v);
      out.long(i);
      return;
    }
    case 'array': {
      if (!Array.isArray(v)) throw mismatch(path, 'an array', v);
      if (v.length > 0) {
        out.long(v.length);
        for (let i = 0; i < v.length; i++) writeValue(out, node.items, v[i], `${path}[${i}]`);
      }
      out.long(0);
      return;
    }
    case 'map': {
      const entries = v instanceof Map ? [...v.entries()] : isPlainObject(v) ? Object.entries(v) : undefined;
      if (!entries) throw mismatch(path, 'a map (Map or object)', v);
      if (entries.length > 0) {
        out.long(entries.length);
        for (const [k, x] of entries) {
          if (typeof k !== 'string') throw mismatch(`${path} key`, 'a string', k);
          writeValue(out, { kind: 'string' }, k, path);
          writeValue(out, node.values, x, `${path}.${k}`);
        }
      }
      out.long(0);
      return;
    }
    case 'union': {
      const i = node.branches.findIndex((b) => fits(b, v));
      if (i < 0) throw mismatch(path, `a value of one of the union's ${node.branches.length} branches`, v);
      out.long(i);
      writeValue(out, node.branches[i]!, v, path);
      return;
    }
    case 'record': {
      if (!isPlainObject(v)) throw mismatch(path, `a record ${node.name}`, v);
      for (const f of node.fields) {
        const p = path === '' ? f.name : `${path}.${f.name}`;
        let x = Object.hasOwn(v, f.name) ? v[f.name] : undefined;
        if (x === undefined && f.hasDefault) x = defaultValue(f.type, f.default, p);
        writeValue(out, f.type, x, p);
      }
      return;
    }
  }
}

function mismatch(path: string, expected: string, got: unknown): AvroError {
  return new AvroError(`${path || 'record'}: expected ${expected}, got ${describe(got)}`);
}
