/**
 * The scripted CDC source's log model (issue 10 item 7): a Script is a deterministic log of
 * steps (transactions over several tables, rolled-back work, keepalives, truncates, DDL, added
 * columns, gaps), generated from a seed and parameters or built by hand, plus the model of what
 * it means: `expectedLake` (latest row per key, deletes applied) and `allChanges` (every
 * committed change with its `__pos`). The reader over it is scripted-source.ts.
 *
 * Step numbers are array indexes: step N is `script.steps[N]`. A transaction's commit position is
 * its step number, so its rows carry `__pos = pgPosition(BigInt(N), ordinal)` with `ordinal` the
 * index of the change among that transaction's changes to that table.
 *
 * Interleaving: a transaction's changes may alternate between tables (each table's ordinals
 * count on independently). Concurrent transactions reach a logical decoding client whole, in
 * commit order (pgoutput without streaming, a binlog), so the model has no interleaving between
 * transactions: one step is one committed (or rolled-back) transaction.
 *
 * Memory: changes are packed into typed arrays (table, op, key; about 11 bytes a change) and row
 * values are DERIVED from the change's global index and the column index by integer hashing
 * (`deriveValue`), so a million generated changes cost ~11 MB and no per-row objects. Hand-built
 * changes may give explicit values instead.
 *
 * Test-only: nothing under shared/ imports this.
 */
import fc from 'fast-check';
import type { Column, LogicalType, Schema } from '../../shared/dataplane/schema.js';
import { pgPosition } from '../../shared/position/position.js';

// ---------------------------------------------------------------------------------------------
// Types

/** One table of a script: its source name (`public.t0`) and its schema at step 0. */
export interface ScriptTable {
  readonly name: string;
  /** One primary-key column of type int64 or int32; non-key columns are nullable (see `cdcSchema`). */
  readonly schema: Schema;
}

/** Change kinds as the script spells them. */
export type ChangeOp = 'insert' | 'update' | 'delete';
/** Wire op codes (shared/dataplane/metadata.ts `Op`): insert 0 (c), update 1 (u), delete 2 (d). */
export const OP_INSERT = 0;
export const OP_UPDATE = 1;
export const OP_DELETE = 2;

/** A step of a normalized script (the step number is its index). */
export type Step =
  /**
   * A transaction: changes `first .. first+count-1` of `script.changes`. A rolled-back one is in
   * the script (it used a step number and maybe key values) but never reaches the log.
   */
  | {
      readonly kind: 'txn';
      readonly first: number;
      readonly count: number;
      readonly commitTimeMs: number;
      readonly rolledBack: boolean;
    }
  /** A keepalive between transactions: delivered as `progress` at this step's position. */
  | { readonly kind: 'keepalive' }
  /** TRUNCATE of a table: delivered as a `ddl` event (kind truncate). */
  | { readonly kind: 'truncate'; readonly table: string }
  /** Other destructive DDL on a table: delivered as a `ddl` event (kind ddl). */
  | { readonly kind: 'ddl'; readonly table: string; readonly detail: string }
  /**
   * A column added to a table (at the end of its columns, nullable). Like a pgoutput Relation
   * message, the reader delivers the `schema` event just before the table's next row, not here.
   */
  | { readonly kind: 'add-column'; readonly table: string; readonly column: Column }
  /**
   * The source lost part of its log: delivered as a `gap` event; the next `lost` steps are not
   * delivered (they happened at the source: `expectedLake(..., { includeLost: true })`).
   */
  | { readonly kind: 'gap'; readonly reason: string; readonly lost: number };

export type StepKind = Step['kind'];

/** The packed changes of a script, indexed by global change index. */
export interface PackedChanges {
  readonly length: number;
  /** Index into `script.tables`. */
  readonly table: Uint16Array;
  /** OP_INSERT / OP_UPDATE / OP_DELETE. */
  readonly op: Uint8Array;
  /** Primary-key value (a safe integer). */
  readonly id: Float64Array;
  /**
   * Explicit non-key values of hand-built changes (column name -> value-universe value; a
   * missing column is NULL); undefined entries (or no array at all) mean derived values.
   */
  readonly values: readonly (Readonly<Record<string, unknown>> | undefined)[] | undefined;
}

