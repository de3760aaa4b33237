/**
 * One suite of cursor store behaviours run against all three stores (memory, file, DynamoDB on
 * the harness's dynalite), so "the same guarantees" is checked, not assumed. Then what only the
 * file store must show (many processes, SIGKILL mid-write, stale locks), what only the DynamoDB
 * store must show (item layout, table creation), and a model-based property test comparing every
 * store with a tiny reference model of the rules.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CursorConflictError,
  LeaseHeldError,
  LeaseLostError,
  StateError,
  TidemarkError,
} from '../../shared/contracts/errors.js';
import type { Clock, CursorStore, Lease, StateRecord, StateValue } from '../../shared/contracts/state.js';
import { MAX_STATE_VALUE_BYTES } from '../../shared/state/cursor-rules.js';
import { DynamoCursorStore } from '../../shared/state/dynamo-cursor-store.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { MemCursorStore } from '../../shared/state/mem-cursor-store.js';
import { dynamoClient } from '../harness/aws.js';
import { raceWorkers, readyOf, startWorker } from '../harness/worker-race.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const WORKER = join(HERE, 'cursor-store-worker.ts');
const TTL = 60_000;
/** The crash worker's payload size: large enough that a write takes a while, under the value limit. */
const CRASH_PAYLOAD_CHARS = 200_000;

/** A clock the test moves by hand. */
class ManualClock {
  now = 1_700_000_000_000;
  readonly read: Clock = () => this.now;
  advance(ms: number): void {
    this.now += ms;
  }
}

/** How each store kind is built; `make` is called once per test with that test's clock. */
interface StoreKind {
  readonly name: 'memory' | 'file' | 'dynamo';
  setup(): Promise<void>;
  make(clock: Clock): CursorStore;
  teardown(): Promise<void>;
}

let fileDir = '';
let dynamo: DynamoDBClient | undefined;
const dynamoTable = `tidemark_cursor_test_${randomUUID().slice(0, 8)}`;

const KINDS: StoreKind[] = [
  {
    name: 'memory',
    setup: async () => {},
    make: (clock) => new MemCursorStore(clock),
    teardown: async () => {},
  },
  {
    name: 'file',
    setup: async () => {
      fileDir = await mkdtemp(join(tmpdir(), 'tidemark-cursor-'));
    },
    make: (clock) => new FileCursorStore(fileDir, clock),
    teardown: async () => {
      await rm(fileDir, { recursive: true, force: true });
    },
  },
  {
    name: 'dynamo',
    setup: async () => {
      dynamo = dynamoClient();
      await new DynamoCursorStore({ client: dynamo, tableName: dynamoTable }).ensureTable();
    },
    make: (clock) => new DynamoCursorStore({ client: dynamo!, tableName: dynamoTable, clock }),
    teardown: async () => {
      dynamo?.destroy();
    },
  },
];

/** A fresh key per test: stores of one kind share a directory or table. */
function freshKey(label: string): string {
  return `inc#test#public.${label}_${randomUUID().slice(0, 8)}`;
}

/** Runs `fn`, expecting it to reject with `type`; returns the error for field checks. */
async function rejection<E extends Error>(
  fn: () => Promise<unknown>,
  type: abstract new (...args: never[]) => E,
): Promise<E> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(type);
    return err as E;
  }
  throw new Error(`expected ${type.name}, but it resolved`);
}

/**
 * Six owners race `take(owner)` for the lease of `key` at once: exactly one wins, every other is
 * refused with LeaseHeldError naming the winner, and the winner holds the lease.
 */
async function expectOneLeaseWinner(
  store: CursorStore,
  key: string,
  take: (owner: string) => Promise<unknown>,
): Promise<void> {
  const owners = ['o0', 'o1', 'o2', 'o3', 'o4', 'o5'];
  const results = await Promise.allSettled(owners.map(take));
  const winners = results.flatMap((r, i) => (r.status === 'fulfilled' ? [owners[i]!] : []));
  expect(winners).toHaveLength(1);
  for (const r of results) {
    if (r.status === 'rejected') {
      expect(r.reason).toBeInstanceOf(LeaseHeldError);
      expect(r.reason).toMatchObject({ key, holder: winners[0] });
    }
  }
  expect((await store.load(key)).lease?.owner).toBe(winners[0]);
}

