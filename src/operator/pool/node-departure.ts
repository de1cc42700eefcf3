import type { ENIPool } from '../../api/types.js';
import { unlessAlreadyUnassigned, type NetworkInterface } from '../../cloud/index.js';
import { UNASSIGN_IPV6_BATCH, ipv6Only } from '../../ipam/families.js';
import { UNASSIGN_IPV6_PREFIX_BATCH } from '../../ipam/ipv6-prefix.js';
import { UNASSIGN_BATCH } from '../../ipam/pool-plan.js';
import { keyCovers } from '../../ipam/prefix.js';
import { acksOf, answerTo } from '../../ipam/release.js';
import { apiErrorMessage } from '../../kube/errors.js';
import { FINALIZER, type OperatorConfig } from '../config.js';
import type { PoolSide } from './ports.js';

export interface DepartureDeps extends PoolSide {
  config: Pick<OperatorConfig, 'mode' | 'nodeGoneGraceMs'>;
  notReady: (pool: ENIPool, reason: string, message: string) => Promise<void>;
}

type Result = { requeueAfterMs?: number };

/** What the pool gave pods on the primary ENI: its published secondaries of both families and /80s. */
const keysOfPrimary = (e: NetworkInterface) => [...e.secondaryIps, ...e.ipv6, ...e.ipv6Prefixes];

/** What a release request of an ENI names: its primary, each secondary, each /28 prefix whole. */
const keysOf = (e: NetworkInterface) => [
  e.primaryIp,
  ...e.secondaryIps,
  ...e.ipv4Prefixes,
  ...e.ipv6,
  ...e.ipv6Prefixes,
];

/**
 * A node leaving the cluster, and its pool with it. Absence in a cache is no proof: a pool goes
 * only when its Node is gone on the API server and its instance is released (a running instance
 * keeps its ENIs for a grace period; many nodes vanishing at once are held as suspect). A pool
 * being deleted gives its ENIs back to the cloud once the creations in flight have landed, and
 * never an ENI whose addresses pods of a live node still use.
 */
export class NodeDeparture {
  constructor(private readonly deps: DepartureDeps) {}

  async nodeMissing(pool: ENIPool): Promise<Result> {
    const name = pool.metadata.name;
    const nodeName = pool.spec.nodeName;
    const memory = this.deps.memory.of(name);
    let exists: boolean;
    try {
      exists = await this.deps.store.nodeExists(nodeName);
    } catch (e) {
      const why = apiErrorMessage(e);
      throw new Error(`node ${nodeName} is not in the cache and cannot be read (${why}); keeping its pool`);
    }
    if (exists) return { requeueAfterMs: 1000 }; // the cache lags: the Node is there
    const instanceId = pool.spec.instanceID;
    const instance = instanceId ? (await this.deps.ecs.describeInstances({ ids: [instanceId] }))[0] : undefined;
    if (!this.deps.mayWrite()) return {};
    if (!instance) {
      this.deps.logger.info({ node: nodeName, instance: instanceId }, 'node and instance are gone; deleting the pool');
      await this.deps.store.deletePool(name);
      return {};
    }
    const pools = this.deps.cache.pools();
    const vanished = pools.filter((p) => !this.deps.cache.node(p.spec.nodeName)).length;
    const now = this.deps.now();
    if (vanished >= 3 && vanished * 2 >= pools.length) {
      memory.goneSince = undefined;
      const message =
        `${vanished} of ${pools.length} nodes vanished at once while their instances still exist; ` +
        'treating it as suspect and keeping every pool';
      this.deps.logger.warn({ node: nodeName, vanished, pools: pools.length }, message);
      await this.deps.notReady(pool, 'NodeGone', message);
      return { requeueAfterMs: 60_000 };
    }
    const since = memory.goneSince ?? now;
    memory.goneSince = since;
    const graceMs = this.deps.config.nodeGoneGraceMs;
    if (now - since >= graceMs) {
      this.deps.logger.info(
        { node: nodeName, instance: instanceId, status: instance.status },
        'node has been gone for the grace period; deleting its pool',
      );
      await this.deps.store.deletePool(name);
      return {};
    }
    const message =
      `node ${nodeName} is gone but instance ${instanceId} is ${instance.status}; ` +
      `its ENIs are kept until the instance is released or ${Math.round(graceMs / 1000)} s have passed`;
    if (since === now) this.deps.events.record(pool, 'Warning', 'NodeGone', message);
    await this.deps.notReady(pool, 'NodeGone', message);
    return { requeueAfterMs: Math.min(60_000, graceMs - (now - since) + 50) };
  }

