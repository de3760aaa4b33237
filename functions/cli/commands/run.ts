/**
 * `tidemark run`: syncs a spec's tables locally until caught up, one line (or JSON) per table.
 */
import { parseArgs } from 'node:util';
import { findTable, tableTarget } from '../../../shared/config/spec.js';
import { createLogger } from '../../../shared/observability/log.js';
import { openPipeline } from '../../../shared/pipeline/open.js';
import { runTable } from '../../../shared/pipeline/run-table.js';
import { EXIT, oneLine, specArg } from '../args.js';

export async function cmdRun(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: 'string', short: 'c' },
      table: { type: 'string', short: 't' },
      'max-pages': { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const spec = specArg(values);
  const tables = values.table ? [findTable(spec, values.table)] : spec.tables;
  const tty = !values.json && Boolean(process.stderr.isTTY);
  const logger = createLogger({ json: values.json ?? !tty });
  const pipeline = await openPipeline(spec);
  let failed = 0;
  let leaseHeld = 0;
  try {
    for (const t of tables) {
      try {
        const s = await runTable(spec, t, pipeline, {
          logger,
          progressTty: tty,
          takeOverDeadLocalHolders: true,
          ...(values['max-pages'] ? { maxPages: Number(values['max-pages']) } : {}),
        });
        if (s.status === 'lease-held') {
          leaseHeld += 1;
          console.log(`${s.table}: skipped, another run holds the lease`);
        } else {
          const rate = s.durationMs > 0 ? Math.round((s.rows / s.durationMs) * 1000) : 0;
          console.log(
            `${s.table}: ${s.rows} rows in ${s.pages} page(s), ${(s.bytes / 1e6).toFixed(2)} MB, ${(s.durationMs / 1000).toFixed(1)} s (${rate} rows/s)${s.more ? ', more pending' : ', caught up'}`,
          );
        }
      } catch (e) {
        failed += 1;
        console.error(`tidemark: ${tableTarget(t)}: ${oneLine(e)}`);
      }
    }
  } finally {
    await pipeline.close();
  }
  if (failed > 0) process.exitCode = EXIT.error;
  else if (leaseHeld > 0) process.exitCode = EXIT.leaseHeld;
}