describe.each(KINDS)('CursorStore contract: $name', (kind) => {
  beforeAll(() => kind.setup());
  afterAll(() => kind.teardown());

  /** A store of this kind on a fresh manual clock, and a key no other test uses. */
  async function started(label: string) {
    const clock = new ManualClock();
    const store = kind.make(clock.read);
    const key = freshKey(label);
    return { clock, store, key };
  }

  it('loads an unknown key as version 0 with no value and no lease', async () => {
    const { store, key } = await started('unknown');
    expect(await store.load(key)).toEqual({ key, version: 0, value: undefined, lease: undefined });
  });

  it('acquires without moving the version, then commits version + 1 with the value', async () => {
    const { clock, store, key } = await started('basic');
    const acquired = await store.acquire(key, 'A', TTL);
    expect(acquired).toEqual({
      key,
      version: 0,
      value: undefined,
      lease: { owner: 'A', expiresAt: clock.now + TTL, fence: 1 },
    });

    const value = { cursor: ['2024-01-01 00:00:00.000001', 42], seq: 1, note: 'ünïcødé ✓' };
    const committed = await store.commit(key, { owner: 'A', expectedVersion: 0, value });
    expect(committed.version).toBe(1);
    expect(committed.value).toEqual(value);
    expect(await store.load(key)).toEqual({
      key,
      version: 1,
      value,
      lease: { owner: 'A', expiresAt: clock.now + TTL, fence: 1 },
    });

    const second = await store.commit(key, { owner: 'A', expectedVersion: 1, value: { seq: 2 } });
    expect(second.version).toBe(2);
    expect((await store.load(key)).value).toEqual({ seq: 2 });
  });

  it('two writers that loaded version N: the first commit wins, the second gets CursorConflictError naming both versions', async () => {
    const { clock, store, key } = await started('race_seq');
    await store.acquire(key, 'A', TTL);
    await store.commit(key, { owner: 'A', expectedVersion: 0, value: { seq: 1 } });
    const loadedByA = await store.load(key); // version 1
    clock.advance(TTL); // A stalls past its lease
    const loadedByB = await store.acquire(key, 'B', TTL);
    expect(loadedByB.version).toBe(loadedByA.version);
    await store.commit(key, { owner: 'B', expectedVersion: loadedByB.version, value: { seq: 2, by: 'B' } });
    await store.release(key, 'B');

    // A wakes up, takes the free lease again, and tries to commit from what it loaded before.
    await store.acquire(key, 'A', TTL);
    const err = await rejection(
      () => store.commit(key, { owner: 'A', expectedVersion: loadedByA.version, value: { seq: 2, by: 'A' } }),
      CursorConflictError,
    );
    expect(err).toMatchObject({ key, expectedVersion: 1, actualVersion: 2, code: 'CURSOR_CONFLICT' });
    expect(err.message).toContain(key);
    expect(err.message).toMatch(/expected version 1, found 2/);
    expect(await store.load(key)).toMatchObject({ version: 2, value: { seq: 2, by: 'B' } });
  });

  it('a real concurrent race: of 8 commits from the same version exactly one wins', async () => {
    const { store, key } = await started('race_concurrent');
    await store.acquire(key, 'A', TTL);
    await store.commit(key, { owner: 'A', expectedVersion: 0, value: { seq: 1 } });
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        store.commit(key, { owner: 'A', expectedVersion: 1, value: { writer: i } }),
      ),
    );
    const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
    expect(won).toHaveLength(1);
    for (const r of results) {
      if (r.status === 'rejected') {
        expect(r.reason).toBeInstanceOf(CursorConflictError);
        expect(r.reason).toMatchObject({ key, expectedVersion: 1, actualVersion: 2 });
      }
    }
    expect(await store.load(key)).toMatchObject({ version: 2, value: { writer: won[0] } });
  });

  it('a real concurrent race: of 6 owners acquiring a free lease exactly one gets it', async () => {
    const { store, key } = await started('race_acquire');
    await expectOneLeaseWinner(store, key, (o) => store.acquire(key, o, TTL));
  });

  it('a live lease refuses a second owner with LeaseHeldError and changes nothing', async () => {
    const { clock, store, key } = await started('held');
    await store.acquire(key, 'A', TTL);
    await store.commit(key, { owner: 'A', expectedVersion: 0, value: { seq: 1 } });
    const before = await store.load(key);
    clock.advance(TTL - 1);
    const err = await rejection(() => store.acquire(key, 'B', TTL), LeaseHeldError);
    expect(err).toMatchObject({ key, holder: 'A', expiresAt: before.lease!.expiresAt, code: 'LEASE_HELD' });
    expect(err.message).toContain('A');
    // B may not commit either, even with the right version.
    await rejection(
      () => store.commit(key, { owner: 'B', expectedVersion: 1, value: { seq: 9 } }),
      LeaseLostError,
    );
    expect(await store.load(key)).toEqual(before);
    // The holder may re-acquire (a restarted run with the same id): it extends the lease, and
    // as every acquisition it gets a new fence (the earlier incarnation may still write).
    const again = await store.acquire(key, 'A', TTL);
    expect(again.lease).toEqual({ owner: 'A', expiresAt: clock.now + TTL, fence: 2 });
  });

  it('an expired lease is taken over by another owner, at exactly expiresAt', async () => {
    const { clock, store, key } = await started('expiry');
    const { lease } = await store.acquire(key, 'A', TTL);
    clock.now = lease!.expiresAt - 1;
    await rejection(() => store.acquire(key, 'B', TTL), LeaseHeldError);
    clock.now = lease!.expiresAt;
    const taken = await store.acquire(key, 'B', TTL);
    expect(taken.lease).toEqual({ owner: 'B', expiresAt: clock.now + TTL, fence: 2 });
    await rejection(() => store.acquire(key, 'A', TTL), LeaseHeldError);
  });

  it('takeOver replaces a live lease of exactly the named holder, and no other', async () => {
    const { clock, store, key } = await started('takeover');
    await store.acquire(key, 'A', TTL);
    await store.commit(key, { owner: 'A', expectedVersion: 0, value: { seq: 1 } });
    const before = await store.load(key);
    // Naming a holder that is not the current one: refused, naming the real holder; no change.
    const err = await rejection(() => store.takeOver(key, 'B', TTL, 'C'), LeaseHeldError);
    expect(err).toMatchObject({ key, holder: 'A', expiresAt: before.lease!.expiresAt, code: 'LEASE_HELD' });
    expect(await store.load(key)).toEqual(before);
    clock.advance(1);
    const taken = await store.takeOver(key, 'B', TTL, 'A');
    expect(taken).toEqual({
      key,
      version: 1,
      value: { seq: 1 },
      lease: { owner: 'B', expiresAt: clock.now + TTL, fence: 2 },
    });
    // The displaced holder is fenced: no commit, no renew, and its release frees nothing.
    await rejection(
      () => store.commit(key, { owner: 'A', expectedVersion: 1, value: { zombie: true } }),
      LeaseLostError,
    );
    await rejection(() => store.renew(key, 'A', TTL), LeaseLostError);
    await store.release(key, 'A');
    expect((await store.load(key)).lease?.owner).toBe('B');
    // A second takeover from A (whose lease is gone) cannot displace B.
    await rejection(() => store.takeOver(key, 'C', TTL, 'A'), LeaseHeldError);
    // Otherwise it is acquire: a free lease, an expired one, or our own.
    await store.release(key, 'B');
    expect((await store.takeOver(key, 'C', TTL, 'A')).lease).toEqual({
      owner: 'C',
      expiresAt: clock.now + TTL,
      fence: 3,
    });
    clock.advance(TTL);
    expect((await store.takeOver(key, 'D', TTL, 'A')).lease?.owner).toBe('D');
    expect((await store.takeOver(key, 'D', TTL, 'A')).lease?.owner).toBe('D');
    expect((await store.load(key)).version).toBe(1);
  });

  it('a real concurrent race: of 6 owners taking over from one dead holder exactly one gets it', async () => {
    const { store, key } = await started('race_takeover');
    await store.acquire(key, 'dead', TTL);
    await expectOneLeaseWinner(store, key, (o) => store.takeOver(key, o, TTL, 'dead'));
  });

  it('every acquisition gets the next fence, across release, takeOver and expiry; renew, commit and refusals keep it', async () => {
    const { clock, store, key } = await started('fence');
    const a1 = await store.acquire(key, 'A', TTL);
    expect(a1.lease?.fence).toBe(1);
    expect((await store.renew(key, 'A', TTL)).fence).toBe(1);
    const c1 = await store.commit(key, {
      owner: 'A',
      expectedVersion: 0,
      value: { seq: 1 },
      renewTtlMs: TTL,
    });
    expect(c1.lease?.fence).toBe(1);
    expect(
      (await store.commit(key, { owner: 'A', expectedVersion: 1, value: { seq: 2 } })).lease?.fence,
    ).toBe(1);
    // Refused acquisitions and takeovers hand out nothing.
    await rejection(() => store.acquire(key, 'B', TTL), LeaseHeldError);
    await rejection(() => store.takeOver(key, 'B', TTL, 'C'), LeaseHeldError);
    expect((await store.load(key)).lease).toEqual({ owner: 'A', expiresAt: clock.now + TTL, fence: 1 });
    // Released and taken again, even by the same owner: the next fence, never the old one.
    await store.release(key, 'A');
    expect((await store.load(key)).lease).toBeUndefined();
    expect((await store.acquire(key, 'A', TTL)).lease?.fence).toBe(2);
    await store.release(key, 'A');
    expect((await store.acquire(key, 'B', TTL)).lease?.fence).toBe(3);
    // takeOver from a holder the caller proved dead.
    expect((await store.takeOver(key, 'C', TTL, 'B')).lease?.fence).toBe(4);
    // Expiry: another owner takes the expired lease.
    clock.advance(TTL);
    const d = await store.acquire(key, 'D', TTL);
    expect(d.lease).toEqual({ owner: 'D', expiresAt: clock.now + TTL, fence: 5 });
    // The displaced holder's fence is below the new one, and it cannot renew its way back.
    await rejection(() => store.renew(key, 'C', TTL), LeaseLostError);
    expect(
      (await store.commit(key, { owner: 'D', expectedVersion: 2, value: { seq: 3 } })).lease?.fence,
    ).toBe(5);
    // Lease changes never move the version; the fence never moves on a commit.
    expect(await store.load(key)).toMatchObject({ version: 3, lease: { owner: 'D', fence: 5 } });
  });

  it('concurrent acquirers never get the same fence', async () => {
    const { store, key } = await started('fence_race');
    const owners = ['o0', 'o1', 'o2', 'o3', 'o4', 'o5'];
    const ROUNDS = 4;
    // Six owners take turns as fast as they can: acquire (retrying while another holds it),
    // release, again. Every success is one acquisition.
    const got = await Promise.all(
      owners.map(async (owner) => {
        const fences: number[] = [];
        for (let i = 0; i < ROUNDS; i++) {
          for (;;) {
            try {
              fences.push((await store.acquire(key, owner, TTL)).lease!.fence);
              break;
            } catch (err) {
              // Held by another; or (DynamoDB) released between its failed write and its read.
              if (!(err instanceof LeaseHeldError || (err as StateError).code === 'STATE_CONTENDED'))
                throw err;
              await new Promise((r) => setTimeout(r, Math.random() * 3));
            }
          }
          await store.release(key, owner);
        }
        return fences;
      }),
    );
    const all = got.flat().sort((x, y) => x - y);
    // Distinct, and exactly 1..n: no fence reused, none skipped by a refused attempt.
    expect(all).toEqual(Array.from({ length: owners.length * ROUNDS }, (_, i) => i + 1));
    // One owner re-acquiring its own lease 8 times at once: 8 acquisitions, 8 new fences.
    const base = all.length;
    const again = await Promise.all(Array.from({ length: 8 }, () => store.acquire(key, 'same', TTL)));
    expect(again.map((r) => r.lease!.fence).sort((x, y) => x - y)).toEqual(
      Array.from({ length: 8 }, (_, i) => base + i + 1),
    );
    expect((await store.load(key)).lease?.fence).toBe(base + 8);
  });

  it('the holder may commit and renew until expiresAt - 1, not at expiresAt', async () => {
    const { clock, store, key } = await started('boundary');
    const { lease } = await store.acquire(key, 'A', TTL);
    clock.now = lease!.expiresAt - 1;
    expect((await store.commit(key, { owner: 'A', expectedVersion: 0, value: { seq: 1 } })).version).toBe(1);
    const renewed = await store.renew(key, 'A', 10);
    clock.now = renewed.expiresAt;
    await rejection(() => store.renew(key, 'A', TTL), LeaseLostError);
    await rejection(
      () => store.commit(key, { owner: 'A', expectedVersion: 1, value: { seq: 2 } }),
      LeaseLostError,
    );
    expect((await store.load(key)).version).toBe(1);
  });

  it('a writer whose lease expired cannot commit or renew (LeaseLostError); the state is unchanged', async () => {
    const { clock, store, key } = await started('expired_commit');
    await store.acquire(key, 'A', TTL);
    await store.commit(key, { owner: 'A', expectedVersion: 0, value: { seq: 1 } });
    const before = await store.load(key);
    clock.advance(TTL);
    const err = await rejection(
      () => store.commit(key, { owner: 'A', expectedVersion: 1, value: { seq: 2 } }),
      LeaseLostError,
    );
    expect(err).toMatchObject({ key, owner: 'A', code: 'LEASE_LOST' });
    await rejection(() => store.renew(key, 'A', TTL), LeaseLostError);
    expect(await store.load(key)).toEqual(before);
  });

  it('a writer whose lease was taken over cannot commit, even with the current version', async () => {
    const { clock, store, key } = await started('taken_over');
    await store.acquire(key, 'A', TTL);
    clock.advance(TTL + 5);
    await store.acquire(key, 'B', TTL);
    const before = await store.load(key);
    await rejection(
      () => store.commit(key, { owner: 'A', expectedVersion: 0, value: { zombie: true } }),
      LeaseLostError,
    );
    await rejection(() => store.renew(key, 'A', TTL), LeaseLostError);
    // The zombie's release must not free the new holder's lease.
    await store.release(key, 'A');
    expect(await store.load(key)).toEqual(before);
    expect((await store.commit(key, { owner: 'B', expectedVersion: 0, value: { seq: 1 } })).version).toBe(1);
  });

  it('renew extends the lease from now; commit with renewTtlMs extends it in the same write', async () => {
    const { clock, store, key } = await started('renew');
    await store.acquire(key, 'A', TTL);
    clock.advance(TTL - 10);
    const renewed: Lease = await store.renew(key, 'A', TTL);
    expect(renewed).toEqual({ owner: 'A', expiresAt: clock.now + TTL, fence: 1 });
    clock.advance(TTL - 10); // past the first expiry, inside the renewed one
    await rejection(() => store.acquire(key, 'B', TTL), LeaseHeldError);
    const committed = await store.commit(key, {
      owner: 'A',
      expectedVersion: 0,
      value: { seq: 1 },
      renewTtlMs: 5_000,
    });
    expect(committed.lease).toEqual({ owner: 'A', expiresAt: clock.now + 5_000, fence: 1 });
    expect((await store.load(key)).lease).toEqual(committed.lease);
    await rejection(() => store.renew(key, 'B', TTL), LeaseLostError);
  });

  it('release by a non-owner does nothing; release by the owner lets another acquire at once', async () => {
    const { store, key } = await started('release');
    await store.acquire(key, 'A', TTL);
    await store.commit(key, { owner: 'A', expectedVersion: 0, value: { seq: 1 } });
    await store.release(key, 'B');
    expect((await store.load(key)).lease?.owner).toBe('A');
    await store.release(key, 'A');
    expect(await store.load(key)).toEqual({ key, version: 1, value: { seq: 1 }, lease: undefined });
    await rejection(
      () => store.commit(key, { owner: 'A', expectedVersion: 1, value: { seq: 2 } }),
      LeaseLostError,
    );
    const b = await store.acquire(key, 'B', TTL);
    expect(b).toMatchObject({ version: 1, value: { seq: 1 }, lease: { owner: 'B' } });
    await store.release(key, 'B');
    await store.release(key, 'B'); // twice is harmless
    await store.release(freshKey('never'), 'B'); // and on a key that does not exist
  });

  it('refuses a value over the size limit before writing, accepts one just under it', async () => {
    const { store, key } = await started('size');
    await store.acquire(key, 'A', TTL);
    // {"p":"xxx..."} is 8 bytes of JSON around the string.
    const fits = { p: 'x'.repeat(MAX_STATE_VALUE_BYTES - 8) };
    expect((await store.commit(key, { owner: 'A', expectedVersion: 0, value: fits })).version).toBe(1);
    const tooBig = { p: 'x'.repeat(MAX_STATE_VALUE_BYTES - 7) };
    const err = await rejection(
      () => store.commit(key, { owner: 'A', expectedVersion: 1, value: tooBig }),
      StateError,
    );
    expect(err).toMatchObject({ code: 'STATE_TOO_LARGE', key });
    expect(err.message).toMatch(/S3/);
    const after = await store.load(key);
    expect(after.version).toBe(1);
    expect((after.value as { p: string }).p.length).toBe(MAX_STATE_VALUE_BYTES - 8);
  });

  it('refuses values that are not JSON objects and non-positive TTLs', async () => {
    const { store, key } = await started('invalid');
    await rejection(() => store.acquire(key, 'A', 0), StateError);
    await store.acquire(key, 'A', TTL);
    const bigintValue = { n: 1n } as unknown as StateValue;
    expect(
      await rejection(
        () => store.commit(key, { owner: 'A', expectedVersion: 0, value: bigintValue }),
        StateError,
      ),
    ).toMatchObject({
      code: 'STATE_NOT_JSON',
    });
    expect((await store.load(key)).version).toBe(0);
  });

  it('returns values the caller cannot use to change the stored state', async () => {
    const { store, key } = await started('isolation');
    await store.acquire(key, 'A', TTL);
    const value = { list: [1, 2] };
    const committed = await store.commit(key, { owner: 'A', expectedVersion: 0, value });
    value.list.push(3);
    (committed.value as { list: number[] }).list.push(4);
    ((await store.load(key)).value as Record<string, unknown>).extra = 1;
    expect((await store.load(key)).value).toEqual({ list: [1, 2] });
  });

  it('note: writes a key of notes with no lease, the last note wins, load reads it as version 0', async () => {
    const { store, key } = await started('note');
    await store.note(key, { at: 't1', code: 'A' });
    expect(await store.load(key)).toEqual({
      key,
      version: 0,
      value: { at: 't1', code: 'A' },
      lease: undefined,
    });
    await store.note(key, { at: 't2', code: 'B' });
    expect(await store.load(key)).toEqual({
      key,
      version: 0,
      value: { at: 't2', code: 'B' },
      lease: undefined,
    });
    await rejection(() => store.note(key, { big: 'x'.repeat(MAX_STATE_VALUE_BYTES) }), StateError);
    expect((await store.load(key)).value).toEqual({ at: 't2', code: 'B' });
  });

  it('note: refuses (STATE_KEY_LEASED) a key with a live or released lease or a commit, and changes nothing', async () => {
    const { store, key } = await started('note-leased');
    const held = await store.acquire(key, 'A', TTL);
    const refused = async () => {
      const before = await store.load(key);
      const e = await rejection(() => store.note(key, { zombie: true }), StateError);
      expect(e.code).toBe('STATE_KEY_LEASED');
      expect(await store.load(key)).toEqual(before);
    };
    await refused();
    await store.commit(key, { owner: 'A', expectedVersion: held.version, value: { seq: 1 } });
    await refused();
    await store.release(key, 'A');
    await refused();
    // Acquired and released without a commit: its fence still marks it as the lease protocol's.
    const { key: other } = await started('note-fenced');
    await store.acquire(other, 'A', TTL);
    await store.release(other, 'A');
    const e = await rejection(() => store.note(other, { zombie: true }), StateError);
    expect(e.code).toBe('STATE_KEY_LEASED');
  });
});

