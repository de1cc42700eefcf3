import { exclusiveMode } from '../../ipam/exclusive.js';
import { sameJson } from '../../kube/same-json.js';
import { dualStack, ipv6Only } from '../../ipam/families.js';
import type { ENIPool } from '../../api/types.js';
import { CloudError, unlessAlreadyUnassigned, type NetworkInterface } from '../../cloud/index.js';
import { conditionTime, setCondition, type PlannedCondition } from '../../ipam/conditions.js';
import { degradedCondition } from '../../ipam/failure-record.js';
import { ipv6PrefixMode, ipv6Room } from '../../ipam/ipv6-prefix.js';
import { planPool, type PoolObservation, type PoolPlan } from '../../ipam/pool-plan.js';
import { PREFIX_SIZE } from '../../ipam/prefix.js';
import { apiErrorMessage, isConflict } from '../../kube/errors.js';
import { formatTaint, isTaint } from '../../kube/taint.js';
import { isShutdown, type CloudFailures, type FailureResponse } from '../failures.js';
import { FINALIZER, type OperatorConfig } from '../config.js';
import type { OperatorMetrics } from '../metrics.js';
import { NodeDeparture } from './node-departure.js';
import type { PoolSide } from './ports.js';
import { describeHeldBack, observePool } from './observer.js';
import { publishedEnis, statusPatch } from './status.js';
import { deficitMet } from './node-memory.js';

export interface PoolReconcilerDeps extends PoolSide {
  failures: CloudFailures;
  metrics: Pick<
    OperatorMetrics,
    'poolIps' | 'poolPrefixes' | 'poolIpv6' | 'poolIpv6Prefixes' | 'cloudChanges' | 'deficitToPublished'
  >;
  config: Pick<OperatorConfig, 'clusterId' | 'vpcId' | 'mode' | 'nodeGoneGraceMs' | 'startupTaint'>;
  enqueue: (name: string, afterMs?: number) => void;
}

export type ReconcileResult = { requeueAfterMs?: number; backoff?: boolean };
/** Soon: after a cloud failure (planned again on what it taught) or a write refused as stale. */
const AGAIN_MS = 100;
/** After a startup taint's removal failed (the Node changed meanwhile, or the API server refused). */
const TAINT_RETRY_MS = 1000;

/**
 * Keeps one node's pool full, level-triggered: observe (caches, one plain observation), plan
 * (the pure core, once), act (cloud calls; ENI creation and deletion go to the background),
 * publish (the status, written only if it changed and only against the pool it was planned on).
 */
export class PoolReconciler {
  private readonly departure: NodeDeparture;

  constructor(private readonly deps: PoolReconcilerDeps) {
    this.departure = new NodeDeparture({
      ...deps,
      notReady: (pool, reason, message) => this.publishNotReady(pool, reason, message),
    });
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    try {
      return await this.reconcilePool(name);
    } catch (e) {
      // A write planned on an older pool than the server has: plan again on the newer pool, after the
      // key's back-off (it grows while the cache lags, so a slow watch is not hammered with 409s).
      if (isConflict(e)) return { backoff: true };
      throw e;
    }
  }

  private async reconcilePool(name: string): Promise<ReconcileResult> {
    let pool = this.deps.cache.pool(name);
    if (!pool) {
      this.deps.memory.forget(name);
      this.deps.enis.forget(name);
      return {};
    }
    // Nothing is planned, torn down or judged gone on a cloud picture no read has confirmed yet.
    if (!this.deps.health.resynced) return this.publishOutage(pool);
    if (pool.metadata.deletionTimestamp) return this.departure.teardown(pool);
    if (!this.deps.cache.node(pool.spec.nodeName)) return this.departure.nodeMissing(pool);
    this.deps.memory.of(name).goneSince = undefined;
    if (!pool.metadata.finalizers?.includes(FINALIZER)) {
      if (!this.deps.mayWrite()) return {};
      // Planned on the pool as written, so that the status write does not carry an older version.
      // No precondition here: a new pool's cache often lags its creation by a write, and a 409 per
      // new node costs every node of a scale-up a round trip (bench scale-up-100: 1.8x -> 2.3x).
      const finalizers = [...(pool.metadata.finalizers ?? []), FINALIZER];
      pool = await this.deps.store.setFinalizers(name, finalizers);
      if (!pool) return {};
    }
    const waiting = describeHeldBack(this.deps, name);
    if (waiting) return { requeueAfterMs: waiting.until - this.deps.now() + 50 };
    let observation: PoolObservation | undefined;
    try {
      observation = await this.observe(pool);
    } catch (e) {
      // A describe the observation needs failed: held back like any call, and said in the status.
      const { held } = await this.failed(pool, e);
      if (held) await this.publishDegraded(pool);
      return { requeueAfterMs: held ? held.until - this.deps.now() + 50 : undefined };
    }
    if (!observation) return {};
    const carried = this.deps.memory.of(name).demand?.carried;
    const plan = this.decide(observation);
    const failure = await this.act(observation.pool, plan);
    // After a failure nothing is published: the pool is planned again on what the failure taught
    // (soon when the action is now held back, so that Degraded shows; the failure's handler
    // enqueued the pool itself otherwise). A batch the failed call was to carry was never taken.
    if (failure) {
      const memory = this.deps.memory.of(name);
      if (memory.demand) memory.demand = { ...memory.demand, carried };
      return { requeueAfterMs: failure.held ? AGAIN_MS : undefined };
    }
    // The cloud changed under the plan (an ENI landed or went meanwhile): plan again on it.
    if (!(await this.publish(observation, plan))) return { requeueAfterMs: AGAIN_MS };
    if (!(await this.liftStartupTaint(observation.pool, plan))) return { requeueAfterMs: TAINT_RETRY_MS };
    return { requeueAfterMs: plan.requeueAfterMs };
  }

