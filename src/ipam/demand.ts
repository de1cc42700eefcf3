/**
 * How fast a node takes addresses, learned from what its agent reports in use. A growth step
 * that makes a call anyway carries what this predicts the node will take soon (the batch), so
 * steady growth costs a call per ENI's room instead of a call per pod.
 */
export interface Demand {
  /** The addresses in use at the last look: one in use now and not then was taken since. */
  seen: readonly string[];
  /** When each address taken within the window was first seen in use. */
  takenAt: readonly number[];
  /** When each address given back within the window was first seen free. */
  givenAt: readonly number[];
  /**
   * The most net takes (taken minus given back) counted in one window lately, and when: the
   * batch follows this peak, so that a steady rate whose takes fall unevenly into windows does
   * not make the batch (and with it the level the pool keeps) rise and fall. It decays once a
   * horizon passes without a higher one or a growth on it, and falls to the net at once when
   * the node gives addresses back or takes none.
   */
  peak: { net: number; at: number };
}

/** The span over which takes are counted. */
export const DEMAND_WINDOW_MS = 60_000;

/** How long a batch is meant to last: the release delay, at least a minute. */
export const batchHorizonMs = (releaseDelayMs: number) => Math.max(DEMAND_WINDOW_MS, releaseDelayMs);

/**
 * The demand after a look at the addresses in use now. The first look (a new pool, or an
 * operator that just began leading) counts nothing: what was in use before it says nothing of
 * the rate.
 */
export function observeDemand(
  prev: Demand | undefined,
  used: readonly string[],
  now: number,
  horizonMs: number,
): Demand {
  if (!prev) return { seen: [...used], takenAt: [], givenAt: [], peak: { net: 0, at: now } };
  const before = new Set(prev.seen);
  const inUse = new Set(used);
  const recent = (times: readonly number[], more: number) => [
    ...times.filter((t) => t > now - DEMAND_WINDOW_MS),
    ...Array.from({ length: more }, () => now),
  ];
  const takenAt = recent(prev.takenAt, used.filter((ip) => !before.has(ip)).length);
  const given = prev.seen.filter((ip) => !inUse.has(ip)).length;
  const givenAt = recent(prev.givenAt, given);
  const net = Math.max(0, takenAt.length - givenAt.length);
  // A node giving addresses back, or no longer taking any, is not growing into a batch: the
  // peak follows the net at once.
  const renew = net >= prev.peak.net || given > 0 || net === 0 || now - prev.peak.at > horizonMs;
  return { seen: [...used], takenAt, givenAt, peak: renew ? { net, at: now } : prev.peak };
}

/**
 * Addresses to add beyond the need when a growth call is made anyway, and to keep while the
 * node grows into them: the node's net takes per window at their recent peak, scaled to the
 * horizon, within the class's cap (0 turns batching off). Over the horizon (the release delay)
 * the node is expected to take them, so a batch is not given back and taken again.
 */
export function batchOf(demand: Demand | undefined, horizonMs: number, cap: number): number {
  if (!demand || cap <= 0) return 0;
  return Math.min(cap, Math.ceil((demand.peak.net * horizonMs) / DEMAND_WINDOW_MS));
}

/** The demand with its peak renewed now: a batch planned on it lasts a horizon from now. */
export const keepPeak = (demand: Demand, now: number): Demand => ({ ...demand, peak: { ...demand.peak, at: now } });
