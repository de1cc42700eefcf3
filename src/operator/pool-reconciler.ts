import type { V1Pod } from '@kubernetes/client-node';
import type { ENIPool } from '../api/types.js';
import { CloudError, type NetworkInterface } from '../cloud/index.js';
import type { FailureRecord } from '../ipam/failure-record.js';
import { showsConfirmedRelease } from '../ipam/release.js';
import { planPool, type EniFact, type PoolObservation, type PoolPlan } from '../ipam/pool-plan.js';
import { isConflict } from '../kube/errors.js';
import { TAGS } from './cloud-state.js';
import { isShutdown, type CloudFailures } from './cloud-failures.js';
import { FINALIZER, type OperatorConfig } from './config.js';
import type { OperatorMetrics } from './metrics.js';
import { NodeDeparture } from './node-departure.js';
import type { PoolSide } from './ports.js';
import { nextRequestStamp, publishedEnis, statusPatch, tookRequestStamp } from './pool-status.js';

export interface PoolReconcilerDeps extends PoolSide {
  failures: CloudFailures;
  metrics: Pick<OperatorMetrics, 'poolIps' | 'cloudChanges' | 'deficitToPublished'>;
  config: Pick<OperatorConfig, 'clusterId' | 'vpcId' | 'mode' | 'nodeGoneGraceMs'>;
  enqueue: (name: string, afterMs?: number) => void;
}

export type ReconcileResult = { requeueAfterMs?: number };
/** Soon: after a cloud failure (planned again on what it taught) or a write refused as stale. */
const AGAIN_MS = 100;

/**
 * Keeps one node's pool full, level-triggered: observe (caches, one plain observation), plan
 * (the pure core, once), act (cloud calls; ENI creation and deletion go to the background),
 * publish (the status, written only if it changed and only against the pool it was planned on).
 */
export class PoolReconciler {
  private readonly departure: NodeDeparture;

  constructor(private readonly d: PoolReconcilerDeps) {
    this.departure = new NodeDeparture({
      ...d,
      notReady: (pool, reason, message) => this.publishNotReady(pool, reason, message),
    });
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    try {
      return await this.reconcilePool(name);
    } catch (e) {
      // A write planned on an older pool than the server has: plan again on the newer pool, soon.
      if (isConflict(e)) return { requeueAfterMs: AGAIN_MS };
      throw e;
    }
  }

  private async reconcilePool(name: string): Promise<ReconcileResult> {
    let pool = this.d.cache.pool(name);
    if (!pool) {
      this.d.memory.forget(name);
      return {};
    }
    if (pool.metadata.deletionTimestamp) return this.departure.teardown(pool);
    if (!this.d.cache.node(pool.spec.nodeName)) return this.departure.nodeMissing(pool);
    this.d.memory.of(name).goneSince = undefined;
    if (!pool.metadata.finalizers?.includes(FINALIZER)) {
      if (!this.d.mayWrite()) return {};
      // Planned on the pool as written, so that the status write does not carry an older version.
      pool = await this.d.store.setFinalizers(name, [...(pool.metadata.finalizers ?? []), FINALIZER]);
      if (!pool) return {};
    }
    let observation: PoolObservation | undefined;
    try {
      observation = await this.observe(pool);
    } catch (e) {
      // A describe the observation needs failed: held back like any call, looked at again after it.
      const held = await this.failed(pool, e);
      return { requeueAfterMs: held ? Math.max(AGAIN_MS, held.until - this.d.now() + 50) : undefined };
    }
    if (!observation) return {};
    const plan = this.decide(observation);
    const failure = await this.act(observation.pool, plan);
    // After a failure nothing is published: the pool is planned again on what the failure taught
    // (soon when the action is now held back, so that Degraded shows; the failure's handler
    // enqueued the pool itself otherwise).
    if (failure) return { requeueAfterMs: failure.held ? AGAIN_MS : undefined };
    await this.publish(observation.pool, plan);
    return { requeueAfterMs: plan.requeueAfterMs };
  }

