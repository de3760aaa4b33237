/**
 * `npm run bench -- mysql-reader [--rows N] [--runs N]`: the main-thread CPU of reading one
 * N-row result (the incremental-mysql bench's table shape, default 1M rows) on a private
 * MariaDB, four ways, alternated: mysql2 `each` (a Buffer per value) + the Buffer appenders, the
 * raw result-set reader (`eachRow` + walkRow + range appenders), and each of the two readers with
 * the rows dropped. Appends go to a BatchEncoder per 50k rows, never finished (no encode).
 *
 * Owns its temp dir and its MariaDB. Never asserts a time: it prints.
 */
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BatchEncoder } from '../shared/dataplane/encoder.js';
import { Op } from '../shared/dataplane/metadata.js';
import { MysqlConnection } from '../shared/drivers/mysql/connect.js';
import { introspectTable } from '../shared/drivers/mysql/introspect.js';
import { appenderOf, rangeAppenderOf } from '../shared/drivers/mysql/types.js';
import { RowRanges, walkRow } from '../shared/drivers/mysql/wire/text-rows.js';
import { startMariaDb } from '../test/harness/mariadb-server.js';
import { fmtInt, machineNote } from './support.js';

export async function main(argv: readonly string[]): Promise<void> {
  const { values } = parseArgs({
    args: [...argv],
    options: { rows: { type: 'string', default: '1000000' }, runs: { type: 'string', default: '3' } },
  });
  const rows = Number(values.rows);
  const runs = Number(values.runs);
  console.log(`machine: ${machineNote()}`);
  const work = await mkdtemp(join(tmpdir(), 'tidemark-bench-reader-'));
  await chmod(work, 0o755);
  await mkdir(join(work, 'db'));
  const db = await startMariaDb({ baseDir: join(work, 'db'), password: 'pw', database: 'm' });
  const s = new MysqlConnection({ url: db.url });
  try {
    await s.query('SET GLOBAL innodb_buffer_pool_size = 1073741824').catch(() => undefined);
    await s.query(`CREATE TABLE m.t (
          id BIGINT NOT NULL PRIMARY KEY, customer VARCHAR(64) NOT NULL, amount DECIMAL(12,2) NOT NULL,
          qty INT NULL, price DOUBLE NOT NULL, active BOOLEAN NOT NULL, placed_at TIMESTAMP(6) NOT NULL,
          note VARCHAR(64) NULL, payload JSON NOT NULL, updated_at TIMESTAMP(6) NOT NULL) ENGINE=InnoDB`);
    for (let from = 1; from <= rows; from += 250_000) {
      const to = Math.min(rows, from + 249_999);
      await s.query(`INSERT INTO m.t SELECT seq, CONCAT('customer-', LPAD((seq * 7919) % 100000, 6, '0')),
          ROUND(RAND(seq) * 100000, 2), CASE WHEN seq % 10 = 0 THEN NULL ELSE seq % 500 END, RAND(seq + 1) * 1000,
          seq % 3 <> 0, TIMESTAMP('2022-01-01') + INTERVAL seq * 7 SECOND + INTERVAL FLOOR(RAND(seq + 2) * 1000000) MICROSECOND,
          CASE WHEN seq % 10 = 3 THEN NULL ELSE CONCAT('note ', MD5(seq)) END,
          JSON_OBJECT('sku', CONCAT('SKU-', seq % 5000), 'n', seq % 97, 'gift', seq % 11 = 0),
          TIMESTAMP('2023-01-01') + INTERVAL (seq DIV 2) SECOND + INTERVAL ((seq DIV 2) % 1000) MICROSECOND
          FROM seq_${from}_to_${to}`);
    }
    const plan = await introspectTable(s, { source: 'm.t' });
    const cols = plan.columns;
    const sql = `SELECT ${cols.map((c) => c.read.expr).join(', ')} FROM ${plan.qualified} AS src ORDER BY src.id`;
    const ctx = (c: (typeof cols)[number]) => ({ table: 'm.t', column: c.name });
    const width = cols.length;
    const PAGE = 50_000;
    const fresh = () => new BatchEncoder(plan.schema, { phase: 'incremental', capacity: PAGE });

    const variants: Record<string, () => Promise<number>> = {
      'mysql2 each + Buffer appenders': async () => {
        const app = cols.map((c) => appenderOf(c.read, ctx(c)));
        let enc = fresh();
        let n = 0;
        await s.each(sql, (row) => {
          for (let i = 0; i < width; i++) {
            const v = row[i]!;
            if (v === null) enc.col(i).appendNull();
            else app[i]!(enc.col(i), v);
          }
          enc.appendMetaOrdinal(Op.update, 'i000000000001', n % PAGE, null, false);
          if (++n % PAGE === 0) enc = fresh();
        });
        return n;
      },
      'raw eachRow + range appenders': async () => {
        const app = cols.map((c) => rangeAppenderOf(c.read, ctx(c)));
        const r = new RowRanges(width);
        let enc = fresh();
        let n = 0;
        await s.eachRow(sql, (buf, start, end) => {
          walkRow(buf, start, end, r);
          for (let i = 0; i < width; i++) {
            const st = r.starts[i]!;
            if (st < 0) enc.col(i).appendNull();
            else app[i]!(enc.col(i), buf, st, r.ends[i]!);
          }
          enc.appendMetaOrdinal(Op.update, 'i000000000001', n % PAGE, null, false);
          if (++n % PAGE === 0) enc = fresh();
        });
        return n;
      },
      'mysql2 each, rows dropped': async () => {
        let n = 0;
        await s.each(sql, () => n++);
        return n;
      },
      'raw eachRow + walkRow, rows dropped': async () => {
        const r = new RowRanges(width);
        let n = 0;
        await s.eachRow(sql, (buf, start, end) => {
          walkRow(buf, start, end, r);
          n++;
        });
        return n;
      },
    };
    const got: Record<string, number[]> = {};
    for (let run = 0; run < runs; run++) {
      for (const [name, f] of Object.entries(variants)) {
        const c0 = process.cpuUsage();
        const n = await f();
        const c = process.cpuUsage(c0);
        const cpu = (c.user + c.system) / 1e6;
        got[name] = [...(got[name] ?? []), cpu];
        console.log(`run ${run + 1}: ${name}: ${fmtInt(n)} rows, ${cpu.toFixed(2)} CPU-s`);
      }
    }
    for (const [name, xs] of Object.entries(got)) {
      const m = [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
      console.log(
        `median ${name}: ${((m * 1_000_000) / rows).toFixed(2)} CPU-s per 1M rows (runs ${xs.map((x) => x.toFixed(2)).join(', ')})`,
      );
    }
  } finally {
    await s.close();
    await db.stop();
    await rm(work, { recursive: true, force: true });
  }
  console.log(`machine after: ${machineNote()}`);
}
