import type { ENIPool, ENIPoolStatus } from '../api/types.js';
import { conditionTime, setCondition, type PlannedCondition } from './conditions.js';
import { adoptions } from './adopt.js';
import { degradedOrOutage, heldBack, nextAttempt } from './failure-record.js';
import { MAX_SECURITY_GROUPS_PER_ENI, candidateVSwitches, securityGroupsFor } from './placement.js';
import {
  coolingIps,
  noChanges,
  unassignCalls,
  type EniFact,
  type PlannedEvent,
  type PoolMemory,
  type PoolObservation,
  type PoolPlan,
} from './pool-plan.js';
import { PREFIX_SIZE, prefixAddresses } from './prefix.js';
import { acksOf, planRelease } from './release.js';
import { excess, needed, toAllocate, type Sizing } from './sizing.js';

/**
 * eniMode Exclusive: each pod takes a whole secondary ENI, moved into its network namespace, and
 * the ENI's own primary address is the pod's. The pool is sized in ENIs by the same rules as
 * addresses (sizing.ts): `preAllocate` idle ENIs attached above those pods hold, at least
 * `minAllocate`, at most `maxAllocate` and what the instance type has left. New ENIs carry no
 * secondary address; idle ones beyond the need go back through the release handshake keyed by
 * ENI id (one ack covers the ENI), after the release delay, and are then detached and deleted.
 */

export const exclusiveMode = (spec: Pick<ENIPool['spec'], 'eniMode'>): boolean => spec.eniMode === 'Exclusive';

/** A release request for a whole ENI names it by its id; one for an address or prefix by that. */
export const isEniKey = (key: string): boolean => key.startsWith('eni-');

/** The ENIs pods of an Exclusive pool hold, by their primary address (status.used, or cooling down). */
export function exclusiveBusy(status: ENIPoolStatus | undefined, now: number): Set<string> {
  const cooling = Object.entries(status?.cooling ?? {})
    .filter(([, until]) => Date.parse(until) > now)
    .map(([ip]) => ip);
  return new Set([...Object.keys(status?.used ?? {}), ...cooling]);
}

/**
 * The secondary ENIs pods of the node may have at most: the instance type's, less those attached
 * in other use (not ours, or ours holding secondary addresses from a Shared spell of the class),
 * within maxAllocate. What the agent advertises as `eniipam.io/eni`.
 */
export function podEniCeiling(o: PoolObservation): number {
  const slots = Math.max(0, (o.limits?.eniQuantity ?? 1) - 1);
  const other = o.instanceEnis.filter((e) => !e.ours || (!e.removing && !offered(e))).length;
  const max = o.pool.spec.maxAllocate ?? 0;
  return Math.max(0, Math.min(slots - other, max > 0 ? max : Infinity));
}

/** An ENI of ours a pod may take whole: no address but its own primary (IPv6 ones of a spell before too). */
const offered = (e: EniFact) =>
  e.ours &&
  !e.removing &&
  !e.secondaryIps.length &&
  !e.ipv4Prefixes?.length &&
  !e.ipv6?.length &&
  !e.ipv6Prefixes?.length;

