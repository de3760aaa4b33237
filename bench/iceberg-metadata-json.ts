/**
 * What one Iceberg commit spends on its metadata.json at a given size (issue 30): every commit
 * parses the current file (tidemark's exact-integer parser, shared/iceberg/metadata-json.ts) and
 * serializes the next one; this times both on a real file, beside a plain `JSON.parse` of the same
 * text (which would lose 63-bit ids) and the fsynced create-only write of it
 * (FileObjectStore.putIfAbsent, in a temp folder removed afterwards). Medians of 5.
 *
 *   npm run bench -- iceberg-metadata-json <path of a vN.metadata.json>
 *
 * A big file to feed it: a table of `npm run bench -- iceberg-cdc` after a few thousand flushes.
 * Owns its temp folder only.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseTableMetadata, serializeTableMetadata } from '../shared/iceberg/metadata-json.js';
import { FileObjectStore } from '../shared/sink/file-object-store.js';
import { machineNote } from './support.js';

const file = process.argv[2];
if (file === undefined) {
  console.error('usage: npm run bench -- iceberg-metadata-json <path of a vN.metadata.json>');
  process.exit(2);
}
const RUNS = 5;
const text = readFileSync(file, 'utf8');

async function median(f: () => unknown): Promise<string> {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    await f();
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return times[RUNS >> 1]!.toFixed(1);
}

const metadata = parseTableMetadata(text, file);
console.log(`iceberg-metadata-json: ${machineNote()}`);
console.log(`${file}: ${text.length} bytes, ${metadata.snapshots.length} snapshots (medians of ${RUNS}, ms)`);
console.log(`  parseTableMetadata        ${await median(() => parseTableMetadata(text, file))}`);
console.log(`  serializeTableMetadata    ${await median(() => serializeTableMetadata(metadata))}`);
console.log(`  JSON.parse (no bigints)   ${await median(() => JSON.parse(text))}`);
const dir = mkdtempSync(join(tmpdir(), 'tidemark-metadata-json-'));
try {
  const store = new FileObjectStore(dir);
  const bytes = Buffer.from(serializeTableMetadata(metadata));
  let n = 0;
  console.log(
    `  putIfAbsent (fsynced)     ${await median(() => store.putIfAbsent(`v${n++}.metadata.json`, bytes))}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