  private observe(cached: ENIPool, unservable?: PoolObservation['unservable']): Promise<PoolObservation | undefined> {
    return observePool(this.deps, cached, {
      unservable,
      securityGroupsFailed: async (e) => void (await this.failed(cached, e)),
    });
  }

  /** Plans once, and keeps what the plan decided in the node's memory; its Events are said now. */
  private decide(o: PoolObservation): PoolPlan {
    const name = o.pool.metadata.name;
    const plan = planPool(o, this.deps.memory.forPlanning(name));
    Object.assign(this.deps.memory.of(name), plan.memory);
    if (Object.values(plan.status.releaseRequests).includes(o.requestStamp)) this.deps.stamps.took(o.requestStamp);
    // A deposed leader's plan is no news.
    if (this.deps.mayWrite()) for (const e of plan.events) this.deps.events.record(o.pool, e.type, e.reason, e.message);
    this.deps.logger.debug({ node: name, ...counts(plan) }, 'pool planned');
    return plan;
  }

  /** Carries the plan out; stops at the first failed call and answers what it meant. */
  private async act(pool: ENIPool, plan: PoolPlan): Promise<FailureResponse | undefined> {
    const { cloud, enis } = this.deps;
    for (const a of plan.adopt) {
      const eni = cloud.get(a.eniId);
      if (eni) enis.attach(pool, eni, { alreadyAttaching: a.alreadyAttaching });
    }
    let vSwitchId: string | undefined;
    let prefix = false;
    try {
      // Released first: the plan may assign into the room an unassign makes on the same ENI.
      for (const u of plan.unassign) await this.unassign(pool, u);
      for (const u of plan.unassignIpv6) await this.unassignIpv6(pool, u);
      for (const u of plan.unassignIpv6Prefixes) await this.unassignIpv6Prefixes(pool, u);
      for (const a of plan.assign) {
        vSwitchId = a.vSwitchId;
        prefix = a.prefix === true;
        await this.assign(pool, a);
      }
      vSwitchId = undefined;
      for (const a of plan.assignIpv6) await this.assignIpv6(pool, a);
      for (const a of plan.assignIpv6Prefixes) await this.assignIpv6Prefixes(pool, a);
      for (const c of plan.create)
        enis.create(pool, c.vSwitchId, c.ips, plan.securityGroupIds, {
          prefix: c.prefix,
          ipv6: c.ipv6,
          ipv6Prefixes: c.ipv6Prefixes,
        });
      for (const id of plan.deleteEnis) {
        const eni = cloud.get(id);
        if (eni) enis.remove(pool, eni);
      }
      return undefined;
    } catch (e) {
      return await this.failed(pool, e, vSwitchId, prefix);
    }
  }

