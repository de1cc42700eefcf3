import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1Node,
  type V1Pod,
} from '@kubernetes/client-node';
import { API_VERSION, GROUP, VERSION, type Condition, type ENIPool } from '../api/types.js';
import { CloudError, type EcsApi, type InstanceTypeLimits } from '../cloud/index.js';
import { callsOf, planAllocation, type EniView } from '../ipam/allocate.js';
import { podIpCapacity } from '../ipam/capacity.js';
import { MAX_SECURITY_GROUPS_PER_ENI, candidateVSwitches, securityGroupsFor } from '../ipam/placement.js';
import { planRelease } from '../ipam/release.js';
import { excess, needed, resolveMaxAllocate, toAllocate, type Sizing } from '../ipam/sizing.js';
import { isConflict } from '../kube/errors.js';
import type { Informer } from '../kube/informer.js';
import type { Logger } from '../observability/logger.js';
import { TAGS, type CloudState } from './cloud-state.js';
import { EniLifecycle } from './eni-lifecycle.js';
import { FailureMemory } from './failures.js';
import { NodeDeparture } from './node-departure.js';
import { FINALIZER, type OperatorConfig } from './config.js';
import type { EventRecorder } from '../kube/events.js';
import type { OperatorMetrics } from './metrics.js';
import { publishedEnis, requestStamp, setCondition, statusPatch } from './pool-status.js';
import type { StatePoller } from './poller.js';

export interface PoolDeps {
  kc: KubeConfig;
  pools: Informer<ENIPool>;
  nodes: Informer<V1Node>;
  pendingPods: Informer<V1Pod>;
  api: EcsApi;
  cloud: CloudState;
  poller: StatePoller;
  events: EventRecorder;
  metrics: OperatorMetrics;
  config: OperatorConfig;
  logger: Logger;
  enqueue: (name: string, afterMs?: number) => void;
  /** Whether this operator may still write what it knows (it leads on a fresh lease). */
  mayWrite: () => boolean;
}

/** A pool's sizing with the ceiling resolved against what its instance type holds. */
const sizingOf = (spec: ENIPool['spec'], limits: InstanceTypeLimits): Sizing => ({
  minAllocate: spec.minAllocate ?? 0,
  preAllocate: spec.preAllocate ?? 8,
  maxAboveWatermark: spec.maxAboveWatermark ?? 0,
  maxAllocate: resolveMaxAllocate(spec.maxAllocate ?? 0, podIpCapacity(limits)),
});

const iso = (ms = Date.now()): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
type Shortfall = { reason: 'VSwitchExhausted' | 'InstanceLimit' | 'QuotaExceeded'; message: string };

/**
 * Keeps one node's pool full: reads the caches (pool, node, pending pods, cloud state), plans
 * with the pure core, makes the cloud calls, and publishes the result in the pool's status.
 * ENI creations run in the background (create, attach, wait for InUse through the shared
 * poller), so a reconcile returns at once and several changes can be in flight for a node.
 */
export class PoolReconciler {
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;
  /** IPs on their way to a node: ENIs being created and attached. */
  private readonly deficitSince = new Map<string, number>();
  private readonly excessSince = new Map<string, number>();
  private readonly shortfall = new Map<string, Shortfall>();
  /** Per node and action, cloud failures and their back-off. */
  private readonly failed = new FailureMemory();
  private readonly departure: NodeDeparture;
  private readonly enis: EniLifecycle;

  constructor(private readonly d: PoolDeps) {
    this.custom = d.kc.makeApiClient(CustomObjectsApi);
    this.core = d.kc.makeApiClient(CoreV1Api);
    this.enis = new EniLifecycle({
      ...d,
      event: (pool, type, reason, message) => this.event(pool, type, reason, message),
      onCloudError: (pool, e, vSwitchId) => this.onCloudError(pool, e, vSwitchId),
      published: (name) => this.published(name),
      failures: this.failed,
    });
    this.departure = new NodeDeparture({
      ...d,
      custom: this.custom,
      core: this.core,
      enis: this.enis,
      event: (pool, type, reason, message) => this.event(pool, type, reason, message),
      notReady: (pool, reason, message) => this.publish(pool, { notReady: { reason, message } }),
    });
  }