/** A normalized script: what the server and reader run over. */
export interface Script {
  readonly tables: readonly ScriptTable[];
  readonly steps: readonly Step[];
  readonly changes: PackedChanges;
  /** Salt of derived values (from the seed). */
  readonly salt: number;
  /** Derived non-key values are NULL when the top byte of their hash is below this (0..256). */
  readonly nullThreshold: number;
}

/** A change of a hand-built transaction. */
export interface ChangeInput {
  readonly table: string;
  readonly op: ChangeOp;
  readonly id: number;
  /** Non-key values (value universe of schema.ts; missing = NULL). Omitted: derived values. */
  readonly values?: Readonly<Record<string, unknown>>;
}

/** A step of a hand-built script. */
export type StepInput =
  | {
      readonly kind: 'txn';
      readonly changes: readonly ChangeInput[];
      /** Default: 1_700_000_000_000 + step * 1000. */
      readonly commitTimeMs?: number;
      readonly rolledBack?: boolean;
    }
  | { readonly kind: 'keepalive' }
  | { readonly kind: 'truncate'; readonly table: string }
  | { readonly kind: 'ddl'; readonly table: string; readonly detail?: string }
  | { readonly kind: 'add-column'; readonly table: string; readonly column: Column }
  | { readonly kind: 'gap'; readonly reason?: string; readonly lost?: number };

export interface ScriptInput {
  readonly tables: readonly ScriptTable[];
  readonly steps: readonly StepInput[];
  /** Salt of derived values (default 1). */
  readonly seed?: number;
  /** Fraction (0..1) of derived non-key values that are NULL (default 0.1). */
  readonly nullFraction?: number;
}

// ---------------------------------------------------------------------------------------------
// Tables and schemas

/** The non-key column types the generator draws from. */
export type GeneratedType = 'int32' | 'text' | 'float64' | 'timestamp';
const GENERATED_TYPES: readonly GeneratedType[] = ['int32', 'text', 'float64', 'timestamp'];
const SOURCE_TYPES: Record<GeneratedType, string> = {
  int32: 'integer',
  text: 'text',
  float64: 'double precision',
  timestamp: 'timestamp with time zone',
};

/** The logical type of a generated column type. */
export function generatedLogicalType(t: GeneratedType): LogicalType {
  return t === 'timestamp' ? { kind: 'timestamp', utc: true } : { kind: t };
}

/** A nullable column of a generated type. */
export function scriptColumn(name: string, type: GeneratedType): Column {
  return { name, type: generatedLogicalType(type), nullable: true, sourceType: SOURCE_TYPES[type] };
}

/** A table with an int64 key `id` and the given nullable columns, e.g. `scriptTable('public.a', [['n', 'int32']])`. */
export function scriptTable(
  name: string,
  columns: readonly (readonly [string, GeneratedType])[],
): ScriptTable {
  return {
    name,
    schema: {
      columns: [
        { name: 'id', type: { kind: 'int64' }, nullable: false, sourceType: 'bigint' },
        ...columns.map(([n, t]) => scriptColumn(n, t)),
      ],
      primaryKey: ['id'],
    },
  };
}

/**
 * The schema as a CDC reader writes it: every non-key column nullable (under Postgres' default
 * replica identity a DELETE carries only the key, so the other columns of a delete row are NULL).
 * Returns `schema` itself when it is already so.
 */
export function cdcSchema(schema: Schema): Schema {
  const key = new Set(schema.primaryKey);
  if (schema.columns.every((c) => c.nullable || key.has(c.name))) return schema;
  return {
    columns: schema.columns.map((c) => (c.nullable || key.has(c.name) ? c : { ...c, nullable: true })),
    primaryKey: schema.primaryKey,
  };
}

/** The table's schema just before step `step` (its step-0 schema plus the columns added before). */
export function schemaBefore(script: Script, tableIndex: number, step: number): Schema {
  const table = script.tables[tableIndex]!;
  let schema = cdcSchema(table.schema);
  const end = Math.min(step, script.steps.length);
  for (let s = 0; s < end; s++) {
    const st = script.steps[s]!;
    if (st.kind === 'add-column' && st.table === table.name) schema = withColumn(schema, st.column);
  }
  return schema;
}

export function withColumn(schema: Schema, column: Column): Schema {
  return { columns: [...schema.columns, { ...column, nullable: true }], primaryKey: schema.primaryKey };
}

/** The index of a table in the script, or -1. */
export function tableIndex(script: Script, name: string): number {
  return script.tables.findIndex((t) => t.name === name);
}

