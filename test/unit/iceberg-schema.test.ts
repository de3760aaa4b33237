/**
 * The lake schema as an Iceberg schema (shared/iceberg/schema.ts) and its partition specs
 * (shared/iceberg/partition.ts): every logical kind and metadata column maps to the Iceberg type
 * docs/types.md gives it; a new table's ids; over random schemas and random chains of schema
 * changes (fast-check), ids are unique, kept by name, new ones above last-column-id and never
 * given twice, and a change is refused exactly when the lake rules call it a type change
 * (docs/schema-changes.md); the refusal's message; the partition rules.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lakeSchema } from '../../shared/dataplane/lake.js';
import { METADATA_COLUMNS } from '../../shared/dataplane/metadata.js';
import type { Column, LogicalType, Schema } from '../../shared/dataplane/schema.js';
import { compareSchemas } from '../../shared/dataplane/schema-rules.js';
import { partitionSpecOf, UNPARTITIONED } from '../../shared/iceberg/partition.js';
import {
  evolveIcebergSchema,
  IcebergSchemaChangeError,
  icebergSchemaOf,
  icebergTypeName,
  lakeFieldIdsOf,
  METADATA_ICEBERG_TYPES,
  promotes,
} from '../../shared/iceberg/schema.js';
import type { IcebergField, IcebergSchema, IcebergType } from '../../shared/iceberg/spec.js';
import { KINDS, logicalTypeArb, scalarTypeArb, tableSchemaArb } from '../harness/logical-arbitraries.js';

const col = (name: string, type: LogicalType, nullable = true, sourceType: string = type.kind): Column => ({
  name,
  type,
  nullable,
  sourceType,
});

const logical = logicalTypeArb(scalarTypeArb(), 2);
const schemaArb = tableSchemaArb(logical, { maxColumns: 10, sourceType: (t) => t.kind });

/**
 * Types that move into each other every way the rules know (widen, narrow, same Iceberg type,
 * scale change, kind change), so chains of schemas over a few names hit every case.
 */
const CHAIN_TYPES: LogicalType[] = [
  { kind: 'int8' },
  { kind: 'int16' },
  { kind: 'int32' },
  { kind: 'int64' },
  { kind: 'decimal', precision: 10, scale: 2 },
  { kind: 'decimal', precision: 12, scale: 2 },
  { kind: 'decimal', precision: 12, scale: 3 },
  { kind: 'decimal', precision: 20, scale: 0 },
  { kind: 'text' },
  { kind: 'float64' },
  { kind: 'timestamp', utc: true },
  { kind: 'timestamp', utc: false },
  { kind: 'list', element: { kind: 'int32' } },
  { kind: 'list', element: { kind: 'int64' } },
  { kind: 'list', element: { kind: 'text' } },
];
const POOL = ['id', 'a', 'b', 'c', 'd', 'e'];

const chainSchemaArb: fc.Arbitrary<Schema> = fc
  .shuffledSubarray(POOL, { minLength: 1 })
  .chain((names) =>
    fc.tuple(
      fc.tuple(
        ...names.map((name) =>
          fc.tuple(
            fc.constant(name),
            // Mostly a few types per name, so a name keeps a compatible type for a while.
            fc.oneof(
              { weight: 3, arbitrary: fc.constantFrom(...CHAIN_TYPES.slice(0, 4)) },
              { weight: 2, arbitrary: fc.constantFrom(...CHAIN_TYPES.slice(4, 8)) },
              { weight: 1, arbitrary: fc.constantFrom(...CHAIN_TYPES) },
            ),
            fc.boolean(),
          ),
        ),
      ),
      fc.integer({ min: 0, max: 2 }),
    ),
  )
  .map(([cols, pk]) => ({
    columns: cols.map(([name, type, nullable]) => col(name, type, nullable)),
    primaryKey: cols.slice(0, pk).map(([n]) => n),
  }));

