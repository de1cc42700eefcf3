import type { Condition, ENIPool, ENIPoolStatus } from '../api/types.js';
import { planAllocation, type EniView, type VSwitchView } from './allocate.js';
import { podIpCapacity, podIpsPerEni, type InstanceLimits } from './capacity.js';
import { conditionTime, setCondition, type PlannedCondition } from './conditions.js';
import { batchHorizonMs, batchOf, carry, keptBatch, observeDemand, type Demand } from './demand.js';
import { adoptions } from './adopt.js';
import { degradedOrOutage, heldBack, nextAttempt, type FailureRecord } from './failure-record.js';
import { exclusiveMode, planExclusive } from './exclusive.js';
import {
  MAX_SECURITY_GROUPS_PER_ENI,
  candidateVSwitches,
  placementZones,
  securityGroupsFor,
  type SecurityGroupInfo,
  type VSwitchInfo,
} from './placement.js';
import {
  CREATE_MAX_IPV6,
  dualStack,
  familyLimits,
  inOtherFamily,
  inPodFamily,
  ipv6Only,
  isIpv6,
  needsIpv6,
  planCompanions,
} from './families.js';
import { ipv6OnlyMemory, ipv6OnlyPlan, ipv6OnlyView } from './ipv6-only.js';
import { planIpv6OnlyPrefix } from './ipv6-only-prefix.js';
import {
  IPV6_PREFIXES_PER_ENI,
  UNASSIGN_IPV6_PREFIX_BATCH,
  inIpv6Prefix,
  ipv6PrefixMode,
  ipv6Room,
  isIpv6PrefixKey,
} from './ipv6-prefix.js';
import { PREFIX_SIZE, prefixAddresses } from './prefix.js';
import { acksOf, planRelease } from './release.js';
import { excess, needed, resolveMaxAllocate, toAllocate, type Sizing, type Usage } from './sizing.js';

/** One ENI as the operator knows it, and what the operator is doing with it. */
export interface EniFact {
  id: string;
  status: string;
  instanceId?: string;
  vSwitchId: string;
  primaryIp: string;
  secondaryIps: string[];
  /** Its /28 prefixes (ipv4Mode Prefix). */
  ipv4Prefixes?: string[];
  /** Its IPv6 addresses (dual-stack). */
  ipv6?: string[];
  /** Its IPv6 /80 prefixes (dual-stack, ipv6Mode Prefix). */
  ipv6Prefixes?: string[];
  /** Created by this cluster. */
  ours: boolean;
  /** Being detached and deleted by the operator: no longer part of the pool, though it holds a slot. */
  removing: boolean;
  /** Being attached, or waited for, by the operator. */
  attaching: boolean;
  /** The instance's primary ENI: never created, attached, detached or deleted by the operator. */
  primary?: boolean;
  /** Never deleted by the release step, though emptied (an IPv6-only pool's ENI of its /80). */
  keep?: boolean;
}

/** Everything one reconcile of a pool looks at, read once, as plain data. */
export interface PoolObservation {
  now: number;
  mode: 'normal' | 'no-release' | 'read-only';
  vpcId: string;
  /** From the cache, or read afresh when the cache shows a confirmed release. */
  pool: ENIPool;
  /** The instance type's limits; undefined when the type is unknown. */
  limits?: InstanceLimits;
  /** Secondary ENIs attached (or attaching) to the instance, whoever owns them. */
  instanceEnis: EniFact[];
  /** ENIs this cluster created for the node, attached or not. */
  ownedEnis: EniFact[];
  /**
   * The instance's primary ENI: its secondaries are pod addresses when the pool uses it
   * (usePrimaryENI), or drains it (the class stopped using it).
   */
  primaryEni?: EniFact;
  /** ENIs being created or attached in the background, and the IPs they carry. */
  inFlight: { enis: number; ips: number };
  /** Pods scheduled to the node that still wait for an IP. */
  pendingPods: number;
  /** The node's own addresses (its Node's InternalIPs): on the primary ENI, they are no pod's. */
  nodeAddresses?: string[];
  /** Pods the node runs at most (its Node's allocatable pods), where known: the room a /80 gives an IPv6-only pool. */
  podCapacity?: number;
  /** `fragmented`: refused a /28 lately though it had free addresses. */
  vSwitches: Array<VSwitchInfo & { blocked: boolean; fragmented?: boolean; ipv6Cidr?: string }>;
  /** Only needed (and only read) when the pool selects security groups by tag; undefined when that read failed. */
  securityGroups?: SecurityGroupInfo[];
  /** ENIs the operator removed itself, so that their leaving the pool is no news. */
  removedByUs: ReadonlySet<string>;
  /** The name of requests made now: a time no earlier request carries. */
  requestStamp: string;
  /** Why the pool cannot be served now (its node is gone), if it cannot: nothing is changed. */
  unservable?: { reason: string; message: string };
  /** Why the operator cannot use the cloud at all now (its fleet-wide reads fail), if it cannot. */
  cloudOutage?: { reason: string; message: string };
  /**
   * Other pools (not being deleted) that name the same instance: a duplicated providerID, a
   * renamed node whose old Node stays. Nothing is released from a pool while any does.
   */
  sharingInstance?: string[];
}

export type ShortfallReason =
  'VSwitchExhausted' | 'VSwitchFragmented' | 'NoVSwitchInZone' | 'InstanceLimit' | 'QuotaExceeded';
export interface Shortfall {
  reason: ShortfallReason;
  message: string;
}

/** What the operator remembers of a node between reconciles, as far as planning reads it. */
export interface PoolMemory {
  /** Since when the pool has lacked IPs (for the deficit-to-published metric). */
  deficitSince?: number;
  /** Since when the pool has been in excess without a break. */
  excessSince?: number;
  /** Why the pool cannot get what it needs, once found. */
  shortfall?: Shortfall;
  /** Cloud failures per action and their back-off. */
  failures: readonly FailureRecord[];
  /** How fast the node has taken addresses lately. */
  demand?: Demand;
}

export interface PlannedEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

/** The operator's part of the pool's status once the plan is carried out. */
export interface PlannedStatus {
  /** The ENIs to publish (their addresses are rendered from the cloud after the changes). */
  eniIds: string[];
  summary: NonNullable<ENIPoolStatus['summary']>;
  releaseRequests: Record<string, string>;
  conditions: Condition[];
  observedGeneration?: number;
}

/** Everything one reconcile does, decided at once. */
export interface PoolPlan {
  /** Our ENIs left half-done (created, or attaching): attached, or waited for, not replaced. */
  adopt: Array<{ eniId: string; alreadyAttaching: boolean }>;
  /** `count` in addresses; with `prefix`, a multiple of 16 assigned as /28 prefixes (at most 10). */
  assign: Array<{ eniId: string; vSwitchId: string; count: number; prefix?: true }>;
  /**
   * New ENIs, each created with all its IPs (with `prefix`, as /28 prefixes; `ipv6`: as many IPv6;
   * `ipv6Prefixes`: as many /80s), then attached.
   */
  create: Array<{ vSwitchId: string; ips: number; prefix?: true; ipv6?: number; ipv6Prefixes?: number }>;
  /** IPv6 addresses to add to an ENI, at most 10 per call: dual-stack companions, or an IPv6-only pool's. */
  assignIpv6: Array<{ eniId: string; count: number }>;
  /** Confirmed free IPv6 addresses to unassign, at most 10 per call (a surplus, or an IPv6-only pool's excess). */
  unassignIpv6: Array<{ eniId: string; ips: string[] }>;
  /** IPv6 /80 prefixes to add to an ENI that has none (ipv6Mode Prefix): `count` prefixes. */
  assignIpv6Prefixes: Array<{ eniId: string; count: number }>;
  /** Confirmed free IPv6 prefixes to unassign (a pool that stopped using them), at most 10 per call. */
  unassignIpv6Prefixes: Array<{ eniId: string; prefixes: string[] }>;
  securityGroupIds: string[];
  /** Confirmed IPs (at most 50) or prefixes (at most 10) to unassign, one call each: never both. */
  unassign: Array<{ eniId: string; ips: string[]; prefixes?: string[] }>;
  /** ENIs whose every address was confirmed free: detached and deleted. */
  deleteEnis: string[];
  status: PlannedStatus;
  events: PlannedEvent[];
  memory: Omit<PoolMemory, 'failures'>;
  requeueAfterMs?: number;
}

