/**
 * Which server the MySQL reader streams from, and whether a stored position applies to it.
 * Binlog coordinates (`file:pos`) mean something only on the server that wrote them: after a
 * failover to a promoted replica, or a RESET MASTER, the same numbers point elsewhere.
 *
 * Owns: reading the server's identity (`@@server_uuid`, MariaDB's `@@server_id`) and current
 * binlog end, and the decision at start: the stored server resumes by `file:pos` unless its GTID
 * position went back (reset binlogs: a gap); another MariaDB server resumes by GTID in the next
 * coordinate epoch when its `gtid_binlog_pos` holds every stored domain at or past its sequence
 * and no other domain (decision 0012, docs/mysql-cdc.md "Lost positions"), else a gap. Whether
 * the server's binlogs still hold the continuation only the dump answers (error 1236, a gap the
 * reader reports). Never streams.
 */
import type { Connection } from 'mysql2/promise';
import type { ReaderLog, SourcePosition } from '../../../contracts/cdc.js';
import { SourceError } from '../../../contracts/errors.js';
import { type BinlogPoint, parseBinlogPosition } from './position.js';

/** The server's identity in positions: MySQL's @@server_uuid; MariaDB has none, its @@server_id. */
export async function serverIdentity(conn: Connection): Promise<string> {
  const [rows] = await conn
    .query('SELECT @@server_uuid AS id')
    .catch(() => conn.query('SELECT @@server_id AS id'));
  return String((rows as { id: unknown }[])[0]?.id ?? '');
}

/** `SHOW BINARY LOG STATUS` (MySQL 8.2+) or `SHOW MASTER STATUS`. */
async function binlogStatus(
  conn: Connection,
): Promise<{ file: string; pos: number; executedGtidSet?: string }> {
  let rows: unknown;
  try {
    [rows] = await conn.query('SHOW MASTER STATUS');
  } catch {
    [rows] = await conn.query('SHOW BINARY LOG STATUS');
  }
  const r = (rows as { File?: string; Position?: number | string; Executed_Gtid_Set?: string }[])[0];
  if (!r?.File)
    throw new SourceError(
      'CDC_BINLOG_OFF',
      'the server has no binary log (SHOW MASTER STATUS is empty): start it with log_bin, binlog_format=ROW, binlog_row_image=FULL, binlog_row_metadata=FULL',
    );
  return {
    file: r.File,
    pos: Number(r.Position),
    // MySQL only (MariaDB's status has no such column).
    ...(typeof r.Executed_Gtid_Set === 'string'
      ? { executedGtidSet: r.Executed_Gtid_Set.replace(/\s+/g, '') }
      : {}),
  };
}

/** The server's current binlog end as a resume point (epoch 0): a first start's position. */
export async function binlogEnd(conn: Connection, signal?: AbortSignal): Promise<BinlogPoint> {
  const server = await serverIdentity(conn);
  const status = await binlogStatus(conn);
  // The GTID position AT that file:pos, not read separately (a commit in between would
  // make them disagree): MySQL reports it with the status, MariaDB computes it.
  const [g] =
    status.executedGtidSet !== undefined
      ? [[{ g: status.executedGtidSet }]]
      : await conn
          .query('SELECT BINLOG_GTID_POS(?, ?) AS g', [status.file, status.pos])
          .catch(() => [[{ g: '' }]]);
  signal?.throwIfAborted();
  const gtid = String((g as { g: unknown }[])[0]?.g ?? '');
  return { file: status.file, pos: status.pos, gtid, server, epoch: 0 };
}

/**
 * Where a start streams from on the server it reached (`server`, its identity): `at`, in this
 * server's coordinates and epoch, by `byGtid` (a MariaDB GTID position) after a failover, else
 * by `at`'s file:pos; or `gap`, why the stored position does not apply here.
 */
export type Resume =
  | { readonly server: string; readonly gap: string }
  | {
      readonly server: string;
      readonly gap?: undefined;
      readonly at: BinlogPoint;
      readonly byGtid: string | undefined;
    };

