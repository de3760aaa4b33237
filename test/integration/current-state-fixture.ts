/**
 * What the current-state tests share (current-state-table.test.ts, convert-current-state.test.ts):
 * the `public.items` table (id bigint key, name text), its write target, changes as
 * `[op, id, name]` turned into one write's batches (each change a batch of its own op, positions
 * rising), and the table read back by pyiceberg and icebird as `[id, name]` rows by id.
 */
import { basename } from 'node:path';
import { icebergRead } from 'icebird';
import type { WriteTarget } from '../../shared/contracts/sink.js';
import { type Batch, newBatch } from '../../shared/dataplane/batch.js';
import type { OpCode } from '../../shared/dataplane/metadata.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { withFileFetch } from '../harness/file-fetch.js';
import { wireRecord } from '../harness/lake-record.js';
import { runReaderScript } from '../harness/readers.js';

export const TABLE = 'public.items';
export const SCHEMA: Schema = {
  columns: [
    { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
    { name: 'name', type: { kind: 'text' }, nullable: true, sourceType: 'text' },
  ],
  primaryKey: ['id'],
};
export const target: WriteTarget = { table: TABLE, writer: 'p.src', fence: 1, tableFormat: 'iceberg' };

/** One change: [op, id, name]. */
export type Change = readonly [OpCode, number, string | null];

/**
 * One write of `changes` in order, starting at position `j<seq>`: each change a batch of its own
 * (its own op), positions rising with the change's index.
 */
export function changeBatches(
  seq: number,
  changes: readonly Change[],
  writeMode: 'upsert' | 'append',
): { start: string; batches: Batch[] } {
  const start = `j${String(seq).padStart(12, '0')}`;
  const batches: Batch[] = changes.map(([op, id, name], i) =>
    newBatch({
      table: TABLE,
      record: wireRecord(SCHEMA, [{ id: BigInt(id), name }], {
        posPrefix: `${start}${String(i).padStart(4, '0')}`,
        op,
      }),
      watermark: undefined,
      writeMode,
    }),
  );
  return { start, batches };
}

export type Row = [number, string | null];
export const sortRows = (rows: Row[]): Row[] => rows.sort((a, b) => a[0] - b[0]);

/** The table at metadata file `location`, read by pyiceberg: its rows and their `__op`s. */
export async function pyicebergRows(location: string): Promise<{ rows: Row[]; ops: string[] }> {
  const { rows } = await runReaderScript<{ rows: Record<string, unknown>[] }>('read_table.py', [
    '--catalog',
    'static',
    '--metadata',
    location,
    '--order-by',
    'id',
  ]);
  return {
    rows: sortRows(rows.map((r) => [Number(r.id), r.name as string | null])),
    ops: rows.map((r) => String(r.__op)),
  };
}

/** The table at metadata file `location`, read by icebird. */
export async function icebirdRows(location: string): Promise<Row[]> {
  const tableUrl = location.slice(0, location.lastIndexOf('/metadata/'));
  const rows = await withFileFetch(() => icebergRead({ tableUrl, metadataFileName: basename(location) }));
  return sortRows(rows.map((r) => [Number(r.id), (r.name ?? null) as string | null]));
}
