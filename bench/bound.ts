import type { ENIPoolClass } from '../src/api/types.js';
import type { Fixture } from '../testbed/ecs/index.js';

export interface QuotaBound {
  /** Unavoidable mutating calls per action. */
  calls: Record<string, number>;
  /** Emulated milliseconds each action needs at its quota, after its burst. */
  perActionMs: Record<string, number>;
  /** The slowest action plus one attach delay, in real milliseconds at the run's time scale. */
  realMs: number;
  /** Pod addresses the pools start with: each node's want, within its instance's capacity. */
  addresses: number;
}

/** Each node of the world with its instance type and the addresses its pool starts with. */
function startingNeeds(world: Fixture, spec: ENIPoolClass['spec']) {
  const types = new Map(world.instanceTypes.map((t) => [t.id, t]));
  return world.instances.map((i) => {
    const t = types.get(i.instanceType)!;
    const capacity = (t.eniQuantity - 1) * t.eniPrivateIpAddressQuantity;
    const want = Math.min(
      capacity,
      spec.maxAllocate && spec.maxAllocate > 0 ? spec.maxAllocate : capacity,
      Math.max(spec.preAllocate ?? 8, spec.minAllocate ?? 0) + (spec.maxAboveWatermark ?? 0),
    );
    return { type: t, want };
  });
}

/** IPs one create may carry: the ENI's addresses, at most the API's limit (its own primary included). */
const perCreate = (world: Fixture, ipsPerEni: number) =>
  Math.min(ipsPerEni, (world.limits?.createSecondaryIpsMax ?? 49) + 1);

/**
 * The best any operator can do when every node starts empty: each ENI is created with as many
 * IPs as allowed (so no Assign call), then attached; each action goes at its quota after
 * spending its burst; the last attach still takes one attach delay. Nothing else is counted
 * (no describe, no Kubernetes write), so the bound is strict.
 */
export function scaleUpBound(world: Fixture, spec: ENIPoolClass['spec']): QuotaBound {
  let enis = 0;
  let addresses = 0;
  for (const { type, want } of startingNeeds(world, spec)) {
    enis += Math.ceil(want / perCreate(world, type.eniPrivateIpAddressQuantity));
    addresses += want;
  }
  const calls = { CreateNetworkInterface: enis, AttachNetworkInterface: enis };
  const perActionMs: Record<string, number> = {};
  for (const [action, n] of Object.entries(calls)) {
    const q = world.quotas?.api?.[action];
    if (!q) continue;
    perActionMs[action] = (Math.max(0, n - (q.burst ?? q.perMinute)) / q.perMinute) * 60_000;
  }
  const emulatedMs = Math.max(0, ...Object.values(perActionMs)) + (world.delays?.attachMs ?? 0);
  return { calls, perActionMs, realMs: emulatedMs / (world.timeScale ?? 1), addresses };
}

/**
 * The fewest mutating calls with usePrimaryENI: one assign fills the primary ENI's room, and
 * what it cannot hold comes on new ENIs carrying all their addresses (create and attach).
 */
export function primaryEniMinimumCalls(world: Fixture, spec: ENIPoolClass['spec']): number {
  let calls = 0;
  for (const { type, want } of startingNeeds(world, spec)) {
    const onPrimary = Math.min(want, type.eniPrivateIpAddressQuantity - 1);
    const rest = want - onPrimary;
    calls += (onPrimary > 0 ? 1 : 0) + 2 * Math.ceil(rest / (perCreate(world, type.eniPrivateIpAddressQuantity) - 1));
  }
  return calls;
}
