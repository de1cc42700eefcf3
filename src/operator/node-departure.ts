import {
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Api,
  type CustomObjectsApi,
  type V1Node,
} from '@kubernetes/client-node';
import { GROUP, VERSION, type ENIPool } from '../api/types.js';
import type { EcsApi, NetworkInterface } from '../cloud/index.js';
import { answerTo } from '../ipam/release.js';
import { ignoreNotFound, isNotFound } from '../kube/errors.js';
import type { Informer } from '../kube/informer.js';
import type { Logger } from '../observability/logger.js';
import type { CloudState } from './cloud-state.js';
import { FINALIZER, type OperatorConfig } from './config.js';
import type { EniLifecycle } from './eni-lifecycle.js';
import { requestStamp } from './pool-status.js';

export interface DepartureDeps {
  api: EcsApi;
  cloud: CloudState;
  config: OperatorConfig;
  logger: Logger;
  pools: Informer<ENIPool>;
  nodes: Informer<V1Node>;
  custom: CustomObjectsApi;
  core: CoreV1Api;
  enis: EniLifecycle;
  event: (pool: ENIPool, type: 'Normal' | 'Warning', reason: string, message: string) => void;
  notReady: (pool: ENIPool, reason: string, message: string) => Promise<void>;
}

type Result = { requeueAfterMs?: number };
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/**
 * A node leaving the cluster, and its pool with it. Absence in a cache is no proof: a pool goes
 * only when its Node is gone on the API server and its instance is released (a running instance
 * keeps its ENIs for a grace period; many nodes vanishing at once are held as suspect). A pool
 * being deleted gives its ENIs back to the cloud once the creations in flight have landed, and
 * never an ENI whose addresses pods of a live node still use.
 */
export class NodeDeparture {
  /** When each pool's Node was first confirmed gone while its instance still existed. */
  private readonly goneSince = new Map<string, number>();
  /** Pools being torn down whose node's ENIs were read afresh. */
  private readonly resynced = new Set<string>();

  constructor(private readonly d: DepartureDeps) {}

  /** The pool's Node is there (again): no grace period runs. */
  nodeSeen(name: string): void {
    this.goneSince.delete(name);
  }

  async nodeMissing(pool: ENIPool): Promise<Result> {
    const name = pool.metadata.name;
    const nodeName = pool.spec.nodeName;
    try {
      await this.d.core.readNode({ name: nodeName });
      return { requeueAfterMs: 1000 }; // the cache lags: the Node is there
    } catch (e) {
      if (!isNotFound(e))
        throw new Error(
          `node ${nodeName} is not in the cache and cannot be read (${(e as Error).message}); keeping its pool`,
        );
    }
    const instanceId = pool.spec.instanceID;
    const instance = instanceId ? (await this.d.api.describeInstances({ ids: [instanceId] }))[0] : undefined;
    if (!instance) {
      this.d.logger.info({ node: nodeName, instance: instanceId }, 'node and instance are gone; deleting the pool');
      await this.deletePool(name);
      return {};
    }
    const pools = this.d.pools.list();
    const vanished = pools.filter((p) => !this.d.nodes.get(p.spec.nodeName)).length;
    const now = Date.now();
    if (vanished >= 3 && vanished * 2 >= pools.length) {
      this.goneSince.delete(name);
      const message = `${vanished} of ${pools.length} nodes vanished at once while their instances still exist; treating it as suspect and keeping every pool`;
      this.d.logger.warn({ node: nodeName, vanished, pools: pools.length }, message);
      await this.d.notReady(pool, 'NodeGone', message);
      return { requeueAfterMs: 60_000 };
    }
    const since = this.goneSince.get(name) ?? now;
    this.goneSince.set(name, since);
    const graceMs = this.d.config.nodeGoneGraceMs;
    if (now - since >= graceMs) {
      this.d.logger.info(
        { node: nodeName, instance: instanceId, status: instance.status },
        'node has been gone for the grace period; deleting its pool',
      );
      await this.deletePool(name);
      return {};
    }
    const message = `node ${nodeName} is gone but instance ${instanceId} is ${instance.status}; its ENIs are kept until the instance is released or ${Math.round(graceMs / 1000)} s have passed`;
    if (since === now) this.d.event(pool, 'Warning', 'NodeGone', message);
    await this.d.notReady(pool, 'NodeGone', message);
    return { requeueAfterMs: Math.min(60_000, graceMs - (now - since) + 50) };
  }

  private async deletePool(name: string): Promise<void> {
    this.goneSince.delete(name);
    await ignoreNotFound(
      this.d.custom.deleteClusterCustomObject({ group: GROUP, version: VERSION, plural: 'enipools', name }),
    );
  }

