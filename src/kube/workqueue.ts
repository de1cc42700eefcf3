import { systemClock, type Cancel, type Clock } from '../clock.js';

/** Hooks for metrics: depth, how long keys waited, how long they were worked on. */
export interface QueueObserver {
  depth?(n: number): void;
  waited?(ms: number): void;
  worked?(ms: number): void;
  retried?(): void;
}

export interface RateLimits {
  /** Per-key exponential backoff: base * 2^failures, capped. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** An overall token bucket for rate-limited adds. */
  qps: number;
  burst: number;
}

/** client-go's DefaultTypedControllerRateLimiter: 5 ms to 1,000 s per key, 10 qps with a burst of 100 overall. */
export const DEFAULT_RATE_LIMITS: RateLimits = { baseDelayMs: 5, maxDelayMs: 1_000_000, qps: 10, burst: 100 };

/**
 * A keyed work queue with client-go's semantics: a key queued twice is queued once; a key is
 * never worked on by two workers at once (added again while in work, it comes back after
 * `done`); failed keys come back with per-key exponential backoff under an overall bucket;
 * `addAfter` schedules a key; `shutdown` lets work in progress finish.
 */
export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly addedAt = new Map<string, number>();
  private readonly startedAt = new Map<string, number>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { at: number; cancel: Cancel }>();
  private readonly waiters: Array<(key: string | undefined) => void> = [];
  private bucket: { tokens: number; at: number };
  private shuttingDown = false;
  private drained?: () => void;

  private readonly limits: RateLimits;
  private readonly observer: QueueObserver;
  /** Keys with a higher priority are handed out first (ties in order of arrival). */
  private readonly priority?: (key: string) => number;
  private readonly clock: Clock;

  constructor(
    o: { limits?: RateLimits; observer?: QueueObserver; priority?: (key: string) => number; clock?: Clock } = {},
  ) {
    this.limits = o.limits ?? DEFAULT_RATE_LIMITS;
    this.observer = o.observer ?? {};
    this.priority = o.priority;
    this.clock = o.clock ?? systemClock;
    this.bucket = { tokens: this.limits.burst, at: this.clock.now() };
  }

  get length(): number {
    return this.queue.length;
  }

  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (!this.addedAt.has(key)) this.addedAt.set(key, this.clock.now());
    if (this.processing.has(key)) return;
    const waiter = this.waiters.shift();
    if (waiter) this.hand(key, waiter);
    else {
      this.queue.push(key);
      this.observer.depth?.(this.queue.length);
    }
  }

  /** Adds the key after `ms`; an earlier pending add for the same key wins. */
  addAfter(key: string, ms: number): void {
    if (this.shuttingDown) return;
    if (ms <= 0) return this.add(key);
    const at = this.clock.now() + ms;
    const pending = this.timers.get(key);
    if (pending && pending.at <= at) return;
    pending?.cancel();
    const cancel = this.clock.after(ms, () => {
      this.timers.delete(key);
      this.add(key);
    });
    this.timers.set(key, { at, cancel });
  }

  /** Adds the key again after its backoff (a failed reconcile), and not sooner than `floorMs`. */
  addRateLimited(key: string, floorMs = 0): void {
    const failures = this.failures.get(key) ?? 0;
    this.failures.set(key, failures + 1);
    this.observer.retried?.();
    this.addAfter(key, Math.max(floorMs, this.backoff(failures), this.bucketDelay()));
  }

  /** Clears a key's failures (a successful reconcile). */
  forget(key: string): void {
    this.failures.delete(key);
  }

  failuresOf(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  private backoff(failures: number): number {
    return Math.min(this.limits.maxDelayMs, this.limits.baseDelayMs * 2 ** failures);
  }

  private bucketDelay(): number {
    const now = this.clock.now();
    const b = this.bucket;
    b.tokens = Math.min(this.limits.burst, b.tokens + ((now - b.at) / 1000) * this.limits.qps);
    b.at = now;
    b.tokens -= 1;
    return b.tokens >= 0 ? 0 : (-b.tokens / this.limits.qps) * 1000;
  }

  /** The next key to work on; undefined once the queue shuts down. */
  get(): Promise<string | undefined> {
    const key = this.takeNext();
    if (key !== undefined) {
      this.observer.depth?.(this.queue.length);
      return new Promise((resolve) => this.hand(key, resolve));
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private takeNext(): string | undefined {
    if (!this.priority || this.queue.length < 2) return this.queue.shift();
    let best = 0;
    let bestScore = this.priority(this.queue[0]!);
    for (let i = 1; i < this.queue.length; i++) {
      const score = this.priority(this.queue[i]!);
      if (score > bestScore) {
        best = i;
        bestScore = score;
      }
    }
    return this.queue.splice(best, 1)[0];
  }

  private hand(key: string, to: (key: string) => void): void {
    this.dirty.delete(key);
    this.processing.add(key);
    const now = this.clock.now();
    this.observer.waited?.(now - (this.addedAt.get(key) ?? now));
    this.addedAt.delete(key);
    this.startedAt.set(key, now);
    to(key);
  }

  /** Marks the work on a key finished; a key added meanwhile is queued again. */
  done(key: string): void {
    this.processing.delete(key);
    const now = this.clock.now();
    this.observer.worked?.(now - (this.startedAt.get(key) ?? now));
    this.startedAt.delete(key);
    if (this.dirty.has(key) && !this.shuttingDown) {
      const waiter = this.waiters.shift();
      if (waiter) this.hand(key, waiter);
      else this.queue.push(key);
    }
    if (this.shuttingDown && this.processing.size === 0) this.drained?.();
  }

  /** Stops handing out keys and resolves when the work in progress is done. */
  shutdown(): Promise<void> {
    this.shuttingDown = true;
    for (const { cancel } of this.timers.values()) cancel();
    this.timers.clear();
    this.queue.length = 0;
    this.waiters.splice(0).forEach((w) => w(undefined));
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => (this.drained = resolve));
  }
}

/**
 * What a reconcile answers: when to look again, or `backoff` (not done, but no error either: a
 * write refused as stale, a read that failed and was said) to come back after the key's own
 * growing back-off, not sooner than `BACKOFF_FLOOR_MS`.
 */
export type ReconcileOutcome = { requeueAfterMs?: number; backoff?: boolean } | void;
export const BACKOFF_FLOOR_MS = 100;

/** Runs `workers` loops that take keys and reconcile them: success forgets, failure backs off, a requeue schedules. */
export async function runWorkers(
  queue: WorkQueue,
  workers: number,
  reconcile: (key: string) => Promise<ReconcileOutcome>,
  onError: (key: string, err: unknown) => void,
): Promise<void> {
  await Promise.all(
    Array.from({ length: workers }, async () => {
      for (;;) {
        const key = await queue.get();
        if (key === undefined) return;
        try {
          const r = await reconcile(key);
          if (r?.backoff) queue.addRateLimited(key, BACKOFF_FLOOR_MS);
          else {
            queue.forget(key);
            if (r?.requeueAfterMs !== undefined) queue.addAfter(key, r.requeueAfterMs);
          }
        } catch (e) {
          onError(key, e);
          queue.addRateLimited(key);
        } finally {
          queue.done(key);
        }
      }
    }),
  );
}
