/**
 * Time, passed in: what reads the time or waits takes a Clock, so that its tests run on a fake
 * one. Only composition roots (and this file) use the system's clock and timers.
 */
export interface Clock {
  now(): number;
  /** Calls `fn` once after `ms`; the returned function cancels it. The timer keeps no process alive. */
  after(ms: number, fn: () => void): Cancel;
}

export type Cancel = () => void;

/** Node's timers take at most 2^31-1 ms; a longer delay would fire at once. */
const MAX_TIMER_MS = 2_147_483_647;

export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, Math.min(MAX_TIMER_MS, Math.max(0, ms)));
    timer.unref?.();
    return () => clearTimeout(timer);
  },
};

/** Resolves after `ms` on `clock`. */
export const sleepOn = (clock: Clock, ms: number): Promise<void> =>
  new Promise((resolve) => void clock.after(ms, resolve));
