/**
 * What every `tidemark` command shares: the exit codes, the usage error (exit 2), the spec
 * argument and the one-line rendering of an error.
 */
import { existsSync } from 'node:fs';
import { loadSpecFile, type Spec } from '../../shared/config/spec.js';
import { ConfigError, TidemarkError } from '../../shared/contracts/errors.js';
import { type RecordedError, recordError } from '../../shared/engine/incremental/state.js';
import { redact } from '../../shared/observability/redact.js';

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

/** The spec file every command reads when `-c` is not given. */
export const DEFAULT_SPEC_FILE = 'tidemark.yaml';

/** The spec file named by `-c`, or `./tidemark.yaml` when it exists. */
export function specPath(values: { config?: string | undefined }): string {
  if (values.config) return values.config;
  if (existsSync(DEFAULT_SPEC_FILE)) return DEFAULT_SPEC_FILE;
  throw new UsageError(
    `no -c FILE given and there is no ./${DEFAULT_SPEC_FILE}; pass the pipeline spec with -c (start from tidemark.example.yaml)`,
  );
}

/** Loads the spec named by `-c` (default `./tidemark.yaml`). */
export function specArg(values: { config?: string | undefined }): Spec {
  return loadSpecFile(specPath(values));
}

/**
 * What the CLI prints after `tidemark: `: the first line of an error's message, or, for a spec
 * with several problems, the count line and one line per problem (fix them all in one go).
 */
export function oneLine(e: unknown): string {
  if (e instanceof ConfigError && e.problems.length > 1) return redact(e.message);
  return redact(e instanceof Error ? (e.message.split('\n')[0] ?? e.name) : String(e));
}

/** An error as `--json` output carries it: its documented code (a usage error is CONFIG_INVALID). */
export function errorObject(e: unknown): RecordedError {
  return e instanceof UsageError ? { code: 'CONFIG_INVALID', message: e.message } : recordError(e);
}
