import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyAppend, type StagedAppend } from '../../shared/iceberg/append.js';
import type { TableIdent } from '../../shared/iceberg/catalog.js';
import type { FileCatalog } from '../../shared/iceberg/file-catalog.js';
import { COMMIT_ID_SUMMARY_KEY, writerCommitProperty } from '../../shared/iceberg/metadata.js';
import type { IcebergSchema } from '../../shared/iceberg/spec.js';
import type { TableFolder } from '../../shared/iceberg/table-folder.js';
import { readersMissing, runReaderScript } from '../harness/readers.js';
import { FILE_A, FILE_B, newFileCatalogTable, ORDERS_IDENT, stageRows } from './iceberg-table-fixture.js';

const noPython = readersMissing === undefined ? undefined : `(pyiceberg SKIPPED: ${readersMissing})`;

const IDENT: TableIdent = ORDERS_IDENT;

let dir: string;
let catalog: FileCatalog;
let folder: TableFolder;
let schema: IcebergSchema;

beforeAll(async () => {
  ({ dir, catalog, folder, schema } = await newFileCatalogTable('iceberg-append'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Writes one data file of `rows` (positions from `posPrefix`) and stages its commit. */
const stage = (
  writerId: string,
  commitId: string,
  rows: readonly (readonly unknown[])[],
  posPrefix: string,
) => stageRows(folder, schema, { writerId, commitId }, rows, posPrefix);

const apply = (staged: StagedAppend) => applyAppend(catalog, IDENT, folder, staged, { nowMs: Date.now });

async function pyiceberg(): Promise<{ rows: Record<string, unknown>[] }> {
  return runReaderScript('read_table.py', [
    '--catalog',
    'static',
    '--metadata',
    (await catalog.loadTable(IDENT))!.metadataLocation,
    '--order-by',
    'id',
  ]);
}

describe('an Iceberg append: staged, then applied once', () => {
  let first: StagedAppend;

  it('applies a staged commit once, however often it is applied', async () => {
    first = await stage('shop.app', 'i0000000001-a1', FILE_A, 'i0000000001');
    const applied = await apply(first);
    expect(applied.status).toBe('committed');
    const again = await apply(first);
    expect(again.status).toBe('already-committed');
    const table = (await catalog.loadTable(IDENT))!.metadata;
    expect(table.snapshots).toHaveLength(1);
    expect(table.properties[writerCommitProperty('shop.app')]).toBe('i0000000001-a1');
    expect(table.snapshots[0]!.summary['added-records']).toBe(String(FILE_A.length));
  });

  it('adds a commit that two processes apply at the same time once', async () => {
    const second = await stage('shop.app', 'i0000000004-a1', FILE_B, 'i0000000004');
    const outcomes = await Promise.all([apply(second), apply(second), apply(second)]);
    expect(outcomes.filter((o) => o.status === 'committed')).toHaveLength(1);
    const table = (await catalog.loadTable(IDENT))!.metadata;
    const ids = table.snapshots.map((s) => s.summary[COMMIT_ID_SUMMARY_KEY]);
    expect(ids).toEqual(['i0000000001-a1', 'i0000000004-a1']);
    expect(table.snapshots.at(-1)!.summary['total-records']).toBe(String(FILE_A.length + FILE_B.length));
  });

  it("keeps another writer's commit made between two of ours", async () => {
    const other = await stage(
      'other.app',
      'i0000000009-b1',
      [[9, 1, 'fig', '1.00', null, 0n, 0, 1, true, null]],
      'i0000000009',
    );
    expect((await apply(other)).status).toBe('committed');
    // Ours again, decided before the other writer's commit: the rebase keeps both.
    expect((await apply(first)).status).toBe('already-committed');
    const table = (await catalog.loadTable(IDENT))!.metadata;
    expect(table.snapshots.at(-1)!.summary['total-records']).toBe(String(FILE_A.length + FILE_B.length + 1));
    expect(table.properties[writerCommitProperty('other.app')]).toBe('i0000000009-b1');
    expect(table.properties[writerCommitProperty('shop.app')]).toBe('i0000000004-a1');
  });

  it.skipIf(noPython !== undefined)(
    `is read by pyiceberg: every row of every commit, once ${noPython ?? ''}`,
    async () => {
      const { rows } = await pyiceberg();
      expect(rows.map((r) => Number(r.id))).toEqual([1, 2, 3, 4, 5, 9]);
      expect(rows.map((r) => r.name)).toEqual(['apple', FILE_A[1]![2], null, 'pear', 'zebra', 'fig']);
    },
    120_000,
  );
});
