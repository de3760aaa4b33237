/**
 * The scripted CDC source (issue 10 item 7): a deterministic model of a replication log that
 * implements the CDC reader contract (shared/contracts/cdc.ts) without a database, so the CDC
 * engine's tests (and its benchmark) run on it. Scripts and the model of what they mean are in
 * scripted-script.ts; reading batches back is scripted-lake.ts; both are re-exported here.
 *
 * - `ScriptedServer`: the "server" over a script. Its durable state (the confirmed position) is
 *   a JSON file in a directory, written with fsync + rename, so a reader in a child process can
 *   be SIGKILLed and a reader in another process resumes from what the first one confirmed. As
 *   on a real server, the log at or before the confirmed position is gone.
 * - `ScriptedReader`: the `Reader`. Positions are `{ scheme: 'scripted', value: '<step>',
 *   display: 'step <step>' }`: resume AFTER that step. A first start (`position` undefined)
 *   starts at step 0, as a slot created just before the script's first transaction would.
 * - `scriptedDriver(opts)`: a driver registration object (kind `scripted`, mode cdc) with
 *   `openCdc` returning a `Streamer` that also introspects (registry `ClosableCdcSource`);
 *   `scriptedDriverWithoutStream` for the capability gate.
 *
 * What a step delivers (scripted-script.ts `Step`):
 * - txn: `begin`, `rows` events (one per run of consecutive changes to one captured table, at
 *   most `rowsPerEvent` rows), `commit { position: step N, commitTimeMs }`. A rolled-back
 *   transaction delivers nothing. A transaction touching no captured table delivers `begin`
 *   and `commit` only (as pgoutput before Postgres 15 does).
 * - keepalive: `progress { position: step N }`.
 * - truncate / ddl on a captured table: a `ddl` event (no position: it is delivered again when
 *   the stream resumes from a position before it).
 * - add-column: nothing at once; like a pgoutput Relation message, the `schema` event comes just
 *   before the table's next row (in its transaction). Also at start: a table whose `CdcTable`
 *   schema differs from the script's at the resume point gets a `schema` event before its first
 *   row. The table's rows pending when the event is delivered are in the old schema; the engine
 *   must cut (or drop) them before the next `next()`, which otherwise throws.
 * - gap: `gap { from: step N-1, to: step N+lost }`; the `lost` steps after it are skipped.
 *
 * Rows: op c/u/d (insert/update/delete), `__pos = pgPosition(commit step, ordinal per
 * transaction and table)`, `__commit_ts` the transaction's commit time, phase `stream`,
 * snapshot false. A delete carries only the key (Postgres' default replica identity): NULL in
 * every other column. Rows below `StartFrom.next.get(target)` are dropped (not appended, not
 * counted); their ordinals still count. Uncaptured script tables are skipped (not in the
 * publication). Tables are matched by `CdcTable.ref.source` = script table name; events name
 * `ref.target`.
 *
 * `next(waitMs)` never waits for wall-clock time (only an optional injected `delayMs`); it
 * returns undefined once the script is exhausted, when `ended` is true.
 *
 * Speed: row values are derived from (change, column) by integer hashing and written through the
 * encoder's raw appenders (text from a pre-encoded UTF-8 pool): no per-row objects beyond what
 * BatchEncoder keeps.
 */