  /** The pool is being deleted: detach and delete the ENIs we created for it, then let it go. */
  async teardown(pool: ENIPool): Promise<Result> {
    const name = pool.metadata.name;
    const { cloud, config, enis, events } = this.deps;
    if (!pool.metadata.finalizers?.includes(FINALIZER)) return {};
    const memory = this.deps.memory.of(name);
    const inFlight = enis.inFlight(name);
    // ENIs still being created would end attached to no pool: let them land first.
    if (inFlight.enis > 0) {
      this.deps.logger.info(
        { node: name, inFlight: inFlight.enis },
        'pool is being deleted; waiting for ENI creations in flight',
      );
      return { requeueAfterMs: 1000 };
    }
    if (config.mode !== 'normal') {
      const kept = cloud.ownedBy(name);
      if (kept.length) {
        const message = `pool ${name} is deleted; mode ${config.mode} keeps its ${kept.length} ENIs`;
        events.record(pool, 'Warning', 'ENIsKept', message);
      }
      return this.letGo(pool);
    }
    // What the cloud holds for this node now (the cache may predate the instance's release);
    // once per teardown: while the agent answers, the poller and resyncs keep the cache.
    if (!memory.resyncedForTeardown) {
      await cloud.resyncInstance(pool.spec.instanceID, name);
      memory.resyncedForTeardown = true;
    }
    const ours = cloud.ownedBy(name);
    // The secondaries the pool gave pods on the instance's primary ENI (usePrimaryENI) go back too.
    const primary = this.publishedPrimary(pool);
    // On a node that still runs, pods may hold any published address: only the agent can say
    // which are free. Its ENIs go through the release handshake, whole, one confirmed ENI at a time.
    const attached = [...ours.filter((e) => e.status === 'InUse'), ...(primary ? [primary] : [])];
    const handshake = attached.length > 0 && (await this.deps.store.nodeExists(pool.spec.nodeName));
    const answers = handshake ? await this.confirmRelease(pool, attached) : undefined;
    const confirmed = answers?.enis;
    // The primary's addresses go one by one: one the node itself holds (the agent refuses it, and
    // no pod uses it) stays the node's and does not hold the pool back.
    const primaryKept: string[] = [];
    if (primary) {
      const verdict = (key: string) => answers?.verdict(key) ?? 'free';
      const free = (keys: string[]) => keys.filter((key) => verdict(key) === 'free');
      const freed = {
        ...primary,
        secondaryIps: free(primary.secondaryIps),
        ipv6: free(primary.ipv6),
        ipv6Prefixes: free(primary.ipv6Prefixes),
      };
      if (freed.secondaryIps.length + freed.ipv6.length + freed.ipv6Prefixes.length)
        await this.unassignPrimary(pool, freed);
      if (keysOfPrimary(primary).some((key) => verdict(key) === 'wait')) primaryKept.push(primary.id);
    }
    // An ENI already being deleted (an emptied one, in the background) is waited for, not deleted twice.
    const free = (e: NetworkInterface) =>
      !inFlight.removing.has(e.id) && (!confirmed || e.status !== 'InUse' || confirmed.has(e.id));
    const deletable = ours.filter(free);
    await Promise.all(deletable.map((e) => enis.deleteEni(pool, e.id)));
    if (deletable.length) {
      const ids = deletable.map((e) => e.id).join(', ');
      events.record(
        pool,
        'Normal',
        'ReleasedENIs',
        `pool ${name} is deleted: deleted its ${deletable.length} ENIs (${ids})`,
      );
    }
    if (ours.some((e) => enis.inFlight(name).removing.has(e.id))) return { requeueAfterMs: 1000 };
    const kept = [...ours.filter((e) => !deletable.includes(e)).map((e) => e.id), ...primaryKept];
    if (kept.length) {
      const ids = kept.join(', ');
      const message =
        `pool ${name} is deleted while node ${pool.spec.nodeName} runs; ` +
        `${ids} go once the agent confirms their addresses are free`;
      events.record(pool, 'Warning', 'ENIsInUse', message);
      return { requeueAfterMs: 5_000 };
    }
    // The finalizer goes only once a live read shows no ENI of this pool left in the cloud (a
    // cache can miss one, a read can fail: absence there is no proof). One left is deleted next.
    await cloud.resyncInstance(pool.spec.instanceID, name);
    const left = [...cloud.ownedBy(name), ...this.primaryLeft(pool, answers)];
    if (left.length) {
      this.deps.logger.warn(
        { node: name, enis: left.map((e) => e.id) },
        'pool is being deleted; the cloud still holds ENIs of it: deleting them first',
      );
      memory.resyncedForTeardown = true;
      return { requeueAfterMs: 1000 };
    }
    return this.letGo(pool);
  }

