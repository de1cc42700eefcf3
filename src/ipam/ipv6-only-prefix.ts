import type { ENIPool } from '../api/types.js';
import { conditionTime, setCondition } from './conditions.js';
import { heldBack } from './failure-record.js';
import { IPV6_PREFIXES_PER_ENI, inIpv6Prefix, isIpv6PrefixKey } from './ipv6-prefix.js';
import { candidateVSwitches, securityGroupsFor } from './placement.js';
import { heldWhole, type EniFact, type PoolMemory, type PoolObservation, type PoolPlan } from './pool-plan.js';
import { acksOf, planRelease } from './release.js';

/**
 * IPv6-only pools with IPv6 prefixes (`ipFamilies: [IPv6]`, `ipv6Mode: Prefix`): the node's pods
 * take their addresses from one /80, which holds more than any node runs pods, so the pool needs
 * one /80 and no call more as the node grows. It goes to the primary ENI with usePrimaryENI (one
 * assign, no create), else to an ENI of ours with an IPv6 entry free, else to one ENI created for
 * it (its primary IPv4 is the node's; it takes no other address). What the ENIs hold besides
 * (single IPv6 addresses and IPv4 left from an earlier spell of the class) is planned by the
 * single-address planner as a pool that needs nothing more: pods keep what they hold, and the
 * rest goes back through the release handshake. The /80s are never its to release or delete.
 */

/** Pods a node runs when its Node says nothing (the kubelet's default maxPods). */
export const DEFAULT_POD_CAPACITY = 110;

/** The ENIs of the pool that hold a /80: InUse on the instance, ours or the usable primary. */
function holdersOf(o: PoolObservation, primary: EniFact | undefined): EniFact[] {
  const ours = o.instanceEnis.filter((e) => e.ours && !e.removing && e.status === 'InUse');
  return [...(primary ? [primary] : []), ...ours].filter((e) => (e.ipv6Prefixes?.length ?? 0) > 0);
}

/**
 * The /80 the node keeps: the one pods hold most addresses of (the primary ENI's first on a tie,
 * then the first listed). Any other (an assign whose answer was lost and was made again on a
 * stale picture) goes back once no pod holds or cools an address of it.
 */
function keptPrefix(holders: EniFact[], busy: string[]): string | undefined {
  const all = holders.flatMap((e) => e.ipv6Prefixes ?? []);
  const pods = (p: string) => busy.filter((ip) => inIpv6Prefix(ip, p)).length;
  return all.reduce<string | undefined>(
    (best, p) => (best === undefined || pods(p) > pods(best) ? p : best),
    undefined,
  );
}

/** The release handshake for the /80s beyond the kept one: requested once untouched, unassigned on the agent's ready. */
function planExtraPrefixes(o: PoolObservation, holders: EniFact[], kept: string | undefined, busy: string[]) {
  const requests = new Map(
    Object.entries(o.pool.status?.releaseRequests ?? {}).filter(([key]) => isIpv6PrefixKey(key)),
  );
  const releaseRequests: Record<string, string> = {};
  const unassignIpv6Prefixes: PoolPlan['unassignIpv6Prefixes'] = [];
  const releases = o.mode === 'normal' && o.pool.spec.releaseExcessIPs !== false && !o.sharingInstance?.length;
  for (const e of holders) {
    const extras = (e.ipv6Prefixes ?? []).filter((p) => p !== kept);
    if (!extras.length) continue;
    if (!releases) {
      for (const p of extras) if (requests.has(p)) releaseRequests[p] = requests.get(p)!;
      continue;
    }
    const release = planRelease({
      enis: [{ id: e.id, primaryIp: '', secondaryIps: extras, keep: true }],
      used: new Set(extras.filter((p) => busy.some((ip) => inIpv6Prefix(ip, p)))),
      excess: extras.length,
      excessSince: o.now,
      now: o.now,
      delayMs: 0,
      requests: new Map([...requests].filter(([key]) => extras.includes(key))),
      acks: acksOf(o.pool.status),
      deleteEmptyEnis: false,
    });
    const stays = (key: string) => requests.has(key) && !release.withdraw.includes(key);
    for (const p of extras) if (stays(p)) releaseRequests[p] = requests.get(p)!;
    for (const p of release.request) releaseRequests[p] = o.requestStamp;
    for (const u of release.unassign) {
      unassignIpv6Prefixes.push({ eniId: e.id, prefixes: u.ips });
      for (const p of u.ips) delete releaseRequests[p];
    }
  }
  return { releaseRequests, unassignIpv6Prefixes };
}