  /**
   * One plain observation of the pool. Releasing is destructive and the cache may be older than
   * the agent's last word (or our own last write): when the cache shows an address confirmed
   * free, the pool is read afresh and planned on as the API server has it. The reads that wait
   * come first; what the operator holds in memory is then taken in one synchronous step, so the
   * background ENI work cannot change it halfway.
   */
  private async observe(
    cached: ENIPool,
    unservable?: PoolObservation['unservable'],
  ): Promise<PoolObservation | undefined> {
    const { cloud, config, memory } = this.d;
    const name = cached.metadata.name;
    const fresh = showsConfirmedRelease(cached.status) && config.mode === 'normal';
    const pool = fresh ? await this.d.store.readPool(name) : cached;
    if (!pool) return undefined;
    const { instanceID, instanceType, securityGroupTags } = pool.spec;
    const vSwitches = await cloud.vSwitches();
    const limits = instanceType ? await cloud.instanceType(instanceType) : undefined;
    const securityGroups = Object.keys(securityGroupTags ?? {}).length ? await cloud.securityGroups() : [];

    const m = memory.of(name);
    const fact = (e: NetworkInterface): EniFact => ({
      ...e,
      ours: e.tags[TAGS.cluster] === config.clusterId,
      removing: m.removing.has(e.id),
      attaching: m.attaching.has(e.id),
    });
    const now = this.d.now();
    const secondary = instanceID ? cloud.enisOfInstance(instanceID).filter((e) => e.type !== 'Primary') : [];
    return {
      now,
      mode: config.mode,
      vpcId: config.vpcId,
      pool,
      limits,
      instanceEnis: secondary.map(fact),
      ownedEnis: cloud.ownedBy(name).map(fact),
      inFlight: { ...m.incoming },
      pendingPods: this.d.cache.pendingPods().filter((p) => waitsForIp(p, pool.spec.nodeName)).length,
      vSwitches: vSwitches.map((v) => ({
        id: v.id,
        zoneId: v.zoneId,
        vpcId: v.vpcId,
        free: v.availableIpCount,
        tags: v.tags,
        blocked: cloud.blocked.has(v.id),
      })),
      securityGroups,
      removedByUs: new Set([...m.removing, ...m.removedByUs]),
      requestStamp: nextRequestStamp(now),
      unservable,
    };
  }

  /** Plans once, and keeps what the plan decided in the node's memory; its Events are said now. */
  private decide(o: PoolObservation): PoolPlan {
    const name = o.pool.metadata.name;
    const plan = planPool(o, this.d.memory.forPlanning(name));
    this.remember(name, o, plan);
    if (Object.values(plan.status.releaseRequests).includes(o.requestStamp)) tookRequestStamp(o.requestStamp);
    for (const e of plan.events) this.d.events.record(o.pool, e.type, e.reason, e.message);
    this.d.logger.debug({ node: name, ...counts(plan) }, 'pool planned');
    return plan;
  }

  /** The node's memory takes what the plan decided; ENIs it removed and the pool no longer lists are forgotten. */
  private remember(name: string, o: PoolObservation, plan: PoolPlan): void {
    const m = this.d.memory.of(name);
    Object.assign(m, plan.memory);
    for (const old of o.pool.status?.enis ?? []) if (!plan.status.eniIds.includes(old.id)) m.removedByUs.delete(old.id);
  }

  /** Carries the plan out; stops at the first failed call and answers what it meant. */
  private async act(pool: ENIPool, plan: PoolPlan): Promise<{ held?: FailureRecord } | undefined> {
    const { cloud, enis } = this.d;
    for (const a of plan.adopt) {
      const eni = cloud.get(a.eniId);
      if (eni) enis.attach(pool, eni, { alreadyAttaching: a.alreadyAttaching });
    }
    let vSwitchId: string | undefined;
    try {
      // Released first: the plan may assign into the room an unassign makes on the same ENI.
      for (const u of plan.unassign) await this.unassign(pool, u);
      for (const a of plan.assign) {
        vSwitchId = a.vSwitchId;
        await this.assign(pool, a);
      }
      vSwitchId = undefined;
      for (const c of plan.create) enis.create(pool, c.vSwitchId, c.ips, plan.securityGroupIds);
      for (const id of plan.deleteEnis) {
        const eni = cloud.get(id);
        if (eni) enis.remove(pool, eni);
      }
      return undefined;
    } catch (e) {
      return { held: await this.failed(pool, e, vSwitchId) };
    }
  }