/** Every id of a schema with the path it names: `name`, `name.element`, `name.element.element`. */
function idPaths(schema: IcebergSchema): [number, string][] {
  const out: [number, string][] = [];
  const visit = (path: string, t: IcebergType) => {
    if (typeof t === 'object' && t.type === 'list') {
      out.push([t['element-id'], `${path}.element`]);
      visit(`${path}.element`, t.element);
    }
  };
  for (const f of schema.fields) {
    out.push([f.id, f.name]);
    visit(f.name, f.type);
  }
  return out;
}

/** The Iceberg type text of a field's type, for comparing with `icebergTypeName`. */
function typeText(t: IcebergType): string {
  if (typeof t === 'string') return t;
  if (t.type === 'list') return `list<${typeText(t.element)}>`;
  throw new Error(`unexpected ${JSON.stringify(t)}`);
}

/** Whether Iceberg type `wide` is `narrow` or a promotion of it, element by element. */
function atLeast(wide: IcebergType, narrow: IcebergType): boolean {
  if (typeof wide === 'string' && typeof narrow === 'string')
    return wide === narrow || promotes(narrow, wide);
  if (
    typeof wide === 'object' &&
    typeof narrow === 'object' &&
    wide.type === 'list' &&
    narrow.type === 'list'
  )
    return atLeast(wide.element, narrow.element);
  return false;
}

const field = (s: IcebergSchema, name: string): IcebergField => {
  const f = s.fields.find((x) => x.name === name);
  if (!f) throw new Error(`no field ${name}`);
  return f;
};

describe('the Iceberg type of every logical kind', () => {
  it('follows docs/types.md for every kind the lake writes', () => {
    const expected: [LogicalType, string][] = [
      [{ kind: 'bool' }, 'boolean'],
      [{ kind: 'int8' }, 'int'],
      [{ kind: 'int16' }, 'int'],
      [{ kind: 'int32' }, 'int'],
      [{ kind: 'int64' }, 'long'],
      [{ kind: 'float64' }, 'double'],
      [{ kind: 'decimal', precision: 20, scale: 0 }, 'decimal(20, 0)'],
      [{ kind: 'decimal', precision: 38, scale: 10 }, 'decimal(38, 10)'],
      [{ kind: 'decimal', precision: 1, scale: 0 }, 'decimal(1, 0)'],
      [{ kind: 'decimal', precision: 18, scale: 18 }, 'decimal(18, 18)'],
      [{ kind: 'text' }, 'string'],
      [{ kind: 'binary' }, 'binary'],
      [{ kind: 'date' }, 'date'],
      [{ kind: 'timestamp', utc: false }, 'timestamp'],
      [{ kind: 'timestamp', utc: true }, 'timestamptz'],
      [{ kind: 'list', element: { kind: 'int16' } }, 'list<int>'],
      [{ kind: 'list', element: { kind: 'list', element: { kind: 'int64' } } }, 'list<list<long>>'],
    ];
    for (const [t, name] of expected) expect(icebergTypeName(t), JSON.stringify(t)).toBe(name);
    // Every kind of the harness' list is covered by some row of the table above.
    const kinds = new Set(expected.map(([t]) => t.kind));
    for (const t of KINDS) expect(kinds.has(t.kind), t.kind).toBe(true);
  });

  it('refuses decimals no lake column has (precision over 38, scale outside 0..p): those are text', () => {
    expect(() => icebergTypeName({ kind: 'decimal', precision: 39, scale: 0 })).toThrow(/1\.\.38/);
    expect(() => icebergTypeName({ kind: 'decimal', precision: 5, scale: 6 })).toThrow(/scale/);
  });

  it('gives the metadata columns their types, required as the lake writes them, with a doc', () => {
    const { schema } = icebergSchemaOf({
      columns: [col('id', { kind: 'int64' }, false)],
      primaryKey: ['id'],
    });
    const meta = schema.fields.slice(1);
    expect(meta.map((f) => [f.name, f.type, f.required])).toEqual([
      ['__op', 'string', true],
      ['__pos', 'string', true],
      ['__commit_ts', 'timestamptz', false],
      ['__ingest_ts', 'timestamptz', true],
      ['__snapshot', 'boolean', true],
      ['__phase', 'string', true],
    ]);
    expect(meta.map((f) => f.type)).toEqual(METADATA_COLUMNS.map((n) => METADATA_ICEBERG_TYPES[n]));
    // Required exactly where the lake's Parquet column is REQUIRED.
    const lake = lakeSchema({ columns: [], primaryKey: [] }).fields;
    expect(meta.map((f) => f.required)).toEqual(lake.map((f) => !f.nullable));
    for (const f of meta) expect(f.doc).toMatch(/\w/);
  });
});

