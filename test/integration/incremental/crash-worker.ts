/**
 * A child process for the crash scenario: runs one incremental sync of the spec in TM_SPEC
 * through the real pipeline, and with TM_CRASH_MODE=after-write kills itself with SIGKILL right
 * after the TM_CRASH_NTH page's object is durable in the lake and BEFORE the cursor commit: the
 * exact window the durability order has to survive. (Mode `random` is killed by the parent.)
 */
import { incrementalTables, parseSpec } from '../../../shared/config/spec.js';
import { silentLogger } from '../../../shared/observability/log.js';
import { openPipeline } from '../../../shared/pipeline/open.js';
import { runTable } from '../../../shared/pipeline/run-table.js';

const spec = parseSpec(JSON.parse(process.env.TM_SPEC!));
const pipeline = await openPipeline(spec);
const nth = Number(process.env.TM_CRASH_NTH ?? 1);
let writes = 0;
const crashing =
  process.env.TM_CRASH_MODE === 'after-write'
    ? {
        ...pipeline,
        sink: {
          write: async (...args: Parameters<typeof pipeline.sink.write>) => {
            const refs = await pipeline.sink.write(...args);
            if (++writes === nth) process.kill(process.pid, 'SIGKILL');
            return refs;
          },
          recover: pipeline.sink.recover.bind(pipeline.sink),
          list: pipeline.sink.list.bind(pipeline.sink),
          discard: pipeline.sink.discard.bind(pipeline.sink),
        },
      }
    : pipeline;
// A short lease so the next attempt can take over from a killed one after LEASE_TTL_MS.
const LEASE_TTL_MS = 1500;
try {
  await runTable(spec, incrementalTables(spec)[0]!, crashing, {
    logger: silentLogger,
    owner: `crash-${process.pid}`,
    leaseTtlMs: LEASE_TTL_MS,
  });
} catch (e) {
  // Losing the short lease under load is the fencing working, not a failure of this scenario.
  if (!(e instanceof Error && (e.name === 'LeaseLostError' || e.name === 'LeaseHeldError'))) throw e;
}
await pipeline.close();
