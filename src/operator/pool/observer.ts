import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { ENIPool } from '../../api/types.js';
import type { NetworkInterface } from '../../cloud/index.js';
import { heldBack, type FailureRecord } from '../../ipam/failure-record.js';
import type { EniFact, PoolObservation } from '../../ipam/pool-plan.js';
import { showsConfirmedRelease } from '../../ipam/release.js';
import { TAGS } from '../eni/cloud-state.js';
import type { OperatorConfig } from '../config.js';
import type { PoolSide } from './ports.js';

export interface ObserveDeps extends Pick<
  PoolSide,
  'cache' | 'store' | 'cloud' | 'enis' | 'memory' | 'now' | 'health' | 'stamps'
> {
  config: Pick<OperatorConfig, 'clusterId' | 'vpcId' | 'mode'>;
}

/** The describes without which nothing can be planned. */
const REQUIRED = ['DescribeVSwitches', 'DescribeInstanceTypes'] as const;

/** A describe the pool's observation needs that is held back after failing: nothing to plan until it ends. */
export function describeHeldBack(deps: ObserveDeps, name: string): FailureRecord | undefined {
  const failures = [...deps.memory.of(name).failures.values()];
  return REQUIRED.map((a) => heldBack(failures, a, deps.now())).find((r) => r !== undefined);
}

/**
 * One plain observation of the pool. Releasing is destructive and the cache may be older than
 * the agent's last word (or our own last write): when the cache shows an address confirmed
 * free, the pool is read afresh and planned on as the API server has it. The reads that wait
 * come first; what the operator holds in memory is then taken in one synchronous step, so the
 * background ENI work cannot change it halfway. The security groups are read only when the pool
 * selects them by tag, and their failure only holds back creates (`securityGroups` undefined).
 */
export async function observePool(
  deps: ObserveDeps,
  cached: ENIPool,
  o: { unservable?: PoolObservation['unservable']; securityGroupsFailed: (e: unknown) => Promise<void> },
): Promise<PoolObservation | undefined> {
  const { cloud, config, memory } = deps;
  const name = cached.metadata.name;
  const fresh = showsConfirmedRelease(cached.status) && config.mode === 'normal';
  const pool = fresh ? await deps.store.readPool(name) : cached;
  if (!pool) return undefined;
  const { instanceID, instanceType, securityGroupTags } = pool.spec;
  const m = memory.of(name);
  const vSwitches = await cloud.vSwitches();
  const limits = instanceType ? await cloud.instanceType(instanceType) : undefined;
  for (const action of REQUIRED) m.failures.delete(action);
  let securityGroups: PoolObservation['securityGroups'] = [];
  if (Object.keys(securityGroupTags ?? {}).length) {
    const held = heldBack([...m.failures.values()], 'DescribeSecurityGroups', deps.now());
    securityGroups = held
      ? undefined
      : await cloud.securityGroups().then(
          (list) => (m.failures.delete('DescribeSecurityGroups'), list),
          (e: unknown) => o.securityGroupsFailed(e).then(() => undefined),
        );
  }

  // An ENI is this pool's by its cluster and node tags: one made for another pool on the same
  // instance (two pools naming one instance) is neither counted nor released here.
  // Removals the pool as read no longer lists are over; then the work in flight, in one step.
  deps.enis.listed(
    name,
    (pool.status?.enis ?? []).map((e) => e.id),
  );
  const work = deps.enis.inFlight(name);
  const fact = (e: NetworkInterface): EniFact => ({
    ...e,
    ours: e.tags[TAGS.cluster] === config.clusterId && e.tags[TAGS.node] === name,
    removing: work.removing.has(e.id),
    // An ENI whose create has not answered yet (a resync saw it first) is its create's to attach.
    attaching: work.attaching.has(e.id) || work.creating.has(e.tags[TAGS.createToken] ?? ''),
  });
  const now = deps.now();
  const onInstance = instanceID ? cloud.enisOfInstance(instanceID) : [];
  const secondary = onInstance.filter((e) => e.type !== 'Primary');
  // Read whether the class uses it or not: one it stopped using is drained (see planPool).
  const primary = onInstance.find((e) => e.type === 'Primary');
  const node = deps.cache.node(pool.spec.nodeName);
  return {
    now,
    mode: config.mode,
    vpcId: config.vpcId,
    pool,
    limits,
    instanceEnis: secondary.map(fact),
    ownedEnis: cloud.ownedBy(name).map(fact),
    primaryEni: primary && { ...fact(primary), ours: false, primary: true },
    inFlight: { enis: work.enis, ips: work.ips },
    pendingPods: deps.cache.pendingPodsOn(pool.spec.nodeName).filter((p) => waitsForIp(p, pool.spec.nodeName)).length,
    ...podCapacityOf(node?.status?.allocatable?.pods),
    nodeAddresses: nodeAddressesOf(node),
    vSwitches: vSwitches.map((v) => ({
      id: v.id,
      zoneId: v.zoneId,
      vpcId: v.vpcId,
      free: v.availableIpCount,
      tags: v.tags,
      ...(v.ipv6Cidr ? { ipv6Cidr: v.ipv6Cidr } : {}),
      blocked: cloud.blocked.has(v.id),
      fragmented: cloud.isFragmented(v.id),
    })),
    securityGroups,
    removedByUs: new Set(work.removedByUs),
    requestStamp: deps.stamps.next(now),
    unservable: o.unservable,
    cloudOutage: deps.health.outage(),
    sharingInstance: instanceID
      ? deps.cache
          .poolsNaming(instanceID)
          .filter((p) => p.metadata.name !== name && !p.metadata.deletionTimestamp)
          .map((p) => p.metadata.name)
          .sort()
      : [],
  };
}

/** A pod scheduled to the node that still waits for an IP from the pool (host-network pods need none). */
const waitsForIp = (p: V1Pod, node: string) => p.spec?.nodeName === node && !p.status?.podIP && !p.spec?.hostNetwork;

/** The Node's allocatable pods, when it says a whole number of them. */
function podCapacityOf(pods: string | undefined): { podCapacity?: number } {
  const n = Number(pods);
  return pods !== undefined && Number.isInteger(n) && n > 0 ? { podCapacity: n } : {};
}

/** A Node's own addresses, as its kubelet reports them (InternalIP, both families where it has them). */
function nodeAddressesOf(node: V1Node | undefined): string[] {
  return (node?.status?.addresses ?? []).filter((a) => a.type === 'InternalIP').map((a) => a.address);
}
