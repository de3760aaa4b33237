/**
 * `tidemark status` and `tidemark reset` on cdc tables, called in-process (the scripted driver
 * kind is registered in this process only): a `cdc#` state written with FileCursorStore into a
 * temp state dir, a file lake with one object of the writer, an incremental table beside them.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { cmdReset } from '../../functions/cli/commands/reset.js';
import { cmdStatus } from '../../functions/cli/commands/status.js';
import type { StateValue } from '../../shared/contracts/state.js';
import { registerDriver, unregisterDriver } from '../../shared/drivers/registry.js';
import { cdcStateKey } from '../../shared/engine/cdc/state.js';
import { objectName, tablePrefix } from '../../shared/sink/layout.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { scriptedDriver } from '../harness/scripted-driver.js';

const KIND = 'scripted-status';
beforeAll(() => registerDriver(scriptedDriver(KIND)));
afterAll(() => unregisterDriver(KIND));

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
afterEach(() => {
  vi.restoreAllMocks();
  process.exitCode = undefined;
});

/** A gone local process on this host: a pid far above pid_max's default. */
const DEAD_OWNER = `${hostname()}:4194000:-:deadbeef`;

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-cdc-status-'));
  dirs.push(dir);
  const file = join(dir, 'tidemark.json');
  writeFileSync(
    file,
    JSON.stringify({
      pipeline: 'shop',
      sources: {
        s: { kind: KIND, url: 'postgres://u:pw@h:5432/db' },
        pg: { kind: 'postgres', url: 'postgres://u:pw@h:5432/db' },
      },
      state: { dir: join(dir, 'state') },
      lake: { uri: `file://${join(dir, 'lake')}` },
      tables: [
        { source: 's', table: 'public.orders', mode: 'cdc', writeMode: 'upsert', snapshot: 'never' },
        {
          source: 'pg',
          table: 'public.items',
          mode: 'incremental',
          cursor: 'updated_at',
          writeMode: 'append',
        },
        { source: 's', table: 'public.users', mode: 'cdc', writeMode: 'upsert', snapshot: 'never' },
      ],
    }),
  );
  const store = new FileCursorStore(join(dir, 'state'));
  const key = cdcStateKey('shop', 's');
  const value: StateValue = {
    position: { scheme: 'scripted', value: '42', display: 'step 42' },
    lastCommitAt: '2026-12-01T11:59:00.000Z',
    tables: {
      'public.orders': {
        next: 'c000042',
        schemaHash: 'abc',
        schemaVersion: 1,
        rows: 120,
        objects: 1,
        lastFlushAt: '2026-12-01T11:59:00.000Z',
        lagMs: 2500,
        stopped: { at: '2026-12-01T11:58:00.000Z', reason: 'truncated at the source' },
      },
    },
    events: [
      { at: '2026-12-01T11:58:00.000Z', kind: 'truncate', table: 'public.orders', detail: 'TRUNCATE' },
    ],
  };
  // Committed under a lease that is never released: its holder is a gone process of this host.
  const r = await store.acquire(key, DEAD_OWNER, 600_000);
  await store.commit(key, { owner: DEAD_OWNER, expectedVersion: r.version, value });
  const folder = join(dir, 'lake', tablePrefix('', 'public.orders'));
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, objectName('public.orders', 'shop.s', 'c000001', 1).name), Buffer.alloc(1234));
  return { file };
}

function captureStdout(): string[] {
  const out: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    out.push(String(chunk));
    return true;
  });
  return out;
}

