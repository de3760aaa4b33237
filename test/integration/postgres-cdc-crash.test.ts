/**
 * The pgbench crash must-show: pgbench runs against the captured tables while the Postgres CDC
 * process (test/harness/pg-cdc-child.ts: `runCdc` over `PostgresCdcSource`, file state, file
 * lake) is SIGKILLed 20 times at ASSERTED points of its commit protocol, and the mutation
 * self-checks: the shared crash scenarios (./cdc-crash/scenarios.ts) on the Postgres fixture
 * (./cdc-crash/postgres-fixture.ts: pgbench, the slot never past the durable state, the lake
 * against the source). Here too the scenario only Postgres has: a restart on a quiet source after
 * a kill that left the slot behind the state.
 */
import { describe, expect, it } from 'vitest';
import { parseLsn } from '../../shared/position/position.js';
import { type PgbenchFacts, postgresCrashFixture, type SlotPair } from './cdc-crash/postgres-fixture.js';
import { cdcCrashScenarios, crashRun, type Kill, type Outcome, summarize } from './cdc-crash/scenarios.js';

describe('Postgres CDC under pgbench, SIGKILLed 20 times', () => {
  cdcCrashScenarios(postgresCrashFixture);

  // A kill between commit and ack leaves the slot behind the state (the ack never left); the
  // next child starts at the state's position while the slot is still behind it. On a quiet
  // source that child only commits idle positions (keepalives, heartbeats) and acks them
  // (killed at its 3rd ack): none may be below where it started, and the slot must stay at or
  // below the state. Its idle commits come every 100 ms, so the first one is taken before the
  // walsender has caught up (as with a long backlog between restart_lsn and the WAL head).
  it('restarted on a quiet source after a kill between commit and ack: the position never moves back, the slot never passes it', {
    timeout: 10 * 60_000,
  }, async () => {
    const fx = postgresCrashFixture;
    const kills: Kill[] = [];
    for (let i = 0; i < 4; i++)
      kills.push(
        // Killed at the first commit that moved the position (a flush inside a transaction
        // moves none): the ack that would follow it never leaves.
        { point: 'after-commit', nth: 1, moved: true },
        { point: 'after-ack', nth: 3, quiet: true, idleCommitMs: 100 },
      );
    // The scenario needs an after-commit kill whose commit moved the position past the slot;
    // should a child's first moving commit still find the slot there (an ack of an idle
    // position in between), the run is repeated (at most 3 times). Every run's problems must
    // be empty.
    let outcome = await crashRun(fx, kills);
    let behind = behindPairs(outcome);
    for (let attempt = 1; attempt < 3 && behind.length === 0; attempt++) {
      expect(outcome.problems, summarize(fx, outcome)).toEqual([]);
      outcome = await crashRun(fx, kills);
      behind = behindPairs(outcome);
    }
    process.stdout.write(
      `[pgbench crash, quiet restarts] pairs:\n${outcome.pairs.map((p) => `  ${p.generation} ${p.point}#${p.nth}: ${p.confirmed} <= ${p.committed}`).join('\n')}\n`,
    );
    // The scenario was set up: some after-commit kill left the slot behind the state.
    expect(behind.length, summarize(fx, outcome)).toBeGreaterThan(0);
    expect(outcome.problems, summarize(fx, outcome)).toEqual([]);
  });

  /** The after-commit kills that left the slot behind the committed state. */
  function behindPairs(outcome: Outcome<SlotPair, PgbenchFacts>) {
    return outcome.pairs.filter(
      (p) =>
        p.point === 'after-commit' &&
        p.confirmed &&
        p.committed &&
        parseLsn(p.confirmed) < parseLsn(p.committed),
    );
  }
});
