import type { ENIPoolClass } from '../src/api/types.js';
import { addCalls, fewestScaleUpCalls, quotaTime, scaleUpWant } from '../src/ipam/quota-time.js';
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

/** Each node of the world with its instance type's limits and the addresses its pool starts with. */
function startingNeeds(world: Fixture, spec: ENIPoolClass['spec']) {
  const types = new Map(world.instanceTypes.map((t) => [t.id, t]));
  return world.instances.map((i) => {
    const t = types.get(i.instanceType)!;
    const limits = {
      eniQuantity: t.eniQuantity,
      ipv4PerEni: t.eniPrivateIpAddressQuantity,
      ipv6PerEni: t.eniIpv6AddressQuantity,
    };
    return { limits, want: scaleUpWant(limits, spec) };
  });
}

/** The class as the bound counts it: single secondary IPv4 addresses, every mode measured against the same need. */
const secondaryIp = (spec: ENIPoolClass['spec'], usePrimaryENI = false) => ({
  ...spec,
  ipv4Mode: 'SecondaryIP' as const,
  ipFamilies: undefined,
  usePrimaryENI,
});

/** Secondary addresses one create may carry in this world (the emulator's limit, ECS's 49 by default). */
const createMax = (world: Fixture) => world.limits?.createSecondaryIpsMax ?? 49;

/**
 * The best any operator can do when every node starts empty (src/ipam/quota-time.ts, the bound
 * `kubectl eni-ipam plan` predicts against too): each ENI is created with as many IPs as allowed
 * (so no Assign call), then attached; each action goes at its quota after spending its burst;
 * the last attach still takes one attach delay.
 */
export function scaleUpBound(world: Fixture, spec: ENIPoolClass['spec']): QuotaBound {
  const calls: Record<string, number> = {};
  let addresses = 0;
  for (const { limits, want } of startingNeeds(world, secondaryIp(spec))) {
    addCalls(calls, fewestScaleUpCalls(limits, secondaryIp(spec), want, createMax(world)));
    addresses += want;
  }
  const { perActionMs, ms } = quotaTime(calls, world.quotas?.api ?? {}, world.delays?.attachMs ?? 0);
  return { calls, perActionMs, realMs: ms / (world.timeScale ?? 1), addresses };
}

/**
 * The fewest mutating calls with usePrimaryENI: one assign fills the primary ENI's room, and
 * what it cannot hold comes on new ENIs carrying all their addresses (create and attach).
 */
export function primaryEniMinimumCalls(world: Fixture, spec: ENIPoolClass['spec']): number {
  let calls = 0;
  for (const { limits, want } of startingNeeds(world, secondaryIp(spec))) {
    const fewest = fewestScaleUpCalls(limits, secondaryIp(spec, true), want, createMax(world));
    calls += Object.values(fewest).reduce((a, b) => a + b, 0);
  }
  return calls;
}