  /** Background work stops issuing cloud calls (the operator is stopping). */
  stop(): void {
    this.enis.stop();
  }

  private target(pool: ENIPool) {
    // Pools are cluster-scoped: the Event lives in the event namespace, its object has none.
    return { apiVersion: API_VERSION, kind: 'ENIPool', name: pool.metadata.name, uid: pool.metadata.uid };
  }

  private event(pool: ENIPool, type: 'Normal' | 'Warning', reason: string, message: string): void {
    void this.d.events.record(this.target(pool), type, reason, message);
  }

  async reconcile(name: string): Promise<{ requeueAfterMs?: number } | void> {
    const pool = this.d.pools.get(name);
    if (!pool) {
      for (const m of [this.deficitSince, this.excessSince, this.shortfall]) m.delete(name);
      this.failed.forget(name);
      this.departure.nodeSeen(name);
      return;
    }
    if (pool.metadata.deletionTimestamp) return this.departure.teardown(pool);
    const node = this.d.nodes.get(pool.spec.nodeName);
    if (!node) return this.departure.nodeMissing(pool);
    this.departure.nodeSeen(name);
    if (!pool.metadata.finalizers?.includes(FINALIZER)) {
      await this.custom.patchClusterCustomObject(
        {
          group: GROUP,
          version: VERSION,
          plural: 'enipools',
          name,
          body: { metadata: { finalizers: [...(pool.metadata.finalizers ?? []), FINALIZER] } },
        },
        merge,
      );
    }
    try {
      const r = await this.fill(pool);
      const next = this.failed.nextAttempt(name, Date.now());
      return next === undefined
        ? r
        : { requeueAfterMs: Math.min(r.requeueAfterMs ?? Infinity, next - Date.now() + 50) };
    } catch (e) {
      // The pool changed since the cache showed it: plan again on the newer pool, soon.
      if (isConflict(e)) return { requeueAfterMs: 100 };
      if (!(e instanceof CloudError) || e.code === 'Client.NotLeading') throw e;
      // The action is held back on this node for its back-off (a permanent error for minutes).
      const r = this.failed.record(name, e, Date.now());
      this.d.logger.warn(
        { node: name, action: e.action, code: e.code, requestId: e.requestId, retryInMs: r.until - Date.now() },
        'cloud call failed',
      );
      this.event(pool, 'Warning', 'CloudCallFailed', r.message);
      await this.publish(pool).catch(() => undefined);
      return { requeueAfterMs: r.until - Date.now() + 50 };
    }
  }

