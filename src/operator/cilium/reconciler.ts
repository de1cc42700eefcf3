import type { ENIPool, ReleaseAck } from '../../api/types.js';
import type { NetworkInterface, VSwitch } from '../../cloud/index.js';
import { isConflict } from '../../kube/errors.js';
import type { Logger } from '../../observability/logger.js';
import { sameForAgent } from './omit-empty.js';
import { ciliumPool, ciliumStatus, newReadyAnswer, poolAgentPatch, unservableByCilium } from './publication.js';
import type { CiliumNodeStore } from './store.js';
import type { CiliumNode } from './types.js';

export interface CiliumReconcilerDeps {
  cache: {
    pool(name: string): ENIPool | undefined;
    ciliumNode(name: string): CiliumNode | undefined;
  };
  store: CiliumNodeStore;
  /** The agent's fields of the ENIPool (used, releaseAcks): a merge patch of the status. */
  patchPoolStatus(name: string, patch: Record<string, unknown>): Promise<void>;
  cloud: {
    enisOfInstance(instanceId: string): NetworkInterface[];
    vSwitches(): Promise<VSwitch[]>;
  };
  mayWrite: () => boolean;
  /** Whether the cloud cache has been read whole once: before, its silence on an ENI says nothing. */
  cloudSynced: () => boolean;
  /** A Warning about the node, on its CiliumNode. */
  warn(node: CiliumNode, reason: string, message: string): void;
  logger: Logger;
}

/** A write refused because the agent wrote meanwhile is redone on the node read afresh, this often at most. */
const ATTEMPTS = 3;

/**
 * `--pool-api ciliumnode`: the operator keeps each node's pool in its ENIPool as always (planned,
 * acted on and published by the pool reconciler), and this reconciler is the bridge to the
 * node's cilium-agent. To the agent it is the IPAM operator: it lists the ENIs in the
 * CiliumNode's status before their addresses enter `spec.ipam.pool`, and speaks the release
 * handshake. To the pool reconciler it is the node agent: it reports the agent's `used`, and
 * acks a release request once the agent answered it. Only the operator's fields of the
 * CiliumNode are written, each time onto the node as read, with its resourceVersion.
 */
export class CiliumReconciler {
  /** Per node, why its pool (or part of it) is not published: said once per reason. */
  private readonly said = new Map<string, string>();
  /**
   * Per node, the `ready` acks this reconciler wrote that its pool cache may not show yet: until
   * it does, an address so confirmed is on its way out (a CiliumNode made anew meanwhile must
   * not be offered it), whatever the cache says.
   */
  private readonly written = new Map<string, Record<string, ReleaseAck>>();

  constructor(private readonly deps: CiliumReconcilerDeps) {}

  async reconcile(name: string): Promise<{ backoff?: boolean }> {
    let node = this.deps.cache.ciliumNode(name);
    // The agent creates its CiliumNode; until it has, there is nothing to serve. Nor before the
    // cloud was read whole (every key is queued again then): a node's ENIs, as a cold cache
    // gives them, would be none.
    if (!node || !this.deps.mayWrite() || !this.deps.cloudSynced()) return {};
    const cached = this.deps.cache.pool(name);
    if (!cached) this.written.delete(name);
    const pool = cached && this.withWritten(cached);
    // No record of the node's pool (not made yet, or no observation published yet: a condition
    // alone, as a cloud outage at start writes, says nothing of its ENIs) is no word on it: an
    // empty pool read as the truth would take every free address from the agent.
    if (!pool?.status?.summary) return {};
    const why = unservableByCilium(pool.spec);
    if (why) {
      this.sayOnce(node, 'pool', 'UnservableByCilium', why);
      return {};
    }
    this.said.delete(`${name}/pool`);
    const instanceId = node.spec['instance-id'] || pool.spec.instanceID;
    const instanceEnis = instanceId ? this.deps.cloud.enisOfInstance(instanceId) : [];
    const unindexed = new Set(
      instanceEnis.filter((e) => e.status === 'InUse' && e.deviceIndex === undefined).map((e) => e.id),
    );
    // An answer that lets an address go is taken from the API server, never from the cache.
    let live = false;
    if (newReadyAnswer(node, pool, unindexed)) {
      node = await this.deps.store.read(name);
      live = true;
    }
    for (let attempt = 1; node; attempt++) {
      try {
        return await this.publish(node, pool, live, { instanceId, instanceEnis, unindexed });
      } catch (e) {
        if (!isConflict(e) || attempt >= ATTEMPTS) {
          if (isConflict(e)) return { backoff: true };
          throw e;
        }
        // The agent rewrote its object meanwhile: ours are set again onto what it wrote.
        node = await this.deps.store.read(name);
        live = true;
      }
    }
    return {};
  }

