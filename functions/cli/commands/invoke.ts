/**
 * `tidemark invoke`: runs the BUNDLED Lambda handler in a fresh process (see ../invoke.ts).
 */
import { parseArgs } from 'node:util';
import { findTable, loadSpecFile } from '../../../shared/config/spec.js';
import { TidemarkError } from '../../../shared/contracts/errors.js';
import { UsageError } from '../args.js';

export async function cmdInvoke(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c' },
      table: { type: 'string', short: 't' },
      timeout: { type: 'string' },
    },
  });
  if (positionals[0] !== 'incremental')
    throw new UsageError('invoke takes a handler name: invoke incremental ...');
  if (!values.config) throw new UsageError('missing -c FILE (the pipeline spec)');
  if (!values.table) throw new UsageError('missing --table T');
  const spec = loadSpecFile(values.config);
  findTable(spec, values.table);
  const { invokeLocal } = await import('../invoke.js');
  const out = await invokeLocal({
    handler: 'incremental',
    specFile: values.config,
    event: { table: values.table, pipeline: spec.pipeline },
    timeoutMs: Number(values.timeout ?? 900) * 1000,
  });
  console.log(JSON.stringify(out.response, null, 2));
  if (out.error) throw new TidemarkError('INVOKE_FAILED', out.error);
}