  /** Allocation, release and status for a live node. */
  private async fill(pool: ENIPool): Promise<{ requeueAfterMs?: number }> {
    const { cloud, config, api } = this.d;
    const name = pool.metadata.name;
    const spec = pool.spec;
    if (!spec.instanceID || !spec.instanceType || !spec.zoneID) {
      await this.publish(pool, {
        notReady: {
          reason: 'NoInstance',
          message: 'the pool names no ECS instance, instance type or zone; the node lacks its providerID or labels',
        },
      });
      return {};
    }
    const limits = await cloud.instanceType(spec.instanceType);
    if (!limits) {
      this.event(
        pool,
        'Warning',
        'UnknownInstanceType',
        `instance type ${spec.instanceType} is not known to DescribeInstanceTypes`,
      );
      await this.publish(pool, {
        notReady: { reason: 'UnknownInstanceType', message: `instance type ${spec.instanceType} is unknown` },
      });
      return { requeueAfterMs: 60_000 };
    }
    // Our ENIs that another operator instance left half-done (created, or attaching) are finished, not replaced.
    const mayAllocate = config.mode !== 'read-only';
    const mayRelease = config.mode === 'normal';
    if (mayAllocate) {
      for (const e of cloud.ownedBy(name)) {
        if (
          this.enis.tracking(e.id) ||
          this.enis.isRemoving(e.id) ||
          this.failed.blocked(name, 'AttachNetworkInterface', Date.now())
        )
          continue;
        if (e.status === 'Available' && !e.instanceId) this.enis.attach(pool, e);
        else if (e.status === 'Attaching' && e.instanceId === spec.instanceID)
          this.enis.attach(pool, e, { alreadyAttaching: true });
      }
    }
    const onInstance = cloud.enisOfInstance(spec.instanceID).filter((e) => e.type !== 'Primary');
    const ours = onInstance.filter((e) => e.tags[TAGS.cluster] === config.clusterId);
    const views: EniView[] = onInstance.map((e) =>
      e.tags[TAGS.cluster] === config.clusterId && !this.enis.isRemoving(e.id)
        ? { id: e.id, vSwitchId: e.vSwitchId, attached: e.status === 'InUse', ips: 1 + e.secondaryIps.length }
        : { id: e.id, vSwitchId: e.vSwitchId, attached: false, ips: limits.ipv4PerEni },
    );
    const inUse = ours.filter((e) => e.status === 'InUse' && !this.enis.isRemoving(e.id));
    const available = inUse.reduce((n, e) => n + 1 + e.secondaryIps.length, 0);
    const usedIps = new Set(Object.keys(pool.status?.used ?? {}));
    const pending = this.pendingOn(spec.nodeName);
    const sizing = sizingOf(spec, limits);
    const cooling = coolingIps(pool, Date.now());
    const usage = { available, used: usedIps.size + cooling.length, pending };
    // Our ENIs parked Available (an attach held back after a failure) come back: they are not replaced.
    const parked = cloud
      .ownedBy(name)
      .filter(
        (e) => e.status === 'Available' && !e.instanceId && !this.enis.tracking(e.id) && !this.enis.isRemoving(e.id),
      );
    const inFlight = this.enis.coming(name);
    const coming = {
      enis: inFlight.enis + parked.length,
      ips: inFlight.ips + parked.reduce((n, e) => n + 1 + e.secondaryIps.length, 0),
    };
    const want = Math.max(0, toAllocate(sizing, { ...usage, available: available + coming.ips }));
    const need = needed(sizing, usage);
    if (need > 0 && !this.deficitSince.has(name)) this.deficitSince.set(name, Date.now());

    // Wanting more than the ceiling allows is a shortfall too, though nothing is left to plan.
    const beyondCeiling =
      needed({ ...sizing, maxAllocate: Number.MAX_SAFE_INTEGER }, usage) > 0 &&
      available + coming.ips >= sizing.maxAllocate;
    if (beyondCeiling) {
      const byClass = (spec.maxAllocate ?? 0) > 0 && spec.maxAllocate! < podIpCapacity(limits);
      this.shortfall.set(name, {
        reason: 'InstanceLimit',
        message: byClass
          ? `the pool is at its maxAllocate of ${sizing.maxAllocate} IPs`
          : `instance ${spec.instanceID} (${spec.instanceType}) holds at most ${sizing.maxAllocate} pod IPs (${limits.eniQuantity - 1} secondary ENIs × ${limits.ipv4PerEni}); the pool wants more`,
      });
    }
    if (want > 0 && mayAllocate) {
      const vSwitches = await cloud.vSwitches();
      const candidates = candidateVSwitches(
        spec,
        vSwitches.map((v) => ({ id: v.id, zoneId: v.zoneId, vpcId: v.vpcId, free: v.availableIpCount, tags: v.tags })),
        config.vpcId,
        spec.zoneID,
      ).map((v) => ({ id: v.id, free: v.free, blocked: cloud.blocked.has(v.id) }));
      const now = Date.now();
      // While attaches fail on this node, new ENIs would only pile up unattached.
      const createHeld =
        this.failed.blocked(name, 'CreateNetworkInterface', now) ||
        this.failed.blocked(name, 'AttachNetworkInterface', now);
      const allow = { assign: !this.failed.blocked(name, 'AssignPrivateIpAddresses', now), create: !createHeld };
      const plan = planAllocation({
        want,
        enis: views,
        limits,
        vSwitches: candidates,
        selection: spec.vSwitchSelection ?? 'MostFreeIPs',
        creating: coming.enis,
        allow,
      });
      this.d.logger.debug(
        {
          node: name,
          want,
          available,
          coming,
          ops: plan.ops.length,
          calls: callsOf(plan.ops),
          owned: cloud.ownedBy(name).map((e) => `${e.id}:${e.status}:${e.instanceId ?? '-'}`),
        },
        'allocation planned',
      );
      if (plan.shortfall && plan.planned === 0 && coming.enis === 0 && allow.assign && allow.create) {
        this.shortfall.set(name, {
          reason: plan.shortfall === 'instance-limit' ? 'InstanceLimit' : 'VSwitchExhausted',
          message:
            plan.shortfall === 'instance-limit'
              ? `instance ${spec.instanceID} (${spec.instanceType}) holds no more ENIs or IPs (${limits.eniQuantity} ENIs × ${limits.ipv4PerEni} IPs)`
              : `no vSwitch of the class in ${spec.zoneID} has free addresses (${candidates.map((c) => `${c.id}: ${c.blocked ? 'blocked' : c.free}`).join(', ') || 'none match'})`,
        });
      } else if (plan.planned > 0) this.shortfall.delete(name);
      const sgs = plan.ops.some((o) => o.kind === 'create')
        ? securityGroupsFor(
            spec,
            (await cloud.securityGroups()).map((g) => ({ id: g.id, vpcId: g.vpcId, tags: g.tags })),
            config.vpcId,
          )
        : [];
      if (sgs.length > MAX_SECURITY_GROUPS_PER_ENI) {
        const message = `${sgs.length} security groups match the pool (${sgs.join(', ')}); an ENI joins at most ${MAX_SECURITY_GROUPS_PER_ENI}`;
        this.event(pool, 'Warning', 'TooManySecurityGroups', message);
        await this.publish(pool, { notReady: { reason: 'TooManySecurityGroups', message } });
        return {};
      }
      for (const op of plan.ops) {
        if (op.kind === 'assign') await this.assign(pool, op.eniId, op.vSwitchId, op.count);
        else this.enis.create(pool, op.vSwitchId, op.ips, sgs);
      }
    } else if (want === 0 && !beyondCeiling) this.shortfall.delete(name);

    // Release: requests, acks, unassigns, empty ENIs.
    let releaseRequests = { ...(pool.status?.releaseRequests ?? {}) };
    let requeueAfterMs: number | undefined;
    if (mayRelease && spec.releaseExcessIPs !== false) {
      const ex = excess(sizing, usage);
      if (ex > 0 && !this.excessSince.has(name)) this.excessSince.set(name, Date.now());
      if (ex === 0) this.excessSince.delete(name);
      const delayMs = (spec.releaseDelaySeconds ?? 180) * 1000;
      const releaseInput = (status: ENIPool['status']) => ({
        enis: inUse.map((e) => ({ id: e.id, primaryIp: e.primaryIp, secondaryIps: e.secondaryIps })),
        used: new Set(Object.keys(status?.used ?? {})),
        excess: ex,
        excessSince: this.excessSince.get(name),
        now: Date.now(),
        delayMs,
        cooling: new Set(coolingIps({ ...pool, status }, Date.now()).map((c) => c.ip)),
        requests: new Map(Object.entries(status?.releaseRequests ?? {})),
        // An ack of the old shape (a bare string) names no request, so it answers none.
        acks: new Map(Object.entries(status?.releaseAcks ?? {}).filter(([, a]) => typeof a === 'object' && a !== null)),
        deleteEmptyEnis: spec.deleteEmptyENIs ?? false,
      });
      const plan = planRelease(releaseInput(pool.status));
      if (plan.unassign.length || plan.deleteEnis.length) {
        // Releasing is destructive, and the cache may be older than the agent's last word (or
        // our own last write): release only what a fresh read of the pool confirms too.
        const fresh = planRelease(releaseInput(await this.readStatus(name)));
        const ok = new Set(fresh.unassign.flatMap((u) => u.ips));
        plan.unassign = plan.unassign
          .map((u) => ({ ...u, ips: u.ips.filter((ip) => ok.has(ip)) }))
          .filter((u) => u.ips.length);
        plan.deleteEnis = plan.deleteEnis.filter((id) => fresh.deleteEnis.includes(id));
      }
      if (plan.request.length || plan.withdraw.length || plan.unassign.length || plan.deleteEnis.length) {
        this.d.logger.debug(
          {
            node: name,
            excess: ex,
            request: plan.request.length,
            withdraw: plan.withdraw.length,
            unassign: plan.unassign.length,
            deleteEnis: plan.deleteEnis,
          },
          'release planned',
        );
      }
      for (const ip of plan.withdraw) delete releaseRequests[ip];
      for (const ip of plan.request) releaseRequests[ip] = requestStamp();
      if (this.failed.blocked(name, 'UnassignPrivateIpAddresses', Date.now())) plan.unassign = [];
      for (const u of plan.unassign) {
        for (let i = 0; i < u.ips.length; i += 50) {
          const batch = u.ips.slice(i, i + 50);
          await api.unassignPrivateIpAddresses(u.eniId, batch).catch((e) => {
            if (!(e instanceof CloudError && e.code === 'InvalidIp.IpUnassigned')) throw e;
          });
          this.failed.succeeded(name, 'UnassignPrivateIpAddresses');
          this.d.metrics.cloudChanges.inc({ action: 'UnassignPrivateIpAddresses' });
          const eni = cloud.get(u.eniId);
          if (eni) cloud.upsert({ ...eni, secondaryIps: eni.secondaryIps.filter((ip) => !batch.includes(ip)) });
          batch.forEach((ip) => delete releaseRequests[ip]);
          this.event(
            pool,
            'Normal',
            'ReleasedIPs',
            `unassigned ${batch.length} excess IPs from ${u.eniId} (${batch.join(', ')})`,
          );
        }
      }
      for (const id of plan.deleteEnis) {
        const eni = cloud.get(id);
        if (eni) {
          this.enis.remove(pool, eni);
          for (const ip of [eni.primaryIp, ...eni.secondaryIps]) delete releaseRequests[ip];
        }
      }
      const since = this.excessSince.get(name);
      if (ex > 0 && since !== undefined && Date.now() - since < delayMs)
        requeueAfterMs = delayMs - (Date.now() - since) + 50;
    } else releaseRequests = {};
    // When the last cool-down ends the need drops: look again then, whatever the agent writes.
    if (cooling.length)
      requeueAfterMs = Math.min(requeueAfterMs ?? Infinity, Math.max(...cooling.map((c) => c.until)) - Date.now() + 50);

    await this.publish(pool, { releaseRequests });
    return { requeueAfterMs };
  }