import { mkdir, open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type {
  CdcEvent,
  CdcRuntime,
  CdcTable,
  PendingRows,
  Reader,
  SourcePosition,
  StartFrom,
  Streamer,
} from '../../shared/contracts/cdc.js';
import type { ClosableCdcSource } from '../../shared/contracts/driver.js';
import type { Capabilities } from '../../shared/contracts/source.js';
import { type Batch, newBatch, type WriteMode } from '../../shared/dataplane/batch.js';
import { BatchEncoder, type ColumnWriter } from '../../shared/dataplane/encoder.js';
import type { OpCode } from '../../shared/dataplane/metadata.js';
import type { Schema } from '../../shared/dataplane/schema.js';
import { compareSchemas, schemaHash } from '../../shared/dataplane/schema-rules.js';
import type { DriverRegistration } from '../../shared/drivers/registry.js';
import { parsePgPosition } from '../../shared/position/position.js';
import {
  cdcSchema,
  OP_DELETE,
  rowPos,
  rowPosPrefix,
  SCRIPTED_SCHEME,
  type Script,
  schemaBefore,
  TEXT_POOL_BYTES,
  TEXT_POOL_OFFSETS,
  TS_BASE_MICROS,
  valueHash1,
  valueHash2,
  withColumn,
} from './scripted-script.js';

export * from './scripted-lake.js';
export * from './scripted-script.js';

// ---------------------------------------------------------------------------------------------
// Positions

/** The position "resume after step `step`". */
export function scriptedPosition(step: number): SourcePosition {
  return { scheme: SCRIPTED_SCHEME, value: String(step), display: `step ${step}` };
}

/** The step number of a scripted position; throws on another scheme or a malformed value. */
export function parseScriptedPosition(pos: SourcePosition): number {
  if (pos.scheme !== SCRIPTED_SCHEME) {
    throw new Error(
      `position scheme "${pos.scheme}" is not "${SCRIPTED_SCHEME}": it comes from another reader`,
    );
  }
  if (!/^(-1|0|[1-9][0-9]{0,14})$/.test(pos.value)) {
    throw new Error(`scripted position "${pos.value}" is not a step number`);
  }
  return Number(pos.value);
}

// ---------------------------------------------------------------------------------------------
// The server

const STATE_FILE = 'scripted-server.json';

interface ServerState {
  readonly version: 1;
  readonly fingerprint: string;
  readonly confirmed: SourcePosition | null;
}

/** A fingerprint of a script, so a state directory is not reused with another script by mistake. */
export function scriptFingerprint(script: Script): string {
  let h = 0x811c9dc5;
  const feed = (bytes: Uint8Array): void => {
    for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193);
  };
  const c = script.changes;
  feed(
    Buffer.from(
      JSON.stringify(
        [script.tables, script.steps, script.salt, script.nullThreshold, c.values],
        jsonReplacer,
      ),
    ),
  );
  feed(new Uint8Array(c.table.buffer, c.table.byteOffset, c.table.byteLength));
  feed(c.op);
  feed(new Uint8Array(c.id.buffer, c.id.byteOffset, c.id.byteLength));
  return `${(h >>> 0).toString(16).padStart(8, '0')}-${c.length}-${script.steps.length}`;
}

function jsonReplacer(_key: string, v: unknown): unknown {
  return typeof v === 'bigint' ? `${v}n` : v;
}

/** Writes `text` to `path` durably: temp file, fsync, rename, fsync of the directory. */
async function writeDurably(dir: string, path: string, text: string): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  const f = await open(tmp, 'w');
  try {
    await f.writeFile(text, 'utf8');
    await f.sync();
  } finally {
    await f.close();
  }
  await rename(tmp, path);
  const d = await open(dir, 'r');
  try {
    await d.sync();
  } finally {
    await d.close();
  }
}

/**
 * The server side of the scripted source: the script (the log) and the durable confirmed
 * position in `dir/scripted-server.json`. Several `ScriptedServer`s (in several processes) over
 * the same script and directory share that state; the file is read at every `start`.
 */
export class ScriptedServer {
  readonly statePath: string;
  private fingerprint: string | undefined;
  /** Confirmations of this instance, one after the other (read, compare, write). */
  private confirming: Promise<void> = Promise.resolve();

  constructor(
    readonly script: Script,
    readonly dir: string,
  ) {
    this.statePath = join(dir, STATE_FILE);
  }

  private print(): string {
    this.fingerprint ??= scriptFingerprint(this.script);
    return this.fingerprint;
  }