// ---------------------------------------------------------------------------------------------
// Model-based property test: random operations by 3 owners with clock moves, against a reference
// model of the rules written independently of shared/state/cursor-rules.ts.

type Op =
  | { readonly op: 'acquire'; readonly owner: string; readonly ttl: number }
  | { readonly op: 'renew'; readonly owner: string; readonly ttl: number }
  | { readonly op: 'takeOver'; readonly owner: string; readonly ttl: number; readonly from: string }
  | {
      readonly op: 'commit';
      readonly owner: string;
      readonly versionDelta: number;
      readonly renewTtl: number | undefined;
      readonly n: number;
    }
  | { readonly op: 'release'; readonly owner: string }
  | { readonly op: 'advance'; readonly ms: number }
  /** Moves the clock to the current lease's expiry plus `offset`, the instant where rules flip. */
  | { readonly op: 'toExpiry'; readonly offset: number };

/** The rules as a reader would state them, in the fewest lines. */
class ReferenceModel {
  version = 0;
  value: StateValue | undefined = undefined;
  lease: Lease | undefined = undefined;
  /** How many acquisitions succeeded: the last fence handed out. */
  acquisitions = 0;
  constructor(private readonly key: string) {}

  live(owner: string, now: number): boolean {
    return this.lease?.owner === owner && now < this.lease.expiresAt;
  }
  acquire(owner: string, ttl: number, now: number): StateRecord {
    if (this.lease && this.lease.owner !== owner && now < this.lease.expiresAt) {
      throw new LeaseHeldError(this.key, this.lease.owner, this.lease.expiresAt);
    }
    this.lease = { owner, expiresAt: now + ttl, fence: ++this.acquisitions };
    return this.record();
  }
  takeOver(owner: string, ttl: number, from: string, now: number): StateRecord {
    const holder = this.lease?.owner;
    if (this.lease && holder !== owner && holder !== from && now < this.lease.expiresAt) {
      throw new LeaseHeldError(this.key, this.lease.owner, this.lease.expiresAt);
    }
    this.lease = { owner, expiresAt: now + ttl, fence: ++this.acquisitions };
    return this.record();
  }
  renew(owner: string, ttl: number, now: number): Lease {
    if (!this.live(owner, now)) throw new LeaseLostError(this.key, owner);
    this.lease = { owner, expiresAt: now + ttl, fence: this.lease!.fence };
    return this.lease;
  }
  commit(
    owner: string,
    expected: number,
    value: StateValue,
    renewTtl: number | undefined,
    now: number,
  ): StateRecord {
    if (!this.live(owner, now)) throw new LeaseLostError(this.key, owner);
    if (expected !== this.version) throw new CursorConflictError(this.key, expected, this.version);
    this.version += 1;
    this.value = value;
    if (renewTtl !== undefined) this.lease = { owner, expiresAt: now + renewTtl, fence: this.lease!.fence };
    return this.record();
  }
  release(owner: string): void {
    if (this.lease?.owner === owner) this.lease = undefined;
  }
  record(): StateRecord {
    return { key: this.key, version: this.version, value: this.value, lease: this.lease };
  }
}

