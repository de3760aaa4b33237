/**
 * `tables[].partitionBy` through the real CLI (`bin/tidemark.js run`) from the harness Postgres
 * into a `file://` lake (Iceberg, `file` catalog), read by pyiceberg 0.12
 * (test/readers/partition_files.py): every source row once; each data file's partition tuple is
 * pyiceberg's `bucket[4]` of its rows' ids; a filter on `id` prunes files in pyiceberg's scan plan.
 * Then the same table asked for `bucket[8]`: the run stops with ICEBERG_PARTITION_MISMATCH and
 * writes nothing.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Spec, tableTarget } from '../../shared/config/spec.js';
import { transformOf } from '../../shared/iceberg/transforms.js';
import { readersMissing, runReaderScript } from '../harness/readers.js';
import { localSpec, postgresFixture, runCli, type SourceFixture } from './incremental/fixture.js';

let fx: SourceFixture;
beforeAll(async () => {
  fx = await postgresFixture('iceberg_partitions');
});
afterAll(async () => {
  await fx?.drop();
});

interface PartitionFiles {
  files: { path: string; records: number; partition: Record<string, unknown>; rows_partitions: unknown[] }[];
  planned: number;
}

const withPartitions = (spec: Spec, transform: string): Spec => ({
  ...spec,
  tables: spec.tables.map((t) => ({ ...t, partitionBy: [{ column: 'id', transform }] })),
});

describe.skipIf(readersMissing !== undefined)('partitionBy through the CLI, read by pyiceberg', () => {
  it('bucket[4](id): rows all there, one tuple per file as pyiceberg computes it, pruned by id; bucket[8] then refused', async () => {
    await fx.createTable();
    await fx.insertRange(1, 601, fx.plus(fx.ts('2024-01-01 00:00:00'), 'g', 'millisecond'));
    const local = localSpec(fx, { pageSize: 250 });
    const spec = withPartitions(local.spec, 'bucket[4]');
    const table = join(local.lakeDir, tableTarget(spec.tables[0]!));
    const files = (filter?: string) =>
      runReaderScript<PartitionFiles>('partition_files.py', [
        '--catalog',
        'static',
        '--metadata',
        `file://${table}`,
        ...(filter ? ['--filter', filter] : []),
      ]);

    const run = await runCli(local.dir, spec, ['run']);
    expect(run.stderr).not.toMatch(/ICEBERG_|Error/);
    expect(run.code).toBe(0);
    const all = await files();
    expect(all.files.reduce((n, f) => n + f.records, 0)).toBe(600);
    // 3 pages of up to 4 buckets each.
    expect(all.files.length).toBeGreaterThan(3);
    for (const f of all.files) expect(f.rows_partitions).toEqual([f.partition]);
    const read = await runReaderScript<{ rows: { id: number }[] }>('read_table.py', [
      '--catalog',
      'static',
      '--metadata',
      `file://${table}`,
      '--order-by',
      'id',
    ]);
    expect(read.rows.map((r) => Number(r.id))).toEqual((await fx.rows()).map((r) => Number(r.id)));
    const one = await files('id == 42');
    expect(one.planned).toBeLessThan(all.files.length);
    // At most the files of id 42's bucket (transforms.ts's bucket, itself checked against
    // pyiceberg's): the partition values prune, then the files' id bounds (pages are id ranges).
    const bucket42 = transformOf('bucket[4]', { kind: 'long' })(42n);
    expect(one.planned).toBeGreaterThanOrEqual(1);
    expect(one.planned).toBeLessThanOrEqual(
      all.files.filter((f) => f.partition.id_bucket === bucket42).length,
    );

    await fx.insertRange(601, 651, fx.plus(fx.ts('2024-01-02 00:00:00'), 'g', 'millisecond'));
    const refused = await runCli(local.dir, withPartitions(local.spec, 'bucket[8]'), ['run']);
    expect(refused.code).not.toBe(0);
    // ICEBERG_PARTITION_MISMATCH's words (the CLI prints the message; the code is in docs/errors.md).
    expect(refused.stderr).toContain(
      'is partitioned by { column: id, transform: bucket[4] }, but partitionBy asks for { column: id, transform: bucket[8] }',
    );
    expect((await files()).files.reduce((n, f) => n + f.records, 0)).toBe(600);
  });
});
