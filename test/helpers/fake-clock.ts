import type { Cancel, Clock } from '../../src/clock.js';

/**
 * A clock that moves only when told: `advance` runs every timer that falls due, in time order,
 * letting the promises each one starts settle before the next (so a reconcile a timer starts can
 * schedule the next timer). No real time passes.
 */
export class FakeClock implements Clock {
  private at: number;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  constructor(start = 1_700_000_000_000) {
    this.at = start;
  }

  now(): number {
    return this.at;
  }

  after(ms: number, fn: () => void): Cancel {
    const id = this.seq++;
    this.timers.set(id, { at: this.at + Math.max(0, ms), fn });
    return () => void this.timers.delete(id);
  }

  /** Timers waiting, for a test that checks nothing is left scheduled. */
  get pending(): number {
    return this.timers.size;
  }

  /** Moves time on by `ms`, running the timers that fall due on the way. */
  async advance(ms: number): Promise<void> {
    const end = this.at + ms;
    await settle();
    for (;;) {
      const next = [...this.timers.entries()]
        .filter(([, t]) => t.at <= end)
        .sort(([a, x], [b, y]) => x.at - y.at || a - b)[0];
      if (!next) break;
      const [id, timer] = next;
      this.timers.delete(id);
      this.at = Math.max(this.at, timer.at);
      timer.fn();
      await settle();
    }
    this.at = end;
  }
}

/** Lets promises (and what they start) run: a few turns of the event loop, no timers. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
}