  /** The pool's status as the API server has it now (not the cache). */
  private async readStatus(name: string): Promise<ENIPool['status']> {
    const live = (await this.custom.getClusterCustomObjectStatus({
      group: GROUP,
      version: VERSION,
      plural: 'enipools',
      name,
    })) as ENIPool;
    return live.status;
  }

  private async assign(pool: ENIPool, eniId: string, vSwitchId: string, count: number): Promise<void> {
    const { api, cloud } = this.d;
    try {
      const ips = await api.assignPrivateIpAddresses(eniId, { count });
      this.failed.succeeded(pool.metadata.name, 'AssignPrivateIpAddresses');
      this.d.metrics.cloudChanges.inc({ action: 'AssignPrivateIpAddresses' });
      cloud.took(vSwitchId, ips.length);
      const eni = cloud.get(eniId);
      if (eni) cloud.upsert({ ...eni, secondaryIps: [...eni.secondaryIps, ...ips] });
      this.published(pool.metadata.name);
      this.event(pool, 'Normal', 'AssignedIPs', `assigned ${ips.length} IPs to ${eniId} in ${vSwitchId}`);
    } catch (e) {
      // No answer: the IPs may be on the ENI now; the next plan must start from what the cloud holds.
      if (e instanceof CloudError && e.outcomeUnknown)
        await cloud.resyncInstance(pool.spec.instanceID, pool.metadata.name).catch(() => undefined);
      await this.onCloudError(pool, e, vSwitchId);
    }
  }

