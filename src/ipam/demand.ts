/**
 * How fast a node grows, learned from how many addresses its agent reports in use. A growth
 * step that makes a call anyway carries what this predicts the node will take soon (the batch),
 * so steady growth costs a call per ENI's room instead of a call per pod.
 */
export interface Demand {
  /**
   * Addresses in use at earlier looks, oldest first: one per step, within two horizons, holding
   * the most seen in it (`inUse`) and what its first look saw (`first`: a young node's growth is
   * measured from it).
   */
  samples: ReadonlyArray<{ at: number; inUse: number; first?: number }>;
  /** Addresses in use at the last look. */
  inUse: number;
  /**
   * The batch the last growth call carried: kept (not released) while the node grows into it,
   * until a horizon has passed without the node taking one more address, or the node gives
   * addresses back.
   */
  carried?: { ips: number; until: number };
}

/** The span growth is measured over: a minute. */
export const DEMAND_WINDOW_MS = 60_000;

/** How long a batch is meant to last: the release delay, at least a minute. */
export const batchHorizonMs = (releaseDelayMs: number) => Math.max(DEMAND_WINDOW_MS, releaseDelayMs);

/** Samples kept per horizon: the resolution of the growth measured. */
const STEPS_PER_HORIZON = 12;

/**
 * The demand after a look at the number of addresses in use now. Samples older than two
 * horizons go: after a gap that long (an outage, a new leader), the look is a first look, and
 * what is in use then says nothing of the rate.
 */
export function observeDemand(prev: Demand | undefined, inUse: number, now: number, horizonMs: number): Demand {
  const samples = (prev?.samples ?? []).filter((s) => s.at > now - 2 * horizonMs);
  const last = samples.at(-1);
  // One sample a step, holding the most in use seen in it (the high points are what count).
  if (!last || now - last.at >= horizonMs / STEPS_PER_HORIZON) samples.push({ at: now, inUse, first: inUse });
  else if (inUse > last.inUse) samples[samples.length - 1] = { ...last, inUse };
  let carried = prev?.carried && prev.carried.until >= now ? prev.carried : undefined;
  const before = prev?.inUse ?? inUse;
  // Still growing into it: the batch stays another horizon. Giving addresses back, the node is
  // not growing into it: it goes (and is released after the release delay).
  if (carried && inUse > before) carried = { ...carried, until: now + horizonMs };
  else if (inUse < before) carried = undefined;
  return { samples, inUse, carried };
}

/**
 * What the node grew by over the last minute: addresses in use now above the most it had a
 * minute or more ago (or, younger than that, at its first look: not the most its first step
 * saw, which would hide the growth of a node's first steps), scaled to one minute when that
 * base is older. Measured against the high point, pods that go and come back (a rollout) are
 * no growth, and a node that shrinks has none.
 */
export function growthOf(demand: Demand, inUse: number, now: number): number {
  const windowMs = DEMAND_WINDOW_MS;
  const old = demand.samples.filter((s) => s.at <= now - windowMs);
  const first = demand.samples[0];
  const base = old.length
    ? old.reduce((high, s) => (s.inUse >= high.inUse ? s : high))
    : first && { at: first.at, inUse: first.first ?? first.inUse };
  if (!base) return 0;
  const span = Math.max(windowMs, now - base.at);
  return Math.max(0, Math.floor(((inUse - base.inUse) * windowMs) / span));
}

/**
 * Addresses to add beyond the need when a growth call is made anyway: the node's growth per
 * minute, scaled to the horizon (what it is expected to take before a batch could be released),
 * within the class's cap (0 turns batching off). A growth of one address a minute is too slow
 * to batch for (`preAllocate` serves it), and a node below its high point of the last minute is
 * shrinking, whatever it grew before.
 */
export function batchOf(demand: Demand, inUse: number, now: number, horizonMs: number, cap: number): number {
  const growth = growthOf(demand, inUse, now);
  // Below its high point of the last minute, the node is giving addresses back, not growing.
  const recentHigh = Math.max(0, ...demand.samples.filter((s) => s.at > now - DEMAND_WINDOW_MS).map((s) => s.inUse));
  if (cap <= 0 || growth < 2 || inUse < recentHigh) return 0;
  return Math.min(cap, Math.floor((growth * horizonMs) / DEMAND_WINDOW_MS));
}

/** The batch the release level keeps: the one learned now, or the last one carried, whichever is more. */
export const keptBatch = (demand: Demand, batch: number): number => Math.max(batch, demand.carried?.ips ?? 0);

/**
 * The demand after a growth call carried `ips` beyond the need: they are kept for a horizon.
 * (A growth means the node had used up what an earlier one carried.)
 */
export const carry = (demand: Demand, ips: number, now: number, horizonMs: number): Demand => ({
  ...demand,
  carried: { ips, until: now + horizonMs },
});