/** The largest growth batch when the class sets none. */
export const DEFAULT_MAX_BATCH = 16;

/** IPs, and prefixes, per UnassignPrivateIpAddresses call (ECS limits). */
export const UNASSIGN_BATCH = 50;
export const UNASSIGN_PREFIX_BATCH = 10;

/** An ENI's pod addresses: its secondaries and every address of its prefixes (its own primary is the node's). */
const ipsOf = (e: { secondaryIps: string[]; ipv4Prefixes?: string[] }) =>
  e.secondaryIps.length + PREFIX_SIZE * (e.ipv4Prefixes?.length ?? 0);
/** Addresses an unassign takes away. */
const unassignedIps = (u: { ips: string[]; prefixes?: string[] }) =>
  u.ips.length + PREFIX_SIZE * (u.prefixes?.length ?? 0);

const prefixMode = (spec: ENIPool['spec']) => spec.ipv4Mode === 'Prefix';

/** In Prefix mode, an ENI in a fragmented vSwitch takes single IPs instead, if the class allows. */
const fallsBack = (e: EniFact, o: PoolObservation) =>
  prefixMode(o.pool.spec) &&
  o.pool.spec.prefixFallback !== false &&
  o.vSwitches.some((v) => v.id === e.vSwitchId && v.fragmented);

/**
 * Whether a secondary ENI's slots hold prefixes: it has some, or it has nothing yet in a
 * Prefix-mode pool (unless it falls back). An ENI never mixes: one with single IPs keeps them.
 */
const holdsPrefixes = (e: EniFact, o: PoolObservation) =>
  (e.ipv4Prefixes?.length ?? 0) > 0 || (prefixMode(o.pool.spec) && e.secondaryIps.length === 0 && !fallsBack(e, o));

/**
 * A secondary ENI of the other ipv4Mode than the class's (the class changed): it takes no new
 * address and gives its own back first, so that the node moves over as pods come and go. A
 * single-IP ENI in a fragmented vSwitch is the fallback, not off mode.
 */
const offMode = (e: EniFact, o: PoolObservation) =>
  prefixMode(o.pool.spec)
    ? e.secondaryIps.length > 0 && !e.ipv4Prefixes?.length && !fallsBack(e, o)
    : (e.ipv4Prefixes?.length ?? 0) > 0;

/**
 * An ENI a pod holds whole (its primary is the pod's: left by an Exclusive spell of the class): it
 * takes no address while that pod runs, its device being in the pod, not on the node. (A Shared
 * ENI whose primary an old pod holds has secondaries: it still takes more.)
 */
export const heldWhole = (e: EniFact, status: ENIPoolStatus | undefined): boolean =>
  !e.primary &&
  !e.secondaryIps.length &&
  !e.ipv4Prefixes?.length &&
  !e.ipv6?.length &&
  !e.ipv6Prefixes?.length &&
  e.primaryIp in (status?.used ?? {});

/** A pool's sizing with the ceiling resolved against what its instance type holds. */
export const sizingOf = (spec: ENIPool['spec'], limits: InstanceLimits): Sizing => ({
  minAllocate: spec.minAllocate ?? 0,
  preAllocate: spec.preAllocate ?? 8,
  maxAboveWatermark: spec.maxAboveWatermark ?? 0,
  maxAllocate: resolveMaxAllocate(
    spec.maxAllocate ?? 0,
    podIpCapacity(limits, spec.usePrimaryENI === true, prefixMode(spec)),
  ),
});

/** The instance's primary ENI, InUse on the pool's instance. */
const primaryOf = (o: PoolObservation): EniFact | undefined =>
  o.primaryEni?.status === 'InUse' && o.primaryEni.instanceId === o.pool.spec.instanceID ? o.primaryEni : undefined;

/**
 * With IPv6, the primary ENI serves pods only where the node's own vSwitch has an IPv6 CIDR (ECS
 * gives an ENI IPv6 addresses of its vSwitch alone).
 */
const primaryLacksIpv6 = (o: PoolObservation, primary: EniFact): boolean =>
  needsIpv6(o.pool.spec) && !o.vSwitches.find((v) => v.id === primary.vSwitchId)?.ipv6Cidr;

/** Whether `e` is the primary ENI and gives a dual-stack pool's pods their IPv6 addresses. */
const servesIpv6 = (o: PoolObservation, e: EniFact): boolean => dualStack(o.pool.spec) && usablePrimary(o)?.id === e.id;

/** The primary ENI, if the pool gives pods its secondaries (usePrimaryENI): it takes new addresses. */
const usablePrimary = (o: PoolObservation): EniFact | undefined => {
  const primary = o.pool.spec.usePrimaryENI ? primaryOf(o) : undefined;
  return primary && !primaryLacksIpv6(o, primary) ? primary : undefined;
};

/**
 * The primary ENI as part of the pool: usable, or being drained (the class stopped using it, or
 * it cannot serve the class's IPv6, while it still holds addresses the pool published): then it
 * takes none, and its addresses go back first, through the release handshake, as pods leave them.
 */
const pooledPrimary = (o: PoolObservation): EniFact | undefined => {
  const primary = primaryOf(o);
  if (!primary) return undefined;
  if (usablePrimary(o)) return primary;
  const published = o.pool.status?.enis?.some((e) => e.id === primary.id);
  return published && primary.secondaryIps.length ? primary : undefined;
};

/**
 * Released IPs still cooling down, and when each cool-down ends (IPs not in use): until then
 * the node cannot hand them out, so they count as used, and they are not released.
 */
export function coolingIps(status: ENIPoolStatus | undefined, now: number): Array<{ ip: string; until: number }> {
  const used = status?.used ?? {};
  return Object.entries(status?.cooling ?? {})
    .filter(([ip]) => !(ip in used))
    .map(([ip, until]) => ({ ip, until: Date.parse(until) }))
    .filter((c) => c.until > now);
}

type Changes = Pick<
  PoolPlan,
  | 'adopt'
  | 'assign'
  | 'create'
  | 'securityGroupIds'
  | 'unassign'
  | 'deleteEnis'
  | 'assignIpv6'
  | 'unassignIpv6'
  | 'assignIpv6Prefixes'
  | 'unassignIpv6Prefixes'
>;
/** A plan's changes when it changes nothing (each step fills in its own). */
export const noChanges = (): Changes => ({
  adopt: [],
  assign: [],
  create: [],
  assignIpv6: [],
  unassignIpv6: [],
  assignIpv6Prefixes: [],
  unassignIpv6Prefixes: [],
  securityGroupIds: [],
  unassign: [],
  deleteEnis: [],
});

