/**
 * Lease owner ids: who holds a table's lease, written so that whoever reads the state can tell
 * what kind of holder it is and, for a process on this host, whether it still runs.
 *
 *   local run   <host>:<pid>:<start>:<nonce>   start = the process's start time (Linux
 *               /proc/<pid>/stat field 22, clock ticks since boot), `-` where it cannot be read
 *   Lambda      lambda:<request id>
 *
 * The start time is what makes "dead" provable: an exited process's pid is handed out again, but
 * the new process has another start time. Owns formatting and parsing these ids and the liveness
 * check of local holders. Never signals a process (`kill 0` only probes), and never calls a
 * holder dead that it cannot check from here: a Lambda, another host, an id it does not know.
 *
 * (shared/local/owned-processes.ts reads /proc the same way for the servers it starts; it is not
 * imported here because shared/local stays out of the Lambda bundle, and every run, Lambda
 * included, names its owner through this module.)
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

/** A lease holder as its owner id describes it. */
export type LeaseHolder =
  | {
      readonly kind: 'local';
      readonly owner: string;
      readonly host: string;
      readonly pid: number;
      /** /proc start time (clock ticks since boot); undefined in ids that do not carry one. */
      readonly startTime: string | undefined;
    }
  | { readonly kind: 'lambda'; readonly owner: string; readonly requestId: string }
  | { readonly kind: 'other'; readonly owner: string };

/** Whether a holder still runs: `unknown` when this host cannot tell (Lambda, another host). */
export type HolderLiveness = 'alive' | 'dead' | 'unknown';

const LOCAL = /^([^:]+):(\d+):(\d+|-):([0-9a-f]{8})$/;
/** `host:pid:nonce`, written before ids carried the start time: judged by the pid alone. */
const LOCAL_BEFORE_START_TIME = /^([^:]+):(\d+):([0-9a-f]{8})$/;
const LAMBDA = /^lambda:(.+)$/;
/** In /proc/<pid>/stat, after the parenthesised command name: field 3 (state) is at index 0. */
const STAT_STATE_INDEX = 0;
/** Field 22 (starttime) counted the same way. */
const STAT_START_TIME_INDEX = 22 - 3;

let ownStartTime: string | undefined | null = null;

/** A fresh owner id for a run of this process (one per run: a nonce tells two runs apart). */
export function localOwner(): string {
  if (ownStartTime === null) ownStartTime = processStat(process.pid)?.startTime;
  return `${hostname()}:${process.pid}:${ownStartTime ?? '-'}:${randomUUID().slice(0, 8)}`;
}

/** The owner id of a Lambda invocation. */
export function lambdaOwner(requestId: string): string {
  return `lambda:${requestId}`;
}

/** Reads an owner id; an id of no known shape is `other` (and never judged dead). */
export function parseLeaseOwner(owner: string): LeaseHolder {
  const local = LOCAL.exec(owner);
  if (local) {
    const [, host, pid, start] = local;
    return {
      kind: 'local',
      owner,
      host: host!,
      pid: Number(pid),
      startTime: start === '-' ? undefined : start,
    };
  }
  const older = LOCAL_BEFORE_START_TIME.exec(owner);
  if (older) return { kind: 'local', owner, host: older[1]!, pid: Number(older[2]), startTime: undefined };
  const lambda = LAMBDA.exec(owner);
  if (lambda) return { kind: 'lambda', owner, requestId: lambda[1]! };
  return { kind: 'other', owner };
}

/** `host:pid`, `Lambda request <id>`, or the id itself: how messages name a holder. */
export function holderName(holder: LeaseHolder): string {
  if (holder.kind === 'local') return `${holder.host}:${holder.pid}`;
  if (holder.kind === 'lambda') return `Lambda request ${holder.requestId}`;
  return holder.owner;
}

/**
 * Whether a holder still runs. A local holder on this host is dead when its pid is gone, is a
 * zombie (exited, not yet reaped), or now belongs to a process with another start time; it is
 * alive otherwise, including when /proc cannot be read (then nothing is provable).
 */
export function holderLiveness(holder: LeaseHolder): HolderLiveness {
  if (holder.kind !== 'local' || holder.host !== hostname()) return 'unknown';
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // EPERM: the pid exists but belongs to another user; its stat still says whose it is.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return 'dead';
  }
  const stat = processStat(holder.pid);
  if (stat === undefined) return 'alive';
  if (stat.state === 'Z') return 'dead';
  if (holder.startTime !== undefined && stat.startTime !== holder.startTime) return 'dead';
  return 'alive';
}

/** True only for a holder proven gone: what a local run may take the lease over from. */
export function isProvablyDead(owner: string): boolean {
  return holderLiveness(parseLeaseOwner(owner)) === 'dead';
}

function processStat(pid: number): { state: string; startTime: string } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined; // gone, or no /proc (macOS)
  }
  // The command name (field 2) is in parentheses and may itself contain spaces and ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const state = fields[STAT_STATE_INDEX];
  const startTime = fields[STAT_START_TIME_INDEX];
  return state && startTime ? { state, startTime } : undefined;
}
