/**
 * What every `tidemark` command shares: the exit codes, the usage error (exit 2), the spec
 * argument and the one-line rendering of an error.
 */
import { loadSpecFile, type Spec } from '../../shared/config/spec.js';
import { TidemarkError } from '../../shared/contracts/errors.js';
import { type RecordedError, recordError } from '../../shared/engine/incremental-state.js';

/** The exit codes of `tidemark`, as the usage text and docs/errors.md list them. */
export const EXIT = {
  ok: 0,
  error: 1,
  usage: 2,
  /** Another run holds a table's lease (EX_TEMPFAIL: try again later). */
  leaseHeld: 75,
  /** Stopped by SIGINT (Ctrl-C) / SIGTERM after committing what was durable: 128 + signal. */
  interrupted: 130,
  terminated: 143,
} as const;

/** The exit code for an error that ends a command. */
export function exitCodeOf(e: unknown): number {
  if (e instanceof UsageError) return EXIT.usage;
  if (e instanceof TidemarkError && e.code === 'LEASE_HELD') return EXIT.leaseHeld;
  return EXIT.error;
}

/** A wrong command line: main prints it with the usage text and exits 2. */
export class UsageError extends Error {}

/** Loads the spec named by `-c`. */
export function specArg(values: { config?: string | undefined }): Spec {
  if (!values.config) throw new UsageError('missing -c FILE (the pipeline spec)');
  return loadSpecFile(values.config);
}

/** The first line of an error's message: what the CLI prints after `tidemark: `. */
export function oneLine(e: unknown): string {
  if (e instanceof Error) return e.message.split('\n')[0] ?? e.name;
  return String(e);
}

/** An error as `--json` output carries it: its documented code (a usage error is CONFIG_INVALID). */
export function errorObject(e: unknown): RecordedError {
  return e instanceof UsageError ? { code: 'CONFIG_INVALID', message: e.message } : recordError(e);
}