  private async assign(pool: ENIPool, a: PoolPlan['assign'][number]): Promise<void> {
    const { cloud, ecs } = this.deps;
    const got = a.prefix
      ? { ips: [], prefixes: await ecs.assignIpv4Prefixes(a.eniId, { count: a.count / PREFIX_SIZE }) }
      : { ips: await ecs.assignPrivateIpAddresses(a.eniId, { count: a.count }), prefixes: [] };
    this.changed(pool, 'AssignPrivateIpAddresses');
    // A fragmented vSwitch that gives a /28 again is whole enough.
    if (a.prefix) cloud.unfragment(a.vSwitchId);
    cloud.took(a.vSwitchId, got.ips.length + PREFIX_SIZE * got.prefixes.length);
    const eni = cloud.get(a.eniId);
    if (eni)
      cloud.upsert({
        ...eni,
        secondaryIps: [...eni.secondaryIps, ...got.ips],
        ipv4Prefixes: [...eni.ipv4Prefixes, ...got.prefixes],
      });
    deficitMet(this.deps.memory.of(pool.metadata.name), this.deps.now(), this.deps.metrics.deficitToPublished);
    const what = a.prefix
      ? `${got.prefixes.length} /28 prefixes (${PREFIX_SIZE * got.prefixes.length} IPs: ${got.prefixes.join(', ')})`
      : `${got.ips.length} IPs`;
    this.deps.events.record(pool, 'Normal', 'AssignedIPs', `assigned ${what} to ${a.eniId} in ${a.vSwitchId}`);
  }

  private async unassign(pool: ENIPool, u: PoolPlan['unassign'][number]): Promise<void> {
    const { cloud, ecs } = this.deps;
    const prefixes = u.prefixes ?? [];
    if (u.ips.length) await ecs.unassignPrivateIpAddresses(u.eniId, u.ips).catch(unlessAlreadyUnassigned);
    if (prefixes.length) await ecs.unassignIpv4Prefixes(u.eniId, prefixes).catch(unlessAlreadyUnassigned);
    this.changed(pool, 'UnassignPrivateIpAddresses');
    const eni = cloud.get(u.eniId);
    if (eni)
      cloud.upsert({
        ...eni,
        secondaryIps: eni.secondaryIps.filter((ip) => !u.ips.includes(ip)),
        ipv4Prefixes: eni.ipv4Prefixes.filter((p) => !prefixes.includes(p)),
      });
    const what = [
      ...(u.ips.length ? [`${u.ips.length} excess IPs from ${u.eniId} (${u.ips.join(', ')})`] : []),
      ...(prefixes.length ? [`${prefixes.length} free /28 prefixes from ${u.eniId} (${prefixes.join(', ')})`] : []),
    ];
    this.deps.events.record(pool, 'Normal', 'ReleasedIPs', `unassigned ${what.join('; ')}`);
  }

  /** Dual-stack: IPv6 companions for the ENI's IPv4 pod addresses. */
  private async assignIpv6(pool: ENIPool, a: PoolPlan['assignIpv6'][number]): Promise<void> {
    const { cloud, ecs } = this.deps;
    const got = await ecs.assignIpv6Addresses(a.eniId, { count: a.count });
    this.changed(pool, 'AssignIpv6Addresses');
    const eni = cloud.get(a.eniId);
    if (eni) cloud.upsert({ ...eni, ipv6: [...eni.ipv6, ...got] });
    // In an IPv6-only pool these are the pool's pod addresses: a deficit met.
    if (ipv6Only(pool.spec))
      deficitMet(this.deps.memory.of(pool.metadata.name), this.deps.now(), this.deps.metrics.deficitToPublished);
    this.deps.events.record(pool, 'Normal', 'AssignedIPs', `assigned ${got.length} IPv6 addresses to ${a.eniId}`);
  }

  private async unassignIpv6(pool: ENIPool, u: PoolPlan['unassignIpv6'][number]): Promise<void> {
    const { cloud, ecs } = this.deps;
    await ecs.unassignIpv6Addresses(u.eniId, u.ips).catch(unlessAlreadyUnassigned);
    this.changed(pool, 'UnassignIpv6Addresses');
    const eni = cloud.get(u.eniId);
    if (eni) cloud.upsert({ ...eni, ipv6: eni.ipv6.filter((ip) => !u.ips.includes(ip)) });
    this.deps.events.record(
      pool,
      'Normal',
      'ReleasedIPs',
      `unassigned ${u.ips.length} excess IPv6 addresses from ${u.eniId} (${u.ips.join(', ')})`,
    );
  }

  /** ipv6Mode Prefix: a /80 for an ENI that has none; its pods take their IPv6 addresses from it. */
  private async assignIpv6Prefixes(pool: ENIPool, a: PoolPlan['assignIpv6Prefixes'][number]): Promise<void> {
    const { cloud, ecs } = this.deps;
    const got = await ecs.assignIpv6Prefixes(a.eniId, { count: a.count });
    this.changed(pool, 'AssignIpv6Addresses');
    const eni = cloud.get(a.eniId);
    if (eni) cloud.upsert({ ...eni, ipv6Prefixes: [...eni.ipv6Prefixes, ...got] });
    this.deps.events.record(
      pool,
      'Normal',
      'AssignedIPs',
      `assigned the IPv6 prefix ${got.join(', ')} to ${a.eniId}: its pods take their IPv6 addresses from it`,
    );
  }