describe('a new table', () => {
  it('numbers the columns 1.. in lake order, metadata after data, then list elements; schema 0', () => {
    const lake: Schema = {
      columns: [
        col('id', { kind: 'int64' }, false),
        col('tags', { kind: 'list', element: { kind: 'text' } }),
        col('amount', { kind: 'decimal', precision: 12, scale: 2 }, false),
        col('grid', { kind: 'list', element: { kind: 'list', element: { kind: 'int32' } } }),
      ],
      primaryKey: ['id'],
    };
    const { schema, lastColumnId, changed, updates } = icebergSchemaOf(lake);
    expect(schema['schema-id']).toBe(0);
    expect(changed).toBe(true);
    expect(updates).toEqual([]);
    expect(schema.fields.map((f) => [f.id, f.name])).toEqual([
      [1, 'id'],
      [2, 'tags'],
      [3, 'amount'],
      [4, 'grid'],
      ...METADATA_COLUMNS.map((n, i) => [5 + i, n]),
    ]);
    expect(field(schema, 'tags').type).toEqual({
      type: 'list',
      'element-id': 11,
      element: 'string',
      'element-required': false,
    });
    expect(field(schema, 'grid').type).toEqual({
      type: 'list',
      'element-id': 12,
      element: { type: 'list', 'element-id': 13, element: 'int', 'element-required': false },
      'element-required': false,
    });
    expect(lastColumnId).toBe(13);
    expect(field(schema, 'id').required).toBe(true);
    expect(field(schema, 'tags').required).toBe(false);
    expect(schema['identifier-field-ids']).toEqual([1]);
    expect(lakeFieldIdsOf(schema).get('grid')).toEqual({ id: 4, element: { id: 12, element: { id: 13 } } });
    expect(lakeFieldIdsOf(schema).get('__phase')).toEqual({ id: 10 });
  });

  it('takes the key as identifier fields only when every key column is required and not a double', () => {
    const ids = (columns: Column[], primaryKey: string[]) =>
      icebergSchemaOf({ columns, primaryKey }).schema['identifier-field-ids'];
    const a = col('a', { kind: 'int32' }, false);
    const b = col('b', { kind: 'text' }, false);
    expect(ids([a, b], ['b', 'a'])).toEqual([2, 1]);
    // A MySQL key with a DATE: nullable (zero dates), so no identifier fields at all.
    expect(ids([a, col('d', { kind: 'date' }, true)], ['a', 'd'])).toBeUndefined();
    expect(ids([a, col('f', { kind: 'float64' }, false)], ['a', 'f'])).toBeUndefined();
    expect(ids([a, b], [])).toBeUndefined();
  });

  it('over random schemas: ids unique, 1..last-column-id, every column and element typed', () => {
    fc.assert(
      fc.property(schemaArb, (lake) => {
        const { schema, lastColumnId } = icebergSchemaOf(lake);
        const ids = idPaths(schema).map(([id]) => id);
        expect(new Set(ids).size).toBe(ids.length);
        expect([...ids].sort((x, y) => x - y)).toEqual(ids.map((_, i) => i + 1));
        expect(lastColumnId).toBe(ids.length);
        // Top-level ids come first, in lake order.
        expect(schema.fields.map((f) => f.id)).toEqual(schema.fields.map((_, i) => i + 1));
        lake.columns.forEach((c, i) => {
          const f = schema.fields[i]!;
          expect(f.name).toBe(c.name);
          expect(typeText(f.type)).toBe(icebergTypeName(c.type));
          expect(f.required).toBe(!c.nullable);
        });
        // lakeFieldIdsOf gives the same ids, element for element.
        const fromMap: number[] = [];
        const walk = (id: { id: number; element?: { id: number } }) => {
          fromMap.push(id.id);
          if (id.element) walk(id.element);
        };
        for (const f of schema.fields) walk(lakeFieldIdsOf(schema).get(f.name)!);
        expect(fromMap.sort((x, y) => x - y)).toEqual([...ids].sort((x, y) => x - y));
      }),
      { numRuns: 300 },
    );
  });
});

