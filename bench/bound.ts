import type { ENIPoolClass } from '../src/api/types.js';
import type { Fixture } from '../testbed/ecs/index.js';

export interface QuotaBound {
  /** Unavoidable mutating calls per action. */
  calls: Record<string, number>;
  /** Emulated milliseconds each action needs at its quota, after its burst. */
  perActionMs: Record<string, number>;
  /** The slowest action plus one attach delay, in real milliseconds at the run's time scale. */
  realMs: number;
}

/**
 * The best any operator can do when every node starts empty: each ENI is created with as many
 * IPs as allowed (so no Assign call), then attached; each action goes at its quota after
 * spending its burst; the last attach still takes one attach delay. Nothing else is counted
 * (no describe, no Kubernetes write), so the bound is strict.
 */
export function scaleUpBound(world: Fixture, spec: ENIPoolClass['spec']): QuotaBound {
  const types = new Map(world.instanceTypes.map((t) => [t.id, t]));
  const createMax = (world.limits?.createSecondaryIpsMax ?? 49) + 1;
  let enis = 0;
  for (const i of world.instances) {
    const t = types.get(i.instanceType)!;
    const capacity = (t.eniQuantity - 1) * t.eniPrivateIpAddressQuantity;
    const want = Math.min(
      capacity,
      spec.maxAllocate && spec.maxAllocate > 0 ? spec.maxAllocate : capacity,
      Math.max(spec.preAllocate ?? 8, spec.minAllocate ?? 0) + (spec.maxAboveWatermark ?? 0),
    );
    enis += Math.ceil(want / Math.min(t.eniPrivateIpAddressQuantity, createMax));
  }
  const calls = { CreateNetworkInterface: enis, AttachNetworkInterface: enis };
  const perActionMs: Record<string, number> = {};
  for (const [action, n] of Object.entries(calls)) {
    const q = world.quotas?.api?.[action];
    if (!q) continue;
    perActionMs[action] = (Math.max(0, n - (q.burst ?? q.perMinute)) / q.perMinute) * 60_000;
  }
  const emulatedMs = Math.max(0, ...Object.values(perActionMs)) + (world.delays?.attachMs ?? 0);
  return { calls, perActionMs, realMs: emulatedMs / (world.timeScale ?? 1) };
}

/**
 * The fewest mutating calls with usePrimaryENI: one assign fills the primary ENI's room, and
 * what it cannot hold comes on new ENIs carrying all their addresses (create and attach).
 */
export function primaryEniMinimumCalls(world: Fixture, spec: ENIPoolClass['spec']): number {
  const types = new Map(world.instanceTypes.map((t) => [t.id, t]));
  const createMax = (world.limits?.createSecondaryIpsMax ?? 49) + 1;
  let calls = 0;
  for (const i of world.instances) {
    const t = types.get(i.instanceType)!;
    const want = Math.max(spec.preAllocate ?? 8, spec.minAllocate ?? 0) + (spec.maxAboveWatermark ?? 0);
    const onPrimary = Math.min(want, t.eniPrivateIpAddressQuantity - 1);
    const rest = want - onPrimary;
    calls += (onPrimary > 0 ? 1 : 0) + 2 * Math.ceil(rest / (Math.min(t.eniPrivateIpAddressQuantity, createMax) - 1));
  }
  return calls;
}
