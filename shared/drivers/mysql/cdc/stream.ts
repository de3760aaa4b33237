/**
 * The MySQL reader's binlog dump connection: `@vlasky/zongji` loaded (at start, not at import:
 * it and the mysql2 it loads cost every other run of the CLI tens of milliseconds of start-up)
 * and configured as decision 0012 says (`dateStrings`, `timezone: 'Z'`, `jsonStrings`, exact big
 * numbers), our own row-image decoder and MySQL 8 commit microseconds installed into it where
 * they can be, and the dump started from a point with the capture's filters.
 *
 * Owns: that set-up, the filters (the captured tables, the watermark table, and every event
 * that moves the position between groups) and the start's outcome (ready; refused at once with
 * purged binlogs, error 1236, which the reader turns into a gap; any other error before ready
 * fails the start). Never interprets an event: each goes to the reader's queue as it arrives.
 */
import type ZongJi from '@vlasky/zongji';
import type { AnyBinlogEvent } from '@vlasky/zongji';
import type { ReaderLog } from '../../../contracts/cdc.js';
import { GTID_MICROS, installGtidCommitMicros } from '../wire/binlog-gtid.js';
import { installRawRowImages } from '../wire/binlog-rows.js';

/** ER_MASTER_FATAL_ERROR_READING_BINLOG: the requested binlog (or GTID state) is gone. */
export const BINLOG_GONE = 1236;

/** What zongji passes on (its `includeSchema` and `includeEvents`). */
export interface BinlogFilters {
  readonly includeSchema: Record<string, string[]>;
  readonly includeEvents: string[];
}

/**
 * Installs the row-image decoder (../wire/binlog-rows.ts) into zongji's own files; false (with a
 * warning) when they cannot be reached: a bundle (the Lambda and CDC task builds, CommonJS) has
 * neither, and then zongji's own row parse serves (exact, slower).
 */
export async function installRowImages(log: ReaderLog | undefined): Promise<boolean> {
  try {
    await installRawRowImages();
    return true;
  } catch (e) {
    log?.warn('the fast row-image decoder is unavailable; zongji parses the rows (exact, slower)', {
      error: e,
    });
    return false;
  }
}

/** A zongji client of the server at `url`, commit microseconds installed where it can be. */
export async function openZongji(
  url: string,
  connectTimeoutMs: number | undefined,
  log: ReaderLog | undefined,
): Promise<ZongJi> {
  const { default: ZongJiClass } = await import('@vlasky/zongji');
  const z = new ZongJiClass({
    uri: url,
    connectTimeout: connectTimeoutMs ?? 10_000,
    dateStrings: true,
    timezone: 'Z',
    jsonStrings: true,
    supportBigNumbers: true,
    bigNumberStrings: true,
  } as never);
  try {
    installGtidCommitMicros(z);
  } catch (e) {
    log?.warn('MySQL 8 commit microseconds are unavailable; __commit_ts has seconds', { error: e });
  }
  return z;
}

/**
 * Starts the dump as replica `serverId` from `from` (a MariaDB GTID position after a failover:
 * @slave_connect_state, the server then ignores filename and position; else file:pos), passing
 * each event to `onEvent` and an error once streaming (or error 1236 at once) to `onError`.
 * Resolves once streaming, or at once on 1236 (the gap is the answer); rejects on any other
 * error before that. `at` is logged.
 */
export function startDump(
  z: ZongJi,
  start: {
    readonly serverId: number;
    readonly from: { readonly gtidSet: string } | { readonly filename: string; readonly position: number };
    readonly filters: BinlogFilters;
    readonly at: { readonly file: string; readonly pos: number };
  },
  onEvent: (ev: AnyBinlogEvent) => void,
  onError: (e: Error) => void,
  log: ReaderLog | undefined,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let ready = false;
    z.on('binlog', (ev: AnyBinlogEvent) => {
      // MySQL 8: the commit micros binlog-gtid.ts read from this event's packet.
      const micros = (z as unknown as Record<string, unknown>)[GTID_MICROS];
      if (typeof micros === 'bigint' && ev.getTypeName() === 'Gtid')
        (ev as { commitMicros?: bigint }).commitMicros = micros;
      onEvent(ev);
    });
    z.on('error', (e: Error) => {
      if (!ready && (e as { errno?: number }).errno !== BINLOG_GONE) {
        reject(e);
        return;
      }
      onError(e);
      // A dump refused at once (purged binlogs) never gets ready: the gap is the answer.
      resolve();
    });
    z.on('ready', () => {
      ready = true;
      log?.info('binlog streaming', { file: start.at.file, pos: start.at.pos, serverId: start.serverId });
      resolve();
    });
    z.start({ serverId: start.serverId, ...start.from, ...start.filters });
  });
}

/**
 * The filters of a capture: the tables (`database`, `table`) and the watermark table, and every
 * event that moves the position between groups (format, GTID list, checkpoint, heartbeat), so a
 * snapshot watermark at the binlog end is reported on an idle server.
 */
export function binlogFilters(
  tables: Iterable<{ readonly database: string; readonly table: string }>,
): BinlogFilters {
  const include: Record<string, string[]> = {};
  for (const { database, table } of tables) {
    const list = include[database] ?? [];
    if (!list.includes(table)) list.push(table);
    include[database] = list;
  }
  return {
    includeSchema: include,
    includeEvents: [
      'rotate',
      'tablemap',
      'writerows',
      'updaterows',
      'deleterows',
      'xid',
      'query',
      'mariadbgtid',
      'gtid',
      'anonymousgtid',
      'heartbeat',
      'format',
      'mariadbgtidlist',
      'binlogcheckpoint',
      'previousgtids',
      'unknown',
    ],
  };
}