describe('tidemark status on cdc tables', () => {
  it('--json: the incremental table as before, then one object per cdc source with its tables', async () => {
    const { file } = await setup();
    const out = captureStdout();
    await cmdStatus(['-c', file, '--json']);
    vi.restoreAllMocks();
    const lines = out
      .join('')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ table: 'public.items', synced: false, writer: 'shop.pg' });
    expect(lines[1]).toMatchObject({
      pipeline: 'shop',
      source: 's',
      mode: 'cdc',
      key: 'cdc#shop#s',
      writer: 'shop.s',
      state: 'idle',
      position: 'step 42',
      positionScheme: 'scripted',
      lastCommitAt: '2026-12-01T11:59:00.000Z',
      lease: { held: true, owner: DEAD_OWNER, kind: 'local', alive: false },
      events: [{ kind: 'truncate', table: 'public.orders' }],
    });
    expect(lines[1].tables).toEqual([
      expect.objectContaining({
        table: 'public.orders',
        captured: true,
        next: 'c000042',
        rows: 120,
        lagMs: 2500,
        schemaVersion: 1,
        stopped: {
          at: '2026-12-01T11:58:00.000Z',
          reason: 'truncated at the source',
          event: {
            at: '2026-12-01T11:58:00.000Z',
            kind: 'truncate',
            table: 'public.orders',
            detail: 'TRUNCATE',
          },
        },
        lake: { objects: 1, bytes: 1234 },
      }),
      expect.objectContaining({
        table: 'public.users',
        captured: false,
        next: null,
        lake: { objects: 0, bytes: 0 },
      }),
    ]);
    expect(process.exitCode ?? 0).toBe(0);
  });

  it('human: a block per cdc source; --table of a cdc table shows its source with that table only', async () => {
    const { file } = await setup();
    let out = captureStdout();
    await cmdStatus(['-c', file]);
    vi.restoreAllMocks();
    const text = out.join('');
    expect(text).not.toMatch(/skipped/);
    expect(text).toMatch(/^public\.items {2}\(source public\.items, writer shop\.pg\)$/m);
    expect(text).toMatch(/^sources\.s {2}\(mode cdc, state cdc#shop#s, writer shop\.s\)$/m);
    expect(text).toMatch(/^ {2}state {7}idle: the lease holder is gone; nobody captures/m);
    expect(text).toMatch(/^ {2}position {4}step 42 \(scripted\)$/m);
    expect(text).toMatch(/^ {2}events {6}.*: truncate on public\.orders: TRUNCATE$/m);
    expect(text).toMatch(/^ {4}state {7}STOPPED .*: truncated at the source; its changes are dropped/m);
    expect(text).toMatch(/^ {4}next {8}c000042$/m);
    expect(text).toMatch(/^ {4}last flush .*; lag 3 s$/m);
    expect(text).toMatch(
      /^ {4}lake {8}120 row\(s\) in 1 object\(s\) committed; 1 object\(s\) of this writer, 0\.00 MB$/m,
    );
    expect(text).toMatch(/^ {2}public\.users {2}\(source public\.users\)\n {4}state {7}never captured/m);

    out = captureStdout();
    await cmdStatus(['-c', file, '--table', 'public.users']);
    vi.restoreAllMocks();
    const one = out.join('');
    expect(one).toMatch(/^sources\.s /);
    expect(one).toContain('public.users');
    // The source's event log stays whole (it names public.orders); its table block does not.
    expect(one).not.toContain('public.orders  (source');
    expect(one).not.toContain('public.items');
  });
});

describe('tidemark reset on a cdc table', () => {
  it('stays refused, and says what a reset would replace and what to do instead', async () => {
    const { file } = await setup();
    const err = await cmdReset(['-c', file, '--table', 'public.orders']).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(
      /^--table: public\.orders is a mode: cdc table without incremental state to retire; /,
    );
    expect(err?.message).toContain('nothing was changed');
    expect(err?.message).toContain(
      'cdc#shop#s holds its entry: 120 row(s) in 1 object(s) committed, next c000042, last flush 2026-12-01T11:59:00.000Z, STOPPED since 2026-12-01T11:58:00.000Z (truncated at the source): its changes are dropped; the source resumes at step 42',
    );
    expect(err?.message).toContain('the lake holds 1 object(s) (0.0 MB) of writer shop.s for it');
    expect(err?.message).toContain('give the table a new "target:"');
    expect(err?.message).toContain('tidemark reset --table public.orders --delete-objects');

    const never = await cmdReset(['-c', file, '--table', 'public.users']).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(never?.message).toContain('cdc#shop#s has no entry for it (never captured');
    expect(never?.message).toContain('the lake holds 0 object(s)');
  });
});
