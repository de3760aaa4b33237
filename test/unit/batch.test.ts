import { DataType, type RecordBatch, Table, TimeUnit, Type, tableFromIPC, tableToIPC } from 'apache-arrow';
import { describe, expect, it } from 'vitest';
import { BatchError, newBatch, requireUpsertKey } from '../../shared/dataplane/batch.js';
import { encodeRows } from '../../shared/dataplane/encoder.js';
import { METADATA_COLUMNS, Op } from '../../shared/dataplane/metadata.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { wireSchema } from '../../shared/dataplane/wire.js';

const schema: Schema = {
  columns: [
    { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
    { name: 'name', type: { kind: 'text' }, nullable: true, sourceType: 'text' },
  ],
  primaryKey: ['id'],
};

function record(): RecordBatch {
  return encodeRows(
    schema,
    [
      { id: 1n, name: 'a' },
      { id: 2n, name: null },
    ],
    {
      posPrefix: 'i000000000001',
      ordinalBase: 0,
      op: Op.update,
      phase: 'incremental',
      ingestTsNanos: 1_700_000_000_123_456_789n,
      commitTsNanos: null,
      snapshot: false,
    },
  );
}

describe('Batch', () => {
  it('rejects an unset or unknown write mode instead of defaulting', () => {
    expect(() =>
      newBatch({ table: 't', record: record(), watermark: undefined, writeMode: undefined }),
    ).toThrow(BatchError);
    expect(() =>
      newBatch({
        table: 't',
        record: record(),
        watermark: undefined,
        writeMode: 'merge' as unknown as 'append',
      }),
    ).toThrow(/must be "upsert" or "append"/);
  });

  it('rejects a snapshot state outside the closed set and a record without the metadata tail', () => {
    expect(() =>
      newBatch({
        table: 't',
        record: record(),
        watermark: undefined,
        writeMode: 'append',
        snapshotState: 'done' as never,
      }),
    ).toThrow(/closed set/);
    const bare = record().select(['id', 'name']);
    expect(() => newBatch({ table: 't', record: bare, watermark: undefined, writeMode: 'append' })).toThrow(
      /metadata columns/,
    );
  });

  it('survives an Arrow IPC round trip with the six metadata columns, their types and order', () => {
    const b = newBatch({
      table: 'public.t',
      record: record(),
      watermark: 'i00000000000100000001',
      writeMode: 'upsert',
    });
    const back = tableFromIPC(tableToIPC(new Table(b.record)));
    const fields = back.schema.fields;
    expect(fields.map((f) => f.name)).toEqual(['id', 'name', ...METADATA_COLUMNS]);
    const byName = Object.fromEntries(fields.map((f) => [f.name, f]));
    expect(String(byName.__op!.type)).toBe('Uint8');
    expect(byName.__pos!.typeId).toBe(Type.Utf8);
    for (const ts of ['__commit_ts', '__ingest_ts']) {
      const t = byName[ts]!.type as { unit: TimeUnit; timezone: string | null };
      expect(DataType.isTimestamp(byName[ts]!.type)).toBe(true);
      expect(t.unit).toBe(TimeUnit.NANOSECOND);
      expect(t.timezone).toBe('UTC');
    }
    expect(byName.__commit_ts!.nullable).toBe(true);
    expect(byName.__ingest_ts!.nullable).toBe(false);
    expect(byName.__snapshot!.typeId).toBe(Type.Bool);
    expect(byName.__phase!.typeId).toBe(Type.Utf8);
    const row1 = back.get(1)!.toJSON() as Record<string, unknown>;
    expect(row1.__pos).toBe('i00000000000100000001');
    expect(row1.__op).toBe(Op.update);
    expect(row1.__commit_ts).toBeNull();
    expect(row1.__phase).toBe('incremental');
    expect(row1.name).toBeNull();
    expect(back.getChild('__ingest_ts')!.data[0]!.values[0]).toBe(1_700_000_000_123_456_789n);
  });

  it('requires a primary key for upsert and refuses data columns named like metadata', () => {
    expect(() => requireUpsertKey('t', 'upsert', { ...schema, primaryKey: [] })).toThrow(/no primary key/);
    expect(() => requireUpsertKey('t', 'append', { ...schema, primaryKey: [] })).not.toThrow();
    expect(() =>
      wireSchema({
        ...schema,
        columns: [
          ...schema.columns,
          { name: '__pos', type: { kind: 'text' }, nullable: true, sourceType: 'text' },
        ],
      }),
    ).toThrow(/collides with a tidemark metadata column/);
  });
});
