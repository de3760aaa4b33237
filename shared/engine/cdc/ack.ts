/**
 * The durable low-water mark of a change stream (docs/decisions/0009-cdc-commit-protocol.md):
 * the position the source may resume from, and be acknowledged up to, given which rows are
 * durable in the lake.
 *
 * Owns that one computation, as pure bookkeeping over counts: per table, how many rows the
 * reader appended since start and how many of those are committed to state; per committed
 * transaction, how many rows of each table it ended at. A transaction is durable once every
 * table it touched is durable past its rows; the resume point is the commit position of the
 * newest transaction that is durable TOGETHER WITH every one before it. A flush may cut inside a
 * transaction (its rows become durable, the resume point does not pass it until its commit is
 * seen and every table is durable past it), so memory is bounded by flush limits, never by the
 * size of a transaction. With nothing pending and no transaction open, a progress position
 * (keepalive, heartbeat) is a resume point too, so a quiet captured table never pins the log.
 *
 * Never does I/O, never reads a clock.
 */
import type { SourcePosition } from '../../contracts/cdc.js';

interface Txn {
  /** Where the stream resumes once this transaction (and all before it) is durable. */
  readonly position: SourcePosition;
  /** Per table, the appended-row count at this transaction's end. */
  readonly ends: ReadonlyMap<string, number>;
}

export class AckTracker {
  private resume: SourcePosition | undefined;
  private readonly appended = new Map<string, number>();
  private readonly durable = new Map<string, number>();
  /** Committed transactions (and progress marks) not yet durable, in log order. */
  private readonly queue: Txn[] = [];
  private open: Map<string, number> | undefined;

  /** `start`: where the stream was started from (undefined on a first start). */
  constructor(start: SourcePosition | undefined) {
    this.resume = start;
  }

  /** The resume point: every change before it is durable. */
  get position(): SourcePosition | undefined {
    return this.resume;
  }

  /** Whether a transaction is open (begun, not yet committed). */
  get inTransaction(): boolean {
    return this.open !== undefined;
  }

  /** Committed transactions whose rows are not all durable yet. */
  get pendingTransactions(): number {
    return this.queue.filter((t) => t.ends.size > 0).length;
  }

  begin(): void {
    if (this.open) throw new Error('a transaction began while another was open');
    this.open = new Map();
  }

  /** `count` rows of `table` were appended in the open transaction. */
  rows(table: string, count: number): void {
    if (!this.open) throw new Error(`rows of ${table} arrived outside a transaction`);
    const n = (this.appended.get(table) ?? 0) + count;
    this.appended.set(table, n);
    this.open.set(table, n);
  }

  /** The open transaction committed; the stream can resume after it from `position`. */
  commit(position: SourcePosition): void {
    if (!this.open) throw new Error('a commit arrived outside a transaction');
    this.queue.push({ position, ends: this.open });
    this.open = undefined;
    this.drain();
  }

  /** Progress without rows: a resume point once everything before it is durable. */
  progress(position: SourcePosition): void {
    if (this.open) return; // inside a transaction a keepalive position is not a safe resume point
    this.queue.push({ position, ends: new Map() });
    this.drain();
  }

  /** Rows appended so far for `table` (what a cut taken now makes durable). */
  appendedRows(table: string): number {
    return this.appended.get(table) ?? 0;
  }

  /** Rows of `table` committed to state so far. */
  durableRows(table: string): number {
    return this.durable.get(table) ?? 0;
  }

  /**
   * The resume point once `marks` (table -> rows durable) are committed too: what a flush cycle
   * commits to state with them, before it applies them with `markDurable`.
   */
  resumeIf(marks: ReadonlyMap<string, number>): SourcePosition | undefined {
    let resume = this.resume;
    for (const t of this.queue) {
      if (!this.isDurable(t, marks)) break;
      resume = t.position;
    }
    return resume;
  }

  /** Records `marks` (table -> rows durable) as committed to state. */
  markDurable(marks: ReadonlyMap<string, number>): void {
    for (const [table, n] of marks) {
      if (n > (this.appended.get(table) ?? 0)) throw new Error(`${table}: more rows durable than appended`);
      if (n > (this.durable.get(table) ?? 0)) this.durable.set(table, n);
    }
    this.drain();
  }

  private isDurable(t: Txn, marks?: ReadonlyMap<string, number>): boolean {
    for (const [table, end] of t.ends) {
      const d = Math.max(this.durable.get(table) ?? 0, marks?.get(table) ?? 0);
      if (d < end) return false;
    }
    return true;
  }

  private drain(): void {
    while (this.queue.length > 0 && this.isDurable(this.queue[0]!))
      this.resume = this.queue.shift()!.position;
  }
}
