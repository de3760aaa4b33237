import { describe, expect, it } from 'vitest';
import type { Schema } from '../../shared/dataplane/schema.js';
import { cursorTime, describeCursor } from '../../shared/engine/incremental/cursor-display.js';
import { encodeKey } from '../../shared/position/key-codec.js';

const schema: Schema = {
  columns: [
    { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
    {
      name: 'updated_at',
      type: { kind: 'timestamp', utc: true },
      nullable: false,
      sourceType: 'timestamptz',
    },
    { name: 'seq', type: { kind: 'int32' }, nullable: false, sourceType: 'integer' },
  ],
  primaryKey: ['id'],
};

describe('describeCursor', () => {
  it('renders (cursor, pk) tokens with exact microseconds', () => {
    const token = encodeKey(
      [{ kind: 'timestamp', utc: true }, { kind: 'int64' }],
      [1_704_067_200_000_001n, 42n],
    );
    expect(describeCursor(schema, 'updated_at', token)).toBe(
      'updated_at=2024-01-01 00:00:00.000001+00, id=42',
    );
  });

  it('renders a cursor-only token (table keyed by its cursor) and refuses what does not decode', () => {
    const noPk: Schema = { ...schema, primaryKey: [] };
    expect(describeCursor(noPk, 'seq', encodeKey([{ kind: 'int32' }], [7]))).toBe('seq=7');
    expect(describeCursor(schema, 'updated_at', 'k1.zz')).toBeUndefined();
    expect(describeCursor(schema, 'updated_at', '')).toBeUndefined();
    expect(describeCursor(schema, 'missing', 'k1.00')).toBeUndefined();
  });

  it('gives a timestamp cursor as a zoned or a wall-clock time, and nothing for other cursors', () => {
    const zoned = [{ kind: 'timestamp', utc: true } as const, { kind: 'int64' } as const];
    const token = encodeKey(zoned, [1_704_067_200_000_001n, 42n]);
    expect(cursorTime(schema, 'updated_at', token)).toEqual({ utc: 1_704_067_200_000_001n });
    const wall: Schema = {
      ...schema,
      columns: schema.columns.map((c) =>
        c.name === 'updated_at'
          ? { ...c, type: { kind: 'timestamp', utc: false }, sourceType: 'timestamp' }
          : c,
      ),
    };
    const wallToken = encodeKey([{ kind: 'timestamp', utc: false }, { kind: 'int64' }], [5n, 1n]);
    expect(cursorTime(wall, 'updated_at', wallToken)).toEqual({ wall: 5n });
    const intToken = encodeKey([{ kind: 'int32' }, { kind: 'int64' }], [7, 1n]);
    expect(cursorTime(schema, 'seq', intToken)).toBeUndefined();
    expect(cursorTime(schema, 'updated_at', '')).toBeUndefined();
  });
});
