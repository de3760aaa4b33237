/**
 * `tidemark reset --table T --delete-objects` (the CLI) on an Iceberg table synced from Postgres
 * (a `file` catalog on a file lake; the spec leaves lake.tableFormat unset, so new tables are
 * Iceberg), read by pyiceberg as the table's current snapshot:
 * - a state lost, then reset with its objects deleted: the table is empty at once (the writer's
 *   files taken out of the snapshot before they were deleted), and the next run writes the table
 *   anew, which pyiceberg reads as exactly the source's rows, once each, although the new run's
 *   positions and fences start over and so repeat commit ids the table's older snapshots carry;
 * - the same with the state intact;
 * - the state's table format: kept by --keep-objects, cleared by --delete-objects, so the next run
 *   takes the spec's (here `plain`, after which the Iceberg table holds none of its rows).
 */
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Spec, tableTarget } from '../../shared/config/spec.js';
import { incrementalStateKey } from '../../shared/engine/incremental/state.js';
import { currentSnapshot } from '../../shared/iceberg/metadata.js';
import { openLakeCatalog } from '../../shared/iceberg/open-catalog.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { readersMissing, runReaderScript } from '../harness/readers.js';
import { localSpec, postgresFixture, runCli, runOnce, type SourceFixture } from './incremental/fixture.js';

const noPython = readersMissing === undefined ? undefined : `(SKIPPED: ${readersMissing})`;

let fx: SourceFixture;
beforeAll(async () => {
  fx = await postgresFixture('iceberg_reset');
});
afterAll(async () => {
  await fx?.drop();
});

async function syncAll(spec: Spec): Promise<void> {
  for (let i = 0; i < 20; i++) if (!(await runOnce(spec)).more) return;
  throw new Error('did not catch up in 20 runs');
}

describe.skipIf(noPython !== undefined)(
  `tidemark reset --delete-objects of an Iceberg table ${noPython ?? ''}`,
  () => {
    it('empties the table, and the next run writes it anew: pyiceberg reads the source rows once', async () => {
      await fx.createTable();
      const at = fx.plus(fx.ts('2024-01-01 00:00:00'), 'g', 'millisecond');
      const { spec, dir, lakeDir } = localSpec(fx, { pageSize: 300 });
      const target = tableTarget(spec.tables[0]!);
      const key = incrementalStateKey(spec.pipeline, target);
      const cli = (...args: string[]) => runCli(dir, spec, args);
      const lake = openLakeCatalog({ type: 'file' }, { store: new FileObjectStore(lakeDir), prefix: '' });
      const { ident } = lake.table(target);
      const table = async () => (await lake.catalog.loadTable(ident))!;
      const read = async () =>
        (
          await runReaderScript<{ rows: { id: number; v: number }[] }>('read_table.py', [
            '--catalog',
            'static',
            '--metadata',
            (await table()).metadataLocation,
            '--order-by',
            'id',
          ])
        ).rows.map((r) => [Number(r.id), r.v]);
      const source = async () => (await fx.rows()).map((r) => [Number(r.id), r.v]);
      const state = async () =>
        (await new FileCursorStore(spec.state.dir!).load(key)).value as
          | { tableFormat?: string; pending?: unknown; seq: number }
          | undefined;

      // Two runs, so that two lease fences name the table's files: the second starts at page 2.
      await fx.insertRange(1, 501, at);
      await syncAll(spec);
      await fx.insertRange(501, 1001, at);
      await syncAll(spec);
      expect(await read()).toEqual(await source());
      expect(await state()).toMatchObject({ tableFormat: 'iceberg', pending: expect.any(Object) });
      const before = (await table()).metadata.snapshots.map((s) => s.summary['tidemark.commit-id']);

      // 1. The state is lost: reset with --delete-objects; the table is empty at once.
      rmSync(spec.state.dir!, { recursive: true, force: true });
      const del = await cli('reset', '--table', target, '--delete-objects');
      expect(del.stderr).toBe('');
      expect(del.code).toBe(0);
      expect(del.stdout).toMatch(/deleted 4 object\(s\)/);
      expect(await read()).toEqual([]);
      expect(currentSnapshot((await table()).metadata)!.summary).toMatchObject({
        operation: 'delete',
        'deleted-data-files': '4',
        'deleted-records': '1000',
        'total-records': '0',
      });
      const reset = await state();
      expect(reset?.tableFormat).toBeUndefined();
      expect(reset?.pending).toBeUndefined();

      // The next run starts over (fence 2 again, pages from 0): commit ids the old snapshots carry.
      await fx.exec(`DELETE FROM ${fx.table} WHERE id <= 100`);
      await syncAll(spec);
      expect(await read()).toEqual(await source());
      expect((await read()).length).toBe(900);
      const after = (await table()).metadata.snapshots.map((s) => s.summary['tidemark.commit-id']);
      expect(after.slice(before.length + 1).filter((id) => before.includes(id))).not.toEqual([]);
      expect((await state())?.tableFormat).toBe('iceberg');

      // 2. The state intact: the same, and --keep-objects keeps the recorded table format.
      await fx.insertRange(1001, 1101, at);
      const keep = await cli('reset', '--table', target, '--keep-objects');
      expect(keep.code).toBe(0);
      expect(await state()).toMatchObject({ tableFormat: 'iceberg' });
      const again = await cli('reset', '--table', target, '--delete-objects');
      expect(again.code).toBe(0);
      expect(await read()).toEqual([]);
      await syncAll(spec);
      expect(await read()).toEqual(await source());
      expect((await read()).length).toBe(1000);

      // 3. --delete-objects lets the next run take the spec's table format: plain now.
      const plain: Spec = { ...spec, lake: { ...spec.lake, tableFormat: 'plain' } };
      const refused = await runOnce(plain).catch((e: unknown) => e as { code?: string });
      expect(refused).toMatchObject({ code: 'TABLE_FORMAT_MISMATCH' });
      const toPlain = await runCli(dir, plain, ['reset', '--table', target, '--delete-objects']);
      expect(toPlain.code).toBe(0);
      await syncAll(plain);
      expect((await state())?.tableFormat).toBe('plain');
      // The Iceberg table has none of the writer's rows; the plain objects hold them.
      expect(await read()).toEqual([]);
    });
  },
);