/** An address held (or cooling) in one of the holders' /80s: the /80 step's, not the single-address planner's. */
const inHeld = (holders: EniFact[]) => {
  const prefixes = holders.flatMap((e) => e.ipv6Prefixes ?? []);
  return (key: string) => prefixes.includes(key) || prefixes.some((p) => inIpv6Prefix(key, p));
};

/**
 * The pool as the single-address planner sees it: sized to nothing beyond what pods hold of
 * the ENIs' single addresses; the holders' /80s, and every address of the pool's that is no
 * single address of its ENIs (in a /80, or gone with its ENI), out of sight. A release request
 * left for a holder's /80 (from a spell without it) is out of sight too, so the plan withdraws it.
 */
function leftoversView(o: PoolObservation, holders: EniFact[]): PoolObservation {
  // Every /80 of the holders is the /80 step's, the kept one and any extra alike.
  const inPrefix = inHeld(holders);
  const enis = [...o.instanceEnis, ...o.ownedEnis, ...(o.primaryEni ? [o.primaryEni] : [])];
  const singles = new Set(enis.flatMap((e) => [...(e.ipv6 ?? []), ...e.secondaryIps]));
  const held = (key: string) => inPrefix(key) || (key.includes(':') && !key.includes('/') && !singles.has(key));
  const ids = new Set(holders.map((e) => e.id));
  // Kept whole: its singles go, once free, by unassign, never with the ENI.
  const strip = (e: EniFact): EniFact => (ids.has(e.id) ? { ...e, ipv6Prefixes: [], keep: true } : e);
  const status = o.pool.status;
  const without = <T>(record: Record<string, T> | undefined) =>
    record && Object.fromEntries(Object.entries(record).filter(([ip]) => !held(ip)));
  const spec: ENIPool['spec'] = {
    ...o.pool.spec,
    ipv6Mode: 'SecondaryIP',
    preAllocate: 0,
    minAllocate: 0,
    maxAboveWatermark: 0,
    maxBatch: 0,
  };
  return {
    ...o,
    pendingPods: 0,
    instanceEnis: o.instanceEnis.map(strip),
    ownedEnis: o.ownedEnis.map(strip),
    primaryEni: o.primaryEni && strip(o.primaryEni),
    pool: {
      ...o.pool,
      spec,
      ...(status
        ? {
            status: {
              ...status,
              used: without(status.used),
              cooling: without(status.cooling),
              releaseRequests: without(status.releaseRequests),
            },
          }
        : {}),
    },
  };
}

/**
 * Plans an IPv6-only /80 pool: `planSingles` (the planner of single addresses) for what the ENIs
 * hold besides the /80s, then the /80 step; the summary counts the node's pods as the room a /80
 * gives, and the pool is Ready once an ENI holds one.
 */
