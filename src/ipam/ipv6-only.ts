import { ASSIGN_MAX_IPV6, UNASSIGN_IPV6_BATCH } from './families.js';
import type { FailureRecord } from './failure-record.js';
import type { EniFact, PoolMemory, PoolObservation, PoolPlan } from './pool-plan.js';

/**
 * IPv6-only pools (`ipFamilies: [IPv6]`) are planned by the same planner as IPv4 ones, with the
 * families swapped: the observation is seen as one whose ENIs' pod addresses are their IPv6
 * addresses and whose other family (what a dual-stack ENI's IPv6 companions are) is their IPv4
 * secondaries, left from a class that used IPv4: given back as pods leave them, never one in
 * use, and no ENI goes while it holds one in use. The plan's calls are swapped back. An ENI
 * keeps its own primary IPv4 address (the node's).
 */

/**
 * Free addresses a vSwitch with an IPv6 CIDR shows the planner: a /64 never runs short. A create
 * still takes one IPv4 address (the ENI's primary); where none is left, the create fails and is
 * held back, while assigns to the ENIs there go on.
 */
const IPV6_FREE = 2 ** 32;

/** Each family's calls, by the other's: the planner's failures are swapped as its facts are. */
const SWAPPED: Record<string, string> = {
  AssignIpv6Addresses: 'AssignPrivateIpAddresses',
  UnassignIpv6Addresses: 'UnassignPrivateIpAddresses',
  AssignPrivateIpAddresses: 'AssignIpv6Addresses',
  UnassignPrivateIpAddresses: 'UnassignIpv6Addresses',
};

// IPv4 /28 prefixes left on an IPv6-only pool's ENIs are not planned (ipv4Mode Prefix with [IPv6] is refused).
const swapped = (e: EniFact): EniFact => ({ ...e, secondaryIps: e.ipv6 ?? [], ipv4Prefixes: [], ipv6: e.secondaryIps });

/**
 * The observation as the planner reads it: IPv6 addresses as pod addresses (an ENI's room: the
 * type's IPv6 addresses per ENI), IPv4 secondaries as the other family, IPv6 vSwitches.
 */
export function ipv6OnlyView(o: PoolObservation): PoolObservation {
  return {
    ...o,
    limits: o.limits && { ...o.limits, ipv4PerEni: (o.limits.ipv6PerEni ?? 0) + 1 },
    instanceEnis: o.instanceEnis.map(swapped),
    ownedEnis: o.ownedEnis.map(swapped),
    primaryEni: o.primaryEni && swapped(o.primaryEni),
    vSwitches: o.vSwitches.map((v) => ({ ...v, free: v.ipv6Cidr ? IPV6_FREE : 0, blocked: false })),
  };
}

/** The node's memory as the planner reads it: a call's failures hold back its counterpart of the other family. */
export function ipv6OnlyMemory(m: PoolMemory): PoolMemory {
  return {
    ...m,
    failures: m.failures.map((f): FailureRecord => (SWAPPED[f.action] ? { ...f, action: SWAPPED[f.action]! } : f)),
  };
}

/** `n` split into parts of at most `most`. */
const parts = (n: number, most: number) =>
  Array.from({ length: Math.ceil(n / most) }, (_, k) => Math.min(most, n - k * most));

/**
 * The plan with each family's calls: assigns become AssignIpv6Addresses and unassigns
 * UnassignIpv6Addresses, 10 addresses a call; the other family's unassigns (IPv4 left over)
 * UnassignPrivateIpAddresses; creates carry IPv6 addresses only (the planner kept each within
 * 10); the summary says how many are IPv6 (all of them). The other family is never assigned.
 */
export function ipv6OnlyPlan(plan: PoolPlan): PoolPlan {
  const unassignIpv6 = plan.unassign.flatMap((u) =>
    parts(u.ips.length, UNASSIGN_IPV6_BATCH).map((_, k) => ({
      eniId: u.eniId,
      ips: u.ips.slice(k * UNASSIGN_IPV6_BATCH, (k + 1) * UNASSIGN_IPV6_BATCH),
    })),
  );
  const { summary } = plan.status;
  return {
    ...plan,
    assign: [],
    assignIpv6: plan.assign.flatMap((a) => parts(a.count, ASSIGN_MAX_IPV6).map((count) => ({ eniId: a.eniId, count }))),
    unassign: plan.unassignIpv6,
    unassignIpv6,
    create: plan.create.map((c) => ({ vSwitchId: c.vSwitchId, ips: 0, ipv6: c.ips })),
    status: { ...plan.status, summary: { ...summary, availableIPv6: summary.available, usedIPv6: summary.used } },
  };
}
