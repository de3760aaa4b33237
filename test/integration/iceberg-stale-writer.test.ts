/**
 * A stale writer against an Iceberg table (issue 30; docs/decisions/0024-iceberg-commits.md):
 * writer A reads page 1 and stalls right before its write while its lease runs out; writer B
 * takes the lease (a higher fence), recovers and syncs the table with the rows' newer versions;
 * then A wakes up. Its data file is written (S3 cannot fence a PUT) and its manifest staged, but
 * its state commit is refused (LEASE_LOST), so its catalog commit never happens: the table, read
 * by pyiceberg's scan plan, holds each source row version once and none of A's stale versions,
 * and a later run neither recovers nor rewrites anything. Checked against the catalog-first
 * order (test/harness/mutations.ts `catalogFirst` around A's sink): A's 100 stale versions then
 * reach the table and the first read-back assertion fails.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { incrementalTables } from '../../shared/config/spec.js';
import { incrementalStateKey } from '../../shared/engine/incremental/state.js';
import { silentLogger } from '../../shared/observability/log.js';
import { openPipeline } from '../../shared/pipeline/open.js';
import { runTable } from '../../shared/pipeline/run-table.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { readersMissing } from '../harness/readers.js';
import { staleWriterTakeover } from '../harness/stale-writer.js';
import { lakeRows, latest, localSpec, postgresFixture, type SourceFixture } from './incremental/fixture.js';

describe.skipIf(readersMissing)('a stale writer against an Iceberg table', () => {
  let fx: SourceFixture;
  beforeAll(async () => {
    fx = await postgresFixture('ice_stale');
  }, 120_000);
  afterAll(async () => {
    await fx?.drop();
  });

  it('cannot commit after the new lease holder recovered: the table holds each version once, none of the stale writer', async () => {
    await fx.exec(`DROP TABLE IF EXISTS ${fx.table}`);
    await fx.createTable();
    await fx.insertRange(1, 301, fx.plus(fx.ts('2024-01-01 00:00:00'), 'g', 'second'));
    const { spec, lakeDir } = localSpec(fx, { pageSize: 100 });
    expect(spec.lake.tableFormat).toBeUndefined(); // the default: a new table is an Iceberg table
    const table = incrementalTables(spec)[0]!;
    const target = table.table;
    const key = incrementalStateKey(spec.pipeline, target);
    const store = new FileCursorStore(spec.state.dir!);
    const baseA = await openPipeline(spec);
    const baseB = await openPipeline(spec);
    try {
      const warmup = await runTable(spec, table, baseB, {
        logger: silentLogger,
        owner: 'warmup',
        maxPages: 1,
      });
      expect(warmup.seqAfter).toBe(1);

      const { b, resumeA } = await staleWriterTakeover({
        spec,
        table,
        pipelineA: baseA,
        pipelineB: baseB,
        store,
        key,
        change: () => fx.exec(`UPDATE ${fx.table} SET v = v + 500 WHERE id BETWEEN 101 AND 200`),
      });
      expect(b).toMatchObject({ status: 'ok', seqBefore: 1, more: false });
      const before = await lakeRows(lakeDir, target, 'iceberg');

      // A wakes up: its data file and manifest are written, its state commit is refused, so
      // nothing of it reaches the table.
      expect(await resumeA()).toMatchObject({ code: 'LEASE_LOST' });
      const rows = await lakeRows(lakeDir, target, 'iceberg');
      expect(rows).toEqual(before);
      expect(latest(rows)).toEqual(await fx.rows());
      const versions = rows.filter((r) => r.id === '150');
      expect(versions.map((r) => r.v)).toEqual([650]);
      expect(new Set(rows.map((r) => `${r.id}/${r.pos}`)).size).toBe(rows.length);
      // A's file lies below the committed position (an orphan no snapshot references, for
      // maintenance), so a later run neither recovers nor rewrites anything.
      const after = await runTable(spec, table, baseB, { logger: silentLogger, owner: 'run-c' });
      expect(after).toMatchObject({ status: 'ok', rows: 0, recovered: 0 });
      expect(await lakeRows(lakeDir, target, 'iceberg')).toEqual(before);
    } finally {
      await baseA.close();
      await baseB.close();
    }
  }, 300_000);
});
