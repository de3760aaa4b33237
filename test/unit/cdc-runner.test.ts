/**
 * The CDC runner (shared/pipeline/cdc-runner.ts) in process on the scripted source: which
 * sources it selects, what its status board says, the metrics it emits through the logger, and
 * a failing source failing the run; the status line text of `tidemark cdc`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { statusText } from '../../functions/cli/commands/cdc.js';
import { parseSpec, type Spec } from '../../shared/config/spec.js';
import { registerDriver, unregisterDriver } from '../../shared/drivers/registry.js';
import { createLogger } from '../../shared/observability/log.js';
import { CdcStatusBoard, runCdcSources, selectCdcSources } from '../../shared/pipeline/cdc-runner.js';
import { generateScript, type ScriptParams, scriptedDriver } from '../harness/scripted-source.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
afterEach(() => unregisterDriver('scripted'));

const PARAMS: ScriptParams = { seed: 3, tables: 2, transactions: 40 };

function setup(extraTable?: string): { spec: Spec; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-cdc-runner-'));
  dirs.push(dir);
  const script = generateScript(PARAMS);
  registerDriver(scriptedDriver({ script, dir: join(dir, 'server') }));
  const tables = [...script.tables.map((t) => t.name), ...(extraTable ? [extraTable] : [])].map((table) => ({
    source: 'src',
    table,
    mode: 'cdc',
    snapshot: 'never',
    writeMode: 'upsert',
  }));
  const spec = parseSpec({
    pipeline: 'p',
    sources: {
      src: { kind: 'scripted', url: 'scripted://local', cdc: { flushRows: 20 } },
      other: { kind: 'scripted', url: 'scripted://other' },
    },
    tables,
    state: { dir: join(dir, 'state') },
    lake: { uri: `file://${join(dir, 'lake')}` },
  });
  return { spec, dir };
}

describe('cdc runner', () => {
  it('selects the sources with cdc tables, and refuses others by name', () => {
    const { spec } = setup();
    expect(selectCdcSources(spec)).toEqual(['src']);
    expect(selectCdcSources(spec, 'src')).toEqual(['src']);
    expect(() => selectCdcSources(spec, 'other')).toThrow(/has no mode: cdc table/);
    expect(() => selectCdcSources(spec, 'nope')).toThrow(/no source "nope"/);
  });

  it('runs a source to its end: the board says active then stopped, with rows and position; metrics', async () => {
    const { spec } = setup();
    const lines: string[] = [];
    const logger = createLogger({ json: true, metrics: true, write: (l) => lines.push(l) });
    const board = new CdcStatusBoard(['src']);
    const states: string[] = [];
    board.onChange(() => {
      const s = board.overall();
      if (states.at(-1) !== s) states.push(s);
    });
    expect(board.overall()).toBe('starting');
    const [summary] = await runCdcSources(spec, { logger, board });
    expect(summary!.stopped).toBe('ended');
    expect(states).toEqual(['active', 'stopped']);
    const status = board.get('src')!;
    expect(status.position).toBe(summary!.position!.display);
    const rows = Object.values(status.tables).reduce((n, t) => n + t.rows, 0);
    expect(rows).toBe(summary!.rows);
    const metrics = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l._aws !== undefined);
    const names = new Set(metrics.map((m) => Object.keys(m).at(-1)));
    for (const n of ['Active', 'Standby', 'Rows', 'Objects', 'FlushBytes', 'LagSeconds'])
      expect(names).toContain(n);
    const metricRows = metrics.filter((m) => 'Rows' in m).reduce((n, m) => n + (m.Rows as number), 0);
    expect(metricRows).toBe(summary!.rows);
    expect(statusText(status, Date.now())).toMatch(
      /^src: stopped @ step \d+ \| public\.t0 \d+ rows, flushed \d+s ago/,
    );
  });

  it('a failing source fails the run: the board says failing with the error, an Errors metric', async () => {
    const { spec } = setup('public.missing');
    const lines: string[] = [];
    const logger = createLogger({ json: true, metrics: true, write: (l) => lines.push(l) });
    const board = new CdcStatusBoard(['src']);
    await expect(runCdcSources(spec, { logger, board })).rejects.toThrow(/no script table public\.missing/);
    expect(board.overall()).toBe('failing');
    expect(board.get('src')!.error?.message).toMatch(/public\.missing/);
    expect(lines.some((l) => l.includes('"Errors":1'))).toBe(true);
  });

  it('a drain before the lease is even taken returns interrupted', async () => {
    const { spec } = setup();
    const stop = new AbortController();
    stop.abort();
    const logger = createLogger({ json: true, write: () => {} });
    const [summary] = await runCdcSources(spec, { logger, signal: stop.signal });
    expect(summary!.stopped).toBe('interrupted');
  });

  it('a failure that quotes the source URL shows no password on the board (health endpoint, status line)', async () => {
    const { spec, dir } = setup();
    unregisterDriver('scripted');
    const script = generateScript(PARAMS);
    registerDriver({
      ...scriptedDriver({ script, dir: join(dir, 'server') }),
      openCdc: async (settings: { url: string }) => {
        throw new Error(`cannot reach ${settings.url}`);
      },
    } as Parameters<typeof registerDriver>[0]);
    const secret = 'pässwörd-Ω';
    const leaky = parseSpec({
      ...spec,
      sources: { src: { kind: 'scripted', url: `scripted://reader:${secret}@db.example:5432/app` } },
    });
    const board = new CdcStatusBoard(['src']);
    const logger = createLogger({ json: true, write: () => {} });
    await expect(runCdcSources(leaky, { logger, board })).rejects.toThrow(/cannot reach/);
    const shown = JSON.stringify(board.all());
    expect(shown).toContain('cannot reach');
    expect(shown).not.toContain(secret);
    expect(shown).not.toContain(encodeURIComponent(secret));
  });
});