/** Decides how the stored position `stored` resumes on the server `conn` reaches (see the module comment). */
export async function resumeOn(
  conn: Connection,
  stored: SourcePosition,
  log: ReaderLog | undefined,
): Promise<Resume> {
  const server = await serverIdentity(conn);
  let at = parseBinlogPosition(stored);
  const [g] = await conn.query('SELECT @@GLOBAL.gtid_binlog_pos AS g').catch(() => [[]]);
  const current = (g as { g?: unknown }[])[0]?.g;
  let byGtid: string | undefined;
  if (at.server !== '' && at.server !== server) {
    // Another server: its file:pos mean nothing here, but its binlog may hold the stored
    // GTID position (a promoted replica with log_slave_updates). Then resume by GTID in a
    // new coordinate epoch, so every __pos from here sorts after every earlier one.
    const why = failoverRefusal(at.gtid, typeof current === 'string' ? current : '');
    if (why !== undefined)
      return {
        server,
        gap: `the stored binlog position belongs to server ${at.server}, but the source is now server ${server} (failover or a replaced server): its binlog coordinates do not apply, and it cannot resume by GTID (${why})`,
      };
    const to = { server, gtid: at.gtid, epoch: at.epoch + 1 };
    log?.warn('the binlog coordinates changed: resuming by GTID on another server in a new epoch', {
      from: { server: at.server, file: at.file, pos: at.pos, gtid: at.gtid, epoch: at.epoch },
      to,
      epoch: to.epoch,
    });
    byGtid = at.gtid;
    at = { ...at, server, epoch: to.epoch };
  }
  const reset =
    byGtid === undefined && typeof current === 'string' ? gtidWentBack(at.gtid, current) : undefined;
  if (reset)
    return {
      server,
      gap: `the server's binlog GTID position ${current || '(empty)'} is behind the stored one (${reset}): its binlogs were reset (RESET MASTER) or it is another server, so the stored file:pos does not apply`,
    };
  return { server, at, byGtid };
}

/**
 * Why the stored MariaDB GTID position cannot be resumed from on another server whose
 * `gtid_binlog_pos` is `current`, or undefined when it can: every stored domain must be there at
 * or past its stored sequence (the new server has applied it), and the server must have no
 * domain the stored position lacks (its events in that domain would be replayed from its oldest
 * binlog: a new GTID domain stays a gap). Whether its binlogs still hold the continuation the
 * dump answers (error 1236 otherwise, a gap).
 */
export function failoverRefusal(stored: string, current: string): string | undefined {
  const parse = (text: string) =>
    text
      .split(',')
      .map((x) => x.trim())
      .filter((x) => x !== '')
      .map((x) => {
        const m = /^(\d+)-(\d+)-(\d+)$/.exec(x);
        return m ? { domain: m[1]!, seq: BigInt(m[3]!), text: x } : undefined;
      });
  const was = parse(stored);
  if (was.length === 0) return 'the stored position has no GTIDs';
  if (was.some((x) => x === undefined)) return `the stored GTID position ${stored} is not a MariaDB one`;
  const now = new Map(
    parse(current)
      .filter((x) => x !== undefined)
      .map((x) => [x.domain, x]),
  );
  for (const w of was) {
    const is = now.get(w!.domain);
    if (!is) return `the server's GTID position ${current || '(empty)'} has no domain ${w!.domain}`;
    if (is.seq < w!.seq) return `the server's GTID position ${current} is behind the stored ${w!.text}`;
  }
  const known = new Set(was.map((w) => w!.domain));
  for (const d of now.keys())
    if (!known.has(d))
      return `the server's GTID position ${current} has domain ${d}, which the stored one lacks`;
  return undefined;
}

/**
 * The first domain whose stored MariaDB GTID (`domain-server-seq`) the server's binlog position
 * has not reached (same server id, lower sequence, or the domain gone): coordinates were reset.
 * Undefined when every stored domain is at or past its stored GTID (or nothing was stored).
 */
export function gtidWentBack(stored: string, current: string): string | undefined {
  const parse = (text: string) =>
    new Map(
      text
        .split(',')
        .map((x) => x.trim())
        .filter((x) => /^\d+-\d+-\d+$/.test(x))
        .map((x) => {
          const [d, server, seq] = x.split('-');
          return [d!, { server: server!, seq: BigInt(seq!), text: x }] as const;
        }),
    );
  const now = parse(current);
  for (const [domain, was] of parse(stored)) {
    const is = now.get(domain);
    if (!is) return `domain ${domain}: ${was.text}, now absent`;
    if (is.seq < was.seq && is.server === was.server) return `domain ${domain}: ${was.text}, now ${is.text}`;
  }
  return undefined;
}