/**
 * One pool, planned at once: what to attach, assign, create, request, unassign and delete, the
 * status with its conditions once that is done, the Events, and when to look again. Usage is
 * read once from the observation; the release step goes first, and the allocation is sized on
 * what the node keeps after it.
 */
export function planPool(observed: PoolObservation, m: PoolMemory): PoolPlan {
  const o = nodeAddressesAside(observed);
  const spec = o.pool.spec;
  // An Exclusive pool is sized in whole ENIs, one per pod (exclusive.ts).
  if (exclusiveMode(spec)) return planExclusive(o, m);
  // An IPv6-only pool of /80s needs one of them, and plans what else its ENIs hold as single addresses.
  if (ipv6Only(spec) && ipv6PrefixMode(spec)) return planIpv6OnlyPrefix(o, m, planPool, usablePrimary(o));
  // An IPv6-only pool is planned in IPv6 pod addresses by the same steps (ipv6-only.ts).
  return ipv6Only(spec) ? ipv6OnlyPlan(planInFamily(ipv6OnlyView(o), ipv6OnlyMemory(m))) : planInFamily(o, m);
}

/**
 * The observation with the node's own addresses (its Node's InternalIPs, such as an IPv6 address
 * the instance was given) taken off the primary ENI: never a pod's, never counted as room, never
 * released.
 */
function nodeAddressesAside(o: PoolObservation): PoolObservation {
  if (!o.primaryEni || !o.nodeAddresses?.length) return o;
  return { ...o, primaryEni: withoutAddresses(o.primaryEni, o.nodeAddresses) };
}

/** An ENI without `own` among its secondaries of either family (the primary ENI less the node's own addresses). */
export function withoutAddresses<E extends { secondaryIps: string[]; ipv6?: string[] }>(
  e: E,
  own: readonly string[],
): E {
  const mine = (ip: string) => !own.includes(ip);
  return { ...e, secondaryIps: e.secondaryIps.filter(mine), ...(e.ipv6 ? { ipv6: e.ipv6.filter(mine) } : {}) };
}

