/**
 * CDC captures run in this process (test/harness/cdc-capture.ts), written once against a
 * CaptureFixture so every driver's change stream is held to the same claims: a TRUNCATE under
 * `onTruncate: record` is recorded and the capture goes on, under `fail` it stops the capture
 * with DESTRUCTIVE_DDL; a resume position the server no longer has (a dropped slot, purged
 * binlogs) fails the next start with POSITION_LOST and records one gap.
 *
 * This file owns the scenarios and their assertions; a fixture owns the driver's SQL, its stream
 * settings and how a position is lost. The test files call these inside their own `describe`s,
 * beside the claims only their driver has (postgres-cdc-values.test.ts, mysql-cdc.test.ts).
 */
import { expect, it } from 'vitest';
import type { Spec } from '../../../shared/config/spec.js';
import {
  type Capture,
  type CdcTableSpec,
  captureFailure,
  lakeRows,
  loadCdcState,
} from '../../harness/cdc-capture.js';

const T = { timeout: 120_000 };

export interface CaptureFixture {
  /**
   * A test table's qualified name as SQL and as lake target: `public.<name>`, `<database>.<name>`
   * (statements may also name it unqualified: the session's schema or database is the test's).
   */
  table(name: string): string;
  /** The same with quoted identifiers: `"public"."<name>"`, `` `<database>`.<name> ``. */
  quotedTable(name: string): string;
  /** A column type for short text (`text`, `varchar(10)`). */
  readonly textType: string;
  /** Runs statements on the test database. */
  exec(statements: string): Promise<void>;
  /** A capture spec of `tables` with a stream of its own (`name`: its slot and publication, where named). */
  spec(name: string, tables: readonly CdcTableSpec[]): { spec: Spec; dir: string };
  start(spec: Spec): Capture;
  /**
   * With the capture `name` of table `table` stopped: makes its resume position unreadable (the
   * Postgres slot dropped; MariaDB binlogs purged past it, a change after it included).
   */
  losePosition(name: string, table: string): Promise<void>;
  /** What the gap event's detail quotes from the server (`does not exist`, error `1236`). */
  readonly gapDetail: string;
}

/** TRUNCATE of a captured table under `onTruncate: record` and `fail`. */
export function truncateScenarios(fx: CaptureFixture): void {
  it('under onTruncate: record is recorded and the capture goes on', T, async () => {
    const tr = fx.table('tr');
    await fx.exec(`CREATE TABLE ${tr} (id int PRIMARY KEY, v ${fx.textType})`);
    const { spec, dir } = fx.spec('tr', [{ table: tr, onTruncate: 'record' }]);
    const cap = fx.start(spec);
    try {
      await cap.until((r) => r[tr] !== undefined, 60_000);
      await fx.exec(`INSERT INTO tr VALUES (1, 'a'), (2, 'a'), (3, 'a')`);
      await cap.until((r) => r[tr] === 3, 60_000);
      // Unqualified: the statement's table resolves in the session's schema or database.
      await fx.exec('TRUNCATE TABLE tr');
      await fx.exec(`INSERT INTO tr VALUES (10, 'after')`);
      await cap.until((r) => r[tr] === 4, 60_000);
    } finally {
      await cap.stop();
    }
    const state = await loadCdcState(spec);
    expect(state.events?.filter((e) => e.kind === 'truncate')).toMatchObject([
      { kind: 'truncate', table: tr, detail: expect.stringContaining('TRUNCATE') },
    ]);
    const rows = await lakeRows(dir, tr, ['id', 'v']);
    expect(rows.at(-1)).toEqual({ id: '10', v: 'after' });
  });

  it('under onTruncate: fail stops the capture with DESTRUCTIVE_DDL', T, async () => {
    const tf = fx.table('tf');
    await fx.exec(`CREATE TABLE ${tf} (id int PRIMARY KEY, v ${fx.textType})`);
    const { spec } = fx.spec('tf', [{ table: tf, onTruncate: 'fail' }]);
    const cap = fx.start(spec);
    await cap.until((r) => r[tf] !== undefined, 60_000);
    await fx.exec(`INSERT INTO tf VALUES (1, 'a')`);
    await cap.until((r) => r[tf] === 1, 60_000);
    // Quoted and qualified.
    await fx.exec(`TRUNCATE ${fx.quotedTable('tf')}`);
    const e = await captureFailure(cap);
    expect(e).toMatchObject({ code: 'DESTRUCTIVE_DDL' });
    const state = await loadCdcState(spec);
    expect(state.events?.some((x) => x.kind === 'truncate' && x.table === tf)).toBe(true);
  });
}

/** The resume position lost while the capture is stopped. */
export function positionLostScenario(fx: CaptureFixture): void {
  it('fails the next start with POSITION_LOST and records a gap', T, async () => {
    const lost = fx.table('lost');
    await fx.exec(`CREATE TABLE ${lost} (id int PRIMARY KEY, v ${fx.textType})`);
    const { spec } = fx.spec('lost', [{ table: lost }]);
    const cap = fx.start(spec);
    try {
      await cap.until((r) => r[lost] !== undefined, 60_000);
      await fx.exec(`INSERT INTO lost VALUES (1, 'a'), (2, 'b')`);
      await cap.until((r) => r[lost] === 2, 60_000);
    } finally {
      await cap.stop();
    }
    await fx.losePosition('lost', lost);
    const again = fx.start(spec);
    const e = await captureFailure(again);
    expect(e).toMatchObject({ code: 'POSITION_LOST' });
    const state = await loadCdcState(spec);
    const gaps = state.events?.filter((x) => x.kind === 'gap') ?? [];
    expect(gaps.length).toBe(1);
    expect(gaps[0]!.detail).toContain(fx.gapDetail);
  });
}