describe('schema evolution', () => {
  it('over random chains of schema changes: ids kept by name, new ones above last-column-id, never reused; refused exactly on a lake type change', () => {
    // How often each kind of update and the refusal came up: the property is only as good as these.
    const seen = new Map<string, number>();
    const count = (k: string) => seen.set(k, (seen.get(k) ?? 0) + 1);
    fc.assert(
      fc.property(fc.array(chainSchemaArb, { minLength: 2, maxLength: 10 }), (chain) => {
        let lake = chain[0]!;
        let { schema, lastColumnId } = icebergSchemaOf(lake);
        const pathOfId = new Map<number, string>(idPaths(schema));
        for (const next of chain.slice(1)) {
          const typeChanged = compareSchemas(lake, next).some((c) => c.kind === 'type-changed');
          let result: ReturnType<typeof evolveIcebergSchema>;
          try {
            result = evolveIcebergSchema(schema, lastColumnId, next);
          } catch (e) {
            expect(e).toBeInstanceOf(IcebergSchemaChangeError);
            expect(typeChanged).toBe(true);
            count('refused');
            continue; // nothing changed: the table keeps its schema and its last lake schema
          }
          expect(typeChanged).toBe(false);
          for (const u of result.updates) count(u.kind);
          if (compareSchemas(lake, next).some((c) => c.kind === 'renamed')) count('renamed');
          const before = new Map(idPaths(schema).map(([id, p]) => [p, id]));
          const now = idPaths(result.schema);
          const ids = now.map(([id]) => id);
          expect(new Set(ids).size).toBe(ids.length);
          for (const [id, path] of now) {
            // Kept by name (and element path), else new: above the previous last-column-id.
            if (before.has(path)) expect(id).toBe(before.get(path));
            else expect(id).toBeGreaterThan(lastColumnId);
            // An id never names another path, across the whole history.
            expect(pathOfId.get(id) ?? path).toBe(path);
            pathOfId.set(id, path);
          }
          expect(result.lastColumnId).toBeGreaterThanOrEqual(lastColumnId);
          expect(result.lastColumnId).toBe(Math.max(lastColumnId, ...ids));
          // The types: the lake's, or wider where the lake narrowed.
          next.columns.forEach((c, i) => {
            const f = result.schema.fields[i]!;
            expect(f.name).toBe(c.name);
            const lakeType = icebergSchemaOf({ columns: [c], primaryKey: [] }).schema.fields[0]!.type;
            expect(atLeast(f.type, lakeType), `${c.name}: ${typeText(f.type)} vs ${typeText(lakeType)}`).toBe(
              true,
            );
            if (f.required) expect(c.nullable).toBe(false);
            const was = schema.fields.find((x) => x.name === c.name);
            if (was === undefined) expect(f.required).toBe(false);
            else if (!was.required) expect(f.required).toBe(false);
          });
          expect(result.changed).toBe(JSON.stringify(result.schema) !== JSON.stringify(schema));
          expect(result.schema['schema-id']).toBe(schema['schema-id'] + (result.changed ? 1 : 0));
          // The same lake schema again changes nothing.
          const again = evolveIcebergSchema(result.schema, result.lastColumnId, next);
          expect(again.changed).toBe(false);
          expect(again.updates.filter((u) => u.kind !== 'keep-wider')).toEqual([]);
          expect(again.schema).toEqual(result.schema);
          expect(again.lastColumnId).toBe(result.lastColumnId);
          ({ schema, lastColumnId } = result);
          lake = next;
        }
      }),
      { numRuns: 400 },
    );
    for (const kind of [
      'refused',
      'renamed',
      'add-column',
      'drop-column',
      'promote',
      'keep-wider',
      'make-optional',
      'move-columns',
      'identifier-fields',
    ])
      expect(seen.get(kind) ?? 0, kind).toBeGreaterThan(20);
  });

  const base: Schema = {
    columns: [
      col('id', { kind: 'int32' }, false, 'integer'),
      col('total', { kind: 'decimal', precision: 10, scale: 2 }, false, 'numeric(10,2)'),
      col('tags', { kind: 'list', element: { kind: 'int32' } }, true, 'integer[]'),
    ],
    primaryKey: ['id'],
  };
  const first = icebergSchemaOf(base);
  const evolve = (columns: Column[], primaryKey: string[] = ['id']) =>
    icebergSchemaOf({ columns, primaryKey }, first, { table: 'public.orders' });

  it('promotes int -> long, decimal precision up, a list element; a widening among int8..int32 changes nothing', () => {
    const r = evolve([
      col('id', { kind: 'int64' }, false, 'bigint'),
      col('total', { kind: 'decimal', precision: 12, scale: 2 }, false),
      col('tags', { kind: 'list', element: { kind: 'int64' } }),
    ]);
    expect(r.updates).toEqual([
      { kind: 'promote', path: 'id', from: 'int', to: 'long' },
      { kind: 'promote', path: 'total', from: 'decimal(10, 2)', to: 'decimal(12, 2)' },
      { kind: 'promote', path: 'tags.element', from: 'int', to: 'long' },
    ]);
    expect(r.schema['schema-id']).toBe(1);
    expect(r.lastColumnId).toBe(first.lastColumnId);
    expect(field(r.schema, 'tags').type).toMatchObject({ 'element-id': 10, element: 'long' });
    const small = icebergSchemaOf({ columns: [col('n', { kind: 'int8' })], primaryKey: [] });
    const wider = icebergSchemaOf({ columns: [col('n', { kind: 'int32' })], primaryKey: [] }, small);
    expect(wider.changed).toBe(false);
  });

  it('keeps the wider type on a narrowing (newer files read under it)', () => {
    const wide = evolve([col('id', { kind: 'int64' }, false), ...base.columns.slice(1)]);
    const narrow = icebergSchemaOf(base, wide);
    expect(field(narrow.schema, 'id').type).toBe('long');
    expect(narrow.changed).toBe(false);
    expect(narrow.updates).toEqual([{ kind: 'keep-wider', path: 'id', type: 'long', lake: 'int' }]);
  });

  it('makes a rename a drop and an add: a new id, the old one never given again', () => {
    const renamedLake: Schema = {
      columns: [base.columns[0]!, col('amount', base.columns[1]!.type, false), base.columns[2]!],
      primaryKey: ['id'],
    };
    // The lake rules call it a rename; the Iceberg table takes it as a drop and an add.
    expect(compareSchemas(base, renamedLake).map((c) => c.kind)).toEqual(['renamed']);
    const renamed = icebergSchemaOf(renamedLake, first);
    const amount = field(renamed.schema, 'amount');
    expect(amount.id).toBe(first.lastColumnId + 1);
    expect(amount.required).toBe(false);
    expect(renamed.updates).toEqual([
      { kind: 'add-column', name: 'amount', id: 11, type: 'decimal(10, 2)' },
      { kind: 'drop-column', name: 'total', id: 2 },
    ]);
    // The old name back: a new id again, not 2.
    const back = icebergSchemaOf(base, renamed);
    expect(field(back.schema, 'total').id).toBe(12);
    expect(back.lastColumnId).toBe(12);
  });

  it('adds a list column with a new element id, optional; drops one; follows the key and the order', () => {
    const r = evolve(
      [
        col('notes', { kind: 'list', element: { kind: 'text' } }, false),
        col('total', { kind: 'decimal', precision: 10, scale: 2 }, true),
        col('id', { kind: 'int32' }, false),
      ],
      ['id', 'total'],
    );
    expect(field(r.schema, 'notes')).toEqual({
      id: 11,
      name: 'notes',
      required: false,
      type: { type: 'list', 'element-id': 12, element: 'string', 'element-required': false },
    });
    expect(r.updates.map((u) => u.kind)).toEqual([
      'add-column',
      'make-optional',
      'drop-column',
      'move-columns',
      'identifier-fields',
    ]);
    // `total` is nullable now, so the key (id, total) cannot be identifier fields.
    expect(r.schema['identifier-field-ids']).toBeUndefined();
    // NOT NULL again: Iceberg never makes a column required again.
    const again = icebergSchemaOf(
      {
        columns: [col('id', { kind: 'int32' }, false), col('total', base.columns[1]!.type, false)],
        primaryKey: ['id'],
      },
      r,
    );
    expect(field(again.schema, 'total').required).toBe(false);
  });

  it('refuses a change Iceberg cannot take, naming the column, both types and the ways on', () => {
    const refused: [Column, string, string][] = [
      [
        col('total', { kind: 'decimal', precision: 10, scale: 3 }, false, 'numeric(10,3)'),
        'decimal(10, 2)',
        'decimal(10, 3)',
      ],
      [col('total', { kind: 'text' }, false, 'numeric'), 'decimal(10, 2)', 'string'],
      [
        col('id', { kind: 'decimal', precision: 20, scale: 0 }, false, 'bigint unsigned'),
        'int',
        'decimal(20, 0)',
      ],
      [col('id', { kind: 'float64' }, false), 'int', 'double'],
      [col('tags', { kind: 'text' }), 'list<int>', 'string'],
      [col('tags', { kind: 'list', element: { kind: 'text' } }), 'list<int>', 'list<string>'],
    ];
    for (const [changed, from, to] of refused) {
      const columns = base.columns.map((c) => (c.name === changed.name ? changed : c));
      let error: unknown;
      try {
        evolve(columns);
      } catch (e) {
        error = e;
      }
      expect(error, changed.name).toBeInstanceOf(IcebergSchemaChangeError);
      const e = error as IcebergSchemaChangeError;
      expect(e.code).toBe('ICEBERG_TYPE_CHANGE_REFUSED');
      const where = changed.name === 'tags' && to.startsWith('list') ? 'tags.element' : changed.name;
      expect(e.column).toBe(where);
      expect(e.message).toContain(`public.orders: column "${where}"`);
      expect(e.message).toContain(
        where === 'tags.element' ? 'from Iceberg int to string' : `from Iceberg ${from} to ${to}`,
      );
      expect(e.message).toContain(`source type ${changed.sourceType}`);
      expect(e.message).toMatch(/undo the change at the source/);
      expect(e.message).toMatch(/tidemark reset --delete-objects/);
      expect(e.message).toMatch(/new field id/);
    }
    const ts = icebergSchemaOf({ columns: [col('at', { kind: 'timestamp', utc: false })], primaryKey: [] });
    expect(() =>
      icebergSchemaOf({ columns: [col('at', { kind: 'timestamp', utc: true })], primaryKey: [] }, ts),
    ).toThrow(/from Iceberg timestamp to timestamptz/);
  });

  it('never gives an id at or below last-column-id, even one no current column has', () => {
    // A table whose columns 11..20 were dropped long ago: last-column-id 20.
    const r = icebergSchemaOf(
      { columns: [...base.columns, col('x', { kind: 'bool' })], primaryKey: ['id'] },
      {
        schema: first.schema,
        lastColumnId: 20,
      },
    );
    expect(field(r.schema, 'x').id).toBe(21);
    // And a last-column-id below the ids in use (broken metadata) never makes one given twice.
    const low = icebergSchemaOf(
      { columns: [...base.columns, col('x', { kind: 'bool' })], primaryKey: ['id'] },
      {
        schema: first.schema,
        lastColumnId: 3,
      },
    );
    expect(field(low.schema, 'x').id).toBe(first.lastColumnId + 1);
  });

  it('reads decimals as a reader may space them ("decimal(10,2)")', () => {
    const spaced: IcebergSchema = JSON.parse(
      JSON.stringify(first.schema).replace('decimal(10, 2)', 'decimal(10,2)'),
    );
    const r = icebergSchemaOf(base, { schema: spaced, lastColumnId: first.lastColumnId });
    expect(r.changed).toBe(false);
  });
});

