import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { ENIPool } from '../../api/types.js';
import type { EcsApi, NetworkInterface } from '../../cloud/index.js';
import type { Logger } from '../../observability/logger.js';
import type { CloudState } from '../eni/cloud-state.js';
import type { NodeMemories } from './node-memory.js';
import type { RequestStamps } from './status.js';

/**
 * The narrow interfaces the pool reconciler works through. The operator gives it the real
 * ones (informers, the API server, the cloud-state cache, the ECS client, the ENI lifecycle);
 * the one-reconcile tests give it in-memory fakes of the same shapes.
 */

/** What a reconcile reads of the cluster: the informers' caches. */
export interface ClusterCache {
  pool(name: string): ENIPool | undefined;
  pools(): readonly ENIPool[];
  node(name: string): V1Node | undefined;
  /** Pods in phase Pending scheduled to this node (an index, not a scan). */
  pendingPodsOn(node: string): readonly V1Pod[];
  /** Pools whose spec names this instance (an index, not a scan). */
  poolsNaming(instanceId: string): readonly ENIPool[];
}

/** What a reconcile writes, or reads live, on the API server. */
export interface PoolStore {
  /** The pool as the API server has it now (not the cache); undefined when it is gone. */
  readPool(name: string): Promise<ENIPool | undefined>;
  /**
   * Sets the finalizers (refused with a 409 unless the pool is still at `resourceVersion`, when
   * given); answers the pool as written, undefined when it is gone.
   */
  setFinalizers(name: string, finalizers: string[], resourceVersion?: string): Promise<ENIPool | undefined>;
  /** A merge patch of the status, refused with a 409 unless the pool is still at this resourceVersion. */
  patchStatus(name: string, resourceVersion: string | undefined, patch: Record<string, unknown>): Promise<void>;
  /** Deletes the pool (already gone is fine). */
  deletePool(name: string): Promise<void>;
  /** Whether the Node exists on the API server (a live read; any error but 404 is thrown). */
  nodeExists(name: string): Promise<boolean>;
  /**
   * Removes the Node's taint at `index`, refused (422) unless the Node is still at
   * `resourceVersion`: a taint another writer added or took meanwhile is never lost.
   */
  removeTaint(name: string, resourceVersion: string, index: number): Promise<void>;
}

/** Events about a pool. */
export interface PoolEvents {
  record(pool: ENIPool, type: 'Normal' | 'Warning', reason: string, message: string): void;
}

/** The cloud as a reconcile knows it: the cloud-state cache, and the refreshes it asks of it. */
export type CloudView = Pick<
  CloudState,
  | 'get'
  | 'upsert'
  | 'enisOfInstance'
  | 'ownedBy'
  | 'vSwitches'
  | 'securityGroups'
  | 'instanceType'
  | 'blocked'
  | 'block'
  | 'knownVSwitches'
  | 'isFragmented'
  | 'fragment'
  | 'unfragment'
  | 'took'
  | 'resyncInstance'
>;

/** The cloud calls a reconcile makes itself (ENIs are created and deleted by the lifecycle). */
export type IpCalls = Pick<
  EcsApi,
  | 'assignPrivateIpAddresses'
  | 'unassignPrivateIpAddresses'
  | 'assignIpv4Prefixes'
  | 'unassignIpv4Prefixes'
  | 'assignIpv6Addresses'
  | 'unassignIpv6Addresses'
  | 'assignIpv6Prefixes'
  | 'unassignIpv6Prefixes'
  | 'describeInstances'
>;

/** The node's ENI work in flight, as planning reads it. */
export interface EniWorkInFlight {
  /** ENIs being created or attached, and the addresses they bring. */
  enis: number;
  ips: number;
  attaching: ReadonlySet<string>;
  removing: ReadonlySet<string>;
  /** ENIs this operator is removing or removed whose leaving the pool does not show yet. */
  removedByUs: ReadonlySet<string>;
  /** The ClientTokens of creates in flight: an ENI tagged with one is on its way (its create attaches it). */
  creating: ReadonlySet<string>;
}

/** The background life of ENIs: create and attach, attach, detach and delete, and what of it is in flight. */
export interface EniWork {
  /**
   * `ips` pod addresses; with `prefix`, as ips/16 /28 prefixes; `ipv6` IPv6 addresses and
   * `ipv6Prefixes` /80s beside them.
   */
  create(
    pool: ENIPool,
    vSwitchId: string,
    ips: number,
    securityGroupIds: string[],
    o?: { prefix?: boolean; ipv6?: number; ipv6Prefixes?: number },
  ): void;
  attach(pool: ENIPool, eni: NetworkInterface, o?: { alreadyAttaching?: boolean }): void;
  /** Deletes an emptied ENI in the background. */
  remove(pool: ENIPool, eni: NetworkInterface): void;
  /** Detaches (if attached) and deletes an ENI, and waits until it is gone. */
  deleteEni(pool: ENIPool, id: string): Promise<void>;
  /** The node's ENI work in flight (from the lifecycle's ledger), as planning reads it. */
  inFlight(node: string): EniWorkInFlight;
  /** The node's pool, as read for a plan, lists only these ENIs: our removals of the others are said. */
  listed(node: string, eniIds: readonly string[]): void;
  /** The node's pool is gone: what is recorded of its ENI work goes with it. */
  forget(node: string): void;
}

/** Whether the operator can plan on its picture of the cloud (see CloudHealth). */
export interface CloudHealthView {
  /** A full resync has succeeded since start: the cloud cache is a picture of the cloud. */
  readonly resynced: boolean;
  /** Why fleet-wide reads fail, while they do (a Degraded condition's reason and message). */
  outage(): { reason: string; message: string } | undefined;
}

/** What every part of the pool side works with: the ports, the nodes' memory, a logger and a clock. */
export interface PoolSide {
  cache: ClusterCache;
  store: PoolStore;
  cloud: CloudView;
  ecs: IpCalls;
  enis: EniWork;
  events: PoolEvents;
  health: CloudHealthView;
  memory: NodeMemories;
  logger: Logger;
  now: () => number;
  /** Whether this operator may still write what it knows (it leads on a fresh lease). */
  mayWrite: () => boolean;
  /** Names of release requests, unique for this operator. */
  stamps: RequestStamps;
}
