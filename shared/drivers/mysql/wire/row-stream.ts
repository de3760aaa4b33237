/**
 * One streaming statement on a mysql2 connection, its rows handed over as they arrive: the
 * mysql2 side of every raw read (connect.ts `MysqlConnection.each`, `eachRow` and
 * `eachBinaryRow`; the Postgres driver's counterparts are copy-stream.ts and copy-tap.ts).
 *
 * Owns: the statement as mysql2 runs it (a Query with `typeCast: false`, or for the binary
 * protocol a prepared statement's Execute, unprepared once its result is read), the column
 * definitions handed to `onFields`, and the first failure (a row or `onFields` callback's, or
 * the server's), with which the statement ends only once mysql2 has read the whole result, so
 * the connection is never left mid-result. And the row data phase taken over for the raw
 * result-set readers (issue 15, docs/decisions/0020-mysql-binary-page-reads.md): mysql2's
 * row-reading states are replaced so that each row packet's payload range goes to the caller
 * (text-rows.ts and binary-rows.ts walk it), with no row parser and no per-row event. That part
 * leans on mysql2 internals (lib/commands/query.js, lib/commands/execute.js,
 * lib/packets/packet.js), which test/integration/mysql-raw-rows.test.ts checks on a server.
 * The connection's lifetime (opening, abort, a lost connection) is connect.ts's.
 */
import type { Connection, FieldPacket, Query } from 'mysql2';

/**
 * Attaches a statement's row delivery to mysql2's command `q`, given `live` (false once a row
 * callback failed or the read was aborted: rows are then dropped) and `fail` (keeps the first
 * failure, with which the statement ends once drained).
 */
export type RowDelivery = (q: Query, live: () => boolean, fail: (e: unknown) => void) => void;

/**
 * Sends `sql` on `core` as a streaming statement whose rows `rows` delivers: `done` once mysql2
 * has read the end of the result, or `fail` then with the first failure. `signal` aborted drops
 * the rows still to come (the caller abandons the connection).
 */
export function streamStatement(
  core: Connection,
  sql: string,
  binary: boolean,
  signal: AbortSignal | undefined,
  onFields: ((fields: readonly FieldPacket[]) => void) | undefined,
  rows: RowDelivery,
  done: () => void,
  fail: (e: unknown) => void,
): void {
  let failure: unknown;
  const live = () => failure === undefined && !signal?.aborted;
  // Binary: a prepared statement (mysql2 prepares, then executes it), closed once its
  // result is read so that the server's prepared statements do not pile up (each page
  // has its own text); the close is queued behind the execute and has no reply.
  const q = binary
    ? (core.execute({ sql, rowsAsArray: true }) as unknown as Query)
    : core.query({ sql, rowsAsArray: true, typeCast: false });
  if (binary) {
    // mysql2 keys its statement cache on the options (`statementKey`); its typings take only the SQL.
    const unprepare = core.unprepare.bind(core) as unknown as (o: object) => unknown;
    q.once('end', () => unprepare({ sql, rowsAsArray: true }));
  }
  if (onFields) {
    q.on('fields', (fields: FieldPacket[] | undefined) => {
      if (!live()) return;
      try {
        onFields(fields ?? []);
      } catch (e) {
        failure = e;
      }
    });
  }
  rows(q, live, (e) => {
    failure ??= e;
  });
  q.on('error', (e: Error) => {
    failure ??= e;
  });
  q.on('end', () => (failure !== undefined ? fail(failure) : done()));
}

/**
 * `each`'s delivery: mysql2's 'result' event, one row of type `R` each (connect.ts `RawRow`: the
 * statement runs with `typeCast: false`).
 */
export function rowEvents<R>(onRow: (row: R) => void): RowDelivery {
  return (q, live, fail) => {
    q.on('result', (row: unknown) => {
      // Rows that arrive after an abort (the connection is being dropped) are not delivered.
      if (!live()) return;
      try {
        onRow(row as R);
      } catch (e) {
        fail(e);
      }
    });
  };
}

/**
 * `eachRow`'s delivery: each text-protocol row packet's payload range to `onRow`, mysql2's row
 * parser and 'result' event skipped.
 */
