/**
 * Lease owner ids and the liveness of local holders (shared/state/lease-owner.ts), on real
 * processes of this host: our own, a child that exited, and our pid under another start time
 * (what a reused pid looks like).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import {
  holderLiveness,
  holderName,
  isProvablyDead,
  lambdaOwner,
  localOwner,
  parseLeaseOwner,
} from '../../shared/state/lease-owner.js';

const ownStart = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ')[19]!;

/** The pid of a child process that has exited and been reaped. */
function deadPid(): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', '0']);
    child.on('exit', () => resolve(child.pid!));
  });
}

describe('lease owner ids', () => {
  it('a local id carries host, pid and the process start time, and parses back', () => {
    const owner = localOwner();
    expect(owner).toMatch(new RegExp(`^${hostname()}:${process.pid}:${ownStart}:[0-9a-f]{8}$`));
    expect(parseLeaseOwner(owner)).toEqual({
      kind: 'local',
      owner,
      host: hostname(),
      pid: process.pid,
      startTime: ownStart,
    });
    expect(holderName(parseLeaseOwner(owner))).toBe(`${hostname()}:${process.pid}`);
    expect(localOwner()).not.toBe(owner); // one id per run
  });

  it('Lambda ids, ids written before the start time, and unknown ids', () => {
    expect(parseLeaseOwner(lambdaOwner('8f0c-11'))).toMatchObject({ kind: 'lambda', requestId: '8f0c-11' });
    expect(parseLeaseOwner('box:42:0a1b2c3d')).toMatchObject({
      kind: 'local',
      host: 'box',
      pid: 42,
      startTime: undefined,
    });
    expect(parseLeaseOwner('crash-42')).toEqual({ kind: 'other', owner: 'crash-42' });
  });

  it('our own process is alive; an exited one is dead; our pid with another start time is dead', async () => {
    expect(holderLiveness(parseLeaseOwner(localOwner()))).toBe('alive');
    const gone = await deadPid();
    expect(isProvablyDead(`${hostname()}:${gone}:12345:0a1b2c3d`)).toBe(true);
    expect(isProvablyDead(`${hostname()}:${gone}:0a1b2c3d`)).toBe(true);
    // A reused pid: alive, but not the process that took the lease.
    expect(isProvablyDead(`${hostname()}:${process.pid}:${Number(ownStart) + 1}:0a1b2c3d`)).toBe(true);
    // Without a start time a live pid cannot be told from a reused one: not provably dead.
    expect(isProvablyDead(`${hostname()}:${process.pid}:-:0a1b2c3d`)).toBe(false);
  });

  it('never calls a holder dead that this host cannot check', async () => {
    const gone = await deadPid();
    expect(holderLiveness(parseLeaseOwner(`elsewhere-${hostname()}:${gone}:1:0a1b2c3d`))).toBe('unknown');
    expect(holderLiveness(parseLeaseOwner(lambdaOwner('x')))).toBe('unknown');
    expect(isProvablyDead('crash-1')).toBe(false);
  });
});