  /**
   * Asks the agent, through releaseRequests, for every address it was shown (a fresh read of the
   * pool, a write that carries its resourceVersion) and answers the ENIs whose every address is
   * free for the request outstanding now. The agent hands out only addresses the pool publishes on
   * an InUse ENI, and answers `do-not-release` for any other; a pool being deleted never publishes
   * again, so an address it never published (an ENI, or an assign, that landed after its last
   * status) is free as it is, unless it is in use all the same (a stray allocation).
   */
  private async confirmRelease(
    pool: ENIPool,
    enis: NetworkInterface[],
  ): Promise<{ enis: Set<string>; verdict: (key: string) => 'free' | 'node' | 'wait' }> {
    const name = pool.metadata.name;
    const live = await this.deps.store.readPool(name);
    if (!live) return { enis: new Set(), verdict: () => 'wait' };
    const used = live.status?.used ?? {};
    const shown = new Set(
      (live.status?.enis ?? [])
        .filter((e) => e.state === 'InUse')
        .flatMap((e) => [...(e.ips ?? []), ...(e.ipv6s ?? [])]),
    );
    // An IPv6 /80 is published as itself: its addresses are never listed.
    const shownPrefixes = new Set(
      (live.status?.enis ?? []).filter((e) => e.state === 'InUse').flatMap((e) => e.ipv6Prefixes ?? []),
    );
    const usedBy = (key: string) => Object.keys(used).some(keyCovers(key));
    // A prefix is asked for, and answered, whole (one ack covers all its addresses).
    const unseen = (key: string) => !shownPrefixes.has(key) && ![...shown].some(keyCovers(key)) && !usedBy(key);
    const requests = { ...(live.status?.releaseRequests ?? {}) };
    const missing = enis.flatMap(keysOf).filter((key) => !unseen(key) && !(key in requests));
    if (missing.length) {
      if (!this.deps.mayWrite()) return { enis: new Set(), verdict: () => 'wait' };
      const stamp = this.deps.stamps.take(this.deps.now());
      for (const key of missing) requests[key] = stamp;
      await this.deps.store.patchStatus(name, live.metadata.resourceVersion, { releaseRequests: requests });
      return {
        enis: new Set(enis.filter((e) => keysOf(e).every(unseen)).map((e) => e.id)),
        verdict: (key) => (unseen(key) ? 'free' : 'wait'),
      };
    }
    const asked = new Map(Object.entries(requests));
    const acks = acksOf(live.status);
    const unused = (key: string) => !usedBy(key);
    const free = (key: string) => unseen(key) || (unused(key) && answerTo(key, asked, acks) === 'ready');
    return {
      enis: new Set(enis.filter((e) => keysOf(e).every(free)).map((e) => e.id)),
      // Refused though no pod uses it: the node's own (an address configured on its interface).
      verdict: (key) =>
        free(key) ? 'free' : unused(key) && answerTo(key, asked, acks) === 'do-not-release' ? 'node' : 'wait',
    };
  }

