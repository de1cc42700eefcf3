/**
 * How fast a node grows, learned from how many addresses its agent reports in use. A growth
 * step that makes a call anyway carries what this predicts the node will take soon (the batch),
 * so steady growth costs a call per ENI's room instead of a call per pod.
 */
export interface Demand {
  /** Addresses in use at earlier looks, oldest first: at most one per step, within two horizons. */
  samples: ReadonlyArray<{ at: number; inUse: number }>;
  /** Addresses in use at the last look. */
  inUse: number;
  /**
   * The batch the last growth call carried: kept (not released) while the node grows into it,
   * until a horizon has passed without the node taking one more address.
   */
  carried?: { ips: number; until: number };
}

/** How long a batch is meant to last, and the span growth is measured over: the release delay, at least a minute. */
export const batchHorizonMs = (releaseDelayMs: number) => Math.max(60_000, releaseDelayMs);

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
  if (!last || now - last.at >= horizonMs / STEPS_PER_HORIZON) samples.push({ at: now, inUse });
  let carried = prev?.carried && prev.carried.until > now ? prev.carried : undefined;
  // Still growing into it: the batch stays another horizon.
  if (carried && inUse > (prev?.inUse ?? inUse)) carried = { ...carried, until: now + horizonMs };
  return { samples, inUse, carried };
}

/**
 * What the node grew by over the last horizon: addresses in use now above the most it had a
 * horizon or more ago (or, younger than that, at the first look), scaled to one horizon when
 * that high point is older. Measured against the high point, pods that go and come back (a
 * rollout) are no growth, and a node that shrinks has none.
 */
export function growthOf(demand: Demand, inUse: number, now: number, horizonMs: number): number {
  const old = demand.samples.filter((s) => s.at <= now - horizonMs);
  const base = old.length ? old.reduce((high, s) => (s.inUse >= high.inUse ? s : high)) : demand.samples[0];
  if (!base) return 0;
  const span = Math.max(horizonMs, now - base.at);
  return Math.max(0, Math.floor(((inUse - base.inUse) * horizonMs) / span));
}

/**
 * Addresses to add beyond the need when a growth call is made anyway: what the node grew by over
 * the last horizon, which it is expected to take over the next, within the class's cap (0 turns
 * batching off). A growth of one address in a horizon is too slow to batch for.
 */
export function batchOf(demand: Demand, inUse: number, now: number, horizonMs: number, cap: number): number {
  const growth = growthOf(demand, inUse, now, horizonMs);
  return cap > 0 && growth >= 2 ? Math.min(cap, growth) : 0;
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
