/**
 * The Postgres side of the in-process capture scenarios (./scenarios.ts), on the test file's
 * database: tables in `public`, a slot and publication per capture named after it, a position
 * lost by dropping the slot.
 */
import type { FreshDatabase } from '../../harness/pg.js';
import { pgCdcSpec, pgClient, startCapture } from '../../harness/pg-cdc.js';
import type { CaptureFixture } from './scenarios.js';

/** The fixture on the database `db()` returns (read when a scenario runs). */
export function postgresCaptureFixture(db: () => FreshDatabase): CaptureFixture {
  const exec = async (statements: string): Promise<void> => {
    const sql = pgClient(db().url);
    try {
      await sql.unsafe(statements);
    } finally {
      await sql.end();
    }
  };
  return {
    table: (name) => `public.${name}`,
    quotedTable: (name) => `"public"."${name}"`,
    textType: 'text',
    exec,
    spec: (name, tables) => pgCdcSpec(db().url, tables, { slot: name, publication: name }),
    start: startCapture,
    async losePosition(name) {
      // The walsender may take a moment to exit after the stop.
      const deadline = Date.now() + 30_000;
      for (;;) {
        try {
          await exec(`SELECT pg_drop_replication_slot('${name}')`);
          return;
        } catch (e) {
          if (Date.now() > deadline) throw e;
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    },
    gapDetail: 'does not exist',
  };
}
