/**
 * Schema changes on a real server (docs/schema-changes.md), written once and run per driver:
 * between two runs (an added column continues with a warning and reads right with
 * union_by_name; int -> bigint stops under the default and continues under onWiden: continue;
 * drop, rename and a type swap stop naming the column until `tidemark schema accept`), and an
 * ALTER between two pages of one run (a real second session; the run stops, nothing wrong
 * reaches the lake, and the next run applies the rules).
 */

import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Spec } from '../../../shared/config/spec.js';
import { incrementalTables, tableTarget } from '../../../shared/config/spec.js';
import type { TidemarkError } from '../../../shared/contracts/errors.js';
import type { Sink } from '../../../shared/contracts/sink.js';
import { incrementalStateKey } from '../../../shared/engine/incremental/state.js';
import { silentLogger } from '../../../shared/observability/log.js';
import { openPipeline } from '../../../shared/pipeline/open.js';
import { runTable } from '../../../shared/pipeline/run-table.js';
import { FileCursorStore } from '../../../shared/state/file-cursor-store.js';
import { sinkWith } from '../../harness/wrap.js';
import { localSpec, runCli, runOnce, type SourceFixture } from './fixture.js';

type Kind = SourceFixture['kind'];

/** The DDL of each change, per server dialect. */
const DDL: Record<
  Kind,
  {
    add(t: string): string;
    widen(t: string): string;
    drop(t: string): string;
    rename(t: string): string;
    swap(t: string): string[];
    /** id and v as text, ordered by id. */
    idV(t: string): string;
  }
> = {
  postgres: {
    add: (t) => `ALTER TABLE ${t} ADD COLUMN extra varchar(20) DEFAULT 'dflt'`,
    widen: (t) => `ALTER TABLE ${t} ALTER COLUMN v TYPE bigint`,
    drop: (t) => `ALTER TABLE ${t} DROP COLUMN note`,
    rename: (t) => `ALTER TABLE ${t} RENAME COLUMN note TO memo`,
    swap: (t) => [`ALTER TABLE ${t} ALTER COLUMN note TYPE int USING length(note)`],
    idV: (t) => `SELECT x.id::text AS id, x.v::text AS v FROM ${t} x ORDER BY x.id`,
  },
  mysql: {
    add: (t) => `ALTER TABLE ${t} ADD COLUMN extra VARCHAR(20) DEFAULT 'dflt'`,
    widen: (t) => `ALTER TABLE ${t} MODIFY v BIGINT NOT NULL`,
    drop: (t) => `ALTER TABLE ${t} DROP COLUMN note`,
    rename: (t) => `ALTER TABLE ${t} RENAME COLUMN note TO memo`,
    swap: (t) => [`UPDATE ${t} SET note = CAST(id AS CHAR)`, `ALTER TABLE ${t} MODIFY note INT`],
    idV: (t) => `SELECT CAST(x.id AS CHAR) AS id, CAST(x.v AS CHAR) AS v FROM ${t} x ORDER BY x.id`,
  },
};

/** Runs `sql` over every object of a local lake table, read together with union_by_name. */
async function lakeQuery(
  lakeDir: string,
  target: string,
  sql: (files: string) => string,
): Promise<unknown[][]> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    const files = `read_parquet('${join(lakeDir, target, '*.parquet')}', union_by_name = true)`;
    return (await conn.runAndReadAll(sql(files))).getRows();
  } finally {
    conn.closeSync();
  }
}

/** The latest (id, v) of every row in the lake, as text, ordered by id. */
async function lakeIdV(lakeDir: string, target: string): Promise<{ id: string; v: string }[]> {
  const rows = await lakeQuery(
    lakeDir,
    target,
    (f) => `SELECT CAST(id AS VARCHAR), CAST(v AS VARCHAR) FROM ${f}
            QUALIFY row_number() OVER (PARTITION BY id ORDER BY __pos DESC) = 1 ORDER BY id`,
  );
  return rows.map(([id, v]) => ({ id: String(id), v: String(v) }));
}

async function sourceIdV(fx: SourceFixture, table: string): Promise<{ id: string; v: string }[]> {
  return (await fx.query(DDL[fx.kind].idV(table))).map((r) => ({ id: String(r.id), v: String(r.v) }));
}

async function storedState(spec: Spec): Promise<{ seq: number; schema?: { version: number } }> {
  const store = new FileCursorStore(spec.state.dir!);
  const key = incrementalStateKey(spec.pipeline, tableTarget(spec.tables[0]!));
  return (await store.load(key)).value as { seq: number; schema?: { version: number } };
}

function withTable(spec: Spec, patch: Record<string, unknown>): Spec {
  return { ...spec, tables: [{ ...spec.tables[0]!, ...patch } as Spec['tables'][number]] };
}

async function rejection(p: Promise<unknown>): Promise<TidemarkError> {
  let value: unknown;
  try {
    value = await p;
  } catch (e) {
    return e as TidemarkError;
  }
  throw new Error(`expected the run to fail, it returned ${JSON.stringify(value)}`);
}

