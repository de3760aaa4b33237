/**
 * `tidemark check`'s `tableFormat` items (shared/pipeline/check-iceberg.ts `checkTableFormats`)
 * over states written with FileCursorStore: CDC entries (recorded format, written before formats
 * were recorded, never written) and incremental states (never committed, a format this build does
 * not know), against each `lake.tableFormat`; and whether the check counts a table as Iceberg,
 * which decides if the catalog is probed. The integration test (check-iceberg.test.ts) covers
 * states a real `tidemark run` wrote; this one the CDC entries and the corrupt state.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSpec, type Spec } from '../../shared/config/spec.js';
import type { StateValue } from '../../shared/contracts/state.js';
import { registerDriver, unregisterDriver } from '../../shared/drivers/registry.js';
import { cdcStateKey } from '../../shared/engine/cdc/state.js';
import { incrementalStateKey } from '../../shared/engine/incremental/state.js';
import { checkTableFormats } from '../../shared/pipeline/check-iceberg.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { scriptedDriver } from '../harness/scripted-driver.js';

const KIND = 'scripted-table-formats';
const OWNER = 'test-owner';
let dir: string;
let store: FileCursorStore;

beforeAll(async () => {
  registerDriver(scriptedDriver(KIND));
  dir = mkdtempSync(join(tmpdir(), 'tidemark-check-formats-'));
  store = new FileCursorStore(join(dir, 'state'));
  const entry = (extra: Record<string, unknown>) => ({
    schemaHash: 'abc',
    schemaVersion: 1,
    rows: 0,
    objects: 0,
    ...extra,
  });
  await put(cdcStateKey('shop', 's'), {
    position: { scheme: 'scripted', value: '1', display: 'step 1' },
    tables: {
      'public.orders': entry({ tableFormat: 'iceberg', next: 'c000002' }),
      'public.users': entry({ next: 'c000007' }),
      'public.fresh': entry({}),
    },
  });
  await put(incrementalStateKey('shop', 'public.items'), { cursor: '', cursorColumn: 'updated_at', seq: 0 });
  await put(incrementalStateKey('shop', 'public.bad'), {
    cursor: '',
    cursorColumn: 'updated_at',
    seq: 3,
    tableFormat: 'delta',
  });
});
afterAll(() => {
  unregisterDriver(KIND);
  rmSync(dir, { recursive: true, force: true });
});

async function put(key: string, value: StateValue): Promise<void> {
  const r = await store.acquire(key, OWNER, 60_000);
  await store.commit(key, { owner: OWNER, expectedVersion: r.version, value });
  await store.release(key, OWNER);
}

/** A spec of the given tables (cdc of source `s`, incremental of `pg`) and `lake.tableFormat`. */
function specOf(tables: string[], tableFormat?: 'iceberg' | 'plain'): Spec {
  return parseSpec({
    pipeline: 'shop',
    sources: {
      s: { kind: KIND, url: 'postgres://u:pw@h:5432/db' },
      pg: { kind: 'postgres', url: 'postgres://u:pw@h:5432/db' },
    },
    state: { dir: join(dir, 'state') },
    lake: { uri: `file://${join(dir, 'lake')}`, ...(tableFormat ? { tableFormat } : {}) },
    tables: tables.map((table) =>
      ['public.items', 'public.bad'].includes(table)
        ? { source: 'pg', table, mode: 'incremental', cursor: 'updated_at', writeMode: 'append' }
        : { source: 's', table, mode: 'cdc', writeMode: 'upsert', snapshot: 'never' },
    ),
  });
}

/** `table status code: message` of each item. */
async function itemsOf(spec: Spec) {
  const check = await checkTableFormats(spec, spec.tables, store);
  return {
    iceberg: check.iceberg,
    items: check.items.map(
      ({ table, item }) => `${table.table} ${item.status} ${item.code ?? '-'}: ${item.message}`,
    ),
  };
}

describe('checkTableFormats', () => {
  it('judges each table with state by its recorded format, in the words of the run; new tables get no item', async () => {
    const all = ['public.orders', 'public.users', 'public.fresh', 'public.items', 'public.bad'];
    const corrupt =
      'public.bad fail STATE_CORRUPT: incremental state: the stored state records table format "delta", which this version of tidemark does not write (it writes iceberg and plain); run the tidemark version that wrote it, or inspect the item';
    expect(await itemsOf(specOf(all, 'plain'))).toEqual({
      iceberg: true,
      items: [
        'public.orders fail TABLE_FORMAT_MISMATCH: lake.tableFormat is plain, but the table was written as iceberg; nothing was written. Remove lake.tableFormat to keep each table in its recorded format, or run tidemark reset --table public.orders --delete-objects to write it anew as plain',
        'public.users ok -: written as plain (written before table formats were recorded), as lake.tableFormat says',
        corrupt,
      ],
    });
    expect(await itemsOf(specOf(all, 'iceberg'))).toEqual({
      iceberg: true,
      items: [
        'public.orders ok -: written as iceberg, as lake.tableFormat says',
        'public.users fail TABLE_FORMAT_MISMATCH: lake.tableFormat is iceberg, but the table was written as plain (before table formats were recorded); nothing was written. Remove lake.tableFormat to keep each table in its recorded format, or run tidemark reset --table public.users --delete-objects to write it anew as iceberg',
        corrupt,
      ],
    });
    expect((await itemsOf(specOf(all))).items.slice(0, 2)).toEqual([
      'public.orders ok -: written as iceberg; it keeps that format (lake.tableFormat is unset)',
      'public.users ok -: written as plain (written before table formats were recorded); it keeps that format (lake.tableFormat is unset)',
    ]);
  });

  it('counts a table as Iceberg by its recorded format, a new table by the spec', async () => {
    // Recorded plain, and the spec says plain for new ones: nothing is Iceberg.
    expect((await itemsOf(specOf(['public.users', 'public.fresh', 'public.items'], 'plain'))).iceberg).toBe(
      false,
    );
    // Unset: new tables (fresh, items: never committed) are Iceberg.
    expect((await itemsOf(specOf(['public.users', 'public.fresh']))).iceberg).toBe(true);
    expect((await itemsOf(specOf(['public.users', 'public.items']))).iceberg).toBe(true);
    // Unset, every table recorded plain: nothing is Iceberg, whatever the default for new tables.
    expect((await itemsOf(specOf(['public.users']))).iceberg).toBe(false);
    // Set to plain, a table recorded Iceberg stays Iceberg (its line fails, its catalog is still checked).
    expect((await itemsOf(specOf(['public.orders'], 'plain'))).iceberg).toBe(true);
    // No state readable: the spec decides.
    const spec = specOf(['public.users']);
    expect(await checkTableFormats(spec, spec.tables, undefined)).toEqual({ items: [], iceberg: true });
  });
});