/** Plans an Exclusive pool (see above): what to create, request, delete, and the status. */
export function planExclusive(o: PoolObservation, m: PoolMemory): PoolPlan {
  const { pool, now } = o;
  const spec = pool.spec;
  const events: PlannedEvent[] = [];
  const blocked = (action: string) => heldBack(failures, action, now) !== undefined;
  const { failures, ...remembered } = m;
  const memory: PoolPlan['memory'] = { ...remembered };
  const nothing = noChanges();
  const ceiling = podEniCeiling(o);
  const mine = o.ownedEnis.filter((e) => !e.removing && (e.instanceId === spec.instanceID || e.status === 'Available'));
  const statusOf = (
    eniIds: string[],
    summary: { available: number; used: number; needed: number },
    ready: Omit<PlannedCondition, 'type'>,
    releaseRequests: Record<string, string>,
    podENIs: number | null = ceiling,
  ) => {
    const planned: PlannedCondition[] = [
      { type: 'Ready', ...ready },
      memory.shortfall
        ? { type: 'Exhausted', status: 'True', ...memory.shortfall }
        : { type: 'Exhausted', status: 'False', reason: 'CapacityLeft', message: '' },
      degradedOrOutage(failures, o.cloudOutage),
    ];
    const conditions = planned.reduce(
      (list, c) => setCondition(list, c, conditionTime(now)),
      pool.status?.conditions ?? [],
    );
    return {
      eniIds,
      summary: {
        enis: eniIds.length,
        ...summary,
        releasing: Object.keys(releaseRequests).length,
        batch: 0,
        ...(podENIs === null ? {} : { podENIs }),
      },
      releaseRequests,
      conditions,
      observedGeneration: pool.metadata.generation,
    };
  };
  const retry = nextAttempt(failures, now);
  const later = (ms: number | undefined) => {
    const r = retry === undefined ? undefined : retry - now + 50;
    return ms === undefined ? r : r === undefined ? ms : Math.min(ms, r);
  };
  const busyIps = exclusiveBusy(pool.status, now);
  // The ENIs pods may take: ours, InUse on the instance (attached, though the attach is still
  // being confirmed), holding no secondary address; what the status renders as room.
  const inUse = o.instanceEnis.filter((e) => offered(e) && e.status === 'InUse');
  const notReady = (reason: string, message: string, requeueAfterMs?: number): PoolPlan => ({
    ...nothing,
    events,
    memory,
    requeueAfterMs: later(requeueAfterMs),
    status: statusOf(
      mine.map((e) => e.id),
      { available: inUse.length, used: Object.keys(pool.status?.used ?? {}).length, needed: 0 },
      { status: 'False', reason, message },
      pool.status?.releaseRequests ?? {},
      // Unknown without the instance type: the node's advertisement stays as it was.
      o.limits ? ceiling : null,
    ),
  });
  if (o.unservable) return notReady(o.unservable.reason, o.unservable.message);
  if (!spec.instanceID || !spec.instanceType || !spec.zoneID)
    return notReady(
      'NoInstance',
      'the pool names no ECS instance, instance type or zone; the node lacks its providerID or labels',
    );
  if (!o.limits) {
    events.push(
      warning('UnknownInstanceType', `instance type ${spec.instanceType} is not known to DescribeInstanceTypes`),
    );
    return notReady('UnknownInstanceType', `instance type ${spec.instanceType} is unknown`, 60_000);
  }

  const busy = (e: EniFact) => busyIps.has(e.primaryIp);
  const used = inUse.filter(busy).length;
  const sizing: Sizing = {
    minAllocate: spec.minAllocate ?? 0,
    preAllocate: spec.preAllocate ?? 8,
    maxAboveWatermark: spec.maxAboveWatermark ?? 0,
    maxAllocate: ceiling,
  };
  const usage = { available: inUse.length, used, pending: o.pendingPods };

  // Release: idle ENIs beyond the need, one request each (its id), deleted once the agent is ready.
  const ex = excess(sizing, usage);
  memory.excessSince = ex > 0 ? (memory.excessSince ?? now) : undefined;
  const releases = o.mode === 'normal' && spec.releaseExcessIPs !== false && !o.sharingInstance?.length;
  const requests = new Map(Object.entries(pool.status?.releaseRequests ?? {}));
  const releaseRequests: Record<string, string> = {};
  let deleteEnis: string[] = [];
  let requeueAfterMs: number | undefined;
  const delayMs = (spec.releaseDelaySeconds ?? 180) * 1000;
  let unassign: PoolPlan['unassign'] = [];
  if (releases) {
    const release = planRelease({
      enis: inUse.map((e) => ({ id: e.id, primaryIp: '', secondaryIps: [e.id] })),
      // Held by a pod, or cooling down after its pod left it (its device may still be on its way
      // back): neither requested nor deleted.
      used: new Set(inUse.filter(busy).map((e) => e.id)),
      excess: ex,
      excessSince: memory.excessSince,
      now,
      delayMs,
      requests: new Map([...requests].filter(([key]) => isEniKey(key))),
      acks: acksOf(pool.status),
      deleteEmptyEnis: true,
    });
    for (const [key, at] of requests) if (isEniKey(key) && !release.withdraw.includes(key)) releaseRequests[key] = at;
    for (const key of release.request) releaseRequests[key] = o.requestStamp;
    const drained = planDrain(o, requests, blocked);
    Object.assign(releaseRequests, drained.releaseRequests);
    unassign = drained.unassign;
    deleteEnis = blocked('DetachNetworkInterface') || blocked('DeleteNetworkInterface') ? [] : release.deleteEnis;
    for (const id of deleteEnis) delete releaseRequests[id];
    if (ex > 0 && now - memory.excessSince! < delayMs) requeueAfterMs = delayMs - (now - memory.excessSince!) + 50;
  } else {
    // Nothing is given back now: requests stay as they are, and none is answered by a delete.
    for (const [key, at] of requests) if (isEniKey(key)) releaseRequests[key] = at;
  }

  const adopt = adoptions(o, blocked);
  // On their way: ENIs being created, ours parked or attaching (adopted now, or waited for).
  const parkedAll = o.ownedEnis.filter((e) => !e.removing && !e.attaching && e.status === 'Available' && !e.instanceId);
  const parked = parkedAll.filter(offered);
  const waiting = o.instanceEnis.filter((e) => offered(e) && !e.attaching && e.status === 'Attaching');
  const onInstance = o.instanceEnis.filter((e) => e.attaching);
  // Not on the instance yet, each to take a slot: being created, or parked (adopted now, any of ours).
  const created = Math.max(0, o.inFlight.enis - onInstance.length);
  const arriving = created + parkedAll.length;
  // Coming for pods: those, less parked ones holding addresses, and ours attaching not InUse yet.
  const coming = created + parked.length + onInstance.filter((e) => e.status !== 'InUse').length + waiting.length;
  const kept = { ...usage, available: inUse.length - deleteEnis.length + coming };
  const want = o.mode === 'read-only' ? 0 : Math.max(0, toAllocate(sizing, kept));
  if (needed(sizing, usage) > 0 && memory.deficitSince === undefined) memory.deficitSince = now;
  if (needed(sizing, usage) === 0) memory.deficitSince = undefined;

  const create: PoolPlan['create'] = [];
  let securityGroupIds: string[] = [];
  let unusable: { reason: string; message: string } | undefined;
  // Slots on the instance: every ENI attached or attaching holds one, ours being deleted too.
  const free = Math.max(0, o.limits.eniQuantity - 1 - o.instanceEnis.length - arriving);
  const wanted = needed({ ...sizing, maxAllocate: Number.MAX_SAFE_INTEGER }, kept);
  if (wanted > 0 && kept.available >= ceiling && coming === 0)
    memory.shortfall = {
      reason: 'InstanceLimit',
      message:
        `instance ${spec.instanceID} (${spec.instanceType}) gives pods at most ${ceiling} exclusive ENIs ` +
        `(${o.limits.eniQuantity - 1} secondary ENIs${ceiling < o.limits.eniQuantity - 1 ? ', less those in other use or beyond maxAllocate' : ''}); the pool wants more`,
    };
  else if (want === 0) memory.shortfall = undefined;
  if (want > 0) {
    const vSwitches = candidateVSwitches(spec, o.vSwitches, o.vpcId, spec.zoneID)
      .filter((v) => !v.blocked && v.free > 0)
      .map((v) => ({ id: v.id, free: v.free }));
    const groups = o.securityGroups ? securityGroupsFor(spec, o.securityGroups, o.vpcId) : undefined;
    if (groups && groups.length > MAX_SECURITY_GROUPS_PER_ENI) {
      const message =
        `${groups.length} security groups match the pool (${groups.join(', ')}); ` +
        `an ENI joins at most ${MAX_SECURITY_GROUPS_PER_ENI}`;
      events.push(warning('TooManySecurityGroups', message));
      unusable = { reason: 'TooManySecurityGroups', message };
    } else if (groups && !blocked('CreateNetworkInterface') && !blocked('AttachNetworkInterface')) {
      const n = Math.min(want, free);
      for (let i = 0; i < n; i++) {
        // Each ENI takes one address of its vSwitch (its primary): MostFreeIPs spreads them.
        const pick =
          spec.vSwitchSelection === 'Ordered'
            ? vSwitches.find((v) => v.free > 0)
            : [...vSwitches].sort((a, b) => b.free - a.free).find((v) => v.free > 0);
        if (!pick) break;
        pick.free--;
        create.push({ vSwitchId: pick.id, ips: 0 });
      }
      securityGroupIds = create.length ? groups : [];
      if (create.length < n && coming === 0) {
        const seen = candidateVSwitches(spec, o.vSwitches, o.vpcId, spec.zoneID);
        memory.shortfall = seen.length
          ? {
              reason: 'VSwitchExhausted',
              message: `no vSwitch of the class in ${spec.zoneID} has a free address for an ENI (${seen.map((v) => `${v.id}: ${v.blocked ? 'blocked' : v.free}`).join(', ')})`,
            }
          : {
              reason: 'NoVSwitchInZone',
              message: `no vSwitch of the class is in zone ${spec.zoneID}: add one of zone ${spec.zoneID} to vSwitchIDs or vSwitchTags`,
            };
      }
    }
  }
  const coolingEnds = Object.values(pool.status?.cooling ?? {})
    .map((t) => Date.parse(t) - now)
    .filter((ms) => ms > 0);
  if (coolingEnds.length) requeueAfterMs = Math.min(requeueAfterMs ?? Infinity, Math.max(...coolingEnds) + 50);

  const deleted = new Set(deleteEnis);
  const available = inUse.length - deleteEnis.length;
  const need = needed(sizing, { ...usage, available });
  const ready: Omit<PlannedCondition, 'type'> = unusable
    ? { status: 'False', ...unusable }
    : need === 0
      ? {
          status: 'True',
          reason: available >= ceiling && ceiling > 0 ? 'AtCapacity' : 'PoolFilled',
          message: `${available - used} of ${available} exclusive ENIs free`,
        }
      : {
          status: 'False',
          reason: memory.shortfall?.reason ?? 'Allocating',
          message: memory.shortfall?.message ?? `${need} more exclusive ENIs are being created and attached`,
        };
  return {
    ...nothing,
    adopt,
    unassign,
    create,
    securityGroupIds,
    deleteEnis,
    events,
    memory,
    requeueAfterMs: later(requeueAfterMs),
    status: statusOf(
      mine.filter((e) => !deleted.has(e.id)).map((e) => e.id),
      { available, used: Object.keys(pool.status?.used ?? {}).length, needed: need },
      ready,
      releaseRequests,
    ),
  };
}