  private async assign(pool: ENIPool, a: PoolPlan['assign'][number]): Promise<void> {
    const { cloud } = this.d;
    const ips = await this.d.ecs.assignPrivateIpAddresses(a.eniId, { count: a.count });
    this.changed(pool, 'AssignPrivateIpAddresses');
    cloud.took(a.vSwitchId, ips.length);
    const eni = cloud.get(a.eniId);
    if (eni) cloud.upsert({ ...eni, secondaryIps: [...eni.secondaryIps, ...ips] });
    this.published(pool.metadata.name);
    this.d.events.record(pool, 'Normal', 'AssignedIPs', `assigned ${ips.length} IPs to ${a.eniId} in ${a.vSwitchId}`);
  }

  private async unassign(pool: ENIPool, u: PoolPlan['unassign'][number]): Promise<void> {
    const { cloud } = this.d;
    await this.d.ecs.unassignPrivateIpAddresses(u.eniId, u.ips).catch((e) => {
      if (!(e instanceof CloudError && e.code === 'InvalidIp.IpUnassigned')) throw e;
    });
    this.changed(pool, 'UnassignPrivateIpAddresses');
    const eni = cloud.get(u.eniId);
    if (eni) cloud.upsert({ ...eni, secondaryIps: eni.secondaryIps.filter((ip) => !u.ips.includes(ip)) });
    const message = `unassigned ${u.ips.length} excess IPs from ${u.eniId} (${u.ips.join(', ')})`;
    this.d.events.record(pool, 'Normal', 'ReleasedIPs', message);
  }

  private changed(pool: ENIPool, action: string): void {
    this.d.memory.of(pool.metadata.name).failures.delete(action);
    this.d.metrics.cloudChanges.inc({ action });
  }

  /** A failed call: its meaning is handled; an action now held back is said in an Event and answered. */
  private async failed(pool: ENIPool, e: unknown, vSwitchId?: string): Promise<FailureRecord | undefined> {
    if (!(e instanceof CloudError) || isShutdown(e)) throw e;
    // No answer: the call may have been carried out; the next plan starts from what the cloud holds.
    if (e.outcomeUnknown) {
      await this.d.cloud.resyncInstance(pool.spec.instanceID, pool.metadata.name).catch(() => undefined);
    }
    const held = await this.d.failures.respond(pool, e, vSwitchId);
    if (held) this.d.events.record(pool, 'Warning', 'CloudCallFailed', held.message);
    return held;
  }

  /** The deficit of the node is met: its IPs reached the pool. */
  published(name: string): void {
    const m = this.d.memory.of(name);
    if (m.deficitSince === undefined) return;
    this.d.metrics.deficitToPublished.observe((this.d.now() - m.deficitSince) / 1000);
    m.deficitSince = undefined;
  }

  /** Writes the planned status, if it differs from the pool's, against the pool's resourceVersion. */
  private async publish(pool: ENIPool, plan: PoolPlan): Promise<void> {
    const { cloud } = this.d;
    const name = pool.metadata.name;
    const { eniIds, summary, ...rest } = plan.status;
    const enis = publishedEnis(
      eniIds.map((id) => cloud.get(id)).filter((e): e is NetworkInterface => e !== undefined),
      await cloud.vSwitches(),
    );
    const m = this.d.metrics.poolIps;
    for (const kind of ['available', 'used', 'needed', 'releasing'] as const)
      m.set({ node: name, kind }, summary[kind] ?? 0);
    const patch = statusPatch(pool.status, { enis, summary, ...rest });
    // A deposed leader's picture of the cloud may already be wrong: it publishes nothing.
    if (!patch || !this.d.mayWrite()) return;
    // The resourceVersion makes the write a precondition: planned on an older pool than the
    // server has (an agent wrote meanwhile, or the cache lags our own last write), it is refused.
    await this.d.store.patchStatus(name, pool.metadata.resourceVersion, patch);
  }

  /** The pool cannot be served now (its node is gone): Ready is false for this reason. */
  private async publishNotReady(pool: ENIPool, reason: string, message: string): Promise<void> {
    const observation = await this.observe(pool, { reason, message });
    if (observation) await this.publish(observation.pool, this.decide(observation));
  }
}

/** A pod scheduled to the node that still waits for an IP from the pool (host-network pods need none). */
const waitsForIp = (p: V1Pod, node: string) => p.spec?.nodeName === node && !p.status?.podIP && !p.spec?.hostNetwork;

const counts = (p: PoolPlan) => ({
  adopt: p.adopt.length,
  assign: p.assign.length,
  create: p.create.length,
  unassign: p.unassign.length,
  deleteEnis: p.deleteEnis.length,
  requeueAfterMs: p.requeueAfterMs,
});
