/**
 * The text of an Iceberg metadata file (`v<N>.metadata.json`) and back, exactly: snapshot ids are
 * random 63-bit longs (spec.ts `SnapshotId`), which `JSON.parse` would round to the nearest double
 * and `JSON.stringify` cannot write at all, so this file has its own small JSON reader and writer
 * that keep every integer beyond 2^53 as a `bigint`.
 *
 * Owns: parsing (with the checks that make the result an `IcebergTableMetadata` of format v2) and
 * serializing. Fields this module does not know (`statistics`, `partition-statistics`, a newer
 * spec's additions) are kept as read and written back as they were, big integers included, so a
 * commit never drops what another engine recorded. Never changes a value: building metadata is
 * ./metadata.ts.
 */
import { SinkError } from '../contracts/errors.js';
import type { IcebergTableMetadata, SnapshotId } from './spec.js';

/** A JSON value as this reader returns it: integers beyond 2^53 are `bigint`s. */
export type JsonValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | readonly JsonValue[]
  | { readonly [key: string]: JsonValue };

/** The table has no current snapshot: the spec's `-1`. */
export const NO_SNAPSHOT: SnapshotId = -1n;

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const INTEGER = /^-?\d+$/;
const SPACE = /[ \t\n\r]*/y;

/**
 * Parses JSON text like `JSON.parse`, but an integer literal that is not a safe integer becomes a
 * `bigint` with its exact value. A `__proto__` key is an own property, as with `JSON.parse`.
 *
 * @throws SyntaxError on text that is not JSON (the message has the offset).
 */
