/**
 * `tidemark unlock`: removes a table's lease when its holder cannot release it any more.
 *
 * A local holder (this host) is checked: alive, it is refused (stop that run instead: Ctrl-C
 * makes it commit and release); gone, its lease is removed. A holder this host cannot check (a
 * Lambda, another machine) is removed only with `--force`, with the warning that a writer still
 * running can still put objects in the lake (its commits are refused: LEASE_LOST). The lease is
 * removed by taking it over from exactly that holder and releasing it, so a run that took the
 * lease meanwhile keeps it.
 */
import { parseArgs } from 'node:util';
import { findIncrementalTable, tableTarget } from '../../../shared/config/spec.js';
import { TidemarkError } from '../../../shared/contracts/errors.js';
import { incrementalStateKey } from '../../../shared/engine/incremental/state.js';
import { openPipeline } from '../../../shared/pipeline/open.js';
import {
  holderLiveness,
  holderName,
  localOwner,
  parseLeaseOwner,
} from '../../../shared/state/lease-owner.js';
import { specArg, UsageError } from '../args.js';
import { relativeText, whenText } from '../human-time.js';

/** How long the unlock holds the lease between taking it over and releasing it. */
const UNLOCK_TTL_MS = 60_000;

export async function cmdUnlock(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string', short: 'c' },
      table: { type: 'string', short: 't' },
      force: { type: 'boolean' },
    },
  });
  const spec = specArg(values);
  if (!values.table) throw new UsageError('missing --table T');
  // A cdc table's lease is its source's (cdc#...), held by the CDC task: not this command's.
  const target = tableTarget(findIncrementalTable(spec, values.table, 'tidemark unlock'));
  const key = incrementalStateKey(spec.pipeline, target);
  const pipeline = await openPipeline(spec, { sourcesLazy: true });
  try {
    const { lease } = await pipeline.store.load(key);
    const now = Date.now();
    if (lease === undefined) {
      console.log(`${target}: not locked`);
      return;
    }
    const holder = parseLeaseOwner(lease.owner);
    const name = holderName(holder);
    if (lease.expiresAt <= now) {
      console.log(
        `${target}: not locked (the lease of ${name} expired ${relativeText(lease.expiresAt, now)}; the next run takes it)`,
      );
      return;
    }
    const liveness = holderLiveness(holder);
    if (liveness === 'alive') {
      throw new TidemarkError(
        'LEASE_HELD',
        `${target}: the lease is held by ${name}, which is running (until ${whenText(lease.expiresAt, now)}); stop that run instead (Ctrl-C, or kill -INT ${holder.kind === 'local' ? holder.pid : '<pid>'}): it commits what is durable and releases the lease`,
      );
    }
    if (liveness === 'unknown' && !values.force) {
      throw new TidemarkError(
        'LEASE_HELD',
        `${target}: the lease is held by ${name} until ${whenText(lease.expiresAt, now)}, which this host cannot check; if you know it is not running, run unlock again with --force (a writer that is still running could still write objects to the lake)`,
      );
    }
    if (liveness === 'unknown') {
      process.stderr.write(
        `tidemark: warning: removing the lease of ${name} without knowing it stopped; if it still runs it can still write objects to the lake (its commits are refused with LEASE_LOST, and the next run's recovery removes what it wrote past the committed position)\n`,
      );
    }
    const owner = localOwner();
    await pipeline.store.takeOver(key, owner, UNLOCK_TTL_MS, lease.owner);
    await pipeline.store.release(key, owner);
    console.log(
      `${target}: removed the lease of ${name}${liveness === 'dead' ? ' (that process is gone)' : ''}; the next run starts at once`,
    );
  } finally {
    await pipeline.close();
  }
}
