import { ASSIGN_MAX_IPV6, UNASSIGN_IPV6_BATCH } from './families.js';
import type { FailureRecord } from './failure-record.js';
import type { EniFact, PoolMemory, PoolObservation, PoolPlan } from './pool-plan.js';

/**
 * IPv6-only pools (`ipFamilies: [IPv6]`) are planned by the same planner as IPv4 ones, in pod
 * addresses that are IPv6 here: the observation is seen as one whose ENIs' pod addresses are
 * their IPv6 addresses, and the plan's IPv4 calls become their IPv6 counterparts. An ENI keeps
 * its own primary IPv4 address (the node's); a vSwitch's /64 never runs short, but a create
 * still takes one IPv4 address for the ENI's primary.
 */

/** Free addresses a vSwitch with an IPv6 CIDR and at least one free IPv4 address shows the planner. */
const IPV6_FREE = 2 ** 32;

/** The cloud actions of IPv4 the planner holds back, by the IPv6 ones whose failures they stand for. */
const AS_IPV4: Record<string, string> = {
  AssignIpv6Addresses: 'AssignPrivateIpAddresses',
  UnassignIpv6Addresses: 'UnassignPrivateIpAddresses',
};

const podFacts = (e: EniFact): EniFact => ({ ...e, secondaryIps: e.ipv6 ?? [], ipv4Prefixes: [], ipv6: [] });

/** The observation as the IPv4 planner reads it: IPv6 addresses as pod addresses, IPv6 limits, IPv6 vSwitches. */
export function ipv6OnlyView(o: PoolObservation): PoolObservation {
  return {
    ...o,
    limits: o.limits && { ...o.limits, ipv4PerEni: (o.limits.ipv6PerEni ?? 0) + 1 },
    instanceEnis: o.instanceEnis.map(podFacts),
    ownedEnis: o.ownedEnis.map(podFacts),
    primaryEni: o.primaryEni && podFacts(o.primaryEni),
    vSwitches: o.vSwitches.map((v) => ({ ...v, free: v.ipv6Cidr && v.free > 0 ? IPV6_FREE : 0 })),
  };
}

/** The node's memory as the IPv4 planner reads it: an IPv6 call's failures hold back its IPv4 counterpart. */
export function ipv6OnlyMemory(m: PoolMemory): PoolMemory {
  return {
    ...m,
    failures: m.failures.map((f): FailureRecord => (AS_IPV4[f.action] ? { ...f, action: AS_IPV4[f.action]! } : f)),
  };
}

/** `n` split into parts of at most `most`. */
const parts = (n: number, most: number) =>
  Array.from({ length: Math.ceil(n / most) }, (_, k) => Math.min(most, n - k * most));

/**
 * The plan with IPv6 calls: assigns become AssignIpv6Addresses and unassigns
 * UnassignIpv6Addresses, 10 addresses a call; creates carry IPv6 addresses only (the planner
 * kept each within 10); the summary says how many are IPv6 (all of them).
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
    unassign: [],
    unassignIpv6,
    create: plan.create.map((c) => ({ vSwitchId: c.vSwitchId, ips: 0, ipv6: c.ips })),
    status: { ...plan.status, summary: { ...summary, availableIPv6: summary.available, usedIPv6: summary.used } },
  };
}