  /** The pool as cached, with the ready acks written since that it does not show yet. */
  private withWritten(pool: ENIPool): ENIPool {
    const name = pool.metadata.name;
    const mine = this.written.get(name);
    if (!mine) return pool;
    const requests = pool.status?.releaseRequests ?? {};
    const acks = { ...(pool.status?.releaseAcks ?? {}) };
    for (const [ip, ack] of Object.entries(mine)) {
      const shown = acks[ip];
      // Shown by the cache now, or moot (the request it answers is gone): forgotten.
      if (requests[ip] !== ack.requestedAt || (shown?.answer === ack.answer && shown.requestedAt === ack.requestedAt))
        delete mine[ip];
      else acks[ip] = ack;
    }
    if (!Object.keys(mine).length) this.written.delete(name);
    return { ...pool, status: { ...pool.status, releaseAcks: acks } } as ENIPool;
  }

  /** Notes the ready acks a pool patch wrote, and forgets those it withdrew. */
  private noteWritten(name: string, patch: Record<string, unknown>): void {
    const acks = (patch.releaseAcks ?? {}) as Record<string, ReleaseAck | null>;
    const mine = this.written.get(name) ?? {};
    for (const [ip, ack] of Object.entries(acks))
      if (ack?.answer === 'ready') mine[ip] = ack;
      else delete mine[ip];
    if (Object.keys(mine).length) this.written.set(name, mine);
    else this.written.delete(name);
  }

  /** A Warning about one matter of the node, once until the matter is cleared or changes. */
  private sayOnce(node: CiliumNode, matter: string, reason: string, message: string): void {
    const key = `${node.metadata.name}/${matter}`;
    if (this.said.get(key) !== message) this.deps.warn(node, reason, message);
    this.said.set(key, message);
  }

  private async publish(
    read: CiliumNode,
    pool: ENIPool,
    live: boolean,
    cloud: { instanceId?: string; instanceEnis: NetworkInterface[]; unindexed: ReadonlySet<string> },
  ): Promise<{ backoff?: boolean }> {
    const name = read.metadata.name;
    let node = read;
    const { instanceId, instanceEnis, unindexed } = cloud;
    if (unindexed.size)
      this.sayOnce(
        node,
        'index',
        'ENIWithoutDeviceIndex',
        `ENIs ${[...unindexed].join(', ')} of instance ${instanceId} have no device index in the cloud's answer: the agent ` +
          'routes an ENI by its index, so their addresses are not offered to it until DescribeNetworkInterfaces gives one',
      );
    else this.said.delete(`${name}/index`);
    // The status first: the agent fails an allocation whose ENI it cannot find in it.
    const status = ciliumStatus({ node, pool, instanceEnis, vSwitches: await this.deps.cloud.vSwitches() });
    const blind = Object.values(status['alibaba-cloud']?.enis ?? {}).filter((e) => !e.vswitch?.cidr);
    if (blind.length)
      this.sayOnce(
        node,
        'cidr',
        'ENIWithoutVSwitchCIDR',
        `the vSwitches of ENIs ${blind.map((e) => `${e['network-interface-id']} (${e.vswitch?.['vswitch-id']})`).join(', ')} ` +
          'are not among the VPC vSwitches the operator knows: the agent routes by the vSwitch CIDR, so their addresses are ' +
          'not offered to it (check that the vSwitch exists in the VPC and that DescribeVSwitches lists it)',
      );
    else this.said.delete(`${name}/cidr`);
    if (!sameForAgent(status, node.status)) {
      if (!this.deps.mayWrite()) return {};
      node = await this.deps.store.replaceStatus({ ...node, status });
      live = true;
    }
    const wanted = ciliumPool(node, pool);
    if (!sameForAgent(wanted, node.spec.ipam?.pool)) {
      if (!this.deps.mayWrite()) return {};
      const added = Object.keys(wanted).filter((ip) => !(ip in (node.spec.ipam?.pool ?? {}))).length;
      const removed = Object.keys(node.spec.ipam?.pool ?? {}).filter((ip) => !(ip in wanted)).length;
      node = await this.deps.store.replace({
        ...node,
        spec: { ...node.spec, ipam: { ...node.spec.ipam, pool: wanted } },
      });
      live = true;
      this.deps.logger.debug(
        { node: name, added, removed, size: Object.keys(wanted).length },
        'CiliumNode pool published',
      );
    }
    const patch = poolAgentPatch(node, pool, { live, unindexed });
    if (patch && this.deps.mayWrite()) {
      await this.deps.patchPoolStatus(name, patch);
      this.noteWritten(name, patch);
    }
    return {};
  }
}