  /** The pool is being deleted: detach and delete the ENIs we created for it, then let it go. */
  async teardown(pool: ENIPool): Promise<Result> {
    const name = pool.metadata.name;
    const { cloud, config, enis } = this.d;
    if (!pool.metadata.finalizers?.includes(FINALIZER)) return {};
    // ENIs still being created would end attached to no pool: let them land first.
    const coming = enis.coming(name);
    if (coming.enis > 0) {
      this.d.logger.info(
        { node: name, inFlight: coming.enis },
        'pool is being deleted; waiting for ENI creations in flight',
      );
      return { requeueAfterMs: 1000 };
    }
    if (config.mode !== 'normal') {
      const kept = cloud.ownedBy(name);
      if (kept.length)
        this.d.event(
          pool,
          'Warning',
          'ENIsKept',
          `pool ${name} is deleted; mode ${config.mode} keeps its ${kept.length} ENIs`,
        );
      return this.letGo(pool);
    }
    // What the cloud holds for this node now (the cache may predate the instance's release);
    // once per teardown: while the agent answers, the poller and resyncs keep the cache.
    if (!this.resynced.has(name)) {
      await cloud.resyncInstance(pool.spec.instanceID, name);
      this.resynced.add(name);
    }
    const ours = cloud.ownedBy(name);
    // On a node that still runs, pods may hold any published address: only the agent can say
    // which are free. Its ENIs go through the release handshake, whole, one confirmed ENI at a time.
    const handshake = ours.some((e) => e.status === 'InUse') && (await this.nodeExists(pool.spec.nodeName));
    const confirmed = handshake
      ? await this.confirmRelease(
          pool,
          ours.filter((e) => e.status === 'InUse'),
        )
      : undefined;
    const deletable = confirmed ? ours.filter((e) => e.status !== 'InUse' || confirmed.has(e.id)) : ours;
    await Promise.all(deletable.map((e) => enis.deleteEni(e.id)));
    if (deletable.length)
      this.d.event(
        pool,
        'Normal',
        'ReleasedENIs',
        `pool ${name} is deleted: deleted its ${deletable.length} ENIs (${deletable.map((e) => e.id).join(', ')})`,
      );
    const kept = ours.filter((e) => !deletable.includes(e));
    if (kept.length) {
      const message = `pool ${name} is deleted while node ${pool.spec.nodeName} runs; ${kept.map((e) => e.id).join(', ')} go once the agent confirms their addresses are free`;
      this.d.event(pool, 'Warning', 'ENIsInUse', message);
      return { requeueAfterMs: 5_000 };
    }
    return this.letGo(pool);
  }

  private async nodeExists(nodeName: string): Promise<boolean> {
    return (await ignoreNotFound(this.d.core.readNode({ name: nodeName }))) !== undefined;
  }

  /**
   * Asks the agent, through releaseRequests, for every address of the ENIs (a fresh read of the
   * pool, a write that carries its resourceVersion) and answers the ENIs whose every address it
   * confirmed free for the request outstanding now.
   */
  private async confirmRelease(pool: ENIPool, enis: NetworkInterface[]): Promise<Set<string>> {
    const name = pool.metadata.name;
    const live = (await this.d.custom.getClusterCustomObjectStatus({
      group: GROUP,
      version: VERSION,
      plural: 'enipools',
      name,
    })) as ENIPool;
    const requests = { ...(live.status?.releaseRequests ?? {}) };
    const missing = enis.flatMap((e) => [e.primaryIp, ...e.secondaryIps]).filter((ip) => !(ip in requests));
    if (missing.length) {
      for (const ip of missing) requests[ip] = requestStamp();
      const body = {
        metadata: { resourceVersion: live.metadata.resourceVersion },
        status: { releaseRequests: requests },
      };
      await this.d.custom.patchClusterCustomObjectStatus(
        { group: GROUP, version: VERSION, plural: 'enipools', name, body },
        merge,
      );
      return new Set();
    }
    const asked = new Map(Object.entries(requests));
    const acks = new Map(
      Object.entries(live.status?.releaseAcks ?? {}).filter(([, a]) => typeof a === 'object' && a !== null),
    );
    const used = live.status?.used ?? {};
    const free = (ip: string) => !(ip in used) && answerTo(ip, asked, acks) === 'ready';
    return new Set(enis.filter((e) => [e.primaryIp, ...e.secondaryIps].every(free)).map((e) => e.id));
  }

  private async letGo(pool: ENIPool): Promise<Result> {
    this.resynced.delete(pool.metadata.name);
    const finalizers = (pool.metadata.finalizers ?? []).filter((f) => f !== FINALIZER);
    const body = { metadata: { finalizers } };
    await ignoreNotFound(
      this.d.custom.patchClusterCustomObject(
        { group: GROUP, version: VERSION, plural: 'enipools', name: pool.metadata.name, body },
        merge,
      ),
    );
    return {};
  }
}