  private async unassignIpv6Prefixes(pool: ENIPool, u: PoolPlan['unassignIpv6Prefixes'][number]): Promise<void> {
    const { cloud, ecs } = this.deps;
    await ecs.unassignIpv6Prefixes(u.eniId, u.prefixes).catch(unlessAlreadyUnassigned);
    this.changed(pool, 'UnassignIpv6Addresses');
    const eni = cloud.get(u.eniId);
    if (eni) cloud.upsert({ ...eni, ipv6Prefixes: eni.ipv6Prefixes.filter((p) => !u.prefixes.includes(p)) });
    this.deps.events.record(
      pool,
      'Normal',
      'ReleasedIPs',
      `unassigned ${u.prefixes.length} free IPv6 prefixes from ${u.eniId} (${u.prefixes.join(', ')})`,
    );
  }

  /**
   * Once the pool is Ready, its Node's startup taint goes: the scheduler may place pods there now
   * that their addresses wait for them. Never added back. False when the removal failed or lost a
   * race with another writer of the Node (it is tried again soon, on the Node as it is then).
   */
  private async liftStartupTaint(pool: ENIPool, plan: PoolPlan): Promise<boolean> {
    const taint = this.deps.config.startupTaint;
    const ready = plan.status.conditions.find((c) => c.type === 'Ready')?.status === 'True';
    if (!taint || !ready || !this.deps.mayWrite()) return true;
    const node = this.deps.cache.node(pool.spec.nodeName);
    const index = node?.spec?.taints?.findIndex(isTaint(taint)) ?? -1;
    if (!node || index < 0) return true;
    const name = node.metadata!.name!;
    try {
      await this.deps.store.removeTaint(name, node.metadata!.resourceVersion!, index);
    } catch (e) {
      this.deps.logger.warn(
        { node: name, taint: formatTaint(taint), err: apiErrorMessage(e) },
        'could not remove the startup taint; trying again',
      );
      return false;
    }
    const free = (plan.status.summary.available ?? 0) - (plan.status.summary.used ?? 0);
    this.deps.events.record(
      pool,
      'Normal',
      'StartupTaintRemoved',
      `removed taint ${formatTaint(taint)} from node ${name}: its pool is Ready (${free} IPs free)`,
    );
    return true;
  }

  private changed(pool: ENIPool, action: string): void {
    this.deps.memory.of(pool.metadata.name).failures.delete(action);
    this.deps.metrics.cloudChanges.inc({ action });
  }

  /** A failed call: its meaning is handled (see CloudFailures), and said in an Event if nothing said it yet. */
  private async failed(pool: ENIPool, e: unknown, vSwitchId?: string, prefix = false): Promise<FailureResponse> {
    if (!(e instanceof CloudError) || isShutdown(e)) throw e;
    // No answer: the call may have been carried out; the next plan starts from what the cloud holds.
    if (e.outcomeUnknown) {
      await this.deps.cloud.resyncInstance(pool.spec.instanceID, pool.metadata.name).catch(() => undefined);
    }
    const response = await this.deps.failures.respond(pool, e, vSwitchId, prefix);
    if (response.held && !response.told)
      this.deps.events.record(pool, 'Warning', 'CloudCallFailed', response.held.message);
    return response;
  }