describe('partition specs', () => {
  const lake: Schema = {
    columns: [
      col('id', { kind: 'int64' }, false),
      col('region', { kind: 'text' }, false),
      col('day', { kind: 'date' }, false),
      col('price', { kind: 'float64' }),
      col('tags', { kind: 'list', element: { kind: 'text' } }),
      col('id_bucket', { kind: 'int32' }),
    ],
    primaryKey: ['id', 'region', 'day'],
  };
  const { schema } = icebergSchemaOf(lake);
  const versions = { primaryKey: lake.primaryKey, rows: 'versions' as const };
  const current = { primaryKey: lake.primaryKey, rows: 'current' as const };

  it('is unpartitioned by default: spec 0, no fields, last-partition-id 999', () => {
    expect(partitionSpecOf(schema, versions)).toEqual(UNPARTITIONED);
    expect(UNPARTITIONED).toEqual({ spec: { 'spec-id': 0, fields: [] }, lastPartitionId: 999 });
  });

  it('takes key columns with fitting transforms, ids from 1000, named as Iceberg names them', () => {
    const r = partitionSpecOf(schema, current, [
      { column: 'region', transform: 'identity' },
      { column: 'region', transform: 'truncate[2]' },
      { column: 'day', transform: 'month' },
    ]);
    expect(r).toEqual({
      spec: {
        'spec-id': 0,
        fields: [
          { 'source-id': 2, 'field-id': 1000, name: 'region', transform: 'identity' },
          { 'source-id': 2, 'field-id': 1001, name: 'region_trunc', transform: 'truncate[2]' },
          { 'source-id': 3, 'field-id': 1002, name: 'day_month', transform: 'month' },
        ],
      },
      lastPartitionId: 1002,
    });
  });

  it('takes __commit_ts by year/month/day/hour in a change log only', () => {
    const r = partitionSpecOf(schema, versions, [{ column: '__commit_ts', transform: 'day' }]);
    expect(r.spec.fields).toEqual([
      {
        'source-id': field(schema, '__commit_ts').id,
        'field-id': 1000,
        name: '__commit_ts_day',
        transform: 'day',
      },
    ]);
    expect(() => partitionSpecOf(schema, current, [{ column: '__commit_ts', transform: 'day' }])).toThrow(
      /would move between partitions/,
    );
    expect(() =>
      partitionSpecOf(schema, versions, [{ column: '__commit_ts', transform: 'identity' }]),
    ).toThrow(/year, month, day or hour only/);
  });

  it('refuses other columns, unfit transforms, twice the same field and names of columns', () => {
    const refusals: [{ column: string; transform: string }, RegExp][] = [
      [{ column: 'price', transform: 'identity' }, /only the primary key's columns/],
      [{ column: '__ingest_ts', transform: 'day' }, /only the primary key's columns/],
      [{ column: 'nope', transform: 'identity' }, /no column "nope"/],
      [{ column: 'day', transform: 'hour' }, /hour does not apply to a date column/],
      [{ column: 'id', transform: 'day' }, /day does not apply to a long column/],
      [{ column: 'region', transform: 'bucket[0]' }, /N from 1/],
      [{ column: 'region', transform: 'zorder' }, /unknown transform/],
      [{ column: 'id', transform: 'bucket[16]' }, /"id_bucket" is a column's/],
    ];
    for (const [request, message] of refusals) {
      let error: unknown;
      try {
        partitionSpecOf(schema, versions, [request], { tableName: 'public.t' });
      } catch (e) {
        error = e;
      }
      expect((error as { code?: string }).code, JSON.stringify(request)).toBe('ICEBERG_PARTITION_INVALID');
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).toContain(
        `public.t: partition field ${request.transform}(${request.column})`,
      );
    }
    const keyed = { primaryKey: ['id', 'tags'], rows: 'current' as const };
    expect(() => partitionSpecOf(schema, keyed, [{ column: 'tags', transform: 'identity' }])).toThrow(
      /list column/,
    );
    expect(() =>
      partitionSpecOf(schema, current, [
        { column: 'id', transform: 'identity' },
        { column: 'id', transform: 'identity' },
      ]),
    ).toThrow(/asked for twice/);
    const none = { primaryKey: [], rows: 'current' as const };
    expect(() => partitionSpecOf(schema, none, [{ column: 'id', transform: 'identity' }])).toThrow(
      /no primary key/,
    );
  });
});