const ownerArb = fc.constantFrom('a', 'b', 'c');
// Small TTLs and clock steps, so sequences often land exactly on an expiry instant, plus long
// ones, so that leases also live long enough for commits to reach the version check.
const ttlArb = fc.oneof(fc.integer({ min: 1, max: 12 }), fc.constant(1_000));
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ op: fc.constant('acquire' as const), owner: ownerArb, ttl: ttlArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('renew' as const), owner: ownerArb, ttl: ttlArb }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('takeOver' as const),
      owner: ownerArb,
      ttl: ttlArb,
      from: ownerArb,
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('commit' as const),
      owner: ownerArb,
      // Mostly the current version; often a stale or future one, to reach the conflict rule.
      versionDelta: fc.constantFrom(0, 0, -1, 1, 2),
      renewTtl: fc.option(ttlArb, { nil: undefined }),
      n: fc.integer(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('release' as const), owner: ownerArb }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 15 }) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('toExpiry' as const), offset: fc.constantFrom(-1, 0) }),
  },
);

/** What an operation came to, comparable across the model and a store. */
function outcome(result: PromiseSettledResult<unknown>): unknown {
  if (result.status === 'fulfilled') return { ok: result.value ?? null };
  const err = result.reason as TidemarkError;
  if (!(err instanceof TidemarkError)) throw err;
  return { error: err.name, fields: { ...err }, message: err.message };
}