/** planPool in the pool's pod family: its ENIs' pod addresses are `secondaryIps` and `ipv4Prefixes`. */
function planInFamily(o: PoolObservation, m: PoolMemory): PoolPlan {
  const { pool, now } = o;
  const spec = pool.spec;
  const limits = o.limits && familyLimits(o.limits, spec);
  const events: PlannedEvent[] = [];
  // Sized in the pod family: a dual-stack pod's IPv6 address follows its IPv4 one (families.ts).
  const inUseNow = usedInFamily(pool.status, spec);
  const horizonMs = batchHorizonMs(releaseDelayMs(spec));
  const memory = {
    deficitSince: m.deficitSince,
    excessSince: m.excessSince,
    shortfall: m.shortfall,
    demand: observeDemand(m.demand, inUseNow, now, horizonMs),
  };
  // A primary ENI that cannot serve the class's IPv6 holds no room of the pool's.
  const lacking = spec.usePrimaryENI ? primaryOf(o) : undefined;
  const primaryServes = !(lacking && primaryLacksIpv6(o, lacking));
  const sizing = limits ? sizingOf(primaryServes ? spec : { ...spec, usePrimaryENI: false }, limits) : undefined;
  const cooling = coolingIps(pool.status, now);
  const coolingInFamily = cooling.filter((c) => inPodFamily(spec)(c.ip)).length;
  const finish = (plan: Omit<PoolPlan, 'status' | 'events' | 'memory'>, s: StatusInput): PoolPlan => {
    const retry = nextAttempt(m.failures, now);
    const requeueAfterMs = retry === undefined ? plan.requeueAfterMs : min(plan.requeueAfterMs, retry - now + 50);
    return {
      ...plan,
      requeueAfterMs,
      events,
      memory,
      status: plannedStatus(o, m.failures, memory.shortfall, sizing, coolingInFamily, s, events),
    };
  };
  const notReady = (reason: string, message: string, requeueAfterMs?: number, adopt: PoolPlan['adopt'] = []) =>
    finish({ ...noChanges(), adopt, requeueAfterMs }, { notReady: { reason, message } });

  if (o.unservable) return notReady(o.unservable.reason, o.unservable.message);
  if (!spec.instanceID || !spec.instanceType || !spec.zoneID) {
    const why = 'the pool names no ECS instance, instance type or zone; the node lacks its providerID or labels';
    return notReady('NoInstance', why);
  }
  if (!limits || !sizing) {
    events.push(
      warning('UnknownInstanceType', `instance type ${spec.instanceType} is not known to DescribeInstanceTypes`),
    );
    return notReady('UnknownInstanceType', `instance type ${spec.instanceType} is unknown`, 60_000);
  }
  if (needsIpv6(spec) && !((limits.ipv6PerEni ?? 0) > 0)) {
    const why =
      `instance type ${spec.instanceType} has no IPv6 addresses per ENI (EniIpv6AddressQuantity 0): ` +
      `ipFamilies [${spec.ipFamilies!.join(', ')}] cannot be served on it; use [IPv4], or another type`;
    events.push(warning('NoIPv6OnInstanceType', why));
    return notReady('NoIPv6OnInstanceType', why, 60_000);
  }
  if (lacking && !primaryServes) {
    const why =
      `usePrimaryENI: the node's vSwitch ${lacking.vSwitchId} has no IPv6 CIDR, so its primary ENI ${lacking.id} ` +
      `cannot give pods IPv6 addresses (ipFamilies [${spec.ipFamilies!.join(', ')}]); secondary ENIs serve them. ` +
      'Enable IPv6 on that vSwitch, or set usePrimaryENI false';
    events.push(warning('PrimaryENIWithoutIPv6', why));
  }
  const mayAllocate = o.mode !== 'read-only';
  const blocked = (action: string) => heldBack(m.failures, action, now) !== undefined;
  const idle = (e: EniFact) => !e.attaching && !e.removing;
  const mine = (e: EniFact) => e.ours && !e.removing;
  const primary = usablePrimary(o);
  const pooled = pooledPrimary(o);
  // The primary ENI first: its room is filled before any ENI is created.
  const inUse = [...(pooled ? [pooled] : []), ...o.instanceEnis.filter((e) => mine(e) && e.status === 'InUse')];
  const available = sum(inUse.map(ipsOf));
  const busy = inUseNow + coolingInFamily;

  const batch = batchOf(memory.demand, inUseNow, now, horizonMs, spec.maxBatch ?? DEFAULT_MAX_BATCH);

  // Release first: the confirmed IPs it gives back are not there for the allocation.
  const release = releasesNow(o)
    ? planReleaseStep(
        o,
        sizing,
        { available, used: busy, pending: o.pendingPods },
        keptBatch(memory.demand, batch),
        inUse,
        memory,
        blocked,
      )
    : { releaseRequests: {}, unassign: [], deleteEnis: [], leaving: 0, requeueAfterMs: undefined };
  // A primary ENI that cannot serve the class's IPv6 is drained (the release step gives its
  // addresses back first), and what it keeps is no room: a dual-stack pod takes both families
  // from one ENI.
  const dead =
    pooled && !primaryServes
      ? ipsOf(pooled) - sum(release.unassign.filter((u) => u.eniId === pooled.id).map(unassignedIps))
      : 0;
  const usage: Usage = { available: available - release.leaving - dead, used: busy, pending: o.pendingPods };

  // Our ENIs that another operator instance left half-done are finished, not replaced.
  const adopt = adoptions(o, blocked);
  // On their way: ENIs in flight, ours parked Available (an attach held back or adopted now),
  // and ours Attaching that nobody waits for yet. Those on the instance already hold a slot there.
  const parked = o.ownedEnis.filter((e) => idle(e) && e.status === 'Available' && !e.instanceId);
  const waiting = o.instanceEnis.filter((e) => mine(e) && idle(e) && e.status === 'Attaching');
  const coming = {
    enis: Math.max(0, o.inFlight.enis - o.instanceEnis.filter((e) => e.attaching).length) + parked.length,
    ips: o.inFlight.ips + sum([...parked, ...waiting].map(ipsOf)),
  };
  // As the ENIs will be once the release is done (the shell unassigns before it assigns); an ENI
  // being deleted still holds its slot until it is gone.
  const deleted = new Set(release.deleteEnis);
  const unassigned = (id: string) => sum(release.unassign.filter((u) => u.eniId === id).map(unassignedIps));
  const gone = new Set(release.unassign.flatMap((u) => [...u.ips, ...(u.prefixes ?? [])]));
  const afterRelease = (e: EniFact): EniFact => ({
    ...e,
    secondaryIps: e.secondaryIps.filter((ip) => !gone.has(ip)),
    ipv4Prefixes: e.ipv4Prefixes?.filter((p) => !gone.has(p)),
  });
  const views: EniView[] = o.instanceEnis.map((e) => {
    if (!mine(e) || deleted.has(e.id) || heldWhole(e, pool.status))
      return { id: e.id, vSwitchId: e.vSwitchId, attached: false, ips: podIpsPerEni(limits) };
    const after = afterRelease(e);
    return {
      id: e.id,
      vSwitchId: e.vSwitchId,
      // One of the mode the class left takes nothing new (it still holds its slot), nor one whose
      // IPv6 entries leave no room for what new addresses need.
      attached: e.status === 'InUse' && !offMode(after, o) && !ipv6Full(after, o),
      ips: ipsOf(after),
      slots: after.secondaryIps.length + (after.ipv4Prefixes?.length ?? 0),
      ...(holdsPrefixes(after, o) ? { prefix: true } : {}),
    };
  });
  if (primary) {
    const ips = ipsOf(primary) - unassigned(primary.id);
    views.unshift({ id: primary.id, vSwitchId: primary.vSwitchId, attached: true, ips, primary: true });
  }
  const withComing = { ...usage, available: usage.available + coming.ips };
  const want = Math.max(0, toAllocate(sizing, withComing));
  if (needed(sizing, usage) > 0 && memory.deficitSince === undefined) memory.deficitSince = now;

  // Wanting more than the ceiling allows is a shortfall too, though nothing is left to plan.
  const unbounded = { ...sizing, maxAllocate: Number.MAX_SAFE_INTEGER };
  const beyondCeiling = needed(unbounded, withComing) > 0 && withComing.available >= sizing.maxAllocate;
  if (beyondCeiling) memory.shortfall = { reason: 'InstanceLimit', message: ceilingMessage(spec, limits, sizing) };

  const changes: Changes = { ...noChanges(), adopt, unassign: release.unassign, deleteEnis: release.deleteEnis };
  let unusable: StatusInput['notReady'];
  let capped = false;
  if (want > 0 && mayAllocate) {
    // The batch rides on calls made anyway, within the ceiling.
    const room = sizing.maxAllocate - withComing.available;
    // In Prefix mode the batch is whole /28s on top of the need's: one more costs no call.
    const wholeBatch = prefixMode(spec) ? Math.ceil(batch / PREFIX_SIZE) * PREFIX_SIZE : batch;
    const extra = Math.max(0, Math.min(wholeBatch, room - want));
    const step = planAllocationStep(
      o,
      limits,
      { want, extra, ceiling: room, views, creating: coming.enis },
      memory,
      blocked,
    );
    events.push(...step.events);
    unusable = step.unusable;
    capped = step.capped;
    Object.assign(changes, { assign: step.assign, create: step.create, securityGroupIds: step.securityGroupIds });
    // A batch asked of the cloud is kept for its horizon, whatever the rate measured meanwhile.
    if (extra > 0 && (step.assign.length || step.create.length))
      memory.demand = carry(memory.demand, extra, now, horizonMs);
  } else if (want === 0 && !beyondCeiling) memory.shortfall = undefined;
  // Dual-stack, or the other family left on the ENIs of a pool that no longer uses it (given back).
  if (dualStack(spec) || inUse.some((e) => e.ipv6?.length)) {
    const companions = planIpv6Step(
      o,
      limits,
      inUse,
      afterRelease,
      changes,
      release.releaseRequests,
      mayAllocate,
      blocked,
    );
    Object.assign(changes, companions);
  }
  if (dualStack(spec) || inUse.some((e) => e.ipv6Prefixes?.length))
    Object.assign(
      changes,
      planIpv6PrefixStep(o, limits, inUse, changes, release.releaseRequests, mayAllocate, blocked),
    );

  let requeueAfterMs = release.requeueAfterMs;
  // When the last cool-down ends the need drops: look again then, whatever the agent writes.
  if (cooling.length) requeueAfterMs = min(requeueAfterMs, Math.max(...cooling.map((c) => c.until)) - now + 50);
  return finish(
    { ...changes, requeueAfterMs },
    { releaseRequests: release.releaseRequests, changes, notReady: unusable, batch, capped },
  );
}

/**
 * The allocation step: the cheapest assigns and creates for `want` IPs in the class's vSwitches,
 * minus the actions held back; what the node lacks when even that falls short (only known when
 * everything is allowed and nothing is in flight); creates only with the security groups known
 * and no more than an ENI may join.
 */