export function schemaChangeScenarios(name: string, makeFixture: () => Promise<SourceFixture>): void {
  describe(`${name}: schema changes`, () => {
    let fx: SourceFixture;
    let table = 0;
    /** A fresh table with ids 1..100 at distinct cursor values, already synced once. */
    async function synced(pageSize = 1000): Promise<{ t: string; spec: Spec; dir: string; lakeDir: string }> {
      const t = `${fx.table}_s${++table}`;
      await fx.exec(`DROP TABLE IF EXISTS ${t}`);
      await fx.createTable(t);
      await fx.insertRange(1, 101, fx.plus(fx.ts('2024-01-01 00:00:00'), 'g', 'second'), t);
      const { spec, dir, lakeDir } = localSpec(fx, { table: t, pageSize });
      const first = await runOnce(spec);
      expect(first.rows).toBe(100);
      return { t, spec, dir, lakeDir };
    }
    const later = () => fx.ts('2025-01-01 00:00:00');

    beforeAll(async () => {
      fx = await makeFixture();
    });
    afterAll(async () => {
      await fx?.drop();
    });

    it('an added column continues with a warning naming it, and every old and new value reads right', async () => {
      const { t, spec, lakeDir } = await synced();
      await fx.exec(DDL[fx.kind].add(t));
      await fx.exec(`INSERT INTO ${t} (id, v, note, updated_at) VALUES (101, 1, 'n', ${later()})`);
      await fx.exec(
        `INSERT INTO ${t} (id, v, note, extra, updated_at) VALUES (102, 2, 'n', 'given', ${later()})`,
      );
      await fx.exec(`UPDATE ${t} SET extra = 'updated', updated_at = ${later()} WHERE id = 7`);

      const s = await runOnce(spec);
      expect(s.rows).toBe(3);
      const w = s.warnings.find((x) => x.code === 'SCHEMA_CHANGED');
      expect(w?.message).toContain('"extra"');
      expect(w?.message).toMatch(/NULL/);
      expect(w?.message).toContain('union_by_name');
      expect((await storedState(spec)).schema?.version).toBe(2);

      const lake = await lakeQuery(
        lakeDir,
        tableTarget(spec.tables[0]!),
        (f) => `SELECT CAST(id AS VARCHAR), extra FROM ${f}
                QUALIFY row_number() OVER (PARTITION BY id ORDER BY __pos DESC) = 1 ORDER BY id`,
      );
      const byId = new Map(lake.map(([id, extra]) => [String(id), extra]));
      expect(byId.size).toBe(102);
      // Rows synced before the column existed have no value for it in the lake (the DEFAULT
      // never reached them); rows written after it carry the source's values.
      expect(byId.get('1')).toBeNull();
      expect(byId.get('100')).toBeNull();
      expect(byId.get('101')).toBe('dflt');
      expect(byId.get('102')).toBe('given');
      expect(byId.get('7')).toBe('updated');
      // Each object's footer says which schema version wrote it.
      const versions = await lakeQuery(
        lakeDir,
        tableTarget(spec.tables[0]!),
        () =>
          `SELECT DISTINCT decode(value) FROM parquet_kv_metadata('${join(lakeDir, tableTarget(spec.tables[0]!), '*.parquet')}')
           WHERE decode(key) = 'tidemark.schema_version' ORDER BY 1`,
      );
      expect(versions.map(([v]) => String(v))).toEqual(['1', '2']);
    });

    it('int -> bigint stops under the default and continues under onWiden: continue', async () => {
      const { t, spec, lakeDir } = await synced();
      await fx.exec(DDL[fx.kind].widen(t));
      await fx.exec(`UPDATE ${t} SET v = 5000000000, updated_at = ${later()} WHERE id = 3`);
      const before = await storedState(spec);

      const e = await rejection(runOnce(spec));
      expect(e.code).toBe('SCHEMA_CHANGED');
      expect(e.message).toContain('"v"');
      expect(e.message).toContain('widened');
      expect(e.message).toContain('onWiden: continue');
      expect(e.message).toContain('tidemark schema accept');
      const after = await storedState(spec);
      expect(after.seq).toBe(before.seq);
      expect(after.schema?.version).toBe(1);

      const s = await runOnce(withTable(spec, { onWiden: 'continue' }));
      expect(s.rows).toBe(1);
      expect(await lakeIdV(lakeDir, tableTarget(spec.tables[0]!))).toEqual(await sourceIdV(fx, t));
      expect((await storedState(spec)).schema?.version).toBe(2);
    });

    for (const change of ['drop', 'rename', 'swap'] as const) {
      it(`${change} of a column stops naming it, and tidemark schema accept lets the next run continue`, async () => {
        const { t, spec, dir, lakeDir } = await synced();
        const ddl = DDL[fx.kind][change](t);
        for (const q of Array.isArray(ddl) ? ddl : [ddl]) await fx.exec(q);
        await fx.exec(`INSERT INTO ${t} (id, v, updated_at) VALUES (101, 1, ${later()})`);

        const e = await rejection(runOnce(spec));
        expect(e.code).toBe('SCHEMA_CHANGED');
        expect(e.message).toContain('"note"');
        if (change === 'rename') expect(e.message).toContain('"memo"');
        if (change === 'swap') expect(e.message).toMatch(/changed type from .*text.* to .*int/i);
        expect(e.message).toContain(`tidemark schema accept --table ${tableTarget(spec.tables[0]!)}`);
        expect((await storedState(spec)).seq).toBe(1);

        const accepted = await runCli(dir, spec, [
          'schema',
          'accept',
          '--table',
          tableTarget(spec.tables[0]!),
        ]);
        expect(accepted.stderr).toBe('');
        expect(accepted.code).toBe(0);
        expect(accepted.stdout).toContain('recorded schema version 2 (was 1)');
        expect(accepted.stdout).toContain('"note"');

        if (change === 'swap') {
          // The table is an Iceberg table (the default): its files hold "note" as a string under
          // its field id, and Iceberg cannot change that to int. The run says so and writes nothing.
          const refused = await rejection(runOnce(spec));
          expect(refused.code).toBe('ICEBERG_TYPE_CHANGE_REFUSED');
          expect(refused.message).toContain('"note" changed type from Iceberg string to int');
          expect((await storedState(spec)).seq).toBe(1);
          return;
        }
        const s = await runOnce(spec);
        expect(s.rows).toBe(1);
        expect(await lakeIdV(lakeDir, tableTarget(spec.tables[0]!))).toEqual(await sourceIdV(fx, t));
        // Accepting again finds nothing to accept.
        const again = await runCli(dir, spec, ['schema', 'accept', '--table', tableTarget(spec.tables[0]!)]);
        expect(again.stdout).toContain('has not changed (version 2)');
      });
    }

    it('an ALTER between two pages of a run stops it before anything wrong reaches the lake; the next run applies the rules', async () => {
      const t = `${fx.table}_mid`;
      await fx.exec(`DROP TABLE IF EXISTS ${t}`);
      await fx.createTable(t);
      await fx.insertRange(1, 101, fx.plus(fx.ts('2024-01-01 00:00:00'), 'g', 'second'), t);
      const { spec, lakeDir } = localSpec(fx, { table: t, pageSize: 10 });
      const target = tableTarget(spec.tables[0]!);

      // The first page's write runs the ALTER in a session of its own and waits for it: the
      // read of page 2 may already be under way (it overlaps the write) and then finishes with
      // the old type, but page 3 is read only after page 2's write, so after the ALTER.
      const session = await fx.session();
      let altered = false;
      const base = await openPipeline(spec);
      const sink: Sink = sinkWith(base.sink, {
        write: async (...args) => {
          const refs = await base.sink.write(...args);
          if (!altered) {
            altered = true;
            await session.exec(DDL[fx.kind].widen(t));
            await session.exec(`UPDATE ${t} SET v = 5000000000 WHERE id IN (50, 95, 96)`);
            await session.exec(`UPDATE ${t} SET v = 7 WHERE id = 97`);
          }
          return refs;
        },
      });
      let e: TidemarkError;
      try {
        e = await rejection(
          runTable(spec, incrementalTables(spec)[0]!, { ...base, sink }, { logger: silentLogger }),
        );
      } finally {
        await base.close();
        await session.close();
      }
      expect(altered).toBe(true);
      expect(e.code).toBe('SCHEMA_CHANGED');
      expect(e.message).toContain('during this run');
      expect(e.message).toContain('"v"');

      const state = await storedState(spec);
      expect(state.seq).toBeGreaterThanOrEqual(1);
      expect(state.seq).toBeLessThan(10);
      // What reached the lake is exactly the committed pages, and every value in it is right
      // (values read after the ALTER would have been 0, 0, 1 had the decoder gone on).
      const lake = await lakeIdV(lakeDir, target);
      expect(lake.length).toBe(10 * state.seq);
      // Every committed page was read before the UPDATEs, so each row holds its inserted value.
      for (const r of lake) expect(r.v).toBe(String(Number(r.id) % 1000));

      // The next run applies the rules at its start: a widening stops by default...
      const next = await rejection(runOnce(spec));
      expect(next.code).toBe('SCHEMA_CHANGED');
      expect(next.message).toContain('since it last wrote');
      // ...and continues under onWiden: continue, reading the rest right.
      const s = await runOnce(withTable(spec, { onWiden: 'continue' }));
      expect(s.more).toBe(false);
      expect(await lakeIdV(lakeDir, target)).toEqual(await sourceIdV(fx, t));
      expect((await lakeIdV(lakeDir, target)).filter((r) => r.v === '5000000000').map((r) => r.id)).toEqual([
        '50',
        '95',
        '96',
      ]);
    });
  });
}
