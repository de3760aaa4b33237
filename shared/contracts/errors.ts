/**
 * The error family of tidemark. Every error an operator can see is a `TidemarkError` subclass
 * that sets `name`, carries the fields needed to act (table, position, what to do) and keeps the
 * underlying error as `cause`.
 *
 * Owns: error types and their messages. Never logs, never retries: retry decisions are pure
 * functions of these types elsewhere. The codes are the closed list of error-codes.ts.
 */
import type { ErrorCode } from './error-codes.js';

export class TidemarkError extends Error {
  override name = 'TidemarkError';
  /** A stable, documented code (error-codes.ts, docs/errors.md) an operator can search for. */
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }
}

/**
 * The code an operator sees for `e`: its own where it is a TidemarkError, `UNEXPECTED` for any
 * other error (a bug, or a library error nothing translated), on every path that shows one.
 */
export function codeOf(e: unknown): ErrorCode {
  return e instanceof TidemarkError ? e.code : 'UNEXPECTED';
}

/** One wrong field of a spec: its path (`tables[0].cursor`) and what to do. */
export interface ConfigProblem {
  readonly path: string;
  readonly message: string;
}

/**
 * The pipeline spec or a CLI argument is wrong. `path` names the (first) offending field;
 * `problems` lists every one, so a user fixes them all in one go. With several problems the
 * message is a count line followed by one line per problem.
 */
export class ConfigError extends TidemarkError {
  override name = 'ConfigError';
  readonly problems: readonly ConfigProblem[];
  constructor(
    readonly path: string,
    message: string,
    options?: ErrorOptions & { readonly more?: readonly ConfigProblem[] },
  ) {
    const problems = [{ path, message }, ...(options?.more ?? [])];
    const line = (p: ConfigProblem) => (p.path ? `${p.path}: ${p.message}` : p.message);
    super(
      'CONFIG_INVALID',
      problems.length === 1
        ? line(problems[0]!)
        : `${problems.length} problems in the spec:\n${problems.map((p) => `  - ${line(p)}`).join('\n')}`,
      options,
    );
    this.problems = problems;
  }
}

/**
 * A compare-and-set on the cursor store lost: another writer moved the state since it was read.
 * Nothing was written to the store; the caller must reload and decide.
 */
export class CursorConflictError extends TidemarkError {
  override name = 'CursorConflictError';
  constructor(
    readonly key: string,
    readonly expectedVersion: number,
    readonly actualVersion: number | undefined,
    options?: ErrorOptions,
  ) {
    super(
      'CURSOR_CONFLICT',
      `state of ${key} moved under us: expected version ${expectedVersion}, found ${actualVersion ?? 'unknown'}; another run committed first, nothing was written`,
      options,
    );
  }
}

/** The lease on a state key is held by another owner (or ours expired and was taken over). */
export class LeaseHeldError extends TidemarkError {
  override name = 'LeaseHeldError';
  constructor(
    readonly key: string,
    readonly holder: string | undefined,
    readonly expiresAt: number | undefined,
    options?: ErrorOptions,
  ) {
    super(
      'LEASE_HELD',
      `${key} is being synced by ${holder ?? 'another run'}${expiresAt ? ` (lease until ${new Date(expiresAt).toISOString()})` : ''}; this run exits without changes`,
      options,
    );
  }
}

/** Our lease expired or was taken over; the holder must stop writing at once. */
export class LeaseLostError extends TidemarkError {
  override name = 'LeaseLostError';
  constructor(
    readonly key: string,
    readonly owner: string,
    options?: ErrorOptions,
  ) {
    super(
      'LEASE_LOST',
      `lease on ${key} held by ${owner} expired or was taken over; stopped before committing`,
      options,
    );
  }
}

/** A source could not be reached, refused our credentials, or lacks a privilege. */
export class SourceError extends TidemarkError {
  override name = 'SourceError';
  constructor(code: ErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
  }
}

/** A source value cannot be represented in the lake without loss. */
export class DataError extends TidemarkError {
  override name = 'DataError';
  constructor(message: string, options?: ErrorOptions) {
    super('DATA_UNREPRESENTABLE', message, options);
  }
}

/**
 * One source row is larger than the table's `maxRowBytes`: reading it could exhaust the memory
 * the run is sized for. Nothing of the page was written; the cursor stays before the row.
 */
export class RowTooLargeError extends TidemarkError {
  override name = 'RowTooLargeError';
  constructor(
    readonly table: string,
    /** The row's key as `column=value` pairs (cursor column first), for the operator. */
    readonly key: string,
    /** The row's size as measured; a lower bound when `atLeast` (refused before all of it arrived). */
    readonly bytes: number,
    readonly limit: number,
    readonly atLeast = false,
    options?: ErrorOptions,
  ) {
    super(
      'ROW_TOO_LARGE',
      `${table}: the row (${key}) is ${atLeast ? 'at least ' : ''}${mib(bytes)} MiB, over maxRowBytes (${mib(limit)} MiB); nothing of its page was written. Raise maxRowBytes and the memory of the function that syncs the table (docs/decisions/0007-page-byte-budget.md), or exclude the large column`,
      options,
    );
  }
}

function mib(n: number): string {
  return (n / 2 ** 20).toFixed(2);
}

/**
 * The cursor store refused or could not perform an operation for a reason other than a lost race:
 * a value too large for one item, a corrupt state file, a lock it could not take in time, a
 * missing table. `key` names the state key. Nothing was written.
 */
export class StateError extends TidemarkError {
  override name = 'StateError';
  constructor(
    code: ErrorCode,
    readonly key: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(code, message, options);
  }
}

/**
 * The lake sink could not name, write, list or delete an object: an unusable table name or start
 * position, an object store that refused a request, a batch that does not match its table's
 * schema. `target` names the lake table. Whatever was already durable stays; nothing is committed.
 */
export class SinkError extends TidemarkError {
  override name = 'SinkError';
  constructor(
    code: ErrorCode,
    readonly target: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(code, message, options);
  }
}