function checkTable(t: ScriptTable): void {
  const pk = t.schema.primaryKey;
  if (pk.length !== 1) throw new Error(`script table ${t.name}: needs exactly one primary-key column`);
  const key = t.schema.columns.find((c) => c.name === pk[0]);
  if (!key || (key.type.kind !== 'int64' && key.type.kind !== 'int32')) {
    throw new Error(`script table ${t.name}: the primary key ${pk[0]} must be an int64 or int32 column`);
  }
}

// ---------------------------------------------------------------------------------------------
// Positions

/** The scheme of the scripted source's `SourcePosition`s. */
export const SCRIPTED_SCHEME = 'scripted';

/** The `__pos` prefix of the rows of the transaction committed at `step` (`p` + 16 hex digits). */
export function rowPosPrefix(step: number): string {
  return pgPosition(BigInt(step), 0).slice(0, 17);
}

/** `__pos` of change `ordinal` (per transaction and table) of the transaction at `step`. */
export function rowPos(step: number, ordinal: number): string {
  return pgPosition(BigInt(step), ordinal);
}

// ---------------------------------------------------------------------------------------------
// Derived values

/** A 32-bit integer hash (murmur3's finalizer). */
export function mix32(x: number): number {
  let h = x | 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Text values of derived text columns: ASCII, empty, multi-byte and 4-byte UTF-8 among them. */
export const TEXT_POOL: readonly string[] = (() => {
  const words = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta'];
  const odd = ['', 'grüße', '日本語のテキスト', 'emoji 🦀🐘', 'quote \' and " \\', 'tab\tnew\nline', 'ß'];
  const out: string[] = [...odd];
  for (let i = 0; out.length < 64; i++) out.push(`${words[i % words.length]}-${i}${'x'.repeat(i % 23)}`);
  return out;
})();
/** TEXT_POOL as one UTF-8 buffer: entry i is bytes TEXT_POOL_OFFSETS[i] .. TEXT_POOL_OFFSETS[i+1]. */
export const TEXT_POOL_BYTES: Buffer = Buffer.from(TEXT_POOL.join(''), 'utf8');
export const TEXT_POOL_OFFSETS: Int32Array = (() => {
  const o = new Int32Array(TEXT_POOL.length + 1);
  for (let i = 0; i < TEXT_POOL.length; i++) o[i + 1] = o[i]! + Buffer.byteLength(TEXT_POOL[i]!, 'utf8');
  return o;
})();
const POOL_MASK = 63;

/** Microseconds of 2023-11-14: the base of derived timestamps. */
export const TS_BASE_MICROS = 1_700_000_000_000_000;

/** First hash of a derived value: its top byte decides NULL. */
export function valueHash1(salt: number, change: number, column: number): number {
  return mix32(salt ^ Math.imul(change + 1, 0x9e3779b1) ^ Math.imul(column + 1, 0x27d4eb2f));
}
/** Second hash of a derived value: its bits make the value. */
export function valueHash2(h1: number): number {
  return mix32(h1 + 0x6a09e667);
}

/**
 * The derived value (value universe of schema.ts) of non-key column `column` (index in the
 * table's columns) of change `change`; NULL for a delete. The reader writes the same values
 * through raw appenders (scripted-source.ts): the two must stay in step.
 */
export function deriveValue(script: Script, change: number, column: number, type: LogicalType): unknown {
  const h1 = valueHash1(script.salt, change, column);
  if (h1 >>> 24 < script.nullThreshold) return null;
  const h2 = valueHash2(h1);
  switch (type.kind) {
    case 'int32':
      return h2 | 0;
    case 'int64':
      return BigInt(h2 * 1024 + (h1 & 1023));
    case 'float64':
      return (h2 | 0) / 256;
    case 'text':
      return TEXT_POOL[h2 & POOL_MASK]!;
    case 'timestamp':
      return BigInt(TS_BASE_MICROS + h2 * 1000);
    case 'bool':
      return (h2 & 1) === 1;
    case 'date':
      return h2 % 40000;
    default:
      return null;
  }
}

// ---------------------------------------------------------------------------------------------
// Hand-built scripts

const DEFAULT_COMMIT_BASE_MS = 1_700_000_000_000;

function nullThresholdOf(fraction: number | undefined): number {
  const f = fraction ?? 0.1;
  if (!(f >= 0 && f <= 1)) throw new Error(`nullFraction ${f} is not in 0..1`);
  return Math.round(f * 256);
}

/** Normalizes a hand-built script (a plain array of steps) into a `Script`. */
export function buildScript(input: ScriptInput): Script {
  input.tables.forEach(checkTable);
  const names = new Map(input.tables.map((t, i) => [t.name, i]));
  if (names.size !== input.tables.length) throw new Error('script tables must have distinct names');
  const tableOf = (name: string, where: string): number => {
    const i = names.get(name);
    if (i === undefined) throw new Error(`${where}: no script table ${name}`);
    return i;
  };
  const table: number[] = [];
  const op: number[] = [];
  const id: number[] = [];
  const values: (Readonly<Record<string, unknown>> | undefined)[] = [];
  let explicit = false;
  const steps: Step[] = input.steps.map((s, n): Step => {
    switch (s.kind) {
      case 'txn': {
        const first = table.length;
        for (const c of s.changes) {
          table.push(tableOf(c.table, `step ${n}`));
          op.push(c.op === 'insert' ? OP_INSERT : c.op === 'update' ? OP_UPDATE : OP_DELETE);
          if (!Number.isSafeInteger(c.id)) throw new Error(`step ${n}: key ${c.id} is not a safe integer`);
          id.push(c.id);
          values.push(c.values);
          if (c.values) explicit = true;
        }
        return {
          kind: 'txn',
          first,
          count: s.changes.length,
          commitTimeMs: s.commitTimeMs ?? DEFAULT_COMMIT_BASE_MS + n * 1000,
          rolledBack: s.rolledBack ?? false,
        };
      }
      case 'ddl':
        tableOf(s.table, `step ${n}`);
        return { kind: 'ddl', table: s.table, detail: s.detail ?? `ALTER TABLE ${s.table} ...` };
      case 'gap':
        return { kind: 'gap', reason: s.reason ?? 'scripted gap', lost: s.lost ?? 0 };
      case 'truncate':
      case 'add-column':
        tableOf(s.table, `step ${n}`);
        return s;
      default:
        return s;
    }
  });
  return {
    tables: input.tables,
    steps,
    changes: {
      length: table.length,
      table: Uint16Array.from(table),
      op: Uint8Array.from(op),
      id: Float64Array.from(id),
      values: explicit ? values : undefined,
    },
    salt: mix32(input.seed ?? 1),
    nullThreshold: nullThresholdOf(input.nullFraction),
  };
}

// ---------------------------------------------------------------------------------------------
// Generated scripts

/** A step the generator inserts before a given transaction. */
export type InjectedStep = Exclude<StepInput, { kind: 'txn' }>;

/** The parameters of a generated script (defaults in brackets). */
export interface ScriptParams {
  readonly seed: number;
  /** Number of tables `public.t0`.. [3]. */
  readonly tables?: number;
  /** Non-key columns per table, drawn from int32/text/float64/timestamp [1..4]. */
  readonly columns?: { readonly min: number; readonly max: number };
  /** Transactions, rolled-back ones included [50]. Ignored when `changes` is given. */
  readonly transactions?: number;
  /** Generate committed transactions until exactly this many committed changes exist. */
  readonly changes?: number;
  /** Changes per ordinary transaction [1..8]. */
  readonly txnSize?: { readonly min: number; readonly max: number };
  /** Fraction of transactions that are huge [0.02], of `hugeSize` changes [500..2000]. */
  readonly hugeFraction?: number;
  readonly hugeSize?: { readonly min: number; readonly max: number };
  /** Relative weights of inserts, updates and deletes [5, 3, 2]. */
  readonly ops?: { readonly insert: number; readonly update: number; readonly delete: number };
  /** Probability that the next change of a transaction goes to another table [0.3]. */
  readonly interleave?: number;
  /** Fraction of transactions rolled back (never delivered) [0.1]. */
  readonly rollbackFraction?: number;
  /** Probability of a keepalive step after a transaction [0.1]. */
  readonly keepaliveFraction?: number;
  /** Fraction of derived non-key values that are NULL [0.1]. */
  readonly nullFraction?: number;
  /** Commit time of the first transaction [1_700_000_000_000]; each next one is 1..5 ms later. */
  readonly startTimeMs?: number;
  /** Extra steps (DDL, truncate, added columns, gaps, keepalives) before transaction `beforeTxn`. */
  readonly inject?: readonly { readonly beforeTxn: number; readonly step: InjectedStep }[];
}

/** A small fast PRNG (mulberry32) over 32-bit state: uniform in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A growable typed array. */
class Grow<T extends Uint16Array | Uint8Array | Float64Array> {
  length = 0;
  constructor(
    public data: T,
    private readonly make: (n: number) => T,
  ) {}
  push(v: number): void {
    if (this.length === this.data.length) {
      const next = this.make(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.length++] = v;
  }
  done(): T {
    return this.data.slice(0, this.length) as T;
  }
}

/** Live keys of one table: O(1) add, remove and random pick (keys are small positive integers). */
class KeySet {
  private keys = new Float64Array(64);
  private n = 0;
  /** Index of key k in `keys`, by key. */
  private at = new Int32Array(64);
  get size(): number {
    return this.n;
  }
  add(k: number): void {
    if (this.n === this.keys.length) {
      const grown = new Float64Array(this.n * 2);
      grown.set(this.keys);
      this.keys = grown;
    }
    if (k >= this.at.length) {
      const grown = new Int32Array(Math.max(k + 1, this.at.length * 2));
      grown.set(this.at);
      this.at = grown;
    }
    this.at[k] = this.n;
    this.keys[this.n++] = k;
  }
  pick(r: number): number {
    return this.keys[Math.floor(r * this.n)]!;
  }
  remove(k: number): void {
    const i = this.at[k]!;
    const last = this.keys[--this.n]!;
    if (last !== k) {
      this.keys[i] = last;
      this.at[last] = i;
    }
  }
}

const range = (r: () => number, min: number, max: number): number => min + Math.floor(r() * (max - min + 1));

/**
 * Generates a script deterministically from `params` (same params, same script, in any process):
 * tables `public.t0..` with an int64 key `id` and nullable int32/text/float64/timestamp columns;
 * transactions of mixed inserts, updates and deletes over several tables (updates and deletes hit
 * live keys; a key may change several times in one transaction), some huge, some rolled back
 * (inserts, updates, never delivered: their keys are used up, as a sequence's would be);
 * keepalives between some transactions; `inject`ed steps where asked.
 */
export function generateScript(params: ScriptParams): Script {
  const r = prng(params.seed);
  const tableCount = params.tables ?? 3;
  if (!(tableCount >= 1 && tableCount <= 65535)) throw new Error(`tables ${tableCount} out of 1..65535`);
  const cols = params.columns ?? { min: 1, max: 4 };
  const tables: ScriptTable[] = [];
  for (let t = 0; t < tableCount; t++) {
    const n = range(r, cols.min, cols.max);
    const extra: [string, GeneratedType][] = [];
    for (let j = 0; j < n; j++) {
      const type = GENERATED_TYPES[Math.floor(r() * GENERATED_TYPES.length)]!;
      extra.push([`${type === 'timestamp' ? 'ts' : type}_${j + 1}`, type]);
    }
    tables.push(scriptTable(`public.t${t}`, extra));
  }
  const size = params.txnSize ?? { min: 1, max: 8 };
  const huge = params.hugeSize ?? { min: 500, max: 2000 };
  const hugeFraction = params.hugeFraction ?? 0.02;
  const w = params.ops ?? { insert: 5, update: 3, delete: 2 };
  const wSum = w.insert + w.update + w.delete;
  if (!(wSum > 0)) throw new Error('ops weights must add up to more than 0');
  const interleave = params.interleave ?? 0.3;
  const rollback = params.rollbackFraction ?? 0.1;
  const keepalive = params.keepaliveFraction ?? 0.1;
  let commitMs = params.startTimeMs ?? DEFAULT_COMMIT_BASE_MS;
  const target = params.changes;
  const txnCount = target === undefined ? (params.transactions ?? 50) : Number.POSITIVE_INFINITY;
  if (target !== undefined && target > 0 && rollback >= 1)
    throw new Error('rollbackFraction 1 commits nothing');

  const cap = Math.max(1024, Math.min(target ?? 0, 1 << 26));
  const table = new Grow(new Uint16Array(cap), (n) => new Uint16Array(n));
  const op = new Grow(new Uint8Array(cap), (n) => new Uint8Array(n));
  const id = new Grow(new Float64Array(cap), (n) => new Float64Array(n));
  const live = tables.map(() => new KeySet());
  const nextId = tables.map(() => 1);
  const steps: Step[] = [];
  const injected = [...(params.inject ?? [])].sort((a, b) => a.beforeTxn - b.beforeTxn);
  for (const { step } of injected) {
    if ('table' in step && !tables.some((t) => t.name === step.table)) {
      throw new Error(
        `injected ${step.kind} names ${step.table}, not one of the ${tableCount} generated tables`,
      );
    }
  }
  let inj = 0;
  const inject = (upTo: number): void => {
    for (; inj < injected.length && injected[inj]!.beforeTxn <= upTo; inj++) {
      const s = injected[inj]!.step;
      steps.push(
        s.kind === 'ddl'
          ? { kind: 'ddl', table: s.table, detail: s.detail ?? `ALTER TABLE ${s.table} ...` }
          : s.kind === 'gap'
            ? { kind: 'gap', reason: s.reason ?? 'scripted gap', lost: s.lost ?? 0 }
            : s,
      );
    }
  };
  let committed = 0;
  for (let n = 0; n < txnCount && (target === undefined || committed < target); n++) {
    inject(n);
    let count = r() < hugeFraction ? range(r, huge.min, huge.max) : range(r, size.min, size.max);
    const rolledBack = r() < rollback;
    if (target !== undefined && !rolledBack) count = Math.min(count, target - committed);
    const first = table.length;
    let t = Math.floor(r() * tableCount);
    for (let k = 0; k < count; k++) {
      if (k > 0 && tableCount > 1 && r() < interleave)
        t = (t + 1 + Math.floor(r() * (tableCount - 1))) % tableCount;
      const keys = live[t]!;
      const x = r() * wSum;
      let o = x < w.insert ? OP_INSERT : x < w.insert + w.update ? OP_UPDATE : OP_DELETE;
      if (rolledBack && o === OP_DELETE) o = OP_UPDATE;
      if (keys.size === 0) o = OP_INSERT;
      let key: number;
      if (o === OP_INSERT) {
        key = nextId[t]!++;
        if (!rolledBack) keys.add(key);
      } else {
        key = keys.pick(r());
        if (o === OP_DELETE) keys.remove(key);
      }
      table.push(t);
      op.push(o);
      id.push(key);
    }
    if (!rolledBack) committed += count;
    steps.push({ kind: 'txn', first, count, commitTimeMs: commitMs, rolledBack });
    commitMs += 1 + Math.floor(r() * 5);
    if (r() < keepalive) steps.push({ kind: 'keepalive' });
  }
  inject(Number.POSITIVE_INFINITY);
  return {
    tables,
    steps,
    changes: { length: table.length, table: table.done(), op: op.done(), id: id.done(), values: undefined },
    salt: mix32(params.seed ^ 0x5bd1e995),
    nullThreshold: nullThresholdOf(params.nullFraction),
  };
}

/** Limits of `scriptParamsArbitrary` (small by default, so a property run stays fast). */
export interface ScriptArbitraryLimits {
  readonly maxTables?: number;
  readonly maxTransactions?: number;
  readonly maxTxnSize?: number;
  readonly maxHugeSize?: number;
  /** Also inject added columns, truncates and DDL [true]. */
  readonly events?: boolean;
  /** Also inject gaps (they lose steps: expectedLake then differs from the source's truth) [false]. */
  readonly gaps?: boolean;
}

/** fast-check: parameters of a generated script (shrinks toward fewer, smaller transactions). */
export function scriptParamsArbitrary(limits: ScriptArbitraryLimits = {}): fc.Arbitrary<ScriptParams> {
  const maxTables = limits.maxTables ?? 4;
  const maxTxns = limits.maxTransactions ?? 40;
  const maxSize = limits.maxTxnSize ?? 8;
  const maxHuge = limits.maxHugeSize ?? 300;
  const events = limits.events ?? true;
  const injected: fc.Arbitrary<InjectedStep>[] = [fc.constant({ kind: 'keepalive' } as const)];
  if (events) {
    const table = fc.nat({ max: maxTables - 1 }).map((t) => `public.t${t}`);
    injected.push(
      table.map((t) => ({ kind: 'truncate', table: t }) as const),
      table.map((t) => ({ kind: 'ddl', table: t, detail: `ALTER TABLE ${t} DROP CONSTRAINT c` }) as const),
      fc
        .tuple(table, fc.constantFrom(...GENERATED_TYPES), fc.nat({ max: 1_000_000 }))
        .map(
          ([t, type, n]) =>
            ({ kind: 'add-column', table: t, column: scriptColumn(`added_${n}`, type) }) as const,
        ),
    );
  }
  if (limits.gaps) {
    injected.push(
      fc.nat({ max: 3 }).map((lost) => ({ kind: 'gap', reason: 'scripted gap (property)', lost }) as const),
    );
  }
  return fc
    .record({
      seed: fc.integer(),
      tables: fc.integer({ min: 1, max: maxTables }),
      transactions: fc.nat({ max: maxTxns }),
      txnMax: fc.integer({ min: 1, max: maxSize }),
      hugeFraction: fc.constantFrom(0, 0.05, 0.2),
      hugeMax: fc.integer({ min: 20, max: Math.max(20, maxHuge) }),
      rollbackFraction: fc.constantFrom(0, 0.1, 0.3),
      keepaliveFraction: fc.constantFrom(0, 0.2),
      interleave: fc.constantFrom(0, 0.3, 0.8),
      deleteWeight: fc.constantFrom(0, 1, 3),
      inject: fc.array(fc.record({ beforeTxn: fc.nat({ max: maxTxns }), step: fc.oneof(...injected) }), {
        maxLength: 4,
      }),
    })
    .map(
      (p): ScriptParams => ({
        seed: p.seed,
        tables: p.tables,
        transactions: p.transactions,
        txnSize: { min: 1, max: p.txnMax },
        hugeFraction: p.hugeFraction,
        hugeSize: { min: 10, max: p.hugeMax },
        rollbackFraction: p.rollbackFraction,
        keepaliveFraction: p.keepaliveFraction,
        interleave: p.interleave,
        ops: { insert: 4, update: 3, delete: p.deleteWeight },
        // Injected steps name a table of the drawn count; an added column's name must be new in
        // its table: repeats are dropped.
        inject: p.inject
          .map((x) => ({ ...x, step: onTable(x.step, p.tables) }))
          .filter(
            (x, i, all) =>
              x.step.kind !== 'add-column' ||
              all.findIndex(
                (y) =>
                  y.step.kind === 'add-column' &&
                  y.step.table === (x.step as { table: string }).table &&
                  y.step.column.name === (x.step as { column: Column }).column.name,
              ) === i,
          ),
      }),
    );
}

/** `step` moved to table `public.t<i mod tables>` when it names one. */
function onTable(step: InjectedStep, tables: number): InjectedStep {
  if (!('table' in step)) return step;
  const i = Number(step.table.slice('public.t'.length));
  return { ...step, table: `public.t${i % tables}` };
}

/** fast-check: a generated script (see `scriptParamsArbitrary`). */
export function scriptArbitrary(limits: ScriptArbitraryLimits = {}): fc.Arbitrary<Script> {
  return scriptParamsArbitrary(limits).map(generateScript);
}

// ---------------------------------------------------------------------------------------------
// The model

/** A lake row: the data columns of the schema it was written in, plus `__pos` and `__op` (c/u). */
export type LakeRow = Readonly<Record<string, unknown>>;
/** Per table (name), per primary key (decimal text), the latest row. */
export type LakeTables = Map<string, Map<string, LakeRow>>;

/** One committed change as the model knows it. */
export interface ChangeRecord {
  readonly table: string;
  /** The primary key as decimal text. */
  readonly pk: string;
  readonly pos: string;
  readonly op: 'c' | 'u' | 'd';
  /** Data columns of the schema at the change (a delete: the key, NULL elsewhere). */
  readonly values: Readonly<Record<string, unknown>>;
}

export interface ModelOptions {
  /** Only steps up to and including this step number (default: all). */
  readonly upTo?: number;
  /** Only steps after this step number (default: from step 0). */
  readonly after?: number;
  /** Include the steps a scripted gap lost (the source's truth) [false: what a reader delivers]. */
  readonly includeLost?: boolean;
  /** A truncate empties the table (an engine that applies truncates) ['ignore': rows only]. */
  readonly truncate?: 'ignore' | 'clear';
}

const LETTERS = ['c', 'u', 'd'] as const;

/** Calls `fn` for each delivered committed change in log order, with its step, ordinal and schema. */
export function forEachChange(
  script: Script,
  fn: (change: number, step: number, ordinal: number, schema: Schema, tableIndex: number) => void,
  options: ModelOptions = {},
  onTruncate?: (tableIndex: number) => void,
): void {
  const schemas = script.tables.map((t) => cdcSchema(t.schema));
  const ord = new Int32Array(script.tables.length);
  const upTo = Math.min(options.upTo ?? script.steps.length - 1, script.steps.length - 1);
  const after = options.after ?? -1;
  for (let s = 0; s <= upTo; s++) {
    const st = script.steps[s]!;
    if (st.kind === 'add-column') {
      const t = tableIndex(script, st.table);
      schemas[t] = withColumn(schemas[t]!, st.column);
      continue;
    }
    if (s <= after) continue;
    if (st.kind === 'gap' && !options.includeLost) {
      // The lost steps' added columns still count: the schema is the source's.
      for (let x = s + 1; x <= Math.min(s + st.lost, upTo); x++) {
        const lost = script.steps[x]!;
        if (lost.kind === 'add-column') {
          const t = tableIndex(script, lost.table);
          schemas[t] = withColumn(schemas[t]!, lost.column);
        }
      }
      s += st.lost;
      continue;
    }
    if (st.kind === 'truncate') {
      onTruncate?.(tableIndex(script, st.table));
      continue;
    }
    if (st.kind !== 'txn' || st.rolledBack) continue;
    ord.fill(0);
    const c = script.changes;
    for (let g = st.first; g < st.first + st.count; g++) {
      const t = c.table[g]!;
      fn(g, s, ord[t]!++, schemas[t]!, t);
    }
  }
}

/** The data values of change `g` in `schema` (a delete: the key, NULL elsewhere). */
export function changeValues(script: Script, g: number, schema: Schema): Record<string, unknown> {
  const c = script.changes;
  const key = schema.primaryKey[0]!;
  const explicit = c.values?.[g];
  const out: Record<string, unknown> = {};
  schema.columns.forEach((col, j) => {
    if (col.name === key) out[col.name] = col.type.kind === 'int64' ? BigInt(c.id[g]!) : c.id[g]!;
    else if (c.op[g] === OP_DELETE) out[col.name] = null;
    else if (explicit) out[col.name] = explicit[col.name] ?? null;
    else out[col.name] = deriveValue(script, g, j, col.type);
  });
  return out;
}

/** Every delivered committed change as (table, pk, __pos, op, values), in log order. A number is `{ upTo }`. */
export function allChanges(script: Script, options: ModelOptions | number = {}): ChangeRecord[] {
  const opts = typeof options === 'number' ? { upTo: options } : options;
  const out: ChangeRecord[] = [];
  forEachChange(
    script,
    (g, step, ordinal, schema, t) => {
      out.push({
        table: script.tables[t]!.name,
        pk: String(script.changes.id[g]!),
        pos: rowPos(step, ordinal),
        op: LETTERS[script.changes.op[g]!]!,
        values: changeValues(script, g, schema),
      });
    },
    opts,
  );
  return out;
}

/**
 * What the lake must reconstruct to: per table, the latest row per primary key by commit order
 * (the greatest `__pos`), deletes applied; each row in the schema it was written in, with its
 * `__pos` and `__op`. Every script table is present (maybe empty). A number is `{ upTo }`.
 */
export function expectedLake(script: Script, upToOrOptions: ModelOptions | number = {}): LakeTables {
  const options = typeof upToOrOptions === 'number' ? { upTo: upToOrOptions } : upToOrOptions;
  const latest = script.tables.map(() => new Map<number, { g: number; pos: string; schema: Schema }>());
  forEachChange(
    script,
    (g, step, ordinal, schema, t) => {
      const id = script.changes.id[g]!;
      if (script.changes.op[g] === OP_DELETE) latest[t]!.delete(id);
      else latest[t]!.set(id, { g, pos: rowPos(step, ordinal), schema });
    },
    options,
    (t) => {
      if (options.truncate === 'clear') latest[t]!.clear();
    },
  );
  const lake: LakeTables = new Map();
  script.tables.forEach((table, t) => {
    const rows = new Map<string, LakeRow>();
    for (const [id, v] of latest[t]!) {
      rows.set(String(id), {
        ...changeValues(script, v.g, v.schema),
        __pos: v.pos,
        __op: LETTERS[script.changes.op[v.g]!]!,
      });
    }
    lake.set(table.name, rows);
  });
  return lake;
}

/** Committed changes delivered by the script (its size for throughput figures). */
export function committedChangeCount(script: Script): number {
  let n = 0;
  forEachChange(script, () => {
    n++;
  });
  return n;
}
