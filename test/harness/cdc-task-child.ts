/**
 * `tidemark cdc` or the CDC task's entrypoint in a process of its own, on the scripted source:
 *
 *   TIDEMARK_TEST_CDC='<CdcTaskSource JSON>' node --import tsx test/harness/cdc-task-child.ts cli cdc -c spec.yaml
 *   TIDEMARK_TEST_CDC='<CdcTaskSource JSON>' node --import tsx test/harness/cdc-task-child.ts entrypoint
 *
 * Registers the scripted driver (kind `scripted`; the script generated from the params, the
 * server's durable state in `dir`) BEFORE the CLI or the entrypoint parses the spec, then runs
 * the CLI's main with the given argv (process.argv as bin/tidemark.js would have it) or the
 * entrypoint (configured by its environment).
 */
import { registerDriver } from '../../shared/drivers/registry.js';
import { scriptedFromEnv } from './cdc-task-source.js';

registerDriver(scriptedFromEnv());
const [target, ...argv] = process.argv.slice(2);
if (target === 'cli') {
  process.argv = [process.argv[0]!, 'tidemark', ...argv];
  await import('../../functions/cli/main.js');
} else if (target === 'entrypoint') {
  await import('../../functions/cdc/main.js');
} else {
  throw new Error(`cdc-task-child: the first argument is "cli" or "entrypoint", not "${target}"`);
}