  /** What a failed change means: block an exhausted vSwitch, resync after an instance limit. */
  private async onCloudError(pool: ENIPool, e: unknown, vSwitchId?: string): Promise<void> {
    if (!(e instanceof CloudError)) throw e;
    const name = pool.metadata.name;
    if (e.kind === 'vswitch-exhausted' && vSwitchId) {
      this.d.cloud.block(vSwitchId);
      this.event(
        pool,
        'Warning',
        'VSwitchExhausted',
        `vSwitch ${vSwitchId} has no free addresses (${e.code}); trying the zone's other vSwitches`,
      );
      this.d.enqueue(name, 100);
      return;
    }
    if (e.kind === 'instance-limit') {
      this.event(
        pool,
        'Warning',
        'InstanceLimit',
        `${e.action} on ${pool.spec.instanceID}: ${e.code}; resyncing the instance`,
      );
      await this.d.cloud.resyncInstance(pool.spec.instanceID!, name);
      await this.d.cloud.instanceType(pool.spec.instanceType!, true);
      this.d.enqueue(name, 1000);
      return;
    }
    if (e.kind === 'quota-exceeded') {
      // No retry frees a regional quota soon: the action is held back like a permanent failure.
      const r = this.failed.record(name, e, Date.now());
      this.shortfall.set(name, { reason: 'QuotaExceeded', message: r.message });
      this.event(pool, 'Warning', 'QuotaExceeded', r.message);
      return;
    }
    throw e;
  }

