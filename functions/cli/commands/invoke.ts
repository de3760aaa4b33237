/**
 * `tidemark invoke`: runs the BUNDLED Lambda handler in a fresh process (see ../invoke.ts):
 * `invoke incremental` syncs a table as a schedule would; `invoke check` sends the handler's
 * check event (`{"check": true}`), so the checks run in the deployed artifact, and prints its
 * report as `tidemark check` does (exit 1 when a check failed).
 */
import { parseArgs } from 'node:util';
import { findTable, loadSpecFile } from '../../../shared/config/spec.js';
import { TidemarkError } from '../../../shared/contracts/errors.js';
import type { CheckReport } from '../../../shared/pipeline/check.js';
import { UsageError } from '../args.js';
import { printReport } from './check.js';

export async function cmdInvoke(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c' },
      table: { type: 'string', short: 't' },
      timeout: { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const handler = positionals[0];
  if (handler !== 'incremental' && handler !== 'check')
    throw new UsageError('invoke takes what to run: invoke incremental ... or invoke check ...');
  if (!values.config) throw new UsageError('missing -c FILE (the pipeline spec)');
  if (handler === 'incremental' && !values.table) throw new UsageError('missing --table T');
  const spec = loadSpecFile(values.config);
  if (values.table) findTable(spec, values.table);
  const { invokeLocal } = await import('../invoke.js');
  const out = await invokeLocal({
    handler: 'incremental',
    specFile: values.config,
    event:
      handler === 'check'
        ? { check: true, pipeline: spec.pipeline, ...(values.table ? { table: values.table } : {}) }
        : { table: values.table, pipeline: spec.pipeline },
    timeoutMs: Number(values.timeout ?? 900) * 1000,
  });
  if (handler === 'check') {
    if (out.error) throw new TidemarkError('INVOKE_FAILED', out.error);
    printReport(out.response as CheckReport, values.json ?? false);
    return;
  }
  console.log(JSON.stringify(out.response, null, 2));
  if (out.error) throw new TidemarkError('INVOKE_FAILED', out.error);
}
