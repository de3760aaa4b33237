/**
 * Pages read ahead of the commits (engine/incremental/read-ahead.ts `readAhead`, decision 0021),
 * on the real Postgres source and the real file sink: while page N is written, pages N+1 and N+2
 * are read (and no further), and pages of big values (closed by the byte budget) keep one page
 * ahead. Each test holds the first page's write until a read it names has arrived, then checks
 * the order of read and write events: the engine runs a page's follow-up read in the same turn
 * as the read's arrival, so an event the rule forbids would already be recorded when the write is
 * let go.
 */
import { rmSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { incrementalTables } from '../../shared/config/spec.js';
import type { Sink } from '../../shared/contracts/sink.js';
import type { IncrementalSummary } from '../../shared/engine/incremental/options.js';
import { readAhead } from '../../shared/engine/incremental/read-ahead.js';
import { silentLogger } from '../../shared/observability/log.js';
import { type OpenPipeline, openPipeline } from '../../shared/pipeline/open.js';
import { type RunTableOptions, runTable } from '../../shared/pipeline/run-table.js';
import {
  lakeRows,
  latest,
  localSpec,
  postgresFixture,
  type SourceFixture,
  wrapPageReads,
} from './incremental/fixture.js';

/** Events in the order they happened: `read-start 3`, `read-done 3`, `write-start 1`... */
type Log = string[];

/** How `traced` holds writes. */
interface Hold {
  /** The first write waits until this holds for the log (checked every few milliseconds)... */
  readonly releaseWhen?: (log: Log) => boolean;
  /** ...which names what it waits for in the failure... */
  readonly what?: string;
  /** ...for at most this long: past it the run fails, saying what never happened. */
  readonly maxWaitMs?: number;
  /** Every write waits this long first. */
  readonly everyMs?: number;
}

/** `base` with its page reads and writes logged (numbered from 1 in call order), writes held by `hold`. */
function traced(base: OpenPipeline, log: Log, hold: Hold): OpenPipeline {
  const { releaseWhen, what = '', maxWaitMs = 60_000, everyMs = 0 } = hold;
  let reads = 0;
  let writes = 0;
  const sink = new Proxy(base.sink, {
    get(target, key) {
      if (key === 'write') {
        return async (...args: Parameters<Sink['write']>) => {
          const n = ++writes;
          log.push(`write-start ${n}`);
          if (everyMs > 0) await new Promise((r) => setTimeout(r, everyMs));
          if (n === 1 && releaseWhen) {
            const deadline = Date.now() + maxWaitMs;
            while (!releaseWhen(log)) {
              if (Date.now() > deadline)
                throw new Error(`while page 1 was written, ${what} never happened: ${log.join(', ')}`);
              await new Promise((r) => setTimeout(r, 5));
            }
          }
          const refs = await target.write(...args);
          log.push(`write-done ${n}`);
          return refs;
        };
      }
      const v = Reflect.get(target, key) as unknown;
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  return wrapPageReads({ ...base, sink }, async (read, req) => {
    const n = ++reads;
    log.push(`read-start ${n}`);
    const page = await read(req);
    log.push(`read-done ${n}`);
    return page;
  });
}

/** Where `event` is in `log` (it must be there). */
function at(log: Log, event: string): number {
  const i = log.indexOf(event);
  expect(i, `${event} in ${log.join(', ')}`).toBeGreaterThanOrEqual(0);
  return i;
}

describe('pages read ahead of the commits', () => {
  const defaultPages = readAhead.pages;
  let fx: SourceFixture;
  const dirs: string[] = [];
  beforeAll(async () => {
    fx = await postgresFixture('read_ahead');
  });
  afterEach(() => {
    readAhead.pages = defaultPages;
  });
  afterAll(async () => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    await fx?.drop();
  });

  async function sync(
    opts: { pageSize: number; pageBytes?: number },
    releaseWhen: (log: Log) => boolean,
    what: string,
  ): Promise<{ log: Log; pages: number; lakeDir: string }> {
    const { log, summary, lakeDir } = await run(opts, { releaseWhen, what });
    return { log, pages: summary.pages, lakeDir };
  }

  async function run(
    opts: { pageSize: number; pageBytes?: number },
    hold: Hold,
    runOpts: Partial<RunTableOptions> = {},
  ): Promise<{ log: Log; summary: IncrementalSummary; lakeDir: string }> {
    const { spec, dir, lakeDir } = localSpec(fx, opts);
    dirs.push(dir);
    const base = await openPipeline(spec);
    const log: Log = [];
    try {
      const summary = await runTable(spec, incrementalTables(spec)[0]!, traced(base, log, hold), {
        logger: silentLogger,
        ...runOpts,
      });
      expect(summary.status).toBe('ok');
      return { log, summary, lakeDir };
    } finally {
      await base.close();
    }
  }

  it('reads pages 2 and 3 while page 1 is written, and page 4 only after it is committed', async () => {
    await fx.exec(`DROP TABLE IF EXISTS ${fx.table}`);
    await fx.createTable();
    await fx.insertRange(1, 11, fx.plus(fx.ts('2024-01-01 00:00:00'), 'g', 'second'));
    const { log, pages, lakeDir } = await sync(
      { pageSize: 2 },
      (l) => l.includes('read-done 3'),
      'the read of page 3',
    );
    expect(pages).toBe(5);
    // Two pages ahead of the one written, and no further: page 4 waits for page 1's commit.
    expect(at(log, 'read-done 3')).toBeLessThan(at(log, 'write-done 1'));
    expect(at(log, 'read-start 4')).toBeGreaterThan(at(log, 'write-done 1'));
    // Reads stay one at a time, in order.
    for (let k = 2; k <= 5; k++)
      expect(at(log, `read-start ${k}`)).toBeGreaterThan(at(log, `read-done ${k - 1}`));
    // Writes stay in page order, each after the one before it.
    for (let k = 2; k <= 5; k++)
      expect(at(log, `write-start ${k}`)).toBeGreaterThan(at(log, `write-done ${k - 1}`));
    expect(latest(await lakeRows(lakeDir, fx.table))).toEqual(await fx.rows());
  });

  it('pages of big values (closed by the byte budget) keep one page ahead', async () => {
    await fx.exec(`DROP TABLE IF EXISTS ${fx.table}`);
    await fx.createTable();
    await fx.insertRange(1, 6, fx.plus(fx.ts('2024-01-01 00:00:00'), 'g', 'second'));
    // Each row is over the 1 MiB budget: a page of one row each.
    await fx.exec(`UPDATE ${fx.table} SET note = repeat(md5(id::text), 40000)`);
    const { log, pages, lakeDir } = await sync(
      { pageSize: 1000, pageBytes: 2 ** 20 },
      (l) => l.includes('read-done 2'),
      'the read of page 2',
    );
    expect(pages).toBe(5);
    expect(at(log, 'read-done 2')).toBeLessThan(at(log, 'write-done 1'));
    expect(at(log, 'read-start 3')).toBeGreaterThan(at(log, 'write-done 1'));
    expect(latest(await lakeRows(lakeDir, fx.table))).toEqual(await fx.rows());
  });

  it('a deadline leaves time to commit the page being written and the two read ahead', async () => {
    // Every write takes at least HOLD ms, and the time left stays at 2.5 x HOLD: once the first
    // commit has measured a page (at least HOLD), no read may start (the margin is three pages:
    // the one being written and two read ahead); the two pages already read are committed.
    const HOLD = 2000;
    await fx.exec(`DROP TABLE IF EXISTS ${fx.table}`);
    await fx.createTable();
    await fx.insertRange(1, 21, fx.plus(fx.ts('2024-01-01 00:00:00'), 'g', 'second'));
    const { log, summary } = await run(
      { pageSize: 2 },
      // Page 1's write also waits for page 3's read, so both pages ahead were read before the
      // first commit however slow the reads are.
      { everyMs: HOLD, releaseWhen: (l) => l.includes('read-done 3'), what: 'the read of page 3' },
      { remainingMs: () => 2.5 * HOLD, safetyMarginMs: 0 },
    );
    expect(summary.stopped).toBe('deadline');
    expect(summary.more).toBe(true);
    expect(summary.pages).toBe(3);
    expect(log.filter((e) => e.startsWith('read-start'))).toHaveLength(3);
  });

  it('one page ahead when readAhead.pages is 1 (the loop before decision 0021)', async () => {
    readAhead.pages = 1;
    await fx.exec(`DROP TABLE IF EXISTS ${fx.table}`);
    await fx.createTable();
    await fx.insertRange(1, 11, fx.plus(fx.ts('2024-01-01 00:00:00'), 'g', 'second'));
    const { log, pages } = await sync(
      { pageSize: 2 },
      (l) => l.includes('read-done 2'),
      'the read of page 2',
    );
    expect(pages).toBe(5);
    expect(at(log, 'read-start 3')).toBeGreaterThan(at(log, 'write-done 1'));
  });
});
