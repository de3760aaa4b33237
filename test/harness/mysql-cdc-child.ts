/**
 * The CDC engine over the real MySQL/MariaDB binlog reader in a process of its own, for the MySQL
 * crash suite (test/integration/mysql-cdc-crash.test.ts, test/integration/cdc-crash/) that
 * SIGKILLs it at named points of the commit protocol:
 *
 *   node --import tsx test/harness/mysql-cdc-child.ts '<MyChildConfig JSON>'
 *
 * `MysqlCdcSource` with the config's dump server id, capturing `<database>.accounts`, `.orders`
 * and `.events`; the run, the kills and the mutations are the shared body's
 * (./cdc-crash-child.ts). Every `setConfirmed` the engine calls is checked against the committed
 * state (MySQL keeps no replica position on the server, so this is where an early ack shows):
 * one past the durable position appends a line to `<dir>/violations` (fsync'd).
 */
import type { Streamer } from '../../shared/contracts/cdc.js';
import type { CursorStore } from '../../shared/contracts/state.js';
import { MysqlCdcSource } from '../../shared/drivers/mysql/cdc/source.js';
import { CRASH_SOURCE_NAME, runCrashChild } from './cdc-crash-child.js';
import { CRASH_STATE_KEY } from './cdc-crash-config.js';
import { record } from './mutations.js';
import { compareBinlog, MY_TABLES, type MyChildConfig } from './mysql-cdc-crash-config.js';
import { ackCheckedStreamer } from './wrap.js';

/**
 * Checks each `setConfirmed` against the committed state position (read through `store`, the
 * unwrapped one): an ack past it is recorded in `<dir>/violations`.
 */
function checkedStreamer(inner: Streamer, store: CursorStore, dir: string): Streamer {
  return ackCheckedStreamer(inner, store, CRASH_STATE_KEY, (acked, committed) => {
    if (committed === undefined || compareBinlog(acked.value, committed.value) > 0)
      record(dir, 'violations', JSON.stringify({ acked: acked.value, committed: committed?.value ?? null }));
  });
}

runCrashChild((config: MyChildConfig) => ({
  source: new MysqlCdcSource({
    url: config.url,
    sourceName: CRASH_SOURCE_NAME,
    connectTimeoutMs: 10_000,
    serverId: config.serverId,
    heartbeatMs: 1000,
  }),
  tables: MY_TABLES.map((t) => ({
    source: `${config.database}.${t}`,
    target: `${config.database}.${t}`,
    writeMode: 'upsert',
    exclude: [],
    onWiden: 'stop',
    onTruncate: 'record',
  })),
  runtime: { heartbeatMs: 1000, serverId: config.serverId },
  // The check sits between the engine (or the broken early ack) and the reader: every ack,
  // whoever sends it, passes through it.
  checkAcks: (streamer, store) => checkedStreamer(streamer, store, config.dir),
}));