  /**
   * Writes the planned status, if it differs from the pool's, against the pool's resourceVersion.
   * False when the cloud no longer matches the plan (a background ENI landed or went while it
   * acted): nothing is written, the pool is planned again.
   */
  private async publish(observation: PoolObservation, plan: PoolPlan): Promise<boolean> {
    const { pool } = observation;
    const { cloud } = this.deps;
    const name = pool.metadata.name;
    const { eniIds, summary, ...rest } = plan.status;
    const current = eniIds.map((id) => cloud.get(id)).filter((e): e is NetworkInterface => e !== undefined);
    // The node's own addresses as the plan saw them: the status and the plan count alike.
    const enis = publishedEnis(current, await cloud.vSwitches(), pool.spec, observation.nodeAddresses);
    const inUse = enis.reduce((n, e) => n + (e.state === 'InUse' ? (e.ips?.length ?? 0) : 0), 0);
    // A /80 serves pods only in a dual-stack pool (the planner counts alike).
    const prefixesServe = dualStack(pool.spec);
    const inUse6 = enis.reduce(
      (n, e) =>
        n +
        (e.state === 'InUse'
          ? ipv6Room(e.ips?.length ?? 0, e.ipv6s?.length ?? 0, prefixesServe ? (e.ipv6Prefixes?.length ?? 0) : 0)
          : 0),
      0,
    );
    // The summary counts the pool's pod family (IPv6 in an IPv6-only pool); an Exclusive pool's, ENIs a pod may take whole.
    const pods = exclusiveMode(pool.spec)
      ? enis.filter((e) => e.state === 'InUse' && !e.ips?.length && !e.prefixes?.length).length
      : ipv6Only(pool.spec)
        ? inUse6
        : inUse;
    // An IPv6-only pool's /80 serves every pod the node runs: that room is the planner's word (ipv6-only-prefix.ts).
    const servedBy80 =
      ipv6Only(pool.spec) &&
      ipv6PrefixMode(pool.spec) &&
      enis.some((e) => e.state === 'InUse' && (e.ipv6Prefixes?.length ?? 0) > 0);
    const roomDiffers = pods !== summary.available || inUse6 !== (summary.availableIPv6 ?? inUse6);
    if (enis.length !== eniIds.length || (!servedBy80 && roomDiffers)) return false;
    const m = this.deps.metrics.poolIps;
    for (const kind of ['available', 'used', 'needed', 'releasing', 'batch'] as const)
      m.set({ node: name, kind }, summary[kind] ?? 0);
    this.deps.metrics.poolPrefixes.set({ node: name }, summary.prefixes ?? 0);
    if (summary.availableIPv6 !== undefined) {
      this.deps.metrics.poolIpv6.set({ node: name, kind: 'available' }, summary.availableIPv6);
      this.deps.metrics.poolIpv6.set({ node: name, kind: 'used' }, summary.usedIPv6 ?? 0);
    }
    if (summary.ipv6Prefixes !== undefined)
      this.deps.metrics.poolIpv6Prefixes.set({ node: name }, summary.ipv6Prefixes);
    const patch = statusPatch(pool.status, { enis, summary, ...rest });
    // A deposed leader's picture of the cloud may already be wrong: it publishes nothing.
    if (!this.deps.mayWrite()) return true;
    // The resourceVersion makes the write a precondition: planned on an older pool than the
    // server has (an agent wrote meanwhile, or the cache lags our own last write), it is refused.
    if (patch) await this.deps.store.patchStatus(name, pool.metadata.resourceVersion, patch);
    return true;
  }

  /** A describe the observation needs keeps failing: Degraded says so (nothing else can be planned). */
  private async publishDegraded(pool: ENIPool): Promise<void> {
    const degraded = degradedCondition([...this.deps.memory.of(pool.metadata.name).failures.values()]);
    if (degraded.status === 'True') await this.publishCondition(pool, degraded);
  }

  /**
   * The operator has not read the cloud yet (its first resync fails): the pool says why, once,
   * and waits; the outage's end enqueues every pool.
   */
  private async publishOutage(pool: ENIPool): Promise<ReconcileResult> {
    const outage = this.deps.health.outage();
    if (outage && (await this.publishCondition(pool, { type: 'Degraded', status: 'True', ...outage })))
      this.deps.events.record(pool, 'Warning', outage.reason, outage.message);
    return {};
  }

  /** Sets one condition on the pool, if it changes anything; answers whether it was written. */
  private async publishCondition(pool: ENIPool, condition: PlannedCondition): Promise<boolean> {
    if (!this.deps.mayWrite()) return false;
    const conditions = setCondition(pool.status?.conditions ?? [], condition, conditionTime(this.deps.now()));
    if (sameJson(conditions, pool.status?.conditions)) return false;
    await this.deps.store.patchStatus(pool.metadata.name, pool.metadata.resourceVersion, { conditions });
    return true;
  }

  /** The pool cannot be served now (its node is gone): Ready is false for this reason. */
  private async publishNotReady(pool: ENIPool, reason: string, message: string): Promise<void> {
    const observation = await this.observe(pool, { reason, message });
    if (observation) await this.publish(observation, this.decide(observation));
  }
}

const counts = (p: PoolPlan) => ({
  adopt: p.adopt.length,
  assign: p.assign.length,
  create: p.create.length,
  unassign: p.unassign.length,
  assignIpv6: p.assignIpv6.length,
  unassignIpv6: p.unassignIpv6.length,
  assignIpv6Prefixes: p.assignIpv6Prefixes.length,
  unassignIpv6Prefixes: p.unassignIpv6Prefixes.length,
  deleteEnis: p.deleteEnis.length,
  requeueAfterMs: p.requeueAfterMs,
});
