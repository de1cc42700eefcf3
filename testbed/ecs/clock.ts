/**
 * The emulator's notion of time. With a time scale k, k emulated milliseconds pass per
 * real millisecond, so quotas refill and ENIs change state k times faster while every
 * ratio between them is kept.
 */
export interface ScaledClock {
  readonly scale: number;
  /** Emulated epoch milliseconds. */
  now(): number;
  /** Real milliseconds that `emulatedMs` take. */
  toReal(emulatedMs: number): number;
}

export function scaledClock(scale = 1, realNow: () => number = Date.now): ScaledClock {
  const start = realNow();
  return {
    scale,
    now: () => start + (realNow() - start) * scale,
    toReal: (ms) => ms / scale,
  };
}
