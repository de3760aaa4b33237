/**
 * `tidemark invoke`: runs the BUNDLED Lambda handler in a fresh process (see ../invoke.ts):
 * `invoke incremental` syncs a table as a schedule would; `invoke check` sends the handler's
 * check event (`{"check": true}`), so the checks run in the deployed artifact, and prints its
 * report as `tidemark check` does (exit 1 when a check failed).
 */
import { parseArgs } from 'node:util';
import { findIncrementalTable, findTable, loadSpecFile } from '../../../shared/config/spec.js';
import { TidemarkError } from '../../../shared/contracts/errors.js';
import type { CheckReport } from '../../../shared/pipeline/check.js';
import { specPath, UsageError } from '../args.js';
import { printReport } from './check.js';

/** The handler's default safety margin before its deadline (functions/incremental/handler.ts). */
const DEFAULT_SAFETY_MARGIN_MS = 15_000;

export async function cmdInvoke(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c' },
      table: { type: 'string', short: 't' },
      timeout: { type: 'string' },
      logs: { type: 'boolean' },
      json: { type: 'boolean' },
    },
  });
  const handler = positionals[0];
  if (handler !== 'incremental' && handler !== 'check')
    throw new UsageError('invoke takes what to run: invoke incremental ... or invoke check ...');
  if (handler === 'incremental' && !values.table) throw new UsageError('missing --table T');
  const timeoutMs = Number(values.timeout ?? 900) * 1000;
  const marginMs = Number(process.env.TIDEMARK_SAFETY_MARGIN_MS ?? DEFAULT_SAFETY_MARGIN_MS);
  if (handler === 'incremental' && (!Number.isFinite(timeoutMs) || timeoutMs <= marginMs)) {
    // The handler starts no page inside its safety margin: such a timeout syncs nothing.
    throw new UsageError(
      `--timeout ${values.timeout} s is not above the handler's ${marginMs / 1000} s safety margin (it starts no page that close to its deadline, so nothing would sync); give more than ${marginMs / 1000} s, e.g. --timeout 900 as deployed`,
    );
  }
  const specFile = specPath(values);
  const spec = loadSpecFile(specFile);
  if (values.table) {
    if (handler === 'incremental') findIncrementalTable(spec, values.table, 'tidemark invoke incremental');
    else findTable(spec, values.table);
  }
  const { invokeLocal } = await import('../invoke.js');
  const out = await invokeLocal({
    handler: 'incremental',
    specFile,
    event:
      handler === 'check'
        ? { check: true, pipeline: spec.pipeline, ...(values.table ? { table: values.table } : {}) }
        : { table: values.table, pipeline: spec.pipeline },
    timeoutMs,
  });
  // The function's own log lines (JSON, as CloudWatch would get them): on request, and always
  // when it failed, since they say why.
  if (values.logs || out.error)
    process.stderr.write(out.logs.endsWith('\n') || !out.logs ? out.logs : `${out.logs}\n`);
  if (handler === 'check') {
    if (out.error) throw new TidemarkError('INVOKE_FAILED', out.error);
    printReport(out.response as CheckReport, values.json ?? false);
    return;
  }
  if (out.response !== undefined) console.log(JSON.stringify(out.response, null, 2));
  if (out.error) throw new TidemarkError('INVOKE_FAILED', out.error);
  const r = out.response as { more?: boolean; continued?: boolean } | undefined;
  if (r?.more && !r.continued) {
    process.stderr.write(
      'tidemark: a backlog remains. A deployed function with selfContinue invokes itself to go on; a local invoke does not (there is no deployed function to call), so run it again, or use "tidemark run", which loops until caught up.\n',
    );
  }
}