function planAllocationStep(
  o: PoolObservation,
  limits: InstanceLimits,
  a: { want: number; extra: number; ceiling: number; views: EniView[]; creating: number },
  memory: Omit<PoolMemory, 'failures'>,
  blocked: (action: string) => boolean,
) {
  const spec = o.pool.spec;
  const events: PlannedEvent[] = [];
  // Dual-stack ENIs go only where the vSwitch has an IPv6 CIDR (elsewhere ECS refuses their IPv6).
  const candidates: VSwitchView[] = candidateVSwitches(spec, o.vSwitches, o.vpcId, spec.zoneID!)
    .filter((v) => !needsIpv6(spec) || v.ipv6Cidr)
    .map(({ id, free, blocked, fragmented }) => ({ id, free, blocked, ...(fragmented ? { fragmented } : {}) }));
  // The primary ENI's addresses come from the node's own vSwitch, which may be no vSwitch of the class.
  const primary = usablePrimary(o);
  const nodeVSwitch = primary && o.vSwitches.find((v) => v.id === primary.vSwitchId);
  if (nodeVSwitch && !candidates.some((c) => c.id === nodeVSwitch.id))
    candidates.push({ id: nodeVSwitch.id, free: nodeVSwitch.free, blocked: nodeVSwitch.blocked, assignOnly: true });
  // While attaches fail on this node, new ENIs would only pile up unattached.
  const allow = {
    assign: !blocked('AssignPrivateIpAddresses'),
    create: !blocked('CreateNetworkInterface') && !blocked('AttachNetworkInterface'),
  };
  const selection = spec.vSwitchSelection ?? 'MostFreeIPs';
  // In pod addresses: an ENI holds its secondaries for pods.
  const podLimits = { ...limits, ipv4PerEni: podIpsPerEni(limits) };
  const prefixes = prefixMode(spec) ? { fallback: spec.prefixFallback !== false } : undefined;
  const alloc = planAllocation({
    ...a,
    enis: a.views,
    limits: podLimits,
    vSwitches: candidates,
    selection,
    allow,
    prefixes,
    // A create carries 10 IPv6 addresses at most (ECS); an assign of more is split into calls of 10
    // (ipv6-only.ts), which still costs fewer calls, and no ENI slot, where a create would do.
    ...(ipv6Only(spec) ? { perCall: { create: CREATE_MAX_IPV6 } } : {}),
  });
  const fragmented = candidates.filter((c) => c.fragmented && !c.assignOnly);
  // No whole /28 fits under maxAllocate: the pool holds what it may.
  const capped = alloc.shortfall === 'ceiling';
  if (capped) memory.shortfall = undefined;
  else if (alloc.shortfall && a.creating === 0 && allow.assign && allow.create) {
    memory.shortfall =
      alloc.shortfall === 'instance-limit'
        ? { reason: 'InstanceLimit', message: instanceFullMessage(spec, limits) }
        : prefixes && fragmented.length
          ? { reason: 'VSwitchFragmented', message: fragmentedMessage(fragmented, prefixes.fallback, true) }
          : candidates.some((c) => !c.assignOnly)
            ? { reason: 'VSwitchExhausted', message: noVSwitchMessage(spec.zoneID!, candidates) }
            : {
                reason: 'NoVSwitchInZone',
                message: noVSwitchInZoneMessage(spec, placementZones(spec, o.vSwitches, o.vpcId)),
              };
  } else if (!alloc.shortfall) memory.shortfall = undefined;
  const assign = alloc.ops.flatMap((op) => (op.kind === 'assign' ? [op] : []));
  // Dual-stack: a new ENI carries its IPv6 companions (up to 10 at creation; the rest are assigned once it is InUse).
  const ipv6For = (ips: number) =>
    !dualStack(spec)
      ? {}
      : ipv6PrefixMode(spec)
        ? { ipv6Prefixes: IPV6_PREFIXES_PER_ENI }
        : { ipv6: Math.min(ips, CREATE_MAX_IPV6, limits.ipv6PerEni ?? 0) };
  const creates = alloc.ops.flatMap(({ kind, ...op }) =>
    kind === 'create' ? [{ ...(op as PoolPlan['create'][number]), ...ipv6For((op as { ips: number }).ips) }] : [],
  );
  // Creates need the security groups: unknown (their describe failed, which is said), none is made.
  const sgs = o.securityGroups && creates.length ? securityGroupsFor(spec, o.securityGroups, o.vpcId) : [];
  if (sgs.length > MAX_SECURITY_GROUPS_PER_ENI) {
    // No ENI can be created; assigns and releases need no security group and go on.
    const message =
      `${sgs.length} security groups match the pool (${sgs.join(', ')}); ` +
      `an ENI joins at most ${MAX_SECURITY_GROUPS_PER_ENI}`;
    events.push(warning('TooManySecurityGroups', message));
    return {
      assign,
      create: [],
      securityGroupIds: [],
      events,
      capped,
      unusable: { reason: 'TooManySecurityGroups', message },
    };
  }
  const create = o.securityGroups ? creates : [];
  return { assign, create, securityGroupIds: o.securityGroups ? sgs : [], events, capped, unusable: undefined };
}

/** Whether the pool gives anything back now: the operator releases, the class lets it, no other pool names the instance. */
const releasesNow = (o: PoolObservation): boolean =>
  o.mode === 'normal' && o.pool.spec.releaseExcessIPs !== false && !o.sharingInstance?.length;

/** Addresses pods hold in the pool's pod family (a dual-stack pod's IPv6 address is not a second pod). */
const usedInFamily = (status: ENIPoolStatus | undefined, spec: ENIPool['spec']) =>
  Object.keys(status?.used ?? {}).filter(inPodFamily(spec)).length;

/**
 * Dual-stack: each attached ENI's IPv6 addresses brought to its IPv4 pod addresses once this
 * plan's releases and assigns are done (families.ts); the IPv6 release requests are written
 * into `releaseRequests`. Nothing is requested or released where the IPv4 release is off.
 */
function planIpv6Step(
  o: PoolObservation,
  limits: InstanceLimits,
  inUse: EniFact[],
  afterRelease: (e: EniFact) => EniFact,
  changes: Changes,
  releaseRequests: Record<string, string>,
  mayAllocate: boolean,
  blocked: (action: string) => boolean,
): Pick<PoolPlan, 'assignIpv6' | 'unassignIpv6'> {
  const { pool } = o;
  const deleted = new Set(changes.deleteEnis);
  const assigned = (id: string) => sum(changes.assign.filter((a) => a.eniId === id).map((a) => a.count));
  const mayRelease = releasesNow(o) && !blocked('UnassignIpv6Addresses');
  const requests = new Map(
    Object.entries(pool.status?.releaseRequests ?? {}).filter(([key]) => inOtherFamily(pool.spec)(key)),
  );
  // Other-family addresses a pod holds without a pod-family one (its class changed under it):
  // they count toward their ENI's target, so that the free companions of new addresses stay.
  const used = pool.status?.used ?? {};
  const interfaceOf = (ip: string) => `${used[ip]!.containerID}/${used[ip]!.ifName ?? ''}`;
  const paired = new Set(Object.keys(used).filter(inPodFamily(pool.spec)).map(interfaceOf));
  const lone = (e: EniFact) => (e.ipv6 ?? []).filter((ip) => ip in used && !paired.has(interfaceOf(ip))).length;
  // An ENI of a /80 (or that gets one now) keeps only the single IPv6 addresses pods hold.
  const ofPrefix = (e: EniFact) => holdsIpv6Prefix(e, pool.spec);
  const inUseSingles = (e: EniFact) => (e.ipv6 ?? []).filter((ip) => ip in used).length;
  const plan = planCompanions({
    // The primary ENI's IPv6 is planned only where it serves dual-stack pods: left alone otherwise
    // (the node's own may be there, and a primary without IPv6 in its vSwitch could get none).
    enis: inUse
      .filter((e) => (!e.primary || servesIpv6(o, e)) && !deleted.has(e.id))
      .map((e) => ({
        id: e.id,
        attached: e.status === 'InUse',
        podIpv4: ofPrefix(e)
          ? inUseSingles(e)
          : (dualStack(pool.spec) ? ipsOf(afterRelease(e)) + assigned(e.id) : 0) + lone(e),
        ipv6: e.ipv6 ?? [],
      })),
    perEni: limits.ipv6PerEni ?? 0,
    used: new Set(Object.keys(pool.status?.used ?? {})),
    cooling: new Set(coolingIps(pool.status, o.now).map((c) => c.ip)),
    requests: mayRelease ? requests : new Map(),
    acks: acksOf(pool.status),
    now: o.now,
    allow: { assign: mayAllocate && !blocked('AssignIpv6Addresses'), release: mayRelease },
  });
  for (const key of plan.withdraw) delete releaseRequests[key];
  for (const key of plan.request) releaseRequests[key] = o.requestStamp;
  for (const key of plan.unassign.flatMap((u) => u.ips)) delete releaseRequests[key];
  return { assignIpv6: plan.assign, unassignIpv6: plan.unassign };
}

