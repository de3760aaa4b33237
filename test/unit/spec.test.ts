import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findTable, loadSpecFile, parseSpec, redactSpec } from '../../shared/config/spec.js';
import { ConfigError } from '../../shared/contracts/errors.js';

const base = () => ({
  pipeline: 'shop',
  sources: { app: { kind: 'postgres', url: 'postgres://u:secret@h:5432/db' } },
  state: { dir: '/tmp/state' },
  lake: { uri: 'file:///tmp/lake' },
  tables: [{ source: 'app', table: 'public.orders', mode: 'incremental', cursor: 'updated_at', writeMode: 'append' }],
});

function errorOf(raw: unknown): ConfigError {
  try {
    parseSpec(raw, { env: {} });
  } catch (e) {
    if (e instanceof ConfigError) return e;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

describe('pipeline spec', () => {
  it('accepts the example file and fills defaults', () => {
    const spec = loadSpecFile(join(import.meta.dirname, '..', '..', 'tidemark.example.yaml'), { PGPASSWORD: 'pw' });
    const t = spec.tables[0]!;
    expect(t.pageSize).toBe(50_000);
    expect(t.nullCursor).toBe('refuse');
    expect(spec.lake.compression).toBe('zstd');
    expect(spec.sources.app!.url).toContain(':pw@');
    expect(spec.lake.uri.startsWith('file:///')).toBe(true);
  });

  it('names the exact field and the fix', () => {
    const unknown = base() as Record<string, unknown>;
    (unknown.tables as Record<string, unknown>[])[0]!.cursr = 'x';
    expect(errorOf(unknown).message).toMatch(/^tables\[0\]: unknown field\(s\) "cursr"/);

    const noCursor = base();
    delete (noCursor.tables[0] as Partial<(typeof noCursor.tables)[0]>).cursor;
    expect(errorOf(noCursor).message).toMatch(/^tables\[0\]\.cursor: is required/);

    const badMode = base();
    (badMode.tables[0] as Record<string, unknown>).writeMode = 'merge';
    expect(errorOf(badMode).path).toBe('tables[0].writeMode');

    const badSource = base();
    badSource.tables[0]!.source = 'nope';
    expect(errorOf(badSource).message).toContain('tables[0].source: names source "nope"');

    const badLake = base();
    badLake.lake.uri = 'gs://x';
    expect(errorOf(badLake).message).toContain('lake.uri');

    const badSchedule = base();
    (badSchedule.tables[0] as Record<string, unknown>).schedule = 'every 5 minutes';
    expect(errorOf(badSchedule).message).toContain('rate(5 minutes)');

    const both = base() as Record<string, unknown>;
    both.state = { dir: '/x', dynamodb: { table: 'tbl' } };
    expect(errorOf(both).message).toContain('exactly one of "dynamodb" or "dir"');
  });

  it('accepts IANA zones and offsets as cursorTimeZone, nothing else', () => {
    for (const zone of ['America/New_York', 'UTC', 'Asia/Kolkata', '-05:00', '+05:30']) {
      const ok = base();
      (ok.tables[0] as Record<string, unknown>).cursorTimeZone = zone;
      expect(parseSpec(ok).tables[0]!.cursorTimeZone).toBe(zone);
    }
    for (const zone of ['Mars/Base', "UTC'; DROP TABLE x; --", '5', '-25:00', '']) {
      const bad = base();
      (bad.tables[0] as Record<string, unknown>).cursorTimeZone = zone;
      expect(errorOf(bad).path, zone).toBe('tables[0].cursorTimeZone');
    }
  });

  it('lists every problem of a spec, each with its field and fix', () => {
    const bad = base() as Record<string, unknown>;
    (bad.tables as Record<string, unknown>[])[0]!.writeMode = 'merge';
    (bad.tables as Record<string, unknown>[])[0]!.pageSize = 0;
    (bad.lake as Record<string, unknown>).uri = 'gs://x';
    const e = errorOf(bad);
    expect(e.problems.map((p) => p.path).sort()).toEqual(['lake.uri', 'tables[0].pageSize', 'tables[0].writeMode']);
    expect(e.message).toMatch(/^3 problems in the spec:\n {2}- /);
    expect(e.message).not.toContain('more problem');
    const refs = base();
    refs.tables.push({ ...refs.tables[0]!, source: 'nope' }, { ...refs.tables[0]! });
    expect(errorOf(refs).problems.map((p) => p.path)).toEqual(['tables[1].source', 'tables[1].target', 'tables[2].target']);
  });

  it('reads the page byte budget and row cap as bytes or sizes with binary units, within bounds', () => {
    const t = parseSpec(base()).tables[0]!;
    expect(t.pageBytes).toBe(64 * 2 ** 20);
    expect(t.maxRowBytes).toBe(64 * 2 ** 20);
    const sized = base();
    Object.assign(sized.tables[0]!, { pageBytes: '16MiB', maxRowBytes: 300_000_000 });
    const u = parseSpec(sized).tables[0]!;
    expect(u.pageBytes).toBe(16 * 2 ** 20);
    expect(u.maxRowBytes).toBe(300_000_000);
    const spaced = base();
    Object.assign(spaced.tables[0]!, { pageBytes: '1 GiB' });
    expect(parseSpec(spaced).tables[0]!.pageBytes).toBe(2 ** 30);

    const unit = base();
    Object.assign(unit.tables[0]!, { pageBytes: '64MB' });
    expect(errorOf(unit).message).toMatch(/^tables\[0\]\.pageBytes: must be a whole number of bytes or a size such as "64MiB"/);
    const small = base();
    Object.assign(small.tables[0]!, { pageBytes: 1000 });
    expect(errorOf(small).message).toBe('tables[0].pageBytes: must be between 1 MiB and 1 GiB, got 1000 B');
    const big = base();
    Object.assign(big.tables[0]!, { maxRowBytes: '2GiB' });
    expect(errorOf(big).message).toContain('tables[0].maxRowBytes: must be between 1 MiB and 1 GiB, got 2 GiB');
    const fraction = base();
    Object.assign(fraction.tables[0]!, { pageBytes: 2 ** 20 + 0.5 });
    expect(errorOf(fraction).path).toBe('tables[0].pageBytes');
  });

  it('refuses a missing environment variable by name, and two tables writing one lake table', () => {
    const env = base();
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the spec's own ${env:NAME} syntax
    env.sources.app.url = 'postgres://u:${env:NOPE_PW}@h/db';
    expect(errorOf(env).message).toContain('NOPE_PW is not set');
    const dup = base();
    dup.tables.push({ ...dup.tables[0]! });
    expect(errorOf(dup).message).toContain('two tables write to lake table "public.orders"');
  });

  it('redacts passwords wherever a spec is printed', () => {
    const spec = parseSpec(base());
    expect(JSON.stringify(redactSpec(spec))).not.toContain('secret');
    // The outside trial: an un-encoded @ printed most of the password, ?password= all of it.
    const trial = base();
    trial.sources.app.url = 'postgres://reader:p@ssw0rdQuartz@db:5432/shop?password=Qu4rtzQuery';
    (trial.lake as Record<string, unknown>).endpoint = 'http://key:s3cretKey@localhost:4566';
    const printed = redactSpec(parseSpec(trial));
    expect(printed.sources.app!.url).toBe('postgres://reader:***@db:5432/shop?password=***');
    expect(printed.lake.endpoint).toBe('http://key:***@localhost:4566');
    expect(printed.tables).toEqual(parseSpec(trial).tables);
  });

  it('finds tables by source name or target and lists known ones otherwise', () => {
    const spec = parseSpec(base());
    expect(findTable(spec, 'public.orders').cursor).toBe('updated_at');
    expect(() => findTable(spec, 'public.nope')).toThrow(/known: public.orders/);
  });

  it('reports unreadable and invalid YAML files with their path', () => {
    const dir = mkdtempSync(join(tmpdir(), 'spec-'));
    const f = join(dir, 'bad.yaml');
    writeFileSync(f, 'pipeline: [unclosed');
    expect(() => loadSpecFile(f)).toThrow(/bad.yaml is not valid YAML/);
    expect(() => loadSpecFile(join(dir, 'missing.yaml'))).toThrow(/cannot read spec file/);
  });
});
