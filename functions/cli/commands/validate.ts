/**
 * `tidemark validate`: checks a pipeline spec's shape and prints it with secrets redacted.
 */
import { parseArgs } from 'node:util';
import { redactSpec } from '../../../shared/config/spec.js';
import { specArg } from '../args.js';

export async function cmdValidate(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { config: { type: 'string', short: 'c' } } });
  const spec = specArg(values);
  console.log(JSON.stringify(redactSpec(spec), null, 2));
  console.log(`ok: pipeline ${spec.pipeline}, ${spec.tables.length} table(s)`);
}