/**
 * An ENI whose IPv6 entries leave no room for what its new pod addresses need: in dual-stack
 * Prefix mode, one without a /80 whose entries are all single addresses (its IPv4 would have no
 * partner); in an IPv6-only pool, one whose leftover /80 takes an entry its singles would need.
 */
function ipv6Full(e: EniFact, o: PoolObservation): boolean {
  const spec = o.pool.spec;
  if (ipv6Only(spec)) return (e.ipv6Prefixes?.length ?? 0) > 0;
  return (
    dualStack(spec) &&
    ipv6PrefixMode(spec) &&
    !e.ipv6Prefixes?.length &&
    (e.ipv6?.length ?? 0) >= (o.limits?.ipv6PerEni ?? 0)
  );
}

/**
 * Whether an ENI's pods take their IPv6 addresses from a /80 (ipv6Mode Prefix): it holds one, or
 * it is a dual-stack pool's in Prefix mode (it gets one). Its single IPv6 addresses are only kept
 * while pods hold them.
 */
const holdsIpv6Prefix = (e: EniFact, spec: ENIPool['spec']): boolean =>
  (e.ipv6Prefixes?.length ?? 0) > 0 || (dualStack(spec) && ipv6PrefixMode(spec));

/**
 * IPv6 /80 prefixes (ipv6Mode Prefix): each attached ENI of a dual-stack pool in Prefix mode holds
 * one (new ENIs get it at their creation; others once they are InUse, within the type's IPv6
 * entries). A prefix stays while the pool is dual-stack, whatever its mode now (an ENI keeps the
 * mode it was given), and goes once the pool stops using IPv6: requested through the release
 * handshake (one ack covers every address of it) and unassigned when the agent says `ready`.
 */
function planIpv6PrefixStep(
  o: PoolObservation,
  limits: InstanceLimits,
  inUse: EniFact[],
  changes: Changes,
  releaseRequests: Record<string, string>,
  mayAllocate: boolean,
  blocked: (action: string) => boolean,
): Pick<PoolPlan, 'assignIpv6Prefixes' | 'unassignIpv6Prefixes'> {
  const { pool, now } = o;
  const spec = pool.spec;
  const deleted = new Set(changes.deleteEnis);
  // The primary ENI too where it serves dual-stack pods (they take their IPv6 from its /80 as on
  // any ENI); otherwise its /80s are left alone, as the pool cannot tell one it gave from the node's.
  const enis = inUse.filter((e) => (!e.primary || servesIpv6(o, e)) && !deleted.has(e.id));
  const assignIpv6Prefixes: PoolPlan['assignIpv6Prefixes'] = [];
  const unassignIpv6Prefixes: PoolPlan['unassignIpv6Prefixes'] = [];
  const requests = new Map(Object.entries(pool.status?.releaseRequests ?? {}).filter(([key]) => isIpv6PrefixKey(key)));
  const held = new Set(enis.flatMap((e) => e.ipv6Prefixes ?? []));
  const mayRelease = releasesNow(o) && !blocked('UnassignIpv6Addresses');
  if (mayRelease) for (const key of requests.keys()) if (!held.has(key)) delete releaseRequests[key];
  const used = Object.keys(pool.status?.used ?? {}).filter(isIpv6);
  const cooling = coolingIps(pool.status, now)
    .map((c) => c.ip)
    .filter(isIpv6);
  // A prefix counts as used, or cooling, while any address of it is.
  const touched = (addresses: string[], prefixes: string[]) =>
    new Set(prefixes.filter((p) => addresses.some((ip) => inIpv6Prefix(ip, p))));
  for (const e of enis) {
    const prefixes = e.ipv6Prefixes ?? [];
    if (dualStack(spec)) {
      // A dual-stack pool keeps its /80s: a request left from a spell without IPv6 goes (the
      // agent hands out nothing of a requested prefix).
      for (const p of prefixes) delete releaseRequests[p];
      const entries =
        (e.ipv6?.length ?? 0) - sum(changes.unassignIpv6.filter((u) => u.eniId === e.id).map((u) => u.ips.length));
      const wanted =
        ipv6PrefixMode(spec) && prefixes.length === 0 && e.status === 'InUse' && !heldWhole(e, pool.status);
      if (wanted && mayAllocate && !blocked('AssignIpv6Addresses') && entries < (limits.ipv6PerEni ?? 0))
        assignIpv6Prefixes.push({ eniId: e.id, count: IPV6_PREFIXES_PER_ENI });
      continue;
    }
    if (!mayRelease || !prefixes.length) continue;
    const release = planRelease({
      enis: [{ id: e.id, primaryIp: '', secondaryIps: prefixes, keep: true }],
      // A cooling address keeps its /80 as a used one does, whatever an ack says.
      used: touched([...used, ...cooling], prefixes),
      excess: prefixes.length,
      excessSince: now,
      now,
      delayMs: 0,
      requests: new Map([...requests].filter(([key]) => prefixes.includes(key))),
      acks: acksOf(pool.status),
      deleteEmptyEnis: false,
    });
    for (const key of release.withdraw) delete releaseRequests[key];
    for (const key of release.request) releaseRequests[key] = o.requestStamp;
    for (const u of release.unassign)
      for (let i = 0; i < u.ips.length; i += UNASSIGN_IPV6_PREFIX_BATCH) {
        const batch = u.ips.slice(i, i + UNASSIGN_IPV6_PREFIX_BATCH);
        unassignIpv6Prefixes.push({ eniId: e.id, prefixes: batch });
        for (const key of batch) delete releaseRequests[key];
      }
  }
  return { assignIpv6Prefixes, unassignIpv6Prefixes };
}

/** An ENI's confirmed addresses and prefixes as unassign calls, each within what one call takes. */
export function unassignCalls(u: { eniId: string; ips: string[]; prefixes?: string[] }): PoolPlan['unassign'] {
  const calls: PoolPlan['unassign'] = [];
  for (let i = 0; i < u.ips.length; i += UNASSIGN_BATCH)
    calls.push({ eniId: u.eniId, ips: u.ips.slice(i, i + UNASSIGN_BATCH) });
  const prefixes = u.prefixes ?? [];
  for (let i = 0; i < prefixes.length; i += UNASSIGN_PREFIX_BATCH)
    calls.push({ eniId: u.eniId, ips: [], prefixes: prefixes.slice(i, i + UNASSIGN_PREFIX_BATCH) });
  return calls;
}

/**
 * The release handshake's step: requests, withdrawals, unassigns of confirmed IPs (in batches
 * of 50), ENIs confirmed empty; how many IPs leave the node now, and when the delay ends.
 */
