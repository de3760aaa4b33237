/**
 * A child process for the `file` catalog's race test (iceberg-file-catalog.test.ts): one writer
 * that applies `count` commits to one table through `commitWithRetry`, against other processes
 * doing the same. Run as
 * `node --import tsx iceberg-catalog-worker.ts <lake dir> <writerId> <count> <faults 0|1>`; prints
 * `ready`, waits for a line on stdin (so all writers start together), then prints one JSON line
 * `{statuses, attempts}`.
 *
 * With faults, the store loses the reply of some metadata creates after doing them, and fails
 * others before doing them (both `unknown` to the catalog), so the race also settles unknown
 * outcomes by re-reading. Owns nothing but its own counts; writes no data or manifest files (the
 * snapshots name manifest lists that do not exist: only the metadata is under test).
 */
import { createInterface } from 'node:readline';
import { commitWithRetry, type TableIdent } from '../../shared/iceberg/catalog.js';
import { FileCatalog } from '../../shared/iceberg/file-catalog.js';
import { appendSnapshot, newSnapshotId } from '../../shared/iceberg/metadata.js';
import { FileObjectStore } from '../../shared/sink/file-object-store.js';
import type { ObjectStore } from '../../shared/sink/object-store.js';

const [dir, writerId, countText, faultsText] = process.argv.slice(2);
if (!dir || !writerId || !countText) {
  throw new Error('usage: iceberg-catalog-worker.ts <lake dir> <writerId> <count> <faults 0|1>');
}
const count = Number(countText);
const faults = faultsText === '1';
const RACE_TABLE: TableIdent = { namespace: 'race', name: 'events' };

/** The local store, losing some replies of metadata creates when `faults` is on. */
function storeWithFaults(inner: ObjectStore): ObjectStore {
  if (!faults) return inner;
  return {
    uri: (key) => inner.uri(key),
    put: (key, bytes) => inner.put(key, bytes),
    get: (key) => inner.get(key),
    list: (prefix, startAfter) => inner.list(prefix, startAfter),
    delete: (keys) => inner.delete(keys),
    async putIfAbsent(key, bytes) {
      const dice = key.endsWith('.metadata.json') ? Math.random() : 1;
      if (dice < 0.1)
        throw Object.assign(new Error('connection reset before the request'), { code: 'ECONNRESET' });
      const outcome = await inner.putIfAbsent(key, bytes);
      if (dice < 0.25) throw Object.assign(new Error('connection reset, reply lost'), { code: 'ECONNRESET' });
      return outcome;
    },
  };
}

const catalog = new FileCatalog({
  store: storeWithFaults(new FileObjectStore(dir)),
  tableKey: (t) => `${t.namespace}/${t.name}`,
});

process.stdout.write('ready\n');
await new Promise<void>((resolve) => {
  createInterface({ input: process.stdin }).once('line', () => resolve());
});

const statuses: Record<string, number> = {};
let attempts = 0;
for (let i = 1; i <= count; i++) {
  const commit = { writerId, commitId: `${writerId}-${i}` };
  const result = await commitWithRetry(
    catalog,
    RACE_TABLE,
    commit,
    (current) =>
      appendSnapshot(current.metadata, {
        snapshotId: newSnapshotId(current.metadata),
        manifestListPath: `${current.metadata.location}/metadata/snap-${commit.commitId}-v${current.version}.avro`,
        added: { dataFiles: 1, records: i, filesSize: 100 },
        commit,
        nowMs: Date.now(),
      }),
    { maxAttempts: 500, minWaitMs: 1, maxWaitMs: 20 },
  );
  statuses[result.status] = (statuses[result.status] ?? 0) + 1;
  attempts += result.attempts;
}
process.stdout.write(`${JSON.stringify({ statuses, attempts })}\n`);
process.stdin.destroy();
