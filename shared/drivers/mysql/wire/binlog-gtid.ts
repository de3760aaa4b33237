/**
 * MySQL 8's commit time in microseconds (a Gtid_log_event's immediate_commit_timestamp), which
 * @vlasky/zongji 0.9.0's Gtid class skips (it reads flags, sid and gno, then jumps to the event
 * end and keeps no copy of the bytes).
 *
 * How the bytes are obtained: zongji builds `BinlogClass = initBinlogClass(zongji)` per instance
 * at its start (index.js); that class's `binlogData(packet, connection)` receives each raw
 * binlog packet and, synchronously, parses it and hands the event to the 'binlog' listeners.
 * `installGtidCommitMicros(z)` wraps that method on the instance's own class: for a classic Gtid
 * event (type 33) it reads the commit micros from the packet and leaves them on the instance
 * (`GTID_MICROS`) while the original runs, so the reader's 'binlog' listener can take them for
 * that event. The install checks zongji's version and the shape of what it wraps
 * (test/unit/mysql8-fixtures.test.ts), so an upgrade that changes them fails there and at the
 * reader's start instead of reading wrong bytes. MariaDB GTID events (type 162) are untouched.
 *
 * Body layout (libs/mysql/binlog/event/control_events.cpp, as recalled): flags u8, sid 16 bytes,
 * gno i64, lt_type u8 (2: logical clock), last_committed i64, sequence_number i64,
 * immediate_commit_timestamp 7 bytes (bit 55: an original_commit_timestamp follows). MySQL 5.7
 * bodies end after the logical clock: no micros.
 */
import { createRequire } from 'node:module';

export const GTID_MICROS = '__tidemarkGtidCommitMicros';
const ZONGJI_VERSION = '0.9.0';
const GTID_LOG_EVENT = 33;
/** marker u8, timestamp u32, type u8, server_id u32, event_length u32, next_position u32, flags u16. */
const HEADER = 20;

/** The immediate_commit_timestamp (microseconds) of a classic Gtid event body, if it has one. */
export function gtidCommitMicros(body: Buffer, start = 0, end = body.length): bigint | undefined {
  const lt = start + 1 + 16 + 8;
  if (end < lt + 1 + 16 + 7 || body[lt] !== 2) return undefined;
  const at = lt + 1 + 16;
  const v = BigInt(body.readUIntLE(at, 6)) | (BigInt(body[at + 6]!) << 48n);
  const micros = v & ((1n << 55n) - 1n);
  return micros === 0n ? undefined : micros;
}

interface Packet {
  buffer: Buffer;
  offset: number;
  end: number;
}
type BinlogData = (this: unknown, packet: Packet, connection: unknown) => unknown;

/** Wraps the instance's BinlogClass.binlogData when zongji sets it; throws when zongji changed. */
export function installGtidCommitMicros(z: object): void {
  const main = import.meta.resolve('@vlasky/zongji');
  const version = (createRequire(main)('./package.json') as { version: string }).version;
  if (version !== ZONGJI_VERSION)
    throw new Error(
      `binlog-gtid.ts wraps @vlasky/zongji ${ZONGJI_VERSION} internals, but ${version} is installed: check lib/sequence/binlog.js and update binlog-gtid.ts`,
    );
  const self = z as Record<string, unknown> & { useChecksum?: boolean };
  let current: unknown;
  Object.defineProperty(self, 'BinlogClass', {
    configurable: true,
    enumerable: true,
    get: () => current,
    set: (C: { prototype: { binlogData?: BinlogData } } | undefined) => {
      current = C;
      if (C === undefined || C === null) return;
      const proto = C.prototype;
      const original = proto.binlogData;
      if (
        typeof original !== 'function' ||
        original.length !== 2 ||
        !/new Parser\(packet\)/.test(String(original)) ||
        !/binlogPacket\.parse\(parser\)/.test(String(original))
      )
        throw new Error('@vlasky/zongji: Binlog.binlogData is not the function binlog-gtid.ts wraps');
      if ((original as { gtidMicros?: boolean }).gtidMicros) return;
      const wrapped: BinlogData = function (this: unknown, packet: Packet, connection: unknown) {
        let micros: bigint | undefined;
        const b = packet?.buffer;
        if (
          Buffer.isBuffer(b) &&
          packet.end - packet.offset > HEADER &&
          b[packet.offset + 5] === GTID_LOG_EVENT
        )
          micros = gtidCommitMicros(b, packet.offset + HEADER, packet.end - (self.useChecksum ? 4 : 0));
        self[GTID_MICROS] = micros;
        try {
          return original.call(this, packet, connection);
        } finally {
          self[GTID_MICROS] = undefined;
        }
      };
      (wrapped as { gtidMicros?: boolean }).gtidMicros = true;
      proto.binlogData = wrapped;
    },
  });
}
