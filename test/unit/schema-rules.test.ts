/**
 * The schema-change rules (shared/dataplane/schema-rules.ts): every kind of change is told apart
 * and handled as docs/schema-changes.md says, over random schemas (fast-check), and the stored
 * form and hash round-trip.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Column, LogicalType, Schema } from '../../shared/dataplane/schema.js';
import {
  compareSchemas,
  judgeSchema,
  parseStoredSchema,
  SchemaChangedError,
  schemaHash,
  schemaHashWithSourceTypes,
  storedSchema,
} from '../../shared/dataplane/schema-rules.js';
import { entryWritesSchema } from '../../shared/engine/cdc/state.js';
import { logicalTypeArb, scalarTypeArb, tableSchemaArb } from '../harness/logical-arbitraries.js';

const logical = logicalTypeArb(scalarTypeArb(37, 10), 1);
const schemaArb = tableSchemaArb(logical, { maxColumns: 8, sourceType: (t) => `src_${t.kind}` });

const col = (name: string, type: LogicalType, sourceType: string = type.kind, nullable = true): Column => ({
  name,
  type,
  nullable,
  sourceType,
});
const base: Schema = {
  columns: [
    col('id', { kind: 'int64' }, 'bigint', false),
    col('v', { kind: 'int32' }, 'integer'),
    col('note', { kind: 'text' }, 'text'),
    col('amount', { kind: 'decimal', precision: 10, scale: 2 }, 'numeric(10,2)'),
  ],
  primaryKey: ['id'],
};
const withColumn = (s: Schema, name: string, c: Partial<Column>): Schema => ({
  ...s,
  columns: s.columns.map((x) => (x.name === name ? { ...x, ...c } : x)),
});

describe('schema rules', () => {
  it('finds no change between a schema and itself, and hashes it the same', () => {
    fc.assert(
      fc.property(schemaArb, (s) => {
        expect(compareSchemas(s, s)).toEqual([]);
        expect(judgeSchema(s, structuredClone(s), 'stop').action).toBe('same');
        expect(schemaHash(structuredClone(s))).toBe(schemaHash(s));
      }),
    );
  });

  it('lets added columns through under either policy, and names them', () => {
    fc.assert(
      fc.property(schemaArb, logical, (s, type) => {
        const added = col('zz_added', type, 'whatever');
        const v = judgeSchema(s, { ...s, columns: [...s.columns, added] }, 'stop');
        expect(v.action).toBe('continue');
        expect(v.changes).toEqual([{ kind: 'added', column: added }]);
        expect(schemaHash({ ...s, columns: [...s.columns, added] })).not.toBe(schemaHash(s));
      }),
    );
  });

  it('stops on a dropped column whatever else changed, naming it', () => {
    fc.assert(
      fc.property(
        schemaArb,
        fc.nat(),
        fc.constantFrom('stop' as const, 'continue' as const),
        (s, i, policy) => {
          const gone = s.columns[i % s.columns.length]!;
          const current = { ...s, columns: s.columns.filter((c) => c !== gone) };
          const v = judgeSchema(s, current, policy);
          expect(v.action).toBe('stop');
          const e = new SchemaChangedError('a.t', v.stops, 'start');
          expect(e.code).toBe('SCHEMA_CHANGED');
          expect(e.message).toContain(`"${gone.name}"`);
          expect(e.message).toContain('tidemark schema accept --table a.t');
        },
      ),
    );
  });

  it('treats a nullability change as continue', () => {
    const v = judgeSchema(base, withColumn(base, 'v', { nullable: false }), 'stop');
    expect(v.action).toBe('continue');
    expect(v.changes.map((c) => c.kind)).toEqual(['nullability']);
  });

  it('widens int32 -> int64 and decimal precision up under onWiden only', () => {
    for (const current of [
      withColumn(base, 'v', { type: { kind: 'int64' }, sourceType: 'bigint' }),
      withColumn(base, 'amount', {
        type: { kind: 'decimal', precision: 12, scale: 2 },
        sourceType: 'numeric(12,2)',
      }),
    ]) {
      const stop = judgeSchema(base, current, 'stop');
      expect(stop.action).toBe('stop');
      expect(stop.stops.map((c) => c.kind)).toEqual(['widened']);
      expect(new SchemaChangedError('a.t', stop.stops, 'start').message).toContain('onWiden: continue');
      expect(judgeSchema(base, current, 'continue').action).toBe('continue');
    }
  });

  it('stops on narrowing, a scale change, a type swap and a UTC flag flip, whatever the policy', () => {
    const cases: [Schema, string][] = [
      [withColumn(base, 'v', { type: { kind: 'int16' }, sourceType: 'smallint' }), 'narrowed'],
      [withColumn(base, 'amount', { type: { kind: 'decimal', precision: 8, scale: 2 } }), 'narrowed'],
      [withColumn(base, 'amount', { type: { kind: 'decimal', precision: 12, scale: 3 } }), 'type-changed'],
      [withColumn(base, 'v', { type: { kind: 'text' }, sourceType: 'text' }), 'type-changed'],
      [withColumn(base, 'note', { type: { kind: 'int32' }, sourceType: 'integer' }), 'type-changed'],
    ];
    for (const [current, kind] of cases) {
      for (const policy of ['stop', 'continue'] as const) {
        const v = judgeSchema(base, current, policy);
        expect(v.action).toBe('stop');
        expect(v.stops.map((c) => c.kind)).toEqual([kind]);
      }
    }
    const ts: Schema = { columns: [col('t', { kind: 'timestamp', utc: false })], primaryKey: [] };
    expect(
      judgeSchema(ts, withColumn(ts, 't', { type: { kind: 'timestamp', utc: true } }), 'continue').action,
    ).toBe('stop');
  });

  it('continues on a source-type change that keeps the lake type (varchar length, real -> double)', () => {
    const s: Schema = { columns: [col('name', { kind: 'text' }, 'varchar(10)')], primaryKey: [] };
    const v = judgeSchema(s, withColumn(s, 'name', { sourceType: 'varchar(200)' }), 'stop');
    expect(v.action).toBe('continue');
    expect(v.changes.map((c) => c.kind)).toEqual(['source-type']);
  });

  it('calls a column replaced at the same position by one of the same type a rename, and stops', () => {
    const current: Schema = {
      ...base,
      columns: base.columns.map((c) => (c.name === 'note' ? { ...c, name: 'memo' } : c)),
    };
    const v = judgeSchema(base, current, 'continue');
    expect(v.action).toBe('stop');
    expect(v.stops).toEqual([{ kind: 'renamed', from: base.columns[2], to: current.columns[2] }]);
    expect(new SchemaChangedError('a.t', v.stops, 'start').message).toMatch(/"note" is gone and "memo"/);
  });

  it('stops on a changed primary key; continues on a reorder', () => {
    expect(
      judgeSchema(base, { ...base, primaryKey: ['id', 'v'] }, 'continue').stops.map((c) => c.kind),
    ).toEqual(['primary-key']);
    const reordered = { ...base, columns: [...base.columns].reverse() };
    const v = judgeSchema(base, reordered, 'stop');
    expect(v.action).toBe('continue');
    expect(v.changes.map((c) => c.kind)).toEqual(['reordered']);
  });

  it('round-trips the stored form; a malformed one is undefined', () => {
    fc.assert(
      fc.property(schemaArb, fc.integer({ min: 1, max: 1000 }), (s, version) => {
        const stored = storedSchema(s, version);
        const back = parseStoredSchema(JSON.parse(JSON.stringify(stored)));
        expect(back).toEqual(stored);
        expect(back!.hash).toBe(schemaHash(s));
        expect(compareSchemas(back!, s)).toEqual([]);
      }),
    );
    expect(
      parseStoredSchema({ version: 1, hash: 'x', columns: [{ name: 'a' }], primaryKey: [] }),
    ).toBeUndefined();
    expect(parseStoredSchema('nope')).toBeUndefined();
  });

  it('hashes a schema the same whatever its source types are spelled (catalog int(11), binlog int), and not otherwise', () => {
    fc.assert(
      fc.property(schemaArb, fc.array(fc.string(), { minLength: 8, maxLength: 8 }), (s, spellings) => {
        const respelled = { ...s, columns: s.columns.map((c, i) => ({ ...c, sourceType: spellings[i]! })) };
        expect(schemaHash(respelled)).toBe(schemaHash(s));
        const flipped = {
          ...s,
          columns: s.columns.map((c, i) => (i === 0 ? { ...c, nullable: !c.nullable } : c)),
        };
        expect(schemaHash(flipped)).not.toBe(schemaHash(s));
      }),
    );
  });

  it("a CDC entry writes a schema when its hash is the schema's, the source-typed hash of older releases, or none", () => {
    fc.assert(
      fc.property(schemaArb, (s) => {
        const entry = (schemaHash?: string) => ({
          rows: 0,
          objects: 0,
          ...(schemaHash ? { schemaHash } : {}),
        });
        expect(entryWritesSchema(entry(schemaHash(s)), s)).toBe(true);
        expect(entryWritesSchema(entry(schemaHashWithSourceTypes(s)), s)).toBe(true);
        expect(entryWritesSchema(entry(), s)).toBe(true);
        expect(entryWritesSchema(undefined, s)).toBe(true);
        const other = { ...s, columns: [...s.columns, col('zz_added', { kind: 'text' })] };
        expect(entryWritesSchema(entry(schemaHash(other)), s)).toBe(false);
        expect(entryWritesSchema(entry(schemaHashWithSourceTypes(other)), s)).toBe(false);
      }),
    );
  });

  it('offers a cdc table only the ways on that work for it: no reset', () => {
    const dropped = compareSchemas(base, { ...base, columns: base.columns.slice(0, 3) });
    for (const e of [
      new SchemaChangedError('t', dropped, 'stream'),
      new SchemaChangedError('t', [], 'start', 'hashes differ', { mode: 'cdc' }),
    ]) {
      expect(e.mode).toBe('cdc');
      expect(e.message).toContain('schema accept --table t');
      expect(e.message).toContain('target:');
      expect(e.message).not.toMatch(/\breset\b/);
    }
    const incremental = new SchemaChangedError('t', dropped, 'start');
    expect(incremental.mode).toBe('incremental');
    expect(incremental.message).toContain('tidemark reset --table t');
  });
});
