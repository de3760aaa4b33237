/**
 * The Parquet writer works from an esbuild CJS bundle, the way Lambda runs it: parquet-wasm's
 * node build reads its .wasm from `__dirname`, so the bundle only works with the .wasm copied
 * beside it, and only if nothing on the path uses `import.meta` (empty in CJS output). Bundles a
 * tiny entry over `openLakeSink`, runs it with plain node, and reads the object with DuckDB.
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { DuckDBInstance } from '@duckdb/node-api';
import { build } from 'esbuild';
import { afterAll, beforeAll, expect, it } from 'vitest';

const run = promisify(execFile);
const repo = resolve(import.meta.dirname, '../..');

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'tidemark-parquet-bundle-'));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

it('writes Parquet from a CJS bundle with the .wasm beside it', async () => {
  const entry = join(scratch, 'entry.ts');
  await writeFile(
    entry,
    `
import { BatchEncoder } from ${JSON.stringify(join(repo, 'shared/dataplane/encoder.ts'))};
import { newBatch } from ${JSON.stringify(join(repo, 'shared/dataplane/batch.ts'))};
import { openLakeSink } from ${JSON.stringify(join(repo, 'shared/sink/open-lake.ts'))};
const schema = { columns: [{ name: 'id', type: { kind: 'int64' as const }, nullable: false, sourceType: 'bigint' }], primaryKey: ['id'] };
const enc = new BatchEncoder(schema, { phase: 'incremental' });
for (let i = 0n; i < 3n; i++) { enc.appendRow({ id: i }); enc.appendMeta(1, 'i01' + i, null, false); }
const record = enc.finish(0n);
const sink = openLakeSink({ uri: 'file://' + process.argv[2] });
sink.write({ table: 'public.t', writer: 'test.bundle', fence: 1 }, schema, 'i01', [newBatch({ table: 'public.t', record, watermark: 'i012', writeMode: 'upsert' })])
  .then((refs) => console.log(JSON.stringify(refs)));
`,
  );
  const outDir = join(scratch, 'dist');
  const bundle = join(outDir, 'index.cjs');
  await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    outfile: bundle,
    absWorkingDir: repo,
    nodePaths: [join(repo, 'node_modules')],
    logLevel: 'silent',
  });
  const wasm = join(
    dirname(createRequire(join(repo, 'package.json')).resolve('parquet-wasm')),
    'parquet_wasm_bg.wasm',
  );
  await copyFile(wasm, join(outDir, 'parquet_wasm_bg.wasm'));

  const lake = join(scratch, 'lake');
  const { stdout } = await run(process.execPath, [bundle, lake], { cwd: scratch });
  const [ref] = JSON.parse(stdout) as { uri: string; rows: number }[];
  expect(ref).toMatchObject({ uri: `file://${lake}/public.t/test.bundle.i01.f00000001.parquet`, rows: 3 });
  const conn = await (await DuckDBInstance.create(':memory:')).connect();
  const rows = (
    await conn.runAndReadAll(
      `SELECT id::VARCHAR AS id, __op FROM read_parquet('${lake}/public.t/test.bundle.i01.f00000001.parquet') ORDER BY id`,
    )
  ).getRowObjects();
  conn.closeSync();
  expect(rows).toEqual([
    { id: '0', __op: 'u' },
    { id: '1', __op: 'u' },
    { id: '2', __op: 'u' },
  ]);
});
