/**
 * `tidemark validate`: checks a pipeline spec's shape and prints it with secrets redacted. The
 * spec's own checks include the mode gate (every table's mode against its driver kind's
 * capabilities, shared/config/modes.ts). Then it looks for tables that changed mode against the
 * stored state (shared/pipeline/mode-change.ts), where that has no side effects: a `state.dir` is
 * always read (a file read); a DynamoDB state only with `--state` (it calls AWS; `tidemark check`
 * and every run check it too).
 */
import { parseArgs } from 'node:util';
import { redactSpec, type Spec } from '../../../shared/config/spec.js';
import { TidemarkError } from '../../../shared/contracts/errors.js';
import { assertModesUnchanged } from '../../../shared/pipeline/mode-change.js';
import { openStateStore } from '../../../shared/pipeline/open.js';
import { specArg } from '../args.js';

export async function cmdValidate(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { config: { type: 'string', short: 'c' }, state: { type: 'boolean' } },
  });
  const spec = specArg(values);
  const state = await checkState(spec, values.state ?? false);
  console.log(JSON.stringify(redactSpec(spec), null, 2));
  const cdc = spec.tables.filter((t) => t.mode === 'cdc').length;
  const modes = cdc > 0 ? ` (${spec.tables.length - cdc} incremental, ${cdc} cdc)` : '';
  console.log(`ok: pipeline ${spec.pipeline}, ${spec.tables.length} table(s)${modes}; ${state}`);
}

/** Refuses a mode change against the stored state when it may be read; says what it did. */
async function checkState(spec: Spec, withDynamo: boolean): Promise<string> {
  if (spec.state.dynamodb && !withDynamo) {
    return 'mode changes not checked against the DynamoDB state (add --state, or run tidemark check)';
  }
  // ensureTable false: validate never creates anything.
  const store = await openStateStore(spec, { ensureTable: false });
  try {
    await assertModesUnchanged(spec, store);
  } catch (e) {
    // No state table yet: no state, so nothing can have changed mode.
    if (!(e instanceof TidemarkError && e.code === 'STATE_TABLE_MISSING')) throw e;
  }
  return 'no table changed mode against the stored state';
}