export function textRowPackets(onRow: (buf: Buffer, start: number, end: number) => void): RowDelivery {
  return (q, live, fail) => {
    // mysql2 (lib/commands/query.js) reads rows in the state `row`: `fieldsEOF` moves to
    // `this.row` (so an instance property takes over), and `Query.prototype.row` hands every
    // non-EOF packet to the row parser, returning itself as the next state. Ours returns itself
    // for row packets and gives EOF packets to mysql2's (end of result, or the next result set);
    // ERR packets never reach a state: Command.execute turns them into 'error' first.
    const internal = q as unknown as RowState;
    const original = internal.row;
    internal.row = rowState<RowState>(onRow, live, fail, (self, packet, connection) =>
      original.call(self, packet, connection),
    );
  };
}

/**
 * `eachBinaryRow`'s delivery: each binary row packet's payload range to `onRow`; mysql2's binary
 * row parser, which it builds per statement after the column definitions, is never built.
 */
export function binaryRowPackets(onRow: (buf: Buffer, start: number, end: number) => void): RowDelivery {
  return (q, live, fail) => {
    // mysql2's Execute (lib/commands/execute.js) pins its states to its prototype:
    // resultsetHeader returns `this.readField` (an instance property takes over), readField
    // returns the prototype's readField or fieldsEOF, fieldsEOF builds the row parser and
    // returns the prototype's row. Ours wrap readField, check the EOF after the column
    // definitions as fieldsEOF does, and read rows as `eachRow` does; EOF packets (end of
    // result, or the next result set) go to mysql2's row state.
    const internal = q as unknown as ExecuteStates;
    const proto = Object.getPrototypeOf(internal) as ExecuteStates;
    const row = rowState<ExecuteStates>(onRow, live, fail, (self, packet, connection) =>
      follow(proto.row.call(self, packet, connection)),
    );
    const fieldsEOF = function (this: ExecuteStates, packet: RowPacket, connection: unknown): unknown {
      if (!packet.isEOF()) return proto.fieldsEOF.call(this, packet, connection); // mysql2's protocol error
      return row;
    };
    const readField = function (this: ExecuteStates, packet: RowPacket, connection: unknown): unknown {
      return follow(proto.readField.call(this, packet, connection));
    };
    const follow = (next: unknown): unknown =>
      next === proto.readField ? readField : next === proto.fieldsEOF ? fieldsEOF : next;
    internal.readField = readField;
  };
}

/** What `eachRow` uses of mysql2's Packet (lib/packets/packet.js): the payload is `buffer[offset..end)`. */
interface RowPacket {
  readonly buffer: Buffer;
  readonly offset: number;
  readonly end: number;
  isEOF(): boolean;
}

/** mysql2's Query command in its row-reading state (lib/commands/query.js), as `eachRow` takes it over. */
interface RowState {
  row(this: RowState, packet: RowPacket, connection: unknown): unknown;
}

/** mysql2's Execute command's row-reading states (lib/commands/execute.js), as `eachBinaryRow` takes them over. */
interface ExecuteStates {
  readField(this: ExecuteStates, packet: RowPacket, connection: unknown): unknown;
  fieldsEOF(this: ExecuteStates, packet: RowPacket, connection: unknown): unknown;
  row(this: ExecuteStates, packet: RowPacket, connection: unknown): unknown;
}

/**
 * The row state `eachRow` and `eachBinaryRow` put in mysql2's place: a row packet goes to `onRow`
 * while the statement is `live` (a throw is kept by `fail`: a state must not throw, mysql2 would
 * take it for a fatal connection error), an EOF packet to `atEOF`, whose state is the next one;
 * the row state stays itself.
 */
function rowState<S>(
  onRow: (buf: Buffer, start: number, end: number) => void,
  live: () => boolean,
  fail: (e: unknown) => void,
  atEOF: (self: S, packet: RowPacket, connection: unknown) => unknown,
): (this: S, packet: RowPacket, connection: unknown) => unknown {
  const row = function (this: S, packet: RowPacket, connection: unknown): unknown {
    if (packet.isEOF()) return atEOF(this, packet, connection);
    if (live()) {
      try {
        onRow(packet.buffer, packet.offset, packet.end);
      } catch (e) {
        fail(e);
      }
    }
    return row;
  };
  return row;
}