function planReleaseStep(
  o: PoolObservation,
  sizing: Sizing,
  usage: Usage,
  batch: number,
  inUse: EniFact[],
  memory: Omit<PoolMemory, 'failures'>,
  blocked: (action: string) => boolean,
) {
  const { pool, now } = o;
  const spec = pool.spec;
  const releaseRequests = { ...(pool.status?.releaseRequests ?? {}) };
  const ex = excess(sizing, usage, batch);
  memory.excessSince = ex > 0 ? (memory.excessSince ?? now) : undefined;
  const delayMs = releaseDelayMs(spec);
  const release = planRelease({
    enis: inUse.map((e) => ({
      id: e.id,
      primaryIp: e.primaryIp,
      secondaryIps: e.secondaryIps,
      prefixes: (e.ipv4Prefixes ?? []).map((prefix) => ({ prefix, ips: prefixAddresses(prefix) })),
      keep: e.primary || e.keep,
      // Given back first: a primary ENI no longer used, and an ENI of the mode the class left.
      drain: (e.primary && !usablePrimary(o)) || (!e.primary && offMode(e, o)),
    })),
    used: new Set(Object.keys(pool.status?.used ?? {})),
    excess: ex,
    singleSlack: prefixMode(spec) ? PREFIX_SIZE - 1 : 0,
    excessSince: memory.excessSince,
    now,
    delayMs,
    cooling: new Set(coolingIps(pool.status, now).map((c) => c.ip)),
    // IPv6 requests are the IPv6 step's (planIpv6Step).
    requests: new Map(Object.entries(pool.status?.releaseRequests ?? {}).filter(([key]) => inPodFamily(spec)(key))),
    acks: acksOf(pool.status),
    deleteEmptyEnis: spec.deleteEmptyENIs ?? false,
  });
  for (const ip of release.withdraw) delete releaseRequests[ip];
  for (const ip of release.request) releaseRequests[ip] = o.requestStamp;
  // An ENI goes whole only with its other family's addresses free too (a dual-stack pod holds one
  // of each); one that may not go has its confirmed addresses unassigned instead.
  const busy = new Set([...Object.keys(pool.status?.used ?? {}), ...coolingIps(pool.status, now).map((c) => c.ip)]);
  const emptied = inUse.filter((e) => release.deleteEnis.includes(e.id));
  const deleted = emptied.filter(
    (e) =>
      !(e.ipv6 ?? []).some((ip) => busy.has(ip)) &&
      !(e.ipv6Prefixes ?? []).some((p) => [...busy].some((ip) => inIpv6Prefix(ip, p))),
  );
  const kept = emptied
    .filter((e) => !deleted.includes(e))
    .map((e) => ({ eniId: e.id, ips: e.secondaryIps, prefixes: e.ipv4Prefixes ?? [] }));
  const unassign: PoolPlan['unassign'] = [];
  if (!blocked('UnassignPrivateIpAddresses')) {
    for (const u of [...release.unassign, ...kept]) {
      unassign.push(...unassignCalls(u));
      for (const key of [...u.ips, ...(u.prefixes ?? [])]) delete releaseRequests[key];
    }
  }
  for (const key of deleted.flatMap((e) => [
    e.primaryIp,
    ...e.secondaryIps,
    ...(e.ipv4Prefixes ?? []),
    ...(e.ipv6 ?? []),
    ...(e.ipv6Prefixes ?? []),
  ]))
    delete releaseRequests[key];
  const leaving = sum(unassign.map(unassignedIps)) + sum(deleted.map(ipsOf));
  const since = memory.excessSince;
  const pending = ex > 0 && since !== undefined && now - since < delayMs;
  return {
    releaseRequests,
    unassign,
    deleteEnis: deleted.map((e) => e.id),
    leaving,
    requeueAfterMs: pending ? delayMs - (now - since) + 50 : undefined,
  };
}

interface StatusInput {
  notReady?: { reason: string; message: string };
  /** Absent: the requests stay as they are. */
  releaseRequests?: Record<string, string>;
  changes?: Pick<
    PoolPlan,
    'assign' | 'unassign' | 'deleteEnis' | 'assignIpv6' | 'unassignIpv6' | 'assignIpv6Prefixes' | 'unassignIpv6Prefixes'
  >;
  /** The growth batch learned from the node's demand. */
  batch?: number;
  /** No whole /28 fits under maxAllocate: the pool is at its ceiling though short of it. */
  capped?: boolean;
}

/** The status the pool will have once the changes are made: its ENIs, summary and conditions. */
function plannedStatus(
  o: PoolObservation,
  failures: readonly FailureRecord[],
  short: Shortfall | undefined,
  sizing: Sizing | undefined,
  cooling: number,
  s: StatusInput,
  events: PlannedEvent[],
): PlannedStatus {
  const { pool, now } = o;
  const instanceId = pool.spec.instanceID;
  const deleted = new Set(s.changes?.deleteEnis ?? []);
  const primary = pooledPrimary(o);
  const published = instanceId
    ? [
        ...(primary ? [primary] : []),
        ...o.ownedEnis.filter(
          (e) => (e.instanceId === instanceId || e.status === 'Available') && !e.removing && !deleted.has(e.id),
        ),
      ]
    : [];
  const changed =
    sum((s.changes?.assign ?? []).map((a) => a.count)) - sum((s.changes?.unassign ?? []).map(unassignedIps));
  const available = sum(published.filter((e) => e.status === 'InUse').map(ipsOf)) + changed;
  const prefixes =
    sum(published.filter((e) => e.status === 'InUse').map((e) => e.ipv4Prefixes?.length ?? 0)) +
    sum((s.changes?.assign ?? []).map((a) => (a.prefix ? a.count / PREFIX_SIZE : 0))) -
    sum((s.changes?.unassign ?? []).map((u) => u.prefixes?.length ?? 0));
  const used = usedInFamily(pool.status, pool.spec);
  const busy = used + cooling;
  // The primary ENI's IPv6 is the pool's only where it serves dual-stack pods (else it may be the node's, and is not published).
  const sixOf = (e: EniFact) => !e.primary || servesIpv6(o, e);
  const ipv6 = dualStack(pool.spec) || published.some((e) => sixOf(e) && (e.ipv6?.length || e.ipv6Prefixes?.length));
  // Per ENI once the changes are made: its single IPv6 addresses, and, where it holds a /80, one
  // for each of its IPv4 pod addresses (ipv6Room, the count the publish check makes too).
  const onEni = <T>(list: T[] | undefined, id: string, n: (x: T) => number) =>
    sum((list ?? []).filter((x) => (x as { eniId: string }).eniId === id).map(n));
  let ipv6Prefixes = 0;
  const availableIPv6 = sum(
    published
      .filter((e) => e.status === 'InUse' && sixOf(e))
      .map((e) => {
        const c = s.changes;
        const singles =
          (e.ipv6?.length ?? 0) +
          onEni(c?.assignIpv6, e.id, (a) => a.count) -
          onEni(c?.unassignIpv6, e.id, (u) => u.ips.length);
        const prefixes =
          (e.ipv6Prefixes?.length ?? 0) +
          onEni(c?.assignIpv6Prefixes, e.id, (a) => a.count) -
          onEni(c?.unassignIpv6Prefixes, e.id, (u) => u.prefixes.length);
        const ipv4 = ipsOf(e) + onEni(c?.assign, e.id, (a) => a.count) - onEni(c?.unassign, e.id, unassignedIps);
        ipv6Prefixes += prefixes;
        return ipv6Room(ipv4, singles, dualStack(pool.spec) ? prefixes : 0);
      }),
  );
  const releaseRequests = s.releaseRequests ?? pool.status?.releaseRequests ?? {};
  const need = sizing && !s.capped ? needed(sizing, { available, used: busy, pending: o.pendingPods }) : 0;
  const maxAllocate = sizing?.maxAllocate ?? 0;
  const ready: Omit<PlannedCondition, 'type'> = s.notReady
    ? { status: 'False', ...s.notReady }
    : need === 0
      ? {
          status: 'True',
          reason: (available >= maxAllocate && maxAllocate > 0) || s.capped ? 'AtCapacity' : 'PoolFilled',
          message: `${available - busy} of ${available} IPs free${s.capped ? `; no whole /28 fits under maxAllocate ${maxAllocate}` : ''}`,
        }
      : {
          status: 'False',
          reason: short ? short.reason : 'Allocating',
          message: short ? short.message : `${need} more IPs are being allocated`,
        };
  const planned: PlannedCondition[] = [
    { type: 'Ready', ...ready },
    short
      ? { type: 'Exhausted', status: 'True', reason: short.reason, message: short.message }
      : { type: 'Exhausted', status: 'False', reason: 'CapacityLeft', message: '' },
    duplicate(o) ?? degradedOrOutage(failures, o.cloudOutage),
    ...(prefixMode(pool.spec) || pool.status?.conditions?.some((c) => c.type === 'Fragmented')
      ? [fragmentedCondition(o)]
      : []),
  ];
  const wasDuplicate = pool.status?.conditions?.find((c) => c.type === 'Degraded')?.reason === 'DuplicateInstance';
  if (planned[2]!.reason === 'DuplicateInstance' && !wasDuplicate)
    events.push(warning('DuplicateInstance', planned[2]!.message!));
  const at = conditionTime(now);
  const conditions = planned.reduce((list, c) => setCondition(list, c, at), pool.status?.conditions ?? []);
  // What the pool said that the cloud now contradicts (an ENI detached or deleted behind our back).
  const eniIds = published.map((e) => e.id);
  const removing = new Set(o.ownedEnis.filter((e) => e.removing).map((e) => e.id));
  for (const old of pool.status?.enis ?? []) {
    if (eniIds.includes(old.id) || deleted.has(old.id) || removing.has(old.id) || o.removedByUs.has(old.id)) continue;
    // The primary ENI leaves the pool when the class stops using it; it is still the node's.
    if (old.id === o.primaryEni?.id || old.deviceIndex === 0) continue;
    events.push(
      warning(
        'ENIGone',
        `ENI ${old.id} is no longer on ${instanceId} (found by a resync); ` +
          `its ${old.ips?.length ?? 0} IPs are withdrawn from the pool`,
      ),
    );
  }
  return {
    eniIds,
    summary: {
      enis: eniIds.length,
      available,
      used,
      needed: need,
      releasing: Object.keys(releaseRequests).length,
      batch: s.batch ?? 0,
      ...(prefixes > 0 || prefixMode(pool.spec) ? { prefixes } : {}),
      ...(ipv6
        ? {
            availableIPv6,
            usedIPv6: Object.keys(pool.status?.used ?? {}).filter(isIpv6).length,
            ...(ipv6Prefixes > 0 || ipv6PrefixMode(pool.spec) ? { ipv6Prefixes } : {}),
          }
        : {}),
    },
    releaseRequests,
    conditions,
    observedGeneration: pool.metadata.generation,
  };
}

