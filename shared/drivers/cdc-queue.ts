/**
 * The message queue both change-stream readers keep between their client's callbacks and the
 * engine's `next` (a pgoutput CopyData chunk, a zongji binlog event): items in arrival order,
 * backpressure on the source while the engine is behind, and a wait that ends when an item (or
 * an error, or the end) arrives.
 *
 * Owns: the high/low water marks (pause at `high` queued items, resume at `low`), the index-based
 * queue (no shift per item) and the wake-up. Never interprets an item.
 */

/** What the queue pauses and resumes (a Readable, a mysql2 connection). */
export interface Pausable {
  pause(): void;
  resume(): void;
}

export class StreamQueue<T> {
  private items: T[] = [];
  private head = 0;
  private paused = false;
  private wake: (() => void) | undefined;
  /** How many times the source was paused (tests and logs read it). */
  pauses = 0;

  constructor(
    private readonly high = 4096,
    private readonly low = 1024,
  ) {}

  /** The source to pause; set once the stream exists. */
  source: Pausable | undefined;

  /** Appends an item, pausing the source at the high-water mark, and wakes a waiting `wait`. */
  push(item: T): void {
    this.items.push(item);
    if (!this.paused && this.items.length - this.head >= this.high) {
      this.paused = true;
      this.pauses++;
      this.source?.pause();
    }
    this.notify();
  }

  /** Wakes a waiting `wait` without an item (an error, the end of the stream). */
  notify(): void {
    this.wake?.();
  }

  /** The next item, or undefined when none is queued; resumes the source at the low-water mark. */
  take(): T | undefined {
    if (this.head >= this.items.length) {
      if (this.head > 0) {
        this.items = [];
        this.head = 0;
      }
      return undefined;
    }
    const item = this.items[this.head++]!;
    if (this.paused && this.items.length - this.head <= this.low) {
      this.paused = false;
      this.source?.resume();
    }
    return item;
  }

  /** Puts the item `take` just returned back in front. */
  unread(): void {
    this.head--;
  }

  /** Waits up to `ms` for `push`/`notify` (or the signal). */
  wait(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
      this.wake = done;
    });
  }
}
