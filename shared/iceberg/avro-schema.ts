/**
 * Avro schemas and values (Avro 1.11 specification, "Schema Declaration"): the types the Avro
 * encoder, decoder and container (./avro-encode.ts, ./avro-decode.ts, ./avro.ts) share, and the
 * one compilation of a schema's JSON into the tree they walk (named types registered by full name,
 * references resolved, so a record may refer to itself).
 *
 * Owns: `AvroSchema`, `AvroValue` (how each Avro type is held in JS: see ./avro.ts), `AvroError`,
 * the int range, and writing a record's field so that a field named `__proto__` stays data.
 * Invariants: a schema compiles or throws AvroError naming what is wrong (a name, a field, an
 * unknown reference, a union inside a union); compiling never changes the schema. Pure.
 */

/** An Avro schema as JSON: a type name, a union (array) or a complex type (object). */
export type AvroSchema =
  | string
  | readonly AvroSchema[]
  | { readonly type: AvroSchema; readonly [attr: string]: unknown };

/** A decoded Avro value (each type's representation: ./avro.ts's module comment). */
export type AvroValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | readonly AvroValue[]
  | ReadonlyMap<string, AvroValue>
  | { readonly [field: string]: AvroValue };

/** A malformed Avro file, an unsupported codec, or a value that does not fit its schema. */
export class AvroError extends Error {
  override name = 'AvroError';
}

/** The range of an Avro `int` (32-bit signed). */
export const INT_MIN = -(2 ** 31);
export const INT_MAX = 2 ** 31 - 1;

// ---- schemas, compiled

/** A compiled schema: the type tree the encoder and decoder walk, named types resolved. */
export type SchemaNode =
  | { readonly kind: 'null' | 'boolean' | 'int' | 'long' | 'float' | 'double' | 'bytes' | 'string' }
  | RecordNode
  | { readonly kind: 'enum'; readonly name: string; readonly symbols: readonly string[] }
  | { readonly kind: 'array'; readonly items: SchemaNode }
  | { readonly kind: 'map'; readonly values: SchemaNode }
  | { readonly kind: 'union'; readonly branches: readonly SchemaNode[] }
  | { readonly kind: 'fixed'; readonly name: string; readonly size: number };

/** A compiled record type. */
export interface RecordNode {
  readonly kind: 'record';
  readonly name: string;
  /** Filled after the node is registered, so a record may refer to itself. */
  fields: {
    readonly name: string;
    readonly type: SchemaNode;
    readonly default?: unknown;
    readonly hasDefault: boolean;
  }[];
}

const PRIMITIVES = new Set(['null', 'boolean', 'int', 'long', 'float', 'double', 'bytes', 'string']);
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Compiles a schema: named types registered by full name, references resolved. */
export function compileSchema(schema: AvroSchema): SchemaNode {
  const named = new Map<string, SchemaNode>();

  const fullName = (name: string, namespace: string | undefined): string => {
    if (name.includes('.')) return name;
    return namespace ? `${namespace}.${name}` : name;
  };

  const define = (
    s: { readonly [attr: string]: unknown },
    namespace: string | undefined,
  ): { full: string; ns: string | undefined } => {
    const name = s.name;
    if (typeof name !== 'string' || name === '')
      throw new AvroError(`a ${String(s.type)} schema has no name`);
    for (const part of name.split('.')) {
      if (!NAME.test(part)) throw new AvroError(`Avro name ${JSON.stringify(name)} is not valid`);
    }
    const ns = name.includes('.')
      ? name.slice(0, name.lastIndexOf('.'))
      : typeof s.namespace === 'string' && s.namespace !== ''
        ? s.namespace
        : namespace;
    const full = fullName(name, ns);
    if (named.has(full) || PRIMITIVES.has(full)) throw new AvroError(`Avro type ${full} is defined twice`);
    return { full, ns };
  };

  const walk = (s: AvroSchema, namespace: string | undefined): SchemaNode => {
    if (typeof s === 'string') {
      if (PRIMITIVES.has(s)) return { kind: s as 'null' };
      const ref = named.get(fullName(s, namespace)) ?? named.get(s);
      if (!ref) throw new AvroError(`Avro schema refers to unknown type ${JSON.stringify(s)}`);
      return ref;
    }
    if (Array.isArray(s)) {
      const branches = s.map((b) => walk(b, namespace));
      for (const b of branches)
        if (b.kind === 'union') throw new AvroError('an Avro union directly inside a union');
      return { kind: 'union', branches };
    }
    if (typeof s !== 'object' || s === null) throw new AvroError(`not an Avro schema: ${JSON.stringify(s)}`);
    const o = s as { readonly type: AvroSchema; readonly [attr: string]: unknown };
    switch (o.type) {
      case 'record':
      case 'error': {
        const { full, ns } = define(o, namespace);
        const node: RecordNode = { kind: 'record', name: full, fields: [] };
        named.set(full, node);
        if (!Array.isArray(o.fields)) throw new AvroError(`Avro record ${full} has no fields array`);
        const seen = new Set<string>();
        for (const f of o.fields as { name?: unknown; type?: AvroSchema; default?: unknown }[]) {
          if (typeof f?.name !== 'string' || !NAME.test(f.name))
            throw new AvroError(`Avro record ${full} has a field without a valid name`);
          if (seen.has(f.name)) throw new AvroError(`Avro record ${full} has two fields named ${f.name}`);
          seen.add(f.name);
          if (f.type === undefined) throw new AvroError(`field ${full}.${f.name} has no type`);
          node.fields.push({
            name: f.name,
            type: walk(f.type, ns),
            default: f.default,
            hasDefault: Object.hasOwn(f, 'default'),
          });
        }
        return node;
      }
      case 'enum': {
        const { full } = define(o, namespace);
        const symbols = o.symbols;
        if (!Array.isArray(symbols) || symbols.some((x) => typeof x !== 'string'))
          throw new AvroError(`Avro enum ${full} has no symbols array`);
        const node = { kind: 'enum' as const, name: full, symbols: symbols as string[] };
        named.set(full, node);
        return node;
      }
      case 'fixed': {
        const { full } = define(o, namespace);
        const size = o.size;
        if (typeof size !== 'number' || !Number.isInteger(size) || size < 0)
          throw new AvroError(`Avro fixed ${full} has no valid size`);
        const node = { kind: 'fixed' as const, name: full, size };
        named.set(full, node);
        return node;
      }
      case 'array':
        if (o.items === undefined) throw new AvroError('an Avro array schema has no items');
        return { kind: 'array', items: walk(o.items as AvroSchema, namespace) };
      case 'map':
        if (o.values === undefined) throw new AvroError('an Avro map schema has no values');
        return { kind: 'map', values: walk(o.values as AvroSchema, namespace) };
      default:
        // A primitive with attributes ({"type": "long", "logicalType": ...}) or a reference.
        return walk(o.type, namespace);
    }
  };

  return walk(schema, undefined);
}

/** Compiles `schema` and checks it can be written: throws AvroError otherwise. */
export function checkAvroSchema(schema: AvroSchema): void {
  compileSchema(schema);
}

/** Sets a record field; a field named `__proto__` becomes an own property, not the prototype. */
export function setField(target: Record<string, unknown>, name: string, value: unknown): void {
  if (name === '__proto__') Object.defineProperty(target, name, { value, enumerable: true, writable: true });
  else target[name] = value;
}