function ceilingMessage(spec: ENIPool['spec'], limits: InstanceLimits, sizing: Sizing): string {
  const capacity = podIpCapacity(limits, spec.usePrimaryENI === true, prefixMode(spec));
  const byClass = (spec.maxAllocate ?? 0) > 0 && spec.maxAllocate! < capacity;
  if (byClass) return `the pool is at its maxAllocate of ${sizing.maxAllocate} IPs`;
  const slot = prefixMode(spec) ? `/28 prefixes of ${PREFIX_SIZE} IPs` : 'secondary IPs';
  const secondary = `${limits.eniQuantity - 1} secondary ENIs × ${podIpsPerEni(limits)} ${slot}`;
  const shape = spec.usePrimaryENI ? `${secondary}, and ${podIpsPerEni(limits)} on the primary ENI` : secondary;
  const instance = `instance ${spec.instanceID} (${spec.instanceType})`;
  return `${instance} holds at most ${sizing.maxAllocate} pod IPs (${shape}); the pool wants more`;
}

const instanceFullMessage = (spec: ENIPool['spec'], limits: InstanceLimits) =>
  `instance ${spec.instanceID} (${spec.instanceType}) holds no more ENIs or IPs ` +
  `(${limits.eniQuantity} ENIs × ${limits.ipv4PerEni} IPs)`;

/** Another pool names this pool's instance: what a user must resolve before anything is released. */
function duplicate(o: PoolObservation): PlannedCondition | undefined {
  if (!o.sharingInstance?.length) return undefined;
  const { name } = o.pool.metadata;
  const others = o.sharingInstance.join(', ');
  return {
    type: 'Degraded',
    status: 'True',
    reason: 'DuplicateInstance',
    message:
      `pools ${name} and ${others} name the same instance ${o.pool.spec.instanceID} (a duplicated providerID, ` +
      'or a renamed node whose old Node stays): nothing is released from either until one is fixed or deleted; ' +
      'each counts only the ENIs made for it',
  };
}

function noVSwitchInZoneMessage(spec: ENIPool['spec'], zones: string[]): string {
  const of = spec.className ? `class ${spec.className}` : 'the pool';
  if (needsIpv6(spec))
    return `no vSwitch of ${of} with an IPv6 CIDR is in zone ${spec.zoneID} (dual-stack ENIs need one): enable IPv6 on one, or add one of zone ${spec.zoneID} that has it`;
  const where = zones.length ? `its vSwitches are in ${zones.join(', ')}` : 'it selects no vSwitch of the VPC';
  return `no vSwitch of ${of} is in zone ${spec.zoneID} (${where}): add one of zone ${spec.zoneID} to vSwitchIDs or vSwitchTags`;
}

/** In Prefix mode: whether a vSwitch of the pool refused a /28 lately though it has free addresses. */
function fragmentedCondition(o: PoolObservation): PlannedCondition {
  const spec = o.pool.spec;
  // A class that left Prefix mode: the condition says so rather than what it last saw.
  if (!prefixMode(spec)) return { type: 'Fragmented', status: 'False', reason: 'NotInPrefixMode', message: '' };
  const fragmented = spec.zoneID
    ? candidateVSwitches(spec, o.vSwitches, o.vpcId, spec.zoneID).filter((v) => v.fragmented)
    : [];
  if (!fragmented.length) return { type: 'Fragmented', status: 'False', reason: 'PrefixesAvailable', message: '' };
  const fallback = spec.prefixFallback !== false;
  return {
    type: 'Fragmented',
    status: 'True',
    reason: fallback ? 'FallingBackToSecondaryIPs' : 'WaitingForPrefixes',
    message: fragmentedMessage(fragmented, fallback),
  };
}

function fragmentedMessage(vSwitches: VSwitchView[], fallback: boolean, short = false): string {
  const which = vSwitches.map((v) => `${v.id} (${v.free} free)`).join(', ');
  const then = !fallback
    ? 'the pool waits for a /28 (prefixFallback is false)'
    : short
      ? 'new ENIs there would take single secondary IPs, but no ENI slot is left, and an ENI of prefixes takes no single IP'
      : 'new ENIs there take single secondary IPs instead (prefixFallback)';
  return `no aligned /28 prefix is left in ${which} though addresses are free: ${then}`;
}

function noVSwitchMessage(zoneId: string, candidates: VSwitchView[]): string {
  const seen = candidates.map((c) => `${c.id}: ${c.blocked ? 'blocked' : c.free}`).join(', ');
  return `no vSwitch of the class in ${zoneId} has free addresses (${seen || 'none match'})`;
}

const releaseDelayMs = (spec: ENIPool['spec']) => (spec.releaseDelaySeconds ?? 180) * 1000;
const warning = (reason: string, message: string): PlannedEvent => ({ type: 'Warning', reason, message });
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const min = (a: number | undefined, b: number) => Math.min(a ?? Infinity, b);
