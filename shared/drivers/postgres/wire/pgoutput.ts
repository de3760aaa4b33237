/**
 * The pgoutput wire format (protocol version 1), decoded from the bytes of one XLogData payload
 * without copying: PostgreSQL's "Logical Streaming Replication Protocol" message formats, and the
 * CopyBoth framing around them ('w' XLogData, 'k' primary keepalive, 'r' standby status update).
 *
 * Owns: the byte layout of every message the CDC reader consumes (Begin, Commit, Origin,
 * Relation, Type, Insert, Update, Delete, Truncate, Message) and of tuple data, decoded into
 * offsets into the caller's buffer, so a value's text is read once, where it is used.
 * Must never: interpret a value (./reader.ts does, through the driver's type plan), allocate per
 * column on the tuple path, or know the engine.
 */
import { SourceError } from '../../../contracts/errors.js';

/** Microseconds between 1970-01-01 and 2000-01-01 (Postgres' epoch). */
export const PG_EPOCH_MICROS = 946_684_800_000_000n;

/** One column of a Relation message. */
export interface RelationColumn {
  /** Part of the replica identity (the key under the default identity). */
  readonly key: boolean;
  readonly name: string;
  readonly typeOid: number;
  readonly typmod: number;
}

/** A Relation message: the table's identity and columns as the stream will send them. */
export interface RelationMessage {
  readonly relid: number;
  readonly namespace: string;
  readonly name: string;
  /** pg_class.relreplident: 'd' default, 'n' nothing, 'f' full, 'i' index. */
  readonly replicaIdentity: string;
  readonly columns: readonly RelationColumn[];
}

/** Column kinds in tuple data. */
export const COL_NULL = 0x6e; // 'n'
export const COL_UNCHANGED = 0x75; // 'u': an unchanged TOASTed value, NOT a null
export const COL_TEXT = 0x74; // 't'
export const COL_BINARY = 0x62; // 'b'

/**
 * One decoded tuple: for column i, `kind[i]` is one of the COL_* codes and, for text, the value's
 * bytes are `buf[start[i], end[i])`. Reused across tuples: read it before decoding the next one.
 */
export class Tuple {
  count = 0;
  kind: Uint8Array;
  start: Int32Array;
  end: Int32Array;

  constructor(capacity = 16) {
    this.kind = new Uint8Array(capacity);
    this.start = new Int32Array(capacity);
    this.end = new Int32Array(capacity);
  }

  reserve(n: number): void {
    if (n <= this.kind.length) return;
    const cap = Math.max(n, this.kind.length * 2);
    this.kind = new Uint8Array(cap);
    this.start = new Int32Array(cap);
    this.end = new Int32Array(cap);
  }

  /** True when some column says 'u' (unchanged TOAST). */
  hasUnchanged(): boolean {
    for (let i = 0; i < this.count; i++) if (this.kind[i] === COL_UNCHANGED) return true;
    return false;
  }
}

function protocolError(what: string): SourceError {
  return new SourceError(
    'SOURCE_PROTOCOL',
    `the replication stream sent a malformed pgoutput message (${what}); this is a server or network fault: the position did not move, restart the capture`,
  );
}

/** A cursor over one message's bytes. */
export class MessageReader {
  buf!: Buffer;
  off = 0;
  endOff = 0;

  reset(buf: Buffer, start: number, end: number): this {
    this.buf = buf;
    this.off = start;
    this.endOff = end;
    return this;
  }

  private need(n: number): void {
    if (this.off + n > this.endOff) throw protocolError(`${n} more bytes at offset ${this.off}`);
  }

  u8(): number {
    this.need(1);
    return this.buf[this.off++]!;
  }

  i16(): number {
    this.need(2);
    const v = this.buf.readInt16BE(this.off);
    this.off += 2;
    return v;
  }

  i32(): number {
    this.need(4);
    const v = this.buf.readInt32BE(this.off);
    this.off += 4;
    return v;
  }

  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32BE(this.off);
    this.off += 4;
    return v;
  }

  i64(): bigint {
    this.need(8);
    const v = this.buf.readBigInt64BE(this.off);
    this.off += 8;
    return v;
  }

  u64(): bigint {
    this.need(8);
    const v = this.buf.readBigUInt64BE(this.off);
    this.off += 8;
    return v;
  }

  /** A NUL-terminated string. */
  cstring(): string {
    const z = this.buf.indexOf(0, this.off);
    if (z < 0 || z >= this.endOff) throw protocolError('an unterminated string');
    const s = this.buf.toString('utf8', this.off, z);
    this.off = z + 1;
    return s;
  }

  /** Tuple data ('N'/'K'/'O' already consumed) into `t`. */
  tuple(t: Tuple): void {
    const n = this.i16();
    t.reserve(n);
    t.count = n;
    const buf = this.buf;
    for (let i = 0; i < n; i++) {
      this.need(1);
      const k = buf[this.off++]!;
      t.kind[i] = k;
      if (k === COL_TEXT || k === COL_BINARY) {
        this.need(4);
        const len = buf.readInt32BE(this.off);
        this.off += 4;
        if (len < 0) throw protocolError(`a negative value length ${len}`);
        this.need(len);
        t.start[i] = this.off;
        this.off += len;
        t.end[i] = this.off;
      } else if (k !== COL_NULL && k !== COL_UNCHANGED) {
        throw protocolError(`tuple column kind 0x${k.toString(16)}`);
      }
    }
  }

  relation(): RelationMessage {
    const relid = this.u32();
    const namespace = this.cstring();
    const name = this.cstring();
    const replicaIdentity = String.fromCharCode(this.u8());
    const n = this.i16();
    const columns: RelationColumn[] = [];
    for (let i = 0; i < n; i++) {
      const flags = this.u8();
      const colName = this.cstring();
      const typeOid = this.u32();
      const typmod = this.i32();
      columns.push({ key: (flags & 1) === 1, name: colName, typeOid, typmod });
    }
    return { relid, namespace, name, replicaIdentity, columns };
  }
}

// ---------------------------------------------------------------------------------------------
// CopyBoth framing

/** 'w' XLogData header: 1 + 8 + 8 + 8 bytes before the pgoutput message. */
export const XLOG_HEADER = 25;

/** The 34-byte standby status update ('r') reporting `lsn` as written, flushed and applied. */
export function standbyStatus(lsn: bigint, nowMicros: bigint, replyRequested = false): Buffer {
  const b = Buffer.alloc(34);
  b[0] = 0x72; // 'r'
  b.writeBigUInt64BE(lsn, 1);
  b.writeBigUInt64BE(lsn, 9);
  b.writeBigUInt64BE(lsn, 17);
  b.writeBigInt64BE(nowMicros - PG_EPOCH_MICROS, 25);
  b[33] = replyRequested ? 1 : 0;
  return b;
}

/** Postgres timestamp (micros since 2000) -> ns since 1970. */
export function pgTimeToNanos(pgMicros: bigint): bigint {
  return (pgMicros + PG_EPOCH_MICROS) * 1000n;
}