  /** The primary ENI, if it still holds published addresses the node does not keep for itself. */
  private primaryLeft(pool: ENIPool, answers: { verdict: (key: string) => string } | undefined): NetworkInterface[] {
    const primary = this.publishedPrimary(pool);
    return primary && keysOfPrimary(primary).some((key) => answers?.verdict(key) !== 'node') ? [primary] : [];
  }

  /**
   * The instance's primary ENI as far as this pool gave pods its addresses: the secondaries it
   * published (usePrimaryENI) that the ENI still holds. Its own primary address is the node's,
   * so it stands for nothing here; other secondaries are not the pool's.
   */
  private publishedPrimary(pool: ENIPool): NetworkInterface | undefined {
    const instanceId = pool.spec.instanceID;
    const eni = instanceId ? this.deps.cloud.enisOfInstance(instanceId).find((e) => e.type === 'Primary') : undefined;
    const shown = pool.status?.enis?.find((e) => e.id === eni?.id);
    if (!eni || !shown) return undefined;
    const of = (held: string[], published: string[] | undefined) => held.filter((k) => (published ?? []).includes(k));
    const given = {
      ...eni,
      primaryIp: '',
      // An IPv6-only pool gave pods none of its IPv4 (whatever an older status shows).
      secondaryIps: ipv6Only(pool.spec) ? [] : of(eni.secondaryIps, shown.ips),
      ipv4Prefixes: [],
      ipv6: of(eni.ipv6, shown.ipv6s),
      ipv6Prefixes: of(eni.ipv6Prefixes, shown.ipv6Prefixes),
    };
    return keysOfPrimary(given).length ? given : undefined;
  }

  /** Gives the primary ENI's published addresses back, both families (the ENI itself is the instance's). */
  private async unassignPrimary(pool: ENIPool, primary: NetworkInterface): Promise<void> {
    if (!this.deps.mayWrite()) return;
    const { cloud, ecs, events } = this.deps;
    const gone = new Set<string>();
    const inBatches = async (keys: string[], size: number, call: (batch: string[]) => Promise<void>) => {
      for (let i = 0; i < keys.length; i += size) {
        const batch = keys.slice(i, i + size);
        await call(batch).catch(unlessAlreadyUnassigned);
        batch.forEach((k) => gone.add(k));
      }
    };
    await inBatches(primary.secondaryIps, UNASSIGN_BATCH, (ips) => ecs.unassignPrivateIpAddresses(primary.id, ips));
    await inBatches(primary.ipv6, UNASSIGN_IPV6_BATCH, (ips) => ecs.unassignIpv6Addresses(primary.id, ips));
    await inBatches(primary.ipv6Prefixes, UNASSIGN_IPV6_PREFIX_BATCH, (p) => ecs.unassignIpv6Prefixes(primary.id, p));
    const now = cloud.get(primary.id);
    const kept = (keys: string[]) => keys.filter((k) => !gone.has(k));
    if (now)
      cloud.upsert({
        ...now,
        secondaryIps: kept(now.secondaryIps),
        ipv6: kept(now.ipv6),
        ipv6Prefixes: kept(now.ipv6Prefixes),
      });
    const counted = [
      [primary.secondaryIps.length, 'IPs'],
      [primary.ipv6.length, 'IPv6 addresses'],
      [primary.ipv6Prefixes.length, 'IPv6 /80 prefixes'],
    ] as const;
    const what = counted.filter(([n]) => n > 0).map(([n, kind]) => `${n} ${kind}`);
    const message = `pool ${pool.metadata.name} is deleted: unassigned its ${what.join(', ')} from the primary ENI ${primary.id}`;
    events.record(pool, 'Normal', 'ReleasedIPs', message);
  }

  private async letGo(pool: ENIPool): Promise<Result> {
    if (!this.deps.mayWrite()) return {};
    this.deps.memory.of(pool.metadata.name).resyncedForTeardown = false;
    const finalizers = (pool.metadata.finalizers ?? []).filter((f) => f !== FINALIZER);
    await this.deps.store.setFinalizers(pool.metadata.name, finalizers, pool.metadata.resourceVersion);
    return {};
  }
}