export function parseJson(text: string): JsonValue {
  let at = 0;
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at offset ${at} of the JSON text`);
  };
  const space = (): void => {
    SPACE.lastIndex = at;
    SPACE.exec(text);
    at = SPACE.lastIndex;
  };
  const string = (): string => {
    const start = at;
    let end = at + 1;
    for (;;) {
      end = text.indexOf('"', end);
      if (end < 0) fail('unterminated string');
      let slashes = 0;
      while (text[end - 1 - slashes] === '\\') slashes++;
      if (slashes % 2 === 0) break;
      end++;
    }
    at = end + 1;
    // The built-in parser decodes the escapes and refuses raw control characters.
    return JSON.parse(text.slice(start, at)) as string;
  };
  const value = (): JsonValue => {
    space();
    const c = text[at];
    if (c === '{') {
      at++;
      const entries: [string, JsonValue][] = [];
      space();
      if (text[at] === '}') {
        at++;
        return {};
      }
      for (;;) {
        space();
        if (text[at] !== '"') fail('expected a key');
        const key = string();
        space();
        if (text[at] !== ':') fail('expected ":"');
        at++;
        entries.push([key, value()]);
        space();
        if (text[at] === ',') {
          at++;
          continue;
        }
        if (text[at] === '}') {
          at++;
          // fromEntries defines own properties: a "__proto__" key stays data.
          return Object.fromEntries(entries);
        }
        fail('expected "," or "}"');
      }
    }
    if (c === '[') {
      at++;
      const items: JsonValue[] = [];
      space();
      if (text[at] === ']') {
        at++;
        return items;
      }
      for (;;) {
        items.push(value());
        space();
        if (text[at] === ',') {
          at++;
          continue;
        }
        if (text[at] === ']') {
          at++;
          return items;
        }
        fail('expected "," or "]"');
      }
    }
    if (c === '"') return string();
    if (text.startsWith('true', at)) {
      at += 4;
      return true;
    }
    if (text.startsWith('false', at)) {
      at += 5;
      return false;
    }
    if (text.startsWith('null', at)) {
      at += 4;
      return null;
    }
    NUMBER.lastIndex = at;
    const m = NUMBER.exec(text);
    if (!m) return fail('unexpected character');
    at = NUMBER.lastIndex;
    const n = Number(m[0]);
    return INTEGER.test(m[0]) && !Number.isSafeInteger(n) ? BigInt(m[0]) : n;
  };
  const out = value();
  space();
  if (at !== text.length) fail('unexpected text after the value');
  return out;
}

/**
 * Writes a value as compact JSON like `JSON.stringify` (object keys in insertion order, `undefined`
 * members left out), with a `bigint` as its exact digits.
 *
 * @throws TypeError for a number that is not finite (JSON has no NaN or Infinity).
 */
export function stringifyJson(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'bigint':
      return value.toString();
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`${value} is not a JSON number`);
      return JSON.stringify(value);
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value))
        return `[${value.map((v) => (v === undefined ? 'null' : stringifyJson(v))).join(',')}]`;
      const members: string[] = [];
      for (const [k, v] of Object.entries(value)) {
        if (v !== undefined) members.push(`${JSON.stringify(k)}:${stringifyJson(v)}`);
      }
      return `{${members.join(',')}}`;
    }
    default:
      throw new TypeError(`a ${typeof value} has no JSON form`);
  }
}

/** The metadata file's text, as it is stored: compact UTF-8 JSON. */
export function serializeTableMetadata(metadata: IcebergTableMetadata): string {
  return stringifyJson(metadata);
}

type Mutable = Record<string, unknown>;

/**
 * Reads a metadata file's text into an `IcebergTableMetadata`: format version 2 only, the fields
 * the spec requires present with their types, snapshot ids as `bigint` wherever they appear
 * (snapshots, their parents, `current-snapshot-id` with absent or null read as `-1`, refs, the
 * snapshot log, statistics), the lists the spec lets a writer leave out (`snapshots`, the logs,
 * `properties`, `refs`) present, and `refs.main` derived from the current snapshot when a v2 file
 * has no refs (as the spec says a reader must).
 *
 * @param where the file's URI, named in errors.
 * @throws SinkError `ICEBERG_METADATA_INVALID` when the text is not JSON, not format 2, or misses
 *   a required field.
 */
export function parseTableMetadata(text: string, where: string): IcebergTableMetadata {
  const invalid = (why: string, cause?: unknown): SinkError =>
    new SinkError(
      'ICEBERG_METADATA_INVALID',
      where,
      `the Iceberg metadata file ${where} ${why}; it was not written by tidemark as it is now: restore the file, or remove the table's metadata folder and let the next run create the table again`,
      cause === undefined ? undefined : { cause },
    );
  let raw: JsonValue;
  try {
    raw = parseJson(text);
  } catch (e) {
    throw invalid(`is not JSON (${(e as Error).message})`, e);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw invalid('is not a JSON object');
  const m: Mutable = { ...(raw as Mutable) };
  if (m['format-version'] !== 2) {
    throw invalid(
      `has format-version ${stringifyJson(m['format-version'] ?? null)}; tidemark reads and writes format 2 only`,
    );
  }
  for (const key of ['table-uuid', 'location'] as const) {
    if (typeof m[key] !== 'string') throw invalid(`has no string "${key}"`);
  }
  for (const key of [
    'last-sequence-number',
    'last-updated-ms',
    'last-column-id',
    'current-schema-id',
    'default-spec-id',
    'last-partition-id',
    'default-sort-order-id',
  ] as const) {
    if (typeof m[key] !== 'number' || !Number.isSafeInteger(m[key])) throw invalid(`has no integer "${key}"`);
  }
  for (const key of ['schemas', 'partition-specs', 'sort-orders'] as const) {
    if (!Array.isArray(m[key]) || (m[key] as unknown[]).length === 0) throw invalid(`has no "${key}"`);
  }
  const id = (v: unknown, what: string): SnapshotId => {
    if (typeof v === 'bigint') return v;
    if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
    throw invalid(`has a ${what} that is not an integer (${stringifyJson(v ?? null)})`);
  };
  const objects = (key: string): Mutable[] => {
    const v = m[key] ?? [];
    if (!Array.isArray(v) || v.some((e) => typeof e !== 'object' || e === null || Array.isArray(e)))
      throw invalid(`has a "${key}" that is not a list of objects`);
    return v as Mutable[];
  };
  if (m.properties === undefined || m.properties === null) m.properties = {};
  if (typeof m.properties !== 'object' || Array.isArray(m.properties))
    throw invalid('has "properties" that are not an object');
  m.snapshots = objects('snapshots').map((s) => {
    const out: Mutable = { ...s, 'snapshot-id': id(s['snapshot-id'], 'snapshot-id') };
    if (s['parent-snapshot-id'] === null || s['parent-snapshot-id'] === undefined)
      delete out['parent-snapshot-id'];
    else out['parent-snapshot-id'] = id(s['parent-snapshot-id'], 'parent-snapshot-id');
    if (typeof s['sequence-number'] !== 'number') throw invalid('has a snapshot without a sequence-number');
    if (typeof s['manifest-list'] !== 'string') throw invalid('has a snapshot without a manifest-list');
    return out;
  });
  m['snapshot-log'] = objects('snapshot-log').map((e) => ({
    ...e,
    'snapshot-id': id(e['snapshot-id'], 'snapshot-log id'),
  }));
  m['metadata-log'] = objects('metadata-log');
  for (const key of ['statistics', 'partition-statistics']) {
    if (m[key] !== undefined)
      m[key] = objects(key).map((e) => ({ ...e, 'snapshot-id': id(e['snapshot-id'], `${key} snapshot-id`) }));
  }
  const current = m['current-snapshot-id'];
  m['current-snapshot-id'] =
    current === undefined || current === null ? NO_SNAPSHOT : id(current, 'current-snapshot-id');
  const refs = m.refs;
  if (refs === undefined || refs === null) {
    m.refs =
      m['current-snapshot-id'] === NO_SNAPSHOT
        ? {}
        : { main: { 'snapshot-id': m['current-snapshot-id'], type: 'branch' } };
  } else {
    if (typeof refs !== 'object' || Array.isArray(refs)) throw invalid('has "refs" that are not an object');
    m.refs = Object.fromEntries(
      Object.entries(refs as Mutable).map(([name, ref]) => {
        if (typeof ref !== 'object' || ref === null)
          throw invalid(`has a ref "${name}" that is not an object`);
        return [
          name,
          { ...(ref as Mutable), 'snapshot-id': id((ref as Mutable)['snapshot-id'], `ref ${name}`) },
        ];
      }),
    );
  }
  return m as unknown as IcebergTableMetadata;
}
