/**
 * How long a vSwitch's free addresses last: the rate they are taken at (by our pools, and by
 * anything else in the vSwitch: ECS instances, other clusters) from a short history of its free
 * count as described, and the time until none is left at that rate. A forecast, not a promise:
 * it is given only over enough time to mean something, and none at all when the count is steady
 * or growing.
 */

/** One reading of a vSwitch's free addresses (a describe's AvailableIpAddressCount), and when. */
export interface FreeSample {
  at: number;
  free: number;
}

export interface HeadroomWindow {
  /** The rate is fitted over the readings of the last windowMs; older ones are dropped. */
  windowMs: number;
  /** No rate from readings spread over less than this: two describes a minute apart say little. */
  minSpanMs: number;
  /** Nor from fewer readings than this. */
  minSamples: number;
  /**
   * Readings closer than this to the one before are merged (the newer one wins), so that a
   * burst of describes (refreshes after exhaustion errors) keeps the history short.
   */
  minGapMs: number;
}

/**
 * Half an hour of readings, a forecast from ten minutes of them. Describes come at least once a
 * resync (5 minutes) while any class is reconciled, so the window holds several.
 */
export const HEADROOM_WINDOW: HeadroomWindow = {
  windowMs: 30 * 60_000,
  minSpanMs: 10 * 60_000,
  minSamples: 3,
  minGapMs: 30_000,
};

/** At most this many readings are kept: one per minGapMs over the window, and the newest two. */
export const maxSamples = (w: HeadroomWindow = HEADROOM_WINDOW) => Math.ceil(w.windowMs / w.minGapMs) + 2;

/**
 * The history with a new reading, oldest first. Every gap but the newest is at least minGapMs
 * (a reading that follows the newest too closely takes its place), and readings older than the
 * window before the new one go. A reading older than the newest (a clock stepped back) drops
 * the readings after it: a forecast never fits times out of order.
 */
export function recordFree(
  history: readonly FreeSample[],
  sample: FreeSample,
  w: HeadroomWindow = HEADROOM_WINDOW,
): FreeSample[] {
  const kept = history.filter((s) => s.at <= sample.at && s.at >= sample.at - w.windowMs);
  const [before, newest] = [kept.at(-2), kept.at(-1)];
  if (before && newest && newest.at - before.at < w.minGapMs) kept[kept.length - 1] = sample;
  else kept.push(sample);
  return kept;
}

export interface Forecast {
  /** Addresses taken per second, fitted over the window; negative while addresses come back. */
  consumptionPerSecond: number;
  /**
   * Seconds from now until none is free at that rate; only while addresses are taken
   * (consumption > 0). 0 when the count, carried forward from the last reading, is gone already.
   */
  exhaustionSeconds?: number;
}

/**
 * The forecast at `now` from the readings of the window before it: the consumption is the
 * least-squares slope of free over time, negated; the exhaustion time runs from the last
 * reading's count, less what the rate has taken since. None without enough readings, or
 * readings spread over too short a time.
 */
export function forecastFree(
  history: readonly FreeSample[],
  now: number,
  w: HeadroomWindow = HEADROOM_WINDOW,
): Forecast | undefined {
  const recent = history.filter((s) => s.at <= now && s.at >= now - w.windowMs);
  const first = recent[0];
  const last = recent.at(-1);
  if (!first || !last || recent.length < w.minSamples || last.at - first.at < w.minSpanMs) return undefined;
  // Seconds from the first reading: small numbers, so the sums lose no precision to epoch times.
  const ts = recent.map((s) => (s.at - first.at) / 1000);
  const meanT = ts.reduce((a, t) => a + t, 0) / ts.length;
  const meanF = recent.reduce((a, s) => a + s.free, 0) / recent.length;
  let covariance = 0;
  let variance = 0;
  recent.forEach((s, i) => {
    covariance += (ts[i]! - meanT) * (s.free - meanF);
    variance += (ts[i]! - meanT) ** 2;
  });
  // variance > 0: the span is at least minSpanMs, so the times differ.
  const consumptionPerSecond = -covariance / variance + 0; // + 0: no -0 for a steady count
  if (consumptionPerSecond <= 0) return { consumptionPerSecond };
  const sinceLast = (now - last.at) / 1000;
  return { consumptionPerSecond, exhaustionSeconds: Math.max(0, last.free / consumptionPerSecond - sinceLast) };
}