export function planIpv6OnlyPrefix(
  o: PoolObservation,
  m: PoolMemory,
  planSingles: (o: PoolObservation, m: PoolMemory) => PoolPlan,
  usablePrimary: EniFact | undefined,
): PoolPlan {
  const spec = o.pool.spec;
  const holders = holdersOf(o, usablePrimary);
  const plan = planSingles(leftoversView(o, holders), m);
  const busy = [...Object.keys(o.pool.status?.used ?? {}), ...Object.keys(o.pool.status?.cooling ?? {})];
  const extra = planExtraPrefixes(o, holders, keptPrefix(holders, busy), busy);
  const kept = new Set(holders.map((e) => e.id));
  const deleteEnis = plan.deleteEnis.filter((id) => !kept.has(id));
  const assignIpv6Prefixes: PoolPlan['assignIpv6Prefixes'] = [];
  const create: PoolPlan['create'] = [];
  let securityGroupIds: string[] = [];
  const blocked = (action: string) => heldBack(m.failures, action, o.now) !== undefined;
  const planned = plan.status.conditions.find((c) => c.type === 'Ready');
  const unknown = !o.limits || planned?.reason === 'UnknownInstanceType' || planned?.reason === 'NoIPv6OnInstanceType';
  let waiting: string | undefined;
  if (!holders.length && o.mode !== 'read-only' && !unknown && !o.unservable) {
    const perEni = o.limits?.ipv6PerEni ?? 0;
    // IPv6 entries once this plan's unassigns are done (the shell unassigns before it assigns).
    const leaving = (e: EniFact) =>
      plan.unassignIpv6.filter((u) => u.eniId === e.id).reduce((n, u) => n + u.ips.length, 0);
    const entries = (e: EniFact) => (e.ipv6?.length ?? 0) + (e.ipv6Prefixes?.length ?? 0) - leaving(e);
    const room = (e: EniFact) =>
      e.status === 'InUse' && !e.removing && entries(e) < perEni && !heldWhole(e, o.pool.status);
    const ours = o.instanceEnis.filter((e) => e.ours && !deleteEnis.includes(e.id));
    const target = [...(usablePrimary ? [usablePrimary] : []), ...ours].find(room);
    // An ENI on its way (created, attaching, parked) brings the /80 it was made with: nothing more meanwhile.
    const coming = o.inFlight.enis > 0 || o.ownedEnis.some((e) => !e.removing && e.status !== 'InUse');
    if (coming) {
      waiting = 'waiting for the ENI being created and attached for its /80';
    } else if (target && blocked('AssignIpv6Addresses')) {
      waiting = `assigning a /80 to ENI ${target.id} is held back after a failure`;
    } else if (target) {
      assignIpv6Prefixes.push({ eniId: target.id, count: IPV6_PREFIXES_PER_ENI });
      waiting = `assigning a /80 to ENI ${target.id}`;
    } else if (o.instanceEnis.length >= Math.max(0, (o.limits?.eniQuantity ?? 0) - 1)) {
      waiting =
        `instance ${spec.instanceID} (${spec.instanceType}) has no ENI slot free for the /80 ` +
        `and no ENI of the pool with an IPv6 entry free`;
    } else {
      const vSwitch = candidateVSwitches(spec, o.vSwitches, o.vpcId, spec.zoneID!)
        // The ENI's own primary IPv4 needs one free address of the vSwitch.
        .filter((v) => v.ipv6Cidr && !v.blocked && v.free > 0)
        .sort((a, b) => b.free - a.free)[0];
      const groups = o.securityGroups ? securityGroupsFor(spec, o.securityGroups, o.vpcId) : [];
      if (!vSwitch) waiting = `no vSwitch of the class in zone ${spec.zoneID} has an IPv6 CIDR and room for an ENI`;
      else if (!groups.length) waiting = 'no security group of the class is known for the ENI of its /80';
      else if (blocked('CreateNetworkInterface') || blocked('AttachNetworkInterface'))
        waiting = 'creating the ENI for its /80 is held back after a failure';
      else {
        create.push({ vSwitchId: vSwitch.id, ips: 0, ipv6Prefixes: IPV6_PREFIXES_PER_ENI });
        securityGroupIds = groups;
        waiting = `creating an ENI in ${vSwitch.id} with a /80`;
      }
    }
  }
  const used = Object.keys(o.pool.status?.used ?? {}).filter((ip) => ip.includes(':')).length;
  const capacity = o.podCapacity ?? DEFAULT_POD_CAPACITY;
  // A /80 serves every pod the node runs (as the status will be once an assign planned now is
  // done); before one, what single addresses the ENIs hold.
  const serving = holders.length > 0 || assignIpv6Prefixes.length > 0;
  const available = serving ? Math.max(capacity, used) : plan.status.summary.available;
  const prefixes =
    holders.reduce((n, e) => n + (e.ipv6Prefixes?.length ?? 0), 0) -
    extra.unassignIpv6Prefixes.reduce((n, u) => n + u.prefixes.length, 0);
  const summary = {
    ...plan.status.summary,
    available,
    used,
    availableIPv6: available,
    usedIPv6: used,
    ...(prefixes + assignIpv6Prefixes.length + create.length
      ? { ipv6Prefixes: prefixes + assignIpv6Prefixes.length + create.length }
      : {}),
  };
  let conditions = plan.status.conditions;
  if (!serving && waiting && planned?.status !== 'False')
    conditions = setCondition(
      conditions,
      { type: 'Ready', status: 'False', reason: 'IPv6PrefixPending', message: `the node has no /80 yet: ${waiting}` },
      conditionTime(o.now),
    );
  return {
    ...plan,
    deleteEnis,
    assignIpv6Prefixes: [...plan.assignIpv6Prefixes, ...assignIpv6Prefixes],
    unassignIpv6Prefixes: [...plan.unassignIpv6Prefixes, ...extra.unassignIpv6Prefixes],
    create: [...plan.create, ...create],
    securityGroupIds: create.length ? securityGroupIds : plan.securityGroupIds,
    status: {
      ...plan.status,
      summary,
      conditions,
      releaseRequests: { ...plan.status.releaseRequests, ...extra.releaseRequests },
    },
  };
}