/**
 * What a Shared spell of the class left: ENIs of ours holding secondary addresses, which take
 * slots pods could have. (IPv6 ones are not drained: such an ENI stays other use, never a pod's
 * whole, until the node is replaced; the class refuses IPv6 with Exclusive.) Each address no pod holds or cools is requested at once (the switch was
 * the user's word; the release delay guards against demand coming back, and this demand is in
 * ENIs now), and unassigned once the agent confirms it. An ENI so emptied is one a pod may take;
 * one a pod of the Shared spell still uses keeps that address, and stays other use, until it leaves.
 */
function planDrain(
  o: PoolObservation,
  requests: ReadonlyMap<string, string>,
  blocked: (action: string) => boolean,
): { releaseRequests: Record<string, string>; unassign: PoolPlan['unassign'] } {
  const { pool, now } = o;
  const leftovers = o.instanceEnis.filter(
    (e) =>
      e.ours &&
      !e.removing &&
      !e.primary &&
      e.status === 'InUse' &&
      (e.secondaryIps.length > 0 || (e.ipv4Prefixes?.length ?? 0) > 0),
  );
  const enis = leftovers.map((e) => ({
    id: e.id,
    primaryIp: e.primaryIp,
    secondaryIps: e.secondaryIps,
    prefixes: (e.ipv4Prefixes ?? []).map((prefix) => ({ prefix, ips: prefixAddresses(prefix) })),
  }));
  const release = planRelease({
    enis,
    // Cooling counts as used here, whatever an ack says: the agent let it go moments ago.
    used: new Set([...Object.keys(pool.status?.used ?? {}), ...coolingIps(pool.status, now).map((c) => c.ip)]),
    excess: enis.reduce((n, e) => n + e.secondaryIps.length + e.prefixes.length * PREFIX_SIZE, 0),
    excessSince: now,
    now,
    delayMs: 0,
    requests: new Map([...requests].filter(([key]) => !isEniKey(key))),
    acks: acksOf(pool.status),
    deleteEmptyEnis: false,
  });
  const releaseRequests: Record<string, string> = {};
  for (const [key, at] of requests) if (!isEniKey(key) && !release.withdraw.includes(key)) releaseRequests[key] = at;
  for (const key of release.request) releaseRequests[key] = o.requestStamp;
  if (blocked('UnassignPrivateIpAddresses')) return { releaseRequests, unassign: [] };
  for (const u of release.unassign) for (const key of [...u.ips, ...(u.prefixes ?? [])]) delete releaseRequests[key];
  return { releaseRequests, unassign: release.unassign.flatMap(unassignCalls) };
}

const warning = (reason: string, message: string): PlannedEvent => ({ type: 'Warning', reason, message });
