/**
 * The Postgres CDC reader over time and size, on the real harness PostgreSQL:
 * - a 1,000,000-row single transaction through `tidemark cdc` in a child process: every row lands
 *   across several flushes, the slot's confirmed_flush_lsn stays below the transaction's commit
 *   until the last of its rows is committed to state, and the process's peak RSS stays under
 *   512 MiB;
 * - an idle slot: the captured table idle while an unpublished table is busy: restart_lsn (what
 *   WAL retention follows) keeps advancing over 30-second windows, through the reader's
 *   heartbeats and acknowledgements.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCdcState } from '../../shared/engine/cdc/state.js';
import { parseLsn, parsePgPosition } from '../../shared/position/position.js';
import { FileCursorStore } from '../../shared/state/file-cursor-store.js';
import { type FreshDatabase, freshPgDatabase } from '../harness/pg.js';
import { pgCdcSpec, pgClient, startCapture, waitForActiveSlot } from '../harness/pg-cdc.js';

const ROOT = join(import.meta.dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'tidemark.js');
const REPORT_MAX_RSS = join(ROOT, 'test', 'harness', 'report-max-rss.mjs');
const ROWS = 1_000_000;
const MiB = 1024;

let db: FreshDatabase;
beforeAll(async () => {
  db = await freshPgDatabase('pgcdclong');
});
afterAll(() => db?.drop());

describe('postgres cdc, long and large', () => {
  it('a 1,000,000-row transaction lands across several flushes; the slot stays below it until all of it is durable; peak RSS under 512 MiB', {
    timeout: 600_000,
  }, async () => {
    const sql = pgClient(db.url);
    const dir = mkdtempSync(join(tmpdir(), 'tidemark-pgcdc-big-'));
    try {
      await sql`CREATE TABLE public.big (id bigint PRIMARY KEY, a int, b text, c double precision)`;
      const raw = {
        pipeline: 'p',
        sources: {
          src: {
            kind: 'postgres',
            url: db.url,
            cdc: {
              slot: 'tidemark_big',
              publication: 'tidemark_big',
              heartbeatSeconds: 1,
              flushSeconds: 1,
              idleCommitSeconds: 1,
            },
          },
        },
        tables: [{ source: 'src', table: 'public.big', mode: 'cdc', snapshot: 'never', writeMode: 'upsert' }],
        state: { dir: join(dir, 'state') },
        lake: { uri: `file://${join(dir, 'lake')}` },
      };
      const specFile = join(dir, 'spec.json');
      writeFileSync(specFile, JSON.stringify(raw));
      const rssFile = join(dir, 'max-rss');
      const child = spawn(process.execPath, ['--import', REPORT_MAX_RSS, BIN, 'cdc', '-c', specFile], {
        cwd: dir,
        env: { ...process.env, TIDEMARK_MAX_RSS_FILE: rssFile, TIDEMARK_LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (t: string) => {
        stderr += t;
      });
      child.stdout.resume();
      const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
        child.once('close', (code, signal) => resolve({ code, signal })),
      );
      const store = new FileCursorStore(join(dir, 'state'));
      const state = async () => {
        const v = (await store.load('cdc#p#src')).value;
        return v === undefined ? undefined : parseCdcState(v);
      };
      const poll = async (what: string, ok: () => Promise<boolean>, ms: number) => {
        const deadline = Date.now() + ms;
        while (!(await ok())) {
          if (child.exitCode !== null)
            throw new Error(`tidemark cdc exited (${child.exitCode}) before it ${what}:\n${stderr}`);
          if (Date.now() > deadline) throw new Error(`tidemark cdc did not ${what} in ${ms} ms:\n${stderr}`);
          await new Promise((r) => setTimeout(r, 200));
        }
      };
      await poll('started', async () => (await state()) !== undefined, 60_000);
      await waitForActiveSlot(sql, 'tidemark_big');

      // One statement: one transaction of a million rows.
      await sql`INSERT INTO big SELECT g, g, md5(g::text), g * 0.5 FROM generate_series(1, ${ROWS}) g`;
      const samples: { confirmed: bigint; rows: number }[] = [];
      const slotConfirmed = async () => {
        const [r] = await sql<
          { lsn: string | null }[]
        >`SELECT confirmed_flush_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = 'tidemark_big'`;
        return parseLsn(r!.lsn!);
      };
      await poll(
        'captured the transaction',
        async () => {
          // The slot first, then the state: a confirmed position is always read no later
          // than the state it is judged against.
          const confirmed = await slotConfirmed();
          const rows = (await state())?.tables['public.big']?.rows ?? 0;
          samples.push({ confirmed, rows });
          return rows >= ROWS;
        },
        480_000,
      );
      child.kill('SIGTERM');
      const end = await exited;
      expect(end, stderr).toEqual({ code: 0, signal: null });

      const duck = await (await DuckDBInstance.create(':memory:')).connect();
      const glob = join(dir, 'lake', 'public.big', '*.parquet');
      const [count, distinct, files, minPos] = (
        await duck.runAndReadAll(
          `SELECT count(*), count(DISTINCT id), (SELECT count(*) FROM glob('${glob}')), min(__pos) FROM read_parquet('${glob}')`,
        )
      ).getRows()[0]!;
      duck.closeSync();
      expect(Number(count)).toBe(ROWS);
      expect(Number(distinct)).toBe(ROWS);
      // Several flushes (flushRows 100,000 by default).
      expect(Number(files)).toBeGreaterThanOrEqual(5);
      const commitLsn = parsePgPosition(String(minPos)).commitLsn;
      const partial = samples.filter((s) => s.rows > 0 && s.rows < ROWS);
      expect(partial.length, 'no sample caught the transaction partly committed').toBeGreaterThan(0);
      for (const s of samples.filter((x) => x.rows < ROWS))
        expect(s.confirmed < commitLsn, `confirmed ${s.confirmed} with ${s.rows} rows durable`).toBe(true);
      const maxRssKiB = Number(readFileSync(rssFile, 'utf8'));
      expect(maxRssKiB).toBeGreaterThan(0);
      expect(maxRssKiB / MiB).toBeLessThan(512);
    } finally {
      await sql.end();
    }
  });

  it('an idle captured table while another table is busy: restart_lsn keeps advancing over 30 s windows', {
    timeout: 300_000,
  }, async () => {
    const sql = pgClient(db.url);
    try {
      await sql`CREATE TABLE public.quiet (id int PRIMARY KEY, v text)`;
      await sql`CREATE TABLE public.busy (id bigserial PRIMARY KEY, v text)`;
      // The defaults: a heartbeat every 10 s, the idle position committed and acknowledged every 10 s.
      const { spec } = pgCdcSpec(db.url, [{ table: 'public.quiet' }], {
        slot: 'tidemark_idle',
        publication: 'tidemark_idle',
        heartbeatSeconds: 10,
      });
      const cap = startCapture(spec);
      await cap.until((r) => r['public.quiet'] !== undefined);
      await waitForActiveSlot(sql, 'tidemark_idle');
      let writing = true;
      const writer = (async () => {
        while (writing) {
          await sql`INSERT INTO busy (v) SELECT md5(g::text) FROM generate_series(1, 200) g`;
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      const restart = async () => {
        const [r] = await sql<
          { lsn: string }[]
        >`SELECT restart_lsn::text AS lsn FROM pg_replication_slots WHERE slot_name = 'tidemark_idle'`;
        return parseLsn(r!.lsn);
      };
      try {
        const marks = [await restart()];
        for (let w = 0; w < 2; w++) {
          await new Promise((r) => setTimeout(r, 30_000));
          marks.push(await restart());
        }
        expect(marks[1]! > marks[0]!, `restart_lsn ${marks.join(' -> ')}`).toBe(true);
        expect(marks[2]! > marks[1]!, `restart_lsn ${marks.join(' -> ')}`).toBe(true);
      } finally {
        writing = false;
        await writer;
        await cap.stop();
      }
    } finally {
      await sql.end();
    }
  });
});