  private published(name: string): void {
    const since = this.deficitSince.get(name);
    if (since !== undefined) {
      this.d.metrics.deficitToPublished.observe((Date.now() - since) / 1000);
      this.deficitSince.delete(name);
    }
  }

  /** Pods scheduled to the node that still wait for an IP from the pool (host-network pods need none). */
  private pendingOn(node: string): number {
    return this.d.pendingPods
      .list()
      .filter((p) => p.spec?.nodeName === node && !p.status?.podIP && !p.spec?.hostNetwork).length;
  }

  /** Publishes the operator's part of the status, if it changed. */
  private async publish(
    pool: ENIPool,
    o: { releaseRequests?: Record<string, string>; notReady?: { reason: string; message: string } } = {},
  ): Promise<void> {
    const { cloud } = this.d;
    const name = pool.metadata.name;
    const spec = pool.spec;
    const ours = spec.instanceID
      ? cloud
          .ownedBy(name)
          .filter((e) => (e.instanceId === spec.instanceID || e.status === 'Available') && !this.enis.isRemoving(e.id))
      : [];
    const enis = publishedEnis(ours, await cloud.vSwitches());
    const available = enis.reduce((n, e) => n + (e.ips?.length ?? 0), 0);
    const used = Object.keys(pool.status?.used ?? {}).length;
    const busy = used + coolingIps(pool, Date.now()).length;
    const releaseRequests = o.releaseRequests ?? pool.status?.releaseRequests ?? {};
    const limits = spec.instanceType ? await cloud.instanceType(spec.instanceType) : undefined;
    const sizing = limits ? sizingOf(spec, limits) : undefined;
    const maxAllocate = sizing?.maxAllocate ?? 0;
    const need = sizing ? needed(sizing, { available, used: busy, pending: this.pendingOn(spec.nodeName) }) : 0;
    const now = iso();
    let conditions: Condition[] = pool.status?.conditions ?? [];
    const short = this.shortfall.get(name);
    const ready = o.notReady
      ? { status: 'False' as const, ...o.notReady }
      : need === 0
        ? {
            status: 'True' as const,
            reason: available >= maxAllocate && maxAllocate > 0 ? 'AtCapacity' : 'PoolFilled',
            message: `${available - busy} of ${available} IPs free`,
          }
        : {
            status: 'False' as const,
            reason: short ? short.reason : 'Allocating',
            message: short ? short.message : `${need} more IPs are being allocated`,
          };
    conditions = setCondition(conditions, { type: 'Ready', ...ready }, now);
    conditions = setCondition(
      conditions,
      short
        ? { type: 'Exhausted', status: 'True', reason: short.reason, message: short.message }
        : { type: 'Exhausted', status: 'False', reason: 'CapacityLeft', message: '' },
      now,
    );
    const failing = this.failed.degraded(name);
    conditions = setCondition(
      conditions,
      failing
        ? {
            type: 'Degraded',
            status: 'True',
            reason: failing.permanent ? 'CloudCallRefused' : 'CloudCallsFailing',
            message: failing.message,
          }
        : { type: 'Degraded', status: 'False', reason: 'Healthy', message: '' },
      now,
    );
    const desired = {
      enis,
      summary: { enis: enis.length, available, used, needed: need, releasing: Object.keys(releaseRequests).length },
      releaseRequests,
      conditions,
      observedGeneration: pool.metadata.generation,
    };
    const m = this.d.metrics.poolIps;
    m.set({ node: name, kind: 'available' }, available);
    m.set({ node: name, kind: 'used' }, used);
    m.set({ node: name, kind: 'needed' }, need);
    m.set({ node: name, kind: 'releasing' }, desired.summary.releasing);
    // What the pool said that the cloud now contradicts (an ENI detached or deleted behind our back).
    for (const old of pool.status?.enis ?? []) {
      if (enis.some((e) => e.id === old.id) || this.enis.removedItself(old.id)) continue;
      this.event(
        pool,
        'Warning',
        'ENIGone',
        `ENI ${old.id} is no longer on ${spec.instanceID} (found by a resync); its ${old.ips?.length ?? 0} IPs are withdrawn from the pool`,
      );
    }
    const patch = statusPatch(pool.status, desired);
    // A deposed leader's picture of the cloud may already be wrong: it publishes nothing.
    if (!patch || !this.d.mayWrite()) return;
    // The resourceVersion read makes the write a precondition: planned on an older pool than the
    // server has (an agent wrote meanwhile, or the cache lags our own last write), it is refused.
    const body = { metadata: { resourceVersion: pool.metadata.resourceVersion }, status: patch };
    await this.custom.patchClusterCustomObjectStatus(
      { group: GROUP, version: VERSION, plural: 'enipools', name, body },
      merge,
    );
  }
}

/**
 * Released IPs still cooling down, and when each cool-down ends (IPs not in use): until then
 * the node cannot hand them out, so they count as used, and they are not released.
 */
function coolingIps(pool: ENIPool, now: number): Array<{ ip: string; until: number }> {
  const used = pool.status?.used ?? {};
  return Object.entries(pool.status?.cooling ?? {})
    .filter(([ip]) => !(ip in used))
    .map(([ip, until]) => ({ ip, until: Date.parse(until) }))
    .filter((c) => c.until > now);
}
