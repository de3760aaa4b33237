/**
 * What every `tidemark` command shares: the usage error (exit 2), the spec argument and the
 * one-line rendering of an error.
 */
import { loadSpecFile, type Spec } from '../../shared/config/spec.js';
import { ConfigError } from '../../shared/contracts/errors.js';

/** A wrong command line: main prints it with the usage text and exits 2. */
export class UsageError extends Error {}

/** Loads the spec named by `-c`. */
export function specArg(values: { config?: string | undefined }): Spec {
  if (!values.config) throw new UsageError('missing -c FILE (the pipeline spec)');
  return loadSpecFile(values.config);
}

/**
 * What the CLI prints after `tidemark: `: the first line of an error's message, or, for a spec
 * with several problems, the count line and one line per problem (fix them all in one go).
 */
export function oneLine(e: unknown): string {
  if (e instanceof ConfigError && e.problems.length > 1) return e.message;
  if (e instanceof Error) return e.message.split('\n')[0] ?? e.name;
  return String(e);
}
