/**
 * A child process for the file cursor store's cross-process tests (cursor-store.test.ts). Run as
 * `node --import tsx cursor-store-worker.ts <mode> <dir> <key> <owner> <count>`: `count` is
 * the iterations, or for `crash` the payload size in characters. Every mode prints `ready` once
 * started; `lease` and `shared-owner` then wait for a line on stdin, so that all workers begin
 * together whatever their (slow, uneven) process start.
 *
 * Modes:
 * - `lease`: each iteration takes the lease (retrying while another process holds it), commits
 *   counter + 1 on the version it loaded, and releases. Prints {successes, conflicts,
 *   heldRetries, fences} (`fences`: the fence of every lease it got).
 * - `shared-owner`: every process uses the same owner, so the lease fences nothing and only the
 *   version compare-and-set under the file lock prevents lost updates. Prints the same counts.
 * - `crash`: takes the lease, prints `ready`, then commits large values forever until killed;
 *   each value carries its own version (`n`) and a fixed-size payload so a torn file shows.
 *
 * Owns nothing but its own counts; never deletes files.
 */
import { CursorConflictError, LeaseHeldError } from '../../shared/contracts/errors.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';

const [mode, dir, key, owner, iterationsText] = process.argv.slice(2);
if (!mode || !dir || !key || !owner) {
  throw new Error('usage: cursor-store-worker.ts <lease|shared-owner|crash> <dir> <key> <owner> <count>');
}
const iterations = Number(iterationsText ?? '0');
const payloadChars = iterations;
const store = new FileCursorStore(dir);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function counterOf(value: unknown): number {
  return ((value as { counter?: number } | undefined)?.counter ?? 0) as number;
}

async function leaseMode(): Promise<void> {
  let successes = 0;
  let conflicts = 0;
  let heldRetries = 0;
  const fences: number[] = [];
  for (let i = 0; i < iterations; i++) {
    let record: Awaited<ReturnType<FileCursorStore['acquire']>>;
    for (;;) {
      try {
        record = await store.acquire(key!, owner!, 30_000);
        fences.push(record.lease!.fence);
        break;
      } catch (err) {
        if (!(err instanceof LeaseHeldError)) throw err;
        heldRetries++;
        await sleep(1 + Math.random() * 4);
      }
    }
    try {
      await store.commit(key!, {
        owner: owner!,
        expectedVersion: record.version,
        value: { counter: counterOf(record.value) + 1, by: owner },
      });
      successes++;
    } catch (err) {
      if (!(err instanceof CursorConflictError)) throw err;
      conflicts++;
    } finally {
      await store.release(key!, owner!);
    }
  }
  process.stdout.write(`${JSON.stringify({ successes, conflicts, heldRetries, fences })}\n`);
}

async function sharedOwnerMode(): Promise<void> {
  let successes = 0;
  let conflicts = 0;
  await store.acquire(key!, owner!, 60_000);
  for (let i = 0; i < iterations; i++) {
    const record = await store.load(key!);
    try {
      await store.commit(key!, {
        owner: owner!,
        expectedVersion: record.version,
        value: { counter: counterOf(record.value) + 1 },
      });
      successes++;
    } catch (err) {
      if (!(err instanceof CursorConflictError)) throw err;
      conflicts++;
    }
  }
  process.stdout.write(`${JSON.stringify({ successes, conflicts, heldRetries: 0 })}\n`);
}

async function crashMode(): Promise<void> {
  await store.acquire(key!, owner!, 3_600_000);
  process.stdout.write('ready\n');
  for (;;) {
    const record = await store.load(key!);
    const n = record.version + 1;
    await store.commit(key!, {
      owner: owner!,
      expectedVersion: record.version,
      value: { n, payload: String(n % 10).repeat(payloadChars) },
    });
  }
}

if (mode !== 'crash') {
  process.stdout.write('ready\n');
  await new Promise((resolve) => process.stdin.once('data', resolve));
  process.stdin.pause();
}
const run = mode === 'lease' ? leaseMode : mode === 'shared-owner' ? sharedOwnerMode : crashMode;
await run();
