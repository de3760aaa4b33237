/**
 * A CDC source's last failure: what `tidemark status` shows after a capture failed, a failed
 * start included (docs/decisions/0022-cdc-last-failure.md). It is kept under a key of its own,
 * `cdcfail#<pipeline>#<source>`, beside the source's `cdc#` state item and written with the
 * store's `note` (no lease, no version: the failure may come before the lease was taken or after
 * it was lost, and the `cdc#` item is written only under the lease). The newest failure replaces
 * the one before it. A later start that commits supersedes it without writing it: status shows a
 * failure only while it is newer than the state's `lastCommitAt`.
 *
 * Owns the key, the recorded shape and its bounds. Never holds a secret (the message is redacted
 * before it is recorded), never writes the `cdc#` item.
 */
import type { CursorStore, StateValue } from '../../contracts/state.js';
import { redact } from '../../observability/redact.js';

/** Longest recorded message line and detail, in characters: a note stays a few KB at most. */
const MESSAGE_MAX = 1000;
const DETAIL_MAX = 2000;

export interface CdcFailure {
  /** ISO time the runner saw the failure. */
  readonly at: string;
  /** The error's code (docs/errors.md); `UNEXPECTED` for an error without one. */
  readonly code: string;
  /** The message's first line, redacted: what went wrong and, for tidemark's errors, the fix. */
  readonly message: string;
  /** The message's further lines, redacted, when it had any (e.g. one line per problem). */
  readonly detail?: string;
}

/** The key of a source's last failure: apart from `cdc#`, so writing it needs no lease. */
export function cdcFailureKey(pipeline: string, source: string): string {
  return `cdcfail#${pipeline}#${source}`;
}

/** What is recorded of `e` at `at`: its code and its redacted message, cut to the bounds. */
export function cdcFailure(e: unknown, at: number): CdcFailure {
  const code = (e as { code?: unknown } | undefined)?.code;
  const [first = '', ...more] = redact(e instanceof Error ? e.message : String(e)).split('\n');
  const detail = more.join('\n').trim();
  return {
    at: new Date(at).toISOString(),
    code: typeof code === 'string' && code !== '' ? code : 'UNEXPECTED',
    message: cut(first.trim(), MESSAGE_MAX),
    ...(detail ? { detail: cut(detail, DETAIL_MAX) } : {}),
  };
}

/** Records `failure` as the source's last one (the previous one is replaced). */
export async function recordCdcFailure(
  store: CursorStore,
  pipeline: string,
  source: string,
  failure: CdcFailure,
): Promise<void> {
  await store.note(cdcFailureKey(pipeline, source), { ...failure } as StateValue);
}

/** The recorded failure, or undefined when none is recorded or the value is not one. */
export function parseCdcFailure(value: unknown): CdcFailure | undefined {
  const v = value as Partial<CdcFailure> | undefined;
  if (typeof v !== 'object' || v === null) return undefined;
  if (typeof v.at !== 'string' || typeof v.code !== 'string' || typeof v.message !== 'string')
    return undefined;
  return {
    at: v.at,
    code: v.code,
    message: v.message,
    ...(typeof v.detail === 'string' ? { detail: v.detail } : {}),
  };
}

/**
 * Whether `failure` is still the news about the source: recorded after the state's last commit
 * (or with no commit at all). A start that committed after it means the source runs again.
 */
export function failureIsCurrent(failure: CdcFailure, lastCommitAt: string | undefined): boolean {
  if (lastCommitAt === undefined) return true;
  const at = Date.parse(failure.at);
  const committed = Date.parse(lastCommitAt);
  if (Number.isNaN(at) || Number.isNaN(committed)) return true;
  // Equal: the failure came in the same millisecond as the commit before it (a stop that
  // committed, then threw), so it is the newer of the two.
  return at >= committed;
}

function cut(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