async function settle<T>(fn: () => T | Promise<T>): Promise<PromiseSettledResult<T>> {
  try {
    return { status: 'fulfilled', value: await fn() };
  } catch (reason) {
    return { status: 'rejected', reason };
  }
}

describe.each(KINDS)('CursorStore model test: $name', (kind) => {
  beforeAll(() => kind.setup());
  afterAll(() => kind.teardown());
  // Each file operation fsyncs twice and a dynalite call is a network round trip: fewer runs.
  const numRuns = kind.name === 'memory' ? 500 : kind.name === 'file' ? 150 : 60;

  it('matches the reference model on random operation sequences', async () => {
    const seen = new Set<string>();
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 30 }), async (ops) => {
        const clock = new ManualClock();
        const key = freshKey('model');
        const store = kind.make(clock.read);
        const model = new ReferenceModel(key);
        for (const op of ops) {
          let expected: PromiseSettledResult<unknown>;
          let actual: PromiseSettledResult<unknown>;
          switch (op.op) {
            case 'advance':
              clock.advance(op.ms);
              continue;
            case 'toExpiry':
              if (model.lease !== undefined)
                clock.now = Math.max(clock.now, model.lease.expiresAt + op.offset);
              continue;
            case 'acquire':
              expected = await settle(() => model.acquire(op.owner, op.ttl, clock.now));
              actual = await settle(() => store.acquire(key, op.owner, op.ttl));
              break;
            case 'takeOver':
              expected = await settle(() => model.takeOver(op.owner, op.ttl, op.from, clock.now));
              actual = await settle(() => store.takeOver(key, op.owner, op.ttl, op.from));
              break;
            case 'renew':
              expected = await settle(() => model.renew(op.owner, op.ttl, clock.now));
              actual = await settle(() => store.renew(key, op.owner, op.ttl));
              break;
            case 'commit': {
              const expectedVersion = Math.max(0, model.version + op.versionDelta);
              const value = { n: op.n, by: op.owner };
              expected = await settle(() =>
                model.commit(op.owner, expectedVersion, value, op.renewTtl, clock.now),
              );
              actual = await settle(() =>
                store.commit(key, {
                  owner: op.owner,
                  expectedVersion,
                  value,
                  ...(op.renewTtl === undefined ? {} : { renewTtlMs: op.renewTtl }),
                }),
              );
              break;
            }
            case 'release':
              expected = await settle(() => model.release(op.owner));
              actual = await settle(() => store.release(key, op.owner));
              break;
          }
          expect(outcome(actual), `${JSON.stringify(op)} at ${clock.now}`).toEqual(outcome(expected));
          seen.add(`${op.op}:${expected.status === 'fulfilled' ? 'ok' : (expected.reason as Error).name}`);
          expect(await store.load(key)).toEqual(model.record());
        }
      }),
      // A fixed seed: the coverage check below must not depend on luck (60 Dynamo runs did
      // not always reach every outcome). Change the seed to explore other sequences.
      { numRuns, seed: 20_261_130 },
    );
    // The random sequences reached every outcome the rules have, not only the easy ones.
    for (const outcome of [
      'acquire:ok',
      'acquire:LeaseHeldError',
      'takeOver:ok',
      'takeOver:LeaseHeldError',
      'renew:ok',
      'renew:LeaseLostError',
      'commit:ok',
      'commit:LeaseLostError',
      'commit:CursorConflictError',
    ]) {
      expect(seen).toContain(outcome);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// File store only: other processes, crashes, locks.

interface WorkerCounts {
  readonly successes: number;
  readonly conflicts: number;
  readonly heldRetries: number;
  /** `lease` mode: the fence of every lease the worker got. */
  readonly fences?: readonly number[];
}

/** Starts the cursor store worker with `args` (its mode first). */
const startStoreWorker = (args: readonly string[]) => startWorker(WORKER, args);

/** Starts one worker per args list and races them (test/harness/worker-race.ts): their counts. */
function runWorkersTogether(argLists: string[][]): Promise<WorkerCounts[]> {
  return raceWorkers<WorkerCounts>(argLists.map(startStoreWorker));
}

describe('FileCursorStore across processes', () => {
  let dir = '';
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tidemark-cursor-proc-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('4 processes taking turns by lease: no lost update, no conflict while holding the lease', async () => {
    const key = freshKey('procs_lease');
    const results = await runWorkersTogether(
      ['p0', 'p1', 'p2', 'p3'].map((owner) => ['lease', dir, key, owner, '25']),
    );
    const successes = results.reduce((s, r) => s + r.successes, 0);
    const conflicts = results.reduce((s, r) => s + r.conflicts, 0);
    const record = await new FileCursorStore(dir).load(key);
    expect(successes).toBe(100);
    // A holder loaded its version after taking the lease and nobody else could commit meanwhile.
    expect(conflicts).toBe(0);
    expect(record.version).toBe(successes);
    expect(record.value).toMatchObject({ counter: successes });
    expect(record.lease).toBeUndefined();
    // The workers really competed for the lease.
    expect(results.reduce((s, r) => s + r.heldRetries, 0)).toBeGreaterThan(0);
    // 100 acquisitions by 4 processes: fences 1..100, each handed out once.
    const fences = results.flatMap((r) => r.fences ?? []).sort((x, y) => x - y);
    expect(fences).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    console.info(
      `lease mode: ${successes} commits, ${results.reduce((s, r) => s + r.heldRetries, 0)} LeaseHeld retries`,
    );
  });

  it('4 processes sharing one owner: only compare-and-set under the file lock prevents lost updates', async () => {
    const key = freshKey('procs_shared');
    const results = await runWorkersTogether(
      [0, 1, 2, 3].map(() => ['shared-owner', dir, key, 'same', '100']),
    );
    const successes = results.reduce((s, r) => s + r.successes, 0);
    const conflicts = results.reduce((s, r) => s + r.conflicts, 0);
    const record = await new FileCursorStore(dir).load(key);
    expect(successes + conflicts).toBe(400);
    expect(record.version).toBe(successes);
    expect(record.value).toEqual({ counter: successes });
    // The workers really overlapped: some loaded a version another had already moved.
    expect(conflicts).toBeGreaterThan(0);
    console.info(`shared-owner mode: ${successes} commits won, ${conflicts} conflicts`);
  });

  it('SIGKILL during repeated writes, 20 times: always a complete old or new value, and the next writer is not blocked', async () => {
    const key = freshKey('crash');
    const probe = new FileCursorStore(dir);
    const stateFile = probe.pathOf(key);
    const prefix = stateFile.slice(dir.length + 1);
    let locksLeft = 0;
    let tempsLeft = 0;
    let lastVersion = 0;
    for (let round = 0; round < 20; round++) {
      const child = startStoreWorker(['crash', dir, key, 'crasher', String(CRASH_PAYLOAD_CHARS)]);
      const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
      await readyOf(child);
      await new Promise((r) => setTimeout(r, 5 + Math.random() * 60));
      child.kill('SIGKILL');
      await exited;

      const names = await readdir(dir);
      if (names.includes(`${prefix}.lock`)) locksLeft++;
      if (names.some((n) => n.startsWith(`${prefix}.tmp-`))) tempsLeft++;

      // The file is complete: it parses, and its payload matches its own version.
      const record = await probe.load(key);
      expect(record.version).toBeGreaterThanOrEqual(lastVersion);
      if (record.version > 0) {
        const value = record.value as { n: number; payload: string };
        expect(value.n).toBe(record.version);
        expect(value.payload).toBe(String(value.n % 10).repeat(CRASH_PAYLOAD_CHARS));
      }
      lastVersion = record.version;

      // The next writer gets through because the killed holder's pid is dead, not because its
      // lock aged: staleness is set to an hour, so a writer that did not see the dead pid would
      // wait out its lock timeout and fail with STATE_LOCK_TIMEOUT (no wall clock asserted).
      const next = await new FileCursorStore(dir, Date.now, {
        lockStaleMs: 3_600_000,
        lockTimeoutMs: 60_000,
      }).acquire(key, 'crasher', 3_600_000);
      expect(next.version).toBe(record.version);
      const leftovers = (await readdir(dir)).filter((n) => n.startsWith(prefix) && n !== prefix);
      expect(leftovers).toEqual([]);
    }
    console.info(
      `crash rounds: 20, reached version ${lastVersion}, stale lock left ${locksLeft}x, temp file left ${tempsLeft}x`,
    );
  });

  it('breaks a lock whose holder pid is dead, and one older than lockStaleMs', async () => {
    const clock = new ManualClock();
    // Each case gets through only by the rule it tests: staleness is far longer than any wait
    // the lock timeout allows, so a rule that did not fire ends in STATE_LOCK_TIMEOUT instead of
    // passing late (no wall-clock bound asserted; a loaded machine only makes it slower).
    const LOCK_TIMEOUT_MS = 60_000;
    const STALE_MS = 30 * 60_000;
    const store = new FileCursorStore(dir, clock.read, {
      lockStaleMs: STALE_MS,
      lockTimeoutMs: LOCK_TIMEOUT_MS,
    });
    const key = freshKey('stale_lock');
    const lockPath = `${store.pathOf(key)}.lock`;
    const deadPid = await new Promise<number>((resolve) => {
      const child = spawn(process.execPath, ['-e', '0']);
      child.on('exit', () => resolve(child.pid!));
    });
    const host = (await import('node:os')).hostname();

    await writeFile(lockPath, JSON.stringify({ pid: deadPid, host, nonce: 'dead', createdAt: Date.now() }));
    await store.acquire(key, 'A', TTL);

    // Alive (our own pid) but older than lockStaleMs: a hung holder.
    await writeFile(
      lockPath,
      JSON.stringify({ pid: process.pid, host, nonce: 'hung', createdAt: Date.now() - 2 * STALE_MS }),
    );
    await store.renew(key, 'A', TTL);

    // Content this module never writes (empty, by hand): judged by its age after a grace period
    // (2 s of mtime age), so it is broken no sooner than that.
    await writeFile(lockPath, '');
    const started = Date.now();
    await store.commit(key, { owner: 'A', expectedVersion: 0, value: { seq: 1 } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_500);
    expect((await store.load(key)).version).toBe(1);

    // Staged lock files of a dead writer (killed between staging and linking) are swept when the
    // next writer breaks a stale lock; a staged file of a live pid is left alone.
    const deadStaged = `${lockPath}-${deadPid}-${randomUUID()}`;
    const liveStaged = `${lockPath}-${process.pid}-${randomUUID()}`;
    await writeFile(deadStaged, '{}');
    await writeFile(liveStaged, '{}');
    await writeFile(lockPath, JSON.stringify({ pid: deadPid, host, nonce: 'dead2', createdAt: Date.now() }));
    await store.release(key, 'A');
    const names = await readdir(dir);
    expect(names).not.toContain(deadStaged.slice(dir.length + 1));
    expect(names).toContain(liveStaged.slice(dir.length + 1));
    await rm(liveStaged);
  });

  it('waits for a live, fresh lock and then fails with STATE_LOCK_TIMEOUT naming the lock file', async () => {
    const store = new FileCursorStore(dir, Date.now, { lockStaleMs: 60_000, lockTimeoutMs: 300 });
    const key = freshKey('live_lock');
    const lockPath = `${store.pathOf(key)}.lock`;
    const host = (await import('node:os')).hostname();
    await writeFile(
      lockPath,
      JSON.stringify({ pid: process.pid, host, nonce: 'live', createdAt: Date.now() }),
    );
    const started = Date.now();
    const err = await rejection(() => store.acquire(key, 'A', TTL), StateError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(err).toMatchObject({ code: 'STATE_LOCK_TIMEOUT', key });
    expect(err.message).toContain(lockPath);
    expect(await store.load(key)).toMatchObject({ version: 0, lease: undefined });
    await rm(lockPath);
    await store.acquire(key, 'A', TTL);
  });

  it("sweeps only its own leftovers, never another key's state file that shares a name prefix", async () => {
    const store = new FileCursorStore(dir);
    const key = `sweep_${randomUUID().slice(0, 8)}`;
    const lookalike = `${key}.json.tmp-1-${randomUUID()}`; // its state file starts with key's temp prefix
    await store.acquire(lookalike, 'A', TTL);
    await store.commit(lookalike, { owner: 'A', expectedVersion: 0, value: { keep: true } });
    const leftover = `${store.pathOf(key)}.tmp-1-${randomUUID()}`;
    await writeFile(leftover, '{"torn');
    await new FileCursorStore(dir).acquire(key, 'A', TTL); // first lock of key in a new instance sweeps
    const names = await readdir(dir);
    expect(names).not.toContain(leftover.slice(dir.length + 1));
    expect((await store.load(lookalike)).value).toEqual({ keep: true });
  });

  it('a state file written before fences existed: its lease reads as fence 0, its next acquisition gets 1', async () => {
    const clock = new ManualClock();
    const store = new FileCursorStore(dir, clock.read);
    const key = freshKey('legacy');
    await writeFile(
      store.pathOf(key),
      JSON.stringify({
        key,
        version: 4,
        value: { seq: 4 },
        lease: { owner: 'old-run', expiresAt: clock.now + TTL },
        updatedAt: clock.now,
      }),
    );
    expect(await store.load(key)).toEqual({
      key,
      version: 4,
      value: { seq: 4 },
      lease: { owner: 'old-run', expiresAt: clock.now + TTL, fence: 0 },
    });
    expect((await store.takeOver(key, 'new-run', TTL, 'old-run')).lease?.fence).toBe(1);
    await store.release(key, 'new-run');
    expect((await store.acquire(key, 'next-run', TTL)).lease?.fence).toBe(2);
    expect(await store.load(key)).toMatchObject({ version: 4, value: { seq: 4 } });
  });

  it('reports a corrupt state file as STATE_CORRUPT with what to do', async () => {
    const store = new FileCursorStore(dir);
    const key = freshKey('corrupt');
    await writeFile(store.pathOf(key), '{"key": "x", "vers');
    const err = await rejection(() => store.load(key), StateError);
    expect(err).toMatchObject({ code: 'STATE_CORRUPT', key });
    expect(err.message).toMatch(/delete it/);
  });
});

// ---------------------------------------------------------------------------------------------
// DynamoDB store only: the item layout other tools (CDK alarms, operators) rely on.

describe('DynamoCursorStore item and table', () => {
  let client: DynamoDBClient;
  const table = `tidemark_cursor_layout_${randomUUID().slice(0, 8)}`;
  beforeAll(async () => {
    client = dynamoClient();
  });
  afterAll(() => client.destroy());

  it('ensureTable creates the table once and is idempotent; a missing table is STATE_TABLE_MISSING', async () => {
    const clock = new ManualClock();
    const store = new DynamoCursorStore({ client, tableName: table, clock: clock.read });
    const err = await rejection(() => store.load('k'), StateError);
    expect(err).toMatchObject({ code: 'STATE_TABLE_MISSING' });
    expect(err.message).toContain(table);
    await store.ensureTable();
    await store.ensureTable();
    expect((await store.load('k')).version).toBe(0);
  });

  it('stores one item per key with version N, value S (JSON), leaseOwner, leaseExpiresAt, updatedAt', async () => {
    const clock = new ManualClock();
    const store = new DynamoCursorStore({ client, tableName: table, clock: clock.read });
    await store.ensureTable();
    const key = freshKey('layout');
    await store.acquire(key, 'run-1', TTL);
    clock.advance(7);
    await store.commit(key, { owner: 'run-1', expectedVersion: 0, value: { seq: 1, cursor: 'abc' } });
    const { Item } = await client.send(
      new GetItemCommand({ TableName: table, Key: { pk: { S: key } }, ConsistentRead: true }),
    );
    expect(Item).toEqual({
      pk: { S: key },
      version: { N: '1' },
      value: { S: '{"seq":1,"cursor":"abc"}' },
      leaseOwner: { S: 'run-1' },
      leaseExpiresAt: { N: String(clock.now - 7 + TTL) },
      fence: { N: '1' },
      updatedAt: { N: String(clock.now) },
    });
    await store.release(key, 'run-1');
    const after = await client.send(
      new GetItemCommand({ TableName: table, Key: { pk: { S: key } }, ConsistentRead: true }),
    );
    expect(after.Item?.leaseOwner).toBeUndefined();
    expect(after.Item?.leaseExpiresAt).toBeUndefined();
    expect(after.Item?.version).toEqual({ N: '1' });
    // The fence outlives the lease, so the next acquisition counts on.
    expect(after.Item?.fence).toEqual({ N: '1' });
    expect((await store.acquire(key, 'run-2', TTL)).lease?.fence).toBe(2);
  });

  it('an item stored before fences existed: its lease reads as fence 0, its next acquisition gets 1', async () => {
    const clock = new ManualClock();
    const store = new DynamoCursorStore({ client, tableName: table, clock: clock.read });
    await store.ensureTable();
    const key = freshKey('legacy');
    await client.send(
      new PutItemCommand({
        TableName: table,
        Item: {
          pk: { S: key },
          version: { N: '4' },
          value: { S: '{"seq":4}' },
          leaseOwner: { S: 'old-run' },
          leaseExpiresAt: { N: String(clock.now + TTL) },
          updatedAt: { N: String(clock.now) },
        },
      }),
    );
    expect(await store.load(key)).toEqual({
      key,
      version: 4,
      value: { seq: 4 },
      lease: { owner: 'old-run', expiresAt: clock.now + TTL, fence: 0 },
    });
    expect((await store.takeOver(key, 'new-run', TTL, 'old-run')).lease).toEqual({
      owner: 'new-run',
      expiresAt: clock.now + TTL,
      fence: 1,
    });
    expect((await store.load(key)).version).toBe(4);
  });
});