  private async readState(): Promise<ServerState | undefined> {
    let text: string;
    try {
      text = await readFile(this.statePath, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
    const state = JSON.parse(text) as ServerState;
    if (state.fingerprint !== this.print()) {
      throw new Error(
        `${this.statePath} belongs to another script (fingerprint ${state.fingerprint}, this one ${this.print()})`,
      );
    }
    return state;
  }

  /** The position last confirmed (durable), or undefined when none was. */
  async confirmed(): Promise<SourcePosition | undefined> {
    return (await this.readState())?.confirmed ?? undefined;
  }

  /**
   * Records `position` as confirmed, durably. A position before the one already confirmed is
   * ignored, as Postgres ignores a confirmed_flush_lsn that moves back.
   */
  setConfirmed(position: SourcePosition): Promise<void> {
    const step = parseScriptedPosition(position);
    const run = this.confirming.then(() => this.confirm(step));
    this.confirming = run.catch(() => undefined);
    return run;
  }

  private async confirm(step: number): Promise<void> {
    const was = await this.confirmed();
    if (was !== undefined && parseScriptedPosition(was) >= step) return;
    await mkdir(this.dir, { recursive: true });
    const state: ServerState = { version: 1, fingerprint: this.print(), confirmed: scriptedPosition(step) };
    await writeDurably(this.dir, this.statePath, `${JSON.stringify(state)}\n`);
  }

  /** A reader over `tables` (call `start` before `next`). */
  openReader(tables: readonly CdcTable[], options: ReaderOptions = {}): ScriptedReader {
    return new ScriptedReader(this, tables, options);
  }

  /** A `Streamer` opening readers on this server. */
  streamer(options: ReaderOptions = {}): Streamer {
    return {
      openReader: async (tables: readonly CdcTable[], _runtime: CdcRuntime) =>
        this.openReader(tables, options),
    };
  }
}

// ---------------------------------------------------------------------------------------------
// The reader

export interface ReaderOptions {
  /** Most rows one `rows` event reports [1024]: a huge transaction arrives in many events. */
  readonly rowsPerEvent?: number;
  /** A delay before every `next` answers, in ms [0: none]. */
  readonly delayMs?: number;
  /** `__ingest_ts` of cut batches, ns since the epoch [wall clock]. */
  readonly ingestTsNanos?: () => bigint;
  /** Rows to allocate per table encoder up front [1024]. */
  readonly capacity?: number;
}

/** Column codes of the row-writing loop. */
const C_KEY = 0;
const C_INT32 = 1;
const C_INT64 = 2;
const C_FLOAT64 = 3;
const C_TEXT = 4;
const C_TIMESTAMP = 5;
const C_BOOL = 6;
const C_DATE = 7;
const C_NULL = 8;

function columnCodes(schema: Schema): Uint8Array {
  const key = schema.primaryKey[0];
  return Uint8Array.from(
    schema.columns.map((c) => {
      if (c.name === key) return C_KEY;
      switch (c.type.kind) {
        case 'int32':
          return C_INT32;
        case 'int64':
          return C_INT64;
        case 'float64':
          return C_FLOAT64;
        case 'text':
          return C_TEXT;
        case 'timestamp':
          return C_TIMESTAMP;
        case 'bool':
          return C_BOOL;
        case 'date':
          return C_DATE;
        default:
          return C_NULL;
      }
    }),
  );
}

/** Per captured table: its encoder, schemas and bookkeeping. */
interface TableState {
  readonly index: number;
  readonly target: string;
  readonly writeMode: WriteMode;
  /** The schema the encoder writes. */
  schema: Schema;
  hash: string;
  encoder: BatchEncoder;
  writers: ColumnWriter[];
  codes: Uint8Array;
  names: readonly string[];
  /** The script's schema of the table at the cursor (differs from `schema` until the event). */
  scriptSchema: Schema;
  scriptHash: string;
  /** An encoder to switch to once the old one is cut (after a `schema` event). */
  swap: BatchEncoder | undefined;
  /** Rows below (nextStep, nextOrd) are already durable. */
  nextStep: number;
  nextOrd: number;
  /** Step and ordinal of the last row appended (the watermark of a cut). */
  lastStep: number;
  lastOrd: number;
}

const MAX_STEP = Number.MAX_SAFE_INTEGER;

/** Splits `StartFrom.next`'s first non-durable `__pos` into (step, ordinal) bounds. */
function nextBound(next: string | undefined): { step: number; ord: number } {
  if (next === undefined || next < 'p') return { step: -1, ord: 0 };
  if (next > 'p\uffff') return { step: MAX_STEP, ord: 0 };
  const { commitLsn, ordinal } = parsePgPosition(next);
  return commitLsn > BigInt(MAX_STEP)
    ? { step: MAX_STEP, ord: 0 }
    : { step: Number(commitLsn), ord: ordinal };
}

/** Reads the scripted log as CDC events (see the module comment). */
export class ScriptedReader implements Reader {
  /** Rows carry `pgPosition`s. */
  readonly positionScheme = 'p';
  /** The scripted server keeps its whole log. */
  readonly keepsPosition = true;
  private readonly tables: TableState[] = [];
  /** Script table index -> captured table state (undefined: not captured). */
  private readonly byIndex: (TableState | undefined)[];
  private readonly byTarget = new Map<string, TableState>();
  private readonly script: Script;
  private readonly rowsPerEvent: number;
  private readonly delayMs: number;
  private readonly ingestTs: () => bigint;
  private readonly capacity: number;
  private readonly ord: Int32Array;
  private started = false;
  private closed = false;
  private done = false;
  private queued: CdcEvent | undefined;
  /** The step the cursor is at. */
  private step = 0;
  /** Within a transaction step: begin delivered, next change index. */
  private inTxn = false;
  private change = 0;
  private prefix = '';
  private commitNs = 0n;

  constructor(
    readonly server: ScriptedServer,
    tables: readonly CdcTable[],
    options: ReaderOptions = {},
  ) {
    this.script = server.script;
    this.rowsPerEvent = Math.max(1, options.rowsPerEvent ?? 1024);
    this.delayMs = options.delayMs ?? 0;
    this.ingestTs = options.ingestTsNanos ?? (() => BigInt(Date.now()) * 1_000_000n);
    this.capacity = options.capacity ?? 1024;
    this.byIndex = this.script.tables.map(() => undefined);
    this.ord = new Int32Array(this.script.tables.length);
    for (const t of tables) {
      const index = this.script.tables.findIndex((s) => s.name === t.ref.source);
      if (index < 0) throw new Error(`scripted source: no script table ${t.ref.source}`);
      if (this.byIndex[index]) throw new Error(`scripted source: table ${t.ref.source} is captured twice`);
      const schema = cdcSchema(t.schema);
      const state: TableState = {
        index,
        target: t.ref.target,
        writeMode: t.writeMode,
        schema,
        hash: schemaHash(schema),
        encoder: this.encoder(schema),
        writers: [],
        codes: columnCodes(schema),
        names: schema.columns.map((c) => c.name),
        scriptSchema: schema,
        scriptHash: '',
        swap: undefined,
        nextStep: -1,
        nextOrd: 0,
        lastStep: -1,
        lastOrd: 0,
      };
      state.writers = this.resolveWriters(state.encoder);
      this.tables.push(state);
      this.byIndex[index] = state;
      this.byTarget.set(t.ref.target, state);
    }
  }

  private encoder(schema: Schema): BatchEncoder {
    return new BatchEncoder(schema, { phase: 'stream', capacity: this.capacity });
  }

  private resolveWriters(enc: BatchEncoder): ColumnWriter[] {
    return enc.schema.columns.map((_, j) => enc.col(j));
  }

  get ended(): boolean {
    return this.done;
  }

  /** The start of the log (step -1: resume after nothing): the scripted server keeps all of it. */
  async initialPosition(): Promise<SourcePosition> {
    return scriptedPosition(-1);
  }

  async start(from: StartFrom, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (this.started) throw new Error('scripted reader: start called twice');
    if (this.closed) throw new Error('scripted reader: closed');
    this.started = true;
    const asked = parseScriptedPosition(from.position);
    const confirmed = await this.server.confirmed();
    const confirmedStep = confirmed === undefined ? -1 : parseScriptedPosition(confirmed);
    let after = asked;
    if (asked < confirmedStep) {
      // The log up to the confirmed position is gone (a purged binlog, an advanced slot).
      this.queued = {
        kind: 'gap',
        reason: `the scripted server's log up to ${confirmed!.display} is gone (confirmed); asked to resume after ${from.position.display ?? from.position.value}`,
        from: from.position,
        to: confirmed,
      };
      after = confirmedStep;
    }
    this.step = after + 1;
    for (const t of this.tables) {
      t.scriptSchema = schemaBefore(this.script, t.index, this.step);
      t.scriptHash = schemaHash(t.scriptSchema);
      const b = nextBound(from.next.get(t.target));
      t.nextStep = b.step;
      t.nextOrd = b.ord;
    }
    if (this.step >= this.script.steps.length && this.queued === undefined) this.done = true;
  }

  async next(_waitMs: number, signal?: AbortSignal): Promise<CdcEvent | undefined> {
    if (this.closed) throw new Error('scripted reader: next after close');
    if (!this.started) throw new Error('scripted reader: next before start');
    signal?.throwIfAborted();
    if (this.delayMs > 0) await sleep(this.delayMs, undefined, signal ? { signal } : undefined);
    for (const t of this.tables) if (t.swap) this.applySwap(t);
    const queued = this.queued;
    if (queued) {
      this.queued = undefined;
      this.done = this.step >= this.script.steps.length;
      return queued;
    }
    const ev = this.produce();
    if (this.step >= this.script.steps.length) this.done = true;
    return ev;
  }

  private applySwap(t: TableState): void {
    if (t.encoder.rowCount > 0) {
      throw new Error(
        `scripted reader: ${t.target} still has ${t.encoder.rowCount} rows in its old schema after a schema event; the engine must cut (or drop) them before asking for the next event`,
      );
    }
    t.encoder = t.swap!;
    t.swap = undefined;
    t.writers = this.resolveWriters(t.encoder);
  }

  /** The next event from the cursor on, or undefined at the end. */
  private produce(): CdcEvent | undefined {
    const steps = this.script.steps;
    while (this.step < steps.length) {
      const n = this.step;
      const st = steps[n]!;
      switch (st.kind) {
        case 'txn': {
          if (st.rolledBack) {
            this.step++;
            continue;
          }
          if (!this.inTxn) {
            this.inTxn = true;
            this.change = st.first;
            this.ord.fill(0);
            this.prefix = rowPosPrefix(n);
            this.commitNs = BigInt(st.commitTimeMs) * 1_000_000n;
            return { kind: 'begin' };
          }
          const ev = this.rows(n, st.first + st.count);
          if (ev) return ev;
          this.inTxn = false;
          this.step++;
          return { kind: 'commit', position: scriptedPosition(n), commitTimeMs: st.commitTimeMs };
        }
        case 'keepalive':
          this.step++;
          return { kind: 'progress', position: scriptedPosition(n) };
        case 'truncate':
        case 'ddl': {
          this.step++;
          const t = this.byIndex[this.script.tables.findIndex((s) => s.name === st.table)];
          if (!t) continue;
          return {
            kind: 'ddl',
            ddl: {
              source: 'scripted',
              kind: st.kind,
              table: t.target,
              detail: st.kind === 'truncate' ? `TRUNCATE ${st.table}` : st.detail,
            },
          };
        }
        case 'add-column':
          this.step++;
          this.addColumn(st.table, st.column);
          continue;
        case 'gap': {
          const lost = Math.min(st.lost, steps.length - 1 - n);
          for (let s = n + 1; s <= n + lost; s++) {
            const l = steps[s]!;
            if (l.kind === 'add-column') this.addColumn(l.table, l.column);
          }
          this.step = n + lost + 1;
          return {
            kind: 'gap',
            reason: st.reason,
            from: n > 0 ? scriptedPosition(n - 1) : undefined,
            to: scriptedPosition(n + lost),
          };
        }
      }
    }
    return undefined;
  }

  private addColumn(table: string, column: Schema['columns'][number]): void {
    const t = this.byIndex[this.script.tables.findIndex((s) => s.name === table)];
    if (!t) return;
    t.scriptSchema = withColumn(t.scriptSchema, column);
    t.scriptHash = schemaHash(t.scriptSchema);
  }

  /**
   * Appends the next run of changes of one captured table (up to `rowsPerEvent` rows) and
   * reports it; a `schema` event first when the table's schema changed; undefined when the
   * transaction has no changes left.
   */
  private rows(step: number, end: number): CdcEvent | undefined {
    const c = this.script.changes;
    const ctable = c.table;
    const cop = c.op;
    const cid = c.id;
    const explicit = c.values;
    const salt = this.script.salt;
    const nullThreshold = this.script.nullThreshold;
    const ord = this.ord;
    const max = this.rowsPerEvent;
    const prefix = this.prefix;
    const commitNs = this.commitNs;
    while (this.change < end) {
      const ti = ctable[this.change]!;
      const t = this.byIndex[ti];
      if (!t) {
        this.change++;
        continue;
      }
      if (t.scriptHash !== t.hash) return this.schemaEvent(t);
      const enc = t.encoder;
      const writers = t.writers;
      const codes = t.codes;
      const ncols = codes.length;
      const bytesBefore = enc.dataBytes;
      let count = 0;
      let g = this.change;
      for (; g < end && count < max && ctable[g] === ti; g++) {
        const o = ord[ti]!;
        ord[ti] = o + 1;
        if (step < t.nextStep || (step === t.nextStep && o < t.nextOrd)) continue;
        const op = cop[g]!;
        const id = cid[g]!;
        const values = explicit?.[g];
        for (let j = 0; j < ncols; j++) {
          const w = writers[j]!;
          const code = codes[j]!;
          if (code === C_KEY) {
            w.appendInt(id);
          } else if (op === OP_DELETE) {
            w.appendNull();
          } else if (values !== undefined) {
            w.appendValue(values[t.names[j]!] ?? null);
          } else {
            const h1 = valueHash1(salt, g, j);
            if (h1 >>> 24 < nullThreshold) {
              w.appendNull();
              continue;
            }
            const h2 = valueHash2(h1);
            switch (code) {
              case C_INT32:
                w.appendInt(h2 | 0);
                break;
              case C_INT64:
                w.appendInt(h2 * 1024 + (h1 & 1023));
                break;
              case C_FLOAT64:
                w.appendFloat64((h2 | 0) / 256);
                break;
              case C_TEXT: {
                const p = h2 & 63;
                w.appendUtf8Bytes(TEXT_POOL_BYTES, TEXT_POOL_OFFSETS[p]!, TEXT_POOL_OFFSETS[p + 1]!);
                break;
              }
              case C_TIMESTAMP:
                w.appendInt(TS_BASE_MICROS + h2 * 1000);
                break;
              case C_BOOL:
                w.appendBool((h2 & 1) === 1);
                break;
              case C_DATE:
                w.appendInt(h2 % 40000);
                break;
              default:
                w.appendNull();
            }
          }
        }
        enc.appendMetaOrdinal(op as OpCode, prefix, o, commitNs, false);
        t.lastStep = step;
        t.lastOrd = o;
        count++;
      }
      this.change = g;
      if (count > 0) return { kind: 'rows', table: t.target, count, bytes: enc.dataBytes - bytesBefore };
    }
    return undefined;
  }

  private schemaEvent(t: TableState): CdcEvent {
    const from = t.schema;
    const to = t.scriptSchema;
    t.schema = to;
    t.hash = t.scriptHash;
    t.codes = columnCodes(to);
    t.names = to.columns.map((c) => c.name);
    const enc = this.encoder(to);
    if (t.encoder.rowCount === 0) {
      t.encoder = enc;
      t.writers = this.resolveWriters(enc);
    } else {
      t.swap = enc;
    }
    return { kind: 'schema', table: t.target, schema: to, changes: compareSchemas(from, to) };
  }

  private state(table: string): TableState {
    const t = this.byTarget.get(table);
    if (!t) throw new Error(`scripted reader: ${table} is not a captured table`);
    return t;
  }

  pending(table: string): PendingRows {
    const enc = this.state(table).encoder;
    return { rows: enc.rowCount, bytes: enc.dataBytes };
  }

  cut(table: string): Batch | undefined {
    const t = this.state(table);
    const enc = t.encoder;
    if (enc.rowCount === 0) return undefined;
    const record = enc.finish(this.ingestTs());
    // finish() leaves the encoder empty with fresh buffers: resolve the writers again.
    if (!t.swap) t.writers = this.resolveWriters(enc);
    return newBatch({
      table: t.target,
      record,
      watermark: rowPos(t.lastStep, t.lastOrd),
      writeMode: t.writeMode,
    });
  }

  async setConfirmed(position: SourcePosition): Promise<void> {
    await this.server.setConfirmed(position);
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

// ---------------------------------------------------------------------------------------------
// The driver registration

/**
 * The scripted driver's registration: a shared/drivers/registry.ts `DriverRegistration` (pass
 * it to `registerDriver`, and a spec with `kind: scripted` runs under the CDC runner).
 */
export interface ScriptedDriverRegistration extends DriverRegistration {
  readonly kind: 'scripted';
  readonly capabilities: Capabilities;
  /** The scripted source serves no incremental tables: always rejects. */
  openIncremental(settings?: unknown): Promise<never>;
  /**
   * A streamer over the script and the server state in `opts.dir` that also introspects: a
   * table's schema is the script's at the server's confirmed position. The settings are ignored.
   */
  openCdc(settings?: unknown): Promise<ClosableCdcSource>;
}

export interface ScriptedDriverOptions {
  readonly script: Script;
  /** The directory of the server's durable state. */
  readonly dir: string;
  readonly reader?: ReaderOptions;
}

function capabilitiesOf(stream: boolean): Capabilities {
  return Object.freeze({
    snapshot: false,
    chunkQuery: false,
    stream,
    maxConnections: 0,
    modes: Object.freeze(['cdc'] as const),
    beforeImage: false,
    monotonicSequence: false,
    recoverablePosition: stream,
  });
}

function registration(opts: ScriptedDriverOptions, stream: boolean): ScriptedDriverRegistration {
  const server = new ScriptedServer(opts.script, opts.dir);
  return {
    kind: 'scripted',
    capabilities: capabilitiesOf(stream),
    openIncremental: async () => {
      throw new Error('the scripted source serves only cdc tables');
    },
    openCdc: async () => ({
      ...server.streamer(opts.reader),
      introspect: async (t) => {
        const index = opts.script.tables.findIndex((x) => x.name === t.source);
        if (index < 0) throw new Error(`scripted source: no script table ${t.source}`);
        const confirmed = await server.confirmed();
        const step = confirmed === undefined ? 0 : parseScriptedPosition(confirmed) + 1;
        const table = opts.script.tables[index]!;
        return {
          ref: { source: table.name, target: t.target ?? table.name, primaryKey: table.schema.primaryKey },
          schema: schemaBefore(opts.script, index, step),
          warnings: [],
        };
      },
      close: async () => undefined,
    }),
  };
}

/** The scripted driver: mode cdc, stream and recoverable position, no before image. */
export function scriptedDriver(opts: ScriptedDriverOptions): ScriptedDriverRegistration {
  return registration(opts, true);
}

/** The same with `stream: false, recoverablePosition: false`, for the engine's capability gate. */
export function scriptedDriverWithoutStream(opts: ScriptedDriverOptions): ScriptedDriverRegistration {
  return registration(opts, false);
}

/** CdcTables for every script table (or the named ones): target = source name, non-key nullable. */
export function scriptCdcTables(
  script: Script,
  options: { readonly writeMode?: WriteMode; readonly only?: readonly string[] } = {},
): CdcTable[] {
  return script.tables
    .filter((t) => !options.only || options.only.includes(t.name))
    .map((t) => ({
      ref: { source: t.name, target: t.name, primaryKey: t.schema.primaryKey },
      schema: cdcSchema(t.schema),
      writeMode: options.writeMode ?? 'upsert',
    }));
}
